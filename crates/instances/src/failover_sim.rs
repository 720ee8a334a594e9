//! A deterministic harness that drives the [`crate::failover`] state machines of one
//! auxiliary game over a simulated lossy network: fixed one-way delays per link with a
//! small jitter, independent message loss, crashes and partitions, all on a virtual clock
//! (the one engine, `worldmesh_engine`).
//!
//! It measures what issue 7 asks of Algorithms 3/4: the takeover time after the server
//! crashes, that exactly one server remains, and that no input confirmed to a player is
//! missing from the final server's state. It is a simulation (no I/O, no clock), used by the
//! tests and by the `instances-qos` experiment.

use crate::failover::{CLUSTER_NODE, Event, FailoverConfig, Msg, Peer, PeerId, Progress, Role, Transmit};
use std::time::Duration;
use worldmesh_core::{DetRng, Machine, NodeId, Time};
use worldmesh_engine::{Engine, Fate, Links, Step};

/// A set of peers cut off from all the others (both directions) during `[start, end)`.
#[derive(Clone, Debug, PartialEq)]
pub struct Partition {
    /// Start.
    pub start: Time,
    /// End (the partition heals).
    pub end: Time,
    /// The isolated side.
    pub isolated: Vec<PeerId>,
}

/// One scenario.
#[derive(Clone, Debug)]
pub struct HarnessConfig {
    /// Protocol configuration.
    pub failover: FailoverConfig,
    /// One-way delay in ms between members `i` and `j`: `one_way_ms[i][j]`.
    pub one_way_ms: Vec<Vec<f64>>,
    /// Probability that a message is lost.
    pub loss: f64,
    /// Relative jitter of each delay (uniform in `±jitter`).
    pub jitter: f64,
    /// Initial server.
    pub server: PeerId,
    /// Initial replica.
    pub replica: Option<PeerId>,
    /// Successor ranking (best first).
    pub ranking: Vec<PeerId>,
    /// Crashes `(peer, at)`: the peer stops for good.
    pub crashes: Vec<(PeerId, Time)>,
    /// Partitions.
    pub partitions: Vec<Partition>,
    /// End of the run.
    pub end: Time,
    /// Seed of loss, jitter, tick phases and inputs.
    pub seed: u64,
}

/// What happened.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HarnessReport {
    /// `(time, peer, epoch)` of every promotion.
    pub promotions: Vec<(Time, PeerId, u64)>,
    /// `(time, peer, epoch)` of every step-down.
    pub step_downs: Vec<(Time, PeerId, u64)>,
    /// Time from the first crash of the initial server to the first promotion after it.
    pub takeover: Option<Duration>,
    /// Time from that crash until every live player has received an update from a server
    /// of a newer epoch.
    pub restored: Option<Duration>,
    /// Live peers in the server role at the end.
    pub servers_at_end: Vec<PeerId>,
    /// Live players whose confirmed inputs are missing from, or differ in, the final
    /// server's state (must be empty).
    pub confirmed_lost: Vec<PeerId>,
    /// Largest number of confirmed inputs a player had at the end (sanity: > 0).
    pub max_confirmed: u64,
    /// Messages handed to the network (cluster status included).
    pub sent: u64,
    /// Messages lost.
    pub lost: u64,
    /// Status messages to the cluster.
    pub status_to_cluster: u64,
    /// Players that declared the instance lost.
    pub instance_lost: Vec<PeerId>,
}

fn cut(parts: &[Partition], now: Time, a: PeerId, b: PeerId) -> bool {
    parts
        .iter()
        .any(|p| now >= p.start && now < p.end && (p.isolated.contains(&a) != p.isolated.contains(&b)))
}

/// Digest of a player's first `upto` inputs from its log.
fn digest_of(log: &[u64], upto: u64) -> Option<Progress> {
    let mut p = Progress::default();
    for (i, &payload) in log.iter().take(upto as usize).enumerate() {
        p = p.apply(i as u64 + 1, payload);
    }
    (log.len() as u64 >= upto).then_some(p)
}

/// Why a harness scenario cannot run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HarnessError {
    /// The delay matrix is empty, not square, or has a negative or non-finite entry.
    #[error("one_way_ms must be a non-empty square matrix of finite delays ≥ 0 (row {row})")]
    Delays {
        /// First bad row.
        row: usize,
    },
    /// A peer id (server, replica, ranking, crash or partition) is not a member.
    #[error("peer {0} is not a member")]
    UnknownPeer(PeerId),
    /// Loss or jitter outside `[0, 1]`.
    #[error("loss and jitter must be in [0, 1]")]
    Probability,
}

