//! What QUIC costs over the plain-UDP baseline: wire bytes and CPU time for the same stream
//! of worldmesh-sized datagrams between two endpoints on loopback (issue 13 target:
//! ≤ 1.3× bytes, ≤ 1.5× CPU).
//!
//! ```text
//! cargo run --release -p worldmesh-net --example transport_cost -- [--messages N] [--burst B,B,...]
//!     [--ack-threshold N] [--no-mtud] [--cid-len N] [--initial-mtu N] [--one-way]
//! ```
//!
//! Both endpoints run on one current-thread tokio runtime in this process, so the CPU time
//! (the sum over the process's threads of `/proc/self/task/*/schedstat`, nanoseconds on
//! CPU) covers sender and receiver. Each "frame" every endpoint sends `B` datagrams to the
//! other and waits until it received the other's `B` (or 200 ms passed: lost ones are
//! reported); with `--one-way` only the first endpoint sends (`2B` per frame) and the other
//! only acknowledges. Sizes follow a fixed mix: 85% 60–300 B, 10% 300–800 B, 5% 1,200 B; the
//! frames are real `core::wire` frames of several classes. Wire bytes are UDP payload + 28
//! per UDP datagram for both transports (for UDP that equals the application count). The
//! handshake and a warm-up are excluded from both figures.

use std::time::{Duration, Instant};

use worldmesh_core::NodeId;
use worldmesh_core::traffic::MessageClass;
use worldmesh_core::wire::{self, PROTOCOL_VERSION};
use worldmesh_net::hello::Hello;
use worldmesh_net::pki::Authority;
use worldmesh_net::quic::{QuicConfig, QuicTransport};
use worldmesh_net::transport::{Transport, TransportEvent, TransportStats};
use worldmesh_net::udp::UdpTransport;

struct Options {
    messages: usize,
    bursts: Vec<usize>,
    ack_threshold: Option<u32>,
    mtud: bool,
    cid_len: usize,
    initial_mtu: u16,
    one_way: bool,
}

fn options() -> Result<Options, String> {
    let mut o = Options {
        messages: 100_000,
        bursts: vec![1, 10, 50],
        ack_threshold: None,
        mtud: true,
        cid_len: 8,
        initial_mtu: 1200,
        one_way: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "--messages" => {
                o.messages = val("--messages")?
                    .parse()
                    .map_err(|e| format!("--messages: {e}"))?
            }
            "--burst" => {
                o.bursts = val("--burst")?
                    .split(',')
                    .map(|b| b.parse().map_err(|e| format!("--burst: {e}")))
                    .collect::<Result<_, _>>()?
            }
            "--ack-threshold" => {
                o.ack_threshold = Some(val("--ack-threshold")?.parse().map_err(|e| format!("{e}"))?)
            }
            "--no-mtud" => o.mtud = false,
            "--one-way" => o.one_way = true,
            "--cid-len" => o.cid_len = val("--cid-len")?.parse().map_err(|e| format!("{e}"))?,
            "--initial-mtu" => o.initial_mtu = val("--initial-mtu")?.parse().map_err(|e| format!("{e}"))?,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(o)
}

/// The fixed message mix: (class, frame bytes).
fn workload(n: usize) -> Vec<(MessageClass, Vec<u8>)> {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..n)
        .map(|i| {
            let r = next() % 100;
            let len = match r {
                0..=84 => 60 + (next() % 241) as usize,
                85..=94 => 300 + (next() % 501) as usize,
                _ => 1_200,
            };
            let class = match next() % 10 {
                0..=6 => MessageClass::ObjectUpdate,
                7 => MessageClass::LocatorRouting,
                8 => MessageClass::MatchDelivery,
                _ => MessageClass::OverlayMaintenance,
            };
            let mut payload = (i as u64).to_le_bytes().to_vec();
            payload.resize(len - wire::HEADER_LEN, (i % 251) as u8);
            (class, wire::frame(class, &payload).expect("fits"))
        })
        .collect()
}

/// Nanoseconds this process has spent on a CPU, summed over its threads.
fn cpu_ns() -> u64 {
    let mut total = 0;
    if let Ok(dir) = std::fs::read_dir("/proc/self/task") {
        for t in dir.flatten() {
            if let Ok(s) = std::fs::read_to_string(t.path().join("schedstat")) {
                total += s
                    .split_whitespace()
                    .next()
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
            }
        }
    }
    total
}

async fn receive(t: &mut impl Transport, n: usize, deadline: tokio::time::Instant) -> usize {
    let mut got = 0;
    while got < n {
        match tokio::time::timeout_at(deadline, t.recv()).await {
            Ok(TransportEvent::Datagram { .. }) => got += 1,
            Ok(_) => {}
            Err(_) => break,
        }
    }
    got
}

#[derive(Default, Clone, Copy)]
struct Totals {
    app_bytes: u64,
    app_packets: u64,
    wire_bytes: u64,
    wire_packets: u64,
    via_stream: u64,
}

fn totals(a: &TransportStats, b: &TransportStats) -> Totals {
    let mut t = Totals::default();
    for s in [a, b] {
        let app = s.app_sent();
        t.app_bytes += app.bytes;
        t.app_packets += app.packets;
        t.wire_bytes += s.wire_sent.bytes;
        t.wire_packets += s.wire_sent.packets;
        t.via_stream += s.classes.iter().map(|c| c.via_stream).sum::<u64>();
    }
    t
}

struct Outcome {
    delivered: usize,
    sent: usize,
    d: Totals,
    cpu: Duration,
    wall: Duration,
}

