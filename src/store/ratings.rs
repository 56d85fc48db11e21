//! Ladder standings (`ratings`) and their append-only history (`rating_changes`).

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

use super::StoreError;
use crate::engine::{Rating, RatingChange, Score};

/// A player's current standing on one ladder.
#[derive(Clone, Debug, PartialEq)]
pub struct Standing {
    pub ruleset: String,
    pub player_id: Uuid,
    pub rating: Rating,
    pub games: i64,
    pub wins: i64,
    pub losses: i64,
    pub draws: i64,
}

/// A standing with its place on the ladder and the player's name.
#[derive(Clone, Debug, PartialEq)]
pub struct Ranked {
    pub rank: i64,
    pub name: String,
    pub standing: Standing,
}

/// One row of the history.
#[derive(Clone, Debug, PartialEq)]
pub struct ChangeRow {
    pub match_id: Uuid,
    pub seq: i64,
    pub ruleset: String,
    pub opponent_id: Uuid,
    pub at: DateTime<Utc>,
    pub change: RatingChange,
}

/// A `ratings` row as selected: the standing's columns, games counted as `bigint`.
#[derive(sqlx::FromRow)]
struct StandingRow {
    ruleset: String,
    player_id: Uuid,
    rating: f64,
    deviation: f64,
    volatility: f64,
    games: i64,
    wins: i64,
    losses: i64,
    draws: i64,
}

impl From<StandingRow> for Standing {
    fn from(row: StandingRow) -> Self {
        Standing {
            ruleset: row.ruleset,
            player_id: row.player_id,
            rating: Rating {
                rating: row.rating,
                deviation: row.deviation,
                volatility: row.volatility,
            },
            games: row.games,
            wins: row.wins,
            losses: row.losses,
            draws: row.draws,
        }
    }
}

/// A ladder row: a standing with its rank and the player's name.
#[derive(sqlx::FromRow)]
struct RankedRow {
    rank: i64,
    name: String,
    #[sqlx(flatten)]
    standing: StandingRow,
}

impl From<RankedRow> for Ranked {
    fn from(row: RankedRow) -> Self {
        Ranked {
            rank: row.rank,
            name: row.name,
            standing: row.standing.into(),
        }
    }
}

/// A `rating_changes` row as selected.
#[derive(sqlx::FromRow)]
struct ChangeRecord {
    match_id: Uuid,
    seq: i64,
    player_id: Uuid,
    opponent_id: Uuid,
    ruleset: String,
    at: DateTime<Utc>,
    score: String,
    game: i64,
    rating_before: f64,
    deviation_before: f64,
    volatility_before: f64,
    rating_after: f64,
    deviation_after: f64,
    volatility_after: f64,
}

impl TryFrom<ChangeRecord> for ChangeRow {
    type Error = StoreError;

    fn try_from(row: ChangeRecord) -> Result<Self, StoreError> {
        let game = row.game;
        Ok(ChangeRow {
            match_id: row.match_id,
            seq: row.seq,
            ruleset: row.ruleset,
            opponent_id: row.opponent_id,
            at: row.at,
            change: RatingChange {
                player: row.player_id,
                score: parse_score(&row.score)?,
                game: u32::try_from(game)
                    .map_err(|_| StoreError::Corrupt(format!("game number {game}")))?,
                before: Rating {
                    rating: row.rating_before,
                    deviation: row.deviation_before,
                    volatility: row.volatility_before,
                },
                after: Rating {
                    rating: row.rating_after,
                    deviation: row.deviation_after,
                    volatility: row.volatility_after,
                },
            },
        })
    }
}

pub(super) fn score_str(score: Score) -> &'static str {
    match score {
        Score::Win => "win",
        Score::Loss => "loss",
        Score::Draw => "draw",
    }
}

fn parse_score(text: &str) -> Result<Score, StoreError> {
    match text {
        "win" => Ok(Score::Win),
        "loss" => Ok(Score::Loss),
        "draw" => Ok(Score::Draw),
        other => Err(StoreError::Corrupt(format!("unknown score `{other}`"))),
    }
}

