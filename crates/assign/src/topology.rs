//! BRITE-like Internet topologies for the experiments of paper `002` §4.
//!
//! The paper used the BRITE generator: 5000 nodes as 50 autonomous systems (AS) joined by a
//! Barabási–Albert model, 100 routers per AS joined by a Waxman model, every link delay
//! uniform in `[0, 25]` ms, and player-to-mirror delays as shortest paths. This module
//! rebuilds that recipe from its description (it is not BRITE's code):
//!
//! - **AS level, Barabási–Albert**: the first `ba_links + 1` ASes form a clique; each later
//!   AS links to `ba_links` distinct earlier ASes chosen with probability proportional to
//!   their degree. Each AS-level link joins one random router of each AS.
//! - **Router level, Waxman**: routers are placed uniformly on a `plane × plane` square;
//!   each router after the first links to `min(k, waxman_links)` distinct earlier routers of
//!   its AS, chosen with probability `α·exp(−dist / (β·L))`, `L` the square's diagonal
//!   (incremental growth, as BRITE does, which keeps every AS connected).
//! - **Delays**: every link's delay is uniform in `[0, max_link_delay_ms]`, independent of
//!   the geometry, as in the paper.
//!
//! Only shortest paths from the nodes actually used are computed (Dijkstra from each mirror
//! — delays are symmetric, §2.1), never all pairs.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use worldmesh_core::DetRng;

/// Parameters of [`brite_like`]; [`Default`] gives the paper's §4 values.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BriteParams {
    /// Number of autonomous systems (paper: 50).
    pub as_count: usize,
    /// Routers per AS (paper: 100).
    pub nodes_per_as: usize,
    /// Links per new AS in the Barabási–Albert model (BRITE's default, 2).
    pub ba_links: usize,
    /// Links per new router in the Waxman model (BRITE's default, 2).
    pub waxman_links: usize,
    /// Waxman `α` (BRITE's default, 0.15).
    pub waxman_alpha: f64,
    /// Waxman `β` (BRITE's default, 0.2).
    pub waxman_beta: f64,
    /// Side of the square routers are placed on (BRITE's default inner plane, 100).
    pub plane: f64,
    /// Link delays are uniform in `[0, max_link_delay_ms]` (paper: 25 ms).
    pub max_link_delay_ms: f64,
}

impl Default for BriteParams {
    fn default() -> Self {
        Self {
            as_count: 50,
            nodes_per_as: 100,
            ba_links: 2,
            waxman_links: 2,
            waxman_alpha: 0.15,
            waxman_beta: 0.2,
            plane: 100.0,
            max_link_delay_ms: 25.0,
        }
    }
}

/// An undirected graph with link delays in ms.
#[derive(Clone, Debug, Default)]
pub struct Graph {
    adj: Vec<Vec<(u32, f64)>>,
}

impl Graph {
    /// A graph of `n` isolated nodes.
    pub fn new(n: usize) -> Self {
        Self {
            adj: vec![Vec::new(); n],
        }
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.adj.len()
    }

    /// True when there are no nodes.
    pub fn is_empty(&self) -> bool {
        self.adj.is_empty()
    }

    /// Number of undirected links.
    pub fn links(&self) -> usize {
        self.adj.iter().map(Vec::len).sum::<usize>() / 2
    }

    /// Adds an undirected link of delay `ms` (ignored if `a == b`).
    pub fn link(&mut self, a: usize, b: usize, ms: f64) {
        if a != b {
            self.adj[a].push((b as u32, ms));
            self.adj[b].push((a as u32, ms));
        }
    }

    /// Shortest-path delays from `src` to every node (Dijkstra; `f64::INFINITY` if
    /// unreachable).
    pub fn shortest_from(&self, src: usize) -> Vec<f64> {
        let mut dist = vec![f64::INFINITY; self.len()];
        dist[src] = 0.0;
        // Non-negative f64 order equals the order of their bit patterns.
        let mut heap = BinaryHeap::new();
        heap.push(Reverse((0f64.to_bits(), src as u32)));
        while let Some(Reverse((bits, u))) = heap.pop() {
            let d = f64::from_bits(bits);
            if d > dist[u as usize] {
                continue;
            }
            for &(v, w) in &self.adj[u as usize] {
                let nd = d + w;
                if nd < dist[v as usize] {
                    dist[v as usize] = nd;
                    heap.push(Reverse((nd.to_bits(), v)));
                }
            }
        }
        dist
    }

    /// Row-major `players.len() × mirrors.len()` delays (ms): shortest paths from each
    /// mirror, read at each player's node.
    pub fn delay_rows(&self, players: &[usize], mirrors: &[usize]) -> Vec<f64> {
        let m = mirrors.len();
        let mut rows = vec![0.0; players.len() * m];
        for (j, &mn) in mirrors.iter().enumerate() {
            let d = self.shortest_from(mn);
            for (p, &pn) in players.iter().enumerate() {
                rows[p * m + j] = d[pn];
            }
        }
        rows
    }
}

/// Picks an index with probability proportional to `weights` (all ≥ 0, some > 0).
fn weighted(rng: &mut DetRng, weights: &[f64]) -> usize {
    let total: f64 = weights.iter().sum();
    let mut x = rng.next_f64() * total;
    for (i, &w) in weights.iter().enumerate() {
        if x < w {
            return i;
        }
        x -= w;
    }
    weights.iter().rposition(|&w| w > 0.0).unwrap_or(0)
}

