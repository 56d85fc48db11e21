//! A player's matches (migration 0045) and record (migration 0059): one row per player a
//! match names and one record per player, kept by the write path with the match, so the
//! reads by player (their match list, record, "in a running match?", the open-match caps)
//! go down one index of one player, and on Citus to the one shard of that player.

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

use super::StoreError;
use super::listing::Cursor;
use crate::engine::{Match, Phase};

/// A match whose players' rows the write path stores: it was created, seated, finished or
/// cancelled by the change being written.
pub struct Mirror<'a> {
    pub match_id: Uuid,
    pub state: &'a Match,
    pub created_at: DateTime<Utc>,
}

/// The status a row keeps: the phase, with placement and battle as one, so a shot or a
/// placement never has to touch this table.
pub fn status(phase: Phase) -> &'static str {
    match phase {
        Phase::Waiting => "waiting",
        Phase::Placement | Phase::Battle => "playing",
        Phase::Finished => "finished",
        Phase::Cancelled => "cancelled",
    }
}

/// One player's row of a match.
#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct Row {
    pub player_id: Uuid,
    pub match_id: Uuid,
    pub role: String,
    pub opponent: Option<Uuid>,
    pub ruleset: String,
    pub ranked: bool,
    pub status: String,
    pub result: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// The rows `state` gives its players (without `ended_at`, which is the write's time).
pub fn rows_of(match_id: Uuid, state: &Match, created_at: DateTime<Utc>) -> Vec<Row> {
    let creator = state.player(0);
    let joiner = state.player(1);
    let invited = state.invited.filter(|_| joiner.is_none());
    let winner = state.result.map(|result| result.winner);
    let result_of = |player: Uuid| {
        winner.map(|winner| match winner {
            None => "draw".to_owned(),
            Some(winner) if winner == player => "win".to_owned(),
            Some(_) => "loss".to_owned(),
        })
    };
    let finished = state.phase == Phase::Finished;
    [
        (creator, "creator", joiner.or(invited)),
        (joiner, "joiner", creator),
        (invited, "invited", creator),
    ]
    .into_iter()
    .filter_map(|(player, role, opponent)| {
        let player = player?;
        Some(Row {
            player_id: player,
            match_id,
            role: role.to_owned(),
            opponent,
            ruleset: state.rules.ruleset.as_str().to_owned(),
            ranked: state.ranked,
            status: status(state.phase).to_owned(),
            result: if finished { result_of(player) } else { None },
            created_at,
        })
    })
    .collect()
}

/// Stores the players' rows of `mirrors` at `at` (a new row, or the row's new role, status
/// and result; `ended_at` is set once, when the match ends), in the caller's transaction.
/// `mirrors` are matches whose status this change moves (created, seated, ended,
/// cancelled): a finished one ended in this change, so its result is added to each
/// player's record here, once.
pub async fn store(
    conn: &mut PgConnection,
    mirrors: &[Mirror<'_>],
    at: DateTime<Utc>,
) -> Result<(), StoreError> {
    let mut rows: Vec<Row> = mirrors
        .iter()
        .flat_map(|mirror| rows_of(mirror.match_id, mirror.state, mirror.created_at))
        .collect();
    if rows.is_empty() {
        return Ok(());
    }
    // In key order, so two transactions storing rows of one player lock them alike.
    rows.sort_by_key(|row| (row.player_id, row.match_id));
    let column =
        |f: fn(&Row) -> Option<&str>| -> Vec<Option<&str>> { rows.iter().map(f).collect() };
    let roles = column(|row| Some(row.role.as_str()));
    let rulesets = column(|row| Some(row.ruleset.as_str()));
    let statuses = column(|row| Some(row.status.as_str()));
    let results = column(|row| row.result.as_deref());
    let players: Vec<Uuid> = rows.iter().map(|row| row.player_id).collect();
    let matches: Vec<Uuid> = rows.iter().map(|row| row.match_id).collect();
    let opponents: Vec<Option<Uuid>> = rows.iter().map(|row| row.opponent).collect();
    let ranked: Vec<bool> = rows.iter().map(|row| row.ranked).collect();
    let created: Vec<DateTime<Utc>> = rows.iter().map(|row| row.created_at).collect();
    sqlx::query(
        "INSERT INTO player_matches (player_id, match_id, role, opponent, ruleset, ranked,
                                     status, result, created_at, ended_at)
         SELECT player_id, match_id, role, opponent, ruleset, ranked, status, result,
                created_at, CASE WHEN status IN ('finished', 'cancelled') THEN $10 END
         FROM UNNEST($1::uuid[], $2::uuid[], $3::text[], $4::uuid[], $5::text[],
                     $6::boolean[], $7::text[], $8::text[], $9::timestamptz[])
              AS r(player_id, match_id, role, opponent, ruleset, ranked, status, result,
                   created_at)
         ORDER BY player_id, match_id
         ON CONFLICT (player_id, match_id) DO UPDATE
             SET role = excluded.role, opponent = excluded.opponent, status = excluded.status,
                 result = excluded.result,
                 ended_at = coalesce(player_matches.ended_at, excluded.ended_at)",
    )
    .bind(&players)
    .bind(&matches)
    .bind(&roles)
    .bind(&opponents)
    .bind(&rulesets)
    .bind(&ranked)
    .bind(&statuses)
    .bind(&results)
    .bind(&created)
    .bind(at)
    .execute(&mut *conn)
    .await?;
    add_to_records(conn, &rows).await
}

