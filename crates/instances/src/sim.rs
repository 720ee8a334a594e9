//! Deterministic discrete-event simulation of the hybrid system (paper `003` §5): a
//! Central Area of `N` servers over a rectangular-region map, players connecting,
//! disconnecting and moving in the Main Game, auxiliary games forming at (moving) hot spots
//! and ending, and a balancer — the paper's instance-based Algorithm 1 ("Hybrid") or
//! Bezerra's player-based method ("Classic") — run periodically.
//!
//! Scenario A (§5): disconnections 10 % above connections, the cluster starts full, hot
//! spots overload some servers. Scenario B: connections 20 % above disconnections, overflow
//! instances go to the P2P area, and when they end a share `Return RATE` of their players
//! comes back to the Main Game.
//!
//! Time is virtual (seconds as `f64`); events sit in a binary heap ordered by (time,
//! sequence number); all randomness comes from one [`DetRng`]: same seed ⇒ same run.

use crate::balance::{Destination, HostedInstance, classic_balance, hybrid_balance};
use crate::model::{ClusterConfig, InstanceMix, RegionGrid};
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use worldmesh_core::DetRng;

/// Which balancer runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Method {
    /// Algorithm 1 over whole instances (paper's proposal).
    Hybrid,
    /// Bezerra et al.'s player-based balancing (paper's comparison, §2).
    Classic,
}

/// Parameters of a run. Values the paper gives are marked (§5); the others are our
/// choices, because the paper does not state them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScenarioConfig {
    /// Cluster (§5: 10 servers × 5,500).
    pub cluster: ClusterConfig,
    /// Map and regions (§5: 1,000 × 1,000; 5 × 2 rectangles is our choice).
    pub grid: RegionGrid,
    /// Instance sizes and shares (§5 sizes; shares chosen, see [`InstanceMix`]).
    pub mix: InstanceMix,
    /// Players at the start (§5 scenario A: `max_S_load · N`).
    pub initial_players: u32,
    /// Share of players in the Main Game (§5: 10 %; the rest in instances).
    pub main_game_share: f64,
    /// Connections per second (chosen: 15/s in A, i.e. sessions of about an hour at full
    /// load; the paper gives only the ratio to disconnections).
    pub connect_rate: f64,
    /// Disconnections per second of Central-Area players (A: 1.1 × connections; B:
    /// connections / 1.2).
    pub disconnect_rate: f64,
    /// Main Game moves per second (chosen: 20/s, each a step of `move_sigma`).
    pub move_rate: f64,
    /// Standard deviation of a Main Game move (map units; chosen 150).
    pub move_sigma: f64,
    /// Mean instance duration in seconds (chosen: 20 min, exponential).
    pub instance_mean_s: f64,
    /// Instance formation attempts per second (chosen: 4/s; an attempt forms an instance
    /// only while the Main Game holds more than `main_game_share` of the players).
    pub form_rate: f64,
    /// Number of hot spots (chosen: 6).
    pub hotspots: usize,
    /// Share of instances placed around a hot spot (chosen: 0.6; the rest uniform).
    pub hotspot_share: f64,
    /// Spread of an instance around its hot spot (map units; chosen 60).
    pub hotspot_sigma: f64,
    /// Every this many seconds one hot spot moves elsewhere (chosen: 600 s).
    pub hotspot_period_s: f64,
    /// Balancer period in seconds (chosen: 10 s; Algorithm 1 runs "whenever the CS is
    /// overloaded", checked at this period).
    pub balance_period_s: f64,
    /// No balancing before this time (s): scenario A lets disconnections and moving hot
    /// spots shape the load first, so the first round (Figure 9) starts from an uneven
    /// cluster below full capacity, as the paper's Figure 9 does (5 overloaded servers).
    pub warmup_s: f64,
    /// Sampling period of the recorded metrics (s).
    pub sample_period_s: f64,
    /// Length of the run (s).
    pub duration_s: f64,
    /// Share of a finished P2P instance's players returning to the Main Game (§5 B).
    pub return_rate: f64,
    /// Balancer.
    pub method: Method,
    /// Whether Algorithm 1 may use the P2P area.
    pub allow_p2p: bool,
    /// Seed.
    pub seed: u64,
}

