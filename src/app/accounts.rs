//! Accounts: registration with an optional password, log-in, the caller's own profile,
//! password changes, token refresh and revocation of every earlier token.
//!
//! Tokens stay stateless JWTs; what makes them revocable is one instant per player
//! (`tokens_valid_from`) that every replica caches and keeps current through
//! LISTEN/NOTIFY ([`crate::accounts::revocations`]). Issuing a token reads that instant
//! `FOR SHARE`, so a token is never issued on the strength of a token revoked meanwhile.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::idempotency::{Idempotency, claim_or_replay, remember};
use super::resources::PlayerProfile;
use super::{App, AppError, Result};
use crate::accounts::password::{self, Password};
use crate::accounts::revocations::{self, Revocations, TOKENS_CHANNEL};
use crate::auth::Verified;
use crate::names::PlayerName;
use crate::store::{self, StoreError, idempotency, players};

/// Longest a revoking request waits for every listening replica to apply the revocation.
const APPLY_WAIT: Duration = Duration::from_secs(2);

/// Failed password attempts in a row an account may have before each further one locks
/// it (log-in and password change together, across every replica).
pub const FREE_ATTEMPTS: i32 = 5;
/// Longest lock after repeated failures: the back-off doubles from 2 s up to this.
pub const MAX_LOCK_SECONDS: i32 = 900;
/// Keyed token refreshes a player's idempotency keys remember (the newest): a refresh is
/// retried within seconds, and at the player rate limit the keys would otherwise grow by
/// gigabytes a day.
pub const REFRESH_KEYS_KEPT: i64 = 32;

impl From<revocations::Refused> for AppError {
    fn from(refused: revocations::Refused) -> Self {
        match refused {
            revocations::Refused::UnknownPlayer => AppError::UnknownPlayer,
            revocations::Refused::Revoked => AppError::Revoked,
            revocations::Refused::Store(error) => error.into(),
        }
    }
}

impl From<password::BadLength> for AppError {
    fn from(_: password::BadLength) -> Self {
        AppError::InvalidPassword
    }
}

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

fn presented(token: Verified) -> Option<DateTime<Utc>> {
    token
        .issued_micros
        .and_then(DateTime::<Utc>::from_timestamp_micros)
}

impl App {
    /// Registers a player, with a password if one is given. With an `Idempotency-Key` (in the
    /// registration key space) a retry gets the first answer; when the first request carried
    /// a password, only a retry carrying the same password does, and when it carried none,
    /// only while the account still has none (after that the retry is `NameTaken`).
    ///
    /// `idempotency` must digest the name and whether a password was given, never the
    /// password: no fast hash of a password is stored.
    pub async fn register(
        &self,
        name: &str,
        password: Option<String>,
        idempotency: Option<&Idempotency>,
    ) -> Result<Session> {
        let name = PlayerName::parse(name).map_err(|e| AppError::InvalidName(e.to_string()))?;
        let password = password.map(Password::new).transpose()?;
        let hash = match &password {
            Some(password) => Some(self.hashing().hash(password).await?),
            None => None,
        };
        let mut tx = self.pool().begin().await?;
        let scope = idempotency::REGISTRATION_SCOPE;
        if let Some(answer) = claim_or_replay(&mut tx, scope, idempotency).await? {
            drop(tx);
            let first: Session =
                serde_json::from_value(answer).map_err(|e| AppError::Corrupt(e.to_string()))?;
            if let Some(password) = &password {
                let stored = store::accounts::password_hash(self.pool(), first.id).await?;
                if !self.hashing().verify(password, stored).await? {
                    return Err(AppError::IdempotencyMismatch);
                }
            } else if store::accounts::has_password(self.pool(), first.id).await? {
                // Registered without a password, and one was set since (so its holder has
                // the token and may log in): the key and the name alone no longer hand out
                // a token.
                return Err(AppError::NameTaken(name.to_string()));
            }
            return Ok(first);
        }
        // A row from before the current key is found by its old key too.
        let keys = name.lookup_keys();
        if store::accounts::by_name_keys(&mut *tx, &keys, name.as_str())
            .await?
            .is_some()
        {
            return Err(AppError::NameTaken(name.to_string()));
        }
        let id = Uuid::now_v7();
        let row = players::insert(&mut *tx, id, &name)
            .await
            .map_err(|e| match e {
                StoreError::NameTaken => AppError::NameTaken(name.to_string()),
                other => other.into(),
            })?;
        if let Some(hash) = &hash {
            store::accounts::set_password(&mut *tx, id, hash).await?;
        }
        let session = Session {
            id,
            name: row.name,
            token: self.tokens().mint(id, row.created_at)?,
        };
        if let Some(key) = idempotency {
            let answer =
                serde_json::to_value(&session).map_err(|e| AppError::Corrupt(e.to_string()))?;
            idempotency::finish(&mut *tx, scope, &key.key, &answer).await?;
        }
        tx.commit().await?;
        Ok(session)
    }

