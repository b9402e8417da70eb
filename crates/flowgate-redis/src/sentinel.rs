//! A connection to the primary Redis Sentinel names, followed across promotions, that never
//! writes to a demoted primary.
//!
//! redis's `ConnectionManager` reconnects to the address it was given; after a failover that
//! address may be the old primary restarting (a primary with stale data for a moment, then a
//! replica). So this link has no connection that reconnects by itself: it holds one multiplexed
//! connection to the primary the sentinels named ([`discovery`]), checked with `ROLE`, and drops
//! it on any hint that the primary changed, after which the next call asks the sentinels again:
//!
//! - a connection-level failure (lost, refused, timed out), a `READONLY` or `MASTERDOWN` reply
//!   (the node was demoted), or a refused authentication (the next connection is made afresh, with
//!   the URL's password: a changed and restored password heals by itself);
//! - a sentinel's `+switch-master` announcement for this master: every link follows the
//!   sentinels' announcements and switches at once, without waiting for a write to fail.
//!
//! Asking is single-flight (one search at a time, its outcome shared by every caller waiting),
//! runs in a task of its own (a caller whose deadline passes does not cancel it), and after a
//! failed search the next one waits [`RETRY_FIRST`], doubling up to [`RETRY_MOST`]: callers
//! meanwhile fail at once with the last failure. A `+switch-master` skips the wait.

mod discovery;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use futures::StreamExt as _;
use parking_lot::Mutex;
use redis::RedisError;
use tokio::sync::watch;
use tokio::time::Instant;

pub use discovery::is_sentinel_url;
pub(crate) use discovery::{Primary, Sentinels};

use crate::options::ConnectionOptions;
use crate::topology::Topology;

/// The pause after a first failed search for the primary.
const RETRY_FIRST: Duration = Duration::from_millis(50);
/// The longest pause between two failed searches.
const RETRY_MOST: Duration = Duration::from_millis(500);
/// The channel on which sentinels announce a promotion.
const SWITCH_MASTER: &str = "+switch-master";

/// A Redis Sentinel link (cheap to clone: clones share it).
#[derive(Clone)]
pub(crate) struct SentinelLink {
    inner: Arc<Inner>,
}

struct Inner {
    sentinels: Arc<Sentinels>,
    /// The primary in use; `None` until found, and after a hint that it changed.
    current: ArcSwapOption<Primary>,
    search: Mutex<Search>,
    /// Counts the searches ended, so that callers wait for the one in flight.
    ended: watch::Sender<u64>,
    topology: Arc<Topology>,
    /// Whether the task that follows `+switch-master` runs.
    following: AtomicBool,
    /// Dropped with the link: ends the task that follows `+switch-master`.
    alive: watch::Sender<()>,
    /// How long a search may take.
    search_timeout: Duration,
}

/// The state of the search for the primary.
#[derive(Default)]
struct Search {
    running: bool,
    /// Failed searches in a row.
    failures: u32,
    /// The last failed search: when it ended and its error.
    failed: Option<(Instant, RedisError)>,
    /// Whether a primary was ever connected (a later one is a reconnection).
    connected_once: bool,
}

impl Search {
    fn pause(&self) -> Duration {
        RETRY_FIRST
            .saturating_mul(1 << self.failures.saturating_sub(1).min(8))
            .min(RETRY_MOST)
    }
}

/// Whether a call's failure `e` hints that the primary changed or its connection is unusable.
fn is_hint(e: &RedisError) -> bool {
    e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_timeout()
        || e.is_unrecoverable_error()
        || e.kind() == redis::ErrorKind::AuthenticationFailed
        || matches!(
            e.code(),
            Some("READONLY" | "MASTERDOWN" | "NOAUTH" | "WRONGPASS" | "LOADING")
        )
}

