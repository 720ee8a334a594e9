//! Adoption across a healed partition, driven by hand: replica managers on the engine
//! over a lossless network without delay, each with its node's [`Adoption`] state, the
//! membership views given by the test. Each test is a situation the fault swarm (`--faults all`)
//! reached, reduced to the nodes and messages that matter.

use std::time::Duration;

use worldmesh_core::{Aabb, DetRng, NodeId, ObjectId, Point3, Time, Transmit, rendezvous};
use worldmesh_engine::{Engine, Fate, Links, Step};
use worldmesh_node::MigrationMsg;
use worldmesh_node::adoption::{Adoption, AdoptionConfig, AdoptionEvent};
use worldmesh_replica::{
    Binding, GameObject, Mode, Packet, ReplicaConfig, ReplicaHost, ReplicaManager, Role, StateError,
    ThinkContext,
};

/// A test object that moves `speed` units per frame (a new version every frame, unless
/// it stands still).
#[derive(Clone, Debug, PartialEq, bitcode::Encode, bitcode::Decode)]
struct Dot {
    x: f32,
    speed: f32,
}

impl GameObject for Dot {
    type World = ();
    type Write = u32;

    fn think(&mut self, _ctx: &mut ThinkContext<'_, Self>) {
        self.x += self.speed;
    }
    fn position(&self) -> Point3 {
        Point3::new(self.x, 0.0, 0.0)
    }
    fn interest(&self, _world: &()) -> Option<Aabb> {
        None
    }
    fn apply_write(&mut self, _w: &u32) {}
    fn encode_state(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&bitcode::encode(self));
    }
    fn decode_state(b: &[u8]) -> Result<Self, StateError> {
        bitcode::decode(b).map_err(StateError::from)
    }
}

/// Nodes `0..n` on the engine, broadcast mode, one backup per primary, failures declared
/// by the test (as SWIM would); node ids not in `running` are machines that never run.
/// Packets take no time, so a frame's packets and the answers to them arrive before the
/// next frame.
struct World {
    engine: Engine<ReplicaHost<Dot>, Linked>,
    adoption: Vec<Adoption>,
    step: u64,
}

/// Which nodes exchange packets (both ends must be up), and the one-way links cut (from,
/// to); delivery is instant.
struct Linked(Vec<bool>, Vec<(NodeId, NodeId)>);

impl Links<Packet> for Linked {
    fn route(&mut self, _now: Time, src: NodeId, t: &Transmit<Packet>) -> Fate {
        if self.0[src.0 as usize] && self.0[t.dst.0 as usize] && !self.1.contains(&(src, t.dst)) {
            Fate::Deliver(Duration::ZERO, None)
        } else {
            Fate::Partitioned
        }
    }
}

const FRAME: Duration = Duration::from_millis(100);

impl World {
    fn new(n: u32, running: &[u32]) -> Self {
        let cfg = ReplicaConfig {
            backups: 1,
            drop_silent_peers: false,
            ..ReplicaConfig::default()
        };
        let hosts = (0..n)
            .map(|i| {
                let peers = running.iter().copied().filter(|p| *p != i).map(NodeId).collect();
                let rm = ReplicaManager::new(NodeId(i), Mode::Broadcast, cfg.clone(), peers);
                ReplicaHost::new(rm, (), DetRng::new(u64::from(i)), FRAME)
            })
            .collect();
        let linked = Linked((0..n).map(|i| running.contains(&i)).collect(), Vec::new());
        let mut engine = Engine::new(hosts, linked).dropping_from_crashed();
        for i in 0..n {
            if running.contains(&i) {
                engine.pump(NodeId(i), |_, _, _, _| {});
            } else {
                engine.crash(NodeId(i));
            }
        }
        World {
            engine,
            adoption: (0..n).map(|_| Adoption::new(AdoptionConfig::default())).collect(),
            step: 0,
        }
    }

    /// The time of the next frame (what inputs given by hand between frames happen at).
    fn now(&self) -> Time {
        Time::from_millis(self.step * 100)
    }

