//! Multi-node tests of the locator on the deterministic harness (issue 4 acceptance).

use std::collections::BTreeSet;
use std::time::Duration;

use worldmesh_core::{Aabb, MessageClass, NodeId, ObjectId, Point3, Time, wire};
use worldmesh_locator::harness::{Delay, Harness};
use worldmesh_locator::index::SubKey;
use worldmesh_locator::msg::{Payload, PubItem, PushItem, Routed, SubItem};
use worldmesh_locator::workload::Workload;
use worldmesh_locator::{Keying, LocatorConfig, LocatorMsg, Op, RangeKey, RingState};

const FRAME: Duration = Duration::from_millis(100);

fn setup(nodes: usize, total: usize, per_node: usize, keying: Keying, seed: u64) -> (Harness, Workload) {
    setup_keyed(nodes, total, per_node, keying, RangeKey::X, seed)
}

fn setup_keyed(
    nodes: usize,
    total: usize,
    per_node: usize,
    keying: Keying,
    range_key: RangeKey,
    seed: u64,
) -> (Harness, Workload) {
    let mut wl = Workload::new(total, per_node, true, seed);
    wl.speed = 0.0;
    let mut cfg = LocatorConfig::new(keying, wl.world);
    cfg.range_key = range_key;
    cfg.dht_regions = (total * per_node) as u32;
    let h = Harness::new(
        total,
        nodes,
        &cfg,
        Delay::Uniform(Duration::from_millis(20)),
        0.0,
        seed,
    )
    .expect("valid setup");
    (h, wl)
}

/// Ground truth: objects of other live nodes inside any area of interest of `node`.
fn expected(wl: &Workload, h: &Harness, node: usize) -> BTreeSet<ObjectId> {
    let mine: Vec<Aabb> = wl
        .players
        .iter()
        .filter(|p| p.node.0 as usize == node)
        .map(|p| wl.aoi(p.pos))
        .collect();
    wl.players
        .iter()
        .filter(|p| p.node.0 as usize != node && h.is_up(p.node.0 as usize))
        .filter(|p| mine.iter().any(|r| r.contains(p.pos)))
        .map(|p| p.id)
        .collect()
}

fn discovered_since(h: &Harness, node: usize, since: Time) -> BTreeSet<ObjectId> {
    h.nodes()[node]
        .discoveries
        .iter()
        .filter(|(t, _)| *t >= since)
        .map(|(_, d)| d.object)
        .collect()
}

/// Every object inside a live node's interest was discovered in the last `window`, and
/// nothing outside it was. Returns the number of (node, object) pairs checked.
fn assert_exact_recall(h: &Harness, wl: &Workload, window: Duration, what: &str) -> usize {
    let since = Time(h.now().0 - window.as_micros() as u64);
    let mut pairs = 0;
    for n in 0..h.nodes().len() {
        if !h.is_up(n) {
            continue;
        }
        let want = expected(wl, h, n);
        let got = discovered_since(h, n, since);
        let missing: Vec<_> = want.difference(&got).collect();
        assert!(missing.is_empty(), "{what}: node {n} missed {missing:?}");
        let extra: Vec<_> = got.difference(&want).collect();
        assert!(
            extra.is_empty(),
            "{what}: node {n} was told about {extra:?} outside its interest"
        );
        pairs += want.len();
    }
    pairs
}

fn recall_static(keying: Keying, range_key: RangeKey) {
    let (mut h, mut wl) = setup_keyed(16, 16, 2, keying, range_key, 7);
    h.run_workload(&mut wl, Duration::from_secs(3), FRAME);
    let pairs = assert_exact_recall(&h, &wl, Duration::from_millis(1500), "static");
    assert!(pairs > 20, "the workload must produce overlaps to test ({pairs})");
}

#[test]
fn recall_is_complete_without_faults_rangedht() {
    recall_static(Keying::RangeDht, RangeKey::X);
}

#[test]
fn recall_is_complete_without_faults_rangedht_y() {
    recall_static(Keying::RangeDht, RangeKey::Y);
}

#[test]
fn recall_is_complete_without_faults_rangedht_hilbert() {
    recall_static(Keying::RangeDht, RangeKey::Hilbert);
}

#[test]
fn recall_is_complete_without_faults_dht() {
    recall_static(Keying::Dht, RangeKey::X);
}

fn recall_under_churn(keying: Keying, range_key: RangeKey) {
    let (mut h, mut wl) = setup_keyed(14, 18, 2, keying, range_key, 11);
    h.run_workload(&mut wl, Duration::from_secs(2), FRAME);
    // Joins split ranges; a graceful leave; a leave followed by a rejoin elsewhere.
    h.join(14, 3);
    h.join(15, 9);
    h.leave(5);
    h.run_workload(&mut wl, Duration::from_millis(500), FRAME);
    h.join(16, 0);
    h.leave(11);
    h.run_workload(&mut wl, Duration::from_millis(500), FRAME);
    h.join(11, 2);
    h.join(17, 12);
    h.run_workload(&mut wl, Duration::from_secs(4), FRAME);
    for n in [14, 15, 16, 17, 11] {
        assert_eq!(h.nodes()[n].loc.state(), RingState::Active, "node {n} joined");
    }
    assert_eq!(
        h.nodes()[5].loc.state(),
        RingState::Out {
            gateway: h.nodes()[5].loc.links().1.first().map_or(NodeId(6), |p| p.id)
        }
    );
    assert_exact_recall(&h, &wl, Duration::from_millis(1500), "after churn");
    // Ranges still tile the ring: the active nodes' arcs sum to the whole key space.
    let total: u128 = h
        .nodes()
        .iter()
        .filter_map(|s| s.loc.range())
        .map(|(lo, hi)| u128::from(hi.wrapping_sub(lo)))
        .sum();
    assert_eq!(total, 1u128 << 64);
}

