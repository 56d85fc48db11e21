//! The one feed mechanism, generic over a [`Topic`]: a stream's catch-up from the database,
//! then live batches de-duplicated by sequence number (a gap or a slow consumer closes the
//! stream); the reader that reads every marked topic of a kind in one coalesced batch for
//! every subscriber of this replica; and the sweep that compares every followed position
//! with the database.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use futures::Stream;
use sqlx::PgPool;
use uuid::Uuid;

use super::presence::{Watched, next_change};
use super::registry::{Registry, StreamPermit, Subscription};
use super::{Inner, LiveError};
use crate::store::{self, StoreError};

/// Ids per position query of the sweep.
const SWEEP_CHUNK: usize = 5_000;
/// Most topics one read of the reader covers.
const READ_CHUNK: usize = 500;
/// The reader's pause after a failed read (the sweep re-marks what it missed).
const READ_RETRY: std::time::Duration = std::time::Duration::from_millis(200);
/// The reader's pause after a read that found nothing new: only a forged (or stale) hint
/// marks a topic that has not moved on, so a flood of them costs at most one read per
/// pause, while genuine hints, whose reads always find records, are read at once.
pub(super) const READ_IDLE_PAUSE: std::time::Duration = std::time::Duration::from_millis(50);

/// A kind of numbered log a stream follows (a match's events, a player's notices): how
/// it is announced, read and shown to one viewer. Implemented once per kind, in `topics`.
pub trait Topic: Sized + Send + Sync + 'static {
    /// What each record is shown with, read once per batch (the match's state and names).
    type Context: Send + Sync + 'static;
    /// One numbered entry of the log.
    type Record: Send + Sync + 'static;
    /// Who is looking, as the items are made for them.
    type Viewer;
    /// What a stream hands out for one record, for one viewer.
    type Item: Send + 'static;

    /// The kind's name in logs.
    const NAME: &'static str;

    /// Where topic `id` stands now, with its context and no records; `None` when there is
    /// no such topic.
    fn read_head(
        pool: &PgPool,
        id: Uuid,
    ) -> impl Future<Output = Result<Option<Batch<Self>>, StoreError>> + Send;

    /// One page of records after `after`, in order.
    fn read_records(
        pool: &PgPool,
        id: Uuid,
        after: i64,
    ) -> impl Future<Output = Result<Vec<Self::Record>, StoreError>> + Send;

    /// What the reader publishes for each of `topics` (`(id, delivered)`) that moved on
    /// beyond its position: the records after it (a page at most), with what they are shown
    /// with. One read for all of them, whatever their number.
    fn read_batches(
        pool: &PgPool,
        topics: &[(Uuid, i64)],
    ) -> impl Future<Output = Result<Vec<(Uuid, Batch<Self>)>, StoreError>> + Send;

    /// The positions of `ids` (absent: nothing was ever written), for the sweep.
    fn read_positions(
        pool: &PgPool,
        ids: &[Uuid],
    ) -> impl Future<Output = Result<Vec<(Uuid, i64)>, StoreError>> + Send;

    /// The record's number in its topic: 1, 2, 3… with no gaps.
    fn seq(record: &Self::Record) -> i64;

    /// Who `caller` is to this topic, worked out once per batch.
    fn viewer(context: &Self::Context, caller: Uuid) -> Self::Viewer;

    /// The record as `viewer` may see it.
    fn item(context: &Self::Context, viewer: &Self::Viewer, record: &Self::Record) -> Self::Item;

    /// What a stream opened with no resume point starts with instead of the backlog: the
    /// whole of topic `id` as `caller` sees it at `head.end`. `None`: the topic has no
    /// such state, and the stream starts from its first record.
    fn snapshot(
        pool: &PgPool,
        id: Uuid,
        head: &Batch<Self>,
        caller: Uuid,
    ) -> impl Future<Output = Result<Option<Self::Item>, StoreError>> + Send;

    /// Whether nothing will follow the records up to `end` (a match that is over).
    fn finished(context: &Self::Context) -> bool;

    /// The players whose presence a stream of this topic tells (a match's seated players);
    /// none by default.
    fn participants(_context: &Self::Context) -> Vec<Uuid> {
        Vec::new()
    }

    /// The item telling that `player` came online or went away.
    fn presence_item(_player: Uuid, _online: bool) -> Option<Self::Item> {
        None
    }

    /// Completes a snapshot with who of [`Topic::participants`] is `online`.
    fn with_presence(_item: &mut Self::Item, _online: &[Uuid]) {}
}

/// Records of one topic as read once for all its subscribers on this replica.
pub struct Batch<T: Topic> {
    /// What every subscriber shows the records with, as of `end`.
    pub context: T::Context,
    /// The topic's position when read: no record is after it (a page may end before it).
    pub end: i64,
    /// Records after the previous batch, in order.
    pub records: Vec<T::Record>,
}

/// The followed topics of kind `T` on this replica.
pub(super) type Topics<T> = Registry<Batch<T>>;

/// An open stream: what is ready to send, then what the hub publishes.
pub struct Feed<T: Topic> {
    pending: VecDeque<T::Item>,
    live: Option<Following<T>>,
    _permit: StreamPermit,
}

