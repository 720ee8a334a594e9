//! The embeddable server: one real node of a worldmesh world running a game's objects.
//!
//! [`Server::builder`] takes the game (its object type and world), the node's settings
//! ([`NodeSettings`], usually from a TOML file: [`ServerBuilder::config`]) and what only
//! the game knows — the space its objects live in (for the locator), the objects a founder
//! creates, whether players connect. [`ServerBuilder::start`] binds the transport, recovers
//! the store, joins the cluster and returns a [`Running`] node: a [`Control`] to spawn
//! objects, inject writes, drain or stop from any task, and its events. [`Running::begin`]
//! spawns the initial objects; [`Running::serve`] runs until a stop, a drain, a signal or a
//! time limit and returns the node and its [`NodeReport`]. [`ServerBuilder::run`] does all
//! of that on a runtime of its own.
//!
//! Everything the node does is the sans-IO `worldmesh_node::Node` the simulator also runs
//! (BRIEF §2); this module only wires it to real sockets, a real store and real time.

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::task::JoinHandle;
use worldmesh_client::{Playable, TokenKey};
use worldmesh_core::wire::PROTOCOL_VERSION;
use worldmesh_core::{Aabb, NodeId, ObjectId, Time};
use worldmesh_locator::{Locator, LocatorSettings};
use worldmesh_net::hello::Hello;
use worldmesh_net::metrics::SnapshotCell;
use worldmesh_net::metrics_server::{MetricsServer, MetricsServerConfig};
use worldmesh_net::pki::NodeIdentity;
use worldmesh_net::players::{PlayerListener, PlayerListenerConfig};
use worldmesh_net::quic::{QuicConfig, QuicTransport};
use worldmesh_net::transport::Transport;
use worldmesh_net::udp::UdpTransport;
use worldmesh_net::view::ViewCell;
use worldmesh_net::{
    Clock, Control, DelayShim, DriverOptions, EventKind, JoinPolicy, NetError, NodeEvent, NodeHandle,
    Players, RunOutcome, StopReason,
};
use worldmesh_node::drain::DrainConfig;
use worldmesh_node::sessions::{SessionConfig, Sessions};
use worldmesh_node::{Event, Mode, Node, NodeConfig, PersistConfig, RecoveryReport};
use worldmesh_replica::GameObject;
use worldmesh_store::Store;

use crate::config::{FileConfig, NodeConfigError, NodeSettings, Overrides, PlayerSettings, TransportKind};
use crate::report::{NodeReport, PersistReport, PlayersReport, Ready, Started, cpu_seconds};

/// Object-update datagrams fit one QUIC DATAGRAM frame at QUIC's minimum MTU (1200-byte
/// packets leave 1162 bytes for a datagram with 4- to 8-byte connection ids): larger ones
/// would ride the reliable stream.
const MAX_UPDATE_PAYLOAD: usize = 1150;
/// Largest connect-token key file read.
const MAX_KEY_FILE: u64 = 4096;

