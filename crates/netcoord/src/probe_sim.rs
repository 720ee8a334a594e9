//! A deterministic probing simulation that drives one [`VivaldiNode`] per host of an RTT
//! matrix, for measuring accuracy (paper `001` §6.3, Table 3: neighbour-set size, packet
//! rate, log time).
//!
//! Each host has a fixed *neighbour set* (some of its closest hosts by true RTT, the rest
//! random, as in Dabek et al. §5.5's "close and far neighbours"; `close_fraction = 0` is a
//! purely random set). Host `i` probes one random neighbour every `1 / probe_rate` seconds
//! of simulated time, at a random phase; the probe returns the true RTT at that time
//! (optionally inflated by a random spike, to exercise the latency filter) and the
//! neighbour's coordinate as it is *now* — it is piggybacked on the reply. Everything
//! random comes from one [`DetRng`]: same seed ⇒ same coordinates.
//!
//! The RTTs come from a [`LatencyModel`], either a static [`LatencyMatrix`] or a
//! [`DriftingMatrix`] whose links change over time (route changes), for re-convergence
//! studies.

use crate::coord::Coordinate;
use crate::vivaldi::{VivaldiConfig, VivaldiError, VivaldiNode};
use worldmesh_core::{DetRng, LatencyMatrix};

/// True RTT between hosts as a function of (simulated) time.
pub trait LatencyModel {
    /// Number of hosts.
    fn hosts(&self) -> usize;
    /// RTT (ms) from `i` to `j` at time `t_s` seconds.
    fn rtt_at(&self, i: usize, j: usize, t_s: f64) -> f64;
}

impl LatencyModel for LatencyMatrix {
    fn hosts(&self) -> usize {
        self.len()
    }
    fn rtt_at(&self, i: usize, j: usize, _t_s: f64) -> f64 {
        f64::from(self.rtt_ms(i, j))
    }
}

/// A period during which every link touching `hosts` is `extra_ms` slower (a route
/// change near those hosts).
#[derive(Clone, Debug, PartialEq)]
pub struct Drift {
    /// Affected hosts.
    pub hosts: Vec<usize>,
    /// Added RTT (ms) on each link with one end in `hosts` (added once even if both are).
    pub extra_ms: f64,
    /// Start (s, inclusive).
    pub from_s: f64,
    /// End (s, exclusive).
    pub until_s: f64,
}

/// A static matrix plus [`Drift`] periods: "a matrix that changes over time".
#[derive(Clone, Debug)]
pub struct DriftingMatrix {
    base: LatencyMatrix,
    drifts: Vec<Drift>,
    affected: Vec<Vec<bool>>,
}

impl DriftingMatrix {
    /// `base` changed by `drifts` (hosts out of range are ignored).
    pub fn new(base: LatencyMatrix, drifts: Vec<Drift>) -> Self {
        let n = base.len();
        let affected = drifts
            .iter()
            .map(|d| {
                let mut v = vec![false; n];
                for &h in &d.hosts {
                    if h < n {
                        v[h] = true;
                    }
                }
                v
            })
            .collect();
        Self {
            base,
            drifts,
            affected,
        }
    }
}

impl LatencyModel for DriftingMatrix {
    fn hosts(&self) -> usize {
        self.base.len()
    }
    fn rtt_at(&self, i: usize, j: usize, t_s: f64) -> f64 {
        let mut rtt = f64::from(self.base.rtt_ms(i, j));
        if i != j {
            for (d, aff) in self.drifts.iter().zip(&self.affected) {
                if t_s >= d.from_s && t_s < d.until_s && (aff[i] || aff[j]) {
                    rtt += d.extra_ms;
                }
            }
        }
        rtt
    }
}

/// How hosts probe.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct ProbeConfig {
    /// Neighbour-set size per host (capped at `hosts − 1`).
    pub neighbours: usize,
    /// Fraction of the neighbour set taken among the host's closest hosts.
    pub close_fraction: f64,
    /// Probes per second per host (the packet rate).
    pub probe_rate: f64,
    /// Probability that a sample is inflated by a spike.
    pub spike_prob: f64,
    /// Mean relative size of a spike (sample × (1 + Exp(mean))).
    pub spike_mean: f64,
}

impl Default for ProbeConfig {
    fn default() -> Self {
        Self {
            neighbours: 32,
            close_fraction: 0.5,
            probe_rate: 1.0,
            spike_prob: 0.0,
            spike_mean: 0.0,
        }
    }
}

/// The simulation state: one Vivaldi node per host and the probing schedule.
#[derive(Clone, Debug)]
pub struct ProbeSim {
    nodes: Vec<VivaldiNode<usize>>,
    neighbours: Vec<Vec<usize>>,
    order: Vec<usize>,
    phase: Vec<f64>,
    cfg: ProbeConfig,
    rng: DetRng,
    round: u64,
    pos: usize,
    now_s: f64,
    probes: u64,
    rejected: u64,
}