/// Why a scenario configuration cannot run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScenarioError {
    /// The region grid does not have one region per server.
    #[error("the map has {regions} regions but the cluster has {servers} servers (one region per server)")]
    RegionsVsServers {
        /// `cols × rows`.
        regions: usize,
        /// `N`.
        servers: usize,
    },
    /// Server count out of range.
    #[error("servers must be between 1 and 60000, got {0}")]
    Servers(usize),
    /// A numeric parameter is out of range.
    #[error("parameter `{name}` = {value} is out of range ({why})")]
    Parameter {
        /// Field name.
        name: &'static str,
        /// Its value.
        value: f64,
        /// The valid range.
        why: &'static str,
    },
    /// The instance mix is empty or has a zero size or a non-positive total share.
    #[error("the instance mix needs at least one kind with size ≥ 1 and positive shares")]
    Mix,
}

impl ScenarioConfig {
    /// Checks the configuration (it may come from a file).
    pub fn validate(&self) -> Result<(), ScenarioError> {
        let n = self.cluster.servers;
        if n == 0 || n > 60_000 {
            return Err(ScenarioError::Servers(n));
        }
        if self.grid.len() != n {
            return Err(ScenarioError::RegionsVsServers {
                regions: self.grid.len(),
                servers: n,
            });
        }
        let nonneg = [
            ("connect_rate", self.connect_rate),
            ("disconnect_rate", self.disconnect_rate),
            ("move_rate", self.move_rate),
            ("move_sigma", self.move_sigma),
            ("form_rate", self.form_rate),
            ("hotspot_sigma", self.hotspot_sigma),
            ("warmup_s", self.warmup_s),
            ("duration_s", self.duration_s),
        ];
        for (name, value) in nonneg {
            if !(value.is_finite() && value >= 0.0) {
                return Err(ScenarioError::Parameter {
                    name,
                    value,
                    why: "finite, ≥ 0",
                });
            }
        }
        let positive = [
            ("instance_mean_s", self.instance_mean_s),
            ("hotspot_period_s", self.hotspot_period_s),
            ("balance_period_s", self.balance_period_s),
            ("sample_period_s", self.sample_period_s),
            ("grid.width", self.grid.width),
            ("grid.height", self.grid.height),
        ];
        for (name, value) in positive {
            if !(value.is_finite() && value > 0.0) {
                return Err(ScenarioError::Parameter {
                    name,
                    value,
                    why: "finite, > 0",
                });
            }
        }
        let shares = [
            ("main_game_share", self.main_game_share),
            ("hotspot_share", self.hotspot_share),
            ("return_rate", self.return_rate),
            ("cluster.extra_fraction", self.cluster.extra_fraction),
        ];
        for (name, value) in shares {
            if !(0.0..=1.0).contains(&value) {
                return Err(ScenarioError::Parameter {
                    name,
                    value,
                    why: "in [0, 1]",
                });
            }
        }
        let total: f64 = self.mix.kinds.iter().map(|k| k.1).sum();
        if self.mix.kinds.is_empty()
            || self
                .mix
                .kinds
                .iter()
                .any(|&(size, share)| size == 0 || !(share.is_finite() && share >= 0.0))
            || total.is_nan()
            || total <= 0.0
        {
            return Err(ScenarioError::Mix);
        }
        Ok(())
    }

    /// Scenario A (§5) with the given balancer; the Hybrid balancer is confined to the
    /// Central Area, like Classic, so that the comparison is about balancing only.
    pub fn scenario_a(method: Method, seed: u64) -> Self {
        Self {
            cluster: ClusterConfig::default(),
            grid: RegionGrid::paper(),
            mix: InstanceMix::default(),
            initial_players: 55_000,
            main_game_share: 0.10,
            connect_rate: 15.0,
            disconnect_rate: 16.5,
            move_rate: 20.0,
            move_sigma: 150.0,
            instance_mean_s: 1_200.0,
            form_rate: 4.0,
            hotspots: 6,
            hotspot_share: 0.3,
            hotspot_sigma: 100.0,
            hotspot_period_s: 600.0,
            balance_period_s: 10.0,
            warmup_s: 1_800.0,
            sample_period_s: 10.0,
            duration_s: 3_600.0,
            return_rate: 1.0,
            method,
            allow_p2p: false,
            seed,
        }
    }

    /// Scenario B (§5): connections 20 % above disconnections, Hybrid with the P2P area.
    pub fn scenario_b(return_rate: f64, seed: u64) -> Self {
        Self {
            connect_rate: 18.0,
            disconnect_rate: 15.0,
            warmup_s: 0.0,
            duration_s: 7_200.0,
            return_rate,
            allow_p2p: true,
            ..Self::scenario_a(Method::Hybrid, seed)
        }
    }
}

