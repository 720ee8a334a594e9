//! A durable object whose holder is killed again and again (issue 19), in the simulator:
//! the pattern the real-process crash trials (`crates/server/tests/crash_trials.rs`) run.
//! Four nodes each run three writers that write to one `Durable` ledger every frame; each
//! cycle crashes the node holding the ledger, restarts it from its store before the others
//! declare it failed (its new generation's arrival does), and lets it rejoin the running
//! world with deferred recovery. The ledger moves from adopter to adopter, often to a node
//! still inside its own deferred-recovery window, and its epoch passes the 16 a fresh node
//! once refused to follow. At the end no write may be in the ledger twice, every write
//! of every writer live at the end — restarted ones included — must be in it, and no node
//! may have given a write up or still wait for an acknowledgement.
//!
//! Before the fixes it guards, seed 1 applied 44 writes twice (a restarted node that knew
//! no epoch of the ledger refused its holder's epoch-17 notice, adopted it under epoch 1,
//! and a stale copy won) and seed 9 lost 16 acknowledged writes of each writer on a
//! restarted node (its new incarnation numbered writes from 1 again, and the adopted log
//! took them for its previous incarnation's). `SEEDS=N` runs more seeds and `CYCLES=N`
//! longer trials (seeds 1–200 of 100 cycles pass).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use worldmesh_core::{Aabb, DetRng, Durability, LatencyMatrix, NodeId, Point3, Time};
use worldmesh_node::membership::{Member, MembershipConfig};
use worldmesh_node::{Mode, Node, NodeConfig, PersistConfig};
use worldmesh_replica::{GameObject, Role, StateError, ThinkContext};
use worldmesh_sim::{NetworkConfig, NetworkModel, Simulation};

const NODES: u32 = 4;

/// Who issued a write: writer (node, slot) and the (node, generation) that ran it.
type Stream = (u32, u32, u32, u32);

struct World {
    /// Each node's current generation (a writer numbers its writes anew in each).
    generations: Mutex<BTreeMap<u32, u32>>,
    quiet: AtomicBool,
}

#[derive(Clone, Debug, PartialEq, bitcode::Encode, bitcode::Decode)]
enum Obj {
    /// Every write applied, as sorted disjoint ranges of sequence numbers per stream (a
    /// list of every write would outgrow a datagram within a hundred cycles), and the
    /// writes given twice.
    Ledger {
        applied: Vec<(Stream, Vec<(u32, u32)>)>,
        twice: Vec<(Stream, u32)>,
    },
    Writer {
        me: u32,
        slot: u32,
        host: (u32, u32),
        issued: u32,
    },
}

impl GameObject for Obj {
    type World = World;
    type Write = (Stream, u32);

    fn think(&mut self, ctx: &mut ThinkContext<'_, Self>) {
        let Obj::Writer {
            me,
            slot,
            host,
            issued,
        } = self
        else {
            return;
        };
        let generation = ctx.world.generations.lock().expect("lock")[&ctx.node.0];
        if *host != (ctx.node.0, generation) {
            *host = (ctx.node.0, generation);
            *issued = 0;
        }
        if ctx.world.quiet.load(Ordering::Relaxed) {
            return;
        }
        let ledger = ctx
            .store
            .iter()
            .find(|(_, e)| matches!(e.object, Obj::Ledger { .. }))
            .map(|(id, _)| id);
        if let Some(ledger) = ledger {
            ctx.write(ledger, ((*me, *slot, host.0, host.1), *issued));
            *issued += 1;
        }
    }
    fn position(&self) -> Point3 {
        Point3::new(0.0, 0.0, 0.0)
    }
    fn interest(&self, _world: &Self::World) -> Option<Aabb> {
        None
    }
    fn apply_write(&mut self, (stream, k): &(Stream, u32)) {
        if let Obj::Ledger { applied, twice } = self {
            let i = match applied.iter().position(|(s, _)| s == stream) {
                Some(i) => i,
                None => {
                    applied.push((*stream, Vec::new()));
                    applied.len() - 1
                }
            };
            if !insert(&mut applied[i].1, *k) {
                twice.push((*stream, *k));
            }
        }
    }
    fn durability(&self) -> Durability {
        match self {
            Obj::Ledger { .. } => Durability::Durable,
            Obj::Writer { .. } => Durability::Checkpointed,
        }
    }
    fn encode_state(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&bitcode::encode(self));
    }
    fn decode_state(b: &[u8]) -> Result<Self, StateError> {
        bitcode::decode(b).map_err(StateError::from)
    }
}