    fn rm(&mut self, n: u32) -> &mut ReplicaManager<Dot> {
        assert!(self.engine.is_up(NodeId(n)), "a running node");
        &mut self.engine.machines_mut()[n as usize].rm
    }

    /// Node `n`'s adoption state and replica manager, together.
    fn split(&mut self, n: u32) -> (&mut Adoption, &mut ReplicaManager<Dot>) {
        assert!(self.engine.is_up(NodeId(n)), "a running node");
        (
            &mut self.adoption[n as usize],
            &mut self.engine.machines_mut()[n as usize].rm,
        )
    }

    /// One frame on every running node, with what inputs given by hand queued (sent
    /// first), then delivery of its packets between linked nodes and of the answers.
    fn frame(&mut self) {
        let now = self.now();
        self.engine.advance_to(now);
        while let Some(step) = self.engine.step(now) {
            if let Step::Timeout(id) | Step::Datagram(id) = step {
                self.engine.pump(id, |_, _, _, _| {});
            }
        }
        self.step += 1;
    }

    /// Node `n` crashes: it stops and its links go down. Returns the time.
    fn crash(&mut self, n: usize) -> Time {
        self.engine.links_mut().0[n] = false;
        self.engine.crash(NodeId(n as u32));
        self.now()
    }

    /// Node `n` sees `failed` fail and adopts `id`, an orphan of it.
    fn adopts_orphan(&mut self, n: u32, id: ObjectId, failed: NodeId) -> Binding {
        let now = self.now();
        self.rm(n).member_down(failed);
        self.rm(n).adopt(now, id, failed).expect("adopts")
    }

    /// Node `n`'s role for `id`, if it holds it.
    fn role(&mut self, n: u32, id: ObjectId) -> Option<Role> {
        self.rm(n).store().get(id).map(|e| e.role)
    }

    fn frames(&mut self, n: usize) {
        for _ in 0..n {
            self.frame();
        }
    }
}

/// An object created on node 0 whose rendezvous ranking puts `first` above every node of
/// `below` (spawned until one does).
fn object_ranking(w: &mut World, first: u32, below: &[u32]) -> ObjectId {
    object_ranking_moving(w, first, below, 1.0)
}

/// [`object_ranking`] for an object moving at `speed`.
fn object_ranking_moving(w: &mut World, first: u32, below: &[u32], speed: f32) -> ObjectId {
    loop {
        let now = w.now();
        let id = w.rm(0).spawn(now, Dot { x: 0.0, speed });
        let top = rendezvous::score(id, NodeId(first));
        if below.iter().all(|b| rendezvous::score(id, NodeId(*b)) < top) {
            return id;
        }
    }
}

/// The `Adopted` notices in `out` for `id`, by destination.
fn notices(out: &[(NodeId, MigrationMsg)], id: ObjectId) -> Vec<(NodeId, Binding)> {
    out.iter()
        .flat_map(|(to, m)| match m {
            MigrationMsg::Adopted(items) => items
                .iter()
                .filter(|(i, ..)| *i == id)
                .map(|(_, b, _)| (*to, *b))
                .collect(),
            _ => Vec::new(),
        })
        .collect()
}

/// The offers in `out` for `id`, by destination, with the epoch they name.
fn offers(out: &[(NodeId, MigrationMsg)], id: ObjectId) -> Vec<(NodeId, u32)> {
    out.iter()
        .flat_map(|(to, m)| match m {
            MigrationMsg::Offer(items) => items
                .iter()
                .filter(|o| o.id == id)
                .map(|o| (*to, o.epoch))
                .collect(),
            _ => Vec::new(),
        })
        .collect()
}

