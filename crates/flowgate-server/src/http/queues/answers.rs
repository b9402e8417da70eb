//! What the queue routes answer, as types: each built from the queue's own values by borrowing
//! them, a payload answered as it was submitted ([`Payload`]).

use flowgate::queue::{DeadJob, Submitted};
use flowgate::queue::{Delivery, InstanceInfo, QueueSpec, instance_descriptor, instance_names};
use serde::Serialize;
use utoipa::ToSchema;

use super::super::payload::{self, Payload};
use super::super::verdict::Shown;

/// Milliseconds of microseconds.
fn ms(us: u64) -> u64 {
    us / 1000
}

/// One job submitted.
#[derive(Debug, Serialize, ToSchema)]
pub(in crate::http) struct SubmittedJob {
    /// Its id.
    id: u64,
    /// A job of the same `key` was there already: this is its id, nothing was stored.
    duplicate: bool,
    /// `ready`, `delayed`, `in_flight`, `dead` or `done`.
    state: &'static str,
    /// Its place in line (0: next), when waiting.
    position: Option<u64>,
    /// When it is released (Unix milliseconds), when known.
    release_at_ms: Option<u64>,
    /// In how long.
    release_in_ms: Option<u64>,
}

impl SubmittedJob {
    /// `s`, at `now` (µs).
    pub(in crate::http) fn of(s: &Submitted, now: u64) -> Self {
        SubmittedJob {
            id: s.id,
            duplicate: s.duplicate,
            state: s.state.as_str(),
            position: s.position,
            release_at_ms: s.release_at.map(ms),
            release_in_ms: s.release_at.map(|t| ms(t.saturating_sub(now))),
        }
    }
}

/// The answer to a submit: one job's (its fields at the top) or a batch's (`jobs`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub(in crate::http) enum SubmitAnswer {
    /// One job.
    One {
        /// The job.
        #[serde(flatten)]
        job: SubmittedJob,
        /// The queue instance's key.
        instance: String,
    },
    /// A batch, in the order submitted.
    Batch {
        /// The queue instance's key.
        instance: String,
        /// The jobs.
        jobs: Vec<SubmittedJob>,
    },
}

/// A job leased.
#[derive(Debug, Serialize, ToSchema)]
pub(in crate::http) struct Leased<'a> {
    /// Its id.
    id: u64,
    /// The delivery's token, for ack and nack.
    token: &'a str,
    /// Its attempt (1: the first).
    attempt: u32,
    /// The queue instance's key.
    instance: &'a str,
    /// When it was submitted (Unix milliseconds).
    submitted_at_ms: u64,
    /// When it was released.
    released_at_ms: u64,
    /// The same, in microseconds.
    released_at_us: u64,
    /// When the lease expires, and the job goes back in line.
    lease_deadline_ms: u64,
    /// Its payload, as submitted.
    #[serde(flatten)]
    payload: Payload<'a>,
}

impl<'a> Leased<'a> {
    pub(in crate::http) fn of(d: &'a Delivery) -> Self {
        Leased {
            id: d.id,
            token: &d.token,
            attempt: d.attempt,
            instance: &d.instance,
            submitted_at_ms: ms(d.submitted_at),
            released_at_ms: ms(d.released_at),
            released_at_us: d.released_at,
            lease_deadline_ms: ms(d.lease_deadline),
            payload: payload::answer(&d.payload),
        }
    }
}

/// A job acked.
#[derive(Debug, Serialize, ToSchema)]
pub(in crate::http) struct Acked {
    /// Always `true`.
    pub(in crate::http) acked: bool,
}

/// What a nack did.
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "state", rename_all = "snake_case")]
pub(in crate::http) enum NackAnswer {
    /// The job is retried.
    Retry {
        /// When (Unix milliseconds).
        retry_at_ms: u64,
        /// In how long.
        retry_in_ms: u64,
    },
    /// That was its last attempt: it is a dead letter.
    Dead,
}

impl NackAnswer {
    /// A retry at `at` (µs), at `now` (µs).
    pub(in crate::http) fn retry(at: u64, now: u64) -> Self {
        NackAnswer::Retry {
            retry_at_ms: ms(at),
            retry_in_ms: ms(at.saturating_sub(now)),
        }
    }
}

/// A declared queue.
#[derive(Debug, Serialize, ToSchema)]
pub(in crate::http) struct QueueInfo<'a> {
    /// Its domain.
    domain: &'a str,
    /// Its name.
    name: &'a str,
    /// Its descriptor pattern, one entry per element.
    #[serde(rename = "match")]
    pattern: Vec<String>,
    /// Its release rate (`"10/s"`).
    #[schema(value_type = String)]
    rate: Shown<flowgate::Quota>,
    /// Jobs released at once after a pause.
    burst: u64,
    /// The most jobs it holds.
    max_depth: u64,
    /// How long a lease lasts.
    lease_ms: u64,
    /// Attempts before a job is a dead letter.
    max_attempts: u32,
    /// The wait before a nacked job's next attempt.
    retry_backoff_ms: u64,
    /// The largest payload, in bytes.
    max_payload: usize,
    /// How long a job's `key` is remembered.
    key_retention_ms: u64,
}

impl<'a> QueueInfo<'a> {
    pub(in crate::http) fn of(s: &'a QueueSpec) -> Self {
        QueueInfo {
            domain: &s.domain,
            name: &s.name,
            pattern: s.pattern.iter().map(ToString::to_string).collect(),
            rate: Shown(s.rate()),
            burst: s.burst(),
            max_depth: s.max_depth(),
            lease_ms: ms(s.lease()),
            max_attempts: s.max_attempts(),
            retry_backoff_ms: ms(s.retry_backoff()),
            max_payload: s.max_payload(),
            key_retention_ms: ms(s.key_retention()),
        }
    }
}

