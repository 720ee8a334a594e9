//! The system model of paper `003` §3.1: a Central Area (cluster of `N` homogeneous servers
//! with capacity `max_S_load`), the Main Game map split into rectangular regions (one per
//! server), auxiliary games ("instances") of sizes 5–40, and player latencies.

use serde::{Deserialize, Serialize};

/// Index of a server of the Central Area (0-based; the paper's `S_{i+1}`).
pub type ServerIdx = usize;

/// Share of `max_S_load` from which a server counts as near stress (our reading of §5.1's
/// "near the stress situation": within 5 % of the capacity).
pub const STRESS_FRACTION: f64 = 0.95;

/// Configuration of the Central Area (paper `003` §3.1, §5).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClusterConfig {
    /// Number of servers `N` (§5: 10).
    pub servers: usize,
    /// Capacity of each server in concurrent players, `max_S_load` (§5: 5,500).
    pub max_s_load: u32,
    /// Extra share of `max_S_load` shed on top of `extra_S_players` (§3.2, Algorithm 1:
    /// 10 %), so that balancing runs less often.
    pub extra_fraction: f64,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            servers: 10,
            max_s_load: 5_500,
            extra_fraction: 0.10,
        }
    }
}

impl ClusterConfig {
    /// `10 % · max_S_load`, rounded up (550 for the paper's cluster).
    pub fn margin(&self) -> u32 {
        (self.extra_fraction.max(0.0) * f64::from(self.max_s_load)).ceil() as u32
    }

    /// Load an overloaded server is brought down to by Algorithm 1:
    /// `max_S_load − 10 % · max_S_load` (4,950 in §5.2).
    pub fn target_load(&self) -> u32 {
        self.max_s_load.saturating_sub(self.margin())
    }

    /// Lowest load counted as *near stress* (§5.1: Classic "lets more servers near the
    /// stress situation"): [`STRESS_FRACTION`] of `max_S_load`, rounded up (5,225 for the
    /// paper's cluster). The simulation's near-stress metric and Algorithm 1's choice of
    /// receivers use this same line.
    pub fn stress_load(&self) -> u32 {
        (STRESS_FRACTION * f64::from(self.max_s_load)).ceil() as u32
    }

    /// Total capacity of the Central Area, `N · max_S_load`.
    pub fn capacity(&self) -> u64 {
        self.servers as u64 * u64::from(self.max_s_load)
    }
}

/// The instance sizes of §5 (from World of Warcraft) and their shares of all instances.
///
/// **Chosen values.** The paper's Table 3 (the shares) is missing from the text. We use
/// 40 % / 25 % / 15 % / 12 % / 8 % for sizes 5 / 10 / 20 / 25 / 40: small groups are the
/// most common kind of instance, raids the rarest. Mean size 13.7 players.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InstanceMix {
    /// `(size, share)`; shares sum to 1.
    pub kinds: Vec<(u32, f64)>,
}

impl Default for InstanceMix {
    fn default() -> Self {
        Self {
            kinds: vec![(5, 0.40), (10, 0.25), (20, 0.15), (25, 0.12), (40, 0.08)],
        }
    }
}

impl InstanceMix {
    /// Mean instance size.
    pub fn mean_size(&self) -> f64 {
        let total: f64 = self.kinds.iter().map(|k| k.1).sum();
        self.kinds.iter().map(|&(s, p)| f64::from(s) * p).sum::<f64>() / total
    }

    /// The size picked by a uniform draw `u ∈ [0, 1)`.
    pub fn pick(&self, u: f64) -> u32 {
        let total: f64 = self.kinds.iter().map(|k| k.1).sum();
        let mut acc = 0.0;
        for &(s, p) in &self.kinds {
            acc += p / total;
            if u < acc {
                return s;
            }
        }
        self.kinds.last().map_or(5, |k| k.0)
    }
}

/// The Main Game map (§5: 1,000 × 1,000) split into a `cols × rows` grid of rectangular
/// regions, region `r` managed by server `r` (§5: "each rectangular region was managed by a
/// single server").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RegionGrid {
    /// Map width.
    pub width: f64,
    /// Map height.
    pub height: f64,
    /// Regions across.
    pub cols: usize,
    /// Regions down.
    pub rows: usize,
}

impl RegionGrid {
    /// The paper's map for 10 servers: 1,000 × 1,000 in 5 × 2 regions of 200 × 500.
    pub fn paper() -> Self {
        Self {
            width: 1000.0,
            height: 1000.0,
            cols: 5,
            rows: 2,
        }
    }

    /// Number of regions (= servers).
    pub fn len(&self) -> usize {
        self.cols * self.rows
    }

