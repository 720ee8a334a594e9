//! The replica manager's side of membership changes and of **adoption**: a live node
//! becoming the primary of an orphan, an object whose primary's node failed.
//!
//! The node decides *who* adopts (the first live member of the object's rendezvous ranking,
//! `node::adoption`) and *when* (once its membership protocol declares the old node down);
//! this module does what adoption does to the local state:
//!
//! - [`ReplicaManager::member_down`] forgets everything tied to the failed member (its
//!   per-peer streams, its subscriptions, the writes it made) and returns the orphans held
//!   here as replicas;
//! - [`ReplicaManager::adopt`] promotes a replica's **confirmed** state (the last one its
//!   primary sent, without tentative writes made here) to a primary under the next epoch,
//!   with the per-writer logs that state contains (see `backup`), then applies this node's
//!   own pending writes to it;
//! - [`ReplicaManager::offer`] / [`ReplicaManager::adopt_offer`]: a replica holder that is
//!   not the adopter offers its copy, and an adopter that holds none adopts the freshest
//!   offer;
//! - [`ReplicaManager::learn_adoption`]: every other node follows the new primary (the
//!   replica is re-fetched from it, this node's pending writes go there);
//! - [`ReplicaManager::demote`]: two nodes that adopted the same orphan (their membership
//!   views differed for a moment) settle on one — the higher epoch, then the higher
//!   rendezvous score — and the other gives its primary up.
//!
//! Versions jump at adoption: the new primary starts above any version the failed one can
//! have produced after the adopted state (at most one per frame: `max_version_rate` × the
//! time since, plus a second's worth), so an (object, version) pair names one state across
//! the failure, and a replica holder that had fresher versions from the dead primary than
//! the adopter had simply replaces them with the adopter's next full state.

use worldmesh_core::{NodeId, ObjectId, Time, rendezvous};

use super::{GameObject, PrimaryMeta, ReplicaManager, Role, WriterLog};
use crate::message::InterestItem;
use crate::naming::Binding;

/// A replica holder's copy of an orphan, offered to the node that adopts it.
#[derive(Clone, Debug, PartialEq, bitcode::Encode, bitcode::Decode)]
pub struct OrphanOffer {
    /// The orphan.
    pub id: ObjectId,
    /// The failed node that held its primary.
    pub dead: NodeId,
    /// The generation of `dead` that failed: a node whose view lists a later generation of
    /// that id knows the failed one is gone, though it never saw it fail.
    pub dead_generation: u32,
    /// The epoch of the orphan's binding at the failed node.
    pub epoch: u32,
    /// The version of `state`.
    pub version: u64,
    /// The confirmed full state.
    pub state: Vec<u8>,
    /// The per-writer logs `state` contains, if this holder backed the object up.
    pub logs: Vec<(NodeId, WriterLog)>,
    /// `logs` came with `state` from its primary (the holder backed the object up): a
    /// resend of a write the state contains is recognised. False: no log is known, and
    /// `logs` is empty.
    pub logged: bool,
}

/// Why an adoption step was refused. Peers can cause every case; none changes any state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdoptError {
    /// No confirmed replica of the object is held here.
    #[error("no replica of {0} is held here")]
    NotHeld(ObjectId),
    /// The object is not bound to the failed node as far as this node knows.
    #[error("{id} is bound to {known:?}, not to the failed node {dead}")]
    NotOrphan {
        /// The object.
        id: ObjectId,
        /// The node said to have failed.
        dead: NodeId,
        /// What this node knows.
        known: Binding,
    },
    /// The object is already a primary here.
    #[error("{0} is already a primary here")]
    AlreadyPrimary(ObjectId),
    /// The object is not a primary here, or it is being migrated.
    #[error("{0} is not a primary here, or is being migrated")]
    NotPrimary(ObjectId),
    /// An offered state did not decode.
    #[error("offered state of {0} does not decode")]
    Undecodable(ObjectId),
    /// This node deleted the object lately (as its primary, or told by its primary).
    #[error("{0} was deleted here lately")]
    Deleted(ObjectId),
}

impl<O: GameObject> ReplicaManager<O> {
    /// A member joined (or came back under a new generation): it takes part from now on
    /// (broadcast mode subscribes it to every primary; backups are recomputed).
    pub fn member_up(&mut self, id: NodeId) {
        if id == self.me {
            return;
        }
        if let Err(at) = self.peers.binary_search(&id) {
            self.peers.insert(at, id);
        }
        if self.mode == super::Mode::Broadcast {
            for m in self.prim.values_mut() {
                m.subscribers.insert(id, Time::MAX);
            }
        }
        self.recompute_backups();
    }

