//! One rule's figures: cumulative counters and heavy-hitter summaries that decisions update
//! (relaxed atomic increments and one summary update, on a shard of their own thread), and what
//! the sampler makes of them each second (the per-second history and the recent summaries).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

use parking_lot::Mutex;

use super::sketch::Summary;
use crate::view::{Counts, RECENT_SECONDS};

/// Seconds of history kept (15 minutes).
pub const HISTORY_SECONDS: usize = 900;

/// Summary shards per outcome: decisions on different threads update different shards.
const SHARDS: usize = 4;

/// What a decision did under a rule, as counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Admitted.
    Admitted = 0,
    /// Rejected.
    Rejected = 1,
    /// Over the limit of a shadow rule (or under the global shadow switch): admitted.
    ShadowRejected = 2,
}

/// A summary on its own cache lines, so that shards updated by different cores do not share one.
#[repr(align(128))]
#[derive(Default)]
struct Shard(Mutex<Summary>);

#[derive(Default)]
struct Shards([Shard; SHARDS]);

thread_local! {
    /// This thread's shard.
    static SHARD: usize = {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        NEXT.fetch_add(1, Relaxed) % SHARDS
    };
}

impl Shards {
    fn add(&self, hash: u64, label: impl FnOnce() -> String) {
        let i = SHARD.with(|s| *s);
        self.0[i].0.lock().add(hash, 1, label);
    }

    /// The merge of every shard's summary since the last drain, leaving them empty.
    fn drain(&self) -> Summary {
        let taken: Vec<Summary> = self.0.iter().map(|s| s.0.lock().take()).collect();
        Summary::merge(taken.iter().filter(|s| !s.is_empty()))
    }
}

/// Per-second [`Counts`], the newest last.
#[derive(Clone, Debug, Default)]
pub struct History {
    /// The seconds, oldest first.
    pub seconds: VecDeque<Counts>,
    /// The Unix second of the newest (0 while empty).
    pub end: i64,
}

impl History {
    /// Records `counts` as second `at`; seconds skipped since the newest count as zero.
    pub fn push(&mut self, at: i64, counts: Counts) {
        if !self.seconds.is_empty() && at <= self.end {
            // A second already recorded (the clock stepped back): add to the newest.
            if let Some(last) = self.seconds.back_mut() {
                add(last, &counts);
            }
            return;
        }
        if !self.seconds.is_empty() {
            let gap = usize::try_from(at - self.end - 1).unwrap_or(0);
            for _ in 0..gap.min(HISTORY_SECONDS) {
                self.seconds.push_back(Counts::default());
            }
        }
        self.seconds.push_back(counts);
        self.end = at;
        while self.seconds.len() > HISTORY_SECONDS {
            self.seconds.pop_front();
        }
    }

    /// Adds `counts` to second `at`, wherever it falls: after the newest (as [`History::push`]),
    /// or among the seconds already recorded (counts that reached this history late, such as
    /// another node's after an outage), filling with zeros back to it; a second older than
    /// [`HISTORY_SECONDS`] before the newest is dropped.
    pub fn add(&mut self, at: i64, counts: Counts) {
        if self.seconds.is_empty() || at > self.end {
            self.push(at, counts);
            return;
        }
        let Ok(back) = usize::try_from(self.end - at) else {
            return;
        };
        if back >= HISTORY_SECONDS {
            return;
        }
        while self.seconds.len() <= back {
            self.seconds.push_front(Counts::default());
        }
        let i = self.seconds.len() - 1 - back;
        if let Some(c) = self.seconds.get_mut(i) {
            add(c, &counts);
        }
    }

    /// The last `n` seconds ending at `at` (zeros where none were recorded), oldest first.
    pub fn last(&self, n: usize, at: i64) -> Vec<Counts> {
        let mut out = vec![Counts::default(); n];
        for (i, c) in self.seconds.iter().rev().enumerate() {
            let second = self.end - i as i64;
            let back = at - second;
            if back < 0 {
                continue;
            }
            let Ok(back) = usize::try_from(back) else {
                break;
            };
            if back >= n {
                break;
            }
            out[n - 1 - back] = *c;
        }
        out
    }
}

