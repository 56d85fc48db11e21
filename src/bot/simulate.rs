//! Whole games of one bot against a random fleet, on the engine alone: what the strength
//! benchmark measures and what the strategy tests play through.
//!
//! The bot shoots first against a random legal fleet. Its opponent fires at the empty cells
//! of the bot's sea first and only then at its ships, so it never wins: the bot needs at most
//! 100 shots and shoots first, so the opponent fires at most 99 and leaves a ship cell
//! standing; where a hit shoots again, the opponent only ever shoots after a bot miss, and
//! there are as many empty cells on each sea. The game ends when the bot has sunk the whole
//! fleet. The bot decides from `Match::view(Viewer::Player(bot))` like in the service.

use chrono::{DateTime, Utc};
use rand::Rng;
use uuid::Uuid;

use super::{Level, next_command, random_fleet};
use crate::engine::{
    Cell, Clock, Command, CorruptLog, Draw, HouseOptions, Match, MatchRules, MatchView, Phase,
    Refusal, RuleSetId, Viewer,
};

/// How a simulated game went wrong; a correct bot never causes any of these.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Broken {
    #[error("the engine refused a command: {0}")]
    Refused(#[from] Refusal),
    #[error("the match log did not fold: {0}")]
    Corrupt(#[from] CorruptLog),
    #[error("the bot had nothing to do on its own turn or during placement")]
    Idle,
    #[error("the match ended without the bot sinking the fleet")]
    NotWon,
}

/// The rules a simulated game is played by: the preset with the given house options.
pub fn rules(ruleset: RuleSetId, options: HouseOptions) -> Result<MatchRules, Refusal> {
    MatchRules::new(
        ruleset,
        options,
        Clock {
            placement_seconds: 120,
            shot_seconds: 30,
        },
        900,
    )
}

/// Plays `level` against a random fleet until it has sunk all of it; `watch` sees the view
/// before every bot shot and the cell chosen. A refusal of any bot command is returned as
/// the error: a correct bot never gets one. Returns the bot's shots.
pub fn play(
    level: Level,
    rules: MatchRules,
    rng: &mut impl Rng,
    mut watch: impl FnMut(&MatchView, Cell),
) -> Result<u32, Broken> {
    let bot = Uuid::from_u128(1);
    let foe = Uuid::from_u128(2);
    let now = DateTime::<Utc>::UNIX_EPOCH;
    // `coin: true` hands the first shot to the joiner: the bot.
    let draw = Draw {
        coin: true,
        salt: [0; 16],
    };
    let created = Match::create(foe, rules, false, Some(bot), now)?;
    let mut state = Match::fold([&created])?;
    state.execute(bot, &Command::Join, now, draw)?;
    let foe_fleet = random_fleet(rules.preset(), rng);
    state.execute(
        foe,
        &Command::PlaceFleet {
            placements: foe_fleet,
        },
        now,
        draw,
    )?;
    let placing = next_command(level, &state.view(Viewer::Player(bot)), rng);
    state.execute(bot, &placing.ok_or(Broken::Idle)?, now, draw)?;
    let bot_sea = state.sides[1].fleet.occupied();
    let mut foe_targets = bot_sea.complement().iter().chain(bot_sea.iter());
    let mut shots = 0;
    while state.phase == Phase::Battle {
        if state.turn == Some(1) {
            let view = state.view(Viewer::Player(bot));
            let command = next_command(level, &view, rng).ok_or(Broken::Idle)?;
            if let Command::Fire { cell } = command {
                watch(&view, cell);
            }
            state.execute(bot, &command, now, draw)?;
            shots += 1;
        } else {
            let cell = foe_targets.next().ok_or(Broken::NotWon)?;
            state.execute(foe, &Command::Fire { cell }, now, draw)?;
        }
    }
    match state.result {
        Some(result) if result.winner == Some(bot) => Ok(shots),
        _ => Err(Broken::NotWon),
    }
}
