//! The placement loop of paper `001` §7.4 in the simulated world (`[placement]`).

use worldmesh_core::{NodeId, Time};
use worldmesh_node::Located;
use worldmesh_replica::Role;
use worldmesh_sim::SimConfig;
use worldmesh_sim::config::{Architecture, PlacementSettings};
use worldmesh_sim::scenario::{self, Sim};

fn cfg() -> SimConfig {
    SimConfig {
        nodes: 8,
        players_per_node: 4,
        duration_s: 30.0,
        warmup_s: 1.0,
        architecture: Architecture::Broadcast,
        placement: PlacementSettings {
            enabled: true,
            interval_s: 5.0,
            ..PlacementSettings::default()
        },
        ..SimConfig::default()
    }
}

/// Mean RTT (ms) from each player's home to the node holding its primary, and the most
/// primaries any node holds.
fn mean_rtt_and_load(sim: &Sim) -> (f64, usize) {
    let (mut sum, mut n) = (0.0, 0usize);
    let mut most = 0;
    for (i, node) in sim.nodes().iter().enumerate() {
        most = most.max(node.store().primary_count());
        let (row, m) = sim.network().row_of(NodeId(i as u32)).unwrap();
        for (_, e) in node.store().iter() {
            if e.role == Role::Primary
                && let Some(home) = e.object.client_location()
            {
                sum += f64::from(m.rtt_ms(home as usize % m.len(), row));
                n += 1;
            }
        }
    }
    (sum / n.max(1) as f64, most)
}

#[test]
fn regions_move_nearer_their_players_within_capacity() {
    let c = cfg();
    let mut sim = scenario::build(&c).unwrap();
    let (before, _) = mean_rtt_and_load(&sim);
    let largest = sim
        .nodes()
        .iter()
        .map(|n| n.store().primary_count())
        .max()
        .unwrap();
    sim.run_until(Time::from_secs_f64(c.duration_s));
    let (after, most) = mean_rtt_and_load(&sim);
    assert!(sim.region_migrations() > 0);
    assert!(
        after < before * 0.9,
        "players' mean RTT to their host: {before:.1} -> {after:.1} ms"
    );
    // Capacity: a node holds at most capacity_factor x the largest initial region, plus
    // what its players spawned since (missiles).
    assert!(
        most <= 2 * largest + 16,
        "{most} primaries on one node (largest region {largest})"
    );
}

#[test]
fn placement_runs_are_deterministic() {
    let c = SimConfig {
        duration_s: 12.0,
        ..cfg()
    };
    let a = scenario::run(&c, &mut |_| {}).unwrap().to_json();
    let b = scenario::run(&c, &mut |_| {}).unwrap().to_json();
    assert_eq!(a, b);
    assert!(
        a.contains("\"region_migrations\""),
        "the report counts migrations"
    );
}
