//! The failover scenario on real nodes (paper `003` Algorithms 3/4, issue 7 item 5):
//! exactly one server after the host crashes or is cut off, no confirmed input lost,
//! bad Control datagrams refused, same seed ⇒ same report.

use std::sync::Arc;
use std::time::Duration;
use worldmesh_core::{LatencyMatrix, MessageClass, NodeId, Time};
use worldmesh_game::{GameMap, ModelConfig, ModelObject};
use worldmesh_node::instance::{FailoverConfig, InstanceSpec};
use worldmesh_node::instance_wire::{self, ControlEnvelope, WireMsg};
use worldmesh_node::{Node, NodeConfig};
use worldmesh_sim::failover::{FailoverScenario, Fault, Placement, RoleChoice};

fn planetlab() -> Arc<LatencyMatrix> {
    Arc::new(
        LatencyMatrix::load(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../data/latency/planetlab-490.txt"
        ))
        .unwrap(),
    )
}

#[test]
fn crash_of_the_host_promotes_exactly_one_server_and_loses_nothing_confirmed() {
    let m = planetlab();
    for seed in 0..4 {
        let s = FailoverScenario::new(Arc::clone(&m), 5, seed);
        let r = s.run().unwrap();
        assert_eq!(r.servers_at_end, vec![r.replica], "seed {seed}: {r:?}");
        let after: Vec<_> = r.promotions.iter().filter(|p| p.0 >= r.fault_at_s).collect();
        assert_eq!(after.len(), 1, "seed {seed}: {:?}", r.promotions);
        assert_eq!(after[0].1, r.replica, "the replica takes over");
        assert_eq!(r.confirmed_lost, 0, "seed {seed}");
        assert!(r.confirmed_total > r.confirmed_at_fault, "service resumed: {r:?}");
        let t = r.takeover_ms.unwrap();
        assert!(t >= r.promoted_ms.unwrap());
        // detection alone takes 3τ after the server's last snapshot or update, sent at
        // most one tick before the crash
        let f = FailoverConfig::default();
        let floor = (f.suspect_timeout() - f.tick).as_secs_f64() * 1000.0;
        assert!(r.promoted_ms.unwrap() >= floor, "seed {seed}: {r:?}");
        assert!(r.redirected_ms.is_some() && r.all_confirm_ms.is_some());
    }
}

#[test]
fn partitioned_host_steps_down_after_the_heal_leaving_one_server() {
    let m = planetlab();
    for seed in 10..13 {
        let mut s = FailoverScenario::new(Arc::clone(&m), 5, seed);
        s.fault = Fault::Partition {
            heal_after: Duration::from_millis(1_500),
        };
        let r = s.run().unwrap();
        // while cut off, the old host still believes it serves (epoch 1) beside the new one
        let mut both = vec![r.host, r.replica];
        both.sort_unstable();
        assert_eq!(r.servers_before_heal, both, "seed {seed}: {r:?}");
        assert_eq!(r.servers_at_end, vec![r.replica], "seed {seed}: {r:?}");
        assert!(
            r.step_downs
                .iter()
                .any(|d| d.1 == r.host && d.0 >= r.fault_at_s + 1.5),
            "the old host steps down once healed: {r:?}"
        );
        let after: Vec<_> = r.promotions.iter().filter(|p| p.0 >= r.fault_at_s).collect();
        assert_eq!(after.len(), 1, "seed {seed}: {:?}", r.promotions);
        assert_eq!(r.confirmed_lost, 0, "seed {seed}");
    }
}

#[test]
fn random_placement_and_no_fault_free_promotions_under_loss() {
    let m = planetlab();
    let mut s = FailoverScenario::new(Arc::clone(&m), 6, 21);
    s.placement = Placement::Random;
    s.roles = RoleChoice::Random;
    let r = s.run().unwrap();
    assert!(
        r.promotions.iter().all(|p| p.0 >= r.fault_at_s),
        "no promotion before the fault: {r:?}"
    );
    assert_eq!(r.servers_at_end.len(), 1);
    assert_eq!(r.confirmed_lost, 0);
    assert!(r.network.lost > 0, "the network did lose datagrams");
}

