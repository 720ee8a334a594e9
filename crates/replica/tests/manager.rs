//! Replica managers on the one engine (`worldmesh_engine`) over a lossy, reordering network.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use proptest::prelude::*;
use worldmesh_core::{Aabb, DetRng, NodeId, ObjectId, Point3, Time, Transmit};
use worldmesh_engine::{Engine, Fate, Links, Step};
use worldmesh_replica::{
    AdoptError, Binding, GameObject, Mode, MovedOutcome, Packet, ReplicaConfig, ReplicaHost, ReplicaManager,
    ReplicaMsg, Role, StateError, ThinkContext,
};

/// A test object: moves along x by `speed` per frame, keeps a log of the writes applied to
/// it, optionally fires a child attached to itself, and has a field-wise delta encoding.
#[derive(Clone, Debug, PartialEq, bitcode::Encode, bitcode::Decode)]
struct Probe {
    x: f32,
    speed: f32,
    aoi: f32,
    log: Vec<u32>,
    parent: Option<ObjectId>,
    fire_at_frame: u32,
    frame: u32,
    /// Writes this object makes each frame: (target, value).
    writes: Vec<(ObjectId, u32)>,
    /// Whether [`GameObject::velocity`] states the speed (else the manager estimates it).
    says_velocity: bool,
    /// Writes are made only in frames up to this one (0: every frame).
    write_until: u32,
    /// The object deletes itself in this frame (0: never).
    delete_at_frame: u32,
    /// Away from the node that created it, the object does nothing: it neither changes
    /// nor deletes itself (a copy adopted elsewhere that no longer changes).
    still_elsewhere: bool,
    /// The object does nothing anywhere: it keeps its first version.
    still: bool,
    /// Its history copies set `copied`: a witness of which copy updates are encoded from.
    /// It breaks `GameObject::history_copy`'s contract (a copy encodes differently) on
    /// purpose, and only for the objects a test marks.
    mark_copies: bool,
    /// Set in a marked object's history copies.
    copied: bool,
}

impl Probe {
    /// At 0, moving by 1 each frame (so every frame takes a new version).
    fn mover() -> Self {
        Probe {
            speed: 1.0,
            ..Probe::at(0.0)
        }
    }

    fn at(x: f32) -> Self {
        Probe {
            x,
            speed: 0.0,
            aoi: 50.0,
            log: vec![],
            parent: None,
            fire_at_frame: 0,
            frame: 0,
            writes: vec![],
            says_velocity: true,
            write_until: 0,
            delete_at_frame: 0,
            still_elsewhere: false,
            still: false,
            mark_copies: false,
            copied: false,
        }
    }
}

impl GameObject for Probe {
    type World = ();
    type Write = u32;

    fn think(&mut self, ctx: &mut ThinkContext<'_, Self>) {
        if self.still || (self.still_elsewhere && ctx.node != ctx.id.origin) {
            return;
        }
        self.frame += 1;
        self.x += self.speed;
        if self.fire_at_frame == self.frame {
            let mut child = Probe::at(self.x);
            child.aoi = 0.0;
            child.parent = Some(ctx.id);
            ctx.spawn(child);
        }
        if self.delete_at_frame == self.frame {
            ctx.delete_self();
        }
        if self.write_until == 0 || self.frame <= self.write_until {
            for (t, v) in self.writes.clone() {
                ctx.write(t, v);
            }
        }
    }
    fn position(&self) -> Point3 {
        Point3::new(self.x, 0.0, 0.0)
    }
    // For prediction, `speed` is read as units per second.
    fn velocity(&self) -> Option<Point3> {
        (self.says_velocity && self.speed != 0.0).then(|| Point3::new(self.speed, 0.0, 0.0))
    }
    fn interest(&self, _world: &Self::World) -> Option<Aabb> {
        (self.aoi > 0.0).then(|| Aabb::around(self.position(), Point3::new(self.aoi, self.aoi, self.aoi)))
    }
    fn attached_to(&self) -> Option<ObjectId> {
        self.parent
    }
    fn apply_write(&mut self, w: &u32) {
        self.log.push(*w);
    }
    fn encode_state(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&bitcode::encode(self));
    }
    fn decode_state(b: &[u8]) -> Result<Self, StateError> {
        bitcode::decode(b).map_err(StateError::from)
    }
    fn history_copy(&self) -> Self {
        Probe {
            copied: self.mark_copies,
            ..self.clone()
        }
    }
    // Field-wise delta: a mask byte, then x (bit 0), then the whole rest (bit 1).
    fn encode_delta(&self, base: &Self, out: &mut Vec<u8>) {
        let rest_same = Probe {
            x: base.x,
            ..self.clone()
        } == *base;
        let mask = u8::from(self.x != base.x) | (u8::from(!rest_same) << 1);
        out.push(mask);
        if mask & 1 != 0 {
            out.extend_from_slice(&self.x.to_le_bytes());
        }
        if mask & 2 != 0 {
            self.encode_state(out);
        }
    }
    fn apply_delta(base: &Self, d: &[u8]) -> Result<Self, StateError> {
        let (&mask, mut rest) = d
            .split_first()
            .ok_or(StateError::Truncated { needed: 1, left: 0 })?;
        let mut o = base.clone();
        if mask & 1 != 0 {
            let x: [u8; 4] = rest
                .get(..4)
                .and_then(|s| s.try_into().ok())
                .ok_or_else(|| StateError::invalid("Probe delta", "too short"))?;
            o.x = f32::from_le_bytes(x);
            rest = &rest[4..];
        }
        if mask & 2 != 0 {
            let x = o.x;
            o = Self::decode_state(rest)?;
            o.x = x;
        }
        Ok(o)
    }
}

/// Sees a packet sent (from, to); `false` drops it.
type Tap = dyn FnMut(NodeId, NodeId, &Packet) -> bool;

/// One frame, the engine's unit of time here.
const FRAME: Duration = Duration::from_millis(100);
/// Datagrams take whole frames plus this, so they arrive after the frames of their
/// instant (every node frames at the same instants).
const AFTER_FRAMES: Duration = Duration::from_micros(1);

/// The test network: each packet lost with probability `loss`, shown to the tap, then
/// duplicated with probability `dup`; each copy takes 0 to `max_delay` whole frames.
struct Lossy {
    rng: DetRng,
    loss: f64,
    dup: f64,
    max_delay: u64,
    /// Sees every packet sent (from, to) that loss spared; `false` drops it.
    tap: Option<Box<Tap>>,
}

impl Links<Packet> for Lossy {
    fn route(&mut self, _now: Time, src: NodeId, t: &Transmit<Packet>) -> Fate {
        if self.rng.chance(self.loss) {
            return Fate::Lost;
        }
        if let Some(tap) = &mut self.tap
            && !tap(src, t.dst, &t.datagram)
        {
            return Fate::Lost;
        }
        let dup = self.rng.chance(self.dup);
        let mut delay = || FRAME * self.rng.below(self.max_delay + 1) as u32 + AFTER_FRAMES;
        let first = delay();
        Fate::Deliver(first, dup.then(delay))
    }
}

struct Net {
    engine: Engine<ReplicaHost<Probe>, Lossy>,
    step: u64,
    /// Every (object, version) → state a primary ever had (its history copy, which is
    /// what updates are encoded from).
    versions: BTreeMap<(ObjectId, u64), Probe>,
}

impl Net {
    fn new(n: u32, mode: Mode, seed: u64) -> Self {
        Self::with_config(n, mode, seed, ReplicaConfig::default())
    }

