//! The failover scenario: one game instance served with a replicated server by real nodes
//! (paper `003` §3.2.1, Algorithms 3 and 4, as run by [`worldmesh_node::instance`]), over the
//! modelled network with loss, and a fault of the host.
//!
//! One node hosts the instance (`AG_x.S`), one is its replicated server (`AG_x.RS`),
//! `spares` nodes are spare servers (members that do not play, first in line to become the
//! next replica), and the remaining nodes are the players. By default roles follow paper
//! `003`'s LL selection ([`RoleChoice::LowestLatency`]: the most central node hosts, the
//! next one is the replica); [`RoleChoice::Random`] gives them at random. Every node plays
//! its role through its own [`worldmesh_node::Node`]; all messages are Control datagrams
//! through the [`crate::engine`] and [`crate::network`] (delay = RTT/2 of the hosts'
//! PlanetLab rows, jitter, loss). The hosts are drawn from the latency matrix either as a
//! cluster of nearest hosts or at random ([`Placement`]); nodes take those rows in random
//! order.
//!
//! At a random time in [`FailoverScenario::fault_window`] the host either crashes
//! ([`Fault::Crash`], `Simulation::crash`) or is cut off from everyone
//! ([`Fault::Partition`], `NetworkModel::partition`, healed later). The report measures,
//! from the fault:
//!
//! - `promoted_ms`: until a node is promoted (Algorithm 4);
//! - `takeover_ms`: until the promoted server *commits* its first tick — its new replica
//!   stored it and a majority of the instance knows its configuration — so it confirms
//!   player inputs again (the "takeover": the new server serves durably);
//! - `redirected_ms`: until every live non-server node follows the new server;
//! - `first_confirm_ms` / `all_confirm_ms`: until the first / every live player received a
//!   confirmation from the new server;
//!
//! and checks the acceptance: the number of live servers at the end (exactly one), and the
//! confirmed inputs lost — a player's input confirmed to it but missing from (or different
//! in) the final server's state. Inputs are recomputed from their seed
//! ([`worldmesh_node::instance::expected_progress`]), so the check needs no log.
//! Same seed ⇒ same report.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use worldmesh_core::{DetRng, LatencyMatrix, NodeId, Time};
use worldmesh_game::{GameMap, ModelConfig, ModelObject};
pub use worldmesh_node::instance::FailoverConfig;
use worldmesh_node::instance::{InstanceEvent, InstanceSpec, Role, expected_progress};
use worldmesh_node::{Node, NodeConfig};

use crate::engine::Simulation;
use crate::network::{NetworkConfig, NetworkModel, NetworkStats};

/// The instance id used by the scenario.
pub const INSTANCE: u32 = 1;

/// What happens to the host.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub enum Fault {
    /// The host crashes for good.
    Crash,
    /// The host is cut off from every other node, and reconnected after `heal_after`.
    Partition {
        /// How long the partition lasts.
        heal_after: Duration,
    },
}

/// How the instance's hosts are drawn from the latency matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Placement {
    /// A random host and its nearest hosts by RTT (a regional instance).
    Nearest,
    /// Hosts drawn uniformly without replacement.
    Random,
}

/// How roles are given to the nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum RoleChoice {
    /// Paper `003` §3.2 LL: nodes ranked by their total latency to the others; the most
    /// central hosts, the next is the replica, then the spares, then the players (the
    /// ranking is also the successor order).
    LowestLatency,
    /// Node 0 hosts, node 1 is the replica, then spares and players by id (the hosts'
    /// rows are a random permutation, so roles are random).
    Random,
}

/// One failover run.
#[derive(Clone, Debug)]
pub struct FailoverScenario {
    /// Player nodes.
    pub players: usize,
    /// Spare (non-playing) server nodes besides the host and the replica.
    pub spares: usize,
    /// Latency matrix the hosts are drawn from.
    pub latency: Arc<LatencyMatrix>,
    /// How hosts are drawn.
    pub placement: Placement,
    /// How the host, replica, spares and players are chosen among the nodes.
    pub roles: RoleChoice,
    /// Datagram loss probability.
    pub loss: f64,
    /// Extra one-way jitter, uniform in `[0, jitter_ms]`.
    pub jitter_ms: f64,
    /// The fault.
    pub fault: Fault,
    /// The fault happens at a uniform time in `[start, end)`.
    pub fault_window: (Duration, Duration),
    /// How long to run after the fault (after the heal for a partition).
    pub settle: Duration,
    /// Protocol timing (`T`, `τ`, `k`).
    pub failover: FailoverConfig,
    /// Seed.
    pub seed: u64,
}

/// Why a scenario cannot run.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum FailoverScenarioError {
    /// Fewer than one player, or more nodes than matrix rows.
    #[error("need at least one player and at most as many nodes as latency hosts ({0} nodes)")]
    Size(usize),
    /// Loss or jitter out of range, or an empty fault window.
    #[error("loss must be in [0, 1), jitter ≥ 0, and the fault window non-empty")]
    Parameters,
}

