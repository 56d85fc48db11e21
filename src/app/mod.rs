//! The application layer: every use case of the service, between `http` (which only
//! translates) and `store` (which only speaks SQL). It owns the database pool, asks the
//! engine for every decision, and changes matches only through the one write path
//! ([`write`]); concurrent player commands are group-committed ([`commands`]).

mod accounts;
mod bots;
mod cache;
mod clocks;
mod commands;
mod committed;
mod error;
pub mod export;
mod idempotency;
pub mod ladder;
mod matches;
pub mod matchmaking;
mod players;
pub mod reads;
mod resources;
mod write;

use std::sync::Arc;

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

pub use accounts::{Me, REFRESH_KEYS_KEPT, STREAM_TICKET_SECONDS, Session, StreamTicket};
pub use bots::{BotBatch, BotProfile, BotWindow};
pub use clocks::{Expired, OUTAGE_THRESHOLD};
pub use committed::{Committed, CommittedMatch, Herald};
pub use error::{AppError, Result};
pub use idempotency::{Answer, Idempotency};
pub use resources::{
    EventResource, MatchResource, MatchState, NewMatch, OwnClock, PlayerProfile, Presence,
    PresenceChange, PresenceKind, ShotAnswer, ms_left, viewer_of,
};

use crate::auth::Tokens;
use crate::engine::Clock;

/// Most events one page of a feed returns.
pub const EVENTS_PAGE: i64 = 500;

/// The clocks and limits an operator sets.
#[derive(Clone, Copy, Debug)]
pub struct GameSettings {
    pub standard_clock: Clock,
    pub join_seconds: u32,
    /// Most unjoined matches one player may hold, so nobody can fill the open list.
    pub open_matches_per_player: u32,
}

/// Lanes that commit command batches concurrently: while one commits, the next gathers.
pub const COMMIT_LANES: usize = 2;

/// The random draws the engine takes as an argument (who fires first, commitment salts):
/// the only randomness of the use cases.
fn draw() -> crate::engine::Draw {
    crate::engine::Draw {
        coin: rand::random(),
        salt: rand::random(),
    }
}

/// The service's use cases over one database. Cheap to clone: every clone shares the pool,
/// the settings and the command lanes, which stop when the last clone is dropped.
#[derive(Clone)]
pub struct App {
    inner: Arc<Inner>,
}

struct Inner {
    pool: PgPool,
    /// Reads that may lag (docs/scaling.md): a standby's pool, or `pool` itself.
    reader: Option<PgPool>,
    /// Plain PostgreSQL or Citus: asked of `pool`'s database once, shared with the lanes.
    kind: crate::store::citus::KindCell,
    settings: GameSettings,
    tokens: Tokens,
    committer: commands::Committer,
    /// Who is told of each commit (the live hub), shared with the lanes.
    heralds: committed::Heralds,
    /// The one budget for password hashing (log-in, registration, password changes).
    hashing: crate::accounts::password::HashBudget,
}

impl App {
    /// Builds the application over `pool` and starts its command lanes (needs a Tokio
    /// runtime).
    pub fn new(pool: PgPool, settings: GameSettings, tokens: Tokens) -> Self {
        Self::with_reader(pool, None, settings, tokens)
    }

    /// Like [`App::new`], with the reads that may lag served by `reader` (a streaming
    /// standby) when given, and by the primary whenever the standby is unavailable.
    pub fn with_reader(
        pool: PgPool,
        reader: Option<PgPool>,
        settings: GameSettings,
        tokens: Tokens,
    ) -> Self {
        Self::with_kept_states(pool, reader, settings, tokens, cache::DEFAULT_BYTES)
    }

