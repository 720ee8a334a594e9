//! The node driven by hand through its sans-IO interface: no simulator, no sockets.

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use worldmesh_core::wire::{self, PROTOCOL_VERSION};
use worldmesh_core::{MessageClass, NodeId, ObjectId, Time};
use worldmesh_game::wander::{Bot, WanderConfig};
use worldmesh_node::{Event, Message, Node, NodeConfig, ObjectState, Transmit};
use worldmesh_replica::{GameObject, Role};

fn node(id: u32, n: u32) -> Node<Bot> {
    let peers = (0..n).filter(|p| *p != id).map(NodeId).collect();
    Node::new(
        NodeConfig::new(NodeId(id), peers, 7),
        Arc::new(WanderConfig::default()),
        Time::ZERO,
    )
}

fn drain(n: &mut Node<Bot>) -> Vec<Transmit> {
    std::iter::from_fn(|| n.poll_transmit()).collect()
}

fn events(n: &mut Node<Bot>) -> Vec<Event> {
    std::iter::from_fn(|| n.poll_event()).collect()
}

#[test]
fn frames_send_primaries_to_every_peer_and_create_replicas() {
    let mut a = node(0, 3);
    let mut b = node(1, 3);
    let bot = Bot::random(&WanderConfig::default(), a.rng());
    let id = a.spawn(Time::ZERO, bot);
    assert_eq!(a.poll_timeout(), Some(Time::ZERO));
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
    assert_eq!(a.stats().traffic.sent[0].packets, 2);

    let to_b = out.iter().find(|t| t.dst == NodeId(1)).unwrap();
    b.handle_datagram(Time::from_millis(30), NodeId(0), &to_b.datagram);
    assert!(events(&mut b).contains(&Event::ReplicaCreated {
        id,
        primary: NodeId(0)
    }));
    let e = b.store().get(id).unwrap();
    assert_eq!(e.role, Role::Replica { primary: NodeId(0) });
    assert_eq!(e.object.position(), a.store().object(id).unwrap().position());
    assert_eq!(b.replica_ages_ms(Time::from_millis(30)), vec![30.0]);
    let first_pos = e.object.pos;

    // The bot moves; the next frame's state replaces the replica's.
    a.handle_timeout(Time::from_millis(100));
    let out = drain(&mut a);
    let to_b = out.iter().find(|t| t.dst == NodeId(1)).unwrap();
    b.handle_datagram(Time::from_millis(130), NodeId(0), &to_b.datagram);
    assert_eq!(b.store().object(id), a.store().object(id));
    assert_ne!(
        b.store().object(id).unwrap().pos,
        first_pos,
        "the replica follows the moving primary"
    );
    // A replayed old datagram does not roll the replica back.
    let v = b.store().get(id).unwrap().version;
    b.handle_datagram(Time::from_millis(140), NodeId(0), &to_b.datagram);
    assert_eq!(b.store().get(id).unwrap().version, v);
}

#[test]
fn many_primaries_are_batched_under_the_payload_limit() {
    let mut a = node(0, 2);
    for _ in 0..200 {
        let bot = Bot::random(&WanderConfig::default(), a.rng());
        a.spawn(Time::ZERO, bot);
    }
    a.handle_timeout(Time::ZERO);
    let out = drain(&mut a);
    assert!(out.len() > 1, "200 bots must not fit one datagram");
    assert!(
        out.iter()
            .all(|t| t.datagram.len() <= a.config().max_payload + wire::HEADER_LEN)
    );
    let mut b = node(1, 2);
    for t in &out {
        b.handle_datagram(Time::from_millis(1), NodeId(0), &t.datagram);
    }
    assert_eq!(b.store().replica_count(), 200);
}

#[test]
fn replicas_expire_when_their_primary_goes_quiet() {
    let mut a = node(0, 2);
    let mut b = node(1, 2);
    let bot = Bot::random(&WanderConfig::default(), a.rng());
    a.spawn(Time::ZERO, bot);
    a.handle_timeout(Time::ZERO);
    for t in drain(&mut a) {
        b.handle_datagram(Time::ZERO, NodeId(0), &t.datagram);
    }
    assert_eq!(b.store().replica_count(), 1);
    let mut now = Time::ZERO;
    while now < Time::from_secs_f64(2.5) {
        now += Duration::from_millis(100);
        b.handle_timeout(now);
    }
    assert_eq!(b.store().replica_count(), 0);
    assert_eq!(b.stats().replicas_expired, 1);
}

