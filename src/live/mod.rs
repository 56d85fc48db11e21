//! Live updates: one `LISTEN` connection per replica fans committed events out to streams.
//!
//! Every commit announces `match_id:seq` on [`crate::app::EVENTS_CHANNEL`] (a batch
//! commit announces all its matches in one notification, comma-separated) and every
//! player notice `player_id:seq` on [`crate::store::notices::CHANNEL`]. A [`Hub`] (one per replica) listens on both
//! with a single connection. A notification for a match nobody here follows costs a map
//! lookup; for one that is followed, the hub reads the new events and the match state
//! *once* (not once per subscriber) and publishes them on that match's bounded broadcast
//! channel. Each subscriber redacts the batch for its own viewer.
//!
//! Nothing is lost when notifications are: a stream starts with a catch-up read from the
//! database (after `Last-Event-ID`) and then de-duplicates live events by sequence number;
//! when the listening connection drops, the hub reconnects and re-reads every followed
//! position; and a periodic sweep compares every followed position with the database, so
//! even a notification lost some other way is delivered within one sweep interval.
//!
//! The fan-out never waits for a subscriber: a subscriber that falls more than a channel's
//! capacity behind is dropped (its client resumes with `Last-Event-ID`). The hub takes no
//! locks in PostgreSQL; it only reads.
//!
//! Both kinds of topic (a match's events, a player's notices; see `topics`) share one
//! registry, fetch, sweep and feed. Streams yield typed items; `http` writes the wire
//! format.

mod feed;
mod listener;
mod registry;
mod topics;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlx::PgPool;
use tokio::sync::{Notify, Semaphore, watch};
use uuid::Uuid;

pub use feed::Feed;

use crate::app::EventResource;
use crate::store::StoreError;
use crate::store::notices::Notice;
use registry::{Registry, lock};
use topics::{Kind, MatchBatch, MatchEvents, PlayerNotices};

/// `application_name` of the listening connection, so operators can find (or kill) it.
pub const LISTENER_APPLICATION_NAME: &str = "statki-live";

/// Concurrent database reads the fan-out may run, so a burst of notifications cannot take
/// the whole pool away from commands.
const FETCH_CONCURRENCY: usize = 4;
/// Ids per position query of the sweep.
const SWEEP_CHUNK: usize = 5_000;

/// Limits and timings of a replica's hub.
#[derive(Clone, Debug)]
pub struct HubSettings {
    /// Most open streams (match streams and the own feed) one player may hold here.
    pub streams_per_player: usize,
    /// Most open streams on this replica.
    pub streams_per_replica: usize,
    /// Period of the keep-alive comment on an idle stream.
    pub keep_alive: Duration,
    /// Period of the sweep that re-reads every followed position from the database.
    pub catch_up_interval: Duration,
    /// Batches a subscriber may fall behind before it is dropped as a slow consumer.
    pub channel_capacity: usize,
}

impl Default for HubSettings {
    fn default() -> Self {
        Self {
            streams_per_player: 8,
            streams_per_replica: 20_000,
            keep_alive: Duration::from_secs(15),
            catch_up_interval: Duration::from_secs(5),
            channel_capacity: 16,
        }
    }
}

/// Why a stream was not opened.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("this player already has {0} open streams on this replica; close one first")]
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
    settings: HubSettings,
    matches: Registry<MatchBatch>,
    players: Registry<Vec<Notice>>,
    streams: Mutex<Streams>,
    fetch_slots: Semaphore,
    /// Wakes the sweep early: after (re)connecting the listener, or after a failed read.
    sweep_now: Notify,
    listening: AtomicBool,
    closed: watch::Sender<bool>,
}

#[derive(Default)]
struct Streams {
    total: usize,
    per_player: HashMap<Uuid, usize>,
}

/// A counted stream slot, given back when the stream is dropped.
struct StreamPermit {
    inner: Arc<Inner>,
    player: Uuid,
}

impl Drop for StreamPermit {
    fn drop(&mut self) {
        let mut streams = lock(&self.inner.streams);
        streams.total = streams.total.saturating_sub(1);
        if let Some(count) = streams.per_player.get_mut(&self.player) {
            *count -= 1;
            if *count == 0 {
                streams.per_player.remove(&self.player);
            }
        }
        metrics::gauge!("statki_live_streams").set(streams.total as f64);
    }
}

impl Hub {
    /// Starts the hub of this replica: its listening connection (a separate connection
    /// with the options of `pool`, named [`LISTENER_APPLICATION_NAME`]) and its sweep.
    /// Both stop when `pool` is closed or [`Hub::close`] is called.
    pub fn start(pool: &PgPool, settings: HubSettings) -> Hub {
        let inner = Arc::new(Inner {
            pool: pool.clone(),
            settings,
            matches: Registry::new(),
            players: Registry::new(),
            streams: Mutex::new(Streams::default()),
            fetch_slots: Semaphore::new(FETCH_CONCURRENCY),
            sweep_now: Notify::new(),
            listening: AtomicBool::new(false),
            closed: watch::channel(false).0,
        });
        tokio::spawn(until_closed(inner.clone(), listener::listen(inner.clone())));
        tokio::spawn(until_closed(inner.clone(), sweep_loop(inner.clone())));
        Hub { inner }
    }

