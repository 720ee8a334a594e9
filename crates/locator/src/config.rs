//! Locator configuration (issue 4 item 6: PredTime, PubTime, TTLs, keying, load balancing).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use worldmesh_core::{Aabb, Point3};

use crate::keyspace::{DEFAULT_MAX_SUB_RANGES, Keying, RangeKey};
use crate::prediction::PredictionParams;

/// Everything a [`crate::Locator`] needs to know. Defaults follow the paper where it gives
/// values (PredTime ≈ 1 s, 30-s load window) and Quake-like units elsewhere.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LocatorConfig {
    /// `rangedht` (key = one naming attribute) or `dht` (hashed regions), paper §6.1.
    pub keying: Keying,
    /// `rangedht`: the naming attribute keyed on (`x` by default, `y`, or a Hilbert curve
    /// over the map; issue 4). Same on every node.
    #[serde(default)]
    pub range_key: RangeKey,
    /// `rangedht` keyed by Hilbert: most key intervals one subscription box is routed to
    /// (1..=[`LocatorConfig::MAX_SUB_RANGES_LIMIT`]; fewer intervals cover more keys
    /// outside the box). Same on every node: rendezvous recompute a box's intervals.
    #[serde(default = "default_max_sub_ranges")]
    pub max_sub_ranges: usize,
    /// `rangedht`: a subscription's key range is cut into pieces of about this many nodes'
    /// ranges (the key space over the member count, × this), each routed to its own first
    /// rendezvous and spread from there to the successors it covers at once. Mercury walks
    /// the whole range from its leftmost node, so a wide box on many nodes waits for
    /// several sequential relays — the reason the paper's rangedht has the higher matching
    /// latency (`000` §6.3, Figure 10); pieces make the lookups parallel (ours). 0 keeps
    /// one piece per range (the paper's behaviour). Same on every node: rendezvous
    /// recompute the pieces to check a claimed range. Not used with `loadbal`: pieces are
    /// sized for even ranges, and with the uneven ranges load balancing makes they undid
    /// much of its effect (`worldmesh experiment loadbal`, 96-fed-rect: max/mean matching
    /// bandwidth with balancing 8.31 with pieces of 2 vs 4.58 without; dht 10.40).
    #[serde(default = "default_chunk_nodes")]
    pub chunk_nodes: usize,
    /// The member count pieces are sized for (0: the members known at construction). A
    /// world whose membership changes sets it to a number every node agrees on (e.g. the
    /// founding member count): pieces must be computed alike everywhere.
    #[serde(default)]
    pub chunk_members: usize,
    /// Map bounds: the `rangedht` key range and the `dht` region grid cover this box.
    pub world: Aabb,
    /// `dht` regions (paper: as many as players).
    pub dht_regions: u32,
    /// Salt of the region hash (same on every node).
    pub salt: u64,
    /// Interest prediction horizon (paper PredTime), also the subscription TTL.
    pub pred_time: Duration,
    /// Publication discovery + delivery allowance (paper PubTime).
    pub pub_time: Duration,
    /// Top speed of objects, units/s (PubTime × speed margin).
    pub max_speed: f32,
    /// A primary is republished after moving this far (bounds PubTTL × velocity).
    pub pub_move: f32,
    /// A primary is republished at least this often.
    pub pub_interval: Duration,
    /// TTL of publications at the rendezvous.
    pub pub_ttl: Duration,
    /// Range publications: a moving primary's publication covers its predicted path (from
    /// its position towards the node's predictive publication, at most `pub_move` long),
    /// and subscribers and rendezvous compare that path, not only the point, with the
    /// unpredicted interest (paper `000` §3, §6.2). Off: point publications only.
    pub range_pubs: bool,
    /// Aggregation filter factor (≥ 1; below 1 disables aggregation).
    pub aggregate_factor: f32,
    /// A discovery of the same object is repeated at most this often.
    pub retell: Duration,
    /// Rendezvous push: a match inside the subscriber's unpredicted interest also goes to
    /// the object's primary, which sends the subscriber the state at once instead of
    /// waiting for its fetch (one network leg less on sudden appearances; not in the
    /// paper, whose subscriber always fetches). Off gives the paper's behaviour.
    pub push: bool,
    /// A rendezvous asks for the same (object, subscriber) push at most this often (the
    /// subscriber keeps a replica registered for seconds; refreshes need no new push).
    pub push_quiet: Duration,
    /// Successor-list length.
    pub successors: usize,
    /// Small-world long links per node (Symphony's k).
    pub long_links: usize,
    /// Route-cache entries.
    pub route_cache: usize,
    /// A route-cache entry not confirmed (by a match or route hint from its node) for this
    /// long is ignored, so entries pointing at failed nodes die out.
    pub route_cache_ttl: Duration,
    /// Overlay ping period (successor, predecessor and long links).
    pub ping_interval: Duration,
    /// A peer silent for this long is declared failed.
    pub fail_timeout: Duration,
    /// One long link is re-drawn this often.
    pub link_refresh: Duration,
    /// Routed messages travelling more hops are dropped as loops.
    pub max_hops: u8,
    /// Largest TTL a peer may ask for.
    pub max_ttl: Duration,
    /// Largest subscription side, units (larger ones are refused as oversize).
    pub max_sub_extent: f32,
    /// Grid cell of the matching index, units.
    pub index_cell: f32,
    /// Leave-rejoin load balancing on/off (paper §6.3 Table 2).
    pub loadbal: bool,
    /// Load sampling period.
    pub lb_interval: Duration,
    /// Load moving-average window (paper: 30 s).
    pub lb_window: Duration,
    /// A node is light below mean/α and a node heavy above α·mean.
    pub lb_alpha: f32,
    /// Quiet time after a move before a node may move again.
    pub lb_cooldown: Duration,
}

