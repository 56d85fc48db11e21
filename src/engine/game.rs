//! The match state machine: commands are decided into events, and events fold into state.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::cell::{Cell, CellSet, Placement};
use super::commit;
use super::error::Refusal;
use super::fleet::Fleet;
use super::ruleset::{MatchRules, RuleSetId};

pub type PlayerId = Uuid;
pub type Timestamp = DateTime<Utc>;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Waiting,
    Placement,
    Battle,
    Finished,
    Cancelled,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Waiting => "waiting",
            Phase::Placement => "placement",
            Phase::Battle => "battle",
            Phase::Finished => "finished",
            Phase::Cancelled => "cancelled",
        }
    }

    pub fn is_over(self) -> bool {
        matches!(self, Phase::Finished | Phase::Cancelled)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Miss,
    Hit,
    Sunk,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    AllSunk,
    PlacementTimeout,
    BothPlacementTimeout,
    ShotTimeout,
    Resigned,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CancelReason {
    /// Nobody joined before the join clock ran out.
    NotJoined,
    /// The creator withdrew the match before anyone joined.
    Withdrawn,
    /// The invited player refused the challenge.
    Declined,
}

impl FinishReason {
    /// The reason as the event log and the API spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::AllSunk => "all_sunk",
            FinishReason::PlacementTimeout => "placement_timeout",
            FinishReason::BothPlacementTimeout => "both_placement_timeout",
            FinishReason::ShotTimeout => "shot_timeout",
            FinishReason::Resigned => "resigned",
        }
    }
}

impl CancelReason {
    /// The reason as the event log and the API spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            CancelReason::NotJoined => "not_joined",
            CancelReason::Withdrawn => "withdrawn",
            CancelReason::Declined => "declined",
        }
    }
}

/// One of the fixed reactions a player may send during a match (there is no free text).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Reaction {
    GoodLuck,
    NiceShot,
    Oops,
    Thanks,
    WellPlayed,
    GoodGame,
}

impl Reaction {
    /// Every reaction, in the order clients offer them.
    pub const ALL: [Reaction; 6] = [
        Reaction::GoodLuck,
        Reaction::NiceShot,
        Reaction::Oops,
        Reaction::Thanks,
        Reaction::WellPlayed,
        Reaction::GoodGame,
    ];

    /// The reaction as the event log and the API spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Reaction::GoodLuck => "good_luck",
            Reaction::NiceShot => "nice_shot",
            Reaction::Oops => "oops",
            Reaction::Thanks => "thanks",
            Reaction::WellPlayed => "well_played",
            Reaction::GoodGame => "good_game",
        }
    }
}

/// Most reactions one player may send in one match.
pub const REACTIONS_PER_PLAYER: u32 = 20;
/// Most single-ship moves (a ship placed, moved or picked up) one player may make in one
/// match; placing the whole fleet at once stays allowed, so nobody is stuck. A bound on
/// the match's log, which an export carries whole.
pub const PLACEMENT_MOVES_PER_PLAYER: u32 = 100;
/// Most times a match's clocks are given back time lost to an outage.
pub const CLOCK_EXTENSIONS_MAX: u32 = 20;
/// The most events one match's log can hold: its creation and the join, each player's
/// single-ship moves and a whole fleet placed over them (every ship picked up and placed
/// again), two locks and the battle's start, every cell of both seas fired at, every
/// reaction, the clock extensions, the end and a rating change.
pub const MATCH_EVENTS_MAX: usize = 2
    + 2 * (PLACEMENT_MOVES_PER_PLAYER as usize + 2 * super::ruleset::FLEET_SHIPS_MAX)
    + 2
    + 1
    + 2 * (super::cell::BOARD_SIZE as usize * super::cell::BOARD_SIZE as usize)
    + 2 * REACTIONS_PER_PLAYER as usize
    + CLOCK_EXTENSIONS_MAX as usize
    + 2;
/// Seconds one player waits between two reactions.
pub const REACTION_GAP_SECONDS: u32 = 3;

/// How a finished match ended; `winner` is `None` for a draw.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MatchResult {
    pub winner: Option<Uuid>,
    pub reason: FinishReason,
}

/// A sunk ship as recorded. Views and feeds drop `index` and `name` where the preset does
/// not reveal which ship sank.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SunkShip {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[schema(value_type = Vec<String>)]
    pub cells: Vec<Cell>,
}