    pub fn settings(&self) -> &HubSettings {
        &self.inner.settings
    }

    /// Whether the listening connection is up (streams still get everything while it is
    /// not, only later).
    pub fn is_listening(&self) -> bool {
        self.inner.listening.load(Ordering::Relaxed)
    }

    /// Open streams on this replica.
    pub fn open_streams(&self) -> usize {
        lock(&self.inner.streams).total
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

    fn admit(&self, player: Uuid) -> Result<StreamPermit, LiveError> {
        if *self.inner.closed.borrow() {
            return Err(LiveError::Closed);
        }
        let settings = &self.inner.settings;
        let mut streams = lock(&self.inner.streams);
        if streams.total >= settings.streams_per_replica {
            metrics::counter!("statki_live_refused_total", "limit" => "replica").increment(1);
            return Err(LiveError::TooManyForReplica(settings.streams_per_replica));
        }
        let count = streams.per_player.entry(player).or_insert(0);
        if *count >= settings.streams_per_player {
            metrics::counter!("statki_live_refused_total", "limit" => "player").increment(1);
            return Err(LiveError::TooManyForPlayer(settings.streams_per_player));
        }
        *count += 1;
        streams.total += 1;
        metrics::gauge!("statki_live_streams").set(streams.total as f64);
        Ok(StreamPermit {
            inner: self.inner.clone(),
            player,
        })
    }

    /// The events of match `id` after `after` as `caller` may see them, then live events
    /// until the match is over. `None` when the match is over and `caller` has them all.
    pub async fn match_feed(
        &self,
        id: Uuid,
        caller: Uuid,
        after: i64,
    ) -> Result<Option<Feed<EventResource>>, LiveError> {
        self.open::<MatchEvents>(id, caller, after).await
    }

    /// `caller`'s own notices after `after`, then live ones until the client leaves.
    pub async fn player_feed(&self, caller: Uuid, after: i64) -> Result<Feed<Notice>, LiveError> {
        // A player's feed is never over, so it always opens.
        self.open::<PlayerNotices>(caller, caller, after)
            .await?
            .ok_or(LiveError::NotFound)
    }

    async fn open<K: Kind>(
        &self,
        id: Uuid,
        caller: Uuid,
        after: i64,
    ) -> Result<Option<Feed<K::Item>>, LiveError> {
        let permit = self.admit(caller)?;
        let inner = &self.inner;
        // Subscribing before reading is what makes the hand-over gapless: whatever commits
        // after the read below is published on this receiver.
        let subscription = feed::Subscription::<K>::new(inner.clone(), id);
        let catch_up = K::catch_up(&inner.pool, id, caller, after).await?;
        if K::registry(inner).seed(id, catch_up.position) {
            tokio::spawn(fetch::<K>(inner.clone(), id));
        }
        let live = if catch_up.over {
            if catch_up.items.is_empty() {
                return Ok(None);
            }
            None
        } else {
            Some(feed::Live {
                subscription,
                caller,
                last_sent: after.max(catch_up.position),
            })
        };
        Ok(Some(feed::open(catch_up.items, live, permit)))
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

/// `seq` of topic `id` is committed: starts a fetch if one is due.
fn announce<K: Kind>(inner: &Arc<Inner>, id: Uuid, seq: i64) {
    if K::registry(inner).announce(id, seq) {
        tokio::spawn(fetch::<K>(inner.clone(), id));
    }
}

/// Reads a topic's new entries once and publishes them; goes on while more were
/// announced meanwhile.
async fn fetch<K: Kind>(inner: Arc<Inner>, id: Uuid) {
    let Ok(_slot) = inner.fetch_slots.acquire().await else {
        return;
    };
    let registry = K::registry(&inner);
    loop {
        let Some(after) = registry.position(id) else {
            return;
        };
        let started = Instant::now();
        let progressed = match K::read(&inner.pool, id, after).await {
            Ok(Some(read)) => {
                let progressed = read.delivered > after;
                registry.publish(id, read.batch, read.delivered, read.seen);
                progressed
            }
            Ok(None) => false,
            Err(error) => {
                tracing::warn!(%error, topic = K::NAME, %id, "live: reading new entries failed");
                inner.sweep_now.notify_one();
                false
            }
        };
        metrics::histogram!("statki_live_fetch_seconds").record(started.elapsed().as_secs_f64());
        if !registry.fetch_done(id, progressed) {
            return;
        }
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
    sweep_kind::<MatchEvents>(inner).await?;
    sweep_kind::<PlayerNotices>(inner).await
}

async fn sweep_kind<K: Kind>(inner: &Arc<Inner>) -> Result<(), StoreError> {
    let followed = K::registry(inner).followed();
    for chunk in followed.chunks(SWEEP_CHUNK) {
        for (id, seq) in K::positions(&inner.pool, chunk).await? {
            announce::<K>(inner, id, seq);
        }
    }
    Ok(())
}
