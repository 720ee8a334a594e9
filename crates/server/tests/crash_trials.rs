//! `kill -9` trials on real processes under heavy durable writes (issue 19's acceptance).
//!
//! Two clusters of four real node processes (this test binary re-executed as each node,
//! on the embeddable server: QUIC with mutual TLS, SWIM membership, one backup per
//! primary, a redb store per node) run a ledger game: a `Durable` ledger on node 0 takes a
//! write every frame (20 Hz) from each of three `Checkpointed` writers on every node —
//! 240 writes a second. Each trial kills a node with SIGKILL at a random moment (four
//! times in five the node running the ledger, else another), keeps it down a random
//! while (0.2–3 s), and restarts it from its data directory, joining the running world.
//! After every trial the world must have a ledger holder again; after the last, the
//! writers stop, the clusters settle, and every node reports what it holds.
//!
//! Checked, per cluster:
//! - the ledger has exactly one primary among the live nodes, and no object has two;
//! - no write was applied to the ledger twice (every write is identified by its writer,
//!   the process that issued it, the writer's run in that process and its sequence number
//!   in the run: a writer that leaves a process and comes back starts a new run);
//! - every write issued by every writer live at the end (restarted nodes included) is in
//!   the ledger exactly once, none pending and none given up (a write is acknowledged
//!   only once it is on disk at the ledger's primary and held, with the log saying it
//!   was applied, by the ledger's backup, so it survives every single kill; a writer
//!   numbers its writes afresh in every run);
//! - the store a killed process leaves holds every `Checkpointed` writer it ran at most two
//!   checkpoint intervals older than the kill (the newest checkpoint may still be in
//!   flight when the process dies, so the one before it is the last certainly on disk),
//!   and opens without error (redb's commit is atomic: a torn tail is never seen).
//!
//! `WORLDMESH_CRASH_TRIALS=N` runs N trials (default 50, split over the two clusters).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use worldmesh::config::{FileConfig, Overrides};
use worldmesh::{
    Aabb, Durability, Event, EventKind, GameObject, Point3, ServeOptions, Server, StateError, ThinkContext,
};
use worldmesh_core::{DetRng, NodeId};

const NODES: u32 = 4;
const WRITERS_PER_NODE: u32 = 3;
const FRAME_HZ: f64 = 20.0;
const CHECKPOINT_FRAMES: u32 = 5;
const ENV_NODE: &str = "WORLDMESH_LEDGER_NODE";

// ---- the game ---------------------------------------------------------------------------

/// Who issued a write: the writer, the process (node, incarnation) that ran it, and the
/// run: a number the process gives the writer each time it starts running there. A writer
/// can run twice in one process — it leaves (another node adopts it, or this node is
/// declared failed and drops it) and comes back — and numbers its writes afresh each time,
/// so (writer, process) alone would name two runs' writes alike.
type Stream = (u32, u32, u32, u64, u32);

/// A ledger's contents: applied sequence numbers per stream, and writes applied twice.
type Applied = (Vec<(Stream, Vec<(u32, u32)>)>, Vec<(Stream, u32, u32, u64)>);

/// The world each process shares with its objects.
struct World {
    /// This process's incarnation (start time, UNIX µs): a writer numbers its writes anew
    /// in every process that runs it.
    incarnation: u64,
    /// Writers stop writing.
    quiet: AtomicBool,
    /// UNIX ms of the ledger's last think here (0: never).
    ledger_seen: AtomicU64,
    /// Runs of writers started in this process (the next run's number).
    runs: AtomicU32,
    /// The writers (creator, slot) that have run in this process.
    ran: Mutex<BTreeSet<(u32, u32)>>,
}

#[derive(Clone, Debug, PartialEq, bitcode::Encode, bitcode::Decode)]
enum Obj {
    /// Every write it applied, as ranges of sequence numbers per stream, and the writes it
    /// was given twice.
    Ledger {
        streams: Vec<(Stream, Vec<(u32, u32)>)>,
        twice: Vec<(Stream, u32, u32, u64)>,
        /// The node running it and when it last thought (UNIX ms).
        host: (u32, u64),
    },
    /// Writes `(stream, k)` to the ledger every frame while the ledger is in sight.
    Writer {
        me: u32,
        slot: u32,
        host: (u32, u64),
        /// The run, numbered by the process in `host`.
        run: u32,
        issued: u32,
        /// When it last thought (UNIX ms).
        seen: u64,
    },
}