/// Inserts `k` in sorted, disjoint half-open ranges; false if it was there.
fn insert(ranges: &mut Vec<(u32, u32)>, k: u32) -> bool {
    let i = ranges.partition_point(|r| r.1 < k);
    if i < ranges.len() && ranges[i].0 <= k && k < ranges[i].1 {
        return false;
    }
    if i < ranges.len() && ranges[i].1 == k {
        ranges[i].1 = k + 1;
        if i + 1 < ranges.len() && ranges[i + 1].0 == k + 1 {
            ranges[i].1 = ranges[i + 1].1;
            ranges.remove(i + 1);
        }
    } else if i < ranges.len() && ranges[i].0 == k + 1 {
        ranges[i].0 = k;
    } else {
        ranges.insert(i, (k, k + 1));
    }
    true
}

/// True if `k` is in the ranges.
fn contains(ranges: &[(u32, u32)], k: u32) -> bool {
    let i = ranges.partition_point(|r| r.1 <= k);
    i < ranges.len() && ranges[i].0 <= k
}

fn config(id: u32, generation: u32, peers: Vec<NodeId>) -> NodeConfig {
    let mut c = NodeConfig::new(NodeId(id), peers, 11).with_mode(Mode::Broadcast);
    c.frame_interval = Duration::from_millis(50);
    c.generation = generation;
    c.membership = Some(MembershipConfig::lan());
    c.replica.backups = 1;
    c.persist = Some(PersistConfig { checkpoint_every: 5 });
    c
}

fn holder(sim: &Simulation<Obj>) -> Option<NodeId> {
    sim.nodes().iter().filter(|n| sim.is_up(n.id())).find_map(|n| {
        n.store()
            .iter()
            .any(|(_, e)| e.role == Role::Primary && matches!(e.object, Obj::Ledger { .. }))
            .then(|| n.id())
    })
}