/// Adds the results among `rows` (sorted by player) to their players' records.
async fn add_to_records(conn: &mut PgConnection, rows: &[Row]) -> Result<(), StoreError> {
    let mut players: Vec<Uuid> = Vec::new();
    let mut counts: [Vec<i64>; 3] = [Vec::new(), Vec::new(), Vec::new()];
    for row in rows {
        let Some(result) = row.result.as_deref() else {
            continue;
        };
        if players.last() != Some(&row.player_id) {
            players.push(row.player_id);
            for count in &mut counts {
                count.push(0);
            }
        }
        let column = match result {
            "win" => 0,
            "loss" => 1,
            _ => 2,
        };
        if let Some(count) = counts[column].last_mut() {
            *count += 1;
        }
    }
    if players.is_empty() {
        return Ok(());
    }
    // In player order, as the rows above: two transactions adding to the same players lock
    // their records alike.
    sqlx::query(
        "INSERT INTO player_records (player_id, wins, losses, draws)
         SELECT * FROM UNNEST($1::uuid[], $2::bigint[], $3::bigint[], $4::bigint[])
         ORDER BY 1
         ON CONFLICT (player_id) DO UPDATE
             SET wins = player_records.wins + excluded.wins,
                 losses = player_records.losses + excluded.losses,
                 draws = player_records.draws + excluded.draws",
    )
    .bind(&players)
    .bind(&counts[0])
    .bind(&counts[1])
    .bind(&counts[2])
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// The ids of a page of `player`'s matches (as creator or joiner), newest first, after
/// `cursor`: one descent of the player's index, whichever page.
pub async fn page(
    db: impl PgExecutor<'_>,
    player: Uuid,
    cursor: Option<Cursor>,
    limit: i64,
) -> Result<Vec<Uuid>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT match_id FROM player_matches
         WHERE player_id = $1 AND role <> 'invited'
           AND ($2::timestamptz IS NULL OR (created_at, match_id) < ($2, $3))
         ORDER BY created_at DESC, match_id DESC LIMIT $4",
    )
    .bind(player)
    .bind(cursor.map(|c| c.created_at))
    .bind(cursor.map(|c| c.id))
    .bind(limit)
    .fetch_all(db)
    .await?)
}

/// A player's (`$1`) record: one row of `player_records` (migration 0059), whatever the
/// player's history.
pub const RECORD: &str = "SELECT wins, losses, draws FROM player_records WHERE player_id = $1";

/// A player's record: wins, losses and draws over finished matches.
pub async fn record(db: impl PgExecutor<'_>, player: Uuid) -> Result<(i64, i64, i64), StoreError> {
    Ok(sqlx::query_as(RECORD)
        .bind(player)
        .fetch_optional(db)
        .await?
        .unwrap_or((0, 0, 0)))
}

