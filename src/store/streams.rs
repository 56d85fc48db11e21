//! Stream leases: one row per open event stream, so a per-player cap holds across every
//! replica. A replica renews its leases while it lives; a lease not renewed within its
//! lifetime (its replica died) no longer counts and is deleted by any replica.
//!
//! The same leases say who is online: a player holding a live lease has a stream open
//! somewhere. The caller announces a player whose leases changed (see `live`), so every
//! replica can tell the streams of that player's matches.

use std::time::Duration;

use sqlx::PgPool;
use uuid::Uuid;

use super::StoreError;

/// Takes a lease for `player` unless they already hold `cap` live ones. Returns whether
/// it was taken. Concurrent openings by one player are serialised by an advisory lock.
pub async fn lease(
    pool: &PgPool,
    id: Uuid,
    player: Uuid,
    replica: Uuid,
    cap: usize,
    lifetime: Duration,
) -> Result<bool, StoreError> {
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1::text, 7))")
        .bind(player)
        .execute(&mut *tx)
        .await?;
    let held: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM stream_leases
         WHERE player_id = $1 AND renewed_at > clock_timestamp() - $2::interval",
    )
    .bind(player)
    .bind(interval(lifetime))
    .fetch_one(&mut *tx)
    .await?;
    if held >= i64::try_from(cap).unwrap_or(i64::MAX) {
        return Ok(false);
    }
    sqlx::query(
        "INSERT INTO stream_leases (id, player_id, replica_id, renewed_at)
         VALUES ($1, $2, $3, clock_timestamp())",
    )
    .bind(id)
    .bind(player)
    .bind(replica)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(true)
}

/// Gives a lease back.
pub async fn release(pool: &PgPool, id: Uuid) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM stream_leases WHERE id = $1")
        .bind(id)
        .execute(pool)
        .await?;
    Ok(())
}

/// Which of a list of players hold a live stream lease.
pub const ONLINE_LEASES: &str = "SELECT DISTINCT player_id FROM stream_leases
         WHERE player_id = ANY($1) AND renewed_at > clock_timestamp() - $2::interval";

/// Which of `players` are online: those holding a live stream lease, and bots (always
/// there to play). Two lookups by id, through the players' primary key and the leases'
/// index on `(player_id, renewed_at)`.
pub async fn online(
    pool: &PgPool,
    players: &[Uuid],
    lifetime: Duration,
) -> Result<Vec<Uuid>, StoreError> {
    if players.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<Uuid> = sqlx::query_scalar(ONLINE_LEASES)
        .bind(players)
        .bind(interval(lifetime))
        .fetch_all(pool)
        .await?;
    let bots: Vec<Uuid> =
        sqlx::query_scalar("SELECT id FROM players WHERE id = ANY($1) AND bot_level IS NOT NULL")
            .bind(players)
            .fetch_all(pool)
            .await?;
    let mut online = ids;
    online.extend(bots);
    online.sort_unstable();
    online.dedup();
    Ok(online)
}

/// Deletes the leases that ran out (through the index on `renewed_at`).
pub const PURGE_LEASES: &str = "DELETE FROM stream_leases WHERE renewed_at < now() - $1::interval";

/// Renews every lease of `replica` and deletes leases that ran out (any replica's).
pub async fn renew(pool: &PgPool, replica: Uuid, lifetime: Duration) -> Result<(), StoreError> {
    sqlx::query("UPDATE stream_leases SET renewed_at = clock_timestamp() WHERE replica_id = $1")
        .bind(replica)
        .execute(pool)
        .await?;
    sqlx::query(PURGE_LEASES)
        .bind(interval(lifetime))
        .execute(pool)
        .await?;
    Ok(())
}

fn interval(lifetime: Duration) -> chrono::TimeDelta {
    chrono::TimeDelta::from_std(lifetime).unwrap_or(chrono::TimeDelta::MAX)
}
