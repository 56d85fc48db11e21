//! Bot strategies through the public engine API: every level plays whole games without a
//! single refused command, never shoots a cell the rules prove empty, follows up every hit
//! (medium and hard), and decides from its own redacted view only.

use crate::engine_support;

use std::collections::HashSet;

use engine_support::*;
use proptest::prelude::*;
use rand::SeedableRng;
use rand::rngs::StdRng;
use statki::bot::simulate::play;
use statki::bot::{Level, next_command, random_fleet};
use statki::engine::{Cell, Command, MatchRules, MatchView, Outcome, RuleSetId, Viewer};

/// Every preset, and battaglia with its house rule (a hit shoots again).
fn all_rules() -> Vec<MatchRules> {
    let mut all: Vec<MatchRules> = RuleSetId::ALL.into_iter().map(rules).collect();
    all.push(rules_with_extra_shot(RuleSetId::Battaglia));
    all
}

fn neighbours(cell: Cell, diagonal: bool) -> impl Iterator<Item = Cell> {
    let steps: &[(i8, i8)] = if diagonal {
        &[(1, 1), (1, -1), (-1, 1), (-1, -1)]
    } else {
        &[(1, 0), (-1, 0), (0, 1), (0, -1)]
    };
    steps.iter().filter_map(move |&(dc, dr)| {
        Cell::new(
            cell.col().checked_add_signed(dc)?,
            cell.row().checked_add_signed(dr)?,
        )
    })
}