impl ProbeSim {
    /// A simulation over `model`'s hosts, neighbour sets chosen with the RTTs at time 0.
    pub fn new(
        model: &dyn LatencyModel,
        vivaldi: VivaldiConfig,
        cfg: ProbeConfig,
        seed: u64,
    ) -> Result<Self, VivaldiError> {
        let n = model.hosts();
        if !(cfg.probe_rate.is_finite() && cfg.probe_rate > 0.0) {
            return Err(VivaldiError::BadConfig("probe_rate must be > 0"));
        }
        if cfg.neighbours == 0 {
            return Err(VivaldiError::BadConfig("neighbours must be >= 1"));
        }
        if !(cfg.spike_prob.is_finite() && cfg.spike_mean.is_finite() && cfg.spike_mean >= 0.0) {
            return Err(VivaldiError::BadConfig(
                "spike_prob and spike_mean must be finite, spike_mean >= 0",
            ));
        }
        let root = DetRng::new(seed);
        let mut rng = root.fork(1);
        let nodes = (0..n)
            .map(|i| VivaldiNode::new(vivaldi, root.fork(1000 + i as u64).next_u64()))
            .collect::<Result<Vec<_>, _>>()?;
        let k = cfg.neighbours.min(n.saturating_sub(1));
        let close = ((k as f64) * cfg.close_fraction.clamp(0.0, 1.0)).round() as usize;
        let mut neighbours = Vec::with_capacity(n);
        for i in 0..n {
            let mut others: Vec<usize> = (0..n).filter(|&j| j != i).collect();
            others.sort_by(|&a, &b| {
                model
                    .rtt_at(i, a, 0.0)
                    .total_cmp(&model.rtt_at(i, b, 0.0))
                    .then(a.cmp(&b))
            });
            let mut set: Vec<usize> = others[..close].to_vec();
            let mut rest = others[close..].to_vec();
            rng.shuffle(&mut rest);
            set.extend_from_slice(&rest[..k - close]);
            neighbours.push(set);
        }
        let phase: Vec<f64> = (0..n).map(|_| rng.next_f64() / cfg.probe_rate).collect();
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| phase[a].total_cmp(&phase[b]));
        Ok(Self {
            nodes,
            neighbours,
            order,
            phase,
            cfg,
            rng,
            round: 0,
            pos: 0,
            now_s: 0.0,
            probes: 0,
            rejected: 0,
        })
    }

    /// Simulated time reached (s).
    pub fn now_s(&self) -> f64 {
        self.now_s
    }

    /// Probes sent so far (all hosts).
    pub fn probes(&self) -> u64 {
        self.probes
    }

    /// Samples the Vivaldi nodes rejected (should stay 0 on a valid matrix).
    pub fn rejected(&self) -> u64 {
        self.rejected
    }

    /// Total NaN/Inf resets over all nodes.
    pub fn resets(&self) -> u64 {
        self.nodes.iter().map(VivaldiNode::resets).sum()
    }

    /// The hosts' Vivaldi nodes.
    pub fn nodes(&self) -> &[VivaldiNode<usize>] {
        &self.nodes
    }

    /// Host `i`'s neighbour set.
    pub fn neighbour_set(&self, i: usize) -> &[usize] {
        &self.neighbours[i]
    }

    /// Current coordinates of all hosts.
    pub fn coordinates(&self) -> Vec<Coordinate> {
        self.nodes.iter().map(|n| *n.coordinate()).collect()
    }

    /// Runs every probe scheduled before `t_s` seconds.
    pub fn run_until(&mut self, model: &dyn LatencyModel, t_s: f64) {
        let period = 1.0 / self.cfg.probe_rate;
        let n = self.nodes.len();
        if n < 2 {
            self.now_s = self.now_s.max(t_s);
            return;
        }
        loop {
            let i = self.order[self.pos];
            let t = self.round as f64 * period + self.phase[i];
            if t >= t_s {
                break;
            }
            self.now_s = t;
            let set = &self.neighbours[i];
            let j = set[self.rng.index(set.len())];
            let mut rtt = model.rtt_at(i, j, t);
            if self.cfg.spike_prob > 0.0 && self.rng.chance(self.cfg.spike_prob) {
                rtt *= 1.0 + self.rng.exponential(self.cfg.spike_mean);
            }
            let remote = *self.nodes[j].coordinate();
            self.probes += 1;
            if self.nodes[i].observe(j, &remote, rtt).is_err() {
                self.rejected += 1;
            }
            self.pos += 1;
            if self.pos == n {
                self.pos = 0;
                self.round += 1;
            }
        }
        self.now_s = t_s;
    }
}

/// Estimated RTT matrix function from coordinates (`est(i, j)` in ms; `NaN` if the
/// coordinates disagree on dimensions, which cannot happen for one simulation).
pub fn estimate(coords: &[Coordinate]) -> impl Fn(usize, usize) -> f64 + '_ {
    |i, j| coords[i].distance_ms(&coords[j]).unwrap_or(f64::NAN)
}