/// How a rated match counted for one player.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Score {
    Win,
    Loss,
    Draw,
}

/// A Glicko-2 rating: rating, deviation and volatility.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, ToSchema)]
pub struct Rating {
    pub rating: f64,
    pub deviation: f64,
    pub volatility: f64,
}

// Ratings are always finite, so bitwise equality is a true equivalence and lets `Event`
// stay `Eq`.
impl PartialEq for Rating {
    fn eq(&self, other: &Self) -> bool {
        self.rating.to_bits() == other.rating.to_bits()
            && self.deviation.to_bits() == other.deviation.to_bits()
            && self.volatility.to_bits() == other.volatility.to_bits()
    }
}

impl Eq for Rating {}

/// One player's ladder rating before and after a ranked match.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RatingChange {
    pub player: Uuid,
    pub score: Score,
    /// This match is the player's `game`-th rated game on this ladder.
    pub game: u32,
    pub before: Rating,
    pub after: Rating,
}

/// Everything that can happen to a match. `kind` names it in the event log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    MatchCreated {
        creator: Uuid,
        rules: MatchRules,
        ranked: bool,
        /// A direct challenge: only this player may join.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        opponent: Option<Uuid>,
        /// When the match is cancelled if nobody joins.
        deadline: DateTime<Utc>,
    },
    PlayerJoined {
        player: Uuid,
        /// The placement deadline both players share.
        deadline: DateTime<Utc>,
    },
    ShipPlaced {
        player: Uuid,
        index: usize,
        /// Absent in the opponent's and spectators' feeds until the match is over.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        placement: Option<Placement>,
    },
    ShipRemoved {
        player: Uuid,
        index: usize,
    },
    FleetLocked {
        player: Uuid,
        commitment: String,
        /// Opened only when the match is over.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        salt: Option<String>,
    },
    BattleStarted {
        /// Drawn at random by the server.
        first: Uuid,
        deadline: DateTime<Utc>,
    },
    ShotFired {
        player: Uuid,
        #[schema(value_type = String)]
        cell: Cell,
        outcome: Outcome,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sunk_ship: Option<SunkShip>,
        /// Cells around a sunk ship now known to be empty (presets that mark them).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        #[schema(value_type = Vec<String>)]
        marked: Vec<Cell>,
        next_turn: Option<Uuid>,
        deadline: Option<DateTime<Utc>>,
    },
    /// The running clock was moved by `milliseconds` (time lost to a service outage is given
    /// back).
    ClockExtended {
        deadline: DateTime<Utc>,
        milliseconds: i64,
    },
    MatchFinished {
        winner: Option<Uuid>,
        reason: FinishReason,
    },
    MatchCancelled {
        reason: CancelReason,
    },
    /// The ladder's verdict on a finished ranked match, recorded by the service in the
    /// same transaction as the result.
    RatingUpdated {
        ruleset: RuleSetId,
        changes: Vec<RatingChange>,
    },
    /// A player sent one of the fixed reactions; nothing of the game changes.
    Reaction {
        player: Uuid,
        reaction: Reaction,
        /// The earliest time this player may react again.
        next_at: DateTime<Utc>,
    },
}

impl Event {
    pub fn kind(&self) -> &'static str {
        match self {
            Event::MatchCreated { .. } => "match_created",
            Event::PlayerJoined { .. } => "player_joined",
            Event::ShipPlaced { .. } => "ship_placed",
            Event::ShipRemoved { .. } => "ship_removed",
            Event::FleetLocked { .. } => "fleet_locked",
            Event::BattleStarted { .. } => "battle_started",
            Event::ShotFired { .. } => "shot_fired",
            Event::ClockExtended { .. } => "clock_extended",
            Event::MatchFinished { .. } => "match_finished",
            Event::MatchCancelled { .. } => "match_cancelled",
            Event::RatingUpdated { .. } => "rating_updated",
            Event::Reaction { .. } => "reaction",
        }
    }

    /// The player whose action this event records, if any (clock events have none).
    pub fn actor(&self) -> Option<Uuid> {
        match self {
            Event::MatchCreated { creator, .. } => Some(*creator),
            Event::PlayerJoined { player, .. }
            | Event::ShipPlaced { player, .. }
            | Event::ShipRemoved { player, .. }
            | Event::FleetLocked { player, .. }
            | Event::ShotFired { player, .. }
            | Event::Reaction { player, .. } => Some(*player),
            Event::BattleStarted { .. }
            | Event::ClockExtended { .. }
            | Event::MatchFinished { .. }
            | Event::MatchCancelled { .. }
            | Event::RatingUpdated { .. } => None,
        }
    }
}

