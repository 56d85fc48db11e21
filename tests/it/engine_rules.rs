//! The rules of RULES.md, one test per rule and preset, through the public engine API.

use crate::engine_support;

use chrono::Duration;
use engine_support::*;
use statki::engine::commit;
use statki::engine::{
    CancelReason, Cell, Command, Event, FinishReason, Match, Outcome, Phase, Placement, Refusal,
    RuleSetId, Viewer,
};

const PRESETS: [RuleSetId; 3] = RuleSetId::ALL;

fn place_fleet(placements: Vec<Placement>) -> Command {
    Command::PlaceFleet { placements }
}

fn fire(at_cell: &str) -> Command {
    Command::Fire {
        cell: cell(at_cell),
    }
}

fn is_wrong_phase(refusal: &Refusal, actual: &str, expected: &str) -> bool {
    matches!(refusal, Refusal::WrongPhase { actual: a, expected: e } if *a == actual && *e == expected)
}

fn shot(events: &[Event]) -> (Outcome, Option<uuid::Uuid>) {
    match events.first() {
        Some(Event::ShotFired {
            outcome, next_turn, ..
        }) => (*outcome, *next_turn),
        other => panic!("expected a shot, got {other:?}"),
    }
}

fn finished(game: &Game) -> (Option<uuid::Uuid>, FinishReason) {
    assert_eq!(game.state.phase, Phase::Finished);
    let result = game.state.result.expect("a finished match has a result");
    (result.winner, result.reason)
}

// ---------------------------------------------------------------- presets

#[test]
fn statki_fleet_is_carrier_battleship_cruiser_submarine_destroyer() {
    let fleet = RuleSetId::Statki.rules().fleet;
    let ships: Vec<(&str, u8)> = fleet.iter().map(|s| (s.name, s.length)).collect();
    assert_eq!(
        ships,
        [
            ("Carrier", 5),
            ("Battleship", 4),
            ("Cruiser", 3),
            ("Submarine", 3),
            ("Destroyer", 2)
        ]
    );
}

#[test]
fn classic_fleet_is_one_four_two_threes_three_twos_and_four_ones() {
    let lengths: Vec<u8> = RuleSetId::Classic
        .rules()
        .fleet
        .iter()
        .map(|s| s.length)
        .collect();
    assert_eq!(lengths, [4, 3, 3, 2, 2, 2, 1, 1, 1, 1]);
}

#[test]
fn battaglia_fleet_ends_with_the_one_cell_motovedetta() {
    let ships: Vec<(&str, u8)> = RuleSetId::Battaglia
        .rules()
        .fleet
        .iter()
        .map(|s| (s.name, s.length))
        .collect();
    assert_eq!(
        ships,
        [
            ("Portaerei", 5),
            ("Corazzata", 4),
            ("Incrociatore", 3),
            ("Sottomarino", 3),
            ("Cacciatorpediniere", 2),
            ("Motovedetta", 1)
        ]
    );
}

/// Sinks every ship of the joiner's fleet with the creator's shots; the joiner misses on
/// row 2 and 4 of the creator's sea in between when the turn passes. Returns how many hits
/// the creator needed.
fn sink_the_joiner_fleet(game: &mut Game) -> usize {
    let id = game.state.rules.ruleset;
    let targets: Vec<Cell> = ship_cells(id, &joiner_fleet(id))
        .into_iter()
        .flatten()
        .collect();
    let mut misses = ["2", "4"]
        .iter()
        .flat_map(|row| "ABCDEFGHIJ".chars().map(move |c| format!("{c}{row}")));
    for (n, target) in targets.iter().enumerate() {
        assert_eq!(game.state.phase, Phase::Battle, "ended early at hit {n}");
        let events = game.fire(CREATOR, &target.to_string());
        if game.state.turn == Some(1) {
            let miss = misses.next().expect("enough empty cells");
            let (outcome, _) = shot(&game.fire(JOINER, &miss));
            assert_eq!(outcome, Outcome::Miss);
        }
        if n + 1 < targets.len() {
            assert_eq!(events.len(), 1, "only a shot before the last hit");
        }
    }
    targets.len()
}

#[test]
fn battaglia_needs_all_18_cells() {
    let mut game = Game::in_battle(rules(RuleSetId::Battaglia), false);
    let hits = sink_the_joiner_fleet(&mut game);
    assert_eq!(hits, 18);
    assert_eq!(finished(&game), (Some(CREATOR), FinishReason::AllSunk));
}

#[test]
fn statki_needs_all_17_cells_and_classic_all_20() {
    for (id, cells) in [(RuleSetId::Statki, 17), (RuleSetId::Classic, 20)] {
        let mut game = Game::in_battle(rules(id), false);
        assert_eq!(sink_the_joiner_fleet(&mut game), cells, "{id:?}");
        assert_eq!(finished(&game), (Some(CREATOR), FinishReason::AllSunk));
    }
}

#[test]
fn the_last_hit_ends_the_match_with_one_match_finished_and_no_deadline() {
    let mut game = Game::in_battle(rules(RuleSetId::Statki), false);
    sink_the_joiner_fleet(&mut game);
    let finished_events = game
        .log
        .iter()
        .filter(|e| matches!(e, Event::MatchFinished { .. }))
        .count();
    assert_eq!(finished_events, 1);
    assert!(matches!(
        &game.log[game.log.len() - 2],
        Event::ShotFired {
            outcome: Outcome::Sunk,
            next_turn: None,
            deadline: None,
            ..
        }
    ));
    assert_eq!(game.state.deadline, None);
    assert_eq!(game.state.turn, None);
    let refusal = game.refuse(JOINER, &fire("J10"));
    assert!(
        is_wrong_phase(&refusal, "finished", "battle"),
        "{refusal:?}"
    );
}

// ---------------------------------------------------------------- touching

#[test]
fn statki_allows_ships_touching_side_to_side() {
    let mut game = Game::joined(rules(RuleSetId::Statki));
    game.place(CREATOR, 0, h("A1"));
    game.place(CREATOR, 1, h("A2"));
    assert!(game.state.sides[0].fleet.slots()[1].is_some());
}

#[test]
fn statki_allows_ships_touching_end_to_end_and_at_a_corner() {
    let mut game = Game::joined(rules(RuleSetId::Statki));
    game.place(CREATOR, 0, h("A1")); // A1–E1
    game.place(CREATOR, 1, h("F1")); // F1–I1, end to end
    game.place(CREATOR, 2, v("J2")); // J2–J4, corner to I1
    assert_eq!(game.state.sides[0].fleet.occupied().len(), 12);
}

#[test]
fn classic_refuses_ships_touching_at_a_corner() {
    let mut game = Game::joined(rules(RuleSetId::Classic));
    game.place(CREATOR, 0, h("A1")); // A1–D1
    let refusal = game.refuse(
        CREATOR,
        &Command::PlaceShip {
            index: 1,
            placement: h("E2"),
        },
    );
    assert_eq!(refusal, Refusal::ShipsTouching);
    assert_eq!(refusal.code(), "ships_touching");
    // One more column of water is enough.
    game.place(CREATOR, 1, h("F2"));
}

#[test]
fn classic_refuses_ships_touching_side_to_side_and_end_to_end() {
    let mut game = Game::joined(rules(RuleSetId::Classic));
    game.place(CREATOR, 0, h("A1"));
    for placement in [h("A2"), h("E1"), v("E1")] {
        let refusal = game.refuse(
            CREATOR,
            &Command::PlaceShip {
                index: 1,
                placement,
            },
        );
        assert_eq!(refusal, Refusal::ShipsTouching, "{placement:?}");
    }
}

#[test]
fn battaglia_refuses_ships_touching_at_a_corner() {
    let mut game = Game::joined(rules(RuleSetId::Battaglia));
    game.place(CREATOR, 0, h("A1")); // A1–E1
    let refusal = game.refuse(
        CREATOR,
        &Command::PlaceShip {
            index: 5,
            placement: h("F2"),
        },
    );
    assert_eq!(refusal, Refusal::ShipsTouching);
    game.place(CREATOR, 5, h("G2"));
}

