//! The sans-IO locator state machine: one per node (paper `000` §3, §6.1–6.3).
//!
//! Inputs: the node's per-frame operations ([`Locator::apply_ops`]), datagrams from peers
//! ([`Locator::handle_datagram`]) and timeouts ([`Locator::handle_timeout`]), each with
//! `now`. Outputs: datagrams ([`Locator::poll_transmit`]), discoveries
//! ([`Locator::poll_discovery`]) and the next wake-up ([`Locator::poll_timeout`]). It
//! never reads a clock or touches a socket.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use worldmesh_core::{Aabb, DetRng, NodeId, ObjectId, Point3, Time, TrafficCounters};

use crate::config::LocatorConfig;
use crate::index::{DetMap, IndexError, MatchIndex, StoredPub, StoredSub, SubKey};
use crate::keyspace::{Key, Keyer, cw, in_arc};
use crate::msg::{
    LocatorCodec, LocatorMsg, MatchItem, PathOffset, Payload, Peer, PubItem, PushItem, Routed, SubItem,
};
use crate::prediction::{SubscriptionCache, VelocityEstimate, aggregate, box_contains, enlarge};

mod deadlines;
mod inbound;
mod ring;

use deadlines::{Deadlines, retold_at};

/// Most matches or handed-off items per datagram.
const BATCH: usize = 256;
/// Most peers in a hello.
const MAX_HELLO_PEERS: usize = 16;
/// Most `dht` regions one subscription may overlap.
const MAX_REGIONS: usize = 4096;
/// Discovery-latency samples kept.
const MAX_SAMPLES: usize = 200_000;

/// One operation of the node's locator port, mirroring `worldmesh_node::LocatorOp`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Op {
    /// Publish a primary's naming attributes.
    Publish {
        /// The object.
        id: ObjectId,
        /// Its position.
        pos: Point3,
        /// Its type tag.
        kind: u8,
        /// Where the object expects to be soon (the node's predictive publication). When
        /// that is a jump no motion explains (farther than the top speed covers in
        /// PredTime: a respawn point, a teleporter's exit), it is announced once as a
        /// publication of its own, so subscribers there discover the object before it
        /// appears (paper `000` §6.2 "PubTime").
        ahead: Option<Point3>,
    },
    /// Subscribe with a primary's (unpredicted) area of interest.
    Subscribe {
        /// The subscribing object.
        owner: ObjectId,
        /// Its area of interest.
        region: Aabb,
    },
}

/// A match for this node, to hand to `Node::handle_discovery(now, object, primary, pos)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Discovery {
    /// The object found.
    pub object: ObjectId,
    /// The node holding its primary.
    pub primary: NodeId,
    /// Its published position.
    pub pos: Point3,
}

/// A rendezvous asked this node (the primary's) to send `subscriber` the state of
/// `object` now: hand to the replica manager (`Node` does).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PushRequest {
    /// The object, a primary of this node.
    pub object: ObjectId,
    /// The node whose unpredicted interest holds it.
    pub subscriber: NodeId,
}

/// A datagram to send (the one type of every machine, `worldmesh_core`).
pub use worldmesh_core::Transmit;

/// What a locator reports to its node, in the order it happened per kind: every pending
/// discovery first, then every push request ([`Locator`] as a `worldmesh_core::Machine`).
#[derive(Clone, Debug, PartialEq)]
pub enum Output {
    /// An object entered the node's interest ([`Locator::poll_discovery`]).
    Discovery(Discovery),
    /// A rendezvous asks this node to push a primary's state ([`Locator::poll_push`]).
    Push(PushRequest),
}

/// Refused input, by reason (never a panic).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rejections {
    /// Undecodable datagrams or class/payload mismatch.
    pub malformed: u64,
    /// Datagrams from nodes outside the member list.
    pub not_member: u64,
    /// Non-finite or inverted boxes and points.
    pub bad_geometry: u64,
    /// Key or range claims that do not match the item, or items outside the receiver's range.
    pub forged_range: u64,
    /// Handed-off items outside the receiver's range (a stale view during churn, or a
    /// forgery; dropped either way, the owner's next refresh re-stores them).
    pub misplaced: u64,
    /// TTLs of zero or above the limit.
    pub bad_ttl: u64,
    /// Routed messages beyond the hop limit (loops).
    pub hop_limit: u64,
    /// Subscriptions larger than the limit, or oversize lists.
    pub oversize: u64,
    /// Messages that make no sense in the current state.
    pub unexpected: u64,
    /// Operations from the local node with invalid geometry.
    pub bad_ops: u64,
}

impl Rejections {
    /// Adds another set of counters to this one.
    pub fn add(&mut self, o: &Rejections) {
        self.malformed += o.malformed;
        self.not_member += o.not_member;
        self.bad_geometry += o.bad_geometry;
        self.forged_range += o.forged_range;
        self.misplaced += o.misplaced;
        self.bad_ttl += o.bad_ttl;
        self.hop_limit += o.hop_limit;
        self.oversize += o.oversize;
        self.unexpected += o.unexpected;
        self.bad_ops += o.bad_ops;
    }

    /// Sum of all counters.
    pub fn total(&self) -> u64 {
        self.malformed
            + self.not_member
            + self.bad_geometry
            + self.forged_range
            + self.misplaced
            + self.bad_ttl
            + self.hop_limit
            + self.oversize
            + self.unexpected
            + self.bad_ops
    }
}