    /// Like [`App::with_reader`], keeping the states of matches in play in up to
    /// `kept_bytes` of memory (`STATKI_KEPT_STATES_MIB`).
    pub fn with_kept_states(
        pool: PgPool,
        reader: Option<PgPool>,
        settings: GameSettings,
        tokens: Tokens,
        kept_bytes: u64,
    ) -> Self {
        let kind = crate::store::citus::KindCell::default();
        let heralds = committed::Heralds::default();
        let committer = commands::Committer::start(
            pool.clone(),
            kind.clone(),
            heralds.clone(),
            COMMIT_LANES,
            kept_bytes,
        );
        App {
            inner: Arc::new(Inner {
                pool,
                reader,
                kind,
                settings,
                tokens,
                committer,
                heralds,
                hashing: Default::default(),
            }),
        }
    }

    /// The same application with its own password-hashing budget (call right after
    /// [`App::new`], before it is cloned; later it changes nothing).
    pub fn with_hash_budget(mut self, budget: crate::accounts::password::HashBudget) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.hashing = budget;
        }
        self
    }

    pub(crate) fn hashing(&self) -> &crate::accounts::password::HashBudget {
        &self.inner.hashing
    }

    /// What to call with every match position announced by any replica: a replica that
    /// kept an older state of that match forgets it, so its next command there takes the
    /// lock at once instead of failing on the stale state first.
    pub fn position_watcher(&self) -> Arc<dyn Fn(Uuid, i64) + Send + Sync> {
        // The kept states alone, not the lanes' queue: the hub must not keep the lanes alive.
        let cache = self.inner.committer.cache();
        Arc::new(move |id, last_seq| cache.moved_to(&id, last_seq))
    }

    /// Has `herald` told of everything this application commits from now on, right after
    /// each commit (see [`Herald`]).
    pub fn tell_commits_to(&self, herald: Arc<dyn Herald>) {
        self.inner.heralds.set(herald);
    }

    /// Begins a transaction of the write path: what it writes is told once it commits.
    async fn begin(&self) -> Result<committed::Tx> {
        Ok(committed::Tx::new(
            self.pool().begin().await?,
            self.inner.heralds.clone(),
        ))
    }

    pub fn settings(&self) -> GameSettings {
        self.inner.settings
    }

    pub fn tokens(&self) -> &Tokens {
        &self.inner.tokens
    }

    /// Most database connections this replica opens.
    pub fn connections(&self) -> usize {
        self.pool().options().get_max_connections() as usize
    }

    fn pool(&self) -> &PgPool {
        &self.inner.pool
    }

    /// Runs a read that may lag on the standby's pool when there is one, and on the
    /// primary when there is none or the standby is unavailable (it is down, or a failover
    /// is moving it).
    async fn read_lagging<T, F, Fut>(&self, read: F) -> Result<T>
    where
        F: Fn(PgPool) -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        if let Some(reader) = &self.inner.reader {
            match read(reader.clone()).await {
                Err(error) if error.code() == "unavailable" => {
                    metrics::counter!("statki_read_fallbacks_total").increment(1);
                    tracing::warn!(%error, "standby unavailable; reading from the primary");
                }
                answer => return answer,
            }
        }
        read(self.inner.pool.clone()).await
    }

    /// What the database is (plain PostgreSQL or Citus), asked through `conn` the first
    /// time only.
    async fn kind(&self, conn: &mut sqlx::PgConnection) -> Result<crate::store::citus::Kind> {
        Ok(self.inner.kind.get(conn).await?)
    }

    /// The database's time: the only clock.
    async fn now(&self) -> Result<DateTime<Utc>> {
        Ok(crate::store::now(self.pool()).await?)
    }

    /// Whether the database answers (readiness).
    pub async fn ready(&self) -> Result<()> {
        Ok(crate::store::ping(self.pool()).await?)
    }

    /// How many matches are in each phase (for metrics).
    pub async fn matches_by_phase(&self) -> Result<Vec<(String, i64)>> {
        let kind = self.inner.kind.get(self.pool()).await?;
        Ok(crate::store::matches::count_by_phase(self.pool(), kind).await?)
    }
}
