//! How much better than the hard level's greedy choice a far larger decision budget plays
//! on `statki`: one step of policy improvement by rollouts, paired with plain hard play on
//! the same fleets. An experiment that bounds what the hard level could gain, not a level.
//!
//! For a shot the rollout player draws `ROLLOUT_SAMPLES` whole fleets consistent with its
//! view, takes the `ROLLOUT_CANDIDATES` best cells, and for each candidate plays the rest of
//! the game with the hard level on every drawn fleet (the same fleets and the same random
//! draws for every candidate); it shoots the candidate with the fewest shots on average.
//! Both players meet the same `ROLLOUT_GAMES` random fleets, so the printed difference is
//! paired.
//!
//! `cargo bench --bench bot_rollouts`, with optional settings:
//! - `ROLLOUT_GAMES=400`, `ROLLOUT_SAMPLES=200`, `ROLLOUT_CANDIDATES=5`, `ROLLOUT_SEED=1`,
//!   `ROLLOUT_THREADS` (the results do not depend on it);
//! - `ROLLOUT_WHEN=hunting` (only shots with no open hit are rolled out; the hard level
//!   takes the others) or `always`;
//! - `ROLLOUT_RANK=density` (candidates are the densest cells by the hard level's own
//!   count) or `draws` (the cells most drawn fleets cover);
//! - `ROLLOUT_DRAWS=placement` (each fleet drawn ship by ship, longest first, uniformly on
//!   the room left, like the service places fleets) or `uniform` (weighted to be uniform
//!   over consistent fleets);
//! - `ROLLOUT_CONTROL=random`: no rollouts, any candidate at random (what noise alone costs).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use statki::bot::sea::Position;
use statki::bot::strategy::choose_on;
use statki::bot::{Level, Sea, random_fleet};
use statki::engine::{BOARD_SIZE, Cell, CellSet, RuleSet, RuleSetId};

use common::{env_or, game_rng, mean_and_standard_error, per_game, threads_from};

const CELLS: usize = (BOARD_SIZE as usize) * (BOARD_SIZE as usize);

/// The rollout player's settings, read once from the environment.
#[derive(Clone, Copy)]
struct Config {
    samples: usize,
    candidates: usize,
    hunting_only: bool,
    rank_by_density: bool,
    uniform_draws: bool,
    random_control: bool,
}

impl Config {
    fn from_env() -> Self {
        let is = |name: &str, value: &str| std::env::var(name).is_ok_and(|v| v == value);
        Config {
            samples: env_or("ROLLOUT_SAMPLES", 200).max(2) as usize,
            candidates: env_or("ROLLOUT_CANDIDATES", 5).max(1) as usize,
            hunting_only: !is("ROLLOUT_WHEN", "always"),
            rank_by_density: !is("ROLLOUT_RANK", "draws"),
            uniform_draws: is("ROLLOUT_DRAWS", "uniform"),
            random_control: is("ROLLOUT_CONTROL", "random"),
        }
    }
}

/// The hidden fleet: each ship's cells.
#[derive(Clone)]
struct Hidden {
    ships: Vec<CellSet>,
}

impl Hidden {
    fn occupied(&self) -> CellSet {
        self.ships
            .iter()
            .fold(CellSet::EMPTY, |all, ship| all.union(*ship))
    }
}

fn fresh_sea(rules: &'static RuleSet) -> Sea {
    let mut remaining: Vec<u8> = rules.fleet.iter().map(|ship| ship.length).collect();
    remaining.sort_unstable_by(|a, b| b.cmp(a));
    Sea {
        rules,
        tried: CellSet::EMPTY,
        open_hits: CellSet::EMPTY,
        blocked: CellSet::EMPTY,
        remaining,
    }
}

/// What `statki` tells the shooter of a shot at `cell`: a miss, a hit, or a sunk ship and
/// its cells (ships may touch, so nothing else is revealed).
/// Rollouts start from drawn fleets in mid-game, which no engine `Match` can be built at, and
/// run millions of shots; so this restates `statki`'s answer on the bot's own [`Sea`]. The
/// plain hard figure printed beside the rollouts matches the engine-based `bots` bench.
fn fire(sea: &mut Sea, hidden: &Hidden, cell: Cell) {
    sea.tried.insert(cell);
    let Some(ship) = hidden.ships.iter().find(|ship| ship.contains(cell)) else {
        sea.blocked.insert(cell);
        return;
    };
    if ship.is_subset_of(sea.tried) {
        sea.open_hits = sea.open_hits.minus(*ship);
        sea.blocked = sea.blocked.union(*ship);
        let length = ship.len() as u8;
        if let Some(at) = sea.remaining.iter().position(|&l| l == length) {
            sea.remaining.remove(at);
        }
    } else {
        sea.open_hits.insert(cell);
    }
}