#[test]
fn recall_survives_join_leave_and_splits_rangedht() {
    recall_under_churn(Keying::RangeDht, RangeKey::X);
}

#[test]
fn recall_survives_join_leave_and_splits_rangedht_y() {
    recall_under_churn(Keying::RangeDht, RangeKey::Y);
}

#[test]
fn recall_survives_join_leave_and_splits_rangedht_hilbert() {
    recall_under_churn(Keying::RangeDht, RangeKey::Hilbert);
}

#[test]
fn recall_survives_join_leave_and_splits_dht() {
    recall_under_churn(Keying::Dht, RangeKey::X);
}

#[test]
fn soft_state_expires_after_its_ttl() {
    let (mut h, mut wl) = setup(8, 8, 1, Keying::RangeDht, 3);
    h.run_workload(&mut wl, Duration::from_secs(2), FRAME);
    let stored = |h: &Harness| h.nodes().iter().map(|s| s.loc.store().pub_count()).sum::<usize>();
    assert_eq!(stored(&h), 8, "every player's publication is stored once");
    // Everyone stops publishing and subscribing; nothing is refreshed.
    let cfg = h.nodes()[0].loc.config().clone();
    let t0 = h.now();
    // The last publication of each player is at most one publication interval old.
    h.run_until(t0 + (cfg.pub_ttl - cfg.pub_interval - Duration::from_millis(100)));
    assert_eq!(stored(&h), 8, "still alive before the TTL");
    h.run_until(t0 + cfg.pub_ttl.max(cfg.pred_time) + Duration::from_millis(200));
    assert_eq!(stored(&h), 0, "publications expired");
    let subs: usize = h.nodes().iter().map(|s| s.loc.store().sub_count()).sum();
    assert_eq!(subs, 0, "subscriptions expired");
}

#[test]
fn a_failed_rendezvous_loses_items_only_until_refresh() {
    let (mut h, mut wl) = setup(12, 12, 2, Keying::RangeDht, 5);
    h.run_workload(&mut wl, Duration::from_secs(2), FRAME);
    let victim = 6;
    let held = h.nodes()[victim].loc.store().pub_count();
    assert!(held > 0, "the victim is a rendezvous for something");
    h.crash(victim);
    let cfg = h.nodes()[0].loc.config().clone();
    // Failure detection plus one refresh period of publications and subscriptions.
    let settle = cfg.fail_timeout + cfg.ping_interval * 2 + cfg.pred_time + cfg.pub_interval;
    h.run_workload(&mut wl, settle + Duration::from_secs(2), FRAME);
    let detected: u64 = h.nodes().iter().map(|s| s.loc.stats().failures_detected).sum();
    assert!(detected >= 1);
    assert_exact_recall(&h, &wl, Duration::from_millis(1500), "after a crash");
    let total: u128 = h
        .nodes()
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != victim)
        .filter_map(|(_, s)| s.loc.range())
        .map(|(lo, hi)| u128::from(hi.wrapping_sub(lo)))
        .sum();
    assert_eq!(total, 1u128 << 64, "the dead node's range is re-covered");
}

#[test]
fn routing_terminates_under_churn_and_loss() {
    let mut wl = Workload::new(24, 1, true, 9);
    let cfg = LocatorConfig::new(Keying::RangeDht, wl.world);
    let mut h =
        Harness::new(24, 20, &cfg, Delay::Uniform(Duration::from_millis(15)), 0.05, 9).expect("valid setup");
    h.run_workload(&mut wl, Duration::from_secs(2), FRAME);
    h.crash(3);
    h.leave(7);
    h.join(20, 1);
    h.run_workload(&mut wl, Duration::from_secs(1), FRAME);
    h.crash(12);
    h.join(21, 15);
    h.join(7, 18);
    h.run_workload(&mut wl, Duration::from_secs(3), FRAME);
    let loops: u64 = h.nodes().iter().map(|s| s.loc.stats().rejected.hop_limit).sum();
    assert_eq!(loops, 0, "no routed message hit the hop limit");
    let max_hops = h
        .nodes()
        .iter()
        .filter_map(|s| s.loc.stats().hops.iter().rposition(|c| *c > 0))
        .max()
        .unwrap_or(0);
    assert!(max_hops < 20, "longest route {max_hops} hops");
}

type Fingerprint = (Vec<Vec<(Time, ObjectId)>>, Vec<u64>);

fn fingerprint(seed: u64) -> Fingerprint {
    fingerprint_keyed(seed, Keying::Dht, RangeKey::X)
}

fn fingerprint_keyed(seed: u64, keying: Keying, range_key: RangeKey) -> Fingerprint {
    let mut wl = Workload::new(12, 2, false, seed);
    let mut cfg = LocatorConfig::new(keying, wl.world);
    cfg.range_key = range_key;
    let mut h = Harness::new(
        12,
        12,
        &cfg,
        Delay::Uniform(Duration::from_millis(30)),
        0.02,
        seed,
    )
    .expect("valid setup");
    h.run_workload(&mut wl, Duration::from_secs(3), FRAME);
    let d = h
        .nodes()
        .iter()
        .map(|s| s.discoveries.iter().map(|(t, d)| (*t, d.object)).collect())
        .collect();
    let b = h
        .nodes()
        .iter()
        .map(|s| s.loc.stats().traffic.total_sent().bytes)
        .collect();
    (d, b)
}

