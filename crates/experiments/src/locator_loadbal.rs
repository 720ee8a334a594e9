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
use worldmesh_locator::scenario::{NodeRates, ScenarioResult};
use worldmesh_locator::{Keying, RangeKey};
use worldmesh_report::{Plot, Series, Table};

use crate::claim::{Better, Check, Claim, Estimate, Expect, Tol};
use crate::locator_runs::{delay, matrix, median_rtt, run_tweaked, spec};
use crate::stats::{self, parallel};
use crate::{Context, ExperimentError, Outcome};

const LB_TOTAL: Claim = Claim {
    id: "table2-max-bandwidth",
    paper: "000",
    location: "§6.3 (Load Balancing), Table 2",
    quote: "We find that a rangedht with load balancing enabled (loadbal) reduces the maximum per-node bandwidth by about 25% (relative to the mean) and the maximum per-node matching bandwidth by about 42%, compared to a dht.",
    metric: "1 − (max/mean per-node locator bandwidth with rangedht + loadbal) ÷ (max/mean with dht), %, 96-fed-rect (same seeds)",
    unit: "%",
    expect: Expect::Value {
        value: 25.0,
        tol: Tol::Abs(10.0),
        better: Better::Higher,
    },
};
const LB_MATCH: Claim = Claim {
    id: "table2-max-matching",
    paper: "000",
    location: "§6.3 (Load Balancing), Table 2",
    quote: "We find that a rangedht with load balancing enabled (loadbal) reduces the maximum per-node bandwidth by about 25% (relative to the mean) and the maximum per-node matching bandwidth by about 42%, compared to a dht.",
    metric: "1 − (max/mean per-node match-delivery bandwidth with rangedht + loadbal) ÷ (max/mean with dht), %, 96-fed-rect (same seeds)",
    unit: "%",
    expect: Expect::Value {
        value: 42.0,
        tol: Tol::Abs(10.0),
        better: Better::Higher,
    },
};
/// Claims of `loadbal`.
pub const CLAIMS: &[Claim] = &[LB_TOTAL, LB_MATCH];

fn imbalance(r: &ScenarioResult, f: impl Fn(&NodeRates) -> f64) -> f64 {
    let v: Vec<f64> = r.nodes.iter().map(f).collect();
    let mean = v.iter().sum::<f64>() / v.len().max(1) as f64;
    let max = v.iter().copied().fold(0.0, f64::max);
    if mean > 0.0 { max / mean } else { 0.0 }
}

