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

use std::collections::{BTreeMap, BTreeSet};
use worldmesh_core::hash::FastMap as HashMap;

use serde::{Deserialize, Serialize};
use worldmesh_core::{NodeId, ObjectId, Time};
use worldmesh_node::Node;
use worldmesh_replica::{GameObject, Role};

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

#[derive(Default)]
struct Counts {
    required: [u64; 3],
    missing: [u64; 3],
}

/// An object in a grid cell: its id, its primary's node, and the object.
type Located<'a, O> = (ObjectId, NodeId, &'a O);

/// Samples the world and accumulates [`MetricsReport`].
pub struct Collector<O: GameObject> {
    from: Time,
    entered: HashMap<(NodeId, ObjectId), Time>,
    prev_views: HashMap<ObjectId, Vec<(ObjectId, NodeId)>>,
    prev_state: HashMap<ObjectId, (O, Vec<u8>)>,
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
}

fn cell(v: f32) -> i32 {
    (v / CELL).floor() as i32
}

fn packets(payload: u64) -> u64 {
    payload.div_ceil(MTU_PAYLOAD)
}

impl<O: GameObject> Collector<O> {
    /// A collector that ignores samples before `from` (warm-up).
    pub fn new(from: Time) -> Self {
        Self {
            from,
            entered: HashMap::default(),
            prev_views: HashMap::default(),
            prev_state: HashMap::default(),
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
        }
    }

