//! Crash safety: nothing acknowledged is lost when kgate is killed with SIGKILL mid-load (both
//! backends), and kgate serves again after etcd restarts underneath it, with watches resuming.

mod common;

use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Backend, TestEtcd, TestServer};
use serde_json::json;

struct Proc {
    child: Child,
    url: String,
}

fn spawn_kgate(dir: &std::path::Path, port: u16, etcd: Option<&str>, prefix: &str) -> Proc {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kgate"));
    // Run in the data dir: from the repository, `serve` would apply the example ./tenants at start.
    cmd.args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--data-dir"])
        .arg(dir)
        .args(["--etcd-prefix", prefix])
        .current_dir(dir);
    if let Some(e) = etcd {
        cmd.args(["--etcd-servers", e]);
    }
    let child = cmd.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "kgate did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    Proc { child, url: format!("https://127.0.0.1:{port}") }
}

async fn acknowledged_writes_survive_sigkill(etcd: Option<&str>) {
    let dir = tempfile::tempdir().unwrap();
    let port = common::free_port();
    let prefix = format!("/crash{}", uuid::Uuid::new_v4().simple());
    let mut p = spawn_kgate(dir.path(), port, etcd, &prefix);
    let (client, _) = common::clients(dir.path());
    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut writers = Vec::new();
    for w in 0..8 {
        let (client, acked, url) = (client.clone(), acked.clone(), p.url.clone());
        writers.push(tokio::spawn(async move {
            for i in 0.. {
                let name = format!("w{w}-{i}");
                let body = json!({"metadata": {"name": name}, "data": {"i": i.to_string()}});
                let r = client.post(format!("{url}/api/v1/namespaces/default/configmaps")).json(&body).send().await;
                match r {
                    Ok(resp) if resp.status() == 201 => acked.lock().unwrap().push(name),
                    _ => return,
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    p.child.kill().unwrap(); // SIGKILL
    p.child.wait().unwrap();
    for w in writers {
        let _ = w.await;
    }
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() > 20, "the load ran ({} writes)", acked.len());

    let mut p = spawn_kgate(dir.path(), port, etcd, &prefix);
    let mut missing = Vec::new();
    for name in &acked {
        let resp = client.get(format!("{}/api/v1/namespaces/default/configmaps/{name}", p.url)).send().await.unwrap();
        if resp.status() != 200 {
            missing.push(name.clone());
        }
    }
    assert!(missing.is_empty(), "{} of {} acknowledged writes lost: {missing:?}", missing.len(), acked.len());
    // Revisions keep growing after the restart.
    let resp = client
        .post(format!("{}/api/v1/namespaces/default/configmaps", p.url))
        .json(&json!({"metadata": {"name": "after"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    p.child.kill().unwrap();
    p.child.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkill_loses_no_acknowledged_write_embedded() {
    acknowledged_writes_survive_sigkill(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigkill_loses_no_acknowledged_write_etcd() {
    let etcd = common::shared_etcd().to_string();
    acknowledged_writes_survive_sigkill(Some(&etcd)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kgate_serves_again_after_etcd_restarts() {
    let mut etcd = TestEtcd::start();
    let dir = tempfile::tempdir().unwrap();
    let config = kgate::config::Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        data_dir: dir.path().to_path_buf(),
        etcd_servers: vec![etcd.endpoint.clone()],
        ..Default::default()
    };
    let running = kgate::server::start(config).await.unwrap();
    let (client, _) = common::clients(dir.path());
    let url = running.url.clone();
    let cms = format!("{url}/api/v1/namespaces/default/configmaps");
    assert_eq!(client.post(&cms).json(&json!({"metadata": {"name": "before"}})).send().await.unwrap().status(), 201);
    let list: serde_json::Value = client.get(&cms).send().await.unwrap().json().await.unwrap();
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    let watch = client.get(format!("{cms}?watch=true&resourceVersion={rv}")).send().await.unwrap();

    etcd.stop();
    // etcd is probed at most once a second, so readyz may answer the last probe for that long.
    let readyz = |want: u16| {
        let (client, url) = (client.clone(), url.clone());
        move || {
            let (client, url) = (client.clone(), url.clone());
            async move { client.get(format!("{url}/readyz")).send().await.unwrap().status() == want }
        }
    };
    common::eventually(10, "readyz to fail while the store is unreachable", readyz(500)).await;
    etcd.restart();

    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = client.post(&cms).json(&json!({"metadata": {"name": "after"}})).send().await.unwrap();
        if r.status() == 201 {
            break;
        }
        assert!(Instant::now() < deadline, "kgate did not recover: {}", r.status());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(client.get(format!("{cms}/before")).send().await.unwrap().status(), 200);
    common::eventually(10, "readyz to pass once the store is back", readyz(200)).await;

    // The watch opened before the restart resumes and delivers the write made after it.
    use futures::StreamExt;
    let mut stream = watch.bytes_stream();
    let mut buf = String::new();
    let found = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(Ok(chunk)) = stream.next().await {
            buf.push_str(&String::from_utf8_lossy(&chunk));
            if buf.contains("\"name\":\"after\"") {
                return true;
            }
        }
        false
    })
    .await
    .unwrap_or(false);
    assert!(found, "the watch resumed across the etcd restart: {buf}");
    let _ = running.shutdown.send(true);
    let _ = running.done.await;
}

#[tokio::test]
async fn graceful_shutdown_closes_watches() {
    let s = TestServer::start(Backend::Embedded).await;
    let watch = s.client.get(format!("{}/api/v1/configmaps?watch=true", s.url)).send().await.unwrap();
    let stop = tokio::spawn(s.stop());
    use futures::StreamExt;
    let mut stream = watch.bytes_stream();
    let ended =
        tokio::time::timeout(Duration::from_secs(10), async { while let Some(Ok(_)) = stream.next().await {} }).await;
    assert!(ended.is_ok(), "watch stream ends on shutdown");
    tokio::time::timeout(Duration::from_secs(10), stop).await.unwrap().unwrap();
}
