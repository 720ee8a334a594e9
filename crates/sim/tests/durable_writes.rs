//! Acknowledged durable writes survive crashes (issue 19), over 60 seeded trials of the
//! simulator: a ledger of class `Durable` on node 0 takes a write every frame from each of
//! two writer nodes; node 0 crashes at a random moment (its store batches in flight lost,
//! or, in every other trial on purpose, just after a batch is applied and before its
//! completion arrives — the modelled store's two crash points), the others
//! adopt the ledger from their copies, node 0 restarts from its store a random while later
//! and rejoins. At the end exactly one live node holds the ledger, and every write its
//! writer saw acknowledged is in it exactly once; no write is in it twice.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use worldmesh_core::{Aabb, DetRng, Durability, LatencyMatrix, NodeId, ObjectId, Point3, Time};
use worldmesh_node::membership::{Member, MembershipConfig};
use worldmesh_node::{Mode, Node, NodeConfig, PersistConfig};
use worldmesh_replica::{GameObject, Role, StateError, ThinkContext};
use worldmesh_sim::{NetworkConfig, NetworkModel, Simulation};

/// The writers stop issuing at this time.
struct World {
    stop: Time,
}

#[derive(Clone, Debug, PartialEq, bitcode::Encode, bitcode::Decode)]
enum Obj {
    /// Records every write it receives.
    Ledger { log: Vec<(u32, u32)> },
    /// Writes `(me, k)` to the ledger every frame while it sees it.
    Writer { me: u32, issued: u32 },
}

/// The ledger: the first object node 0 creates.
fn ledger_id() -> ObjectId {
    ObjectId::with_generation(NodeId(0), 0, 0)
}

impl GameObject for Obj {
    type World = World;
    type Write = (u32, u32);