/// Node 1 holds an object as primary under epoch 1 (its side of a partition adopted it
/// from node 0). Node 2 follows node 3, which took the object under epoch 2 on the other
/// side and has failed since. Node 2 waits on that orphan and sends its offer, naming
/// epoch 2, to node 1: the adopter its view agrees on. Node 1 must adopt the orphan by
/// rebinding its own primary past epoch 2, and announce it; node 2 then follows node 1.
/// Before, node 1 ignored the offer (it held the object), node 2 refused node 1's states
/// and notices (epoch 1 loses to epoch 2) and dropped its replica as an orphan nobody
/// adopted: a broadcast member without a replica for good (fault swarm, `--faults all`
/// seed 314).
#[test]
fn a_primary_offered_a_later_failed_binding_of_its_object_rebinds_past_it() {
    let mut w = World::new(4, &[0, 1, 2]);
    let id = object_ranking(&mut w, 1, &[2]);
    w.frames(5);
    // Node 1's side: node 0 failed, node 1 adopts under epoch 1.
    let now = w.crash(0);
    let mine = w.adopts_orphan(1, id, NodeId(0));
    assert_eq!(mine.epoch, 1);
    // Node 2 follows node 3's epoch 2, then sees node 3 fail.
    w.rm(2).member_down(NodeId(0));
    let theirs = Binding {
        node: NodeId(3),
        epoch: 2,
    };
    w.rm(2).learn_adoption(now, NodeId(3), id, theirs);
    let orphans = w.rm(2).member_down(NodeId(3));
    assert_eq!(orphans, vec![id]);
    let (mut out, mut events) = (Vec::new(), Vec::new());
    let (adoption2, rm2) = w.split(2);
    adoption2.member_down(
        now,
        NodeId(2),
        &[NodeId(1)],
        rm2,
        (NodeId(3), 0),
        orphans,
        &mut out,
        &mut events,
    );
    let offered = offers(&out, id);
    assert_eq!(
        offered,
        vec![(NodeId(1), 2)],
        "node 2 offers to the adopter, node 1"
    );
    let MigrationMsg::Offer(batch) = out.remove(0).1 else {
        unreachable!()
    };
    // Node 1 takes the offer; once the offer window closes it adopts.
    let (adoption1, rm1) = w.split(1);
    adoption1.on_offers(now, NodeId(1), &[NodeId(2)], rm1, NodeId(2), batch);
    let mut announced = Vec::new();
    let mut adopted = Vec::new();
    for _ in 0..5 {
        w.frame();
        let now = w.now();
        let (adoption1, rm1) = w.split(1);
        let (mut out, mut events) = (Vec::new(), Vec::new());
        adoption1.on_frame(now, NodeId(1), &[NodeId(2)], rm1, &mut out, &mut events);
        announced.extend(notices(&out, id));
        adopted.extend(events);
    }
    let rebound = Binding {
        node: NodeId(1),
        epoch: 3,
    };
    assert_eq!(w.rm(1).binding_of(id), rebound, "node 1 rebinds past epoch 2");
    assert_eq!(w.role(1, id), Some(Role::Primary), "and keeps its primary");
    assert!(
        adopted.iter().any(
            |e| matches!(e, AdoptionEvent::Adopted { id: i, binding, .. } if *i == id && *binding == rebound)
        ),
        "reported as the orphan's adoption: {adopted:?}"
    );
    assert!(announced.contains(&(NodeId(2), rebound)), "{announced:?}");
    // Node 2 takes the notice and follows node 1.
    let now = w.now();
    let (adoption2, rm2) = w.split(2);
    let acks = adoption2.on_notices(
        now,
        NodeId(2),
        &[NodeId(1)],
        rm2,
        NodeId(1),
        vec![(id, rebound, NodeId(3))],
    );
    assert_eq!(acks, vec![(id, 3)]);
    w.frames(5);
    assert_eq!(w.role(2, id), Some(Role::Replica { primary: NodeId(1) }));
}

