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

/// Declares [`ErrorCode`]: every `code` the API can answer, in one list, so the OpenAPI
/// enum and the answers cannot drift apart (a test holds each code to its serde name).
macro_rules! error_codes {
    ($($(#[doc = $doc:literal])* $variant:ident = $code:literal,)*) => {
        /// Stable machine-readable code of a problem.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, ToSchema)]
        #[serde(rename_all = "snake_case")]
        pub enum ErrorCode {
            $($(#[doc = $doc])* $variant,)*
        }

        impl ErrorCode {
            /// Every code, in declaration order.
            pub const ALL: &[ErrorCode] = &[$(ErrorCode::$variant,)*];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $code,)*
                }
            }
        }
    };
}

error_codes! {
    InvalidCell = "invalid_cell",
    OffBoard = "off_board",
    Overlap = "overlap",
    ShipsTouching = "ships_touching",
    UnknownShip = "unknown_ship",
    ShipNotPlaced = "ship_not_placed",
    WrongFleetSize = "wrong_fleet_size",
    FleetLocked = "fleet_locked",
    WrongPhase = "wrong_phase",
    NotAPlayer = "not_a_player",
    NotYourTurn = "not_your_turn",
    AlreadyShot = "already_shot",
    AlreadyKnown = "already_known",
    OwnMatch = "own_match",
    NotInvited = "not_invited",
    NotDue = "not_due",
    InvalidOption = "invalid_option",
    NotFound = "not_found",
    NameTaken = "name_taken",
    InvalidName = "invalid_name",
    UnknownRuleset = "unknown_ruleset",
    RankedNeedsStandardRules = "ranked_needs_standard_rules",
    IdempotencyKeyReused = "idempotency_key_reused",
    IdempotencyKeyInProgress = "idempotency_key_in_progress",
    InvalidIdempotencyKey = "invalid_idempotency_key",
    Unauthorized = "unauthorized",
    Unavailable = "unavailable",
    Internal = "internal",
    PayloadTooLarge = "payload_too_large",
    UnsupportedMediaType = "unsupported_media_type",
    InvalidBody = "invalid_body",
    InvalidJson = "invalid_json",
    InvalidPath = "invalid_path",
    InvalidQuery = "invalid_query",
    InvalidCursor = "invalid_cursor",
    InvalidLastEventId = "invalid_last_event_id",
    MethodNotAllowed = "method_not_allowed",
    TooManyStreams = "too_many_streams",
    AlreadyQueued = "already_queued",
    NotQueued = "not_queued",
    InMatch = "in_match",
    RematchUnavailable = "rematch_unavailable",
    MatchNotOver = "match_not_over",
    InvalidCredentials = "invalid_credentials",
    InvalidPassword = "invalid_password",
    WrongPassword = "wrong_password",
    CurrentPasswordRequired = "current_password_required",
    RankedAgainstBot = "ranked_against_bot",
    RateLimited = "rate_limited",
    TooManyOpenMatches = "too_many_open_matches",
    RequestTimeout = "request_timeout",
    HeadersTooLarge = "headers_too_large",
    TooManyReactions = "too_many_reactions",
    TooManyPlacementMoves = "too_many_placement_moves",
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An RFC 9457 problem document.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Problem {
    /// A URI naming the problem kind: `urn:statki:problem:<code>`.
    #[serde(rename = "type")]
    #[schema(example = "urn:statki:problem:not_your_turn")]
    pub kind: String,
    pub title: String,
    #[schema(minimum = 400, maximum = 599)]
    pub status: u16,
    pub detail: String,
    pub code: ErrorCode,
}

#[derive(Clone, Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: ErrorCode,
    pub detail: String,
    /// `Retry-After` in seconds, when a retry later may succeed.
    pub retry_after: Option<u64>,
}

/// `Retry-After` of every `503 unavailable`: the database is restarting or failing over.
pub const UNAVAILABLE_RETRY_AFTER_SECONDS: u64 = 2;

/// The longest `Retry-After` sent: a longer wait (an operator's hourly rate) is asked for
/// a day at a time.
pub const RETRY_AFTER_MAX_SECONDS: u64 = 86_400;

/// The longest `detail` sent: a refusal that quotes the request (an unknown field, a bad
/// value) quotes at most this much of it.
pub const DETAIL_MAX_CHARS: usize = 1024;

/// `text` cut to at most `max` characters.
fn at_most(mut text: String, max: usize) -> String {
    if let Some((end, _)) = text.char_indices().nth(max) {
        text.truncate(end);
    }
    text
}

impl ApiError {
    pub fn new(status: StatusCode, code: ErrorCode, detail: impl Into<String>) -> Self {
        Self {
            status,
            code,
            detail: detail.into(),
            retry_after: None,
        }
    }

    /// The same error with `Retry-After: seconds`.
    pub fn retry_after(self, seconds: Option<u64>) -> Self {
        Self {
            retry_after: seconds,
            ..self
        }
    }

    pub fn unauthorized(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, ErrorCode::Unauthorized, detail)
    }

    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, ErrorCode::NotFound, detail)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let problem = Problem {
            kind: format!("urn:statki:problem:{}", self.code),
            title: self.status.canonical_reason().unwrap_or("Error").to_owned(),
            status: self.status.as_u16(),
            detail: at_most(self.detail, DETAIL_MAX_CHARS),
            code: self.code,
        };
        let mut response = (self.status, Json(problem)).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        // A database failover takes a few seconds (docs/operations.md), so every 503 says
        // when to come back even where the error carries no figure of its own.
        let retry_after = self
            .retry_after
            .or((self.status == StatusCode::SERVICE_UNAVAILABLE)
                .then_some(UNAVAILABLE_RETRY_AFTER_SECONDS));
        if let Some(seconds) = retry_after.map(|seconds| seconds.min(RETRY_AFTER_MAX_SECONDS)) {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
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
        | Refusal::NotDue
        | Refusal::TooManyPlacementMoves => StatusCode::CONFLICT,
        Refusal::TooManyReactions { .. } => StatusCode::TOO_MANY_REQUESTS,
    }
}

