//! The table of built-in kinds (group/version/kind → k8s-openapi type) and kgate's own
//! hand-written `LogicalCluster` schema.

use k8s_openapi::api;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{json, Value};

/// One built-in kind whose schema comes from k8s-openapi.
pub(super) struct KindEntry {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    /// Kubernetes definition name, e.g. `io.k8s.api.core.v1.ConfigMap`.
    pub def: String,
    /// Whether a `<Kind>List` schema exists (create-only review kinds and Scale have none).
    pub listable: bool,
}

macro_rules! kinds {
    ($( $group:literal $version:literal $kind:literal $listable:literal => $ty:ty; )*) => {
        /// Registers every built-in kind with `gen` and returns the table describing them.
        pub(super) fn register(gen: &mut SchemaGenerator) -> Vec<KindEntry> {
            vec![$(
                {
                    gen.subschema_for::<$ty>();
                    KindEntry {
                        group: $group,
                        version: $version,
                        kind: $kind,
                        def: <$ty as JsonSchema>::schema_name().into_owned(),
                        listable: $listable,
                    }
                },
            )*]
        }
    };
}

kinds! {
    "" "v1" "Namespace" true => api::core::v1::Namespace;
    "" "v1" "ConfigMap" true => api::core::v1::ConfigMap;
    "" "v1" "Secret" true => api::core::v1::Secret;
    "" "v1" "ServiceAccount" true => api::core::v1::ServiceAccount;
    "" "v1" "Service" true => api::core::v1::Service;
    "" "v1" "Event" true => api::core::v1::Event;
    "" "v1" "Pod" true => api::core::v1::Pod;
    "" "v1" "PersistentVolumeClaim" true => api::core::v1::PersistentVolumeClaim;
    "" "v1" "ResourceQuota" true => api::core::v1::ResourceQuota;
    "" "v1" "LimitRange" true => api::core::v1::LimitRange;
    "" "v1" "Endpoints" true => api::core::v1::Endpoints;
    "discovery.k8s.io" "v1" "EndpointSlice" true => api::discovery::v1::EndpointSlice;
    "events.k8s.io" "v1" "Event" true => api::events::v1::Event;
    "coordination.k8s.io" "v1" "Lease" true => api::coordination::v1::Lease;
    "rbac.authorization.k8s.io" "v1" "Role" true => api::rbac::v1::Role;
    "rbac.authorization.k8s.io" "v1" "RoleBinding" true => api::rbac::v1::RoleBinding;
    "rbac.authorization.k8s.io" "v1" "ClusterRole" true => api::rbac::v1::ClusterRole;
    "rbac.authorization.k8s.io" "v1" "ClusterRoleBinding" true => api::rbac::v1::ClusterRoleBinding;
    "apiextensions.k8s.io" "v1" "CustomResourceDefinition" true =>
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    "apps" "v1" "Deployment" true => api::apps::v1::Deployment;
    "apps" "v1" "ReplicaSet" true => api::apps::v1::ReplicaSet;
    "apps" "v1" "StatefulSet" true => api::apps::v1::StatefulSet;
    "apps" "v1" "DaemonSet" true => api::apps::v1::DaemonSet;
    "apps" "v1" "ControllerRevision" true => api::apps::v1::ControllerRevision;
    "batch" "v1" "Job" true => api::batch::v1::Job;
    "batch" "v1" "CronJob" true => api::batch::v1::CronJob;
    "networking.k8s.io" "v1" "Ingress" true => api::networking::v1::Ingress;
    "networking.k8s.io" "v1" "NetworkPolicy" true => api::networking::v1::NetworkPolicy;
    "networking.k8s.io" "v1" "IngressClass" true => api::networking::v1::IngressClass;
    "autoscaling" "v2" "HorizontalPodAutoscaler" true => api::autoscaling::v2::HorizontalPodAutoscaler;
    "autoscaling" "v1" "HorizontalPodAutoscaler" true => api::autoscaling::v1::HorizontalPodAutoscaler;
    "autoscaling" "v1" "Scale" false => api::autoscaling::v1::Scale;
    "policy" "v1" "PodDisruptionBudget" true => api::policy::v1::PodDisruptionBudget;
    "scheduling.k8s.io" "v1" "PriorityClass" true => api::scheduling::v1::PriorityClass;
    "storage.k8s.io" "v1" "StorageClass" true => api::storage::v1::StorageClass;
    "authorization.k8s.io" "v1" "SelfSubjectAccessReview" false => api::authorization::v1::SelfSubjectAccessReview;
    "authorization.k8s.io" "v1" "SelfSubjectRulesReview" false => api::authorization::v1::SelfSubjectRulesReview;
    "authentication.k8s.io" "v1" "SelfSubjectReview" false => api::authentication::v1::SelfSubjectReview;
    "authentication.k8s.io" "v1" "TokenRequest" false => api::authentication::v1::TokenRequest;
    "" "v1" "Status" false => meta::Status;
    "" "v1" "Binding" false => api::core::v1::Binding;
    "" "v1" "ComponentStatus" true => api::core::v1::ComponentStatus;
    "" "v1" "Node" true => api::core::v1::Node;
    "" "v1" "PersistentVolume" true => api::core::v1::PersistentVolume;
    "" "v1" "PodTemplate" true => api::core::v1::PodTemplate;
    "" "v1" "ReplicationController" true => api::core::v1::ReplicationController;
    "policy" "v1" "Eviction" false => api::policy::v1::Eviction;
    "admissionregistration.k8s.io" "v1" "MutatingWebhookConfiguration" true =>
        api::admissionregistration::v1::MutatingWebhookConfiguration;
    "admissionregistration.k8s.io" "v1" "ValidatingWebhookConfiguration" true =>
        api::admissionregistration::v1::ValidatingWebhookConfiguration;
    "admissionregistration.k8s.io" "v1" "ValidatingAdmissionPolicy" true =>
        api::admissionregistration::v1::ValidatingAdmissionPolicy;
    "admissionregistration.k8s.io" "v1" "ValidatingAdmissionPolicyBinding" true =>
        api::admissionregistration::v1::ValidatingAdmissionPolicyBinding;
    "apiregistration.k8s.io" "v1" "APIService" true =>
        k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
    "authentication.k8s.io" "v1" "TokenReview" false => api::authentication::v1::TokenReview;
    "authorization.k8s.io" "v1" "SubjectAccessReview" false => api::authorization::v1::SubjectAccessReview;
    "authorization.k8s.io" "v1" "LocalSubjectAccessReview" false => api::authorization::v1::LocalSubjectAccessReview;
    "certificates.k8s.io" "v1" "CertificateSigningRequest" true => api::certificates::v1::CertificateSigningRequest;
    "flowcontrol.apiserver.k8s.io" "v1" "FlowSchema" true => api::flowcontrol::v1::FlowSchema;
    "flowcontrol.apiserver.k8s.io" "v1" "PriorityLevelConfiguration" true =>
        api::flowcontrol::v1::PriorityLevelConfiguration;
    "networking.k8s.io" "v1" "IPAddress" true => api::networking::v1::IPAddress;
    "networking.k8s.io" "v1" "ServiceCIDR" true => api::networking::v1::ServiceCIDR;
    "node.k8s.io" "v1" "RuntimeClass" true => api::node::v1::RuntimeClass;
    "storage.k8s.io" "v1" "CSIDriver" true => api::storage::v1::CSIDriver;
    "storage.k8s.io" "v1" "CSINode" true => api::storage::v1::CSINode;
    "storage.k8s.io" "v1" "CSIStorageCapacity" true => api::storage::v1::CSIStorageCapacity;
    "storage.k8s.io" "v1" "VolumeAttachment" true => api::storage::v1::VolumeAttachment;
}

