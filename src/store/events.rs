//! The append-only event log.

use chrono::{DateTime, Utc};
use sqlx::{PgExecutor, Row};
use uuid::Uuid;

use super::StoreError;
use crate::engine::Event;

/// An event as stored: its place in the match's log and when it happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredEvent {
    pub seq: i64,
    pub at: DateTime<Utc>,
    pub event: Event,
}

/// The columns of `events` numbered from `after + 1`, as arrays for one `UNNEST` insert.
pub(super) struct Columns {
    pub seqs: Vec<i64>,
    pub actors: Vec<Option<Uuid>>,
    pub kinds: Vec<&'static str>,
    pub payloads: Vec<serde_json::Value>,
}

pub(super) fn columns(after: i64, events: &[Event]) -> Result<Columns, StoreError> {
    let mut columns = Columns {
        seqs: Vec::with_capacity(events.len()),
        actors: Vec::with_capacity(events.len()),
        kinds: Vec::with_capacity(events.len()),
        payloads: Vec::with_capacity(events.len()),
    };
    for (offset, event) in (1..).zip(events) {
        columns.seqs.push(after + offset);
        columns.actors.push(event.actor());
        columns.kinds.push(event.kind());
        columns
            .payloads
            .push(serde_json::to_value(event).map_err(|e| StoreError::Corrupt(e.to_string()))?);
    }
    Ok(columns)
}

pub(super) fn stored(after: i64, at: DateTime<Utc>, events: &[Event]) -> Vec<StoredEvent> {
    (1..)
        .zip(events)
        .map(|(offset, event)| StoredEvent {
            seq: after + offset,
            at,
            event: event.clone(),
        })
        .collect()
}

/// Appends `events` as seq `after + 1`, `after + 2`, … in one statement. The service uses
/// [`super::matches::record`], which also updates the row; this is for tests and tools.
pub async fn append(
    db: impl PgExecutor<'_>,
    match_id: Uuid,
    after: i64,
    at: DateTime<Utc>,
    events: &[Event],
) -> Result<Vec<StoredEvent>, StoreError> {
    let columns = columns(after, events)?;
    sqlx::query(
        "INSERT INTO match_events (match_id, seq, at, actor, kind, payload)
         SELECT $1, seq, $2, actor, kind, payload
         FROM UNNEST($3::bigint[], $4::uuid[], $5::text[], $6::jsonb[]) AS e(seq, actor, kind, payload)",
    )
    .bind(match_id)
    .bind(at)
    .bind(&columns.seqs)
    .bind(&columns.actors)
    .bind(&columns.kinds)
    .bind(&columns.payloads)
    .execute(db)
    .await?;
    Ok(stored(after, at, events))
}

/// Appends the events of several matches in one statement: for each `(match, after,
/// events)`, `events` as seq `after + 1`, `after + 2`, … The clock uses it to record many
/// results in one round trip.
pub async fn append_many(
    db: impl PgExecutor<'_>,
    batch: &[(Uuid, i64, &[Event])],
    at: DateTime<Utc>,
) -> Result<Vec<Vec<StoredEvent>>, StoreError> {
    let total = batch.iter().map(|(_, _, events)| events.len()).sum();
    let mut ids = Vec::with_capacity(total);
    let mut all = Columns {
        seqs: Vec::with_capacity(total),
        actors: Vec::with_capacity(total),
        kinds: Vec::with_capacity(total),
        payloads: Vec::with_capacity(total),
    };
    let mut stored = Vec::with_capacity(batch.len());
    for &(match_id, after, events) in batch {
        let these = columns(after, events)?;
        ids.extend(std::iter::repeat_n(match_id, events.len()));
        all.seqs.extend(these.seqs);
        all.actors.extend(these.actors);
        all.kinds.extend(these.kinds);
        all.payloads.extend(these.payloads);
        stored.push(self::stored(after, at, events));
    }
    let Columns {
        seqs,
        actors,
        kinds,
        payloads,
    } = all;
    sqlx::query(
        "INSERT INTO match_events (match_id, seq, at, actor, kind, payload)
         SELECT match_id, seq, $1, actor, kind, payload
         FROM UNNEST($2::uuid[], $3::bigint[], $4::uuid[], $5::text[], $6::jsonb[])
              AS e(match_id, seq, actor, kind, payload)",
    )
    .bind(at)
    .bind(&ids)
    .bind(&seqs)
    .bind(&actors)
    .bind(&kinds)
    .bind(&payloads)
    .execute(db)
    .await?;
    Ok(stored)
}

/// Events of a match after `after`, in order, at most `limit`.
pub async fn list(
    db: impl PgExecutor<'_>,
    match_id: Uuid,
    after: i64,
    limit: i64,
) -> Result<Vec<StoredEvent>, StoreError> {
    let rows = sqlx::query(
        "SELECT seq, at, payload FROM match_events
         WHERE match_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
    )
    .bind(match_id)
    .bind(after)
    .bind(limit)
    .fetch_all(db)
    .await?;
    rows.into_iter()
        .map(|row| {
            let payload: serde_json::Value = row.try_get("payload")?;
            Ok(StoredEvent {
                seq: row.try_get("seq")?,
                at: row.try_get("at")?,
                event: serde_json::from_value(payload)
                    .map_err(|e| StoreError::Corrupt(e.to_string()))?,
            })
        })
        .collect()
}

/// How many events the whole log holds (tests use it to prove refusals store nothing).
pub async fn count_all(db: impl PgExecutor<'_>) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar("SELECT count(*) FROM match_events")
        .fetch_one(db)
        .await?)
}

/// Announces every `match_id:seq` of `payloads` on `channel`, delivered at commit.
pub async fn notify_many(
    db: impl PgExecutor<'_>,
    channel: &str,
    payloads: &[String],
) -> Result<(), StoreError> {
    sqlx::query("SELECT pg_notify($1, payload) FROM UNNEST($2::text[]) AS payload")
        .bind(channel)
        .bind(payloads)
        .execute(db)
        .await?;
    Ok(())
}
