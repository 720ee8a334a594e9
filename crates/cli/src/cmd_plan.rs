//! `worldmesh plan`: capacity planning before launch (paper `004`). Builds the map's
//! visibility map and a density map, predicts relationships, updates, bandwidth and CPU
//! for each load state (client-server and worldmesh), prints a table and writes CSV,
//! JSON and heat maps to the output folder.

use anyhow::{Context as _, bail};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Instant;
use worldmesh_experiments::plan_validate::{ValidateConfig, run_validation};
use worldmesh_experiments::plan_vis::{density_heatmap, visibility_heatmap};
use worldmesh_loadmodel::{
    AVATAR_CELL_SIZE, AoiRule, CostModel, DensityMap, DensitySeries, Grid, HotspotConfig, LoadPlan,
    LoadState, Map, PacketModel, Planner, Prediction, Sampling, SightRule, Trace, VisibilityMap,
};
use worldmesh_report::{LinePlot, OutputDir, Scale, Series, Table};

/// Arguments of `worldmesh plan`.
#[derive(clap::Args, Debug)]
pub struct PlanArgs {
    /// The map: a TOML map file (width, height, `[[obstacle]]` boxes, optional
    /// `[height_map]`; example: data/plan/village.toml), or `random:WxH:OBSTACLES:SEED`, or
    /// `empty:WxH`.
    #[arg(long, default_value = "random:4000x4000:40:1", value_name = "FILE|SPEC")]
    map: String,
    /// Numbers of logged-in players to evaluate as steady states, comma separated
    /// [default: 10,50,100,200 when no --load file is given; 16,32,64,128 with
    /// --validate].
    #[arg(long, value_delimiter = ',', value_name = "N[,N...]")]
    players: Vec<usize>,
    /// Load-state file (TOML: `[[steady]]`, `[daily]` points, `[[peak]]`); its states are
    /// evaluated after the --players ones. Example: data/plan/day.toml.
    #[arg(long, value_name = "FILE")]
    load: Option<PathBuf>,
    /// Side of a grid cell in world units (default: one avatar's 32-unit bounding box).
    #[arg(long, default_value_t = AVATAR_CELL_SIZE, value_name = "UNITS")]
    cell_size: f64,
    /// Area-of-interest rule: `none`, `radius:R`, `box:H` or `box:HXxHY` (half-extents).
    /// Visibility is limited to its largest range. Default: the model workload's Quake-like
    /// box of half-extent 450 units (paper 000 §4.1).
    #[arg(long, default_value = "box:450", value_name = "RULE")]
    aoi: String,
    /// What counts as seeing: `los` (line of sight between cell centres, blocked by
    /// obstacles and terrain; paper 004) or `none` (interest sees through walls and only
    /// the AoI limits it, like the model workload's AoI boxes).
    #[arg(long, value_enum, default_value_t = SightArg::Los)]
    sight: SightArg,
    /// Density model when no trace is given: `uniform` (every free cell alike) or
    /// `hotspots[:K[:S[:SPREAD]]]` (K hotspots with Zipf(S) popularity and Gaussian spread
    /// SPREAD units).
    #[arg(long, default_value = "hotspots:8:1:300", value_name = "MODEL")]
    density: String,
    /// Recorded position trace (CSV `time_s,object_kind,x,y`), optionally `N=FILE` for a
    /// trace recorded with N players; repeat for several N (densities are interpolated
    /// between them). Replaces --density. Example: data/plan/trace-example.csv.
    #[arg(long, value_name = "[N=]FILE")]
    trace: Vec<String>,
    /// Object kinds to take from traces (repeatable; default: all kinds).
    #[arg(long, value_name = "KIND")]
    kind: Vec<String>,
    /// Seconds between position samples taken from traces: `SECONDS` for every kind, or
    /// `KIND=SECONDS` for one object kind (repeatable). Default: 1 s, as in the paper.
    #[arg(long, value_name = "[KIND=]SECONDS")]
    sample_interval: Vec<String>,
    /// Updates per second per relationship.
    #[arg(long, default_value_t = 10.0, value_name = "HZ")]
    rate: f64,
    /// Bytes of one serialized object update.
    #[arg(long, default_value_t = 32.0, value_name = "BYTES")]
    update_bytes: f64,
    /// Per-packet overhead preset: `paper` (40 bytes, as in the paper), `udp` (IPv4, 28),
    /// `udp6` (48) or `quic` (IPv4 + QUIC short header + AEAD tag + DATAGRAM frame, 58).
    #[arg(long, default_value = "paper", value_name = "PRESET")]
    transport: String,
    /// Maximum IP packet size in bytes.
    #[arg(long, default_value_t = 1500.0, value_name = "BYTES")]
    mtu: f64,
    /// Players per worldmesh node (8 in the `fed` scenarios).
    #[arg(long, default_value_t = 8, value_name = "P")]
    players_per_node: usize,
    /// Threads for building the visibility map.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Seed of the density model (hotspot placement).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output folder for plan.csv, plan.json and the heat maps.
    #[arg(long, default_value = "out/plan", value_name = "DIR")]
    out: PathBuf,
    /// Instead of planning a given map: run the model workload (paper 000 §4.1) in the
    /// simulator for each --players N (a multiple of --players-per-node; default
    /// 16,32,64,128) on its own map, and print predicted vs measured relationships,
    /// updates/s, client-server and worldmesh bandwidth with relative errors. The map,
    /// AoI (box 450), sight (none), densities and costs come from the model workload and
    /// the run, so the flags that set them are refused.
    #[arg(
        long,
        conflicts_with_all = [
            "map", "load", "aoi", "sight", "density", "trace", "kind", "sample_interval",
            "rate", "update_bytes", "transport", "mtu",
        ]
    )]
    validate: bool,
    /// With --validate: simulated seconds per run.
    #[arg(long, default_value_t = 60.0, requires = "validate", value_name = "SECONDS")]
    duration: f64,
    /// With --validate: seconds excluded at the start of each run (at most a quarter of
    /// the run).
    #[arg(long, default_value_t = 10.0, requires = "validate", value_name = "SECONDS")]
    warmup: f64,
}

