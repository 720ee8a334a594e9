//! `instances-comm`: paper `003` Figure 10 — communication cost of balancing as a function
//! of `extra_S_players` (100 … 1,000), Classic with Interaction 10 % and F = 20 and 25
//! messages/s vs Hybrid, from the Table 1 formulas (§3.3.1) and measured in one-shot
//! balancing rounds (players actually moved; Interaction actually caused), plus the cost
//! over the dynamic phase of scenario A.

use crate::instances_balance::scenario;
use crate::{Context, ExperimentError, Outcome};
use worldmesh_instances::cost::{classic_cost, hybrid_cost};
use worldmesh_instances::sim::{Method, ScenarioConfig, one_shot_round, run as run_scenario};
use worldmesh_report::{Plot, Series, Table};

use crate::claim::{Check, Claim, Estimate, Expect};

const FEWER: Claim = Claim {
    id: "fig10-hybrid-fewer",
    paper: "003",
    location: "§5.1, Fig. 10 (Table 1)",
    quote: "In spite of these unfavorable conditions, the Hybrid method exchanges many fewer messages than the Classic one, which corresponds with the analytical results obtained in the Section 3.3.",
    metric: "Classic ÷ Hybrid messages of one balancing round at extra_S_players = 1000 (Table 1: Interaction 10 %, F = 20 messages/s; Hybrid 2 · (extra + 10 % · max_S_load))",
    unit: "ratio",
    expect: Expect::Above(1.0),
};
const FEWER_SIM: Claim = Claim {
    id: "fig10-hybrid-fewer-measured",
    paper: "003",
    location: "§5.1, Fig. 10",
    quote: "In spite of these unfavorable conditions, the Hybrid method exchanges many fewer messages than the Classic one, which corresponds with the analytical results obtained in the Section 3.3.",
    metric: "the same ratio with the players actually moved and the Interaction actually broken in a simulated one-shot round (scenario A), F = 20",
    unit: "ratio",
    expect: Expect::Above(1.0),
};
/// Claims of `instances-comm`.
pub const CLAIMS: &[Claim] = &[FEWER, FEWER_SIM];