impl Obj {
    fn stream(&self) -> Option<Stream> {
        match self {
            Obj::Writer {
                me, slot, host, run, ..
            } => Some((*me, *slot, host.0, host.1, *run)),
            Obj::Ledger { .. } => None,
        }
    }
}

/// Inserts `k` in sorted, disjoint half-open ranges; false if it was there.
fn insert(ranges: &mut Vec<(u32, u32)>, k: u32) -> bool {
    let i = ranges.partition_point(|r| r.1 < k);
    if i < ranges.len() && ranges[i].0 <= k && k < ranges[i].1 {
        return false;
    }
    if i < ranges.len() && ranges[i].1 == k {
        ranges[i].1 = k + 1;
        if i + 1 < ranges.len() && ranges[i + 1].0 == k + 1 {
            ranges[i].1 = ranges[i + 1].1;
            ranges.remove(i + 1);
        }
    } else if i < ranges.len() && ranges[i].0 == k + 1 {
        ranges[i].0 = k;
    } else {
        ranges.insert(i, (k, k + 1));
    }
    true
}

impl GameObject for Obj {
    type World = World;
    type Write = (Stream, u32);

    fn think(&mut self, ctx: &mut ThinkContext<'_, Self>) {
        match self {
            Obj::Ledger { host, .. } => {
                *host = (ctx.node.0, unix_ms());
                ctx.world.ledger_seen.store(host.1, Ordering::Relaxed);
            }
            Obj::Writer {
                me,
                slot,
                host,
                run,
                issued,
                seen,
            } => {
                *seen = unix_ms();
                let here = (ctx.node.0, ctx.world.incarnation);
                if *host != here {
                    *host = here;
                    *run = ctx.world.runs.fetch_add(1, Ordering::Relaxed);
                    *issued = 0;
                    let mut ran = ctx.world.ran.lock().unwrap_or_else(PoisonError::into_inner);
                    if !ran.insert((*me, *slot)) {
                        say(&format!("RETURN writer {me}.{slot} run {run}"));
                    }
                }
                if ctx.world.quiet.load(Ordering::Relaxed) {
                    return;
                }
                let ledger = ctx
                    .store
                    .iter()
                    .find(|(_, e)| matches!(e.object, Obj::Ledger { .. }))
                    .map(|(id, _)| id);
                if let (Some(ledger), Some(stream)) = (ledger, self.stream())
                    && let Obj::Writer { issued, .. } = self
                {
                    ctx.write(ledger, (stream, *issued));
                    *issued += 1;
                }
            }
        }
    }
    fn position(&self) -> Point3 {
        Point3::new(0.0, 0.0, 0.0)
    }
    fn interest(&self, _world: &Self::World) -> Option<Aabb> {
        None
    }
    fn apply_write(&mut self, (stream, k): &(Stream, u32)) {
        if let Obj::Ledger { streams, twice, host } = self {
            let i = match streams.iter().position(|(s, _)| s == stream) {
                Some(i) => i,
                None => {
                    streams.push((*stream, Vec::new()));
                    streams.len() - 1
                }
            };
            if !insert(&mut streams[i].1, *k) {
                twice.push((*stream, *k, host.0, host.1));
            }
        }
    }
    fn durability(&self) -> Durability {
        match self {
            Obj::Ledger { .. } => Durability::Durable,
            Obj::Writer { .. } => Durability::Checkpointed,
        }
    }
    fn encode_state(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&bitcode::encode(self));
    }
    fn decode_state(b: &[u8]) -> Result<Self, StateError> {
        bitcode::decode(b).map_err(StateError::from)
    }
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

// ---- one node process -------------------------------------------------------------------