/// What a run measured (see the module docs).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FailoverReport {
    /// Seed.
    pub seed: u64,
    /// The node that hosted the instance (and suffered the fault).
    pub host: u32,
    /// The node that was its replicated server.
    pub replica: u32,
    /// Base round-trip time between host and replica (ms).
    pub host_replica_rtt_ms: f64,
    /// Largest base round-trip time from the replica to another member (ms).
    pub replica_max_rtt_ms: f64,
    /// The floor the network puts under the takeover of this placement, without detection
    /// and without loss (ms): the host's last message to the replica (one way), the vote
    /// round trip to the nearest majority of the electorate, and the round trip to the
    /// replica the new server appoints (the next in the ranking). Any takeover by a
    /// majority-elected replica takes at least this plus the detection timeout.
    pub floor_ms: f64,
    /// When the fault happened (s).
    pub fault_at_s: f64,
    /// Promotions `(time s, node, epoch)` of the whole run.
    pub promotions: Vec<(f64, u32, u64)>,
    /// Step-downs `(time s, node, epoch)`.
    pub step_downs: Vec<(f64, u32, u64)>,
    /// Candidacies `(time s, node, epoch)`: a replica suspected its server (before the
    /// fault, every one is a false suspicion).
    pub candidacies: Vec<(f64, u32, u64)>,
    /// Fault → first promotion (ms).
    pub promoted_ms: Option<f64>,
    /// Fault → the promoted server's first commit (ms).
    pub takeover_ms: Option<f64>,
    /// Fault → every node but the host and the new server follows the new server (ms).
    pub redirected_ms: Option<f64>,
    /// Fault → first live player confirmed by the new server (ms).
    pub first_confirm_ms: Option<f64>,
    /// Fault → every live player confirmed by the new server (ms).
    pub all_confirm_ms: Option<f64>,
    /// Live nodes in the server role at the end.
    pub servers_at_end: Vec<u32>,
    /// Nodes in the server role when the partition healed (the cut-off host still
    /// believes it serves until it hears the newer epoch); empty for a crash.
    pub servers_before_heal: Vec<u32>,
    /// Inputs confirmed to live players but missing from the final server's state.
    pub confirmed_lost: u64,
    /// Inputs confirmed to live players at the end (sanity: grows with the run).
    pub confirmed_total: u64,
    /// Inputs confirmed to live players at the fault.
    pub confirmed_at_fault: u64,
    /// Control datagrams refused by nodes.
    pub rejected: u64,
    /// What the network did.
    pub network: NetworkStats,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

impl FailoverScenario {
    /// A crash scenario with default timing: `players` players, one spare, PlanetLab-like
    /// `latency`, 5 % loss.
    pub fn new(latency: Arc<LatencyMatrix>, players: usize, seed: u64) -> Self {
        Self {
            players,
            spares: 1,
            latency,
            placement: Placement::Nearest,
            roles: RoleChoice::LowestLatency,
            loss: 0.05,
            jitter_ms: 2.0,
            fault: Fault::Crash,
            fault_window: (Duration::from_millis(1_500), Duration::from_millis(2_500)),
            settle: Duration::from_millis(2_500),
            failover: FailoverConfig::default(),
            seed,
        }
    }

    fn nodes(&self) -> usize {
        2 + self.spares + self.players
    }

    fn hosts(&self, rng: &mut DetRng) -> Vec<usize> {
        let n = self.nodes();
        let rows = self.latency.len();
        let mut all: Vec<usize> = (0..rows).collect();
        match self.placement {
            Placement::Random => {
                rng.shuffle(&mut all);
                all.truncate(n);
                all
            }
            Placement::Nearest => {
                let c = rng.index(rows);
                let row = self.latency.row(c);
                all.sort_by(|&a, &b| {
                    let ka = if a == c { -1.0 } else { row[a] };
                    let kb = if b == c { -1.0 } else { row[b] };
                    ka.total_cmp(&kb).then(a.cmp(&b))
                });
                all.truncate(n);
                all
            }
        }
    }

