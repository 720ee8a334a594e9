//! Client-to-mirror assignment that reacts to every join and leave (paper `002` §3).
//!
//! [`Assigner`] holds the current assignment and applies one [`Algorithm`] per event:
//!
//! | [`Algorithm`]              | join (§3.1) | leave (§3.2) |
//! |----------------------------|-------------|--------------|
//! | [`Algorithm::Optimal`]     | J-SA        | L-SA         |
//! | [`Algorithm::OptimalRebuild`] | J-SA     | L-SA (`MC`/`MP` rebuilt per event, as in the paper) |
//! | [`Algorithm::Greedy`]      | J-greedy    | L-greedy     |
//! | [`Algorithm::GreedyIgnore`] | J-greedy   | L-ignore     |
//!
//! # Why J-SA and L-SA stay optimal
//!
//! Write the problem of §2.2 as a min-cost flow: source `s → p` (capacity 1, cost 0) for
//! every player, `p → j` (capacity 1, cost `d(p, j)`) for every mirror, `j → t` (capacity
//! `C_j`, cost 0). An assignment of all players is a flow saturating every `s → p`; it is
//! optimal iff its residual graph has no negative cycle. In the residual graph, `s` has no
//! outgoing arc (all its arcs are saturated), and the only way between mirrors is
//! `u → p → v` for a player `p` on `u`, of cost `d(p, v) − d(p, u)`. So cycles live on the
//! *mirror graph* with arcs `u → v` of cost `MC[u][v]` (the cheapest such player) plus the
//! sink `t`, reached from mirrors with spare capacity and reaching mirrors with players.
//!
//! **Join (J-SA).** Add the new player `q` with arcs `q → j` of cost `d(q, j)`, and augment
//! one unit along a shortest `q ⇝ t` path: `q → j₀ → … → k → t`, i.e. `q` takes `j₀`, one
//! player moves along each mirror arc, and `k` (spare capacity) absorbs the extra player.
//! This is one step of successive shortest paths; it keeps optimality because potentials
//! exist afterwards: let `h` be feasible potentials of the old residual graph extended to
//! `q` (reduced costs `≥ 0`; they exist as it has no negative cycle) and `δ` the
//! shortest-path distances from `q` in reduced costs. Then `h' = h + min(δ, δ(t))` keeps
//! every old arc's reduced cost `≥ 0` (triangle inequality, capped at `δ(t)`), and every
//! arc of the augmenting path — hence its reversal — has reduced cost `0`. A residual graph
//! with feasible potentials has no negative cycle, so the new assignment is optimal.
//! When `q`'s closest mirror has spare capacity, the direct assignment is already such a
//! shortest path: any chain ending at a mirror with spare capacity costs `≥ 0`, or with
//! `t` it would have closed a negative cycle before the join (the paper's first case).
//!
//! **Leave (L-SA).** Removing `p` from mirror `i` deletes arcs and, if `i` was full, adds the
//! arc `i → t` of capacity exactly 1. Every new negative cycle must use it: it is
//! `t → j ⇝ i → t`, a chain of moves from some mirror `j` into `i`. The cheapest such chain
//! (a shortest path *into* `i`), applied if its cost is negative, is the min-cost
//! circulation in the old residual graph plus that one unit arc (a circulation that uses
//! it decomposes into it, one `t ⇝ i` path and cycles that are `≥ 0`), so afterwards no
//! negative cycle remains. If `i` had spare capacity no arc appears, nothing can improve,
//! and nothing moves (the paper's first case). The paper only *conjectures* L-SA optimal
//! from simulation (§4.2); this argument, and the property tests against the
//! brute-force min-cost flow in [`crate::reference`], back it.
//!
//! # Finding chains: label correcting, or Dijkstra with kept potentials
//!
//! [`Algorithm::OptimalRebuild`] is the paper's literal version: `MC`/`MP` rebuilt from all
//! players, then label correcting (Bellman–Ford) over the mirror graph — `O(n·m)` per event.
//!
//! [`Algorithm::Optimal`] never rebuilds: the crate-private `index` module keeps one lazy min-heap per
//! mirror pair, and the assigner keeps *potentials* `h` on the mirrors and the sink with
//! every residual arc's reduced cost `c(u, v) + h(u) − h(v) ≥ 0`. Chains are then shortest
//! paths by Dijkstra on the `m + 1`-node graph (`O(m²)`), and after each event `h` is
//! updated exactly as in the proofs above: `h' = h + min(δ, D)` with `D = δ(t)` for a join
//! and `D = δ(i)` for a leave (or `max(0, h(t) − h(i))` when `i` is unreachable), which is
//! what makes the new arcs (the reversed chain, the freed slot's `i → t`) non-negative
//! too. The new player's own potential is `max_j (h(j) − d(q, j))`, the smallest making its
//! arcs non-negative. Potentials are renormalised to `h(t) = 0`, so they stay bounded by
//! path costs. Per event: `O(m²)` for the search plus `O(k·m·log n)` for a chain of `k ≤ m`
//! moves — the number of players enters only through the heaps' logarithm.
//!
//! Compressing player nodes away is exact for potentials as well: a player `p` on `u`
//! admits a potential iff `d(p, v) − d(p, u) + h(u) − h(v) ≥ 0` for every `v`, i.e. iff
//! every compressed arc has non-negative reduced cost.