/// Counters of one locator.
#[derive(Clone, Debug, Default)]
pub struct LocatorStats {
    /// Bytes and datagrams by class, sent and received.
    pub traffic: TrafficCounters,
    /// Refused input.
    pub rejected: Rejections,
    /// Routed publications and subscriptions by hops to their first rendezvous (last bucket
    /// is "63 or more").
    pub hops: Vec<u64>,
    /// Publications and subscriptions stored here as a rendezvous (the matching load).
    pub items_stored: u64,
    /// Matches sent to subscribers.
    pub matches_sent: u64,
    /// Push requests sent to primaries (matches inside the unpredicted interest).
    pub pushes_sent: u64,
    /// Push requests handed to the node (as a primary's node).
    pub pushes_served: u64,
    /// Push requests for objects this node does not publish (any more): dropped.
    pub pushes_stale: u64,
    /// Discoveries handed to the node.
    pub discoveries: u64,
    /// Routed messages kept after bouncing between nodes whose ring views disagreed.
    pub bounced: u64,
    /// Peers declared failed after missed pings.
    pub failures_detected: u64,
    /// Leave-rejoin moves made by load balancing.
    pub lb_moves: u64,
    /// Subscriptions sent, and those suppressed by the subscription cache.
    pub subs_sent: u64,
    /// See `subs_sent`.
    pub subs_suppressed: u64,
    /// Jumps of published objects announced ahead of time (see [`Op::Publish`]).
    pub jumps_announced: u64,
    /// Discovery latency samples, µs: (routing to the first rendezvous, matching after it),
    /// one per subscription arrival that produced matches (paper Figure 10).
    pub discovery_latency: Vec<(u64, u64)>,
}

/// Where the node is with respect to the ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingState {
    /// Member of the ring, owning `(pred, pos]`.
    Active,
    /// Asked `contact` to split its range with us.
    Joining {
        /// The node asked.
        contact: NodeId,
        /// When.
        since: Time,
    },
    /// Not in the ring; routed traffic goes through `gateway`.
    Out {
        /// A ring member to route through.
        gateway: NodeId,
    },
}

/// Why a locator could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LocatorError {
    /// The member list is empty or does not contain this node.
    #[error("node {0} is not in the member list")]
    NotAMember(NodeId),
    /// The map bounds are invalid.
    #[error("invalid world bounds")]
    BadWorld,
    /// A configuration value other nodes would refuse or that cannot work.
    #[error("locator config: {0}")]
    BadConfig(String),
    /// A harness setup that cannot run.
    #[error("harness: {0}")]
    BadHarness(String),
}

/// A cached match at the subscriber (paper `000` §6.2: "upon reception of a pre-fetched
/// publication, a node will cache (for the length of the TTL) and periodically check
/// whether it actually desires the publishing object").
#[derive(Clone, Copy, Debug, PartialEq)]
struct Prefetched {
    primary: NodeId,
    pos: Point3,
    path: Option<PathOffset>,
    until: Time,
}

/// One node's object locator.
pub struct Locator {
    me: NodeId,
    cfg: LocatorConfig,
    keyer: Keyer,
    members: Vec<NodeId>,
    rng: DetRng,
    state: RingState,
    pos: Key,
    pred: Option<Peer>,
    pred_pred: Option<Peer>,
    succs: Vec<Peer>,
    longs: Vec<Peer>,
    cache: VecDeque<(Key, Key, Peer, Time)>,
    heard: BTreeMap<NodeId, Time>,
    dead: BTreeMap<Peer, Time>,
    index: MatchIndex,
    sub_info: DetMap<SubKey, SubItem>,
    pub_kind: DetMap<ObjectId, u8>,
    // Subscriber side.
    next_seq: u32,
    velocity: BTreeMap<ObjectId, VelocityEstimate>,
    sub_cache: SubscriptionCache,
    interest: Vec<Aabb>,
    prefetch: BTreeMap<ObjectId, Prefetched>,
    /// When each entry of `prefetch` lapses (its `until`).
    prefetch_due: Deadlines<ObjectId>,
    told: BTreeMap<ObjectId, Time>,
    /// When each entry of `told` leaves the retell period ([`retold_at`]).
    told_due: Deadlines<ObjectId>,
    // Publisher side.
    published: BTreeMap<ObjectId, (Point3, Time)>,
    /// Jumps announced ahead of time (see [`Op::Publish`]), per object: the point.
    announced: BTreeMap<ObjectId, Point3>,
    // Outputs.
    /// Encodes and decodes the locator's messages one variant at a time, keeping
    /// bitcode's buffers between them (`crates/sim/PERFORMANCE.md`, eleventh and twelfth
    /// rounds). The bytes of the derived bitcode encoding.
    codec: LocatorCodec,
    transmits: VecDeque<Transmit>,
    discoveries: VecDeque<Discovery>,
    pending: BTreeMap<NodeId, Vec<MatchItem>>,
    push_pending: BTreeMap<NodeId, BTreeSet<(ObjectId, NodeId)>>,
    pushes: VecDeque<PushRequest>,
    pushed: BTreeMap<(ObjectId, NodeId), Time>,
    /// When each entry of `pushed` leaves the retell period ([`retold_at`]).
    pushed_due: Deadlines<(ObjectId, NodeId)>,
    push_asked: BTreeMap<(ObjectId, NodeId), Time>,
    /// When each entry of `push_asked` leaves the quiet period ([`retold_at`] of
    /// `push_quiet`).
    push_asked_due: Deadlines<(ObjectId, NodeId)>,
    // Timers.
    next_ping: Time,
    next_link: Time,
    next_lb: Time,
    next_sweep: Time,
    // Load.
    load_buckets: VecDeque<(u64, u64)>,
    load_since: Time,
    lb_samples: VecDeque<(NodeId, u64, bool)>,
    lb_until: Time,
    stats: LocatorStats,
    now: Time,
}

fn ms(d: Duration) -> u32 {
    d.as_millis().min(u128::from(u32::MAX)) as u32
}

/// Position of member `i` of `n` in the initial ring: evenly spaced, the last at `u64::MAX`.
pub fn initial_position(i: usize, n: usize) -> Key {
    let n = n.max(1) as u128;
    ((((i as u128) + 1) << 64) / n)
        .saturating_sub(1)
        .min(u128::from(u64::MAX)) as u64
}

