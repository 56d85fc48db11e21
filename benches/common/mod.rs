//! What the bot benchmarks share: their settings from the environment, one generator per
//! game, games spread over threads, and the mean with its standard error.

use std::num::NonZeroUsize;

use rand::SeedableRng;
use rand::rngs::StdRng;

pub fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// How many games run at once: `variable` when set, else one per core.
pub fn threads_from(variable: &str) -> u64 {
    env_or(
        variable,
        std::thread::available_parallelism().map_or(1, NonZeroUsize::get) as u64,
    )
    .max(1)
}

/// Every game draws from its own generator, seeded from the run's seed and the game's
/// number: every player meets the same fleets, and the threads cannot change the outcome.
pub fn game_rng(seed: u64, game: u64) -> StdRng {
    StdRng::seed_from_u64((seed << 32) ^ game)
}

/// `play` of every game `0..games`, in game order, played on `threads` threads.
pub fn per_game<T: Clone + Default + Send>(
    games: u64,
    threads: u64,
    play: impl Fn(u64) -> T + Sync,
) -> Vec<T> {
    let mut results = vec![T::default(); games as usize];
    let play = &play;
    std::thread::scope(|scope| {
        let chunk = games.div_ceil(threads).max(1) as usize;
        for (at, part) in results.chunks_mut(chunk).enumerate() {
            scope.spawn(move || {
                for (offset, slot) in part.iter_mut().enumerate() {
                    *slot = play((at * chunk + offset) as u64);
                }
            });
        }
    });
    results
}

/// The mean of `values` and its standard error.
pub fn mean_and_standard_error(values: &[f64]) -> (f64, f64) {
    let count = values.len() as f64;
    let mean = values.iter().sum::<f64>() / count;
    let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (count - 1.0).max(1.0);
    (mean, (variance / count).sqrt())
}
