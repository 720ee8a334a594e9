//! A game on the deterministic simulator: the same nodes as [`crate::Server`] runs, over a
//! modelled network in virtual time, so a game's own tests are fast and reproducible (same
//! seed ⇒ same run, BRIEF §2).
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use worldmesh::sim::Sim;
//! # use worldmesh::{Aabb, GameObject, Point3, StateError, ThinkContext};
//! # #[derive(Clone, Debug, PartialEq)]
//! # struct Dot(f32);
//! # impl GameObject for Dot {
//! #     type World = ();
//! #     type Write = ();
//! #     fn think(&mut self, ctx: &mut ThinkContext<'_, Self>) { self.0 += ctx.dt.as_secs_f32(); }
//! #     fn position(&self) -> Point3 { Point3::new(self.0, 0.0, 0.0) }
//! #     fn interest(&self, _world: &Self::World) -> Option<Aabb> { None }
//! #     fn apply_write(&mut self, _: &()) {}
//! #     fn encode_state(&self, out: &mut Vec<u8>) { out.extend_from_slice(&self.0.to_le_bytes()) }
//! #     fn decode_state(b: &[u8]) -> Result<Self, StateError> {
//! #         b.try_into().map(|a| Dot(f32::from_le_bytes(a))).map_err(|_| StateError::invalid("Dot", "not 4 bytes"))
//! #     }
//! # }
//! let mut sim = Sim::builder()
//!     .game::<Dot>(Arc::new(()))
//!     .nodes(3)
//!     .initial_objects(|_node| vec![Dot(0.0)])
//!     .build()
//!     .unwrap();
//! sim.run_for(Duration::from_secs(2));
//! // Every node replicates every object (broadcast: the builder's default).
//! assert!(sim.nodes().iter().all(|n| n.store().len() == 3));
//! ```

use std::sync::Arc;
use std::time::Duration;

use worldmesh_core::{DetRng, LatencyMatrix, NodeId, Time};
use worldmesh_node::membership::MembershipConfig;
use worldmesh_node::{Mode, Node, NodeConfig, PersistConfig};
use worldmesh_replica::GameObject;
use worldmesh_sim::oracle::Oracle;
pub use worldmesh_sim::{NetworkConfig, NetworkModel, Simulation};

/// Why a simulation could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The latency source is unusable.
    #[error(transparent)]
    Latency(#[from] worldmesh_core::LatencyError),
    /// A setting is out of range.
    #[error("{0}")]
    Invalid(String),
}

/// The entry point: `Sim::builder().game::<MyObject>(world)…`.
#[derive(Clone, Copy, Debug)]
pub struct Sim;

impl Sim {
    /// Starts building a simulation; name the game next.
    pub fn builder() -> SimStart {
        SimStart
    }
}

/// A simulation without a game yet.
#[derive(Clone, Copy, Debug)]
pub struct SimStart;

impl SimStart {
    /// The game: its object type and the world every object's `think` reads.
    pub fn game<O: GameObject>(self, world: Arc<O::World>) -> SimBuilder<O> {
        SimBuilder {
            world,
            nodes: 3,
            seed: 1,
            network: NetworkConfig {
                latency: "uniform:20".into(),
                ..NetworkConfig::default()
            },
            frame_hz: 10.0,
            backups: 0,
            membership: false,
            persistence: None,
            interest: false,
            initial: None,
        }
    }
}

/// The objects each node creates at time zero, given its id.
type Initial<O> = Box<dyn FnMut(NodeId) -> Vec<O>>;

/// A simulation of the game `O`, being configured.
pub struct SimBuilder<O: GameObject> {
    world: Arc<O::World>,
    nodes: usize,
    seed: u64,
    network: NetworkConfig,
    frame_hz: f64,
    backups: usize,
    membership: bool,
    persistence: Option<(u32, Duration)>,
    interest: bool,
    initial: Option<Initial<O>>,
}

impl<O: GameObject> SimBuilder<O> {
    /// Number of nodes (ids `0..n`) [default: 3].
    #[must_use]
    pub fn nodes(mut self, n: usize) -> Self {
        self.nodes = n;
        self
    }