impl Locator {
    /// A locator for node `me`. `members` are all nodes that may ever take part (from
    /// config); `initial_ring` those that form the ring at `now`, placed evenly in id
    /// order (so every node computes the same ring without messages). If `me` is not in
    /// `initial_ring`, the locator starts outside and must [`Locator::join`].
    pub fn new(
        me: NodeId,
        cfg: LocatorConfig,
        members: &[NodeId],
        initial_ring: &[NodeId],
        seed: u64,
        now: Time,
    ) -> Result<Self, LocatorError> {
        let mut members = members.to_vec();
        members.sort();
        members.dedup();
        if members.binary_search(&me).is_err() {
            return Err(LocatorError::NotAMember(me));
        }
        if !cfg.world.is_valid() {
            return Err(LocatorError::BadWorld);
        }
        if cfg.pub_ttl.is_zero() || cfg.pub_ttl > cfg.max_ttl {
            return Err(LocatorError::BadConfig(format!(
                "pub_ttl {:?} must be in (0, max_ttl = {:?}]: rendezvous refuse other TTLs",
                cfg.pub_ttl, cfg.max_ttl
            )));
        }
        if cfg.pred_time.max(cfg.pub_time) > cfg.max_ttl {
            return Err(LocatorError::BadConfig(format!(
                "subscription TTL (PredTime {:?}, at least PubTime {:?}) exceeds max_ttl {:?}",
                cfg.pred_time, cfg.pub_time, cfg.max_ttl
            )));
        }
        if cfg.pub_interval.is_zero() || cfg.pub_interval > cfg.pub_ttl {
            return Err(LocatorError::BadConfig(format!(
                "pub_interval {:?} must be in (0, pub_ttl = {:?}]: publications would lapse",
                cfg.pub_interval, cfg.pub_ttl
            )));
        }
        let mut ring: Vec<NodeId> = initial_ring
            .iter()
            .copied()
            .filter(|n| members.contains(n))
            .collect();
        ring.sort();
        ring.dedup();
        if !(1..=LocatorConfig::MAX_SUB_RANGES_LIMIT).contains(&cfg.max_sub_ranges) {
            return Err(LocatorError::BadConfig(format!(
                "max_sub_ranges {} must be in [1, {}]",
                cfg.max_sub_ranges,
                LocatorConfig::MAX_SUB_RANGES_LIMIT
            )));
        }
        let keyer = Keyer::new(cfg.keying, cfg.world, cfg.dht_regions, cfg.salt)
            .with_range_key(cfg.range_key, cfg.max_sub_ranges)
            .with_chunk(if cfg.chunk_nodes == 0 || cfg.loadbal {
                0
            } else {
                let n = if cfg.chunk_members > 0 {
                    cfg.chunk_members
                } else {
                    members.len()
                };
                (u64::MAX / n as u64).saturating_mul(cfg.chunk_nodes as u64)
            });
        let cell = cfg.index_cell;
        let max_cells = {
            let side = (cfg.max_sub_extent / cell).ceil() as u64 + 1;
            side * side
        };
        let mut rng = DetRng::new(seed).fork(u64::from(me.0));
        let jitter = |rng: &mut DetRng, d: Duration| now + d.mul_f64(rng.next_f64());
        let next_ping = jitter(&mut rng, cfg.ping_interval);
        let next_link = jitter(&mut rng, cfg.link_refresh);
        let next_lb = jitter(&mut rng, cfg.lb_interval);
        let mut l = Self {
            me,
            keyer,
            members,
            rng,
            state: RingState::Out { gateway: me },
            pos: 0,
            pred: None,
            pred_pred: None,
            succs: Vec::new(),
            longs: Vec::new(),
            cache: VecDeque::new(),
            heard: BTreeMap::new(),
            dead: BTreeMap::new(),
            index: MatchIndex::new(cell, max_cells),
            sub_info: DetMap::default(),
            pub_kind: DetMap::default(),
            next_seq: 0,
            velocity: BTreeMap::new(),
            sub_cache: SubscriptionCache::default(),
            interest: Vec::new(),
            prefetch: BTreeMap::new(),
            prefetch_due: Deadlines::default(),
            told: BTreeMap::new(),
            told_due: Deadlines::default(),
            published: BTreeMap::new(),
            announced: BTreeMap::new(),
            codec: LocatorCodec::new(),
            transmits: VecDeque::new(),
            discoveries: VecDeque::new(),
            pending: BTreeMap::new(),
            push_pending: BTreeMap::new(),
            pushes: VecDeque::new(),
            pushed: BTreeMap::new(),
            pushed_due: Deadlines::default(),
            push_asked: BTreeMap::new(),
            push_asked_due: Deadlines::default(),
            next_ping,
            next_link,
            next_lb,
            next_sweep: now,
            load_buckets: VecDeque::new(),
            load_since: now,
            lb_samples: VecDeque::new(),
            lb_until: now + cfg.lb_cooldown,
            stats: LocatorStats {
                hops: vec![0; 64],
                ..LocatorStats::default()
            },
            cfg,
            now,
        };
        if let Ok(i) = ring.binary_search(&me) {
            let n = ring.len();
            let peer = |j: usize| Peer {
                id: ring[j % n],
                pos: initial_position(j % n, n),
            };
            l.state = RingState::Active;
            l.pos = initial_position(i, n);
            if n > 1 {
                l.pred = Some(peer(i + n - 1));
                l.pred_pred = (n > 2).then(|| peer(i + n - 2));
                l.succs = (1..n.min(l.cfg.successors + 1)).map(|k| peer(i + k)).collect();
                // Long links drawn from the known initial ring (what link requests would find).
                for _ in 0..l.cfg.long_links {
                    let target = l.long_link_target(n as f64);
                    let j = (0..n).find(|&j| initial_position(j, n) >= target).unwrap_or(0);
                    let p = peer(j);
                    if p.id != me && !l.longs.contains(&p) {
                        l.longs.push(p);
                    }
                }
            }
            let ids: Vec<NodeId> = l.neighbours();
            for id in ids {
                l.heard.insert(id, now);
            }
        } else if let Some(first) = ring.first() {
            l.state = RingState::Out { gateway: *first };
        }
        Ok(l)
    }

    /// This node.
    pub fn id(&self) -> NodeId {
        self.me
    }

    /// The configuration.
    pub fn config(&self) -> &LocatorConfig {
        &self.cfg
    }

    /// The keyer (game space → ring keys).
    pub fn keyer(&self) -> &Keyer {
        &self.keyer
    }

    /// Ring state.
    pub fn state(&self) -> RingState {
        self.state
    }

