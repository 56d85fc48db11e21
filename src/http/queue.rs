//! `/v1/queue` (ranked matchmaking) and `/v1/matches/{id}/rematch`.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use super::AppState;
use super::error::{ApiError, Problem};
use super::extract::{ApiJson, ApiPath, Caller, IdempotencyKey};
use crate::app::Answer;
use crate::app::matchmaking::{self, QueueState, RematchState};
use crate::engine::RuleSetId;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(join_queue, queue_state, leave_queue))
        .routes(routes!(ask_rematch, rematch_state))
}

#[derive(Clone, Debug, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct QueueRequest {
    /// The ladder to play on: `statki`, `classic` or `battaglia`.
    #[schema(example = "statki", value_type = RuleSetId)]
    pub ruleset: String,
}

/// Join the ranked queue of a rule set. Players are paired by closest rating within a
/// window (100 points, widening by 5 a second of waiting up to 1000); a pair gets a ranked
/// match with both seats taken and the placement clock running, and a `paired` notice.
/// An entry nobody pairs within 10 minutes expires.
#[utoipa::path(
    post, path = "/v1/queue", tag = "matchmaking",
    request_body = QueueRequest,
    params(("Idempotency-Key" = Option<String>, Header, description = "Retry-safe key, scoped to the caller")),
    security(("bearer" = [])),
    responses(
        (status = 201, description = "Queued, or paired at once", body = QueueState),
        (status = 401, description = "`unauthorized`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`already_queued`, `in_match`, `idempotency_key_in_progress`", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`unknown_ruleset`, `invalid_body`, `idempotency_key_reused`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn join_queue(
    State(state): State<AppState>,
    Caller(caller): Caller,
    key: IdempotencyKey,
    ApiJson(body): ApiJson<QueueRequest>,
) -> Result<(StatusCode, Json<Answer<QueueState>>), ApiError> {
    let idempotency = key.for_request("POST /v1/queue", &body);
    let answer = matchmaking::join(&state.app, caller, &body.ruleset, idempotency.as_ref()).await?;
    Ok((StatusCode::CREATED, Json(answer)))
}

/// The caller's place in the queue: `idle`, `queued` (with the current window) or
/// `paired` (with the match).
#[utoipa::path(
    get, path = "/v1/queue", tag = "matchmaking",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The caller's place in the queue", body = QueueState),
        (status = 401, description = "`unauthorized`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn queue_state(
    State(state): State<AppState>,
    Caller(caller): Caller,
) -> Result<Json<QueueState>, ApiError> {
    Ok(Json(matchmaking::state(&state.app, caller).await?))
}

/// Leave the queue.
#[utoipa::path(
    delete, path = "/v1/queue", tag = "matchmaking",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The caller's place in the queue", body = QueueState),
        (status = 401, description = "`unauthorized`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`not_queued`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn leave_queue(
    State(state): State<AppState>,
    Caller(caller): Caller,
) -> Result<Json<QueueState>, ApiError> {
    Ok(Json(matchmaking::leave(&state.app, caller).await?))
}

/// Ask to play a finished match again. The first ask is an offer, pushed to the opponent
/// as `rematch_offered` and standing for 2 minutes; the opponent's ask while it stands
/// starts a new match with the same rule set and rankedness (seats swapped, placement
/// clock running) and pushes `rematch_started` to both. Asking again renews an offer, and
/// once started every ask answers the same new match.
#[utoipa::path(
    post, path = "/v1/matches/{id}/rematch", tag = "matchmaking",
    params(("id" = Uuid, Path), ("Idempotency-Key" = Option<String>, Header)),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The rematch state of the match", body = RematchState),
        (status = 401, description = "`unauthorized`", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "`not_a_player`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`not_found`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`rematch_unavailable` (the match is not finished)", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn ask_rematch(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiPath(id): ApiPath<Uuid>,
    key: IdempotencyKey,
) -> Result<Json<Answer<RematchState>>, ApiError> {
    let idempotency = key.for_request(&format!("POST /v1/matches/{id}/rematch"), &());
    Ok(Json(
        matchmaking::ask_rematch(&state.app, id, caller, idempotency.as_ref()).await?,
    ))
}

/// The rematch state of a match: standing offers, or the rematch that started.
#[utoipa::path(
    get, path = "/v1/matches/{id}/rematch", tag = "matchmaking",
    params(("id" = Uuid, Path)),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The rematch state of the match", body = RematchState),
        (status = 401, description = "`unauthorized`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`not_found`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn rematch_state(
    State(state): State<AppState>,
    Caller(_): Caller,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<Json<RematchState>, ApiError> {
    Ok(Json(matchmaking::rematch_state(&state.app, id).await?))
}
