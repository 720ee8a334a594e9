//! The matching index at a rendezvous point (paper `000` §3 "Soft state storage").
//!
//! A rendezvous stores both subscriptions (boxes) and publications (points) as soft state,
//! each with an expiry time. A new subscription is matched against the stored
//! publications, and a new publication against the stored subscriptions. [`MatchIndex`]
//! does both through two uniform grids over `x`–`y`: points in their cell, and boxes in
//! every cell they overlap of a grid four times coarser, so a match costs the items of a
//! few cells rather than a scan of the store. [`LinearStore`]
//! is the scan, kept as the reference for tests and the benchmark (`benches/matching.rs`).

use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{BuildHasherDefault, Hasher};

use worldmesh_core::{Aabb, DeadlineQueue, NodeId, ObjectId, Point3, Time};

/// A hash map with a fixed hasher, so iteration order is the same on every run.
pub(crate) type DetMap<K, V> = HashMap<K, V, BuildHasherDefault<DefaultHasher>>;

/// A multiply-rotate hasher (the FxHash recipe) for maps that are only looked up, never
/// iterated: the grid cells. It is several times cheaper than SipHash on the small
/// integer keys of the index, and fixed, so it is deterministic too.
#[derive(Clone, Copy, Default)]
struct CellHasher(u64);

impl Hasher for CellHasher {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.add(u64::from(*b));
        }
    }
    fn write_i32(&mut self, v: i32) {
        self.add(u64::from(v as u32));
    }
    fn write_u32(&mut self, v: u32) {
        self.add(u64::from(v));
    }
    fn write_u64(&mut self, v: u64) {
        self.add(v);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

impl CellHasher {
    fn add(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// A map of grid cells (looked up, never iterated, so the hasher does not order results).
type CellMap<V> = HashMap<Cell, V, BuildHasherDefault<CellHasher>>;

/// The identity of a stored subscription: the subscriber's node and its sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, bitcode::Encode, bitcode::Decode)]
pub struct SubKey {
    /// The subscribing node (where matches are delivered).
    pub node: NodeId,
    /// Per-node sequence number.
    pub seq: u32,
}

/// A stored subscription.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StoredSub {
    /// The subscribed box.
    pub bbox: Aabb,
    /// When it expires.
    pub expires: Time,
}

/// A stored publication.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StoredPub {
    /// The node holding the primary.
    pub primary: NodeId,
    /// Published position (where the publication is indexed and matched).
    pub pos: Point3,
    /// The published path of a range publication (see [`crate::msg::PubItem::path`]).
    pub path: Option<crate::msg::PathOffset>,
    /// When it expires.
    pub expires: Time,
}

/// Why the index refused an item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum IndexError {
    /// The box or point has non-finite or inverted coordinates.
    #[error("invalid geometry")]
    Invalid,
    /// The box covers more grid cells than the index accepts.
    #[error("subscription covers {cells} cells, limit {limit}")]
    Oversize {
        /// Cells the box would cover.
        cells: u64,
        /// The limit.
        limit: u64,
    },
}

type Cell = (i32, i32);

/// The side of a subscription cell, in publication cells. A subscription is copied into
/// every subscription cell its box covers, and a new publication reads the one cell under
/// it. With the publications' cells (256 units by default) a box of the model game's
/// interest covered 53.5 cells on average (64-node `dht` simulation), and the copies were
/// the largest single cost of a `dht` run; four times wider cells cover 6.5, while a
/// publication's query reads the entries of more subscriptions that miss it. The answers
/// are the same on any scale (every candidate's box is tested). Measured in
/// `crates/sim/PERFORMANCE.md`, twenty-third round.
const SUB_CELL_SCALE: f32 = 4.0;

/// Leftover cell entries of expired subscriptions tolerated beyond the stored entries before
/// the cells are rebuilt (small under test, so the property tests sweep often).
const SWEEP_SLACK: usize = if cfg!(test) { 8 } else { 4096 };

/// A stored item by its key, as [`MatchIndex::expire_each`] names the ones it drops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Item {
    /// A subscription.
    Sub(SubKey),
    /// A publication.
    Pub(ObjectId),
}

