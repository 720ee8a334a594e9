//! The fault swarm: each seed draws a whole world and a schedule of faults, runs it on the
//! deterministic engine, and checks safety invariants after **every** event, then liveness
//! after the faults heal (issue 14; in the spirit of FoundationDB's simulator and
//! TigerBeetle's VOPR: any failure is reproduced from its seed alone).
//!
//! **What a seed draws.** 4–10 founding nodes with SWIM membership (`lan`) and 1–2 backups
//! per primary, 1–4 players per node, the map, broadcast or interest management (the
//! Colyseus architecture, paper `000` §3–4), a uniform RTT of 2–40 ms, 0–20 % loss, 0–5 %
//! duplication, 0–10 ms of jitter (which reorders; round trips stay within the 80 ms the
//! `lan` profile's probes allow), and one to five faults between 3 s
//! and 13 s: crashes (at most a tenth of the nodes down at once, at least one allowed),
//! restarts of crashed nodes under the same id as a new generation, symmetric partitions,
//! one-way partitions (a node's datagrams lost, it still hears the others), drains
//! (migrations of every primary, paper `001` §3.2, then a graceful leave and the process
//! exits, whatever it could not hand over) and joins of
//! new nodes. At 15 s the network heals: partitions end, loss and duplication stop. Half
//! the seeds persist (`Setup::persist`, issue 19): every node keeps a modelled store, a
//! crash loses the store batches not yet applied (or leaves one applied and unacknowledged),
//! and a restarted node recovers what its store kept.
//!
//! **Safety, after every event** (on the node that handled it):
//! - `one-primary-per-epoch`: no live node holds an object as primary under the epoch
//!   another live node holds it under. Two members may adopt one orphan under the same
//!   epoch while their views differ (`node::adoption`, "Rivals"), and the nodes they
//!   migrate their copies to then hold it under one later epoch; such a pair must resolve
//!   within [`RIVAL_WINDOW`] of both listing each other as live members.
//! - `replica-from-primary`: a replica's version is one some primary of the object held
//!   (no state its primary never had), and the node it follows held the object as
//!   primary at some time (no state accepted from a non-owner).
//! - `monotone-versions`: while a node holds an object, its version never goes back.
//! - `no-object-lost`: when a node drops an orphan whose policy is adoption (nobody
//!   adopted it in time here: `node::adoption`), some live node holds it as primary.
//! - `write-applied-once`: a write forwarded to a primary (retried by its writer until
//!   acknowledged) is applied at most once by one primary under one epoch, whatever the
//!   loss and duplication (`replica::ReplicaConfig::trace_writes` records each one).
//! - `no-failure-told-as-leave`: a member is recorded as gone with
//!   [`Departure::Left`] only if that identity drained and left (its leave notice,
//!   `node::membership`); a crash or a member declared down is never a leave. (A drained
//!   member recorded as failed is allowed: the notice is best effort. The seed's
//!   [`Leaves`] count both.)
//!
//! **Liveness, [`LIVENESS_S`] after the heal** (a bound derived from `lan` failure
//! detection, about 2.3 s, plus adoption and one rejoin): every object that had a primary
//! before the heal and was not deleted by the game has exactly one primary on a live node,
//! and in broadcast worlds every live member holds a replica of every object older than a
//! second whose primary is on another live member.
//!
//! A failing seed is reported with its setup, its faults and the first violation:
//! `worldmesh swarm --seeds 1 --from SEED` replays it.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use worldmesh_core::{DetRng, NodeId, ObjectId, Time};
use worldmesh_game::{MapKind, ModelObject};
use worldmesh_node::membership::{Departure, Member};
use worldmesh_node::{Event, Node};
use worldmesh_node::{MigrationEvent, RefuseReason};
use worldmesh_replica::{GameObject as _, OrphanPolicy, Role};

use crate::config::{Architecture, ConfigError, SimConfig};
use crate::scenario::{self, Sim};

