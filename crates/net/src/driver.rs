//! The driving loop: a thin tokio task that runs the sans-IO [`Node`] over a
//! [`Transport`] (QUIC in production), taking [`Command`]s from its [`NodeHandle`] and
//! handing every node event back on a bounded channel.
//!
//! Each turn the loop
//! 1. runs `handle_timeout` when the node's timer is due;
//! 2. sends what `poll_transmit` returns, through the [`DelayShim`] when WAN emulation is
//!    on (the shim holds each datagram for its emulated one-way delay, then it goes to
//!    `Transport::send`);
//! 3. takes the node's events: membership changes go to the transport (`MemberUp` →
//!    [`Transport::set_addr`], `MemberDown` → [`Transport::forget`], `Rejoined` →
//!    [`Transport::set_generation`]), everything is logged (rate-limited where it can
//!    flood) and forwarded, stamped with wall time, to the event channel — dropped and
//!    counted when the channel is full, so a slow consumer never stalls the frame loop;
//! 4. waits for a transport event, a command, the seeds' answers, the node's next timeout,
//!    the shim's next release, or the once-a-second log tick.
//!
//! It times every frame (the work, and how late it started: [`FrameTimes`]) and, when
//! [`DriverOptions::metrics`] is set, publishes a [`MetricsSnapshot`] once a second for
//! the metrics endpoint ([`crate::metrics_server`]), which renders it on its own thread.
//!
//! With [`DriverOptions::store`], it performs the node's persistence effects: every batch
//! [`Node::poll_persist`] hands out goes to a store thread of its own ([`crate::persister`]),
//! and each completion is reported back with [`Node::handle_persisted`]; a batch the store
//! cannot apply stops the run ([`NetError::Store`]). When the run ends it takes a last
//! checkpoint and waits until every batch is on disk.
//!
//! It makes no protocol decision: joining (dial the seeds, then [`Node::join`]), draining
//! and stopping are the node's, on command. A drain ends the run after
//! [`Event::Drained`] (and a short linger so the leave reaches the others).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::{mpsc, oneshot};
use worldmesh_core::{MessageClass, NodeId, ObjectId, Time};
use worldmesh_node::membership::{Departure, Member};
use worldmesh_node::{Event, Node, NodeSummary};
use worldmesh_replica::GameObject;

use crate::clock::Clock;
use crate::join::{JoinError, JoinPolicy, reach_seeds};
use crate::metrics::{
    FrameTimeSummary, FrameTimes, MetricsSnapshot, PlayerMetrics, STORE_WINDOW, SnapshotCell, StoreMetrics,
};
use crate::persister::{Completion, PersistTimes, Persister};
use crate::players::{PlayerEvent, PlayerHost, PlayerListener, PlayerPortStats};
use crate::shim::DelayShim;
use crate::transport::{RefusalReason, Transport, TransportEvent, TransportStats, class_of};
use crate::view::{ViewCell, ViewObject, ViewSnapshot};

/// Why the driver stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// No seed could be joined.
    #[error(transparent)]
    Join(#[from] JoinError),
    /// The store could not apply a batch (the node stops rather than acknowledge durable
    /// writes that are not on disk).
    #[error("persistence failed: {0}")]
    Store(#[from] worldmesh_store::StoreError),
    /// The store's thread could not be started.
    #[error("cannot start the store thread: {0}")]
    StoreThread(std::io::Error),
}

/// How the driver runs.
#[derive(Debug)]
pub struct DriverOptions {
    /// Wall time as the node's `Time`.
    pub clock: Clock,
    /// WAN emulation for outgoing datagrams.
    pub shim: Option<DelayShim>,
    /// Addresses of members to join through (this node's own address is skipped). Empty:
    /// the node starts a world of its own (or waits to be joined).
    pub seeds: Vec<SocketAddr>,
    /// How hard to try the seeds.
    pub join: JoinPolicy,
    /// Events waiting for the consumer; beyond this they are dropped and counted.
    pub event_capacity: usize,
    /// After [`Event::Drained`], keep running this long so the leave reaches the others.
    pub linger: Duration,
    /// Refusal log lines: at most one per reason per this period (the rest are counted
    /// and summarised).
    pub log_period: Duration,
    /// Where to publish a [`MetricsSnapshot`] once a second (and at start and end).
    pub metrics: Option<SnapshotCell>,
    /// Where to publish a [`ViewSnapshot`] for a live dashboard: after a frame, at most
    /// every [`ViewCell::period`], and only while the view is wanted.
    pub view: Option<ViewCell>,
    /// The node's store (persistence on: the node was configured with
    /// `NodeConfig::persist`, and recovered from this store if it held anything).
    pub store: Option<worldmesh_store::Store>,
}

impl DriverOptions {
    /// Defaults: no shim, no seeds, 30 s to reach a seed, 8192 queued events, 500 ms
    /// linger, refusal lines at most every 5 s, no metrics.
    pub fn new(clock: Clock) -> Self {
        Self {
            clock,
            shim: None,
            seeds: Vec::new(),
            join: JoinPolicy::default(),
            event_capacity: 8192,
            linger: Duration::from_millis(500),
            log_period: Duration::from_secs(5),
            metrics: None,
            view: None,
            store: None,
        }
    }
}

/// What a [`NodeHandle`] can ask of the running node.
pub enum Command<O: GameObject> {
    /// Creates a primary; its id is sent back on `reply` if given.
    Spawn {
        /// The object.
        object: O,
        /// Where to send its id.
        reply: Option<oneshot::Sender<ObjectId>>,
    },
    /// Writes to an object ([`Node::write`]).
    Write {
        /// The object.
        target: ObjectId,
        /// The write.
        write: O::Write,
    },
    /// Starts a graceful drain; the run ends after [`Event::Drained`].
    Drain,
    /// Stops the run now (without leaving: the others will see the node fail, unless it
    /// drained first).
    Stop,
    /// Asks for a [`Snapshot`].
    Snapshot {
        /// Bandwidth figures cover `[from, now)` (`None`: since the node started).
        from: Option<Time>,
        /// Where to send it.
        reply: oneshot::Sender<Snapshot>,
    },
}

/// Something that happened, stamped with when.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeEvent {
    /// Wall time, milliseconds since the UNIX epoch.
    pub unix_ms: u64,
    /// The node's time.
    pub at: Time,
    /// What.
    pub kind: EventKind,
}

