//! Server-sent event streams: a match's events (`/v1/matches/{id}/stream`) and the
//! caller's own notices (`/v1/stream`). Both resume after `Last-Event-ID`. The wire
//! format lives here: the typed items of a `live` feed become `id:`, `event:` and `data:`.

use std::convert::Infallible;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use super::AppState;
use super::error::{ApiError, ErrorCode, Problem};
use super::extract::{ApiPath, ApiQuery, Authenticated, bearer};
use crate::app::StreamTicket;
use crate::auth::Verified;
use crate::live::{Feed, LiveError, MatchItem, Topic};
use crate::store::notices::Notice as StoredNotice;

/// What a notice says, by kind (the schema of each kind's own fields; the service stores
/// them as the notice's payload).
#[derive(serde::Serialize, ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[allow(dead_code)]
pub enum NoticeData {
    /// A direct challenge to the caller.
    Challenge {
        match_id: Uuid,
        from: Uuid,
        ruleset: crate::engine::RuleSetId,
        ranked: bool,
    },
    /// Someone took the second seat of the caller's match.
    OpponentJoined { match_id: Uuid, player: Uuid },
    /// The invited `player` declined the caller's challenge; the match is cancelled.
    ChallengeDeclined { match_id: Uuid, player: Uuid },
    /// The ranked queue paired the caller.
    Paired {
        match_id: Uuid,
        opponent: Uuid,
        ruleset: crate::engine::RuleSetId,
        ranked: bool,
    },
    /// The opponent of a finished match offers a rematch, standing until `expires_at`.
    RematchOffered {
        match_id: Uuid,
        from: Uuid,
        ruleset: crate::engine::RuleSetId,
        ranked: bool,
        expires_at: chrono::DateTime<chrono::Utc>,
    },
    /// A rematch started: `match_id` is the new match, `previous` the finished one.
    RematchStarted {
        match_id: Uuid,
        previous: Uuid,
        opponent: Uuid,
        ruleset: crate::engine::RuleSetId,
        ranked: bool,
    },
}

/// One notice of the caller's own feed: the `data` of each `GET /v1/stream` event (whose
/// `event:` is the `kind` and `id:` the `seq`), one schema per `kind`.
#[derive(serde::Serialize, ToSchema)]
#[allow(dead_code)]
pub struct Notice {
    /// The notice's number on the caller's feed.
    seq: i64,
    at: chrono::DateTime<chrono::Utc>,
    #[serde(flatten)]
    data: NoticeData,
    /// The names of the players the notice names, by id.
    names: std::collections::BTreeMap<Uuid, String>,
}

/// The `data` of one match stream event: first, on a stream opened without a resume point,
/// the caller's view (`kind` `state`), then the match's events, one schema per `kind`.
#[derive(serde::Serialize, ToSchema)]
#[serde(untagged)]
// Only a schema: never built.
#[allow(dead_code, clippy::large_enum_variant)]
pub enum MatchStreamEvent {
    State(crate::app::MatchState),
    Event(crate::app::EventResource),
    Presence(crate::app::PresenceChange),
}

/// Largest resume point: the largest integer a JavaScript client holds exactly, far beyond
/// any sequence number, and far enough from `i64::MAX` that no arithmetic on it overflows.
pub const CURSOR_MAX: i64 = (1 << 53) - 1;

/// Seconds a refused client is asked to wait before trying again.
const RETRY_AFTER_SECONDS: &str = "5";

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(match_stream))
        .routes(routes!(player_stream))
        .routes(routes!(stream_ticket))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct StreamQuery {
    /// Start after this sequence number (0 = from the beginning). A `Last-Event-ID`
    /// header, as sent by a reconnecting client, takes precedence.
    #[param(minimum = 0, maximum = 9_007_199_254_740_991_i64)]
    pub after: Option<i64>,
    /// A stream ticket (`POST /v1/stream-tickets`) instead of the `Authorization` header,
    /// for `EventSource`; single use, and spent by any answer to a request that carries it
    /// (a refused one too). Not used, but spent, when the header is sent.
    #[param(pattern = "^[0-9a-f]{64}$", min_length = 64, max_length = 64)]
    pub ticket: Option<String>,
}

/// Marks an answer whose request's stream ticket was taken by the handler, so
/// [`void_unspent_tickets`] need not void it.
#[derive(Clone, Copy, Debug)]
struct TicketTaken;

/// Longest a request waits for its ticket to be voided before its answer goes out anyway
/// (the ticket then lives out its minute).
const VOID_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The stream tickets a request's query carries: every `ticket` parameter (decoded) that
/// has a ticket's form. Anything else cannot be one, so costs no database work.
fn tickets_in(uri: &axum::http::Uri) -> Vec<String> {
    let Ok(axum::extract::Query(pairs)) =
        axum::extract::Query::<Vec<(String, String)>>::try_from_uri(uri)
    else {
        return Vec::new();
    };
    pairs
        .into_iter()
        .filter(|(name, value)| name == "ticket" && is_ticket_form(value))
        .map(|(_, value)| value)
        .take(2)
        .collect()
}

