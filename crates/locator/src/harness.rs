//! A deterministic multi-node harness: N locators, a message queue with per-link delay
//! (uniform or from a [`LatencyMatrix`]), loss, crashes, joins and leaves. Datagrams go
//! through the real wire encoding, so byte counts are what a network would carry.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use worldmesh_core::{DetRng, LatencyMatrix, NodeId, Time};

use crate::config::LocatorConfig;
use crate::locator::{Discovery, Locator, LocatorError, Op, PushRequest};
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

enum Ev {
    Msg { from: usize, to: usize, data: Vec<u8> },
    Timer(usize),
}

/// A queued event, ordered by time and then by the order it was queued in (so the heap
/// pops it earliest first, ties in queueing order).
struct Queued {
    at: Time,
    seq: u64,
    ev: Ev,
}

impl PartialEq for Queued {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}

impl Eq for Queued {}

impl PartialOrd for Queued {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for Queued {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

/// One simulated node.
pub struct Slot {
    /// Its locator.
    pub loc: Locator,
    /// False after a crash.
    pub alive: bool,
    /// Discoveries it produced, with their time.
    pub discoveries: Vec<(Time, Discovery)>,
    /// Push requests it received as a primary's node, with their time.
    pub pushes: Vec<(Time, PushRequest)>,
    timer: Option<Time>,
}

/// The harness.
pub struct Harness {
    /// Current time.
    pub now: Time,
    /// The nodes, indexed by `NodeId.0`.
    pub nodes: Vec<Slot>,
    queue: BinaryHeap<Reverse<Queued>>,
    seq: u64,
    rng: DetRng,
    delay: Delay,
    loss: f64,
    /// Datagrams delivered and lost.
    pub delivered: u64,
    /// See `delivered`.
    pub lost: u64,
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
                alive: true,
                discoveries: Vec::new(),
                pushes: Vec::new(),
                timer: None,
            });
        }
        let mut h = Self {
            now: Time::ZERO,
            nodes,
            queue: BinaryHeap::new(),
            seq: 0,
            rng: DetRng::new(seed).fork(0xAB),
            delay,
            loss,
            delivered: 0,
            lost: 0,
        };
        for i in 0..total {
            h.pump(i);
        }
        Ok(h)
    }

    fn push(&mut self, t: Time, ev: Ev) {
        self.seq += 1;
        self.queue.push(Reverse(Queued {
            at: t,
            seq: self.seq,
            ev,
        }));
    }

    fn link_delay(&self, a: usize, b: usize) -> Duration {
        match &self.delay {
            Delay::Uniform(d) => *d,
            Delay::Matrix { matrix, hosts } => matrix.one_way(hosts[a], hosts[b]),
        }
    }

    /// Collects a node's outputs: datagrams into the queue, discoveries into its slot,
    /// and its next timer.
    fn pump(&mut self, i: usize) {
        while let Some(t) = self.nodes[i].loc.poll_transmit() {
            let to = t.dst.0 as usize;
            if to >= self.nodes.len() {
                continue;
            }
            if self.loss > 0.0 && self.rng.chance(self.loss) {
                self.lost += 1;
                continue;
            }
            let at = self.now + self.link_delay(i, to);
            self.push(
                at,
                Ev::Msg {
                    from: i,
                    to,
                    data: t.datagram,
                },
            );
        }
        let now = self.now;
        while let Some(d) = self.nodes[i].loc.poll_discovery() {
            self.nodes[i].discoveries.push((now, d));
        }
        while let Some(p) = self.nodes[i].loc.poll_push() {
            self.nodes[i].pushes.push((now, p));
        }
        if let Some(t) = self.nodes[i].loc.poll_timeout()
            && self.nodes[i].timer != Some(t)
        {
            self.nodes[i].timer = Some(t);
            self.push(t.max(self.now), Ev::Timer(i));
        }
    }

    /// Runs every event up to and including `until`.
    pub fn run_until(&mut self, until: Time) {
        while self.queue.peek().is_some_and(|q| q.0.at <= until) {
            let Some(Reverse(Queued { at: t, ev, .. })) = self.queue.pop() else {
                break;
            };
            self.now = self.now.max(t);
            match ev {
                Ev::Msg { from, to, data } => {
                    if !self.nodes[to].alive || !self.nodes[from].alive {
                        self.lost += 1;
                        continue;
                    }
                    self.delivered += 1;
                    let now = self.now;
                    self.nodes[to]
                        .loc
                        .handle_datagram(now, NodeId(from as u32), &data);
                    self.pump(to);
                }
                Ev::Timer(i) => {
                    if self.nodes[i].timer != Some(t) || !self.nodes[i].alive {
                        continue;
                    }
                    self.nodes[i].timer = None;
                    let now = self.now;
                    self.nodes[i].loc.handle_timeout(now);
                    self.pump(i);
                }
            }
        }
        self.now = self.now.max(until);
    }

    /// Feeds node `i` its operations of this frame.
    pub fn apply_ops(&mut self, i: usize, ops: Vec<Op>) {
        if !self.nodes[i].alive {
            return;
        }
        let now = self.now;
        self.nodes[i].loc.apply_ops(now, ops);
        self.pump(i);
    }

    /// Crashes node `i`: it stops, and messages to and from it are lost.
    pub fn crash(&mut self, i: usize) {
        self.nodes[i].alive = false;
    }

    /// Node `i` leaves the ring gracefully.
    pub fn leave(&mut self, i: usize) {
        let now = self.now;
        self.nodes[i].loc.leave(now);
        self.pump(i);
    }

    /// Node `i` joins through `contact`.
    pub fn join(&mut self, i: usize, contact: usize) {
        let now = self.now;
        self.nodes[i].loc.join(now, NodeId(contact as u32));
        self.pump(i);
    }

    /// Runs the workload for `duration` in frames of `frame`, moving players each frame
    /// and feeding every live node its operations.
    pub fn run_workload(&mut self, wl: &mut Workload, duration: Duration, frame: Duration) {
        let end = self.now + duration;
        while self.now + frame <= end {
            let t = self.now + frame;
            self.run_until(t);
            wl.step(frame.as_secs_f32());
            for i in 0..self.nodes.len() {
                let ops = wl.ops(NodeId(i as u32));
                self.apply_ops(i, ops);
            }
        }
    }
}
