//! The statements of the hints connection (see `live`): one `NOTIFY` per payload, all in
//! one transaction, whose commit does not wait for the disk.

use sqlx::PgConnection;

use super::StoreError;

/// Readies a connection to send hints: a hint's transaction writes nothing worth waiting
/// for, so its commit (and PostgreSQL's notification lock, held until then) ends without a
/// flush of the log.
pub async fn prepare(conn: &mut PgConnection) -> Result<(), StoreError> {
    sqlx::query("SET synchronous_commit = off")
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Notifies every payload on `channel`, in one statement.
pub async fn send(
    conn: &mut PgConnection,
    channel: &str,
    payloads: &[String],
) -> Result<(), StoreError> {
    sqlx::query("SELECT count(pg_notify($1, payload)) FROM UNNEST($2::text[]) AS payload")
        .bind(channel)
        .bind(payloads)
        .execute(&mut *conn)
        .await?;
    Ok(())
}
