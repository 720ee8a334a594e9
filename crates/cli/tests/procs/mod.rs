//! A harness for tests on real `worldmesh node` processes: certificates from a throwaway
//! CA, node processes started with the machine-readable lines on (`--summary-json
//! --events-json`), their lines collected with the time they arrived, start barriers,
//! `kill -9`, SIGTERM.

#![allow(dead_code)] // each test uses its own subset

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use worldmesh_core::NodeId;
use worldmesh_net::pki;

/// What a line was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `WORLDMESH-READY`.
    Ready,
    /// `WORLDMESH-STARTED`.
    Started,
    /// `WORLDMESH-EVENT`.
    Event,
    /// `WORLDMESH-SUMMARY`.
    Summary,
    /// The process's output ended (it exited); the JSON is its last log lines.
    Exited,
}

/// One line of one process.
#[derive(Clone, Debug)]
pub struct Record {
    /// Node id.
    pub node: u32,
    /// Which process of that id (0 for the first, 1 after a restart…).
    pub incarnation: u32,
    /// What.
    pub kind: Kind,
    /// The JSON after the prefix (for `Exited`: the stderr tail as a string).
    pub json: Value,
    /// When it arrived.
    pub at: Instant,
}

struct Proc {
    child: Child,
    stdin: Option<ChildStdin>,
    incarnation: u32,
}

/// A set of node processes.
pub struct Nodes {
    pub dir: PathBuf,
    ca: pki::CaFiles,
    certs: Vec<pki::NodeFiles>,
    procs: Vec<Option<Proc>>,
    incarnations: Vec<u32>,
    tx: mpsc::Sender<Record>,
    rx: mpsc::Receiver<Record>,
    /// Every line received so far.
    pub records: Vec<Record>,
}

/// Wall time now, UNIX ms.
pub fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

