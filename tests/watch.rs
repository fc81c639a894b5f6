//! Watch semantics: initial events, resume from a resourceVersion, selector transitions, bookmarks,
//! sendInitialEvents, timeouts and 410 after compaction, on both backends.

mod common;

use std::time::Duration;

use common::{Backend, TestServer};
use futures::StreamExt;
use serde_json::{json, Value};

const CM: &str = "/api/v1/namespaces/default/configmaps";

/// Open a watch of the default namespace's configmaps.
async fn watch(s: &TestServer, query: &str) -> tokio::sync::mpsc::UnboundedReceiver<Value> {
    s.watch(&format!("{CM}?watch=true&{query}")).await
}

/// The next event, leaving out those of what the namespace was made with (its `kube-root-ca.crt`).
async fn next(rx: &mut tokio::sync::mpsc::UnboundedReceiver<Value>) -> Value {
    loop {
        let ev = tokio::time::timeout(Duration::from_secs(10), rx.recv()).await.expect("event in time");
        let ev = ev.expect("stream open");
        if !common::made_with_namespace(&ev["object"]) {
            return ev;
        }
    }
}

async fn next_change(rx: &mut tokio::sync::mpsc::UnboundedReceiver<Value>) -> Value {
    loop {
        let ev = next(rx).await;
        if ev["type"] != "BOOKMARK" {
            return ev;
        }
    }
}

fn name(ev: &Value) -> &str {
    ev["object"]["metadata"]["name"].as_str().unwrap_or("")
}