/// Metrics at one sampling instant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Time (s).
    pub t: f64,
    /// Players per server.
    pub loads: Vec<u32>,
    /// Servers at or above 95 % of `max_S_load` ("near stress", §5.1).
    pub near_stress: usize,
    /// Servers above `max_S_load`.
    pub overloaded: usize,
    /// Players in the P2P area.
    pub p2p_players: u64,
    /// Players connected in total.
    pub total_players: u64,
    /// Instance players served by another server than the rest of their instance
    /// (Classic splits instances; Hybrid never does).
    pub split_players: u64,
}

/// One balancing round.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Round {
    /// Time (s).
    pub t: f64,
    /// `extra_S_players` summed over the overloaded servers.
    pub extra: u64,
    /// Players moved between servers.
    pub moved: u64,
    /// Players sent to the P2P area.
    pub distributed: u64,
    /// Of the moved players, those in an instance whose other members stayed behind.
    pub moved_split: u64,
}

/// The outcome of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScenarioResult {
    /// Per-server load at `t = 0`, before any balancing.
    pub initial_loads: Vec<u32>,
    /// Per-server load right before the first balancing round (Figure 9 "initial").
    pub before_first_round: Vec<u32>,
    /// Per-server load right after the first balancing round (Figure 9 "final").
    pub after_first_round: Vec<u32>,
    /// Per-server load at the end.
    pub final_loads: Vec<u32>,
    /// Samples.
    pub samples: Vec<Sample>,
    /// Balancing rounds that did something.
    pub rounds: Vec<Round>,
    /// Players sent to the P2P area over the run, per origin server.
    pub distributed_from: Vec<u64>,
    /// Players in the P2P area at the end, per origin server (Figure 11).
    pub final_p2p_by_origin: Vec<u64>,
    /// Instances sent to the P2P area.
    pub p2p_instances: u64,
    /// Players who came back from the P2P area to the Main Game.
    pub returned: u64,
    /// Integral over time of the split players (player-seconds): times `F` it gives the
    /// inter-server messages Classic causes after balancing.
    pub split_player_seconds: f64,
    /// Integral over time of the number of P2P instances (instance-seconds): divided by `T`
    /// it gives the status messages of Algorithm 3 to the cluster.
    pub p2p_instance_seconds: f64,
    /// Events processed.
    pub events: u64,
}

impl ScenarioResult {
    /// Players moved between servers over the run.
    pub fn players_moved(&self) -> u64 {
        self.rounds.iter().map(|r| r.moved).sum()
    }
    /// Players sent to the P2P area over the run.
    pub fn players_distributed(&self) -> u64 {
        self.rounds.iter().map(|r| r.distributed).sum()
    }
    /// Mean number of near-stress servers over the samples taken after time `from`.
    pub fn mean_near_stress(&self, from: f64) -> f64 {
        let s: Vec<&Sample> = self.samples.iter().filter(|s| s.t > from).collect();
        if s.is_empty() {
            0.0
        } else {
            s.iter().map(|x| x.near_stress as f64).sum::<f64>() / s.len() as f64
        }
    }
}

const GONE: u16 = u16::MAX;
const NO_INST: u32 = u32::MAX;

/// Indexed membership lists: each player in at most one list, O(1) insert/remove/pick.
#[derive(Clone, Debug)]
struct Lists {
    lists: Vec<Vec<u32>>,
    which: Vec<u16>,
    slot: Vec<u32>,
}

impl Lists {
    fn new(n: usize) -> Self {
        Self {
            lists: vec![Vec::new(); n],
            which: Vec::new(),
            slot: Vec::new(),
        }
    }
    fn ensure(&mut self, p: u32) {
        let need = p as usize + 1;
        if self.which.len() < need {
            self.which.resize(need, GONE);
            self.slot.resize(need, 0);
        }
    }
    fn insert(&mut self, p: u32, l: u16) {
        self.ensure(p);
        self.remove(p);
        self.which[p as usize] = l;
        self.slot[p as usize] = self.lists[l as usize].len() as u32;
        self.lists[l as usize].push(p);
    }
    fn remove(&mut self, p: u32) {
        self.ensure(p);
        let l = self.which[p as usize];
        if l == GONE {
            return;
        }
        let list = &mut self.lists[l as usize];
        let s = self.slot[p as usize] as usize;
        list.swap_remove(s);
        if s < list.len() {
            let moved = list[s];
            self.slot[moved as usize] = s as u32;
        }
        self.which[p as usize] = GONE;
    }
    fn of(&self, p: u32) -> u16 {
        self.which.get(p as usize).copied().unwrap_or(GONE)
    }
    fn len(&self, l: usize) -> usize {
        self.lists[l].len()
    }
}

