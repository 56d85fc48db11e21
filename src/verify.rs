//! `statki verify`: re-derives what the database claims from the event log and reports
//! every mismatch.
//!
//! For every match it folds the events and checks the stored row (snapshot and columns)
//! against the fold, re-runs the referee on each shot and on the finishing event, checks
//! the fleet commitments and the rating events. Then it replays each ladder's history
//! (each player's games in order, each recomputed with Glicko-2 from the one before)
//! against `rating_changes` and `ratings`, the ladders' bucket counts (`rating_buckets`)
//! against `ratings`, and the players' records (`player_records`) against their rows of
//! `player_matches`. Everything is read in one repeatable-read
//! snapshot, so a live service can be verified.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::app::ladder;
use crate::engine::{
    CancelReason, Command, Draw, Event, FinishReason, Match, Phase, Rating, RatingChange, Refusal,
    Score, Snapshot,
};
use crate::store::{StoreError, events, matches, player_matches, ratings};

/// Ratings read back from JSON may differ from the computed ones in the last bits.
const TOLERANCE: f64 = 1e-6;

/// Matches checked per page: one query for their rows and one for their logs, so the walk's
/// memory stays that of one page however large the database.
const PAGE: i64 = 500;

/// One thing that does not add up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    pub match_id: Option<Uuid>,
    pub what: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.match_id {
            Some(id) => write!(f, "match {id}: {}", self.what),
            None => write!(f, "{}", self.what),
        }
    }
}

/// What a verification run found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub matches: usize,
    pub finished: usize,
    pub ranked: usize,
    pub events: usize,
    pub rating_changes: usize,
    pub standings: usize,
    pub mismatches: Vec<Mismatch>,
}

impl Report {
    pub fn ok(&self) -> bool {
        self.mismatches.is_empty()
    }

    fn flag(&mut self, match_id: Option<Uuid>, what: impl Into<String>) {
        self.mismatches.push(Mismatch {
            match_id,
            what: what.into(),
        });
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "verified {} matches ({} finished, {} ranked), {} events, {} rating changes, {} ladder standings",
            self.matches,
            self.finished,
            self.ranked,
            self.events,
            self.rating_changes,
            self.standings
        )?;
        if self.ok() {
            write!(f, "OK: every row agrees with the event log")
        } else {
            for mismatch in &self.mismatches {
                writeln!(f, "MISMATCH {mismatch}")?;
            }
            write!(f, "FAILED: {} mismatches", self.mismatches.len())
        }
    }
}

/// A match row as stored, columns and all.
type Stored = matches::StoredColumns;

/// Verifies the whole database.
pub async fn run(pool: &PgPool) -> Result<Report, StoreError> {
    run_in_pages(pool, PAGE).await
}

/// [`run`], reading `page` matches (and their logs) at a time.
pub async fn run_in_pages(pool: &PgPool, page: i64) -> Result<Report, StoreError> {
    let mut tx = pool.begin().await?;
    matches::read_only_snapshot(&mut *tx).await?;
    let mut report = Report::default();
    // Rating events by match, to compare with the history rows.
    let mut rated: HashMap<Uuid, (i64, Vec<RatingChange>)> = HashMap::new();
    let mut after = None;
    let mut player_rows = 0;
    loop {
        let rows = matches::columns_page(&mut *tx, after, page.max(1)).await?;
        let Some(last) = rows.last() else { break };
        after = Some(last.id);
        let ids: Vec<Uuid> = rows.iter().map(|row| row.id).collect();
        let mut logs = events::logs(&mut *tx, &ids).await?;
        let mut mirrored = player_matches::of_matches(&mut *tx, &ids).await?;
        for stored in &rows {
            let log = logs.remove(&stored.id).unwrap_or_else(|| Ok(Vec::new()));
            let state = check_match(stored, log, &mut report, &mut rated);
            let mut expected = state
                .map(|state| player_matches::rows_of(stored.id, &state, stored.created_at))
                .unwrap_or_default();
            player_rows += expected.len() as i64;
            expected.sort_by_key(|row| row.player_id);
            let found: Vec<player_matches::Row> = mirrored
                .extract_if(.., |row| row.match_id == stored.id)
                .collect();
            if found != expected {
                report.flag(
                    Some(stored.id),
                    format!("player_matches holds {found:?} where the match gives {expected:?}"),
                );
            }
        }
    }
    let stored_rows = player_matches::count(&mut *tx).await?;
    if stored_rows != player_rows {
        report.flag(
            None,
            format!("player_matches has {stored_rows} rows, the matches give {player_rows}"),
        );
    }
    // The players' records, derived from their rows, must agree with them.
    for record in player_matches::record_mismatches(&mut *tx).await? {
        report.flag(
            None,
            format!(
                "player_records keeps {:?} (wins, losses, draws) for {}, player_matches counts {:?}",
                record.kept, record.player_id, record.counted
            ),
        );
    }
    check_ladders(&mut tx, &mut report, &rated).await?;
    tx.commit().await?;
    Ok(report)
}