fn default_max_sub_ranges() -> usize {
    DEFAULT_MAX_SUB_RANGES
}

/// Serde default of `chunk_nodes`.
fn default_chunk_nodes() -> usize {
    LocatorConfig::DEFAULT_CHUNK_NODES
}

impl LocatorConfig {
    /// Default `chunk_nodes`: 2. Measured (`worldmesh simulate --locator rangedht`, seed 1, PlanetLab):
    /// missing replicas at 0 / 100 ms and kbps per node with 2 vs 4 — 64-p2p-sqr 4.02% /
    /// 1.39% at 220.4 vs 4.16% / 1.48% at 221.6; 128-p2p-sqr 4.87% / 2.08% at 262.0 vs 5.14% /
    /// 2.35% at 249.6; 64-fed-rect 4.34% / 1.39% at 714.9 vs 4.42% / 1.42% at 702.3 (0, the
    /// single walk: 6.60% / 3.81% at 128 nodes). 1 gave 4.02% / 1.28% at 246.5 on 64-p2p-sqr.
    pub const DEFAULT_CHUNK_NODES: usize = 2;

    /// Largest `max_sub_ranges` accepted.
    pub const MAX_SUB_RANGES_LIMIT: usize = 64;

    /// Defaults for a map with bounds `world`.
    pub fn new(keying: Keying, world: Aabb) -> Self {
        Self {
            keying,
            range_key: RangeKey::X,
            max_sub_ranges: DEFAULT_MAX_SUB_RANGES,
            chunk_nodes: default_chunk_nodes(),
            chunk_members: 0,
            world,
            dht_regions: 64,
            salt: 0x5eed_10ca_7012,
            pred_time: Duration::from_secs(1),
            pub_time: Duration::from_millis(100),
            max_speed: 320.0,
            pub_move: 96.0,
            pub_interval: Duration::from_secs(1),
            pub_ttl: Duration::from_millis(2200),
            range_pubs: true,
            aggregate_factor: 1.25,
            retell: Duration::from_secs(1),
            push: true,
            push_quiet: Duration::from_secs(3),
            successors: 4,
            long_links: 4,
            route_cache: 64,
            route_cache_ttl: Duration::from_secs(3),
            ping_interval: Duration::from_secs(1),
            fail_timeout: Duration::from_millis(3500),
            link_refresh: Duration::from_secs(10),
            max_hops: 48,
            max_ttl: Duration::from_secs(30),
            max_sub_extent: 8192.0,
            index_cell: 256.0,
            loadbal: false,
            lb_interval: Duration::from_secs(1),
            lb_window: Duration::from_secs(30),
            lb_alpha: 1.5,
            lb_cooldown: Duration::from_secs(10),
        }
    }

    /// The map of the model game for `nodes` nodes: `rect` is 2400 high and 2400·n/16
    /// wide, `sqr` is 2400·√(n/16) on both sides (paper §4.1: area grows with players).
    pub fn model_world(nodes: usize, rect: bool) -> Aabb {
        let n = nodes.max(1) as f32;
        let (w, h) = if rect {
            (2400.0 * n / 16.0, 2400.0)
        } else {
            let s = 2400.0 * (n / 16.0).sqrt();
            (s, s)
        };
        Aabb::from_corners(Point3::new(0.0, 0.0, -100.0), Point3::new(w, h, 100.0))
    }

