//! Assignment of connected players to nodes in the running world (paper `002`, issue 16
//! item 3), sans-IO.
//!
//! Every node runs an [`AssignmentAgent`]. The live member with the lowest id is the
//! **coordinator**: it holds the optimal capacity-aware assignment ([`worldmesh_assign::Assigner`],
//! J-SA on every join and L-SA on every leave, §3) over the current members as mirrors.
//! Every other agent reports its players to it: a player who connects to a node reports
//! its measured delay to every node ([`AssignmentAgent::player_joined`]), a player who
//! leaves is reported gone. The coordinator answers each event with the moves the
//! algorithm made: a `Move` to the node that holds the player, whose session table hands
//! the player over (the avatar migrates, the client reconnects: `sessions`).
//!
//! `Move` messages ride datagrams: a move stays unconfirmed until the player's new node
//! reports the player, and is ordered again every second until then.
//!
//! The coordinator's state is soft: when the membership changes (the coordinator failed,
//! a node joined or left), the new coordinator opens an **epoch** and asks every member to
//! report its players again; it rebuilds the assignment by joining them one by one (J-SA
//! keeps it optimal after each join), and moves whoever is misplaced. Messages of an old
//! epoch are ignored.
//!
//! After every event the coordinator checks its total delay against an independent
//! from-scratch min-cost-flow solve (`worldmesh_assign::reference`) when the instance is
//! small enough ([`AssignmentConfig::check_up_to`]); mismatches are counted, never expected.

use std::collections::{BTreeMap, VecDeque};

use worldmesh_assign::{Algorithm, Assigner, PlayerId, ms_to_micros, reference};
use worldmesh_core::{NodeId, Time};

/// A move not yet confirmed (the player's new node has not reported it) is ordered again
/// after this long: `Move` messages are datagrams and may be lost.
const MOVE_RESEND: std::time::Duration = std::time::Duration::from_secs(1);

/// Settings.
#[derive(Clone, Debug)]
pub struct AssignmentConfig {
    /// This node's capacity, players (paper `002` §2.1 `C_j`).
    pub capacity: u32,
    /// Check optimality against a from-scratch solve while at most this many players are
    /// assigned (the solve is `O(n² m)`-ish; 0 turns the check off).
    pub check_up_to: usize,
}

impl Default for AssignmentConfig {
    fn default() -> Self {
        Self {
            capacity: 4096,
            check_up_to: 400,
        }
    }
}

/// What agents tell each other.
#[derive(Clone, Debug, PartialEq, bitcode::Encode, bitcode::Decode)]
pub enum AssignMsg {
    /// To the coordinator: a player is on the sender, with these delays (ms) to nodes.
    Join {
        /// The coordinator's epoch this answers.
        epoch: u64,
        /// The player.
        player: u64,
        /// The sender's capacity.
        capacity: u32,
        /// Delay to each node, ms.
        delays: Vec<(u32, f32)>,
    },
    /// To the coordinator: the player left the sender.
    Leave {
        /// Epoch.
        epoch: u64,
        /// The player.
        player: u64,
    },
    /// From the coordinator: hand `player` over to node `to`.
    Move {
        /// Epoch.
        epoch: u64,
        /// The player.
        player: u64,
        /// Where it goes.
        to: u32,
    },
    /// From a new coordinator: report every player again, for `epoch`.
    Resync {
        /// The new epoch.
        epoch: u64,
    },
}

/// Most delays one message carries (nodes).
const MAX_DELAYS: usize = 1024;

impl AssignMsg {
    /// Encodes.
    pub fn encode(&self) -> Vec<u8> {
        bitcode::encode(self)
    }

    /// Decodes bytes from a peer (bounded: `None` on anything malformed or too large).
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let m: Self = bitcode::decode(bytes).ok()?;
        match &m {
            AssignMsg::Join { delays, .. } if delays.len() > MAX_DELAYS => None,
            _ => Some(m),
        }
    }
}

/// Counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AssignmentStats {
    /// Joins the coordinator placed.
    pub joins: u64,
    /// Leaves it processed.
    pub leaves: u64,
    /// Moves it ordered (other players re-assigned by J-SA/L-SA chains, and joiners placed
    /// away from the node they connected to).
    pub moves_ordered: u64,
    /// Moves this node received for its players.
    pub moves_received: u64,
    /// Moves ordered again because their player's new node had not reported it in time.
    #[serde(default)]
    pub moves_resent: u64,
    /// Moves that arrived after their player had left this node (nothing to hand over).
    #[serde(default)]
    pub moves_for_departed: u64,
    /// Epochs opened as coordinator (rebuilds).
    pub epochs: u64,
    /// Optimality checks against the from-scratch solve.
    pub checks: u64,
    /// Checks whose totals differed (must stay 0).
    pub mismatches: u64,
    /// Events refused (bad delays, all nodes full, unknown player).
    pub refused: u64,
    /// Messages ignored (old epoch, not the coordinator, malformed).
    pub ignored: u64,
}

/// A player known to this node: its delays and where the coordinator put it.
#[derive(Clone, Debug)]
struct Local {
    delays: Vec<(u32, f32)>,
}

/// The coordinator's state.
struct Coordinator {
    epoch: u64,
    mirrors: Vec<NodeId>,
    caps: BTreeMap<NodeId, u32>,
    assigner: Assigner,
    /// Where each player is connected now (its node), as far as the coordinator knows.
    at: BTreeMap<u64, NodeId>,
    /// Nodes sent a `Resync` again in this epoch (after a stale report).
    resynced: std::collections::BTreeSet<NodeId>,
    /// Moves ordered and not yet confirmed: player → (target, when last sent).
    unconfirmed: BTreeMap<u64, (NodeId, Option<Time>)>,
}

/// One node's part of the assignment protocol.
pub struct AssignmentAgent {
    me: NodeId,
    cfg: AssignmentConfig,
    members: Vec<NodeId>,
    /// The coordinator's epoch this node last heard (its reports carry it).
    epoch: u64,
    players: BTreeMap<u64, Local>,
    coordinator: Option<Coordinator>,
    out: VecDeque<(NodeId, AssignMsg)>,
    moves: VecDeque<(u64, NodeId)>,
    stats: AssignmentStats,
}

impl AssignmentAgent {
    /// An agent for node `me`, alone until [`AssignmentAgent::set_members`].
    pub fn new(me: NodeId, cfg: AssignmentConfig) -> Self {
        let mut a = Self {
            me,
            cfg,
            members: vec![me],
            epoch: 0,
            players: BTreeMap::new(),
            coordinator: None,
            out: VecDeque::new(),
            moves: VecDeque::new(),
            stats: AssignmentStats::default(),
        };
        a.become_coordinator_if_lowest(1);
        a
    }

    /// This node's capacity, players.
    pub fn capacity(&self) -> u32 {
        self.cfg.capacity
    }

    /// Counters.
    pub fn stats(&self) -> &AssignmentStats {
        &self.stats
    }

    /// The coordinator (the lowest live member).
    pub fn coordinator(&self) -> NodeId {
        self.members.first().copied().unwrap_or(self.me)
    }

    /// The coordinator's total delay, ms, and players (`None` unless this node coordinates).
    pub fn total(&self) -> Option<(f64, usize)> {
        self.coordinator
            .as_ref()
            .map(|c| (c.assigner.total_us() as f64 / 1000.0, c.assigner.len()))
    }

    /// Where the coordinator put `player` (`None` unless this node coordinates).
    pub fn placed(&self, player: u64) -> Option<NodeId> {
        let c = self.coordinator.as_ref()?;
        c.assigner.mirror_of(PlayerId(player)).map(|m| c.mirrors[m])
    }

    /// The live members changed (this node included or not; it is added).
    pub fn set_members(&mut self, members: &[NodeId]) {
        let mut m: Vec<NodeId> = members.to_vec();
        m.push(self.me);
        m.sort_unstable();
        m.dedup();
        if m == self.members {
            return;
        }
        self.members = m;
        let next = self.epoch.max(self.coordinator.as_ref().map_or(0, |c| c.epoch)) + 1;
        self.coordinator = None;
        self.become_coordinator_if_lowest(next);
    }

