//! The topics of one kind followed on a replica: per topic, a bounded broadcast channel and
//! how far it was read, so that at most one fetch per topic runs and batches stay in order.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::broadcast;
use uuid::Uuid;

pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves the maps consistent, so a panic elsewhere is no reason
    // to stop serving streams.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The followed topics (matches or players) of one kind.
pub(super) struct Registry<B> {
    topics: Mutex<HashMap<Uuid, Topic<B>>>,
}

struct Topic<B> {
    tx: broadcast::Sender<Arc<B>>,
    /// Highest sequence number published; `None` until a subscriber has read where the
    /// topic stands, so nothing is fetched from an unknown position.
    delivered: Option<i64>,
    /// Highest sequence number known to be committed (from NOTIFY or the sweep).
    announced: i64,
    /// A fetch task is running for this topic; at most one does, so batches stay in order.
    fetching: bool,
}

impl<B> Topic<B> {
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

    pub(super) fn subscribe(&self, id: Uuid, capacity: usize) -> broadcast::Receiver<Arc<B>> {
        let mut topics = lock(&self.topics);
        let topic = topics.entry(id).or_insert_with(|| Topic {
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
    pub(super) fn release(&self, id: Uuid) {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch with nothing in it: the registry never looks inside.
    struct Batch;

    #[test]
    fn a_fetch_starts_only_once_the_position_is_known_and_behind() {
        let registry: Registry<Batch> = Registry::new();
        let id = Uuid::now_v7();
        let _rx = registry.subscribe(id, 4);
        assert!(
            !registry.announce(id, 3),
            "position unknown: nothing to fetch from"
        );
        assert!(registry.seed(id, 1), "behind the announcement: fetch");
        assert!(!registry.announce(id, 5), "one fetch at a time");
        registry.publish(id, Batch, 3, 3);
        assert!(
            registry.fetch_done(id, true),
            "5 announced, 3 delivered: go on"
        );
        registry.publish(id, Batch, 5, 5);
        assert!(!registry.fetch_done(id, true));
        assert!(
            registry.announce(id, 6),
            "idle again: a new fetch may start"
        );
        registry.publish(id, Batch, 4, 4);
        assert_eq!(
            registry.position(id),
            Some(5),
            "a late, older batch never moves back"
        );
    }

    #[test]
    fn the_last_subscriber_releases_the_topic() {
        let registry: Registry<Batch> = Registry::new();
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
