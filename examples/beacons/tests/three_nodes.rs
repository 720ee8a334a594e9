//! The tutorial's last steps, as a new user runs them (`docs/guide/tutorial.md`): a CA and
//! three node certificates in `out/ca`, the three config files shipped beside the game,
//! three `beacons` processes. They must form one world (every node holds all 12 objects),
//! and after every node stops with SIGQUIT and starts again from its store, the beacons
//! remember their lights.
//!
//! Differences from the guide, and why: the test works in a temporary directory instead of
//! the repository, writes the certificates with the library calls `worldmesh ca init` /
//! `ca issue` make, and replaces the configs' ports 7100–7102 with free ones (tests run in
//! parallel on one machine).

use std::io::{BufRead as _, BufReader};
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use worldmesh_core::NodeId;

/// The three configs with free ports, written into `dir`.
fn configs(dir: &Path) -> Vec<PathBuf> {
    let ports: Vec<u16> = (0..3)
        .map(|_| {
            UdpSocket::bind("127.0.0.1:0")
                .and_then(|s| s.local_addr())
                .expect("a port")
                .port()
        })
        .collect();
    (0..3)
        .map(|i| {
            let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("node-{i}.toml"));
            let mut text = std::fs::read_to_string(&shipped).expect("the shipped config");
            for (k, p) in ports.iter().enumerate() {
                text = text.replace(&format!("127.0.0.1:710{k}"), &format!("127.0.0.1:{p}"));
            }
            let path = dir.join(format!("node-{i}.toml"));
            std::fs::write(&path, text).expect("write config");
            path
        })
        .collect()
}

struct World {
    procs: Vec<Child>,
    lines: mpsc::Receiver<(usize, String)>,
}

fn start(dir: &Path, configs: &[PathBuf]) -> World {
    let (tx, lines) = mpsc::channel();
    let procs = configs
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut child = Command::new(env!("CARGO_BIN_EXE_beacons"))
                .arg(c)
                .current_dir(dir)
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("spawn beacons");
            let out = child.stdout.take().expect("stdout");
            let tx = tx.clone();
            std::thread::spawn(move || {
                for l in BufReader::new(out).lines().map_while(Result::ok) {
                    let _ = tx.send((i, l));
                }
            });
            child
        })
        .collect();
    World { procs, lines }
}

impl World {
    /// Waits until every node printed a status line showing 3 members and all 12 objects.
    fn wait_whole(&self) {
        let until = Instant::now() + Duration::from_secs(60);
        let mut whole = [false; 3];
        while !whole.iter().all(|w| *w) {
            assert!(
                Instant::now() < until,
                "the three nodes did not form one world: {whole:?}"
            );
            if let Ok((i, l)) = self.lines.recv_timeout(Duration::from_millis(200))
                && let Some((p, r)) = status(&l)
            {
                whole[i] = l.contains(": 3 members,") && p + r == 12;
            }
        }
    }

    /// Stops every node with SIGQUIT; returns the lights their beacons counted.
    fn quit(mut self) -> u64 {
        for p in &self.procs {
            let ok = Command::new("kill")
                .args(["-QUIT", &p.id().to_string()])
                .status()
                .expect("kill");
            assert!(ok.success());
        }
        let mut lit = 0;
        let mut stopped = 0;
        let until = Instant::now() + Duration::from_secs(30);
        while stopped < 3 {
            assert!(Instant::now() < until, "the nodes did not stop");
            if let Ok((_, l)) = self.lines.recv_timeout(Duration::from_millis(200))
                && let Some(rest) = l.split(" lit ").nth(1)
                && l.contains("stopped holding")
            {
                lit += rest.trim_end_matches(" times").parse::<u64>().expect("lights");
                stopped += 1;
            }
        }
        for p in &mut self.procs {
            let _ = p.wait();
        }
        lit
    }
}

/// `node N: M members, P primaries, R replicas` → (P, R).
fn status(line: &str) -> Option<(usize, usize)> {
    let rest = line.split(" members, ").nth(1)?;
    let (p, rest) = rest.split_once(" primaries, ")?;
    let r = rest.strip_suffix(" replicas")?;
    Some((p.parse().ok()?, r.parse().ok()?))
}

#[test]
fn three_beacons_nodes_form_one_world_and_remember_it() {
    let dir = std::env::temp_dir().join(format!("beacons-tutorial-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let ca = dir.join("out/ca");
    std::fs::create_dir_all(&ca).expect("dir");
    worldmesh_net::pki::init_ca(
        &ca,
        "worldmesh cluster CA",
        30,
        worldmesh_net::pki::Overwrite::Refuse,
    )
    .expect("ca init");
    for i in 0..3 {
        worldmesh_net::pki::issue_node(&ca, NodeId(i), &ca, 30, worldmesh_net::pki::Overwrite::Refuse)
            .expect("ca issue");
    }
    let configs = configs(&dir);

    let world = start(&dir, &configs);
    world.wait_whole();
    std::thread::sleep(Duration::from_secs(3));
    let lit = world.quit();
    assert!(lit > 0, "no beacon was lit (each starts beside a walker)");

    // Started again: the stores bring the same world back, lights included.
    let world = start(&dir, &configs);
    world.wait_whole();
    let again = world.quit();
    assert!(
        again >= lit,
        "the beacons forgot lights: {lit} before the restart, {again} after"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