    /// Takes one sample of `nodes` at `now`.
    pub fn sample(&mut self, now: Time, nodes: &[Node<O>]) {
        // Every primary in the world, and a grid over them.
        let mut prim: BTreeMap<ObjectId, (NodeId, &O, u64, Time)> = BTreeMap::new();
        for n in nodes {
            for (id, e) in n.store().iter().filter(|(_, e)| e.role == Role::Primary) {
                prim.insert(id, (n.id(), &e.object, e.version, e.state_time));
            }
        }
        // Objects by grid cell, with what views need (owner and object) inline.
        let mut grid: HashMap<(i32, i32), Vec<Located<'_, O>>> = HashMap::default();
        for (id, (owner, o, _, _)) in &prim {
            let p = o.position();
            grid.entry((cell(p.x), cell(p.y)))
                .or_default()
                .push((*id, *owner, *o));
        }
        // The objects `o` is interested in, with their owners. Each object sits in exactly
        // one cell, so the list has no duplicates; cell order makes it deterministic.
        let view_of = |o: &O| -> Vec<(ObjectId, NodeId)> {
            let mut v = Vec::new();
            if let Some(b) = o.interest() {
                for cx in cell(b.min.x)..=cell(b.max.x) {
                    for cy in cell(b.min.y)..=cell(b.max.y) {
                        for (id, owner, other) in grid.get(&(cx, cy)).into_iter().flatten() {
                            if o.is_interested(other) {
                                v.push((*id, *owner));
                            }
                        }
                    }
                }
            }
            v
        };
        let measuring = now >= self.from;
        let encodings: HashMap<ObjectId, Vec<u8>> = prim
            .iter()
            .map(|(id, (_, o, _, _))| {
                let mut b = Vec::new();
                o.encode_state(&mut b);
                (*id, b)
            })
            .collect();
        let mut entered = HashMap::default();
        let mut views: HashMap<ObjectId, Vec<(ObjectId, NodeId)>> = HashMap::default();
        let mut required_now = 0u64;
        let mut by_owner: HashMap<NodeId, Vec<(ObjectId, &O)>> = HashMap::default();
        for (id, (owner, o, _, _)) in &prim {
            by_owner.entry(*owner).or_default().push((*id, *o));
        }
        for n in nodes {
            let mut req: BTreeSet<ObjectId> = BTreeSet::new();
            for (id, o) in by_owner.get(&n.id()).into_iter().flatten() {
                let v = view_of(o);
                req.extend(v.iter().filter(|(_, on)| *on != n.id()).map(|(x, _)| *x));
                // Clients are the objects with an area of interest (players); missiles and
                // items are not clients.
                if o.interest().is_some() {
                    views.insert(*id, v);
                }
            }
            for oid in req {
                let since = self.entered.get(&(n.id(), oid)).copied().unwrap_or(now);
                entered.insert((n.id(), oid), since);
                required_now += 1;
                if !measuring {
                    continue;
                }
                let Some((_, obj, pver, _)) = prim.get(&oid) else {
                    continue;
                };
                let kind = usize::from(obj.kind()).min(KINDS - 1);
                let held = n.store().get(oid);
                for (k, g) in GRACES_MS.iter().enumerate() {
                    if now - since >= std::time::Duration::from_millis(*g) {
                        self.all.required[k] += 1;
                        self.by_kind[kind].required[k] += 1;
                        if kind == 1 {
                            self.missiles.required[k] += 1;
                        }
                        if held.is_none() {
                            self.all.missing[k] += 1;
                            self.by_kind[kind].missing[k] += 1;
                            if kind == 1 {
                                self.missiles.missing[k] += 1;
                            }
                        }
                    }
                }
                self.cont[kind].1 += 1;
                if self.entered.contains_key(&(n.id(), oid)) {
                    self.cont[kind].0 += 1;
                }
                if let Some(e) = held {
                    let ms = if e.version >= *pver {
                        0.0
                    } else {
                        (now - e.state_time).as_secs_f64() * 1000.0
                    };
                    self.stale_sum += ms;
                    self.stale_n += 1;
                    self.stale_hist[(ms.round() as usize).min(5000)] += 1;
                }
            }
        }
        self.entered = entered;

        if measuring {
            self.samples += 1;
            self.required_total += required_now;
            self.objects_total += prim.len() as u64;
            // Per-object update size against the previous sample (0 = unchanged).
            let mut delta_len: HashMap<ObjectId, u64> = HashMap::default();
            let mut full_len: HashMap<ObjectId, u64> = HashMap::default();
            let mut buf = Vec::new();
            for (id, (_, o, _, _)) in &prim {
                let enc = &encodings[id];
                let full = enc.len() as u64;
                full_len.insert(*id, full);
                let d = match self.prev_state.get(id) {
                    Some((_, prev_enc)) if prev_enc == enc => 0,
                    Some((prev, _)) => {
                        buf.clear();
                        o.encode_delta(prev, &mut buf);
                        buf.len() as u64
                    }
                    None => full,
                };
                delta_len.insert(*id, d);
            }
            // Broadcast: each node's changed primaries to every other node.
            for n in nodes {
                let payload: u64 = prim
                    .iter()
                    .filter(|(_, (owner, ..))| *owner == n.id())
                    .map(|(id, _)| delta_len[id])
                    .filter(|d| *d > 0)
                    .map(|d| d + OBJ_HEADER)
                    .sum();
                let per_peer = payload + packets(payload) * PKT_HEADER;
                self.bc_bytes += per_peer * (nodes.len() as u64).saturating_sub(1);
                self.bc_nodes += 1;
            }
            // Client-server: one packet per player per frame with its view.
            for (id, v) in &views {
                let prev = self.prev_views.get(id);
                let mut payload = delta_len[id] + OBJ_HEADER;
                // Its own state went in above: the other objects in view follow.
                for (o, owner) in v.iter().filter(|(o, _)| o != id) {
                    let was =
                        prev.is_some_and(|p| p.contains(&(*o, *owner))) && self.prev_state.contains_key(o);
                    let d = if was { delta_len[o] } else { full_len[o] };
                    if d > 0 {
                        payload += d + OBJ_HEADER;
                    }
                }
                self.cs_bytes += payload + packets(payload).max(1) * PKT_HEADER;
                self.cs_clients += 1;
            }
        }
        self.prev_views = views;
        let mut encodings = encodings;
        self.prev_state = prim
            .iter()
            .map(|(id, (_, o, _, _))| (*id, ((*o).clone(), encodings.remove(id).unwrap_or_default())))
            .collect();
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
