//! Writes the seed corpora `fuzz/corpus/<target>/seed-NN` from real encoders: datagrams a
//! small harness cluster actually sends, messages built with the crates' own encoders, and
//! the repository's example files. `cargo run --bin gen_seeds -- <fuzz dir>`; the output
//! is deterministic, so regenerating changes nothing unless an encoding changed.

#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use worldmesh_client::proto::{CLIENT_PROTOCOL_VERSION, ClientMsg};
use worldmesh_client::token;
use worldmesh_core::wire::HEADER_LEN;
use worldmesh_core::{MessageClass, NodeId, ObjectId, Time};
use worldmesh_fuzz::{MEMBERS, cluster_node, put_chunk};
use worldmesh_net::hello::Hello;

/// Seeds per target, each a list of files' bytes.
type Seeds = BTreeMap<&'static str, Vec<Vec<u8>>>;

/// Datagrams the harness cluster's members 1–3 send node 0 over a few frames, with their
/// sender.
fn cluster_traffic() -> Vec<(NodeId, MessageClass, Vec<u8>)> {
    let mut nodes: Vec<_> = MEMBERS.iter().map(|id| cluster_node(*id)).collect();
    let mut out = Vec::new();
    for frame in 1..=6u64 {
        let now = Time::from_millis(100 * frame);
        let mut flights = Vec::new();
        for n in nodes.iter_mut() {
            n.handle_timeout(now);
            while let Some(t) = n.poll_transmit() {
                flights.push((n.id(), t));
            }
        }
        for (from, t) in flights {
            if t.dst == NodeId(0) && from != NodeId(0) {
                out.push((from, t.class, t.datagram.clone()));
            }
            if let Some(dst) = nodes.iter_mut().find(|n| n.id() == t.dst) {
                dst.handle_datagram(now, from, &t.datagram);
            }
        }
    }
    out
}

/// Keeps at most `per_class` datagrams of each class (the smallest first: small seeds
/// mutate faster).
fn sample(traffic: &[(NodeId, MessageClass, Vec<u8>)], per_class: usize) -> Vec<(NodeId, Vec<u8>)> {
    let mut by_class: BTreeMap<u8, Vec<(NodeId, Vec<u8>)>> = BTreeMap::new();
    for (from, class, d) in traffic {
        by_class.entry(*class as u8).or_default().push((*from, d.clone()));
    }
    let mut out = Vec::new();
    for (_, mut v) in by_class {
        v.sort_by_key(|(_, d)| d.len());
        v.dedup_by(|a, b| a.1 == b.1);
        // Spread over the sizes: smallest, largest and between.
        let step = (v.len() / per_class).max(1);
        out.extend(v.into_iter().step_by(step).take(per_class));
    }
    out
}

fn client_msgs() -> Vec<Vec<u8>> {
    [
        ClientMsg::Connect {
            version: CLIENT_PROTOCOL_VERSION,
            token: worldmesh_fuzz::token(2),
        },
        ClientMsg::Inputs {
            ack: Some(3),
            first_seq: 1,
            inputs: vec![vec![0, 1, 2, 3], vec![1, 0, 0, 0]],
        },
        ClientMsg::Delays {
            rtts: vec![(0, 12.5), (1, 40.0), (2, 80.0)],
        },
        ClientMsg::Ack { view: Some(1) },
        ClientMsg::Ack { view: None },
        ClientMsg::Disconnect,
    ]
    .iter()
    .map(ClientMsg::encode)
    .collect()
}

