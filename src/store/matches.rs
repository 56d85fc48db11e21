//! Match rows: the current state of each match, kept in step with its events.

use chrono::{DateTime, Utc};
use sqlx::error::BoxDynError;
use sqlx::postgres::{PgTypeInfo, PgValueRef};
use sqlx::types::Json;
use sqlx::{PgExecutor, Postgres};
use uuid::Uuid;

use super::{StoreError, classify};
use crate::engine::{Event, Match, Snapshot};

/// A match as loaded from its row.
#[derive(Clone, Debug)]
pub struct MatchRow {
    pub id: Uuid,
    pub state: Match,
    pub last_seq: i64,
    pub created_at: DateTime<Utc>,
}

/// The `snapshot` column decoded straight from its text (no intermediate JSON tree on the
/// hot path), or why it does not decode: an unreadable snapshot fails its own match, not
/// every row fetched with it.
struct SnapshotColumn(Result<Snapshot, BoxDynError>);

impl sqlx::Type<Postgres> for SnapshotColumn {
    fn type_info() -> PgTypeInfo {
        <Json<Snapshot> as sqlx::Type<Postgres>>::type_info()
    }

    fn compatible(ty: &PgTypeInfo) -> bool {
        <Json<Snapshot> as sqlx::Type<Postgres>>::compatible(ty)
    }
}

impl<'r> sqlx::Decode<'r, Postgres> for SnapshotColumn {
    fn decode(value: PgValueRef<'r>) -> Result<Self, BoxDynError> {
        let decoded = <Json<Snapshot> as sqlx::Decode<'r, Postgres>>::decode(value);
        Ok(SnapshotColumn(decoded.map(|Json(snapshot)| snapshot)))
    }
}

/// A `matches` row as selected for loading the match.
#[derive(sqlx::FromRow)]
pub(super) struct MatchRecord {
    pub(super) id: Uuid,
    snapshot: SnapshotColumn,
    last_seq: i64,
    created_at: DateTime<Utc>,
}

impl TryFrom<MatchRecord> for MatchRow {
    type Error = StoreError;

    fn try_from(record: MatchRecord) -> Result<Self, StoreError> {
        let snapshot = record
            .snapshot
            .0
            .map_err(|e| StoreError::Corrupt(format!("snapshot: {e}")))?;
        let state =
            Match::from_snapshot(&snapshot).map_err(|e| StoreError::Corrupt(e.to_string()))?;
        Ok(MatchRow {
            id: record.id,
            state,
            last_seq: record.last_seq,
            created_at: record.created_at,
        })
    }
}

/// A match row locked with the database's time.
#[derive(sqlx::FromRow)]
struct LockedRecord {
    #[sqlx(flatten)]
    record: MatchRecord,
    now: DateTime<Utc>,
}

impl From<MatchRecord> for Locked {
    fn from(record: MatchRecord) -> Self {
        Locked {
            id: record.id,
            row: record.try_into(),
        }
    }
}