#[test]
fn same_seed_same_report() {
    let m = planetlab();
    let mut s = FailoverScenario::new(m, 4, 33);
    s.fault = Fault::Partition {
        heal_after: Duration::from_millis(800),
    };
    let a = serde_json::to_string(&s.run().unwrap()).unwrap();
    let b = serde_json::to_string(&s.run().unwrap()).unwrap();
    assert_eq!(a, b);
    s.seed = 34;
    assert_ne!(a, serde_json::to_string(&s.run().unwrap()).unwrap());
}

#[test]
fn bad_scenarios_are_errors() {
    let m = Arc::new(LatencyMatrix::uniform(4, 20.0));
    assert!(FailoverScenario::new(Arc::clone(&m), 5, 1).run().is_err());
    assert!(FailoverScenario::new(Arc::clone(&m), 0, 1).run().is_err());
    let mut s = FailoverScenario::new(m, 1, 1);
    s.loss = 1.0;
    assert!(s.run().is_err());
}

fn member_node(id: u32) -> Node<ModelObject> {
    let world = Arc::new(GameMap::generate(&ModelConfig::default(), 1, 1));
    let ids: Vec<NodeId> = (0..4).map(NodeId).collect();
    let mut node = Node::new(NodeConfig::new(NodeId(id), ids.clone(), 1), world, Time::ZERO);
    node.instances_mut()
        .join(InstanceSpec {
            id: 7,
            members: ids[..3].to_vec(),
            server: ids[0],
            replica: Some(ids[1]),
            ranking: ids[1..3].to_vec(),
            plays: true,
            first_tick: Time::ZERO,
            failover: FailoverConfig::default(),
        })
        .unwrap();
    node
}

#[test]
fn bad_control_datagrams_are_refused_and_counted() {
    let mut node = member_node(2);
    let now = Time::from_millis(5);
    let env = |instance, msg| {
        instance_wire::datagram(&bitcode::encode(&ControlEnvelope { instance, msg })).unwrap()
    };
    let beat = WireMsg::Beat { epoch: 1 };
    let bad: Vec<(NodeId, Vec<u8>)> = vec![
        // not an envelope at all
        (
            NodeId(0),
            instance_wire::datagram(&bitcode::encode(&12345u64)).unwrap(),
        ),
        // an instance this node is not in
        (NodeId(0), env(99, beat.clone())),
        // a cluster member outside the instance's roster
        (NodeId(3), env(7, beat)),
        // a message over the limits
        (
            NodeId(0),
            env(
                7,
                WireMsg::Input {
                    epoch: 1,
                    known: (1, 0),
                    inputs: vec![(1, 1); 5_000],
                },
            ),
        ),
        // a truncated envelope
        (NodeId(0), {
            let mut d = env(
                7,
                WireMsg::Vote {
                    epoch: 2,
                    granted: true,
                },
            );
            d.pop();
            let len = (d.len() - 6) as u16;
            d[4..6].copy_from_slice(&len.to_le_bytes());
            d
        }),
    ];
    let k = bad.len() as u64;
    for (from, d) in bad {
        node.handle_datagram(now, from, &d);
    }
    assert_eq!(node.instances().stats().rejected, k);
    assert_eq!(node.stats().rejections.refused, k);
    assert_eq!(node.instances().stats().received, 0);
    // a well-formed update from the server is accepted
    let ok = env(
        7,
        WireMsg::Update {
            epoch: 1,
            key: (1, 0),
            tick: 1,
            replica: Some(1),
            committed: 0,
            confirmed: 0,
        },
    );
    node.handle_datagram(now, NodeId(0), &ok);
    assert_eq!(node.instances().stats().received, 1);
    assert_eq!(node.stats().rejections.refused, k);
}

#[test]
fn the_node_wakes_for_its_instance_ticks_and_sends_inputs_to_the_server() {
    let mut node = member_node(2);
    // the instance ticks every 50 ms, frames every 100 ms: the instance's timer comes first
    node.handle_timeout(Time::ZERO);
    while node.poll_transmit().is_some() {}
    assert_eq!(node.poll_timeout(), Some(Time::from_millis(50)));
    node.handle_timeout(Time::from_millis(50));
    let mut to_server = 0;
    while let Some(t) = node.poll_transmit() {
        assert_eq!(t.class, MessageClass::Control);
        to_server += usize::from(t.dst == NodeId(0));
    }
    assert_eq!(to_server, 1, "one input message per tick to the server");
    assert_eq!(node.instances().peer(7).unwrap().inputs_produced(), 2);
}