    /// The seed of every random choice [default: 1].
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Latency source: `uniform:RTT_MS`, `planetlab` or a matrix file [default:
    /// `uniform:20`].
    #[must_use]
    pub fn latency(mut self, spec: &str) -> Self {
        self.network.latency = spec.into();
        self
    }

    /// The whole network model (loss, duplication, jitter, partitions), replacing the
    /// latency set before.
    #[must_use]
    pub fn network(mut self, network: NetworkConfig) -> Self {
        self.network = network;
        self
    }

    /// Frames per second [default: 10].
    #[must_use]
    pub fn frame_hz(mut self, hz: f64) -> Self {
        self.frame_hz = hz;
        self
    }

    /// Dynamic membership (SWIM): nodes can crash, restart, join and drain, and a failed
    /// node's objects are adopted; `backups` members keep every primary's state fresh.
    /// The timing is the `lan` profile, or `wan` when the latency has round trips longer
    /// than 80 ms (`MembershipConfig::profile_for`).
    #[must_use]
    pub fn membership(mut self, backups: usize) -> Self {
        self.membership = true;
        self.backups = backups;
        self
    }

    /// Persistence against modelled stores: `Checkpointed` objects every
    /// `checkpoint_frames` frames, each batch applied `latency` after the previous one.
    #[must_use]
    pub fn persistence(mut self, checkpoint_frames: u32, latency: Duration) -> Self {
        self.persistence = Some((checkpoint_frames, latency));
        self
    }

    /// Interest-driven replication (a node replicates what its primaries' areas of
    /// interest cover, discovered by an ideal index) instead of broadcast.
    #[must_use]
    pub fn interest(mut self) -> Self {
        self.interest = true;
        self
    }

    /// The objects node `id` creates at time zero.
    #[must_use]
    pub fn initial_objects(mut self, f: impl FnMut(NodeId) -> Vec<O> + 'static) -> Self {
        self.initial = Some(Box::new(f));
        self
    }

    /// Builds the simulation at time zero.
    ///
    /// # Errors
    /// An unusable latency source, no nodes, or a frame rate out of (0, 1000].
    pub fn build(mut self) -> Result<Simulation<O>, SimError> {
        if self.nodes == 0 || self.nodes > 4096 {
            return Err(SimError::Invalid(format!(
                "nodes = {} must be in 1..=4096",
                self.nodes
            )));
        }
        if !(self.frame_hz > 0.0 && self.frame_hz <= 1000.0) {
            return Err(SimError::Invalid(format!(
                "frame_hz = {} must be in (0, 1000]",
                self.frame_hz
            )));
        }
        let matrix: LatencyMatrix = worldmesh_core::latency::load_spec(&self.network.latency)?;
        let largest_rtt = matrix.largest_round_trip();
        let root = DetRng::new(self.seed);
        let net = NetworkModel::new(matrix, self.nodes, &self.network, &root);
        let frame = Duration::from_secs_f64(1.0 / self.frame_hz);
        let ids: Vec<NodeId> = (0..self.nodes as u32).map(NodeId).collect();
        let mode = if self.interest {
            Mode::Interest
        } else {
            Mode::Broadcast
        };
        let mut nodes = Vec::with_capacity(self.nodes);
        for &id in &ids {
            let cfg = self.node_config(id, &ids, frame, mode, largest_rtt);
            // Frames of different nodes are not aligned: each starts at its own phase.
            let phase = root.fork(u64::from(id.0) + 1).range_f64(0.0, frame.as_secs_f64());
            let mut node = Node::new(cfg, Arc::clone(&self.world), Time::from_secs_f64(phase));
            if let Some(f) = self.initial.as_mut() {
                for o in f(id) {
                    node.spawn(Time::ZERO, o);
                }
            }
            nodes.push(node);
        }
        let mut sim = Simulation::new(nodes, net);
        if let Some((_, latency)) = self.persistence {
            sim = sim.with_persistence(latency);
        }
        if self.interest {
            sim = sim.with_oracle(Oracle::new(frame * 3), frame, frame);
        }
        Ok(sim)
    }

    /// A node's settings; `largest_rtt` (the network's) chooses the membership timing.
    fn node_config(
        &self,
        id: NodeId,
        ids: &[NodeId],
        frame: Duration,
        mode: Mode,
        largest_rtt: Duration,
    ) -> NodeConfig {
        let peers = ids.iter().copied().filter(|p| *p != id).collect();
        let mut cfg = NodeConfig::new(id, peers, self.seed).with_mode(mode);
        cfg.frame_interval = frame;
        if self.membership {
            cfg.membership = MembershipConfig::named(MembershipConfig::profile_for(largest_rtt));
            cfg.replica.backups = self.backups;
        }
        if let Some((every, _)) = self.persistence {
            cfg.persist = Some(PersistConfig {
                checkpoint_every: every.max(1),
            });
        }
        cfg
    }
}
