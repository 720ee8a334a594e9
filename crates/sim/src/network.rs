//! The network model.
//!
//! Each simulated node is mapped onto a row of a latency matrix. With at most as many
//! nodes as rows, rows are drawn without replacement; with more nodes, rows are drawn
//! with replacement and every node gets a small access delay, so that two nodes on the
//! same row are still apart (BRIEF §4). A datagram from `a` to `b` then takes
//!
//! ```text
//! delay = RTT(row a, row b) / 2 + access(a) + access(b) + U(0, jitter)
//! ```
//!
//! and is lost with probability `loss`, duplicated with probability `duplicate` (the copy
//! takes its own jitter), and dropped while `a` and `b` are on different sides of an
//! active partition.
//!
//! Each sender draws its datagrams' loss, jitter and duplication from a random stream of
//! its own, forked from the seed by node id: a datagram's fate depends on what its sender
//! sent before, never on what other nodes sent meanwhile, which is what lets the engine
//! run nodes on several threads with the same results ([`worldmesh_engine::ParallelLinks`]).

use crate::refusal::Refusals;
use serde::{Deserialize, Serialize};
use std::time::Duration;
use worldmesh_core::{DetRng, LatencyMatrix, NodeId, Time};

/// A partition: during `[from_s, until_s)` the listed nodes and all the others cannot
/// reach each other.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PartitionSpec {
    /// Start, seconds of simulated time.
    pub from_s: f64,
    /// End (exclusive), seconds.
    pub until_s: f64,
    /// The nodes on one side (node ids); everyone else is on the other side.
    pub nodes: Vec<u32>,
}

/// Network parameters (the `[network]` table of a simulation config).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NetworkConfig {
    /// Latency source: `planetlab` (the shipped 490-host PlanetLab matrix),
    /// `uniform:RTT_MS` (every pair the same), or a path to a whitespace or CSV matrix.
    pub latency: String,
    /// Extra one-way delay drawn uniformly from `[0, jitter_ms]` per datagram.
    pub jitter_ms: f64,
    /// Probability that a datagram is lost.
    pub loss: f64,
    /// Probability that a datagram is delivered twice.
    pub duplicate: f64,
    /// Largest access delay (one way, per node) when nodes outnumber matrix rows;
    /// each node draws its own from `[0, access_delay_ms]`.
    pub access_delay_ms: f64,
    /// Scheduled partitions.
    pub partitions: Vec<PartitionSpec>,
}

impl Default for NetworkConfig {
    fn default() -> Self {
        Self {
            latency: "planetlab".into(),
            jitter_ms: 0.0,
            loss: 0.0,
            duplicate: 0.0,
            access_delay_ms: 5.0,
            partitions: Vec::new(),
        }
    }
}

pub use worldmesh_engine::{Fate, NetworkStats};

/// The network model for a fixed set of nodes.
#[derive(Clone, Debug)]
pub struct NetworkModel {
    matrix: LatencyMatrix,
    row: Vec<usize>,
    access: Vec<Duration>,
    /// Every pair's base delay in nanoseconds, `a * nodes + b` (see [`BaseDelays`]).
    base: BaseDelays,
    jitter: Duration,
    loss: f64,
    duplicate: f64,
    /// Partitions as (from, until, side membership per node).
    partitions: Vec<(Time, Time, Vec<bool>)>,
    manual_partition: Option<Vec<bool>>,
    /// Nodes whose datagrams to the others are dropped (they still hear the others).
    muted: Option<Vec<bool>>,
    /// Each sender's random stream (loss, jitter, duplication), by node id.
    senders: Vec<DetRng>,
    /// What the senders' streams are forked from (a node beyond the first `nodes` gets
    /// its stream when it first sends).
    root: DetRng,
    /// The transports' refusals of generations held declared down, if modelled
    /// ([`NetworkModel::refuse_declared_down`]).
    refusals: Option<Refusals>,
}