struct Following<T: Topic> {
    subscription: Subscription<Batch<T>>,
    caller: Uuid,
    last_sent: i64,
    /// The presence of the topic's participants, told as it changes.
    presence: Vec<Watched>,
    inner: Arc<Inner>,
}

/// Opens `caller`'s stream of topic `id` after `after`: the backlog read from the
/// database, then live batches unless the topic is finished. With no `after`, the topic's
/// snapshot (if it has one) stands for the backlog. `None` when it is finished and
/// `caller` has every record.
pub(super) async fn open<T: Topic>(
    inner: &Arc<Inner>,
    topics: &Arc<Topics<T>>,
    id: Uuid,
    caller: Uuid,
    after: Option<i64>,
) -> Result<Option<Feed<T>>, LiveError> {
    if *inner.closed.borrow() {
        return Err(LiveError::Closed);
    }
    let permit = inner.slots.admit(caller).await?;
    // Subscribing before reading is what makes the hand-over gapless: whatever commits
    // after the read below is published on this receiver.
    let subscription = Subscription::new(topics, id, inner.settings.channel_capacity);
    let head = Arc::new(
        T::read_head(&inner.pool, id)
            .await?
            .ok_or(LiveError::NotFound)?,
    );
    topics.seed(id, head.end, head.clone());
    let viewer = T::viewer(&head.context, caller);
    let mut pending = VecDeque::new();
    let participants = T::participants(&head.context);
    let online = if participants.is_empty() {
        Vec::new()
    } else {
        store::streams::online(&inner.pool, &participants, inner.settings.lease_lifetime).await?
    };
    let mut snapshot = match after {
        None => T::snapshot(&inner.pool, id, &head, caller).await?,
        Some(_) => None,
    };
    if let Some(snapshot) = &mut snapshot {
        T::with_presence(snapshot, &online);
    }
    let after = match snapshot {
        Some(state) => {
            pending.push_back(state);
            head.end
        }
        None => after.unwrap_or(0),
    };
    let mut cursor = after;
    while cursor < head.end {
        // Catch-up may come from the standby; the head above came from the primary, so a
        // standby that has not replayed up to it (an empty page before the head) or does
        // not answer is passed over for the primary (docs/scaling.md).
        let from_standby = match &inner.reader {
            Some(reader) => match T::read_records(reader, id, cursor).await {
                Ok(page) if !page.is_empty() => Some(page),
                Ok(_) => None,
                Err(error) => {
                    tracing::warn!(%error, "live: standby unavailable for catch-up");
                    None
                }
            },
            None => None,
        };
        let page = match from_standby {
            Some(page) => page,
            None => {
                if inner.reader.is_some() {
                    metrics::counter!("statki_read_fallbacks_total").increment(1);
                }
                T::read_records(&inner.pool, id, cursor).await?
            }
        };
        let Some(last) = page.last() else { break };
        cursor = T::seq(last);
        pending.extend(
            page.iter()
                .filter(|record| T::seq(record) <= head.end)
                .map(|record| T::item(&head.context, &viewer, record)),
        );
    }
    let live = if T::finished(&head.context) {
        if pending.is_empty() {
            return Ok(None);
        }
        None
    } else {
        Some(Following {
            subscription,
            caller,
            last_sent: after.max(head.end),
            presence: participants
                .iter()
                .map(|player| inner.presence.watch(*player, online.contains(player)))
                .collect(),
            inner: inner.clone(),
        })
    };
    Ok(Some(Feed {
        pending,
        live,
        _permit: permit,
    }))
}

impl<T: Topic> Feed<T> {
    /// Items ready to send before waiting for live ones.
    pub fn backlog(&self) -> usize {
        self.pending.len()
    }

    /// The stream: backlog first, then live items; it ends when the topic is finished,
    /// when the subscriber fell too far behind, or when the hub closes.
    pub fn into_stream(self) -> impl Stream<Item = T::Item> + Send + 'static {
        futures::stream::unfold(self, |mut feed| async move {
            loop {
                if let Some(item) = feed.pending.pop_front() {
                    return Some((item, feed));
                }
                // An idle stream keeps no buffer: `VecDeque::new` allocates nothing.
                if feed.pending.capacity() > 0 {
                    feed.pending = VecDeque::new();
                }
                let live = feed.live.as_mut()?;
                if !live.next(&mut feed.pending).await {
                    feed.live = None;
                }
            }
        })
    }
}