    fn with_config(n: u32, mode: Mode, seed: u64, cfg: ReplicaConfig) -> Self {
        let ids: Vec<NodeId> = (0..n).map(NodeId).collect();
        let hosts = ids
            .iter()
            .map(|&me| {
                let peers = ids.iter().copied().filter(|p| *p != me).collect();
                // A frame every 100 ms, each host with its own random stream.
                ReplicaHost::new(
                    ReplicaManager::new(me, mode, cfg.clone(), peers),
                    (),
                    DetRng::new(seed).fork(u64::from(me.0)),
                    FRAME,
                )
            })
            .collect();
        let links = Lossy {
            rng: DetRng::new(seed),
            loss: 0.0,
            dup: 0.0,
            max_delay: 0,
            tap: None,
        };
        let mut net = Net {
            // A crashed node's packets still in flight are lost with it.
            engine: Engine::new(hosts, links).dropping_from_crashed(),
            step: 0,
            versions: BTreeMap::new(),
        };
        for id in ids {
            net.engine.pump(id, |_, _, _, _| {});
        }
        net
    }

    /// The time of the next frame (what inputs given by hand between steps happen at).
    fn now(&self) -> Time {
        Time::from_millis(self.step * 100)
    }

    /// The network, to set loss, duplication, delay and the tap.
    fn links(&mut self) -> &mut Lossy {
        self.engine.links_mut()
    }

    fn nodes(&self) -> impl Iterator<Item = &ReplicaManager<Probe>> {
        self.engine.machines().iter().map(|h| &h.rm)
    }

    fn rm(&self, i: usize) -> &ReplicaManager<Probe> {
        &self.engine.machines()[i].rm
    }

    fn node(&mut self, i: usize) -> &mut ReplicaManager<Probe> {
        &mut self.engine.machines_mut()[i].rm
    }

    /// Sends what node `from` queued (after an input given by hand), now.
    fn send(&mut self, from: usize) {
        let now = self.now();
        self.engine.advance_to(now);
        self.engine.machines_mut()[from].flush(now);
        self.engine.pump(NodeId(from as u32), |_, _, _, _| {});
    }

    /// Sends `packets` from `from` to `to` now, as if `from` had queued them.
    fn send_packets(&mut self, from: usize, to: NodeId, packets: Vec<Packet>) {
        let now = self.now();
        self.engine.advance_to(now);
        let host = &mut self.engine.machines_mut()[from];
        for p in packets {
            host.send(to, p);
        }
        self.engine.pump(NodeId(from as u32), |_, _, _, _| {});
    }

    /// Node `i` stops (crashed, or not started yet): no frames, nothing delivered to it,
    /// and its packets in flight are lost.
    fn stop(&mut self, i: usize) {
        self.engine.crash(NodeId(i as u32));
    }

    /// Node `i` runs again from the next frame, with the state it had.
    fn resume(&mut self, i: usize) {
        let now = self.now();
        self.engine.advance_to(now);
        self.engine.machines_mut()[i].next_frame_at(now);
        self.engine.resume(NodeId(i as u32));
        self.engine.pump(NodeId(i as u32), |_, _, _, _| {});
    }

    /// One frame on every running node, then delivery of everything sent until the next
    /// frame (answers included), checking every replica after each packet.
    fn step(&mut self) {
        let until = Time(self.now().0 + (FRAME - AFTER_FRAMES).as_micros() as u64);
        while let Some(step) = self.engine.step(until) {
            match step {
                Step::Timeout(id) => {
                    let rm = &self.engine.machines()[id.0 as usize].rm;
                    for (oid, e) in rm.store().iter().filter(|(_, e)| e.role == Role::Primary) {
                        self.versions.insert((oid, e.version), e.object.history_copy());
                    }
                    self.engine.pump(id, |_, _, _, _| {});
                }
                Step::Datagram(id) => {
                    self.check_replicas();
                    self.engine.pump(id, |_, _, _, _| {});
                }
                Step::Other(()) | Step::Nothing => {}
            }
        }
        self.engine.advance_to(until);
        self.step += 1;
    }

    /// Every replica's confirmed state is exactly a state its primary had at that
    /// version; the visible state differs from it only by tentative writes (the log).
    fn check_replicas(&self) {
        for n in self.nodes() {
            for (id, e) in n.store().iter() {
                if matches!(e.role, Role::Replica { .. }) {
                    let (v, confirmed) = n.confirmed(id).expect("every replica has a confirmed state");
                    assert_eq!(v, e.version);
                    let truth = self.versions.get(&(id, v));
                    assert_eq!(
                        truth,
                        Some(confirmed),
                        "replica of {id} v{v} is not a primary state"
                    );
                    assert_eq!(
                        Probe {
                            log: confirmed.log.clone(),
                            ..e.object.clone()
                        },
                        *confirmed
                    );
                    assert!(
                        e.object.log.starts_with(&confirmed.log),
                        "tentative writes only append"
                    );
                }
            }
        }
    }

    fn spawn(&mut self, node: usize, p: Probe) -> ObjectId {
        let now = self.now();
        self.node(node).spawn(now, p)
    }

    fn discover_all(&mut self) {
        // An ideal locator: tell every node about every primary.
        let now = self.now();
        let pubs: Vec<(ObjectId, NodeId, Point3)> = self
            .nodes()
            .flat_map(|n| {
                n.store()
                    .iter()
                    .filter(|(_, e)| e.role == Role::Primary)
                    .map(|(id, e)| (id, id.origin, e.object.position()))
                    .collect::<Vec<_>>()
            })
            .collect();
        for i in 0..self.engine.machines().len() {
            for (id, p, pos) in &pubs {
                if self.node(i).on_discovered(now, *id, *p, *pos, &()) {
                    self.send(i);
                }
            }
        }
    }
}

#[test]
fn updates_reach_interested_nodes_and_stop_when_interest_ends() {
    let mut net = Net::new(3, Mode::Interest, 1);
    let mut mover = Probe::at(0.0);
    mover.speed = 10.0;
    mover.aoi = 0.0; // the mover is interested in nothing
    let m = net.spawn(0, mover);
    let watcher = net.spawn(1, Probe::at(20.0)); // sees x in [-30, 70]
    net.spawn(2, Probe::at(1000.0)); // never interested
    net.discover_all();
    for _ in 0..4 {
        net.step();
    }
    let seen = net.rm(1).store().get(m).expect("node 1 replicates the mover");
    let prim = net.rm(0).store().get(m).unwrap();
    assert!(prim.version - seen.version <= 2, "replica at most a frame behind");
    assert!(net.rm(2).store().get(m).is_none());
    assert!(net.rm(0).store().get(watcher).is_none(), "interest is one-way");
    assert_eq!(net.rm(0).receivers_of(m), vec![NodeId(1)]);
    // The mover leaves (x > 70 after 7 frames); after the linger time node 1 drops it
    // and the primary stops sending.
    for _ in 0..30 {
        net.step();
    }
    assert!(net.rm(1).store().get(m).is_none());
    assert!(net.rm(0).receivers_of(m).is_empty());
    let sent = net.rm(0).stats().updates_sent;
    for _ in 0..5 {
        net.step();
    }
    assert_eq!(
        net.rm(0).stats().updates_sent,
        sent,
        "no more updates once interest is gone"
    );
    assert!(
        net.rm(0).stats().updates_sent > net.rm(0).stats().full_states_sent,
        "deltas were used"
    );
}

/// A primary's updates, full states and deltas, are encoded from the copies its version
/// history keeps (`GameObject::history_copy`), never from clones of the live object, also
/// once the history is full and drops its oldest versions.
#[test]
fn updates_are_encoded_from_the_history_copies() {
    let mut net = Net::new(2, Mode::Interest, 3);
    let mut mover = Probe::mover();
    mover.aoi = 0.0;
    mover.mark_copies = true;
    let m = net.spawn(0, mover);
    net.spawn(1, Probe::at(20.0)); // sees x in [-30, 70]
    net.discover_all();
    let history = ReplicaConfig::default().history as u64;
    for _ in 0..history + 10 {
        net.step();
    }
    let prim = net.rm(0).store().get(m).expect("the primary");
    assert!(prim.version > history, "the history is full and drops its oldest");
    assert!(!prim.object.copied, "the live primary is not a copy");
    let seen = net.rm(1).store().get(m).expect("node 1 replicates the mover");
    assert!(prim.version - seen.version <= 2, "replica at most a frame behind");
    assert!(
        seen.object.copied,
        "the replica's state was encoded from a history copy"
    );
    let stats = net.rm(0).stats();
    assert!(stats.updates_sent > stats.full_states_sent, "deltas were used");
}

