//! `/v1/matches`: create, list, join, place, fire, react, resign, decline, and the event
//! feed.

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use super::AppState;
use super::conditional;
use super::error::{ApiError, ErrorCode, Problem};
use super::extract::{ApiJson, ApiPath, ApiQuery, Caller, IdempotencyKey};
use crate::app::reads::{self, MatchPage};
use crate::app::{
    Answer, AppError, EventResource, Idempotency, MatchResource, NewMatch, ShotAnswer,
};
use crate::engine::{Cell, Command, Orientation, Placement, Reaction};
use crate::store::listing::{Cursor, Listing};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_match, list_matches))
        .routes(routes!(get_match))
        .routes(routes!(join_match))
        .routes(routes!(place_ship, remove_ship))
        .routes(routes!(place_fleet))
        .routes(routes!(fire))
        .routes(routes!(react))
        .routes(routes!(resign))
        .routes(routes!(decline))
        .routes(routes!(match_events))
}

/// A ship's position as the client sends it.
#[derive(Clone, Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ShipPosition {
    /// The bow: the ship's top-left end, `A1`…`J10` (letters in either case).
    #[schema(example = "B3", pattern = "^[A-Ja-j](10|[1-9])$")]
    pub cell: String,
    pub orientation: Orientation,
}

impl ShipPosition {
    fn placement(&self) -> Result<Placement, ApiError> {
        Ok(Placement {
            cell: parse_cell(&self.cell)?,
            orientation: self.orientation,
        })
    }
}

#[derive(Clone, Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FleetRequest {
    /// Every ship of the fleet, in fleet order: 5 (`statki`), 10 (`classic`) or 6
    /// (`battaglia`).
    #[schema(min_items = 5, max_items = 10)]
    pub ships: Vec<ShipPosition>,
}

#[derive(Clone, Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ShotRequest {
    /// A cell of the opponent's sea, `A1`…`J10` (letters in either case).
    #[schema(example = "E5", pattern = "^[A-Ja-j](10|[1-9])$")]
    pub cell: String,
}

#[derive(Clone, Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReactionRequest {
    pub reaction: Reaction,
}

/// Which matches `GET /v1/matches` lists.
#[derive(Clone, Copy, Debug, Default, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ListStatus {
    /// Waiting for an opponent and joinable by the caller, the caller's own included
    /// (there `you` is set).
    #[default]
    Open,
    /// Being played (placement or battle), for spectators.
    Live,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// `open` (the default) or `live`.
    #[param(inline)]
    pub status: Option<ListStatus>,
    /// Cursor: the `next` of the previous page.
    #[param(pattern = r"^[0-9]{1,16}\.[0-9a-f]{32}$")]
    pub after: Option<String>,
    /// Matches per page, 1 to 100 (default 50).
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<i64>,
}

/// A page size from `?limit`, within bounds.
pub fn page_limit(limit: Option<i64>) -> Result<i64, ApiError> {
    let limit = limit.unwrap_or(reads::LIST_PAGE_DEFAULT);
    if !(1..=reads::LIST_PAGE_MAX).contains(&limit) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidQuery,
            format!("limit must be between 1 and {}", reads::LIST_PAGE_MAX),
        ));
    }
    Ok(limit)
}

/// A list cursor from `?after`.
pub fn page_cursor(after: Option<&str>) -> Result<Option<Cursor>, ApiError> {
    after
        .map(|text| {
            reads::parse_cursor(text).ok_or_else(|| {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    ErrorCode::InvalidCursor,
                    "`after` must be the `next` cursor of a previous page",
                )
            })
        })
        .transpose()
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct EventsQuery {
    /// Only events with a greater sequence number (0 = all). At most 500 are returned.
    #[serde(default)]
    #[param(minimum = 0, maximum = 9_007_199_254_740_991_i64)]
    pub after: i64,
}

fn parse_cell(text: &str) -> Result<Cell, ApiError> {
    text.parse::<Cell>()
        .map_err(|refusal| ApiError::from(AppError::Rule(refusal)))
}

