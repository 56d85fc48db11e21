//! Account rows: password hashes and the instant from which a player's tokens are valid.

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

use super::StoreError;

/// What log-in needs to know about a name.
#[derive(Clone, sqlx::FromRow)]
pub struct Credentials {
    pub id: Uuid,
    pub name: String,
    pub password_hash: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("has_password", &self.password_hash.is_some())
            .finish()
    }
}

/// The player whose name has one of the uniqueness keys `keys` (see
/// `names::PlayerName::key`; older rows may carry a legacy key), preferring the one named
/// exactly `name`, and their password hash.
pub async fn by_name_keys(
    db: impl PgExecutor<'_>,
    keys: &[String],
    name: &str,
) -> Result<Option<Credentials>, StoreError> {
    Ok(sqlx::query_as::<_, Credentials>(
        "SELECT p.id, p.name, pw.password_hash
         FROM players p LEFT JOIN player_passwords pw ON pw.player_id = p.id
         WHERE p.name_key = ANY($1)
         ORDER BY p.name = $2 DESC
         LIMIT 1",
    )
    .bind(keys)
    .bind(name)
    .fetch_optional(db)
    .await?)
}

/// The player's password hash, locked against a concurrent change until the transaction
/// ends. `None` when the player does not exist; `Some(None)` when they have no password.
pub async fn lock_password(
    db: impl PgExecutor<'_>,
    player: Uuid,
) -> Result<Option<Option<String>>, StoreError> {
    // Outer `None`: no row; inner `None`: a row whose hash is NULL.
    Ok(sqlx::query_scalar::<_, Option<String>>(
        "SELECT pw.password_hash
         FROM players p LEFT JOIN player_passwords pw ON pw.player_id = p.id
         WHERE p.id = $1
         FOR UPDATE OF p",
    )
    .bind(player)
    .fetch_optional(db)
    .await?)
}

/// The player's password hash, if they have one.
pub async fn password_hash(
    db: impl PgExecutor<'_>,
    player: Uuid,
) -> Result<Option<String>, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT password_hash FROM player_passwords WHERE player_id = $1")
            .bind(player)
            .fetch_optional(db)
            .await?,
    )
}

/// Whether the player has a password.
pub async fn has_password(db: impl PgExecutor<'_>, player: Uuid) -> Result<bool, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM player_passwords WHERE player_id = $1)")
            .bind(player)
            .fetch_one(db)
            .await?,
    )
}

/// Sets or replaces the player's password hash.
pub async fn set_password(
    db: impl PgExecutor<'_>,
    player: Uuid,
    password_hash: &str,
) -> Result<(), StoreError> {
    // The time is taken in VALUES, not in the update: Citus (migration 0030) refuses a
    // volatile function in `DO UPDATE SET`.
    sqlx::query(
        "INSERT INTO player_passwords (player_id, password_hash, updated_at)
         VALUES ($1, $2, clock_timestamp())
         ON CONFLICT (player_id) DO UPDATE
         SET password_hash = excluded.password_hash, updated_at = excluded.updated_at",
    )
    .bind(player)
    .bind(password_hash)
    .execute(db)
    .await
    .map_err(super::classify)?;
    Ok(())
}

/// How a player's tokens stand: `None` when the player does not exist; otherwise the
/// instant before which their tokens are refused (`None` if they never revoked).
pub async fn tokens_valid_from(
    db: impl PgExecutor<'_>,
    player: Uuid,
) -> Result<Option<Option<DateTime<Utc>>>, StoreError> {
    Ok(sqlx::query_scalar::<_, Option<DateTime<Utc>>>(
        "SELECT tokens_valid_from FROM players WHERE id = $1",
    )
    .bind(player)
    .fetch_optional(db)
    .await?)
}

/// The instant a token is issued at, with the player's name.
#[derive(sqlx::FromRow)]
struct IssueRecord {
    at: DateTime<Utc>,
    name: String,
}

/// The instant to issue a token for `player` at: the database's time, but never before the
/// player's last revocation, so a token issued right after one is valid. With `presented`
/// (the issue instant of the token asking, `None` for a token without one), nothing is
/// issued unless that token is still valid. The row is read `FOR SHARE`, so an issue that
/// meets a revocation in flight waits for it and is judged by it. `None`: no such player,
/// or the presented token is revoked. The player's name comes with the instant.
pub async fn issue_instant(
    db: impl PgExecutor<'_>,
    player: Uuid,
    presented: Option<Option<DateTime<Utc>>>,
) -> Result<Option<(DateTime<Utc>, String)>, StoreError> {
    let check = presented.is_some();
    let presented = presented.flatten();
    let row = sqlx::query_as::<_, IssueRecord>(
        "SELECT greatest(clock_timestamp(), tokens_valid_from) AS at, name
         FROM players
         WHERE id = $1
           AND (NOT $2 OR tokens_valid_from IS NULL OR tokens_valid_from <= $3)
         FOR SHARE",
    )
    .bind(player)
    .bind(check)
    .bind(presented)
    .fetch_optional(db)
    .await?;
    Ok(row.map(|issue| (issue.at, issue.name)))
}

/// A revoked player's new validity instant and name.
#[derive(sqlx::FromRow)]
struct RevokedRecord {
    tokens_valid_from: DateTime<Utc>,
    name: String,
}