#[test]
fn tentative_writes_are_serialized_by_the_primary_in_one_order() {
    let mut net = Net::new(3, Mode::Broadcast, 2);
    let target = net.spawn(0, Probe::at(0.0));
    net.step();
    net.step();
    // Nodes 1 and 2 each write to their replica of the target every frame.
    let mut w1 = Probe::at(5.0);
    w1.writes = vec![(target, 1)];
    let mut w2 = Probe::at(6.0);
    w2.writes = vec![(target, 2)];
    net.spawn(1, w1);
    net.spawn(2, w2);
    net.links().loss = 0.0;
    net.links().max_delay = 2; // reordering between the two writers
    for _ in 0..10 {
        net.step();
    }
    // Stop writing: clear the writers by letting the log settle (writers keep writing, so
    // compare prefixes: every replica's log is a prefix of the primary's serialized log).
    let primary_log = net.rm(0).store().object(target).unwrap().log.clone();
    assert!(primary_log.contains(&1) && primary_log.contains(&2));
    assert!(net.rm(0).stats().writes_applied >= primary_log.len() as u64);
    for n in net.nodes().skip(1) {
        let rlog = &n.store().object(target).unwrap().log;
        // A replica's log is the primary's order up to its version, plus at most its own
        // tentative writes of the last frames on top.
        let common = rlog.iter().zip(&primary_log).take_while(|(a, b)| a == b).count();
        assert!(
            rlog.len() - common <= 6,
            "replica log diverges too much: {rlog:?} vs {primary_log:?}"
        );
        assert!(n.stats().writes_forwarded >= 10);
    }
}

#[test]
fn attached_child_reaches_parent_replica_holders_without_discovery() {
    let mut net = Net::new(2, Mode::Interest, 3);
    let mut shooter = Probe::at(0.0);
    shooter.fire_at_frame = 5;
    let s = net.spawn(0, shooter);
    net.spawn(1, Probe::at(10.0));
    net.discover_all(); // discovery of the shooter only: the child does not exist yet
    for _ in 0..4 {
        net.step();
    }
    assert!(net.rm(1).store().get(s).is_some());
    net.step(); // the shooter fires
    net.step();
    let child = net
        .node(0)
        .store()
        .iter()
        .find(|(id, _)| *id != s)
        .map(|(id, _)| id)
        .expect("child exists");
    assert_eq!(net.rm(0).store().object(child).unwrap().parent, Some(s));
    assert!(
        net.rm(1).store().get(child).is_some(),
        "child replicated with no discovery"
    );
    assert_eq!(net.rm(1).stats().fetches_sent, 1, "only the shooter was fetched");
}

#[test]
fn writes_to_objects_not_primary_here_are_dropped() {
    let mut net = Net::new(2, Mode::Broadcast, 4);
    let a = net.spawn(0, Probe::at(0.0));
    net.step();
    net.step();
    // Node 0 receives a forwarded write for an object it does not hold as primary.
    let bogus = worldmesh_replica::WriteItem {
        id: ObjectId::new(NodeId(1), 77),
        seq: 1,
        data: bitcode::encode(&5u32),
    };
    let junk = worldmesh_replica::WriteItem {
        id: a,
        seq: 1,
        data: vec![0xff, 0xff, 0xff],
    };
    let p = Packet {
        seq: 99,
        sent_at: Time::ZERO,
        msgs: vec![worldmesh_replica::ReplicaMsg::Write(vec![bogus, junk])],
    };
    let now = net.now();
    net.node(0).handle_packet(now, NodeId(1), p, &());
    assert_eq!(net.rm(0).stats().writes_dropped, 1);
    assert_eq!(net.rm(0).stats().undecodable, 1);
    assert!(net.rm(0).store().object(a).unwrap().log.is_empty());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Under loss, duplication and reordering, no replica ever holds a state its primary
    /// did not have at that version (a delta is never applied to the wrong baseline), and
    /// once the network is clean every replica catches up.
    #[test]
    fn replicas_never_hold_a_state_the_primary_never_had(
        seed in 0u64..10_000, loss in 0.0f64..0.4, dup in 0.0f64..0.3, delay in 0u64..4
    ) {
        let mut net = Net::new(3, Mode::Broadcast, seed);
        for i in 0..3 {
            let mut p = Probe::at(i as f32 * 7.0);
            p.speed = 1.0 + i as f32;
            p.writes = vec![(ObjectId::new(NodeId(((i + 1) % 3) as u32), 0), i as u32)];
            net.spawn(i, p);
        }
        net.links().loss = loss;
        net.links().dup = dup;
        net.links().max_delay = delay;
        for _ in 0..40 {
            net.step(); // check_replicas runs after every delivery
        }
        net.links().loss = 0.0;
        net.links().dup = 0.0;
        net.links().max_delay = 0;
        for _ in 0..12 {
            net.step();
        }
        for n in net.nodes() {
            prop_assert_eq!(n.store().replica_count(), 2);
            for (id, e) in n.store().iter() {
                if let Role::Replica { primary } = e.role {
                    let pv = net.rm(primary.0 as usize).store().get(id).unwrap().version;
                    prop_assert!(pv - e.version <= 1, "replica {} at v{} vs primary v{}", id, e.version, pv);
                }
            }
        }
    }

    /// Field-wise deltas round-trip against the baseline they were made for.
    #[test]
    fn deltas_round_trip(x0 in -1e6f32..1e6, x1 in -1e6f32..1e6, log in proptest::collection::vec(any::<u32>(), 0..5)) {
        let base = Probe::at(x0);
        let mut next = base.clone();
        next.x = x1;
        next.log = log;
        let mut d = Vec::new();
        next.encode_delta(&base, &mut d);
        prop_assert_eq!(Probe::apply_delta(&base, &d).unwrap(), next);
    }
}

/// Interest prediction (paper `000` §6.2): with a lead time, a moving primary's interest is
/// swept ahead along its velocity, so an object ahead of it is fetched before it enters the
/// area of interest; nothing behind it is, and without a lead only the interest counts.
#[test]
fn predicted_interest_fetches_ahead_of_motion_only() {
    let manager = |lead_ms: u64| {
        let cfg = ReplicaConfig {
            interest_lead: Duration::from_millis(lead_ms),
            ..ReplicaConfig::default()
        };
        let mut m: ReplicaManager<Probe> =
            ReplicaManager::new(NodeId(0), Mode::Interest, cfg, vec![NodeId(1)]);
        let mut walker = Probe::at(0.0);
        walker.speed = 100.0; // sees x in [-50, 50] now, [50, 150] in a second
        m.spawn(Time::ZERO, walker);
        m
    };
    let far = |n: u32| ObjectId::new(NodeId(1), n);
    let t = Time::from_millis(100);
    let mut predicting = manager(1000);
    assert!(predicting.on_discovered(t, far(1), NodeId(1), Point3::new(120.0, 0.0, 0.0), &()));
    assert!(!predicting.on_discovered(t, far(2), NodeId(1), Point3::new(-120.0, 0.0, 0.0), &()));
    assert!(!predicting.on_discovered(t, far(3), NodeId(1), Point3::new(160.0, 0.0, 0.0), &()));
    let mut plain = manager(0);
    assert!(!plain.on_discovered(t, far(1), NodeId(1), Point3::new(120.0, 0.0, 0.0), &()));
    assert!(plain.on_discovered(t, far(4), NodeId(1), Point3::new(40.0, 0.0, 0.0), &()));
}

