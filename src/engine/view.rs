//! What each viewer may see: a player's view, a spectator's, the full record, and the
//! redaction of events. Hidden information never leaves the engine except through here.

use serde::Serialize;
use utoipa::ToSchema;

use super::cell::{Cell, Placement};
use super::fleet::PlacementHints;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::game::{Event, Match, MatchResult, Outcome, Phase, SunkShip};
use super::ruleset::MatchRules;

/// Who is looking.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Viewer {
    Player(Uuid),
    Spectator,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct ShotView {
    #[schema(value_type = String)]
    pub cell: Cell,
    pub outcome: Outcome,
}

/// A ship of the viewer's own fleet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct OwnShip {
    pub index: usize,
    pub name: &'static str,
    pub length: u8,
    /// `None` while not placed.
    pub placement: Option<Placement>,
    #[schema(value_type = Vec<String>)]
    pub cells: Vec<Cell>,
    /// Cells of this ship the opponent has hit.
    #[schema(value_type = Vec<String>)]
    pub hits: Vec<Cell>,
    pub sunk: bool,
}

/// The ship the client is asked to place next.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct NextShip {
    pub index: usize,
    pub name: &'static str,
    pub length: u8,
}

/// One player's side as anyone may see it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct SideView {
    pub player: Option<Uuid>,
    pub fleet_locked: bool,
    /// The fleet commitment, published when the fleet locks.
    pub commitment: Option<String>,
    /// Shots this player fired.
    pub shots: Vec<ShotView>,
    /// Opponent ships this player sank.
    pub sunk: Vec<SunkShip>,
    /// Opponent cells marked known-empty for this player.
    #[schema(value_type = Vec<String>)]
    pub marked: Vec<Cell>,
}

/// A locked fleet opened after the match, with the salt that verifies its commitment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct OpenedFleet {
    pub player: Uuid,
    /// Every ship, in fleet order.
    pub ships: Vec<Placement>,
    pub salt: String,
    pub commitment: String,
    pub commitment_verified: bool,
}

/// The match as one viewer may see it. Fields marked "participant" are absent for
/// spectators; `record` appears once the match is over.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct MatchView {
    pub rules: MatchRules,
    pub ranked: bool,
    pub phase: Phase,
    /// Seat order: creator first.
    pub players: Vec<Uuid>,
    /// Whom a direct challenge is for.
    pub invited: Option<Uuid>,
    /// The viewer's id when a participant.
    pub you: Option<Uuid>,
    pub turn: Option<Uuid>,
    pub deadline: Option<DateTime<Utc>>,
    pub result: Option<MatchResult>,
    pub sides: Vec<SideView>,
    #[serde(flatten)]
    pub participant: Option<ParticipantView>,
    pub record: Option<Vec<OpenedFleet>>,
}

/// What only a participant sees.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
pub struct ParticipantView {
    pub fleet: Vec<OwnShip>,
    pub next_ship: Option<NextShip>,
    pub placement_hints: Option<PlacementHints>,
    pub fleet_locked: bool,
    pub opponent_fleet_locked: bool,
    /// Own shots and outcomes.
    pub shots: Vec<ShotView>,
    /// Shots received.
    pub incoming: Vec<ShotView>,
    /// Opponent ships revealed by sinking them.
    pub sunk: Vec<SunkShip>,
    /// Opponent cells known to be empty around sunk ships.
    #[schema(value_type = Vec<String>)]
    pub marked: Vec<Cell>,
}

fn shot_views(state: &Match, seat: usize) -> Vec<ShotView> {
    state.sides[seat]
        .shots
        .iter()
        .map(|shot| ShotView {
            cell: shot.cell,
            outcome: shot.outcome,
        })
        .collect()
}

/// The ships `seat` has sunk, told as the preset tells a sink.
fn sunk_views(state: &Match, seat: usize) -> Vec<SunkShip> {
    let target = &state.sides[1 - seat].fleet;
    let preset = state.rules.preset();
    state.sides[seat]
        .sunk
        .iter()
        .map(|&index| SunkShip {
            index: None,
            name: preset
                .sink_reveals
                .ship_type
                .then(|| preset.fleet[index].name.to_owned()),
            cells: target.ship_cells(index).to_vec(),
        })
        .collect()
}

fn side_view(state: &Match, seat: usize) -> SideView {
    let side = &state.sides[seat];
    SideView {
        player: side.player,
        fleet_locked: side.fleet.is_locked(),
        // Published when the fleet locks, as in the event feed: a salted hash reveals nothing.
        commitment: side.commitment.clone(),
        shots: shot_views(state, seat),
        sunk: sunk_views(state, seat),
        marked: side.marked.to_vec(),
    }
}

