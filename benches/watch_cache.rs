//! The watch cache under load, side by side with the same work done directly against etcd in the same
//! run (issue 4's figures):
//! - fan-out: 1,000 clusters, 10,000 per-cluster watches plus wildcard ones, 1,000 writes per second:
//!   p50/p99 from write acknowledgement to delivery, and resident memory per idle watch;
//! - the same with stalled watchers (opened, never read) against as many reading ones: the others' p99
//!   must not move more than 20%;
//! - LIST of 10,000 objects across clusters from the cache versus a range read of the same keys in etcd,
//!   each timed until its last byte has arrived (kgate's chunks are kept as they come and joined after
//!   the clock stops; etcd's client decodes its replies as they come, which it must to hand them over);
//! - GET throughput at concurrency 64 (`resourceVersion=0`, served by the cache) versus raw etcd gets.
//!
//! Run: `cargo bench --bench watch_cache` (needs etcd; `./scripts/setup.sh` installs it). kgate runs as
//! its own process on the test etcd so its memory can be read from /proc. `KGATE_BENCH=list` writes the
//! objects without the fan-out phases and prints only the LIST and GET figures (about 20 s).

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::KgateProcess;
use dashmap::DashMap;
use etcd_client::{Client, GetOptions, WatchOptions};
use futures::StreamExt;
use serde_json::json;

const CLUSTERS: usize = 1000;
const WATCHES_PER_CLUSTER: usize = 10;
const WILDCARD_WATCHES: usize = 10;
const STALLED_WATCHES: usize = 10;
const WRITES_PER_SECOND: usize = 1000;
/// Fan-out phases. Every watch stays open throughout while phases with ten more watchers reading and
/// with them stalled alternate, and the two kinds are compared by their median p99: identical phases here differ by up
/// to half at these millisecond levels, so a few phases against each other cannot resolve a 20%
/// criterion, and ten of each, interleaved, share whatever else the machine is doing.
const PHASES: u64 = 20;
/// Writes per phase; the phases together leave the 10,000 objects the LIST figure reads.
const WRITES_PER_PHASE: u64 = 500;
/// Pause before each phase's writes.
const SETTLE: Duration = Duration::from_millis(500);
/// Writes for the raw etcd fan-out.
const ETCD_WRITES: u64 = 2000;
/// HTTP/2 streams per client connection (kgate allows 1,000 per connection).
const STREAMS_PER_CONNECTION: usize = 250;

/// When each write was acknowledged, by write id.
type Acks = Arc<DashMap<u64, Instant>>;

/// Find `"t":"<id>"` in an event line or a stored value.
fn write_id(line: &[u8]) -> Option<u64> {
    const MARK: &[u8] = b"\"t\":\"";
    let at = line.windows(MARK.len()).position(|w| w == MARK)? + MARK.len();
    let end = line[at..].iter().position(|b| *b == b'"')? + at;
    std::str::from_utf8(&line[at..end]).ok()?.parse().ok()
}

/// What `next` yields, or `None` once the run is over: a watcher checks `stop` every 200 ms while
/// its stream is quiet.
async fn until_stopped<T>(stop: &AtomicBool, next: impl std::future::Future<Output = T>) -> Option<T> {
    tokio::pin!(next);
    loop {
        tokio::select! {
            v = &mut next => return Some(v),
            _ = tokio::time::sleep(Duration::from_millis(200)) => {
                if stop.load(Ordering::Relaxed) {
                    return None;
                }
            }
        }
    }
}

fn latency_of(acks: &Acks, id: u64) -> u64 {
    // Delivered before the writer saw its acknowledgement: no measurable delay.
    acks.get(&id).map(|a| a.elapsed().as_micros() as u64).unwrap_or(0)
}

struct Figures {
    p50_ms: f64,
    p99_ms: f64,
    deliveries: usize,
}

