//! How good are cores chosen with *estimated* latencies? (paper `001` §6.3.2, Fig. 7
//! and 8).
//!
//! For one member group we build two [`CostTable`]s over the same candidates and members:
//! one from the true (measured) matrix, one from the estimates (Vivaldi or landmarks).
//! A core chosen on the estimates is then judged with the *true* latencies:
//!
//! - **hit**: the estimated choice is the true optimum (Fig. 7a's hit ratio);
//! - **cost gap** (ms): true objective of the estimated choice minus the true optimum,
//!   per member for k-median (difference of mean member latency) and as is for k-center
//!   (difference of eccentricity) — "how much worse do players fare";
//! - **core distance** (ms): the true latency between the estimated core and the optimal
//!   core — our reading of Fig. 7b's "core-node error in terms of latency between the
//!   core-nodes found using latency estimates and the (optimal) core-nodes";
//! - **eccentricity error** (Fig. 8): directed relative error of the eccentricity the
//!   estimates *report* for the chosen core against its real eccentricity,
//!   `(ecc_est − ecc_true) / ecc_true`.
//!
//! [`ranked`] covers Fig. 7's "k-Median, 1 < k ≤ 25": with §4.1's literal ranking (the k
//! best single cores), a hit at k means the true best core is among the estimated top k,
//! and the min/max core distance are taken over those k cores.

use crate::core_select::{CoreError, CostTable, Objective, rank};

/// Judgement of one group's single core (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct GroupEval {
    /// Best core with true latencies.
    pub true_core: usize,
    /// Best core with estimated latencies.
    pub est_core: usize,
    /// Same core.
    pub hit: bool,
    /// True objective of the estimated core minus the optimum (ms; per member for
    /// k-median).
    pub cost_gap_ms: f64,
    /// True latency between the estimated and the optimal core (ms).
    pub core_distance_ms: f64,
    /// Eccentricity of the estimated core as the estimates report it (ms).
    pub ecc_reported_ms: f64,
    /// Its real eccentricity (ms).
    pub ecc_true_ms: f64,
}

impl GroupEval {
    /// Directed relative eccentricity error `(reported − true) / true` (NaN if true is 0).
    pub fn ecc_directed_error(&self) -> f64 {
        if self.ecc_true_ms > 0.0 {
            (self.ecc_reported_ms - self.ecc_true_ms) / self.ecc_true_ms
        } else {
            f64::NAN
        }
    }
}

fn row_of(table: &CostTable, node: usize) -> &[f64] {
    let idx = table.candidates().iter().position(|&c| c == node).unwrap_or(0);
    table.row(idx)
}

fn max_of(v: &[f64]) -> f64 {
    v.iter().copied().fold(0.0, f64::max)
}

/// Judges the single best core for one group; `truth` and `est` must cover the same
/// candidates and members, and `truth_d` gives true latencies between candidates.
pub fn evaluate_group(
    truth: &CostTable,
    est: &CostTable,
    obj: Objective,
    truth_d: impl Fn(usize, usize) -> f64,
) -> Result<GroupEval, CoreError> {
    check_same(truth, est)?;
    let (true_core, opt) = rank(truth, obj)[0];
    let (est_core, _) = rank(est, obj)[0];
    let per = if obj == Objective::Median {
        truth.members().len() as f64
    } else {
        1.0
    };
    let est_true_cost = truth.evaluate_nodes(&[est_core], obj);
    Ok(GroupEval {
        true_core,
        est_core,
        hit: true_core == est_core,
        cost_gap_ms: (est_true_cost - opt) / per,
        core_distance_ms: if true_core == est_core {
            0.0
        } else {
            truth_d(est_core, true_core)
        },
        ecc_reported_ms: max_of(row_of(est, est_core)),
        ecc_true_ms: max_of(row_of(truth, est_core)),
    })
}

