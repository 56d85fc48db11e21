//! Criterion benchmarks of the rules engine: a whole random match per preset, one shot
//! (decide + evolve) and one view render. Targets: a shot under 1 µs, a view under 5 µs.
//!
//! `cargo bench --bench engine -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;

use chrono::{DateTime, Duration, TimeZone, Utc};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use statki::engine::{
    Cell, Clock, Command, Draw, Event, Fleet, HouseOptions, Match, MatchRules, Orientation,
    Placement, RuleSetId, Viewer,
};
use uuid::Uuid;

const CREATOR: Uuid = Uuid::from_u128(1);
const JOINER: Uuid = Uuid::from_u128(2);

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0)
        .single()
        .expect("a valid fixed time")
}

fn variants() -> [(&'static str, MatchRules); 4] {
    let clock = Clock {
        placement_seconds: 120,
        shot_seconds: 30,
    };
    let rules = |id, extra_shot_on_hit| {
        MatchRules::new(id, HouseOptions { extra_shot_on_hit }, clock, 900).expect("valid rules")
    };
    [
        ("statki", rules(RuleSetId::Statki, false)),
        ("classic", rules(RuleSetId::Classic, false)),
        ("battaglia", rules(RuleSetId::Battaglia, false)),
        ("battaglia_extra_shot", rules(RuleSetId::Battaglia, true)),
    ]
}

/// One command of a recorded match, with everything `execute` needs.
#[derive(Clone)]
struct Step {
    actor: Uuid,
    command: Command,
    now: DateTime<Utc>,
    draw: Draw,
}

/// A random legal fleet, ship by ship through the engine's own placement check.
fn random_fleet(rules: &MatchRules, rng: &mut StdRng) -> Vec<Placement> {
    'restart: loop {
        let mut fleet = Fleet::new(rules.preset());
        for index in 0..rules.preset().fleet.len() {
            let found = (0..500).find_map(|_| {
                let cell = Cell::new(rng.random_range(0..10), rng.random_range(0..10))?;
                let orientation = if rng.random() {
                    Orientation::Horizontal
                } else {
                    Orientation::Vertical
                };
                let placement = Placement { cell, orientation };
                let cells = fleet.check_placement(index, placement).ok()?;
                Some((placement, cells))
            });
            let Some((placement, cells)) = found else {
                continue 'restart;
            };
            fleet.set(index, placement, cells);
        }
        return fleet.placements().into_iter().flatten().collect();
    }
}

/// Plays a random match to the end: the creation event and every command after it.
fn record_match(rules: MatchRules, seed: u64) -> (Event, Vec<Step>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let created = Match::create(CREATOR, rules, false, None, t0()).expect("created");
    let mut state = Match::fold([&created]).expect("folds");
    let mut steps = Vec::new();
    let mut now = t0();
    let mut run = |state: &mut Match, actor, command: Command, now, rng: &mut StdRng| {
        let draw = Draw {
            coin: rng.random(),
            salt: rng.random(),
        };
        state
            .execute(actor, &command, now, draw)
            .expect("a legal command");
        steps.push(Step {
            actor,
            command,
            now,
            draw,
        });
    };
    run(&mut state, JOINER, Command::Join, now, &mut rng);
    for player in [CREATOR, JOINER] {
        for (index, placement) in random_fleet(&rules, &mut rng).into_iter().enumerate() {
            now += Duration::milliseconds(500);
            let command = Command::PlaceShip { index, placement };
            run(&mut state, player, command, now, &mut rng);
        }
    }
    while let Some(seat) = state.turn {
        let known = state.sides[seat].known;
        let unknown: Vec<Cell> = Cell::all().filter(|&c| !known.contains(c)).collect();
        let cell = unknown[rng.random_range(0..unknown.len())];
        now += Duration::seconds(2);
        let actor = state.player(seat).expect("a player on turn");
        run(&mut state, actor, Command::Fire { cell }, now, &mut rng);
    }
    (created, steps)
}

