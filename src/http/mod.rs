//! The HTTP face of the service: per-resource routers, problem+json errors, middleware.
//! Only this module knows status codes.

mod accounts;
mod bots;
mod bounds;
mod budget;
mod conditional;
mod contract;
mod deployment;
pub mod error;
mod export;
pub mod extract;
mod ladder;
pub mod limits;
mod matches;
mod players;
mod queue;
mod rate;
mod rulesets;
pub mod server;
mod stream;
mod system;
mod web;

use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request};
use axum::http::{HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::Response;
use metrics_exporter_prometheus::PrometheusHandle;
use tower_http::compression::predicate::{NotForContentType, Predicate, SizeAbove};
use tower_http::compression::{CompressionLayer, CompressionLevel};
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::set_header::SetResponseHeaderLayer;
use tower_http::trace::TraceLayer;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;

use crate::app::App;
use crate::live::Hub;
use error::{ApiError, ErrorCode};

/// Largest accepted request body.
pub const BODY_LIMIT_BYTES: usize = 16 * 1024;

/// Answers at least this large are compressed (gzip or brotli, as the client accepts):
/// below it the saving does not pay for the work. Event streams never are (each event
/// must reach the client the moment it is written).
pub const COMPRESS_FROM_BYTES: u64 = 1024;

/// Who may read `/metrics` on the API's own address.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum MetricsAccess {
    /// Anyone (for a private network).
    #[default]
    Open,
    /// Only requests with `Authorization: Bearer <token>`.
    Token(String),
    /// Nobody: metrics are served on their own address (see [`metrics_app`]).
    Elsewhere,
}

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    pub app: App,
    pub metrics: Option<PrometheusHandle>,
    /// This replica's live-update hub (SSE streams).
    pub live: Hub,
    /// Who may read `/metrics` on the API address.
    pub metrics_access: MetricsAccess,
    /// This replica's rate limiters; `None` when limits are off.
    pub limits: Option<std::sync::Arc<limits::RateLimits>>,
    /// The last readiness probe, shared by every `/readyz` for a moment.
    pub ready: std::sync::Arc<system::ReadyProbe>,
}

/// Transport settings of the HTTP layer.
#[derive(Clone, Debug, Default)]
pub struct HttpSettings {
    /// Origins allowed by CORS; empty allows none, `*` allows any.
    pub cors_origins: Vec<String>,
    pub request_timeout: Option<Duration>,
    /// Who may read `/metrics` on the API address.
    pub metrics_access: MetricsAccess,
    /// Rate limits; `None` turns them off (benchmarks, tests that are not about them).
    pub rate_limits: Option<limits::RateLimitSettings>,
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Statki",
        description = "An authoritative HTTP/JSON Battleship service. Every refusal is an RFC 9457 problem (application/problem+json) with a stable `code`. Any request may be refused `429 rate_limited` (with `Retry-After` and `RateLimit` headers) when its client address or player is over a rate limit; see docs/security.md.",
        license(name = "MIT OR Apache-2.0", identifier = "MIT OR Apache-2.0")
    ),
    servers((url = "/", description = "The server this document is served from")),
    components(schemas(
        error::Problem,
        stream::Notice,
        stream::MatchStreamEvent,
        crate::app::EventResource,
        crate::app::MatchState
    )),
    modifiers(&BearerAuth),
    tags(
        (name = "players", description = "Registration and profiles"),
        (name = "accounts", description = "Log-in, the caller's own profile, password, tokens"),
        (name = "rulesets", description = "The rule-set presets"),
        (name = "matches", description = "Creating, joining and playing matches"),
        (name = "matchmaking", description = "The ranked queue and rematches"),
        (name = "bots", description = "Bot opponents to challenge"),
        (name = "ladder", description = "Ranked ladders, one per rule set"),
        (name = "live", description = "Server-sent event streams: match events and the player's own feed"),
        (name = "system", description = "Health, readiness, metrics")
    )
)]
struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .build(),
            ),
        );
    }
}

fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(players::router())
        .merge(accounts::router())
        .merge(bots::router())
        .merge(rulesets::router())
        .merge(matches::router())
        .merge(export::router())
        .merge(ladder::router())
        .merge(queue::router())
        .merge(stream::router())
        .merge(system::router())
}

