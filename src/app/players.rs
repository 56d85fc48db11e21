//! Players: registration and public profiles.

use uuid::Uuid;

use super::resources::{PlayerCreated, PlayerProfile};
use super::{App, AppError, Result, ladder};
use crate::names::PlayerName;
use crate::store::{StoreError, players};

impl App {
    #[tracing::instrument(skip(self))]
    pub async fn register(&self, name: &str) -> Result<PlayerCreated> {
        let name = PlayerName::parse(name).map_err(|e| AppError::InvalidName(e.to_string()))?;
        let id = Uuid::now_v7();
        let row = players::insert(self.pool(), id, &name)
            .await
            .map_err(|e| match e {
                StoreError::NameTaken => AppError::NameTaken(name.to_string()),
                other => other.into(),
            })?;
        let token = self.tokens().mint(id, row.created_at)?;
        Ok(PlayerCreated {
            id,
            name: row.name,
            token,
        })
    }

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