/// Checks one match against its log; the state the log folds to, when it folds.
fn check_match(
    stored: &Stored,
    log: events::Log,
    report: &mut Report,
    rated: &mut HashMap<Uuid, (i64, Vec<RatingChange>)>,
) -> Option<Match> {
    let id = Some(stored.id);
    report.matches += 1;
    let log = match log {
        Ok(log) => log,
        Err(error) => {
            report.flag(id, format!("an event does not decode: {error}"));
            return None;
        }
    };
    report.events += log.len();
    for (expected, event) in (1..).zip(&log) {
        if event.seq != expected {
            report.flag(
                id,
                format!("event seq {} where {expected} was due", event.seq),
            );
            return None;
        }
    }
    if stored.last_seq != log.len() as i64 {
        report.flag(
            id,
            format!(
                "row says last_seq {}, the log has {} events",
                stored.last_seq,
                log.len()
            ),
        );
    }
    let state = match Match::fold(log.iter().map(|stored| &stored.event)) {
        Ok(state) => state,
        Err(error) => {
            report.flag(id, format!("the event log does not fold: {error}"));
            return None;
        }
    };
    check_row(stored, &state, report);
    if state.phase == Phase::Finished {
        report.finished += 1;
    }
    // A live match is checked as far as it got: its shots and its locked fleets are final.
    check_referee(stored.id, &log, report);
    if !state.commitments_verify() {
        report.flag(id, "a fleet does not match its published commitment");
    }
    let updates: Vec<(i64, &Vec<RatingChange>)> = log
        .iter()
        .filter_map(|event| match &event.event {
            Event::RatingUpdated { changes, .. } => Some((event.seq, changes)),
            _ => None,
        })
        .collect();
    let should_rate = state.ranked
        && state
            .result
            .is_some_and(|result| ladder::counts(result.reason));
    if should_rate {
        report.ranked += 1;
    }
    match (should_rate, updates.as_slice()) {
        (false, []) => {}
        (true, [(seq, changes)]) => {
            check_rating_event(stored.id, &state, changes, report);
            rated.insert(stored.id, (*seq, (*changes).clone()));
        }
        (true, []) => report.flag(id, "a ranked result without a rating_updated event"),
        (false, _) => report.flag(id, "rating_updated on a match that is not rated"),
        (true, _) => report.flag(id, "more than one rating_updated event"),
    }
    Some(state)
}

