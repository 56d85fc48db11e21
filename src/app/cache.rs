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
use quick_cache::Weighter;
use quick_cache::sync::Cache;
use uuid::Uuid;

use crate::store::matches::MatchRow;

/// Memory the kept states may take by default: 128 MiB, over 70,000 matches late in battle
/// (a kept state weighs under 2 KiB even then; see the tests).
pub const DEFAULT_BYTES: u64 = 128 * 1024 * 1024;

/// Bookkeeping of one entry beyond the row itself (hash table slot, eviction metadata).
const ENTRY_OVERHEAD: usize = 64;

/// How long a reading of the database's clock is extended by the local monotonic clock.
/// Under load every batch reads it again; an idle replica's first batch takes the locks.
const CLOCK_READING_LIFETIME: Duration = Duration::from_secs(1);

/// The bytes a kept state takes: the row and what its sides own on the heap.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RowBytes;

impl Weighter<Uuid, MatchRow> for RowBytes {
    fn weight(&self, _id: &Uuid, row: &MatchRow) -> u64 {
        weight(row)
    }
}

/// The bytes `row` takes when kept.
pub(crate) fn weight(row: &MatchRow) -> u64 {
    let state = &row.state;
    let ships = state.rules.preset().fleet.len();
    let sides: usize = state
        .sides
        .iter()
        .map(|side| {
            std::mem::size_of_val(side.shots.as_slice())
                + std::mem::size_of_val(side.sunk.as_slice())
                + side.commitment.as_ref().map_or(0, String::capacity)
                + side.salt.as_ref().map_or(0, String::capacity)
                + ships * 24
        })
        .sum();
    (std::mem::size_of::<(Uuid, MatchRow)>() + sides + ENTRY_OVERHEAD) as u64
}

/// The match states a replica's lanes stored last, up to a memory budget, and the
/// database's clock as last read.
///
/// The states live in a `quick_cache` cache weighted by bytes (its eviction keeps the
/// entries used again and again, so a cycle over more matches than fit does not make
/// every access miss, as least-recently-used eviction would); hits and misses are counted
/// in `statki_kept_states_total{result}`.
pub(crate) struct MatchCache {
    rows: Cache<Uuid, MatchRow, RowBytes>,
    inner: Mutex<Inner>,
}

impl Default for MatchCache {
    fn default() -> Self {
        Self::with_bytes(DEFAULT_BYTES)
    }
}

#[derive(Default)]
struct Inner {
    clock: Option<ClockReading>,
    /// The latest time handed out: estimates never go back, even when a reading that
    /// travelled longer replaces one that travelled less.
    handed_out: Option<DateTime<Utc>>,
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
    /// A cache whose states take at most about `bytes`.
    pub fn with_bytes(bytes: u64) -> Self {
        let estimated = usize::try_from(bytes / 1024).unwrap_or(usize::MAX).max(16);
        MatchCache {
            rows: Cache::with_weighter(estimated, bytes.max(1), RowBytes),
            inner: Mutex::new(Inner::default()),
        }
    }

    /// Copies of the kept rows of every match in `ids`, with the estimated database time,
    /// if all of them are kept and the clock was read recently; otherwise nothing.
    ///
    /// The estimate is the last reading plus the local time elapsed since, so it trails the
    /// database's clock by the reading's delivery time and never runs ahead of it. A batch
    /// that cannot be stored as decided [`forget`](Self::forget)s what it took; one that
    /// is stored [`keep`](Self::keep)s the new states in their place. (Each match belongs
    /// to one lane, so no two batches of a replica take one match at once.)
    pub fn take(&self, ids: &[Uuid]) -> Option<(HashMap<Uuid, MatchRow>, DateTime<Utc>)> {
        let now = Instant::now();
        let clock = self.inner.lock().ok()?.clock.filter(|reading| {
            now.saturating_duration_since(reading.local) <= CLOCK_READING_LIFETIME
        })?;
        if ids.is_empty() {
            return None;
        }
        let mut rows = HashMap::with_capacity(ids.len());
        let (mut hits, mut misses) = (0u64, 0u64);
        for id in ids {
            match self.rows.get(id) {
                Some(row) => {
                    hits += 1;
                    rows.insert(*id, row);
                }
                None => misses += 1,
            }
        }
        metrics::counter!("statki_kept_states_total", "result" => "hit").increment(hits);
        metrics::counter!("statki_kept_states_total", "result" => "miss").increment(misses);
        if misses > 0 {
            return None;
        }
        let mut inner = self.inner.lock().ok()?;
        let estimate = inner
            .handed_out
            .map_or(clock.at(now), |floor| floor.max(clock.at(now)));
        inner.handed_out = Some(estimate);
        Some((rows, estimate))
    }

