//! Persistence as an effect (issue 19, `node::persist`): what the node asks its store to
//! keep, when durable writes are acknowledged, and what comes back after a restart — two
//! nodes on the one engine (`worldmesh_engine`), with the real store (`worldmesh_store`,
//! redb) applying node 0's batches.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use worldmesh_core::{Aabb, Durability, MessageClass, NodeId, ObjectId, Point3, Time, Transmit};
use worldmesh_engine::{Engine, Fate, Links, Step};
use worldmesh_node::membership::MembershipConfig;
use worldmesh_node::{Mode, Node, NodeConfig, PersistConfig, RecoverError};
use worldmesh_replica::{GameObject, Role, StateError, ThinkContext};
use worldmesh_store::{Op, Store};

/// Which object writes where: the writer on node 1 writes to `target` every frame until
/// `stop_after` writes.
struct World {
    target: Option<ObjectId>,
    stop_after: u32,
}

/// Three classes of object: a durable ledger that records the writes it receives, a
/// checkpointed walker that moves every frame, an ephemeral spark, and a writer that
/// writes `(writer, k)` to the world's target while it sees it.
#[derive(Clone, Debug, PartialEq, bitcode::Encode, bitcode::Decode)]
enum Obj {
    Ledger { log: Vec<(u32, u32)> },
    Walker { x: f32 },
    Spark { ttl: u32 },
    Writer { me: u32, issued: u32 },
}

impl GameObject for Obj {
    type World = World;
    type Write = (u32, u32);

    fn think(&mut self, ctx: &mut ThinkContext<'_, Self>) {
        match self {
            Obj::Walker { x } => *x += 1.0,
            Obj::Spark { ttl } => *ttl = ttl.saturating_sub(1),
            Obj::Writer { me, issued } => {
                if let Some(t) = ctx.world.target
                    && *issued < ctx.world.stop_after
                    && ctx.store.get(t).is_some()
                {
                    let w = (*me, *issued);
                    *issued += 1;
                    ctx.write(t, w);
                }
            }
            Obj::Ledger { .. } => {}
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
            Obj::Walker { .. } => Durability::Checkpointed,
            _ => Durability::Ephemeral,
        }
    }
    fn kind(&self) -> u8 {
        match self {
            Obj::Ledger { .. } => 1,
            Obj::Walker { .. } => 2,
            Obj::Spark { .. } => 3,
            Obj::Writer { .. } => 4,
        }
    }
    fn encode_state(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&bitcode::encode(self));
    }
    fn decode_state(b: &[u8]) -> Result<Self, StateError> {
        bitcode::decode(b).map_err(StateError::from)
    }
}

const FRAME: Duration = Duration::from_millis(100);

