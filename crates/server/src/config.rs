//! `worldmesh node --config node.toml`: the configuration of one real node process.
//!
//! A TOML file gives any subset of the settings; command-line flags override the file;
//! defaults fill the rest. Unknown keys are errors, and every error in the file names the
//! file, the line and column, and the bad value (values are range-checked while they are
//! read, so the TOML parser points at them). Example:
//!
//! ```toml
//! id = 3
//! listen = "0.0.0.0:7000"
//! advertise = "10.0.0.13:7000"     # what the others dial (required with an unspecified IP)
//! seeds = ["10.0.0.10:7000"]       # founders find each other through these
//! # join = ["10.0.0.10:7000"]      # a late joiner: spawns nothing, joins the running world
//! frame_hz = 10.0
//! backups = 2
//! transport = "quic"               # "udp-insecure" only as a benchmark baseline
//! data_dir = "/var/lib/worldmesh"  # the node's store (persistence; off if absent)
//! checkpoint_frames = 10           # Checkpointed objects written every N frames
//! metrics = "127.0.0.1:9100"       # Prometheus metrics at http://ADDR/metrics (off if absent)
//! log_format = "human"             # or "json"
//! join_timeout_s = 30
//! drain_deadline_s = 30
//!
//! [tls]
//! ca = "ca/ca.pem"
//! cert = "node3/node-3.pem"
//! key = "node3/node-3.key"
//!
//! [world]                          # must be equal on every member (compared at the handshake)
//! players = 8                      # players per founder
//! map = "rect"                     # or "sqr"
//! seed = 1
//! locator = "broadcast"            # or "rangedht", "dht"
//! range_key = "x"                  # rangedht: "x", "y" or "hilbert"
//! founders = 8                     # nodes 0..founders create the initial world objects
//! epoch_ms = 1735689600000         # the world's time origin (UNIX ms)
//!
//! [membership]
//! profile = "lan"                  # or "wan"; any field below overrides the profile
//!                                  # (unnamed: "wan" if [shim] latency has RTTs > 80 ms)
//! probe_period_ms = 250
//! suspect_to_down_after_ms = 600
//! suspect_silent_after_ms = 500    # suspect a steadily heard member silent this long (0: off)
//! alone_announce_every_ms = 2000   # knowing no live member, announce itself this often
//!
//! [quic]                           # transport tuning (defaults shown where set)
//! mtu_discovery = false            # every node datagram fits QUIC's minimum packet
//! cid_len = 4
//! # ack_threshold = 10             # QUIC ack-frequency: helps on WAN paths (quinn clamps
//! # max_ack_delay_ms = 100         # the requested delay to the path's RTT)
//!
//! [shim]                           # in-process WAN emulation (tests, demos)
//! latency = "uniform:40"
//! loss = 0.0
//! ```

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Deserializer};
use worldmesh_core::wire::PROTOCOL_VERSION;
use worldmesh_core::{DetRng, NodeId};
use worldmesh_game::config::MapKind;
use worldmesh_node::membership::{Member, Membership, MembershipConfig};

/// The world's default time origin: 2025-01-01T00:00:00Z in UNIX ms. Every member must use
/// the same (it is a world setting), so that timestamps mean the same on every node.
pub const DEFAULT_EPOCH_MS: u64 = 1_735_689_600_000;
/// Largest config file read.
const MAX_CONFIG_FILE: u64 = 1 << 20;

/// Which node-to-node transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum TransportKind {
    /// QUIC with mutual TLS against the cluster CA (production).
    Quic,
    /// INSECURE plain UDP trusting source addresses: the benchmark baseline only.
    UdpInsecure,
}

impl TransportKind {
    /// The name used in files and flags.
    pub fn name(self) -> &'static str {
        match self {
            TransportKind::Quic => "quic",
            TransportKind::UdpInsecure => "udp-insecure",
        }
    }
}

/// Log line format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// One human-readable line per event.
    Human,
    /// One JSON object per line.
    Json,
}

/// The settings every member of a world must share (sent in the handshake's hello and
/// compared key by key).
#[derive(Clone, Debug, PartialEq)]
pub struct WorldSettings {
    /// Players per founder.
    pub players: usize,
    /// Map shape.
    pub map: MapKind,
    /// Seed of the map, the initial objects and every random choice.
    pub seed: u64,
    /// `broadcast`, `rangedht` or `dht`.
    pub locator: String,
    /// `rangedht`: `x`, `y` or `hilbert`.
    pub range_key: String,
    /// Nodes `0..founders` create the initial objects (and size the map).
    pub founders: usize,
    /// The world's time origin, UNIX ms.
    pub epoch_ms: u64,
    /// Frames per second.
    pub frame_hz: f64,
    /// Backups of every primary (rendezvous-ranked members that get every update).
    pub backups: usize,
}