    /// A member failed or left: forget its streams, subscriptions and pending fetches,
    /// recompute backups, and return the replicas held here whose primary was on it — the
    /// orphans this node may adopt or offer.
    ///
    /// The logs of the writes it made stay: a member declared down while alive (muted,
    /// partitioned) rejoins and resends its unacknowledged writes, which a forgotten log
    /// would apply a second time (fault swarm, `--faults all` seed 515). A later
    /// incarnation numbers its writes in a new generation, which resets its log
    /// ([`WriterLog::record`]).
    pub fn member_down(&mut self, id: NodeId) -> Vec<ObjectId> {
        if id == self.me {
            return Vec::new();
        }
        if let Ok(at) = self.peers.binary_search(&id) {
            self.peers.remove(at);
        }
        self.net.remove(&id);
        self.silence.forget(id);
        for m in self.prim.values_mut() {
            m.subscribers.remove(&id);
            m.receivers.remove(&id);
        }
        // Its writes held for frozen primaries go: unacknowledged, they may be lost (a
        // live writer resends them).
        for held in self.buffered.values_mut() {
            held.retain(|fw| fw.writer != id);
        }
        self.deferred.retain(|d| d.writer != id);
        self.forget_durable_writer(id);
        self.fetching.retain(|_, (_, n)| *n != id);
        // Bindings learned here that name it, for objects not held here: dead now.
        let unheld: Vec<ObjectId> = self
            .names
            .learned_at(id)
            .filter(|o| self.store.get(*o).is_none())
            .collect();
        for o in unheld {
            if self.failed_bindings.len() >= super::MAX_REFUSED_UNHELD {
                self.failed_bindings.clear();
            }
            let b = self.names.resolve(o).binding(self.me);
            self.failed_bindings.insert(o, b);
        }
        self.recompute_backups();
        self.release_deferred_acks();
        let mut orphans = Vec::new();
        for o in self.orphans_of(id) {
            // A replica fetched from a node the name service here had already moved past
            // (a stale location from discovery): the object lives on where it is bound, so
            // follow that node instead of treating it as an orphan (fault swarm, crashes
            // seed 267). Not if that binding is the stale one: the node it names said it does
            // not hold the object (`on_not_primary`), and the replica was fetched from the
            // node that served it instead. Followed again, the named node relayed every
            // offer and adopted nothing: an orphan dropped by every holder (a joiner that
            // never learned the binding, fault swarm, crashes seed 638).
            let named = self.names.resolve(o).binding(self.me);
            if named.node != id
                && named.node != self.me
                && self.failed_bindings.get(&o) != Some(&named)
                && self.peers.binary_search(&named.node).is_ok()
                && self.rebind_replica(o, named.node)
            {
                if let Some(m) = self.repl.get_mut(&o) {
                    m.adopted = true;
                }
                self.fetching.insert(o, (Time::ZERO, named.node));
                self.peer(named.node)
                    .interest
                    .push(InterestItem { id: o, have: 0 });
                continue;
            }
            orphans.push(o);
        }
        orphans
    }

    /// Replicas held here whose primary is on `node`.
    pub fn orphans_of(&self, node: NodeId) -> Vec<ObjectId> {
        self.store
            .iter()
            .filter(|(_, e)| e.role == Role::Replica { primary: node })
            .map(|(id, _)| id)
            .collect()
    }

    /// Where this node believes `id`'s primary is bound.
    pub fn binding_of(&self, id: ObjectId) -> Binding {
        match self.store.get(id).map(|e| e.role) {
            Some(Role::Primary) => Binding {
                node: self.me,
                epoch: self.names.local_epoch(id),
            },
            Some(Role::Replica { primary }) => Binding {
                node: primary,
                epoch: self.names.resolve(id).binding(self.me).epoch,
            },
            None => self.names.resolve(id).binding(self.me),
        }
    }

    /// True if the binding this node knows for `id` (which it does not hold) names a member
    /// that failed after this node learned it: that holder's primary went with it. A node
    /// that learned a binding from a member that then failed (and came back as a new
    /// generation with nothing) would otherwise keep refusing the states and notices of
    /// the object's live primary whenever that primary's binding does not outrank the dead
    /// one — a rival of the same epoch that ranks lower, or an older epoch the other side
    /// of a partition kept (fault swarm, `--faults all` seed 313).
    pub fn binding_failed(&self, id: ObjectId) -> bool {
        self.store.get(id).is_none() && self.failed_bindings.get(&id) == Some(&self.binding_of(id))
    }