/// `a += b`.
pub fn add(a: &mut Counts, b: &Counts) {
    a.admitted += b.admitted;
    a.rejected += b.rejected;
    a.shadow_rejected += b.shadow_rejected;
    a.trial_rejected += b.trial_rejected;
    a.failure_policy += b.failure_policy;
    a.circuit_open += b.circuit_open;
}

/// `a − b`, each field floored at 0.
pub fn minus(a: &Counts, b: &Counts) -> Counts {
    Counts {
        admitted: a.admitted.saturating_sub(b.admitted),
        rejected: a.rejected.saturating_sub(b.rejected),
        shadow_rejected: a.shadow_rejected.saturating_sub(b.shadow_rejected),
        trial_rejected: a.trial_rejected.saturating_sub(b.trial_rejected),
        failure_policy: a.failure_policy.saturating_sub(b.failure_policy),
        circuit_open: a.circuit_open.saturating_sub(b.circuit_open),
    }
}

/// What the sampler keeps of a rule between two seconds.
#[derive(Default)]
pub struct Sampled {
    /// The cumulative counts at the last sample.
    pub last: Counts,
    /// Per second.
    pub history: History,
    /// The last [`RECENT_SECONDS`] seconds' summaries of admitted and of rejected keys.
    recent: VecDeque<(Summary, Summary)>,
    /// Their merges: the recent window's heaviest admitted keys,
    pub top_admitted: Summary,
    /// and its heaviest rejected keys.
    pub top_rejected: Summary,
}

/// One rule's figures on this node.
#[derive(Default)]
pub struct RuleCell {
    /// Cumulative counts: admitted, rejected, shadow-rejected, trial-rejected, failure policy,
    /// refused by a circuit breaker.
    counts: [AtomicU64; 6],
    admitted: Shards,
    rejected: Shards,
    /// The sampler's.
    pub sampled: Mutex<Sampled>,
}

impl RuleCell {
    /// Counts a decision under the rule, and the key (`hash`, its text from `label`) it was for.
    #[inline]
    pub fn count(&self, outcome: Outcome, hash: u64, label: impl FnOnce() -> String) {
        self.counts[outcome as usize].fetch_add(1, Relaxed);
        match outcome {
            Outcome::Admitted => self.admitted.add(hash, label),
            Outcome::Rejected | Outcome::ShadowRejected => self.rejected.add(hash, label),
        }
    }

    /// Counts a would-be rejection of the rule's trial limit.
    #[inline]
    pub fn trial_rejected(&self) {
        self.counts[3].fetch_add(1, Relaxed);
    }

    /// Counts a decision taken by the rule's failure policy.
    #[inline]
    pub fn failure_policy(&self) {
        self.counts[4].fetch_add(1, Relaxed);
    }

    /// Counts a request the rule would have decided, refused by an open circuit breaker.
    pub fn circuit_open(&self) {
        self.counts[5].fetch_add(1, Relaxed);
    }

    /// The cumulative counts.
    pub fn totals(&self) -> Counts {
        let c = |i: usize| self.counts[i].load(Relaxed);
        Counts {
            admitted: c(0),
            rejected: c(1),
            shadow_rejected: c(2),
            trial_rejected: c(3),
            failure_policy: c(4),
            circuit_open: c(5),
        }
    }

    /// The bytes its summaries and history hold (bounded whatever the number of keys).
    #[cfg(test)]
    pub fn footprint(&self) -> usize {
        let shards: usize = [&self.admitted, &self.rejected]
            .iter()
            .flat_map(|s| s.0.iter())
            .map(|s| s.0.lock().footprint())
            .sum();
        let s = self.sampled.lock();
        shards
            + s.recent
                .iter()
                .map(|(a, r)| a.footprint() + r.footprint())
                .sum::<usize>()
            + s.top_admitted.footprint()
            + s.top_rejected.footprint()
            + s.history.seconds.capacity() * std::mem::size_of::<Counts>()
    }