/// As above, but the adopter node 2's view agrees on for the failed binding is node 4,
/// which holds no copy; node 1, the live primary under epoch 1, is not that adopter. Node
/// 1's notice reaches node 2, which refuses it (epoch 1 loses to the failed epoch 2) and
/// from then on offers the orphan to node 1 as well; node 1 rebinds past epoch 2 and
/// node 2 follows it. Before, node 2's offers went to node 4 only, which ignored them,
/// and node 2 dropped the orphan and refused node 1's states for good (fault swarm,
/// `--faults all` seed 313).
#[test]
fn a_holder_waiting_on_an_orphan_offers_it_to_the_live_primary_whose_notice_it_refused() {
    let mut w = World::new(5, &[0, 1, 2]);
    let id = object_ranking(&mut w, 4, &[1, 2]);
    w.frames(5);
    let now = w.crash(0);
    let mine = w.adopts_orphan(1, id, NodeId(0));
    w.rm(2).member_down(NodeId(0));
    let theirs = Binding {
        node: NodeId(3),
        epoch: 2,
    };
    w.rm(2).learn_adoption(now, NodeId(3), id, theirs);
    let orphans = w.rm(2).member_down(NodeId(3));
    let live2 = [NodeId(1), NodeId(4)];
    let (mut out, mut events) = (Vec::new(), Vec::new());
    let (adoption2, rm2) = w.split(2);
    adoption2.member_down(
        now,
        NodeId(2),
        &live2,
        rm2,
        (NodeId(3), 0),
        orphans,
        &mut out,
        &mut events,
    );
    assert_eq!(offers(&out, id), vec![(NodeId(4), 2)], "to the agreed adopter");
    // Node 1's notice of its epoch 1: refused (no acknowledgement).
    let (adoption2, rm2) = w.split(2);
    let acks = adoption2.on_notices(
        now,
        NodeId(2),
        &live2,
        rm2,
        NodeId(1),
        vec![(id, mine, NodeId(0))],
    );
    assert!(acks.is_empty());
    // Node 2's next offers go to node 1 too.
    let mut to_1 = Vec::new();
    for _ in 0..4 {
        w.frame();
        let now = w.now();
        let (adoption2, rm2) = w.split(2);
        let (mut out, mut events) = (Vec::new(), Vec::new());
        adoption2.on_frame(now, NodeId(2), &live2, rm2, &mut out, &mut events);
        for (to, m) in out {
            if let (NodeId(1), MigrationMsg::Offer(batch)) = (to, m) {
                to_1.extend(batch);
            }
        }
    }
    assert!(
        to_1.iter().any(|o| o.id == id && o.epoch == 2),
        "node 2 offers the orphan to node 1"
    );
    // Node 1 (not the agreed adopter) rebinds its primary past epoch 2.
    let now = w.now();
    let (adoption1, rm1) = w.split(1);
    adoption1.on_offers(now, NodeId(1), &[NodeId(2), NodeId(4)], rm1, NodeId(2), to_1);
    let mut announced = Vec::new();
    for _ in 0..5 {
        w.frame();
        let now = w.now();
        let (adoption1, rm1) = w.split(1);
        let (mut out, mut events) = (Vec::new(), Vec::new());
        adoption1.on_frame(
            now,
            NodeId(1),
            &[NodeId(2), NodeId(4)],
            rm1,
            &mut out,
            &mut events,
        );
        announced.extend(notices(&out, id));
    }
    let rebound = Binding {
        node: NodeId(1),
        epoch: 3,
    };
    assert_eq!(w.rm(1).binding_of(id), rebound);
    assert!(announced.contains(&(NodeId(2), rebound)), "{announced:?}");
    let now = w.now();
    let (adoption2, rm2) = w.split(2);
    let acks = adoption2.on_notices(
        now,
        NodeId(2),
        &live2,
        rm2,
        NodeId(1),
        vec![(id, rebound, NodeId(3))],
    );
    assert_eq!(acks, vec![(id, 3)]);
    w.frames(5);
    assert_eq!(w.role(2, id), Some(Role::Replica { primary: NodeId(1) }));
}

