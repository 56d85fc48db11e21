//! Property tests of the engine: random fleets against an independent oracle of the
//! placement rules, placement hints, and random whole matches in every preset checked for
//! termination, fold consistency and — above all — that nothing hidden leaks to a viewer.

use crate::engine_support;

use std::collections::BTreeSet;

use chrono::Duration;
use engine_support::*;
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use statki::engine::{
    Cell, Command, Draw, Event, FinishReason, Match, MatchRules, MatchView, Orientation, Outcome,
    Phase, Placement, Refusal, RuleSetId, Viewer,
};
use uuid::Uuid;

// ---------------------------------------------------------------- the oracle

/// The preset rules as RULES.md states them, written independently of the engine's tables.
#[derive(Clone, Copy, Debug)]
struct Spec {
    id: RuleSetId,
    lengths: &'static [u8],
    may_touch: bool,
    extra_shot: bool,
    marks_ring: bool,
    reveals_type: bool,
}

const STATKI: Spec = Spec {
    id: RuleSetId::Statki,
    lengths: &[5, 4, 3, 3, 2],
    may_touch: true,
    extra_shot: false,
    marks_ring: false,
    reveals_type: false,
};
const CLASSIC: Spec = Spec {
    id: RuleSetId::Classic,
    lengths: &[4, 3, 3, 2, 2, 2, 1, 1, 1, 1],
    may_touch: false,
    extra_shot: true,
    marks_ring: true,
    reveals_type: false,
};
const BATTAGLIA: Spec = Spec {
    id: RuleSetId::Battaglia,
    lengths: &[5, 4, 3, 3, 2, 1],
    may_touch: false,
    extra_shot: false,
    marks_ring: false,
    reveals_type: true,
};
const BATTAGLIA_EXTRA: Spec = Spec {
    extra_shot: true,
    ..BATTAGLIA
};

/// The three presets plus battaglia with its house option.
const VARIANTS: [Spec; 4] = [STATKI, CLASSIC, BATTAGLIA, BATTAGLIA_EXTRA];

fn match_rules(spec: Spec) -> MatchRules {
    if spec.extra_shot && spec.id == RuleSetId::Battaglia {
        rules_with_extra_shot(spec.id)
    } else {
        rules(spec.id)
    }
}

type Square = (u8, u8);

fn squares(placement: Placement, length: u8) -> Option<Vec<Square>> {
    let (col, row) = (placement.cell.col(), placement.cell.row());
    (0..length)
        .map(|k| match placement.orientation {
            Orientation::Horizontal => (col + k, row),
            Orientation::Vertical => (col, row + k),
        })
        .map(|(c, r)| (c < 10 && r < 10).then_some((c, r)))
        .collect()
}

fn fits(spec: Spec, others: &[Vec<Square>], ship: &[Square]) -> Result<(), Refusal> {
    let others: Vec<Square> = others.iter().flatten().copied().collect();
    if ship.iter().any(|s| others.contains(s)) {
        return Err(Refusal::Overlap);
    }
    let near = |a: Square, b: Square| a.0.abs_diff(b.0) <= 1 && a.1.abs_diff(b.1) <= 1;
    if !spec.may_touch && ship.iter().any(|&s| others.iter().any(|&o| near(s, o))) {
        return Err(Refusal::ShipsTouching);
    }
    Ok(())
}

/// What `PlaceShip { index, placement }` must answer given the current slots.
fn oracle_place_ship(
    spec: Spec,
    slots: &[Option<Placement>],
    index: usize,
    placement: Placement,
) -> Result<(), Refusal> {
    let Some(&length) = spec.lengths.get(index) else {
        return Err(Refusal::UnknownShip {
            index,
            fleet_size: spec.lengths.len(),
        });
    };
    let ship = squares(placement, length).ok_or(Refusal::OffBoard)?;
    let others: Vec<Vec<Square>> = slots
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != index)
        .filter_map(|(i, slot)| slot.and_then(|p| squares(p, spec.lengths[i])))
        .collect();
    fits(spec, &others, &ship)
}

/// What `PlaceFleet` must answer: ships are checked in fleet order.
fn oracle_place_fleet(spec: Spec, fleet: &[Placement]) -> Result<(), Refusal> {
    if fleet.len() != spec.lengths.len() {
        return Err(Refusal::WrongFleetSize {
            expected: spec.lengths.len(),
            got: fleet.len(),
        });
    }
    let mut placed = Vec::new();
    for (&length, &placement) in spec.lengths.iter().zip(fleet) {
        let ship = squares(placement, length).ok_or(Refusal::OffBoard)?;
        fits(spec, &placed, &ship)?;
        placed.push(ship);
    }
    Ok(())
}