    /// True if this node knows the epoch [`ReplicaManager::binding_of`] gives for `id` (a
    /// local primary, or a binding bound, forwarded or learned here), rather than presuming
    /// the creator's epoch 0 (a replica whose primary never announced a later epoch here,
    /// or an object never heard of).
    pub fn knows_binding(&self, id: ObjectId) -> bool {
        self.prim.contains_key(&id) || self.names.knows(id)
    }

    /// Checks that `id` is an orphan of `dead` here and returns the epoch of that binding.
    fn orphan_epoch(&self, id: ObjectId, dead: NodeId) -> Result<u32, AdoptError> {
        if self.prim.contains_key(&id) {
            return Err(AdoptError::AlreadyPrimary(id));
        }
        let known = self.binding_of(id);
        if known.node != dead {
            return Err(AdoptError::NotOrphan { id, dead, known });
        }
        Ok(known.epoch)
    }

    /// Adopts the orphan `id` of the failed node `dead` from the replica held here: its
    /// confirmed state becomes a primary bound here under the next epoch. Returns the new
    /// binding (to announce).
    pub fn adopt(&mut self, now: Time, id: ObjectId, dead: NodeId) -> Result<Binding, AdoptError> {
        let epoch = self.orphan_epoch(id, dead)?;
        let Some((version, object, logs)) = self
            .logged_state(id)
            .map(|(v, o, l)| (v, o.clone(), l.unwrap_or_default()))
        else {
            return Err(AdoptError::NotHeld(id));
        };
        // The jump starts from the newest version held here, not the (possibly older)
        // logged state adopted: the failed primary produced that one too, and a version
        // going back here would name two states (fault swarm, `--faults all` seed 10).
        let (held, since) = self
            .store
            .get(id)
            .map_or((version, now), |e| (e.version.max(version), e.updated_at));
        let next = self.adoption_version(held, since, now);
        let binding = self.install_adopted(now, id, epoch + 1, next, object, logs);
        self.stats.adopted += 1;
        Ok(binding)
    }

    /// What this node offers the adopter of `id` (an orphan of `dead`, whose generation
    /// `dead_generation` failed), if it holds a confirmed replica.
    pub fn offer(&self, id: ObjectId, dead: NodeId, dead_generation: u32) -> Option<OrphanOffer> {
        let epoch = self.orphan_epoch(id, dead).ok()?;
        let (version, object, logs) = self.logged_state(id)?;
        let mut state = Vec::new();
        object.encode_state(&mut state);
        Some(OrphanOffer {
            id,
            dead,
            dead_generation,
            epoch,
            version,
            state,
            logs: logs.clone().unwrap_or_default(),
            logged: logs.is_some(),
        })
    }

    /// Adopts an orphan from the best `offer` received: one this node holds no replica of,
    /// or whose replica here has no log (see [`ReplicaManager::has_logged_state`]), which
    /// the offered state replaces.
    pub fn adopt_offer(&mut self, now: Time, offer: &OrphanOffer) -> Result<Binding, AdoptError> {
        if self.prim.contains_key(&offer.id) {
            return Err(AdoptError::AlreadyPrimary(offer.id));
        }
        // A primary that deleted the object while it held an offer for it (a rival binding
        // that failed, to rebind past) would bring it back under a version below the ones
        // it sent, naming two states (fault swarm, `--faults all` seed 203).
        if self.tombstones.contains(now, offer.id) {
            return Err(AdoptError::Deleted(offer.id));
        }
        let known = self.binding_of(offer.id);
        // This node may know nothing of the object: then the offer's binding stands.
        if known.node != offer.dead && known.epoch >= offer.epoch {
            return Err(AdoptError::NotOrphan {
                id: offer.id,
                dead: offer.dead,
                known,
            });
        }
        let object = O::decode_state(&offer.state).map_err(|_| AdoptError::Undecodable(offer.id))?;
        let epoch = offer.epoch.max(known.epoch);
        // The offer's age is unknown here: allow for the collection window and more.
        let since = Time::from_micros(now.as_micros().saturating_sub(2_000_000));
        // Above the replica held here too, if it is fresher than the offer.
        let held = self
            .store
            .get(offer.id)
            .map_or(offer.version, |e| e.version.max(offer.version));
        let next = self.adoption_version(held, since, now);
        let binding = self.install_adopted(now, offer.id, epoch + 1, next, object, offer.logs.clone());
        self.stats.adopted_from_offer += 1;
        Ok(binding)
    }

