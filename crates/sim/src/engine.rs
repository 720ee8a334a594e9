//! The world simulation: nodes driven by the one engine ([`worldmesh_engine::Engine`]),
//! plus what only a world has.
//!
//! The engine delivers datagrams over the [`NetworkModel`] and wakes nodes (their sans-IO
//! `handle_datagram` and `handle_timeout`); this module adds the world's own events to its
//! queue: the oracle locator's ticks and discoveries, metrics samples, and store batches.
//! After every input a node's outputs are drained in one fixed order (datagrams, store
//! batches, events, locator operations, timer), which with the queue's insertion-order
//! ties makes every run reproducible.
//!
//! Nodes that persist (`NodeConfig::persist`, issue 19) hand their store batches to the
//! engine like datagrams ([`Simulation::with_persistence`]): each is applied to the node's
//! in-memory store ([`MemStore`], the real store's semantics) after a modelled latency, in
//! order, and its completion reaches the node a moment later. A crash loses the batches
//! not yet applied, and one applied but whose completion had not arrived stays applied
//! and unacknowledged — the two crash points of a real store thread. A restarted node is
//! built from [`Simulation::store`].
//!
//! With several threads ([`Simulation::with_threads`]) the engine runs the nodes in
//! parallel rounds, with the serial run's results. The world's own per-input work takes
//! part: the oracle's discoveries are handed to their subscribers inside the rounds, and
//! each node's locator operations are fed to the oracle at the round's merge, in the serial
//! order — which needs the oracle's delivery delay to be above zero (no round runs longer).
//!
//! Nodes with dynamic membership also get what their transport would do
//! ([`crate::refusal`]): a generation a node holds declared down is refused, and its
//! sender is told so (`Node::handle_declared_down`) one round trip later.

use std::time::Duration;

use worldmesh_core::{NodeId, Time};
use worldmesh_engine::parallel::{GroupWork, RoundCaller};
use worldmesh_engine::{Engine, Step};
use worldmesh_node::membership::{Departure, View};
use worldmesh_node::{Event, Located, LocatorOp, Node, NodeSummary};
use worldmesh_replica::GameObject;
use worldmesh_store::{Batch, MemStore};

use crate::metrics::Collector;
use crate::network::{NetworkModel, NetworkStats};
use crate::oracle::{Discovery, Oracle};

/// The world's own events in the engine's queue.
enum Kind {
    OracleTick,
    Discover(Discovery),
    Sample,
    /// A store batch of `node`'s process `incarnation` is applied.
    Persist {
        node: u32,
        incarnation: u32,
        id: u64,
        batch: Box<Batch>,
    },
    /// Its completion reaches the node.
    Persisted {
        node: u32,
        incarnation: u32,
        id: u64,
    },
    /// Member `by` refused `node`'s datagrams: it holds `generation` of `node` declared
    /// down, and saw the cluster as `view` (see [`crate::refusal`]).
    DeclaredDown {
        node: u32,
        by: u32,
        generation: u32,
        view: Option<View>,
    },
}

/// What a node's event tells its transport (the driver's calls in `worldmesh-net`), for
/// the modelled refusals ([`crate::refusal`]).
enum Mark {
    /// A member is up (`Transport::set_addr`).
    Up(NodeId),
    /// A member's generation is down (`Transport::forget`).
    Down(NodeId, u32),
    /// This node renewed its generation (`Transport::set_generation`).
    Renewed(u32),
}

/// Between a batch on disk and the node learning it (the store thread's channel).
const COMPLETION_DELAY: Duration = Duration::from_micros(20);

/// The stores of persisting nodes and what happened to their batches.
struct Stores {
    latency: Duration,
    stores: Vec<MemStore>,
    /// When each node's store is free again (batches are applied one at a time, in order).
    busy_until: Vec<Time>,
    /// Each node's process count (a crash or restart starts a new one): batches of an
    /// earlier process never apply or complete.
    incarnation: Vec<u32>,
    stats: PersistSimStats,
}

