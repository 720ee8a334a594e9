//! The game object API (paper `000` §3, Figure 5).

use std::fmt::Debug;
use std::time::Duration;
use worldmesh_core::{Aabb, DetRng, NodeId, ObjectId, Point3, Time};

use crate::store::ObjectStore;

/// Why an object's encoded state could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed object state: {0}")]
pub struct StateError(pub String);

/// A game object type.
///
/// Colyseus splits every object into one **primary** copy, whose node runs its think
/// function and serializes all writes to it, and any number of read-only **replicas** on
/// the nodes whose objects are interested in it (paper `000` §3 "Object model"). A game
/// implements this trait once (usually for an enum of its object kinds) and worldmesh does
/// the rest: discovery, replication and delivery of updates.
pub trait GameObject: Clone + Debug + Send + 'static {
    /// Static, shared game data every think function may read (the map, rules, tuning).
    type World: Send + Sync + 'static;

    /// Advances a primary by one frame. Called once per frame on the node holding the
    /// primary, never on replicas.
    fn think(&mut self, ctx: &mut ThinkContext<'_, Self>);

    /// Where the object is: its position naming attribute (paper `000` §3: objects
    /// publish naming attributes so others can discover them).
    fn position(&self) -> Point3;

    /// The object's area of interest, if it has one (paper `000` §3: subscriptions are
    /// range predicates over naming attributes; a box is the usual case).
    fn interest(&self) -> Option<Aabb>;

    /// Appends the object's full state to `out`.
    fn encode_state(&self, out: &mut Vec<u8>);

    /// Decodes a full state produced by [`GameObject::encode_state`]. Input comes from the
    /// network: implementations must not panic on any bytes.
    fn decode_state(bytes: &[u8]) -> Result<Self, StateError>;
}

/// What a think function sees and may do.
pub struct ThinkContext<'a, O: GameObject> {
    /// Current time.
    pub now: Time,
    /// Time since the previous frame.
    pub dt: Duration,
    /// The node running this think function.
    pub node: NodeId,
    /// The object being thought (it is *not* in `store` during its own think).
    pub id: ObjectId,
    /// The node's deterministic random stream.
    pub rng: &'a mut DetRng,
    /// Static world data.
    pub world: &'a O::World,
    /// Every other object this node holds (primaries and replicas), read-only.
    pub store: &'a ObjectStore<O>,
    pub(crate) spawned: &'a mut Vec<O>,
    pub(crate) delete_self: bool,
}

impl<'a, O: GameObject> ThinkContext<'a, O> {
    /// A context for thinking object `id` (used by the node's frame loop and by tests).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        now: Time,
        dt: Duration,
        node: NodeId,
        id: ObjectId,
        rng: &'a mut DetRng,
        world: &'a O::World,
        store: &'a ObjectStore<O>,
        spawned: &'a mut Vec<O>,
    ) -> Self {
        Self {
            now,
            dt,
            node,
            id,
            rng,
            world,
            store,
            spawned,
            delete_self: false,
        }
    }

    /// Creates a new object whose primary lives on this node (e.g. a missile).
    pub fn spawn(&mut self, object: O) {
        self.spawned.push(object);
    }

    /// Deletes the object being thought at the end of this frame.
    pub fn delete_self(&mut self) {
        self.delete_self = true;
    }

    /// True if [`ThinkContext::delete_self`] was called.
    pub fn wants_delete(&self) -> bool {
        self.delete_self
    }
}