fn random_placement(rng: &mut StdRng) -> Placement {
    let cell = Cell::new(rng.random_range(0..10), rng.random_range(0..10)).expect("on the board");
    let orientation = if rng.random() {
        Orientation::Horizontal
    } else {
        Orientation::Vertical
    };
    Placement { cell, orientation }
}

fn all_placements() -> impl Iterator<Item = Placement> {
    Orientation::BOTH
        .into_iter()
        .flat_map(|orientation| Cell::all().map(move |cell| Placement { cell, orientation }))
}

/// A legal fleet made by random placement attempts under the oracle's rules.
fn random_legal_fleet(spec: Spec, rng: &mut StdRng) -> Vec<Placement> {
    'restart: loop {
        let mut fleet = Vec::new();
        let mut placed = Vec::new();
        for &length in spec.lengths {
            let found = (0..300).find_map(|_| {
                let placement = random_placement(rng);
                let ship = squares(placement, length)?;
                fits(spec, &placed, &ship).ok()?;
                Some((placement, ship))
            });
            let Some((placement, ship)) = found else {
                continue 'restart;
            };
            fleet.push(placement);
            placed.push(ship);
        }
        return fleet;
    }
}

// ---------------------------------------------------------------- fleets

#[derive(Clone, Copy, Debug)]
enum Flaw {
    OffBoard,
    Overlap,
    Touching,
    WrongSize,
}