impl NetworkModel {
    /// Maps `nodes` nodes onto `matrix` (see the module docs) using `rng` for the draw.
    pub fn new(matrix: LatencyMatrix, nodes: usize, cfg: &NetworkConfig, rng: &DetRng) -> Self {
        let mut draw = rng.fork(0x6e65_7477);
        let rows = matrix.len().max(1);
        let (row, access) = if nodes <= rows {
            let mut all: Vec<usize> = (0..rows).collect();
            draw.shuffle(&mut all);
            (all[..nodes].to_vec(), vec![Duration::ZERO; nodes])
        } else {
            let row = (0..nodes).map(|_| draw.index(rows)).collect();
            let access = (0..nodes)
                .map(|_| Duration::from_secs_f64(draw.range_f64(0.0, cfg.access_delay_ms.max(0.0)) / 1000.0))
                .collect();
            (row, access)
        };
        let root = rng.fork(0x6c6f_7373);
        let partitions = cfg
            .partitions
            .iter()
            .map(|p| {
                let mut side = vec![false; nodes];
                for n in &p.nodes {
                    if let Some(s) = side.get_mut(*n as usize) {
                        *s = true;
                    }
                }
                (
                    Time::from_secs_f64(p.from_s),
                    Time::from_secs_f64(p.until_s),
                    side,
                )
            })
            .collect();
        let base = BaseDelays::new(nodes, |a, b| base_delay(&matrix, &row, &access, a, b));
        Self {
            matrix,
            row,
            access,
            base,
            jitter: Duration::from_secs_f64(cfg.jitter_ms.max(0.0) / 1000.0),
            loss: cfg.loss,
            duplicate: cfg.duplicate,
            partitions,
            manual_partition: None,
            muted: None,
            senders: (0..nodes as u64).map(|i| root.fork(i)).collect(),
            root,
            refusals: None,
        }
    }

    /// Models the transports' refusals of a generation held declared down from now on
    /// (see [`crate::refusal`]), node `i` running as `generations[i]`. The driver of the
    /// simulation keeps them current from the nodes' events.
    pub fn refuse_declared_down(&mut self, generations: Vec<u32>) {
        self.refusals = Some(Refusals::new(generations));
    }

    /// The transports' refusals, if modelled.
    pub fn refusals(&self) -> Option<&Refusals> {
        self.refusals.as_ref()
    }

    /// The transports' refusals, if modelled (to keep them current).
    pub fn refusals_mut(&mut self) -> Option<&mut Refusals> {
        self.refusals.as_mut()
    }

    /// The latency-matrix row node `node` is mapped onto, and the matrix.
    pub fn row_of(&self, node: NodeId) -> Option<(usize, &LatencyMatrix)> {
        self.row.get(node.0 as usize).map(|r| (*r, &self.matrix))
    }

    /// The latency matrix the nodes are mapped onto.
    pub fn matrix(&self) -> &LatencyMatrix {
        &self.matrix
    }

    /// Rows of the latency matrix.
    pub fn rows(&self) -> usize {
        self.matrix.len()
    }

    /// Number of nodes mapped.
    pub fn nodes(&self) -> usize {
        self.row.len()
    }

    /// The base one-way delay from `a` to `b` (no jitter).
    pub fn base_delay(&self, a: NodeId, b: NodeId) -> Duration {
        let (a, b) = (a.0 as usize, b.0 as usize);
        match self.base.get(a, b) {
            Some(d) => d,
            None => base_delay(&self.matrix, &self.row, &self.access, a, b),
        }
    }

    /// The largest one-way delay from `a` to `b` including jitter.
    pub fn max_delay(&self, a: NodeId, b: NodeId) -> Duration {
        self.base_delay(a, b) + self.jitter
    }

    /// Cuts the listed nodes off from everyone else until [`NetworkModel::heal`].
    pub fn partition(&mut self, side: &[NodeId]) {
        let mut s = vec![false; self.row.len()];
        for n in side {
            if let Some(x) = s.get_mut(n.0 as usize) {
                *x = true;
            }
        }
        self.manual_partition = Some(s);
    }

    /// A one-way partition: datagrams from `side` to nodes outside it are dropped, while
    /// `side` still hears the others (until [`NetworkModel::heal`]).
    pub fn mute(&mut self, side: &[NodeId]) {
        let mut s = vec![false; self.row.len()];
        for n in side {
            if let Some(x) = s.get_mut(n.0 as usize) {
                *x = true;
            }
        }
        self.muted = Some(s);
    }