/// Locks the standings of `players` on `ruleset` for the rest of the transaction, creating
/// missing ones at `initial` with no games (and the player's name, which the ladder page
/// reads from the standing). Rows are locked in player-id order so two finishing matches
/// that share a player never deadlock.
pub async fn lock(
    conn: &mut PgConnection,
    ruleset: &str,
    players: &[Uuid],
    initial: Rating,
    at: DateTime<Utc>,
) -> Result<Vec<Standing>, StoreError> {
    let mut sorted = players.to_vec();
    sorted.sort();
    sqlx::query(
        "INSERT INTO ratings (ruleset, player_id, name, rating, deviation, volatility,
                              games, wins, losses, draws, updated_at)
         SELECT $1, p.id, p.name, $3, $4, $5, 0, 0, 0, 0, $6
         FROM players p WHERE p.id = ANY($2::uuid[]) ORDER BY p.id
         ON CONFLICT (ruleset, player_id) DO NOTHING",
    )
    .bind(ruleset)
    .bind(&sorted)
    .bind(initial.rating)
    .bind(initial.deviation)
    .bind(initial.volatility)
    .bind(at)
    .execute(&mut *conn)
    .await?;
    let rows = sqlx::query_as::<_, StandingRow>(
        "SELECT ruleset, player_id, rating, deviation, volatility,
                games::bigint AS games, wins::bigint AS wins, losses::bigint AS losses,
                draws::bigint AS draws
         FROM ratings WHERE ruleset = $1 AND player_id = ANY($2)
         ORDER BY player_id FOR UPDATE",
    )
    .bind(ruleset)
    .bind(&sorted)
    .fetch_all(&mut *conn)
    .await?;
    Ok(rows.into_iter().map(Standing::from).collect())
}

/// One rated match to record: the numbers of its `rating_updated` event at (`match_id`,
/// `seq`).
pub struct Rated<'a> {
    pub match_id: Uuid,
    pub seq: i64,
    pub at: DateTime<Utc>,
    pub ruleset: &'a str,
    pub changes: &'a [RatingChange],
}

/// A standing as it was before an update, and the rating it took.
#[derive(sqlx::FromRow)]
struct Moved {
    old_rating: f64,
    old_games: i64,
    new_rating: f64,
}

