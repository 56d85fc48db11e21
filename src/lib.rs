//! Statki: an authoritative HTTP/JSON Battleship service.
//!
//! - [`engine`]: the pure rules (no I/O, clock or randomness).
//! - [`app`]: the use cases, between `http` and `store`, with the one write path.
//! - [`http`]: the HTTP face: routers, extractors, problem+json errors.
//! - [`store`]: the only module that speaks SQL.
//! - [`clock`] and the matchmaking sweep: background steps that call the use cases.
//! - [`live`]: LISTEN/NOTIFY fan-out of committed events to server-sent event streams.

pub mod app;
pub mod auth;
pub mod clock;
pub mod config;
pub mod engine;
pub mod http;
pub mod live;
pub mod store;
pub mod verify;
