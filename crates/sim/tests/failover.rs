//! The failover scenario on real nodes (paper `003` Algorithms 3/4, issue 7 item 5):
//! exactly one server after the host crashes or is cut off, no confirmed input lost,
//! bad Control datagrams refused, same seed ⇒ same report.

use std::sync::Arc;
use std::time::Duration;
use worldmesh_core::wire::encode;
use worldmesh_core::{LatencyMatrix, MessageClass, NodeId, Time};
use worldmesh_game::{GameMap, ModelConfig, ModelObject};
use worldmesh_node::instance::{FailoverConfig, InstanceSpec};
use worldmesh_node::instance_wire::{ControlEnvelope, WireMsg};
use worldmesh_node::{Node, NodeConfig};
use worldmesh_sim::failover::{Fault, FailoverScenario, Placement};

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
        eprintln!("{r:?}");
        assert_eq!(r.servers_at_end, vec![1], "seed {seed}: {r:?}");
        let after: Vec<_> = r.promotions.iter().filter(|p| p.0 >= r.fault_at_s).collect();
        assert_eq!(after.len(), 1, "seed {seed}: {:?}", r.promotions);
        assert_eq!(after[0].1, 1, "the replica takes over");
        assert_eq!(r.confirmed_lost, 0, "seed {seed}");
        assert!(r.confirmed_total > r.confirmed_at_fault, "service resumed: {r:?}");
        let t = r.takeover_ms.unwrap();
        assert!(t >= r.promoted_ms.unwrap());
        // detection alone takes k·τ = T after the last snapshot
        assert!(r.promoted_ms.unwrap() >= 150.0, "seed {seed}: {r:?}");
        assert!(r.redirected_ms.is_some() && r.all_confirm_ms.is_some());
    }
}
