//! What a replica follows: a bounded broadcast channel per followed topic (a match, a
//! player) with where its fan-out stands, subscriptions that let go of their topic with
//! the last subscriber, and stream slots (counted here per replica, and per player across
//! replicas with leases in the database, renewed while the replica lives).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use sqlx::PgPool;
use tokio::sync::broadcast;
use uuid::Uuid;

use super::{HubSettings, LiveError};
use crate::store;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves the maps consistent, so a panic elsewhere is no reason
    // to stop serving streams.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The followed topics of one kind, each with the channel its batches `B` go out on.
pub(super) struct Registry<B> {
    topics: Mutex<HashMap<Uuid, Followed<B>>>,
}

struct Followed<B> {
    tx: broadcast::Sender<Arc<B>>,
    /// Highest sequence number published; `None` until a subscriber has read where the
    /// topic stands, so nothing is fetched from an unknown position.
    delivered: Option<i64>,
    /// Highest sequence number known to be committed (from NOTIFY or the sweep).
    announced: i64,
    /// A fetch task is running for this topic; at most one does, so batches stay in order.
    fetching: bool,
}

impl<B> Followed<B> {
    /// Marks a fetch as started if one is due.
    fn claim_fetch(&mut self) -> bool {
        let due = self
            .delivered
            .is_some_and(|delivered| self.announced > delivered);
        if due && !self.fetching {
            self.fetching = true;
            return true;
        }
        false
    }
}

impl<B> Registry<B> {
    pub(super) fn new() -> Self {
        Self {
            topics: Mutex::new(HashMap::new()),
        }
    }

    fn subscribe(&self, id: Uuid, capacity: usize) -> broadcast::Receiver<Arc<B>> {
        let mut topics = lock(&self.topics);
        let topic = topics.entry(id).or_insert_with(|| Followed {
            tx: broadcast::channel(capacity).0,
            delivered: None,
            announced: 0,
            fetching: false,
        });
        topic.tx.subscribe()
    }

    /// A subscriber read the topic's position `at` after subscribing. Returns whether a
    /// fetch should start.
    pub(super) fn seed(&self, id: Uuid, at: i64) -> bool {
        let mut topics = lock(&self.topics);
        let Some(topic) = topics.get_mut(&id) else {
            return false;
        };
        if topic.delivered.is_none() {
            topic.delivered = Some(at);
        }
        topic.claim_fetch()
    }

    /// `seq` is committed. Returns whether a fetch should start.
    pub(super) fn announce(&self, id: Uuid, seq: i64) -> bool {
        let mut topics = lock(&self.topics);
        let Some(topic) = topics.get_mut(&id) else {
            return false;
        };
        topic.announced = topic.announced.max(seq);
        topic.claim_fetch()
    }

    /// Where the running fetch should read from; `None` once nobody follows the topic.
    pub(super) fn position(&self, id: Uuid) -> Option<i64> {
        lock(&self.topics)
            .get(&id)
            .and_then(|topic| topic.delivered)
    }

    /// Publishes a batch that ends at `delivered`, having seen the topic at `seen`.
    pub(super) fn publish(&self, id: Uuid, batch: B, delivered: i64, seen: i64) {
        let mut topics = lock(&self.topics);
        if let Some(topic) = topics.get_mut(&id) {
            topic.announced = topic.announced.max(seen);
            // Monotonic even if a fetch of a since re-created topic finishes late.
            topic.delivered = Some(topic.delivered.map_or(delivered, |d| d.max(delivered)));
            // An error only means every receiver is gone; the topic is released with them.
            let _ = topic.tx.send(Arc::new(batch));
        }
    }

    /// Ends a fetch round. Returns whether the fetch should go on reading.
    pub(super) fn fetch_done(&self, id: Uuid, progressed: bool) -> bool {
        let mut topics = lock(&self.topics);
        let Some(topic) = topics.get_mut(&id) else {
            return false;
        };
        let behind = topic
            .delivered
            .is_some_and(|delivered| topic.announced > delivered);
        if progressed && behind {
            return true;
        }
        topic.fetching = false;
        false
    }

    /// Forgets the topic once its last subscriber is gone. Called by that subscriber
    /// while its receiver still exists, hence `<= 1`.
    fn release(&self, id: Uuid) {
        let mut topics = lock(&self.topics);
        if topics
            .get(&id)
            .is_some_and(|topic| topic.tx.receiver_count() <= 1)
        {
            topics.remove(&id);
        }
    }

    pub(super) fn followed(&self) -> Vec<Uuid> {
        lock(&self.topics).keys().copied().collect()
    }

    pub(super) fn len(&self) -> usize {
        lock(&self.topics).len()
    }

    /// Drops every sender, which ends every stream.
    pub(super) fn close(&self) {
        lock(&self.topics).clear();
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

impl StreamSlots {
    pub(super) fn new(pool: PgPool, settings: &HubSettings) -> Self {
        Self {
            pool,
            replica: Uuid::now_v7(),
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
            let pool = self.slots.pool.clone();
            runtime.spawn(async move {
                if let Err(error) = store::streams::release(&pool, lease).await {
                    // It runs out by itself within the lease lifetime.
                    tracing::debug!(%error, "releasing a stream lease failed");
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
    fn a_fetch_starts_only_once_the_position_is_known_and_behind() {
        let registry: Registry<()> = Registry::new();
        let id = Uuid::now_v7();
        let _rx = registry.subscribe(id, 4);
        assert!(
            !registry.announce(id, 3),
            "position unknown: nothing to fetch from"
        );
        assert!(registry.seed(id, 1), "behind the announcement: fetch");
        assert!(!registry.announce(id, 5), "one fetch at a time");
        registry.publish(id, (), 3, 3);
        assert!(
            registry.fetch_done(id, true),
            "5 announced, 3 delivered: go on"
        );
        registry.publish(id, (), 5, 5);
        assert!(!registry.fetch_done(id, true));
        assert!(
            registry.announce(id, 6),
            "idle again: a new fetch may start"
        );
        registry.publish(id, (), 4, 4);
        assert_eq!(
            registry.position(id),
            Some(5),
            "a late, older batch never moves back"
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
