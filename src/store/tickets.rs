//! Stream tickets: digests of short-lived, single-use stand-ins for a bearer token on the
//! stream endpoints. Issuing also drops every expired ticket; redeeming deletes the ticket.

use sqlx::PgExecutor;
use uuid::Uuid;

use super::StoreError;

/// Stores a ticket's digest for `player`, valid for `lifetime_seconds`, and drops the
/// tickets that have expired (by the index on `expires_at`). The expiry filter reads the
/// transaction's `now()`: Citus refuses a volatile function in a modification's filter,
/// and a ticket kept a moment longer is dropped by the next issue.
pub async fn issue(
    db: impl PgExecutor<'_>,
    digest: &[u8],
    player: Uuid,
    token_issued_micros: Option<i64>,
    lifetime_seconds: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "WITH expired AS (DELETE FROM stream_tickets WHERE expires_at < now())
         INSERT INTO stream_tickets (digest, player_id, token_issued_micros, expires_at)
         VALUES ($1, $2, $3, clock_timestamp() + make_interval(secs => $4))",
    )
    .bind(digest)
    .bind(player)
    .bind(token_issued_micros)
    .bind(lifetime_seconds as f64)
    .execute(db)
    .await?;
    Ok(())
}

/// Takes the ticket with this digest if it has not expired: its player and the `iat` of
/// the token it was issued for. A second redemption finds nothing. The expiry is compared
/// outside the `DELETE` because Citus allows no volatile function in its `RETURNING`.
pub async fn redeem(
    db: impl PgExecutor<'_>,
    digest: &[u8],
) -> Result<Option<(Uuid, Option<i64>)>, StoreError> {
    Ok(sqlx::query_as(
        "WITH taken AS (
             DELETE FROM stream_tickets WHERE digest = $1
             RETURNING player_id, token_issued_micros, expires_at
         )
         SELECT player_id, token_issued_micros, expires_at > clock_timestamp() FROM taken",
    )
    .bind(digest)
    .fetch_optional(db)
    .await?
    .and_then(|(player, issued, live): (Uuid, Option<i64>, bool)| live.then_some((player, issued))))
}