/// Faults start after this (every node joined, replicas and backups set).
const FAULTS_FROM_S: f64 = 3.0;
/// And end before this.
const FAULTS_UNTIL_S: f64 = 13.0;
/// Every partition heals and every pending restart happens at this time.
pub const HEAL_S: f64 = 15.0;
/// Liveness is checked this long after the heal.
pub const LIVENESS_S: f64 = 12.0;
/// Longest two rival adopters may both hold one object under the same epoch once each
/// lists the other as a live member.
///
/// Rivals arise while views differ, and a partition keeps them different for as long as
/// it lasts (up to 4 s here) and after: the two sides declared each other down, and
/// SWIM merges the views again only through its announcements (to a random down member
/// every `3 × announce_every` = 6 s with the `lan` profile) and the rejoins they trigger.
/// Neither rival can learn of the other before then (a node refuses datagrams from
/// non-members), so the window counts from the moment both list each other: from then,
/// the first update either sends the other (every frame in a broadcast world) or the
/// notices every member gets on coming up settle it in a few round trips and notice
/// resends (300 ms). Counting from the first sighting instead failed `--faults all`
/// seeds 77, 140 and 322 on partitions that outlasted the window.
pub const RIVAL_WINDOW: Duration = Duration::from_secs(3);

/// Two primaries of one object under one epoch, on `pair`, seen from `first` to `last`.
struct Rivalry {
    first: Time,
    last: Time,
    pair: (NodeId, NodeId),
}

/// A same-epoch pair not seen for this long has ended: the next one is a new episode, with
/// its own [`RIVAL_WINDOW`] (a pair that persists is seen at every frame of either node).
/// Without it, a rivalry of other nodes long after an earlier one had settled was charged
/// the earlier one's time (`--faults all` seed 4881).
const EPISODE_GAP: Duration = Duration::from_secs(1);

/// One fault of a seed's schedule.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "fault")]
pub enum FaultKind {
    /// The node stops (its state is lost).
    Crash {
        /// Node id.
        node: u32,
    },
    /// A crashed node starts again under the same id, as a new generation, from what its
    /// store kept (if it persists), and joins through a live member. Its generation is one
    /// above every one the id used, renewals included, as the wall clock and the store make
    /// a restarted `worldmesh node`'s.
    Restart {
        /// Node id.
        node: u32,
    },
    /// These nodes and the others cannot reach each other.
    Partition {
        /// One side.
        nodes: Vec<u32>,
    },
    /// Datagrams from these nodes are lost; they still hear the others.
    Mute {
        /// The muted nodes.
        nodes: Vec<u32>,
    },
    /// Every partition and mute ends.
    Heal,
    /// The node migrates every primary away, then leaves.
    Drain {
        /// Node id.
        node: u32,
    },
    /// A new node joins the running world.
    Join {
        /// Its id (the next free one).
        node: u32,
    },
}

/// A fault and when it happens.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Fault {
    /// Simulated time, ms.
    pub at_ms: u64,
    /// What.
    #[serde(flatten)]
    pub kind: FaultKind,
}

/// Everything a seed draws.
#[derive(Clone, Debug, Serialize)]
pub struct Setup {
    /// The seed.
    pub seed: u64,
    /// Which faults it drew from.
    pub kinds: Faults,
    /// Founding nodes.
    pub nodes: usize,
    /// Players per founding node.
    pub players_per_node: usize,
    /// `rect` or `sqr`.
    pub map: &'static str,
    /// `broadcast` or `colyseus`.
    pub architecture: &'static str,
    /// Uniform round-trip time, ms.
    pub rtt_ms: f64,
    /// Datagram loss probability.
    pub loss: f64,
    /// Datagram duplication probability.
    pub duplicate: f64,
    /// Extra one-way delay drawn per datagram from `[0, jitter_ms]` (reorders).
    pub jitter_ms: f64,
    /// Backups per primary.
    pub backups: usize,
    /// Every node persists to a modelled store (checkpoints every 5 frames, store
    /// batches applied 2 ms after their frame, `Simulation::with_persistence`), and a
    /// restarted node recovers from its store; drawn from a stream of its own, so the
    /// other draws of a seed stay as they were before persistence existed.
    pub persist: bool,
    /// The schedule, in time order.
    pub faults: Vec<Fault>,
}

/// A broken invariant.
#[derive(Clone, Debug, Serialize)]
pub struct Violation {
    /// When (simulated time, ms).
    pub at_ms: u64,
    /// Which invariant (its name in the module documentation).
    pub invariant: &'static str,
    /// What exactly.
    pub detail: String,
}

/// What one seed did.
#[derive(Clone, Debug, Serialize)]
pub struct SeedOutcome {
    /// The setup drawn.
    pub setup: Setup,
    /// Engine events processed.
    pub events: u64,
    /// Invariant checks made.
    pub checks: u64,
    /// How the members recorded the drained members' departures.
    pub leaves: Leaves,
    /// Generations renewed: a node declared down while it ran (cut off, stalled, or a
    /// false suspicion) came back as its next generation.
    pub renewals: u64,
    /// The first violation, if any.
    pub violation: Option<Violation>,
    /// With a violation: the faults and the membership, adoption, migration and drain
    /// events of the run, in order (the last [`LOG_LINES`]).
    pub log: Vec<String>,
}