use crate::chain::{NegativeCycle, UNREACHED, dijkstra, label_correct, path_to};
use crate::index::{Edge, MoveIndex};
use crate::{AssignError, Micros, Move, PlayerId, Stats, micros_to_ms};
use std::collections::{BTreeMap, HashMap};

/// Which join and leave algorithms to use (paper `002` §3). The paper pairs them this way:
/// the SA algorithms need an optimal assignment as input, so they cannot be mixed with the
/// greedy ones (§3.2, last paragraph).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Algorithm {
    /// J-SA and L-SA, with `MC`/`MP` maintained incrementally (optimal after every event).
    Optimal,
    /// J-SA and L-SA exactly as in the paper's Fig. 2: `MC`/`MP` rebuilt from all players
    /// on every event that needs a chain (optimal, `O(n·m)` per event).
    OptimalRebuild,
    /// J-greedy (closest mirror with spare capacity) and L-greedy (repeatedly pull in the
    /// player who gains most from the freed slot).
    Greedy,
    /// J-greedy and L-ignore (remove the player, move nobody): the scheme of the paper's
    /// references [4, 12].
    GreedyIgnore,
}

impl Algorithm {
    /// All variants, for help texts and experiments.
    pub const ALL: [Algorithm; 4] = [
        Algorithm::Optimal,
        Algorithm::OptimalRebuild,
        Algorithm::Greedy,
        Algorithm::GreedyIgnore,
    ];

    /// Short name used on command lines: `sa`, `sa-rebuild`, `greedy`, `ignore`.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Optimal => "sa",
            Algorithm::OptimalRebuild => "sa-rebuild",
            Algorithm::Greedy => "greedy",
            Algorithm::GreedyIgnore => "ignore",
        }
    }

    /// The paper's name for the join/leave pair, e.g. `J-SA/L-SA`.
    pub fn paper_name(self) -> &'static str {
        match self {
            Algorithm::Optimal => "J-SA/L-SA",
            Algorithm::OptimalRebuild => "J-SA/L-SA (rebuild)",
            Algorithm::Greedy => "J-greedy/L-greedy",
            Algorithm::GreedyIgnore => "J-greedy/L-ignore",
        }
    }

    /// Parses [`Algorithm::name`].
    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.name() == s)
    }

    fn optimal(self) -> bool {
        matches!(self, Algorithm::Optimal | Algorithm::OptimalRebuild)
    }
}

/// What a join did.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct JoinOutcome {
    /// Mirror the joining player was assigned to.
    pub mirror: usize,
    /// Other players re-assigned (the chain), in the order applied.
    pub moved: Vec<Move>,
}

/// What a leave did.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct LeaveOutcome {
    /// Mirror the leaving player was on.
    pub mirror: usize,
    /// Remaining players re-assigned, in the order applied.
    pub moved: Vec<Move>,
}

const FREE: u32 = u32::MAX;
/// Largest number of simultaneously connected players (slot indices are `u32`).
pub const MAX_PLAYERS: usize = (u32::MAX - 1) as usize;