#[test]
fn a_whole_fleet_with_touching_ships_is_refused_in_classic_and_accepted_in_statki() {
    let touching = vec![h("A1"), h("A2"), h("A3"), h("A4"), h("A5")];
    let mut statki = Game::joined(rules(RuleSetId::Statki));
    statki.exec(CREATOR, &place_fleet(touching));
    assert!(statki.state.sides[0].fleet.is_locked());

    let mut classic = Game::joined(rules(RuleSetId::Classic));
    let mut fleet = creator_fleet(RuleSetId::Classic);
    fleet[9] = h("I5"); // beside the torpedo boat on H5
    assert_eq!(
        classic.refuse(CREATOR, &place_fleet(fleet)),
        Refusal::ShipsTouching
    );
}

// ---------------------------------------------------------------- turns

#[test]
fn statki_passes_the_turn_after_a_hit() {
    let mut game = Game::in_battle(rules(RuleSetId::Statki), false);
    assert_eq!(
        shot(&game.fire(CREATOR, "A1")),
        (Outcome::Hit, Some(JOINER))
    );
    assert_eq!(game.state.turn, Some(1));
    assert_eq!(game.refuse(CREATOR, &fire("A2")), Refusal::NotYourTurn);
}

#[test]
fn statki_passes_the_turn_after_a_sink() {
    let mut game = Game::in_battle(rules(RuleSetId::Statki), false);
    game.fire(CREATOR, "I1");
    game.fire(JOINER, "B2");
    assert_eq!(
        shot(&game.fire(CREATOR, "I2")),
        (Outcome::Sunk, Some(JOINER))
    );
}

#[test]
fn classic_keeps_the_turn_after_a_hit_and_passes_it_on_a_miss() {
    let mut game = Game::in_battle(rules(RuleSetId::Classic), false);
    assert_eq!(
        shot(&game.fire(CREATOR, "A1")),
        (Outcome::Hit, Some(CREATOR))
    );
    assert_eq!(game.state.turn, Some(0));
    assert_eq!(
        shot(&game.fire(CREATOR, "B1")),
        (Outcome::Miss, Some(JOINER))
    );
    assert_eq!(game.state.turn, Some(1));
}

#[test]
fn classic_keeps_the_turn_after_a_sink() {
    let mut game = Game::in_battle(rules(RuleSetId::Classic), false);
    assert_eq!(
        shot(&game.fire(CREATOR, "C6")),
        (Outcome::Sunk, Some(CREATOR))
    );
}

#[test]
fn battaglia_passes_the_turn_after_a_hit() {
    let mut game = Game::in_battle(rules(RuleSetId::Battaglia), true);
    assert_eq!(
        shot(&game.fire(JOINER, "A1")),
        (Outcome::Hit, Some(CREATOR))
    );
}

#[test]
fn battaglia_extra_shot_option_keeps_the_turn_after_a_hit() {
    let mut game = Game::in_battle(rules_with_extra_shot(RuleSetId::Battaglia), true);
    assert_eq!(shot(&game.fire(JOINER, "A1")), (Outcome::Hit, Some(JOINER)));
    assert_eq!(
        shot(&game.fire(JOINER, "J10")),
        (Outcome::Sunk, Some(JOINER))
    );
    assert_eq!(
        shot(&game.fire(JOINER, "J9")),
        (Outcome::Miss, Some(CREATOR))
    );
}

#[test]
fn the_extra_shot_is_a_house_rule_of_every_preset() {
    for id in PRESETS {
        assert!(rules_with_extra_shot(id).extra_shot_on_hit(), "{id:?}");
        assert!(rules_with_extra_shot(id).has_house_options(), "{id:?}");
    }
    assert!(!rules(RuleSetId::Statki).extra_shot_on_hit());
    assert!(!rules(RuleSetId::Battaglia).extra_shot_on_hit());
    assert!(rules(RuleSetId::Classic).extra_shot_on_hit());
    // Statki with the house rule: a hit keeps the turn, a miss passes it.
    let mut game = Game::in_battle(rules_with_extra_shot(RuleSetId::Statki), false);
    assert_eq!(
        shot(&game.fire(CREATOR, "A1")),
        (Outcome::Hit, Some(CREATOR))
    );
    assert_eq!(
        shot(&game.fire(CREATOR, "J10")),
        (Outcome::Miss, Some(JOINER))
    );
}

#[test]
fn a_miss_passes_the_turn_in_every_preset() {
    for id in PRESETS {
        let mut game = Game::in_battle(rules(id), false);
        assert_eq!(
            shot(&game.fire(CREATOR, "B10")),
            (Outcome::Miss, Some(JOINER))
        );
    }
}

// ---------------------------------------------------------------- what a sink tells

fn sunk_ship_of(events: &[Event]) -> statki::engine::SunkShip {
    match events.first() {
        Some(Event::ShotFired {
            outcome: Outcome::Sunk,
            sunk_ship: Some(ship),
            ..
        }) => ship.clone(),
        other => panic!("expected a sink, got {other:?}"),
    }
}

#[test]
fn classic_marks_the_ring_around_a_sunk_ship() {
    let mut game = Game::in_battle(rules(RuleSetId::Classic), false);
    // The joiner's torpedo boat on C6; the creator already missed D7 (part of the ring).
    game.fire(CREATOR, "D7");
    game.fire(JOINER, "J10");
    let events = game.fire(CREATOR, "C6");
    let Some(Event::ShotFired { marked, .. }) = events.first() else {
        panic!("expected a shot");
    };
    let expected: Vec<Cell> = ["B5", "C5", "D5", "B6", "D6", "B7", "C7"]
        .iter()
        .map(|c| cell(c))
        .collect();
    assert_eq!(marked, &expected, "the ring minus the cell already shot");
    let seen = game.state.view(Viewer::Player(CREATOR));
    let participant = seen.participant.expect("a player's view");
    assert_eq!(participant.marked, expected);
    assert_eq!(seen.sides[0].marked, expected);
    assert_eq!(game.refuse(CREATOR, &fire("B5")), Refusal::AlreadyKnown);
    assert_eq!(game.refuse(CREATOR, &fire("D7")), Refusal::AlreadyShot);
}

#[test]
fn classic_marks_the_ring_around_a_long_ship_clipped_to_the_board() {
    let mut game = Game::in_battle(rules(RuleSetId::Classic), false);
    for c in ["A1", "A2", "A3"] {
        game.fire(CREATOR, c);
    }
    let events = game.fire(CREATOR, "A4");
    let Some(Event::ShotFired { marked, .. }) = events.first() else {
        panic!("expected a shot");
    };
    let expected: Vec<Cell> = ["B1", "B2", "B3", "B4", "A5", "B5"]
        .iter()
        .map(|c| cell(c))
        .collect();
    assert_eq!(marked, &expected);
}

#[test]
fn statki_and_battaglia_mark_nothing_around_a_sunk_ship() {
    for id in [RuleSetId::Statki, RuleSetId::Battaglia] {
        let mut game = Game::in_battle(rules(id), false);
        let mut events = Vec::new();
        for c in ["I1", "I2"] {
            events = game.fire(CREATOR, c);
            if game.state.turn == Some(1) && c == "I1" {
                game.fire(JOINER, "J10");
            }
        }
        let Some(Event::ShotFired {
            outcome, marked, ..
        }) = events.first()
        else {
            panic!("expected a shot");
        };
        assert_eq!(*outcome, Outcome::Sunk, "{id:?}");
        assert!(marked.is_empty(), "{id:?}: {marked:?}");
        game.fire(JOINER, "J9");
        game.fire(CREATOR, "H1"); // beside the sunk ship: still a legal shot
    }
}