/// The row must be exactly what its events fold to.
fn check_row(stored: &Stored, state: &Match, report: &mut Report) {
    let id = Some(stored.id);
    match serde_json::from_value::<Snapshot>(stored.snapshot.clone()) {
        Ok(snapshot) if snapshot == state.snapshot() => {}
        Ok(snapshot) => {
            let folded = state.snapshot();
            let mut fields = Vec::new();
            if snapshot.phase != folded.phase {
                fields.push("phase");
            }
            if snapshot.result != folded.result {
                fields.push("result");
            }
            if snapshot.turn != folded.turn {
                fields.push("turn");
            }
            if snapshot.deadline != folded.deadline {
                fields.push("deadline");
            }
            if snapshot.sides != folded.sides {
                fields.push("sides");
            }
            if snapshot.version != folded.version {
                fields.push("version");
            }
            report.flag(
                id,
                format!(
                    "stored snapshot differs from the fold of its events ({})",
                    if fields.is_empty() {
                        "rules".to_owned()
                    } else {
                        fields.join(", ")
                    }
                ),
            );
        }
        Err(error) => report.flag(id, format!("stored snapshot does not decode: {error}")),
    }
    let reason = state
        .result
        .map(|result| reason_str(result.reason).to_owned());
    let columns = [
        ("ruleset", stored.ruleset == state.rules.ruleset.as_str()),
        ("ranked", stored.ranked == state.ranked),
        ("phase", stored.phase == state.phase.as_str()),
        ("creator", Some(stored.creator) == state.player(0)),
        ("joiner", stored.joiner == state.player(1)),
        (
            "winner",
            stored.winner == state.result.and_then(|result| result.winner),
        ),
        ("reason", stored.reason == reason),
    ];
    for (column, agrees) in columns {
        if !agrees {
            report.flag(
                id,
                format!("column `{column}` differs from the fold of its events"),
            );
        }
    }
}

fn reason_str(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::AllSunk => "all_sunk",
        FinishReason::PlacementTimeout => "placement_timeout",
        FinishReason::BothPlacementTimeout => "both_placement_timeout",
        FinishReason::ShotTimeout => "shot_timeout",
        FinishReason::Resigned => "resigned",
    }
}

/// Re-runs the referee: every shot must have the outcome the locked fleets give it, and
/// the finishing event must be what the engine decides for its reason.
fn check_referee(match_id: Uuid, log: &[events::StoredEvent], report: &mut Report) {
    let id = Some(match_id);
    let Some((first, rest)) = log.split_first() else {
        return;
    };
    let Ok(mut state) = Match::fold([&first.event]) else {
        return;
    };
    let draw = Draw {
        coin: false,
        salt: [0; 16],
    };
    let mut index = 0;
    while index < rest.len() {
        let stored = &rest[index];
        let expected: Option<Result<Vec<Event>, Refusal>> = match &stored.event {
            // Fleets are locked before the first shot, so the folded state holds the very
            // fleets each shot was fired at.
            Event::ShotFired { player, cell, .. } => {
                Some(state.decide(*player, &Command::Fire { cell: *cell }, stored.at, draw))
            }
            // A reaction is re-decided at its own time, so its phase, the cap and the gap
            // between one player's reactions are checked again.
            Event::Reaction {
                player, reaction, ..
            } => Some(state.decide(
                *player,
                &Command::React {
                    reaction: *reaction,
                },
                stored.at,
                draw,
            )),
            // Only the invited player may decline, and only while the challenge waits.
            Event::MatchCancelled {
                reason: CancelReason::Declined,
            } => Some(
                state
                    .invited
                    .ok_or(Refusal::NotInvited)
                    .and_then(|invited| state.decide(invited, &Command::Decline, stored.at, draw)),
            ),
            Event::MatchFinished { winner, reason } => {
                match reason {
                    FinishReason::AllSunk => None,
                    FinishReason::Resigned => {
                        let loser = state
                            .players()
                            .into_iter()
                            .find(|player| Some(*player) != *winner)
                            .ok_or(Refusal::NotAPlayer);
                        Some(loser.and_then(|loser| {
                            state.decide(loser, &Command::Resign, stored.at, draw)
                        }))
                    }
                    FinishReason::PlacementTimeout
                    | FinishReason::BothPlacementTimeout
                    | FinishReason::ShotTimeout => Some(state.expire(stored.at)),
                }
            }
            _ => None,
        };
        match expected {
            None => {}
            Some(Err(refusal)) => {
                report.flag(
                    id,
                    format!(
                        "event {} ({}) is refused by the rules: {refusal}",
                        stored.seq,
                        stored.event.kind()
                    ),
                );
                return;
            }
            Some(Ok(expected)) => {
                let recorded: Vec<&Event> = rest[index..]
                    .iter()
                    .take(expected.len())
                    .map(|stored| &stored.event)
                    .collect();
                let agrees = expected.len() == recorded.len()
                    && expected
                        .iter()
                        .zip(&recorded)
                        .all(|(want, got)| same_decision(want, got));
                if !agrees {
                    report.flag(
                        id,
                        format!(
                            "event {} ({}) is not what the rules decide",
                            stored.seq,
                            stored.event.kind()
                        ),
                    );
                    return;
                }
            }
        }
        if let Event::MatchFinished {
            reason: FinishReason::AllSunk,
            winner,
        } = &stored.event
        {
            // Only a shot that sank the last ship may end a match this way, and that shot
            // was checked above together with this event.
            let sank_all = index > 0
                && matches!(&rest[index - 1].event, Event::ShotFired { player, next_turn: None, .. } if Some(*player) == *winner);
            if !sank_all {
                report.flag(id, format!("event {} claims all ships sunk", stored.seq));
                return;
            }
        }
        if state.evolve(&stored.event).is_err() {
            return;
        }
        index += 1;
    }
}