/// Values of `--sight`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum SightArg {
    /// Line of sight (obstacles and terrain block).
    Los,
    /// No sight test: the AoI alone decides.
    None,
}

#[derive(Serialize)]
struct PlanReport<'a> {
    map: &'a str,
    width: f64,
    height: f64,
    obstacles: usize,
    grid: (usize, usize),
    cell_size: f64,
    free_cells: usize,
    aoi: String,
    sight: &'static str,
    visibility_pairs: u64,
    visibility_build_s: f64,
    density: String,
    cost: CostModel,
    predictions: &'a [Prediction],
}

fn parse_density(spec: &str, grid: Grid, free: &[bool], seed: u64) -> anyhow::Result<DensityMap> {
    let parts: Vec<&str> = spec.split(':').collect();
    let d = match parts[0] {
        "uniform" if parts.len() == 1 => DensityMap::uniform(grid, free)?,
        "hotspots" if parts.len() <= 4 => {
            let mut cfg = HotspotConfig {
                seed,
                ..Default::default()
            };
            let num = |k: usize| -> anyhow::Result<Option<f64>> {
                parts
                    .get(k)
                    .map(|t| {
                        t.parse::<f64>()
                            .with_context(|| format!("--density {spec}: `{t}` is not a number"))
                    })
                    .transpose()
            };
            if let Some(k) = num(1)? {
                if !((1.0..=10_000.0).contains(&k) && k.fract() == 0.0) {
                    bail!("--density {spec}: hotspot count must be a whole number in 1..=10000");
                }
                cfg.count = k as usize;
            }
            if let Some(s) = num(2)? {
                cfg.zipf_s = s;
            }
            if let Some(s) = num(3)? {
                cfg.spread = s;
            }
            DensityMap::hotspots(grid, free, &cfg)?
        }
        _ => bail!("--density `{spec}`: expected uniform or hotspots[:K[:S[:SPREAD]]]"),
    };
    Ok(d)
}

