//! What a hostile client may try, one test per way, on both stores: connections that send nothing or
//! stop reading, and the connection cap. Each test fails on a kgate that lets the attempt hold what the
//! server shares (descriptors, memory) for longer than its bounds.

mod common;

use std::time::Duration;

use common::{closed_within, raw_tls, Backend, TestServer};
use futures::StreamExt;
use kgate::http::conn::Timeouts;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Deadlines short enough for a test.
const QUICK: Timeouts = Timeouts {
    handshake: Duration::from_secs(1),
    first_request: Duration::from_secs(1),
    idle: Duration::from_secs(2),
    stalled: Duration::from_secs(2),
};

async fn server(backend: Backend, max_connections: usize) -> TestServer {
    server_with(backend, max_connections, QUICK).await
}

async fn server_with(backend: Backend, max_connections: usize, timeouts: Timeouts) -> TestServer {
    let dir = tempfile::tempdir().unwrap();
    let prefix = format!("/t{}", uuid::Uuid::new_v4().simple());
    TestServer::start_configured(backend, dir, prefix, |c| {
        c.connections.timeouts = timeouts;
        c.connections.max = max_connections;
    })
    .await
}

/// Connections that say nothing (no TLS handshake; no HTTP/2 preface; no HTTP/1.1 request line; half a
/// request line) are closed by the first-request deadline, whatever protocol ALPN chose.
#[tokio::test]
async fn silent_connections_are_closed() {
    for backend in [Backend::Embedded, Backend::Etcd] {
        let s = server(backend, 100).await;
        let limit = Duration::from_secs(5);
        let mut tcp = tokio::net::TcpStream::connect(s.url.trim_start_matches("https://")).await.unwrap();
        let took = closed_within(&mut tcp, limit).await.expect("a connection without a handshake is closed");
        assert!(took >= Duration::from_millis(900), "{backend:?}: closed after {took:?}, before its deadline");
        for alpn in [&[&b"h2"[..]][..], &[b"http/1.1"], &[]] {
            let mut c = raw_tls(s.dir.path(), &s.url, alpn, None).await;
            let took = closed_within(&mut c, limit).await;
            assert!(
                took.is_some(),
                "{backend:?}: a silent connection with ALPN {alpn:?} is still open after {limit:?}"
            );
        }
        // A request line begun and never finished is no request either.
        let mut c = raw_tls(s.dir.path(), &s.url, &[b"http/1.1"], None).await;
        c.write_all(b"GET /version HTTP/1.1\r\nHost: x\r\n").await.unwrap();
        c.flush().await.unwrap();
        assert!(closed_within(&mut c, limit).await.is_some(), "{backend:?}: half a request holds its connection");
        // What a client that does ask gets is unchanged.
        let (code, v) = s.get("/version").await;
        assert_eq!((code.as_u16(), v["minor"].as_str()), (200, Some("33")));
        s.stop().await;
    }
}

