//! Orphan adoption: when a member fails, every object it held as primary gets exactly one
//! live primary again, at a node that holds (or is offered) a recent replica of it.
//!
//! Colyseus keeps one primary per object on the node that runs it (paper `000` §3); the
//! paper leaves node failure to future work and suggests using replicas (§8). worldmesh
//! does that, with the name service of paper `001` §3 recording the new binding under a
//! new epoch:
//!
//! 1. **Who adopts.** Every node computes the same *adopter* for an orphan without
//!    messages: the highest-ranked live member for the object by rendezvous hashing
//!    ([`worldmesh_core::rendezvous`]), the failed node excluded. With
//!    `ReplicaConfig::backups` = k, the primary kept its k top-ranked members updated as
//!    backups, so the adopter holds a fresh copy unless more than k − 1 other top-ranked
//!    members failed at the same moment.
//! 2. **When.** Once the membership protocol (SWIM, [`crate::membership`]) declares the
//!    node down. The adopter promotes its confirmed replica to a primary under epoch + 1
//!    and announces the binding (`Adopted`) to every live member until each acknowledges.
//! 3. **Offers.** Every other holder of a replica of the orphan offers its copy to the
//!    adopter (resent until the adoption is learned). An adopter that holds no replica
//!    adopts the best offer after a short collection window; so does one whose replica
//!    came without the primary's per-writer log (it was not a backup, or became one less
//!    than a round trip before the failure: `replica::manager::backup`), keeping its own
//!    copy as a fallback. An offer with the log beats one without (only with it is a
//!    resent write the state contains recognised), then the fresher one wins.
//! 4. **Following.** A node accepts an `Adopted` notice only from the adopter its own view
//!    agrees on, once its own view has the old node down (otherwise it does not
//!    acknowledge, and the notice is resent). Its replica then follows the new primary.
//!    Late messages of the old primary are refused: they come from a node that no longer
//!    holds the binding.
//! 5. **Rivals.** Views can differ for a moment, so two nodes may adopt one orphan. The
//!    higher epoch wins, then the higher rendezvous score; the loser gives its primary up.
//! 6. **Newcomers.** A member that comes up later (a joiner, or a member back as a new
//!    generation with its store reset) still binds an adopted or migrated object to its
//!    origin and would refuse its primary's updates while the origin is live again; every
//!    node announces the primaries it holds under a later epoch to every member that comes
//!    up, with the same notices. A notice is taken when the node's view agrees on the
//!    adopter, or when its binding wins over everything the node knows (epoch order, then
//!    rendezvous rank, at most [`MAX_EPOCH_LEAD`] epochs ahead); a primary that receives
//!    updates of an object it holds tells the sender its binding (rivals, rule 5). An
//!    offer names the generation of the node that failed: an adopter that never saw it
//!    fail, but whose view lists a later generation of that id, knows it is gone and
//!    adopts instead of waiting for a failure it will never see.
//!
//! Objects whose [`OrphanPolicy`] is `Despawn` are dropped by every replica holder
//! instead. An orphan nobody adopts within [`AdoptionConfig::orphan_timeout`] (no replica
//! survived anywhere) is dropped and counted: what can be lost is documented in
//! `replica::manager::backup`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use worldmesh_core::{NodeId, ObjectId, Time, rendezvous};
use worldmesh_replica::{Binding, GameObject, MovedOutcome, OrphanOffer, OrphanPolicy, ReplicaManager, Role};

use crate::migration::MigrationMsg;

/// Tuning of adoption.
#[derive(Clone, Debug, PartialEq)]
pub struct AdoptionConfig {
    /// How long an adopter that holds no replica collects offers before it adopts the
    /// freshest.
    pub offer_window: Duration,
    /// Unacknowledged notices and unanswered offers are resent after this long.
    pub resend: Duration,
    /// An orphan still bound to its failed node after this long is dropped (nobody
    /// adopted it).
    pub orphan_timeout: Duration,
}

impl Default for AdoptionConfig {
    fn default() -> Self {
        Self {
            offer_window: Duration::from_millis(200),
            resend: Duration::from_millis(300),
            orphan_timeout: Duration::from_secs(10),
        }
    }
}

/// Counters of adoption at one node.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AdoptionStats {
    /// Orphans this node adopted (from its own replica or from an offer).
    pub adopted: u64,
    /// Of which from an offer.
    pub from_offer: u64,
    /// Offers sent, with resends.
    pub offers_sent: u64,
    /// `Adopted` notices sent, with resends.
    pub notices_sent: u64,
    /// Notices and offers refused (sender not the agreed adopter, old node still up here).
    pub refused: u64,
    /// Orphans dropped: their policy despawns them, or nobody adopted them in time.
    pub dropped: u64,
}

