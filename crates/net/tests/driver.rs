//! The driver on real transports in one process: nodes join through a seed over QUIC
//! (and over the insecure UDP baseline), replicate, take commands (spawn, write, snapshot,
//! drain, stop) and report their events; a consumer that does not read its events never
//! stalls the frame loop.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use worldmesh_core::wire::PROTOCOL_VERSION;
use worldmesh_core::{LatencyMatrix, NodeId, ObjectId};
use worldmesh_game::wander::{Bot, WanderConfig};
use worldmesh_net::hello::Hello;
use worldmesh_net::pki::Authority;
use worldmesh_net::quic::{QuicConfig, QuicTransport};
use worldmesh_net::transport::Transport;
use worldmesh_net::udp::UdpTransport;
use worldmesh_net::{Clock, DelayShim, DriverOptions, EventKind, NodeHandle, RunOutcome, StopReason, start};
use worldmesh_node::membership::MembershipConfig;
use worldmesh_node::{Event, Node, NodeConfig};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn hello(node: u32) -> Hello {
    Hello {
        protocol: PROTOCOL_VERSION,
        node: NodeId(node),
        generation: 1,
        advertise: "127.0.0.1:0".parse().unwrap(),
        world: vec![("bots".into(), "4".into())],
    }
}

fn node(id: u32, addr: SocketAddr, clock: Clock) -> Node<Bot> {
    let mut cfg = NodeConfig::new(NodeId(id), Vec::new(), 5);
    cfg.membership = Some(MembershipConfig::lan());
    cfg.address = Some(addr);
    cfg.generation = 1;
    cfg.replica.backups = 1;
    Node::new(cfg, Arc::new(WanderConfig::default()), clock.now())
}

type Run<T> = tokio::task::JoinHandle<Result<RunOutcome<Bot, T>, worldmesh_net::NetError>>;

fn launch<T: Transport + 'static>(
    id: u32,
    t: T,
    seeds: Vec<SocketAddr>,
    clock: Clock,
    tune: impl FnOnce(&mut DriverOptions),
) -> (NodeHandle<Bot>, Run<T>) {
    let n = node(id, t.local_addr(), clock);
    let mut opts = DriverOptions::new(clock);
    opts.seeds = seeds;
    tune(&mut opts);
    let (h, run) = start(n, t, opts);
    (h, tokio::spawn(run))
}