#[test]
fn same_seed_same_run() {
    let a = fingerprint(42);
    assert_eq!(a, fingerprint(42));
    assert!(a.0.iter().map(|v| v.len()).sum::<usize>() > 0);
    assert_ne!(a.1, fingerprint(43).1, "a different seed gives a different run");
}

#[test]
fn same_seed_same_run_hilbert() {
    let a = fingerprint_keyed(42, Keying::RangeDht, RangeKey::Hilbert);
    assert_eq!(a, fingerprint_keyed(42, Keying::RangeDht, RangeKey::Hilbert));
    assert!(a.0.iter().map(|v| v.len()).sum::<usize>() > 0);
    assert_ne!(
        a.1,
        fingerprint_keyed(42, Keying::RangeDht, RangeKey::X).1,
        "the Hilbert key routes differently from x"
    );
}

/// A Hilbert-keyed box is several key ranges; a rendezvous accepts each of them and
/// nothing else (here: the hull of all of them, a plausible forgery that would make the
/// spreading visit every node in between).
#[test]
fn forged_hilbert_range_is_rejected() {
    let (mut h, _) = setup_keyed(4, 4, 1, Keying::RangeDht, RangeKey::Hilbert, 1);
    let world = h.nodes()[0].loc.config().world;
    // A box around the map's centre straddles the four top quadrants of the curve.
    let c = world.center();
    let bbox = Aabb::around(Point3::new(c.x, c.y, 0.0), Point3::new(100.0, 100.0, 10.0));
    let iv = h.nodes()[0].loc.keyer().ranges(&bbox, 16).expect("range keying");
    assert!(iv.len() >= 2, "the box needs several ranges: {iv:?}");
    let sub = |lo: u64, hi: u64| SubItem {
        key: SubKey {
            node: NodeId(1),
            seq: 7,
        },
        bbox,
        core: bbox,
        ttl_ms: 1000,
        lo,
        hi,
        sent: Time::ZERO,
        reached: Time::ZERO,
    };
    let routed = |s: SubItem| {
        LocatorMsg::Route(Routed {
            origin: NodeId(1),
            key: s.lo,
            hops: 0,
            last: false,
            bounces: 0,
            payload: Payload::Sub(s),
        })
    };
    let hull = (iv[0].0, iv[iv.len() - 1].1);
    let cases = [
        routed(sub(hull.0, hull.1)),
        LocatorMsg::Spread {
            sub: sub(iv[1].0, iv[1].1.wrapping_add(1)),
            relay: false,
            prev: 0,
        },
    ];
    let now = Time::from_millis(10);
    let loc = &mut h.nodes_mut()[0].loc;
    for m in cases {
        let d = wire::encode(m.class(), &m).expect("encodes");
        loc.handle_datagram(now, NodeId(1), &d);
    }
    assert_eq!(loc.stats().rejected.forged_range, 2, "hull and stretched range");
    // Every genuine range is accepted (routed on or stored, never counted).
    for (lo, hi) in iv {
        let m = routed(sub(lo, hi));
        let d = wire::encode(m.class(), &m).expect("encodes");
        loc.handle_datagram(now, NodeId(1), &d);
    }
    assert_eq!(loc.stats().rejected.total(), 2, "no genuine range refused");
}

fn routed_sub(h: &Harness, origin: u32, bbox: Aabb, ttl_ms: u32, hops: u8, forge: bool) -> LocatorMsg {
    let k = h.nodes()[0].loc.keyer();
    let (lo, hi) = k.x_range(&bbox);
    let item = SubItem {
        key: SubKey {
            node: NodeId(origin),
            seq: 99,
        },
        bbox,
        core: bbox,
        ttl_ms,
        lo: if forge { lo.wrapping_add(12345) } else { lo },
        hi,
        sent: Time::ZERO,
        reached: Time::ZERO,
    };
    LocatorMsg::Route(Routed {
        origin: NodeId(origin),
        key: item.lo,
        hops,
        last: false,
        bounces: 0,
        payload: Payload::Sub(item),
    })
}