    /// The arc `(lo, hi]` this node owns, if in the ring.
    pub fn range(&self) -> Option<(Key, Key)> {
        (self.state == RingState::Active).then(|| (self.pred.map_or(self.pos, |p| p.pos), self.pos))
    }

    /// Successors, predecessor and long links.
    pub fn links(&self) -> (Option<Peer>, &[Peer], &[Peer]) {
        (self.pred, &self.succs, &self.longs)
    }

    /// Counters.
    pub fn stats(&self) -> &LocatorStats {
        &self.stats
    }

    /// The cached match (pre-fetched publication) for `id`: its primary, published
    /// position and when the cache entry lapses.
    pub fn prefetched(&self, id: ObjectId) -> Option<(NodeId, Point3, Time)> {
        self.prefetch.get(&id).map(|p| (p.primary, p.pos, p.until))
    }

    /// The end of a publication's path (its point for a point publication).
    fn reach(&self, pos: Point3, path: Option<PathOffset>) -> Point3 {
        path.map_or(pos, |o| o.end(pos, self.cfg.pub_move))
    }

    /// Where the path of a publication at `pos` first enters this node's current
    /// interest, if it does (a point publication: `pos` itself if inside).
    fn entry_point(&self, pos: Point3, path: Option<PathOffset>) -> Option<Point3> {
        let reach = self.reach(pos, path);
        self.interest
            .iter()
            .filter_map(|r| r.segment_entry(pos, reach))
            .min_by(|a, b| pos.distance(*a).total_cmp(&pos.distance(*b)))
    }

    /// When the node was last told about `id` (within the retell period), if at all.
    pub fn told_at(&self, id: ObjectId) -> Option<Time> {
        self.told.get(&id).copied()
    }

    /// The rendezvous store.
    pub fn store(&self) -> &MatchIndex {
        &self.index
    }

    /// Current load: items stored per second over the moving window.
    pub fn load(&self, now: Time) -> f64 {
        self.milli_load(now) as f64 / 1000.0
    }

    /// The next time [`Locator::handle_timeout`] must be called.
    pub fn poll_timeout(&self) -> Option<Time> {
        let mut t = self.next_sweep.min(self.next_ping).min(self.next_link);
        if self.cfg.loadbal {
            t = t.min(self.next_lb);
        }
        Some(t)
    }

    /// The next datagram to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }

    /// The next discovery for the node.
    pub fn poll_discovery(&mut self) -> Option<Discovery> {
        self.discoveries.pop_front()
    }

    /// The next push request for the node's replica manager.
    pub fn poll_push(&mut self) -> Option<PushRequest> {
        self.pushes.pop_front()
    }

    // ---------------------------------------------------------------- ring helpers

    fn neighbours(&self) -> Vec<NodeId> {
        let mut v: Vec<NodeId> = self.succs.first().map(|p| p.id).into_iter().collect();
        v.extend(self.pred.map(|p| p.id));
        v.extend(self.longs.iter().map(|p| p.id));
        v.sort();
        v.dedup();
        v.retain(|id| *id != self.me);
        v
    }

    /// Symphony: a clockwise distance drawn from the harmonic density `1/(x ln n)` on
    /// `[1/n, 1]` of the ring, i.e. `n^(u-1)` for uniform `u`.
    fn long_link_target(&mut self, n_est: f64) -> Key {
        let n = n_est.max(2.0);
        let frac = n.powf(self.rng.next_f64() - 1.0);
        self.pos.wrapping_add((frac * u64::MAX as f64) as u64)
    }

    /// Node-count estimate from the arc spanned by the predecessor and the successors.
    fn n_estimate(&self) -> f64 {
        let (Some(p), Some(last)) = (self.pred, self.succs.last()) else {
            return 1.0;
        };
        let span = cw(p.pos, last.pos) as f64;
        if span <= 0.0 {
            return 1.0;
        }
        (self.succs.len() + 1) as f64 * (u64::MAX as f64) / span
    }

    fn owns(&self, k: Key) -> bool {
        match self.pred {
            Some(p) => in_arc(k, p.pos, self.pos),
            None => self.succs.is_empty(),
        }
    }

    fn is_dead(&self, p: &Peer, now: Time) -> bool {
        self.dead.get(p).is_some_and(|t| *t > now)
    }

    fn adopt(&mut self, id: NodeId, now: Time) {
        let e = self.heard.entry(id).or_insert(now);
        *e = (*e).max(now);
    }

    /// Next hop towards `k`: (peer, whether the peer should own `k`).
    fn next_hop(&self, k: Key) -> Option<(Peer, bool)> {
        if let (Some(p), Some(pp)) = (self.pred, self.pred_pred)
            && in_arc(k, pp.pos, p.pos)
        {
            return Some((p, true));
        }
        if let Some(s) = self.succs.first()
            && in_arc(k, self.pos, s.pos)
        {
            return Some((*s, true));
        }
        let ttl = self.cfg.route_cache_ttl;
        if let Some((_, _, p, _)) = self.cache.iter().find(|(lo, hi, p, t)| {
            p.id != self.me && self.now.saturating_since(*t) <= ttl && in_arc(k, *lo, *hi)
        }) {
            return Some((*p, true));
        }
        let dk = cw(self.pos, k);
        let best = self
            .succs
            .iter()
            .chain(self.longs.iter())
            .filter(|p| p.id != self.me)
            .map(|p| (cw(self.pos, p.pos), *p))
            .filter(|(d, _)| *d > 0 && *d < dk)
            .max_by_key(|(d, _)| *d)
            .map(|(_, p)| p);
        best.or(self.succs.first().copied())
            .or(self.pred)
            .map(|p| (p, false))
    }

    fn learn_route(&mut self, lo: Key, hi: Key, from: NodeId) {
        if from == self.me || lo == hi || self.cfg.route_cache == 0 {
            return;
        }
        // The cache holds at most one route per peer (every insertion is this one), so
        // taking out `from`'s is what `retain(|(_, _, p, _)| p.id != from)` does, without moving
        // every entry (2 % of a `dht` run's instructions: `crates/sim/PERFORMANCE.md`,
        // eleventh round).
        if let Some(i) = self.cache.iter().position(|(_, _, p, _)| p.id == from) {
            self.cache.remove(i);
        }
        debug_assert!(
            self.cache.iter().all(|(_, _, p, _)| p.id != from),
            "two routes to {from}"
        );
        self.cache
            .push_front((lo, hi, Peer { id: from, pos: hi }, self.now));
        self.cache.truncate(self.cfg.route_cache);
    }