    /// Whether a registration under the `Idempotency-Key` `key` has been answered already,
    /// so a request carrying it is a retry rather than a new registration.
    pub async fn registration_answered(&self, key: &str) -> Result<bool> {
        super::idempotency::answered(self.pool(), idempotency::REGISTRATION_SCOPE, key).await
    }

    /// Logs in: a fresh token for the player named `name` if `password` is theirs. An unknown
    /// name, a player without a password and a wrong password get the same answer after
    /// about the same time (one Argon2 verification, or a wait as long for a name without a
    /// password, which spends no hashing budget).
    pub async fn log_in(&self, name: &str, password: String) -> Result<Session> {
        // Looked up by the same key registration made unique: case and look-alikes fold.
        let name = PlayerName::parse(name).ok();
        let account = name.as_ref().map(PlayerName::key);
        if let Some(account) = &account {
            self.take_attempt(account).await?;
        }
        let credentials = match &name {
            Some(name) => {
                let keys = name.lookup_keys();
                store::accounts::by_name_keys(self.pool(), &keys, name.as_str()).await?
            }
            None => None,
        };
        let stored = credentials.as_ref().and_then(|c| c.password_hash.clone());
        // No connection is held while hashing. A name without a password (or account)
        // gets the same answer after about the same wait, but spends none of the hashing
        // budget the accounts that exist need.
        let matches = match stored {
            Some(stored) => {
                self.hashing()
                    .verify(&Password::offered(password), Some(stored))
                    .await?
            }
            None => self.hashing().pretend_verify().await,
        };
        let Some(credentials) = credentials.filter(|_| matches) else {
            return Err(AppError::InvalidCredentials);
        };
        if let Some(account) = &account {
            store::accounts::clear_attempts(self.pool(), account).await?;
        }
        let (at, name) = store::accounts::issue_instant(self.pool(), credentials.id, None)
            .await?
            .ok_or(AppError::InvalidCredentials)?;
        self.issue(credentials.id, name, at)
    }

    /// Counts one password attempt against `account`; refused while it is locked.
    async fn take_attempt(&self, account: &str) -> Result<()> {
        store::accounts::take_attempt(self.pool(), account, FREE_ATTEMPTS, MAX_LOCK_SECONDS)
            .await?
            .map_err(|seconds| {
                metrics::counter!("statki_password_attempts_refused_total").increment(1);
                AppError::TooManyAttempts(u64::try_from(seconds).unwrap_or(1))
            })
    }

    fn issue(&self, id: Uuid, name: String, at: DateTime<Utc>) -> Result<Session> {
        Ok(Session {
            id,
            name,
            token: self.tokens().mint(id, at)?,
        })
    }

    /// The caller's own profile.
    pub async fn me(&self, caller: Uuid) -> Result<Me> {
        let profile = self.profile(caller).await.map_err(|e| match e {
            AppError::NotFound(_) => AppError::UnknownPlayer,
            other => other,
        })?;
        let has_password = store::accounts::has_password(self.pool(), caller).await?;
        Ok(Me {
            profile,
            has_password,
        })
    }

