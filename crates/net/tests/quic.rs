//! The QUIC transport over loopback with real TLS: delivery by node id, both carrying
//! paths, and every attack the issue lists (another CA, a member claiming another id,
//! different world settings, replayed packets, forged plaintext and reflection).
//!
//! No assertion depends on timing. Where a test must show that something did NOT happen,
//! it sends a sentinel datagram on the same path afterwards and waits for it: anything the
//! attack could have caused would have been delivered before it. `within` only guards
//! against a hang.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::net::UdpSocket;
use worldmesh_core::NodeId;
use worldmesh_core::traffic::MessageClass;
use worldmesh_core::wire::{self, PROTOCOL_VERSION};
use worldmesh_net::hello::{Hello, PeerHello};
use worldmesh_net::pki::Authority;
use worldmesh_net::quic::{ALPN, QuicConfig, QuicTransport};
use worldmesh_net::transport::{RefusalReason, TransportError, TransportEvent};
use worldmesh_node::membership::View;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

async fn within<T>(what: &str, f: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), f)
        .await
        .unwrap_or_else(|_| panic!("hung: {what}"))
}

fn world(players: u32) -> Vec<(String, String)> {
    vec![
        ("players".into(), players.to_string()),
        ("map".into(), "sqr".into()),
        ("seed".into(), "1".into()),
    ]
}

fn hello(node: u32, players: u32) -> Hello {
    Hello {
        protocol: PROTOCOL_VERSION,
        node: NodeId(node),
        generation: 1,
        advertise: "127.0.0.1:0".parse().unwrap(),
        world: world(players),
    }
}

fn config(ca: &Authority, node: u32) -> QuicConfig {
    QuicConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        ca.identity(NodeId(node), 1).unwrap(),
        hello(node, 8),
    )
}

fn endpoint(ca: &Authority, node: u32) -> QuicTransport {
    QuicTransport::bind(config(ca, node)).unwrap()
}

/// A worldmesh frame carrying `seq` (and padding to `len` bytes in total).
fn frame(class: MessageClass, seq: u32, len: usize) -> Vec<u8> {
    let mut payload = seq.to_le_bytes().to_vec();
    payload.resize(len.saturating_sub(wire::HEADER_LEN).max(4), 0xab);
    wire::frame(class, &payload).unwrap()
}

fn seq_of(bytes: &[u8]) -> u32 {
    u32::from_le_bytes(bytes[wire::HEADER_LEN..wire::HEADER_LEN + 4].try_into().unwrap())
}

/// Events until the next datagram; the others are returned too.
async fn next_datagram(t: &mut QuicTransport, seen: &mut Vec<TransportEvent>) -> (NodeId, Bytes) {
    within("waiting for a datagram", async {
        loop {
            match t.recv().await {
                TransportEvent::Datagram { from, bytes } => return (from, bytes),
                other => seen.push(other),
            }
        }
    })
    .await
}

/// The next member whose first connection came up at `t`.
async fn next_peer_up(t: &mut QuicTransport) -> PeerHello {
    within("PeerUp", async {
        loop {
            if let TransportEvent::PeerUp(h) = t.recv().await {
                return h;
            }
        }
    })
    .await
}

async fn next_refusal(t: &mut QuicTransport) -> (RefusalReason, String, Option<NodeId>) {
    within("waiting for a refusal", async {
        loop {
            match t.recv().await {
                TransportEvent::Refused {
                    reason, detail, node, ..
                } => return (reason, detail, node),
                TransportEvent::Datagram { from, .. } => panic!("datagram from {from:?} delivered"),
                _ => {}
            }
        }
    })
    .await
}

