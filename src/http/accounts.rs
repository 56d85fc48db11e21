//! `/v1/sessions` and `/v1/me`: log-in, the caller's own profile, password, token refresh
//! and revocation.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::AppState;
use super::error::{ApiError, ErrorCode, Problem};
use super::extract::{ApiJson, Authenticated, Caller, IdempotencyKey};
use crate::accounts::password;
use crate::app::{Me, Session};
use crate::names::NAME_MAX_CHARS;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(log_in))
        .routes(routes!(me))
        .routes(routes!(set_password))
        .routes(routes!(refresh_token))
        .routes(routes!(revoke_tokens))
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LogIn {
    /// The name registered (any case).
    #[schema(max_length = 32)]
    pub name: String,
    #[schema(max_length = 128)]
    pub password: String,
}

/// A text longer than any the server accepts is refused before it is looked up or
/// hashed, whatever the account: the bound the document states for it.
fn at_most(text: &str, max: usize, field: &str) -> Result<(), ApiError> {
    if text.chars().count() > max {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::InvalidBody,
            format!("`{field}` has at most {max} characters"),
        ));
    }
    Ok(())
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewPassword {
    /// 8–128 characters.
    #[schema(min_length = 8, max_length = 128)]
    pub password: String,
    /// The password now set; required once the account has one.
    #[serde(default)]
    #[schema(max_length = 128)]
    pub current_password: Option<String>,
}

/// What a password change's key is bound to: never the passwords themselves (a retry's
/// password is checked against the stored hash instead).
#[derive(Serialize)]
struct PasswordDigest {
    current_password: bool,
}

/// Log in with a name and password: a fresh token for the account.
#[utoipa::path(
    post, path = "/v1/sessions", tag = "accounts",
    request_body = LogIn,
    responses(
        (status = 200, description = "Logged in", body = Session),
        (status = 400, description = "`invalid_json`", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "`invalid_credentials`: an unknown name, an account without a password and a wrong password get this same answer", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`invalid_body`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn log_in(
    State(state): State<AppState>,
    ApiJson(body): ApiJson<LogIn>,
) -> Result<Json<Session>, ApiError> {
    at_most(&body.name, NAME_MAX_CHARS, "name")?;
    at_most(&body.password, password::MAX_CHARS, "password")?;
    Ok(Json(state.app.log_in(&body.name, body.password).await?))
}

/// The caller's own profile: the public profile and whether a password is set.
#[utoipa::path(
    get, path = "/v1/me", tag = "accounts",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "The caller's profile", body = Me),
        (status = 401, description = "`unauthorized`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn me(State(state): State<AppState>, Caller(caller): Caller) -> Result<Json<Me>, ApiError> {
    Ok(Json(state.app.me(caller).await?))
}

/// Set the caller's password, or change it (then `current_password` is required). Tokens
/// stay valid; revoke them with `DELETE /v1/me/tokens`.
#[utoipa::path(
    put, path = "/v1/me/password", tag = "accounts",
    request_body = NewPassword,
    params(("Idempotency-Key" = Option<String>, Header, description = "Retry-safe key, scoped to the caller: a retry with the same password succeeds again and changes nothing")),
    security(("bearer" = [])),
    responses(
        (status = 204, description = "The password is set"),
        (status = 400, description = "`invalid_json`, `invalid_idempotency_key`", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "`unauthorized`", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "`wrong_password`: the current password given is not the password set", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`idempotency_key_in_progress`", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`invalid_password` (not 8–128 characters), `current_password_required`, `invalid_body`, `idempotency_key_reused`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn set_password(
    State(state): State<AppState>,
    Caller(caller): Caller,
    key: IdempotencyKey,
    ApiJson(body): ApiJson<NewPassword>,
) -> Result<StatusCode, ApiError> {
    if let Some(current) = &body.current_password {
        at_most(current, password::MAX_CHARS, "current_password")?;
    }
    let digest = PasswordDigest {
        current_password: body.current_password.is_some(),
    };
    let idempotency = key.for_request("PUT /v1/me/password", &digest);
    state
        .app
        .set_password(
            caller,
            body.password,
            body.current_password,
            idempotency.as_ref(),
        )
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A fresh token for the caller (valid 30 days); the presented one stays valid too.
#[utoipa::path(
    post, path = "/v1/me/token", tag = "accounts",
    params(("Idempotency-Key" = Option<String>, Header)),
    security(("bearer" = [])),
    responses(
        (status = 200, description = "A fresh token (a retry with the same `Idempotency-Key` answers the same token)", body = Session),
        (status = 401, description = "`unauthorized`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn refresh_token(
    State(state): State<AppState>,
    Authenticated(token): Authenticated,
    key: IdempotencyKey,
) -> Result<Json<Session>, ApiError> {
    let idempotency = key.for_request("POST /v1/me/token", &());
    Ok(Json(state.app.refresh(token, idempotency.as_ref()).await?))
}

/// Revoke every token issued to the caller so far, on every replica at once, and get a
/// new one. Tokens minted by a backend of one's own with an earlier `iat` (or none) are
/// revoked too.
#[utoipa::path(
    delete, path = "/v1/me/tokens", tag = "accounts",
    security(("bearer" = [])),
    responses(
        (status = 200, description = "Every earlier token is revoked; this one replaces them", body = Session),
        (status = 401, description = "`unauthorized`", body = Problem, content_type = "application/problem+json"),
    )
)]
async fn revoke_tokens(
    State(state): State<AppState>,
    Authenticated(token): Authenticated,
) -> Result<Json<Session>, ApiError> {
    Ok(Json(
        state
            .app
            .revoke_all(state.live.revocations(), token)
            .await?,
    ))
}
