//! The one `LISTEN` connection of a replica: reconnects with back-off, reads the other
//! replicas' hints (see `hints`) and token revocations, and acknowledges the revocations it
//! applied. Every notification is a hint, never a value: any role that can connect may
//! `NOTIFY`. Whatever a payload says, handling it costs a bounded parse and a map lookup per
//! entry here; an entry for something this replica follows only marks it, and the marks are
//! read in coalesced batches elsewhere (the readers of `feed`, and [`read_tokens`] for
//! revocations), never one read per notification. While the connection is down the
//! revocation cache is bypassed, and after every (re)connection the sweep re-reads every
//! followed position, since notifications sent meanwhile are gone.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use uuid::Uuid;

use super::Inner;
use super::hints::{self, HINTS_CHANNEL, Hint};
use crate::accounts::{APPLIED_CHANNEL, TOKENS_CHANNEL};
use crate::store;

/// `application_name` of the listening connection, so operators can find (or kill) it.
pub const LISTENER_APPLICATION_NAME: &str = "statki-live";

/// Longest wait between two attempts to re-establish the listening connection.
const MAX_RECONNECT_BACKOFF: Duration = Duration::from_secs(2);
/// Bytes of notification payloads read per second, at most: some 50,000 hint entries, far
/// beyond what the replicas' commits send (one entry per changed match). Beyond, a flood
/// is not parsed at all: it is shed to the sweep, which reads every followed position.
const PAYLOAD_BYTES_PER_SECOND: f64 = 2_000_000.0;
/// What may be read at once after a quiet spell.
const PAYLOAD_BYTES_BURST: f64 = 500_000.0;

/// How much payload the listener may still read now (a token bucket).
struct Budget {
    available: f64,
    at: std::time::Instant,
}

impl Budget {
    fn new() -> Self {
        Budget {
            available: PAYLOAD_BYTES_BURST,
            at: std::time::Instant::now(),
        }
    }

    /// Takes `bytes` if that much is left.
    fn take(&mut self, bytes: usize) -> bool {
        let now = std::time::Instant::now();
        let refill = now.duration_since(self.at).as_secs_f64() * PAYLOAD_BYTES_PER_SECOND;
        self.available = (self.available + refill).min(PAYLOAD_BYTES_BURST);
        self.at = now;
        let cost = bytes as f64 + 1.0;
        if self.available < cost {
            return false;
        }
        self.available -= cost;
        true
    }
}

async fn connect_listener(options: &PgConnectOptions) -> Result<PgListener, sqlx::Error> {
    // A pool of one of its own: the listener must never wait behind commands for a
    // connection, and must not hold one of theirs.
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .min_connections(0)
        .max_lifetime(None)
        .idle_timeout(None)
        .acquire_timeout(Duration::from_secs(5))
        .connect_with(options.clone())
        .await?;
    let mut listener = PgListener::connect_with(&pool).await?;
    listener.ignore_pool_close_event(true);
    listener
        .listen_all([HINTS_CHANNEL, TOKENS_CHANNEL, APPLIED_CHANNEL])
        .await?;
    Ok(listener)
}

