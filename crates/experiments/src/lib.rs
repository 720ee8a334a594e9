//! # worldmesh-experiments
//!
//! Named experiments, run as `worldmesh experiment NAME`. Each one reproduces a figure or
//! table of one of the papers (it says which in [`Experiment::reproduces`]), writes CSV,
//! SVG plots and a JSON report into its output folder, and returns summary tables that the
//! CLI prints.
//!
//! Adding an experiment: write a module with a `fn run(&Context) -> Result<Outcome,
//! ExperimentError>` and add one [`Experiment`] entry to [`registry`].
#![forbid(unsafe_code)]

pub mod adoption;
pub mod assign_vivaldi;
pub mod claim;
pub mod cma;
pub mod cma_speed;
pub mod colyseus;
pub mod core_selection;
pub mod dashboard_wire;
pub mod decoupling;
pub mod failover;
pub mod instances_balance;
pub mod instances_comm;
pub mod instances_p2p;
pub mod instances_qos;
pub mod locator_bandwidth;
pub mod locator_discovery;
pub mod locator_loadbal;
pub mod locator_predtime;
pub mod locator_runs;
pub mod migration;
pub mod persist_cost;
pub mod plan_validate;
pub mod plan_vis;
pub mod player_capacity;
pub mod process_memory;
pub mod sim_speed;
pub mod stats;
pub mod view_missing;
pub mod vivaldi;

use std::path::PathBuf;
use worldmesh_report::{OutputDir, ReportError, Table};

pub use claim::{Better, Check, Claim, Estimate, Expect, Tol, Verdict};

/// Why an experiment failed.
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    /// Writing results failed.
    #[error(transparent)]
    Report(#[from] ReportError),
    /// An input (data file, parameter) was unusable.
    #[error("{0}")]
    Input(String),
    /// The system under test failed.
    #[error("{0}")]
    Run(String),
}

/// What an experiment receives.
#[derive(Clone, Debug)]
pub struct Context {
    /// Where to write CSV, SVG and JSON files.
    pub out: OutputDir,
    /// Seed for every random choice; same seed ⇒ same results.
    pub seed: u64,
    /// Run a reduced version (smaller sizes, fewer repetitions) for smoke tests and quick looks.
    pub quick: bool,
    /// Latency matrix file to use where the experiment needs one (`None`: the shipped
    /// PlanetLab matrix).
    pub latency_file: Option<PathBuf>,
    /// Show progress on standard error.
    pub progress: bool,
    /// Worker threads for independent runs (seeds, sweep points); results do not depend
    /// on it.
    pub threads: usize,
    /// Seeds behind headline figures ([`HEADLINE_SEEDS`]; tests use fewer).
    pub headline_seeds: usize,
    /// Runs behind each wall-clock figure of the timing experiments (`sim-speed`), at
    /// least 1: the fastest counts, since other load on the machine only ever slows a run
    /// down, and the runs' reports must be the same, byte for byte.
    pub timing_runs: usize,
}

impl Context {
    /// A quick-mode context (for tests and quick looks) writing into `dir`, which is
    /// created if missing: seed `seed`, 2 threads, 2 headline seeds, 1 timing run, the
    /// shipped latency matrix, no progress. The folder is the caller's: tests pass a
    /// `tempfile::TempDir`'s path and hold the `TempDir` as long as the context, so that
    /// the folder is removed when the test ends.
    pub fn quick_in(dir: impl Into<PathBuf>, seed: u64) -> Result<Self, ExperimentError> {
        Ok(Self {
            out: OutputDir::create(dir)?,
            seed,
            quick: true,
            latency_file: None,
            progress: false,
            threads: 2,
            headline_seeds: 2,
            timing_runs: 1,
        })
    }

    /// The seeds of headline figures: [`Context::headline_seeds`] consecutive seeds from
    /// the context's.
    pub fn seeds(&self) -> Vec<u64> {
        (0..self.headline_seeds.max(1) as u64)
            .map(|k| self.seed.wrapping_add(k))
            .collect()
    }
}

/// Seeds behind every headline figure (confidence intervals over them).
pub const HEADLINE_SEEDS: usize = 5;

/// Worker threads by default: the machine's cores.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

/// What an experiment returns.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Summary tables, printed by the CLI.
    pub tables: Vec<Table>,
    /// Files written.
    pub files: Vec<PathBuf>,
    /// Free-text notes printed after the tables: conditions, causes, our own metrics.
    pub notes: Vec<String>,
    /// Each declared claim held against our numbers, with its verdict.
    pub checks: Vec<Check>,
}

