//! Consistency metrics and the baseline architectures, sampled on the running game
//! (paper `000` §6.3, §7).
//!
//! At every sample (once per frame interval) the collector looks at the whole world:
//!
//! - **Required replicas.** For node `n`, an object `o` whose primary is elsewhere is
//!   required when some primary on `n` is interested in it (the game's own fine-grained
//!   check). It is **missing** when `n`'s store does not hold it. With a grace of `g` ms,
//!   only pairs that have been required continuously for at least `g` count (§6.3.2,
//!   Figure 11: 0, 100 and 400 ms). Fractions are Σ missing / Σ required over all samples.
//! - **Already-discovered share** (Figure 7b): of the required (node, object) pairs at a
//!   sample, the share that were required at the previous sample too — updates to those
//!   go to replicas that discovery had time to create.
//! - **Staleness**: for held required replicas, 0 if the replica has the primary's version,
//!   otherwise the time since the primary sent the version the replica holds.
//! - **Baselines on the same trace** (§7, Figure 12): what a *client-server* server and a
//!   *broadcast* node would send for exactly these object states. Client-server: one server
//!   sends each player (each object with an area of interest; missiles and items are not
//!   clients) a packet per frame with its own state and, for every other object in the
//!   player's area of interest, a delta against the previous frame if the object was in view
//!   then, else the full state. Broadcast: every node sends the deltas of its changed
//!   primaries to every other node. Both use the game's own delta encoding, an 8-byte
//!   per-object header (id and sequence, as worldmesh's update items) and 34 bytes per
//!   datagram (IPv4 + UDP + worldmesh frame header) with datagrams of at most 1200 bytes.

use worldmesh_core::hash::FastMap as HashMap;

use serde::{Deserialize, Serialize};
use worldmesh_core::{NodeId, ObjectId, Time};
use worldmesh_node::Node;
use worldmesh_replica::GameObject;

use crate::grid::CellGrid;

/// Grace periods, ms (Figure 11).
pub const GRACES_MS: [u64; 3] = [0, 100, 400];
/// Per-object header of baseline updates, bytes.
const OBJ_HEADER: u64 = 8;
/// Per-datagram overhead of baselines, bytes (28 IPv4/UDP + 6 frame header).
const PKT_HEADER: u64 = 34;
/// Datagram payload limit of baselines, bytes.
const MTU_PAYLOAD: u64 = 1200;
/// Kinds tracked separately (the model game's 0 = player, 1 = missile, 2 = item).
const KINDS: usize = 4;
/// Grid cell for spatial queries, units.
const CELL: f32 = 512.0;

/// The collected figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MetricsReport {
    /// Samples taken.
    pub samples: u64,
    /// Fraction of required replicas missing at 0, 100 and 400 ms grace (all kinds).
    pub missing: [f64; 3],
    /// The same for missiles only (kind 1), Table 1.
    pub missing_missiles: [f64; 3],
    /// Missing fractions at 0, 100 and 400 ms by object kind (0 players, 1 missiles,
    /// 2 items, 3 other), `None` where a kind was never required.
    pub missing_by_kind: Vec<Option<[f64; 3]>>,
    /// Required (node, object) pairs per sample, mean: replicas a node needs.
    pub required_per_node: f64,
    /// Share of required pairs that were already required at the previous sample, by kind
    /// (Figure 7b). `None` where a kind never occurred.
    pub discovered_share: Vec<Option<f64>>,
    /// Replica staleness over required held replicas: mean, p50, p95, p99 in ms.
    pub staleness_ms: [f64; 4],
    /// Client-server baseline: the server's outbound kbit/s.
    pub client_server_server_kbps: f64,
    /// Client-server baseline: mean outbound kbit/s per client connection.
    pub client_server_per_client_kbps: f64,
    /// Broadcast baseline: mean outbound kbit/s per node.
    pub broadcast_per_node_kbps: f64,
    /// Objects in the world, mean over samples.
    pub objects: f64,
}

