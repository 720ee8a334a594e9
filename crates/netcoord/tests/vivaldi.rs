//! Vivaldi behaviour: convergence on synthetic geometries (several seeds), the latency
//! filter, the NaN defence, rejection of bad input and re-convergence after drift.
#![allow(clippy::unwrap_used)]

use worldmesh_core::LatencyMatrix;
use worldmesh_netcoord::accuracy::{ErrorSummary, pair_errors};
use worldmesh_netcoord::coord::{CoordError, Coordinate};
use worldmesh_netcoord::probe_sim::{Drift, DriftingMatrix, LatencyModel, ProbeConfig, ProbeSim, estimate};
use worldmesh_netcoord::{VivaldiConfig, VivaldiError, VivaldiNode};

fn cfg2(height: bool) -> VivaldiConfig {
    VivaldiConfig {
        dims: 2,
        height,
        adjustment_window: 0,
        gravity_rho: None,
        filter_window: 1,
        ..Default::default()
    }
}

fn probe_all(n: usize) -> ProbeConfig {
    ProbeConfig {
        neighbours: n,
        close_fraction: 0.0,
        probe_rate: 1.0,
        spike_prob: 0.0,
        spike_mean: 0.0,
    }
}

/// Median relative error after `secs` seconds of probing `m`.
fn median_error(m: &dyn LatencyModel, v: VivaldiConfig, p: ProbeConfig, secs: f64, seed: u64) -> f64 {
    let mut sim = ProbeSim::new(m, v, p, seed).unwrap();
    sim.run_until(m, secs);
    let c = sim.coordinates();
    let e = pair_errors(m.hosts(), |i, j| m.rtt_at(i, j, secs), estimate(&c));
    ErrorSummary::of_pairs(&e).median
}

fn median_over_seeds(f: impl Fn(u64) -> f64) -> f64 {
    let mut v: Vec<f64> = (1..=5).map(f).collect();
    v.sort_by(f64::total_cmp);
    v[2]
}

fn from_points(pts: &[(f64, f64)], heights: &[f64]) -> LatencyMatrix {
    LatencyMatrix::from_fn(pts.len(), |i, j| {
        let (dx, dy) = (pts[i].0 - pts[j].0, pts[i].1 - pts[j].1);
        ((dx * dx + dy * dy).sqrt() + heights[i] + heights[j]) as f32
    })
}

#[test]
fn converges_on_a_line() {
    let pts: Vec<(f64, f64)> = (0..16).map(|i| (10.0 * f64::from(i), 0.0)).collect();
    let m = from_points(&pts, &[0.0; 16]);
    let med = median_over_seeds(|s| median_error(&m, cfg2(false), probe_all(15), 1500.0, s));
    assert!(med < 0.03, "median relative error on a line: {med}");
}

#[test]
fn converges_on_a_grid() {
    let pts: Vec<(f64, f64)> = (0..25)
        .map(|i| (20.0 * f64::from(i % 5), 20.0 * f64::from(i / 5)))
        .collect();
    let m = from_points(&pts, &[0.0; 25]);
    let med = median_over_seeds(|s| median_error(&m, cfg2(false), probe_all(24), 1500.0, s));
    assert!(med < 0.03, "median relative error on a grid: {med}");
}

/// 16 hosts on a circle of radius 50 ms around a centre host whose access link adds
/// 40 ms (the "raised centre"); each rim host has a 2 ms access link. No 2-D Euclidean
/// embedding fits: the centre is 92 ms from everyone yet the rim hosts are up to 104 ms
/// apart. The height vector fits it exactly.
#[test]
fn height_is_needed_for_a_circle_with_a_raised_centre() {
    let mut pts: Vec<(f64, f64)> = (0..16)
        .map(|i| {
            let a = std::f64::consts::TAU * f64::from(i) / 16.0;
            (50.0 * a.cos(), 50.0 * a.sin())
        })
        .collect();
    pts.push((0.0, 0.0));
    let mut h = vec![2.0; 16];
    h.push(40.0);
    let m = from_points(&pts, &h);
    let with = median_over_seeds(|s| median_error(&m, cfg2(true), probe_all(16), 3000.0, s));
    let without = median_over_seeds(|s| median_error(&m, cfg2(false), probe_all(16), 3000.0, s));
    assert!(with < 0.03, "with height: {with}");
    assert!(
        without > 2.0 * with,
        "without height {without} should be clearly worse than with {with}"
    );
    // The centre's learned height is its access link, not the rim's.
    let mut sim = ProbeSim::new(&m, cfg2(true), probe_all(16), 7).unwrap();
    sim.run_until(&m, 3000.0);
    let c = sim.coordinates();
    assert!(
        c[16].height() > 20.0 && c[0].height() < 10.0,
        "heights {} {}",
        c[16].height(),
        c[0].height()
    );
}

