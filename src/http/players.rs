//! `/v1/players`: registration and public profiles.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use super::AppState;
use super::error::{ApiError, Problem};
use super::extract::{ApiJson, ApiPath, ApiQuery, IdempotencyKey, MaybeCaller};
use crate::app::reads::MatchPage;
use crate::app::{PlayerProfile, Session};
use crate::store::listing::Listing;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_player))
        .routes(routes!(get_player))
        .routes(routes!(player_matches))
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewPlayer {
    /// 1–32 characters, unique regardless of case and look-alikes; no control, invisible
    /// or bidirectional-control characters (the pattern lists those of the Basic
    /// Multilingual Plane; the server also refuses the few beyond it, and a name without a
    /// letter or digit, as `422 invalid_name`), and no white space at either end.
    #[schema(
        min_length = 1,
        max_length = 32,
        pattern = r"^[^\s\x00-\x1f\x7f-\x9f\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\u2800\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffc]([^\x00-\x1f\x7f-\x9f\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\u2800\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffc]*[^\s\x00-\x1f\x7f-\x9f\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\u2800\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffc])?$",
        example = "Ala"
    )]
    pub name: String,
    /// Optional, 8–128 characters: lets the player log in again (`POST /v1/sessions`).
    #[serde(default)]
    #[schema(min_length = 8, max_length = 128)]
    pub password: Option<String>,
}

/// What a registration key is bound to: the name and whether a password came, never the
/// password itself (a retry carrying one is checked against the stored hash instead).
#[derive(Serialize)]
struct RegistrationDigest<'a> {
    name: &'a str,
    password: bool,
}

/// Register a player; the answer carries the bearer token for every later call.
#[utoipa::path(
    post, path = "/v1/players", tag = "players",
    request_body = NewPlayer,
    params(("Idempotency-Key" = Option<String>, Header, description = "Retry-safe key (use a random one, e.g. a UUID): a retry with the same key and body gets the first answer")),
    responses(
        (status = 201, description = "The new player with a bearer token", body = Session),
        (status = 409, description = "`name_taken`, `idempotency_key_in_progress`", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`invalid_name`, `invalid_password`, `invalid_body`, `idempotency_key_reused`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn create_player(
    State(state): State<AppState>,
    key: IdempotencyKey,
    ApiJson(body): ApiJson<NewPlayer>,
) -> Result<axum::response::Response, ApiError> {
    let digest = RegistrationDigest {
        name: &body.name,
        password: body.password.is_some(),
    };
    let idempotency = key.for_request("POST /v1/players", &digest);
    let created = state
        .app
        .register(&body.name, body.password, idempotency.as_ref())
        .await?;
    Ok(super::created("/v1/players", created))
}

/// A player's public profile and record.
#[utoipa::path(
    get, path = "/v1/players/{id}", tag = "players",
    params(("id" = Uuid, Path, description = "Player id")),
    responses(
        (status = 200, description = "The player's public profile", body = PlayerProfile,
            headers(("ETag" = String, description = "A digest of the profile; send it as `If-None-Match` to be answered 304 while it is unchanged"))),
        (status = 304, description = "Not modified: `If-None-Match` names the current profile's tag",
            headers(("ETag" = String, description = "The profile's tag"))),
        (status = 404, description = "`not_found`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn get_player(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
    headers: axum::http::HeaderMap,
) -> Result<axum::response::Response, ApiError> {
    let profile: PlayerProfile = state.app.profile(id).await?;
    let body = super::conditional::json_bytes(&profile)?;
    Ok(super::conditional::revalidated(
        &headers,
        "application/json",
        body,
    ))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct MatchesPage {
    /// Cursor: the `next` of the previous page.
    #[param(pattern = r"^[0-9]{1,16}\.[0-9a-f]{32}$")]
    pub after: Option<String>,
    /// Matches per page, 1 to 100 (default 50).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<i64>,
}

/// A player's matches, newest first, a page at a time. Public like the profile: without a
/// token every entry is a spectator's view; with one, the caller's own matches are its
/// participant views.
#[utoipa::path(
    get, path = "/v1/players/{id}/matches", tag = "players",
    params(("id" = Uuid, Path, description = "Player id"), MatchesPage),
    security((), ("bearer" = [])),
    responses(
        (status = 200, description = "A page of the player's matches as the caller sees them", body = MatchPage),
        (status = 400, description = "`invalid_cursor`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`not_found`: no such player", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn player_matches(
    State(state): State<AppState>,
    MaybeCaller(caller): MaybeCaller,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(page): ApiQuery<MatchesPage>,
) -> Result<Json<MatchPage>, ApiError> {
    let limit = super::matches::page_limit(page.limit)?;
    let after = super::matches::page_cursor(page.after.as_deref())?;
    let listing = Listing::PlayerOf { player: id };
    Ok(Json(
        state
            .app
            .list_matches(listing, caller.unwrap_or(Uuid::nil()), after, limit)
            .await?,
    ))
}