/// What the modelled stores did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PersistSimStats {
    /// Batches applied.
    pub applied: u64,
    /// Batches lost: their node crashed before they were applied.
    pub lost: u64,
    /// Batches applied whose node crashed before it learned it.
    pub unacknowledged: u64,
}

/// The oracle locator attached to a simulation.
struct OracleSlot {
    oracle: Oracle,
    interval: std::time::Duration,
    delay: std::time::Duration,
    /// Reused buffers: the oracle's discoveries, and a node's locator operations (serial
    /// steps).
    found: Vec<Discovery>,
    ops: Vec<LocatorOp>,
}

impl OracleSlot {
    /// Feeds the oracle node `id`'s locator operations of an input at `now` and schedules
    /// what they matched, `delay` later.
    fn ingest(
        &mut self,
        now: Time,
        id: NodeId,
        ops: impl IntoIterator<Item = LocatorOp>,
        mut schedule: impl FnMut(Time, Kind),
    ) {
        self.oracle.ingest(now, id, ops);
        self.oracle.move_discoveries(&mut self.found);
        for d in self.found.drain(..) {
            schedule(now + self.delay, Kind::Discover(d));
        }
    }
}

/// Counts a node's event, and records it with its time and node if recording is on (see
/// [`Simulation::record_events`]).
fn note_event(
    seen: &mut u64,
    recorded: &mut Option<Vec<(Time, NodeId, Event)>>,
    at: Time,
    node: NodeId,
    e: Event,
) {
    *seen += 1;
    if let Some(r) = recorded {
        r.push((at, node, e));
    }
}

/// The simulation's part in the engine's parallel rounds ([`RoundCaller`]): it counts
/// (and records) the nodes' events and feeds the oracle, at the merge in the serial order.
struct InRounds<'a> {
    events_seen: &'a mut u64,
    recorded: &'a mut Option<Vec<(Time, NodeId, Event)>>,
    oracle: Option<&'a mut OracleSlot>,
}

/// What the groups do for the simulation: hand the oracle's discoveries to their
/// subscribers, and take every input's locator operations (when the oracle is on).
#[derive(Clone, Copy)]
struct OracleWork {
    oracle: bool,
}

impl<O: GameObject> GroupWork<Node<O>, Kind> for OracleWork {
    type Side = Vec<LocatorOp>;

    fn target(&self, x: &Kind) -> Option<NodeId> {
        match x {
            Kind::Discover(d) => Some(d.subscriber),
            _ => None,
        }
    }

    fn deliver(&self, node: &mut Node<O>, now: Time, x: Kind) -> bool {
        match x {
            Kind::Discover(d) => {
                node.handle_discovery(now, d.object, d.primary, d.pos);
                true
            }
            _ => false,
        }
    }

    fn take_side(&self, node: &mut Node<O>) -> Option<Vec<LocatorOp>> {
        if !self.oracle {
            return None;
        }
        let ops: Vec<LocatorOp> = node.drain_locator_ops().collect();
        (!ops.is_empty()).then_some(ops)
    }
}

impl<O: GameObject> RoundCaller<Node<O>, Kind> for InRounds<'_> {
    type Work = OracleWork;

    fn work(&self) -> OracleWork {
        OracleWork {
            oracle: self.oracle.is_some(),
        }
    }

    fn lookahead(&self) -> Duration {
        self.oracle.as_ref().map_or(Duration::MAX, |o| o.delay)
    }

    fn on_event(&mut self, at: Time, node: NodeId, event: Event) {
        note_event(self.events_seen, self.recorded, at, node, event);
    }

    fn after_input(&mut self, at: Time, node: NodeId, ops: Vec<LocatorOp>, schedule: &mut Vec<(Time, Kind)>) {
        if let Some(slot) = self.oracle.as_deref_mut() {
            slot.ingest(at, node, ops, |when, x| schedule.push((when, x)));
        }
    }
}

