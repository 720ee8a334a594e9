//! The placement loop with activation policies (paper `001` §4, §7.4): where should this
//! node's region be hosted?
//!
//! A **region** here is the set of live primaries of one node; its **players** are the
//! primaries with a client location: [`Located::client_location`] for a game that runs the
//! loop in the simulator or by hand ([`Node::run_placement`](crate::Node::run_placement)),
//! the player id for a node's player sessions (`Sessions::with_placement`, whose oracle
//! knows the delays each player reported). §7.4 splits the decision in two
//! stages, which [`Placement::evaluate`] follows:
//!
//! 1. **Activation** — is running core selection potentially beneficial? We trigger it
//!    periodically (`interval`), on **churn** (the region's player set changed by at least
//!    `churn_fraction` since the last selection) and on a **latency threshold** (the
//!    players' mean latency to the current host exceeds `latency_trigger_ms`). §7.4 also
//!    names time of day, arrival rate and history: those are driver policies that can call
//!    [`Placement::force`].
//! 2. **Migration decision** — core selection (k = 1, the group center of §4.1 under the
//!    k-median objective, `worldmesh_netcoord::core_select`) over the candidate hosts that
//!    have capacity for the region (`capacity` as reported by the oracle; the target checks
//!    again and refuses if full); migrate only if the predicted mean-latency gain exceeds
//!    `min_gain_ms`.
//!
//! Latencies come from a [`LatencyOracle`] the driver provides: the simulator's latency
//! matrix, or network-coordinate estimates (`worldmesh_netcoord` Vivaldi/landmarks; the
//! coordinates are not yet piggybacked on node traffic, so today the driver supplies them).

use std::collections::BTreeSet;
use std::time::Duration;

use worldmesh_core::{NodeId, ObjectId, Time};
use worldmesh_netcoord::core_select::{CoreError, CostTable, Objective, rank};
use worldmesh_replica::{GameObject, ReplicaManager};

/// Where the players of a game connect from: what the placement loop needs of a game's
/// objects (only where placement is used; a game without it need not implement this).
pub trait Located: GameObject {
    /// Where the player this object stands for connects from: an index into the driver's
    /// client locations (e.g. a latency-matrix row). `None` for objects that are not
    /// players. The placement loop (paper `001` §4, §7.4) runs core selection over the
    /// latencies of a region's players to candidate hosts.
    fn client_location(&self) -> Option<u32>;
}

/// Latency estimates and load reports the placement loop needs (provided by the driver).
pub trait LatencyOracle {
    /// Estimated round-trip time in ms between the client at `client` (a client location,
    /// e.g. [`Located::client_location`]) and server node `node`; `None` if unknown.
    fn client_rtt_ms(&self, client: u32, node: NodeId) -> Option<f64>;

    /// How many primaries `node` holds now, if known (load reports). Used to skip targets
    /// without capacity; `None` leaves the check to the target.
    fn primaries(&self, node: NodeId) -> Option<usize> {
        let _ = node;
        None
    }
}

/// Tuning of the placement loop (paper `001` §7.4).
#[derive(Clone, Debug)]
pub struct PlacementConfig {
    /// Run core selection at least this often.
    pub interval: Duration,
    /// …and whenever this fraction of the region's players changed since the last run.
    pub churn_fraction: f64,
    /// …and whenever the players' mean latency to this node exceeds this (ms).
    pub latency_trigger_ms: f64,
    /// Migrate only if the predicted mean latency improves by more than this (ms).
    pub min_gain_ms: f64,
    /// Regions with fewer players than this are left alone.
    pub min_players: usize,
    /// Most primaries a node may hold (target capacity); `None` is unbounded.
    pub capacity: Option<usize>,
}

impl Default for PlacementConfig {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(10),
            churn_fraction: 0.25,
            latency_trigger_ms: 150.0,
            min_gain_ms: 10.0,
            min_players: 1,
            capacity: None,
        }
    }
}

/// Why the placement loop did not run or chose to stay.
#[derive(Clone, Debug, PartialEq)]
pub enum PlacementOutcome {
    /// Stage 1 did not fire (no trigger).
    NotActivated,
    /// No players, or fewer than `min_players`; or a migration of the region is in flight.
    Idle,
    /// Core selection ran and the current host is best (or the gain is under the
    /// threshold, or no better candidate has capacity).
    Stay {
        /// Players' mean RTT to this node (ms).
        current_ms: f64,
        /// Best candidate with capacity and its predicted mean RTT.
        best: Option<(NodeId, f64)>,
    },
    /// Migrate the region to `target`.
    Migrate(PlacementDecision),
}

/// A decision to move a region.
#[derive(Clone, Debug, PartialEq)]
pub struct PlacementDecision {
    /// The new host.
    pub target: NodeId,
    /// The region's primaries.
    pub region: Vec<ObjectId>,
    /// Players' mean RTT to this node now (ms).
    pub current_ms: f64,
    /// Their predicted mean RTT to the target (ms).
    pub predicted_ms: f64,
}

/// Why core selection could not run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlacementError {
    /// The oracle has no estimate for a player–node pair.
    #[error("no latency estimate between client {client} and {node}")]
    Unknown {
        /// The client location.
        client: u32,
        /// The node.
        node: NodeId,
    },
    /// Core selection refused its input.
    #[error(transparent)]
    Core(#[from] CoreError),
}