fn updates(states: Vec<ObjectState>) -> Vec<u8> {
    wire::encode(
        MessageClass::ObjectUpdate,
        &Message::Updates {
            sent_at: Time::ZERO,
            states,
        },
    )
    .unwrap()
}

fn bot_state(id: ObjectId, version: u64) -> ObjectState {
    let mut state = Vec::new();
    Bot::random(&WanderConfig::default(), &mut worldmesh_core::DetRng::new(3)).encode_state(&mut state);
    ObjectState { id, version, state }
}

#[test]
fn bad_input_is_counted_and_never_applied() {
    let mut b = node(1, 3);
    let mine = b.spawn(
        Time::ZERO,
        Bot::random(&WanderConfig::default(), &mut worldmesh_core::DetRng::new(1)),
    );
    let before = b.store().object(mine).cloned();
    // Truncated header, bad version, garbage payload, oversize declared length.
    b.handle_datagram(Time::ZERO, NodeId(0), &[b'W', b'M', PROTOCOL_VERSION]);
    let mut v = updates(vec![]);
    v[2] = PROTOCOL_VERSION + 1;
    b.handle_datagram(Time::ZERO, NodeId(0), &v);
    b.handle_datagram(
        Time::ZERO,
        NodeId(0),
        &wire::frame(MessageClass::ObjectUpdate, &[0xde, 0xad]).unwrap(),
    );
    let mut big = updates(vec![]);
    big[4..6].copy_from_slice(&u16::MAX.to_le_bytes());
    b.handle_datagram(Time::ZERO, NodeId(0), &big);
    assert_eq!(b.stats().malformed, 4);
    let ev = events(&mut b);
    assert!(
        ev.iter().any(
            |e| matches!(e, Event::Rejected { reason, .. } if reason.contains("unsupported protocol version"))
        ),
        "{ev:?}"
    );

    // A write to an object this node owns, a forged object of node 2 sent by node 0,
    // undecodable state, and a sender outside the membership.
    b.handle_datagram(Time::ZERO, NodeId(0), &updates(vec![bot_state(mine, 99)]));
    b.handle_datagram(
        Time::ZERO,
        NodeId(0),
        &updates(vec![bot_state(ObjectId::new(NodeId(2), 0), 1)]),
    );
    b.handle_datagram(
        Time::ZERO,
        NodeId(0),
        &updates(vec![ObjectState {
            id: ObjectId::new(NodeId(0), 0),
            version: 1,
            state: vec![1, 2, 3],
        }]),
    );
    assert_eq!(b.stats().rejected_states, 3);
    b.handle_datagram(
        Time::ZERO,
        NodeId(9),
        &updates(vec![bot_state(ObjectId::new(NodeId(9), 0), 1)]),
    );
    assert_eq!(b.stats().malformed, 5);
    assert_eq!(b.store().object(mine).cloned(), before, "own primary untouched");
    assert_eq!(b.store().replica_count(), 0);
    // A deletion of an object the sender does not own is refused too.
    b.handle_datagram(
        Time::ZERO,
        NodeId(0),
        &wire::encode(MessageClass::ObjectUpdate, &Message::Deleted { ids: vec![mine] }).unwrap(),
    );
    assert!(b.store().object(mine).is_some());
}

proptest! {
    #[test]
    fn arbitrary_datagrams_never_panic_or_touch_primaries(bytes in proptest::collection::vec(any::<u8>(), 0..300), from in 0u32..4) {
        let mut b = node(1, 3);
        let mine = b.spawn(Time::ZERO, Bot::random(&WanderConfig::default(), &mut worldmesh_core::DetRng::new(1)));
        let before = b.store().object(mine).cloned();
        b.handle_datagram(Time::ZERO, NodeId(from), &bytes);
        // Also behind a valid header, so the payload decoder is exercised.
        if let Ok(d) = wire::frame(MessageClass::ObjectUpdate, &bytes) {
            b.handle_datagram(Time::ZERO, NodeId(from), &d);
        }
        prop_assert_eq!(b.store().object(mine).cloned(), before);
        prop_assert_eq!(b.store().primary_count(), 1);
    }
}
