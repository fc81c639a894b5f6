//! kgate: one server that serves the Kubernetes API for many logical clusters.
//!
//! A request flows top to bottom through these modules: `http` (TLS, routing) -> `cluster` and `request`
//! (which cluster, which resource, which verb) -> `auth` -> `discovery` / `openapi` / `registry`
//! (generic verbs, with `patch`, `selector`, `table`, `proto`) -> `storage` (embedded or etcd), and
//! `watch` for streams. `tenancy` knows which logical clusters exist.
#![warn(missing_docs)]

pub mod audit;
pub mod auth;
pub mod authz;
pub mod budget;
pub mod cli;
pub mod cluster;
pub mod codec;
pub mod config;
pub mod crd;
pub mod discovery;
pub mod epochs;
pub mod fuzzing;
pub mod gc;
pub mod http;
pub mod leader;
pub mod meta;
pub mod metrics;
pub mod openapi;
pub mod patch;
pub mod pki;
pub mod proto;
pub mod rbac;
pub mod registry;
pub mod request;
pub mod resources;
pub mod selector;
pub mod server;
pub mod shard;
pub mod status;
pub mod storage;
pub mod table;
pub mod tenancy;
pub mod token;
pub mod turns;
pub mod usage;
pub mod watch;
