//! The per-player notice feed (challenges, joins, pairings, rematch offers).

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

use super::{StoreError, classify};

/// The notification channel a pushed notice is announced on, as `player_id:seq`.
pub const CHANNEL: &str = "statki_players";

#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct Notice {
    pub seq: i64,
    pub at: DateTime<Utc>,
    pub kind: String,
    pub payload: Value,
}

/// Appends a notice to `player`'s feed inside the caller's transaction and announces it
/// at commit. The number is taken from the player's row in `player_notice_heads`, whose
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
                     WHERE p.id::text IN ($3::jsonb ->> 'from', $3::jsonb ->> 'player',
                                          $3::jsonb ->> 'opponent')),
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
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(CHANNEL)
        .bind(format!("{player}:{seq}"))
        .execute(&mut *conn)
        .await?;
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

/// The latest notice number of each of `players` that has any.
pub async fn positions(
    db: impl PgExecutor<'_>,
    players: &[Uuid],
) -> Result<Vec<(Uuid, i64)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT player_id, max(seq) AS seq FROM player_notices
         WHERE player_id = ANY($1) GROUP BY player_id",
    )
    .bind(players)
    .fetch_all(db)
    .await?)
}
