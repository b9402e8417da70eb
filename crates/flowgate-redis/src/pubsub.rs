//! Following a Redis channel: notifications that something changed, each answered by reading
//! the state again (a message may be lost; the reader's periodic read covers it).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use tokio::sync::Notify;

use flowgate_core::redact::Redacted;

use crate::ConnectionOptions;
use crate::sentinel::{Sentinels, is_sentinel_url};

/// Where a subscription is made: one server, or the primary the sentinels name at the time.
enum Source {
    Server(redis::Client),
    Sentinel(Sentinels),
}

impl Source {
    /// The client to subscribe through now: a sentinel URL's primary is asked for each time,
    /// so that a subscription lost with a primary follows the promoted one.
    async fn client(&self) -> redis::RedisResult<redis::Client> {
        match self {
            Source::Server(c) => Ok(c.clone()),
            Source::Sentinel(s) => {
                let (host, port) = s.named_primary().await?;
                s.node_client(&host, port)
            }
        }
    }
}

/// Wakes `notify` on every message of `channel`, subscribed through the first of `urls` that
/// answers (a cluster publishes to every node; a `redis+sentinel://` URL subscribes on the
/// primary its sentinels name, asked again each time); after a lost subscription it subscribes
/// again, through the next, and wakes `notify` then too, since messages may have been missed
/// meanwhile. `options` gives the certificates and the sentinels' credentials. `what` names the
/// follower in its log lines. Runs until its task is dropped or aborted.
pub async fn follow(
    urls: &[String],
    options: &ConnectionOptions,
    channel: &str,
    what: &str,
    notify: Arc<Notify>,
) {
    let sources: Vec<Source> = urls
        .iter()
        .filter_map(|url| {
            let source = if is_sentinel_url(url) {
                Sentinels::new(url, options).map(Source::Sentinel)
            } else {
                crate::client(url, options.tls.as_ref()).map(Source::Server)
            };
            match source {
                Ok(s) => Some(s),
                Err(e) => {
                    tracing::warn!(url = %Redacted(url), error = %e, "{what}: cannot subscribe to changes there");
                    None
                }
            }
        })
        .collect();
    if sources.is_empty() {
        tracing::warn!("{what}: cannot subscribe to changes; the periodic read alone follows them");
        return;
    }
    // Rounds in a row in which no server kept a subscription: the pause after each grows.
    let mut rounds = 0u64;
    loop {
        for source in &sources {
            let subscribed = async {
                let mut pubsub = source.client().await?.get_async_pubsub().await?;
                pubsub.subscribe(channel).await?;
                Ok::<_, redis::RedisError>(pubsub)
            };
            match tokio::time::timeout(Duration::from_secs(2), subscribed).await {
                Ok(Ok(mut pubsub)) => {
                    rounds = 0;
                    notify.notify_one();
                    let mut messages = pubsub.on_message();
                    while messages.next().await.is_some() {
                        notify.notify_one();
                    }
                    tracing::debug!("{what}: subscription lost; subscribing again");
                }
                Ok(Err(e)) if rounds == 0 => {
                    tracing::debug!(error = %e, "{what}: cannot subscribe to changes");
                }
                Ok(Err(_)) => {}
                Err(_) => tracing::debug!("{what}: no answer to the subscription"),
            }
        }
        rounds += 1;
        tokio::time::sleep(Duration::from_millis(100 * rounds.min(20))).await;
    }
}