impl HarnessConfig {
    /// Checks the scenario.
    pub fn validate(&self) -> Result<(), HarnessError> {
        let n = self.one_way_ms.len();
        if n == 0 {
            return Err(HarnessError::Delays { row: 0 });
        }
        for (row, r) in self.one_way_ms.iter().enumerate() {
            if r.len() != n || r.iter().any(|d| !(d.is_finite() && *d >= 0.0)) {
                return Err(HarnessError::Delays { row });
            }
        }
        let ids = [self.server]
            .into_iter()
            .chain(self.replica)
            .chain(self.ranking.iter().copied())
            .chain(self.crashes.iter().map(|c| c.0))
            .chain(self.partitions.iter().flat_map(|p| p.isolated.iter().copied()));
        for id in ids {
            if id as usize >= n {
                return Err(HarnessError::UnknownPeer(id));
            }
        }
        if !(0.0..=1.0).contains(&self.loss) || !(0.0..=1.0).contains(&self.jitter) {
            return Err(HarnessError::Probability);
        }
        Ok(())
    }
}

/// The harness's links: each message is lost with probability `loss` or dropped by a
/// partition (both counted as lost), otherwise delayed by its link's one-way delay
/// scaled by `1 ± jitter`; a partition that begins while it is in flight drops it too.
struct Plane<'a> {
    cfg: &'a HarnessConfig,
    rng: DetRng,
}

impl Links<Msg> for Plane<'_> {
    fn route(&mut self, now: Time, src: NodeId, t: &Transmit) -> Fate {
        let dst = t.dst;
        let (Some(row), true) = (
            self.cfg.one_way_ms.get(src.0 as usize),
            (dst.0 as usize) < self.cfg.one_way_ms.len(),
        ) else {
            return Fate::Partitioned;
        };
        if self.rng.chance(self.cfg.loss) || cut(&self.cfg.partitions, now, src.0, dst.0) {
            return Fate::Lost;
        }
        let base = row[dst.0 as usize].max(0.0);
        let d = base * (1.0 + self.rng.range_f64(-self.cfg.jitter, self.cfg.jitter));
        Fate::Deliver(Duration::from_secs_f64(d.max(0.0) / 1000.0), None)
    }

    fn deliverable(&self, now: Time, src: NodeId, dst: NodeId) -> bool {
        !cut(&self.cfg.partitions, now, src.0, dst.0)
    }
}

/// A member as the harness runs it: its player makes an input every game tick (drawn
/// from the member's own stream and logged for the final check); its status reports to
/// the Central Area are counted, not sent; and once the initial server has crashed it
/// notes when it first hears a server of a newer epoch.
struct Member {
    peer: Peer,
    inputs: DetRng,
    log: Vec<u64>,
    to_cluster: u64,
    /// The crashed server's epoch and when it crashed, once it has.
    watch: Option<u64>,
    restored: Option<Time>,
}

impl Machine for Member {
    type Datagram = Msg;
    type Event = Event;

    fn handle_datagram(&mut self, now: Time, from: NodeId, msg: Msg) {
        if let (Some(e0), Msg::Update { epoch, .. }) = (self.watch, &msg)
            && *epoch > e0
        {
            self.restored.get_or_insert(now);
        }
        self.peer.handle_message(now, from.0, msg);
    }

    fn handle_timeout(&mut self, now: Time) {
        if self.peer.tick_due(now) {
            let payload = self.inputs.next_u64();
            if self.peer.push_input(payload).is_some() {
                self.log.push(payload);
            }
        }
        self.peer.handle_timeout(now);
    }

    fn poll_transmit(&mut self) -> Option<Transmit> {
        loop {
            let t = self.peer.poll_transmit()?;
            if t.dst != CLUSTER_NODE {
                return Some(t);
            }
            self.to_cluster += 1;
        }
    }

    fn poll_timeout(&self) -> Option<Time> {
        self.peer.poll_timeout()
    }

    fn poll_event(&mut self) -> Option<Event> {
        self.peer.poll_event()
    }
}

