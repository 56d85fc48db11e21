//! Statki on a Citus cluster (migrations/0030_citus.sql): whether the database is
//! distributed, and the write path's statements in the form Citus routes to one shard
//! each (one match's rows), used there instead of the single batch statement of
//! [`super::matches::write`], which Citus cannot plan across shards.

use std::sync::{Arc, OnceLock};

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

use super::StoreError;
use super::bots::TurnRecord;
use super::matches::{Locked, MatchRecord, RowWrite, Write, Written};

/// What a database is: plain PostgreSQL, or distributed with Citus. It belongs to the
/// database, not to the process: one process may serve several (the tests do, plain and
/// Citus side by side), so whoever holds a database's pool keeps its kind in a
/// [`KindCell`] and passes it to the statements that differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Plain,
    /// The `citus` extension exists in the database.
    Citus,
}

impl Kind {
    /// Asks the database what it is (one query; keep the answer in a [`KindCell`]).
    pub async fn of(db: impl PgExecutor<'_>) -> Result<Kind, StoreError> {
        let citus: bool =
            sqlx::query_scalar("SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')")
                .fetch_one(db)
                .await?;
        Ok(if citus { Kind::Citus } else { Kind::Plain })
    }

    /// Whether the database is distributed with Citus.
    pub fn distributed(self) -> bool {
        self == Kind::Citus
    }
}

/// One database's [`Kind`], asked the first time it is needed and kept from then on, so
/// commands never pay a query for it. Made with the database's pool (the application keeps
/// one beside its pool); clones share the answer.
#[derive(Clone, Debug, Default)]
pub struct KindCell(Arc<OnceLock<Kind>>);

impl KindCell {
    /// The kind, asking the database through `db` only the first time.
    pub async fn get(&self, db: impl PgExecutor<'_>) -> Result<Kind, StoreError> {
        if let Some(kind) = self.0.get() {
            return Ok(*kind);
        }
        let kind = Kind::of(db).await?;
        Ok(*self.0.get_or_init(|| kind))
    }
}

/// [`super::matches::lock_many`] on Citus: a multi-shard `FOR UPDATE` is not supported, so
/// each row is locked by a statement of its own shard, in id order as there.
pub(super) async fn lock_many(
    conn: &mut PgConnection,
    ids: &[Uuid],
) -> Result<(Vec<Locked>, Option<DateTime<Utc>>), StoreError> {
    let mut ids = ids.to_vec();
    ids.sort_unstable();
    ids.dedup();
    let mut locked = Vec::with_capacity(ids.len());
    let mut now = None;
    for id in ids {
        if let Some((row, at)) = super::matches::lock_row(&mut *conn, id).await? {
            now = Some(at);
            locked.push(row);
        }
    }
    Ok((locked, now))
}

/// [`super::matches::write`] on Citus, inside the caller's transaction: per match, in id
/// order, the conditional row update (which also takes the row's lock), the event appends
/// and the bot turn, each a statement on that match's shard; then the idempotency answers
/// and the notification on the coordinator. A row that moved on fails the write with
/// [`StoreError::Moved`] and the caller rolls the transaction back.
pub(super) async fn write(
    conn: &mut PgConnection,
    at: DateTime<Utc>,
    batch: &Write<'_>,
) -> Result<Written, StoreError> {
    let mut rows: Vec<&RowWrite<'_>> = batch.rows.iter().collect();
    rows.sort_unstable_by_key(|row| row.id);
    if rows.iter().any(|row| row.unexpired_until.is_some()) {
        // The database's clock (the coordinator's), read before the rows are locked: a
        // deadline it has reached fails the write, as the batch statement's check does.
        let now = super::now(&mut *conn).await?;
        if rows
            .iter()
            .any(|row| row.unexpired_until.is_some_and(|until| now >= until))
        {
            return Err(StoreError::Moved);
        }
    }
    for row in rows {
        if !super::matches::write_row(&mut *conn, at, row).await? {
            return Err(StoreError::Moved);
        }
    }
    for append in batch.appends {
        let columns = super::events::columns(append.after, append.events)?;
        let mut appended = 0;
        for (((seq, actor), kind), payload) in columns
            .seqs
            .iter()
            .zip(&columns.actors)
            .zip(&columns.kinds)
            .zip(&columns.payloads)
        {
            appended += sqlx::query(
                "INSERT INTO match_events (match_id, seq, at, actor, kind, payload)
                 VALUES ($1, $2, $3, $4, $5, $6)
                 ON CONFLICT (match_id, seq) DO NOTHING",
            )
            .bind(append.match_id)
            .bind(seq)
            .bind(at)
            .bind(actor)
            .bind(kind)
            .bind(payload)
            .execute(&mut *conn)
            .await?
            .rows_affected();
        }
        if appended != append.events.len() as u64 {
            return Err(StoreError::Moved);
        }
    }
    super::idempotency::record(&mut *conn, batch.answers, batch.releases).await?;
    Ok(
        sqlx::query_as::<_, Written>("SELECT clock_timestamp() AS now")
            .fetch_one(&mut *conn)
            .await?,
    )
}