fn finish_reason(reason: crate::engine::FinishReason) -> String {
    serde_json::to_value(reason)
        .ok()
        .and_then(|value| value.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn snapshot_json(state: &Match) -> Result<Json<Snapshot>, StoreError> {
    Ok(Json(state.snapshot()))
}

/// Inserts a new match row in `state` after its first `last_seq` events, which the caller
/// appends in the same transaction, and its players' rows ([`super::player_matches`]).
pub async fn insert(
    conn: &mut sqlx::PgConnection,
    id: Uuid,
    state: &Match,
    last_seq: i64,
    at: DateTime<Utc>,
) -> Result<(), StoreError> {
    let creator = state
        .player(0)
        .ok_or_else(|| StoreError::Corrupt("no creator".into()))?;
    let row = columns(state)?;
    let [first, second] = to_act(state);
    // The match row and, when a bot must act in it, its bot turn: one statement.
    sqlx::query(
        "WITH inserted AS (
             INSERT INTO matches (id, ruleset, ranked, phase, creator, joiner, invited, turn,
                                  deadline, wake_at, winner, reason, last_seq, snapshot,
                                  created_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9, $10, $11, $12, $13, $14, $14)
             RETURNING id
         )
         INSERT INTO bot_turns (match_id, bot, setup, since, deadline)
         SELECT i.id, p.id, $4 <> 'battle', $14, $9
         FROM inserted i JOIN players p ON p.id IN ($15::uuid, $16::uuid)
         WHERE p.bot_level IS NOT NULL
         ORDER BY p.id LIMIT 1",
    )
    .bind(id)
    .bind(state.rules.ruleset.as_str())
    .bind(state.ranked)
    .bind(row.phase)
    .bind(creator)
    .bind(row.joiner)
    .bind(state.invited)
    .bind(row.turn)
    .bind(row.deadline)
    .bind(row.winner)
    .bind(row.reason)
    .bind(last_seq)
    .bind(row.snapshot)
    .bind(at)
    .bind(first)
    .bind(second)
    .execute(&mut *conn)
    .await
    .map_err(classify)?;
    let mirror = super::player_matches::Mirror {
        match_id: id,
        state,
        created_at: at,
    };
    super::player_matches::store(conn, &[mirror], at).await
}

/// The players who must act next in `state`, if any: the invited player of a waiting
/// match, each seat still placing its fleet, the player on turn. The write path queues a
/// bot turn when one of them is a bot.
fn to_act(state: &Match) -> [Option<Uuid>; 2] {
    use crate::engine::Phase;
    match state.phase {
        Phase::Waiting => [state.invited, None],
        Phase::Placement => {
            let placing = |seat: usize| {
                state
                    .sides
                    .get(seat)
                    .filter(|side| !side.fleet.is_locked())
                    .and_then(|side| side.player)
            };
            [placing(0), placing(1)]
        }
        Phase::Battle => [state.turn.and_then(|seat| state.player(seat)), None],
        _ => [None, None],
    }
}

/// Loads and locks a match row for the rest of the transaction, with the database's time.
pub async fn lock(
    db: impl PgExecutor<'_>,
    id: Uuid,
) -> Result<Option<(MatchRow, DateTime<Utc>)>, StoreError> {
    let row = sqlx::query_as::<_, LockedRecord>(LOCK_ONE)
        .bind(id)
        .fetch_optional(db)
        .await?;
    row.map(|locked| Ok((locked.record.try_into()?, locked.now)))
        .transpose()
}

const LOCK_ONE: &str = "SELECT id, snapshot, last_seq, created_at, clock_timestamp() AS now
     FROM matches WHERE id = $1 FOR UPDATE";

/// [`lock`], with an unreadable row told apart as [`Locked`] tells it.
pub(super) async fn lock_row(
    db: impl PgExecutor<'_>,
    id: Uuid,
) -> Result<Option<(Locked, DateTime<Utc>)>, StoreError> {
    let row = sqlx::query_as::<_, LockedRecord>(LOCK_ONE)
        .bind(id)
        .fetch_optional(db)
        .await?;
    Ok(row.map(|locked| (Locked::from(locked.record), locked.now)))
}

/// A row the write path locked: the match, or why its row could not be read (one unreadable
/// match must not fail the others locked with it).
pub struct Locked {
    pub id: Uuid,
    pub row: Result<MatchRow, StoreError>,
}

/// Locks the rows of a batch's matches, in id order.
pub const LOCK_MANY: &str = "SELECT id, snapshot, last_seq, created_at, clock_timestamp() AS now
         FROM matches WHERE id = ANY($1) ORDER BY id FOR UPDATE";

/// Loads and locks the rows of `ids` in id order, so two transactions locking overlapping
/// sets never deadlock; with the database's time. Ids without a row are left out.
pub async fn lock_many(
    conn: &mut sqlx::PgConnection,
    kind: super::citus::Kind,
    ids: &[Uuid],
) -> Result<(Vec<Locked>, Option<DateTime<Utc>>), StoreError> {
    if kind.distributed() {
        return super::citus::lock_many(conn, ids).await;
    }
    let rows = sqlx::query_as::<_, LockedRecord>(LOCK_MANY)
        .bind(ids)
        .fetch_all(&mut *conn)
        .await?;
    let now = rows.last().map(|locked| locked.now);
    let locked = rows
        .into_iter()
        .map(|locked| Locked::from(locked.record))
        .collect();
    Ok((locked, now))
}

/// Loads a match row without locking it.
pub async fn get(db: impl PgExecutor<'_>, id: Uuid) -> Result<Option<MatchRow>, StoreError> {
    let row = sqlx::query_as::<_, MatchRecord>(
        "SELECT id, snapshot, last_seq, created_at FROM matches WHERE id = $1",
    )
    .bind(id)
    .fetch_optional(db)
    .await?;
    row.map(MatchRow::try_from).transpose()
}

/// The columns of a match row that copy its state.
pub(super) struct Columns {
    pub(super) phase: &'static str,
    pub(super) joiner: Option<Uuid>,
    pub(super) turn: Option<Uuid>,
    pub(super) deadline: Option<DateTime<Utc>>,
    pub(super) winner: Option<Uuid>,
    pub(super) reason: Option<String>,
    pub(super) snapshot: Json<Snapshot>,
}

pub(super) fn columns(state: &Match) -> Result<Columns, StoreError> {
    Ok(Columns {
        phase: state.phase.as_str(),
        joiner: state.player(1),
        turn: state.turn.and_then(|seat| state.player(seat)),
        deadline: state.deadline,
        winner: state.result.and_then(|result| result.winner),
        reason: state.result.map(|result| finish_reason(result.reason)),
        snapshot: snapshot_json(state)?,
    })
}

/// A match row's new state after its events up to `last_seq`, written only if the row
/// still ends at `after` and, with `unexpired_until`, the database's clock has not reached
/// that deadline.
pub struct RowWrite<'a> {
    pub id: Uuid,
    pub state: &'a Match,
    pub after: i64,
    pub last_seq: i64,
    pub unexpired_until: Option<DateTime<Utc>>,
}