#[test]
fn two_endpoints_exchange_datagrams_and_a_large_message_rides_a_stream() {
    rt().block_on(async {
        let ca = Authority::new("t", 1).unwrap();
        let mut a = endpoint(&ca, 1);
        let mut b = endpoint(&ca, 2);
        a.set_addr(NodeId(2), b.local_addr());
        b.set_addr(NodeId(1), a.local_addr());

        let small = frame(MessageClass::ObjectUpdate, 1, 120);
        a.send(NodeId(2), MessageClass::ObjectUpdate, small.clone());
        let mut seen = Vec::new();
        let (from, bytes) = next_datagram(&mut b, &mut seen).await;
        assert_eq!((from, &bytes[..]), (NodeId(1), &small[..]));
        match &seen[..] {
            [TransportEvent::PeerUp(h)] => {
                assert_eq!(h.hello.node, NodeId(1));
                assert_eq!(h.hello.advertise, a.local_addr(), "port 0 took the bound port");
            }
            other => panic!("expected one PeerUp before the datagram, got {other:?}"),
        }

        // The reply rides the same connection.
        let reply = frame(MessageClass::Control, 2, 60);
        b.send(NodeId(1), MessageClass::Control, reply.clone());
        let (from, bytes) = next_datagram(&mut a, &mut Vec::new()).await;
        assert_eq!((from, &bytes[..]), (NodeId(2), &reply[..]));

        // Larger than any DATAGRAM frame: arrives whole over the stream, in order with a
        // second one.
        let limit = a.max_datagram_size(NodeId(2)).expect("connected");
        assert!(limit >= 1000, "{limit}");
        let big = frame(MessageClass::Migration, 3, 40_000);
        let big2 = frame(MessageClass::Migration, 4, 5_000);
        assert!(big2.len() > limit);
        a.send(NodeId(2), MessageClass::Migration, big.clone());
        a.send(NodeId(2), MessageClass::Migration, big2.clone());
        let (_, got) = next_datagram(&mut b, &mut Vec::new()).await;
        assert_eq!(got.len(), big.len());
        assert!(got[..] == big[..], "stream message arrives unchanged");
        let (_, got2) = next_datagram(&mut b, &mut Vec::new()).await;
        assert!(got2[..] == big2[..]);

        let sa = a.stats();
        let sb = b.stats();
        let ou = &sa.classes[MessageClass::ObjectUpdate as usize];
        assert_eq!((ou.via_datagram, ou.via_stream), (1, 0));
        assert_eq!(ou.sent.bytes, small.len() as u64 + 28);
        let mig = &sa.classes[MessageClass::Migration as usize];
        assert_eq!((mig.via_datagram, mig.via_stream), (0, 2));
        assert_eq!(mig.sent.bytes, (big.len() + big2.len()) as u64 + 2 * 28);
        // What b received is what a sent, class by class.
        for c in [MessageClass::ObjectUpdate, MessageClass::Migration] {
            assert_eq!(
                sb.classes[c as usize].received, sa.classes[c as usize].sent,
                "{c}"
            );
        }
        assert!(sa.wire_sent.bytes >= sa.app_sent().bytes, "{sa:?}");
        assert!(sb.wire_received.bytes >= sb.app_received().bytes, "{sb:?}");
        assert!(sa.overhead_sent_bytes() > 0);
        assert_eq!(sa.refusals_total() + sb.refusals_total(), 0);
        assert_eq!(a.connected(), vec![(NodeId(2), 1)]);

        // b goes away: a reports it lost.
        b.close().await;
        let lost = within("PeerLost", async {
            loop {
                if let TransportEvent::PeerLost { node, .. } = a.recv().await {
                    return node;
                }
            }
        })
        .await;
        assert_eq!(lost, NodeId(2));
        assert!(a.connected().is_empty());
    });
}

#[test]
fn three_endpoints_deliver_by_node_id_even_when_dialing_each_other_at_once() {
    rt().block_on(async {
        let ca = Authority::new("t", 1).unwrap();
        let mut eps: Vec<QuicTransport> = (0..3).map(|i| endpoint(&ca, i)).collect();
        let addrs: Vec<SocketAddr> = eps.iter().map(|e| e.local_addr()).collect();
        for (i, e) in eps.iter().enumerate() {
            for (j, a) in addrs.iter().enumerate() {
                if i != j {
                    e.set_addr(NodeId(j as u32), *a);
                }
            }
        }
        // Everyone sends to everyone before any connection exists: simultaneous dials.
        for round in 0..5u32 {
            for (i, e) in eps.iter().enumerate() {
                for j in 0..3u32 {
                    if j != i as u32 {
                        e.send(
                            NodeId(j),
                            MessageClass::ObjectUpdate,
                            frame(MessageClass::ObjectUpdate, i as u32 * 100 + round, 80),
                        );
                    }
                }
            }
        }
        for (i, e) in eps.iter_mut().enumerate() {
            let mut got: BTreeMap<NodeId, Vec<u32>> = BTreeMap::new();
            for _ in 0..10 {
                let (from, bytes) = next_datagram(e, &mut Vec::new()).await;
                got.entry(from).or_default().push(seq_of(&bytes));
            }
            for j in (0..3u32).filter(|j| *j != i as u32) {
                let mut seqs = got.remove(&NodeId(j)).unwrap_or_default();
                seqs.sort_unstable();
                assert_eq!(
                    seqs,
                    (0..5).map(|r| j * 100 + r).collect::<Vec<_>>(),
                    "node {i} from {j}"
                );
            }
            assert!(got.is_empty(), "{got:?}");
        }
        for e in &eps {
            assert_eq!(e.connected().len(), 2);
            assert_eq!(e.stats().refusals_total(), 0);
        }
    });
}

