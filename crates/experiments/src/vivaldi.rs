//! `vivaldi`: accuracy of Vivaldi and landmark-based latency estimates on the PlanetLab
//! matrix (paper `001` §6.3.1, Fig. 6 and Table 3).
//!
//! Parts, each written as CSV (and SVG where a curve says more):
//! 1. *Headline*: Vivaldi, 8 dimensions + height, tuned (128 neighbours, half of them
//!    close; `c_c = 0.05`, `c_e = 0.1`; 1 probe/s for 8000 s), over three seeds; plus the
//!    default configuration (32 neighbours, `c_c = c_e = 0.25`) for reference.
//! 2. *Probe rate × log time* (Table 3: packet rate, log time): median and p80 relative
//!    error against time for several probe rates, 12 neighbours (the paper's largest
//!    group size).
//! 3. *Neighbour-set size* at a fixed probing budget.
//! 4. *Dimensions*: 2, 2 + height, 5 + height, 8, 8 + height.
//! 5. *Landmarks* (GNP/Netvigator-like): accuracy against the number of landmarks and the
//!    way they are chosen, with the probes each host sends.
//! 6. *Drift*: 20% of the hosts get +50 ms on all their links for a while; the error
//!    against the *current* matrix over time shows the jump and the re-convergence.
//!
//! Errors are `|est − true| / true` over all ordered pairs with a positive true RTT
//! (see `worldmesh_netcoord::accuracy`).

use crate::claim::{Better, Check, Claim, Estimate, Expect, Tol};
use crate::stats::{self, parallel};
use crate::{Context, ExperimentError, Outcome};
use worldmesh_report::Plot;

const VIV80: Claim = Claim {
    id: "fig6-vivaldi-p80",
    paper: "001",
    location: "§6.3.1, Fig. 6 and Table 3",
    quote: "Vivaldi estimations are best in configurations with a high packet rate, and yields 80% of the estimations within a 50% relative error for a 4-min log time.",
    metric: "80th percentile of |estimate − ping RTT| / ping RTT over all ordered pairs of 100 random PlanetLab hosts; Vivaldi at the paper's setting (group of 12 neighbours, 5 probes/s, 240 s log time; 8-D + height)",
    unit: "ratio",
    expect: Expect::Value {
        value: 0.5,
        tol: Tol::Abs(0.1),
        better: Better::Lower,
    },
};
const LM80: Claim = Claim {
    id: "fig6-netvigator-p80",
    paper: "001",
    location: "§6.3.1, Fig. 6",
    quote: "Netvigator yields 80% of the estimations within a 15% relative error of the ping measurements and is clearly best.",
    metric: "80th percentile of |estimate − RTT| / RTT over all ordered pairs of 100 random PlanetLab hosts; Netvigator is a closed PlanetLab service: our stand-in is landmark-based coordinates (20 random landmarks, 8-D + height)",
    unit: "ratio",
    expect: Expect::Value {
        value: 0.15,
        tol: Tol::Abs(0.05),
        better: Better::Lower,
    },
};
const OVER_UNDER: Claim = Claim {
    id: "fig6-over-under",
    paper: "001",
    location: "§6.3.1, Fig. 6",
    quote: "Furthermore, both Vivaldi, and to a lesser extent, Netvigator, overestimate RTTs for the smaller actual RTTs, while underestimating for longer distances.",
    metric: "median directed error (estimate − RTT) / RTT of the pairs in the lowest RTT decile − that of the highest RTT decile; positive = over short, under long (Vivaldi, paper setting)",
    unit: "ratio",
    expect: Expect::Above(0.0),
};
/// Claims of `vivaldi`.
pub const CLAIMS: &[Claim] = &[VIV80, LM80, OVER_UNDER];

