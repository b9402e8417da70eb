//! The embedded queue store: the queue conformance table, and durability across reopening.

use flowgate::queue::{DiskQueueStore, NewJob, QueueSpec, QueueStore};
use flowgate_core::{ManualClock, Matcher};

#[tokio::test]
async fn the_embedded_store_passes_the_queue_conformance_table() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(0);
    let store = DiskQueueStore::open(dir.path(), clock.clone()).unwrap();
    flowgate_testkit::queue_conformance::run(&store, &clock, "disk:").await;
}

fn spec() -> QueueSpec {
    QueueSpec::new(
        "pay",
        "refunds",
        vec![Matcher::parse("channel")],
        "1000/s".parse().unwrap(),
    )
    .unwrap()
}

#[tokio::test]
async fn every_committed_change_survives_reopening_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_700_000_000_000_000);
    let q = spec();
    let inst = "pay:refunds:channel=WPG";
    {
        let store = DiskQueueStore::open(dir.path(), clock.clone()).unwrap();
        for batch in 0..10 {
            let jobs: Vec<NewJob> = (0..100)
                .map(|i| {
                    NewJob::new(format!("job-{}", batch * 100 + i))
                        .with_key(format!("k{}", batch * 100 + i))
                })
                .collect();
            store.submit(&q, inst, &jobs).await.unwrap();
        }
        // Lease three: ack the first, nack the second to the dead letters later, keep the third.
        let mut leased = Vec::new();
        for n in 1..=3 {
            clock.advance(std::time::Duration::from_millis(1));
            match store.lease(&q, inst, 0, n).await.unwrap() {
                flowgate::queue::LeaseOutcome::Leased(j) => leased.push(j),
                other => panic!("{other:?}"),
            }
        }
        store.ack(&q, inst, leased[0].id, 1).await.unwrap();
        let before = store.stats(&q, inst).await.unwrap().expect("listed");
        assert_eq!(
            (before.ready, before.in_flight, before.acked_total),
            (997, 2, 1)
        );
    }
    // The store is dropped: reopen the same directory.
    let store = DiskQueueStore::open(dir.path(), clock.clone()).unwrap();
    let after = store.stats(&q, inst).await.unwrap().expect("listed");
    assert_eq!(
        (
            after.ready,
            after.in_flight,
            after.acked_total,
            after.submitted_total
        ),
        (997, 2, 1, 1000)
    );
    assert_eq!(store.instances().await.unwrap(), vec![inst.to_owned()]);
    // The in-flight jobs keep their tokens; the acked job's key is remembered with its
    // payload's fingerprint: the same payload is a duplicate, another one a conflict.
    store.ack(&q, inst, 2, 2).await.unwrap();
    let conflict = store
        .submit(&q, inst, &[NewJob::new("again").with_key("k0")])
        .await;
    assert!(
        matches!(
            conflict,
            Err(flowgate::queue::QueueError::KeyConflict { id: 1, .. })
        ),
        "{conflict:?}"
    );
    let dup = store
        .submit(&q, inst, &[NewJob::new("job-0").with_key("k0")])
        .await
        .unwrap();
    assert!(dup[0].duplicate && dup[0].id == 1);
    assert_eq!(dup[0].state, flowgate::queue::JobStatus::Done);
    // The rest come out in submission order.
    for (n, want) in (4..=10).enumerate() {
        clock.advance(std::time::Duration::from_millis(1));
        match store.lease(&q, inst, 0, 100 + n as u64).await.unwrap() {
            flowgate::queue::LeaseOutcome::Leased(j) => {
                assert_eq!(j.id, want);
                assert_eq!(j.payload, format!("job-{}", want - 1).into_bytes());
            }
            other => panic!("{other:?}"),
        }
    }
}

#[tokio::test]
async fn a_data_directory_is_opened_by_one_process_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let _first = DiskQueueStore::open(dir.path(), ManualClock::new(0)).unwrap();
    let second = DiskQueueStore::open(dir.path(), ManualClock::new(0));
    let err = second.err().unwrap().to_string();
    assert!(err.contains("cannot open"), "{err}");
}

/// The staged payloads of the store in `dir` (closed), read from its file.
fn staged_rows(dir: &std::path::Path) -> usize {
    use redb::{ReadableDatabase, ReadableTableMetadata};
    let db = redb::Database::open(dir.join(flowgate::queue::FILE_NAME)).unwrap();
    let txn = db.begin_read().unwrap();
    let table: redb::TableDefinition<(u64, u64), &[u8]> =
        redb::TableDefinition::new("staged_payloads");
    match txn.open_table(table) {
        Ok(t) => t.len().unwrap() as usize,
        Err(_) => 0,
    }
}