/// Checks one shot against what the view proves, independently of the bot's own reasoning.
fn check_shot(level: Level, view: &MatchView, cell: Cell) -> Result<(), String> {
    let seen = view.participant.as_ref().ok_or("not a participant")?;
    let shot: HashSet<Cell> = seen.shots.iter().map(|s| s.cell).collect();
    if shot.contains(&cell) {
        return Err(format!("{cell} was already shot"));
    }
    if seen.marked.contains(&cell) {
        return Err(format!("{cell} is marked empty"));
    }
    let sunk: HashSet<Cell> = seen.sunk.iter().flat_map(|s| s.cells.clone()).collect();
    let open_hits: Vec<Cell> = seen
        .shots
        .iter()
        .filter(|s| s.outcome != Outcome::Miss && !sunk.contains(&s.cell))
        .map(|s| s.cell)
        .collect();
    if !view.rules.preset().ships_may_touch {
        let touches_sunk = neighbours(cell, false)
            .chain(neighbours(cell, true))
            .any(|n| sunk.contains(&n));
        if touches_sunk {
            return Err(format!("{cell} touches a sunk ship"));
        }
        if neighbours(cell, true).any(|n| open_hits.contains(&n)) {
            return Err(format!("{cell} is diagonal to a hit"));
        }
    }
    if level != Level::Easy && !open_hits.is_empty() {
        // Following up: the shot lies in line with an open hit, close enough for a ship
        // still afloat to cover both, with nothing but hits and untried cells between.
        let mut afloat: Vec<u8> = view.rules.preset().fleet.iter().map(|s| s.length).collect();
        for ship in &seen.sunk {
            if let Some(at) = afloat
                .iter()
                .position(|&l| usize::from(l) == ship.cells.len())
            {
                afloat.remove(at);
            }
        }
        let longest = afloat.into_iter().max().unwrap_or(0);
        let misses: HashSet<Cell> = seen
            .shots
            .iter()
            .filter(|s| s.outcome == Outcome::Miss)
            .map(|s| s.cell)
            .chain(seen.marked.iter().copied())
            .collect();
        let in_line = |hit: &Cell| {
            let (c, r) = (i16::from(cell.col()), i16::from(cell.row()));
            let (hc, hr) = (i16::from(hit.col()), i16::from(hit.row()));
            if c != hc && r != hr {
                return false;
            }
            let distance = (c - hc).abs() + (r - hr).abs();
            let (dc, dr) = ((hc - c).signum(), (hr - r).signum());
            distance < i16::from(longest)
                && (1..distance).all(|step| {
                    let between = Cell::new((c + dc * step) as u8, (r + dr * step) as u8);
                    between.is_some_and(|b| !misses.contains(&b) && !sunk.contains(&b))
                })
        };
        if !open_hits.iter().any(in_line) {
            return Err(format!("{cell} does not follow up the hits {open_hits:?}"));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    #[test]
    fn every_level_plays_whole_games_by_the_rules(seed in any::<u64>()) {
        for rules in all_rules() {
            for level in Level::ALL {
                let mut rng = StdRng::seed_from_u64(seed);
                let mut broken = Ok(());
                let shots = play(level, rules, &mut rng, |view, cell| {
                    if broken.is_ok() {
                        broken = check_shot(level, view, cell);
                    }
                });
                prop_assert!(shots.is_ok(), "{:?} {:?}: {:?}", rules.ruleset, level, shots);
                prop_assert!(broken.is_ok(), "{:?} {:?}: {:?}", rules.ruleset, level, broken);
                let shots = shots.unwrap_or_default();
                let fleet_cells = rules.preset().fleet_cells();
                prop_assert!((fleet_cells..=100).contains(&shots));
            }
        }
    }

    #[test]
    fn random_fleets_are_legal_in_every_preset(seed in any::<u64>()) {
        for id in RuleSetId::ALL {
            let fleet = random_fleet(id.rules(), &mut StdRng::seed_from_u64(seed));
            prop_assert!(statki::engine::Fleet::check_whole(id.rules(), &fleet).is_ok());
        }
    }
}

/// The bot's whole input is its view, and two matches that differ only in the opponent's
/// hidden fleet give it the same view, hence the same decision.
#[test]
fn the_bot_cannot_see_the_hidden_fleet() {
    for id in RuleSetId::ALL {
        let standard = Game::in_battle(rules(id), true);
        let mut other = Game::joined(rules(id));
        let hidden = random_fleet(id.rules(), &mut StdRng::seed_from_u64(7));
        assert_ne!(hidden, creator_fleet(id));
        other.exec(CREATOR, &Command::PlaceFleet { placements: hidden });
        other.exec_with(
            JOINER,
            &Command::PlaceFleet {
                placements: joiner_fleet(id),
            },
            draw(true),
        );
        let view = standard.state.view(Viewer::Player(JOINER));
        let other_view = other.state.view(Viewer::Player(JOINER));
        // Commitments are salted hashes of each fleet; the salt is the same here, so they
        // differ, and nothing else does.
        let strip = |mut view: MatchView| {
            for side in &mut view.sides {
                side.commitment = None;
            }
            view
        };
        assert_eq!(strip(view.clone()), strip(other_view.clone()), "{id:?}");
        for level in Level::ALL {
            let decide = |view: &MatchView| {
                let stripped = strip(view.clone());
                next_command(level, &stripped, &mut StdRng::seed_from_u64(3))
            };
            assert_eq!(decide(&view), decide(&other_view));
        }
    }
}

#[test]
fn a_spectator_view_gives_no_move() {
    let game = Game::in_battle(rules(RuleSetId::Statki), true);
    let view = game.state.view(Viewer::Spectator);
    for level in Level::ALL {
        assert_eq!(
            next_command(level, &view, &mut StdRng::seed_from_u64(1)),
            None
        );
    }
}

#[test]
fn medium_and_hard_extend_a_line_of_hits_at_its_ends() {
    // The creator's carrier lies on A1–E1; the bot (joiner) has hit B1 and C1.
    let mut game = Game::in_battle(rules(RuleSetId::Statki), true);
    game.fire(JOINER, "B1");
    game.fire(CREATOR, "J1");
    game.fire(JOINER, "C1");
    game.fire(CREATOR, "J2");
    let view = game.state.view(Viewer::Player(JOINER));
    for level in [Level::Medium, Level::Hard] {
        for seed in 0..20 {
            let command = next_command(level, &view, &mut StdRng::seed_from_u64(seed));
            let at = |text| Some(Command::Fire { cell: cell(text) });
            assert!(
                command == at("A1") || command == at("D1"),
                "{level:?} seed {seed}: {command:?}"
            );
        }
    }
}

#[test]
fn no_level_shoots_around_a_sunk_ship_where_ships_may_not_touch() {
    // Battaglia marks nothing, but its no-touching rule proves the ring empty: sink the
    // Motovedetta on J10 and no level may shoot I9, I10 or J9.
    let mut game = Game::in_battle(rules(RuleSetId::Battaglia), true);
    game.fire(JOINER, "J10");
    game.fire(CREATOR, "J1");
    let view = game.state.view(Viewer::Player(JOINER));
    assert_eq!(view.participant.as_ref().map(|p| p.sunk.len()), Some(1));
    for level in Level::ALL {
        for seed in 0..200 {
            let Some(Command::Fire { cell: shot }) =
                next_command(level, &view, &mut StdRng::seed_from_u64(seed))
            else {
                panic!("{level:?} did not fire");
            };
            assert!(
                !["I9", "I10", "J9", "J10"].contains(&shot.to_string().as_str()),
                "{level:?} seed {seed} shot {shot}"
            );
        }
    }
}

#[test]
fn the_bot_places_only_during_placement_and_fires_only_on_its_turn() {
    let id = RuleSetId::Classic;
    let mut game = Game::joined(rules(id));
    let mut rng = StdRng::seed_from_u64(5);
    let placing = next_command(
        Level::Hard,
        &game.state.view(Viewer::Player(JOINER)),
        &mut rng,
    );
    assert!(matches!(placing, Some(Command::PlaceFleet { .. })));
    game.exec(JOINER, &placing.expect("a fleet"));
    let placed = next_command(
        Level::Hard,
        &game.state.view(Viewer::Player(JOINER)),
        &mut rng,
    );
    assert_eq!(placed, None, "a locked fleet is not placed again");
    game.exec_with(
        CREATOR,
        &Command::PlaceFleet {
            placements: creator_fleet(id),
        },
        draw(false),
    );
    // The creator shoots first: nothing for the bot to do.
    let waiting = next_command(
        Level::Hard,
        &game.state.view(Viewer::Player(JOINER)),
        &mut rng,
    );
    assert_eq!(waiting, None);
}