/// Events to append to a match's log after seq `after`.
pub struct Append<'a> {
    pub match_id: Uuid,
    pub after: i64,
    pub events: &'a [Event],
}

/// Everything one write of the write path stores, in one statement: the events appended to
/// every changed match, the rows' new state, the answers recorded under idempotency keys and
/// the keys given back.
pub struct Write<'a> {
    pub appends: &'a [Append<'a>],
    pub rows: &'a [RowWrite<'a>],
    pub answers: &'a [super::idempotency::Answer<'a>],
    pub releases: &'a [super::idempotency::KeyRef<'a>],
}

/// What a [`write`] did: the database's time during it.
#[derive(sqlx::FromRow)]
pub struct Written {
    pub now: DateTime<Utc>,
}

/// The one statement of [`write`] on plain PostgreSQL.
pub const WRITE: &str = "WITH locked AS (
             SELECT id FROM matches
             WHERE id = ANY($7::uuid[] || $2::uuid[])
             ORDER BY id FOR UPDATE
         ), appended AS (
             INSERT INTO match_events (match_id, seq, at, actor, kind, payload)
             SELECT match_id, seq, $1, actor, kind, payload
             FROM UNNEST($2::uuid[], $3::bigint[], $4::uuid[], $5::text[], $6::jsonb[])
                  AS e(match_id, seq, actor, kind, payload)
             WHERE (SELECT count(*) FROM locked) >= 0
             ON CONFLICT (match_id, seq) DO NOTHING
             RETURNING 1
         ), updated AS (
             UPDATE matches SET phase = u.phase, joiner = u.joiner, turn = u.turn,
                    deadline = u.deadline,
                    wake_at = CASE WHEN u.deadline IS NULL THEN NULL
                                   WHEN matches.wake_at IS NULL OR u.deadline < matches.wake_at
                                   THEN u.deadline
                                   ELSE matches.wake_at END,
                    winner = u.winner, reason = u.reason,
                    last_seq = u.last_seq, snapshot = u.snapshot, updated_at = $1,
                    ended_at = CASE WHEN u.phase IN ('finished', 'cancelled')
                                    THEN coalesce(matches.ended_at, $1) END
             FROM UNNEST($7::uuid[], $8::text[], $9::uuid[], $10::uuid[], $11::timestamptz[],
                         $12::uuid[], $13::text[], $14::bigint[], $15::jsonb[], $21::bigint[],
                         $22::timestamptz[])
                  AS u(id, phase, joiner, turn, deadline, winner, reason, last_seq, snapshot,
                       after, unexpired_until)
             WHERE matches.id = u.id AND matches.last_seq = u.after
               AND (SELECT count(*) FROM locked) >= 0
               AND (u.unexpired_until IS NULL OR clock_timestamp() < u.unexpired_until)
             RETURNING 1
         ), answered AS (
             UPDATE match_command_keys k SET response = a.response
             FROM UNNEST($27::uuid[], $16::uuid[], $17::text[], $18::jsonb[])
                  AS a(match_id, player_id, key, response)
             WHERE k.match_id = a.match_id AND k.player_id = a.player_id AND k.key = a.key
             RETURNING 1
         ), released AS (
             DELETE FROM match_command_keys k
             USING UNNEST($28::uuid[], $19::uuid[], $20::text[]) AS r(match_id, player_id, key)
             WHERE k.match_id = r.match_id AND k.player_id = r.player_id AND k.key = r.key
             RETURNING 1
         ), bots_due AS (
             SELECT DISTINCT ON (u.id) u.id, p.id AS bot, u.phase <> 'battle' AS setup,
                    u.deadline
             FROM UNNEST($7::uuid[], $8::text[], $11::timestamptz[], $25::uuid[], $26::uuid[])
                  AS u(id, phase, deadline, first, second)
             JOIN players p ON p.id IN (u.first, u.second) AND p.bot_level IS NOT NULL
             WHERE (SELECT count(*) FROM locked) >= 0
             ORDER BY u.id, p.id
         ), bots_queued AS (
             INSERT INTO bot_turns (match_id, bot, setup, since, deadline)
             SELECT id, bot, setup, $1, deadline FROM bots_due ORDER BY id
             ON CONFLICT (match_id) DO UPDATE
                 SET bot = excluded.bot, setup = excluded.setup, since = excluded.since,
                     deadline = excluded.deadline
             RETURNING 1
         ), bots_done AS (
             DELETE FROM bot_turns
             WHERE match_id = ANY($7::uuid[])
               AND match_id NOT IN (SELECT id FROM bots_due)
               AND (SELECT count(*) FROM locked) >= 0
             RETURNING 1
         )
         SELECT CASE WHEN (SELECT count(*) FROM appended) = $23
                          AND (SELECT count(*) FROM updated) = $24
                     THEN clock_timestamp() ELSE statki_rows_moved() END AS now,
                (SELECT count(*) FROM answered) AS answered,
                (SELECT count(*) FROM released) AS released";