fn scratch(name: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("node-persist-{name}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn config(id: u32, generation: u32, membership: bool) -> NodeConfig {
    let mut c = NodeConfig::new(NodeId(id), vec![NodeId(1 - id)], 7).with_mode(Mode::Broadcast);
    c.generation = generation;
    c.persist = Some(PersistConfig { checkpoint_every: 5 });
    if membership {
        // Membership datagrams are not delivered here: nobody may be declared failed
        // within the test (an hour of suspicion, no suspicion through silence), so the
        // writer keeps resending to node 0 and never adopts its objects.
        let mut m = MembershipConfig::lan();
        m.suspect_silent_after = None;
        m.suspect_to_down_after = Duration::from_secs(3600);
        c.membership = Some(m);
    }
    c
}

/// The pair's network: replica traffic only, at once; membership datagrams are not
/// delivered, so neither node ever declares the other failed.
struct ReplicaOnly {
    /// Deliver node 0's datagrams to node 1 (false: they are lost, as at a crash).
    a_to_b: bool,
}

impl Links<Vec<u8>> for ReplicaOnly {
    fn route(&mut self, _now: Time, src: NodeId, t: &Transmit) -> Fate {
        if t.class != MessageClass::ObjectUpdate || (src == NodeId(0) && !self.a_to_b) {
            return Fate::Lost;
        }
        Fate::Deliver(Duration::ZERO, None)
    }
}

/// Node 0 (the store's owner) and node 1 (the writer) on the engine.
struct Pair {
    engine: Engine<Node<Obj>, ReplicaOnly>,
    store: Store,
    /// Apply node 0's store batches (false: they queue, as on a stalled disk).
    apply: bool,
    applied: Vec<u64>,
    steps: u64,
}

impl Pair {
    fn a(&mut self) -> &mut Node<Obj> {
        &mut self.engine.machines_mut()[0]
    }

    fn b(&mut self) -> &mut Node<Obj> {
        &mut self.engine.machines_mut()[1]
    }

    fn now(&self) -> Time {
        self.engine.now()
    }

    fn set_a_to_b(&mut self, on: bool) {
        self.engine.links_mut().a_to_b = on;
    }

    /// Node 0 restarts as `a` (a new process; the caller recovered it from the store).
    fn restart_a(&mut self, a: Node<Obj>) {
        self.engine.restart(NodeId(0), a);
        self.drain(NodeId(0));
    }

    /// After an input: node 0's batches go to the store (if applying) and their
    /// completions back to it, then the node's output is routed.
    fn drain(&mut self, id: NodeId) {
        if id == NodeId(0) && self.apply {
            let now = self.now();
            while let Some(r) = self.engine.machines_mut()[0].poll_persist() {
                self.store.apply(&r.batch).expect("batch applied");
                self.engine.machines_mut()[0].handle_persisted(now, r.id);
                self.applied.push(r.id);
            }
        }
        self.engine.pump(id, |_, _, _, _| {});
    }

    /// One frame: everything up to the instant before the next frame boundary (frames
    /// run at 0, 100 ms, …), so each step holds exactly one frame of each node.
    fn step(&mut self) {
        self.steps += 1;
        let until = Time(self.steps * FRAME.as_micros() as u64 - 1);
        while let Some(step) = self.engine.step(until) {
            if let Step::Datagram(id) | Step::Timeout(id) = step {
                self.drain(id);
            }
        }
        self.engine.advance_to(until);
    }
}

fn ledger_log(n: &Node<Obj>, id: ObjectId) -> Vec<(u32, u32)> {
    match n.store().object(id) {
        Some(Obj::Ledger { log }) => log.clone(),
        other => panic!("no ledger {id}: {other:?}"),
    }
}

/// A pair where node 0 holds a ledger, a walker and a spark, and node 1 a writer that
/// writes `writes` times to the ledger.
fn pair(name: &str, writes: u32, membership: bool) -> (Pair, ObjectId, ObjectId, ObjectId) {
    let target = ObjectId::with_generation(NodeId(0), 0, 0);
    let world = Arc::new(World {
        target: Some(target),
        stop_after: writes,
    });
    let mut a = Node::new(config(0, 0, membership), Arc::clone(&world), Time::ZERO);
    let mut b = Node::new(config(1, 0, membership), Arc::clone(&world), Time::ZERO);
    let ledger = a.spawn(Time::ZERO, Obj::Ledger { log: Vec::new() });
    assert_eq!(ledger, target);
    let walker = a.spawn(Time::ZERO, Obj::Walker { x: 0.0 });
    let spark = a.spawn(Time::ZERO, Obj::Spark { ttl: 1000 });
    b.spawn(Time::ZERO, Obj::Writer { me: 1, issued: 0 });
    let store = Store::open(scratch(name)).expect("store");
    let mut p = Pair {
        engine: Engine::new(vec![a, b], ReplicaOnly { a_to_b: true }),
        store,
        apply: true,
        applied: Vec::new(),
        steps: 0,
    };
    p.drain(NodeId(0));
    p.drain(NodeId(1));
    (p, ledger, walker, spark)
}

#[test]
fn durable_writes_are_acknowledged_only_once_their_batch_is_on_disk() {
    let (mut p, ledger, _, _) = pair("ack", 20, false);
    p.apply = false;
    for _ in 0..40 {
        p.step();
    }
    // Every write reached the ledger and was applied once, but none is acknowledged:
    // the store has not reported a batch done.
    let log = ledger_log(p.a(), ledger);
    assert_eq!(log, (0..20).map(|k| (1, k)).collect::<Vec<_>>());
    assert_eq!(
        p.b().replicas().pending_writes(),
        20,
        "no write acknowledged before the store"
    );
    assert!(p.a().persist_pending() > 0);
    // The disk catches up: every write is acknowledged, none applied twice by the resends.
    p.apply = true;
    for _ in 0..20 {
        p.step();
    }
    assert_eq!(
        p.b().replicas().pending_writes(),
        0,
        "every write acknowledged after the store"
    );
    assert_eq!(ledger_log(p.a(), ledger).len(), 20);
    assert!(
        p.a().replicas().stats().writes_duplicate > 0,
        "resends were recognised as duplicates"
    );
    let stats = p.a().persist_stats().expect("persisting");
    assert_eq!(stats.writes_logged, 20);
    assert_eq!(stats.completed, stats.batches);
}

#[test]
fn batches_keep_durable_objects_every_frame_checkpointed_ones_every_interval_and_no_ephemeral() {
    let (mut p, ledger, walker, spark) = pair("classes", 3, false);
    let mut batches = Vec::new();
    p.apply = false;
    for _ in 0..12 {
        p.step();
        while let Some(r) = p.a().poll_persist() {
            batches.push((p.a().frame(), r));
        }
    }
    let puts = |id: ObjectId| -> Vec<u64> {
        batches
            .iter()
            .filter(|(_, r)| {
                r.batch
                    .ops()
                    .iter()
                    .any(|op| matches!(op, Op::PutObject(o) if o.id == id))
            })
            .map(|(f, _)| *f)
            .collect()
    };
    // The walker changes every frame but is written at checkpoints only: the first frame,
    // then every 5 frames.
    let w = puts(walker);
    assert_eq!(w, vec![1, 6, 11], "walker written at frames {w:?}");
    let marked: Vec<u64> = batches
        .iter()
        .filter(|(_, r)| r.batch.checkpoint_marker().is_some())
        .map(|(f, _)| *f)
        .collect();
    assert_eq!(marked, vec![1, 6, 11]);
    // The ledger is written in the frames its version changed (the 3 writes), with its log.
    let l = puts(ledger);
    assert!(!l.is_empty() && l.len() <= 5, "ledger written at frames {l:?}");
    let logged: usize = batches
        .iter()
        .map(|(_, r)| {
            r.batch
                .ops()
                .iter()
                .filter(|op| matches!(op, Op::PutWrite(w) if w.key.seq > 0))
                .count()
        })
        .sum();
    assert_eq!(logged, 3);
    // Checkpoints compact the log: the writes below the writer's floor become one marker.
    let floors: Vec<u64> = batches
        .iter()
        .flat_map(|(_, r)| r.batch.ops().iter())
        .filter_map(|op| match op {
            Op::PutWrite(w) if w.key.seq == 0 => Some(u64::from_le_bytes(w.bytes[4..12].try_into().unwrap())),
            _ => None,
        })
        .collect();
    assert_eq!(floors.last(), Some(&3), "floor markers {floors:?}");
    // Every logged write is in a batch that also holds the ledger's state containing it
    // (floor markers, sequence number 0, come with checkpoints).
    for (_, r) in &batches {
        if r.batch
            .ops()
            .iter()
            .any(|op| matches!(op, Op::PutWrite(w) if w.key.seq > 0))
        {
            assert!(
                r.batch
                    .ops()
                    .iter()
                    .any(|op| matches!(op, Op::PutObject(o) if o.id == ledger))
            );
        }
    }
    assert!(puts(spark).is_empty(), "an ephemeral object is never written");
}

#[test]
fn a_restarted_node_recovers_its_primaries_and_a_deleted_one_stays_gone() {
    let (mut p, ledger, walker, spark) = pair("recover", 10, false);
    for _ in 0..30 {
        p.step();
    }
    let before_log = ledger_log(p.a(), ledger);
    let before_walker = p.a().store().get(walker).expect("walker").version;
    let epoch = p.a().replicas().local_epoch(ledger);
    let recovered = p.store.load().expect("load");
    assert_eq!(recovered.objects.len(), 2, "ledger and walker, not the spark");
    assert!(recovered.last_checkpoint.is_some());

    // The process dies; its next generation starts from the store.
    let world = Arc::new(World {
        target: None,
        stop_after: 0,
    });
    let now = p.now() + Duration::from_secs(2);
    let mut a2 = Node::new(config(0, 1, false), world, now);
    let report = a2.recover(now, recovered).expect("recover");
    assert_eq!((report.durable, report.checkpointed), (1, 1));
    assert_eq!(
        ledger_log(&a2, ledger),
        before_log,
        "every applied durable write is back"
    );
    let w = a2.store().get(walker).expect("walker back");
    assert_eq!(w.role, Role::Primary);
    // Versions jump above anything the dead incarnation can have produced since; the
    // epoch is the stored one (an adoption elsewhere, at epoch + 1, wins over it).
    assert!(w.version > before_walker + 20, "{} vs {before_walker}", w.version);
    assert_eq!(a2.replicas().local_epoch(ledger), epoch);
    assert!(a2.store().get(spark).is_none());
    // Recovering twice is refused.
    assert_eq!(
        a2.recover(now, worldmesh_store::Recovered::default()),
        Err(RecoverError::NotFresh)
    );
}

#[test]
fn a_write_resent_after_the_restart_is_applied_once_and_acknowledged() {
    let (mut p, ledger, _, _) = pair("resend", 12, true);
    // Node 1 gets its replica of the ledger and starts writing; then node 0 applies and
    // persists every write, but its acknowledgements never reach node 1: it crashes after
    // the store, before the network.
    while p.b().store().get(ledger).is_none() {
        p.step();
    }
    p.set_a_to_b(false);
    for _ in 0..30 {
        p.step();
    }
    assert_eq!(ledger_log(p.a(), ledger).len(), 12);
    let lost = p.b().replicas().pending_writes();
    assert!(lost >= 10, "{lost} acknowledgements lost");
    let recovered = p.store.load().expect("load");
    assert!(recovered.writes.iter().any(|w| w.key.target == ledger));

    let world = Arc::new(World {
        target: None,
        stop_after: 0,
    });
    let now = p.now();
    let mut a2 = Node::new(config(0, 1, true), world, now);
    a2.recover(now, recovered).expect("recover");
    assert_eq!(a2.persist_stats().expect("persisting").recovered_logs, 1);
    p.restart_a(a2);
    p.set_a_to_b(true);
    for _ in 0..40 {
        p.step();
    }
    // Node 1 resent all 12 (never acknowledged): each is recognised and acknowledged.
    assert_eq!(p.b().replicas().pending_writes(), 0);
    let log = ledger_log(p.a(), ledger);
    let mut counts: BTreeMap<(u32, u32), usize> = BTreeMap::new();
    for w in &log {
        *counts.entry(*w).or_default() += 1;
    }
    assert_eq!(log.len(), 12, "{log:?}");
    assert!(counts.values().all(|c| *c == 1));
}

#[test]
fn without_membership_recovered_logs_are_discarded_and_their_entries_deleted() {
    let (mut p, ledger, _, _) = pair("nolog", 4, false);
    for _ in 0..20 {
        p.step();
    }
    let recovered = p.store.load().expect("load");
    let entries = recovered.writes.iter().filter(|w| w.key.target == ledger).count();
    assert!(entries > 0);
    let world = Arc::new(World {
        target: None,
        stop_after: 0,
    });
    let mut a2 = Node::new(config(0, 1, false), world, p.now());
    a2.recover(p.now(), recovered).expect("recover");
    assert!(a2.persist_stats().expect("persisting").discarded_logs >= 1);
    p.restart_a(a2);
    for _ in 0..2 {
        p.step();
    }
    let after = p.store.load().expect("load");
    assert_eq!(after.writes.iter().filter(|w| w.key.target == ledger).count(), 0);
}
