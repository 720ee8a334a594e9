//! `worldmesh`: simulate a multi-server game world, run a real local cluster, run one node,
//! and reproduce the papers' experiments. See README.md for a tour and ARCHITECTURE.md for
//! where each behaviour lives.
#![forbid(unsafe_code)]

use clap::{Parser, Subcommand};

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
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Experiment(args) => cmd_experiment::run(args),
    }
}
