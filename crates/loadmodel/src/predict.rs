//! Predictors (paper `004` §5.2, §5.3): relationships, updates, CPU and bandwidth for a
//! load state, for the client-server architecture and for worldmesh's distributed one.
//!
//! ## Rel(N) and what a relationship is
//!
//! §5.2 defines
//!
//! ```text
//! Rel(N) = N² Σ_{i∈G} Σ_{j∈G, j≠i} P(i,N) · P(j,N) · V(i,j) · A(i,j)
//! ```
//!
//! The double sum runs over *ordered* cell pairs, so with symmetric `V` and `A` it counts
//! each pair of avatars once per direction: `Rel(N)` is the expected number of
//! **directed relationships** `(a, b)`, `a ≠ b`, where `b` is visible from and inside
//! the area of interest of `a`. Each directed relationship needs one update of `b` sent
//! to `a`'s client per tick, so updates/s = relationships × update rate. (The paper
//! then multiplies by 2 for "each side of each pairwise relationship", reading Rel as
//! unordered; as printed, the formula already counts both sides. We follow the formula.)
//!
//! `N² P(i)P(j)` is the paper's approximation of the expected number of ordered avatar
//! pairs in cells `(i, j)`; with `N` avatars placed independently it is exactly
//! `N(N−1) P(i)P(j)`. We report both: [`Prediction::rel_paper`] (`N²`, as printed) and
//! [`Prediction::relationships`] (`N(N−1)`, used for every derived figure). They differ
//! by a factor `N/(N−1)`, 11% at N = 10.
//!
//! ## Client-server (§5, Torque-like)
//!
//! Every client sends its own update to the server each tick (one packet) and receives,
//! in one burst per tick, the updates of every object it relates to. A client in cell
//! `i` relates to `K ~ Binomial(N−1, qᵢ)` others, `qᵢ = Σ_{j≠i} P(j) V(i,j) A(i,j)`; its
//! expected payload is `bᵢ = (N−1) qᵢ u` for `u`-byte updates. Packets: a client with
//! `K > 0` gets `⌈bᵢ / Pr(K>0) / (MTU − h)⌉` packets (its conditional mean payload, cut
//! at the MTU), so the wire bytes are `bᵢ + h · Pr(K>0) · ⌈…⌉`, averaged over `P(i)`.
//! This refines the paper's `N · Pack(u · Rel/N)` (every client gets the mean payload),
//! which is reported too ([`Prediction::cs_server_out_kbps_paper`]).
//!
//! ## worldmesh (distributed)
//!
//! `N` players are spread over `M = ⌈N / P⌉` nodes — `M − 1` nodes of `P` players and a
//! last one with the rest — and **assigned to nodes uniformly at random**
//! (independently of position). Each node runs its players' avatars as primaries and
//! sends each update to every *other* node that holds a replica, i.e. that has at least
//! one player relating to the object. For an object in cell `j`, a remote node with `k`
//! players holds a replica with probability `1 − (1 − qⱼ)^k`; averaged over the
//! density, `H(k) = Σⱼ P(j) (1 − (1 − qⱼ)^k)`. A node with `s` players therefore sends a
//! node with `k` players `s · H(k)` updates per tick on average, and the expected number
//! of (object, remote node) interest pairs is the sum of `s · H(k)` over ordered pairs
//! of distinct nodes. A node batches all updates for one peer in one burst per tick; the
//! link is active with probability `1 − (1 − H(k))^s` and is charged packets like a
//! client. Per-node figures are means over the nodes. A node's total outbound traffic
//! adds what it sends to its own clients (exactly the client-server downstream per
//! client).

use crate::aoi::AoiRule;
use crate::density::{DensityMap, DensitySeries};
use crate::error::LoadModelError;
use crate::load_state::{LoadKind, LoadState};
use crate::packet::{CpuModel, PacketModel};
use crate::visibility::VisibilityMap;

