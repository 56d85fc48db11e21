//! Match rows: the current state of each match, kept in step with its events.

use chrono::{DateTime, Utc};
use sqlx::types::Json;
use sqlx::{PgExecutor, Row};
use uuid::Uuid;

use super::events::StoredEvent;
use super::{StoreError, classify};
use crate::engine::{Event, Match, Snapshot};

/// A match as loaded from its row.
#[derive(Clone, Debug)]
pub struct MatchRow {
    pub id: Uuid,
    pub state: Match,
    pub last_seq: i64,
    pub created_at: DateTime<Utc>,
}

fn decode(row: &sqlx::postgres::PgRow) -> Result<MatchRow, StoreError> {
    // Decoded straight from the column's text: no intermediate JSON tree on the hot path.
    let Json(snapshot): Json<Snapshot> = row
        .try_get("snapshot")
        .map_err(|e| StoreError::Corrupt(format!("snapshot: {e}")))?;
    let state = Match::from_snapshot(&snapshot).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    Ok(MatchRow {
        id: row.try_get("id")?,
        state,
        last_seq: row.try_get("last_seq")?,
        created_at: row.try_get("created_at")?,
    })
}

fn finish_reason(reason: crate::engine::FinishReason) -> String {
    serde_json::to_value(reason)
        .ok()
        .and_then(|value| value.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn snapshot_json(state: &Match) -> Result<Json<Snapshot>, StoreError> {
    Ok(Json(state.snapshot()))
}

/// Inserts a new match row (its first event is appended by the caller).
pub async fn insert(
    db: impl PgExecutor<'_>,
    id: Uuid,
    state: &Match,
    at: DateTime<Utc>,
) -> Result<(), StoreError> {
    let creator = state
        .player(0)
        .ok_or_else(|| StoreError::Corrupt("no creator".into()))?;
    sqlx::query(
        "INSERT INTO matches (id, ruleset, ranked, phase, creator, invited, deadline, last_seq,
                              snapshot, created_at, updated_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, 0, $8, $9, $9)",
    )
    .bind(id)
    .bind(state.rules.ruleset.as_str())
    .bind(state.ranked)
    .bind(state.phase.as_str())
    .bind(creator)
    .bind(state.invited)
    .bind(state.deadline)
    .bind(snapshot_json(state)?)
    .bind(at)
    .execute(db)
    .await
    .map_err(classify)?;
    Ok(())
}

/// Loads and locks a match row for the rest of the transaction, with the database's time.
pub async fn lock(
    db: impl PgExecutor<'_>,
    id: Uuid,
) -> Result<Option<(MatchRow, DateTime<Utc>)>, StoreError> {
    let row = sqlx::query(
        "SELECT id, snapshot, last_seq, created_at, clock_timestamp() AS now
         FROM matches WHERE id = $1 FOR UPDATE",
    )
    .bind(id)
    .fetch_optional(db)
    .await?;
    row.map(|row| Ok((decode(&row)?, row.try_get("now")?)))
        .transpose()
}

/// Loads a match row without locking it.
pub async fn get(db: impl PgExecutor<'_>, id: Uuid) -> Result<Option<MatchRow>, StoreError> {
    let row = sqlx::query("SELECT id, snapshot, last_seq, created_at FROM matches WHERE id = $1")
        .bind(id)
        .fetch_optional(db)
        .await?;
    row.as_ref().map(decode).transpose()
}

/// The columns of a match row that copy its state.
struct Columns {
    phase: &'static str,
    joiner: Option<Uuid>,
    turn: Option<Uuid>,
    deadline: Option<DateTime<Utc>>,
    winner: Option<Uuid>,
    reason: Option<String>,
    snapshot: Json<Snapshot>,
}

fn columns(state: &Match) -> Result<Columns, StoreError> {
    Ok(Columns {
        phase: state.phase.as_str(),
        joiner: state.player(1),
        turn: state.turn.and_then(|seat| state.player(seat)),
        deadline: state.deadline,
        winner: state.result.and_then(|result| result.winner),
        reason: state.result.map(|result| finish_reason(result.reason)),
        snapshot: snapshot_json(state)?,
    })
}

/// Writes a match's new state after appending events up to `last_seq`.
pub async fn update(
    db: impl PgExecutor<'_>,
    id: Uuid,
    state: &Match,
    last_seq: i64,
    at: DateTime<Utc>,
) -> Result<(), StoreError> {
    update_many(db, &[(id, state, last_seq)], at).await
}

/// Appends `events` after `after`, writes the match's new state, and announces
/// `match_id:last_seq` on `channel` at commit — one statement, so a command costs one round
/// trip for all three.
pub async fn record(
    db: impl PgExecutor<'_>,
    id: Uuid,
    after: i64,
    at: DateTime<Utc>,
    events: &[Event],
    state: &Match,
    channel: &str,
) -> Result<Vec<StoredEvent>, StoreError> {
    let columns = super::events::columns(after, events)?;
    let last_seq = after + i64::try_from(events.len()).unwrap_or(i64::MAX);
    let row = self::columns(state)?;
    sqlx::query(
        "WITH appended AS (
             INSERT INTO match_events (match_id, seq, at, actor, kind, payload)
             SELECT $1, seq, $2, actor, kind, payload
             FROM UNNEST($3::bigint[], $4::uuid[], $5::text[], $6::jsonb[])
                  AS e(seq, actor, kind, payload)
             RETURNING seq
         ), updated AS (
             UPDATE matches SET phase = $7, joiner = $8, turn = $9, deadline = $10, winner = $11,
                    reason = $12, last_seq = $13, snapshot = $14, updated_at = $2
             WHERE id = $1
             RETURNING id
         )
         SELECT (SELECT count(*) FROM appended) AS appended,
                (SELECT count(*) FROM updated) AS updated,
                pg_notify($15, $1::text || ':' || $13::text)",
    )
    .bind(id)
    .bind(at)
    .bind(&columns.seqs)
    .bind(&columns.actors)
    .bind(&columns.kinds)
    .bind(&columns.payloads)
    .bind(row.phase)
    .bind(row.joiner)
    .bind(row.turn)
    .bind(row.deadline)
    .bind(row.winner)
    .bind(row.reason)
    .bind(last_seq)
    .bind(row.snapshot)
    .bind(channel)
    .execute(db)
    .await
    .map_err(classify)?;
    Ok(super::events::stored(after, at, events))
}