/// Waits for an event matching `f`.
async fn wait_event(h: &mut NodeHandle<Bot>, what: &str, f: impl Fn(&EventKind) -> bool) {
    tokio::time::timeout(Duration::from_secs(15), async {
        loop {
            let e = h.events.recv().await.expect("run ended");
            if f(&e.kind) {
                return;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no {what} within 15 s"));
}

async fn spawn_bots(h: &NodeHandle<Bot>, n: usize, seed: u64) -> Vec<ObjectId> {
    let cfg = WanderConfig::default();
    let mut rng = worldmesh_core::DetRng::new(seed);
    let mut ids = Vec::new();
    for _ in 0..n {
        ids.push(h.spawn(Bot::random(&cfg, &mut rng)).await.unwrap());
    }
    ids
}

#[test]
fn nodes_join_through_a_seed_replicate_take_commands_and_drain_over_quic() {
    rt().block_on(async {
        let ca = Authority::new("driver test", 1).unwrap();
        let clock = Clock::new(0);
        let bind = |i: u32| {
            let id = ca.identity(NodeId(i), 1).unwrap();
            QuicTransport::bind(QuicConfig::new("127.0.0.1:0".parse().unwrap(), id, hello(i))).unwrap()
        };
        let t0 = bind(0);
        let a0 = t0.local_addr();
        let (mut h0, r0) = launch(0, t0, vec![a0], clock, |_| {});
        // Node 1 sends through the WAN shim (30 ms RTT, 5% loss); node 2's consumer is
        // slow: two events fit its channel.
        let (mut h1, r1) = launch(1, bind(1), vec![a0], clock, |o| {
            o.shim = Some(DelayShim::new(
                LatencyMatrix::uniform(3, 30.0),
                3,
                NodeId(1),
                5,
                0.05,
            ));
        });
        let launched = std::time::Instant::now();
        let (h2, r2) = launch(2, bind(2), vec![a0], clock, |o| o.event_capacity = 2);
        wait_event(&mut h1, "node 1 joined", |k| {
            matches!(k, EventKind::Node(Event::Joined))
        })
        .await;
        wait_event(
            &mut h0,
            "node 0 sees 2 members",
            |k| matches!(k, EventKind::Node(Event::MemberUp(m)) if m.node == NodeId(2)),
        )
        .await;
        let b0 = spawn_bots(&h0, 4, 0).await;
        spawn_bots(&h1, 4, 1).await;
        spawn_bots(&h2, 4, 2).await;
        // Replication and membership.
        tokio::time::timeout(Duration::from_secs(15), async {
            loop {
                let s = h1.snapshot(None).await.unwrap();
                if s.summary.replicas == 8 && s.members == vec![NodeId(0), NodeId(2)] {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await
        .expect("node 1 holds the 8 other bots and knows both members");
        // Writes from a replica holder reach the primary (Bot writes are no-ops, counted).
        for _ in 0..3 {
            assert!(h1.write(b0[0], ()).await);
        }
        // Drain node 2: its bots move to 0 and 1, it leaves, its run ends by itself.
        assert!(h2.drain().await);
        let out2 = tokio::time::timeout(Duration::from_secs(20), r2)
            .await
            .expect("the drain ends the run")
            .unwrap()
            .unwrap();
        assert_eq!(out2.reason, StopReason::Drained { left_behind: 0 });
        assert_eq!(out2.node.store().primary_count(), 0);
        assert!(out2.driver.events_dropped > 0, "the slow consumer lost events");
        // Its consumer read nothing, yet its frame loop ran (10 Hz) for most of its life.
        let lived = launched.elapsed().as_secs_f64();
        assert!(
            out2.node.frame() as f64 >= 0.3 * lived * 10.0,
            "and the frame loop kept running: {} frames in {lived:.1} s",
            out2.node.frame()
        );
        wait_event(
            &mut h0,
            "node 2 down",
            |k| matches!(k, EventKind::Node(Event::MemberDown(m, _)) if m.node == NodeId(2)),
        )
        .await;
        let s0 = h0.snapshot(None).await.unwrap();
        let s1 = h1.snapshot(None).await.unwrap();
        assert_eq!(s0.primaries.len() + s1.primaries.len(), 12, "nothing lost");
        assert!(
            s0.primaries.iter().all(|p| !s1.primaries.contains(p)),
            "nothing duplicated"
        );
        assert!(
            s0.transport.wire_sent.bytes > s0.transport.app_sent().bytes,
            "QUIC adds its headers"
        );
        assert!(h0.stop().await && h1.stop().await);
        let out0 = r0.await.unwrap().unwrap();
        let out1 = r1.await.unwrap().unwrap();
        assert_eq!(out0.reason, StopReason::Stopped);
        assert_eq!(out0.node.replicas().stats().writes_applied, 3);
        assert_eq!(out1.node.replicas().stats().writes_forwarded, 3);
        assert_eq!(out1.driver.seeds_reached, 1);
        assert!(out1.driver.shim_dropped > 0, "the shim dropped 5%");
        out0.transport.close().await;
        out1.transport.close().await;
    });
}

#[test]
fn the_insecure_udp_baseline_joins_through_hellos_too() {
    rt().block_on(async {
        let clock = Clock::new(0);
        let local: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let t0 = UdpTransport::bind_with_hello(local, hello(0)).await.unwrap();
        let a0 = t0.local_addr();
        let (h0, r0) = launch(0, t0, Vec::new(), clock, |_| {});
        let t1 = UdpTransport::bind_with_hello(local, hello(1)).await.unwrap();
        let (mut h1, r1) = launch(1, t1, vec![a0], clock, |_| {});
        wait_event(&mut h1, "joined", |k| matches!(k, EventKind::Node(Event::Joined))).await;
        spawn_bots(&h0, 3, 0).await;
        tokio::time::timeout(Duration::from_secs(15), async {
            while h1.snapshot(None).await.unwrap().summary.replicas < 3 {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await
        .expect("replicas over plain UDP");
        // A third node with other world settings is refused and says which.
        let mut other = hello(2);
        other.world = vec![("bots".into(), "5".into())];
        let t2 = UdpTransport::bind_with_hello(local, other).await.unwrap();
        let (_h2, r2) = launch(2, t2, vec![a0], clock, |o| {
            o.join.timeout = Duration::from_secs(2)
        });
        let e = r2.await.unwrap().err().expect("refused").to_string();
        assert!(
            e.contains("no seed reachable"),
            "the UDP baseline cannot say why: {e}"
        );
        let s0 = h0.snapshot(None).await.unwrap();
        let mismatches = s0
            .transport
            .refusals_of(worldmesh_net::transport::RefusalReason::WorldMismatch);
        assert!(mismatches >= 1, "{:?}", s0.transport.refusals);
        h0.stop().await;
        h1.stop().await;
        r0.await.unwrap().unwrap();
        r1.await.unwrap().unwrap();
    });
}