fn trace_densities(args: &PlanArgs, grid: Grid) -> anyhow::Result<DensitySeries> {
    let mut sampling = Sampling::default();
    for spec in &args.sample_interval {
        let (kind, secs) = match spec.split_once('=') {
            Some((k, v)) => (Some(k), v),
            None => (None, spec.as_str()),
        };
        let v: f64 = match secs.trim().parse() {
            Ok(v) if f64::is_finite(v) && v >= 0.0 => v,
            _ => bail!("--sample-interval `{spec}`: expected SECONDS or KIND=SECONDS with SECONDS ≥ 0"),
        };
        match kind {
            Some(k) => {
                sampling.per_kind.insert(k.to_string(), v);
            }
            None => sampling.default_interval_s = v,
        }
    }
    let kinds: Vec<&str> = args.kind.iter().map(String::as_str).collect();
    let mut maps = Vec::new();
    if args.trace.len() > 1
        && args
            .trace
            .iter()
            .any(|t| t.split_once('=').is_none_or(|(n, _)| n.parse::<usize>().is_err()))
    {
        bail!("--trace: with several traces, give each as N=FILE (the player count it was recorded at)");
    }
    for t in &args.trace {
        let (n, file) = match t.split_once('=') {
            Some((n, f)) if n.parse::<usize>().is_ok() => (n.parse::<usize>()?, f),
            _ => (0, t.as_str()),
        };
        let trace = Trace::load(std::path::Path::new(file))?;
        let samples = trace.sample(&kinds, &sampling)?;
        let (d, off) = DensityMap::from_samples(grid, &samples).with_context(|| format!("trace {file}"))?;
        if off > 0 {
            eprintln!(
                "note: {file}: {off} of {} samples lie off the map and were ignored",
                samples.len()
            );
        }
        maps.push((n, d));
    }
    Ok(DensitySeries::new(maps)?)
}