/// What the test tells a node process (in the environment).
#[derive(Serialize, Deserialize)]
struct NodeSpec {
    id: u32,
    listen: SocketAddr,
    seeds: Vec<SocketAddr>,
    join: Vec<SocketAddr>,
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
    data_dir: PathBuf,
    epoch_ms: u64,
}

/// What a node reports when it stops.
#[derive(Serialize, Deserialize, Debug)]
struct Final {
    node: u32,
    primaries: Vec<String>,
    /// The ledger, if this node holds its primary.
    ledger: Option<Applied>,
    /// Writer primaries here: stream, writes issued, writes still pending.
    writers: Vec<(Stream, u32, usize)>,
    expired: u64,
    rejoined: bool,
    /// What the node knows of the ledger and its writes, printed when a check fails: the
    /// ledger's binding here, the writes still pending, counters of the write path, and
    /// (at the ledger's holder) every writer's log.
    diag: String,
}

/// A sequence number as (writer generation, number in it).
fn seq_parts(seq: u64) -> (u64, u64) {
    (seq >> 32, seq & 0xffff_ffff)
}

/// [`Final::diag`] of a node at the end.
fn diagnose(node: &worldmesh_node::Node<Obj>) -> String {
    let r = node.replicas();
    let ledger = node
        .store()
        .iter()
        .find(|(_, e)| matches!(e.object, Obj::Ledger { .. }))
        .map(|(id, e)| (id, e.role));
    let mut d = String::new();
    if let Some((id, role)) = ledger {
        let b = r.binding_of(id);
        d += &format!("ledger {role:?}, bound to {:?} epoch {}; ", b.node, b.epoch);
        for w in 0..NODES {
            if let Some(l) = r.writer_log(id, NodeId(w)) {
                d += &format!(
                    "log of {w}: floor {:?}, {} above (first {:?}); ",
                    seq_parts(l.floor),
                    l.above.len(),
                    l.above.first().map(|s| seq_parts(*s))
                );
            }
        }
    }
    let pending: Vec<(u64, u64)> = r.pending_write_ids().map(|(_, s)| seq_parts(s)).collect();
    let st = r.stats();
    d += &format!(
        "pending {} (first {:?}, last {:?}); forwarded {}, resent {}, duplicates {}, dropped {}, \
         expired {}, refused updates {}, acks deferred {}, durable acks dropped {}",
        pending.len(),
        pending.first(),
        pending.last(),
        st.writes_forwarded,
        st.writes_resent,
        st.writes_duplicate,
        st.writes_dropped,
        st.writes_expired,
        st.refused_updates,
        st.acks_deferred,
        st.durable_ack_dropped
    );
    d
}

