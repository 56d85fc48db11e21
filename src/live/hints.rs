//! Hints between replicas: after each commit a replica queues what changed (a match's
//! position, a player's notice, a player's streams) in its [`Outbox`], and one task sends
//! everything queued as one coalesced `NOTIFY` on [`HINTS_CHANNEL`], from a connection of
//! its own, outside every write transaction and at most once per [`HINT_INTERVAL`]. So no
//! `NOTIFY` ever runs inside a write (PostgreSQL serialises the commits of transactions that
//! notify), and the database work of telling the other replicas is one small transaction per
//! interval, however many moves it covers and however many streams follow them.
//!
//! A hint is never a value, only a reason to look: any role that can connect can `NOTIFY`.
//! [`parse`] reads a payload into at most [`ENTRIES_MAX`] entries (the rest is counted as
//! malformed), the receiver keeps an entry only for a topic it follows and only as a mark
//! to read it (bounded by what it follows), and the marks are read in coalesced batches by
//! one task per kind. Malformed payloads are counted (`statki_live_hints_malformed_total`)
//! and logged at most once a minute.
//!
//! Payload: entries separated by `,`; the first names the sender (`r<replica id>`, so a
//! replica skips its own hints), then `m<match id>:<seq>` (a match's events up to `seq` are
//! committed), `p<player id>:<seq>` (a player's notice `seq` is) and `a<player id>` (the
//! player's streams opened or closed).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection};
use tokio::sync::Notify;
use uuid::Uuid;

/// The channel every replica's hints are sent and heard on.
pub const HINTS_CHANNEL: &str = "statki_hints";
/// `application_name` of the connection hints are sent from.
pub const HINTS_APPLICATION_NAME: &str = "statki-hints";
/// The shortest time between two hints of one replica: what one hint may coalesce.
pub const HINT_INTERVAL: Duration = Duration::from_millis(2);
/// Most bytes of one notification's payload (PostgreSQL refuses 8000 and more).
const PAYLOAD_MAX: usize = 7_800;
/// Most entries read from one payload (a payload of 7,999 bytes holds fewer real ones).
pub const ENTRIES_MAX: usize = 256;
/// Most positions waiting in the outbox; beyond, hints are dropped (counted) and the other
/// replicas learn of those moves from their periodic sweep.
const OUTBOX_MAX: usize = 100_000;
/// Malformed or shed payloads are logged at most this often.
const MALFORMED_LOG_EVERY: Duration = Duration::from_secs(60);
/// Longest wait before the sending connection is opened again.
const MAX_RECONNECT_BACKOFF: Duration = Duration::from_secs(2);

/// One entry of a hint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hint {
    /// Match `.0`'s events up to `.1` are committed.
    Match(Uuid, i64),
    /// Player `.0`'s notice `.1` is committed.
    Notice(Uuid, i64),
    /// Player `.0`'s streams opened or closed somewhere.
    Presence(Uuid),
}

/// A hint payload as read: its sender and its entries.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Parsed {
    pub sender: Option<Uuid>,
    pub hints: Vec<Hint>,
    /// Entries that could not be read, or were beyond [`ENTRIES_MAX`].
    pub malformed: usize,
}

/// Reads a payload; never fails, never reads more than [`ENTRIES_MAX`] entries.
pub fn parse(payload: &str) -> Parsed {
    let mut parsed = Parsed::default();
    for (index, entry) in payload.split(',').enumerate() {
        if index >= ENTRIES_MAX {
            parsed.malformed += 1;
            break;
        }
        let (tag, rest) = entry.split_at_checked(1).unwrap_or(("", ""));
        let read = match tag {
            "r" if index == 0 => rest.parse().ok().map(|id| {
                parsed.sender = Some(id);
            }),
            "m" => position(rest).map(|(id, seq)| parsed.hints.push(Hint::Match(id, seq))),
            "p" => position(rest).map(|(id, seq)| parsed.hints.push(Hint::Notice(id, seq))),
            "a" => rest
                .parse()
                .ok()
                .map(|id| parsed.hints.push(Hint::Presence(id))),
            _ => None,
        };
        if read.is_none() {
            parsed.malformed += 1;
        }
    }
    parsed
}

/// `id:seq`, with `seq` a positive number.
pub fn position(text: &str) -> Option<(Uuid, i64)> {
    let (id, seq) = text.split_once(':')?;
    let seq: i64 = seq.parse().ok()?;
    (seq > 0).then_some(())?;
    Some((id.parse().ok()?, seq))
}

