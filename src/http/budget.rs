//! Byte budgets for exports: each caller, and each exported match or player, may take so
//! many bytes a second (with a burst). An export is charged what it actually sent, after it
//! was made, so a budget may run into debt by one export; a request that finds its budget
//! in debt is refused (`429`) before any work is done, and a player's streamed export
//! pauses between pages until its budgets are out of debt again.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use uuid::Uuid;

use super::rate::Rate;

/// One key's balance: bytes it may still take, refilled at the rate up to the burst.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    balance: f64,
    at: Instant,
}

/// Byte budgets of one kind (per caller, or per target), keyed by id.
#[derive(Debug)]
pub struct ByteBudget {
    rate: Rate,
    buckets: Mutex<HashMap<Uuid, Bucket>>,
}

/// Buckets are swept of full ones when the map holds this many.
const SWEEP_AT: usize = 4096;

impl ByteBudget {
    /// `rate.per_period` bytes each `rate.period`, `rate.burst` bytes at most in hand.
    pub fn new(rate: Rate) -> Self {
        Self {
            rate,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    pub fn rate(&self) -> Rate {
        self.rate
    }

    fn per_second(&self) -> f64 {
        f64::from(self.rate.per_period.max(1)) / self.rate.period.as_secs_f64().max(1e-3)
    }

    fn burst(&self) -> f64 {
        f64::from(self.rate.burst.max(1))
    }

    /// The bucket of `key` as of `now`, refilled.
    fn refilled(&self, bucket: Option<Bucket>, now: Instant) -> Bucket {
        match bucket {
            None => Bucket {
                balance: self.burst(),
                at: now,
            },
            Some(bucket) => Bucket {
                balance: (bucket.balance
                    + self.per_second() * now.duration_since(bucket.at).as_secs_f64())
                .min(self.burst()),
                at: now,
            },
        }
    }

    /// How long `key` must wait until it is out of debt; `None` when it may take bytes now.
    pub fn wait(&self, key: Uuid) -> Option<Duration> {
        let now = Instant::now();
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let bucket = self.refilled(buckets.get(&key).copied(), now);
        buckets.insert(key, bucket);
        (bucket.balance <= 0.0).then(|| {
            Duration::from_secs_f64((-bucket.balance + 1.0) / self.per_second())
                .max(Duration::from_millis(1))
        })
    }

    /// Charges `bytes` to `key` (its balance may go below zero).
    pub fn spend(&self, key: Uuid, bytes: usize) {
        let now = Instant::now();
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let mut bucket = self.refilled(buckets.get(&key).copied(), now);
        bucket.balance -= bytes as f64;
        buckets.insert(key, bucket);
        if buckets.len() >= SWEEP_AT {
            let burst = self.burst();
            let per_second = self.per_second();
            buckets.retain(|_, bucket| {
                bucket.balance + per_second * now.duration_since(bucket.at).as_secs_f64() < burst
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_runs_into_debt_once_and_then_refuses_until_repaid() {
        let budget = ByteBudget::new(Rate::per_second(1000, 4000));
        let key = Uuid::new_v4();
        assert_eq!(budget.wait(key), None);
        budget.spend(key, 10_000);
        let wait = budget.wait(key).expect("in debt");
        assert!(
            wait > Duration::from_secs(5) && wait < Duration::from_secs(7),
            "{wait:?}"
        );
        assert_eq!(
            budget.wait(Uuid::new_v4()),
            None,
            "another key is untouched"
        );
    }
}
