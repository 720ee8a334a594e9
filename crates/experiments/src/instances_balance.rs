//! `instances-balance`: paper `003` Figure 9 — per-server load before and after one
//! balancing round in scenario A, Classic (Bezerra, player-based) vs Hybrid (Algorithm 1,
//! whole instances), the players each moves, and how many servers stay near stress while
//! the scenario goes on.

use crate::{Context, ExperimentError, Outcome};
use serde::Serialize;
use worldmesh_instances::sim::{Method, ScenarioConfig, ScenarioResult, run as run_scenario};
use worldmesh_report::{Plot, Series, Table};

use crate::claim::{Check, Claim, Estimate, Expect};

const BALANCED: Claim = Claim {
    id: "fig9-no-overload",
    paper: "003",
    location: "§5.1, Fig. 9",
    quote: "We can see that there were five overloaded servers at the beginning (S 4, S 7, S 8, S 9, S 10); whereas the final distribution of players is balanced in both cases, thus avoiding overloaded servers.",
    metric: "servers above max_S_load after the first balancing round, Hybrid (Algorithm 1), scenario A, per seed",
    unit: "servers",
    expect: Expect::Below(0.5),
};
const CLASSIC_NEAR: Claim = Claim {
    id: "fig9-classic-near-stress",
    paper: "003",
    location: "§5.1, Fig. 9",
    quote: "However, the Classic method lets more servers near the stress situation (S i .load ≃5,500) due to the fact that movements are applied taking individual players as an entity, instead of taking Auxiliary Games as in our Hybrid method.",
    metric: "servers at ≥ 95 % of max_S_load after the first round, Classic − Hybrid, same seed",
    unit: "servers",
    expect: Expect::Above(0.0),
};
/// Claims of `instances-balance`.
pub const CLAIMS: &[Claim] = &[BALANCED, CLASSIC_NEAR];