fn node_main(spec: &str) {
    let spec: NodeSpec = serde_json::from_str(spec).expect("node spec");
    let o = Overrides {
        id: Some(spec.id),
        listen: Some(spec.listen),
        seeds: Some(spec.seeds.clone()),
        join: (!spec.join.is_empty()).then(|| spec.join.clone()),
        ca: Some(spec.ca.clone()),
        cert: Some(spec.cert.clone()),
        key: Some(spec.key.clone()),
        frame_hz: Some(FRAME_HZ),
        backups: Some(1),
        founders: Some(NODES as usize),
        epoch_ms: Some(spec.epoch_ms),
        data_dir: Some(spec.data_dir.clone()),
        checkpoint_frames: Some(CHECKPOINT_FRAMES),
        ..Overrides::default()
    };
    let settings = worldmesh::config::resolve(FileConfig::default(), o, "the trial").expect("settings");
    let world = Arc::new(World {
        incarnation: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64),
        quiet: AtomicBool::new(false),
        ledger_seen: AtomicU64::new(0),
        runs: AtomicU32::new(0),
        ran: Mutex::new(BTreeSet::new()),
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let mut running = Server::builder()
            .game::<Obj>(Arc::clone(&world))
            .settings(settings)
            .initial_objects(|me| {
                let mut v: Vec<Obj> = (0..WRITERS_PER_NODE)
                    .map(|slot| Obj::Writer {
                        me: me.0,
                        slot,
                        host: (u32::MAX, 0),
                        run: 0,
                        issued: 0,
                        seen: 0,
                    })
                    .collect();
                if me.0 == 0 {
                    v.insert(
                        0,
                        Obj::Ledger {
                            streams: Vec::new(),
                            twice: Vec::new(),
                            host: (0, 0),
                        },
                    );
                }
                v
            })
            .start()
            .await
            .expect("start");
        say(&format!("INCARNATION {}", world.incarnation));
        running.begin().await;
        say("READY");
        let control = running.control();
        // The test's commands on standard input: `quiet`, then `stop`.
        let w = Arc::clone(&world);
        let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
        std::thread::spawn(move || {
            for line in std::io::stdin().lines() {
                match line.as_deref().map(str::trim) {
                    Ok("quiet") => w.quiet.store(true, Ordering::Relaxed),
                    Ok("stop") | Err(_) => break,
                    Ok(_) => {}
                }
            }
            let _ = stop_tx.send(());
        });
        // Tell the test when the ledger starts or stops running here.
        let w = Arc::clone(&world);
        let watch = tokio::spawn(async move {
            let mut holding = false;
            loop {
                tokio::time::sleep(Duration::from_millis(25)).await;
                let now = w.ledger_seen.load(Ordering::Relaxed) + 300 > unix_ms();
                if now != holding {
                    holding = now;
                    say(if now { "HOLDER" } else { "NOT-HOLDER" });
                }
            }
        });
        tokio::spawn(async move {
            let _ = (&mut stop_rx).await;
            control.stop().await;
        });
        let mut rejoined = false;
        let finished = running
            .serve(
                ServeOptions {
                    signals: false,
                    ..ServeOptions::default()
                },
                |e| {
                    rejoined |= matches!(e.kind, EventKind::Node(Event::Rejoined(_)));
                    if let EventKind::Node(
                        ev @ (Event::Adopted { .. }
                        | Event::MemberUp(_)
                        | Event::MemberDown(..)
                        | Event::Rejoined(_)
                        | Event::OrphanDropped { .. }),
                    ) = &e.kind
                    {
                        say(&format!("EVENT {ev:?}"));
                    }
                },
            )
            .await
            .expect("serve");
        watch.abort();
        let node = &finished.node;
        let pending = node.replicas().pending_write_ids().count();
        let mut f = Final {
            node: spec.id,
            primaries: node
                .store()
                .primary_ids()
                .iter()
                .map(|id| format!("{id:?}"))
                .collect(),
            ledger: None,
            writers: Vec::new(),
            expired: node.replicas().stats().writes_expired,
            rejoined,
            diag: diagnose(node),
        };
        for (_, e) in node.store().iter() {
            if e.role != worldmesh_replica::Role::Primary {
                continue;
            }
            match &e.object {
                Obj::Ledger { streams, twice, .. } => f.ledger = Some((streams.clone(), twice.clone())),
                Obj::Writer { issued, .. } => {
                    f.writers
                        .push((e.object.stream().expect("writer"), *issued, pending))
                }
            }
        }
        say(&format!("FINAL {}", serde_json::to_string(&f).expect("json")));
    });
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

// ---- the trials -------------------------------------------------------------------------

/// A line from a node process: (node, incarnation number, line).
type Line = (u32, u32, String);

struct Proc {
    child: Child,
    stdin: Option<ChildStdin>,
    incarnation: u32,
}

struct Cluster {
    name: String,
    dir: PathBuf,
    addrs: Vec<SocketAddr>,
    epoch_ms: u64,
    procs: Vec<Option<Proc>>,
    incarnations: Vec<u32>,
    lines: mpsc::Receiver<Line>,
    tx: mpsc::Sender<Line>,
    /// Nodes running the ledger, by the latest lines.
    holders: BTreeSet<u32>,
    ready: BTreeSet<(u32, u32)>,
    /// Each process's world incarnation, by (node, incarnation number).
    worlds: BTreeMap<(u32, u32), u64>,
    finals: Vec<Final>,
    /// Runs of a writer in a process it had run in before (`RETURN` lines).
    returns: usize,
}

