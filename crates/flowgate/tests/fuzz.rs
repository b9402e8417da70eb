//! Fuzzing the embedded queue store's records: a database file whose tables hold records written
//! by someone else (arbitrary bytes, records of the right layout, the current one or format 1's
//! that the store upgrades, with hostile numbers, a hostile format number, a job
//! without its payload, a staged payload missing, a table of another type), and a database file
//! of junk bytes. Opening it answers a store error naming the database, or a store whose every
//! operation answers (a job or an error), never a panic. `FUZZ_CASES=N` runs each target N cases
//! (see `docs/fuzzing.md`).

use std::time::Duration;

use flowgate::queue::{DiskQueueStore, FILE_NAME, NewJob, QueueSpec, QueueStore};
use flowgate_core::{ManualClock, Matcher, StoreError};
use flowgate_testkit::fuzz;
use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};
use redb::{Database, TableDefinition};

// The store's tables, as `src/queue/disk.rs` defines them.
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
const JOBS: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("jobs");
const PAYLOADS: TableDefinition<(&str, u64), &[u8]> = TableDefinition::new("payloads");
const KEYS: TableDefinition<(&str, &str), (u64, u64)> = TableDefinition::new("keys");
const PRINTS: TableDefinition<(&str, &str), &str> = TableDefinition::new("key_prints");
const STAGED: TableDefinition<(u64, u64), &[u8]> = TableDefinition::new("staged_payloads");
const FORMAT: TableDefinition<&str, u64> = TableDefinition::new("format");
/// `meta` with another key type.
const META_AS_NUMBERS: TableDefinition<u64, &[u8]> = TableDefinition::new("meta");

/// The instance every case uses (the spec below's key for `channel=c`).
const INSTANCE: &str = "fz:q:channel=c";

fn hostile_u64() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(1),
        Just(u64::MAX),
        Just(u64::MAX - 1),
        Just(1 << 52),
        Just(1_800_000_000_000_000),
        any::<u64>(),
    ]
}

/// A job record in the store's layout: the shared record's fields in decimal
/// (`<submitted>:<attempts>:<nonce>:<key length>:<key>`), then the place (tag, instant, [stage,
/// index]), its numbers, key length and tag hostile.
fn job_record() -> impl Strategy<Value = Vec<u8>> {
    (
        (hostile_u64(), hostile_u64(), hostile_u64()),
        prop_oneof![0u64..12, hostile_u64()],
        prop::collection::vec(any::<u8>(), 0..12),
        any::<u8>(),
        hostile_u64(),
        (hostile_u64(), hostile_u64()),
    )
        .prop_map(
            |((submitted, attempts, nonce), key_len, key, tag, at, (stage, index))| {
                let mut b = format!("{submitted}:{attempts}:{nonce}:{key_len}:").into_bytes();
                b.extend(key);
                b.push(tag);
                b.extend(at.to_le_bytes());
                if tag & 0x40 != 0 {
                    b.extend(stage.to_le_bytes());
                    b.extend(index.to_le_bytes());
                }
                b
            },
        )
}

/// A job record of format 1 (submitted, attempts, nonce, tag, instant, [stage, index], key,
/// fixed-width), which the store rewrites when it opens a file without a format, its numbers
/// and tag hostile.
fn job_record_format_1() -> impl Strategy<Value = Vec<u8>> {
    (
        hostile_u64(),
        prop_oneof![Just(0u32), Just(4), Just(u32::MAX), any::<u32>()],
        hostile_u64(),
        any::<u8>(),
        hostile_u64(),
        (hostile_u64(), hostile_u64()),
        prop::collection::vec(any::<u8>(), 0..12),
    )
        .prop_map(
            |(submitted, attempts, nonce, tag, at, (stage, index), key)| {
                let mut b = Vec::new();
                b.extend(submitted.to_le_bytes());
                b.extend(attempts.to_le_bytes());
                b.extend(nonce.to_le_bytes());
                b.push(tag);
                b.extend(at.to_le_bytes());
                if tag & 0x40 != 0 {
                    b.extend(stage.to_le_bytes());
                    b.extend(index.to_le_bytes());
                }
                b.extend(key);
                b
            },
        )
}

/// A value of a table: the layout with hostile numbers, cut short, or arbitrary bytes.
fn value(layout: BoxedStrategy<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => layout.clone(),
        1 => (layout, any::<prop::sample::Index>()).prop_map(|(mut v, i)| {
            v.truncate(i.index(v.len() + 1));
            v
        }),
        1 => prop::collection::vec(any::<u8>(), 0..64),
    ]
}

fn meta_record() -> BoxedStrategy<Vec<u8>> {
    prop::collection::vec(hostile_u64(), 6)
        .prop_map(|v| v.iter().flat_map(|x| x.to_le_bytes()).collect())
        .boxed()
}

