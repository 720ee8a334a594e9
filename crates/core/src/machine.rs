//! The one interface every sans-IO protocol core offers its drivers (BRIEF §2).
//!
//! A [`Machine`] never reads a clock or touches a socket: a driver hands it what arrived
//! ([`Machine::handle_datagram`]) and tells it when its deadline passed
//! ([`Machine::handle_timeout`]), then drains what it wants done: datagrams to send
//! ([`Machine::poll_transmit`]), when to wake it next ([`Machine::poll_timeout`]) and what
//! happened inside it ([`Machine::poll_event`]). The deterministic engine
//! (`worldmesh-engine`) drives every simulated machine through this trait — the simulator,
//! the harnesses, the tests that run several machines; the real runtime (`worldmesh-net`)
//! calls the node's methods of the same names with sockets and a clock.

use crate::{MessageClass, NodeId, Time};

/// A datagram a machine asks its driver to send.
///
/// `D` is the datagram's form: the framed bytes (`Vec<u8>`, the default), or a typed
/// message for a protocol embedded in another machine that frames it itself (the instance
/// failover peers of `worldmesh-instances`, framed by the node that hosts them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit<D = Vec<u8>> {
    /// Destination node.
    pub dst: NodeId,
    /// Traffic class (also in the frame header; here so drivers need not parse).
    pub class: MessageClass,
    /// The datagram (header + payload for bytes).
    pub datagram: D,
}

/// A sans-IO state machine: datagrams and timeouts in; datagrams, a deadline and events
/// out. Time is always an input.
pub trait Machine {
    /// What travels between machines of this kind (see [`Transmit`]).
    type Datagram;
    /// What the machine reports to its driver.
    type Event;

    /// A datagram from `from` arrived at `now`. Untrusted: a machine refuses what it
    /// cannot decode or must not accept, and never panics on it.
    fn handle_datagram(&mut self, now: Time, from: NodeId, datagram: Self::Datagram);

    /// The deadline from [`Machine::poll_timeout`] passed (`now` is at or after it; a
    /// machine also tolerates an early call and does what is due).
    fn handle_timeout(&mut self, now: Time);

    /// The next datagram to send, if any.
    fn poll_transmit(&mut self) -> Option<Transmit<Self::Datagram>>;

    /// When [`Machine::handle_timeout`] must be called next, if ever.
    fn poll_timeout(&self) -> Option<Time>;

    /// The next event for the driver, if any.
    fn poll_event(&mut self) -> Option<Self::Event>;
}