/// A queue instance: its identity, and (declared) its bounds and figures.
#[derive(Debug, Serialize, ToSchema)]
pub(in crate::http) struct InstanceAnswer<'a> {
    /// The instance's key.
    instance: &'a str,
    /// Its queue's domain.
    domain: String,
    /// Its queue's name.
    queue: String,
    /// The descriptor of the instance.
    descriptor: String,
    /// Its queue is declared.
    declared: bool,
    /// Its queue was removed from the configuration (it drains, takes no submissions).
    retired: bool,
    /// The queue's release rate, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    rate: Option<Shown<flowgate::Quota>>,
    /// The queue's burst, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    burst: Option<u64>,
    /// The queue's bound on jobs, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    max_depth: Option<u64>,
    /// Its figures, when its queue is known.
    #[serde(flatten)]
    figures: Option<Figures>,
}

/// A queue instance's figures.
#[derive(Debug, Serialize, ToSchema)]
pub(in crate::http) struct Figures {
    /// Jobs held: waiting, in flight and dead.
    depth: u64,
    /// Jobs waiting: ready and delayed.
    waiting: u64,
    /// Jobs released and not leased.
    ready: u64,
    /// Jobs waiting for their release.
    delayed: u64,
    /// Jobs leased.
    in_flight: u64,
    /// Jobs holding a release slot.
    reserved: u64,
    /// Dead letters.
    dead: u64,
    /// The oldest waiting job's age; `null` when none waits.
    oldest_age_ms: Option<u64>,
    /// Deliveries per second over the recent releases; `null` when unknown.
    release_rate: Option<f64>,
    /// How long the waiting jobs take to be released, at the queue's rate.
    time_to_drain_ms: u64,
    /// In how long the next release slot comes.
    next_release_in_ms: u64,
    /// Jobs submitted since the instance began.
    submitted_total: u64,
    /// Jobs released.
    released_total: u64,
    /// Jobs acked.
    acked_total: u64,
    /// Jobs that became dead letters.
    dead_total: u64,
}

impl<'a> InstanceAnswer<'a> {
    pub(in crate::http) fn of(i: &'a InstanceInfo) -> Self {
        let (domain, queue) = instance_names(&i.instance).unwrap_or_default();
        let descriptor = instance_descriptor(&i.instance)
            .map(|d| d.to_string())
            .unwrap_or_default();
        let spec = i.spec.as_deref();
        let figures = match (&i.stats, spec) {
            (Some(s), Some(spec)) => Some(Figures {
                depth: s.depth(),
                waiting: s.waiting(),
                ready: s.ready,
                delayed: s.delayed,
                in_flight: s.in_flight,
                reserved: s.reserved,
                dead: s.dead,
                oldest_age_ms: s.oldest_age().map(ms),
                release_rate: i.release_rate,
                time_to_drain_ms: ms(s.time_to_drain(spec.spacing())),
                next_release_in_ms: ms(s.next_slot.saturating_sub(s.now)),
                submitted_total: s.submitted_total,
                released_total: s.released_total,
                acked_total: s.acked_total,
                dead_total: s.dead_total,
            }),
            _ => None,
        };
        InstanceAnswer {
            instance: &i.instance,
            domain,
            queue,
            descriptor,
            declared: spec.is_some() && !i.retired,
            retired: i.retired,
            rate: spec.map(|s| Shown(s.rate())),
            burst: spec.map(QueueSpec::burst),
            max_depth: spec.map(QueueSpec::max_depth),
            figures,
        }
    }
}

/// The queues and their instances.
#[derive(Debug, Serialize, ToSchema)]
pub(in crate::http) struct QueuesAnswer<'a> {
    /// The declared queues.
    pub(in crate::http) queues: Vec<QueueInfo<'a>>,
    /// Every instance with jobs or figures.
    pub(in crate::http) instances: Vec<InstanceAnswer<'a>>,
}

/// A dead letter.
#[derive(Debug, Serialize, ToSchema)]
pub(in crate::http) struct DeadLetter<'a> {
    /// Its id.
    id: u64,
    /// The attempts it had.
    attempts: u32,
    /// Its `key`, if it had one.
    key: Option<&'a str>,
    /// When it was submitted (Unix milliseconds).
    submitted_at_ms: u64,
    /// When it died.
    died_at_ms: u64,
    /// Its payload, as submitted.
    #[serde(flatten)]
    payload: Payload<'a>,
}

impl<'a> DeadLetter<'a> {
    pub(in crate::http) fn of(j: &'a DeadJob) -> Self {
        DeadLetter {
            id: j.id,
            attempts: j.attempts,
            key: j.key.as_deref(),
            submitted_at_ms: ms(j.submitted_at),
            died_at_ms: ms(j.died_at),
            payload: payload::answer(&j.payload),
        }
    }
}

/// Dead letters, oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub(in crate::http) struct DeadLetters<'a> {
    /// The dead letters.
    pub(in crate::http) jobs: Vec<DeadLetter<'a>>,
}

/// Dead letters put back in line.
#[derive(Debug, Serialize, ToSchema)]
pub(in crate::http) struct Requeued {
    /// How many.
    pub(in crate::http) requeued: u64,
}

/// Jobs deleted.
#[derive(Debug, Serialize, ToSchema)]
pub(in crate::http) struct Purged {
    /// How many.
    pub(in crate::http) purged: u64,
}
