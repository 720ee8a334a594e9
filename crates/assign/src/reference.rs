//! A from-scratch optimal solver: min-cost flow by successive shortest paths on the full
//! bipartite graph (paper `002` §2.2 as a transportation problem). It is the test oracle
//! for J-SA/L-SA and the "full re-solve" baseline of the `cma-speed` experiment.
//!
//! Deliberately plain: an explicit arc list with `i64` costs (integer microseconds, so no
//! rounding and no `i32` overflow), Dijkstra with Johnson potentials (all initial costs are
//! non-negative delays, so zero potentials are feasible to start with), one unit of flow per
//! augmentation. `O(n)` augmentations of `O((n·m) log(n·m))` each.

use crate::Micros;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

#[derive(Clone, Copy, Debug)]
struct Arc {
    to: usize,
    cap: i64,
    cost: i64,
}

/// A min-cost-flow network with integer costs.
#[derive(Clone, Debug, Default)]
pub struct MinCostFlow {
    arcs: Vec<Arc>,
    adj: Vec<Vec<usize>>,
}

impl MinCostFlow {
    /// A network with `nodes` nodes and no arcs.
    pub fn new(nodes: usize) -> Self {
        Self {
            arcs: Vec::new(),
            adj: vec![Vec::new(); nodes],
        }
    }

    /// Adds an arc `from → to` with capacity `cap ≥ 0` and cost `cost ≥ 0`; returns its id.
    pub fn add_arc(&mut self, from: usize, to: usize, cap: i64, cost: i64) -> usize {
        let id = self.arcs.len();
        self.arcs.push(Arc { to, cap, cost });
        self.adj[from].push(id);
        self.arcs.push(Arc {
            to: from,
            cap: 0,
            cost: -cost,
        });
        self.adj[to].push(id + 1);
        id
    }

    /// Flow currently on arc `id` (as returned by [`MinCostFlow::add_arc`]).
    pub fn flow_on(&self, id: usize) -> i64 {
        self.arcs[id ^ 1].cap
    }

    /// Sends up to `limit` units from `s` to `t` at minimum cost; returns (flow, cost).
    pub fn run(&mut self, s: usize, t: usize, limit: i64) -> (i64, i64) {
        let n = self.adj.len();
        let mut pot = vec![0i64; n];
        let (mut flow, mut cost) = (0i64, 0i64);
        let mut dist = vec![i64::MAX; n];
        let mut via = vec![usize::MAX; n];
        while flow < limit {
            dist.fill(i64::MAX);
            via.fill(usize::MAX);
            dist[s] = 0;
            let mut heap = BinaryHeap::new();
            heap.push(Reverse((0i64, s)));
            while let Some(Reverse((d, u))) = heap.pop() {
                if d > dist[u] {
                    continue;
                }
                for &a in &self.adj[u] {
                    let arc = self.arcs[a];
                    if arc.cap <= 0 {
                        continue;
                    }
                    let nd = d + arc.cost + pot[u] - pot[arc.to];
                    if nd < dist[arc.to] {
                        dist[arc.to] = nd;
                        via[arc.to] = a;
                        heap.push(Reverse((nd, arc.to)));
                    }
                }
            }
            if dist[t] == i64::MAX {
                break;
            }
            for v in 0..n {
                if dist[v] != i64::MAX {
                    pot[v] += dist[v];
                }
            }
            // bottleneck along the path
            let mut push = limit - flow;
            let mut v = t;
            while v != s {
                let a = via[v];
                push = push.min(self.arcs[a].cap);
                v = self.arcs[a ^ 1].to;
            }
            let mut v = t;
            while v != s {
                let a = via[v];
                self.arcs[a].cap -= push;
                self.arcs[a ^ 1].cap += push;
                cost += push * self.arcs[a].cost;
                v = self.arcs[a ^ 1].to;
            }
            flow += push;
        }
        (flow, cost)
    }
}

