//! `failover`: issue 7 item 5 — real failover in the node (paper `003` §3.2.1, Algorithms
//! 3 and 4). One game instance hosted by node 0 with its replicated server on node 1, a
//! spare server and players on other nodes, all real [`worldmesh_node::Node`]s in the
//! simulator over PlanetLab delays with 5 % datagram loss; the host crashes (or is cut off
//! for 1.5 s) at a random time ([`worldmesh_sim::failover`]).
//!
//! Reported per variant (placement × fault × players), over many trials: median, p99 and
//! max of the time from the fault to the promotion, to the takeover (the promoted server's
//! first commit: it confirms player inputs again, acknowledged by its new replica and known
//! to a majority), to every player's redirection and to every player's first confirmation;
//! the fraction of takeovers within `2T` (the target, `T` = 250 ms heartbeat
//! period); trials not ending with exactly one server; confirmed inputs lost.

use crate::{Context, ExperimentError, Outcome, shipped_planetlab_path};
use std::sync::Arc;
use std::time::Duration;
use worldmesh_core::LatencyMatrix;
use worldmesh_report::{Plot, Series, Table};

use crate::claim::{Check, Claim, Estimate, Expect};

const TAKEOVER: Claim = Claim {
    id: "issue7-takeover-2t",
    paper: "issue 7",
    location: "item 5 (project target for paper 003 §3.2.1, Algorithms 3 and 4, which give no timing)",
    quote: "takeover within 2T of a host's crash under 5 % loss (T = heartbeat period)",
    metric: "median time from the host's crash to the promoted replica's first commit, ms, per group of trials (one group per seed), nearest hosts, LL roles, 4 players, real nodes in the simulator, 5% loss, PlanetLab delays",
    unit: "ms",
    expect: Expect::Below(500.0),
};
/// Claims of `failover`.
pub const CLAIMS: &[Claim] = &[TAKEOVER];
use worldmesh_sim::failover::{
    FailoverConfig, FailoverReport, FailoverScenario, Fault, Placement, RoleChoice,
};

fn percentile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

struct Variant {
    placement: Placement,
    fault: Fault,
    players: usize,
    roles: RoleChoice,
}

impl Variant {
    fn label(&self) -> String {
        let p = match self.placement {
            Placement::Nearest => "nearest hosts",
            Placement::Random => "random hosts",
        };
        let f = match self.fault {
            Fault::Crash => "crash".to_string(),
            Fault::Partition { heal_after } => format!("partition {} s", heal_after.as_secs_f64()),
        };
        let r = match self.roles {
            RoleChoice::LowestLatency => "LL roles",
            RoleChoice::Random => "random roles",
        };
        format!("{f}, {p}, {r}, {} players", self.players)
    }
}

