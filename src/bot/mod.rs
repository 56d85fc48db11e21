//! Bot opponents: how a bot places its fleet and picks its shots, from its own view only.
//!
//! A bot decides from the [`MatchView`] the engine renders for its seat
//! (`Match::view(Viewer::Player(bot))`) and nothing else: the functions here take that type,
//! which carries no cell of the opponent's fleet the bot has not found, so a bot cannot
//! cheat by construction. Randomness comes in as an argument (`&mut impl Rng`), so every
//! decision is reproducible from a seed.
//!
//! - [`placement`]: a random legal fleet for any preset.
//! - [`sea`]: what the view proves about the opponent's sea (tried, hit, empty, remaining).
//! - [`strategy`]: the three levels' shot choices.
//! - [`simulate`]: whole games on the engine alone, for the strength benchmark and tests.
//! - [`worker`]: the service side, which runs the bots' turns through the command path.

pub mod placement;
pub mod sea;
pub mod simulate;
pub mod strategy;
pub mod worker;

use rand::Rng;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::engine::{Command, MatchView, Phase};

pub use placement::random_fleet;
pub use sea::Sea;
pub use strategy::choose_shot;

/// How strong a bot plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Shoots at random among the cells that may still hold a ship.
    Easy,
    /// Hunts on a parity lattice and finishes every ship it hits along its line.
    Medium,
    /// Shoots where the most legal placements of the remaining ships overlap.
    Hard,
}

impl Level {
    pub const ALL: [Level; 3] = [Level::Easy, Level::Medium, Level::Hard];

    pub fn as_str(self) -> &'static str {
        match self {
            Level::Easy => "easy",
            Level::Medium => "medium",
            Level::Hard => "hard",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Level::ALL.into_iter().find(|level| level.as_str() == text)
    }
}

/// A bot's next command in the match `view` shows, or `None` when it has nothing to do
/// (not its turn, fleet already locked, match over). Joining is not decided here: a bot
/// is not yet a participant then, and the worker joins the matches it is invited to.
pub fn next_command(level: Level, view: &MatchView, rng: &mut impl Rng) -> Option<Command> {
    let participant = view.participant.as_ref()?;
    let me: Uuid = view.you?;
    match view.phase {
        Phase::Placement if !participant.fleet_locked => Some(Command::PlaceFleet {
            placements: random_fleet(view.rules.preset(), rng),
        }),
        Phase::Battle if view.turn == Some(me) => {
            choose_shot(level, view, rng).map(|cell| Command::Fire { cell })
        }
        _ => None,
    }
}