/// [`update`] for several matches in one statement: each `(id, state, last_seq)`.
pub async fn update_many(
    db: impl PgExecutor<'_>,
    batch: &[(Uuid, &Match, i64)],
    at: DateTime<Utc>,
) -> Result<(), StoreError> {
    let mut ids = Vec::with_capacity(batch.len());
    let mut phases = Vec::with_capacity(batch.len());
    let mut joiners = Vec::with_capacity(batch.len());
    let mut turns = Vec::with_capacity(batch.len());
    let mut deadlines = Vec::with_capacity(batch.len());
    let mut winners = Vec::with_capacity(batch.len());
    let mut reasons = Vec::with_capacity(batch.len());
    let mut seqs = Vec::with_capacity(batch.len());
    let mut snapshots = Vec::with_capacity(batch.len());
    for &(id, state, last_seq) in batch {
        let row = columns(state)?;
        ids.push(id);
        phases.push(row.phase);
        joiners.push(row.joiner);
        turns.push(row.turn);
        deadlines.push(row.deadline);
        winners.push(row.winner);
        reasons.push(row.reason);
        seqs.push(last_seq);
        snapshots.push(row.snapshot);
    }
    sqlx::query(
        "UPDATE matches SET phase = u.phase, joiner = u.joiner, turn = u.turn,
                deadline = u.deadline, winner = u.winner, reason = u.reason,
                last_seq = u.last_seq, snapshot = u.snapshot, updated_at = $1
         FROM UNNEST($2::uuid[], $3::text[], $4::uuid[], $5::uuid[], $6::timestamptz[],
                     $7::uuid[], $8::text[], $9::bigint[], $10::jsonb[])
              AS u(id, phase, joiner, turn, deadline, winner, reason, last_seq, snapshot)
         WHERE matches.id = u.id",
    )
    .bind(at)
    .bind(&ids)
    .bind(&phases)
    .bind(&joiners)
    .bind(&turns)
    .bind(&deadlines)
    .bind(&winners)
    .bind(&reasons)
    .bind(&seqs)
    .bind(&snapshots)
    .execute(db)
    .await
    .map_err(classify)?;
    Ok(())
}

