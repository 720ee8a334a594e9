//! `worldmesh swarm`: the seeded fault swarm over whole simulated worlds (issue 14;
//! `worldmesh_sim::swarm`). Every seed draws a world and a schedule of faults; safety
//! invariants are checked after every event and liveness after the heal. A failing seed
//! prints its replay command, its setup and the event log of its run.

use anyhow::bail;
use worldmesh_sim::swarm::{self, Faults};

const SWARM_HELP: &str = "\
WHAT A SEED DRAWS:
  4-10 nodes with SWIM membership and 1-2 backups, 1-4 players each, the map, broadcast or
  interest management, a 2-40 ms RTT, jitter, and (with --faults all) 0-20 % loss and
  duplication; one to five faults between 3 s and 13 s: crashes (at most a tenth of the
  nodes down at once), restarts as a new generation, joins, drains, and (--faults all)
  symmetric and one-way partitions. At 15 s the network heals; liveness is checked 12 s
  later.

INVARIANTS (after every event):
  one-primary-per-epoch, replica-from-primary, monotone-versions; after the heal: every
  object has exactly one primary, none is lost, every member replicates every object
  (broadcast worlds).

EXIT STATUS:
  0 if every seed passed, 1 if any failed (each failure printed with its replay command).

EXAMPLES:
  worldmesh swarm --seeds 500
  worldmesh swarm --faults all --seeds 1 --from 42 --log";

/// Which faults a swarm draws.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum FaultsArg {
    /// Crashes, restarts, joins and drains; at most 5 % loss, no partitions.
    Crashes,
    /// Everything, partitions and up to 20 % loss included.
    All,
}

/// Arguments of `worldmesh swarm`.
#[derive(clap::Args, Debug)]
#[command(after_long_help = SWARM_HELP)]
pub struct SwarmArgs {
    /// Seeds to run.
    #[arg(long, default_value_t = 100, value_name = "N")]
    seeds: u64,
    /// First seed.
    #[arg(long, default_value_t = 1, value_name = "S")]
    from: u64,
    /// Which faults to draw.
    #[arg(long, value_enum, default_value = "crashes")]
    faults: FaultsArg,
    /// Print the event log of failing seeds (membership, adoptions, migrations, drains).
    #[arg(long)]
    log: bool,
    /// Also one JSON object per seed (setup, events, checks, violation, log) on standard
    /// output; failures and the summary stay on standard error.
    #[arg(long)]
    json: bool,
}

/// Runs `worldmesh swarm`.
pub fn run(args: SwarmArgs) -> anyhow::Result<()> {
    if args.seeds == 0 || args.seeds > 10_000_000 {
        bail!("--seeds must be in 1..=10000000, got {}", args.seeds);
    }
    let kinds = match args.faults {
        FaultsArg::Crashes => Faults::Crashes,
        FaultsArg::All => Faults::All,
    };
    let started = std::time::Instant::now();
    let (mut failed, mut events, mut checks) = (0u64, 0u64, 0u64);
    let (mut as_left, mut as_failed, mut renewals) = (0u64, 0u64, 0u64);
    swarm::run(args.from, args.seeds, kinds, |o| {
        events += o.events;
        checks += o.checks;
        as_left += o.leaves.as_left;
        as_failed += o.leaves.as_failed;
        renewals += o.renewals;
        if args.json {
            println!("{}", serde_json::to_string(o).unwrap_or_default());
        }
        if let Some(v) = &o.violation {
            failed += 1;
            eprintln!(
                "FAIL seed {}: {} at {} ms: {}\n  replay: {}\n  setup: {}",
                o.setup.seed,
                v.invariant,
                v.at_ms,
                v.detail,
                o.replay_command(),
                serde_json::to_string(&o.setup).unwrap_or_default()
            );
            if args.log {
                for l in &o.log {
                    eprintln!("  {l}");
                }
            }
        }
    })
    .map_err(|e| anyhow::anyhow!("swarm: {e}"))?;
    eprintln!(
        "swarm ({:?}): {} seeds from {}, {failed} failed; {events} events, {checks} invariant checks; \
         drained members' departures recorded as left / failed: {as_left} / {as_failed}; \
         generations renewed: {renewals}; {:.1} s",
        args.faults,
        args.seeds,
        args.from,
        started.elapsed().as_secs_f64()
    );
    if failed > 0 {
        bail!("{failed} of {} seeds broke an invariant", args.seeds);
    }
    Ok(())
}