/// One row someone else wrote.
#[derive(Clone, Debug)]
enum Row {
    Meta(String, Vec<u8>),
    Job(u64, Vec<u8>),
    Payload(u64, Vec<u8>),
    Key(String, u64, u64),
    Print(String, String),
    Staged(u64, u64, Vec<u8>),
    /// The job records' format (none: format 1).
    Format(u64),
    /// `meta` created with another key type.
    MetaOfAnotherType,
}

fn instance_name() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => Just(INSTANCE.to_owned()),
        1 => fuzz::hostile_text(),
    ]
}

fn row() -> impl Strategy<Value = Row> {
    let id = || prop_oneof![1u64..5, hostile_u64()];
    prop_oneof![
        2 => (instance_name(), value(meta_record())).prop_map(|(i, v)| Row::Meta(i, v)),
        2 => (id(), value(job_record().boxed())).prop_map(|(id, v)| Row::Job(id, v)),
        2 => (id(), value(job_record_format_1().boxed())).prop_map(|(id, v)| Row::Job(id, v)),
        2 => prop_oneof![4 => Just(2u64), 1 => hostile_u64()].prop_map(Row::Format),
        3 => (id(), prop::collection::vec(any::<u8>(), 0..16)).prop_map(|(id, v)| Row::Payload(id, v)),
        1 => (fuzz::hostile_text(), hostile_u64(), hostile_u64()).prop_map(|(k, id, at)| Row::Key(k, id, at)),
        1 => (fuzz::hostile_text(), fuzz::hostile_text()).prop_map(|(k, p)| Row::Print(k, p)),
        1 => (hostile_u64(), hostile_u64(), prop::collection::vec(any::<u8>(), 0..16))
            .prop_map(|(s, i, v)| Row::Staged(s, i, v)),
        1 => Just(Row::MetaOfAnotherType),
    ]
}

fn write_rows(path: &std::path::Path, rows: &[Row]) -> Result<(), Box<dyn std::error::Error>> {
    let db = Database::create(path)?;
    let txn = db.begin_write()?;
    for r in rows {
        match r {
            Row::Meta(i, v) => {
                // (a table of another type cannot take the row: a case of its own)
                if let Ok(mut t) = txn.open_table(META) {
                    t.insert(i.as_str(), v.as_slice())?;
                }
            }
            Row::Job(id, v) => {
                txn.open_table(JOBS)?
                    .insert((INSTANCE, *id), v.as_slice())?;
            }
            Row::Payload(id, v) => {
                txn.open_table(PAYLOADS)?
                    .insert((INSTANCE, *id), v.as_slice())?;
            }
            Row::Key(k, id, at) => {
                txn.open_table(KEYS)?
                    .insert((INSTANCE, k.as_str()), (*id, *at))?;
            }
            Row::Print(k, p) => {
                txn.open_table(PRINTS)?
                    .insert((INSTANCE, k.as_str()), p.as_str())?;
            }
            Row::Staged(s, i, v) => {
                txn.open_table(STAGED)?.insert((*s, *i), v.as_slice())?;
            }
            Row::Format(f) => {
                txn.open_table(FORMAT)?.insert("jobs", *f)?;
            }
            Row::MetaOfAnotherType => {
                if let Ok(mut t) = txn.open_table(META_AS_NUMBERS) {
                    t.insert(7, &b"x"[..])?;
                }
            }
        }
    }
    txn.commit()?;
    Ok(())
}