/// What happened: a node event, or a transport or driver one.
#[derive(Clone, Debug, PartialEq)]
pub enum EventKind {
    /// An event of the node ([`Node::poll_event`]).
    Node(Event),
    /// Seeds answered and the node asked to join through them.
    SeedsReached(Vec<Member>),
    /// A connection to a member is up (its hello verified).
    PeerUp {
        /// The member.
        node: NodeId,
        /// Its generation.
        generation: u64,
        /// Where its packets come from.
        remote: SocketAddr,
    },
    /// A member's last connection is gone.
    PeerLost {
        /// The member.
        node: NodeId,
        /// Its generation.
        generation: u64,
        /// Why.
        reason: String,
    },
    /// The transport refused a connection.
    Refused {
        /// From (or to) where.
        addr: SocketAddr,
        /// The node it claimed, if known.
        node: Option<NodeId>,
        /// The class of refusal.
        reason: RefusalReason,
        /// What exactly.
        detail: String,
    },
}

/// Counters the driver keeps.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DriverStats {
    /// Events dropped because the consumer did not keep up.
    pub events_dropped: u64,
    /// Datagrams dropped by the WAN shim's emulated loss.
    pub shim_dropped: u64,
    /// Seeds that answered.
    pub seeds_reached: u64,
    /// Commands handled.
    pub commands: u64,
}

/// The node's state at one moment, for a [`Command::Snapshot`].
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// When.
    pub at: Time,
    /// The node's summary over the asked window.
    pub summary: NodeSummary,
    /// The transport's counters.
    pub transport: TransportStats,
    /// The driver's counters.
    pub driver: DriverStats,
    /// The node's primaries, ascending.
    pub primaries: Vec<ObjectId>,
    /// Live members other than this node, ascending.
    pub members: Vec<NodeId>,
    /// Player sessions and the player port, if the node admits players.
    pub players: Option<PlayersOutcome>,
    /// Frame durations so far.
    pub frame_times: FrameTimeSummary,
}

/// Why a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// A [`Command::Stop`].
    Stopped,
    /// Every [`NodeHandle`] was dropped.
    HandleDropped,
    /// The node drained and left.
    Drained {
        /// Primaries still held when it left.
        left_behind: usize,
    },
}

/// What a finished run hands back.
pub struct RunOutcome<O: GameObject, T> {
    /// The node, as it ended.
    pub node: Node<O>,
    /// The transport (still open: close it with [`Transport::close`]).
    pub transport: T,
    /// The transport's final counters.
    pub transport_stats: TransportStats,
    /// The driver's counters.
    pub driver: DriverStats,
    /// Why it ended.
    pub reason: StopReason,
    /// When.
    pub ended: Time,
    /// Player sessions and the player port at the end, if the node admitted players.
    pub players: Option<PlayersOutcome>,
    /// Frame durations over the run.
    pub frame_times: FrameTimeSummary,
    /// How the store kept up, if the node persisted.
    pub persist: Option<PersistTimes>,
}

/// The players' counters of a node.
#[derive(Clone, Debug)]
pub struct PlayersOutcome {
    /// The session table's.
    pub sessions: worldmesh_node::sessions::SessionStats,
    /// The player port's.
    pub port: PlayerPortStats,
    /// The assignment agent's, if the node takes part in the assignment.
    pub assignment: Option<worldmesh_node::assignment::AssignmentStats>,
}

