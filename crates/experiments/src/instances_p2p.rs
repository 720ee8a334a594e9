//! `instances-p2p`: paper `003` Figures 11 and 12 — scenario B (connections 20 % above
//! disconnections): per server, the players it serves and those it distributed to the P2P
//! area; total players against the Central Area's capacity; and the communication cost of
//! distributing vs Return RATE (Table 2 formula, §3.3.2, and as measured).

use crate::{Context, ExperimentError, Outcome};
use worldmesh_instances::cost::p2p_cost;
use worldmesh_instances::sim::{ScenarioConfig, run as run_scenario};
use worldmesh_report::{Plot, Series, Table};

use crate::claim::{Better, Check, Claim, Estimate, Expect, Tol};

const BEYOND: Claim = Claim {
    id: "fig11-beyond-capacity",
    paper: "003",
    location: "§5.1, Fig. 11 (scenario B)",
    quote: "From this Figure, we can see that the Hybrid proposal is able to exploit the P2P area distributing players and avoiding the overload situation.",
    metric: "players in the game at the end of scenario B ÷ the Central Area's capacity (10 × max_S_load), Return RATE 50 %",
    unit: "ratio",
    expect: Expect::Above(1.0),
};
const KB719: Claim = Claim {
    id: "fig12-worst-719kb",
    paper: "003",
    location: "§5.1, Fig. 12 (Table 2)",
    quote: "However, it is remarkable that even in the worst case (Return RATE = 100 % and extra_S_players = 1,000), the total amount of communications, assuming a message size equal to 141 Bytes [16], supposes an extra bandwidth of 719 KB for the CS, which is only slightly higher than a conventional ADSL connection.",
    metric: "Table 2 messages (2 · (extra + 10 % · max_S_load) + (extra + 10 % · max_S_load) · Return RATE) × 141 B, KB (1000 B), extra = 1000, Return RATE 100 %",
    unit: "KB",
    expect: Expect::Value {
        value: 719.0,
        tol: Tol::Rel(0.05),
        better: Better::Neither,
    },
};
/// Claims of `instances-p2p`.
pub const CLAIMS: &[Claim] = &[BEYOND, KB719];

/// Message size used to turn messages into bandwidth (§5.2, citing ref. 16: 141 bytes).
pub const MESSAGE_BYTES: f64 = 141.0;

/// Algorithm 3's status period `T` used to count the P2P instances' status messages (s):
/// the failover machine's default heartbeat period.
pub fn status_period_s() -> f64 {
    worldmesh_instances::failover::FailoverConfig::default()
        .heartbeat
        .as_secs_f64()
}

fn config(return_rate: f64, seed: u64, quick: bool) -> ScenarioConfig {
    let mut c = ScenarioConfig::scenario_b(return_rate, seed);
    if quick {
        c.cluster.max_s_load = 550;
        c.initial_players = 5_500;
        c.connect_rate /= 10.0;
        c.disconnect_rate /= 10.0;
        c.form_rate /= 10.0;
        c.move_rate /= 10.0;
    }
    c
}

