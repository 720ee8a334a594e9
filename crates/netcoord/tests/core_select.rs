//! Core selection: hand-checked examples, and properties against brute force on random
//! Euclidean instances (exact = brute force; heuristics never beat it and stay within
//! their bounds).
#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use worldmesh_netcoord::core_select::{
    CoreError, CostTable, Objective, brute_force, diameter_through, exact, farthest_first, greedy_swap,
    group_center, rank, topology_center,
};

const BIG: u64 = 10_000_000;

/// Nodes on a line at the given positions; latency = distance.
fn line(pos: &'static [f64]) -> impl Fn(usize, usize) -> f64 + Copy {
    move |a, b| (pos[a] - pos[b]).abs()
}

#[test]
fn hand_checked_line() {
    // Members at 0, 1, 2, 10, 11; candidates are all five nodes plus a node at 6.
    static POS: [f64; 6] = [0.0, 1.0, 2.0, 10.0, 11.0, 6.0];
    let d = line(&POS);
    let t = CostTable::new(&[0, 1, 2, 3, 4, 5], &[0, 1, 2, 3, 4], d).unwrap();
    // One core: node 2 (sum 2+1+0+8+9 = 20) beats node 5 (6+5+4+4+5 = 24).
    let s = exact(&t, 1, Objective::Median, BIG).unwrap();
    assert_eq!((s.cores.clone(), s.cost), (vec![2], 20.0));
    // One core by eccentricity: node 5 (max 6) beats node 2 (max 9).
    assert_eq!(exact(&t, 1, Objective::Center, BIG).unwrap().cores, vec![5]);
    // Two cores: {1, 3} or {1, 4}: 1+0+1 + 0+1 = 3.
    let s2 = exact(&t, 2, Objective::Median, BIG).unwrap();
    assert_eq!(s2.cost, 3.0);
    assert!(s2.cores == vec![1, 3] || s2.cores == vec![1, 4], "{:?}", s2.cores);
    let c2 = exact(&t, 2, Objective::Center, BIG).unwrap();
    assert_eq!(c2.cost, 1.0);
    // Ranking (the paper's literal k-minimum-pairwise) by sums: 2 (20), 1 (21), ...
    let r = rank(&t, Objective::Median);
    assert_eq!(r[0], (2, 20.0));
    assert_eq!(r[1], (1, 21.0));
    assert_eq!(group_center(&t, Objective::Median).cores, vec![2]);
    // Diameter through a core: worst pair via the core.
    // Through node 2 the worst pair is (4, 3): 9 + 8.
    assert_eq!(diameter_through(2, &[0, 1, 2, 3, 4], d), 9.0 + 8.0);
    assert_eq!(diameter_through(5, &[0, 1, 2, 3, 4], d), 6.0 + 5.0);
    assert_eq!(diameter_through(5, &[3], d), 0.0);
    // Topology center over all nodes with servers {0, 4, 5}: 5 (sum 6+5+4+4+5+0 = 24).
    let tc = topology_center(&[0, 4, 5], &[0, 1, 2, 3, 4, 5], d).unwrap();
    assert_eq!((tc.cores.clone(), tc.cost), (vec![5], 24.0));
}

#[test]
fn bad_input_is_rejected() {
    let d = |_: usize, _: usize| 1.0;
    assert!(matches!(
        CostTable::new(&[], &[1], d),
        Err(CoreError::Empty { .. })
    ));
    assert!(matches!(
        CostTable::new(&[1], &[], d),
        Err(CoreError::Empty { .. })
    ));
    let nan = |_: usize, _: usize| f64::NAN;
    assert!(matches!(
        CostTable::new(&[0], &[1], nan),
        Err(CoreError::BadLatency { from: 0, to: 1, .. })
    ));
    let neg = |_: usize, _: usize| -1.0;
    assert!(matches!(
        CostTable::new(&[0], &[1], neg),
        Err(CoreError::BadLatency { .. })
    ));
    let t = CostTable::new(&[0, 1], &[2, 3], d).unwrap();
    assert_eq!(
        exact(&t, 0, Objective::Median, BIG),
        Err(CoreError::BadK { k: 0, candidates: 2 })
    );
    assert_eq!(
        exact(&t, 3, Objective::Median, BIG),
        Err(CoreError::BadK { k: 3, candidates: 2 })
    );
    assert!(matches!(
        greedy_swap(&t, 3, Objective::Median),
        Err(CoreError::BadK { .. })
    ));
    assert!(matches!(
        farthest_first(&[0, 1], &[2, 3], 0, d),
        Err(CoreError::BadK { .. })
    ));
    // A budget that is too small is reported, not silently truncated.
    let many: Vec<usize> = (0..30).collect();
    let t = CostTable::new(&many, &many, |a, b| (a as f64 - b as f64).abs() + 1.0).unwrap();
    assert_eq!(
        brute_force(&t, 3, Objective::Median, 100),
        Err(CoreError::BudgetExceeded { budget: 100 })
    );
}