/// Stores a [`Write`] in one round trip and one statement, so it is atomic even outside a
/// transaction. Each row is written only if it still ends at the sequence number its change
/// was decided on (`after`) and, with `unexpired_until`, only if the database's clock has not
/// reached that deadline; if any row fails that, the statement stores nothing and the
/// answer is [`StoreError::Moved`].
///
/// On Citus the write is several statements, one match's shard each
/// ([`super::citus::write`]), and needs the caller's transaction.
pub async fn write(
    conn: &mut sqlx::PgConnection,
    kind: super::citus::Kind,
    at: DateTime<Utc>,
    batch: &Write<'_>,
) -> Result<Written, StoreError> {
    if kind.distributed() {
        return super::citus::write(conn, at, batch).await;
    }
    let total = batch.appends.iter().map(|a| a.events.len()).sum();
    let mut event_matches = Vec::with_capacity(total);
    let mut all = super::events::Columns::with_capacity(total);
    for append in batch.appends {
        let these = super::events::columns(append.after, append.events)?;
        event_matches.extend(std::iter::repeat_n(append.match_id, append.events.len()));
        all.extend(these);
    }
    let rows = RowColumns::of(batch.rows)?;
    let answers = super::idempotency::AnswerColumns::of(batch.answers);
    let releases = super::idempotency::KeyColumns::of(batch.releases);
    sqlx::query_as::<_, Written>(WRITE)
        .bind(at)
        .bind(&event_matches)
        .bind(&all.seqs)
        .bind(&all.actors)
        .bind(&all.kinds)
        .bind(&all.payloads)
        .bind(&rows.ids)
        .bind(&rows.phases)
        .bind(&rows.joiners)
        .bind(&rows.turns)
        .bind(&rows.deadlines)
        .bind(&rows.winners)
        .bind(&rows.reasons)
        .bind(&rows.seqs)
        .bind(&rows.snapshots)
        .bind(&answers.players)
        .bind(&answers.keys)
        .bind(&answers.responses)
        .bind(&releases.players)
        .bind(&releases.keys)
        .bind(&rows.afters)
        .bind(&rows.unexpired_until)
        .bind(i64::try_from(total).unwrap_or(i64::MAX))
        .bind(i64::try_from(batch.rows.len()).unwrap_or(i64::MAX))
        .bind(&rows.first_to_act)
        .bind(&rows.second_to_act)
        .bind(&answers.matches)
        .bind(&releases.matches)
        .fetch_one(conn)
        .await
        .map_err(|error| match &error {
            sqlx::Error::Database(db) if db.code().as_deref() == Some(SERIALIZATION_FAILURE) => {
                StoreError::Moved
            }
            _ => classify(error),
        })
}

