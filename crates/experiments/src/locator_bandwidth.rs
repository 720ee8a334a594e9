//! `locator-bandwidth`: per-node outbound locator bandwidth by component (routing,
//! match delivery, maintenance) against the number of nodes, for `dht`, `rangedht` keyed
//! by `x` and `rangedht` keyed by the Hilbert curve (issue 4) on `rect` and `sqr` maps — paper `000` §6.3 Figure 9 ("Scaling behavior"), on the locator
//! harness with the moving-player workload (1 player per node, PlanetLab link delays).

use std::time::Duration;

use serde_json::json;
use worldmesh_locator::scenario::{ScenarioResult, hist_quantile, run as run_scenario};
use worldmesh_locator::{Keying, RangeKey};
use worldmesh_report::{LinePlot, Series, Table};

use crate::locator_runs::{delay, matrix, spec, variant_name};
use crate::{Context, ExperimentError, Outcome};

fn mean(r: &ScenarioResult, f: impl Fn(&worldmesh_locator::scenario::NodeRates) -> f64) -> f64 {
    r.nodes.iter().map(f).sum::<f64>() / r.nodes.len().max(1) as f64
}

/// Runs the sweep.
pub fn run(ctx: &Context) -> Result<Outcome, ExperimentError> {
    let m = matrix(ctx)?;
    let sizes: &[usize] = if ctx.quick {
        &[8, 16]
    } else {
        &[8, 16, 32, 64, 128, 256]
    };
    let (warm, meas) = if ctx.quick { (2, 2) } else { (10, 20) };
    let mut table = Table::new(
        "Figure 9: mean per-node locator bandwidth (bytes/s sent)",
        &[
            "keying",
            "map",
            "nodes",
            "routing",
            "matching",
            "maintenance",
            "total",
            "hops p50",
            "hops p90",
        ],
    );
    let mut series: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    let mut report = Vec::new();
    let mut totals = std::collections::BTreeMap::new();
    let variants = [
        (Keying::Dht, RangeKey::X),
        (Keying::RangeDht, RangeKey::X),
        (Keying::RangeDht, RangeKey::Hilbert),
    ];
    for (keying, range_key) in variants {
        let name = variant_name((keying, range_key));
        for rect in [true, false] {
            let map = if rect { "rect" } else { "sqr" };
            let mut pts = Vec::new();
            for &n in sizes {
                if ctx.progress {
                    eprintln!("locator-bandwidth: {name} {map} {n} nodes");
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
                s.range_key = range_key;
                let r = run_scenario(&s).map_err(|e| ExperimentError::Input(e.to_string()))?;
                let (ro, ma, mt) = (
                    mean(&r, |x| x.routing),
                    mean(&r, |x| x.matching),
                    mean(&r, |x| x.maintenance),
                );
                let (h50, h90) = (hist_quantile(&r.hops, 0.5), hist_quantile(&r.hops, 0.9));
                table.push([
                    name.clone(),
                    map.to_string(),
                    n.to_string(),
                    format!("{ro:.0}"),
                    format!("{ma:.0}"),
                    format!("{mt:.0}"),
                    format!("{:.0}", ro + ma + mt),
                    h50.to_string(),
                    h90.to_string(),
                ]);
                pts.push((n as f64, (ro + ma + mt) / 1000.0));
                totals.insert((name.clone(), map, n), ro + ma + mt);
                report.push(json!({
                    "keying": name, "map": map, "nodes": n,
                    "routing_Bps": ro, "matching_Bps": ma, "maintenance_Bps": mt,
                    "hops_p50": h50, "hops_p90": h90, "rejected": r.rejected.total(),
                }));
            }
            series.push((format!("{name} {map}"), pts));
        }
    }
    let mut out = Outcome::default();
    let mut plot = LinePlot::new(
        "Figure 9: per-node locator bandwidth vs nodes",
        "nodes",
        "kB/s per node (routing + matching + maintenance)",
    );
    for (name, pts) in series {
        plot = plot.with(Series::marked(name, pts));
    }
    out.files
        .push(ctx.out.write_plot("figure9_bandwidth.svg", &plot)?);
    out.files
        .push(ctx.out.write_csv("figure9_bandwidth.csv", &table)?);
    let (lo, hi) = (
        sizes.iter().copied().find(|n| *n >= 32).unwrap_or(sizes[0]),
        sizes[sizes.len() - 1],
    );
    let ratio = |k: &str, map: &'static str| {
        let at = |n: usize| totals.get(&(k.to_string(), map, n)).copied();
        at(hi).unwrap_or(0.0) / at(lo).unwrap_or(1.0).max(1e-9)
    };
    let rr = ratio("rangedht", "rect");
    out.notes.push(format!(
        "rangedht+rect per-node bandwidth {hi}/{lo} nodes = {rr:.2}x (issue target: within 1.5x from 32 to 256); rangedht+sqr {:.2}x, rangedht hilbert+rect {:.2}x, rangedht hilbert+sqr {:.2}x, dht+rect {:.2}x, dht+sqr {:.2}x",
        ratio("rangedht", "sqr"),
        ratio("rangedht hilbert", "rect"),
        ratio("rangedht hilbert", "sqr"),
        ratio("dht", "rect"),
        ratio("dht", "sqr")
    ));
    out.files.push(ctx.out.write_json(
        "report.json",
        &json!({ "rows": report, "rangedht_rect_growth": rr,
                 "rangedht_hilbert_rect_growth": ratio("rangedht hilbert", "rect"),
                 "rangedht_hilbert_sqr_growth": ratio("rangedht hilbert", "sqr"),
                 "from_nodes": lo, "to_nodes": hi,
                 "warmup_s": warm, "measure_s": meas, "players_per_node": 1 }),
    )?);
    out.tables.push(table);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_run_writes_sane_results() {
        let ctx = Context::quick_in_temp("wm-exp-locbw", 3).unwrap();
        let dir = ctx.out.root().to_path_buf();
        let out = run(&ctx).unwrap();
        assert!(out.files.iter().all(|f| f.exists()));
        assert_eq!(out.tables[0].rows.len(), 12, "3 variants x 2 maps x 2 sizes");
        for row in &out.tables[0].rows {
            let v: Vec<f64> = row[3..7].iter().map(|c| c.parse().unwrap()).collect();
            assert!(v.iter().all(|x| *x > 0.0), "every component is used: {row:?}");
            assert!(
                (v[0] + v[1] + v[2] - v[3]).abs() <= 1.5,
                "total is the sum: {row:?}"
            );
        }
        std::fs::remove_dir_all(dir).unwrap();
    }
}
