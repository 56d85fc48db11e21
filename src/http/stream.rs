//! Server-sent event streams: a match's events (`/v1/matches/{id}/stream`) and the
//! caller's own notices (`/v1/stream`). Both resume after `Last-Event-ID`. `live` yields
//! typed items; the wire format (ids, event names, JSON data, keep-alive comments) is here.

use std::convert::Infallible;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use serde::Deserialize;
use serde_json::Value;
use utoipa::IntoParams;
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use super::AppState;
use super::error::{ApiError, Problem};
use super::extract::{ApiPath, ApiQuery, Caller};
use crate::app::EventResource;
use crate::live::LiveError;
use crate::store::notices::Notice;

/// Seconds a refused client is asked to wait before trying again.
const RETRY_AFTER_SECONDS: &str = "5";

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(match_stream))
        .routes(routes!(player_stream))
}

#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct StreamQuery {
    /// Start after this sequence number (0 = from the beginning). A `Last-Event-ID`
    /// header, as sent by a reconnecting client, takes precedence.
    pub after: Option<i64>,
}

/// Where a stream starts: `Last-Event-ID`, else `?after`, else the beginning.
fn resume_point(headers: &HeaderMap, query: &StreamQuery) -> Result<i64, ApiError> {
    let from_header = match headers.get("last-event-id") {
        None => None,
        Some(value) => {
            let text = value.to_str().unwrap_or_default().trim();
            if text.is_empty() {
                None
            } else {
                Some(text.parse::<i64>().map_err(|_| {
                    ApiError::new(
                        StatusCode::BAD_REQUEST,
                        "invalid_last_event_id",
                        "Last-Event-ID must be the id of an event this stream sent",
                    )
                })?)
            }
        }
    };
    Ok(from_header.or(query.after).unwrap_or(0).max(0))
}

fn live_error(error: LiveError) -> Response {
    let detail = error.to_string();
    match error {
        LiveError::TooManyForPlayer(_) | LiveError::TooManyForReplica(_) => {
            let mut response =
                ApiError::new(StatusCode::TOO_MANY_REQUESTS, "too_many_streams", detail)
                    .into_response();
            response.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from_static(RETRY_AFTER_SECONDS),
            );
            response
        }
        LiveError::NotFound => ApiError::not_found(detail).into_response(),
        LiveError::Closed => {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", detail).into_response()
        }
        LiveError::Store(error) => {
            ApiError::from(crate::app::AppError::from(error)).into_response()
        }
    }
}

/// An event of a match: `id:` its sequence number, `event:` its kind, `data:` the same
/// JSON object as the events feed.
fn event_sse(resource: EventResource) -> Result<Event, Infallible> {
    Ok(Event::default()
        .id(resource.seq.to_string())
        .event(resource.event.kind())
        .data(serde_json::to_string(&resource).unwrap_or_else(|_| "{}".to_owned())))
}

/// A notice: `id:` its number, `event:` its kind, `data:` [`notice_json`].
fn notice_sse(notice: Notice) -> Result<Event, Infallible> {
    Ok(Event::default()
        .id(notice.seq.to_string())
        .event(&notice.kind)
        .data(notice_json(&notice).to_string()))
}

/// A notice as its stream carries it: `seq`, `at`, `kind` and the payload's fields.
fn notice_json(notice: &Notice) -> Value {
    let mut object = serde_json::Map::new();
    object.insert("seq".into(), notice.seq.into());
    object.insert("at".into(), Value::String(notice.at.to_rfc3339()));
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

/// An event stream with a keep-alive comment every period of silence.
fn sse(
    state: &AppState,
    events: impl Stream<Item = Result<Event, Infallible>> + Send + 'static,
) -> Response {
    let keep_alive = KeepAlive::new().interval(state.live.settings().keep_alive);
    let mut response = Sse::new(events).keep_alive(keep_alive).into_response();
    // Reverse proxies that buffer responses (nginx) would hold events back.
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// A match's events as server-sent events, redacted for the caller (participant or
/// spectator): first those after `Last-Event-ID` (or `?after`), then live ones. Each has
/// `id:` = its sequence number, `event:` = its kind, and `data:` = the same JSON object as
/// `GET /v1/matches/{id}/events`. A comment line is sent every 15 s of silence. The
/// stream ends after the event that ends the match, when the whole record is public.
#[utoipa::path(
    get, path = "/v1/matches/{id}/stream", tag = "live",
    params(
        ("id" = Uuid, Path),
        ("Last-Event-ID" = Option<i64>, Header, description = "Resume after this sequence number"),
        StreamQuery,
    ),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "An event stream; see docs/live.md", content_type = "text/event-stream", body = String),
        (status = 204, description = "The match is over and the caller has every event: nothing will follow (an EventSource stops reconnecting)"),
        (status = 400, description = "`invalid_last_event_id`, `invalid_query`", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "`unauthorized`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`not_found`", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "`too_many_streams`: the caller's or this replica's stream limit; see Retry-After", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "`unavailable`: shutting down, or the database is unavailable", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn match_stream(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<StreamQuery>,
    headers: HeaderMap,
) -> Response {
    let after = match resume_point(&headers, &query) {
        Ok(after) => after,
        Err(error) => return error.into_response(),
    };
    match state.live.match_feed(id, caller, after).await {
        Ok(Some(feed)) => sse(&state, feed.into_stream().map(event_sse)),
        Ok(None) => StatusCode::NO_CONTENT.into_response(),
        Err(error) => live_error(error),
    }
}

/// The caller's own feed as server-sent events: challenges, opponents joining, queue
/// pairings, rematch offers. `id:` = the notice's number, `event:` = its kind, `data:` =
/// `{seq, at, kind, …fields}`. Resumes after `Last-Event-ID` (or `?after`); never ends
/// by itself.
#[utoipa::path(
    get, path = "/v1/stream", tag = "live",
    params(
        ("Last-Event-ID" = Option<i64>, Header, description = "Resume after this notice number"),
        StreamQuery,
    ),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "An event stream; see docs/live.md", content_type = "text/event-stream", body = String),
        (status = 400, description = "`invalid_last_event_id`, `invalid_query`", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "`unauthorized`", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "`too_many_streams`: the caller's or this replica's stream limit; see Retry-After", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "`unavailable`: shutting down, or the database is unavailable", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn player_stream(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiQuery(query): ApiQuery<StreamQuery>,
    headers: HeaderMap,
) -> Response {
    let after = match resume_point(&headers, &query) {
        Ok(after) => after,
        Err(error) => return error.into_response(),
    };
    match state.live.player_feed(caller, after).await {
        Ok(feed) => sse(&state, feed.into_stream().map(notice_sse)),
        Err(error) => live_error(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notice_fields_are_flattened_without_overriding_the_envelope() {
        let notice = Notice {
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
