//! `view-missing`: how many replicas a node misses at a time, and where the missing ones
//! are — paper `000` §7, Figure 13(b) (CDF of the number of missing objects per node and
//! time instance, 40-fed game, at 0, 100 and 400 ms) and Figure 13(c) (distance of a
//! player to the objects in its area of interest vs to the missing ones).
//!
//! The paper measured its Quake II port; we run the model workload (40 nodes × 8 players,
//! rect map, the `rangedht` locator the paper's Quake II runs used) in the simulator with
//! the metrics collector's view detail on (`worldmesh_sim::metrics::ViewDetail`): at every
//! frame, for every node, the number of required replicas it lacks (per grace), and for
//! every required remote object the distance from the node's nearest interested primary,
//! measured from where that primary looks (the centre of its area of interest: a dead player
//! already looks at its respawn point — measuring from its body put 12 % of required objects
//! thousands of units away and made missing ones look 2.9× farther).

use worldmesh_game::MapKind;
use worldmesh_report::{Plot, Series, Table};
use worldmesh_sim::metrics::{DIST_BUCKET, ViewDetail};
use worldmesh_sim::scenario;

use crate::claim::{Better, Check, Claim, Estimate, Expect, Tol};
use crate::colyseus::{PAPER_LOCATOR, sim_config, times};
use crate::stats::parallel;
use crate::{Context, ExperimentError, Outcome};

const NONE_0: Claim = Claim {
    id: "fig13b-none-missing-0ms",
    paper: "000",
    location: "§7, Figure 13(b)",
    quote: "About 40% of the time, a node is missing no replicas; this improves to about 60% of the time if we wait 100ms for a replica to arrive and to over 80% of the time if we wait 400ms for a replica to arrive.",
    metric: "share of (node, frame) samples in which the node lacks none of the replicas its primaries require, 0 ms grace, 40-fed-rect",
    unit: "%",
    expect: Expect::Value {
        value: 40.0,
        tol: Tol::Abs(10.0),
        better: Better::Higher,
    },
};
const NONE_100: Claim = Claim {
    id: "fig13b-none-missing-100ms",
    paper: "000",
    location: "§7, Figure 13(b)",
    quote: "About 40% of the time, a node is missing no replicas; this improves to about 60% of the time if we wait 100ms for a replica to arrive and to over 80% of the time if we wait 400ms for a replica to arrive.",
    metric: "the same share counting only replicas required for at least 100 ms",
    unit: "%",
    expect: Expect::Value {
        value: 60.0,
        tol: Tol::Abs(10.0),
        better: Better::Higher,
    },
};
const NONE_400: Claim = Claim {
    id: "fig13b-none-missing-400ms",
    paper: "000",
    location: "§7, Figure 13(b)",
    quote: "About 40% of the time, a node is missing no replicas; this improves to about 60% of the time if we wait 100ms for a replica to arrive and to over 80% of the time if we wait 400ms for a replica to arrive.",
    metric: "the same share counting only replicas required for at least 400 ms",
    unit: "%",
    expect: Expect::Above(80.0),
};
const REQUIRED: Claim = Claim {
    id: "fig13b-required-23",
    paper: "000",
    location: "§7, Figure 13(b)",
    quote: "On average, a node requires 23 remote replicas at a given time instance.",
    metric: "remote objects a node's primaries are interested in, mean over (node, frame) samples, 40-fed-rect (a property of the workload: ours is the model workload, theirs Quake II)",
    unit: "replicas",
    expect: Expect::Value {
        value: 23.0,
        tol: Tol::Rel(0.3),
        better: Better::Neither,
    },
};
const PERIPHERY: Claim = Claim {
    id: "fig13c-missing-farther",
    paper: "000",
    location: "§7, Figure 13(c)",
    quote: "Replicas that are missing from a view tend to be closer to the periphery of object subscriptions (and hence, farther away from the subscriber and probably less important).",
    metric: "median distance from the point of view (centre of the area of interest) of the node's nearest interested primary to missing required objects ÷ to all required objects (0 ms grace)",
    unit: "ratio",
    expect: Expect::Above(1.0),
};
/// Claims of `view-missing`.
pub const CLAIMS: &[Claim] = &[NONE_0, NONE_100, NONE_400, REQUIRED, PERIPHERY];

