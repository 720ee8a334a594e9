//! Building a [`Tick`] from node state machines.
//!
//! [`Observer::observe`] reads a slice of [`Node`]s (it never changes them): every primary
//! with its position, kind and area of interest, and per node its primaries, players,
//! replicas and cumulative sent bytes by class. Given every node of a world at once (the
//! simulator), it also counts each node's *missing replicas* as paper `000` §6.3 defines
//! them: objects whose primary is elsewhere that one of the node's primaries is interested
//! in (the game's own `is_interested`) and that the node does not hold. A real node
//! observing only itself passes `count_missing = false`.
//!
//! While a region migrates, an object can be a primary on two nodes for a moment (frozen
//! at the old one, bound at the new one); the unfrozen copy is the one shown.

use worldmesh_core::hash::FastMap;
use worldmesh_core::{MessageClass, NodeId, ObjectId};
use worldmesh_node::Node;
use worldmesh_replica::{GameObject, Role};

use crate::model::{NodeSample, ObjectSample, Rect, Tick, WorldInfo};

/// Grid cell of the missing-replica count, world units.
const CELL: f32 = 512.0;

/// The traffic-class names nodes count bytes by, in counter order.
pub fn class_names() -> Vec<String> {
    MessageClass::ALL.iter().map(|c| c.name().to_owned()).collect()
}

/// Reads nodes into ticks; keeps scratch buffers between calls.
pub struct Observer {
    player_kind: Vec<bool>,
    grid: FastMap<(i32, i32), Vec<u32>>,
    stamp: Vec<u32>,
}

/// A primary found on some node.
struct Found<'a, O> {
    id: ObjectId,
    node: usize,
    frozen: bool,
    object: &'a O,
}

impl Observer {
    /// An observer for `world` (its kinds say which objects are players).
    pub fn new(world: &WorldInfo) -> Self {
        Self {
            player_kind: world.kinds.iter().map(|k| k.player).collect(),
            grid: FastMap::default(),
            stamp: Vec::new(),
        }
    }

    /// The state of `nodes` at producer time `time_s`; `up(id)` says whether a node runs.
    /// With `count_missing` (and every node of the world given), each node's missing
    /// replicas are counted too.
    pub fn observe<O: GameObject>(
        &mut self,
        time_s: f64,
        nodes: &[Node<O>],
        up: &dyn Fn(NodeId) -> bool,
        count_missing: bool,
    ) -> Tick {
        let mut found: Vec<Found<'_, O>> = Vec::new();
        for (k, n) in nodes.iter().enumerate() {
            let frozen = n.replicas().frozen();
            for (id, e) in n.store().iter() {
                if e.role == Role::Primary {
                    found.push(Found {
                        id,
                        node: k,
                        frozen: frozen.contains(&id),
                        object: &e.object,
                    });
                }
            }
        }
        // One entry per id, the unfrozen one first.
        found.sort_by_key(|f| (f.id, f.frozen));
        found.dedup_by_key(|f| f.id);

        let mut per_node = vec![(0u32, 0u32); nodes.len()];
        let objects: Vec<ObjectSample> = found
            .iter()
            .map(|f| {
                let o = f.object;
                let p = o.position();
                let kind = o.kind();
                per_node[f.node].0 += 1;
                if self.player_kind.get(usize::from(kind)).copied().unwrap_or(false) {
                    per_node[f.node].1 += 1;
                }
                ObjectSample {
                    id: f.id,
                    x: p.x,
                    y: p.y,
                    kind,
                    owner: nodes[f.node].id(),
                    aoi: o.interest(nodes[f.node].world()).map(|b| Rect::from_aabb(&b)),
                }
            })
            .collect();
        let missing = if count_missing {
            Some(self.missing(nodes, &found))
        } else {
            None
        };
        let samples = nodes
            .iter()
            .enumerate()
            .map(|(k, n)| NodeSample {
                id: n.id(),
                up: up(n.id()),
                players: per_node[k].1,
                primaries: per_node[k].0,
                replicas: n.store().replica_count() as u32,
                missing: missing.as_ref().map(|m: &Vec<u32>| m[k]),
                frame_ms: None,
                sessions: None,
                capacity: None,
                local_health: n.cluster_summary().map(|c| c.local_health),
                sent_bytes: n.stats().traffic.sent.iter().map(|c| c.bytes).collect(),
            })
            .collect();
        Tick {
            time_s,
            objects,
            nodes: samples,
        }
    }

    /// Missing replicas per node (paper `000` §6.3, no grace).
    fn missing<O: GameObject>(&mut self, nodes: &[Node<O>], found: &[Found<'_, O>]) -> Vec<u32> {
        let cell = |v: f32| (v / CELL).floor().clamp(-1e6, 1e6) as i32;
        for v in self.grid.values_mut() {
            v.clear();
        }
        for (k, f) in found.iter().enumerate() {
            let p = f.object.position();
            self.grid
                .entry((cell(p.x), cell(p.y)))
                .or_default()
                .push(k as u32);
        }
        self.stamp.clear();
        self.stamp.resize(found.len(), u32::MAX);
        let mut out = vec![0u32; nodes.len()];
        // Subscribers grouped by node, so one stamp per object dedupes per node.
        let mut order: Vec<usize> = (0..found.len()).collect();
        order.sort_by_key(|&k| found[k].node);
        for sub in order.into_iter().map(|k| &found[k]) {
            let world = nodes[sub.node].world().as_ref();
            let Some(b) = sub.object.interest(world) else {
                continue;
            };
            let store = nodes[sub.node].store();
            let tag = sub.node as u32;
            for cx in cell(b.min.x)..=cell(b.max.x) {
                for cy in cell(b.min.y)..=cell(b.max.y) {
                    let Some(list) = self.grid.get(&(cx, cy)) else {
                        continue;
                    };
                    for &k in list {
                        let o = &found[k as usize];
                        if o.node == sub.node
                            || self.stamp[k as usize] == tag
                            || !sub.object.is_interested(o.object, world)
                        {
                            continue;
                        }
                        self.stamp[k as usize] = tag;
                        if store.get(o.id).is_none() {
                            out[sub.node] += 1;
                        }
                    }
                }
            }
        }
        out
    }
}