    /// The prediction parameters with horizon `pred_time` (0 gives the "needed" box).
    pub fn prediction(&self, pred_time: Duration) -> PredictionParams {
        PredictionParams {
            pred_time: pred_time.as_secs_f32(),
            pub_time: self.pub_time.as_secs_f32(),
            max_speed: self.max_speed,
            pub_margin: self.pub_move,
        }
    }
}

/// The locator settings an operator or experiment writes (the `[locator]` table of
/// `worldmesh simulate --config`, the locator choice of `worldmesh node`): which locator
/// runs, in friendly units (milliseconds, names), with the node-side interest prediction
/// that goes with it. [`LocatorSettings::build`] turns them into a [`LocatorConfig`] for a
/// map; [`LocatorSettings::validate`] checks every value. Object location, paper `000`
/// §3, §6.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LocatorSettings {
    /// `oracle` (ideal discovery through a global index), `rangedht` (Mercury-style range
    /// DHT keyed by one naming attribute, see `range_key`) or `dht` (hashed DHT over map
    /// regions); paper `000` §6.1.
    pub kind: String,
    /// `rangedht`: the naming attribute the key is made of: `x`, `y`, or `hilbert` (the
    /// position linearised by a Hilbert curve over the map; a subscription box becomes a
    /// few key ranges). Issue 4, paper `000` §6.1.
    pub range_key: String,
    /// `rangedht` with `range_key = "hilbert"`: most key ranges one subscription box is
    /// routed to (1..=64).
    pub max_sub_ranges: usize,
    /// `rangedht`: a subscription's key range is cut into pieces of about this many nodes'
    /// ranges, looked up in parallel (0 = the paper's single walk along successors;
    /// 0..=1024; not used with `loadbal`, see `worldmesh_locator::LocatorConfig::chunk_nodes`).
    /// Ours: 2 — fewer replicas missing than 4 (one fan-out covers a piece) at
    /// about the same bandwidth (measurements at [`LocatorConfig::DEFAULT_CHUNK_NODES`]).
    pub chunk_nodes: usize,
    /// Delay between a match and its delivery to the subscriber, ms.
    pub delay_ms: f64,
    /// Margin added around areas of interest for discovery, game units (fixed-margin
    /// interest prediction, paper `000` §6.2). Ours: 160 = half a second of running at
    /// Quake III speed.
    pub interest_margin: f32,
    /// Interest prediction lead, ms: areas of interest (grown by the margin) are swept
    /// along their object's velocity over this time, and objects are wanted if they are
    /// in that box now or will be after moving along their own velocity for as long
    /// (paper `000` §6.2; with any locator, on the node's side of the port). The node also
    /// publishes where each primary expects to be after this time (predictive
    /// publications). Ours: 300 — on 64-p2p-sqr with PlanetLab latencies (seeds 1–4),
    /// missing replicas at 0 ms grace average 4.25% without prediction, 3.36% / 3.23% /
    /// 3.32% with 200 / 300 / 500 ms, for 63.3 → 71.1 / 71.6 / 78.8 kbps per node
    /// (`worldmesh simulate --nodes 64 --players-per-node 1 --map sqr --interest-lead MS
    /// --seed S`).
    pub interest_lead_ms: f64,
    /// DHT locators: leave-and-rejoin load balancing (paper `000` Table 2).
    pub loadbal: bool,
    /// DHT locators: PredTime, ms: how far ahead subscriptions are enlarged by predicted
    /// movement, and their TTL (paper `000` §6.2, Figure 8a).
    pub pred_time_ms: f64,
    /// DHT locators: PubTime, ms: the allowance for discovering and delivering a
    /// publication of an object entering a subscription; subscriptions grow by PubTime ×
    /// top speed on every side (paper `000` §6.2: "we can also trade off overhead for
    /// improved consistency by increasing PubTime").
    pub pub_time_ms: f64,
    /// DHT locators: TTL of publications stored at rendezvous, ms (paper `000` §6.2 PubTTL).
    pub pub_ttl_ms: f64,
    /// DHT locators: a primary is republished at least this often, ms (at most the TTL).
    pub pub_interval_ms: f64,
    /// DHT locators: range publications — a moving primary's publication covers its
    /// predicted path (at most the publication margin long), matched against interest as a
    /// path rather than a point (paper `000` §3, §6.2); `false` publishes points only.
    pub range_pubs: bool,
    /// DHT locators: rendezvous push — a match inside the subscriber's unpredicted interest
    /// also asks the object's primary to send the state at once (one network leg less than
    /// the subscriber's fetch; `false` is the paper's fetch-only behaviour).
    pub push: bool,
}