impl WorldSettings {
    /// The settings as the hello carries them (key, value), in a fixed order.
    pub fn hello_list(&self) -> Vec<(String, String)> {
        let map = match self.map {
            MapKind::Rect => "rect",
            MapKind::Sqr => "sqr",
        };
        [
            ("protocol", PROTOCOL_VERSION.to_string()),
            ("players", self.players.to_string()),
            ("map", map.to_string()),
            ("seed", self.seed.to_string()),
            ("locator", self.locator.clone()),
            ("range_key", self.range_key.clone()),
            ("founders", self.founders.to_string()),
            ("epoch_ms", self.epoch_ms.to_string()),
            ("frame_hz", self.frame_hz.to_string()),
            ("backups", self.backups.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect()
    }
}

/// QUIC tuning (the transport's defaults unless set; `[quic]` in the file).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuicTuning {
    /// Ask peers to acknowledge only every this many ack-eliciting packets (QUIC
    /// ack-frequency extension); unset: QUIC's default (every second packet, or after
    /// 25 ms).
    pub ack_threshold: Option<u32>,
    /// With `ack_threshold`: the longest a peer may delay an acknowledgement, ms.
    pub max_ack_delay_ms: Option<u64>,
    /// Probe for a larger path MTU (default off: the node's datagrams fit QUIC's minimum).
    pub mtu_discovery: Option<bool>,
    /// Connection id length, bytes (4..=20; default 4).
    pub cid_len: Option<usize>,
    /// A connection silent this long is dead, ms.
    pub idle_timeout_ms: Option<u64>,
    /// Keep-alive interval, ms.
    pub keep_alive_ms: Option<u64>,
}

/// The player port (`[players]`): where players connect and the key their connect tokens
/// are checked with.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlayerSettings {
    /// UDP address players connect to (QUIC; port 0: any free port).
    pub listen: SocketAddr,
    /// The connect-token key file (64 hex digits; `worldmesh token init`).
    pub key: PathBuf,
    /// Most players at once [default: 4096].
    #[serde(default = "default_max_players")]
    pub max: usize,
    /// Take part in the assignment of players to nodes (paper 002) [default: false].
    #[serde(default)]
    pub assign: bool,
    /// Capacity for the assignment, players [default: `max`].
    #[serde(default)]
    pub capacity: Option<u32>,
    /// Run the placement loop of paper 001 §7.4: move this node's region to the node its
    /// players are nearest to [default: false]. Not together with `assign`.
    #[serde(default)]
    pub placement: bool,
}

fn default_max_players() -> usize {
    4096
}

/// Certificate paths.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsPaths {
    /// The cluster CA certificate (`ca.pem`).
    pub ca: PathBuf,
    /// This node's certificate chain (`node-<ID>.pem`).
    pub cert: PathBuf,
    /// This node's private key (`node-<ID>.key`).
    pub key: PathBuf,
}

/// The effective configuration of a node process.
#[derive(Clone, Debug)]
pub struct NodeSettings {
    /// Node id.
    pub id: u32,
    /// UDP address to bind.
    pub listen: SocketAddr,
    /// Address the others dial (port 0 / unspecified IP: taken from the bound socket).
    pub advertise: SocketAddr,
    /// Seed addresses (founders find each other through them).
    pub seeds: Vec<SocketAddr>,
    /// Join addresses: a late joiner that spawns nothing.
    pub join: Vec<SocketAddr>,
    /// Certificates (required with QUIC).
    pub tls: Option<TlsPaths>,
    /// Transport.
    pub transport: TransportKind,
    /// QUIC tuning.
    pub quic: QuicTuning,
    /// World settings.
    pub world: WorldSettings,
    /// SWIM settings.
    pub membership: MembershipConfig,
    /// The membership profile (`lan` or `wan`) the timing starts from.
    pub membership_profile: String,
    /// Why it is that profile.
    pub membership_origin: ProfileOrigin,
    /// The player port, if the node admits players.
    pub players: Option<PlayerSettings>,
    /// The node's store directory (`DIR/store.redb`): the node persists its primaries
    /// and recovers them at start (issue 19). `None`: nothing persists.
    pub data_dir: Option<PathBuf>,
    /// Frames between checkpoints of `Checkpointed` objects.
    pub checkpoint_frames: u32,
    /// Where to serve Prometheus metrics (`GET /metrics`; `None`: not served).
    pub metrics: Option<SocketAddr>,
    /// Log format.
    pub log_format: LogFormat,
    /// WAN shim latency source.
    pub shim_latency: Option<String>,
    /// WAN shim loss.
    pub shim_loss: f64,
    /// How long to keep trying the seeds.
    pub join_timeout: Duration,
    /// A drain that has not finished after this long leaves anyway.
    pub drain_deadline: Duration,
}

impl NodeSettings {
    /// True if this node creates its share of the initial objects.
    pub fn is_founder(&self) -> bool {
        self.join.is_empty() && (self.id as usize) < self.world.founders
    }