/// The OpenAPI document, generated from the handlers themselves.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let mut doc = routes().split_for_parts().1;
    contract::complete(&mut doc);
    deployment::describe(&mut doc);
    // Last: every value the other completions added is bounded too.
    bounds::bound(&mut doc);
    doc
}

/// The whole application, as `main` serves it and tests build it.
pub fn app(state: AppState, settings: &HttpSettings) -> Router {
    let (router, _) = routes().split_for_parts();
    let state = AppState {
        limits: settings.rate_limits.clone().map(limits::RateLimits::new),
        metrics_access: settings.metrics_access.clone(),
        ..state
    };
    let request_id = HeaderName::from_static("x-request-id");
    let timeout = settings.request_timeout.unwrap_or(Duration::from_secs(15));
    router
        .merge(web::router())
        .fallback(fallback)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(BODY_LIMIT_BYTES))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            limits::enforce,
        ))
        .layer(middleware::from_fn(record_metrics))
        .layer(middleware::from_fn(move |request: Request, next: Next| {
            answer_within(timeout, request, next)
        }))
        // Outside the rate limits and the timeout: every answer spends a stream ticket.
        .layer(middleware::from_fn_with_state(
            state.clone(),
            stream::void_unspent_tickets,
        ))
        .layer(middleware::from_fn(limit_head))
        .layer(compression())
        .layer(cors(&settings.cors_origins))
        // Every answer: never sniffed as another type; never cached unless a route says
        // otherwise (answers carry tokens and per-player views).
        .layer(SetResponseHeaderLayer::overriding(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CACHE_CONTROL,
            HeaderValue::from_static("no-store"),
        ))
        .layer(PropagateRequestIdLayer::new(request_id.clone()))
        // Spans name the path, never the query: a stream ticket travels in it.
        .layer(
            TraceLayer::new_for_http().make_span_with(|request: &Request| {
                tracing::debug_span!(
                    "request",
                    method = %request.method(),
                    path = %request.uri().path(),
                    version = ?request.version(),
                )
            }),
        )
        .layer(SetRequestIdLayer::new(request_id, MakeRequestUuid))
        .with_state(state)
}

/// `Cache-Control` of the answers that are the same for everyone and change only with a
/// deployment: rulesets, bots, the OpenAPI document.
pub(crate) const CACHE_PUBLIC: (header::HeaderName, &str) =
    (header::CACHE_CONTROL, "public, max-age=300");

fn compression() -> CompressionLayer<impl Predicate> {
    CompressionLayer::new()
        .no_deflate()
        .no_zstd()
        // The default levels cost more CPU than small JSON answers repay.
        .quality(CompressionLevel::Fastest)
        .compress_when(
            SizeAbove::new(COMPRESS_FROM_BYTES)
                .and(NotForContentType::SSE)
                .and(NotForContentType::GRPC)
                .and(NotForContentType::IMAGES),
        )
}

fn cors(origins: &[String]) -> CorsLayer {
    let allow = if origins.iter().any(|origin| origin == "*") {
        AllowOrigin::any()
    } else {
        let list: Vec<HeaderValue> = origins
            .iter()
            .filter_map(|origin| HeaderValue::from_str(origin).ok())
            .collect();
        AllowOrigin::list(list)
    };
    CorsLayer::new()
        .allow_origin(allow)
        .allow_methods([Method::GET, Method::POST, Method::PUT, Method::DELETE])
        .allow_headers([
            axum::http::header::AUTHORIZATION,
            axum::http::header::CONTENT_TYPE,
            axum::http::header::IF_NONE_MATCH,
            HeaderName::from_static("idempotency-key"),
            HeaderName::from_static("last-event-id"),
        ])
        // Exactly the headers the service sends beyond the CORS-safelisted ones.
        .expose_headers([
            axum::http::header::ETAG,
            axum::http::header::LOCATION,
            axum::http::header::RETRY_AFTER,
            axum::http::header::WWW_AUTHENTICATE,
            HeaderName::from_static("x-request-id"),
            HeaderName::from_static("ratelimit"),
            HeaderName::from_static("ratelimit-policy"),
        ])
        .max_age(Duration::from_secs(600))
}

