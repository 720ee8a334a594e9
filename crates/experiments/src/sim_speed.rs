//! `sim-speed`: how much faster than real time the simulator runs (issue 2 benchmark).
//!
//! Runs the default `worldmesh simulate` scenario (64 nodes × 8 players of the model
//! workload, 60 s of game time, PlanetLab delays, Colyseus replication) and a sweep over the number of nodes, and
//! reports simulated seconds per wall-clock second. Wall time is measured here, in an
//! experiment, never asserted in a test.

use std::time::Instant;
use worldmesh_report::{Plot, Series, Table};
use worldmesh_sim::{SimConfig, scenario};

use crate::claim::{Check, Claim, Estimate, Expect};
use crate::{Context, ExperimentError, Outcome};

const SPEED: Claim = Claim {
    id: "brief-20x",
    paper: "brief",
    location: "§7 (performance ambitions; no paper figure)",
    quote: "Simulator: the default `worldmesh simulate` scenario ≥ 20× real time",
    metric: "simulated seconds ÷ wall-clock seconds of the default scenario (64 nodes × 8 players, 60 s, PlanetLab, one thread); wall time depends on the machine's other load",
    unit: "ratio",
    expect: Expect::Above(20.0),
};
/// Claims of `sim-speed`.
pub const CLAIMS: &[Claim] = &[SPEED];

/// Runs the experiment.
pub fn run(ctx: &Context) -> Result<Outcome, ExperimentError> {
    let sizes: &[usize] = if ctx.quick {
        &[4, 8, 16]
    } else {
        &[16, 32, 64, 128]
    };
    let mut checks = Vec::new();
    let duration = if ctx.quick { 5.0 } else { 60.0 };
    let mut table = Table::new(
        "simulator speed (Colyseus model workload, fed-rect: 8 players per node, PlanetLab delays)",
        &[
            "nodes",
            "players",
            "simulated s",
            "wall s",
            "simulated s per wall s",
            "datagrams",
            "datagrams/wall s",
        ],
    );
    let mut points = Vec::new();
    let mut rows = Vec::new();
    for &nodes in sizes {
        let cfg = SimConfig {
            nodes,
            players_per_node: 8,
            duration_s: duration,
            warmup_s: if ctx.quick { 1.0 } else { 5.0 },
            seed: ctx.seed,
            ..SimConfig::default()
        };
        let started = Instant::now();
        let report = scenario::run(&cfg, &mut |_| {}).map_err(|e| ExperimentError::Run(e.to_string()))?;
        let wall = started.elapsed().as_secs_f64().max(1e-9);
        let ratio = report.sim_seconds / wall;
        table.push([
            nodes.to_string(),
            (nodes * 8).to_string(),
            format!("{:.0}", report.sim_seconds),
            format!("{wall:.2}"),
            format!("{ratio:.2}"),
            report.network.sent.to_string(),
            format!("{:.0}", report.network.sent as f64 / wall),
        ]);
        points.push((nodes as f64, ratio));
        if nodes == 64 && !ctx.quick {
            checks.push(Check::new(
                SPEED,
                Estimate::exact(ratio),
                "64 nodes x 8 players, 60 s of game time, PlanetLab, seed 1, one run; the machine's other load included",
            ));
        }
        rows.push(serde_json::json!({
            "nodes": nodes, "players": nodes * 8, "sim_seconds": report.sim_seconds,
            "wall_seconds": wall, "ratio": ratio, "datagrams": report.network.sent,
        }));
        if ctx.progress {
            eprintln!("  {nodes} nodes: {ratio:.1}x real time");
        }
    }
    let plot = Plot::of(
        "ours (brief §7 target, no paper figure)",
        "simulator speed, Colyseus model workload, 8 players per node",
        "nodes (8 players each)",
        "simulated s per wall-clock s",
    )
    .with(Series::marked("fed-rect, PlanetLab", points.clone()))
    .with_hline("target: 20x real time", 20.0);
    let mut files = vec![
        ctx.out.write_csv("sim_speed.csv", &table)?,
        ctx.out.write_plot("sim_speed.svg", &plot)?,
    ];
    files.push(
        ctx.out
            .write_json("sim_speed.json", &serde_json::json!({ "runs": rows }))?,
    );
    let notes = points
        .iter()
        .find(|(n, _)| *n == 64.0)
        .map(|(_, r)| {
            vec![format!(
                "default scenario (64 nodes x 8 players, 60 s): {r:.1}x faster than real time (brief target: >= 20x)"
            )]
        })
        .unwrap_or_default();
    Ok(Outcome {
        tables: vec![table],
        files,
        notes,
        checks,
    })
}
