//! The oracle locator: ideal object discovery (paper `000` §3 "Object location").
//!
//! A global index of every node's latest publications and subscriptions, matched every
//! `interval` and delivered to subscribers after a fixed `delay`. It consumes exactly the
//! node's locator port ([`worldmesh_node::LocatorOp`] out, `Node::handle_discovery` in),
//! the same interface the distributed locator implements, and it is the "ideal discovery"
//! reference of the experiments. Its traffic is not on any wire and is not counted.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use worldmesh_core::{Aabb, NodeId, ObjectId, Point3, Time};
use worldmesh_node::LocatorOp;

/// Grid cell size for matching, units.
const CELL: f32 = 512.0;
/// A (node, object) match is repeated at most this often while it holds.
const RETELL: Duration = Duration::from_secs(1);

/// A match to deliver: tell `subscriber` about `object`, whose primary is on `primary`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Discovery {
    /// The node to tell.
    pub subscriber: NodeId,
    /// The object found.
    pub object: ObjectId,
    /// Where its primary lives.
    pub primary: NodeId,
    /// Its published position.
    pub pos: Point3,
}

/// Publications bucketed by grid cell: (object, primary's node, position).
type Grid = HashMap<(i32, i32), Vec<(ObjectId, NodeId, Point3)>>;

/// The global index.
#[derive(Default)]
pub struct Oracle {
    pubs: BTreeMap<ObjectId, (NodeId, Point3, Time)>,
    subs: BTreeMap<NodeId, Vec<Aabb>>,
    told: HashMap<(NodeId, ObjectId), Time>,
    ttl: Duration,
}

impl Oracle {
    /// An oracle whose publications expire `ttl` after their last refresh (soft state).
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            ..Self::default()
        }
    }

    /// Takes a node's operations of one frame: its publications refresh, its
    /// subscriptions replace the previous ones.
    pub fn ingest(&mut self, now: Time, node: NodeId, ops: Vec<LocatorOp>) {
        let mut subs = Vec::new();
        for op in ops {
            match op {
                LocatorOp::Publish { id, pos, .. } => {
                    self.pubs.insert(id, (node, pos, now));
                }
                LocatorOp::Subscribe { region, .. } => subs.push(region),
            }
        }
        self.subs.insert(node, subs);
    }

    /// Matches everything and returns the discoveries to deliver.
    pub fn tick(&mut self, now: Time) -> Vec<Discovery> {
        let ttl = self.ttl;
        self.pubs.retain(|_, (_, _, t)| now - *t <= ttl);
        self.told.retain(|_, t| now - *t < RETELL);
        let cell = |v: f32| (v / CELL).floor() as i32;
        let mut grid: Grid = HashMap::new();
        for (id, (node, pos, _)) in &self.pubs {
            grid.entry((cell(pos.x), cell(pos.y)))
                .or_default()
                .push((*id, *node, *pos));
        }
        let mut out = Vec::new();
        for (sub_node, regions) in &self.subs {
            for r in regions {
                for cx in cell(r.min.x)..=cell(r.max.x) {
                    for cy in cell(r.min.y)..=cell(r.max.y) {
                        let Some(items) = grid.get(&(cx, cy)) else {
                            continue;
                        };
                        for (id, node, pos) in items {
                            if node == sub_node || !r.contains(*pos) {
                                continue;
                            }
                            if self.told.contains_key(&(*sub_node, *id)) {
                                continue;
                            }
                            self.told.insert((*sub_node, *id), now);
                            out.push(Discovery {
                                subscriber: *sub_node,
                                object: *id,
                                primary: *node,
                                pos: *pos,
                            });
                        }
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_publications_inside_subscriptions_once_per_retell_period() {
        let mut o = Oracle::new(Duration::from_millis(300));
        let a = ObjectId::new(NodeId(0), 1);
        let b = ObjectId::new(NodeId(1), 1);
        let region = Aabb::around(Point3::new(100.0, 100.0, 0.0), Point3::new(50.0, 50.0, 50.0));
        o.ingest(
            Time::ZERO,
            NodeId(0),
            vec![LocatorOp::Publish {
                id: a,
                pos: Point3::new(110.0, 90.0, 0.0),
                kind: 0,
            }],
        );
        o.ingest(
            Time::ZERO,
            NodeId(1),
            vec![
                LocatorOp::Publish {
                    id: b,
                    pos: Point3::new(2000.0, 0.0, 0.0),
                    kind: 0,
                },
                LocatorOp::Subscribe { owner: b, region },
            ],
        );
        let d = o.tick(Time::ZERO);
        assert_eq!(
            d,
            vec![Discovery {
                subscriber: NodeId(1),
                object: a,
                primary: NodeId(0),
                pos: Point3::new(110.0, 90.0, 0.0)
            }]
        );
        assert!(
            o.tick(Time::from_millis(100)).is_empty(),
            "not repeated within the retell period"
        );
        // Node 0 stops publishing: its publication expires after the TTL.
        o.ingest(
            Time::from_millis(1200),
            NodeId(1),
            vec![LocatorOp::Subscribe { owner: b, region }],
        );
        assert!(o.tick(Time::from_millis(1200)).is_empty());
    }
}
