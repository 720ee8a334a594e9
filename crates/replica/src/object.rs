//! The game object API (paper `000` §3, Figure 5).

use std::fmt::Debug;
use std::time::Duration;
use worldmesh_core::{Aabb, DetRng, Durability, NodeId, ObjectId, Point3, Time};

use crate::store::ObjectStore;

/// Why an object's encoded state or delta could not be decoded (input comes from the
/// network: decoders return one of these, never panic).
///
/// The derived codecs (`#[derive(Replicate)]`) say where in the value it went wrong with
/// [`StateError::At`] (`Type.field`, outermost first); [`StateError::root`] is what went
/// wrong there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// The input ended inside a value.
    #[error("truncated: {needed} bytes needed, {left} left")]
    Truncated {
        /// Bytes the value needed next.
        needed: usize,
        /// Bytes that were left.
        left: usize,
    },
    /// A complete value was followed by bytes no field reads.
    #[error("{0} trailing bytes")]
    TrailingBytes(usize),
    /// A value its type does not allow: an integer out of range, a non-finite float, an
    /// unknown tag, an overlong varint, change-mask bits no field owns, …
    #[error("invalid {what}: {detail}")]
    Invalid {
        /// What was being read (`u16`, `bool`, `varint`, `option tag`, `change mask`, …).
        what: &'static str,
        /// What was wrong with it (usually the value read).
        detail: String,
    },
    /// An enum's variant index that no variant has.
    #[error("{ty}: unknown variant {index}")]
    UnknownVariant {
        /// The enum.
        ty: &'static str,
        /// The index read.
        index: u64,
    },
    /// The decoded value failed the game's own check (`#[replicate(check = ..)]`, or an
    /// invariant a hand-written decoder enforces), with the game's message.
    #[error("{0}")]
    Check(String),
    /// A codec the game uses itself (e.g. bitcode in a hand-written decoder) refused the
    /// bytes, with that codec's message.
    #[error("{0}")]
    Decode(String),
    /// `error` happened at `path` (`Type.field`; nested paths joined by `": "`,
    /// outermost first). Never wraps another `At`: see [`StateError::within`].
    #[error("{path}: {error}")]
    At {
        /// Where.
        path: String,
        /// What went wrong there.
        error: Box<StateError>,
    },
}

impl StateError {
    /// A failed check of the game's, with its message.
    pub fn check(message: impl Into<String>) -> StateError {
        StateError::Check(message.into())
    }

    /// A value of kind `what` that is not valid, and why.
    pub fn invalid(what: &'static str, detail: impl std::fmt::Display) -> StateError {
        StateError::Invalid {
            what,
            detail: detail.to_string(),
        }
    }

    /// The same error, located at `at` (`Type.field`) inside whatever path it already has.
    pub fn within(self, at: &str) -> StateError {
        match self {
            StateError::At { path, error } => StateError::At {
                path: format!("{at}: {path}"),
                error,
            },
            error => StateError::At {
                path: at.to_owned(),
                error: Box::new(error),
            },
        }
    }

    /// Where the error happened (`Type.field: Inner.field`), if known.
    pub fn path(&self) -> Option<&str> {
        match self {
            StateError::At { path, .. } => Some(path),
            _ => None,
        }
    }

    /// What went wrong, without its location.
    pub fn root(&self) -> &StateError {
        match self {
            StateError::At { error, .. } => error,
            e => e,
        }
    }
}

impl From<bitcode::Error> for StateError {
    fn from(e: bitcode::Error) -> Self {
        StateError::Decode(e.to_string())
    }
}

/// What becomes of an object whose primary's node fails (`node::adoption`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum OrphanPolicy {
    /// A live node that holds a replica adopts it and runs it from the freshest state the
    /// cluster has (the default: the world keeps its objects).
    #[default]
    Adopt,
    /// It ends with its node: every replica of it is dropped (e.g. the avatar of a player
    /// whose connection was to the failed node, if the game prefers players to reconnect
    /// to a fresh avatar; or short-lived effects).
    Despawn,
}

