//! `worldmesh experiment NAME`: run one named experiment (or `--list` them).

use anyhow::{Context as _, bail};
use std::path::PathBuf;
use worldmesh_experiments::{Context, registry};
use worldmesh_report::{OutputDir, Table};

/// Arguments of `worldmesh experiment`.
#[derive(clap::Args, Debug)]
pub struct ExperimentArgs {
    /// Experiment to run (see --list). `all` runs every experiment.
    #[arg(required_unless_present = "list")]
    name: Option<String>,
    /// List the experiments and the figure each reproduces.
    #[arg(long)]
    list: bool,
    /// Output folder; files go to DIR/NAME/.
    #[arg(long, default_value = "out/experiments")]
    out: PathBuf,
    /// Seed for every random choice (same seed ⇒ same results).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Reduced sizes for a quick look (seconds instead of minutes).
    #[arg(long)]
    quick: bool,
    /// Latency matrix file (whitespace or CSV) for experiments that use one; default: the
    /// shipped PlanetLab matrix.
    #[arg(long)]
    latency: Option<PathBuf>,
}

/// Runs the command.
pub fn run(args: ExperimentArgs) -> anyhow::Result<()> {
    let all = registry();
    if args.list {
        let mut t = Table::new("experiments", &["name", "reproduces", "what it measures"]);
        for e in &all {
            t.push([e.name, e.reproduces, e.summary]);
        }
        print!("{t}");
        return Ok(());
    }
    let name = args.name.unwrap_or_default();
    let selected: Vec<_> = if name == "all" {
        all
    } else {
        match all.iter().find(|e| e.name == name) {
            Some(e) => vec![*e],
            None => {
                let names: Vec<_> = all.iter().map(|e| e.name).collect();
                bail!("unknown experiment `{name}`; known: {}", names.join(", "))
            }
        }
    };
    for e in selected {
        let out = OutputDir::create(args.out.join(e.name))?;
        let ctx = Context {
            out: out.clone(),
            seed: args.seed,
            quick: args.quick,
            latency_file: args.latency.clone(),
            progress: true,
        };
        eprintln!("== {} ({})", e.name, e.reproduces);
        let started = std::time::Instant::now();
        let outcome = (e.run)(&ctx).with_context(|| format!("experiment {} failed", e.name))?;
        for t in &outcome.tables {
            println!("{t}");
        }
        for n in &outcome.notes {
            println!("{n}");
        }
        println!(
            "{} finished in {:.1} s; files in {}",
            e.name,
            started.elapsed().as_secs_f64(),
            out.root().display()
        );
    }
    Ok(())
}