    fn become_coordinator_if_lowest(&mut self, epoch: u64) {
        if self.coordinator() != self.me {
            return;
        }
        let mut caps = BTreeMap::new();
        caps.insert(self.me, self.cfg.capacity);
        let mirrors = self.members.clone();
        let cap_list: Vec<u32> = mirrors
            .iter()
            .map(|n| caps.get(n).copied().unwrap_or(self.cfg.capacity))
            .collect();
        let Ok(assigner) = Assigner::new(Algorithm::Optimal, cap_list) else {
            return;
        };
        self.coordinator = Some(Coordinator {
            epoch,
            mirrors,
            caps,
            assigner,
            at: BTreeMap::new(),
            resynced: Default::default(),
            unconfirmed: BTreeMap::new(),
        });
        self.epoch = epoch;
        self.stats.epochs += 1;
        for &n in &self.members {
            if n != self.me {
                self.out.push_back((n, AssignMsg::Resync { epoch }));
            }
        }
        // Our own players, as any node would report them.
        let mine: Vec<(u64, Vec<(u32, f32)>)> =
            self.players.iter().map(|(p, l)| (*p, l.delays.clone())).collect();
        for (p, d) in mine {
            self.coordinate_join(self.me, p, self.cfg.capacity, &d);
        }
    }

    /// A player connected here, with its delays (ms) to nodes.
    pub fn player_joined(&mut self, player: u64, delays: Vec<(u32, f32)>) {
        self.players.insert(
            player,
            Local {
                delays: delays.clone(),
            },
        );
        if self.coordinator.is_some() {
            self.coordinate_join(self.me, player, self.cfg.capacity, &delays);
        } else {
            let msg = AssignMsg::Join {
                epoch: self.epoch,
                player,
                capacity: self.cfg.capacity,
                delays,
            };
            self.out.push_back((self.coordinator(), msg));
        }
    }

    /// A player left this node (its session ended, or it was handed to another node:
    /// the new node reports it as joined there).
    pub fn player_left(&mut self, player: u64, handed_off: bool) {
        if self.players.remove(&player).is_none() || handed_off {
            return;
        }
        if self.coordinator.is_some() {
            self.coordinate_leave(player);
        } else {
            let msg = AssignMsg::Leave {
                epoch: self.epoch,
                player,
            };
            self.out.push_back((self.coordinator(), msg));
        }
    }

    /// A message from node `from`.
    pub fn handle(&mut self, from: NodeId, msg: AssignMsg) {
        match msg {
            AssignMsg::Resync { epoch } => {
                if from != self.coordinator() || epoch < self.epoch {
                    self.stats.ignored += 1;
                    return;
                }
                self.epoch = epoch;
                let to = self.coordinator();
                for (p, l) in &self.players {
                    self.out.push_back((
                        to,
                        AssignMsg::Join {
                            epoch,
                            player: *p,
                            capacity: self.cfg.capacity,
                            delays: l.delays.clone(),
                        },
                    ));
                }
            }
            AssignMsg::Move { epoch, player, to } => {
                if from != self.coordinator() || epoch < self.epoch {
                    self.stats.ignored += 1;
                    return;
                }
                if !self.players.contains_key(&player) {
                    self.stats.moves_for_departed += 1;
                    return;
                }
                self.epoch = epoch;
                self.stats.moves_received += 1;
                self.moves.push_back((player, NodeId(to)));
            }
            AssignMsg::Join {
                epoch,
                player,
                capacity,
                delays,
            } => {
                if self.stale(from, epoch) {
                    return;
                }
                self.coordinate_join(from, player, capacity, &delays);
            }
            AssignMsg::Leave { epoch, player } => {
                if self.stale(from, epoch) {
                    return;
                }
                self.coordinate_leave(player);
            }
        }
    }