/// Largest request head (request line and headers) the service reads; a larger one is
/// answered `431 headers_too_large`. The connection's buffer holds twice as much
/// (`server`), so such a head still reaches this check and gets a coded answer; only a
/// head beyond the buffer, or of more than 100 header fields, gets hyper's bare 431.
pub const MAX_HEAD_BYTES: usize = 32 * 1024;

/// The answer must start within `limit`, else `408 request_timeout` (the body of an event
/// stream is not timed: only its start).
async fn answer_within(limit: Duration, request: Request, next: Next) -> Response {
    use axum::response::IntoResponse;
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            ErrorCode::RequestTimeout,
            format!(
                "the answer took longer than {} s; the request may or may not have taken \
                 effect: retry it with the same Idempotency-Key",
                limit.as_secs_f64()
            ),
        )
        .into_response(),
    }
}

/// Refuses a request whose head is over [`MAX_HEAD_BYTES`].
async fn limit_head(request: Request, next: Next) -> Response {
    use axum::response::IntoResponse;
    // Each header line is `name: value\r\n`; the request line is about the target's length.
    let head: usize = request.uri().to_string().len()
        + request
            .headers()
            .iter()
            .map(|(name, value)| name.as_str().len() + value.len() + 4)
            .sum::<usize>();
    if head > MAX_HEAD_BYTES {
        return ApiError::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            ErrorCode::HeadersTooLarge,
            format!("the request head is {head} bytes; at most {MAX_HEAD_BYTES} are read"),
        )
        .into_response();
    }
    next.run(request).await
}

async fn fallback() -> ApiError {
    ApiError::not_found("no such route; see /openapi.yaml")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        ErrorCode::MethodNotAllowed,
        "this route does not take that method",
    )
}

async fn record_metrics(request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |path| path.as_str().to_owned());
    let method = request.method().to_string();
    let started = Instant::now();
    let response = next.run(request).await;
    let labels = [
        ("method", method),
        ("route", route),
        ("status", response.status().as_u16().to_string()),
    ];
    metrics::counter!("statki_http_requests_total", &labels).increment(1);
    metrics::histogram!("statki_http_request_duration_seconds", &labels)
        .record(started.elapsed().as_secs_f64());
    response
}

/// Installs the process-wide Prometheus recorder once and returns its handle.
pub fn prometheus() -> Option<PrometheusHandle> {
    static HANDLE: std::sync::OnceLock<Option<PrometheusHandle>> = std::sync::OnceLock::new();
    HANDLE
        .get_or_init(|| {
            metrics_exporter_prometheus::PrometheusBuilder::new()
                .set_buckets(&[
                    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                ])
                .ok()?
                .install_recorder()
                .ok()
        })
        .clone()
}

/// Shared state for the application and this replica's live hub.
pub fn state(app: App, live: Hub) -> AppState {
    // The application's command lanes hear of the other replicas' commits through the hub,
    // and the hub of this replica's commits from the application.
    live.watch_positions(app.position_watcher());
    app.tell_commits_to(live.herald());
    AppState {
        app,
        metrics: prometheus(),
        live,
        limits: None,
        metrics_access: MetricsAccess::Open,
        ready: Default::default(),
    }
}

/// `/metrics` alone, for serving on an address of its own (e.g. reachable only by the
/// monitoring network).
pub fn metrics_app(state: AppState) -> Router {
    Router::new()
        .route(
            "/metrics",
            axum::routing::get(
                |axum::extract::State(state): axum::extract::State<AppState>| async move {
                    system::render_metrics(&state)
                },
            ),
        )
        .with_state(state)
}

/// A `201 Created` answer with `Location: {collection}/{id}` (the `id` of the created
/// resource, also for a replayed answer).
pub(crate) fn created<T: serde::Serialize>(
    collection: &str,
    answer: T,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let body = serde_json::to_value(&answer).unwrap_or(serde_json::Value::Null);
    let location = body
        .get("id")
        .and_then(serde_json::Value::as_str)
        .and_then(|id| axum::http::HeaderValue::from_str(&format!("{collection}/{id}")).ok());
    let mut response = (axum::http::StatusCode::CREATED, axum::Json(body)).into_response();
    if let Some(location) = location {
        response
            .headers_mut()
            .insert(axum::http::header::LOCATION, location);
    }
    response
}