#[derive(Clone, Debug)]
struct Inst {
    members: Vec<u32>,
    /// Hosting server, or `p2p` index.
    server: u16,
    /// Server it was distributed from (P2P instances).
    origin: u16,
    x: f64,
    y: f64,
    alive: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Connect,
    Disconnect,
    Move,
    Form,
    End(u32),
    Balance,
    Hotspot,
    Sample,
}

struct World<'a> {
    c: &'a ScenarioConfig,
    rng: DetRng,
    /// server lists 0..N, P2P list N.
    srv: Lists,
    /// Main Game players (one list).
    mg: Lists,
    pos: Vec<(f64, f64)>,
    inst_of: Vec<u32>,
    insts: Vec<Inst>,
    hot: Vec<(f64, f64)>,
    heap: BinaryHeap<Reverse<(u64, u64, Ev)>>,
    seq: u64,
    res: ScenarioResult,
    last_sample_t: f64,
}

fn micros(t: f64) -> u64 {
    (t.max(0.0) * 1e6) as u64
}

impl<'a> World<'a> {
    /// An empty world for scenario `c`: no players, instances or events yet.
    fn new(c: &'a ScenarioConfig) -> Self {
        let n = c.cluster.servers;
        World {
            c,
            rng: DetRng::new(c.seed),
            srv: Lists::new(n + 1),
            mg: Lists::new(1),
            pos: Vec::new(),
            inst_of: Vec::new(),
            insts: Vec::new(),
            hot: Vec::new(),
            heap: BinaryHeap::new(),
            seq: 0,
            res: ScenarioResult {
                initial_loads: vec![],
                before_first_round: vec![],
                after_first_round: vec![],
                final_loads: vec![],
                samples: vec![],
                rounds: vec![],
                distributed_from: vec![0; n],
                final_p2p_by_origin: vec![0; n],
                p2p_instances: 0,
                returned: 0,
                split_player_seconds: 0.0,
                p2p_instance_seconds: 0.0,
                events: 0,
            },
            last_sample_t: 0.0,
        }
    }

    fn p2p(&self) -> u16 {
        self.c.cluster.servers as u16
    }

    fn schedule(&mut self, t: f64, e: Ev) {
        self.seq += 1;
        self.heap.push(Reverse((micros(t), self.seq, e)));
    }

    fn new_player(&mut self) -> u32 {
        let p = self.pos.len() as u32;
        self.pos.push((0.0, 0.0));
        self.inst_of.push(NO_INST);
        p
    }

    fn uniform_point(&mut self) -> (f64, f64) {
        (
            self.rng.range_f64(0.0, self.c.grid.width),
            self.rng.range_f64(0.0, self.c.grid.height),
        )
    }

    fn instance_point(&mut self) -> (f64, f64) {
        if !self.hot.is_empty() && self.rng.chance(self.c.hotspot_share) {
            let h = self.hot[self.rng.index(self.hot.len())];
            let x = (h.0 + self.rng.normal() * self.c.hotspot_sigma).clamp(0.0, self.c.grid.width - 1e-6);
            let y = (h.1 + self.rng.normal() * self.c.hotspot_sigma).clamp(0.0, self.c.grid.height - 1e-6);
            (x, y)
        } else {
            self.uniform_point()
        }
    }

    fn region(&self, (x, y): (f64, f64)) -> u16 {
        self.c.grid.region_of(x, y) as u16
    }

    fn enter_main_game(&mut self, p: u32, at: (f64, f64)) {
        self.pos[p as usize] = at;
        self.inst_of[p as usize] = NO_INST;
        let r = self.region(at);
        self.srv.insert(p, r);
        self.mg.insert(p, 0);
    }