/// Runs the experiment.
pub fn run(ctx: &Context) -> Result<Outcome, ExperimentError> {
    let path = ctx.latency_file.clone().unwrap_or_else(shipped_planetlab_path);
    let matrix = Arc::new(LatencyMatrix::load(&path).map_err(|e| ExperimentError::Input(e.to_string()))?);
    let trials = if ctx.quick { 4 } else { 300 };
    let fcfg = FailoverConfig::default();
    let two_t_ms = 2.0 * fcfg.heartbeat.as_secs_f64() * 1000.0;
    let partition = Fault::Partition {
        heal_after: Duration::from_millis(1_500),
    };
    let mut variants = Vec::new();
    for placement in [Placement::Nearest, Placement::Random] {
        for players in [4usize, 10] {
            variants.push(Variant {
                placement,
                fault: Fault::Crash,
                players,
                roles: RoleChoice::LowestLatency,
            });
        }
        variants.push(Variant {
            placement,
            fault: partition,
            players: 4,
            roles: RoleChoice::LowestLatency,
        });
    }
    // Worst case: no latency-aware choice of host and replica at all.
    variants.push(Variant {
        placement: Placement::Random,
        fault: Fault::Crash,
        players: 4,
        roles: RoleChoice::Random,
    });
    let mut out = Outcome::default();
    let mut summary = Table::new(
        format!(
            "failover: host fault under 5 % loss on PlanetLab delays, {trials} trials per row (ms from the fault; 2T = {two_t_ms:.0} ms)"
        ),
        &[
            "variant",
            "promoted med",
            "promoted p99",
            "takeover med",
            "takeover p90",
            "takeover p99",
            "takeover max",
            "takeover within 2T (%)",
            "floor + detection within 2T (%)",
            "floor within 2T (%)",
            "promoted within 2T (%)",
            "redirected p99",
            "all confirmed p99",
            "no takeover",
            "promotions after",
            "claims before fault",
            "spurious before fault",
            "≠ 1 server at end",
            "confirmed lost",
            "confirmed total",
        ],
    );
    let mut per_trial = Table::new(
        "failover: one row per trial",
        &[
            "variant",
            "seed",
            "fault_at_s",
            "promoted_ms",
            "takeover_ms",
            "redirected_ms",
            "all_confirm_ms",
            "servers_at_end",
            "confirmed_lost",
            "confirmed_total",
            "host_replica_rtt_ms",
            "replica_max_rtt_ms",
            "floor_ms",
        ],
    );
    let mut json = Vec::new();
    let mut fault_free_s = 0.0;
    let mut plot = Plot::of(
        "issue 7 target (paper 003 Algorithms 3/4 give no timing)",
        "CDF of takeover time after a host fault, real nodes in the simulator, 5% loss, PlanetLab delays",
        "time from the fault to the new server's first commit (ms)",
        "fraction of trials",
    );
    let mut checks = Vec::new();
    for (vi, v) in variants.iter().enumerate() {
        let label = v.label();
        let mut reports: Vec<FailoverReport> = Vec::with_capacity(trials);
        for t in 0..trials {
            let seed = ctx
                .seed
                .wrapping_mul(1_000_003)
                .wrapping_add((vi as u64) << 32 | t as u64);
            let mut s = FailoverScenario::new(Arc::clone(&matrix), v.players, seed);
            s.placement = v.placement;
            s.fault = v.fault;
            s.roles = v.roles;
            s.failover = fcfg.clone();
            let r = s.run().map_err(|e| ExperimentError::Run(e.to_string()))?;
            let opt = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{x:.1}"));
            per_trial.push([
                label.clone(),
                seed.to_string(),
                format!("{:.3}", r.fault_at_s),
                opt(r.promoted_ms),
                opt(r.takeover_ms),
                opt(r.redirected_ms),
                opt(r.all_confirm_ms),
                r.servers_at_end.len().to_string(),
                r.confirmed_lost.to_string(),
                r.confirmed_total.to_string(),
                format!("{:.1}", r.host_replica_rtt_ms),
                format!("{:.1}", r.replica_max_rtt_ms),
                format!("{:.1}", r.floor_ms),
            ]);
            reports.push(r);
        }
        let take: Vec<f64> = reports.iter().filter_map(|r| r.takeover_ms).collect();
        let prom: Vec<f64> = reports.iter().filter_map(|r| r.promoted_ms).collect();
        let redir: Vec<f64> = reports.iter().filter_map(|r| r.redirected_ms).collect();
        let conf: Vec<f64> = reports.iter().filter_map(|r| r.all_confirm_ms).collect();
        let n = trials as f64;
        let within = take.iter().filter(|&&t| t <= two_t_ms).count() as f64 / n;
        let prom_within = prom.iter().filter(|&&t| t <= two_t_ms).count() as f64 / n;
        let floor_within =
            |detect: f64| reports.iter().filter(|r| r.floor_ms + detect <= two_t_ms).count() as f64 / n;
        let detect_ms = fcfg.suspect_timeout().as_secs_f64() * 1000.0;
        // the best tick phase: the host's last message left one tick before the fault
        let tick_ms = fcfg.tick.as_secs_f64() * 1000.0;
        let (floor_detect, floor_only) = (floor_within(detect_ms - tick_ms), floor_within(0.0));
        let none = reports.iter().filter(|r| r.takeover_ms.is_none()).count();
        let spurious: usize = reports
            .iter()
            .map(|r| r.promotions.iter().filter(|p| p.0 < r.fault_at_s).count())
            .sum();
        let claims: usize = reports
            .iter()
            .map(|r| r.candidacies.iter().filter(|c| c.0 < r.fault_at_s).count())
            .sum();
        fault_free_s += reports.iter().map(|r| r.fault_at_s).sum::<f64>();
        let after: usize = reports
            .iter()
            .map(|r| r.promotions.iter().filter(|p| p.0 >= r.fault_at_s).count())
            .sum();
        let multi = reports.iter().filter(|r| r.servers_at_end.len() != 1).count();
        let lost: u64 = reports.iter().map(|r| r.confirmed_lost).sum();
        let total: u64 = reports.iter().map(|r| r.confirmed_total).sum();
        let max = take.iter().copied().fold(f64::NAN, f64::max);
        summary.push([
            label.clone(),
            format!("{:.0}", percentile(&prom, 0.5)),
            format!("{:.0}", percentile(&prom, 0.99)),
            format!("{:.0}", percentile(&take, 0.5)),
            format!("{:.0}", percentile(&take, 0.9)),
            format!("{:.0}", percentile(&take, 0.99)),
            format!("{max:.0}"),
            format!("{:.2}", 100.0 * within),
            format!("{:.2}", 100.0 * floor_detect),
            format!("{:.2}", 100.0 * floor_only),
            format!("{:.2}", 100.0 * prom_within),
            format!("{:.0}", percentile(&redir, 0.99)),
            format!("{:.0}", percentile(&conf, 0.99)),
            none.to_string(),
            after.to_string(),
            claims.to_string(),
            spurious.to_string(),
            multi.to_string(),
            lost.to_string(),
            total.to_string(),
        ]);
        json.push(serde_json::json!({
            "variant": label, "trials": trials, "players": v.players,
            "placement": v.placement, "fault": v.fault, "roles": v.roles,
            "promoted_ms": {"median": percentile(&prom, 0.5), "p99": percentile(&prom, 0.99)},
            "takeover_ms": {"median": percentile(&take, 0.5), "p90": percentile(&take, 0.9), "p99": percentile(&take, 0.99), "max": max},
            "claims_before_fault": claims,
            "takeover_within_2t": within, "promoted_within_2t": prom_within,
            "floor_plus_detection_within_2t": floor_detect, "floor_within_2t": floor_only,
            "redirected_ms": {"median": percentile(&redir, 0.5), "p99": percentile(&redir, 0.99)},
            "all_confirmed_ms": {"median": percentile(&conf, 0.5), "p99": percentile(&conf, 0.99)},
            "no_takeover": none, "promotions_after_fault": after, "spurious_promotions_before_fault": spurious, "not_one_server_at_end": multi,
            "confirmed_lost": lost, "confirmed_total": total,
        }));
        if vi == 0 {
            let groups = ctx.headline_seeds.min(reports.len()).max(1);
            let per = reports.len() / groups;
            let meds: Vec<f64> = (0..groups)
                .map(|g| {
                    percentile(
                        &reports[g * per..(g + 1) * per]
                            .iter()
                            .filter_map(|r| r.takeover_ms)
                            .collect::<Vec<_>>(),
                        0.5,
                    )
                })
                .collect();
            checks.push(Check::new(
                TAKEOVER,
                Estimate::of(&meds),
                format!(
                    "{label}; {trials} trials in {groups} groups of {per}, seeds from {}",
                    ctx.seed
                ),
            ));
        }
        if !take.is_empty() {
            plot = plot.with(Series::cdf(label, &take));
        }
    }
    out.files
        .push(ctx.out.write_csv("failover_summary.csv", &summary)?);
    out.files
        .push(ctx.out.write_csv("failover_trials.csv", &per_trial)?);
    plot = plot.with_vline(format!("2T = {two_t_ms:.0} ms"), two_t_ms);
    out.files.push(ctx.out.write_plot("takeover_cdf.svg", &plot)?);
    out.checks = checks;
    out.files.push(ctx.out.write_json(
        "report.json",
        &serde_json::json!({
            "experiment": "failover", "seed": ctx.seed, "quick": ctx.quick,
            "loss": 0.05, "heartbeat_ms": fcfg.heartbeat.as_secs_f64() * 1000.0,
            "tick_ms": fcfg.tick.as_secs_f64() * 1000.0, "miss_limit": fcfg.miss_limit,
            "variants": json,
        }),
    )?);
    // False suspicions: long runs without a fault (the fault is scheduled after the
    // measured span), under the same 5 % loss.
    let (runs, span_s) = if ctx.quick { (1, 20u64) } else { (6, 600u64) };
    let mut quiet = Table::new(
        format!(
            "failover: fault-free runs under 5 % loss, {runs} runs × {span_s} s per row (false suspicions of a live server)"
        ),
        &[
            "variant",
            "instance-hours",
            "candidacies (false suspicions)",
            "promotions (spurious elections)",
            "per hour",
        ],
    );
    let mut quiet_json = Vec::new();
    for (qi, (placement, roles)) in [
        (Placement::Nearest, RoleChoice::LowestLatency),
        (Placement::Random, RoleChoice::LowestLatency),
        (Placement::Random, RoleChoice::Random),
    ]
    .into_iter()
    .enumerate()
    {
        let v = Variant {
            placement,
            fault: Fault::Crash,
            players: 4,
            roles,
        };
        let (mut cands, mut proms, mut secs) = (0usize, 0usize, 0.0f64);
        for t in 0..runs {
            let seed = ctx
                .seed
                .wrapping_mul(7_000_003)
                .wrapping_add((qi as u64) << 32 | t as u64);
            let mut s = FailoverScenario::new(Arc::clone(&matrix), v.players, seed);
            s.placement = placement;
            s.roles = roles;
            s.failover = fcfg.clone();
            s.fault_window = (
                Duration::from_secs(span_s),
                Duration::from_secs(span_s) + Duration::from_millis(1),
            );
            s.settle = Duration::from_millis(100);
            let r = s.run().map_err(|e| ExperimentError::Run(e.to_string()))?;
            cands += r.candidacies.iter().filter(|c| c.0 < r.fault_at_s).count();
            proms += r.promotions.iter().filter(|p| p.0 < r.fault_at_s).count();
            secs += r.fault_at_s;
        }
        let label = v.label().replace("crash, ", "no fault, ");
        quiet.push([
            label.clone(),
            format!("{:.2}", secs / 3600.0),
            cands.to_string(),
            proms.to_string(),
            format!("{:.2}", cands as f64 / (secs / 3600.0)),
        ]);
        quiet_json.push(serde_json::json!({
            "variant": label, "runs": runs, "seconds": secs, "candidacies": cands, "promotions": proms,
        }));
    }
    out.files
        .push(ctx.out.write_csv("failover_fault_free.csv", &quiet)?);
    out.files.push(ctx.out.write_json(
        "fault_free.json",
        &serde_json::json!({"loss": 0.05, "suspect_after_ticks": fcfg.suspect_after, "variants": quiet_json}),
    )?);
    out.notes.push(format!(
        "Takeover = fault → the promoted replica's first commit (its new replica stored the tick and a majority knows its configuration), measured on real nodes exchanging Control datagrams in the simulator; target ≤ 2T = {two_t_ms:.0} ms. LL roles: the most central node hosts and the next one is the replica (paper 003 §3.2); random roles: no latency-aware choice. Detection after {} silent ticks ({:.0} ms). Claims before the fault over {:.2} instance-hours of the trials above, plus the fault-free table. Floor = the placement's network floor under any majority-elected takeover (host → replica one way + vote round trip to the nearest majority + round trip to the next replica, base delays, no loss); 'floor + detection ≤ 2T' is the share of trials any protocol with this detection timeout could bring within 2T (detection counted from the host's last message, at best one tick before the fault), 'floor ≤ 2T' the share even with instant detection.",
        fcfg.suspect_after,
        fcfg.suspect_timeout().as_secs_f64() * 1000.0,
        fault_free_s / 3600.0
    ));
    out.tables.push(summary);
    out.tables.push(quiet);
    Ok(out)
}
