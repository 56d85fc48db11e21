//! Rematch offers and the rematches they started.

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

use super::{StoreError, classify};

/// A player's standing offer to play a finished match again.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct Offer {
    pub player_id: Uuid,
    pub offered_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

/// The live (unexpired) offers on `match_id`.
pub async fn offers(
    db: impl PgExecutor<'_>,
    match_id: Uuid,
    now: DateTime<Utc>,
) -> Result<Vec<Offer>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT player_id, offered_at, expires_at FROM rematch_offers
         WHERE match_id = $1 AND expires_at > $2 ORDER BY offered_at",
    )
    .bind(match_id)
    .bind(now)
    .fetch_all(db)
    .await?)
}

/// Records or renews `player`'s offer, naming the bot it waits for when the opponent is one.
pub async fn offer(
    db: impl PgExecutor<'_>,
    match_id: Uuid,
    player: Uuid,
    now: DateTime<Utc>,
    expires_at: DateTime<Utc>,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO rematch_offers (match_id, player_id, offered_at, expires_at, bot)
         SELECT $1, $2, $3, $4,
                (SELECT p.id FROM matches m
                 JOIN players p ON p.id IN (m.creator, m.joiner) AND p.bot_level IS NOT NULL
                 WHERE m.id = $1 AND p.id <> $2)
         ON CONFLICT (match_id, player_id)
             DO UPDATE SET offered_at = excluded.offered_at, expires_at = excluded.expires_at",
    )
    .bind(match_id)
    .bind(player)
    .bind(now)
    .bind(expires_at)
    .execute(db)
    .await
    .map_err(classify)?;
    Ok(())
}

/// The rematch `match_id` already started, if any.
pub async fn started(db: impl PgExecutor<'_>, match_id: Uuid) -> Result<Option<Uuid>, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT rematch_id FROM rematches WHERE match_id = $1")
            .bind(match_id)
            .fetch_optional(db)
            .await?,
    )
}

/// Remembers that `match_id` was played again as `rematch_id`, and clears its offers.
pub async fn record_started(
    conn: &mut PgConnection,
    match_id: Uuid,
    rematch_id: Uuid,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    sqlx::query("INSERT INTO rematches (match_id, rematch_id, created_at) VALUES ($1, $2, $3)")
        .bind(match_id)
        .bind(rematch_id)
        .bind(now)
        .execute(&mut *conn)
        .await?;
    sqlx::query("DELETE FROM rematch_offers WHERE match_id = $1")
        .bind(match_id)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Deletes expired offers (through the index on `expires_at`).
pub const PURGE_OFFERS: &str = "DELETE FROM rematch_offers WHERE expires_at <= $1";

/// Removes offers that expired by `now`. On Citus a delete of every shard would be a
/// two-phase commit on every worker at each sweep, due offers or not: the due offers are
/// found by a read of every shard (down each shard's index on `expires_at`), and each is
/// deleted on its own shard, so a sweep with nothing due writes nothing.
pub async fn purge(
    conn: &mut PgConnection,
    kind: super::citus::Kind,
    now: DateTime<Utc>,
) -> Result<u64, StoreError> {
    if !kind.distributed() {
        let done = sqlx::query(PURGE_OFFERS).bind(now).execute(conn).await?;
        return Ok(done.rows_affected());
    }
    let due: Vec<Uuid> =
        sqlx::query_scalar("SELECT DISTINCT match_id FROM rematch_offers WHERE expires_at <= $1")
            .bind(now)
            .fetch_all(&mut *conn)
            .await?;
    let mut purged = 0;
    for match_id in due {
        purged +=
            sqlx::query("DELETE FROM rematch_offers WHERE match_id = $1 AND expires_at <= $2")
                .bind(match_id)
                .bind(now)
                .execute(&mut *conn)
                .await?
                .rows_affected();
    }
    Ok(purged)
}
