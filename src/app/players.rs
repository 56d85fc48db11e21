//! Players: registration and public profiles.

use uuid::Uuid;

use super::resources::PlayerProfile;
use super::{App, AppError, Result, ladder};
use crate::store::players;

impl App {
    /// A player's profile and record; it may lag a little, so the standby serves it when
    /// there is one.
    pub async fn profile(&self, id: Uuid) -> Result<PlayerProfile> {
        self.read_lagging(|pool| async move { profile(&pool, id).await })
            .await
    }
}

async fn profile(pool: &sqlx::PgPool, id: Uuid) -> Result<PlayerProfile> {
    let row = players::get(pool, id)
        .await?
        .ok_or(AppError::NotFound("player"))?;
    let (wins, losses, draws) = players::record(pool, id).await?;
    let ladders = ladder::standings(pool, id).await?;
    Ok(PlayerProfile {
        id,
        name: row.name,
        created_at: row.created_at,
        wins,
        losses,
        draws,
        ladders,
    })
}