#[tokio::test]
async fn resume_selectors_and_deletes_on_both_backends() {
    for backend in [Backend::Embedded, Backend::Etcd] {
        let s = TestServer::start(backend).await;
        let (_, a) = s.post(CM, &json!({"metadata": {"name": "a", "labels": {"team": "x"}}})).await;
        let rv_a = a["metadata"]["resourceVersion"].as_str().unwrap().to_string();
        s.post(CM, &json!({"metadata": {"name": "b"}})).await;

        // From "now" (no resourceVersion): current state first as ADDED.
        let mut all = watch(&s, "").await;
        let mut initial = [next(&mut all).await, next(&mut all).await];
        initial.sort_by_key(|e| name(e).to_string());
        assert_eq!((initial[0]["type"].as_str(), name(&initial[0])), (Some("ADDED"), "a"));
        assert_eq!(name(&initial[1]), "b");

        // Resume after a's creation: only b's creation and later changes.
        let mut resumed = watch(&s, &format!("resourceVersion={rv_a}")).await;
        let ev = next_change(&mut resumed).await;
        assert_eq!((ev["type"].as_str(), name(&ev)), (Some("ADDED"), "b"));

        // A selector watch sees objects enter and leave the selection.
        let mut selected = watch(&s, "labelSelector=team%3Dx&resourceVersion=0").await;
        assert_eq!(name(&next(&mut selected).await), "a");
        s.patch(&format!("{CM}/b"), "application/merge-patch+json", &json!({"metadata": {"labels": {"team": "x"}}}))
            .await;
        let ev = next_change(&mut selected).await;
        assert_eq!((ev["type"].as_str(), name(&ev)), (Some("ADDED"), "b"));
        s.patch(&format!("{CM}/a"), "application/merge-patch+json", &json!({"metadata": {"labels": null}})).await;
        let ev = next_change(&mut selected).await;
        assert_eq!((ev["type"].as_str(), name(&ev)), (Some("DELETED"), "a"), "leaving the selection is DELETED");

        let (_, before_delete) = s.get(&format!("{CM}/b")).await;
        s.delete(&format!("{CM}/b")).await;
        let ev = next_change(&mut selected).await;
        assert_eq!((ev["type"].as_str(), name(&ev)), (Some("DELETED"), "b"));
        let del_rv: i64 = ev["object"]["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
        let prev_rv: i64 = before_delete["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
        assert!(del_rv > prev_rv, "DELETED carries the delete's resourceVersion");

        // The unfiltered watch saw every change, in resourceVersion order.
        let mut last = 0i64;
        for expected in [("MODIFIED", "b"), ("MODIFIED", "a"), ("DELETED", "b")] {
            let ev = next_change(&mut all).await;
            assert_eq!((ev["type"].as_str().unwrap(), name(&ev)), expected);
            let rv: i64 = ev["object"]["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
            assert!(rv > last);
            last = rv;
        }
        s.stop().await;
    }
}

#[tokio::test]
async fn send_initial_events_ends_with_the_marked_bookmark() {
    let s = TestServer::start(Backend::Embedded).await;
    s.post(CM, &json!({"metadata": {"name": "one"}})).await;
    let mut rx = watch(
        &s,
        "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0&allowWatchBookmarks=true",
    )
    .await;
    assert_eq!(name(&next(&mut rx).await), "one");
    let bm = next(&mut rx).await;
    assert_eq!(bm["type"], "BOOKMARK");
    assert_eq!(bm["object"]["kind"], "ConfigMap");
    assert_eq!(bm["object"]["apiVersion"], "v1");
    assert_eq!(bm["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true");
    let (code, _) = s.get(&format!("{CM}?watch=true&sendInitialEvents=true")).await;
    assert_eq!(code.as_u16(), 400, "sendInitialEvents needs resourceVersionMatch=NotOlderThan");
    // As client-go's reflector asks the first time: no resourceVersion, the state as of now.
    s.post(CM, &json!({"metadata": {"name": "two"}})).await;
    let mut rx = watch(&s, "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true").await;
    let mut names = vec![name(&next(&mut rx).await).to_string(), name(&next(&mut rx).await).to_string()];
    names.sort();
    assert_eq!(names, ["one", "two"]);
    let bm = next(&mut rx).await;
    assert_eq!(bm["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true", "{bm}");
    s.stop().await;
}

#[tokio::test]
async fn timeout_ends_the_stream_with_a_bookmark() {
    let s = TestServer::start(Backend::Embedded).await;
    let mut rx = watch(&s, "timeoutSeconds=1&allowWatchBookmarks=true").await;
    let ev = next(&mut rx).await;
    assert_eq!(ev["type"], "BOOKMARK");
    assert!(ev["object"]["metadata"]["resourceVersion"].as_str().unwrap().parse::<i64>().unwrap() > 0);
    assert!(tokio::time::timeout(Duration::from_secs(5), rx.recv()).await.unwrap().is_none(), "stream ended");
    s.stop().await;
}

#[tokio::test]
async fn a_compacted_resource_version_gets_410_expired() {
    let s = TestServer::start(Backend::Embedded).await;
    let (_, first) = s.post(CM, &json!({"metadata": {"name": "old"}})).await;
    let old_rv: i64 = first["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
    for i in 0..3 {
        s.post(CM, &json!({"metadata": {"name": format!("n{i}")}})).await;
    }
    s.running_store().compact(old_rv + 2).await.unwrap();
    let mut rx = watch(&s, &format!("resourceVersion={old_rv}")).await;
    let ev = next(&mut rx).await;
    assert_eq!(ev["type"], "ERROR");
    assert_eq!(ev["object"]["code"], 410);
    assert_eq!(ev["object"]["reason"], "Expired");
    assert!(ev["object"]["message"].as_str().unwrap().starts_with("too old resource version"));
    let (code, st) = s.get(&format!("{CM}?resourceVersion={old_rv}&resourceVersionMatch=Exact")).await;
    assert_eq!((code.as_u16(), st["reason"].as_str()), (410, Some("Expired")));
    s.stop().await;
}

#[tokio::test]
async fn wildcard_watch_sees_every_cluster_with_its_name() {
    let s = TestServer::start(Backend::Embedded).await;
    s.create_cluster("w1").await;
    s.create_cluster("w2").await;
    let resp = s
        .client
        .get(format!("{}/clusters/*/api/v1/configmaps?watch=true&resourceVersion=0", s.url))
        .send()
        .await
        .unwrap();
    let mut stream = resp.bytes_stream();
    s.post(&format!("/clusters/w1{CM}"), &json!({"metadata": {"name": "x"}})).await;
    s.post(&format!("/clusters/w2{CM}"), &json!({"metadata": {"name": "x"}})).await;
    let mut seen = Vec::new();
    let mut buf = Vec::new();
    while seen.len() < 2 {
        let chunk = tokio::time::timeout(Duration::from_secs(10), stream.next()).await.unwrap().unwrap().unwrap();
        buf.extend_from_slice(&chunk);
        while let Some(i) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=i).collect();
            let ev: Value = serde_json::from_slice(&line).unwrap();
            if common::made_with_namespace(&ev["object"]) {
                continue;
            }
            seen.push(ev["object"]["metadata"]["annotations"]["kgate.dev/cluster"].as_str().unwrap().to_string());
        }
    }
    assert_eq!(seen, vec!["w1", "w2"]);
    s.stop().await;
}