#[test]
fn battaglia_reveals_the_ship_type_on_sink() {
    let mut game = Game::in_battle(rules_with_extra_shot(RuleSetId::Battaglia), false);
    let mut last = Vec::new();
    for c in ["A1", "A2", "A3", "A4", "A5"] {
        last = game.fire(CREATOR, c);
    }
    let raw = sunk_ship_of(&last);
    assert_eq!(raw.name.as_deref(), Some("Portaerei"));
    for viewer in [Viewer::Player(CREATOR), Viewer::Spectator] {
        let told = sunk_ship_of(&[game.state.redact(&last[0], viewer)]);
        assert_eq!(told.name.as_deref(), Some("Portaerei"), "{viewer:?}");
        assert_eq!(told.index, None, "{viewer:?} must not learn the index");
        let view = game.state.view(viewer);
        assert_eq!(view.sides[0].sunk[0].name.as_deref(), Some("Portaerei"));
    }
    let participant = game
        .state
        .view(Viewer::Player(CREATOR))
        .participant
        .expect("a player's view");
    assert_eq!(participant.sunk[0].name.as_deref(), Some("Portaerei"));
    assert_eq!(
        participant.sunk[0].cells,
        ["A1", "A2", "A3", "A4", "A5"].map(cell).to_vec()
    );
}

#[test]
fn statki_and_classic_do_not_reveal_the_ship_type_on_sink() {
    for id in [RuleSetId::Statki, RuleSetId::Classic] {
        let mut game = Game::in_battle(rules(id), false);
        game.fire(CREATOR, "I1");
        if game.state.turn == Some(1) {
            game.fire(JOINER, "J10");
        }
        let events = game.fire(CREATOR, "I2");
        let raw = sunk_ship_of(&events);
        assert!(raw.name.is_some(), "the log keeps the whole truth");
        for viewer in [Viewer::Player(CREATOR), Viewer::Spectator] {
            let told = sunk_ship_of(&[game.state.redact(&events[0], viewer)]);
            assert_eq!(told.name, None, "{id:?} {viewer:?}");
            assert_eq!(told.index, None, "{id:?} {viewer:?}");
            assert_eq!(told.cells, vec![cell("I1"), cell("I2")]);
            let view = game.state.view(viewer);
            assert_eq!(view.sides[0].sunk[0].name, None);
            assert_eq!(view.sides[0].sunk[0].index, None);
        }
    }
}

#[test]
fn the_owner_of_a_sunk_ship_is_told_which_ship_it_was() {
    let mut game = Game::in_battle(rules(RuleSetId::Statki), false);
    game.fire(CREATOR, "I1");
    game.fire(JOINER, "J10");
    let events = game.fire(CREATOR, "I2");
    let told = sunk_ship_of(&[game.state.redact(&events[0], Viewer::Player(JOINER))]);
    assert_eq!(told.index, Some(4));
    let participant = game
        .state
        .view(Viewer::Player(JOINER))
        .participant
        .expect("a player's view");
    assert!(participant.fleet[4].sunk);
    assert_eq!(participant.fleet[4].hits, vec![cell("I1"), cell("I2")]);
    assert!(!participant.fleet[0].sunk);
}

#[test]
fn a_hit_does_not_say_which_ship_was_hit() {
    let mut game = Game::in_battle(rules(RuleSetId::Statki), false);
    let events = game.fire(CREATOR, "C1");
    for viewer in [
        Viewer::Player(CREATOR),
        Viewer::Player(JOINER),
        Viewer::Spectator,
    ] {
        let told = game.state.redact(&events[0], viewer);
        let Event::ShotFired {
            outcome, sunk_ship, ..
        } = told
        else {
            panic!("expected a shot");
        };
        assert_eq!(outcome, Outcome::Hit);
        assert_eq!(sunk_ship, None);
    }
}

// ---------------------------------------------------------------- refusals

#[test]
fn refuses_a_ship_off_the_board() {
    let mut game = Game::joined(rules(RuleSetId::Statki));
    for placement in [h("G1"), v("A7"), h("J10")] {
        let refusal = game.refuse(
            CREATOR,
            &Command::PlaceShip {
                index: 0,
                placement,
            },
        );
        assert_eq!(refusal, Refusal::OffBoard, "{placement:?}");
    }
    let mut fleet = creator_fleet(RuleSetId::Statki);
    fleet[4] = h("J9");
    assert_eq!(game.refuse(CREATOR, &place_fleet(fleet)), Refusal::OffBoard);
}

#[test]
fn refuses_a_cell_name_that_is_not_a_cell_or_off_the_board() {
    assert!(matches!(
        "Q".parse::<Cell>(),
        Err(Refusal::InvalidCell(text)) if text == "Q"
    ));
    assert_eq!("K1".parse::<Cell>(), Err(Refusal::OffBoard));
    assert_eq!("A11".parse::<Cell>(), Err(Refusal::OffBoard));
}

#[test]
fn refuses_overlapping_ships_in_every_preset() {
    for id in PRESETS {
        let mut game = Game::joined(rules(id));
        game.place(CREATOR, 0, h("C3"));
        let refusal = game.refuse(
            CREATOR,
            &Command::PlaceShip {
                index: 1,
                placement: v("D1"),
            },
        );
        assert_eq!(refusal, Refusal::Overlap, "{id:?}");
        let mut fleet = creator_fleet(id);
        fleet[1] = h("B1");
        assert_eq!(game.refuse(CREATOR, &place_fleet(fleet)), Refusal::Overlap);
    }
}

#[test]
fn refuses_an_unknown_ship() {
    let mut game = Game::joined(rules(RuleSetId::Statki));
    let refusal = game.refuse(
        CREATOR,
        &Command::PlaceShip {
            index: 5,
            placement: h("A1"),
        },
    );
    assert_eq!(
        refusal,
        Refusal::UnknownShip {
            index: 5,
            fleet_size: 5
        }
    );
    assert_eq!(
        game.refuse(CREATOR, &Command::RemoveShip { index: 9 }),
        Refusal::UnknownShip {
            index: 9,
            fleet_size: 5
        }
    );
}

#[test]
fn refuses_to_pick_up_a_ship_that_is_not_placed() {
    let mut game = Game::joined(rules(RuleSetId::Classic));
    game.place(JOINER, 0, h("A1"));
    assert_eq!(
        game.refuse(JOINER, &Command::RemoveShip { index: 1 }),
        Refusal::ShipNotPlaced(1)
    );
}

#[test]
fn refuses_a_whole_fleet_of_the_wrong_size() {
    for id in PRESETS {
        let mut game = Game::joined(rules(id));
        let mut fleet = creator_fleet(id);
        let expected = fleet.len();
        fleet.pop();
        assert_eq!(
            game.refuse(CREATOR, &place_fleet(fleet.clone())),
            Refusal::WrongFleetSize {
                expected,
                got: expected - 1
            }
        );
        fleet.push(h("J10"));
        fleet.push(h("J8"));
        assert_eq!(
            game.refuse(CREATOR, &place_fleet(fleet)),
            Refusal::WrongFleetSize {
                expected,
                got: expected + 1
            }
        );
        assert_eq!(
            game.refuse(CREATOR, &place_fleet(Vec::new())),
            Refusal::WrongFleetSize { expected, got: 0 }
        );
    }
}

#[test]
fn refuses_to_move_a_locked_fleet() {
    let mut game = Game::joined(rules(RuleSetId::Statki));
    game.exec(CREATOR, &place_fleet(creator_fleet(RuleSetId::Statki)));
    for command in [
        Command::PlaceShip {
            index: 0,
            placement: h("A2"),
        },
        Command::RemoveShip { index: 0 },
        place_fleet(joiner_fleet(RuleSetId::Statki)),
    ] {
        assert_eq!(
            game.refuse(CREATOR, &command),
            Refusal::FleetLocked,
            "{command:?}"
        );
    }
}

