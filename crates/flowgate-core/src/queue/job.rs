//! Jobs and the answers of a queue's operations.

use std::fmt;
use std::str::FromStr;

use crate::clock::Micros;
use crate::store::StoreError;

/// A job to submit.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NewJob {
    /// Opaque bytes (the HTTP API stores the JSON text of `payload`).
    pub payload: Vec<u8>,
    /// An idempotency key: submitting it again while its job exists (or within the queue's
    /// `key_retention` after it finished) answers the existing job, never a second one. An
    /// empty key is no key.
    pub key: Option<String>,
    /// Not released before this instant (µs since the epoch).
    pub not_before: Option<Micros>,
}

impl NewJob {
    /// A job with this payload, no key, released as soon as its turn comes.
    pub fn new(payload: impl Into<Vec<u8>>) -> Self {
        Self {
            payload: payload.into(),
            key: None,
            not_before: None,
        }
    }

    /// Its idempotency key, if it has one (an empty key is none, in every store).
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref().filter(|k| !k.is_empty())
    }

    /// With an idempotency key.
    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// Not released before `at` (µs since the epoch).
    pub fn not_before(mut self, at: Micros) -> Self {
        self.not_before = Some(at);
        self
    }
}

/// A submitted job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Submitted {
    /// The job's id, unique in its queue instance. Ids grow in submission order: job `i` of a
    /// batch gets the batch's first id plus `i`, so a duplicate's place in a batch with new jobs
    /// leaves its number unused.
    pub id: u64,
    /// Whether the key named an existing job (nothing was stored).
    pub duplicate: bool,
    /// Where the job is now (for a duplicate: the existing job's state).
    pub state: JobStatus,
    /// Ready jobs ahead of it (a ready job only).
    pub position: Option<u64>,
    /// The estimated release instant (a ready or delayed job only): the next free slot plus one
    /// spacing per job ahead, or its `not_before` (retry time) if later. An estimate: retries
    /// and new bursts move it.
    pub release_at: Option<Micros>,
}

impl Submitted {
    /// A new job ready at `position` (jobs ahead of it): released an estimated `position`
    /// spacings after `first_slot`, the next free slot.
    pub fn ready(id: u64, position: u64, first_slot: Micros, spacing: Micros) -> Self {
        Self {
            id,
            duplicate: false,
            state: JobStatus::Ready,
            position: Some(position),
            release_at: Some(first_slot.saturating_add(position.saturating_mul(spacing))),
        }
    }

    /// A new job delayed until `at`.
    pub fn delayed(id: u64, at: Micros) -> Self {
        Self {
            id,
            duplicate: false,
            state: JobStatus::Delayed,
            position: None,
            release_at: Some(at),
        }
    }

    /// A duplicate of job `id`, whose state is not known yet (`Done` until described).
    pub fn duplicate_of(id: u64) -> Self {
        Self {
            id,
            duplicate: true,
            state: JobStatus::Done,
            position: None,
            release_at: None,
        }
    }
}

/// Where a job is, as a submit answers it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobStatus {
    /// Waiting for its release slot.
    Ready,
    /// Waiting for its `not_before` or its retry time.
    Delayed,
    /// Leased to a worker (or reserved for one, its slot ahead).
    InFlight,
    /// In the dead letters.
    Dead,
    /// Finished (acked); its key is remembered for the queue's `key_retention`.
    Done,
}

impl JobStatus {
    /// Its name in the HTTP API.
    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Ready => "ready",
            JobStatus::Delayed => "delayed",
            JobStatus::InFlight => "in_flight",
            JobStatus::Dead => "dead",
            JobStatus::Done => "done",
        }
    }
}

/// The fingerprint of a keyed job's payload, kept with its idempotency key: a resubmission under
/// the key with another payload is a [`QueueError::KeyConflict`]. The first 16 bytes of the
/// payload's SHA-256, as 32 hex digits (stable across versions and stores).
pub fn fingerprint(payload: &[u8]) -> String {
    use sha2::Digest as _;
    let d = sha2::Sha256::digest(payload);
    let mut out = String::with_capacity(32);
    for b in &d[..16] {
        out.push(char::from_digit(u32::from(b >> 4), 16).unwrap_or('0'));
        out.push(char::from_digit(u32::from(b & 15), 16).unwrap_or('0'));
    }
    out
}

