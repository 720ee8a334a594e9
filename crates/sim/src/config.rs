//! The configuration of a simulation run (`worldmesh simulate --config FILE`).
//!
//! Every field has a default that runs; a TOML file overrides any subset. Unknown keys
//! are errors (a typo must not silently fall back to a default). Example:
//!
//! ```toml
//! nodes = 64
//! players_per_node = 8        # "fed"; 1 is "p2p"
//! duration_s = 60.0
//! architecture = "colyseus"   # or "broadcast"
//!
//! [locator]
//! kind = "oracle"
//! delay_ms = 0.0
//!
//! [network]
//! latency = "planetlab"       # or "uniform:80", or a path to a matrix file
//! loss = 0.01
//!
//! [game]
//! map = "rect"                # or "sqr"
//! ```

use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;
use worldmesh_core::{LatencyError, LatencyMatrix};
use worldmesh_game::ModelConfig;
pub use worldmesh_locator::LocatorSettings;

use crate::network::NetworkConfig;

/// Why a configuration is unusable.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The config file could not be read.
    #[error("{path}: cannot read config: {source}")]
    Io {
        /// The file.
        path: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The TOML is malformed or has unknown/mistyped keys.
    #[error("{path}: {message}")]
    Toml {
        /// The file.
        path: String,
        /// The parser's message (it names the line and column).
        message: String,
    },
    /// A value is out of range.
    #[error("invalid configuration: {0}")]
    Invalid(String),
    /// The latency matrix could not be loaded.
    #[error(transparent)]
    Latency(#[from] LatencyError),
}

/// Which distributed architecture the nodes run (paper `000` §7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Architecture {
    /// Interest-driven replicas found through the locator (Colyseus).
    Colyseus,
    /// Every node replicates every object.
    Broadcast,
}

/// A simulation run of the model workload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimConfig {
    /// Number of nodes (servers).
    pub nodes: usize,
    /// Players whose primaries each node holds: 1 is the paper's `p2p` scenario, 8 `fed`.
    #[serde(alias = "bots_per_node")]
    pub players_per_node: usize,
    /// Simulated duration, seconds.
    pub duration_s: f64,
    /// Metrics ignore the first seconds (initial discovery of everything), seconds; at most
    /// a quarter of the run (see [`SimConfig::effective_warmup`]).
    pub warmup_s: f64,
    /// The architecture.
    pub architecture: Architecture,
    /// Object location.
    pub locator: LocatorSettings,
    /// Seed of every random choice.
    pub seed: u64,
    /// Frames per second on every node (10 Hz as in Quake-like games, paper `000` §4.1).
    pub frame_hz: f64,
    /// The network.
    pub network: NetworkConfig,
    /// The model workload.
    pub game: ModelConfig,
    /// Dynamic membership and adoption (absent from reports when off, the default).
    #[serde(skip_serializing_if = "ClusterConfig::is_static")]
    pub cluster: ClusterConfig,
    /// The placement loop of paper `001` §7.4 (absent from reports when off, the default).
    #[serde(skip_serializing_if = "PlacementSettings::is_off")]
    pub placement: PlacementSettings,
}

/// The placement loop in the simulated world (`[placement]`): every player gets a home (a
/// latency-matrix row drawn at random: where its person connects from), and every node
/// migrates its region to the node its players are nearest to on average (core selection,
/// k = 1), checked after each frame with §7.4's activation policy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PlacementSettings {
    /// Run the loop.
    pub enabled: bool,
    /// Core selection at least this often, s.
    pub interval_s: f64,
    /// Migrate only if the players' mean RTT improves by more than this, ms.
    pub min_gain_ms: f64,
    /// A node accepts at most this many times the largest initial region in primaries
    /// (paper `001` §7.4's capacity; without it regions pile onto the best-placed nodes).
    pub capacity_factor: f64,
}

impl Default for PlacementSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            interval_s: 10.0,
            min_gain_ms: 10.0,
            capacity_factor: 2.0,
        }
    }
}

impl PlacementSettings {
    /// True when the loop is off.
    pub fn is_off(&self) -> bool {
        !self.enabled
    }
}

