//! The measured release rate of each instance: samples of its release count (the store's, so
//! the whole cluster's releases) over the last minute.

use std::collections::{HashMap, VecDeque};

use flowgate_core::Micros;
use flowgate_core::queue::InstanceStats;

/// How far back the rate looks.
const WINDOW: Micros = 60_000_000;
/// The most instances tracked (beyond, the oldest-sampled are forgotten).
const MAX_INSTANCES: usize = 10_000;

/// Release-count samples per instance: `(store time, released_total)`.
#[derive(Default)]
pub(super) struct Meter {
    samples: HashMap<String, VecDeque<(Micros, u64)>>,
}

impl Meter {
    /// Records `stats` and answers the releases per second since the oldest sample of the last
    /// minute (`None` until two samples at least a second apart exist).
    pub(super) fn sample(&mut self, instance: &str, stats: &InstanceStats) -> Option<f64> {
        if !self.samples.contains_key(instance) && self.samples.len() >= MAX_INSTANCES {
            self.samples.clear();
        }
        let s = self.samples.entry(instance.to_owned()).or_default();
        let now = stats.now;
        if s.back().is_some_and(|&(t, _)| t > now) {
            s.clear(); // the store's clock stepped back
        }
        s.push_back((now, stats.released_total));
        while s.len() > 2 && s.front().is_some_and(|&(t, _)| now - t > WINDOW) {
            s.pop_front();
        }
        while s.len() > 120 {
            s.remove(1);
        }
        let &(t0, r0) = s.front()?;
        let span = now.checked_sub(t0)?;
        if span < 1_000_000 {
            return None;
        }
        Some(stats.released_total.saturating_sub(r0) as f64 * 1e6 / span as f64)
    }
}