fn variant() -> impl Strategy<Value = Spec> {
    (0..VARIANTS.len()).prop_map(|i| VARIANTS[i])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn random_legal_fleets_are_accepted(spec in variant(), seed in any::<u64>(), joiner in any::<bool>()) {
        let mut rng = StdRng::seed_from_u64(seed);
        let fleet = random_legal_fleet(spec, &mut rng);
        prop_assert_eq!(oracle_place_fleet(spec, &fleet), Ok(()));
        let mut game = Game::joined(match_rules(spec));
        let player = if joiner { JOINER } else { CREATOR };
        let events = game
            .try_exec(player, &Command::PlaceFleet { placements: fleet.clone() })
            .map_err(|refusal| TestCaseError::fail(format!("{fleet:?} refused: {refusal}")))?;
        prop_assert_eq!(events.len(), fleet.len() + 1);
        let seat = usize::from(joiner);
        let side = &game.state.sides[seat];
        prop_assert!(side.fleet.is_locked());
        prop_assert_eq!(side.fleet.placements(), fleet.iter().copied().map(Some).collect::<Vec<_>>());
        prop_assert!(game.state.commitments_verify());
    }

    #[test]
    fn random_illegal_fleets_are_refused_with_the_right_kind(
        spec in variant(),
        seed in any::<u64>(),
        flaw in prop_oneof![
            Just(Flaw::OffBoard),
            Just(Flaw::Overlap),
            Just(Flaw::Touching),
            Just(Flaw::WrongSize)
        ],
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut fleet = random_legal_fleet(spec, &mut rng);
        let n = fleet.len();
        let ship_squares = |fleet: &[Placement], upto: usize| -> Vec<Vec<Square>> {
            (0..upto)
                .map(|i| squares(fleet[i], spec.lengths[i]).expect("a legal ship"))
                .collect()
        };
        let intended = match flaw {
            Flaw::OffBoard => {
                let long: Vec<usize> = (0..n).filter(|&i| spec.lengths[i] > 1).collect();
                let k = long[rng.random_range(0..long.len())];
                let length = spec.lengths[k];
                let overhang = rng.random_range(11 - length..10);
                let other = rng.random_range(0..10);
                fleet[k] = if rng.random() {
                    Placement { cell: Cell::new(overhang, other).expect("on board"), orientation: Orientation::Horizontal }
                } else {
                    Placement { cell: Cell::new(other, overhang).expect("on board"), orientation: Orientation::Vertical }
                };
                Refusal::OffBoard
            }
            Flaw::Overlap => {
                let k = rng.random_range(1..n);
                let j = rng.random_range(0..k);
                let target = squares(fleet[j], spec.lengths[j]).expect("a legal ship");
                let (col, row) = target[rng.random_range(0..target.len())];
                let candidates: Vec<Placement> = all_placements()
                    .filter(|&p| squares(p, spec.lengths[k]).is_some_and(|s| s.contains(&(col, row))))
                    .collect();
                fleet[k] = candidates[rng.random_range(0..candidates.len())];
                Refusal::Overlap
            }
            Flaw::Touching => {
                let k = rng.random_range(1..n);
                let before = ship_squares(&fleet, k);
                let loose = Spec { may_touch: true, ..spec };
                let strict = Spec { may_touch: false, ..spec };
                let candidates: Vec<Placement> = all_placements()
                    .filter(|&p| {
                        squares(p, spec.lengths[k]).is_some_and(|s| {
                            fits(loose, &before, &s).is_ok() && fits(strict, &before, &s).is_err()
                        })
                    })
                    .collect();
                prop_assume!(!candidates.is_empty());
                fleet[k] = candidates[rng.random_range(0..candidates.len())];
                Refusal::ShipsTouching
            }
            Flaw::WrongSize => {
                if rng.random() {
                    fleet.remove(rng.random_range(0..n));
                } else {
                    fleet.push(fleet[0]);
                }
                Refusal::WrongFleetSize { expected: n, got: fleet.len() }
            }
        };
        let expected = oracle_place_fleet(spec, &fleet);
        if spec.may_touch && matches!(flaw, Flaw::Touching) {
            // Touching is no flaw in statki: accepted, unless a later ship now overlaps.
            prop_assert!(matches!(expected, Ok(()) | Err(Refusal::Overlap)), "{:?}", expected);
        } else {
            prop_assert_eq!(&expected, &Err(intended), "the oracle agrees on the flaw");
        }
        let mut game = Game::joined(match_rules(spec));
        // `try_exec` checks a refused command leaves the match identical.
        let answer = game
            .try_exec(CREATOR, &Command::PlaceFleet { placements: fleet.clone() })
            .map(|_| ());
        prop_assert_eq!(answer, expected, "fleet {:?}", fleet);
    }

}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn placement_hints_are_exactly_the_bows_where_the_next_ship_fits(
        spec in variant(),
        seed in any::<u64>(),
    ) {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut game = Game::joined(match_rules(spec));
        for _ in 0..40 {
            let slots = game.state.sides[0].fleet.placements();
            if game.state.sides[0].fleet.is_locked() {
                break;
            }
            let view = game.state.view(Viewer::Player(CREATOR));
            let participant = view.participant.expect("a player's view");
            let next = slots.iter().position(Option::is_none).expect("an unlocked fleet has a gap");
            prop_assert_eq!(participant.next_ship.map(|s| s.index), Some(next));
            let hints = participant.placement_hints.expect("hints while placing");
            prop_assert_eq!(Some(hints.clone()), game.state.sides[0].fleet.hints());
            for orientation in Orientation::BOTH {
                let hinted: BTreeSet<Cell> = match orientation {
                    Orientation::Horizontal => hints.horizontal.iter().copied().collect(),
                    Orientation::Vertical => hints.vertical.iter().copied().collect(),
                };
                let accepted: BTreeSet<Cell> = Cell::all()
                    .filter(|&cell| {
                        let command = Command::PlaceShip { index: next, placement: Placement { cell, orientation } };
                        game.state.decide(CREATOR, &command, game.now, draw(false)).is_ok()
                    })
                    .collect();
                let oracle: BTreeSet<Cell> = Cell::all()
                    .filter(|&cell| oracle_place_ship(spec, &slots, next, Placement { cell, orientation }).is_ok())
                    .collect();
                prop_assert_eq!(&hinted, &accepted, "{:?} hints vs PlaceShip", orientation);
                prop_assert_eq!(&hinted, &oracle, "{:?} hints vs the rules", orientation);
            }
            // Move on: a random attempt (answered as the oracle says), sometimes a pick-up.
            let placed: Vec<usize> = (0..slots.len()).filter(|&i| slots[i].is_some()).collect();
            if !placed.is_empty() && rng.random_ratio(1, 5) {
                let index = placed[rng.random_range(0..placed.len())];
                game.try_exec(CREATOR, &Command::RemoveShip { index })
                    .map_err(|r| TestCaseError::fail(format!("pick-up refused: {r}")))?;
            } else {
                let index = if rng.random_ratio(3, 4) { next } else { rng.random_range(0..slots.len() + 1) };
                let placement = random_placement(&mut rng);
                let expected = oracle_place_ship(spec, &slots, index, placement);
                let answer = game
                    .try_exec(CREATOR, &Command::PlaceShip { index, placement })
                    .map(|_| ());
                prop_assert_eq!(answer, expected, "ship {} at {:?}", index, placement);
            }
        }
    }
}

// ---------------------------------------------------------------- whole matches

#[derive(Clone, Copy, Debug, PartialEq)]
enum Ending {
    AllSunk,
    PlacementTimeout(usize),
    ResignInPlacement(usize),
    ResignInBattle(usize),
    ShotTimeout(usize),
}

