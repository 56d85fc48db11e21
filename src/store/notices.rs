//! The per-player notice feed (challenges, joins, pairings, rematch offers).

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

use super::{StoreError, classify};

#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct Notice {
    pub seq: i64,
    pub at: DateTime<Utc>,
    pub kind: String,
    pub payload: Value,
}

/// Appends a notice to `player`'s feed inside the caller's transaction and returns its
/// number (the caller announces it after the commit). The number is taken from the player's row in `player_notice_heads`, whose
/// row lock serialises concurrent notices to one player (held to the commit). The
/// players the payload names (`from`, `player`, `opponent`) get their names beside it, in
/// `names`, by id.
pub async fn push(
    conn: &mut PgConnection,
    player: Uuid,
    kind: &str,
    payload: &Value,
) -> Result<i64, StoreError> {
    let seq: i64 = sqlx::query_scalar(
        "WITH head AS (
             INSERT INTO player_notice_heads AS h (player_id, last_seq) VALUES ($1, 1)
             ON CONFLICT (player_id) DO UPDATE SET last_seq = h.last_seq + 1
             RETURNING last_seq
         )
         INSERT INTO player_notices (player_id, seq, kind, payload)
         SELECT $1, head.last_seq, $2,
                $3::jsonb || jsonb_build_object('names', coalesce(
                    (SELECT jsonb_object_agg(p.id, p.name) FROM players p
                     WHERE p.id IN (($3::jsonb ->> 'from')::uuid,
                                    ($3::jsonb ->> 'player')::uuid,
                                    ($3::jsonb ->> 'opponent')::uuid)),
                    '{}'::jsonb))
         FROM head
         RETURNING seq",
    )
    .bind(player)
    .bind(kind)
    .bind(payload)
    .fetch_one(&mut *conn)
    .await
    .map_err(classify)?;
    Ok(seq)
}

/// `player`'s notices after `after`, in order, at most `limit`.
pub async fn list(
    db: impl PgExecutor<'_>,
    player: Uuid,
    after: i64,
    limit: i64,
) -> Result<Vec<Notice>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT seq, at, kind, payload FROM player_notices
         WHERE player_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
    )
    .bind(player)
    .bind(after)
    .bind(limit)
    .fetch_all(db)
    .await?)
}

/// The notices of several players, each after a position.
pub const LIST_MANY: &str = "SELECT n.player_id, n.seq, n.at, n.kind, n.payload
         FROM UNNEST($1::uuid[], $2::bigint[]) AS f(id, after)
         JOIN player_notices n
           ON n.player_id = f.id AND n.seq > f.after AND n.seq <= f.after + $3
         WHERE n.player_id = ANY($1)
         ORDER BY n.player_id, n.seq";

/// The notices of several players in one read: for each `(player, after)`, up to `limit`
/// notices after `after`, in order, each with its player.
pub async fn list_many(
    db: impl PgExecutor<'_>,
    feeds: &[(Uuid, i64)],
    limit: i64,
) -> Result<Vec<(Uuid, Notice)>, StoreError> {
    let players: Vec<Uuid> = feeds.iter().map(|feed| feed.0).collect();
    let afters: Vec<i64> = feeds.iter().map(|feed| feed.1).collect();
    let rows: Vec<PlayerNotice> = sqlx::query_as(LIST_MANY)
        .bind(&players)
        .bind(&afters)
        .bind(limit)
        .fetch_all(db)
        .await?;
    Ok(rows
        .into_iter()
        .map(|row| (row.player_id, row.notice))
        .collect())
}

#[derive(sqlx::FromRow)]
struct PlayerNotice {
    player_id: Uuid,
    #[sqlx(flatten)]
    notice: Notice,
}

/// The latest notice of each of a list of players.
pub const POSITIONS: &str = "SELECT player_id, max(seq) AS seq FROM player_notices
         WHERE player_id = ANY($1) GROUP BY player_id";

/// The latest notice number of each of `players` that has any.
pub async fn positions(
    db: impl PgExecutor<'_>,
    players: &[Uuid],
) -> Result<Vec<(Uuid, i64)>, StoreError> {
    Ok(sqlx::query_as(POSITIONS)
        .bind(players)
        .fetch_all(db)
        .await?)
}

/// One batch of the notice purge (see [`purge`]): notices older than `$1`, oldest first,
/// except each player's latest, which carries the player's numbering on.
pub const PURGE_NOTICES: &str = "DELETE FROM player_notices WHERE (player_id, seq) IN (
         SELECT n.player_id, n.seq FROM player_notices n
         WHERE n.at < $1
           AND n.seq < (SELECT max(seq) FROM player_notices l WHERE l.player_id = n.player_id)
         ORDER BY n.at LIMIT $2 FOR UPDATE SKIP LOCKED)";

/// Deletes up to `batch` notices created before `before`, never a player's latest (a
/// stream resuming after it, and the next notice's number, still find it). Returns how
/// many were deleted.
pub async fn purge(
    db: impl PgExecutor<'_>,
    before: DateTime<Utc>,
    batch: i64,
) -> Result<u64, StoreError> {
    Ok(sqlx::query(PURGE_NOTICES)
        .bind(before)
        .bind(batch)
        .execute(db)
        .await?
        .rows_affected())
}