/// Why a server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The settings are missing or do not fit together.
    #[error(transparent)]
    Config(#[from] NodeConfigError),
    /// The transport, the certificates, the store's thread or the run itself failed.
    #[error(transparent)]
    Net(#[from] NetError),
    /// The node's certificate, key or CA could not be loaded.
    #[error("certificates: {0}")]
    Identity(#[from] worldmesh_net::pki::PkiError),
    /// A socket could not be bound.
    #[error(transparent)]
    Transport(#[from] worldmesh_net::transport::TransportError),
    /// The metrics endpoint could not be served.
    #[error(transparent)]
    Metrics(#[from] worldmesh_net::metrics_server::MetricsError),
    /// The WAN shim's latency source is unusable.
    #[error(transparent)]
    Latency(#[from] worldmesh_core::LatencyError),
    /// The data directory cannot be created.
    #[error("cannot create the data directory {}: {io}", path.display())]
    DataDir {
        /// The directory.
        path: PathBuf,
        /// What the OS said.
        io: std::io::Error,
    },
    /// The store cannot be opened or read (the message names the file).
    #[error(transparent)]
    Store(#[from] worldmesh_store::StoreError),
    /// The store's contents cannot be installed in the node.
    #[error("cannot recover from {}: {source}", path.display())]
    Recover {
        /// The store file.
        path: PathBuf,
        /// Why.
        source: worldmesh_node::RecoverError,
    },
    /// The locator settings or geometry are unusable.
    #[error("locator: {0}")]
    Locator(String),
    /// The settings name a locator but the game gave no [`Space`].
    #[error("the locator `{0}` needs the game's space: call ServerBuilder::space")]
    NoSpace(String),
    /// The connect-token key file is unusable.
    #[error("{}: {why}", path.display())]
    PlayerKey {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// The settings open a player port but the game was built without players.
    #[error(
        "the settings open a player port ([players]) but this game takes no players: call ServerBuilder::players"
    )]
    NoPlayers,
    /// The seeds answered but the node did not join within the time allowed.
    #[error("reached the seeds but did not join the cluster within {0:?}")]
    NotJoined(Duration),
    /// The run ended before the node joined.
    #[error("the node stopped before it joined")]
    StoppedBeforeJoin,
    /// The runtime could not be built, or the run's task failed.
    #[error("runtime: {0}")]
    Runtime(String),
    /// [`ServerBuilder::start`] without settings.
    #[error("no settings: call ServerBuilder::config or ServerBuilder::settings")]
    NoSettings,
}

/// Where the game's objects live, for the area-of-interest locator (paper `000` §3:
/// the range DHT partitions this space). Not needed with the `broadcast` locator.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Space {
    /// The bounds of every object position.
    pub bounds: Aabb,
    /// Regions of the hashed DHT locator (about the number of players).
    pub regions: u32,
    /// The fastest an object moves, units per second (subscriptions are swept ahead by it).
    pub max_speed: f32,
}

/// The primaries a recovery installed at once, and its report.
type Recovered = (Vec<ObjectId>, RecoveryReport);
/// Makes a node's player port and session table for a playable game.
type PlayersFactory<O> = fn(&PlayerSettings, NodeId, &NodeIdentity) -> Result<Players<O>, ServerError>;
/// The objects a founder creates.
type Initial<O> = Box<dyn FnOnce(NodeId) -> Vec<O> + Send>;

/// The entry point: `Server::builder().game::<MyObject>(world)…`.
#[derive(Clone, Copy, Debug)]
pub struct Server;

impl Server {
    /// Starts building a server; name the game next ([`Builder::game`]).
    pub fn builder() -> Builder {
        Builder
    }
}

/// A server without a game yet.
#[derive(Clone, Copy, Debug)]
pub struct Builder;

impl Builder {
    /// The game: its object type and the world every object's `think` reads.
    pub fn game<O: GameObject>(self, world: Arc<O::World>) -> ServerBuilder<O> {
        ServerBuilder {
            world,
            settings: None,
            space: None,
            initial: None,
            players: None,
            dashboard_world: None,
        }
    }
}

/// A server for the game `O`, being configured.
pub struct ServerBuilder<O: GameObject> {
    world: Arc<O::World>,
    settings: Option<NodeSettings>,
    space: Option<Space>,
    initial: Option<Initial<O>>,
    players: Option<PlayersFactory<O>>,
    dashboard_world: Option<String>,
}

impl<O: GameObject> ServerBuilder<O> {
    /// The node's settings, resolved already (e.g. a file with command-line overrides).
    #[must_use]
    pub fn settings(mut self, settings: NodeSettings) -> Self {
        self.settings = Some(settings);
        self
    }

    /// The node's settings from a TOML file ([`crate::config`] describes the format).
    ///
    /// # Errors
    /// The file cannot be read, does not parse, or its settings do not fit together.
    pub fn config(self, path: impl AsRef<Path>) -> Result<Self, ServerError> {
        let path = path.as_ref();
        let file = FileConfig::load(path)?;
        let settings = crate::config::resolve(file, Overrides::default(), &path.display().to_string())?;
        Ok(self.settings(settings))
    }

    /// The space the game's objects live in (needed by the `rangedht` and `dht` locators).
    #[must_use]
    pub fn space(mut self, space: Space) -> Self {
        self.space = Some(space);
        self
    }

    /// The objects this node creates when it founds the world (it is a founder and its
    /// store holds no previous run), given its id.
    #[must_use]
    pub fn initial_objects(mut self, f: impl FnOnce(NodeId) -> Vec<O> + Send + 'static) -> Self {
        self.initial = Some(Box::new(f));
        self
    }

    /// The world as the live dashboard draws it (a `worldmesh_dashboard::WorldInfo` as
    /// JSON), served next to the metrics: without it the node serves no map view.
    #[must_use]
    pub fn dashboard_world(mut self, json: String) -> Self {
        self.dashboard_world = Some(json);
        self
    }

    /// Starts the node: binds the transport (and the player port, the metrics endpoint),
    /// recovers the store, starts the run and waits until the node joined the cluster
    /// through its seeds (if it has any to dial).
    ///
    /// # Errors
    /// Any [`ServerError`]: settings, certificates, sockets, store, join.
    pub async fn start(self) -> Result<Running<O>, ServerError> {
        let s = self.settings.clone().ok_or(ServerError::NoSettings)?;
        let me = NodeId(s.id);
        let store = open_store(&s)?;
        let generation = claim_generation(s.id, store.as_ref()).await?;
        let hello = Hello {
            protocol: PROTOCOL_VERSION,
            node: me,
            generation: u64::from(generation),
            advertise: s.advertise,
            world: s.world.hello_list(),
        };
        if s.players.is_some() && self.players.is_none() {
            return Err(ServerError::NoPlayers);
        }
        match s.transport {
            TransportKind::Quic => {
                let tls = s.tls.clone().ok_or_else(|| {
                    NodeConfigError::Invalid("the QUIC transport needs certificates ([tls])".into())
                })?;
                let identity = NodeIdentity::load(&tls.cert, &tls.key, &tls.ca, me)?;
                let players = match (&s.players, self.players) {
                    (Some(p), Some(make)) => Some(make(p, me, &identity)?),
                    _ => None,
                };
                let t = QuicTransport::bind(quic_config(&s, identity, hello))?;
                self.launch(s, generation, store, t, players).await
            }
            TransportKind::UdpInsecure => {
                tracing::warn!(
                    "INSECURE transport udp-insecure: datagrams are trusted by source address, unauthenticated \
                     and unencrypted; a benchmark baseline only"
                );
                let t = UdpTransport::bind_with_hello(s.listen, hello).await?;
                self.launch(s, generation, store, t, None).await
            }
        }
    }

    /// Builds the node, recovers it, starts the driver and waits for the join.
    async fn launch<T: Transport + 'static>(
        self,
        s: NodeSettings,
        generation: u32,
        store: Option<Store>,
        transport: T,
        players: Option<Players<O>>,
    ) -> Result<Running<O>, ServerError> {
        let me = NodeId(s.id);
        let player_addr = players.as_ref().map(|p| p.listener.local_addr());
        let local = transport.local_addr();
        let mut advertise = s.advertise;
        if advertise.port() == 0 {
            advertise.set_port(local.port());
        }
        let clock = Clock::new(s.world.epoch_ms);
        let mut node = build_node(&s, generation, advertise, clock.now(), self.world, self.space)?;
        let recovery = match &store {
            Some(st) => recover_store(&s, st, &mut node, clock.now())?,
            None => None,
        };
        let (recovered, recovery) = recovery.unzip();
        let mut opts = DriverOptions::new(clock);
        opts.store = store;
        opts.shim = shim(&s)?;
        opts.seeds = s.contacts().to_vec();
        opts.join = JoinPolicy {
            timeout: s.join_timeout,
            ..JoinPolicy::default()
        };
        let dials = opts.seeds.iter().any(|a| *a != local && *a != advertise);
        tracing::info!(
            node = s.id,
            listen = %local,
            advertise = %advertise,
            version = env!("CARGO_PKG_VERSION"),
            protocol = PROTOCOL_VERSION,
            digest = %s.digest(),
            transport = s.transport.name(),
            generation,
            founder = s.is_founder(),
            locator = %s.world.locator,
            founders = s.world.founders,
            membership = %s.membership_profile,
            membership_origin = %s.membership_origin,
            data_dir = ?s.data_dir,
            metrics = ?s.metrics,
            "worldmesh node starting"
        );
        if let Some(a) = player_addr {
            tracing::info!(node = s.id, players = %a, "player port open");
        }
        // The metrics endpoint, bound before the run so a taken address fails the start.
        let metrics_server = match s.metrics {
            Some(addr) => {
                let cell = SnapshotCell::new();
                // The live dashboard's feed on the same endpoint: views built only while
                // someone asks, at most 10 a second.
                let view = self
                    .dashboard_world
                    .map(|w| ViewCell::new(w, Duration::from_millis(100)));
                opts.view.clone_from(&view);
                let srv = MetricsServer::start_with_view(MetricsServerConfig::new(addr), cell.clone(), view)?;
                tracing::info!(node = s.id, addr = %srv.local_addr(), "metrics at http://{}/metrics", srv.local_addr());
                opts.metrics = Some(cell);
                Some(srv)
            }
            None => None,
        };
        let metrics_addr = metrics_server.as_ref().map(MetricsServer::local_addr);
        let (mut handle, driver) = worldmesh_net::start_with_players(node, transport, opts, players);
        // The transport's type stops here: the task hands back what the report needs.
        let task = tokio::spawn(async move {
            let out: RunOutcome<O, T> = driver.await?;
            let RunOutcome {
                node,
                transport,
                transport_stats,
                driver,
                reason,
                ended,
                players,
                frame_times,
                persist,
            } = out;
            transport.close().await;
            Ok(Ended {
                node,
                transport_stats,
                driver,
                reason,
                ended,
                players,
                frame_times,
                persist,
            })
        });
        let mut running = Running {
            ready: Ready {
                node: me,
                addr: advertise,
                generation,
                members: 1,
                players: player_addr,
                metrics: metrics_addr,
            },
            recovered,
            recovery,
            initial: self.initial,
            begun: None,
            backlog: Vec::new(),
            metrics_server,
            task: Some(task),
            handle: None,
            settings: s,
        };
        if dials {
            running.wait_joined(&mut handle).await?;
        }
        running.ready.members = handle.snapshot(None).await.map_or(1, |sn| sn.members.len() + 1);
        running.handle = Some(handle);
        tracing::info!(node = me.0, members = running.ready.members, "ready");
        Ok(running)
    }

    /// Starts the node on a runtime of its own, spawns the initial objects and serves
    /// until SIGTERM/SIGINT (a graceful drain) or SIGQUIT (a stop that keeps everything
    /// here and in the store).
    ///
    /// # Errors
    /// See [`ServerBuilder::start`] and [`Running::serve`].
    pub fn run(self) -> Result<Finished<O>, ServerError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| ServerError::Runtime(e.to_string()))?;
        rt.block_on(async move {
            let mut running = self.start().await?;
            running.begin().await;
            running.serve(ServeOptions::default(), |_| {}).await
        })
    }
}

impl<O: Playable> ServerBuilder<O> {
    /// Admit players on the port the settings give (`[players]`): connect tokens checked
    /// with the settings' key, sessions, assignment and placement as configured (QUIC only).
    #[must_use]
    pub fn players(mut self) -> Self {
        self.players = Some(make_players::<O>);
        self
    }
}

/// How [`Running::serve`] ends besides a stop through the [`Control`].
#[derive(Clone, Copy, Debug)]
pub struct ServeOptions {
    /// Stop after this long.
    pub duration: Option<Duration>,
    /// Start a graceful drain after this long.
    pub drain_after: Option<Duration>,
    /// SIGTERM and SIGINT drain (a second one stops), SIGQUIT stops without a drain.
    pub signals: bool,
}

impl Default for ServeOptions {
    /// No time limit; signals handled.
    fn default() -> Self {
        Self {
            duration: None,
            drain_after: None,
            signals: true,
        }
    }
}

/// What the run's task hands back (the transport closed).
struct Ended<O: GameObject> {
    node: Node<O>,
    transport_stats: worldmesh_net::transport::TransportStats,
    driver: worldmesh_net::DriverStats,
    reason: StopReason,
    ended: Time,
    players: Option<worldmesh_net::driver::PlayersOutcome>,
    frame_times: worldmesh_net::metrics::FrameTimeSummary,
    persist: Option<worldmesh_net::PersistTimes>,
}

/// When the run began, for the report's window.
#[derive(Clone, Copy, Debug)]
struct Begun {
    at: Time,
    unix_ms: u64,
    cpu: f64,
}

/// A node that has started (and joined, if it had seeds to dial).
pub struct Running<O: GameObject> {
    settings: NodeSettings,
    ready: Ready,
    recovered: Option<Vec<ObjectId>>,
    recovery: Option<RecoveryReport>,
    initial: Option<Initial<O>>,
    begun: Option<Begun>,
    /// Events received while waiting for the join, delivered first by `serve`.
    backlog: Vec<NodeEvent>,
    /// Kept alive for the run.
    metrics_server: Option<MetricsServer>,
    task: Option<JoinHandle<Result<Ended<O>, NetError>>>,
    handle: Option<NodeHandle<O>>,
}

impl<O: GameObject> Running<O> {
    /// Bound, joined: where the others and the players reach this node.
    pub fn ready(&self) -> &Ready {
        &self.ready
    }

    /// The settings it runs with.
    pub fn settings(&self) -> &NodeSettings {
        &self.settings
    }

    /// The primaries recovered from the store (`None`: no store, or a fresh one).
    pub fn recovered(&self) -> Option<&[ObjectId]> {
        self.recovered.as_deref()
    }

    /// What the recovery from the store installed, and the last checkpoint it found
    /// (`None`: no store, or a fresh one).
    pub fn recovery(&self) -> Option<&RecoveryReport> {
        self.recovery.as_ref()
    }

    /// Commands to the node from any task: spawn, write, drain, stop, snapshot.
    ///
    /// # Panics
    /// Never: the handle is set by `start` and only taken by `serve`, which consumes self.
    pub fn control(&self) -> Control<O> {
        self.handle
            .as_ref()
            .map(NodeHandle::control)
            .expect("set by start")
    }

    /// Begins the run: a founder whose store held nothing spawns the game's initial
    /// objects. Returns what the `WORLDMESH-STARTED` line reports.
    pub async fn begin(&mut self) -> Started {
        let control = self.control();
        let at = control.snapshot(None).await.map_or(Time::ZERO, |sn| sn.at);
        let begun = Begun {
            at,
            unix_ms: worldmesh_net::driver::unix_ms(),
            cpu: cpu_seconds().unwrap_or(0.0),
        };
        self.begun = Some(begun);
        let mut primaries = Vec::new();
        if self.settings.is_founder()
            && self.recovered.is_none()
            && let Some(initial) = self.initial.take()
        {
            for o in initial(self.ready.node) {
                if let Some(id) = control.spawn(o).await {
                    primaries.push(id);
                }
            }
        }
        tracing::info!(node = self.ready.node.0, spawned = primaries.len(), "run started");
        Started {
            node: self.ready.node,
            unix_ms: begun.unix_ms,
            primaries,
            recovered: self.recovered.clone().unwrap_or_default(),
        }
    }

    /// Serves until the run ends: a stop or a finished drain (through the [`Control`]),
    /// the options' time limits, or a signal. Every event goes to `on_event` as it comes.
    ///
    /// # Errors
    /// The run failed (e.g. its store failed: the node never acknowledges what is not on
    /// disk), or its task panicked.
    pub async fn serve(
        mut self,
        opts: ServeOptions,
        mut on_event: impl FnMut(&NodeEvent),
    ) -> Result<Finished<O>, ServerError> {
        if self.begun.is_none() {
            self.begun = Some(Begun {
                at: Time::ZERO,
                unix_ms: worldmesh_net::driver::unix_ms(),
                cpu: cpu_seconds().unwrap_or(0.0),
            });
        }
        for e in std::mem::take(&mut self.backlog) {
            on_event(&e);
        }
        let mut handle = self.handle.take().expect("set by start");
        let mut task = self.task.take().expect("set by start");
        let id = self.settings.id;
        let drain_deadline = self.settings.drain_deadline;
        let end = opts.duration.map(|d| tokio::time::Instant::now() + d);
        let drain_at = opts.drain_after.map(|d| tokio::time::Instant::now() + d);
        let mut draining: Option<tokio::time::Instant> = None;
        let mut signals = if opts.signals { Some(Signals::new()?) } else { None };
        let ended = loop {
            let drain_over = draining.map(|t| t + drain_deadline + Duration::from_secs(5));
            tokio::select! {
                e = handle.events.recv() => match e {
                    Some(e) => on_event(&e),
                    None => break None,
                },
                () = sleep_opt(end) => {
                    handle.stop().await;
                    break None;
                }
                () = sleep_opt(drain_at), if draining.is_none() => {
                    start_drain(&handle, &mut draining, "drain_after").await;
                }
                sig = next_signal(&mut signals) => {
                    if sig == "SIGQUIT" {
                        // Stop without draining: the objects stay here (and, with a store,
                        // in it: a last checkpoint is taken), for a whole-cluster restart.
                        tracing::info!(node = id, "SIGQUIT: stopping without a drain");
                        handle.stop().await;
                        break None;
                    }
                    if draining.is_none() {
                        start_drain(&handle, &mut draining, sig).await;
                    } else {
                        tracing::warn!(node = id, signal = sig, "second signal: stopping without finishing the drain");
                        handle.stop().await;
                        break None;
                    }
                }
                () = sleep_opt(drain_over) => {
                    tracing::warn!(node = id, "the drain did not finish in time: stopping");
                    handle.stop().await;
                    break None;
                }
                r = &mut task => break Some(r),
            }
        };
        let ended = match ended {
            Some(r) => r,
            None => {
                // Events still queued.
                while let Ok(e) = handle.events.try_recv() {
                    on_event(&e);
                }
                (&mut task).await
            }
        };
        let ended = ended.map_err(|e| ServerError::Runtime(e.to_string()))??;
        Ok(self.finish(ended))
    }

    /// Waits for `Joined`, keeping the events it sees for `serve`.
    async fn wait_joined(&mut self, handle: &mut NodeHandle<O>) -> Result<(), ServerError> {
        let waited = self.settings.join_timeout + Duration::from_secs(5);
        let deadline = tokio::time::Instant::now() + waited;
        let task = self.task.as_mut().expect("set by launch");
        loop {
            tokio::select! {
                e = handle.events.recv() => match e {
                    Some(e) => {
                        let joined = matches!(e.kind, EventKind::Node(Event::Joined));
                        self.backlog.push(e);
                        if joined {
                            return Ok(());
                        }
                    }
                    None => return Err(ServerError::StoppedBeforeJoin),
                },
                r = &mut *task => {
                    return match r {
                        Ok(Err(e)) => Err(e.into()),
                        Ok(Ok(_)) => Err(ServerError::StoppedBeforeJoin),
                        Err(e) => Err(ServerError::Runtime(e.to_string())),
                    };
                }
                () = tokio::time::sleep_until(deadline) => return Err(ServerError::NotJoined(waited)),
            }
        }
    }

    /// The report of a finished run.
    fn finish(self, out: Ended<O>) -> Finished<O> {
        let begun = self.begun.expect("set by serve");
        let s = &self.settings;
        let cpu = cpu_seconds().map_or(0.0, |c| c - begun.cpu);
        let node = &out.node;
        let origin = node.stats().origin;
        let from_s = begun.at.saturating_since(origin).as_secs_f64();
        let to_s = out
            .ended
            .saturating_since(origin)
            .as_secs_f64()
            .max(from_s + 1e-3);
        let summary = node.summary_window(out.ended, from_s, to_s);
        let (stop, left_behind) = match out.reason {
            StopReason::Stopped => ("stopped", 0),
            StopReason::HandleDropped => ("handle_dropped", 0),
            StopReason::Drained { left_behind } => ("drained", left_behind),
        };
        let (transport_refusals, node_rejections, unknown_senders) =
            NodeReport::labels(&out.transport_stats, &summary.rejections);
        let report = NodeReport {
            transport_refusals,
            node_rejections,
            unknown_senders,
            node: summary,
            transport_kind: s.transport.name().into(),
            transport_overhead_bytes: out.transport_stats.overhead_sent_bytes(),
            transport: out.transport_stats,
            driver: out.driver,
            primary_ids: node.store().primary_ids(),
            members: node.members().to_vec(),
            generation: self.ready.generation,
            started_unix_ms: begun.unix_ms,
            ended_unix_ms: worldmesh_net::driver::unix_ms(),
            cpu_seconds: cpu,
            stop: stop.into(),
            left_behind,
            frame_time: out.frame_times,
            players: out.players.map(|p| PlayersReport {
                sessions: p.sessions,
                port: p.port,
                assignment: p.assignment,
            }),
            persist: node.persist_stats().map(|st| PersistReport {
                node: st.clone(),
                store: out.persist.unwrap_or_default(),
            }),
            membership_profile: format!("{} ({})", s.membership_profile, s.membership_origin),
        };
        tracing::info!(
            node = s.id,
            stop,
            left_behind,
            primaries = report.node.primaries,
            replicas = report.node.replicas,
            members = report.members.len() + 1,
            "stopped"
        );
        drop(self.metrics_server);
        Finished {
            node: out.node,
            report,
        }
    }
}

/// A run that ended.
pub struct Finished<O: GameObject> {
    /// The node as it ended (its objects, replicas, statistics).
    pub node: Node<O>,
    /// What `worldmesh node --summary-json` prints.
    pub report: NodeReport,
}

/// This process's generation: a restarted process is a new member, so it must never run
/// as a generation an earlier process of this node used — the others would take it for
/// the dead process (alive until declared down, then refused as a member that left, so
/// the restart never joins: issue 19's crash trials, a restart within the second of the
/// last start), and objects it creates would carry ids the dead one gave out.
///
/// The generation is the next UNIX second (`now + 1`, whole seconds), and with a store,
/// also larger than the last generation claimed there ([`Store::claim_generation`]),
/// durably, before anyone hears of it. Then the node waits until the wall clock has
/// reached its generation before it binds anything (under a second): any later process
/// of this node starts after that moment, so its `now + 1` is larger even without a
/// store — as long as the wall clock does not step back; a store keeps it unique even
/// then (and a generation more than [`MAX_GENERATION_WAIT`] ahead is not waited for).
/// A process the others declared failed while it lived carries on as its generation + 1
/// (membership's renewal): that too trails the clock, since being declared down takes a
/// suspicion timeout (2 s on a LAN) after the join, and with a store the renewal is written
/// there in the node's next batch (`Op::RaiseGeneration`), so the next claim is above it
/// even if renewals came faster than seconds or the clock stepped back.
async fn claim_generation(id: u32, store: Option<&Store>) -> Result<u32, ServerError> {
    let next = u32::try_from(unix_secs_f64().floor() as u64 + 1).unwrap_or(u32::MAX);
    let claim = match store {
        Some(st) => Some(st.claim_generation(next)?),
        None => None,
    };
    let generation = claim.map_or(next, |c| c.generation);
    let wait = f64::from(generation) - unix_secs_f64();
    if wait > 0.0 && wait <= MAX_GENERATION_WAIT.as_secs_f64() {
        tokio::time::sleep(Duration::from_secs_f64(wait)).await;
    }
    tracing::debug!(node = id, generation, previous = ?claim.and_then(|c| c.previous), "generation claimed");
    Ok(generation)
}

/// The longest a starting node waits for its generation's second to begin. A generation
/// further ahead of the wall clock comes from a store written before the clock stepped
/// back: the store keeps it unique, and waiting would only delay the start.
const MAX_GENERATION_WAIT: Duration = Duration::from_secs(3);

/// The wall clock as UNIX seconds.
fn unix_secs_f64() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The QUIC transport's configuration from the settings' `[quic]` tuning.
fn quic_config(s: &NodeSettings, identity: NodeIdentity, hello: Hello) -> QuicConfig {
    let mut qc = QuicConfig::new(s.listen, identity, hello);
    let q = &s.quic;
    if let Some(n) = q.ack_threshold {
        qc.ack_eliciting_threshold = Some(n);
    }
    if let Some(ms) = q.max_ack_delay_ms {
        qc.max_ack_delay = Duration::from_millis(ms);
    }
    // The node never sends a datagram larger than QUIC's minimum (MAX_UPDATE_PAYLOAD), so
    // MTU probes (full-size padded packets, repeated per connection) buy nothing by
    // default; 4-byte connection ids save 4 bytes in every packet.
    qc.mtu_discovery = q.mtu_discovery.unwrap_or(false);
    qc.cid_len = q.cid_len.unwrap_or(4);
    if let Some(ms) = q.idle_timeout_ms {
        qc.idle_timeout = Duration::from_millis(ms);
    }
    if let Some(ms) = q.keep_alive_ms {
        qc.keep_alive = Duration::from_millis(ms);
    }
    qc
}

/// Reads a connect-token key file (64 hex digits; `worldmesh token init`), refusing one
/// larger than 4 KiB.
///
/// # Errors
/// The file cannot be read, is too large, or is not a key.
pub fn load_token_key(path: &Path) -> Result<TokenKey, ServerError> {
    let bad = |why: String| ServerError::PlayerKey {
        path: path.to_owned(),
        why,
    };
    let len = std::fs::metadata(path)
        .map_err(|e| bad(format!("cannot read: {e}")))?
        .len();
    if len > MAX_KEY_FILE {
        return Err(bad(format!("{len} bytes is too large (limit {MAX_KEY_FILE})")));
    }
    let text = std::fs::read_to_string(path).map_err(|e| bad(format!("cannot read: {e}")))?;
    TokenKey::from_hex(&text).map_err(|e| bad(e.to_string()))
}

/// The player port and session table of a playable game.
fn make_players<O: Playable>(
    p: &PlayerSettings,
    me: NodeId,
    identity: &NodeIdentity,
) -> Result<Players<O>, ServerError> {
    let key = load_token_key(&p.key)?;
    let mut cfg = PlayerListenerConfig::new(p.listen);
    cfg.max_connections = p.max.saturating_mul(2);
    let listener = PlayerListener::bind(cfg, identity)?;
    let sc = SessionConfig {
        max_players: p.max,
        ..SessionConfig::default()
    };
    let mut sessions = Sessions::<O>::new(sc, key);
    if p.assign {
        let cfg = worldmesh_node::assignment::AssignmentConfig {
            capacity: p.capacity.unwrap_or(u32::try_from(p.max).unwrap_or(u32::MAX)),
            ..Default::default()
        };
        sessions = sessions.with_assignment(worldmesh_node::assignment::AssignmentAgent::new(me, cfg));
    }
    if p.placement {
        sessions = sessions.with_placement(worldmesh_node::PlacementConfig::default());
    }
    Ok(Players {
        listener,
        host: Box::new(sessions),
    })
}

/// The node every member builds from the settings: its configuration, and its locator
/// (rangedht/dht) over the game's space.
fn build_node<O: GameObject>(
    s: &NodeSettings,
    generation: u32,
    advertise: SocketAddr,
    now: Time,
    world: Arc<O::World>,
    space: Option<Space>,
) -> Result<Node<O>, ServerError> {
    let me = NodeId(s.id);
    let w = &s.world;
    let mut cfg = NodeConfig::new(me, Vec::new(), w.seed);
    cfg.frame_interval = Duration::from_secs_f64(1.0 / w.frame_hz);
    cfg.generation = generation;
    cfg.membership = Some(s.membership.clone());
    cfg.address = Some(advertise);
    cfg.replica.backups = w.backups;
    if s.data_dir.is_some() {
        cfg.persist = Some(PersistConfig {
            checkpoint_every: s.checkpoint_frames,
        });
    }
    cfg.replica.max_payload = MAX_UPDATE_PAYLOAD;
    cfg.drain = DrainConfig {
        deadline: s.drain_deadline,
        ..DrainConfig::default()
    };
    let broadcast = w.locator == "broadcast";
    let loc = LocatorSettings {
        kind: if broadcast {
            "oracle".into()
        } else {
            w.locator.clone()
        },
        range_key: w.range_key.clone(),
        ..LocatorSettings::default()
    };
    loc.validate().map_err(ServerError::Locator)?;
    if !broadcast {
        cfg = cfg.with_mode(Mode::Interest);
        cfg.replica.interest_margin = loc.interest_margin;
        cfg.replica.interest_lead = loc.interest_lead();
    }
    let mut node: Node<O> = Node::new(cfg, world, now);
    if broadcast {
        return Ok(node);
    }
    let space = space.ok_or_else(|| ServerError::NoSpace(w.locator.clone()))?;
    if let Some(mut kc) = loc.build(space.bounds, space.regions.max(1), space.max_speed) {
        // Every member computes the same ring geometry: the founders form the initial ring
        // (evenly placed, without messages); a joiner starts outside and joins through its
        // seed. Key ranges are cut into pieces sized for the founders on every node, so
        // lookups are split alike everywhere.
        kc.chunk_members = w.founders;
        let founders: Vec<NodeId> = (0..w.founders as u32).map(NodeId).collect();
        let mut members = founders.clone();
        if !s.is_founder() {
            members.push(me);
        }
        let ring: &[NodeId] = if s.is_founder() { &founders } else { &[] };
        let l = Locator::new(me, kc, &members, ring, w.seed, now)
            .map_err(|e| ServerError::Locator(e.to_string()))?;
        node.attach_locator(l);
    }
    Ok(node)
}

/// The WAN shim from the settings (`[shim]`), if any.
fn shim(s: &NodeSettings) -> Result<Option<DelayShim>, ServerError> {
    Ok(match (&s.shim_latency, s.shim_loss) {
        (None, 0.0) => None,
        (spec, l) => {
            let matrix = match spec {
                Some(spec) => worldmesh_core::latency::load_spec(spec)?,
                None => worldmesh_core::LatencyMatrix::uniform(1, 0.0),
            };
            // Rows for every founder, and spare ones for joiners, mapped the same way on
            // every member (ids beyond the mapped rows get no delay).
            Some(DelayShim::new(
                matrix,
                s.world.founders.max(256),
                NodeId(s.id),
                s.world.seed,
                l,
            ))
        }
    })
}

/// The node's store in its data directory (created if missing), if it has one.
fn open_store(s: &NodeSettings) -> Result<Option<Store>, ServerError> {
    let Some(dir) = &s.data_dir else {
        return Ok(None);
    };
    std::fs::create_dir_all(dir).map_err(|io| ServerError::DataDir {
        path: dir.clone(),
        io,
    })?;
    Ok(Some(Store::open(dir)?))
}

/// Recovers `node` from its store when the store holds a previous run: the recovered
/// primaries with the recovery's report (`None`: a fresh store).
fn recover_store<O: GameObject>(
    s: &NodeSettings,
    store: &Store,
    node: &mut Node<O>,
    now: Time,
) -> Result<Option<Recovered>, ServerError> {
    let rec = store.load()?;
    if rec.is_empty() {
        tracing::info!(node = s.id, store = %store.path().display(), "new store");
        return Ok(None);
    }
    // A node that joins a running world (`join`) installs what it kept only once the
    // others had time to tell it what they adopted while it was down; founders (a whole
    // world restarting) install it at once.
    let report = if s.join.is_empty() {
        node.recover(now, rec)
    } else {
        node.recover_after_join(
            now,
            rec,
            s.membership.suspect_to_down_after + Duration::from_secs(1),
        )
    }
    .map_err(|source| ServerError::Recover {
        path: store.path().to_owned(),
        source,
    })?;
    let ids = node.store().primary_ids();
    tracing::info!(
        node = s.id,
        store = %store.path().display(),
        durable = report.durable,
        checkpointed = report.checkpointed,
        log_entries = report.log_entries,
        last_checkpoint_frame = report.last_checkpoint.map(|c| c.frame),
        "recovered from the store"
    );
    Ok(Some((ids, report)))
}

async fn start_drain<O: GameObject>(
    handle: &NodeHandle<O>,
    draining: &mut Option<tokio::time::Instant>,
    why: &str,
) {
    tracing::info!(reason = why, "starting a graceful drain");
    handle.drain().await;
    *draining = Some(tokio::time::Instant::now());
}

async fn sleep_opt(t: Option<tokio::time::Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// The next signal, or never without signal handling.
fn next_signal(signals: &mut Option<Signals>) -> Pin<Box<dyn Future<Output = &'static str> + Send + '_>> {
    match signals {
        Some(s) => Box::pin(s.next()),
        None => Box::pin(std::future::pending()),
    }
}

/// SIGTERM and SIGINT (drain), SIGQUIT (stop without a drain).
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    quit: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> Result<Self, ServerError> {
        use tokio::signal::unix::{SignalKind, signal};
        let watch =
            |k, name: &str| signal(k).map_err(|e| ServerError::Runtime(format!("cannot watch {name}: {e}")));
        Ok(Self {
            term: watch(SignalKind::terminate(), "SIGTERM")?,
            int: watch(SignalKind::interrupt(), "SIGINT")?,
            quit: watch(SignalKind::quit(), "SIGQUIT")?,
        })
    }

    async fn next(&mut self) -> &'static str {
        tokio::select! {
            _ = self.term.recv() => "SIGTERM",
            _ = self.int.recv() => "SIGINT",
            _ = self.quit.recv() => "SIGQUIT",
        }
    }
}