/// Minimum total delay (µs) and one optimal mirror per player for `rows` (row-major
/// `n × m` delays in µs) and capacities `caps`; `None` if the players do not fit.
pub fn optimal_assignment(rows: &[Micros], caps: &[u32]) -> Option<(Micros, Vec<usize>)> {
    let m = caps.len();
    if m == 0 {
        return if rows.is_empty() {
            Some((0, Vec::new()))
        } else {
            None
        };
    }
    let n = rows.len() / m;
    // nodes: 0 = s, 1..=n players, n+1..=n+m mirrors, n+m+1 = t
    let (s, t) = (0, n + m + 1);
    let mut g = MinCostFlow::new(n + m + 2);
    let mut player_arcs = Vec::with_capacity(n * m);
    for p in 0..n {
        g.add_arc(s, 1 + p, 1, 0);
        for j in 0..m {
            player_arcs.push(g.add_arc(1 + p, n + 1 + j, 1, rows[p * m + j]));
        }
    }
    for (j, &c) in caps.iter().enumerate() {
        g.add_arc(n + 1 + j, t, i64::from(c), 0);
    }
    let (flow, cost) = g.run(s, t, n as i64);
    if flow < n as i64 {
        return None;
    }
    let mirrors = (0..n)
        .map(|p| {
            (0..m)
                .find(|&j| g.flow_on(player_arcs[p * m + j]) > 0)
                .unwrap_or(usize::MAX)
        })
        .collect();
    Some((cost, mirrors))
}

#[cfg(test)]
mod tests {
    use super::*;
    use worldmesh_core::DetRng;

    /// Exhaustive search over all `m^n` assignments (tiny instances only).
    fn exhaustive(rows: &[Micros], caps: &[u32]) -> Option<Micros> {
        let m = caps.len();
        let n = rows.len() / m;
        let mut best: Option<Micros> = None;
        let mut choice = vec![0usize; n];
        loop {
            let mut load = vec![0u32; m];
            for &c in &choice {
                load[c] += 1;
            }
            if load.iter().zip(caps).all(|(l, c)| l <= c) {
                let total: Micros = choice.iter().enumerate().map(|(p, &j)| rows[p * m + j]).sum();
                best = Some(best.map_or(total, |b: Micros| b.min(total)));
            }
            // next choice vector (odometer)
            let mut k = 0;
            loop {
                if k == n {
                    return best;
                }
                choice[k] += 1;
                if choice[k] < m {
                    break;
                }
                choice[k] = 0;
                k += 1;
            }
        }
    }

    #[test]
    fn matches_exhaustive_search_on_tiny_instances() {
        let mut rng = DetRng::new(7);
        for _ in 0..300 {
            let m = 1 + rng.index(3);
            let n = rng.index(7);
            let caps: Vec<u32> = (0..m).map(|_| rng.below(4) as u32).collect();
            let rows: Vec<Micros> = (0..n * m).map(|_| rng.below(50) as Micros).collect();
            let got = optimal_assignment(&rows, &caps);
            assert_eq!(
                got.as_ref().map(|g| g.0),
                exhaustive(&rows, &caps),
                "rows {rows:?} caps {caps:?}"
            );
            if let Some((total, mirrors)) = got {
                let sum: Micros = mirrors.iter().enumerate().map(|(p, &j)| rows[p * m + j]).sum();
                assert_eq!(sum, total);
                for (j, &c) in caps.iter().enumerate() {
                    assert!(mirrors.iter().filter(|&&x| x == j).count() <= c as usize);
                }
            }
        }
    }

    #[test]
    fn large_costs_do_not_overflow() {
        // 3 players × 10^7 ms = 3·10^10 µs > i32::MAX
        let big = 10_000_000_000;
        let rows = vec![big, big + 1, big, big + 1, big, big + 1];
        let (total, _) = optimal_assignment(&rows, &[2, 2]).expect("fits");
        assert_eq!(total, 3 * big + 1);
    }
}