#[test]
fn bad_input_is_rejected_with_counters() {
    let (mut h, _) = setup(4, 4, 1, Keying::RangeDht, 1);
    let now = Time::from_millis(10);
    let good = Aabb::around(Point3::new(300.0, 300.0, 0.0), Point3::new(100.0, 100.0, 10.0));
    let huge = Aabb::around(Point3::new(300.0, 300.0, 0.0), Point3::new(9000.0, 100.0, 10.0));
    let cases = [
        routed_sub(&h, 1, good, 1000, 0, true),
        routed_sub(&h, 1, good, 0, 0, false),
        routed_sub(&h, 1, good, 3_600_000, 0, false),
        routed_sub(&h, 1, good, 1000, 200, false),
        routed_sub(&h, 1, huge, 1000, 0, false),
        {
            let mut m = routed_sub(&h, 1, good, 1000, 0, false);
            if let LocatorMsg::Route(Routed {
                payload: Payload::Sub(s),
                ..
            }) = &mut m
            {
                s.core = huge; // the core must lie inside the box
            }
            m
        },
        LocatorMsg::Route(Routed {
            origin: NodeId(1),
            key: 5,
            hops: 0,
            last: false,
            bounces: 0,
            payload: Payload::Pub(PubItem {
                object: ObjectId::new(NodeId(1), 1),
                primary: NodeId(1),
                pos: Point3::new(f32::NAN, 0.0, 0.0),
                path: None,
                kind: 0,
                ttl_ms: 100,
            }),
        }),
        LocatorMsg::RouteHint { lo: 7, hi: 7 },
        // Push requests for an object node 0 does not publish, for a non-member, and too many.
        LocatorMsg::Push {
            items: vec![
                PushItem {
                    object: ObjectId::new(NodeId(1), 1),
                    subscriber: NodeId(2),
                },
                PushItem {
                    object: ObjectId::new(NodeId(0), 1),
                    subscriber: NodeId(77),
                },
            ],
        },
        LocatorMsg::Push {
            items: vec![
                PushItem {
                    object: ObjectId::new(NodeId(0), 1),
                    subscriber: NodeId(2),
                };
                300
            ],
        },
    ];
    let loc = &mut h.nodes_mut()[0].loc;
    for m in cases {
        let d = wire::encode(m.class(), &m).expect("encodes");
        loc.handle_datagram(now, NodeId(1), &d);
    }
    // Garbage, a class mismatch, and a non-member.
    loc.handle_datagram(now, NodeId(1), &[1, 2, 3]);
    let d = wire::frame(MessageClass::LocatorRouting, &[0xff; 9]).expect("frames");
    loc.handle_datagram(now, NodeId(1), &d);
    let ping = LocatorMsg::LoadProbe;
    let d = wire::encode(MessageClass::LocatorRouting, &ping).expect("encodes");
    loc.handle_datagram(now, NodeId(1), &d);
    let d = wire::encode(ping.class(), &ping).expect("encodes");
    loc.handle_datagram(now, NodeId(77), &d);
    let r = loc.stats().rejected;
    assert_eq!(r.forged_range, 2, "forged key range and route hint");
    assert_eq!(r.bad_ttl, 2, "zero and too-long TTLs");
    assert_eq!(r.hop_limit, 1);
    assert_eq!(r.oversize, 2, "oversize subscription and push list");
    assert_eq!(r.bad_geometry, 2, "NaN position and a core outside its box");
    assert_eq!(r.unexpected, 1, "a push for a non-member");
    assert_eq!(
        loc.stats().pushes_stale,
        1,
        "a push for an object not published here"
    );
    assert!(loc.poll_push().is_none(), "no push request reached the node");
    assert_eq!(r.malformed, 3);
    assert_eq!(r.not_member, 1);
    assert_eq!(
        loc.store().sub_count() + loc.store().pub_count(),
        0,
        "nothing bad was stored"
    );
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn arbitrary_datagrams_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300), class in 0u8..6) {
            let (mut h, _) = setup(3, 3, 1, Keying::Dht, 1);
            let cls = MessageClass::from_u8(class).unwrap_or(MessageClass::Control);
            let d = wire::frame(cls, &bytes).expect("frames");
            h.nodes_mut()[0].loc.handle_datagram(Time::from_millis(5), NodeId(1), &d);
            h.nodes_mut()[0].loc.handle_datagram(Time::from_millis(5), NodeId(2), &bytes);
            h.nodes_mut()[0].loc.handle_timeout(Time::from_millis(5000));
        }
    }
}

/// With moving players, every object that stays inside a node's *unpredicted* interest for
/// a second is discovered within that second: the predicted, cached, aggregated
/// subscriptions never lose an object the unpredicted one would catch.
fn moving_objects_inside_interest_are_discovered(keying: Keying) {
    use std::collections::BTreeMap;
    let mut wl = Workload::new(12, 2, true, 21);
    let mut cfg = LocatorConfig::new(keying, wl.world);
    cfg.dht_regions = 24;
    let mut h =
        Harness::new(12, 12, &cfg, Delay::Uniform(Duration::from_millis(25)), 0.0, 21).expect("valid setup");
    h.run_workload(&mut wl, Duration::from_secs(2), FRAME);
    let mut entered: BTreeMap<(usize, ObjectId), Time> = BTreeMap::new();
    let mut checked = 0;
    for _ in 0..60 {
        let t = h.now() + FRAME;
        h.run_until(t);
        wl.step(FRAME.as_secs_f32());
        for i in 0..12 {
            let ops = wl.ops(NodeId(i as u32));
            h.apply_ops(i, ops);
        }
        let now = h.now();
        let mut inside = BTreeSet::new();
        for n in 0..12 {
            for o in expected(&wl, &h, n) {
                inside.insert((n, o));
                let since = *entered.entry((n, o)).or_insert(now);
                if now.saturating_since(since) >= Duration::from_secs(1) {
                    let seen = h.nodes()[n]
                        .discoveries
                        .iter()
                        .any(|(t, d)| d.object == o && *t >= since);
                    assert!(
                        seen,
                        "node {n} never discovered {o:?}, inside its interest since {since:?}"
                    );
                    checked += 1;
                }
            }
        }
        entered.retain(|k, _| inside.contains(k));
    }
    assert!(
        checked > 50,
        "enough long-lived overlaps were checked ({checked})"
    );
}

#[test]
fn prediction_never_misses_moving_objects_rangedht() {
    moving_objects_inside_interest_are_discovered(Keying::RangeDht);
}

#[test]
fn prediction_never_misses_moving_objects_dht() {
    moving_objects_inside_interest_are_discovered(Keying::Dht);
}