/// The grid cell of side `cell` holding `(x, y)`.
fn cell_at(cell: f32, x: f32, y: f32) -> Cell {
    let c = |v: f32| (v / cell).floor().clamp(i32::MIN as f32, i32::MAX as f32) as i32;
    (c(x), c(y))
}

/// The lowest and highest grid cells under `b`, and how many cells it covers.
fn cells_under(cell: f32, b: &Aabb) -> (Cell, Cell, u64) {
    let lo = cell_at(cell, b.min.x, b.min.y);
    let hi = cell_at(cell, b.max.x, b.max.y);
    let n = (i64::from(hi.0) - i64::from(lo.0) + 1) as u64 * (i64::from(hi.1) - i64::from(lo.1) + 1) as u64;
    (lo, hi, n)
}

/// Appends `item` to every cell from `lo` to `hi` (both included), `x` outer and `y` inner,
/// and records in `slots` where it went in each cell, in that order.
fn push_copies<T: Copy>(cells: &mut CellMap<Vec<T>>, lo: Cell, hi: Cell, item: T, slots: &mut Vec<u32>) {
    for x in lo.0..=hi.0 {
        for y in lo.1..=hi.1 {
            let v = cells.entry((x, y)).or_default();
            slots.push(v.len() as u32);
            v.push(item);
        }
    }
}

/// Grid-indexed soft-state store of subscriptions and publications.
#[derive(Clone, Debug)]
pub struct MatchIndex {
    // The side of a publication's cell; the oversize limit counts cells of this side.
    cell: f32,
    // The side of a subscription's cell (`SUB_CELL_SCALE` publication cells).
    sub_cell: f32,
    max_cells: u64,
    subs: DetMap<SubKey, StoredSub>,
    pubs: DetMap<ObjectId, StoredPub>,
    // Cells hold copies of the items so a query scans contiguous memory.
    sub_cells: CellMap<Vec<(SubKey, StoredSub)>>,
    pub_cells: CellMap<Vec<(ObjectId, StoredPub)>>,
    // Where each subscription sits in each cell it covers (cells in `for x { for y }`
    // order), so removing one does not scan the cells' lists.
    sub_slots: HashMap<SubKey, Vec<u32>, BuildHasherDefault<CellHasher>>,
    // Where each publication sits in its cell.
    pub_slots: HashMap<ObjectId, u32, BuildHasherDefault<CellHasher>>,
    expiry: DeadlineQueue<Item>,
    // Cell entries of expired subscriptions not yet taken out of `sub_cells` (see
    // [`MatchIndex::expire`]), and the entries of the stored ones.
    dead_sub_entries: usize,
    live_sub_entries: usize,
    // The latest time `expire` ran at: leftover entries expired at or before it, so queries
    // never see them even when asked about an earlier time.
    expired_at: Time,
}

impl MatchIndex {
    /// An empty index with publication cells of side `cell` units (subscriptions are kept
    /// in cells four times wider), accepting subscriptions that cover at most `max_cells`
    /// cells of side `cell`.
    pub fn new(cell: f32, max_cells: u64) -> Self {
        let cell = if cell.is_finite() && cell > 0.0 {
            cell
        } else {
            256.0
        };
        Self {
            cell,
            sub_cell: cell * SUB_CELL_SCALE,
            max_cells: max_cells.max(1),
            subs: DetMap::default(),
            pubs: DetMap::default(),
            sub_cells: CellMap::default(),
            pub_cells: CellMap::default(),
            sub_slots: HashMap::default(),
            pub_slots: HashMap::default(),
            expiry: DeadlineQueue::default(),
            dead_sub_entries: 0,
            live_sub_entries: 0,
            expired_at: Time::ZERO,
        }
    }

    fn cell_of(&self, x: f32, y: f32) -> Cell {
        cell_at(self.cell, x, y)
    }

    fn cells_of(&self, b: &Aabb) -> (Cell, Cell, u64) {
        cells_under(self.cell, b)
    }

    fn sub_cells_of(&self, b: &Aabb) -> (Cell, Cell, u64) {
        cells_under(self.sub_cell, b)
    }

    /// Number of stored subscriptions.
    pub fn sub_count(&self) -> usize {
        self.subs.len()
    }

