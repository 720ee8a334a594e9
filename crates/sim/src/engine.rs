//! The event queue and the loop that drives node state machines.
//!
//! The engine keeps one queue of timed events: datagram deliveries and node wake-ups.
//! Handling an event calls the node's sans-IO interface (`handle_datagram` or
//! `handle_timeout`), then drains what the node wants to send into the network model and
//! re-arms the node's timer from `poll_timeout`. Ties in time are broken by insertion
//! order, which makes every run reproducible.
//!
//! Nodes that persist (`NodeConfig::persist`, issue 19) hand their store batches to the
//! engine like datagrams ([`Simulation::with_persistence`]): each is applied to the node's
//! in-memory store ([`MemStore`], the real store's semantics) after a modelled latency, in
//! order, and its completion reaches the node a moment later. A crash loses the batches
//! not yet applied, and one applied but whose completion had not arrived stays applied
//! and unacknowledged — the two crash points of a real store thread. A restarted node is
//! built from [`Simulation::store`].
//!
//! The heap orders small keys (time, insertion number, slot); the events themselves wait
//! in a slab of reusable slots, so sifting moves 24 bytes per step instead of a whole
//! event.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use std::time::Duration;

use worldmesh_core::{NodeId, Time};
use worldmesh_node::{Event, Located, Node, NodeSummary};
use worldmesh_replica::GameObject;
use worldmesh_store::{Batch, MemStore};

use crate::metrics::Collector;
use crate::network::{Fate, NetworkModel, NetworkStats};
use crate::oracle::{Discovery, Oracle};

enum Kind {
    Deliver {
        dst: u32,
        src: u32,
        datagram: Vec<u8>,
    },
    Wake {
        node: u32,
    },
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
}

/// A scheduled event's place in the queue: when, its insertion number (unique, so ties in
/// time go by insertion order and the slot never decides), and its slot in the slab.
/// Reversed because `BinaryHeap` is a max-heap and the earliest event comes first.
type Key = Reverse<(Time, u64, u32)>;

/// A simulation of `O`-typed nodes over a [`NetworkModel`].
pub struct Simulation<O: GameObject> {
    now: Time,
    nodes: Vec<Node<O>>,
    up: Vec<bool>,
    timers: Vec<Option<Time>>,
    queue: BinaryHeap<Key>,
    /// The events of the queue, by slot; `None` for a free slot.
    slots: Vec<Option<Kind>>,
    free: Vec<u32>,
    seq: u64,
    net: NetworkModel,
    net_stats: NetworkStats,
    events_seen: u64,
    oracle: Option<OracleSlot>,
    collector: Option<(Collector<O>, std::time::Duration)>,
    /// Reused buffer for the oracle's discoveries.
    found: Vec<Discovery>,
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
}

impl<O: GameObject> Simulation<O> {
    /// A simulation of `nodes` (node `i` must have id `i`) starting at time zero.
    pub fn new(nodes: Vec<Node<O>>, net: NetworkModel) -> Self {
        assert!(
            nodes.iter().enumerate().all(|(i, n)| n.id() == NodeId(i as u32)),
            "node i must have id i"
        );
        let n = nodes.len();
        let mut sim = Self {
            now: Time::ZERO,
            nodes,
            up: vec![true; n],
            timers: vec![None; n],
            queue: BinaryHeap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            seq: 0,
            net,
            net_stats: NetworkStats::default(),
            events_seen: 0,
            oracle: None,
            collector: None,
            found: Vec::new(),
            recorded: None,
            placement: None,
            region_migrations: 0,
            touched: None,
            stores: None,
        };
        for i in 0..n {
            sim.after_input(i);
        }
        sim
    }

    /// Region migrations the placement loops started so far.
    pub fn region_migrations(&self) -> u64 {
        self.region_migrations
    }