/// The status each kind of application error is answered with.
fn status_of(error: &AppError) -> StatusCode {
    match error {
        AppError::Rule(refusal) => refusal_status(refusal),
        AppError::NotFound(_) | AppError::NotQueued => StatusCode::NOT_FOUND,
        AppError::NameTaken(_)
        | AppError::TooManyOpenMatches(_)
        | AppError::TooManyChallenges(_)
        | AppError::IdempotencyInProgress
        | AppError::AlreadyQueued
        | AppError::InMatch
        | AppError::RematchUnavailable(_)
        | AppError::NotOver => StatusCode::CONFLICT,
        AppError::InvalidName(_)
        | AppError::UnknownRuleset(_)
        | AppError::RankedNeedsStandardRules(_)
        | AppError::IdempotencyMismatch
        | AppError::RankedAgainstBot
        | AppError::InvalidPassword
        | AppError::CurrentPasswordRequired => StatusCode::UNPROCESSABLE_ENTITY,
        AppError::Token(_)
        | AppError::UnknownPlayer
        | AppError::Revoked
        | AppError::InvalidCredentials => StatusCode::UNAUTHORIZED,
        AppError::WrongPassword => StatusCode::FORBIDDEN,
        AppError::TooManyAttempts(_) => StatusCode::TOO_MANY_REQUESTS,
        AppError::ShuttingDown
        | AppError::Hashing(_)
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

impl ErrorCode {
    /// The code named `text`, if it is one.
    pub fn parse(text: &str) -> Option<ErrorCode> {
        ErrorCode::ALL
            .iter()
            .copied()
            .find(|code| code.as_str() == text)
    }
}

impl From<AppError> for ApiError {
    fn from(error: AppError) -> Self {
        let status = status_of(&error);
        let retry_after = error.retry_after();
        // Every application code is one of ours (a test holds each kind to it); a stray one
        // would be a fault of ours, told as such rather than as an unlisted code.
        let code = ErrorCode::parse(error.code()).unwrap_or(ErrorCode::Internal);
        if status == StatusCode::SERVICE_UNAVAILABLE {
            let detail = if retry_after.is_some() {
                tracing::warn!(%error, "at capacity");
                "the service is at capacity; nothing was changed, retry shortly"
            } else {
                tracing::error!(%error, "database unavailable");
                "the database is unavailable; nothing was changed, retry shortly"
            };
            return ApiError::new(status, code, detail).retry_after(retry_after);
        }
        if status.is_server_error() {
            tracing::error!(%error, "internal error");
            return ApiError::new(
                status,
                code,
                "an internal error occurred; nothing was changed",
            );
        }
        ApiError::new(status, code, error.to_string()).retry_after(retry_after)
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
                ErrorCode::PayloadTooLarge,
                format!("the body is larger than {} bytes", super::BODY_LIMIT_BYTES),
            ),
            StatusCode::UNSUPPORTED_MEDIA_TYPE => ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                ErrorCode::UnsupportedMediaType,
                "send a JSON body with Content-Type: application/json",
            ),
            StatusCode::UNPROCESSABLE_ENTITY => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                ErrorCode::InvalidBody,
                detail,
            ),
            _ => ApiError::new(StatusCode::BAD_REQUEST, ErrorCode::InvalidJson, detail),
        }
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        tracing::debug!(detail = %rejection.body_text(), "refused a path");
        ApiError::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidPath,
            "a path parameter is malformed: ids are UUIDs, ship indexes small numbers",
        )
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidQuery,
            public_detail(&rejection.body_text()),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_application_error_and_refusal_has_a_listed_code() {
        use crate::auth::TokenError;
        let refusals = [
            Refusal::InvalidCell("Z".into()),
            Refusal::OffBoard,
            Refusal::Overlap,
            Refusal::ShipsTouching,
            Refusal::ShipNotPlaced(0),
            Refusal::FleetLocked,
            Refusal::NotAPlayer,
            Refusal::NotYourTurn,
            Refusal::AlreadyShot,
            Refusal::AlreadyKnown,
            Refusal::OwnMatch,
            Refusal::NotInvited,
            Refusal::NotDue,
            Refusal::InvalidOption(String::new()),
            Refusal::TooManyReactions {
                retry_after: Some(2),
            },
            Refusal::TooManyReactions { retry_after: None },
            Refusal::TooManyPlacementMoves,
        ];
        for refusal in refusals {
            let code = refusal.code();
            assert!(ErrorCode::parse(code).is_some(), "{code}");
            assert_eq!(ApiError::from(AppError::Rule(refusal)).code.as_str(), code);
        }
        let errors = [
            AppError::NotFound("match"),
            AppError::NameTaken(String::new()),
            AppError::InvalidName(String::new()),
            AppError::UnknownRuleset(String::new()),
            AppError::RankedNeedsStandardRules(""),
            AppError::IdempotencyMismatch,
            AppError::IdempotencyInProgress,
            AppError::UnknownPlayer,
            AppError::AlreadyQueued,
            AppError::NotQueued,
            AppError::InMatch,
            AppError::RematchUnavailable(""),
            AppError::NotOver,
            AppError::Revoked,
            AppError::InvalidCredentials,
            AppError::InvalidPassword,
            AppError::WrongPassword,
            AppError::CurrentPasswordRequired,
            AppError::RankedAgainstBot,
            AppError::TooManyOpenMatches(5),
            AppError::TooManyAttempts(5),
            AppError::TooManyChallenges(20),
            AppError::Hashing(crate::accounts::password::HashingFailed::Busy),
            AppError::ShuttingDown,
            AppError::Unavailable(String::new()),
            AppError::Corrupt(String::new()),
            AppError::Database(sqlx::Error::RowNotFound),
            AppError::Token(TokenError::Expired),
        ];
        for error in &errors {
            assert!(ErrorCode::parse(error.code()).is_some(), "{}", error.code());
        }
    }

    #[test]
    fn too_many_reactions_is_a_429_with_retry_after_only_for_the_gap() {
        let gap = ApiError::from(AppError::Rule(Refusal::TooManyReactions {
            retry_after: Some(2),
        }));
        assert_eq!(gap.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(gap.code, ErrorCode::TooManyReactions);
        assert_eq!(gap.retry_after, Some(2));
        let cap = ApiError::from(AppError::Rule(Refusal::TooManyReactions {
            retry_after: None,
        }));
        assert_eq!(cap.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(cap.retry_after, None);
        let response = cap.into_response();
        assert!(response.headers().get(header::RETRY_AFTER).is_none());
        let response = gap.into_response();
        assert_eq!(response.headers()[header::RETRY_AFTER], "2");
    }

    #[test]
    fn every_code_serializes_as_its_name() {
        for code in ErrorCode::ALL {
            assert_eq!(
                serde_json::to_value(code).ok(),
                Some(serde_json::Value::from(code.as_str()))
            );
        }
    }
}
