//! The ranked matchmaking queue: one entry per player, claimed with `SKIP LOCKED` so any
//! number of replicas pair players without ever pairing one twice.

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

use super::StoreError;

/// A queue entry; `match_id` is set once the player was paired.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct Entry {
    pub player_id: Uuid,
    pub ruleset: String,
    pub rating: f64,
    pub joined_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub match_id: Option<Uuid>,
    pub paired_at: Option<DateTime<Utc>>,
}

/// How the acceptable rating gap grows with waiting: `base + per_second × waited`, at most
/// `max`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Window {
    pub base: f64,
    pub per_second: f64,
    pub max: f64,
}

/// Queues `player`. Returns false when they already have a live waiting entry; a paired
/// or expired entry is replaced.
pub async fn join(
    db: impl PgExecutor<'_>,
    player: Uuid,
    ruleset: &str,
    rating: f64,
    now: DateTime<Utc>,
    expires_at: DateTime<Utc>,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "INSERT INTO queue_entries (player_id, ruleset, rating, joined_at, expires_at)
         VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (player_id) DO UPDATE
             SET ruleset = excluded.ruleset, rating = excluded.rating,
                 joined_at = excluded.joined_at, expires_at = excluded.expires_at,
                 match_id = NULL, paired_at = NULL
             WHERE queue_entries.match_id IS NOT NULL OR queue_entries.expires_at <= $4",
    )
    .bind(player)
    .bind(ruleset)
    .bind(rating)
    .bind(now)
    .bind(expires_at)
    .execute(db)
    .await
    .map_err(super::classify)?;
    Ok(done.rows_affected() == 1)
}

/// `player`'s entry, if any.
pub async fn get(db: impl PgExecutor<'_>, player: Uuid) -> Result<Option<Entry>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT player_id, ruleset, rating, joined_at, expires_at, match_id, paired_at
         FROM queue_entries WHERE player_id = $1",
    )
    .bind(player)
    .fetch_optional(db)
    .await?)
}

/// Removes `player`'s waiting entry. Returns whether it was live (not yet expired).
pub async fn leave(
    db: impl PgExecutor<'_>,
    player: Uuid,
    now: DateTime<Utc>,
) -> Result<bool, StoreError> {
    let live: Option<bool> = sqlx::query_scalar(
        "DELETE FROM queue_entries WHERE player_id = $1 AND match_id IS NULL
         RETURNING expires_at > $2",
    )
    .bind(player)
    .bind(now)
    .fetch_optional(db)
    .await?;
    Ok(live.unwrap_or(false))
}

/// Claims the best partner for a player with `rating` who is joining `ruleset` now: the
/// closest rating among live waiting entries whose own widened window reaches it, of a
/// player not in a running match. Entries another transaction holds are skipped, never
/// waited for.
///
/// On Citus the queue stays on the coordinator and `player_matches` is distributed, which
/// Citus does not join: [`super::citus::claim_partner`] claims the best entry, then asks
/// that player's shard whether they are playing, and so on down the candidates.
pub async fn claim_partner(
    conn: &mut PgConnection,
    kind: super::citus::Kind,
    player: Uuid,
    ruleset: &str,
    rating: f64,
    now: DateTime<Utc>,
    window: Window,
) -> Result<Option<Entry>, StoreError> {
    if kind.distributed() {
        return super::citus::claim_partner(conn, player, ruleset, rating, now, window).await;
    }
    Ok(sqlx::query_as(
        "SELECT player_id, ruleset, rating, joined_at, expires_at, match_id, paired_at
         FROM queue_entries q
         WHERE q.ruleset = $2 AND q.player_id <> $1 AND q.match_id IS NULL AND q.expires_at > $4
           AND abs(q.rating - $3) <= least($7::float8, $5::float8
                 + $6::float8 * greatest(0, extract(epoch FROM $4 - q.joined_at))::float8)
           AND NOT EXISTS (SELECT 1 FROM player_matches pm
                           WHERE pm.player_id = q.player_id AND pm.status = 'playing'
                             AND pm.role <> 'invited')
         ORDER BY abs(q.rating - $3), q.joined_at
         LIMIT 1
         FOR UPDATE SKIP LOCKED",
    )
    .bind(player)
    .bind(ruleset)
    .bind(rating)
    .bind(now)
    .bind(window.base)
    .bind(window.per_second)
    .bind(window.max)
    .fetch_optional(&mut *conn)
    .await?)
}

/// Claims up to `limit` live waiting entries of players not in a live match, longest
/// waiting first, skipping entries another transaction holds.
///
/// On Citus the queue stays on the coordinator and `player_matches` is distributed, which
/// Citus does not join: [`super::citus::claim_waiting`] claims the entries, then leaves out the
/// players it finds in a live match.
pub async fn claim_waiting(
    conn: &mut PgConnection,
    kind: super::citus::Kind,
    now: DateTime<Utc>,
    limit: i64,
) -> Result<Vec<Entry>, StoreError> {
    if kind.distributed() {
        return super::citus::claim_waiting(conn, now, limit).await;
    }
    Ok(sqlx::query_as(
        "SELECT player_id, ruleset, rating, joined_at, expires_at, match_id, paired_at
         FROM queue_entries q
         WHERE q.match_id IS NULL AND q.expires_at > $1
           AND NOT EXISTS (SELECT 1 FROM player_matches pm
                           WHERE pm.player_id = q.player_id AND pm.status = 'playing'
                             AND pm.role <> 'invited')
         ORDER BY q.joined_at, q.player_id
         LIMIT $2
         FOR UPDATE SKIP LOCKED",
    )
    .bind(now)
    .bind(limit)
    .fetch_all(&mut *conn)
    .await?)
}

/// Marks the entries of `players` as paired into `match_id`.
pub async fn mark_paired(
    db: impl PgExecutor<'_>,
    players: &[Uuid],
    match_id: Uuid,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE queue_entries SET match_id = $2, paired_at = $3 WHERE player_id = ANY($1)")
        .bind(players)
        .bind(match_id)
        .bind(now)
        .execute(db)
        .await?;
    Ok(())
}

/// Drops the waiting entries of `players` (they have just been given a match elsewhere).
pub async fn drop_waiting(db: impl PgExecutor<'_>, players: &[Uuid]) -> Result<u64, StoreError> {
    let done =
        sqlx::query("DELETE FROM queue_entries WHERE player_id = ANY($1) AND match_id IS NULL")
            .bind(players)
            .execute(db)
            .await?;
    Ok(done.rows_affected())
}

/// Removes waiting entries that expired by `now` and paired entries older than
/// `paired_before`, skipping rows another transaction holds. Returns how many went.
pub async fn purge(
    db: impl PgExecutor<'_>,
    now: DateTime<Utc>,
    paired_before: DateTime<Utc>,
) -> Result<u64, StoreError> {
    let done = sqlx::query(
        "DELETE FROM queue_entries WHERE player_id IN (
             SELECT player_id FROM queue_entries
             WHERE (match_id IS NULL AND expires_at <= $1) OR paired_at <= $2
             FOR UPDATE SKIP LOCKED)",
    )
    .bind(now)
    .bind(paired_before)
    .execute(db)
    .await?;
    Ok(done.rows_affected())
}

/// How many players wait for a match on `ruleset`.
pub async fn waiting(
    db: impl PgExecutor<'_>,
    ruleset: &str,
    now: DateTime<Utc>,
) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM queue_entries
         WHERE ruleset = $1 AND match_id IS NULL AND expires_at > $2",
    )
    .bind(ruleset)
    .bind(now)
    .fetch_one(db)
    .await?)
}