    /// Whether a report of `epoch` from `from` must be ignored: this node does not
    /// coordinate, or the report belongs to another epoch. A node reporting from an older
    /// epoch (it missed the `Resync`, e.g. sent before it was a member) is sent the
    /// `Resync` again, once per epoch, and reports everything anew.
    fn stale(&mut self, from: NodeId, epoch: u64) -> bool {
        let Some(c) = &mut self.coordinator else {
            self.stats.ignored += 1;
            return true;
        };
        if c.epoch == epoch {
            return false;
        }
        self.stats.ignored += 1;
        if epoch < c.epoch && c.resynced.insert(from) {
            self.out.push_back((from, AssignMsg::Resync { epoch: c.epoch }));
        }
        true
    }

    /// Runs timers: moves whose player's new node has not reported it within
    /// [`MOVE_RESEND`] are ordered again (to the node that still holds the player).
    pub fn tick(&mut self, now: Time) {
        let me = self.me;
        let Some(c) = &mut self.coordinator else {
            return;
        };
        let mut again = Vec::new();
        for (player, (to, sent)) in c.unconfirmed.iter_mut() {
            match sent {
                None => *sent = Some(now),
                Some(t) if now.saturating_since(*t) >= MOVE_RESEND => {
                    *t = now;
                    if let Some(&at) = c.at.get(player) {
                        again.push((at, *player, *to));
                    }
                }
                Some(_) => {}
            }
        }
        for (at, player, to) in again {
            self.stats.moves_resent += 1;
            if at == me {
                if self.players.contains_key(&player) {
                    self.moves.push_back((player, to));
                }
            } else {
                self.out.push_back((
                    at,
                    AssignMsg::Move {
                        epoch: c.epoch,
                        player,
                        to: to.0,
                    },
                ));
            }
        }
    }

    /// The next message to send: (to, bytes).
    pub fn poll_send(&mut self) -> Option<(NodeId, Vec<u8>)> {
        self.out.pop_front().map(|(n, m)| (n, m.encode()))
    }

    /// The next player this node must hand over: (player, to).
    pub fn poll_move(&mut self) -> Option<(u64, NodeId)> {
        self.moves.pop_front()
    }

    fn coordinate_join(&mut self, from: NodeId, player: u64, capacity: u32, delays: &[(u32, f32)]) {
        let Some(c) = &mut self.coordinator else {
            return;
        };
        if c.caps.insert(from, capacity) != Some(capacity) && capacity != self.cfg.capacity {
            // A capacity other than assumed: the Assigner's capacities are fixed, so the
            // difference applies from the next epoch (documented simplification).
        }
        // A player that is known already (a hand-off arriving at its new node) just moves.
        if c.assigner.mirror_of(PlayerId(player)).is_some() {
            c.at.insert(player, from);
            if c.unconfirmed.get(&player).is_some_and(|(to, _)| *to == from) {
                c.unconfirmed.remove(&player);
            }
            return;
        }
        // The row in mirror order; a node it did not measure counts as far away.
        let row: Option<Vec<i64>> = c
            .mirrors
            .iter()
            .map(|m| {
                let ms = delays
                    .iter()
                    .find(|(n, _)| *n == m.0)
                    .map_or(10_000.0, |(_, d)| f64::from(*d));
                ms_to_micros(ms).ok()
            })
            .collect();
        let Some(row) = row else {
            self.stats.refused += 1;
            return;
        };
        match c.assigner.join(PlayerId(player), &row) {
            Ok(out) => {
                self.stats.joins += 1;
                c.at.insert(player, from);
                let mut moves: Vec<(u64, NodeId)> =
                    out.moved.iter().map(|m| (m.player.0, c.mirrors[m.to])).collect();
                moves.push((player, c.mirrors[out.mirror]));
                self.order(moves);
                self.check();
            }
            Err(_) => self.stats.refused += 1,
        }
    }

    fn coordinate_leave(&mut self, player: u64) {
        let Some(c) = &mut self.coordinator else {
            return;
        };
        c.at.remove(&player);
        c.unconfirmed.remove(&player);
        match c.assigner.leave(PlayerId(player)) {
            Ok(out) => {
                self.stats.leaves += 1;
                let moves: Vec<(u64, NodeId)> =
                    out.moved.iter().map(|m| (m.player.0, c.mirrors[m.to])).collect();
                self.order(moves);
                self.check();
            }
            Err(_) => self.stats.refused += 1,
        }
    }

