//! What the write path committed, told to this replica's listener (the live hub) once it
//! is durable: every changed match with its new state and events, and every player notice.
//!
//! Nothing is announced from inside a transaction: a `NOTIFY` there would serialise every
//! commit of the database behind one lock. Instead each write collects what it stored in a
//! [`Committed`], and the transaction that carries it ([`Tx`], or a command lane) hands it
//! to the [`Herald`] after its commit; the herald delivers it to this replica's streams
//! from memory and tells the other replicas (see `live`).

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, OnceLock, RwLock};

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, Postgres, Transaction};
use uuid::Uuid;

use super::Result;
use super::cache::MatchCache;
use crate::engine::{Event, Match};

/// One match's change as committed: its state after the events, and the events.
#[derive(Clone, Debug)]
pub struct CommittedMatch {
    pub id: Uuid,
    /// The match's position before the events.
    pub after: i64,
    /// The match's position after them (`after` plus the number of events).
    pub last_seq: i64,
    /// The time the events are stored with.
    pub at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub state: Match,
    pub events: Vec<Event>,
}

/// Everything one transaction of the write path committed.
#[derive(Debug, Default)]
pub struct Committed {
    pub matches: Vec<CommittedMatch>,
    /// `(player, seq)` of every notice pushed.
    pub notices: Vec<(Uuid, i64)>,
}

impl Committed {
    pub fn is_empty(&self) -> bool {
        self.matches.is_empty() && self.notices.is_empty()
    }

    pub(crate) fn extend(&mut self, other: Committed) {
        self.matches.extend(other.matches);
        self.notices.extend(other.notices);
    }
}

/// Told of what this replica committed, right after each commit (never before, never for
/// a rolled-back transaction). Must not block: it runs on the committing task.
pub trait Herald: Send + Sync {
    fn committed(&self, committed: Committed);
}

/// Where an application's commits are told: the lanes' kept states (a commit made outside
/// the lanes, by the clock, a bot or a pairing, moves its match past what they kept), and
/// the herald once one is set.
#[derive(Clone, Default)]
pub(crate) struct Heralds {
    herald: Arc<RwLock<Option<Arc<dyn Herald>>>>,
    kept: Arc<OnceLock<Arc<MatchCache>>>,
}

impl Heralds {
    pub(crate) fn keep_current(&self, cache: Arc<MatchCache>) {
        let _ = self.kept.set(cache);
    }

    pub(crate) fn set(&self, herald: Arc<dyn Herald>) {
        if let Ok(mut slot) = self.herald.write() {
            *slot = Some(herald);
        }
    }

    pub(crate) fn tell(&self, committed: Committed) {
        if committed.is_empty() {
            return;
        }
        if let Some(cache) = self.kept.get() {
            for change in &committed.matches {
                cache.moved_to(&change.id, change.last_seq);
            }
        }
        let herald = self.herald.read().ok().and_then(|slot| slot.clone());
        if let Some(herald) = herald {
            herald.committed(committed);
        }
    }
}

/// A transaction of the write path: a database transaction that collects what it writes
/// and tells it once committed. Dropped without [`Tx::commit`], it rolls back and tells
/// nothing.
pub(crate) struct Tx {
    tx: Transaction<'static, Postgres>,
    pub(crate) committed: Committed,
    heralds: Heralds,
}

impl Tx {
    pub(crate) fn new(tx: Transaction<'static, Postgres>, heralds: Heralds) -> Self {
        Tx {
            tx,
            committed: Committed::default(),
            heralds,
        }
    }

    /// The connection and the collector apart, for a write that records what it stores.
    pub(crate) fn parts(&mut self) -> (&mut PgConnection, &mut Committed) {
        (&mut self.tx, &mut self.committed)
    }

    /// Commits, then tells what was committed.
    pub(crate) async fn commit(self) -> Result<()> {
        self.tx.commit().await?;
        self.heralds.tell(self.committed);
        Ok(())
    }
}

impl Deref for Tx {
    type Target = PgConnection;

    fn deref(&self) -> &PgConnection {
        &self.tx
    }
}

impl DerefMut for Tx {
    fn deref_mut(&mut self) -> &mut PgConnection {
        &mut self.tx
    }
}