#[test]
fn a_certificate_from_another_ca_is_refused_both_ways() {
    rt().block_on(async {
        let ca = Authority::new("cluster", 1).unwrap();
        let rogue_ca = Authority::new("rogue", 1).unwrap();
        let mut a = endpoint(&ca, 1);
        let b = endpoint(&ca, 3);
        let x = endpoint(&rogue_ca, 2);
        // The intruder dials a member.
        x.set_addr(NodeId(1), a.local_addr());
        x.send(
            NodeId(1),
            MessageClass::ObjectUpdate,
            frame(MessageClass::ObjectUpdate, 666, 100),
        );
        let (reason, detail, _) = next_refusal(&mut a).await;
        assert_eq!(reason, RefusalReason::Tls, "{detail}");
        // A member dials the intruder: our verifier rejects its certificate.
        let e = a.dial(x.local_addr()).await.unwrap_err();
        assert!(
            matches!(
                e,
                TransportError::Refused {
                    reason: RefusalReason::Tls,
                    ..
                }
            ),
            "{e}"
        );
        assert!(
            e.to_string().contains("UnknownIssuer") || e.to_string().to_lowercase().contains("unknown"),
            "{e}"
        );
        let (reason, _, _) = next_refusal(&mut a).await;
        assert_eq!(reason, RefusalReason::Tls);
        assert_eq!(a.stats().refusals_of(RefusalReason::Tls), 2);
        // Sentinel: a genuine member's datagram is the first one a delivers.
        b.set_addr(NodeId(1), a.local_addr());
        b.send(
            NodeId(1),
            MessageClass::ObjectUpdate,
            frame(MessageClass::ObjectUpdate, 7, 100),
        );
        let (from, bytes) = next_datagram(&mut a, &mut Vec::new()).await;
        assert_eq!((from, seq_of(&bytes)), (NodeId(3), 7));
        assert!(a.connected().iter().all(|(n, _)| *n != NodeId(2)));
        assert_eq!(a.stats().app_received().packets, 1);
        // The intruder got nothing either.
        assert_eq!(x.stats().app_received().packets, 0);
        assert!(x.connected().is_empty());
    });
}

/// A client that plays by QUIC and TLS with a real certificate of the cluster, but sends
/// the hello it likes (the attacker is a member running modified code).
async fn rogue_connect(
    identity: &worldmesh_net::pki::NodeIdentity,
    to: SocketAddr,
    hello_bytes: &[u8],
) -> (
    quinn::Endpoint,
    quinn::Connection,
    (quinn::SendStream, quinn::RecvStream),
) {
    #[derive(Debug)]
    struct AcceptAnything(Arc<rustls::crypto::CryptoProvider>);
    impl rustls::client::danger::ServerCertVerifier for AcceptAnything {
        fn verify_server_cert(
            &self,
            _: &rustls::pki_types::CertificateDer<'_>,
            _: &[rustls::pki_types::CertificateDer<'_>],
            _: &rustls::pki_types::ServerName<'_>,
            _: &[u8],
            _: rustls::pki_types::UnixTime,
        ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
            Ok(rustls::client::danger::ServerCertVerified::assertion())
        }
        fn verify_tls12_signature(
            &self,
            m: &[u8],
            c: &rustls::pki_types::CertificateDer<'_>,
            d: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls12_signature(m, c, d, &self.0.signature_verification_algorithms)
        }
        fn verify_tls13_signature(
            &self,
            m: &[u8],
            c: &rustls::pki_types::CertificateDer<'_>,
            d: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            rustls::crypto::verify_tls13_signature(m, c, d, &self.0.signature_verification_algorithms)
        }
        fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
            self.0.signature_verification_algorithms.supported_schemes()
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAnything(provider)))
        .with_client_auth_cert(identity.chain().to_vec(), identity.key().clone_key())
        .unwrap();
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let client = quinn::ClientConfig::new(Arc::new(
        quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap(),
    ));
    let ep = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    let conn = ep.connect_with(client, to, "x.worldmesh").unwrap().await.unwrap();
    let (mut send, recv) = conn.open_bi().await.unwrap();
    send.write_all(hello_bytes).await.unwrap();
    // Try to slip a datagram in before any verdict.
    let _ = conn.send_datagram(Bytes::from(frame(MessageClass::ObjectUpdate, 666, 100)));
    // The streams are returned to stay open (dropping the receive side would stop the
    // member's hello).
    (ep, conn, (send, recv))
}