impl Outcome {
    /// The SVG figures written, in order.
    pub fn figures(&self) -> Vec<PathBuf> {
        self.files
            .iter()
            .filter(|f| f.extension().is_some_and(|e| e == "svg"))
            .cloned()
            .collect()
    }

    /// The checks as a table (claim, paper, ours, verdict).
    pub fn checks_table(&self) -> Table {
        let mut t = Table::new(
            "paper's claims vs ours (95 % intervals over seeds)",
            &["claim", "where", "paper", "ours", "verdict"],
        );
        for c in &self.checks {
            t.push([
                format!(
                    "{} ({})",
                    c.claim.id,
                    c.conditions.split(';').next().unwrap_or("")
                ),
                format!("paper {} {}", c.claim.paper, c.claim.location),
                c.claim.paper_text(),
                c.ours.text(c.claim.unit),
                c.verdict_text(),
            ]);
        }
        t
    }
}

/// A named experiment.
#[derive(Clone, Copy, Debug)]
pub struct Experiment {
    /// Name on the command line.
    pub name: &'static str,
    /// Which paper figure or table it reproduces.
    pub reproduces: &'static str,
    /// One line on what it measures.
    pub summary: &'static str,
    /// The papers' claims it checks (quoted, located, with their metric).
    pub claims: &'static [Claim],
    /// Runs it.
    pub run: fn(&Context) -> Result<Outcome, ExperimentError>,
}