/// One seed of the paper setting: (true RTT, Vivaldi directed error, landmark directed
/// error) per ordered pair of a random 100-host sample.
fn paper_setting(m: &LatencyMatrix, quick: bool, seed: u64) -> Result<Vec<(f64, f64, f64)>, ExperimentError> {
    let hn = 100.min(m.len());
    let mut hosts: Vec<usize> = (0..m.len()).collect();
    DetRng::new(seed ^ 0xF16).shuffle(&mut hosts);
    hosts.truncate(hn);
    hosts.sort_unstable();
    let sub = m.select(&hosts);
    let p = ProbeConfig {
        neighbours: 12,
        probe_rate: 5.0,
        ..Default::default()
    };
    let mut sim = ProbeSim::new(&sub, VivaldiConfig::default(), p, seed)
        .map_err(|e| ExperimentError::Run(e.to_string()))?;
    sim.run_until(&sub, 240.0);
    let vc = sim.coordinates();
    let rtt = |i: usize, j: usize| f64::from(sub.rtt_ms(i, j));
    let lcfg = LandmarkConfig {
        landmarks: if quick { 10 } else { 20 },
        iterations: if quick { 300 } else { 3000 },
        restarts: if quick { 2 } else { 4 },
        ..Default::default()
    };
    let fit = fit_all(hn, &rtt, &lcfg, seed).map_err(|e| ExperimentError::Run(e.to_string()))?;
    let ev = estimate(&vc);
    let el = estimate(&fit.coords);
    let mut out = Vec::with_capacity(hn * hn);
    for i in 0..hn {
        for j in 0..hn {
            let t = rtt(i, j);
            if i != j && t > 0.0 {
                out.push((t, (ev(i, j) - t) / t, (el(i, j) - t) / t));
            }
        }
    }
    Ok(out)
}

fn p80_abs(v: impl Iterator<Item = f64>) -> f64 {
    let a: Vec<f64> = v.map(f64::abs).collect();
    stats::quantile(&a, 0.8)
}

fn over_under(pairs: &[(f64, f64, f64)], pick: impl Fn(&(f64, f64, f64)) -> f64) -> f64 {
    let mut s: Vec<&(f64, f64, f64)> = pairs.iter().collect();
    s.sort_by(|a, b| a.0.total_cmp(&b.0));
    let d = (s.len() / 10).max(1);
    let lo: Vec<f64> = s[..d].iter().map(|p| pick(p)).collect();
    let hi: Vec<f64> = s[s.len() - d..].iter().map(|p| pick(p)).collect();
    stats::quantile(&lo, 0.5) - stats::quantile(&hi, 0.5)
}
use serde::Serialize;
use worldmesh_core::{DetRng, LatencyMatrix};
use worldmesh_netcoord::VivaldiConfig;
use worldmesh_netcoord::accuracy::{ErrorSummary, PairErrors, cdf_points, pair_errors};
use worldmesh_netcoord::landmark::{LandmarkConfig, LandmarkSelection, fit_all};
use worldmesh_netcoord::probe_sim::{Drift, DriftingMatrix, LatencyModel, ProbeConfig, ProbeSim, estimate};
use worldmesh_report::{Scale, Series, Table};

/// Loads the matrix named by the context (or the shipped PlanetLab one); in quick mode,
/// keeps a deterministic random subset of `quick_hosts` hosts.
pub(crate) fn load_matrix(ctx: &Context, quick_hosts: usize) -> Result<LatencyMatrix, ExperimentError> {
    let path = ctx
        .latency_file
        .clone()
        .unwrap_or_else(crate::shipped_planetlab_path);
    let m = LatencyMatrix::load(&path).map_err(|e| ExperimentError::Input(e.to_string()))?;
    if m.len() < 10 {
        return Err(ExperimentError::Input(format!(
            "{}: need at least 10 hosts, got {}",
            path.display(),
            m.len()
        )));
    }
    // Relative error is undefined where the true RTT is 0 (such pairs are skipped), so a
    // matrix of mostly zeros would summarise nothing and print NaN.
    let pairs = m.len() * (m.len() - 1);
    let positive = (0..m.len())
        .flat_map(|i| (0..m.len()).filter(move |&j| j != i).map(move |j| (i, j)))
        .filter(|&(i, j)| m.rtt_ms(i, j) > 0.0)
        .count();
    if positive * 2 < pairs {
        return Err(ExperimentError::Input(format!(
            "{}: only {positive} of {pairs} host pairs have a positive round-trip time; \
             coordinate error is relative to the RTT, so at least half must be positive",
            path.display()
        )));
    }
    if ctx.quick && m.len() > quick_hosts {
        let mut hosts: Vec<usize> = (0..m.len()).collect();
        DetRng::new(ctx.seed ^ 0x51C).shuffle(&mut hosts);
        hosts.truncate(quick_hosts);
        hosts.sort_unstable();
        return Ok(m.select(&hosts));
    }
    Ok(m)
}