/// The placement loop's state on one node.
#[derive(Clone, Debug)]
pub struct Placement {
    cfg: PlacementConfig,
    last_run: Option<Time>,
    last_players: BTreeSet<u32>,
    forced: bool,
}

impl Placement {
    /// A placement loop with `cfg`.
    pub fn new(cfg: PlacementConfig) -> Self {
        Self {
            cfg,
            last_run: None,
            last_players: BTreeSet::new(),
            forced: false,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &PlacementConfig {
        &self.cfg
    }

    /// Runs core selection at the next evaluation whatever the triggers say (history- or
    /// time-of-day-based activation is the driver's policy).
    pub fn force(&mut self) {
        self.forced = true;
    }

    /// Stage 1 and 2 of §7.4 for the region of live primaries in `rm`, with `candidates`
    /// the other nodes that may host it; players located by [`Located::client_location`].
    pub fn evaluate<O: Located>(
        &mut self,
        now: Time,
        rm: &ReplicaManager<O>,
        candidates: &[NodeId],
        oracle: &dyn LatencyOracle,
    ) -> Result<PlacementOutcome, PlacementError> {
        self.evaluate_by(now, rm, candidates, oracle, &O::client_location)
    }

    /// [`Placement::evaluate`] with players located by `locate` (`None` for objects that
    /// are not players).
    pub fn evaluate_by<O: GameObject>(
        &mut self,
        now: Time,
        rm: &ReplicaManager<O>,
        candidates: &[NodeId],
        oracle: &dyn LatencyOracle,
        locate: &dyn Fn(&O) -> Option<u32>,
    ) -> Result<PlacementOutcome, PlacementError> {
        if !rm.frozen().is_empty() {
            return Ok(PlacementOutcome::Idle);
        }
        let region: Vec<ObjectId> = rm.store().primary_ids();
        let players: Vec<u32> = region
            .iter()
            .filter_map(|id| rm.store().object(*id).and_then(locate))
            .collect();
        if players.is_empty() || players.len() < self.cfg.min_players {
            return Ok(PlacementOutcome::Idle);
        }
        let here = rm.me();
        let mean_to = |node: NodeId| -> Result<f64, PlacementError> {
            let mut sum = 0.0;
            for c in &players {
                sum += oracle
                    .client_rtt_ms(*c, node)
                    .ok_or(PlacementError::Unknown { client: *c, node })?;
            }
            Ok(sum / players.len() as f64)
        };
        let current_ms = mean_to(here)?;
        // Stage 1: activation.
        let set: BTreeSet<u32> = players.iter().copied().collect();
        let changed = set.symmetric_difference(&self.last_players).count() as f64;
        let churn = changed >= self.cfg.churn_fraction * set.len().max(1) as f64;
        let periodic = self.last_run.is_none_or(|t| now - t >= self.cfg.interval);
        let slow = current_ms > self.cfg.latency_trigger_ms;
        if !(self.forced || periodic || churn || slow) {
            return Ok(PlacementOutcome::NotActivated);
        }
        self.forced = false;
        self.last_run = Some(now);
        self.last_players = set;
        // Stage 2: core selection over candidates with capacity, then the gain threshold.
        let fits = |n: NodeId| match (self.cfg.capacity, oracle.primaries(n)) {
            (Some(cap), Some(load)) => load + region.len() <= cap,
            _ => true,
        };
        let cands: Vec<usize> = candidates
            .iter()
            .filter(|n| **n != here && fits(**n))
            .map(|n| n.0 as usize)
            .collect();
        if cands.is_empty() {
            return Ok(PlacementOutcome::Stay {
                current_ms,
                best: None,
            });
        }
        // Members are numbered after every node id so that no member shares an id with a
        // candidate (the cost table treats equal ids as distance 0).
        let offset = cands.iter().max().copied().unwrap_or(0) + 1;
        let members: Vec<usize> = (0..players.len()).map(|k| offset + k).collect();
        for &c in &cands {
            for &client in &players {
                let node = NodeId(c as u32);
                if oracle.client_rtt_ms(client, node).is_none() {
                    return Err(PlacementError::Unknown { client, node });
                }
            }
        }
        let table = CostTable::new(&cands, &members, |c, m| {
            oracle
                .client_rtt_ms(players[m - offset], NodeId(c as u32))
                .unwrap_or(f64::NAN)
        })?;
        let ranked = rank(&table, Objective::Median);
        let Some(&(best, sum)) = ranked.first() else {
            return Ok(PlacementOutcome::Stay {
                current_ms,
                best: None,
            });
        };
        let best = NodeId(best as u32);
        let predicted_ms = sum / players.len() as f64;
        if current_ms - predicted_ms > self.cfg.min_gain_ms {
            Ok(PlacementOutcome::Migrate(PlacementDecision {
                target: best,
                region,
                current_ms,
                predicted_ms,
            }))
        } else {
            Ok(PlacementOutcome::Stay {
                current_ms,
                best: Some((best, predicted_ms)),
            })
        }
    }
}