/// Without a stated velocity, prediction uses the moving average of the primary's observed
/// motion (paper `000` §6.2's default): 10 units per 100-ms frame is 100 units/s, so with a
/// 1-s lead the interest [0, 100] of a walker at x = 50 is swept to [0, 200].
#[test]
fn predicted_interest_falls_back_to_the_observed_motion() {
    let cfg = ReplicaConfig {
        interest_lead: Duration::from_secs(1),
        ..ReplicaConfig::default()
    };
    let mut m: ReplicaManager<Probe> = ReplicaManager::new(NodeId(0), Mode::Interest, cfg, vec![NodeId(1)]);
    let mut walker = Probe::at(0.0);
    walker.speed = 10.0;
    walker.says_velocity = false;
    let id = m.spawn(Time::ZERO, walker);
    let mut rng = DetRng::new(1);
    for f in 1..=5 {
        m.frame(
            Time::from_millis(f * 100),
            Duration::from_millis(100),
            &mut rng,
            &(),
        );
    }
    let b = m
        .predicted_interest(id, &())
        .expect("a moving walker has a predicted interest");
    assert!(b.contains(Point3::new(195.0, 0.0, 0.0)));
    assert!(!b.contains(Point3::new(205.0, 0.0, 0.0)));
    assert!(
        !b.contains(Point3::new(-5.0, 0.0, 0.0)),
        "nothing behind the walker"
    );
}

#[test]
fn a_pushed_state_creates_the_replica_without_a_fetch_and_is_not_resent() {
    let mut net = Net::new(2, Mode::Interest, 4);
    let m = net.spawn(0, Probe::at(0.0));
    net.spawn(1, Probe::at(20.0)); // interested in x in [-30, 70]
    net.step();
    let now = net.now();
    // The locator's rendezvous asked node 0 to push m to node 1 (no discovery at node 1).
    assert!(net.node(0).push_to(now, NodeId(1), m), "a state is queued");
    let packets = net.node(0).flush_peer(now, NodeId(1));
    assert!(!packets.is_empty());
    net.send_packets(0, NodeId(1), packets);
    net.step();
    assert!(
        net.rm(1).store().get(m).is_some(),
        "node 1 holds the pushed replica"
    );
    assert_eq!(net.rm(1).stats().fetches_sent, 0, "without fetching it");
    // A second push for a node that already receives m sends nothing.
    let now = net.now();
    assert!(!net.node(0).push_to(now, NodeId(1), m));
    assert!(!net.node(0).push_to(now, NodeId(0), m), "never to itself");
    // Node 1 wants it, so it keeps it registered like a fetched replica.
    for _ in 0..40 {
        net.step();
    }
    assert!(net.rm(1).store().get(m).is_some());
}

impl Net {
    /// `n` nodes in broadcast mode, every primary backed up by one member, no silent-peer
    /// drops (the tests declare failures themselves).
    fn with_backups(n: u32, seed: u64) -> Self {
        let cfg = ReplicaConfig {
            backups: 1,
            drop_silent_peers: false,
            ..ReplicaConfig::default()
        };
        Net::with_config(n, Mode::Broadcast, seed, cfg)
    }

    /// A target on node 0, and on node `writer` an object writing to it `per_frame` times
    /// a frame for `frames` frames; five frames run after it starts.
    fn writing_to_a_target(&mut self, writer: usize, per_frame: usize, frames: u32) -> ObjectId {
        let target = self.spawn(0, Probe::at(0.0));
        self.step();
        self.step();
        let mut w = Probe::at(5.0);
        w.writes = vec![(target, 1); per_frame];
        w.write_until = frames;
        self.spawn(writer, w);
        for _ in 0..5 {
            self.step();
        }
        target
    }

    /// After the world settled: node `writer` has every write acknowledged, none given up,
    /// and `target`'s primary on `holder` applied each of the `made` writes exactly once.
    fn assert_applied_once(&self, seed: u64, writer: usize, holder: usize, target: ObjectId, made: u64) {
        let w = &self.engine.machines()[writer].rm;
        assert_eq!(w.pending_writes(), 0, "seed {seed}: every write acknowledged");
        assert_eq!(w.stats().writes_expired, 0, "seed {seed}");
        let log = &self.engine.machines()[holder]
            .rm
            .store()
            .object(target)
            .unwrap()
            .log;
        assert_eq!(
            log.len() as u64,
            made,
            "seed {seed}: {made} writes made, {} applied",
            log.len()
        );
    }
}

/// A write the primary acknowledged survives the primary's node failing, and is applied
/// exactly once: the backup holds a version containing it before the acknowledgement goes
/// out, and holds the primary's per-writer logs, so a resend to the adopter is recognised.
#[test]
fn acknowledged_writes_survive_the_primary_failing_and_apply_exactly_once() {
    for seed in 0..24 {
        let mut net = Net::with_backups(3, seed);
        net.links().loss = 0.25;
        net.links().dup = 0.1;
        net.links().max_delay = 2;
        let target = net.spawn(0, Probe::at(0.0));
        let mut writer = Probe::at(10.0);
        writer.writes = vec![(target, 7)];
        writer.write_until = 30;
        net.spawn(2, writer);
        // Crash the primary's node at a seed-dependent moment while writes are in flight.
        let crash_at = 8 + seed % 17;
        for _ in 0..crash_at {
            net.step();
        }
        net.stop(0);
        let now = net.now();
        let survivors = [NodeId(1), NodeId(2)];
        let adopter = worldmesh_core::rendezvous::top(target, survivors, Some(NodeId(0))).unwrap();
        for n in survivors {
            let orphans = net.node(n.0 as usize).member_down(NodeId(0));
            assert!(orphans.contains(&target), "seed {seed}: {n} holds the target");
        }
        let binding = net
            .node(adopter.0 as usize)
            .adopt(now, target, NodeId(0))
            .unwrap();
        for n in survivors.into_iter().filter(|n| *n != adopter) {
            net.node(n.0 as usize)
                .learn_adoption(now, adopter, target, binding);
        }
        // Writes go on, then everything settles on a lossless network.
        for _ in 0..30 {
            net.step();
        }
        net.links().loss = 0.0;
        net.links().dup = 0.0;
        for _ in 0..40 {
            net.step();
        }
        let made = net.rm(2).stats().writes_forwarded + net.rm(2).stats().writes_applied;
        assert!(made >= 20, "seed {seed}: the writer wrote ({made})");
        net.assert_applied_once(seed, 2, adopter.0 as usize, target, made);
    }
}

/// A member that joins and becomes an object's backup, and adopts it when the primary
/// fails right after the joiner's first update: the state it adopts comes with the log of
/// exactly that state, so the writer's resends of writes still unacknowledged (the
/// primary was waiting for the new backup) are recognised, not applied twice. The
/// real-process crash trials found this (`crates/server/tests/crash_trials.rs`): the log
/// rode ahead of the state in the packet, the joiner had no replica yet to attach it to,
/// dropped it, acknowledged the packet anyway, and adopted the state with no log.
#[test]
fn a_new_backup_adopts_a_state_with_its_own_log() {
    for seed in 0..8 {
        let mut net = Net::with_backups(4, seed);
        // Node 3 is not a member yet.
        net.stop(3);
        for n in 0..3 {
            net.node(n).member_down(NodeId(3));
        }
        // An object on node 0 for which the joiner will rank first as backup (and adopter).
        let target = loop {
            let id = net.spawn(0, Probe::at(0.0));
            let ranked =
                worldmesh_core::rendezvous::top(id, [NodeId(1), NodeId(2), NodeId(3)], Some(NodeId(0)));
            if ranked == Some(NodeId(3)) {
                break id;
            }
        };
        let mut writer = Probe::at(10.0);
        writer.writes = vec![(target, 7)];
        writer.write_until = 40;
        net.spawn(2, writer);
        for _ in 0..(6 + seed) {
            net.step();
        }
        // The joiner comes up; one frame later the primary's node fails.
        net.resume(3);
        for n in 0..3 {
            net.node(n).member_up(NodeId(3));
        }
        net.step();
        assert!(
            net.rm(3).store().get(target).is_some(),
            "seed {seed}: the joiner got its first state"
        );
        net.stop(0);
        let now = net.now();
        let survivors = [NodeId(1), NodeId(2), NodeId(3)];
        for n in survivors {
            net.node(n.0 as usize).member_down(NodeId(0));
        }
        let binding = net.node(3).adopt(now, target, NodeId(0)).unwrap();
        for n in [NodeId(1), NodeId(2)] {
            net.node(n.0 as usize)
                .learn_adoption(now, NodeId(3), target, binding);
        }
        for _ in 0..60 {
            net.step();
        }
        let made = net.rm(2).stats().writes_forwarded + net.rm(2).stats().writes_applied;
        assert!(made >= 30, "seed {seed}: the writer wrote ({made})");
        net.assert_applied_once(seed, 2, 3, target, made);
    }
}