/// Runs the configurations: `dht` and `rangedht` with load balancing over the headline
/// seeds (the paper's comparison), the others over one seed.
pub fn run(ctx: &Context) -> Result<Outcome, ExperimentError> {
    let m = matrix(ctx)?;
    let med = median_rtt(&m);
    let (nodes, warm, meas) = if ctx.quick { (8, 6, 3) } else { (96, 40, 20) };
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
    let seeds = ctx.seeds();
    let mut plan = Vec::new();
    for (ci, c) in configs.iter().enumerate() {
        let ss: &[u64] = if c.0 == "dht" || c.0 == "rangedht loadbal" {
            &seeds
        } else {
            &seeds[..1]
        };
        for &s in ss {
            plan.push((ci, s));
        }
    }
    let results = parallel(ctx.threads, &plan, |&(ci, seed)| {
        let (name, keying, range_key, lb) = configs[ci];
        if ctx.progress {
            eprintln!("  loadbal: {name} seed {seed}");
        }
        let mut s = spec(
            nodes,
            per_node,
            true,
            keying,
            lb,
            Duration::from_secs(warm),
            Duration::from_secs(meas),
            delay(&m, nodes, seed),
            seed,
        );
        s.range_key = range_key;
        run_tweaked(&s, &|_| {})
    })?;
    let of = |ci: usize| -> Vec<&ScenarioResult> {
        plan.iter()
            .zip(&results)
            .filter(|(p, _)| p.0 == ci)
            .map(|(_, r)| r)
            .collect()
    };
    let mut table = Table::new(
        format!("paper 000 Table 2: per-node imbalance, {nodes}-fed-rect ({per_node} players per node)"),
        &[
            "locator",
            "seeds",
            "max/mean matching load",
            "max/mean matching bandwidth",
            "max/mean total bandwidth",
            "mean total bandwidth (B/s)",
            "load-balancing moves",
        ],
    );
    let mut rows = Vec::new();
    let mut plot = Plot::of(
        "paper 000 Table 2",
        format!("matching load per node, sorted, {nodes}-fed-rect (first seed)"),
        "node rank",
        "publications and subscriptions stored per second",
    );
    for (ci, (name, ..)) in configs.iter().enumerate() {
        let rs = of(ci);
        let avg =
            |f: &dyn Fn(&ScenarioResult) -> f64| stats::mean(&rs.iter().map(|r| f(r)).collect::<Vec<_>>());
        let load = avg(&|r| imbalance(r, |x| x.load));
        let mbw = avg(&|r| imbalance(r, |x| x.matching));
        let tbw = avg(&|r| imbalance(r, |x| x.total()));
        let mean_total =
            avg(&|r| r.nodes.iter().map(|x| x.total()).sum::<f64>() / r.nodes.len().max(1) as f64);
        let moves = avg(&|r| r.lb_moves as f64);
        table.push([
            name.to_string(),
            rs.len().to_string(),
            format!("{load:.3}"),
            format!("{mbw:.3}"),
            format!("{tbw:.3}"),
            format!("{mean_total:.0}"),
            format!("{moves:.1}"),
        ]);
        let mut loads: Vec<f64> = rs[0].nodes.iter().map(|x| x.load).collect();
        loads.sort_by(|a, b| b.total_cmp(a));
        plot = plot.with(Series::line(
            *name,
            loads.iter().enumerate().map(|(i, v)| (i as f64, *v)).collect(),
        ));
        rows.push(json!({
            "locator": name, "seeds": rs.len(), "max_over_mean_matching_load": load, "max_over_mean_matching_bw": mbw,
            "max_over_mean_total_bw": tbw, "mean_total_bw_Bps": mean_total, "lb_moves": moves,
            "rejected": rs.iter().map(|r| r.rejected.total()).sum::<u64>(),
        }));
    }
    let (dht, lb) = (of(0), of(2));
    let red = |f: &dyn Fn(&NodeRates) -> f64| -> Estimate {
        Estimate::of(
            &dht.iter()
                .zip(&lb)
                .map(|(a, b)| 100.0 * (1.0 - imbalance(b, f) / imbalance(a, f).max(1e-9)))
                .collect::<Vec<_>>(),
        )
    };
    let cond = format!(
        "{nodes}-fed-rect ({per_node} players per node), locator harness with Zipf-popular waypoints; PlanetLab delays (median RTT {med:.0} ms); {warm} s warm-up (30-s load window), {meas} s measured; {} seeds from {}",
        seeds.len(),
        ctx.seed
    );
    let checks = vec![
        Check::new(LB_TOTAL, red(&|x| x.total()), cond.clone()),
        Check::new(LB_MATCH, red(&|x| x.matching), cond),
    ];
    let mut out = Outcome::default();
    let (r, l) = (
        stats::mean(&of(1).iter().map(|r| imbalance(r, |x| x.load)).collect::<Vec<_>>()),
        stats::mean(&lb.iter().map(|r| imbalance(r, |x| x.load)).collect::<Vec<_>>()),
    );
    let change = |a: f64, b: f64| {
        let pct = 100.0 * (b / a.max(1e-9) - 1.0);
        format!(
            "{} by {:.0}%",
            if pct <= 0.0 { "lowers" } else { "raises" },
            pct.abs()
        )
    };
    out.notes.push(format!(
        "Ours: leave-rejoin load balancing {} the max/mean matching load of rangedht ({r:.2} → {l:.2}, first configuration over 1 seed, second over {}).",
        change(r, l),
        lb.len()
    ));
    out.files.push(ctx.out.write_csv("table2_loadbal.csv", &table)?);
    out.files.push(ctx.out.write_plot("table2_loads.svg", &plot)?);
    out.files.push(ctx.out.write_json(
        "report.json",
        &json!({ "nodes": nodes, "players_per_node": per_node, "warmup_s": warm, "measure_s": meas, "rows": rows, "median_rtt_ms": med }),
    )?);
    out.tables.push(table);
    out.checks = checks;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_run_writes_sane_results() {
        let (_dir, ctx) = crate::test_support::quick_temp("loadbal", 3);
        let out = run(&ctx).unwrap();
        assert!(out.files.iter().all(|f| f.exists()));
        let rows = &out.tables[0].rows;
        assert_eq!(rows.len(), 5);
        for row in rows {
            let v: f64 = row[2].parse().unwrap();
            assert!(v >= 1.0, "max is at least the mean: {row:?}");
        }
        assert_eq!(rows[0][6], "0.0", "no moves without balancing");
        assert_eq!(out.checks.len(), 2);
    }
}