    /// Closes second `at`: its counts into the history, its summaries into the recent window.
    pub fn sample(&self, at: i64) {
        let totals = self.totals();
        let admitted = self.admitted.drain();
        let rejected = self.rejected.drain();
        let mut s = self.sampled.lock();
        let second = minus(&totals, &s.last);
        s.last = totals;
        s.history.push(at, second);
        s.recent.push_back((admitted, rejected));
        while s.recent.len() > RECENT_SECONDS as usize {
            s.recent.pop_front();
        }
        s.top_admitted = Summary::merge(s.recent.iter().map(|r| &r.0));
        s.top_rejected = Summary::merge(s.recent.iter().map(|r| &r.1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admitted(n: u64) -> Counts {
        Counts {
            admitted: n,
            ..Counts::default()
        }
    }

    /// A million distinct keys, on four threads (every shard), admitted and rejected, over 15
    /// minutes of seconds: the rule's figures stay under 128 KiB.
    #[test]
    fn a_million_distinct_keys_keep_a_rule_under_128_kib() {
        let cell = std::sync::Arc::new(RuleCell::default());
        let mut most = 0;
        for second in 0..HISTORY_SECONDS as u64 + 5 {
            if second < 10 {
                std::thread::scope(|s| {
                    for t in 0..4u64 {
                        let cell = &cell;
                        s.spawn(move || {
                            for i in 0..25_000u64 {
                                let k = (second * 4 + t) * 25_000 + i;
                                let o = if k % 3 == 0 {
                                    Outcome::Rejected
                                } else {
                                    Outcome::Admitted
                                };
                                cell.count(o, k, || format!("client=c{k:07}, path=/v1/some/path"));
                            }
                        });
                    }
                });
            }
            most = most.max(cell.footprint());
            cell.sample(second as i64);
        }
        assert!(most < 128 * 1024, "{most} bytes");
        assert_eq!(cell.totals().admitted + cell.totals().rejected, 1_000_000);
    }

    #[test]
    fn history_fills_skipped_seconds_and_reads_a_window() {
        let mut h = History::default();
        h.push(100, admitted(1));
        h.push(101, admitted(2));
        h.push(104, admitted(5));
        let w = h.last(6, 105);
        let got: Vec<u64> = w.iter().map(|c| c.admitted).collect();
        assert_eq!(got, [1, 2, 0, 0, 5, 0]);
        // A second seen twice adds up.
        h.push(104, admitted(1));
        assert_eq!(h.last(1, 104)[0].admitted, 6);
    }

    #[test]
    fn history_adds_a_late_second_at_its_place() {
        let mut h = History::default();
        h.push(100, admitted(1));
        h.push(103, admitted(4));
        h.add(101, admitted(20));
        h.add(98, admitted(7));
        h.add(104, admitted(5));
        h.add(104, admitted(1));
        let got: Vec<u64> = h.last(7, 104).iter().map(|c| c.admitted).collect();
        assert_eq!(got, [7, 0, 1, 20, 0, 4, 6]);
        // Older than the history keeps: dropped.
        h.add(104 - HISTORY_SECONDS as i64, admitted(9));
        assert_eq!(h.seconds.len(), 7);
    }

    #[test]
    fn history_keeps_fifteen_minutes() {
        let mut h = History::default();
        for s in 0..2000 {
            h.push(s, admitted(1));
        }
        assert_eq!(h.seconds.len(), HISTORY_SECONDS);
        assert_eq!(h.last(HISTORY_SECONDS + 10, 1999)[9].admitted, 0);
    }

    #[test]
    fn a_cell_samples_each_second_and_keeps_the_recent_heavy_keys() {
        let cell = RuleCell::default();
        for _ in 0..7 {
            cell.count(Outcome::Rejected, 1, || "user=hot".into());
        }
        cell.count(Outcome::Admitted, 2, || "user=a".into());
        cell.trial_rejected();
        cell.sample(10);
        cell.count(Outcome::Admitted, 2, || "user=a".into());
        cell.sample(11);
        let s = cell.sampled.lock();
        let w = s.history.last(2, 11);
        assert_eq!(
            (w[0].admitted, w[0].rejected, w[0].trial_rejected),
            (1, 7, 1)
        );
        assert_eq!((w[1].admitted, w[1].rejected), (1, 0));
        assert_eq!(&*s.top_rejected.top(1)[0].label, "user=hot");
        assert_eq!(s.top_admitted.top(1)[0].count, 2);
    }
}