    /// The addresses dialed at start-up.
    pub fn contacts(&self) -> &[SocketAddr] {
        if self.join.is_empty() {
            &self.seeds
        } else {
            &self.join
        }
    }

    /// A short digest of every effective setting (FNV-1a 64 of a canonical rendering),
    /// for the start line: two processes with the same digest run the same configuration.
    pub fn digest(&self) -> String {
        let mut s = String::new();
        let _ = write!(
            s,
            "id={} listen={} advertise={} seeds={:?} join={:?} tls={:?} transport={} world={:?} \
             membership={:?} data_dir={:?} metrics={:?} shim={:?}/{} join_timeout={:?} drain={:?} quic={:?}",
            self.id,
            self.listen,
            self.advertise,
            self.seeds,
            self.join,
            self.tls,
            self.transport.name(),
            self.world.hello_list(),
            self.membership,
            self.data_dir,
            self.metrics,
            self.shim_latency,
            self.shim_loss,
            self.join_timeout,
            self.drain_deadline,
            self.quic
        );
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in s.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        format!("{h:016x}")
    }
}

// ---- the file ------------------------------------------------------------------------

/// A TOML node config file; every field optional (flags and defaults fill in).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    id: Option<u32>,
    listen: Option<SocketAddr>,
    advertise: Option<SocketAddr>,
    #[serde(default, deserialize_with = "addr_list")]
    seeds: Option<Vec<SocketAddr>>,
    #[serde(default, deserialize_with = "addr_list")]
    join: Option<Vec<SocketAddr>>,
    #[serde(default, deserialize_with = "frame_hz")]
    frame_hz: Option<f64>,
    #[serde(default, deserialize_with = "backups")]
    backups: Option<usize>,
    transport: Option<TransportKind>,
    data_dir: Option<PathBuf>,
    #[serde(default, deserialize_with = "checkpoint_frames")]
    checkpoint_frames: Option<u32>,
    metrics: Option<SocketAddr>,
    log_format: Option<LogFormat>,
    #[serde(default, deserialize_with = "secs")]
    join_timeout_s: Option<f64>,
    #[serde(default, deserialize_with = "secs")]
    drain_deadline_s: Option<f64>,
    tls: Option<TlsPaths>,
    players: Option<PlayerSettings>,
    #[serde(default)]
    quic: QuicTuning,
    #[serde(default)]
    world: FileWorld,
    #[serde(default)]
    membership: FileMembership,
    #[serde(default)]
    shim: FileShim,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileWorld {
    #[serde(default, deserialize_with = "players")]
    players: Option<usize>,
    map: Option<MapKind>,
    seed: Option<u64>,
    #[serde(default, deserialize_with = "locator")]
    locator: Option<String>,
    #[serde(default, deserialize_with = "range_key")]
    range_key: Option<String>,
    #[serde(default, deserialize_with = "founders")]
    founders: Option<usize>,
    epoch_ms: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileMembership {
    #[serde(default, deserialize_with = "profile")]
    profile: Option<String>,
    probe_period_ms: Option<u64>,
    probe_rtt_ms: Option<u64>,
    indirect_probes: Option<usize>,
    suspect_to_down_after_ms: Option<u64>,
    max_transmissions: Option<u8>,
    gossip_members: Option<usize>,
    gossip_every_ms: Option<u64>,
    announce_every_ms: Option<u64>,
    alone_announce_every_ms: Option<u64>,
    max_packet: Option<usize>,
    suspect_silent_after_ms: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileShim {
    latency: Option<String>,
    #[serde(default, deserialize_with = "loss")]
    loss: Option<f64>,
}

fn checked<'de, D, T>(d: D, check: impl FnOnce(&T) -> Result<(), String>) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    let v = T::deserialize(d)?;
    check(&v).map_err(serde::de::Error::custom)?;
    Ok(Some(v))
}

fn frame_hz<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    checked(d, |v: &f64| check_frame_hz(*v, "frame_hz"))
}
fn backups<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    checked(d, |v: &usize| check_backups(*v, "backups"))
}
fn checkpoint_frames<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    checked(d, |v: &u32| check_checkpoint_frames(*v, "checkpoint_frames"))
}
fn players<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    checked(d, |v: &usize| check_players(*v, "world.players"))
}
fn founders<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
    checked(d, |v: &usize| check_founders(*v, "world.founders"))
}
fn loss<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    checked(d, |v: &f64| check_loss(*v, "shim.loss"))
}
fn secs<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    checked(d, |v: &f64| {
        if v.is_finite() && *v > 0.0 && *v <= 3600.0 {
            Ok(())
        } else {
            Err(format!("must be in (0, 3600] seconds, got {v}"))
        }
    })
}
fn locator<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    checked(d, |v: &String| one_of(v, &LOCATORS, "world.locator"))
}
fn range_key<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    checked(d, |v: &String| {
        one_of(v, &worldmesh_locator::RangeKey::NAMES, "world.range_key")
    })
}
fn profile<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    checked(d, |v: &String| one_of(v, &["lan", "wan"], "membership.profile"))
}
fn addr_list<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<SocketAddr>>, D::Error> {
    checked(d, |v: &Vec<SocketAddr>| {
        if v.len() > 64 {
            Err(format!("at most 64 addresses, got {}", v.len()))
        } else {
            Ok(())
        }
    })
}