#[test]
fn a_member_claiming_another_members_id_is_refused() {
    rt().block_on(async {
        let ca = Authority::new("t", 1).unwrap();
        let mut a = endpoint(&ca, 1);
        let b = endpoint(&ca, 3);
        // Valid certificate for node 2, hello claims node 5.
        let cert_of_2 = ca.identity(NodeId(2), 1).unwrap();
        let lie = hello(5, 8).encode().unwrap();
        let (_ep, conn, _streams) = rogue_connect(&cert_of_2, a.local_addr(), &lie).await;
        let (reason, detail, node) = next_refusal(&mut a).await;
        assert_eq!(reason, RefusalReason::Identity);
        assert_eq!(node, Some(NodeId(5)));
        assert!(detail.contains("node-2.worldmesh") && detail.contains("node 5"), "{detail}");
        // The liar's connection is closed with the refusal's code.
        let closed = within("rogue closed", conn.closed()).await;
        assert!(
            matches!(&closed, quinn::ConnectionError::ApplicationClosed(c) if String::from_utf8_lossy(&c.reason).contains("node-2.worldmesh")),
            "{closed:?}"
        );
        // Sentinel: nothing the liar sent was delivered.
        b.set_addr(NodeId(1), a.local_addr());
        b.send(NodeId(1), MessageClass::ObjectUpdate, frame(MessageClass::ObjectUpdate, 7, 100));
        let (from, bytes) = next_datagram(&mut a, &mut Vec::new()).await;
        assert_eq!((from, seq_of(&bytes)), (NodeId(3), 7));
        let s = a.stats();
        assert_eq!(s.refusals_of(RefusalReason::Identity), 1);
        assert_eq!(s.app_received().packets, 1);
        assert_eq!(a.connected(), vec![(NodeId(3), 1)]);
    });
}

#[test]
fn malformed_and_wrong_version_hellos_are_refused_with_their_own_reasons() {
    rt().block_on(async {
        let ca = Authority::new("t", 1).unwrap();
        let mut a = endpoint(&ca, 1);
        let id2 = ca.identity(NodeId(2), 1).unwrap();
        let (_e1, _c1, _s1) = rogue_connect(&id2, a.local_addr(), b"WMH\x01\x10\x00garbage-garbage!").await;
        let (reason, detail, _) = next_refusal(&mut a).await;
        assert_eq!(reason, RefusalReason::MalformedHello, "{detail}");
        let mut old = hello(2, 8);
        old.protocol = PROTOCOL_VERSION + 1;
        let (_e2, _c2, _s2) = rogue_connect(&id2, a.local_addr(), &old.encode().unwrap()).await;
        let (reason, detail, _) = next_refusal(&mut a).await;
        assert_eq!(reason, RefusalReason::Version, "{detail}");
        let (_e3, _c3, _s3) = rogue_connect(&id2, a.local_addr(), b"WMH\x07\x00\x00").await;
        let (reason, _, _) = next_refusal(&mut a).await;
        assert_eq!(reason, RefusalReason::Version);
        let s = a.stats();
        assert_eq!(
            (
                s.refusals_of(RefusalReason::MalformedHello),
                s.refusals_of(RefusalReason::Version)
            ),
            (1, 2)
        );
        assert!(a.connected().is_empty());
    });
}

#[test]
fn different_world_settings_are_refused_naming_the_setting() {
    rt().block_on(async {
        let ca = Authority::new("t", 1).unwrap();
        let mut a = endpoint(&ca, 1);
        let mut cfg = config(&ca, 2);
        cfg.hello.world = world(16);
        let b = QuicTransport::bind(cfg).unwrap();
        let e = b.dial(a.local_addr()).await.unwrap_err();
        match &e {
            TransportError::Refused { reason, detail, .. } => {
                assert!(
                    matches!(
                        reason,
                        RefusalReason::WorldMismatch | RefusalReason::RefusedByPeer
                    ),
                    "{e}"
                );
                assert!(detail.contains("\"players\""), "{e}");
            }
            other => panic!("expected a refusal, got {other}"),
        }
        let (reason, detail, node) = next_refusal(&mut a).await;
        assert_eq!(reason, RefusalReason::WorldMismatch);
        assert_eq!(node, Some(NodeId(2)));
        assert_eq!(detail, "world setting \"players\" differs: ours 8, theirs 16");
        assert!(a.connected().is_empty() && b.connected().is_empty());
    });
}

