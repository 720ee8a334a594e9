//! `persist-cost`: what persistence costs a node (issue 19's benchmark).
//!
//! Three measurements, each on the real store (`worldmesh_store`, redb, fsync on every
//! batch) in the experiment's output folder, with batches applied on a thread of their own
//! as the real driver does (`net::persister`):
//!
//! 1. **Frame-time overhead of checkpointing.** Two identical nodes of the model game, each
//!    holding 2,000 avatars (`Checkpointed`; `--quick`: 500) and the items (`Durable`),
//!    run the same frames at 20 Hz of simulated time, one without persistence and one
//!    checkpointing every 20 frames (one second). Each frame's `handle_timeout` is timed
//!    on the wall clock for both, back to back, so both see the same machine load; the
//!    overhead is the difference of the means (and of the checkpoint frames alone), as a
//!    share of the 50 ms frame budget. The store thread runs meanwhile on the other core.
//! 2. **Durable-write latency.** Two nodes in one process, frames paced at 20 Hz on the
//!    wall clock, datagrams handed over at once: node B writes to one of node A's items
//!    (`Durable`) every frame; the latency of a write is from its issue at B to the
//!    acknowledgement's arrival at B (A applies it, logs it in its next frame's batch,
//!    the store applies it, A acknowledges it in the next frame after the completion).
//!    Without backups, and with one (B: the acknowledgement then also waits for B to
//!    acknowledge a version containing the write).
//! 3. **Recovery time.** A store holding 10,000 avatars' records (`--quick`: 2,000):
//!    opening the file (redb's integrity check), loading and verifying every record, and
//!    installing them in a node (`Node::recover`, every state decoded).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use worldmesh_core::{Durability, NodeId, ObjectId, Time};
use worldmesh_game::{GameMap, GameWrite, ModelConfig, ModelObject, workload};
use worldmesh_node::{Mode, Node, NodeConfig, PersistConfig, PersistRequest};
use worldmesh_replica::GameObject;
use worldmesh_report::Table;
use worldmesh_store::{Batch, ObjectRecord, Store};

use crate::claim::{Check, Claim, Estimate, Expect};
use crate::{Context, ExperimentError, Outcome};

const FRAME: Duration = Duration::from_millis(50);

const OVERHEAD: Claim = Claim {
    id: "issue19-frame-overhead",
    paper: "issue 19",
    location: "Acceptance, benchmark (no paper figure)",
    quote: "frame-time overhead of checkpointing at 2,000 objects per node (target ≤ 5% of the frame budget at 20 Hz)",
    metric: "mean wall-clock work per 20 Hz frame of a node holding 2,000 avatars checkpointed every 20 frames, minus the same node's without persistence (frames timed back to back), as % of the 50 ms budget; release build, one run",
    unit: "% of frame",
    expect: Expect::Below(5.0),
};
/// Claims of `persist-cost`.
pub const CLAIMS: &[Claim] = &[OVERHEAD];