    // ---------------------------------------------------------------- sending

    fn send(&mut self, dst: NodeId, msg: &LocatorMsg) {
        let class = msg.class();
        match self.codec.encode(msg) {
            Ok(datagram) => {
                self.stats.traffic.on_send(class, datagram.len());
                self.transmits.push_back(Transmit { dst, class, datagram });
            }
            Err(_) => self.stats.rejected.oversize += 1,
        }
    }

    fn flush_matches(&mut self) {
        let pushes = std::mem::take(&mut self.push_pending);
        for (primary, items) in pushes {
            let items: Vec<PushItem> = items
                .into_iter()
                .map(|(object, subscriber)| PushItem { object, subscriber })
                .collect();
            self.stats.pushes_sent += items.len() as u64;
            if primary == self.me {
                self.on_push(items);
                continue;
            }
            for chunk in items.chunks(BATCH) {
                self.send(
                    primary,
                    &LocatorMsg::Push {
                        items: chunk.to_vec(),
                    },
                );
            }
        }
        let pending = std::mem::take(&mut self.pending);
        let (lo, hi) = self.range().unwrap_or((self.pos, self.pos));
        for (dst, items) in pending {
            self.stats.matches_sent += items.len() as u64;
            if dst == self.me {
                self.on_matches(items);
                continue;
            }
            for chunk in items.chunks(BATCH) {
                self.send(
                    dst,
                    &LocatorMsg::Matches {
                        lo,
                        hi,
                        items: chunk.to_vec(),
                    },
                );
            }
        }
    }

    /// Routes `r` one step from here (or delivers it here).
    fn route(&mut self, now: Time, mut r: Routed) {
        match self.state {
            RingState::Active => {}
            RingState::Out { gateway } | RingState::Joining { contact: gateway, .. } => {
                if gateway != self.me {
                    if r.hops >= self.cfg.max_hops {
                        self.stats.rejected.hop_limit += 1;
                        return;
                    }
                    if r.origin != self.me {
                        r.hops += 1;
                    }
                    r.last = false;
                    self.send(gateway, &LocatorMsg::Route(r));
                }
                return;
            }
        }
        if self.owns(r.key) || (self.pred.is_none() && r.last) {
            self.deliver(now, r);
            return;
        }
        if r.last {
            // The sender thought we own the key; our view disagrees (a neighbour joined,
            // left or failed). Bounded: after a few bounces keep it here.
            r.bounces = r.bounces.saturating_add(1);
            if r.bounces > Routed::MAX_BOUNCES {
                self.stats.bounced += 1;
                self.deliver(now, r);
                return;
            }
        }
        if r.hops >= self.cfg.max_hops {
            self.stats.rejected.hop_limit += 1;
            return;
        }
        let Some((peer, last)) = self.next_hop(r.key) else {
            self.deliver(now, r);
            return;
        };
        r.hops += 1;
        r.last = last;
        self.send(peer.id, &LocatorMsg::Route(r));
    }

    fn deliver(&mut self, now: Time, r: Routed) {
        if r.origin != self.me && r.hops >= 2 && !matches!(r.payload, Payload::LinkReq) {
            let (lo, hi) = self.range().unwrap_or((self.pos, self.pos));
            self.send(r.origin, &LocatorMsg::RouteHint { lo, hi });
        }
        match r.payload {
            Payload::Pub(p) => {
                self.stats.hops[usize::from(r.hops.min(63))] += 1;
                self.store_pub(now, p);
            }
            Payload::Sub(mut s) => {
                self.stats.hops[usize::from(r.hops.min(63))] += 1;
                s.reached = now;
                self.store_sub(now, s, true);
            }
            Payload::LinkReq => {
                if r.origin != self.me {
                    self.send(r.origin, &LocatorMsg::LinkAck { pos: self.pos });
                }
            }
        }
        self.flush_matches();
    }

    // ---------------------------------------------------------------- rendezvous

    fn count_load(&mut self, now: Time) {
        self.stats.items_stored += 1;
        let sec = now.as_micros() / 1_000_000;
        match self.load_buckets.back_mut() {
            Some((s, c)) if *s == sec => *c += 1,
            _ => self.load_buckets.push_back((sec, 1)),
        }
        let window = self.cfg.lb_window.as_secs().max(1);
        while self.load_buckets.front().is_some_and(|(s, _)| s + window <= sec) {
            self.load_buckets.pop_front();
        }
    }

    fn milli_load(&self, now: Time) -> u64 {
        let window = self.cfg.lb_window.as_secs().max(1);
        let sec = now.as_micros() / 1_000_000;
        let sum: u64 = self
            .load_buckets
            .iter()
            .filter(|(s, _)| s + window > sec)
            .map(|(_, c)| c)
            .sum();
        let span = now.saturating_since(self.load_since).as_secs().clamp(1, window);
        sum * 1000 / span
    }

    fn store_pub(&mut self, now: Time, p: PubItem) {
        let expires = now + Duration::from_millis(u64::from(p.ttl_ms));
        let sp = StoredPub {
            primary: p.primary,
            pos: p.pos,
            path: p.path,
            expires,
        };
        if self.index.insert_pub(p.object, sp).is_err() {
            self.stats.rejected.bad_geometry += 1;
            return;
        }
        self.pub_kind.insert(p.object, p.kind);
        self.count_load(now);
        let mut to: BTreeSet<NodeId> = BTreeSet::new();
        let mut keys: Vec<SubKey> = Vec::new();
        self.index.subs_containing(p.pos, now, |k, _| {
            if k.node != p.primary {
                to.insert(k.node);
                keys.push(k);
            }
        });
        if self.cfg.push {
            let reach = self.reach(p.pos, p.path);
            for k in keys {
                if self
                    .sub_info
                    .get(&k)
                    .is_some_and(|s| s.core.segment_entry(p.pos, reach).is_some())
                {
                    self.ask_push(now, p.primary, p.object, k.node);
                }
            }
        }
        for node in to {
            self.pending.entry(node).or_default().push(MatchItem {
                object: p.object,
                primary: p.primary,
                pos: p.pos,
                path: p.path,
                ttl_ms: p.ttl_ms,
            });
        }
    }

