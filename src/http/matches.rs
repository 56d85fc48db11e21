//! `/v1/matches`: create, list, join, place, fire, resign, and the event feed.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use super::AppState;
use super::error::{ApiError, Problem};
use super::extract::{ApiJson, ApiPath, ApiQuery, Caller, IdempotencyKey};
use crate::app::{
    Answer, AppError, EventResource, Idempotency, MatchResource, NewMatch, ShotAnswer,
};
use crate::engine::{Cell, Command, Orientation, Placement};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_match, list_matches))
        .routes(routes!(get_match))
        .routes(routes!(join_match))
        .routes(routes!(place_ship, remove_ship))
        .routes(routes!(place_fleet))
        .routes(routes!(fire))
        .routes(routes!(resign))
        .routes(routes!(match_events))
}

/// A ship's position as the client sends it.
#[derive(Clone, Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ShipPosition {
    /// The bow: the ship's top-left end, `A1`…`J10`.
    #[schema(example = "B3")]
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
    /// Every ship of the fleet, in fleet order.
    pub ships: Vec<ShipPosition>,
}

#[derive(Clone, Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ShotRequest {
    #[schema(example = "E5")]
    pub cell: String,
}

#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Only `open` (waiting for an opponent) is supported.
    pub status: Option<String>,
}

#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct EventsQuery {
    /// Only events with a greater sequence number (0 = all). At most 500 are returned.
    #[serde(default)]
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
        (status = 201, body = MatchResource),
        (status = 401, description = "`unauthorized`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`own_match` (challenging yourself), `too_many_open_matches` (the creator already holds the most unjoined matches allowed), `idempotency_key_in_progress`", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`unknown_ruleset`, `invalid_option`, `ranked_needs_standard_rules`, `invalid_body`, `idempotency_key_reused`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn create_match(
    State(state): State<AppState>,
    Caller(caller): Caller,
    key: IdempotencyKey,
    ApiJson(body): ApiJson<NewMatch>,
) -> Result<(StatusCode, Json<Answer<MatchResource>>), ApiError> {
    let idempotency = key.for_request("POST /v1/matches", &body);
    let created = state
        .app
        .create_match(caller, &body, idempotency.as_ref())
        .await?;
    Ok((StatusCode::CREATED, Json(created)))
}

/// Matches waiting for an opponent that the caller may join (oldest first, 100 at most).
#[utoipa::path(
    get, path = "/v1/matches", tag = "matches",
    params(ListQuery),
    security(("bearer" = [])),
    responses(
        (status = 200, body = Vec<MatchResource>),
        (status = 400, description = "`invalid_query`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn list_matches(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Json<Vec<MatchResource>>, ApiError> {
    match query.status.as_deref() {
        None | Some("open") => Ok(Json(state.app.open_matches(caller).await?)),
        Some(other) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_query",
            format!("status `{other}` is not supported; use status=open"),
        )),
    }
}

/// The caller's view: a participant's own side, or a spectator's.
#[utoipa::path(
    get, path = "/v1/matches/{id}", tag = "matches",
    params(("id" = Uuid, Path)),
    security(("bearer" = [])),
    responses(
        (status = 200, body = MatchResource),
        (status = 404, description = "`not_found`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn get_match(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<Json<MatchResource>, ApiError> {
    Ok(Json(state.app.view(id, caller).await?))
}

/// Take the second seat; the placement clock starts.
#[utoipa::path(
    post, path = "/v1/matches/{id}/join", tag = "matches",
    params(("id" = Uuid, Path), ("Idempotency-Key" = Option<String>, Header)),
    security(("bearer" = [])),
    responses(
        (status = 200, body = MatchResource),
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
    params(("id" = Uuid, Path), ("index" = usize, Path), ("Idempotency-Key" = Option<String>, Header)),
    request_body = ShipPosition,
    security(("bearer" = [])),
    responses(
        (status = 200, body = MatchResource),
        (status = 403, description = "`not_a_player`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`wrong_phase`, `fleet_locked`", body = Problem, content_type = "application/problem+json"),
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
    params(("id" = Uuid, Path), ("index" = usize, Path)),
    security(("bearer" = [])),
    responses(
        (status = 200, body = MatchResource),
        (status = 409, description = "`wrong_phase`, `fleet_locked`, `ship_not_placed`", body = Problem, content_type = "application/problem+json"),
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
        (status = 200, body = MatchResource),
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
        (status = 200, body = ShotAnswer),
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

/// Resign: the opponent wins. Before anyone joined, the creator withdraws the match.
#[utoipa::path(
    post, path = "/v1/matches/{id}/resign", tag = "matches",
    params(("id" = Uuid, Path), ("Idempotency-Key" = Option<String>, Header)),
    security(("bearer" = [])),
    responses(
        (status = 200, body = MatchResource),
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

/// The events the caller may see, in order, after `after`.
#[utoipa::path(
    get, path = "/v1/matches/{id}/events", tag = "matches",
    params(("id" = Uuid, Path), EventsQuery),
    security(("bearer" = [])),
    responses(
        (status = 200, body = Vec<EventResource>),
        (status = 404, description = "`not_found`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn match_events(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<EventsQuery>,
) -> Result<Json<Vec<EventResource>>, ApiError> {
    Ok(Json(state.app.events(id, caller, query.after).await?))
}