/// Plays from `sea` until `hidden` is sunk, shooting where `choose` says; returns the shots.
fn play_out(mut sea: Sea, hidden: &Hidden, mut choose: impl FnMut(&Sea) -> Option<Cell>) -> u32 {
    let mut shots = 0;
    while !sea.remaining.is_empty() {
        let cell = choose(&sea).expect("a cell to shoot");
        fire(&mut sea, hidden, cell);
        shots += 1;
    }
    shots
}

/// Plays the hard level from `sea` until `hidden` is sunk; returns the shots it took.
fn finish_hard(sea: Sea, hidden: &Hidden, rng: &mut impl Rng) -> u32 {
    play_out(sea, hidden, |sea| choose_on(Level::Hard, sea, rng))
}

/// Legal positions of each remaining ship (longest first): covering no blocked cell and not
/// wholly on open hits (such a ship would already be sunk).
fn legal_positions(sea: &Sea) -> Vec<Vec<Position>> {
    sea.remaining
        .iter()
        .map(|&length| {
            sea.positions(length)
                .filter(|p| !p.cells.is_subset_of(sea.open_hits))
                .collect()
        })
        .collect()
}

/// The `pick`-th position of `positions` clear of `taken` and through `through` (if any),
/// or how many there are when `pick` is past the end.
fn nth_clear(
    positions: &[Position],
    taken: CellSet,
    through: Option<Cell>,
    pick: Option<usize>,
) -> Result<CellSet, usize> {
    let mut count = 0;
    for position in positions {
        if position.cells.intersects(taken) || through.is_some_and(|c| !position.cells.contains(c))
        {
            continue;
        }
        if pick == Some(count) {
            return Ok(position.cells);
        }
        count += 1;
    }
    Err(count)
}

/// A fleet of the remaining ships consistent with `sea`, and its weight. Open hits are
/// covered first (the lowest uncovered hit by any unplaced ship and position through it),
/// then the other ships are placed longest first, uniformly on the room left. Each hit step
/// multiplies the weight by its number of choices, and with `uniform` so does each later
/// step, which makes weighted draws uniform over consistent fleets; without it, fleets
/// with no open hit are drawn the way the service places them. `None` on a dead end.
fn sample_fleet(
    sea: &Sea,
    legal: &[Vec<Position>],
    uniform: bool,
    rng: &mut impl Rng,
) -> Option<(Hidden, f64)> {
    let mut taken = CellSet::EMPTY;
    let mut placed: Vec<Option<CellSet>> = vec![None; legal.len()];
    let mut weight = 1.0f64;
    while let Some(hit) = sea.open_hits.minus(taken).iter().next() {
        let counts: Vec<usize> = legal
            .iter()
            .zip(&placed)
            .map(|(positions, placed)| match placed {
                Some(_) => 0,
                None => nth_clear(positions, taken, Some(hit), None).unwrap_err(),
            })
            .collect();
        let total: usize = counts.iter().sum();
        if total == 0 {
            return None;
        }
        weight *= total as f64;
        let mut pick = rng.random_range(0..total);
        let ship = counts
            .iter()
            .position(|&count| {
                if pick < count {
                    true
                } else {
                    pick -= count;
                    false
                }
            })
            .expect("a ship for the pick");
        let cells = nth_clear(&legal[ship], taken, Some(hit), Some(pick)).ok()?;
        taken = taken.union(cells);
        placed[ship] = Some(cells);
    }
    for (ship, positions) in legal.iter().enumerate() {
        if placed[ship].is_some() {
            continue;
        }
        let count = nth_clear(positions, taken, None, None).unwrap_err();
        if count == 0 {
            return None;
        }
        if uniform {
            weight *= count as f64;
        }
        let cells = nth_clear(positions, taken, None, Some(rng.random_range(0..count))).ok()?;
        taken = taken.union(cells);
        placed[ship] = Some(cells);
    }
    let ships = placed.into_iter().collect::<Option<Vec<_>>>()?;
    Some((Hidden { ships }, weight))
}

/// The hard level's hunting density: for each open cell, the legal positions of the remaining
/// ships through it. Exact, so free of the draws' noise.
fn hunting_density(sea: &Sea, open: CellSet) -> [f64; CELLS] {
    let mut density = [0f64; CELLS];
    for &length in &sea.remaining {
        for position in sea.positions(length) {
            for cell in position.cells.intersection(open).iter() {
                density[cell.index() as usize] += 1.0;
            }
        }
    }
    density
}

/// For each open cell, the weight of the drawn fleets that cover it.
fn drawn_coverage(fleets: &[(Hidden, f64)], open: CellSet) -> [f64; CELLS] {
    let mut covered = [0f64; CELLS];
    for (fleet, weight) in fleets {
        for cell in fleet.occupied().intersection(open).iter() {
            covered[cell.index() as usize] += weight;
        }
    }
    covered
}

