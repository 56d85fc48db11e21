//! Accounts: registration with an optional password, log-in, the caller's own profile,
//! password changes, token refresh and revocation of every earlier token.
//!
//! Tokens stay stateless JWTs; what makes them revocable is one instant per player
//! (`tokens_valid_from`) that every replica caches and keeps current through
//! LISTEN/NOTIFY ([`revocations`]). Issuing a token reads that instant `FOR SHARE`, so a
//! token is never issued on the strength of a token revoked meanwhile.

pub mod password;
pub mod revocations;

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::auth::{TokenError, Verified};
use crate::service::{Idempotency, PlayerProfile, Service, ServiceError, validate_name};
use crate::store::{self, StoreError, idempotency, players};
pub use password::Password;
pub use revocations::{Revocations, TOKENS_CHANNEL};

/// Longest a revoking request waits for its own replica to apply the revocation.
const APPLY_WAIT: Duration = Duration::from_secs(2);

/// Why an account request was not carried out.
#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    #[error("wrong name or password")]
    InvalidCredentials,
    #[error(transparent)]
    InvalidPassword(#[from] password::BadLength),
    #[error("the current password is wrong")]
    WrongPassword,
    #[error("this account has a password: send `current_password` to change it")]
    CurrentPasswordRequired,
    #[error("this token was revoked; log in again")]
    Revoked,
    #[error(transparent)]
    Hashing(#[from] password::HashingFailed),
    #[error(transparent)]
    Service(#[from] ServiceError),
}

impl From<StoreError> for AccountError {
    fn from(error: StoreError) -> Self {
        Self::Service(error.into())
    }
}

impl From<TokenError> for AccountError {
    fn from(error: TokenError) -> Self {
        Self::Service(error.into())
    }
}

impl From<sqlx::Error> for AccountError {
    fn from(error: sqlx::Error) -> Self {
        Self::Service(error.into())
    }
}

impl From<revocations::Refused> for AccountError {
    fn from(refused: revocations::Refused) -> Self {
        match refused {
            revocations::Refused::UnknownPlayer => Self::Service(ServiceError::UnknownPlayer),
            revocations::Refused::Revoked => Self::Revoked,
            revocations::Refused::Store(error) => error.into(),
        }
    }
}

pub type Result<T, E = AccountError> = std::result::Result<T, E>;

/// A player and a fresh bearer token for them.
#[derive(Clone, Debug, Deserialize, Serialize, ToSchema)]
pub struct Session {
    pub id: Uuid,
    pub name: String,
    /// The bearer token for every later call (valid 30 days, until revoked).
    pub token: String,
}

/// The caller's own profile: the public one and what only they may know.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct Me {
    #[serde(flatten)]
    pub profile: PlayerProfile,
    /// Whether a password is set, so the account can be logged into.
    pub has_password: bool,
}

/// Registers a player, with a password if one is given. With an `Idempotency-Key` (in the
/// registration key space) a retry gets the first answer; when the first request carried
/// a password, only a retry carrying the same password does.
///
/// `idempotency` must digest the name and whether a password was given, never the
/// password: no fast hash of a password is stored.
pub async fn register(
    service: &Service,
    name: &str,
    password: Option<String>,
    idempotency: Option<&Idempotency>,
) -> Result<Session> {
    let name = validate_name(name)?;
    let password = password.map(Password::new).transpose()?;
    let hash = match &password {
        Some(password) => Some(password::hash(password).await?),
        None => None,
    };
    let mut tx = service.pool.begin().await?;
    let scope = idempotency::REGISTRATION_SCOPE;
    if let Some(answer) = crate::service::claim_or_replay(&mut tx, scope, idempotency).await? {
        drop(tx);
        let first: Session =
            serde_json::from_value(answer).map_err(|e| ServiceError::Corrupt(e.to_string()))?;
        if let Some(password) = &password {
            let stored = store::accounts::lock_password(&service.pool, first.id)
                .await?
                .flatten();
            if !password::verify(password, stored).await? {
                return Err(ServiceError::IdempotencyMismatch.into());
            }
        }
        return Ok(first);
    }
    let id = Uuid::now_v7();
    let row = players::insert(&mut *tx, id, name)
        .await
        .map_err(|e| match e {
            StoreError::NameTaken => ServiceError::NameTaken(name.to_owned()),
            other => other.into(),
        })?;
    if let Some(hash) = &hash {
        store::accounts::set_password(&mut *tx, id, hash).await?;
    }
    let session = Session {
        id,
        name: row.name,
        token: service.tokens.mint(id, row.created_at)?,
    };
    if let Some(key) = idempotency {
        let answer =
            serde_json::to_value(&session).map_err(|e| ServiceError::Corrupt(e.to_string()))?;
        idempotency::finish(&mut *tx, scope, &key.key, &answer).await?;
    }
    tx.commit().await?;
    Ok(session)
}

/// Logs in: a fresh token for the player named `name` if `password` is theirs. An unknown
/// name, a player without a password and a wrong password get the same answer after the
/// same work (one Argon2 verification).
pub async fn log_in(service: &Service, name: &str, password: String) -> Result<Session> {
    let credentials = store::accounts::by_name(&service.pool, name).await?;
    let stored = credentials.as_ref().and_then(|c| c.password_hash.clone());
    let matches = password::verify(&Password::offered(password), stored).await?;
    let Some(credentials) = credentials.filter(|_| matches) else {
        return Err(AccountError::InvalidCredentials);
    };
    let (at, name) = store::accounts::issue_instant(&service.pool, credentials.id, None)
        .await?
        .ok_or(AccountError::InvalidCredentials)?;
    issue(service, credentials.id, name, at)
}

fn issue(service: &Service, id: Uuid, name: String, at: DateTime<Utc>) -> Result<Session> {
    Ok(Session {
        id,
        name,
        token: service.tokens.mint(id, at)?,
    })
}

fn presented(token: Verified) -> Option<DateTime<Utc>> {
    token
        .issued_micros
        .and_then(DateTime::<Utc>::from_timestamp_micros)
}

/// The caller's own profile.
pub async fn me(service: &Service, caller: Uuid) -> Result<Me> {
    let profile = service.profile(caller).await.map_err(|e| match e {
        ServiceError::NotFound(_) => ServiceError::UnknownPlayer,
        other => other,
    })?;
    let has_password = store::accounts::has_password(&service.pool, caller).await?;
    Ok(Me {
        profile,
        has_password,
    })
}

/// Sets the caller's password, or changes it: once one is set, `current` must be it. With
/// an `Idempotency-Key` a retry changes nothing and succeeds again, provided its password
/// is the one now set; `idempotency` must digest the request without the passwords.
pub async fn set_password(
    service: &Service,
    caller: Uuid,
    new: String,
    current: Option<String>,
    idempotency: Option<&Idempotency>,
) -> Result<()> {
    let new = Password::new(new)?;
    let hash = password::hash(&new).await?;
    let mut tx = service.pool.begin().await?;
    let replayed = crate::service::claim_or_replay(&mut tx, caller, idempotency).await?;
    let stored = store::accounts::lock_password(&mut *tx, caller)
        .await?
        .ok_or(ServiceError::UnknownPlayer)?;
    if replayed.is_some() {
        return if password::verify(&new, stored).await? {
            Ok(())
        } else {
            Err(ServiceError::IdempotencyMismatch.into())
        };
    }
    if let Some(stored) = stored {
        let current = current.ok_or(AccountError::CurrentPasswordRequired)?;
        if !password::verify(&Password::offered(current), Some(stored)).await? {
            return Err(AccountError::WrongPassword);
        }
    }
    store::accounts::set_password(&mut *tx, caller, &hash).await?;
    if let Some(key) = idempotency {
        idempotency::finish(&mut *tx, caller, &key.key, &serde_json::Value::Null).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// A fresh token for the holder of a still valid one.
pub async fn refresh(service: &Service, token: Verified) -> Result<Session> {
    let (at, name) =
        store::accounts::issue_instant(&service.pool, token.player, Some(presented(token)))
            .await?
            .ok_or(AccountError::Revoked)?;
    issue(service, token.player, name, at)
}

/// Revokes every token of the caller issued so far, on every replica, and issues a new
/// one. Answers once this replica refuses the old tokens; the others learn it from the
/// same notification.
pub async fn revoke_all(
    service: &Service,
    revocations: &Revocations,
    token: Verified,
) -> Result<Session> {
    let mut tx = service.pool.begin().await?;
    let (valid_from, name) =
        store::accounts::revoke_tokens(&mut *tx, token.player, presented(token), TOKENS_CHANNEL)
            .await?
            .ok_or(AccountError::Revoked)?;
    let session = issue(service, token.player, name, valid_from)?;
    tx.commit().await?;
    if !revocations
        .applied(token.player, valid_from.timestamp_micros(), APPLY_WAIT)
        .await
    {
        tracing::warn!(player = %token.player, "revocation not applied here within the wait");
    }
    Ok(session)
}