    fn create_instance(&mut self, now: f64, members: Vec<u32>, at: (f64, f64)) {
        let id = self.insts.len() as u32;
        let server = self.region(at);
        for &p in &members {
            self.mg.remove(p);
            self.inst_of[p as usize] = id;
            self.srv.insert(p, server);
        }
        self.insts.push(Inst {
            members,
            server,
            origin: server,
            x: at.0,
            y: at.1,
            alive: true,
        });
        let d = self.rng.exponential(self.c.instance_mean_s);
        self.schedule(now + d, Ev::End(id));
    }

    fn central_count(&self) -> usize {
        (0..self.c.cluster.servers).map(|s| self.srv.len(s)).sum()
    }

    fn loads(&self) -> Vec<u32> {
        (0..self.c.cluster.servers)
            .map(|s| self.srv.len(s) as u32)
            .collect()
    }

    fn split_players(&self) -> u64 {
        let mut n = 0;
        for inst in self.insts.iter().filter(|i| i.alive) {
            n += inst
                .members
                .iter()
                .filter(|&&p| self.srv.of(p) != inst.server)
                .count() as u64;
        }
        n
    }

    fn sample(&mut self, t: f64) {
        let dt = t - self.last_sample_t;
        self.last_sample_t = t;
        let loads = self.loads();
        let max = self.c.cluster.max_s_load;
        let near = loads
            .iter()
            .filter(|&&l| f64::from(l) >= 0.95 * f64::from(max))
            .count();
        let over = loads.iter().filter(|&&l| l > max).count();
        let split = self.split_players();
        let p2p_instances = self
            .insts
            .iter()
            .filter(|i| i.alive && i.server == self.p2p())
            .count();
        self.res.split_player_seconds += split as f64 * dt;
        self.res.p2p_instance_seconds += p2p_instances as f64 * dt;
        let p2p = self.srv.len(self.p2p() as usize) as u64;
        self.res.samples.push(Sample {
            t,
            loads,
            near_stress: near,
            overloaded: over,
            p2p_players: p2p,
            total_players: self.central_count() as u64 + p2p,
            split_players: split,
        });
    }

    fn balance(&mut self, t: f64) {
        let cfg = &self.c.cluster;
        let loads = self.loads();
        let extra: u64 = loads
            .iter()
            .map(|&l| u64::from(l.saturating_sub(cfg.max_s_load)))
            .sum();
        if extra == 0 {
            return;
        }
        let mut round = Round {
            t,
            extra,
            moved: 0,
            distributed: 0,
            moved_split: 0,
        };
        if self.res.rounds.is_empty() {
            self.res.before_first_round = loads.clone();
        }
        match self.c.method {
            Method::Hybrid => {
                let hosted: Vec<HostedInstance> = self
                    .insts
                    .iter()
                    .enumerate()
                    .filter(|(_, i)| i.alive && (i.server as usize) < cfg.servers)
                    .map(|(k, i)| HostedInstance {
                        key: k as u64,
                        size: i.members.len() as u32,
                        server: i.server as usize,
                    })
                    .collect();
                let mut main = loads.clone();
                for h in &hosted {
                    main[h.server] -= h.size;
                }
                let plan = hybrid_balance(cfg, &main, &hosted, self.c.allow_p2p);
                for m in &plan.moves {
                    let to = match m.to {
                        Destination::Server(j) => j as u16,
                        Destination::P2p => self.p2p(),
                    };
                    let inst = &mut self.insts[m.key as usize];
                    inst.server = to;
                    inst.origin = m.from as u16;
                    for p in inst.members.clone() {
                        self.srv.insert(p, to);
                    }
                    if to == self.p2p() {
                        round.distributed += u64::from(m.size);
                        self.res.distributed_from[m.from] += u64::from(m.size);
                        self.res.p2p_instances += 1;
                    } else {
                        round.moved += u64::from(m.size);
                    }
                }
            }
            Method::Classic => {
                let plan = classic_balance(cfg, &loads, |s| self.c.grid.neighbors(s));
                for tr in &plan.transfers {
                    for _ in 0..tr.count {
                        let list = &self.srv.lists[tr.from];
                        if list.is_empty() {
                            break;
                        }
                        let p = list[self.rng.index(list.len())];
                        self.srv.insert(p, tr.to as u16);
                        round.moved += 1;
                        let i = self.inst_of[p as usize];
                        if i != NO_INST {
                            let inst = &self.insts[i as usize];
                            if inst
                                .members
                                .iter()
                                .any(|&q| q != p && self.srv.of(q) != tr.to as u16)
                            {
                                round.moved_split += 1;
                            }
                        }
                    }
                }
            }
        }
        if self.res.rounds.is_empty() {
            self.res.after_first_round = self.loads();
        }
        self.res.rounds.push(round);
    }