/// How the live members recorded the departures of drained members (one record per
/// observer and drained member).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Leaves {
    /// Recorded as a leave (the leave notice arrived with or before the leave).
    pub as_left: u64,
    /// Recorded as a failure (the leave reached the observer without its notice: cut off
    /// from the leaver, it declared the member down). An observer that had declared the
    /// member down before it left is not counted.
    pub as_failed: u64,
}

/// Lines of event log kept for a failing seed.
pub const LOG_LINES: usize = 400;

impl SeedOutcome {
    /// The command that replays this seed.
    pub fn replay_command(&self) -> String {
        let kinds = match self.setup.kinds {
            Faults::All => "all",
            Faults::Crashes => "crashes",
        };
        format!(
            "worldmesh swarm --faults {kinds} --seeds 1 --from {}",
            self.setup.seed
        )
    }
}

/// Which faults a swarm draws from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Faults {
    /// Everything: crashes, restarts, joins, drains, symmetric and one-way partitions,
    /// 0–20 % loss, duplication and jitter.
    All,
    /// Crashes, restarts, joins and drains over a network with at most 5 % loss (no
    /// partitions).
    Crashes,
}

/// Draws the setup of `seed`.
pub fn draw(seed: u64, kinds: Faults) -> Setup {
    let mut r = DetRng::new(seed ^ 0x5357_4152_4d00_0000);
    let nodes = 4 + r.index(7);
    let max_down = (nodes / 10).max(1);
    let mut faults = Vec::new();
    let mut down: Vec<(u32, f64)> = Vec::new(); // crashed node, until when
    let mut draining: BTreeSet<u32> = BTreeSet::new();
    let mut next_id = nodes as u32;
    let mut times: Vec<f64> = (0..1 + r.index(5))
        .map(|_| r.range_f64(FAULTS_FROM_S, FAULTS_UNTIL_S))
        .collect();
    times.sort_by(f64::total_cmp);
    let ms = |t: f64| (t * 1000.0).round() as u64;
    for t in times {
        down.retain(|(_, until)| *until > t);
        let live: Vec<u32> = (0..next_id)
            .filter(|n| !down.iter().any(|(d, _)| d == n) && !draining.contains(n))
            .collect();
        let mut pick = r.index(100);
        if kinds == Faults::Crashes && (30..65).contains(&pick) {
            // No partitions: a crash, a drain or a join instead.
            pick = [0, 70, 90][pick % 3];
        }
        if pick < 30 && down.len() < max_down && live.len() > 2 {
            let n = live[r.index(live.len())];
            faults.push(Fault {
                at_ms: ms(t),
                kind: FaultKind::Crash { node: n },
            });
            let back = if r.index(10) < 6 {
                (t + r.range_f64(1.0, 5.0)).min(HEAL_S)
            } else {
                f64::INFINITY
            };
            if back.is_finite() {
                faults.push(Fault {
                    at_ms: ms(back),
                    kind: FaultKind::Restart { node: n },
                });
            }
            down.push((n, back));
        } else if pick < 50 && kinds == Faults::All && live.len() > 2 {
            let k = 1 + r.index((live.len() / 2).max(1));
            let mut side = live.clone();
            r.shuffle(&mut side);
            side.truncate(k);
            side.sort_unstable();
            faults.push(Fault {
                at_ms: ms(t),
                kind: FaultKind::Partition { nodes: side },
            });
            faults.push(Fault {
                at_ms: ms((t + r.range_f64(1.0, 4.0)).min(HEAL_S)),
                kind: FaultKind::Heal,
            });
        } else if pick < 65 && kinds == Faults::All && !live.is_empty() {
            let n = live[r.index(live.len())];
            faults.push(Fault {
                at_ms: ms(t),
                kind: FaultKind::Mute { nodes: vec![n] },
            });
            faults.push(Fault {
                at_ms: ms((t + r.range_f64(1.0, 4.0)).min(HEAL_S)),
                kind: FaultKind::Heal,
            });
        } else if pick < 80 && live.len() > 2 {
            let n = live[r.index(live.len())];
            draining.insert(n);
            faults.push(Fault {
                at_ms: ms(t),
                kind: FaultKind::Drain { node: n },
            });
        } else if next_id < nodes as u32 + SPARES as u32 {
            faults.push(Fault {
                at_ms: ms(t),
                kind: FaultKind::Join { node: next_id },
            });
            next_id += 1;
        }
    }
    faults.push(Fault {
        at_ms: ms(HEAL_S),
        kind: FaultKind::Heal,
    });
    faults.sort_by_key(|f| f.at_ms);
    let losses: &[f64] = match kinds {
        Faults::All => &[0.0, 0.0, 0.02, 0.05, 0.1, 0.2],
        Faults::Crashes => &[0.0, 0.0, 0.02, 0.05],
    };
    Setup {
        seed,
        kinds,
        nodes,
        players_per_node: 1 + r.index(4),
        map: if r.index(2) == 0 { "rect" } else { "sqr" },
        architecture: if r.index(10) < 6 { "broadcast" } else { "colyseus" },
        rtt_ms: r.range_f64(2.0, 40.0).round(),
        loss: losses[r.index(losses.len())],
        duplicate: [0.0, 0.01, 0.05][r.index(3)],
        jitter_ms: [0.0, 2.0, 10.0][r.index(3)],
        backups: 1 + r.index(2),
        persist: DetRng::new(seed ^ 0x5045_5253_4953_5400).index(2) == 1,
        faults,
    }
}

