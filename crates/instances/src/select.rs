//! Algorithm 2 (paper `003` §3.2), the `distributes` function: choose, among the players of
//! an auxiliary game sent to the P2P area, its temporary server `AG_x.S` and replicated
//! server `AG_x.RS`, by one of two CRITERIA:
//!
//! - **LL** (latency lookup): the player with the lowest latency to the others becomes
//!   `AG_x.S`, the second lowest `AG_x.RS` (`size·(size−1)/2` latency look-ups);
//! - **PD** (probability of disconnection): the player with the highest `Uptime_min`
//!   (§3.2 eq. 2) becomes `AG_x.S`, the highest among the rest `AG_x.RS` (eq. 3).
//!
//! We also offer [`select_by_conditional_risk`], the variant the crate documentation argues
//! for under an increasing hazard: rank players by the conditional probability of
//! disconnecting within the instance's expected duration given how long they have already
//! been online.
//!
//! All functions work on member positions `0..n` and break ties by the lower position, so
//! they are deterministic.

use serde::{Deserialize, Serialize};

/// The two servers of a P2P sub-area (positions among the members).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerPair {
    /// `AG_x.S`.
    pub server: usize,
    /// `AG_x.RS` (`None` for a one-player instance).
    pub replica: Option<usize>,
}

/// The selection CRITERIA of Algorithm 2.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Criteria {
    /// Lowest latency to the other players.
    LatencyLookup,
    /// Highest `Uptime_min` (paper's PD).
    Disconnection,
}

/// The two best positions by `score` (lower is better); ties by position.
fn best_two(score: &[f64]) -> Option<ServerPair> {
    let mut idx: Vec<usize> = (0..score.len()).collect();
    idx.sort_by(|&a, &b| score[a].total_cmp(&score[b]).then(a.cmp(&b)));
    let server = *idx.first()?;
    Some(ServerPair {
        server,
        replica: idx.get(1).copied(),
    })
}

/// Sum of latencies from each member to every other member (the LL score; the mean is the
/// same ranking). `latency(i, j)` is asked once per unordered pair, i.e.
/// `n·(n−1)/2` look-ups as in §3.2.
pub fn latency_scores(n: usize, latency: impl Fn(usize, usize) -> f64) -> Vec<f64> {
    let mut score = vec![0.0; n];
    for i in 0..n {
        for j in (i + 1)..n {
            let l = latency(i, j);
            score[i] += l;
            score[j] += l;
        }
    }
    score
}

/// LL: `AG_x.S` minimizes the total latency to the other players, `AG_x.RS` is second.
/// `None` for an empty instance.
pub fn select_by_latency(n: usize, latency: impl Fn(usize, usize) -> f64) -> Option<ServerPair> {
    best_two(&latency_scores(n, latency))
}

/// PD (§3.2 eq. 2–3): `AG_x.S` has the highest `Uptime_min`, `AG_x.RS` the highest among
/// the rest.
pub fn select_by_uptime_min(uptime_min: &[f64]) -> Option<ServerPair> {
    let neg: Vec<f64> = uptime_min.iter().map(|u| -u).collect();
    best_two(&neg)
}

/// Conditional-risk variant: `AG_x.S` has the lowest probability of disconnecting during the
/// instance (e.g. [`crate::gamma::GammaDist::conditional_disconnect`] of each player's
/// model, elapsed online time and the instance's expected duration).
pub fn select_by_conditional_risk(disconnect_probability: &[f64]) -> Option<ServerPair> {
    best_two(disconnect_probability)
}

/// Replacement after a server left (Algorithm 4): the best-ranked of `candidates` by
/// `score` (lower is better), excluding positions in `exclude`.
pub fn best_candidate(score: &[f64], exclude: &[usize]) -> Option<usize> {
    (0..score.len())
        .filter(|i| !exclude.contains(i))
        .min_by(|&a, &b| score[a].total_cmp(&score[b]).then(a.cmp(&b)))
}

/// The paper's instance failure likelihood (§5.2.1, Table 5): the instance survives while
/// one player can serve (Algorithm 4), so it fails only if every player but one leaves;
/// the paper computes this as the product of the players' disconnection probabilities
/// excluding the player with the worst reliability (highest probability). Assumes
/// independent disconnections. 0 players → 1; 1 player → its own probability.
pub fn instance_failure_probability(disconnect_probability: &[f64]) -> f64 {
    match disconnect_probability.len() {
        0 => 1.0,
        1 => disconnect_probability[0],
        _ => {
            let worst = (0..disconnect_probability.len())
                .max_by(|&a, &b| disconnect_probability[a].total_cmp(&disconnect_probability[b]))
                .unwrap_or(0);
            disconnect_probability
                .iter()
                .enumerate()
                .filter(|&(i, _)| i != worst)
                .map(|(_, p)| p)
                .product()
        }
    }
}

