//! The one error type of the API: every refusal is an RFC 9457 problem with a stable `code`.
//!
//! Policy: a refusal caused by the request is a 4xx with a code clients can match on, and
//! changes nothing; a fault on our side is a 500 (or 503 when the database is unreachable)
//! whose detail is logged, never sent.

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::app::AppError;
use crate::engine::Refusal;

/// An RFC 9457 problem document.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Problem {
    /// A URI naming the problem kind: `urn:statki:problem:<code>`.
    #[serde(rename = "type")]
    pub kind: String,
    pub title: String,
    pub status: u16,
    pub detail: String,
    /// Stable machine-readable code, e.g. `not_your_turn`.
    pub code: String,
}

#[derive(Clone, Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub detail: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, detail: impl Into<String>) -> Self {
        Self {
            status,
            code,
            detail: detail.into(),
        }
    }

    pub fn unauthorized(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", detail)
    }

    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", detail)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let problem = Problem {
            kind: format!("urn:statki:problem:{}", self.code),
            title: self.status.canonical_reason().unwrap_or("Error").to_owned(),
            status: self.status.as_u16(),
            detail: self.detail,
            code: self.code.to_owned(),
        };
        let mut response = (self.status, Json(problem)).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if self.status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

fn refusal_status(refusal: &Refusal) -> StatusCode {
    match refusal {
        Refusal::InvalidCell(_)
        | Refusal::OffBoard
        | Refusal::Overlap
        | Refusal::ShipsTouching
        | Refusal::UnknownShip { .. }
        | Refusal::WrongFleetSize { .. }
        | Refusal::InvalidOption(_) => StatusCode::UNPROCESSABLE_ENTITY,
        Refusal::NotAPlayer | Refusal::NotInvited => StatusCode::FORBIDDEN,
        Refusal::ShipNotPlaced(_)
        | Refusal::FleetLocked
        | Refusal::WrongPhase { .. }
        | Refusal::NotYourTurn
        | Refusal::AlreadyShot
        | Refusal::AlreadyKnown
        | Refusal::OwnMatch
        | Refusal::NotDue => StatusCode::CONFLICT,
    }
}

/// The status each kind of application error is answered with.
fn status_of(error: &AppError) -> StatusCode {
    match error {
        AppError::Rule(refusal) => refusal_status(refusal),
        AppError::NotFound(_) | AppError::NotQueued => StatusCode::NOT_FOUND,
        AppError::NameTaken(_)
        | AppError::TooManyOpenMatches(_)
        | AppError::IdempotencyInProgress
        | AppError::AlreadyQueued
        | AppError::InMatch
        | AppError::RematchUnavailable(_) => StatusCode::CONFLICT,
        AppError::InvalidName(_)
        | AppError::UnknownRuleset(_)
        | AppError::RankedNeedsStandardRules(_)
        | AppError::IdempotencyMismatch => StatusCode::UNPROCESSABLE_ENTITY,
        AppError::Token(_) | AppError::UnknownPlayer => StatusCode::UNAUTHORIZED,
        AppError::ShuttingDown
        | AppError::Unavailable(_)
        | AppError::Database(_)
        | AppError::Corrupt(_) => {
            if error.code() == "unavailable" {
                StatusCode::SERVICE_UNAVAILABLE
            } else {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        }
    }
}

/// A rejection's text without what only the parsing library knows: its own wording of
/// the failure kind and the line and column of a one-line body.
fn public_detail(text: &str) -> String {
    let text = [
        "Failed to deserialize the JSON body into the target type: ",
        "Failed to deserialize query string: ",
    ]
    .iter()
    .find_map(|prefix| text.strip_prefix(prefix))
    .unwrap_or(text);
    let text = match text.rfind(" at line ") {
        Some(at) if text[at..].contains(" column ") => &text[..at],
        _ => text,
    };
    text.to_owned()
}

impl From<AppError> for ApiError {
    fn from(error: AppError) -> Self {
        let status = status_of(&error);
        let code = error.code();
        if status == StatusCode::SERVICE_UNAVAILABLE {
            tracing::error!(%error, "database unavailable");
            return ApiError::new(
                status,
                code,
                "the database is unavailable; nothing was changed, retry shortly",
            );
        }
        if status.is_server_error() {
            tracing::error!(%error, "internal error");
            return ApiError::new(
                status,
                code,
                "an internal error occurred; nothing was changed",
            );
        }
        ApiError::new(status, code, error.to_string())
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        let detail = match &rejection {
            JsonRejection::JsonDataError(_) => public_detail(&rejection.body_text()),
            JsonRejection::JsonSyntaxError(_) => "the body is not valid JSON".to_owned(),
            JsonRejection::BytesRejection(_) => "the body could not be read".to_owned(),
            _ => public_detail(&rejection.body_text()),
        };
        match rejection.status() {
            StatusCode::PAYLOAD_TOO_LARGE => ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                format!("the body is larger than {} bytes", super::BODY_LIMIT_BYTES),
            ),
            StatusCode::UNSUPPORTED_MEDIA_TYPE => ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "send a JSON body with Content-Type: application/json",
            ),
            StatusCode::UNPROCESSABLE_ENTITY => {
                ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_body", detail)
            }
            _ => ApiError::new(StatusCode::BAD_REQUEST, "invalid_json", detail),
        }
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        tracing::debug!(detail = %rejection.body_text(), "refused a path");
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_path",
            "a path parameter is malformed: ids are UUIDs, ship indexes small numbers",
        )
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_query",
            public_detail(&rejection.body_text()),
        )
    }
}