/// A node's player port and its session table, for [`start_with_players`].
pub struct Players<O: GameObject> {
    /// The port.
    pub listener: PlayerListener,
    /// The sessions (`node::sessions::Sessions` of a playable game).
    pub host: Box<dyn PlayerHost<O>>,
}

/// The application's side of a running node: commands in, events out.
pub struct NodeHandle<O: GameObject> {
    control: Control<O>,
    /// Events, in order; see [`DriverOptions::event_capacity`].
    pub events: mpsc::Receiver<NodeEvent>,
}

impl<O: GameObject> NodeHandle<O> {
    /// A clonable sender of commands that outlives this handle's event receiver (for
    /// other tasks: a game's own input loop, a signal handler).
    pub fn control(&self) -> Control<O> {
        self.control.clone()
    }

    /// A sender of commands that outlives this handle's event receiver.
    pub fn commands(&self) -> mpsc::Sender<Command<O>> {
        self.control.commands.clone()
    }
}

/// The handle's commands ([`NodeHandle`] dereferences to its control).
impl<O: GameObject> std::ops::Deref for NodeHandle<O> {
    type Target = Control<O>;

    fn deref(&self) -> &Control<O> {
        &self.control
    }
}

/// Commands to a running node, from any task: spawn objects, inject writes, drain, stop,
/// look. Cheap to clone; every method returns false (or `None`) once the run has ended.
pub struct Control<O: GameObject> {
    commands: mpsc::Sender<Command<O>>,
}

impl<O: GameObject> Clone for Control<O> {
    fn clone(&self) -> Self {
        Self {
            commands: self.commands.clone(),
        }
    }
}

impl<O: GameObject> Control<O> {
    /// Sends a command; false if the run has ended.
    pub async fn send(&self, c: Command<O>) -> bool {
        self.commands.send(c).await.is_ok()
    }

    /// Creates a primary and returns its id (None if the run has ended).
    pub async fn spawn(&self, object: O) -> Option<ObjectId> {
        let (tx, rx) = oneshot::channel();
        if !self
            .send(Command::Spawn {
                object,
                reply: Some(tx),
            })
            .await
        {
            return None;
        }
        rx.await.ok()
    }

    /// Writes to an object (a tentative write sent to its primary, [`Node::write`]).
    pub async fn write(&self, target: ObjectId, write: O::Write) -> bool {
        self.send(Command::Write { target, write }).await
    }

    /// Starts a drain.
    pub async fn drain(&self) -> bool {
        self.send(Command::Drain).await
    }

    /// Stops the run.
    pub async fn stop(&self) -> bool {
        self.send(Command::Stop).await
    }

    /// The node's state now, bandwidth counted from `from`.
    pub async fn snapshot(&self, from: Option<Time>) -> Option<Snapshot> {
        let (tx, rx) = oneshot::channel();
        if !self.send(Command::Snapshot { from, reply: tx }).await {
            return None;
        }
        rx.await.ok()
    }
}

/// Wires `node` to `transport`: returns the handle and the run itself (a future to spawn
/// or await). The run ends on [`Command::Stop`], when every handle is dropped, or after a
/// drain.
pub fn start<O, T>(
    node: Node<O>,
    transport: T,
    opts: DriverOptions,
) -> (
    NodeHandle<O>,
    impl std::future::Future<Output = Result<RunOutcome<O, T>, NetError>>,
)
where
    O: GameObject,
    T: Transport,
{
    start_with_players(node, transport, opts, None)
}

/// [`start`], with a player port whose sessions the driver runs beside the node: each
/// player datagram goes to the sessions with the node, the sessions run after every node
/// frame, and what they queue goes out on the port.
pub fn start_with_players<O, T>(
    node: Node<O>,
    transport: T,
    opts: DriverOptions,
    players: Option<Players<O>>,
) -> (
    NodeHandle<O>,
    impl std::future::Future<Output = Result<RunOutcome<O, T>, NetError>>,
)
where
    O: GameObject,
    T: Transport,
{
    let (ctx, crx) = mpsc::channel(64);
    let (etx, erx) = mpsc::channel(opts.event_capacity.max(1));
    let handle = NodeHandle {
        control: Control { commands: ctx },
        events: erx,
    };
    (handle, run_node(node, transport, opts, players, crx, etx))
}

