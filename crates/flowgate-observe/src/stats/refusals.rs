//! Requests refused by each circuit breaker instance on this node, for its `refused_rate`:
//! counted as they are refused (a read lock and a relaxed increment; a write lock the first time
//! in a second that an instance refuses), closed each second into the recent window. On Redis
//! each node publishes its instances' sums over that window with its figures, and the cluster's
//! rate is their sum ([`super::cluster`]).
//!
//! Only refused requests pay for this: an admitted request never reaches it.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use parking_lot::{Mutex, RwLock};

use crate::view::RECENT_SECONDS;

/// The most instances counted on a node: in one second (beyond, a further instance's refusals
/// are not counted per instance; its rules count them still), and in the recent window (the
/// most refusing are kept).
pub(super) const MAX_INSTANCES: usize = flowgate::breakers::MAX_INSTANCES;

/// The most instances a node publishes to the cluster: the most refusing, as many as a view
/// lists.
pub(super) const MAX_PUBLISHED: usize = flowgate::breakers::MAX_VIEWS;

/// Maps by instance key (foldhash, as the breakers' own: the keys are clients' descriptors, and
/// the seed is random per map).
type ByKey<V> = HashMap<String, V, foldhash::fast::RandomState>;

/// One instance's refusals in each of the last [`RECENT_SECONDS`] closed seconds.
#[derive(Debug, Default)]
struct Recent {
    seconds: VecDeque<u64>,
    sum: u64,
}

impl Recent {
    fn push(&mut self, n: u64) {
        self.seconds.push_back(n);
        self.sum += n;
        while self.seconds.len() > RECENT_SECONDS as usize {
            self.sum -= self.seconds.pop_front().unwrap_or(0);
        }
    }
}

/// The refusals of each breaker instance on this node.
#[derive(Default)]
pub(super) struct Refusals {
    /// Refusals in the second being counted.
    counting: RwLock<ByKey<AtomicU64>>,
    /// The recent window, per instance with a refusal in it.
    recent: Mutex<ByKey<Recent>>,
}

impl Refusals {
    /// Counts a request refused by instance `key`.
    pub(super) fn count(&self, key: &str) {
        if let Some(n) = self.counting.read().get(key) {
            n.fetch_add(1, Relaxed);
            return;
        }
        let mut counting = self.counting.write();
        if counting.len() >= MAX_INSTANCES && !counting.contains_key(key) {
            return;
        }
        counting
            .entry(key.to_owned())
            .or_default()
            .fetch_add(1, Relaxed);
    }

    /// Closes a second: each instance's count into its recent window. An instance with no
    /// refusal in the window is forgotten.
    pub(super) fn sample(&self) {
        let mut second = std::mem::take(&mut *self.counting.write());
        let mut recent = self.recent.lock();
        for (key, r) in recent.iter_mut() {
            r.push(second.remove(key).map_or(0, AtomicU64::into_inner));
        }
        for (key, n) in second {
            let mut r = Recent::default();
            r.push(n.into_inner());
            recent.insert(key, r);
        }
        recent.retain(|_, r| r.sum > 0);
        if recent.len() > MAX_INSTANCES {
            let mut all: Vec<(String, Recent)> = recent.drain().collect();
            all.select_nth_unstable_by(MAX_INSTANCES - 1, |a, b| b.1.sum.cmp(&a.1.sum));
            all.truncate(MAX_INSTANCES);
            recent.extend(all);
        }
    }

    /// Instance `key`'s refusals over the recent window.
    pub(super) fn recent(&self, key: &str) -> u64 {
        self.recent.lock().get(key).map_or(0, |r| r.sum)
    }

    /// The refusals over the recent window of the [`MAX_PUBLISHED`] most refusing instances.
    pub(super) fn published(&self) -> Vec<(String, u64)> {
        let mut all: Vec<(String, u64)> = self
            .recent
            .lock()
            .iter()
            .map(|(k, r)| (k.clone(), r.sum))
            .collect();
        if all.len() > MAX_PUBLISHED {
            all.select_nth_unstable_by(MAX_PUBLISHED - 1, |a, b| b.1.cmp(&a.1));
            all.truncate(MAX_PUBLISHED);
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_counts_over_the_recent_window_then_is_forgotten() {
        let r = Refusals::default();
        for _ in 0..3 {
            r.count("pay:wpg:channel=WPG");
        }
        r.count("pay:wpg:channel=ADY");
        assert_eq!(
            r.recent("pay:wpg:channel=WPG"),
            0,
            "the second is not closed"
        );
        r.sample();
        r.count("pay:wpg:channel=WPG");
        r.sample();
        assert_eq!(r.recent("pay:wpg:channel=WPG"), 4);
        assert_eq!(r.recent("pay:wpg:channel=ADY"), 1);
        for _ in 0..RECENT_SECONDS - 2 {
            r.sample();
        }
        assert_eq!(r.recent("pay:wpg:channel=WPG"), 4, "still in the window");
        r.sample();
        assert_eq!(
            r.recent("pay:wpg:channel=WPG"),
            1,
            "the first second left it"
        );
        assert_eq!(r.recent("pay:wpg:channel=ADY"), 0);
        let mut published = r.published();
        published.sort();
        assert_eq!(published, [("pay:wpg:channel=WPG".to_owned(), 1)]);
        r.sample();
        assert!(r.published().is_empty(), "forgotten once out of the window");
    }

    #[test]
    fn instances_are_bounded() {
        let r = Refusals::default();
        for i in 0..MAX_INSTANCES + 10 {
            r.count(&format!("pay:wpg:channel={i}"));
        }
        r.count("pay:wpg:channel=0");
        r.sample();
        assert_eq!(r.recent.lock().len(), MAX_INSTANCES);
        assert_eq!(r.recent("pay:wpg:channel=0"), 2);
        assert_eq!(r.published().len(), MAX_PUBLISHED);
        assert_eq!(r.published().iter().map(|p| p.1).max(), Some(2));
    }
}
