//! The oracle locator: ideal object discovery (paper `000` §3 "Object location").
//!
//! A global index of every node's latest publications and subscriptions, matched every
//! `interval` and delivered to subscribers after a fixed `delay`. It consumes exactly the
//! node's locator port ([`worldmesh_node::LocatorOp`] out, `Node::handle_discovery` in),
//! the same interface the distributed locator implements, and it is the "ideal discovery"
//! reference of the experiments. Its traffic is not on any wire and is not counted.

use std::collections::hash_map::Entry;
use std::time::Duration;
use worldmesh_core::hash::FastMap as HashMap;

use worldmesh_core::{Aabb, NodeId, ObjectId, Point3, Time};
use worldmesh_node::LocatorOp;

use crate::grid::CellGrid;

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

/// The global index.
///
/// Matching is immediate, as at a soft-state rendezvous (paper `000` §6.1): a publication
/// is matched against the stored subscriptions when it arrives, and a subscription against
/// the stored publications. Both sides are kept in uniform grids so a match costs the
/// items near it, not a scan. Grid entries carry a copy of what matching reads (the
/// publication, the subscribed region), kept equal to `pubs` and `subs` by every update,
/// so matching needs no second lookup per candidate.
#[derive(Default)]
pub struct Oracle {
    /// Publications: owner, position, predicted position (if elsewhere), refreshed at.
    pubs: HashMap<ObjectId, Published>,
    pub_grid: CellGrid<(ObjectId, Published)>,
    subs: HashMap<NodeId, Vec<Aabb>>,
    sub_grid: CellGrid<Subscribed>,
    told: HashMap<(NodeId, ObjectId), Time>,
    ttl: Duration,
    out: Vec<Discovery>,
    /// Reused buffers (no allocation per ingest): grid cells, this ingest's publications,
    /// the subscribers one publication matched, and the matches of new subscriptions.
    scratch: Vec<(i32, i32)>,
    published: Vec<(ObjectId, Published)>,
    hits: Vec<(NodeId, Point3)>,
    found: Vec<Discovery>,
}

/// A subscription indexed in a grid cell: the node and the region.
type Subscribed = (NodeId, Aabb);

/// A stored publication.
#[derive(Clone, Copy)]
struct Published {
    owner: NodeId,
    pos: Point3,
    /// Where the object expects to be soon, when that is elsewhere (a predictive
    /// publication, paper `000` §6.2): subscriptions containing it match too.
    ahead: Option<Point3>,
    at: Time,
}

impl Published {
    /// The grid cells the publication is indexed under (one or two).
    fn cells(&self) -> impl Iterator<Item = (i32, i32)> {
        let a = (cell(self.pos.x), cell(self.pos.y));
        let b = self.ahead.map(|p| (cell(p.x), cell(p.y))).filter(|b| *b != a);
        std::iter::once(a).chain(b)
    }

    /// The point of this publication inside `r`, if any (its position first).
    fn inside(&self, r: &Aabb) -> Option<Point3> {
        if r.contains(self.pos) {
            Some(self.pos)
        } else {
            self.ahead.filter(|a| r.contains(*a))
        }
    }
}

fn cell(v: f32) -> i32 {
    (v / CELL).floor() as i32
}

fn cells(r: &Aabb) -> impl Iterator<Item = (i32, i32)> {
    let (x0, x1, y0, y1) = (cell(r.min.x), cell(r.max.x), cell(r.min.y), cell(r.max.y));
    (x0..=x1).flat_map(move |x| (y0..=y1).map(move |y| (x, y)))
}

