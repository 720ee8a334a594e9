//! `dashboard-wire`: what the live dashboard's WebSocket stream costs (issue 17).
//!
//! Runs the model workload (512 nodes × 8 players: about 5,700 objects with items and
//! missiles; `--quick`: 64 × 8), observes it every 100 ms of simulated time as
//! `worldmesh simulate --dashboard` does, publishes each tick to a dashboard hub and
//! measures the frames it would send to a browser that keeps up (deltas) and to one that
//! just connected or fell behind (key frames), against the same information as compact
//! JSON (`[id, x, y, kind, owner]` per object with integer coordinates, the node table
//! every 5th tick as arrays). Also the time to observe and to encode a tick.
//!
//! The figures say why the wire is binary with deltas: see the notes of a run.

use std::sync::Arc;
use std::time::Instant;

use worldmesh_dashboard::observe::class_names;
use worldmesh_dashboard::{Hub, HubConfig, KindInfo, Observer, Rect, Tick, WorldInfo};
use worldmesh_report::Table;
use worldmesh_sim::{SimConfig, scenario};

use crate::claim::{Check, Claim, Estimate, Expect};
use crate::{Context, ExperimentError, Outcome};

const COMPACT: Claim = Claim {
    id: "issue17-compact",
    paper: "issue 17",
    location: "What to build, item 2 (no paper figure)",
    quote: "nodes stream compact stats and object positions to it",
    metric: "bytes/s of the binary delta stream ÷ bytes/s of the same ticks as compact JSON (ours: the design check behind the binary wire)",
    unit: "ratio",
    expect: Expect::Below(1.0),
};
/// Claims of `dashboard-wire`.
pub const CLAIMS: &[Claim] = &[COMPACT];

/// The tick's content as compact JSON (what a JSON protocol would send per frame).
fn json_frame(tick: &Tick, with_nodes: bool) -> usize {
    let objects: Vec<serde_json::Value> = tick
        .objects
        .iter()
        .map(|o| {
            serde_json::json!([
                o.id.as_u64(),
                o.x.round() as i64,
                o.y.round() as i64,
                o.kind,
                o.owner.0
            ])
        })
        .collect();
    let mut v = serde_json::json!({ "t": (tick.time_s * 10.0).round() / 10.0, "o": objects });
    if with_nodes {
        v["n"] = tick
            .nodes
            .iter()
            .map(|n| {
                let mut row = vec![
                    u64::from(n.id.0),
                    u64::from(n.players),
                    u64::from(n.primaries),
                    u64::from(n.replicas),
                    n.missing.map_or(0, u64::from),
                ];
                row.extend(n.sent_bytes.iter().map(|b| b / 1000));
                serde_json::json!(row)
            })
            .collect();
    }
    v.to_string().len()
}

