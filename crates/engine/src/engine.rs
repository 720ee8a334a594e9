//! The engine: machines, a network model, one timer per machine, and a virtual clock.
//!
//! The engine keeps one [`EventQueue`] of datagram deliveries, machine wake-ups and events
//! of the caller's own kind `X` (a locator's tick, a store's completion, a scheduled
//! crash). [`Engine::step`] pops the next one; for a delivery or a wake-up it calls the
//! machine ([`Machine::handle_datagram`], [`Machine::handle_timeout`]) and tells the
//! caller which machine took the input, and the caller then drains the machine's outputs:
//! [`Engine::pump`] routes its datagrams, hands its events to the caller and re-arms its
//! timer; a caller with outputs of its own between those (the simulator's store batches
//! and locator operations) calls the parts, [`Engine::route_transmits`] and
//! [`Engine::arm_timer`], itself. An event of kind `X` comes back to the caller as
//! [`Step::Other`].
//!
//! **Timers.** Each machine has at most one armed wake-up: the earliest deadline it asked
//! for ([`Machine::poll_timeout`]) since its last wake-up. A deadline that moves later
//! leaves the earlier wake-up armed; the machine then finds nothing due (every machine
//! tolerates an early [`Machine::handle_timeout`]). This keeps one queue entry per deadline
//! instead of one per change.
//!
//! **Faults.** A crashed machine takes no input; datagrams reaching it are dropped, and so
//! are those still in flight from it if the engine was built with
//! [`Engine::dropping_from_crashed`] (by default they still arrive, as from a host whose
//! packets left before it died; with it, they are lost even if the machine is running
//! again when they land: each datagram carries its sender's incarnation). A restarted
//! machine is a new process under the same id ([`Engine::restart`]), a stopped one can go
//! on with its state ([`Engine::resume`]), a joining one takes the next id
//! ([`Engine::add`]). A datagram addressed to no machine is dropped when sent, before the
//! links see it. Loss, duplication, reordering (jitter) and partitions are the [`Links`]'
//! decisions.
//!
//! **Accounting.** Every datagram a machine queued is, at any time, exactly one of:
//! unroutable, lost or partitioned at send ([`NetworkStats`]), or — with its duplicate, if
//! the links made one ([`NetworkStats::duplicated`]) — delivered, dropped on arrival
//! ([`Dropped`]), or still in flight.
//!
//! **The caller's part.** After a [`Step::Datagram`] or [`Step::Timeout`], after
//! [`Engine::restart`], [`Engine::resume`] and [`Engine::add`], and after giving a machine
//! input through [`Engine::machines_mut`], the caller pumps that machine; otherwise its
//! datagrams wait and its timer is not re-armed. Pumping a crashed machine still sends
//! what it queued (a caller that models a process dying with its buffers discards them
//! itself).

use worldmesh_core::{Machine, NodeId, Time};

use crate::links::{Links, NetworkStats};
use crate::queue::EventQueue;

/// What waits in the queue.
pub(crate) enum Scheduled<D, X> {
    Deliver {
        dst: u32,
        src: u32,
        /// The sender's incarnation when it sent.
        incarnation: u32,
        datagram: D,
    },
    Wake {
        node: u32,
    },
    Other(X),
}

/// What one [`Engine::step`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Step<X> {
    /// The machine handled a datagram: drain its outputs.
    Datagram(NodeId),
    /// The machine handled its timeout: drain its outputs.
    Timeout(NodeId),
    /// An event of the caller's kind is due.
    Other(X),
    /// Nothing for the caller: a superseded wake-up, a wake-up of a stopped machine, or a
    /// datagram dropped on arrival.
    Nothing,
}

/// Datagrams the engine dropped on arrival (the network's own decisions are in
/// [`NetworkStats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dropped {
    /// Arrived at a crashed machine, or (with [`Engine::dropping_from_crashed`]) from one.
    pub at_crashed: u64,
    /// Cut by the links while in flight ([`Links::deliverable`]).
    pub cut_in_flight: u64,
    /// Addressed to no machine (dropped when sent, before the links saw them).
    pub unroutable: u64,
}

impl Dropped {
    /// Adds another count's figures (a parallel round's group) to these.
    pub(crate) fn add(&mut self, other: &Dropped) {
        self.at_crashed += other.at_crashed;
        self.cut_in_flight += other.cut_in_flight;
        self.unroutable += other.unroutable;
    }
}