/// Parameters of the cost model.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct CostModel {
    /// Updates per second per relationship (the paper's 10 Hz).
    pub update_rate_hz: f64,
    /// Bytes of one serialized update (the paper's 32: id, health, x, y, z, h, p, r).
    pub update_bytes: f64,
    /// Per-packet costs.
    pub packet: PacketModel,
    /// CPU cost of sending.
    pub cpu: CpuModel,
    /// Players per worldmesh node (`fed` scenarios use 8).
    pub players_per_node: usize,
}

impl Default for CostModel {
    /// The paper's model: 10 Hz, 32-byte updates, MTU 1500 with 40 bytes of headers,
    /// 24 + 100 ticks per update; 8 players per node.
    fn default() -> Self {
        Self {
            update_rate_hz: 10.0,
            update_bytes: 32.0,
            packet: PacketModel::PAPER,
            cpu: CpuModel::default(),
            players_per_node: 8,
        }
    }
}

impl CostModel {
    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), LoadModelError> {
        if !(self.update_rate_hz.is_finite() && self.update_rate_hz > 0.0 && self.update_rate_hz <= 1000.0) {
            return Err(LoadModelError::spec(
                format!("rate {}", self.update_rate_hz),
                "must be in (0, 1000] Hz",
            ));
        }
        if !(self.update_bytes.is_finite() && self.update_bytes > 0.0 && self.update_bytes <= 1.0e6) {
            return Err(LoadModelError::spec(
                format!("update size {}", self.update_bytes),
                "must be in (0, 1e6] bytes",
            ));
        }
        if self.players_per_node == 0 {
            return Err(LoadModelError::spec("players per node 0", "must be at least 1"));
        }
        Ok(())
    }

    fn kbps(&self, bytes_per_tick: f64) -> f64 {
        bytes_per_tick * self.update_rate_hz * 8.0 / 1000.0
    }

    /// Expected wire bytes of a burst with mean payload `b` that is non-empty with
    /// probability `active` (module docs).
    fn burst_bytes(&self, b: f64, active: f64) -> f64 {
        if active <= 0.0 || b <= 0.0 {
            return 0.0;
        }
        b + self.packet.overhead * active * self.packet.packets(b / active)
    }
}

/// The pair sums of a density over a visibility map and an AoI rule.
#[derive(Clone, Debug, PartialEq)]
pub struct PairSums {
    /// `S = Σᵢ Σ_{j≠i} P(i) P(j) V(i,j) A(i,j)`; `Rel(N) = N² S`.
    pub s: f64,
    /// `qᵢ = Σ_{j≠i} P(j) V(i,j) A(i,j)`: chance that one given other object relates to
    /// an observer in cell `i`.
    pub q: Vec<f64>,
}

impl PairSums {
    /// Computes the sums; `V` comes from the map, `A` from the rule between cell centres.
    pub fn compute(density: &DensityMap, vis: &VisibilityMap, aoi: AoiRule) -> Self {
        let g = density.grid;
        let p = &density.p;
        let mut q = vec![0.0; g.len()];
        for i in 0..g.len().min(vis.len()) {
            let (xi, yi) = g.center(i);
            for j in vis.row(i) {
                let (xj, yj) = g.center(j);
                if aoi.contains(xj - xi, yj - yi) {
                    q[i] += p[j];
                    q[j] += p[i];
                }
            }
        }
        let s = p.iter().zip(&q).map(|(a, b)| a * b).sum();
        Self { s, q }
    }

    /// `Rel(N)` as printed in §5.2: `N² S`.
    pub fn rel_paper(&self, n: usize) -> f64 {
        (n as f64).powi(2) * self.s
    }

    /// Expected directed relationships with `n` independently placed objects:
    /// `N(N−1) S`.
    pub fn relationships(&self, n: usize) -> f64 {
        let n = n as f64;
        n * (n - 1.0).max(0.0) * self.s
    }
}

