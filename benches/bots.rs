//! Bot strength: shots each level needs to sink a whole random fleet, per preset, over many
//! simulated games on the engine alone (no database, no HTTP). Prints mean (with its
//! standard error), median, p95, best and worst per level.
//!
//! `cargo bench --bench bots` (optional: `BOTS_GAMES=10000` games per preset and level,
//! `BOTS_SEED=1`, `BOTS_PRESET=statki` and `BOTS_LEVEL=hard` to run one preset or level,
//! `BOTS_THREADS` to set how many games run at once; the results do not depend on it).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::num::NonZeroUsize;
use std::time::Instant;

use rand::SeedableRng;
use rand::rngs::StdRng;
use statki::bot::Level;
use statki::bot::simulate::{play, rules};
use statki::engine::{HouseOptions, MatchRules, RuleSetId};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Every game draws from its own generator, seeded from the run's seed and the game's
/// number: every level meets the same fleets, and the threads cannot change the outcome.
fn game_rng(seed: u64, game: u64) -> StdRng {
    StdRng::seed_from_u64((seed << 32) ^ game)
}

/// Shots of every game, in game order, played on `threads` threads.
fn shots_per_game(
    level: Level,
    rules: MatchRules,
    seed: u64,
    games: u64,
    threads: u64,
) -> Vec<u32> {
    let mut shots = vec![0u32; games as usize];
    std::thread::scope(|scope| {
        let chunk = games.div_ceil(threads).max(1) as usize;
        for (at, part) in shots.chunks_mut(chunk).enumerate() {
            scope.spawn(move || {
                for (offset, slot) in part.iter_mut().enumerate() {
                    let game = (at * chunk + offset) as u64;
                    let mut rng = game_rng(seed, game);
                    *slot = play(level, rules, &mut rng, |_, _| {}).expect("a legal game");
                }
            });
        }
    });
    shots
}

fn main() {
    let games = env_or("BOTS_GAMES", 10_000).max(1);
    let seed = env_or("BOTS_SEED", 1);
    let threads = env_or(
        "BOTS_THREADS",
        std::thread::available_parallelism().map_or(1, NonZeroUsize::get) as u64,
    )
    .max(1);
    println!("games per preset and level: {games}, seed {seed}, threads {threads}");
    println!(
        "{:<10} {:<7} {:>7} {:>6} {:>7} {:>5} {:>6} {:>6} {:>10}",
        "preset", "level", "mean", "±se", "median", "p95", "best", "worst", "µs/game"
    );
    let only: Option<String> = std::env::var("BOTS_PRESET").ok();
    for ruleset in RuleSetId::ALL {
        if only.as_deref().is_some_and(|only| only != ruleset.as_str()) {
            continue;
        }
        let rules = rules(ruleset, HouseOptions::default()).expect("preset rules");
        let levels: Vec<Level> = std::env::var("BOTS_LEVEL")
            .ok()
            .and_then(|l| Level::parse(&l))
            .map_or(Level::ALL.to_vec(), |l| vec![l]);
        for level in levels {
            let started = Instant::now();
            let mut shots = shots_per_game(level, rules, seed, games, threads);
            let elapsed = started.elapsed();
            shots.sort_unstable();
            let count = shots.len() as f64;
            let mean = shots.iter().map(|&s| f64::from(s)).sum::<f64>() / count;
            let variance = shots
                .iter()
                .map(|&s| (f64::from(s) - mean).powi(2))
                .sum::<f64>()
                / (count - 1.0).max(1.0);
            let standard_error = (variance / count).sqrt();
            let at = |q: f64| shots[((shots.len() as f64 - 1.0) * q).round() as usize];
            // Thread time per game: wall time spread over the threads that shared it.
            println!(
                "{:<10} {:<7} {:>7.2} {:>6.2} {:>7} {:>5} {:>6} {:>6} {:>10.1}",
                ruleset.as_str(),
                level.as_str(),
                mean,
                standard_error,
                at(0.5),
                at(0.95),
                shots[0],
                shots[shots.len() - 1],
                elapsed.as_secs_f64() * 1e6 * threads as f64 / games as f64,
            );
        }
    }
}