/// A simulation of `O`-typed nodes over a [`NetworkModel`].
pub struct Simulation<O: GameObject> {
    engine: Engine<Node<O>, NetworkModel, Kind>,
    events_seen: u64,
    oracle: Option<OracleSlot>,
    collector: Option<(Collector<O>, std::time::Duration)>,
    /// Node events kept for the caller (when recording is on), with time and node.
    recorded: Option<Vec<(Time, NodeId, Event)>>,
    /// The placement loop of paper `001` §7.4, one per node, and how it locates players,
    /// if on.
    placement: Option<(Vec<worldmesh_node::Placement>, Locate<O>)>,
    /// Region migrations the placement loops started.
    region_migrations: u64,
    /// The node the last [`Simulation::step`] ran (for checks after every event).
    touched: Option<usize>,
    /// Persistence performed against in-memory stores, if on.
    stores: Option<Stores>,
    /// Threads [`Simulation::run_until`] may use (see [`Simulation::with_threads`]).
    threads: usize,
    /// Engine events taken so far (datagrams, wake-ups, the world's own events).
    engine_events: u64,
    /// Parallel rounds run so far, and the engine events they took.
    rounds: (u64, u64),
}

impl<O: GameObject> Simulation<O> {
    /// A simulation of `nodes` (node `i` must have id `i`) starting at time zero.
    pub fn new(nodes: Vec<Node<O>>, mut net: NetworkModel) -> Self {
        assert!(
            nodes.iter().enumerate().all(|(i, n)| n.id() == NodeId(i as u32)),
            "node i must have id i"
        );
        if nodes.iter().any(|n| n.view().is_some()) {
            net.refuse_declared_down(nodes.iter().map(Node::generation).collect());
        }
        let n = nodes.len();
        let mut sim = Self {
            engine: Engine::new(nodes, net),
            events_seen: 0,
            oracle: None,
            collector: None,
            recorded: None,
            placement: None,
            region_migrations: 0,
            touched: None,
            stores: None,
            threads: 1,
            engine_events: 0,
            rounds: (0, 0),
        };
        for i in 0..n {
            sim.after_input(i);
        }
        sim
    }

