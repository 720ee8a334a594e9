//! `loadbal`: per-node matching load and bandwidth imbalance (max / mean) for `dht`,
//! `rangedht` and `rangedht` with leave-rejoin load balancing, each `rangedht` keyed by
//! `x` and by the Hilbert curve (issue 4) — paper `000` §6.3 Table 2
//! (96-fed-rect), on the locator harness with the moving-player workload (8 players per
//! node, Zipf-popular waypoints, PlanetLab link delays).
//!
//! Matching load = publications and subscriptions stored per second at a node as a
//! rendezvous (the paper's load measure); matching bandwidth = match-delivery bytes sent.
//! Both are averaged over the measured window, after a warm-up long enough for the 30-s
//! load window to fill and for balancing to act.

use std::time::Duration;

use serde_json::json;
use worldmesh_locator::scenario::{NodeRates, ScenarioResult, run as run_scenario};
use worldmesh_locator::{Keying, RangeKey};
use worldmesh_report::{LinePlot, Series, Table};

use crate::locator_runs::{delay, matrix, spec};
use crate::{Context, ExperimentError, Outcome};

fn imbalance(r: &ScenarioResult, f: impl Fn(&NodeRates) -> f64) -> f64 {
    let v: Vec<f64> = r.nodes.iter().map(f).collect();
    let mean = v.iter().sum::<f64>() / v.len().max(1) as f64;
    let max = v.iter().copied().fold(0.0, f64::max);
    if mean > 0.0 { max / mean } else { 0.0 }
}

/// Runs the three configurations.
pub fn run(ctx: &Context) -> Result<Outcome, ExperimentError> {
    let m = matrix(ctx)?;
    let (nodes, warm, meas) = if ctx.quick { (8, 8, 4) } else { (96, 60, 30) };
    let per_node = if ctx.quick { 4 } else { 8 };
    let configs = [
        ("dht", Keying::Dht, RangeKey::X, false),
        ("rangedht", Keying::RangeDht, RangeKey::X, false),
        ("rangedht loadbal", Keying::RangeDht, RangeKey::X, true),
        ("rangedht hilbert", Keying::RangeDht, RangeKey::Hilbert, false),
        (
            "rangedht hilbert loadbal",
            Keying::RangeDht,
            RangeKey::Hilbert,
            true,
        ),
    ];
    let mut table = Table::new(
        format!("Table 2: per-node imbalance, {nodes}-fed-rect ({per_node} players/node)"),
        &[
            "locator",
            "max/mean matching load",
            "max/mean matching bw",
            "max/mean total bw",
            "mean total bw B/s",
            "moves",
        ],
    );
    let mut rows = Vec::new();
    let mut results = Vec::new();
    let mut plot = LinePlot::new(
        "matching load per node, sorted",
        "node rank",
        "items stored per second",
    );
    for (name, keying, range_key, lb) in configs {
        if ctx.progress {
            eprintln!("loadbal: {name}");
        }
        let mut s = spec(
            nodes,
            per_node,
            true,
            keying,
            lb,
            Duration::from_secs(warm),
            Duration::from_secs(meas),
            delay(&m, nodes, ctx.seed),
            ctx.seed,
        );
        s.range_key = range_key;
        let r = run_scenario(&s).map_err(|e| ExperimentError::Input(e.to_string()))?;
        let load = imbalance(&r, |x| x.load);
        let mbw = imbalance(&r, |x| x.matching);
        let tbw = imbalance(&r, |x| x.total());
        let mean_total = r.nodes.iter().map(|x| x.total()).sum::<f64>() / r.nodes.len().max(1) as f64;
        table.push([
            name.to_string(),
            format!("{load:.2}"),
            format!("{mbw:.2}"),
            format!("{tbw:.2}"),
            format!("{mean_total:.0}"),
            r.lb_moves.to_string(),
        ]);
        let mut loads: Vec<f64> = r.nodes.iter().map(|x| x.load).collect();
        loads.sort_by(|a, b| b.total_cmp(a));
        plot = plot.with(Series::line(
            name,
            loads.iter().enumerate().map(|(i, v)| (i as f64, *v)).collect(),
        ));
        rows.push(json!({
            "locator": name, "max_over_mean_matching_load": load, "max_over_mean_matching_bw": mbw,
            "max_over_mean_total_bw": tbw, "mean_total_bw_Bps": mean_total, "lb_moves": r.lb_moves,
            "rejected": r.rejected.total(), "misplaced_handoff_items": r.rejected.misplaced,
        }));
        results.push((load, mbw));
    }
    let mut out = Outcome::default();
    let red = |a: f64, b: f64| if a > 0.0 { 100.0 * (1.0 - b / a) } else { 0.0 };
    let (dht, range, lb, hil, hil_lb) = (results[0], results[1], results[2], results[3], results[4]);
    out.notes.push(format!(
        "load balancing lowers max/mean matching load by {:.0}% vs rangedht without it and {:.0}% vs dht; max/mean matching bandwidth by {:.0}% vs rangedht and {:.0}% vs dht (paper Table 2: 42% lower max matching bandwidth than dht)",
        red(range.0, lb.0),
        red(dht.0, lb.0),
        red(range.1, lb.1),
        red(dht.1, lb.1)
    ));
    out.notes.push(format!(
        "rangedht keyed by the Hilbert curve: max/mean matching load {:.2} ({:.2} with load balancing) vs {:.2} keyed by x ({:.2} with load balancing)",
        hil.0, hil_lb.0, range.0, lb.0
    ));
    out.files.push(ctx.out.write_csv("table2_loadbal.csv", &table)?);
    out.files.push(ctx.out.write_plot("table2_loads.svg", &plot)?);
    out.files.push(ctx.out.write_json(
        "report.json",
        &json!({ "nodes": nodes, "players_per_node": per_node, "warmup_s": warm, "measure_s": meas, "rows": rows,
                 "reduction_vs_rangedht_pct": red(range.0, lb.0), "reduction_vs_dht_pct": red(dht.0, lb.0) }),
    )?);
    out.tables.push(table);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_run_writes_sane_results() {
        let ctx = Context::quick_in_temp("wm-exp-loadbal", 3).unwrap();
        let dir = ctx.out.root().to_path_buf();
        let out = run(&ctx).unwrap();
        assert!(out.files.iter().all(|f| f.exists()));
        let rows = &out.tables[0].rows;
        assert_eq!(rows.len(), 5);
        for row in rows {
            let v: f64 = row[1].parse().unwrap();
            assert!(v >= 1.0, "max is at least the mean: {row:?}");
        }
        assert_eq!(rows[0][5], "0", "no moves without balancing");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