/// One row of a [`Write`] on Citus: its new state, only if it still ends at `after`; then
/// its bot turn. Whether the row was written. (Citus refuses `clock_timestamp()` in the
/// filter of a distributed update, so the caller checks `unexpired_until`.)
pub(super) async fn write_row(
    conn: &mut sqlx::PgConnection,
    at: DateTime<Utc>,
    row: &RowWrite<'_>,
) -> Result<bool, StoreError> {
    let copy = columns(row.state)?;
    let written = sqlx::query(
        "UPDATE matches SET phase = $2, joiner = $3, turn = $4, deadline = $5,
                wake_at = CASE WHEN $5::timestamptz IS NULL THEN NULL
                               WHEN wake_at IS NULL OR $5 < wake_at THEN $5
                               ELSE wake_at END,
                winner = $6, reason = $7, last_seq = $8, snapshot = $9, updated_at = $10,
                ended_at = CASE WHEN $2 IN ('finished', 'cancelled')
                                THEN coalesce(ended_at, $10) END
         WHERE id = $1 AND last_seq = $11",
    )
    .bind(row.id)
    .bind(copy.phase)
    .bind(copy.joiner)
    .bind(copy.turn)
    .bind(copy.deadline)
    .bind(copy.winner)
    .bind(copy.reason)
    .bind(row.last_seq)
    .bind(copy.snapshot)
    .bind(at)
    .bind(row.after)
    .execute(&mut *conn)
    .await?
    .rows_affected()
        == 1;
    if !written {
        return Ok(false);
    }
    let [first, second] = to_act(row.state);
    let bot: Option<Uuid> = match (first, second) {
        (None, None) => None,
        _ => {
            sqlx::query_scalar(
                "SELECT id FROM players WHERE id IN ($1, $2) AND bot_level IS NOT NULL
                 ORDER BY id LIMIT 1",
            )
            .bind(first)
            .bind(second)
            .fetch_optional(&mut *conn)
            .await?
        }
    };
    match bot {
        Some(bot) => {
            sqlx::query(
                "INSERT INTO bot_turns (match_id, bot, setup, since, deadline)
                 VALUES ($1, $2, $3, $4, $5)
                 ON CONFLICT (match_id) DO UPDATE
                     SET bot = excluded.bot, setup = excluded.setup, since = excluded.since,
                         deadline = excluded.deadline",
            )
            .bind(row.id)
            .bind(bot)
            .bind(copy.phase != "battle")
            .bind(at)
            .bind(copy.deadline)
            .execute(&mut *conn)
            .await?;
        }
        None => {
            sqlx::query("DELETE FROM bot_turns WHERE match_id = $1")
                .bind(row.id)
                .execute(&mut *conn)
                .await?;
        }
    }
    Ok(true)
}