/// Every answer spends the stream tickets its request carried: a stream opened with one
/// took it; any other answer (a refused query or resume point, a bearer header beside it,
/// an unknown path, a rate limit, a timeout) voids it before it is sent, so a ticket seen
/// once, in a log or an address bar, opens nothing afterwards.
pub(super) async fn void_unspent_tickets(
    State(state): State<AppState>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let tickets = tickets_in(request.uri());
    let response = next.run(request).await;
    if tickets.is_empty() || response.extensions().get::<TicketTaken>().is_some() {
        return response;
    }
    for ticket in &tickets {
        match tokio::time::timeout(VOID_WAIT, state.app.void_stream_ticket(ticket)).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::warn!(%error, "voiding a stream ticket failed"),
            Err(_) => tracing::warn!("voiding a stream ticket took too long"),
        }
    }
    response
}

/// Who opens a stream: the bearer token's holder, or, without the header, the holder of
/// the token a ticket was issued for (the ticket is used up, and the token must still be
/// valid).
async fn stream_caller(
    state: &AppState,
    headers: &HeaderMap,
    query: &StreamQuery,
) -> Result<Verified, ApiError> {
    let ticket = match &query.ticket {
        Some(ticket) if !headers.contains_key(header::AUTHORIZATION) => ticket,
        _ => return bearer(state, headers).await,
    };
    let verified = state
        .app
        .redeem_stream_ticket(ticket)
        .await
        .map_err(|error| match error {
            crate::app::AppError::Revoked => ApiError::unauthorized(
                "the stream ticket is unknown, expired or already used; ask for another",
            ),
            other => ApiError::from(other),
        })?;
    state
        .live
        .revocations()
        .admit(verified)
        .await
        .map_err(crate::app::AppError::from)?;
    Ok(verified)
}

/// A stream ticket: a short-lived, single-use stand-in for the bearer token, accepted as
/// `?ticket=` by `GET /v1/matches/{id}/stream` and `GET /v1/stream` (and nowhere else), so
/// a browser's `EventSource`, which cannot send headers, can open them. It is good for
/// one stream within `expires_in` seconds, and no longer than the token it was issued
/// for. Tickets are never logged, and only their digests are stored.
#[utoipa::path(
    post, path = "/v1/stream-tickets", tag = "live",
    security(("bearer" = [])),
    responses(
        (status = 201, description = "A ticket for one stream", body = StreamTicket),
    )
)]
async fn stream_ticket(
    State(state): State<AppState>,
    Authenticated(token): Authenticated,
) -> Result<Response, ApiError> {
    let ticket = state.app.issue_stream_ticket(token).await?;
    Ok((StatusCode::CREATED, axum::Json(ticket)).into_response())
}

/// A `ticket` must have a ticket's form (64 lowercase hexadecimal digits) as the document
/// says, with or without a bearer header beside it: anything else is `invalid_query`, not
/// quietly ignored.
fn ticket_form(query: &StreamQuery) -> Result<(), ApiError> {
    match &query.ticket {
        Some(ticket) if !is_ticket_form(ticket) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidQuery,
            "`ticket` is a stream ticket: 64 lowercase hexadecimal digits from POST /v1/stream-tickets",
        )),
        _ => Ok(()),
    }
}

fn is_ticket_form(value: &str) -> bool {
    value.len() == 64
        && value
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Where a stream resumes: `Last-Event-ID`, else `?after`, else nowhere (`None`: a fresh
/// stream). Either must be a whole number from 0 to [`CURSOR_MAX`]: a bad header is
/// `invalid_last_event_id`, a bad `?after` is `invalid_query`.
fn resume_point(headers: &HeaderMap, query: &StreamQuery) -> Result<Option<i64>, ApiError> {
    let in_range = |n: i64| (0..=CURSOR_MAX).contains(&n);
    if let Some(value) = headers.get("last-event-id") {
        let text = value.to_str().unwrap_or_default().trim();
        if !text.is_empty() {
            return text
                .parse::<i64>()
                .ok()
                .filter(|n| in_range(*n))
                .map(Some)
                .ok_or_else(|| {
                    ApiError::new(
                        StatusCode::BAD_REQUEST,
                        ErrorCode::InvalidLastEventId,
                        format!(
                            "Last-Event-ID must be the id of an event this stream sent \
                             (0 to {CURSOR_MAX})"
                        ),
                    )
                });
        }
    }
    match query.after {
        None => Ok(None),
        Some(after) if in_range(after) => Ok(Some(after)),
        Some(_) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidQuery,
            format!("`after` is a sequence number from 0 to {CURSOR_MAX}"),
        )),
    }
}

