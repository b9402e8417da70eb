//! A refund worker: refunds queued per channel and sent at the channel's rate, with retries.
//!
//! ```sh
//! cargo run -p flowgate --features queue --example refund_worker                        # embedded store
//! cargo run -p flowgate --features queue --example refund_worker -- redis://127.0.0.1/  # jobs in Redis
//! ```
//!
//! Six refunds are submitted to channel WPG, which takes 2 refunds a second. The worker sends
//! each to the "channel" (here a print); refund 3 fails once and is retried after the queue's
//! backoff. Run it twice at once against one Redis: the two workers share the rate.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use flowgate::clock::SystemClock;
use flowgate::queue::{DiskQueueStore, NewJob, Queue, QueueSet, QueueSpec, QueueStore};
use flowgate::{Descriptor, Matcher};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let refunds = QueueSpec::new(
        "payments",
        "refunds",
        vec![Matcher::parse("biz=REFUND"), Matcher::parse("channel")],
        "2/s".parse()?,
    )?
    .with_retry_backoff(Duration::from_millis(500))?;
    let specs = QueueSet::new(vec![refunds])?;
    match std::env::args().nth(1) {
        Some(url) => {
            let store = flowgate::RedisStore::connect(&url).await?.queues();
            run(Arc::new(Queue::new(specs, store))).await
        }
        None => {
            let dir = std::env::temp_dir().join("flowgate-refund-example");
            let store = DiskQueueStore::open(&dir, SystemClock::new())?;
            println!("jobs kept in {}", store.path().display());
            run(Arc::new(Queue::new(specs, store))).await
        }
    }
}

async fn run<S: QueueStore>(queue: Arc<Queue<S>>) -> Result<(), Box<dyn std::error::Error>> {
    let wpg = Descriptor::new([("biz", "REFUND"), ("channel", "WPG")]);
    // Submit a batch; the idempotency keys make a rerun submit nothing twice.
    let batch = (1..=6)
        .map(|n| {
            NewJob::new(format!(r#"{{"refund":{n},"amount":"{n}.00"}}"#))
                .with_key(format!("refund-{n}"))
        })
        .collect();
    for s in queue.submit("payments", &wpg, batch).await? {
        match s.position {
            Some(p) => println!("refund job {} queued at position {p}", s.id),
            None => println!("refund job {} was already queued", s.id),
        }
    }

    let failures = Arc::new(AtomicU32::new(0));
    let done = Arc::new(tokio::sync::Notify::new());
    let worker = queue.worker("payments", wpg.clone());
    let (f, d) = (failures.clone(), done.clone());
    let stop = async move { d.notified().await };
    let run = worker.run_until(
        move |job| {
            let f = f.clone();
            async move {
                let body = String::from_utf8_lossy(&job.payload).into_owned();
                // The channel rejects refund 3 the first time.
                if body.contains(r#""refund":3"#) && f.fetch_add(1, Ordering::SeqCst) == 0 {
                    println!(
                        "  channel refused {body} (attempt {}): retried later",
                        job.attempt
                    );
                    return Err("channel busy");
                }
                println!("  sent {body} (job {}, attempt {})", job.id, job.attempt);
                Ok(())
            }
        },
        stop,
    );
    // Stop once nothing is waiting or in flight.
    let watch = async {
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let busy = queue.instances().await.map_or(true, |all| {
                all.iter()
                    .filter_map(|i| i.stats.as_ref())
                    .any(|s| s.depth() + s.in_flight > 0)
            });
            if !busy {
                break;
            }
        }
        done.notify_one();
    };
    tokio::join!(run, watch);
    println!("all refunds sent");
    Ok(())
}
