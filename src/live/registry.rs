//! What a replica follows: a bounded broadcast channel per followed topic (a match, a
//! player) with where its fan-out stands, subscriptions that let go of their topic with
//! the last subscriber, and stream slots (counted here per replica, and per player across
//! replicas with leases in the database, renewed while the replica lives).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use sqlx::PgPool;
use tokio::sync::{Notify, broadcast};
use uuid::Uuid;

use super::{HubSettings, LiveError};
use crate::store;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves the maps consistent, so a panic elsewhere is no reason
    // to stop serving streams.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The followed topics of one kind, each with the channel its batches `B` go out on, and
/// the topics marked to be read (by a hint, the sweep or a stream that found it behind).
pub(super) struct Registry<B> {
    topics: Mutex<Topics<B>>,
    /// Wakes the kind's reader when a topic is marked.
    wake: Notify,
}

struct Topics<B> {
    followed: HashMap<Uuid, Followed<B>>,
    /// Marked topics in the order they were marked; each is in it at most once, so it never
    /// holds more than the followed topics.
    marked: VecDeque<Uuid>,
}

struct Followed<B> {
    tx: broadcast::Sender<Arc<B>>,
    /// Highest sequence number published; `None` until a subscriber has read where the
    /// topic stands, so nothing is read from an unknown position.
    delivered: Option<i64>,
    /// The last batch published (or the head a subscriber read): what a batch made from a
    /// local commit takes its context from.
    last: Option<Arc<B>>,
    /// Waiting in `marked` to be read.
    marked: bool,
    /// A commit was heard of before the position was known: read once it is.
    heard_early: bool,
}

/// What became of a batch offered from a local commit.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Offered {
    /// Nobody here follows the topic.
    NotFollowed,
    /// Published to the topic's subscribers.
    Published,
    /// It could not be published as it is (it does not follow what was delivered, or lacks
    /// its context): the topic is marked to be read instead.
    Marked,
    /// Already delivered.
    Stale,
}

impl<B> Registry<B> {
    pub(super) fn new() -> Self {
        Self {
            topics: Mutex::new(Topics {
                followed: HashMap::new(),
                marked: VecDeque::new(),
            }),
            wake: Notify::new(),
        }
    }

    fn subscribe(&self, id: Uuid, capacity: usize) -> broadcast::Receiver<Arc<B>> {
        let mut topics = lock(&self.topics);
        let topic = topics.followed.entry(id).or_insert_with(|| Followed {
            tx: broadcast::channel(capacity).0,
            delivered: None,
            last: None,
            marked: false,
            heard_early: false,
        });
        topic.tx.subscribe()
    }

    /// Marks `id` to be read (if followed and not marked yet) and wakes the reader.
    fn mark(&self, topics: &mut Topics<B>, id: Uuid) -> bool {
        let Some(topic) = topics.followed.get_mut(&id) else {
            return false;
        };
        if topic.delivered.is_none() || topic.marked {
            return topic.marked;
        }
        topic.marked = true;
        topics.marked.push_back(id);
        self.wake.notify_one();
        true
    }

    /// A subscriber read the topic's head `head`, at position `at`, after subscribing.
    pub(super) fn seed(&self, id: Uuid, at: i64, head: Arc<B>) {
        let mut topics = lock(&self.topics);
        let Some(topic) = topics.followed.get_mut(&id) else {
            return;
        };
        if topic.last.is_none() {
            topic.last = Some(head);
        }
        if topic.delivered.is_none() {
            topic.delivered = Some(at);
            if std::mem::take(&mut topic.heard_early) {
                // It may have committed after the head was read.
                self.mark(&mut topics, id);
            }
        }
    }

    /// A hint (or the sweep) says `seq` is committed: marks the topic to be read if that is
    /// beyond what was delivered. Costs a map lookup for a topic nobody here follows.
    pub(super) fn hinted(&self, id: Uuid, seq: i64) -> bool {
        let mut topics = lock(&self.topics);
        let Some(topic) = topics.followed.get_mut(&id) else {
            return false;
        };
        match topic.delivered {
            None => {
                topic.heard_early = true;
                false
            }
            Some(delivered) => seq > delivered && self.mark(&mut topics, id),
        }
    }