#[test]
fn refuses_commands_in_the_wrong_phase() {
    let mut waiting = Game::create(rules(RuleSetId::Statki), None);
    let refusal = waiting.refuse(
        CREATOR,
        &Command::PlaceShip {
            index: 0,
            placement: h("A1"),
        },
    );
    assert!(
        is_wrong_phase(&refusal, "waiting", "placement"),
        "{refusal:?}"
    );
    assert_eq!(refusal.code(), "wrong_phase");
    let refusal = waiting.refuse(CREATOR, &fire("A1"));
    assert!(is_wrong_phase(&refusal, "waiting", "battle"), "{refusal:?}");

    let mut placing = Game::joined(rules(RuleSetId::Statki));
    let refusal = placing.refuse(CREATOR, &fire("A1"));
    assert!(
        is_wrong_phase(&refusal, "placement", "battle"),
        "{refusal:?}"
    );
    let refusal = placing.refuse(STRANGER, &Command::Join);
    assert!(
        is_wrong_phase(&refusal, "placement", "waiting"),
        "{refusal:?}"
    );

    let mut battle = Game::in_battle(rules(RuleSetId::Statki), false);
    let refusal = battle.refuse(
        CREATOR,
        &Command::PlaceShip {
            index: 0,
            placement: h("A2"),
        },
    );
    assert!(
        is_wrong_phase(&refusal, "battle", "placement"),
        "{refusal:?}"
    );

    battle.exec(JOINER, &Command::Resign);
    let refusal = battle.refuse(CREATOR, &Command::Resign);
    assert!(
        is_wrong_phase(&refusal, "finished", "under way"),
        "{refusal:?}"
    );
}

#[test]
fn refuses_commands_from_someone_who_is_not_a_player() {
    let mut game = Game::in_battle(rules(RuleSetId::Statki), false);
    for command in [
        fire("J10"),
        Command::Resign,
        Command::RemoveShip { index: 0 },
        place_fleet(creator_fleet(RuleSetId::Statki)),
    ] {
        assert_eq!(
            game.refuse(STRANGER, &command),
            Refusal::NotAPlayer,
            "{command:?}"
        );
    }
    // Before anyone joins, the would-be joiner is not a player either.
    let mut waiting = Game::create(rules(RuleSetId::Statki), None);
    assert_eq!(
        waiting.refuse(JOINER, &Command::Resign),
        Refusal::NotAPlayer
    );
}

#[test]
fn refuses_a_shot_out_of_turn() {
    for coin in [false, true] {
        let mut game = Game::in_battle(rules(RuleSetId::Classic), coin);
        let waiting_player = if coin { CREATOR } else { JOINER };
        assert_eq!(
            game.refuse(waiting_player, &fire("J10")),
            Refusal::NotYourTurn
        );
    }
}

#[test]
fn refuses_a_cell_already_shot_whether_hit_or_missed() {
    let mut game = Game::in_battle(rules(RuleSetId::Classic), false);
    game.fire(CREATOR, "A1"); // hit, shoots again
    assert_eq!(game.refuse(CREATOR, &fire("A1")), Refusal::AlreadyShot);
    game.fire(CREATOR, "J10"); // miss
    game.fire(JOINER, "J10"); // miss
    assert_eq!(game.refuse(CREATOR, &fire("J10")), Refusal::AlreadyShot);
    assert_eq!(Refusal::AlreadyShot.code(), "already_shot");
}

#[test]
fn refuses_a_cell_already_known_to_be_empty() {
    let mut game = Game::in_battle(rules(RuleSetId::Classic), false);
    game.fire(CREATOR, "E6"); // the joiner's torpedo boat: sunk, ring marked
    let refusal = game.refuse(CREATOR, &fire("F7"));
    assert_eq!(refusal, Refusal::AlreadyKnown);
    assert_eq!(refusal.code(), "already_known");
}

#[test]
fn refuses_to_join_your_own_match() {
    let mut game = Game::create(rules(RuleSetId::Statki), None);
    assert_eq!(game.refuse(CREATOR, &Command::Join), Refusal::OwnMatch);
    assert_eq!(
        Match::create(
            CREATOR,
            rules(RuleSetId::Statki),
            false,
            Some(CREATOR),
            t0()
        ),
        Err(Refusal::OwnMatch)
    );
}

#[test]
fn refuses_a_joiner_who_was_not_invited() {
    let mut game = Game::create(rules(RuleSetId::Statki), Some(JOINER));
    assert_eq!(game.refuse(STRANGER, &Command::Join), Refusal::NotInvited);
    game.exec(JOINER, &Command::Join);
    assert_eq!(game.state.player(1), Some(JOINER));
}

#[test]
fn only_the_invited_player_declines_and_only_while_the_challenge_waits() {
    let mut game = Game::create(rules(RuleSetId::Statki), Some(JOINER));
    assert_eq!(
        game.refuse(STRANGER, &Command::Decline),
        Refusal::NotInvited
    );
    assert_eq!(game.refuse(CREATOR, &Command::Decline), Refusal::NotInvited);
    let events = game.exec(JOINER, &Command::Decline);
    assert_eq!(
        events,
        [Event::MatchCancelled {
            reason: CancelReason::Declined
        }]
    );
    assert_eq!(game.state.phase, Phase::Cancelled);
    assert!(matches!(
        game.refuse(JOINER, &Command::Join),
        Refusal::WrongPhase { .. }
    ));

    let mut open = Game::create(rules(RuleSetId::Statki), None);
    assert_eq!(open.refuse(JOINER, &Command::Decline), Refusal::NotInvited);
    let mut joined = Game::create(rules(RuleSetId::Statki), Some(JOINER));
    joined.exec(JOINER, &Command::Join);
    assert!(matches!(
        joined.refuse(JOINER, &Command::Decline),
        Refusal::WrongPhase { .. }
    ));
}

#[test]
fn refuses_to_expire_before_any_clock_runs_out() {
    let mut game = Game::create(rules(RuleSetId::Statki), None);
    game.now = at(899);
    assert_eq!(game.expire(), Err(Refusal::NotDue));
    assert_eq!(Refusal::NotDue.code(), "not_due");
}

// ---------------------------------------------------------------- placement

#[test]
fn placing_the_last_ship_locks_the_fleet() {
    let mut game = Game::joined(rules(RuleSetId::Battaglia));
    let fleet = creator_fleet(RuleSetId::Battaglia);
    for (index, placement) in fleet.iter().enumerate().take(5) {
        let events = game.place(CREATOR, index, *placement);
        assert_eq!(events.len(), 1, "no lock before the last ship");
        assert!(!game.state.sides[0].fleet.is_locked());
    }
    let events = game.place(CREATOR, 5, fleet[5]);
    assert_eq!(events.len(), 2);
    let Event::FleetLocked {
        player,
        commitment,
        salt: Some(salt),
    } = &events[1]
    else {
        panic!("expected the fleet to lock: {events:?}");
    };
    assert_eq!(*player, CREATOR);
    assert_eq!(salt, &hex::encode([0x5a; 16]));
    assert_eq!(
        commitment,
        &commit::commitment(RuleSetId::Battaglia, salt, &fleet)
    );
    assert!(game.state.sides[0].fleet.is_locked());
    assert_eq!(game.state.phase, Phase::Placement, "the joiner is not done");
}

#[test]
fn a_placed_ship_can_be_picked_up_and_placed_again() {
    let mut game = Game::joined(rules(RuleSetId::Statki));
    game.place(CREATOR, 0, h("A1"));
    game.place(CREATOR, 1, h("A3"));
    let events = game.exec(CREATOR, &Command::RemoveShip { index: 0 });
    assert_eq!(
        events,
        vec![Event::ShipRemoved {
            player: CREATOR,
            index: 0
        }]
    );
    assert!(game.state.sides[0].fleet.slots()[0].is_none());
    // The carrier's old cells are free again.
    game.place(CREATOR, 2, h("A1"));
    game.place(CREATOR, 0, v("J1"));
    assert_eq!(
        game.state.sides[0].fleet.placements()[..3],
        [Some(v("J1")), Some(h("A3")), Some(h("A1"))]
    );
}

#[test]
fn a_placed_ship_can_be_moved_by_placing_it_again() {
    let mut game = Game::joined(rules(RuleSetId::Classic));
    game.place(CREATOR, 0, h("A1"));
    // Overlapping its own old position is no overlap.
    game.place(CREATOR, 0, h("B1"));
    assert_eq!(game.state.sides[0].fleet.placements()[0], Some(h("B1")));
    assert_eq!(game.state.sides[0].fleet.occupied().len(), 4);
}