/// The predictions for one load state.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Prediction {
    /// The state's name.
    pub name: String,
    /// Its kind.
    pub kind: LoadKind,
    /// Users `N`.
    pub players: usize,
    /// `Rel(N)` as printed in the paper (`N² S`, directed).
    pub rel_paper: f64,
    /// Expected directed relationships `N(N−1) S` (module docs).
    pub relationships: f64,
    /// Updates per second to deliver: relationships × update rate.
    pub updates_per_s: f64,
    /// Client-server: per-client downstream, kbit/s.
    pub cs_client_down_kbps: f64,
    /// Client-server: per-client upstream, kbit/s.
    pub cs_client_up_kbps: f64,
    /// Client-server: server outbound, kbit/s.
    pub cs_server_out_kbps: f64,
    /// Client-server: server outbound by the paper's method, `N · Pack(u · Rel/N)` per
    /// tick (every client gets the mean payload), kbit/s.
    pub cs_server_out_kbps_paper: f64,
    /// Client-server: server inbound, kbit/s.
    pub cs_server_in_kbps: f64,
    /// Client-server: server send cost, clock ticks per second (§5.3).
    pub cs_server_cpu_ticks: f64,
    /// worldmesh: nodes `M = ⌈N / P⌉`.
    pub nodes: usize,
    /// worldmesh: expected (object, remote node) interest pairs.
    pub wm_interest_pairs: f64,
    /// worldmesh: per-node outbound to other nodes, kbit/s.
    pub wm_node_peer_out_kbps: f64,
    /// worldmesh: per-node outbound in total (peers + its own clients), kbit/s.
    pub wm_node_out_kbps: f64,
    /// worldmesh: per-node send cost, clock ticks per second.
    pub wm_node_cpu_ticks: f64,
}

/// Evaluates load states against a density (per N), a visibility map, an AoI rule and
/// a cost model.
#[derive(Clone, Debug)]
pub struct Planner<'a> {
    density: &'a DensitySeries,
    vis: &'a VisibilityMap,
    aoi: AoiRule,
    cost: CostModel,
    /// The pair sums, computed once when the density does not depend on N.
    fixed: Option<(DensityMap, PairSums)>,
}

impl<'a> Planner<'a> {
    /// A planner; the density grid must be the visibility map's grid.
    pub fn new(
        density: &'a DensitySeries,
        vis: &'a VisibilityMap,
        aoi: AoiRule,
        cost: CostModel,
    ) -> Result<Self, LoadModelError> {
        cost.validate()?;
        if density.grid().len() != vis.len() {
            return Err(LoadModelError::spec(
                "density and visibility maps",
                format!(
                    "{} vs {} cells: built on different grids",
                    density.grid().len(),
                    vis.len()
                ),
            ));
        }
        let fixed = (density.maps().len() == 1).then(|| {
            let d = density.maps()[0].1.clone();
            let sums = PairSums::compute(&d, vis, aoi);
            (d, sums)
        });
        Ok(Self {
            density,
            vis,
            aoi,
            cost,
            fixed,
        })
    }

    /// The cost model.
    pub fn cost(&self) -> &CostModel {
        &self.cost
    }

    /// The pair sums for `n` users (the density may depend on `n`).
    pub fn pair_sums(&self, n: usize) -> (DensityMap, PairSums) {
        let d = self.density.at(n);
        let sums = PairSums::compute(&d, self.vis, self.aoi);
        (d, sums)
    }

    /// Predicts one load state.
    pub fn predict(&self, state: &LoadState) -> Prediction {
        match &self.fixed {
            Some((d, sums)) => predict_with(&self.cost, state, d, sums),
            None => {
                let (d, sums) = self.pair_sums(state.players);
                predict_with(&self.cost, state, &d, &sums)
            }
        }
    }
}

