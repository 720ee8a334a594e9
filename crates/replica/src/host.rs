//! A replica manager on its own as a [`Machine`]: what a test network or a model drives
//! when it needs replication without the rest of a node (membership, locator, adoption,
//! wire framing).
//!
//! [`ReplicaHost`] runs the manager's frame every `frame` of virtual time and sends what
//! the frame queued; a packet in is handled at once, and one the manager marks urgent (a
//! fetch, or its answer) is answered at once. Datagrams are [`Packet`]s, not bytes: the
//! node frames them, a test does not need to. The engine (`worldmesh-engine`) delivers
//! them, so the same timing rules hold as for whole nodes.

use std::collections::VecDeque;
use std::time::Duration;

use worldmesh_core::{DetRng, Machine, MessageClass, NodeId, Time, Transmit};

use crate::manager::ReplicaManager;
use crate::message::Packet;
use crate::object::GameObject;

/// A [`ReplicaManager`] driven by frames, as a [`Machine`] (see the module docs).
pub struct ReplicaHost<O: GameObject> {
    /// The manager (tests call its API between inputs).
    pub rm: ReplicaManager<O>,
    /// The static world its objects think in.
    pub world: O::World,
    rng: DetRng,
    frame: Duration,
    next_frame: Time,
    out: VecDeque<Transmit<Packet>>,
}

impl<O: GameObject> ReplicaHost<O> {
    /// A host of `rm` whose first frame runs at time zero, then every `frame`.
    pub fn new(rm: ReplicaManager<O>, world: O::World, rng: DetRng, frame: Duration) -> Self {
        Self {
            rm,
            world,
            rng,
            frame,
            next_frame: Time::ZERO,
            out: VecDeque::new(),
        }
    }

    /// Queues everything the manager has to send (after an input given by hand).
    pub fn flush(&mut self, now: Time) {
        for (dst, p) in self.rm.flush(now) {
            self.send(dst, p);
        }
    }

    /// Queues `packet` for `dst`, as if the manager had.
    pub fn send(&mut self, dst: NodeId, packet: Packet) {
        self.out.push_back(Transmit {
            dst,
            class: MessageClass::ObjectUpdate,
            datagram: packet,
        });
    }

    /// Runs the next frame at `at` (a host resumed after a stop).
    pub fn next_frame_at(&mut self, at: Time) {
        self.next_frame = at;
    }
}

impl<O: GameObject> Machine for ReplicaHost<O> {
    type Datagram = Packet;
    type Event = ();

    fn handle_datagram(&mut self, now: Time, from: NodeId, p: Packet) {
        if self.rm.handle_packet(now, from, p, &self.world) {
            for p in self.rm.flush_peer(now, from) {
                self.send(from, p);
            }
        }
    }

    fn handle_timeout(&mut self, now: Time) {
        if now < self.next_frame {
            return;
        }
        self.rm.frame(now, self.frame, &mut self.rng, &self.world);
        self.flush(now);
        self.next_frame = now + self.frame;
    }

    fn poll_transmit(&mut self) -> Option<Transmit<Packet>> {
        self.out.pop_front()
    }

    fn poll_timeout(&self) -> Option<Time> {
        Some(self.next_frame)
    }

    fn poll_event(&mut self) -> Option<()> {
        None
    }
}