/// Regression (issue 4, lost matches in the full simulation): a subscriber whose area of
/// interest jumps across the map (a player that dies looks at its far-away respawn point)
/// must discover the static objects at its new place promptly. The jump once looked like a
/// huge velocity: the predicted box became oversize, was refused for sending but still
/// entered the subscription cache, which then suppressed every subscription around the new
/// place until it expired, so the objects there were found a second late or, when the
/// player jumped again, not at all.
fn teleporting_subscriber_discovers_static_objects(keying: Keying) {
    let nodes = 32;
    let mut wl = Workload::new(nodes, 2, true, 17);
    wl.speed = 0.0;
    let mut cfg = LocatorConfig::new(keying, wl.world);
    cfg.dht_regions = (nodes * 2) as u32;
    // No aggregation: an aggregated box's unpredicted core is the bounding box of the merged
    // areas (a little larger than their union), which would blur the push check below.
    cfg.aggregate_factor = 0.0;
    let mut h = Harness::new(
        nodes,
        nodes,
        &cfg,
        Delay::Uniform(Duration::from_millis(20)),
        0.0,
        17,
    )
    .expect("valid setup");
    // Every area of interest any node had (players only move by the jumps below).
    let mut aois: Vec<(NodeId, Aabb)> = wl.players.iter().map(|p| (p.node, wl.aoi(p.pos))).collect();
    h.run_workload(&mut wl, Duration::from_secs(3), FRAME);
    let mut checked = 0;
    let mut used = Vec::new();
    for round in 0..4 {
        // The mover is node 0's first player; it jumps next to the farthest object of
        // another node (the map is 4800 wide, so the jump is thousands of units).
        let mover = wl
            .players
            .iter()
            .position(|p| p.node == NodeId(0))
            .expect("node 0 has a player");
        let from = wl.players[mover].pos;
        let target = wl
            .players
            .iter()
            .filter(|p| p.node != NodeId(0) && !used.contains(&p.id))
            .max_by(|a, b| a.pos.distance(from).total_cmp(&b.pos.distance(from)))
            .copied()
            .expect("other players");
        // A new target each round: a rendezvous does not repeat a push within `push_quiet`.
        used.push(target.id);
        assert!(target.pos.distance(from) > 2000.0, "round {round}: a long jump");
        wl.players[mover].pos = Point3::new(target.pos.x + 50.0, target.pos.y, 0.0);
        aois.push((NodeId(0), wl.aoi(wl.players[mover].pos)));
        let jumped = h.now();
        // Rounds are longer than `push_quiet`: a rendezvous may skip a push it made to the
        // same node for the same object less than that long ago.
        h.run_workload(&mut wl, cfg.push_quiet + Duration::from_millis(200), FRAME);
        let found = h.nodes()[0]
            .discoveries
            .iter()
            .filter(|(t, d)| *t >= jumped && d.object == target.id)
            .map(|(t, _)| *t)
            .min();
        let Some(at) = found else {
            panic!(
                "round {round}: {:?} next to the jumped player was never discovered",
                target.id
            );
        };
        // Routing and matching take a few 20-ms hops; a frame of slack.
        assert!(
            at.saturating_since(jumped) <= Duration::from_millis(400),
            "round {round}: discovered {:?} after the jump",
            at.saturating_since(jumped)
        );
        // The object is inside the mover's unpredicted interest: its primary's node is asked
        // to push the state to node 0 as well (rendezvous push), no later than the discovery.
        let pushed = h.nodes()[target.node.0 as usize]
            .pushes
            .iter()
            .filter(|(t, p)| *t >= jumped && p.object == target.id && p.subscriber == NodeId(0))
            .map(|(t, _)| *t)
            .min();
        assert!(
            pushed.is_some_and(|t| t.saturating_since(jumped) <= Duration::from_millis(400)),
            "round {round}: no push request for {:?}",
            target.id
        );
        checked += 1;
    }
    assert_eq!(checked, 4);
    // Pushes only for objects that were inside the subscriber's *unpredicted* interest
    // (objects are static here, so their position now is their position then); objects
    // only inside a predicted box are matched but never pushed.
    let mut pushes = 0;
    for (i, slot) in h.nodes().iter().enumerate() {
        for (_, p) in &slot.pushes {
            let obj = wl
                .players
                .iter()
                .find(|q| q.id == p.object)
                .expect("a known object");
            assert_eq!(obj.node.0 as usize, i, "pushes go to the object's primary");
            if obj.node == NodeId(0) {
                continue; // node 0's players moved (the jumper); the others are static
            }
            let seen = aois
                .iter()
                .any(|(n, b)| *n == p.subscriber && b.contains(obj.pos));
            assert!(
                seen,
                "{:?} pushed to {:?} outside its interest",
                p.object, p.subscriber
            );
            pushes += 1;
        }
    }
    assert!(pushes > 0);
}

#[test]
fn teleporting_subscriber_discovers_static_objects_rangedht() {
    teleporting_subscriber_discovers_static_objects(Keying::RangeDht);
}

#[test]
fn teleporting_subscriber_discovers_static_objects_dht() {
    teleporting_subscriber_discovers_static_objects(Keying::Dht);
}

/// For `frames` frames node 0 publishes `x` at `pos` (with `ahead`) while node 1's
/// watcher at `watched` subscribes `aoi`; returns the positions node 1 was told `x` at.
fn publish_and_watch(
    h: &mut Harness,
    x: ObjectId,
    pos: Point3,
    ahead: Option<Point3>,
    watched: Point3,
    aoi: Aabb,
    frames: usize,
) -> Vec<Point3> {
    let publish = [Op::Publish {
        id: x,
        pos,
        kind: 0,
        ahead,
    }];
    run_frames(h, &publish, watched, aoi, frames);
    h.nodes()[1]
        .discoveries
        .iter()
        .filter(|(_, d)| d.object == x)
        .map(|(_, d)| d.pos)
        .collect()
}

