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

pub mod cma;
pub mod cma_speed;

use std::path::PathBuf;
use worldmesh_report::{OutputDir, ReportError, Table};

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
}

/// What an experiment returns.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Summary tables, printed by the CLI.
    pub tables: Vec<Table>,
    /// Files written.
    pub files: Vec<PathBuf>,
    /// Free-text notes printed after the tables (e.g. how a figure compares with the paper).
    pub notes: Vec<String>,
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
    /// Runs it.
    pub run: fn(&Context) -> Result<Outcome, ExperimentError>,
}

/// Every experiment, in the order `worldmesh experiment --list` shows them.
pub fn registry() -> Vec<Experiment> {
    vec![
        Experiment {
            name: "cma-join",
            reproduces: "paper 002 Fig. 4, 5",
            summary: "average/max delay vs joins and delay CDF, J-greedy vs optimal J-SA under mirror capacity",
            run: cma::run_join,
        },
        Experiment {
            name: "cma-leave",
            reproduces: "paper 002 Fig. 6",
            summary: "average/max delay vs FIFO leaves: L-ignore, L-greedy, L-SA vs brute-force optimum",
            run: cma::run_leave,
        },
        Experiment {
            name: "cma-dynamic",
            reproduces: "paper 002 Fig. 7",
            summary: "random joins and leaves: J-SA/L-SA vs J-greedy/L-greedy vs J-greedy/L-ignore",
            run: cma::run_dynamic,
        },
        Experiment {
            name: "cma-speed",
            reproduces: "paper 002 Fig. 8 (extended)",
            summary: "running times up to 100 mirrors and 100k players; per-event J-SA/L-SA vs full min-cost-flow re-solve",
            run: cma_speed::run_speed,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique() {
        let mut names: Vec<_> = registry().iter().map(|e| e.name).collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n);
    }
}