/// The predictions from precomputed pair sums (module docs for every formula).
pub fn predict_with(cost: &CostModel, state: &LoadState, d: &DensityMap, sums: &PairSums) -> Prediction {
    let n = state.players;
    let nf = n as f64;
    let u = cost.update_bytes;
    let others = (nf - 1.0).max(0.0);
    let relationships = sums.relationships(n);

    // Client-server downstream per client per tick.
    let mut client_down = 0.0;
    for (p, q) in d.p.iter().zip(&sums.q) {
        if *p > 0.0 {
            let active = 1.0 - (1.0 - q).powf(others);
            client_down += p * cost.burst_bytes(others * q * u, active);
        }
    }
    let client_up = cost.packet.pack(u);
    let updates_per_s = relationships * cost.update_rate_hz;
    let server_out_bytes = nf * client_down;
    let paper_bytes = if n > 0 {
        nf * cost.packet.pack(u * relationships / nf)
    } else {
        0.0
    };

    // worldmesh: M − 1 full nodes of P players and a last node of R = N − (M−1)P.
    let ppn = cost.players_per_node;
    let nodes = n.div_ceil(ppn);
    let m = nodes as f64;
    let groups = node_groups(n, ppn);
    // H(k): chance that a node with k players holds a replica of one given object.
    let h = |k: f64| -> f64 {
        d.p.iter()
            .zip(&sums.q)
            .map(|(p, q)| p * (1.0 - (1.0 - q).powf(k)))
            .sum()
    };
    let (mut interest_pairs, mut peer_bytes_total) = (0.0, 0.0);
    for (gs, &(ks, cs)) in groups.iter().enumerate() {
        for (gm, &(km, cm)) in groups.iter().enumerate() {
            // Ordered pairs of distinct nodes (sender of size ks, receiver of size km).
            let links = if gs == gm { cs * (cm - 1.0) } else { cs * cm };
            if links <= 0.0 {
                continue;
            }
            let hk = h(km);
            interest_pairs += links * ks * hk;
            let active = 1.0 - (1.0 - hk).powf(ks);
            peer_bytes_total += links * cost.burst_bytes(ks * hk * u, active);
        }
    }
    let per_node = |total: f64| if nodes > 0 { total / m } else { 0.0 };
    let peer_bytes = per_node(peer_bytes_total);
    let own_clients = per_node(nf * client_down);
    let node_updates_per_tick = per_node(interest_pairs + nf * others * mean_q(d, sums));
    let tick = cost.update_rate_hz;
    Prediction {
        name: state.name.clone(),
        kind: state.kind,
        players: n,
        rel_paper: sums.rel_paper(n),
        relationships,
        updates_per_s,
        cs_client_down_kbps: cost.kbps(client_down),
        cs_client_up_kbps: cost.kbps(client_up),
        cs_server_out_kbps: cost.kbps(server_out_bytes),
        cs_server_out_kbps_paper: cost.kbps(paper_bytes),
        cs_server_in_kbps: cost.kbps(nf * client_up),
        cs_server_cpu_ticks: cost.cpu.ticks_per_s(updates_per_s, server_out_bytes * tick),
        nodes,
        wm_interest_pairs: interest_pairs,
        wm_node_peer_out_kbps: cost.kbps(peer_bytes),
        wm_node_out_kbps: cost.kbps(peer_bytes + own_clients),
        wm_node_cpu_ticks: cost
            .cpu
            .ticks_per_s(node_updates_per_tick * tick, (peer_bytes + own_clients) * tick),
    }
}

/// `Σᵢ P(i) qᵢ = S`.
fn mean_q(d: &DensityMap, sums: &PairSums) -> f64 {
    d.p.iter().zip(&sums.q).map(|(p, q)| p * q).sum()
}