/// Wall time now, ms since the UNIX epoch.
pub fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Runs `node` over `transport` until stopped (see [`start`], which makes the channels).
pub async fn run_node<O, T>(
    node: Node<O>,
    transport: T,
    mut opts: DriverOptions,
    players: Option<Players<O>>,
    mut commands: mpsc::Receiver<Command<O>>,
    events: mpsc::Sender<NodeEvent>,
) -> Result<RunOutcome<O, T>, NetError>
where
    O: GameObject,
    T: Transport,
{
    let me = node.id();
    let local = transport.local_addr();
    let own = node.identity().addr;
    let seeds: Vec<SocketAddr> = opts
        .seeds
        .iter()
        .copied()
        .filter(|a| *a != local && *a != own)
        .collect();
    let (join_tx, mut join_rx) = oneshot::channel();
    let mut joining = !seeds.is_empty();
    if joining {
        let dialer = transport.dialer();
        let policy = opts.join.clone();
        tokio::spawn(async move {
            let _ = join_tx.send(reach_seeds(&dialer, &seeds, &policy).await);
        });
    }
    let persister = match opts.store.take() {
        Some(store) => Some(Persister::start(store).map_err(NetError::StoreThread)?),
        None => None,
    };
    let mut d = Driver {
        persister,
        clock: opts.clock,
        node,
        transport,
        shim: opts.shim.take(),
        events,
        stats: DriverStats::default(),
        logs: Logs::new(me, opts.log_period),
        drained: None,
        players,
        frame: 0,
        frame_times: FrameTimes::default(),
        metrics: opts.metrics.take(),
        view: opts.view.take(),
        view_at: None,
    };
    d.publish_metrics();
    d.share_view();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut linger_until: Option<Instant> = None;
    let reason = loop {
        let now = Instant::now();
        if d.node.poll_timeout().is_some_and(|t| d.clock.instant(t) <= now) {
            let (frame0, due) = (d.node.frame(), d.clock.instant(d.node.next_frame()));
            d.node.handle_timeout(d.clock.at(now));
            d.after_frame();
            d.pump(now);
            if d.node.frame() != frame0 {
                d.frame_times
                    .record(now.elapsed(), now.saturating_duration_since(due));
                d.publish_view(now);
            }
        }
        d.pump(now);
        if let Some(left_behind) = d.drained {
            let until = *linger_until.get_or_insert(now + opts.linger);
            if now >= until {
                break StopReason::Drained { left_behind };
            }
        }
        let mut wake = d
            .node
            .poll_timeout()
            .map(|t| d.clock.instant(t))
            .unwrap_or(now + Duration::from_secs(1));
        if let Some(due) = d.shim.as_ref().and_then(DelayShim::next_due) {
            wake = wake.min(due);
        }
        if let Some(u) = linger_until {
            wake = wake.min(u);
        }
        tokio::select! {
            ev = d.transport.recv() => d.on_transport(ev),
            ev = recv_player(&mut d.players) => d.on_player(ev),
            cmd = commands.recv() => match cmd {
                Some(Command::Stop) => break StopReason::Stopped,
                Some(c) => d.on_command(c),
                None => break StopReason::HandleDropped,
            },
            c = recv_persisted(&mut d.persister) => {
                if let Some(c) = c {
                    d.on_persisted(c)?;
                }
            }
            r = &mut join_rx, if joining => {
                joining = false;
                match r {
                    Ok(Ok(hellos)) => d.join(hellos),
                    Ok(Err(e)) => {
                        tracing::error!(node = me.0, error = %e, "cannot join");
                        return Err(e.into());
                    }
                    Err(_) => {}
                }
            }
            _ = tokio::time::sleep_until(wake.into()) => {}
            _ = tick.tick() => {
                d.logs.flush(Instant::now());
                d.publish_metrics();
            }
        }
    };
    if let Some(p) = &mut d.players {
        let now = d.clock.now();
        p.host.shutdown(now, &mut d.node);
    }
    d.pump(Instant::now());
    if d.persister.is_some() {
        // A planned stop loses nothing: a last checkpoint, then every batch on disk.
        let now = d.clock.now();
        d.node.checkpoint(now);
        d.pump(Instant::now());
        let done = d.persister.as_mut().map(Persister::finish).unwrap_or_default();
        for c in done {
            d.on_persisted(c)?;
        }
        d.pump(Instant::now());
    }
    if let Some(p) = &d.players {
        p.listener.shutdown();
    }
    d.logs.flush_all();
    if let Some(s) = &d.shim {
        d.stats.shim_dropped = s.dropped;
    }
    d.publish_metrics();
    let ended = d.clock.now();
    let transport_stats = d.transport.stats();
    Ok(RunOutcome {
        node: d.node,
        transport: d.transport,
        transport_stats,
        driver: d.stats,
        reason,
        ended,
        players: d.players.as_ref().map(Players::outcome),
        frame_times: d.frame_times.summary(),
        persist: d.persister.as_ref().map(Persister::times),
    })
}

/// The next store completion, or never when the node does not persist.
async fn recv_persisted(p: &mut Option<Persister>) -> Option<Completion> {
    match p {
        Some(p) => p.recv().await,
        None => std::future::pending().await,
    }
}

