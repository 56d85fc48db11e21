//! The integration tests, one binary: each module is one area (the API, the clocks, the
//! ladder, ...); the shared harnesses compile once and every helper is used by some test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod engine_support;
mod fleets;
mod ladder_support;

mod accounts;
mod api;
mod audit;
mod bot_strategies;
mod bots;
mod caching;
mod citus;
mod citus_faults;
mod clock;
mod cluster;
mod contract;
mod distributable;
mod engine_properties;
mod engine_rules;
mod export;
mod fault_campaign;
mod faults;
mod ha;
mod hardening;
mod hints;
mod ladder;
mod live;
mod matches;
mod plans;
mod queue;
mod refusals;
mod root_home;
mod scale;
mod store;
mod verify;
