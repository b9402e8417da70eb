//! The adaptive limits' side of the shared-state engine ([`crate::link`]): reports queued in
//! order, sent one script call per rule ([`RedisAdaptive::apply`]), and the limits of the keys in
//! use read back ([`RedisAdaptive::limits`]).

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::atomic::{AtomicBool, Ordering};

use flowgate_core::StoreError;
use flowgate_core::adaptive::{Aimd, AimdSpec};
use flowgate_redis::{AdaptiveReport, RedisAdaptive};
use parking_lot::Mutex;

use super::{MAX_QUEUED, State};
use crate::link::{Link, Read, Side, Unsent};

/// A report waiting for the next flush.
#[derive(Debug)]
pub(super) struct Queued {
    domain: String,
    rule: String,
    spec: AimdSpec,
    key: String,
    report: AdaptiveReport,
}

/// The reports waiting for the next flush, and whether a check used a key whose shared limit
/// was never read.
#[derive(Debug, Default)]
pub(super) struct Queue {
    reports: Mutex<Vec<Queued>>,
    unread: AtomicBool,
}

impl Queue {
    /// Queues a report; answers whether it was kept (false: [`MAX_QUEUED`] are waiting).
    pub(super) fn push(
        &self,
        domain: &str,
        rule: &str,
        spec: &AimdSpec,
        key: &str,
        report: AdaptiveReport,
    ) -> bool {
        let mut q = self.reports.lock();
        if q.len() >= MAX_QUEUED {
            return false;
        }
        q.push(Queued {
            domain: domain.to_owned(),
            rule: rule.to_owned(),
            spec: spec.clone(),
            key: key.to_owned(),
            report,
        });
        true
    }

    /// Asks for the keys never read to be read at the next flush.
    pub(super) fn ask_read(&self) {
        self.unread.store(true, Ordering::Relaxed);
    }
}

/// Keys of one rule under one set of parameters, each with its reports in order (or none,
/// for a read).
struct Group {
    domain: String,
    rule: String,
    spec: AimdSpec,
    keys: Vec<(String, Vec<AdaptiveReport>)>,
}

/// The place of the group of `(domain, rule, spec)` in `groups`, added when missing.
fn group(groups: &mut Vec<Group>, domain: &str, rule: &str, spec: &AimdSpec) -> usize {
    let at = groups
        .iter()
        .position(|g| g.domain == domain && g.rule == rule && &g.spec == spec);
    at.unwrap_or_else(|| {
        groups.push(Group {
            domain: domain.to_owned(),
            rule: rule.to_owned(),
            spec: spec.clone(),
            keys: Vec::new(),
        });
        groups.len() - 1
    })
}

/// A flush's or a read's answers for a group's keys.
enum Answers<'a> {
    /// A flush's: each key's limit after its reports, `None` when Redis refused the key.
    Flushed(&'a [Option<u64>]),
    /// A read's: each key's limit, `None` when Redis holds no state for it (the rule's start).
    Read(&'a [Option<u64>]),
}

impl State {
    /// The keys in use, by rule and parameters: all of them, or those never read yet.
    fn in_use(&self, all: bool) -> Vec<Group> {
        let mut groups = Vec::new();
        for (key, i) in self.instances.lock().iter() {
            if all || i.remote.is_none() {
                let g = group(&mut groups, &i.domain, &i.rule, i.aimd.spec());
                groups[g].keys.push((key.clone(), Vec::new()));
            }
        }
        groups
    }

    /// Sets the cached counts of `g`'s keys from Redis's answers.
    fn cache(&self, g: &Group, answers: Answers<'_>) {
        let start = Aimd::new(g.spec.clone()).limit();
        let (answers, flushed) = match answers {
            Answers::Flushed(a) => (a, true),
            Answers::Read(a) => (a, false),
        };
        let mut map = self.instances.lock();
        for ((key, _), a) in g.keys.iter().zip(answers) {
            let Some(inst) = map.get_mut(key) else {
                continue;
            };
            if !inst.is_of(&g.domain, &g.rule, &g.spec) {
                continue;
            }
            match (a, flushed) {
                (Some(n), _) => {
                    inst.remote = Some(*n);
                    if flushed {
                        inst.refused = false;
                    }
                }
                (None, true) => inst.refused = true,
                (None, false) => inst.remote = Some(start),
            }
        }
    }
}

impl Side for State {
    type Redis = RedisAdaptive;
    type Batch = Vec<Queued>;

    fn link(&self) -> &Link {
        &self.link
    }

    fn take(&self) -> (Vec<Queued>, u64) {
        let batch = std::mem::take(&mut *self.queue.reports.lock());
        let n = batch.len() as u64;
        (batch, n)
    }

    /// One call per rule, each key's reports in order; on a failure the rest is not sent.
    async fn flush(&self, redis: &RedisAdaptive, batch: Vec<Queued>) -> Result<(), Unsent> {
        let mut groups: Vec<Group> = Vec::new();
        // Where each key's reports are: (its group, its place in the group).
        let mut at: HashMap<(usize, String), usize> = HashMap::new();
        for q in batch {
            let gi = group(&mut groups, &q.domain, &q.rule, &q.spec);
            let g = &mut groups[gi];
            match at.entry((gi, q.key)) {
                Entry::Occupied(e) => g.keys[*e.get()].1.push(q.report),
                Entry::Vacant(e) => {
                    g.keys.push((e.key().1.clone(), vec![q.report]));
                    e.insert(g.keys.len() - 1);
                }
            }
        }
        for (i, g) in groups.iter().enumerate() {
            let refs: Vec<(&str, &[AdaptiveReport])> = g
                .keys
                .iter()
                .map(|(k, rs)| (k.as_str(), rs.as_slice()))
                .collect();
            match redis.apply(&g.domain, &g.rule, &g.spec, &refs).await {
                Ok(answers) => self.cache(g, Answers::Flushed(&answers)),
                Err(error) => {
                    let reports = groups[i..]
                        .iter()
                        .flat_map(|g| g.keys.iter())
                        .map(|(_, rs)| rs.len() as u64)
                        .sum();
                    return Err(Unsent { error, reports });
                }
            }
        }
        Ok(())
    }

    async fn read(&self, redis: &RedisAdaptive, what: Read) -> Result<bool, StoreError> {
        let groups = match what {
            Read::All => self.in_use(true),
            Read::New if self.queue.unread.swap(false, Ordering::Relaxed) => self.in_use(false),
            Read::New => return Ok(false),
        };
        if groups.is_empty() {
            return Ok(false);
        }
        for g in &groups {
            let keys: Vec<&str> = g.keys.iter().map(|(k, _)| k.as_str()).collect();
            let answers = redis.limits(&g.domain, &g.rule, &g.spec, &keys).await?;
            self.cache(g, Answers::Read(&answers));
        }
        Ok(true)
    }
}