/// Waits for `t`'s next [`TransportEvent::DeclaredDown`]: (by, generation, view).
async fn next_declared_down(t: &mut QuicTransport) -> (Option<NodeId>, u64, Option<View>) {
    within("DeclaredDown", async {
        loop {
            if let TransportEvent::DeclaredDown {
                by, generation, view, ..
            } = t.recv().await
            {
                return (by, generation, view);
            }
        }
    })
    .await
}

/// Two members that declared each other dead (the two sides of a partition): each still
/// dials the other (the address stays, for SWIM's announcements to down members), only
/// the accepting end refuses, and each refusal carries the refuser's view. Once one side
/// renews, it accepts the other again, and its own new generation is accepted.
#[test]
fn two_members_holding_each_other_dead_are_refused_by_the_acceptor_with_its_view() {
    rt().block_on(async {
        let ca = Authority::new("t", 1).unwrap();
        let mut a = endpoint(&ca, 1);
        let mut b = endpoint(&ca, 2);
        b.dial(a.local_addr()).await.unwrap();
        let _ = next_peer_up(&mut a).await;
        let (va, vb) = (
            View {
                members: 3,
                lowest: NodeId(1),
            },
            View {
                members: 1,
                lowest: NodeId(2),
            },
        );
        a.set_view(va);
        b.set_view(vb);
        a.forget(NodeId(2), 1);
        b.forget(NodeId(1), 1);
        assert!(a.connected().is_empty() && b.connected().is_empty());

        // b dials the member it holds dead; a (accepting) refuses, b does not.
        b.send(
            NodeId(1),
            MessageClass::Control,
            frame(MessageClass::Control, 1, 10),
        );
        assert_eq!(next_declared_down(&mut b).await, (Some(NodeId(1)), 1, Some(va)));
        let (reason, detail, node) = next_refusal(&mut a).await;
        assert_eq!(
            (reason, node),
            (RefusalReason::DeclaredDown, Some(NodeId(2))),
            "{detail}"
        );
        assert!(detail.starts_with("view 3 1: "), "{detail}");
        // And the other way round.
        a.send(
            NodeId(2),
            MessageClass::Control,
            frame(MessageClass::Control, 2, 10),
        );
        assert_eq!(next_declared_down(&mut a).await, (Some(NodeId(2)), 1, Some(vb)));
        assert_eq!(
            a.stats().refusals_of(RefusalReason::DeclaredDown),
            2,
            "one sent, one received"
        );

        // b yields: generation 2, and a's generation 1 is no longer refused by b.
        b.set_generation(2);
        let ping = frame(MessageClass::Control, 3, 10);
        b.send(NodeId(1), MessageClass::Control, ping.clone());
        let up = next_peer_up(&mut a).await;
        assert_eq!((up.hello.node, up.hello.generation), (NodeId(2), 2));
        let got = within("datagram from the renewed member", async {
            loop {
                if let TransportEvent::Datagram { from, bytes } = a.recv().await {
                    return (from, bytes);
                }
            }
        })
        .await;
        assert_eq!(got, (NodeId(2), Bytes::from(ping)));
        assert_eq!(a.connected(), vec![(NodeId(2), 2)]);
        assert_eq!(b.connected(), vec![(NodeId(1), 1)]);
    });
}

/// A refusal names the member that refused, as its certificate says, not the one the
/// dial expected: here node 3 answers at the address node 2 holds for node 1. The node
/// told compares views with the refuser's (`Membership::declared_down`), so a wrong name
/// could make it yield to a member it holds live, or hold out against one it holds down.
#[test]
fn a_refusal_names_the_member_whose_certificate_refused() {
    rt().block_on(async {
        let ca = Authority::new("t", 1).unwrap();
        let c = endpoint(&ca, 3);
        let mut b = endpoint(&ca, 2);
        c.set_addr(NodeId(2), b.local_addr());
        c.forget(NodeId(2), 1);
        b.set_addr(NodeId(1), c.local_addr());
        b.send(
            NodeId(1),
            MessageClass::Control,
            frame(MessageClass::Control, 1, 10),
        );
        let (by, generation, _) = next_declared_down(&mut b).await;
        assert_eq!((by, generation), (Some(NodeId(3)), 1));
    });
}

