//! A synthetic producer: many objects moving on a square map, owned by nodes by region,
//! with a region migrating every few seconds. It costs almost nothing to run, so it feeds
//! the page at sizes the simulator cannot reach in real time on a small machine (the
//! frame-rate measurement at 4,000+ objects), and exercises every part of the protocol.
//! `worldmesh dashboard --synthetic N` serves it.

use worldmesh_core::{DetRng, NodeId, ObjectId};

use crate::model::{KindInfo, NodeSample, ObjectSample, Rect, Tick, WorldInfo};
use crate::observe::class_names;

/// Map side per 16 objects, units (the model workload's `side_per_16_players`).
const SIDE_PER_16: f32 = 2400.0;
/// Player speed, units/s (the model workload's).
const SPEED: f32 = 320.0;
/// Area-of-interest half extent, units (the model workload's).
const AOI: f32 = 450.0;

struct Obj {
    id: ObjectId,
    x: f32,
    y: f32,
    vx: f32,
    vy: f32,
    kind: u8,
    owner: u32,
}

/// The synthetic world (see the module documentation).
pub struct SyntheticFeed {
    side: f32,
    nodes: u32,
    objects: Vec<Obj>,
    rng: DetRng,
    time_s: f64,
    migrate_every_s: f64,
    next_migration_s: f64,
    sent: Vec<Vec<u64>>,
}

impl SyntheticFeed {
    /// `objects` objects (7 in 8 players, the rest items) on `nodes` nodes; a random
    /// node's players move to another node every `migrate_every_s` seconds (0: never).
    pub fn new(objects: usize, nodes: usize, migrate_every_s: f64, seed: u64) -> Self {
        let nodes = nodes.clamp(1, 1 << 16) as u32;
        let side = SIDE_PER_16 * (objects.max(16) as f32 / 16.0).sqrt();
        let mut rng = DetRng::new(seed).fork(0x5917);
        let strips = nodes as f32;
        let objects = (0..objects as u32)
            .map(|k| {
                let x = rng.range_f32(0.0, side);
                let y = rng.range_f32(0.0, side);
                let a = rng.range_f32(0.0, std::f32::consts::TAU);
                let player = k % 8 != 7;
                // Owners by vertical strip: a region of the map per node.
                let owner = ((x / side * strips) as u32).min(nodes - 1);
                Obj {
                    id: ObjectId::new(NodeId(owner), k),
                    x,
                    y,
                    vx: if player { SPEED * a.cos() } else { 0.0 },
                    vy: if player { SPEED * a.sin() } else { 0.0 },
                    kind: if player { 0 } else { 2 },
                    owner,
                }
            })
            .collect();
        Self {
            side,
            nodes,
            objects,
            rng,
            time_s: 0.0,
            migrate_every_s,
            next_migration_s: migrate_every_s,
            sent: vec![vec![0; class_names().len()]; nodes as usize],
        }
    }

    /// The world to give the hub.
    pub fn world(&self) -> WorldInfo {
        WorldInfo {
            title: format!(
                "synthetic feed: {} objects on {} nodes",
                self.objects.len(),
                self.nodes
            ),
            bounds: Rect::new(0.0, 0.0, self.side, self.side),
            obstacles: Vec::new(),
            kinds: vec![
                KindInfo {
                    name: "player".into(),
                    player: true,
                },
                KindInfo {
                    name: "missile".into(),
                    player: false,
                },
                KindInfo {
                    name: "item".into(),
                    player: false,
                },
            ],
            classes: class_names(),
        }
    }

    /// Advances `dt_s` seconds and returns the new state.
    pub fn step(&mut self, dt_s: f64) -> Tick {
        self.time_s += dt_s;
        let dt = dt_s as f32;
        for o in &mut self.objects {
            o.x += o.vx * dt;
            o.y += o.vy * dt;
            if !(0.0..=self.side).contains(&o.x) {
                o.vx = -o.vx;
                o.x = o.x.clamp(0.0, self.side);
            }
            if !(0.0..=self.side).contains(&o.y) {
                o.vy = -o.vy;
                o.y = o.y.clamp(0.0, self.side);
            }
        }
        if self.migrate_every_s > 0.0 && self.time_s >= self.next_migration_s && self.nodes > 1 {
            self.next_migration_s += self.migrate_every_s;
            let from = self.rng.below(u64::from(self.nodes)) as u32;
            let to = (from + 1 + self.rng.below(u64::from(self.nodes - 1)) as u32) % self.nodes;
            for o in self.objects.iter_mut().filter(|o| o.owner == from && o.kind == 0) {
                o.owner = to;
            }
        }
        let mut counts = vec![(0u32, 0u32); self.nodes as usize];
        for o in &self.objects {
            let c = &mut counts[o.owner as usize];
            c.0 += 1;
            c.1 += u32::from(o.kind == 0);
        }
        // About 1.2 kB/s of updates per primary, a little locator traffic.
        for (k, s) in self.sent.iter_mut().enumerate() {
            s[0] += (f64::from(counts[k].0) * 1200.0 * dt_s) as u64;
            s[1] += (200.0 * dt_s) as u64;
        }
        Tick {
            time_s: self.time_s,
            objects: self
                .objects
                .iter()
                .map(|o| ObjectSample {
                    id: o.id,
                    x: o.x,
                    y: o.y,
                    kind: o.kind,
                    owner: NodeId(o.owner),
                    aoi: (o.kind == 0).then(|| Rect::new(o.x - AOI, o.y - AOI, o.x + AOI, o.y + AOI)),
                })
                .collect(),
            nodes: (0..self.nodes)
                .map(|k| NodeSample {
                    id: NodeId(k),
                    up: true,
                    players: counts[k as usize].1,
                    primaries: counts[k as usize].0,
                    replicas: counts[k as usize].0 * 3,
                    missing: None,
                    frame_ms: None,
                    sessions: None,
                    capacity: None,
                    local_health: None,
                    sent_bytes: self.sent[k as usize].clone(),
                })
                .collect(),
        }
    }
}