fn participant_view(state: &Match, seat: usize) -> ParticipantView {
    let preset = state.rules.preset();
    let own = &state.sides[seat].fleet;
    let hits_taken = state.sides[1 - seat].hits;
    let fleet = preset
        .fleet
        .iter()
        .enumerate()
        .map(|(index, class)| {
            let cells = own.ship_cells(index);
            let hits = cells.intersection(hits_taken);
            OwnShip {
                index,
                name: class.name,
                length: class.length,
                placement: own.slots()[index].map(|ship| ship.placement),
                cells: cells.to_vec(),
                hits: hits.to_vec(),
                sunk: !cells.is_empty() && hits == cells,
            }
        })
        .collect();
    let placing = state.phase == Phase::Placement;
    let next_ship = placing
        .then(|| own.next_ship())
        .flatten()
        .map(|index| NextShip {
            index,
            name: preset.fleet[index].name,
            length: preset.fleet[index].length,
        });
    ParticipantView {
        fleet,
        next_ship,
        placement_hints: if placing { own.hints() } else { None },
        fleet_locked: own.is_locked(),
        opponent_fleet_locked: state.sides[1 - seat].fleet.is_locked(),
        shots: shot_views(state, seat),
        incoming: shot_views(state, 1 - seat),
        sunk: sunk_views(state, seat),
        marked: state.sides[seat].marked.to_vec(),
    }
}

/// Every locked fleet, opened (a side that never locked its fleet has nothing to open).
fn record(state: &Match) -> Vec<OpenedFleet> {
    state
        .sides
        .iter()
        .filter_map(|side| {
            let (player, commitment, salt) =
                (side.player?, side.commitment.clone()?, side.salt.clone()?);
            let ships: Vec<Placement> =
                side.fleet.placements().into_iter().collect::<Option<_>>()?;
            let verified = super::commit::verify(state.rules.ruleset, &salt, &ships, &commitment);
            Some(OpenedFleet {
                player,
                ships,
                salt,
                commitment,
                commitment_verified: verified,
            })
        })
        .collect()
}

impl Match {
    /// The match as `viewer` may see it now.
    pub fn view(&self, viewer: Viewer) -> MatchView {
        let seat = match viewer {
            Viewer::Player(player) => self.seat_of(player),
            Viewer::Spectator => None,
        };
        MatchView {
            rules: self.rules.effective(),
            ranked: self.ranked,
            phase: self.phase,
            players: self.players(),
            invited: self.invited,
            you: seat.and_then(|seat| self.player(seat)),
            turn: self.turn.and_then(|seat| self.player(seat)),
            deadline: self.deadline,
            result: self.result,
            sides: (0..2).map(|seat| side_view(self, seat)).collect(),
            participant: seat.map(|seat| participant_view(self, seat)),
            record: self.record(),
        }
    }

    /// Both fleets opened with their salts, once the match is over (public from then on);
    /// `None` before.
    pub fn record(&self) -> Option<Vec<OpenedFleet>> {
        self.phase.is_over().then(|| record(self))
    }

    /// `event` as `viewer` may see it, given whether the match is over by now. Before the
    /// end, another player's placements and salt are withheld, and a sunk ship is told only
    /// as the preset tells it; after the end the whole record is public.
    pub fn redact(&self, event: &Event, viewer: Viewer) -> Event {
        if self.phase.is_over() {
            return event.clone();
        }
        self.redact_as_played(event, viewer)
    }

    /// `event` as `viewer` saw it while the match was being played, whatever the phase
    /// now: a shot's answer tells the shooter no more than the preset reveals on a sink,
    /// even when that shot ends the match and makes the record public.
    pub fn redact_as_played(&self, event: &Event, viewer: Viewer) -> Event {
        let is_viewer = |player: &Uuid| viewer == Viewer::Player(*player);
        match event {
            Event::ShipPlaced { player, index, .. } if !is_viewer(player) => Event::ShipPlaced {
                player: *player,
                index: *index,
                placement: None,
            },
            Event::FleetLocked {
                player, commitment, ..
            } if !is_viewer(player) => Event::FleetLocked {
                player: *player,
                commitment: commitment.clone(),
                salt: None,
            },
            Event::ShotFired {
                player,
                cell,
                outcome,
                sunk_ship,
                marked,
                next_turn,
                deadline,
            } => {
                let target = self.seat_of(*player).map(|seat| self.player(1 - seat));
                let owner_sees_all = target.flatten().is_some_and(|target| is_viewer(&target));
                let reveal_type = self.rules.preset().sink_reveals.ship_type;
                let sunk_ship = sunk_ship.as_ref().map(|ship| {
                    if owner_sees_all {
                        ship.clone()
                    } else {
                        SunkShip {
                            index: None,
                            name: if reveal_type { ship.name.clone() } else { None },
                            cells: ship.cells.clone(),
                        }
                    }
                });
                Event::ShotFired {
                    player: *player,
                    cell: *cell,
                    outcome: *outcome,
                    sunk_ship,
                    marked: marked.clone(),
                    next_turn: *next_turn,
                    deadline: *deadline,
                }
            }
            other => other.clone(),
        }
    }
}