/// Counts every player's record afresh from their finished rows, for a database filled by
/// other means than [`store`] (a bulk load, a test's own rows).
pub async fn recount_records(conn: &mut PgConnection) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM player_records")
        .execute(&mut *conn)
        .await?;
    sqlx::query(
        "INSERT INTO player_records (player_id, wins, losses, draws)
         SELECT player_id, count(*) FILTER (WHERE result = 'win'),
                count(*) FILTER (WHERE result = 'loss'), count(*) FILTER (WHERE result = 'draw')
         FROM player_matches WHERE status = 'finished' GROUP BY player_id",
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// A player whose kept record differs from the results of their finished rows.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordMismatch {
    pub player_id: Uuid,
    /// Wins, losses and draws as `player_records` keeps them.
    pub kept: (i64, i64, i64),
    /// As `player_matches` counts them.
    pub counted: (i64, i64, i64),
}

/// Every player whose `player_records` row disagrees with `player_matches`, for
/// whole-database checks (a missing row counts as no result).
pub async fn record_mismatches(db: impl PgExecutor<'_>) -> Result<Vec<RecordMismatch>, StoreError> {
    let rows: Vec<(Uuid, i64, i64, i64, i64, i64, i64)> = sqlx::query_as(
        "SELECT coalesce(k.player_id, c.player_id),
                coalesce(k.wins, 0), coalesce(k.losses, 0), coalesce(k.draws, 0),
                coalesce(c.wins, 0), coalesce(c.losses, 0), coalesce(c.draws, 0)
         FROM player_records k
         FULL JOIN (SELECT player_id, count(*) FILTER (WHERE result = 'win') AS wins,
                           count(*) FILTER (WHERE result = 'loss') AS losses,
                           count(*) FILTER (WHERE result = 'draw') AS draws
                    FROM player_matches WHERE status = 'finished' GROUP BY player_id) c
           ON c.player_id = k.player_id
         WHERE (coalesce(k.wins, 0), coalesce(k.losses, 0), coalesce(k.draws, 0))
               IS DISTINCT FROM (coalesce(c.wins, 0), coalesce(c.losses, 0), coalesce(c.draws, 0))
         ORDER BY 1",
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(player_id, kw, kl, kd, cw, cl, cd)| RecordMismatch {
            player_id,
            kept: (kw, kl, kd),
            counted: (cw, cl, cd),
        })
        .collect())
}

/// Whether `player` sits in a match being placed or fought.
pub async fn playing(db: impl PgExecutor<'_>, player: Uuid) -> Result<bool, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM player_matches
                        WHERE player_id = $1 AND status = 'playing' AND role <> 'invited')",
    )
    .bind(player)
    .fetch_one(db)
    .await?)
}

/// Of `players`, those who sit in a match being placed or fought.
pub async fn playing_of(
    db: impl PgExecutor<'_>,
    players: &[Uuid],
) -> Result<Vec<Uuid>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT DISTINCT player_id FROM player_matches
         WHERE player_id = ANY($1) AND status = 'playing' AND role <> 'invited'",
    )
    .bind(players)
    .fetch_all(db)
    .await?)
}

/// What counts against a creator's cap: their matches waiting for an opponent plus those
/// they cancelled, created after `cancelled_since`.
pub async fn open_by(
    db: impl PgExecutor<'_>,
    creator: Uuid,
    cancelled_since: DateTime<Utc>,
) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM player_matches
         WHERE player_id = $1 AND role = 'creator'
           AND (status = 'waiting' OR (status = 'cancelled' AND created_at > $2))",
    )
    .bind(creator)
    .bind(cancelled_since)
    .fetch_one(db)
    .await?)
}

/// The direct challenges waiting for `target`.
pub async fn challenges_for(db: impl PgExecutor<'_>, target: Uuid) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM player_matches
         WHERE player_id = $1 AND role = 'invited' AND status = 'waiting'",
    )
    .bind(target)
    .fetch_one(db)
    .await?)
}

/// The rows of `matches`, in key order, for `statki verify` to compare with what the
/// matches give.
pub async fn of_matches(db: impl PgExecutor<'_>, matches: &[Uuid]) -> Result<Vec<Row>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT player_id, match_id, role, opponent, ruleset, ranked, status, result, created_at
         FROM player_matches WHERE match_id = ANY($1) ORDER BY player_id, match_id",
    )
    .bind(matches)
    .fetch_all(db)
    .await?)
}

/// How many rows there are, for `statki verify` to find rows of no match.
pub async fn count(db: impl PgExecutor<'_>) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar("SELECT count(*) FROM player_matches")
        .fetch_one(db)
        .await?)
}
