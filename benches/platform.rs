//! What running kgate as a platform costs (issue 26's figure): creates and GETs at concurrency 64 on
//! ten tenant clusters, with per-cluster accounting and an audit log (the deploy kit's policy, which
//! writes every request here once at Metadata level, to a file) against a kgate with both off (`--usage-accounting=false`, no policy), as ratios in one
//! run (target: at most 10% slower), on the embedded store and on etcd; and the number of series root's
//! `/metrics` has with 10 active clusters and with 10,000 (target: the same bound).
//!
//! Run: `cargo bench --bench platform` (etcd from Debian's `etcd-server` for the etcd rows).

#[path = "../tests/common/mod.rs"]
mod common;

use common::{ops_per_second, Backend, KgateProcess};
use serde_json::json;

const CONC: usize = 64;
const CREATES: usize = 3_000;
const GETS: usize = 10_000;
const TENANTS: usize = 10;
const ROUNDS: usize = 3;

/// The policy the deploy kit installs: what a platform runs (ConfigMaps at Metadata, each request
/// written once, when it completes).
const POLICY: &str = include_str!("../deploy/kustomize/base/audit-policy.yaml");

/// What a kgate runs with.
#[derive(Clone, Copy, PartialEq)]
enum Setup {
    Bare,
    Accounting,
    Audit,
    Full,
}

/// A kgate on `backend` with `setup`, and the directory its audit log is written in (removed when
/// dropped: the log grows by tens of MiB a second).
async fn start(backend: Backend, setup: Setup, log: &str) -> (KgateProcess, tempfile::TempDir) {
    let prefix = format!("/b{}", uuid::Uuid::new_v4().simple());
    let mut args: Vec<String> = match backend {
        Backend::Embedded => vec![],
        Backend::Etcd => vec!["--etcd-servers".into(), common::shared_etcd().into(), "--etcd-prefix".into(), prefix],
    };
    let audit = tempfile::tempdir().unwrap();
    let dir = audit.path();
    if matches!(setup, Setup::Audit | Setup::Full) {
        std::fs::write(dir.join("policy.yaml"), POLICY).unwrap();
        args.extend(["--audit-policy-file".into(), dir.join("policy.yaml").display().to_string()]);
        args.extend(["--audit-log-path".into(), dir.join("audit.log").display().to_string()]);
    }
    if matches!(setup, Setup::Bare | Setup::Audit) {
        args.push("--usage-accounting=false".into());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let k = KgateProcess::start(&args, log).await;
    k.create_clusters("tenant", TENANTS, 8).await;
    (k, audit)
}

fn cms(k: &KgateProcess, i: usize) -> String {
    format!("{}/clusters/tenant{}/api/v1/namespaces/default/configmaps", k.url, i % TENANTS)
}

async fn creates(k: &KgateProcess, round: usize) -> f64 {
    let (client, urls) = (k.admin(), (0..TENANTS).map(|i| cms(k, i)).collect::<Vec<_>>());
    ops_per_second(CREATES, CONC, move |i| {
        let (client, url) = (client.clone(), urls[i % TENANTS].clone());
        async move {
            let cm = json!({"metadata": {"name": format!("r{round}-{i}")}, "data": {"k": "v"}});
            let r = client.post(url).json(&cm).send().await.unwrap();
            assert_eq!(r.status(), 201);
            let _ = r.bytes().await;
        }
    })
    .await
}

async fn gets(k: &KgateProcess) -> f64 {
    let (client, urls) = (k.admin(), (0..TENANTS).map(|i| cms(k, i)).collect::<Vec<_>>());
    ops_per_second(GETS, CONC, move |i| {
        // One of round 0's objects, in the cluster it was made in.
        let j = (i % (CREATES / TENANTS)) * TENANTS + i % TENANTS;
        let (client, url) = (client.clone(), format!("{}/r0-{j}", urls[j % TENANTS]));
        async move {
            let r = client.get(url).send().await.unwrap();
            assert_eq!(r.status(), 200);
            let _ = r.bytes().await;
        }
    })
    .await
}

/// Series in root's `/metrics`: lines that are not comments.
async fn series(k: &KgateProcess) -> usize {
    let text = k.admin().get(format!("{}/metrics", k.url)).send().await.unwrap().text().await.unwrap();
    text.lines().filter(|l| !l.is_empty() && !l.starts_with('#')).count()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[tokio::main]
async fn main() {
    println!("{CONC} clients over {TENANTS} tenant clusters; full = accounting and the deploy kit's audit policy, bare = both off; medians of {ROUNDS} interleaved rounds");
    const SETUPS: [(Setup, &str); 4] =
        [(Setup::Bare, "bare"), (Setup::Accounting, "accounting"), (Setup::Audit, "audit"), (Setup::Full, "full")];
    for backend in [Backend::Embedded, Backend::Etcd] {
        let mut servers = Vec::new();
        for (setup, name) in SETUPS {
            servers.push(start(backend, setup, &format!("kgate-bench-platform-{name}.log")).await);
        }
        let (mut c, mut g) = (vec![Vec::new(); SETUPS.len()], vec![Vec::new(); SETUPS.len()]);
        for round in 0..ROUNDS {
            for (i, (k, _)) in servers.iter().enumerate() {
                c[i].push(creates(k, round).await);
            }
            for (i, (k, _)) in servers.iter().enumerate() {
                g[i].push(gets(k).await);
            }
        }
        let c: Vec<f64> = c.into_iter().map(median).collect();
        let g: Vec<f64> = g.into_iter().map(median).collect();
        for (i, (_, name)) in SETUPS.iter().enumerate().skip(1) {
            println!(
                "{backend:?} {name}: creates {:.0}/s against bare {:.0}/s ({:.2}x); GETs {:.0}/s against {:.0}/s ({:.2}x)",
                c[i],
                c[0],
                c[i] / c[0],
                g[i],
                g[0],
                g[i] / g[0]
            );
        }
    }

    let (k, _audit) = start(Backend::Embedded, Setup::Full, "kgate-bench-platform-series.log").await;
    let client = k.admin();
    for i in 0..TENANTS {
        let _ = client.get(cms(&k, i)).send().await.unwrap().bytes().await;
    }
    let ten = series(&k).await;
    let mut counts = Vec::new();
    let mut made = 0;
    for n in [1_000, 10_000] {
        let rate = k.create_clusters(&format!("many{made}-"), n - made, 32).await;
        let (client, url, from) = (client.clone(), k.url.clone(), made);
        ops_per_second(n - made, CONC, move |i| {
            let (client, url) = (client.clone(), url.clone());
            async move {
                let path = format!("/clusters/many{from}-{i}/api/v1/namespaces/default/configmaps");
                let r = client.get(format!("{url}{path}")).send().await.unwrap();
                assert_eq!(r.status(), 200);
                let _ = r.bytes().await;
            }
        })
        .await;
        made = n;
        counts.push((n, series(&k).await, rate));
    }
    for (n, count, rate) in counts {
        println!("series in root's /metrics with {n} more active clusters: {count} (with {TENANTS}: {ten}; clusters made at {rate:.0}/s)");
    }
    println!("target: full at least 0.90x bare; the same series count at 1,000 and 10,000 active clusters");
}
