//! Per-event cost of J-SA/L-SA with incremental `MC`/`MP` (paper `002` §5's suggestion)
//! against the paper's rebuild-per-event version and a full min-cost-flow re-solve, on
//! BRITE-like instances filled to 95 % of capacity. One iteration = one leave followed by
//! the same player's re-join (state stays at the same load).
#![allow(missing_docs)]

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use worldmesh_assign::reference::optimal_assignment;
use worldmesh_assign::topology::{BriteParams, brite_like, sample_delays};
use worldmesh_assign::{Algorithm, Assigner, Micros, PlayerId, ms_to_micros};
use worldmesh_core::DetRng;

struct Instance {
    rows: Vec<Micros>,
    caps: Vec<u32>,
    m: usize,
}

fn instance(players: usize, mirrors: usize) -> Instance {
    let mut rng = DetRng::new(42);
    let g = brite_like(&BriteParams::default(), &mut rng);
    let rows: Vec<Micros> = sample_delays(&g, players, mirrors, &mut rng)
        .into_iter()
        .map(|d| ms_to_micros(d).expect("finite"))
        .collect();
    // total capacity = players / 0.95, split unevenly 1 : 2 : … like the paper's 100..300
    let total = (players as f64 / 0.95).ceil() as u64;
    let weights: u64 = (1..=mirrors as u64).sum();
    let mut caps: Vec<u32> = (1..=mirrors as u64)
        .map(|w| (total * w / weights) as u32)
        .collect();
    let short = total - caps.iter().map(|&c| u64::from(c)).sum::<u64>();
    caps[mirrors - 1] += short as u32;
    Instance {
        rows,
        caps,
        m: mirrors,
    }
}

fn filled(inst: &Instance, alg: Algorithm) -> Assigner {
    let mut a = Assigner::new(alg, inst.caps.clone()).expect("mirrors");
    for (p, row) in inst.rows.chunks(inst.m).enumerate() {
        a.join(PlayerId(p as u64), row).expect("fits");
    }
    a
}

fn bench(c: &mut Criterion) {
    for (n, m) in [(1_000, 5), (10_000, 20)] {
        let inst = instance(n, m);
        let mut group = c.benchmark_group(format!("{n}x{m}"));
        group.sample_size(20);
        for alg in [Algorithm::Optimal, Algorithm::OptimalRebuild, Algorithm::Greedy] {
            let mut a = filled(&inst, alg);
            let mut next = 0usize;
            group.bench_function(format!("leave+join/{}", alg.name()), |b| {
                b.iter(|| {
                    let p = next % n;
                    next += 7;
                    let id = PlayerId(p as u64);
                    black_box(a.leave(id).expect("present"));
                    black_box(a.join(id, &inst.rows[p * m..(p + 1) * m]).expect("fits"));
                })
            });
        }
        if n <= 1_000 {
            group.bench_function("full min-cost-flow re-solve", |b| {
                b.iter(|| black_box(optimal_assignment(&inst.rows, &inst.caps)))
            });
        }
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