/// The current client-to-mirror assignment and the algorithm that maintains it.
///
/// Invariants: every connected player is on exactly one mirror; no mirror holds more than
/// its capacity (§2.2 constraints (i) and (ii)); with an optimal [`Algorithm`] the total
/// delay is minimum after every event. An operation that returns an error changes nothing.
#[derive(Clone, Debug)]
pub struct Assigner {
    algorithm: Algorithm,
    m: usize,
    caps: Vec<u32>,
    load: Vec<u32>,
    total_cap: u64,
    delays: Vec<Micros>,
    slot_player: Vec<PlayerId>,
    slot_mirror: Vec<u32>,
    free: Vec<u32>,
    by_id: HashMap<PlayerId, u32>,
    total: Micros,
    delay_hist: BTreeMap<Micros, u32>,
    index: Option<MoveIndex>,
    /// Feasible potentials of the residual mirror graph (mirrors, then the sink), kept by
    /// [`Algorithm::Optimal`] so that chains are found by Dijkstra (see the module docs).
    pot: Vec<Micros>,
}

/// The most mirrors an [`Assigner`] accepts. The optimal algorithm's move index keeps a
/// heap per ordered mirror pair and each placed player has an entry in `m − 1` of them, so
/// at this limit the empty index takes about 46 MB (`m² × 44` bytes) and each player about
/// 12 KB (`(m − 1) × 12` bytes, up to 2.5× that before compaction). Paper `002` §4 uses
/// tens of mirrors; a deployment with more would partition its players by region first.
pub const MAX_MIRRORS: usize = 1_024;

impl Assigner {
    /// An empty assignment over mirrors with the given capacities (players per mirror).
    pub fn new(algorithm: Algorithm, capacities: Vec<u32>) -> Result<Self, AssignError> {
        if capacities.is_empty() {
            return Err(AssignError::NoMirrors);
        }
        let m = capacities.len();
        if m > MAX_MIRRORS {
            return Err(AssignError::TooManyMirrors {
                mirrors: m,
                limit: MAX_MIRRORS,
            });
        }
        Ok(Self {
            algorithm,
            m,
            total_cap: capacities.iter().map(|&c| u64::from(c)).sum(),
            load: vec![0; m],
            caps: capacities,
            delays: Vec::new(),
            slot_player: Vec::new(),
            slot_mirror: Vec::new(),
            free: Vec::new(),
            by_id: HashMap::new(),
            total: 0,
            delay_hist: BTreeMap::new(),
            index: (algorithm == Algorithm::Optimal).then(|| MoveIndex::new(m)),
            pot: vec![0; m + 1],
        })
    }

    /// An assignment given explicitly: `(player, delays in µs, mirror)` triples. With an
    /// optimal algorithm the assignment must be optimal ([`AssignError::NotOptimal`]
    /// otherwise), since J-SA/L-SA build on an optimal `CMA_n` (paper `002` §3.2).
    pub fn from_assignment(
        algorithm: Algorithm,
        capacities: Vec<u32>,
        players: impl IntoIterator<Item = (PlayerId, Vec<Micros>, usize)>,
    ) -> Result<Self, AssignError> {
        let mut a = Self::new(algorithm, capacities)?;
        for (id, row, mirror) in players {
            a.check_row(id, &row)?;
            if mirror >= a.m {
                return Err(AssignError::NoSuchMirror { mirror, mirrors: a.m });
            }
            if a.load[mirror] >= a.caps[mirror] {
                return Err(AssignError::OverCapacity {
                    mirror,
                    load: u64::from(a.load[mirror]) + 1,
                    capacity: a.caps[mirror],
                });
            }
            let slot = a.alloc(id, &row)?;
            a.place(slot, mirror);
        }
        if algorithm.optimal() {
            a.pot = a.potentials().ok_or(AssignError::NotOptimal)?;
        }
        Ok(a)
    }

    /// The algorithm in use.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// Number of mirrors `m`.
    pub fn mirrors(&self) -> usize {
        self.m
    }

    /// Capacities `C_j`.
    pub fn capacities(&self) -> &[u32] {
        &self.caps
    }

    /// Players currently on each mirror.
    pub fn loads(&self) -> &[u32] {
        &self.load
    }

    /// Number of connected players.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// True when nobody is connected.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Mirror of `player`, if connected.
    pub fn mirror_of(&self, player: PlayerId) -> Option<usize> {
        self.by_id
            .get(&player)
            .map(|&s| self.slot_mirror[s as usize] as usize)
    }

    /// Delays (µs) of `player` to every mirror, if connected.
    pub fn delays_of(&self, player: PlayerId) -> Option<&[Micros]> {
        self.by_id.get(&player).map(|&s| self.row(s))
    }

