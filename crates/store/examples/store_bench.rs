//! Chooses the store's engine by measurement (issue 19 item 1): redb through [`Store`]
//! against the simplest alternative that gives the same guarantees for these workloads, an
//! append-only log of CRC-checked frames written with `write` + `fdatasync` (written here,
//! for this comparison only).
//!
//! Three workloads, each durable (a commit returns after fsync):
//!
//! 1. a checkpoint batch: 2,000 records of 100 B of state (the same ids every batch, new
//!    versions), `--batches` times (default 200): latency p50/p99/max;
//! 2. a single durable write (one 64 B write record per commit), `--writes` times
//!    (default 500): latency p50/p99/max;
//! 3. recovery: open + read and verify every record of a store holding `--recover` objects
//!    (default 10,000, written in batches of 2,000), 10 times, with the page cache warm.
//!
//! ```text
//! cargo run --release -p worldmesh-store --example store_bench -- [--dir DIR] [--batches N] [--writes N] [--recover N]
//! ```
//!
//! Not a test: timings depend on the disk and on what else runs.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use worldmesh_core::{Durability, NodeId, ObjectId};
use worldmesh_store::{Batch, ObjectRecord, Store, WriteKey, WriteRecord};

const BATCH: u32 = 2000;
const STATE: usize = 100;

fn object(i: u32, version: u64) -> ObjectRecord {
    ObjectRecord {
        id: ObjectId::new(NodeId(0), i),
        epoch: 0,
        version,
        durability: Durability::Checkpointed,
        kind: 1,
        state: (0..STATE)
            .map(|b| (b as u64 ^ u64::from(i) ^ version) as u8)
            .collect(),
    }
}

/// The alternative: frames of `len u32 | crc u32 | payload`, payload = records of
/// `key (12) | version (8) | len u32 | state`; appended and fdatasync'ed per commit.
struct Log {
    file: File,
}

impl Log {
    fn create(path: &Path) -> Log {
        let file = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(path)
            .expect("create log");
        Log { file }
    }

    fn append(&mut self, records: &[(ObjectId, u64, &[u8])]) {
        let mut payload = Vec::with_capacity(records.len() * (24 + STATE));
        for (id, version, state) in records {
            payload.extend_from_slice(&id.origin.0.to_be_bytes());
            payload.extend_from_slice(&id.seq.to_be_bytes());
            payload.extend_from_slice(&version.to_le_bytes());
            payload.extend_from_slice(&(state.len() as u32).to_le_bytes());
            payload.extend_from_slice(state);
        }
        let mut frame = Vec::with_capacity(payload.len() + 8);
        frame.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        frame.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
        frame.extend_from_slice(&payload);
        self.file.write_all(&frame).expect("append");
        self.file.sync_data().expect("fdatasync");
    }

    /// Reads every whole, CRC-valid frame (a torn tail ends the read); last write wins.
    fn recover(path: &Path) -> BTreeMap<[u8; 12], (u64, Vec<u8>)> {
        let mut bytes = Vec::new();
        File::open(path)
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .expect("read log");
        let mut out = BTreeMap::new();
        let mut at = 0;
        while at + 8 <= bytes.len() {
            let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
            let crc = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap());
            let Some(payload) = bytes.get(at + 8..at + 8 + len) else {
                break;
            };
            if crc32fast::hash(payload) != crc {
                break;
            }
            let mut p = 0;
            while p + 24 <= payload.len() {
                let key: [u8; 12] = payload[p..p + 12].try_into().unwrap();
                let version = u64::from_le_bytes(payload[p + 12..p + 20].try_into().unwrap());
                let n = u32::from_le_bytes(payload[p + 20..p + 24].try_into().unwrap()) as usize;
                let state = payload[p + 24..p + 24 + n].to_vec();
                out.insert(key, (version, state));
                p += 24 + n;
            }
            at += 8 + len;
        }
        out
    }
}

struct Stats(Vec<Duration>);

impl Stats {
    fn pct(&self, p: f64) -> f64 {
        let mut v: Vec<f64> = self.0.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        v.sort_by(f64::total_cmp);
        let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
        v[rank - 1]
    }
    fn row(&self, engine: &str, what: &str) {
        println!(
            "| {what} | {engine} | {} | {:.2} | {:.2} | {:.2} |",
            self.0.len(),
            self.pct(50.0),
            self.pct(99.0),
            self.pct(100.0)
        );
    }
}

fn timed(f: impl FnOnce()) -> Duration {
    let t = Instant::now();
    f();
    t.elapsed()
}

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

fn fresh(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    let _ = std::fs::remove_dir_all(&p);
    std::fs::create_dir_all(&p).expect("bench dir");
    p
}

