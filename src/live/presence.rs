//! Who of the players followed on this replica is online, for the streams of their
//! matches: one watch channel per followed player, set from their stream leases (shared by
//! every replica) when a lease of theirs is taken or given back anywhere (a presence hint,
//! see `hints`) and by the periodic sweep, which also catches leases that ran out with a
//! dead replica. Hinted players are marked and read in coalesced batches, and only on
//! replicas where someone follows a match of theirs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::watch;

use super::registry::Marks;
use uuid::Uuid;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves the map consistent.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The followed players' presence on this replica.
pub(super) struct PresenceWatch {
    players: Mutex<HashMap<Uuid, watch::Sender<bool>>>,
    /// Followed players whose streams changed somewhere, to be read.
    marked: Marks,
}

impl PresenceWatch {
    pub(super) fn new() -> Self {
        Self {
            players: Mutex::new(HashMap::new()),
            marked: Marks::default(),
        }
    }

    /// `player`'s streams changed somewhere: marks them to be read if anybody here follows
    /// them (so the marks never outnumber the followed players).
    pub(super) fn hinted(&self, player: Uuid) {
        if self.follows(player) {
            self.marked.mark(player);
        }
    }

    /// Waits for marked players and takes up to `max` of them.
    pub(super) async fn take_marked(&self, max: usize) -> Vec<Uuid> {
        self.marked.take(max).await
    }

    /// Follows `player`, read `online` just now (a fresher reading than the kept one).
    pub(super) fn watch(self: &Arc<Self>, player: Uuid, online: bool) -> Watched {
        let mut players = lock(&self.players);
        let sender = players
            .entry(player)
            .or_insert_with(|| watch::channel(online).0);
        sender.send_if_modified(|kept| std::mem::replace(kept, online) != online);
        let mut rx = sender.subscribe();
        rx.borrow_and_update();
        Watched {
            rx,
            player,
            watch: self.clone(),
        }
    }

    /// Whether anybody here follows `player`.
    pub(super) fn follows(&self, player: Uuid) -> bool {
        lock(&self.players).contains_key(&player)
    }

    /// `player` was read `online`: tells their watchers if that is a change (and returns
    /// whether it was).
    pub(super) fn set(&self, player: Uuid, online: bool) -> bool {
        lock(&self.players).get(&player).is_some_and(|sender| {
            sender.send_if_modified(|kept| std::mem::replace(kept, online) != online)
        })
    }

    pub(super) fn followed(&self) -> Vec<Uuid> {
        lock(&self.players).keys().copied().collect()
    }

    /// Forgets `player` with their last watcher (called while its receiver still exists).
    fn release(&self, player: Uuid) {
        let mut players = lock(&self.players);
        if players
            .get(&player)
            .is_some_and(|sender| sender.receiver_count() <= 1)
        {
            players.remove(&player);
        }
    }
}

/// One stream's watch on one player's presence.
pub(super) struct Watched {
    rx: watch::Receiver<bool>,
    player: Uuid,
    watch: Arc<PresenceWatch>,
}

impl Watched {
    pub(super) fn player(&self) -> Uuid {
        self.player
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        self.watch.release(self.player);
    }
}

/// The next presence change among `watched`: `(player, online)`. Never resolves while
/// nothing changes (or nothing is watched). Cancel-safe: a change not taken is kept.
pub(super) async fn next_change(watched: &mut [Watched]) -> (Uuid, bool) {
    if watched.is_empty() {
        return std::future::pending().await;
    }
    let changes = watched.iter_mut().map(|watched| {
        Box::pin(async move {
            match watched.rx.changed().await {
                Ok(()) => (watched.player, *watched.rx.borrow_and_update()),
                // The hub closed: its streams end by their subscription.
                Err(_) => std::future::pending().await,
            }
        })
    });
    futures::future::select_all(changes).await.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_change_reaches_every_watcher_once_and_the_last_one_releases() {
        let watch = Arc::new(PresenceWatch::new());
        let (ala, bolek) = (Uuid::now_v7(), Uuid::now_v7());
        let mut first = vec![watch.watch(ala, true), watch.watch(bolek, false)];
        let mut second = vec![watch.watch(ala, true)];
        watch.set(ala, true);
        watch.set(bolek, true);
        assert_eq!(next_change(&mut first).await, (bolek, true));
        watch.set(ala, false);
        assert_eq!(next_change(&mut second).await, (ala, false));
        assert_eq!(next_change(&mut first).await, (ala, false));
        let nothing = tokio::time::timeout(
            std::time::Duration::from_millis(20),
            next_change(&mut first),
        )
        .await;
        assert!(nothing.is_err(), "no change, nothing told");
        drop(first);
        assert!(watch.follows(ala) && !watch.follows(bolek));
        drop(second);
        assert!(watch.followed().is_empty());
    }
}