impl<O: GameObject> Players<O> {
    fn outcome(&self) -> PlayersOutcome {
        PlayersOutcome {
            sessions: self.host.stats(),
            port: self.listener.stats(),
            assignment: self.host.assignment_stats(),
        }
    }
}

/// The next player event, or never when the node admits no players.
async fn recv_player<O: GameObject>(p: &mut Option<Players<O>>) -> PlayerEvent {
    match p {
        Some(p) => p.listener.recv().await,
        None => std::future::pending().await,
    }
}

struct Driver<O: GameObject, T> {
    /// The store's thread, if the node persists.
    persister: Option<Persister>,
    clock: Clock,
    node: Node<O>,
    transport: T,
    shim: Option<DelayShim>,
    events: mpsc::Sender<NodeEvent>,
    stats: DriverStats,
    logs: Logs,
    drained: Option<usize>,
    players: Option<Players<O>>,
    /// The node's frame count when the sessions last ran.
    frame: u64,
    frame_times: FrameTimes,
    metrics: Option<SnapshotCell>,
    view: Option<ViewCell>,
    /// When the last view was published.
    view_at: Option<Instant>,
}

impl<O: GameObject, T: Transport> Driver<O, T> {
    /// Publishes the metrics snapshot (if metrics are on): O(objects held), once a second.
    fn publish_metrics(&mut self) {
        let Some(cell) = &self.metrics else {
            return;
        };
        let now = self.clock.now();
        let node = &self.node;
        let stats = node.stats();
        let ages = node.replica_ages_ms(now);
        let (mean, max) = if ages.is_empty() {
            (None, None)
        } else {
            let mean = ages.iter().sum::<f64>() / ages.len() as f64;
            (
                Some(mean / 1000.0),
                Some(ages.iter().copied().fold(0.0, f64::max) / 1000.0),
            )
        };
        let cluster = node.cluster_summary();
        let mig = node.migrator().stats();
        let t = self.transport.stats();
        let snap = MetricsSnapshot {
            node: node.id().0,
            generation: u64::from(node.config().generation),
            uptime_s: now.saturating_since(stats.origin).as_secs_f64(),
            frames: self.frame_times.summary(),
            sent: stats.traffic.sent,
            received: stats.traffic.received,
            wire_sent: t.wire_sent,
            wire_received: t.wire_received,
            primaries: node.store().primary_count(),
            replicas: node.store().replica_count(),
            staleness_mean_s: mean,
            staleness_max_s: max,
            locator_load: node.locator().map(|l| l.load(now)),
            members: node.members().len() + 1,
            members_up: cluster.as_ref().map(|c| c.members_up),
            members_down: cluster.as_ref().map(|c| c.members_down),
            members_left: cluster.as_ref().map(|c| c.members_left),
            local_health: cluster.as_ref().map(|c| c.local_health),
            silent_suspicions: cluster.as_ref().map(|c| c.silent_suspicions),
            downgraded_verdicts: cluster.as_ref().map(|c| c.downgraded_verdicts),
            migrations_started: mig.started,
            migrations_completed: mig.completed,
            migrations_refused: mig.refused,
            migrations_bound: mig.bound,
            adoptions: cluster.as_ref().map_or(0, |c| c.adoption.adopted),
            orphans_dropped: cluster.as_ref().map_or(0, |c| c.adoption.dropped),
            rejections: stats.rejections.labelled().to_vec(),
            transport_refusals: t.refusals_named(),
            events_dropped: self.stats.events_dropped,
            players: self.players.as_ref().map(|p| {
                let st = p.host.stats();
                PlayerMetrics {
                    connected: p.host.players(),
                    connects: st.connected,
                    refused: st.refused.iter().map(|(r, n)| (format!("{r:?}"), *n)).collect(),
                }
            }),
            store: self.persister.as_ref().map(|p| {
                let counts = node.persist_stats().cloned().unwrap_or_default();
                StoreMetrics {
                    checkpoints: counts.checkpoints,
                    durable_writes: counts.writes_logged,
                    recovered_objects: counts.recovered_objects,
                    ..p.metrics(STORE_WINDOW)
                }
            }),
        };
        cell.publish(snap);
    }