/// A replica holder that did not back an object up holds no log of it (`lacks_log`); the
/// backup's offer carries one (`logged`), and adopting that offer over the holder's own
/// replica applies every resent write exactly once (`node::adoption` prefers such offers).
#[test]
fn an_adopter_without_a_log_takes_the_backups_logged_offer() {
    for seed in 0..8 {
        let mut net = Net::with_backups(3, seed);
        let target = net.spawn(0, Probe::at(0.0));
        let backup =
            worldmesh_core::rendezvous::top(target, [NodeId(1), NodeId(2)], Some(NodeId(0))).unwrap();
        let other = if backup == NodeId(1) { NodeId(2) } else { NodeId(1) };
        // The writer runs on the node that is not the backup, and will adopt; it starts
        // once that node holds the target (every write it makes reaches it).
        net.step();
        net.step();
        assert!(net.rm(other.0 as usize).store().get(target).is_some());
        let mut writer = Probe::at(10.0);
        writer.writes = vec![(target, 7)];
        writer.write_until = 40;
        let writer = net.spawn(other.0 as usize, writer);
        net.links().loss = 0.2;
        net.links().max_delay = 1;
        for _ in 0..(8 + seed) {
            net.step();
        }
        net.stop(0);
        let now = net.now();
        for n in [backup, other] {
            net.node(n.0 as usize).member_down(NodeId(0));
        }
        let (b, o) = (backup.0 as usize, other.0 as usize);
        assert!(
            net.rm(o).lacks_log(target),
            "seed {seed}: a subscriber holds no log"
        );
        assert!(!net.rm(b).lacks_log(target), "seed {seed}: the backup holds one");
        let offer = net
            .node(b)
            .offer(target, NodeId(0), 0)
            .expect("the backup offers");
        assert!(offer.logged, "seed {seed}");
        let binding = net
            .node(o)
            .adopt_offer(now, &offer)
            .expect("adopted over the replica");
        net.node(b).learn_adoption(now, other, target, binding);
        net.links().loss = 0.0;
        for _ in 0..60 {
            net.step();
        }
        // One write per frame of the writer's, up to `write_until` (the stats would count a
        // write forwarded, then applied here after the adoption, twice).
        let w = net.rm(o).store().object(writer).unwrap();
        let made = u64::from(w.frame.min(w.write_until));
        assert!(made >= 30, "seed {seed}: the writer wrote ({made})");
        net.assert_applied_once(seed, o, o, target, made);
    }
}

/// An adopter that takes an offer older than the replica it holds (the offerer's copy
/// lagged) starts above the version it held, not just above the offer's: a node's version
/// of an object never goes back, and one version names one state (fault swarm,
/// `--faults all` seed 10, whose adopter took its own logged state, older than the newest
/// one it held).
#[test]
fn an_adopter_taking_an_offer_older_than_its_replica_starts_above_the_replica() {
    let mut net = Net::with_backups(3, 5);
    let target = net.spawn(0, Probe::mover());
    for _ in 0..5 {
        net.step();
    }
    let old = net
        .rm(1)
        .offer(target, NodeId(0), 0)
        .expect("node 1 holds a replica");
    // Long enough for the primary to run further ahead than an adoption's jump allows for.
    for _ in 0..300 {
        net.step();
    }
    let held = net.rm(2).store().get(target).unwrap().version;
    assert!(
        held > old.version + 200,
        "node 2 holds v{held}, the offer v{}",
        old.version
    );
    net.stop(0);
    let now = net.now();
    net.node(2).member_down(NodeId(0));
    net.node(2).adopt_offer(now, &old).expect("adopted");
    let adopted = net.rm(2).store().get(target).unwrap().version;
    assert!(adopted > held, "adopted at v{adopted} after holding v{held}");
}

/// A primary that deleted its object adopts no orphan offer of it for a while (it kept one
/// while it held the object: a rival binding that failed, to rebind past). Adopting it
/// brought the object back under a version below the ones it had sent, so that one
/// version named two states (fault swarm, `--faults all` seed 203).
#[test]
fn a_node_that_deleted_an_object_adopts_no_offer_of_it() {
    let mut net = Net::new(3, Mode::Broadcast, 7);
    let mut deleting = Probe::mover();
    deleting.delete_at_frame = 12;
    let target = net.spawn(0, deleting);
    for _ in 0..5 {
        net.step();
    }
    let offer = net
        .rm(1)
        .offer(target, NodeId(0), 0)
        .expect("node 1 holds a replica");
    for _ in 0..10 {
        net.step();
    }
    assert!(net.rm(0).store().get(target).is_none(), "node 0 deleted it");
    let now = net.now();
    assert_eq!(
        net.node(0).adopt_offer(now, &offer),
        Err(AdoptError::Deleted(target))
    );
    assert!(net.rm(0).store().get(target).is_none());
}

/// True if `p` carries a deletion notice.
fn carries_deletion(p: &Packet) -> bool {
    p.msgs.iter().any(|m| matches!(m, ReplicaMsg::Deleted(_)))
}

#[test]
fn a_lost_deletion_notice_is_sent_again_until_every_replica_is_gone() {
    let mut net = Net::new(3, Mode::Broadcast, 7);
    let mut p = Probe::mover();
    p.delete_at_frame = 12;
    let id = net.spawn(0, p.clone());
    // Node 0 keeps talking (a silent node's replicas are dropped anyway).
    p.delete_at_frame = 0;
    let other = net.spawn(0, p);
    // The first two packets that carry the notice are lost.
    let lost = Rc::new(Cell::new(0));
    let l = Rc::clone(&lost);
    net.links().tap = Some(Box::new(move |_, _, p| {
        let drop = carries_deletion(p) && l.get() < 2;
        l.set(l.get() + u32::from(drop));
        !drop
    }));
    for _ in 0..10 {
        net.step();
    }
    assert!((1..3).all(|n| net.rm(n).store().get(id).is_some()));
    // Deleted in frame 12; notices are resent after `resend_after` (600 ms: 6 frames).
    for _ in 0..30 {
        net.step();
    }
    assert_eq!(lost.get(), 2, "two notices lost");
    assert!((1..3).all(|n| net.rm(n).store().get(other).is_some()));
    for n in 0..3 {
        assert!(
            net.rm(n).store().get(id).is_none(),
            "node {n} still holds the deleted {id}"
        );
    }
}

#[test]
fn a_state_that_arrives_after_the_deletion_notice_does_not_bring_the_replica_back() {
    let mut net = Net::new(2, Mode::Broadcast, 8);
    let mut p = Probe::mover();
    p.delete_at_frame = 12;
    let id = net.spawn(0, p);
    // A copy of every full state of the object node 0 sends node 1 (duplicated, and
    // delayed past everything after it).
    let late: Rc<RefCell<Vec<Packet>>> = Rc::default();
    let l = Rc::clone(&late);
    net.links().tap = Some(Box::new(move |from, _, p| {
        let full = p.msgs.iter().any(
            |m| matches!(m, ReplicaMsg::Update(items) if items.iter().any(|u| u.id == id && u.base == 0)),
        );
        if from == NodeId(0) && full {
            l.borrow_mut().push(p.clone());
        }
        true
    }));
    for _ in 0..15 {
        net.step();
    }
    assert!(net.rm(1).store().get(id).is_none(), "the notice arrived");
    let late = late.take();
    assert!(!late.is_empty());
    let now = net.now();
    for p in late {
        net.node(1).handle_packet(now, NodeId(0), p, &());
    }
    assert!(
        net.rm(1).store().get(id).is_none(),
        "a state sent before the deletion resurrected {id}"
    );
}