fn live_error(error: LiveError) -> Response {
    let detail = error.to_string();
    match error {
        LiveError::TooManyForPlayer(_) | LiveError::TooManyForReplica(_) => {
            let mut response = ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                ErrorCode::TooManyStreams,
                detail,
            )
            .into_response();
            response.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from_static(RETRY_AFTER_SECONDS),
            );
            response
        }
        LiveError::NotFound => ApiError::not_found(detail).into_response(),
        LiveError::Closed => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::Unavailable,
            detail,
        )
        .into_response(),
        LiveError::Store(error) => {
            ApiError::from(crate::app::AppError::from(error)).into_response()
        }
    }
}

/// A match stream's item: the caller's view (`event: state`, `id:` its `seq`, `data:` a
/// `MatchState`) or an event (`id:` its sequence number, `event:` its kind, `data:` the
/// `EventResource`, as in `GET /v1/matches/{id}/events`).
fn match_sse(item: MatchItem) -> Result<Event, Infallible> {
    let json = |data: serde_json::Result<String>| data.unwrap_or_else(|_| "{}".to_owned());
    Ok(match item {
        MatchItem::State(state) => Event::default()
            .id(state.seq.to_string())
            .event("state")
            .data(json(serde_json::to_string(&state))),
        MatchItem::Event(resource) => Event::default()
            .id(resource.seq.to_string())
            .event(resource.event.kind())
            .data(json(serde_json::to_string(&resource))),
        // Not a numbered event: no `id:`, so a resuming client's `Last-Event-ID` stays put.
        MatchItem::Presence(change) => Event::default()
            .event("presence")
            .data(json(serde_json::to_string(&change))),
    })
}

/// A notice: `id:` its number on the caller's feed, `event:` its kind, `data:` a `Notice`.
fn notice_sse(notice: StoredNotice) -> Result<Event, Infallible> {
    Ok(Event::default()
        .id(notice.seq.to_string())
        .event(&notice.kind)
        .data(notice_json(&notice).to_string()))
}

/// A notice as its stream carries it: `seq`, `at`, `kind` and the payload's fields.
pub fn notice_json(notice: &StoredNotice) -> Value {
    let mut object = serde_json::Map::new();
    object.insert("seq".into(), notice.seq.into());
    // The same form as every other timestamp the API sends (serde's RFC 3339, `Z`).
    object.insert(
        "at".into(),
        serde_json::to_value(notice.at).unwrap_or(Value::Null),
    );
    object.insert("kind".into(), Value::String(notice.kind.clone()));
    match &notice.payload {
        Value::Object(fields) => {
            for (key, value) in fields {
                object.entry(key.clone()).or_insert_with(|| value.clone());
            }
        }
        Value::Null => {}
        other => {
            object.insert("payload".into(), other.clone());
        }
    }
    Value::Object(object)
}