/// The probability that at most one player remains (every player but at most one
/// disconnects), with independent disconnection probabilities:
/// `∏ p_i + Σ_j (1 − p_j) ∏_{i≠j} p_i`. This is the event the paper's Table 5 formula
/// ([`instance_failure_probability`]) is meant to measure; the paper's product keeps only
/// the one term in which the *least reliable* player is the survivor, so it underestimates
/// it (by a factor of about `n` when the probabilities are similar).
pub fn probability_at_most_one_remains(disconnect_probability: &[f64]) -> f64 {
    let all: f64 = disconnect_probability.iter().product();
    let mut sum = all;
    for j in 0..disconnect_probability.len() {
        let others: f64 = disconnect_probability
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != j)
            .map(|(_, p)| p)
            .product();
        sum += (1.0 - disconnect_probability[j]) * others;
    }
    sum.min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ll_picks_the_center() {
        // points on a line: 0, 1, 2, 10 → 1 is the medoid, then 2
        let xs: [f64; 4] = [0.0, 1.0, 2.0, 10.0];
        let p = select_by_latency(4, |i, j| (xs[i] - xs[j]).abs()).unwrap();
        assert_eq!(
            p,
            ServerPair {
                server: 1,
                replica: Some(2)
            }
        );
        assert_eq!(
            select_by_latency(1, |_, _| 0.0),
            Some(ServerPair {
                server: 0,
                replica: None
            })
        );
        assert_eq!(select_by_latency(0, |_, _| 0.0), None);
    }

    #[test]
    fn pd_picks_highest_uptime_min() {
        let p = select_by_uptime_min(&[1.0, 3.5, 0.2, 3.5, 2.0]).unwrap();
        assert_eq!(
            p,
            ServerPair {
                server: 1,
                replica: Some(3)
            }
        );
    }

    #[test]
    fn failure_probability_excludes_the_worst() {
        let f = instance_failure_probability(&[0.5, 0.2, 0.9, 0.1]);
        assert!((f - 0.5 * 0.2 * 0.1).abs() < 1e-15);
    }

    #[test]
    fn at_most_one_remains_by_enumeration() {
        // brute force over all 2^n outcomes
        let p = [0.3, 0.5, 0.2, 0.7];
        let mut brute = 0.0;
        for mask in 0u32..16 {
            let stay = (0..4).filter(|i| mask & (1 << i) != 0).count();
            if stay <= 1 {
                brute += (0..4)
                    .map(|i| if mask & (1 << i) != 0 { 1.0 - p[i] } else { p[i] })
                    .product::<f64>();
            }
        }
        assert!((probability_at_most_one_remains(&p) - brute).abs() < 1e-12);
        assert!(instance_failure_probability(&p) < brute);
    }

    proptest! {
        /// LL against brute force: the server minimizes the sum of distances among all
        /// members, the replica among the rest.
        #[test]
        fn ll_matches_brute_force(pts in proptest::collection::vec((-1000.0f64..1000.0, -1000.0f64..1000.0), 2..40)) {
            let d = |i: usize, j: usize| ((pts[i].0 - pts[j].0).powi(2) + (pts[i].1 - pts[j].1).powi(2)).sqrt();
            let n = pts.len();
            let p = select_by_latency(n, d).unwrap();
            let total = |i: usize| (0..n).filter(|&j| j != i).map(|j| d(i, j)).sum::<f64>();
            for i in 0..n {
                prop_assert!(total(p.server) <= total(i) + 1e-6);
                if i != p.server {
                    prop_assert!(total(p.replica.unwrap()) <= total(i) + 1e-6);
                }
            }
            prop_assert_ne!(Some(p.server), p.replica);
        }

        /// PD against brute force: no other player has a higher Uptime_min than the server,
        /// and none but the server a higher one than the replica.
        #[test]
        fn pd_matches_brute_force(u in proptest::collection::vec(0.0f64..10.0, 2..40)) {
            let p = select_by_uptime_min(&u).unwrap();
            let r = p.replica.unwrap();
            for (i, &x) in u.iter().enumerate() {
                prop_assert!(u[p.server] >= x);
                if i != p.server { prop_assert!(u[r] >= x); }
            }
        }
    }
}
