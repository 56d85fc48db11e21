//! A random legal fleet for any preset, ship by ship in fleet order.

use rand::Rng;
use rand::seq::IndexedRandom;

use crate::engine::{Fleet, Orientation, Placement, RuleSet};

/// How many times a fleet is started over when a late ship finds no room (only a
/// no-touching preset can paint itself into a corner, and rarely).
const ATTEMPTS: usize = 10_000;

/// A legal fleet for `rules`, one placement per ship in fleet order. Each ship goes on a
/// uniformly drawn legal position given the ships before it, using the engine's own
/// legality (the same placement hints a client gets), so the fleet always passes
/// `Fleet::check_whole`.
pub fn random_fleet(rules: &'static RuleSet, rng: &mut impl Rng) -> Vec<Placement> {
    for _ in 0..ATTEMPTS {
        if let Some(fleet) = try_fleet(rules, rng) {
            return fleet;
        }
    }
    // Unreachable for the presets (a 10 × 10 sea always fits them); the loop above is
    // bounded only so that no input can hang the caller.
    unreachable_fleet(rules)
}

fn try_fleet(rules: &'static RuleSet, rng: &mut impl Rng) -> Option<Vec<Placement>> {
    let mut fleet = Fleet::new(rules);
    let mut placements = Vec::with_capacity(rules.fleet.len());
    while let Some(index) = fleet.next_ship() {
        let hints = fleet.hints()?;
        let options: Vec<Placement> = hints
            .horizontal
            .iter()
            .map(|&cell| (cell, Orientation::Horizontal))
            .chain(
                hints
                    .vertical
                    .iter()
                    .map(|&cell| (cell, Orientation::Vertical)),
            )
            .map(|(cell, orientation)| Placement { cell, orientation })
            .collect();
        let placement = *options.choose(rng)?;
        let cells = fleet.check_placement(index, placement).ok()?;
        fleet.set(index, placement, cells);
        placements.push(placement);
    }
    Some(placements)
}

/// A deterministic greedy packing: each ship on the first legal horizontal position in
/// reading order. It fits every preset (a test checks), so a bot always has a fleet.
fn unreachable_fleet(rules: &'static RuleSet) -> Vec<Placement> {
    let mut fleet = Fleet::new(rules);
    let mut placements = Vec::new();
    while let Some(index) = fleet.next_ship() {
        let Some(hints) = fleet.hints() else { break };
        let Some(&cell) = hints.horizontal.first() else {
            break;
        };
        let placement = Placement {
            cell,
            orientation: Orientation::Horizontal,
        };
        let Ok(cells) = fleet.check_placement(index, placement) else {
            break;
        };
        fleet.set(index, placement, cells);
        placements.push(placement);
    }
    placements
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;
    use crate::engine::RuleSetId;

    #[test]
    fn every_preset_gets_a_legal_whole_fleet() {
        for id in RuleSetId::ALL {
            let rules = id.rules();
            for seed in 0..500 {
                let mut rng = StdRng::seed_from_u64(seed);
                let fleet = random_fleet(rules, &mut rng);
                assert_eq!(fleet.len(), rules.fleet.len());
                assert!(
                    Fleet::check_whole(rules, &fleet).is_ok(),
                    "{id:?} seed {seed}: {fleet:?}"
                );
            }
        }
    }

    #[test]
    fn fleets_vary_with_the_draws() {
        let rules = RuleSetId::Statki.rules();
        let first = random_fleet(rules, &mut StdRng::seed_from_u64(1));
        let second = random_fleet(rules, &mut StdRng::seed_from_u64(2));
        assert_ne!(first, second);
        assert_eq!(first, random_fleet(rules, &mut StdRng::seed_from_u64(1)));
    }

    #[test]
    fn the_fallback_packing_is_legal_too() {
        for id in RuleSetId::ALL {
            let fleet = unreachable_fleet(id.rules());
            assert!(Fleet::check_whole(id.rules(), &fleet).is_ok(), "{id:?}");
        }
    }
}
