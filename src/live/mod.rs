//! Live updates: one `LISTEN` connection per replica fans committed events out to streams.
//!
//! Every commit announces `match_id:seq` on [`EVENTS_CHANNEL`] and every player notice
//! `player_id:seq` on [`notices::CHANNEL`]. A [`Hub`] (one per replica) listens on both
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
//! The same connection listens for token revocations ([`TOKENS_CHANNEL`]), keeps this
//! replica's [`Revocations`] cache current and acknowledges each one applied
//! ([`APPLIED_CHANNEL`]); the cache is emptied (and bypassed while the connection is down)
//! whenever notifications may have been missed.
//!
//! The fan-out never waits for a subscriber: a subscriber that falls more than a channel's
//! capacity behind is dropped (its client resumes with `Last-Event-ID`). The hub takes no
//! locks in PostgreSQL; it only reads.

use std::borrow::Cow;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::Stream;
use serde_json::Value;
use sqlx::PgPool;
use tokio::sync::{Notify, Semaphore, watch};
use uuid::Uuid;

use crate::accounts::Revocations;
use crate::app::{EVENTS_PAGE, EventResource, viewer_of};
use crate::engine::Match;
use crate::store::notices::{self, Notice};
use crate::store::{self, StoreError, StoredEvent};
use registry::{Registry, StreamPermit, StreamSlots, Subscription};

mod listener;
mod registry;

pub use listener::LISTENER_APPLICATION_NAME;

/// the whole pool away from commands.
const FETCH_CONCURRENCY: usize = 4;
/// Ids per position query of the sweep.
const SWEEP_CHUNK: usize = 5_000;

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

/// One server-sent event: its `id`, `event` name and JSON `data`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveItem {
    pub id: i64,
    pub event: Cow<'static, str>,
    pub data: String,
}

/// New events of a match as read once for all its subscribers on this replica.
#[derive(Debug)]
pub struct MatchBatch {
    /// The match after `last_seq`: what every subscriber redacts with.
    pub state: Match,
    pub last_seq: i64,
    /// Events after the previous batch, in order, none after `last_seq`.
    pub events: Vec<StoredEvent>,
    /// The names of the match's players, by id.
    pub names: BTreeMap<Uuid, String>,
}

/// New notices of a player.
#[derive(Debug)]
pub struct NoticeBatch {
    pub notices: Vec<Notice>,
}

/// A replica's fan-out hub. Cheap to clone; every clone is the same hub.
#[derive(Clone)]
pub struct Hub {
    inner: Arc<Inner>,
}

struct Inner {
    pool: PgPool,
    settings: HubSettings,
    matches: Arc<Registry<MatchBatch>>,
    players: Arc<Registry<NoticeBatch>>,
    slots: Arc<StreamSlots>,
    /// Token validity per player, kept current by revocation notifications.
    revocations: Revocations,
    fetch_slots: Semaphore,
    /// Wakes the sweep early: after (re)connecting the listener, or after a failed read.
    sweep_now: Notify,
    listening: AtomicBool,
    closed: watch::Sender<bool>,
}

