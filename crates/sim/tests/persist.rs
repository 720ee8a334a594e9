//! Persistence in the simulator (issue 19): nodes persist to modelled stores
//! (`Simulation::with_persistence`), the whole world crashes, every node restarts from its
//! store as a new generation, and every persisted object is back exactly once, at most one
//! checkpoint interval old — deterministically.

use std::collections::BTreeMap;
use std::sync::Arc;

use worldmesh_core::{Durability, NodeId, ObjectId, Time};
use worldmesh_game::GameMap;
use worldmesh_node::membership::Member;
use worldmesh_replica::{GameObject, Role};
use worldmesh_sim::config::{Architecture, SimConfig};
use worldmesh_sim::scenario::{self, Sim};

const CHECKPOINT: u32 = 5;

fn world() -> SimConfig {
    let mut cfg = SimConfig {
        nodes: 4,
        players_per_node: 4,
        duration_s: 10.0,
        architecture: Architecture::Colyseus,
        ..SimConfig::default()
    };
    cfg.network.latency = "uniform:20".into();
    cfg.cluster.membership = true;
    cfg.cluster.backups = 1;
    cfg.cluster.checkpoint_frames = CHECKPOINT;
    cfg
}

/// Persisted primaries (not ephemeral) of the live nodes: id → (class, version).
fn persisted(sim: &Sim) -> BTreeMap<ObjectId, (Durability, u64, usize)> {
    let mut m = BTreeMap::new();
    for n in sim.nodes() {
        if !sim.is_up(n.id()) {
            continue;
        }
        for (id, e) in n.store().iter() {
            let class = e.object.durability();
            if e.role == Role::Primary && class != Durability::Ephemeral {
                m.entry(id).or_insert((class, e.version, 0)).2 += 1;
            }
        }
    }
    m
}

struct Run {
    before: BTreeMap<ObjectId, (Durability, u64, usize)>,
    after: BTreeMap<ObjectId, (Durability, u64, usize)>,
    stored_versions: BTreeMap<ObjectId, u64>,
    stores: Vec<worldmesh_store::Recovered>,
    lost: u64,
}

/// Runs the world to `crash_s`, crashes every node, restarts each from its store, and runs
/// `settle_s` more.
fn crash_all_and_restart(cfg: &SimConfig, crash_s: f64, settle_s: f64) -> Run {
    let mut sim = scenario::build(cfg).unwrap();
    sim.run_until(Time::from_secs_f64(crash_s));
    let before = persisted(&sim);
    for i in 0..cfg.nodes {
        sim.crash(NodeId(i as u32));
    }
    let stores: Vec<_> = (0..cfg.nodes)
        .map(|i| sim.store(NodeId(i as u32)).expect("persisting").load())
        .collect();
    let stored_versions = stores
        .iter()
        .flat_map(|r| r.objects.iter().map(|o| (o.id, o.version)))
        .collect();
    let map = Arc::new(GameMap::generate(
        &cfg.game,
        cfg.nodes * cfg.players_per_node,
        cfg.seed,
    ));
    for (i, rec) in stores.iter().enumerate() {
        let id = NodeId(i as u32);
        let mut n = scenario::new_member(cfg, Arc::clone(&map), id, 1, sim.now()).unwrap();
        n.recover(sim.now(), rec.clone()).expect("recover");
        sim.restart(n);
        if i > 0 {
            sim.with_node(id, |n, now| n.join(now, &[Member::simulated(NodeId(0), 1)]));
        }
    }
    sim.run_until(Time::from_secs_f64(crash_s + settle_s));
    // Batches of the crashed processes are counted as they come due.
    let lost = sim.persist_stats().expect("persisting").lost;
    Run {
        before,
        after: persisted(&sim),
        stored_versions,
        stores,
        lost,
    }
}

#[test]
fn a_whole_world_crashed_comes_back_from_its_stores_once_and_at_most_a_checkpoint_old() {
    let r = crash_all_and_restart(&world(), 4.23, 4.0);
    let items = r
        .before
        .values()
        .filter(|(c, ..)| *c == Durability::Durable)
        .count();
    let avatars = r
        .before
        .values()
        .filter(|(c, ..)| *c == Durability::Checkpointed)
        .count();
    assert!(items > 0 && avatars == 16, "{items} items, {avatars} avatars");
    for (id, (class, version, _)) in &r.before {
        let stored = r
            .stored_versions
            .get(id)
            .unwrap_or_else(|| panic!("{id} ({class:?}) not in any store"));
        // One version per frame at most: the store is behind by the frames since the last
        // checkpoint applied (items never change).
        let behind = version - stored;
        match class {
            Durability::Durable => assert_eq!(behind, 0, "{id}"),
            _ => assert!(behind <= u64::from(CHECKPOINT), "{id}: {behind} versions behind"),
        }
        let (_, _, holders) = r
            .after
            .get(id)
            .unwrap_or_else(|| panic!("{id} did not come back"));
        assert_eq!(*holders, 1, "{id} has {holders} primaries after the restart");
    }
    // Nothing ephemeral was stored.
    let stored: usize = r.stores.iter().map(|s| s.objects.len()).sum();
    assert_eq!(stored, r.before.len());
}

#[test]
fn a_slow_store_loses_only_unapplied_batches_and_still_brings_every_object_back() {
    let mut cfg = world();
    // Slower than a frame: batches queue behind each other, and the crash loses some.
    cfg.cluster.store_latency_ms = 250.0;
    let r = crash_all_and_restart(&cfg, 4.23, 4.0);
    assert!(r.lost > 0, "a crash with batches queued loses them");
    for id in r.before.keys() {
        assert_eq!(r.after.get(id).map(|a| a.2), Some(1), "{id}");
    }
}

#[test]
fn the_same_seed_gives_the_same_stores_and_world() {
    let a = crash_all_and_restart(&world(), 3.1, 2.0);
    let b = crash_all_and_restart(&world(), 3.1, 2.0);
    assert_eq!(a.stores, b.stores);
    assert_eq!(a.after, b.after);
}
