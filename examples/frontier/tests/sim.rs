//! Frontier on the simulator: ships mine and build, swarms roam, and the outposts players
//! built survive the crash of the node that held them.

use std::sync::Arc;
use std::time::Duration;

use frontier::{Body, Census, Sector, founders_share, live_primaries as primaries, outposts};
use worldmesh::sim::{Sim, Simulation};
use worldmesh::{NodeId, ObjectId, Role};

#[test]
fn outposts_survive_the_crash_of_their_node() {
    let sector = Sector::new(4);
    let share = sector.clone();
    let mut sim = Sim::builder()
        .game::<Body>(Arc::new(sector.clone()))
        .nodes(4)
        .seed(3)
        .interest()
        .membership(1)
        .initial_objects(move |n| founders_share(n, &share))
        .build()
        .expect("a simulation");
    let start = Census::of(primaries(&sim).into_iter().map(|(_, b)| b));
    let drone_regions = |sim: &Simulation<Body>| -> Vec<u32> {
        primaries(sim)
            .into_iter()
            .filter(|(_, b)| matches!(b, Body::Drone { .. }))
            .map(|(_, b)| sector.region_of(worldmesh::GameObject::position(b)))
            .collect()
    };
    let regions_before = drone_regions(&sim);
    sim.run_for(Duration::from_secs(30));
    // The outposts node 2 holds as primaries, and every outpost standing now.
    let on_victim: Vec<ObjectId> = sim.nodes()[2]
        .store()
        .iter()
        .filter(|(_, e)| e.role == Role::Primary && matches!(e.object, Body::Outpost { .. }))
        .map(|(id, _)| id)
        .collect();
    let before = outposts(primaries(&sim));
    assert!(!on_victim.is_empty(), "node 2 built no outpost in 30 s");
    sim.crash(NodeId(2));
    sim.run_for(Duration::from_secs(30));
    let after = outposts(primaries(&sim));
    let lost: Vec<_> = before.difference(&after).collect();
    assert!(lost.is_empty(), "outposts lost with node 2: {lost:?}");
    let end = Census::of(primaries(&sim).into_iter().map(|(_, b)| b));
    // Node 2's ships, asteroids and drones were adopted too (all Checkpointed or Durable,
    // none despawns); ore was mined and stocked; the swarms moved between regions.
    assert_eq!(
        (end.ships, end.drones, end.asteroids.0),
        (start.ships, start.drones, start.asteroids.0)
    );
    assert!(end.asteroids.1 < start.asteroids.1);
    assert!(end.outposts.2 > 0, "no ore was ever deposited");
    assert_ne!(drone_regions(&sim), regions_before);
}
