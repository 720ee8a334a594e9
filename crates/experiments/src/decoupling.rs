//! `decoupling`: why Colyseus decouples discovery from replica synchronization — paper
//! `000` §5 ("Decoupling Location and Synchronization"), Figure 7(a) (delivery latency of
//! publications and subscriptions through the DHT vs direct point-to-point latency, 96
//! nodes, 96-fed-rect) and Figure 7(b) (share of updates to objects already in a
//! primary's area of interest, which need no lookup, by object kind).
//!
//! 7(a) runs the locator harness (96 nodes × 8 moving players, rect map, PlanetLab link
//! delays) for `rangedht` and `dht`; a delivery sample is a subscription reaching the
//! rendezvous that matches it: routing to the first rendezvous plus, for `rangedht`, the
//! spreading along the range (the harness samples subscriptions; publications travel the
//! same routes). The direct latency is the one-way delay (RTT/2) between every pair of the
//! 96 nodes' matrix rows.
//!
//! 7(b) runs the simulator with every player on its own node (96-p2p-rect, the paper's
//! worst case) and counts, at every frame, the (node, object) pairs a node's primaries
//! require that they also required at the previous frame (`MetricsReport::discovered_share`).

use std::time::Duration;

use worldmesh_core::DetRng;
use worldmesh_game::MapKind;
use worldmesh_locator::Keying;
use worldmesh_locator::scenario::median;
use worldmesh_report::{Plot, Scale, Series, Table};

use crate::claim::{Better, Check, Claim, Estimate, Expect, Tol};
use crate::colyseus::{run_all, seeded, sim_config};
use crate::locator_runs::{delay, keying_name, matrix, median_rtt, run_tweaked, spec};
use crate::stats::{self, parallel};
use crate::{Context, ExperimentError, Outcome};

const WORSE: Claim = Claim {
    id: "fig7a-dht-slower-than-direct",
    paper: "000",
    location: "§5 (Decoupling Location and Synchronization), Figure 7(a)",
    quote: "Although routing through either substrate achieves much better than [log n] hops due to the effectiveness of route caching with a highly localized workload, the delays are still significantly worse than sending updates directly point-to-point, especially considering the target latency of 50-100ms in FPS games [1].",
    metric: "median delivery latency of a subscription to its matching rendezvous ÷ median direct one-way latency between the same 96 nodes, per locator",
    unit: "ratio",
    expect: Expect::Above(1.0),
};
const PAIRS_100: Claim = Claim {
    id: "s5-93pct-under-100ms",
    paper: "000",
    location: "§5 (Replica Consistency), from Figure 7(a)",
    quote: "The backup replica state trails the primary by a small time window ([½] RTT, or, from the results shown in Figure 7(a), 100ms for 93% of node pairs), and are eventually consistent after this time window.",
    metric: "share of the 96 nodes' pairs whose one-way latency (RTT/2) is at most 100 ms (a property of the latency data: theirs King samples with an 80–90 ms median RTT)",
    unit: "%",
    expect: Expect::Value {
        value: 93.0,
        tol: Tol::Abs(3.0),
        better: Better::Neither,
    },
};
const PLAYERS_DIRECT: Claim = Claim {
    id: "fig7b-players-99",
    paper: "000",
    location: "§5 (Decoupling Location and Synchronization), Figure 7(b)",
    quote: "For player objects almost 99% of all updates can be sent to replicas directly.",
    metric: "share of (node, player) pairs required at a frame that were already required at the previous frame, 96-p2p-rect",
    unit: "%",
    expect: Expect::Value {
        value: 99.0,
        tol: Tol::Abs(1.0),
        better: Better::Higher,
    },
};
const MISSILES_DIRECT: Claim = Claim {
    id: "fig7b-missiles-half",
    paper: "000",
    location: "§5 (Decoupling Location and Synchronization), Figure 7(b)",
    quote: "For missiles, the percentage is lower since they are created dynamically and exist only for a few seconds, but over half the time missile replicas can still be synchronized directly also.",
    metric: "the same share for missiles, 96-p2p-rect",
    unit: "%",
    expect: Expect::Above(50.0),
};
/// Claims of `decoupling`.
pub const CLAIMS: &[Claim] = &[WORSE, PAIRS_100, PLAYERS_DIRECT, MISSILES_DIRECT];