/// Every experiment, in the order `worldmesh experiment --list` shows them.
pub fn registry() -> Vec<Experiment> {
    vec![
        Experiment {
            name: "scaling",
            reproduces: "paper 000 Figure 12a",
            summary: "per-node bandwidth of worldmesh (mean, p95), aggregate, client-server server and broadcast vs players (p2p-rect)",
            claims: colyseus::SCALING_CLAIMS,
            run: colyseus::scaling,
        },
        Experiment {
            name: "proactive",
            reproduces: "paper 000 Table 1",
            summary: "fraction of missiles missing at 0 and 100 ms with and without proactive replication",
            claims: colyseus::PROACTIVE_CLAIMS,
            run: colyseus::proactive,
        },
        Experiment {
            name: "consistency",
            reproduces: "paper 000 Figure 11",
            summary: "missing replicas at 0/100/400 ms grace vs nodes for the oracle, rangedht and dht locators, PlanetLab and PlanetLab scaled to the paper's 85 ms median",
            claims: colyseus::CONSISTENCY_CLAIMS,
            run: colyseus::consistency,
        },
        Experiment {
            name: "decoupling",
            reproduces: "paper 000 §5 Figure 7(a) and 7(b)",
            summary: "delivery latency through rangedht/dht vs direct one-way latency (96-fed-rect); share of updates to already-discovered objects by kind (96-p2p-rect)",
            claims: decoupling::CLAIMS,
            run: decoupling::run,
        },
        Experiment {
            name: "view-missing",
            reproduces: "paper 000 §7 Figure 13(b) and 13(c)",
            summary: "CDF of replicas a node misses per frame at 0/100/400 ms (40-fed-rect) and the distance of missing vs required objects",
            claims: view_missing::CLAIMS,
            run: view_missing::run,
        },
        Experiment {
            name: "node-scaling",
            reproduces: "paper 000 Figure 12c",
            summary: "400 players on a growing number of nodes: per-node bandwidth of worldmesh vs broadcast",
            claims: colyseus::NODE_SCALING_CLAIMS,
            run: colyseus::node_scaling,
        },
        Experiment {
            name: "sim-speed",
            reproduces: "issue 2 benchmark (no paper figure)",
            summary: "simulated time / wall time of the default scenario and a sweep over nodes",
            claims: sim_speed::CLAIMS,
            run: sim_speed::run,
        },
        Experiment {
            name: "dashboard-wire",
            reproduces: "issue 17 measurement (no paper figure)",
            summary: "bytes/s of the live dashboard's WebSocket stream at 512 nodes x 8 players: binary deltas, key frames, compact JSON; observe and encode time per tick",
            claims: dashboard_wire::CLAIMS,
            run: dashboard_wire::run,
        },
        Experiment {
            name: "assign-vivaldi",
            reproduces: "issue 16 item 3 measurement (papers 001 §5 and 002 §3 combined; no paper figure)",
            summary: "players assigned by J-SA from measured vs Vivaldi-estimated delays on PlanetLab: the true mean delay each assignment gives",
            claims: assign_vivaldi::CLAIMS,
            run: assign_vivaldi::run,
        },
        Experiment {
            name: "persist-cost",
            reproduces: "issue 19 benchmark (no paper figure)",
            summary: "what persistence costs a node on the real store: frame-time overhead of checkpointing 2,000 avatars at 20 Hz, durable-write latency p50/p99, recovery time per 10,000 objects",
            claims: persist_cost::CLAIMS,
            run: persist_cost::run,
        },
        Experiment {
            name: "player-capacity",
            reproduces: "issue 16 item 6 benchmark (no paper figure)",
            summary: "players one node sustains at 20 Hz on one core: node frame time p50/p99/max vs connected clients (250..4000), bytes and views per client, clients behind",
            claims: player_capacity::CLAIMS,
            run: player_capacity::run,
        },
        Experiment {
            name: "vivaldi",
            reproduces: "paper 001 §6.3.1, Fig. 6 (error CDF and scatter) and Table 3",
            summary: "Vivaldi and landmark latency-estimate accuracy on PlanetLab: error CDFs, probe rates, neighbours, drift",
            claims: vivaldi::CLAIMS,
            run: vivaldi::run,
        },
        Experiment {
            name: "core-selection",
            reproduces: "paper 001 §6.2 Fig. 5a and 5b, §6.3.2 Fig. 7a/7b and Fig. 8",
            summary: "group diameter vs proxies on a Waxman topology; core choice with estimated latencies (hit ratio, core-node error)",
            claims: core_selection::CLAIMS,
            run: core_selection::run,
        },
        Experiment {
            name: "migration",
            reproduces: "paper 001 §3.2, §7.4 and Table 2",
            summary: "players' mean/max RTT to their region's host before/after placement, time to migrate, bytes moved, name-service invocation cost",
            claims: migration::CLAIMS,
            run: migration::run,
        },
        Experiment {
            name: "instances-balance",
            reproduces: "paper 003 Figure 9",
            summary: "per-server load before/after one balancing round, Classic vs Hybrid, players moved (scenario A)",
            claims: instances_balance::CLAIMS,
            run: instances_balance::run,
        },
        Experiment {
            name: "instances-comm",
            reproduces: "paper 003 Figure 10 (Table 1)",
            summary: "communication cost of balancing vs extra_S_players, Classic (Interaction 10 %, F 20/25) vs Hybrid",
            claims: instances_comm::CLAIMS,
            run: instances_comm::run,
        },
        Experiment {
            name: "instances-p2p",
            reproduces: "paper 003 Figures 11 and 12 (Table 2)",
            summary: "scenario B: overflow to the P2P area per server, total players vs capacity, cost vs Return RATE",
            claims: instances_p2p::CLAIMS,
            run: instances_p2p::run,
        },
        Experiment {
            name: "instances-qos",
            reproduces: "paper 003 Tables 4 and 5, Fig. 8 and Fig. 13, Algorithms 3/4",
            summary: "LL latency vs client-server, PD failure probability (and the hazard finding), failover takeover time under 5 % loss",
            claims: instances_qos::CLAIMS,
            run: instances_qos::run,
        },
        Experiment {
            name: "adoption",
            reproduces: "issue 13 acceptance (no paper figure: paper 000 §8 leaves node failure open)",
            summary: "10% of nodes crash: objects re-homed, lost, duplicated; crash-to-adoption p50/p99; versions lost; false suspicions vs loss 0-20%",
            claims: adoption::CLAIMS,
            run: adoption::run,
        },
        Experiment {
            name: "failover",
            reproduces: "issue 7 item 5 (paper 003 Algorithms 3/4 on real nodes)",
            summary: "takeover time after a host crash or partition under 5 % loss, real nodes in the simulator: median/p99, within 2T, servers after, confirmed inputs lost",
            claims: failover::CLAIMS,
            run: failover::run,
        },
        Experiment {
            name: "cma-join",
            reproduces: "paper 002 Fig. 4, 5",
            summary: "average/max delay vs joins and delay CDF, J-greedy vs optimal J-SA under mirror capacity",
            claims: cma::JOIN_CLAIMS,
            run: cma::run_join,
        },
        Experiment {
            name: "cma-leave",
            reproduces: "paper 002 Fig. 6",
            summary: "average/max delay vs FIFO leaves: L-ignore, L-greedy, L-SA vs brute-force optimum",
            claims: cma::LEAVE_CLAIMS,
            run: cma::run_leave,
        },
        Experiment {
            name: "cma-dynamic",
            reproduces: "paper 002 Fig. 7",
            summary: "random joins and leaves: J-SA/L-SA vs J-greedy/L-greedy vs J-greedy/L-ignore",
            claims: cma::DYNAMIC_CLAIMS,
            run: cma::run_dynamic,
        },
        Experiment {
            name: "cma-speed",
            reproduces: "paper 002 Fig. 8 (extended)",
            summary: "running times up to 100 mirrors and 100k players; per-event J-SA/L-SA vs full min-cost-flow re-solve",
            claims: cma_speed::CLAIMS,
            run: cma_speed::run_speed,
        },
        Experiment {
            name: "plan-vis",
            reproduces: "paper 004 §5.1–§5.2 (17,005-cell visibility map, Rel(N))",
            summary: "visibility-map build time on 1 and 2 threads for the paper's 95×179 grid; Rel(N) vs relationships counted in random placements",
            claims: plan_vis::CLAIMS,
            run: plan_vis::run,
        },
        Experiment {
            name: "plan-validate",
            reproduces: "paper 004 §2.2, §4–§5 (predictions held against load tests)",
            summary: "model workload in the simulator at N = 16..128: relationships, updates/s, client-server and worldmesh bandwidth, predicted (run and model densities) vs measured",
            claims: plan_validate::CLAIMS,
            run: plan_validate::run,
        },
        Experiment {
            name: "locator-bandwidth",
            reproduces: "paper 000 §6.3 Figure 9",
            summary: "per-node locator bandwidth (routing, match delivery, maintenance) vs nodes, dht/rangedht on rect/sqr maps",
            claims: locator_bandwidth::CLAIMS,
            run: locator_bandwidth::run,
        },
        Experiment {
            name: "discovery",
            reproduces: "paper 000 §6.3 Figure 10",
            summary: "median discovery latency split into routing to the first rendezvous and matching; hops with and without route caching",
            claims: locator_discovery::CLAIMS,
            run: locator_discovery::run,
        },
        Experiment {
            name: "loadbal",
            reproduces: "paper 000 §6.3 Table 2",
            summary: "max/mean per-node matching load and bandwidth: dht vs rangedht vs rangedht with leave-rejoin load balancing",
            claims: locator_loadbal::CLAIMS,
            run: locator_loadbal::run,
        },
        Experiment {
            name: "predtime",
            reproduces: "paper 000 §6.2 Figure 8a",
            summary: "per-node bandwidth (total and locator) and missing replicas vs PredTime, fed-rect with the rangedht and dht locators",
            claims: locator_predtime::CLAIMS,
            run: locator_predtime::run,
        },
    ]
}

