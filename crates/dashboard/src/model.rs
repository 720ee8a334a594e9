//! What a producer tells the dashboard: the world once ([`WorldInfo`]), then one [`Tick`]
//! at a time (objects with their owner node, and the node table).
//!
//! The model is the same for every producer: the simulator observes all its nodes at once
//! ([`crate::observe`]); a real node will report its own primaries and counters, and an
//! aggregator will merge them into ticks. Figures a producer cannot know are `None` (a
//! real node cannot count the replicas it is missing; the simulator has no frame time).

use serde::{Deserialize, Serialize};
use worldmesh_core::{NodeId, ObjectId};

/// An axis-aligned rectangle in world units (x to the right, y down on the page).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rect {
    /// Smallest x.
    pub min_x: f32,
    /// Smallest y.
    pub min_y: f32,
    /// Largest x.
    pub max_x: f32,
    /// Largest y.
    pub max_y: f32,
}

impl Rect {
    /// The rectangle spanning two corners (in any order).
    pub fn new(x0: f32, y0: f32, x1: f32, y1: f32) -> Self {
        Self {
            min_x: x0.min(x1),
            min_y: y0.min(y1),
            max_x: x0.max(x1),
            max_y: y0.max(y1),
        }
    }

    /// The x/y footprint of a 3-D box.
    pub fn from_aabb(b: &worldmesh_core::Aabb) -> Self {
        Self::new(b.min.x, b.min.y, b.max.x, b.max.y)
    }

    /// Width.
    pub fn width(&self) -> f32 {
        self.max_x - self.min_x
    }

    /// Height.
    pub fn height(&self) -> f32 {
        self.max_y - self.min_y
    }

    /// True when every coordinate is finite and the rectangle is not inverted.
    pub fn is_valid(&self) -> bool {
        [self.min_x, self.min_y, self.max_x, self.max_y]
            .iter()
            .all(|v| v.is_finite())
            && self.min_x <= self.max_x
            && self.min_y <= self.max_y
    }
}

/// One kind of object the game has (its `GameObject::kind` code is the index in
/// [`WorldInfo::kinds`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KindInfo {
    /// Name shown in the legend ("player", "missile", "item").
    pub name: String,
    /// Counted in the node table's "players" column.
    pub player: bool,
}

/// The world as it is drawn: bounds, static obstacles, object kinds and the names of the
/// traffic classes whose counters the nodes report. Sent once to every browser.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorldInfo {
    /// One line saying what is shown ("simulation 64 nodes x 8 players, rect map, seed 1").
    pub title: String,
    /// The map's bounds. Positions go to browsers on a grid from the bounds' near corner,
    /// clamped to the grid's range: a point before the near edges arrives on them, and the
    /// page does not draw one past the far edges.
    pub bounds: Rect,
    /// Obstacles (drawn grey).
    pub obstacles: Vec<Rect>,
    /// Object kinds, by kind code.
    pub kinds: Vec<KindInfo>,
    /// Traffic classes, in the order of [`NodeSample::sent_bytes`].
    pub classes: Vec<String>,
}

/// One object at one tick.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ObjectSample {
    /// The object.
    pub id: ObjectId,
    /// Position x, world units.
    pub x: f32,
    /// Position y, world units.
    pub y: f32,
    /// Kind code (index into [`WorldInfo::kinds`]).
    pub kind: u8,
    /// The node holding its primary.
    pub owner: NodeId,
    /// Its area of interest, if it has one (sent to a browser only while it hovers the
    /// object).
    pub aoi: Option<Rect>,
}

/// One node at one tick.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeSample {
    /// The node.
    pub id: NodeId,
    /// Running (false after a crash; its objects are then adopted, not migrated).
    pub up: bool,
    /// Primaries that are players.
    pub players: u32,
    /// Primaries of every kind.
    pub primaries: u32,
    /// Replicas held.
    pub replicas: u32,
    /// Replicas its primaries need but it does not hold, when the producer can tell
    /// (paper `000` §6.3: needs a global view, so only the simulator knows).
    pub missing: Option<u32>,
    /// Time its last frame took, ms, when measured (real nodes).
    pub frame_ms: Option<f32>,
    /// Players connected to it through its player port, when it has one (real nodes).
    pub sessions: Option<u32>,
    /// Players it takes (its assignment capacity, or its session limit), when known.
    pub capacity: Option<u32>,
    /// Its failure detector's local health, 0 (healthy) to 8, when it runs dynamic
    /// membership: high on a node whose own datagrams are lost
    /// (`Membership::local_health`).
    pub local_health: Option<u32>,
    /// Bytes sent since the node started, by traffic class (cumulative counters, as on the
    /// wire; rates are computed by the dashboard).
    pub sent_bytes: Vec<u64>,
}

/// Everything at one instant of the producer's clock.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tick {
    /// The producer's time, seconds (simulated time for the simulator).
    pub time_s: f64,
    /// Every object, any order (the dashboard sorts by id).
    pub objects: Vec<ObjectSample>,
    /// Every node, any order.
    pub nodes: Vec<NodeSample>,
}