/// Ports this process has handed out. Both clusters pick theirs at the same time (cluster
/// `a` on a thread of its own), and a port released after a bind to port 0 can be handed to
/// the next caller: a port given to both clusters made one node fail to bind and another
/// join the other cluster (a CA it does not trust).
static TAKEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// A free UDP address on loopback that no other node of this process was given.
fn free_addr() -> SocketAddr {
    let mut taken = TAKEN.lock().unwrap_or_else(PoisonError::into_inner);
    loop {
        let a = UdpSocket::bind("127.0.0.1:0")
            .and_then(|s| s.local_addr())
            .expect("a free port");
        if taken.insert(a.port()) {
            return a;
        }
    }
}

impl Cluster {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("worldmesh-crash-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        worldmesh_net::pki::throwaway(&dir, (0..NODES).map(NodeId)).expect("certificates");
        let (tx, lines) = mpsc::channel();
        Self {
            name: name.into(),
            addrs: (0..NODES).map(|_| free_addr()).collect(),
            epoch_ms: unix_ms(),
            procs: (0..NODES).map(|_| None).collect(),
            incarnations: vec![0; NODES as usize],
            dir,
            lines,
            tx,
            holders: BTreeSet::new(),
            ready: BTreeSet::new(),
            worlds: BTreeMap::new(),
            finals: Vec::new(),
            returns: 0,
        }
    }

    fn start(&mut self, id: u32, join: Option<u32>) {
        let node = worldmesh_net::pki::NodeFiles::in_dir(&self.dir, NodeId(id));
        let spec = NodeSpec {
            id,
            listen: self.addrs[id as usize],
            seeds: self.addrs.clone(),
            join: join.map(|j| vec![self.addrs[j as usize]]).unwrap_or_default(),
            ca: worldmesh_net::pki::CaFiles::in_dir(&self.dir).cert,
            cert: node.cert,
            key: node.key,
            data_dir: self.dir.join(format!("node-{id}")),
            epoch_ms: self.epoch_ms,
        };
        self.incarnations[id as usize] += 1;
        let inc = self.incarnations[id as usize];
        self.note(&format!("start node {id} incarnation {inc} join {join:?}"));
        let log = std::fs::File::create(self.dir.join(format!("node-{id}.{inc}.log"))).expect("log");
        let mut child = Command::new(std::env::current_exe().expect("test binary"))
            .env(ENV_NODE, serde_json::to_string(&spec).expect("spec"))
            .env(
                "RUST_LOG",
                std::env::var("WORLDMESH_CRASH_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("spawn a node");
        let out = child.stdout.take().expect("stdout");
        let tx = self.tx.clone();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send((id, inc, l)).is_err() {
                    return;
                }
            }
        });
        let stdin = child.stdin.take();
        self.procs[id as usize] = Some(Proc {
            child,
            stdin,
            incarnation: inc,
        });
    }

    /// Takes in every line that arrived, waiting up to `wait` for the first.
    fn pump(&mut self, wait: Duration) {
        let mut first = true;
        loop {
            let l = if first {
                self.lines.recv_timeout(wait).ok()
            } else {
                self.lines.try_recv().ok()
            };
            first = false;
            let Some((id, inc, l)) = l else { return };
            let current = self.procs[id as usize]
                .as_ref()
                .is_some_and(|p| p.incarnation == inc);
            if l != "READY" && !l.starts_with("FINAL") {
                self.note(&format!("node {id}.{inc}: {l}"));
            }
            if l == "READY" {
                self.ready.insert((id, inc));
            } else if l == "HOLDER" && current {
                self.holders.insert(id);
            } else if l == "NOT-HOLDER" {
                self.holders.remove(&id);
            } else if let Some(c) = l.strip_prefix("INCARNATION ") {
                self.worlds.insert((id, inc), c.parse().expect("incarnation"));
            } else if l.starts_with("RETURN ") {
                self.returns += 1;
            } else if let Some(f) = l.strip_prefix("FINAL ") {
                self.finals.push(serde_json::from_str(f).expect("final line"));
            }
        }
    }

    fn wait_for(&mut self, what: &str, limit: Duration, mut done: impl FnMut(&Self) -> bool) {
        let until = Instant::now() + limit;
        while !done(self) {
            assert!(
                Instant::now() < until,
                "{}: {what} did not happen within {limit:?} (logs in {})",
                self.name,
                self.dir.display()
            );
            self.pump(Duration::from_millis(50));
        }
    }

    fn note(&self, what: &str) {
        use std::io::Write as _;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("actions.log"))
        {
            let _ = writeln!(f, "{} {what}", unix_ms());
        }
    }

    fn kill(&mut self, id: u32) -> u64 {
        let mut p = self.procs[id as usize].take().expect("running");
        let _ = p.child.kill();
        let at = unix_ms();
        self.note(&format!("killed node {id} (holders {:?})", self.holders));
        let _ = p.child.wait();
        self.holders.remove(&id);
        at
    }

    fn tell(&mut self, line: &str) {
        for p in self.procs.iter_mut().flatten() {
            if let Some(s) = p.stdin.as_mut() {
                let _ = writeln!(s, "{line}");
                let _ = s.flush();
            }
        }
    }
}