impl Hub {
    /// Starts the hub of this replica: its listening connection (a separate connection
    /// with the options of `pool`, named [`LISTENER_APPLICATION_NAME`]) and its sweep.
    /// Both stop when `pool` is closed or [`Hub::close`] is called.
    pub fn start(pool: &PgPool, settings: HubSettings) -> Hub {
        let inner = Arc::new(Inner {
            pool: pool.clone(),
            matches: Arc::new(Registry::new()),
            players: Arc::new(Registry::new()),
            slots: Arc::new(StreamSlots::new(pool.clone(), &settings)),
            settings,
            revocations: Revocations::new(pool.clone()),
            fetch_slots: Semaphore::new(FETCH_CONCURRENCY),
            sweep_now: Notify::new(),
            listening: AtomicBool::new(false),
            closed: watch::channel(false).0,
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

    /// Admits a stream, unless the hub is closed.
    async fn admit(&self, player: Uuid) -> Result<StreamPermit, LiveError> {
        if *self.inner.closed.borrow() {
            return Err(LiveError::Closed);
        }
        self.inner.slots.admit(player).await
    }

    /// The events of match `id` after `after` as `caller` may see them, then live events
    /// until the match is over. `None` when the match is over and `caller` has them all.
    pub async fn match_feed(
        &self,
        id: Uuid,
        caller: Uuid,
        after: i64,
    ) -> Result<Option<Feed>, LiveError> {
        let permit = self.admit(caller).await?;
        let inner = &self.inner;
        // Subscribing before reading is what makes the hand-over gapless: whatever commits
        // after the read below is published on this receiver.
        let subscription = Subscription::new(&inner.matches, id, inner.settings.channel_capacity);
        let store::listing::NamedRow { row, names } = store::listing::get(&inner.pool, id)
            .await?
            .ok_or(LiveError::NotFound)?;
        if inner.matches.seed(id, row.last_seq) {
            tokio::spawn(fetch_match(inner.clone(), id));
        }
        let viewer = viewer_of(&row.state, caller);
        let mut pending = VecDeque::new();
        let mut cursor = after;
        while cursor < row.last_seq {
            let page = store::events::list(&inner.pool, id, cursor, EVENTS_PAGE).await?;
            let Some(last) = page.last() else { break };
            cursor = last.seq;
            for stored in page.iter().filter(|stored| stored.seq <= row.last_seq) {
                pending.push_back(event_item(
                    stored,
                    row.state.redact(&stored.event, viewer),
                    &names,
                ));
            }
        }
        let live = if row.state.phase.is_over() {
            if pending.is_empty() {
                return Ok(None);
            }
            None
        } else {
            Some(Live::Match(MatchLive {
                subscription,
                caller,
                last_sent: after.max(row.last_seq),
            }))
        };
        Ok(Some(Feed {
            pending,
            live,
            _permit: permit,
        }))
    }

    /// `caller`'s own notices after `after`, then live ones until the client leaves.
    pub async fn player_feed(&self, caller: Uuid, after: i64) -> Result<Feed, LiveError> {
        let permit = self.admit(caller).await?;
        let inner = &self.inner;
        let subscription =
            Subscription::new(&inner.players, caller, inner.settings.channel_capacity);
        let position = notice_positions(&inner.pool, &[caller])
            .await?
            .first()
            .map_or(0, |(_, seq)| *seq);
        if inner.players.seed(caller, position) {
            tokio::spawn(fetch_notices(inner.clone(), caller));
        }
        let mut pending = VecDeque::new();
        let mut cursor = after;
        while cursor < position {
            let page = notices::list(&inner.pool, caller, cursor, EVENTS_PAGE).await?;
            let Some(last) = page.last() else { break };
            cursor = last.seq;
            pending.extend(
                page.iter()
                    .filter(|notice| notice.seq <= position)
                    .map(notice_item),
            );
        }
        Ok(Feed {
            pending,
            live: Some(Live::Player(PlayerLive {
                subscription,
                last_sent: after.max(position),
            })),
            _permit: permit,
        })
    }
}

/// An open stream: what is ready to send, then what the hub publishes.
pub struct Feed {
    pending: VecDeque<LiveItem>,
    live: Option<Live>,
    _permit: StreamPermit,
}

enum Live {
    Match(MatchLive),
    Player(PlayerLive),
}

struct MatchLive {
    subscription: Subscription<MatchBatch>,
    caller: Uuid,
    last_sent: i64,
}

struct PlayerLive {
    subscription: Subscription<NoticeBatch>,
    last_sent: i64,
}

impl Feed {
    /// Events ready to send before waiting for live ones.
    pub fn backlog(&self) -> usize {
        self.pending.len()
    }

    /// The stream: backlog first, then live items; it ends when the match is over, when
    /// the subscriber fell too far behind, or when the hub closes.
    pub fn into_stream(self) -> impl Stream<Item = LiveItem> + Send + 'static {
        futures::stream::unfold(self, |mut feed| async move {
            loop {
                if let Some(item) = feed.pending.pop_front() {
                    return Some((item, feed));
                }
                // An idle stream should not keep the catch-up's buffer.
                if feed.pending.capacity() > 8 {
                    feed.pending = VecDeque::new();
                }
                let live = feed.live.as_mut()?;
                let more = match live {
                    Live::Match(live) => live.next(&mut feed.pending).await,
                    Live::Player(live) => live.next(&mut feed.pending).await,
                };
                if !more {
                    feed.live = None;
                }
            }
        })
    }
}

impl MatchLive {
    /// Adds the next batch's events to `out`. Returns whether the stream goes on.
    async fn next(&mut self, out: &mut VecDeque<LiveItem>) -> bool {
        let Some(batch) = self.subscription.next().await else {
            return false;
        };
        if batch
            .events
            .first()
            .is_some_and(|first| first.seq > self.last_sent.saturating_add(1))
        {
            // Cannot happen while the hand-over is gapless; ending the stream makes the
            // client resume from the database rather than skip an event.
            tracing::warn!(match_id = %self.subscription.id(), "gap in a match stream; closing it");
            return false;
        }
        let viewer = viewer_of(&batch.state, self.caller);
        for stored in &batch.events {
            if stored.seq > self.last_sent {
                out.push_back(event_item(
                    stored,
                    batch.state.redact(&stored.event, viewer),
                    &batch.names,
                ));
                self.last_sent = stored.seq;
            }
        }
        !(batch.state.phase.is_over() && self.last_sent >= batch.last_seq)
    }
}

impl PlayerLive {
    async fn next(&mut self, out: &mut VecDeque<LiveItem>) -> bool {
        let Some(batch) = self.subscription.next().await else {
            return false;
        };
        if batch
            .notices
            .first()
            .is_some_and(|first| first.seq > self.last_sent.saturating_add(1))
        {
            tracing::warn!(player = %self.subscription.id(), "gap in a player stream; closing it");
            return false;
        }
        for notice in &batch.notices {
            if notice.seq > self.last_sent {
                out.push_back(notice_item(notice));
                self.last_sent = notice.seq;
            }
        }
        true
    }
}

fn event_item(
    stored: &StoredEvent,
    event: crate::engine::Event,
    names: &BTreeMap<Uuid, String>,
) -> LiveItem {
    let kind = event.kind();
    let resource = EventResource::new(stored, event, names.clone());
    LiveItem {
        id: stored.seq,
        event: Cow::Borrowed(kind),
        data: serde_json::to_string(&resource).unwrap_or_else(|_| "{}".to_owned()),
    }
}

/// A notice as its stream carries it: `seq`, `at`, `kind` and the payload's fields.
pub fn notice_json(notice: &Notice) -> Value {
    let mut object = serde_json::Map::new();
    object.insert("seq".into(), notice.seq.into());
    // The same form as every other timestamp the API sends (serde's RFC 3339, `Z`).
    object.insert(
        "at".into(),
        serde_json::to_value(notice.at).unwrap_or(Value::Null),
    );
    object.insert("kind".into(), Value::String(notice.kind.clone()));
    match &notice.payload {
        Value::Object(fields) => {
            for (key, value) in fields {
                object.entry(key.clone()).or_insert_with(|| value.clone());
            }
        }
        Value::Null => {}
        other => {
            object.insert("payload".into(), other.clone());
        }
    }
    Value::Object(object)
}

fn notice_item(notice: &Notice) -> LiveItem {
    LiveItem {
        id: notice.seq,
        event: Cow::Owned(notice.kind.clone()),
        data: notice_json(notice).to_string(),
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

/// Reads a match's new events and state once and publishes them; goes on while more
/// were announced meanwhile.
async fn fetch_match(inner: Arc<Inner>, id: Uuid) {
    let Ok(_slot) = inner.fetch_slots.acquire().await else {
        return;
    };
    loop {
        let Some(after) = inner.matches.position(id) else {
            return;
        };
        let started = Instant::now();
        let progressed = match read_match(&inner.pool, id, after).await {
            Ok(Some(batch)) => {
                let (delivered, seen) = (
                    batch.events.last().map_or(after, |event| event.seq),
                    batch.last_seq,
                );
                let progressed = delivered > after;
                inner.matches.publish(id, batch, delivered, seen);
                progressed
            }
            Ok(None) => false,
            Err(error) => {
                tracing::warn!(%error, match_id = %id, "live: reading new events failed");
                inner.sweep_now.notify_one();
                false
            }
        };
        metrics::histogram!("statki_live_fetch_seconds").record(started.elapsed().as_secs_f64());
        if !inner.matches.fetch_done(id, progressed) {
            return;
        }
    }
}

async fn read_match(pool: &PgPool, id: Uuid, after: i64) -> Result<Option<MatchBatch>, StoreError> {
    // The row first: events read after it may run ahead of it, and are cut at its
    // `last_seq`, so the state each subscriber redacts with is never older than the
    // events it redacts.
    let Some(store::listing::NamedRow { row, names }) = store::listing::get(pool, id).await? else {
        return Ok(None);
    };
    if row.last_seq <= after {
        return Ok(None);
    }
    let mut events = store::events::list(pool, id, after, EVENTS_PAGE).await?;
    events.retain(|event| event.seq <= row.last_seq);
    Ok(Some(MatchBatch {
        state: row.state,
        last_seq: row.last_seq,
        events,
        names,
    }))
}

async fn fetch_notices(inner: Arc<Inner>, player: Uuid) {
    let Ok(_slot) = inner.fetch_slots.acquire().await else {
        return;
    };
    loop {
        let Some(after) = inner.players.position(player) else {
            return;
        };
        let progressed = match notices::list(&inner.pool, player, after, EVENTS_PAGE).await {
            Ok(notices) => match notices.last().map(|notice| notice.seq) {
                Some(last) => {
                    inner
                        .players
                        .publish(player, NoticeBatch { notices }, last, last);
                    true
                }
                None => false,
            },
            Err(error) => {
                tracing::warn!(%error, %player, "live: reading new notices failed");
                inner.sweep_now.notify_one();
                false
            }
        };
        if !inner.players.fetch_done(player, progressed) {
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
    let matches = inner.matches.followed();
    for chunk in matches.chunks(SWEEP_CHUNK) {
        for (id, last_seq) in match_positions(&inner.pool, chunk).await? {
            if inner.matches.announce(id, last_seq) {
                tokio::spawn(fetch_match(inner.clone(), id));
            }
        }
    }
    let players = inner.players.followed();
    for chunk in players.chunks(SWEEP_CHUNK) {
        for (id, seq) in notice_positions(&inner.pool, chunk).await? {
            if inner.players.announce(id, seq) {
                tokio::spawn(fetch_notices(inner.clone(), id));
            }
        }
    }
    Ok(())
}

async fn match_positions(pool: &PgPool, ids: &[Uuid]) -> Result<Vec<(Uuid, i64)>, StoreError> {
    crate::store::matches::positions(pool, ids).await
}

async fn notice_positions(pool: &PgPool, players: &[Uuid]) -> Result<Vec<(Uuid, i64)>, StoreError> {
    crate::store::notices::positions(pool, players).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notice_fields_are_flattened_without_overriding_the_envelope() {
        let notice = Notice {
            seq: 2,
            at: chrono::Utc::now(),
            kind: "challenge".into(),
            payload: serde_json::json!({ "match_id": "m", "seq": 99 }),
        };
        let json = notice_json(&notice);
        assert_eq!(json["seq"], 2);
        assert_eq!(json["kind"], "challenge");
        assert_eq!(json["match_id"], "m");
    }
}