/// How long a restarted node that persists waits after joining before it installs what
/// its store kept (`Node::recover_after_join`): the `lan` profile's 2 s of suspicion and a
/// second for adoptions to be announced to it.
const RECOVERY_SETTLE: Duration = Duration::from_secs(3);

/// Room for joiners.
const SPARES: usize = 2;

impl Setup {
    /// The simulation configuration of this setup.
    pub fn config(&self) -> SimConfig {
        let mut cfg = SimConfig {
            nodes: self.nodes,
            players_per_node: self.players_per_node,
            duration_s: HEAL_S + LIVENESS_S,
            seed: self.seed,
            architecture: if self.architecture == "broadcast" {
                Architecture::Broadcast
            } else {
                Architecture::Colyseus
            },
            ..SimConfig::default()
        };
        cfg.game.map = if self.map == "rect" {
            MapKind::Rect
        } else {
            MapKind::Sqr
        };
        cfg.network.latency = format!("uniform:{}", self.rtt_ms);
        cfg.network.loss = self.loss;
        cfg.network.duplicate = self.duplicate;
        cfg.network.jitter_ms = self.jitter_ms;
        cfg.cluster.membership = true;
        cfg.cluster.backups = self.backups;
        cfg.cluster.trace_writes = true;
        if self.persist {
            cfg.cluster.checkpoint_frames = 5;
        }
        cfg
    }
}

/// The checker's memory of what primaries held.
#[derive(Default)]
struct Checker {
    /// Per node: object → epoch, for the objects it holds as primary (as of its last check).
    primaries: Vec<BTreeMap<ObjectId, u32>>,
    /// Per object: the highest version any primary held, and the nodes that ever held it.
    history: HashMap<ObjectId, (u64, BTreeSet<NodeId>)>,
    /// Per node: object → version last seen there.
    versions: Vec<HashMap<ObjectId, u64>>,
    /// Same-epoch pairs: (object, epoch) → the current episode (see [`Rivalry`]).
    rivals: BTreeMap<(ObjectId, u32), Rivalry>,
    /// Who adopted each object under each epoch, for the rival allowance.
    adopted: BTreeMap<(ObjectId, u32), BTreeSet<NodeId>>,
    /// Objects whose orphans are to be adopted (their [`OrphanPolicy`] as seen at a
    /// primary): dropping one of them as an orphan loses it.
    adoptable: BTreeSet<ObjectId>,
    /// Per node: its incarnation (restarts and rejoins start a new one), and how much of
    /// its trace of applied writes has been checked.
    incarnations: Vec<u32>,
    write_cursors: Vec<usize>,
    /// Every forwarded write applied: (object, writer, writer's incarnation, sequence
    /// number) → the (primary, its incarnation, epoch) that applied it.
    applied: HashSet<(ObjectId, NodeId, u32, u64, NodeId, u32, u32)>,
    checks: u64,
}

impl Checker {
    /// Whether two primaries of `id` under `epoch` may be rivals: adopters of one orphan
    /// under that epoch, or the nodes their primaries migrated to (a migration raises the
    /// epoch by one, so two rival adopters under epoch `e` that both migrate the object
    /// leave two primaries under `e + 1` until they settle: `--faults all` seed 671).
    fn rivals_at_or_below(&self, id: ObjectId, epoch: u32) -> bool {
        self.adopted.contains_key(&(id, epoch))
            || self
                .adopted
                .range((id, 0)..(id, epoch))
                .any(|(_, adopters)| adopters.len() > 1)
    }