#[test]
fn latency_filter_resists_spikes() {
    let pts: Vec<(f64, f64)> = (0..25)
        .map(|i| (20.0 * f64::from(i % 5), 20.0 * f64::from(i / 5)))
        .collect();
    let m = from_points(&pts, &[0.0; 25]);
    let spiky = ProbeConfig {
        spike_prob: 0.25,
        spike_mean: 3.0,
        ..probe_all(24)
    };
    let raw = median_over_seeds(|s| median_error(&m, cfg2(false), spiky, 1500.0, s));
    let filtered = median_over_seeds(|s| {
        median_error(
            &m,
            VivaldiConfig {
                filter_window: 5,
                ..cfg2(false)
            },
            spiky,
            1500.0,
            s,
        )
    });
    assert!(filtered < 0.5 * raw, "filtered {filtered} vs raw {raw}");
    assert!(filtered < 0.08, "filtered {filtered}");
}

#[test]
fn impossible_samples_and_bad_peers_are_rejected_without_moving() {
    let mut n: VivaldiNode<u32> = VivaldiNode::new(cfg2(true), 1).unwrap();
    let peer = Coordinate::new(&[10.0, 0.0], 1.0, 0.0, 0.5).unwrap();
    n.observe(1, &peer, 20.0).unwrap();
    let before = *n.coordinate();
    for bad in [0.0, -5.0, f64::NAN, f64::INFINITY, 1e9] {
        assert!(
            matches!(n.observe(1, &peer, bad), Err(VivaldiError::ImpossibleRtt { .. })),
            "{bad}"
        );
    }
    let p3 = Coordinate::new(&[1.0, 2.0, 3.0], 1.0, 0.0, 0.5).unwrap();
    assert_eq!(
        n.observe(1, &p3, 20.0),
        Err(VivaldiError::BadCoordinate(CoordError::DimensionMismatch {
            expected: 2,
            got: 3
        }))
    );
    let far = Coordinate::new(&[1e300, 0.0], 1.0, 0.0, 0.5).unwrap();
    assert!(matches!(
        n.observe(1, &far, 20.0),
        Err(VivaldiError::BadCoordinate(CoordError::OutOfRange { .. }))
    ));
    // A NaN from a peer cannot even be decoded.
    let mut bytes = peer.to_bytes();
    bytes[0..4].copy_from_slice(&f32::NAN.to_le_bytes());
    assert!(matches!(
        Coordinate::from_bytes(2, &bytes),
        Err(CoordError::NotFinite { .. })
    ));
    assert_eq!(*n.coordinate(), before);
    assert_eq!(n.updates(), 1);
    assert!(
        VivaldiNode::<u32>::new(
            VivaldiConfig {
                cc: 0.0,
                ..cfg2(true)
            },
            1
        )
        .is_err()
    );
    assert!(
        VivaldiNode::<u32>::new(
            VivaldiConfig {
                dims: 0,
                ..cfg2(true)
            },
            1
        )
        .is_err()
    );
}

#[test]
fn non_finite_update_resets_and_counts() {
    // With the magnitude guard disabled, a huge (finite) peer drives the update to NaN.
    let cfg = VivaldiConfig {
        max_coordinate_ms: f64::MAX,
        ..cfg2(true)
    };
    let mut n: VivaldiNode<u32> = VivaldiNode::new(cfg, 1).unwrap();
    let ok = Coordinate::new(&[10.0, 0.0], 1.0, 0.0, 0.5).unwrap();
    n.observe(1, &ok, 20.0).unwrap();
    let huge = Coordinate::new(&[1e308, -1e308], 1.0, 0.0, 0.5).unwrap();
    let u = n.observe(2, &huge, 20.0).unwrap();
    assert!(u.reset);
    assert_eq!(n.resets(), 1);
    assert!(n.coordinate().is_finite());
    assert!(n.coordinate().components().iter().all(|x| *x == 0.0));
    assert_eq!(n.error(), cfg.error_max);
    // It keeps working afterwards.
    n.observe(1, &ok, 20.0).unwrap();
    assert!(n.coordinate().is_finite() && n.estimate_ms(&ok).unwrap() > 0.0);
}

#[test]
fn same_seed_same_coordinates() {
    let pts: Vec<(f64, f64)> = (0..10).map(|i| (f64::from(i * i), f64::from(3 * i))).collect();
    let m = from_points(&pts, &[1.0; 10]);
    let run = |seed| {
        let mut s = ProbeSim::new(&m, VivaldiConfig::default(), probe_all(9), seed).unwrap();
        s.run_until(&m, 200.0);
        s.coordinates()
    };
    assert_eq!(run(3), run(3));
    assert_ne!(run(3), run(4));
}

