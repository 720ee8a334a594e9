//! `sim-speed`: how much faster than real time the simulator runs (issue 2 benchmark).
//!
//! Runs the default `worldmesh simulate` scenario (64 nodes × 8 players of the model
//! workload, 60 s of game time, PlanetLab delays, Colyseus replication) and a sweep over the number of nodes, and
//! reports simulated seconds per wall-clock second. Wall time is measured here, in an
//! experiment, never asserted in a test.

use std::time::Instant;
use worldmesh_report::{LinePlot, Series, Table};
use worldmesh_sim::{SimConfig, scenario};

use crate::{Context, ExperimentError, Outcome};

/// Runs the experiment.
pub fn run(ctx: &Context) -> Result<Outcome, ExperimentError> {
    let sizes: &[usize] = if ctx.quick {
        &[4, 8, 16]
    } else {
        &[16, 32, 64, 128]
    };
    let duration = if ctx.quick { 5.0 } else { 60.0 };
    let mut table = Table::new(
        "simulator speed (Colyseus model workload, fed-rect: 8 players per node, PlanetLab delays)",
        &[
            "nodes",
            "players",
            "simulated s",
            "wall s",
            "simulated/wall",
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
            format!("{ratio:.1}x"),
            report.network.sent.to_string(),
            format!("{:.0}", report.network.sent as f64 / wall),
        ]);
        points.push((nodes as f64, ratio));
        rows.push(serde_json::json!({
            "nodes": nodes, "players": nodes * 8, "sim_seconds": report.sim_seconds,
            "wall_seconds": wall, "ratio": ratio, "datagrams": report.network.sent,
        }));
        if ctx.progress {
            eprintln!("  {nodes} nodes: {ratio:.1}x real time");
        }
    }
    let plot = LinePlot::new(
        "Simulator speed",
        "nodes (8 players each)",
        "simulated s / wall s",
    )
    .with(Series::marked("fed-rect, PlanetLab", points.clone()));
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
                "default scenario (64 nodes x 8 players, 60 s): {r:.1}x faster than real time (target: >= 5x)"
            )]
        })
        .unwrap_or_default();
    Ok(Outcome {
        tables: vec![table],
        files,
        notes,
    })
}
