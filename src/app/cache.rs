//! What lets a batch of commands skip its lock round trip: the match states this replica's
//! command lanes stored last, and the database's clock as last read.
//!
//! Nothing here is trusted on its own. A batch decided from cached states stores only if
//! every row is still at the sequence number it was cached at and no clock the decisions
//! relied on has run out by the database's own clock (both checked inside the write
//! statement); otherwise it is rolled back and decided again under row locks. A stale entry
//! therefore costs one wasted round trip, never a wrong answer.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::store::matches::MatchRow;

/// Most matches one replica keeps; beyond it the least recently used half is dropped.
pub const CAPACITY: usize = 4_096;

/// How long a reading of the database's clock is extended by the local monotonic clock.
/// Under load every batch reads it again; an idle replica's first batch takes the locks.
const CLOCK_READING_LIFETIME: Duration = Duration::from_secs(1);

#[derive(Default)]
pub(crate) struct MatchCache {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    rows: HashMap<Uuid, Entry>,
    uses: u64,
    clock: Option<ClockReading>,
    /// The latest time handed out: estimates never go back, even when a reading that
    /// travelled longer replaces one that travelled less.
    handed_out: Option<DateTime<Utc>>,
}

struct Entry {
    row: MatchRow,
    last_use: u64,
}

/// `database` was the database's time no later than `local`.
#[derive(Clone, Copy)]
struct ClockReading {
    database: DateTime<Utc>,
    local: Instant,
}

impl ClockReading {
    /// In whole microseconds, rounded down: the database's resolution, so a time computed
    /// here is stored exactly as the state holds it.
    fn at(&self, local: Instant) -> DateTime<Utc> {
        let elapsed = local.saturating_duration_since(self.local).as_micros();
        self.database + chrono::Duration::microseconds(i64::try_from(elapsed).unwrap_or(i64::MAX))
    }
}

impl MatchCache {
    /// Takes the cached rows of every match in `ids`, with the estimated database time, if
    /// all of them are cached and the clock was read recently; otherwise takes nothing.
    ///
    /// The estimate is the last reading plus the local time elapsed since, so it trails the
    /// database's clock by the reading's delivery time and never runs ahead of it. Rows are
    /// taken out, not copied: a batch that fails leaves them out, and a batch on another
    /// lane that wants the same match finds no entry and locks the row.
    pub fn take(&self, ids: &[Uuid]) -> Option<(HashMap<Uuid, MatchRow>, DateTime<Utc>)> {
        let mut inner = self.inner.lock().ok()?;
        let now = Instant::now();
        let clock = inner.clock.filter(|reading| {
            now.saturating_duration_since(reading.local) <= CLOCK_READING_LIFETIME
        })?;
        if ids.is_empty() || !ids.iter().all(|id| inner.rows.contains_key(id)) {
            return None;
        }
        let rows = ids
            .iter()
            .filter_map(|id| Some((*id, inner.rows.remove(id)?.row)))
            .collect();
        let estimate = inner
            .handed_out
            .map_or(clock.at(now), |floor| floor.max(clock.at(now)));
        inner.handed_out = Some(estimate);
        Some((rows, estimate))
    }

    /// Keeps `row` as its match's latest stored state, unless a later one is kept already
    /// (two lanes may finish with the same match out of order).
    pub fn keep(&self, row: MatchRow) {
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        if inner
            .rows
            .get(&row.id)
            .is_some_and(|kept| kept.row.last_seq >= row.last_seq)
        {
            return;
        }
        if inner.rows.len() >= CAPACITY {
            inner.drop_least_recently_used_half();
        }
        inner.uses += 1;
        let last_use = inner.uses;
        inner.rows.insert(row.id, Entry { row, last_use });
    }

    /// Forgets the kept state of `id` if the match has moved past it (a commit announced
    /// `last_seq`, perhaps by another replica).
    pub fn moved_to(&self, id: &Uuid, last_seq: i64) {
        if let Ok(mut inner) = self.inner.lock()
            && inner
                .rows
                .get(id)
                .is_some_and(|kept| kept.row.last_seq < last_seq)
        {
            inner.rows.remove(id);
        }
    }

    /// Forgets `id` (its match ended, or its row moved on without this replica).
    pub fn forget(&self, id: &Uuid) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.rows.remove(id);
        }
    }

    /// Records that the database's clock read `database` no later than the instant `local`.
    /// The newest reading always replaces the last, so the estimate stays anchored to a
    /// recent reading however long each took to arrive.
    pub fn read_clock(&self, database: DateTime<Utc>, local: Instant) {
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        if inner.clock.is_none_or(|previous| previous.local <= local) {
            inner.clock = Some(ClockReading { database, local });
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner.lock().map(|inner| inner.rows.len()).unwrap_or(0)
    }
}

impl Inner {
    fn drop_least_recently_used_half(&mut self) {
        let mut uses: Vec<u64> = self.rows.values().map(|entry| entry.last_use).collect();
        let middle = uses.len() / 2;
        let (_, median, _) = uses.select_nth_unstable(middle);
        let median = *median;
        self.rows.retain(|_, entry| entry.last_use >= median);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Clock, HouseOptions, Match, MatchRules, RuleSetId};