fn cell_names(cells: impl IntoIterator<Item = Cell>) -> BTreeSet<String> {
    cells.into_iter().map(|c| c.to_string()).collect()
}

fn strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(text) => out.push(text.clone()),
        Value::Array(items) => items.iter().for_each(|item| strings(item, out)),
        Value::Object(map) => map.values().for_each(|item| strings(item, out)),
        _ => {}
    }
}

fn strings_of(value: &Value) -> Vec<String> {
    let mut out = Vec::new();
    strings(value, &mut out);
    out
}

/// The cells of `seat`'s ships the other player has not hit: what must stay hidden.
fn secret(state: &Match, seat: usize) -> BTreeSet<String> {
    let hit = state.sides[1 - seat].hits;
    cell_names(state.sides[seat].fleet.occupied().minus(hit).iter())
}

/// Cells of `seat`'s ships that are sunk, ship by ship, as sorted cell lists.
fn sunk_ships_of(state: &Match, seat: usize) -> BTreeSet<Vec<Cell>> {
    let hit = state.sides[1 - seat].hits;
    state.sides[seat]
        .fleet
        .slots()
        .iter()
        .flatten()
        .filter(|ship| ship.cells.is_subset_of(hit))
        .map(|ship| ship.cells.to_vec())
        .collect()
}

fn no_secret_in(value: &Value, secret: &BTreeSet<String>, what: &str) -> Result<(), TestCaseError> {
    for text in strings_of(value) {
        prop_assert!(
            !secret.contains(&text),
            "{} reveals the hidden cell {}",
            what,
            text
        );
    }
    Ok(())
}

/// Everything a viewer may see now reveals nothing hidden (called only before the end).
fn check_view(spec: Spec, state: &Match, viewer: Viewer) -> Result<(), TestCaseError> {
    let view: MatchView = state.view(viewer);
    let json = serde_json::to_value(&view).expect("a view serializes");
    let me = match viewer {
        Viewer::Player(player) => state.seat_of(player),
        Viewer::Spectator => None,
    };
    prop_assert!(view.record.is_none(), "no record before the end");
    prop_assert!(json.get("record").is_none_or(Value::is_null));
    // Per sea: what side s found out is about the sea of 1 - s.
    let sides = json["sides"].as_array().expect("sides");
    prop_assert_eq!(sides.len(), 2);
    for (s, side) in sides.iter().enumerate() {
        let hidden = secret(state, 1 - s);
        for field in ["shots", "sunk", "marked"] {
            no_secret_in(
                &side[field],
                &hidden,
                &format!("sides[{s}].{field} for {viewer:?}"),
            )?;
        }
        let told: BTreeSet<Vec<Cell>> = view.sides[s]
            .sunk
            .iter()
            .map(|ship| {
                let mut cells = ship.cells.clone();
                cells.sort();
                cells
            })
            .collect();
        prop_assert_eq!(&told, &sunk_ships_of(state, 1 - s), "sides[{}].sunk", s);
        for ship in &view.sides[s].sunk {
            prop_assert_eq!(ship.index, None, "which ship sank is not told");
            prop_assert_eq!(ship.name.is_some(), spec.reveals_type);
        }
        let water = state.sides[1 - s].fleet.occupied();
        prop_assert!(
            view.sides[s].marked.iter().all(|&c| !water.contains(c)),
            "marked cells are water"
        );
        // Published when the fleet locks, as the feed's fleet_locked event does.
        prop_assert_eq!(
            view.sides[s].commitment.is_some(),
            state.sides[s].fleet.is_locked()
        );
    }
    match me {
        None => {
            prop_assert!(view.participant.is_none());
            for key in ["fleet", "incoming", "placement_hints", "next_ship"] {
                prop_assert!(json.get(key).is_none(), "a spectator sees no {}", key);
            }
        }
        Some(seat) => {
            let participant = view.participant.as_ref().expect("a player's view");
            let own: Vec<Option<Placement>> = participant
                .fleet
                .iter()
                .map(|ship| ship.placement)
                .collect();
            prop_assert_eq!(
                own,
                state.sides[seat].fleet.placements(),
                "the fleet shown is the viewer's own"
            );
            prop_assert_eq!(&participant.sunk, &view.sides[seat].sunk);
            prop_assert_eq!(&participant.shots, &view.sides[seat].shots);
            prop_assert_eq!(&participant.incoming, &view.sides[1 - seat].shots);
            let opponent = secret(state, 1 - seat);
            for field in ["shots", "sunk", "marked"] {
                no_secret_in(&json[field], &opponent, &format!("{field} for {viewer:?}"))?;
            }
            // Shots received are about the viewer's own sea, and can only be hits or water.
            no_secret_in(&json["incoming"], &secret(state, seat), "incoming")?;
        }
    }
    Ok(())
}