/// Runs the experiment.
pub fn run(ctx: &Context) -> Result<Outcome, ExperimentError> {
    let (nodes, secs) = if ctx.quick { (64, 4.0) } else { (512, 10.0) };
    let warmup = 3.0;
    let cfg = SimConfig {
        nodes,
        players_per_node: 8,
        duration_s: warmup + secs,
        seed: ctx.seed,
        ..SimConfig::default()
    };
    let mut sim = scenario::build(&cfg).map_err(|e| ExperimentError::Run(e.to_string()))?;
    let map = Arc::clone(sim.nodes()[0].world());
    let world = WorldInfo {
        title: format!("{nodes} nodes x 8 players"),
        bounds: Rect::new(0.0, 0.0, map.width, map.height),
        obstacles: map.obstacles.iter().map(Rect::from_aabb).collect(),
        kinds: ["player", "missile", "item"]
            .iter()
            .map(|k| KindInfo {
                name: (*k).into(),
                player: *k == "player",
            })
            .collect(),
        classes: class_names(),
    };
    let config = HubConfig::default();
    let node_every = config.node_every as usize;
    let hub = Hub::new(world.clone(), config);
    let mut observer = Observer::new(&world);
    if ctx.progress {
        eprintln!("  warming up {warmup} s of {nodes} nodes x 8 players");
    }
    sim.run_until(worldmesh_core::Time::from_secs_f64(warmup));
    let ticks = (secs * 10.0).round() as usize;
    let (mut delta, mut key, mut json, mut objects) = (0usize, 0usize, 0usize, 0usize);
    let (mut observe_s, mut encode_s) = (0.0f64, 0.0f64);
    for k in 0..=ticks {
        let t = worldmesh_core::Time::from_secs_f64(warmup + k as f64 / 10.0);
        sim.run_until(t);
        let a = Instant::now();
        let tick = observer.observe(t.as_secs_f64(), sim.nodes(), &|_| true, hub.next_has_nodes());
        let b = Instant::now();
        objects += tick.objects.len();
        if k > 0 {
            json += json_frame(&tick, k % node_every == 0);
        }
        let c = Instant::now();
        hub.publish(tick);
        encode_s += c.elapsed().as_secs_f64();
        observe_s += (b - a).as_secs_f64();
        let (d, kf) = hub
            .last_frame_sizes()
            .ok_or_else(|| ExperimentError::Run("nothing published".into()))?;
        // The first frame has no delta: counted from the second on, for every format.
        if k > 0 {
            delta += d;
            key += kf;
        }
        if ctx.progress && k % 20 == 0 {
            eprintln!("  tick {k}/{ticks}");
        }
    }
    let n = ticks as f64;
    let per_s = |total: usize| total as f64 / n * 10.0;
    let mean_objects = objects as f64 / (n + 1.0);
    let mut table = Table::new(
        format!(
            "dashboard WebSocket stream, {nodes} nodes x 8 players, {mean_objects:.0} objects, 10 frames/s (node table every {node_every}th)"
        ),
        &["encoding", "bytes/frame", "kB/s", "Mbit/s", "bytes/object/frame"],
    );
    for (name, total) in [
        ("binary delta (sent to a browser that keeps up)", delta),
        ("binary key frame (first frame, after a gap)", key),
        ("compact JSON, full state", json),
    ] {
        table.push([
            name.to_string(),
            format!("{:.0}", total as f64 / n),
            format!("{:.1}", per_s(total) / 1000.0),
            format!("{:.2}", per_s(total) * 8.0 / 1e6),
            format!("{:.2}", total as f64 / n / mean_objects),
        ]);
    }
    let notes = vec![
        format!(
            "binary deltas: {:.1} kB/s; key frames only: {:.1} kB/s ({:.1}x); compact JSON: {:.1} kB/s ({:.1}x)",
            per_s(delta) / 1000.0,
            per_s(key) / 1000.0,
            key as f64 / delta.max(1) as f64,
            per_s(json) / 1000.0,
            json as f64 / delta.max(1) as f64
        ),
        format!(
            "per tick: observing the nodes {:.2} ms, encoding {:.2} ms (wall time, {})",
            observe_s / (n + 1.0) * 1000.0,
            encode_s / (n + 1.0) * 1000.0,
            if cfg!(debug_assertions) {
                "debug build"
            } else {
                "release build"
            }
        ),
    ];
    let files = vec![
        ctx.out.write_csv("dashboard_wire.csv", &table)?,
        ctx.out.write_json(
            "dashboard_wire.json",
            &serde_json::json!({
                "nodes": nodes, "objects_mean": mean_objects, "frames": ticks,
                "delta_bytes_per_s": per_s(delta), "key_bytes_per_s": per_s(key),
                "json_bytes_per_s": per_s(json),
                "observe_ms_per_tick": observe_s / (n + 1.0) * 1000.0,
                "encode_ms_per_tick": encode_s / (n + 1.0) * 1000.0,
            }),
        )?,
    ];
    let checks = vec![Check::new(
        COMPACT,
        Estimate::exact(delta as f64 / json.max(1) as f64),
        format!(
            "{nodes} nodes x 8 players of the model workload, one tick every 100 ms of simulated time, seed {}",
            ctx.seed
        ),
    )];
    Ok(Outcome {
        tables: vec![table],
        files,
        notes,
        checks,
    })
}