/// Writes rated matches, all in the caller's transaction: a history row per player, the
/// new standings, and last the ladders' counts per rating bucket (`rating_buckets`),
/// moved once for all of them in one statement in (`ruleset`, `bucket`) order, so
/// transactions that share buckets take their locks in one order and never deadlock.
pub async fn record(conn: &mut PgConnection, rated: &[Rated<'_>]) -> Result<(), StoreError> {
    let (mut rulesets, mut at_ratings, mut deltas) = (Vec::new(), Vec::new(), Vec::new());
    for one in rated {
        for change in one.changes {
            let opponent = one
                .changes
                .iter()
                .find(|other| other.player != change.player)
                .map(|other| other.player)
                .ok_or_else(|| StoreError::Corrupt("a rating change without an opponent".into()))?;
            let (before, after) = (change.before, change.after);
            sqlx::query(
                "INSERT INTO rating_changes (match_id, seq, player_id, opponent_id, ruleset, at,
                     score, game, rating_before, deviation_before, volatility_before,
                     rating_after, deviation_after, volatility_after)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
            )
            .bind(one.match_id)
            .bind(one.seq)
            .bind(change.player)
            .bind(opponent)
            .bind(one.ruleset)
            .bind(one.at)
            .bind(score_str(change.score))
            .bind(i64::from(change.game))
            .bind(before.rating)
            .bind(before.deviation)
            .bind(before.volatility)
            .bind(after.rating)
            .bind(after.deviation)
            .bind(after.volatility)
            .execute(&mut *conn)
            .await?;
            // The row as it was (locked by `lock`) says which bucket the player leaves.
            let moved = sqlx::query_as::<_, Moved>(
                "UPDATE ratings r SET rating = $3, deviation = $4, volatility = $5, games = $6,
                        wins = r.wins + ($7 = 'win')::int, losses = r.losses + ($7 = 'loss')::int,
                        draws = r.draws + ($7 = 'draw')::int, updated_at = $8
                 FROM (SELECT rating, games FROM ratings WHERE ruleset = $1 AND player_id = $2) old
                 WHERE r.ruleset = $1 AND r.player_id = $2
                 RETURNING old.rating AS old_rating, old.games::bigint AS old_games,
                           r.rating AS new_rating",
            )
            .bind(one.ruleset)
            .bind(change.player)
            .bind(after.rating)
            .bind(after.deviation)
            .bind(after.volatility)
            .bind(i64::from(change.game))
            .bind(score_str(change.score))
            .bind(one.at)
            .fetch_optional(&mut *conn)
            .await?
            .ok_or_else(|| {
                StoreError::Corrupt(format!(
                    "no standing of {} on {} to update",
                    change.player, one.ruleset
                ))
            })?;
            if moved.old_games > 0 {
                rulesets.push(one.ruleset.to_string());
                at_ratings.push(moved.old_rating);
                deltas.push(-1_i64);
            }
            rulesets.push(one.ruleset.to_string());
            at_ratings.push(moved.new_rating);
            deltas.push(1_i64);
        }
    }
    if deltas.is_empty() {
        return Ok(());
    }
    sqlx::query(
        "INSERT INTO rating_buckets (ruleset, bucket, players)
         SELECT d.ruleset, floor(d.rating / 8)::int, sum(d.delta)
         FROM unnest($1::text[], $2::float8[], $3::bigint[]) AS d(ruleset, rating, delta)
         GROUP BY 1, 2 HAVING sum(d.delta) <> 0 ORDER BY 1, 2
         ON CONFLICT (ruleset, bucket) DO UPDATE
         SET players = rating_buckets.players + excluded.players",
    )
    .bind(&rulesets)
    .bind(&at_ratings)
    .bind(&deltas)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Counts every ladder's buckets afresh from `ratings`, for a database filled by other
/// means than [`record`] (a bulk load, a test's own rows).
pub async fn recount_buckets(conn: &mut PgConnection) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM rating_buckets")
        .execute(&mut *conn)
        .await?;
    sqlx::query(
        "INSERT INTO rating_buckets (ruleset, bucket, players)
         SELECT ruleset, floor(rating / 8)::int, count(*) FROM ratings WHERE games > 0
         GROUP BY 1, 2",
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// A bucket whose kept count differs from the rated players `ratings` holds in it.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct BucketMismatch {
    pub ruleset: String,
    pub bucket: i32,
    pub kept: i64,
    pub counted: i64,
}

/// Every bucket of `rating_buckets` that disagrees with `ratings`, for whole-database
/// checks.
pub async fn bucket_mismatches(db: impl PgExecutor<'_>) -> Result<Vec<BucketMismatch>, StoreError> {
    Ok(sqlx::query_as::<_, BucketMismatch>(
        "SELECT coalesce(k.ruleset, c.ruleset) AS ruleset, coalesce(k.bucket, c.bucket) AS bucket,
                coalesce(k.players, 0) AS kept, coalesce(c.players, 0) AS counted
         FROM rating_buckets k
         FULL JOIN (SELECT ruleset, floor(rating / 8)::int AS bucket, count(*) AS players
                    FROM ratings WHERE games > 0 GROUP BY 1, 2) c
                ON c.ruleset = k.ruleset AND c.bucket = k.bucket
         WHERE coalesce(k.players, 0) <> coalesce(c.players, 0)
         ORDER BY 1, 2",
    )
    .fetch_all(db)
    .await?)
}

/// A standing whose copy of its player's name is not the player's name.
#[derive(Clone, Debug, PartialEq, sqlx::FromRow)]
pub struct NameMismatch {
    pub ruleset: String,
    pub player_id: Uuid,
    pub kept: String,
    pub name: String,
}

/// Every standing whose name differs from its player's, for whole-database checks.
pub async fn name_mismatches(db: impl PgExecutor<'_>) -> Result<Vec<NameMismatch>, StoreError> {
    Ok(sqlx::query_as::<_, NameMismatch>(
        "SELECT r.ruleset, r.player_id, r.name AS kept, p.name
         FROM ratings r JOIN players p ON p.id = r.player_id
         WHERE r.name <> p.name
         ORDER BY 1, 2",
    )
    .fetch_all(db)
    .await?)
}

/// The most rows [`page`] returns: the `LIMIT` written in both branches of [`LADDER_PAGE`].
pub const PAGE_ROWS_MAX: i64 = 101;

/// One ladder page (`$1` rule set, `$2`/`$3` the cursor's rating and player or nulls, `$4`
/// rows, at most [`PAGE_ROWS_MAX`]), with the players above its best rating and those
/// sharing it (see [`page`]).
pub const LADDER_PAGE: &str = "WITH page AS (
         SELECT r.ruleset, r.player_id, r.name, r.rating, r.deviation, r.volatility,
                r.games::bigint AS games, r.wins::bigint AS wins,
                r.losses::bigint AS losses, r.draws::bigint AS draws
         FROM ((SELECT ruleset, player_id, name, rating, deviation, volatility, games, wins,
                       losses, draws
                FROM ratings
                WHERE ruleset = $1 AND games > 0 AND rating = $2::float8 AND player_id > $3
                ORDER BY player_id LIMIT 101)
               UNION ALL
               (SELECT ruleset, player_id, name, rating, deviation, volatility, games, wins,
                       losses, draws
                FROM ratings
                WHERE ruleset = $1 AND games > 0
                  AND rating < coalesce($2::float8, 'Infinity')
                ORDER BY rating DESC, player_id LIMIT 101)) r
         ORDER BY r.rating DESC, r.player_id
         LIMIT $4
     ), best AS (SELECT max(rating) AS rating FROM page)
     SELECT page.*,
            (SELECT coalesce(sum(b.players), 0) FROM rating_buckets b, best
             WHERE b.ruleset = $1 AND b.bucket > floor(best.rating / 8)::int)::bigint
            + (SELECT count(*) FROM ratings above, best
               WHERE above.ruleset = $1 AND above.games > 0 AND above.rating > best.rating
                 AND above.rating < (floor(best.rating / 8) + 1) * 8) AS above_first,
            (SELECT count(*) FROM ratings tied, best
             WHERE tied.ruleset = $1 AND tied.games > 0
               AND tied.rating = best.rating) AS tied_first
     FROM page
     ORDER BY page.rating DESC, page.player_id";