    /// Offers the batch of a commit made here, from `after` to `end`: published when it
    /// follows what was delivered and `make` can build it from the last batch.
    pub(super) fn offer(
        &self,
        id: Uuid,
        after: i64,
        end: i64,
        make: impl FnOnce(Option<&B>) -> Option<B>,
    ) -> Offered {
        let mut topics = lock(&self.topics);
        let Some(topic) = topics.followed.get_mut(&id) else {
            return Offered::NotFollowed;
        };
        let Some(delivered) = topic.delivered else {
            // Its first subscriber is reading the head, which may or may not include this
            // commit: the topic is read once the head is known.
            topic.heard_early = true;
            return Offered::Marked;
        };
        if end <= delivered {
            return Offered::Stale;
        }
        if delivered == after
            && let Some(batch) = make(topic.last.as_deref())
        {
            let batch = Arc::new(batch);
            topic.delivered = Some(end);
            topic.last = Some(batch.clone());
            // An error only means every receiver is gone; the topic is released with them.
            let _ = topic.tx.send(batch);
            return Offered::Published;
        }
        self.mark(&mut topics, id);
        Offered::Marked
    }

    /// Takes up to `max` marked topics with the position to read each from.
    pub(super) fn take_marked(&self, max: usize) -> Vec<(Uuid, i64)> {
        let mut topics = lock(&self.topics);
        let mut taken = Vec::new();
        while taken.len() < max {
            let Some(id) = topics.marked.pop_front() else {
                break;
            };
            if let Some(topic) = topics.followed.get_mut(&id) {
                topic.marked = false;
                if let Some(delivered) = topic.delivered {
                    taken.push((id, delivered));
                }
            }
        }
        taken
    }

    /// Whether topics are marked.
    pub(super) fn any_marked(&self) -> bool {
        !lock(&self.topics).marked.is_empty()
    }

    /// Waits until a topic may be marked (returns at once if one was since the last call).
    pub(super) async fn marked(&self) {
        self.wake.notified().await;
    }

    /// Publishes a batch read from the database holding the records up to `delivered`,
    /// unless that much went out meanwhile. `end` is the topic's position when read: while
    /// it is beyond `delivered` (a long backlog read a page at a time) the topic stays
    /// marked for the rest.
    pub(super) fn publish(&self, id: Uuid, batch: B, delivered: i64, end: i64) {
        let mut topics = lock(&self.topics);
        let Some(topic) = topics.followed.get_mut(&id) else {
            return;
        };
        if topic.delivered.is_some_and(|d| d >= delivered) {
            return;
        }
        let batch = Arc::new(batch);
        topic.delivered = Some(delivered);
        topic.last = Some(batch.clone());
        let _ = topic.tx.send(batch);
        if end > delivered {
            self.mark(&mut topics, id);
        }
    }

    /// Forgets the topic once its last subscriber is gone. Called by that subscriber
    /// while its receiver still exists, hence `<= 1`.
    fn release(&self, id: Uuid) {
        let mut topics = lock(&self.topics);
        if topics
            .followed
            .get(&id)
            .is_some_and(|topic| topic.tx.receiver_count() <= 1)
        {
            topics.followed.remove(&id);
            // A marked id stays in the queue; taking it finds the topic gone.
        }
    }

    pub(super) fn followed(&self) -> Vec<Uuid> {
        lock(&self.topics).followed.keys().copied().collect()
    }

    pub(super) fn len(&self) -> usize {
        lock(&self.topics).followed.len()
    }

    /// Drops every sender, which ends every stream.
    pub(super) fn close(&self) {
        let mut topics = lock(&self.topics);
        topics.followed.clear();
        topics.marked.clear();
    }
}

/// Ids marked to be read again (players whose presence or tokens changed), each at most
/// once however often it is marked; a reader takes them in batches.
#[derive(Default)]
pub(super) struct Marks {
    marked: Mutex<std::collections::HashSet<Uuid>>,
    wake: Notify,
}

impl Marks {
    pub(super) fn mark(&self, id: Uuid) {
        if lock(&self.marked).insert(id) {
            self.wake.notify_one();
        }
    }

    /// Waits for marked ids and takes up to `max` of them.
    pub(super) async fn take(&self, max: usize) -> Vec<Uuid> {
        loop {
            {
                let mut marked = lock(&self.marked);
                if !marked.is_empty() {
                    let taken: Vec<Uuid> = marked.iter().take(max).copied().collect();
                    for id in &taken {
                        marked.remove(id);
                    }
                    return taken;
                }
            }
            self.wake.notified().await;
        }
    }
}