/// Refuses every token of `player` issued so far and announces it on `channel` as
/// `player:valid_from_micros` (delivered at commit), inside the caller's transaction.
/// `presented` is the issue instant of the token asking (`None`: it has none); a token
/// revoked meanwhile revokes nothing. Returns the new instant, after every token issued
/// before the revocation read the clock, and the player's name; `None` when the player does
/// not exist or the token is revoked.
pub async fn revoke_tokens(
    conn: &mut PgConnection,
    player: Uuid,
    presented: Option<DateTime<Utc>>,
    channel: &str,
) -> Result<Option<(DateTime<Utc>, String)>, StoreError> {
    // One microsecond past the clock: a token issued in the same microsecond, before the
    // clock was read, is refused too. Three statements: on Citus (migration 0030) `players`
    // is a reference table, whose update may hold no volatile function, and a clock read
    // in a CTE of the update is planned as a sub-plan whose result Citus first copies to
    // every node holding a copy of the table, the coordinator itself over a new connection
    // to its own database (and one more prepared transaction). With the instant read
    // first and passed as a value, the update runs on each copy as it is, the coordinator's
    // in its own transaction, and the notification is a statement of the coordinator, sent
    // with that transaction's commit (as the write path's).
    let instant: DateTime<Utc> =
        sqlx::query_scalar("SELECT clock_timestamp() + interval '1 microsecond'")
            .fetch_one(&mut *conn)
            .await?;
    let row = sqlx::query_as::<_, RevokedRecord>(
        "UPDATE players
         SET tokens_valid_from = greatest(tokens_valid_from, $2)
         WHERE id = $1 AND (tokens_valid_from IS NULL OR tokens_valid_from <= $3)
         RETURNING tokens_valid_from, name",
    )
    .bind(player)
    .bind(instant)
    .bind(presented)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(revoked) = row else {
        return Ok(None);
    };
    let payload = format!("{player}:{}", revoked.tokens_valid_from.timestamp_micros());
    notify(&mut *conn, channel, &payload).await?;
    Ok(Some((revoked.tokens_valid_from, revoked.name)))
}

/// Sends `payload` on `channel`: at once outside a transaction, with its commit inside one.
pub async fn notify(
    db: impl PgExecutor<'_>,
    channel: &str,
    payload: &str,
) -> Result<(), StoreError> {
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(channel)
        .bind(payload)
        .execute(db)
        .await?;
    Ok(())
}

/// How many connections named `application_name` are open on this database: the replicas
/// listening for notifications.
pub async fn listeners(db: impl PgExecutor<'_>, application_name: &str) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity
         WHERE application_name = $1 AND datname = current_database()",
    )
    .bind(application_name)
    .fetch_one(db)
    .await?)
}

/// Takes one password attempt for `account` (a name key): counts it as a failure until
/// [`clear_attempts`] says it succeeded. After `free` failures in a row each further one
/// locks the account for twice as long as the last (2 s, 4 s, … at most `max_seconds`);
/// a count untouched for a day starts again. `Err(seconds)`: locked, retry then.
pub async fn take_attempt(
    db: impl PgExecutor<'_>,
    account: &str,
    free: i32,
    max_seconds: i32,
) -> Result<Result<(), i64>, StoreError> {
    // One statement: concurrent attempts are counted one by one, none slips past a lock.
    let (taken, wait): (bool, i64) = sqlx::query_as(
        "WITH taken AS (
             INSERT INTO password_attempts AS a (account, failures, locked_until, updated_at)
             VALUES ($1, 1, clock_timestamp(), clock_timestamp())
             ON CONFLICT (account) DO UPDATE
             SET failures = CASE WHEN a.updated_at < clock_timestamp() - interval '1 day'
                                 THEN 1 ELSE a.failures + 1 END,
                 locked_until = clock_timestamp() + CASE
                     WHEN a.updated_at < clock_timestamp() - interval '1 day' OR a.failures + 1 < $2
                     THEN interval '0'
                     ELSE least($3::float8, 2 ^ least(a.failures + 2 - $2, 30)) * interval '1 second'
                 END,
                 updated_at = clock_timestamp()
             WHERE a.locked_until <= clock_timestamp()
             RETURNING 1
         )
         SELECT EXISTS (SELECT FROM taken),
                coalesce((SELECT ceil(extract(epoch FROM locked_until - clock_timestamp()))::bigint
                          FROM password_attempts WHERE account = $1), 0)",
    )
    .bind(account)
    .bind(free)
    .bind(max_seconds)
    .fetch_one(db)
    .await?;
    Ok(if taken { Ok(()) } else { Err(wait.max(1)) })
}

/// The attempt succeeded: `account` starts again with no failures.
pub async fn clear_attempts(db: impl PgExecutor<'_>, account: &str) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM password_attempts WHERE account = $1")
        .bind(account)
        .execute(db)
        .await?;
    Ok(())
}

/// A player's password hash (if any) and name key; `None` when the player does not exist.
pub async fn password_and_key(
    db: impl PgExecutor<'_>,
    player: Uuid,
) -> Result<Option<(Option<String>, String)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT pw.password_hash, p.name_key
         FROM players p LEFT JOIN player_passwords pw ON pw.player_id = p.id
         WHERE p.id = $1",
    )
    .bind(player)
    .fetch_optional(db)
    .await?)
}