/// [`super::matches::claim_due`] on Citus: the due matches, earliest first, found by a read
/// of every shard (no lock), then each claimed by a statement of its own shard, skipped if
/// another transaction holds it or a command moved its wake-up since.
pub(super) async fn claim_due(
    conn: &mut PgConnection,
    now: DateTime<Utc>,
    limit: i64,
) -> Result<Vec<Locked>, StoreError> {
    let due: Vec<Uuid> =
        sqlx::query_scalar("SELECT id FROM matches WHERE wake_at <= $1 ORDER BY wake_at LIMIT $2")
            .bind(now)
            .bind(limit)
            .fetch_all(&mut *conn)
            .await?;
    let mut claimed = Vec::with_capacity(due.len());
    for id in due {
        let row = sqlx::query_as::<_, MatchRecord>(
            "SELECT id, snapshot, last_seq, created_at FROM matches
             WHERE id = $1 AND wake_at <= $2 FOR UPDATE SKIP LOCKED",
        )
        .bind(id)
        .bind(now)
        .fetch_optional(&mut *conn)
        .await?;
        claimed.extend(row.map(Locked::from));
    }
    Ok(claimed)
}

/// [`super::bots::claim_turns`] on Citus: the due bot turns (settled, or urgent by their
/// clock), found by a read of every shard, then each match and its turn claimed by a
/// statement of its own shard, skipped when another transaction holds either.
pub(super) async fn claim_turns(
    conn: &mut PgConnection,
    settled: DateTime<Utc>,
    setup_settled: DateTime<Utc>,
    urgent: DateTime<Utc>,
    limit: i64,
) -> Result<Vec<TurnRecord>, StoreError> {
    let due: Vec<Uuid> = sqlx::query_scalar(
        "SELECT match_id FROM (
             (SELECT match_id, since FROM bot_turns
              WHERE since <= $2 AND (setup OR since <= $1) ORDER BY since LIMIT $4)
             UNION
             (SELECT match_id, since FROM bot_turns
              WHERE deadline <= $3 ORDER BY deadline LIMIT $4)
         ) due ORDER BY since, match_id LIMIT $4",
    )
    .bind(settled)
    .bind(setup_settled)
    .bind(urgent)
    .bind(limit)
    .fetch_all(&mut *conn)
    .await?;
    let mut claimed = Vec::with_capacity(due.len());
    for id in due {
        let turn = sqlx::query_as::<_, TurnRecord>(
            "SELECT m.id, m.snapshot, m.last_seq, m.created_at, t.bot, p.bot_level
             FROM matches m
             JOIN bot_turns t ON t.match_id = m.id
             JOIN players p ON p.id = t.bot AND p.bot_level IS NOT NULL
             WHERE m.id = $1 AND t.match_id = $1
               AND ((t.since <= $3 AND (t.setup OR t.since <= $2)) OR t.deadline <= $4)
             FOR UPDATE OF m, t SKIP LOCKED",
        )
        .bind(id)
        .bind(settled)
        .bind(setup_settled)
        .bind(urgent)
        .fetch_optional(&mut *conn)
        .await?;
        claimed.extend(turn);
    }
    Ok(claimed)
}

/// [`super::queue::claim_waiting`] on Citus: up to `limit` live waiting entries, longest
/// waiting first, locked (skipping those another transaction holds); then the players in
/// a live match (a read of every shard) are left out, so a sweep may claim fewer.
pub(super) async fn claim_waiting(
    conn: &mut PgConnection,
    now: DateTime<Utc>,
    limit: i64,
) -> Result<Vec<super::queue::Entry>, StoreError> {
    let entries: Vec<super::queue::Entry> = sqlx::query_as(
        "SELECT player_id, ruleset, rating, joined_at, expires_at, match_id, paired_at
         FROM queue_entries
         WHERE match_id IS NULL AND expires_at > $1
         ORDER BY joined_at, player_id
         LIMIT $2
         FOR UPDATE SKIP LOCKED",
    )
    .bind(now)
    .bind(limit)
    .fetch_all(&mut *conn)
    .await?;
    if entries.is_empty() {
        return Ok(entries);
    }
    let players: Vec<Uuid> = entries.iter().map(|entry| entry.player_id).collect();
    let playing = super::player_matches::playing_of(&mut *conn, &players).await?;
    Ok(entries
        .into_iter()
        .filter(|entry| !playing.contains(&entry.player_id))
        .collect())
}