/// A player's (`$1`) standings, each with its rank: one plus the players above, summed
/// over the bucket counts above the player's bucket and counted inside it.
pub const OWN_RANKS: &str =
    "SELECT r.ruleset, r.player_id, r.name, r.rating, r.deviation, r.volatility,
            r.games::bigint AS games, r.wins::bigint AS wins,
            r.losses::bigint AS losses, r.draws::bigint AS draws,
            1 + (SELECT coalesce(sum(b.players), 0) FROM rating_buckets b
                 WHERE b.ruleset = r.ruleset
                   AND b.bucket > floor(r.rating / 8)::int)::bigint
              + (SELECT count(*) FROM ratings above
                 WHERE above.ruleset = r.ruleset AND above.games > 0
                   AND above.rating > r.rating
                   AND above.rating < (floor(r.rating / 8) + 1) * 8) AS rank
     FROM ratings r
     WHERE r.player_id = $1 AND r.games > 0";

/// A ladder page's row, with what it takes to rank the page: the rated players above
/// the page's best rating, and those who share it (before the cursor too).
#[derive(sqlx::FromRow)]
struct PageRow {
    name: String,
    #[sqlx(flatten)]
    standing: StandingRow,
    above_first: i64,
    tied_first: i64,
}

/// One page of a ladder, best first: ranks are over the whole ladder (equal ratings share
/// a rank), and the page starts after the cursor (`rating`, `player_id`) when given.
pub async fn page(
    db: impl PgExecutor<'_>,
    ruleset: &str,
    after: Option<(f64, Uuid)>,
    limit: i64,
) -> Result<Vec<Ranked>, StoreError> {
    // The page is read down `ratings_page_idx` (which holds every column it shows) from the
    // cursor: the rest of the cursor's rating, then the ratings below it (one condition
    // mixing both would filter every row above the cursor). Only the page's best rating is ranked against the ladder, from
    // the bucket counts (`rating_buckets`) and a count inside its bucket; every other rank
    // follows from the page itself, which holds every player rated strictly between its
    // best and the row.
    //
    // The branches' limit is written out rather than bound: with a bound limit PostgreSQL
    // costs the generic plan of this prepared statement above the plans made for each
    // call's values on a long ladder, and so plans every call afresh (0.4 ms, more than
    // running the page).
    let rows = sqlx::query_as::<_, PageRow>(LADDER_PAGE)
        .bind(ruleset)
        .bind(after.map(|(rating, _)| rating))
        .bind(after.map(|(_, player)| player))
        .bind(limit.min(PAGE_ROWS_MAX))
        .fetch_all(db)
        .await?;
    Ok(rank_page(rows))
}