/// Runs the experiment.
pub fn run(ctx: &Context) -> Result<Outcome, ExperimentError> {
    let mut out = Outcome::default();
    let rates: Vec<f64> = if ctx.quick {
        vec![0.0, 1.0]
    } else {
        vec![0.0, 0.25, 0.5, 0.75, 1.0]
    };
    let mut measured = Table::new(
        "Scenario B per Return RATE: players and balancing messages over the run",
        &[
            "Return RATE (%)",
            "players at end",
            "CS capacity",
            "in CS",
            "in P2P",
            "instances sent to P2P",
            "players sent to P2P",
            "players returned",
            "messages 2·sent + returned",
            "avg extra CS bandwidth (B/s)",
            "status msgs to CS (per s)",
        ],
    );
    let mut fig11 = None;
    let mut beyond: Option<(f64, String)> = None;
    let mut over_time = None;
    for &rr in &rates {
        let c = config(rr, ctx.seed, ctx.quick);
        let r = run_scenario(&c).map_err(|e| ExperimentError::Input(e.to_string()))?;
        let last = r.samples.last().cloned();
        let msgs = 2.0 * r.players_distributed() as f64 + r.returned as f64;
        let (total, cs, p2p) = last.as_ref().map_or((0, 0, 0), |s| {
            (
                s.total_players,
                s.loads.iter().map(|&l| u64::from(l)).sum::<u64>(),
                s.p2p_players,
            )
        });
        measured.push([
            format!("{:.0}", rr * 100.0),
            total.to_string(),
            c.cluster.capacity().to_string(),
            cs.to_string(),
            p2p.to_string(),
            r.p2p_instances.to_string(),
            r.players_distributed().to_string(),
            r.returned.to_string(),
            format!("{msgs:.0}"),
            format!("{:.0}", msgs * MESSAGE_BYTES / c.duration_s),
            format!("{:.1}", r.p2p_instance_seconds / status_period_s() / c.duration_s),
        ]);
        if (rr - 0.5).abs() < 1e-9 || (ctx.quick && rr == 0.0) {
            beyond = Some((
                total as f64 / c.cluster.capacity() as f64,
                format!(
                    "scenario B{}, Return RATE {:.0}%, seed {}",
                    if ctx.quick { " scaled down ×10" } else { "" },
                    rr * 100.0,
                    ctx.seed
                ),
            ));
            let mut t = Table::new(
                format!(
                    "Figure 11 (Return RATE {:.0} %): per server at the end of scenario B",
                    rr * 100.0
                ),
                &[
                    "server",
                    "players in server",
                    "players in P2P from it (now)",
                    "players sent to P2P (whole run)",
                ],
            );
            for s in 0..c.cluster.servers {
                t.push([
                    format!("S{}", s + 1),
                    r.final_loads[s].to_string(),
                    r.final_p2p_by_origin[s].to_string(),
                    r.distributed_from[s].to_string(),
                ]);
            }
            let plot = Plot::of(
                "paper 003 Fig. 11",
                format!("players per server and players it distributed to the P2P area, end of scenario B (Return RATE {:.0}%)", rr * 100.0),
                "server",
                "players",
            )
            .with_categories((1..=c.cluster.servers).map(|i| format!("S{i}")))
            .with(Series::area("in the server", (0..c.cluster.servers).map(|i| (i as f64, f64::from(r.final_loads[i]))).collect()))
            .with(Series::area(
                "in the P2P area (from this server)",
                (0..c.cluster.servers).map(|i| (i as f64, r.final_p2p_by_origin[i] as f64)).collect(),
            ))
            .with_hline("max_S_load", f64::from(c.cluster.max_s_load))
            .with_hline("target (max_S_load − 10%)", f64::from(c.cluster.target_load()));
            out.files.push(ctx.out.write_plot("figure11.svg", &plot)?);
            out.files.push(ctx.out.write_csv("figure11.csv", &t)?);
            let tot: Vec<(f64, f64)> = r
                .samples
                .iter()
                .map(|s| (s.t / 60.0, s.total_players as f64))
                .collect();
            let csl: Vec<(f64, f64)> = r
                .samples
                .iter()
                .map(|s| (s.t / 60.0, (s.total_players - s.p2p_players) as f64))
                .collect();
            let p2l: Vec<(f64, f64)> = r
                .samples
                .iter()
                .map(|s| (s.t / 60.0, s.p2p_players as f64))
                .collect();
            let cap: Vec<(f64, f64)> = r
                .samples
                .iter()
                .map(|s| (s.t / 60.0, c.cluster.capacity() as f64))
                .collect();
            let plot = Plot::of(
                "paper 003 §5.1 scenario B (ours: players over time)",
                format!("players over time, Return RATE {:.0}%", rr * 100.0),
                "time (min)",
                "players",
            )
            .with(Series::line("total", tot))
            .with(Series::line("in Central Area", csl))
            .with(Series::line("in P2P area", p2l))
            .with(Series::line("Central Area capacity", cap));
            out.files
                .push(ctx.out.write_plot("players_over_time.svg", &plot)?);
            fig11 = Some(t);
            over_time = Some(
                r.samples
                    .iter()
                    .map(|s| (s.t, s.total_players, s.p2p_players))
                    .collect::<Vec<_>>(),
            );
        }
    }
    // Figure 12: Table 2 cost vs extra_S_players for each Return RATE.
    let margin = f64::from(config(0.0, ctx.seed, false).cluster.margin());
    let mut t12 = Table::new(
        "Figure 12: messages of one distribution to the P2P area (Table 2) vs extra_S_players",
        &[
            "extra_S_players",
            "RR 0 %",
            "RR 25 %",
            "RR 50 %",
            "RR 75 %",
            "RR 100 %",
        ],
    );
    let all_rates = [0.0, 0.25, 0.5, 0.75, 1.0];
    let mut curves: Vec<Vec<(f64, f64)>> = vec![Vec::new(); all_rates.len()];
    for x in (1..=10).map(|k| f64::from(k * 100)) {
        let mut row = vec![format!("{x:.0}")];
        for (i, &rr) in all_rates.iter().enumerate() {
            let c = p2p_cost(x, margin, rr);
            curves[i].push((x, c));
            row.push(format!("{c:.0}"));
        }
        t12.push(row);
    }
    let mut plot = Plot::of(
        "paper 003 Fig. 12",
        "messages of one distribution to the P2P area (Table 2) vs extra_S_players",
        "extra_S_players",
        "messages",
    );
    for (i, c) in curves.into_iter().enumerate() {
        plot = plot.with(Series::marked(
            format!("Return RATE {:.0} %", all_rates[i] * 100.0),
            c,
        ));
    }
    out.files.push(ctx.out.write_plot("figure12.svg", &plot)?);
    out.files.push(ctx.out.write_csv("figure12.csv", &t12)?);
    out.files
        .push(ctx.out.write_csv("scenario_b_measured.csv", &measured)?);
    let worst = p2p_cost(1000.0, margin, 1.0);
    out.files.push(ctx.out.write_json(
        "report.json",
        &serde_json::json!({
            "worst_case_messages": worst,
            "worst_case_bytes": worst * MESSAGE_BYTES,
            "players_over_time": over_time,
        }),
    )?);
    out.notes.push(format!(
        "Table 2 worst case (Return RATE 100 %, extra_S_players 1000): {worst:.0} messages = {:.0} KB at 141 B \
         (paper: 719 KB). Scenario B exceeds the Central Area's capacity through the P2P area: see 'players at end' vs \
         'CS capacity'.",
        worst * MESSAGE_BYTES / 1000.0
    ));
    if let Some((v, cond)) = beyond {
        out.checks.push(Check::new(BEYOND, Estimate::exact(v), cond));
    }
    out.checks.push(Check::new(
        KB719,
        Estimate::exact(worst * MESSAGE_BYTES / 1000.0),
        "Table 2 formula, max_S_load 5500, extra_S_players 1000, Return RATE 100%, 141-byte messages",
    ));
    out.tables.push(measured);
    if let Some(t) = fig11 {
        out.tables.push(t);
    }
    out.tables.push(t12);
    Ok(out)
}