/// Generates a BRITE-like two-level topology (see the module docs). Node `a·nodes_per_as + r`
/// is router `r` of AS `a`. Deterministic in `rng`.
pub fn brite_like(p: &BriteParams, rng: &mut DetRng) -> Graph {
    let per = p.nodes_per_as.max(1);
    let ases = p.as_count.max(1);
    let mut g = Graph::new(ases * per);
    let delay = |rng: &mut DetRng| rng.range_f64(0.0, p.max_link_delay_ms);
    let diag = p.plane * std::f64::consts::SQRT_2;
    // Router level (Waxman, incremental) inside each AS.
    for a in 0..ases {
        let pos: Vec<(f64, f64)> = (0..per)
            .map(|_| (rng.range_f64(0.0, p.plane), rng.range_f64(0.0, p.plane)))
            .collect();
        for k in 1..per {
            let mut w: Vec<f64> = (0..k)
                .map(|i| {
                    let d = ((pos[k].0 - pos[i].0).powi(2) + (pos[k].1 - pos[i].1).powi(2)).sqrt();
                    p.waxman_alpha * (-d / (p.waxman_beta * diag)).exp()
                })
                .collect();
            for _ in 0..p.waxman_links.max(1).min(k) {
                let i = weighted(rng, &w);
                w[i] = 0.0;
                let ms = delay(rng);
                g.link(a * per + k, a * per + i, ms);
            }
        }
    }
    // AS level (Barabási–Albert).
    let m0 = (p.ba_links.max(1) + 1).min(ases);
    let mut degree = vec![0f64; ases];
    let as_link = |g: &mut Graph, rng: &mut DetRng, x: usize, y: usize| {
        let (rx, ry) = (rng.index(per), rng.index(per));
        let ms = rng.range_f64(0.0, p.max_link_delay_ms);
        g.link(x * per + rx, y * per + ry, ms);
    };
    for x in 0..m0 {
        for y in 0..x {
            as_link(&mut g, rng, x, y);
            degree[x] += 1.0;
            degree[y] += 1.0;
        }
    }
    for x in m0..ases {
        let mut w: Vec<f64> = degree[..x].to_vec();
        let mut chosen = Vec::new();
        for _ in 0..p.ba_links.max(1).min(x) {
            let y = weighted(rng, &w);
            w[y] = 0.0;
            chosen.push(y);
        }
        for y in chosen {
            as_link(&mut g, rng, x, y);
            degree[x] += 1.0;
            degree[y] += 1.0;
        }
    }
    g
}

/// Picks `mirrors` distinct random nodes of `g` as mirrors and `players` random nodes as
/// players (paper `002` §4: "clients and mirrors are randomly selected from the 5000
/// nodes"): distinct from each other and from the mirrors while the graph has enough nodes,
/// with repetition beyond that (e.g. 100,000 players on 5000 nodes). Returns the row-major
/// `players × mirrors` delay table in ms.
pub fn sample_delays(g: &Graph, players: usize, mirrors: usize, rng: &mut DetRng) -> Vec<f64> {
    let mut nodes: Vec<usize> = (0..g.len()).collect();
    rng.shuffle(&mut nodes);
    let mirrors = mirrors.min(nodes.len());
    let mirror_nodes: Vec<usize> = nodes[..mirrors].to_vec();
    let rest = &nodes[mirrors..];
    let player_nodes: Vec<usize> = if players <= rest.len() {
        rest[..players].to_vec()
    } else {
        (0..players).map(|_| rest[rng.index(rest.len().max(1))]).collect()
    };
    g.delay_rows(&player_nodes, &mirror_nodes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_sized_topology_is_connected_and_delays_are_shortest_paths() {
        let p = BriteParams::default();
        let g = brite_like(&p, &mut DetRng::new(3));
        assert_eq!(g.len(), 5000);
        // Waxman growth: 2 links per router after the second (1 for the second); BA: 3 + 2·47.
        assert_eq!(g.links(), 50 * (1 + 2 * 98) + 3 + 2 * 47);
        let d = g.shortest_from(0);
        assert!(d.iter().all(|x| x.is_finite()), "every node reachable");
        // symmetric: d(0, k) == d(k, 0)
        let back = g.shortest_from(4321);
        assert!((back[0] - d[4321]).abs() < 1e-9);
        // triangle inequality through node 17
        let via = g.shortest_from(17);
        assert!(d[4321] <= d[17] + via[4321] + 1e-9);
    }

    #[test]
    fn sampled_players_and_mirrors_are_distinct_nodes() {
        let p = BriteParams {
            as_count: 3,
            nodes_per_as: 10,
            ..BriteParams::default()
        };
        let g = brite_like(&p, &mut DetRng::new(1));
        let rows = sample_delays(&g, 25, 5, &mut DetRng::new(2));
        assert_eq!(rows.len(), 125);
        // no player sits on a mirror node (delay 0 only via a 0-delay link, which has
        // probability 0 for continuous uniform delays)
        assert!(rows.iter().all(|&d| d > 0.0 && d.is_finite()));
        // more players than nodes: repetition, still the right shape
        assert_eq!(sample_delays(&g, 100, 5, &mut DetRng::new(2)).len(), 500);
    }

    #[test]
    fn same_seed_same_topology() {
        let p = BriteParams {
            as_count: 5,
            nodes_per_as: 20,
            ..BriteParams::default()
        };
        let a = brite_like(&p, &mut DetRng::new(9)).delay_rows(&[1, 50, 99], &[0, 70]);
        let b = brite_like(&p, &mut DetRng::new(9)).delay_rows(&[1, 50, 99], &[0, 70]);
        assert_eq!(a, b);
        assert_eq!(a[0], brite_like(&p, &mut DetRng::new(9)).shortest_from(0)[1]);
    }
}
