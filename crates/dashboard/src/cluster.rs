//! The dashboard on a real cluster: it scrapes every node's view (`GET /view` on the node's
//! metrics endpoint, [`worldmesh_net::view`]) and merges the views into [`Tick`]s for the
//! [`crate::Hub`] — the same model and page as for a simulation.
//!
//! Scraping rather than pushing: a node only serves what its driver already published
//! (its frame loop never waits on the dashboard, and builds views only while someone asks
//! for them), the dashboard needs no listening port the nodes must know, and a node that
//! stops answering is visibly down.
//!
//! - [`http_get`]: a minimal, bounded HTTP/1.1 client (the endpoint closes every
//!   connection): a deadline for the whole exchange, a cap on the answer's size, typed
//!   errors;
//! - [`ClusterMerge`]: the sans-IO merge — the last view of each node and when it came,
//!   objects deduplicated (an object migrating is frozen at its old owner: the unfrozen
//!   copy wins), nodes that have not answered for [`ClusterConfig::down_after`] shown down
//!   (their objects then reappear at the adopters: adoptions on the map), forgotten after
//!   [`ClusterConfig::forget_after`];
//! - [`ClusterFeed`]: one polling task per node and one publishing task, on the caller's
//!   tokio runtime.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::time::Instant;
use worldmesh_core::NodeId;
use worldmesh_net::view::{self, ViewError, ViewSnapshot};

use crate::hub::Hub;
use crate::model::{NodeSample, ObjectSample, Rect, Tick, WorldInfo};

/// Largest request head the client accepts in an answer, bytes.
pub const MAX_ANSWER_HEAD: usize = 16 * 1024;
/// Largest `/world` document, bytes.
pub const MAX_WORLD_BYTES: usize = 1 << 20;
/// Most obstacles a world may declare.
pub const MAX_OBSTACLES: usize = 100_000;
/// Most kinds, or traffic classes, a world may declare.
pub const MAX_KINDS: usize = 256;

/// Why a scrape failed.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The connection could not be made, or broke.
    #[error("{addr}: {error}")]
    Io {
        /// The node's endpoint.
        addr: SocketAddr,
        /// The system's reason (not a `source`: it is in the message).
        error: std::io::Error,
    },
    /// No complete answer within the deadline.
    #[error("{addr}: no complete answer within {timeout:?}")]
    Timeout {
        /// The node's endpoint.
        addr: SocketAddr,
        /// The deadline.
        timeout: Duration,
    },
    /// The answer is larger than allowed.
    #[error("{addr}: answer larger than {max} bytes")]
    TooLarge {
        /// The node's endpoint.
        addr: SocketAddr,
        /// The limit.
        max: usize,
    },
    /// The answer is not HTTP as expected.
    #[error("{addr}: malformed answer: {why}")]
    Malformed {
        /// The node's endpoint.
        addr: SocketAddr,
        /// What is wrong.
        why: &'static str,
    },
    /// The node answered with an error status.
    #[error("{addr}: HTTP {code}: {message}")]
    Status {
        /// The node's endpoint.
        addr: SocketAddr,
        /// The status code.
        code: u16,
        /// The start of the body.
        message: String,
    },
    /// The view does not decode.
    #[error("{addr}: {error}")]
    View {
        /// The node's endpoint.
        addr: SocketAddr,
        /// Why (in the message).
        error: ViewError,
    },
    /// The world document is not a valid [`WorldInfo`].
    #[error("{addr}: bad world description: {why}")]
    World {
        /// The node's endpoint.
        addr: SocketAddr,
        /// Why.
        why: String,
    },
}

/// `GET path` from `addr`: the body of a 200 answer of at most `max_body` bytes, the whole
/// exchange within `timeout`.
pub async fn http_get(
    addr: SocketAddr,
    path: &str,
    max_body: usize,
    timeout: Duration,
) -> Result<Vec<u8>, FetchError> {
    match tokio::time::timeout(timeout, get_inner(addr, path, max_body)).await {
        Ok(r) => r,
        Err(_) => Err(FetchError::Timeout { addr, timeout }),
    }
}