impl SentinelLink {
    /// A link to the primary the sentinels of `url` name, found on first use.
    ///
    /// # Errors
    /// For an invalid URL, or certificates given for a URL without TLS.
    pub(crate) fn new(
        url: &str,
        options: &ConnectionOptions,
        topology: Arc<Topology>,
    ) -> redis::RedisResult<Self> {
        Ok(Self {
            inner: Arc::new(Inner {
                sentinels: Arc::new(Sentinels::new(url, options)?),
                current: ArcSwapOption::empty(),
                search: Mutex::new(Search::default()),
                ended: watch::channel(0).0,
                topology,
                following: AtomicBool::new(false),
                alive: watch::channel(()).0,
                search_timeout: options.connect_timeout * 4,
            }),
        })
    }

    /// The primary's connection: the one in use, or the primary the sentinels name now.
    ///
    /// # Errors
    /// The last search's failure (no sentinel answered, no primary up, not a primary yet).
    pub(crate) async fn get(&self) -> redis::RedisResult<Arc<Primary>> {
        if let Some(p) = self.inner.current.load_full() {
            return Ok(p);
        }
        self.follow_switches();
        let mut ended = self.inner.ended.subscribe();
        if let Some(p) = self.inner.current.load_full() {
            return Ok(p);
        }
        if let Some(e) = Inner::search(&self.inner) {
            return Err(e);
        }
        loop {
            if ended.changed().await.is_err() {
                return Err(RedisError::from((
                    redis::ErrorKind::Io,
                    "the sentinel link was closed",
                )));
            }
            if let Some(p) = self.inner.current.load_full() {
                return Ok(p);
            }
            let search = self.inner.search.lock();
            if !search.running {
                return Err(search.failed.as_ref().map_or_else(
                    || RedisError::from((redis::ErrorKind::Io, "no primary found")),
                    |(_, e)| e.clone(),
                ));
            }
        }
    }

    /// A call's `reply` on `primary`, its failure noted first: a hint that the primary changed
    /// drops the connection (see the module's documentation).
    pub(crate) fn answered<T>(
        &self,
        primary: &Arc<Primary>,
        reply: redis::RedisResult<T>,
    ) -> redis::RedisResult<T> {
        if let Err(e) = &reply
            && is_hint(e)
        {
            let previous = self.inner.current.compare_and_swap(primary, None);
            if previous.as_ref().is_some_and(|p| Arc::ptr_eq(p, primary)) {
                if e.code() == Some("READONLY") {
                    tracing::warn!(target: "flowgate_redis", primary = %primary.addr, "the Redis primary was demoted: asking the sentinels again");
                } else {
                    tracing::debug!(target: "flowgate_redis", primary = %primary.addr, error = %e, "the Redis primary's connection failed: asking the sentinels again");
                }
                let _ = Inner::search(&self.inner);
            }
        }
        reply
    }

    /// Starts following the sentinels' `+switch-master` announcements, once.
    fn follow_switches(&self) {
        if self.inner.following.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.inner.following.store(false, Ordering::Release);
            return;
        };
        runtime.spawn(follow_switches(
            Arc::downgrade(&self.inner),
            Arc::clone(&self.inner.sentinels),
            self.inner.alive.subscribe(),
        ));
    }
}

impl Inner {
    /// Starts a search for the primary unless one runs; `Some(error)` when the last one failed
    /// too recently to try again (see [`RETRY_FIRST`]).
    fn search(this: &Arc<Self>) -> Option<RedisError> {
        let mut search = this.search.lock();
        if search.running {
            return None;
        }
        if let Some((at, e)) = &search.failed
            && at.elapsed() < search.pause()
        {
            return Some(e.clone());
        }
        search.running = true;
        drop(search);
        tokio::spawn(Self::find(Arc::clone(this)));
        None
    }

