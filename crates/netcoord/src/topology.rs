//! Synthetic network topologies for core-selection studies (paper `001` §6.2, Fig. 5a).
//!
//! The paper generates "flat, undirected Waxman topologies" with BRITE on "a square world
//! with sides equal to 200 ms". We generate the same kind of graph ourselves: `n` nodes
//! uniformly in a `side × side` ms square; each pair `(u, v)` at Euclidean distance `δ` is
//! linked with the Waxman probability `α · exp(−δ / (β · L))`, `L = side · √2` the largest
//! possible distance; the link latency is `δ`. Components are then joined by their
//! closest pair of nodes until the graph is connected, and the latency between any two
//! nodes is the shortest-path length (Dijkstra from every node), returned as a
//! [`LatencyMatrix`].

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use worldmesh_core::{DetRng, LatencyMatrix};

/// Waxman generator parameters.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct WaxmanConfig {
    /// Nodes.
    pub nodes: usize,
    /// Side of the square world (ms).
    pub side_ms: f64,
    /// Waxman α (overall link density).
    pub alpha: f64,
    /// Waxman β (share of long links).
    pub beta: f64,
}

impl Default for WaxmanConfig {
    /// BRITE's Waxman defaults (α = 0.15, β = 0.2) in the paper's 200 ms square.
    fn default() -> Self {
        Self {
            nodes: 500,
            side_ms: 200.0,
            alpha: 0.15,
            beta: 0.2,
        }
    }
}

/// A generated topology: node positions, links and all-pairs shortest-path latencies.
#[derive(Clone, Debug)]
pub struct Topology {
    /// Node positions (ms).
    pub positions: Vec<(f64, f64)>,
    /// Undirected links `(u, v, latency_ms)`, `u < v`.
    pub links: Vec<(usize, usize, f64)>,
    /// Shortest-path latency between every pair (ms).
    pub latency: LatencyMatrix,
}

#[derive(PartialEq)]
struct Item(f64, usize);
impl Eq for Item {}
impl PartialOrd for Item {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Item {
    fn cmp(&self, other: &Self) -> Ordering {
        other.0.total_cmp(&self.0).then(other.1.cmp(&self.1))
    }
}

/// Generates a connected Waxman topology (see the module doc).
pub fn waxman(cfg: &WaxmanConfig, seed: u64) -> Topology {
    let n = cfg.nodes;
    let mut rng = DetRng::new(seed);
    let positions: Vec<(f64, f64)> = (0..n)
        .map(|_| (rng.range_f64(0.0, cfg.side_ms), rng.range_f64(0.0, cfg.side_ms)))
        .collect();
    let dist = |a: usize, b: usize| {
        ((positions[a].0 - positions[b].0).powi(2) + (positions[a].1 - positions[b].1).powi(2)).sqrt()
    };
    let l = cfg.side_ms * std::f64::consts::SQRT_2;
    let mut links = Vec::new();
    for u in 0..n {
        for v in (u + 1)..n {
            let p = cfg.alpha * (-dist(u, v) / (cfg.beta * l)).exp();
            if rng.chance(p) {
                links.push((u, v, dist(u, v)));
            }
        }
    }
    // Join components by their closest pair until connected.
    let mut comp: Vec<usize> = (0..n).collect();
    fn find(c: &mut [usize], x: usize) -> usize {
        let mut r = x;
        while c[r] != r {
            r = c[r];
        }
        let mut y = x;
        while c[y] != r {
            let next = c[y];
            c[y] = r;
            y = next;
        }
        r
    }
    for &(u, v, _) in &links {
        let (a, b) = (find(&mut comp, u), find(&mut comp, v));
        comp[a] = b;
    }
    loop {
        let root0 = if n > 0 { find(&mut comp, 0) } else { break };
        let outside: Vec<usize> = (0..n).filter(|&x| find(&mut comp, x) != root0).collect();
        if outside.is_empty() {
            break;
        }
        let inside: Vec<usize> = (0..n).filter(|&x| find(&mut comp, x) == root0).collect();
        let mut best = (f64::INFINITY, 0, 0);
        for &a in &inside {
            for &b in &outside {
                let d = dist(a, b);
                if d < best.0 {
                    best = (d, a, b);
                }
            }
        }
        let (d, a, b) = best;
        links.push((a.min(b), a.max(b), d));
        let (ra, rb) = (find(&mut comp, a), find(&mut comp, b));
        comp[rb] = ra;
    }
    let mut adj: Vec<Vec<(usize, f64)>> = vec![Vec::new(); n];
    for &(u, v, w) in &links {
        adj[u].push((v, w));
        adj[v].push((u, w));
    }
    let mut all = vec![f64::INFINITY; n * n];
    for s in 0..n {
        let row = &mut all[s * n..(s + 1) * n];
        row[s] = 0.0;
        let mut heap = BinaryHeap::new();
        heap.push(Item(0.0, s));
        while let Some(Item(d, u)) = heap.pop() {
            if d > row[u] {
                continue;
            }
            for &(v, w) in &adj[u] {
                let nd = d + w;
                if nd < row[v] {
                    row[v] = nd;
                    heap.push(Item(nd, v));
                }
            }
        }
    }
    let latency = LatencyMatrix::from_fn(n, |i, j| all[i * n + j] as f32);
    Topology {
        positions,
        links,
        latency,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connected_metric_and_deterministic() {
        let cfg = WaxmanConfig {
            nodes: 60,
            ..Default::default()
        };
        let t = waxman(&cfg, 5);
        let m = &t.latency;
        for i in 0..60 {
            for j in 0..60 {
                let d = f64::from(m.rtt_ms(i, j));
                assert!(d.is_finite(), "disconnected {i} {j}");
                assert_eq!(m.rtt_ms(i, j), m.rtt_ms(j, i));
                // Shortest paths are never shorter than the straight line.
                let (a, b) = (t.positions[i], t.positions[j]);
                let straight = ((a.0 - b.0).powi(2) + (a.1 - b.1).powi(2)).sqrt();
                assert!(d + 1e-3 >= straight, "{d} < {straight}");
            }
        }
        // Triangle inequality holds on shortest paths.
        for (i, j, k) in [(0, 1, 2), (3, 17, 40), (59, 8, 21)] {
            assert!(m.rtt_ms(i, k) <= m.rtt_ms(i, j) + m.rtt_ms(j, k) + 1e-3);
        }
        assert_eq!(waxman(&cfg, 5).latency, t.latency);
        assert!(t.links.len() >= 59);
    }
}