/// `frames` frames of node 0 publishing `publish` and node 1 publishing its watcher at
/// `watched` and subscribing to `aoi`.
fn run_frames(h: &mut Harness, publish: &[Op], watched: Point3, aoi: Aabb, frames: usize) {
    let watcher = ObjectId::new(NodeId(1), 1);
    for _ in 0..frames {
        h.apply_ops(0, publish.to_vec());
        let watch = vec![
            Op::Publish {
                id: watcher,
                pos: watched,
                kind: 0,
                ahead: None,
            },
            Op::Subscribe {
                owner: watcher,
                region: aoi,
            },
        ];
        h.apply_ops(1, watch);
        let t = h.now() + FRAME;
        h.run_until(t);
    }
}

/// A jump announced ahead of time (a respawn point, paper `000` §6.2 predictive
/// publications): a subscriber at the jump's point discovers the object there while the
/// object is still far away, the announcement is routed once however many frames repeat
/// it, and without it nothing is found.
fn announced_jump_is_discovered_at_its_point(keying: Keying) {
    let world = Aabb::from_corners(
        Point3::new(0.0, 0.0, -1000.0),
        Point3::new(4800.0, 4800.0, 1000.0),
    );
    let mut cfg = LocatorConfig::new(keying, world);
    cfg.dht_regions = 64;
    for announce in [true, false] {
        let mut h = Harness::new(16, 16, &cfg, Delay::Uniform(Duration::from_millis(20)), 0.0, 5)
            .expect("valid setup");
        let x = ObjectId::new(NodeId(0), 1);
        let far = Point3::new(200.0, 200.0, 0.0);
        let spawn = Point3::new(4050.0, 4000.0, 0.0);
        let watched = Point3::new(4000.0, 4000.0, 0.0);
        let aoi = Aabb::around(watched, Point3::new(450.0, 450.0, 1000.0));
        let found = publish_and_watch(&mut h, x, far, announce.then_some(spawn), watched, aoi, 15);
        if announce {
            assert!(!found.is_empty(), "{keying:?}: the announced point was matched");
            assert!(found.iter().all(|p| *p == spawn), "{found:?}");
            assert_eq!(h.nodes()[0].loc.stats().jumps_announced, 1, "announced once");
        } else {
            assert!(
                found.is_empty(),
                "{keying:?}: nothing to find without the announcement"
            );
            assert_eq!(h.nodes()[0].loc.stats().jumps_announced, 0);
        }
    }
}

#[test]
fn announced_jump_is_discovered_at_its_point_rangedht() {
    announced_jump_is_discovered_at_its_point(Keying::RangeDht);
}

#[test]
fn announced_jump_is_discovered_at_its_point_dht() {
    announced_jump_is_discovered_at_its_point(Keying::Dht);
}

/// A range publication (paper `000` §3, §6.2): a still-outside object heading into a
/// subscriber's interest publishes its path; the subscriber is told where the path enters
/// its interest, and the rendezvous asks the primary to push. With point publications
/// only, nothing is found while the object's point stays outside.
fn range_publication_is_told_where_its_path_enters(keying: Keying) {
    let world = Aabb::from_corners(
        Point3::new(0.0, 0.0, -1000.0),
        Point3::new(4800.0, 4800.0, 1000.0),
    );
    for range_pubs in [true, false] {
        let mut cfg = LocatorConfig::new(keying, world);
        cfg.dht_regions = 64;
        cfg.range_pubs = range_pubs;
        let mut h = Harness::new(16, 16, &cfg, Delay::Uniform(Duration::from_millis(20)), 0.0, 9)
            .expect("valid setup");
        let x = ObjectId::new(NodeId(0), 1);
        let pos = Point3::new(2000.0, 2000.0, 0.0);
        let ahead = Point3::new(2080.0, 2000.0, 0.0);
        let watched = Point3::new(2400.0, 2000.0, 0.0);
        // The interest's left face is at x = 2040: between the position and the ahead point.
        let aoi = Aabb::from_corners(
            Point3::new(2040.0, 1800.0, -1000.0),
            Point3::new(2760.0, 2200.0, 1000.0),
        );
        let found = publish_and_watch(&mut h, x, pos, Some(ahead), watched, aoi, 10);
        let pushed = h.nodes()[0]
            .pushes
            .iter()
            .any(|(_, p)| p.object == x && p.subscriber == NodeId(1));
        if range_pubs {
            assert_eq!(
                found,
                vec![Point3::new(2040.0, 2000.0, 0.0)],
                "{keying:?}: told once, at the entry"
            );
            assert!(pushed, "{keying:?}: the rendezvous asked the primary to push");
        } else {
            assert!(
                found.is_empty(),
                "{keying:?}: a point outside the interest is not told"
            );
            assert!(!pushed, "{keying:?}");
        }
    }
}

#[test]
fn range_publication_is_told_where_its_path_enters_rangedht() {
    range_publication_is_told_where_its_path_enters(Keying::RangeDht);
}

#[test]
fn range_publication_is_told_where_its_path_enters_dht() {
    range_publication_is_told_where_its_path_enters(Keying::Dht);
}