/// The locators a node can run.
pub const LOCATORS: [&str; 3] = ["broadcast", "rangedht", "dht"];

fn one_of(v: &str, valid: &[&str], what: &str) -> Result<(), String> {
    if valid.contains(&v) {
        Ok(())
    } else {
        Err(format!(
            "{what} `{v}` is not available; valid: {}",
            valid.join(", ")
        ))
    }
}

/// `frame_hz` in (0, 1000].
pub fn check_frame_hz(v: f64, what: &str) -> Result<(), String> {
    if v.is_finite() && v > 0.0 && v <= 1000.0 {
        Ok(())
    } else {
        Err(format!("{what} must be in (0, 1000], got {v}"))
    }
}
/// `backups` at most 16.
pub fn check_backups(v: usize, what: &str) -> Result<(), String> {
    if v <= 16 {
        Ok(())
    } else {
        Err(format!("{what} must be at most 16, got {v}"))
    }
}
/// `checkpoint_frames` in 1..=100,000.
pub fn check_checkpoint_frames(v: u32, what: &str) -> Result<(), String> {
    if (1..=100_000).contains(&v) {
        Ok(())
    } else {
        Err(format!("{what} must be in 1..=100000, got {v}"))
    }
}
/// `players` at most 100,000.
pub fn check_players(v: usize, what: &str) -> Result<(), String> {
    if v <= 100_000 {
        Ok(())
    } else {
        Err(format!("{what} must be at most 100000, got {v}"))
    }
}
/// `founders` in 1..=4096.
pub fn check_founders(v: usize, what: &str) -> Result<(), String> {
    if (1..=4096).contains(&v) {
        Ok(())
    } else {
        Err(format!("{what} must be in 1..=4096, got {v}"))
    }
}
/// A probability.
pub fn check_loss(v: f64, what: &str) -> Result<(), String> {
    if (0.0..=1.0).contains(&v) {
        Ok(())
    } else {
        Err(format!("{what} must be a probability in [0, 1], got {v}"))
    }
}

/// Why a configuration is unusable.
#[derive(Debug, thiserror::Error)]
pub enum NodeConfigError {
    /// The file cannot be read.
    #[error("{}: cannot read config: {io}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        io: std::io::Error,
    },
    /// The file is larger than 1 MiB.
    #[error("{}: {len} bytes is too large for a node config (limit 1 MiB)", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        len: u64,
    },
    /// The TOML does not parse, has unknown keys, or a value out of range (the message
    /// names the line and column).
    #[error("{}: {message}", path.display())]
    Toml {
        /// The file.
        path: PathBuf,
        /// The parser's message, with line, column and the offending text.
        message: String,
    },
    /// Settings that do not fit together (named by key and flag).
    #[error("{0}")]
    Invalid(String),
}

impl FileConfig {
    /// Reads and parses a config file.
    pub fn load(path: &Path) -> Result<Self, NodeConfigError> {
        let meta = std::fs::metadata(path).map_err(|io| NodeConfigError::Io {
            path: path.to_owned(),
            io,
        })?;
        if meta.len() > MAX_CONFIG_FILE {
            return Err(NodeConfigError::TooLarge {
                path: path.to_owned(),
                len: meta.len(),
            });
        }
        let text = std::fs::read_to_string(path).map_err(|io| NodeConfigError::Io {
            path: path.to_owned(),
            io,
        })?;
        Self::parse(&text, path)
    }

    /// Parses TOML text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, NodeConfigError> {
        toml::from_str(text).map_err(|e| NodeConfigError::Toml {
            path: path.to_owned(),
            message: e.to_string().trim_end().to_owned(),
        })
    }
}