    /// Sets the caller's password, or changes it: once one is set, `current` must be it. With
    /// an `Idempotency-Key` a retry changes nothing and succeeds again, provided its password
    /// is the one now set; `idempotency` must digest the request without the passwords.
    pub async fn set_password(
        &self,
        caller: Uuid,
        new: String,
        current: Option<String>,
        idempotency: Option<&Idempotency>,
    ) -> Result<()> {
        let new = Password::new(new)?;
        if let Some(key) = idempotency
            && let Some((hash, Some(_))) = idempotency::get(self.pool(), caller, &key.key).await?
            && hash == key.request_hash
        {
            // A retry of a change already made: it succeeds if its password is set.
            return self.confirm_replayed_change(caller, &new).await;
        }
        let (stored, account) = store::accounts::password_and_key(self.pool(), caller)
            .await?
            .ok_or(AppError::UnknownPlayer)?;
        // The current password first, counted against the account, and no connection or
        // lock held while hashing.
        if let Some(stored) = &stored {
            let current = current.ok_or(AppError::CurrentPasswordRequired)?;
            self.take_attempt(&account).await?;
            if !self
                .hashing()
                .verify(&Password::offered(current), Some(stored.clone()))
                .await?
            {
                return Err(AppError::WrongPassword);
            }
            store::accounts::clear_attempts(self.pool(), &account).await?;
        }
        let hash = self.hashing().hash(&new).await?;
        let mut tx = self.pool().begin().await?;
        if claim_or_replay(&mut tx, caller, idempotency)
            .await?
            .is_some()
        {
            drop(tx);
            return self.confirm_replayed_change(caller, &new).await;
        }
        let locked = store::accounts::lock_password(&mut *tx, caller)
            .await?
            .ok_or(AppError::UnknownPlayer)?;
        if locked != stored {
            // Changed since it was checked: the current password given is no longer it.
            return Err(AppError::WrongPassword);
        }
        store::accounts::set_password(&mut *tx, caller, &hash).await?;
        if let Some(key) = idempotency {
            idempotency::finish(&mut *tx, caller, &key.key, &serde_json::Value::Null).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// The answer to a retried password change: success if `new` is the password set.
    async fn confirm_replayed_change(&self, caller: Uuid, new: &Password) -> Result<()> {
        let stored = store::accounts::password_hash(self.pool(), caller).await?;
        if self.hashing().verify(new, stored).await? {
            Ok(())
        } else {
            Err(AppError::IdempotencyMismatch)
        }
    }

    /// A fresh token for the holder of a still valid one. A retry with the same
    /// `idempotency` key answers the token the first request issued, for the player's last
    /// [`REFRESH_KEYS_KEPT`] keyed refreshes; an older key is a new refresh.
    pub async fn refresh(
        &self,
        token: Verified,
        idempotency: Option<&Idempotency>,
    ) -> Result<Session> {
        let mut tx = self.pool().begin().await?;
        if let Some(answer) = claim_or_replay(&mut tx, token.player, idempotency).await? {
            return serde_json::from_value(answer).map_err(|e| AppError::Corrupt(e.to_string()));
        }
        if let Some(key) = idempotency {
            // Every refresh digests alike, so its keys are known by their digest: only the
            // newest are kept, whatever the rate.
            idempotency::keep_newest(&mut *tx, token.player, &key.request_hash, REFRESH_KEYS_KEPT)
                .await?;
        }
        let (at, name) =
            store::accounts::issue_instant(&mut *tx, token.player, Some(presented(token)))
                .await?
                .ok_or(AppError::Revoked)?;
        let session = self.issue(token.player, name, at)?;
        remember(&mut tx, token.player, idempotency, &session).await?;
        tx.commit().await?;
        Ok(session)
    }

    /// Revokes every token of the caller issued so far, on every replica, and issues a new
    /// one. Answers once every listening replica has acknowledged that it refuses the old
    /// tokens (or after [`APPLY_WAIT`]); a replica not listening reads the row per request.
    pub async fn revoke_all(&self, revocations: &Revocations, token: Verified) -> Result<Session> {
        let mut tx = self.pool().begin().await?;
        let (valid_from, name) =
            store::accounts::revoke_tokens(&mut tx, token.player, presented(token), TOKENS_CHANNEL)
                .await?
                .ok_or(AppError::Revoked)?;
        let session = self.issue(token.player, name, valid_from)?;
        // Counting starts before the commit that makes replicas acknowledge.
        let acks = revocations.expect_acks(token.player, valid_from.timestamp_micros());
        tx.commit().await?;
        let replicas =
            store::accounts::listeners(self.pool(), crate::live::LISTENER_APPLICATION_NAME).await?;
        let expected = usize::try_from(replicas).unwrap_or(0);
        if !acks.wait(expected, APPLY_WAIT).await {
            tracing::warn!(
                player = %token.player, replicas,
                "not every listening replica acknowledged a revocation in time"
            );
        }
        Ok(session)
    }
}

/// Seconds a stream ticket stays valid: long enough to open a stream right after asking.
pub const STREAM_TICKET_SECONDS: i64 = 60;

/// A short-lived, single-use stand-in for the bearer token on the two stream endpoints
/// (`?ticket=`), for a browser's `EventSource`, which cannot send headers.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct StreamTicket {
    /// 64 hex digits; opens one stream, once.
    #[schema(pattern = "^[0-9a-f]{64}$", min_length = 64, max_length = 64)]
    pub ticket: String,
    /// Seconds the ticket stays valid.
    pub expires_in: i64,
}

/// Only a digest of a ticket is stored, so the table never holds a usable one.
fn ticket_digest(ticket: &str) -> Vec<u8> {
    use sha2::Digest;
    sha2::Sha256::digest(ticket.as_bytes()).to_vec()
}

impl App {
    /// A stream ticket for the holder of `token`, valid until the token is revoked or
    /// [`STREAM_TICKET_SECONDS`] pass, whichever is first.
    pub async fn issue_stream_ticket(&self, token: Verified) -> Result<StreamTicket> {
        let mut bytes = [0u8; 32];
        rand::Rng::fill(&mut rand::rng(), &mut bytes);
        let ticket = hex::encode(bytes);
        store::tickets::issue(
            self.pool(),
            &ticket_digest(&ticket),
            token.player,
            token.issued_micros,
            STREAM_TICKET_SECONDS,
        )
        .await?;
        Ok(StreamTicket {
            ticket,
            expires_in: STREAM_TICKET_SECONDS,
        })
    }

    /// Voids a stream ticket, if it is one still unused: for a request that carried it and
    /// was answered without opening a stream.
    pub async fn void_stream_ticket(&self, ticket: &str) -> Result<()> {
        store::tickets::redeem(self.pool(), &ticket_digest(ticket)).await?;
        Ok(())
    }

    /// Takes a stream ticket: the token it stands for (whose revocation the caller still
    /// checks). An unknown, expired or already used ticket is `Revoked`.
    pub async fn redeem_stream_ticket(&self, ticket: &str) -> Result<Verified> {
        let (player, issued_micros) = store::tickets::redeem(self.pool(), &ticket_digest(ticket))
            .await?
            .ok_or(AppError::Revoked)?;
        Ok(Verified {
            player,
            issued_micros,
        })
    }
}