/// What `statki_rows_moved()` fails a write with (and nothing else can: transactions run at
/// read committed).
const SERIALIZATION_FAILURE: &str = "40001";

/// The state columns of several rows, as arrays for one `UNNEST` update.
struct RowColumns {
    ids: Vec<Uuid>,
    phases: Vec<&'static str>,
    joiners: Vec<Option<Uuid>>,
    turns: Vec<Option<Uuid>>,
    deadlines: Vec<Option<DateTime<Utc>>>,
    winners: Vec<Option<Uuid>>,
    reasons: Vec<Option<String>>,
    seqs: Vec<i64>,
    snapshots: Vec<Json<Snapshot>>,
    afters: Vec<i64>,
    unexpired_until: Vec<Option<DateTime<Utc>>>,
    first_to_act: Vec<Option<Uuid>>,
    second_to_act: Vec<Option<Uuid>>,
}

impl RowColumns {
    fn of(rows: &[RowWrite<'_>]) -> Result<Self, StoreError> {
        let n = rows.len();
        let mut columns = RowColumns {
            ids: Vec::with_capacity(n),
            phases: Vec::with_capacity(n),
            joiners: Vec::with_capacity(n),
            turns: Vec::with_capacity(n),
            deadlines: Vec::with_capacity(n),
            winners: Vec::with_capacity(n),
            reasons: Vec::with_capacity(n),
            seqs: Vec::with_capacity(n),
            snapshots: Vec::with_capacity(n),
            afters: Vec::with_capacity(n),
            unexpired_until: Vec::with_capacity(n),
            first_to_act: Vec::with_capacity(n),
            second_to_act: Vec::with_capacity(n),
        };
        for row in rows {
            let copy = self::columns(row.state)?;
            columns.ids.push(row.id);
            columns.phases.push(copy.phase);
            columns.joiners.push(copy.joiner);
            columns.turns.push(copy.turn);
            columns.deadlines.push(copy.deadline);
            columns.winners.push(copy.winner);
            columns.reasons.push(copy.reason);
            columns.seqs.push(row.last_seq);
            columns.snapshots.push(copy.snapshot);
            columns.afters.push(row.after);
            columns.unexpired_until.push(row.unexpired_until);
            let [first, second] = to_act(row.state);
            columns.first_to_act.push(first);
            columns.second_to_act.push(second);
        }
        Ok(columns)
    }
}

/// What counts against a new match's caps, with `creator` (and `target`, a challenged
/// player) locked for this transaction, in id order, so concurrent creations are counted one
/// by one: the creator's matches waiting for an opponent plus those they cancelled created
/// within the last `cool_down_seconds` (so creating and withdrawing at once cannot flood
/// anyone), and the direct challenges waiting for `target`.
pub async fn count_open_locked(
    tx: &mut sqlx::PgConnection,
    creator: Uuid,
    target: Option<Uuid>,
    cool_down_seconds: i64,
) -> Result<(i64, i64), StoreError> {
    let ids: Vec<Uuid> = [Some(creator), target].into_iter().flatten().collect();
    sqlx::query("SELECT 1 FROM players WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE")
        .bind(&ids)
        .fetch_all(&mut *tx)
        .await?;
    // The players' own rows, one player (on Citus one shard) each.
    let cancelled_since =
        super::now(&mut *tx).await? - chrono::TimeDelta::seconds(cool_down_seconds);
    let open = super::player_matches::open_by(&mut *tx, creator, cancelled_since).await?;
    let challenges = match target {
        Some(target) => super::player_matches::challenges_for(&mut *tx, target).await?,
        None => 0,
    };
    Ok((open, challenges))
}

/// The clock's claim of due matches (see [`claim_due`]).
pub const CLAIM_DUE: &str = "SELECT id, snapshot, last_seq, created_at FROM matches
     WHERE wake_at <= $1 ORDER BY wake_at LIMIT $2 FOR UPDATE SKIP LOCKED";

/// Matches whose clock may have run out by `now` (their `wake_at`, a lower bound of the
/// deadline, has passed), earliest first, locked for this transaction; rows another
/// transaction holds are skipped, not waited for. Each row is read as locked, so a command
/// that committed first is seen; the caller expires the due ones and [`rearm`]s the rest.
///
/// On Citus a multi-shard `FOR UPDATE` is not supported: [`super::citus::claim_due`] finds
/// the due matches with a read of every shard and claims each on its own shard.
pub async fn claim_due(
    conn: &mut sqlx::PgConnection,
    kind: super::citus::Kind,
    now: DateTime<Utc>,
    limit: i64,
) -> Result<Vec<Locked>, StoreError> {
    if kind.distributed() {
        return super::citus::claim_due(conn, now, limit).await;
    }
    let rows = sqlx::query_as::<_, MatchRecord>(CLAIM_DUE)
        .bind(now)
        .bind(limit)
        .fetch_all(conn)
        .await?;
    Ok(rows.into_iter().map(Locked::from).collect())
}

/// Sets each claimed match's `wake_at` to its real deadline: the clock woke for it early,
/// because commands moved the deadline later since.
pub async fn rearm(
    db: impl PgExecutor<'_>,
    rows: &[(Uuid, Option<DateTime<Utc>>)],
) -> Result<(), StoreError> {
    let ids: Vec<Uuid> = rows.iter().map(|(id, _)| *id).collect();
    let deadlines: Vec<Option<DateTime<Utc>>> = rows.iter().map(|(_, d)| *d).collect();
    sqlx::query(
        "UPDATE matches SET wake_at = r.deadline
         FROM UNNEST($1::uuid[], $2::timestamptz[]) AS r(id, deadline)
         WHERE matches.id = r.id",
    )
    .bind(&ids)
    .bind(&deadlines)
    .execute(db)
    .await?;
    Ok(())
}

/// Folds the phase deltas the `matches` triggers appended into the per-phase counts; costs
/// the phase changes since the last fold.
pub const FOLD_PHASE_COUNTS: &str = "WITH folded AS (
         DELETE FROM match_phase_deltas RETURNING phase, delta
     )
     INSERT INTO match_phase_counts (phase, n)
     SELECT phase, sum(delta) FROM folded GROUP BY phase ORDER BY phase
     ON CONFLICT (phase) DO UPDATE SET n = match_phase_counts.n + excluded.n";