#[test]
fn forgotten_members_stay_out_until_they_restart_with_a_new_generation() {
    rt().block_on(async {
        let ca = Authority::new("t", 1).unwrap();
        let mut a = endpoint(&ca, 1);
        let mut b = endpoint(&ca, 2);
        b.dial(a.local_addr()).await.unwrap();
        within("PeerUp", async {
            while !matches!(a.recv().await, TransportEvent::PeerUp(_)) {}
        })
        .await;
        a.forget(NodeId(2), 1);
        assert!(a.connected().is_empty());
        let a_view = View {
            members: 5,
            lowest: NodeId(1),
        };
        a.set_view(a_view);
        // The same incarnation comes back: refused, and told why by the close code, with
        // how the refuser sees the cluster.
        let e = b.dial(a.local_addr()).await.unwrap_err();
        assert!(
            matches!(
                e,
                TransportError::Refused {
                    reason: RefusalReason::DeclaredDown,
                    ..
                }
            ),
            "{e}"
        );
        let (reason, detail, _) = next_refusal(&mut a).await;
        assert_eq!(reason, RefusalReason::DeclaredDown, "{detail}");
        let told = within("DeclaredDown", async {
            loop {
                if let TransportEvent::DeclaredDown {
                    by,
                    addr,
                    generation,
                    view,
                } = b.recv().await
                {
                    return (by, addr, generation, view);
                }
            }
        })
        .await;
        // A dial by address expects no node: the refuser is the one its certificate names.
        assert_eq!(told, (Some(NodeId(1)), a.local_addr(), 1, Some(a_view)));
        assert_eq!(b.stats().refusals_of(RefusalReason::DeclaredDown), 1);
        // It renews (generation 2, the same process): a member again.
        b.set_generation(2);
        let h = b.dial(a.local_addr()).await.unwrap();
        assert_eq!(h.hello.node, NodeId(1));
        let up = next_peer_up(&mut a).await;
        assert_eq!((up.hello.node, up.hello.generation), (NodeId(2), 2));
        a.forget(NodeId(2), 2);
        // Restarted (generation 3): a new member.
        let mut cfg = config(&ca, 2);
        cfg.hello.generation = 3;
        let b2 = QuicTransport::bind(cfg).unwrap();
        let h = b2.dial(a.local_addr()).await.unwrap();
        assert_eq!(h.hello.node, NodeId(1));
        let up = next_peer_up(&mut a).await;
        assert_eq!((up.hello.node, up.hello.generation), (NodeId(2), 3));
        assert_eq!(a.connected(), vec![(NodeId(2), 3)]);
        // Membership declares an old incarnation dead only now: the new one stays.
        a.forget(NodeId(2), 2);
        assert_eq!(a.connected(), vec![(NodeId(2), 3)]);
        a.forget(NodeId(2), 3);
        assert!(a.connected().is_empty());
    });
}

#[test]
fn a_restart_replaces_the_old_incarnation() {
    rt().block_on(async {
        let ca = Authority::new("t", 1).unwrap();
        let mut a = endpoint(&ca, 1);
        let b = endpoint(&ca, 2);
        b.dial(a.local_addr()).await.unwrap();
        let mut cfg = config(&ca, 2);
        cfg.hello.generation = 5;
        let b2 = QuicTransport::bind(cfg).unwrap();
        b2.dial(a.local_addr()).await.unwrap();
        let mut events = Vec::new();
        within("restart events", async {
            while events.len() < 3 {
                events.push(a.recv().await);
            }
        })
        .await;
        assert!(
            matches!(&events[0], TransportEvent::PeerUp(h) if h.hello.generation == 1),
            "{events:?}"
        );
        assert!(
            matches!(
                &events[1],
                TransportEvent::PeerLost {
                    node: NodeId(2),
                    generation: 1,
                    ..
                }
            ),
            "{events:?}"
        );
        assert!(
            matches!(&events[2], TransportEvent::PeerUp(h) if h.hello.generation == 5),
            "{events:?}"
        );
        // An older incarnation can no longer connect.
        let e = b.dial(a.local_addr()).await.unwrap_err();
        assert!(matches!(e, TransportError::Refused { .. }), "{e}");
        assert_eq!(a.connected(), vec![(NodeId(2), 5)]);
    });
}

/// A UDP proxy between a sender (dialing `front`) and `target`: forwards everything both
/// ways, sends every packet twice, and records what went towards the target.
struct Proxy {
    front: Arc<UdpSocket>,
    back: Arc<UdpSocket>,
    recorded: Arc<std::sync::Mutex<Vec<Vec<u8>>>>,
}