/// Two events are the same decision; clocks are left out, as the time a deadline was
/// armed is the clock's business, not the referee's.
fn same_decision(want: &Event, got: &Event) -> bool {
    match (want, got) {
        (
            Event::ShotFired {
                player: p1,
                cell: c1,
                outcome: o1,
                sunk_ship: s1,
                marked: m1,
                next_turn: n1,
                ..
            },
            Event::ShotFired {
                player: p2,
                cell: c2,
                outcome: o2,
                sunk_ship: s2,
                marked: m2,
                next_turn: n2,
                ..
            },
        ) => p1 == p2 && c1 == c2 && o1 == o2 && s1 == s2 && m1 == m2 && n1 == n2,
        _ => want == got,
    }
}

fn close(a: &Rating, b: &Rating) -> bool {
    (a.rating - b.rating).abs() < TOLERANCE
        && (a.deviation - b.deviation).abs() < TOLERANCE
        && (a.volatility - b.volatility).abs() < TOLERANCE
}

/// The event must rate exactly the two players, score them by the result, and move each
/// rating the way Glicko-2 does from the stated `before`.
fn check_rating_event(
    match_id: Uuid,
    state: &Match,
    changes: &[RatingChange],
    report: &mut Report,
) {
    let id = Some(match_id);
    let (Some(first), Some(second)) = (state.player(0), state.player(1)) else {
        report.flag(id, "a rated match without two players");
        return;
    };
    let find = |player: Uuid| changes.iter().find(|change| change.player == player);
    let (Some(a), Some(b)) = (find(first), find(second)) else {
        report.flag(id, "rating_updated does not rate both players");
        return;
    };
    if changes.len() != 2 {
        report.flag(id, "rating_updated rates more than the two players");
    }
    let Some(recomputed) = ladder::changes(
        state,
        [
            (first, a.before, a.game.saturating_sub(1)),
            (second, b.before, b.game.saturating_sub(1)),
        ],
    ) else {
        report.flag(id, "rating_updated on a result the ladder does not count");
        return;
    };
    for (want, got) in recomputed.1.iter().zip([a, b]) {
        if want.score != got.score {
            report.flag(
                id,
                format!(
                    "rating_updated scores {} as {:?}, the result says {:?}",
                    got.player, got.score, want.score
                ),
            );
        }
        if !close(&want.after, &got.after) {
            report.flag(
                id,
                format!(
                    "rating_updated gives {} a rating Glicko-2 does not",
                    got.player
                ),
            );
        }
    }
}

