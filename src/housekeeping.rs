//! Periodic upkeep any replica may run: expired idempotency keys are deleted, and the
//! gauges `/metrics` reports from the database are refreshed here, so a scrape never
//! queries the database.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use tokio::sync::watch;

use crate::store::{self, StoreError, idempotency};

/// How often the keys are purged.
pub const PURGE_INTERVAL: Duration = Duration::from_secs(600);
/// How often the database gauges are refreshed.
pub const GAUGE_INTERVAL: Duration = Duration::from_secs(15);
/// Keys deleted per statement, so one purge never holds many locks for long.
const PURGE_BATCH: i64 = 5_000;

/// Deletes every idempotency key older than [`idempotency::KEY_LIFETIME`] at `now`.
/// Returns how many were deleted. Replicas running it at once share the work.
pub async fn purge_expired_keys(pool: &PgPool, now: DateTime<Utc>) -> Result<u64, StoreError> {
    let before = now - idempotency::KEY_LIFETIME;
    let mut total = 0;
    loop {
        let deleted = idempotency::purge(pool, before, PURGE_BATCH).await?;
        total += deleted;
        if deleted < PURGE_BATCH as u64 {
            return Ok(total);
        }
    }
}

/// Reads the matches per phase into the `statki_matches` gauge.
pub async fn refresh_gauges(pool: &PgPool) -> Result<(), StoreError> {
    for (phase, count) in store::matches::count_by_phase(pool).await? {
        metrics::gauge!("statki_matches", "phase" => phase).set(count as f64);
    }
    Ok(())
}

/// Runs the purge and the gauge refresh on their intervals until `stop`.
pub async fn run(pool: PgPool, mut stop: watch::Receiver<bool>) {
    let mut purge = tokio::time::interval(PURGE_INTERVAL);
    let mut gauges = tokio::time::interval(GAUGE_INTERVAL);
    purge.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    gauges.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = purge.tick() => {
                let purged = match store::now(&pool).await {
                    Ok(now) => purge_expired_keys(&pool, now).await,
                    Err(error) => Err(error),
                };
                match purged {
                    Ok(0) => {}
                    Ok(purged) => tracing::info!(purged, "expired idempotency keys deleted"),
                    Err(error) => tracing::warn!(%error, "purging idempotency keys failed"),
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
