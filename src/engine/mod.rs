//! The pure rules engine: cells, presets, fleets, the match state machine, views and
//! commitments. No I/O, no clock and no randomness: time and random draws are arguments.
//!
//! A command is *decided* against a state into events ([`Match::decide`], [`Match::expire`])
//! without touching it, and events are *folded* into state ([`Match::evolve`],
//! [`Match::fold`]), so `state == fold(events)` by construction. Views ([`Match::view`],
//! [`Match::redact`]) are the only way hidden information leaves.

pub mod cell;
pub mod commit;
pub mod error;
pub mod fleet;
pub mod game;
pub mod ruleset;
pub mod snapshot;
pub mod view;

pub use cell::{BOARD_SIZE, Cell, CellSet, Orientation, Placement};
pub use error::Refusal;
pub use fleet::{Fleet, PlacementHints};
pub use game::{
    CancelReason, Command, CorruptLog, Draw, Event, FinishReason, Match, MatchResult, Outcome,
    Phase, PlayerId, REACTION_GAP_SECONDS, REACTIONS_PER_PLAYER, Rating, RatingChange, Reaction,
    Score, SunkShip, Timestamp,
};
pub use ruleset::{Clock, HouseOptions, MatchRules, RuleSet, RuleSetId};
pub use snapshot::Snapshot;
pub use view::{MatchView, OpenedFleet, Viewer};