/// Per-sample view detail for paper `000` Figure 13(b)/(c), recorded only when asked for
/// ([`Collector::record_view_detail`]; off by default, so reports do not change).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ViewDetail {
    /// Per grace (0, 100, 400 ms): histogram over (node, sample) of the number of required
    /// replicas missing (`[g][k]` = samples with `k` missing; the last bucket holds more).
    pub missing_per_node: [Vec<u64>; 3],
    /// Histogram of the distance (game units, buckets of `DIST_BUCKET`) from the nearest
    /// interested primary of the node to each required remote object, every sample; it
    /// ends at the largest distance seen.
    pub dist_required: Vec<u64>,
    /// The same for required objects that are missing (0 ms grace); as long as
    /// `dist_required`.
    pub dist_missing: Vec<u64>,
}

/// Bucket width of [`ViewDetail`] distance histograms, game units.
pub const DIST_BUCKET: f32 = 10.0;
const DETAIL_MAX_MISSING: usize = 200;
/// Distance buckets at most (1,000 km of game units at 10 units each: far beyond any map the
/// model generates, whose diagonal bounds every distance; the histograms grow to the
/// largest distance seen, so no bucket lumps a tail together).
const DETAIL_MAX_DIST: usize = 100_000;

#[derive(Default)]
struct Counts {
    required: [u64; 3],
    missing: [u64; 3],
}

/// A primary of the sampled world: its id, its node, the object and its version.
struct Prim<'a, O> {
    id: ObjectId,
    owner: NodeId,
    object: &'a O,
    version: u64,
}

/// The previous sample's objects, sorted by id, with their full-state encodings (one
/// buffer, a range per object). Kept between samples so its buffers are reused.
struct PrevState<O> {
    ids: Vec<ObjectId>,
    objects: Vec<O>,
    enc: Vec<u8>,
    ranges: Vec<(usize, usize)>,
}

impl<O> Default for PrevState<O> {
    fn default() -> Self {
        Self {
            ids: Vec::new(),
            objects: Vec::new(),
            enc: Vec::new(),
            ranges: Vec::new(),
        }
    }
}

impl<O> PrevState<O> {
    /// The previous object `id` and its encoding.
    fn get(&self, id: ObjectId) -> Option<(&O, &[u8])> {
        let k = self.ids.binary_search(&id).ok()?;
        let (a, b) = self.ranges[k];
        Some((&self.objects[k], &self.enc[a..b]))
    }
}

/// Lists of `T` keyed by `K`, in one buffer (a range per key): what the previous sample
/// left for the next, rebuilt at every sample into the other of two such buffers.
struct Lists<K, T> {
    ranges: HashMap<K, (usize, usize)>,
    items: Vec<T>,
}

impl<K, T> Default for Lists<K, T> {
    fn default() -> Self {
        Self {
            ranges: HashMap::default(),
            items: Vec::new(),
        }
    }
}

impl<K: std::hash::Hash + Eq, T> Lists<K, T> {
    fn clear(&mut self) {
        self.ranges.clear();
        self.items.clear();
    }

    /// The list of `key` (empty if none).
    fn get(&self, key: &K) -> &[T] {
        self.ranges.get(key).map_or(&[], |&(a, b)| &self.items[a..b])
    }

    /// Makes the items pushed since `start` the list of `key`.
    fn close(&mut self, key: K, start: usize) {
        self.ranges.insert(key, (start, self.items.len()));
    }
}

/// Buffers a sample fills and the next one reuses (their contents mean nothing between
/// samples), so a sample allocates nothing once the world has reached its size.
#[derive(Default)]
struct Scratch {
    /// (owner, index into the primaries), sorted: each node's primaries, in id order.
    by_owner: Vec<(NodeId, usize)>,
    /// The clients' views: (client, range in `view_items`).
    views: Vec<(usize, usize, usize)>,
    view_items: Vec<usize>,
    view: Vec<usize>,
    required: Vec<usize>,
    nearest: HashMap<usize, f32>,
    /// Full-state encodings of the primaries (a range each).
    enc: Vec<u8>,
    ranges: Vec<(usize, usize)>,
    delta_len: Vec<u64>,
    full_len: Vec<u64>,
    /// Per primary: it was a primary at the previous sample too.
    in_prev: Vec<bool>,
    delta: Vec<u8>,
    /// The next [`Collector::entered`] and [`Collector::prev_views`], being built.
    entered: Lists<NodeId, (ObjectId, Time)>,
    prev_views: Lists<ObjectId, (ObjectId, NodeId)>,
    /// The number of primaries at the last sample (the next sample's list reserves it).
    primaries: usize,
}