    fn grow(&mut self, n: usize) {
        if self.primaries.len() < n {
            self.primaries.resize_with(n, BTreeMap::new);
            self.versions.resize_with(n, HashMap::new);
            self.incarnations.resize(n, 0);
            self.write_cursors.resize(n, 0);
        }
    }

    /// Node `i` restarted or rejoined: what it held is gone.
    fn reset(&mut self, i: usize) {
        self.grow(i + 1);
        self.primaries[i].clear();
        self.versions[i].clear();
        self.incarnations[i] += 1;
        self.write_cursors[i] = 0;
    }

    fn check(&mut self, sim: &Sim, i: usize) -> Result<(), Violation> {
        self.checks += 1;
        self.grow(sim.nodes().len());
        let now = sim.now();
        let at_ms = now.as_micros() / 1000;
        let node = &sim.nodes()[i];
        let me = node.id();
        let rm = node.replicas();
        let mut prim = BTreeMap::new();
        for (id, e) in node.store().iter() {
            if e.role == Role::Primary {
                let epoch = rm.binding_of(id).epoch;
                prim.insert(id, epoch);
                if e.object.orphan_policy() == OrphanPolicy::Adopt {
                    self.adoptable.insert(id);
                }
                let h = self.history.entry(id).or_default();
                h.0 = h.0.max(e.version);
                h.1.insert(me);
            }
        }
        // Monotone versions, and replicas from primaries.
        let seen = &mut self.versions[i];
        seen.retain(|id, _| node.store().get(*id).is_some());
        for (id, e) in node.store().iter() {
            if let Some(&v) = seen.get(&id)
                && e.version < v
            {
                return Err(Violation {
                    at_ms,
                    invariant: "monotone-versions",
                    detail: format!("{me} holds {id} at version {} after {v}", e.version),
                });
            }
            seen.insert(id, e.version);
            if let Role::Replica { primary } = e.role {
                let (max, holders) = self.history.get(&id).cloned().unwrap_or_default();
                if e.version > max {
                    return Err(Violation {
                        at_ms,
                        invariant: "replica-from-primary",
                        detail: format!(
                            "{me}'s replica of {id} is at version {}, no primary ever held more than {max}",
                            e.version
                        ),
                    });
                }
                if !holders.contains(&primary) {
                    return Err(Violation {
                        at_ms,
                        invariant: "replica-from-primary",
                        detail: format!(
                            "{me} follows {primary} for {id}, which never held it as primary (holders {holders:?})"
                        ),
                    });
                }
            }
        }
        // Every forwarded write applied at most once by one primary under one epoch (the
        // writer retries until acknowledged; the primary's per-writer log must absorb the
        // retries). A later primary of the object may apply it again only if the state it
        // took over did not contain it.
        let trace = rm.applied_writes();
        if trace.len() < self.write_cursors[i] {
            self.write_cursors[i] = 0;
        }
        for w in &trace[self.write_cursors[i]..] {
            let writer_inc = self.incarnations.get(w.writer.0 as usize).copied().unwrap_or(0);
            let key = (
                w.id,
                w.writer,
                writer_inc,
                w.seq,
                me,
                self.incarnations[i],
                w.epoch,
            );
            if !self.applied.insert(key) {
                return Err(Violation {
                    at_ms,
                    invariant: "write-applied-once",
                    detail: format!(
                        "{me} applied write {} of {} to {} twice under epoch {}",
                        w.seq, w.writer, w.id, w.epoch
                    ),
                });
            }
        }
        self.write_cursors[i] = trace.len();
        // One primary per epoch among live nodes.
        for (id, epoch) in &prim {
            for (j, other) in self.primaries.iter().enumerate() {
                if j == i || !sim.is_up(NodeId(j as u32)) || other.get(id) != Some(epoch) {
                    continue;
                }
                let key = (*id, *epoch);
                // The window runs while each lists the other as a live member: before
                // that, neither can learn of the other's adoption (see [`RIVAL_WINDOW`]).
                let other_id = NodeId(j as u32);
                let apart = sim.nodes()[i].members().binary_search(&other_id).is_err()
                    || sim.nodes()[j].members().binary_search(&me).is_err();
                let pair = (me.min(other_id), me.max(other_id));
                let r = self.rivals.entry(key).or_insert(Rivalry {
                    first: now,
                    last: now,
                    pair,
                });
                // A new episode: while apart, with other nodes than the last one, or after
                // the last one ended (a duplicate still there is seen every frame).
                if apart || r.pair != pair || now.saturating_since(r.last) > EPISODE_GAP {
                    r.first = now;
                    r.pair = pair;
                }
                r.last = now;
                let first = r.first;
                let rival = *epoch > 0 && self.rivals_at_or_below(*id, *epoch);
                if !rival || now.saturating_since(first) > RIVAL_WINDOW {
                    return Err(Violation {
                        at_ms,
                        invariant: "one-primary-per-epoch",
                        detail: format!(
                            "{id} is a primary on {me} and n{j} under epoch {epoch} (since {} ms)",
                            first.as_micros() / 1000
                        ),
                    });
                }
            }
        }
        self.primaries[i] = prim;
        Ok(())
    }
}

