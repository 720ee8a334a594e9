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
use worldmesh_locator::scenario::{ScenarioResult, hist_quantile, median};
use worldmesh_report::{Plot, Scale, Series, Table};

use crate::claim::{Check, Claim, Estimate, Expect};
use crate::locator_runs::{delay, keying_name, matrix, median_rtt, run_tweaked, spec};
use crate::stats::parallel;
use crate::{Context, ExperimentError, Outcome};

const HOPS: Claim = Claim {
    id: "fig10-hops",
    paper: "000",
    location: "§6.3 (Discovery Latency), Figure 10",
    quote: "Both are able to exploit caching so the median hop count is at most 3 in all cases.",
    metric: "median overlay hops of routed publications and subscriptions to their first rendezvous, with route caching, worst over keyings and maps at the largest size (hops are whole numbers: 'at most 3' is below 3.5)",
    unit: "hops",
    expect: Expect::Below(3.5),
};
const MATCH_HIGHER: Claim = Claim {
    id: "fig10-rangedht-matching-higher",
    paper: "000",
    location: "§6.3 (Discovery Latency), Figure 10",
    quote: "However, the matching latency is higher for the rangedht case. This is because the matching component incorporates the latency incurred when spreading the subscription after reaching the left-most rendezvous point.",
    metric: "median matching delay (match at a rendezvous − arrival at the first rendezvous) of rangedht − of dht, ms, largest size, per map",
    unit: "ms",
    expect: Expect::Above(0.0),
};
/// Claims of `discovery`.
pub const CLAIMS: &[Claim] = &[HOPS, MATCH_HIGHER];

fn medians(r: &ScenarioResult) -> (f64, f64) {
    let mut rt: Vec<f64> = r.latency_ms.iter().map(|x| x.0).collect();
    let mut mt: Vec<f64> = r.latency_ms.iter().map(|x| x.1).collect();
    (median(&mut rt), median(&mut mt))
}