#[test]
fn the_whole_fleet_can_be_placed_at_once() {
    for id in PRESETS {
        let mut game = Game::joined(rules(id));
        let fleet = joiner_fleet(id);
        let events = game.exec(JOINER, &place_fleet(fleet.clone()));
        assert_eq!(events.len(), fleet.len() + 1, "{id:?}");
        for (index, (event, placement)) in events.iter().zip(&fleet).enumerate() {
            assert_eq!(
                event,
                &Event::ShipPlaced {
                    player: JOINER,
                    index,
                    placement: Some(*placement)
                }
            );
        }
        assert!(
            matches!(events.last(), Some(Event::FleetLocked { player, .. }) if *player == JOINER)
        );
        let side = &game.state.sides[1];
        assert!(side.fleet.is_locked());
        assert_eq!(
            side.fleet.placements(),
            fleet.iter().copied().map(Some).collect::<Vec<_>>()
        );
    }
}

#[test]
fn the_whole_fleet_may_replace_ships_placed_one_by_one() {
    for id in PRESETS {
        let mut game = Game::joined(rules(id));
        // Ship 1 sits where the new fleet puts ship 0, ship 2 where it puts ship 1.
        game.place(CREATOR, 1, h("A1"));
        game.place(CREATOR, 2, h("A3"));
        let fleet = creator_fleet(id);
        let events = game.exec(CREATOR, &place_fleet(fleet.clone()));
        assert_eq!(
            events[..2],
            [
                Event::ShipRemoved {
                    player: CREATOR,
                    index: 1
                },
                Event::ShipRemoved {
                    player: CREATOR,
                    index: 2
                }
            ],
            "the old ships are picked up first"
        );
        assert_eq!(events.len(), 2 + fleet.len() + 1);
        let side = &game.state.sides[0];
        assert!(side.fleet.is_locked(), "{id:?}");
        assert_eq!(
            side.fleet.placements(),
            fleet.iter().copied().map(Some).collect::<Vec<_>>(),
            "{id:?}"
        );
        assert!(game.state.commitments_verify());
    }
}

#[test]
fn the_next_ship_is_the_first_unplaced_one() {
    let mut game = Game::joined(rules(RuleSetId::Classic));
    let next = |game: &Game| {
        let view = game.state.view(Viewer::Player(CREATOR));
        let participant = view.participant.expect("a player's view");
        let next = participant
            .next_ship
            .map(|ship| (ship.index, ship.name, ship.length));
        assert_eq!(
            next.map(|n| n.0),
            game.state.sides[0].fleet.next_ship(),
            "the view agrees with the fleet"
        );
        next
    };
    assert_eq!(next(&game), Some((0, "Battleship", 4)));
    game.place(CREATOR, 0, h("A1"));
    assert_eq!(next(&game), Some((1, "Cruiser", 3)));
    game.place(CREATOR, 2, h("A3"));
    assert_eq!(next(&game), Some((1, "Cruiser", 3)));
    game.place(CREATOR, 1, h("F1"));
    assert_eq!(next(&game), Some((3, "Destroyer", 2)));
    game.exec(CREATOR, &Command::RemoveShip { index: 0 });
    assert_eq!(next(&game), Some((0, "Battleship", 4)));
}

#[test]
fn placement_hints_list_the_legal_bow_cells_of_the_next_ship() {
    let mut game = Game::joined(rules(RuleSetId::Classic));
    let hints = |game: &Game| {
        game.state
            .view(Viewer::Player(CREATOR))
            .participant
            .expect("a player's view")
            .placement_hints
            .expect("hints while placing")
    };
    let empty = hints(&game);
    assert_eq!(empty.horizontal.len(), 70, "a 4-ship fits 7 × 10 bows");
    assert_eq!(empty.vertical.len(), 70);
    game.place(CREATOR, 0, h("A1")); // A1–D1
    let after = hints(&game);
    assert!(!after.horizontal.contains(&cell("E1")), "would touch D1");
    assert!(!after.horizontal.contains(&cell("B2")), "would touch");
    assert!(after.horizontal.contains(&cell("F1")));
    assert!(after.vertical.contains(&cell("A3")));
    assert!(!after.vertical.contains(&cell("E2")), "corner to D1");
    assert_eq!(Some(after), game.state.sides[0].fleet.hints());
}

#[test]
fn a_locked_fleet_has_no_next_ship_and_no_hints() {
    let mut game = Game::joined(rules(RuleSetId::Statki));
    game.exec(CREATOR, &place_fleet(creator_fleet(RuleSetId::Statki)));
    let participant = game
        .state
        .view(Viewer::Player(CREATOR))
        .participant
        .expect("a player's view");
    assert!(participant.fleet_locked);
    assert_eq!(participant.next_ship, None);
    assert_eq!(participant.placement_hints, None);
    let other = game
        .state
        .view(Viewer::Player(JOINER))
        .participant
        .expect("a player's view");
    assert!(other.opponent_fleet_locked);
    assert!(!other.fleet_locked);
    assert!(other.placement_hints.is_some());
}

#[test]
fn battle_starts_only_when_both_fleets_are_locked_with_the_first_shooter_from_the_coin() {
    for (coin, first) in [(false, CREATOR), (true, JOINER)] {
        let mut game = Game::joined(rules(RuleSetId::Statki));
        let events = game.exec_with(
            JOINER,
            &place_fleet(joiner_fleet(RuleSetId::Statki)),
            statki::engine::Draw {
                coin: !coin,
                salt: [1; 16],
            },
        );
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, Event::BattleStarted { .. })),
            "one fleet is not enough"
        );
        assert_eq!(game.state.phase, Phase::Placement);
        assert_eq!(game.state.turn, None);
        // The creator places one by one; the last ship starts the battle.
        let fleet = creator_fleet(RuleSetId::Statki);
        for (index, placement) in fleet.iter().enumerate().take(4) {
            game.place(CREATOR, index, *placement);
            assert_eq!(game.state.phase, Phase::Placement);
        }
        game.now = at(50);
        let events = game.exec_with(
            CREATOR,
            &Command::PlaceShip {
                index: 4,
                placement: fleet[4],
            },
            statki::engine::Draw {
                coin,
                salt: [2; 16],
            },
        );
        assert_eq!(
            events.last(),
            Some(&Event::BattleStarted {
                first,
                deadline: at(80)
            }),
            "coin {coin}"
        );
        assert_eq!(game.state.phase, Phase::Battle);
        assert_eq!(game.state.turn, game.state.seat_of(first));
        let view = game.state.view(Viewer::Spectator);
        assert_eq!(view.turn, Some(first));
    }
}

// ---------------------------------------------------------------- clocks

#[test]
fn creating_a_match_arms_the_join_deadline() {
    let game = Game::create(rules(RuleSetId::Statki), None);
    assert!(matches!(game.log[0], Event::MatchCreated { deadline, .. } if deadline == at(900)));
    assert_eq!(game.state.deadline, Some(at(900)));
    assert_eq!(game.state.phase, Phase::Waiting);
}

#[test]
fn joining_arms_the_placement_deadline() {
    let mut game = Game::create(rules(RuleSetId::Statki), None);
    game.now = at(42);
    let events = game.exec(JOINER, &Command::Join);
    assert_eq!(
        events,
        vec![Event::PlayerJoined {
            player: JOINER,
            deadline: at(162)
        }]
    );
    assert_eq!(game.state.deadline, Some(at(162)));
    assert_eq!(game.state.phase, Phase::Placement);
}

#[test]
fn placing_ships_does_not_move_the_placement_deadline() {
    let mut game = Game::joined(rules(RuleSetId::Statki));
    game.now = at(60);
    game.exec(CREATOR, &place_fleet(creator_fleet(RuleSetId::Statki)));
    game.place(JOINER, 0, v("A1"));
    game.exec(JOINER, &Command::RemoveShip { index: 0 });
    assert_eq!(game.state.deadline, Some(at(120)));
}

