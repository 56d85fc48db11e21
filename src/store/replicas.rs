//! Replica heartbeats, from which outages are measured.

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;
use uuid::Uuid;

use super::StoreError;

/// What the clock task's planning query found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct Plan {
    /// The database's time.
    pub now: DateTime<Utc>,
    /// The earliest armed deadline of any match.
    pub next: Option<DateTime<Utc>>,
    /// Whether some replica had stamped itself alive within the threshold, in which case this
    /// one was stamped too. When none had, nothing is stamped: the caller must first give the
    /// outage back, and the last heartbeat still marks where the outage began.
    pub alive: bool,
}

/// The clock's planning query (see [`beat_and_plan`]).
pub const BEAT_AND_PLAN: &str = "WITH previous AS (SELECT max(last_seen) AS last FROM replicas),
          beat AS (
              INSERT INTO replicas (id, last_seen)
              SELECT $1, clock_timestamp() FROM previous
              WHERE previous.last >= clock_timestamp() - $2 * interval '1 millisecond'
              ON CONFLICT (id) DO UPDATE SET last_seen = excluded.last_seen
              RETURNING id
          )
     SELECT clock_timestamp() AS now, (SELECT min(wake_at) FROM matches) AS next,
            EXISTS (SELECT 1 FROM beat) AS alive";

/// Stamps this replica alive and, in the same statement, reads the database time and the
/// earliest wake-up of any clock (see `matches::claim_due`): the clock task's whole idle
/// cost is this one query.
pub async fn beat_and_plan(
    db: impl PgExecutor<'_>,
    replica: Uuid,
    threshold: chrono::Duration,
) -> Result<Plan, StoreError> {
    Ok(sqlx::query_as(BEAT_AND_PLAN)
        .bind(replica)
        .bind(threshold.num_milliseconds() as f64)
        .fetch_one(db)
        .await?)
}

/// The advisory lock that serialises outage recovery: "statkclk" as a big-endian integer.
const RECOVERY_LOCK: i64 = i64::from_be_bytes(*b"statkclk");

/// Serialises outage recovery so two replicas never both give back the same outage.
pub async fn lock_startup(db: impl PgExecutor<'_>) -> Result<(), StoreError> {
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(RECOVERY_LOCK)
        .execute(db)
        .await?;
    Ok(())
}

/// The latest heartbeat of any replica, and the database time.
pub async fn last_seen(
    db: impl PgExecutor<'_>,
) -> Result<(DateTime<Utc>, Option<DateTime<Utc>>), StoreError> {
    Ok(sqlx::query_as(
        "SELECT clock_timestamp() AS now, (SELECT max(last_seen) FROM replicas) AS last",
    )
    .fetch_one(db)
    .await?)
}

/// Records a heartbeat for `replica` at `at`.
pub async fn beat_at(
    db: impl PgExecutor<'_>,
    replica: Uuid,
    at: DateTime<Utc>,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO replicas (id, last_seen) VALUES ($1, $2)
         ON CONFLICT (id) DO UPDATE SET last_seen = excluded.last_seen",
    )
    .bind(replica)
    .bind(at)
    .execute(db)
    .await?;
    Ok(())
}

/// Forgets replicas not seen since `before` (each start adds a row).
pub async fn forget_before(
    db: impl PgExecutor<'_>,
    before: DateTime<Utc>,
) -> Result<u64, StoreError> {
    Ok(sqlx::query("DELETE FROM replicas WHERE last_seen < $1")
        .bind(before)
        .execute(db)
        .await?
        .rows_affected())
}