/// Runs one scenario (after [`HarnessConfig::validate`]).
pub fn run(cfg: &HarnessConfig) -> Result<HarnessReport, HarnessError> {
    cfg.validate()?;
    let n = cfg.one_way_ms.len();
    let members: Vec<PeerId> = (0..n as PeerId).collect();
    let seeds = DetRng::new(cfg.seed);
    let mut phases = seeds.fork(1);
    let machines: Vec<Member> = members
        .iter()
        .map(|&id| {
            let phase = Duration::from_micros(phases.below(cfg.failover.tick.as_micros() as u64));
            Member {
                peer: Peer::new(
                    id,
                    cfg.failover.clone(),
                    members.clone(),
                    cfg.server,
                    cfg.replica,
                    cfg.ranking.clone(),
                    Time::ZERO + phase,
                ),
                inputs: seeds.fork(0x1000 + u64::from(id)),
                log: Vec::new(),
                to_cluster: 0,
                watch: None,
                restored: None,
            }
        })
        .collect();
    let links = Plane {
        cfg,
        rng: seeds.fork(2),
    };
    let mut engine: Engine<Member, Plane<'_>, PeerId> = Engine::new(machines, links);
    let mut rep = HarnessReport::default();
    let mut record = |_: &mut Member, now: Time, who: NodeId, e: Event| match e {
        Event::Promoted { epoch } => rep.promotions.push((now, who.0, epoch)),
        Event::SteppedDown { epoch } => rep.step_downs.push((now, who.0, epoch)),
        Event::InstanceLost => rep.instance_lost.push(who.0),
        _ => {}
    };
    for &id in &members {
        engine.pump(NodeId(id), &mut record);
    }
    for &(p, t) in &cfg.crashes {
        engine.schedule(t, p);
    }
    let mut crash_of_server: Option<Time> = None;
    while let Some(step) = engine.step(cfg.end) {
        match step {
            Step::Datagram(who) | Step::Timeout(who) => engine.pump(who, &mut record),
            Step::Other(p) => {
                let id = NodeId(p);
                if !engine.is_up(id) {
                    continue;
                }
                let now = engine.now();
                let crashed = &engine.machines()[p as usize].peer;
                if crash_of_server.is_none() && crashed.role() == Role::Server {
                    let e0 = crashed.epoch();
                    crash_of_server = Some(now);
                    for m in engine.machines_mut() {
                        m.watch = Some(e0);
                    }
                }
                engine.crash(id);
            }
            Step::Nothing => {}
        }
    }
    let alive = |p: PeerId| engine.is_up(NodeId(p));
    let peers = engine.machines();
    rep.sent = engine.stats().sent + peers.iter().map(|m| m.to_cluster).sum::<u64>();
    rep.status_to_cluster = peers.iter().map(|m| m.to_cluster).sum();
    rep.lost = engine.stats().lost + engine.stats().partitioned;
    if let Some(tc) = crash_of_server {
        rep.takeover = rep.promotions.iter().find(|p| p.0 >= tc).map(|p| p.0 - tc);
        let new_server = rep.promotions.iter().find(|p| p.0 >= tc).map(|p| p.1);
        let waiting: Vec<&Member> = (0..n as PeerId)
            .filter(|&p| alive(p) && Some(p) != new_server)
            .map(|p| &peers[p as usize])
            .collect();
        if waiting.iter().all(|m| m.restored.is_some()) {
            rep.restored = waiting
                .iter()
                .filter_map(|m| m.restored.map(|t| t - tc))
                .max()
                .or(Some(Duration::ZERO));
        }
    }
    rep.servers_at_end = (0..n as PeerId)
        .filter(|&p| alive(p) && peers[p as usize].peer.role() == Role::Server)
        .collect();
    if let [s] = rep.servers_at_end[..] {
        let st = peers[s as usize].peer.state();
        for p in (0..n as PeerId).filter(|&p| alive(p)) {
            let m = &peers[p as usize];
            let c = m.peer.confirmed_seq();
            rep.max_confirmed = rep.max_confirmed.max(c);
            let held = st.players.get(&p).copied().unwrap_or_default();
            let ok = held.seq >= c && digest_of(&m.log, held.seq) == Some(held);
            if !ok {
                rep.confirmed_lost.push(p);
            }
        }
    }
    Ok(rep)
}