/// Schemas every document may reference without them being kinds of their own.
pub(super) fn register_support(gen: &mut SchemaGenerator) {
    gen.subschema_for::<meta::DeleteOptions>();
    gen.subschema_for::<meta::Patch>();
    gen.subschema_for::<meta::ListMeta>();
    gen.subschema_for::<meta::ObjectMeta>();
}

/// Group of kgate's own tenancy API.
pub(super) const TENANCY_GROUP: &str = "tenancy.kgate.dev";
/// Version of kgate's own tenancy API.
pub(super) const TENANCY_VERSION: &str = "v1alpha1";
/// Definition name of `LogicalCluster`, named the way kube-openapi names CRD kinds.
pub(super) const LOGICAL_CLUSTER_DEF: &str = "dev.kgate.tenancy.v1alpha1.LogicalCluster";

/// The hand-written OpenAPI v3 schema of `tenancy.kgate.dev/v1alpha1` `LogicalCluster`.
pub(super) fn logical_cluster_schema() -> Value {
    let count = |d: &str| json!({"description": d, "type": "integer", "format": "int64", "minimum": 0});
    let condition = json!({
        "description": "A condition of the logical cluster.",
        "type": "object",
        "required": ["type", "status"],
        "properties": {
            "type": {"description": "Type of the condition, e.g. Ready.", "type": "string"},
            "status": {"description": "Status of the condition: True, False or Unknown.", "type": "string"},
            "reason": {"description": "Machine-readable reason for the last transition.", "type": "string"},
            "message": {"description": "Human-readable detail about the last transition.", "type": "string"},
            "lastTransitionTime": {
                "description": "When the condition last changed status.",
                "type": "string",
                "format": "date-time"
            }
        }
    });
    json!({
        "description": "LogicalCluster is a tenant cluster served by kgate under /clusters/<name>.",
        "type": "object",
        "properties": {
            "apiVersion": {
                "description": "APIVersion defines the versioned schema of this representation of an object.",
                "type": "string"
            },
            "kind": {
                "description": "Kind is a string value representing the REST resource this object represents.",
                "type": "string"
            },
            "metadata": {
                "description": "Standard object's metadata.",
                "default": {},
                "allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}]
            },
            "spec": {
                "description": "Spec of the logical cluster. It currently has no required fields.",
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": true,
                "properties": {
                    "shard": {
                        "description": "The shard (etcd cluster) this cluster's objects live on, one of the names kgate serves with --shard, or \"default\". Set at creation, by the platform or else to the shard with the fewest clusters. A change moves the objects there (status.shard says where they are until then).",
                        "type": "string"
                    },
                    "limits": {
                        "description": "Limits for this cluster alone, overriding the server's defaults.",
                        "type": "object",
                        "properties": {
                            "requestsInFlight": {
                                "description": "Requests of this cluster in flight at once before 429 (0: no limit); default --max-requests-inflight-per-cluster.",
                                "type": "integer",
                                "format": "int64",
                                "minimum": 0
                            },
                            "watches": {
                                "description": "Watches this cluster may hold open before 429 (0: no limit); default --max-watches-per-cluster.",
                                "type": "integer",
                                "format": "int64",
                                "minimum": 0
                            },
                            "objects": count("Objects (store keys) this cluster may hold; creates past it get 403."),
                            "storageBytes": count("Bytes this cluster's keys and values may take in the store; writes that grow past it get 403."),
                            "namespaces": count("Namespaces this cluster may hold; creates past it get 403."),
                            "customResourceDefinitions": count("CustomResourceDefinitions this cluster may hold; creates past it get 403.")
                        }
                    }
                }
            },
            "status": {
                "description": "Observed state of the logical cluster.",
                "type": "object",
                "properties": {
                    "phase": {
                        "description": "Lifecycle phase of the logical cluster.",
                        "type": "string",
                        "enum": ["Initializing", "Ready", "Terminating"]
                    },
                    "shard": {
                        "description": "While the cluster moves to the shard spec.shard names: the shard its objects are on. Set by the write that changes spec.shard, removed when the move is done; no client can set it.",
                        "type": "string"
                    },
                    "usage": {
                        "description": "What the cluster holds in the store, kept by kgate within seconds.",
                        "type": "object",
                        "properties": {
                            "objects": count("Objects (store keys) the cluster holds."),
                            "storageBytes": count("Bytes its keys and values take in the store."),
                            "namespaces": count("Namespaces the cluster holds."),
                            "customResourceDefinitions": count("CustomResourceDefinitions the cluster holds.")
                        }
                    },
                    "conditions": {
                        "description": "Current conditions of the logical cluster.",
                        "type": "array",
                        "items": condition,
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["type"]
                    }
                }
            }
        }
    })
}
