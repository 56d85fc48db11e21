//! Health, readiness, Prometheus metrics and the OpenAPI document.

use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::error::{ApiError, ErrorCode};
use super::{AppState, MetricsAccess};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(healthz))
        .routes(routes!(readyz))
        .routes(routes!(metrics))
        .routes(routes!(openapi_yaml))
}

/// Liveness: the process answers.
#[utoipa::path(get, path = "/healthz", tag = "system", responses((status = 200, description = "ok", content_type = "text/plain", body = String)))]
async fn healthz() -> &'static str {
    "ok"
}

/// How long one readiness probe answers every `/readyz`.
pub const READY_PROBE_TTL: Duration = Duration::from_secs(1);

/// The last readiness probe of this replica: at most one database round trip per
/// [`READY_PROBE_TTL`] however often `/readyz` is asked (callers meanwhile share it).
#[derive(Default)]
pub struct ReadyProbe {
    last: tokio::sync::Mutex<Option<(Instant, bool)>>,
}

impl ReadyProbe {
    async fn ready(&self, state: &AppState) -> bool {
        // Held across the probe: concurrent callers wait for it rather than probe too.
        let mut last = self.last.lock().await;
        if let Some((at, ready)) = *last
            && at.elapsed() < READY_PROBE_TTL
        {
            return ready;
        }
        let ready = match state.app.ready().await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(error = %e, "not ready: the database does not answer");
                false
            }
        };
        metrics::counter!("statki_ready_probes_total").increment(1);
        *last = Some((Instant::now(), ready));
        ready
    }
}

/// Readiness: the database answers (probed at most once a second, shared by every caller).
#[utoipa::path(get, path = "/readyz", tag = "system", responses(
    (status = 200, description = "ready", content_type = "text/plain", body = String),
    (status = 503, description = "`unavailable`: the database does not answer", body = super::error::Problem, content_type = "application/problem+json"),
))]
async fn readyz(State(state): State<AppState>) -> Result<&'static str, ApiError> {
    if !state.ready.ready(&state).await {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::Unavailable,
            "the database does not answer",
        ));
    }
    Ok("ready")
}

/// Prometheus metrics: requests, latencies, matches by phase (refreshed in the background,
/// not per scrape), shots, events, rate-limit refusals. When the operator sets a metrics
/// token, only `Authorization: Bearer <that token>` is answered. Not public by default:
/// unless the operator opens it, sets a token or serves metrics on an address of their
/// own, this route answers 404.
#[utoipa::path(get, path = "/metrics", tag = "system", security((), ("bearer" = [])), responses(
    (status = 200, description = "Prometheus text format", content_type = "text/plain"),
    (status = 401, description = "`unauthorized`: a metrics token is configured and was not sent", body = super::error::Problem, content_type = "application/problem+json"),
    (status = 404, description = "`not_found`: metrics are not public here (the default; or they are served on their own address)", body = super::error::Problem, content_type = "application/problem+json"),
))]
async fn metrics(State(state): State<AppState>, headers: HeaderMap) -> Response {
    match &state.metrics_access {
        MetricsAccess::Open => {}
        MetricsAccess::Elsewhere => {
            return ApiError::not_found("no such route; see /openapi.yaml").into_response();
        }
        MetricsAccess::Token(expected) => {
            let sent = headers
                .get(header::AUTHORIZATION)
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.strip_prefix("Bearer "))
                .unwrap_or_default();
            let matches: bool = sent.as_bytes().ct_eq(expected.as_bytes()).into();
            if !matches {
                return ApiError::unauthorized("/metrics needs the metrics bearer token")
                    .into_response();
            }
        }
    }
    render_metrics(&state).into_response()
}

/// The Prometheus text of this replica.
pub fn render_metrics(state: &AppState) -> impl IntoResponse + use<> {
    let body = state
        .metrics
        .as_ref()
        .map(|handle| handle.render())
        .unwrap_or_default();
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body)
}

/// This API's OpenAPI 3.1 document.
#[utoipa::path(get, path = "/openapi.yaml", tag = "system", responses(
    (status = 200, description = "OpenAPI document", content_type = "application/yaml", headers(("ETag" = String, description = "A digest of the document; send it as `If-None-Match`"))),
    (status = 304, description = "Not modified: `If-None-Match` names the current document", headers(("ETag" = String))),
))]
async fn openapi_yaml(headers: axum::http::HeaderMap) -> Response {
    let yaml = super::openapi().to_yaml().unwrap_or_default();
    super::conditional::public(&headers, "application/yaml", yaml.into_bytes())
}