fn generate(repo: &Path) -> Seeds {
    let mut seeds = Seeds::new();
    let traffic = cluster_traffic();
    let picked = sample(&traffic, 6);

    // wire_frame: real datagrams of every class the cluster sends, and a hello.
    let hello = Hello {
        protocol: 1,
        node: NodeId(3),
        generation: 2,
        advertise: "127.0.0.1:7000".parse().expect("an address"),
        world: vec![
            ("map".into(), "random:2048x2048:16:7".into()),
            ("seed".into(), "7".into()),
        ],
    };
    let mut wire: Vec<Vec<u8>> = picked.iter().map(|(_, d)| d.clone()).collect();
    wire.push(hello.encode().expect("a hello encodes"));
    seeds.insert("wire_frame", wire);

    // replica_codec: the payloads of object-update datagrams.
    let packets = traffic
        .iter()
        .filter(|(_, c, _)| *c == MessageClass::ObjectUpdate)
        .map(|(_, _, d)| d[HEADER_LEN..].to_vec());
    let mut packets: Vec<_> = packets.collect();
    packets.sort_by_key(Vec::len);
    packets.dedup();
    let step = (packets.len() / 8).max(1);
    seeds.insert(
        "replica_codec",
        packets.into_iter().step_by(step).take(8).collect(),
    );

    // node_datagram: one record per datagram (op = sender), then client records; and one
    // seed holding the whole exchange in order.
    let mut node_seeds = Vec::new();
    let mut all = Vec::new();
    for (from, d) in &picked {
        let mut s = vec![from.0 as u8];
        put_chunk(&mut s, d);
        all.extend_from_slice(&s);
        node_seeds.push(s);
    }
    for (k, m) in client_msgs().iter().enumerate() {
        let op = if k == 0 { 7 } else { 5 };
        let mut s = vec![op];
        put_chunk(&mut s, m);
        all.extend_from_slice(&s);
        node_seeds.push(s);
    }
    node_seeds.push(all);
    seeds.insert("node_datagram", node_seeds);

    // locator_datagram: the locator's own traffic (RangeDht keying: first byte 0).
    let loc: Vec<Vec<u8>> = picked
        .iter()
        .filter(|(_, d)| {
            matches!(
                MessageClass::from_u8(d[3]),
                Some(
                    MessageClass::LocatorRouting
                        | MessageClass::MatchDelivery
                        | MessageClass::OverlayMaintenance
                )
            )
        })
        .map(|(from, d)| {
            let mut s = vec![0, from.0 as u8];
            put_chunk(&mut s, d);
            s
        })
        .collect();
    seeds.insert("locator_datagram", loc);

    // client_proto: client messages, what the node answers a connect, a token, hex.
    let mut client: Vec<Vec<u8>> = client_msgs().into_iter().map(|m| [vec![0], m].concat()).collect();
    let mut answers = vec![1u8];
    let accepted = worldmesh_client::proto::NodeMsg::Accepted {
        player: 2,
        avatar: ObjectId::new(NodeId(0), 9),
        frame_ms: 100,
    }
    .encode();
    answers.push(1);
    put_chunk(&mut answers, &accepted);
    client.push(answers);
    client.push([vec![2], worldmesh_fuzz::token(1)].concat());
    client.push([vec![3], token::to_hex(&[7; 32]).into_bytes()].concat());
    client.push([vec![3], token::to_hex(&worldmesh_fuzz::token(4)).into_bytes()].concat());
    seeds.insert("client_proto", client);

    // text_configs: the example files and the simulator's configuration sections.
    let read = |p: &str| std::fs::read(repo.join(p)).unwrap_or_default();
    let sim = [
        "nodes = 3\nbots_per_node = 2\narchitecture = \"broadcast\"\n[network]\nloss = 0.01\n",
        "[locator]\nkind = \"rangedht\"\nrange_key = \"hilbert\"\nmax_sub_ranges = 7\n",
        "[locator]\nkind = \"dht\"\npub_time_ms = 250\npub_ttl_ms = 4000\npub_interval_ms = 1500\n",
        "[cluster]\nmembership = \"wan\"\n[placement]\nenabled = true\ninterval_s = 5.0\n",
    ];
    let mut text: Vec<Vec<u8>> = sim
        .iter()
        .map(|s| [b"\0".as_slice(), s.as_bytes()].concat())
        .collect();
    text.push([vec![1], read("data/plan/village.toml")].concat());
    text.push(
        [
            vec![1],
            b"width = 400\nheight = 300\n[height_map]\ncell_size = 100\neye_height = 56\nrows = [[0, 0, 10], [0, 40, 10]]\n"
                .to_vec(),
        ]
        .concat(),
    );
    text.push([vec![2], read("data/plan/day.toml")].concat());
    text.push([vec![3], read("data/plan/trace-example.csv")].concat());
    for spec in [
        "random:2048x2048:16:7",
        "empty:100x100",
        "radius:300",
        "box:200x100",
        "none",
    ] {
        text.push([vec![4], spec.as_bytes().to_vec()].concat());
    }
    seeds.insert("text_configs", text);

    // latency_matrix: small matrices in both formats, and the head of the shipped one.
    let mut lat = vec![
        b"\x000 10 20\n10 0 15\n20 15 0\n".to_vec(),
        b"\x01# rtt ms\n0,12.5,30\n12.5,0,7\n30,7,0\n".to_vec(),
        b"\x00# comment\n0 1\n1 0\n".to_vec(),
    ];
    let planetlab = read("data/latency/planetlab-490.txt");
    // Its top-left 5 x 5 corner (the whole file is 490 x 490).
    let corner: String = String::from_utf8_lossy(&planetlab)
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .take(5)
        .map(|l| l.split_whitespace().take(5).collect::<Vec<_>>().join(" ") + "\n")
        .collect();
    lat.push([vec![0], corner.into_bytes()].concat());
    seeds.insert("latency_matrix", lat);

    // dashboard_msg: text messages and focus messages.
    let focus = worldmesh_dashboard::wire::encode_focus(&worldmesh_dashboard::wire::Focus {
        seq: 4,
        id: ObjectId::new(NodeId(2), 17),
        found: None,
    });
    seeds.insert(
        "dashboard_msg",
        vec![
            b"\0{\"hover\":\"2:17\"}".to_vec(),
            b"\0{\"hover\":null}".to_vec(),
            b"\x0012:345".to_vec(),
            [vec![1], focus].concat(),
        ],
    );
    seeds
}

fn main() {
    let fuzz_dir = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("fuzz"));
    let repo = fuzz_dir.join("..");
    for (target, files) in generate(&repo) {
        let dir = fuzz_dir.join("corpus").join(target);
        std::fs::create_dir_all(&dir).expect("create the corpus directory");
        for (k, bytes) in files.iter().enumerate() {
            std::fs::write(dir.join(format!("seed-{k:02}")), bytes).expect("write a seed");
        }
        println!("{target}: {} seeds", files.len());
    }
}