#[test]
fn the_battle_start_and_every_shot_arm_a_fresh_shot_deadline() {
    let mut game = Game::joined(rules(RuleSetId::Classic));
    game.now = at(10);
    game.exec(CREATOR, &place_fleet(creator_fleet(RuleSetId::Classic)));
    game.now = at(20);
    game.exec(JOINER, &place_fleet(joiner_fleet(RuleSetId::Classic)));
    assert_eq!(game.state.deadline, Some(at(50)));
    for (second, target) in [(25, "A1"), (40, "A2"), (41, "J10")] {
        game.now = at(second);
        let events = game.fire(CREATOR, target);
        let Some(Event::ShotFired { deadline, .. }) = events.first() else {
            panic!("expected a shot");
        };
        assert_eq!(*deadline, Some(at(second + 30)), "{target}");
        assert_eq!(game.state.deadline, Some(at(second + 30)));
    }
}

#[test]
fn a_placement_timeout_with_one_fleet_locked_makes_the_other_player_lose() {
    for (locked, other) in [(CREATOR, JOINER), (JOINER, CREATOR)] {
        let mut game = Game::joined(rules(RuleSetId::Battaglia));
        game.exec(
            locked,
            &place_fleet(fleet_for(locked, RuleSetId::Battaglia)),
        );
        game.place(other, 0, fleet_for(other, RuleSetId::Battaglia)[0]);
        game.now = at(119);
        assert_eq!(game.expire(), Err(Refusal::NotDue));
        game.now = at(120);
        let events = game.expire().expect("the placement clock ran out");
        assert_eq!(
            events,
            vec![Event::MatchFinished {
                winner: Some(locked),
                reason: FinishReason::PlacementTimeout
            }]
        );
        assert_eq!(
            finished(&game),
            (Some(locked), FinishReason::PlacementTimeout)
        );
        assert_ne!(game.state.result.and_then(|r| r.winner), Some(other));
    }
}

#[test]
fn a_placement_timeout_with_no_fleet_locked_is_a_draw() {
    let mut game = Game::joined(rules(RuleSetId::Statki));
    // Nearly done is still not locked.
    for (index, placement) in creator_fleet(RuleSetId::Statki)
        .into_iter()
        .enumerate()
        .take(4)
    {
        game.place(CREATOR, index, placement);
    }
    game.now = at(500);
    let events = game.expire().expect("the placement clock ran out");
    assert_eq!(
        events,
        vec![Event::MatchFinished {
            winner: None,
            reason: FinishReason::BothPlacementTimeout
        }]
    );
    assert_eq!(finished(&game), (None, FinishReason::BothPlacementTimeout));
}

#[test]
fn a_shot_timeout_makes_the_player_on_turn_lose() {
    for (coin, on_turn, other) in [(false, CREATOR, JOINER), (true, JOINER, CREATOR)] {
        let mut game = Game::in_battle(rules(RuleSetId::Statki), coin);
        game.now = at(29);
        assert_eq!(game.expire(), Err(Refusal::NotDue));
        game.now = at(30);
        game.expire().expect("the shot clock ran out");
        assert_eq!(finished(&game), (Some(other), FinishReason::ShotTimeout));
        assert_ne!(game.state.result.and_then(|r| r.winner), Some(on_turn));
    }
}

#[test]
fn expire_is_not_due_after_a_shot_moved_the_deadline() {
    let mut game = Game::in_battle(rules(RuleSetId::Statki), false);
    game.now = at(20);
    game.fire(CREATOR, "J10"); // miss; the joiner has until 50
    game.now = at(30);
    assert_eq!(game.expire(), Err(Refusal::NotDue), "the old deadline");
    game.now = at(49);
    assert_eq!(game.expire(), Err(Refusal::NotDue));
    game.now = at(50);
    game.expire().expect("the joiner's clock ran out");
    assert_eq!(finished(&game), (Some(CREATOR), FinishReason::ShotTimeout));
}

#[test]
fn an_unjoined_match_is_cancelled_at_the_join_deadline() {
    let mut game = Game::create(rules(RuleSetId::Classic), None);
    game.now = at(900);
    let events = game.expire().expect("the join clock ran out");
    assert_eq!(
        events,
        vec![Event::MatchCancelled {
            reason: CancelReason::NotJoined
        }]
    );
    assert_eq!(game.state.phase, Phase::Cancelled);
    assert_eq!(game.state.result, None, "no result, no rating");
    assert_eq!(game.state.deadline, None);
    let refusal = game.refuse(JOINER, &Command::Join);
    assert!(
        is_wrong_phase(&refusal, "cancelled", "waiting"),
        "{refusal:?}"
    );
}

#[test]
fn a_match_that_is_over_has_nothing_to_expire() {
    let mut game = Game::in_battle(rules(RuleSetId::Statki), false);
    game.exec(CREATOR, &Command::Resign);
    game.now = at(10_000);
    assert_eq!(game.expire(), Err(Refusal::NotDue));
    assert_eq!(
        game.state.extend_clock(Duration::seconds(5)),
        Err(Refusal::NotDue)
    );
}

#[test]
fn clock_extended_moves_the_deadline() {
    let mut game = Game::in_battle(rules(RuleSetId::Statki), false);
    let events = game
        .state
        .extend_clock(Duration::milliseconds(12_500))
        .expect("a running clock");
    assert_eq!(
        events,
        vec![Event::ClockExtended {
            deadline: at(30) + Duration::milliseconds(12_500),
            milliseconds: 12_500
        }]
    );
    game.apply(&events);
    game.now = at(42);
    assert_eq!(game.expire(), Err(Refusal::NotDue));
    game.now = at(43);
    game.expire().expect("the extended clock ran out");
    assert_eq!(finished(&game), (Some(JOINER), FinishReason::ShotTimeout));
}

#[test]
fn clock_extended_moves_the_placement_and_join_deadlines_too() {
    let mut waiting = Game::create(rules(RuleSetId::Statki), None);
    let events = waiting
        .state
        .extend_clock(Duration::seconds(60))
        .expect("a running clock");
    waiting.apply(&events);
    assert_eq!(waiting.state.deadline, Some(at(960)));

    let mut placing = Game::joined(rules(RuleSetId::Statki));
    let events = placing
        .state
        .extend_clock(Duration::seconds(60))
        .expect("a running clock");
    placing.apply(&events);
    placing.now = at(179);
    assert_eq!(placing.expire(), Err(Refusal::NotDue));
}

// ---------------------------------------------------------------- resign and withdraw

#[test]
fn resigning_in_placement_loses() {
    let mut game = Game::joined(rules(RuleSetId::Statki));
    let events = game.exec(CREATOR, &Command::Resign);
    assert_eq!(
        events,
        vec![Event::MatchFinished {
            winner: Some(JOINER),
            reason: FinishReason::Resigned
        }]
    );
    assert_eq!(finished(&game), (Some(JOINER), FinishReason::Resigned));
}

#[test]
fn resigning_in_battle_loses_even_off_turn() {
    for (resigner, winner) in [(CREATOR, JOINER), (JOINER, CREATOR)] {
        let mut game = Game::in_battle(rules(RuleSetId::Classic), false);
        game.exec(resigner, &Command::Resign);
        assert_eq!(finished(&game), (Some(winner), FinishReason::Resigned));
    }
}

#[test]
fn the_creator_withdrawing_a_waiting_match_cancels_it() {
    let mut game = Game::create(rules(RuleSetId::Statki), None);
    let events = game.exec(CREATOR, &Command::Resign);
    assert_eq!(
        events,
        vec![Event::MatchCancelled {
            reason: CancelReason::Withdrawn
        }]
    );
    assert_eq!(game.state.phase, Phase::Cancelled);
    assert_eq!(game.state.result, None);
}

// ---------------------------------------------------------------- views and record