/// What adoption reports to the node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AdoptionEvent {
    /// This node adopted `id` from the failed node `dead` under `binding`.
    Adopted {
        /// The object.
        id: ObjectId,
        /// The failed node.
        dead: NodeId,
        /// The new binding (this node, the next epoch).
        binding: Binding,
        /// The version the adopted state had (the new primary continues from it).
        version: u64,
    },
    /// An orphan was dropped (despawn policy, or nobody adopted it).
    Dropped {
        /// The object.
        id: ObjectId,
        /// The failed node.
        dead: NodeId,
    },
}

/// An orphan held here as a replica, awaiting its adoption elsewhere.
struct Waiting {
    dead: NodeId,
    since: Time,
    offered_at: Option<Time>,
    /// A live member that announced itself as the object's primary under a binding the
    /// failed one outranks here (its notice was refused): it gets the offers too, and
    /// adopts the orphan by rebinding its primary past the failed binding.
    claimant: Option<NodeId>,
}

/// The adoption protocol state of one node.
#[derive(Default)]
pub struct Adoption {
    cfg: AdoptionConfig,
    waiting: BTreeMap<ObjectId, Waiting>,
    /// Offers for orphans this node must adopt but does not hold (or holds without a log):
    /// first offer's arrival and the best offer (see [`better`]).
    offers: BTreeMap<ObjectId, (Time, OrphanOffer)>,
    /// Unacknowledged notices per peer: object → (binding, failed node, last sent).
    notices: BTreeMap<NodeId, BTreeMap<ObjectId, (Binding, NodeId, Time)>>,
    /// Node ids this node has seen fail (in any generation). A failed member may be back
    /// as a new generation under the same id while its old objects are still being
    /// adopted: "is it live?" asks about the id, so the failure seen is what counts.
    /// Bounded by the ids the cluster's certificates name.
    seen_down: BTreeSet<NodeId>,
    /// The newest generation of each member seen coming up or failing here. An offer for
    /// an orphan of a generation older than the one this node's view lists comes from a
    /// failure this node never saw: that generation is gone (it restarted before this
    /// node — a joiner, say — noticed; fault swarm, crashes seeds 5258, 6240, 8599).
    /// Bounded by the ids the cluster's certificates name.
    generations: BTreeMap<NodeId, u32>,
    /// The generation of each member last seen failing here (what offers name).
    failed: BTreeMap<NodeId, u32>,
    /// Offers to pass on to the live primary this node's replica follows, whose binding
    /// the offer's outranks (see [`Adoption::on_offers`]); sent with the next frame.
    relay: Vec<(NodeId, OrphanOffer)>,
    /// Orphans this node adopted: object → (binding, failed node). Announced again to a
    /// member that comes up (a joiner, or a member back as a new generation with an empty
    /// name service), which would otherwise still bind the object to its origin and refuse
    /// the adopter's updates. Entries whose binding changed here are dropped on use.
    adopted: BTreeMap<ObjectId, (Binding, NodeId)>,
    stats: AdoptionStats,
}

/// Most offers held at once (one per orphan this node is to adopt).
const MAX_OFFERS: usize = 1 << 16;

/// Furthest a notice's epoch may run ahead of the one known here (each failure adds one;
/// a member cannot claim an object with an arbitrary epoch). Not applied when this node
/// knows no epoch of the object (see `on_notices`).
const MAX_EPOCH_LEAD: u32 = 16;

/// True if offer `a` is a better state to adopt than `b`: one with its log beats one
/// without, then the fresher one.
fn better(a: &OrphanOffer, b: &OrphanOffer) -> bool {
    (a.logged, a.version) > (b.logged, b.version)
}

/// The adopter of `id` among `live` (sorted, without `me`) and `me`, the failed `dead`
/// excluded.
pub fn adopter(id: ObjectId, me: NodeId, live: &[NodeId], dead: NodeId) -> Option<NodeId> {
    rendezvous::top(id, live.iter().copied().chain([me]), Some(dead))
}

impl Adoption {
    /// Adoption with `cfg`.
    pub fn new(cfg: AdoptionConfig) -> Self {
        Self {
            cfg,
            ..Self::default()
        }
    }

    /// Counters.
    pub fn stats(&self) -> &AdoptionStats {
        &self.stats
    }

    /// This node was declared failed and is back as a new generation (its store was
    /// reset): what it was doing for earlier failures is void, and its own previous
    /// generation counts as failed, so it follows the members that adopted its objects
    /// (and gives up any copy it adopts again with a lower epoch).
    pub fn rejoined(&mut self, me: NodeId) {
        self.waiting.clear();
        self.offers.clear();
        self.relay.clear();
        self.notices.clear();
        self.adopted.clear();
        self.seen_down.insert(me);
    }