/// Runs the experiment.
pub fn run(ctx: &Context) -> Result<Outcome, ExperimentError> {
    let mut out = Outcome::default();
    let base = ScenarioConfig::scenario_a(Method::Hybrid, ctx.seed);
    let margin = f64::from(base.cluster.margin());
    let extras: Vec<u32> = if ctx.quick {
        vec![100, 500, 1000]
    } else {
        (1..=10).map(|k| k * 100).collect()
    };
    let mut t = Table::new(
        "Figure 10: messages caused by one balancing round vs extra_S_players",
        &[
            "extra_S_players",
            "Classic F=20 (Table 1)",
            "Classic F=25 (Table 1)",
            "Hybrid (Table 1)",
            "Hybrid moved (sim)",
            "Classic moved (sim)",
            "Classic Interaction (sim, fraction)",
            "Classic F=20 (sim)",
            "Classic F=25 (sim)",
            "Hybrid (sim)",
        ],
    );
    let mut series: [Vec<(f64, f64)>; 6] = Default::default();
    let mut ratio_1000 = None;
    for &x in &extras {
        let e = f64::from(x);
        let c20 = classic_cost(e, 0.10, 20.0, 1.0);
        let c25 = classic_cost(e, 0.10, 25.0, 1.0);
        let h = hybrid_cost(e, margin);
        let (hm, cm, split) = one_shot_round(&base, x).map_err(|e| ExperimentError::Input(e.to_string()))?;
        let inter = if cm > 0 { split as f64 / cm as f64 } else { 0.0 };
        let s20 = classic_cost(cm as f64, inter, 20.0, 1.0);
        let s25 = classic_cost(cm as f64, inter, 25.0, 1.0);
        let sh = 2.0 * hm as f64;
        t.push([
            x.to_string(),
            format!("{c20:.0}"),
            format!("{c25:.0}"),
            format!("{h:.0}"),
            hm.to_string(),
            cm.to_string(),
            format!("{inter:.3}"),
            format!("{s20:.0}"),
            format!("{s25:.0}"),
            format!("{sh:.0}"),
        ]);
        for (k, v) in [c20, c25, h, s20, s25, sh].into_iter().enumerate() {
            series[k].push((e, v));
        }
        if x == 1000 {
            ratio_1000 = Some((c20 / h, c25 / h, s20 / sh, s25 / sh));
        }
    }
    let names = [
        "Classic F=20 (Table 1)",
        "Classic F=25 (Table 1)",
        "Hybrid (Table 1)",
        "Classic F=20 (measured Interaction)",
        "Classic F=25 (measured Interaction)",
        "Hybrid (measured moves)",
    ];
    let mut plot = Plot::of(
        "paper 003 Fig. 10",
        "messages caused by one balancing round vs extra_S_players, scenario A",
        "extra_S_players",
        "messages",
    );
    for (k, s) in series.into_iter().enumerate() {
        plot = plot.with(Series::marked(names[k], s));
    }
    out.files.push(ctx.out.write_csv("figure10.csv", &t)?);
    out.files.push(ctx.out.write_plot("figure10.svg", &plot)?);

    // Dynamic phase of scenario A: moves plus F messages/s for every split player-second.
    let ch = scenario(Method::Hybrid, ctx.seed, ctx.quick);
    let cc = scenario(Method::Classic, ctx.seed, ctx.quick);
    let h = run_scenario(&ch).map_err(|e| ExperimentError::Input(e.to_string()))?;
    let c = run_scenario(&cc).map_err(|e| ExperimentError::Input(e.to_string()))?;
    let mut d = Table::new(
        "Scenario A dynamic phase: balancing messages over the whole run",
        &[
            "method",
            "players moved",
            "split player-seconds",
            "messages F=20",
            "messages F=25",
        ],
    );
    let hm = 2.0 * h.players_moved() as f64;
    let cm20 = 2.0 * c.players_moved() as f64 + 20.0 * c.split_player_seconds;
    let cm25 = 2.0 * c.players_moved() as f64 + 25.0 * c.split_player_seconds;
    d.push([
        "Hybrid".to_string(),
        h.players_moved().to_string(),
        "0".into(),
        format!("{hm:.0}"),
        format!("{hm:.0}"),
    ]);
    d.push([
        "Classic".to_string(),
        c.players_moved().to_string(),
        format!("{:.0}", c.split_player_seconds),
        format!("{cm20:.0}"),
        format!("{cm25:.0}"),
    ]);
    out.files.push(ctx.out.write_csv("dynamic_phase.csv", &d)?);
    out.files.push(ctx.out.write_json(
        "report.json",
        &serde_json::json!({
            "ratio_classic_over_hybrid_at_1000": ratio_1000.map(|r| serde_json::json!({
                "table1_f20": r.0, "table1_f25": r.1, "measured_f20": r.2, "measured_f25": r.3})),
            "dynamic": {"hybrid_messages": hm, "classic_messages_f20": cm20, "classic_messages_f25": cm25},
        }),
    )?);
    if let Some(r) = ratio_1000 {
        let cond = format!(
            "scenario A cluster (10 servers, max_S_load 5500), extra_S_players = 1000, seed {}",
            ctx.seed
        );
        out.checks
            .push(Check::new(FEWER, Estimate::exact(r.0), cond.clone()));
        out.checks.push(Check::new(FEWER_SIM, Estimate::exact(r.2), cond));
        out.notes.push(format!(
            "Classic/Hybrid cost at extra_S_players = 1000: Table 1 with Interaction 10 %: {:.2}× (F=20), {:.2}× (F=25); \
             with the Interaction measured when Classic moves individual players: {:.2}× (F=20), {:.2}× (F=25).",
            r.0, r.1, r.2, r.3
        ));
    }
    out.notes.push(format!(
        "Over the dynamic phase of scenario A (seed {}): Classic/Hybrid messages = {:.1}× (F=20), {:.1}× (F=25).",
        ctx.seed,
        cm20 / hm.max(1.0),
        cm25 / hm.max(1.0)
    ));
    out.tables.push(t);
    out.tables.push(d);
    Ok(out)
}
