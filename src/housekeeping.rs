//! Periodic upkeep any replica may run: what accumulates is deleted by its retention
//! policy (idempotency keys after [`idempotency::KEY_LIFETIME`], player notices after
//! [`NOTICE_RETENTION`], replica heartbeats after [`HEARTBEAT_RETENTION`]; stream leases
//! are purged by each replica's renewal, rematch offers and queue entries by
//! matchmaking, and the event log is kept forever), and the gauges `/metrics` reports
//! from the database are refreshed here, so a scrape never queries the database. See
//! docs/operations.md, "Retention".

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use tokio::sync::watch;

use crate::store::{self, StoreError, idempotency};

/// How long a player's notices are kept (their latest is kept whatever its age).
pub const NOTICE_RETENTION: chrono::TimeDelta = chrono::TimeDelta::days(30);
/// How long a replica that stopped beating is remembered.
pub const HEARTBEAT_RETENTION: chrono::TimeDelta = chrono::TimeDelta::days(7);

/// What one [`purge`] deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Purged {
    pub keys: u64,
    pub notices: u64,
    pub heartbeats: u64,
}

/// Applies every retention policy at `now` (the database's time; tests pass a later one).
/// Each purge goes through an index on the age it is judged by, in batches, and replicas
/// running it at once share the work.
pub async fn purge(pool: &PgPool, now: DateTime<Utc>) -> Result<Purged, StoreError> {
    let keys = purge_expired_keys(pool, now).await?;
    let before = now - NOTICE_RETENTION;
    let mut notices = 0;
    loop {
        let deleted = store::notices::purge(pool, before, PURGE_BATCH).await?;
        notices += deleted;
        if deleted < PURGE_BATCH as u64 {
            break;
        }
    }
    let heartbeats = store::replicas::forget_before(pool, now - HEARTBEAT_RETENTION).await?;
    Ok(Purged {
        keys,
        notices,
        heartbeats,
    })
}

/// How often the retention policies are applied.
pub const PURGE_INTERVAL: Duration = Duration::from_secs(600);
/// How often the database gauges are refreshed.
pub const GAUGE_INTERVAL: Duration = Duration::from_secs(15);
/// Keys deleted per statement, so one purge never holds many locks for long.
const PURGE_BATCH: i64 = 5_000;

/// Deletes every idempotency key older than [`idempotency::KEY_LIFETIME`] at `now`.
/// Returns how many were deleted. Replicas running it at once share the work.
pub async fn purge_expired_keys(pool: &PgPool, now: DateTime<Utc>) -> Result<u64, StoreError> {
    let before = now - idempotency::KEY_LIFETIME;
    // Asked each round, never per command: the pool may be any database.
    let kind = store::citus::Kind::of(pool).await?;
    let mut total = 0;
    loop {
        let deleted = idempotency::purge(pool, kind, before, PURGE_BATCH).await?;
        total += deleted;
        if deleted < PURGE_BATCH as u64 {
            return Ok(total);
        }
    }
}

/// Reads the matches per phase into the `statki_matches` gauge.
pub async fn refresh_gauges(pool: &PgPool) -> Result<(), StoreError> {
    let kind = store::citus::Kind::of(pool).await?;
    for (phase, count) in store::matches::count_by_phase(pool, kind).await? {
        metrics::gauge!("statki_matches", "phase" => phase).set(count as f64);
    }
    Ok(())
}

/// Runs the purge and the gauge refresh on their intervals until `stop`.
pub async fn run(pool: PgPool, mut stop: watch::Receiver<bool>) {
    let mut purges = tokio::time::interval(PURGE_INTERVAL);
    let mut gauges = tokio::time::interval(GAUGE_INTERVAL);
    purges.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    gauges.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = purges.tick() => {
                let purged = match store::now(&pool).await {
                    Ok(now) => purge(&pool, now).await,
                    Err(error) => Err(error),
                };
                match purged {
                    Ok(purged) if purged == Purged::default() => {}
                    Ok(purged) => tracing::info!(
                        keys = purged.keys,
                        notices = purged.notices,
                        heartbeats = purged.heartbeats,
                        "retention purge"
                    ),
                    Err(error) => tracing::warn!(%error, "retention purge failed"),
                }
            }
            _ = gauges.tick() => {
                if let Err(error) = refresh_gauges(&pool).await {
                    tracing::warn!(%error, "refreshing gauges failed");
                }
            }
            _ = stop.changed() => return,
        }
    }
}
