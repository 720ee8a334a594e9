//! The live dashboard on a real cluster (issue 17): three `worldmesh node` processes with
//! `--metrics`, `worldmesh dashboard --cluster` as a process, and the dashboard's own
//! WebSocket stream decoded with its Rust decoder ([`worldmesh_dashboard::wire::Decoder`]):
//! every object the nodes hold is shown once, owned by the node that holds it, the node
//! table matches, and when a node drains its objects are shown at their new owners and the
//! node goes down. Assertions are on what the processes report, never on speed.

mod common;
mod procs;

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use procs::{Kind, Nodes, heavy};
use serde_json::Value;
use tungstenite::{Message, WebSocket};
use worldmesh_core::{NodeId, ObjectId};
use worldmesh_dashboard::wire::{Decoder, WireNodes, object_key};

const WAIT: Duration = Duration::from_secs(30);
/// The model game's missile kind.
const MISSILE: u8 = 1;

fn s<T: ToString>(v: T) -> String {
    v.to_string()
}

/// The wire keys of the objects node `id` listed when it started.
fn started_keys(n: &Nodes, id: u32) -> Vec<u64> {
    let r = n
        .records
        .iter()
        .find(|r| r.node == id && r.kind == Kind::Started)
        .expect("started line");
    r.json["primaries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            let seq = o["seq"].as_u64().unwrap();
            object_key(ObjectId::with_generation(
                NodeId(o["origin"].as_u64().unwrap() as u32),
                (seq >> 32) as u32,
                seq as u32,
            ))
        })
        .collect()
}

/// A `worldmesh dashboard --cluster` process.
struct Dash {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Dash {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_dashboard(endpoints: &[SocketAddr]) -> Dash {
    let list: Vec<String> = endpoints.iter().map(|a| a.to_string()).collect();
    let mut child = common::worldmesh()
        .args(["dashboard", "--addr", "127.0.0.1:0", "--cluster", &list.join(",")])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    // Owned (and killed on drop) before anything can fail.
    let mut dash = Dash {
        child,
        addr: SocketAddr::from(([0, 0, 0, 0], 0)),
    };
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            eprintln!("dashboard: {l}");
            let _ = tx.send(l);
        }
    });
    let deadline = Instant::now() + WAIT;
    loop {
        let l = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("the dashboard printed its URL");
        if let Some(rest) = l.strip_prefix("dashboard: http://") {
            dash.addr = rest.split('/').next().unwrap().parse().unwrap();
            return dash;
        }
    }
}

/// The dashboard's stream, decoded.
struct Stream {
    ws: WebSocket<TcpStream>,
    dec: Decoder,
    nodes: Option<WireNodes>,
    migrations: u64,
    adoptions: u64,
}

impl Stream {
    fn connect(addr: SocketAddr) -> Self {
        Self::connect_to(addr, "real cluster: 3 node endpoints")
    }

    fn connect_to(addr: SocketAddr, title_start: &str) -> Self {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let (mut ws, _) = tungstenite::client(format!("ws://{addr}/ws"), s).unwrap();
        let hello: Value = match ws.read().unwrap() {
            Message::Text(t) => serde_json::from_str(t.as_str()).unwrap(),
            m => panic!("expected the hello, got {m:?}"),
        };
        assert_eq!(hello["type"], "hello");
        let title = hello["world"]["title"].as_str().unwrap();
        assert!(title.starts_with(title_start), "{title}");
        let classes = hello["world"]["classes"].as_array().unwrap().len();
        Self {
            ws,
            dec: Decoder::new(classes),
            nodes: None,
            migrations: 0,
            adoptions: 0,
        }
    }

    /// Applies frames until one with a node table arrives.
    fn next_with_nodes(&mut self) {
        loop {
            match self.ws.read().unwrap() {
                Message::Binary(b) => {
                    if b.first() != Some(&1) {
                        continue; // focus messages
                    }
                    let f = self.dec.apply(&b).unwrap();
                    for (_, _, _, cause) in &f.events {
                        if *cause == 0 {
                            self.migrations += 1;
                        } else {
                            self.adoptions += 1;
                        }
                    }
                    if let Some(n) = f.nodes {
                        self.nodes = Some(n);
                        return;
                    }
                }
                Message::Close(c) => panic!("closed: {c:?}"),
                _ => {}
            }
        }
    }

    fn owner_of(&self, key: u64) -> Option<u32> {
        self.dec
            .objects()
            .binary_search_by_key(&key, |o| o.id)
            .ok()
            .map(|k| self.dec.objects()[k].owner)
    }