/// How many matches `creator` has waiting for an opponent. Locks the creator's row first
/// (without blocking foreign-key checks), so two concurrent creations by one player are
/// counted one after the other and cannot both slip under a cap.
pub async fn count_waiting_locked(
    tx: &mut sqlx::PgConnection,
    creator: Uuid,
) -> Result<i64, StoreError> {
    sqlx::query("SELECT 1 FROM players WHERE id = $1 FOR NO KEY UPDATE")
        .bind(creator)
        .fetch_optional(&mut *tx)
        .await?;
    let count =
        sqlx::query_scalar("SELECT count(*) FROM matches WHERE creator = $1 AND phase = 'waiting'")
            .bind(creator)
            .fetch_one(&mut *tx)
            .await?;
    Ok(count)
}

/// Matches waiting for an opponent that `viewer` may join, oldest first.
pub async fn list_open(
    db: impl PgExecutor<'_>,
    viewer: Uuid,
    limit: i64,
) -> Result<Vec<MatchRow>, StoreError> {
    let rows = sqlx::query(
        "SELECT id, snapshot, last_seq, created_at FROM matches
         WHERE phase = 'waiting' AND (invited IS NULL OR invited = $1 OR creator = $1)
         ORDER BY created_at LIMIT $2",
    )
    .bind(viewer)
    .bind(limit)
    .fetch_all(db)
    .await?;
    rows.iter().map(decode).collect()
}

/// A player's matches, newest first, before the cursor `before` (a creation time).
pub async fn list_for_player(
    db: impl PgExecutor<'_>,
    player: Uuid,
    before: Option<DateTime<Utc>>,
    limit: i64,
) -> Result<Vec<MatchRow>, StoreError> {
    let rows = sqlx::query(
        "SELECT id, snapshot, last_seq, created_at FROM matches
         WHERE (creator = $1 OR joiner = $1) AND ($2::timestamptz IS NULL OR created_at < $2)
         ORDER BY created_at DESC LIMIT $3",
    )
    .bind(player)
    .bind(before)
    .bind(limit)
    .fetch_all(db)
    .await?;
    rows.iter().map(decode).collect()
}

/// A match claimed by the clock: its row, or why the row could not be read (one unreadable
/// match must not stop every other clock).
pub struct Claimed {
    pub id: Uuid,
    pub row: Result<MatchRow, StoreError>,
}

/// Matches whose clock has run out by `now`, earliest first, locked for this transaction;
/// rows another transaction holds are skipped, not waited for. Each row is read as locked,
/// so a command that committed first is seen.
pub async fn claim_due(
    db: impl PgExecutor<'_>,
    now: DateTime<Utc>,
    limit: i64,
) -> Result<Vec<Claimed>, StoreError> {
    let rows = sqlx::query(
        "SELECT id, snapshot, last_seq, created_at FROM matches WHERE deadline <= $1
         ORDER BY deadline LIMIT $2 FOR UPDATE SKIP LOCKED",
    )
    .bind(now)
    .bind(limit)
    .fetch_all(db)
    .await?;
    rows.iter()
        .map(|row| {
            Ok(Claimed {
                id: row.try_get("id")?,
                row: decode(row),
            })
        })
        .collect()
}