/// An object that stays in a subscriber's interest is told again once per retell period,
/// never more often, whichever path tells it: a match arriving, or the subscriber's check
/// of its cached matches at every frame and every sweep, which skips those it was told
/// about within the period.
fn an_object_in_view_is_retold_once_per_retell_period(keying: Keying) {
    let world = Aabb::from_corners(
        Point3::new(0.0, 0.0, -1000.0),
        Point3::new(4800.0, 4800.0, 1000.0),
    );
    let mut cfg = LocatorConfig::new(keying, world);
    cfg.dht_regions = 64;
    let mut h =
        Harness::new(16, 16, &cfg, Delay::Uniform(Duration::from_millis(20)), 0.0, 9).expect("valid setup");
    // Two objects in view (the subscriber's checks walk its cached matches and the
    // matches told in id order).
    let objects = [
        (ObjectId::new(NodeId(0), 1), Point3::new(2000.0, 2000.0, 0.0)),
        (ObjectId::new(NodeId(0), 2), Point3::new(2100.0, 1900.0, 0.0)),
    ];
    let aoi = Aabb::from_corners(
        Point3::new(1800.0, 1800.0, -1000.0),
        Point3::new(2600.0, 2200.0, 1000.0),
    );
    let publish: Vec<Op> = objects
        .iter()
        .map(|&(id, pos)| Op::Publish {
            id,
            pos,
            kind: 0,
            ahead: None,
        })
        .collect();
    run_frames(&mut h, &publish, Point3::new(2400.0, 2000.0, 0.0), aoi, 45);
    for (x, _) in objects {
        let told: Vec<Time> = h.nodes()[1]
            .discoveries
            .iter()
            .filter(|(_, d)| d.object == x)
            .map(|(t, _)| *t)
            .collect();
        assert!(told.len() >= 3, "{keying:?}: {x} told at {told:?}");
        for w in told.windows(2) {
            let gap = w[1] - w[0];
            assert!(
                gap >= cfg.retell && gap <= cfg.retell + 2 * FRAME,
                "{keying:?}: {x} told at {told:?}"
            );
        }
    }
}

#[test]
fn an_object_in_view_is_retold_once_per_retell_period_rangedht() {
    an_object_in_view_is_retold_once_per_retell_period(Keying::RangeDht);
}

#[test]
fn an_object_in_view_is_retold_once_per_retell_period_dht() {
    an_object_in_view_is_retold_once_per_retell_period(Keying::Dht);
}

/// Load balancing's leave-rejoin move (paper `000` §6.3): a node leaves its range and
/// re-joins inside another node's range. Successor lists further back still skip the
/// re-joined node until stabilisation reaches them, yet a subscription spreading over the
/// re-joined node's new range must reach every publication stored there (recall 100%).
fn recall_after_leave_rejoin(mover: usize, contact: usize, seed: u64, range_key: RangeKey) {
    let (mut h, mut wl) = setup_keyed(16, 16, 2, Keying::RangeDht, range_key, seed);
    h.run_workload(&mut wl, Duration::from_secs(2), FRAME);
    h.leave(mover);
    h.join(mover, contact);
    h.run_workload(&mut wl, Duration::from_millis(1800), FRAME);
    assert_eq!(
        h.nodes()[mover].loc.state(),
        RingState::Active,
        "node {mover} re-joined"
    );
    let (lo, hi) = h.nodes()[mover].loc.range().expect("active");
    let (clo, _) = h.nodes()[contact].loc.range().expect("active");
    assert_eq!(clo, hi, "node {mover} now precedes its contact {contact}");
    assert_ne!(lo, hi);
    let pairs = assert_exact_recall(&h, &wl, Duration::from_millis(1200), "after leave-rejoin");
    assert!(pairs > 20, "the workload must produce overlaps to test ({pairs})");
}

#[test]
fn recall_survives_leave_rejoin_moves() {
    for (mover, contact, seed) in [(5, 12, 3), (2, 9, 5), (13, 6, 9)] {
        recall_after_leave_rejoin(mover, contact, seed, RangeKey::X);
    }
}

#[test]
fn recall_survives_leave_rejoin_moves_hilbert() {
    for (mover, contact, seed) in [(5, 12, 3), (2, 9, 5), (13, 6, 9)] {
        recall_after_leave_rejoin(mover, contact, seed, RangeKey::Hilbert);
    }
}