/// The scenario-A configuration used; quick mode scales players, capacity and rates down
/// ×10 (same times, same shape).
pub fn scenario(method: Method, seed: u64, quick: bool) -> ScenarioConfig {
    let mut c = ScenarioConfig::scenario_a(method, seed);
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

#[derive(Serialize)]
struct MethodSummary {
    method: String,
    moved_first_round: u64,
    near_stress_after_first_round: usize,
    at_limit_after_first_round: usize,
    max_load_after_first_round: u32,
    players_moved_total: u64,
    mean_near_stress_after_warmup: f64,
    split_player_seconds: f64,
}

fn at_limit(loads: &[u32], max: u32) -> usize {
    loads
        .iter()
        .filter(|&&l| f64::from(l) >= 0.99 * f64::from(max))
        .count()
}

fn near(loads: &[u32], max: u32) -> usize {
    loads
        .iter()
        .filter(|&&l| f64::from(l) >= 0.95 * f64::from(max))
        .count()
}

fn summary(name: &str, r: &ScenarioResult, c: &ScenarioConfig) -> MethodSummary {
    MethodSummary {
        method: name.into(),
        moved_first_round: r.rounds.first().map_or(0, |x| x.moved),
        near_stress_after_first_round: near(&r.after_first_round, c.cluster.max_s_load),
        at_limit_after_first_round: at_limit(&r.after_first_round, c.cluster.max_s_load),
        max_load_after_first_round: r.after_first_round.iter().copied().max().unwrap_or(0),
        players_moved_total: r.players_moved(),
        mean_near_stress_after_warmup: r.mean_near_stress(c.warmup_s),
        split_player_seconds: r.split_player_seconds,
    }
}

/// Runs the experiment.
pub fn run(ctx: &Context) -> Result<Outcome, ExperimentError> {
    let seeds: u64 = if ctx.quick { 5 } else { 10 };
    let (mut over_h, mut near_diff) = (Vec::new(), Vec::new());
    let mut out = Outcome::default();
    let mut per_seed = Table::new(
        "instances-balance: scenario A, one row per seed and method",
        &[
            "seed",
            "method",
            "overloaded before",
            "moved (1st round)",
            "near stress after 1st",
            "≥ 99 % after 1st",
            "max load after 1st",
            "moved (whole run)",
            "mean near stress (dynamic phase)",
        ],
    );
    let mut all = Vec::new();
    let mut agg = [[0.0f64; 5]; 2];
    for k in 0..seeds {
        let seed = ctx.seed.wrapping_add(k);
        let ch = scenario(Method::Hybrid, seed, ctx.quick);
        let cc = scenario(Method::Classic, seed, ctx.quick);
        let h = run_scenario(&ch).map_err(|e| ExperimentError::Input(e.to_string()))?;
        let c = run_scenario(&cc).map_err(|e| ExperimentError::Input(e.to_string()))?;
        over_h.push(
            h.after_first_round
                .iter()
                .filter(|&&l| l > ch.cluster.max_s_load)
                .count() as f64,
        );
        near_diff.push(
            near(&c.after_first_round, cc.cluster.max_s_load) as f64
                - near(&h.after_first_round, ch.cluster.max_s_load) as f64,
        );
        for (i, (name, r, conf)) in [("Hybrid", &h, &ch), ("Classic", &c, &cc)]
            .into_iter()
            .enumerate()
        {
            let s = summary(name, r, conf);
            let over = r
                .before_first_round
                .iter()
                .filter(|&&l| l > conf.cluster.max_s_load)
                .count();
            per_seed.push([
                seed.to_string(),
                name.to_string(),
                over.to_string(),
                s.moved_first_round.to_string(),
                s.near_stress_after_first_round.to_string(),
                s.at_limit_after_first_round.to_string(),
                s.max_load_after_first_round.to_string(),
                s.players_moved_total.to_string(),
                format!("{:.2}", s.mean_near_stress_after_warmup),
            ]);
            agg[i][0] += s.moved_first_round as f64;
            agg[i][1] += s.near_stress_after_first_round as f64;
            agg[i][2] += s.mean_near_stress_after_warmup;
            agg[i][3] += s.players_moved_total as f64;
            agg[i][4] += s.at_limit_after_first_round as f64;
            all.push((seed, s));
        }
        if k == 0 {
            // Figure 9 for the first seed
            let mut fig = Table::new(
                format!(
                    "Figure 9 (seed {seed}): players per server before and after the first balancing round"
                ),
                &[
                    "server",
                    "before",
                    "Classic after",
                    "Hybrid after",
                    "Classic end",
                    "Hybrid end",
                ],
            );
            for s in 0..ch.cluster.servers {
                fig.push([
                    format!("S{}", s + 1),
                    h.before_first_round[s].to_string(),
                    c.after_first_round[s].to_string(),
                    h.after_first_round[s].to_string(),
                    c.final_loads[s].to_string(),
                    h.final_loads[s].to_string(),
                ]);
            }
            out.files.push(ctx.out.write_csv("figure9_loads.csv", &fig)?);
            let vals = |v: &[u32]| v.iter().map(|&l| f64::from(l)).collect::<Vec<_>>();
            let plot = Plot::of(
                "paper 003 Fig. 9",
                format!(
                    "players per server before and after the first balancing round, scenario A (seed {seed})"
                ),
                "server",
                "players",
            )
            .with_categories((1..=ch.cluster.servers).map(|i| format!("S{i}")))
            .with(Series::bars("before", &vals(&h.before_first_round)))
            .with(Series::bars("Classic after", &vals(&c.after_first_round)))
            .with(Series::bars("Hybrid after", &vals(&h.after_first_round)))
            .with_hline("max_S_load", f64::from(ch.cluster.max_s_load))
            .with_hline(
                "95% of max_S_load (near stress)",
                0.95 * f64::from(ch.cluster.max_s_load),
            );
            out.files.push(ctx.out.write_plot("figure9_loads.svg", &plot)?);
            let ns = |r: &ScenarioResult| {
                r.samples
                    .iter()
                    .map(|s| (s.t / 60.0, s.near_stress as f64))
                    .collect::<Vec<_>>()
            };
            let plot = Plot::of(
                "paper 003 §5.1 (ours: the dynamic phase after Fig. 9)",
                "servers near stress (≥ 95% of max_S_load) over time, scenario A",
                "time (min)",
                "servers near stress",
            )
            .with(Series::line("Classic", ns(&c)))
            .with(Series::line("Hybrid", ns(&h)));
            out.files
                .push(ctx.out.write_plot("near_stress_over_time.svg", &plot)?);
            out.tables.push(fig);
        }
    }
    let n = seeds as f64;
    let mut mean = Table::new(
        format!("instances-balance: means over {seeds} seeds"),
        &[
            "method",
            "moved (1st round)",
            "near stress (≥ 95 %) after 1st",
            "≥ 99 % after 1st",
            "mean near stress (dynamic)",
            "moved (whole run)",
        ],
    );
    for (i, name) in ["Hybrid", "Classic"].into_iter().enumerate() {
        mean.push([
            name.to_string(),
            format!("{:.0}", agg[i][0] / n),
            format!("{:.2}", agg[i][1] / n),
            format!("{:.2}", agg[i][4] / n),
            format!("{:.2}", agg[i][2] / n),
            format!("{:.0}", agg[i][3] / n),
        ]);
    }
    out.files.push(ctx.out.write_csv("per_seed.csv", &per_seed)?);
    out.files.push(ctx.out.write_csv("means.csv", &mean)?);
    out.files.push(ctx.out.write_json(
        "report.json",
        &serde_json::json!({
            "config_hybrid": scenario(Method::Hybrid, ctx.seed, ctx.quick),
            "per_seed": all.iter().map(|(s, m)| serde_json::json!({"seed": s, "summary": m})).collect::<Vec<_>>(),
        }),
    )?);
    out.notes.push(format!(
        "Paper Figure 9: both methods remove the overload; Classic leaves more servers near stress (≈5,500); \
         Classic moved 1,337 players, Hybrid 4,100 (= extra + 10 % · max_S_load per overloaded server). \
         Here, mean over {seeds} seeds: first round moved Hybrid {:.0} vs Classic {:.0}; servers near stress \
         (≥ 95 %) after it Hybrid {:.2} vs Classic {:.2}, at the limit (≥ 99 %) Hybrid {:.2} vs Classic {:.2}; \
         during the following dynamic phase (mean servers ≥ 95 %) Hybrid {:.2} vs Classic {:.2}.",
        agg[0][0] / n,
        agg[1][0] / n,
        agg[0][1] / n,
        agg[1][1] / n,
        agg[0][4] / n,
        agg[1][4] / n,
        agg[0][2] / n,
        agg[1][2] / n
    ));
    let cond = format!(
        "scenario A ({}), 10 servers, max_S_load {}; {seeds} seeds from {}",
        if ctx.quick {
            "scaled down ×10"
        } else {
            "the paper's sizes"
        },
        scenario(Method::Hybrid, ctx.seed, ctx.quick).cluster.max_s_load,
        ctx.seed
    );
    out.checks
        .push(Check::new(BALANCED, Estimate::of(&over_h), cond.clone()));
    out.checks
        .push(Check::new(CLASSIC_NEAR, Estimate::of(&near_diff), cond));
    out.tables.push(mean);
    out.tables.push(per_seed);
    Ok(out)
}