/// The range of `owner`'s primaries in a sorted `by_owner`.
fn owned(by_owner: &[(NodeId, usize)], owner: NodeId) -> &[(NodeId, usize)] {
    let a = by_owner.partition_point(|(n, _)| *n < owner);
    let b = a + by_owner[a..].partition_point(|(n, _)| *n == owner);
    &by_owner[a..b]
}

/// Samples the world and accumulates [`MetricsReport`].
pub struct Collector<O: GameObject> {
    from: Time,
    /// Per node, the objects it required at the last sample (sorted by id) and since when.
    entered: Lists<NodeId, (ObjectId, Time)>,
    /// Each client's view at the last sample: (object, owner) pairs, sorted.
    prev_views: Lists<ObjectId, (ObjectId, NodeId)>,
    prev_state: PrevState<O>,
    /// The sampled objects (indices into the sample's primaries) by grid cell: rebuilt at
    /// every sample, its lists' allocations kept.
    grid: CellGrid<usize>,
    scratch: Scratch,
    all: Counts,
    missiles: Counts,
    by_kind: [Counts; KINDS],
    cont: [(u64, u64); KINDS],
    stale_hist: Vec<u64>,
    stale_sum: f64,
    stale_n: u64,
    cs_bytes: u64,
    cs_clients: u64,
    bc_bytes: u64,
    bc_nodes: u64,
    samples: u64,
    required_total: u64,
    objects_total: u64,
    detail: Option<ViewDetail>,
}

fn cell(v: f32) -> i32 {
    worldmesh_core::floor_i32(v / CELL)
}

fn packets(payload: u64) -> u64 {
    payload.div_ceil(MTU_PAYLOAD)
}

impl<O: GameObject> Collector<O> {
    /// A collector that ignores samples before `from` (warm-up).
    pub fn new(from: Time) -> Self {
        Self {
            from,
            entered: Lists::default(),
            prev_views: Lists::default(),
            prev_state: PrevState::default(),
            grid: CellGrid::default(),
            scratch: Scratch::default(),
            all: Counts::default(),
            missiles: Counts::default(),
            by_kind: Default::default(),
            cont: [(0, 0); KINDS],
            stale_hist: vec![0; 5001],
            stale_sum: 0.0,
            stale_n: 0,
            cs_bytes: 0,
            cs_clients: 0,
            bc_bytes: 0,
            bc_nodes: 0,
            samples: 0,
            required_total: 0,
            objects_total: 0,
            detail: None,
        }
    }

    /// Records [`ViewDetail`] from now on (costs a distance per viewed object per sample).
    pub fn record_view_detail(&mut self) {
        if self.detail.is_none() {
            self.detail = Some(ViewDetail {
                missing_per_node: std::array::from_fn(|_| vec![0; DETAIL_MAX_MISSING + 1]),
                dist_required: Vec::new(),
                dist_missing: Vec::new(),
            });
        }
    }

    /// The view detail recorded so far, if asked for.
    pub fn view_detail(&self) -> Option<&ViewDetail> {
        self.detail.as_ref()
    }