    /// Keeps `row` as its match's latest stored state, unless a later one is kept already.
    pub fn keep(&self, row: MatchRow) {
        if self
            .rows
            .peek(&row.id)
            .is_some_and(|kept| kept.last_seq >= row.last_seq)
        {
            return;
        }
        self.rows.insert(row.id, row);
    }

    /// Forgets the kept state of `id` if the match has moved past it (a commit announced
    /// `last_seq`, perhaps by another replica).
    pub fn moved_to(&self, id: &Uuid, last_seq: i64) {
        self.rows.remove_if(id, |kept| kept.last_seq < last_seq);
    }

    /// Forgets `id` (its match ended, its row moved on without this replica, or a batch
    /// decided from its kept state could not be stored).
    pub fn forget(&self, id: &Uuid) {
        self.rows.remove(id);
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

    /// How many states are kept.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// The bytes the kept states take, as weighed.
    #[cfg(test)]
    pub fn bytes(&self) -> u64 {
        self.rows.weight()
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
        cache.forget(&a);
        assert!(cache.take(&[a]).is_none(), "a forgotten row is gone");
        assert!(cache.take(&[b]).is_some());
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

    /// A state late in a battle: every shot fired on both sides.
    fn late_battle_row() -> MatchRow {
        let mut late = row(Uuid::new_v4(), 200);
        for side in &mut late.state.sides {
            side.shots = vec![
                crate::engine::game::ShotRecord {
                    cell: crate::engine::Cell::new(0, 0).expect("a cell"),
                    outcome: crate::engine::Outcome::Miss,
                };
                100
            ];
            side.sunk = (0..10).collect();
            side.commitment = Some("c".repeat(64));
            side.salt = Some("s".repeat(32));
        }
        late
    }

    #[test]
    fn the_default_budget_holds_fifty_thousand_matches_late_in_battle() {
        let each = weight(&late_battle_row());
        assert!(each >= std::mem::size_of::<MatchRow>() as u64);
        let held = DEFAULT_BYTES / each;
        assert!(held >= 50_000, "{held} states of {each} bytes");
    }

    #[test]
    fn the_budget_bounds_the_kept_bytes() {
        let each = weight(&late_battle_row());
        let cache = MatchCache::with_bytes(each * 1_000);
        for _ in 0..3_000 {
            let mut kept = late_battle_row();
            kept.id = Uuid::new_v4();
            cache.keep(kept);
        }
        assert!(
            cache.bytes() <= each * 1_000,
            "{} bytes kept",
            cache.bytes()
        );
        assert!(cache.len() >= 800, "{} states kept", cache.len());
    }

    #[test]
    fn cyclic_access_over_more_matches_than_fit_still_hits() {
        // Room for about 1,000 states; every match of 1,500 touched in turn, as a lane
        // does (take, then keep the new state), five times over.
        let cache = with_clock();
        let each = weight(&row(Uuid::new_v4(), 1));
        let cache = MatchCache {
            rows: Cache::with_weighter(1_000, each * 1_000, RowBytes),
            inner: cache.inner,
        };
        let ids: Vec<Uuid> = (0..1_500).map(|_| Uuid::new_v4()).collect();
        let (mut hits, mut touches) = (0, 0);
        for round in 0..6 {
            for id in &ids {
                let hit = cache.take(&[*id]).is_some();
                if round > 0 {
                    touches += 1;
                    hits += usize::from(hit);
                }
                cache.keep(row(*id, round + 1));
            }
        }
        // Least-recently-used eviction misses every time here; this keeps a steady share
        // (measured: 4,321 hits of 7,500).
        assert!(hits * 10 >= touches * 3, "{hits} hits of {touches} touches");
    }
}