/// Random points in the plane (a metric).
fn points(max: usize) -> impl Strategy<Value = Vec<(f64, f64)>> {
    prop::collection::vec((0.0f64..100.0, 0.0f64..100.0), 3..max)
}

fn euclid(p: &[(f64, f64)]) -> impl Fn(usize, usize) -> f64 + '_ {
    move |a, b| ((p[a].0 - p[b].0).powi(2) + (p[a].1 - p[b].1).powi(2)).sqrt()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn exact_agrees_with_brute_force_and_heuristics_respect_bounds(
        pts in points(20), split in 0.2f64..0.8, k in 1usize..5, members_are_candidates in any::<bool>()
    ) {
        let n = pts.len();
        let cut = ((n as f64 * split) as usize).clamp(1, n - 1);
        let d = euclid(&pts);
        let (cands, mems): (Vec<usize>, Vec<usize>) = if members_are_candidates {
            ((0..n).collect(), (cut..n).collect())
        } else {
            ((0..cut).collect(), (cut..n).collect())
        };
        prop_assume!(k <= cands.len());
        let t = CostTable::new(&cands, &mems, &d).unwrap();
        for obj in [Objective::Median, Objective::Center] {
            let bf = brute_force(&t, k, obj, BIG).unwrap();
            let ex = exact(&t, k, obj, BIG).unwrap();
            prop_assert!((ex.cost - bf.cost).abs() <= 1e-9 * bf.cost.max(1.0), "{obj:?} exact {} brute {}", ex.cost, bf.cost);
            prop_assert_eq!(ex.cores.len(), k);
            prop_assert!((t.evaluate_nodes(&ex.cores, obj) - ex.cost).abs() < 1e-9);
            let gs = greedy_swap(&t, k, obj).unwrap();
            prop_assert!(gs.cost >= bf.cost - 1e-9);
            if obj == Objective::Median {
                prop_assert!(gs.cost <= 5.0 * bf.cost + 1e-9, "greedy+swap {} vs opt {}", gs.cost, bf.cost);
            }
        }
        let opt = brute_force(&t, k, Objective::Center, BIG).unwrap().cost;
        let ff = farthest_first(&cands, &mems, k, &d).unwrap();
        prop_assert_eq!(ff.cores.len(), k);
        prop_assert!(ff.cost >= opt - 1e-9);
        let bound = if members_are_candidates { 2.0 } else { 3.0 };
        prop_assert!(ff.cost <= bound * opt + 1e-9, "farthest-first {} vs opt {} (bound {bound}x)", ff.cost, opt);
    }

    #[test]
    fn diameter_through_the_core_is_the_two_largest_member_latencies_when_symmetric(pts in points(10)) {
        // With d symmetric, max_{a≠b} d(a,c)+d(c,b) = the two largest member latencies.
        let d = euclid(&pts);
        let members: Vec<usize> = (1..pts.len()).collect();
        let mut lat: Vec<f64> = members.iter().map(|&m| d(0, m)).collect();
        lat.sort_by(|a, b| b.total_cmp(a));
        let want = lat[0] + lat[1];
        prop_assert!((diameter_through(0, &members, &d) - want).abs() < 1e-9);
    }
}