    /// Number of stored publications.
    pub fn pub_count(&self) -> usize {
        self.pubs.len()
    }

    /// The stored subscription `k`, if any.
    pub fn sub(&self, k: SubKey) -> Option<&StoredSub> {
        self.subs.get(&k)
    }

    /// The stored publication of `id`, if any.
    pub fn publication(&self, id: ObjectId) -> Option<&StoredPub> {
        self.pubs.get(&id)
    }

    /// Inserts or refreshes a subscription.
    pub fn insert_sub(&mut self, k: SubKey, s: StoredSub) -> Result<(), IndexError> {
        if !s.bbox.is_valid() {
            return Err(IndexError::Invalid);
        }
        let (_, _, n) = self.cells_of(&s.bbox);
        if n > self.max_cells {
            return Err(IndexError::Oversize {
                cells: n,
                limit: self.max_cells,
            });
        }
        self.remove_sub(k);
        let (lo, hi, n) = self.sub_cells_of(&s.bbox);
        let mut slots = Vec::with_capacity(n as usize);
        push_copies(&mut self.sub_cells, lo, hi, (k, s), &mut slots);
        self.live_sub_entries += slots.len();
        self.sub_slots.insert(k, slots);
        self.subs.insert(k, s);
        self.expiry.push(s.expires, Item::Sub(k));
        Ok(())
    }

    /// Inserts or refreshes a publication.
    pub fn insert_pub(&mut self, id: ObjectId, p: StoredPub) -> Result<(), IndexError> {
        if !p.pos.is_finite() {
            return Err(IndexError::Invalid);
        }
        self.remove_pub(id);
        let c = self.cell_of(p.pos.x, p.pos.y);
        let v = self.pub_cells.entry(c).or_default();
        self.pub_slots.insert(id, v.len() as u32);
        v.push((id, p));
        self.pubs.insert(id, p);
        self.expiry.push(p.expires, Item::Pub(id));
        Ok(())
    }

    /// Removes a subscription; returns it if it was stored.
    pub fn remove_sub(&mut self, k: SubKey) -> Option<StoredSub> {
        let s = self.subs.remove(&k)?;
        let slots = self.sub_slots.remove(&k).unwrap_or_default();
        self.live_sub_entries -= slots.len();
        let (lo, hi, _) = self.sub_cells_of(&s.bbox);
        let mut j = 0;
        let cell = self.sub_cell;
        for x in lo.0..=hi.0 {
            for y in lo.1..=hi.1 {
                let at = slots.get(j).map_or(usize::MAX, |i| *i as usize);
                j += 1;
                let Some(v) = self.sub_cells.get_mut(&(x, y)) else {
                    continue;
                };
                if v.get(at).is_some_and(|e| e.0 == k && e.1 == s) {
                    v.swap_remove(at);
                    // The last entry moved into `at`: record its new slot in this cell, if
                    // it is a stored subscription (not the leftover of an expired one).
                    if let Some((moved, ms)) = v.get(at).copied()
                        && self.subs.get(&moved) == Some(&ms)
                    {
                        let (mlo, mhi, _) = cells_under(cell, &ms.bbox);
                        let mj = (i64::from(x) - i64::from(mlo.0))
                            * (i64::from(mhi.1) - i64::from(mlo.1) + 1)
                            + (i64::from(y) - i64::from(mlo.1));
                        if let Some(slot) = self
                            .sub_slots
                            .get_mut(&moved)
                            .and_then(|m| m.get_mut(mj as usize))
                        {
                            *slot = at as u32;
                        }
                    }
                }
                if v.is_empty() {
                    self.sub_cells.remove(&(x, y));
                }
            }
        }
        Some(s)
    }

    /// Forgets an expired subscription but leaves its copies in the cells, where queries
    /// skip them (they are expired); [`Self::sweep_subs`] takes them out in one pass once
    /// they outnumber the stored entries. Removing them one by one cost a hash lookup and
    /// two cache misses per cell (the subscription's and the entry moved into its slot):
    /// 18 % of a 96-node `loadbal` run, where a subscription covers 38 cells on average.
    fn expire_sub(&mut self, k: SubKey) {
        if self.subs.remove(&k).is_some() {
            let n = self.sub_slots.remove(&k).map_or(0, |s| s.len());
            self.live_sub_entries -= n;
            self.dead_sub_entries += n;
        }
    }