    /// Remembers `generation` as `node`'s newest known here (generations only grow).
    fn note_generation(&mut self, node: NodeId, generation: u32) {
        let g = self.generations.entry(node).or_insert(generation);
        *g = (*g).max(generation);
    }

    /// The generation of `node` last seen failing here (0 if none).
    fn failed_generation(&self, node: NodeId) -> u32 {
        self.failed.get(&node).copied().unwrap_or(0)
    }

    /// The newest generation of `node` known here (0 if none).
    fn generation_of(&self, node: NodeId) -> u32 {
        self.generations.get(&node).copied().unwrap_or(0)
    }

    /// Member `node`, of `generation`, came up (joined, or back as a new generation): it learns the
    /// bindings of the primaries this node holds under a later epoch than their origin's
    /// (adopted or migrated here), through the usual notices (resent until acknowledged;
    /// the receiver applies its own checks).
    pub fn member_up<O: GameObject>(
        &mut self,
        now: Time,
        rm: &ReplicaManager<O>,
        node: NodeId,
        generation: u32,
        out: &mut Vec<(NodeId, MigrationMsg)>,
    ) {
        self.note_generation(node, generation);
        self.adopted.retain(|id, (b, _)| rm.binding_of(*id) == *b);
        // Every primary held here under a binding the newcomer cannot know: adopted
        // (from the failed node) or migrated in (named after its origin).
        let mut batch = Vec::new();
        for (id, e) in rm.store().iter() {
            if e.role != worldmesh_replica::Role::Primary {
                continue;
            }
            let b = rm.binding_of(id);
            if b.epoch == 0 {
                continue;
            }
            let dead = self.adopted.get(&id).map_or(id.origin, |(_, d)| *d);
            batch.push((id, b, dead));
        }
        if batch.is_empty() {
            return;
        }
        let q = self.notices.entry(node).or_default();
        for (id, b, dead) in &batch {
            q.insert(*id, (*b, *dead, now));
        }
        self.send_notices(node, &batch, out);
    }

    /// Objects migrated here (`ids`): every member learns their new binding
    /// through the usual notices too, not only through the origin's `Moved`. A
    /// member that came up while they moved is not yet in the origin's view, and a
    /// draining origin may leave before it is; such a member would otherwise keep the
    /// origin's binding and refuse this node's states for good (fault swarm, crashes seed
    /// 435). Members that already know the binding acknowledge at once.
    pub fn migrated_in<O: GameObject>(
        &mut self,
        now: Time,
        me: NodeId,
        live: &[NodeId],
        rm: &ReplicaManager<O>,
        ids: &[ObjectId],
        out: &mut Vec<(NodeId, MigrationMsg)>,
    ) {
        let batch: Vec<(ObjectId, Binding, NodeId)> = ids
            .iter()
            .map(|id| (*id, rm.binding_of(*id)))
            .filter(|(_, b)| b.node == me)
            .map(|(id, b)| (id, b, id.origin))
            .collect();
        if batch.is_empty() {
            return;
        }
        // The origin too: it may have given the migration up (its view had this node down,
        // fault swarm seed 608) and kept the object as primary under the older epoch; the
        // notice's higher epoch makes it give that copy up.
        for p in live.iter().filter(|p| **p != me) {
            let q = self.notices.entry(*p).or_default();
            for (id, b, dead) in &batch {
                q.insert(*id, (*b, *dead, now));
            }
            self.send_notices(*p, &batch, out);
        }
    }

    /// Sends `items` (already recorded in `notices`, to be resent until acknowledged) to
    /// `peer`, a few dozen per message.
    fn send_notices(
        &mut self,
        peer: NodeId,
        items: &[(ObjectId, Binding, NodeId)],
        out: &mut Vec<(NodeId, MigrationMsg)>,
    ) {
        for part in items.chunks(32) {
            self.stats.notices_sent += part.len() as u64;
            out.push((peer, MigrationMsg::Adopted(part.to_vec())));
        }
    }

    /// Orphans held here awaiting adoption elsewhere.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// Unacknowledged adoption notices.
    pub fn unacked(&self) -> usize {
        self.notices.values().map(BTreeMap::len).sum()
    }