    fn leave(&mut self, p: u32) {
        let i = self.inst_of[p as usize];
        if i != NO_INST {
            let inst = &mut self.insts[i as usize];
            inst.members.retain(|&q| q != p);
            if inst.members.is_empty() {
                inst.alive = false;
            }
            self.inst_of[p as usize] = NO_INST;
        }
        self.srv.remove(p);
        self.mg.remove(p);
    }

    fn step(&mut self, t: f64, e: Ev) {
        match e {
            Ev::Connect => {
                let p = self.new_player();
                let at = self.uniform_point();
                self.enter_main_game(p, at);
                let d = self.rng.exponential(1.0 / self.c.connect_rate);
                self.schedule(t + d, Ev::Connect);
            }
            Ev::Disconnect => {
                let n = self.central_count();
                if n > 0 {
                    let mut k = self.rng.index(n);
                    for s in 0..self.c.cluster.servers {
                        let l = self.srv.len(s);
                        if k < l {
                            let p = self.srv.lists[s][k];
                            self.leave(p);
                            break;
                        }
                        k -= l;
                    }
                }
                let d = self.rng.exponential(1.0 / self.c.disconnect_rate);
                self.schedule(t + d, Ev::Disconnect);
            }
            Ev::Move => {
                let n = self.mg.len(0);
                if n > 0 {
                    let p = self.mg.lists[0][self.rng.index(n)];
                    let (x, y) = self.pos[p as usize];
                    let nx = (x + self.rng.normal() * self.c.move_sigma).clamp(0.0, self.c.grid.width - 1e-6);
                    let ny =
                        (y + self.rng.normal() * self.c.move_sigma).clamp(0.0, self.c.grid.height - 1e-6);
                    let (r0, r1) = (self.region((x, y)), self.region((nx, ny)));
                    self.pos[p as usize] = (nx, ny);
                    if r0 != r1 {
                        self.srv.insert(p, r1);
                    }
                }
                let d = self.rng.exponential(1.0 / self.c.move_rate);
                self.schedule(t + d, Ev::Move);
            }
            Ev::Form => {
                let size = self.c.mix.pick(self.rng.next_f64()) as usize;
                let total = self.central_count() + self.srv.len(self.p2p() as usize);
                let mg = self.mg.len(0);
                if mg >= size && mg as f64 > self.c.main_game_share * total as f64 {
                    let mut members = Vec::with_capacity(size);
                    for _ in 0..size {
                        let l = &self.mg.lists[0];
                        let p = l[self.rng.index(l.len())];
                        self.mg.remove(p);
                        members.push(p);
                    }
                    let at = self.instance_point();
                    self.create_instance(t, members, at);
                }
                let d = self.rng.exponential(1.0 / self.c.form_rate);
                self.schedule(t + d, Ev::Form);
            }
            Ev::End(id) => {
                let p2p = self.p2p();
                let inst = &mut self.insts[id as usize];
                if !inst.alive {
                    return;
                }
                inst.alive = false;
                let members = std::mem::take(&mut inst.members);
                let in_p2p = inst.server == p2p;
                let at = (inst.x, inst.y);
                for p in members {
                    if in_p2p && !self.rng.chance(self.c.return_rate) {
                        self.srv.remove(p);
                        self.inst_of[p as usize] = NO_INST;
                        continue;
                    }
                    if in_p2p {
                        self.res.returned += 1;
                    }
                    self.enter_main_game(p, at);
                }
            }
            Ev::Balance => {
                self.balance(t);
                self.schedule(t + self.c.balance_period_s, Ev::Balance);
            }
            Ev::Hotspot => {
                if !self.hot.is_empty() {
                    let k = self.rng.index(self.hot.len());
                    self.hot[k] = self.uniform_point();
                }
                self.schedule(t + self.c.hotspot_period_s, Ev::Hotspot);
            }
            Ev::Sample => {
                self.sample(t);
                self.schedule(t + self.c.sample_period_s, Ev::Sample);
            }
        }
    }
}