    fn row(id: Uuid, last_seq: i64) -> MatchRow {
        let clock = Clock {
            placement_seconds: 120,
            shot_seconds: 30,
        };
        let rules = MatchRules::new(RuleSetId::Statki, HouseOptions::default(), clock, 900)
            .expect("standard rules");
        let created =
            Match::create(Uuid::new_v4(), rules, false, None, Utc::now()).expect("a new match");
        MatchRow {
            id,
            state: Match::fold([&created]).expect("a created match folds"),
            last_seq,
            created_at: Utc::now(),
        }
    }

    fn with_clock() -> MatchCache {
        let cache = MatchCache::default();
        cache.read_clock(Utc::now(), Instant::now());
        cache
    }

    #[test]
    fn nothing_is_taken_before_the_clock_is_read() {
        let cache = MatchCache::default();
        let id = Uuid::new_v4();
        cache.keep(row(id, 3));
        assert!(cache.take(&[id]).is_none());
        cache.read_clock(Utc::now(), Instant::now());
        assert!(cache.take(&[id]).is_some());
    }

    #[test]
    fn a_batch_is_taken_whole_or_not_at_all() {
        let cache = with_clock();
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        cache.keep(row(a, 1));
        assert!(cache.take(&[a, b]).is_none());
        assert_eq!(
            cache.len(),
            1,
            "a partial hit leaves the cached rows in place"
        );
        cache.keep(row(b, 1));
        let (rows, _) = cache.take(&[a, b]).expect("both cached");
        assert_eq!(rows.len(), 2);
        assert!(
            cache.take(&[a]).is_none(),
            "taken rows are out of the cache"
        );
    }

    #[test]
    fn an_older_state_never_replaces_a_newer_one() {
        let cache = with_clock();
        let id = Uuid::new_v4();
        cache.keep(row(id, 7));
        cache.keep(row(id, 5));
        let (rows, _) = cache.take(&[id]).expect("cached");
        assert_eq!(rows[&id].last_seq, 7);
    }

    #[test]
    fn an_announced_later_position_forgets_the_kept_state() {
        let cache = with_clock();
        let id = Uuid::new_v4();
        cache.keep(row(id, 4));
        cache.moved_to(&id, 4);
        assert!(cache.take(&[id]).is_some(), "its own position keeps it");
        cache.keep(row(id, 4));
        cache.moved_to(&id, 5);
        assert!(cache.take(&[id]).is_none());
    }

    #[test]
    fn the_clock_estimate_never_moves_back_and_trails_the_reading() {
        let cache = MatchCache::default();
        let id = Uuid::new_v4();
        cache.keep(row(id, 1));
        let base = Utc::now();
        let start = Instant::now();
        cache.read_clock(base, start);
        let (_, first) = cache.take(&[id]).expect("cached");
        assert!(first >= base);
        assert_eq!(
            first.timestamp_subsec_nanos() % 1_000,
            base.timestamp_subsec_nanos() % 1_000
        );
        // A reading that took longer to arrive does not move the estimate back.
        cache.read_clock(base - chrono::Duration::milliseconds(50), Instant::now());
        cache.keep(row(id, 2));
        let (_, second) = cache.take(&[id]).expect("cached");
        assert!(second >= first);
        let later = base + chrono::Duration::seconds(5);
        cache.read_clock(later, Instant::now());
        cache.keep(row(id, 3));
        let (_, third) = cache.take(&[id]).expect("cached");
        assert!(third >= later);
    }

    #[test]
    fn every_new_reading_renews_the_clock() {
        let cache = MatchCache::default();
        let id = Uuid::new_v4();
        let base = Utc::now();
        let long_ago = Instant::now()
            .checked_sub(CLOCK_READING_LIFETIME * 2)
            .expect("the monotonic clock is past its origin");
        // A reading that arrived quickly, long ago, then one that took longer, just now.
        cache.read_clock(base - CLOCK_READING_LIFETIME * 2, long_ago);
        cache.read_clock(base - chrono::Duration::milliseconds(5), Instant::now());
        cache.keep(row(id, 1));
        assert!(
            cache.take(&[id]).is_some(),
            "the newest reading is the anchor"
        );
    }

    #[test]
    fn a_stale_clock_reading_is_not_extended() {
        let cache = MatchCache::default();
        let id = Uuid::new_v4();
        cache.keep(row(id, 1));
        let long_ago = Instant::now()
            .checked_sub(CLOCK_READING_LIFETIME * 2)
            .expect("the monotonic clock is past its origin");
        cache.read_clock(Utc::now(), long_ago);
        assert!(cache.take(&[id]).is_none());
    }

    #[test]
    fn a_full_cache_drops_its_least_recently_used_half() {
        let cache = with_clock();
        let ids: Vec<Uuid> = (0..CAPACITY).map(|_| Uuid::new_v4()).collect();
        for id in &ids {
            cache.keep(row(*id, 1));
        }
        assert_eq!(cache.len(), CAPACITY);
        let newest = Uuid::new_v4();
        cache.keep(row(newest, 1));
        assert!(cache.len() <= CAPACITY / 2 + 1);
        assert!(cache.take(&[newest]).is_some());
        assert!(
            cache.take(&[ids[0]]).is_none(),
            "the oldest entry went first"
        );
        assert!(cache.take(&[ids[CAPACITY - 1]]).is_some());
    }
}
