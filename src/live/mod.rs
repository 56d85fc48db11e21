//! Live updates: one `LISTEN` connection per replica fans committed records out to
//! streams. This module owns the [`Hub`] (one per replica), its settings and errors.
//!
//! Every commit announces `match_id:seq` on [`crate::app::EVENTS_CHANNEL`] and every
//! player notice `player_id:seq` on [`crate::store::notices::CHANNEL`]. The hub is made of:
//!
//! - `listener`: the one listening connection, for both channels and for token
//!   revocations;
//! - `registry`: the followed topics, each with a bounded broadcast channel, and the
//!   stream slots (per replica, and per player across replicas with leases);
//! - `feed`: the one stream mechanism, generic over a [`Topic`]: catch-up, then live
//!   batches de-duplicated by sequence number; the fan-out read; the sweep;
//! - `presence`: whether the players of followed matches are online, told to their
//!   streams as it changes;
//! - `topics`: the two kinds of topic, a match's events ([`Matches`]) and a player's
//!   notices ([`Players`]).
//!
//! A notification for a topic nobody here follows costs a map lookup; for one that is
//! followed, the hub reads the new records (and, for a match, its state) *once* (not once
//! per subscriber) and publishes them on that topic's channel. Each subscriber makes the
//! items for its own viewer (a match's events redacted for them).
//!
//! Nothing is lost when notifications are: a stream starts with a catch-up read from the
//! database (after `Last-Event-ID`) and then de-duplicates live records by sequence
//! number; when the listening connection drops, the hub reconnects and re-reads every
//! followed position; and a periodic sweep compares every followed position with the
//! database, so even a notification lost some other way is delivered within one sweep
//! interval.
//!
//! The same connection listens for token revocations ([`crate::accounts::TOKENS_CHANNEL`]),
//! keeps this replica's [`Revocations`] cache current and acknowledges each one applied
//! ([`crate::accounts::APPLIED_CHANNEL`]); the cache is emptied (and bypassed while the
//! connection is down) whenever notifications may have been missed.
//!
//! The fan-out never waits for a subscriber: a subscriber that falls more than a channel's
//! capacity behind is dropped (its client resumes with `Last-Event-ID`). The hub takes no
//! locks in PostgreSQL; it only reads. Streams yield typed items (an `EventResource`, a
//! notice); `http::stream` writes them as server-sent events.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sqlx::PgPool;
use tokio::sync::{Notify, Semaphore, watch};
use uuid::Uuid;

use crate::accounts::Revocations;
use crate::store::StoreError;
use feed::Topics;
use registry::StreamSlots;

mod feed;
mod listener;
mod presence;
mod registry;
mod topics;

pub use feed::{Batch, Feed, Topic};
pub use listener::LISTENER_APPLICATION_NAME;
pub use topics::{MatchContext, MatchItem, Matches, Players};

/// Concurrent database reads the fan-out may run, so a burst of notifications cannot take
/// the whole pool away from commands.
const FETCH_CONCURRENCY: usize = 4;

/// Limits and timings of a replica's hub.
#[derive(Clone, Debug)]
pub struct HubSettings {
    /// Most open streams (match streams and the own feed) one player may hold, across
    /// every replica (counted with leases in the database).
    pub streams_per_player: usize,
    /// Most open streams on this replica.
    pub streams_per_replica: usize,
    /// Period of the keep-alive comment on an idle stream.
    pub keep_alive: Duration,
    /// Period of the sweep that re-reads every followed position from the database.
    pub catch_up_interval: Duration,
    /// Batches a subscriber may fall behind before it is dropped as a slow consumer.
    pub channel_capacity: usize,
    /// How long a stream lease lasts unrenewed: after a replica dies, its streams stop
    /// counting against their players' cap within this time.
    pub lease_lifetime: Duration,
}

impl Default for HubSettings {
    fn default() -> Self {
        Self {
            streams_per_player: 8,
            streams_per_replica: 20_000,
            keep_alive: Duration::from_secs(15),
            catch_up_interval: Duration::from_secs(5),
            channel_capacity: 16,
            lease_lifetime: Duration::from_secs(60),
        }
    }
}

/// Why a stream was not opened.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("this player already has {0} open streams; close one first")]
    TooManyForPlayer(usize),
    #[error("this replica already serves {0} streams; retry later or elsewhere")]
    TooManyForReplica(usize),
    #[error("no match with that id")]
    NotFound,
    #[error("the service is shutting down")]
    Closed,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A replica's fan-out hub. Cheap to clone; every clone is the same hub.
#[derive(Clone)]
pub struct Hub {
    inner: Arc<Inner>,
}

struct Inner {
    pool: PgPool,
    /// Stream catch-up reads: a standby's pool when there is one (see `feed::open`).
    reader: Option<PgPool>,
    settings: HubSettings,
    matches: Arc<Topics<Matches>>,
    players: Arc<Topics<Players>>,
    slots: Arc<StreamSlots>,
    /// Token validity per player, kept current by revocation notifications.
    revocations: Revocations,
    fetch_slots: Semaphore,
    /// Wakes the sweep early: after (re)connecting the listener, or after a failed read.
    sweep_now: Notify,
    listening: AtomicBool,
    closed: watch::Sender<bool>,
    /// The presence of the players whose matches are followed here.
    presence: Arc<presence::PresenceWatch>,
    /// Told of every match position announced by any replica.
    position_watchers: std::sync::RwLock<Vec<PositionWatcher>>,
}

