//! Idempotency keys: a player's key claims one request; its first answer is replayed.
//!
//! Keys are scoped by player. Registration has no player yet: its keys live under
//! [`REGISTRATION_SCOPE`], a key space no player can share. The keys of commands on a match
//! are scoped by match and player and live with the match (`match_command_keys`, migration
//! 0046; on Citus on the match's shard), so a keyed command stays one shard's transaction;
//! the others are in `idempotency_keys`.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::PgExecutor;
use uuid::Uuid;

use super::StoreError;

/// The scope of registration keys: the nil id, which the schema forbids as a player id.
pub const REGISTRATION_SCOPE: Uuid = Uuid::nil();
/// How long a key is remembered: a retry later than this is a new request, and the
/// housekeeping step deletes the key.
pub const KEY_LIFETIME: chrono::TimeDelta = chrono::TimeDelta::hours(24);

/// Claims `key` for this request inside the caller's transaction. Returns false when the
/// key was already used (a concurrent claimant waits here until the first commits); see
/// [`reclaim_expired`] for a key older than [`KEY_LIFETIME`].
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

/// A player's key of a command on a match, as the write path gives it back.
pub struct KeyRef<'a> {
    pub match_id: Uuid,
    pub player: Uuid,
    pub key: &'a str,
}

/// The first answer to record under a claimed key of a command on a match.
pub struct Answer<'a> {
    pub match_id: Uuid,
    pub player: Uuid,
    pub key: &'a str,
    pub response: &'a Value,
}

pub(super) struct KeyColumns<'a> {
    pub matches: Vec<Uuid>,
    pub players: Vec<Uuid>,
    pub keys: Vec<&'a str>,
}

impl<'a> KeyColumns<'a> {
    pub(super) fn of(keys: &[KeyRef<'a>]) -> Self {
        KeyColumns {
            matches: keys.iter().map(|k| k.match_id).collect(),
            players: keys.iter().map(|k| k.player).collect(),
            keys: keys.iter().map(|k| k.key).collect(),
        }
    }
}

pub(super) struct AnswerColumns<'a> {
    pub matches: Vec<Uuid>,
    pub players: Vec<Uuid>,
    pub keys: Vec<&'a str>,
    pub responses: Vec<&'a Value>,
}

impl<'a> AnswerColumns<'a> {
    pub(super) fn of(answers: &[Answer<'a>]) -> Self {
        AnswerColumns {
            matches: answers.iter().map(|a| a.match_id).collect(),
            players: answers.iter().map(|a| a.player).collect(),
            keys: answers.iter().map(|a| a.key).collect(),
            responses: answers.iter().map(|a| a.response).collect(),
        }
    }
}

/// A key to claim for one command on a match.
pub struct Claim<'a> {
    pub match_id: Uuid,
    pub player: Uuid,
    pub key: &'a str,
    pub request_hash: &'a str,
}

/// Claims the keys of several commands on matches, in (match, player, key) order so two
/// transactions claiming overlapping keys wait for each other in the same order and never
/// deadlock. Returns which of `claims` were claimed here (the others were used before).
///
/// On Citus each key is claimed by a statement of its match's shard.
pub async fn claim_many(
    conn: &mut sqlx::PgConnection,
    kind: super::citus::Kind,
    claims: &[Claim<'_>],
) -> Result<Vec<bool>, StoreError> {
    if kind.distributed() {
        let mut order: Vec<usize> = (0..claims.len()).collect();
        order.sort_by_key(|&i| (claims[i].match_id, claims[i].player, claims[i].key));
        let mut claimed = vec![false; claims.len()];
        for i in order {
            let c = &claims[i];
            claimed[i] = sqlx::query(
                "INSERT INTO match_command_keys (match_id, player_id, key, request_hash)
                 VALUES ($1, $2, $3, $4)
                 ON CONFLICT (match_id, player_id, key) DO NOTHING",
            )
            .bind(c.match_id)
            .bind(c.player)
            .bind(c.key)
            .bind(c.request_hash)
            .execute(&mut *conn)
            .await?
            .rows_affected()
                == 1;
        }
        return Ok(claimed);
    }
    let matches: Vec<Uuid> = claims.iter().map(|c| c.match_id).collect();
    let players: Vec<Uuid> = claims.iter().map(|c| c.player).collect();
    let keys: Vec<&str> = claims.iter().map(|c| c.key).collect();
    let hashes: Vec<&str> = claims.iter().map(|c| c.request_hash).collect();
    let rows: Vec<(Uuid, Uuid, String)> = sqlx::query_as(
        "INSERT INTO match_command_keys (match_id, player_id, key, request_hash)
         SELECT match_id, player_id, key, request_hash
         FROM UNNEST($1::uuid[], $2::uuid[], $3::text[], $4::text[])
              AS c(match_id, player_id, key, request_hash)
         ORDER BY match_id, player_id, key
         ON CONFLICT (match_id, player_id, key) DO NOTHING
         RETURNING match_id, player_id, key",
    )
    .bind(&matches)
    .bind(&players)
    .bind(&keys)
    .bind(&hashes)
    .fetch_all(&mut *conn)
    .await?;
    let claimed: std::collections::HashSet<(Uuid, Uuid, String)> = rows.into_iter().collect();
    Ok(claims
        .iter()
        .map(|c| claimed.contains(&(c.match_id, c.player, c.key.to_owned())))
        .collect())
}

/// The request hash and stored answer of a used key of a command on `match_id`.
pub async fn get_on_match(
    db: impl PgExecutor<'_>,
    match_id: Uuid,
    player: Uuid,
    key: &str,
) -> Result<Option<(String, Option<Value>)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT request_hash, response FROM match_command_keys
         WHERE match_id = $1 AND player_id = $2 AND key = $3",
    )
    .bind(match_id)
    .bind(player)
    .bind(key)
    .fetch_optional(db)
    .await?)
}

