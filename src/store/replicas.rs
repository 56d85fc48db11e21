//! Replica heartbeats, from which outages are measured.

use chrono::{DateTime, Utc};
use sqlx::{PgExecutor, Row};
use uuid::Uuid;

use super::StoreError;

/// Stamps this replica alive and, in the same statement, reads the database time and the
/// earliest armed deadline: the clock task's whole idle cost is this one query.
pub async fn beat_and_plan(
    db: impl PgExecutor<'_>,
    replica: Uuid,
) -> Result<(DateTime<Utc>, Option<DateTime<Utc>>), StoreError> {
    let row = sqlx::query(
        "WITH beat AS (
             INSERT INTO replicas (id, last_seen) VALUES ($1, clock_timestamp())
             ON CONFLICT (id) DO UPDATE SET last_seen = excluded.last_seen
         )
         SELECT clock_timestamp() AS now, (SELECT min(deadline) FROM matches) AS next",
    )
    .bind(replica)
    .fetch_one(db)
    .await?;
    Ok((row.try_get("now")?, row.try_get("next")?))
}

/// The advisory lock that serialises outage recovery: "statkclk" as a big-endian integer.
const RECOVERY_LOCK: i64 = i64::from_be_bytes(*b"statkclk");

/// Serialises replica start-ups so two replicas never both give back the same outage.
pub async fn lock_startup(db: impl PgExecutor<'_>) -> Result<(), StoreError> {
    // A bound integer: the old literal `7465727461746b69` is not a number to PostgreSQL, so
    // every recovery failed and outages were never given back.
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
    let row = sqlx::query(
        "SELECT clock_timestamp() AS now, (SELECT max(last_seen) FROM replicas) AS last",
    )
    .fetch_one(db)
    .await?;
    Ok((row.try_get("now")?, row.try_get("last")?))
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