fn progress(ctx: &Context, what: &str) {
    if ctx.progress {
        eprintln!("  vivaldi: {what}");
    }
}

/// The tuned 8-D + height configuration of the headline figure.
pub(crate) fn tuned() -> (VivaldiConfig, ProbeConfig, f64) {
    let v = VivaldiConfig {
        dims: 8,
        height: true,
        cc: 0.05,
        ce: 0.1,
        ..Default::default()
    };
    let p = ProbeConfig {
        neighbours: 128,
        close_fraction: 0.5,
        probe_rate: 1.0,
        ..Default::default()
    };
    (v, p, 8000.0)
}

fn errors_of(m: &dyn LatencyModel, sim: &ProbeSim, t: f64) -> PairErrors {
    let c = sim.coordinates();
    pair_errors(m.hosts(), |i, j| m.rtt_at(i, j, t), estimate(&c))
}

fn vivaldi_run(
    m: &LatencyMatrix,
    v: VivaldiConfig,
    p: ProbeConfig,
    secs: f64,
    seed: u64,
) -> Result<(PairErrors, u64), ExperimentError> {
    let mut sim = ProbeSim::new(m, v, p, seed).map_err(|e| ExperimentError::Run(e.to_string()))?;
    sim.run_until(m, secs);
    Ok((errors_of(m, &sim, secs), sim.probes() / m.len() as u64))
}

fn f4(x: f64) -> String {
    format!("{x:.4}")
}

#[derive(Serialize)]
struct Row {
    method: String,
    params: String,
    probes_per_node: f64,
    summary: ErrorSummary,
}

#[derive(Serialize)]
struct Report {
    hosts: usize,
    quick: bool,
    seed: u64,
    metric: &'static str,
    headline: Vec<Row>,
    headline_median_of_seeds: f64,
    headline_p80_of_seeds: f64,
    dimensions: Vec<Row>,
    neighbours: Vec<Row>,
    landmarks: Vec<Row>,
}

