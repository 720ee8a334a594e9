//! `worldmesh experiment NAME`: run one named experiment, or `all` (or `--list` them);
//! with `--report`, gather everything into one self-contained HTML page and markdown.

use anyhow::bail;
use std::path::{Path, PathBuf};
use std::time::Instant;
use worldmesh_experiments::{Context, Experiment, HEADLINE_SEEDS, Outcome, default_threads, registry};
use worldmesh_report::document::Block;
use worldmesh_report::{Document, OutputDir, Section, Table};

/// Arguments of `worldmesh experiment`.
#[derive(clap::Args, Debug)]
pub struct ExperimentArgs {
    /// Experiment to run (see --list). `all` runs every experiment.
    #[arg(required_unless_present = "list")]
    name: Option<String>,
    /// List the experiments, the figure each reproduces and the claims it checks.
    #[arg(long)]
    list: bool,
    /// Output folder; files go to DIR/NAME/ (and the report to DIR/report.html, .md).
    #[arg(long, default_value = "out/experiments")]
    out: PathBuf,
    /// Seed for every random choice (same seed ⇒ same results); headline figures use this
    /// and the next four seeds.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Reduced sizes for a quick look (seconds instead of minutes).
    #[arg(long)]
    quick: bool,
    /// Latency matrix file (whitespace or CSV) for experiments that use one; default: the
    /// shipped PlanetLab matrix.
    #[arg(long)]
    latency: Option<PathBuf>,
    /// Worker threads for independent runs (seeds, sweep points); results do not depend on
    /// it. Default: the machine's cores.
    #[arg(long)]
    threads: Option<usize>,
    /// Runs behind each wall-clock figure of the timing experiments (`sim-speed`): the
    /// fastest counts (other load on the machine only slows a run down), and the runs'
    /// reports must be identical.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=20))]
    timing_runs: u16,
    /// Also write one report of the run: DIR/report.html (self-contained, figures inline)
    /// and DIR/report.md (figures linked as PNG).
    #[arg(long)]
    report: bool,
}

/// One experiment's result in a run.
struct Ran {
    exp: Experiment,
    outcome: Result<Outcome, String>,
    seconds: f64,
    dir: PathBuf,
}