/// The earliest armed deadline of any match.
pub async fn earliest_deadline(
    db: impl PgExecutor<'_>,
) -> Result<Option<DateTime<Utc>>, StoreError> {
    Ok(sqlx::query_scalar("SELECT min(deadline) FROM matches")
        .fetch_one(db)
        .await?)
}

/// Count of matches per phase, for metrics.
pub async fn count_by_phase(db: impl PgExecutor<'_>) -> Result<Vec<(String, i64)>, StoreError> {
    let rows = sqlx::query("SELECT phase, count(*) AS n FROM matches GROUP BY phase")
        .fetch_all(db)
        .await?;
    rows.into_iter()
        .map(|row| Ok((row.try_get("phase")?, row.try_get("n")?)))
        .collect()
}

/// Every match id, for whole-database checks.
pub async fn all_ids(db: impl PgExecutor<'_>) -> Result<Vec<Uuid>, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT id FROM matches ORDER BY created_at")
            .fetch_all(db)
            .await?,
    )
}

/// Matches with a running clock due after `since`, with that deadline.
pub async fn with_deadline_after(
    db: impl PgExecutor<'_>,
    since: DateTime<Utc>,
) -> Result<Vec<(Uuid, DateTime<Utc>)>, StoreError> {
    Ok(
        sqlx::query_as("SELECT id, deadline FROM matches WHERE deadline > $1 ORDER BY deadline")
            .bind(since)
            .fetch_all(db)
            .await?,
    )
}

/// The latest sequence number of each of `ids` (one query for any number of matches).
pub async fn positions(
    db: impl PgExecutor<'_>,
    ids: &[Uuid],
) -> Result<Vec<(Uuid, i64)>, StoreError> {
    let rows = sqlx::query("SELECT id, last_seq FROM matches WHERE id = ANY($1)")
        .bind(ids)
        .fetch_all(db)
        .await?;
    rows.iter()
        .map(|row| Ok((row.try_get("id")?, row.try_get("last_seq")?)))
        .collect()
}

/// Whether `player` sits in a match being placed or fought.
pub async fn in_live_match(db: impl PgExecutor<'_>, player: Uuid) -> Result<bool, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM matches WHERE phase IN ('placement', 'battle')
                        AND (creator = $1 OR joiner = $1))",
    )
    .bind(player)
    .fetch_one(db)
    .await?)
}

/// A match row's columns as stored, for checking them against the event log.
#[derive(Clone, Debug)]
pub struct StoredColumns {
    pub id: Uuid,
    pub ruleset: String,
    pub ranked: bool,
    pub phase: String,
    pub creator: Uuid,
    pub joiner: Option<Uuid>,
    pub winner: Option<Uuid>,
    pub reason: Option<String>,
    pub last_seq: i64,
    pub snapshot: serde_json::Value,
}

/// Every match row as stored, oldest first.
pub async fn all_columns(db: impl PgExecutor<'_>) -> Result<Vec<StoredColumns>, StoreError> {
    let rows = sqlx::query(
        "SELECT id, ruleset, ranked, phase, creator, joiner, winner, reason, last_seq, snapshot
         FROM matches ORDER BY created_at, id",
    )
    .fetch_all(db)
    .await?;
    rows.iter()
        .map(|row| {
            Ok(StoredColumns {
                id: row.try_get("id")?,
                ruleset: row.try_get("ruleset")?,
                ranked: row.try_get("ranked")?,
                phase: row.try_get("phase")?,
                creator: row.try_get("creator")?,
                joiner: row.try_get("joiner")?,
                winner: row.try_get("winner")?,
                reason: row.try_get("reason")?,
                last_seq: row.try_get("last_seq")?,
                snapshot: row.try_get("snapshot")?,
            })
        })
        .collect()
}

/// Makes the caller's transaction a read-only snapshot of the whole database.
pub async fn read_only_snapshot(db: impl PgExecutor<'_>) -> Result<(), StoreError> {
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .execute(db)
        .await?;
    Ok(())
}