/// Runs the experiment.
pub fn run(ctx: &Context) -> Result<Outcome, ExperimentError> {
    let m = load_matrix(ctx, 80)?;
    let n = m.len();
    let q = ctx.quick;
    let mut out = Outcome::default();

    // 0. The paper's setting on 100-host samples (Fig. 6): one sample and probe seed each.
    progress(
        ctx,
        "paper setting (100 hosts, 12 neighbours, 5/s, 240 s), headline seeds",
    );
    let seeds = ctx.seeds();
    let per_seed = parallel(ctx.threads, &seeds, |s| paper_setting(&m, q, *s))?;
    let viv: Vec<f64> = per_seed.iter().map(|p| p80_abs(p.iter().map(|x| x.1))).collect();
    let lm: Vec<f64> = per_seed.iter().map(|p| p80_abs(p.iter().map(|x| x.2))).collect();
    let ou: Vec<f64> = per_seed.iter().map(|p| over_under(p, |x| x.1)).collect();
    let ou_lm: Vec<f64> = per_seed.iter().map(|p| over_under(p, |x| x.2)).collect();
    let cond = format!(
        "{} PlanetLab hosts drawn at random per seed (median RTT of the full matrix {:.0} ms); all ordered pairs; {} seeds from {}",
        100.min(n),
        crate::locator_runs::median_rtt(&m),
        seeds.len(),
        ctx.seed
    );
    out.checks
        .push(Check::new(VIV80, Estimate::of(&viv), cond.clone()));
    out.checks.push(Check::new(LM80, Estimate::of(&lm), cond.clone()));
    out.checks
        .push(Check::new(OVER_UNDER, Estimate::of(&ou), cond.clone()));
    out.notes.push(format!(
        "Ours: landmarks' low-decile minus high-decile directed error {} (the paper: the same tendency, to a lesser extent).",
        Estimate::of(&ou_lm).text("")
    ));
    let thin = |v: Vec<(f64, f64)>| -> Vec<(f64, f64)> {
        let every = (v.len() / 2500).max(1);
        v.into_iter().step_by(every).collect()
    };
    let first = &per_seed[0];
    let beyond = first
        .iter()
        .filter(|x| x.1.abs() > 3.0 || x.2.abs() > 3.0)
        .count();
    let mut scatter = Plot::of(
        "paper 001 Fig. 6",
        format!(
            "directed relative error vs measured RTT, {} PlanetLab hosts (seed {}; {beyond} of {} pairs beyond ±3 not shown)",
            100.min(n),
            ctx.seed,
            first.len()
        ),
        "measured RTT (ms)",
        "directed relative error (estimate − RTT) / RTT",
    )
    .with(Series::points(
        "Vivaldi, 12 neighbours, 5 probes/s, 240 s",
        thin(first.iter().map(|x| (x.0, x.1)).collect()),
    ))
    .with(Series::points(
        "landmarks (stand-in for Netvigator)",
        thin(first.iter().map(|x| (x.0, x.2)).collect()),
    ))
    .with_hline("ideal: y = 0", 0.0)
    .scales(Scale::Log, Scale::Linear);
    scatter.y_range = Some((-1.0, 3.0));
    out.files.push(ctx.out.write_plot("fig6_scatter.svg", &scatter)?);
    let mut fig6 = Table::new(
        "paper 001 Fig. 6: p80 of |relative error| per seed, paper setting",
        &[
            "seed",
            "vivaldi p80",
            "landmarks p80",
            "vivaldi low-high decile directed error",
            "landmarks low-high decile directed error",
        ],
    );
    for (k, s) in seeds.iter().enumerate() {
        fig6.push([
            s.to_string(),
            format!("{:.4}", viv[k]),
            format!("{:.4}", lm[k]),
            format!("{:.4}", ou[k]),
            format!("{:.4}", ou_lm[k]),
        ]);
    }
    out.files
        .push(ctx.out.write_csv("fig6_paper_setting.csv", &fig6)?);
    out.tables.push(fig6);
    let mut summary = Table::new(
        "Latency estimation accuracy (relative error |est-true|/true over ordered pairs)",
        &["method", "parameters", "probes/node", "median", "p80", "p90"],
    );
    let row_of = |method: &str, params: String, probes: f64, s: &ErrorSummary| Row {
        method: method.into(),
        params,
        probes_per_node: probes,
        summary: *s,
    };
    let push = |t: &mut Table, r: &Row| {
        t.push([
            r.method.clone(),
            r.params.clone(),
            format!("{:.0}", r.probes_per_node),
            f4(r.summary.median),
            f4(r.summary.p80),
            f4(r.summary.p90),
        ])
    };

    // 1. Headline.
    progress(ctx, "headline (8-D + height, tuned, 3 seeds)");
    let (tv, tp, tsecs) = tuned();
    let tsecs = if q { 300.0 } else { tsecs };
    let mut headline = Vec::new();
    let mut headline_errors = Vec::new();
    for s in 0..3 {
        let (e, probes) = vivaldi_run(&m, tv, tp, tsecs, ctx.seed.wrapping_add(s))?;
        let sm = ErrorSummary::of_pairs(&e);
        headline.push(row_of(
            "vivaldi 8D+h tuned",
            format!(
                "nb={} close=0.5 cc=0.05 ce=0.1 rate=1/s t={tsecs}s seed={}",
                tp.neighbours,
                ctx.seed.wrapping_add(s)
            ),
            probes as f64,
            &sm,
        ));
        if s == 0 {
            headline_errors = e.relative;
        }
    }
    let mut meds: Vec<f64> = headline.iter().map(|r| r.summary.median).collect();
    let mut p80s: Vec<f64> = headline.iter().map(|r| r.summary.p80).collect();
    meds.sort_by(f64::total_cmp);
    p80s.sort_by(f64::total_cmp);
    let (med_of_seeds, p80_of_seeds) = (meds[1], p80s[1]);
    for r in &headline {
        push(&mut summary, r);
    }
    let dv = VivaldiConfig::default();
    let dp = ProbeConfig {
        neighbours: 32,
        ..Default::default()
    };
    let (def_e, def_probes) = vivaldi_run(&m, dv, dp, if q { 300.0 } else { 4000.0 }, ctx.seed)?;
    let def_row = row_of(
        "vivaldi 8D+h default",
        format!(
            "nb=32 close=0.5 cc=0.25 ce=0.25 rate=1/s t={}s",
            if q { 300 } else { 4000 }
        ),
        def_probes as f64,
        &ErrorSummary::of_pairs(&def_e),
    );
    push(&mut summary, &def_row);
    headline.push(def_row);

    // 2. Probe rate × log time.
    progress(ctx, "probe rate x log time");
    let mut rate_table = Table::new(
        "Vivaldi 8D+h, 12 neighbours: error vs log time at several probe rates (Table 3)",
        &[
            "probes_per_s",
            "log_time_s",
            "probes_per_node",
            "median",
            "p80",
            "p90",
        ],
    );
    let mut rate_plot = Plot::of(
        "paper 001 Table 3",
        "Vivaldi 8-D + height, 12 neighbours: median relative error vs log time at several probe rates",
        "time (s, log scale)",
        "median relative error",
    );
    rate_plot.x_scale = Scale::Log;
    let checkpoints: Vec<f64> = if q {
        vec![30.0, 60.0, 120.0]
    } else {
        vec![30.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0]
    };
    for rate in [0.2, 1.0, 5.0] {
        let p = ProbeConfig {
            neighbours: 12,
            probe_rate: rate,
            ..Default::default()
        };
        let mut sim = ProbeSim::new(&m, dv, p, ctx.seed).map_err(|e| ExperimentError::Run(e.to_string()))?;
        let mut pts = Vec::new();
        for &t in &checkpoints {
            sim.run_until(&m, t);
            let s = ErrorSummary::of_pairs(&errors_of(&m, &sim, t));
            rate_table.push([
                rate.to_string(),
                t.to_string(),
                format!("{:.1}", sim.probes() as f64 / n as f64),
                f4(s.median),
                f4(s.p80),
                f4(s.p90),
            ]);
            pts.push((t, s.median));
        }
        rate_plot = rate_plot.with(Series::marked(format!("{rate} probes/s"), pts));
    }
    out.files
        .push(ctx.out.write_csv("rate_vs_time.csv", &rate_table)?);
    out.files
        .push(ctx.out.write_plot("rate_vs_time.svg", &rate_plot)?);

    // 3. Neighbour-set size.
    progress(ctx, "neighbour-set sizes");
    let nsecs = if q { 200.0 } else { 4000.0 };
    let mut nb_rows = Vec::new();
    let sizes: &[usize] = if q {
        &[4, 12, 32]
    } else {
        &[4, 8, 12, 32, 64, 128, 256]
    };
    for &k in sizes {
        let p = ProbeConfig {
            neighbours: k,
            ..Default::default()
        };
        let (e, probes) = vivaldi_run(&m, dv, p, nsecs, ctx.seed)?;
        nb_rows.push(row_of(
            "vivaldi 8D+h default",
            format!("nb={k} t={nsecs}s"),
            probes as f64,
            &ErrorSummary::of_pairs(&e),
        ));
    }
    let mut nb_table = Table::new(
        "Vivaldi 8D+h: neighbour-set size",
        &["method", "parameters", "probes/node", "median", "p80", "p90"],
    );
    for r in &nb_rows {
        push(&mut nb_table, r);
    }
    out.files.push(ctx.out.write_csv("neighbours.csv", &nb_table)?);

    // 4. Dimensions.
    progress(ctx, "dimensions");
    let mut dim_rows = Vec::new();
    let mut cdf_plot = Plot::of(
        "paper 001 §6.3.1",
        format!("CDF of relative error |estimate − RTT| / RTT, {n} PlanetLab hosts"),
        "relative error (log scale)",
        "fraction of pairs",
    )
    .scales(Scale::Log, Scale::Linear);
    for (dims, height) in [(2, false), (2, true), (5, true), (8, false), (8, true)] {
        let v = VivaldiConfig {
            dims,
            height,
            ..Default::default()
        };
        let (e, probes) = vivaldi_run(&m, v, dp, nsecs, ctx.seed)?;
        let label = format!("{dims}D{}", if height { "+h" } else { "" });
        dim_rows.push(row_of(
            &format!("vivaldi {label}"),
            format!("nb=32 t={nsecs}s"),
            probes as f64,
            &ErrorSummary::of_pairs(&e),
        ));
        if dims == 2 && !height {
            cdf_plot = cdf_plot.with(Series::step("vivaldi 2D (default)", cdf_points(&e.relative, 200)));
        }
    }
    let mut dim_table = Table::new(
        "Vivaldi: dimensions and height",
        &["method", "parameters", "probes/node", "median", "p80", "p90"],
    );
    for r in &dim_rows {
        push(&mut dim_table, r);
    }
    out.files.push(ctx.out.write_csv("dimensions.csv", &dim_table)?);

    // 5. Landmarks.
    progress(ctx, "landmarks");
    let mut lm_rows = Vec::new();
    let mut best_lm: Option<(f64, Vec<f64>)> = None;
    let counts: &[usize] = if q { &[10] } else { &[10, 16, 20, 30] };
    let rtt = |i: usize, j: usize| f64::from(m.rtt_ms(i, j));
    for &l in counts.iter().filter(|&&l| l < n) {
        for sel in [LandmarkSelection::Random, LandmarkSelection::FarthestFirst] {
            let cfg = LandmarkConfig {
                landmarks: l,
                selection: sel,
                iterations: if q { 300 } else { 4000 },
                restarts: if q { 2 } else { 8 },
                ..Default::default()
            };
            let fit = fit_all(n, &rtt, &cfg, ctx.seed).map_err(|e| ExperimentError::Run(e.to_string()))?;
            let e = pair_errors(n, rtt, estimate(&fit.coords));
            let s = ErrorSummary::of_pairs(&e);
            lm_rows.push(row_of(
                "landmarks 8D+h",
                format!("L={l} {sel:?} (+{} probes among landmarks)", fit.landmark_probes),
                fit.probes_per_host as f64,
                &s,
            ));
            if l == 20 && sel == LandmarkSelection::Random || best_lm.is_none() {
                best_lm = Some((l as f64, e.relative));
            }
        }
    }
    for r in &lm_rows {
        push(&mut summary, r);
    }
    cdf_plot = cdf_plot.with(Series::step(
        "vivaldi 8D+h tuned",
        cdf_points(&headline_errors, 200),
    ));
    cdf_plot = cdf_plot.with(Series::step(
        "vivaldi 8D+h default",
        cdf_points(&def_e.relative, 200),
    ));
    if let Some((l, e)) = &best_lm {
        cdf_plot = cdf_plot.with(Series::step(format!("landmarks L={l}"), cdf_points(e, 200)));
    }
    cdf_plot = cdf_plot
        .with_vline("paper: Vivaldi p80 = 0.5", 0.5)
        .with_vline("paper: Netvigator p80 = 0.15", 0.15);
    let mut cdf_table = Table::new("CDF of relative error", &["series", "relative_error", "fraction"]);
    for s in &cdf_plot.series {
        for (x, y) in &s.points {
            cdf_table.push([s.name.clone(), format!("{x:.6}"), format!("{y:.6}")]);
        }
    }
    out.files.push(ctx.out.write_csv("error_cdf.csv", &cdf_table)?);
    out.files.push(ctx.out.write_plot("error_cdf.svg", &cdf_plot)?);

    // 6. Drift.
    progress(ctx, "drift");
    let mut rng = DetRng::new(ctx.seed ^ 0xD81F7);
    let mut hosts: Vec<usize> = (0..n).collect();
    rng.shuffle(&mut hosts);
    hosts.truncate(n / 5);
    let (settle, span, step) = if q {
        (200.0, 200.0, 50.0)
    } else {
        (2000.0, 2000.0, 100.0)
    };
    let dm = DriftingMatrix::new(
        m.clone(),
        vec![Drift {
            hosts,
            extra_ms: 50.0,
            from_s: settle,
            until_s: settle + span,
        }],
    );
    let mut sim = ProbeSim::new(&dm, dv, dp, ctx.seed).map_err(|e| ExperimentError::Run(e.to_string()))?;
    let mut drift_table = Table::new(
        "Vivaldi 8D+h under drift (20% of hosts +50 ms during the window)",
        &["time_s", "median", "p80", "p90"],
    );
    let (mut med_pts, mut p80_pts) = (Vec::new(), Vec::new());
    let mut t = step;
    while t <= settle + 2.0 * span + 1e-9 {
        sim.run_until(&dm, t);
        // Judge against the matrix in force just before t (the one the last probes saw).
        let s = ErrorSummary::of_pairs(&errors_of(&dm, &sim, t - 1e-6));
        drift_table.push([t.to_string(), f4(s.median), f4(s.p80), f4(s.p90)]);
        med_pts.push((t, s.median));
        p80_pts.push((t, s.p80));
        // Also sample right after each change, before any probe adapts.
        for edge in [settle, settle + span] {
            if (t - edge).abs() < 1e-9 {
                let s = ErrorSummary::of_pairs(&errors_of(&dm, &sim, edge + 1e-6));
                drift_table.push([format!("{edge}+"), f4(s.median), f4(s.p80), f4(s.p90)]);
                med_pts.push((edge + 1e-3, s.median));
                p80_pts.push((edge + 1e-3, s.p80));
            }
        }
        t += step;
    }
    out.files.push(ctx.out.write_csv("drift.csv", &drift_table)?);
    let drift_plot = Plot::of(
        "ours (paper 001 §6.3.1 discusses churn; no figure)",
        "Vivaldi re-convergence after 20% of hosts gain +50 ms",
        "time (s)",
        "relative error",
    )
    .with(Series::line("median", med_pts))
    .with(Series::line("p80", p80_pts));
    out.files.push(ctx.out.write_plot("drift.svg", &drift_plot)?);

    out.files.push(ctx.out.write_csv("summary.csv", &summary)?);
    let report = Report {
        hosts: n,
        quick: q,
        seed: ctx.seed,
        metric: "|est-true|/true over ordered pairs (i != j) with true > 0; nearest-rank quantiles",
        headline,
        headline_median_of_seeds: med_of_seeds,
        headline_p80_of_seeds: p80_of_seeds,
        dimensions: dim_rows,
        neighbours: nb_rows,
        landmarks: lm_rows,
    };
    out.files.push(ctx.out.write_json("report.json", &report)?);
    out.notes.push(format!(
        "Vivaldi 8D+height tuned, median over 3 seeds: median relative error {med_of_seeds:.4}, p80 {p80_of_seeds:.4} \
         (issue target: median <= 0.08; paper §6.3.1: Vivaldi had 80% of pairs within 0.5, Netvigator within 0.15)."
    ));
    out.tables.push(summary);
    out.tables.push(nb_table);
    out.tables.push(dim_table);
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn quick_run_writes_sane_results() {
        let (_temp, ctx) = crate::test_support::quick_temp("vivaldi", 5);
        let dir = ctx.out.root().to_path_buf();
        let out = run(&ctx).unwrap();
        assert!(out.files.iter().all(|f| f.exists()));
        let summary = std::fs::read_to_string(dir.join("summary.csv")).unwrap();
        assert!(
            summary.starts_with("method,parameters,probes/node,median,p80,p90\n"),
            "{summary}"
        );
        // Every CDF series is non-decreasing in both coordinates and ends at 1.
        let cdf = std::fs::read_to_string(dir.join("error_cdf.csv")).unwrap();
        let mut series: std::collections::BTreeMap<String, Vec<(f64, f64)>> = Default::default();
        for line in cdf.lines().skip(1) {
            let (name, rest) = line.rsplit_once(',').unwrap();
            let (name, x) = name.rsplit_once(',').unwrap();
            series
                .entry(name.to_string())
                .or_default()
                .push((x.parse().unwrap(), rest.parse().unwrap()));
        }
        assert!(series.len() >= 3, "{:?}", series.keys());
        for (name, pts) in &series {
            assert!(
                pts.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1),
                "{name} not monotone"
            );
            assert!(
                (pts.last().unwrap().1 - 1.0).abs() < 1e-9,
                "{name} does not end at 1"
            );
        }
        let r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
        let med = r["headline_median_of_seeds"].as_f64().unwrap();
        let p80 = r["headline_p80_of_seeds"].as_f64().unwrap();
        // Even the short quick run estimates far better than chance, and p80 >= median.
        assert!(med > 0.0 && med < 0.3 && p80 >= med, "median {med} p80 {p80}");
        for row in r["landmarks"].as_array().unwrap() {
            assert_eq!(row["probes_per_node"].as_f64().unwrap(), 10.0);
        }
        // The drift shows up right after the route change and fades again.
        let drift = std::fs::read_to_string(dir.join("drift.csv")).unwrap();
        let p80_at = |t: &str| -> f64 {
            let l = drift.lines().find(|l| l.starts_with(&format!("{t},"))).unwrap();
            l.split(',').nth(2).unwrap().parse().unwrap()
        };
        assert!(p80_at("200+") > 1.2 * p80_at("200"), "{drift}");
        assert!(p80_at("400") < p80_at("200+"), "{drift}");
    }
}
