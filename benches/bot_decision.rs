//! Decision time of each bot level per shot (criterion): `choose_shot` on views recorded
//! from a real game, at the first shot, mid-game while hunting, and mid-game with an open
//! hit to follow up. Each figure includes deriving what the view proves.
//!
//! `cargo bench --bench bot_decision -- --warm-up-time 1 --measurement-time 3`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use rand::SeedableRng;
use rand::rngs::StdRng;
use statki::bot::simulate::{play, rules};
use statki::bot::{Level, choose_shot};
use statki::engine::{HouseOptions, MatchView, Outcome, RuleSetId};

/// Views before the first shot, before a mid-game hunting shot and before a mid-game shot
/// that follows up an open hit, from one recorded hard game.
fn recorded_views(ruleset: RuleSetId) -> Vec<(&'static str, MatchView)> {
    let rules = rules(ruleset, HouseOptions::default()).expect("rules");
    let mut views = Vec::new();
    play(
        Level::Hard,
        rules,
        &mut StdRng::seed_from_u64(11),
        |view, _| views.push(view.clone()),
    )
    .expect("a game");
    let open_hit = |view: &MatchView| {
        let seen = view.participant.as_ref().expect("participant");
        let sunk: Vec<_> = seen.sunk.iter().flat_map(|s| s.cells.clone()).collect();
        seen.shots
            .iter()
            .any(|s| s.outcome != Outcome::Miss && !sunk.contains(&s.cell))
    };
    let middle = views.len() / 2;
    let hunting = views[middle..]
        .iter()
        .find(|view| !open_hit(view))
        .cloned()
        .expect("a hunting view");
    let targeting = views[middle..]
        .iter()
        .find(|view| open_hit(view))
        .cloned()
        .expect("a targeting view");
    vec![
        ("first", views[0].clone()),
        ("hunting", hunting),
        ("targeting", targeting),
    ]
}

fn decisions(c: &mut Criterion) {
    for ruleset in RuleSetId::ALL {
        for (moment, view) in recorded_views(ruleset) {
            for level in Level::ALL {
                let mut rng = StdRng::seed_from_u64(1);
                let name = format!("{}/{}/{moment}", ruleset.as_str(), level.as_str());
                c.bench_function(&name, |b| {
                    b.iter(|| choose_shot(level, black_box(&view), &mut rng))
                });
            }
        }
    }
}

criterion_group!(benches, decisions);
criterion_main!(benches);