    fn store_sub(&mut self, now: Time, s: SubItem, relay: bool) {
        let expires = now + Duration::from_millis(u64::from(s.ttl_ms));
        let fresh = self.index.sub(s.key).is_none_or(|e| e.bbox != s.bbox);
        match self.index.insert_sub(
            s.key,
            StoredSub {
                bbox: s.bbox,
                expires,
            },
        ) {
            Ok(()) => {}
            Err(IndexError::Invalid) => {
                self.stats.rejected.bad_geometry += 1;
                return;
            }
            Err(IndexError::Oversize { .. }) => {
                self.stats.rejected.oversize += 1;
                return;
            }
        }
        self.sub_info.insert(s.key, s);
        if fresh {
            self.count_load(now);
            let mut found = Vec::new();
            self.index.pubs_inside(&s.bbox, now, |id, p| {
                if p.primary != s.key.node {
                    found.push(MatchItem {
                        object: id,
                        primary: p.primary,
                        pos: p.pos,
                        path: p.path,
                        ttl_ms: ms(p.expires.saturating_since(now)),
                    });
                }
            });
            if !found.is_empty() && self.stats.discovery_latency.len() < MAX_SAMPLES {
                let route = s.reached.saturating_since(s.sent).as_micros() as u64;
                let matching = now.saturating_since(s.reached).as_micros() as u64;
                self.stats.discovery_latency.push((route, matching));
            }
            if self.cfg.push {
                let pushes: Vec<&MatchItem> = found
                    .iter()
                    .filter(|m| s.core.segment_entry(m.pos, self.reach(m.pos, m.path)).is_some())
                    .collect();
                for m in pushes {
                    self.ask_push(now, m.primary, m.object, s.key.node);
                }
            }
            if !found.is_empty() {
                self.pending.entry(s.key.node).or_default().extend(found);
            }
        }
        if relay && self.keyer.is_range() {
            self.spread(s);
        }
    }

    /// Queues a push request to `primary` for `object` → `subscriber`, unless this
    /// rendezvous asked for the same within `push_quiet`.
    fn ask_push(&mut self, now: Time, primary: NodeId, object: ObjectId, subscriber: NodeId) {
        let quiet = self.cfg.push_quiet;
        let key = (object, subscriber);
        if self
            .push_asked
            .get(&key)
            .is_some_and(|t| now.saturating_since(*t) < quiet)
        {
            return;
        }
        self.push_asked.insert(key, now);
        self.push_asked_due.push(retold_at(now, quiet), key);
        self.push_pending.entry(primary).or_default().insert(key);
    }

    /// `rangedht`: spreads a subscription over the successors covering the rest of its key
    /// range `[lo, hi]`. All known successors inside the range get it at once; the farthest
    /// one relays it further if the range goes on (Mercury spreads along successors; the
    /// fan-out over the successor list cuts the sequential delay by the list length).
    fn spread(&mut self, s: SubItem) {
        let span = cw(s.lo, s.hi);
        let mut prev = self.pos;
        let mut targets: Vec<Peer> = Vec::new();
        for p in &self.succs {
            // p owns (prev, p.pos]: it intersects the range if prev is before hi, and the
            // walk must move clockwise (no wrap back over the range start).
            if cw(s.lo, prev) >= span || cw(s.lo, p.pos) <= cw(s.lo, prev) || p.id == self.me {
                break;
            }
            targets.push(*p);
            prev = p.pos;
        }
        let n = targets.len();
        let mut prev = self.pos;
        for (i, p) in targets.into_iter().enumerate() {
            let relay = i + 1 == n && cw(s.lo, p.pos) < span;
            self.send(p.id, &LocatorMsg::Spread { sub: s, relay, prev });
            prev = p.pos;
        }
    }

    /// Repairs a gap in a spreading: the sender thought this node's range starts at
    /// `prev`, but our predecessor sits strictly between `prev` and us (the sender's
    /// successor list is stale, e.g. the predecessor just re-joined here by a leave-rejoin
    /// move, paper `000` §6.3). The predecessor's range intersects the subscription, so
    /// it gets the subscription too (without relay: we cover what follows), and repeats
    /// the check against the same `prev` until the gap is closed.
    fn fill_spread_gap(&mut self, s: SubItem, prev: Key) {
        let Some(p) = self.pred else { return };
        let span = cw(s.lo, s.hi);
        // p owns (pp, p.pos]: below us, it intersects [lo, hi] iff p.pos lies in it.
        let in_gap = p.pos != prev && p.pos != self.pos && in_arc(p.pos, prev, self.pos);
        if p.id == self.me || !in_gap || cw(s.lo, p.pos) > span {
            return;
        }
        self.send(
            p.id,
            &LocatorMsg::Spread {
                sub: s,
                relay: false,
                prev,
            },
        );
    }

    // ---------------------------------------------------------------- port

    /// Routes a publication of `id` at `pos`, covering the path `pos → reach`, to the
    /// owner of `pos`'s key (soft state with the publication TTL).
    ///
    /// Why the owner of `pos` alone suffices for a range publication: its path is at most
    /// the publication margin `pub_move` long, and every subscription is enlarged by at
    /// least that margin on every side (see [`crate::prediction`]), so any subscription
    /// whose unpredicted interest meets the path contains `pos` itself — and is therefore
    /// stored at `pos`'s owner, where the publication is matched by its point.
    fn publish(&mut self, now: Time, id: ObjectId, pos: Point3, path: Option<PathOffset>, kind: u8) {
        let r = Routed {
            origin: self.me,
            key: self.keyer.point_key(pos),
            hops: 0,
            last: false,
            bounces: 0,
            payload: Payload::Pub(PubItem {
                object: id,
                primary: self.me,
                pos,
                path,
                kind,
                ttl_ms: ms(self.cfg.pub_ttl),
            }),
        };
        self.route(now, r);
    }