impl Oracle {
    /// An oracle whose publications expire `ttl` after their last refresh (soft state).
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            ..Self::default()
        }
    }

    fn tell(&mut self, now: Time, d: Discovery) {
        match self.told.entry((d.subscriber, d.object)) {
            Entry::Occupied(e) if now - *e.get() < RETELL => return,
            Entry::Occupied(mut e) => *e.get_mut() = now,
            Entry::Vacant(e) => {
                e.insert(now);
            }
        }
        self.out.push(d);
    }

    /// Takes a node's operations of one frame: its publications refresh, its
    /// subscriptions replace the previous ones; both are matched at once.
    pub fn ingest(&mut self, now: Time, node: NodeId, ops: impl IntoIterator<Item = LocatorOp>) {
        let mut subs = Vec::new();
        let mut published = std::mem::take(&mut self.published);
        published.clear();
        for op in ops {
            match op {
                LocatorOp::Publish { id, pos, ahead, .. } => {
                    if let Some(old) = self.pubs.get(&id).copied() {
                        for c in old.cells() {
                            if let Some(v) = self.pub_grid.get_mut(c)
                                && let Some(i) = v.iter().position(|x| x.0 == id)
                            {
                                v.swap_remove(i);
                            }
                        }
                    }
                    let p = Published {
                        owner: node,
                        pos,
                        ahead: ahead.filter(|a| a.is_finite() && *a != pos),
                        at: now,
                    };
                    self.pubs.insert(id, p);
                    for c in p.cells() {
                        self.pub_grid.entry(c).push((id, p));
                    }
                    published.push((id, p));
                }
                LocatorOp::Subscribe { region, .. } => subs.push(region),
            }
        }
        // Replace this node's subscriptions in the grid.
        if let Some(old) = self.subs.remove(&node) {
            let mut touched = std::mem::take(&mut self.scratch);
            touched.clear();
            touched.extend(old.iter().flat_map(cells));
            touched.sort_unstable();
            touched.dedup();
            for c in &touched {
                if let Some(v) = self.sub_grid.get_mut(*c) {
                    v.retain(|(n, ..)| *n != node);
                }
            }
            self.scratch = touched;
        }
        for r in &subs {
            for c in cells(r) {
                self.sub_grid.entry(c).push((node, *r));
            }
        }
        // New publications against stored subscriptions of other nodes.
        let mut hits = std::mem::take(&mut self.hits);
        for (id, p) in published.drain(..) {
            hits.clear();
            for c in p.cells() {
                for (n, r) in self.sub_grid.get(c) {
                    if *n != node
                        && let Some(at) = p.inside(r)
                    {
                        hits.push((*n, at));
                    }
                }
            }
            for (n, pos) in hits.drain(..) {
                self.tell(
                    now,
                    Discovery {
                        subscriber: n,
                        object: id,
                        primary: node,
                        pos,
                    },
                );
            }
        }
        self.hits = hits;
        self.published = published;
        // New subscriptions against stored publications of other nodes.
        let mut found = std::mem::take(&mut self.found);
        found.clear();
        for r in &subs {
            for c in cells(r) {
                for (id, p) in self.pub_grid.get(c) {
                    if p.owner != node
                        && now - p.at <= self.ttl
                        && let Some(pos) = p.inside(r)
                    {
                        found.push(Discovery {
                            subscriber: node,
                            object: *id,
                            primary: p.owner,
                            pos,
                        });
                    }
                }
            }
        }
        for d in found.drain(..) {
            self.tell(now, d);
        }
        self.found = found;
        self.subs.insert(node, subs);
    }

    /// Expires soft state and returns the discoveries made since the last call.
    pub fn tick(&mut self, now: Time) -> Vec<Discovery> {
        let ttl = self.ttl;
        let expired: Vec<(ObjectId, Published)> = self
            .pubs
            .iter()
            .filter(|(_, p)| now - p.at > ttl)
            .map(|(id, p)| (*id, *p))
            .collect();
        for (id, p) in expired {
            self.pubs.remove(&id);
            for c in p.cells() {
                if let Some(v) = self.pub_grid.get_mut(c)
                    && let Some(i) = v.iter().position(|x| x.0 == id)
                {
                    v.swap_remove(i);
                }
            }
        }
        self.told.retain(|_, t| now - *t < RETELL);
        std::mem::take(&mut self.out)
    }

    /// Discoveries made by the last ingests (matching is immediate).
    pub fn take_discoveries(&mut self) -> Vec<Discovery> {
        std::mem::take(&mut self.out)
    }

    /// Moves the discoveries made by the last ingests to the end of `into`, in order (like
    /// [`Oracle::take_discoveries`], keeping both buffers).
    pub fn move_discoveries(&mut self, into: &mut Vec<Discovery>) {
        into.append(&mut self.out);
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
                ahead: None,
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
                    ahead: None,
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

    /// A predictive publication (paper `000` §6.2) matches a subscription that contains
    /// its predicted point but not its position, is delivered with the point that
    /// matched, and is forgotten (both grid cells) when it expires.
    #[test]
    fn predicted_points_match_and_expire_with_their_publication() {
        let mut o = Oracle::new(Duration::from_millis(300));
        let a = ObjectId::new(NodeId(0), 1);
        let b = ObjectId::new(NodeId(1), 1);
        let region = Aabb::around(Point3::new(5000.0, 0.0, 0.0), Point3::new(100.0, 100.0, 100.0));
        o.ingest(
            Time::ZERO,
            NodeId(1),
            vec![LocatorOp::Subscribe { owner: b, region }],
        );
        let publish = |o: &mut Oracle, t: Time, ahead: Option<Point3>| {
            o.ingest(
                t,
                NodeId(0),
                vec![LocatorOp::Publish {
                    id: a,
                    pos: Point3::new(0.0, 0.0, 0.0),
                    kind: 0,
                    ahead,
                }],
            );
        };
        publish(&mut o, Time::ZERO, None);
        assert!(o.tick(Time::ZERO).is_empty(), "the position alone is far away");
        let spawn = Point3::new(5050.0, 20.0, 0.0);
        publish(&mut o, Time::from_millis(100), Some(spawn));
        let d = o.tick(Time::from_millis(100));
        assert_eq!(d.len(), 1);
        assert_eq!((d[0].subscriber, d[0].object, d[0].pos), (NodeId(1), a, spawn));
        // A new subscription elsewhere finds nothing once the publication has expired,
        // and nothing is left indexed under either cell.
        let c = ObjectId::new(NodeId(2), 1);
        o.tick(Time::from_millis(2000));
        o.ingest(
            Time::from_millis(2000),
            NodeId(2),
            vec![LocatorOp::Subscribe { owner: c, region }],
        );
        assert!(o.tick(Time::from_millis(2000)).is_empty());
        assert!(o.pub_grid.lists().all(Vec::is_empty));
    }
}