    /// Rebuilds the subscription cells from the stored subscriptions, dropping the copies
    /// of expired ones and the cells left empty.
    fn sweep_subs(&mut self) {
        self.sub_cells.values_mut().for_each(Vec::clear);
        let cell = self.sub_cell;
        for (k, s) in &self.subs {
            let (lo, hi, n) = cells_under(cell, &s.bbox);
            let slots = self.sub_slots.entry(*k).or_default();
            slots.clear();
            slots.reserve(n as usize);
            push_copies(&mut self.sub_cells, lo, hi, (*k, *s), slots);
        }
        self.sub_cells.retain(|_, v| !v.is_empty());
        self.dead_sub_entries = 0;
    }

    /// Removes a publication; returns it if it was stored.
    pub fn remove_pub(&mut self, id: ObjectId) -> Option<StoredPub> {
        let p = self.pubs.remove(&id)?;
        let at = self.pub_slots.remove(&id).map_or(usize::MAX, |i| i as usize);
        let c = self.cell_of(p.pos.x, p.pos.y);
        if let Some(v) = self.pub_cells.get_mut(&c) {
            if v.get(at).is_some_and(|e| e.0 == id) {
                v.swap_remove(at);
                if let Some((moved, _)) = v.get(at) {
                    self.pub_slots.insert(*moved, at as u32);
                }
            }
            if v.is_empty() {
                self.pub_cells.remove(&c);
            }
        }
        Some(p)
    }

    /// Drops every item whose expiry is at or before `now`; returns how many.
    pub fn expire(&mut self, now: Time) -> usize {
        let mut n = 0;
        self.expire_each(now, |_| n += 1);
        n
    }

    /// Drops every item whose expiry is at or before `now`, calling `dropped` with each,
    /// so that state kept beside the index can follow it without a walk of its own.
    pub fn expire_each(&mut self, now: Time, mut dropped: impl FnMut(Item)) {
        self.expired_at = self.expired_at.max(now);
        while let Some((t, item)) = self.expiry.pop_due(now) {
            match item {
                Item::Sub(k) => {
                    if self.subs.get(&k).is_some_and(|s| s.expires == t) {
                        self.expire_sub(k);
                        dropped(item);
                    }
                }
                Item::Pub(id) => {
                    if self.pubs.get(&id).is_some_and(|p| p.expires == t) {
                        self.remove_pub(id);
                        dropped(item);
                    }
                }
            }
        }
        if self.dead_sub_entries > self.live_sub_entries + SWEEP_SLACK {
            self.sweep_subs();
        }
        // Refreshes leave stale pairs queued.
        let (subs, pubs) = (&self.subs, &self.pubs);
        self.expiry.compact(subs.len() + pubs.len(), || {
            subs.iter()
                .map(|(k, s)| (s.expires, Item::Sub(*k)))
                .chain(pubs.iter().map(|(id, p)| (p.expires, Item::Pub(*id))))
        });
    }

    /// Calls `f` for every unexpired stored subscription containing `p` (unexpired at `now`
    /// and at the latest [`Self::expire`]: the index does not go back in time).
    pub fn subs_containing(&self, p: Point3, now: Time, mut f: impl FnMut(SubKey, &StoredSub)) {
        let c = cell_at(self.sub_cell, p.x, p.y);
        let now = now.max(self.expired_at);
        if let Some(v) = self.sub_cells.get(&c) {
            for (k, s) in v {
                if s.expires > now && s.bbox.contains(p) {
                    f(*k, s);
                }
            }
        }
    }

    /// Calls `f` for every unexpired stored publication inside `b`.
    pub fn pubs_inside(&self, b: &Aabb, now: Time, mut f: impl FnMut(ObjectId, &StoredPub)) {
        let (lo, hi, n) = self.cells_of(b);
        if n > self.max_cells {
            return;
        }
        for x in lo.0..=hi.0 {
            for y in lo.1..=hi.1 {
                if let Some(v) = self.pub_cells.get(&(x, y)) {
                    for (id, p) in v {
                        if p.expires > now && b.contains(p.pos) {
                            f(*id, p);
                        }
                    }
                }
            }
        }
    }

