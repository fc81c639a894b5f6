//! End to end with the real kubectl, against root and against a second logical cluster by URL path.

mod common;

use std::path::Path;

use common::{kubectl, kubectl_ok, kubectl_stdin, Backend, TestServer};

const DEPLOY_V1: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: app
        image: nginx:1.25
        ports: [{containerPort: 80}]
        env: [{name: A, value: "1"}, {name: B, value: "2"}]
      - name: sidecar
        image: busybox
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {mode: fast}
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80}]
"#;

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_string_lossy().into_owned()
}

/// The everyday kubectl workflow, in one logical cluster.
fn workflow(kc: &Path, dir: &Path, cluster: &str) {
    let f1 = write(dir, &format!("{cluster}-v1.yaml"), DEPLOY_V1);
    let out = kubectl_ok(kc, &["apply", "-f", &f1]);
    assert!(out.contains("deployment.apps/web created"), "{out}");

    // Re-apply with a changed container list: sidecar removed, image bumped, env var dropped.
    let v2 = DEPLOY_V1
        .replace("nginx:1.25", "nginx:1.26")
        .replace("\n      - name: sidecar\n        image: busybox", "")
        .replace(", {name: B, value: \"2\"}", "");
    let f2 = write(dir, &format!("{cluster}-v2.yaml"), &v2);
    let (_, diff, _) = kubectl(kc, &["diff", "-f", &f2]);
    assert!(diff.contains("+        image: nginx:1.26") && diff.contains("-      - image: busybox"), "{diff}");
    kubectl_ok(kc, &["apply", "-f", &f2]);
    let names = kubectl_ok(kc, &["get", "deploy", "web", "-o", "jsonpath={.spec.template.spec.containers[*].name}|{.spec.template.spec.containers[0].image}|{.spec.template.spec.containers[0].env[*].name}|{.metadata.generation}"]);
    assert_eq!(names, "app|nginx:1.26|A|2");
    let (ok, diff, _) = kubectl(kc, &["diff", "-f", &f2]);
    assert!(ok && diff.is_empty(), "no diff after apply: {diff}");
    let out = kubectl_ok(kc, &["apply", "-f", &f2]);
    assert!(out.contains("unchanged"), "re-apply is a no-op: {out}");

    // Tables, labels, patches of each type, scale.
    let table = kubectl_ok(kc, &["get", "deploy,cm,svc"]);
    assert!(table.contains("READY") && table.contains("web") && table.contains("settings"), "{table}");
    kubectl_ok(kc, &["label", "cm", "settings", "tier=gold"]);
    assert_eq!(kubectl_ok(kc, &["get", "cm", "-l", "tier=gold", "-o", "name"]).trim(), "configmap/settings");
    kubectl_ok(kc, &["patch", "cm", "settings", "-p", r#"{"data":{"smp":"1"}}"#]);
    kubectl_ok(kc, &["patch", "cm", "settings", "--type=merge", "-p", r#"{"data":{"merge":"1"}}"#]);
    kubectl_ok(
        kc,
        &["patch", "cm", "settings", "--type=json", "-p", r#"[{"op":"add","path":"/data/json","value":"1"}]"#],
    );
    kubectl_ok(
        kc,
        &[
            "patch",
            "deploy",
            "web",
            "-p",
            r#"{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"nginx:1.27"}]}}}}"#,
        ],
    );
    let data = kubectl_ok(kc, &["get", "cm", "settings", "-o", "jsonpath={.data.smp}{.data.merge}{.data.json}"]);
    assert_eq!(data, "111");
    assert_eq!(
        kubectl_ok(kc, &["get", "deploy", "web", "-o", "jsonpath={.spec.template.spec.containers[0].image}"]),
        "nginx:1.27"
    );
    kubectl_ok(kc, &["scale", "deploy", "web", "--replicas=5"]);
    assert_eq!(kubectl_ok(kc, &["get", "deploy", "web", "-o", "jsonpath={.spec.replicas}"]), "5");

    // replace after a get; then a stale replace conflicts.
    let live = kubectl_ok(kc, &["get", "cm", "settings", "-o", "yaml"]);
    let edited = write(dir, &format!("{cluster}-cm.yaml"), &live.replace("mode: fast", "mode: slow"));
    kubectl_ok(kc, &["replace", "-f", &edited]);
    let (ok, _, err) = kubectl(kc, &["replace", "-f", &edited]);
    assert!(!ok && err.contains("the object has been modified"), "{err}");

    // Typed creates send protobuf bodies.
    kubectl_ok(kc, &["create", "configmap", "lit", "--from-literal=k=v"]);
    assert_eq!(kubectl_ok(kc, &["get", "cm", "lit", "-o", "jsonpath={.data.k}"]), "v");
    kubectl_ok(kc, &["create", "secret", "generic", "s1", "--from-literal=pw=x"]);
    kubectl_ok(kc, &["create", "namespace", "extra"]);
    kubectl_ok(kc, &["create", "deployment", "d2", "--image=nginx", "--replicas=2", "-n", "extra"]);
    assert_eq!(kubectl_ok(kc, &["get", "deploy", "d2", "-n", "extra", "-o", "jsonpath={.spec.replicas}"]), "2");
    kubectl_ok(kc, &["create", "-f", &write(dir, &format!("{cluster}-job.yaml"), "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n      containers: [{name: c, image: busybox}]\n")]);
    let (ok, _, err) = kubectl(
        kc,
        &[
            "create",
            "-f",
            &write(
                dir,
                &format!("{cluster}-bad.yaml"),
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bad}\ndatta: {}\n",
            ),
        ],
    );
    assert!(!ok && err.contains("unknown field \"datta\""), "strict validation: {err}");

    // Files of kind List, such as what `kubectl get -o yaml` writes: kubectl validates them against
    // /openapi/v2 (a 404 there failed them all), and each item is still checked strictly by the server.
    let listed = kubectl_ok(kc, &["get", "cm", "settings", "lit", "-o", "yaml"]);
    assert!(listed.contains("kind: List"), "{listed}");
    let out = kubectl_ok(kc, &["apply", "-f", &write(dir, &format!("{cluster}-backup.yaml"), &listed)]);
    assert!(out.contains("configmap/settings configured") && out.contains("configmap/lit configured"), "{out}");
    let list = |item: &str| {
        format!("apiVersion: v1\nkind: List\nitems:\n- {{apiVersion: v1, kind: ConfigMap, metadata: {{name: l1}}, data: {{k: v}}}}\n- {item}\n")
    };
    let out = kubectl_ok(
        kc,
        &[
            "create",
            "-f",
            &write(
                dir,
                &format!("{cluster}-list.yaml"),
                &list("{apiVersion: v1, kind: ConfigMap, metadata: {name: l2}}"),
            ),
        ],
    );
    assert!(out.contains("configmap/l1 created") && out.contains("configmap/l2 created"), "{out}");
    let bad = list("{apiVersion: v1, kind: ConfigMap, metadata: {name: l3}, datta: {}}");
    let (ok, _, err) = kubectl(kc, &["create", "-f", &write(dir, &format!("{cluster}-badlist.yaml"), &bad)]);
    assert!(!ok && err.contains("unknown field \"datta\""), "strict validation of a List's items: {err}");
    assert!(!kubectl(kc, &["get", "cm", "l3"]).0, "the invalid item was not created");

    // Discovery-driven commands.
    let res = kubectl_ok(kc, &["api-resources"]);
    assert!(
        res.contains("deployments") && res.contains("leases") && res.contains("customresourcedefinitions"),
        "{res}"
    );
    let explain = kubectl_ok(kc, &["explain", "deployment.spec.template.spec.containers.image"]);
    assert!(explain.contains("image") && explain.contains("string"), "{explain}");
    assert_eq!(kubectl_ok(kc, &["auth", "can-i", "create", "deployments"]).trim(), "yes");
    assert!(kubectl_ok(kc, &["auth", "whoami"]).contains("system:masters"));

    // Delete waits for the object to go (informer watch on metadata.name), and wait --for=delete works.
    kubectl_ok(kc, &["delete", "deploy", "web"]);
    let (ok, out, _) = kubectl(kc, &["get", "deploy", "web"]);
    assert!(!ok, "{out}");
    kubectl_ok(kc, &["delete", "ns", "extra", "--wait=true", "--timeout=30s"]);
    kubectl_ok(kc, &["wait", "--for=delete", "namespace/extra", "--timeout=30s"]);
    kubectl_ok(kc, &["wait", "--for=jsonpath={.data.mode}=slow", "cm/settings", "--timeout=10s"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectl_workflow_in_root_and_in_a_second_cluster() {
    let s = TestServer::start(Backend::Embedded).await;
    let dir = s.dir.path().to_path_buf();
    let root = s.kubeconfig();
    let r = root.clone();
    let d = dir.clone();
    tokio::task::spawn_blocking(move || workflow(&r, &d, "root")).await.unwrap();

    let lc = "apiVersion: tenancy.kgate.dev/v1alpha1\nkind: LogicalCluster\nmetadata: {name: team-a}\n";
    let r = root.clone();
    tokio::task::spawn_blocking(move || {
        let (ok, out, err) = kubectl_stdin(&r, &["apply", "-f", "-"], Some(lc));
        assert!(ok, "{out}{err}");
        kubectl_ok(&r, &["wait", "--for=condition=Ready", "logicalcluster/team-a", "--timeout=10s"]);
    })
    .await
    .unwrap();
    let team = s.kubeconfig_for("team-a");
    let t = team.clone();
    tokio::task::spawn_blocking(move || workflow(&t, &dir, "team-a")).await.unwrap();

    // Same names in both clusters, each sees only its own.
    let (r, t) = (root.clone(), team.clone());
    tokio::task::spawn_blocking(move || {
        kubectl_ok(&r, &["create", "cm", "mine", "--from-literal=owner=root"]);
        kubectl_ok(&t, &["create", "cm", "mine", "--from-literal=owner=team-a"]);
        assert_eq!(kubectl_ok(&r, &["get", "cm", "mine", "-o", "jsonpath={.data.owner}"]), "root");
        assert_eq!(kubectl_ok(&t, &["get", "cm", "mine", "-o", "jsonpath={.data.owner}"]), "team-a");
        let (ok, _, err) = kubectl(&t, &["get", "logicalclusters"]);
        assert!(!ok && err.contains("doesn't have a resource type"), "{err}");
        // Wildcard listing for administrators, each row's cluster in the annotation.
        let raw = kubectl_ok(
            &r,
            &["get", "--raw", "/clusters/*/api/v1/namespaces/default/configmaps?fieldSelector=metadata.name%3Dmine"],
        );
        let v: serde_json::Value = serde_json::from_str(&raw).unwrap();
        let mut owners: Vec<&str> = v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["annotations"]["kgate.dev/cluster"].as_str().unwrap())
            .collect();
        owners.sort();
        assert_eq!(owners, vec!["root", "team-a"]);
    })
    .await
    .unwrap();
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectl_get_watch_prints_changes_in_one_cluster_and_across_all() {
    let s = TestServer::start(Backend::Embedded).await;
    s.create_cluster("watched-team").await;
    let kc = s.kubeconfig();
    let bin = common::require_binary("kubectl", "install kubectl");
    let home = s.dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let spawn = |kubeconfig: &std::path::Path, all: bool| {
        let mut args = vec!["get", "cm", "-w", "--request-timeout=0"];
        if all {
            args.push("-A");
        }
        std::process::Command::new(&bin)
            .args(args)
            .env("KUBECONFIG", kubeconfig)
            .env("HOME", &home)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let one = spawn(&kc, false);
    // An administrator's kubeconfig pointed at every cluster (`/clusters/*`).
    let every = spawn(&s.kubeconfig_for("*"), true);
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let (k2, team) = (kc.clone(), s.kubeconfig_for("watched-team"));
    tokio::task::spawn_blocking(move || {
        kubectl_ok(&k2, &["create", "cm", "watched"]);
        kubectl_ok(&k2, &["delete", "cm", "watched"]);
        kubectl_ok(&team, &["create", "cm", "watched-in-team"]);
    })
    .await
    .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1000)).await;
    let mut outputs = Vec::new();
    for child in [one, every] {
        let _ = std::process::Command::new("kill").arg(child.id().to_string()).status();
        outputs.push(String::from_utf8_lossy(&child.wait_with_output().unwrap().stdout).to_string());
    }
    let rows = |text: &str, name: &str| text.lines().filter(|l| l.split_whitespace().any(|w| w == name)).count();
    assert_eq!(rows(&outputs[0], "watched"), 2, "ADDED and DELETED rows: {}", outputs[0]);
    assert_eq!(rows(&outputs[0], "watched-in-team"), 0, "another cluster's object: {}", outputs[0]);
    assert_eq!(rows(&outputs[1], "watched"), 2, "wildcard watch: {}", outputs[1]);
    assert_eq!(rows(&outputs[1], "watched-in-team"), 1, "wildcard watch sees every cluster: {}", outputs[1]);
    s.stop().await;
}

const PLATFORM: &str = r#"
apiVersion: v1
kind: ResourceQuota
metadata: {name: compute}
spec: {hard: {pods: "10", limits.cpu: "4"}}
---
apiVersion: v1
kind: LimitRange
metadata: {name: defaults}
spec: {limits: [{type: Container, default: {cpu: 500m}}]}
---
apiVersion: v1
kind: Endpoints
metadata: {name: db}
subsets: [{addresses: [{ip: 10.1.2.3}], ports: [{port: 5432}]}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: db-1, labels: {kubernetes.io/service-name: db}}
addressType: IPv4
ports: [{name: pg, port: 5432}]
endpoints: [{addresses: [10.1.2.3]}]
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: nginx}
spec: {controller: k8s.io/ingress-nginx}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: batch-low}
value: -10
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: fast, annotations: {storageclass.kubernetes.io/is-default-class: "true"}}
provisioner: csi.example.com
"#;

/// What a platform team applies to each tenant's cluster (quotas, limit ranges, classes, endpoints of
/// an outside service) is served like kube-apiserver serves it: kubectl's columns, the defaults kube
/// fills in, and the default roles' rights over it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn platform_objects_apply_and_print_as_kubectl_expects() {
    let s = TestServer::start(Backend::Embedded).await;
    s.create_cluster("plat").await;
    let kc = s.kubeconfig_for("plat");
    let s = std::sync::Arc::new(s);
    let s2 = s.clone();
    tokio::task::spawn_blocking(move || {
        let (view, edit) = (s2.role_kubeconfig("plat", "viewer", "view"), s2.role_kubeconfig("plat", "editor", "edit"));
        let (ok, out, err) = kubectl_stdin(&kc, &["apply", "-f", "-"], Some(PLATFORM));
        assert!(ok, "{out}{err}");
        let resources = kubectl_ok(&kc, &["api-resources", "-o", "name"]);
        for r in [
            "resourcequotas",
            "limitranges",
            "endpoints",
            "endpointslices.discovery.k8s.io",
            "controllerrevisions.apps",
            "ingressclasses.networking.k8s.io",
            "priorityclasses.scheduling.k8s.io",
            "storageclasses.storage.k8s.io",
        ] {
            assert!(resources.lines().any(|l| l == r), "{r} missing from:\n{resources}");
        }
        let rows = |out: &str| -> Vec<Vec<String>> {
            out.lines().map(|l| l.split_whitespace().map(str::to_string).collect()).collect()
        };
        let quota = rows(&kubectl_ok(&kc, &["get", "quota"]));
        assert_eq!(quota[0], ["NAME", "AGE", "REQUEST", "LIMIT"]);
        assert_eq!(quota[1][0], "compute");
        let ep = rows(&kubectl_ok(&kc, &["get", "ep", "db"]));
        assert_eq!((ep[0][1].as_str(), ep[1][1].as_str()), ("ENDPOINTS", "10.1.2.3:5432"));
        let slice = rows(&kubectl_ok(&kc, &["get", "endpointslices"]));
        assert_eq!(slice[0], ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"]);
        assert_eq!(slice[1][..4], ["db-1", "IPv4", "5432", "10.1.2.3"]);
        let sc = rows(&kubectl_ok(&kc, &["get", "sc"]));
        assert_eq!(sc[1][..6], ["fast", "(default)", "csi.example.com", "Delete", "Immediate", "false"]);
        let pc = rows(&kubectl_ok(&kc, &["get", "pc", "batch-low"]));
        assert_eq!((pc[1][1].as_str(), pc[1][4].as_str()), ("-10", "PreemptLowerPriority"));
        let ing = rows(&kubectl_ok(&kc, &["get", "ingressclass"]));
        assert_eq!(ing[1][..3], ["nginx", "k8s.io/ingress-nginx", "<none>"]);
        // Defaults written on create, as kube-apiserver writes them.
        assert_eq!(kubectl_ok(&kc, &["get", "sc", "fast", "-o", "jsonpath={.volumeBindingMode}"]), "Immediate");
        assert_eq!(kubectl_ok(&kc, &["get", "ep", "db", "-o", "jsonpath={.subsets[0].ports[0].protocol}"]), "TCP");
        // And on every write, as kube decodes every object with them: a replace or a patch that leaves
        // them out gets them back.
        let class = PLATFORM.split("---").find(|d| d.contains("kind: StorageClass")).unwrap();
        let (ok, out, err) = kubectl_stdin(&kc, &["replace", "-f", "-"], Some(class));
        assert!(ok, "{out}{err}");
        let sc = kubectl_ok(&kc, &["get", "sc", "fast", "-o", "jsonpath={.reclaimPolicy}/{.volumeBindingMode}"]);
        assert_eq!(sc, "Delete/Immediate");
        let remove = r#"[{"op":"remove","path":"/preemptionPolicy"}]"#;
        kubectl_ok(&kc, &["patch", "pc", "batch-low", "--type=json", "-p", remove]);
        assert_eq!(
            kubectl_ok(&kc, &["get", "pc", "batch-low", "-o", "jsonpath={.preemptionPolicy}"]),
            "PreemptLowerPriority"
        );
        // Viewers read quotas, limits and endpoints; editors may not repoint a Service's endpoints.
        for r in ["resourcequotas", "limitranges", "endpoints", "endpointslices.discovery.k8s.io"] {
            assert!(kubectl(&view, &["get", r]).0, "view lists {r}");
        }
        for r in ["endpoints", "endpointslices.discovery.k8s.io", "resourcequotas"] {
            let (ok, out, err) = kubectl(&edit, &["auth", "can-i", "create", r]);
            assert!(!ok && out.trim() == "no", "edit can create {r}: {out}{err}");
        }
        assert_eq!(kubectl_ok(&edit, &["auth", "can-i", "create", "configmaps"]).trim(), "yes");
    })
    .await
    .unwrap();
    std::sync::Arc::try_unwrap(s).ok().expect("one handle").stop().await;
}

/// A Service reads back as from kube (address families, traffic policies, a node port), keeps what
/// was allocated through a `kubectl replace` of a manifest without it, refuses a new cluster address
/// as kube does, and loses its addresses when it becomes an ExternalName.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_keep_what_was_allocated_as_kube_does() {
    let s = TestServer::start(Backend::Embedded).await;
    let kc = s.kubeconfig();
    tokio::task::spawn_blocking(move || {
        kubectl_ok(&kc, &["create", "service", "nodeport", "np", "--tcp=80:8080"]);
        let get = |path: &str| kubectl_ok(&kc, &["get", "svc", "np", "-o", &format!("jsonpath={path}")]);
        let allocated = get("{.spec.clusterIP}|{.spec.ports[0].nodePort}");
        let (ip, node_port) = allocated.split_once('|').unwrap();
        assert!(ip.starts_with("10.96."), "{allocated}");
        assert!((30000..=32767).contains(&node_port.parse::<u32>().unwrap()), "{allocated}");
        assert_eq!(
            get("{.spec.ipFamilies}|{.spec.ipFamilyPolicy}|{.spec.externalTrafficPolicy}|{.spec.internalTrafficPolicy}"),
            r#"["IPv4"]|SingleStack|Cluster|Cluster"#
        );

        let manifest = "apiVersion: v1\nkind: Service\nmetadata: {name: np}\nspec:\n  type: NodePort\n  ports: [{name: 80-8080, port: 80, targetPort: 8080}]\n";
        let (ok, out, err) = kubectl_stdin(&kc, &["replace", "-f", "-"], Some(manifest));
        assert!(ok, "{out}{err}");
        assert_eq!(get("{.spec.clusterIP}|{.spec.ports[0].nodePort}"), allocated, "replace keeps what was allocated");
        // So does a server-side apply that stops naming the address it named before (the field leaves
        // the applier's set and would be removed), and the spec it leaves is the same one.
        let named = manifest.replace("type: NodePort", &format!("type: NodePort\n  clusterIP: {ip}"));
        let apply = |m: &str| kubectl_stdin(&kc, &["apply", "--server-side", "--force-conflicts", "-f", "-"], Some(m));
        let (ok, out, err) = apply(&named);
        assert!(ok, "{out}{err}");
        let generation = get("{.metadata.generation}");
        let (ok, out, err) = apply(manifest);
        assert!(ok, "{out}{err}");
        assert_eq!(get("{.spec.clusterIP}|{.spec.ports[0].nodePort}"), allocated, "apply keeps what was allocated");
        assert_eq!(get("{.metadata.generation}"), generation, "nothing in the spec changed");

        let (ok, _, err) =
            kubectl(&kc, &["patch", "svc", "np", "--type=merge", "-p", r#"{"spec":{"clusterIP":"10.96.0.99"}}"#]);
        assert!(
            !ok && err.contains(r#"spec.clusterIPs[0]: Invalid value: ["10.96.0.99"]: may not change once set"#),
            "{err}"
        );
        assert_eq!(get("{.spec.clusterIP}"), ip, "a refused write changes nothing");
        let moved = manifest.replace("type: NodePort", "type: NodePort\n  clusterIP: 10.96.0.99");
        let (ok, _, err) = kubectl_stdin(&kc, &["apply", "--server-side", "--force-conflicts", "-f", "-"], Some(&moved));
        assert!(!ok && err.contains("may not change once set"), "server-side apply is refused too: {err}");

        let external = r#"{"spec":{"type":"ExternalName","externalName":"db.example.com"}}"#;
        kubectl_ok(&kc, &["patch", "svc", "np", "--type=merge", "-p", external]);
        assert_eq!(get("{.spec.clusterIP}{.spec.clusterIPs}{.spec.ports[0].nodePort}{.spec.ipFamilies}"), "");
        assert_eq!(kubectl_ok(&kc, &["get", "svc", "np", "--no-headers"]).split_whitespace().nth(3), Some("db.example.com"));
    })
    .await
    .unwrap();
}
