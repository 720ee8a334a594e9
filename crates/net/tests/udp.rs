//! Three real nodes over loopback UDP in one process, with the WAN shim dropping 5%.

use std::sync::Arc;
use std::time::Duration;
use tokio::net::UdpSocket;
use worldmesh_core::{LatencyMatrix, NodeId};
use worldmesh_game::wander::{Bot, WanderConfig};
use worldmesh_net::{Clock, DelayShim, PeerTable, RunOptions, run_node};
use worldmesh_node::{Node, NodeConfig};

#[test]
fn three_nodes_converge_over_udp_with_emulated_loss() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut sockets = Vec::new();
        for _ in 0..3 {
            sockets.push(UdpSocket::bind("127.0.0.1:0").await.unwrap());
        }
        let addrs: Vec<_> = sockets.iter().map(|s| s.local_addr().unwrap()).collect();
        let clock = Clock::new(0);
        let world = Arc::new(WanderConfig::default());
        let mut tasks = Vec::new();
        for (i, socket) in sockets.into_iter().enumerate() {
            let me = NodeId(i as u32);
            let mut peers = PeerTable::new();
            for (j, a) in addrs.iter().enumerate() {
                if j != i {
                    peers.insert(NodeId(j as u32), *a).unwrap();
                }
            }
            let mut node: Node<Bot> = Node::new(
                NodeConfig::new(me, peers.ids(), 5),
                Arc::clone(&world),
                clock.now(),
            );
            for _ in 0..4 {
                let b = Bot::random(&world, node.rng());
                node.spawn(clock.now(), b);
            }
            let shim = DelayShim::new(LatencyMatrix::uniform(3, 30.0), 3, me, 5, 0.05);
            let opts = RunOptions {
                duration: Some(Duration::from_millis(1500)),
                clock,
                shim: Some(shim),
            };
            tasks.push(tokio::spawn(run_node(
                node,
                socket,
                peers,
                opts,
                std::future::pending(),
            )));
        }
        for t in tasks {
            let (summary, stats, node) = t.await.unwrap().unwrap();
            assert_eq!(stats.unknown_sender, 0);
            assert_eq!(summary.replicas, 8, "{summary:?}");
            assert_eq!(node.store().len(), 12);
            // 15 ms one way + one frame, a few lost frames at most.
            assert!(summary.staleness_max_ms < 600.0, "{summary:?}");
        }
    });
}