/// What a player asks the referee to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    Join,
    PlaceShip {
        index: usize,
        placement: Placement,
    },
    RemoveShip {
        index: usize,
    },
    PlaceFleet {
        placements: Vec<Placement>,
    },
    Fire {
        cell: Cell,
    },
    Resign,
    /// The invited player refuses a challenge that is still waiting for them.
    Decline,
    /// Send one of the fixed reactions (placement or battle only; rate-limited).
    React {
        reaction: Reaction,
    },
}

/// The random draws a command may need, made by the caller so the engine stays pure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Draw {
    /// Decides the first shooter when the battle starts: `false` = creator, `true` = joiner.
    pub coin: bool,
    /// Salt for a fleet commitment.
    pub salt: [u8; 16],
}

/// An event log that does not describe a possible match.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("event {position} ({kind}) does not follow from the events before it")]
pub struct CorruptLog {
    pub position: usize,
    pub kind: &'static str,
}

/// A shot as its shooter recorded it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShotRecord {
    pub cell: Cell,
    pub outcome: Outcome,
}

/// One seat's side of the match.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Side {
    pub player: Option<Uuid>,
    pub fleet: Fleet,
    pub commitment: Option<String>,
    pub salt: Option<String>,
    /// Shots this player fired, in order.
    pub shots: Vec<ShotRecord>,
    /// Cells of the opponent's sea this player has shot or had marked.
    pub known: CellSet,
    /// Cells of the opponent's sea marked known-empty around sunk ships.
    pub marked: CellSet,
    /// Opponent ship cells this player has hit.
    pub hits: CellSet,
    /// Indices of opponent ships this player has sunk, in sinking order.
    pub sunk: Vec<usize>,
    /// Reactions this player sent in this match.
    pub reactions: u32,
    /// Ships this player placed or picked up in this match, one `ShipPlaced` or
    /// `ShipRemoved` each.
    pub placement_moves: u32,
    /// The earliest time this player may react again (after their last reaction).
    pub next_reaction_at: Option<DateTime<Utc>>,
}

impl Side {
    fn new(player: Option<Uuid>, rules: &MatchRules) -> Self {
        Self {
            player,
            fleet: Fleet::new(rules.preset()),
            commitment: None,
            salt: None,
            shots: Vec::new(),
            known: CellSet::EMPTY,
            marked: CellSet::EMPTY,
            hits: CellSet::EMPTY,
            sunk: Vec::new(),
            reactions: 0,
            placement_moves: 0,
            next_reaction_at: None,
        }
    }
}

/// A match: the fold of its events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Match {
    pub rules: MatchRules,
    pub ranked: bool,
    pub phase: Phase,
    /// Seat 0 is the creator, seat 1 the joiner.
    pub sides: [Side; 2],
    pub invited: Option<Uuid>,
    pub turn: Option<usize>,
    pub deadline: Option<DateTime<Utc>>,
    pub result: Option<MatchResult>,
    /// How many events have been folded in.
    pub version: u64,
    /// How many times the clocks were given back time lost to an outage.
    pub clock_extensions: u32,
}

fn seconds(value: u32) -> Duration {
    Duration::seconds(i64::from(value))
}

fn wrong_phase(actual: Phase, expected: &'static str) -> Refusal {
    Refusal::WrongPhase {
        actual: actual.as_str(),
        expected,
    }
}

impl Match {
    /// The event that creates a match.
    pub fn create(
        creator: Uuid,
        rules: MatchRules,
        ranked: bool,
        opponent: Option<Uuid>,
        now: DateTime<Utc>,
    ) -> Result<Event, Refusal> {
        if opponent == Some(creator) {
            return Err(Refusal::OwnMatch);
        }
        if ranked && rules.has_house_options() {
            return Err(Refusal::InvalidOption(
                "house options make a match unranked".to_owned(),
            ));
        }
        Ok(Event::MatchCreated {
            creator,
            rules,
            ranked,
            opponent,
            deadline: now + seconds(rules.join_seconds),
        })
    }