/// Settings given on the command line (each overrides the file).
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    /// `--id`.
    pub id: Option<u32>,
    /// `--listen`.
    pub listen: Option<SocketAddr>,
    /// `--advertise`.
    pub advertise: Option<SocketAddr>,
    /// `--seeds`.
    pub seeds: Option<Vec<SocketAddr>>,
    /// `--join`.
    pub join: Option<Vec<SocketAddr>>,
    /// `--ca`, `--cert`, `--key`.
    pub ca: Option<PathBuf>,
    /// `--cert`.
    pub cert: Option<PathBuf>,
    /// `--key`.
    pub key: Option<PathBuf>,
    /// `--transport`.
    pub transport: Option<TransportKind>,
    /// `--frame-hz`.
    pub frame_hz: Option<f64>,
    /// `--backups`.
    pub backups: Option<usize>,
    /// `--players`.
    pub players: Option<usize>,
    /// `--map`.
    pub map: Option<MapKind>,
    /// `--seed`.
    pub seed: Option<u64>,
    /// `--locator`.
    pub locator: Option<String>,
    /// `--range-key`.
    pub range_key: Option<String>,
    /// `--founders`.
    pub founders: Option<usize>,
    /// `--epoch-ms`.
    pub epoch_ms: Option<u64>,
    /// `--membership`.
    pub membership: Option<String>,
    /// `--data-dir`.
    pub data_dir: Option<PathBuf>,
    /// `--checkpoint-frames`.
    pub checkpoint_frames: Option<u32>,
    /// `--metrics`.
    pub metrics: Option<SocketAddr>,
    /// `--log-format`.
    pub log_format: Option<LogFormat>,
    /// `--latency`.
    pub latency: Option<String>,
    /// `--loss`.
    pub loss: Option<f64>,
    /// `--join-timeout`.
    pub join_timeout: Option<Duration>,
    /// `--drain-deadline`.
    pub drain_deadline: Option<Duration>,
    /// `--player-listen`.
    pub player_listen: Option<SocketAddr>,
    /// `--player-key`.
    pub player_key: Option<PathBuf>,
    /// `--max-players`.
    pub max_players: Option<usize>,
    /// `--assign`.
    pub assign: Option<bool>,
    /// `--capacity`.
    pub capacity: Option<u32>,
    /// `--placement`.
    pub placement: Option<bool>,
}

/// Why a node's membership profile is the one it runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ProfileOrigin {
    /// Named by `--membership` or `[membership] profile`.
    Named,
    /// None named, and the WAN shim emulates round trips of up to `largest_rtt`: `wan`
    /// when that is longer than the `lan` profile waits for a probe's answer.
    Emulated {
        /// The emulated matrix's largest round trip.
        largest_rtt: Duration,
    },
    /// None named and no emulated delay: `lan`.
    Default,
}

impl std::fmt::Display for ProfileOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Named => f.write_str("named"),
            Self::Emulated { largest_rtt } => write!(
                f,
                "none named; emulated round trips up to {:.0} ms",
                largest_rtt.as_secs_f64() * 1000.0
            ),
            Self::Default => f.write_str("none named; no emulated delay"),
        }
    }
}

/// The membership profile of a node that names none: the one its WAN shim's largest
/// round trip calls for ([`MembershipConfig::profile_for`]), `lan` without a shim.
fn unnamed_profile(shim_latency: Option<&str>) -> Result<(String, ProfileOrigin), String> {
    let Some(spec) = shim_latency else {
        return Ok(("lan".into(), ProfileOrigin::Default));
    };
    let matrix = worldmesh_core::latency::load_spec(spec).map_err(|e| e.to_string())?;
    let largest_rtt = matrix.largest_round_trip();
    let profile = MembershipConfig::profile_for(largest_rtt);
    Ok((profile.into(), ProfileOrigin::Emulated { largest_rtt }))
}

fn ms(v: Option<u64>, default: Duration) -> Duration {
    v.map_or(default, Duration::from_millis)
}