/// A receiver on a topic that releases the topic with the last subscriber.
pub(super) struct Subscription<B> {
    rx: broadcast::Receiver<Arc<B>>,
    id: Uuid,
    registry: Arc<Registry<B>>,
}

impl<B> Subscription<B> {
    /// Follows topic `id`, which it registers if nobody here followed it yet.
    pub(super) fn new(registry: &Arc<Registry<B>>, id: Uuid, capacity: usize) -> Self {
        Self {
            rx: registry.subscribe(id, capacity),
            id,
            registry: registry.clone(),
        }
    }

    pub(super) fn id(&self) -> Uuid {
        self.id
    }

    /// The next batch; `None` means the stream must end (the hub closed, or this
    /// subscriber fell more than the channel's capacity behind).
    pub(super) async fn next(&mut self) -> Option<Arc<B>> {
        match self.rx.recv().await {
            Ok(batch) => Some(batch),
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                metrics::counter!("statki_live_slow_consumers_total").increment(1);
                tracing::debug!(missed, "dropping a stream that fell behind");
                None
            }
            Err(broadcast::error::RecvError::Closed) => None,
        }
    }
}

impl<B> Drop for Subscription<B> {
    fn drop(&mut self) {
        self.registry.release(self.id);
    }
}

/// The stream slots of a replica: how many streams it serves, per player and in all, and
/// its leases in the database that count each player's streams over every replica.
pub(super) struct StreamSlots {
    pool: PgPool,
    /// This replica's id on its stream leases.
    replica: Uuid,
    /// Told of a player whose leases changed here (taken or given back).
    changed: PresenceChanged,
    streams_per_player: usize,
    streams_per_replica: usize,
    lease_lifetime: Duration,
    open: Mutex<OpenStreams>,
}

#[derive(Default)]
struct OpenStreams {
    total: usize,
    per_player: HashMap<Uuid, usize>,
}

/// What is told of a player whose leases changed.
pub(super) type PresenceChanged = Arc<dyn Fn(Uuid) + Send + Sync>;

impl StreamSlots {
    pub(super) fn new(
        pool: PgPool,
        replica: Uuid,
        settings: &HubSettings,
        changed: PresenceChanged,
    ) -> Self {
        Self {
            pool,
            replica,
            changed,
            streams_per_player: settings.streams_per_player,
            streams_per_replica: settings.streams_per_replica,
            lease_lifetime: settings.lease_lifetime,
            open: Mutex::new(OpenStreams::default()),
        }
    }

    /// Open streams on this replica.
    pub(super) fn open(&self) -> usize {
        lock(&self.open).total
    }

    /// `player`'s open streams on this replica.
    pub(super) fn streams_of(&self, player: Uuid) -> usize {
        lock(&self.open)
            .per_player
            .get(&player)
            .copied()
            .unwrap_or(0)
    }

    /// Admits a stream on this replica, then against the player's cap over every replica.
    pub(super) async fn admit(self: &Arc<Self>, player: Uuid) -> Result<StreamPermit, LiveError> {
        let mut permit = self.admit_here(player)?;
        let lease = Uuid::now_v7();
        let taken = store::streams::lease(
            &self.pool,
            lease,
            player,
            self.replica,
            self.streams_per_player,
            self.lease_lifetime,
        )
        .await?;
        if !taken {
            metrics::counter!("statki_live_refused_total", "limit" => "player").increment(1);
            return Err(LiveError::TooManyForPlayer(self.streams_per_player));
        }
        permit.lease = Some(lease);
        (self.changed)(player);
        Ok(permit)
    }

    fn admit_here(self: &Arc<Self>, player: Uuid) -> Result<StreamPermit, LiveError> {
        let mut open = lock(&self.open);
        if open.total >= self.streams_per_replica {
            metrics::counter!("statki_live_refused_total", "limit" => "replica").increment(1);
            return Err(LiveError::TooManyForReplica(self.streams_per_replica));
        }
        let count = open.per_player.entry(player).or_insert(0);
        if *count >= self.streams_per_player {
            metrics::counter!("statki_live_refused_total", "limit" => "player").increment(1);
            return Err(LiveError::TooManyForPlayer(self.streams_per_player));
        }
        *count += 1;
        open.total += 1;
        metrics::gauge!("statki_live_streams").set(open.total as f64);
        Ok(StreamPermit {
            slots: self.clone(),
            player,
            lease: None,
        })
    }

