//! Line of sight through the bucketed obstacle index against testing every obstacle, on
//! the same segments of the paper-shaped map (95 × 179 cells of 32 units, 60 obstacles);
//! and a whole AoI-limited visibility-map build of a 40 × 40-cell corner of it.
#![allow(missing_docs)]

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use worldmesh_core::DetRng;
use worldmesh_loadmodel::{Grid, MapSpec, Sight, VisibilityMap};

fn sight(c: &mut Criterion) {
    let map = MapSpec::parse("random:3040x5728:60:1").unwrap().unwrap().build();
    let s = Sight::new(&map, (map.width, map.height));
    let mut rng = DetRng::new(7);
    let segs: Vec<((f64, f64), (f64, f64))> = (0..4096)
        .map(|_| {
            let p = |r: &mut DetRng| (r.range_f64(0.0, 3040.0), r.range_f64(0.0, 5728.0));
            (p(&mut rng), p(&mut rng))
        })
        .collect();
    // Short segments, as in an AoI-limited build (length ≤ 566 units).
    let short: Vec<((f64, f64), (f64, f64))> = (0..4096)
        .map(|_| {
            let a = (rng.range_f64(0.0, 3040.0), rng.range_f64(0.0, 5728.0));
            let (r, t) = (
                rng.range_f64(0.0, 566.0),
                rng.range_f64(0.0, std::f64::consts::TAU),
            );
            (
                a,
                (
                    (a.0 + r * t.cos()).clamp(0.0, 3040.0),
                    (a.1 + r * t.sin()).clamp(0.0, 5728.0),
                ),
            )
        })
        .collect();
    for (name, set) in [("long", &segs), ("short", &short)] {
        let mut g = c.benchmark_group(format!("line_of_sight_4096_{name}_segments_60_obstacles"));
        g.bench_function("bucketed", |b| {
            b.iter(|| {
                set.iter()
                    .filter(|(a, e)| s.clear(black_box(*a), black_box(*e)))
                    .count()
            })
        });
        g.bench_function("exhaustive", |b| {
            b.iter(|| {
                set.iter()
                    .filter(|(a, e)| s.clear_exhaustive(black_box(*a), black_box(*e)))
                    .count()
            })
        });
        g.finish();
    }
}

fn build(c: &mut Criterion) {
    let map = MapSpec::parse("random:1280x1280:8:1").unwrap().unwrap().build();
    let grid = Grid::for_map(&map, 32.0).unwrap();
    let mut g = c.benchmark_group("visibility_build_1600_cells_range_566");
    g.sample_size(20);
    for threads in [1, 2] {
        g.bench_function(format!("{threads}_threads"), |b| {
            b.iter(|| {
                VisibilityMap::build(&map, &grid, Some(566.0), threads)
                    .unwrap()
                    .pairs()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, sight, build);
criterion_main!(benches);