/// Runs the command.
pub fn run(args: PlanArgs) -> anyhow::Result<()> {
    if args.validate {
        return run_validate(&args);
    }
    let map = Map::from_spec_or_file(&args.map)?;
    let aoi = AoiRule::parse(&args.aoi).context("--aoi")?;
    let packet = PacketModel::preset(&args.transport)
        .context("--transport")?
        .with_mtu(args.mtu)
        .context("--mtu")?;
    let cost = CostModel {
        update_rate_hz: args.rate,
        update_bytes: args.update_bytes,
        packet,
        players_per_node: args.players_per_node,
        ..CostModel::default()
    };
    cost.validate()?;
    if args.threads == 0 || args.threads > 256 {
        bail!("--threads {}: must be in 1..=256", args.threads);
    }
    let mut plan = if args.players.is_empty() && args.load.is_none() {
        LoadPlan::steady(&[10, 50, 100, 200])?
    } else if args.players.is_empty() {
        LoadPlan::default()
    } else {
        LoadPlan::steady(&args.players).context("--players")?
    };
    if let Some(path) = &args.load {
        let extra = LoadPlan::load(path)?;
        plan.states.extend(extra.states);
        plan.daily = extra.daily;
    }

    let grid = Grid::for_map(&map, args.cell_size).context("--cell-size")?;
    let free = grid.free_cells(&map);
    let n_free = free.iter().filter(|f| **f).count();
    let (series, density_name) = if args.trace.is_empty() {
        let d = parse_density(&args.density, grid, &free, args.seed)?;
        (DensitySeries::single(d), args.density.clone())
    } else {
        (
            trace_densities(&args, grid)?,
            format!("trace {}", args.trace.join(", ")),
        )
    };
    eprintln!(
        "building the visibility map: {} cells ({}×{}), range {} …",
        grid.len(),
        grid.nx,
        grid.ny,
        aoi.max_range().map_or("unlimited".into(), |r| format!("{r:.0}"))
    );
    let started = Instant::now();
    let rule = match args.sight {
        SightArg::Los => SightRule::LineOfSight,
        SightArg::None => SightRule::RangeOnly,
    };
    let vis = VisibilityMap::build_with(&map, &grid, aoi.max_range(), args.threads, rule)
        .context("visibility map (a larger --cell-size makes fewer cells)")?;
    let vis_s = started.elapsed().as_secs_f64();
    let planner = Planner::new(&series, &vis, aoi, cost)?;
    let predictions: Vec<Prediction> = plan.states.iter().map(|s| planner.predict(s)).collect();

    println!(
        "map {}: {} × {} units, {} obstacles; grid {}×{} cells of {} ({} free); AoI {aoi}, sight {}",
        args.map,
        map.width,
        map.height,
        map.obstacles.len(),
        grid.nx,
        grid.ny,
        args.cell_size,
        n_free,
        if rule == SightRule::LineOfSight {
            "los"
        } else {
            "none"
        }
    );
    println!(
        "visibility map: {} visible pairs, {:.1} MB, built in {:.2} s on {} thread(s); density: {density_name}",
        vis.pairs(),
        vis.storage_bytes() as f64 / 1e6,
        vis_s,
        args.threads
    );
    println!(
        "cost model: {} Hz, {}-byte updates, {} transport (MTU {}, {} bytes/packet overhead), {} players/node",
        cost.update_rate_hz,
        cost.update_bytes,
        packet.name,
        packet.mtu,
        packet.overhead,
        cost.players_per_node
    );
    println!();
    let mut t = Table::new(
        "predictions (Rel = expected directed relationships; kbps = kbit/s)",
        &[
            "state",
            "N",
            "Rel(N) N²S",
            "relationships",
            "updates/s",
            "CS client down",
            "CS server out",
            "CS server Mtick/s",
            "nodes",
            "WM peer out/node",
            "WM out/node",
        ],
    );
    for p in &predictions {
        t.push([
            p.name.clone(),
            p.players.to_string(),
            format!("{:.2}", p.rel_paper),
            format!("{:.2}", p.relationships),
            format!("{:.1}", p.updates_per_s),
            format!("{:.1}", p.cs_client_down_kbps),
            format!("{:.1}", p.cs_server_out_kbps),
            format!("{:.3}", p.cs_server_cpu_ticks / 1e6),
            p.nodes.to_string(),
            format!("{:.1}", p.wm_node_peer_out_kbps),
            format!("{:.1}", p.wm_node_out_kbps),
        ]);
    }
    print!("{t}");

    let out = OutputDir::create(&args.out)?;
    let mut csv = Table::new(
        "plan",
        &[
            "state",
            "kind",
            "players",
            "rel_paper",
            "relationships",
            "updates_per_s",
            "cs_client_down_kbps",
            "cs_client_up_kbps",
            "cs_server_out_kbps",
            "cs_server_out_kbps_paper",
            "cs_server_in_kbps",
            "cs_server_cpu_ticks",
            "nodes",
            "wm_interest_pairs",
            "wm_node_peer_out_kbps",
            "wm_node_out_kbps",
            "wm_node_cpu_ticks",
        ],
    );
    for p in &predictions {
        csv.push([
            p.name.clone(),
            p.kind.to_string(),
            p.players.to_string(),
            p.rel_paper.to_string(),
            p.relationships.to_string(),
            p.updates_per_s.to_string(),
            p.cs_client_down_kbps.to_string(),
            p.cs_client_up_kbps.to_string(),
            p.cs_server_out_kbps.to_string(),
            p.cs_server_out_kbps_paper.to_string(),
            p.cs_server_in_kbps.to_string(),
            p.cs_server_cpu_ticks.to_string(),
            p.nodes.to_string(),
            p.wm_interest_pairs.to_string(),
            p.wm_node_peer_out_kbps.to_string(),
            p.wm_node_out_kbps.to_string(),
            p.wm_node_cpu_ticks.to_string(),
        ]);
    }
    out.write_csv("plan.csv", &csv)?;
    out.write_json(
        "plan.json",
        &PlanReport {
            map: &args.map,
            width: map.width,
            height: map.height,
            obstacles: map.obstacles.len(),
            grid: (grid.nx, grid.ny),
            cell_size: args.cell_size,
            free_cells: n_free,
            aoi: aoi.to_string(),
            sight: if rule == SightRule::LineOfSight {
                "los"
            } else {
                "none"
            },
            visibility_pairs: vis.pairs(),
            visibility_build_s: vis_s,
            density: density_name,
            cost,
            predictions: &predictions,
        },
    )?;
    let mut written = vec!["plan.csv".to_string(), "plan.json".to_string()];
    for (n, d) in series.maps() {
        let (name, title) = if *n == 0 {
            ("density.svg".to_string(), "Density P(i)".to_string())
        } else {
            (format!("density_n{n}.svg"), format!("Density P(i, {n})"))
        };
        density_heatmap(&title, d, &vis).write_svg(&out.path(&name))?;
        written.push(name);
    }
    visibility_heatmap("Cells visible within the AoI range", &grid, &vis)
        .write_svg(&out.path("visibility.svg"))?;
    written.push("visibility.svg".into());

    // Bandwidth against N over every evaluated state.
    let mut by_n: Vec<&Prediction> = predictions.iter().collect();
    by_n.sort_by_key(|p| p.players);
    by_n.dedup_by_key(|p| p.players);
    let curve = |name: &str, f: fn(&Prediction) -> f64| {
        Series::marked(name, by_n.iter().map(|p| (p.players as f64, f(p))).collect())
    };
    let mut plot = LinePlot::new("Predicted outbound bandwidth", "players N", "kbit/s")
        .with(curve("client-server: server", |p| p.cs_server_out_kbps))
        .with(curve("worldmesh: per node", |p| p.wm_node_out_kbps))
        .with(curve("worldmesh: per node to peers", |p| p.wm_node_peer_out_kbps))
        .with(curve("client-server: per client (down)", |p| {
            p.cs_client_down_kbps
        }));
    plot.y_scale = Scale::Log;
    out.write_plot("bandwidth.svg", &plot)?;
    written.push("bandwidth.svg".into());

    // The daily curve, hour by hour (§2.3 transitions).
    if let Some(daily) = &plan.daily {
        let hours: Vec<f64> = (0..=48).map(|h| f64::from(h) / 2.0).collect();
        let at = |h: f64| {
            let n = daily.players_at(h).round().max(1.0) as usize;
            planner.predict(&LoadState::steady(n))
        };
        let preds: Vec<(f64, Prediction)> = hours.iter().map(|&h| (h, at(h))).collect();
        let pts = |f: fn(&Prediction) -> f64| preds.iter().map(|(h, p)| (*h, f(p))).collect::<Vec<_>>();
        let mut plot = LinePlot::new(
            "Daily load curve: predicted outbound bandwidth",
            "hour of day",
            "kbit/s",
        )
        .with(Series::line(
            "client-server: server",
            pts(|p| p.cs_server_out_kbps),
        ))
        .with(Series::line("worldmesh: per node", pts(|p| p.wm_node_out_kbps)));
        plot.y_scale = Scale::Log;
        out.write_plot("daily.svg", &plot)?;
        written.push("daily.svg".into());
    }
    println!("\nwrote {} in {}", written.join(", "), out.root().display());
    Ok(())
}

