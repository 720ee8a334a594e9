//! `worldmesh`: simulate a multi-server game world, run a real local cluster, run one node,
//! and reproduce the papers' experiments. See README.md for a tour and ARCHITECTURE.md for
//! where each behaviour lives.
#![forbid(unsafe_code)]

use clap::{Parser, Subcommand};

mod cmd_assign;
mod cmd_bots;
mod cmd_ca;
mod cmd_cluster;
mod cmd_dashboard;
mod cmd_experiment;
mod cmd_node;
mod cmd_plan;
mod cmd_play;
mod cmd_simulate;
mod cmd_store;
mod cmd_swarm;
mod cmd_token;
mod duration;
mod live;
mod logging;
mod progress;
mod summary;

/// The allocator of the whole binary (simulator, experiments, nodes): see the workspace
/// `Cargo.toml` for the measurement behind it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// worldmesh: one large multiplayer game world across many servers.
#[derive(Parser, Debug)]
#[command(name = "worldmesh", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the default scenario in the deterministic simulator and print a summary.
    Simulate(cmd_simulate::SimulateArgs),
    /// Spawn real node processes on loopback, run them, print the same summary.
    Cluster(cmd_cluster::ClusterArgs),
    /// Run one real node: QUIC with mutual TLS, membership through seeds, graceful drain
    /// on SIGTERM or SIGINT, stop without a drain on SIGQUIT, persistence with --data-dir
    /// (settings from flags or --config FILE).
    Node(cmd_node::NodeArgs),
    /// Run a named experiment that reproduces a paper's figure or table.
    Experiment(cmd_experiment::ExperimentArgs),
    /// Assign players to capacity-limited mirrors from a stream of join/leave events
    /// (optimal J-SA/L-SA or the greedy variants; paper 002).
    Assign(cmd_assign::AssignArgs),
    /// Serve the live dashboard (world map, node table, charts) of a simulation it runs
    /// itself, paced at real time, or of a running real cluster (`--cluster`); prints the
    /// URL to open.
    Dashboard(cmd_dashboard::DashboardArgs),
    /// Plan capacity before launch: predict relationships, updates, bandwidth and CPU for a
    /// map and player counts (density and visibility maps, Rel(N), Pack(b); paper 004).
    Plan(cmd_plan::PlanArgs),
    /// The cluster certificate authority: `ca init` makes it, `ca issue --node ID` signs
    /// a node's certificate (nodes accept only peers certified by it).
    Ca(cmd_ca::CaArgs),
    /// Connect tokens for players: `token init` writes the key nodes check tokens with,
    /// `token issue` signs one for a player.
    Token(cmd_token::TokenArgs),
    /// Headless players: N clients connect to a node's player port with connect tokens,
    /// play the model game, and report input-to-visible latency and bytes.
    Bots(cmd_bots::BotsArgs),
    /// One native client: connect to a node's player port with a connect token, walk, and
    /// print what the player sees.
    Play(cmd_play::PlayArgs),
    /// The seeded fault swarm: whole simulated worlds under crashes, restarts, joins,
    /// drains and partitions, invariants checked after every event.
    Swarm(cmd_swarm::SwarmArgs),
    /// A node's embedded store: `store inspect DIR` (verify; counts, sizes, last
    /// checkpoint and generation), `store export DIR` (JSON lines), `store import DIR FILE`,
    /// `store merge DEST SRC...` (fold retired nodes' stores into one).
    Store(cmd_store::StoreArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Simulate(args) => cmd_simulate::run(args),
        Command::Cluster(args) => cmd_cluster::run(args),
        Command::Node(args) => cmd_node::run(args),
        Command::Experiment(args) => cmd_experiment::run(args),
        Command::Assign(args) => cmd_assign::run(args),
        Command::Plan(args) => cmd_plan::run(args),
        Command::Ca(args) => cmd_ca::run(args),
        Command::Token(args) => cmd_token::run(args),
        Command::Bots(args) => cmd_bots::run(args),
        Command::Swarm(args) => cmd_swarm::run(args),
        Command::Play(args) => cmd_play::run(args),
        Command::Dashboard(args) => cmd_dashboard::run(args),
        Command::Store(args) => cmd_store::run(args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `scripts/pgo-build.sh` trains the profile-guided build by running this binary; a
    /// flag renamed or a value dropped here would break its training only when someone
    /// next runs it (twelve minutes in). Every `train` line must parse as the CLI's own
    /// command line, with the script's shared arguments filled in.
    #[test]
    fn pgo_training_commands_parse() {
        let script = include_str!("../../../scripts/pgo-build.sh");
        let shared = script
            .lines()
            .find_map(|l| l.strip_prefix("S=("))
            .and_then(|l| l.strip_suffix(')'))
            .expect("the script sets its shared arguments S=(...)");
        let mut commands = 0;
        for line in script.lines() {
            let Some(args) = line.strip_prefix("train ") else {
                continue;
            };
            let args = args.replace("\"${S[@]}\"", shared);
            let argv = std::iter::once("worldmesh").chain(args.split_whitespace());
            if let Err(e) = Cli::try_parse_from(argv) {
                panic!("scripts/pgo-build.sh trains with `worldmesh {args}`, which does not parse:\n{e}");
            }
            commands += 1;
        }
        assert!(
            commands >= 8,
            "found {commands} training commands in scripts/pgo-build.sh"
        );
    }

    /// `scripts/speed-vs-baseline.sh` runs this binary's `simulate` with each `measure`
    /// line's arguments, `--quiet` and `--threads`, after a baseline build of several
    /// minutes: each must parse, with the node count filled in.
    #[test]
    fn speed_comparison_commands_parse() {
        let script = include_str!("../../../scripts/speed-vs-baseline.sh");
        let mut worlds = 0;
        for line in script.lines() {
            let Some(rest) = line.trim_start().strip_prefix("measure ") else {
                continue;
            };
            // measure NAME THREADS ARGS...
            let args: Vec<String> = rest
                .split_whitespace()
                .skip(2)
                .map(|a| a.replace("\"$n\"", "16"))
                .collect();
            let argv = ["worldmesh", "simulate"]
                .into_iter()
                .chain(args.iter().map(String::as_str))
                .chain(["--quiet", "--threads", "2"]);
            if let Err(e) = Cli::try_parse_from(argv) {
                panic!(
                    "scripts/speed-vs-baseline.sh runs `worldmesh simulate {}`, which does not parse:\n{e}",
                    args.join(" ")
                );
            }
            worlds += 1;
        }
        assert!(
            worlds >= 2,
            "found {worlds} measured worlds in scripts/speed-vs-baseline.sh"
        );
    }

    /// Runs `scripts/NAME` with `args` under bash: (exit code, stdout, stderr).
    fn run_script(name: &str, args: &[&str]) -> (Option<i32>, String, String) {
        let script = format!("{}/../../scripts/{name}", env!("CARGO_MANIFEST_DIR"));
        let out = std::process::Command::new("bash")
            .arg(script)
            .args(args)
            .output()
            .expect("bash runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// A script's bad flags each exit 2 with what was wrong, before anything is built or
    /// run, and `--help` prints the header (naming `usage_says`) and none of the code.
    fn assert_script_checks_flags(name: &str, bad: &[(&[&str], &str)], usage_says: &str) {
        for (args, says) in bad {
            let (code, _, err) = run_script(name, args);
            assert_eq!(code, Some(2), "{name} {args:?}: {err}");
            assert!(err.contains(says), "{name} {args:?} said: {err}");
        }
        let (code, help, _) = run_script(name, &["--help"]);
        assert_eq!(code, Some(0));
        assert!(help.contains(usage_says), "{help}");
        assert!(!help.contains("set -euo"), "--help printed code: {help}");
    }

    #[test]
    fn speed_comparison_script_refuses_bad_flags() {
        assert_script_checks_flags(
            "speed-vs-baseline.sh",
            &[
                (&["--bogus"], "unknown argument '--bogus'"),
                (&["--pairs", "0"], "--pairs takes 1 to 99, not '0'"),
                (&["--pairs", "2x"], "--pairs takes 1 to 99, not '2x'"),
            ],
            "--pairs K",
        );
    }

    #[test]
    fn sim_costs_script_refuses_bad_flags() {
        assert_script_checks_flags(
            "sim-costs.sh",
            &[
                (&["--bogus"], "unknown argument '--bogus'"),
                (&["--last-level", "1M"], "--last-level takes BYTES,WAYS"),
                (&["--last-level", "1048576"], "--last-level takes BYTES,WAYS"),
                (
                    &["--binary", "/nonexistent/worldmesh"],
                    "is not an executable file",
                ),
            ],
            "--last-level BYTES,WAYS",
        );
    }

    /// `scripts/sim-costs.sh` runs this binary's `simulate` with its default arguments and
    /// `--quiet` under valgrind, a minute or more: they must parse.
    #[test]
    fn sim_costs_defaults_parse() {
        let script = include_str!("../../../scripts/sim-costs.sh");
        let defaults = script
            .lines()
            .find_map(|l| l.strip_prefix("DEFAULT_ARGS=(")?.strip_suffix(')'))
            .expect("the script sets DEFAULT_ARGS=(...)");
        let argv = ["worldmesh", "simulate"]
            .into_iter()
            .chain(defaults.split_whitespace())
            .chain(["--quiet"]);
        if let Err(e) = Cli::try_parse_from(argv) {
            panic!(
                "scripts/sim-costs.sh runs `worldmesh simulate {defaults} --quiet`, which does not parse:\n{e}"
            );
        }
    }
}