fn figures(mut samples: Vec<u64>) -> Figures {
    samples.sort_unstable();
    let at = |q: f64| samples.get(((samples.len() as f64 * q) as usize).min(samples.len().saturating_sub(1))).copied();
    Figures {
        p50_ms: at(0.50).unwrap_or(0) as f64 / 1000.0,
        p99_ms: at(0.99).unwrap_or(0) as f64 / 1000.0,
        deliveries: samples.len(),
    }
}

/// Write `total` objects at a steady rate; `write(i)` returns when write `i` is acknowledged.
async fn paced_writes<F, Fut>(first: u64, total: u64, write: F) -> u64
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let write = Arc::new(write);
    let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / WRITES_PER_SECOND as u64));
    let mut tasks = Vec::new();
    for i in first..first + total {
        tick.tick().await;
        let w = write.clone();
        tasks.push(tokio::spawn(async move { w(i).await }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    first + total
}

/// Create configmap `w<i>` in cluster `c<i mod CLUSTERS>`, carrying its write id; returns the response
/// once its head acknowledges the write.
async fn write_object(client: &reqwest::Client, url: &str, i: u64) -> reqwest::Response {
    let cm = json!({"metadata": {"name": format!("w{i}")}, "data": {"t": i.to_string()}});
    let r = client
        .post(format!("{url}/clusters/c{}/api/v1/namespaces/default/configmaps", i as usize % CLUSTERS))
        .json(&cm)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    r
}

/// kgate on the test etcd under a prefix of its own.
struct Kgate {
    process: KgateProcess,
    url: String,
    prefix: String,
}

impl Kgate {
    async fn start(etcd: &str) -> Kgate {
        let prefix = format!("/bench-{}", uuid::Uuid::new_v4().simple());
        let process =
            KgateProcess::start(&["--etcd-servers", etcd, "--etcd-prefix", &prefix], "kgate-bench-watch.log").await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        Kgate { url: process.url.clone(), process, prefix }
    }

    fn client(&self) -> reqwest::Client {
        self.process.admin()
    }

    fn rss_kib(&self) -> u64 {
        self.process.rss_kib()
    }
}

/// A watch that records each write's id and delivery latency, until `stop`.
fn kgate_watcher(
    client: reqwest::Client,
    url: String,
    acks: Acks,
    opened: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Vec<(u64, u64)>> {
    tokio::spawn(async move {
        let resp = client.get(url).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        opened.fetch_add(1, Ordering::Relaxed);
        let mut stream = resp.bytes_stream();
        let mut buf = Vec::new();
        let mut samples = Vec::new();
        loop {
            let Some(Some(Ok(chunk))) = until_stopped(&stop, stream.next()).await else { return samples };
            buf.extend_from_slice(&chunk);
            while let Some(i) = buf.iter().position(|b| *b == b'\n') {
                if let Some(id) = write_id(&buf[..i]) {
                    samples.push((id, latency_of(&acks, id)));
                }
                buf.drain(..=i);
            }
        }
    })
}

/// Write acknowledged -> delivered latencies, by write id, over every phase.
struct Phases {
    /// Each phase's samples: whether stalled watchers were open, and the latencies.
    phases: Vec<(bool, Vec<u64>)>,
    /// kgate's RSS with every watch open and idle.
    idle_rss: u64,
}

/// Open every watch once, then write the phases, with `STALLED_WATCHES` stalled watchers open in every
/// other one.
async fn kgate_fan_out(k: &Kgate, clients: &[reqwest::Client], acks: &Acks) -> Phases {
    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(AtomicUsize::new(0));
    let mut watchers = Vec::new();
    let mut n = 0;
    let mut next_client = || {
        n += 1;
        clients[n / STREAMS_PER_CONNECTION % clients.len()].clone()
    };
    for c in 0..CLUSTERS {
        for _ in 0..WATCHES_PER_CLUSTER {
            let url =
                format!("{}/clusters/c{c}/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=0", k.url);
            watchers.push(kgate_watcher(next_client(), url, acks.clone(), opened.clone(), stop.clone()));
        }
    }
    for _ in 0..WILDCARD_WATCHES {
        let url = format!("{}/clusters/*/api/v1/configmaps?watch=true&resourceVersion=0", k.url);
        watchers.push(kgate_watcher(next_client(), url, acks.clone(), opened.clone(), stop.clone()));
    }
    let total = watchers.len();
    let deadline = Instant::now() + Duration::from_secs(120);
    while opened.load(Ordering::Relaxed) < total {
        assert!(Instant::now() < deadline, "only {} of {total} watches opened", opened.load(Ordering::Relaxed));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle_rss = k.rss_kib();
    let mut stalled_in = Vec::new();
    for phase in 0..PHASES {
        let stalled = phase % 2 == 1;
        stalled_in.push(stalled);
        // Ten more wildcard watches on connections of their own: stalled (never read) in this phase, or
        // read and discarded, so both kinds of phase carry the same watches and differ only in whether
        // they are read (a stalled watcher's events cost kgate the same as anyone's until its buffers
        // fill, which in the early phases, with few objects, takes most of the phase).
        let (mut parked, mut reading) = (Vec::new(), Vec::new());
        for _ in 0..STALLED_WATCHES {
            let url = format!("{}/clusters/*/api/v1/configmaps?watch=true&resourceVersion=0", k.url);
            let r = k.client().get(url).send().await.unwrap();
            if stalled {
                parked.push(r);
            } else {
                reading.push(tokio::spawn(async move {
                    let mut body = r.bytes_stream();
                    while let Some(Ok(_)) = body.next().await {}
                }));
            }
        }
        // Before any write is timed, the extra watches' initial states (up to 10,000 objects each) go
        // out, until HTTP/2 flow control stops them for stalled ones, and the previous phase's extra
        // connections close: a phase measures watchers being stalled, not opening or closing watches.
        tokio::time::sleep(SETTLE).await;
        let (client, url, a) = (k.client(), k.url.clone(), acks.clone());
        paced_writes(phase * WRITES_PER_PHASE, WRITES_PER_PHASE, move |i| {
            let (client, url, acks) = (client.clone(), url.clone(), a.clone());
            async move {
                let r = write_object(&client, &url, i).await;
                acks.insert(i, Instant::now());
                let _ = r.bytes().await;
            }
        })
        .await;
        drop(parked);
        reading.iter().for_each(|t| t.abort());
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    let mut phases: Vec<(bool, Vec<u64>)> = stalled_in.into_iter().map(|s| (s, Vec::new())).collect();
    for w in watchers {
        for (id, latency) in w.await.unwrap() {
            phases[(id / WRITES_PER_PHASE) as usize].1.push(latency);
        }
    }
    Phases { phases, idle_rss }
}

async fn etcd_fan_out(endpoint: &str) -> Figures {
    let run = format!("/bench-fanout-{}/", uuid::Uuid::new_v4().simple());
    let acks: Acks = Arc::new(DashMap::new());
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    for _ in 0..10 {
        clients.push(Client::connect([endpoint], None).await.unwrap());
    }
    let mut watchers = Vec::new();
    let mut prefixes: Vec<String> = Vec::new();
    for c in 0..CLUSTERS {
        for _ in 0..WATCHES_PER_CLUSTER {
            prefixes.push(format!("{run}c{c}/"));
        }
    }
    for _ in 0..WILDCARD_WATCHES {
        prefixes.push(run.clone());
    }
    for (n, p) in prefixes.into_iter().enumerate() {
        let mut client = clients[n % clients.len()].clone();
        let (acks, stop) = (acks.clone(), stop.clone());
        let mut stream = client.watch(p.as_str(), Some(WatchOptions::new().with_prefix())).await.unwrap();
        watchers.push(tokio::spawn(async move {
            let mut samples = Vec::new();
            loop {
                let Some(Ok(Some(resp))) = until_stopped(&stop, stream.message()).await else { return samples };
                for ev in resp.events() {
                    if let Some(id) = ev.kv().and_then(|kv| write_id(kv.value())) {
                        samples.push(latency_of(&acks, id));
                    }
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (client, a) = (clients[0].clone(), acks.clone());
    paced_writes(0, ETCD_WRITES, move |i| {
        let (mut client, acks, key) = (client.clone(), a.clone(), format!("{run}c{}/default/w{i}", i as usize % CLUSTERS));
        async move {
            let value = serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("w{i}"), "namespace": "default", "uid": "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "creationTimestamp": "2026-01-01T00:00:00Z"}, "data": {"t": i.to_string()}})).unwrap();
            client.put(key, value, None).await.unwrap();
            acks.insert(i, Instant::now());
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    let mut samples = Vec::new();
    for w in watchers {
        samples.extend(w.await.unwrap());
    }
    figures(samples)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = xs.len();
    if n.is_multiple_of(2) {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    } else {
        xs[n / 2]
    }
}

#[tokio::main]
async fn main() {
    let endpoint = common::shared_etcd().to_string();
    let k = Kgate::start(&endpoint).await;
    let started = Instant::now();
    k.process.create_clusters("c", CLUSTERS, 16).await;
    println!("\n{CLUSTERS} logical clusters created in {:.1}s", started.elapsed().as_secs_f64());

    let clients: Vec<reqwest::Client> =
        (0..((CLUSTERS * WATCHES_PER_CLUSTER + WILDCARD_WATCHES) / STREAMS_PER_CONNECTION + 1))
            .map(|_| k.client())
            .collect();
    // Connect every client first, as client-go does (one connection per server, dialled once): a cold
    // reqwest client given 250 requests at once opens a connection for each until the first one is up,
    // so opening the watches used to cost kgate about 9,600 TLS handshakes and connections closed again
    // at once, whose freed memory the allocator keeps; that was most of the per-watch figure.
    for c in &clients {
        let r = c.get(format!("{}/version", k.url)).send().await.unwrap();
        assert_eq!(r.status(), 200);
        let _ = r.bytes().await;
    }
    let objects = if std::env::var("KGATE_BENCH").as_deref() == Ok("list") {
        fill(&k, &clients[0]).await
    } else {
        fan_out(&k, &endpoint, &clients).await
    };
    // A connection of its own, as `kubectl get` has, not one that has just carried 250 watches.
    list_and_get(&k, &endpoint, &k.client(), objects).await;
    drop(k);
}

/// The fan-out phases and their figures; returns how many objects they wrote.
async fn fan_out(k: &Kgate, endpoint: &str, clients: &[reqwest::Client]) -> usize {
    // Warm the configmaps cache so the memory figure is the watches' alone.
    let r = clients[0].get(format!("{}/clusters/*/api/v1/configmaps?resourceVersion=0", k.url)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let _ = r.bytes().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = k.rss_kib();
    let acks: Acks = Arc::new(DashMap::new());
    let watches = CLUSTERS * WATCHES_PER_CLUSTER + WILDCARD_WATCHES;
    let run = kgate_fan_out(k, clients, &acks).await;
    let per_watch = (run.idle_rss.saturating_sub(before)) as f64 * 1024.0 / watches as f64;
    let raw = etcd_fan_out(endpoint).await;

    println!("\nfan-out: {CLUSTERS} clusters, {} per-cluster + {WILDCARD_WATCHES} wildcard watches, {WRITES_PER_SECOND} writes/s in {PHASES} phases of {WRITES_PER_PHASE}; write acknowledged -> delivered", CLUSTERS * WATCHES_PER_CLUSTER);
    println!("{:<44} {:>9} {:>9} {:>12}", "", "p50 ms", "p99 ms", "deliveries");
    println!("{:<44} {:>9.1} {:>9.1} {:>12}", "raw etcd (one etcd watch each)", raw.p50_ms, raw.p99_ms, raw.deliveries);
    let pooled =
        |stalled: bool| figures(run.phases.iter().filter(|p| p.0 == stalled).flat_map(|p| p.1.clone()).collect());
    for (stalled, what) in
        [(false, "kgate watch cache, 10 more watchers reading"), (true, "kgate watch cache, 10 more watchers stalled")]
    {
        let f = pooled(stalled);
        println!("{what:<44} {:>9.1} {:>9.1} {:>12}", f.p50_ms, f.p99_ms, f.deliveries);
    }
    let p99s = |stalled: bool| -> Vec<f64> {
        run.phases.iter().filter(|p| p.0 == stalled).map(|p| figures(p.1.clone()).p99_ms).collect()
    };
    let show = |xs: Vec<f64>| xs.iter().map(|x| format!("{x:.1}")).collect::<Vec<_>>().join(" ");
    println!("p99 ms by phase: with the extra watchers reading {}; stalled {}", show(p99s(false)), show(p99s(true)));
    let worst = p99s(false).into_iter().chain(p99s(true)).fold(0.0, f64::max);
    let (plain, with_stalled) = (median(p99s(false)), median(p99s(true)));
    println!("target: kgate p99 < 100 ms: {worst:.1} ms in the worst phase");
    println!(
        "target: stalled watchers move p99 by <= 20%: {:+.0}% (median p99 of the phases with them stalled, {with_stalled:.1} ms, against those with them reading, {plain:.1} ms)",
        (with_stalled / plain.max(0.001) - 1.0) * 100.0
    );
    println!(
        "memory per idle watch: {:.1} KiB ({} watches; RSS {:.1} -> {:.1} MiB) [target < 10 KiB]",
        per_watch / 1024.0,
        watches,
        before as f64 / 1024.0,
        run.idle_rss as f64 / 1024.0
    );

    (PHASES * WRITES_PER_PHASE) as usize
}

/// Only the objects the LIST and GET figures read (`KGATE_BENCH=list`, to compare those alone quickly).
async fn fill(k: &Kgate, client: &reqwest::Client) -> usize {
    let objects = (PHASES * WRITES_PER_PHASE) as usize;
    let (c, url) = (client.clone(), k.url.clone());
    common::ops_per_second(objects, 64, move |i| {
        let (c, url) = (c.clone(), url.clone());
        async move {
            let _ = write_object(&c, &url, i as u64).await.bytes().await;
        }
    })
    .await;
    objects
}

/// Lists timed per client, each after an etcd range.
const LISTS: usize = 31;

/// LIST across clusters and GET at concurrency 64, from the cache and from etcd.
async fn list_and_get(k: &Kgate, endpoint: &str, client: &reqwest::Client, objects: usize) {
    // LIST across clusters: the cache versus a range read of the same keys.
    let list_url = format!("{}/clusters/*/api/v1/configmaps?resourceVersion=0", k.url);
    let etcd = Client::connect([endpoint], None).await.unwrap();
    let mut kv = etcd.kv_client().max_decoding_message_size(i32::MAX as usize);
    let prefix = format!("{}/core/configmaps/", k.prefix);
    let end = kgate::storage::keys::prefix_end(&prefix);
    // kubectl and client-go speak HTTP/2; kube-rs (over this same hyper client) speaks HTTP/1.1.
    let clients = [
        ("HTTP/2, with client-go's settings (kubectl)", k.process.admin_like_client_go()),
        ("HTTP/2, with hyper's default settings", client.clone()),
        ("HTTP/1.1, with kube-rs's client (hyper)", k.process.admin_http1()),
    ];
    let mut from_cache = [Vec::new(), Vec::new(), Vec::new()];
    let mut from_etcd = Vec::new();
    let mut count = (0, 0);
    let mut size = 0;
    // kgate's own time to each answer's head (the cache snapshot; the body's bytes are joined as the
    // connection takes them, so that work overlaps the transfer), from its request-duration histogram
    // (the first lists, which may load the cache, are before this snapshot).
    let list_time = |metrics: &str, suffix: &str| -> f64 {
        metrics
            .lines()
            .filter(|l| l.starts_with(&format!("apiserver_request_duration_seconds_{suffix}{{")))
            .filter(|l| l.contains("verb=\"list\"") && l.contains("resource=\"configmaps\""))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    let metrics_url = format!("{}/metrics", k.url);
    for (_, c) in &clients {
        let _ = c.get(&list_url).send().await.unwrap().bytes().await.unwrap();
    }
    let before = client.get(&metrics_url).send().await.unwrap().text().await.unwrap();
    // Nothing else reaches kgate meanwhile: its CPU time over the loop is the lists'.
    let cpu_before = k.process.cpu_ms();
    for _ in 0..LISTS {
        // Each list follows an etcd range, so both meet the same state of the machine.
        for (i, (_, c)) in clients.iter().enumerate() {
            // One range, as kube-apiserver reads a collection, with its 2 GiB reply limit (gRPC's
            // default, 4 MiB, would refuse this one; paging the read takes etcd a third longer).
            let t = Instant::now();
            let r = kv.get(prefix.clone(), Some(GetOptions::new().with_range(end.clone()))).await.unwrap();
            from_etcd.push(t.elapsed().as_secs_f64() * 1000.0);
            count.1 = r.kvs().len();
            drop(r);
            // Until the last byte arrives; the chunks are kept as they came and joined afterwards.
            let t = Instant::now();
            let mut r = c.get(&list_url).send().await.unwrap();
            let mut chunks = Vec::new();
            while let Some(chunk) = r.chunk().await.unwrap() {
                chunks.push(chunk);
            }
            from_cache[i].push(t.elapsed().as_secs_f64() * 1000.0);
            let body = chunks.concat();
            // Nothing is written meanwhile: every list is the whole of the first.
            assert!(size == 0 || size == body.len(), "a list of {} bytes after one of {size}", body.len());
            size = body.len();
            if count.0 == 0 {
                // Once: parsing 4 MiB into values churns the client's heap for whatever is timed next.
                count.0 =
                    serde_json::from_slice::<serde_json::Value>(&body).unwrap()["items"].as_array().unwrap().len();
            }
        }
    }
    let cpu_per_list = (k.process.cpu_ms() - cpu_before) / (LISTS * clients.len()) as f64;
    let etcd_ms = median(from_etcd);
    println!(
        "\nLIST across clusters: kgate {} objects ({:.1} MiB) from its cache; etcd a range of {} keys in {etcd_ms:.1} ms [target >= 5x]",
        count.0,
        size as f64 / (1024.0 * 1024.0),
        count.1
    );
    for ((name, _), times) in clients.iter().zip(from_cache) {
        let ms = median(times);
        println!("  over {name}: {ms:.1} ms, {:.1}x", etcd_ms / ms);
    }
    let after = client.get(&metrics_url).send().await.unwrap().text().await.unwrap();
    let built_ms = (list_time(&after, "sum") - list_time(&before, "sum")) * 1000.0
        / (list_time(&after, "count") - list_time(&before, "count")).max(1.0);
    println!(
        "  kgate had each answer's head ready in {built_ms:.1} ms on average and spent {cpu_per_list:.1} ms of CPU per list; the rest of its time is joining the cached objects while sending them over HTTPS"
    );
    // GET at concurrency 64: served by the cache versus raw etcd gets of the same keys.
    let (c, url) = (client.clone(), k.url.clone());
    let kgate_gets = common::ops_per_second(20_000, 64, move |i| {
        let (c, url) = (
            c.clone(),
            format!(
                "{url}/clusters/c{}/api/v1/namespaces/default/configmaps/w{}?resourceVersion=0",
                (i % objects) % CLUSTERS,
                i % objects
            ),
        );
        async move {
            let r = c.get(url).send().await.unwrap();
            assert_eq!(r.status(), 200);
            let _ = r.bytes().await;
        }
    })
    .await;
    let (e, p) = (etcd.clone(), k.prefix.clone());
    let etcd_gets = common::ops_per_second(20_000, 64, move |i| {
        let (mut e, key) =
            (e.clone(), format!("{p}/core/configmaps/c{}/default/w{}", (i % objects) % CLUSTERS, i % objects));
        async move {
            assert_eq!(e.get(key, None).await.unwrap().kvs().len(), 1);
        }
    })
    .await;
    println!("GET at concurrency 64: kgate (resourceVersion=0, cache) {kgate_gets:.0}/s; raw etcd {etcd_gets:.0}/s; {:.2}x [target > 1x]", kgate_gets / etcd_gets);
}