#[test]
fn a_player_sees_their_own_fleet_and_a_spectator_none() {
    let game = Game::in_battle(rules(RuleSetId::Battaglia), false);
    for (player, fleet) in [
        (CREATOR, creator_fleet(RuleSetId::Battaglia)),
        (JOINER, joiner_fleet(RuleSetId::Battaglia)),
    ] {
        let view = game.state.view(Viewer::Player(player));
        assert_eq!(view.you, Some(player));
        let own: Vec<_> = view
            .participant
            .expect("a player's view")
            .fleet
            .iter()
            .map(|ship| ship.placement)
            .collect();
        assert_eq!(own, fleet.into_iter().map(Some).collect::<Vec<_>>());
        assert_eq!(view.record, None);
    }
    let spectator = game.state.view(Viewer::Spectator);
    assert_eq!(spectator.you, None);
    assert_eq!(spectator.participant, None);
    assert_eq!(spectator.record, None);
    assert_eq!(spectator.players, vec![CREATOR, JOINER]);
    let stranger = game.state.view(Viewer::Player(STRANGER));
    assert_eq!(
        stranger.participant, None,
        "a stranger sees what a spectator sees"
    );
}

#[test]
fn the_opponent_is_told_a_ship_was_placed_but_not_where() {
    let mut game = Game::joined(rules(RuleSetId::Statki));
    let events = game.place(CREATOR, 0, h("B2"));
    let own = game.state.redact(&events[0], Viewer::Player(CREATOR));
    assert_eq!(own, events[0]);
    for viewer in [Viewer::Player(JOINER), Viewer::Spectator] {
        assert_eq!(
            game.state.redact(&events[0], viewer),
            Event::ShipPlaced {
                player: CREATOR,
                index: 0,
                placement: None
            }
        );
    }
}

#[test]
fn the_salt_stays_with_its_owner_until_the_end() {
    let mut game = Game::joined(rules(RuleSetId::Statki));
    let events = game.exec(CREATOR, &place_fleet(creator_fleet(RuleSetId::Statki)));
    let locked = events.last().expect("events").clone();
    assert!(matches!(
        game.state.redact(&locked, Viewer::Player(CREATOR)),
        Event::FleetLocked { salt: Some(_), .. }
    ));
    for viewer in [Viewer::Player(JOINER), Viewer::Spectator] {
        assert!(matches!(
            game.state.redact(&locked, viewer),
            Event::FleetLocked { salt: None, .. }
        ));
    }
    game.exec(JOINER, &Command::Resign);
    assert_eq!(game.state.redact(&locked, Viewer::Spectator), locked);
}

#[test]
fn after_the_end_the_whole_record_is_public_and_commitments_verify() {
    let mut game = Game::in_battle(rules(RuleSetId::Classic), true);
    game.fire(JOINER, "J10");
    game.exec(CREATOR, &Command::Resign);
    assert!(game.state.commitments_verify());
    for viewer in [Viewer::Spectator, Viewer::Player(JOINER)] {
        let record = game
            .state
            .view(viewer)
            .record
            .expect("a record after the end");
        assert_eq!(record.len(), 2);
        for (opened, player) in record.iter().zip([CREATOR, JOINER]) {
            assert_eq!(opened.player, player);
            assert!(opened.commitment_verified, "{player}");
            assert_eq!(opened.ships, fleet_for(player, RuleSetId::Classic));
        }
    }
    for event in &game.log {
        assert_eq!(&game.state.redact(event, Viewer::Spectator), event);
    }
}

#[test]
fn a_wrong_salt_fails_verification() {
    let mut game = Game::in_battle(rules(RuleSetId::Statki), false);
    game.exec(CREATOR, &Command::Resign);
    game.state.sides[1].salt = Some(hex::encode([0u8; 16]));
    assert!(!game.state.commitments_verify());
    let record = game.state.view(Viewer::Spectator).record.expect("a record");
    assert!(record[0].commitment_verified);
    assert!(!record[1].commitment_verified);
}

// ---------------------------------------------------------------- the log

#[test]
fn a_log_must_start_with_match_created() {
    let err = Match::fold(&[Event::MatchCancelled {
        reason: CancelReason::Withdrawn,
    }])
    .expect_err("not a match");
    assert_eq!(err.position, 0);
    assert!(Match::fold(&[]).is_err());
}

#[test]
fn a_tampered_placement_in_the_log_is_detected() {
    let mut game = Game::joined(rules(RuleSetId::Classic));
    game.place(CREATOR, 0, h("A1"));
    let mut log = game.log.clone();
    log.push(Event::ShipPlaced {
        player: CREATOR,
        index: 1,
        placement: Some(h("A2")), // touches ship 0
    });
    let err = Match::fold(&log).expect_err("touching ships in classic");
    assert_eq!((err.position, err.kind), (3, "ship_placed"));
}

#[test]
fn every_refused_command_leaves_the_match_identical() {
    // `Game::refuse` compares the whole state with a clone taken before; here a mix of
    // refusals runs one after the other on the same match, then the match plays on.
    let mut game = Game::in_battle(rules(RuleSetId::Classic), false);
    let before = game.state.clone();
    let refusals = [
        game.refuse(JOINER, &fire("A1")),
        game.refuse(STRANGER, &fire("A1")),
        game.refuse(CREATOR, &Command::Join),
        game.refuse(CREATOR, &Command::RemoveShip { index: 0 }),
        game.refuse(CREATOR, &place_fleet(creator_fleet(RuleSetId::Classic))),
    ];
    assert_eq!(refusals.len(), 5);
    assert_eq!(game.state, before);
    assert_eq!(
        game.log.len(),
        Match::fold(&game.log).expect("folds").version as usize
    );
    game.fire(CREATOR, "A1");
}

/// The log with `event` appended must not fold.
fn assert_refused_by_fold(log: &[Event], event: Event) {
    let mut tampered = log.to_vec();
    tampered.push(event.clone());
    let err = Match::fold(&tampered).expect_err("a tampered log must not fold");
    assert_eq!(err.position, log.len(), "{event:?}");
    assert_eq!(err.kind, event.kind());
}

#[test]
fn a_log_that_moves_a_ship_after_the_fleet_locked_is_detected() {
    let mut game = Game::joined(rules(RuleSetId::Statki));
    game.exec(CREATOR, &place_fleet(creator_fleet(RuleSetId::Statki)));
    assert_refused_by_fold(
        &game.log,
        Event::ShipPlaced {
            player: CREATOR,
            index: 4,
            placement: Some(h("H10")),
        },
    );
    assert_refused_by_fold(
        &game.log,
        Event::ShipRemoved {
            player: CREATOR,
            index: 4,
        },
    );
    let locked = game.log.last().expect("events").clone();
    assert_refused_by_fold(&game.log, locked);
}

#[test]
fn a_log_with_a_shot_before_the_battle_or_out_of_turn_is_detected() {
    let shot = |player, at_cell: &str| Event::ShotFired {
        player,
        cell: cell(at_cell),
        outcome: Outcome::Miss,
        sunk_ship: None,
        marked: Vec::new(),
        next_turn: Some(CREATOR),
        deadline: Some(at(30)),
    };
    let placing = Game::joined(rules(RuleSetId::Statki));
    assert_refused_by_fold(&placing.log, shot(CREATOR, "J10"));
    let mut battle = Game::in_battle(rules(RuleSetId::Statki), false);
    assert_refused_by_fold(&battle.log, shot(JOINER, "J10"));
    battle.fire(CREATOR, "J10");
    battle.fire(JOINER, "J10");
    assert_refused_by_fold(&battle.log, shot(CREATOR, "J10"));
}

#[test]
fn a_log_with_events_after_the_end_is_detected() {
    let mut game = Game::in_battle(rules(RuleSetId::Statki), false);
    game.exec(JOINER, &Command::Resign);
    assert_refused_by_fold(
        &game.log,
        Event::MatchFinished {
            winner: Some(JOINER),
            reason: FinishReason::Resigned,
        },
    );
    assert_refused_by_fold(
        &game.log,
        Event::MatchCancelled {
            reason: CancelReason::Withdrawn,
        },
    );
    assert_refused_by_fold(
        &game.log,
        Event::ClockExtended {
            deadline: at(60),
            milliseconds: 1000,
        },
    );
    let mut cancelled = Game::create(rules(RuleSetId::Statki), None);
    cancelled.exec(CREATOR, &Command::Resign);
    assert_refused_by_fold(
        &cancelled.log,
        Event::MatchFinished {
            winner: None,
            reason: FinishReason::BothPlacementTimeout,
        },
    );
}