/// Runs a match command and answers with the caller's view of the match after it.
async fn answer_with_view(
    state: &AppState,
    id: Uuid,
    caller: Uuid,
    command: Command,
    idempotency: Option<Idempotency>,
) -> Result<Json<Answer<MatchResource>>, ApiError> {
    Ok(Json(
        state.app.command(id, caller, command, idempotency).await?,
    ))
}

/// Create a match; the creator takes the first seat.
#[utoipa::path(
    post, path = "/v1/matches", tag = "matches",
    request_body = NewMatch,
    security(("bearer" = [])),
    params(("Idempotency-Key" = Option<String>, Header, description = "Retry-safe key, scoped to the caller")),
    responses(
        (status = 201, description = "The new match as its creator sees it", body = MatchResource),
        (status = 404, description = "`not_found`: no player has the opponent id", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`own_match` (challenging yourself), `too_many_open_matches` (the creator already holds the most unjoined matches allowed), `idempotency_key_in_progress`", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`unknown_ruleset`, `invalid_option`, `ranked_needs_standard_rules`, `ranked_against_bot` (a ranked challenge to a bot), `invalid_body`, `idempotency_key_reused`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn create_match(
    State(state): State<AppState>,
    Caller(caller): Caller,
    key: IdempotencyKey,
    ApiJson(body): ApiJson<NewMatch>,
) -> Result<axum::response::Response, ApiError> {
    let idempotency = key.for_request("POST /v1/matches", &body);
    let created = state
        .app
        .create_match(caller, &body, idempotency.as_ref())
        .await?;
    Ok(super::created("/v1/matches", created))
}

/// Matches newest first, a page at a time: `status=open` (the default) lists those waiting
/// for an opponent that the caller may join, the caller's own included and marked by
/// `you`; `status=live` lists those being played, for spectators.
#[utoipa::path(
    get, path = "/v1/matches", tag = "matches",
    params(ListQuery),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "A page of matches as the caller sees them", body = MatchPage),
        (status = 400, description = "`invalid_cursor`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn list_matches(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Json<MatchPage>, ApiError> {
    let limit = page_limit(query.limit)?;
    let after = page_cursor(query.after.as_deref())?;
    let listing = match query.status.unwrap_or_default() {
        ListStatus::Open => Listing::Open { viewer: caller },
        ListStatus::Live => Listing::Live,
    };
    Ok(Json(
        state
            .app
            .list_matches(listing, caller, after, limit)
            .await?,
    ))
}

/// The caller's view: a participant's own side, or a spectator's.
#[utoipa::path(
    get, path = "/v1/matches/{id}", tag = "matches",
    params(("id" = Uuid, Path)),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The match as the caller sees it (participant or spectator)", body = MatchResource,
            headers(("ETag" = String, description = "The view's tag, from the match's sequence number and who is online (weak: `deadline_ms_left` moves on); send it as `If-None-Match` to be answered 304 while nothing happened"))),
        (status = 304, description = "Not modified: `If-None-Match` names the current view's tag, so nothing happened since (and nobody came or went)",
            headers(("ETag" = String, description = "The view's tag"))),
        (status = 404, description = "`not_found`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn get_match(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiPath(id): ApiPath<Uuid>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let mut view = state.app.view(id, caller).await?;
    let online = state
        .live
        .online(&view.seated())
        .await
        .map_err(crate::app::AppError::from)?;
    view.set_presence(&online);
    let tag = conditional::view_tag(view.seq, caller, &view.presence);
    Ok(conditional::view(
        &headers,
        &tag,
        Json(view).into_response(),
    ))
}