/// Node 2 holds no copy of an object and learned its binding from node 3 (epoch 2), which
/// then failed and came back as a new generation holding nothing. Node 1, the object's live
/// primary under epoch 1 (its side of a partition adopted it), announces itself: node 2
/// must follow it — the binding it knew went with node 3's old generation. Before, node 2
/// refused node 1's notices (epoch 1 loses to epoch 2) and, node 3's id being live again,
/// node 1's states too, for good: a broadcast member without a replica (fault swarm,
/// `--faults all` seed 313).
#[test]
fn a_binding_learned_from_a_member_that_failed_gives_way_to_the_live_primary() {
    let mut w = World::new(4, &[0, 1, 2]);
    let id = object_ranking(&mut w, 1, &[]);
    w.frames(5);
    let now = w.crash(0);
    let mine = w.adopts_orphan(1, id, NodeId(0));
    assert_eq!(mine.epoch, 1);
    // Node 2: its replica gone, it learns node 3's binding; node 3 fails and restarts.
    w.rm(2).member_down(NodeId(0));
    assert!(w.rm(2).drop_orphan(id));
    let theirs = Binding {
        node: NodeId(3),
        epoch: 2,
    };
    w.rm(2).learn_adoption(now, NodeId(3), id, theirs);
    assert_eq!(w.rm(2).binding_of(id), theirs);
    w.rm(2).member_down(NodeId(3));
    w.rm(2).member_up(NodeId(3));
    let now = w.now();
    let (adoption2, rm2) = w.split(2);
    let live = [NodeId(1), NodeId(3)];
    let acks = adoption2.on_notices(now, NodeId(2), &live, rm2, NodeId(1), vec![(id, mine, NodeId(0))]);
    assert_eq!(acks, vec![(id, 1)], "node 2 takes node 1's binding");
    assert_eq!(w.rm(2).binding_of(id), mine);
    w.frames(5);
    assert_eq!(w.role(2, id), Some(Role::Replica { primary: NodeId(1) }));
}

/// As above, but the live primary (node 1) announces nothing node 2 takes (a node that
/// recovered the object from its store does not announce it; a notice node 2 took as
/// superseded before it saw node 3 fail is not sent again): node 2 must take node 1's
/// states once node 3's generation that it learned the binding from has failed. Before,
/// node 3's id being a member again, node 2 refused them for good (fault swarm,
/// `--faults all` seeds 203, 260, 340).
#[test]
fn states_from_a_live_primary_are_taken_once_the_binding_known_failed() {
    let mut w = World::new(4, &[0, 1, 2]);
    let id = object_ranking(&mut w, 1, &[]);
    w.frames(5);
    let now = w.crash(0);
    w.adopts_orphan(1, id, NodeId(0));
    w.rm(2).member_down(NodeId(0));
    assert!(w.rm(2).drop_orphan(id));
    let theirs = Binding {
        node: NodeId(3),
        epoch: 2,
    };
    w.rm(2).learn_adoption(now, NodeId(3), id, theirs);
    w.rm(2).member_up(NodeId(3));
    // While node 3 is the member that binding named, node 1's states are refused.
    w.frames(3);
    assert!(w.rm(2).store().get(id).is_none());
    // Node 3 fails and comes back as a new generation, holding nothing.
    w.rm(2).member_down(NodeId(3));
    w.rm(2).member_up(NodeId(3));
    w.frames(10);
    assert_eq!(w.role(2, id), Some(Role::Replica { primary: NodeId(1) }));
}

/// Nodes 1 and 2 both adopted one object that stands still (rivals: their views differed
/// when its node failed), which node 3 backs up. Each refused the other's states as a rival, acknowledging them;
/// node 2's adoption wins, and node 1 gives its primary up. In a broadcast world node 1
/// must then hold a replica of node 2's: before, node 2 counted its state as delivered and,
/// the object never changing, never sent it again (fault swarm, `--faults all` seeds 306,
/// 389, 483).
#[test]
fn a_rival_that_gives_its_primary_up_replicates_the_winners() {
    let mut w = World::new(4, &[0, 1, 2, 3]);
    let id = rival_gives_its_primary_up(&mut w);
    w.frames(10);
    assert_eq!(w.role(1, id), Some(Role::Replica { primary: NodeId(2) }));
}