/// `--validate`: the model workload in the simulator, predicted vs measured.
fn run_validate(args: &PlanArgs) -> anyhow::Result<()> {
    let players = if args.players.is_empty() {
        vec![16, 32, 64, 128]
    } else {
        args.players.clone()
    };
    if args.players_per_node == 0 {
        bail!("--players-per-node must be at least 1");
    }
    if let Some(n) = players
        .iter()
        .find(|n| **n == 0 || !n.is_multiple_of(args.players_per_node))
    {
        bail!(
            "--players {n}: with --validate every N must be a positive multiple of --players-per-node ({})",
            args.players_per_node
        );
    }
    if !(args.duration.is_finite() && args.duration > 0.0 && args.duration <= 86_400.0) {
        bail!("--duration {}: must be in (0, 86400] seconds", args.duration);
    }
    if !(args.warmup.is_finite() && args.warmup >= 0.0) {
        bail!(
            "--warmup {}: must be a non-negative number of seconds",
            args.warmup
        );
    }
    if !(args.cell_size.is_finite() && args.cell_size > 0.0) {
        bail!("--cell-size {}: must be positive", args.cell_size);
    }
    if args.threads == 0 || args.threads > 256 {
        bail!("--threads {}: must be in 1..=256", args.threads);
    }
    let cfg = ValidateConfig {
        players,
        players_per_node: args.players_per_node,
        duration_s: args.duration,
        warmup_s: args.warmup,
        seed: args.seed,
        cell_size: args.cell_size,
        threads: args.threads,
        ..ValidateConfig::default()
    };
    let out = OutputDir::create(&args.out)?;
    let v = run_validation(&cfg, &out, true)?;
    let (tables, files) = (v.tables, v.files);
    for t in &tables {
        println!("{t}");
    }
    let names: Vec<String> = files
        .iter()
        .filter_map(|f| f.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    println!("wrote {} in {}", names.join(", "), out.root().display());
    Ok(())
}