/// Matches per phase: the folded counts plus the deltas not folded yet.
pub const PHASE_COUNTS: &str = "SELECT phase, sum(n)::bigint AS n FROM (
         SELECT phase, n FROM match_phase_counts
         UNION ALL SELECT phase, delta::bigint FROM match_phase_deltas
     ) AS c GROUP BY phase ORDER BY phase";

/// Count of matches per phase, for metrics, from the counts the triggers keep (never a
/// count of the table). Folds the pending deltas first unless another caller is folding.
///
/// On Citus the triggers cannot write to the coordinator from a shard (migration 0030
/// drops them), so the counts are a count of every shard, in parallel.
pub async fn count_by_phase(
    db: &sqlx::PgPool,
    kind: super::citus::Kind,
) -> Result<Vec<(String, i64)>, StoreError> {
    let mut tx = db.begin().await?;
    if kind.distributed() {
        let counts = sqlx::query_as(
            "SELECT phase, count(*) AS n FROM matches GROUP BY phase ORDER BY phase",
        )
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        return Ok(counts);
    }
    if super::try_advisory_xact_lock(&mut *tx, PHASE_FOLD_LOCK).await? {
        sqlx::query(FOLD_PHASE_COUNTS).execute(&mut *tx).await?;
    }
    let counts = sqlx::query_as(PHASE_COUNTS).fetch_all(&mut *tx).await?;
    tx.commit().await?;
    Ok(counts)
}

