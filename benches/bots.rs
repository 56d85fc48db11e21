//! Bot strength: shots each level needs to sink a whole random fleet, per preset, over many
//! simulated games on the engine alone (no database, no HTTP). Prints mean, median, p95 and
//! worst per level.
//!
//! `cargo bench --bench bots` (optional: `BOTS_GAMES=10000` games per preset and level,
//! `BOTS_SEED=1`, `BOTS_PRESET=statki` and `BOTS_LEVEL=hard` to run one preset or level).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use rand::SeedableRng;
use rand::rngs::StdRng;
use statki::bot::Level;
use statki::bot::simulate::{play, rules};
use statki::engine::{HouseOptions, RuleSetId};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let games = env_or("BOTS_GAMES", 10_000);
    let seed = env_or("BOTS_SEED", 1);
    println!("games per preset and level: {games}, seed {seed}");
    println!(
        "{:<10} {:<7} {:>7} {:>7} {:>5} {:>6} {:>6} {:>10}",
        "preset", "level", "mean", "median", "p95", "best", "worst", "µs/game"
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
            // The same seed per preset and level: every level meets the same fleets.
            let mut rng = StdRng::seed_from_u64(seed);
            let started = Instant::now();
            let mut shots: Vec<u32> = (0..games)
                .map(|_| play(level, rules, &mut rng, |_, _| {}).expect("a legal game"))
                .collect();
            let elapsed = started.elapsed();
            shots.sort_unstable();
            let mean = shots.iter().map(|&s| f64::from(s)).sum::<f64>() / shots.len() as f64;
            let at = |q: f64| shots[((shots.len() as f64 - 1.0) * q).round() as usize];
            println!(
                "{:<10} {:<7} {:>7.2} {:>7} {:>5} {:>6} {:>6} {:>10.1}",
                ruleset.as_str(),
                level.as_str(),
                mean,
                at(0.5),
                at(0.95),
                shots[0],
                shots[shots.len() - 1],
                elapsed.as_secs_f64() * 1e6 / games as f64,
            );
        }
    }
}
