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

/// A game object: globally unique as (creating node, that node's generation, sequence
/// number at that node and generation).
///
/// The creator is *not* necessarily the node that holds the primary later (migration, paper
/// `001` §3, and adoption after a failure can move it). The **generation** tells apart the
/// lives of one node id: a node that restarts comes back as a new member with a higher
/// generation (its incarnation) and numbers its objects from zero again, so without the
/// generation its new objects would collide with its old ones, which live on at the nodes
/// that adopted them. A node of the first generation uses 0, so worlds that never restart
/// pay nothing for it: the generation lives in the high half of the 64-bit `seq`, which
/// every encoder (the replica codec's varints, bitcode's packed integer columns) stores in
/// as few bytes as its value needs.
///
/// Ordered by origin, then generation, then sequence number, compared as one packed `u128`:
/// the replica manager's maps are keyed by object id, and a single comparison per tree step
/// is measurably cheaper than several.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Serialize, Deserialize, bitcode::Encode, bitcode::Decode)]
pub struct ObjectId {
    /// The node that created the object.
    pub origin: NodeId,
    /// The creating node's generation (high 32 bits) and the object's sequence number at
    /// that node and generation (low 32 bits); see [`ObjectId::generation`] and
    /// [`ObjectId::counter`].
    pub seq: u64,
}

impl ObjectId {
    /// An object id of a first-generation node.
    pub const fn new(origin: NodeId, seq: u32) -> Self {
        Self {
            origin,
            seq: seq as u64,
        }
    }

    /// An object id created by generation `generation` of node `origin`.
    pub const fn with_generation(origin: NodeId, generation: u32, seq: u32) -> Self {
        Self {
            origin,
            seq: ((generation as u64) << 32) | seq as u64,
        }
    }

    /// The creating node's generation.
    pub const fn generation(self) -> u32 {
        (self.seq >> 32) as u32
    }

    /// The sequence number within the creating node's generation.
    pub const fn counter(self) -> u32 {
        self.seq as u32
    }

    /// The id packed into one `u128` (origin, generation, sequence from high to low bits).
    pub const fn packed(self) -> u128 {
        ((self.origin.0 as u128) << 64) | self.seq as u128
    }

    /// The id folded into one `u64`, handy as a hash key (distinct for distinct ids of
    /// first-generation nodes; generations are mixed in, so keys rarely collide otherwise).
    pub const fn as_u64(self) -> u64 {
        (((self.origin.0 as u64) << 32) | (self.seq as u32) as u64) ^ (self.seq >> 32).rotate_left(48)
    }
}

impl std::hash::Hash for ObjectId {
    /// Hashes exactly as the (origin, sequence) pair did before generations existed, so
    /// maps keyed by first-generation ids iterate as they always did (simulator reports
    /// stay byte-identical); a generation, when there is one, is mixed in after.
    #[inline]
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.origin.hash(state);
        state.write_u32(self.counter());
        if self.generation() != 0 {
            state.write_u32(self.generation());
        }
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
        self.packed().cmp(&other.packed())
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
        if self.generation() == 0 {
            write!(f, "{}.{}", self.origin, self.counter())
        } else {
            write!(f, "{}g{}.{}", self.origin, self.generation(), self.counter())
        }
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
