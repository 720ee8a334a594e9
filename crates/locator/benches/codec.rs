//! The locator's message codec: [`LocatorCodec`] against bitcode's derived encoder and
//! decoder of [`LocatorMsg`] (the same bytes; `crates/sim/PERFORMANCE.md`, twelfth round),
//! each with its buffers reused between messages as a locator does. Two messages of the
//! `dht` locator's traffic: a routed subscription, and the delivery of eight matches.
#![allow(missing_docs)]

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use worldmesh_core::wire::{self, MAX_PAYLOAD};
use worldmesh_core::{Aabb, Frame, NodeId, ObjectId, Point3, Time};
use worldmesh_locator::LocatorMsg;
use worldmesh_locator::index::SubKey;
use worldmesh_locator::msg::{LocatorCodec, MatchItem, PathOffset, Payload, Routed, SubItem};

fn messages() -> [(&'static str, LocatorMsg); 2] {
    let bbox = Aabb::around(
        Point3::new(4_000.0, 1_200.0, 0.0),
        Point3::new(600.0, 600.0, 100.0),
    );
    let core = Aabb::around(
        Point3::new(4_000.0, 1_200.0, 0.0),
        Point3::new(500.0, 500.0, 100.0),
    );
    let sub = SubItem {
        key: SubKey {
            node: NodeId(17),
            seq: 40_211,
        },
        bbox,
        core,
        ttl_ms: 1_000,
        lo: 0x4000_0000_0000_0000,
        hi: 0x4000_0000_0000_0000,
        sent: Time::from_millis(12_345),
        reached: Time::ZERO,
    };
    let route = LocatorMsg::Route(Routed {
        origin: NodeId(17),
        key: 0x4000_0000_0000_0000,
        hops: 2,
        last: false,
        bounces: 0,
        payload: Payload::Sub(sub),
    });
    let items = (0..8u32)
        .map(|i| MatchItem {
            object: ObjectId::new(NodeId(i * 7), 1_000 + i),
            primary: NodeId(i * 7),
            pos: Point3::new(3_800.0 + 50.0 * i as f32, 1_100.0, 0.0),
            path: Some(PathOffset([12, -40, 0])),
            ttl_ms: 1_000,
        })
        .collect();
    let matches = LocatorMsg::Matches {
        lo: 0x3f00_0000_0000_0000,
        hi: 0x4100_0000_0000_0000,
        items,
    };
    [("routed subscription", route), ("8 matches", matches)]
}

fn codec(c: &mut Criterion) {
    let mut g = c.benchmark_group("locator_codec");
    for (name, msg) in messages() {
        let class = msg.class();
        let mut derived = wire::Codec::new();
        let mut ours = LocatorCodec::new();
        let datagram = ours.encode(&msg).expect("fits a datagram");
        assert_eq!(
            datagram,
            derived.encode(class, &msg).expect("fits"),
            "the same bytes"
        );
        g.bench_function(format!("{name}: encode, derived"), |b| {
            b.iter(|| derived.encode(class, black_box(&msg)).expect("fits"))
        });
        g.bench_function(format!("{name}: encode, LocatorCodec"), |b| {
            b.iter(|| ours.encode(black_box(&msg)).expect("fits"))
        });
        let frame = Frame::parse(&datagram, MAX_PAYLOAD).expect("a frame");
        g.bench_function(format!("{name}: decode, derived"), |b| {
            b.iter(|| derived.decode::<LocatorMsg>(black_box(&frame)).expect("decodes"))
        });
        g.bench_function(format!("{name}: decode, LocatorCodec"), |b| {
            b.iter(|| ours.decode(black_box(&frame)).expect("decodes"))
        });
    }
    g.finish();
}

criterion_group!(benches, codec);
criterion_main!(benches);