/// A batch of more than 1 MiB is written in chunks before its jobs: after reopening every job
/// is there with its payload, in order; a duplicate's and a refused batch's staged payloads are
/// gone; acked and purged jobs leave nothing staged behind.
#[tokio::test]
async fn a_big_batch_is_staged_and_survives_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_700_000_000_000_000);
    let q = spec().with_max_depth(2_500).unwrap();
    let inst = "pay:refunds:channel=BIG";
    let payload = |i: usize| {
        let mut p = format!("job-{i}:").into_bytes();
        p.resize(1_000, b'.');
        p
    };
    {
        let store = DiskQueueStore::open(dir.path(), clock.clone()).unwrap();
        store
            .submit(&q, inst, &[NewJob::new(payload(0)).with_key("k")])
            .await
            .unwrap();
        // 2,000 jobs of 1 KB (2 MB): job 5 repeats the key of the first batch.
        let jobs: Vec<NewJob> = (1..=2_000)
            .map(|i| match i {
                5 => NewJob::new(payload(0)).with_key("k"),
                _ => NewJob::new(payload(i)),
            })
            .collect();
        let out = store.submit(&q, inst, &jobs).await.unwrap();
        assert_eq!(out.len(), 2_000);
        assert!(out[4].duplicate && out[4].id == 1);
        // Too many for max_depth: refused whole.
        let more: Vec<NewJob> = (0..1_500).map(|i| NewJob::new(payload(i))).collect();
        assert!(store.submit(&q, inst, &more).await.is_err());
        // A submit cut short while its payloads are staged (its caller gave up): the staged
        // chunk is committed, no job refers to it; the store deletes it when it opens.
        let cut = tokio::time::timeout(
            std::time::Duration::from_micros(1),
            store.submit(&q, inst, &more[..1_200]),
        )
        .await;
        assert!(cut.is_err(), "the submit finished within 1 µs");
    }
    assert!(
        staged_rows(dir.path()) > 1_999,
        "the cut submit's chunk is on disk"
    );
    drop(DiskQueueStore::open(dir.path(), clock.clone()).unwrap());
    assert_eq!(
        staged_rows(dir.path()),
        1_999,
        "one staged payload per job stored"
    );
    let store = DiskQueueStore::open(dir.path(), clock.clone()).unwrap();
    let stats = store.stats(&q, inst).await.unwrap().unwrap();
    assert_eq!(stats.ready, 2_000);
    for want in [1u64, 2, 3, 4, 5, 7] {
        clock.advance(std::time::Duration::from_millis(1));
        match store.lease(&q, inst, 0, want).await.unwrap() {
            flowgate::queue::LeaseOutcome::Leased(j) => {
                assert_eq!(j.id, want);
                let i = if want == 1 { 0 } else { want as usize - 1 };
                assert_eq!(j.payload, payload(i));
                store.ack(&q, inst, j.id, want).await.unwrap();
            }
            other => panic!("{other:?}"),
        }
        if want == 5 {
            // (job 6 was job 5 of the batch, the duplicate: no id 6 was stored)
            assert!(store.stats(&q, inst).await.unwrap().unwrap().ready > 0);
        }
    }
    store.purge(&q, inst).await.unwrap();
    drop(store);
    assert_eq!(staged_rows(dir.path()), 0);
}

/// The library bounds a nack's delay as the HTTP API does: past 30 days it is refused and the
/// delivery stays as it was.
#[tokio::test]
async fn a_nack_past_the_longest_delay_is_refused() {
    use flowgate::queue::{Queue, QueueError, QueueSet};
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let store = DiskQueueStore::open(dir.path(), flowgate_core::SystemClock::new()).unwrap();
    let queue = Queue::new(QueueSet::new(vec![spec()]).unwrap(), store);
    let wpg = flowgate::Descriptor::new([("channel", "WPG")]);
    queue
        .submit("pay", &wpg, vec![NewJob::new(b"refund".to_vec())])
        .await
        .unwrap();
    let job = queue
        .lease("pay", &wpg, Duration::from_secs(2))
        .await
        .unwrap()
        .expect("a job");
    let too_long = flowgate_core::queue::MAX_DELAY + Duration::from_secs(1);
    match queue.nack(&job.token, Some(too_long)).await {
        Err(QueueError::Invalid(m)) => assert!(m.contains("longest delay"), "{m}"),
        other => panic!("{other:?}"),
    }
    // Still held: its ack is taken.
    queue.ack(&job.token).await.unwrap();
}

/// A job record of format 1, as the store wrote it before the stores shared one record
/// encoding: submitted, attempts, nonce, a tag (the state; 0x80: keyed), the state's instant,
/// the key. All little-endian.
fn format_1_job(submitted: u64, attempts: u32, nonce: u64, state: (u8, u64), key: &str) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&submitted.to_le_bytes());
    b.extend_from_slice(&attempts.to_le_bytes());
    b.extend_from_slice(&nonce.to_le_bytes());
    b.push(state.0 | if key.is_empty() { 0 } else { 0x80 });
    b.extend_from_slice(&state.1.to_le_bytes());
    b.extend_from_slice(key.as_bytes());
    b
}

