//! The deadline task: clocks are data in match rows, and every replica enforces them.
//!
//! Each replica sleeps until the earliest wake-up, re-planning at least every second. A
//! match's `wake_at` is a lower bound of its deadline that commands leave alone when they
//! move the deadline later (so a shot's row update stays heap-only); the clock raises it to
//! the real deadline when it wakes for a match that is not due yet. No
//! clock is shorter than that (clocks are whole seconds; an unranked lobby may pick 2 s at
//! the least), so a deadline armed by any replica is never overslept, and no wake-up channel
//! is needed. Due matches are claimed with
//! `FOR UPDATE SKIP LOCKED` in small batches, so replicas share the work without a leader
//! and never handle one match twice; the engine re-checks each claimed match's deadline
//! against its locked state, so a command that moved the clock first wins.
//!
//! The replica's heartbeat rides on the planning query, so idling costs one query a second.
//! When that query finds no heartbeat younger than [`OUTAGE_THRESHOLD`] (every replica was
//! down, or the database unreachable), the replica first gives every running clock the
//! outage back ([`recover_outage`]), so nobody loses to time the service was down.

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::watch;
use uuid::Uuid;

use crate::app::{App, Result};

/// Longest sleep between two plans; also the heartbeat period.
pub const PLAN_INTERVAL: Duration = Duration::from_secs(1);
/// Matches claimed per transaction: small, so a batch commits (and its players hear of it)
/// within milliseconds, and the heartbeat is renewed between batches.
pub const BATCH: i64 = 32;
/// A gap in heartbeats longer than this is an outage whose time players get back.
pub use crate::app::OUTAGE_THRESHOLD;
/// Pause before retrying when every due match is held by another transaction (a replica
/// working through it, or a command that will move or keep its deadline within moments).
pub const BUSY_RETRY: Duration = Duration::from_millis(20);
/// Most batches one replica works on at once when a backlog builds up.
pub const MAX_LANES: usize = 4;

/// Enforces every deadline due by `now`, batch after batch. Tests drive the clock with it.
pub async fn sweep(app: &App, now: DateTime<Utc>) -> Result<usize> {
    let changed = app.expire_due(now, BATCH).await?;
    record(changed);
    Ok(changed)
}

fn record(expired: usize) {
    if expired > 0 {
        metrics::counter!("statki_clock_expiries_total").increment(expired as u64);
    }
}

/// Gives players back the time of an outage, measured by the database's clock. Runs when a
/// replica finds no live heartbeat; see [`recover_outage_at`].
pub async fn recover_outage(app: &App, replica: Uuid) -> Result<usize> {
    recover(app, replica, None).await
}

/// Gives players back the time of an outage ending at `now`: if no replica recorded a
/// heartbeat for longer than [`OUTAGE_THRESHOLD`] before `now`, every clock still running
/// past the last heartbeat is moved on by the gap, so each player has again what they had
/// left when the last replica went quiet. A deadline before the last heartbeat passed while
/// a replica was alive, and is enforced as usual. Serialised across replicas, so an outage
/// is given back once. Returns how many matches got time back. Tests pass `now`.
pub async fn recover_outage_at(app: &App, replica: Uuid, now: DateTime<Utc>) -> Result<usize> {
    recover(app, replica, Some(now)).await
}

async fn recover(app: &App, replica: Uuid, at: Option<DateTime<Utc>>) -> Result<usize> {
    let Some((outage, changed)) = app.recover_outage(replica, at, OUTAGE_THRESHOLD).await? else {
        return Ok(0);
    };
    tracing::warn!(
        outage_ms = outage.num_milliseconds(),
        matches = changed,
        "no replica was alive; clocks extended by the outage"
    );
    metrics::counter!("statki_clock_outages_total").increment(1);
    Ok(changed)
}

/// The clock task of one replica, until `stop` turns true. Every replica runs one; they
/// share the work through the database and need no leader.
pub async fn run(app: App, mut stop: watch::Receiver<bool>) {
    let replica = Uuid::now_v7();
    // Up to half the replica's connections, so requests keep being served.
    let lanes = (app.connections() / 2).clamp(1, MAX_LANES);
    tracing::info!(%replica, lanes, "clock task started");
    let mut pace = Pace::default();
    loop {
        let wait = match step(&app, replica, lanes, &mut pace).await {
            Ok(wait) => wait,
            Err(error) => {
                tracing::error!(%error, "clock step failed");
                pace = Pace::default();
                PLAN_INTERVAL
            }
        };
        if *stop.borrow() {
            return;
        }
        if !wait.is_zero() {
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                _ = stop.changed() => return,
            }
        }
    }
}

/// What the previous step saw, which sets the pace of the next.
#[derive(Clone, Copy, Debug, Default)]
struct Pace {
    /// The last batch was full: more is due than one batch holds.
    backlog: bool,
    /// Consecutive steps that found due matches all held by other transactions.
    busy: u32,
}

/// Beats, plans, and handles at most one round of batches, so the heartbeat stays fresh
/// however long the backlog. Returns how long to sleep before the next step.
async fn step(app: &App, replica: Uuid, lanes: usize, pace: &mut Pace) -> Result<Duration> {
    let plan = app.beat_and_plan(replica, OUTAGE_THRESHOLD).await?;
    if !plan.alive {
        // Nobody, this replica included, was recorded alive lately: give the time back
        // before enforcing anything.
        recover_outage(app, replica).await?;
        *pace = Pace::default();
        return Ok(Duration::ZERO);
    }
    let next = match plan.next {
        Some(next) if next <= plan.now => next,
        Some(next) => {
            *pace = Pace::default();
            metrics::gauge!("statki_clock_behind_seconds").set(0.0);
            let until = (next - plan.now).to_std().unwrap_or_default();
            return Ok(until.min(PLAN_INTERVAL));
        }
        None => {
            *pace = Pace::default();
            metrics::gauge!("statki_clock_behind_seconds").set(0.0);
            return Ok(PLAN_INTERVAL);
        }
    };
    let lanes = if pace.backlog { lanes } else { 1 };
    let rounds =
        futures::future::join_all((0..lanes).map(|_| app.expire_batch(plan.now, BATCH))).await;
    let (mut claimed, mut expired, mut rearmed, mut full) = (0, 0, 0, false);
    for round in rounds {
        let round = round?;
        claimed += round.claimed;
        expired += round.expired;
        rearmed += round.rearmed;
        full |= round.claimed as i64 == BATCH;
    }
    record(expired);
    // How far behind its earliest deadline the clock is: what an operator alerts on.
    let behind = (plan.now - next).to_std().unwrap_or_default();
    metrics::gauge!("statki_clock_behind_seconds").set(behind.as_secs_f64());
    pace.backlog = full;
    Ok(if expired + rearmed > 0 {
        // Expired some, or woke early for clocks that commands had moved on (re-armed for
        // their real deadlines): plan again at once.
        pace.busy = 0;
        Duration::ZERO
    } else if claimed == 0 {
        // Held elsewhere: a replica working through them, or a command about to commit.
        pace.busy = pace.busy.saturating_add(1);
        (BUSY_RETRY * 2u32.pow((pace.busy - 1).min(6))).min(PLAN_INTERVAL)
    } else {
        // Claimed but none could be expired (an unreadable match, logged by the service):
        // retry at the normal pace rather than spin on it.
        PLAN_INTERVAL
    })
}