    /// True when the grid has no region.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The server managing position `(x, y)` (positions outside the map are clamped).
    pub fn region_of(&self, x: f64, y: f64) -> ServerIdx {
        let cx =
            ((x / self.width * self.cols as f64).floor().max(0.0) as usize).min(self.cols.saturating_sub(1));
        let cy =
            ((y / self.height * self.rows as f64).floor().max(0.0) as usize).min(self.rows.saturating_sub(1));
        cy * self.cols + cx
    }

    /// Regions sharing an edge with `r` (the neighbourhood Bezerra's method grows its
    /// balancing group through, §2).
    pub fn neighbors(&self, r: ServerIdx) -> Vec<ServerIdx> {
        let (cx, cy) = (r % self.cols, r / self.cols);
        let mut out = Vec::with_capacity(4);
        if cx > 0 {
            out.push(r - 1);
        }
        if cx + 1 < self.cols {
            out.push(r + 1);
        }
        if cy > 0 {
            out.push(r - self.cols);
        }
        if cy + 1 < self.rows {
            out.push(r + self.cols);
        }
        out
    }
}

/// A player's network position in the 2-D latency space of §5: coordinates in
/// `[−1000, 1000]²`, latency between two points = Euclidean distance in milliseconds
/// (the "triangulated heuristic" based on relative coordinates, ref. 14).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct NetCoord {
    /// x in `[−1000, 1000]`.
    pub x: f64,
    /// y in `[−1000, 1000]`.
    pub y: f64,
}

impl NetCoord {
    /// Latency to `other` in ms.
    pub fn latency_ms(&self, other: &NetCoord) -> f64 {
        ((self.x - other.x).powi(2) + (self.y - other.y).powi(2)).sqrt()
    }
}

/// Where players' latencies come from (§5 uses 2-D coordinates; worldmesh also accepts a
/// measured round-trip matrix such as the shipped PlanetLab one).
#[derive(Clone, Debug)]
pub enum LatencySource {
    /// Players at points of the `[−1000, 1000]²` plane; latency = distance in ms.
    Plane(Vec<NetCoord>),
    /// Player `i` sits on host `hosts[i]` of `matrix`; latency = round-trip time in ms.
    Matrix {
        /// The matrix.
        matrix: worldmesh_core::LatencyMatrix,
        /// Host of each player.
        hosts: Vec<usize>,
    },
}

impl LatencySource {
    /// Number of players.
    pub fn len(&self) -> usize {
        match self {
            LatencySource::Plane(p) => p.len(),
            LatencySource::Matrix { hosts, .. } => hosts.len(),
        }
    }

    /// True when there is no player.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Latency between players `i` and `j` in ms (0 for out-of-range players).
    pub fn latency_ms(&self, i: usize, j: usize) -> f64 {
        match self {
            LatencySource::Plane(p) => match (p.get(i), p.get(j)) {
                (Some(a), Some(b)) => a.latency_ms(b),
                _ => 0.0,
            },
            LatencySource::Matrix { matrix, hosts } => match (hosts.get(i), hosts.get(j)) {
                (Some(&a), Some(&b)) if a < matrix.len() && b < matrix.len() => {
                    f64::from(matrix.rtt_ms(a, b))
                }
                _ => 0.0,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_numbers() {
        let c = ClusterConfig::default();
        assert_eq!(c.margin(), 550);
        assert_eq!(c.target_load(), 4_950);
        assert_eq!(c.capacity(), 55_000);
    }

    #[test]
    fn regions_cover_the_map() {
        let g = RegionGrid::paper();
        assert_eq!(g.region_of(0.0, 0.0), 0);
        assert_eq!(g.region_of(999.9, 999.9), 9);
        assert_eq!(g.region_of(250.0, 100.0), 1);
        assert_eq!(g.region_of(-5.0, 2000.0), 5);
        assert_eq!(g.neighbors(0), vec![1, 5]);
        assert_eq!(g.neighbors(7), vec![6, 8, 2]);
    }

    #[test]
    fn latency_sources() {
        let plane = LatencySource::Plane(vec![NetCoord { x: 0.0, y: 0.0 }, NetCoord { x: 300.0, y: 400.0 }]);
        assert_eq!(plane.latency_ms(0, 1), 500.0);
        let m = worldmesh_core::LatencyMatrix::from_fn(3, |i, j| (i * 10 + j) as f32);
        let src = LatencySource::Matrix {
            matrix: m,
            hosts: vec![2, 0],
        };
        assert_eq!(src.latency_ms(0, 1), 20.0);
        assert_eq!(src.latency_ms(0, 7), 0.0);
        assert_eq!(src.len(), 2);
    }

    #[test]
    fn mix_picks_by_share() {
        let m = InstanceMix::default();
        assert_eq!(m.pick(0.0), 5);
        assert_eq!(m.pick(0.39), 5);
        assert_eq!(m.pick(0.41), 10);
        assert_eq!(m.pick(0.999), 40);
        assert!((m.mean_size() - 13.7).abs() < 1e-9);
    }
}