impl Proxy {
    async fn start(target: SocketAddr) -> Proxy {
        let front = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
        let back = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
        let recorded = Arc::new(std::sync::Mutex::new(Vec::new()));
        let client = Arc::new(std::sync::Mutex::new(None::<SocketAddr>));
        {
            let (front, back, recorded, client) =
                (front.clone(), back.clone(), recorded.clone(), client.clone());
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65_536];
                while let Ok((n, from)) = front.recv_from(&mut buf).await {
                    *client.lock().unwrap() = Some(from);
                    recorded.lock().unwrap().push(buf[..n].to_vec());
                    let _ = back.send_to(&buf[..n], target).await;
                    let _ = back.send_to(&buf[..n], target).await;
                }
            });
        }
        {
            let (front, back) = (front.clone(), back.clone());
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65_536];
                while let Ok((n, _)) = back.recv_from(&mut buf).await {
                    let to = *client.lock().unwrap();
                    if let Some(to) = to {
                        let _ = front.send_to(&buf[..n], to).await;
                        let _ = front.send_to(&buf[..n], to).await;
                    }
                }
            });
        }
        Proxy {
            front,
            back,
            recorded,
        }
    }
}

#[test]
fn replayed_packets_deliver_nothing_twice() {
    rt().block_on(async {
        let ca = Authority::new("t", 1).unwrap();
        let mut a = endpoint(&ca, 1);
        let b = endpoint(&ca, 2);
        let proxy = Proxy::start(a.local_addr()).await;
        b.set_addr(NodeId(1), proxy.front.local_addr().unwrap());
        const N: u32 = 40;
        let mut got = Vec::new();
        for seq in 0..N {
            // A mix of DATAGRAM frames and stream messages.
            let len = if seq % 10 == 9 {
                3_000
            } else {
                100 + seq as usize * 7
            };
            b.send(
                NodeId(1),
                MessageClass::ObjectUpdate,
                frame(MessageClass::ObjectUpdate, seq, len),
            );
            let (from, bytes) = next_datagram(&mut a, &mut Vec::new()).await;
            assert_eq!(from, NodeId(2));
            got.push(seq_of(&bytes));
        }
        // Every recorded packet towards a, replayed three more times, from the proxy's
        // address (the connection's own path).
        let recorded = proxy.recorded.lock().unwrap().clone();
        assert!(recorded.len() as u32 >= N, "{}", recorded.len());
        for _ in 0..3 {
            for p in &recorded {
                proxy.back.send_to(p, a.local_addr()).await.unwrap();
            }
        }
        // ... and from a fresh address (a replay by an off-path attacker).
        let other = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        for p in &recorded {
            other.send_to(p, a.local_addr()).await.unwrap();
        }
        // Sentinel after the replays, on the same path.
        b.send(
            NodeId(1),
            MessageClass::Control,
            frame(MessageClass::Control, 9_999, 60),
        );
        loop {
            let (_, bytes) = next_datagram(&mut a, &mut Vec::new()).await;
            let s = seq_of(&bytes);
            if s == 9_999 {
                break;
            }
            got.push(s);
        }
        assert_eq!(
            got,
            (0..N).collect::<Vec<_>>(),
            "each datagram exactly once, nothing replayed"
        );
        assert_eq!(
            a.stats().classes[MessageClass::ObjectUpdate as usize]
                .received
                .packets,
            u64::from(N)
        );
        // The off-path replay got no answer.
        // The off-path replay's only possible answer is a Retry to a replayed first
        // Initial (which looks like a new client): smaller than the 1200-byte Initial that
        // provoked it, and no handshake flight follows unless the source proves it can
        // receive at its address.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let mut buf = [0u8; 2048];
        while let Ok((n, _)) = other.try_recv_from(&mut buf) {
            assert_eq!(
                buf[0] & 0xf0,
                0xf0,
                "only Retry packets go to an unvalidated source"
            );
            assert!(n < 1200, "{n}-byte reply");
        }
    });
}

/// Datagrams an attacker without keys can send: the old plaintext frames (which look
/// like QUIC short-header packets), a frame long enough to provoke a stateless reset,
/// a long-header packet of an unknown version (provokes version negotiation), and junk.
fn forgeries() -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for (i, c) in MessageClass::ALL.iter().enumerate() {
        v.push(frame(*c, 1_000 + i as u32, 40 + i * 100));
    }
    v.push(frame(MessageClass::ObjectUpdate, 2_000, 1_300));
    let mut vn = vec![
        0xc0, 0x1a, 0x2b, 0x3c, 0x4d, 8, 1, 2, 3, 4, 5, 6, 7, 8, 8, 1, 2, 3, 4, 5, 6, 7, 8,
    ];
    vn.resize(1_250, 0);
    v.push(vn);
    let mut initial = vec![0xc0, 0, 0, 0, 1, 8, 9, 9, 9, 9, 9, 9, 9, 9, 0, 0, 0x44, 0xd0];
    initial.resize(1_250, 0x5a);
    v.push(initial);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for len in [1usize, 5, 21, 22, 64, 300, 1_199, 1_200, 1_400] {
        let mut junk = Vec::with_capacity(len);
        for _ in 0..len {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            junk.push(x as u8);
        }
        v.push(junk);
    }
    v
}