#[test]
fn re_converges_after_a_route_change() {
    let pts: Vec<(f64, f64)> = (0..25)
        .map(|i| (20.0 * f64::from(i % 5), 20.0 * f64::from(i / 5)))
        .collect();
    let base = from_points(&pts, &[2.0; 25]);
    let drift = Drift {
        hosts: vec![0, 1, 2, 3, 4],
        extra_ms: 60.0,
        from_s: 1000.0,
        until_s: 2000.0,
    };
    let m = DriftingMatrix::new(base, vec![drift]);
    let v = VivaldiConfig {
        dims: 2,
        ..Default::default()
    };
    let p = probe_all(24);
    let err_at = |sim: &ProbeSim, t: f64| {
        let c = sim.coordinates();
        // p80: the drift touches 37% of the ordered pairs, so the median would not see it.
        ErrorSummary::of_pairs(&pair_errors(25, |i, j| m.rtt_at(i, j, t), estimate(&c))).p80
    };
    let mut settled = Vec::new();
    let mut jump = Vec::new();
    let mut recovered = Vec::new();
    for seed in 1..=3 {
        let mut sim = ProbeSim::new(&m, v, p, seed).unwrap();
        sim.run_until(&m, 1000.0);
        settled.push(err_at(&sim, 999.0));
        jump.push(err_at(&sim, 1000.0)); // the route changed, coordinates not yet
        sim.run_until(&m, 1999.0);
        recovered.push(err_at(&sim, 1999.0));
    }
    for s in 0..3 {
        assert!(settled[s] < 0.08, "settled {settled:?}");
        assert!(jump[s] > 3.0 * settled[s], "jump {jump:?} settled {settled:?}");
        assert!(
            recovered[s] < 0.1 && recovered[s] < 0.5 * jump[s],
            "recovered {recovered:?} jump {jump:?}"
        );
    }
}

#[test]
fn bad_probe_configurations_are_rejected() {
    let m = LatencyMatrix::uniform(4, 10.0);
    let v = cfg2(false);
    for p in [
        ProbeConfig {
            neighbours: 0,
            ..probe_all(3)
        },
        ProbeConfig {
            probe_rate: 0.0,
            ..probe_all(3)
        },
        ProbeConfig {
            probe_rate: f64::NAN,
            ..probe_all(3)
        },
        ProbeConfig {
            spike_mean: -1.0,
            ..probe_all(3)
        },
    ] {
        assert!(
            matches!(ProbeSim::new(&m, v, p, 1), Err(VivaldiError::BadConfig(_))),
            "{p:?}"
        );
    }
    // A matrix with a zero off-diagonal RTT: those samples are refused and counted.
    let z = LatencyMatrix::from_fn(3, |i, j| if i + j == 1 { 0.0 } else { 10.0 });
    let mut sim = ProbeSim::new(&z, v, probe_all(2), 1).unwrap();
    sim.run_until(&z, 50.0);
    assert!(sim.rejected() > 0 && sim.rejected() < sim.probes());
}

/// One update worked by hand from the formulas in the module doc: we sit at the origin
/// (height 0.01, error 1.5), the peer at (10, 0) with height 1 and error 0.5; RTT 20.
#[test]
fn one_update_by_hand() {
    let mut n: VivaldiNode<u32> = VivaldiNode::new(cfg2(true), 1).unwrap();
    let peer = Coordinate::new(&[10.0, 0.0], 1.0, 0.0, 0.5).unwrap();
    let u = n.observe(7, &peer, 20.0).unwrap();
    // w = 1.5 / 2 = 0.75; predicted d = 10 + 0.01 + 1 = 11.01.
    assert!((u.predicted_ms - 11.01).abs() < 1e-12);
    // error: e_s = 8.99 / 20 = 0.4495; c_e·w = 0.1875 → 0.4495·0.1875 + 1.5·0.8125.
    assert!((n.error() - 1.303_031_25).abs() < 1e-9, "{}", n.error());
    // force = c_c·w·(20 − 11.01) = 1.685625, split along [(0 − 10)/11.01, (0.01 + 1)/11.01].
    let c = n.coordinate();
    assert!((c.components()[0] - (-1.685_625 * 10.0 / 11.01)).abs() < 1e-9);
    assert_eq!(c.components()[1], 0.0);
    assert!((c.height() - (0.01 + 1.685_625 * 1.01 / 11.01)).abs() < 1e-9);
    // In the height-vector norm the step was a unit vector: the distance grew by `force`.
    assert!((c.raw_distance_ms(&peer).unwrap() - (11.01 + 1.685_625)).abs() < 1e-9);
}
