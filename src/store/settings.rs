//! Service-wide settings kept in the database so replicas and restarts agree.

use sqlx::PgExecutor;

use super::StoreError;

/// The stored value of `key`, storing `candidate` first if there is none. Concurrent
/// first starts all end up with the same value.
pub async fn get_or_init(
    db: impl PgExecutor<'_> + Copy,
    key: &str,
    candidate: &str,
) -> Result<String, StoreError> {
    sqlx::query("INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING")
        .bind(key)
        .bind(candidate)
        .execute(db)
        .await?;
    let value: String = sqlx::query_scalar("SELECT value FROM settings WHERE key = $1")
        .bind(key)
        .fetch_one(db)
        .await?;
    Ok(value)
}
