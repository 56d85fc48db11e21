//! Live updates: committed records fanned out to streams, at a cost per move that does not
//! grow with the number of watchers or replicas. This module owns the [`Hub`] (one per
//! replica), its settings and errors.
//!
//! - A commit made on this replica is delivered to this replica's streams from memory: the
//!   write path tells the hub what it committed (its [`Herald`]), and the hub publishes the
//!   new state and events on the match's channel, without reading them back.
//! - The other replicas learn of it from a hint: the hub queues the position in its
//!   `hints` outbox, which sends everything queued as one `NOTIFY` at most every few
//!   milliseconds, outside every write transaction. A replica that hears a hint for a
//!   match it follows marks it; one reader per kind reads every marked topic in one
//!   coalesced read and publishes the batches.
//!
//! The hub is made of:
//!
//! - `hints`: the outgoing hints and the parsing of incoming ones;
//! - `listener`: the one listening connection, for hints and token revocations;
//! - `registry`: the followed topics, each with a bounded broadcast channel, the marks of
//!   topics to read, and the stream slots (per replica, and per player across replicas with
//!   leases);
//! - `feed`: the one stream mechanism, generic over a [`Topic`]: catch-up, then live
//!   batches de-duplicated by sequence number; the readers; the sweep;
//! - `presence`: whether the players of followed matches are online, told to their
//!   streams as it changes;
//! - `topics`: the two kinds of topic, a match's events ([`Matches`]) and a player's
//!   notices ([`Players`]).
//!
//! Each subscriber makes the items for its own viewer (a match's events redacted for them).
//!
//! Nothing is lost when hints are: a stream starts with a catch-up read from the database
//! (after `Last-Event-ID`) and then de-duplicates live records by sequence number; when the
//! listening connection drops, the hub reconnects and re-reads every followed position; and
//! a periodic sweep compares every followed position with the database, so even a hint lost
//! some other way (a replica killed between its commit and its hint) is delivered within
//! one sweep interval.
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
use tokio::sync::{Notify, watch};
use uuid::Uuid;

use crate::accounts::Revocations;
use crate::app::{Committed, Herald};
use crate::store::StoreError;
use feed::Topics;
use hints::{Hint, Outbox};
use registry::StreamSlots;

mod feed;
mod hints;
mod listener;
mod presence;
mod registry;
mod topics;

pub use feed::{Batch, Feed, Topic};
pub use hints::{HINT_INTERVAL, HINTS_APPLICATION_NAME, HINTS_CHANNEL};
pub use listener::LISTENER_APPLICATION_NAME;
pub use topics::{MatchContext, MatchItem, Matches, Players};

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
    /// Announced token revocations, to re-read or acknowledge.
    tokens: listener::TokenWork,
    /// What this replica has yet to tell the others.
    outbox: Arc<Outbox>,
    /// Wakes the sweep early: after (re)connecting the listener, or after a failed read.
    sweep_now: Notify,
    listening: AtomicBool,
    closed: watch::Sender<bool>,
    /// The presence of the players whose matches are followed here.
    presence: Arc<presence::PresenceWatch>,
    /// Told of every match position hinted by another replica.
    position_watchers: std::sync::RwLock<Vec<PositionWatcher>>,
}

/// Called with `(match_id, last_seq)` for every change to a match hinted by another replica.
pub type PositionWatcher = Arc<dyn Fn(Uuid, i64) + Send + Sync>;

impl Hub {
    /// Has `watcher` told of every match position other replicas hint from now on (best
    /// effort: a hint sent while the listener is reconnecting is missed).
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
        let replica = Uuid::now_v7();
        let outbox = Arc::new(Outbox::new(replica));
        let presence = Arc::new(presence::PresenceWatch::new());
        let changed: registry::PresenceChanged = {
            let (outbox, presence) = (outbox.clone(), presence.clone());
            Arc::new(move |player| {
                outbox.push(Hint::Presence(player));
                presence.hinted(player);
            })
        };
        let inner = Arc::new(Inner {
            pool: pool.clone(),
            reader: reader.cloned(),
            matches: Arc::new(Topics::new()),
            players: Arc::new(Topics::new()),
            slots: Arc::new(StreamSlots::new(pool.clone(), replica, &settings, changed)),
            settings,
            revocations: Revocations::new(pool.clone()),
            tokens: listener::TokenWork::default(),
            outbox,
            sweep_now: Notify::new(),
            listening: AtomicBool::new(false),
            closed: watch::channel(false).0,
            presence,
            position_watchers: std::sync::RwLock::new(Vec::new()),
        });
        let options = pool.connect_options().as_ref().clone();
        let tasks: [std::pin::Pin<Box<dyn Future<Output = ()> + Send>>; 8] = [
            Box::pin(inner.slots.clone().renew_leases()),
            Box::pin(listener::listen(inner.clone())),
            Box::pin(sweep_loop(inner.clone())),
            Box::pin(feed::read_marked(inner.clone(), inner.matches.clone())),
            Box::pin(feed::read_marked(inner.clone(), inner.players.clone())),
            Box::pin(feed::read_presence(inner.clone())),
            Box::pin(listener::read_tokens(inner.clone())),
            Box::pin({
                let outbox = inner.outbox.clone();
                async move { outbox.send(options).await }
            }),
        ];
        for task in tasks {
            tokio::spawn(until_closed(inner.clone(), task));
        }
        Hub { inner }
    }

    /// What the application tells of each commit made on this replica: its streams get it
    /// from memory, and the other replicas a hint.
    pub fn herald(&self) -> Arc<dyn Herald> {
        Arc::new(HubHerald {
            inner: self.inner.clone(),
        })
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

/// The hub as the application's [`Herald`].
struct HubHerald {
    inner: Arc<Inner>,
}

impl Herald for HubHerald {
    fn committed(&self, committed: Committed) {
        let inner = &self.inner;
        for change in committed.matches {
            inner.outbox.push(Hint::Match(change.id, change.last_seq));
            topics::offer_commit(&inner.matches, change);
        }
        for (player, seq) in committed.notices {
            inner.outbox.push(Hint::Notice(player, seq));
            inner.players.hinted(player, seq);
        }
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

/// The shortest time between two sweeps, however often one is asked for (a flood of
/// notifications shed to the sweep asks all the time).
const SWEEP_MIN_GAP: Duration = Duration::from_millis(250);

async fn sweep_loop(inner: Arc<Inner>) {
    let mut ticks = tokio::time::interval(inner.settings.catch_up_interval);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let asked = tokio::select! {
            _ = ticks.tick() => false,
            () = inner.sweep_now.notified() => true,
        };
        if let Err(error) = sweep(&inner).await {
            tracing::warn!(%error, "live: catch-up sweep failed");
        }
        if asked {
            tokio::time::sleep(SWEEP_MIN_GAP).await;
        }
    }
}

/// Compares every followed position with the database and fetches what was missed.
async fn sweep(inner: &Arc<Inner>) -> Result<(), StoreError> {
    feed::sweep(inner, &inner.matches).await?;
    feed::sweep(inner, &inner.players).await?;
    feed::sweep_presence(inner).await
}