/// What one cluster's trials found.
struct Outcome {
    trials: usize,
    holder_kills: usize,
    ledger_writes: u64,
    streams_checked: usize,
    /// Runs of a writer in a process it had run in before.
    returns: usize,
    checkpoint_ages_ms: Vec<u64>,
}

fn run_cluster(name: &str, seed: u64, trials: usize) -> Outcome {
    let mut rng = DetRng::new(seed);
    let mut c = Cluster::new(name);
    for id in 0..NODES {
        c.start(id, None);
    }
    c.wait_for("the start", Duration::from_secs(60), |c| {
        (0..NODES).all(|id| c.ready.contains(&(id, 1)))
    });
    c.wait_for("a ledger holder", Duration::from_secs(20), |c| {
        c.holders.len() == 1
    });
    let mut holder_kills = 0;
    let mut ages = Vec::new();
    for _ in 0..trials {
        std::thread::sleep(Duration::from_secs_f64(rng.range_f64(0.3, 1.5)));
        c.pump(Duration::ZERO);
        let holder = c.holders.iter().next().copied();
        let victim = match holder {
            Some(h) if rng.chance(0.8) => {
                holder_kills += 1;
                h
            }
            _ => rng.below(u64::from(NODES)) as u32,
        };
        let was = c.incarnations[victim as usize];
        let killed_at = c.kill(victim);
        // What the killed process left on disk: its writers' states, each at most two
        // checkpoint intervals older than the kill.
        if let Some(&world) = c.worlds.get(&(victim, was)) {
            let store = worldmesh_store::Store::open(c.dir.join(format!("node-{victim}"))).expect("store");
            let rec = store.load().expect("a store left by kill -9 loads");
            for r in &rec.objects {
                if let Ok(Obj::Writer { host, seen, .. }) = Obj::decode_state(&r.state)
                    && host == (victim, world)
                {
                    ages.push(killed_at.saturating_sub(seen));
                }
            }
        }
        std::thread::sleep(Duration::from_secs_f64(rng.range_f64(0.2, 3.0)));
        let via = (0..NODES).find(|i| *i != victim).expect("another node");
        c.start(victim, Some(via));
        let inc = c.incarnations[victim as usize];
        c.wait_for("the restarted node's join", Duration::from_secs(40), |c| {
            c.ready.contains(&(victim, inc))
        });
        c.wait_for("a ledger holder after the kill", Duration::from_secs(30), |c| {
            c.holders.len() == 1
        });
    }
    // Quiet: the writers stop; writes in flight are acknowledged (a restarted node's
    // deferred recovery settles within 3 s of its join).
    c.tell("quiet");
    std::thread::sleep(Duration::from_secs(6));
    c.tell("stop");
    c.wait_for("every node's final report", Duration::from_secs(30), |c| {
        c.finals.len() == NODES as usize
    });
    for p in c.procs.iter_mut().flatten() {
        let _ = p.child.wait();
    }

    // One primary per object; exactly one ledger.
    let mut owners: BTreeMap<&str, u32> = BTreeMap::new();
    for f in &c.finals {
        for id in &f.primaries {
            if let Some(other) = owners.insert(id, f.node) {
                panic!("{name}: object {id} is primary on nodes {other} and {}", f.node);
            }
        }
    }
    let ledgers: Vec<_> = c.finals.iter().filter_map(|f| f.ledger.as_ref()).collect();
    assert_eq!(
        ledgers.len(),
        1,
        "{name}: {} primaries of the ledger",
        ledgers.len()
    );
    let (streams, twice) = ledgers[0];
    // What every node knew at the end, for the messages of the checks below.
    let diag: String = c
        .finals
        .iter()
        .map(|f| format!("\n  node {}: {}", f.node, f.diag))
        .collect();
    assert!(twice.is_empty(), "{name}: writes applied twice: {twice:?}{diag}");
    let ledger_writes: u64 = streams
        .iter()
        .flat_map(|(_, r)| r.iter().map(|(a, b)| u64::from(b - a)))
        .sum();
    // Every write issued by a writer live at the end is there, once, none pending and none
    // given up: its stream began in the process running it now (the writer restarts its
    // numbering on every run), so all of the stream's writes were made by a live process
    // that kept them until acknowledged — whichever nodes were killed meanwhile. A node
    // the others declared failed while it was alive (it dropped everything) is skipped.
    let mut checked = 0;
    for f in &c.finals {
        assert_eq!(f.expired, 0, "{name}: node {} gave writes up{diag}", f.node);
        if f.rejoined {
            continue;
        }
        for (stream, issued, pending) in &f.writers {
            assert_eq!(*pending, 0, "{name}: node {}: writes still pending{diag}", f.node);
            let got = streams.iter().find(|(s, _)| s == stream).map(|(_, r)| r.clone());
            let want = if *issued == 0 { vec![] } else { vec![(0, *issued)] };
            assert_eq!(
                got.unwrap_or_default(),
                want,
                "{name}: writer {stream:?} issued {issued} writes; the ledger holds other ranges{diag}"
            );
            checked += 1;
        }
    }
    // Checkpointed objects on disk at most two intervals older than the kill.
    let interval_ms = (f64::from(CHECKPOINT_FRAMES) * 1000.0 / FRAME_HZ) as u64;
    for a in &ages {
        assert!(
            *a <= 2 * interval_ms,
            "{name}: a writer on a killed node's disk was {a} ms older than the kill (interval {interval_ms} ms)"
        );
    }
    let _ = std::fs::remove_dir_all(&c.dir);
    Outcome {
        trials,
        holder_kills,
        ledger_writes,
        streams_checked: checked,
        returns: c.returns,
        checkpoint_ages_ms: ages,
    }
}

