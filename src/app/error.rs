//! The one error type of the application layer. Each kind has a stable `code()`; only
//! `http` decides which status a kind is answered with.

use crate::auth::TokenError;
use crate::engine::Refusal;
use crate::store::StoreError;

/// Why a use case was not carried out. Carries no transport detail.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Rule(#[from] Refusal),
    #[error("no {0} with that id")]
    NotFound(&'static str),
    #[error("the name `{0}` is taken")]
    NameTaken(String),
    #[error("{0}")]
    InvalidName(String),
    #[error("unknown rule set `{0}`: use statki, classic or battaglia")]
    UnknownRuleset(String),
    #[error("ranked matches use the preset's standard rules and clock: {0}")]
    RankedNeedsStandardRules(&'static str),
    #[error("a match against a bot is never ranked: create it with `ranked: false`")]
    RankedAgainstBot,
    #[error(
        "you already have {0} matches waiting for an opponent (withdrawn ones count for two minutes); withdraw one or wait"
    )]
    TooManyOpenMatches(u32),
    #[error("this player already has {0} challenges waiting; try later")]
    TooManyChallenges(i64),
    #[error("this Idempotency-Key was used for a different request")]
    IdempotencyMismatch,
    #[error("a request with this Idempotency-Key is still being processed")]
    IdempotencyInProgress,
    #[error("{0}")]
    Token(#[from] TokenError),
    #[error("the player in the token does not exist")]
    UnknownPlayer,
    #[error("this token was revoked; log in again")]
    Revoked,
    #[error("wrong name or password")]
    InvalidCredentials,
    #[error("a password has 8 to 128 characters")]
    InvalidPassword,
    #[error("the current password is wrong")]
    WrongPassword,
    #[error("this account has a password: send `current_password` to change it")]
    CurrentPasswordRequired,
    #[error(transparent)]
    Hashing(#[from] crate::accounts::password::HashingFailed),
    #[error("too many failed password attempts for this account; retry in {0} s")]
    TooManyAttempts(u64),
    #[error("you are already waiting in the queue; leave it first to change rule set")]
    AlreadyQueued,
    #[error("you are not waiting in the queue")]
    NotQueued,
    #[error("you are playing a match; finish it before queueing")]
    InMatch,
    #[error("the match is still being played: it can be exported once it is over")]
    NotOver,
    #[error("no rematch: {0}")]
    RematchUnavailable(&'static str),
    #[error("the service is shutting down")]
    ShuttingDown,
    #[error("the database is unavailable: {0}")]
    Unavailable(String),
    #[error("stored state is unreadable: {0}")]
    Corrupt(String),
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
}

impl AppError {
    /// The stable, machine-readable code clients match on.
    pub fn code(&self) -> &'static str {
        match self {
            AppError::Rule(refusal) => refusal.code(),
            AppError::NotFound(_) => "not_found",
            AppError::NameTaken(_) => "name_taken",
            AppError::InvalidName(_) => "invalid_name",
            AppError::UnknownRuleset(_) => "unknown_ruleset",
            AppError::RankedNeedsStandardRules(_) => "ranked_needs_standard_rules",
            AppError::RankedAgainstBot => "ranked_against_bot",
            AppError::TooManyOpenMatches(_) | AppError::TooManyChallenges(_) => {
                "too_many_open_matches"
            }
            AppError::IdempotencyMismatch => "idempotency_key_reused",
            AppError::IdempotencyInProgress => "idempotency_key_in_progress",
            AppError::Token(_) | AppError::UnknownPlayer | AppError::Revoked => "unauthorized",
            AppError::InvalidCredentials => "invalid_credentials",
            AppError::InvalidPassword => "invalid_password",
            AppError::WrongPassword => "wrong_password",
            AppError::CurrentPasswordRequired => "current_password_required",
            AppError::Hashing(crate::accounts::password::HashingFailed::Busy) => "unavailable",
            AppError::Hashing(_) => "internal",
            AppError::TooManyAttempts(_) => "rate_limited",
            AppError::AlreadyQueued => "already_queued",
            AppError::NotQueued => "not_queued",
            AppError::InMatch => "in_match",
            AppError::RematchUnavailable(_) => "rematch_unavailable",
            AppError::NotOver => "match_not_over",
            AppError::ShuttingDown | AppError::Unavailable(_) => "unavailable",
            AppError::Database(error) if is_unavailable(error) => "unavailable",
            AppError::Database(_) | AppError::Corrupt(_) => "internal",
        }
    }

    /// Seconds after which a retry may succeed, for the answers that say so.
    pub fn retry_after(&self) -> Option<u64> {
        match self {
            AppError::TooManyAttempts(seconds) => Some((*seconds).max(1)),
            AppError::Rule(Refusal::TooManyReactions { retry_after }) => {
                retry_after.map(|seconds| seconds.max(1))
            }
            AppError::Hashing(crate::accounts::password::HashingFailed::Busy) => Some(1),
            _ => None,
        }
    }

    /// This error as told to each command of a batch that failed with it as a whole.
    pub(crate) fn shared(&self) -> AppError {
        match self.code() {
            "unavailable" => AppError::Unavailable(self.to_string()),
            _ => AppError::Corrupt(self.to_string()),
        }
    }
}

/// Whether a database error means the database could not be reached or its connection was
/// lost (so nothing was stored), rather than a fault in what was asked of it.
fn is_unavailable(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_) => true,
        // Class 08: connection exceptions; 57P01–57P03: the server is shutting down or
        // the session was terminated; 53300: too many connections; 25006: a write reached
        // a server that is (now) a read-only standby, as during a failover's switch.
        // On Citus, a worker lost in the middle of a transaction is reported by the
        // coordinator without a code of its own (XX000), by these messages; the second
        // comes at COMMIT, when the outcome on that worker is unknown: a retry with the
        // same Idempotency-Key finds what was stored (the schema has no deferred
        // constraint or trigger, Citus's other cause of that message).
        sqlx::Error::Database(db) => {
            db.code().is_some_and(|code| {
                code.starts_with("08")
                    || code.starts_with("57P")
                    || code == "53300"
                    || code == "25006"
            }) || db
                .message()
                .starts_with("failure on connection marked as essential")
                || (db.code().is_none_or(|code| code == "XX000")
                    && db.message().starts_with("could not commit transaction"))
        }
        _ => false,
    }
}

impl From<StoreError> for AppError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::NameTaken => AppError::NameTaken(String::new()),
            StoreError::UnknownPlayer => AppError::UnknownPlayer,
            StoreError::Corrupt(detail) => AppError::Corrupt(detail),
            // Only a write decided without the row lock can meet a moved row, and the
            // command lanes decide such a batch again under the locks.
            StoreError::Moved => AppError::Corrupt(StoreError::Moved.to_string()),
            StoreError::Database(error) => AppError::Database(error),
        }
    }
}

pub type Result<T, E = AppError> = std::result::Result<T, E>;
