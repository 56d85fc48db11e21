//! The ranked ladders: one per rule set, Glicko-2 through `skillratings`, applied in the
//! same transaction as the result of a ranked match (see docs/ladder.md).
//!
//! Each rated match is its own rating period: both players' ratings are updated from the
//! one result with [`skillratings::glicko2::glicko2`]. The update is recorded three times
//! over, all in the finishing transaction: as a `rating_updated` event in the match's log,
//! as one `rating_changes` row per player, and as the players' new `ratings` rows.

use std::collections::HashMap;

use serde::Serialize;
use skillratings::Outcomes;
use skillratings::glicko2::{Glicko2Config, Glicko2Rating, glicko2};
use sqlx::{PgConnection, PgExecutor};
use utoipa::ToSchema;
use uuid::Uuid;

use super::{AppError, Result};
use crate::engine::{
    Event, FinishReason, Match, MatchResult, Phase, Rating, RatingChange, RuleSetId, Score,
};
use crate::store::{StoredEvent, ratings};

/// A player is provisional while their deviation is above this. From the start (350) it
/// takes 11 rated games against established opponents (about 14 between two newcomers)
/// to get below it; the rating is then known to within about ±215 points (95%).
pub const PROVISIONAL_DEVIATION: f64 = 110.0;

/// Most entries one ladder page returns.
pub const PAGE_MAX: i64 = 100;
// A page reads one row more than it shows, to tell whether another follows.
const _: () = assert!(PAGE_MAX < ratings::PAGE_ROWS_MAX);

/// Where every player starts: 1500, deviation 350, volatility 0.06.
pub fn initial() -> Rating {
    from_glicko(Glicko2Rating::new())
}

pub fn is_provisional(rating: &Rating) -> bool {
    rating.deviation > PROVISIONAL_DEVIATION
}

fn to_glicko(rating: Rating) -> Glicko2Rating {
    Glicko2Rating {
        rating: rating.rating,
        deviation: rating.deviation,
        volatility: rating.volatility,
    }
}

fn from_glicko(rating: Glicko2Rating) -> Rating {
    Rating {
        rating: rating.rating,
        deviation: rating.deviation,
        volatility: rating.volatility,
    }
}

/// Both players' new ratings after one game; `score` is `first`'s.
pub fn rate(first: Rating, second: Rating, score: Score) -> (Rating, Rating) {
    let outcome = match score {
        Score::Win => Outcomes::WIN,
        Score::Loss => Outcomes::LOSS,
        Score::Draw => Outcomes::DRAW,
    };
    let (first, second) = glicko2(
        &to_glicko(first),
        &to_glicko(second),
        &outcome,
        &Glicko2Config::new(),
    );
    (from_glicko(first), from_glicko(second))
}

/// How a finished match counts for `player`. Every finish reason counts; a finish without
/// a winner (both placement clocks ran out) is a draw for both.
pub fn score_of(result: &MatchResult, player: Uuid) -> Score {
    match result.winner {
        None => Score::Draw,
        Some(winner) if winner == player => Score::Win,
        Some(_) => Score::Loss,
    }
}

/// Whether a finish reason is rated at all. All are, and this is the one place to say so:
/// a match that was cancelled never finishes, and unranked matches are never rated.
pub fn counts(reason: FinishReason) -> bool {
    match reason {
        FinishReason::AllSunk
        | FinishReason::Resigned
        | FinishReason::PlacementTimeout
        | FinishReason::ShotTimeout
        | FinishReason::BothPlacementTimeout => true,
    }
}

/// The rating changes a finished ranked match causes, given both players' standings
/// before it (in seat order).
pub fn changes(
    state: &Match,
    before: [(Uuid, Rating, u32); 2],
) -> Option<(RuleSetId, Vec<RatingChange>)> {
    let result = state.result?;
    if !state.ranked || state.phase != Phase::Finished || !counts(result.reason) {
        return None;
    }
    let [
        (first, first_rating, first_games),
        (second, second_rating, second_games),
    ] = before;
    let first_score = score_of(&result, first);
    let (first_after, second_after) = rate(first_rating, second_rating, first_score);
    Some((
        state.rules.ruleset,
        vec![
            RatingChange {
                player: first,
                score: first_score,
                game: first_games + 1,
                before: first_rating,
                after: first_after,
            },
            RatingChange {
                player: second,
                score: score_of(&result, second),
                game: second_games + 1,
                before: second_rating,
                after: second_after,
            },
        ],
    ))
}

/// Standings already moved in this transaction, by ladder and player: the rating and game
/// count a player's next rated game of the same transaction starts from. The standings are
/// written once per transaction ([`record`]), so without this a player who finishes two
/// ranked matches in one batch would be rated twice from the same standing and numbered
/// the same game twice.
#[derive(Default)]
pub struct Settled(HashMap<(RuleSetId, Uuid), (Rating, u32)>);