/// Counts a malformed payload on `channel` and logs it, at most once a minute (a flood of
/// forged notifications must not flood the log).
pub fn malformed(channel: &'static str, entries: usize) {
    static LAST_LOGGED: AtomicI64 = AtomicI64::new(i64::MIN);
    metrics::counter!("statki_live_hints_malformed_total", "channel" => channel)
        .increment(entries as u64);
    if once_a_minute(&LAST_LOGGED) {
        tracing::warn!(
            channel,
            entries,
            "live: malformed notifications (counted in statki_live_hints_malformed_total; logged at most once a minute)"
        );
    }
}

/// Counts a notification shed unread (the listener's budget is spent) and logs it, at most
/// once a minute.
pub fn shed() {
    static LAST_LOGGED: AtomicI64 = AtomicI64::new(i64::MIN);
    metrics::counter!("statki_live_hints_shed_total").increment(1);
    if once_a_minute(&LAST_LOGGED) {
        tracing::warn!(
            "live: notifications arrive faster than they may be read; shedding them to the sweep (counted in statki_live_hints_shed_total; logged at most once a minute)"
        );
    }
}

/// Whether a log line kept in `last_logged` (ms since the epoch) may be written now.
fn once_a_minute(last_logged: &AtomicI64) -> bool {
    let now = chrono::Utc::now().timestamp_millis();
    let every = i64::try_from(MALFORMED_LOG_EVERY.as_millis()).unwrap_or(i64::MAX);
    let last = last_logged.load(Ordering::Relaxed);
    now.saturating_sub(last) >= every
        && last_logged
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What a replica has yet to tell the others, coalesced: the latest position per match and
/// per player feed, and the players whose streams changed.
#[derive(Default)]
struct Pending {
    matches: HashMap<Uuid, i64>,
    notices: HashMap<Uuid, i64>,
    presence: HashSet<Uuid>,
}

impl Pending {
    fn len(&self) -> usize {
        self.matches.len() + self.notices.len() + self.presence.len()
    }

    /// The payloads telling all of it, each within [`PAYLOAD_MAX`] bytes.
    fn payloads(self, replica: Uuid) -> Vec<String> {
        let head = format!("r{replica}");
        let entries = self
            .matches
            .into_iter()
            .map(|(id, seq)| format!("m{id}:{seq}"))
            .chain(
                self.notices
                    .into_iter()
                    .map(|(id, seq)| format!("p{id}:{seq}")),
            )
            .chain(self.presence.into_iter().map(|id| format!("a{id}")));
        let mut payloads = Vec::new();
        let mut current = head.clone();
        let mut count = 0;
        for entry in entries {
            if current.len() + 1 + entry.len() > PAYLOAD_MAX || count + 1 >= ENTRIES_MAX {
                payloads.push(std::mem::replace(&mut current, head.clone()));
                count = 0;
            }
            current.push(',');
            current.push_str(&entry);
            count += 1;
        }
        if count > 0 {
            payloads.push(current);
        }
        payloads
    }
}

/// A replica's outgoing hints.
pub(super) struct Outbox {
    replica: Uuid,
    pending: Mutex<Pending>,
    wake: Notify,
}

impl Outbox {
    pub(super) fn new(replica: Uuid) -> Self {
        Outbox {
            replica,
            pending: Mutex::new(Pending::default()),
            wake: Notify::new(),
        }
    }

    pub(super) fn replica(&self) -> Uuid {
        self.replica
    }

    /// Queues `hint` for the next send. Never blocks; drops it (counted) when the outbox is
    /// full, as when the database cannot take hints: the others' sweep then covers it.
    pub(super) fn push(&self, hint: Hint) {
        {
            let mut pending = lock(&self.pending);
            if pending.len() >= OUTBOX_MAX {
                metrics::counter!("statki_live_hints_dropped_total").increment(1);
                return;
            }
            match hint {
                Hint::Match(id, seq) => {
                    let kept = pending.matches.entry(id).or_insert(seq);
                    *kept = (*kept).max(seq);
                }
                Hint::Notice(id, seq) => {
                    let kept = pending.notices.entry(id).or_insert(seq);
                    *kept = (*kept).max(seq);
                }
                Hint::Presence(id) => {
                    pending.presence.insert(id);
                }
            }
        }
        self.wake.notify_one();
    }

    fn take(&self) -> Pending {
        std::mem::take(&mut *lock(&self.pending))
    }

    /// Sends what is queued, coalesced, for ever: one transaction per [`HINT_INTERVAL`] at
    /// most, on a connection of its own whose commits do not wait for the disk (a lost hint
    /// costs a delay, never an event).
    pub(super) async fn send(&self, options: PgConnectOptions) {
        let options = options.application_name(HINTS_APPLICATION_NAME);
        let mut backoff = Duration::from_millis(50);
        let mut connection: Option<PgConnection> = None;
        let mut last_sent = Instant::now() - HINT_INTERVAL;
        loop {
            self.wake.notified().await;
            let since = last_sent.elapsed();
            if since < HINT_INTERVAL {
                tokio::time::sleep(HINT_INTERVAL - since).await;
            }
            let conn = match connection.as_mut() {
                Some(conn) => conn,
                None => match connect(&options).await {
                    Ok(conn) => {
                        backoff = Duration::from_millis(50);
                        connection.insert(conn)
                    }
                    Err(error) => {
                        tracing::warn!(%error, "live: cannot open the hints connection; retrying");
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(MAX_RECONNECT_BACKOFF);
                        // Whatever is queued waits for the next attempt.
                        self.wake.notify_one();
                        continue;
                    }
                },
            };
            let pending = self.take();
            let hints = pending.len();
            let payloads = pending.payloads(self.replica);
            last_sent = Instant::now();
            if payloads.is_empty() {
                continue;
            }
            match crate::store::hints::send(conn, HINTS_CHANNEL, &payloads).await {
                Ok(()) => {
                    metrics::counter!("statki_live_hints_sent_total").increment(hints as u64);
                    metrics::counter!("statki_live_hint_notifications_total")
                        .increment(payloads.len() as u64);
                }
                Err(error) => {
                    metrics::counter!("statki_live_hints_dropped_total").increment(hints as u64);
                    tracing::warn!(%error, hints, "live: sending hints failed; the other replicas' sweep covers them");
                    connection = None;
                }
            }
        }
    }
}

async fn connect(options: &PgConnectOptions) -> Result<PgConnection, crate::store::StoreError> {
    let mut conn = PgConnection::connect_with(options).await?;
    crate::store::hints::prepare(&mut conn).await?;
    Ok(conn)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_reads_back_as_its_hints() {
        let replica = Uuid::now_v7();
        let (game, player) = (Uuid::now_v7(), Uuid::now_v7());
        let mut pending = Pending::default();
        pending.matches.insert(game, 7);
        pending.notices.insert(player, 2);
        pending.presence.insert(player);
        let payloads = pending.payloads(replica);
        assert_eq!(payloads.len(), 1);
        let parsed = parse(&payloads[0]);
        assert_eq!(parsed.sender, Some(replica));
        assert_eq!(parsed.malformed, 0);
        assert_eq!(
            parsed.hints,
            vec![
                Hint::Match(game, 7),
                Hint::Notice(player, 2),
                Hint::Presence(player)
            ]
        );
    }

    #[test]
    fn many_positions_split_into_payloads_postgresql_accepts() {
        let mut pending = Pending::default();
        for seq in 1..=1_000 {
            pending.matches.insert(Uuid::now_v7(), seq);
        }
        let payloads = pending.payloads(Uuid::now_v7());
        assert!(payloads.iter().all(|p| p.len() <= PAYLOAD_MAX));
        let read: usize = payloads.iter().map(|p| parse(p).hints.len()).sum();
        assert_eq!(read, 1_000);
        assert!(payloads.iter().all(|p| parse(p).malformed == 0));
    }

    #[test]
    fn garbage_is_counted_never_trusted() {
        let id = Uuid::now_v7();
        let parsed = parse(&format!("m{id}:0,m{id}:-3,m{id}:x,z,{id},m{id}:5"));
        assert_eq!(parsed.hints, vec![Hint::Match(id, 5)]);
        assert_eq!(parsed.malformed, 5);
        assert_eq!(parse("").malformed, 1);
        let huge = vec![format!("m{id}:1"); 1_000].join(",");
        let parsed = parse(&huge);
        assert_eq!(parsed.hints.len(), ENTRIES_MAX);
        assert_eq!(parsed.malformed, 1);
        // A sender only as the first entry.
        assert_eq!(parse(&format!("m{id}:1,r{id}")).sender, None);
    }
}