    /// Lets [`Simulation::run_until`] run nodes on up to `threads` threads, in parallel
    /// rounds of the engine ([`worldmesh_engine::Engine::round_for`]): the results are the
    /// same on any number of threads, byte for byte. Rounds run only where the world's
    /// own work after a node's input reaches other nodes later than the round ends: with
    /// the oracle locator only if its delivery delay is above zero (the oracle is fed at
    /// the merge, in the serial order, and no round runs longer than that delay; with no
    /// delay a discovery reaches any node at once: no lookahead), and not with persistence,
    /// the placement loop or dynamic membership (whose modelled refusals, `crate::refusal`,
    /// reach another node after an input: each reads or changes world-wide state after an
    /// input); those runs use one thread whatever is asked.
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.threads = threads.max(1);
        self
    }

    /// True if [`Simulation::run_until`] runs parallel rounds (see
    /// [`Simulation::with_threads`]).
    pub fn runs_in_parallel(&self) -> bool {
        self.threads > 1
            // The engine's clock counts µs: a shorter delay leaves no lookahead either.
            && self.oracle.as_ref().is_none_or(|o| o.delay >= Duration::from_micros(1))
            && self.stores.is_none()
            && self.placement.is_none()
            // A refusal reaches its sender after a node's input: world-wide state.
            && self.engine.links().refusals().is_none()
    }

    /// Engine events taken so far: datagrams delivered or dropped on arrival, wake-ups,
    /// and the world's own events (what [`Simulation::step`] returns true for).
    pub fn engine_events(&self) -> u64 {
        self.engine_events
    }

    /// Parallel rounds run so far, and the engine events they took (the rest ran one at a
    /// time).
    pub fn parallel_rounds(&self) -> (u64, u64) {
        self.rounds
    }

    /// The engine's split of the nodes into groups for parallel rounds, once one ran: the
    /// nodes per group and the window (how far a group's activity is from reaching
    /// another).
    pub fn parallel_plan(&self) -> Option<(Vec<u32>, Duration)> {
        self.engine.plan().map(|p| (p.sizes().to_vec(), p.lookahead()))
    }

    /// The oracle locator's delivery delay, if an oracle is attached: parallel rounds, if
    /// any run, are no longer.
    pub fn oracle_delay(&self) -> Option<Duration> {
        self.oracle.as_ref().map(|o| o.delay)
    }

    /// Region migrations the placement loops started so far.
    pub fn region_migrations(&self) -> u64 {
        self.region_migrations
    }

    /// Performs the store batches of persisting nodes against in-memory stores, each
    /// applied `latency` after the previous one of its node finished (see the module docs).
    pub fn with_persistence(mut self, latency: Duration) -> Self {
        let n = self.engine.machines().len();
        self.stores = Some(Stores {
            latency,
            stores: vec![MemStore::new(); n],
            busy_until: vec![Time::ZERO; n],
            incarnation: vec![0; n],
            stats: PersistSimStats::default(),
        });
        self
    }

    /// Node `id`'s store (persistence on): what a restarted process recovers from.
    pub fn store(&self, id: NodeId) -> Option<&MemStore> {
        self.stores.as_ref().and_then(|s| s.stores.get(id.0 as usize))
    }

    /// What the modelled stores did (persistence on).
    pub fn persist_stats(&self) -> Option<&PersistSimStats> {
        self.stores.as_ref().map(|s| &s.stats)
    }

    /// Attaches an oracle locator that matches every `interval` and delivers discoveries
    /// after `delay`.
    pub fn with_oracle(
        mut self,
        oracle: Oracle,
        interval: std::time::Duration,
        delay: std::time::Duration,
    ) -> Self {
        self.oracle = Some(OracleSlot {
            oracle,
            interval,
            delay,
            found: Vec::new(),
            ops: Vec::new(),
        });
        let at = self.now() + interval;
        self.engine.schedule(at, Kind::OracleTick);
        self
    }

    /// Attaches a metrics collector sampled every `interval`.
    pub fn with_collector(mut self, collector: Collector<O>, interval: std::time::Duration) -> Self {
        self.collector = Some((collector, interval));
        let at = self.now() + interval;
        self.engine.schedule(at, Kind::Sample);
        self
    }

    /// The metrics collector, if attached.
    pub fn collector(&self) -> Option<&Collector<O>> {
        self.collector.as_ref().map(|(c, _)| c)
    }

    /// The metrics collector, if attached, to change what it records.
    pub fn collector_mut(&mut self) -> Option<&mut Collector<O>> {
        self.collector.as_mut().map(|(c, _)| c)
    }

    /// Current simulated time.
    pub fn now(&self) -> Time {
        self.engine.now()
    }

    /// The nodes.
    pub fn nodes(&self) -> &[Node<O>] {
        self.engine.machines()
    }

    /// Node `id`, mutably (e.g. to spawn objects between steps).
    pub fn node_mut(&mut self, id: NodeId) -> &mut Node<O> {
        &mut self.engine.machines_mut()[id.0 as usize]
    }

    /// The network model (to partition or heal it between steps).
    pub fn network_mut(&mut self) -> &mut NetworkModel {
        self.engine.links_mut()
    }

    /// The network model.
    pub fn network(&self) -> &NetworkModel {
        self.engine.links()
    }

    /// What the network did so far.
    pub fn network_stats(&self) -> &NetworkStats {
        self.engine.stats()
    }

    /// Node events drained so far (the engine drains and counts them).
    pub fn events_seen(&self) -> u64 {
        self.events_seen
    }

    /// Crashes a node: it stops running and everything sent to it is dropped.
    pub fn crash(&mut self, id: NodeId) {
        self.engine.crash(id);
        if let Some(s) = &mut self.stores
            && let Some(inc) = s.incarnation.get_mut(id.0 as usize)
        {
            *inc += 1;
        }
    }

    /// True if node `id` runs (not crashed).
    pub fn is_up(&self, id: NodeId) -> bool {
        self.engine.is_up(id)
    }

    /// Restarts node `id` as `node` (a new process: its state is whatever `node` holds —
    /// nothing, or what its persistence kept — and usually a higher generation). Datagrams
    /// still in flight to the old process reach the new one, as on a real network.
    pub fn restart(&mut self, node: Node<O>) {
        let id = node.id();
        let i = id.0 as usize;
        if let Some(r) = self.engine.links_mut().refusals_mut() {
            r.restarted(id, node.generation());
        }
        self.engine.restart(id, node);
        if let Some(s) = &mut self.stores {
            s.incarnation[i] += 1;
        }
        self.after_input(i);
    }

    /// Adds a node that joins the running world; its id must be the next free one.
    pub fn add_node(&mut self, node: Node<O>) {
        assert_eq!(node.id().0 as usize, self.nodes().len(), "node ids are dense");
        if let Some(r) = self.engine.links_mut().refusals_mut() {
            r.add(node.generation());
        }
        let id = self.engine.add(node);
        if let Some(s) = &mut self.stores {
            s.stores.push(MemStore::new());
            s.busy_until.push(Time::ZERO);
            s.incarnation.push(0);
        }
        self.after_input(id.0 as usize);
    }

    /// Keeps every node event from now on (see [`Simulation::take_events`]).
    pub fn record_events(&mut self) {
        self.recorded.get_or_insert_with(Vec::new);
    }

    /// The node events recorded since the last call, with their time and node.
    pub fn take_events(&mut self) -> Vec<(Time, NodeId, Event)> {
        self.recorded.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Runs `f` on node `id` at the current time and routes what it sends (e.g. a drain, a
    /// join or a migration started by the experiment).
    pub fn with_node(&mut self, id: NodeId, f: impl FnOnce(&mut Node<O>, Time)) {
        let now = self.now();
        f(self.node_mut(id), now);
        self.after_input(id.0 as usize);
    }

    /// Runs node `i`'s placement loop after its frame, if on.
    fn run_placement(&mut self, i: usize) {
        let Some((placements, locate)) = &mut self.placement else {
            return;
        };
        let locate = *locate;
        let loads: Vec<usize> = self
            .engine
            .machines()
            .iter()
            .map(|n| n.store().primary_count())
            .collect();
        let now = self.engine.now();
        let Some(p) = placements.get_mut(i) else {
            return;
        };
        let (links, nodes) = self.engine.links_and_machines_mut();
        let oracle = MatrixClients(links, loads);
        let Some(node) = nodes.get_mut(i) else {
            return;
        };
        if let Ok(worldmesh_node::PlacementOutcome::Migrate(_)) =
            node.run_placement_by(now, p, &oracle, &locate)
        {
            self.region_migrations += 1;
        }
    }

    /// After node `i` handled an input: route its datagrams, hand its store batches to its
    /// store, count (and record) its events, feed the oracle its locator operations, and
    /// re-arm its timer — in this order, which fixes the queue's ties.
    fn after_input(&mut self, i: usize) {
        let id = NodeId(i as u32);
        self.engine.route_transmits(id);
        let now = self.engine.now();
        self.tell_refusals(now);
        if let Some(s) = &mut self.stores {
            let mut due = Vec::new();
            let node = &mut self.engine.machines_mut()[i];
            while let Some(r) = node.poll_persist() {
                let at = now.max(s.busy_until[i]) + s.latency;
                s.busy_until[i] = at;
                due.push((at, s.incarnation[i], r));
            }
            for (at, incarnation, r) in due {
                self.engine.schedule(
                    at,
                    Kind::Persist {
                        node: i as u32,
                        incarnation,
                        id: r.id,
                        batch: Box::new(r.batch),
                    },
                );
            }
        }
        let refusing = self.engine.links().refusals().is_some();
        // What this node's transport would be told: members declared down, a renewal.
        let mut marks: Vec<Mark> = Vec::new();
        let node = &mut self.engine.machines_mut()[i];
        while let Some(e) = node.poll_event() {
            if refusing {
                match &e {
                    Event::MemberUp(m) => marks.push(Mark::Up(m.node)),
                    // As the driver: a member forgotten by a fresh start is not refused.
                    Event::MemberDown(m, why) if *why != Departure::Forgotten => {
                        marks.push(Mark::Down(m.node, m.generation))
                    }
                    Event::Rejoined(m) => marks.push(Mark::Renewed(m.generation)),
                    _ => {}
                }
            }
            note_event(&mut self.events_seen, &mut self.recorded, now, id, e);
        }
        if let Some(r) = self.engine.links_mut().refusals_mut() {
            for mark in marks {
                match mark {
                    Mark::Up(member) => r.member_up(id, member),
                    Mark::Down(member, generation) => r.declared_down(id, member, generation),
                    Mark::Renewed(generation) => r.renewed(id, generation),
                }
            }
        }
        if let Some(slot) = &mut self.oracle {
            let engine = &mut self.engine;
            let mut ops = std::mem::take(&mut slot.ops);
            ops.extend(engine.machines_mut()[i].drain_locator_ops());
            if !ops.is_empty() {
                slot.ingest(now, id, ops.drain(..), |at, x| engine.schedule(at, x));
            }
            slot.ops = ops;
        }
        self.engine.arm_timer(id);
    }

    /// The refusals made since the last call that their senders learn of now: each reaches
    /// its sender one round trip later (the handshake), with the refuser's view now.
    fn tell_refusals(&mut self, now: Time) {
        let Some(r) = self.engine.links_mut().refusals_mut() else {
            return;
        };
        for (sender, by, generation) in r.take_due(now) {
            let rtt = self.engine.links().base_delay(sender, by) + self.engine.links().base_delay(by, sender);
            let view = self.engine.machines()[by.0 as usize].view();
            self.engine.schedule(
                now + rtt,
                Kind::DeclaredDown {
                    node: sender.0,
                    by: by.0,
                    generation,
                    view,
                },
            );
        }
    }

    /// Processes the next event if it is due at or before `until`; returns false when
    /// there is none.
    pub fn step(&mut self, until: Time) -> bool {
        let Some(step) = self.engine.step(until) else {
            return false;
        };
        self.engine_events += 1;
        self.touched = None;
        let now = self.engine.now();
        match step {
            Step::Nothing => {}
            Step::Datagram(id) => {
                let i = id.0 as usize;
                self.after_input(i);
                self.touched = Some(i);
            }
            Step::Timeout(id) => {
                let i = id.0 as usize;
                self.run_placement(i);
                self.after_input(i);
                self.touched = Some(i);
            }
            Step::Other(Kind::OracleTick) => {
                if let Some(slot) = &mut self.oracle {
                    let found = slot.oracle.tick(now);
                    let (interval, delay) = (slot.interval, slot.delay);
                    for d in found {
                        self.engine.schedule(now + delay, Kind::Discover(d));
                    }
                    self.engine.schedule(now + interval, Kind::OracleTick);
                }
            }
            Step::Other(Kind::Discover(d)) => {
                let i = d.subscriber.0 as usize;
                if self.engine.is_up(d.subscriber) {
                    self.engine.machines_mut()[i].handle_discovery(now, d.object, d.primary, d.pos);
                    self.after_input(i);
                    self.touched = Some(i);
                }
            }
            Step::Other(Kind::Persist {
                node,
                incarnation,
                id,
                batch,
            }) => {
                let i = node as usize;
                let up = self.engine.is_up(NodeId(node));
                if let Some(s) = &mut self.stores {
                    if up && s.incarnation[i] == incarnation {
                        s.stores[i].apply(&batch);
                        s.stats.applied += 1;
                        self.engine.schedule(
                            now + COMPLETION_DELAY,
                            Kind::Persisted {
                                node,
                                incarnation,
                                id,
                            },
                        );
                    } else {
                        s.stats.lost += 1;
                    }
                }
            }
            Step::Other(Kind::Persisted {
                node,
                incarnation,
                id,
            }) => {
                let i = node as usize;
                let current = self
                    .stores
                    .as_ref()
                    .is_some_and(|s| s.incarnation[i] == incarnation);
                if self.engine.is_up(NodeId(node)) && current {
                    self.engine.machines_mut()[i].handle_persisted(now, id);
                    self.after_input(i);
                    self.touched = Some(i);
                } else if let Some(s) = &mut self.stores {
                    s.stats.unacknowledged += 1;
                }
            }
            Step::Other(Kind::DeclaredDown {
                node,
                by,
                generation,
                view,
            }) => {
                let i = node as usize;
                if self.engine.is_up(NodeId(node)) {
                    self.engine.machines_mut()[i].handle_declared_down(
                        now,
                        generation,
                        Some(NodeId(by)),
                        view,
                    );
                    self.after_input(i);
                    self.touched = Some(i);
                }
            }
            Step::Other(Kind::Sample) => {
                if let Some((c, interval)) = &mut self.collector {
                    c.sample(now, self.engine.machines());
                    let interval = *interval;
                    self.engine.schedule(now + interval, Kind::Sample);
                }
            }
        }
        true
    }

    /// The node the last [`Simulation::step`] handed an input to (`None` for engine
    /// events and inputs to crashed nodes): what a check after every event looks at.
    pub fn last_touched(&self) -> Option<NodeId> {
        self.touched.map(|i| NodeId(i as u32))
    }

    /// Runs `d` of virtual time from now (see [`Simulation::run_until`]).
    pub fn run_for(&mut self, d: std::time::Duration) {
        let until = self.now() + d;
        self.run_until(until);
    }

    /// Runs every event up to and including `until`, then sets the clock to `until`; in
    /// parallel rounds where it can (see [`Simulation::with_threads`]), with the results
    /// of running them one at a time.
    pub fn run_until(&mut self, until: Time) {
        if self.runs_in_parallel() {
            loop {
                let mut caller = InRounds {
                    events_seen: &mut self.events_seen,
                    recorded: &mut self.recorded,
                    oracle: self.oracle.as_mut(),
                };
                let ran = self.engine.round_for(until, self.threads, &mut caller);
                if ran > 0 {
                    self.engine_events += ran as u64;
                    self.rounds.0 += 1;
                    self.rounds.1 += ran as u64;
                    self.touched = None;
                } else if !self.step(until) {
                    break;
                }
            }
        } else {
            while self.step(until) {}
        }
        self.engine.advance_to(until);
    }

    /// Summaries of every node, bandwidth measured over `[from_s, to_s)` of the run.
    pub fn summaries(&self, from_s: f64, to_s: f64) -> Vec<NodeSummary> {
        let now = self.now();
        self.nodes()
            .iter()
            .map(|n| n.summary_window(now, from_s, to_s))
            .collect()
    }
}

/// How the placement loop locates an object's player ([`Located::client_location`]).
type Locate<O> = fn(&O) -> Option<u32>;

impl<O: Located> Simulation<O> {
    /// Runs the placement loop of paper `001` §7.4 on every node after each of its frames:
    /// a node's region (its primaries) migrates to the node its players
    /// ([`Located::client_location`], latency-matrix rows) are nearest to.
    pub fn with_placement(mut self, cfg: worldmesh_node::PlacementConfig) -> Self {
        let placements = (0..self.nodes().len())
            .map(|_| worldmesh_node::Placement::new(cfg.clone()))
            .collect();
        self.placement = Some((placements, O::client_location as Locate<O>));
        self
    }
}

/// Players located at latency-matrix rows, nodes at their mapped rows: the placement loop's
/// latency oracle in the simulator.
struct MatrixClients<'a>(&'a NetworkModel, Vec<usize>);

impl worldmesh_node::LatencyOracle for MatrixClients<'_> {
    fn client_rtt_ms(&self, client: u32, node: NodeId) -> Option<f64> {
        let (row, m) = self.0.row_of(node)?;
        if m.is_empty() {
            return None;
        }
        Some(f64::from(m.rtt_ms(client as usize % m.len(), row)))
    }

    fn primaries(&self, node: NodeId) -> Option<usize> {
        self.1.get(node.0 as usize).copied()
    }
}
