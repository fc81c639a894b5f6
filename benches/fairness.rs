//! Fair sharing between tenants when the server's budget of writes is spent (issue 26's figure): nine
//! tenants each keep one create in flight, alone and then while a tenth sends ten times its fair share
//! of the budget; their p99 latency against their p99 alone (target: at most 1.5x) and their errors
//! (target: 0). The same flood against requests refused at once rather than queued
//! (`--inflight-queue-wait-seconds 0`, kgate before fair queuing) shows what the queue buys.
//!
//! kgate on the embedded store, in this process; a write budget of 4, below what the two cores serve, so that the budget (not the CPU) is what the tenants share.
//!
//! Run: `cargo bench --bench fairness`.

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Backend, TestServer};
use serde_json::json;

/// The server's budget of writes in flight.
const BUDGET: usize = 4;
const STEADY: usize = 9;
/// A tenant's fair share is BUDGET / 10; the flood keeps ten times that in flight.
const FLOOD: usize = BUDGET;
const PHASE: Duration = Duration::from_secs(8);

/// Latencies (ms) of the steady tenants' creates and how many failed, over one phase; with `flood`,
/// the flooding tenant runs meanwhile (its answers are counted apart).
async fn phase(s: &TestServer, tokens: &[String], flood: bool, round: &str) -> (Vec<f64>, usize, usize, usize) {
    let deadline = Instant::now() + PHASE;
    let client = s.anonymous.clone();
    let mut tasks = Vec::new();
    for (t, token) in tokens.iter().enumerate().take(STEADY) {
        let (client, token, url) = (client.clone(), token.clone(), cm_url(s, t));
        let round = round.to_string();
        tasks.push(tokio::spawn(async move {
            let (mut lat, mut errors, mut i) = (Vec::new(), 0, 0);
            while Instant::now() < deadline {
                i += 1;
                let body = json!({"metadata": {"name": format!("{round}-{i}")}, "data": {"k": "v"}});
                let start = Instant::now();
                let r = client.post(&url).bearer_auth(&token).json(&body).send().await;
                lat.push(start.elapsed().as_secs_f64() * 1000.0);
                if !r.map(|r| r.status() == 201).unwrap_or(false) {
                    errors += 1;
                }
            }
            (lat, errors)
        }));
    }
    let flooded = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let refused = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut floods = Vec::new();
    if flood {
        for f in 0..FLOOD {
            let (client, token, url) = (client.clone(), tokens[STEADY].clone(), cm_url(s, STEADY));
            let (flooded, refused, round) = (flooded.clone(), refused.clone(), round.to_string());
            floods.push(tokio::spawn(async move {
                let mut i = 0;
                while Instant::now() < deadline {
                    i += 1;
                    let body = json!({"metadata": {"name": format!("{round}-{f}-{i}")}, "data": {"k": "v"}});
                    match client.post(&url).bearer_auth(&token).json(&body).send().await {
                        Ok(r) if r.status() == 201 => flooded.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                        _ => refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
                    };
                }
            }));
        }
    }
    let (mut all, mut errors) = (Vec::new(), 0);
    for t in tasks {
        let (lat, e) = t.await.unwrap();
        all.extend(lat);
        errors += e;
    }
    for f in floods {
        f.await.unwrap();
    }
    all.sort_by(f64::total_cmp);
    let (flooded, refused) =
        (flooded.load(std::sync::atomic::Ordering::Relaxed), refused.load(std::sync::atomic::Ordering::Relaxed));
    (all, errors, flooded, refused)
}

fn cm_url(s: &TestServer, tenant: usize) -> String {
    format!("{}/clusters/t{tenant}/api/v1/namespaces/default/configmaps", s.url)
}

fn p(lat: &[f64], q: f64) -> f64 {
    lat.get(((lat.len() as f64 * q) as usize).min(lat.len().saturating_sub(1))).copied().unwrap_or(f64::NAN)
}

async fn run(queue_wait: Duration) -> (f64, f64, usize, usize, usize, usize) {
    let prefix = format!("/t{}", uuid::Uuid::new_v4().simple());
    let s = TestServer::start_configured(Backend::Embedded, tempfile::tempdir().unwrap(), prefix, |c| {
        c.inflight = kgate::http::inflight::Limits { mutating: BUDGET, queue_wait, ..Default::default() };
    })
    .await;
    let mut tokens = Vec::new();
    for t in 0..=STEADY {
        s.create_cluster(&format!("t{t}")).await;
        tokens.push(s.tenant_token(&format!("t{t}"), "load", "edit").await);
    }
    let (alone, alone_errors, _, _) = phase(&s, &tokens, false, "alone").await;
    let (flooded, errors, flood_ok, flood_refused) = phase(&s, &tokens, true, "flood").await;
    println!(
        "  alone: {} creates, p50 {:.1} ms, p99 {:.1} ms, {alone_errors} errors; with the flood: {} creates, p50 {:.1} ms, p99 {:.1} ms, {errors} errors; the flood: {flood_ok} created, {flood_refused} refused",
        alone.len(),
        p(&alone, 0.5),
        p(&alone, 0.99),
        flooded.len(),
        p(&flooded, 0.5),
        p(&flooded, 0.99)
    );
    s.stop().await;
    (p(&alone, 0.99), p(&flooded, 0.99), alone_errors, errors, flood_ok, flood_refused)
}

#[tokio::main]
async fn main() {
    println!("write budget {BUDGET}; {STEADY} tenants with one create in flight each; a tenth keeps {FLOOD} in flight");
    println!("fair queuing (default, requests wait up to 5 s for their turn):");
    let (alone, flooded, _, errors, _, _) = run(kgate::http::inflight::Limits::default().queue_wait).await;
    println!("refused at once when the budget is spent (queue wait 0):");
    let (alone0, flooded0, _, errors0, _, _) = run(Duration::ZERO).await;
    println!(
        "\ntarget: the others' p99 with the flood at most 1.5x their p99 alone, and no errors: fair queuing {:.2}x, {errors} errors; refused at once {:.2}x, {errors0} errors",
        flooded / alone,
        flooded0 / alone0
    );
}