    /// Publishes the dashboard's view (if on, wanted and due): O(primaries) copies of
    /// plain numbers, encoded later on the endpoint's thread.
    fn publish_view(&mut self, now: Instant) {
        let Some(cell) = &self.view else {
            return;
        };
        if !cell.wanted() || self.view_at.is_some_and(|t| now < t + cell.period()) {
            return;
        }
        self.view_at = Some(now);
        let node = &self.node;
        let frozen = node.replicas().frozen();
        let objects = node
            .store()
            .primaries()
            .map(|(id, e)| {
                let p = e.object.position();
                ViewObject {
                    id,
                    kind: e.object.kind(),
                    x: p.x,
                    y: p.y,
                    aoi: e
                        .object
                        .interest(node.world())
                        .map(|b| [b.min.x, b.min.y, b.max.x, b.max.y]),
                    frozen: frozen.contains(&id),
                }
            })
            .collect();
        let stats = node.stats();
        let mig = node.migrator().stats();
        let cluster = node.cluster_summary();
        let clock_now = self.clock.now();
        let v = ViewSnapshot {
            node: node.id().0,
            generation: u64::from(node.config().generation),
            uptime_s: clock_now.saturating_since(stats.origin).as_secs_f64(),
            frame_us: self
                .frame_times
                .last_work()
                .map(|d| d.as_micros().min(u128::from(u32::MAX - 1)) as u32),
            replicas: node.store().replica_count() as u32,
            members: (node.members().len() + 1) as u32,
            migrations_started: mig.started,
            migrations_bound: mig.bound,
            adoptions: cluster.as_ref().map_or(0, |c| c.adoption.adopted),
            sessions: self.players.as_ref().map(|p| p.host.players() as u32),
            capacity: self
                .players
                .as_ref()
                .map(|p| p.host.capacity().min(u32::MAX as usize - 1) as u32),
            local_health: cluster
                .as_ref()
                .map(|c| c.local_health.min(u32::from(u8::MAX - 1)) as u8),
            sent_bytes: stats.traffic.sent.iter().map(|c| c.bytes).collect(),
            objects,
        };
        cell.publish(v);
    }

    /// Runs the player sessions after a node frame.
    fn after_frame(&mut self) {
        if self.node.frame() == self.frame {
            return;
        }
        self.frame = self.node.frame();
        if let Some(p) = &mut self.players {
            let now = self.clock.now();
            p.host.frame(now, unix_ms(), &mut self.node);
        }
    }

    fn on_player(&mut self, ev: PlayerEvent) {
        let Some(p) = &mut self.players else {
            return;
        };
        let now = self.clock.now();
        match ev {
            PlayerEvent::Datagram { conn, bytes } => {
                p.host.datagram(now, unix_ms(), conn, &bytes, &mut self.node)
            }
            PlayerEvent::Closed { conn, left } => p.host.closed(now, conn, left, &mut self.node),
        }
    }

    /// Sends what the node queued (and what the shim released) and handles its events.
    fn pump(&mut self, now: Instant) {
        if let Some(p) = &mut self.players {
            while let Some((conn, bytes)) = p.host.poll_transmit() {
                p.listener.send(conn, bytes);
            }
            while let Some(line) = p.host.poll_log() {
                tracing::info!(node = self.node.id().0, "{line}");
            }
        }
        while let Some(r) = self.node.poll_persist() {
            match &mut self.persister {
                Some(p) => p.send(r),
                // A node configured to persist without a store: its durable writes are
                // never acknowledged (never falsely).
                None => tracing::debug!(node = self.node.id().0, batch = r.id, "no store: batch dropped"),
            }
        }
        while let Some(t) = self.node.poll_transmit() {
            match &mut self.shim {
                Some(shim) => shim.push(now, t.dst, t.datagram),
                None => self.transport.send(t.dst, t.class, t.datagram),
            }
        }
        if let Some(shim) = &mut self.shim {
            while let Some((dst, d)) = shim.pop_due(now) {
                let class = class_of(&d).unwrap_or(MessageClass::Control);
                self.transport.send(dst, class, d);
            }
        }
        while let Some(e) = self.node.poll_event() {
            self.on_node_event(e);
        }
    }

    /// A store batch is done: the node acknowledges the durable writes it held.
    fn on_persisted(&mut self, (id, res, _): Completion) -> Result<(), NetError> {
        match res {
            Ok(()) => {
                let now = self.clock.now();
                self.node.handle_persisted(now, id);
                Ok(())
            }
            Err(e) => {
                tracing::error!(node = self.node.id().0, batch = id, error = %e, "the store failed: stopping");
                Err(NetError::Store(e))
            }
        }
    }

    fn emit(&mut self, kind: EventKind) {
        let e = NodeEvent {
            unix_ms: unix_ms(),
            at: self.clock.now(),
            kind,
        };
        if self.events.try_send(e).is_err() {
            self.stats.events_dropped += 1;
        }
    }

    /// Tells the transport what the membership sees now, for its refusals.
    fn share_view(&self) {
        if let Some(v) = self.node.view() {
            self.transport.set_view(v);
        }
    }