fn spec() -> QueueSpec {
    QueueSpec::new(
        "fz",
        "q",
        vec![Matcher::parse("channel")],
        "1000/s".parse().unwrap_or_else(|e| panic!("{e}")),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Opens the store on the directory and runs every operation on the instance.
async fn open_and_run(dir: &std::path::Path) -> Result<(), TestCaseError> {
    let clock = ManualClock::new(1_800_000_000_000_000);
    let store = match DiskQueueStore::open(dir, clock.clone()) {
        Ok(s) => s,
        Err(StoreError::Unavailable(m)) => {
            prop_assert!(m.starts_with("queue database: "), "{m}");
            return Ok(());
        }
        Err(e) => {
            return Err(TestCaseError::fail(format!(
                "not a store error naming the database: {e:?}"
            )));
        }
    };
    let spec = spec();
    let q = &store;
    let _ = q.instances().await;
    let _ = q.stats(&spec, INSTANCE).await;
    let _ = q
        .submit(
            &spec,
            INSTANCE,
            &[NewJob::new("a"), NewJob::new("b").with_key("k")],
        )
        .await;
    for nonce in 1..4 {
        clock.advance(Duration::from_secs(40));
        if let Ok(flowgate_core::queue::LeaseOutcome::Leased(l)) =
            q.lease(&spec, INSTANCE, 60_000_000, nonce).await
        {
            let _ = q.nack(&spec, INSTANCE, l.id, nonce, Some(0)).await;
            let _ = q.ack(&spec, INSTANCE, l.id, nonce).await;
        }
    }
    let _ = q.ack(&spec, INSTANCE, 1, 1).await;
    let _ = q.dead(&spec, INSTANCE, 0, 10).await;
    let _ = q.requeue_dead(&spec, INSTANCE, None).await;
    let _ = q.purge_dead(&spec, INSTANCE, Some(&[1, 2])).await;
    clock.advance(Duration::from_secs(3 * 86_400));
    let _ = q.stats(&spec, INSTANCE).await;
    let _ = q.purge(&spec, INSTANCE).await;
    Ok(())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"))
}

#[test]
fn disk_records_written_by_someone_else() {
    let rt = runtime();
    let mut runner = TestRunner::new(fuzz::config(300));
    let result = runner.run(&prop::collection::vec(row(), 1..8), |rows| {
        let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
        write_rows(&dir.path().join(FILE_NAME), &rows)
            .map_err(|e| TestCaseError::fail(format!("writing the rows: {e}")))?;
        rt.block_on(open_and_run(dir.path()))
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// A database file's bytes: junk, or a valid file with bytes changed.
#[derive(Clone, Debug)]
enum Junk {
    Bytes(Vec<u8>),
    /// (offset, byte) changes to a valid file.
    Flips(Vec<(usize, u8)>),
}

impl Junk {
    fn apply(&self, valid: &[u8]) -> Vec<u8> {
        match self {
            Junk::Bytes(b) => b.clone(),
            Junk::Flips(flips) => {
                let mut v = valid.to_vec();
                for &(at, b) in flips {
                    if let Some(x) = v.get_mut(at) {
                        *x = b;
                    }
                }
                v
            }
        }
    }
}

/// A valid database file holding one job.
fn valid_file(rt: &tokio::runtime::Runtime) -> Vec<u8> {
    let seed = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    rt.block_on(async {
        let store = DiskQueueStore::open(seed.path(), ManualClock::new(1_800_000_000_000_000))
            .unwrap_or_else(|e| panic!("{e}"));
        store
            .submit(&spec(), INSTANCE, &[NewJob::new("a").with_key("k")])
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    });
    std::fs::read(seed.path().join(FILE_NAME)).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_database_file_of_junk() {
    let rt = runtime();
    let valid = valid_file(&rt);
    let junk = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..4096).prop_map(Junk::Bytes),
        prop::collection::vec((0..valid.len(), any::<u8>()), 1..8).prop_map(Junk::Flips),
    ];
    let mut runner = TestRunner::new(fuzz::config(100));
    let result = runner.run(&junk, |junk| {
        let bytes = junk.apply(&valid);
        let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
        std::fs::write(dir.path().join(FILE_NAME), &bytes)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        rt.block_on(open_and_run(dir.path()))
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// Found by the fuzzer: a valid database file with one byte changed made redb panic while
/// opening it ("range end index 98 out of range for slice of length 15"; elsewhere "Malformed
/// allocator state"). The store refuses such a file with an error naming it.
#[test]
fn a_file_that_makes_redb_panic_is_refused() {
    let rt = runtime();
    let bytes = Junk::Flips(vec![(4098, 2)]).apply(&valid_file(&rt));
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.path().join(FILE_NAME), bytes).unwrap_or_else(|e| panic!("{e}"));
    match DiskQueueStore::open(dir.path(), ManualClock::new(1_800_000_000_000_000)) {
        Err(StoreError::Unavailable(m)) => {
            assert!(m.starts_with("queue database: cannot open"), "{m}");
            assert!(m.contains("the file is damaged"), "{m}");
        }
        Err(e) => panic!("{e:?}"),
        // (a redb that repairs the file instead is as good)
        Ok(_) => {}
    }
}

/// Found by the fuzzer: an instance record whose release schedule (`tat`) was near 2^64
/// overflowed the first lease (a panic in a debug build). A record beyond any instant is
/// damaged, and the store says so when it opens.
#[test]
fn a_record_beyond_every_instant_is_damaged() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut meta = vec![0u8; 48];
    meta[8..16].copy_from_slice(&(u64::MAX - 1).to_le_bytes());
    let mut job = Vec::new();
    job.extend(1_800_000_000_000_000u64.to_le_bytes());
    job.extend(0u32.to_le_bytes());
    job.extend(0u64.to_le_bytes());
    job.push(0);
    job.extend(0u64.to_le_bytes());
    write_rows(
        &dir.path().join(FILE_NAME),
        &[
            Row::Meta(INSTANCE.into(), meta),
            Row::Job(1, job),
            Row::Payload(1, b"a".to_vec()),
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    match DiskQueueStore::open(dir.path(), ManualClock::new(1_800_000_000_000_000)) {
        Err(StoreError::Unavailable(m)) => {
            assert_eq!(m, "queue database: cannot load: a damaged instance record");
        }
        other => panic!("{:?}", other.err()),
    }
}