/// Ranks a page best first: the first rating's rank is one plus the players above it; each
/// lower rating's, one plus those above the first and every player at a rating between.
fn rank_page(rows: Vec<PageRow>) -> Vec<Ranked> {
    let mut ranked: Vec<Ranked> = Vec::with_capacity(rows.len());
    // Players rated above the current row, and how many share its rating: on the whole
    // ladder for the first rating, in the page for the others (which it holds whole).
    let (mut above, mut sharing, mut first) = (0_i64, 0_i64, true);
    for row in rows {
        let rating = row.standing.rating;
        match ranked.last() {
            None => (above, sharing) = (row.above_first, row.tied_first),
            Some(last) if last.standing.rating.rating == rating => {
                if !first {
                    sharing += 1;
                }
            }
            Some(_) => (above, sharing, first) = (above + sharing, 1, false),
        }
        ranked.push(Ranked {
            rank: 1 + above,
            name: row.name,
            standing: row.standing.into(),
        });
    }
    ranked
}

/// Every ladder `player` is on, with their rank there.
pub async fn for_player(db: impl PgExecutor<'_>, player: Uuid) -> Result<Vec<Ranked>, StoreError> {
    // The players above: the buckets above the player's, then a count inside it.
    let rows = sqlx::query_as::<_, RankedRow>(OWN_RANKS)
        .bind(player)
        .fetch_all(db)
        .await?;
    Ok(rows.into_iter().map(Ranked::from).collect())
}

/// The current standing of `player` on `ruleset`, if they have one.
pub async fn get(
    db: impl PgExecutor<'_>,
    ruleset: &str,
    player: Uuid,
) -> Result<Option<Standing>, StoreError> {
    let row = sqlx::query_as::<_, StandingRow>(
        "SELECT ruleset, player_id, rating, deviation, volatility,
                games::bigint AS games, wins::bigint AS wins, losses::bigint AS losses,
                draws::bigint AS draws
         FROM ratings WHERE ruleset = $1 AND player_id = $2",
    )
    .bind(ruleset)
    .bind(player)
    .fetch_optional(db)
    .await?;
    Ok(row.map(Standing::from))
}

/// Every standing, for whole-database checks.
pub async fn all(db: impl PgExecutor<'_>) -> Result<Vec<Standing>, StoreError> {
    let rows = sqlx::query_as::<_, StandingRow>(
        "SELECT ruleset, player_id, rating, deviation, volatility,
                games::bigint AS games, wins::bigint AS wins, losses::bigint AS losses,
                draws::bigint AS draws
         FROM ratings ORDER BY ruleset, player_id",
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(Standing::from).collect())
}

/// The whole history, each player's rows in game order.
pub async fn all_changes(db: impl PgExecutor<'_>) -> Result<Vec<ChangeRow>, StoreError> {
    let rows = sqlx::query_as::<_, ChangeRecord>(
        "SELECT match_id, seq, player_id, opponent_id, ruleset, at, score, game::bigint AS game,
                rating_before, deviation_before, volatility_before,
                rating_after, deviation_after, volatility_after
         FROM rating_changes ORDER BY ruleset, player_id, game",
    )
    .fetch_all(db)
    .await?;
    rows.into_iter().map(ChangeRow::try_from).collect()
}