    /// Takes one sample of `nodes` at `now`.
    ///
    /// Objects are addressed by their index in the id-sorted list of primaries, so the
    /// per-object figures are plain vectors; every sum runs in a fixed order (nodes in
    /// order, objects by id), which keeps the figures reproducible.
    pub fn sample(&mut self, now: Time, nodes: &[Node<O>]) {
        let sc = &mut self.scratch;
        // Every primary in the world, by id (were an id a primary on two nodes, the last
        // node's wins).
        let mut prim: Vec<Prim<'_, O>> = Vec::with_capacity(sc.primaries);
        for n in nodes {
            for (id, e) in n.store().primaries() {
                prim.push(Prim {
                    id,
                    owner: n.id(),
                    object: &e.object,
                    version: e.version,
                });
            }
        }
        prim.sort_by_key(|p| p.id); // stable: a duplicate id keeps node order
        prim.dedup_by(|later, earlier| {
            let same = later.id == earlier.id;
            if same {
                std::mem::swap(later, earlier);
            }
            same
        });
        sc.primaries = prim.len();
        // Objects (indices into `prim`) by grid cell, in id order.
        let mut grid = std::mem::take(&mut self.grid);
        grid.clear();
        for (k, p) in prim.iter().enumerate() {
            let pos = p.object.position();
            grid.entry((cell(pos.x), cell(pos.y))).push(k);
        }
        // The objects `o` is interested in. Each object sits in exactly one cell, so the
        // list has no duplicates; cell order makes it deterministic.
        let view_of = |o: &O, world: &O::World, v: &mut Vec<usize>| {
            v.clear();
            if let Some(b) = o.interest(world) {
                for cx in cell(b.min.x)..=cell(b.max.x) {
                    for cy in cell(b.min.y)..=cell(b.max.y) {
                        for &k in grid.get((cx, cy)) {
                            if o.is_interested(prim[k].object, world) {
                                v.push(k);
                            }
                        }
                    }
                }
            }
        };
        let measuring = now >= self.from;
        sc.enc.clear();
        sc.ranges.clear();
        for p in &prim {
            let a = sc.enc.len();
            p.object.encode_state(&mut sc.enc);
            sc.ranges.push((a, sc.enc.len()));
        }
        sc.by_owner.clear();
        sc.by_owner
            .extend(prim.iter().enumerate().map(|(k, p)| (p.owner, k)));
        sc.by_owner.sort_unstable();
        sc.entered.clear();
        // Clients' views: (client, objects in view).
        sc.views.clear();
        sc.view_items.clear();
        let mut required_now = 0u64;
        let detail_on = self.detail.is_some() && measuring;
        for n in nodes {
            sc.required.clear();
            sc.nearest.clear();
            let world = n.world().as_ref();
            let mut missing_here = [0usize; 3];
            for &(_, k) in owned(&sc.by_owner, n.id()) {
                let o = prim[k].object;
                view_of(o, world, &mut sc.view);
                sc.required
                    .extend(sc.view.iter().copied().filter(|x| prim[*x].owner != n.id()));
                if detail_on {
                    // From where the object looks: the centre of its area of interest
                    // (a dead player already looks at its respawn point).
                    let p = o.interest(world).map_or_else(|| o.position(), |b| b.center());
                    for &x in sc.view.iter().filter(|x| prim[**x].owner != n.id()) {
                        let q = prim[x].object.position();
                        let d = ((p.x - q.x).powi(2) + (p.y - q.y).powi(2)).sqrt();
                        let e = sc.nearest.entry(x).or_insert(f32::INFINITY);
                        *e = e.min(d);
                    }
                }
                // Clients are the objects with an area of interest (players); missiles and
                // items are not clients.
                if o.interest(world).is_some() {
                    // In index order, which is id order.
                    let a = sc.view_items.len();
                    sc.view_items.extend_from_slice(&sc.view);
                    sc.view_items[a..].sort_unstable();
                    sc.views.push((k, a, sc.view_items.len()));
                }
            }
            // Indices follow ids: sorted indices are the required objects by id.
            sc.required.sort_unstable();
            sc.required.dedup();
            let before = self.entered.get(&n.id());
            let mut at = 0;
            let start = sc.entered.items.len();
            for &k in &sc.required {
                let oid = prim[k].id;
                while at < before.len() && before[at].0 < oid {
                    at += 1;
                }
                let was = before.get(at).filter(|(id, _)| *id == oid).map(|(_, t)| *t);
                let since = was.unwrap_or(now);
                sc.entered.items.push((oid, since));
                required_now += 1;
                if !measuring {
                    continue;
                }
                let (obj, pver) = (prim[k].object, prim[k].version);
                let kind = usize::from(obj.kind()).min(KINDS - 1);
                let held = n.store().get(oid);
                for (g, grace) in GRACES_MS.iter().enumerate() {
                    if now - since >= std::time::Duration::from_millis(*grace) {
                        self.all.required[g] += 1;
                        self.by_kind[kind].required[g] += 1;
                        if kind == 1 {
                            self.missiles.required[g] += 1;
                        }
                        if held.is_none() {
                            missing_here[g] += 1;
                            self.all.missing[g] += 1;
                            self.by_kind[kind].missing[g] += 1;
                            if kind == 1 {
                                self.missiles.missing[g] += 1;
                            }
                        }
                    }
                }
                if let (true, Some(det), Some(d)) = (detail_on, self.detail.as_mut(), sc.nearest.get(&k)) {
                    let b = ((d / DIST_BUCKET) as usize).min(DETAIL_MAX_DIST);
                    if det.dist_required.len() <= b {
                        det.dist_required.resize(b + 1, 0);
                        det.dist_missing.resize(b + 1, 0);
                    }
                    det.dist_required[b] += 1;
                    if held.is_none() {
                        det.dist_missing[b] += 1;
                    }
                }
                self.cont[kind].1 += 1;
                if was.is_some() {
                    self.cont[kind].0 += 1;
                }
                if let Some(e) = held {
                    let ms = if e.version >= pver {
                        0.0
                    } else {
                        (now - e.state_time).as_secs_f64() * 1000.0
                    };
                    self.stale_sum += ms;
                    self.stale_n += 1;
                    self.stale_hist[(ms.round() as usize).min(5000)] += 1;
                }
            }
            if let (true, Some(det)) = (detail_on, self.detail.as_mut()) {
                for (g, m) in missing_here.iter().enumerate() {
                    det.missing_per_node[g][(*m).min(DETAIL_MAX_MISSING)] += 1;
                }
            }
            sc.entered.close(n.id(), start);
        }
        std::mem::swap(&mut self.entered, &mut sc.entered);

        if measuring {
            self.samples += 1;
            self.required_total += required_now;
            self.objects_total += prim.len() as u64;
            // Per-object update size against the previous sample (0 = unchanged).
            sc.delta_len.clear();
            sc.full_len.clear();
            sc.in_prev.clear();
            for (k, p) in prim.iter().enumerate() {
                let (a, b) = sc.ranges[k];
                let code = &sc.enc[a..b];
                let full = code.len() as u64;
                sc.full_len.push(full);
                let prev = self.prev_state.get(p.id);
                sc.in_prev.push(prev.is_some());
                let d = match prev {
                    Some((_, prev_enc)) if prev_enc == code => 0,
                    Some((prev, _)) => {
                        sc.delta.clear();
                        p.object.encode_delta(prev, &mut sc.delta);
                        sc.delta.len() as u64
                    }
                    None => full,
                };
                sc.delta_len.push(d);
            }
            // Broadcast: each node's changed primaries to every other node.
            for n in nodes {
                let payload: u64 = owned(&sc.by_owner, n.id())
                    .iter()
                    .map(|(_, k)| sc.delta_len[*k])
                    .filter(|d| *d > 0)
                    .map(|d| d + OBJ_HEADER)
                    .sum();
                let per_peer = payload + packets(payload) * PKT_HEADER;
                self.bc_bytes += per_peer * (nodes.len() as u64).saturating_sub(1);
                self.bc_nodes += 1;
            }
            // Client-server: one packet per player per frame with its view.
            for &(c, a, b) in &sc.views {
                let id = prim[c].id;
                // Both sorted: walk the previous view beside this one.
                let prev = self.prev_views.get(&id);
                let mut j = 0;
                let mut payload = sc.delta_len[c] + OBJ_HEADER;
                // Its own state went in above: the other objects in view follow.
                for &k in sc.view_items[a..b].iter().filter(|k| prim[**k].id != id) {
                    let key = (prim[k].id, prim[k].owner);
                    while prev.get(j).is_some_and(|p| *p < key) {
                        j += 1;
                    }
                    let was = prev.get(j) == Some(&key) && sc.in_prev[k];
                    let d = if was { sc.delta_len[k] } else { sc.full_len[k] };
                    if d > 0 {
                        payload += d + OBJ_HEADER;
                    }
                }
                self.cs_bytes += payload + packets(payload).max(1) * PKT_HEADER;
                self.cs_clients += 1;
            }
        }
        sc.prev_views.clear();
        for &(c, a, b) in &sc.views {
            // Sorted: a view is in index order, which is id order.
            let start = sc.prev_views.items.len();
            sc.prev_views
                .items
                .extend(sc.view_items[a..b].iter().map(|k| (prim[*k].id, prim[*k].owner)));
            sc.prev_views.close(prim[c].id, start);
        }
        std::mem::swap(&mut self.prev_views, &mut sc.prev_views);
        // This sample's objects become the previous state, copied into the old buffers.
        let prev = &mut self.prev_state;
        prev.ids.clear();
        prev.ids.extend(prim.iter().map(|p| p.id));
        prev.objects.truncate(prim.len());
        for (k, p) in prim.iter().enumerate() {
            match prev.objects.get_mut(k) {
                Some(slot) => slot.clone_from(p.object),
                None => prev.objects.push(p.object.clone()),
            }
        }
        std::mem::swap(&mut prev.enc, &mut sc.enc);
        std::mem::swap(&mut prev.ranges, &mut sc.ranges);
        self.grid = grid;
    }