#[test]
fn a_log_that_starts_the_battle_twice_is_detected() {
    let game = Game::in_battle(rules(RuleSetId::Statki), false);
    let started = game.log.last().expect("events").clone();
    assert!(matches!(started, Event::BattleStarted { .. }));
    assert_refused_by_fold(&game.log, started);
}

#[test]
fn a_ranked_match_with_house_options_is_refused_at_creation() {
    let refused = Match::create(
        CREATOR,
        rules_with_extra_shot(RuleSetId::Battaglia),
        true,
        None,
        t0(),
    );
    assert!(matches!(refused, Err(Refusal::InvalidOption(_))));
    let unranked = Match::create(
        CREATOR,
        rules_with_extra_shot(RuleSetId::Battaglia),
        false,
        None,
        t0(),
    );
    assert!(unranked.is_ok());
}

#[test]
fn a_clock_can_only_be_extended_forwards() {
    let created =
        Match::create(CREATOR, rules(RuleSetId::Statki), false, None, t0()).expect("created");
    let state = Match::fold([&created]).expect("folds");
    assert!(matches!(
        state.extend_clock(Duration::seconds(-5)),
        Err(Refusal::InvalidOption(_))
    ));
    assert!(matches!(
        state.extend_clock(Duration::zero()),
        Err(Refusal::InvalidOption(_))
    ));
    assert!(state.extend_clock(Duration::seconds(5)).is_ok());
}

// ---------------------------------------------------------------- reactions

fn react(reaction: statki::engine::Reaction) -> Command {
    Command::React { reaction }
}

#[test]
fn a_reaction_is_one_event_and_changes_nothing_of_the_game() {
    use statki::engine::Reaction;
    let mut game = Game::in_battle(rules(RuleSetId::Statki), false);
    let before = game.state.clone();
    let events = game.exec(JOINER, &react(Reaction::GoodLuck));
    assert_eq!(
        events,
        [Event::Reaction {
            player: JOINER,
            reaction: Reaction::GoodLuck,
            next_at: game.now + Duration::seconds(3),
        }]
    );
    assert_eq!(game.state.turn, before.turn);
    assert_eq!(game.state.deadline, before.deadline);
    assert_eq!(game.state.phase, before.phase);
    assert_eq!(game.state.version, before.version + 1);
    assert_eq!(game.state.sides[1].reactions, 1);
    assert_eq!(game.state.sides[0].reactions, 0);
    // Apart from the sender's count and gap, the match is the one before.
    let mut unchanged = game.state.clone();
    unchanged.sides[1].reactions = 0;
    unchanged.sides[1].next_reaction_at = None;
    unchanged.version -= 1;
    assert_eq!(unchanged, before);
    // The turn is still the creator's: the reaction did not take it.
    game.fire(CREATOR, "J10");
}

#[test]
fn reactions_are_allowed_in_placement_and_battle_only() {
    use statki::engine::Reaction;
    let mut waiting = Game::create(rules(RuleSetId::Statki), None);
    let refusal = waiting.refuse(CREATOR, &react(Reaction::Thanks));
    assert!(
        is_wrong_phase(&refusal, "waiting", "placement or battle"),
        "{refusal:?}"
    );
    let mut placing = Game::joined(rules(RuleSetId::Classic));
    placing.exec(CREATOR, &react(Reaction::GoodLuck));
    placing.now += Duration::seconds(3);
    placing.exec(JOINER, &react(Reaction::GoodLuck));
    let mut battle = Game::in_battle(rules(RuleSetId::Battaglia), true);
    battle.exec(CREATOR, &react(Reaction::Oops));
    battle.exec(JOINER, &Command::Resign);
    let refusal = battle.refuse(CREATOR, &react(Reaction::GoodGame));
    assert!(
        is_wrong_phase(&refusal, "finished", "placement or battle"),
        "{refusal:?}"
    );
    assert_eq!(
        battle.refuse(STRANGER, &react(Reaction::GoodGame)),
        Refusal::NotAPlayer
    );
    let mut live = Game::in_battle(rules(RuleSetId::Statki), false);
    assert_eq!(
        live.refuse(STRANGER, &react(Reaction::NiceShot)),
        Refusal::NotAPlayer
    );
}

#[test]
fn one_player_waits_three_seconds_between_reactions_the_other_does_not() {
    use statki::engine::Reaction;
    let mut game = Game::in_battle(rules(RuleSetId::Statki), false);
    game.exec(CREATOR, &react(Reaction::GoodLuck));
    // The opponent has a gap of their own.
    game.exec(JOINER, &react(Reaction::GoodLuck));
    let refusal = game.refuse(CREATOR, &react(Reaction::NiceShot));
    assert_eq!(
        refusal,
        Refusal::TooManyReactions {
            retry_after: Some(3)
        }
    );
    assert_eq!(refusal.code(), "too_many_reactions");
    game.now += Duration::milliseconds(2_001);
    assert_eq!(
        game.refuse(CREATOR, &react(Reaction::NiceShot)),
        Refusal::TooManyReactions {
            retry_after: Some(1)
        }
    );
    game.now += Duration::milliseconds(998);
    assert_eq!(
        game.refuse(CREATOR, &react(Reaction::NiceShot)),
        Refusal::TooManyReactions {
            retry_after: Some(1)
        }
    );
    game.now += Duration::milliseconds(1);
    game.exec(CREATOR, &react(Reaction::NiceShot));
}

#[test]
fn a_player_sends_at_most_twenty_reactions_per_match() {
    use statki::engine::{REACTIONS_PER_PLAYER, Reaction};
    let mut game = Game::joined(rules(RuleSetId::Statki));
    for i in 0..REACTIONS_PER_PLAYER {
        let reaction = Reaction::ALL[i as usize % Reaction::ALL.len()];
        game.exec(CREATOR, &react(reaction));
        game.now += Duration::seconds(3);
    }
    assert_eq!(game.state.sides[0].reactions, 20);
    // The cap never lifts: no Retry-After, however long the player waits.
    game.now += Duration::hours(1);
    assert_eq!(
        game.refuse(CREATOR, &react(Reaction::Thanks)),
        Refusal::TooManyReactions { retry_after: None }
    );
    // The opponent still has all of theirs.
    game.exec(JOINER, &react(Reaction::Thanks));
}

#[test]
fn reaction_limits_survive_a_snapshot_and_an_old_snapshot_has_none() {
    use statki::engine::{Reaction, Snapshot};
    let mut game = Game::in_battle(rules(RuleSetId::Statki), false);
    game.exec(CREATOR, &react(Reaction::GoodLuck));
    let restored = Match::from_snapshot(&game.state.snapshot()).expect("restores");
    assert_eq!(restored, game.state);
    assert_eq!(
        restored.decide(CREATOR, &react(Reaction::Oops), game.now, draw(false)),
        Err(Refusal::TooManyReactions {
            retry_after: Some(3)
        })
    );
    // A snapshot written before reactions existed has neither field.
    let mut json = serde_json::to_value(game.state.snapshot()).expect("serialises");
    for side in json["sides"].as_array_mut().expect("sides") {
        let side = side.as_object_mut().expect("a side");
        side.remove("reactions");
        side.remove("next_reaction_at");
    }
    let old: Snapshot = serde_json::from_value(json).expect("an old snapshot reads");
    // A match without reactions writes its snapshot as before.
    let quiet = serde_json::to_value(Game::joined(rules(RuleSetId::Statki)).state.snapshot())
        .expect("serialises");
    assert!(quiet["sides"][0].get("reactions").is_none());
    assert!(quiet["sides"][0].get("next_reaction_at").is_none());
    let old = Match::from_snapshot(&old).expect("restores");
    assert_eq!(old.sides[0].reactions, 0);
    assert_eq!(old.sides[0].next_reaction_at, None);
}
