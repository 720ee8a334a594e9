//! A fast hasher for in-process maps keyed by small ids.
//!
//! The standard `HashMap` uses SipHash, which resists hash flooding by untrusted keys but
//! costs several times more than needed for keys the program makes itself (object and node
//! ids, grid cells). [`FastHasher`] is a multiply-rotate hash (the scheme popularised by
//! Firefox and rustc): fast, deterministic, and **not** flood-resistant, so it must only be
//! used for maps whose keys a peer cannot choose freely (simulator bookkeeping, metrics).

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// Multiply-rotate hasher (see the module docs for when it may be used).
#[derive(Clone, Copy, Default, Debug)]
pub struct FastHasher {
    hash: u64,
}

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FastHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FastHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        for b in chunks.remainder() {
            self.add(u64::from(*b));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_i32(&mut self, i: i32) {
        self.add(i as u32 as u64);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

/// A `HashMap` with [`FastHasher`].
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;
/// A `HashSet` with [`FastHasher`].
pub type FastSet<K> = HashSet<K, BuildHasherDefault<FastHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{NodeId, ObjectId};

    #[test]
    fn maps_work_and_hashes_spread() {
        let mut m: FastMap<ObjectId, u32> = FastMap::default();
        for n in 0..50u32 {
            for s in 0..50u32 {
                m.insert(ObjectId::new(NodeId(n), s), n * 100 + s);
            }
        }
        assert_eq!(m.len(), 2500);
        assert_eq!(m[&ObjectId::new(NodeId(7), 9)], 709);
        let hashes: FastSet<u64> = (0..10_000u64)
            .map(|i| {
                let mut h = FastHasher::default();
                h.write_u64(i);
                h.finish()
            })
            .collect();
        assert_eq!(hashes.len(), 10_000, "no collisions on small integers");
    }
}
