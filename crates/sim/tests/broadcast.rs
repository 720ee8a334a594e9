//! End-to-end simulations of the broadcast architecture on the model workload.

use std::collections::BTreeMap;
use std::time::Duration;
use worldmesh_core::{NodeId, ObjectId, Time};
use worldmesh_game::model::MISSILE;
use worldmesh_replica::{GameObject, Role};
use worldmesh_sim::SimConfig;
use worldmesh_sim::config::Architecture;
use worldmesh_sim::network::PartitionSpec;
use worldmesh_sim::scenario::{self, Sim};

fn cfg(nodes: usize, secs: f64) -> SimConfig {
    SimConfig {
        nodes,
        players_per_node: 4,
        duration_s: secs,
        warmup_s: 1.0,
        architecture: Architecture::Broadcast,
        ..SimConfig::default()
    }
}

/// When each primary produced each version, sampled every `STEP` of a run.
struct Timeline(BTreeMap<ObjectId, Vec<(Time, u64)>>);

const STEP: Duration = Duration::from_millis(10);

impl Timeline {
    fn run(sim: &mut Sim, until: Time, tl: &mut Timeline) {
        while sim.now() < until {
            let t = (sim.now() + STEP).min(until);
            sim.run_until(t);
            for n in sim.nodes() {
                for (id, e) in n.store().iter().filter(|(_, e)| e.role == Role::Primary) {
                    let v = tl.0.entry(id).or_default();
                    if v.last().is_none_or(|(_, ver)| *ver != e.version) {
                        v.push((t, e.version));
                    }
                }
            }
        }
    }

    /// The newest version of `id` produced at or before `t`.
    fn version_at(&self, id: ObjectId, t: Time) -> Option<u64> {
        self.0
            .get(&id)?
            .iter()
            .take_while(|(at, _)| *at <= t)
            .last()
            .map(|(_, v)| *v)
    }
}

/// Every node holds a replica of every other node's players and items, and holds at least
/// every version its primary produced more than `one-way delay (+ jitter) + slack frames`
/// ago. (Missiles live too briefly to be checked this way.)
fn assert_fresh(sim: &Sim, tl: &Timeline, frame: Duration, frame_slack: u32) {
    let now = sim.now();
    for a in sim.nodes() {
        for b in sim.nodes() {
            if a.id() == b.id() {
                continue;
            }
            let bound = sim.network().max_delay(b.id(), a.id()) + frame * frame_slack + STEP;
            for (id, p) in b
                .store()
                .iter()
                .filter(|(_, e)| e.role == Role::Primary && e.object.kind() != MISSILE)
            {
                let r = a
                    .store()
                    .get(id)
                    .unwrap_or_else(|| panic!("{} lacks {id}", a.id()));
                assert_eq!(r.role, Role::Replica { primary: b.id() });
                assert!(r.version <= p.version);
                if now > Time::ZERO + bound
                    && let Some(due) =
                        tl.version_at(id, Time::from_micros(now.as_micros() - bound.as_micros() as u64))
                {
                    assert!(
                        r.version >= due,
                        "{} holds {id} v{} but v{due} is older than {bound:?}",
                        a.id(),
                        r.version
                    );
                }
            }
        }
    }
}

#[test]
fn sixteen_nodes_converge_with_bounded_staleness() {
    let c = cfg(16, 10.0);
    let mut sim = scenario::build(&c).unwrap();
    let mut tl = Timeline(BTreeMap::new());
    Timeline::run(&mut sim, Time::from_secs_f64(10.0), &mut tl);
    assert_fresh(&sim, &tl, c.frame_interval(), 1);
    let r = scenario::report(&c, &sim);
    assert_eq!((r.network.lost, r.network.partitioned), (0, 0));
    assert!(r.summary.out_kbps_mean > 0.0);
    // Broadcast holds everything: no required replica is ever missing after 400 ms.
    assert_eq!(r.metrics.missing[2], 0.0, "{:?}", r.metrics);
}

#[test]
fn same_seed_gives_byte_identical_reports() {
    let mut c = cfg(8, 3.0);
    c.network.loss = 0.05;
    c.network.jitter_ms = 5.0;
    c.network.duplicate = 0.02;
    c.architecture = Architecture::Colyseus;
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

    // Inside the partition, after the peer timeout (2 s): the two sides lost each other.
    sim.run_until(Time::from_secs_f64(4.9));
    let n0 = &sim.nodes()[0];
    assert!(
        n0.store().iter().any(|(id, _)| id.origin == NodeId(1)),
        "same side still replicated"
    );
    assert!(
        n0.store().iter().all(|(id, _)| id.origin.0 <= 1),
        "other side dropped on node 0"
    );
    assert!(
        sim.nodes()[5].store().iter().all(|(id, _)| id.origin.0 >= 2),
        "node 5 lost nodes 0 and 1"
    );
    let stats = sim.network_stats().clone();
    assert!(stats.partitioned > 0 && stats.lost > 0);
    let lost_fraction = stats.lost as f64 / (stats.sent - stats.partitioned) as f64;
    assert!((0.07..0.13).contains(&lost_fraction), "{lost_fraction}");

    // Healed at 5 s: everyone converges again. Under 10% loss the last version of an
    // object that stopped changing may need resends (every 600 ms): allow two of them.
    let mut tl = Timeline(BTreeMap::new());
    Timeline::run(&mut sim, Time::from_secs_f64(10.0), &mut tl);
    assert_fresh(&sim, &tl, c.frame_interval(), 14);
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
    }
}

#[test]
fn more_nodes_than_matrix_rows_still_run() {
    let mut c = cfg(12, 3.0);
    c.network.latency = "uniform:40".into();
    let mut sim = scenario::build(&c).unwrap();
    let mut tl = Timeline(BTreeMap::new());
    Timeline::run(&mut sim, Time::from_secs_f64(3.0), &mut tl);
    // 40 ms RTT, ≤ 5 ms access each side: within one-way delay + one frame.
    assert_fresh(&sim, &tl, c.frame_interval(), 1);
}
