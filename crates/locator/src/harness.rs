//! A deterministic multi-node harness: N locators on the one engine
//! (`worldmesh_engine`), with per-link delay (uniform or from a [`LatencyMatrix`]), loss,
//! crashes, joins and leaves. Datagrams go through the real wire encoding, so byte counts
//! are what a network would carry.

use std::time::Duration;

use worldmesh_core::{DetRng, LatencyMatrix, Machine, NodeId, Time};
use worldmesh_engine::{Engine, Fate, Links, Step};

use crate::config::LocatorConfig;
use crate::locator::{Discovery, Locator, LocatorError, Op, Output, PushRequest, Transmit};
use crate::workload::Workload;

/// Link delays.
#[derive(Clone, Debug)]
pub enum Delay {
    /// The same one-way delay on every link.
    Uniform(Duration),
    /// One-way delay = RTT/2 between the matrix rows the nodes map onto.
    Matrix {
        /// The RTT matrix.
        matrix: LatencyMatrix,
        /// Row of each node.
        hosts: Vec<usize>,
    },
}

/// The harness's links: a fixed delay per link, and independent loss.
struct Wire {
    delay: Delay,
    loss: f64,
    rng: DetRng,
}

impl Links<Vec<u8>> for Wire {
    fn route(&mut self, _now: Time, src: NodeId, t: &Transmit) -> Fate {
        let (a, b) = (src.0 as usize, t.dst.0 as usize);
        let delay = match &self.delay {
            Delay::Uniform(d) => *d,
            Delay::Matrix { matrix, hosts } => match (hosts.get(a), hosts.get(b)) {
                (Some(&ra), Some(&rb)) => matrix.one_way(ra, rb),
                _ => return Fate::Partitioned, // no such node
            },
        };
        if self.loss > 0.0 && self.rng.chance(self.loss) {
            return Fate::Lost;
        }
        Fate::Deliver(delay, None)
    }
}

/// One simulated node.
pub struct Slot {
    /// Its locator.
    pub loc: Locator,
    /// Discoveries it produced, with their time.
    pub discoveries: Vec<(Time, Discovery)>,
    /// Push requests it received as a primary's node, with their time.
    pub pushes: Vec<(Time, PushRequest)>,
}

impl Machine for Slot {
    type Datagram = Vec<u8>;
    type Event = Output;

    fn handle_datagram(&mut self, now: Time, from: NodeId, datagram: Vec<u8>) {
        self.loc.handle_datagram(now, from, &datagram);
    }

    fn handle_timeout(&mut self, now: Time) {
        self.loc.handle_timeout(now);
    }

    fn poll_transmit(&mut self) -> Option<Transmit> {
        self.loc.poll_transmit()
    }

    fn poll_timeout(&self) -> Option<Time> {
        self.loc.poll_timeout()
    }

    fn poll_event(&mut self) -> Option<Output> {
        Machine::poll_event(&mut self.loc)
    }
}

/// Files a locator's output in its slot.
fn file(slot: &mut Slot, now: Time, _: NodeId, out: Output) {
    match out {
        Output::Discovery(d) => slot.discoveries.push((now, d)),
        Output::Push(p) => slot.pushes.push((now, p)),
    }
}

/// The harness: locators on the one engine; a crash also loses what the crashed node
/// still had in flight.
pub struct Harness {
    engine: Engine<Slot, Wire>,
}

impl Harness {
    /// `total` nodes with ids `0..total`; the first `initial` form the ring at time zero.
    /// Fails if the configuration is unusable (e.g. invalid world bounds), or if a
    /// latency-matrix delay does not name a row for every node.
    pub fn new(
        total: usize,
        initial: usize,
        cfg: &LocatorConfig,
        delay: Delay,
        loss: f64,
        seed: u64,
    ) -> Result<Self, LocatorError> {
        if let Delay::Matrix { matrix, hosts } = &delay
            && (hosts.len() < total || hosts.iter().any(|h| *h >= matrix.len()))
        {
            return Err(LocatorError::BadHarness(
                "latency matrix rows do not cover every node".into(),
            ));
        }
        let ids: Vec<NodeId> = (0..total as u32).map(NodeId).collect();
        let ring = &ids[..initial.min(total)];
        let mut nodes = Vec::with_capacity(total);
        for id in &ids {
            nodes.push(Slot {
                loc: Locator::new(*id, cfg.clone(), &ids, ring, seed, Time::ZERO)?,
                discoveries: Vec::new(),
                pushes: Vec::new(),
            });
        }
        let wire = Wire {
            delay,
            loss,
            rng: DetRng::new(seed).fork(0xAB),
        };
        let mut h = Self {
            engine: Engine::new(nodes, wire).dropping_from_crashed(),
        };
        for id in ids {
            h.engine.pump(id, file);
        }
        Ok(h)
    }

    /// Current time.
    pub fn now(&self) -> Time {
        self.engine.now()
    }

    /// The nodes, indexed by `NodeId.0`.
    pub fn nodes(&self) -> &[Slot] {
        self.engine.machines()
    }

    /// The nodes, mutably (inputs given this way are not pumped: tests that poke one).
    pub fn nodes_mut(&mut self) -> &mut [Slot] {
        self.engine.machines_mut()
    }

    /// False once node `i` crashed.
    pub fn is_up(&self, i: usize) -> bool {
        self.engine.is_up(NodeId(i as u32))
    }

    /// Datagrams delivered.
    pub fn delivered(&self) -> u64 {
        self.engine.stats().delivered
    }

    /// Datagrams lost: at random, or sent to or from a crashed node.
    pub fn lost(&self) -> u64 {
        self.engine.stats().lost + self.engine.dropped().at_crashed
    }

    /// Runs every event up to and including `until`.
    pub fn run_until(&mut self, until: Time) {
        while let Some(step) = self.engine.step(until) {
            if let Step::Datagram(id) | Step::Timeout(id) = step {
                self.engine.pump(id, file);
            }
        }
        self.engine.advance_to(until);
    }

    /// Feeds node `i` its operations of this frame.
    pub fn apply_ops(&mut self, i: usize, ops: Vec<Op>) {
        if !self.is_up(i) {
            return;
        }
        let now = self.now();
        self.engine.machines_mut()[i].loc.apply_ops(now, ops);
        self.engine.pump(NodeId(i as u32), file);
    }

    /// Crashes node `i`: it stops, and messages to and from it are lost.
    pub fn crash(&mut self, i: usize) {
        self.engine.crash(NodeId(i as u32));
    }

    /// Node `i` leaves the ring gracefully.
    pub fn leave(&mut self, i: usize) {
        let now = self.now();
        self.engine.machines_mut()[i].loc.leave(now);
        self.engine.pump(NodeId(i as u32), file);
    }

    /// Node `i` joins through `contact`.
    pub fn join(&mut self, i: usize, contact: usize) {
        let now = self.now();
        self.engine.machines_mut()[i]
            .loc
            .join(now, NodeId(contact as u32));
        self.engine.pump(NodeId(i as u32), file);
    }

    /// Runs the workload for `duration` in frames of `frame`, moving players each frame
    /// and feeding every live node its operations.
    pub fn run_workload(&mut self, wl: &mut Workload, duration: Duration, frame: Duration) {
        let end = self.now() + duration;
        while self.now() + frame <= end {
            let t = self.now() + frame;
            self.run_until(t);
            wl.step(frame.as_secs_f32());
            for i in 0..self.nodes().len() {
                let ops = wl.ops(NodeId(i as u32));
                self.apply_ops(i, ops);
            }
        }
    }
}