fn main() {
    let mut dir = PathBuf::from("target/store-bench");
    let (mut batches, mut writes, mut recover) = (200u64, 500u64, 10_000u32);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        let num = || {
            value
                .parse::<u64>()
                .unwrap_or_else(|_| panic!("{flag}: not a number: {value}"))
        };
        match flag.as_str() {
            "--dir" => dir = PathBuf::from(&value),
            "--batches" => batches = num(),
            "--writes" => writes = num(),
            "--recover" => recover = num() as u32,
            _ => panic!("unknown flag {flag} (--dir, --batches, --writes, --recover)"),
        }
    }
    println!(
        "store_bench: dir {}, {batches} batches of {BATCH} x {STATE} B, {writes} single writes, recovery of {recover} objects",
        dir.display()
    );
    println!();
    println!("| workload | engine | n | p50 ms | p99 ms | max ms |");
    println!("|---|---|---|---|---|---|");

    // 1. Checkpoint batches.
    let redb_dir = fresh(&dir, "redb-batches");
    let mut store = Store::open(&redb_dir).expect("open");
    let mut lat = Vec::new();
    for v in 1..=batches {
        let mut b = Batch::new();
        for i in 0..BATCH {
            b.put_object(object(i, v));
        }
        lat.push(timed(|| store.apply(&b).expect("apply")));
    }
    Stats(lat).row("redb", "checkpoint batch (2,000 x 100 B)");
    let redb_batch_bytes = size(store.path());
    drop(store);

    let log_dir = fresh(&dir, "log-batches");
    let log_path = log_dir.join("log");
    let mut log = Log::create(&log_path);
    let mut lat = Vec::new();
    for v in 1..=batches {
        let recs: Vec<ObjectRecord> = (0..BATCH).map(|i| object(i, v)).collect();
        let view: Vec<_> = recs
            .iter()
            .map(|o| (o.id, o.version, o.state.as_slice()))
            .collect();
        lat.push(timed(|| log.append(&view)));
    }
    Stats(lat).row("log", "checkpoint batch (2,000 x 100 B)");
    let log_batch_bytes = size(&log_path);

    // 2. Single durable writes.
    let redb_dir = fresh(&dir, "redb-writes");
    let mut store = Store::open(&redb_dir).expect("open");
    let mut lat = Vec::new();
    for seq in 1..=writes {
        let mut b = Batch::new();
        b.put_write(WriteRecord {
            key: WriteKey {
                target: ObjectId::new(NodeId(0), 7),
                writer: NodeId(1),
                seq,
            },
            bytes: vec![seq as u8; 64],
        });
        lat.push(timed(|| store.apply(&b).expect("apply")));
    }
    Stats(lat).row("redb", "single durable write (64 B)");
    drop(store);
    let log_dir = fresh(&dir, "log-writes");
    let mut log = Log::create(&log_dir.join("log"));
    let mut lat = Vec::new();
    for seq in 1..=writes {
        let state = vec![seq as u8; 64];
        lat.push(timed(|| {
            log.append(&[(ObjectId::new(NodeId(0), 7), seq, &state)])
        }));
    }
    Stats(lat).row("log", "single durable write (64 B)");

    // 3. Recovery.
    let redb_dir = fresh(&dir, "redb-recover");
    {
        let mut store = Store::open(&redb_dir).expect("open");
        for chunk in (0..recover).collect::<Vec<_>>().chunks(BATCH as usize) {
            let mut b = Batch::new();
            for &i in chunk {
                b.put_object(object(i, 1));
            }
            store.apply(&b).expect("apply");
        }
    }
    let mut lat = Vec::new();
    let mut redb_recover_bytes = 0;
    for _ in 0..10 {
        lat.push(timed(|| {
            let s = Store::open(&redb_dir).expect("open");
            let r = s.load().expect("load");
            assert_eq!(r.objects.len(), recover as usize);
            redb_recover_bytes = size(s.path());
        }));
    }
    Stats(lat).row("redb", &format!("recovery, open + verify {recover} objects"));
    let log_dir = fresh(&dir, "log-recover");
    let log_path = log_dir.join("log");
    {
        let mut log = Log::create(&log_path);
        let recs: Vec<ObjectRecord> = (0..recover).map(|i| object(i, 1)).collect();
        for chunk in recs.chunks(BATCH as usize) {
            let view: Vec<_> = chunk
                .iter()
                .map(|o| (o.id, o.version, o.state.as_slice()))
                .collect();
            log.append(&view);
        }
    }
    let mut lat = Vec::new();
    for _ in 0..10 {
        lat.push(timed(|| {
            assert_eq!(Log::recover(&log_path).len(), recover as usize)
        }));
    }
    Stats(lat).row("log", &format!("recovery, read + verify {recover} objects"));
    let t = Instant::now();
    let after_batches = Log::recover(&log_dir.join("../log-batches/log")).len();
    let log_after = t.elapsed();

    println!();
    println!("| file | redb | log |");
    println!("|---|---|---|");
    println!(
        "| after {batches} checkpoint batches | {:.1} MiB | {:.1} MiB |",
        redb_batch_bytes as f64 / 1048576.0,
        log_batch_bytes as f64 / 1048576.0
    );
    println!(
        "| holding {recover} objects | {:.1} MiB | {:.1} MiB |",
        redb_recover_bytes as f64 / 1048576.0,
        size(&log_path) as f64 / 1048576.0
    );
    println!();
    println!(
        "log recovery after the {batches} checkpoint batches (no compaction): {after_batches} objects in {:.1} ms",
        log_after.as_secs_f64() * 1e3
    );
    let _ = std::fs::remove_dir_all(&dir);
}
