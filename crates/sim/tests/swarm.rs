//! The fault swarm in CI: seeds 1–500 of the `crashes` swarm, each a whole world under a
//! drawn schedule of crashes, restarts, drains and joins over a lossy network, with the
//! safety invariants checked after every event and liveness after the heal
//! (`worldmesh_sim::swarm`). `WORLDMESH_SEEDS=N` runs N seeds instead,
//! `WORLDMESH_SEED_FROM=S` starts elsewhere, `WORLDMESH_SWARM_FAULTS=all` adds partitions
//! and heavy loss, `WORLDMESH_SWARM_LOG=1` prints a failing seed's events;
//! `worldmesh swarm` runs it from the command line.

use worldmesh_sim::swarm;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn the_swarm_finds_no_violation() {
    let from = env("WORLDMESH_SEED_FROM", 1);
    let count = env("WORLDMESH_SEEDS", 500);
    let show_log = std::env::var("WORLDMESH_SWARM_LOG").is_ok();
    let mut failed = Vec::new();
    let mut events = 0;
    let mut checks = 0;
    let kinds = if std::env::var("WORLDMESH_SWARM_FAULTS").as_deref() == Ok("all") {
        swarm::Faults::All
    } else {
        swarm::Faults::Crashes
    };
    swarm::run(from, count, kinds, |o| {
        events += o.events;
        checks += o.checks;
        if let Some(v) = &o.violation {
            failed.push(format!(
                "seed {}: {} at {} ms: {}\n  replay: {}\n  setup: {}",
                o.setup.seed,
                v.invariant,
                v.at_ms,
                v.detail,
                o.replay_command(),
                serde_json::to_string(&o.setup).unwrap()
            ));
            if show_log {
                eprintln!("{}", o.log.join("\n"));
            }
        }
    })
    .unwrap();
    eprintln!(
        "swarm: {count} seeds from {from}, {events} events, {checks} checks, {} failed",
        failed.len()
    );
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn a_seed_is_replayed_exactly() {
    let a = swarm::run_seed(3, swarm::Faults::All).unwrap();
    let b = swarm::run_seed(3, swarm::Faults::All).unwrap();
    assert_eq!(
        serde_json::to_string(&a.setup).unwrap(),
        serde_json::to_string(&b.setup).unwrap()
    );
    assert_eq!((a.events, a.checks), (b.events, b.checks));
    assert!(a.events > 10_000, "{} events", a.events);
}

/// Seeds the swarm still fails (open bugs, issue 14; 3 of seeds 1–2,000, all
/// `no-object-lost`: an orphan nobody adopts before its holders' timeout; 24 failed at the
/// start of 2026-11-26's afternoon session). Run with
/// `cargo test -p worldmesh-sim --test swarm -- --ignored`.
#[test]
#[ignore = "open bugs found by the swarm"]
fn seeds_that_still_fail() {
    for seed in [1549, 1553, 1829] {
        let o = swarm::run_seed(seed, swarm::Faults::Crashes).unwrap();
        assert!(o.violation.is_none(), "seed {seed}: {:?}", o.violation);
    }
}