impl Default for LocatorSettings {
    fn default() -> Self {
        Self {
            kind: "oracle".into(),
            range_key: "x".into(),
            max_sub_ranges: DEFAULT_MAX_SUB_RANGES,
            chunk_nodes: LocatorConfig::DEFAULT_CHUNK_NODES,
            delay_ms: 0.0,
            interest_margin: 160.0,
            interest_lead_ms: 300.0,
            loadbal: false,
            pred_time_ms: 1000.0,
            pub_time_ms: 100.0,
            pub_ttl_ms: 2200.0,
            pub_interval_ms: 1000.0,
            range_pubs: true,
            push: true,
        }
    }
}

impl LocatorSettings {
    /// The locator kinds: the ideal `oracle` (no in-node locator), and the distributed
    /// `rangedht` and `dht`.
    pub const KINDS: [&'static str; 3] = ["oracle", "dht", "rangedht"];

    /// Checks every value; the message names the setting as `locator.NAME`.
    pub fn validate(&self) -> Result<(), String> {
        if !Self::KINDS.contains(&self.kind.as_str()) {
            return Err(format!(
                "locator.kind `{}` is not available; known: oracle, dht, rangedht",
                self.kind
            ));
        }
        if self.range_key.parse::<RangeKey>().is_err() {
            return Err(format!(
                "locator.range_key `{}` is not available; valid: {}",
                self.range_key,
                RangeKey::NAMES.join(", ")
            ));
        }
        let most = LocatorConfig::MAX_SUB_RANGES_LIMIT;
        if !(1..=most).contains(&self.max_sub_ranges) {
            return Err(format!(
                "locator.max_sub_ranges must be in [1, {most}], got {}",
                self.max_sub_ranges
            ));
        }
        if self.chunk_nodes > 1024 {
            return Err(format!(
                "locator.chunk_nodes must be in [0, 1024], got {}",
                self.chunk_nodes
            ));
        }
        for (name, v, lo, hi) in [
            ("pred_time_ms", self.pred_time_ms, 0.0, 30_000.0),
            ("pub_time_ms", self.pub_time_ms, 0.0, 10_000.0),
            ("pub_ttl_ms", self.pub_ttl_ms, 1.0, 30_000.0),
            ("interest_lead_ms", self.interest_lead_ms, 0.0, 10_000.0),
            ("delay_ms", self.delay_ms, 0.0, 60_000.0),
        ] {
            if !(v.is_finite() && (lo..=hi).contains(&v)) {
                return Err(format!("locator.{name} must be in [{lo}, {hi}], got {v}"));
            }
        }
        if !(self.pub_interval_ms.is_finite()
            && self.pub_interval_ms >= 1.0
            && self.pub_interval_ms <= self.pub_ttl_ms)
        {
            return Err(format!(
                "locator.pub_interval_ms must be in [1, pub_ttl_ms = {}] (a publication must be \
                 refreshed before it expires), got {}",
                self.pub_ttl_ms, self.pub_interval_ms
            ));
        }
        Ok(())
    }

    /// The configuration of a distributed locator over a map whose key space is `world`,
    /// with `dht_regions` hashed regions (the paper uses as many as players, `000` §6.3)
    /// and objects moving at most `max_speed` units/s; `None` for the oracle (no locator
    /// runs in the node). Call [`LocatorSettings::validate`] first: an unknown range key
    /// falls back to `x`.
    pub fn build(&self, world: Aabb, dht_regions: u32, max_speed: f32) -> Option<LocatorConfig> {
        let keying = match self.kind.as_str() {
            "dht" => Keying::Dht,
            "rangedht" => Keying::RangeDht,
            _ => return None,
        };
        let mut kc = LocatorConfig::new(keying, world);
        kc.range_key = self.range_key.parse().unwrap_or_default();
        kc.max_sub_ranges = self.max_sub_ranges;
        kc.chunk_nodes = self.chunk_nodes;
        kc.dht_regions = dht_regions.max(1);
        kc.loadbal = self.loadbal;
        kc.pred_time = ms(self.pred_time_ms);
        kc.pub_time = ms(self.pub_time_ms);
        kc.pub_ttl = ms(self.pub_ttl_ms);
        kc.pub_interval = ms(self.pub_interval_ms);
        kc.range_pubs = self.range_pubs;
        kc.push = self.push;
        kc.max_speed = max_speed;
        Some(kc)
    }

    /// The node-side interest prediction lead (`interest_lead_ms`).
    pub fn interest_lead(&self) -> Duration {
        ms(self.interest_lead_ms)
    }
}

fn ms(v: f64) -> Duration {
    Duration::from_secs_f64(v / 1000.0)
}