/// A holder refuses, for a while, the states of an object its primary deleted (a
/// tombstone). If another node adopts the object regardless (its copy missed the deletion),
/// the holder takes the adopter's states once the tombstone expires: a state refused under
/// the tombstone is not acknowledged, else the adopter would count it delivered and never
/// send an object that no longer changes again (fault swarm, `--faults all` seeds 5597,
/// 7842).
#[test]
fn a_deleted_object_adopted_elsewhere_is_followed_once_the_tombstone_expires() {
    // Membership decides failures, as in a node: a primary does not forget a silent
    // holder (and send it everything afresh when it speaks again).
    let cfg = ReplicaConfig {
        drop_silent_peers: false,
        ..ReplicaConfig::default()
    };
    let mut net = Net::with_config(3, Mode::Broadcast, 12, cfg);
    let mut p = Probe::at(0.0);
    p.delete_at_frame = 12;
    p.still_elsewhere = true;
    let id = net.spawn(0, p);
    // Node 2 never hears of the deletion.
    net.links().tap = Some(Box::new(|_, to, p| !(to == NodeId(2) && carries_deletion(p))));
    for _ in 0..15 {
        net.step();
    }
    assert!(net.rm(1).store().get(id).is_none(), "node 1 had the notice");
    assert!(net.rm(2).store().get(id).is_some(), "node 2 missed it");
    // Node 0 fails; node 2 adopts its copy, and node 1 learns of it at once.
    net.stop(0);
    for n in [1, 2] {
        net.node(n).member_down(NodeId(0));
    }
    let now = net.now();
    let binding = net.node(2).adopt(now, id, NodeId(0)).unwrap();
    net.node(1).learn_adoption(now, NodeId(2), id, binding);
    for _ in 0..10 {
        net.step();
    }
    assert!(net.rm(1).store().get(id).is_none(), "taken under the tombstone");
    // The tombstone lasts 5 s (50 frames).
    for _ in 0..50 {
        net.step();
    }
    assert!(
        net.rm(1).store().get(id).is_some(),
        "node 2 counted the states node 1 refused as delivered"
    );
}

#[test]
fn a_retry_held_by_a_frozen_primary_is_not_applied_again_once_its_writer_left() {
    let mut net = Net::new(3, Mode::Broadcast, 9);
    let target = net.spawn(0, Probe::at(0.0));
    for _ in 0..3 {
        net.step();
    }
    assert!(net.rm(1).store().get(target).is_some());
    // Node 0's write acknowledgements to node 1 are lost: node 1 retries.
    net.links().tap = Some(Box::new(|from, to, p| {
        let acks = p.msgs.iter().any(|m| matches!(m, ReplicaMsg::WriteAck(_)));
        !(from == NodeId(0) && to == NodeId(1) && acks)
    }));
    let now = net.now();
    net.node(1).write(now, target, &42);
    for _ in 0..2 {
        net.step();
    }
    assert_eq!(net.rm(0).store().object(target).unwrap().log, vec![42]);
    // Node 0 starts migrating the object to node 2; the retry (after 600 ms) is held.
    let now = net.now();
    net.node(0).freeze(now, &[target], NodeId(2)).unwrap();
    for _ in 0..8 {
        net.step();
    }
    assert!(!net.rm(0).held_writes(&[target]).is_empty(), "the retry is held");
    // The writer leaves; the migration is refused: the object is node 0's again.
    net.node(0).member_down(NodeId(1));
    net.node(0).unfreeze(&[target]);
    assert_eq!(
        net.rm(0).store().object(target).unwrap().log,
        vec![42],
        "the write was applied once"
    );
}

#[test]
fn a_frozen_primary_takes_no_version_after_its_snapshot() {
    let mut net = Net::with_backups(3, 10);
    let target = net.spawn(0, Probe::at(0.0));
    for _ in 0..3 {
        net.step();
    }
    // A write reaches node 0 after its frame: applied, not yet versioned.
    let now = net.now();
    net.node(1).write(now, target, &7);
    net.step();
    assert_eq!(net.rm(0).store().object(target).unwrap().log, vec![7]);
    let now = net.now();
    let snapshot = net.node(0).freeze(now, &[target], NodeId(2)).unwrap();
    let v = snapshot[0].version;
    assert_eq!(v, net.rm(0).store().get(target).unwrap().version);
    for _ in 0..5 {
        net.step();
    }
    // The snapshot is the state the new node will start from: nothing newer may exist.
    for n in 0..3 {
        let held = net.rm(n).store().get(target).map(|e| e.version);
        assert!(
            held.is_some_and(|h| h <= v),
            "node {n} holds v{held:?}, the snapshot is v{v}"
        );
    }
}

#[test]
fn a_state_refused_from_a_primary_not_yet_known_here_is_sent_again() {
    let mut net = Net::new(3, Mode::Broadcast, 11);
    // Node 1 is away while node 2's object migrates to node 0.
    net.stop(1);
    for n in [0, 2] {
        net.node(n).member_down(NodeId(1));
    }
    let x = net.spawn(2, Probe::at(0.0));
    for _ in 0..3 {
        net.step();
    }
    let now = net.now();
    let snapshot = net.node(2).freeze(now, &[x], NodeId(0)).unwrap();
    net.node(0).bind_migrated(now, NodeId(2), &snapshot).unwrap();
    let binding = net.node(2).complete_migration(now, &[x], NodeId(0))[0].1;
    for _ in 0..3 {
        net.step();
    }
    // Node 1 comes back. It binds the object to its origin, node 2, a live member, so it
    // refuses node 0's states until it learns the move; the fetch it makes then is lost.
    net.resume(1);
    for n in [0, 2] {
        net.node(n).member_up(NodeId(1));
    }
    net.links().tap = Some(Box::new(|from, _, p| {
        !(from == NodeId(1) && p.msgs.iter().any(|m| matches!(m, ReplicaMsg::Interest(_))))
    }));
    for _ in 0..2 {
        net.step();
    }
    assert!(
        net.rm(1).store().get(x).is_none(),
        "refused while bound to node 2"
    );
    let now = net.now();
    net.node(1).learn_adoption(now, NodeId(0), x, binding);
    for _ in 0..10 {
        net.step();
    }
    assert!(
        net.rm(1).store().get(x).is_some(),
        "node 0 counted its refused state as delivered"
    );
}

/// Three nodes, an object served by node 0, and node 2 told that node 1 adopted it under
/// epoch 1 — node 1 holds no primary of it, node 0 goes on serving it. Node 2 first drops
/// its replica unless `keep_replica`.
fn told_node_1_adopted_what_node_0_serves(keep_replica: bool) -> (Net, ObjectId) {
    let mut net = Net::new(3, Mode::Broadcast, 11);
    let id = net.spawn(0, Probe::mover());
    for _ in 0..5 {
        net.step();
    }
    assert!(net.rm(2).store().get(id).is_some());
    let now = net.now();
    if !keep_replica {
        assert!(net.node(2).drop_orphan(id));
    }
    let binding = Binding {
        node: NodeId(1),
        epoch: 1,
    };
    assert_eq!(
        net.node(2).learn_adoption(now, NodeId(1), id, binding),
        MovedOutcome::Accepted
    );
    assert_eq!(net.rm(2).binding_of(id), binding);
    (net, id)
}

/// Node `n` found the binding or the replica stale once, and follows node 0.
fn follows_node_0_after_one_stale_binding(net: &Net, n: usize, id: ObjectId) {
    assert_eq!(net.rm(n).stats().stale_bindings, 1);
    assert_eq!(
        net.rm(n).store().get(id).map(|e| e.role),
        Some(Role::Replica { primary: NodeId(0) }),
        "node {n} follows the primary that serves the object"
    );
}

