//! `/v1/bots`: the bot opponents a player may challenge.

use axum::Json;
use axum::extract::State;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::AppState;
use super::error::ApiError;
use crate::app::BotProfile;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_bots))
}

/// The bots, easiest first. Challenge one with `POST /v1/matches` and `opponent` set to its
/// id (never ranked): it joins and places its fleet within 2 s, then plays its turns.
#[utoipa::path(
    get, path = "/v1/bots", tag = "bots",
    responses((status = 200, body = Vec<BotProfile>))
)]
async fn list_bots(
    State(state): State<AppState>,
) -> Result<impl axum::response::IntoResponse, ApiError> {
    Ok(([super::CACHE_PUBLIC], Json(state.app.bots().await?)))
}