    /// Every connected player with its mirror, in internal slot order (deterministic for a
    /// given event sequence).
    pub fn players(&self) -> impl Iterator<Item = (PlayerId, usize)> + '_ {
        self.slot_mirror
            .iter()
            .enumerate()
            .filter(|(_, m)| **m != FREE)
            .map(|(s, &m)| (self.slot_player[s], m as usize))
    }

    /// Each connected player's current delay in ms, in [`Assigner::players`] order.
    pub fn player_delays_ms(&self) -> Vec<f64> {
        self.slot_mirror
            .iter()
            .enumerate()
            .filter(|(_, m)| **m != FREE)
            .map(|(s, &m)| micros_to_ms(self.delays[s * self.m + m as usize]))
            .collect()
    }

    /// Total delay in µs (exact).
    pub fn total_us(&self) -> Micros {
        self.total
    }

    /// Total, mean and max delay.
    pub fn stats(&self) -> Stats {
        let n = self.len();
        Stats {
            players: n,
            total_us: self.total,
            mean_ms: if n == 0 {
                0.0
            } else {
                micros_to_ms(self.total) / n as f64
            },
            max_ms: self
                .delay_hist
                .keys()
                .next_back()
                .map_or(0.0, |&d| micros_to_ms(d)),
        }
    }

    /// Delay rows (µs, row-major `len() × m`) and mirrors of all players, in
    /// [`Assigner::players`] order: the instance for a from-scratch solve.
    pub fn instance(&self) -> (Vec<Micros>, Vec<usize>) {
        let mut rows = Vec::with_capacity(self.len() * self.m);
        let mut mirrors = Vec::with_capacity(self.len());
        for (s, &mi) in self.slot_mirror.iter().enumerate() {
            if mi != FREE {
                rows.extend_from_slice(self.row(s as u32));
                mirrors.push(mi as usize);
            }
        }
        (rows, mirrors)
    }

    /// A player joins with delays in milliseconds (see [`Assigner::join`]).
    pub fn join_ms(&mut self, player: PlayerId, delays_ms: &[f64]) -> Result<JoinOutcome, AssignError> {
        let row = delays_ms
            .iter()
            .map(|&d| crate::ms_to_micros(d))
            .collect::<Result<Vec<_>, _>>()?;
        self.join(player, &row)
    }

    /// A player joins with delays `row[j]` (µs) to each mirror `j`; it is placed with J-SA
    /// or J-greedy according to the algorithm. Fails, changing nothing, on a duplicate
    /// player, a row of the wrong length or when every mirror is full.
    pub fn join(&mut self, player: PlayerId, row: &[Micros]) -> Result<JoinOutcome, AssignError> {
        self.check_row(player, row)?;
        if self.by_id.contains_key(&player) {
            return Err(AssignError::DuplicateJoin(player));
        }
        if self.by_id.len() as u64 >= self.total_cap {
            return Err(AssignError::AllFull {
                player,
                capacity: self.total_cap,
            });
        }
        if self.by_id.len() >= MAX_PLAYERS {
            return Err(AssignError::TooManyPlayers { limit: MAX_PLAYERS });
        }
        if self.algorithm == Algorithm::Optimal {
            self.join_indexed(player, row)
        } else if self.algorithm == Algorithm::OptimalRebuild {
            self.join_sa(player, row)
        } else {
            let mirror = self.closest_with_spare(row).ok_or(AssignError::AllFull {
                player,
                capacity: self.total_cap,
            })?;
            let slot = self.alloc(player, row)?;
            self.place(slot, mirror);
            Ok(JoinOutcome {
                mirror,
                moved: Vec::new(),
            })
        }
    }

    /// A connected player leaves; the rest are improved with L-SA, L-greedy or not at all.
    pub fn leave(&mut self, player: PlayerId) -> Result<LeaveOutcome, AssignError> {
        let slot = *self.by_id.get(&player).ok_or(AssignError::NotConnected(player))?;
        let i = self.slot_mirror[slot as usize] as usize;
        let was_full = self.load[i] == self.caps[i];
        self.unplace(slot);
        self.release(slot);
        let moved = if !was_full {
            Vec::new()
        } else {
            match self.algorithm {
                Algorithm::GreedyIgnore => Vec::new(),
                Algorithm::Greedy => self.leave_greedy(i),
                Algorithm::Optimal => self.leave_indexed(i),
                Algorithm::OptimalRebuild => self.leave_sa(i),
            }
        };
        Ok(LeaveOutcome { mirror: i, moved })
    }

    /// True when no re-assignment of the connected players lowers the total delay: no
    /// negative cycle in the residual mirror graph (see the module docs). Computed from
    /// scratch in `O(n·m + m³)`, independently of the incremental index.
    pub fn is_optimal(&self) -> bool {
        self.potentials().is_some()
    }

    /// Bellman–Ford from a virtual root on the residual mirror graph (mirrors, then the
    /// sink `t`): feasible potentials, normalised to `h(t) = 0`, or `None` if there is a
    /// negative cycle.
    fn potentials(&self) -> Option<Vec<Micros>> {
        let m = self.m;
        let arcs = self.rebuilt_arcs();
        let mut dist = vec![0 as Micros; m + 1];
        for _round in 0..=m + 1 {
            let mut changed = false;
            for u in 0..m {
                for v in 0..m {
                    if u != v
                        && let Some((c, _)) = arcs[u * m + v]
                        && dist[u] + c < dist[v]
                    {
                        dist[v] = dist[u] + c;
                        changed = true;
                    }
                }
                if self.load[u] < self.caps[u] && dist[u] < dist[m] {
                    dist[m] = dist[u];
                    changed = true;
                }
                if self.load[u] > 0 && dist[m] < dist[u] {
                    dist[u] = dist[m];
                    changed = true;
                }
            }
            if !changed {
                let ht = dist[m];
                return Some(dist.into_iter().map(|d| d - ht).collect());
            }
        }
        None
    }

    // ---- internals ------------------------------------------------------------------

    fn check_row(&self, player: PlayerId, row: &[Micros]) -> Result<(), AssignError> {
        if row.len() != self.m {
            return Err(AssignError::WrongRowLength {
                player,
                got: row.len(),
                mirrors: self.m,
            });
        }
        let max = crate::ms_to_micros(crate::MAX_DELAY_MS).unwrap_or(Micros::MAX);
        if let Some(&d) = row.iter().find(|&&d| !(0..=max).contains(&d)) {
            return Err(AssignError::BadDelay {
                value: micros_to_ms(d),
            });
        }
        Ok(())
    }

    fn row(&self, slot: u32) -> &[Micros] {
        let s = slot as usize * self.m;
        &self.delays[s..s + self.m]
    }

    fn alloc(&mut self, player: PlayerId, row: &[Micros]) -> Result<u32, AssignError> {
        if self.by_id.contains_key(&player) {
            return Err(AssignError::DuplicateJoin(player));
        }
        let slot = match self.free.pop() {
            Some(s) => {
                let at = s as usize * self.m;
                self.delays[at..at + self.m].copy_from_slice(row);
                self.slot_player[s as usize] = player;
                s
            }
            None => {
                if self.slot_mirror.len() >= MAX_PLAYERS {
                    return Err(AssignError::TooManyPlayers { limit: MAX_PLAYERS });
                }
                self.delays.extend_from_slice(row);
                self.slot_player.push(player);
                self.slot_mirror.push(FREE);
                (self.slot_mirror.len() - 1) as u32
            }
        };
        self.by_id.insert(player, slot);
        Ok(slot)
    }

    fn release(&mut self, slot: u32) {
        let id = self.slot_player[slot as usize];
        self.by_id.remove(&id);
        self.free.push(slot);
    }

    fn place(&mut self, slot: u32, mirror: usize) {
        let d = self.delays[slot as usize * self.m + mirror];
        self.slot_mirror[slot as usize] = mirror as u32;
        self.load[mirror] += 1;
        self.total += d;
        *self.delay_hist.entry(d).or_insert(0) += 1;
        if let Some(ix) = self.index.as_mut() {
            let s = slot as usize * self.m;
            ix.insert(slot, mirror, &self.delays[s..s + self.m]);
        }
    }

    fn unplace(&mut self, slot: u32) {
        let mirror = self.slot_mirror[slot as usize] as usize;
        let d = self.delays[slot as usize * self.m + mirror];
        self.slot_mirror[slot as usize] = FREE;
        self.load[mirror] -= 1;
        self.total -= d;
        if let Some(c) = self.delay_hist.get_mut(&d) {
            *c -= 1;
            if *c == 0 {
                self.delay_hist.remove(&d);
            }
        }
        if let Some(ix) = self.index.as_mut() {
            ix.remove(slot, mirror);
        }
    }

    fn move_slot(&mut self, slot: u32, to: usize) -> Move {
        let from = self.slot_mirror[slot as usize] as usize;
        self.unplace(slot);
        self.place(slot, to);
        Move {
            player: self.slot_player[slot as usize],
            from,
            to,
        }
    }

    fn closest_with_spare(&self, row: &[Micros]) -> Option<usize> {
        (0..self.m)
            .filter(|&j| self.load[j] < self.caps[j])
            .min_by_key(|&j| (row[j], j))
    }

    /// `MC`/`MP` rebuilt by scanning every player (the paper's "generate MC, MP").
    fn rebuilt_arcs(&self) -> Vec<Option<Edge>> {
        let m = self.m;
        let mut arcs: Vec<Option<Edge>> = vec![None; m * m];
        for (s, &mi) in self.slot_mirror.iter().enumerate() {
            if mi == FREE {
                continue;
            }
            let i = mi as usize;
            let row = &self.delays[s * m..s * m + m];
            for j in 0..m {
                if j != i {
                    let e = (row[j] - row[i], s as u32);
                    let cell = &mut arcs[i * m + j];
                    if cell.is_none_or(|c| e < c) {
                        *cell = Some(e);
                    }
                }
            }
        }
        arcs
    }

    /// Runs label correcting over `MC`/`MP` rebuilt from all players (the paper's Fig. 2).
    fn labels(
        &self,
        init: &[Micros],
        reverse: bool,
    ) -> Result<(Vec<crate::chain::Label>, Vec<Option<Edge>>), NegativeCycle> {
        let m = self.m;
        let arcs = self.rebuilt_arcs();
        let l = if reverse {
            label_correct(init, |a, b| arcs[b * m + a])?
        } else {
            label_correct(init, |a, b| arcs[a * m + b])?
        };
        Ok((l, arcs))
    }

    /// J-SA on the incrementally kept index: Dijkstra with potentials from the new player to
    /// the sink, then the capped potential update of the module docs.
    fn join_indexed(&mut self, player: PlayerId, row: &[Micros]) -> Result<JoinOutcome, AssignError> {
        let (m, t) = (self.m, self.m);
        let Some(ix) = self.index.as_ref() else {
            return Err(AssignError::NotOptimal);
        };
        let (h, load, caps) = (&self.pot, &self.load, &self.caps);
        let hq = (0..m).map(|j| h[j] - row[j]).max().unwrap_or(0);
        let mut init = vec![UNREACHED; m + 1];
        for j in 0..m {
            init[j] = row[j] + hq - h[j];
        }
        let labels = dijkstra(&init, Some(t), |u, v| {
            if u == t {
                None
            } else if v == t {
                (load[u] < caps[u]).then(|| (h[u] - h[t], 0))
            } else {
                ix.best(u, v).map(|(c, _)| (c + h[u] - h[v], 1))
            }
        });
        let dt = labels[t].cost;
        if dt == UNREACHED {
            return Err(AssignError::AllFull {
                player,
                capacity: self.total_cap,
            });
        }
        let mut path = path_to(&labels, t);
        path.pop(); // the sink
        let mut chain = Vec::with_capacity(path.len());
        for w in path.windows(2) {
            let (_, slot) = ix.best(w[0], w[1]).ok_or(AssignError::NotOptimal)?;
            chain.push((slot, w[1]));
        }
        for (v, l) in labels.iter().enumerate() {
            self.pot[v] += l.cost.min(dt);
        }
        let ht = self.pot[t];
        self.pot.iter_mut().for_each(|x| *x -= ht);
        let slot = self.alloc(player, row)?;
        self.place(slot, path[0]);
        let moved = chain.into_iter().map(|(s, to)| self.move_slot(s, to)).collect();
        Ok(JoinOutcome {
            mirror: path[0],
            moved,
        })
    }

    /// L-SA on the incrementally kept index: the cheapest cycle through the freed slot of
    /// `freed` (Dijkstra with potentials from the sink to `freed`), applied if negative,
    /// then the capped potential update.
    fn leave_indexed(&mut self, freed: usize) -> Vec<Move> {
        let (m, t) = (self.m, self.m);
        let Some(ix) = self.index.as_ref() else {
            return Vec::new();
        };
        let (h, load) = (&self.pot, &self.load);
        let mut init = vec![UNREACHED; m + 1];
        init[t] = 0;
        let labels = dijkstra(&init, Some(freed), |u, v| {
            if v == t {
                None
            } else if u == t {
                (load[v] > 0).then(|| (h[t] - h[v], 0))
            } else {
                ix.best(u, v).map(|(c, _)| (c + h[u] - h[v], 1))
            }
        });
        let di = labels[freed].cost;
        let reachable = di != UNREACHED;
        let cap = if reachable { di } else { (h[t] - h[freed]).max(0) };
        let cycle = if reachable { di + h[freed] - h[t] } else { 0 };
        let mut chain = Vec::new();
        if cycle < 0 {
            let path = path_to(&labels, freed);
            for w in path[1..].windows(2) {
                match ix.best(w[0], w[1]) {
                    Some((_, slot)) => chain.push((slot, w[1])),
                    None => return Vec::new(),
                }
            }
        }
        for (v, l) in labels.iter().enumerate() {
            self.pot[v] += l.cost.min(cap);
        }
        let ht = self.pot[t];
        self.pot.iter_mut().for_each(|x| *x -= ht);
        chain.into_iter().map(|(s, to)| self.move_slot(s, to)).collect()
    }

    fn join_sa(&mut self, player: PlayerId, row: &[Micros]) -> Result<JoinOutcome, AssignError> {
        let full = AssignError::AllFull {
            player,
            capacity: self.total_cap,
        };
        // Paper's first case: the closest mirror has spare capacity.
        let closest = (0..self.m)
            .min_by_key(|&j| (row[j], j))
            .ok_or(AssignError::NoMirrors)?;
        if self.load[closest] < self.caps[closest] {
            let slot = self.alloc(player, row)?;
            self.place(slot, closest);
            return Ok(JoinOutcome {
                mirror: closest,
                moved: Vec::new(),
            });
        }
        let (labels, arcs) = self.labels(row, false).map_err(|_| AssignError::NotOptimal)?;
        let end = (0..self.m)
            .filter(|&k| self.load[k] < self.caps[k] && labels[k].cost != UNREACHED)
            .min_by_key(|&k| (labels[k].cost, labels[k].moves, k))
            .ok_or(full)?;
        let path = path_to(&labels, end);
        // Decide every moving player before changing anything (the path is simple, so each
        // comes from a different mirror).
        let mut chain = Vec::with_capacity(path.len());
        for w in path.windows(2) {
            let (_, slot) = arcs[w[0] * self.m + w[1]].ok_or(AssignError::NotOptimal)?;
            chain.push((slot, w[1]));
        }
        let slot = self.alloc(player, row)?;
        self.place(slot, path[0]);
        let moved = chain.into_iter().map(|(s, to)| self.move_slot(s, to)).collect();
        Ok(JoinOutcome {
            mirror: path[0],
            moved,
        })
    }

    fn leave_sa(&mut self, freed: usize) -> Vec<Move> {
        let mut init = vec![UNREACHED; self.m];
        init[freed] = 0;
        // An optimal assignment minus one player has no negative cycle apart from through
        // the freed slot, which this search does not traverse; an error cannot happen.
        let Ok((labels, arcs)) = self.labels(&init, true) else {
            return Vec::new();
        };
        let Some(start) = (0..self.m)
            .filter(|&u| u != freed && labels[u].cost < 0)
            .min_by_key(|&u| (labels[u].cost, labels[u].moves, u))
        else {
            return Vec::new();
        };
        // Reverse labels link each mirror to the next one towards `freed`.
        let mut path = path_to(&labels, start);
        path.reverse();
        let mut chain = Vec::with_capacity(path.len());
        for w in path.windows(2) {
            match arcs[w[0] * self.m + w[1]] {
                Some((_, slot)) => chain.push((slot, w[1])),
                None => return Vec::new(),
            }
        }
        chain.into_iter().map(|(s, to)| self.move_slot(s, to)).collect()
    }

    fn leave_greedy(&mut self, mut freed: usize) -> Vec<Move> {
        let mut moved = Vec::new();
        loop {
            // The player elsewhere who gains most from moving into `freed`.
            let mut best: Option<(Micros, u32)> = None;
            for (s, &mi) in self.slot_mirror.iter().enumerate() {
                if mi == FREE || mi as usize == freed {
                    continue;
                }
                let row = &self.delays[s * self.m..(s + 1) * self.m];
                let b = row[freed] - row[mi as usize];
                if best.is_none_or(|(bb, _)| b < bb) {
                    best = Some((b, s as u32));
                }
            }
            let Some((b, slot)) = best else { break };
            if b >= 0 {
                break;
            }
            let from = self.slot_mirror[slot as usize] as usize;
            let from_was_full = self.load[from] == self.caps[from];
            moved.push(self.move_slot(slot, freed));
            if !from_was_full {
                break;
            }
            freed = from;
        }
        moved
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_inputs_are_refused_and_change_nothing() {
        assert_eq!(
            Assigner::new(Algorithm::Optimal, vec![]).err(),
            Some(AssignError::NoMirrors)
        );
        // Refused before the m × m index is allocated (20,000 mirrors would take ~18 GB).
        assert_eq!(
            Assigner::new(Algorithm::Optimal, vec![1; 20_000]).err(),
            Some(AssignError::TooManyMirrors {
                mirrors: 20_000,
                limit: MAX_MIRRORS
            })
        );
        assert!(Assigner::new(Algorithm::Optimal, vec![1; MAX_MIRRORS]).is_ok());
        let p = |i| PlayerId(i);
        let r = Assigner::from_assignment(Algorithm::Greedy, vec![1, 1], [(p(0), vec![1, 2], 2)]);
        assert_eq!(
            r.err(),
            Some(AssignError::NoSuchMirror {
                mirror: 2,
                mirrors: 2
            })
        );
        let r = Assigner::from_assignment(
            Algorithm::Greedy,
            vec![1, 1],
            [(p(0), vec![1, 2], 0), (p(1), vec![1, 2], 0)],
        );
        assert_eq!(
            r.err(),
            Some(AssignError::OverCapacity {
                mirror: 0,
                load: 2,
                capacity: 1
            })
        );
        let r = Assigner::from_assignment(
            Algorithm::Greedy,
            vec![1, 1],
            [(p(0), vec![1, 2], 0), (p(0), vec![1, 2], 1)],
        );
        assert_eq!(r.err(), Some(AssignError::DuplicateJoin(p(0))));

        let mut a = Assigner::new(Algorithm::Optimal, vec![1, 1]).expect("mirrors");
        a.join(p(0), &[1000, 2000]).expect("fits");
        let before = (a.total_us(), a.loads().to_vec());
        assert_eq!(
            a.join(p(1), &[1000]).err(),
            Some(AssignError::WrongRowLength {
                player: p(1),
                got: 1,
                mirrors: 2
            })
        );
        assert!(matches!(
            a.join(p(1), &[1000, -5]),
            Err(AssignError::BadDelay { .. })
        ));
        assert!(matches!(
            a.join_ms(p(1), &[1.0, f64::NAN]),
            Err(AssignError::BadDelay { .. })
        ));
        assert_eq!(
            a.join(p(0), &[1, 1]).err(),
            Some(AssignError::DuplicateJoin(p(0)))
        );
        assert_eq!(a.leave(p(9)).err(), Some(AssignError::NotConnected(p(9))));
        assert_eq!((a.total_us(), a.loads().to_vec()), before);
        a.join(p(1), &[1, 1]).expect("fits");
        assert_eq!(
            a.join(p(2), &[1, 1]).err(),
            Some(AssignError::AllFull {
                player: p(2),
                capacity: 2
            })
        );
        assert_eq!(a.len(), 2);
    }

    #[test]
    fn zero_capacity_mirrors_are_never_used() {
        let mut a = Assigner::new(Algorithm::Optimal, vec![0, 2]).expect("mirrors");
        let out = a.join(PlayerId(0), &[1, 50]).expect("fits");
        assert_eq!(out.mirror, 1);
        a.join(PlayerId(1), &[1, 60]).expect("fits");
        assert_eq!(a.loads(), &[0, 2]);
    }

    #[test]
    fn stats_track_mean_and_max_through_leaves() {
        let mut a = Assigner::new(Algorithm::Greedy, vec![5]).expect("mirrors");
        a.join_ms(PlayerId(0), &[10.0]).expect("fits");
        a.join_ms(PlayerId(1), &[30.0]).expect("fits");
        a.join_ms(PlayerId(2), &[30.0]).expect("fits");
        assert_eq!(a.stats().max_ms, 30.0);
        a.leave(PlayerId(1)).expect("present");
        assert_eq!(a.stats().max_ms, 30.0, "another player still has 30");
        a.leave(PlayerId(2)).expect("present");
        let s = a.stats();
        assert_eq!(
            (s.players, s.total_us, s.mean_ms, s.max_ms),
            (1, 10_000, 10.0, 10.0)
        );
    }
}