/// A node that holds no replica and binds the object to a live member that does not hold
/// it (the notice that set the binding arrived after that member gave the object up)
/// refused the real primary's states for good. Now it asks the member it binds the object
/// to, learns from its `NotPrimary` answer that the binding is stale, and follows the
/// primary whose states it refused (fault swarm, `--faults all` seeds 609, 844, 1106).
#[test]
fn a_stale_binding_to_a_member_without_the_object_gives_way_to_the_serving_primary() {
    let (mut net, id) = told_node_1_adopted_what_node_0_serves(false);
    for _ in 0..10 {
        net.step();
    }
    follows_node_0_after_one_stale_binding(&net, 2, id);
    assert_eq!(
        net.rm(1).store().get(id).map(|e| e.role),
        Some(Role::Replica { primary: NodeId(0) })
    );
}

/// A node whose replica follows a live member that does not hold the object (it fell
/// back on a stale binding) refused the real primary's states for good, and sent its
/// writes to the wrong node. Now it asks the member it follows, learns from its
/// `NotPrimary` answer that it does not hold the object, and follows the primary whose
/// states it refused (the real-process crash trials: a backup that refused its primary's
/// states held every write acknowledgement back for 28 s).
#[test]
fn a_replica_following_a_member_without_the_object_gives_way_to_the_serving_primary() {
    let (mut net, id) = told_node_1_adopted_what_node_0_serves(true);
    assert_eq!(
        net.rm(2).store().get(id).map(|e| e.role),
        Some(Role::Replica { primary: NodeId(1) })
    );
    let refused = net.rm(2).stats().refused_updates;
    let now = net.now();
    net.node(2).write(now, id, &7);
    for _ in 0..10 {
        net.step();
    }
    assert!(
        net.rm(2).stats().refused_updates > refused,
        "node 0's states were refused at first"
    );
    follows_node_0_after_one_stale_binding(&net, 2, id);
    assert_eq!(
        net.rm(2).store().get(id).map(|e| e.version),
        net.rm(0).store().get(id).map(|e| e.version),
        "and is up to date"
    );
    assert_eq!(
        net.rm(2).pending_writes(),
        0,
        "its write reached the primary and was acknowledged"
    );
}

/// Receivers that acknowledged different versions get updates against their own
/// baselines, and receivers that acknowledged the same version get the same bytes (the
/// primary encodes each distinct baseline once per frame and copies it to the others).
#[test]
fn each_receiver_gets_the_update_against_the_version_it_acknowledged() {
    let mut net = Net::new(4, Mode::Broadcast, 7);
    let id = net.spawn(0, Probe::mover());
    for _ in 0..5 {
        net.step();
    }
    // Node 3 hears nothing for three frames: what it acknowledged falls behind.
    net.links().tap = Some(Box::new(|_, to, _| to != NodeId(3)));
    for _ in 0..3 {
        net.step();
    }
    // One frame, with every update of the mover recorded: (receiver, version, base, bytes).
    type Sent = (NodeId, u64, u64, Vec<u8>);
    let seen: Rc<RefCell<Vec<Sent>>> = Rc::default();
    let log = seen.clone();
    net.links().tap = Some(Box::new(move |from, to, p| {
        for m in &p.msgs {
            if let ReplicaMsg::Update(items) = m {
                for u in items.iter().filter(|u| from == NodeId(0) && u.id == id) {
                    log.borrow_mut().push((to, u.version, u.base, u.data.clone()));
                }
            }
        }
        true
    }));
    net.step();
    let seen = seen.borrow().clone();
    let to = |n: u32| {
        seen.iter()
            .find(|(t, ..)| *t == NodeId(n))
            .unwrap_or_else(|| panic!("no update to node {n}: {seen:?}"))
            .clone()
    };
    let (a, b, c) = (to(1), to(2), to(3));
    assert_eq!(
        (a.1, a.2, &a.3),
        (b.1, b.2, &b.3),
        "nodes 1 and 2 acknowledged the same version"
    );
    assert_eq!(a.1, c.1, "all three get the newest version");
    assert!(a.2 != 0 && a.2 < a.1, "node 1 gets a delta: {a:?}");
    assert!(
        c.2 < a.2,
        "node 3's update is against the older version it acknowledged: {c:?}"
    );
    // Every replica catches up on what it acknowledged (check_replicas runs on each delivery).
    for _ in 0..3 {
        net.step();
    }
    let v = net.rm(0).store().get(id).unwrap().version;
    for n in 1..4 {
        assert_eq!(net.rm(n).store().get(id).map(|e| e.version), Some(v), "node {n}");
    }
}

/// A deletion notice sent again goes out even to a peer this node has nothing else for and
/// hears nothing from: the resend alone makes the peer due at the next flush. (Guards any
/// flush that visits only the peers with something queued: one that missed the resend's
/// queue would never send it; `crates/sim/PERFORMANCE.md`, seventh round.)
#[test]
fn a_notice_is_sent_again_to_a_peer_with_nothing_else_queued() {
    let mut net = Net::new(2, Mode::Broadcast, 9);
    let mut p = Probe::mover();
    p.delete_at_frame = 12;
    let id = net.spawn(0, p);
    for _ in 0..10 {
        net.step();
    }
    assert!(net.rm(1).store().get(id).is_some());
    // From now on node 0 hears nothing from node 1, and the first two notices are lost.
    let sent = Rc::new(Cell::new(0u32));
    let s = Rc::clone(&sent);
    net.links().tap = Some(Box::new(move |from, _, p| {
        if from == NodeId(1) {
            return false;
        }
        if carries_deletion(p) {
            s.set(s.get() + 1);
            return s.get() > 2;
        }
        true
    }));
    // Deleted in frame 12; notices are resent every `resend_after` (6 frames).
    for _ in 0..30 {
        net.step();
    }
    assert!(sent.get() >= 3, "the notice went out {} times", sent.get());
    assert!(net.rm(1).store().get(id).is_none(), "node 1 got the third notice");
}

/// A receiver that has nothing to receive (the object does not change) still hears from
/// the primary's node: a packet with no message once `keepalive` (500 ms) has passed since
/// the last packet to it, and not sooner; the keepalives are counted.
#[test]
fn a_receiver_with_nothing_to_receive_gets_a_keepalive_each_period() {
    let mut net = Net::new(3, Mode::Broadcast, 5);
    let id = net.spawn(
        0,
        Probe {
            still: true,
            ..Probe::at(3.0)
        },
    );
    // (time, messages) of every packet node 0 sends node 2.
    let sent: Rc<RefCell<Vec<(Time, usize)>>> = Rc::default();
    let log = sent.clone();
    net.links().tap = Some(Box::new(move |from, to, p| {
        if from == NodeId(0) && to == NodeId(2) {
            log.borrow_mut().push((p.sent_at, p.msgs.len()));
        }
        true
    }));
    for _ in 0..40 {
        net.step();
    }
    assert!(net.rm(2).store().get(id).is_some(), "node 2 holds the replica");
    let sent = sent.borrow().clone();
    let keepalives: Vec<Time> = sent.iter().filter(|(_, n)| *n == 0).map(|(t, _)| *t).collect();
    assert!(keepalives.len() >= 6, "a keepalive each period of 4 s: {sent:?}");
    let ka = Duration::from_millis(500);
    for w in sent.windows(2) {
        let (before, (at, msgs)) = (w[0].0, w[1]);
        if msgs == 0 {
            assert!(
                at - before >= ka,
                "a keepalive {:?} after the last packet: {sent:?}",
                at - before
            );
            assert!(at - before < ka + FRAME, "a keepalive is not late: {sent:?}");
        }
    }
    assert_eq!(
        net.rm(0).stats().keepalive_packets as usize,
        2 * keepalives.len(),
        "to nodes 1 and 2"
    );
}

/// A node serving peers it holds no state for yet (a broadcast primary's subscribers, just
/// spawned, before any frame) creates their states and sends each a keepalive at the
/// first flush.
#[test]
fn served_peers_without_a_state_get_one_and_a_keepalive() {
    let peers = vec![NodeId(2), NodeId(1)];
    let mut rm = ReplicaManager::new(NodeId(0), Mode::Broadcast, ReplicaConfig::default(), peers);
    rm.spawn(Time::ZERO, Probe::at(1.0));
    let sent = rm.flush(Time::ZERO);
    let to: Vec<(NodeId, usize)> = sent.iter().map(|(n, p)| (*n, p.msgs.len())).collect();
    assert_eq!(to, vec![(NodeId(1), 0), (NodeId(2), 0)]);
    assert_eq!(rm.stats().keepalive_packets, 2);
}