/// The captured load-balancing failure, made deterministic: a node leaves and re-joins
/// far away inside another node's range, and a subscription spanning the ranges of the
/// four nodes before its new place, its new range and the contact's arrives while those
/// predecessors' successor lists still skip it (stabilisation runs once per ping period).
/// The subscription must still reach every publication stored in its range.
#[test]
fn subscription_reaches_a_node_that_rejoined_elsewhere() {
    let (nodes, per_node, seed) = (16, 4, 21);
    let mut wl = Workload::new(nodes, per_node, true, seed);
    wl.speed = 0.0;
    let cfg = LocatorConfig::new(Keying::RangeDht, wl.world);
    let delay = Delay::Uniform(Duration::from_millis(20));
    let mut h = Harness::new(nodes, nodes, &cfg, delay, 0.0, seed).expect("valid setup");
    h.run_workload(&mut wl, Duration::from_millis(2500), FRAME);
    let ring = |h: &Harness| {
        let mut r: Vec<(u64, usize)> = (0..nodes)
            .filter_map(|i| h.nodes()[i].loc.range().map(|(_, hi)| (hi, i)))
            .collect();
        r.sort();
        r
    };
    let before = ring(&h);
    let (mover, contact) = (before[1].1, before[12].1);
    h.leave(mover);
    h.join(mover, contact);
    // Long enough for the join and the hand-off, shorter than a stabilisation round.
    h.run_workload(&mut wl, Duration::from_millis(300), FRAME);
    let after = ring(&h);
    let at = after
        .iter()
        .position(|(_, i)| *i == mover)
        .expect("mover re-joined");
    assert_eq!(after[at + 1].1, contact, "the mover now precedes its contact");
    let (mlo, mhi) = h.nodes()[mover].loc.range().expect("active");
    // Keys from the start of the range of the fourth node before the mover to its contact.
    let first = h.nodes()[after[at - 4].1].loc.range().expect("active").0;
    let last = after[at + 1].0;
    let keyer = h.nodes()[0].loc.keyer().clone();
    let inside: Vec<Point3> = wl
        .players
        .iter()
        .map(|p| p.pos)
        .filter(|p| {
            let k = keyer.point_key(*p);
            k > first && k <= last
        })
        .collect();
    assert!(
        inside.iter().any(|p| in_range(keyer.point_key(*p), mlo, mhi)),
        "some publication is stored at the mover"
    );
    let (x0, x1) = inside
        .iter()
        .fold((f32::MAX, f32::MIN), |(a, b), p| (a.min(p.x), b.max(p.x)));
    let (y0, y1) = inside
        .iter()
        .fold((f32::MAX, f32::MIN), |(a, b), p| (a.min(p.y), b.max(p.y)));
    let region = Aabb::from_corners(Point3::new(x0, y0, -50.0), Point3::new(x1, y1, 50.0));
    let subscriber = after[(at + 6) % after.len()].1;
    let owner = wl
        .players
        .iter()
        .find(|p| p.node.0 as usize == subscriber)
        .expect("a player")
        .id;
    let sent = h.nodes()[subscriber].loc.stats().subs_sent;
    h.apply_ops(subscriber, vec![Op::Subscribe { owner, region }]);
    assert!(
        h.nodes()[subscriber].loc.stats().subs_sent > sent,
        "the subscription was sent"
    );
    h.run_until(h.now() + Duration::from_millis(400));
    // Every publication inside the region is stored at a rendezvous that now also holds a
    // subscription of the subscriber covering the region, so the match was made there.
    let want: Vec<&worldmesh_locator::workload::Player> = wl
        .players
        .iter()
        .filter(|p| p.node.0 as usize != subscriber && region.contains(p.pos))
        .collect();
    assert!(
        want.len() >= 8,
        "the subscription covers publications ({})",
        want.len()
    );
    let mut missed = Vec::new();
    for p in &want {
        let holders: Vec<usize> = (0..nodes)
            .filter(|i| h.nodes()[*i].loc.store().publication(p.id).is_some())
            .collect();
        assert!(!holders.is_empty(), "{:?} is stored somewhere", p.id);
        let reached = holders.iter().any(|i| {
            (0..=64).any(|seq| {
                let k = SubKey {
                    node: NodeId(subscriber as u32),
                    seq,
                };
                h.nodes()[*i]
                    .loc
                    .store()
                    .sub(k)
                    .is_some_and(|s| s.bbox.contains(region.min) && s.bbox.contains(region.max))
            })
        });
        if !reached {
            missed.push((p.id, holders));
        }
    }
    assert!(
        missed.is_empty(),
        "the subscription missed {missed:?} of {}",
        want.len()
    );
}

fn in_range(k: u64, lo: u64, hi: u64) -> bool {
    k != lo && k.wrapping_sub(lo) <= hi.wrapping_sub(lo)
}

#[test]
fn configs_other_nodes_would_refuse_are_errors() {
    use worldmesh_locator::{Locator, LocatorError};
    let world = LocatorConfig::model_world(4, true);
    let ids: Vec<NodeId> = (0..4).map(NodeId).collect();
    let build = |f: &dyn Fn(&mut LocatorConfig)| {
        let mut c = LocatorConfig::new(Keying::Dht, world);
        f(&mut c);
        Locator::new(NodeId(0), c, &ids, &ids, 1, Time::ZERO).err()
    };
    assert_eq!(build(&|_| {}), None);
    for bad in [
        &(|c: &mut LocatorConfig| c.pub_ttl = Duration::ZERO) as &dyn Fn(&mut LocatorConfig),
        &|c| c.pub_ttl = c.max_ttl + Duration::from_millis(1),
        &|c| c.pred_time = c.max_ttl * 2,
        &|c| c.pub_interval = c.pub_ttl * 2,
    ] {
        assert!(matches!(build(bad), Some(LocatorError::BadConfig(_))));
    }
}

#[test]
fn key_ranges_are_cut_into_pieces_except_with_load_balancing() {
    use worldmesh_locator::Locator;
    let world = LocatorConfig::model_world(16, true);
    let ids: Vec<NodeId> = (0..16).map(NodeId).collect();
    let wide = Aabb::from_corners(Point3::new(100.0, 100.0, 0.0), Point3::new(2000.0, 500.0, 0.0));
    let pieces = |loadbal: bool, chunk_nodes: usize| {
        let mut c = LocatorConfig::new(Keying::RangeDht, world);
        c.loadbal = loadbal;
        c.chunk_nodes = chunk_nodes;
        let loc = Locator::new(NodeId(0), c, &ids, &ids, 1, Time::ZERO).expect("valid config");
        loc.keyer().ranges(&wide, 64).expect("ranges").len()
    };
    // The box spans 1900 of 2400 units: about 12.7 of 16 nodes' ranges.
    assert_eq!(pieces(false, 2), 7, "pieces of two nodes' ranges");
    assert_eq!(pieces(false, 0), 1, "0 keeps the range whole");
    assert_eq!(pieces(true, 2), 1, "load balancing keeps it whole");
}