    /// Adopts the orphan of `offer` by keeping the primary this node already holds: the
    /// object lived on here under a binding no later than the offer's while a concurrent
    /// holder (the other side of a partition) took it under `offer.epoch` and then failed.
    /// The offerers follow that failed binding, which outranks this node's, so they would
    /// refuse this primary's states for good and drop their replicas as orphans nobody
    /// adopted (fault swarm, `--faults all` seeds 313, 314). This node adopts that orphan
    /// (the node decides when: `node::adoption`): it keeps its own state (running, and
    /// holding the writes it acknowledged) and binds it under the epoch after the offer's,
    /// which the adoption notices carry past every binding the offerers know. Returns the
    /// new binding (to announce).
    pub fn supersede(&mut self, offer: &OrphanOffer) -> Result<Binding, AdoptError> {
        let id = offer.id;
        if !self.prim.contains_key(&id) || self.frozen.contains(&id) {
            return Err(AdoptError::NotPrimary(id));
        }
        let known = self.binding_of(id);
        if known.epoch > offer.epoch {
            return Err(AdoptError::NotOrphan {
                id,
                dead: offer.dead,
                known,
            });
        }
        let epoch = offer.epoch.saturating_add(1);
        self.names.bind_local(id, epoch);
        Ok(Binding { node: self.me, epoch })
    }

    /// The first version of an adopted primary whose confirmed state had `version` and was
    /// received at `since`: above every version the failed primary can have produced since.
    pub(super) fn adoption_version(&self, version: u64, since: Time, now: Time) -> u64 {
        let rate = if self.cfg.max_version_rate > 0.0 {
            self.cfg.max_version_rate
        } else {
            100.0
        };
        let elapsed = now.saturating_since(since).as_secs_f64() + 1.0;
        version
            .saturating_add((rate * elapsed).ceil().min(1e12) as u64)
            .saturating_add(1)
    }

    fn install_adopted(
        &mut self,
        now: Time,
        id: ObjectId,
        epoch: u32,
        version: u64,
        object: O,
        logs: Vec<(NodeId, WriterLog)>,
    ) -> Binding {
        let mut encoding = Vec::new();
        object.encode_state(&mut encoding);
        if !self.store.promote(id, object.clone(), version, now) {
            let _ = self.store.insert_primary(id, object.clone(), version, now);
        }
        if let Some(e) = self.store.get_mut(id) {
            e.state_time = now;
        }
        self.repl.remove(&id);
        self.fetching.remove(&id);
        let subscribers = self.initial_subscribers();
        let mut meta = PrimaryMeta::new(version, &object, encoding, subscribers);
        meta.backups = self.backups_for(id);
        // The adopted state contains exactly these writes: its backups get them with it.
        meta.logs = Some((version, logs.clone()));
        self.prim.insert(id, meta);
        self.applied.insert(id, logs.into_iter().collect());
        self.names.bind_local(id, epoch);
        // This node's own writes to the orphan now apply here, each once.
        self.send_pending_to(now, id);
        Binding { node: self.me, epoch }
    }