#[test]
fn forged_plaintext_is_neither_delivered_nor_answered() {
    rt().block_on(async {
        let ca = Authority::new("t", 1).unwrap();
        let mut a = endpoint(&ca, 1);
        let b = endpoint(&ca, 2);
        b.dial(a.local_addr()).await.unwrap();
        // The attacker's (spoofed) source: it listens for anything a sends back.
        let spoofed = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        for p in forgeries() {
            spoofed.send_to(&p, a.local_addr()).await.unwrap();
        }
        // Sentinel from the genuine member, then a round trip a -> b.
        b.send(
            NodeId(1),
            MessageClass::ObjectUpdate,
            frame(MessageClass::ObjectUpdate, 7, 100),
        );
        let mut seen = Vec::new();
        let (from, bytes) = next_datagram(&mut a, &mut seen).await;
        assert_eq!(
            (from, seq_of(&bytes)),
            (NodeId(2), 7),
            "the first datagram delivered is the sentinel"
        );
        assert!(
            seen.iter().all(|e| matches!(e, TransportEvent::PeerUp(_))),
            "{seen:?}"
        );
        let s = a.stats();
        assert_eq!(s.app_received().packets, 1);
        assert!(s.wire_received.packets >= forgeries().len() as u64);
        // The version-negotiation reply quinn prepared was withheld.
        assert!(s.withheld_replies >= 1, "{s:?}");
        // Give a's endpoint the chance to answer the forgeries, then check nothing came.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let mut buf = [0u8; 2048];
        let reply = spoofed.try_recv_from(&mut buf);
        assert!(
            reply.is_err(),
            "a replied {:?} bytes to a forged source",
            reply.map(|r| r.0)
        );

        // Control: a default quinn server answers the same forgeries (version negotiation
        // and stateless reset), so this test would catch a regression.
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["x".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let server = quinn::ServerConfig::with_single_cert(
            vec![cert.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .unwrap();
        let plain = quinn::Endpoint::server(server, "127.0.0.1:0".parse().unwrap()).unwrap();
        let probe = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        for p in forgeries() {
            probe.send_to(&p, plain.local_addr().unwrap()).await.unwrap();
        }
        let (n, _) = within("a default quinn server replies", probe.recv_from(&mut buf))
            .await
            .unwrap();
        assert!(n > 0);
    });
}

#[test]
fn sends_queue_while_dialing_with_a_bound_and_unreachable_members_are_counted() {
    rt().block_on(async {
        let ca = Authority::new("t", 1).unwrap();
        let mut cfg = config(&ca, 1);
        cfg.peer_queue = 2;
        cfg.idle_timeout = Duration::from_millis(300);
        cfg.keep_alive = Duration::from_millis(100);
        let a = QuicTransport::bind(cfg).unwrap();
        let mut b = endpoint(&ca, 2);
        // Unknown member: nowhere to send.
        a.send(
            NodeId(9),
            MessageClass::Control,
            frame(MessageClass::Control, 0, 40),
        );
        assert_eq!(a.stats().undeliverable, 1);
        // Five sends before the dial can even start: two wait, three are dropped.
        a.set_addr(NodeId(2), b.local_addr());
        for seq in 0..5 {
            a.send(
                NodeId(2),
                MessageClass::ObjectUpdate,
                frame(MessageClass::ObjectUpdate, seq, 100),
            );
        }
        assert_eq!(
            a.stats().classes[MessageClass::ObjectUpdate as usize].queue_drops,
            3
        );
        let mut got = Vec::new();
        for _ in 0..2 {
            got.push(seq_of(&next_datagram(&mut b, &mut Vec::new()).await.1));
        }
        assert_eq!(got, vec![0, 1], "the queued ones, in order");

        // A member whose address answers nothing: the dial fails, its queue is dropped
        // and counted, and the next send waits for the back-off instead of re-dialing.
        let silent = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        a.set_addr(NodeId(3), silent.local_addr().unwrap());
        a.send(
            NodeId(3),
            MessageClass::Control,
            frame(MessageClass::Control, 1, 40),
        );
        within("the dial to a silent address fails", async {
            while a.stats().dial_failures == 0 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        let s = a.stats();
        assert_eq!(s.dial_failures, 1);
        assert_eq!(
            s.undeliverable, 2,
            "the unknown member's message and the silent one's"
        );
        assert_eq!(s.refusals_total(), 0, "nobody refused anything");
    });
}