    /// Sends each move to the node that holds the player (or queues it here).
    fn order(&mut self, moves: Vec<(u64, NodeId)>) {
        let Some(c) = &mut self.coordinator else {
            return;
        };
        for (player, to) in moves {
            let Some(&at) = c.at.get(&player) else {
                continue;
            };
            if at == to {
                continue;
            }
            self.stats.moves_ordered += 1;
            c.unconfirmed.insert(player, (to, None));
            if at == self.me {
                if self.players.contains_key(&player) {
                    self.stats.moves_received += 1;
                    self.moves.push_back((player, to));
                } else {
                    self.stats.moves_for_departed += 1;
                }
            } else {
                let msg = AssignMsg::Move {
                    epoch: c.epoch,
                    player,
                    to: to.0,
                };
                self.out.push_back((at, msg));
            }
        }
    }

    fn check(&mut self) {
        let Some(c) = &self.coordinator else {
            return;
        };
        if c.assigner.len() > self.cfg.check_up_to {
            return;
        }
        let (rows, _) = c.assigner.instance();
        self.stats.checks += 1;
        match reference::optimal_assignment(&rows, c.assigner.capacities()) {
            Some((total, _)) if total == c.assigner.total_us() => {}
            _ => self.stats.mismatches += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use worldmesh_core::DetRng;

    /// Agents of `n` nodes exchanging messages directly; players connect to random nodes
    /// and leave at random; moves are carried out at once (the player's node reports it
    /// joined at the new node, as a hand-off does).
    fn churn(n: u32, events: usize, seed: u64) -> (Vec<AssignmentAgent>, BTreeMap<u64, NodeId>) {
        let cfg = AssignmentConfig {
            capacity: 30,
            check_up_to: 400,
        };
        let ids: Vec<NodeId> = (0..n).map(NodeId).collect();
        let mut agents: Vec<AssignmentAgent> = ids
            .iter()
            .map(|&i| AssignmentAgent::new(i, cfg.clone()))
            .collect();
        for a in &mut agents {
            a.set_members(&ids);
        }
        let mut rng = DetRng::new(seed);
        let mut on: BTreeMap<u64, NodeId> = BTreeMap::new();
        let mut delays: BTreeMap<u64, Vec<(u32, f32)>> = BTreeMap::new();
        let mut next = 0u64;
        let pump = |agents: &mut Vec<AssignmentAgent>,
                    on: &mut BTreeMap<u64, NodeId>,
                    delays: &BTreeMap<u64, Vec<(u32, f32)>>| {
            loop {
                let mut any = false;
                for i in 0..agents.len() {
                    while let Some((to, bytes)) = agents[i].poll_send() {
                        any = true;
                        let from = agents[i].me;
                        let msg = AssignMsg::decode(&bytes).expect("decodes");
                        agents[to.0 as usize].handle(from, msg);
                    }
                    while let Some((p, to)) = agents[i].poll_move() {
                        any = true;
                        agents[i].player_left(p, true);
                        on.insert(p, to);
                        agents[to.0 as usize].player_joined(p, delays[&p].clone());
                    }
                }
                if !any {
                    break;
                }
            }
        };
        for _ in 0..events {
            if on.is_empty() || rng.chance(0.6) {
                let p = next;
                next += 1;
                let d: Vec<(u32, f32)> = (0..n).map(|j| (j, 5.0 + rng.below(200) as f32)).collect();
                let at = NodeId(rng.below(u64::from(n)) as u32);
                delays.insert(p, d.clone());
                on.insert(p, at);
                agents[at.0 as usize].player_joined(p, d);
            } else {
                let keys: Vec<u64> = on.keys().copied().collect();
                let p = keys[rng.below(keys.len() as u64) as usize];
                let at = on.remove(&p).unwrap();
                agents[at.0 as usize].player_left(p, false);
            }
            pump(&mut agents, &mut on, &delays);
        }
        (agents, on)
    }

    #[test]
    fn players_end_where_the_optimal_assignment_puts_them_after_every_event() {
        let (agents, on) = churn(4, 200, 7);
        let s = agents[0].stats();
        assert_eq!(s.mismatches, 0, "{s:?}");
        assert!(s.checks >= 200, "{s:?}");
        assert!(s.moves_ordered > 0, "capacity forces some moves: {s:?}");
        for (p, n) in &on {
            assert_eq!(agents[0].placed(*p), Some(*n), "player {p}");
        }
        let (_, players) = agents[0].total().unwrap();
        assert_eq!(players, on.len());
    }

    #[test]
    fn a_new_coordinator_rebuilds_the_assignment_from_the_nodes() {
        let (mut agents, on) = churn(4, 120, 3);
        // Node 0 fails: node 1 becomes the coordinator in a new epoch and rebuilds.
        let live: Vec<NodeId> = (1..4).map(NodeId).collect();
        for a in agents.iter_mut().skip(1) {
            a.set_members(&live);
        }
        for i in 1..4 {
            while let Some((to, bytes)) = agents[i].poll_send() {
                let from = agents[i].me;
                if to.0 != 0 {
                    agents[to.0 as usize].handle(from, AssignMsg::decode(&bytes).unwrap());
                }
            }
        }
        // Every player not on node 0 is known to the new coordinator again.
        for i in 1..4 {
            while let Some((to, bytes)) = agents[i].poll_send() {
                let from = agents[i].me;
                agents[to.0 as usize].handle(from, AssignMsg::decode(&bytes).unwrap());
            }
        }
        let survivors = on.values().filter(|n| n.0 != 0).count();
        assert_eq!(agents[1].total().map(|t| t.1), Some(survivors));
        assert_eq!(agents[1].stats().mismatches, 0);
        assert!(agents[1].stats().epochs >= 1);
    }

    #[test]
    fn a_lost_move_is_ordered_again() {
        let ids = [NodeId(0), NodeId(1)];
        let cfg = AssignmentConfig::default();
        let mut a: Vec<AssignmentAgent> = ids
            .iter()
            .map(|&i| AssignmentAgent::new(i, cfg.clone()))
            .collect();
        for x in &mut a {
            x.set_members(&ids);
        }
        // Node 1 learns the epoch.
        while let Some((to, m)) = a[0].poll_send() {
            a[to.0 as usize].handle(NodeId(0), AssignMsg::decode(&m).unwrap());
        }
        // A player on node 1, much nearer node 0.
        a[1].player_joined(7, vec![(0, 10.0), (1, 200.0)]);
        let (to, join) = a[1].poll_send().unwrap();
        a[to.0 as usize].handle(NodeId(1), AssignMsg::decode(&join).unwrap());
        let (to, lost) = a[0].poll_send().expect("a move to node 1");
        assert_eq!(
            (to, AssignMsg::decode(&lost)),
            (
                NodeId(1),
                Some(AssignMsg::Move {
                    epoch: a[0].epoch,
                    player: 7,
                    to: 0
                })
            )
        );
        // The move is lost. A second later it is ordered again.
        a[0].tick(Time::from_millis(0));
        assert!(a[0].poll_send().is_none());
        a[0].tick(Time::from_millis(1_100));
        let (to, again) = a[0].poll_send().expect("the move again");
        assert_eq!(to, NodeId(1));
        a[1].handle(NodeId(0), AssignMsg::decode(&again).unwrap());
        assert_eq!(a[1].poll_move(), Some((7, NodeId(0))));
        assert_eq!(a[0].stats().moves_resent, 1);
        // Once node 0 reports the player, nothing more is sent.
        a[0].player_joined(7, vec![(0, 10.0), (1, 200.0)]);
        a[0].tick(Time::from_millis(5_000));
        assert!(a[0].poll_send().is_none());
    }

    #[test]
    fn malformed_messages_are_refused() {
        assert_eq!(AssignMsg::decode(&[1, 2, 3, 4, 5]), None);
        let big = AssignMsg::Join {
            epoch: 1,
            player: 1,
            capacity: 1,
            delays: vec![(0, 1.0); MAX_DELAYS + 1],
        };
        assert_eq!(AssignMsg::decode(&big.encode()), None);
    }
}