impl Nodes {
    /// A throwaway CA with certificates for nodes `0..ids`, in a fresh folder.
    pub fn new(name: &str, ids: u32) -> Self {
        let dir = std::env::temp_dir().join(format!("wm-nodes-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (ca, certs) = pki::throwaway(&dir, (0..ids).map(NodeId)).unwrap();
        let (tx, rx) = mpsc::channel();
        Self {
            dir,
            ca,
            certs,
            procs: (0..ids).map(|_| None).collect(),
            incarnations: vec![0; ids as usize],
            tx,
            rx,
            records: Vec::new(),
        }
    }

    /// The cluster CA certificate.
    pub fn ca_cert(&self) -> &std::path::Path {
        &self.ca.cert
    }

    /// The certificate and key files of node `id`.
    pub fn cert(&self, id: u32) -> &pki::NodeFiles {
        &self.certs[id as usize]
    }

    /// The process id of node `id`'s running process.
    pub fn pid(&self, id: u32) -> u32 {
        self.procs[id as usize].as_ref().expect("running").child.id()
    }

    /// The certificate flags of node `id`.
    pub fn cert_args(&self, id: u32) -> Vec<String> {
        let c = &self.certs[id as usize];
        vec![
            "--ca".into(),
            self.ca.cert.display().to_string(),
            "--cert".into(),
            c.cert.display().to_string(),
            "--key".into(),
            c.key.display().to_string(),
        ]
    }

    /// Starts node `id` with `args` on top of the defaults (loopback, certificates,
    /// machine-readable lines, exit when the harness goes away).
    pub fn spawn(&mut self, id: u32, args: &[String]) {
        self.spawn_in(id, None, "127.0.0.1:0", args);
    }

    /// [`Nodes::spawn`] inside the network namespace `netns` (through `ip netns exec`),
    /// listening on `listen`.
    pub fn spawn_in(&mut self, id: u32, netns: Option<&str>, listen: &str, args: &[String]) {
        let bin = env!("CARGO_BIN_EXE_worldmesh");
        let mut cmd = match netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, bin]);
                c
            }
            None => Command::new(bin),
        };
        cmd.arg("node")
            .args(["--id", &id.to_string(), "--listen", listen])
            .args(self.cert_args(id))
            .args(["--summary-json", "--events-json", "--exit-on-stdin-close"])
            .args(args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let inc = if self.procs[id as usize].is_some() || self.records.iter().any(|r| r.node == id) {
            self.incarnations[id as usize] + 1
        } else {
            0
        };
        self.incarnations[id as usize] = inc;
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        let tx = self.tx.clone();
        std::thread::spawn(move || {
            let err = std::thread::spawn(move || {
                let mut tail = std::collections::VecDeque::new();
                for l in BufReader::new(stderr).lines().map_while(Result::ok) {
                    if tail.len() == 12 {
                        tail.pop_front();
                    }
                    tail.push_back(l);
                }
                tail.into_iter().collect::<Vec<_>>().join("\n")
            });
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let (kind, rest) = if let Some(r) = line.strip_prefix("WORLDMESH-READY ") {
                    (Kind::Ready, r)
                } else if let Some(r) = line.strip_prefix("WORLDMESH-STARTED ") {
                    (Kind::Started, r)
                } else if let Some(r) = line.strip_prefix("WORLDMESH-EVENT ") {
                    (Kind::Event, r)
                } else if let Some(r) = line.strip_prefix("WORLDMESH-SUMMARY ") {
                    (Kind::Summary, r)
                } else {
                    continue;
                };
                let json: Value = serde_json::from_str(rest).unwrap();
                let _ = tx.send(Record {
                    node: id,
                    incarnation: inc,
                    kind,
                    json,
                    at: Instant::now(),
                });
            }
            let tail = err.join().unwrap_or_default();
            let _ = tx.send(Record {
                node: id,
                incarnation: inc,
                kind: Kind::Exited,
                json: Value::String(tail),
                at: Instant::now(),
            });
        });
        let stdin = child.stdin.take();
        self.procs[id as usize] = Some(Proc {
            child,
            stdin,
            incarnation: inc,
        });
    }

    /// Waits for the first record (old or new) matching `pred`.
    pub fn wait_for(&mut self, what: &str, timeout: Duration, pred: impl Fn(&Record) -> bool) -> Record {
        if let Some(r) = self.records.iter().find(|r| pred(r)) {
            return r.clone();
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(r) => {
                    self.records.push(r.clone());
                    if r.kind == Kind::Exited && !pred(&r) && self.awaited_exit(&r, what) {
                        panic!(
                            "node {} exited while waiting for {what}:\n{}",
                            r.node,
                            r.json.as_str().unwrap_or("")
                        );
                    }
                    if pred(&r) {
                        return r;
                    }
                }
                Err(_) => panic!(
                    "timed out after {timeout:?} waiting for {what}; records: {:#?}",
                    self.brief()
                ),
            }
        }
    }

    /// Collects the lines that arrive during `d` (exits included; nothing is awaited).
    pub fn gather(&mut self, d: Duration) {
        let deadline = Instant::now() + d;
        while let Ok(r) = self
            .rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            self.records.push(r);
        }
    }

    /// True if an exit ends the wait (the process was not expected to exit).
    fn awaited_exit(&self, r: &Record, _what: &str) -> bool {
        // A process that exited without a summary failed.
        !self
            .records
            .iter()
            .any(|x| x.node == r.node && x.incarnation == r.incarnation && x.kind == Kind::Summary)
            && self.procs[r.node as usize]
                .as_ref()
                .is_some_and(|p| p.incarnation == r.incarnation)
    }

    fn brief(&self) -> Vec<String> {
        self.records
            .iter()
            .filter(|r| r.kind != Kind::Event)
            .map(|r| format!("{} #{} {:?}", r.node, r.incarnation, r.kind))
            .collect()
    }

    /// Waits until node `id` (its current process) is ready; returns its address.
    pub fn ready(&mut self, id: u32, timeout: Duration) -> SocketAddr {
        let inc = self.incarnations[id as usize];
        let r = self.wait_for(&format!("node {id} ready"), timeout, |r| {
            r.node == id && r.incarnation == inc && r.kind == Kind::Ready
        });
        r.json["addr"].as_str().unwrap().parse().unwrap()
    }

    /// The metrics address (`--metrics`) in node `id`'s ready line.
    pub fn metrics_addr(&self, id: u32) -> SocketAddr {
        let r = self
            .records
            .iter()
            .find(|r| r.node == id && r.kind == Kind::Ready)
            .expect("ready line");
        r.json["metrics"]
            .as_str()
            .unwrap_or_else(|| panic!("no metrics address in {}", r.json))
            .parse()
            .unwrap()
    }

    /// Releases the start barrier of `ids`.
    pub fn release(&mut self, ids: &[u32]) {
        for id in ids {
            let p = self.procs[*id as usize].as_mut().unwrap();
            let s = p.stdin.as_mut().unwrap();
            s.write_all(b"start\n").unwrap();
            s.flush().unwrap();
        }
    }

    /// The started line of node `id`'s current process.
    pub fn started(&mut self, id: u32, timeout: Duration) -> Record {
        let inc = self.incarnations[id as usize];
        self.wait_for(&format!("node {id} started"), timeout, |r| {
            r.node == id && r.incarnation == inc && r.kind == Kind::Started
        })
    }

    /// `kill -9` of node `id`; returns the wall time of the kill (UNIX ms).
    pub fn kill9(&mut self, id: u32) -> u64 {
        let mut p = self.procs[id as usize].take().unwrap();
        let t = unix_ms();
        p.child.kill().unwrap();
        let _ = p.child.wait();
        t
    }

    /// Closes the standard input of `ids` at once: each stops (without leaving) and
    /// prints its summary.
    pub fn stop(&mut self, ids: &[u32]) {
        for id in ids {
            if let Some(p) = self.procs[*id as usize].as_mut() {
                drop(p.stdin.take());
            }
        }
    }

    /// Sends SIGTERM to node `id`.
    pub fn sigterm(&mut self, id: u32) {
        self.signal(id, "TERM");
    }

    /// Sends signal `sig` (a name `kill` knows: `TERM`, `STOP`, `CONT`…) to node `id`.
    pub fn signal(&mut self, id: u32, sig: &str) {
        let p = self.procs[id as usize].as_ref().unwrap();
        let ok = Command::new("kill")
            .args([&format!("-{sig}"), &p.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{sig} failed");
    }

    /// The summary of node `id`'s current process.
    pub fn summary(&mut self, id: u32, timeout: Duration) -> Value {
        let inc = self.incarnations[id as usize];
        self.wait_for(&format!("node {id} summary"), timeout, |r| {
            r.node == id && r.incarnation == inc && r.kind == Kind::Summary
        })
        .json
    }

    /// The current incarnation of node `id`.
    pub fn incarnation(&self, id: u32) -> u32 {
        self.incarnations[id as usize]
    }

    /// Every event line received so far (all nodes).
    pub fn events(&self) -> impl Iterator<Item = &Record> {
        self.records.iter().filter(|r| r.kind == Kind::Event)
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for p in self.procs.iter_mut().flatten() {
            drop(p.stdin.take());
            let _ = p.child.kill();
            let _ = p.child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Object ids as comparable strings (`origin/seq`).
pub fn ids(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|o| format!("{}/{}", o["origin"], o["seq"]))
        .collect()
}

/// How many of `reports` (run summaries) hold each object as primary.
pub fn primary_counts<'a>(
    reports: impl IntoIterator<Item = &'a Value>,
) -> std::collections::BTreeMap<String, usize> {
    let mut m = std::collections::BTreeMap::new();
    for r in reports {
        for id in ids(&r["primary_ids"]) {
            *m.entry(id).or_insert(0) += 1;
        }
    }
    m
}

/// The `p`-th percentile (nearest rank) of `v`.
pub fn percentile(v: &[f64], p: f64) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

/// A part of a test that needs root (namespaces, raw sockets) cannot run here: says why
/// and lets the caller skip it, unless `WORLDMESH_REQUIRE_NETNS=1` (CI on a machine that
/// allows it), where it fails instead.
pub fn skip_unless_required(msg: &str) {
    assert!(
        std::env::var("WORLDMESH_REQUIRE_NETNS").as_deref() != Ok("1"),
        "{msg}, and WORLDMESH_REQUIRE_NETNS=1"
    );
    eprintln!("{msg}");
}

/// Serializes the tests that start many processes (the machine has 2 cores).
pub fn heavy() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
