//! Bot strength: shots each level needs to sink a whole random fleet, per preset, over many
//! simulated games on the engine alone (no database, no HTTP). Prints mean (with its
//! standard error), median, p95, best and worst per level.
//!
//! `cargo bench --bench bots` (optional: `BOTS_GAMES=10000` games per preset and level,
//! `BOTS_SEED=1`, `BOTS_PRESET=statki` and `BOTS_LEVEL=hard` to run one preset or level,
//! `BOTS_THREADS` to set how many games run at once; the results do not depend on it).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Instant;

use common::{env_or, game_rng, mean_and_standard_error, per_game, threads_from};
use statki::bot::Level;
use statki::bot::simulate::{play, rules};
use statki::engine::{HouseOptions, RuleSetId};

fn main() {
    let games = env_or("BOTS_GAMES", 10_000).max(1);
    let seed = env_or("BOTS_SEED", 1);
    let threads = threads_from("BOTS_THREADS");
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
            let mut shots = per_game(games, threads, |game| {
                play(level, rules, &mut game_rng(seed, game), |_, _| {}).expect("a legal game")
            });
            let elapsed = started.elapsed();
            shots.sort_unstable();
            let values: Vec<f64> = shots.iter().map(|&s| f64::from(s)).collect();
            let (mean, standard_error) = mean_and_standard_error(&values);
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
