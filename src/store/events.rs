//! The append-only event log.

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;
use sqlx::types::Json;
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

impl Columns {
    pub(super) fn with_capacity(n: usize) -> Self {
        Columns {
            seqs: Vec::with_capacity(n),
            actors: Vec::with_capacity(n),
            kinds: Vec::with_capacity(n),
            payloads: Vec::with_capacity(n),
        }
    }

    pub(super) fn extend(&mut self, other: Columns) {
        self.seqs.extend(other.seqs);
        self.actors.extend(other.actors);
        self.kinds.extend(other.kinds);
        self.payloads.extend(other.payloads);
    }
}

pub(super) fn columns(after: i64, events: &[Event]) -> Result<Columns, StoreError> {
    let mut columns = Columns::with_capacity(events.len());
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

#[cfg(feature = "test-support")]
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

/// Appends `events` as seq `after + 1`, `after + 2`, … in one statement. The application
/// writes through [`super::matches::write`], which also updates the row; this is for tests
/// and tools that build a log by hand.
#[cfg(feature = "test-support")]
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

/// A stored event as read, its payload decoded straight from the column.
#[derive(sqlx::FromRow)]
struct EventRow {
    seq: i64,
    at: DateTime<Utc>,
    payload: Json<Event>,
}

/// A page of one match's events.
pub const LIST: &str = "SELECT seq, at, payload FROM match_events
         WHERE match_id = $1 AND seq > $2 ORDER BY seq LIMIT $3";

/// Events of a match after `after`, in order, at most `limit`.
pub async fn list(
    db: impl PgExecutor<'_>,
    match_id: Uuid,
    after: i64,
    limit: i64,
) -> Result<Vec<StoredEvent>, StoreError> {
    let rows: Vec<EventRow> = sqlx::query_as(LIST)
        .bind(match_id)
        .bind(after)
        .bind(limit)
        .fetch_all(db)
        .await
        .map_err(super::unreadable_as_corrupt)?;
    Ok(rows
        .into_iter()
        .map(|row| StoredEvent {
            seq: row.seq,
            at: row.at,
            event: row.payload.0,
        })
        .collect())
}

/// The events of several matches, each from and to a position.
pub const LIST_RANGES: &str = "SELECT e.match_id, e.seq, e.at, e.payload
         FROM UNNEST($1::uuid[], $2::bigint[], $3::bigint[]) AS f(id, after, upto)
         JOIN match_events e ON e.match_id = f.id AND e.seq > f.after AND e.seq <= f.upto
         WHERE e.match_id = ANY($1)
         ORDER BY e.match_id, e.seq";

/// The events of several matches in one read: for each `(match, after, upto)`, its events
/// with `after < seq <= upto`, in order, each with its match.
pub async fn list_ranges(
    db: impl PgExecutor<'_>,
    ranges: &[(Uuid, i64, i64)],
) -> Result<Vec<(Uuid, StoredEvent)>, StoreError> {
    let ids: Vec<Uuid> = ranges.iter().map(|range| range.0).collect();
    let afters: Vec<i64> = ranges.iter().map(|range| range.1).collect();
    let uptos: Vec<i64> = ranges.iter().map(|range| range.2).collect();
    let rows: Vec<RangeRow> = sqlx::query_as(LIST_RANGES)
        .bind(&ids)
        .bind(&afters)
        .bind(&uptos)
        .fetch_all(db)
        .await
        .map_err(super::unreadable_as_corrupt)?;
    Ok(rows
        .into_iter()
        .map(|row| {
            (
                row.match_id,
                StoredEvent {
                    seq: row.seq,
                    at: row.at,
                    event: row.payload.0,
                },
            )
        })
        .collect())
}

#[derive(sqlx::FromRow)]
struct RangeRow {
    match_id: Uuid,
    seq: i64,
    at: DateTime<Utc>,
    payload: Json<Event>,
}

/// A stored event as read for [`logs`]: its match, and its payload as text, decoded per
/// match so one unreadable event spoils only its own match's log.
#[derive(sqlx::FromRow)]
struct LoggedRow {
    match_id: Uuid,
    seq: i64,
    at: DateTime<Utc>,
    payload: String,
}

/// A match's whole log as [`logs`] reads it, or why it does not decode.
pub type Log = Result<Vec<StoredEvent>, StoreError>;

/// The whole logs of `ids` in one query (each in order), for walks over many matches;
/// a match without events has an empty log.
pub async fn logs(
    db: impl PgExecutor<'_>,
    ids: &[Uuid],
) -> Result<std::collections::HashMap<Uuid, Log>, StoreError> {
    let rows: Vec<LoggedRow> = sqlx::query_as(
        "SELECT match_id, seq, at, payload::text AS payload FROM match_events
         WHERE match_id = ANY($1) ORDER BY match_id, seq",
    )
    .bind(ids)
    .fetch_all(db)
    .await?;
    let mut logs: std::collections::HashMap<Uuid, Log> =
        ids.iter().map(|&id| (id, Ok(Vec::new()))).collect();
    for row in rows {
        let Some(Ok(log)) = logs.get_mut(&row.match_id) else {
            continue;
        };
        match serde_json::from_str::<Event>(&row.payload) {
            Ok(event) => log.push(StoredEvent {
                seq: row.seq,
                at: row.at,
                event,
            }),
            Err(error) => {
                let detail = format!("event {}: {error}", row.seq);
                logs.insert(row.match_id, Err(StoreError::Corrupt(detail)));
            }
        }
    }
    Ok(logs)
}

/// How many events the whole log holds (tests use it to prove refusals store nothing).
#[cfg(feature = "test-support")]
pub async fn count_all(db: impl PgExecutor<'_>) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar("SELECT count(*) FROM match_events")
        .fetch_one(db)
        .await?)
}