/// Resolves flags over the file over the defaults, and checks that the settings fit.
pub fn resolve(file: FileConfig, o: Overrides, source: &str) -> Result<NodeSettings, NodeConfigError> {
    let bad = |m: String| Err(NodeConfigError::Invalid(m));
    let Some(id) = o.id.or(file.id) else {
        return bad(format!("no node id: give --id N or `id = N` in {source}"));
    };
    let Some(listen) = o.listen.or(file.listen) else {
        return bad(format!(
            "no listen address: give --listen ADDR or `listen = \"HOST:PORT\"` in {source}"
        ));
    };
    let advertise = o.advertise.or(file.advertise).unwrap_or(listen);
    if advertise.ip().is_unspecified() {
        return bad(format!(
            "listen address {listen} has an unspecified IP: give the address the others dial with \
             --advertise ADDR or `advertise = \"HOST:PORT\"`"
        ));
    }
    let transport = o.transport.or(file.transport).unwrap_or(TransportKind::Quic);
    let tls = {
        let f = file.tls.clone();
        let ca = o.ca.clone().or(f.as_ref().map(|t| t.ca.clone()));
        let cert = o.cert.clone().or(f.as_ref().map(|t| t.cert.clone()));
        let key = o.key.clone().or(f.as_ref().map(|t| t.key.clone()));
        match (ca, cert, key) {
            (Some(ca), Some(cert), Some(key)) => Some(TlsPaths { ca, cert, key }),
            (None, None, None) => None,
            (ca, cert, key) => {
                let missing: Vec<&str> = [
                    ("ca", ca.is_none()),
                    ("cert", cert.is_none()),
                    ("key", key.is_none()),
                ]
                .into_iter()
                .filter(|(_, m)| *m)
                .map(|(n, _)| n)
                .collect();
                return bad(format!(
                    "incomplete certificate paths: missing {} (give --ca, --cert and --key, or a [tls] table with ca, cert and key)",
                    missing.join(", ")
                ));
            }
        }
    };
    if transport == TransportKind::Quic && tls.is_none() {
        return bad(format!(
            "the QUIC transport needs this node's certificate: give --ca FILE --cert FILE --key FILE \
             or a [tls] table in {source} (make them with `worldmesh ca init` and `worldmesh ca issue --node {id}`)"
        ));
    }
    let w = &file.world;
    let world = WorldSettings {
        players: o.players.or(w.players).unwrap_or(8),
        map: o.map.or(w.map).unwrap_or(MapKind::Rect),
        seed: o.seed.or(w.seed).unwrap_or(1),
        locator: o
            .locator
            .clone()
            .or(w.locator.clone())
            .unwrap_or_else(|| "broadcast".into()),
        range_key: o
            .range_key
            .clone()
            .or(w.range_key.clone())
            .unwrap_or_else(|| "x".into()),
        founders: o.founders.or(w.founders).unwrap_or(1),
        epoch_ms: o.epoch_ms.or(w.epoch_ms).unwrap_or(DEFAULT_EPOCH_MS),
        frame_hz: o.frame_hz.or(file.frame_hz).unwrap_or(10.0),
        backups: o.backups.or(file.backups).unwrap_or(2),
    };
    let join = o.join.clone().or(file.join).unwrap_or_default();
    let seeds = o.seeds.clone().or(file.seeds).unwrap_or_default();
    if join.is_empty() && id as usize >= world.founders {
        return bad(format!(
            "node {id} is not a founder (world.founders = {}): a node that joins a running world \
             needs --join ADDR (or `join = [...]`)",
            world.founders
        ));
    }
    let m = &file.membership;
    let shim_latency = o.latency.clone().or(file.shim.latency.clone());
    let (profile, membership_origin) = match o.membership.clone().or(m.profile.clone()) {
        Some(named) => (named, ProfileOrigin::Named),
        None => match unnamed_profile(shim_latency.as_deref()) {
            Ok(p) => p,
            Err(e) => {
                return bad(format!(
                    "the WAN shim's latency (--latency, or [shim] latency in {source}): {e}"
                ));
            }
        },
    };
    let base = MembershipConfig::named(&profile).unwrap_or_else(MembershipConfig::lan);
    let membership = MembershipConfig {
        probe_period: ms(m.probe_period_ms, base.probe_period),
        probe_rtt: ms(m.probe_rtt_ms, base.probe_rtt),
        indirect_probes: m.indirect_probes.unwrap_or(base.indirect_probes),
        suspect_to_down_after: ms(m.suspect_to_down_after_ms, base.suspect_to_down_after),
        max_transmissions: m.max_transmissions.unwrap_or(base.max_transmissions),
        gossip_members: m.gossip_members.unwrap_or(base.gossip_members),
        gossip_every: ms(m.gossip_every_ms, base.gossip_every),
        announce_every: ms(m.announce_every_ms, base.announce_every),
        alone_announce_every: ms(m.alone_announce_every_ms, base.alone_announce_every),
        max_packet: m.max_packet.unwrap_or(base.max_packet),
        suspect_silent_after: match m.suspect_silent_after_ms {
            Some(0) => None,
            Some(v) => Some(Duration::from_millis(v)),
            None => base.suspect_silent_after,
        },
    };
    // The membership protocol's own checks, on a throwaway instance.
    if let Err(e) = Membership::new(Member::simulated(NodeId(id), 0), &membership, DetRng::new(0)) {
        return bad(format!("[membership] in {source}: {e}"));
    }
    let shim_loss = o.loss.or(file.shim.loss).unwrap_or(0.0);
    let q = &file.quic;
    if q.cid_len.is_some_and(|n| !(4..=20).contains(&n)) {
        return bad(format!(
            "[quic] cid_len in {source} must be in 4..=20, got {:?}",
            q.cid_len
        ));
    }
    if q.ack_threshold.is_some_and(|n| n == 0 || n > 1000)
        || q.max_ack_delay_ms.is_some_and(|n| n == 0 || n > 10_000)
    {
        return bad(format!(
            "[quic] in {source}: ack_threshold must be in 1..=1000 and max_ack_delay_ms in 1..=10000"
        ));
    }
    if let (Some(idle), Some(ka)) = (q.idle_timeout_ms, q.keep_alive_ms)
        && ka >= idle
    {
        return bad(format!(
            "[quic] in {source}: keep_alive_ms ({ka}) must be shorter than idle_timeout_ms ({idle})"
        ));
    }
    let players = {
        let f = file.players.clone();
        let listen = o.player_listen.or(f.as_ref().map(|p| p.listen));
        let key = o.player_key.clone().or(f.as_ref().map(|p| p.key.clone()));
        let max = o
            .max_players
            .or(f.as_ref().map(|p| p.max))
            .unwrap_or_else(default_max_players);
        let assign = o.assign.or(f.as_ref().map(|p| p.assign)).unwrap_or(false);
        let capacity = o.capacity.or(f.as_ref().and_then(|p| p.capacity));
        let placement = o.placement.or(f.as_ref().map(|p| p.placement)).unwrap_or(false);
        match (listen, key) {
            (Some(listen), Some(key)) => Some(PlayerSettings {
                listen,
                key,
                max,
                assign,
                capacity,
                placement,
            }),
            (None, None) => None,
            (Some(_), None) => {
                return bad(format!(
                    "the player port needs the connect-token key: give --player-key FILE or `key` in \
                     [players] in {source} (make one with `worldmesh token init`)"
                ));
            }
            (None, Some(_)) => {
                return bad(format!(
                    "a player key without a player port: give --player-listen ADDR or `listen` in [players] in {source}"
                ));
            }
        }
    };
    if let Some(p) = &players {
        if !(1..=100_000).contains(&p.max) {
            return bad(format!("players.max must be in 1..=100000, got {}", p.max));
        }
        if p.assign && p.placement {
            return bad(
                "players.assign and players.placement cannot both be on: the assignment moves players \
                 between nodes, the placement loop moves whole regions"
                    .into(),
            );
        }
        if p.capacity.is_some_and(|c| c as usize > p.max) {
            return bad(format!(
                "players.capacity ({:?}) cannot exceed players.max ({})",
                p.capacity, p.max
            ));
        }
        if transport != TransportKind::Quic {
            return bad(
                "the player port runs QUIC with this node's certificate: it needs --transport quic".into(),
            );
        }
    }
    Ok(NodeSettings {
        players,
        id,
        listen,
        advertise,
        seeds,
        join,
        tls,
        transport,
        quic: file.quic,
        world,
        membership,
        membership_profile: profile,
        membership_origin,
        data_dir: o.data_dir.clone().or(file.data_dir),
        checkpoint_frames: o.checkpoint_frames.or(file.checkpoint_frames).unwrap_or(10),
        metrics: o.metrics.or(file.metrics),
        log_format: o.log_format.or(file.log_format).unwrap_or(LogFormat::Human),
        shim_latency,
        shim_loss,
        join_timeout: o
            .join_timeout
            .or(file.join_timeout_s.map(Duration::from_secs_f64))
            .unwrap_or(Duration::from_secs(30)),
        drain_deadline: o
            .drain_deadline
            .or(file.drain_deadline_s.map(Duration::from_secs_f64))
            .unwrap_or(Duration::from_secs(30)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(t: &str) -> Result<FileConfig, String> {
        FileConfig::parse(t, Path::new("node.toml")).map_err(|e| e.to_string())
    }

    fn base() -> Overrides {
        Overrides {
            id: Some(0),
            listen: Some("127.0.0.1:7000".parse().unwrap()),
            transport: Some(TransportKind::UdpInsecure),
            ..Overrides::default()
        }
    }

    #[test]
    fn bad_values_name_the_file_line_column_and_value() {
        let e = parse("id = 1\nframe_hz = -4\n").unwrap_err();
        assert!(e.starts_with("node.toml: "), "{e}");
        assert!(e.contains("line 2, column 12"), "{e}");
        assert!(e.contains("frame_hz must be in (0, 1000], got -4"), "{e}");
        let e = parse("[world]\nlocator = \"chord\"\n").unwrap_err();
        assert!(
            e.contains("line 2") && e.contains("world.locator `chord` is not available"),
            "{e}"
        );
        let e = parse("listen = \"nowhere\"\n").unwrap_err();
        assert!(e.contains("line 1") && e.contains("nowhere"), "{e}");
        let e = parse("[world]\nplayerz = 3\n").unwrap_err();
        assert!(e.contains("line 2") && e.contains("playerz"), "{e}");
        let e = parse("[shim]\nloss = 1.5\n").unwrap_err();
        assert!(
            e.contains("shim.loss must be a probability in [0, 1], got 1.5"),
            "{e}"
        );
    }

    #[test]
    fn flags_override_the_file_and_defaults_fill_in() {
        let f = parse(
            "id = 4\nlisten = \"127.0.0.1:7004\"\nseeds = [\"127.0.0.1:7000\"]\ntransport = \"udp-insecure\"\n\
             [world]\nplayers = 3\nfounders = 8\n[membership]\nprofile = \"wan\"\nprobe_period_ms = 2000\nalone_announce_every_ms = 500\n",
        )
        .unwrap();
        let s = resolve(
            f,
            Overrides {
                players: Some(5),
                ..Overrides::default()
            },
            "node.toml",
        )
        .unwrap();
        assert_eq!((s.id, s.world.players, s.world.founders), (4, 5, 8));
        assert_eq!(s.membership.probe_period, Duration::from_secs(2));
        assert_eq!(s.membership.probe_rtt, MembershipConfig::wan().probe_rtt);
        assert_eq!(s.membership.alone_announce_every, Duration::from_millis(500));
        assert_eq!(s.advertise, s.listen);
        assert!(s.is_founder());
        assert_eq!(s.world.epoch_ms, DEFAULT_EPOCH_MS);
        let list = s.world.hello_list();
        assert!(list.contains(&("players".into(), "5".into())), "{list:?}");
    }

    #[test]
    fn an_unnamed_profile_follows_the_emulated_round_trips() {
        let with = |file: &str, latency: Option<&str>, named: Option<&str>| {
            let o = Overrides {
                latency: latency.map(str::to_owned),
                membership: named.map(str::to_owned),
                ..base()
            };
            resolve(parse(file).unwrap(), o, "node.toml").map(|s| {
                (
                    s.membership_profile.clone(),
                    s.membership_origin,
                    s.membership.probe_rtt,
                )
            })
        };
        let lan = MembershipConfig::lan().probe_rtt;
        let wan = MembershipConfig::wan().probe_rtt;
        assert_eq!(
            with("", None, None).unwrap(),
            ("lan".into(), ProfileOrigin::Default, lan)
        );
        // Round trips the `lan` probe wait (80 ms) covers, and ones it does not.
        let emulated = |ms| ProfileOrigin::Emulated {
            largest_rtt: Duration::from_millis(ms),
        };
        assert_eq!(
            with("", Some("uniform:80"), None).unwrap(),
            ("lan".into(), emulated(80), lan)
        );
        assert_eq!(
            with("", Some("uniform:81"), None).unwrap(),
            ("wan".into(), emulated(81), wan)
        );
        let (profile, origin, _) = with("", Some("planetlab"), None).unwrap();
        assert_eq!(profile, "wan");
        assert!(
            matches!(origin, ProfileOrigin::Emulated { largest_rtt } if largest_rtt > Duration::from_millis(80))
        );
        // The file's shim counts as the flag's does; a named profile always wins.
        assert_eq!(
            with("[shim]\nlatency = \"uniform:200\"\n", None, None).unwrap().0,
            "wan"
        );
        assert_eq!(
            with("", Some("planetlab"), Some("lan")).unwrap(),
            ("lan".into(), ProfileOrigin::Named, lan)
        );
        assert_eq!(
            with("[membership]\nprofile = \"lan\"\n", Some("uniform:200"), None).unwrap(),
            ("lan".into(), ProfileOrigin::Named, lan)
        );
        // A latency that cannot be read is a configuration error naming it.
        let e = with("", Some("uniform:fast"), None).unwrap_err().to_string();
        assert!(e.contains("WAN shim") && e.contains("uniform:fast"), "{e}");
    }

    #[test]
    fn settings_that_do_not_fit_are_named() {
        let err = |f: &str, o: Overrides| {
            resolve(parse(f).unwrap(), o, "node.toml")
                .unwrap_err()
                .to_string()
        };
        let e = err(
            "",
            Overrides {
                id: Some(9),
                ..base()
            },
        );
        assert!(
            e.contains("node 9 is not a founder") && e.contains("--join"),
            "{e}"
        );
        let e = err(
            "",
            Overrides {
                transport: Some(TransportKind::Quic),
                ..base()
            },
        );
        assert!(
            e.contains("needs this node's certificate") && e.contains("--cert"),
            "{e}"
        );
        let e = err(
            "",
            Overrides {
                ca: Some("ca.pem".into()),
                ..base()
            },
        );
        assert!(e.contains("missing cert, key"), "{e}");
        let e = err(
            "",
            Overrides {
                listen: Some("0.0.0.0:7000".parse().unwrap()),
                ..base()
            },
        );
        assert!(e.contains("--advertise"), "{e}");
        let e = err("[membership]\nprobe_rtt_ms = 900\n", base());
        assert!(e.contains("[membership]") && e.contains("probe_rtt"), "{e}");
        let e = err("[quic]\ncid_len = 2\n", base());
        assert!(e.contains("[quic] cid_len") && e.contains("4..=20"), "{e}");
        let e = err("[quic]\nidle_timeout_ms = 1000\nkeep_alive_ms = 1000\n", base());
        assert!(e.contains("keep_alive_ms (1000) must be shorter"), "{e}");
    }

    #[test]
    fn the_digest_changes_with_any_setting() {
        let a = resolve(FileConfig::default(), base(), "-").unwrap();
        let b = resolve(
            FileConfig::default(),
            Overrides {
                seed: Some(2),
                ..base()
            },
            "-",
        )
        .unwrap();
        assert_eq!(
            a.digest(),
            resolve(FileConfig::default(), base(), "-").unwrap().digest()
        );
        assert_ne!(a.digest(), b.digest());
    }
}
