//! Players: registration and public profiles.

use uuid::Uuid;

use super::resources::PlayerProfile;
use super::{App, AppError, Result, ladder};
use crate::store::players;

impl App {
    pub async fn profile(&self, id: Uuid) -> Result<PlayerProfile> {
        let row = players::get(self.pool(), id)
            .await?
            .ok_or(AppError::NotFound("player"))?;
        let (wins, losses, draws) = players::record(self.pool(), id).await?;
        let ladders = ladder::standings(self.pool(), id).await?;
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
}
