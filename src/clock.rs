//! The deadline task: clocks are data in match rows, and every replica enforces them.
//!
//! Each replica sleeps until the earliest deadline (re-planning at least every second,
//! which is shorter than any clock, so a newly armed deadline is never overslept), then
//! claims due matches with `FOR UPDATE SKIP LOCKED` and applies the engine's expiry. The
//! replica's heartbeat rides on the planning query, so idling costs one query a second.

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::watch;
use uuid::Uuid;

use crate::service::{Result, Service};
use crate::store::replicas;

/// Longest sleep between two plans; also the heartbeat period.
pub const PLAN_INTERVAL: Duration = Duration::from_secs(1);
/// Matches claimed per transaction.
pub const BATCH: i64 = 64;
/// A gap in heartbeats longer than this is an outage whose time players get back.
pub const OUTAGE_THRESHOLD: chrono::Duration = chrono::Duration::seconds(3);

/// One step of the clock: enforces every deadline due by `now`. Tests drive this directly.
pub async fn sweep(service: &Service, now: DateTime<Utc>) -> Result<usize> {
    let changed = service.expire_due(now, BATCH).await?;
    if changed > 0 {
        metrics::counter!("statki_clock_expiries_total").increment(changed as u64);
    }
    Ok(changed)
}

/// Run once when a replica starts: if no replica was alive for longer than the threshold,
/// every clock still running past the last heartbeat is moved on by the outage, so nobody
/// loses to time the service was down. Returns how many matches got time back.
pub async fn recover_outage(service: &Service, replica: Uuid) -> Result<usize> {
    let mut tx = service.pool.begin().await?;
    replicas::lock_startup(&mut *tx).await?;
    let (now, last) = replicas::last_seen(&mut *tx).await?;
    let mut changed = 0;
    if let Some(last) = last {
        let outage = now - last;
        if outage > OUTAGE_THRESHOLD {
            changed = service.extend_clocks(&mut tx, last, outage, now).await?;
            tracing::warn!(
                outage_ms = outage.num_milliseconds(),
                matches = changed,
                "no replica was alive; clocks extended by the outage"
            );
        }
    }
    replicas::beat_at(&mut *tx, replica, now).await?;
    tx.commit().await?;
    Ok(changed)
}

/// The clock task of one replica, until `stop` turns true.
pub async fn run(service: Service, mut stop: watch::Receiver<bool>) {
    let replica = Uuid::now_v7();
    if let Err(error) = recover_outage(&service, replica).await {
        tracing::error!(%error, "outage recovery failed");
    }
    loop {
        let wait = match step(&service, replica).await {
            Ok(wait) => wait,
            Err(error) => {
                tracing::error!(%error, "clock step failed");
                PLAN_INTERVAL
            }
        };
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            _ = stop.changed() => return,
        }
        if *stop.borrow() {
            return;
        }
    }
}

async fn step(service: &Service, replica: Uuid) -> Result<Duration> {
    let (now, next) = replicas::beat_and_plan(&service.pool, replica).await?;
    let next = match next {
        Some(next) if next <= now => {
            sweep(service, now).await?;
            return Ok(Duration::ZERO);
        }
        Some(next) => next,
        None => return Ok(PLAN_INTERVAL),
    };
    let until = (next - now).to_std().unwrap_or_default();
    Ok(until.min(PLAN_INTERVAL))
}