/// Each newly decided event, as each viewer gets it before the end, reveals nothing hidden.
fn check_redactions(spec: Spec, state: &Match, events: &[Event]) -> Result<(), TestCaseError> {
    if state.phase.is_over() {
        for event in events {
            for viewer in [
                Viewer::Player(CREATOR),
                Viewer::Player(JOINER),
                Viewer::Spectator,
            ] {
                prop_assert_eq!(
                    &state.redact(event, viewer),
                    event,
                    "after the end all is public"
                );
            }
        }
        return Ok(());
    }
    for event in events {
        for viewer in [
            Viewer::Player(CREATOR),
            Viewer::Player(JOINER),
            Viewer::Spectator,
        ] {
            let told = state.redact(event, viewer);
            let json = serde_json::to_value(&told).expect("an event serializes");
            let is_viewer = |player: Uuid| viewer == Viewer::Player(player);
            match (&told, event) {
                (
                    Event::ShipPlaced {
                        player, placement, ..
                    },
                    _,
                ) if !is_viewer(*player) => {
                    prop_assert_eq!(*placement, None, "{:?} sees another's placement", viewer);
                    let seat = state.seat_of(*player).expect("a player");
                    no_secret_in(&json, &secret(state, seat), "ship_placed")?;
                }
                (Event::FleetLocked { player, salt, .. }, _) if !is_viewer(*player) => {
                    prop_assert_eq!(salt, &None, "{:?} sees another's salt", viewer);
                }
                (
                    Event::ShotFired {
                        player,
                        outcome,
                        sunk_ship,
                        ..
                    },
                    Event::ShotFired { sunk_ship: raw, .. },
                ) => {
                    let seat = state.seat_of(*player).expect("a player");
                    let owner = state.player(1 - seat).expect("an opponent");
                    prop_assert_eq!(
                        sunk_ship.is_some(),
                        *outcome == Outcome::Sunk,
                        "only a sink names a ship"
                    );
                    if let Some(ship) = sunk_ship {
                        if is_viewer(owner) {
                            prop_assert_eq!(sunk_ship, raw);
                        } else {
                            prop_assert_eq!(ship.index, None, "which ship sank is not told");
                            prop_assert_eq!(ship.name.is_some(), spec.reveals_type);
                        }
                    }
                    no_secret_in(&json, &secret(state, 1 - seat), "shot_fired")?;
                }
                _ => {}
            }
        }
    }
    Ok(())
}

fn check_all(spec: Spec, game: &Game, events: &[Event]) -> Result<(), TestCaseError> {
    // `Game` has already checked fold(log) == state.
    check_redactions(spec, &game.state, events)?;
    for (seat, side) in game.state.sides.iter().enumerate() {
        let shots: BTreeSet<Cell> = side.shots.iter().map(|s| s.cell).collect();
        prop_assert_eq!(shots.len(), side.shots.len(), "no cell is shot twice");
        prop_assert!(
            side.marked.iter().all(|c| !shots.contains(&c)),
            "no marked cell is shot"
        );
        prop_assert!(
            side.shots.len() + side.marked.len() as usize <= 100,
            "seat {}",
            seat
        );
    }
    if !game.state.phase.is_over() {
        for viewer in [
            Viewer::Player(CREATOR),
            Viewer::Player(JOINER),
            Viewer::Spectator,
        ] {
            check_view(spec, &game.state, viewer)?;
        }
    }
    Ok(())
}

fn random_draw(rng: &mut StdRng) -> Draw {
    Draw {
        coin: rng.random(),
        salt: rng.random(),
    }
}

fn seat_player(seat: usize) -> Uuid {
    [CREATOR, JOINER][seat]
}