fn main() {
    if let Ok(spec) = std::env::var(ENV_NODE) {
        node_main(&spec);
        return;
    }
    // `cargo test` passes libtest's flags; a listing asks for nothing to run.
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let trials: usize = std::env::var("WORLDMESH_CRASH_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50);
    let t0 = Instant::now();
    let a = std::thread::spawn(move || run_cluster("a", 1, trials.div_ceil(2)));
    let b = run_cluster("b", 2, trials / 2);
    let a = a.join().expect("cluster a");
    let mut ages: Vec<u64> = a
        .checkpoint_ages_ms
        .iter()
        .chain(&b.checkpoint_ages_ms)
        .copied()
        .collect();
    ages.sort_unstable();
    println!(
        "crash trials: {} kill -9 ({} of the ledger's holder), {} ledger writes, {} writer streams checked \
         exactly once, {} writer runs in a process the writer had run in before; age of checkpointed writers on disk at the kill: max {} ms over {}; {:.0} s",
        a.trials + b.trials,
        a.holder_kills + b.holder_kills,
        a.ledger_writes + b.ledger_writes,
        a.streams_checked + b.streams_checked,
        a.returns + b.returns,
        ages.last().copied().unwrap_or(0),
        ages.len(),
        t0.elapsed().as_secs_f64()
    );
}
