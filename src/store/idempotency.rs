//! Idempotency keys: a player's key claims one request; its first answer is replayed.
//!
//! Keys are scoped by player. Registration has no player yet: its keys live under
//! [`REGISTRATION_SCOPE`], a key space no player can share.

use serde_json::Value;
use sqlx::{PgExecutor, Row};
use uuid::Uuid;

use super::StoreError;

/// The scope of registration keys: the nil id, which the schema forbids as a player id.
pub const REGISTRATION_SCOPE: Uuid = Uuid::nil();

/// Claims `key` for this request inside the caller's transaction. Returns false when the
/// key was already used (a concurrent claimant waits here until the first commits).
pub async fn claim(
    db: impl PgExecutor<'_>,
    player: Uuid,
    key: &str,
    request_hash: &str,
) -> Result<bool, StoreError> {
    let claimed = sqlx::query(
        "INSERT INTO idempotency_keys (player_id, key, request_hash) VALUES ($1, $2, $3)
         ON CONFLICT (player_id, key) DO NOTHING",
    )
    .bind(player)
    .bind(key)
    .bind(request_hash)
    .execute(db)
    .await?;
    Ok(claimed.rows_affected() == 1)
}

/// Records the answer for a claimed key, in the same transaction as the command.
pub async fn finish(
    db: impl PgExecutor<'_>,
    player: Uuid,
    key: &str,
    response: &Value,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE idempotency_keys SET response = $3 WHERE player_id = $1 AND key = $2")
        .bind(player)
        .bind(key)
        .bind(response)
        .execute(db)
        .await?;
    Ok(())
}

/// Gives a claimed key back, for a request that ends refused after its transaction had to
/// commit other work.
pub async fn release(db: impl PgExecutor<'_>, player: Uuid, key: &str) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM idempotency_keys WHERE player_id = $1 AND key = $2")
        .bind(player)
        .bind(key)
        .execute(db)
        .await?;
    Ok(())
}

/// The request hash and stored answer of a used key.
pub async fn get(
    db: impl PgExecutor<'_>,
    player: Uuid,
    key: &str,
) -> Result<Option<(String, Option<Value>)>, StoreError> {
    let row = sqlx::query(
        "SELECT request_hash, response FROM idempotency_keys WHERE player_id = $1 AND key = $2",
    )
    .bind(player)
    .bind(key)
    .fetch_optional(db)
    .await?;
    row.map(|row| Ok((row.try_get("request_hash")?, row.try_get("response")?)))
        .transpose()
}