/// One placement step by a random unlocked player.
fn placement_step(
    spec: Spec,
    game: &mut Game,
    rng: &mut StdRng,
) -> Result<Vec<Event>, TestCaseError> {
    let unlocked: Vec<usize> = (0..2)
        .filter(|&s| !game.state.sides[s].fleet.is_locked())
        .collect();
    let seat = unlocked[rng.random_range(0..unlocked.len())];
    let player = seat_player(seat);
    let slots = game.state.sides[seat].fleet.placements();
    let placed: Vec<usize> = (0..slots.len()).filter(|&i| slots[i].is_some()).collect();
    let roll = rng.random_range(0..100);
    let draw = random_draw(rng);
    let fail = |r: Refusal| TestCaseError::fail(format!("refused: {r}"));
    if roll < 8 {
        let fleet = random_legal_fleet(spec, rng);
        return game
            .try_exec_with(player, &Command::PlaceFleet { placements: fleet }, draw)
            .map_err(fail);
    }
    if roll < 18 && !placed.is_empty() {
        let index = placed[rng.random_range(0..placed.len())];
        return game
            .try_exec_with(player, &Command::RemoveShip { index }, draw)
            .map_err(fail);
    }
    if roll < 30 {
        let index = rng.random_range(0..slots.len() + 1);
        let placement = random_placement(rng);
        let expected = oracle_place_ship(spec, &slots, index, placement);
        let answer = game.try_exec_with(player, &Command::PlaceShip { index, placement }, draw);
        prop_assert_eq!(answer.as_ref().map(|_| ()).map_err(Clone::clone), expected);
        return Ok(answer.unwrap_or_default());
    }
    let hints = game
        .state
        .view(Viewer::Player(player))
        .participant
        .and_then(|p| p.placement_hints)
        .expect("hints while placing");
    let options: Vec<Placement> = hints
        .horizontal
        .iter()
        .map(|&cell| Placement {
            cell,
            orientation: Orientation::Horizontal,
        })
        .chain(hints.vertical.iter().map(|&cell| Placement {
            cell,
            orientation: Orientation::Vertical,
        }))
        .collect();
    if options.is_empty() {
        // A dead end: start this fleet over.
        let fleet = random_legal_fleet(spec, rng);
        return game
            .try_exec_with(player, &Command::PlaceFleet { placements: fleet }, draw)
            .map_err(fail);
    }
    let index = slots.iter().position(Option::is_none).expect("a gap");
    let placement = options[rng.random_range(0..options.len())];
    game.try_exec_with(player, &Command::PlaceShip { index, placement }, draw)
        .map_err(fail)
}

/// Some refused commands during the battle, each checked to leave the match identical.
fn battle_refusals(game: &mut Game, rng: &mut StdRng) -> Result<(), TestCaseError> {
    let seat = game.state.turn.expect("a turn");
    let waiting = seat_player(1 - seat);
    let target = Cell::new(rng.random_range(0..10), rng.random_range(0..10)).expect("on board");
    prop_assert_eq!(
        game.try_exec(waiting, &Command::Fire { cell: target }),
        Err(Refusal::NotYourTurn)
    );
    prop_assert_eq!(
        game.try_exec(STRANGER, &Command::Fire { cell: target }),
        Err(Refusal::NotAPlayer)
    );
    let side = &game.state.sides[seat];
    if let Some(shot) = side.shots.first().copied() {
        let answer = game.try_exec(seat_player(seat), &Command::Fire { cell: shot.cell });
        prop_assert_eq!(answer, Err(Refusal::AlreadyShot));
    }
    if let Some(known) = game.state.sides[seat].marked.iter().next() {
        let answer = game.try_exec(seat_player(seat), &Command::Fire { cell: known });
        prop_assert_eq!(answer, Err(Refusal::AlreadyKnown));
    }
    Ok(())
}

