//! `/v1/bots`: the bot opponents a player may challenge.

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
    responses(
        (status = 200, body = Vec<BotProfile>, headers(("ETag" = String, description = "A digest of the answer; send it as `If-None-Match`"))),
        (status = 304, description = "Not modified: `If-None-Match` names the current answer", headers(("ETag" = String))),
    )
)]
async fn list_bots(
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
) -> Result<axum::response::Response, ApiError> {
    let body = super::conditional::json_bytes(&state.app.bots().await?)?;
    Ok(super::conditional::public(
        &headers,
        "application/json",
        body,
    ))
}