/// Nodes 1 and 2 adopt a static object of failed node 0 under the same epoch; node 2's
/// adoption wins and node 1, told, gives its primary up. Node 2 outranks node 1, and so
/// does node 3: node 3, not node 1, backs node 2's primary up (a backup's state comes with
/// its log and is acknowledged only with it). Returns the object.
fn rival_gives_its_primary_up(w: &mut World) -> ObjectId {
    let id = loop {
        let id = object_ranking_moving(w, 2, &[1], 0.0);
        if rendezvous::score(id, NodeId(3)) > rendezvous::score(id, NodeId(1)) {
            break id;
        }
    };
    w.frames(5);
    let now = w.crash(0);
    for n in [1, 2, 3] {
        w.rm(n).member_down(NodeId(0));
    }
    let lost = w.rm(1).adopt(now, id, NodeId(0)).expect("node 1 adopts");
    let won = w.rm(2).adopt(now, id, NodeId(0)).expect("node 2 adopts");
    assert_eq!(lost.epoch, won.epoch);
    // Each refuses (and acknowledges) the other's states.
    w.frames(5);
    assert!(w.rm(1).take_rivals().contains(&(NodeId(2), id)));
    let now = w.now();
    w.rm(1).learn_adoption(now, NodeId(2), id, won);
    assert!(w.rm(1).store().get(id).is_none(), "node 1 gave its primary up");
    id
}

/// As above, but the one fetch node 1 sends node 2 on giving its primary up is lost. In a
/// broadcast world node 1 must ask again until it holds a replica: before, node 2 counted
/// the state node 1 refused as delivered, and the object never changing, node 1 went without
/// a replica for good (fault swarm, `--faults all` seed 781, 10 % loss).
#[test]
fn a_rival_whose_fetch_of_the_winners_state_is_lost_asks_again() {
    let mut w = World::new(4, &[0, 1, 2, 3]);
    let id = rival_gives_its_primary_up(&mut w);
    // The fetch goes with node 1's next packets to node 2, which are lost.
    w.engine.links_mut().1.push((NodeId(1), NodeId(2)));
    w.frames(2);
    assert_eq!(w.role(1, id), None, "the fetch was lost");
    w.engine.links_mut().1.clear();
    w.frames(20);
    assert_eq!(w.role(1, id), Some(Role::Replica { primary: NodeId(2) }));
}

/// Node 3 follows node 0, the object's creator, and never learns that node 1 adopted the
/// object while node 0 restarted without it. Node 3 refuses node 1's states, asks node 0,
/// is told node 0 does not hold the object, and follows node 1. When node 1 fails, node 3's
/// replica is an orphan of node 1: it must not fall back on node 0's stale binding. Before,
/// it did, relayed every offer to node 0, which adopted nothing, and every holder dropped
/// the object as an orphan nobody adopted (fault swarm, crashes seed 638).
#[test]
fn a_replica_does_not_fall_back_on_a_binding_it_was_told_is_stale() {
    let mut w = World::new(4, &[0, 1, 2, 3]);
    let id = object_ranking(&mut w, 1, &[]);
    w.frames(5);
    // Node 0 restarts as a new process that holds nothing; nodes 1 to 3 saw it fail.
    w.rm(0).reset();
    for n in [1, 2, 3] {
        w.rm(n).member_down(NodeId(0));
        w.rm(n).member_up(NodeId(0));
    }
    let now = w.now();
    let adopted = w.rm(1).adopt(now, id, NodeId(0)).expect("node 1 adopts");
    w.rm(2).learn_adoption(now, NodeId(1), id, adopted);
    w.frames(10);
    assert_eq!(w.role(3, id), Some(Role::Replica { primary: NodeId(1) }));
    w.crash(1);
    let orphans = w.rm(3).member_down(NodeId(1));
    assert_eq!(orphans, vec![id], "node 3's replica is an orphan of node 1");
    assert_eq!(w.role(3, id), Some(Role::Replica { primary: NodeId(1) }));
}