/// Runs the sweep.
pub fn run(ctx: &Context) -> Result<Outcome, ExperimentError> {
    let m = matrix(ctx)?;
    let med = median_rtt(&m);
    // Two sizes even in quick mode: the figure is a curve over nodes, not one point.
    let sizes: &[usize] = if ctx.quick { &[4, 8] } else { &[16, 32, 64, 128] };
    let head = *sizes.last().unwrap_or(&8);
    let (warm, meas) = if ctx.quick { (2, 2) } else { (10, 20) };
    let seeds = ctx.seeds();
    // (keying, rect, nodes, seed, route cache)
    let mut plan = Vec::new();
    for keying in [Keying::Dht, Keying::RangeDht] {
        for rect in [true, false] {
            for &n in sizes {
                let ss: &[u64] = if n == head { &seeds } else { &seeds[..1] };
                for &s in ss {
                    plan.push((keying, rect, n, s, true));
                }
                plan.push((keying, rect, n, seeds[0], false));
            }
        }
    }
    let results = parallel(ctx.threads, &plan, |&(keying, rect, n, seed, cache)| {
        let mut s = spec(
            n,
            1,
            rect,
            keying,
            false,
            Duration::from_secs(warm),
            Duration::from_secs(meas),
            delay(&m, n, seed),
            seed,
        );
        s.route_cache = cache;
        run_tweaked(&s, &|_| {})
    })?;
    let pick = |k: Keying, rect: bool, n: usize, cache: bool| -> Vec<&ScenarioResult> {
        plan.iter()
            .zip(&results)
            .filter(|(p, _)| p.0 == k && p.1 == rect && p.2 == n && p.4 == cache)
            .map(|(_, r)| r)
            .collect()
    };
    let mut table = Table::new(
        "paper 000 Figure 10: median discovery latency and routing hops",
        &[
            "keying",
            "map",
            "nodes",
            "seeds",
            "routing (ms)",
            "matching (ms)",
            "samples",
            "hops p50 cached",
            "hops p90 cached",
            "hops p50 no cache",
            "hops p90 no cache",
        ],
    );
    let mut plot = Plot::of(
        "paper 000 Fig. 10",
        format!("median discovery latency: routing to the first rendezvous and matching after it (PlanetLab, median RTT {med:.0} ms)"),
        "nodes",
        "median latency (ms)",
    )
    .scales(Scale::Log, Scale::Linear);
    let mut rows = Vec::new();
    let mut worst_hops = 0usize;
    for keying in [Keying::Dht, Keying::RangeDht] {
        for rect in [true, false] {
            let map = if rect { "rect" } else { "sqr" };
            let (mut pr, mut pm, mut er, mut em) = (vec![], vec![], vec![], vec![]);
            for &n in sizes {
                let rs = pick(keying, rect, n, true);
                let nc = pick(keying, rect, n, false);
                let meds: Vec<(f64, f64)> = rs.iter().map(|r| medians(r)).collect();
                let r_e = Estimate::of(&meds.iter().map(|x| x.0).collect::<Vec<_>>());
                let m_e = Estimate::of(&meds.iter().map(|x| x.1).collect::<Vec<_>>());
                let h = (hist_quantile(&rs[0].hops, 0.5), hist_quantile(&rs[0].hops, 0.9));
                let hn = (hist_quantile(&nc[0].hops, 0.5), hist_quantile(&nc[0].hops, 0.9));
                if n == head {
                    worst_hops =
                        worst_hops.max(rs.iter().map(|r| hist_quantile(&r.hops, 0.5)).max().unwrap_or(0));
                }
                let samples: usize = rs.iter().map(|r| r.latency_ms.len()).sum();
                table.push([
                    keying_name(keying).to_string(),
                    map.to_string(),
                    n.to_string(),
                    rs.len().to_string(),
                    format!("{:.1}", r_e.mean),
                    format!("{:.1}", m_e.mean),
                    samples.to_string(),
                    h.0.to_string(),
                    h.1.to_string(),
                    hn.0.to_string(),
                    hn.1.to_string(),
                ]);
                rows.push(json!({
                    "keying": keying_name(keying), "map": map, "nodes": n, "seeds": rs.len(),
                    "routing_ms_median": r_e, "matching_ms_median": m_e, "samples": samples,
                    "hops_p50_cached": h.0, "hops_p90_cached": h.1, "hops_p50_nocache": hn.0, "hops_p90_nocache": hn.1,
                }));
                pr.push((n as f64, r_e.mean));
                pm.push((n as f64, m_e.mean));
                er.push((r_e.lo, r_e.hi));
                em.push((m_e.lo, m_e.hi));
            }
            plot = plot
                .with(Series::marked(format!("{} {map}: routing", keying_name(keying)), pr).with_errors(er))
                .with(Series::marked(format!("{} {map}: matching", keying_name(keying)), pm).with_errors(em));
        }
    }
    let cond = |what: &str| {
        format!(
            "{head} nodes, 1 player per node, {what}; locator harness, moving-player workload; PlanetLab delays (median RTT {med:.0} ms); {warm} s warm-up, {meas} s measured; {} seeds from {}",
            seeds.len(),
            ctx.seed
        )
    };
    let mut checks = vec![Check::new(
        HOPS,
        Estimate::exact(worst_hops as f64),
        cond("dht and rangedht, rect and sqr, route caching"),
    )];
    for rect in [true, false] {
        let a = pick(Keying::RangeDht, rect, head, true);
        let b = pick(Keying::Dht, rect, head, true);
        let d: Vec<f64> = a
            .iter()
            .zip(&b)
            .map(|(x, y)| medians(x).1 - medians(y).1)
            .collect();
        checks.push(Check::new(
            MATCH_HIGHER,
            Estimate::of(&d),
            cond(if rect { "rect" } else { "sqr" }),
        ));
    }
    let mut out = Outcome::default();
    out.files.push(ctx.out.write_plot("figure10_latency.svg", &plot)?);
    out.files.push(ctx.out.write_csv("figure10_latency.csv", &table)?);
    out.files.push(ctx.out.write_json(
        "report.json",
        &json!({ "rows": rows, "worst_median_hops_cached": worst_hops, "warmup_s": warm, "measure_s": meas, "median_rtt_ms": med }),
    )?);
    out.notes.push(
        "Ours: rangedht looks up the pieces of a key range in parallel (chunk_nodes), so its matching delay is not one walk along the range as in Mercury; `locator-bandwidth` measures the walk too."
            .into(),
    );
    out.tables.push(table);
    out.checks = checks;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_run_writes_sane_results() {
        let (_dir, ctx) = crate::test_support::quick_temp("locdisc", 3);
        let out = run(&ctx).unwrap();
        assert!(out.files.iter().all(|f| f.exists()));
        for row in &out.tables[0].rows {
            let routing: f64 = row[4].parse().unwrap();
            let samples: usize = row[6].parse().unwrap();
            let cached: usize = row[7].parse().unwrap();
            let uncached: usize = row[9].parse().unwrap();
            assert!(samples > 0, "{row:?}");
            assert!((0.0..2000.0).contains(&routing), "{row:?}");
            assert!(
                cached <= uncached,
                "caching never lengthens the median route: {row:?}"
            );
        }
    }
}
