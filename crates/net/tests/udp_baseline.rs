//! The insecure plain-UDP baseline: it delivers by node id from the addresses it was told,
//! and counts (but cannot authenticate) everything else.

use std::time::Duration;

use tokio::net::UdpSocket;
use worldmesh_core::NodeId;
use worldmesh_core::traffic::MessageClass;
use worldmesh_core::wire;
use worldmesh_net::transport::{Transport, TransportEvent};
use worldmesh_net::udp::{MAX_UDP_PAYLOAD, UdpTransport};

#[test]
fn delivers_from_known_addresses_and_counts_strangers() {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let local = "127.0.0.1:0".parse().unwrap();
            let a = UdpTransport::bind(local).await.unwrap();
            let mut b = UdpTransport::bind(local).await.unwrap();
            a.set_addr(NodeId(2), b.local_addr());
            b.set_addr(NodeId(1), a.local_addr());
            let stranger = UdpSocket::bind("127.0.0.1:0").await.unwrap();
            let forged = wire::frame(MessageClass::ObjectUpdate, &[9; 30]).unwrap();
            stranger.send_to(&forged, b.local_addr()).await.unwrap();
            let real = wire::frame(MessageClass::ObjectUpdate, &[1; 50]).unwrap();
            a.send(NodeId(2), MessageClass::ObjectUpdate, real.clone());
            let ev = tokio::time::timeout(Duration::from_secs(10), b.recv())
                .await
                .unwrap();
            assert_eq!(
                ev,
                TransportEvent::Datagram {
                    from: NodeId(1),
                    bytes: real.clone().into()
                }
            );
            let s = b.stats();
            assert_eq!(s.unknown_sender, 1);
            assert_eq!(s.classes[0].received.bytes, real.len() as u64 + 28);
            assert_eq!(s.wire_received.packets, 2);
            a.send(NodeId(7), MessageClass::Control, vec![0; 10]);
            a.send(NodeId(2), MessageClass::Control, vec![0; MAX_UDP_PAYLOAD + 1]);
            let s = a.stats();
            assert_eq!((s.undeliverable, s.oversize), (1, 1));
            assert_eq!(s.wire_sent, s.app_sent(), "UDP adds nothing beyond its 28 bytes");
        });
}