/// Membership of a simulated world (`[cluster]`): fixed, as in the papers' experiments, or
/// SWIM with adoption of a failed member's objects (`node::membership`, `node::adoption`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterConfig {
    /// Run SWIM inside every node (members can fail, leave, join and be adopted from).
    pub membership: bool,
    /// SWIM timing: `lan` or `wan` (`node::membership::MembershipConfig`); unnamed: the
    /// one the network's largest round trip calls for
    /// (`node::membership::MembershipConfig::profile_for`: `wan` above 80 ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// Backups per primary (`replica::ReplicaConfig::backups`).
    pub backups: usize,
    /// Record every forwarded write a primary applies (`replica::ReplicaConfig::trace_writes`;
    /// the fault swarm's exactly-once check). Not a configuration-file setting.
    #[serde(skip)]
    pub trace_writes: bool,
    /// Persistence (issue 19): every node persists to a modelled store, `Checkpointed`
    /// objects every this many frames (`node::persist`); 0 (the default) persists nothing.
    #[serde(skip_serializing_if = "is_zero")]
    pub checkpoint_frames: u32,
    /// Time to apply one store batch, fsync included, ms. Default 2: between the embedded
    /// store's measured median for one durable write (0.7 ms) and for a checkpoint of
    /// 2,000 objects (6.8 ms) on the 2-core machine (`crates/store/README.md`).
    #[serde(skip_serializing_if = "is_default_store_latency")]
    pub store_latency_ms: f64,
}

/// Reports of runs without persistence stay as they were (no new keys).
fn is_zero(v: &u32) -> bool {
    *v == 0
}

fn is_default_store_latency(v: &f64) -> bool {
    *v == ClusterConfig::default().store_latency_ms
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            membership: false,
            profile: None,
            backups: 0,
            trace_writes: false,
            checkpoint_frames: 0,
            store_latency_ms: 2.0,
        }
    }
}

impl ClusterConfig {
    /// True for the default: a fixed member list, no backups.
    pub fn is_static(&self) -> bool {
        *self == Self::default()
    }

    /// The persistence settings, if on (`checkpoint_frames` > 0).
    pub fn persist_config(&self) -> Option<worldmesh_node::PersistConfig> {
        (self.checkpoint_frames > 0).then_some(worldmesh_node::PersistConfig {
            checkpoint_every: self.checkpoint_frames,
        })
    }

    /// The SWIM profile that runs, if membership is on, over a network whose largest round
    /// trip is `largest_rtt`: the one named, else the one that round trip calls for.
    pub fn membership_profile(&self, largest_rtt: std::time::Duration) -> Option<&str> {
        use worldmesh_node::membership::MembershipConfig;
        self.membership.then(|| {
            self.profile
                .as_deref()
                .unwrap_or_else(|| MembershipConfig::profile_for(largest_rtt))
        })
    }

    /// The SWIM settings of [`Self::membership_profile`], if membership is on.
    pub fn membership_config(
        &self,
        largest_rtt: std::time::Duration,
    ) -> Option<worldmesh_node::membership::MembershipConfig> {
        use worldmesh_node::membership::MembershipConfig;
        self.membership_profile(largest_rtt)
            .map(|p| MembershipConfig::named(p).unwrap_or_else(MembershipConfig::lan))
    }
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            nodes: 64,
            players_per_node: 8,
            duration_s: 60.0,
            warmup_s: 5.0,
            architecture: Architecture::Colyseus,
            locator: LocatorSettings::default(),
            seed: 1,
            frame_hz: 10.0,
            network: NetworkConfig::default(),
            game: ModelConfig::default(),
            cluster: ClusterConfig::default(),
            placement: PlacementSettings::default(),
        }
    }
}

/// Upper bounds that keep a typo from asking for terabytes.
const MAX_NODES: usize = 100_000;
const MAX_BOTS: usize = 10_000_000;

