//! Inputs found by the fuzz targets (`fuzz/`, docs/fuzzing.md), kept as regression tests
//! with the input inline.

use std::sync::Arc;

use worldmesh_core::{DetRng, NodeId, Time};
use worldmesh_game::wander::{Bot, WanderConfig};
use worldmesh_node::membership::MembershipConfig;
use worldmesh_node::{Event, Mode, Node, NodeConfig};
use worldmesh_replica::Role;

/// Node 0 of members 0–3 with SWIM membership and four primaries.
fn member_node() -> Node<Bot> {
    let mut cfg =
        NodeConfig::new(NodeId(0), vec![NodeId(1), NodeId(2), NodeId(3)], 5).with_mode(Mode::Interest);
    cfg.membership = Some(MembershipConfig::lan());
    let world = Arc::new(WanderConfig::default());
    let mut node = Node::new(cfg, Arc::clone(&world), Time::ZERO);
    let mut rng = DetRng::new(1);
    for _ in 0..4 {
        node.spawn(Time::ZERO, Bot::random(&world, &mut rng));
    }
    node.handle_timeout(Time::ZERO);
    node
}

fn primaries(node: &Node<Bot>) -> usize {
    node.store()
        .iter()
        .filter(|(_, e)| e.role == Role::Primary)
        .count()
}

/// `node_datagram`'s first finding (34 bytes, minimised): a Control frame on the membership
/// channel holding SWIM's `TurnUndead` from member 3 (generation 0, 0.1.0.0:0) to node 0's
/// exact identity (generation 0, 10.0.0.0:7000). One datagram from one member makes the node
/// rejoin as its next generation and drop every primary: by design ("the others declared
/// this node failed and adopted its primaries", `node/cluster.rs`) and within the trust
/// model (a certified member is trusted for what it sends). Pinned so that a change to this
/// behaviour (e.g. asking for confirmation) is deliberate; the fuzz harness allows exactly
/// this exception to its "foreign input never takes a primary away" invariant.
#[test]
fn turn_undead_from_one_member_makes_the_node_rejoin_and_drop_its_primaries() {
    const DATAGRAM: [u8; 31] = [
        0x57, 0x4d, 0x02, 0x05, 0x19, 0x00, // "WM", v2, Control, 25 payload bytes
        0x01, // membership channel
        0x03, 0x00, 0x04, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, // src: node 3, gen 0, 0.1.0.0:0
        0x00, 0x00, // src incarnation
        0x00, 0x00, 0x04, 0x0a, 0x00, 0x00, 0x00, 0x58, 0x1b, // dst: node 0, gen 0, 10.0.0.0:7000
        0x0a, // TurnUndead
        0x00, 0x00, 0x00,
    ];
    let mut node = member_node();
    assert_eq!(primaries(&node), 4);
    while node.poll_event().is_some() {}
    node.handle_datagram(Time::from_millis(1), NodeId(3), &DATAGRAM);
    let events: Vec<Event> = std::iter::from_fn(|| node.poll_event()).collect();
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::Rejoined(m) if m.node == NodeId(0))),
        "the node rejoins: {events:?}"
    );
    assert_eq!(primaries(&node), 0, "and keeps none of its primaries");

    // The same message from a node that is not the claimed sender is refused before foca
    // sees it, and one addressed to another generation of node 0 is ignored.
    let mut node = member_node();
    node.handle_datagram(Time::from_millis(1), NodeId(2), &DATAGRAM);
    let mut other_generation = DATAGRAM;
    other_generation[19] = 0x01;
    node.handle_datagram(Time::from_millis(1), NodeId(3), &other_generation);
    assert!(
        !std::iter::from_fn(|| node.poll_event()).any(|e| matches!(e, Event::Rejoined(_))),
        "no rejoin"
    );
    assert_eq!(primaries(&node), 4);
}