    /// Runs the scenario.
    pub fn run(&self) -> Result<FailoverReport, FailoverScenarioError> {
        let n = self.nodes();
        if self.players == 0 || n > self.latency.len() {
            return Err(FailoverScenarioError::Size(n));
        }
        let valid = (0.0..1.0).contains(&self.loss)
            && self.jitter_ms.is_finite()
            && self.jitter_ms >= 0.0
            && self.fault_window.0 < self.fault_window.1;
        if !valid {
            return Err(FailoverScenarioError::Parameters);
        }
        let root = DetRng::new(self.seed);
        let mut rng = root.fork(0x6661_696c);
        let hosts = self.hosts(&mut rng);
        let net_cfg = NetworkConfig {
            jitter_ms: self.jitter_ms,
            loss: self.loss,
            ..NetworkConfig::default()
        };
        let net = NetworkModel::new(self.latency.select(&hosts), n, &net_cfg, &root);
        let world = Arc::new(GameMap::generate(&ModelConfig::default(), 1, self.seed));
        let ids: Vec<NodeId> = (0..n as u32).map(NodeId).collect();
        // Role order: host, replica, spares, players.
        let mut order: Vec<usize> = (0..n).collect();
        if self.roles == RoleChoice::LowestLatency {
            let score: Vec<f64> = (0..n)
                .map(|i| (0..n).map(|j| ms(net.base_delay(ids[i], ids[j]))).sum::<f64>())
                .collect();
            order.sort_by(|&a, &b| score[a].total_cmp(&score[b]).then(a.cmp(&b)));
        }
        let (host, replica) = (order[0], order[1]);
        let rtt = |a: usize, b: usize| ms(net.base_delay(ids[a], ids[b]) + net.base_delay(ids[b], ids[a]));
        let host_replica_rtt_ms = rtt(host, replica);
        let replica_max_rtt_ms = (0..n).map(|j| rtt(replica, j)).fold(0.0, f64::max);
        // votes needed besides the candidate's own: a strict majority of the electorate
        // (every member but the host and the candidate) plus the candidate
        let mut vote_rtts: Vec<f64> = (0..n)
            .filter(|&j| j != host && j != replica)
            .map(|j| rtt(replica, j))
            .collect();
        vote_rtts.sort_by(f64::total_cmp);
        let needed = vote_rtts.len().div_ceil(2);
        let vote_rtt = if needed == 0 { 0.0 } else { vote_rtts[needed - 1] };
        let next_replica = order.get(2).copied();
        let floor_ms = ms(net.base_delay(ids[host], ids[replica]))
            + vote_rtt
            + next_replica.map_or(0.0, |r| rtt(replica, r));
        let mut player = vec![false; n];
        for &i in &order[2 + self.spares..] {
            player[i] = true;
        }
        let mut ranking: Vec<NodeId> = order[1..].iter().map(|&i| ids[i]).collect();
        ranking.push(ids[host]);
        let tick_us = self.failover.tick.as_micros().max(1) as u64;
        let mut nodes = Vec::with_capacity(n);
        for &id in &ids {
            let peers = ids.iter().copied().filter(|p| *p != id).collect();
            let cfg = NodeConfig::new(id, peers, self.seed);
            let mut node: Node<ModelObject> = Node::new(cfg, Arc::clone(&world), Time::ZERO);
            let phase = Time::ZERO + Duration::from_micros(rng.below(tick_us));
            let spec = InstanceSpec {
                id: INSTANCE,
                members: ids.clone(),
                server: ids[host],
                replica: Some(ids[replica]),
                ranking: ranking.clone(),
                plays: player[id.0 as usize],
                first_tick: phase,
                failover: self.failover.clone(),
            };
            // The spec is built from the ids above: joining cannot fail.
            if node.instances_mut().join(spec).is_err() {
                return Err(FailoverScenarioError::Size(n));
            }
            nodes.push(node);
        }
        let mut sim = Simulation::new(nodes, net);
        let window = ms(self.fault_window.1 - self.fault_window.0);
        let fault_at =
            Time::ZERO + self.fault_window.0 + Duration::from_secs_f64(rng.range_f64(0.0, window) / 1000.0);
        sim.run_until(fault_at);
        let confirmed = |sim: &Simulation<ModelObject>, live: &dyn Fn(usize) -> bool| -> u64 {
            (0..n)
                .filter(|&i| player[i] && live(i))
                .filter_map(|i| sim.nodes()[i].instances().peer(INSTANCE))
                .map(|p| p.confirmed_seq())
                .sum()
        };
        let confirmed_at_fault = confirmed(&sim, &|_| true);
        let mut servers_before_heal = Vec::new();
        let crashed = matches!(self.fault, Fault::Crash);
        match self.fault {
            Fault::Crash => {
                sim.crash(ids[host]);
                sim.run_until(fault_at + self.settle);
            }
            Fault::Partition { heal_after } => {
                sim.network_mut().partition(&[ids[host]]);
                sim.run_until(fault_at + heal_after);
                servers_before_heal = servers(&sim);
                sim.network_mut().heal();
                sim.run_until(fault_at + heal_after + self.settle);
            }
        }
        let live = |i: usize| !(crashed && i == host);
        let mut rep = FailoverReport {
            seed: self.seed,
            host: host as u32,
            replica: replica as u32,
            host_replica_rtt_ms,
            replica_max_rtt_ms,
            floor_ms,
            fault_at_s: fault_at.as_secs_f64(),
            promotions: Vec::new(),
            step_downs: Vec::new(),
            candidacies: Vec::new(),
            promoted_ms: None,
            takeover_ms: None,
            redirected_ms: None,
            first_confirm_ms: None,
            all_confirm_ms: None,
            servers_at_end: servers(&sim).into_iter().filter(|&s| live(s as usize)).collect(),
            servers_before_heal,
            confirmed_lost: 0,
            confirmed_total: confirmed(&sim, &live),
            confirmed_at_fault,
            rejected: sim.nodes().iter().map(|n| n.instances().stats().rejected).sum(),
            network: sim.network_stats().clone(),
        };
        for (i, node) in sim.nodes().iter().enumerate() {
            for r in node.instances().log() {
                match r.event {
                    InstanceEvent::Promoted { epoch } => {
                        rep.promotions.push((r.at.as_secs_f64(), i as u32, epoch));
                    }
                    InstanceEvent::SteppedDown { epoch } => {
                        rep.step_downs.push((r.at.as_secs_f64(), i as u32, epoch));
                    }
                    InstanceEvent::Candidate { epoch } => {
                        rep.candidacies.push((r.at.as_secs_f64(), i as u32, epoch));
                    }
                    _ => {}
                }
            }
        }
        rep.promotions
            .sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        rep.step_downs
            .sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let since = |t: Time| ms(t - fault_at);
        // The first promotion after the fault and its server.
        let first = sim
            .nodes()
            .iter()
            .enumerate()
            .flat_map(|(i, nd)| nd.instances().log().iter().map(move |r| (i, *r)))
            .filter(|(_, r)| r.at >= fault_at)
            .filter_map(|(i, r)| match r.event {
                InstanceEvent::Promoted { epoch } => Some((r.at, i, epoch)),
                _ => None,
            })
            .min();
        if let Some((at, who, epoch)) = first {
            rep.promoted_ms = Some(since(at));
            let log = sim.nodes()[who].instances().log();
            rep.takeover_ms = log
                .iter()
                .find(|r| r.event == InstanceEvent::FirstCommit { epoch })
                .map(|r| since(r.at));
            let mut redirected = Vec::new();
            let mut confirms = Vec::new();
            for i in (0..n).filter(|&i| i != who && i != host) {
                let log = sim.nodes()[i].instances().log();
                redirected.push(
                    log.iter()
                        .filter(|r| r.at >= fault_at)
                        .find(|r| {
                            matches!(r.event, InstanceEvent::Redirected { server, epoch: e }
                                if server.0 as usize == who && e >= epoch)
                        })
                        .map(|r| r.at),
                );
                if player[i] {
                    confirms.push(
                        log.iter()
                            .filter(|r| r.at >= fault_at)
                            .find(
                                |r| matches!(r.event, InstanceEvent::FirstConfirm { epoch: e } if e >= epoch),
                            )
                            .map(|r| r.at),
                    );
                }
            }
            let all = |v: &[Option<Time>]| -> Option<f64> {
                v.iter()
                    .copied()
                    .collect::<Option<Vec<Time>>>()?
                    .into_iter()
                    .max()
                    .map(since)
            };
            rep.redirected_ms = all(&redirected);
            rep.all_confirm_ms = all(&confirms);
            rep.first_confirm_ms = confirms.iter().flatten().min().map(|&t| since(t));
        }
        // No confirmed input lost: every live player's confirmed prefix is in the final
        // server's state, with the digest of exactly the inputs it produced.
        if let [s] = rep.servers_at_end[..]
            && let Some(server) = sim.nodes()[s as usize].instances().peer(INSTANCE)
        {
            for i in (0..n).filter(|&i| player[i] && live(i)) {
                let Some(p) = sim.nodes()[i].instances().peer(INSTANCE) else {
                    continue;
                };
                let c = p.confirmed_seq();
                let held = server
                    .state()
                    .players
                    .get(&(i as u32))
                    .copied()
                    .unwrap_or_default();
                let seed = sim.nodes()[i].instances().seed();
                let genuine = held == expected_progress(seed, INSTANCE, NodeId(i as u32), held.seq);
                rep.confirmed_lost += match (genuine, held.seq >= c) {
                    (true, true) => 0,
                    (true, false) => c - held.seq,
                    (false, _) => c,
                };
            }
        } else {
            rep.confirmed_lost = rep.confirmed_total;
        }
        Ok(rep)
    }
}

/// Live or not, the nodes whose peer is in the server role.
fn servers(sim: &Simulation<ModelObject>) -> Vec<u32> {
    sim.nodes()
        .iter()
        .enumerate()
        .filter(|(_, n)| {
            n.instances()
                .peer(INSTANCE)
                .is_some_and(|p| p.role() == Role::Server)
        })
        .map(|(i, _)| i as u32)
        .collect()
}