async fn get_inner(addr: SocketAddr, path: &str, max_body: usize) -> Result<Vec<u8>, FetchError> {
    let io = |error| FetchError::Io { addr, error };
    let bad = |why| FetchError::Malformed { addr, why };
    let mut s = tokio::net::TcpStream::connect(addr).await.map_err(io)?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.map_err(io)?;
    let cap = max_body.saturating_add(MAX_ANSWER_HEAD);
    let mut buf = Vec::with_capacity(8 * 1024);
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let n = s.read(&mut chunk).await.map_err(io)?;
        if n == 0 {
            break;
        }
        if buf.len() + n > cap {
            return Err(FetchError::TooLarge { addr, max: max_body });
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let end = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or(bad("no end of head"))?;
    if end > MAX_ANSWER_HEAD {
        return Err(bad("head too long"));
    }
    let head = std::str::from_utf8(&buf[..end]).map_err(|_| bad("head is not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap_or("");
    let mut parts = status.splitn(3, ' ');
    let (Some(version), Some(code)) = (parts.next(), parts.next()) else {
        return Err(bad("no status line"));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(bad("not HTTP/1.x"));
    }
    let code: u16 = code.parse().map_err(|_| bad("status is not a number"))?;
    let mut length = None;
    for l in lines {
        if let Some((k, v)) = l.split_once(':')
            && k.trim().eq_ignore_ascii_case("content-length")
        {
            length = Some(v.trim().parse::<usize>().map_err(|_| bad("bad Content-Length"))?);
        }
    }
    let body = buf.split_off(end + 4);
    if let Some(l) = length
        && l != body.len()
    {
        return Err(bad("body length differs from Content-Length"));
    }
    if body.len() > max_body {
        return Err(FetchError::TooLarge { addr, max: max_body });
    }
    if code != 200 {
        let message: String = String::from_utf8_lossy(&body).trim().chars().take(200).collect();
        return Err(FetchError::Status { addr, code, message });
    }
    Ok(body)
}

/// Checks a world description from a node (it is drawn by every browser).
pub fn check_world(w: &WorldInfo) -> Result<(), String> {
    if !w.bounds.is_valid() || w.bounds.width() <= 0.0 || w.bounds.height() <= 0.0 {
        return Err(format!(
            "bounds {:?} are not a finite, non-empty rectangle",
            w.bounds
        ));
    }
    if w.obstacles.len() > MAX_OBSTACLES {
        return Err(format!(
            "{} obstacles, more than {MAX_OBSTACLES}",
            w.obstacles.len()
        ));
    }
    if let Some(o) = w.obstacles.iter().find(|o| !o.is_valid()) {
        return Err(format!("obstacle {o:?} is not a valid rectangle"));
    }
    if w.kinds.len() > MAX_KINDS || w.classes.len() > MAX_KINDS {
        return Err(format!("more than {MAX_KINDS} kinds or traffic classes"));
    }
    if w.title.len() > 1024 {
        return Err("title longer than 1024 bytes".into());
    }
    Ok(())
}

/// Reads the world description from the first of `addrs` that serves it.
pub async fn fetch_world(addrs: &[SocketAddr], timeout: Duration) -> Result<WorldInfo, FetchError> {
    let mut last = None;
    for &addr in addrs {
        match http_get(addr, "/world", MAX_WORLD_BYTES, timeout).await {
            Ok(b) => {
                let w: WorldInfo = serde_json::from_slice(&b).map_err(|e| FetchError::World {
                    addr,
                    why: e.to_string(),
                })?;
                check_world(&w).map_err(|why| FetchError::World { addr, why })?;
                return Ok(w);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or(FetchError::Malformed {
        addr: SocketAddr::from(([0, 0, 0, 0], 0)),
        why: "no node address given",
    }))
}

/// How the cluster feed runs.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// Time between two scrapes of a node, and between two ticks.
    pub period: Duration,
    /// Deadline of one scrape.
    pub timeout: Duration,
    /// Most objects one node's view may hold.
    pub max_objects_per_node: usize,
    /// Largest view, bytes.
    pub max_view_bytes: usize,
    /// A node that has not answered for this long is shown down, without objects.
    pub down_after: Duration,
    /// A node that has not answered for this long leaves the table.
    pub forget_after: Duration,
    /// An object no view lists any more is still shown where it was for this long (while
    /// its node is up): nodes are polled at different moments, and an object handed from
    /// one to another would otherwise blink out between the two polls.
    pub handover_grace: Duration,
}

impl Default for ClusterConfig {
    /// 100 ms ticks, 1 s per scrape, 200,000 objects and 8 MiB per view, down after 2 s,
    /// forgotten after 60 s, 500 ms of hand-over grace.
    fn default() -> Self {
        Self {
            period: Duration::from_millis(100),
            timeout: Duration::from_secs(1),
            max_objects_per_node: 200_000,
            max_view_bytes: 8 << 20,
            down_after: Duration::from_secs(2),
            forget_after: Duration::from_secs(60),
            handover_grace: Duration::from_millis(500),
        }
    }
}

/// What is known of one node.
#[derive(Debug)]
struct Known {
    view: Arc<ViewSnapshot>,
    /// Seconds (feed time) of the last good view.
    at: f64,
}

/// The merge of node views into ticks (sans-IO: times are given).
#[derive(Debug)]
pub struct ClusterMerge {
    player_kind: Vec<bool>,
    classes: usize,
    down_after: f64,
    forget_after: f64,
    nodes: BTreeMap<u32, Known>,
    /// Every object shown lately, with when it was last listed.
    recent: BTreeMap<worldmesh_core::ObjectId, (ObjectSample, f64)>,
    grace: f64,
    /// Scrapes that failed, by endpoint, with the last error.
    pub errors: BTreeMap<SocketAddr, (u64, String)>,
}

impl ClusterMerge {
    /// A merge for `world` (its kinds say which objects are players).
    pub fn new(world: &WorldInfo, cfg: &ClusterConfig) -> Self {
        Self {
            player_kind: world.kinds.iter().map(|k| k.player).collect(),
            classes: world.classes.len(),
            down_after: cfg.down_after.as_secs_f64(),
            forget_after: cfg.forget_after.as_secs_f64(),
            nodes: BTreeMap::new(),
            recent: BTreeMap::new(),
            grace: cfg.handover_grace.as_secs_f64(),
            errors: BTreeMap::new(),
        }
    }

    /// A node's view arrived at feed time `t`.
    pub fn view(&mut self, t: f64, v: ViewSnapshot) {
        self.nodes.insert(
            v.node,
            Known {
                view: Arc::new(v),
                at: t,
            },
        );
    }

    /// A scrape of `addr` failed.
    pub fn failed(&mut self, addr: SocketAddr, e: &FetchError) {
        let entry = self.errors.entry(addr).or_insert((0, String::new()));
        entry.0 += 1;
        entry.1 = e.to_string();
    }

    /// The cluster at feed time `t`.
    pub fn tick(&mut self, t: f64) -> Tick {
        self.nodes.retain(|_, k| t - k.at <= self.forget_after);
        // (object, frozen, age of the view it came from).
        let mut found: Vec<(ObjectSample, bool, f64)> = Vec::new();
        let mut nodes = Vec::with_capacity(self.nodes.len());
        let mut counts: BTreeMap<u32, (u32, u32)> = BTreeMap::new();
        for (&id, k) in &self.nodes {
            let up = t - k.at <= self.down_after;
            if up {
                for o in &k.view.objects {
                    found.push((
                        ObjectSample {
                            id: o.id,
                            x: o.x,
                            y: o.y,
                            kind: o.kind,
                            owner: NodeId(id),
                            aoi: o.aoi.map(|a| Rect::new(a[0], a[1], a[2], a[3])),
                        },
                        o.frozen,
                        t - k.at,
                    ));
                }
            }
            let mut sent = k.view.sent_bytes.clone();
            sent.resize(self.classes, 0);
            nodes.push(NodeSample {
                id: NodeId(id),
                up,
                players: 0,
                primaries: 0,
                replicas: k.view.replicas,
                missing: None,
                frame_ms: k.view.frame_us.map(|f| f as f32 / 1000.0),
                sessions: k.view.sessions,
                capacity: k.view.capacity,
                local_health: k.view.local_health.map(u32::from),
                sent_bytes: sent,
            });
        }
        // One entry per object: the unfrozen copy first (a region migrating), then the
        // freshest view (a node that stopped answering may still list what it handed over).
        found.sort_by(|a, b| (a.0.id, a.1).cmp(&(b.0.id, b.1)).then(a.2.total_cmp(&b.2)));
        found.dedup_by_key(|(o, _, _)| o.id);
        // Nodes are polled at different moments: an object handed from A to B can be gone
        // from A's latest view before it is in B's. It stays where it was last listed for
        // `handover_grace` (while that node is up), so the hand-over shows as a change of
        // owner, not as a removal and a new object.
        for (o, _, _) in &found {
            self.recent.insert(o.id, (*o, t));
        }
        let up: std::collections::BTreeSet<u32> = nodes.iter().filter(|n| n.up).map(|n| n.id.0).collect();
        let grace = self.grace;
        self.recent.retain(|_, (_, seen)| t - *seen <= grace);
        let listed: std::collections::BTreeSet<_> = found.iter().map(|(o, _, _)| o.id).collect();
        let lingering: Vec<ObjectSample> = self
            .recent
            .values()
            .filter(|(o, _)| !listed.contains(&o.id) && up.contains(&o.owner.0))
            .map(|(o, _)| *o)
            .collect();
        found.extend(lingering.into_iter().map(|o| (o, false, 0.0)));
        for (o, _, _) in &found {
            let c = counts.entry(o.owner.0).or_default();
            c.0 += 1;
            if self
                .player_kind
                .get(usize::from(o.kind))
                .copied()
                .unwrap_or(false)
            {
                c.1 += 1;
            }
        }
        for n in &mut nodes {
            let (p, pl) = counts.get(&n.id.0).copied().unwrap_or_default();
            n.primaries = p;
            n.players = pl;
        }
        Tick {
            time_s: t,
            objects: found.into_iter().map(|(o, _, _)| o).collect(),
            nodes,
        }
    }
}

/// The feed: one polling task per node endpoint, one task publishing ticks to the hub.
pub struct ClusterFeed {
    tasks: Vec<tokio::task::JoinHandle<()>>,
    merge: Arc<Mutex<ClusterMerge>>,
}

impl ClusterFeed {
    /// Starts polling `addrs` (nodes' metrics endpoints) and publishing to `hub`, on the
    /// current tokio runtime.
    pub fn start(hub: Arc<Hub>, addrs: &[SocketAddr], cfg: ClusterConfig) -> Self {
        let merge = Arc::new(Mutex::new(ClusterMerge::new(hub.world(), &cfg)));
        let origin = Instant::now();
        let mut tasks = Vec::new();
        for &addr in addrs {
            let (merge, cfg) = (Arc::clone(&merge), cfg.clone());
            tasks.push(tokio::spawn(async move {
                let mut next = Instant::now();
                loop {
                    let r = http_get(addr, "/view", cfg.max_view_bytes, cfg.timeout)
                        .await
                        .and_then(|b| {
                            view::decode(&b, cfg.max_objects_per_node)
                                .map_err(|error| FetchError::View { addr, error })
                        });
                    let t = origin.elapsed().as_secs_f64();
                    {
                        let mut m = merge.lock().unwrap_or_else(PoisonError::into_inner);
                        match r {
                            Ok(v) => m.view(t, v),
                            Err(e) => m.failed(addr, &e),
                        }
                    }
                    next += cfg.period;
                    let now = Instant::now();
                    if next < now {
                        next = now;
                    }
                    tokio::time::sleep_until(next).await;
                }
            }));
        }
        let m = Arc::clone(&merge);
        tasks.push(tokio::spawn(async move {
            let mut every = tokio::time::interval(cfg.period);
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                every.tick().await;
                let t = origin.elapsed().as_secs_f64();
                let tick = m.lock().unwrap_or_else(PoisonError::into_inner).tick(t);
                hub.publish(tick);
            }
        }));
        Self { tasks, merge }
    }

    /// Failed scrapes so far, by endpoint, with the last error.
    pub fn errors(&self) -> BTreeMap<SocketAddr, (u64, String)> {
        self.merge
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .errors
            .clone()
    }
}

impl Drop for ClusterFeed {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::KindInfo;
    use worldmesh_core::ObjectId;
    use worldmesh_net::view::ViewObject;

    fn world() -> WorldInfo {
        WorldInfo {
            title: "t".into(),
            bounds: Rect::new(0.0, 0.0, 100.0, 100.0),
            obstacles: vec![],
            kinds: vec![
                KindInfo {
                    name: "player".into(),
                    player: true,
                },
                KindInfo {
                    name: "missile".into(),
                    player: false,
                },
            ],
            classes: vec!["a".into(), "b".into()],
        }
    }

    fn obj(id: u32, kind: u8, frozen: bool) -> ViewObject {
        ViewObject {
            id: ObjectId::new(NodeId(9), id),
            kind,
            x: 1.0,
            y: 2.0,
            aoi: None,
            frozen,
        }
    }

    fn node(id: u32, objects: Vec<ViewObject>) -> ViewSnapshot {
        ViewSnapshot {
            node: id,
            sent_bytes: vec![10, 20, 30],
            frame_us: Some(1500),
            local_health: Some(id as u8),
            objects,
            ..Default::default()
        }
    }

    #[test]
    fn merges_views_dedupes_migrating_objects_and_marks_silent_nodes_down() {
        let mut m = ClusterMerge::new(&world(), &ClusterConfig::default());
        m.view(
            0.0,
            node(0, vec![obj(1, 0, false), obj(2, 1, false), obj(3, 0, true)]),
        );
        m.view(0.0, node(1, vec![obj(3, 0, false), obj(4, 0, false)]));
        let t = m.tick(0.1);
        let owners: Vec<(u32, u32)> = t.objects.iter().map(|o| (o.id.counter(), o.owner.0)).collect();
        assert_eq!(owners, vec![(1, 0), (2, 0), (3, 1), (4, 1)]);
        assert_eq!(t.nodes.len(), 2);
        assert_eq!((t.nodes[0].primaries, t.nodes[0].players), (2, 1));
        assert_eq!((t.nodes[1].primaries, t.nodes[1].players), (2, 2));
        assert_eq!(t.nodes[0].sent_bytes, vec![10, 20], "cut to the world's classes");
        assert_eq!(t.nodes[0].frame_ms, Some(1.5));
        let health: Vec<_> = t.nodes.iter().map(|n| n.local_health).collect();
        assert_eq!(health, [Some(0), Some(1)]);
        assert!(t.nodes.iter().all(|n| n.up));
        // A stale view loses to a fresh one listing the same object unfrozen.
        m.view(
            1.0,
            node(1, vec![obj(1, 0, false), obj(3, 0, false), obj(4, 0, false)]),
        );
        assert_eq!(m.tick(1.0).objects[0].owner, NodeId(1));
        // Node 1 hands object 4 to node 0, polled first: 4 stays at 1 until 0 lists it.
        m.view(1.2, node(1, vec![obj(1, 0, false), obj(3, 0, false)]));
        let t = m.tick(1.2);
        assert_eq!(
            t.objects.iter().find(|o| o.id.counter() == 4).map(|o| o.owner),
            Some(NodeId(1))
        );
        assert_eq!(t.objects.len(), 4);
        m.view(
            1.3,
            node(0, vec![obj(1, 0, false), obj(2, 1, false), obj(4, 0, false)]),
        );
        let t = m.tick(1.3);
        assert_eq!(
            t.objects.iter().find(|o| o.id.counter() == 4).map(|o| o.owner),
            Some(NodeId(0))
        );
        // An object nobody lists any more is gone after the grace.
        m.view(1.9, node(0, vec![obj(1, 0, false), obj(4, 0, false)]));
        m.view(1.9, node(1, vec![obj(3, 0, false)]));
        assert_eq!(m.tick(1.9).objects.len(), 3, "object 2 left after 0.5 s");
        // Node 0 falls silent: down after 2 s, its objects gone; forgotten after 60 s.
        m.view(4.0, node(1, vec![obj(4, 0, false)]));
        let t = m.tick(4.0);
        assert!(!t.nodes[0].up);
        assert_eq!(t.objects.len(), 1);
        m.view(62.0, node(1, vec![obj(4, 0, false)]));
        assert_eq!(m.tick(62.0).nodes.len(), 1);
    }

    #[test]
    fn worlds_are_checked() {
        let mut w = world();
        assert!(check_world(&w).is_ok());
        w.bounds = Rect {
            min_x: 0.0,
            min_y: 0.0,
            max_x: f32::NAN,
            max_y: 1.0,
        };
        assert!(check_world(&w).is_err());
        let mut w = world();
        w.obstacles = vec![Rect::new(0.0, 0.0, 1.0, 1.0); MAX_OBSTACLES + 1];
        assert!(check_world(&w).is_err());
    }

    #[tokio::test]
    async fn the_client_is_bounded_and_reports_statuses() {
        use tokio::net::TcpListener;
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let answers: Vec<Vec<u8>> = vec![
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello".to_vec(),
            b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 7\r\n\r\nnot yet".to_vec(),
            [b"HTTP/1.1 200 OK\r\n\r\n".to_vec(), vec![b'x'; 100]].concat(),
            b"garbage".to_vec(),
            b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort".to_vec(),
        ];
        let n = answers.len();
        tokio::spawn(async move {
            for a in answers {
                let (mut s, _) = l.accept().await.unwrap();
                let mut b = [0u8; 1024];
                let _ = s.read(&mut b).await;
                let _ = s.write_all(&a).await;
            }
        });
        let t = Duration::from_secs(5);
        let mut got = Vec::new();
        for _ in 0..n {
            got.push(http_get(addr, "/view", 50, t).await);
        }
        assert_eq!(got[0].as_ref().unwrap(), b"hello");
        assert!(
            matches!(got[1], Err(FetchError::Status { code: 503, .. })),
            "{:?}",
            got[1]
        );
        assert!(
            matches!(got[2], Err(FetchError::TooLarge { max: 50, .. })),
            "{:?}",
            got[2]
        );
        assert!(
            matches!(got[3], Err(FetchError::Malformed { .. })),
            "{:?}",
            got[3]
        );
        assert!(
            matches!(got[4], Err(FetchError::Malformed { .. })),
            "{:?}",
            got[4]
        );
        // A server that never answers: the deadline.
        let silent = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let a = silent.local_addr().unwrap();
        let r = http_get(a, "/view", 50, Duration::from_millis(200)).await;
        assert!(matches!(r, Err(FetchError::Timeout { .. })), "{r:?}");
    }
}