async fn exchange<T: Transport>(
    a: &mut T,
    b: &mut T,
    msgs: &[(MessageClass, Vec<u8>)],
    burst: usize,
    one_way: bool,
) -> Outcome {
    // Warm-up (handshakes, MTU probes settle): not measured.
    for (class, m) in msgs.iter().take(200) {
        a.send(NodeId(2), *class, m.clone());
        b.send(NodeId(1), *class, m.clone());
    }
    let dl = tokio::time::Instant::now() + Duration::from_secs(5);
    let _ = tokio::join!(receive(b, 200, dl), receive(a, 200, dl));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = totals(&a.stats(), &b.stats());
    let cpu0 = cpu_ns();
    let wall0 = Instant::now();
    let mut delivered = 0;
    let mut sent = 0;
    for pair in msgs.chunks(2 * burst) {
        let (to_b, to_a) = if one_way {
            (pair, &pair[..0])
        } else {
            pair.split_at(pair.len() / 2)
        };
        for (class, m) in to_b {
            a.send(NodeId(2), *class, m.clone());
        }
        for (class, m) in to_a {
            b.send(NodeId(1), *class, m.clone());
        }
        sent += pair.len();
        let dl = tokio::time::Instant::now() + Duration::from_millis(200);
        let (x, y) = tokio::join!(receive(b, to_b.len(), dl), receive(a, to_a.len(), dl));
        delivered += x + y;
    }
    let cpu = Duration::from_nanos(cpu_ns() - cpu0);
    let wall = wall0.elapsed();
    let after = totals(&a.stats(), &b.stats());
    Outcome {
        delivered,
        sent,
        d: Totals {
            app_bytes: after.app_bytes - before.app_bytes,
            app_packets: after.app_packets - before.app_packets,
            wire_bytes: after.wire_bytes - before.wire_bytes,
            wire_packets: after.wire_packets - before.wire_packets,
            via_stream: after.via_stream - before.via_stream,
        },
        cpu,
        wall,
    }
}

async fn udp_run(msgs: &[(MessageClass, Vec<u8>)], burst: usize, o: &Options) -> Outcome {
    let local = "127.0.0.1:0".parse().unwrap();
    let mut a = UdpTransport::bind(local).await.unwrap();
    let mut b = UdpTransport::bind(local).await.unwrap();
    a.set_addr(NodeId(2), b.local_addr());
    b.set_addr(NodeId(1), a.local_addr());
    exchange(&mut a, &mut b, msgs, burst, o.one_way).await
}

async fn quic_run(msgs: &[(MessageClass, Vec<u8>)], burst: usize, o: &Options) -> Outcome {
    let ca = Authority::new("bench", 1).unwrap();
    let cfg = |node: u32| {
        let mut c = QuicConfig::new(
            "127.0.0.1:0".parse().unwrap(),
            ca.identity(NodeId(node), 1).unwrap(),
            Hello {
                protocol: PROTOCOL_VERSION,
                node: NodeId(node),
                generation: 1,
                advertise: "127.0.0.1:0".parse().unwrap(),
                world: vec![("players".into(), "8".into())],
            },
        );
        c.ack_eliciting_threshold = o.ack_threshold;
        c.mtu_discovery = o.mtud;
        c.cid_len = o.cid_len;
        c.initial_mtu = o.initial_mtu;
        c
    };
    let mut a = QuicTransport::bind(cfg(1)).unwrap();
    let mut b = QuicTransport::bind(cfg(2)).unwrap();
    a.set_addr(NodeId(2), b.local_addr());
    b.set_addr(NodeId(1), a.local_addr());
    let out = exchange(&mut a, &mut b, msgs, burst, o.one_way).await;
    eprintln!(
        "  (quic max datagram {:?} B; a refusals {})",
        a.max_datagram_size(NodeId(2)),
        a.stats().refusals_total()
    );
    a.close().await;
    b.close().await;
    out
}

fn line(name: &str, burst: usize, o: &Outcome) {
    println!(
        "{name:<5} burst {burst:>3}: delivered {}/{}  app {:>10} B in {:>7} dgrams  wire {:>10} B in {:>7} UDP dgrams (×{:.3} of app)  stream msgs {:>5}  CPU {:>7.1} ms ({:.2} µs/msg)  wall {:.1} s",
        o.delivered,
        o.sent,
        o.d.app_bytes,
        o.d.app_packets,
        o.d.wire_bytes,
        o.d.wire_packets,
        o.d.wire_bytes as f64 / o.d.app_bytes.max(1) as f64,
        o.d.via_stream,
        o.cpu.as_secs_f64() * 1e3,
        o.cpu.as_secs_f64() * 1e6 / o.sent.max(1) as f64,
        o.wall.as_secs_f64(),
    );
}

fn main() {
    let o = match options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    let msgs = workload(o.messages);
    let mean = msgs.iter().map(|(_, m)| m.len()).sum::<usize>() as f64 / msgs.len().max(1) as f64;
    println!(
        "{} messages{}, mean {:.0} B; quic: ack threshold {:?}, MTU discovery {}, cid {} B, initial MTU {}",
        o.messages,
        if o.one_way { " one way" } else { "" },
        mean,
        o.ack_threshold,
        o.mtud,
        o.cid_len,
        o.initial_mtu
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for &burst in &o.bursts {
        let u = rt.block_on(udp_run(&msgs, burst, &o));
        line("udp", burst, &u);
        let q = rt.block_on(quic_run(&msgs, burst, &o));
        line("quic", burst, &q);
        println!(
            "  ratio quic/udp: wire bytes {:.3}×, CPU {:.3}×",
            q.d.wire_bytes as f64 / u.d.wire_bytes.max(1) as f64,
            q.cpu.as_secs_f64() / u.cpu.as_secs_f64().max(1e-9)
        );
    }
}