    /// Sets the loss and duplication probabilities from now on (e.g. a faulty network that
    /// becomes healthy).
    pub fn set_faults(&mut self, loss: f64, duplicate: f64) {
        self.loss = loss.clamp(0.0, 1.0);
        self.duplicate = duplicate.clamp(0.0, 1.0);
    }

    /// Removes a manual partition (both ways and one way).
    pub fn heal(&mut self) {
        self.manual_partition = None;
        self.muted = None;
    }

    fn cut(&self, now: Time, a: usize, b: usize) -> bool {
        if let Some(s) = &self.manual_partition
            && s[a] != s[b]
        {
            return true;
        }
        if let Some(m) = &self.muted
            && m[a]
            && !m[b]
        {
            return true;
        }
        self.partitions
            .iter()
            .any(|(from, until, s)| *from <= now && now < *until && s[a] != s[b])
    }

    /// Decides the fate of a datagram sent from `a` to `b` at `now`, drawing from `a`'s
    /// own random stream.
    pub fn route(&mut self, now: Time, a: NodeId, b: NodeId) -> Fate {
        let cut = self.cut(now, a.0 as usize, b.0 as usize);
        if !cut && self.refusals.is_some() {
            let answered = !self.cut(now, b.0 as usize, a.0 as usize);
            if self.refusals.as_mut().is_some_and(|r| r.refuses(a, b, answered)) {
                return Fate::Partitioned;
            }
        }
        let mut rng = self.take_stream(a);
        let fate = self.fate(&mut rng, cut, a, b);
        self.senders[a.0 as usize] = rng;
        fate
    }

    /// Takes `src`'s random stream out (forking it first if `src` has not sent yet); put
    /// it back in `senders[src]`.
    fn take_stream(&mut self, src: NodeId) -> DetRng {
        let i = src.0 as usize;
        while self.senders.len() <= i {
            let next = self.root.fork(self.senders.len() as u64);
            self.senders.push(next);
        }
        std::mem::replace(&mut self.senders[i], DetRng::new(0))
    }

    /// The fate of a datagram from `a` to `b`, drawn from `rng` (`a`'s stream); `cut`:
    /// a partition or a mute stands between them now.
    fn fate(&self, rng: &mut DetRng, cut: bool, a: NodeId, b: NodeId) -> Fate {
        if cut {
            return Fate::Partitioned;
        }
        if rng.chance(self.loss) {
            return Fate::Lost;
        }
        let base = self.base_delay(a, b);
        let jitter = self.jitter.as_secs_f64();
        let first = base + Duration::from_secs_f64(rng.next_f64() * jitter);
        let second = rng
            .chance(self.duplicate)
            .then(|| base + Duration::from_secs_f64(rng.next_f64() * jitter));
        Fate::Deliver(first, second)
    }
}

/// The base one-way delay from node `a` to node `b`: half the round-trip time of their
/// rows, plus their access delays.
fn base_delay(matrix: &LatencyMatrix, row: &[usize], access: &[Duration], a: usize, b: usize) -> Duration {
    if matrix.is_empty() {
        return access[a] + access[b];
    }
    matrix.one_way(row[a], row[b]) + access[a] + access[b]
}

/// Every pair's base delay, computed once: a datagram's delay is then one read of a
/// table of the simulated nodes (16 KiB at 64 nodes), instead of a read of the latency
/// matrix's row for the pair (a cache line per pair, out of 960 KB for the shipped
/// PlanetLab matrix) and a conversion from floating-point milliseconds. Held in whole
/// nanoseconds, which is what a [`Duration`] holds, so the delays are exactly the
/// computed ones; a pair whose delay does not fit in 32 bits (4.29 s), or a world too large
/// for the table, leaves it empty and every delay is computed.
#[derive(Clone, Debug, Default)]
struct BaseDelays {
    nodes: usize,
    nanos: Vec<u32>,
}

impl BaseDelays {
    /// The largest world tabulated: 2,048 nodes (16 MiB).
    const MAX_NODES: usize = 2048;