    fn on_node_event(&mut self, e: Event) {
        if let Event::Players { from, payload } = &e {
            if let Some(p) = &mut self.players {
                let now = self.clock.now();
                p.host.node_message(now, *from, payload, &mut self.node);
            }
            return;
        }
        if matches!(e, Event::MemberUp(_) | Event::MemberDown(..) | Event::Rejoined(_)) {
            self.share_view();
        }
        match &e {
            Event::MemberUp(m) => {
                self.transport.set_addr(m.node, m.addr);
                tracing::info!(node = self.node.id().0, member = m.node.0, generation = m.generation, addr = %m.addr, members = self.node.members().len() + 1, "member up");
            }
            Event::MemberDown(m, why) => {
                // A member forgotten by this node's fresh start is no member declared down:
                // refused, it would renew in turn if it holds this node live.
                if *why != Departure::Forgotten {
                    self.transport.forget(m.node, u64::from(m.generation));
                }
                let (node, member, members) = (self.node.id().0, m.node.0, self.node.members().len() + 1);
                match why {
                    Departure::Left => {
                        tracing::info!(node, member, generation = m.generation, members, "member left")
                    }
                    Departure::Failed => {
                        tracing::warn!(node, member, generation = m.generation, members, "member failed")
                    }
                    Departure::Forgotten => {
                        tracing::debug!(
                            node,
                            member,
                            generation = m.generation,
                            members,
                            "member forgotten by a fresh start"
                        )
                    }
                }
            }
            Event::Joined => tracing::info!(node = self.node.id().0, "joined the cluster"),
            Event::Rejoined(m) => {
                self.transport.set_generation(u64::from(m.generation));
                tracing::warn!(
                    node = self.node.id().0,
                    generation = m.generation,
                    "declared failed while alive (a partition, heavy loss, or round trips longer than \
                     the membership profile's probe wait: use the `wan` profile across a WAN): \
                     dropped everything, rejoining as a new generation"
                );
            }
            Event::Adopted { dead, .. } => self.logs.adopted(*dead),
            Event::OrphanDropped { dead, .. } => self.logs.orphan_dropped(*dead),
            Event::Drained { left_behind } => {
                self.drained = Some(*left_behind);
                tracing::info!(
                    node = self.node.id().0,
                    left_behind,
                    "drained and left the cluster"
                );
            }
            Event::Rejected { reason, .. } => self.logs.rejected(reason.to_string()),
            Event::Migration(worldmesh_node::MigrationEvent::Refused { target, reason, .. }) => {
                tracing::debug!(
                    node = self.node.id().0,
                    target = target.0,
                    ?reason,
                    "migration refused"
                );
            }
            _ => {}
        }
        self.emit(EventKind::Node(e));
    }

    fn on_transport(&mut self, ev: TransportEvent) {
        match ev {
            TransportEvent::Datagram { from, bytes } => {
                let now = self.clock.now();
                self.node.handle_datagram(now, from, &bytes);
            }
            TransportEvent::PeerUp(h) => {
                tracing::debug!(node = self.node.id().0, peer = h.hello.node.0, generation = h.hello.generation, remote = %h.remote, "connection up");
                self.emit(EventKind::PeerUp {
                    node: h.hello.node,
                    generation: h.hello.generation,
                    remote: h.remote,
                });
            }
            TransportEvent::PeerLost {
                node,
                generation,
                reason,
            } => {
                tracing::debug!(node = self.node.id().0, peer = node.0, generation, %reason, "connection lost");
                self.emit(EventKind::PeerLost {
                    node,
                    generation,
                    reason,
                });
            }
            TransportEvent::DeclaredDown {
                by,
                addr,
                generation,
                view,
            } => {
                // The node renews only if it still runs as that generation (a refusal of
                // a dial made before a renewal changes nothing), and not if its side of a
                // split wins.
                if generation == u64::from(self.node.generation()) {
                    tracing::debug!(node = self.node.id().0, by = ?by.map(|n| n.0), %addr, generation, ?view, "a member holds this generation declared down");
                    let now = self.clock.now();
                    self.node
                        .handle_declared_down(now, self.node.generation(), by, view);
                }
            }
            TransportEvent::Refused {
                addr,
                node,
                reason,
                detail,
            } => {
                self.logs.refused(reason, &addr, &detail);
                self.emit(EventKind::Refused {
                    addr,
                    node,
                    reason,
                    detail,
                });
            }
        }
    }

    fn on_command(&mut self, c: Command<O>) {
        self.stats.commands += 1;
        let now = self.clock.now();
        match c {
            Command::Spawn { object, reply } => {
                let id = self.node.spawn(now, object);
                if let Some(r) = reply {
                    let _ = r.send(id);
                }
            }
            Command::Write { target, write } => self.node.write(now, target, &write),
            Command::Drain => {
                tracing::info!(
                    node = self.node.id().0,
                    primaries = self.node.store().primary_count(),
                    "draining"
                );
                self.node.drain(now);
            }
            Command::Stop => {}
            Command::Snapshot { from, reply } => {
                let origin = self.node.stats().origin;
                let from_s = from.map_or(0.0, |t| t.saturating_since(origin).as_secs_f64());
                let to_s = now.saturating_since(origin).as_secs_f64();
                let mut driver = self.stats.clone();
                if let Some(s) = &self.shim {
                    driver.shim_dropped = s.dropped;
                }
                let _ = reply.send(Snapshot {
                    at: now,
                    summary: self.node.summary_window(now, from_s, to_s),
                    transport: self.transport.stats(),
                    driver,
                    primaries: self.node.store().primary_ids(),
                    members: self.node.members().to_vec(),
                    players: self.players.as_ref().map(Players::outcome),
                    frame_times: self.frame_times.summary(),
                });
            }
        }
    }