/// Each player's history on each ladder must be an unbroken chain from the start, agree
/// with the match's event, and end at their current standing.
async fn check_ladders(
    conn: &mut PgConnection,
    report: &mut Report,
    rated: &HashMap<Uuid, (i64, Vec<RatingChange>)>,
) -> Result<(), StoreError> {
    let history = ratings::all_changes(&mut *conn).await?;
    let standings = ratings::all(&mut *conn).await?;
    report.rating_changes = history.len();
    report.standings = standings.len();
    let mut chains: BTreeMap<(String, Uuid), Vec<&ratings::ChangeRow>> = BTreeMap::new();
    for row in &history {
        chains
            .entry((row.ruleset.clone(), row.change.player))
            .or_default()
            .push(row);
        let id = Some(row.match_id);
        match rated.get(&row.match_id) {
            None => report.flag(id, "a rating_changes row without a rating_updated event"),
            Some((seq, changes)) => {
                let event = changes
                    .iter()
                    .find(|change| change.player == row.change.player);
                let agrees = event.is_some_and(|event| {
                    event.score == row.change.score
                        && event.game == row.change.game
                        && close(&event.before, &row.change.before)
                        && close(&event.after, &row.change.after)
                });
                if *seq != row.seq || !agrees {
                    report.flag(
                        id,
                        format!(
                            "rating_changes row of {} differs from the rating_updated event",
                            row.change.player
                        ),
                    );
                }
            }
        }
    }
    // Looked up once per rated match and per ladder chain: indexed, not scanned each time
    // (a scan per lookup made the check quadratic in the history).
    let recorded: HashSet<(Uuid, Uuid)> = history
        .iter()
        .map(|row| (row.match_id, row.change.player))
        .collect();
    let standing_of: HashMap<(&str, Uuid), &ratings::Standing> = standings
        .iter()
        .map(|standing| ((standing.ruleset.as_str(), standing.player_id), standing))
        .collect();
    for (match_id, (_, changes)) in rated {
        for change in changes {
            if !recorded.contains(&(*match_id, change.player)) {
                report.flag(
                    Some(*match_id),
                    format!("no rating_changes row for {}", change.player),
                );
            }
        }
    }
    for ((ruleset, player), chain) in &chains {
        let mut expected = ladder::initial();
        for (game, row) in (1..).zip(chain) {
            if row.change.game != game {
                report.flag(
                    Some(row.match_id),
                    format!(
                        "{player} on {ruleset}: game {} where {game} was due",
                        row.change.game
                    ),
                );
                break;
            }
            if !close(&row.change.before, &expected) {
                report.flag(
                    Some(row.match_id),
                    format!("{player} on {ruleset}: rating before game {game} is not the rating after the one before"),
                );
            }
            expected = row.change.after;
        }
        let standing = standing_of.get(&(ruleset.as_str(), *player));
        let count = |score| chain.iter().filter(|row| row.change.score == score).count() as i64;
        match standing {
            None => report.flag(
                None,
                format!("{player} on {ruleset}: history but no standing"),
            ),
            Some(standing) => {
                let agrees = close(&standing.rating, &expected)
                    && standing.games == chain.len() as i64
                    && standing.wins == count(Score::Win)
                    && standing.losses == count(Score::Loss)
                    && standing.draws == count(Score::Draw);
                if !agrees {
                    report.flag(
                        None,
                        format!(
                            "{player} on {ruleset}: standing differs from the end of the history"
                        ),
                    );
                }
            }
        }
    }
    for standing in &standings {
        let key = (standing.ruleset.clone(), standing.player_id);
        if standing.games > 0 && !chains.contains_key(&key) {
            report.flag(
                None,
                format!(
                    "{} on {}: standing without history",
                    standing.player_id, standing.ruleset
                ),
            );
        }
    }
    // The name a standing keeps for the ladder page must be its player's.
    for copy in ratings::name_mismatches(&mut *conn).await? {
        report.flag(
            None,
            format!(
                "{} on {}: the standing keeps the name {:?}, the player is {:?}",
                copy.player_id, copy.ruleset, copy.kept, copy.name
            ),
        );
    }
    // The ladders' bucket counts, derived from the standings, must agree with them.
    for bucket in ratings::bucket_mismatches(&mut *conn).await? {
        report.flag(
            None,
            format!(
                "{} ladder: rating_buckets counts {} players in bucket {} (ratings from {} below {}), ratings hold {}",
                bucket.ruleset,
                bucket.kept,
                bucket.bucket,
                i64::from(bucket.bucket) * 8,
                (i64::from(bucket.bucket) + 1) * 8,
                bucket.counted
            ),
        );
    }
    Ok(())
}