fn play_random_match(spec: Spec, seed: u64) -> Result<(), TestCaseError> {
    let mut rng = StdRng::seed_from_u64(seed);
    let ending = match rng.random_range(0..10) {
        0 => Ending::PlacementTimeout(rng.random_range(0..25)),
        1 => Ending::ResignInPlacement(rng.random_range(0..25)),
        2 => Ending::ResignInBattle(rng.random_range(0..120)),
        3 => Ending::ShotTimeout(rng.random_range(0..120)),
        _ => Ending::AllSunk,
    };
    let invite = rng.random::<bool>().then_some(JOINER);
    let mut game = Game::create(match_rules(spec), invite);
    check_all(spec, &game, &game.log.clone())?;
    game.now = at(rng.random_range(0..600));
    let events = game
        .try_exec(JOINER, &Command::Join)
        .map_err(|r| TestCaseError::fail(r.to_string()))?;
    prop_assert_eq!(game.state.deadline, Some(game.now + Duration::seconds(120)));
    check_all(spec, &game, &events)?;

    let mut steps = 0;
    while game.state.phase == Phase::Placement {
        match ending {
            Ending::PlacementTimeout(at_step) if steps == at_step => {
                let deadline = game.state.deadline.expect("a placement deadline");
                game.now = deadline - Duration::milliseconds(1);
                prop_assert_eq!(game.expire(), Err(Refusal::NotDue));
                game.now = deadline;
                let events = game
                    .expire()
                    .map_err(|r| TestCaseError::fail(r.to_string()))?;
                let locked: Vec<Uuid> = (0..2)
                    .filter(|&s| game.state.sides[s].fleet.is_locked())
                    .map(seat_player)
                    .collect();
                let expected = match locked.as_slice() {
                    [winner] => (Some(*winner), FinishReason::PlacementTimeout),
                    _ => (None, FinishReason::BothPlacementTimeout),
                };
                let result = game.state.result.expect("a result");
                prop_assert_eq!((result.winner, result.reason), expected);
                check_all(spec, &game, &events)?;
                break;
            }
            Ending::ResignInPlacement(at_step) if steps == at_step => {
                let seat = rng.random_range(0..2);
                let events = game
                    .try_exec(seat_player(seat), &Command::Resign)
                    .map_err(|r| TestCaseError::fail(r.to_string()))?;
                prop_assert_eq!(
                    game.state.result.and_then(|r| r.winner),
                    Some(seat_player(1 - seat))
                );
                check_all(spec, &game, &events)?;
                break;
            }
            _ => {}
        }
        prop_assert!(steps < 400, "placement goes on forever");
        let events = placement_step(spec, &mut game, &mut rng)?;
        check_all(spec, &game, &events)?;
        steps += 1;
        game.now += Duration::milliseconds(200);
    }

    let mut fired = 0usize;
    while game.state.phase == Phase::Battle {
        let seat = game.state.turn.expect("someone is on turn");
        let shooter = seat_player(seat);
        match ending {
            Ending::ResignInBattle(at_shot) if fired == at_shot => {
                let resigner = rng.random_range(0..2);
                let events = game
                    .try_exec(seat_player(resigner), &Command::Resign)
                    .map_err(|r| TestCaseError::fail(r.to_string()))?;
                prop_assert_eq!(
                    game.state.result.and_then(|r| r.winner),
                    Some(seat_player(1 - resigner))
                );
                check_all(spec, &game, &events)?;
                break;
            }
            Ending::ShotTimeout(at_shot) if fired == at_shot => {
                let deadline = game.state.deadline.expect("a shot deadline");
                if rng.random() {
                    let events = game
                        .state
                        .extend_clock(Duration::seconds(3))
                        .map_err(|r| TestCaseError::fail(r.to_string()))?;
                    game.apply(&events);
                    check_all(spec, &game, &events)?;
                    game.now = deadline;
                    prop_assert_eq!(
                        game.expire(),
                        Err(Refusal::NotDue),
                        "the clock was extended"
                    );
                }
                game.now = game.state.deadline.expect("a shot deadline");
                let events = game
                    .expire()
                    .map_err(|r| TestCaseError::fail(r.to_string()))?;
                prop_assert_eq!(
                    game.state.result.map(|r| (r.winner, r.reason)),
                    Some((Some(seat_player(1 - seat)), FinishReason::ShotTimeout))
                );
                check_all(spec, &game, &events)?;
                break;
            }
            _ => {}
        }
        if rng.random_ratio(1, 10) {
            battle_refusals(&mut game, &mut rng)?;
        }
        if rng.random_ratio(1, 10) {
            prop_assert_eq!(
                game.expire(),
                Err(Refusal::NotDue),
                "a shot clock runs {} s",
                30
            );
        }
        // The shooter picks a cell their view does not know yet.
        let view = game.state.view(Viewer::Player(shooter));
        let participant = view.participant.expect("a player's view");
        let known: BTreeSet<Cell> = participant
            .shots
            .iter()
            .map(|s| s.cell)
            .chain(participant.marked.iter().copied())
            .collect();
        let unknown: Vec<Cell> = Cell::all().filter(|c| !known.contains(c)).collect();
        prop_assert!(!unknown.is_empty(), "the shooter has run out of cells");
        let target = unknown[rng.random_range(0..unknown.len())];
        let before = game.state.clone();
        let events = game
            .try_exec(shooter, &Command::Fire { cell: target })
            .map_err(|r| TestCaseError::fail(format!("shot at {target} refused: {r}")))?;
        fired += 1;
        // The outcome is the truth about the opponent's sea, and the turn follows the preset.
        let opponent = &before.sides[1 - seat].fleet;
        let expected = match opponent.ship_at(target) {
            None => Outcome::Miss,
            Some(index) => {
                let hits = before.sides[seat]
                    .hits
                    .union(statki::engine::CellSet::single(target));
                if opponent.ship_cells(index).is_subset_of(hits) {
                    Outcome::Sunk
                } else {
                    Outcome::Hit
                }
            }
        };
        let Some(Event::ShotFired {
            outcome,
            next_turn,
            marked,
            deadline,
            ..
        }) = events.first()
        else {
            return Err(TestCaseError::fail("a shot records a shot_fired"));
        };
        prop_assert_eq!(*outcome, expected);
        // Only a sink in a ring-marking preset marks, and exactly the unknown ring around it.
        let ring: BTreeSet<Cell> = match opponent.ship_at(target) {
            Some(index) if spec.marks_ring && expected == Outcome::Sunk => {
                let ship = opponent.ship_cells(index).to_vec();
                Cell::all()
                    .filter(|c| !ship.contains(c) && !before.sides[seat].known.contains(*c))
                    .filter(|c| {
                        ship.iter().any(|s| {
                            s.col().abs_diff(c.col()) <= 1 && s.row().abs_diff(c.row()) <= 1
                        })
                    })
                    .collect()
            }
            _ => BTreeSet::new(),
        };
        prop_assert_eq!(marked.iter().copied().collect::<BTreeSet<_>>(), ring);
        if game.state.phase == Phase::Battle {
            let again = *outcome != Outcome::Miss && spec.extra_shot;
            let next = if again {
                shooter
            } else {
                seat_player(1 - seat)
            };
            prop_assert_eq!(*next_turn, Some(next));
            prop_assert_eq!(*deadline, Some(game.now + Duration::seconds(30)));
        } else {
            prop_assert_eq!(*next_turn, None);
            prop_assert_eq!(
                game.state.result.map(|r| (r.winner, r.reason)),
                Some((Some(shooter), FinishReason::AllSunk))
            );
            let cells = spec.lengths.iter().map(|&l| usize::from(l)).sum::<usize>();
            prop_assert_eq!(game.state.sides[seat].hits.len() as usize, cells);
        }
        check_all(spec, &game, &events)?;
        prop_assert!(fired <= 200, "more than 2 × 100 shots");
        game.now += Duration::seconds(1);
    }

    // The end: exactly one match_finished, last; everything public and verifiable.
    prop_assert_eq!(game.state.phase, Phase::Finished);
    let finishes = game
        .log
        .iter()
        .filter(|e| matches!(e, Event::MatchFinished { .. }))
        .count();
    prop_assert_eq!(finishes, 1);
    let last_is_finish = matches!(game.log.last(), Some(Event::MatchFinished { .. }));
    prop_assert!(last_is_finish, "match_finished is the last event");
    prop_assert!(game.state.commitments_verify());
    let record = game
        .state
        .view(Viewer::Spectator)
        .record
        .expect("a record after the end");
    // Exactly the locked fleets are opened, each whole and verified.
    let locked: Vec<_> = game
        .state
        .sides
        .iter()
        .filter(|side| side.commitment.is_some())
        .collect();
    prop_assert_eq!(record.len(), locked.len());
    for (opened, side) in record.iter().zip(locked) {
        prop_assert!(opened.commitment_verified);
        prop_assert_eq!(Some(opened.player), side.player);
        let placements: Vec<_> = opened.ships.iter().copied().map(Some).collect();
        prop_assert_eq!(placements, side.fleet.placements());
    }
    if game.state.sides.iter().all(|s| s.fleet.is_locked()) {
        prop_assert!(record.iter().all(|opened| opened.commitment_verified));
    }
    for event in &game.log {
        prop_assert_eq!(&game.state.redact(event, Viewer::Spectator), event);
    }
    for actor in [CREATOR, JOINER] {
        for command in [Command::Resign, Command::Fire { cell: cell("A1") }] {
            let answer = game.try_exec(actor, &command);
            prop_assert!(
                matches!(answer, Err(Refusal::WrongPhase { .. })),
                "{:?}",
                answer
            );
        }
    }
    prop_assert_eq!(
        game.state.expire(game.now + Duration::days(1)),
        Err(Refusal::NotDue)
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    #[test]
    fn random_statki_matches_end_consistently_and_never_leak(seed in any::<u64>()) {
        play_random_match(STATKI, seed)?;
    }

    #[test]
    fn random_classic_matches_end_consistently_and_never_leak(seed in any::<u64>()) {
        play_random_match(CLASSIC, seed)?;
    }

    #[test]
    fn random_battaglia_matches_end_consistently_and_never_leak(seed in any::<u64>()) {
        play_random_match(BATTAGLIA, seed)?;
    }

    #[test]
    fn random_battaglia_extra_shot_matches_end_consistently_and_never_leak(seed in any::<u64>()) {
        play_random_match(BATTAGLIA_EXTRA, seed)?;
    }
}
