//! Following a Redis channel: notifications that something changed, each answered by reading
//! the state again (a message may be lost; the reader's periodic read covers it).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use tokio::sync::Notify;

use flowgate_core::redact::Redacted;

use crate::RedisTls;

/// Wakes `notify` on every message of `channel`, subscribed through the first of `urls` that
/// answers (a cluster publishes to every node); after a lost subscription it subscribes again,
/// through the next, and wakes `notify` then too, since messages may have been missed meanwhile.
/// `what` names the follower in its log lines. Runs until its task is dropped or aborted.
pub async fn follow(
    urls: &[String],
    tls: Option<&RedisTls>,
    channel: &str,
    what: &str,
    notify: Arc<Notify>,
) {
    let clients: Vec<redis::Client> = urls
        .iter()
        .filter_map(|url| match crate::client(url, tls) {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!(url = %Redacted(url), error = %e, "{what}: cannot subscribe to changes there");
                None
            }
        })
        .collect();
    if clients.is_empty() {
        tracing::warn!("{what}: cannot subscribe to changes; the periodic read alone follows them");
        return;
    }
    // Rounds in a row in which no server kept a subscription: the pause after each grows.
    let mut rounds = 0u64;
    loop {
        for client in &clients {
            let subscribed = async {
                let mut pubsub = client.get_async_pubsub().await?;
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