    fn new(nodes: usize, delay: impl Fn(usize, usize) -> Duration) -> Self {
        if nodes > Self::MAX_NODES {
            return Self::default();
        }
        let mut nanos = Vec::with_capacity(nodes * nodes);
        for a in 0..nodes {
            for b in 0..nodes {
                match u32::try_from(delay(a, b).as_nanos()) {
                    Ok(ns) => nanos.push(ns),
                    Err(_) => return Self::default(),
                }
            }
        }
        Self { nodes, nanos }
    }

    /// The delay from `a` to `b`, if tabulated.
    fn get(&self, a: usize, b: usize) -> Option<Duration> {
        if a >= self.nodes || b >= self.nodes {
            return None;
        }
        self.nanos
            .get(a * self.nodes + b)
            .map(|ns| Duration::from_nanos(u64::from(*ns)))
    }
}

/// The model as the engine's links: [`NetworkModel::route`] decides every datagram.
impl<D> worldmesh_engine::Links<D> for NetworkModel {
    fn route(&mut self, now: Time, src: NodeId, t: &worldmesh_core::Transmit<D>) -> Fate {
        NetworkModel::route(self, now, src, t.dst)
    }
}

/// Senders' streams held apart for the engine's parallel rounds: the delay of a datagram
/// is at least the base delay of its pair (jitter only adds), and the fate is drawn from
/// the sender's stream exactly as [`NetworkModel::route`] draws it.
impl<D> worldmesh_engine::ParallelLinks<D> for NetworkModel {
    type Sender = DetRng;

    fn min_delay(&self, src: NodeId, dst: NodeId) -> Duration {
        self.base_delay(src, dst)
    }

    fn take_sender(&mut self, src: NodeId) -> DetRng {
        self.take_stream(src)
    }

    fn put_sender(&mut self, src: NodeId, sender: DetRng) {
        if let Some(s) = self.senders.get_mut(src.0 as usize) {
            *s = sender;
        }
    }