/// A node's replicas of a peer's objects go once the peer has been silent for
/// `peer_timeout` (2 s), and only then; heard again, the peer's objects come back, and a
/// second silence drops them again (the peer is watched again after its first silence).
#[test]
fn a_silent_peers_replicas_go_and_come_back_each_time() {
    let mut net = Net::new(3, Mode::Broadcast, 11);
    let id = net.spawn(0, Probe::mover());
    // Cuts nodes 0 and 1 apart (both ways) while set.
    let cut = Rc::new(Cell::new(false));
    let c = Rc::clone(&cut);
    net.links().tap = Some(Box::new(move |from, to, _| {
        let pair = (from.0.min(to.0), from.0.max(to.0));
        !(c.get() && pair == (0, 1))
    }));
    for _ in 0..10 {
        net.step();
    }
    assert!(net.rm(1).store().get(id).is_some());
    for round in 0..2 {
        cut.set(true);
        // 19 frames (1.9 s) after the cut, node 0 has been silent for less than the
        // timeout: the replica is still held; 5 frames later it has gone.
        for _ in 0..19 {
            net.step();
        }
        assert!(
            net.rm(1).store().get(id).is_some(),
            "round {round}: dropped too soon"
        );
        for _ in 0..5 {
            net.step();
        }
        assert!(
            net.rm(1).store().get(id).is_none(),
            "round {round}: node 1 still holds {id}"
        );
        assert!(
            net.rm(2).store().get(id).is_some(),
            "round {round}: node 2 heard node 0"
        );
        assert_eq!(net.rm(1).stats().replicas_dropped, round + 1);
        cut.set(false);
        for _ in 0..10 {
            net.step();
        }
        assert!(
            net.rm(1).store().get(id).is_some(),
            "round {round}: {id} did not come back"
        );
    }
}

/// A writer whose writes to an object cannot reach its primary for longer than
/// `write_timeout` gives them up, and they are never applied: the primary's log of that
/// writer is left with a hole below every later write. The writer's later writes must go
/// on being applied however many follow. (The log holds at most 4,096 writes above a hole;
/// it refused every write beyond that, so one stretch of unreachability stopped a writer
/// from writing to that object again until its process restarted.)
#[test]
fn writes_given_up_do_not_stop_later_writes_to_the_same_object() {
    let cfg = ReplicaConfig {
        write_timeout: Duration::from_secs(1),
        ..ReplicaConfig::default()
    };
    let mut net = Net::with_config(2, Mode::Broadcast, 11, cfg);
    // Sixteen writes a frame, for 300 frames.
    let target = net.writing_to_a_target(1, 16, 300);
    // For two seconds every packet carrying writes is lost: those writes are given up.
    let cut = Rc::new(Cell::new(true));
    let c = Rc::clone(&cut);
    net.links().tap = Some(Box::new(move |_, _, p: &Packet| {
        !(c.get() && p.msgs.iter().any(|m| matches!(m, ReplicaMsg::Write(_))))
    }));
    for _ in 0..20 {
        net.step();
    }
    cut.set(false);
    for _ in 0..15 {
        net.step();
    }
    let given_up = net.rm(1).stats().writes_expired;
    assert!(given_up >= 16 * 10, "the cut made writes expire ({given_up})");
    let applied_before = net.rm(0).store().object(target).unwrap().log.len();
    // The writer goes on for the rest of its 300 frames (more than 4,096 writes), and
    // everything settles.
    for _ in 0..320 {
        net.step();
    }
    let w = net.rm(1);
    assert_eq!(
        w.stats().writes_expired,
        given_up,
        "no write given up after the cut"
    );
    assert_eq!(w.pending_writes(), 0, "every later write acknowledged");
    let made = w.stats().writes_forwarded;
    let applied = net.rm(0).store().object(target).unwrap().log.len() as u64;
    assert_eq!(
        applied,
        made - given_up,
        "every write not given up is applied, once"
    );
    assert!(applied as usize > applied_before + 4096);
}

/// The voids of writes given up reach the primary's backup before their writer hears they
/// were taken, as writes do. Here the backup hears nothing from the primary while the voids
/// arrive, and the primary then fails: the writer, never told, sends the voids to the
/// backup that adopts, so its log of the writer has no gap either, and the writer's later
/// writes — more than a log holds above a gap — are applied there. (Acknowledging a void
/// at once left the adopter with the gap: 3,456 more writes given up after the failure.)
#[test]
fn the_voids_of_writes_given_up_survive_the_primary_failing() {
    let cfg = ReplicaConfig {
        backups: 1,
        drop_silent_peers: false,
        write_timeout: Duration::from_secs(1),
        ..ReplicaConfig::default()
    };
    let mut net = Net::with_config(3, Mode::Broadcast, 12, cfg);
    let target = net.writing_to_a_target(2, 32, 250);
    // The backup, and the adopter when the primary fails: the top-ranked survivor.
    let survivors = [NodeId(1), NodeId(2)];
    let adopter = worldmesh_core::rendezvous::top(target, survivors, Some(NodeId(0))).unwrap();
    let cut = Rc::new(Cell::new(true));
    let behind = Rc::new(Cell::new(false));
    let (c, b) = (Rc::clone(&cut), Rc::clone(&behind));
    net.links().tap = Some(Box::new(move |from, to, p: &Packet| {
        let write = p.msgs.iter().any(|m| matches!(m, ReplicaMsg::Write(_)));
        let lost = (c.get() && write) || (b.get() && from == NodeId(0) && to == adopter);
        !lost
    }));
    for _ in 0..20 {
        net.step();
    }
    // The writes flow again, voids first; the backup hears nothing more from the primary,
    // so nothing written after the cut may be acknowledged.
    cut.set(false);
    behind.set(true);
    for _ in 0..5 {
        net.step();
    }
    behind.set(false);
    // The primary's node fails; the backup adopts its copy, older than the voids.
    net.stop(0);
    let now = net.now();
    for n in survivors {
        net.node(n.0 as usize).member_down(NodeId(0));
    }
    let binding = net
        .node(adopter.0 as usize)
        .adopt(now, target, NodeId(0))
        .unwrap();
    for n in survivors.into_iter().filter(|n| *n != adopter) {
        net.node(n.0 as usize)
            .learn_adoption(now, adopter, target, binding);
    }
    // Writes older than the timeout at the failure may still be given up in the next
    // frames; none after that.
    for _ in 0..12 {
        net.step();
    }
    let given_up = net.rm(2).stats().writes_expired;
    assert!(given_up >= 32 * 10, "the cut made writes expire ({given_up})");
    for _ in 0..250 {
        net.step();
    }
    let w = net.rm(2);
    assert_eq!(
        w.stats().writes_expired,
        given_up,
        "no write given up after the cut"
    );
    assert_eq!(w.pending_writes(), 0, "every later write acknowledged");
    let made = w.stats().writes_forwarded;
    assert!(
        made - given_up > 4096 + 32 * 15,
        "enough writes after the cut ({made})"
    );
    // The adopter's log of the writer has no gap: every number up to the last is done
    // (applied, or recorded as a void). (A write given up may still have been applied:
    // one sent just before its timeout and acknowledged just after.)
    let holder = net.rm(adopter.0 as usize);
    let log = holder.writer_log(target, NodeId(2)).expect("a log of the writer");
    assert!(log.above.is_empty(), "{} numbers above a gap", log.above.len());
    assert_eq!(log.floor, made, "every number done");
    let applied = holder.store().object(target).unwrap().log.len() as u64;
    assert!(
        (made - given_up..=made).contains(&applied),
        "{applied} applied of {made} made, {given_up} given up"
    );
}