/// Runs seed `seed` to the end (or its first violation).
pub fn run_seed(seed: u64, kinds: Faults) -> Result<SeedOutcome, ConfigError> {
    let setup = draw(seed, kinds);
    let cfg = setup.config();
    let mut sim = scenario::build_with_spares(&cfg, SPARES)?;
    sim.record_events();
    let world = Arc::clone(sim.nodes()[0].world());
    let mut checker = Checker::default();
    // The highest generation each node id has used, restarts and renewals alike.
    let mut generations: BTreeMap<u32, u32> = BTreeMap::new();
    let mut events = 0u64;
    let end = Time::from_secs_f64(HEAL_S + LIVENESS_S);
    let mut faults = setup.faults.iter().peekable();
    let mut deleted: BTreeSet<ObjectId> = BTreeSet::new();
    let mut born: HashMap<ObjectId, Time> = HashMap::new();
    let mut before_heal: BTreeSet<ObjectId> = BTreeSet::new();
    // A violation found while taking the step's events (reported once they are taken).
    let mut violated: Option<Violation> = None;
    let mut log: std::collections::VecDeque<String> = std::collections::VecDeque::new();
    // The identities that drained and left, and how the others recorded their going.
    let mut drained: BTreeSet<Member> = BTreeSet::new();
    let mut leaves = Leaves::default();
    let mut renewals = 0u64;
    let outcome = |setup: &Setup,
                   events,
                   checks,
                   (leaves, renewals),
                   violation: Option<Violation>,
                   log: std::collections::VecDeque<String>| SeedOutcome {
        setup: setup.clone(),
        events,
        checks,
        leaves,
        renewals,
        log: if violation.is_some() {
            log.into()
        } else {
            Vec::new()
        },
        violation,
    };
    loop {
        let next_fault = faults.peek().map(|f| Time::from_millis(f.at_ms));
        let until = next_fault.unwrap_or(end).min(end);
        while sim.step(until) {
            events += 1;
            let mut exited = Vec::new();
            for (at, n, e) in sim.take_events() {
                if matches!(
                    e,
                    Event::MemberUp(_)
                        | Event::MemberDown(..)
                        | Event::Joined
                        | Event::Rejoined(_)
                        | Event::Adopted { .. }
                        | Event::OrphanDropped { .. }
                        | Event::Migration(_)
                        | Event::Drained { .. }
                ) {
                    if log.len() == LOG_LINES {
                        log.pop_front();
                    }
                    log.push_back(format!("{:>6} ms {n}: {e:?}", at.as_micros() / 1000));
                }
                match e {
                    Event::Adopted {
                        id, epoch, version, ..
                    } => {
                        checker.adopted.entry((id, epoch)).or_default().insert(n);
                        // The adopter held it, if only within this event (a missile may
                        // end in the same frame).
                        let h = checker.history.entry(id).or_default();
                        h.0 = h.0.max(version);
                        h.1.insert(n);
                    }
                    // A migration abandoned because its target was declared down rebinds
                    // the object here past the epoch it offered (the target may hold that
                    // one): a binding made alone, like an adoption, and settled the same
                    // way if the other side of a partition adopted it meanwhile.
                    Event::Migration(MigrationEvent::Refused {
                        ids,
                        reason: RefuseReason::TargetDown,
                        ..
                    }) => {
                        let rm = sim.nodes()[n.0 as usize].replicas();
                        for id in ids {
                            let epoch = rm.names().local_epoch(id);
                            checker.adopted.entry((id, epoch)).or_default().insert(n);
                        }
                    }
                    Event::PrimaryDeleted { id } => {
                        deleted.insert(id);
                    }
                    // Dropped here, not deleted by the game (a notice its node could not
                    // deliver before it failed), and no live node holds it as primary: lost.
                    Event::OrphanDropped { id, dead }
                        if checker.adoptable.contains(&id)
                            && !deleted.contains(&id)
                            && !sim.nodes().iter().any(|x| {
                                sim.is_up(x.id())
                                    && x.store().get(id).is_some_and(|e| e.role == Role::Primary)
                            }) =>
                    {
                        violated.get_or_insert(Violation {
                            at_ms: at.as_micros() / 1000,
                            invariant: "no-object-lost",
                            detail: format!("{n} dropped {id}, an orphan of {dead} that nobody adopted"),
                        });
                    }
                    Event::PrimaryCreated { id } => {
                        born.entry(id).or_insert(at);
                    }
                    Event::Rejoined(m) => {
                        renewals += 1;
                        checker.reset(n.0 as usize);
                        // Renewed: a later process of this node starts above it.
                        let g = generations.entry(n.0).or_insert(0);
                        *g = (*g).max(m.generation);
                    }
                    // A drained node has left: its process exits (`worldmesh node` does).
                    Event::Drained { .. } => {
                        if let Some(m) = sim.nodes()[n.0 as usize].membership() {
                            drained.insert(m.me());
                        }
                        exited.push(n);
                    }
                    Event::MemberDown(m, why) => match (drained.contains(&m), why) {
                        (true, Departure::Left) => leaves.as_left += 1,
                        (true, Departure::Failed) => leaves.as_failed += 1,
                        (false, Departure::Failed) | (_, Departure::Forgotten) => {}
                        (false, Departure::Left) => {
                            violated.get_or_insert(Violation {
                                at_ms: at.as_micros() / 1000,
                                invariant: "no-failure-told-as-leave",
                                detail: format!("{n} recorded {m:?} as left, and it never drained"),
                            });
                        }
                    },
                    _ => {}
                }
            }
            for n in exited {
                sim.crash(n);
            }
            let found = violated.take().or_else(|| {
                sim.last_touched()
                    .and_then(|n| checker.check(&sim, n.0 as usize).err())
            });
            if let Some(v) = found {
                return Ok(outcome(
                    &setup,
                    events,
                    checker.checks,
                    (leaves, renewals),
                    Some(v),
                    log,
                ));
            }
        }
        if until >= end {
            break;
        }
        let Some(f) = faults.next() else { break };
        sim.run_until(until);
        log.push_back(format!("{:>6} ms FAULT {:?}", f.at_ms, f.kind));
        if f.at_ms == (HEAL_S * 1000.0) as u64 && before_heal.is_empty() {
            before_heal = live_primaries(&sim).into_keys().collect();
            // The network becomes healthy: partitions end (the fault), loss and
            // duplication stop (jitter stays).
            sim.network_mut().set_faults(0.0, 0.0);
        }
        apply(&mut sim, &cfg, &world, f, &mut generations, &mut checker)?;
    }
    sim.run_until(end);
    let violation = liveness(&sim, &setup, &before_heal, &deleted, &born);
    Ok(outcome(
        &setup,
        events,
        checker.checks,
        (leaves, renewals),
        violation,
        log,
    ))
}

