//! The tutorial's game test (`docs/guide/tutorial.md`, "Test it on the simulator").

// ANCHOR: sim_test
use std::sync::Arc;
use std::time::Duration;

use beacons::{Thing, beacons_lit, field, founders_share};
use worldmesh::Role;
use worldmesh::sim::Sim;

#[test]
fn walkers_light_beacons_on_three_simulated_nodes() {
    let mut sim = Sim::builder()
        .game::<Thing>(Arc::new(field()))
        .nodes(3)
        .seed(7)
        .initial_objects(|node| founders_share(node, &field()))
        .build()
        .expect("a simulation");
    sim.run_for(Duration::from_secs(60));

    // Broadcast (the builder's default): every node holds all 12 objects, its own 4 as
    // primaries and the others' 8 as replicas.
    for node in sim.nodes() {
        assert_eq!(node.store().len(), 12);
        assert_eq!(node.store().primary_ids().len(), 4);
    }
    // The walkers lit the beacons: each light a write sent to the beacon's primary.
    let primaries = sim
        .nodes()
        .iter()
        .flat_map(|n| n.store().iter())
        .filter(|(_, e)| e.role == Role::Primary)
        .map(|(_, e)| &e.object);
    let (beacons, lit) = beacons_lit(primaries);
    assert_eq!(beacons, 3);
    assert!(lit > 0, "no beacon was lit in a minute");
}
// ANCHOR_END: sim_test
