//! The node driven by hand through its sans-IO interface: no simulator, no sockets.

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use worldmesh_core::wire::{self, PROTOCOL_VERSION};
use worldmesh_core::{DetRng, MessageClass, NodeId, ObjectId, Time};
use worldmesh_game::wander::{Bot, WanderConfig};
use worldmesh_node::{Event, LocatorOp, Mode, Node, NodeConfig, Packet, ReplicaMsg, Transmit, UpdateItem};
use worldmesh_replica::{GameObject, Role};

fn node(id: u32, n: u32, mode: Mode) -> Node<Bot> {
    let peers = (0..n).filter(|p| *p != id).map(NodeId).collect();
    Node::new(
        NodeConfig::new(NodeId(id), peers, 7).with_mode(mode),
        Arc::new(WanderConfig::default()),
        Time::ZERO,
    )
}

fn drain(n: &mut Node<Bot>) -> Vec<Transmit> {
    std::iter::from_fn(|| n.poll_transmit()).collect()
}

fn deliver(from: &mut Node<Bot>, to: &mut Node<Bot>, now: Time) {
    let dst = to.id();
    for t in drain(from).into_iter().filter(|t| t.dst == dst) {
        to.handle_datagram(now, from.id(), &t.datagram);
    }
}

fn bot(seed: u64) -> Bot {
    Bot::random(&WanderConfig::default(), &mut DetRng::new(seed))
}

#[test]
fn broadcast_frames_reach_every_peer_and_replicas_follow_the_primary() {
    let mut a = node(0, 3, Mode::Broadcast);
    let mut b = node(1, 3, Mode::Broadcast);
    let id = a.spawn(Time::ZERO, bot(1));
    a.handle_timeout(Time::ZERO);
    assert_eq!(
        a.poll_timeout(),
        Some(Time::from_millis(100)),
        "next frame one interval later"
    );
    let out = drain(&mut a);
    let mut dsts: Vec<_> = out.iter().map(|t| t.dst).collect();
    dsts.sort();
    assert_eq!(dsts, vec![NodeId(1), NodeId(2)]);
    assert!(out.iter().all(|t| t.class == MessageClass::ObjectUpdate));
    let to_b = out.iter().find(|t| t.dst == NodeId(1)).unwrap();
    b.handle_datagram(Time::from_millis(30), NodeId(0), &to_b.datagram);
    let e = b.store().get(id).unwrap();
    assert_eq!(e.role, Role::Replica { primary: NodeId(0) });
    assert_eq!(e.object, *a.store().object(id).unwrap());
    let first = e.object.pos;
    // b acknowledges at its next frame; a's next update is then a delta.
    b.handle_timeout(Time::from_millis(40));
    deliver(&mut b, &mut a, Time::from_millis(60));
    a.handle_timeout(Time::from_millis(100));
    deliver(&mut a, &mut b, Time::from_millis(130));
    assert_eq!(b.store().object(id), a.store().object(id));
    assert_ne!(
        b.store().object(id).unwrap().pos,
        first,
        "the replica follows the moving primary"
    );
    assert!(
        a.replicas().stats().updates_sent > a.replicas().stats().full_states_sent,
        "deltas after the ack"
    );
}