/// Builds the initial population of `c`: `main_game_share` of the players uniform in the
/// Main Game, the rest in instances drawn from the mix at hot-spot-biased places.
fn populate(w: &mut World<'_>) {
    let total = w.c.initial_players as usize;
    let in_instances = ((1.0 - w.c.main_game_share) * total as f64).round() as usize;
    let mut placed = 0usize;
    let mut pending: Vec<u32> = Vec::new();
    loop {
        let size = w.c.mix.pick(w.rng.next_f64()) as usize;
        if placed + size > in_instances {
            break;
        }
        let members: Vec<u32> = (0..size).map(|_| w.new_player()).collect();
        let at = w.instance_point();
        w.create_instance(0.0, members, at);
        placed += size;
    }
    while placed + pending.len() < total {
        let p = w.new_player();
        pending.push(p);
    }
    for p in pending {
        let at = w.uniform_point();
        w.enter_main_game(p, at);
    }
}

/// Runs one scenario (after [`ScenarioConfig::validate`]).
pub fn run(c: &ScenarioConfig) -> Result<ScenarioResult, ScenarioError> {
    c.validate()?;
    let mut w = World::new(c);
    w.hot = (0..c.hotspots).map(|_| w.uniform_point()).collect();
    populate(&mut w);
    w.res.initial_loads = w.loads();
    w.sample(0.0);
    let first = |w: &mut World<'_>, rate: f64, e: Ev| {
        if rate > 0.0 {
            let d = w.rng.exponential(1.0 / rate);
            w.schedule(d, e);
        }
    };
    first(&mut w, c.connect_rate, Ev::Connect);
    first(&mut w, c.disconnect_rate, Ev::Disconnect);
    first(&mut w, c.move_rate, Ev::Move);
    first(&mut w, c.form_rate, Ev::Form);
    w.schedule(c.warmup_s, Ev::Balance);
    w.schedule(c.hotspot_period_s, Ev::Hotspot);
    w.schedule(c.sample_period_s, Ev::Sample);
    let end = micros(c.duration_s);
    while let Some(Reverse((t, _, e))) = w.heap.pop() {
        if t > end {
            break;
        }
        w.res.events += 1;
        w.step(t as f64 / 1e6, e);
    }
    w.res.final_loads = w.loads();
    let p2p = w.p2p();
    for inst in w.insts.iter().filter(|i| i.alive && i.server == p2p) {
        w.res.final_p2p_by_origin[inst.origin as usize] += inst.members.len() as u64;
    }
    Ok(w.res)
}