    /// Asks the sentinels for the primary and connects to it; records the outcome.
    async fn find(this: Arc<Self>) {
        let found = tokio::time::timeout(this.search_timeout, this.sentinels.primary())
            .await
            .unwrap_or_else(|_| {
                Err(RedisError::from(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "the sentinels and the primary they name did not answer in time",
                )))
            });
        let mut search = this.search.lock();
        search.running = false;
        match found {
            Ok(primary) => {
                this.topology.primaries_are(vec![primary.addr.clone()]);
                if std::mem::replace(&mut search.connected_once, true) {
                    this.topology.reconnected();
                }
                search.failures = 0;
                search.failed = None;
                this.current.store(Some(Arc::new(primary)));
            }
            Err(e) => {
                if search.failures == 0 {
                    tracing::warn!(target: "flowgate_redis", master = %this.sentinels.master(), error = %e, "no Redis primary from the sentinels yet: asking again");
                }
                search.failures = search.failures.saturating_add(1);
                search.failed = Some((Instant::now(), e));
            }
        }
        drop(search);
        this.ended.send_modify(|n| *n += 1);
    }

    /// A sentinel announced that the master is now at `to`: a primary elsewhere is dropped and
    /// the new one looked for at once.
    fn switched(this: &Arc<Self>, to: &str) {
        let elsewhere = this.current.load().as_ref().is_none_or(|p| p.addr != to);
        if !elsewhere {
            return;
        }
        tracing::info!(target: "flowgate_redis", master = %this.sentinels.master(), to, "the sentinels promoted a new Redis primary: switching to it");
        this.current.store(None);
        this.search.lock().failed = None;
        let _ = Self::search(this);
    }
}

/// The new address in a `+switch-master` message, `<name> <old-ip> <old-port> <new-ip>
/// <new-port>`, when it is about `master`.
fn switch_target(payload: &str, master: &str) -> Option<String> {
    let parts: Vec<&str> = payload.split_whitespace().collect();
    match parts[..] {
        [name, _, _, ip, port] if name == master && port.parse::<u16>().is_ok() => {
            Some(if ip.contains(':') {
                format!("[{ip}]:{port}")
            } else {
                format!("{ip}:{port}")
            })
        }
        _ => None,
    }
}

/// Follows the sentinels' `+switch-master` announcements, subscribed on one sentinel at a time
/// (the next after a lost subscription), until the link is dropped.
async fn follow_switches(
    link: Weak<Inner>,
    sentinels: Arc<Sentinels>,
    mut alive: watch::Receiver<()>,
) {
    let clients: Vec<redis::Client> = sentinels.clients().cloned().collect();
    let mut rounds = 0u32;
    loop {
        for client in &clients {
            let subscribed = async {
                let mut pubsub = client.get_async_pubsub().await?;
                pubsub.subscribe(SWITCH_MASTER).await?;
                Ok::<_, RedisError>(pubsub)
            };
            let pubsub = tokio::select! {
                _ = alive.changed() => return,
                r = tokio::time::timeout(Duration::from_secs(2), subscribed) => r,
            };
            let Ok(Ok(mut pubsub)) = pubsub else {
                continue;
            };
            rounds = 0;
            let mut messages = pubsub.on_message();
            loop {
                let message = tokio::select! {
                    _ = alive.changed() => return,
                    m = messages.next() => m,
                };
                let Some(message) = message else { break };
                let payload: String = message.get_payload().unwrap_or_default();
                if let Some(to) = switch_target(&payload, sentinels.master()) {
                    let Some(inner) = link.upgrade() else { return };
                    Inner::switched(&inner, &to);
                }
            }
        }
        rounds = rounds.saturating_add(1);
        tokio::select! {
            _ = alive.changed() => return,
            () = tokio::time::sleep(Duration::from_millis(100) * rounds.min(20)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_switch_names_the_new_address_of_its_own_master() {
        assert_eq!(
            switch_target("mymaster 127.0.0.1 6379 127.0.0.1 6380", "mymaster").as_deref(),
            Some("127.0.0.1:6380")
        );
        assert_eq!(
            switch_target("other 127.0.0.1 6379 127.0.0.1 6380", "mymaster"),
            None
        );
        assert_eq!(switch_target("mymaster 1 2", "mymaster"), None);
    }

    #[test]
    fn searches_back_off_up_to_a_bound() {
        let mut s = Search {
            failures: 1,
            ..Search::default()
        };
        assert_eq!(s.pause(), RETRY_FIRST);
        s.failures = 2;
        assert_eq!(s.pause(), RETRY_FIRST * 2);
        s.failures = 40;
        assert_eq!(s.pause(), RETRY_MOST);
    }
}