/// The experiment called `name`, if any.
pub fn find(name: &str) -> Option<Experiment> {
    registry().into_iter().find(|e| e.name == name)
}

/// Path of the PlanetLab matrix shipped with the source tree.
pub fn shipped_planetlab_path() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../data/latency/planetlab-490.txt"
    ))
}

/// For the crate's unit tests.
#[cfg(test)]
pub(crate) mod test_support {
    use super::Context;
    use tempfile::TempDir;

    /// A quick context (see [`Context::quick_in`]) in a fresh folder `wm-exp-<name>-…`
    /// under the system's temporary directory. The folder is removed when the returned
    /// `TempDir` is dropped: hold it beside the context for the whole test (it goes also
    /// when the test panics).
    pub(crate) fn quick_temp(name: &str, seed: u64) -> (TempDir, Context) {
        let dir = tempfile::Builder::new()
            .prefix(&format!("wm-exp-{name}-"))
            .tempdir()
            .unwrap();
        let ctx = Context::quick_in(dir.path(), seed).unwrap();
        (dir, ctx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tempfile::TempDir;

    fn quick_ctx(name: &str) -> (TempDir, Context) {
        test_support::quick_temp(name, 1)
    }

    #[test]
    fn sim_speed_quick_writes_its_files() {
        let (_dir, ctx) = quick_ctx("sim-speed");
        let out = (find("sim-speed").unwrap().run)(&ctx).unwrap();
        assert_eq!(out.tables[0].rows.len(), 3);
        let csv = std::fs::read_to_string(ctx.out.path("sim_speed.csv")).unwrap();
        assert!(csv.starts_with("nodes,players,simulated s,wall s,simulated s per wall s"));
        // 4 nodes x 8 players for 5 s exchange datagrams; every delivered one is an event,
        // and so is every frame.
        let row = &out.tables[0].rows[0];
        let datagrams = row[5].parse::<u64>().unwrap();
        assert!(datagrams > 0);
        assert!(row[7].parse::<u64>().unwrap() > datagrams / 2);
        for f in ["sim_speed.svg", "sim_throughput.svg", "sim_memory.svg"] {
            assert!(ctx.out.path(f).exists(), "{f}");
        }
        // The parallel sweep: dht and the delayed oracle at each size, both in rounds, each
        // with the one-thread report.
        let par = &out.tables[1];
        let col = |name: &str| par.headers.iter().position(|c| c == name).unwrap();
        assert_eq!(par.rows.len(), 4);
        for row in &par.rows {
            assert_eq!(row[col("same report")], "yes", "{row:?}");
            assert!(row[col("rounds")].parse::<u64>().unwrap() > 0, "{row:?}");
        }
        assert!(par.rows.iter().any(|r| r[0].starts_with("oracle")));
        // The 400-player worlds (scaled down): p2p-rect with 1 player per node, fed-rect
        // with 8, each running and exchanging datagrams.
        let players = &out.tables[2];
        let shape: Vec<(&str, &str)> = players
            .rows
            .iter()
            .map(|r| (r[0].as_str(), r[2].as_str()))
            .collect();
        assert_eq!(shape, [("p2p-rect", "1"), ("fed-rect", "8")]);
        for row in &players.rows {
            assert!(row[6].parse::<f64>().unwrap() > 0.0, "{row:?}");
        }
        assert!(ctx.out.path("sim_speed_400.csv").exists());
    }

    #[test]
    fn assign_vivaldi_quick_compares_both_assignments_by_true_delay() {
        let (_dir, ctx) = quick_ctx("assign-vivaldi");
        let out = (find("assign-vivaldi").unwrap().run)(&ctx).unwrap();
        let r = std::fs::read_to_string(ctx.out.path("assign-vivaldi.json")).unwrap();
        let r: serde_json::Value = serde_json::from_str(&r).unwrap();
        for row in r["rows"].as_array().unwrap() {
            // Both assignments are judged by the true delays, and J-SA is optimal for the
            // true ones: estimates can only do as well or worse.
            let (m, v) = (
                row["measured_ms"].as_f64().unwrap(),
                row["vivaldi_ms"].as_f64().unwrap(),
            );
            assert!(m > 0.0 && v >= m - 1e-9, "{row}");
        }
        assert!(!out.tables[0].rows.is_empty());
    }

    #[test]
    fn persist_cost_quick_measures_all_three_parts() {
        let (_dir, ctx) = quick_ctx("persist-cost");
        let out = (find("persist-cost").unwrap().run)(&ctx).unwrap();
        let r = std::fs::read_to_string(ctx.out.path("persist_cost.json")).unwrap();
        let r: serde_json::Value = serde_json::from_str(&r).unwrap();
        // 500 avatars plus the items, every frame timed both ways.
        assert!(r["objects"].as_u64().unwrap() > 500, "{r}");
        assert_eq!(r["frames"], 100);
        assert!(r["durable_writes"].as_u64().unwrap() >= 10, "{r}");
        // Every record written was recovered (the run fails otherwise).
        assert!(r["recovery_records"].as_u64().unwrap() >= 2_000, "{r}");
        assert_eq!(out.checks.len(), 1);
    }

    #[test]
    fn player_capacity_quick_writes_its_files() {
        let (_dir, ctx) = quick_ctx("player-capacity");
        let out = (find("player-capacity").unwrap().run)(&ctx).unwrap();
        // Two sweep points (50 and 200 players), every player connected and seeing views.
        assert_eq!(out.tables[0].rows.len(), 2);
        let r = std::fs::read_to_string(ctx.out.path("player_capacity.json")).unwrap();
        let r: serde_json::Value = serde_json::from_str(&r).unwrap();
        for p in r["points"].as_array().unwrap() {
            assert_eq!(p["connected"], p["players"]);
            assert!(p["views_per_client_s"].as_f64().unwrap() > 0.0);
            assert!(p["inputs_applied"].as_u64().unwrap() > 0);
        }
        for f in [
            "player_capacity.csv",
            "player_capacity_phases.csv",
            "player_capacity.svg",
        ] {
            assert!(ctx.out.path(f).exists(), "{f}");
        }
    }

    #[test]
    fn plan_vis_quick_writes_its_files() {
        let (_dir, ctx) = quick_ctx("plan-vis");
        let out = (find("plan-vis").unwrap().run)(&ctx).unwrap();
        // Four builds: AoI-limited and unlimited, each on 1 and 2 threads.
        assert_eq!(out.tables[0].rows.len(), 4);
        assert_eq!(out.tables[0].rows[0][3], out.tables[0].rows[1][3]);
        assert_eq!(out.tables[0].rows[2][3], out.tables[0].rows[3][3]);
        let r = std::fs::read_to_string(ctx.out.path("report.json")).unwrap();
        let r: serde_json::Value = serde_json::from_str(&r).unwrap();
        assert_eq!(r["deterministic_across_threads"], true);
        assert_eq!(r["grid"][0], 30);
        // Unlimited range sees at least as many pairs as the AoI-limited map.
        let pairs = |k: usize| r["builds"][k]["visible_pairs"].as_u64().unwrap();
        assert!(pairs(3) >= pairs(1));
        for f in [
            "visibility_build.csv",
            "rel_check.csv",
            "density.svg",
            "visibility.svg",
        ] {
            assert!(ctx.out.path(f).exists(), "{f}");
        }
    }

    #[test]
    fn every_experiment_declares_its_claims_and_metrics() {
        let mut ids = std::collections::BTreeSet::new();
        for e in registry() {
            assert!(!e.claims.is_empty(), "{} declares no claim", e.name);
            for c in e.claims {
                assert!(ids.insert(c.id), "claim id {} used twice", c.id);
                assert!(c.quote.len() > 20, "{}: quote the sentence", c.id);
                assert!(c.metric.len() > 20, "{}: define the metric", c.id);
                assert!(
                    !c.location.is_empty() && !c.paper.is_empty(),
                    "{}: say where",
                    c.id
                );
                assert!(!c.unit.is_empty(), "{}: give the unit", c.id);
                if ["000", "001", "002", "003", "004"].contains(&c.paper) {
                    // A paper's claim quotes the paper: its first words appear in the text.
                    let text =
                        std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/seeds"))
                            .ok()
                            .and_then(|mut d| {
                                d.find_map(|f| {
                                    f.ok()
                                        .filter(|f| f.file_name().to_string_lossy().starts_with(c.paper))
                                })
                            })
                            .and_then(|f| std::fs::read_to_string(f.path()).ok());
                    if let Some(text) = text {
                        // Verbatim but for [bracketed] editorial insertions where the plain
                        // text lost a symbol: every other piece appears, in order.
                        let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
                        let text = squash(&text);
                        let mut at = 0;
                        let mut rest = c.quote;
                        while !rest.is_empty() {
                            let (piece, next) = match rest.find('[') {
                                Some(i)
                                    if !text[at..].contains(&squash(
                                        &rest[..rest.find(']').map_or(rest.len(), |j| j + 1)],
                                    )) =>
                                {
                                    let j = rest[i..].find(']').map_or(rest.len(), |j| i + j + 1);
                                    (&rest[..i], &rest[j..])
                                }
                                _ => (rest, ""),
                            };
                            let piece = squash(piece);
                            if !piece.is_empty() {
                                let found = text[at..].find(&piece);
                                assert!(found.is_some(), "{}: not in paper {}: {piece:?}", c.id, c.paper);
                                at += found.unwrap_or(0) + piece.len();
                            }
                            rest = next;
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn checks_of_a_quick_run_use_declared_claims() {
        let (_dir, ctx) = quick_ctx("instances-comm");
        let e = find("instances-comm").unwrap();
        let out = (e.run)(&ctx).unwrap();
        assert!(!out.checks.is_empty());
        for c in &out.checks {
            assert!(
                e.claims.iter().any(|d| d.id == c.claim.id),
                "{} not declared",
                c.claim.id
            );
            assert_eq!(
                c.verdict,
                claim::judge(c.claim.expect, &c.ours),
                "verdict is computed"
            );
        }
    }

    #[test]
    fn names_are_unique() {
        let mut names: Vec<_> = registry().iter().map(|e| e.name).collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n);
    }
}
