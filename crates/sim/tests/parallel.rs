//! The engine's parallel rounds give the serial engine's run, byte for byte (issue 18
//! item 3): the same report and every node event in the same order, at the same time, on
//! 1, 2 and 3 threads, for both distributed locators, a lossy run with jitter and
//! duplicates, the broadcast architecture, and the oracle locator: with a delivery delay
//! it runs in rounds no longer than that delay, fed at the merge; with none (the default)
//! on one thread whatever is asked, since its discoveries then reach any node at once.

use worldmesh_core::{NodeId, Time};
use worldmesh_node::Event;
use worldmesh_sim::config::Architecture;
use worldmesh_sim::{SimConfig, scenario};

/// What a run is judged by: its report as JSON, every node event with its time and node,
/// the engine events taken, and the parallel rounds run (rounds, events in them).
struct Run {
    report: String,
    events: Vec<(Time, NodeId, Event)>,
    engine_events: u64,
    rounds: (u64, u64),
}

fn run(cfg: &SimConfig, threads: usize) -> Run {
    let mut sim = scenario::build(cfg).expect("config builds").with_threads(threads);
    sim.record_events();
    let mut events = Vec::new();
    let end = Time::from_secs_f64(cfg.duration_s);
    let mut t = Time::ZERO;
    while t < end {
        // Uneven slices, so rounds also end at `until`.
        t = (t + std::time::Duration::from_millis(730)).min(end);
        sim.run_until(t);
        events.extend(sim.take_events());
    }
    let report = scenario::report(cfg, &sim);
    Run {
        report: serde_json::to_string(&report).expect("report serialises"),
        events,
        engine_events: sim.engine_events(),
        rounds: sim.parallel_rounds(),
    }
}

fn config(nodes: usize, locator: &str) -> SimConfig {
    let mut cfg = SimConfig {
        nodes,
        players_per_node: 4,
        duration_s: 4.0,
        warmup_s: 1.0,
        seed: 7,
        ..SimConfig::default()
    };
    cfg.locator.kind = locator.into();
    cfg
}

/// Runs `cfg` on 1, 2 and 3 threads and checks the three runs are one; returns the
/// two-thread run's rounds.
fn same_on_any_thread_count(cfg: &SimConfig) -> (u64, u64) {
    let one = run(cfg, 1);
    assert_eq!(one.rounds, (0, 0), "one thread runs no rounds");
    assert!(
        one.engine_events > 1000,
        "the run does something: {} events",
        one.engine_events
    );
    let mut two_rounds = (0, 0);
    for threads in [2, 3] {
        let many = run(cfg, threads);
        assert_eq!(
            many.engine_events, one.engine_events,
            "{threads} threads: engine events"
        );
        assert_eq!(
            many.events.len(),
            one.events.len(),
            "{threads} threads: node events"
        );
        for (k, (a, b)) in one.events.iter().zip(&many.events).enumerate() {
            assert_eq!(
                format!("{a:?}"),
                format!("{b:?}"),
                "{threads} threads: node event {k} differs"
            );
        }
        assert!(many.report == one.report, "{threads} threads: the reports differ");
        if threads == 2 {
            two_rounds = many.rounds;
        }
    }
    two_rounds
}

#[test]
fn distributed_locators_give_the_serial_run_on_any_thread_count() {
    for locator in ["dht", "rangedht"] {
        let cfg = config(20, locator);
        let (rounds, in_rounds) = same_on_any_thread_count(&cfg);
        let total = run(&cfg, 1).engine_events;
        assert!(rounds > 0, "{locator}: rounds ran");
        // PlanetLab's sites are tens of ms apart: most events run in rounds, many a round.
        assert!(
            in_rounds * 2 > total && in_rounds > rounds * 20,
            "{locator}: {in_rounds} of {total} events in {rounds} rounds"
        );
    }
}

#[test]
fn a_lossy_jittery_run_with_duplicates_is_the_serial_run() {
    let mut cfg = config(16, "dht");
    cfg.network.loss = 0.05;
    cfg.network.duplicate = 0.02;
    cfg.network.jitter_ms = 3.0;
    let (rounds, _) = same_on_any_thread_count(&cfg);
    assert!(rounds > 0);
    let r = run(&cfg, 2).report;
    let v: serde_json::Value = serde_json::from_str(&r).expect("json");
    assert!(
        v["network"]["lost"].as_u64().unwrap_or(0) > 0,
        "datagrams were lost"
    );
    assert!(
        v["network"]["duplicated"].as_u64().unwrap_or(0) > 0,
        "datagrams were duplicated"
    );
}

#[test]
fn broadcast_and_the_oracle_locator_give_the_serial_run() {
    let mut cfg = config(12, "oracle");
    let (rounds, _) = same_on_any_thread_count(&cfg);
    assert_eq!(rounds, 0, "the oracle locator without a delay runs on one thread");
    cfg.architecture = Architecture::Broadcast;
    let (rounds, _) = same_on_any_thread_count(&cfg);
    assert!(rounds > 0, "broadcast runs in rounds");
}

#[test]
fn the_oracle_locator_with_a_delay_runs_in_rounds_with_the_serial_run() {
    let mut cfg = config(20, "oracle");
    // Shorter than the plan's window (tens of ms between PlanetLab's regions), so it is
    // the delay that ends the rounds, and discoveries of one round are due in the next.
    cfg.locator.delay_ms = 7.0;
    let (rounds, in_rounds) = same_on_any_thread_count(&cfg);
    let total = run(&cfg, 1).engine_events;
    assert!(
        in_rounds * 2 > total && in_rounds > rounds * 20,
        "{in_rounds} of {total} events in {rounds} rounds"
    );
    // Only the world's own events run outside the rounds: the metrics sample and the
    // oracle's tick, each once a frame (10 Hz for 4 s), and events tied with them. The
    // discoveries — thousands — run inside: were they left to serial steps, this fails.
    assert!(
        total - in_rounds <= 100,
        "{} events outside the rounds",
        total - in_rounds
    );
    // At most 7 ms each: more rounds than the 4-s run has 7-ms slices would be odd,
    // fewer than a third of them means the delay did not bound the rounds.
    assert!(rounds > 4000 / 7 / 3, "{rounds} rounds");
    // The discoveries are a real part of the run: the oracle told the nodes of objects,
    // and they replicated them (a run without discoveries replicates nothing).
    let v: serde_json::Value = serde_json::from_str(&run(&cfg, 2).report).expect("json");
    assert!(
        v["coverage"].as_f64().unwrap_or(0.0) > 0.0,
        "replicas were made: coverage {}",
        v["coverage"]
    );
}
