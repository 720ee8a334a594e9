//! `worldmesh assign`: client-to-mirror assignment of a stream of join/leave events
//! (paper `002`), using the `worldmesh-assign` library.

use anyhow::{Context as _, bail};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use worldmesh_assign::stream::{Applied, MAX_LINE_BYTES, Session};
use worldmesh_assign::{Algorithm, Assigner, MirrorResources, PlayerDemand, capacity};
use worldmesh_core::LatencyMatrix;

const FORMATS: &str = "\
INPUT (one JSON object per line; blank lines and lines starting with # are skipped):
  {\"join\": \"alice\", \"delays\": [12.5, 40, 81.2]}   delays in ms to mirror 0, 1, 2, ...
  {\"join\": 7, \"node\": 42}                         delays from --matrix row 42 to the --mirrors rows
  {\"leave\": \"alice\"}
  Player names are strings or integers. A player may re-join after leaving.

OUTPUT (JSON lines on standard output), one per event:
  {\"line\":3,\"event\":\"join\",\"player\":\"f\",\"mirror\":1,
   \"moved\":[{\"player\":\"b\",\"from\":1,\"to\":2}],
   \"stats\":{\"players\":6,\"total_us\":30000,\"mean_ms\":5.0,\"max_ms\":10.0}}
  (`mirror` is the mirror joined or left; `moved` lists other players re-assigned, in
  order; with --full each line also has \"assignment\": {player: mirror}), and a last line
  {\"event\":\"end\",\"stats\":{...},\"assignment\":{...}}.

ERRORS: the first bad line stops the run with exit status 1 and a message naming the line:
  malformed JSON or event shape, duplicate join, leave of an unknown player, leave of a
  player who already left, all mirrors full, wrong number of delays, bad delay values.
  Output for the lines before it has been written.

EXAMPLE:
  worldmesh assign --capacities 2,2,2 --events events.jsonl";

/// Arguments of `worldmesh assign`.
#[derive(clap::Args, Debug)]
#[command(after_long_help = FORMATS)]
pub struct AssignArgs {
    /// JSON-lines file of join/leave events (`-` reads standard input). See --help for the format.
    #[arg(long, short = 'e', default_value = "-")]
    events: PathBuf,
    /// Mirror capacities (players per mirror), comma-separated, e.g. `100,150,200`.
    #[arg(long, value_delimiter = ',', conflicts_with = "resources")]
    capacities: Vec<u32>,
    /// Instead of --capacities: each mirror's bandwidth and processing as `alpha:beta`,
    /// comma-separated (paper 002 §2.1); capacity C = min(alpha/b, (beta − n·Ls)/Lc).
    #[arg(long, value_delimiter = ',', requires = "demand")]
    resources: Vec<String>,
    /// Per-player demand `b:Ls:Lc` (bandwidth, world-simulation and client-serving
    /// processing) for --resources.
    #[arg(long)]
    demand: Option<String>,
    /// Players the system is provisioned for (the `n` in beta − n·Ls) for --resources.
    #[arg(long, default_value_t = 0)]
    design_players: u64,
    /// Square latency matrix (ms; whitespace or CSV) for joins given as `"node": k`.
    #[arg(long, requires = "mirrors")]
    matrix: Option<PathBuf>,
    /// Rows of --matrix that are the mirrors, comma-separated, in mirror order.
    #[arg(long, value_delimiter = ',', requires = "matrix")]
    mirrors: Vec<usize>,
    /// Join/leave algorithms: `sa` (J-SA/L-SA, optimal, incremental MC/MP), `sa-rebuild`
    /// (J-SA/L-SA rebuilding MC/MP per event, as in the paper), `greedy`
    /// (J-greedy/L-greedy) or `ignore` (J-greedy/L-ignore).
    #[arg(long, default_value = "sa", value_parser = ["sa", "sa-rebuild", "greedy", "ignore"])]
    algorithm: String,
    /// Include the whole assignment in every output line (its size grows with the players).
    #[arg(long)]
    full: bool,
}

#[derive(serde::Serialize)]
struct Line<'a> {
    #[serde(flatten)]
    applied: &'a Applied,
    #[serde(skip_serializing_if = "Option::is_none")]
    assignment: Option<serde_json::Map<String, serde_json::Value>>,
}

fn assignment(s: &Session) -> serde_json::Map<String, serde_json::Value> {
    s.assignment()
        .into_iter()
        .map(|(p, m)| (p, serde_json::Value::from(m)))
        .collect()
}

fn parse_f64s(what: &str, text: &str, n: usize) -> anyhow::Result<Vec<f64>> {
    let v: Vec<f64> = text
        .split(':')
        .map(|x| {
            x.trim()
                .parse::<f64>()
                .with_context(|| format!("{what} `{text}`: `{x}` is not a number"))
        })
        .collect::<Result<_, _>>()?;
    if v.len() != n {
        bail!("{what} `{text}`: expected {n} numbers separated by `:`");
    }
    Ok(v)
}

fn capacities(args: &AssignArgs) -> anyhow::Result<Vec<u32>> {
    if !args.capacities.is_empty() {
        return Ok(args.capacities.clone());
    }
    if args.resources.is_empty() {
        bail!("give mirror capacities with --capacities (or --resources with --demand)");
    }
    let d = parse_f64s("--demand", args.demand.as_deref().unwrap_or(""), 3)?;
    let demand = PlayerDemand {
        bandwidth: d[0],
        simulate: d[1],
        serve: d[2],
    };
    args.resources
        .iter()
        .enumerate()
        .map(|(j, r)| {
            let v = parse_f64s("--resources", r, 2)?;
            capacity(
                MirrorResources {
                    bandwidth: v[0],
                    processing: v[1],
                },
                demand,
                args.design_players,
            )
            .with_context(|| format!("mirror {j}"))
        })
        .collect()
}

/// Runs the command.
pub fn run(args: AssignArgs) -> anyhow::Result<()> {
    let caps = capacities(&args)?;
    let algorithm = Algorithm::from_name(&args.algorithm).context("unknown algorithm")?;
    let assigner = Assigner::new(algorithm, caps.clone())?;
    let mut session = Session::new(assigner);
    if let Some(path) = &args.matrix {
        let lm = LatencyMatrix::load(path)?;
        if args.mirrors.len() != caps.len() {
            bail!(
                "--mirrors names {} rows but there are {} capacities",
                args.mirrors.len(),
                caps.len()
            );
        }
        if let Some(&bad) = args.mirrors.iter().find(|&&r| r >= lm.len()) {
            bail!(
                "--mirrors: row {bad} is out of range ({} has {} rows)",
                path.display(),
                lm.len()
            );
        }
        let table = (0..lm.len())
            .flat_map(|k| args.mirrors.iter().map(move |&j| (k, j)))
            .map(|(k, j)| f64::from(lm.rtt_ms(k, j)))
            .collect();
        session = session.with_node_table(table);
    }
    let (name, input): (String, Box<dyn Read>) = if args.events.as_os_str() == "-" {
        ("<stdin>".into(), Box::new(std::io::stdin()))
    } else {
        let f = std::fs::File::open(&args.events)
            .with_context(|| format!("cannot open {}", args.events.display()))?;
        (args.events.display().to_string(), Box::new(f))
    };
    let mut reader = BufReader::new(input);
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut buf = Vec::new();
    let mut line = 0usize;
    let result = (|| -> anyhow::Result<()> {
        loop {
            buf.clear();
            let n = reader
                .by_ref()
                .take(MAX_LINE_BYTES as u64 + 1)
                .read_until(b'\n', &mut buf)
                .with_context(|| format!("{name}: read error after line {line}"))?;
            if n == 0 {
                break;
            }
            line += 1;
            if buf.len() > MAX_LINE_BYTES {
                bail!("{name}: line {line}: longer than {MAX_LINE_BYTES} bytes");
            }
            let text = std::str::from_utf8(&buf)
                .map_err(|_| anyhow::anyhow!("{name}: line {line}: not UTF-8 text"))?;
            let applied = session
                .apply_line(line, text)
                .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
            if let Some(a) = applied {
                let l = Line {
                    applied: &a,
                    assignment: args.full.then(|| assignment(&session)),
                };
                serde_json::to_writer(&mut out, &l)?;
                out.write_all(b"\n")?;
            }
        }
        let end = serde_json::json!({"event": "end", "stats": session.assigner().stats(), "assignment": assignment(&session)});
        serde_json::to_writer(&mut out, &end)?;
        out.write_all(b"\n")?;
        Ok(())
    })();
    out.flush()?;
    result
}