#[test]
fn interest_mode_publishes_subscribes_and_fetches_on_discovery() {
    let mut a = node(0, 2, Mode::Interest);
    let mut b = node(1, 2, Mode::Interest);
    let ida = a.spawn(Time::ZERO, bot(1));
    let mut near = a.store().object(ida).unwrap().clone();
    near.pos.x += 10.0;
    let idb = b.spawn(Time::ZERO, near);
    a.handle_timeout(Time::ZERO);
    b.handle_timeout(Time::ZERO);
    let ops = a.take_locator_ops();
    assert!(
        ops.iter()
            .any(|o| matches!(o, LocatorOp::Publish { id, .. } if *id == ida))
    );
    assert!(
        ops.iter()
            .any(|o| matches!(o, LocatorOp::Subscribe { owner, .. } if *owner == ida))
    );
    assert!(drain(&mut a).is_empty(), "nothing to send before discovery");
    // The locator tells b about a's bot; b fetches it and a answers at once.
    let pos = a.store().object(ida).unwrap().pos;
    b.handle_discovery(Time::from_millis(10), ida, NodeId(0), pos);
    deliver(&mut b, &mut a, Time::from_millis(20));
    deliver(&mut a, &mut b, Time::from_millis(30));
    assert!(b.store().get(ida).is_some());
    assert!(a.store().get(idb).is_none(), "a did not ask for b's bot");
    // A discovery of an object outside every local interest is ignored.
    let far = worldmesh_core::Point3::new(1e6, 1e6, 0.0);
    b.handle_discovery(
        Time::from_millis(40),
        ObjectId::new(NodeId(0), 99),
        NodeId(0),
        far,
    );
    assert!(drain(&mut b).is_empty());
}

#[test]
fn many_primaries_are_batched_under_the_payload_limit() {
    let mut a = node(0, 2, Mode::Broadcast);
    for s in 0..200 {
        a.spawn(Time::ZERO, bot(s));
    }
    a.handle_timeout(Time::ZERO);
    let out = drain(&mut a);
    assert!(out.len() > 1, "200 bots must not fit one datagram");
    assert!(
        out.iter()
            .all(|t| t.datagram.len() <= a.config().replica.max_payload + wire::HEADER_LEN)
    );
    let mut b = node(1, 2, Mode::Broadcast);
    for t in &out {
        b.handle_datagram(Time::from_millis(1), NodeId(0), &t.datagram);
    }
    assert_eq!(b.store().replica_count(), 200);
}

#[test]
fn replicas_of_a_silent_node_are_dropped() {
    let mut a = node(0, 2, Mode::Broadcast);
    let mut b = node(1, 2, Mode::Broadcast);
    a.spawn(Time::ZERO, bot(1));
    a.handle_timeout(Time::ZERO);
    deliver(&mut a, &mut b, Time::ZERO);
    assert_eq!(b.store().replica_count(), 1);
    let mut now = Time::ZERO;
    while now < Time::from_secs_f64(2.5) {
        now += Duration::from_millis(100);
        b.handle_timeout(now);
    }
    assert_eq!(b.store().replica_count(), 0);
    assert_eq!(b.replicas().stats().replicas_dropped, 1);
}

fn packet(msgs: Vec<ReplicaMsg>) -> Vec<u8> {
    wire::frame(
        MessageClass::ObjectUpdate,
        &Packet {
            seq: 1,
            sent_at: Time::ZERO,
            msgs,
        }
        .encode(),
    )
    .unwrap()
}

fn full(id: ObjectId, version: u64) -> UpdateItem {
    let mut data = Vec::new();
    bot(3).encode_state(&mut data);
    UpdateItem {
        id,
        version,
        base: 0,
        data,
        logged: false,
    }
}

