//! `discovery`: discovery latency split into routing to the first rendezvous and matching
//! delay after it, and routing hops with and without route caching, for `dht` and
//! `rangedht` on `rect` and `sqr` maps — paper `000` §6.3 Figure 10, on the locator harness
//! (PlanetLab link delays, 1 player per node).
//!
//! A sample is taken each time a subscription reaches a rendezvous and matches stored
//! publications at once: routing = arrival at the first (left-most) rendezvous − sending;
//! matching = match time at this rendezvous − arrival at the first one (it includes the
//! spreading along the range in `rangedht`, as in the paper). The 1.5 RTT to deliver the
//! match and fetch the replica is the same for both substrates and not included.

use std::time::Duration;

use serde_json::json;
use worldmesh_locator::Keying;
use worldmesh_locator::scenario::{hist_quantile, median, run as run_scenario};
use worldmesh_report::{LinePlot, Series, Table};

use crate::locator_runs::{delay, keying_name, matrix, spec};
use crate::{Context, ExperimentError, Outcome};

/// Runs the sweep.
pub fn run(ctx: &Context) -> Result<Outcome, ExperimentError> {
    let m = matrix(ctx)?;
    let sizes: &[usize] = if ctx.quick { &[8] } else { &[16, 32, 64, 128] };
    let (warm, meas) = if ctx.quick { (2, 2) } else { (10, 20) };
    let mut table = Table::new(
        "Figure 10: median discovery latency (ms) and routing hops",
        &[
            "keying",
            "map",
            "nodes",
            "routing ms",
            "matching ms",
            "samples",
            "hops p50 cached",
            "hops p90 cached",
            "hops p50 no cache",
            "hops p90 no cache",
        ],
    );
    let mut rows = Vec::new();
    let mut route_series = Vec::new();
    let mut worst_median_hops = 0;
    for keying in [Keying::Dht, Keying::RangeDht] {
        for rect in [true, false] {
            let map = if rect { "rect" } else { "sqr" };
            let mut pts_r = Vec::new();
            let mut pts_m = Vec::new();
            for &n in sizes {
                if ctx.progress {
                    eprintln!("discovery: {} {map} {n} nodes", keying_name(keying));
                }
                let mut s = spec(
                    n,
                    1,
                    rect,
                    keying,
                    false,
                    Duration::from_secs(warm),
                    Duration::from_secs(meas),
                    delay(&m, n, ctx.seed),
                    ctx.seed,
                );
                let r = run_scenario(&s).map_err(|e| ExperimentError::Input(e.to_string()))?;
                s.route_cache = false;
                let nc = run_scenario(&s).map_err(|e| ExperimentError::Input(e.to_string()))?;
                let mut rt: Vec<f64> = r.latency_ms.iter().map(|x| x.0).collect();
                let mut mt: Vec<f64> = r.latency_ms.iter().map(|x| x.1).collect();
                let (mr, mm) = (median(&mut rt), median(&mut mt));
                let h = (hist_quantile(&r.hops, 0.5), hist_quantile(&r.hops, 0.9));
                let hn = (hist_quantile(&nc.hops, 0.5), hist_quantile(&nc.hops, 0.9));
                worst_median_hops = worst_median_hops.max(h.0);
                table.push([
                    keying_name(keying).to_string(),
                    map.to_string(),
                    n.to_string(),
                    format!("{mr:.1}"),
                    format!("{mm:.1}"),
                    rt.len().to_string(),
                    h.0.to_string(),
                    h.1.to_string(),
                    hn.0.to_string(),
                    hn.1.to_string(),
                ]);
                rows.push(json!({
                    "keying": keying_name(keying), "map": map, "nodes": n,
                    "routing_ms_median": mr, "matching_ms_median": mm, "samples": rt.len(),
                    "hops_p50_cached": h.0, "hops_p90_cached": h.1,
                    "hops_p50_nocache": hn.0, "hops_p90_nocache": hn.1,
                }));
                pts_r.push((n as f64, mr));
                pts_m.push((n as f64, mm));
            }
            route_series.push((format!("{} {map} routing", keying_name(keying)), pts_r));
            route_series.push((format!("{} {map} matching", keying_name(keying)), pts_m));
        }
    }
    let mut out = Outcome::default();
    let mut plot = LinePlot::new("Figure 10: median discovery latency", "nodes", "ms");
    for (name, pts) in route_series {
        plot = plot.with(Series::marked(name, pts));
    }
    out.files.push(ctx.out.write_plot("figure10_latency.svg", &plot)?);
    out.files.push(ctx.out.write_csv("figure10_latency.csv", &table)?);
    out.files.push(ctx.out.write_json(
        "report.json",
        &json!({ "rows": rows, "worst_median_hops_cached": worst_median_hops, "warmup_s": warm, "measure_s": meas }),
    )?);
    out.notes.push(format!(
        "worst median routing hops with route caching: {worst_median_hops} (paper: at most 3 in all cases)"
    ));
    out.tables.push(table);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_run_writes_sane_results() {
        let ctx = Context::quick_in_temp("wm-exp-locdisc", 3).unwrap();
        let dir = ctx.out.root().to_path_buf();
        let out = run(&ctx).unwrap();
        assert!(out.files.iter().all(|f| f.exists()));
        for row in &out.tables[0].rows {
            let routing: f64 = row[3].parse().unwrap();
            let samples: usize = row[5].parse().unwrap();
            let cached: usize = row[6].parse().unwrap();
            let uncached: usize = row[8].parse().unwrap();
            assert!(samples > 0, "{row:?}");
            assert!((0.0..2000.0).contains(&routing), "{row:?}");
            assert!(
                cached <= uncached,
                "caching never lengthens the median route: {row:?}"
            );
        }
        std::fs::remove_dir_all(dir).unwrap();
    }
}
