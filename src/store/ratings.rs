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
/// missing ones at `initial` with no games. Rows are locked in player-id order so two
/// finishing matches that share a player never deadlock.
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
        "INSERT INTO ratings (ruleset, player_id, rating, deviation, volatility,
                              games, wins, losses, draws, updated_at)
         SELECT $1, p, $3, $4, $5, 0, 0, 0, 0, $6 FROM unnest($2::uuid[]) AS p ORDER BY p
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

/// Writes one rated match: a history row per player and the new standings. The numbers
/// are those of the `rating_updated` event at (`match_id`, `seq`).
pub async fn record(
    conn: &mut PgConnection,
    match_id: Uuid,
    seq: i64,
    at: DateTime<Utc>,
    ruleset: &str,
    changes: &[RatingChange],
) -> Result<(), StoreError> {
    for change in changes {
        let opponent = changes
            .iter()
            .find(|other| other.player != change.player)
            .map(|other| other.player)
            .ok_or_else(|| StoreError::Corrupt("a rating change without an opponent".into()))?;
        let (before, after) = (change.before, change.after);
        sqlx::query(
            "INSERT INTO rating_changes (match_id, seq, player_id, opponent_id, ruleset, at, score,
                 game, rating_before, deviation_before, volatility_before,
                 rating_after, deviation_after, volatility_after)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
        )
        .bind(match_id)
        .bind(seq)
        .bind(change.player)
        .bind(opponent)
        .bind(ruleset)
        .bind(at)
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
        sqlx::query(
            "UPDATE ratings SET rating = $3, deviation = $4, volatility = $5, games = $6,
                    wins = wins + ($7 = 'win')::int, losses = losses + ($7 = 'loss')::int,
                    draws = draws + ($7 = 'draw')::int, updated_at = $8
             WHERE ruleset = $1 AND player_id = $2",
        )
        .bind(ruleset)
        .bind(change.player)
        .bind(after.rating)
        .bind(after.deviation)
        .bind(after.volatility)
        .bind(i64::from(change.game))
        .bind(score_str(change.score))
        .bind(at)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

/// One page of a ladder, best first: ranks are over the whole ladder (equal ratings share
/// a rank), and the page starts after the cursor (`rating`, `player_id`) when given.
pub async fn page(
    db: impl PgExecutor<'_>,
    ruleset: &str,
    after: Option<(f64, Uuid)>,
    limit: i64,
) -> Result<Vec<Ranked>, StoreError> {
    // Ranks are counted for the page's rows alone (`ratings_rank_idx`): ranking the whole
    // ladder per request grew with the ladder.
    let rows = sqlx::query_as::<_, RankedRow>(
        "SELECT ladder.*,
                1 + (SELECT count(*) FROM ratings above
                     WHERE above.ruleset = ladder.ruleset AND above.games > 0
                       AND above.rating > ladder.rating) AS rank
         FROM (
             SELECT r.ruleset, r.player_id, p.name, r.rating, r.deviation, r.volatility,
                    r.games::bigint AS games, r.wins::bigint AS wins,
                    r.losses::bigint AS losses, r.draws::bigint AS draws
             FROM ratings r JOIN players p ON p.id = r.player_id
             WHERE r.ruleset = $1 AND r.games > 0
               AND ($2::float8 IS NULL OR r.rating < $2 OR (r.rating = $2 AND r.player_id > $3))
             ORDER BY r.rating DESC, r.player_id
             LIMIT $4
         ) ladder
         ORDER BY ladder.rating DESC, ladder.player_id",
    )
    .bind(ruleset)
    .bind(after.map(|(rating, _)| rating))
    .bind(after.map(|(_, player)| player))
    .bind(limit)
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(Ranked::from).collect())
}

/// Every ladder `player` is on, with their rank there.
pub async fn for_player(db: impl PgExecutor<'_>, player: Uuid) -> Result<Vec<Ranked>, StoreError> {
    let rows = sqlx::query_as::<_, RankedRow>(
        "SELECT r.ruleset, r.player_id, p.name, r.rating, r.deviation, r.volatility,
                r.games::bigint AS games, r.wins::bigint AS wins,
                r.losses::bigint AS losses, r.draws::bigint AS draws,
                1 + (SELECT count(*) FROM ratings above
                     WHERE above.ruleset = r.ruleset AND above.games > 0
                       AND above.rating > r.rating) AS rank
         FROM ratings r JOIN players p ON p.id = r.player_id
         WHERE r.player_id = $1 AND r.games > 0",
    )
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