/// Fig. 7 at one k of the ranking reading (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct RankedEval {
    /// Number of cores k.
    pub k: usize,
    /// The true best core is among the estimated top k.
    pub hit: bool,
    /// Smallest true latency from an estimated top-k core to the true best core (ms).
    pub min_core_distance_ms: f64,
    /// Largest such latency (ms).
    pub max_core_distance_ms: f64,
    /// Smallest cost gap (ms, per member for k-median) among the estimated top k.
    pub min_cost_gap_ms: f64,
}

/// [`RankedEval`] for k = 1..=kmax (capped at the number of candidates).
pub fn ranked(
    truth: &CostTable,
    est: &CostTable,
    obj: Objective,
    kmax: usize,
    truth_d: impl Fn(usize, usize) -> f64,
) -> Result<Vec<RankedEval>, CoreError> {
    check_same(truth, est)?;
    let tr = rank(truth, obj);
    let (best, opt) = tr[0];
    let er = rank(est, obj);
    let per = if obj == Objective::Median {
        truth.members().len() as f64
    } else {
        1.0
    };
    let true_cost = |node: usize| tr.iter().find(|(n, _)| *n == node).map_or(f64::NAN, |(_, c)| *c);
    let mut out = Vec::new();
    let (mut hit, mut dmin, mut dmax, mut gmin) = (false, f64::INFINITY, 0.0f64, f64::INFINITY);
    for (k, &(node, _)) in er.iter().enumerate().take(kmax) {
        let dist = if node == best { 0.0 } else { truth_d(node, best) };
        hit |= node == best;
        dmin = dmin.min(dist);
        dmax = dmax.max(dist);
        gmin = gmin.min((true_cost(node) - opt) / per);
        out.push(RankedEval {
            k: k + 1,
            hit,
            min_core_distance_ms: dmin,
            max_core_distance_ms: dmax,
            min_cost_gap_ms: gmin,
        });
    }
    Ok(out)
}

fn check_same(a: &CostTable, b: &CostTable) -> Result<(), CoreError> {
    if a.candidates() != b.candidates() || a.members() != b.members() {
        return Err(CoreError::TablesDiffer);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn judged_with_true_latencies() {
        // Line: candidates at 0, 5, 20; members at 4, 6. True best core: 5 (mean 1).
        let pos = [0.0, 5.0, 20.0, 4.0, 6.0];
        let truth_d = |a: usize, b: usize| f64::abs(pos[a] - pos[b]);
        let truth = CostTable::new(&[0, 1, 2], &[3, 4], truth_d).unwrap();
        // Estimates that believe node 0 is on top of the members.
        let est = CostTable::new(&[0, 1, 2], &[3, 4], |a, b| {
            if a == 0 { 1.0 } else { truth_d(a, b) * 2.0 }
        })
        .unwrap();
        let g = evaluate_group(&truth, &est, Objective::Median, truth_d).unwrap();
        assert_eq!((g.true_core, g.est_core, g.hit), (1, 0, false));
        assert_eq!(g.cost_gap_ms, 5.0 - 1.0); // node 0: mean(4, 6) = 5; node 1: 1
        assert_eq!(g.core_distance_ms, 5.0);
        assert_eq!((g.ecc_reported_ms, g.ecc_true_ms), (1.0, 6.0));
        assert!((g.ecc_directed_error() + 5.0 / 6.0).abs() < 1e-12);
        let r = ranked(&truth, &est, Objective::Median, 3, truth_d).unwrap();
        assert_eq!(r.len(), 3);
        assert!(!r[0].hit && r[1].hit && r[2].hit);
        assert_eq!((r[0].min_core_distance_ms, r[1].min_core_distance_ms), (5.0, 0.0));
        assert_eq!(r[2].max_core_distance_ms, 15.0);
        assert_eq!(r[1].min_cost_gap_ms, 0.0);
        let same = evaluate_group(&truth, &truth, Objective::Center, truth_d).unwrap();
        assert!(same.hit && same.cost_gap_ms == 0.0 && same.ecc_directed_error() == 0.0);
        let other = CostTable::new(&[0, 1], &[3, 4], truth_d).unwrap();
        assert_eq!(
            evaluate_group(&truth, &other, Objective::Median, truth_d),
            Err(CoreError::TablesDiffer)
        );
    }
}