    /// Performs the store batches of persisting nodes against in-memory stores, each
    /// applied `latency` after the previous one of its node finished (see the module docs).
    pub fn with_persistence(mut self, latency: Duration) -> Self {
        let n = self.nodes.len();
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
        });
        self.push(self.now + interval, Kind::OracleTick);
        self
    }

    /// Attaches a metrics collector sampled every `interval`.
    pub fn with_collector(mut self, collector: Collector<O>, interval: std::time::Duration) -> Self {
        self.collector = Some((collector, interval));
        self.push(self.now + interval, Kind::Sample);
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
        self.now
    }

    /// The nodes.
    pub fn nodes(&self) -> &[Node<O>] {
        &self.nodes
    }

    /// Node `id`, mutably (e.g. to spawn objects between steps).
    pub fn node_mut(&mut self, id: NodeId) -> &mut Node<O> {
        &mut self.nodes[id.0 as usize]
    }

    /// The network model (to partition or heal it between steps).
    pub fn network_mut(&mut self) -> &mut NetworkModel {
        &mut self.net
    }

    /// The network model.
    pub fn network(&self) -> &NetworkModel {
        &self.net
    }

    /// What the network did so far.
    pub fn network_stats(&self) -> &NetworkStats {
        &self.net_stats
    }

    /// Node events drained so far (the engine drains and counts them).
    pub fn events_seen(&self) -> u64 {
        self.events_seen
    }

    /// Crashes a node: it stops running and everything sent to it is dropped.
    pub fn crash(&mut self, id: NodeId) {
        self.up[id.0 as usize] = false;
        if let Some(s) = &mut self.stores
            && let Some(inc) = s.incarnation.get_mut(id.0 as usize)
        {
            *inc += 1;
        }
    }

    /// True if node `id` runs (not crashed).
    pub fn is_up(&self, id: NodeId) -> bool {
        self.up.get(id.0 as usize).copied().unwrap_or(false)
    }

    /// Restarts node `id` as `node` (a new process: its state is whatever `node` holds —
    /// nothing, or what its persistence kept — and usually a higher generation). Datagrams
    /// still in flight to the old process reach the new one, as on a real network.
    pub fn restart(&mut self, node: Node<O>) {
        let i = node.id().0 as usize;
        assert!(i < self.nodes.len(), "restart of an unknown node");
        self.nodes[i] = node;
        self.up[i] = true;
        self.timers[i] = None;
        if let Some(s) = &mut self.stores {
            s.incarnation[i] += 1;
        }
        self.after_input(i);
    }

    /// Adds a node that joins the running world; its id must be the next free one.
    pub fn add_node(&mut self, node: Node<O>) {
        assert_eq!(node.id().0 as usize, self.nodes.len(), "node ids are dense");
        self.nodes.push(node);
        self.up.push(true);
        self.timers.push(None);
        if let Some(s) = &mut self.stores {
            s.stores.push(MemStore::new());
            s.busy_until.push(Time::ZERO);
            s.incarnation.push(0);
        }
        self.after_input(self.nodes.len() - 1);
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
        let i = id.0 as usize;
        let now = self.now;
        f(&mut self.nodes[i], now);
        self.after_input(i);
    }

    fn push(&mut self, at: Time, kind: Kind) {
        self.seq += 1;
        let slot = match self.free.pop() {
            Some(s) => {
                self.slots[s as usize] = Some(kind);
                s
            }
            None => {
                self.slots.push(Some(kind));
                (self.slots.len() - 1) as u32
            }
        };
        self.queue.push(Reverse((at, self.seq, slot)));
    }

    /// After a node handled an input: route its datagrams and re-arm its timer.
    fn run_placement(&mut self, i: usize) {
        let Some((placements, locate)) = &mut self.placement else {
            return;
        };
        let locate = *locate;
        let loads: Vec<usize> = self.nodes.iter().map(|n| n.store().primary_count()).collect();
        let oracle = MatrixClients(&self.net, loads);
        let (Some(p), Some(node)) = (placements.get_mut(i), self.nodes.get_mut(i)) else {
            return;
        };
        if let Ok(worldmesh_node::PlacementOutcome::Migrate(_)) =
            node.run_placement_by(self.now, p, &oracle, &locate)
        {
            self.region_migrations += 1;
        }
    }

    fn after_input(&mut self, i: usize) {
        while let Some(t) = self.nodes[i].poll_transmit() {
            self.net_stats.sent += 1;
            let src = NodeId(i as u32);
            match self.net.route(self.now, src, t.dst) {
                Fate::Lost => self.net_stats.lost += 1,
                Fate::Partitioned => self.net_stats.partitioned += 1,
                Fate::Deliver(first, dup) => {
                    let copy = dup.map(|d| (d, t.datagram.clone()));
                    self.push(
                        self.now + first,
                        Kind::Deliver {
                            dst: t.dst.0,
                            src: src.0,
                            datagram: t.datagram,
                        },
                    );
                    if let Some((d, datagram)) = copy {
                        self.net_stats.duplicated += 1;
                        self.push(
                            self.now + d,
                            Kind::Deliver {
                                dst: t.dst.0,
                                src: src.0,
                                datagram,
                            },
                        );
                    }
                }
            }
        }
        if let Some(s) = &mut self.stores {
            let mut due = Vec::new();
            while let Some(r) = self.nodes[i].poll_persist() {
                let at = self.now.max(s.busy_until[i]) + s.latency;
                s.busy_until[i] = at;
                due.push((at, s.incarnation[i], r));
            }
            for (at, incarnation, r) in due {
                self.push(
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
        while let Some(e) = self.nodes[i].poll_event() {
            self.events_seen += 1;
            if let Some(r) = &mut self.recorded {
                r.push((self.now, NodeId(i as u32), e));
            }
        }
        if let Some(slot) = &mut self.oracle {
            let ops = self.nodes[i].drain_locator_ops();
            if !ops.as_slice().is_empty() {
                slot.oracle.ingest(self.now, NodeId(i as u32), ops);
                let delay = slot.delay;
                let mut found = std::mem::take(&mut self.found);
                slot.oracle.move_discoveries(&mut found);
                for d in found.drain(..) {
                    self.push(self.now + delay, Kind::Discover(d));
                }
                self.found = found;
            }
        }
        if let Some(at) = self.nodes[i].poll_timeout()
            && self.timers[i].is_none_or(|cur| at < cur)
        {
            let at = at.max(self.now);
            self.timers[i] = Some(at);
            self.push(at, Kind::Wake { node: i as u32 });
        }
    }

    /// Processes the next event if it is due at or before `until`; returns false when
    /// there is none.
    pub fn step(&mut self, until: Time) -> bool {
        match self.queue.peek() {
            Some(Reverse((at, ..))) if *at <= until => {}
            _ => return false,
        }
        let Some(Reverse((at, _, slot))) = self.queue.pop() else {
            return false;
        };
        let Some(kind) = self.slots[slot as usize].take() else {
            return true; // unreachable: every queued key's slot holds its event
        };
        self.free.push(slot);
        self.now = at;
        self.touched = None;
        match kind {
            Kind::Deliver { dst, src, datagram } => {
                let i = dst as usize;
                if i >= self.nodes.len() || !self.up[i] {
                    return true;
                }
                self.net_stats.delivered += 1;
                self.nodes[i].handle_datagram(self.now, NodeId(src), &datagram);
                self.after_input(i);
                self.touched = Some(i);
            }
            Kind::Wake { node } => {
                let i = node as usize;
                if self.timers[i] != Some(at) || !self.up[i] {
                    return true; // superseded by an earlier timer, or the node is down
                }
                self.timers[i] = None;
                self.nodes[i].handle_timeout(self.now);
                self.run_placement(i);
                self.after_input(i);
                self.touched = Some(i);
            }
            Kind::OracleTick => {
                if let Some(slot) = &mut self.oracle {
                    let found = slot.oracle.tick(self.now);
                    let (interval, delay) = (slot.interval, slot.delay);
                    for d in found {
                        self.push(self.now + delay, Kind::Discover(d));
                    }
                    self.push(self.now + interval, Kind::OracleTick);
                }
            }
            Kind::Discover(d) => {
                let i = d.subscriber.0 as usize;
                if i < self.nodes.len() && self.up[i] {
                    self.nodes[i].handle_discovery(self.now, d.object, d.primary, d.pos);
                    self.after_input(i);
                    self.touched = Some(i);
                }
            }
            Kind::Persist {
                node,
                incarnation,
                id,
                batch,
            } => {
                let i = node as usize;
                if let Some(s) = &mut self.stores {
                    if self.up[i] && s.incarnation[i] == incarnation {
                        s.stores[i].apply(&batch);
                        s.stats.applied += 1;
                        self.push(
                            self.now + COMPLETION_DELAY,
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
            Kind::Persisted {
                node,
                incarnation,
                id,
            } => {
                let i = node as usize;
                let current = self
                    .stores
                    .as_ref()
                    .is_some_and(|s| s.incarnation[i] == incarnation);
                if self.up[i] && current {
                    self.nodes[i].handle_persisted(self.now, id);
                    self.after_input(i);
                    self.touched = Some(i);
                } else if let Some(s) = &mut self.stores {
                    s.stats.unacknowledged += 1;
                }
            }
            Kind::Sample => {
                if let Some((c, interval)) = &mut self.collector {
                    c.sample(self.now, &self.nodes);
                    let interval = *interval;
                    self.push(self.now + interval, Kind::Sample);
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
        let until = self.now + d;
        self.run_until(until);
    }

    /// Runs every event up to and including `until`, then sets the clock to `until`.
    pub fn run_until(&mut self, until: Time) {
        while self.step(until) {}
        self.now = self.now.max(until);
    }

    /// Summaries of every node, bandwidth measured over `[from_s, to_s)` of the run.
    pub fn summaries(&self, from_s: f64, to_s: f64) -> Vec<NodeSummary> {
        self.nodes
            .iter()
            .map(|n| n.summary_window(self.now, from_s, to_s))
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
        let placements = (0..self.nodes.len())
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