    /// The node `from` announces it adopted `id` as `binding` (the node has checked that
    /// `from` is the adopter its membership view agrees on). This node follows: a replica
    /// held here is re-fetched from the new primary, pending writes go there. If this node
    /// adopted the same orphan itself, the higher epoch wins, then the higher rendezvous
    /// score; the loser gives its primary up. Returns whether the announcement stands.
    pub fn learn_adoption(
        &mut self,
        now: Time,
        from: NodeId,
        id: ObjectId,
        binding: Binding,
    ) -> super::MovedOutcome {
        use super::MovedOutcome;
        if binding.node != from || from == self.me {
            self.stats.moved_refused += 1;
            return MovedOutcome::Refused;
        }
        let known = self.binding_of(id);
        let wins = binding.epoch > known.epoch
            || (binding.epoch == known.epoch
                && known.node != binding.node
                && rendezvous::score(id, binding.node) > rendezvous::score(id, known.node))
            || (known.node != binding.node && self.binding_failed(id));
        if known == binding {
            return MovedOutcome::Superseded;
        }
        if !wins {
            // Older, or a rival adoption that loses: the winner's own notice reaches its
            // rival (which then gives up); acknowledge so the loser stops resending.
            return if self.prim.contains_key(&id) {
                MovedOutcome::Refused
            } else {
                MovedOutcome::Superseded
            };
        }
        let demoted = self.prim.contains_key(&id);
        if demoted {
            self.demote(now, id);
            if self.frozen.remove(&id) {
                // It was migrating: the new binding says the move (or an adoption) won.
                // Writes held for it follow it; the migration is dropped (`Migrator`).
                for fw in self.buffered.remove(&id).unwrap_or_default() {
                    self.outgoing.push((binding.node, fw));
                }
            }
        }
        self.names.learn_over(id, binding);
        self.stats.adoptions_learned += 1;
        if self.rebind_replica(id, binding.node) {
            // The adopter's first full state jumps versions (see the module docs): let it in.
            if let Some(m) = self.repl.get_mut(&id) {
                m.adopted = true;
            }
            self.fetching.insert(id, (now, binding.node));
            self.peer(binding.node)
                .interest
                .push(InterestItem { id, have: 0 });
        } else if self.store.get(id).is_none()
            && (self.refused_unheld.remove(&id) == Some(binding.node)
                || (demoted && self.recovered.remove(&id))
                || self.mode == super::Mode::Broadcast)
        {
            // The new primary's state reached this node before this binding and was refused
            // (not from the node it was bound to), and the primary counts it as delivered
            // once the packet is acknowledged: ask for it (fault swarm, crashes seed 454: a
            // static object, never sent again). Likewise after giving up a primary here:
            // the winner's updates to this node were refused while it held the object
            // (a copy recovered from this node's store that lost to an adoption made while
            // it was down: swarm seeds 112, 119, 375 with persistence). And in a broadcast
            // world, where every member replicates everything, whenever it is not held here:
            // the winner counted the states this node refused as a rival as delivered
            // (`--faults all` seed 313), or this node dropped its replica as an orphan
            // nobody had adopted yet, after its primary had counted it delivered (seed
            // 9980): an object that no longer changes was never sent again.
            self.fetching.insert(id, (now, binding.node));
            self.peer(binding.node)
                .interest
                .push(InterestItem { id, have: 0 });
        }
        self.send_pending_to(now, id);
        MovedOutcome::Accepted
    }

    /// The replica `id`, bound here to `from` under an epoch that named `from`'s previous
    /// generation (which failed), is now held by `from`'s new generation under that same
    /// binding: fetch its state afresh from there (the new primary's versions need not
    /// continue the old one's, so the next full state may jump). Returns false if `id` is
    /// not a replica bound to `from` here.
    pub fn follow_new_generation(&mut self, now: Time, id: ObjectId, from: NodeId) -> bool {
        if from == self.me
            || !matches!(self.store.get(id).map(|e| e.role), Some(Role::Replica { primary }) if primary == from)
        {
            return false;
        }
        if let Some(m) = self.repl.get_mut(&id) {
            m.adopted = true;
        }
        self.fetching.insert(id, (now, from));
        self.peer(from).interest.push(InterestItem { id, have: 0 });
        self.send_pending_to(now, id);
        self.stats.adoptions_learned += 1;
        true
    }

    /// Gives up the local primary `id` (another node's adoption of it won). The object's
    /// state here is discarded; interest fetches it again from the winner if it is wanted.
    fn demote(&mut self, _now: Time, id: ObjectId) {
        self.prim.remove(&id);
        self.applied.remove(&id);
        self.deferred.retain(|d| d.id != id);
        self.names.unbind(id);
        self.store.remove(id);
        self.repl.remove(&id);
        self.stats.demoted += 1;
    }

    /// Drops the orphan replica `id` (the game's policy despawns it, or nobody adopted it
    /// in time).
    pub fn drop_orphan(&mut self, id: ObjectId) -> bool {
        if self
            .store
            .get(id)
            .is_some_and(|e| matches!(e.role, Role::Replica { .. }))
        {
            self.remove_replica(id);
            self.names.forget(id);
            self.stats.orphans_dropped += 1;
            return true;
        }
        false
    }

    /// Every local primary and replica, dropped at once: this node was declared failed by
    /// the others, who adopted its primaries; it comes back as a new member.
    pub fn reset(&mut self) -> Vec<ObjectId> {
        let ids: Vec<ObjectId> = self.store.iter().map(|(id, _)| id).collect();
        let peers = std::mem::take(&mut self.peers);
        let me = self.me;
        let mode = self.mode;
        let cfg = self.cfg.clone();
        let generation = self.generation;
        let stats = std::mem::take(&mut self.stats);
        *self = ReplicaManager::new(me, mode, cfg, peers);
        self.generation = generation;
        self.stats = stats;
        ids
    }
}
