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

use crate::accounts::AccountError;
use crate::engine::Refusal;
use crate::service::ServiceError;

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

impl From<ServiceError> for ApiError {
    fn from(error: ServiceError) -> Self {
        let detail = error.to_string();
        match error {
            ServiceError::Rule(refusal) => {
                ApiError::new(refusal_status(&refusal), refusal.code(), detail)
            }
            ServiceError::NotFound(_) => ApiError::not_found(detail),
            ServiceError::NameTaken(_) => ApiError::new(StatusCode::CONFLICT, "name_taken", detail),
            ServiceError::InvalidName(_) => {
                ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_name", detail)
            }
            ServiceError::UnknownRuleset(_) => {
                ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "unknown_ruleset", detail)
            }
            ServiceError::RankedNeedsStandardRules(_) => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "ranked_needs_standard_rules",
                detail,
            ),
            ServiceError::IdempotencyMismatch => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "idempotency_key_reused",
                detail,
            ),
            ServiceError::IdempotencyInProgress => {
                ApiError::new(StatusCode::CONFLICT, "idempotency_key_in_progress", detail)
            }
            ServiceError::Token(_) => ApiError::unauthorized(detail),
            ServiceError::UnknownPlayer => ApiError::unauthorized(detail),
            ServiceError::Database(sqlx::Error::PoolTimedOut | sqlx::Error::Io(_)) => {
                tracing::error!(%detail, "database unavailable");
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "unavailable",
                    "the database is unavailable; nothing was changed, retry shortly",
                )
            }
            ServiceError::Database(_) | ServiceError::Corrupt(_) => {
                tracing::error!(%detail, "internal error");
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    "an internal error occurred; nothing was changed",
                )
            }
        }
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        let detail = rejection.body_text();
        match rejection.status() {
            StatusCode::PAYLOAD_TOO_LARGE => {
                ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", detail)
            }
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
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_path",
            rejection.body_text(),
        )
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_query",
            rejection.body_text(),
        )
    }
}

impl From<AccountError> for ApiError {
    fn from(error: AccountError) -> Self {
        let detail = error.to_string();
        match error {
            AccountError::Service(error) => error.into(),
            AccountError::InvalidCredentials => {
                ApiError::new(StatusCode::UNAUTHORIZED, "invalid_credentials", detail)
            }
            AccountError::Revoked => ApiError::unauthorized(detail),
            AccountError::InvalidPassword(_) => {
                ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_password", detail)
            }
            AccountError::CurrentPasswordRequired => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "current_password_required",
                detail,
            ),
            AccountError::WrongPassword => {
                ApiError::new(StatusCode::FORBIDDEN, "wrong_password", detail)
            }
            AccountError::Hashing(_) => {
                tracing::error!(%detail, "internal error");
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    "an internal error occurred; nothing was changed",
                )
            }
        }
    }
}