/// A one-shot balancing experiment for the communication-cost curve (§5.1, Figure 10):
/// the scenario-A population of `c` at `t = 0`, reshaped so that server 0 carries
/// `extra` players above `max_S_load` and the others 80 % of it; then one round of each
/// balancer. Returns `(hybrid_moved, classic_moved, classic_moved_split)`.
pub fn one_shot_round(c: &ScenarioConfig, extra: u32) -> Result<(u64, u64, u64), ScenarioError> {
    c.validate()?;
    let mut out = [0u64; 3];
    for (k, method) in [Method::Hybrid, Method::Classic].into_iter().enumerate() {
        let mut cc = c.clone();
        cc.method = method;
        cc.allow_p2p = false;
        // Build a population with the wanted loads directly: instances and Main Game
        // players on each server.
        let n = cc.cluster.servers;
        let max = cc.cluster.max_s_load;
        let mut w = World::new(&cc);
        for s in 0..n {
            let target = if s == 0 { max + extra } else { max * 8 / 10 } as usize;
            // a point inside region s
            let (cx, cy) = (s % cc.grid.cols, s / cc.grid.cols);
            let rw = cc.grid.width / cc.grid.cols as f64;
            let rh = cc.grid.height / cc.grid.rows as f64;
            let mut placed = 0usize;
            let inst_target = ((1.0 - cc.main_game_share) * target as f64) as usize;
            loop {
                let size = cc.mix.pick(w.rng.next_f64()) as usize;
                if placed + size > inst_target {
                    break;
                }
                let members: Vec<u32> = (0..size).map(|_| w.new_player()).collect();
                let at = (
                    rw * (cx as f64 + w.rng.next_f64()),
                    rh * (cy as f64 + w.rng.next_f64()),
                );
                w.create_instance(0.0, members, at);
                placed += size;
            }
            while placed < target {
                let p = w.new_player();
                let at = (
                    rw * (cx as f64 + w.rng.next_f64()),
                    rh * (cy as f64 + w.rng.next_f64()),
                );
                w.enter_main_game(p, at);
                placed += 1;
            }
        }
        w.balance(0.0);
        let r = w.res.rounds.first().cloned().unwrap_or(Round {
            t: 0.0,
            extra: 0,
            moved: 0,
            distributed: 0,
            moved_split: 0,
        });
        match method {
            Method::Hybrid => out[0] = r.moved,
            Method::Classic => {
                out[1] = r.moved;
                out[2] = r.moved_split;
            }
        }
        let _ = k;
    }
    Ok((out[0], out[1], out[2]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(method: Method, seed: u64) -> ScenarioConfig {
        let mut c = ScenarioConfig::scenario_a(method, seed);
        c.cluster.max_s_load = 550;
        c.initial_players = 5_500;
        c.connect_rate /= 10.0;
        c.disconnect_rate /= 10.0;
        c.form_rate /= 10.0;
        c.warmup_s = 200.0;
        c.duration_s = 600.0;
        c
    }

    #[test]
    fn hybrid_never_splits_instances_and_conserves_players() {
        let r = run(&small(Method::Hybrid, 1)).unwrap();
        assert!(r.samples.iter().all(|s| s.split_players == 0));
        assert!(r.players_moved() > 0, "hot spots make balancing necessary");
        // every moved batch is whole instances: sizes come from the mix
        let last = r.samples.last().unwrap();
        assert_eq!(
            last.total_players,
            u64::from(last.loads.iter().sum::<u32>()) + last.p2p_players
        );
    }

    #[test]
    fn classic_splits_instances() {
        let r = run(&small(Method::Classic, 1)).unwrap();
        assert!(r.players_moved() > 0);
        assert!(r.rounds.iter().map(|x| x.moved_split).sum::<u64>() > 0);
    }

    #[test]
    fn same_seed_same_run_and_same_start_for_both_methods() {
        let a = run(&small(Method::Hybrid, 9)).unwrap();
        let b = run(&small(Method::Hybrid, 9)).unwrap();
        assert_eq!(a, b);
        let c = run(&small(Method::Classic, 9)).unwrap();
        assert_eq!(a.initial_loads, c.initial_loads);
    }

    #[test]
    fn scenario_b_overflows_to_p2p() {
        let mut c = ScenarioConfig::scenario_b(0.5, 3);
        c.cluster.max_s_load = 550;
        c.initial_players = 5_500;
        c.connect_rate = 1.2;
        c.disconnect_rate = 0.5;
        c.form_rate = 0.4;
        c.duration_s = 900.0;
        let r = run(&c).unwrap();
        assert!(r.players_distributed() > 0);
        let last = r.samples.last().unwrap();
        assert!(
            last.total_players > c.cluster.capacity(),
            "P2P lets the system exceed the cluster's capacity"
        );
        assert!(last.loads.iter().all(|&l| l <= c.cluster.max_s_load + 40));
    }

    #[test]
    fn bad_configurations_are_errors() {
        let mut c = ScenarioConfig::scenario_a(Method::Hybrid, 1);
        c.cluster.servers = 7;
        assert_eq!(
            run(&c).unwrap_err(),
            ScenarioError::RegionsVsServers {
                regions: 10,
                servers: 7
            }
        );
        let mut c = ScenarioConfig::scenario_a(Method::Hybrid, 1);
        c.connect_rate = f64::NAN;
        assert!(matches!(
            run(&c),
            Err(ScenarioError::Parameter {
                name: "connect_rate",
                ..
            })
        ));
        let mut c = ScenarioConfig::scenario_a(Method::Hybrid, 1);
        c.return_rate = 1.5;
        assert!(matches!(
            run(&c),
            Err(ScenarioError::Parameter {
                name: "return_rate",
                ..
            })
        ));
        let mut c = ScenarioConfig::scenario_a(Method::Hybrid, 1);
        c.mix.kinds = vec![(0, 1.0)];
        assert_eq!(run(&c).unwrap_err(), ScenarioError::Mix);
        let mut c = ScenarioConfig::scenario_a(Method::Hybrid, 1);
        c.balance_period_s = 0.0;
        assert!(run(&c).is_err());
    }

    #[test]
    fn one_shot_moves_whole_instances_vs_exact_players() {
        let c = ScenarioConfig::scenario_a(Method::Hybrid, 5);
        let (h, cl, split) = one_shot_round(&c, 600).unwrap();
        assert_eq!(cl, 600, "Classic moves exactly the extra players");
        assert!(h >= 600 + 550, "Hybrid sheds extra + 10 % of max: {h}");
        assert!(split > 0 && split <= cl);
    }
}
