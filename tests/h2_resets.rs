//! Many requests on one HTTP/2 connection must never trip h2's reset limits (kubectl uses h2).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use common::{Backend, TestServer};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn thousands_of_concurrent_requests_on_one_h2_connection() {
    let s = Arc::new(TestServer::start(Backend::Embedded).await);
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let (s, next) = (s.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= 300 {
                    return;
                }
                let r = s
                    .client
                    .post(format!("{}/apis/tenancy.kgate.dev/v1alpha1/logicalclusters", s.url))
                    .json(&json!({"metadata": {"name": format!("h{i}")}}))
                    .send()
                    .await
                    .unwrap_or_else(|e| panic!("cluster {i}: {e:?}"));
                assert_eq!((r.version(), r.status().as_u16()), (reqwest::Version::HTTP_2, 201));
                for j in 0..5 {
                    let r = s
                        .client
                        .post(format!("{}/clusters/h{i}/api/v1/namespaces/default/configmaps", s.url))
                        .json(&json!({"metadata": {"name": format!("c{j}")}}))
                        .send()
                        .await
                        .unwrap_or_else(|e| panic!("configmap {i}/{j}: {e:?}"));
                    assert_eq!(r.status(), 201);
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}
