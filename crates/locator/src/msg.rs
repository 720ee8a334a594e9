//! Locator wire messages (bitcode, inside `worldmesh_core::wire` frames), encoded and
//! decoded by [`LocatorCodec`].
//!
//! Decoding is bounded twice: the frame header caps the payload length before bitcode
//! sees it, and bitcode never allocates beyond the bytes it has. After decoding, every
//! message is validated by the receiver ([`crate::Locator::handle_message`]) — geometry,
//! TTLs, hop counts, claimed key ranges, list lengths — and refused with a counter.

use worldmesh_core::{Aabb, MessageClass, NodeId, ObjectId, Point3, Time};

use crate::index::SubKey;
use crate::keyspace::Key;

mod codec;

pub use codec::LocatorCodec;

/// A ring member as others see it: its id and its position.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, bitcode::Encode, bitcode::Decode)]
pub struct Peer {
    /// The node.
    pub id: NodeId,
    /// Its ring position (it owns `(pred, pos]`).
    pub pos: Key,
}

/// A subscription travelling through the overlay.
#[derive(Clone, Copy, Debug, PartialEq, bitcode::Encode, bitcode::Decode)]
pub struct SubItem {
    /// Identity (subscriber node + sequence).
    pub key: SubKey,
    /// The (predicted) box.
    pub bbox: Aabb,
    /// The unpredicted interest this box was enlarged from (the node's areas of interest,
    /// with its discovery margin). A rendezvous that matches a publication inside it asks
    /// the publication's primary to push the object's state to the subscriber at once
    /// (see [`LocatorMsg::Push`]). Must lie inside `bbox`.
    pub core: Aabb,
    /// Time to live at the rendezvous, ms.
    pub ttl_ms: u32,
    /// `rangedht`: the key arc `[lo, hi]` it spans; `dht`: the region key twice.
    pub lo: Key,
    /// See `lo`.
    pub hi: Key,
    /// When the subscriber sent it (for discovery-latency accounting).
    pub sent: Time,
    /// When it reached its first rendezvous (set there).
    pub reached: Time,
}

/// The path of a range publication relative to its position: on each axis, the offset as
/// a multiple of 1/127 of the publication margin (`LocatorConfig::pub_move`, the same on
/// every node). Three bytes on the wire, and no offset can exceed the margin on any axis:
/// that bound is what lets a range publication be stored at the owner of its position
/// alone (every subscription is enlarged by at least the margin on every side, so one
/// whose interest meets the path contains the position; see `Locator::publish`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, bitcode::Encode, bitcode::Decode)]
pub struct PathOffset(pub [i8; 3]);

impl PathOffset {
    /// The offset from `pos` towards `reach`, cut to `margin` on every axis (shortened
    /// along its direction) and quantised; `None` if it rounds to nothing or an input is
    /// not finite.
    pub fn between(pos: Point3, reach: Point3, margin: f32) -> Option<Self> {
        if !(pos.is_finite() && reach.is_finite() && margin.is_finite() && margin > 0.0) {
            return None;
        }
        let d = [reach.x - pos.x, reach.y - pos.y, reach.z - pos.z];
        let longest = d.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let scale = if longest > margin { margin / longest } else { 1.0 };
        let q = d.map(|v| (v * scale / margin * 127.0).round().clamp(-127.0, 127.0) as i8);
        (q != [0, 0, 0]).then_some(Self(q))
    }

    /// The end of the path that starts at `pos` (steps of −128 count as −127).
    pub fn end(self, pos: Point3, margin: f32) -> Point3 {
        let step = margin / 127.0;
        let o = self.0.map(|q| f32::from(q.max(-127)) * step);
        Point3::new(pos.x + o[0], pos.y + o[1], pos.z + o[2])
    }
}