    /// Member `dead`, of the given generation, failed; `orphans` are the replicas of its
    /// primaries held here. Adopts
    /// the ones this node is the adopter of, offers the others, drops despawned ones.
    #[allow(clippy::too_many_arguments)]
    pub fn member_down<O: GameObject>(
        &mut self,
        now: Time,
        me: NodeId,
        live: &[NodeId],
        rm: &mut ReplicaManager<O>,
        (dead, generation): (NodeId, u32),
        orphans: Vec<ObjectId>,
        out: &mut Vec<(NodeId, MigrationMsg)>,
        events: &mut Vec<AdoptionEvent>,
    ) {
        self.note_generation(dead, generation);
        self.failed.insert(dead, generation);
        // A notice to the failed node will never be acknowledged.
        self.notices.remove(&dead);
        self.seen_down.insert(dead);
        // Orphans of an earlier failure may have been offered to this member: offer them
        // again at the next frame, to their adopter in the new view.
        for w in self.waiting.values_mut() {
            w.offered_at = None;
        }
        let mut offers: BTreeMap<NodeId, Vec<OrphanOffer>> = BTreeMap::new();
        for id in orphans {
            let policy = rm.store().object(id).map(GameObject::orphan_policy);
            if policy == Some(OrphanPolicy::Despawn) {
                self.drop_orphan(rm, id, dead, events);
                continue;
            }
            match adopter(id, me, live, dead) {
                Some(a) if a == me => self.adopt_own(now, me, live, rm, id, dead, out, events),
                Some(a) => {
                    self.waiting.insert(
                        id,
                        Waiting {
                            dead,
                            since: now,
                            offered_at: Some(now),
                            claimant: None,
                        },
                    );
                    rm.keep_orphan(id);
                    if let Some(o) = rm.offer(id, dead, self.failed_generation(dead)) {
                        offers.entry(a).or_default().push(o);
                    }
                }
                None => {}
            }
        }
        self.send_offers(offers, out);
    }