/// One-way delays for `n` members placed uniformly in the paper's `[−1000, 1000]²` latency
/// plane scaled by `scale` (ms per unit: 1 = the paper's model, where a round trip across
/// the plane is seconds).
pub fn plane_delays(rng: &mut DetRng, n: usize, scale: f64) -> Vec<Vec<f64>> {
    let pts: Vec<(f64, f64)> = (0..n)
        .map(|_| (rng.range_f64(-1000.0, 1000.0), rng.range_f64(-1000.0, 1000.0)))
        .collect();
    pts.iter()
        .map(|a| {
            pts.iter()
                .map(|b| ((a.0 - b.0).powi(2) + (a.1 - b.1).powi(2)).sqrt() * scale)
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base(n: usize, loss: f64, seed: u64) -> HarnessConfig {
        let one_way = (0..n)
            .map(|i| {
                (0..n)
                    .map(|j| {
                        if i == j {
                            0.0
                        } else {
                            10.0 + ((i * 7 + j * 3) % 20) as f64
                        }
                    })
                    .collect()
            })
            .collect();
        HarnessConfig {
            failover: FailoverConfig::default(),
            one_way_ms: one_way,
            loss,
            jitter: 0.1,
            server: 0,
            replica: Some(1),
            ranking: (0..n as PeerId).collect(),
            crashes: vec![],
            partitions: vec![],
            end: Time::from_millis(6_000),
            seed,
        }
    }

    #[test]
    fn no_failure_no_promotion_under_loss() {
        for seed in 0..5 {
            let r = run(&base(8, 0.05, seed)).unwrap();
            assert!(r.promotions.is_empty(), "spurious promotion: {:?}", r.promotions);
            assert_eq!(r.servers_at_end, vec![0]);
            assert!(r.confirmed_lost.is_empty());
            assert!(r.max_confirmed > 50, "inputs get confirmed: {}", r.max_confirmed);
            assert!(r.lost > 0);
        }
    }

    #[test]
    fn server_crash_promotes_exactly_one_and_keeps_confirmed_inputs() {
        for seed in 0..20 {
            let mut c = base(10, 0.05, seed);
            c.crashes = vec![(0, Time::from_millis(2_000 + seed * 37))];
            let r = run(&c).unwrap();
            assert_eq!(r.promotions.len(), 1, "seed {seed}: {:?}", r.promotions);
            assert_eq!(r.promotions[0].1, 1, "the replica takes over");
            assert_eq!(r.servers_at_end, vec![1]);
            assert!(
                r.confirmed_lost.is_empty(),
                "seed {seed}: lost {:?}",
                r.confirmed_lost
            );
            let t = r.takeover.unwrap();
            // detection (3τ = 150 ms after the last snapshot, sent up to τ before the
            // crash, 10–29 ms on the way) plus a vote round trip inside the instance, with
            // the same 200 ms of slack for lost claims and votes as before
            let f = FailoverConfig::default();
            let detect = f.suspect_timeout();
            assert_eq!(detect, Duration::from_millis(150));
            assert!(
                t >= detect - f.tick && t <= detect + Duration::from_millis(200),
                "seed {seed}: {t:?}"
            );
            assert!(r.restored.is_some());
            assert!(r.instance_lost.is_empty());
        }
    }

    #[test]
    fn successive_failures_keep_the_instance_alive() {
        // server, then the new server, then the next one: the instance lives on (Algorithm 4)
        let mut c = base(6, 0.05, 3);
        c.crashes = vec![
            (0, Time::from_millis(1_000)),
            (1, Time::from_millis(2_500)),
            (2, Time::from_millis(4_000)),
        ];
        let r = run(&c).unwrap();
        assert_eq!(r.servers_at_end.len(), 1);
        assert_eq!(r.promotions.len(), 3, "{:?}", r.promotions);
        assert!(r.confirmed_lost.is_empty());
        let epochs: Vec<u64> = r.promotions.iter().map(|p| p.2).collect();
        assert_eq!(epochs, vec![2, 3, 4]);
    }

    #[test]
    fn replica_crash_is_replaced_without_epoch_change() {
        let mut c = base(6, 0.05, 4);
        c.crashes = vec![(1, Time::from_millis(1_000)), (0, Time::from_millis(3_000))];
        let r = run(&c).unwrap();
        // the server replaced its replica (player 2), which later takes over
        assert_eq!(r.promotions.len(), 1);
        assert_eq!(r.promotions[0].1, 2);
        assert_eq!(r.promotions[0].2, 2);
        assert!(r.confirmed_lost.is_empty());
    }

    #[test]
    fn cut_off_primary_steps_down_after_the_partition_heals() {
        let mut c = base(7, 0.05, 5);
        c.partitions = vec![Partition {
            start: Time::from_millis(1_500),
            end: Time::from_millis(3_500),
            isolated: vec![0],
        }];
        c.crashes = vec![];
        let r = run(&c).unwrap();
        // the replica is elected while 0 is cut off; 0 hears epoch 2 after healing
        assert_eq!(r.promotions.len(), 1, "{:?}", r.promotions);
        assert_eq!(r.promotions[0].1, 1);
        assert_eq!(r.step_downs.len(), 1, "{:?}", r.step_downs);
        assert_eq!(r.step_downs[0].1, 0);
        assert!(r.step_downs[0].0 >= Time::from_millis(3_500));
        assert_eq!(r.servers_at_end, vec![1]);
        assert!(r.confirmed_lost.is_empty(), "{:?}", r.confirmed_lost);
    }

    #[test]
    fn cut_off_replica_is_replaced_and_cannot_win() {
        // The replica alone is cut off: it runs for server but players still hear the
        // server and refuse their votes; the server appoints another replica.
        let mut c = base(7, 0.05, 6);
        c.partitions = vec![Partition {
            start: Time::from_millis(1_500),
            end: Time::from_millis(3_500),
            isolated: vec![1],
        }];
        let r = run(&c).unwrap();
        assert!(r.promotions.is_empty(), "{:?}", r.promotions);
        assert_eq!(r.servers_at_end, vec![0]);
        assert!(r.confirmed_lost.is_empty());
    }

    #[test]
    fn random_faults_never_leave_two_servers_or_lose_confirmed_inputs() {
        // Random crashes (at most n − 2 peers) and one random isolating partition per run.
        for seed in 0..40u64 {
            let mut rng = DetRng::new(1000 + seed);
            let n = 3 + rng.index(8);
            let mut c = base(n, 0.05, seed);
            c.end = Time::from_millis(8_000);
            let crashes = rng.index(n - 1);
            let mut victims: Vec<PeerId> = (0..n as PeerId).collect();
            rng.shuffle(&mut victims);
            c.crashes = victims[..crashes]
                .iter()
                .map(|&p| (p, Time::from_millis(500 + rng.below(5_000))))
                .collect();
            let start = 500 + rng.below(4_000);
            let isolated: Vec<PeerId> = victims[crashes..]
                .iter()
                .copied()
                .filter(|_| rng.chance(0.3))
                .collect();
            c.partitions = vec![Partition {
                start: Time::from_millis(start),
                end: Time::from_millis(start + 200 + rng.below(1_500)),
                isolated,
            }];
            let r = run(&c).unwrap();
            assert!(
                r.servers_at_end.len() <= 1,
                "seed {seed}: servers {:?}",
                r.servers_at_end
            );
            assert!(
                r.confirmed_lost.is_empty(),
                "seed {seed}: lost {:?} ({c:?})",
                r.confirmed_lost
            );
            // promotions of one epoch are unique
            let mut epochs: Vec<u64> = r.promotions.iter().map(|p| p.2).collect();
            let k = epochs.len();
            epochs.sort_unstable();
            epochs.dedup();
            assert_eq!(
                k,
                epochs.len(),
                "seed {seed}: two servers in one epoch {:?}",
                r.promotions
            );
        }
    }

    #[test]
    fn replicas_a_long_round_trip_away_are_kept_and_confirm() {
        // Every round trip (300 ms) exceeds kτ = 250 ms: a server that wanted an ack within
        // kτ of appointing a replica would replace every replica before its first ack and
        // never confirm anything.
        let mut c = base(5, 0.05, 8);
        for (i, row) in c.one_way_ms.iter_mut().enumerate() {
            for (j, d) in row.iter_mut().enumerate() {
                *d = if i == j { 0.0 } else { 150.0 };
            }
        }
        c.crashes = vec![(0, Time::from_millis(3_000))];
        c.end = Time::from_millis(7_000);
        let r = run(&c).unwrap();
        assert!(r.max_confirmed > 50, "inputs get confirmed: {}", r.max_confirmed);
        assert_eq!(r.promotions.len(), 1, "{:?}", r.promotions);
        assert_eq!(r.promotions[0].1, 1, "the first replica was kept and takes over");
        assert_eq!(r.servers_at_end, vec![1]);
        assert!(r.confirmed_lost.is_empty());
    }

    #[test]
    fn bad_scenarios_are_errors() {
        let mut c = base(4, 0.05, 1);
        c.one_way_ms[2].pop();
        assert_eq!(run(&c), Err(HarnessError::Delays { row: 2 }));
        let mut c = base(4, 0.05, 1);
        c.crashes = vec![(9, Time::ZERO)];
        assert_eq!(run(&c), Err(HarnessError::UnknownPeer(9)));
        let mut c = base(4, 0.05, 1);
        c.loss = 2.0;
        assert_eq!(run(&c), Err(HarnessError::Probability));
    }

    #[test]
    fn same_seed_same_run() {
        let mut c = base(9, 0.05, 11);
        c.crashes = vec![(0, Time::from_millis(1_700))];
        assert_eq!(run(&c).unwrap(), run(&c).unwrap());
    }
}
