//! One set of controllers per fleet: three kgate replicas on one etcd elect one leader through the
//! `kube-system/kgate-controllers` Lease in root; logical clusters deleted through any replica are
//! purged by the leader; when the leader is killed (SIGKILL: it cannot give the lease up), another
//! takes the lease once it expires and the purges go on; a leader paused past its lease (SIGSTOP, as a
//! frozen VM) finds another holding it when it wakes, and leaves it so.

mod common;

use std::time::Duration;

use common::KgateProcess;
use serde_json::{json, Value};

const LEASE: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kgate-controllers";
const LCS: &str = "/apis/tenancy.kgate.dev/v1alpha1/logicalclusters";

/// The lease as one replica serves it.
async fn lease(k: &KgateProcess) -> Option<Value> {
    let r = k.admin().get(format!("{}{LEASE}", k.url)).send().await.ok()?;
    (r.status() == 200).then_some(())?;
    r.json().await.ok()
}

/// Which of `replicas` holds the lease (by the listen port its identity names).
fn holder(lease: &Value, replicas: &[&KgateProcess]) -> Option<usize> {
    let id = lease["spec"]["holderIdentity"].as_str()?;
    replicas.iter().position(|k| {
        let port = k.url.rsplit(':').next().unwrap();
        id.contains(&format!(":{port}_"))
    })
}

/// The replicas still running.
fn all(replicas: &[Option<KgateProcess>]) -> Vec<&KgateProcess> {
    replicas.iter().flatten().collect()
}

/// Create a logical cluster through `via`, delete it through `via`, and wait until it is purged.
async fn purged_through(via: &KgateProcess, name: &str) {
    let client = via.admin();
    let lc = json!({"apiVersion": "tenancy.kgate.dev/v1alpha1", "kind": "LogicalCluster", "metadata": {"name": name}});
    let r = client.post(format!("{}{LCS}", via.url)).json(&lc).send().await.unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    let r = client.delete(format!("{}{LCS}/{name}", via.url)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    common::eventually(40, &format!("{name} to be purged by the leader"), || {
        let (client, url) = (client.clone(), format!("{}{LCS}/{name}", via.url));
        async move { client.get(url).send().await.unwrap().status() == 404 }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_elect_one_leader_and_another_takes_over_when_it_dies() {
    let prefix = format!("/t{}", uuid::Uuid::new_v4().simple());
    let args = ["--etcd-servers", common::shared_etcd(), "--etcd-prefix", &prefix];
    let mut replicas = Vec::new();
    for i in 0..3 {
        replicas.push(Some(KgateProcess::start(&args, &format!("kgate-leader-{i}.log")).await));
    }
    let first = replicas[0].as_ref().unwrap();
    common::eventually(20, "a leader", || async {
        lease(first).await.is_some_and(|l| holder(&l, &all(&replicas)).is_some())
    })
    .await;
    let l = lease(first).await.unwrap();
    let leader = holder(&l, &all(&replicas)).unwrap();
    assert_eq!(l["spec"]["leaseDurationSeconds"], 15);
    // Every replica sees the same holder.
    for k in all(&replicas) {
        assert_eq!(lease(k).await.unwrap()["spec"]["holderIdentity"], l["spec"]["holderIdentity"]);
    }
    let follower = (leader + 1) % 3;
    purged_through(replicas[follower].as_ref().unwrap(), "gone-before").await;

    // Killed, the leader cannot give the lease up: a survivor takes it once it has expired.
    replicas[leader] = None;
    let survivor = replicas.iter().flatten().next().unwrap();
    let before = l["spec"]["holderIdentity"].clone();
    let started = std::time::Instant::now();
    common::eventually(40, "another replica to take the lease", || async {
        lease(survivor)
            .await
            .is_some_and(|l| l["spec"]["holderIdentity"] != before && holder(&l, &all(&replicas)).is_some())
    })
    .await;
    let taken = started.elapsed();
    assert!(taken >= Duration::from_secs(10), "not before the lease expired: {taken:?}");
    let l = lease(survivor).await.unwrap();
    assert!(l["spec"]["leaseTransitions"].as_i64().unwrap() >= 1, "{l}");
    purged_through(survivor, "gone-after").await;
}

/// A leader paused past its lease (SIGSTOP: a frozen VM, a stopped container) cannot renew; another
/// replica takes the lease once it expired, and the paused one, woken, finds its renew deadline long
/// passed: it stops leading and never takes the lease back from the new holder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_leader_wakes_to_find_another_leading() {
    let prefix = format!("/t{}", uuid::Uuid::new_v4().simple());
    let args = ["--etcd-servers", common::shared_etcd(), "--etcd-prefix", &prefix];
    let replicas = [
        KgateProcess::start(&args, "kgate-paused-0.log").await,
        KgateProcess::start(&args, "kgate-paused-1.log").await,
    ];
    let both: Vec<&KgateProcess> = replicas.iter().collect();
    common::eventually(20, "a leader", || async {
        lease(&replicas[0]).await.is_some_and(|l| holder(&l, &both).is_some())
    })
    .await;
    let l = lease(&replicas[0]).await.unwrap();
    let leader = holder(&l, &both).unwrap();
    let other = &replicas[1 - leader];
    replicas[leader].signal("STOP");
    common::eventually(40, "the other replica to take the lease", || async {
        lease(other).await.is_some_and(|l| holder(&l, &both) == Some(1 - leader))
    })
    .await;
    let taken = lease(other).await.unwrap();
    replicas[leader].signal("CONT");
    // Woken, the old leader serves again, and for three of its renewal periods the lease stays put.
    common::eventually(10, "the woken replica to serve", || async { lease(&replicas[leader]).await.is_some() }).await;
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = lease(other).await.unwrap();
        assert_eq!(now["spec"]["holderIdentity"], taken["spec"]["holderIdentity"], "{now}");
        assert_eq!(now["spec"]["leaseTransitions"], taken["spec"]["leaseTransitions"], "{now}");
    }
    // The new leader does the fleet's work.
    purged_through(&replicas[leader], "after-the-pause").await;
}