    /// Drops this node's replica of orphan `id` of `dead` (nobody adopts it), counted.
    fn drop_orphan<O: GameObject>(
        &mut self,
        rm: &mut ReplicaManager<O>,
        id: ObjectId,
        dead: NodeId,
        events: &mut Vec<AdoptionEvent>,
    ) {
        if rm.drop_orphan(id) {
            self.stats.dropped += 1;
            events.push(AdoptionEvent::Dropped { id, dead });
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn adopt_own<O: GameObject>(
        &mut self,
        now: Time,
        me: NodeId,
        live: &[NodeId],
        rm: &mut ReplicaManager<O>,
        id: ObjectId,
        dead: NodeId,
        out: &mut Vec<(NodeId, MigrationMsg)>,
        events: &mut Vec<AdoptionEvent>,
    ) {
        self.waiting.remove(&id);
        if rm.lacks_log(id) {
            // The replica here came without its log: collect the others' offers for a
            // window, this copy among them (kept meanwhile), then adopt the best.
            if let Some(own) = rm.offer(id, dead, self.failed_generation(dead)) {
                rm.keep_orphan(id);
                self.consider(now, own);
                return;
            }
        }
        self.adopt_replica(now, me, live, rm, id, dead, out, events);
    }

    /// Adopts orphan `id` of `dead` from the replica held here.
    #[allow(clippy::too_many_arguments)]
    fn adopt_replica<O: GameObject>(
        &mut self,
        now: Time,
        me: NodeId,
        live: &[NodeId],
        rm: &mut ReplicaManager<O>,
        id: ObjectId,
        dead: NodeId,
        out: &mut Vec<(NodeId, MigrationMsg)>,
        events: &mut Vec<AdoptionEvent>,
    ) {
        rm.release_orphan(id);
        if let Ok(binding) = rm.adopt(now, id, dead) {
            let version = rm.store().get(id).map_or(0, |e| e.version);
            self.adopted(now, me, live, (id, version), dead, binding, out, events);
        }
    }

    /// Keeps offer `o` if it is the first for its object or better than the one kept.
    /// Returns false if it was refused (too many objects with offers).
    fn consider(&mut self, now: Time, o: OrphanOffer) -> bool {
        let full = self.offers.len() >= MAX_OFFERS;
        match self.offers.get_mut(&o.id) {
            Some((_, best)) => {
                if better(&o, best) {
                    *best = o;
                }
                true
            }
            None if !full => {
                self.offers.insert(o.id, (now, o));
                true
            }
            None => false,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn adopted(
        &mut self,
        now: Time,
        me: NodeId,
        live: &[NodeId],
        (id, version): (ObjectId, u64),
        dead: NodeId,
        binding: Binding,
        out: &mut Vec<(NodeId, MigrationMsg)>,
        events: &mut Vec<AdoptionEvent>,
    ) {
        self.stats.adopted += 1;
        self.adopted.insert(id, (binding, dead));
        events.push(AdoptionEvent::Adopted {
            id,
            dead,
            binding,
            version,
        });
        for p in live.iter().filter(|p| **p != me) {
            self.notices
                .entry(*p)
                .or_default()
                .insert(id, (binding, dead, now));
            self.stats.notices_sent += 1;
            out.push((*p, MigrationMsg::Adopted(vec![(id, binding, dead)])));
        }
    }

    fn send_offers(
        &mut self,
        offers: BTreeMap<NodeId, Vec<OrphanOffer>>,
        out: &mut Vec<(NodeId, MigrationMsg)>,
    ) {
        for (to, batch) in offers {
            // Keep each message well inside one datagram.
            let mut part = Vec::new();
            let mut size = 0;
            for o in batch {
                size += o.state.len() + 48;
                part.push(o);
                if size > 900 {
                    self.stats.offers_sent += part.len() as u64;
                    out.push((to, MigrationMsg::Offer(std::mem::take(&mut part))));
                    size = 0;
                }
            }
            if !part.is_empty() {
                self.stats.offers_sent += part.len() as u64;
                out.push((to, MigrationMsg::Offer(part)));
            }
        }
    }

    /// Offers (from any member) for orphans this node should adopt. An offer may arrive
    /// before this node has seen the failure itself: it is kept, and used only once this
    /// node's own view has the old node down (see [`Adoption::on_frame`]).
    pub fn on_offers<O: GameObject>(
        &mut self,
        now: Time,
        me: NodeId,
        live: &[NodeId],
        rm: &ReplicaManager<O>,
        from: NodeId,
        offers: Vec<OrphanOffer>,
    ) {
        for o in offers {
            // A primary held here under a later epoch than the offer's: the offerer follows
            // a binding this node has moved past (it missed the migration or adoption that
            // brought the object here — e.g. it joined while the object moved, fault swarm
            // seed 435). Tell it, through the usual notice (resent until acknowledged).
            // Or an offer naming this node as the failed one, for an object it holds under
            // that very binding: this is the new generation, which the object reached after
            // the old one failed (a migration or adoption the offerer saw before it saw the
            // failure, fault swarm seed 1007); the notice makes the offerer follow it.
            let here = rm.binding_of(o.id);
            let moved_past = here.epoch > o.epoch || (o.dead == me && here.epoch == o.epoch);
            let primary = here.node == me && rm.store().get(o.id).is_some_and(|e| e.role == Role::Primary);
            // A primary held here under the offer's epoch that outranks the failed
            // holder's (the rival rule): the offerer takes this binding once told.
            let outranks = primary
                && here.epoch == o.epoch
                && o.dead != me
                && rendezvous::score(o.id, me) > rendezvous::score(o.id, o.dead);
            if here.node == me && (moved_past || outranks) && rm.store().get(o.id).is_some() {
                let resend = self.cfg.resend;
                let due = Time::from_micros(now.as_micros().saturating_sub(resend.as_micros() as u64));
                self.notices
                    .entry(from)
                    .or_default()
                    .entry(o.id)
                    .or_insert((here, o.dead, due));
                continue;
            }
            if primary {
                // A primary held here under a binding the offer's outranks: a concurrent
                // holder (the other side of a partition) took the object under the offer's
                // epoch and failed, and the offerer, which follows that binding, refuses
                // this node's notices and states. Whether or not this node is the agreed
                // adopter (an offerer whose notice from here was refused sends its offer
                // here too), it adopts that orphan by rebinding its own primary past it
                // once the window closes and the failure is seen here
                // (`ReplicaManager::supersede`).
                if !self.consider(now, o) {
                    self.stats.refused += 1;
                }
                continue;
            }
            let agreed = adopter(o.id, me, live, o.dead) == Some(me);
            if !agreed {
                self.stats.refused += 1;
                continue;
            }
            // A replica held here that follows a live primary under a binding the offer's
            // outranks: the offerer follows a later holder that failed, and refuses that
            // primary's notices and states. The primary adopts the orphan by rebinding past
            // it once it has the offer: pass it on (fault swarm, `--faults all` seed 209).
            let outranked = o.epoch > here.epoch
                || (o.epoch == here.epoch
                    && o.dead != here.node
                    && rendezvous::score(o.id, o.dead) > rendezvous::score(o.id, here.node));
            if here.node != me
                && here.node != o.dead
                && outranked
                && live.contains(&here.node)
                && matches!(rm.store().get(o.id).map(|e| e.role), Some(Role::Replica { primary }) if primary == here.node)
            {
                if self.relay.len() < MAX_OFFERS {
                    self.relay.push((here.node, o));
                }
                continue;
            }
            if rm.store().get(o.id).is_some() && !rm.lacks_log(o.id) {
                // Held here with its log: adopted from this node's own copy when the
                // failure is seen (or already adopted).
                continue;
            }
            if !self.consider(now, o) {
                self.stats.refused += 1;
            }
        }
    }

    /// `Adopted` notices from `from`. Returns the acknowledgements to send.
    #[allow(clippy::too_many_arguments)]
    pub fn on_notices<O: GameObject>(
        &mut self,
        now: Time,
        me: NodeId,
        live: &[NodeId],
        rm: &mut ReplicaManager<O>,
        from: NodeId,
        items: Vec<(ObjectId, Binding, NodeId)>,
    ) -> Vec<(ObjectId, u32)> {
        let mut acks = Vec::new();
        for (id, binding, dead) in items {
            // The adopter this node's own view agrees on, once the old node is down here
            // too; or a binding that wins over everything this node knows of the object
            // (a higher epoch; the same epoch from a higher-ranked rival) within a few
            // epochs: the epoch order decides, whatever views the nodes had when they
            // adopted. Without the second rule, a node that never saw the old node fail (it
            // joined or restarted later, or the failure was false and refuted) kept
            // following a primary that had given the object up, or kept a rival primary
            // forever. Otherwise no acknowledgement (the notice comes again).
            let agreed = self.seen_down.contains(&dead) && adopter(id, me, live, dead) == Some(from);
            let known = rm.binding_of(id);
            // A binding known here whose node failed since (and which this node does not
            // hold) loses to any live member's claim (`ReplicaManager::binding_failed`).
            let wins = binding.epoch > known.epoch
                || (binding.epoch == known.epoch
                    && known.node != binding.node
                    && rendezvous::score(id, binding.node) > rendezvous::score(id, known.node))
                || (known.node != binding.node && rm.binding_failed(id));
            // The lead is bounded only against an epoch this node knows: a node that
            // joined or restarted after the object's 16th adoption or migration knows none,
            // and refusing every notice would leave it following the creator forever (and
            // adopting the object, should its primary fail, under an epoch lower than the
            // one it held: crash trials on real processes, issue 19).
            let plausible =
                !rm.knows_binding(id) || binding.epoch <= known.epoch.saturating_add(MAX_EPOCH_LEAD);
            // `from` failed, came back as a new generation and adopted the object from an
            // offer made under an older binding: its epoch can equal the one its previous
            // generation held, which names the orphan this node waits on (fault swarm,
            // crashes seed 337). The sender is a live member again and the orphan's dead
            // node is the sender's id: follow the new generation.
            let reborn = known == binding
                && binding.node == from
                && self.seen_down.contains(&from)
                && live.contains(&from)
                && self.waiting.get(&id).is_some_and(|w| w.dead == from);
            if reborn {
                if rm.follow_new_generation(now, id, from) {
                    self.waiting.remove(&id);
                    rm.release_orphan(id);
                    self.offers.remove(&id);
                    acks.push((id, binding.epoch));
                } else {
                    self.stats.refused += 1;
                }
                continue;
            }
            // The sender holds the object under the very binding this node follows, and
            // this node waits on no orphan of it: nothing to learn. Acknowledge, or the
            // sender resends the notice every `resend` for as long as it holds the object:
            // a migration tells every member its new binding (`migrated_in`), and those
            // that already had it from the origin refused it without an acknowledgement
            // (a 4-node cluster with 200 players handed over counted 7,184 refused notices
            // in 15 s and no failure).
            if known == binding && binding.node == from && !self.waiting.contains_key(&id) {
                acks.push((id, binding.epoch));
                continue;
            }
            // The sender holds the object as primary under a binding the one this node
            // waits on (its failed holder's) outranks: tell it of the orphan, with the
            // offers (see `Waiting::claimant`).
            if !wins
                && binding.node == from
                && live.contains(&from)
                && let Some(w) = self.waiting.get_mut(&id)
                && w.dead == known.node
                && w.claimant != Some(from)
            {
                w.claimant = Some(from);
                w.offered_at = None;
            }
            if !(agreed || wins && plausible) {
                self.stats.refused += 1;
                continue;
            }
            match rm.learn_adoption(now, from, id, binding) {
                MovedOutcome::Accepted | MovedOutcome::Superseded => {
                    self.waiting.remove(&id);
                    rm.release_orphan(id);
                    self.offers.remove(&id);
                    acks.push((id, binding.epoch));
                }
                MovedOutcome::Refused => self.stats.refused += 1,
            }
        }
        acks
    }

    /// `peer` sent updates of objects this node holds as primary (`rivals`): it believes
    /// it is their primary. Tells it this node's binding of each one this node adopted, or
    /// holds under a later epoch than its origin's (recovered or migrated in) — the usual
    /// notice, resent until acknowledged; the rival rule demotes whichever loses.
    pub fn tell_rivals<O: GameObject>(
        &mut self,
        now: Time,
        rm: &ReplicaManager<O>,
        rivals: impl IntoIterator<Item = (NodeId, ObjectId)>,
        out: &mut Vec<(NodeId, MigrationMsg)>,
    ) {
        let mut batches: BTreeMap<NodeId, Vec<(ObjectId, Binding, NodeId)>> = BTreeMap::new();
        for (peer, id) in rivals {
            let (binding, dead) = match self.adopted.get(&id) {
                Some(&(binding, dead)) => {
                    if rm.binding_of(id) != binding {
                        continue;
                    }
                    (binding, dead)
                }
                // A primary held under a later epoch than its origin's that this process did
                // not adopt itself: recovered from the store after a restart, or migrated in
                // (told as `member_up` tells a newcomer). Without it a rival that adopted the
                // object under a lower epoch (its view lost the later bindings in a rejoin)
                // and a restarted node holding it under a higher one each refused the
                // other's states for good: the rival's notice loses here, and this node sent
                // none (fault swarm, `--faults all` seed 203 with a renewed member reported
                // up once instead of twice: a change not made, see `membership`).
                None => {
                    let binding = rm.binding_of(id);
                    let primary = rm.store().get(id).is_some_and(|e| e.role == Role::Primary);
                    if !primary || binding.epoch == 0 {
                        continue;
                    }
                    (binding, id.origin)
                }
            };
            let q = self.notices.entry(peer).or_default();
            if q.contains_key(&id) {
                continue; // already being told (resent by `on_frame`)
            }
            q.insert(id, (binding, dead, now));
            batches.entry(peer).or_default().push((id, binding, dead));
        }
        for (peer, batch) in batches {
            self.send_notices(peer, &batch, out);
        }
    }

    /// Acknowledgements of notices from `from`.
    pub fn on_acks(&mut self, from: NodeId, acks: &[(ObjectId, u32)]) {
        if let Some(q) = self.notices.get_mut(&from) {
            for (id, epoch) in acks {
                if q.get(id).is_some_and(|(b, ..)| b.epoch == *epoch) {
                    q.remove(id);
                }
            }
            if q.is_empty() {
                self.notices.remove(&from);
            }
        }
    }

    /// Per-frame upkeep: resends notices and offers, adopts from offers whose window
    /// closed, re-evaluates waiting orphans (the view may have changed: this node may now
    /// be the adopter), drops orphans nobody adopted.
    pub fn on_frame<O: GameObject>(
        &mut self,
        now: Time,
        me: NodeId,
        live: &[NodeId],
        rm: &mut ReplicaManager<O>,
        out: &mut Vec<(NodeId, MigrationMsg)>,
        events: &mut Vec<AdoptionEvent>,
    ) {
        let resend = self.cfg.resend;
        // A notice announces a binding held here: once it is not (demoted by a rival,
        // migrated away, deleted), resending it would make a node that takes it follow a
        // node that no longer holds the object.
        for items in self.notices.values_mut() {
            items.retain(|id, (b, ..)| rm.binding_of(*id) == *b && rm.store().get(*id).is_some());
        }
        self.notices.retain(|_, items| !items.is_empty());
        for (peer, items) in self.notices.iter_mut() {
            let batch: Vec<(ObjectId, Binding, NodeId)> = items
                .iter_mut()
                .filter(|(_, (_, _, t))| now.saturating_since(*t) >= resend)
                .map(|(id, (b, d, t))| {
                    *t = now;
                    (*id, *b, *d)
                })
                .collect();
            if !batch.is_empty() {
                self.stats.notices_sent += batch.len() as u64;
                out.push((*peer, MigrationMsg::Adopted(batch)));
            }
        }
        // Offers whose window closed.
        let window = self.cfg.offer_window;
        let ready: Vec<ObjectId> = self
            .offers
            .iter()
            .filter(|(_, (t, _))| now.saturating_since(*t) >= window)
            .map(|(id, _)| *id)
            .collect();
        for id in ready {
            let Some((first, offer)) = self.offers.remove(&id) else {
                continue;
            };
            // Seen failing here, or not a member here at all: a node that came up after
            // the failure (a joiner, a member back as a new generation) never sees it fail
            // and would otherwise never adopt (fault swarm, crashes seed 68).
            // Or a later generation of it is the member here.
            let down_here = self.seen_down.contains(&offer.dead)
                || !live.contains(&offer.dead)
                || self.generation_of(offer.dead) > offer.dead_generation;
            if !down_here {
                // Not seen failing here yet: wait for it (or give up).
                if now.saturating_since(first) < self.cfg.orphan_timeout {
                    self.offers.insert(id, (first, offer));
                }
                continue;
            }
            if rm.store().get(id).is_some_and(|e| e.role == Role::Primary) {
                // The object lived on here: adopt the orphan by keeping this primary.
                if let Ok(binding) = rm.supersede(&offer) {
                    let version = rm.store().get(id).map_or(0, |e| e.version);
                    self.adopted(now, me, live, (id, version), offer.dead, binding, out, events);
                }
                continue;
            }
            if adopter(id, me, live, offer.dead) != Some(me) {
                continue;
            }
            rm.release_orphan(id);
            if !offer.logged && rm.confirmed(id).is_some_and(|(v, _)| v >= offer.version) {
                // No offer with a log, none fresher than this node's own copy: adopt it.
                self.adopt_replica(now, me, live, rm, id, offer.dead, out, events);
                continue;
            }
            if let Ok(binding) = rm.adopt_offer(now, &offer) {
                self.stats.from_offer += 1;
                self.adopted(
                    now,
                    me,
                    live,
                    (id, offer.version),
                    offer.dead,
                    binding,
                    out,
                    events,
                );
            }
        }
        // Orphans waiting for their adopter.
        let mut offers: BTreeMap<NodeId, Vec<OrphanOffer>> = BTreeMap::new();
        for (to, o) in std::mem::take(&mut self.relay) {
            offers.entry(to).or_default().push(o);
        }
        let ids: Vec<ObjectId> = self.waiting.keys().copied().collect();
        for id in ids {
            let Some(w) = self.waiting.get(&id) else { continue };
            let dead = w.dead;
            if rm.binding_of(id).node != dead {
                self.waiting.remove(&id); // adopted and learned (or gone)
                rm.release_orphan(id);
                continue;
            }
            if now.saturating_since(w.since) > self.cfg.orphan_timeout {
                self.waiting.remove(&id);
                rm.release_orphan(id);
                self.drop_orphan(rm, id, dead, events);
                continue;
            }
            match adopter(id, me, live, dead) {
                Some(a) if a == me => self.adopt_own(now, me, live, rm, id, dead, out, events),
                Some(a) => {
                    if w.offered_at.is_none_or(|t| now.saturating_since(t) >= resend)
                        && let Some(o) = rm.offer(id, dead, self.failed_generation(dead))
                    {
                        // The failed node's id is a member again (a new generation): it
                        // may hold the object by now; it answers with its binding if so.
                        if live.contains(&dead) {
                            offers.entry(dead).or_default().push(o.clone());
                        }
                        if let Some(c) = w.claimant.filter(|c| *c != a && *c != dead && live.contains(c)) {
                            offers.entry(c).or_default().push(o.clone());
                        }
                        offers.entry(a).or_default().push(o);
                        if let Some(w) = self.waiting.get_mut(&id) {
                            w.offered_at = Some(now);
                        }
                    }
                }
                None => {}
            }
        }
        self.send_offers(offers, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_offer_with_its_log_beats_a_fresher_one_without() {
        let offer = |version, logged| OrphanOffer {
            id: ObjectId::new(NodeId(0), 1),
            dead: NodeId(0),
            dead_generation: 0,
            epoch: 0,
            version,
            state: Vec::new(),
            logs: Vec::new(),
            logged,
        };
        assert!(better(&offer(5, true), &offer(9, false)));
        assert!(!better(&offer(9, false), &offer(5, true)));
        assert!(better(&offer(6, true), &offer(5, true)));
        assert!(better(&offer(6, false), &offer(5, false)));
        assert!(!better(&offer(5, true), &offer(5, true)));
    }

    #[test]
    fn every_node_agrees_on_the_adopter_and_it_is_never_the_dead_node() {
        let all: Vec<NodeId> = (0..8).map(NodeId).collect();
        for s in 0..500 {
            let id = ObjectId::new(NodeId(s % 8), s);
            let dead = NodeId(s % 8);
            let choices: Vec<Option<NodeId>> = all
                .iter()
                .filter(|n| **n != dead)
                .map(|&me| {
                    let live: Vec<NodeId> = all.iter().copied().filter(|n| *n != me && *n != dead).collect();
                    adopter(id, me, &live, dead)
                })
                .collect();
            assert!(choices.windows(2).all(|w| w[0] == w[1]), "{id}: {choices:?}");
            assert_ne!(choices[0], Some(dead));
            assert!(choices[0].is_some());
        }
    }
}