/// Runs the command.
pub fn run(args: ExperimentArgs) -> anyhow::Result<()> {
    let all = registry();
    if args.list {
        let mut t = Table::new(
            "experiments",
            &["name", "reproduces", "claims checked", "what it measures"],
        );
        for e in &all {
            let ids: Vec<&str> = e.claims.iter().map(|c| c.id).collect();
            t.push([
                e.name.to_string(),
                e.reproduces.to_string(),
                ids.join(", "),
                e.summary.to_string(),
            ]);
        }
        print!("{t}");
        return Ok(());
    }
    let name = args.name.clone().unwrap_or_default();
    let selected: Vec<Experiment> = if name == "all" {
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
    let threads = args.threads.unwrap_or_else(default_threads).max(1);
    let started_all = Instant::now();
    let mut ran = Vec::new();
    for e in selected {
        let out = OutputDir::create(args.out.join(e.name))?;
        let ctx = Context {
            out: out.clone(),
            seed: args.seed,
            quick: args.quick,
            latency_file: args.latency.clone(),
            progress: true,
            threads,
            headline_seeds: HEADLINE_SEEDS,
            timing_runs: usize::from(args.timing_runs),
        };
        eprintln!("== {} ({})", e.name, e.reproduces);
        let started = Instant::now();
        let outcome = (e.run)(&ctx).map_err(|err| format!("experiment {} failed: {err}", e.name));
        let seconds = started.elapsed().as_secs_f64();
        match &outcome {
            Ok(o) => {
                for t in &o.tables {
                    println!("{t}");
                }
                if !o.checks.is_empty() {
                    println!("{}", o.checks_table());
                }
                for c in &o.checks {
                    if let Some(why) = &c.explanation {
                        println!("{}: {why}", c.claim.id);
                    }
                }
                for n in &o.notes {
                    println!("{n}");
                }
                println!(
                    "{} finished in {seconds:.1} s; files in {}",
                    e.name,
                    out.root().display()
                );
            }
            Err(msg) => eprintln!("{msg}"),
        }
        ran.push(Ran {
            exp: e,
            outcome,
            seconds,
            dir: out.root().to_path_buf(),
        });
    }
    let total = started_all.elapsed().as_secs_f64();
    if args.report {
        let doc = document(&ran, &args, threads, total);
        let html = args.out.join("report.html");
        let md = args.out.join("report.md");
        std::fs::write(&html, doc.to_html()?)?;
        std::fs::write(&md, doc.to_markdown(&args.out))?;
        eprintln!("report: {} and {}", html.display(), md.display());
    }
    let failed: Vec<&str> = ran
        .iter()
        .filter(|r| r.outcome.is_err())
        .map(|r| r.exp.name)
        .collect();
    if !failed.is_empty() {
        bail!("{} experiment(s) failed: {}", failed.len(), failed.join(", "));
    }
    if ran.len() > 1 {
        eprintln!("all {} experiments finished in {total:.0} s", ran.len());
    }
    Ok(())
}

fn command(args: &ExperimentArgs, name: &str) -> String {
    let mut c = format!("worldmesh experiment {name}");
    if args.quick {
        c.push_str(" --quick");
    }
    if args.seed != 1 {
        c.push_str(&format!(" --seed {}", args.seed));
    }
    if let Some(l) = &args.latency {
        c.push_str(&format!(" --latency {}", l.display()));
    }
    c
}

fn rel(p: &Path, base: &Path) -> String {
    p.strip_prefix(base).unwrap_or(p).display().to_string()
}

/// The run as one document: a table of every claim's verdict first, then one section per
/// experiment with the paper's sentences, the numbers side by side, conditions, figures,
/// tables and the command that reproduces it.
fn document(ran: &[Ran], args: &ExperimentArgs, threads: usize, total: f64) -> Document {
    let mut doc = Document::new(format!(
        "worldmesh: the papers' claims, reproduced{}",
        if args.quick {
            " (quick mode: reduced sizes)"
        } else {
            ""
        }
    ));
    doc.intro.push(Block::Paragraph(format!(
        "{} experiments, seed {} (headline figures over five seeds from it, 95 % confidence intervals of the mean, Student t), {threads} worker threads, {:.0} s in all. Mode: {}.",
        ran.len(),
        args.seed,
        total,
        if args.quick { "--quick (reduced sizes; verdicts are indicative only)" } else { "full" }
    )));
    doc.intro.push(Block::Paragraph(
        "How verdicts are computed (never written by hand): for a value the paper reports, 'reproduced' if our mean is the paper's value ± the stated tolerance, 'inconclusive' if our 95 % interval meets that band while the mean lies outside it, else 'better' or 'worse' by which side of it the whole interval lies (or 'contradicted' when the value has no better side); for a bound the paper states (above / below), 'reproduced' if the whole interval is on the stated side, 'contradicted' if the whole interval is on the other side, 'inconclusive' if it straddles the bound. Margins are ours − paper.".into(),
    ));
    let mut summary = Table::new(
        "every claim",
        &[
            "experiment",
            "paper, where",
            "the paper's sentence",
            "paper",
            "ours (95% CI)",
            "verdict",
        ],
    );
    let mut counts = std::collections::BTreeMap::new();
    for r in ran {
        match &r.outcome {
            Ok(o) => {
                for c in &o.checks {
                    *counts.entry(c.verdict.name()).or_insert(0usize) += 1;
                    summary.push([
                        format!(
                            "{} ({})",
                            r.exp.name,
                            c.conditions.split(';').next().unwrap_or("")
                        ),
                        format!("{} {}", c.claim.paper, c.claim.location),
                        c.claim.quote.to_string(),
                        c.claim.paper_text(),
                        c.ours.text(c.claim.unit),
                        c.verdict_text(),
                    ]);
                }
            }
            Err(e) => summary.push([
                r.exp.name.to_string(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                format!("failed: {e}"),
            ]),
        }
    }
    doc.intro.push(Block::Paragraph(format!(
        "Verdicts: {}.",
        counts
            .iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect::<Vec<_>>()
            .join(", ")
    )));
    doc.intro.push(Block::Table(summary));
    let base = args.out.as_path();
    for r in ran {
        let mut s = Section::new(r.exp.name, format!("{} — {}", r.exp.name, r.exp.reproduces));
        s.push(Block::Paragraph(r.exp.summary.to_string()));
        s.push(Block::Code(command(args, r.exp.name)));
        match &r.outcome {
            Err(e) => s.push(Block::Paragraph(format!("This experiment failed: {e}"))),
            Ok(o) => {
                for c in &o.checks {
                    s.push(Block::Quote {
                        text: c.claim.quote.to_string(),
                        source: format!("paper {} {}", c.claim.paper, c.claim.location),
                    });
                    let mut t = Table::new(
                        format!("{}: {}", c.claim.id, c.claim.metric),
                        &["paper", "ours (95% CI)", "verdict", "conditions"],
                    );
                    t.push([
                        c.claim.paper_text(),
                        c.ours.text(c.claim.unit),
                        c.verdict_text(),
                        c.conditions.clone(),
                    ]);
                    s.push(Block::Table(t));
                    if let Some(why) = &c.explanation {
                        s.push(Block::Paragraph(format!("Why: {why}")));
                    }
                }
                for n in &o.notes {
                    s.push(Block::Paragraph(n.clone()));
                }
                for f in o.figures() {
                    s.push(Block::Figure(f));
                }
                for t in &o.tables {
                    s.push(Block::Table(t.clone()));
                }
                let csvs: Vec<String> = o
                    .files
                    .iter()
                    .filter(|f| f.extension().is_some_and(|e| e == "csv"))
                    .map(|f| rel(f, base))
                    .collect();
                s.push(Block::Paragraph(format!(
                    "Took {:.1} s. Files in {}{}",
                    r.seconds,
                    rel(&r.dir, base),
                    if csvs.is_empty() {
                        String::new()
                    } else {
                        format!("; data: {}", csvs.join(", "))
                    }
                )));
            }
        }
        doc.sections.push(s);
    }
    doc
}