/// A game object type.
///
/// Colyseus splits every object into one **primary** copy, whose node runs its think
/// function and serializes all writes to it, and any number of read-only **replicas** on
/// the nodes whose objects are interested in it (paper `000` §3 "State partitioning",
/// "Execution partitioning"). A game implements this trait once (usually for an enum of its
/// object kinds) and worldmesh does the rest: discovery, replication, delta updates and
/// delivery of tentative writes to the primary.
///
/// The methods map onto Figure 5 of the paper: `think` is the think function,
/// [`GameObject::position`] and [`GameObject::kind`] are the published naming attributes,
/// [`GameObject::interest`] is the subscription (`GetInterest`), [`GameObject::is_interested`]
/// the fine-grained local check (`IsInterested`), [`GameObject::attached_to`] is `AttachTo`
/// (§5 "Proactive replication"), and the encode/decode pair is the serialization with
/// delta encoding (§5, §7).
pub trait GameObject: Clone + Debug + Send + 'static {
    /// Static, shared game data every think function may read (the map, rules, tuning).
    type World: Send + Sync + 'static;

    /// A write one object makes to another (e.g. damage). Writes to replicas are applied
    /// tentatively where they are made and forwarded to the primary, which applies them in
    /// arrival order: the serialization order every replica then sees (paper `000` §5
    /// "Replica consistency").
    type Write: Clone + Debug + Send + bitcode::Encode + bitcode::DecodeOwned + 'static;

    /// Advances a primary by one frame. Called once per frame on the node holding the
    /// primary, never on replicas.
    fn think(&mut self, ctx: &mut ThinkContext<'_, Self>);

    /// Where the object is: its position naming attribute (published for discovery).
    fn position(&self) -> Point3;

    /// The object's velocity in units per second, if it moves. The replica manager uses it
    /// to predict interest (paper `000` §6.2: subscriptions enlarged by predicted movement)
    /// so replicas are fetched before their objects enter an area of interest. The default
    /// (`None`) means "do not predict".
    fn velocity(&self) -> Option<Point3> {
        None
    }

    /// Where the object expects to be `lead` from now. Published beside the position so
    /// that nodes whose interest it is about to enter discover it early (predictive
    /// publications, paper `000` §6.2 "PubTime"), and used to keep replicas of objects
    /// about to enter an interest. The default moves the position along
    /// [`Self::velocity`]; a game overrides it for jumps it knows of (a respawn point, a
    /// teleporter's exit), and may read the `world` (e.g. the map's spawn points).
    fn position_ahead(&self, lead: Duration, world: &Self::World) -> Point3 {
        let _ = world;
        let p = self.position();
        let t = lead.as_secs_f32();
        match self.velocity() {
            Some(v) if v.is_finite() => p.moved(v, t),
            _ => p,
        }
    }

    /// A small type tag published with the position (players, missiles, items, …).
    fn kind(&self) -> u8 {
        0
    }

    /// How much of the object survives a crash of its primary's node (issue 19): the node's
    /// store is to persist `Checkpointed` objects every N frames and log every write to a
    /// `Durable` object before acknowledging it; `Ephemeral` objects (the default) are never
    /// persisted. Declared per object, so one game type can mix classes (avatars, missiles,
    /// buildings). Not acted on yet: the node does not persist (ARCHITECTURE.md,
    /// "Persistence").
    fn durability(&self) -> Durability {
        Durability::Ephemeral
    }

    /// The object's area of interest (its subscription), if it has one. `world` is the
    /// static game data, e.g. a configured view distance shared by every object.
    fn interest(&self, world: &Self::World) -> Option<Aabb>;

    /// Fine-grained local interest check: does this object want a replica of `other`?
    /// Defaults to "`other`'s position lies inside my area of interest". It must be a
    /// pure function of the two objects and the world: the replica manager asks it only
    /// when no local primary's grown area of interest already holds `other`, in any order.
    fn is_interested(&self, other: &Self, world: &Self::World) -> bool {
        self.interest(world).is_some_and(|b| b.contains(other.position()))
    }

    /// The object this one is attached to (e.g. a missile to its shooter). Every node
    /// holding a replica of the parent receives this object too, without discovery
    /// (paper `000` §5 "Proactive replication").
    fn attached_to(&self) -> Option<ObjectId> {
        None
    }

    /// What happens to this object if its primary's node fails. The default adopts it.
    fn orphan_policy(&self) -> OrphanPolicy {
        OrphanPolicy::Adopt
    }

    /// Applies a write (tentatively on a replica, authoritatively on the primary).
    fn apply_write(&mut self, write: &Self::Write);

    /// Appends the object's full state to `out`.
    fn encode_state(&self, out: &mut Vec<u8>);

    /// Decodes a full state produced by [`GameObject::encode_state`]. Input comes from the
    /// network: implementations must not panic on any bytes.
    fn decode_state(bytes: &[u8]) -> Result<Self, StateError>;

    /// Appends a delta that turns `baseline` into `self`. The default is the full state;
    /// games override it with a field-wise diff behind a dirty mask.
    fn encode_delta(&self, baseline: &Self, out: &mut Vec<u8>) {
        let _ = baseline;
        self.encode_state(out);
    }

    /// Applies a delta produced by [`GameObject::encode_delta`] to `baseline` (which must
    /// be exactly the baseline the delta was made against; the replica manager guarantees
    /// it). Must not panic on any bytes.
    fn apply_delta(baseline: &Self, delta: &[u8]) -> Result<Self, StateError> {
        let _ = baseline;
        Self::decode_state(delta)
    }

    /// A copy of this primary for its version history: the states its deltas are encoded
    /// from and against (paper `000` §5), one per version for the last
    /// [`crate::ReplicaConfig::history`] versions. Only what
    /// [`GameObject::encode_state`] and [`GameObject::encode_delta`] read need be kept, so
    /// a game whose primaries carry state only their think uses (an AI's plan, a path)
    /// can leave it out, and the history then holds that many fewer copies of it. The
    /// replica manager reads a history copy only through those two methods.
    ///
    /// Contract: a history copy encodes exactly like its original. For any `a` and `b`,
    /// `a.history_copy()` encodes to the same bytes as `a`, and `encode_delta` between `a`
    /// and `b` writes the same bytes whichever of the two is replaced by its history copy.
    /// The default is a clone.
    fn history_copy(&self) -> Self {
        self.clone()
    }
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
    pub(crate) writes: &'a mut Vec<(ObjectId, O::Write)>,
    pub(crate) delete_self: bool,
}

impl<'a, O: GameObject> ThinkContext<'a, O> {
    /// A context for thinking object `id` (used by the frame loop and by tests).
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
        writes: &'a mut Vec<(ObjectId, O::Write)>,
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
            writes,
            delete_self: false,
        }
    }

    /// Creates a new object whose primary lives on this node (e.g. a missile).
    pub fn spawn(&mut self, object: O) {
        self.spawned.push(object);
    }

    /// Writes to another object: applied at the end of the frame, tentatively if it is a
    /// replica (and forwarded to its primary), authoritatively if it is a local primary.
    /// A forwarded write is applied by the primary exactly once, or — if no primary
    /// acknowledged it within `ReplicaConfig::write_timeout` — given up: applied once or
    /// not at all.
    pub fn write(&mut self, target: ObjectId, write: O::Write) {
        self.writes.push((target, write));
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