/// A job leased to a worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leased {
    /// The job's id.
    pub id: u64,
    /// Its payload.
    pub payload: Vec<u8>,
    /// This delivery's number (1 for the first).
    pub attempt: u32,
    /// The lease's nonce (part of the token; a new delivery gets a new one).
    pub nonce: u64,
    /// When it was submitted.
    pub submitted_at: Micros,
    /// Its release slot, on the store's clock; the store answered at `now`.
    pub released_at: Micros,
    /// When the lease ends: not acked by then, the job is delivered again.
    pub lease_deadline: Micros,
    /// The store's clock when it answered (`released_at - now` is how long to hold the job).
    pub now: Micros,
}

/// What a lease found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaseOutcome {
    /// A job, released at its slot.
    Leased(Leased),
    /// Jobs are ready, but the next slot is further ahead than asked: ask again in this many µs.
    Later(Micros),
    /// Nothing is ready; `next` is how long until a delayed job is due or a lease expires, if any.
    Empty {
        /// µs until something may become ready.
        next: Option<Micros>,
    },
}

/// What a `nack` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nacked {
    /// The job will be released again, from this instant on.
    Retry {
        /// When it is ready again (µs since the epoch).
        at: Micros,
    },
    /// It had its last attempt: it is in the dead letters.
    Dead,
}

/// A job in the dead letters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeadJob {
    /// The job's id.
    pub id: u64,
    /// Its payload.
    pub payload: Vec<u8>,
    /// Deliveries it had.
    pub attempts: u32,
    /// When it was submitted.
    pub submitted_at: Micros,
    /// When it went to the dead letters.
    pub died_at: Micros,
    /// Its idempotency key.
    pub key: Option<String>,
}

/// The state of one queue instance.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InstanceStats {
    /// Jobs ready to be released now.
    pub ready: u64,
    /// Jobs waiting for their `not_before` or retry time.
    pub delayed: u64,
    /// Jobs delivered (their slot passed) and not yet acked.
    pub in_flight: u64,
    /// Jobs reserved for a waiting lease, their slot ahead.
    pub reserved: u64,
    /// Jobs in the dead letters.
    pub dead: u64,
    /// When the oldest waiting job (the next ready one, or the next delayed one) was submitted.
    pub oldest_submitted: Option<Micros>,
    /// Jobs submitted, ever (duplicates not counted).
    pub submitted_total: u64,
    /// Releases (deliveries, retries included), ever.
    pub released_total: u64,
    /// Jobs acked, ever.
    pub acked_total: u64,
    /// Jobs sent to the dead letters, ever.
    pub dead_total: u64,
    /// The earliest instant of the next release (the TAT less tau).
    pub next_slot: Micros,
    /// When the last delayed job is due.
    pub last_due: Option<Micros>,
    /// Releases of the current run: delivered (slot passed), within the last
    /// [`RELEASE_WINDOW`], back to the first pause longer than
    /// [`super::engine::release_gap`] (at most [`RELEASE_LOG`]).
    pub recent_releases: u64,
    /// The slot of the first of them.
    pub first_recent_release: Option<Micros>,
    /// The store's clock when it answered.
    pub now: Micros,
}

/// How far back the measured release rate looks.
pub const RELEASE_WINDOW: Micros = 60_000_000;
/// The most recent release slots an instance keeps for its measured rate.
pub const RELEASE_LOG: usize = 4_096;

impl InstanceStats {
    /// Jobs held: waiting (ready and delayed), reserved and in flight. `max_depth` bounds it.
    pub fn depth(&self) -> u64 {
        self.waiting() + self.reserved + self.in_flight
    }

    /// Jobs waiting for their release: ready and delayed.
    pub fn waiting(&self) -> u64 {
        self.ready + self.delayed
    }

    /// Age of the oldest waiting job, in µs.
    pub fn oldest_age(&self) -> Option<Micros> {
        self.oldest_submitted.map(|t| self.now.saturating_sub(t))
    }

    /// How long until the waiting jobs are all released at `spacing`, if none fails: from the
    /// next slot one spacing per job after the first, and no sooner than the last delayed job
    /// is due.
    pub fn time_to_drain(&self, spacing: Micros) -> Micros {
        match self.waiting() {
            0 => 0,
            n => self
                .next_slot
                .saturating_add((n - 1).saturating_mul(spacing))
                .max(self.last_due.unwrap_or(0))
                .saturating_sub(self.now),
        }
    }