/// [`super::queue::claim_partner`] on Citus: the best live waiting entry is claimed as
/// there, but without the test for a running match (the queue is on the coordinator,
/// `player_matches` distributed by player); then that player's shard is asked, and a player
/// found playing is passed over (their entry stays locked until the transaction ends, which
/// only keeps other pairings from them) for the next best, at most `CANDIDATES` times.
pub(super) async fn claim_partner(
    conn: &mut PgConnection,
    player: Uuid,
    ruleset: &str,
    rating: f64,
    now: DateTime<Utc>,
    window: super::queue::Window,
) -> Result<Option<super::queue::Entry>, StoreError> {
    const CANDIDATES: usize = 8;
    let mut passed: Vec<Uuid> = Vec::new();
    for _ in 0..CANDIDATES {
        let entry: Option<super::queue::Entry> = sqlx::query_as(
            "SELECT player_id, ruleset, rating, joined_at, expires_at, match_id, paired_at
             FROM queue_entries q
             WHERE q.ruleset = $2 AND q.player_id <> $1 AND q.match_id IS NULL
               AND q.expires_at > $4 AND q.player_id <> ALL($8)
               AND abs(q.rating - $3) <= least($7::float8, $5::float8
                     + $6::float8 * greatest(0, extract(epoch FROM $4 - q.joined_at))::float8)
             ORDER BY abs(q.rating - $3), q.joined_at
             LIMIT 1
             FOR UPDATE SKIP LOCKED",
        )
        .bind(player)
        .bind(ruleset)
        .bind(rating)
        .bind(now)
        .bind(window.base)
        .bind(window.per_second)
        .bind(window.max)
        .bind(&passed)
        .fetch_optional(&mut *conn)
        .await?;
        let Some(entry) = entry else {
            return Ok(None);
        };
        if !super::player_matches::playing(&mut *conn, entry.player_id).await? {
            return Ok(Some(entry));
        }
        passed.push(entry.player_id);
    }
    Ok(None)
}

/// The hash Citus places a match by: PostgreSQL's `uuid_hash` (`hash_bytes` of the 16
/// bytes, Bob Jenkins' lookup3 as PostgreSQL has it), as a signed 32-bit value, which
/// falls in exactly one shard's `[shardminvalue, shardmaxvalue]`. Computed here so the
/// group commit can put a batch's matches on one worker without asking the database;
/// `tests/it/citus.rs` checks it against Citus's own `worker_hash`.
pub fn match_hash(id: Uuid) -> i32 {
    let bytes = id.as_bytes();
    let word =
        |at: usize| u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    let start = 0x9e37_79b9_u32.wrapping_add(16).wrapping_add(3_923_095);
    let (mut a, mut b, mut c) = (start, start, start);
    a = a.wrapping_add(word(0));
    b = b.wrapping_add(word(4));
    c = c.wrapping_add(word(8));
    // mix(a, b, c)
    a = a.wrapping_sub(c) ^ c.rotate_left(4);
    c = c.wrapping_add(b);
    b = b.wrapping_sub(a) ^ a.rotate_left(6);
    a = a.wrapping_add(c);
    c = c.wrapping_sub(b) ^ b.rotate_left(8);
    b = b.wrapping_add(a);
    a = a.wrapping_sub(c) ^ c.rotate_left(16);
    c = c.wrapping_add(b);
    b = b.wrapping_sub(a) ^ a.rotate_left(19);
    a = a.wrapping_add(c);
    c = c.wrapping_sub(b) ^ b.rotate_left(4);
    b = b.wrapping_add(a);
    // The last four bytes, then final(a, b, c).
    a = a.wrapping_add(word(12));
    c ^= b;
    c = c.wrapping_sub(b.rotate_left(14));
    a ^= c;
    a = a.wrapping_sub(c.rotate_left(11));
    b ^= a;
    b = b.wrapping_sub(a.rotate_left(25));
    c ^= b;
    c = c.wrapping_sub(b.rotate_left(16));
    a ^= c;
    a = a.wrapping_sub(c.rotate_left(4));
    b ^= a;
    b = b.wrapping_sub(a.rotate_left(14));
    c ^= b;
    c = c.wrapping_sub(b.rotate_left(24));
    c as i32
}

/// Where the shards of `matches` (and of every table co-located with it) are: each shard's
/// hash range and the worker group holding it, as Citus's metadata says now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Placements {
    /// `(shardminvalue, shardmaxvalue, groupid)`, by range.
    ranges: Vec<(i32, i32, i32)>,
}

impl Placements {
    /// The worker group holding `match_id`'s rows, if the map knows its shard.
    pub fn worker_of(&self, match_id: Uuid) -> Option<i32> {
        let hash = match_hash(match_id);
        self.ranges
            .iter()
            .find(|(min, max, _)| *min <= hash && hash <= *max)
            .map(|(_, _, group)| *group)
    }

    /// The worker groups, in order.
    pub fn workers(&self) -> Vec<i32> {
        let mut groups: Vec<i32> = self.ranges.iter().map(|(_, _, group)| *group).collect();
        groups.sort_unstable();
        groups.dedup();
        groups
    }
}

/// Reads the placements of `matches`' shards from Citus's metadata on the coordinator.
pub async fn placements(conn: &mut PgConnection) -> Result<Placements, StoreError> {
    let ranges = sqlx::query_as(
        "SELECT s.shardminvalue::int4, s.shardmaxvalue::int4, p.groupid
         FROM pg_dist_shard s JOIN pg_dist_placement p ON p.shardid = s.shardid
         WHERE s.logicalrelid = 'matches'::regclass
         ORDER BY 1",
    )
    .fetch_all(&mut *conn)
    .await?;
    Ok(Placements { ranges })
}
