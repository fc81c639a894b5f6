"""The Python `kubernetes` client (typed API and DynamicClient) against a running kgate.

Run by tests/clients.rs with KGATE_KUBECONFIG (root admin), KGATE_CLUSTER (a second logical cluster)
and KGATE_URL set. Exits non-zero with a message on the first failed expectation.
"""
import os
import sys

from kubernetes import client, config, watch
from kubernetes.dynamic import DynamicClient
from kubernetes.client.rest import ApiException


def api_client(cluster=None, header=False):
    cfg = client.Configuration()
    config.load_kube_config(config_file=os.environ["KGATE_KUBECONFIG"], client_configuration=cfg)
    if cluster and not header:
        cfg.host = f"{os.environ['KGATE_URL']}/clusters/{cluster}"
    api = client.ApiClient(cfg)
    if cluster and header:
        api.set_default_header("X-Kubernetes-Cluster", cluster)
    return api


def check(cond, msg):
    if not cond:
        print(f"FAILED: {msg}", file=sys.stderr)
        sys.exit(1)


def exercise(api, label):
    core = client.CoreV1Api(api)
    name = "py-" + label
    core.create_namespaced_config_map("default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name, labels={"from": "python"}), data={"who": label}))
    got = core.read_namespaced_config_map(name, "default")
    check(got.data["who"] == label, f"{label}: read back")
    check(got.metadata.annotations["kgate.dev/cluster"] == label_cluster(label), f"{label}: cluster annotation")
    core.patch_namespaced_config_map(name, "default", {"data": {"patched": "yes"}})
    check(core.read_namespaced_config_map(name, "default").data["patched"] == "yes", f"{label}: strategic patch")
    try:
        core.read_namespaced_config_map("does-not-exist", "default")
        check(False, "404 expected")
    except ApiException as e:
        check(e.status == 404, f"{label}: 404 status")

    dyn = DynamicClient(api)
    cms = dyn.resources.get(api_version="v1", kind="ConfigMap")
    listed = cms.get(namespace="default", label_selector="from=python")
    check([i.metadata.name for i in listed.items] == [name], f"{label}: dynamic list with selector")
    deploys = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    body = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "dyn"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}},
                     "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}
    deploys.create(body=body, namespace="default")
    applied = deploys.server_side_apply(body={**body, "spec": {**body["spec"], "replicas": 3}}, namespace="default", field_manager="py", force_conflicts=True)
    check(applied.spec.replicas == 3, f"{label}: server-side apply")
    events = []
    rv = cms.get(namespace="default").metadata.resourceVersion
    core.create_namespaced_config_map("default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name + "-w")))
    for ev in watch.Watch().stream(core.list_namespaced_config_map, "default", resource_version=rv, timeout_seconds=2):
        events.append((ev["type"], ev["object"].metadata.name))
    check(("ADDED", name + "-w") in events, f"{label}: watch from resourceVersion saw the create: {events}")
    cms.delete(namespace="default", label_selector="from=python")
    check(cms.get(namespace="default", label_selector="from=python").items == [], f"{label}: delete collection")


def custom_resources(cluster):
    """A CRD made through the DynamicClient serves its kind in that cluster, and not in root."""
    dyn = DynamicClient(api_client(cluster))
    crds = dyn.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    crds.create(body={
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"plural": "gadgets", "kind": "Gadget"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                     "type": "object", "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]}})
    # A new client discovers the new kind, as a controller started after the CRD would.
    gadgets = DynamicClient(api_client(cluster)).resources.get(api_version="example.com/v1", kind="Gadget")
    gadgets.create(body={"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g1"}, "spec": {"size": 2}}, namespace="default")
    gadgets.patch(name="g1", namespace="default", body={"spec": {"size": 3}}, content_type="application/merge-patch+json")
    got = gadgets.get(name="g1", namespace="default")
    check(got.spec.size == 3 and got.metadata.annotations["kgate.dev/cluster"] == cluster, f"custom resource read back: {got}")
    try:
        DynamicClient(api_client()).resources.get(api_version="example.com/v1", kind="Gadget")
        check(False, "root must not serve another cluster's CRD")
    except Exception as e:
        check(type(e).__name__ == "ResourceNotFoundError", f"root: {e!r}")


def typed_answers(api):
    """The typed models (pydantic, strict) must take every answer: Go's zero values present, a deleted
    Service answered as a Service, the cluster's `default/kubernetes` Service readable."""
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    labels = {"app": "typed"}
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "typed"},
          "spec": {"selector": {"matchLabels": labels},
                   "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}
    apps.create_namespaced_daemon_set("default", ds)
    got = apps.read_namespaced_daemon_set("typed", "default")
    check(got.status.current_number_scheduled == 0 and got.status.number_misscheduled == 0, f"DaemonSet status zeros: {got.status}")
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "typed"}, "spec": {"ports": [{"port": 80}]}}
    core.create_namespaced_service("default", svc)
    deleted = core.delete_namespaced_service("typed", "default")
    check(deleted.metadata.name == "typed", f"delete answers the Service: {deleted}")
    kubernetes_svc = core.read_namespaced_service("kubernetes", "default")
    check(kubernetes_svc.spec.ports[0].port == 443, f"default/kubernetes: {kubernetes_svc.spec}")
    ca = core.read_namespaced_config_map("kube-root-ca.crt", "kube-public")
    check(ca.data["ca.crt"].startswith("-----BEGIN CERTIFICATE-----"), "kube-root-ca.crt holds the CA")
    apps.delete_namespaced_daemon_set("typed", "default")
    # autoscaling/v1 is kube's oldest autoscaler API and still what many charts create; v2 reads it.
    v1, v2 = client.AutoscalingV1Api(api), client.AutoscalingV2Api(api)
    hpa = {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "typed"},
           "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "typed"},
                    "maxReplicas": 4, "targetCPUUtilizationPercentage": 70}}
    v1.create_namespaced_horizontal_pod_autoscaler("default", hpa)
    got = v1.read_namespaced_horizontal_pod_autoscaler("typed", "default")
    check(got.spec.target_cpu_utilization_percentage == 70, f"autoscaling/v1 read: {got.spec}")
    as_v2 = v2.read_namespaced_horizontal_pod_autoscaler("typed", "default")
    check(as_v2.spec.metrics[0].resource.target.average_utilization == 70, f"autoscaling/v2 read: {as_v2.spec}")
    v1.delete_namespaced_horizontal_pod_autoscaler("typed", "default")