    fn route_with(
        &self,
        sender: &mut DetRng,
        now: Time,
        src: NodeId,
        t: &worldmesh_core::Transmit<D>,
    ) -> Fate {
        debug_assert!(
            self.refusals.is_none(),
            "refusals are modelled only in runs without parallel rounds"
        );
        let cut = self.cut(now, src.0 as usize, t.dst.0 as usize);
        self.fate(sender, cut, src, t.dst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> NetworkConfig {
        NetworkConfig {
            access_delay_ms: 4.0,
            ..NetworkConfig::default()
        }
    }

    #[test]
    fn delay_is_half_rtt_without_replacement() {
        let m = LatencyMatrix::from_fn(3, |i, j| 10.0 * (i + j) as f32);
        let mut net = NetworkModel::new(m.clone(), 3, &cfg(), &DetRng::new(1));
        // The three nodes take the three rows in some order; delays are RTT/2 of those rows.
        let rows: Vec<usize> = net.row.clone();
        let mut sorted = rows.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, vec![0, 1, 2]);
        let d = net.base_delay(NodeId(0), NodeId(1));
        assert_eq!(d, m.one_way(rows[0], rows[1]));
        assert_eq!(
            net.route(Time::ZERO, NodeId(0), NodeId(1)),
            Fate::Deliver(d, None)
        );
    }

    #[test]
    fn more_nodes_than_rows_get_access_delay() {
        let m = LatencyMatrix::uniform(2, 20.0);
        let net = NetworkModel::new(m, 50, &cfg(), &DetRng::new(2));
        assert_eq!(net.nodes(), 50);
        assert!(net.access.iter().all(|a| *a <= Duration::from_millis(4)));
        assert!(net.access.iter().any(|a| *a > Duration::ZERO));
        for a in 0..50 {
            let d = net.base_delay(NodeId(a), NodeId((a + 1) % 50));
            assert!(d <= Duration::from_millis(18) && d >= Duration::ZERO);
        }
    }

    /// The model's delay for every ordered pair: half the pair's round-trip time plus both
    /// access delays, computed here from the matrix.
    fn assert_every_pair_is_the_matrix_delay(net: &NetworkModel, m: &LatencyMatrix) {
        let n = net.nodes();
        for a in 0..n {
            for b in 0..n {
                let want = m.one_way(net.row[a], net.row[b]) + net.access[a] + net.access[b];
                let got = net.base_delay(NodeId(a as u32), NodeId(b as u32));
                assert_eq!(got, want, "{a} -> {b}");
            }
        }
    }

    /// The table of base delays gives exactly the matrix's delays (to the nanosecond:
    /// the shipped matrix's half round-trip times have fractions of a microsecond), with
    /// and without access delays, and a matrix whose delays do not fit it leaves it empty
    /// and gives the same delays as computed.
    #[test]
    fn the_table_of_base_delays_is_the_matrix_to_the_nanosecond() {
        let planetlab = worldmesh_core::latency::load_spec("planetlab").unwrap();
        let net = NetworkModel::new(planetlab.clone(), 64, &cfg(), &DetRng::new(3));
        assert_eq!(net.base.nanos.len(), 64 * 64, "tabulated");
        assert!(
            (0..64).any(|a| !net
                .base_delay(NodeId(a), NodeId(63 - a))
                .subsec_nanos()
                .is_multiple_of(1000)),
            "some delay has a fraction of a microsecond"
        );
        assert_every_pair_is_the_matrix_delay(&net, &planetlab);
        // More nodes than rows: rows shared, access delays added.
        let small = planetlab.select(&[0, 1, 2, 3, 4, 5, 6, 7]);
        let net = NetworkModel::new(small.clone(), 40, &cfg(), &DetRng::new(4));
        assert_eq!(net.base.nanos.len(), 40 * 40);
        assert_every_pair_is_the_matrix_delay(&net, &small);
        // A 9-s round trip (4.5 s one way) does not fit in 32 bits of nanoseconds.
        let far = LatencyMatrix::from_fn(5, |i, j| if i + j == 3 { 9_000.0 } else { 80.0 });
        let net = NetworkModel::new(far.clone(), 5, &cfg(), &DetRng::new(5));
        assert!(net.base.nanos.is_empty(), "not tabulated");
        assert_every_pair_is_the_matrix_delay(&net, &far);
        let longest = (0..5)
            .flat_map(|a| (0..5).map(move |b| (a, b)))
            .map(|(a, b)| net.base_delay(NodeId(a), NodeId(b)))
            .max();
        assert_eq!(longest, Some(Duration::from_millis(4_500)));
    }

    #[test]
    fn loss_duplication_and_partitions() {
        let m = LatencyMatrix::uniform(4, 20.0);
        let c = NetworkConfig {
            loss: 0.25,
            duplicate: 0.5,
            jitter_ms: 2.0,
            partitions: vec![PartitionSpec {
                from_s: 1.0,
                until_s: 2.0,
                nodes: vec![0],
            }],
            ..cfg()
        };
        let mut net = NetworkModel::new(m, 4, &c, &DetRng::new(3));
        let (mut lost, mut dup, n) = (0, 0, 20_000);
        for _ in 0..n {
            match net.route(Time::ZERO, NodeId(0), NodeId(1)) {
                Fate::Lost => lost += 1,
                Fate::Deliver(a, b) => {
                    let ok = |x: Duration| x >= Duration::from_millis(10) && x <= Duration::from_millis(12);
                    assert!(ok(a) && b.is_none_or(ok));
                    dup += usize::from(b.is_some());
                }
                Fate::Partitioned => panic!("no partition at t=0"),
            }
        }
        assert!((lost as f64 / n as f64 - 0.25).abs() < 0.02, "{lost}");
        assert!((dup as f64 / (n - lost) as f64 - 0.5).abs() < 0.02, "{dup}");
        assert_eq!(
            net.route(Time::from_millis(1500), NodeId(0), NodeId(1)),
            Fate::Partitioned
        );
        assert_ne!(
            net.route(Time::from_millis(1500), NodeId(2), NodeId(1)),
            Fate::Partitioned
        );
        net.partition(&[NodeId(3)]);
        assert_eq!(net.route(Time::ZERO, NodeId(3), NodeId(1)), Fate::Partitioned);
        net.heal();
        assert_ne!(net.route(Time::ZERO, NodeId(3), NodeId(1)), Fate::Partitioned);
    }
}
