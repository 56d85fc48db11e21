//! Players: registration and public profiles.

use uuid::Uuid;

use super::resources::{PlayerCreated, PlayerProfile};
use super::{App, AppError, Result, ladder};
use crate::store::{StoreError, players};

/// Longest player name, in characters.
pub const NAME_MAX_CHARS: usize = 32;

/// Checks a player name: 1–32 characters, no control characters, no surrounding spaces.
pub fn validate_name(name: &str) -> Result<&str> {
    let count = name.chars().count();
    if count == 0 || count > NAME_MAX_CHARS {
        return Err(AppError::InvalidName(format!(
            "a name has 1 to {NAME_MAX_CHARS} characters"
        )));
    }
    if name.chars().any(char::is_control) {
        return Err(AppError::InvalidName(
            "a name may not contain control characters".into(),
        ));
    }
    if name.trim() != name {
        return Err(AppError::InvalidName(
            "a name may not start or end with white space".into(),
        ));
    }
    Ok(name)
}

impl App {
    #[tracing::instrument(skip(self))]
    pub async fn register(&self, name: &str) -> Result<PlayerCreated> {
        let name = validate_name(name)?;
        let id = Uuid::now_v7();
        let row = players::insert(self.pool(), id, name)
            .await
            .map_err(|e| match e {
                StoreError::NameTaken => AppError::NameTaken(name.to_owned()),
                other => other.into(),
            })?;
        let token = self.tokens().mint(id, row.created_at)?;
        Ok(PlayerCreated {
            id,
            name: row.name,
            token,
        })
    }

    #[tracing::instrument(skip(self))]
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
