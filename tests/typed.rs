//! Every kind kube-apiserver 1.33 lets a client create, through kube-rs's typed `Api<K>` with
//! k8s-openapi's structs, as an operator's client meets them: create, get, list, watch, patch,
//! replace and delete, each answer decoded into the kind's struct. One valid object of each kind is in
//! `tests/fixtures/kinds.json` (which the Python client's round trip reads too); the kinds exercised
//! are checked against kube's own table (`src/resources/kube-1.33.tsv`), so a kind served later is not
//! left out.

mod common;

use std::collections::BTreeSet;
use std::fmt::Debug;

use common::{Backend, TestServer};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::admissionregistration::v1 as admission;
use k8s_openapi::api::{
    apps::v1 as apps, autoscaling::v1 as autoscaling1, autoscaling::v2 as autoscaling2, batch::v1 as batch,
    certificates::v1 as certificates, coordination::v1 as coordination, core::v1 as core, discovery::v1 as discovery,
    events::v1 as events, flowcontrol::v1 as flowcontrol, networking::v1 as networking, node::v1 as node,
    policy::v1 as policy, rbac::v1 as rbac, scheduling::v1 as scheduling, storage::v1 as storage,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1 as apiregistration;
use k8s_openapi::{ClusterResourceScope, NamespaceResourceScope};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::{Client, Resource, ResourceExt};
use serde::{de::DeserializeOwned, Serialize};
use serde_json::{json, Value};

/// What a typed round trip needs of a kind.
trait Typed: Resource + Clone + Debug + Serialize + DeserializeOwned + Send + Sync + 'static {}
impl<K> Typed for K
where
    K: Resource + Clone + Debug + Serialize + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Default,
{
}

/// Create, get, list, watch, patch, replace and delete `obj` through `api`; what failed, if anything.
async fn round_trip<K: Typed>(api: Api<K>, obj: Value) -> Result<(), String>
where
    K::DynamicType: Default,
{
    let name = obj["metadata"]["name"].as_str().unwrap().to_string();
    let typed: K = serde_json::from_value(obj).map_err(|e| format!("fixture: {e}"))?;
    let fail = |verb: &str| {
        let verb = verb.to_string();
        move |e: kube::Error| format!("{verb}: {e}")
    };
    let created = api.create(&PostParams::default(), &typed).await.map_err(fail("create"))?;
    if created.name_any() != name {
        return Err(format!("create answered {:?}", created.name_any()));
    }
    api.get(&name).await.map_err(fail("get"))?;
    let listed = api.list(&ListParams::default()).await.map_err(fail("list"))?;
    if !listed.items.iter().any(|o| o.name_any() == name) {
        return Err("list: not listed".into());
    }
    let from = listed.metadata.resource_version.clone().unwrap_or_default();
    let mut events = api.watch(&WatchParams::default().timeout(20), &from).await.map_err(fail("watch"))?.boxed();
    let labels = json!({"metadata": {"labels": {"typed": "patched"}}});
    let patched = api.patch(&name, &PatchParams::default(), &Patch::Merge(&labels)).await.map_err(fail("patch"))?;
    if patched.labels().get("typed").map(String::as_str) != Some("patched") {
        return Err("patch: label not set".into());
    }
    loop {
        match events.try_next().await.map_err(fail("watch"))? {
            Some(WatchEvent::Modified(o)) if o.name_any() == name => break,
            Some(WatchEvent::Error(e)) => return Err(format!("watch: {e:?}")),
            Some(_) => {}
            None => return Err("watch: ended before the patch was seen".into()),
        }
    }
    let mut replaced = patched.clone();
    replaced.annotations_mut().insert("typed".into(), "replaced".into());
    let replaced = api.replace(&name, &PostParams::default(), &replaced).await.map_err(fail("replace"))?;
    if replaced.annotations().get("typed").map(String::as_str) != Some("replaced") {
        return Err("replace: annotation not kept".into());
    }
    api.delete(&name, &DeleteParams::default()).await.map_err(fail("delete"))?;
    Ok(())
}

/// A namespaced kind's round trip in `default`, its failure named by kind.
async fn namespaced<K>(client: &Client, seen: &mut Kinds)
where
    K: Typed + Resource<Scope = NamespaceResourceScope>,
    K::DynamicType: Default,
{
    let result = round_trip(Api::<K>::namespaced(client.clone(), "default"), fixture::<K>()).await;
    seen.record::<K>(result);
}

/// A cluster-scoped kind's round trip.
async fn cluster<K>(client: &Client, seen: &mut Kinds)
where
    K: Typed + Resource<Scope = ClusterResourceScope>,
    K::DynamicType: Default,
{
    let result = round_trip(Api::<K>::all(client.clone()), fixture::<K>()).await;
    seen.record::<K>(result);
}

/// `group/version kind` of `K`, as kube's table and the fixtures name it.
fn id_of<K: Typed>() -> String
where
    K::DynamicType: Default,
{
    let dt = K::DynamicType::default();
    format!("{} {}", K::api_version(&dt), K::kind(&dt))
}

/// The fixture of `K`, a request signed for it where one is needed.
fn fixture<K: Typed>() -> Value
where
    K::DynamicType: Default,
{
    let all: Vec<Value> =
        serde_json::from_str(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/kinds.json"))).unwrap();
    let id = id_of::<K>();
    let mut obj = all
        .into_iter()
        .find(|o| format!("{} {}", o["apiVersion"].as_str().unwrap(), o["kind"].as_str().unwrap()) == id)
        .unwrap_or_else(|| panic!("no fixture of {id} in tests/fixtures/kinds.json"));
    if obj["spec"]["request"] == "$REQUEST" {
        obj["spec"]["request"] = json!(certificate_request());
    }
    obj
}

/// The kinds exercised, as `group/version kind`, and what failed.
#[derive(Default)]
struct Kinds {
    done: BTreeSet<String>,
    failed: Vec<String>,
}

impl Kinds {
    fn record<K: Typed>(&mut self, result: Result<(), String>)
    where
        K::DynamicType: Default,
    {
        let id = id_of::<K>();
        if let Err(e) = result {
            self.failed.push(format!("{id}: {e}"));
        }
        self.done.insert(id);
    }
}

/// Every kind kube 1.33 serves with `create` and `get`, from kube's own discovery data.
fn creatable_kinds() -> BTreeSet<String> {
    let table = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/resources/kube-1.33.tsv")).unwrap();
    table
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| l.split('\t').collect::<Vec<_>>())
        .filter(|f| !f[2].contains('/'))
        .filter(|f| f[6].split(',').any(|v| v == "create") && f[6].split(',').any(|v| v == "get"))
        .map(|f| if f[0] == "-" { format!("{} {}", f[1], f[3]) } else { format!("{}/{} {}", f[0], f[1], f[3]) })
        .collect()
}

/// A PEM certificate request, base64 as the API carries it.
fn certificate_request() -> String {
    use base64::Engine;
    let key = rcgen::KeyPair::generate().unwrap();
    let request =
        rcgen::CertificateParams::new(vec!["typed.example.com".into()]).unwrap().serialize_request(&key).unwrap();
    base64::engine::general_purpose::STANDARD.encode(request.pem().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_creatable_kind_round_trips_through_typed_clients_on_the_embedded_store() {
    every_creatable_kind(Backend::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_creatable_kind_round_trips_through_typed_clients_on_etcd() {
    every_creatable_kind(Backend::Etcd).await;
}

async fn every_creatable_kind(backend: Backend) {
    let s = TestServer::start(backend).await;
    let kc = kube::config::Kubeconfig::read_from(s.kubeconfig()).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await.unwrap();
    let c = Client::try_from(cfg).unwrap();
    let k = &mut Kinds::default();
    namespaced::<core::ConfigMap>(&c, k).await;
    namespaced::<core::Endpoints>(&c, k).await;
    namespaced::<core::Event>(&c, k).await;
    namespaced::<core::LimitRange>(&c, k).await;
    cluster::<core::Namespace>(&c, k).await;
    cluster::<core::Node>(&c, k).await;
    namespaced::<core::PersistentVolumeClaim>(&c, k).await;
    cluster::<core::PersistentVolume>(&c, k).await;
    namespaced::<core::Pod>(&c, k).await;
    namespaced::<core::PodTemplate>(&c, k).await;
    namespaced::<core::ReplicationController>(&c, k).await;
    namespaced::<core::ResourceQuota>(&c, k).await;
    namespaced::<core::Secret>(&c, k).await;
    namespaced::<core::ServiceAccount>(&c, k).await;
    namespaced::<core::Service>(&c, k).await;
    cluster::<admission::MutatingWebhookConfiguration>(&c, k).await;
    cluster::<admission::ValidatingWebhookConfiguration>(&c, k).await;
    cluster::<admission::ValidatingAdmissionPolicy>(&c, k).await;
    cluster::<admission::ValidatingAdmissionPolicyBinding>(&c, k).await;
    cluster::<apiextensions::CustomResourceDefinition>(&c, k).await;
    cluster::<apiregistration::APIService>(&c, k).await;
    namespaced::<apps::ControllerRevision>(&c, k).await;
    namespaced::<apps::DaemonSet>(&c, k).await;
    namespaced::<apps::Deployment>(&c, k).await;
    namespaced::<apps::ReplicaSet>(&c, k).await;
    namespaced::<apps::StatefulSet>(&c, k).await;
    namespaced::<autoscaling1::HorizontalPodAutoscaler>(&c, k).await;
    namespaced::<autoscaling2::HorizontalPodAutoscaler>(&c, k).await;
    namespaced::<batch::Job>(&c, k).await;
    namespaced::<batch::CronJob>(&c, k).await;
    cluster::<certificates::CertificateSigningRequest>(&c, k).await;
    namespaced::<coordination::Lease>(&c, k).await;
    namespaced::<discovery::EndpointSlice>(&c, k).await;
    namespaced::<events::Event>(&c, k).await;
    cluster::<flowcontrol::PriorityLevelConfiguration>(&c, k).await;
    cluster::<flowcontrol::FlowSchema>(&c, k).await;
    cluster::<networking::IngressClass>(&c, k).await;
    namespaced::<networking::Ingress>(&c, k).await;
    cluster::<networking::IPAddress>(&c, k).await;
    namespaced::<networking::NetworkPolicy>(&c, k).await;
    cluster::<networking::ServiceCIDR>(&c, k).await;
    cluster::<node::RuntimeClass>(&c, k).await;
    namespaced::<policy::PodDisruptionBudget>(&c, k).await;
    cluster::<rbac::ClusterRole>(&c, k).await;
    cluster::<rbac::ClusterRoleBinding>(&c, k).await;
    namespaced::<rbac::Role>(&c, k).await;
    namespaced::<rbac::RoleBinding>(&c, k).await;
    cluster::<scheduling::PriorityClass>(&c, k).await;
    cluster::<storage::CSIDriver>(&c, k).await;
    cluster::<storage::CSINode>(&c, k).await;
    namespaced::<storage::CSIStorageCapacity>(&c, k).await;
    cluster::<storage::StorageClass>(&c, k).await;
    cluster::<storage::VolumeAttachment>(&c, k).await;

    assert!(k.failed.is_empty(), "typed round trips that failed:\n{}", k.failed.join("\n"));
    let missing: Vec<String> = creatable_kinds().into_iter().filter(|id| !k.done.contains(id)).collect();
    assert!(missing.is_empty(), "kinds kube serves that no round trip exercised: {missing:?}");
    s.stop().await;
}