    /// Every stored subscription (any order).
    pub fn subs(&self) -> impl Iterator<Item = (SubKey, &StoredSub)> {
        self.subs.iter().map(|(k, s)| (*k, s))
    }

    /// Every stored publication (any order).
    pub fn pubs(&self) -> impl Iterator<Item = (ObjectId, &StoredPub)> {
        self.pubs.iter().map(|(k, p)| (*k, p))
    }
}

#[cfg(test)]
impl MatchIndex {
    /// Test check: every recorded slot holds its item, and every cell entry has a slot.
    fn slots_consistent(&self) -> bool {
        let subs_ok = self.subs.iter().all(|(k, s)| {
            let (lo, hi, _) = self.sub_cells_of(&s.bbox);
            let slots = &self.sub_slots[k];
            let mut j = 0;
            let mut ok = true;
            for x in lo.0..=hi.0 {
                for y in lo.1..=hi.1 {
                    ok &=
                        self.sub_cells.get(&(x, y)).and_then(|v| v.get(slots[j] as usize)) == Some(&(*k, *s));
                    j += 1;
                }
            }
            ok && j == slots.len()
        });
        let pubs_ok = self.pubs.iter().all(|(id, p)| {
            self.pub_cells[&self.cell_of(p.pos.x, p.pos.y)][self.pub_slots[id] as usize].0 == *id
        });
        let live = self.sub_slots.values().map(Vec::len).sum::<usize>();
        let cells = self.sub_cells.values().map(Vec::len).sum::<usize>() == live + self.dead_sub_entries
            && live == self.live_sub_entries
            && self.pub_cells.values().map(Vec::len).sum::<usize>() == self.pub_slots.len();
        subs_ok && pubs_ok && cells && self.sub_slots.len() == self.subs.len()
    }
}

/// The linear-scan store: same answers as [`MatchIndex`], by scanning everything.
#[derive(Clone, Debug, Default)]
pub struct LinearStore {
    /// Stored subscriptions.
    pub subs: Vec<(SubKey, StoredSub)>,
    /// Stored publications.
    pub pubs: Vec<(ObjectId, StoredPub)>,
}

impl LinearStore {
    /// Inserts or refreshes a subscription.
    pub fn insert_sub(&mut self, k: SubKey, s: StoredSub) {
        self.subs.retain(|(e, _)| *e != k);
        self.subs.push((k, s));
    }

    /// Inserts or refreshes a publication.
    pub fn insert_pub(&mut self, id: ObjectId, p: StoredPub) {
        self.pubs.retain(|(e, _)| *e != id);
        self.pubs.push((id, p));
    }

    /// Removes a subscription.
    pub fn remove_sub(&mut self, k: SubKey) {
        self.subs.retain(|(e, _)| *e != k);
    }

    /// Removes a publication.
    pub fn remove_pub(&mut self, id: ObjectId) {
        self.pubs.retain(|(e, _)| *e != id);
    }

    /// Calls `f` for every unexpired subscription containing `p`.
    pub fn subs_containing(&self, p: Point3, now: Time, mut f: impl FnMut(SubKey, &StoredSub)) {
        for (k, s) in &self.subs {
            if s.expires > now && s.bbox.contains(p) {
                f(*k, s);
            }
        }
    }