/// A connection with nothing in flight is closed after the idle timeout, counted from its last answer.
#[tokio::test]
async fn idle_connections_are_closed_after_their_last_request() {
    for backend in [Backend::Embedded, Backend::Etcd] {
        let s = server(backend, 100).await;
        let mut c = raw_tls(s.dir.path(), &s.url, &[b"http/1.1"], None).await;
        c.write_all(b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
        c.flush().await.unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while !got.windows(7).any(|w| w == b"\"minor\"") {
            let n = c.read(&mut buf).await.unwrap();
            assert!(n > 0, "{backend:?}: closed before answering");
            got.extend_from_slice(&buf[..n]);
        }
        let started = std::time::Instant::now();
        assert!(closed_within(&mut c, Duration::from_secs(6)).await.is_some(), "{backend:?}: idle connection kept");
        let idle = started.elapsed();
        // Served before the first-request deadline, then idle: the idle timeout (2 s) is what closed it.
        assert!(idle >= Duration::from_millis(1500), "{backend:?}: closed {idle:?} after its answer");
        s.stop().await;
    }
}

/// At `--max-connections`, the connection idle longest makes room for a new one, so connections that say
/// nothing cannot hold every slot; only when every connection is busy is a new one closed at once (and
/// counted), and once one ends new clients get in again.
#[tokio::test]
async fn the_connection_cap_evicts_the_idle_and_refuses_when_all_are_busy() {
    for backend in [Backend::Embedded, Backend::Etcd] {
        // Deadlines long enough that only eviction closes the silent connection.
        let s = server_with(backend, 10, Timeouts::default()).await;
        let admin = common::admin_identity(s.dir.path());
        // Nine busy connections (watches) and one that says nothing.
        let mut busy = Vec::new();
        for _ in 0..9 {
            let mut c = raw_tls(s.dir.path(), &s.url, &[b"http/1.1"], Some(&admin)).await;
            open_watch(&mut c).await;
            busy.push(c);
        }
        let mut silent = raw_tls(s.dir.path(), &s.url, &[b"h2"], None).await;
        // An eleventh: the silent one goes to make room, and the newcomer is served.
        let mut newcomer = raw_tls(s.dir.path(), &s.url, &[b"http/1.1"], Some(&admin)).await;
        assert!(
            closed_within(&mut silent, Duration::from_millis(900)).await.is_some(),
            "{backend:?}: the idle one was kept"
        );
        open_watch(&mut newcomer).await;
        busy.push(newcomer);
        // Every connection busy: a new one is closed at once.
        let mut extra = tokio::net::TcpStream::connect(s.url.trim_start_matches("https://")).await.unwrap();
        let took = closed_within(&mut extra, Duration::from_secs(5)).await.expect("the extra connection is closed");
        assert!(took < Duration::from_millis(500), "{backend:?}: refused only after {took:?}");
        busy.pop();
        let fresh = common::clients(s.dir.path()).0;
        let r = fresh.get(format!("{}/version", s.url)).send().await.unwrap();
        assert_eq!(r.status(), 200, "{backend:?}: a new client gets in once a connection ends");
        assert!(s.metric("kgate_connections_refused_total").await >= 1.0);
        drop(busy);
        s.stop().await;
    }
}

/// Connections that never finish a TLS handshake (anyone can open them, with no credentials) make room
/// for each other at the cap: a client's idle connection stays, and new clients get in.
#[tokio::test]
async fn a_flood_of_handshakes_never_pushes_out_the_clients() {
    let backend = Backend::Embedded;
    let s = server_with(backend, 10, Timeouts::default()).await;
    let admin = common::admin_identity(s.dir.path());
    let mut client = raw_tls(s.dir.path(), &s.url, &[b"http/1.1"], Some(&admin)).await;
    version_on(&mut client).await;
    let addr = s.url.trim_start_matches("https://").to_string();
    let mut flood = Vec::new();
    for _ in 0..30 {
        flood.push(tokio::net::TcpStream::connect(&addr).await.unwrap());
        // Each is accepted in turn, so the eviction order is the order they came in.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The cap is full of handshakes that go nowhere; the client's idle connection is still served.
    version_on(&mut client).await;
    let fresh = common::clients(s.dir.path()).0;
    let r = fresh.get(format!("{}/version", s.url)).send().await.unwrap();
    assert_eq!(r.status(), 200, "a new client gets in past the flood");
    // The oldest of the flood made room; the newest is still waiting on its handshake.
    let mut oldest = flood.remove(0);
    assert!(closed_within(&mut oldest, Duration::from_secs(1)).await.is_some(), "the oldest handshake was kept");
    version_on(&mut client).await;
    s.stop().await;
}

/// `GET /version` on a raw HTTP/1.1 connection, read through to its answer.
async fn version_on(c: &mut tokio_rustls::client::TlsStream<tokio::net::TcpStream>) {
    c.write_all(b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    c.flush().await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.windows(7).any(|w| w == b"\"minor\"") || !got.ends_with(b"}\n") {
        let n = c.read(&mut buf).await.unwrap();
        assert!(n > 0, "the client's connection was closed");
        got.extend_from_slice(&buf[..n]);
    }
}

/// Open a watch of configmaps over HTTP/1.1 on a raw connection with a client certificate; returns once
/// its status line says 200, leaving the watch open.
async fn open_watch(c: &mut tokio_rustls::client::TlsStream<tokio::net::TcpStream>) {
    let req = b"GET /api/v1/namespaces/default/configmaps?watch=true HTTP/1.1\r\nHost: x\r\n\r\n";
    c.write_all(req).await.unwrap();
    c.flush().await.unwrap();
    let mut status = [0u8; 12];
    c.read_exact(&mut status).await.unwrap();
    assert_eq!(&status, b"HTTP/1.1 200");
}

/// A request over HTTP/1.1 on a raw connection with a bearer token; reads only its status line (so
/// nothing of the body is taken), returns the status code, or an error if the connection ended first.
async fn request_unread<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    c: &mut S,
    path: &str,
    token: &str,
) -> Result<u16, String> {
    let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n");
    c.write_all(req.as_bytes()).await.map_err(|e| e.to_string())?;
    // rustls may hold the record until flushed.
    c.flush().await.map_err(|e| e.to_string())?;
    let mut line = Vec::new();
    while !line.ends_with(b"\r\n") {
        let mut b = [0u8; 1];
        match c.read(&mut b).await {
            Ok(1) => line.push(b[0]),
            Ok(_) => return Err("closed before a status line".into()),
            Err(e) => return Err(e.to_string()),
        }
    }
    let line = String::from_utf8(line).unwrap();
    Ok(line.split(' ').nth(1).unwrap().parse().unwrap())
}

/// A 500 KiB ConfigMap.
fn big_configmap(name: &str) -> serde_json::Value {
    serde_json::json!({"metadata": {"name": name}, "data": {"blob": "x".repeat(500 * 1024)}})
}

/// One tenant opens watches and lists of its own large objects and never reads them. Watches and lists
/// hold references to the cached objects, never copies, charged to the tenant's budget of bytes in
/// flight: once it is spent the tenant is refused (429) while another tenant is served, and its stalled
/// connections are cut after the stall timeout, which gives the budget back.
#[tokio::test]
async fn a_tenant_that_never_reads_spends_only_its_own_budget() {
    for backend in [Backend::Embedded, Backend::Etcd] {
        let dir = tempfile::tempdir().unwrap();
        let prefix = format!("/t{}", uuid::Uuid::new_v4().simple());
        let s = TestServer::start_configured(backend, dir, prefix, |c| {
            // The first-request deadline far beyond the wait below: a stall is judged on its own clock,
            // not when the connection's earlier deadline falls due.
            c.connections.timeouts = Timeouts {
                stalled: Duration::from_secs(3),
                first_request: Duration::from_secs(60),
                ..Timeouts::default()
            };
            c.bytes = kgate::budget::Limits { server: 256 << 20, per_cluster: 8 << 20 };
        })
        .await;
        s.create_cluster("greedy").await;
        s.create_cluster("polite").await;
        let token = s.tenant_token("greedy", "attacker", "cluster-admin").await;
        let cms = "/api/v1/namespaces/default/configmaps";
        for i in 0..16 {
            let (code, b) = s.post(&format!("/clusters/greedy{cms}"), &big_configmap(&format!("big-{i}"))).await;
            assert_eq!(code, 201, "{b}");
        }
        let polite = |s: &TestServer| {
            let (url, client) = (s.url.clone(), s.client.clone());
            async move {
                let r = client.get(format!("{url}/clusters/polite{cms}")).send().await.unwrap();
                assert_eq!(r.status(), 200, "{backend:?}: the other tenant is refused");
                let name = uuid::Uuid::new_v4().simple().to_string();
                let body = serde_json::json!({"metadata": {"name": name}});
                let r = client.post(format!("{url}/clusters/polite{cms}")).json(&body).send().await.unwrap();
                assert_eq!(r.status(), 201, "{backend:?}: the other tenant's write is refused");
            }
        };
        // Watches from the beginning and lists, none ever read, until the tenant is refused.
        let paths = [format!("/clusters/greedy{cms}?watch=true&resourceVersion=0"), format!("/clusters/greedy{cms}")];
        let mut held = Vec::new();
        let mut refused = None;
        for i in 0..40 {
            let mut c = common::raw_tls_with(s.dir.path(), &s.url, &[b"http/1.1"], None, Some(4096)).await;
            match request_unread(&mut c, &paths[i % 2], &token).await.unwrap() {
                200 => held.push(c),
                429 => {
                    refused = Some(i);
                    break;
                }
                other => panic!("{backend:?}: {other}"),
            }
            polite(&s).await;
        }
        let refused = refused.unwrap_or_else(|| panic!("{backend:?}: 40 unread answers of 8 MiB and never refused"));
        assert!(refused >= 1, "{backend:?}: refused before anything was in flight");
        let in_flight = s.metric("kgate_response_bytes_in_flight").await;
        // At most the budget and the one answer admitted under it.
        assert!(in_flight <= 17.0 * 1024.0 * 1024.0, "{backend:?}: {in_flight} bytes in flight");
        polite(&s).await;
        // The stalled connections are cut, and their bytes given back.
        common::eventually(15, "stalled connections cut", || async {
            s.metric("kgate_connections_stalled_total").await >= held.len() as f64
        })
        .await;
        common::eventually(5, "the budget given back", || async {
            s.metric("kgate_response_bytes_in_flight").await < 1024.0 * 1024.0
        })
        .await;
        let mut c = common::raw_tls(s.dir.path(), &s.url, &[b"http/1.1"], None).await;
        assert_eq!(request_unread(&mut c, &paths[0], &token).await, Ok(200), "{backend:?}: the tenant is served again");
        drop((c, held));
        s.stop().await;
    }
}

/// The attack as it was found, in a kgate process of its own under a 1.5 GiB address-space limit (what
/// a container's memory limit does to it): one tenant holds 1,000 watches and 50 lists it never reads
/// over 24 MiB of its own objects, and floods writes of them. kgate stays up, and every request of
/// another tenant meanwhile succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kgate_outlives_a_tenant_that_never_reads_under_a_memory_limit() {
    // The test holds over a thousand connections.
    rlimit::increase_nofile_limit(u64::MAX).unwrap();
    for backend in [Backend::Embedded, Backend::Etcd] {
        let log = format!("kgate-hostile-memory-{backend:?}.log");
        let mut k = common::KgateProcess::start_on(backend, &log, Some(1536 << 20)).await;
        let admin = k.admin();
        for c in ["greedy", "polite"] {
            let lc = serde_json::json!({"apiVersion": "tenancy.kgate.dev/v1alpha1", "kind": "LogicalCluster", "metadata": {"name": c}});
            let r =
                admin.post(format!("{}/apis/tenancy.kgate.dev/v1alpha1/logicalclusters", k.url)).json(&lc).send().await;
            assert_eq!(r.unwrap().status(), 201);
            let url = format!("{}/clusters/{c}/api/v1/namespaces/default", k.url);
            common::eventually(30, "the cluster serves", || async {
                admin.get(&url).send().await.unwrap().status() == 200
            })
            .await;
        }
        let token = common::tenant_token(&admin, &k.url, "greedy", "attacker", "cluster-admin").await;
        let cms = "/api/v1/namespaces/default/configmaps";
        let greedy_cms = format!("{}/clusters/greedy{cms}", k.url);
        for i in 0..48 {
            let r = admin.post(&greedy_cms).json(&big_configmap(&format!("big-{i}"))).send().await.unwrap();
            assert_eq!(r.status(), 201);
        }
        let before = k.rss_kib();
        // 1,000 watches from the beginning and 50 lists, 25 connections at a time, none ever read.
        let dir = k.dir.path().to_path_buf();
        let opened = futures::stream::iter(0..1050)
            .map(|i| {
                let (dir, url, token) = (dir.clone(), k.url.clone(), token.clone());
                async move {
                    let path = if i < 1000 {
                        format!("/clusters/greedy{cms}?watch=true&resourceVersion=0")
                    } else {
                        format!("/clusters/greedy{cms}")
                    };
                    let mut c = common::raw_tls_with(&dir, &url, &[b"http/1.1"], None, Some(4096)).await;
                    let code = request_unread(&mut c, &path, &token).await;
                    (c, code)
                }
            })
            .buffer_unordered(25);
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        // The tenant floods writes of its large objects meanwhile.
        let flood = {
            let (client, url, token, stop) = (k.admin(), greedy_cms.clone(), token.clone(), stop.clone());
            tokio::spawn(async move {
                let mut i = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let body = big_configmap(&format!("big-{}", i % 48));
                    let _ = client.put(format!("{url}/big-{}", i % 48)).bearer_auth(&token).json(&body).send().await;
                    i += 1;
                }
                i
            })
        };
        // Another tenant, all along.
        let polite = {
            let (client, url, stop) = (k.admin(), format!("{}/clusters/polite{cms}", k.url), stop.clone());
            tokio::spawn(async move {
                let (mut ok, mut failed) = (0, Vec::new());
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let name = uuid::Uuid::new_v4().simple().to_string();
                    let created = client.post(&url).json(&serde_json::json!({"metadata": {"name": name}})).send().await;
                    let listed = client.get(&url).send().await;
                    for r in [created, listed] {
                        match r {
                            Ok(r) if r.status().is_success() => ok += 1,
                            Ok(r) => failed.push(r.status().to_string()),
                            Err(e) => failed.push(e.to_string()),
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                (ok, failed)
            })
        };
        let held: Vec<_> = opened.collect().await;
        let admitted = held.iter().filter(|(_, code)| *code == Ok(200)).count();
        let ended: Vec<_> = held.iter().filter_map(|(_, code)| code.as_ref().err()).collect();
        assert!(k.alive(), "{backend:?}: kgate died (see $TMPDIR/kgate-hostile-memory.log)");
        assert!(
            ended.is_empty(),
            "{backend:?}: {} connections ended without an answer: {:?}",
            ended.len(),
            ended.first()
        );
        let peak_rss = k.rss_kib();
        tokio::time::sleep(Duration::from_secs(10)).await;
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let writes = flood.await.unwrap();
        let (ok, failed) = polite.await.unwrap();
        let after = k.rss_kib();
        println!(
            "{backend:?}: {admitted} of 1050 unread answers admitted, {writes} writes of 500 KiB; RSS {} MiB before, {} MiB holding, {} MiB after; the other tenant: {ok} requests served",
            before / 1024,
            peak_rss / 1024,
            after / 1024
        );
        assert!(k.alive(), "{backend:?}: kgate died (see $TMPDIR/kgate-hostile-memory.log)");
        assert!(failed.is_empty(), "{backend:?}: the other tenant's requests failed: {failed:?}");
        assert!(ok > 50, "{backend:?}: the other tenant got {ok} requests through");
        drop(held);
    }
}

/// Small requests that once cost gigabytes or minutes: a JSON patch copying an array into itself, a
/// YAML alias bomb any identity may send, a strategic merge patch of 20,000 containers, an apply to an
/// object with 2,000 field managers and a protobuf Pod of 1.5 million empty containers. Each gets a 4xx
/// or a bounded result, kgate's memory hardly grows, and another client's `GET /version` is served
/// meanwhile. (Timings here are of the debug build the tests run; `cargo bench --bench hostile` prints
/// the release build's.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_cost_what_their_size_allows() {
    for backend in [Backend::Embedded, Backend::Etcd] {
        let k = common::KgateProcess::start_on(backend, &format!("kgate-hostile-cost-{backend:?}.log"), None).await;
        let costs = common::amplifying_requests(&k).await;
        for (what, c) in &costs {
            println!(
                "{backend:?} {what}: {} in {:?}, RSS +{} MiB, slowest GET /version meanwhile {:?}",
                c.status, c.took, c.rss_growth_mib, c.slowest_version
            );
        }
        for (what, c) in &costs {
            assert!(c.status < 500, "{backend:?} {what}: {}", c.status);
            // What these once cost was minutes; the debug build, with the other tests of this file
            // flooding the same two cores, takes 2-6 s for the slowest.
            assert!(c.took < Duration::from_secs(10), "{backend:?} {what}: took {:?}", c.took);
            assert!(c.rss_growth_mib < 100, "{backend:?} {what}: RSS grew {} MiB", c.rss_growth_mib);
            assert!(
                c.slowest_version < Duration::from_millis(500),
                "{backend:?} {what}: /version took {:?}",
                c.slowest_version
            );
        }
        assert_eq!(costs.iter().map(|(_, c)| c.status).collect::<Vec<_>>(), [422, 400, 413, 200, 400], "{backend:?}");
    }
}

/// A ServiceAccount that is `admin` of one namespace may grant there what it holds, and nothing more:
/// binding itself to `cluster-admin` or writing a Role with `*` on `*` is refused with kube-apiserver's
/// words, unless it may `bind` that role or `escalate` roles. `system:masters` may do anything, and
/// nobody may change a binding's roleRef.
#[tokio::test]
async fn rbac_grants_nothing_the_granter_does_not_hold() {
    for backend in [Backend::Embedded, Backend::Etcd] {
        let s = TestServer::start(backend).await;
        s.create_cluster("esc").await;
        let base = "/clusters/esc";
        let rbac = "/apis/rbac.authorization.k8s.io/v1";
        let (code, b) =
            s.post(&format!("{base}/api/v1/namespaces"), &serde_json::json!({"metadata": {"name": "team"}})).await;
        assert_eq!(code, 201, "{b}");
        let (code, b) = s
            .post(
                &format!("{base}/api/v1/namespaces/team/serviceaccounts"),
                &serde_json::json!({"metadata": {"name": "lead"}}),
            )
            .await;
        assert_eq!(code, 201, "{b}");
        let sa = serde_json::json!([{"kind": "ServiceAccount", "name": "lead", "namespace": "team"}]);
        let binding = |name: &str, kind: &str, role: &str| serde_json::json!({"metadata": {"name": name}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role}, "subjects": sa});
        let (code, b) = s
            .post(&format!("{base}{rbac}/namespaces/team/rolebindings"), &binding("lead-admin", "ClusterRole", "admin"))
            .await;
        assert_eq!(code, 201, "{b}");
        let (code, b) = s
            .post(
                &format!("{base}/api/v1/namespaces/team/serviceaccounts/lead/token"),
                &serde_json::json!({"spec": {}}),
            )
            .await;
        assert_eq!(code, 201, "{b}");
        let token = b["status"]["token"].as_str().unwrap().to_string();
        let auth = format!("Bearer {token}");
        let as_lead = |method: reqwest::Method, path: String, body: serde_json::Value| {
            let auth = auth.clone();
            let s = &s;
            async move {
                let body = Some(serde_json::to_vec(&body).unwrap());
                s.req_with(&s.anonymous, method, &path, Some("application/json"), body, &[("authorization", &auth)])
                    .await
            }
        };
        let sa_user = "system:serviceaccount:team:lead";
        let groups = r#"["system:serviceaccounts" "system:serviceaccounts:team" "system:authenticated"]"#;

        // Binding itself to cluster-admin: refused, naming what it lacks.
        let (code, b) = as_lead(
            reqwest::Method::POST,
            format!("{base}{rbac}/namespaces/team/rolebindings"),
            binding("up", "ClusterRole", "cluster-admin"),
        )
        .await;
        assert_eq!(code, 403, "{backend:?}: {b}");
        let message = b["message"].as_str().unwrap();
        assert!(
            message.starts_with(&format!("rolebindings.rbac.authorization.k8s.io \"up\" is forbidden: user \"{sa_user}\" (groups={groups}) is attempting to grant RBAC permissions not currently held:\n")),
            "{message}"
        );
        assert!(message.contains(r#"{APIGroups:["*"], Resources:["*"], Verbs:["*"]}"#), "{message}");
        assert_eq!((b["reason"].as_str(), b["details"]["kind"].as_str()), (Some("Forbidden"), Some("rolebindings")));
        // A Role with `*` on `*`: refused.
        let wildcard = serde_json::json!({"metadata": {"name": "all"}, "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]});
        let (code, b) =
            as_lead(reqwest::Method::POST, format!("{base}{rbac}/namespaces/team/roles"), wildcard.clone()).await;
        assert_eq!(code, 403, "{backend:?}: {b}");
        assert!(
            b["message"].as_str().unwrap().starts_with("roles.rbac.authorization.k8s.io \"all\" is forbidden: user"),
            "{b}"
        );
        // What it holds it may grant: a Role of its own rights and a binding to edit.
        let pods = serde_json::json!({"metadata": {"name": "pods"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]});
        let (code, b) = as_lead(reqwest::Method::POST, format!("{base}{rbac}/namespaces/team/roles"), pods).await;
        assert_eq!(code, 201, "{backend:?}: {b}");
        let (code, b) = as_lead(
            reqwest::Method::POST,
            format!("{base}{rbac}/namespaces/team/rolebindings"),
            binding("edit", "ClusterRole", "edit"),
        )
        .await;
        assert_eq!(code, 201, "{backend:?}: {b}");
        // Widening that Role by a patch: refused; nothing changed.
        let widen = serde_json::json!({"rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]});
        let path = format!("{base}{rbac}/namespaces/team/roles/pods");
        let (code, b) = s
            .req_with(
                &s.anonymous,
                reqwest::Method::PATCH,
                &path,
                Some("application/merge-patch+json"),
                Some(serde_json::to_vec(&widen).unwrap()),
                &[("authorization", &auth)],
            )
            .await;
        assert_eq!(code, 403, "{backend:?}: {b}");
        let (_, stored) = s.get(&path).await;
        assert_eq!(stored["rules"][0]["resources"], serde_json::json!(["pods"]));
        // A binding to a role that does not exist: 404, as from kube's rule resolver.
        let (code, _) = as_lead(
            reqwest::Method::POST,
            format!("{base}{rbac}/namespaces/team/rolebindings"),
            binding("ghost", "Role", "nope"),
        )
        .await;
        assert_eq!(code, 404, "{backend:?}");

        // Given `bind` on cluster-admin and `escalate` on roles (by the platform), both are allowed.
        let powers = serde_json::json!({"metadata": {"name": "powers"}, "rules": [
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["bind"], "resourceNames": ["cluster-admin"]},
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": ["escalate"]},
        ]});
        let (code, b) = s.post(&format!("{base}{rbac}/clusterroles"), &powers).await;
        assert_eq!(code, 201, "{b}");
        let (code, b) = s
            .post(&format!("{base}{rbac}/namespaces/team/rolebindings"), &binding("powers", "ClusterRole", "powers"))
            .await;
        assert_eq!(code, 201, "{b}");
        let (code, b) = as_lead(
            reqwest::Method::POST,
            format!("{base}{rbac}/namespaces/team/rolebindings"),
            binding("up", "ClusterRole", "cluster-admin"),
        )
        .await;
        assert_eq!(code, 201, "{backend:?}: {b}");
        let (code, b) = as_lead(reqwest::Method::POST, format!("{base}{rbac}/namespaces/team/roles"), wildcard).await;
        assert_eq!(code, 201, "{backend:?}: {b}");

        // An aggregated ClusterRole needs everything, even of someone allowed to create ClusterRoles.
        let (code, b) = s
            .post(
                &format!("{base}/api/v1/namespaces/team/serviceaccounts"),
                &serde_json::json!({"metadata": {"name": "roler"}}),
            )
            .await;
        assert_eq!(code, 201, "{b}");
        let roler = serde_json::json!({"metadata": {"name": "roler"}, "rules": [{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["create"]}]});
        assert_eq!(s.post(&format!("{base}{rbac}/clusterroles"), &roler).await.0, 201);
        let crb = serde_json::json!({"metadata": {"name": "roler"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "roler"}, "subjects": [{"kind": "ServiceAccount", "name": "roler", "namespace": "team"}]});
        assert_eq!(s.post(&format!("{base}{rbac}/clusterrolebindings"), &crb).await.0, 201);
        let (_, t) = s
            .post(
                &format!("{base}/api/v1/namespaces/team/serviceaccounts/roler/token"),
                &serde_json::json!({"spec": {}}),
            )
            .await;
        let roler_auth = format!("Bearer {}", t["status"]["token"].as_str().unwrap());
        let aggregated = serde_json::json!({"metadata": {"name": "gather"}, "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]}, "rules": []});
        let (code, b) = s
            .req_with(
                &s.anonymous,
                reqwest::Method::POST,
                &format!("{base}{rbac}/clusterroles"),
                Some("application/json"),
                Some(serde_json::to_vec(&aggregated).unwrap()),
                &[("authorization", &roler_auth)],
            )
            .await;
        assert_eq!(code, 403, "{backend:?}: {b}");
        assert_eq!(
            b["message"],
            "clusterroles.rbac.authorization.k8s.io \"gather\" is forbidden: must have cluster-admin privileges to use the aggregationRule"
        );
        // system:masters may; and nobody may change a binding's roleRef.
        assert_eq!(s.post(&format!("{base}{rbac}/clusterroles"), &aggregated).await.0, 201);
        let changed = binding("edit", "ClusterRole", "view");
        let (code, b) = s.put(&format!("{base}{rbac}/namespaces/team/rolebindings/edit"), &changed).await;
        assert_eq!(code, 422, "{backend:?}: {b}");
        s.stop().await;
    }
}

/// `kgate kubeconfig --role view` made after an admin one never carries admin's rights: each role has its
/// ServiceAccount; naming an account that holds more is refused; revoking ends the kubeconfig.
#[tokio::test]
async fn a_kubeconfig_carries_no_more_than_its_role() {
    for backend in [Backend::Embedded, Backend::Etcd] {
        let s = std::sync::Arc::new(TestServer::start(backend).await);
        s.create_cluster("roles").await;
        let t = s.clone();
        tokio::task::spawn_blocking(move || {
            let admin =
                t.kgate_kubeconfig(&["--cluster", "roles", "--role", "admin"], "roles-admin.kubeconfig").unwrap();
            let view = t.kgate_kubeconfig(&["--cluster", "roles", "--role", "view"], "roles-view.kubeconfig").unwrap();
            let can = |kc: &std::path::Path, args: &[&str]| common::kubectl(kc, args).1.trim().to_string();
            assert_eq!(can(&admin, &["auth", "can-i", "delete", "secrets", "-A"]), "yes", "{backend:?}");
            assert_eq!(can(&view, &["auth", "can-i", "delete", "secrets", "-A"]), "no", "{backend:?}");
            assert_eq!(can(&view, &["auth", "can-i", "list", "configmaps"]), "yes", "{backend:?}");
            let (ok, _, err) = common::kubectl(&view, &["create", "cm", "nope", "--from-literal=a=b"]);
            assert!(!ok && err.contains("forbidden"), "{backend:?}: {err}");
            // The admin account named for a view kubeconfig: refused, naming what it holds.
            let refused = t
                .kgate_kubeconfig(
                    &["--cluster", "roles", "--role", "view", "--service-account", "default/kgate-admin"],
                    "x",
                )
                .unwrap_err();
            assert!(refused.contains("already holds more than --role view: cluster-admin"), "{backend:?}: {refused}");
            // A kubeconfig of its own, and its revocation: the kubeconfig stops working at once.
            let own =
                t.kgate_kubeconfig(&["--cluster", "roles", "--role", "edit", "--unique"], "own.kubeconfig").unwrap();
            common::kubectl_ok(&own, &["create", "cm", "mine", "--from-literal=a=b"]);
            t.kgate_kubeconfig(&["--cluster", "roles", "--role", "view", "--revoke"], "revoked.txt").unwrap();
            let (ok, _, err) = common::kubectl(&view, &["get", "cm"]);
            assert!(!ok && err.contains("Unauthorized"), "{backend:?}: {err}");
            common::kubectl_ok(&own, &["get", "cm", "mine"]);
        })
        .await
        .unwrap();
        std::sync::Arc::try_unwrap(s).ok().expect("no other handle").stop().await;
    }
}

/// A token's account is read from the store once, not on every request (every tenant's kubeconfig
/// carries one); its deletion still ends the token: at once through the API, as the test above
/// shows, and within moments where this replica does not see the DELETE (another replica's, or one
/// straight in the store), through the store watch.
#[tokio::test]
async fn a_token_is_checked_against_the_store_once_and_ends_with_its_account() {
    for backend in [Backend::Embedded, Backend::Etcd] {
        let s = TestServer::start(backend).await;
        s.create_cluster("tc").await;
        let base = "/clusters/tc/api/v1/namespaces/default";
        let (code, b) =
            s.post(&format!("{base}/serviceaccounts"), &serde_json::json!({"metadata": {"name": "bot"}})).await;
        assert_eq!(code, 201, "{b}");
        let (code, b) = s.post(&format!("{base}/serviceaccounts/bot/token"), &serde_json::json!({"spec": {}})).await;
        assert_eq!(code, 201, "{b}");
        let auth = format!("Bearer {}", b["status"]["token"].as_str().unwrap());
        // A read the watch cache answers; the account may not make it (403 means it authenticated).
        let get = || {
            let (s, auth) = (&s, auth.clone());
            async move {
                let path = format!("{base}/configmaps?resourceVersion=0");
                s.req_with(&s.anonymous, reqwest::Method::GET, &path, None, None, &[("authorization", &auth)]).await.0
            }
        };
        let gets = || s.metric("kgate_store_request_duration_seconds_count{operation=\"get\"}");
        // The cluster's new account and token are still being counted and recorded on its
        // LogicalCluster (store reads too): counted reads start once those have settled.
        let mut before = gets().await;
        for _ in 0..10 {
            tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
            let now = gets().await;
            if now == before {
                break;
            }
            before = now;
        }
        assert!(before > 0.0, "{backend:?}: no store reads metered");
        // From the first check on, 10 s at most are trusted: the end below must come sooner.
        let checked = std::time::Instant::now();
        assert_eq!(get().await, 403, "{backend:?}");
        for _ in 0..20 {
            assert_eq!(get().await, 403, "{backend:?}");
        }
        let read = gets().await - before;
        assert!(read < 5.0, "{backend:?}: 21 requests with one token read the store {read} times");
        // Updates of the kinds a token rests on (a pod's status is written all day) end nothing.
        let mut read = 0.0;
        for i in 0..6 {
            let patch = serde_json::json!({"metadata": {"labels": {"round": i.to_string()}}});
            let (code, b) =
                s.patch(&format!("{base}/serviceaccounts/bot"), "application/merge-patch+json", &patch).await;
            assert_eq!(code, 200, "{b}");
            let before = gets().await;
            assert_eq!(get().await, 403, "{backend:?}");
            read += gets().await - before;
        }
        assert!(
            read < 3.0,
            "{backend:?}: a request after each of 6 updates of the account read the store {read} times"
        );
        // An update that deletes (the last finalizer taken off an account being deleted) ends the
        // token by the time it is answered, as a DELETE does; the account is kept until then.
        let held_sa = serde_json::json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}});
        let (code, b) = s.post(&format!("{base}/serviceaccounts"), &held_sa).await;
        assert_eq!(code, 201, "{b}");
        let (code, b) = s.post(&format!("{base}/serviceaccounts/held/token"), &serde_json::json!({"spec": {}})).await;
        assert_eq!(code, 201, "{b}");
        let held = format!("Bearer {}", b["status"]["token"].as_str().unwrap());
        let get_held = || {
            let (s, held) = (&s, held.clone());
            async move {
                let path = format!("{base}/configmaps?resourceVersion=0");
                s.req_with(&s.anonymous, reqwest::Method::GET, &path, None, None, &[("authorization", &held)]).await.0
            }
        };
        let (code, b) = s.delete(&format!("{base}/serviceaccounts/held")).await;
        assert_eq!(code, 200, "{b}");
        assert_eq!(get_held().await, 403, "{backend:?}: an account being deleted still authenticates, as in kube");
        let release = serde_json::json!([{"op": "remove", "path": "/metadata/finalizers"}]);
        let (code, b) = s.patch(&format!("{base}/serviceaccounts/held"), "application/json-patch+json", &release).await;
        assert_eq!(code, 200, "{b}");
        assert_eq!(get_held().await, 401, "{backend:?}: the account's last finalizer went and its token still worked");

        let store = s.running_store();
        let key = format!("{}/core/serviceaccounts/tc/default/bot", s.running_prefix());
        let kv = store.get(&key).await.unwrap().expect("the account is stored");
        store.delete(&key, Some(kv.mod_revision)).await.unwrap();
        common::eventually(5, "the token to end with its account", || async { get().await == 401 }).await;
        let took = checked.elapsed();
        assert!(took < std::time::Duration::from_secs(9), "{backend:?}: ended only with its time, {took:?}");
        s.stop().await;
    }
}

/// Tokens as kube binds them: to audiences (a token for `vault` does not log in to the API), to an
/// object that must exist (and whose deletion ends the token), with a typed, bounded lifetime; and a
/// TokenReview says so.
#[tokio::test]
async fn tokens_are_bound_to_audiences_and_objects() {
    for backend in [Backend::Embedded, Backend::Etcd] {
        let s = TestServer::start(backend).await;
        s.create_cluster("tok").await;
        let base = "/clusters/tok/api/v1/namespaces/default";
        let token_of = |spec: serde_json::Value| {
            let s = &s;
            async move { s.post(&format!("{base}/serviceaccounts/bot/token"), &serde_json::json!({"spec": spec})).await }
        };
        let (code, b) =
            s.post(&format!("{base}/serviceaccounts"), &serde_json::json!({"metadata": {"name": "bot"}})).await;
        assert_eq!(code, 201, "{b}");
        let get_as = |token: String| {
            let s = &s;
            async move {
                let auth = format!("bearer {token}");
                s.req_with(
                    &s.anonymous,
                    reqwest::Method::GET,
                    &format!("{base}/serviceaccounts/bot"),
                    None,
                    None,
                    &[("authorization", &auth)],
                )
                .await
                .0
            }
        };
        // The default: the API's audiences, echoed; a lower-case scheme is read as kube reads it. (The
        // account may not read itself: 403 means it authenticated.)
        let (code, b) = token_of(serde_json::json!({})).await;
        assert_eq!(code, 201, "{b}");
        assert_eq!(b["spec"]["audiences"], serde_json::json!(["https://kubernetes.default.svc", "kgate"]));
        let api_token = b["status"]["token"].as_str().unwrap().to_string();
        assert_eq!(get_as(api_token.clone()).await, 403, "{backend:?}");
        // For another audience: not for the API.
        let (_, b) = token_of(serde_json::json!({"audiences": ["vault"]})).await;
        let vault_token = b["status"]["token"].as_str().unwrap().to_string();
        assert_eq!(get_as(vault_token.clone()).await, 401, "{backend:?}");
        // Bound to a Pod: it must exist, and the token dies with it.
        let pod_ref = serde_json::json!({"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "p"}});
        let (code, b) = token_of(pod_ref.clone()).await;
        assert_eq!((code.as_u16(), b["message"].as_str()), (404, Some("pods \"p\" not found")), "{backend:?}");
        // A Pod running as another account (here `default`) takes no token of this one.
        let other =
            serde_json::json!({"metadata": {"name": "other"}, "spec": {"containers": [{"name": "c", "image": "x"}]}});
        assert_eq!(s.post(&format!("{base}/pods"), &other).await.0, 201);
        let (code, b) =
            token_of(serde_json::json!({"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "other"}})).await;
        assert_eq!(code, 400, "{backend:?}: {b}");
        let pod = serde_json::json!({"metadata": {"name": "p"}, "spec": {"serviceAccountName": "bot", "containers": [{"name": "c", "image": "x"}]}});
        let (code, b) = s.post(&format!("{base}/pods"), &pod).await;
        assert_eq!(code, 201, "{b}");
        let (code, b) = token_of(serde_json::json!({"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "p", "uid": "not-its-uid"}})).await;
        assert_eq!(code, 409, "{backend:?}: {b}");
        let (code, b) = token_of(pod_ref).await;
        assert_eq!(code, 201, "{b}");
        let pod_token = b["status"]["token"].as_str().unwrap().to_string();
        assert_eq!(get_as(pod_token.clone()).await, 403, "{backend:?}");
        let (code, _) =
            s.req(reqwest::Method::DELETE, &format!("{base}/pods/p?gracePeriodSeconds=0"), None, None).await;
        assert!(code.is_success());
        assert_eq!(get_as(pod_token).await, 401, "{backend:?}: a token bound to a deleted Pod");
        // expirationSeconds is an integer of at least 600 seconds.
        let (code, b) = token_of(serde_json::json!({"expirationSeconds": "600"})).await;
        assert_eq!(code, 400, "{backend:?}: {b}");
        assert!(b["message"].as_str().unwrap().contains(
            "cannot unmarshal string into Go struct field TokenRequestSpec.spec.expirationSeconds of type int64"
        ));
        assert_eq!(token_of(serde_json::json!({"expirationSeconds": 600.5})).await.0, 400, "{backend:?}");
        let (code, b) = token_of(serde_json::json!({"expirationSeconds": 599})).await;
        assert_eq!(code, 422, "{backend:?}: {b}");
        // TokenReview, as system:auth-delegator may send it: who, and for which audiences.
        let review = |token: &str, audiences: serde_json::Value| {
            let s = &s;
            let body = serde_json::json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token, "audiences": audiences}});
            async move { s.post("/clusters/tok/apis/authentication.k8s.io/v1/tokenreviews", &body).await }
        };
        let (code, b) = review(&api_token, serde_json::json!([])).await;
        assert_eq!(code, 201, "{b}");
        assert_eq!(b["status"]["authenticated"], true);
        assert_eq!(b["status"]["user"]["username"], "system:serviceaccount:default:bot");
        assert_eq!(b["status"]["audiences"], serde_json::json!(["https://kubernetes.default.svc", "kgate"]));
        let (_, b) = review(&vault_token, serde_json::json!(["vault"])).await;
        assert_eq!(
            (b["status"]["authenticated"].as_bool(), &b["status"]["audiences"]),
            (Some(true), &serde_json::json!(["vault"]))
        );
        let (_, b) = review(&vault_token, serde_json::json!([])).await;
        assert!(b["status"]["authenticated"].is_null(), "{b}");
        assert!(b["status"]["error"].as_str().unwrap().contains("is invalid for the target audiences"), "{b}");
        s.stop().await;
    }
}

/// Answers that were wrong but safe are kube's now: a patch moving an object to another namespace or
/// giving it another uid, duplicate JSON fields under fieldValidation=Strict (a warning otherwise), and
/// several Impersonate-User headers (the first counts).
#[tokio::test]
async fn wrong_but_safe_answers_are_kubes() {
    for backend in [Backend::Embedded, Backend::Etcd] {
        let s = TestServer::start(backend).await;
        let cms = "/api/v1/namespaces/default/configmaps";
        let (code, _) = s.post(cms, &serde_json::json!({"metadata": {"name": "c"}})).await;
        assert_eq!(code, 201);
        let merge = "application/merge-patch+json";
        let (code, b) =
            s.patch(&format!("{cms}/c"), merge, &serde_json::json!({"metadata": {"namespace": "kube-system"}})).await;
        assert_eq!(
            (code.as_u16(), b["message"].as_str()),
            (400, Some("the namespace of the provided object does not match the namespace sent on the request")),
            "{backend:?}"
        );
        let (code, b) = s.patch(&format!("{cms}/c"), merge, &serde_json::json!({"metadata": {"uid": "another"}})).await;
        assert_eq!(code, 422, "{backend:?}: {b}");
        assert!(
            b["message"].as_str().unwrap().ends_with("metadata.uid: Invalid value: \"another\": field is immutable"),
            "{b}"
        );
        let apply =
            br#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "kube-system"}}"#;
        let (code, _) = s
            .req(
                reqwest::Method::PATCH,
                &format!("{cms}/c?fieldManager=m"),
                Some("application/apply-patch+yaml"),
                Some(apply.to_vec()),
            )
            .await;
        assert_eq!(code, 400, "{backend:?}");
        // Duplicate fields: refused under Strict (kubectl's default), a warning under the server's default.
        let dup = br#"{"metadata": {"name": "d", "name": "e"}, "data": {"a": "1"}}"#.to_vec();
        let (code, b) = s
            .req(
                reqwest::Method::POST,
                &format!("{cms}?fieldValidation=Strict"),
                Some("application/json"),
                Some(dup.clone()),
            )
            .await;
        assert_eq!(code, 400, "{backend:?}: {b}");
        assert_eq!(b["message"], "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: duplicate field \"metadata.name\"");
        let r = s
            .client
            .post(format!("{}{cms}", s.url))
            .header("content-type", "application/json")
            .body(dup)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
        assert_eq!(r.headers()["warning"], "299 - \"duplicate field \\\"metadata.name\\\"\"");
        assert_eq!(r.json::<serde_json::Value>().await.unwrap()["metadata"]["name"], "e", "the last value wins");
        // A body of nothing but repeated keys: kube's first hundred duplicates, and warnings of at most
        // about 4 KiB in all (kube-apiserver's recorder), not a header per key.
        let keys: String = (0..5000).map(|i| format!("\"{:040}\":\"1\",", i % 1000)).collect();
        let many = format!("{{\"metadata\": {{\"name\": \"f\"}}, \"data\": {{{keys}\"z\": \"1\"}}}}");
        let r = s
            .client
            .post(format!("{}{cms}", s.url))
            .header("content-type", "application/json")
            .body(many)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201, "{backend:?}");
        let warnings: Vec<usize> = r.headers().get_all("warning").iter().map(|w| w.len()).collect();
        assert!((1..100).contains(&warnings.len()), "{backend:?}: {} warnings", warnings.len());
        assert!(warnings.iter().sum::<usize>() < 6 * 1024, "{backend:?}: {warnings:?}");
        // Several Impersonate-User headers: the first.
        let review = serde_json::to_vec(
            &serde_json::json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}),
        )
        .unwrap();
        let r = s
            .client
            .post(format!("{}/apis/authentication.k8s.io/v1/selfsubjectreviews", s.url))
            .header("content-type", "application/json")
            .header("impersonate-user", "alice")
            .header("impersonate-user", "bob")
            .body(review)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
        assert_eq!(
            r.json::<serde_json::Value>().await.unwrap()["status"]["userInfo"]["username"],
            "alice",
            "{backend:?}"
        );
        s.stop().await;
    }
}

/// A JSON patch copying a value into itself doubles its depth with each copy; seventeen would nest it
/// 131,072 levels deep, past any stack that clones or drops it. It is refused, and the server, every
/// tenant's, answers on.
#[tokio::test]
async fn a_patch_that_nests_without_end_is_refused_and_the_server_lives() {
    let s = TestServer::start(Backend::Embedded).await;
    let cm = "/api/v1/namespaces/default/configmaps";
    let (code, b) = s.post(cm, &serde_json::json!({"metadata": {"name": "deep"}})).await;
    assert_eq!(code, 201, "{b}");
    let mut ops = vec![
        serde_json::json!({"op": "add", "path": "/metadata/annotations", "value": {}}),
        serde_json::json!({"op": "add", "path": "/x", "value": {}}),
    ];
    for k in 0..17 {
        ops.push(serde_json::json!({"op": "copy", "from": "/x", "path": format!("/x{}", "/a".repeat(1 << k))}));
    }
    let (code, b) = s.patch(&format!("{cm}/deep"), "application/json-patch+json", &serde_json::Value::Array(ops)).await;
    assert!(code.is_client_error(), "{code}: {b}");
    assert!(b["message"].as_str().unwrap_or_default().contains("more than 127 levels deep"), "{b}");
    let (code, v) = s.get("/version").await;
    assert_eq!((code.as_u16(), v["minor"].as_str()), (200, Some("33")));
    let (code, b) = s.get(&format!("{cm}/deep")).await;
    assert_eq!(code, 200, "{b}");
    assert!(b.get("x").is_none(), "nothing of the patch was stored: {b}");
    s.stop().await;
}

/// A small patch of a large object costs what the object does (decoding, merging, checking and encoding
/// it): it runs off the async workers with the large writes, never on the workers every tenant's
/// requests and watches share.
#[tokio::test]
async fn a_small_patch_of_a_large_object_runs_with_the_heavy_writes() {
    let s = TestServer::start(Backend::Embedded).await;
    let cm = "/api/v1/namespaces/default/configmaps";
    let heavy = || s.metric("kgate_heavy_requests_total");
    let (code, b) = s.post(cm, &big_configmap("big")).await;
    assert_eq!(code, 201, "{b}");
    assert_eq!(heavy().await, 1.0, "the large create");
    // The type's watch cache is running (as it is once anyone lists or watches it).
    assert_eq!(s.get(&format!("{cm}?resourceVersion=0")).await.0, 200);
    let merge = "application/merge-patch+json";
    let small = serde_json::json!({"metadata": {"labels": {"a": "b"}}});
    let (code, b) = s.patch(&format!("{cm}/big"), merge, &small).await;
    assert_eq!((code.as_u16(), &b["metadata"]["labels"]["a"]), (200, &serde_json::json!("b")), "{b}");
    assert_eq!(heavy().await, 2.0, "the small patch of the large object");
    let (code, b) = s.post(cm, &serde_json::json!({"metadata": {"name": "small"}})).await;
    assert_eq!(code, 201, "{b}");
    let (code, b) = s.patch(&format!("{cm}/small"), merge, &small).await;
    assert_eq!(code, 200, "{b}");
    assert_eq!(heavy().await, 2.0, "small writes of small objects stay where they are");
    s.stop().await;
}

/// Requests of one cluster that miss its RBAC index together share one build of it: a tenant whose
/// RBAC objects are too many to cache would otherwise have each of its requests read them all from
/// the shared store, as many at once as it has requests in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_missing_a_clusters_rbac_index_together_build_it_once() {
    let s = TestServer::start(Backend::Etcd).await;
    s.create_cluster("rb").await;
    let token = s.tenant_token("rb", "reader", "view").await;
    let auth = format!("Bearer {token}");
    let path = "/clusters/rb/api/v1/namespaces/default/configmaps?resourceVersion=0";
    let headers = [("authorization", auth.as_str())];
    let get = || s.req_with(&s.anonymous, reqwest::Method::GET, path, None, None, &headers);
    assert_eq!(get().await.0, 200);
    let ranges = || s.metric("kgate_store_request_duration_seconds_count{operation=\"range\"}");
    for round in 0..3 {
        // A write to the cluster's RBAC drops its index on every replica.
        let role = serde_json::json!({"metadata": {"name": format!("r{round}")}, "rules": []});
        let (code, b) = s.post("/clusters/rb/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles", &role).await;
        assert_eq!(code, 201, "{b}");
        tokio::time::sleep(Duration::from_millis(700)).await;
        let before = ranges().await;
        let answers = futures::future::join_all((0..40).map(|_| get())).await;
        assert!(answers.iter().all(|(code, _)| *code == 200), "{:?}", answers.iter().map(|a| a.0).collect::<Vec<_>>());
        let read = ranges().await - before;
        // Four ranges (one per RBAC kind) a build; another may follow a late invalidation.
        assert!(read <= 8.0, "round {round}: 40 requests missing the index together made {read} store ranges");
    }
    s.stop().await;
}
