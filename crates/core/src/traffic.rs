//! Message classes and traffic counters.
//!
//! Bandwidth is a first-class metric (BRIEF §2.6): every datagram a node sends or receives
//! is counted by class, in bytes as they go on the wire. "On the wire" here means the UDP
//! payload plus [`UDP_IPV4_OVERHEAD`] bytes of IPv4 and UDP headers, the accounting the
//! Colyseus evaluation uses (paper `000` §6.3) and Pack(b) of paper `004` §5.3.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Bytes of IPv4 (20) + UDP (8) headers added to every datagram in the wire counts.
pub const UDP_IPV4_OVERHEAD: u64 = 28;

/// What a message is for, the split every bandwidth figure uses (paper `000` §6.3, Fig. 9).
#[derive(
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Debug,
    Serialize,
    Deserialize,
    bitcode::Encode,
    bitcode::Decode,
)]
#[repr(u8)]
pub enum MessageClass {
    /// State and delta updates of objects, replica fetches and interest registrations.
    ObjectUpdate = 0,
    /// Publications and subscriptions routed through the locator overlay.
    LocatorRouting = 1,
    /// Matches delivered from a rendezvous point to a subscriber.
    MatchDelivery = 2,
    /// Overlay upkeep: pings, joins, leaves, link maintenance.
    OverlayMaintenance = 3,
    /// Migration of game state between nodes and name-service traffic.
    Migration = 4,
    /// Everything else: handshakes, membership, heartbeats, reports.
    Control = 5,
}

impl MessageClass {
    /// Every class, in wire order.
    pub const ALL: [MessageClass; 6] = [
        MessageClass::ObjectUpdate,
        MessageClass::LocatorRouting,
        MessageClass::MatchDelivery,
        MessageClass::OverlayMaintenance,
        MessageClass::Migration,
        MessageClass::Control,
    ];

    /// The class with wire code `b`, if any.
    pub fn from_u8(b: u8) -> Option<Self> {
        Self::ALL.get(usize::from(b)).copied()
    }

    /// Short snake-case name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            MessageClass::ObjectUpdate => "object_update",
            MessageClass::LocatorRouting => "locator_routing",
            MessageClass::MatchDelivery => "match_delivery",
            MessageClass::OverlayMaintenance => "overlay_maintenance",
            MessageClass::Migration => "migration",
            MessageClass::Control => "control",
        }
    }
}

impl fmt::Display for MessageClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Bytes and packets of one direction and class.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct Count {
    /// Bytes on the wire (payload + [`UDP_IPV4_OVERHEAD`] per packet).
    pub bytes: u64,
    /// Packets (datagrams).
    pub packets: u64,
}

impl Count {
    /// Adds one datagram of `payload_len` bytes.
    pub fn add_datagram(&mut self, payload_len: usize) {
        self.bytes += payload_len as u64 + UDP_IPV4_OVERHEAD;
        self.packets += 1;
    }

    /// Adds another count.
    pub fn merge(&mut self, o: Count) {
        self.bytes += o.bytes;
        self.packets += o.packets;
    }
}

/// Per-class sent and received counts of one node.
#[derive(Clone, PartialEq, Eq, Debug, Default, Serialize, Deserialize)]
pub struct TrafficCounters {
    /// Sent, indexed by `MessageClass as usize`.
    pub sent: [Count; 6],
    /// Received, indexed by `MessageClass as usize`.
    pub received: [Count; 6],
}

impl TrafficCounters {
    /// Records a sent datagram.
    pub fn on_send(&mut self, class: MessageClass, payload_len: usize) {
        self.sent[class as usize].add_datagram(payload_len);
    }

    /// Records a received datagram.
    pub fn on_receive(&mut self, class: MessageClass, payload_len: usize) {
        self.received[class as usize].add_datagram(payload_len);
    }

    /// Total sent over all classes.
    pub fn total_sent(&self) -> Count {
        let mut c = Count::default();
        self.sent.iter().for_each(|x| c.merge(*x));
        c
    }

    /// Total received over all classes.
    pub fn total_received(&self) -> Count {
        let mut c = Count::default();
        self.received.iter().for_each(|x| c.merge(*x));
        c
    }

    /// Adds another node's counters (for aggregates).
    pub fn merge(&mut self, o: &TrafficCounters) {
        for i in 0..6 {
            self.sent[i].merge(o.sent[i]);
            self.received[i].merge(o.received[i]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_header_overhead_per_class() {
        let mut t = TrafficCounters::default();
        t.on_send(MessageClass::ObjectUpdate, 100);
        t.on_send(MessageClass::Control, 10);
        t.on_receive(MessageClass::ObjectUpdate, 50);
        assert_eq!(
            t.sent[0],
            Count {
                bytes: 128,
                packets: 1
            }
        );
        assert_eq!(
            t.total_sent(),
            Count {
                bytes: 128 + 38,
                packets: 2
            }
        );
        assert_eq!(t.total_received().bytes, 78);
        for c in MessageClass::ALL {
            assert_eq!(MessageClass::from_u8(c as u8), Some(c));
        }
        assert_eq!(MessageClass::from_u8(6), None);
    }
}
