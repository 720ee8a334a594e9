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
/// publication, the subscribed region), kept equal to `pubs` by every update, so matching
/// needs no second lookup per candidate.
///
/// A subscription cell lists live and stale entries (see `Subscribed`); the live ones
/// keep the order in which taking a node's old entries out and appending its new ones
/// would leave them, since a new round's entries are appended too. A cell drops its
/// stale entries when it is full (before its buffer would grow), so it holds at most
/// about twice the most live entries it had at once. Replacing the subscriptions this
/// way saves scanning every cell a node's old regions covered at each of its frames:
/// five times the cell entries the matching itself visits (64-node default run, 10 s:
/// 5.17 M against 0.94 M and 1.01 M).
#[derive(Default)]
pub struct Oracle {
    /// Publications: owner, position, predicted position (if elsewhere), refreshed at,
    /// and where each sits in `pub_grid`.
    pubs: HashMap<ObjectId, Indexed>,
    pub_grid: CellGrid<(ObjectId, Published)>,
    sub_grid: CellGrid<Subscribed>,
    /// Each node's latest round (by node id: the simulator numbers nodes from 0).
    rounds: Vec<u32>,
    /// Each node's regions of its latest round (by node id), which the live entries of
    /// `sub_grid` point into.
    regions: Vec<Vec<Aabb>>,
    /// When each (subscriber, object) match was last told. An entry older than
    /// [`RETELL`] acts as no entry at all (`tell`), so dropping old entries only bounds the
    /// table: a sweep every `RETELL` keeps each at most twice that old, where a sweep at
    /// every tick read the whole table ten times as often.
    told: HashMap<(NodeId, ObjectId), Time>,
    /// When `told` was last swept.
    told_swept: Time,
    ttl: Duration,
    out: Vec<Discovery>,
    /// Reused buffers (no allocation per ingest): this ingest's subscriptions and
    /// publications, the subscribers one publication matched, and the matches of new
    /// subscriptions.
    subs: Vec<Aabb>,
    published: Vec<(ObjectId, Published)>,
    hits: Vec<(NodeId, Point3)>,
    found: Vec<Discovery>,
}

/// A subscription indexed in a grid cell: the node, the node's ingest it came with (its
/// round), and the region's index among that round's regions (`Oracle::regions`). Only
/// entries of a node's latest round are live: an ingest replaces the node's subscriptions
/// by starting a new round, instead of taking the old entries out of every cell they
/// cover. A stale entry is never read beyond its round, so its region need not be kept;
/// the entries are 12 bytes where a copy of the region made them 32, and matching skips
/// the stale ones (up to half of a cell) reading a third of the memory
/// (`crates/sim/PERFORMANCE.md`, ninth round).
type Subscribed = (NodeId, u32, u32);

/// A stored publication and its places in the grid: `at[k]` is its index in the list of
/// the `k`-th cell of [`Published::cells`]. Taking a publication out of a cell is then a
/// `swap_remove` at a known index (and one update of the entry moved into it), where a
/// scan of the cell read every entry before it: a cold line each, most of the oracle's
/// cache misses (`crates/sim/PERFORMANCE.md`, sixth round). The lists end up exactly as
/// the scan left them.
#[derive(Clone, Copy)]
struct Indexed {
    p: Published,
    at: [u32; 2],
}

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

/// Below this many entries a full subscription cell grows rather than drop its stale
/// entries.
const MIN_COMPACT: usize = 8;

/// Whether a subscription entry of `node` from round `at` is live: of the node's latest.
fn live(rounds: &[u32], node: NodeId, at: u32) -> bool {
    rounds.get(node.0 as usize) == Some(&at)
}

