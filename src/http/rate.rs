//! One rate: a sustained count per period and a burst, shared by the request limiters
//! (`limits`) and the export byte budgets (`budget`).

use std::num::NonZeroU32;
use std::time::Duration;

use governor::Quota;

/// One limit: a sustained rate (`per_period` requests each `period`) and a burst.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rate {
    pub per_period: u32,
    pub period: Duration,
    pub burst: u32,
}

impl Rate {
    pub const fn per_minute(per_minute: u32, burst: u32) -> Self {
        Self {
            per_period: per_minute,
            period: Duration::from_secs(60),
            burst,
        }
    }

    pub const fn per_second(per_second: u32, burst: u32) -> Self {
        Self {
            per_period: per_second,
            period: Duration::from_secs(1),
            burst,
        }
    }

    pub(super) fn quota(self) -> Quota {
        let per_period = self.per_period.max(1);
        let interval = (self.period / per_period).max(Duration::from_nanos(1));
        let burst = NonZeroU32::new(self.burst.max(1)).unwrap_or(NonZeroU32::MIN);
        Quota::with_period(interval)
            .unwrap_or_else(|| Quota::per_second(NonZeroU32::MIN))
            .allow_burst(burst)
    }

    /// This rate `factor` times over (rate and burst).
    pub(super) fn times(self, factor: u32) -> Self {
        Self {
            per_period: self.per_period.saturating_mul(factor),
            burst: self.burst.saturating_mul(factor),
            ..self
        }
    }
}