/// The rollout player's shot: see the module's description.
fn choose_by_rollouts(sea: &Sea, config: Config, rng: &mut StdRng) -> Option<Cell> {
    if config.hunting_only && !sea.open_hits.is_empty() {
        return choose_on(Level::Hard, sea, rng);
    }
    let legal = legal_positions(sea);
    let fleets: Vec<(Hidden, f64)> = (0..config.samples * 2)
        .filter_map(|_| sample_fleet(sea, &legal, config.uniform_draws, rng))
        .take(config.samples)
        .collect();
    if fleets.len() < config.samples / 2 {
        return choose_on(Level::Hard, sea, rng);
    }
    let open = sea.tried.complement();
    let covered = if config.rank_by_density && sea.open_hits.is_empty() {
        hunting_density(sea, open)
    } else {
        drawn_coverage(&fleets, open)
    };
    let mut ranked: Vec<Cell> = open
        .iter()
        .filter(|cell| covered[cell.index() as usize] > 0.0)
        .collect();
    ranked.sort_by(|a, b| covered[b.index() as usize].total_cmp(&covered[a.index() as usize]));
    ranked.truncate(config.candidates);
    if ranked.len() <= 1 {
        return ranked.first().copied();
    }
    if config.random_control {
        return ranked.get(rng.random_range(0..ranked.len())).copied();
    }
    let seeds: Vec<u64> = fleets.iter().map(|_| rng.random()).collect();
    let expected = |candidate: Cell| -> f64 {
        fleets
            .iter()
            .zip(&seeds)
            .map(|((fleet, weight), &seed)| {
                let mut after = sea.clone();
                fire(&mut after, fleet, candidate);
                let shots = 1 + finish_hard(after, fleet, &mut StdRng::seed_from_u64(seed));
                weight * f64::from(shots)
            })
            .sum()
    };
    ranked
        .into_iter()
        .map(|candidate| (candidate, expected(candidate)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(candidate, _)| candidate)
}

fn main() {
    let games = env_or("ROLLOUT_GAMES", 400).max(2);
    let config = Config::from_env();
    let seed = env_or("ROLLOUT_SEED", 1);
    let threads = threads_from("ROLLOUT_THREADS");
    let rules = RuleSetId::Statki.rules();
    println!(
        "statki: {games} games, {} drawn fleets and {} candidates per shot ({}, ranked by {}, \
         {} draws{}), seed {seed}, {threads} threads",
        config.samples,
        config.candidates,
        if config.hunting_only {
            "hunting only"
        } else {
            "every shot"
        },
        if config.rank_by_density {
            "density"
        } else {
            "draws"
        },
        if config.uniform_draws {
            "uniform"
        } else {
            "placement"
        },
        if config.random_control {
            ", random control"
        } else {
            ""
        },
    );
    let started = Instant::now();
    let results = per_game(games, threads, |game| {
        let mut rng = game_rng(seed, game);
        let placements = random_fleet(rules, &mut rng);
        let hidden = Hidden {
            ships: placements
                .iter()
                .zip(rules.fleet)
                .map(|(placement, ship)| placement.cells(ship.length).expect("a legal fleet"))
                .collect(),
        };
        let mut greedy_rng = StdRng::seed_from_u64(rng.random());
        let mut rollout_rng = StdRng::seed_from_u64(rng.random());
        let greedy = finish_hard(fresh_sea(rules), &hidden, &mut greedy_rng);
        let rollout = play_out(fresh_sea(rules), &hidden, |sea| {
            choose_by_rollouts(sea, config, &mut rollout_rng)
        });
        (greedy, rollout)
    });
    let column = |of: fn(&(u32, u32)) -> f64| -> Vec<f64> { results.iter().map(of).collect() };
    let (greedy_mean, greedy_se) = mean_and_standard_error(&column(|r| f64::from(r.0)));
    let (rollout_mean, rollout_se) = mean_and_standard_error(&column(|r| f64::from(r.1)));
    let (diff_mean, diff_se) =
        mean_and_standard_error(&column(|r| f64::from(r.1) - f64::from(r.0)));
    println!("hard (greedy)  mean {greedy_mean:.2} ± {greedy_se:.2}");
    println!("rollouts       mean {rollout_mean:.2} ± {rollout_se:.2}");
    println!("paired difference (rollouts − hard) {diff_mean:+.2} ± {diff_se:.2}");
    println!(
        "{:.1} s in all, {:.0} ms per rollout game (thread time)",
        started.elapsed().as_secs_f64(),
        started.elapsed().as_secs_f64() * 1e3 * threads as f64 / games as f64
    );
}