#[test]
fn bad_input_is_counted_and_never_applied() {
    let mut b = node(1, 3, Mode::Broadcast);
    let mine = b.spawn(Time::ZERO, bot(1));
    let before = b.store().object(mine).cloned();
    // Truncated header, bad version, garbage payload, oversize declared length.
    b.handle_datagram(Time::ZERO, NodeId(0), &[b'W', b'M', PROTOCOL_VERSION]);
    let mut v = packet(vec![]);
    v[2] = PROTOCOL_VERSION + 1;
    b.handle_datagram(Time::ZERO, NodeId(0), &v);
    b.handle_datagram(
        Time::ZERO,
        NodeId(0),
        &wire::frame(MessageClass::ObjectUpdate, &[0xde, 0xad]).unwrap(),
    );
    let mut big = packet(vec![]);
    big[4..6].copy_from_slice(&u16::MAX.to_le_bytes());
    b.handle_datagram(Time::ZERO, NodeId(0), &big);
    assert_eq!(b.stats().malformed, 4);
    let ev: Vec<Event> = std::iter::from_fn(|| b.poll_event()).collect();
    assert!(
        ev.iter().any(
            |e| matches!(e, Event::Rejected { reason, .. } if reason.to_string().contains("unsupported protocol version"))
        ),
        "{ev:?}"
    );
    // A write to an object this node owns, a forged object of node 2 sent by node 0,
    // undecodable state, a delta against a baseline never sent, and a non-member sender.
    let other = ObjectId::new(NodeId(0), 0);
    b.handle_datagram(
        Time::ZERO,
        NodeId(0),
        &packet(vec![ReplicaMsg::Update(vec![full(mine, 99)])]),
    );
    b.handle_datagram(
        Time::ZERO,
        NodeId(0),
        &packet(vec![ReplicaMsg::Update(vec![full(
            ObjectId::new(NodeId(2), 0),
            1,
        )])]),
    );
    let garbage = UpdateItem {
        id: other,
        version: 1,
        base: 0,
        data: vec![1, 2, 3],
        logged: false,
    };
    b.handle_datagram(
        Time::ZERO,
        NodeId(0),
        &packet(vec![ReplicaMsg::Update(vec![garbage])]),
    );
    // b holds `other` at version 1; a delta against version 4, which b never had, is
    // not applied and makes b ask for a full state.
    b.handle_datagram(
        Time::ZERO,
        NodeId(0),
        &packet(vec![ReplicaMsg::Update(vec![full(other, 1)])]),
    );
    let held = b.store().object(other).cloned();
    assert!(held.is_some());
    let orphan_delta = UpdateItem {
        id: other,
        version: 5,
        base: 4,
        data: vec![0],
        logged: false,
    };
    b.handle_datagram(
        Time::ZERO,
        NodeId(0),
        &packet(vec![ReplicaMsg::Update(vec![orphan_delta])]),
    );
    assert_eq!(b.store().object(other).cloned(), held);
    assert_eq!(b.store().get(other).map(|e| e.version), Some(1));
    let s = b.replicas().stats();
    assert_eq!((s.refused_updates, s.undecodable, s.missing_baseline), (2, 1, 1));
    b.handle_datagram(
        Time::ZERO,
        NodeId(9),
        &packet(vec![ReplicaMsg::Update(vec![full(
            ObjectId::new(NodeId(9), 0),
            1,
        )])]),
    );
    // A non-member is counted apart from malformed datagrams.
    assert_eq!(b.stats().malformed, 4);
    assert_eq!(b.stats().rejections.not_member, 1);
    assert_eq!(
        b.stats().rejections.bad_frame + b.stats().rejections.bad_payload,
        4
    );
    assert_eq!(b.store().object(mine).cloned(), before, "own primary untouched");
    assert_eq!(b.store().replica_count(), 1);
    // A deletion of an object the sender does not own is refused too.
    b.handle_datagram(
        Time::ZERO,
        NodeId(0),
        &packet(vec![ReplicaMsg::Deleted(vec![mine])]),
    );
    assert!(b.store().object(mine).is_some());
    // The missing baseline made b ask node 0 for a full state.
    b.handle_timeout(Time::ZERO);
    let out = drain(&mut b);
    let to0 = out.iter().find(|t| t.dst == NodeId(0)).expect("b asks node 0");
    let p = Packet::decode(
        wire::Frame::parse(&to0.datagram, wire::MAX_PAYLOAD)
            .unwrap()
            .payload,
    )
    .unwrap();
    assert!(
        p.msgs
            .iter()
            .any(|m| matches!(m, ReplicaMsg::Interest(i) if i.iter().any(|x| x.id == other && x.have == 0)))
    );
}