/// The feed as an event stream, which ends when the token it was opened with is revoked.
fn sse<T: Topic>(
    state: &AppState,
    feed: Feed<T>,
    token: Verified,
    render: fn(T::Item) -> Result<Event, Infallible>,
) -> Response {
    let keep_alive = KeepAlive::new().interval(state.live.settings().keep_alive);
    let revoked = state.live.revocations().until_revoked(token);
    let (parts, body) = Sse::new(feed.into_stream().take_until(revoked).map(render))
        .keep_alive(keep_alive)
        .into_response()
        .into_parts();
    let (detachable, body) = super::server::Detachable::new(body);
    let mut response = Response::from_parts(parts, body);
    response.extensions_mut().insert(detachable);
    // Reverse proxies that buffer responses (nginx) would hold events back.
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// A match's events as server-sent events, redacted for the caller (participant or
/// spectator). Opened without a resume point, the first event is `state`: the caller's
/// whole view (`id:` its `seq`), then the events after it. With `Last-Event-ID` (or
/// `?after`) the stream continues after that point with no new `state`. Each event has
/// `id:` = its sequence number, `event:` = its kind, and `data:` = an `EventResource`, the
/// same JSON object as in `GET /v1/matches/{id}/events`. A comment line is sent every 15 s
/// of silence. The stream ends after the event that ends the match; a `match_finished`
/// carries the whole record.
#[utoipa::path(
    get, path = "/v1/matches/{id}/stream", tag = "live",
    params(
        ("id" = Uuid, Path),
        ("Last-Event-ID" = Option<i64>, Header, description = "Resume after this sequence number"),
        StreamQuery,
    ),
    security(("bearer" = []), ()),
    responses(
        (status = 200, description = "Server-sent events (see docs/live.md): each event's `id:` is its `seq`, `event:` its `kind`, and `data:` one JSON object of the schema given here, which types one event's data rather than the whole body. Without a resume point the first event is `state` (the caller's view at its `seq`); a `match_finished` carries the `record`. A comment line (`:`) keeps an idle stream open.", content_type = "text/event-stream", body = MatchStreamEvent),
        (status = 204, description = "The match is over and the caller has every event: nothing will follow (an EventSource stops reconnecting)"),
        (status = 400, description = "`invalid_last_event_id` (not a whole number from 0 to 2^53 − 1), `invalid_query` (likewise for the after parameter, a ticket not of a ticket's form — with or without a bearer header — or an unknown parameter)", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "`unauthorized`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`not_found`", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "`too_many_streams`: the caller's or this replica's stream limit; see Retry-After", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "`unavailable`: shutting down, or the database is unavailable", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn match_stream(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<StreamQuery>,
    headers: HeaderMap,
) -> Response {
    // A refused resume point spends the ticket too (`void_unspent_tickets`).
    let after = match ticket_form(&query).and_then(|()| resume_point(&headers, &query)) {
        Ok(after) => after,
        Err(error) => return error.into_response(),
    };
    let taken = takes_ticket(&headers, &query);
    let token = match stream_caller(&state, &headers, &query).await {
        Ok(token) => token,
        Err(error) => return mark_taken(error.into_response(), taken),
    };
    let caller = token.player;
    let response = match state.live.match_feed(id, caller, after).await {
        Ok(Some(feed)) => sse(&state, feed, token, match_sse),
        Ok(None) => StatusCode::NO_CONTENT.into_response(),
        Err(error) => live_error(error),
    };
    mark_taken(response, taken)
}

/// Whether [`stream_caller`] redeems the query's ticket (it is there, and no bearer header).
fn takes_ticket(headers: &HeaderMap, query: &StreamQuery) -> bool {
    query.ticket.is_some() && !headers.contains_key(header::AUTHORIZATION)
}

/// Marks `response` as the answer to a request whose ticket the handler took.
fn mark_taken(mut response: Response, taken: bool) -> Response {
    if taken {
        response.extensions_mut().insert(TicketTaken);
    }
    response
}

/// The caller's own feed as server-sent events: challenges, opponents joining, queue
/// pairings, rematch offers. `id:` = the notice's number, `event:` = its kind, `data:` = a
/// `Notice`. Resumes after `Last-Event-ID` (or `?after`); never ends
/// by itself.
#[utoipa::path(
    get, path = "/v1/stream", tag = "live",
    params(
        ("Last-Event-ID" = Option<i64>, Header, description = "Resume after this notice number"),
        StreamQuery,
    ),
    security(("bearer" = []), ()),
    responses(
        (status = 200, description = "Server-sent events (see docs/live.md): each notice's `id:` is its `seq`, `event:` its `kind`, and `data:` one JSON object of the schema given here, which types one notice rather than the whole body. A comment line (`:`) keeps an idle stream open.", content_type = "text/event-stream", body = Notice),
        (status = 400, description = "`invalid_last_event_id` (not a whole number from 0 to 2^53 − 1), `invalid_query` (likewise for the after parameter, a ticket not of a ticket's form — with or without a bearer header — or an unknown parameter)", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "`unauthorized`", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "`too_many_streams`: the caller's or this replica's stream limit; see Retry-After", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "`unavailable`: shutting down, or the database is unavailable", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn player_stream(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<StreamQuery>,
    headers: HeaderMap,
) -> Response {
    // A refused resume point spends the ticket too (`void_unspent_tickets`).
    let after = match ticket_form(&query).and_then(|()| resume_point(&headers, &query)) {
        Ok(after) => after,
        Err(error) => return error.into_response(),
    };
    let taken = takes_ticket(&headers, &query);
    let token = match stream_caller(&state, &headers, &query).await {
        Ok(token) => token,
        Err(error) => return mark_taken(error.into_response(), taken),
    };
    let caller = token.player;
    let response = match state.live.player_feed(caller, after.unwrap_or(0)).await {
        Ok(feed) => sse(&state, feed, token, notice_sse),
        Err(error) => live_error(error),
    };
    mark_taken(response, taken)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notice_fields_are_flattened_without_overriding_the_envelope() {
        let notice = StoredNotice {
            seq: 2,
            at: chrono::Utc::now(),
            kind: "challenge".into(),
            payload: serde_json::json!({ "match_id": "m", "seq": 99 }),
        };
        let json = notice_json(&notice);
        assert_eq!(json["seq"], 2);
        assert_eq!(json["kind"], "challenge");
        assert_eq!(json["match_id"], "m");
    }
}