/// Replays a recorded match, rendering both players' views after every shot.
fn replay(created: &Event, steps: &[Step]) -> Match {
    let mut state = Match::fold([created]).expect("folds");
    for step in steps {
        let events = state
            .execute(step.actor, &step.command, step.now, step.draw)
            .expect("a recorded command replays");
        black_box(&events);
        if matches!(step.command, Command::Fire { .. }) {
            black_box(state.view(Viewer::Player(CREATOR)));
            black_box(state.view(Viewer::Player(JOINER)));
        }
    }
    state
}

/// The state after the first half of the shots of a recorded match.
fn mid_battle(created: &Event, steps: &[Step]) -> (Match, DateTime<Utc>) {
    let shots = steps
        .iter()
        .filter(|s| matches!(s.command, Command::Fire { .. }))
        .count();
    let placement_steps = steps.len() - shots;
    let upto = placement_steps + shots / 2;
    let state = replay(created, &steps[..upto]);
    (state, steps[upto].now)
}

/// A cell the player on turn would hit without sinking, and one they would miss.
fn hit_and_miss(state: &Match) -> (Cell, Cell) {
    let seat = state.turn.expect("mid battle");
    let known = state.sides[seat].known;
    let target = &state.sides[1 - seat].fleet;
    let unknown = || Cell::all().filter(move |&c| !known.contains(c));
    let hit = unknown()
        .find(|&c| {
            target
                .ship_at(c)
                .is_some_and(|ship| target.ship_cells(ship).minus(known).len() >= 2)
        })
        .expect("an unsunk ship with two unhit cells");
    let miss = unknown()
        .find(|&c| target.ship_at(c).is_none())
        .expect("some unknown water");
    (hit, miss)
}

fn whole_matches(c: &mut Criterion) {
    let mut group = c.benchmark_group("match");
    for (name, rules) in variants() {
        let (created, steps) = record_match(rules, 0x5eed);
        group.bench_function(name, |b| b.iter(|| replay(&created, &steps)));
    }
    group.finish();
}

fn shots(c: &mut Criterion) {
    let mut group = c.benchmark_group("shot");
    for (name, rules) in variants() {
        let (created, steps) = record_match(rules, 0x5eed);
        let (state, now) = mid_battle(&created, &steps);
        let seat = state.turn.expect("mid battle");
        let shooter = state.player(seat).expect("a shooter");
        let (hit, miss) = hit_and_miss(&state);
        let draw = Draw {
            coin: false,
            salt: [0; 16],
        };
        for (kind, cell) in [("hit", hit), ("miss", miss)] {
            let fire = Command::Fire { cell };
            group.bench_function(format!("{name}/{kind}/decide+evolve"), |b| {
                b.iter_batched(
                    || state.clone(),
                    |mut m| {
                        let events = m.execute(shooter, &fire, now, draw);
                        (m, events)
                    },
                    BatchSize::SmallInput,
                );
            });
        }
        let fire = Command::Fire { cell: hit };
        group.bench_function(format!("{name}/hit/decide"), |b| {
            b.iter(|| state.decide(black_box(shooter), black_box(&fire), now, draw));
        });
    }
    group.finish();
}

fn views(c: &mut Criterion) {
    let mut group = c.benchmark_group("view");
    for (name, rules) in variants() {
        let (created, steps) = record_match(rules, 0x5eed);
        let (state, _) = mid_battle(&created, &steps);
        group.bench_function(format!("{name}/battle/player"), |b| {
            b.iter(|| state.view(black_box(Viewer::Player(CREATOR))));
        });
        group.bench_function(format!("{name}/battle/spectator"), |b| {
            b.iter(|| state.view(black_box(Viewer::Spectator)));
        });
        // During placement a player's view also carries the placement hints.
        let placing = replay(&created, &steps[..3]);
        group.bench_function(format!("{name}/placement/player"), |b| {
            b.iter(|| placing.view(black_box(Viewer::Player(CREATOR))));
        });
    }
    group.finish();
}

criterion_group!(benches, whole_matches, shots, views);
criterion_main!(benches);
