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

fn world(seed: u64) -> Simulation<Body> {
    let sector = Sector::new(4);
    let share = sector.clone();
    Sim::builder()
        .game::<Body>(Arc::new(sector))
        .nodes(4)
        .seed(seed)
        .interest()
        .initial_objects(move |n| founders_share(n, &share))
        .build()
        .expect("a simulation")
}

/// Every node's objects: (node, id, role, version, state bytes).
fn snapshot(sim: &Simulation<Body>) -> Vec<(u32, ObjectId, String, u64, Vec<u8>)> {
    let mut v = Vec::new();
    for n in sim.nodes() {
        for (id, e) in n.store().iter() {
            let mut bytes = Vec::new();
            worldmesh::GameObject::encode_state(&e.object, &mut bytes);
            v.push((n.id().0, id, format!("{:?}", e.role), e.version, bytes));
        }
    }
    v
}

#[test]
fn the_same_seed_gives_the_same_world_and_replicas_match_their_primaries() {
    let (mut a, mut b) = (world(5), world(5));
    a.run_for(Duration::from_secs(40));
    b.run_for(Duration::from_secs(40));
    let sa = snapshot(&a);
    assert!(sa == snapshot(&b), "two runs of seed 5 differ");
    let mut c = world(6);
    c.run_for(Duration::from_secs(40));
    assert!(sa != snapshot(&c), "seeds 5 and 6 gave the same world");

    // Replicas converge: a replica of an object whose primary has not changed for a second
    // (an asteroid nobody mines, an outpost nobody touches) holds exactly its state.
    let now = a.now();
    let mut checked = 0;
    for n in a.nodes() {
        for (id, e) in n.store().iter() {
            if e.role == Role::Primary {
                continue;
            }
            let primary = a
                .nodes()
                .iter()
                .find_map(|m| m.store().get(id).filter(|p| p.role == Role::Primary))
                .expect("every replica has a primary");
            if now.saturating_since(primary.updated_at) >= Duration::from_secs(1) {
                assert_eq!(
                    e.object,
                    primary.object,
                    "node {}: replica of {id:?} differs",
                    n.id().0
                );
                assert_eq!(e.version, primary.version);
                checked += 1;
            }
        }
    }
    // Seed 5 leaves 16 such replicas at 40 s; fewer than 10 would make the check hollow.
    assert!(checked >= 10, "only {checked} settled replicas to compare");
}
