//! The only module that speaks SQL: players, matches, the event log, idempotency keys and
//! settings. Every function takes an executor so the service decides the transaction.

pub mod accounts;
pub mod bots;
#[cfg(feature = "test-support")]
pub mod bulk;
pub mod citus;
pub mod events;
pub mod hints;
pub mod idempotency;
pub mod listing;
pub mod matches;
pub mod notices;
pub mod player_matches;
pub mod players;
pub mod queue;
pub mod ratings;
pub mod rematch;
pub mod replicas;
pub mod settings;
pub mod streams;
pub mod tickets;

use sqlx::PgPool;
use sqlx::migrate::MigrateDatabase;
use sqlx::postgres::PgPoolOptions;

pub use events::StoredEvent;

/// Errors the store tells apart; everything else is a database fault.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("that name is taken")]
    NameTaken,
    #[error("a referenced player does not exist")]
    UnknownPlayer,
    #[error("stored state is unreadable: {0}")]
    Corrupt(String),
    /// A conditional write found a row moved on since its change was decided; nothing of
    /// the write was stored.
    #[error("a match row moved on after its change was decided")]
    Moved,
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// A column that does not decode into its type holds unreadable state, not a database
/// fault.
fn unreadable_as_corrupt(error: sqlx::Error) -> StoreError {
    match error {
        sqlx::Error::ColumnDecode { .. } => StoreError::Corrupt(error.to_string()),
        other => StoreError::Database(other),
    }
}

/// The role the service works as (migration 0024): it owns nothing, and may only insert
/// and read the event log and the rating history.
pub const APP_ROLE: &str = "statki_app";

/// Creates the database if it does not exist, runs the migrations as the URL's role (the
/// owner), then connects the service's pool, switched to `role` on every connection when
/// one is given and it exists (otherwise the pool works as the URL's role, with a warning).
pub async fn connect_and_migrate(
    url: &str,
    max_connections: u32,
    role: Option<&str>,
) -> anyhow::Result<PgPool> {
    if !sqlx::Postgres::database_exists(url).await? {
        sqlx::Postgres::create_database(url).await?;
    }
    let owner = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(std::time::Duration::from_secs(5))
        .connect(url)
        .await?;
    migrate(&owner).await?;
    let role = match role {
        Some(role) if role_usable(&owner, role).await? => Some(role.to_owned()),
        Some(role) => {
            tracing::warn!(
                role,
                "the service role does not exist or this login may not use it; \
                 working as the owner (see docs/security.md)"
            );
            None
        }
        None => None,
    };
    owner.close().await;
    let pool = pool_options(max_connections, role).connect(url).await?;
    Ok(pool)
}

/// Whether the connected role may `SET ROLE role`.
async fn role_usable(owner: &PgPool, role: &str) -> Result<bool, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = $1)
                AND pg_has_role(current_user, $1, 'MEMBER')",
    )
    .bind(role)
    .fetch_one(owner)
    .await?)
}

/// Settings of every session of the service's pools. PostgreSQL caches a prepared
/// statement's generic plan for the life of the connection, and one made while a table was
/// tiny (a fresh database; `players` starts with the bots' few rows) scans that table
/// sequentially until the connection closes: nothing re-plans it with autovacuum off. A
/// bench that created 6,000 players over HTTP found 14,332 such scans of `players` (51
/// million rows read, the batch write among them). No statement of the service wants a
/// sequential scan of a table that grows, so the sessions refuse them where an index
/// serves (`tests/it/plans.rs` checks the hot statements on an empty database). That
/// refusal is a cost of 10^10 on a scan no index can replace, which would make PostgreSQL
/// compile every such statement with JIT (160 ms for a scan of 6,000 players): JIT is off,
/// as no statement of the service runs long enough to gain from it.
pub const SESSION_SETTINGS: &str = "SET enable_seqscan = off; SET jit = off";

/// Options of the service's pool: every new connection takes [`SESSION_SETTINGS`] and
/// switches to `role`, if given.
pub fn pool_options(max_connections: u32, role: Option<String>) -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(std::time::Duration::from_secs(5))
        .after_connect(move |conn, _| {
            let role = role.clone();
            Box::pin(async move {
                sqlx::raw_sql(SESSION_SETTINGS).execute(&mut *conn).await?;
                if let Some(role) = role {
                    let set = format!("SET ROLE \"{}\"", role.replace('"', "\"\""));
                    sqlx::raw_sql(sqlx::AssertSqlSafe(set))
                        .execute(conn)
                        .await?;
                }
                Ok(())
            })
        })
}

pub async fn migrate(pool: &PgPool) -> Result<(), sqlx::migrate::MigrateError> {
    sqlx::migrate!("./migrations").run(pool).await
}

/// Whether the server is a streaming standby (read-only, replaying a primary's WAL).
pub async fn is_standby(db: impl sqlx::PgExecutor<'_>) -> Result<bool, StoreError> {
    Ok(sqlx::query_scalar("SELECT pg_is_in_recovery()")
        .fetch_one(db)
        .await?)
}

/// The database's time: the only clock the service trusts.
pub async fn now(
    db: impl sqlx::PgExecutor<'_>,
) -> Result<chrono::DateTime<chrono::Utc>, StoreError> {
    Ok(sqlx::query_scalar("SELECT clock_timestamp()")
        .fetch_one(db)
        .await?)
}

/// Opens a transaction on a connection the caller manages by hand (see [`commit`]).
pub async fn begin(conn: &mut sqlx::PgConnection) -> Result<(), StoreError> {
    sqlx::raw_sql("BEGIN").execute(conn).await?;
    Ok(())
}

/// Commits the connection's open transaction; with `begin_next`, opens the next one in the
/// same round trip (a simple query of two statements: the `BEGIN` runs only once the
/// `COMMIT` succeeded, so an answer means the commit is durable either way).
pub async fn commit(conn: &mut sqlx::PgConnection, begin_next: bool) -> Result<(), StoreError> {
    let statements = if begin_next {
        "COMMIT; BEGIN"
    } else {
        "COMMIT"
    };
    sqlx::raw_sql(statements).execute(conn).await?;
    Ok(())
}

/// Rolls back the transaction open on a connection the caller manages by hand.
pub async fn rollback(conn: &mut sqlx::PgConnection) -> Result<(), StoreError> {
    sqlx::raw_sql("ROLLBACK").execute(conn).await?;
    Ok(())
}

/// Takes the transaction-scoped advisory lock `key` if nobody holds it.
pub async fn try_advisory_xact_lock(
    db: impl sqlx::PgExecutor<'_>,
    key: i64,
) -> Result<bool, StoreError> {
    Ok(sqlx::query_scalar("SELECT pg_try_advisory_xact_lock($1)")
        .bind(key)
        .fetch_one(db)
        .await?)
}

/// Whether the database answers.
pub async fn ping(pool: &PgPool) -> Result<(), sqlx::Error> {
    sqlx::query("SELECT 1").execute(pool).await.map(|_| ())
}

fn classify(error: sqlx::Error) -> StoreError {
    if let sqlx::Error::Database(db) = &error
        && db.code().as_deref() == Some("23503")
    {
        return StoreError::UnknownPlayer;
    }
    StoreError::Database(error)
}