/// A publication travelling through the overlay.
#[derive(Clone, Copy, Debug, PartialEq, bitcode::Encode, bitcode::Decode)]
pub struct PubItem {
    /// The object.
    pub object: ObjectId,
    /// Its primary's node.
    pub primary: NodeId,
    /// Its position.
    pub pos: Point3,
    /// Its predicted path, for a range publication of a moving object (paper `000` §3
    /// "publications (points or ranges)", §6.2): the publication covers the segment from
    /// `pos` to `pos` + this offset. `None` for a point publication.
    pub path: Option<PathOffset>,
    /// Type tag.
    pub kind: u8,
    /// Time to live, ms.
    pub ttl_ms: u32,
}

/// What a routed message carries.
#[derive(Clone, Copy, Debug, PartialEq, bitcode::Encode, bitcode::Decode)]
pub enum Payload {
    /// A subscription to store and match.
    Sub(SubItem),
    /// A publication to store and match.
    Pub(PubItem),
    /// A request for a long link: the owner of `key` answers with [`LocatorMsg::LinkAck`].
    LinkReq,
}

/// A message routed greedily towards the owner of `key`.
#[derive(Clone, Copy, Debug, PartialEq, bitcode::Encode, bitcode::Decode)]
pub struct Routed {
    /// The node that injected it.
    pub origin: NodeId,
    /// Destination key.
    pub key: Key,
    /// Overlay hops so far.
    pub hops: u8,
    /// Set by a sender that believes the receiver owns `key`.
    pub last: bool,
    /// How many times a receiver marked `last` found it did not own `key` (views of the
    /// ring disagree during churn); after [`Routed::MAX_BOUNCES`] the receiver keeps it.
    pub bounces: u8,
    /// Contents.
    pub payload: Payload,
}

impl Routed {
    /// Bounces after which a disputed message is stored where it is (soft state heals).
    pub const MAX_BOUNCES: u8 = 2;
}

/// One matched publication, delivered to a subscriber.
#[derive(Clone, Copy, Debug, PartialEq, bitcode::Encode, bitcode::Decode)]
pub struct MatchItem {
    /// The object.
    pub object: ObjectId,
    /// Its primary's node.
    pub primary: NodeId,
    /// Its published position.
    pub pos: Point3,
    /// Its published path (see [`PubItem::path`]).
    pub path: Option<PathOffset>,
    /// How long the subscriber may cache it, ms.
    pub ttl_ms: u32,
}

/// A request to a primary's node: send `subscriber` the state of `object` now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, bitcode::Encode, bitcode::Decode)]
pub struct PushItem {
    /// The object (a primary of the receiving node).
    pub object: ObjectId,
    /// The node whose unpredicted interest holds the object.
    pub subscriber: NodeId,
}

/// Ring neighbourhood summary carried by pings and pongs.
#[derive(Clone, Debug, PartialEq, bitcode::Encode, bitcode::Decode)]
pub struct Hello {
    /// Sender's position.
    pub pos: Key,
    /// Sender's predecessor.
    pub pred: Option<Peer>,
    /// Sender's successors.
    pub succs: Vec<Peer>,
}

/// Soft state handed to a new owner on join or leave.
#[derive(Clone, Debug, PartialEq, bitcode::Encode, bitcode::Decode)]
pub struct Handoff {
    /// Subscriptions with their remaining TTL.
    pub subs: Vec<SubItem>,
    /// Publications with their remaining TTL.
    pub pubs: Vec<PubItem>,
}