fn live_primaries(sim: &Sim) -> BTreeMap<ObjectId, Vec<NodeId>> {
    let mut m: BTreeMap<ObjectId, Vec<NodeId>> = BTreeMap::new();
    for n in sim.nodes() {
        if !sim.is_up(n.id()) {
            continue;
        }
        for (id, e) in n.store().iter() {
            if e.role == Role::Primary {
                m.entry(id).or_default().push(n.id());
            }
        }
    }
    m
}

fn liveness(
    sim: &Sim,
    setup: &Setup,
    before_heal: &BTreeSet<ObjectId>,
    deleted: &BTreeSet<ObjectId>,
    born: &HashMap<ObjectId, Time>,
) -> Option<Violation> {
    let at_ms = sim.now().as_micros() / 1000;
    let prim = live_primaries(sim);
    for (id, at) in &prim {
        if at.len() > 1 {
            return Some(Violation {
                at_ms,
                invariant: "liveness: one primary",
                detail: format!("{id} is a primary on {at:?} {LIVENESS_S} s after the heal"),
            });
        }
    }
    for id in before_heal {
        if !prim.contains_key(id) && !deleted.contains(id) {
            return Some(Violation {
                at_ms,
                invariant: "liveness: no object lost",
                detail: format!("{id} had a primary before the heal and has none now"),
            });
        }
    }
    if setup.architecture == "broadcast" {
        let members: Vec<&Node<ModelObject>> = sim
            .nodes()
            .iter()
            .filter(|n| sim.is_up(n.id()) && !n.members().is_empty() && n.drain_state().is_none())
            .collect();
        let old = sim.now().saturating_since(Time::ZERO) > Duration::from_secs(1);
        for (id, at) in &prim {
            let young = born
                .get(id)
                .is_some_and(|t| sim.now().saturating_since(*t) < Duration::from_secs(1));
            if young || !old {
                continue;
            }
            for n in &members {
                if n.id() != at[0] && n.members().contains(&at[0]) && n.store().get(*id).is_none() {
                    return Some(Violation {
                        at_ms,
                        invariant: "liveness: replicas",
                        detail: format!(
                            "{} holds no replica of {id} (primary on {} under epoch {}) {LIVENESS_S} s after the heal; it binds {id} to {:?}{}",
                            n.id(),
                            at[0],
                            sim.nodes()[at[0].0 as usize].replicas().names().local_epoch(*id),
                            n.replicas().binding_of(*id),
                            if n.replicas().binding_failed(*id) {
                                " (failed)"
                            } else {
                                ""
                            },
                        ),
                    });
                }
            }
        }
    }
    None
}