fn hist_quantile(h: &[u64], q: f64) -> f64 {
    let total: u64 = h.iter().sum();
    let target = (q * total as f64).ceil().max(1.0) as u64;
    let mut acc = 0;
    for (i, c) in h.iter().enumerate() {
        acc += c;
        if acc >= target {
            return i as f64;
        }
    }
    h.len() as f64
}

fn hist_cdf(h: &[u64], scale: f64) -> Vec<(f64, f64)> {
    let total = h.iter().sum::<u64>().max(1) as f64;
    let last = h.iter().rposition(|c| *c > 0).unwrap_or(0);
    let mut acc = 0u64;
    let mut pts = vec![(0.0, 0.0)];
    for (i, c) in h.iter().enumerate().take(last + 1) {
        acc += c;
        pts.push((i as f64 * scale, acc as f64 / total));
    }
    pts
}

/// The CDF of a distance histogram (buckets of `DIST_BUCKET` units), one point per bucket at
/// its upper edge: the fraction of distances below it.
fn dist_cdf(h: &[u64]) -> Vec<(f64, f64)> {
    let total = h.iter().sum::<u64>().max(1) as f64;
    let last = h.iter().rposition(|c| *c > 0).unwrap_or(0);
    let mut acc = 0u64;
    let width = f64::from(DIST_BUCKET);
    let mut pts = vec![(0.0, 0.0)];
    pts.extend(h.iter().take(last + 1).enumerate().map(|(i, c)| {
        acc += c;
        ((i + 1) as f64 * width, acc as f64 / total)
    }));
    pts
}