impl SimConfig {
    /// Parses TOML text; `path` names the source in errors.
    pub fn from_toml_str(text: &str, path: &str) -> Result<Self, ConfigError> {
        let cfg: SimConfig = toml::from_str(text).map_err(|e| ConfigError::Toml {
            path: path.into(),
            message: e.to_string(),
        })?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Reads and parses a TOML file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: p.clone(),
            source,
        })?;
        Self::from_toml_str(&text, &p)
    }

    /// Checks every value.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError::Invalid(m));
        let p = &self.placement;
        if !(p.interval_s.is_finite() && p.interval_s > 0.0 && p.interval_s <= 3600.0) {
            return bad(format!(
                "placement.interval_s must be in (0, 3600], got {}",
                p.interval_s
            ));
        }
        if !(p.capacity_factor.is_finite() && (1.0..=1000.0).contains(&p.capacity_factor)) {
            return bad(format!(
                "placement.capacity_factor must be in [1, 1000], got {}",
                p.capacity_factor
            ));
        }
        if !(p.min_gain_ms.is_finite() && p.min_gain_ms >= 0.0 && p.min_gain_ms <= 60_000.0) {
            return bad(format!(
                "placement.min_gain_ms must be in [0, 60000], got {}",
                p.min_gain_ms
            ));
        }
        if let Some(p) = &self.cluster.profile
            && !["lan", "wan"].contains(&p.as_str())
        {
            return bad(format!("cluster.profile `{p}` is not available; known: lan, wan"));
        }
        if self.cluster.checkpoint_frames > 100_000 {
            return Err(ConfigError::Invalid(format!(
                "cluster.checkpoint_frames must be at most 100000, got {}",
                self.cluster.checkpoint_frames
            )));
        }
        if !(self.cluster.store_latency_ms.is_finite()
            && (0.0..=10_000.0).contains(&self.cluster.store_latency_ms))
        {
            return Err(ConfigError::Invalid(format!(
                "cluster.store_latency_ms must be in [0, 10000], got {}",
                self.cluster.store_latency_ms
            )));
        }
        if self.cluster.backups > 8 {
            return bad(format!(
                "cluster.backups must be at most 8, got {}",
                self.cluster.backups
            ));
        }
        if self.nodes == 0 || self.nodes > MAX_NODES {
            return bad(format!("nodes must be in 1..={MAX_NODES}, got {}", self.nodes));
        }
        if self.nodes.saturating_mul(self.players_per_node) > MAX_BOTS {
            return bad(format!("nodes × players_per_node must be at most {MAX_BOTS}"));
        }
        if !(self.warmup_s.is_finite() && self.warmup_s >= 0.0) {
            return bad(format!(
                "warmup_s must be a non-negative number, got {}",
                self.warmup_s
            ));
        }
        self.locator.validate().map_err(ConfigError::Invalid)?;
        if !(self.duration_s.is_finite() && self.duration_s > 0.0 && self.duration_s <= 1e7) {
            return bad(format!("duration_s must be in (0, 1e7], got {}", self.duration_s));
        }
        if !(self.frame_hz.is_finite() && self.frame_hz > 0.0 && self.frame_hz <= 1000.0) {
            return bad(format!("frame_hz must be in (0, 1000], got {}", self.frame_hz));
        }
        let n = &self.network;
        for (name, p) in [("network.loss", n.loss), ("network.duplicate", n.duplicate)] {
            if !(0.0..=1.0).contains(&p) {
                return bad(format!("{name} must be a probability in [0, 1], got {p}"));
            }
        }
        for (name, v) in [
            ("network.jitter_ms", n.jitter_ms),
            ("network.access_delay_ms", n.access_delay_ms),
        ] {
            if !(v.is_finite() && (0.0..=60_000.0).contains(&v)) {
                return bad(format!("{name} must be in [0, 60000] ms, got {v}"));
            }
        }
        for (k, p) in n.partitions.iter().enumerate() {
            if !(p.from_s.is_finite() && p.until_s.is_finite() && p.from_s <= p.until_s) {
                return bad(format!("network.partitions[{k}]: need from_s <= until_s"));
            }
            if let Some(x) = p.nodes.iter().find(|x| **x as usize >= self.nodes) {
                return bad(format!(
                    "network.partitions[{k}]: node {x} does not exist ({} nodes)",
                    self.nodes
                ));
            }
        }
        self.game.validate().map_err(ConfigError::Invalid)?;
        Ok(())
    }

    /// The warm-up actually excluded: `warmup_s`, but at most a quarter of the run.
    pub fn effective_warmup(&self) -> f64 {
        self.warmup_s.min(self.duration_s / 4.0)
    }

    /// Time between frames.
    pub fn frame_interval(&self) -> Duration {
        Duration::from_secs_f64(1.0 / self.frame_hz)
    }

    /// Loads the latency matrix named by `network.latency`.
    pub fn latency_matrix(&self) -> Result<LatencyMatrix, ConfigError> {
        load_latency(&self.network.latency)
    }
}

