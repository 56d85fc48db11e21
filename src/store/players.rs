//! Player rows.

use chrono::{DateTime, Utc};
use sqlx::PgExecutor;
use uuid::Uuid;

use super::StoreError;
use crate::names::PlayerName;

#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct PlayerRow {
    pub id: Uuid,
    pub name: String,
    pub created_at: DateTime<Utc>,
}

/// Inserts a player; `NameTaken` when a player with the same name key exists.
pub async fn insert(
    db: impl PgExecutor<'_>,
    id: Uuid,
    name: &PlayerName,
) -> Result<PlayerRow, StoreError> {
    let row = sqlx::query_as::<_, PlayerRow>(
        "INSERT INTO players (id, name, name_key) VALUES ($1, $2, $3)
         ON CONFLICT (name_key) DO NOTHING
         RETURNING id, name, created_at",
    )
    .bind(id)
    .bind(name.as_str())
    .bind(name.key())
    .fetch_optional(db)
    .await?;
    row.ok_or(StoreError::NameTaken)
}

pub async fn get(db: impl PgExecutor<'_>, id: Uuid) -> Result<Option<PlayerRow>, StoreError> {
    Ok(
        sqlx::query_as("SELECT id, name, created_at FROM players WHERE id = $1")
            .bind(id)
            .fetch_optional(db)
            .await?,
    )
}

/// A player's record: wins, losses and draws over finished matches.
pub async fn record(db: impl PgExecutor<'_>, id: Uuid) -> Result<(i64, i64, i64), StoreError> {
    super::player_matches::record(db, id).await
}
