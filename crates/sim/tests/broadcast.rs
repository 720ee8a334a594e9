//! End-to-end simulations of the broadcast architecture.

use std::time::Duration;
use worldmesh_core::{NodeId, Time};
use worldmesh_game::wander::Bot;
use worldmesh_replica::Role;
use worldmesh_sim::network::PartitionSpec;
use worldmesh_sim::{SimConfig, Simulation, scenario};

fn cfg(nodes: usize, secs: f64) -> SimConfig {
    SimConfig {
        nodes,
        bots_per_node: 4,
        duration_s: secs,
        ..SimConfig::default()
    }
}

/// Every node holds a replica of every other node's primaries, and each replica is at
/// most `one-way delay (+ jitter) + frame_slack frames` older than its primary.
fn assert_fresh(sim: &Simulation<Bot>, frame: Duration, frame_slack: u32) {
    let now = sim.now();
    for a in sim.nodes() {
        for b in sim.nodes() {
            if a.id() == b.id() {
                continue;
            }
            let bound = sim.network().max_delay(b.id(), a.id()) + frame * frame_slack;
            for (id, p) in b.store().iter().filter(|(_, e)| e.role == Role::Primary) {
                let r = a
                    .store()
                    .get(id)
                    .unwrap_or_else(|| panic!("{} lacks {id}", a.id()));
                assert_eq!(r.role, Role::Replica { primary: b.id() });
                let age = now - r.state_time;
                assert!(age <= bound, "{} holds {id} {age:?} old, bound {bound:?}", a.id());
                assert!(r.version <= p.version);
            }
        }
    }
}

#[test]
fn sixteen_nodes_converge_with_bounded_staleness() {
    let c = cfg(16, 10.0);
    let mut sim = scenario::build(&c).unwrap();
    sim.run_until(Time::from_secs_f64(10.0));
    assert_fresh(&sim, c.frame_interval(), 1);
    let r = scenario::report(&c, &sim);
    assert_eq!(r.coverage, 1.0);
    assert_eq!(r.summary.objects_per_node, 64.0);
    // 16 nodes × 15 peers × ~100 frames, one datagram each (4 bots fit one datagram).
    let frames: u64 = sim.nodes().iter().map(|n| n.stats().frames).sum();
    assert_eq!(r.network.sent, frames * 15);
    // Nothing lost; only datagrams still in flight at the end are undelivered.
    assert_eq!((r.network.lost, r.network.partitioned), (0, 0));
    let max_delay = (0..16u32)
        .flat_map(|a| (0..16u32).map(move |b| (a, b)))
        .map(|(a, b)| sim.network().max_delay(NodeId(a), NodeId(b)))
        .max()
        .unwrap();
    let in_flight_bound = 16 * 15 * (max_delay.as_millis() as u64 / 100 + 1);
    assert!(r.network.delivered <= r.network.sent && r.network.sent - r.network.delivered <= in_flight_bound);
    assert!(r.summary.out_kbps_mean > 0.0 && r.summary.out_kbps_p95_mean >= r.summary.out_kbps_mean * 0.9);
}

#[test]
fn same_seed_gives_byte_identical_reports() {
    let mut c = cfg(8, 3.0);
    c.network.loss = 0.05;
    c.network.jitter_ms = 5.0;
    c.network.duplicate = 0.02;
    let a = scenario::run(&c, &mut |_| {}).unwrap().to_json();
    let b = scenario::run(&c, &mut |_| {}).unwrap().to_json();
    assert_eq!(a, b);
    c.seed += 1;
    let d = scenario::run(&c, &mut |_| {}).unwrap().to_json();
    assert_ne!(a, d, "another seed must give another run");
}

#[test]
fn loss_and_partition_are_counted_and_heal() {
    let mut c = cfg(8, 10.0);
    c.network.loss = 0.1;
    c.network.jitter_ms = 10.0;
    c.network.partitions = vec![PartitionSpec {
        from_s: 2.0,
        until_s: 5.0,
        nodes: vec![0, 1],
    }];
    let mut sim = scenario::build(&c).unwrap();

    // Inside the partition, after the replica TTL (2 s): the two sides lost each other.
    sim.run_until(Time::from_secs_f64(4.9));
    let n0 = &sim.nodes()[0];
    assert!(
        n0.store()
            .get(worldmesh_core::ObjectId::new(NodeId(1), 0))
            .is_some(),
        "same side still replicated"
    );
    assert!(
        n0.store().iter().all(|(id, _)| id.origin.0 <= 1),
        "other side expired on node 0"
    );
    assert!(
        sim.nodes()[5].store().iter().all(|(id, _)| id.origin.0 >= 2),
        "node 5 lost nodes 0 and 1"
    );
    let stats = sim.network_stats().clone();
    assert!(stats.partitioned > 0 && stats.lost > 0);
    let lost_fraction = stats.lost as f64 / (stats.sent - stats.partitioned) as f64;
    assert!((0.07..0.13).contains(&lost_fraction), "{lost_fraction}");

    // Healed at 5 s: everyone converges again (loss may cost a few frames of freshness).
    sim.run_until(Time::from_secs_f64(10.0));
    assert_fresh(&sim, c.frame_interval(), 6);
    assert_eq!(scenario::report(&c, &sim).coverage, 1.0);
    assert!(
        sim.nodes()
            .iter()
            .any(|n| n.replicas().stats().replicas_dropped > 0)
    );
}

#[test]
fn crashed_node_disappears_from_the_others() {
    let c = cfg(4, 5.0);
    let mut sim = scenario::build(&c).unwrap();
    sim.run_until(Time::from_secs_f64(1.0));
    sim.crash(NodeId(3));
    sim.run_until(Time::from_secs_f64(4.0));
    for n in &sim.nodes()[..3] {
        assert!(n.store().iter().all(|(id, _)| id.origin != NodeId(3)));
        assert_eq!(n.store().replica_count(), 8);
    }
}

#[test]
fn more_nodes_than_matrix_rows_still_run() {
    let mut c = cfg(12, 2.0);
    c.network.latency = "uniform:40".into();
    let r = scenario::run(&c, &mut |_| {}).unwrap();
    assert_eq!(r.coverage, 1.0);
    // 40 ms RTT, ≤ 5 ms access each side: staleness ≤ 20 + 10 + one frame.
    assert!(
        r.summary.staleness_max_ms <= 130.0,
        "{}",
        r.summary.staleness_max_ms
    );
}
