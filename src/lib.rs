//! Statki: an authoritative HTTP/JSON Battleship service.
//!
//! - [`engine`]: the pure rules (no I/O, clock or randomness).
//! - [`store`]: the only module that speaks SQL.
//! - [`live`]: LISTEN/NOTIFY fan-out of committed events to server-sent event streams.
//! - [`accounts`]: passwords, log-in, token refresh and revocation on every replica.
//! - [`embedded_pg`]: a private PostgreSQL cluster for the zero-configuration default.

pub mod accounts;
pub mod auth;
pub mod clock;
pub mod config;
pub mod embedded_pg;
pub mod engine;
pub mod http;
pub mod ladder;
pub mod live;
pub mod matchmaking;
pub mod service;
pub mod store;
pub mod verify;
