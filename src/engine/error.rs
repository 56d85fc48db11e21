//! Every way the rules refuse a command; each kind maps to one stable API error code.

use thiserror::Error;

/// Why the engine refused a command. A refusal never changes the match.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum Refusal {
    #[error("`{0}` is not a cell: write a column letter A–J then a row 1–10, e.g. B3")]
    InvalidCell(String),
    #[error("that is off the board: columns are A–J and rows 1–10")]
    OffBoard,
    #[error("that ship would overlap another ship")]
    Overlap,
    #[error("ships may not touch in this rule set, not even at a corner")]
    ShipsTouching,
    #[error("there is no ship {index} in this fleet (it has {fleet_size} ships, numbered from 0)")]
    UnknownShip { index: usize, fleet_size: usize },
    #[error("ship {0} is not placed")]
    ShipNotPlaced(usize),
    #[error("a whole fleet needs exactly {expected} ships, got {got}")]
    WrongFleetSize { expected: usize, got: usize },
    #[error("your fleet is locked and can no longer move")]
    FleetLocked,
    #[error("the match is {actual}; that needs it to be {expected}")]
    WrongPhase {
        actual: &'static str,
        expected: &'static str,
    },
    #[error("you are not a player in this match")]
    NotAPlayer,
    #[error("it is not your turn")]
    NotYourTurn,
    #[error("you already shot at that cell")]
    AlreadyShot,
    #[error("that cell is already known to be empty (it borders a sunk ship)")]
    AlreadyKnown,
    #[error("you cannot join your own match")]
    OwnMatch,
    #[error("this match is a challenge for another player")]
    NotInvited,
    #[error("no clock of this match has run out yet")]
    NotDue,
    #[error("{0}")]
    InvalidOption(String),
    /// `retry_after`: seconds until the next reaction is allowed; `None` once the player
    /// sent every reaction a match allows (no later retry succeeds).
    #[error("{}", too_many_reactions(*.retry_after))]
    TooManyReactions { retry_after: Option<u64> },
    /// A player moved single ships as often as a match allows: the whole fleet can still be
    /// placed in one command.
    #[error("{}", too_many_placement_moves())]
    TooManyPlacementMoves,
}

fn too_many_placement_moves() -> String {
    use super::game::PLACEMENT_MOVES_PER_PLAYER;
    format!(
        "you moved ships {PLACEMENT_MOVES_PER_PLAYER} times in this match, as many as it allows: \
         place the whole fleet at once (PUT /v1/matches/{{id}}/fleet)"
    )
}

fn too_many_reactions(retry_after: Option<u64>) -> String {
    use super::game::{REACTION_GAP_SECONDS, REACTIONS_PER_PLAYER};
    match retry_after {
        Some(seconds) => {
            format!("one reaction every {REACTION_GAP_SECONDS} s: retry in {seconds} s")
        }
        None => format!("you sent all {REACTIONS_PER_PLAYER} reactions a match allows"),
    }
}

impl Refusal {
    /// The stable machine-readable code clients match on.
    pub fn code(&self) -> &'static str {
        match self {
            Refusal::InvalidCell(_) => "invalid_cell",
            Refusal::OffBoard => "off_board",
            Refusal::Overlap => "overlap",
            Refusal::ShipsTouching => "ships_touching",
            Refusal::UnknownShip { .. } => "unknown_ship",
            Refusal::ShipNotPlaced(_) => "ship_not_placed",
            Refusal::WrongFleetSize { .. } => "wrong_fleet_size",
            Refusal::FleetLocked => "fleet_locked",
            Refusal::WrongPhase { .. } => "wrong_phase",
            Refusal::NotAPlayer => "not_a_player",
            Refusal::NotYourTurn => "not_your_turn",
            Refusal::AlreadyShot => "already_shot",
            Refusal::AlreadyKnown => "already_known",
            Refusal::OwnMatch => "own_match",
            Refusal::NotInvited => "not_invited",
            Refusal::NotDue => "not_due",
            Refusal::InvalidOption(_) => "invalid_option",
            Refusal::TooManyReactions { .. } => "too_many_reactions",
            Refusal::TooManyPlacementMoves => "too_many_placement_moves",
        }
    }
}
