//! Request extractors whose rejections are problems: JSON bodies, paths, queries, the
//! bearer token and the `Idempotency-Key` header.

use axum::extract::{FromRequest, FromRequestParts};
use axum::http::request::Parts;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::AppState;
use super::error::{ApiError, ErrorCode};
use crate::app::{AppError, Idempotency};
use crate::auth::Verified;

/// A JSON body; malformed, mistyped or oversized bodies are problems.
#[derive(FromRequest)]
#[from_request(via(axum::Json), rejection(ApiError))]
pub struct ApiJson<T>(pub T);

/// Path parameters; a malformed id is `invalid_path`.
#[derive(FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct ApiPath<T>(pub T);

/// Query parameters; malformed ones are `invalid_query`.
#[derive(FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct ApiQuery<T>(pub T);

/// The calling player, from `Authorization: Bearer <jwt>`: a token signed with our secret,
/// unexpired, naming a player that exists, and not revoked.
#[derive(Clone, Copy, Debug)]
pub struct Caller(pub Uuid);

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let Authenticated(token) = Authenticated::from_request_parts(parts, state).await?;
        Ok(Caller(token.player))
    }
}

/// The calling player on a public read: none without an `Authorization` header, and a
/// header that is sent must be valid like anywhere else.
#[derive(Clone, Copy, Debug)]
pub struct MaybeCaller(pub Option<Uuid>);

impl FromRequestParts<AppState> for MaybeCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        if !parts
            .headers
            .contains_key(axum::http::header::AUTHORIZATION)
        {
            return Ok(MaybeCaller(None));
        }
        let Caller(player) = Caller::from_request_parts(parts, state).await?;
        Ok(MaybeCaller(Some(player)))
    }
}

/// The caller's accepted token itself, for the account routes that issue or revoke tokens.
#[derive(Clone, Copy, Debug)]
pub struct Authenticated(pub Verified);

impl FromRequestParts<AppState> for Authenticated {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        bearer(state, &parts.headers).await.map(Authenticated)
    }
}

/// The token of `Authorization: Bearer <jwt>`, verified and not revoked.
pub async fn bearer(
    state: &AppState,
    headers: &axum::http::HeaderMap,
) -> Result<Verified, ApiError> {
    let header = headers
        .get(axum::http::header::AUTHORIZATION)
        .ok_or_else(|| ApiError::unauthorized("send Authorization: Bearer <token>"))?;
    let token = header
        .to_str()
        .ok()
        .and_then(|value| {
            // The scheme name is case-insensitive (RFC 9110).
            let (scheme, token) = value.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then_some(token)
        })
        .ok_or_else(|| {
            ApiError::unauthorized("the Authorization header must be `Bearer <token>`")
        })?;
    let verified = state
        .app
        .tokens()
        .verify_claims(token.trim())
        .map_err(|e| ApiError::unauthorized(e.to_string()))?;
    state
        .live
        .revocations()
        .admit(verified)
        .await
        .map_err(AppError::from)?;
    Ok(verified)
}

/// Longest accepted `Idempotency-Key`.
pub const IDEMPOTENCY_KEY_MAX: usize = 255;
/// What an `Idempotency-Key` is made of: visible ASCII, no spaces.
pub const IDEMPOTENCY_KEY_PATTERN: &str = "^[!-~]+$";

/// Whether `key` has an `Idempotency-Key`'s form.
pub(super) fn is_idempotency_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= IDEMPOTENCY_KEY_MAX
        && key.bytes().all(|byte| byte.is_ascii_graphic())
}

/// The optional `Idempotency-Key` header. The request digest is filled in by the handler
/// from the method, path and body.
#[derive(Clone, Debug)]
pub struct IdempotencyKey(pub Option<String>);

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyKey {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let Some(value) = parts.headers.get("idempotency-key") else {
            return Ok(IdempotencyKey(None));
        };
        let key = value
            .to_str()
            .ok()
            .filter(|key| is_idempotency_key(key))
            .ok_or_else(|| {
                ApiError::new(
                    axum::http::StatusCode::BAD_REQUEST,
                    ErrorCode::InvalidIdempotencyKey,
                    format!(
                        "Idempotency-Key must be 1 to {IDEMPOTENCY_KEY_MAX} visible ASCII \
                         characters (no spaces)"
                    ),
                )
            })?;
        Ok(IdempotencyKey(Some(key.to_owned())))
    }
}

impl IdempotencyKey {
    /// Binds the key to this request: the same key with another request is refused.
    pub fn for_request(&self, route: &str, body: &impl serde::Serialize) -> Option<Idempotency> {
        let key = self.0.clone()?;
        let body = serde_json::to_vec(body).unwrap_or_default();
        let mut digest = Sha256::new();
        digest.update(route.as_bytes());
        digest.update([0]);
        digest.update(&body);
        Some(Idempotency {
            key,
            request_hash: hex::encode(digest.finalize()),
        })
    }
}
