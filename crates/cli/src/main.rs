//! `worldmesh`: simulate a multi-server game world, run a real local cluster, run one node,
//! and reproduce the papers' experiments. See README.md for a tour and ARCHITECTURE.md for
//! where each behaviour lives.
#![forbid(unsafe_code)]

use clap::{Parser, Subcommand};

mod cmd_assign;
mod cmd_experiment;

/// worldmesh: one large multiplayer game world across many servers.
#[derive(Parser, Debug)]
#[command(name = "worldmesh", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a named experiment that reproduces a paper's figure or table.
    Experiment(cmd_experiment::ExperimentArgs),
    /// Assign players to capacity-limited mirrors from a stream of join/leave events
    /// (optimal J-SA/L-SA or the greedy variants; paper 002).
    Assign(cmd_assign::AssignArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Experiment(args) => cmd_experiment::run(args),
        Command::Assign(args) => cmd_assign::run(args),
    }
}