/// Writes a database file of format 1 in `dir`: one instance with a ready keyed job (1), a job
/// in flight (2, nonce 42, its lease ending at `deadline`) and a dead one (3).
fn write_format_1(dir: &std::path::Path, inst: &str, now: u64, deadline: u64) {
    let db = redb::Database::create(dir.join(flowgate::queue::FILE_NAME)).unwrap();
    let meta: redb::TableDefinition<&str, &[u8]> = redb::TableDefinition::new("meta");
    let jobs: redb::TableDefinition<(&str, u64), &[u8]> = redb::TableDefinition::new("jobs");
    let payloads: redb::TableDefinition<(&str, u64), &[u8]> =
        redb::TableDefinition::new("payloads");
    let txn = db.begin_write().unwrap();
    {
        // seq, tat, submitted, released, acked, dead
        let m: Vec<u8> = [3u64, 0, 3, 4, 0, 1]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        txn.open_table(meta)
            .unwrap()
            .insert(inst, m.as_slice())
            .unwrap();
        let mut j = txn.open_table(jobs).unwrap();
        j.insert((inst, 1), format_1_job(now, 0, 0, (0, 0), "k1").as_slice())
            .unwrap();
        j.insert(
            (inst, 2),
            format_1_job(now, 1, 42, (2, deadline), "").as_slice(),
        )
        .unwrap();
        j.insert((inst, 3), format_1_job(now, 3, 7, (3, now), "").as_slice())
            .unwrap();
        let mut p = txn.open_table(payloads).unwrap();
        for id in 1..=3u64 {
            p.insert((inst, id), format!("job-{id}").as_bytes())
                .unwrap();
        }
    }
    txn.commit().unwrap();
}

/// A data directory written before the shared record encoding opens with every job as it was:
/// its records are rewritten once, and the file then opens as the current format.
#[tokio::test]
async fn a_file_of_format_1_is_upgraded_when_it_opens() {
    use flowgate::queue::{JobStatus, LeaseOutcome};
    let dir = tempfile::tempdir().unwrap();
    let now = 1_700_000_000_000_000;
    let clock = ManualClock::new(now);
    let (q, inst) = (spec(), "pay:refunds:channel=WPG");
    // (delivered at `now`: its lease ends a lease later)
    write_format_1(dir.path(), inst, now, now + q.lease());
    for _ in 0..2 {
        let store = DiskQueueStore::open(dir.path(), clock.clone()).unwrap();
        let s = store.stats(&q, inst).await.unwrap().expect("listed");
        assert_eq!((s.ready, s.in_flight, s.dead), (1, 1, 1));
        assert_eq!(s.oldest_submitted, Some(now));
        let dead = store.dead(&q, inst, 0, 10).await.unwrap();
        assert_eq!((dead[0].id, dead[0].attempts), (3, 3));
        assert_eq!(dead[0].payload, b"job-3");
        // The live job's key still names it.
        let dup = store
            .submit(&q, inst, &[NewJob::new("job-1").with_key("k1")])
            .await
            .unwrap();
        assert!(dup[0].duplicate && dup[0].id == 1 && dup[0].state == JobStatus::Ready);
    }
    let store = DiskQueueStore::open(dir.path(), clock.clone()).unwrap();
    store.ack(&q, inst, 2, 42).await.unwrap();
    match store.lease(&q, inst, 0, 1).await.unwrap() {
        LeaseOutcome::Leased(j) => {
            assert_eq!((j.id, j.attempt, &j.payload[..]), (1, 1, &b"job-1"[..]));
        }
        other => panic!("{other:?}"),
    }
}

/// A file written by a newer Flowgate (a later record format) is refused, not misread.
#[tokio::test]
async fn a_file_of_a_later_format_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    drop(DiskQueueStore::open(dir.path(), ManualClock::new(0)).unwrap());
    {
        let db = redb::Database::open(dir.path().join(flowgate::queue::FILE_NAME)).unwrap();
        let format: redb::TableDefinition<&str, u64> = redb::TableDefinition::new("format");
        let txn = db.begin_write().unwrap();
        txn.open_table(format).unwrap().insert("jobs", 3).unwrap();
        txn.commit().unwrap();
    }
    let err = DiskQueueStore::open(dir.path(), ManualClock::new(0))
        .err()
        .expect("refused")
        .to_string();
    assert!(
        err.contains("format 3") && err.contains("newer Flowgate"),
        "{err}"
    );
}