/// How `n` players fill nodes of `ppn` players: `(players on the node, how many such
/// nodes)` — `M − 1` full nodes and a last node of `R = N − (M − 1)P` (one group if it
/// is full too, none if there are no players).
pub(crate) fn node_groups(n: usize, ppn: usize) -> Vec<(f64, f64)> {
    let nodes = n.div_ceil(ppn);
    let last = n - nodes.saturating_sub(1) * ppn;
    if nodes == 0 {
        Vec::new()
    } else if last == ppn {
        vec![(ppn as f64, nodes as f64)]
    } else {
        vec![(ppn as f64, nodes as f64 - 1.0), (last as f64, 1.0)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grid::Grid;
    use crate::map::Map;

    fn strip(boxes: &[(f64, f64, f64, f64)], n: usize) -> (Map, Grid) {
        let map = Map::with_boxes(10.0 * n as f64, 10.0, boxes).unwrap();
        let g = Grid::for_map(&map, 10.0).unwrap();
        (map, g)
    }

    fn density(g: Grid, w: &[f64]) -> DensityMap {
        DensityMap::from_weights(g, w.to_vec(), 0).unwrap()
    }

    #[test]
    fn rel_on_two_visible_cells() {
        // Two cells, each holding half the mass, see each other:
        // Rel(N) = N² (½·½ + ½·½) = N²/2.
        let (map, g) = strip(&[], 2);
        let v = VisibilityMap::build(&map, &g, None, 1).unwrap();
        let d = density(g, &[1.0, 1.0]);
        let s = PairSums::compute(&d, &v, AoiRule::Unlimited);
        assert_eq!(s.rel_paper(10), 50.0);
        assert_eq!(s.relationships(10), 45.0);
        assert_eq!(s.q, vec![0.5, 0.5]);
    }

    #[test]
    fn rel_with_a_wall_and_an_aoi_cut_off() {
        // Cells 0 1 | 3 (wall covers cell 2's centre); weights ¼ each on 0, 1, 3, 4.
        let (map, g) = strip(&[(22.0, 0.0, 28.0, 10.0)], 5);
        let v = VisibilityMap::build(&map, &g, None, 1).unwrap();
        let d = density(g, &[1.0, 1.0, 0.0, 1.0, 1.0]);
        // Visible pairs across no wall: {0,1}, {3,4}: S = 2 pairs × 2 directions × 1/16.
        let s = PairSums::compute(&d, &v, AoiRule::Unlimited);
        assert!((s.s - 0.25).abs() < 1e-15);
        assert!((s.rel_paper(4) - 4.0).abs() < 1e-12);
        // Without the wall every pair of the four occupied cells is visible: 12/16.
        let (open, _) = strip(&[], 5);
        let vo = VisibilityMap::build(&open, &g, None, 1).unwrap();
        assert!((PairSums::compute(&d, &vo, AoiRule::Unlimited).s - 0.75).abs() < 1e-15);
        // An AoI of radius 10 keeps neighbours only: {0,1}, {3,4} (1–3 is 20 apart).
        assert!((PairSums::compute(&d, &vo, AoiRule::Radius(10.0)).s - 0.25).abs() < 1e-15);
        // A visibility map limited to the AoI range gives the same sums.
        let vr = VisibilityMap::build(&open, &g, AoiRule::Radius(10.0).max_range(), 2).unwrap();
        assert_eq!(
            PairSums::compute(&d, &vr, AoiRule::Radius(10.0)),
            PairSums::compute(&d, &vo, AoiRule::Radius(10.0))
        );
    }

    #[test]
    fn predictions_follow_the_formulas() {
        // Two cells, half the mass each, mutually visible: q = ½ everywhere.
        let (map, g) = strip(&[], 2);
        let v = VisibilityMap::build(&map, &g, None, 1).unwrap();
        let series = DensitySeries::single(density(g, &[1.0, 1.0]));
        let cost = CostModel {
            players_per_node: 2,
            ..CostModel::default()
        };
        let planner = Planner::new(&series, &v, AoiRule::Unlimited, cost).unwrap();
        let p = planner.predict(&LoadState::steady(4));
        assert_eq!(p.relationships, 6.0);
        assert_eq!(p.updates_per_s, 60.0);
        // A client relates to K ~ Bin(3, ½) others: E[K] = 1.5, Pr(K > 0) = 7/8;
        // payload 48 B, conditional mean 54.9 B → 1 packet: 48 + 40·7/8 = 83 B per tick.
        assert!((p.cs_client_down_kbps - 83.0 * 10.0 * 8.0 / 1000.0).abs() < 1e-9);
        assert!((p.cs_server_out_kbps - 4.0 * 83.0 * 0.08).abs() < 1e-9);
        assert!((p.cs_client_up_kbps - 72.0 * 0.08).abs() < 1e-9);
        // Paper's method: 4 · Pack(32 · 6/4 = 48) = 4 · 88 bytes per tick.
        assert!((p.cs_server_out_kbps_paper - 4.0 * 88.0 * 0.08).abs() < 1e-9);
        // 2 nodes of 2 players: h = 1 − ½² = ¾; pairs = 4 · 1 · ¾ = 3.
        assert_eq!(p.nodes, 2);
        assert!((p.wm_interest_pairs - 3.0).abs() < 1e-12);
        // Link payload 2 · ¾ · 32 = 48 B, active 1 − ¼² = 15/16 → 48 + 40·15/16 = 85.5 B.
        assert!((p.wm_node_peer_out_kbps - 85.5 * 0.08).abs() < 1e-9);
        assert!((p.wm_node_out_kbps - (85.5 + 2.0 * 83.0) * 0.08).abs() < 1e-9);
        // One node: no peer traffic.
        let one = planner.predict(&LoadState::steady(2));
        assert_eq!((one.nodes, one.wm_node_peer_out_kbps), (1, 0.0));
        // Uneven nodes, N = 3: A has 2 players, B has 1. H(1) = ½, H(2) = ¾.
        // Pairs: A→B 2·½ = 1, B→A 1·¾ = ¾. Bytes: A→B 32 + 40·¾ = 62, B→A 24 + 40·¾ = 54.
        let three = planner.predict(&LoadState::steady(3));
        assert_eq!(three.nodes, 2);
        assert!((three.wm_interest_pairs - 1.75).abs() < 1e-12);
        assert!((three.wm_node_peer_out_kbps - 58.0 * 0.08).abs() < 1e-9);
    }

    #[test]
    fn the_papers_case_study_end_to_end() {
        // §5.2–§5.3: N = 10 and 309.768 updates/s at 10 Hz, i.e. 30.9768 directed
        // relationships in our reading (the paper's 2 · Rel(10), Rel(10) = 15.4884).
        // Two cells with P = ½ each and q = S make Σ P q = S; choose S so that
        // N(N−1) S = 30.9768.
        let g = Grid::new(10.0, 2, 1).unwrap();
        let d = density(g, &[1.0, 1.0]);
        let s = 30.9768 / 90.0;
        let sums = PairSums { s, q: vec![s, s] };
        let p = predict_with(&CostModel::default(), &LoadState::steady(10), &d, &sums);
        assert!((p.updates_per_s - 309.768).abs() < 1e-9);
        // "100 bytes are sent to each client, with 40 bytes of overhead, at 10 Hz costing
        // a total of 14 KB/sec": 10 · Pack(32 · 3.09768 = 99.1) · 10 Hz = 13,913 B/s.
        let bytes_per_s = p.cs_server_out_kbps_paper * 1000.0 / 8.0;
        assert!((bytes_per_s - 13_912.6).abs() < 0.1, "{bytes_per_s}");
        assert!((bytes_per_s - 14_000.0).abs() / 14_000.0 < 0.01);
        // "38,440 processor cycles per second" for 310 updates/s (24 + 100 per update);
        // 309.768 unrounded gives 38,411.
        assert!((p.cs_server_cpu_ticks - 309.768 * 124.0).abs() < 1e-6);
        assert!((p.cs_server_cpu_ticks - 38_440.0).abs() / 38_440.0 < 0.001);
    }

    #[test]
    fn load_is_non_decreasing_in_n() {
        let map = crate::map::MapSpec::parse("random:640x640:6:3")
            .unwrap()
            .unwrap()
            .build();
        let g = Grid::for_map(&map, 32.0).unwrap();
        let v = VisibilityMap::build(&map, &g, Some(300.0), 2).unwrap();
        let series = DensitySeries::single(DensityMap::uniform(g, &g.free_cells(&map)).unwrap());
        let planner = Planner::new(&series, &v, AoiRule::Radius(300.0), CostModel::default()).unwrap();
        let ps: Vec<Prediction> = [1, 2, 5, 10, 40, 100]
            .iter()
            .map(|&n| planner.predict(&LoadState::steady(n)))
            .collect();
        assert_eq!(ps[0].relationships, 0.0);
        for w in ps.windows(2) {
            assert!(w[1].relationships > w[0].relationships);
            assert!(w[1].cs_server_out_kbps > w[0].cs_server_out_kbps);
            assert!(w[1].cs_client_down_kbps >= w[0].cs_client_down_kbps);
        }
    }
}