/// Machines of type `M` over links `L`, with caller events of type `X`.
pub struct Engine<M: Machine, L, X = ()> {
    pub(crate) now: Time,
    pub(crate) machines: Vec<M>,
    pub(crate) up: Vec<bool>,
    /// Bumped at every crash, restart and resume: datagrams of an earlier incarnation are
    /// from a process that stopped.
    pub(crate) incarnation: Vec<u32>,
    pub(crate) timers: Vec<Option<Time>>,
    pub(crate) queue: EventQueue<Scheduled<M::Datagram, X>>,
    pub(crate) links: L,
    pub(crate) stats: NetworkStats,
    pub(crate) dropped: Dropped,
    pub(crate) drop_from_crashed: bool,
    /// The split of the machines for parallel rounds, made at the first round (and again
    /// when machines join or the thread count changes).
    pub(crate) plan: Option<crate::parallel::Plan>,
    /// The threads of parallel rounds, started at the first round.
    pub(crate) pool: Option<crate::pool::Pool>,
    /// Each group's lists from the last parallel round, emptied, for the next (one per
    /// group; they hold the machines' events, so the engine is `Send` only if those are).
    pub(crate) spare: Vec<crate::parallel::Lists<M::Datagram, X, M::Event>>,
}

impl<M, L, X> Engine<M, L, X>
where
    M: Machine,
    M::Datagram: Clone,
    L: Links<M::Datagram>,
{
    /// `machines` (machine `i` has id `i`) at time zero, every one running. Nothing is
    /// routed or armed yet: pump each machine once (its constructor may have queued
    /// output).
    pub fn new(machines: Vec<M>, links: L) -> Self {
        let n = machines.len();
        Self {
            now: Time::ZERO,
            machines,
            up: vec![true; n],
            incarnation: vec![0; n],
            timers: vec![None; n],
            queue: EventQueue::new(),
            links,
            stats: NetworkStats::default(),
            dropped: Dropped::default(),
            drop_from_crashed: false,
            plan: None,
            pool: None,
            spare: Vec::new(),
        }
    }

    /// Datagrams still in flight from a machine when it crashes are dropped on arrival
    /// (a model where a crash also loses what the host had queued).
    pub fn dropping_from_crashed(mut self) -> Self {
        self.drop_from_crashed = true;
        self
    }

    /// Current simulated time.
    pub fn now(&self) -> Time {
        self.now
    }

    /// The machines, by id.
    pub fn machines(&self) -> &[M] {
        &self.machines
    }

    /// The machines, mutably (inputs given this way are the caller's to pump).
    pub fn machines_mut(&mut self) -> &mut [M] {
        &mut self.machines
    }

    /// The links.
    pub fn links(&self) -> &L {
        &self.links
    }

    /// The links and the machines at once (to read one while changing the other).
    pub fn links_and_machines_mut(&mut self) -> (&L, &mut [M]) {
        (&self.links, &mut self.machines)
    }

    /// The links, mutably (to partition or heal between steps).
    pub fn links_mut(&mut self) -> &mut L {
        &mut self.links
    }

    /// What the network did so far.
    pub fn stats(&self) -> &NetworkStats {
        &self.stats
    }

    /// What the engine dropped on arrival so far.
    pub fn dropped(&self) -> Dropped {
        self.dropped
    }

    /// Events waiting in the queue.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// True if machine `id` runs.
    pub fn is_up(&self, id: NodeId) -> bool {
        self.up.get(id.0 as usize).copied().unwrap_or(false)
    }

    /// Schedules an event of the caller's kind at `at` (not before now).
    pub fn schedule(&mut self, at: Time, event: X) {
        self.queue.push(at.max(self.now), Scheduled::Other(event));
    }

    /// Crashes machine `id`: it takes no input until restarted or resumed (an unknown id
    /// is ignored).
    pub fn crash(&mut self, id: NodeId) {
        let i = id.0 as usize;
        if i < self.machines.len() {
            self.up[i] = false;
            self.incarnation[i] += 1;
        }
    }

    /// Runs machine `id` again with the state it had when it stopped (a paused process
    /// resumed, or a member that was not yet started); what reached it meanwhile is gone.
    /// The caller pumps it.
    /// A running machine, or an unknown id, is left as it is.
    pub fn resume(&mut self, id: NodeId) {
        let i = id.0 as usize;
        if i < self.machines.len() && !self.up[i] {
            self.up[i] = true;
            self.incarnation[i] += 1;
            self.timers[i] = None;
        }
    }

    /// Replaces machine `id` by `machine`, a new process under the same id, running.
    /// Datagrams in flight to the old process reach the new one, as on a real network.
    /// The caller pumps it.
    ///
    /// # Panics
    /// If `id` names no machine (a caller's bug, not input).
    pub fn restart(&mut self, id: NodeId, machine: M) {
        let i = id.0 as usize;
        assert!(i < self.machines.len(), "restart of an unknown machine");
        self.machines[i] = machine;
        self.up[i] = true;
        self.incarnation[i] += 1;
        self.timers[i] = None;
    }

    /// Adds a running machine under the next id, which it returns. The caller pumps it.
    pub fn add(&mut self, machine: M) -> NodeId {
        self.machines.push(machine);
        self.up.push(true);
        self.incarnation.push(0);
        self.timers.push(None);
        NodeId((self.machines.len() - 1) as u32)
    }

    /// Routes every datagram machine `id` queued through the links.
    ///
    /// # Panics
    /// If `id` names no machine (a caller's bug, not input), like [`Engine::pump`] and
    /// [`Engine::arm_timer`].
    pub fn route_transmits(&mut self, id: NodeId) {
        let i = id.0 as usize;
        let incarnation = self.incarnation[i];
        while let Some(t) = self.machines[i].poll_transmit() {
            if t.dst.0 as usize >= self.machines.len() {
                self.dropped.unroutable += 1;
                continue;
            }
            let fate = self.links.route(self.now, id, &t);
            let (now, queue) = (self.now, &mut self.queue);
            self.stats.count_sent(fate, t.datagram, |delay, datagram| {
                queue.push(
                    now + delay,
                    Scheduled::Deliver {
                        dst: t.dst.0,
                        src: id.0,
                        incarnation,
                        datagram,
                    },
                );
            });
        }
    }

    /// Arms machine `id`'s wake-up at its deadline if none is armed or it is earlier
    /// than the armed one (see the module docs). A deadline already past is armed at now.
    pub fn arm_timer(&mut self, id: NodeId) {
        let i = id.0 as usize;
        if let Some(at) = self.machines[i].poll_timeout()
            && self.timers[i].is_none_or(|cur| at < cur)
        {
            let at = at.max(self.now);
            self.timers[i] = Some(at);
            self.queue.push(at, Scheduled::Wake { node: id.0 });
        }
    }

    /// Drains machine `id` after an input: routes its datagrams, hands each of its
    /// events to `on_event` (with the machine, the time and its id), and re-arms its timer.
    pub fn pump(&mut self, id: NodeId, mut on_event: impl FnMut(&mut M, Time, NodeId, M::Event)) {
        self.route_transmits(id);
        let now = self.now;
        let m = &mut self.machines[id.0 as usize];
        while let Some(e) = m.poll_event() {
            on_event(m, now, id, e);
        }
        self.arm_timer(id);
    }

    /// Processes the next event if it is due at or before `until` and returns what it
    /// did; `None` when nothing is due (the clock then stays where it is).
    pub fn step(&mut self, until: Time) -> Option<Step<X>> {
        let (at, event) = self.queue.pop_due(until)?;
        debug_assert!(at >= self.now, "the clock never goes back");
        self.now = self.now.max(at);
        let at = self.now;
        Some(match event {
            Scheduled::Deliver {
                dst,
                src,
                incarnation,
                datagram,
            } => {
                // Both ids name machines: unroutable datagrams never enter the queue.
                let (i, s) = (dst as usize, src as usize);
                let (to, from) = (NodeId(dst), NodeId(src));
                let sender_gone =
                    self.drop_from_crashed && (!self.up[s] || self.incarnation[s] != incarnation);
                if !self.up[i] || sender_gone {
                    self.dropped.at_crashed += 1;
                    return Some(Step::Nothing);
                }
                if !self.links.deliverable(at, from, to) {
                    self.dropped.cut_in_flight += 1;
                    return Some(Step::Nothing);
                }
                self.stats.delivered += 1;
                self.machines[i].handle_datagram(at, from, datagram);
                Step::Datagram(to)
            }
            Scheduled::Wake { node } => {
                let i = node as usize;
                if self.timers[i] != Some(at) || !self.up[i] {
                    return Some(Step::Nothing); // superseded, or the machine is down
                }
                self.timers[i] = None;
                self.machines[i].handle_timeout(at);
                Step::Timeout(NodeId(node))
            }
            Scheduled::Other(x) => Step::Other(x),
        })
    }

    /// Moves the clock to `until` if it is later. Call it after running what was due by
    /// then (the clock never goes back past a queued event).
    pub fn advance_to(&mut self, until: Time) {
        debug_assert!(
            until <= self.now || self.queue.next_at().is_none_or(|t| t >= until),
            "advance_to({until:?}) with events due before it"
        );
        self.now = self.now.max(until);
    }
}
