//! Statki: an authoritative HTTP/JSON Battleship service.
//!
//! - [`engine`]: the pure rules (no I/O, clock or randomness).

pub mod engine;