proptest! {
    #[test]
    fn arbitrary_datagrams_never_panic_or_touch_primaries(bytes in proptest::collection::vec(any::<u8>(), 0..300), from in 0u32..4) {
        let mut b = node(1, 3, Mode::Interest);
        let mine = b.spawn(Time::ZERO, bot(1));
        let before = b.store().object(mine).cloned();
        b.handle_datagram(Time::ZERO, NodeId(from), &bytes);
        if let Ok(d) = wire::frame(MessageClass::ObjectUpdate, &bytes) {
            b.handle_datagram(Time::ZERO, NodeId(from), &d);
        }
        prop_assert_eq!(b.store().object(mine).cloned(), before);
        prop_assert_eq!(b.store().primary_count(), 1);
    }
}

/// A member (authenticated, so only its own objects are at stake) sends a state at version
/// 2^40 for one of its objects: refused as a version jump, and the genuine updates that
/// follow keep applying (before the cap, the bogus version froze the replica).
#[test]
fn a_huge_version_jump_is_refused_and_does_not_freeze_the_replica() {
    let mut b = node(1, 2, Mode::Broadcast);
    let id = ObjectId::new(NodeId(0), 0);
    let t = |ms| Time::from_millis(ms);
    b.handle_datagram(
        t(100),
        NodeId(0),
        &packet(vec![ReplicaMsg::Update(vec![full(id, 1)])]),
    );
    assert_eq!(b.store().get(id).map(|e| e.version), Some(1));
    b.handle_datagram(
        t(200),
        NodeId(0),
        &packet(vec![ReplicaMsg::Update(vec![full(id, 1 << 40)])]),
    );
    assert_eq!(b.store().get(id).map(|e| e.version), Some(1));
    assert_eq!(b.replicas().stats().refused_version_jump, 1);
    b.handle_datagram(
        t(300),
        NodeId(0),
        &packet(vec![ReplicaMsg::Update(vec![full(id, 2)])]),
    );
    assert_eq!(
        b.store().get(id).map(|e| e.version),
        Some(2),
        "genuine updates still apply"
    );
    // A jump the elapsed time allows (a node that was cut off for a minute) is accepted.
    b.handle_datagram(
        t(60_300),
        NodeId(0),
        &packet(vec![ReplicaMsg::Update(vec![full(id, 500)])]),
    );
    assert_eq!(b.store().get(id).map(|e| e.version), Some(500));
    // A new object's version is bounded by the world's age too.
    let fresh = ObjectId::new(NodeId(0), 1);
    b.handle_datagram(
        t(60_400),
        NodeId(0),
        &packet(vec![ReplicaMsg::Update(vec![full(fresh, 1 << 40)])]),
    );
    assert!(b.store().get(fresh).is_none());
    assert_eq!(b.replicas().stats().refused_version_jump, 2);
}

/// A member claims 150,000 objects in 100 datagrams: replicas beyond its creation budget are
/// refused and counted, so memory stays bounded (before the cap all were accepted).
#[test]
fn a_flood_of_phantom_objects_is_capped() {
    let mut b = node(1, 2, Mode::Broadcast);
    let mut sent = 0u32;
    for d in 0..100u32 {
        let items: Vec<UpdateItem> = (0..1500u32)
            .map(|i| full(ObjectId::new(NodeId(0), d * 1500 + i), 1))
            .collect();
        sent += items.len() as u32;
        b.handle_datagram(
            Time::from_millis(u64::from(d)),
            NodeId(0),
            &packet(vec![ReplicaMsg::Update(items)]),
        );
    }
    assert_eq!(sent, 150_000);
    let held = b.store().replica_count();
    let cfg = worldmesh_replica::ReplicaConfig::default();
    // The burst, plus what 100 ms of refill allows.
    assert!(
        held as f64 <= cfg.new_replicas_burst + cfg.new_replicas_per_sec * 0.1 + 1.0,
        "{held}"
    );
    assert!(held >= 50_000, "{held}");
    assert_eq!(b.replicas().stats().refused_creation_cap as usize + held, 150_000);
}
