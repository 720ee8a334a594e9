//! Matching at one rendezvous holding 10,000 subscriptions (issue 4 benchmark): the grid
//! index against a linear scan of the same store. Each iteration matches one publication
//! (point) against every stored subscription; matches/s = 1 / time per iteration. Also a
//! new subscription against 10,000 stored publications.
#![allow(missing_docs)]

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use worldmesh_core::{Aabb, DetRng, NodeId, ObjectId, Point3, Time};
use worldmesh_locator::index::{LinearStore, MatchIndex, StoredPub, StoredSub, SubKey};

const N: usize = 10_000;
/// A 64-node `rect` map: 9600 × 2400.
const W: f32 = 9600.0;
const H: f32 = 2400.0;

fn sub_box(rng: &mut DetRng) -> Aabb {
    let c = Point3::new(rng.range_f32(0.0, W), rng.range_f32(0.0, H), 0.0);
    let h = rng.range_f32(450.0, 700.0);
    Aabb::around(c, Point3::new(h, h, 100.0))
}

fn point(rng: &mut DetRng) -> Point3 {
    Point3::new(rng.range_f32(0.0, W), rng.range_f32(0.0, H), 0.0)
}

fn stores() -> (MatchIndex, LinearStore) {
    let mut rng = DetRng::new(4);
    let mut ix = MatchIndex::new(256.0, 1 << 20);
    let mut lin = LinearStore::default();
    for i in 0..N {
        let k = SubKey {
            node: NodeId((i % 256) as u32),
            seq: i as u32,
        };
        let s = StoredSub {
            bbox: sub_box(&mut rng),
            expires: Time::MAX,
        };
        ix.insert_sub(k, s).expect("valid box");
        lin.subs.push((k, s));
        let id = ObjectId::new(NodeId((i % 256) as u32), i as u32);
        let pos = point(&mut rng);
        let p = StoredPub {
            primary: id.origin,
            pos,
            path: None,
            expires: Time::MAX,
        };
        ix.insert_pub(id, p).expect("valid point");
        lin.pubs.push((id, p));
    }
    (ix, lin)
}

fn matching(c: &mut Criterion) {
    let (ix, lin) = stores();
    let mut rng = DetRng::new(5);
    let probes: Vec<Point3> = (0..1024).map(|_| point(&mut rng)).collect();
    let boxes: Vec<Aabb> = (0..1024).map(|_| sub_box(&mut rng)).collect();
    let now = Time::from_millis(1);
    let mut total = 0usize;
    for p in &probes {
        ix.subs_containing(*p, now, |_, _| total += 1);
    }
    let mut total_pubs = 0usize;
    for q in &boxes {
        ix.pubs_inside(q, now, |_, _| total_pubs += 1);
    }
    println!(
        "mean matching subscriptions per publication: {:.1}; publications per new subscription: {:.1}",
        total as f64 / probes.len() as f64,
        total_pubs as f64 / boxes.len() as f64
    );
    let mut g = c.benchmark_group("match_pub_vs_10k_subs");
    let mut i = 0usize;
    g.bench_function("grid_index", |b| {
        b.iter(|| {
            let p = probes[i % probes.len()];
            i += 1;
            let mut n = 0u32;
            ix.subs_containing(p, now, |_, _| n += 1);
            black_box(n)
        })
    });
    g.bench_function("linear_scan", |b| {
        b.iter(|| {
            let p = probes[i % probes.len()];
            i += 1;
            let mut n = 0u32;
            lin.subs_containing(p, now, |_, _| n += 1);
            black_box(n)
        })
    });
    g.finish();
    let mut g = c.benchmark_group("match_sub_vs_10k_pubs");
    g.bench_function("grid_index", |b| {
        b.iter(|| {
            let q = boxes[i % boxes.len()];
            i += 1;
            let mut n = 0u32;
            ix.pubs_inside(&q, now, |_, _| n += 1);
            black_box(n)
        })
    });
    g.bench_function("linear_scan", |b| {
        b.iter(|| {
            let q = boxes[i % boxes.len()];
            i += 1;
            let mut n = 0u32;
            lin.pubs_inside(&q, now, |_, _| n += 1);
            black_box(n)
        })
    });
    g.finish();
}

criterion_group!(benches, matching);
criterion_main!(benches);