/// The advisory lock one folder of phase deltas holds: "statkcnt" as a big-endian integer.
const PHASE_FOLD_LOCK: i64 = i64::from_be_bytes(*b"statkcnt");

/// Every match id, for whole-database checks in tests.
#[cfg(feature = "test-support")]
pub async fn all_ids(db: impl PgExecutor<'_>) -> Result<Vec<Uuid>, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT id FROM matches ORDER BY created_at")
            .fetch_all(db)
            .await?,
    )
}

/// Matches with a running clock due after `since`, with that deadline.
pub async fn with_deadline_after(
    db: impl PgExecutor<'_>,
    since: DateTime<Utc>,
) -> Result<Vec<(Uuid, DateTime<Utc>)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT id, deadline FROM matches
             WHERE wake_at IS NOT NULL AND deadline > $1 ORDER BY deadline",
    )
    .bind(since)
    .fetch_all(db)
    .await?)
}

/// Where each of a list of matches stands.
pub const POSITIONS: &str = "SELECT id, last_seq FROM matches WHERE id = ANY($1)";

/// The latest sequence number of each of `ids` (one query for any number of matches).
pub async fn positions(
    db: impl PgExecutor<'_>,
    ids: &[Uuid],
) -> Result<Vec<(Uuid, i64)>, StoreError> {
    Ok(sqlx::query_as(POSITIONS).bind(ids).fetch_all(db).await?)
}

/// Whether `player` sits in a match being placed or fought.
pub async fn in_live_match(db: impl PgExecutor<'_>, player: Uuid) -> Result<bool, StoreError> {
    super::player_matches::playing(db, player).await
}

/// A match row's columns as stored, for checking them against the event log.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct StoredColumns {
    pub id: Uuid,
    pub ruleset: String,
    pub ranked: bool,
    pub phase: String,
    pub creator: Uuid,
    pub joiner: Option<Uuid>,
    pub winner: Option<Uuid>,
    pub reason: Option<String>,
    pub last_seq: i64,
    pub snapshot: serde_json::Value,
    pub created_at: DateTime<Utc>,
}

/// Up to `limit` match rows as stored, in id order after `after` (from the first when
/// `None`): a walk over every match holds one page at a time, however many there are, and
/// each page is one descent of the primary key.
pub async fn columns_page(
    db: impl PgExecutor<'_>,
    after: Option<Uuid>,
    limit: i64,
) -> Result<Vec<StoredColumns>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT id, ruleset, ranked, phase, creator, joiner, winner, reason, last_seq, snapshot,
                created_at
         FROM matches WHERE $1::uuid IS NULL OR id > $1 ORDER BY id LIMIT $2",
    )
    .bind(after)
    .bind(limit)
    .fetch_all(db)
    .await?)
}

/// Makes the caller's transaction a read-only snapshot of the whole database.
pub async fn read_only_snapshot(db: impl PgExecutor<'_>) -> Result<(), StoreError> {
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        .execute(db)
        .await?;
    Ok(())
}