    /// Reads until `pred` holds (or fails after `WAIT`).
    fn until(&mut self, what: &str, pred: impl Fn(&Self) -> bool) {
        let deadline = Instant::now() + WAIT;
        loop {
            self.next_with_nodes();
            if pred(self) {
                return;
            }
            assert!(Instant::now() < deadline, "{what}: not within {WAIT:?}");
        }
    }
}

/// Three founders with metrics; the dashboard shows every object they hold, owned by the
/// node that holds it, and follows node 2's drain: its objects at the others, node 2 down.
#[test]
fn the_dashboard_shows_a_real_cluster_and_follows_a_drain() {
    let _g = heavy();
    let mut n = Nodes::new("dash-cluster", 3);
    let base = [
        s("--founders"),
        s(3),
        s("--players"),
        s(4),
        s("--wait-start"),
        s("--metrics"),
        s("127.0.0.1:0"),
    ];
    n.spawn(0, &base);
    let a0 = n.ready(0, WAIT);
    for i in 1..3 {
        let mut args = base.to_vec();
        args.extend([s("--seeds"), s(a0)]);
        n.spawn(i, &args);
    }
    for i in 1..3 {
        n.ready(i, WAIT);
    }
    n.release(&[0, 1, 2]);
    for i in 0..3 {
        n.started(i, WAIT);
    }
    let endpoints: Vec<SocketAddr> = (0..3).map(|i| n.metrics_addr(i)).collect();
    let dash = start_dashboard(&endpoints);
    let mut st = Stream::connect(dash.addr);

    // Every initial object is shown, owned by the node that spawned it, and the node
    // table counts what the map shows.
    let initial: Vec<Vec<u64>> = (0..3).map(|i| started_keys(&n, i)).collect();
    assert!(initial.iter().all(|v| !v.is_empty()), "{initial:?}");
    st.until("all three nodes up with every initial object", |st| {
        let rows = &st.nodes.as_ref().unwrap().rows;
        rows.len() == 3
            && rows.iter().all(|r| r.up)
            && initial.iter().flatten().all(|k| st.owner_of(*k).is_some())
    });
    for (i, keys) in initial.iter().enumerate() {
        for k in keys {
            assert_eq!(st.owner_of(*k), Some(i as u32), "object {k:#x} of node {i}");
        }
    }
    let rows = st.nodes.clone().unwrap().rows;
    let shown = st.dec.objects().len() as u32;
    let primaries: u32 = rows.iter().map(|r| r.primaries).sum();
    assert_eq!(shown, primaries, "objects on the map vs the node table: {rows:?}");
    for r in &rows {
        let on_map = st.dec.objects().iter().filter(|o| o.owner == r.id).count() as u32;
        assert_eq!(on_map, r.primaries, "node {}", r.id);
        assert!(r.players >= 4, "node {} shows {} players", r.id, r.players);
        assert!(r.frame_us.is_some(), "real nodes measure their frames: {r:?}");
        assert_eq!((r.sessions, r.capacity), (None, None), "no player port: {r:?}");
    }
    // Against the nodes themselves: every object a node's own view lists is on the map,
    // and the map holds nothing else (missiles come and go, so the nodes' views are read
    // around one decoded frame and only objects in both reads are compared).
    // Missiles (kind 1) live for moments: only players and items are compared.
    let view = |a: SocketAddr| -> Vec<u64> {
        let body = raw_get(a, "/view");
        let v = worldmesh_net::view::decode(&body, 1 << 20).unwrap();
        v.objects
            .iter()
            .filter(|o| !o.frozen && o.kind != MISSILE)
            .map(|o| object_key(o.id))
            .collect()
    };
    let before: Vec<Vec<u64>> = endpoints.iter().map(|a| view(*a)).collect();
    st.next_with_nodes();
    let after: Vec<Vec<u64>> = endpoints.iter().map(|a| view(*a)).collect();
    let mut stable = 0;
    for (i, (b, a)) in before.iter().zip(&after).enumerate() {
        for k in b.iter().filter(|k| a.contains(k)) {
            assert_eq!(st.owner_of(*k), Some(i as u32), "object {k:#x} held by node {i}");
            stable += 1;
        }
    }
    let held: Vec<u64> = before.iter().chain(&after).flatten().copied().collect();
    for o in st.dec.objects().iter().filter(|o| o.kind != MISSILE) {
        assert!(
            held.contains(&o.id),
            "object {:#x} on the map is held by no node",
            o.id
        );
    }
    assert!(stable >= initial.iter().map(Vec::len).sum::<usize>());

    // Node 2 drains: its objects migrate to 0 and 1 (shown as migrations), and it goes
    // down on the dashboard once it has left.
    let moved = initial[2].clone();
    let moves = |dash: &Dash| -> (u64, u64) {
        let state: Value = serde_json::from_str(&raw_get_text(dash.addr, "/api/state")).unwrap();
        (
            state["moves"][0].as_u64().unwrap(),
            state["moves"][1].as_u64().unwrap(),
        )
    };
    let (migrations_before, _) = moves(&dash);
    n.sigterm(2);
    st.until("node 2's objects at nodes 0 and 1", |st| {
        moved.iter().all(|k| matches!(st.owner_of(*k), Some(0 | 1)))
    });
    let (migrations, adoptions) = moves(&dash);
    assert!(
        migrations >= migrations_before + moved.len() as u64,
        "ownership changes counted as migrations: {migrations} (before {migrations_before}), \
         adoptions {adoptions}, {} objects moved",
        moved.len()
    );
    assert!(st.migrations > 0, "the page's stream carried the migrations");
    let drained = n.summary(2, WAIT);
    assert_eq!(drained["stop"], "drained", "{drained}");
    st.until("node 2 shown down", |st| {
        st.nodes.as_ref().unwrap().rows.iter().any(|r| r.id == 2 && !r.up)
    });
    assert!(st.dec.objects().iter().all(|o| o.owner != 2));
    for k in initial.iter().flatten() {
        assert!(st.owner_of(*k).is_some(), "object {k:#x} lost from the map");
    }
    let state: Value = serde_json::from_str(&raw_get_text(dash.addr, "/api/state")).unwrap();
    eprintln!(
        "real cluster on the dashboard: {shown} objects over 3 nodes, {} moved by the drain, \
         {} migrations and {} adoptions shown; /api/state {state}",
        moved.len(),
        st.migrations,
        st.adoptions
    );
    n.stop(&[0, 1]);
    for i in 0..2 {
        n.summary(i, WAIT);
    }
}