/// The listening loop: reconnects for ever, and after every (re)connection has the sweep
/// re-read every followed position, since notifications sent while not listening are gone.
pub(super) async fn listen(inner: Arc<Inner>) {
    let options = inner
        .pool
        .connect_options()
        .as_ref()
        .clone()
        .application_name(LISTENER_APPLICATION_NAME);
    let mut backoff = Duration::from_millis(50);
    let mut connected_before = false;
    loop {
        let mut listener = match connect_listener(&options).await {
            Ok(listener) => listener,
            Err(error) => {
                tracing::warn!(%error, "live: cannot listen; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_RECONNECT_BACKOFF);
                continue;
            }
        };
        backoff = Duration::from_millis(50);
        if connected_before {
            metrics::counter!("statki_live_listener_reconnects_total").increment(1);
            tracing::info!("live: listening again; catching up");
        }
        connected_before = true;
        inner.listening.store(true, Ordering::Relaxed);
        inner.revocations.listening(true);
        inner.sweep_now.notify_one();
        let mut budget = Budget::new();
        loop {
            // `try_recv` runs alone, never inside a `select!`: it is not cancel-safe.
            match listener.try_recv().await {
                Ok(Some(notification)) => {
                    if budget.take(notification.payload().len()) {
                        on_notification(&inner, notification.channel(), notification.payload());
                    } else {
                        shed(&inner, notification.channel());
                    }
                }
                Ok(None) => {
                    // sqlx re-established the connection and re-subscribed by itself.
                    metrics::counter!("statki_live_listener_reconnects_total").increment(1);
                    inner.revocations.listening(true);
                    inner.sweep_now.notify_one();
                }
                Err(error) => {
                    tracing::warn!(%error, "live: listening connection lost; reconnecting");
                    break;
                }
            }
        }
        inner.listening.store(false, Ordering::Relaxed);
        inner.revocations.listening(false);
        drop(listener);
    }
}

/// A notification beyond the budget: not read. What a hint may have told, the sweep (at
/// most a few times a second) finds; a revocation it may have carried empties the
/// revocation cache, so requests read their players' rows until it refills; an
/// acknowledgement only shortens a bounded wait.
fn shed(inner: &Arc<Inner>, channel: &str) {
    hints::shed();
    match channel {
        HINTS_CHANNEL => inner.sweep_now.notify_one(),
        TOKENS_CHANNEL => inner.revocations.listening(true),
        _ => {}
    }
}

fn parse_position(payload: &str) -> Option<(Uuid, i64)> {
    let (id, seq) = payload.split_once(':')?;
    Some((id.parse().ok()?, seq.parse().ok()?))
}

/// Most entries read from a revocation or acknowledgement payload.
const TOKEN_ENTRIES_MAX: usize = 64;

fn on_notification(inner: &Arc<Inner>, channel: &str, payload: &str) {
    match channel {
        HINTS_CHANNEL => on_hints(inner, payload),
        TOKENS_CHANNEL => on_tokens(inner, payload),
        APPLIED_CHANNEL => on_applied(inner, payload),
        _ => {}
    }
}

/// Another replica's hints: each marks what this replica follows, nothing else.
fn on_hints(inner: &Arc<Inner>, payload: &str) {
    let parsed = hints::parse(payload);
    if parsed.malformed > 0 {
        hints::malformed(HINTS_CHANNEL, parsed.malformed);
    }
    if parsed.sender == Some(inner.outbox.replica()) {
        // Delivered here from memory when committed.
        return;
    }
    let watchers = inner.position_watchers.read().ok();
    for hint in parsed.hints {
        match hint {
            Hint::Match(id, seq) => {
                if let Some(watchers) = &watchers {
                    for watcher in watchers.iter() {
                        watcher(id, seq);
                    }
                }
                inner.matches.hinted(id, seq);
            }
            Hint::Notice(player, seq) => {
                inner.players.hinted(player, seq);
            }
            Hint::Presence(player) => inner.presence.hinted(player),
        }
    }
}

/// A revocation names a player (`player` or `player:instant`; the instant is never
/// trusted): the player is re-read if this replica has anything of theirs to correct, their
/// cached validity or an open stream; otherwise there is nothing to apply, and the
/// revocation is only acknowledged (anyone else's next request reads their row anyway).
fn on_tokens(inner: &Arc<Inner>, payload: &str) {
    let mut malformed = 0;
    for entry in payload.split(',').take(TOKEN_ENTRIES_MAX) {
        let (id, instant) = match entry.split_once(':') {
            Some((id, instant)) => (id, instant.parse::<i64>().ok()),
            None => (entry, None),
        };
        let Ok(player) = id.parse::<Uuid>() else {
            malformed += 1;
            continue;
        };
        let reread = inner.revocations.knows(player) || inner.slots.streams_of(player) > 0;
        inner.tokens.announce(player, instant, reread);
    }
    if malformed > 0 {
        hints::malformed(TOKENS_CHANNEL, malformed);
    }
}

/// Announced revocations waiting for [`read_tokens`]: players to re-read, and
/// revocations to acknowledge only. Bounded, so a flood of announcements cannot grow it.
#[derive(Default)]
pub(super) struct TokenWork {
    pending: std::sync::Mutex<TokenPending>,
    wake: tokio::sync::Notify,
}

#[derive(Default)]
struct TokenPending {
    reread: std::collections::HashSet<Uuid>,
    acknowledge: std::collections::HashSet<(Uuid, i64)>,
}

/// Most announced revocations kept for the next round, of each sort.
const TOKEN_WORK_MAX: usize = 4_096;

impl TokenWork {
    fn announce(&self, player: Uuid, instant: Option<i64>, reread: bool) {
        let mut pending = self
            .pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let added = if reread {
            pending.reread.len() < TOKEN_WORK_MAX && pending.reread.insert(player)
        } else {
            match instant {
                Some(instant) => {
                    pending.acknowledge.len() < TOKEN_WORK_MAX
                        && pending.acknowledge.insert((player, instant))
                }
                None => false,
            }
        };
        if added {
            self.wake.notify_one();
        }
    }

    /// Waits for work and takes up to `max` of each sort.
    async fn take(&self, max: usize) -> (Vec<Uuid>, Vec<(Uuid, i64)>) {
        loop {
            {
                let mut pending = self
                    .pending
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if !pending.reread.is_empty() || !pending.acknowledge.is_empty() {
                    let reread: Vec<Uuid> = pending.reread.iter().take(max).copied().collect();
                    for player in &reread {
                        pending.reread.remove(player);
                    }
                    let acknowledge: Vec<(Uuid, i64)> =
                        pending.acknowledge.iter().take(max).copied().collect();
                    for entry in &acknowledge {
                        pending.acknowledge.remove(entry);
                    }
                    return (reread, acknowledge);
                }
            }
            self.wake.notified().await;
        }
    }
}

/// Acknowledgements only count towards a revocation this replica is waiting on.
fn on_applied(inner: &Arc<Inner>, payload: &str) {
    let mut malformed = 0;
    for entry in payload.split(',').take(TOKEN_ENTRIES_MAX) {
        match parse_position(entry) {
            Some((player, valid_from)) => inner.revocations.acknowledged(player, valid_from),
            None => malformed += 1,
        }
    }
    if malformed > 0 {
        hints::malformed(APPLIED_CHANNEL, malformed);
    }
}

/// Re-reads the players whose tokens were announced, a coalesced batch at a time, and
/// acknowledges what it applied (and the revocations it had nothing to apply for) in as
/// few notifications as fit.
pub(super) async fn read_tokens(inner: Arc<Inner>) {
    loop {
        let (players, nothing_to_apply) = inner.tokens.take(TOKEN_READ_CHUNK).await;
        let mut acks: Vec<String> = nothing_to_apply
            .into_iter()
            .map(|(player, instant)| format!("{player}:{instant}"))
            .collect();
        for player in players {
            match inner.revocations.reread(player).await {
                Ok(Some(valid_from)) => acks.push(format!("{player}:{valid_from}")),
                Ok(None) => {}
                Err(error) => {
                    // Not trusted any more: the next request reads the row itself.
                    tracing::warn!(%error, "live: cannot re-read a player's tokens");
                    inner.revocations.forget(player);
                }
            }
        }
        for payload in acks.chunks(TOKEN_ENTRIES_MAX).map(|chunk| chunk.join(",")) {
            if let Err(error) =
                store::accounts::notify(&inner.pool, APPLIED_CHANNEL, &payload).await
            {
                tracing::warn!(%error, "live: cannot acknowledge a token revocation");
            }
        }
        // Revocations are rare: a flood of announcements is read at most once per pause.
        tokio::time::sleep(super::feed::READ_IDLE_PAUSE).await;
    }
}

/// Revocations handled per round of [`read_tokens`], of each sort.
const TOKEN_READ_CHUNK: usize = 64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_parse() {
        let id = Uuid::now_v7();
        assert_eq!(parse_position(&format!("{id}:42")), Some((id, 42)));
        assert_eq!(parse_position("nonsense"), None);
        assert_eq!(parse_position(&format!("{id}:x")), None);
    }
}
