//! Frontier on three real node processes started from the shipped configs (ports replaced
//! by free ones; certificates and the player key written with the library calls the CLI's
//! `ca` and `token init` make), with bot players entering through node 0, which then
//! drains: every player follows its ship to the node it went to.

use std::io::{BufRead as _, BufReader};
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use worldmesh_core::NodeId;

fn free_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("a port")
        .port()
}

/// The shipped configs with free node and player ports, written into `dir`; returns their
/// paths and the player ports.
fn configs(dir: &Path) -> (Vec<PathBuf>, Vec<u16>) {
    let nodes: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let players: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let paths = (0..3)
        .map(|i| {
            let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("node-{i}.toml"));
            let mut text = std::fs::read_to_string(shipped).expect("the shipped config");
            for k in 0..3 {
                text = text.replace(&format!("127.0.0.1:720{k}"), &format!("127.0.0.1:{}", nodes[k]));
                text = text.replace(&format!("127.0.0.1:730{k}"), &format!("127.0.0.1:{}", players[k]));
            }
            let path = dir.join(format!("node-{i}.toml"));
            std::fs::write(&path, text).expect("write config");
            path
        })
        .collect();
    (paths, players)
}

#[test]
fn three_frontier_nodes_with_bot_players_who_follow_their_ships_through_a_drain() {
    let dir = std::env::temp_dir().join(format!("frontier-cluster-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let ca = dir.join("out/ca");
    std::fs::create_dir_all(&ca).expect("dir");
    let refuse = worldmesh_net::pki::Overwrite::Refuse;
    worldmesh_net::pki::init_ca(&ca, "worldmesh cluster CA", 30, refuse).expect("ca init");
    for i in 0..3 {
        worldmesh_net::pki::issue_node(&ca, NodeId(i), &ca, 30, refuse).expect("ca issue");
    }
    let key = worldmesh_client_key();
    std::fs::write(dir.join("out/player.key"), key).expect("player key");
    let (configs, players) = configs(&dir);

    let (tx, lines) = mpsc::channel::<(usize, String)>();
    let mut procs = Procs(
        configs
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let mut child = Command::new(env!("CARGO_BIN_EXE_frontier"))
                    .args(["node".as_ref(), c.as_os_str()])
                    .current_dir(&dir)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::inherit())
                    .spawn()
                    .expect("spawn frontier node");
                let out = child.stdout.take().expect("stdout");
                let tx = tx.clone();
                std::thread::spawn(move || {
                    for l in BufReader::new(out).lines().map_while(Result::ok) {
                        let _ = tx.send((i, l));
                    }
                });
                child
            })
            .collect(),
    );
    let until = Instant::now() + Duration::from_secs(60);
    let mut joined = [false; 3];
    while !joined.iter().all(|j| *j) {
        assert!(
            Instant::now() < until,
            "the nodes did not form one world: {joined:?}"
        );
        if let Ok((i, l)) = lines.recv_timeout(Duration::from_millis(200)) {
            joined[i] |= l.contains(": 3 members,");
        }
    }

    // Six players on node 0 for six seconds; at two seconds node 0 drains (SIGTERM): its
    // ships migrate to nodes 1 and 2 and every player follows its ship there. With
    // interest management the drained node keeps no replica of the ships it gave away,
    // so only its forwarding entries say where they went.
    let bots = Command::new(env!("CARGO_BIN_EXE_frontier"))
        .args([
            "bots",
            "--server",
            &format!("127.0.0.1:{}", players[0]),
            "--node",
            "0",
        ])
        .args([
            "--ca",
            "out/ca/ca.pem",
            "--key",
            "out/player.key",
            "--count",
            "6",
            "--duration",
            "6",
        ])
        .arg("--directory")
        .arg(format!("1=127.0.0.1:{},2=127.0.0.1:{}", players[1], players[2]))
        .current_dir(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run bots");
    std::thread::sleep(Duration::from_secs(2));
    let term = Command::new("kill")
        .args(["-TERM", &procs.0[0].id().to_string()])
        .status()
        .expect("kill -TERM");
    assert!(term.success(), "could not signal node 0");
    let bots = bots.wait_with_output().expect("bots");
    let out = String::from_utf8_lossy(&bots.stdout).into_owned();
    assert!(
        bots.status.success(),
        "bots failed: {out}\n{}",
        String::from_utf8_lossy(&bots.stderr)
    );
    eprintln!("{out}");
    assert!(out.contains("6 of 6 connected"), "{out}");
    assert!(
        out.contains(", 6 hand-offs"),
        "every player follows its ship: {out}"
    );
    assert!(!out.contains("ended early"), "{out}");
    let views: u64 = out
        .split(" inputs, ")
        .nth(1)
        .and_then(|r| r.split(" views").next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    // Six players for six seconds at the nodes' 10 Hz: views arrive every frame but
    // during the hand-off.
    assert!(views >= 6 * 40, "too few views: {out}");
    let drained = procs.0[0].wait().expect("node 0 exits after its drain");
    assert!(drained.success(), "node 0: {drained:?}");

    drop(procs);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Node processes, killed when the test ends, passed or failed.
struct Procs(Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for p in &mut self.0 {
            let _ = p.kill();
            let _ = p.wait();
        }
    }
}

/// A fresh connect-token key, as `worldmesh token init` writes it.
fn worldmesh_client_key() -> String {
    worldmesh_client::TokenKey::generate().expect("a key").to_hex()
}