/// Runs the experiment.
pub fn run(ctx: &Context) -> Result<Outcome, ExperimentError> {
    let (nodes, per) = if ctx.quick { (8, 8) } else { (40, 8) };
    let seeds = ctx.seeds();
    let runs = parallel(
        ctx.threads,
        &seeds,
        |seed| -> Result<(ViewDetail, f64), ExperimentError> {
            let mut cfg = sim_config(ctx, nodes, per, MapKind::Rect, times(ctx));
            cfg.seed = *seed;
            cfg.locator.kind = PAPER_LOCATOR.into();
            let mut sim = scenario::build(&cfg).map_err(|e| ExperimentError::Run(e.to_string()))?;
            if let Some(c) = sim.collector_mut() {
                c.record_view_detail();
            }
            sim.run_until(worldmesh_core::Time::from_secs_f64(cfg.duration_s));
            let rep = scenario::report(&cfg, &sim);
            let detail = sim
                .collector()
                .and_then(|c| c.view_detail().cloned())
                .ok_or_else(|| ExperimentError::Run("no view detail recorded".into()))?;
            if ctx.progress {
                eprintln!(
                    "  view-missing seed {seed}: {:.1} required per node",
                    rep.metrics.required_per_node
                );
            }
            Ok((detail, rep.metrics.required_per_node))
        },
    )?;
    let none = |d: &ViewDetail, g: usize| {
        let h = &d.missing_per_node[g];
        100.0 * h[0] as f64 / h.iter().sum::<u64>().max(1) as f64
    };
    let est = |f: &dyn Fn(&(ViewDetail, f64)) -> f64| Estimate::of(&runs.iter().map(f).collect::<Vec<_>>());
    let (d, w) = times(ctx);
    let cond = format!(
        "{nodes}-fed-rect ({per} players per node), {PAPER_LOCATOR} locator, model workload (theirs: Quake II), PlanetLab latencies; {d:.0} s runs ({w:.0} s warm-up); {} seeds from {}",
        seeds.len(),
        ctx.seed
    );
    let ratio =
        |x: &ViewDetail| hist_quantile(&x.dist_missing, 0.5) / hist_quantile(&x.dist_required, 0.5).max(1e-9);
    let checks = vec![
        Check::new(NONE_0, est(&|r| none(&r.0, 0)), cond.clone()),
        Check::new(NONE_100, est(&|r| none(&r.0, 1)), cond.clone()),
        Check::new(NONE_400, est(&|r| none(&r.0, 2)), cond.clone()),
        Check::new(REQUIRED, est(&|r| r.1), cond.clone()),
        Check::new(PERIPHERY, est(&|r| ratio(&r.0)), cond),
    ];
    // Figures from the pooled histograms.
    let mut pooled = runs[0].0.clone();
    for (r, _) in &runs[1..] {
        for g in 0..3 {
            for (a, b) in pooled.missing_per_node[g].iter_mut().zip(&r.missing_per_node[g]) {
                *a += b;
            }
        }
        // Histograms end at the largest distance their run saw.
        let len = pooled.dist_required.len().max(r.dist_required.len());
        pooled.dist_required.resize(len, 0);
        pooled.dist_missing.resize(len, 0);
        for (a, b) in pooled.dist_required.iter_mut().zip(&r.dist_required) {
            *a += b;
        }
        for (a, b) in pooled.dist_missing.iter_mut().zip(&r.dist_missing) {
            *a += b;
        }
    }
    let mut b = Plot::of(
        "paper 000 Fig. 13b",
        format!(
            "CDF of the number of replicas a node is missing at a time instance, {nodes}-fed-rect ({} seeds pooled)",
            seeds.len()
        ),
        "missing replicas per node and frame",
        "fraction of (node, frame) samples",
    );
    for (g, name) in ["0 ms", "100 ms", "400 ms"].iter().enumerate() {
        b = b.with(Series::step(
            format!("wait {name}"),
            hist_cdf(&pooled.missing_per_node[g], 1.0),
        ));
    }
    let c = Plot::of(
        "paper 000 Fig. 13c",
        format!("CDF of the distance from a player to the objects in its area of interest and to the missing ones, {nodes}-fed-rect"),
        "distance from the nearest interested primary's point of view (game units, buckets of 10)",
        "fraction of objects",
    )
    .with(Series::step("objects in the area of interest", dist_cdf(&pooled.dist_required)))
    .with(Series::step("missing objects (0 ms)", dist_cdf(&pooled.dist_missing)));
    let mut t = Table::new(
        format!("paper 000 Figure 13(b): missing replicas per node and frame, {nodes}-fed-rect, per seed"),
        &[
            "seed",
            "required per node",
            "none missing 0 ms (%)",
            "none missing 100 ms (%)",
            "none missing 400 ms (%)",
            "median distance, required (units)",
            "median distance, missing (units)",
        ],
    );
    for (s, (dt, req)) in seeds.iter().zip(&runs) {
        t.push([
            s.to_string(),
            format!("{req:.2}"),
            format!("{:.2}", none(dt, 0)),
            format!("{:.2}", none(dt, 1)),
            format!("{:.2}", none(dt, 2)),
            format!(
                "{:.0}",
                hist_quantile(&dt.dist_required, 0.5) * f64::from(DIST_BUCKET)
            ),
            format!(
                "{:.0}",
                hist_quantile(&dt.dist_missing, 0.5) * f64::from(DIST_BUCKET)
            ),
        ]);
    }
    let files = vec![
        ctx.out.write_plot("figure13b_missing_cdf.svg", &b)?,
        ctx.out.write_plot("figure13c_distance_cdf.svg", &c)?,
        ctx.out.write_csv("figure13b.csv", &t)?,
    ];
    Ok(Outcome {
        tables: vec![t],
        files,
        notes: vec![],
        checks,
    })
}
