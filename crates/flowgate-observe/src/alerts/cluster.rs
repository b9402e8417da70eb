//! One evaluator for the whole cluster, on Redis: a lease, and the alerts' states kept in Redis.
//!
//! Keys (one hash tag, so one Redis Cluster slot): `flowgate:{alerts}:leader` holds the
//! evaluator that leads (set with `NX PX`, renewed every second, lapsing [`LEASE`] after its
//! holder stops renewing it, then taken by the first other node that asks);
//! `flowgate:{alerts}:state` is a hash of each alert's state (its phase, since when, the value
//! last read) as JSON. The leader writes the states, fenced by its lease (a script writes only
//! while the lease is the writer's), before it announces a transition; the two scripts are
//! `flowgate-redis`'s `alerts_lease.lua` and `alerts_write.lua`; a node that takes the
//! lease over starts from the states stored, so a firing alert is neither announced again nor
//! forgotten unresolved. The other nodes read the states to show and export them.

use std::collections::BTreeMap;
use std::time::Duration;

use flowgate::store::StoreError;
use flowgate_redis::RedisConnection;
use flowgate_redis::scripts::{ALERTS_LEASE, ALERTS_WRITE};

use super::Stored;

/// The key of the lease.
pub const LEADER_KEY: &str = "flowgate:{alerts}:leader";
/// The key of the states' hash.
pub const STATE_KEY: &str = "flowgate:{alerts}:state";
/// How long a lease lasts without being renewed.
pub const LEASE: Duration = Duration::from_secs(3);
/// How long one of the evaluator's calls may wait for Redis: past it, the node evaluates alone
/// this second rather than late.
pub const CALL_TIMEOUT: Duration = Duration::from_millis(500);

/// Whether this evaluator leads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lease {
    /// It held the lease and renewed it.
    Renewed,
    /// It took the lease now: it must start from the states stored.
    Taken,
    /// Another evaluator leads.
    Follower,
}

/// An evaluator's connection to the cluster's alert state.
#[derive(Clone)]
pub struct Cluster {
    conn: RedisConnection,
    id: String,
}

impl Cluster {
    /// The evaluator `id` (unique per process) over `conn`.
    pub fn new(conn: RedisConnection, id: String) -> Self {
        Self { conn, id }
    }

    /// This evaluator's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Takes or renews the lease.
    ///
    /// # Errors
    /// [`StoreError`] when Redis does not answer.
    pub async fn lease(&self) -> Result<Lease, StoreError> {
        let mut call = ALERTS_LEASE.prepare_invoke();
        call.key(LEADER_KEY)
            .arg(&self.id)
            .arg(LEASE.as_millis() as u64);
        let r: i64 = self.conn.query_script(&call).await?;
        Ok(match r {
            1 => Lease::Renewed,
            2 => Lease::Taken,
            _ => Lease::Follower,
        })
    }

    /// The states stored (an unreadable one is left out).
    ///
    /// # Errors
    /// [`StoreError`] when Redis does not answer.
    pub async fn states(&self) -> Result<BTreeMap<String, Stored>, StoreError> {
        let raw: BTreeMap<String, String> = self
            .conn
            .query(redis::cmd("HGETALL").arg(STATE_KEY))
            .await?;
        Ok(raw
            .into_iter()
            .filter_map(|(k, v)| serde_json::from_str(&v).ok().map(|s| (k, s)))
            .collect())
    }

    /// Replaces the states stored, if this evaluator still holds the lease; answers whether it
    /// did.
    ///
    /// # Errors
    /// [`StoreError`] when Redis does not answer (then nothing or all was written).
    pub async fn write(&self, states: &BTreeMap<String, Stored>) -> Result<bool, StoreError> {
        let mut call = ALERTS_WRITE.prepare_invoke();
        call.key(LEADER_KEY).key(STATE_KEY).arg(&self.id);
        for (name, s) in states {
            call.arg(name)
                .arg(serde_json::to_string(s).unwrap_or_default());
        }
        let r: i64 = self.conn.query_script(&call).await?;
        Ok(r == 1)
    }
}