    /// The figures so far; `frame_s` is the sample interval (one frame).
    pub fn report(&self, frame_s: f64) -> MetricsReport {
        let frac = |c: &Counts| -> [f64; 3] {
            std::array::from_fn(|k| {
                if c.required[k] == 0 {
                    0.0
                } else {
                    c.missing[k] as f64 / c.required[k] as f64
                }
            })
        };
        let pct = |p: f64| -> f64 {
            let target = (p * self.stale_n as f64).ceil() as u64;
            let mut acc = 0;
            for (ms, c) in self.stale_hist.iter().enumerate() {
                acc += c;
                if acc >= target.max(1) {
                    return ms as f64;
                }
            }
            0.0
        };
        let samples = self.samples.max(1) as f64;
        let secs = samples * frame_s;
        let kbps = |bytes: u64| bytes as f64 * 8.0 / 1000.0 / secs;
        let nodes_per_sample = self.bc_nodes as f64 / samples;
        let clients_per_sample = self.cs_clients as f64 / samples;
        MetricsReport {
            samples: self.samples,
            missing: frac(&self.all),
            missing_missiles: frac(&self.missiles),
            missing_by_kind: self
                .by_kind
                .iter()
                .map(|c| if c.required[0] == 0 { None } else { Some(frac(c)) })
                .collect(),
            required_per_node: if nodes_per_sample > 0.0 {
                self.required_total as f64 / samples / nodes_per_sample
            } else {
                0.0
            },
            discovered_share: self
                .cont
                .iter()
                .map(|(c, t)| {
                    if *t == 0 {
                        None
                    } else {
                        Some(*c as f64 / *t as f64)
                    }
                })
                .collect(),
            staleness_ms: [
                if self.stale_n == 0 {
                    0.0
                } else {
                    self.stale_sum / self.stale_n as f64
                },
                pct(0.5),
                pct(0.95),
                pct(0.99),
            ],
            client_server_server_kbps: kbps(self.cs_bytes),
            client_server_per_client_kbps: if clients_per_sample > 0.0 {
                kbps(self.cs_bytes) / clients_per_sample
            } else {
                0.0
            },
            broadcast_per_node_kbps: if nodes_per_sample > 0.0 {
                kbps(self.bc_bytes) / nodes_per_sample
            } else {
                0.0
            },
            objects: self.objects_total as f64 / samples,
        }
    }
}