/// Node 2 waits on an orphan of node 3's failed epoch 2 and offers it to node 4, the adopter
/// its view agrees on. Node 4 holds a replica that follows node 1, the object's live
/// primary under epoch 1: it must pass the offer on to node 1, which rebinds past epoch 2.
/// Before, node 4 ignored the offer (it held the object with its log), node 1 never
/// learned of the orphan, and node 2 dropped its replica and refused node 1's states for
/// good (fault swarm, `--faults all` seed 209).
#[test]
fn an_adopter_following_a_live_primary_passes_an_outranking_offer_on_to_it() {
    let mut w = World::new(5, &[0, 1, 2, 4]);
    let id = object_ranking(&mut w, 4, &[1, 2]);
    w.frames(5);
    let now = w.crash(0);
    for n in [1, 2, 4] {
        w.rm(n).member_down(NodeId(0));
    }
    let mine = w.rm(1).adopt(now, id, NodeId(0)).expect("node 1 adopts");
    w.rm(4).learn_adoption(now, NodeId(1), id, mine);
    w.frames(5);
    assert_eq!(w.role(4, id), Some(Role::Replica { primary: NodeId(1) }));
    // Node 2 follows node 3's epoch 2; node 3 fails; node 2 offers to node 4.
    let theirs = Binding {
        node: NodeId(3),
        epoch: 2,
    };
    let now = w.now();
    w.rm(2).learn_adoption(now, NodeId(3), id, theirs);
    let orphans = w.rm(2).member_down(NodeId(3));
    let live2 = [NodeId(1), NodeId(4)];
    let (mut out, mut events) = (Vec::new(), Vec::new());
    let (adoption2, rm2) = w.split(2);
    adoption2.member_down(
        now,
        NodeId(2),
        &live2,
        rm2,
        (NodeId(3), 0),
        orphans,
        &mut out,
        &mut events,
    );
    let batch: Vec<_> = out
        .into_iter()
        .filter(|(to, _)| *to == NodeId(4))
        .flat_map(|(_, m)| match m {
            MigrationMsg::Offer(b) => b,
            _ => Vec::new(),
        })
        .collect();
    assert_eq!(batch.len(), 1, "node 2 offers to node 4");
    let live4 = [NodeId(1), NodeId(2)];
    let (adoption4, rm4) = w.split(4);
    adoption4.on_offers(now, NodeId(4), &live4, rm4, NodeId(2), batch);
    let (mut out, mut events) = (Vec::new(), Vec::new());
    let (adoption4, rm4) = w.split(4);
    adoption4.on_frame(now, NodeId(4), &live4, rm4, &mut out, &mut events);
    let relayed: Vec<_> = out
        .into_iter()
        .filter(|(to, _)| *to == NodeId(1))
        .flat_map(|(_, m)| match m {
            MigrationMsg::Offer(b) => b,
            _ => Vec::new(),
        })
        .collect();
    assert!(
        relayed.iter().any(|o| o.id == id && o.epoch == 2),
        "node 4 passes the offer on to node 1"
    );
    // Node 1 rebinds past epoch 2.
    let live1 = [NodeId(2), NodeId(4)];
    let (adoption1, rm1) = w.split(1);
    adoption1.on_offers(now, NodeId(1), &live1, rm1, NodeId(4), relayed);
    for _ in 0..5 {
        w.frame();
        let now = w.now();
        let (adoption1, rm1) = w.split(1);
        let (mut out, mut events) = (Vec::new(), Vec::new());
        adoption1.on_frame(now, NodeId(1), &live1, rm1, &mut out, &mut events);
    }
    assert_eq!(
        w.rm(1).binding_of(id),
        Binding {
            node: NodeId(1),
            epoch: 3
        }
    );
}