fn cell(v: f32) -> i32 {
    worldmesh_core::floor_i32(v / CELL)
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

    /// Takes publication `id`, stored as `s`, out of its grid cells: a `swap_remove` at
    /// its index in each, the entry moved into that index told its new place.
    fn unindex(&mut self, id: ObjectId, s: Indexed) {
        for (k, c) in s.p.cells().enumerate() {
            let Some(v) = self.pub_grid.get_mut(c) else {
                continue;
            };
            let i = s.at[k] as usize;
            // The index is kept by every change of the list; a scan stands in should it
            // ever not be (same result, slower).
            let i = if v.get(i).is_some_and(|x| x.0 == id) {
                i
            } else {
                debug_assert!(false, "publication {id} not at its index {i} in cell {c:?}");
                match v.iter().position(|x| x.0 == id) {
                    Some(i) => i,
                    None => continue,
                }
            };
            v.swap_remove(i);
            if let Some((moved, mp)) = v.get(i).copied()
                && let Some(m) = self.pubs.get_mut(&moved)
            {
                let mk = usize::from(mp.cells().next() != Some(c));
                m.at[mk] = u32::try_from(i).unwrap_or(u32::MAX);
            }
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
    ///
    /// `node` is the simulation's index of the node (nodes are numbered from 0): the
    /// oracle keeps a round counter for every id up to the largest it was given. A
    /// counter wraps after 2³² ingests of one node (13 years of frames at 10 Hz).
    pub fn ingest(&mut self, now: Time, node: NodeId, ops: impl IntoIterator<Item = LocatorOp>) {
        let mut subs = std::mem::take(&mut self.subs);
        subs.clear();
        let mut published = std::mem::take(&mut self.published);
        published.clear();
        for op in ops {
            match op {
                LocatorOp::Publish { id, pos, ahead, .. } => {
                    if let Some(old) = self.pubs.get(&id).copied() {
                        self.unindex(id, old);
                    }
                    let p = Published {
                        owner: node,
                        pos,
                        ahead: ahead.filter(|a| a.is_finite() && *a != pos),
                        at: now,
                    };
                    let mut at = [0; 2];
                    for (k, c) in p.cells().enumerate() {
                        let v = self.pub_grid.entry(c);
                        at[k] = u32::try_from(v.len()).unwrap_or(u32::MAX);
                        v.push((id, p));
                    }
                    self.pubs.insert(id, Indexed { p, at });
                    published.push((id, p));
                }
                LocatorOp::Subscribe { region, .. } => subs.push(region),
            }
        }
        // Replace this node's subscriptions in the grid: a new round.
        let k = node.0 as usize;
        if self.rounds.len() <= k {
            self.rounds.resize(k + 1, 0);
        }
        self.rounds[k] = self.rounds[k].wrapping_add(1);
        let round = self.rounds[k];
        if self.regions.len() <= k {
            self.regions.resize_with(k + 1, Vec::new);
        }
        // This round's regions become the node's; `subs` keeps the old buffer for reuse.
        std::mem::swap(&mut self.regions[k], &mut subs);
        let mine = &self.regions[k];
        for (i, r) in mine.iter().enumerate() {
            let i = u32::try_from(i).unwrap_or(u32::MAX);
            for c in cells(r) {
                let v = self.sub_grid.entry(c);
                if v.len() == v.capacity() && v.len() >= MIN_COMPACT {
                    let rounds = &self.rounds;
                    v.retain(|(n, at, _)| live(rounds, *n, *at));
                }
                v.push((node, round, i));
            }
        }
        // New publications against stored subscriptions of other nodes.
        let mut hits = std::mem::take(&mut self.hits);
        for (id, p) in published.drain(..) {
            hits.clear();
            for c in p.cells() {
                for (n, at_round, i) in self.sub_grid.get(c) {
                    if *n != node
                        && live(&self.rounds, *n, *at_round)
                        && let Some(r) = self.regions.get(n.0 as usize).and_then(|v| v.get(*i as usize))
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
        for r in &self.regions[k] {
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
        self.subs = subs;
    }

    /// Expires soft state and returns the discoveries made since the last call.
    pub fn tick(&mut self, now: Time) -> Vec<Discovery> {
        let ttl = self.ttl;
        let expired: Vec<ObjectId> = self
            .pubs
            .iter()
            .filter(|(_, s)| now - s.p.at > ttl)
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            // Taken from the map only now: an earlier removal may have moved it.
            if let Some(s) = self.pubs.remove(&id) {
                self.unindex(id, s);
            }
        }
        if now - self.told_swept >= RETELL {
            self.told.retain(|_, t| now - *t < RETELL);
            self.told_swept = now;
        }
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

    /// Publications moving, gaining and losing a predicted point, and expiring, at
    /// random: every cell's list is exactly what finding the entry by a scan and
    /// `swap_remove`-ing it gives (the order matching reads them in), and every stored
    /// index points at its publication.
    #[test]
    fn publication_lists_match_removal_by_scan_and_indices_stay_true() {
        let mut o = Oracle::new(Duration::from_millis(300));
        let mut reference: CellGrid<ObjectId> = CellGrid::default();
        let mut held: std::collections::BTreeMap<ObjectId, (Published, Time)> = Default::default();
        let mut rng = worldmesh_core::DetRng::new(5);
        let take_out = |grid: &mut CellGrid<ObjectId>, id: ObjectId, p: &Published| {
            for c in p.cells() {
                if let Some(v) = grid.get_mut(c)
                    && let Some(i) = v.iter().position(|x| *x == id)
                {
                    v.swap_remove(i);
                }
            }
        };
        let mut at_ms = 0u64;
        for step in 0..3_000u32 {
            at_ms += rng.below(20);
            let now = Time::from_millis(at_ms);
            if rng.below(10) == 0 {
                // Expiry, in the oracle's own order (its map's); the reference follows it.
                let expiring: Vec<ObjectId> = o
                    .pubs
                    .iter()
                    .filter(|(_, s)| now - s.p.at > o.ttl)
                    .map(|(id, _)| *id)
                    .collect();
                o.tick(now);
                for id in expiring {
                    let (p, _) = held.remove(&id).expect("held");
                    take_out(&mut reference, id, &p);
                }
            } else {
                let node = NodeId(rng.below(4) as u32);
                let id = ObjectId::new(node, rng.below(40) as u32);
                let pos = Point3::new(rng.range_f32(0.0, 2000.0), rng.range_f32(0.0, 2000.0), 0.0);
                let ahead = (rng.below(3) == 0)
                    .then(|| Point3::new(rng.range_f32(0.0, 2000.0), rng.range_f32(0.0, 2000.0), 0.0));
                o.ingest(
                    now,
                    node,
                    vec![LocatorOp::Publish {
                        id,
                        pos,
                        kind: 0,
                        ahead,
                    }],
                );
                if let Some((old, _)) = held.remove(&id) {
                    take_out(&mut reference, id, &old);
                }
                let p = o.pubs[&id].p;
                for c in p.cells() {
                    reference.entry(c).push(id);
                }
                held.insert(id, (p, now));
            }
            for x in -1..5 {
                for y in -1..5 {
                    let ids: Vec<ObjectId> = o.pub_grid.get((x, y)).iter().map(|e| e.0).collect();
                    assert_eq!(ids, reference.get((x, y)), "step {step}, cell ({x}, {y})");
                }
            }
            for (id, s) in &o.pubs {
                for (k, c) in s.p.cells().enumerate() {
                    assert_eq!(o.pub_grid.get(c)[s.at[k] as usize].0, *id, "step {step}");
                }
            }
        }
        assert!(held.len() > 10, "publications are held as the test runs");
    }

    /// Nodes replacing their subscriptions at random, many times over the same cells:
    /// each cell's live entries are exactly the list that taking the node's old entries
    /// out and appending its new ones gives, a publication matches exactly the
    /// subscribers that list gives, in its order, and a cell holds at most twice the most
    /// live entries it ever had.
    #[test]
    fn subscription_rounds_keep_the_lists_of_replacing_in_place() {
        let mut o = Oracle::new(Duration::from_millis(300));
        let mut reference: CellGrid<(NodeId, Aabb)> = CellGrid::default();
        let mut held: Vec<Vec<Aabb>> = vec![Vec::new(); 6];
        let mut rng = worldmesh_core::DetRng::new(11);
        let mut touched = Vec::new();
        let mut peak: std::collections::HashMap<(i32, i32), usize> = Default::default();
        for step in 0..2_000u64 {
            let node = NodeId(rng.below(6) as u32);
            let regions: Vec<Aabb> = (0..rng.below(4))
                .map(|_| {
                    let c = Point3::new(rng.range_f32(0.0, 1500.0), rng.range_f32(0.0, 1500.0), 0.0);
                    Aabb::around(
                        c,
                        Point3::new(rng.range_f32(10.0, 400.0), rng.range_f32(10.0, 400.0), 1.0),
                    )
                })
                .collect();
            let ops: Vec<LocatorOp> = regions
                .iter()
                .map(|r| LocatorOp::Subscribe {
                    owner: ObjectId::new(node, 1),
                    region: *r,
                })
                .collect();
            o.ingest(Time::from_millis(step), node, ops);
            // The reference: out of every cell the old regions cover, then appended.
            for r in &held[node.0 as usize] {
                touched.extend(cells(r));
            }
            for c in touched.drain(..) {
                if let Some(v) = reference.get_mut(c) {
                    v.retain(|(n, _)| *n != node);
                }
            }
            for r in &regions {
                for c in cells(r) {
                    reference.entry(c).push((node, *r));
                }
            }
            held[node.0 as usize] = regions;
            for x in -1..4 {
                for y in -1..4 {
                    let cell: Vec<(NodeId, Aabb)> = o
                        .sub_grid
                        .get((x, y))
                        .iter()
                        .filter(|(n, at, _)| live(&o.rounds, *n, *at))
                        .map(|(n, _, i)| (*n, o.regions[n.0 as usize][*i as usize]))
                        .collect();
                    assert_eq!(cell, reference.get((x, y)), "step {step}, cell ({x}, {y})");
                    let most = peak.entry((x, y)).or_default();
                    *most = (*most).max(cell.len());
                    let all = o.sub_grid.get((x, y)).len();
                    assert!(
                        all <= (2 * *most).max(MIN_COMPACT),
                        "step {step}: {all} entries, {most} live at most"
                    );
                }
            }
            // A new object published by a node that subscribes to nothing.
            let id = ObjectId::new(NodeId(99), step as u32);
            let pos = Point3::new(rng.range_f32(0.0, 1500.0), rng.range_f32(0.0, 1500.0), 0.0);
            let now = Time::from_millis(step);
            o.ingest(
                now,
                NodeId(99),
                vec![LocatorOp::Publish {
                    id,
                    pos,
                    kind: 0,
                    ahead: None,
                }],
            );
            let told: Vec<NodeId> = o
                .take_discoveries()
                .into_iter()
                .filter(|d| d.object == id)
                .map(|d| d.subscriber)
                .collect();
            let mut expected: Vec<NodeId> = Vec::new();
            for (n, r) in reference.get((cell(pos.x), cell(pos.y))) {
                if r.contains(pos) && !expected.contains(n) {
                    expected.push(*n);
                }
            }
            assert_eq!(told, expected, "step {step}: who is told of {id} at {pos}");
        }
    }
}