/// Take the second seat; the placement clock starts.
#[utoipa::path(
    post, path = "/v1/matches/{id}/join", tag = "matches",
    params(("id" = Uuid, Path), ("Idempotency-Key" = Option<String>, Header)),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The match as the caller sees it after the change", body = MatchResource),
        (status = 403, description = "`not_invited`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`not_found`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`wrong_phase`, `own_match`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn join_match(
    State(state): State<AppState>,
    Caller(caller): Caller,
    key: IdempotencyKey,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<Json<Answer<MatchResource>>, ApiError> {
    let idempotency = key.for_request(&format!("POST /v1/matches/{id}/join"), &());
    answer_with_view(&state, id, caller, Command::Join, idempotency).await
}

/// Place or move ship `index` (0-based, fleet order). Placing the last ship locks the fleet.
#[utoipa::path(
    put, path = "/v1/matches/{id}/ships/{index}", tag = "matches",
    params(("id" = Uuid, Path), ("index" = u8, Path, minimum = 0, maximum = 9, description = "The ship's place in the fleet order, from 0"), ("Idempotency-Key" = Option<String>, Header)),
    request_body = ShipPosition,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The match as the caller sees it after the change", body = MatchResource),
        (status = 403, description = "`not_a_player`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`wrong_phase`, `fleet_locked`, `too_many_placement_moves` (100 single-ship moves made in this match: the whole fleet can still be placed with `PUT …/fleet`)", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`invalid_cell`, `off_board`, `overlap`, `ships_touching`, `unknown_ship`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn place_ship(
    State(state): State<AppState>,
    Caller(caller): Caller,
    key: IdempotencyKey,
    ApiPath((id, index)): ApiPath<(Uuid, usize)>,
    ApiJson(body): ApiJson<ShipPosition>,
) -> Result<Json<Answer<MatchResource>>, ApiError> {
    let placement = body.placement()?;
    let idempotency = key.for_request(&format!("PUT /v1/matches/{id}/ships/{index}"), &body);
    let command = Command::PlaceShip { index, placement };
    answer_with_view(&state, id, caller, command, idempotency).await
}

/// Pick ship `index` up again (only while the fleet is not locked).
#[utoipa::path(
    delete, path = "/v1/matches/{id}/ships/{index}", tag = "matches",
    params(("id" = Uuid, Path), ("index" = u8, Path, minimum = 0, maximum = 9, description = "The ship's place in the fleet order, from 0")),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The match as the caller sees it after the change", body = MatchResource),
        (status = 403, description = "`not_a_player`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`wrong_phase`, `fleet_locked`, `ship_not_placed`, `too_many_placement_moves` (100 single-ship moves made in this match)", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`unknown_ship`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn remove_ship(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiPath((id, index)): ApiPath<(Uuid, usize)>,
) -> Result<Json<Answer<MatchResource>>, ApiError> {
    answer_with_view(&state, id, caller, Command::RemoveShip { index }, None).await
}

/// Place the whole fleet at once and lock it.
#[utoipa::path(
    put, path = "/v1/matches/{id}/fleet", tag = "matches",
    params(("id" = Uuid, Path), ("Idempotency-Key" = Option<String>, Header)),
    request_body = FleetRequest,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The match as the caller sees it after the change", body = MatchResource),
        (status = 403, description = "`not_a_player`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`wrong_phase`, `fleet_locked`", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`invalid_cell`, `off_board`, `overlap`, `ships_touching`, `wrong_fleet_size`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn place_fleet(
    State(state): State<AppState>,
    Caller(caller): Caller,
    key: IdempotencyKey,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(body): ApiJson<FleetRequest>,
) -> Result<Json<Answer<MatchResource>>, ApiError> {
    let placements = body
        .ships
        .iter()
        .map(ShipPosition::placement)
        .collect::<Result<_, _>>()?;
    let idempotency = key.for_request(&format!("PUT /v1/matches/{id}/fleet"), &body);
    let command = Command::PlaceFleet { placements };
    answer_with_view(&state, id, caller, command, idempotency).await
}

/// Fire at one cell of the opponent's sea.
#[utoipa::path(
    post, path = "/v1/matches/{id}/shots", tag = "matches",
    params(("id" = Uuid, Path), ("Idempotency-Key" = Option<String>, Header)),
    request_body = ShotRequest,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "What the shot found, the turn and the clock after it", body = ShotAnswer),
        (status = 403, description = "`not_a_player`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`wrong_phase`, `not_your_turn`, `already_shot`, `already_known`", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`invalid_cell`, `off_board`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn fire(
    State(state): State<AppState>,
    Caller(caller): Caller,
    key: IdempotencyKey,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(body): ApiJson<ShotRequest>,
) -> Result<Json<Answer<ShotAnswer>>, ApiError> {
    let cell = parse_cell(&body.cell)?;
    let idempotency = key.for_request(&format!("POST /v1/matches/{id}/shots"), &body);
    Ok(Json(state.app.fire(id, caller, cell, idempotency).await?))
}

/// Send one of the fixed reactions to the match (seen by both players and spectators as a
/// `reaction` event). Only the two players, only during placement or battle; each player
/// may send at most 20 per match, one every 3 s. Nothing of the game changes.
#[utoipa::path(
    post, path = "/v1/matches/{id}/reactions", tag = "matches",
    params(("id" = Uuid, Path), ("Idempotency-Key" = Option<String>, Header)),
    request_body = ReactionRequest,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The match as the caller sees it after the reaction", body = MatchResource),
        (status = 403, description = "`not_a_player`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`wrong_phase` (the match has not started or is over)", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "`too_many_reactions`: with `Retry-After` (seconds until allowed) when the caller reacted less than 3 s ago; without it once the caller sent all 20 reactions of the match (no retry will succeed)", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn react(
    State(state): State<AppState>,
    Caller(caller): Caller,
    key: IdempotencyKey,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(body): ApiJson<ReactionRequest>,
) -> Result<Json<Answer<MatchResource>>, ApiError> {
    let idempotency = key.for_request(&format!("POST /v1/matches/{id}/reactions"), &body);
    let command = Command::React {
        reaction: body.reaction,
    };
    answer_with_view(&state, id, caller, command, idempotency).await
}

/// Resign: the opponent wins. Before anyone joined, the creator withdraws the match.
#[utoipa::path(
    post, path = "/v1/matches/{id}/resign", tag = "matches",
    params(("id" = Uuid, Path), ("Idempotency-Key" = Option<String>, Header)),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The match as the caller sees it after the change", body = MatchResource),
        (status = 403, description = "`not_a_player`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`wrong_phase`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn resign(
    State(state): State<AppState>,
    Caller(caller): Caller,
    key: IdempotencyKey,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<Json<Answer<MatchResource>>, ApiError> {
    let idempotency = key.for_request(&format!("POST /v1/matches/{id}/resign"), &());
    answer_with_view(&state, id, caller, Command::Resign, idempotency).await
}

/// Decline: the invited player refuses a challenge; the match is cancelled (reason
/// `declined`) and the challenger's feed gets a `challenge_declined` notice.
#[utoipa::path(
    post, path = "/v1/matches/{id}/decline", tag = "matches",
    params(("id" = Uuid, Path), ("Idempotency-Key" = Option<String>, Header)),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The cancelled match as the caller (now a spectator of it) sees it", body = MatchResource),
        (status = 403, description = "`not_invited` (the challenge is for someone else, or the match is open to all)", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`wrong_phase` (the challenge was already taken, declined or withdrawn)", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn decline(
    State(state): State<AppState>,
    Caller(caller): Caller,
    key: IdempotencyKey,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<Json<Answer<MatchResource>>, ApiError> {
    let idempotency = key.for_request(&format!("POST /v1/matches/{id}/decline"), &());
    answer_with_view(&state, id, caller, Command::Decline, idempotency).await
}

/// The events the caller may see, in order, after `after`.
#[utoipa::path(
    get, path = "/v1/matches/{id}/events", tag = "matches",
    params(("id" = Uuid, Path), EventsQuery),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The events after `after`, in order, at most 500", body = Vec<EventResource>,
            headers(("ETag" = String, description = "A digest of the page; send it as `If-None-Match` to be answered 304 while nothing happened"))),
        (status = 304, description = "Not modified: `If-None-Match` names the current page's tag",
            headers(("ETag" = String, description = "The page's tag"))),
        (status = 404, description = "`not_found`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn match_events(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<EventsQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    if !(0..=super::stream::CURSOR_MAX).contains(&query.after) {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidQuery,
            format!(
                "`after` is a sequence number from 0 to {}",
                super::stream::CURSOR_MAX
            ),
        ));
    }
    let events = state.app.events(id, caller, query.after).await?;
    let body = conditional::json_bytes(&events)?;
    Ok(conditional::private(
        &headers,
        "application/json",
        body,
        "authorization",
    ))
}
