//! Health, readiness, Prometheus metrics and the OpenAPI document.

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::AppState;
use super::error::ApiError;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(healthz))
        .routes(routes!(readyz))
        .routes(routes!(metrics))
        .routes(routes!(openapi_yaml))
}

/// Liveness: the process answers.
#[utoipa::path(get, path = "/healthz", tag = "system", responses((status = 200, description = "ok")))]
async fn healthz() -> &'static str {
    "ok"
}

/// Readiness: the database answers.
#[utoipa::path(get, path = "/readyz", tag = "system", responses(
    (status = 200, description = "ready"),
    (status = 503, description = "`unavailable`: the database does not answer"),
))]
async fn readyz(State(state): State<AppState>) -> Result<&'static str, ApiError> {
    state.app.ready().await.map_err(|e| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            format!("database: {e}"),
        )
    })?;
    Ok("ready")
}

/// Prometheus metrics: requests, latencies, matches by phase, shots, events.
#[utoipa::path(get, path = "/metrics", tag = "system", responses((status = 200, description = "Prometheus text format", content_type = "text/plain")))]
async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    if let Ok(phases) = state.app.matches_by_phase().await {
        for (phase, count) in phases {
            metrics::gauge!("statki_matches", "phase" => phase).set(count as f64);
        }
    }
    let body = state
        .metrics
        .as_ref()
        .map(|handle| handle.render())
        .unwrap_or_default();
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body)
}

/// This API's OpenAPI 3.1 document.
#[utoipa::path(get, path = "/openapi.yaml", tag = "system", responses((status = 200, description = "OpenAPI document", content_type = "application/yaml")))]
async fn openapi_yaml() -> impl IntoResponse {
    let yaml = super::openapi().to_yaml().unwrap_or_default();
    ([(header::CONTENT_TYPE, "application/yaml")], yaml)
}