/// Claims a used key afresh for this request when it is older than [`KEY_LIFETIME`]: it
/// is forgotten, so the request is a new one. Returns whether it was claimed. Only asked
/// after [`claim`] found the key used, so the common path costs nothing more.
pub async fn reclaim_expired(
    db: impl PgExecutor<'_>,
    player: Uuid,
    key: &str,
    request_hash: &str,
) -> Result<bool, StoreError> {
    let reclaimed = sqlx::query(
        "UPDATE idempotency_keys
         SET request_hash = $3, response = NULL, created_at = clock_timestamp()
         WHERE player_id = $1 AND key = $2 AND created_at < clock_timestamp() - $4::interval",
    )
    .bind(player)
    .bind(key)
    .bind(request_hash)
    .bind(KEY_LIFETIME)
    .execute(db)
    .await?;
    Ok(reclaimed.rows_affected() == 1)
}

/// Forgets all but the newest `kept` of `player`'s keys that were claimed for requests
/// digesting to `request_hash` (a request whose digest is the same every time, such as a
/// token refresh), so what one player can store under them is bounded.
pub async fn keep_newest(
    db: impl PgExecutor<'_>,
    player: Uuid,
    request_hash: &str,
    kept: i64,
) -> Result<u64, StoreError> {
    let forgotten = sqlx::query(
        "DELETE FROM idempotency_keys
         WHERE player_id = $1 AND request_hash = $2 AND key IN (
             SELECT key FROM idempotency_keys
             WHERE player_id = $1 AND request_hash = $2
             ORDER BY created_at DESC, key OFFSET $3)",
    )
    .bind(player)
    .bind(request_hash)
    .bind(kept)
    .execute(db)
    .await?;
    Ok(forgotten.rows_affected())
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

/// The request hash and stored answer of a used key.
pub async fn get(
    db: impl PgExecutor<'_>,
    player: Uuid,
    key: &str,
) -> Result<Option<(String, Option<Value>)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT request_hash, response FROM idempotency_keys WHERE player_id = $1 AND key = $2",
    )
    .bind(player)
    .bind(key)
    .fetch_optional(db)
    .await?)
}

/// One batch of the key purge (see [`purge`]).
pub const PURGE_KEYS: &str = "DELETE FROM idempotency_keys WHERE (player_id, key) IN (
         SELECT player_id, key FROM idempotency_keys WHERE created_at < $1
         ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)";

/// One batch of the purge of keys of commands on matches, on plain PostgreSQL.
const PURGE_MATCH_KEYS: &str = "DELETE FROM match_command_keys
     WHERE (match_id, player_id, key) IN (
         SELECT match_id, player_id, key FROM match_command_keys WHERE created_at < $1
         ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)";

/// Deletes up to `batch` keys of each table created before `before`, oldest first; returns
/// how many. Safe for any number of replicas at once: rows another deleter holds are
/// skipped. On Citus the keys of commands on matches go in one delete of every shard (a
/// multi-shard `FOR UPDATE` is not supported), each shard down its index of age.
pub async fn purge(
    pool: &sqlx::PgPool,
    kind: super::citus::Kind,
    before: DateTime<Utc>,
    batch: i64,
) -> Result<u64, StoreError> {
    let keys = sqlx::query(PURGE_KEYS)
        .bind(before)
        .bind(batch)
        .execute(pool)
        .await?
        .rows_affected();
    let match_keys = if kind.distributed() {
        sqlx::query("DELETE FROM match_command_keys WHERE created_at < $1")
            .bind(before)
            .execute(pool)
            .await?
    } else {
        sqlx::query(PURGE_MATCH_KEYS)
            .bind(before)
            .bind(batch)
            .execute(pool)
            .await?
    }
    .rows_affected();
    Ok(keys + match_keys)
}

/// Records first answers under their claimed keys and gives back `releases`, as the batch
/// statement of [`super::matches::write`] does; for the write on Citus
/// ([`super::citus::write`]): each key by a statement of its match's shard.
pub(super) async fn record(
    conn: &mut sqlx::PgConnection,
    answers: &[Answer<'_>],
    releases: &[KeyRef<'_>],
) -> Result<(), StoreError> {
    for answer in answers {
        sqlx::query(
            "UPDATE match_command_keys SET response = $4
             WHERE match_id = $1 AND player_id = $2 AND key = $3",
        )
        .bind(answer.match_id)
        .bind(answer.player)
        .bind(answer.key)
        .bind(answer.response)
        .execute(&mut *conn)
        .await?;
    }
    for release in releases {
        sqlx::query(
            "DELETE FROM match_command_keys WHERE match_id = $1 AND player_id = $2 AND key = $3",
        )
        .bind(release.match_id)
        .bind(release.player)
        .bind(release.key)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}