    /// Calls `f` for every unexpired publication inside `b`.
    pub fn pubs_inside(&self, b: &Aabb, now: Time, mut f: impl FnMut(ObjectId, &StoredPub)) {
        for (id, p) in &self.pubs {
            if p.expires > now && b.contains(p.pos) {
                f(*id, p);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sk(n: u32, s: u32) -> SubKey {
        SubKey {
            node: NodeId(n),
            seq: s,
        }
    }

    #[test]
    fn expiry_drops_items_and_refresh_extends_them() {
        let mut ix = MatchIndex::new(100.0, 1000);
        let b = Aabb::from_corners(Point3::new(0.0, 0.0, 0.0), Point3::new(50.0, 50.0, 0.0));
        ix.insert_sub(
            sk(1, 1),
            StoredSub {
                bbox: b,
                expires: Time::from_millis(100),
            },
        )
        .unwrap();
        ix.insert_sub(
            sk(1, 1),
            StoredSub {
                bbox: b,
                expires: Time::from_millis(300),
            },
        )
        .unwrap();
        assert_eq!(ix.expire(Time::from_millis(200)), 0, "the refresh extended it");
        assert_eq!(ix.sub_count(), 1);
        assert_eq!(ix.expire(Time::from_millis(300)), 1);
        assert_eq!(ix.sub_count(), 0);
        let mut hits = 0;
        ix.subs_containing(Point3::new(1.0, 1.0, 0.0), Time::ZERO, |_, _| hits += 1);
        assert_eq!(hits, 0);
    }

    #[test]
    fn refuses_oversize_and_invalid_boxes() {
        let mut ix = MatchIndex::new(100.0, 4);
        let big = Aabb::from_corners(Point3::new(0.0, 0.0, 0.0), Point3::new(250.0, 50.0, 0.0));
        assert_eq!(
            ix.insert_sub(
                sk(1, 1),
                StoredSub {
                    bbox: big,
                    expires: Time::MAX
                }
            ),
            Ok(()),
            "3 cells"
        );
        let huge = Aabb::from_corners(Point3::new(0.0, 0.0, 0.0), Point3::new(1e30, 1e30, 0.0));
        assert!(matches!(
            ix.insert_sub(
                sk(1, 2),
                StoredSub {
                    bbox: huge,
                    expires: Time::MAX
                }
            ),
            Err(IndexError::Oversize { .. })
        ));
        let nan = Aabb {
            min: Point3::new(f32::NAN, 0.0, 0.0),
            max: Point3::new(1.0, 1.0, 1.0),
        };
        assert_eq!(
            ix.insert_sub(
                sk(1, 3),
                StoredSub {
                    bbox: nan,
                    expires: Time::MAX
                }
            ),
            Err(IndexError::Invalid)
        );
        assert_eq!(ix.sub_count(), 1);
    }

    fn arb_box() -> impl Strategy<Value = Aabb> {
        (-500.0f32..1500.0, -500.0f32..1500.0, 0.0f32..600.0, 0.0f32..600.0).prop_map(|(x, y, w, h)| {
            Aabb::from_corners(Point3::new(x, y, -10.0), Point3::new(x + w, y + h, 10.0))
        })
    }

    fn arb_pt() -> impl Strategy<Value = Point3> {
        (-600.0f32..2200.0, -600.0f32..2200.0).prop_map(|(x, y)| Point3::new(x, y, 0.0))
    }

    /// One step of [`index_stays_equal_to_the_linear_scan_through_any_history`].
    #[derive(Clone, Debug)]
    enum Op {
        Sub(u32, Aabb, u64),
        Pub(u32, Point3, u64),
        RemoveSub(u32),
        RemovePub(u32),
        Advance(u64),
    }

    /// A box a few cells wide, across `y` = 0: a cell edge of both grids whatever their
    /// sides, near negative coordinates.
    fn small_box() -> impl Strategy<Value = Aabb> {
        (0.0f32..300.0, -150.0f32..150.0, 0.0f32..300.0, 0.0f32..300.0).prop_map(|(x, y, w, h)| {
            Aabb::from_corners(Point3::new(x, y, -10.0), Point3::new(x + w, y + h, 10.0))
        })
    }

    fn arb_op() -> impl Strategy<Value = Op> {
        prop_oneof![
            // Few keys over a few cells, so expired leftovers, refreshed keys and removals
            // meet in the same cells often.
            4 => (0u32..5, small_box(), 1u64..20).prop_map(|(k, b, ttl)| Op::Sub(k, b, ttl)),
            2 => (0u32..5, arb_pt(), 1u64..20).prop_map(|(k, p, ttl)| Op::Pub(k, p, ttl)),
            1 => (0u32..5).prop_map(Op::RemoveSub),
            1 => (0u32..5).prop_map(Op::RemovePub),
            3 => (1u64..10).prop_map(Op::Advance),
        ]
    }

    proptest! {
        /// Inserts, refreshes, removals and expiry in any order, with the expired
        /// subscriptions' leftover entries swept along the way (the test's sweep slack is
        /// small): after every step the index answers as the scan, and its slots hold.
        #[test]
        fn index_stays_equal_to_the_linear_scan_through_any_history(
            ops in proptest::collection::vec(arb_op(), 1..120),
            probes in proptest::collection::vec((arb_pt(), arb_box()), 1..4),
        ) {
            let mut ix = MatchIndex::new(128.0, 10_000);
            let mut lin = LinearStore::default();
            let mut now = 0u64;
            let at = |t: u64| Time::from_millis(t);
            for op in ops {
                match op {
                    Op::Sub(k, b, ttl) => {
                        let s = StoredSub { bbox: b, expires: at(now + ttl) };
                        ix.insert_sub(sk(k, 0), s).unwrap();
                        lin.insert_sub(sk(k, 0), s);
                    }
                    Op::Pub(i, p, ttl) => {
                        let id = ObjectId::new(NodeId(1), i);
                        let sp = StoredPub { primary: NodeId(1), pos: p, path: None, expires: at(now + ttl) };
                        ix.insert_pub(id, sp).unwrap();
                        lin.insert_pub(id, sp);
                    }
                    Op::RemoveSub(k) => {
                        ix.remove_sub(sk(k, 0));
                        lin.remove_sub(sk(k, 0));
                    }
                    Op::RemovePub(i) => {
                        ix.remove_pub(ObjectId::new(NodeId(1), i));
                        lin.remove_pub(ObjectId::new(NodeId(1), i));
                    }
                    Op::Advance(d) => {
                        now += d;
                        ix.expire(at(now));
                    }
                }
                prop_assert!(ix.slots_consistent());
                for (p, b) in &probes {
                    let (mut a, mut r) = (Vec::new(), Vec::new());
                    ix.subs_containing(*p, at(now), |k, s| a.push((k, s.bbox.min.x.to_bits())));
                    lin.subs_containing(*p, at(now), |k, s| r.push((k, s.bbox.min.x.to_bits())));
                    a.sort();
                    r.sort();
                    prop_assert_eq!(a, r);
                    let (mut a, mut r) = (Vec::new(), Vec::new());
                    ix.pubs_inside(b, at(now), |k, _| a.push(k));
                    lin.pubs_inside(b, at(now), |k, _| r.push(k));
                    a.sort();
                    r.sort();
                    prop_assert_eq!(a, r);
                }
            }
        }

        #[test]
        fn index_answers_equal_the_linear_scan(
            subs in proptest::collection::vec((0u32..20, arb_box(), 0u64..5), 0..40),
            pubs in proptest::collection::vec((0u32..30, arb_pt(), 0u64..5), 0..60),
            probes in proptest::collection::vec((arb_pt(), arb_box()), 1..10),
            now in 0u64..5,
        ) {
            let mut ix = MatchIndex::new(128.0, 10_000);
            let mut lin = LinearStore::default();
            for (i, b, e) in subs {
                let s = StoredSub { bbox: b, expires: Time::from_secs_f64(e as f64) };
                ix.insert_sub(sk(i, 0), s).unwrap();
                lin.insert_sub(sk(i, 0), s);
            }
            for (i, p, e) in pubs {
                let id = ObjectId::new(NodeId(1), i);
                let sp = StoredPub { primary: NodeId(1), pos: p, path: None, expires: Time::from_secs_f64(e as f64) };
                ix.insert_pub(id, sp).unwrap();
                lin.insert_pub(id, sp);
            }
            prop_assert!(ix.slots_consistent());
            let now = Time::from_secs_f64(now as f64);
            ix.expire(now);
            prop_assert!(ix.slots_consistent());
            for (p, b) in probes {
                let (mut a, mut r) = (Vec::new(), Vec::new());
                ix.subs_containing(p, now, |k, _| a.push(k));
                lin.subs_containing(p, now, |k, _| r.push(k));
                a.sort();
                r.sort();
                prop_assert_eq!(a, r);
                let (mut a, mut r) = (Vec::new(), Vec::new());
                ix.pubs_inside(&b, now, |k, _| a.push(k));
                lin.pubs_inside(&b, now, |k, _| r.push(k));
                a.sort();
                r.sort();
                prop_assert_eq!(a, r);
            }
        }
    }
}