/// Called with `(match_id, last_seq)` for every committed change to a match, on any replica.
pub type PositionWatcher = Arc<dyn Fn(Uuid, i64) + Send + Sync>;

impl Hub {
    /// Has `watcher` told of every match position announced from now on (best effort: a
    /// position announced while the listener is reconnecting is missed).
    pub fn watch_positions(&self, watcher: PositionWatcher) {
        if let Ok(mut watchers) = self.inner.position_watchers.write() {
            watchers.push(watcher);
        }
    }

    /// Starts the hub of this replica: its listening connection (a separate connection
    /// with the options of `pool`, named [`LISTENER_APPLICATION_NAME`]) and its sweep.
    /// Both stop when `pool` is closed or [`Hub::close`] is called.
    pub fn start(pool: &PgPool, settings: HubSettings) -> Hub {
        Self::start_with_reader(pool, None, settings)
    }

    /// Like [`Hub::start`], with stream catch-up read from `reader` (a streaming standby)
    /// when given, falling back to `pool` for whatever the standby has not replayed yet.
    pub fn start_with_reader(pool: &PgPool, reader: Option<&PgPool>, settings: HubSettings) -> Hub {
        let inner = Arc::new(Inner {
            pool: pool.clone(),
            reader: reader.cloned(),
            matches: Arc::new(Topics::new()),
            players: Arc::new(Topics::new()),
            slots: Arc::new(StreamSlots::new(pool.clone(), &settings)),
            settings,
            revocations: Revocations::new(pool.clone()),
            fetch_slots: Semaphore::new(FETCH_CONCURRENCY),
            sweep_now: Notify::new(),
            listening: AtomicBool::new(false),
            closed: watch::channel(false).0,
            presence: Arc::new(presence::PresenceWatch::new()),
            position_watchers: std::sync::RwLock::new(Vec::new()),
        });
        tokio::spawn(until_closed(
            inner.clone(),
            inner.slots.clone().renew_leases(),
        ));
        tokio::spawn(until_closed(inner.clone(), listener::listen(inner.clone())));
        tokio::spawn(until_closed(inner.clone(), sweep_loop(inner.clone())));
        Hub { inner }
    }

    pub fn settings(&self) -> &HubSettings {
        &self.inner.settings
    }

    /// This replica's cache of token validity.
    pub fn revocations(&self) -> &Revocations {
        &self.inner.revocations
    }

    /// Whether the listening connection is up (streams still get everything while it is
    /// not, only later).
    pub fn is_listening(&self) -> bool {
        self.inner.listening.load(Ordering::Relaxed)
    }

    /// Which of `players` are online now: holding an open stream on any replica (a bot
    /// always is).
    pub async fn online(&self, players: &[Uuid]) -> Result<Vec<Uuid>, StoreError> {
        crate::store::streams::online(
            &self.inner.pool,
            players,
            self.inner.settings.lease_lifetime,
        )
        .await
    }

    /// Open streams on this replica.
    pub fn open_streams(&self) -> usize {
        self.inner.slots.open()
    }

    /// Matches and players followed on this replica.
    pub fn followed(&self) -> (usize, usize) {
        (self.inner.matches.len(), self.inner.players.len())
    }

    /// Ends every stream and stops the listener and the sweep; new streams are refused.
    /// Call before a graceful shutdown, which otherwise waits for streams that never end.
    pub fn close(&self) {
        self.inner.closed.send_replace(true);
        self.inner.matches.close();
        self.inner.players.close();
    }

    /// The events of match `id` after `after` as `caller` may see them (with no `after`:
    /// the caller's view, then the events after it), then live events until the match is
    /// over. `None` when the match is over and `caller` has them all.
    pub async fn match_feed(
        &self,
        id: Uuid,
        caller: Uuid,
        after: Option<i64>,
    ) -> Result<Option<Feed<Matches>>, LiveError> {
        feed::open(&self.inner, &self.inner.matches, id, caller, after).await
    }

    /// `caller`'s own notices after `after`, then live ones until the client leaves.
    pub async fn player_feed(&self, caller: Uuid, after: i64) -> Result<Feed<Players>, LiveError> {
        feed::open(
            &self.inner,
            &self.inner.players,
            caller,
            caller,
            Some(after),
        )
        .await?
        // A player's feed is never finished, so it always opens.
        .ok_or(LiveError::NotFound)
    }
}

/// Runs `task` until the hub is closed or its pool is.
async fn until_closed(inner: Arc<Inner>, task: impl Future<Output = ()>) {
    let mut closed = inner.closed.subscribe();
    let pool_closed = inner.pool.close_event();
    tokio::select! {
        () = task => {}
        _ = closed.wait_for(|closed| *closed) => {}
        () = pool_closed => {}
    }
}

async fn sweep_loop(inner: Arc<Inner>) {
    let mut ticks = tokio::time::interval(inner.settings.catch_up_interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            () = inner.sweep_now.notified() => {}
        }
        if let Err(error) = sweep(&inner).await {
            tracing::warn!(%error, "live: catch-up sweep failed");
        }
    }
}

/// Compares every followed position with the database and fetches what was missed.
async fn sweep(inner: &Arc<Inner>) -> Result<(), StoreError> {
    feed::sweep(inner, &inner.matches).await?;
    feed::sweep(inner, &inner.players).await?;
    feed::sweep_presence(inner).await
}
