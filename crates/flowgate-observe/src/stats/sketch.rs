//! A Space-Saving heavy-hitter summary (Metwally, Agrawal and El Abbadi, 2005): at most
//! [`CAPACITY`] counters, whatever the number of distinct keys. A key not held takes the place of
//! the smallest counter and inherits its count as its possible over-count (`error`), so a held
//! count is an upper bound of the key's true count, at most `error` over it, and every key whose
//! true count exceeds the total ÷ [`CAPACITY`] is held. Summaries merge by adding counts (as the
//! nodes' summaries are merged into the cluster's).
//!
//! Written here rather than taken from a crate: a decision updates it on the hot path, so it is
//! keyed by a 64-bit hash of the state key the limiter already built, and the descriptor's text is
//! made only when a key enters the summary; the sketch crates (`topk`, `heavykeeper`) key by the
//! item itself, which would format and allocate the descriptor on every decision.

/// Counters per summary.
pub const CAPACITY: usize = 32;

/// One counted key.
#[derive(Clone, Debug, PartialEq)]
pub struct Counter {
    /// The key's hash.
    pub hash: u64,
    /// The key's text (its descriptor).
    pub label: Box<str>,
    /// Its count: at least its true count, at most `error` more.
    pub count: u64,
    /// The most `count` may exceed the true count.
    pub error: u64,
}

/// A Space-Saving summary of at most [`CAPACITY`] counters.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    counters: Vec<Counter>,
}

impl Summary {
    /// Counts `n` for the key hashed `hash`; `label` makes its text when it enters the summary.
    pub fn add(&mut self, hash: u64, n: u64, label: impl FnOnce() -> String) {
        if let Some(c) = self.counters.iter_mut().find(|c| c.hash == hash) {
            c.count += n;
            return;
        }
        if self.counters.len() < CAPACITY {
            self.counters.push(Counter {
                hash,
                label: label().into_boxed_str(),
                count: n,
                error: 0,
            });
            return;
        }
        if let Some(min) = self.counters.iter_mut().min_by_key(|c| c.count) {
            let floor = min.count;
            *min = Counter {
                hash,
                label: label().into_boxed_str(),
                count: floor + n,
                error: floor,
            };
        }
    }

    /// Takes the counters, leaving the summary empty.
    pub fn take(&mut self) -> Summary {
        std::mem::take(self)
    }

    /// Whether no key was counted.
    pub fn is_empty(&self) -> bool {
        self.counters.is_empty()
    }

    /// The counters, in no order.
    pub fn counters(&self) -> &[Counter] {
        &self.counters
    }

    /// The smallest count a key not held may have reached (0 while the summary has room).
    fn floor(&self) -> u64 {
        if self.counters.len() < CAPACITY {
            0
        } else {
            self.counters.iter().map(|c| c.count).min().unwrap_or(0)
        }
    }

    /// The merge of `summaries`: counts and errors added; a key absent from a full summary may
    /// have reached that summary's floor there, which is added to its error (and its count, so
    /// the count stays an upper bound). The largest [`CAPACITY`] are kept.
    pub fn merge<'a>(summaries: impl IntoIterator<Item = &'a Summary>) -> Summary {
        let summaries: Vec<&Summary> = summaries.into_iter().collect();
        let mut out: Vec<Counter> = Vec::new();
        for (i, s) in summaries.iter().enumerate() {
            for c in &s.counters {
                if out.iter().any(|o| o.hash == c.hash) {
                    continue;
                }
                let mut merged = c.clone();
                for (j, other) in summaries.iter().enumerate() {
                    if j == i {
                        continue;
                    }
                    match other.counters.iter().find(|o| o.hash == c.hash) {
                        // Counted once, from the first summary holding it.
                        Some(o) if j > i => {
                            merged.count += o.count;
                            merged.error += o.error;
                        }
                        Some(_) => {}
                        None => {
                            let floor = other.floor();
                            merged.count += floor;
                            merged.error += floor;
                        }
                    }
                }
                out.push(merged);
            }
        }
        out.sort_by(|a, b| b.count.cmp(&a.count).then(a.label.cmp(&b.label)));
        out.truncate(CAPACITY);
        Summary { counters: out }
    }

    /// A summary of these counters (as read from another node).
    pub fn from_counters(mut counters: Vec<Counter>) -> Summary {
        counters.sort_by_key(|c| std::cmp::Reverse(c.count));
        counters.truncate(CAPACITY);
        Summary { counters }
    }

    /// The bytes it holds: its counters and their texts.
    #[cfg(test)]
    pub fn footprint(&self) -> usize {
        self.counters.capacity() * std::mem::size_of::<Counter>()
            + self.counters.iter().map(|c| c.label.len()).sum::<usize>()
    }

    /// The `n` heaviest counters, heaviest first.
    pub fn top(&self, n: usize) -> Vec<&Counter> {
        let mut all: Vec<&Counter> = self.counters.iter().collect();
        all.sort_by(|a, b| b.count.cmp(&a.count).then(a.label.cmp(&b.label)));
        all.truncate(n);
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn add(s: &mut Summary, key: u64) {
        s.add(key, 1, || format!("k{key}"));
    }

    #[test]
    fn a_million_distinct_keys_hold_at_most_capacity_counters() {
        let mut s = Summary::default();
        for k in 0..1_000_000u64 {
            add(&mut s, k);
            if k % 10 == 0 {
                add(&mut s, u64::MAX);
            }
        }
        assert_eq!(s.counters().len(), CAPACITY);
        let top = s.top(1);
        assert_eq!(&*top[0].label, format!("k{}", u64::MAX));
    }

    proptest! {
        /// A count is at least the key's true count and at most its error over it, merged or
        /// not; a key over (parts + 1) × total ÷ capacity is held after the merge (the sum of
        /// the merged estimates is at most (parts + 1) × total).
        #[test]
        fn counts_are_bounded_and_heavy_keys_held(
            streams in proptest::collection::vec(
                proptest::collection::vec(0u64..200, 0..3000), 1..4),
        ) {
            let mut truth = std::collections::HashMap::<u64, u64>::new();
            let mut parts = Vec::new();
            for stream in &streams {
                let mut s = Summary::default();
                for &k in stream {
                    // Skewed: small keys come far more often.
                    let k = k % (1 + k % 17);
                    add(&mut s, k);
                    *truth.entry(k).or_default() += 1;
                }
                parts.push(s);
            }
            let total: u64 = truth.values().sum();
            let merged = Summary::merge(&parts);
            for (k, &n) in &truth {
                let held = merged.counters().iter().find(|c| c.hash == *k);
                if n * CAPACITY as u64 > total * (parts.len() as u64 + 1) {
                    prop_assert!(held.is_some(), "key {k} counted {n} of {total} is not held");
                }
                if let Some(c) = held {
                    prop_assert!(c.count >= n, "key {k}: count {} under truth {n}", c.count);
                    prop_assert!(c.count - c.error <= n, "key {k}: error {} too small", c.error);
                }
            }
        }
    }
}
