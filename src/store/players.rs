//! Player rows.

use chrono::{DateTime, Utc};
use sqlx::{PgExecutor, Row};
use uuid::Uuid;

use super::StoreError;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlayerRow {
    pub id: Uuid,
    pub name: String,
    pub created_at: DateTime<Utc>,
}

pub async fn insert(
    db: impl PgExecutor<'_>,
    id: Uuid,
    name: &str,
) -> Result<PlayerRow, StoreError> {
    let row = sqlx::query(
        "INSERT INTO players (id, name, name_key) VALUES ($1, $2, lower($2))
         ON CONFLICT (name_key) DO NOTHING
         RETURNING created_at",
    )
    .bind(id)
    .bind(name)
    .fetch_optional(db)
    .await?;
    let row = row.ok_or(StoreError::NameTaken)?;
    Ok(PlayerRow {
        id,
        name: name.to_owned(),
        created_at: row.try_get("created_at")?,
    })
}

pub async fn get(db: impl PgExecutor<'_>, id: Uuid) -> Result<Option<PlayerRow>, StoreError> {
    let row = sqlx::query("SELECT id, name, created_at FROM players WHERE id = $1")
        .bind(id)
        .fetch_optional(db)
        .await?;
    row.map(|row| {
        Ok(PlayerRow {
            id: row.try_get("id")?,
            name: row.try_get("name")?,
            created_at: row.try_get("created_at")?,
        })
    })
    .transpose()
}

/// A player's record: wins, losses and draws over finished matches.
pub async fn record(db: impl PgExecutor<'_>, id: Uuid) -> Result<(i64, i64, i64), StoreError> {
    let row = sqlx::query(
        "SELECT count(*) FILTER (WHERE winner = $1) AS wins,
                count(*) FILTER (WHERE winner IS NOT NULL AND winner <> $1) AS losses,
                count(*) FILTER (WHERE winner IS NULL) AS draws
         FROM matches
         WHERE phase = 'finished' AND (creator = $1 OR joiner = $1)",
    )
    .bind(id)
    .fetch_one(db)
    .await?;
    Ok((
        row.try_get("wins")?,
        row.try_get("losses")?,
        row.try_get("draws")?,
    ))
}