    /// Rebuilds a match from its whole event log.
    pub fn fold<'a>(events: impl IntoIterator<Item = &'a Event>) -> Result<Match, CorruptLog> {
        let mut events = events.into_iter();
        let Some(Event::MatchCreated {
            creator,
            rules,
            ranked,
            opponent,
            deadline,
        }) = events.next()
        else {
            return Err(CorruptLog {
                position: 0,
                kind: "match_created",
            });
        };
        let mut state = Match {
            rules: *rules,
            ranked: *ranked,
            phase: Phase::Waiting,
            sides: [Side::new(Some(*creator), rules), Side::new(None, rules)],
            invited: *opponent,
            turn: None,
            deadline: Some(*deadline),
            result: None,
            version: 1,
            clock_extensions: 0,
        };
        for event in events {
            state.evolve(event)?;
        }
        Ok(state)
    }

    pub fn seat_of(&self, player: Uuid) -> Option<usize> {
        self.sides
            .iter()
            .position(|side| side.player == Some(player))
    }

    pub fn player(&self, seat: usize) -> Option<Uuid> {
        self.sides.get(seat).and_then(|side| side.player)
    }

    pub fn players(&self) -> Vec<Uuid> {
        self.sides.iter().filter_map(|side| side.player).collect()
    }

    /// Decides what `actor`'s command causes. The state is untouched; apply the events with
    /// [`Match::evolve`] (or use [`Match::execute`]).
    pub fn decide(
        &self,
        actor: Uuid,
        command: &Command,
        now: DateTime<Utc>,
        draw: Draw,
    ) -> Result<Vec<Event>, Refusal> {
        // Joining is the one command of someone not yet seated.
        let seat = || self.seat_of(actor).ok_or(Refusal::NotAPlayer);
        match command {
            Command::Join => self.decide_join(actor, now),
            Command::PlaceShip { index, placement } => {
                self.decide_place_ship(seat()?, *index, *placement, now, draw)
            }
            Command::RemoveShip { index } => self.decide_remove_ship(seat()?, *index),
            Command::PlaceFleet { placements } => {
                self.decide_place_fleet(seat()?, placements, now, draw)
            }
            Command::Fire { cell } => self.decide_fire(seat()?, *cell, now),
            Command::Resign => self.decide_resign(seat()?),
            Command::Decline => self.decide_decline(actor),
            Command::React { reaction } => self.decide_react(seat()?, *reaction, now),
        }
    }

    /// Applies whichever clock has run out at `now`; refused with `NotDue` when none has,
    /// so a deadline moved by a racing command is never enforced twice or too early.
    pub fn expire(&self, now: DateTime<Utc>) -> Result<Vec<Event>, Refusal> {
        match self.deadline {
            Some(deadline) if deadline <= now => {}
            _ => return Err(Refusal::NotDue),
        }
        let event = match self.phase {
            Phase::Waiting => Event::MatchCancelled {
                reason: CancelReason::NotJoined,
            },
            Phase::Placement => {
                let locked: Vec<usize> = (0..2)
                    .filter(|&seat| self.sides[seat].fleet.is_locked())
                    .collect();
                match locked.as_slice() {
                    [seat] => Event::MatchFinished {
                        winner: self.player(*seat),
                        reason: FinishReason::PlacementTimeout,
                    },
                    _ => Event::MatchFinished {
                        winner: None,
                        reason: FinishReason::BothPlacementTimeout,
                    },
                }
            }
            Phase::Battle => {
                let on_turn = self.turn.unwrap_or(0);
                Event::MatchFinished {
                    winner: self.player(1 - on_turn),
                    reason: FinishReason::ShotTimeout,
                }
            }
            Phase::Finished | Phase::Cancelled => return Err(Refusal::NotDue),
        };
        Ok(vec![event])
    }

    /// Moves the running clock later by `by` (used to give back time lost to an outage).
    pub fn extend_clock(&self, by: Duration) -> Result<Vec<Event>, Refusal> {
        let deadline = self.deadline.ok_or(Refusal::NotDue)?;
        if self.clock_extensions >= CLOCK_EXTENSIONS_MAX {
            return Err(Refusal::InvalidOption(format!(
                "a match's clocks are given back time at most {CLOCK_EXTENSIONS_MAX} times"
            )));
        }
        if by <= Duration::zero() {
            return Err(Refusal::InvalidOption(
                "a clock can only be given more time".to_owned(),
            ));
        }
        Ok(vec![Event::ClockExtended {
            deadline: deadline + by,
            milliseconds: by.num_milliseconds(),
        }])
    }

    /// Decides and applies a command atomically: on refusal the state is unchanged.
    pub fn execute(
        &mut self,
        actor: Uuid,
        command: &Command,
        now: DateTime<Utc>,
        draw: Draw,
    ) -> Result<Vec<Event>, Refusal> {
        let events = self.decide(actor, command, now, draw)?;
        self.evolve_all(&events);
        Ok(events)
    }

    /// Applies events this state itself decided, which always follow.
    pub fn evolve_all(&mut self, events: &[Event]) {
        for event in events {
            // Events from `decide` always fit the state they were decided on; a debug build
            // says so loudly rather than leaving a state its own log does not fold to.
            let folded = self.evolve(event);
            debug_assert!(folded.is_ok(), "a decided event did not fold: {folded:?}");
        }
    }

    fn decide_join(&self, actor: Uuid, now: DateTime<Utc>) -> Result<Vec<Event>, Refusal> {
        if self.phase != Phase::Waiting {
            return Err(wrong_phase(self.phase, "waiting"));
        }
        if self.sides[0].player == Some(actor) {
            return Err(Refusal::OwnMatch);
        }
        if self.invited.is_some_and(|invited| invited != actor) {
            return Err(Refusal::NotInvited);
        }
        Ok(vec![Event::PlayerJoined {
            player: actor,
            deadline: now + seconds(self.rules.clock.placement_seconds),
        }])
    }

    fn placing_fleet(&self, seat: usize) -> Result<&Fleet, Refusal> {
        if self.phase != Phase::Placement {
            return Err(wrong_phase(self.phase, "placement"));
        }
        let fleet = &self.sides[seat].fleet;
        if fleet.is_locked() {
            return Err(Refusal::FleetLocked);
        }
        Ok(fleet)
    }

    fn decide_place_ship(
        &self,
        seat: usize,
        index: usize,
        placement: Placement,
        now: DateTime<Utc>,
        draw: Draw,
    ) -> Result<Vec<Event>, Refusal> {
        let fleet = self.placing_fleet(seat)?;
        self.single_move_allowed(seat)?;
        let cells = fleet.check_placement(index, placement)?;
        let player = self.player(seat).ok_or(Refusal::NotAPlayer)?;
        let mut events = vec![Event::ShipPlaced {
            player,
            index,
            placement: Some(placement),
        }];
        let mut after = fleet.clone();
        after.set(index, placement, cells);
        if after.is_complete() {
            self.lock_and_maybe_start(seat, &after, now, draw, &mut events);
        }
        Ok(events)
    }

    fn decide_remove_ship(&self, seat: usize, index: usize) -> Result<Vec<Event>, Refusal> {
        let fleet = self.placing_fleet(seat)?;
        self.single_move_allowed(seat)?;
        fleet.check_index(index)?;
        if fleet.slots()[index].is_none() {
            return Err(Refusal::ShipNotPlaced(index));
        }
        let player = self.player(seat).ok_or(Refusal::NotAPlayer)?;
        Ok(vec![Event::ShipRemoved { player, index }])
    }

    /// Whether the player in `seat` may still move a single ship (see
    /// [`PLACEMENT_MOVES_PER_PLAYER`]).
    fn single_move_allowed(&self, seat: usize) -> Result<(), Refusal> {
        if self.sides[seat].placement_moves >= PLACEMENT_MOVES_PER_PLAYER {
            return Err(Refusal::TooManyPlacementMoves);
        }
        Ok(())
    }

    fn decide_place_fleet(
        &self,
        seat: usize,
        placements: &[Placement],
        now: DateTime<Utc>,
        draw: Draw,
    ) -> Result<Vec<Event>, Refusal> {
        let fleet = self.placing_fleet(seat)?;
        let cells = Fleet::check_whole(self.rules.preset(), placements)?;
        let player = self.player(seat).ok_or(Refusal::NotAPlayer)?;
        let mut after = fleet.clone();
        let mut events = Vec::with_capacity(2 * placements.len() + 2);
        // Ships already placed one by one are picked up first: each `ShipPlaced` is folded
        // against the ships still lying on the sea, where an old position could overlap
        // (or touch) a new one.
        for (index, slot) in fleet.slots().iter().enumerate() {
            if slot.is_some() {
                events.push(Event::ShipRemoved { player, index });
            }
        }
        for (index, (placement, cells)) in placements.iter().zip(cells).enumerate() {
            after.set(index, *placement, cells);
            events.push(Event::ShipPlaced {
                player,
                index,
                placement: Some(*placement),
            });
        }
        self.lock_and_maybe_start(seat, &after, now, draw, &mut events);
        Ok(events)
    }

    fn lock_and_maybe_start(
        &self,
        seat: usize,
        complete: &Fleet,
        now: DateTime<Utc>,
        draw: Draw,
        events: &mut Vec<Event>,
    ) {
        let placements: Vec<Placement> = complete.placements().into_iter().flatten().collect();
        let salt = hex::encode(draw.salt);
        let commitment = commit::commitment(self.rules.ruleset, &salt, &placements);
        let player = self.sides[seat].player.unwrap_or_default();
        events.push(Event::FleetLocked {
            player,
            commitment,
            salt: Some(salt),
        });
        if self.sides[1 - seat].fleet.is_locked() {
            let first = self.player(usize::from(draw.coin)).unwrap_or_default();
            events.push(Event::BattleStarted {
                first,
                deadline: now + seconds(self.rules.clock.shot_seconds),
            });
        }
    }

    fn decide_fire(
        &self,
        seat: usize,
        cell: Cell,
        now: DateTime<Utc>,
    ) -> Result<Vec<Event>, Refusal> {
        if self.phase != Phase::Battle {
            return Err(wrong_phase(self.phase, "battle"));
        }
        if self.turn != Some(seat) {
            return Err(Refusal::NotYourTurn);
        }
        let shooter = &self.sides[seat];
        if shooter.known.contains(cell) {
            return Err(if shooter.marked.contains(cell) {
                Refusal::AlreadyKnown
            } else {
                Refusal::AlreadyShot
            });
        }
        let target = &self.sides[1 - seat];
        let preset = self.rules.preset();
        let (outcome, sunk_ship, marked) = match target.fleet.ship_at(cell) {
            None => (Outcome::Miss, None, Vec::new()),
            Some(index) => {
                let ship_cells = target.fleet.ship_cells(index);
                let hits = shooter.hits.union(CellSet::single(cell));
                if ship_cells.is_subset_of(hits) {
                    let marked = if preset.sink_reveals.mark_ring {
                        ship_cells
                            .dilated()
                            .minus(ship_cells)
                            .minus(shooter.known)
                            .to_vec()
                    } else {
                        Vec::new()
                    };
                    let sunk = SunkShip {
                        index: Some(index),
                        name: Some(preset.fleet[index].name.to_owned()),
                        cells: ship_cells.to_vec(),
                    };
                    (Outcome::Sunk, Some(sunk), marked)
                } else {
                    (Outcome::Hit, None, Vec::new())
                }
            }
        };
        let player = shooter.player.unwrap_or_default();
        let fleet_destroyed =
            outcome != Outcome::Miss && shooter.hits.len() + 1 == preset.fleet_cells();
        if fleet_destroyed {
            return Ok(vec![
                Event::ShotFired {
                    player,
                    cell,
                    outcome,
                    sunk_ship,
                    marked,
                    next_turn: None,
                    deadline: None,
                },
                Event::MatchFinished {
                    winner: Some(player),
                    reason: FinishReason::AllSunk,
                },
            ]);
        }
        let shoots_again = outcome != Outcome::Miss && self.rules.extra_shot_on_hit();
        let next_seat = if shoots_again { seat } else { 1 - seat };
        Ok(vec![Event::ShotFired {
            player,
            cell,
            outcome,
            sunk_ship,
            marked,
            next_turn: self.player(next_seat),
            deadline: Some(now + seconds(self.rules.clock.shot_seconds)),
        }])
    }

    fn decide_decline(&self, actor: Uuid) -> Result<Vec<Event>, Refusal> {
        if self.phase != Phase::Waiting {
            return Err(wrong_phase(self.phase, "waiting"));
        }
        if self.invited != Some(actor) {
            return Err(Refusal::NotInvited);
        }
        Ok(vec![Event::MatchCancelled {
            reason: CancelReason::Declined,
        }])
    }

    fn decide_react(
        &self,
        seat: usize,
        reaction: Reaction,
        now: DateTime<Utc>,
    ) -> Result<Vec<Event>, Refusal> {
        if !matches!(self.phase, Phase::Placement | Phase::Battle) {
            return Err(wrong_phase(self.phase, "placement or battle"));
        }
        let side = &self.sides[seat];
        if side.reactions >= REACTIONS_PER_PLAYER {
            return Err(Refusal::TooManyReactions { retry_after: None });
        }
        if let Some(next_at) = side.next_reaction_at.filter(|next_at| now < *next_at) {
            // Whole seconds, rounded up, so a retry after them is allowed.
            let wait = (next_at - now).num_milliseconds().max(1);
            let seconds = u64::try_from((wait + 999) / 1000).unwrap_or(1);
            return Err(Refusal::TooManyReactions {
                retry_after: Some(seconds),
            });
        }
        Ok(vec![Event::Reaction {
            player: side.player.unwrap_or_default(),
            reaction,
            next_at: now + seconds(REACTION_GAP_SECONDS),
        }])
    }

    fn decide_resign(&self, seat: usize) -> Result<Vec<Event>, Refusal> {
        match self.phase {
            Phase::Waiting => Ok(vec![Event::MatchCancelled {
                reason: CancelReason::Withdrawn,
            }]),
            Phase::Placement | Phase::Battle => Ok(vec![Event::MatchFinished {
                winner: self.player(1 - seat),
                reason: FinishReason::Resigned,
            }]),
            Phase::Finished | Phase::Cancelled => Err(wrong_phase(self.phase, "under way")),
        }
    }

    /// Folds one event into the state. Refuses events that cannot follow the current state,
    /// so a tampered or reordered log is detected rather than silently folded.
    pub fn evolve(&mut self, event: &Event) -> Result<(), CorruptLog> {
        let position = usize::try_from(self.version).unwrap_or(usize::MAX);
        let corrupt = || CorruptLog {
            position,
            kind: event.kind(),
        };
        let seat_of = |state: &Match, player: &Uuid| state.seat_of(*player).ok_or_else(corrupt);
        // Fleets change only while placing, and only until locked.
        let placing_seat = |state: &Match, player: &Uuid| {
            let seat = seat_of(state, player)?;
            if state.phase != Phase::Placement || state.sides[seat].fleet.is_locked() {
                return Err(corrupt());
            }
            Ok(seat)
        };
        if self.phase.is_over() && !matches!(event, Event::RatingUpdated { .. }) {
            // Nothing follows the end of a match but the rating change it causes.
            return Err(corrupt());
        }
        match event {
            Event::MatchCreated { .. } => return Err(corrupt()),
            Event::PlayerJoined { player, deadline } => {
                if self.phase != Phase::Waiting {
                    return Err(corrupt());
                }
                self.sides[1].player = Some(*player);
                self.phase = Phase::Placement;
                self.deadline = Some(*deadline);
            }
            Event::ShipPlaced {
                player,
                index,
                placement,
            } => {
                let seat = placing_seat(self, player)?;
                let placement = placement.ok_or_else(corrupt)?;
                let fleet = &mut self.sides[seat].fleet;
                let cells = fleet
                    .check_placement(*index, placement)
                    .map_err(|_| corrupt())?;
                fleet.set(*index, placement, cells);
                let side = &mut self.sides[seat];
                side.placement_moves = side.placement_moves.saturating_add(1);
            }
            Event::ShipRemoved { player, index } => {
                let seat = placing_seat(self, player)?;
                let fleet = &mut self.sides[seat].fleet;
                fleet.check_index(*index).map_err(|_| corrupt())?;
                fleet.clear(*index);
                let side = &mut self.sides[seat];
                side.placement_moves = side.placement_moves.saturating_add(1);
            }
            Event::FleetLocked {
                player,
                commitment,
                salt,
            } => {
                let seat = placing_seat(self, player)?;
                let side = &mut self.sides[seat];
                if !side.fleet.is_complete() {
                    return Err(corrupt());
                }
                side.fleet.lock();
                side.commitment = Some(commitment.clone());
                side.salt.clone_from(salt);
            }
            Event::BattleStarted { first, deadline } => {
                let seat = seat_of(self, first)?;
                if self.phase != Phase::Placement
                    || !self.sides.iter().all(|side| side.fleet.is_locked())
                {
                    return Err(corrupt());
                }
                self.phase = Phase::Battle;
                self.turn = Some(seat);
                self.deadline = Some(*deadline);
            }
            Event::ShotFired {
                player,
                cell,
                outcome,
                sunk_ship,
                marked,
                next_turn,
                deadline,
            } => {
                let seat = seat_of(self, player)?;
                if self.phase != Phase::Battle
                    || self.turn != Some(seat)
                    || self.sides[seat].known.contains(*cell)
                {
                    return Err(corrupt());
                }
                let next = next_turn.map(|next| seat_of(self, &next)).transpose()?;
                let side = &mut self.sides[seat];
                side.shots.push(ShotRecord {
                    cell: *cell,
                    outcome: *outcome,
                });
                side.known.insert(*cell);
                if *outcome != Outcome::Miss {
                    side.hits.insert(*cell);
                }
                if let Some(index) = sunk_ship.as_ref().and_then(|ship| ship.index) {
                    side.sunk.push(index);
                }
                let marked: CellSet = marked.iter().copied().collect();
                side.marked = side.marked.union(marked);
                side.known = side.known.union(marked);
                self.turn = next;
                self.deadline = *deadline;
            }
            Event::ClockExtended { deadline, .. } => {
                if self.deadline.is_none() {
                    return Err(corrupt());
                }
                self.deadline = Some(*deadline);
                self.clock_extensions = self.clock_extensions.saturating_add(1);
            }
            Event::MatchFinished { winner, reason } => {
                self.phase = Phase::Finished;
                self.result = Some(MatchResult {
                    winner: *winner,
                    reason: *reason,
                });
                self.turn = None;
                self.deadline = None;
            }
            Event::MatchCancelled { .. } => {
                self.phase = Phase::Cancelled;
                self.turn = None;
                self.deadline = None;
            }
            // A reaction changes nothing of the game: only the sender's count and gap.
            Event::Reaction {
                player, next_at, ..
            } => {
                let seat = seat_of(self, player)?;
                if !matches!(self.phase, Phase::Placement | Phase::Battle) {
                    return Err(corrupt());
                }
                let side = &mut self.sides[seat];
                side.reactions = side.reactions.saturating_add(1);
                side.next_reaction_at = Some(*next_at);
            }
            // Ratings never change the match; they only follow a ranked result.
            Event::RatingUpdated { ruleset, changes } => {
                let rated = changes
                    .iter()
                    .all(|change| self.seat_of(change.player).is_some());
                if self.phase != Phase::Finished
                    || !self.ranked
                    || *ruleset != self.rules.ruleset
                    || !rated
                {
                    return Err(corrupt());
                }
            }
        }
        self.version += 1;
        Ok(())
    }

    /// After the match: whether each locked fleet matches its published commitment.
    pub fn commitments_verify(&self) -> bool {
        self.sides
            .iter()
            .all(|side| match (&side.commitment, &side.salt) {
                (Some(published), Some(salt)) => {
                    let fleet: Vec<Placement> =
                        side.fleet.placements().into_iter().flatten().collect();
                    commit::verify(self.rules.ruleset, salt, &fleet, published)
                }
                (None, _) => true,
                (Some(_), None) => false,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_spelled_as_serialised() {
        use FinishReason::*;
        for reason in [
            AllSunk,
            PlacementTimeout,
            BothPlacementTimeout,
            ShotTimeout,
            Resigned,
        ] {
            assert_eq!(
                serde_json::json!(reason.as_str()),
                serde_json::json!(reason)
            );
        }
        for reason in [
            CancelReason::NotJoined,
            CancelReason::Withdrawn,
            CancelReason::Declined,
        ] {
            assert_eq!(
                serde_json::json!(reason.as_str()),
                serde_json::json!(reason)
            );
        }
    }
}