/// Called in the transaction that appends `new_events` to a match whose folded state is
/// `state`: when these events finish a ranked match, locks both players' standings and
/// returns the `rating_updated` event to append after them. `settled` carries the
/// standings the same transaction moved before.
pub async fn settle(
    conn: &mut PgConnection,
    settled: &mut Settled,
    state: &Match,
    new_events: &[Event],
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Option<Event>> {
    let finishes = new_events
        .iter()
        .any(|event| matches!(event, Event::MatchFinished { .. }));
    if !finishes || !state.ranked || state.phase != Phase::Finished {
        return Ok(None);
    }
    let (Some(first), Some(second)) = (state.player(0), state.player(1)) else {
        return Ok(None);
    };
    let ruleset = state.rules.ruleset;
    let standings = ratings::lock(conn, ruleset.as_str(), &[first, second], initial(), now).await?;
    let before = |player: Uuid| -> Result<(Uuid, Rating, u32)> {
        if let Some((rating, games)) = settled.0.get(&(ruleset, player)) {
            return Ok((player, *rating, *games));
        }
        let standing = standings
            .iter()
            .find(|standing| standing.player_id == player)
            .ok_or_else(|| AppError::Corrupt(format!("no standing for {player}")))?;
        let games = u32::try_from(standing.games)
            .map_err(|_| AppError::Corrupt("negative game count".into()))?;
        Ok((player, standing.rating, games))
    };
    let Some((ruleset, changes)) = changes(state, [before(first)?, before(second)?]) else {
        return Ok(None);
    };
    for change in &changes {
        settled
            .0
            .insert((ruleset, change.player), (change.after, change.game));
    }
    Ok(Some(Event::RatingUpdated { ruleset, changes }))
}

/// Writes the history rows and new standings of every `rating_updated` among each match's
/// `stored` events, so the tables always copy the event: all of a transaction's in one
/// call, which moves the ladders' bucket counts once, in one order.
pub async fn record(conn: &mut PgConnection, stored: &[(Uuid, Vec<StoredEvent>)]) -> Result<()> {
    let rated: Vec<ratings::Rated<'_>> = stored
        .iter()
        .flat_map(|(match_id, events)| {
            events.iter().filter_map(move |event| match &event.event {
                Event::RatingUpdated { ruleset, changes } => Some(ratings::Rated {
                    match_id: *match_id,
                    seq: event.seq,
                    at: event.at,
                    ruleset: ruleset.as_str(),
                    changes,
                }),
                _ => None,
            })
        })
        .collect();
    ratings::record(conn, &rated).await?;
    Ok(())
}

/// A player's standing on one ladder, as their profile shows it.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct LadderStanding {
    pub ruleset: RuleSetId,
    /// Place on the ladder (equal ratings share a place); absent before the first rated game.
    pub rank: Option<i64>,
    pub rating: f64,
    pub deviation: f64,
    /// Deviation above the provisional threshold (110): the rating is still settling.
    pub provisional: bool,
    pub games: i64,
    pub wins: i64,
    pub losses: i64,
    pub draws: i64,
}

/// `player`'s standing on every ladder; ladders they have not played show the start.
pub async fn standings(db: impl PgExecutor<'_>, player: Uuid) -> Result<Vec<LadderStanding>> {
    let rows = ratings::for_player(db, player).await?;
    Ok(RuleSetId::ALL
        .into_iter()
        .map(|ruleset| {
            match rows
                .iter()
                .find(|row| row.standing.ruleset == ruleset.as_str())
            {
                Some(row) => LadderStanding {
                    ruleset,
                    rank: Some(row.rank),
                    rating: row.standing.rating.rating,
                    deviation: row.standing.rating.deviation,
                    provisional: is_provisional(&row.standing.rating),
                    games: row.standing.games,
                    wins: row.standing.wins,
                    losses: row.standing.losses,
                    draws: row.standing.draws,
                },
                None => {
                    let start = initial();
                    LadderStanding {
                        ruleset,
                        rank: None,
                        rating: start.rating,
                        deviation: start.deviation,
                        provisional: is_provisional(&start),
                        games: 0,
                        wins: 0,
                        losses: 0,
                        draws: 0,
                    }
                }
            }
        })
        .collect())
}

/// One line of a ladder.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct LadderEntry {
    /// Place on the ladder; equal ratings share a place.
    pub rank: i64,
    pub player_id: Uuid,
    pub name: String,
    pub rating: f64,
    pub deviation: f64,
    pub provisional: bool,
    pub games: i64,
    pub wins: i64,
    pub losses: i64,
    pub draws: i64,
}