    fn join(&mut self, hellos: Vec<crate::hello::PeerHello>) {
        let seeds: Vec<Member> = hellos
            .iter()
            .map(|h| Member {
                node: h.hello.node,
                generation: u32::try_from(h.hello.generation).unwrap_or(u32::MAX),
                addr: h.hello.advertise,
            })
            .collect();
        self.stats.seeds_reached = seeds.len() as u64;
        for s in &seeds {
            self.transport.set_addr(s.node, s.addr);
        }
        tracing::info!(node = self.node.id().0, seeds = ?seeds.iter().map(|s| s.node.0).collect::<Vec<_>>(), "seeds reached, joining");
        let now = self.clock.now();
        self.node.join(now, &seeds);
        self.emit(EventKind::SeedsReached(seeds));
    }
}

/// Log lines that could flood, summarised: transport refusals (the first of each reason
/// in a period is logged with its detail, the rest counted), node rejections, and
/// adoptions (one line per failed member per second).
struct Logs {
    me: NodeId,
    period: Duration,
    /// Per refusal reason: when its last line was written, and how many since.
    refusals: BTreeMap<RefusalReason, (Option<Instant>, u64)>,
    rejections: BTreeMap<String, u64>,
    last_rejection_line: Option<Instant>,
    adopted: BTreeMap<NodeId, (u64, u64)>,
}

impl Logs {
    fn new(me: NodeId, period: Duration) -> Self {
        Self {
            me,
            period,
            refusals: BTreeMap::new(),
            rejections: BTreeMap::new(),
            last_rejection_line: None,
            adopted: BTreeMap::new(),
        }
    }

    /// Logs a refused connection, at most once a period per reason. A stale generation is
    /// the normal end of a member's life — its last datagrams after a drain's leave, or a
    /// node declared down that will come back as a new generation, both already logged as
    /// "member left" or "member failed" — so it is logged at info level; every other
    /// reason (a certificate, an unknown node, different world settings) is a warning.
    fn refused(&mut self, reason: RefusalReason, addr: &SocketAddr, detail: &str) {
        let now = Instant::now();
        let e = self.refusals.entry(reason).or_insert((None, 0));
        if e.0.is_none_or(|t| now.duration_since(t) >= self.period) {
            if matches!(
                reason,
                RefusalReason::StaleGeneration | RefusalReason::DeclaredDown
            ) {
                tracing::info!(node = self.me.0, %reason, %addr, detail, suppressed_before = e.1, "connection refused");
            } else {
                tracing::warn!(node = self.me.0, %reason, %addr, detail, suppressed_before = e.1, "connection refused");
            }
            *e = (Some(now), 0);
        } else {
            e.1 += 1;
        }
    }

    fn rejected(&mut self, reason: String) {
        *self.rejections.entry(reason).or_default() += 1;
    }

    fn adopted(&mut self, dead: NodeId) {
        self.adopted.entry(dead).or_default().0 += 1;
    }

    fn orphan_dropped(&mut self, dead: NodeId) {
        self.adopted.entry(dead).or_default().1 += 1;
    }

    /// Once a second: adoption lines; rejections and suppressed refusals once a period.
    fn flush(&mut self, now: Instant) {
        for (dead, (adopted, dropped)) in std::mem::take(&mut self.adopted) {
            tracing::info!(
                node = self.me.0,
                failed = dead.0,
                adopted,
                dropped,
                "adopted orphans of a failed member"
            );
        }
        if self
            .last_rejection_line
            .is_none_or(|t| now.duration_since(t) >= self.period)
        {
            self.flush_periodic(now);
        }
    }

    fn flush_periodic(&mut self, now: Instant) {
        if !self.rejections.is_empty() {
            let r = std::mem::take(&mut self.rejections);
            let total: u64 = r.values().sum();
            tracing::info!(node = self.me.0, total, by_reason = ?r, "refused datagrams");
            self.last_rejection_line = Some(now);
        }
        for (reason, (_, n)) in &mut self.refusals {
            if *n > 0 {
                tracing::warn!(node = self.me.0, %reason, count = *n, "more connections refused");
                *n = 0;
            }
        }
    }

    fn flush_all(&mut self) {
        let now = Instant::now();
        self.flush(now);
        self.flush_periodic(now);
    }
}