    /// The path a publication at `pos` covers: towards the node's predictive publication
    /// `ahead` when that is motion (not farther than `jump`), cut to the publication
    /// margin; none (a point publication) without prediction, for jumps, or when range
    /// publications are off.
    fn path_of(&self, pos: Point3, ahead: Option<Point3>, jump: f32) -> Option<PathOffset> {
        let a = ahead.filter(|a| self.cfg.range_pubs && a.is_finite() && a.distance(pos) <= jump)?;
        PathOffset::between(pos, a, self.cfg.pub_move)
    }

    /// Takes the node's locator operations of one frame (every primary's publication and
    /// interest): publishes moved or due primaries, refreshes subscriptions not covered by
    /// the subscription cache (predicted, aggregated), and checks cached matches against
    /// the current interest.
    pub fn apply_ops(&mut self, now: Time, ops: impl IntoIterator<Item = Op>) {
        self.now = self.now.max(now);
        self.interest.clear();
        let mut seen_pub = BTreeSet::new();
        let mut seen_sub = BTreeSet::new();
        let mut to_send = Vec::new();
        let needed_p = self.cfg.prediction(Duration::ZERO);
        let pred_p = self.cfg.prediction(self.cfg.pred_time);
        self.sub_cache.prune(now, self.cfg.pub_time);
        for op in ops {
            match op {
                Op::Publish { id, pos, kind, ahead } => {
                    if !pos.is_finite() {
                        self.stats.rejected.bad_ops += 1;
                        continue;
                    }
                    seen_pub.insert(id);
                    let due = self.published.get(&id).is_none_or(|(p, t)| {
                        now.saturating_since(*t) >= self.cfg.pub_interval
                            || p.distance(pos) >= self.cfg.pub_move
                    });
                    let jump = self.cfg.max_speed * self.cfg.pred_time.as_secs_f32();
                    if due {
                        self.published.insert(id, (pos, now));
                        let path = self.path_of(pos, ahead, jump);
                        self.publish(now, id, pos, path, kind);
                    }
                    // A jump announced ahead of time: routed once to the owner of its point.
                    match ahead.filter(|a| a.is_finite() && a.distance(pos) > jump) {
                        Some(a) if self.announced.get(&id) != Some(&a) => {
                            self.announced.insert(id, a);
                            self.stats.jumps_announced += 1;
                            self.publish(now, id, a, None, kind);
                        }
                        Some(_) => {}
                        None => {
                            self.announced.remove(&id);
                        }
                    }
                }
                Op::Subscribe { owner, region } => {
                    if !region.is_valid() {
                        self.stats.rejected.bad_ops += 1;
                        continue;
                    }
                    seen_sub.insert(owner);
                    self.interest.push(region);
                    let v = self.velocity.entry(owner).or_default().update(
                        now,
                        region.center(),
                        self.cfg.max_speed,
                    );
                    let needed = enlarge(&region, v, &needed_p);
                    if self.sub_cache.covers(&needed) {
                        self.stats.subs_suppressed += 1;
                    } else {
                        // A prediction too large to register falls back to the needed box.
                        let predicted = enlarge(&region, v, &pred_p);
                        to_send.push((if self.fits(&predicted) { predicted } else { needed }, region));
                    }
                }
            }
        }
        self.published.retain(|id, _| seen_pub.contains(id));
        self.announced.retain(|id, _| seen_pub.contains(id));
        self.velocity.retain(|id, _| seen_sub.contains(id));
        let boxes: Vec<Aabb> = to_send.iter().map(|(b, _)| *b).collect();
        for b in aggregate(boxes, self.cfg.aggregate_factor) {
            // The unpredicted interest this box stands for: the regions of the boxes it took in.
            let core = to_send
                .iter()
                .filter(|(p, _)| box_contains(&b, p))
                .map(|(_, r)| *r)
                .reduce(|a, r| a.union(&r))
                .unwrap_or(b);
            // Only what was registered may suppress later subscriptions.
            if self.send_subscription(now, b, core) {
                self.sub_cache.insert(b, now + self.cfg.pred_time);
            }
        }
        self.flush_matches();
        self.check_interest(now);
    }

    /// True if `bbox` is within the subscription size limit.
    fn fits(&self, bbox: &Aabb) -> bool {
        let ext = self.cfg.max_sub_extent;
        bbox.max.x - bbox.min.x <= ext && bbox.max.y - bbox.min.y <= ext
    }

    /// Routes a subscription for `bbox` to its rendezvous; false if it could not be sent
    /// (oversize), in which case nothing was registered.
    fn send_subscription(&mut self, now: Time, bbox: Aabb, core: Aabb) -> bool {
        if !self.fits(&bbox) {
            self.stats.rejected.oversize += 1;
            return false;
        }
        self.next_seq = self.next_seq.wrapping_add(1);
        self.stats.subs_sent += 1;
        let mut item = SubItem {
            key: SubKey {
                node: self.me,
                seq: self.next_seq,
            },
            bbox,
            core,
            // TTL = PredTime (paper §6.2), but never below PubTime: a zero TTL would be
            // refused at the rendezvous, and PubTime is the delivery allowance anyway.
            ttl_ms: ms(self.cfg.pred_time.max(self.cfg.pub_time)).max(1),
            lo: 0,
            hi: 0,
            sent: now,
            reached: now,
        };
        // One routed message per key interval (rangedht: one per axis interval, a few
        // along the Hilbert curve; dht: one per region).
        let Some(keys) = self.keyer.ranges(&bbox, MAX_REGIONS) else {
            self.stats.rejected.oversize += 1;
            return false;
        };
        for (lo, hi) in keys {
            item.lo = lo;
            item.hi = hi;
            let r = Routed {
                origin: self.me,
                key: lo,
                hops: 0,
                last: false,
                bounces: 0,
                payload: Payload::Sub(item),
            };
            self.route(now, r);
        }
        true
    }