fn apply(
    sim: &mut Sim,
    cfg: &SimConfig,
    world: &Arc<worldmesh_game::GameMap>,
    f: &Fault,
    generations: &mut BTreeMap<u32, u32>,
    checker: &mut Checker,
) -> Result<(), ConfigError> {
    let seed_of = |sim: &Sim, not: u32| {
        sim.nodes()
            .iter()
            .map(|n| n.id())
            .find(|id| id.0 != not && sim.is_up(*id) && !sim.nodes()[id.0 as usize].members().is_empty())
    };
    match &f.kind {
        FaultKind::Crash { node } => sim.crash(NodeId(*node)),
        FaultKind::Restart { node } => {
            let g = generations.entry(*node).or_insert(0);
            *g += 1;
            let mut n = scenario::new_member(cfg, Arc::clone(world), NodeId(*node), *g, sim.now())?;
            if let Some(store) = sim.store(NodeId(*node)) {
                // What its store kept comes back, under the epochs it was stored with.
                // Into a running world: installed once the cluster had time to say what
                // moved on while it was down.
                n.recover_after_join(sim.now(), store.load(), RECOVERY_SETTLE)
                    .map_err(|e| ConfigError::Invalid(format!("node {node} cannot recover: {e}")))?;
            }
            sim.restart(n);
            checker.reset(*node as usize);
            if let Some(s) = seed_of(sim, *node) {
                sim.with_node(NodeId(*node), |n, now| n.join(now, &[Member::simulated(s, 0)]));
            }
        }
        FaultKind::Partition { nodes } => {
            let side: Vec<NodeId> = nodes.iter().map(|n| NodeId(*n)).collect();
            sim.network_mut().partition(&side);
        }
        FaultKind::Mute { nodes } => {
            let side: Vec<NodeId> = nodes.iter().map(|n| NodeId(*n)).collect();
            sim.network_mut().mute(&side);
        }
        FaultKind::Heal => sim.network_mut().heal(),
        FaultKind::Drain { node } => {
            if sim.is_up(NodeId(*node)) {
                sim.with_node(NodeId(*node), |n, now| n.drain(now));
            }
        }
        FaultKind::Join { node } => {
            let n = scenario::new_member(cfg, Arc::clone(world), NodeId(*node), 0, sim.now())?;
            sim.add_node(n);
            checker.grow(*node as usize + 1);
            if let Some(s) = seed_of(sim, *node) {
                sim.with_node(NodeId(*node), |n, now| n.join(now, &[Member::simulated(s, 0)]));
            }
        }
    }
    Ok(())
}

/// Runs seeds `from..from + count` and returns every outcome (callers print the failing
/// ones).
pub fn run(
    from: u64,
    count: u64,
    kinds: Faults,
    mut progress: impl FnMut(&SeedOutcome),
) -> Result<Vec<SeedOutcome>, ConfigError> {
    let mut out = Vec::new();
    for seed in from..from.saturating_add(count) {
        let o = run_seed(seed, kinds)?;
        progress(&o);
        out.push(o);
    }
    Ok(out)
}