impl<T: Topic> Following<T> {
    /// Adds the next batch's unsent records to `out`. Returns whether the stream goes on.
    async fn next(&mut self, out: &mut VecDeque<T::Item>) -> bool {
        // Both futures are cancel-safe: what the branch not taken would have had is kept.
        let batch = tokio::select! {
            batch = self.subscription.next() => batch,
            (player, online) = next_change(&mut self.presence) => {
                out.extend(T::presence_item(player, online));
                return true;
            }
        };
        let Some(batch) = batch else {
            return false;
        };
        if batch
            .records
            .first()
            .is_some_and(|first| T::seq(first) > self.last_sent.saturating_add(1))
        {
            // Cannot happen while the hand-over is gapless; ending the stream makes the
            // client resume from the database rather than skip a record.
            tracing::warn!(topic = T::NAME, id = %self.subscription.id(), "gap in a stream; closing it");
            return false;
        }
        // Boxed: a newcomer is rare, and its read's state would otherwise be part of every
        // idle stream's future.
        Box::pin(self.watch_newcomers(&batch.context, out)).await;
        let viewer = T::viewer(&batch.context, self.caller);
        for record in &batch.records {
            let seq = T::seq(record);
            if seq > self.last_sent {
                out.push_back(T::item(&batch.context, &viewer, record));
                self.last_sent = seq;
            }
        }
        !(T::finished(&batch.context) && self.last_sent >= batch.end)
    }
}

impl<T: Topic> Following<T> {
    /// Watches the participants who arrived since the stream opened (the player who
    /// joined), telling their presence at once.
    async fn watch_newcomers(&mut self, context: &T::Context, out: &mut VecDeque<T::Item>) {
        let newcomers: Vec<Uuid> = T::participants(context)
            .into_iter()
            .filter(|player| !self.presence.iter().any(|w| w.player() == *player))
            .collect();
        if newcomers.is_empty() {
            return;
        }
        let lifetime = self.inner.settings.lease_lifetime;
        // Unread, they are watched from the next batch on (or told by the view's next read).
        let Ok(online) = store::streams::online(&self.inner.pool, &newcomers, lifetime).await
        else {
            return;
        };
        for player in newcomers {
            let here = online.contains(&player);
            self.presence.push(self.inner.presence.watch(player, here));
            out.extend(T::presence_item(player, here));
        }
    }
}

/// Reads the marked topics of one kind, a coalesced batch at a time, and publishes what
/// moved on: one read however many topics were marked, and however often each was.
pub(super) async fn read_marked<T: Topic>(inner: Arc<Inner>, topics: Arc<Topics<T>>) {
    loop {
        if !topics.any_marked() {
            topics.marked().await;
        }
        let taken = topics.take_marked(READ_CHUNK);
        if taken.is_empty() {
            continue;
        }
        let started = Instant::now();
        match T::read_batches(&inner.pool, &taken).await {
            Ok(batches) => {
                let mut published = 0;
                for (id, batch) in batches {
                    let Some(delivered) = batch.records.last().map(T::seq) else {
                        continue;
                    };
                    let end = batch.end;
                    topics.publish(id, batch, delivered, end);
                    published += 1;
                }
                if published == 0 {
                    metrics::counter!("statki_live_idle_reads_total", "topic" => T::NAME)
                        .increment(1);
                    tokio::time::sleep(READ_IDLE_PAUSE).await;
                }
            }
            Err(error) => {
                tracing::warn!(%error, topic = T::NAME, topics = taken.len(), "live: reading new records failed");
                inner.sweep_now.notify_one();
                tokio::time::sleep(READ_RETRY).await;
            }
        }
        metrics::histogram!("statki_live_fetch_seconds").record(started.elapsed().as_secs_f64());
    }
}

/// Compares every followed position of one kind with the database and marks what was
/// missed.
pub(super) async fn sweep<T: Topic>(
    inner: &Arc<Inner>,
    topics: &Arc<Topics<T>>,
) -> Result<(), StoreError> {
    for chunk in topics.followed().chunks(SWEEP_CHUNK) {
        for (id, seq) in T::read_positions(&inner.pool, chunk).await? {
            topics.hinted(id, seq);
        }
    }
    Ok(())
}

/// Reads the presence of every player followed here again (leases run out without a word
/// when a replica dies, and a notification may be lost).
pub(super) async fn sweep_presence(inner: &Arc<Inner>) -> Result<(), StoreError> {
    for chunk in inner.presence.followed().chunks(SWEEP_CHUNK) {
        let online: std::collections::HashSet<Uuid> =
            store::streams::online(&inner.pool, chunk, inner.settings.lease_lifetime)
                .await?
                .into_iter()
                .collect();
        for player in chunk {
            inner.presence.set(*player, online.contains(player));
        }
    }
    Ok(())
}

/// Reads the presence of the players marked by hints, a coalesced batch at a time.
pub(super) async fn read_presence(inner: Arc<Inner>) {
    loop {
        let marked = inner.presence.take_marked(SWEEP_CHUNK).await;
        let online: Result<std::collections::HashSet<Uuid>, _> =
            store::streams::online(&inner.pool, &marked, inner.settings.lease_lifetime)
                .await
                .map(|online| online.into_iter().collect());
        match online {
            Ok(online) => {
                let mut changed = false;
                for player in &marked {
                    changed |= inner.presence.set(*player, online.contains(player));
                }
                if !changed {
                    metrics::counter!("statki_live_idle_reads_total", "topic" => "presence")
                        .increment(1);
                    tokio::time::sleep(READ_IDLE_PAUSE).await;
                }
            }
            Err(error) => {
                tracing::warn!(%error, players = marked.len(), "live: reading players' presence failed");
                inner.sweep_now.notify_one();
                tokio::time::sleep(READ_RETRY).await;
            }
        }
    }
}
