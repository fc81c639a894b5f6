//! The HTTP edge: TLS listener, request routing and response building.
mod actions;
pub mod body;
pub mod coalesce;
mod components;
pub mod conn;
pub mod edge;
pub mod fanout;
pub mod handler;
pub mod heavy;
pub mod inflight;
pub mod meter;
pub mod respond;
pub mod server;
pub mod token_checks;
pub mod tokens;