/// A page of a ladder, best first.
#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct LadderPage {
    pub ruleset: RuleSetId,
    /// Deviation above which a player is provisional.
    pub provisional_deviation: f64,
    pub entries: Vec<LadderEntry>,
    /// Pass as `after` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

/// The opaque cursor after `entry`: its exact rating and player id.
fn cursor(rating: f64, player: Uuid) -> String {
    format!("{:016x}.{}", rating.to_bits(), player.simple())
}

/// Reads a cursor made by [`cursor`].
pub fn parse_cursor(text: &str) -> Option<(f64, Uuid)> {
    let (bits, player) = text.split_once('.')?;
    // Exactly the form `cursor` writes (the documented pattern), nothing looser.
    let lower_hex = |part: &str, len: usize| {
        part.len() == len && part.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    if !lower_hex(bits, 16) || !lower_hex(player, 32) {
        return None;
    }
    let rating = f64::from_bits(u64::from_str_radix(bits, 16).ok()?);
    if !rating.is_finite() {
        return None;
    }
    Some((rating, Uuid::try_parse(player).ok()?))
}

impl super::App {
    /// One page of `ruleset`'s ladder after `after`, at most `limit` (1 to [`PAGE_MAX`]).
    #[tracing::instrument(skip(self))]
    pub async fn ladder_page(
        &self,
        ruleset: RuleSetId,
        after: Option<(f64, Uuid)>,
        limit: i64,
    ) -> Result<LadderPage> {
        // The ladder may lag a little: the standby serves it when there is one.
        self.read_lagging(|pool| async move { page(&pool, ruleset, after, limit).await })
            .await
    }
}

/// One page of `ruleset`'s ladder after `after`, at most `limit` (1 to [`PAGE_MAX`]).
async fn page(
    db: impl PgExecutor<'_>,
    ruleset: RuleSetId,
    after: Option<(f64, Uuid)>,
    limit: i64,
) -> Result<LadderPage> {
    let limit = limit.clamp(1, PAGE_MAX);
    // One extra row tells whether another page follows.
    let mut rows = ratings::page(db, ruleset.as_str(), after, limit + 1).await?;
    let more = rows.len() as i64 > limit;
    rows.truncate(usize::try_from(limit).unwrap_or(0));
    let next = if more {
        rows.last()
            .map(|row| cursor(row.standing.rating.rating, row.standing.player_id))
    } else {
        None
    };
    Ok(LadderPage {
        ruleset,
        provisional_deviation: PROVISIONAL_DEVIATION,
        entries: rows
            .into_iter()
            .map(|row| LadderEntry {
                rank: row.rank,
                player_id: row.standing.player_id,
                name: row.name,
                rating: row.standing.rating.rating,
                deviation: row.standing.rating.deviation,
                provisional: is_provisional(&row.standing.rating),
                games: row.standing.games,
                wins: row.standing.wins,
                losses: row.standing.losses,
                draws: row.standing.draws,
            })
            .collect(),
        next,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_win_between_newcomers_matches_skillratings() {
        let (winner, loser) = rate(initial(), initial(), Score::Win);
        // The crate's own documented example: 1662/290 and 1338/290.
        assert_eq!(winner.rating.round(), 1662.0);
        assert_eq!(winner.deviation.round(), 290.0);
        assert_eq!(loser.rating.round(), 1338.0);
        assert_eq!(loser.deviation.round(), 290.0);
    }

    #[test]
    fn a_draw_between_equals_moves_no_rating() {
        let (a, b) = rate(initial(), initial(), Score::Draw);
        assert!((a.rating - 1500.0).abs() < 1e-9);
        assert!((b.rating - 1500.0).abs() < 1e-9);
        assert!(a.deviation < 350.0);
    }

    #[test]
    fn cursors_round_trip_exactly() {
        let player = Uuid::now_v7();
        let rating = 1_662.310_893_906_297_7;
        assert_eq!(
            parse_cursor(&cursor(rating, player)),
            Some((rating, player))
        );
        assert_eq!(parse_cursor("nonsense"), None);
        assert_eq!(
            parse_cursor("7ff0000000000000.00000000000000000000000000000000"),
            None
        );
    }

    #[test]
    fn it_takes_about_a_dozen_games_to_be_established() {
        let mut player = initial();
        let opponent = Rating {
            rating: 1500.0,
            deviation: 80.0,
            volatility: 0.06,
        };
        let mut games = 0;
        while is_provisional(&player) {
            let score = if games % 2 == 0 {
                Score::Win
            } else {
                Score::Loss
            };
            player = rate(player, opponent, score).0;
            games += 1;
        }
        assert!((8..=16).contains(&games), "{games} games");
    }
}