fn raw_get(addr: SocketAddr, path: &str) -> Vec<u8> {
    use std::io::{Read as _, Write as _};
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let end = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    assert!(
        out.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&out[..end])
    );
    out.split_off(end)
}

fn raw_get_text(addr: SocketAddr, path: &str) -> String {
    String::from_utf8(raw_get(addr, path)).unwrap()
}

/// `worldmesh cluster --dashboard`: the launcher serves the running cluster — both nodes
/// and their objects on the dashboard, the Join button on (player ports and a throwaway
/// key set up) — and the run still ends with its report.
#[test]
fn cluster_dashboard_serves_the_running_cluster() {
    let _g = heavy();
    let mut child = common::worldmesh()
        .args([
            "cluster",
            "--nodes",
            "2",
            "--players-per-node",
            "3",
            "--duration",
            "8s",
        ])
        .args(["--dashboard", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let mut dash = Dash {
        child,
        addr: SocketAddr::from(([0, 0, 0, 0], 0)),
    };
    let mut lines = BufReader::new(out).lines().map_while(Result::ok);
    for l in lines.by_ref() {
        if let Some(rest) = l.strip_prefix("dashboard: http://") {
            dash.addr = rest.split('/').next().unwrap().parse().unwrap();
            break;
        }
    }
    assert_ne!(dash.addr.port(), 0, "no dashboard URL printed");
    let play: Value = serde_json::from_str(&raw_get_text(dash.addr, "/api/play")).unwrap();
    assert_eq!(play["available"], true, "{play}");
    assert!(play["about"].as_str().unwrap().contains("nodes 0, 1"), "{play}");
    let mut st = Stream::connect_to(dash.addr, "real cluster: 2 node endpoints");
    st.until("both nodes up with objects", |st| {
        let rows = &st.nodes.as_ref().unwrap().rows;
        rows.len() == 2 && rows.iter().all(|r| r.up && r.primaries > 0)
    });
    let rows = st.nodes.clone().unwrap().rows;
    assert!(
        rows.iter().all(|r| r.capacity.is_some() && r.sessions == Some(0)),
        "{rows:?}"
    );
    let report: String = lines.collect::<Vec<_>>().join("\n");
    assert!(report.contains("run validity"), "{report}");
    assert!(dash.child.wait().unwrap().success());
}