/// Every locator message.
#[derive(Clone, Debug, PartialEq, bitcode::Encode, bitcode::Decode)]
pub enum LocatorMsg {
    /// A greedily routed message (publication, subscription, link request).
    Route(Routed),
    /// A `rangedht` subscription spreading over the successors across its key range.
    Spread {
        /// The subscription.
        sub: SubItem,
        /// Whether the receiver continues the spreading beyond its own successors.
        relay: bool,
        /// The key after which the sender believes the receiver's range starts (the
        /// sender's position or the previous target's). A receiver whose predecessor sits
        /// strictly after `prev` (a node the sender's stale successor list skipped, e.g.
        /// after a leave-rejoin move) passes the subscription back to that predecessor.
        prev: u64,
    },
    /// Matches for the receiver's subscriptions, with the sender's range (a route hint).
    Matches {
        /// Sender's range start (exclusive).
        lo: Key,
        /// Sender's position.
        hi: Key,
        /// The matches.
        items: Vec<MatchItem>,
    },
    /// Rendezvous → primary's node: matches that fell inside the subscriber's unpredicted
    /// interest; the primary pushes the state to the subscriber without waiting for its
    /// fetch (saves the subscriber's leg to the primary on sudden appearances).
    Push {
        /// The matches.
        items: Vec<PushItem>,
    },
    /// The sender owns `(lo, hi]`: a route-cache entry for the receiver.
    RouteHint {
        /// Range start (exclusive).
        lo: Key,
        /// Range end.
        hi: Key,
    },
    /// Liveness probe with ring neighbourhood.
    Ping(Hello),
    /// Answer to a ping.
    Pong(Hello),
    /// Answer to a long-link request.
    LinkAck {
        /// The owner's position.
        pos: Key,
    },
    /// Ask the receiver to split its range with the sender.
    JoinReq,
    /// The receiver joins at `pos` between `pred` and `succs[0]`.
    JoinAck {
        /// Assigned position.
        pos: Key,
        /// Predecessor.
        pred: Option<Peer>,
        /// Successors (the splitting node first).
        succs: Vec<Peer>,
    },
    /// Graceful leave: the sender's neighbours close the gap.
    Leave {
        /// The leaver's predecessor.
        pred: Option<Peer>,
        /// The leaver's successors.
        succs: Vec<Peer>,
    },
    /// Stored items moving to their new owner.
    Handoff(Handoff),
    /// Load sample request.
    LoadProbe,
    /// Load sample answer: items routed to the sender per second (×1000), and its range.
    LoadReport {
        /// Load, milli-items per second.
        milli_load: u64,
        /// Whether the sender is in the ring.
        joined: bool,
    },
}

impl LocatorMsg {
    /// The traffic class the message is counted under (BRIEF §2.6).
    pub fn class(&self) -> MessageClass {
        match self {
            LocatorMsg::Route(r) => match r.payload {
                Payload::LinkReq => MessageClass::OverlayMaintenance,
                _ => MessageClass::LocatorRouting,
            },
            LocatorMsg::Spread { .. } | LocatorMsg::Handoff(_) => MessageClass::LocatorRouting,
            LocatorMsg::Matches { .. } | LocatorMsg::Push { .. } => MessageClass::MatchDelivery,
            _ => MessageClass::OverlayMaintenance,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_offsets_never_exceed_the_margin_and_round_trip() {
        let pos = Point3::new(100.0, 200.0, 0.0);
        let m = 96.0;
        // Any three bytes a peer may send stay within the margin on every axis.
        for q in [[-128i8, 127, 0], [127, 127, 127], [-128, -128, -128], [1, 0, -1]] {
            let e = PathOffset(q).end(pos, m);
            for (a, b) in [(e.x, pos.x), (e.y, pos.y), (e.z, pos.z)] {
                assert!((a - b).abs() <= m, "{q:?} -> {e:?}");
            }
        }
        // Short paths come back within half a step.
        let reach = Point3::new(150.0, 170.0, 0.0);
        let e = PathOffset::between(pos, reach, m).unwrap().end(pos, m);
        assert!(e.distance(reach) <= m / 127.0, "{e:?}");
        // Long paths keep their direction, cut to the margin on the longest axis.
        let e = PathOffset::between(pos, Point3::new(500.0, 400.0, 0.0), m)
            .unwrap()
            .end(pos, m);
        assert!(
            (e.x - (pos.x + 96.0)).abs() < 0.01 && (e.y - (pos.y + 48.0)).abs() < 0.5,
            "{e:?}"
        );
        // Nothing to say: no path.
        assert_eq!(PathOffset::between(pos, pos, m), None);
        assert_eq!(PathOffset::between(pos, Point3::new(f32::NAN, 0.0, 0.0), m), None);
        assert_eq!(PathOffset::between(pos, reach, 0.0), None);
    }
}
