//! Exports: `GET /v1/matches/{id}/export` (an ended match as one JSON document, or one
//! line per move as text) and `GET /v1/players/{id}/matches/export` (a player's finished
//! matches as newline-delimited JSON, newest first).

use std::collections::VecDeque;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use futures::StreamExt;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use super::AppState;
use super::conditional;
use super::error::{ApiError, ErrorCode, Problem};
use super::extract::{ApiPath, ApiQuery, Caller};
use crate::app::App;
use crate::app::export::MatchExport;
use crate::store::listing::Cursor;

/// Most matches one player export streams (and its default).
pub const EXPORT_MAX: i64 = 1000;

/// The media type of a player's export: one JSON document per line.
const NDJSON: &str = "application/x-ndjson";

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(export_match))
        .routes(routes!(export_player_matches))
}

/// Whether the caller asked for the text form: `Accept` names `text/plain` and not JSON.
fn wants_text(headers: &HeaderMap) -> bool {
    let ranges: Vec<String> = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|range| {
            range
                .split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        })
        .collect();
    ranges.iter().any(|range| range == "text/plain")
        && !ranges.iter().any(|range| range == "application/json")
}

/// An ended match as one document: its rules, players, both fleets opened with salts and
/// commitments, and every event. With `Accept: text/plain`, the same match as one line per
/// move (the README's "One line per move").
#[utoipa::path(
    get, path = "/v1/matches/{id}/export", tag = "matches",
    params(("id" = Uuid, Path)),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The whole match, to any authenticated caller once it is over: JSON, or with `Accept: text/plain` one line per move",
            content((MatchExport = "application/json"), (String = "text/plain")),
            headers(("ETag" = String, description = "A digest of the answer; send it as `If-None-Match` to be answered 304"))),
        (status = 304, description = "Not modified: `If-None-Match` names the current tag",
            headers(("ETag" = String, description = "The answer's tag"))),
        (status = 404, description = "`not_found`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`match_not_over`: the match is still waiting, being placed or played", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn export_match(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiPath(id): ApiPath<Uuid>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    if let Some(refused) = over_budget(&state, caller, id) {
        return Ok(refused);
    }
    let export = state.app.export(id).await?;
    let (content_type, body) = if wants_text(&headers) {
        (
            "text/plain; charset=utf-8",
            export.moves_text().into_bytes(),
        )
    } else {
        ("application/json", conditional::json_bytes(&export)?)
    };
    if let Some(limits) = state.limits.as_deref() {
        limits.export_spent(caller, id, body.len());
    }
    Ok(conditional::private(
        &headers,
        content_type,
        body,
        "authorization, accept",
    ))
}

/// `429` when the caller's or the target's export byte budget is in debt (nothing is read
/// then); `None` when the export may go ahead.
fn over_budget(state: &AppState, caller: Uuid, target: Uuid) -> Option<Response> {
    let limits = state.limits.as_deref()?;
    let (wait, on_target) = limits.export_wait(caller, target)?;
    Some(super::limits::export_refused(limits, on_target, wait))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ExportQuery {
    /// Only matches created at or after this time (RFC 3339).
    pub since: Option<DateTime<Utc>>,
    /// Only matches created before this time (RFC 3339); at or before `since`, nothing
    /// qualifies. To continue an export that stopped at `max`, pass the `created_at` of
    /// the last match received.
    pub until: Option<DateTime<Utc>>,
    /// At most this many matches, 1 to 1000 (the default).
    #[param(minimum = 1, maximum = 1000)]
    pub max: Option<i64>,
}

/// A player's finished matches (not the cancelled ones), newest first by creation, each as
/// `GET /v1/matches/{id}/export` gives it, one JSON document per line.
#[utoipa::path(
    get, path = "/v1/players/{id}/matches/export", tag = "players",
    params(("id" = Uuid, Path, description = "Player id"), ExportQuery),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The matches as newline-delimited JSON (`application/x-ndjson`): each line one `MatchExport`, streamed as it is read; a stream cut short ends without its final newline",
            content((MatchExport = "application/x-ndjson"))),
        (status = 400, description = "`invalid_query`: max out of bounds, or a time that is not RFC 3339", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`not_found`: no such player", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn export_player_matches(
    State(state): State<AppState>,
    Caller(caller): Caller,
    ApiPath(player): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<ExportQuery>,
) -> Result<Response, ApiError> {
    let max = query.max.unwrap_or(EXPORT_MAX);
    if !(1..=EXPORT_MAX).contains(&max) {
        return Err(invalid_query(format!(
            "max must be between 1 and {EXPORT_MAX}"
        )));
    }
    if let Some(refused) = over_budget(&state, caller, player) {
        return Ok(refused);
    }
    // Strictly before `until`: no id sorts below the nil id at the same instant.
    let start = Cursor {
        created_at: query.until.unwrap_or(DateTime::<Utc>::MAX_UTC),
        id: Uuid::nil(),
    };
    // The first page is read before answering, so an unknown player or an unreachable
    // database is a coded refusal rather than a broken stream.
    let first = state
        .app
        .export_page(player, start, query.since, max)
        .await?;
    let export = PlayerExport {
        app: state.app.clone(),
        limits: state.limits.clone(),
        caller,
        player,
        since: query.since,
        remaining: max,
        ready: first.matches.into(),
        next: first.next,
    };
    // Fused: the compression layer polls once more after the end.
    let lines = futures::stream::unfold(export, PlayerExport::next_line).fuse();
    let mut response = Body::from_stream(lines).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(NDJSON));
    Ok(response)
}