def typed_round_trips(api):
    """Every kind of tests/fixtures/kinds.json through the generated `*Api` classes: create, read,
    list, watch, patch, replace, delete, each answer decoded into the kind's model. All failures are
    reported together."""
    import base64
    import json
    import re
    import subprocess
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "fixtures", "kinds.json")) as f:
        fixtures = json.load(f)
    failed = []
    for obj in fixtures:
        group_version, kind = obj["apiVersion"], obj["kind"]
        group, _, version = group_version.rpartition("/")
        parts = group.replace(".k8s.io", "").split(".") if group else ["core"]
        api_class = getattr(client, "".join(p.capitalize() for p in parts) + version.capitalize() + "Api")(api)
        snake = re.sub("([a-z0-9])([A-Z])", r"\1_\2", re.sub("(.)([A-Z][a-z]+)", r"\1_\2", kind)).lower()
        namespaced = hasattr(api_class, f"create_namespaced_{snake}")
        scope = "namespaced_" if namespaced else ""
        verb = lambda v: getattr(api_class, f"{v}_{scope}{snake}")
        where = ["default"] if namespaced else []
        name = obj["metadata"]["name"]
        if obj.get("spec", {}).get("request") == "$REQUEST":
            key = subprocess.run(["openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                                  "-nodes", "-keyout", "/dev/null", "-subj", "/CN=typed"], capture_output=True, check=True)
            obj = {**obj, "spec": {**obj["spec"], "request": base64.b64encode(key.stdout).decode()}}
        step = "create"
        try:
            verb("create")(*where, obj)
            step = "read"
            check(verb("read")(name, *where).metadata.name == name, f"{kind}: read")
            step = "list"
            listed = verb("list")(*where)
            check(any(i.metadata.name == name for i in listed.items), f"{kind}: listed")
            step = "patch"
            patched = verb("patch")(name, *where, {"metadata": {"labels": {"typed": "patched"}}})
            step = "watch"
            seen = False
            for ev in watch.Watch().stream(verb("list"), *where, resource_version=listed.metadata.resource_version, timeout_seconds=5):
                if ev["type"] == "MODIFIED" and ev["object"].metadata.name == name:
                    seen = True
                    break
            check(seen, f"{kind}: the patch watched")
            step = "replace"
            patched.metadata.annotations = {**(patched.metadata.annotations or {}), "typed": "replaced"}
            replaced = verb("replace")(name, *where, patched)
            check(replaced.metadata.annotations["typed"] == "replaced", f"{kind}: replaced")
            step = "delete"
            verb("delete")(name, *where)
        except Exception as e:
            failed.append(f"{group_version} {kind}: {step}: {type(e).__name__}: {str(e)[:300]}")
    check(not failed, "typed round trips that failed:\n" + "\n".join(failed))


def label_cluster(label):
    return "root" if label == "root" else os.environ["KGATE_CLUSTER"]


def main():
    exercise(api_client(), "root")
    cluster = os.environ["KGATE_CLUSTER"]
    exercise(api_client(cluster), cluster)
    # By header instead of path: the object created through the path is visible, root's is not.
    core = client.CoreV1Api(api_client(cluster, header=True))
    names = [c.metadata.name for c in core.list_namespaced_config_map("default").items]
    check("py-root" not in names, f"header-addressed cluster does not see root's objects: {names}")
    core.create_namespaced_config_map("default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="by-header")))
    via_path = client.CoreV1Api(api_client(cluster)).read_namespaced_config_map("by-header", "default")
    check(via_path.metadata.annotations["kgate.dev/cluster"] == cluster, "header and path reach the same cluster")
    custom_resources(cluster)
    typed_answers(api_client(cluster))
    typed_round_trips(api_client(cluster))
    print("python clients: ok")


main()
