//! Identifiers.
//!
//! Colyseus (paper `000` §3) gives every object a globally unique identifier and a single
//! primary copy. worldmesh makes object ids unique without coordination: the id carries the
//! node that created the object and a per-node sequence number. The creator is *not*
//! necessarily the node that holds the primary later (migration, paper `001` §3, can move it).

use serde::{Deserialize, Serialize};
use std::fmt;

/// A node (server process) of the worldmesh cluster. Nodes are numbered from 0.
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
pub struct NodeId(pub u32);

/// A player's client connection.
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
pub struct ClientId(pub u32);

/// A game object: globally unique as (creating node, sequence number at that node).
///
/// Ordered by origin, then sequence number (the order of the `(origin, seq)` pair),
/// compared as one packed `u64`: the replica manager's maps are keyed by object id, and
/// a single comparison per tree step is measurably cheaper than two.
#[derive(
    Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize, bitcode::Encode, bitcode::Decode,
)]
pub struct ObjectId {
    /// The node that created the object.
    pub origin: NodeId,
    /// Sequence number of the object at its origin node.
    pub seq: u32,
}

impl ObjectId {
    /// Builds an object id.
    pub const fn new(origin: NodeId, seq: u32) -> Self {
        Self { origin, seq }
    }

    /// The id packed into one `u64` (origin in the high half), handy as a hash key.
    pub const fn as_u64(self) -> u64 {
        ((self.origin.0 as u64) << 32) | self.seq as u64
    }
}

impl PartialOrd for ObjectId {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ObjectId {
    #[inline]
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_u64().cmp(&other.as_u64())
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "n{}", self.0)
    }
}

impl fmt::Display for ClientId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "c{}", self.0)
    }
}

impl fmt::Display for ObjectId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.origin, self.seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_ids_pack_distinctly() {
        let a = ObjectId::new(NodeId(1), 2);
        let b = ObjectId::new(NodeId(2), 1);
        assert_ne!(a.as_u64(), b.as_u64());
        assert_eq!(a.as_u64(), (1 << 32) | 2);
        assert_eq!(a.to_string(), "n1.2");
    }

    #[test]
    fn object_ids_order_by_origin_then_sequence() {
        let vals = [0, 1, 2, 0x7fff_ffff, 0x8000_0000, u32::MAX - 1, u32::MAX];
        for &o1 in &vals {
            for &s1 in &vals {
                for &o2 in &vals {
                    for &s2 in &vals {
                        let (a, b) = (ObjectId::new(NodeId(o1), s1), ObjectId::new(NodeId(o2), s2));
                        assert_eq!(a.cmp(&b), (o1, s1).cmp(&(o2, s2)), "{a} vs {b}");
                        assert_eq!(a.partial_cmp(&b), Some((o1, s1).cmp(&(o2, s2))));
                    }
                }
            }
        }
    }
}