    fn think(&mut self, ctx: &mut ThinkContext<'_, Self>) {
        if let Obj::Writer { me, issued } = self
            && ctx.now < ctx.world.stop
            && ctx.store.get(ledger_id()).is_some()
        {
            let w = (*me, *issued);
            *issued += 1;
            ctx.write(ledger_id(), w);
        }
    }
    fn position(&self) -> Point3 {
        Point3::new(0.0, 0.0, 0.0)
    }
    fn interest(&self, _world: &Self::World) -> Option<Aabb> {
        None
    }
    fn apply_write(&mut self, w: &(u32, u32)) {
        if let Obj::Ledger { log } = self {
            log.push(*w);
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

const NODES: u32 = 4;

fn config(id: u32, generation: u32, peers: Vec<NodeId>) -> NodeConfig {
    let mut c = NodeConfig::new(NodeId(id), peers, 11).with_mode(Mode::Broadcast);
    c.generation = generation;
    c.membership = Some(MembershipConfig::lan());
    c.replica.backups = 1;
    c.persist = Some(PersistConfig { checkpoint_every: 5 });
    c
}

struct Outcome {
    /// Live primaries of the ledger at the end.
    holders: usize,
    log: Vec<(u32, u32)>,
    /// Per writer that stayed on its node (see `trial`): writes issued, and those still
    /// unacknowledged.
    writers: Vec<(u32, u32, Vec<u64>)>,
    expired: u64,
    batches_lost: u64,
    unacknowledged: u64,
}

fn trial(seed: u64) -> Outcome {
    let mut draw = DetRng::new(seed);
    let crash_at = Time::from_secs_f64(draw.range_f64(1.0, 3.0));
    let down = Duration::from_secs_f64(draw.range_f64(0.2, 4.0));
    let stop = crash_at + down + Duration::from_secs(2);
    let world = Arc::new(World { stop });
    let all: Vec<NodeId> = (0..NODES).map(NodeId).collect();
    let nodes: Vec<Node<Obj>> = (0..NODES)
        .map(|i| {
            let peers = all.iter().copied().filter(|p| p.0 != i).collect();
            let mut n = Node::new(config(i, 0, peers), Arc::clone(&world), Time::ZERO);
            let o = if i == 0 {
                Obj::Ledger { log: Vec::new() }
            } else {
                Obj::Writer { me: i, issued: 0 }
            };
            n.spawn(Time::ZERO, o);
            n
        })
        .collect();
    let net_cfg = NetworkConfig {
        latency: "uniform:20".into(),
        loss: 0.02,
        ..NetworkConfig::default()
    };
    let net = NetworkModel::new(
        LatencyMatrix::uniform(NODES as usize, 20.0),
        NODES as usize,
        &net_cfg,
        &DetRng::new(seed ^ 0x6e6574),
    );
    let latency = Duration::from_micros(draw.range_f64(500.0, 60_000.0) as u64);
    let mut sim = Simulation::new(nodes, net).with_persistence(latency);
    sim.record_events();
    sim.run_until(crash_at);
    if seed.is_multiple_of(2) {
        // The other crash point, on purpose: right after one of node 0's batches is on
        // disk, before the node learns it (its acknowledgements never go out).
        let store = |sim: &Simulation<Obj>| sim.store(NodeId(0)).map_or(0, |s| s.batches());
        let applied = store(&sim);
        while store(&sim) == applied && sim.step(Time::MAX) {}
    }
    sim.crash(NodeId(0));
    sim.run_until(crash_at + down);
    let rec = sim.store(NodeId(0)).expect("persisting").load();
    let mut n = Node::new(config(0, 1, Vec::new()), Arc::clone(&world), sim.now());
    n.recover_after_join(sim.now(), rec, Duration::from_secs(3))
        .expect("recover");
    sim.restart(n);
    sim.with_node(NodeId(0), |n, now| {
        n.join(now, &[Member::simulated(NodeId(1), 0)])
    });
    sim.run_until(stop + Duration::from_secs(12));

    let mut holders = 0;
    let mut log = Vec::new();
    // A writer node declared failed while alive drops everything, its unacknowledged
    // writes included (neither acknowledged nor given up), and its writer object is adopted
    // elsewhere: its writes can no longer be told acknowledged from the outside.
    let rejoined: Vec<u32> = sim
        .take_events()
        .into_iter()
        .filter(|(_, _, e)| matches!(e, worldmesh_node::Event::Rejoined(_)))
        .map(|(_, n, _)| n.0)
        .collect();
    for n in sim.nodes() {
        if let Some(e) = n.store().get(ledger_id())
            && e.role == Role::Primary
        {
            holders += 1;
            if let Obj::Ledger { log: l } = &e.object {
                log = l.clone();
            }
        }
    }
    let mut writers = Vec::new();
    let mut expired = 0;
    for n in &sim.nodes()[1..] {
        for (_, e) in n.store().iter() {
            if let (Role::Primary, Obj::Writer { me, issued }) = (e.role, &e.object)
                && *me == n.id().0
                && !rejoined.contains(me)
            {
                let pending = n.replicas().pending_write_ids().map(|(_, s)| s).collect();
                writers.push((*me, *issued, pending));
            }
        }
        expired += n.replicas().stats().writes_expired;
    }
    let stats = sim.persist_stats().expect("persisting");
    Outcome {
        holders,
        log,
        writers,
        expired,
        batches_lost: stats.lost,
        unacknowledged: stats.unacknowledged,
    }
}

#[test]
fn every_acknowledged_durable_write_survives_a_crash_exactly_once_over_60_seeds() {
    let (mut lost_batches, mut unacked_batches, mut writes, mut checked) = (0, 0, 0usize, 0usize);
    for seed in 1..=60 {
        let o = trial(seed);
        assert_eq!(o.holders, 1, "seed {seed}: {} primaries of the ledger", o.holders);
        let mut count: BTreeMap<(u32, u32), usize> = BTreeMap::new();
        for w in &o.log {
            *count.entry(*w).or_default() += 1;
        }
        let twice: Vec<_> = count.iter().filter(|(_, c)| **c > 1).collect();
        assert!(twice.is_empty(), "seed {seed}: writes applied twice: {twice:?}");
        assert_eq!(o.expired, 0, "seed {seed}: writes given up");
        checked += o.writers.len();
        for (me, issued, pending) in &o.writers {
            // A writer's k-th write to the ledger is its sequence number k + 1.
            for k in 0..*issued {
                let acked = !pending.contains(&(u64::from(k) + 1));
                if acked {
                    assert!(
                        count.contains_key(&(*me, k)),
                        "seed {seed}: write ({me}, {k}) was acknowledged but is not in the ledger"
                    );
                }
            }
            writes += *issued as usize;
        }
        lost_batches += o.batches_lost;
        unacked_batches += o.unacknowledged;
    }
    // Most writers stayed on their nodes (a false failure of a live writer node, in a
    // three-member cluster with one member down, is rare).
    assert!(checked >= 150, "only {checked} of 180 writers checked");
    // The trials did reach both crash points of the store.
    assert!(lost_batches > 0, "no trial crashed with a batch in flight");
    assert!(
        unacked_batches > 0,
        "no trial crashed between a batch and its completion"
    );
    eprintln!(
        "60 trials: {checked} of 180 writers checked, {writes} writes; {lost_batches} batches lost at crashes, {unacked_batches} applied but unacknowledged"
    );
}
