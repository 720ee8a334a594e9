//! Rendezvous (highest-random-weight) hashing: which members stand in for an object.
//!
//! Every node that knows the same member set computes the same ranking of members for an
//! object, without messages (Thaler and Ravishankar's highest-random-weight scheme): each
//! member gets a pseudo-random score from (object, member) and the highest scores win. When
//! a member leaves, only the objects it ranked first move; the rest keep their choice.
//!
//! worldmesh uses it where a cluster must agree on one node per object after membership
//! changes: the **backups** a primary keeps fully updated, and the **adopter** that becomes
//! an orphan's primary when its node fails (`node::adoption`). The scores are a fixed
//! function (SplitMix64 finaliser over the packed ids), never a library hash whose output
//! may change between versions: the choice must be the same on every node and every build.

use crate::{NodeId, ObjectId};

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The score of `node` for `object`; higher ranks first. Ties (astronomically rare) are
/// broken by node id in [`rank`].
pub fn score(object: ObjectId, node: NodeId) -> u64 {
    let p = object.packed();
    let a = mix((p as u64) ^ 0x9E37_79B9_7F4A_7C15);
    let b = mix(((p >> 64) as u64) ^ a.rotate_left(29));
    mix(b ^ u64::from(node.0).wrapping_mul(0xD6E8_FEB8_6659_FD93))
}

/// Orders `nodes` by descending score for `object` (ties: lower id first).
pub fn rank(object: ObjectId, nodes: &mut [NodeId]) {
    nodes.sort_unstable_by(|a, b| score(object, *b).cmp(&score(object, *a)).then(a.cmp(b)));
}

/// The highest-ranked node of `nodes` for `object` other than `exclude`, if any.
pub fn top(
    object: ObjectId,
    nodes: impl IntoIterator<Item = NodeId>,
    exclude: Option<NodeId>,
) -> Option<NodeId> {
    nodes
        .into_iter()
        .filter(|n| Some(*n) != exclude)
        .max_by(|a, b| score(object, *a).cmp(&score(object, *b)).then(b.cmp(a)))
}

/// The `k` highest-ranked nodes of `nodes` for `object`, excluding `exclude`, best first.
pub fn top_k(object: ObjectId, nodes: &[NodeId], exclude: Option<NodeId>, k: usize) -> Vec<NodeId> {
    if k == 0 {
        return Vec::new();
    }
    let mut v: Vec<NodeId> = nodes.iter().copied().filter(|n| Some(*n) != exclude).collect();
    v.sort_unstable();
    v.dedup();
    rank(object, &mut v);
    v.truncate(k);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(n: u32) -> Vec<NodeId> {
        (0..n).map(NodeId).collect()
    }

    #[test]
    fn top_agrees_with_rank_and_respects_exclusion() {
        for s in 0..200 {
            let o = ObjectId::with_generation(NodeId(s % 7), s / 3, s);
            let mut all = nodes(9);
            rank(o, &mut all);
            assert_eq!(top(o, nodes(9), None), Some(all[0]));
            assert_eq!(top(o, nodes(9), Some(all[0])), Some(all[1]));
            assert_eq!(top_k(o, &nodes(9), Some(all[0]), 3), all[1..4].to_vec());
        }
        assert_eq!(top(ObjectId::new(NodeId(0), 0), Vec::new(), None), None);
        assert!(top_k(ObjectId::new(NodeId(0), 0), &nodes(3), None, 0).is_empty());
    }

    #[test]
    fn removing_a_member_moves_only_the_objects_it_ranked_first() {
        let all = nodes(8);
        let without: Vec<NodeId> = all.iter().copied().filter(|n| n.0 != 3).collect();
        let mut moved = 0;
        for s in 0..4000 {
            let o = ObjectId::new(NodeId(1), s);
            let before = top(o, all.iter().copied(), None).unwrap();
            let after = top(o, without.iter().copied(), None).unwrap();
            if before != NodeId(3) {
                assert_eq!(before, after, "{o}");
            } else {
                moved += 1;
            }
        }
        // Each of 8 members ranks about 1/8 of the objects first.
        assert!((350..650).contains(&moved), "{moved}");
    }

    #[test]
    fn scores_spread_over_members() {
        let mut firsts = [0u32; 8];
        for s in 0..8000 {
            let o = ObjectId::new(NodeId(s % 5), s);
            firsts[top(o, nodes(8), None).unwrap().0 as usize] += 1;
        }
        for f in firsts {
            assert!((850..1150).contains(&f), "{firsts:?}");
        }
    }
}