/// The store's thread: batches in, (id, apply time) out, in order.
struct StoreThread {
    tx: Option<mpsc::Sender<PersistRequest>>,
    done: mpsc::Receiver<Result<(u64, Duration), String>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl StoreThread {
    fn start(mut store: Store) -> Self {
        let (tx, rx) = mpsc::channel::<PersistRequest>();
        let (dtx, done) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            for r in rx {
                let t0 = Instant::now();
                let res = store.apply(&r.batch).map(|()| (r.id, t0.elapsed()));
                if dtx.send(res.map_err(|e| e.to_string())).is_err() {
                    return;
                }
            }
        });
        Self {
            tx: Some(tx),
            done,
            thread: Some(thread),
        }
    }

    fn send(&self, r: PersistRequest) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(r);
        }
    }

    /// Completions so far: reported to `node`, apply times appended to `times`.
    fn poll<O: GameObject>(
        &self,
        node: &mut Node<O>,
        now: Time,
        times: &mut Vec<f64>,
    ) -> Result<(), ExperimentError> {
        while let Ok(r) = self.done.try_recv() {
            let (id, took) = r.map_err(ExperimentError::Run)?;
            times.push(took.as_secs_f64() * 1000.0);
            node.handle_persisted(now, id);
        }
        Ok(())
    }

    fn finish(mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn store_in(ctx: &Context, name: &str) -> Result<Store, ExperimentError> {
    let dir = ctx.out.path(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| ExperimentError::Run(format!("{}: {e}", dir.display())))?;
    Store::open(&dir).map_err(|e| ExperimentError::Run(e.to_string()))
}

fn quantile(v: &[f64], q: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        return f64::NAN;
    }
    s[((s.len() - 1) as f64 * q).round() as usize]
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// A node of the model game holding `players` avatars and the items, at 20 Hz.
fn world_node(players: usize, seed: u64, persist: bool) -> Node<ModelObject> {
    let map = GameMap::generate(&ModelConfig::default(), players, seed);
    let objects = workload::initial_objects(&map, 1, players, seed);
    let mut cfg = NodeConfig::new(NodeId(0), vec![], seed).with_mode(Mode::Broadcast);
    cfg.frame_interval = FRAME;
    if persist {
        cfg.persist = Some(PersistConfig { checkpoint_every: 20 });
    }
    let mut node = Node::new(cfg, Arc::new(map), Time::ZERO);
    for o in objects.into_iter().flatten() {
        node.spawn(Time::ZERO, o);
    }
    node
}

struct FrameCost {
    plain_ms: Vec<f64>,
    persist_ms: Vec<f64>,
    checkpoint_frames: Vec<usize>,
    apply_ms: Vec<f64>,
    objects: usize,
}

fn frame_overhead(ctx: &Context, players: usize, frames: usize) -> Result<FrameCost, ExperimentError> {
    let mut plain = world_node(players, ctx.seed, false);
    let mut persisting = world_node(players, ctx.seed, true);
    let store = StoreThread::start(store_in(ctx, "store-frames")?);
    let mut out = FrameCost {
        plain_ms: Vec::with_capacity(frames),
        persist_ms: Vec::with_capacity(frames),
        checkpoint_frames: Vec::new(),
        apply_ms: Vec::new(),
        objects: persisting.store().primary_count(),
    };
    // A second of warm-up: the first batch holds every object.
    let warm = 20;
    for f in 0..warm + frames {
        let now = Time::ZERO + FRAME * f as u32;
        let a = Instant::now();
        plain.handle_timeout(now);
        let b = Instant::now();
        persisting.handle_timeout(now);
        let c = Instant::now();
        let mut checkpoint = false;
        while let Some(r) = persisting.poll_persist() {
            checkpoint |= r.batch.checkpoint_marker().is_some();
            store.send(r);
        }
        while plain.poll_transmit().is_some() {}
        while persisting.poll_transmit().is_some() {}
        while plain.poll_event().is_some() {}
        while persisting.poll_event().is_some() {}
        store.poll(&mut persisting, now, &mut out.apply_ms)?;
        if f >= warm {
            out.plain_ms.push((b - a).as_secs_f64() * 1000.0);
            out.persist_ms.push((c - b).as_secs_f64() * 1000.0);
            if checkpoint {
                out.checkpoint_frames.push(f - warm);
            }
        }
        if ctx.progress && f % 100 == 0 {
            eprintln!("  frame {f}/{}", warm + frames);
        }
    }
    store.finish();
    Ok(out)
}

/// Write latencies (ms) of durable writes from node B to an item of node A, over `secs`
/// of wall-clock time at 20 Hz.
fn write_latency(ctx: &Context, secs: f64, backups: usize) -> Result<(Vec<f64>, Vec<f64>), ExperimentError> {
    let seed = ctx.seed;
    let map = Arc::new(GameMap::generate(&ModelConfig::default(), 8, seed));
    let items: Vec<ModelObject> = workload::initial_objects(&map, 1, 0, seed)
        .into_iter()
        .flatten()
        .collect();
    let mk = |id: u32, persist: bool| {
        let mut cfg = NodeConfig::new(NodeId(id), vec![NodeId(1 - id)], seed).with_mode(Mode::Broadcast);
        cfg.frame_interval = FRAME;
        cfg.replica.backups = backups;
        if persist {
            cfg.persist = Some(PersistConfig { checkpoint_every: 20 });
        }
        Node::new(cfg, Arc::clone(&map), Time::ZERO)
    };
    let mut a = mk(0, true);
    let mut b = mk(1, false);
    let mut target = None;
    for o in items {
        let durable = o.durability() == Durability::Durable;
        let id = a.spawn(Time::ZERO, o);
        if durable && target.is_none() {
            target = Some(id);
        }
    }
    let target = target.ok_or_else(|| ExperimentError::Run("the model world has no item".into()))?;
    let store = StoreThread::start(store_in(ctx, &format!("store-writes-{backups}"))?);
    let mut apply_ms = Vec::new();
    let mut issued: BTreeMap<u64, Instant> = BTreeMap::new();
    let mut latencies = Vec::new();
    let start = Instant::now();
    let mut next_frame = start;
    let mut seq = 0u64;
    while start.elapsed().as_secs_f64() < secs {
        let wall = Instant::now();
        let now = Time::ZERO + wall.duration_since(start);
        if wall >= next_frame {
            next_frame += FRAME;
            if b.store().get(target).is_some() {
                b.write(now, target, &GameWrite::Damage(1));
                seq += 1;
                issued.insert(seq, Instant::now());
            }
            a.handle_timeout(now);
            b.handle_timeout(now);
        }
        while let Some(r) = a.poll_persist() {
            store.send(r);
        }
        store.poll(&mut a, now, &mut apply_ms)?;
        while let Some(t) = a.poll_transmit() {
            b.handle_datagram(now, NodeId(0), &t.datagram);
        }
        while let Some(t) = b.poll_transmit() {
            a.handle_datagram(now, NodeId(1), &t.datagram);
        }
        while a.poll_event().is_some() {}
        while b.poll_event().is_some() {}
        let pending: std::collections::BTreeSet<u64> = b
            .replicas()
            .pending_write_ids()
            .filter(|(id, _)| *id == target)
            .map(|(_, s)| s)
            .collect();
        let acked: Vec<u64> = issued.keys().copied().filter(|s| !pending.contains(s)).collect();
        for s in acked {
            if let Some(t) = issued.remove(&s) {
                latencies.push(t.elapsed().as_secs_f64() * 1000.0);
            }
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    store.finish();
    Ok((latencies, apply_ms))
}

/// (open + load ms, recover ms, records) for a store of `n` avatars.
fn recovery(ctx: &Context, n: usize) -> Result<(f64, f64, usize), ExperimentError> {
    let node = world_node(n, ctx.seed, true);
    let mut batch = Batch::new();
    let mut state = Vec::new();
    for (id, e) in node.store().iter() {
        if e.object.durability() == Durability::Ephemeral {
            continue;
        }
        state.clear();
        e.object.encode_state(&mut state);
        batch.put_object(ObjectRecord {
            id,
            epoch: 0,
            version: e.version,
            durability: e.object.durability(),
            kind: e.object.kind(),
            state: state.clone(),
        });
    }
    let mut store = store_in(ctx, "store-recovery")?;
    store
        .apply(&batch)
        .map_err(|e| ExperimentError::Run(e.to_string()))?;
    let dir = store
        .path()
        .parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or_default();
    drop(store);
    // The world the node runs, built before the clock starts (not part of recovery).
    let map = GameMap::generate(&ModelConfig::default(), n, ctx.seed);
    let t0 = Instant::now();
    let store = Store::open(&dir).map_err(|e| ExperimentError::Run(e.to_string()))?;
    let rec = store.load().map_err(|e| ExperimentError::Run(e.to_string()))?;
    let t1 = Instant::now();
    let records = rec.objects.len();
    let mut cfg = NodeConfig::new(NodeId(0), vec![], ctx.seed).with_mode(Mode::Broadcast);
    cfg.persist = Some(PersistConfig::default());
    let mut fresh: Node<ModelObject> = Node::new(cfg, Arc::new(map), Time::from_secs_f64(10.0));
    fresh
        .recover(Time::from_secs_f64(10.0), rec)
        .map_err(|e| ExperimentError::Run(e.to_string()))?;
    let t2 = Instant::now();
    let back: Vec<ObjectId> = fresh.store().primary_ids();
    if back.len() != records {
        return Err(ExperimentError::Run(format!(
            "recovered {} of {records} records",
            back.len()
        )));
    }
    Ok((
        (t1 - t0).as_secs_f64() * 1000.0,
        (t2 - t1).as_secs_f64() * 1000.0,
        records,
    ))
}

/// Runs the experiment.
pub fn run(ctx: &Context) -> Result<Outcome, ExperimentError> {
    let (players, frames, secs, recover_n) = if ctx.quick {
        (500, 100, 2.0, 2_000)
    } else {
        (2_000, 600, 10.0, 10_000)
    };
    if ctx.progress {
        eprintln!("  frame overhead: {players} avatars, {frames} frames");
    }
    let fc = frame_overhead(ctx, players, frames)?;
    let overhead_ms = mean(&fc.persist_ms) - mean(&fc.plain_ms);
    let budget_ms = FRAME.as_secs_f64() * 1000.0;
    let ck: Vec<f64> = fc
        .checkpoint_frames
        .iter()
        .map(|i| fc.persist_ms[*i] - fc.plain_ms[*i])
        .collect();
    if ctx.progress {
        eprintln!("  durable-write latency: {secs} s at 20 Hz");
    }
    let (lat, write_apply) = write_latency(ctx, secs, 0)?;
    let (lat_b, _) = write_latency(ctx, secs, 1)?;
    if ctx.progress {
        eprintln!("  recovery of {recover_n} avatars");
    }
    let (load_ms, recover_ms, records) = recovery(ctx, recover_n)?;

    let build = if cfg!(debug_assertions) {
        "debug build"
    } else {
        "release build"
    };
    let mut table = Table::new(
        format!("persistence cost (issue 19), real store, {build}"),
        &["measurement", "value", "p50", "p99", "samples"],
    );
    // A row of samples: mean, p50, p99 and how many, with `d` decimals.
    let mut samples = |name: String, v: &[f64], d: usize| {
        table.push([
            name,
            format!("{:.d$}", mean(v)),
            format!("{:.d$}", quantile(v, 0.5)),
            format!("{:.d$}", quantile(v, 0.99)),
            v.len().to_string(),
        ]);
    };
    samples(
        format!("frame work without persistence ({} objects), ms", fc.objects),
        &fc.plain_ms,
        3,
    );
    samples(
        "frame work with a checkpoint every 20 frames, ms".into(),
        &fc.persist_ms,
        3,
    );
    samples("overhead of a checkpoint frame, ms".into(), &ck, 3);
    samples(
        "store apply of a frame's batch (other thread), ms".into(),
        &fc.apply_ms,
        3,
    );
    samples("durable write, issue to acknowledgement, ms".into(), &lat, 2);
    samples(
        "the same with 1 backup (the acknowledgement also waits for it), ms".into(),
        &lat_b,
        2,
    );
    samples("store apply of a write's batch, ms".into(), &write_apply, 3);
    for (name, v) in [
        (
            "overhead per frame, % of the 50 ms budget".to_string(),
            overhead_ms / budget_ms * 100.0,
        ),
        (
            format!("recovery of {records} records: open + load + verify, ms"),
            load_ms,
        ),
        (
            format!("recovery of {records} records: install in the node, ms"),
            recover_ms,
        ),
    ] {
        table.push([name, format!("{v:.2}"), String::new(), String::new(), "1".into()]);
    }
    let per_10k = (load_ms + recover_ms) * 10_000.0 / records.max(1) as f64;
    let notes = vec![
        format!(
            "checkpointing {} objects every 20 frames costs {overhead_ms:.3} ms per frame on average ({:.2}% of the 50 ms budget at 20 Hz); a checkpoint frame {:.3} ms more than the same frame without persistence (p99 {:.3} ms)",
            fc.objects,
            overhead_ms / budget_ms * 100.0,
            mean(&ck),
            quantile(&ck, 0.99)
        ),
        format!(
            "a durable write is acknowledged {:.1} ms after its issue (p50; p99 {:.1} ms): it waits for the primary's frame end, the store's fsync ({:.2} ms p50), and the primary's next frame, which carries the acknowledgement",
            quantile(&lat, 0.5),
            quantile(&lat, 0.99),
            quantile(&write_apply, 0.5)
        ),
        format!(
            "with a backup (worldmesh node runs 2) the acknowledgement also waits until the backup acknowledged a version containing the write: {:.1} ms p50, {:.1} ms p99",
            quantile(&lat_b, 0.5),
            quantile(&lat_b, 0.99)
        ),
        format!(
            "recovery: {per_10k:.0} ms per 10,000 objects (open with redb's integrity check, load and verify every record, decode and install every state)"
        ),
        format!("wall-clock figures, {build}, on this machine with whatever else it ran"),
    ];
    let files = vec![
        ctx.out.write_csv("persist_cost.csv", &table)?,
        ctx.out.write_json(
            "persist_cost.json",
            &serde_json::json!({
                "objects": fc.objects,
                "frames": fc.plain_ms.len(),
                "plain_frame_ms_mean": mean(&fc.plain_ms),
                "persist_frame_ms_mean": mean(&fc.persist_ms),
                "overhead_pct_of_frame": overhead_ms / budget_ms * 100.0,
                "checkpoint_frame_overhead_ms_p99": quantile(&ck, 0.99),
                "frame_batch_apply_ms_p50": quantile(&fc.apply_ms, 0.5),
                "frame_batch_apply_ms_p99": quantile(&fc.apply_ms, 0.99),
                "durable_write_ms_p50": quantile(&lat, 0.5),
                "durable_write_ms_p99": quantile(&lat, 0.99),
                "durable_writes": lat.len(),
                "durable_write_1_backup_ms_p50": quantile(&lat_b, 0.5),
                "durable_write_1_backup_ms_p99": quantile(&lat_b, 0.99),
                "recovery_records": records,
                "recovery_load_ms": load_ms,
                "recovery_install_ms": recover_ms,
                "recovery_ms_per_10k": per_10k,
            }),
        )?,
    ];
    let checks = vec![Check::new(
        OVERHEAD,
        Estimate::exact(overhead_ms / budget_ms * 100.0),
        format!(
            "{} objects on one node ({players} avatars checkpointed every 20 frames, items durable), {} frames of 50 ms, store on this machine's disk, {build}",
            fc.objects,
            fc.plain_ms.len()
        ),
    )];
    Ok(Outcome {
        tables: vec![table],
        files,
        notes,
        checks,
    })
}
