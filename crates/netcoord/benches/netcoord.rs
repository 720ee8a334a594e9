//! Cost of one Vivaldi update, and of solving k-median exactly (branch and bound) against
//! brute-force enumeration and greedy + swap on the same instance.
#![allow(missing_docs, clippy::unwrap_used)]

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use worldmesh_core::DetRng;
use worldmesh_netcoord::core_select::{CostTable, Objective, brute_force, exact, greedy_swap};
use worldmesh_netcoord::{Coordinate, VivaldiConfig, VivaldiNode};

fn vivaldi_update(c: &mut Criterion) {
    let mut rng = DetRng::new(1);
    let peers: Vec<Coordinate> = (0..64)
        .map(|_| {
            let v: Vec<f64> = (0..8).map(|_| rng.range_f64(-100.0, 100.0)).collect();
            Coordinate::new(&v, rng.range_f64(0.0, 10.0), 0.0, 0.3).unwrap()
        })
        .collect();
    let rtts: Vec<f64> = (0..64).map(|_| rng.range_f64(5.0, 300.0)).collect();
    let mut node: VivaldiNode<usize> = VivaldiNode::new(VivaldiConfig::default(), 1).unwrap();
    let mut i = 0usize;
    c.bench_function("vivaldi_observe_8d_height", |b| {
        b.iter(|| {
            let k = i % 64;
            i += 1;
            black_box(node.observe(k, &peers[k], rtts[k]).unwrap());
        })
    });
}

fn kmedian(c: &mut Criterion) {
    let mut rng = DetRng::new(2);
    let pts: Vec<(f64, f64)> = (0..70)
        .map(|_| (rng.range_f64(0.0, 200.0), rng.range_f64(0.0, 200.0)))
        .collect();
    let d = |a: usize, b: usize| ((pts[a].0 - pts[b].0).powi(2) + (pts[a].1 - pts[b].1).powi(2)).sqrt();
    let cands: Vec<usize> = (0..40).collect();
    let members: Vec<usize> = (40..70).collect();
    let t = CostTable::new(&cands, &members, d).unwrap();
    let mut g = c.benchmark_group("kmedian_40x30_k3");
    g.bench_function("exact_branch_and_bound", |b| {
        b.iter(|| black_box(exact(&t, 3, Objective::Median, u64::MAX).unwrap()))
    });
    g.bench_function("brute_force", |b| {
        b.iter(|| black_box(brute_force(&t, 3, Objective::Median, u64::MAX).unwrap()))
    });
    g.bench_function("greedy_swap", |b| {
        b.iter(|| black_box(greedy_swap(&t, 3, Objective::Median).unwrap()))
    });
    g.finish();
}

criterion_group!(benches, vivaldi_update, kmedian);
criterion_main!(benches);
