//! `/v1/players`: registration and public profiles.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use super::AppState;
use super::error::{ApiError, Problem};
use super::extract::{ApiJson, ApiPath, ApiQuery, Caller};
use crate::app::{MatchResource, PlayerCreated, PlayerProfile};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_player))
        .routes(routes!(get_player))
        .routes(routes!(player_matches))
}

#[derive(Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewPlayer {
    /// 1–32 characters, unique regardless of case.
    pub name: String,
}

/// Register a player; the answer carries the bearer token for every later call.
#[utoipa::path(
    post, path = "/v1/players", tag = "players",
    request_body = NewPlayer,
    responses(
        (status = 201, body = PlayerCreated),
        (status = 409, description = "`name_taken`", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`invalid_name`, `invalid_body`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn create_player(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<NewPlayer>,
) -> Result<(StatusCode, Json<PlayerCreated>), ApiError> {
    let created = state.app.register(&body.name).await?;
    Ok((StatusCode::CREATED, Json(created)))
}

/// A player's public profile and record.
#[utoipa::path(
    get, path = "/v1/players/{id}", tag = "players",
    params(("id" = Uuid, Path, description = "Player id")),
    responses(
        (status = 200, body = PlayerProfile),
        (status = 404, description = "`not_found`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn get_player(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<Json<PlayerProfile>, ApiError> {
    Ok(Json(state.app.profile(id).await?))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct MatchesPage {
    /// Cursor: only matches created before this time (the last `created_at` of a page).
    pub before: Option<chrono::DateTime<chrono::Utc>>,
}

/// A player's matches, newest first, 100 a page.
#[utoipa::path(
    get, path = "/v1/players/{id}/matches", tag = "players",
    params(("id" = Uuid, Path, description = "Player id"), MatchesPage),
    security(("bearer" = [])),
    responses(
        (status = 200, body = Vec<MatchResource>),
        (status = 401, description = "`unauthorized`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`not_found`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn player_matches(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(page): ApiQuery<MatchesPage>,
) -> Result<Json<Vec<MatchResource>>, ApiError> {
    Ok(Json(
        state.app.player_matches(id, caller, page.before).await?,
    ))
}