    /// Caches received matches (pre-fetched publications) and tells the node about those
    /// whose published point or path meets its current unpredicted interest (at the
    /// point where the path enters it).
    fn on_matches(&mut self, items: Vec<MatchItem>) {
        let now = self.now;
        let retell = self.cfg.retell;
        for m in items {
            if m.primary == self.me {
                continue;
            }
            let until = now + Duration::from_millis(u64::from(m.ttl_ms));
            self.prefetch_due.push(until, m.object);
            self.prefetch.insert(
                m.object,
                Prefetched {
                    primary: m.primary,
                    pos: m.pos,
                    path: m.path,
                    until,
                },
            );
            let recently = self
                .told
                .get(&m.object)
                .is_some_and(|t| now.saturating_since(*t) < retell);
            if recently {
                continue;
            }
            if let Some(at) = self.entry_point(m.pos, m.path) {
                self.tell(now, m.object, m.primary, at);
            }
        }
    }

    /// Push requests for this node's primaries: handed to the node, at most once per
    /// (object, subscriber) per retell period. Requests naming a non-member or this node
    /// are refused; requests for objects this node does not publish (deleted meanwhile, or
    /// forged) are dropped and counted in `pushes_stale`.
    fn on_push(&mut self, items: Vec<PushItem>) {
        let now = self.now;
        let retell = self.cfg.retell;
        for it in items {
            if it.subscriber == self.me || self.members.binary_search(&it.subscriber).is_err() {
                self.stats.rejected.unexpected += 1;
                continue;
            }
            if !self.published.contains_key(&it.object) {
                // Deleted since it was published (a missile), or never ours: nothing to push.
                self.stats.pushes_stale += 1;
                continue;
            }
            let key = (it.object, it.subscriber);
            if self
                .pushed
                .get(&key)
                .is_some_and(|t| now.saturating_since(*t) < retell)
            {
                continue;
            }
            self.pushed.insert(key, now);
            self.pushed_due.push(retold_at(now, retell), key);
            self.stats.pushes_served += 1;
            self.pushes.push_back(PushRequest {
                object: it.object,
                subscriber: it.subscriber,
            });
        }
    }

    fn tell(&mut self, now: Time, object: ObjectId, primary: NodeId, pos: Point3) {
        self.told.insert(object, now);
        self.told_due.push(retold_at(now, self.cfg.retell), object);
        self.stats.discoveries += 1;
        self.discoveries.push_back(Discovery { object, primary, pos });
    }

    /// Forgets the cached matches, matches told and pushes served that expired, and tells
    /// the node about every cached match in its interest it was not told about lately:
    /// after this, no cached match left untold meets the interest (the invariant
    /// [`Locator::check_retold`] relies on). Runs where the interest changes.
    fn check_interest(&mut self, now: Time) {
        self.expire_subscriber_side(now, |_| {});
        let due = self.untold_in_interest();
        for (id, primary, pos) in due {
            self.tell(now, id, primary, pos);
        }
    }

    /// [`Locator::check_interest`] for the periodic sweep, when the interest is the one the
    /// last check saw. Then a cached match left untold met the interest at that check or at
    /// its arrival (`on_matches` tests every match not told lately), and missed it, or it
    /// was told since; so the only ones that can meet it now are those whose retell period
    /// ended in this sweep, and only they are tested, in the same id order. Before, every
    /// sweep (ten per simulated second, beside the check at every frame) tested every
    /// untold cached match against every box of the interest (`crates/sim/PERFORMANCE.md`,
    /// twenty-third round).
    fn check_retold(&mut self, now: Time) {
        let mut retold = Vec::new();
        self.expire_subscriber_side(now, |id| retold.push(id));
        retold.sort_unstable();
        let due: Vec<(ObjectId, NodeId, Point3)> = retold
            .into_iter()
            .filter_map(|id| {
                let p = self.prefetch.get(&id).filter(|p| p.primary != self.me)?;
                Some((id, p.primary, self.entry_point(p.pos, p.path)?))
            })
            .collect();
        debug_assert_eq!(due, self.untold_in_interest(), "only retold matches can be due");
        for (id, primary, pos) in due {
            self.tell(now, id, primary, pos);
        }
    }

    /// Drops the expired entries of the subscriber's maps, calling `retold` with every
    /// match whose retell period ended. As `retain(|_, t| now.saturating_since(*t) <
    /// retell)` and `retain(|_, p| p.until > now)` would, visiting only the entries due.
    fn expire_subscriber_side(&mut self, now: Time, retold: impl FnMut(ObjectId)) {
        let retell = self.cfg.retell;
        self.prefetch_due.expire(now, &mut self.prefetch, |p| p.until);
        self.told_due
            .expire_each(now, &mut self.told, |t| retold_at(*t, retell), retold);
        self.pushed_due
            .expire(now, &mut self.pushed, |t| retold_at(*t, retell));
    }

    /// The cached matches not told lately that meet the interest, in id order, with the
    /// point where each enters it.
    fn untold_in_interest(&self) -> Vec<(ObjectId, NodeId, Point3)> {
        // Both maps walked side by side in id order (a lookup in `told` per cached match
        // was most of this walk's instructions).
        let mut told = self.told.keys().peekable();
        self.prefetch
            .iter()
            .filter(|(id, p)| {
                while told.next_if(|t| *t < *id).is_some() {}
                p.primary != self.me && told.peek() != Some(id)
            })
            .filter_map(|(id, p)| Some((*id, p.primary, self.entry_point(p.pos, p.path)?)))
            .collect()
    }
}

/// The locator as the engine drives it (`worldmesh_core::Machine`).
impl worldmesh_core::Machine for Locator {
    type Datagram = Vec<u8>;
    type Event = Output;

    fn handle_datagram(&mut self, now: Time, from: NodeId, datagram: Vec<u8>) {
        Locator::handle_datagram(self, now, from, &datagram);
    }

    fn handle_timeout(&mut self, now: Time) {
        Locator::handle_timeout(self, now);
    }

    fn poll_transmit(&mut self) -> Option<Transmit> {
        Locator::poll_transmit(self)
    }

    fn poll_timeout(&self) -> Option<Time> {
        Locator::poll_timeout(self)
    }

    fn poll_event(&mut self) -> Option<Output> {
        self.poll_discovery()
            .map(Output::Discovery)
            .or_else(|| self.poll_push().map(Output::Push))
    }
}