    /// Deliveries per second, measured over the current run of releases (see
    /// [`InstanceStats::recent_releases`]): their count over the time since the first of them
    /// plus one `spacing`. A drain that has just started reads its own rate, not a minute's
    /// average; a queue that stopped releasing reads 0 after the gap.
    pub fn release_rate(&self, spacing: Micros) -> f64 {
        match self.first_recent_release {
            Some(first) if self.recent_releases > 0 => {
                let span = self
                    .now
                    .saturating_sub(first)
                    .saturating_add(spacing.max(1));
                self.recent_releases as f64 * 1e6 / span as f64
            }
            _ => 0.0,
        }
    }
}

/// A lease token: which instance, which job, which delivery. Text form
/// `<nonce>.<id>.<instance>`, the instance being its state key (`domain:queue:k=v,…`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    /// The queue instance's key.
    pub instance: String,
    /// The job's id.
    pub id: u64,
    /// The delivery's nonce.
    pub nonce: u64,
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:x}.{}.{}", self.nonce, self.id, self.instance)
    }
}

impl FromStr for Token {
    type Err = QueueError;

    fn from_str(s: &str) -> Result<Self, QueueError> {
        let bad = || QueueError::BadToken(s.chars().take(200).collect());
        let mut parts = s.splitn(3, '.');
        let nonce = parts.next().and_then(|n| u64::from_str_radix(n, 16).ok());
        let id = parts.next().and_then(|n| n.parse::<u64>().ok());
        match (nonce, id, parts.next()) {
            (Some(nonce), Some(id), Some(instance)) if nonce != 0 && !instance.is_empty() => {
                Ok(Token {
                    instance: instance.to_owned(),
                    id,
                    nonce,
                })
            }
            _ => Err(bad()),
        }
    }
}

/// Why a queue operation failed. Nothing was changed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QueueError {
    /// No queue matches the domain and descriptor.
    #[error("no queue in domain `{domain}` matches `{descriptor}`")]
    UnknownQueue {
        /// The domain.
        domain: String,
        /// The descriptor, as text.
        descriptor: String,
    },
    /// A payload is over the queue's bound.
    #[error(
        "job {index}: the payload is {bytes} bytes, more than the queue's max_payload of {max}"
    )]
    PayloadTooLarge {
        /// The job's index in the batch.
        index: usize,
        /// Its size.
        bytes: usize,
        /// The bound.
        max: usize,
    },
    /// The batch does not fit: nothing was stored.
    #[error(
        "the queue holds {held} jobs; {asked} more would pass its max_depth of {max}: nothing was stored"
    )]
    QueueFull {
        /// Jobs held (waiting and in flight).
        held: u64,
        /// New jobs in the batch.
        asked: u64,
        /// The bound.
        max: u64,
    },
    /// Text that is not a lease token.
    #[error("`{0}` is not a lease token")]
    BadToken(String),
    /// The token's job is not held with it: acked already, purged, or delivered again since.
    #[error(
        "job {id} is not held with this token: it was acked, nacked or purged, or its lease expired and it was delivered again"
    )]
    NotHeld {
        /// The job.
        id: u64,
    },
    /// An idempotency key resubmitted with another payload: nothing was stored.
    #[error(
        "the key `{key}` (of the submit's job {index}, counted from 0) belongs to job id {id}, submitted with another payload: nothing was stored"
    )]
    KeyConflict {
        /// The job's index in the batch.
        index: usize,
        /// The key.
        key: String,
        /// The existing job's id.
        id: u64,
    },
    /// The job asked for is not in the dead letters.
    #[error("job {id} is not in the dead letters")]
    NotDead {
        /// The job.
        id: u64,
    },
    /// The request is malformed (an empty batch, a bad field).
    #[error("{0}")]
    Invalid(String),
    /// The store cannot answer.
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_junk_is_refused() {
        let t = Token {
            instance: "payments:refunds:biz=REFUND,channel=WPG".into(),
            id: 42,
            nonce: 0xabc,
        };
        assert_eq!(
            t.to_string(),
            "abc.42.payments:refunds:biz=REFUND,channel=WPG"
        );
        assert_eq!(t.to_string().parse::<Token>().unwrap(), t);
        for junk in ["", "abc", "abc.x.y", "0.1.q", "abc.1.", "zz.1.q"] {
            assert!(
                matches!(junk.parse::<Token>(), Err(QueueError::BadToken(_))),
                "{junk}"
            );
        }
    }
}