fn invalid_query(detail: String) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, ErrorCode::InvalidQuery, detail)
}

/// Where a player's export stands: the matches read and not yet sent, and where the next
/// page starts.
struct PlayerExport {
    app: App,
    /// The byte budgets each line is charged to, and waited for before each next page.
    limits: Option<std::sync::Arc<super::limits::RateLimits>>,
    caller: Uuid,
    player: Uuid,
    since: Option<DateTime<Utc>>,
    remaining: i64,
    ready: VecDeque<MatchExport>,
    next: Option<Cursor>,
}

impl PlayerExport {
    /// The next line, reading the next page when the last one is sent. A failure midway
    /// ends the stream with an error, so the client sees a cut answer, not a short one.
    async fn next_line(mut self) -> Option<(Result<Bytes, std::io::Error>, Self)> {
        loop {
            if self.remaining <= 0 {
                return None;
            }
            // Paced: no line is sent, and no page read, while a budget is in debt.
            while let Some((wait, _)) = self
                .limits
                .as_deref()
                .and_then(|limits| limits.export_wait(self.caller, self.player))
            {
                tokio::time::sleep(wait).await;
            }
            if let Some(export) = self.ready.pop_front() {
                self.remaining -= 1;
                let line = serde_json::to_vec(&export)
                    .map(|mut line| {
                        line.push(b'\n');
                        Bytes::from(line)
                    })
                    .map_err(std::io::Error::other);
                if let (Some(limits), Ok(line)) = (&self.limits, &line) {
                    limits.export_spent(self.caller, self.player, line.len());
                }
                return Some((line, self));
            }
            let cursor = self.next.take()?;
            match self
                .app
                .export_page(self.player, cursor, self.since, self.remaining)
                .await
            {
                Ok(page) => {
                    self.ready = page.matches.into();
                    self.next = page.next;
                }
                Err(error) => {
                    tracing::warn!(%error, player = %self.player, "a player export stopped midway");
                    self.remaining = 0;
                    return Some((Err(std::io::Error::other(error.to_string())), self));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accepting(value: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_static(value));
        headers
    }

    #[test]
    fn text_only_when_asked_for_and_json_not_accepted() {
        assert!(wants_text(&accepting("text/plain")));
        assert!(wants_text(&accepting("text/plain; q=0.9, */*; q=0.1")));
        assert!(!wants_text(&accepting("application/json, text/plain")));
        assert!(!wants_text(&accepting("*/*")));
        assert!(!wants_text(&HeaderMap::new()));
    }
}