/// Runs the experiment.
pub fn run(ctx: &Context) -> Result<Outcome, ExperimentError> {
    let m = matrix(ctx)?;
    let med_rtt = median_rtt(&m);
    let (nodes, per) = if ctx.quick { (16, 4) } else { (96, 8) };
    let (warm, meas) = if ctx.quick { (2, 3) } else { (10, 10) };
    let seeds = ctx.seeds();
    let mut plan = Vec::new();
    for k in [Keying::RangeDht, Keying::Dht] {
        for &s in &seeds {
            plan.push((k, s));
        }
    }
    let lat = parallel(ctx.threads, &plan, |&(k, seed)| {
        let s = spec(
            nodes,
            per,
            true,
            k,
            false,
            Duration::from_secs(warm),
            Duration::from_secs(meas),
            delay(&m, nodes, seed),
            seed,
        );
        let r = run_tweaked(&s, &|_| {})?;
        // Direct one-way latencies between the nodes' rows (same mapping as the delays).
        let hosts = m.map_nodes(nodes, &mut DetRng::new(seed).fork(0x1a7));
        let mut direct = Vec::new();
        for a in 0..nodes {
            for b in 0..nodes {
                if a != b {
                    direct.push(f64::from(m.rtt_ms(hosts[a], hosts[b])) / 2.0);
                }
            }
        }
        Ok((r.latency_ms, direct))
    })?;
    let mut t = Table::new(
        format!("paper 000 Figure 7(a): delivery latency through the locator vs direct, {nodes}-fed-rect"),
        &[
            "locator",
            "seed",
            "samples",
            "routing to first rendezvous, median (ms)",
            "delivery to the matching rendezvous, median (ms)",
            "direct one-way, median (ms)",
            "delivery / direct",
            "pairs with direct ≤ 100 ms (%)",
        ],
    );
    let mut checks = Vec::new();
    let mut plot = Plot::of(
        "paper 000 Fig. 7a",
        format!("CDF of subscription delivery latency through the locator vs direct one-way latency, {nodes} nodes (seed {})", ctx.seed),
        "latency (ms)",
        "fraction of samples or node pairs",
    )
    .scales(Scale::Log, Scale::Linear);
    let mut under = Vec::new();
    for k in [Keying::RangeDht, Keying::Dht] {
        let mut ratios = Vec::new();
        for ((kk, seed), (samples, direct)) in plan.iter().zip(&lat) {
            if *kk != k {
                continue;
            }
            let mut routing: Vec<f64> = samples.iter().map(|x| x.0).collect();
            let mut full: Vec<f64> = samples.iter().map(|x| x.0 + x.1).collect();
            let mut d = direct.clone();
            let (mr, mf, md) = (median(&mut routing), median(&mut full), median(&mut d));
            let u =
                100.0 * direct.iter().filter(|x| **x <= 100.0).count() as f64 / direct.len().max(1) as f64;
            if k == Keying::RangeDht {
                under.push(u);
            }
            ratios.push(mf / md.max(1e-9));
            t.push([
                keying_name(k).to_string(),
                seed.to_string(),
                samples.len().to_string(),
                format!("{mr:.1}"),
                format!("{mf:.1}"),
                format!("{md:.1}"),
                format!("{:.3}", mf / md.max(1e-9)),
                format!("{u:.2}"),
            ]);
            if *seed == ctx.seed {
                let full: Vec<f64> = samples.iter().map(|x| x.0 + x.1).collect();
                plot = plot.with(Series::cdf(format!("through {}", keying_name(k)), &full));
                if k == Keying::RangeDht {
                    plot = plot.with(Series::cdf("direct one-way (topology)", direct));
                }
            }
        }
        checks.push(Check::new(
            WORSE,
            Estimate::of(&ratios),
            format!(
                "{nodes}-fed-rect, {} locator; locator harness with moving players; PlanetLab delays (median RTT {med_rtt:.0} ms); {warm} s warm-up, {meas} s measured; {} seeds from {}",
                keying_name(k),
                seeds.len(),
                ctx.seed
            ),
        ));
    }
    plot = plot.with_vline("100 ms", 100.0);
    checks.push(Check::new(
        PAIRS_100,
        Estimate::of(&under),
        format!("{nodes} nodes on PlanetLab rows (median RTT of the matrix {med_rtt:.0} ms, 1.6× the paper's King samples); {} seeds", seeds.len()),
    ));
    // 7(b).
    let p2p = if ctx.quick { 16 } else { 96 };
    let cfg = sim_config(ctx, p2p, 1, MapKind::Rect, crate::colyseus::times(ctx));
    let reps = run_all(ctx, &seeded(ctx, &cfg, seeds.len()))?;
    let share = |k: usize| -> Estimate {
        Estimate::of(
            &reps
                .iter()
                .filter_map(|r| r.metrics.discovered_share.get(k).copied().flatten())
                .map(|v| v * 100.0)
                .collect::<Vec<_>>(),
        )
    };
    let cond7b = format!(
        "{p2p}-p2p-rect (one player per node), model workload, oracle discovery (the share depends only on the workload); {:.0} s runs; {} seeds from {}",
        crate::colyseus::times(ctx).0,
        seeds.len(),
        ctx.seed
    );
    checks.push(Check::new(PLAYERS_DIRECT, share(0), cond7b.clone()));
    checks.push(Check::new(MISSILES_DIRECT, share(1), cond7b));
    let mut t7b = Table::new(
        format!(
            "paper 000 Figure 7(b): updates to objects already in a primary's area of interest (%), {p2p}-p2p-rect"
        ),
        &[
            "object kind",
            "already required at the previous frame (%)",
            "95% CI low",
            "95% CI high",
        ],
    );
    let kinds = ["players", "missiles", "items"];
    let mut bars = Vec::new();
    let mut errs = Vec::new();
    for (k, name) in kinds.iter().enumerate() {
        let e = share(k);
        t7b.push([
            name.to_string(),
            format!("{:.3}", e.mean),
            format!("{:.3}", e.lo),
            format!("{:.3}", e.hi),
        ]);
        bars.push(e.mean);
        errs.push((e.lo, e.hi));
    }
    let p7b = Plot::of(
        "paper 000 Fig. 7b",
        format!("updates that need no lookup: objects already in a primary's area of interest, {p2p}-p2p-rect (mean, 95% CI of {} seeds)", seeds.len()),
        "object kind",
        "share of required (node, object) pairs (%)",
    )
    .with_categories(kinds)
    .with(Series::bars("already required at the previous frame", &bars).with_errors(errs))
    .with_hline("paper: players ≈ 99%", 99.0)
    .with_hline("paper: missiles > 50%", 50.0);
    let files = vec![
        ctx.out.write_plot("figure7a_latency_cdf.svg", &plot)?,
        ctx.out.write_plot("figure7b_direct_updates.svg", &p7b)?,
        ctx.out.write_csv("figure7a.csv", &t)?,
        ctx.out.write_csv("figure7b.csv", &t7b)?,
    ];
    let notes = vec![format!(
        "Ours: median direct one-way latency {:.1} ms; the paper's King samples have an 80–90 ms median RTT (40–45 ms one way), ours {med_rtt:.0} ms.",
        stats::mean(
            &lat.iter()
                .map(|(_, d)| stats::quantile(d, 0.5))
                .collect::<Vec<_>>()
        )
    )];
    Ok(Outcome {
        tables: vec![t, t7b],
        files,
        notes,
        checks,
    })
}
