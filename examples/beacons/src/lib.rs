//! Beacons: the game the worldmesh guide's tutorial builds (`docs/guide/tutorial.md`).
//!
//! Walkers roam a square field; a walker that passes within reach of a beacon lights it
//! (a write to the beacon, which counts them). Walkers are `Checkpointed` (a crash loses at
//! most a checkpoint interval of their wandering), beacons `Durable`: every light a beacon
//! acknowledged survives any server's crash.
#![forbid(unsafe_code)]

// ANCHOR: objects
use worldmesh::{Aabb, Durability, GameObject, NodeId, ObjectId, Point3, Replicate, ThinkContext};

/// The static world every object reads: a square field.
pub struct Field {
    /// Side of the field.
    pub size: f32,
}

/// Everything in the game.
#[derive(Clone, Debug, PartialEq, Replicate)]
pub enum Thing {
    /// Roams the field, lighting beacons.
    Walker {
        /// Where it is.
        pos: Point3,
        /// Where it heads, radians.
        heading: f32,
    },
    /// Counts the lights walkers gave it.
    Beacon {
        /// Where it stands.
        pos: Point3,
        /// Lights received.
        lit: u32,
    },
}

/// How far a walker sees (its area of interest: it replicates what is within).
pub const SIGHT: f32 = 40.0;
/// How close a walker must pass to light a beacon.
pub const REACH: f32 = 8.0;
/// Walking speed, units per second.
pub const SPEED: f32 = 12.0;
// ANCHOR_END: objects

// ANCHOR: behaviour
impl GameObject for Thing {
    type World = Field;
    /// One light.
    type Write = u8;

    fn think(&mut self, ctx: &mut ThinkContext<'_, Self>) {
        let Thing::Walker { pos, heading } = self else {
            return; // beacons only wait to be lit
        };
        // Wander: turn a little at random, step, turn back at the edges.
        *heading += ctx.rng.range_f32(-0.4, 0.4);
        let step = SPEED * ctx.dt.as_secs_f32();
        let size = ctx.world.size;
        let next = Point3::new(pos.x + heading.cos() * step, pos.y + heading.sin() * step, 0.0);
        if next.x < 0.0 || next.x > size || next.y < 0.0 || next.y > size {
            *heading += std::f32::consts::PI;
        } else {
            *pos = next;
        }
        // Light every beacon within reach: a write, sent to the beacon's primary wherever
        // it runs, applied there once.
        let here = *pos;
        let near: Vec<ObjectId> = ctx
            .store
            .iter()
            .filter(|(_, e)| matches!(e.object, Thing::Beacon { pos, .. } if pos.distance(here) < REACH))
            .map(|(id, _)| id)
            .collect();
        for id in near {
            ctx.write(id, 1);
        }
    }

    fn position(&self) -> Point3 {
        match self {
            Thing::Walker { pos, .. } | Thing::Beacon { pos, .. } => *pos,
        }
    }

    fn interest(&self, _world: &Field) -> Option<Aabb> {
        match self {
            Thing::Walker { pos, .. } => Some(Aabb::around(*pos, Point3::new(SIGHT, SIGHT, 1.0))),
            Thing::Beacon { .. } => None,
        }
    }

    fn apply_write(&mut self, light: &u8) {
        if let Thing::Beacon { lit, .. } = self {
            *lit = lit.saturating_add(u32::from(*light));
        }
    }

    fn durability(&self) -> Durability {
        match self {
            Thing::Walker { .. } => Durability::Checkpointed,
            Thing::Beacon { .. } => Durability::Durable,
        }
    }

    worldmesh::replicate_codec!();
}
// ANCHOR_END: behaviour

// ANCHOR: world
/// The field every node builds.
pub fn field() -> Field {
    Field { size: 120.0 }
}

/// What node `node` creates when it founds the world: three walkers and one beacon, spread
/// by the node's id so every founder's share is different.
pub fn founders_share(node: NodeId, field: &Field) -> Vec<Thing> {
    let n = node.0 as f32;
    let at = |i: f32| {
        Point3::new(
            (17.0 + 37.0 * n + 23.0 * i) % field.size,
            (29.0 + 41.0 * i + 13.0 * n) % field.size,
            0.0,
        )
    };
    let mut things: Vec<Thing> = (0..3)
        .map(|i| Thing::Walker {
            pos: at(i as f32),
            heading: n + i as f32,
        })
        .collect();
    things.push(Thing::Beacon { pos: at(0.0), lit: 0 }); // beside the first walker
    things
}
// ANCHOR_END: world

/// Lights counted by the beacons a node holds as primaries, and how many it holds.
pub fn beacons_lit<'a>(things: impl IntoIterator<Item = &'a Thing>) -> (usize, u64) {
    things.into_iter().fold((0, 0), |(n, lit), t| match t {
        Thing::Beacon { lit: l, .. } => (n + 1, lit + u64::from(*l)),
        Thing::Walker { .. } => (n, lit),
    })
}