/// Runs `cycles` kill-and-restart cycles; returns the writes applied twice and the
/// writers (live at the end) whose writes are not all in the ledger.
fn trial(seed: u64, cycles: usize) -> (Vec<(Stream, u32)>, Vec<String>) {
    let mut draw = DetRng::new(seed);
    let world = Arc::new(World {
        generations: Mutex::new((0..NODES).map(|i| (i, 0)).collect()),
        quiet: AtomicBool::new(false),
    });
    let all: Vec<NodeId> = (0..NODES).map(NodeId).collect();
    let nodes: Vec<Node<Obj>> = (0..NODES)
        .map(|i| {
            let peers = all.iter().copied().filter(|p| p.0 != i).collect();
            let mut n = Node::new(config(i, 0, peers), Arc::clone(&world), Time::ZERO);
            if i == 0 {
                n.spawn(
                    Time::ZERO,
                    Obj::Ledger {
                        applied: Vec::new(),
                        twice: Vec::new(),
                    },
                );
            }
            for slot in 0..3 {
                n.spawn(
                    Time::ZERO,
                    Obj::Writer {
                        me: i,
                        slot,
                        host: (u32::MAX, 0),
                        issued: 0,
                    },
                );
            }
            n
        })
        .collect();
    let net_cfg = NetworkConfig {
        latency: "uniform:2".into(),
        ..NetworkConfig::default()
    };
    let net = NetworkModel::new(
        LatencyMatrix::uniform(NODES as usize, 2.0),
        NODES as usize,
        &net_cfg,
        &DetRng::new(seed ^ 0x6e6574),
    );
    let mut sim = Simulation::new(nodes, net).with_persistence(Duration::from_millis(2));
    sim.record_events();
    sim.run_until(Time::from_secs_f64(1.5));
    for _ in 0..cycles {
        let t = sim.now() + Duration::from_secs_f64(draw.range_f64(0.3, 1.5));
        sim.run_until(t);
        let victim = match holder(&sim) {
            Some(h) if draw.chance(0.8) => h,
            _ => NodeId(draw.below(u64::from(NODES)) as u32),
        };
        sim.crash(victim);
        let t = sim.now() + Duration::from_secs_f64(draw.range_f64(0.4, 3.5));
        sim.run_until(t);
        let generation = {
            let mut g = world.generations.lock().expect("lock");
            let e = g.entry(victim.0).or_default();
            *e += 1;
            *e
        };
        let rec = sim.store(victim).expect("persisting").load();
        let mut n = Node::new(
            config(victim.0, generation, Vec::new()),
            Arc::clone(&world),
            sim.now(),
        );
        n.recover_after_join(sim.now(), rec, Duration::from_secs(3))
            .expect("recover");
        sim.restart(n);
        let via = all.iter().copied().find(|p| *p != victim).expect("another node");
        sim.with_node(victim, |n, now| n.join(now, &[Member::simulated(via, 0)]));
        let t = sim.now() + Duration::from_millis(200);
        sim.run_until(t);
    }
    world.quiet.store(true, Ordering::Relaxed);
    let t = sim.now() + Duration::from_secs(8);
    sim.run_until(t);

    let mut ledgers = Vec::new();
    for n in sim.nodes() {
        for (_, e) in n.store().iter() {
            if let (Role::Primary, Obj::Ledger { applied, twice }) = (e.role, &e.object) {
                ledgers.push((applied.clone(), twice.clone()));
            }
        }
    }
    assert_eq!(
        ledgers.len(),
        1,
        "seed {seed}: {} primaries of the ledger",
        ledgers.len()
    );
    let (applied, twice) = ledgers.remove(0);
    let applied: BTreeMap<Stream, Vec<(u32, u32)>> = applied.into_iter().collect();
    let mut missing = Vec::new();
    for n in sim.nodes() {
        let st = n.replicas().stats();
        if st.writes_expired > 0 || n.replicas().pending_write_ids().count() > 0 {
            missing.push(format!(
                "node {:?}: {} writes given up, {} pending",
                n.id(),
                st.writes_expired,
                n.replicas().pending_write_ids().count()
            ));
        }
    }
    for n in sim.nodes() {
        for (_, e) in n.store().iter() {
            if let (
                Role::Primary,
                Obj::Writer {
                    me,
                    slot,
                    host,
                    issued,
                },
            ) = (e.role, &e.object)
            {
                let s = (*me, *slot, host.0, host.1);
                let ranges = applied.get(&s).map_or(&[][..], Vec::as_slice);
                let have = (0..*issued).filter(|k| contains(ranges, *k)).count();
                if have != *issued as usize {
                    missing.push(format!("{s:?}: {have} of {issued}"));
                }
            }
        }
    }
    (twice, missing)
}

#[test]
fn a_ledger_whose_holder_is_killed_again_and_again_applies_every_write_once() {
    let seeds: u64 = std::env::var("SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8);
    let cycles: usize = std::env::var("CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(25);
    for seed in 1..=seeds {
        let (twice, missing) = trial(seed, cycles);
        assert!(
            twice.is_empty(),
            "seed {seed}: {} writes applied twice: {:?}",
            twice.len(),
            &twice[..twice.len().min(8)]
        );
        assert!(missing.is_empty(), "seed {seed}: writes lost: {missing:?}");
    }
}