/// Resolves a latency source (`core::latency::load_spec`: `planetlab`, `uniform:RTT_MS`
/// or a file path, optionally `@median=MS`), with errors about the spec named as the
/// `network.latency` setting.
pub fn load_latency(spec: &str) -> Result<LatencyMatrix, ConfigError> {
    worldmesh_core::latency::load_spec(spec).map_err(|e| match e {
        LatencyError::Spec { spec, reason } => {
            ConfigError::Invalid(format!("network.latency `{spec}`: {reason}"))
        }
        other => ConfigError::Latency(other),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate_and_toml_overrides() {
        SimConfig::default().validate().unwrap();
        let c = SimConfig::from_toml_str("nodes = 3\n[network]\nloss = 0.5\n", "x.toml").unwrap();
        assert_eq!((c.nodes, c.players_per_node, c.network.loss), (3, 8, 0.5));
        let c =
            SimConfig::from_toml_str("bots_per_node = 2\narchitecture = \"broadcast\"\n", "x.toml").unwrap();
        assert_eq!((c.players_per_node, c.architecture), (2, Architecture::Broadcast));
        let e = SimConfig::from_toml_str("[locator]\nkind = \"chord\"\n", "x.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("locator.kind `chord` is not available"), "{e}");
        assert!(
            SimConfig::from_toml_str("[locator]\nkind = \"rangedht\"\nloadbal = true\n", "x.toml").is_ok()
        );
    }

    #[test]
    fn an_unnamed_membership_profile_follows_the_largest_round_trip() {
        use worldmesh_node::membership::MembershipConfig;
        let ms = Duration::from_millis;
        let mut c = ClusterConfig {
            membership: true,
            ..ClusterConfig::default()
        };
        let probe_wait = |c: &ClusterConfig, rtt| c.membership_config(rtt).map(|m| m.probe_rtt);
        let (lan, wan) = (
            MembershipConfig::lan().probe_rtt,
            MembershipConfig::wan().probe_rtt,
        );
        assert_eq!(probe_wait(&c, ms(80)), Some(lan));
        assert_eq!(probe_wait(&c, ms(81)), Some(wan));
        c.profile = Some("lan".into());
        assert_eq!(probe_wait(&c, ms(400)), Some(lan), "a named profile wins");
        c.membership = false;
        assert_eq!(probe_wait(&c, ms(400)), None);
        // From a file: absent stays unnamed, and an unknown name is refused.
        let parsed = SimConfig::from_toml_str("[cluster]\nmembership = true\n", "s.toml").unwrap();
        assert_eq!(parsed.cluster.profile, None);
        let e =
            SimConfig::from_toml_str("[cluster]\nprofile = \"moon\"\n", "s.toml").and_then(|c| c.validate());
        assert!(e.unwrap_err().to_string().contains("cluster.profile `moon`"));
    }

    #[test]
    fn range_key_is_checked_and_reaches_the_locator() {
        let e = SimConfig::from_toml_str("[locator]\nkind = \"rangedht\"\nrange_key = \"z\"\n", "x.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("locator.range_key `z` is not available; valid: x, y, hilbert"),
            "{e}"
        );
        let e = SimConfig::from_toml_str("[locator]\nmax_sub_ranges = 0\n", "x.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("locator.max_sub_ranges must be in [1, 64], got 0"),
            "{e}"
        );
        let c = SimConfig::from_toml_str(
            "[locator]\nkind = \"rangedht\"\nrange_key = \"hilbert\"\nmax_sub_ranges = 7\n",
            "x.toml",
        )
        .unwrap();
        let world = worldmesh_game::GameMap::generate(&c.game, c.nodes * c.players_per_node, 1);
        let kc = crate::scenario::locator_config(&c, &world).unwrap();
        assert_eq!(
            (kc.range_key, kc.max_sub_ranges),
            (worldmesh_locator::RangeKey::Hilbert, 7)
        );
        let kc = crate::scenario::locator_config(&SimConfig::default(), &world);
        assert!(kc.is_none(), "the oracle has no locator config");
        let mut d = SimConfig::default();
        d.locator.kind = "rangedht".into();
        let kc = crate::scenario::locator_config(&d, &world).unwrap();
        assert_eq!(kc.range_key, worldmesh_locator::RangeKey::X, "x by default");
    }

    #[test]
    fn locator_times_are_checked_and_reach_the_locator() {
        let c = SimConfig::from_toml_str(
            "[locator]\nkind = \"dht\"\npub_time_ms = 250\npub_ttl_ms = 4000\npub_interval_ms = 1500\n",
            "x.toml",
        )
        .unwrap();
        let world = worldmesh_game::GameMap::generate(&c.game, c.nodes * c.players_per_node, 1);
        let kc = crate::scenario::locator_config(&c, &world).unwrap();
        assert_eq!(
            (kc.pub_time, kc.pub_ttl, kc.pub_interval),
            (
                std::time::Duration::from_millis(250),
                std::time::Duration::from_millis(4000),
                std::time::Duration::from_millis(1500)
            )
        );
        for (toml, want) in [
            ("pub_time_ms = -1", "locator.pub_time_ms must be in [0, 10000]"),
            ("pub_ttl_ms = 0", "locator.pub_ttl_ms must be in [1, 30000]"),
            ("pub_ttl_ms = 1e9", "locator.pub_ttl_ms must be in [1, 30000]"),
            (
                "pub_interval_ms = 3000",
                "locator.pub_interval_ms must be in [1, pub_ttl_ms = 2200]",
            ),
            ("chunk_nodes = 5000", "locator.chunk_nodes must be in [0, 1024]"),
        ] {
            let e = SimConfig::from_toml_str(&format!("[locator]\n{toml}\n"), "x.toml")
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{toml}: {e}");
        }
    }

    #[test]
    fn bad_toml_names_file_line_and_key() {
        let e = SimConfig::from_toml_str("nodes = 3\nnodez = 4\n", "x.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("x.toml: ") && e.contains("line 2") && e.contains("nodez"),
            "{e}"
        );
        let e = SimConfig::from_toml_str("nodes = \"many\"\n", "x.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 1") && e.contains("nodes"), "{e}");
        let e = SimConfig::from_toml_str("nodes = [\n", "x.toml")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("x.toml: "), "{e}");
        let e = SimConfig::from_toml_str("[network]\nloss = 2.0\n", "x.toml")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "invalid configuration: network.loss must be a probability in [0, 1], got 2"
        );
        let e = SimConfig::from_toml_str("nodes = 0\n", "x.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("nodes must be in"), "{e}");
        let e = SimConfig::from_toml_str(
            "nodes = 2\n[[network.partitions]]\nfrom_s = 1.0\nuntil_s = 2.0\nnodes = [5]\n",
            "x.toml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("node 5 does not exist"), "{e}");
        let e = SimConfig::load(Path::new("/no/such.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("/no/such.toml: cannot read config"), "{e}");
    }

    #[test]
    fn latency_spec_errors_name_the_setting() {
        assert_eq!(load_latency("planetlab").unwrap().len(), 490);
        let e = load_latency("uniform:-1").unwrap_err().to_string();
        assert_eq!(
            e,
            "invalid configuration: network.latency `uniform:-1`: expected uniform:RTT_MS with 0 <= RTT_MS <= 60000"
        );
        let e = load_latency("/no/matrix.txt").unwrap_err().to_string();
        assert!(e.contains("/no/matrix.txt"), "{e}");
    }
}