    /// Keeps this replica's stream leases alive, and clears those of dead replicas.
    pub(super) async fn renew_leases(self: Arc<Self>) {
        let lifetime = self.lease_lifetime;
        let mut every = tokio::time::interval(lifetime / 3);
        loop {
            every.tick().await;
            if let Err(error) = store::streams::renew(&self.pool, self.replica, lifetime).await {
                tracing::warn!(%error, "renewing stream leases failed");
            }
        }
    }
}

/// A counted stream slot, given back when the stream is dropped.
pub(super) struct StreamPermit {
    slots: Arc<StreamSlots>,
    player: Uuid,
    /// The stream's lease in the database, once taken.
    lease: Option<Uuid>,
}

impl Drop for StreamPermit {
    fn drop(&mut self) {
        if let Some(lease) = self.lease.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let slots = self.slots.clone();
            let player = self.player;
            runtime.spawn(async move {
                match store::streams::release(&slots.pool, lease).await {
                    Ok(()) => (slots.changed)(player),
                    // It runs out by itself within the lease lifetime.
                    Err(error) => tracing::debug!(%error, "releasing a stream lease failed"),
                }
            });
        }
        let mut open = lock(&self.slots.open);
        open.total = open.total.saturating_sub(1);
        if let Some(count) = open.per_player.get_mut(&self.player) {
            *count -= 1;
            if *count == 0 {
                open.per_player.remove(&self.player);
            }
        }
        metrics::gauge!("statki_live_streams").set(open.total as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_topic_is_read_only_once_its_position_is_known_and_behind() {
        let registry: Registry<u32> = Registry::new();
        let id = Uuid::now_v7();
        let _rx = registry.subscribe(id, 4);
        assert!(
            !registry.hinted(id, 3),
            "position unknown: nothing to read from"
        );
        registry.seed(id, 1, Arc::new(0));
        assert!(!registry.hinted(id, 1), "nothing beyond what was delivered");
        assert!(registry.hinted(id, 3), "behind the hint: marked");
        assert!(registry.hinted(id, 4), "marked once");
        assert_eq!(registry.take_marked(10), vec![(id, 1)]);
        assert!(registry.take_marked(10).is_empty());
        registry.publish(id, 3, 3, 5);
        assert_eq!(
            registry.take_marked(10),
            vec![(id, 3)],
            "read on to the end"
        );
        registry.publish(id, 5, 5, 5);
        registry.publish(id, 4, 4, 4);
        assert!(
            !registry.hinted(id, 5),
            "a late, older batch never moves back"
        );
        assert!(
            !registry.hinted(Uuid::now_v7(), 9),
            "a topic nobody follows costs a lookup"
        );
    }

    #[test]
    fn a_local_commit_is_published_only_where_it_follows_what_was_delivered() {
        let registry: Registry<u32> = Registry::new();
        let id = Uuid::now_v7();
        let mut rx = registry.subscribe(id, 4);
        registry.seed(id, 2, Arc::new(20));
        let made = |last: Option<&u32>| last.map(|last| last + 1);
        assert_eq!(registry.offer(id, 2, 3, made), Offered::Published);
        assert_eq!(*rx.try_recv().unwrap(), 21, "made from the last batch");
        assert_eq!(registry.offer(id, 2, 3, made), Offered::Stale);
        assert_eq!(
            registry.offer(id, 4, 5, made),
            Offered::Marked,
            "a gap is read, never published"
        );
        assert_eq!(registry.take_marked(10), vec![(id, 3)]);
        assert_eq!(registry.offer(id, 3, 4, |_| None), Offered::Marked);
        assert_eq!(
            registry.offer(Uuid::now_v7(), 0, 1, made),
            Offered::NotFollowed
        );
    }

    #[test]
    fn the_last_subscriber_releases_the_topic() {
        let registry: Registry<()> = Registry::new();
        let id = Uuid::now_v7();
        let first = registry.subscribe(id, 4);
        let second = registry.subscribe(id, 4);
        registry.release(id);
        drop(first);
        assert_eq!(registry.len(), 1);
        registry.release(id);
        drop(second);
        assert_eq!(registry.len(), 0);
    }
}