/// Node 1 adopted an object of node 0 (which failed) and node 2 already follows node 1's
/// binding of it. A notice of that same binding from node 1 (as a migration's target sends
/// every member, `Adoption::migrated_in`, or an adopter a member that comes up) must be
/// acknowledged, and change nothing: before, node 2 refused it without an
/// acknowledgement, and node 1 resent it every 300 ms for as long as it held the object (a
/// 4-node cluster with 200 players handed over counted 7,184 refused notices in 15 s).
#[test]
fn a_notice_of_the_binding_a_member_already_follows_is_acknowledged() {
    let mut w = World::new(3, &[0, 1, 2]);
    let id = object_ranking(&mut w, 1, &[2]);
    w.frames(5);
    let now = w.crash(0);
    let mine = w.adopts_orphan(1, id, NodeId(0));
    w.rm(2).member_down(NodeId(0));
    assert_eq!(
        w.rm(2).learn_adoption(now, NodeId(1), id, mine),
        worldmesh_replica::MovedOutcome::Accepted
    );
    w.frames(3);
    assert_eq!(w.role(2, id), Some(Role::Replica { primary: NodeId(1) }));
    let now = w.now();
    let (adoption2, rm2) = w.split(2);
    let live = [NodeId(1)];
    let acks = adoption2.on_notices(now, NodeId(2), &live, rm2, NodeId(1), vec![(id, mine, NodeId(0))]);
    assert_eq!(acks, vec![(id, mine.epoch)]);
    assert_eq!(adoption2.stats().refused, 0);
    assert_eq!(w.rm(2).binding_of(id), mine);
    w.frames(3);
    assert_eq!(w.role(2, id), Some(Role::Replica { primary: NodeId(1) }));
}

/// Node 1 restarted and recovered an object from its store as primary under epoch 3 (its
/// previous process had adopted it, so this process's adoption state knows nothing of
/// it); node 2, whose view lost the later bindings in a rejoin, adopted the object from
/// its failed origin under epoch 1. Each refuses the other's states as a rival. Node 1
/// must tell node 2 its binding, which wins, so that node 2 gives its primary up and
/// follows node 1. Before, only adoptions this process made were told: node 2's notice
/// lost at node 1, node 1 sent none, and the object kept two primaries for good (fault
/// swarm, `--faults all` seed 203 with a renewed member reported up once instead of twice).
#[test]
fn a_primary_recovered_under_a_later_epoch_tells_a_rival_its_binding() {
    let mut w = World::new(4, &[0, 1, 2, 3]);
    let id = object_ranking(&mut w, 1, &[]);
    w.frames(5);
    let now = w.crash(0);
    // A restart: nothing held, then the stored copy at a version above the others'.
    w.rm(1).reset();
    assert!(
        w.rm(1)
            .recover_primary(now, id, 3, 20, Dot { x: 0.0, speed: 1.0 })
    );
    w.rm(2).member_down(NodeId(0));
    let rival = w.rm(2).adopt(now, id, NodeId(0)).expect("node 2 adopts");
    assert_eq!(rival.epoch, 1);
    w.frames(5);
    let rivals = w.rm(1).take_rivals();
    assert!(rivals.contains(&(NodeId(2), id)), "{rivals:?}");
    let now = w.now();
    let mut out = Vec::new();
    let (adoption, rm) = w.split(1);
    adoption.tell_rivals(now, rm, rivals, &mut out);
    let told = notices(&out, id);
    let recovered = Binding {
        node: NodeId(1),
        epoch: 3,
    };
    assert_eq!(told, vec![(NodeId(2), recovered)]);
    w.rm(2).learn_adoption(now, NodeId(1), id, recovered);
    assert!(w.rm(2).store().get(id).is_none(), "node 2 gave its primary up");
    w.frames(10);
    assert_eq!(w.role(2, id), Some(Role::Replica { primary: NodeId(1) }));
}
