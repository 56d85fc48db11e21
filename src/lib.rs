//! Statki: an authoritative HTTP/JSON Battleship service.
//!
//! - [`engine`]: the pure rules (no I/O, clock or randomness).
//! - [`store`]: the only module that speaks SQL.
//! - [`live`]: LISTEN/NOTIFY fan-out of committed events to server-sent event streams.
//! - [`embedded_pg`]: a private PostgreSQL cluster for the zero-configuration default.

pub mod auth;
pub mod clock;
pub mod config;
pub mod embedded_pg;
pub mod engine;
pub mod housekeeping;
pub mod http;
pub mod ladder;
pub mod live;
pub mod matchmaking;
pub mod names;
pub mod service;
pub mod store;
pub mod verify;
