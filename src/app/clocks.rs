//! Clocks as use cases: enforcing run-out deadlines in batches, and giving back time lost
//! while no replica was alive. `crate::clock` decides when these run.

use chrono::{DateTime, Duration, Utc};
use uuid::Uuid;

use super::write::{self, Change};
use super::{App, Result};
use crate::store::citus::Kind;
use crate::store::matches;
use crate::store::replicas::{self, Plan};

/// What one batch of the clock came to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Expired {
    /// Due matches claimed (locked) by the batch.
    pub claimed: usize,
    /// Of those, how many were expired.
    pub expired: usize,
    /// Of those, how many were not due yet (commands had moved their deadline later) and
    /// were re-armed for their real deadline.
    pub rearmed: usize,
}

/// Heartbeats older than this are removed when a replica recovers from an outage.
const FORGET_AFTER: Duration = Duration::days(7);

/// A gap in heartbeats longer than this is an outage whose time players get back. Twice the
/// heartbeat period (`crate::clock::PLAN_INTERVAL`), so a slow step is not mistaken for an
/// outage.
pub const OUTAGE_THRESHOLD: Duration = Duration::seconds(2);

/// Whether a run-out clock found by a command at `now` may be enforced yet: not while the
/// heartbeats have a gap longer than [`OUTAGE_THRESHOLD`] that no replica has given back.
/// That gap is an outage (the whole database, or on Citus the worker holding the match,
/// stalls the clock's plan, which reads every shard): the deadline may have passed only
/// because nobody could play, and the clock's recovery, due within a heartbeat, moves it
/// on first. With no heartbeat at all (no clock task has run on this database) there is
/// no outage to give back.
pub(crate) async fn may_enforce(conn: &mut sqlx::PgConnection, now: DateTime<Utc>) -> Result<bool> {
    let (_, last) = replicas::last_seen(&mut *conn).await?;
    Ok(last.is_none_or(|last| now - last <= OUTAGE_THRESHOLD))
}

impl App {
    /// Applies the engine's expiry to every match whose clock ran out by `now`, in batches
    /// of `batch` rows claimed with `SKIP LOCKED`, so replicas share the work and never
    /// handle one match twice. Returns how many matches changed.
    #[tracing::instrument(skip(self))]
    pub async fn expire_due(&self, now: DateTime<Utc>, batch: i64) -> Result<usize> {
        let mut changed = 0;
        loop {
            let round = self.expire_batch(now, batch).await?;
            changed += round.expired;
            if round.expired + round.rearmed == 0 || (round.claimed as i64) < batch {
                return Ok(changed);
            }
        }
    }

    /// One transaction of [`App::expire_due`]: claims up to `limit` due matches and
    /// expires each that is still in the state that armed its deadline.
    #[tracing::instrument(skip(self))]
    pub async fn expire_batch(&self, now: DateTime<Utc>, limit: i64) -> Result<Expired> {
        let mut tx = self.begin().await?;
        let kind = self.kind(&mut tx).await?;
        let due = matches::claim_due(&mut tx, kind, now, limit).await?;
        let claimed = due.len();
        let mut changes = Vec::with_capacity(claimed);
        let mut early = Vec::new();
        for matches::Locked { id, row } in due {
            let row = match row {
                Ok(row) => row,
                Err(error) => {
                    tracing::error!(
                        match_id = %id, %error,
                        "a due match is unreadable; its clock is not enforced"
                    );
                    continue;
                }
            };
            // The row is locked as it stands now, and the engine re-checks its deadline: a
            // command that moved the clock first wins, and nothing is enforced twice.
            match row.state.expire(now) {
                Ok(events) => {
                    changes.push(Change::existing(row, events));
                }
                Err(_) => match row.state.deadline {
                    Some(deadline) if deadline > now => early.push((row.id, Some(deadline))),
                    deadline => {
                        // Due by its deadline yet not expirable: nothing to wake for.
                        tracing::error!(match_id = %row.id, ?deadline, "a clock that cannot run out");
                        early.push((row.id, None));
                    }
                },
            }
        }
        let expired = changes.len();
        if expired > 0 {
            write::apply(&mut tx, kind, changes, now).await?;
        }
        let rearmed = early.len();
        if rearmed > 0 {
            matches::rearm(&mut *tx, &early).await?;
        }
        tx.commit().await?;
        Ok(Expired {
            claimed,
            expired,
            rearmed,
        })
    }

    /// Records this replica's heartbeat and reads when the next clock is due.
    #[tracing::instrument(skip(self))]
    pub async fn beat_and_plan(&self, replica: Uuid, outage: Duration) -> Result<Plan> {
        Ok(replicas::beat_and_plan(self.pool(), replica, outage).await?)
    }

    /// Gives players back the time of an outage ending at `at` (the database's time when
    /// `None`): if no replica recorded a heartbeat for longer than `threshold` before then,
    /// every clock still running past the last heartbeat is moved on by the gap, so each
    /// player has again what they had left when the last replica went quiet. Serialised
    /// across replicas, so an outage is given back once. Returns the outage given back and
    /// how many matches got time back.
    #[tracing::instrument(skip(self))]
    pub async fn recover_outage(
        &self,
        replica: Uuid,
        at: Option<DateTime<Utc>>,
        threshold: Duration,
    ) -> Result<Option<(Duration, usize)>> {
        let mut tx = self.begin().await?;
        replicas::lock_startup(&mut *tx).await?;
        let (db_now, last) = replicas::last_seen(&mut *tx).await?;
        let now = at.unwrap_or(db_now);
        let mut given = None;
        if let Some(last) = last {
            // Whole milliseconds, rounded up, so the logged extension is exactly what was
            // given.
            let micros = (now - last).num_microseconds().unwrap_or(i64::MAX);
            let outage = Duration::milliseconds(micros.saturating_add(999) / 1000);
            if outage > threshold {
                let kind = self.kind(&mut tx).await?;
                let changed = extend_clocks(&mut tx, kind, last, outage, now).await?;
                given = Some((outage, changed));
            }
        }
        replicas::beat_at(&mut *tx, replica, now).await?;
        replicas::forget_before(&mut *tx, now - FORGET_AFTER).await?;
        tx.commit().await?;
        Ok(given)
    }
}

/// Gives back `by` to every running clock whose deadline is after `since`. A clock re-armed
/// since it was listed (a command got in first) is fresh and left alone.
async fn extend_clocks(
    tx: &mut super::committed::Tx,
    kind: Kind,
    since: DateTime<Utc>,
    by: Duration,
    now: DateTime<Utc>,
) -> Result<usize> {
    let listed = matches::with_deadline_after(&mut **tx, since).await?;
    let ids: Vec<Uuid> = listed.iter().map(|(id, _)| *id).collect();
    let (locked, _) = matches::lock_many(tx, kind, &ids).await?;
    let mut changes = Vec::new();
    for matches::Locked { id, row } in locked {
        let Ok(row) = row else { continue };
        let listed_deadline = listed.iter().find(|(listed, _)| *listed == id);
        if listed_deadline.map(|(_, deadline)| Some(*deadline)) != Some(row.state.deadline) {
            continue;
        }
        let Ok(events) = row.state.extend_clock(by) else {
            continue;
        };
        changes.push(Change::existing(row, events));
    }
    let changed = changes.len();
    if changed > 0 {
        write::apply(tx, kind, changes, now).await?;
    }
    Ok(changed)
}
