//! The node state machine.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use worldmesh_core::wire::{self, Codec, Frame, MAX_PAYLOAD};
use worldmesh_core::{Aabb, DetRng, MessageClass, NodeId, ObjectId, Point3, Time};
use worldmesh_replica::{
    GameObject, Mode, ObjectStore, Packet, ReplicaConfig, ReplicaManager, ReplicaMsg, Role,
};

use crate::adoption::{Adoption, AdoptionConfig};
use crate::control::{self, Channel};
use crate::drain::{Drain, DrainConfig};
use crate::instance::InstanceHost;
use crate::membership::{Departure, Member, Membership, MembershipConfig};
use crate::migration::{MigrationConfig, MigrationEvent, MigrationMsg, Migrator, StartError};
use crate::persist::{
    PersistConfig, PersistRequest, PersistStats, Persistence, RecoverError, RecoveryReport, Release,
};
use crate::stats::{NodeStats, NodeSummary, Rejection};

mod cluster;
use worldmesh_locator::{Locator, Op as LocatorPortOp};

/// Static configuration of a node.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    /// This node.
    pub id: NodeId,
    /// Every other member of the cluster (static membership).
    pub peers: Vec<NodeId>,
    /// Time between frames (10 Hz by default, as the Quake-like model game; paper `000` §4.1).
    pub frame_interval: Duration,
    /// How replicas are chosen: broadcast (every node holds everything) or interest-driven.
    pub mode: Mode,
    /// Replica-manager tuning (delta history, soft-state timers, payload limit).
    pub replica: ReplicaConfig,
    /// Seed of the node's random stream (think functions use it).
    pub seed: u64,
    /// Migration protocol tuning and this node's primary capacity (paper `001` §3.2, §7.4).
    pub migration: MigrationConfig,
    /// This node's generation (incarnation): 0 for a node of a world that never restarts; a
    /// node that restarts with the same id uses a higher one (see `core::ObjectId`).
    pub generation: u32,
    /// Dynamic membership (SWIM, [`crate::membership`]): members join, fail and leave, and a
    /// failed member's objects are adopted ([`crate::adoption`]). `None` keeps the member
    /// list fixed to `peers`, as in the papers' experiments.
    pub membership: Option<MembershipConfig>,
    /// The address other members reach this node at (advertised through membership;
    /// `None`: a simulated address).
    pub address: Option<SocketAddr>,
    /// Adoption tuning (with dynamic membership).
    pub adoption: AdoptionConfig,
    /// Drain tuning.
    pub drain: DrainConfig,
    /// Persistence (issue 19, [`crate::persist`]): the node emits store batches
    /// ([`Node::poll_persist`]) and holds durable writes' acknowledgements until they are
    /// on disk. `None`: nothing is persisted.
    pub persist: Option<PersistConfig>,
}

impl NodeConfig {
    /// A broadcast-mode configuration with default timers for node `id` among `peers`.
    pub fn new(id: NodeId, peers: Vec<NodeId>, seed: u64) -> Self {
        Self {
            id,
            peers,
            frame_interval: Duration::from_millis(100),
            mode: Mode::Broadcast,
            replica: ReplicaConfig::default(),
            seed,
            migration: MigrationConfig::default(),
            generation: 0,
            membership: None,
            address: None,
            adoption: AdoptionConfig::default(),
            drain: DrainConfig::default(),
            persist: None,
        }
    }

    /// The same configuration in another mode.
    pub fn with_mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }
}

/// A datagram the driver must send (the one type of every machine, `worldmesh_core`).
pub use worldmesh_core::Transmit;

/// What the node asks of the object locator each frame (paper `000` §3 "Object location").
/// In oracle mode the driver hands these to a global index; the distributed locator
/// consumes them inside the node instead.
#[derive(Clone, Debug, PartialEq)]
pub enum LocatorOp {
    /// Publish a primary's naming attributes.
    Publish {
        /// The object.
        id: ObjectId,
        /// Its position.
        pos: Point3,
        /// Its type tag.
        kind: u8,
        /// Where it expects to be after the interest lead time, when that is elsewhere: a
        /// predictive publication (paper `000` §6.2), matched like the position so nodes
        /// it is about to reach discover it early.
        ahead: Option<Point3>,
    },
    /// Subscribe with a primary's area of interest.
    Subscribe {
        /// The subscribing object.
        owner: ObjectId,
        /// The area of interest.
        region: Aabb,
    },
}

/// Something that happened inside the node.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A local primary was created.
    PrimaryCreated {
        /// The object.
        id: ObjectId,
    },
    /// A local primary deleted itself.
    PrimaryDeleted {
        /// The object.
        id: ObjectId,
    },
    /// A replica was dropped (interest ended, primary deleted, primary's node silent).
    ReplicaDropped {
        /// The object.
        id: ObjectId,
    },
    /// The migration protocol reported something (paper `001` §3.2).
    Migration(MigrationEvent),
    /// A datagram was refused.
    Rejected {
        /// The sender.
        from: NodeId,
        /// Why.
        reason: Rejection,
    },
    /// A member joined or came back (dynamic membership).
    MemberUp(Member),
    /// A member left or failed (dynamic membership): [`Departure`] says which.
    MemberDown(Member, Departure),
    /// This node is known to the cluster: it has joined.
    Joined,
    /// The others declared this node failed while it was alive; it dropped everything it
    /// held (they adopted its primaries) and came back as its next generation.
    Rejoined(Member),
    /// A players'-layer message from member `from` (`control::Channel::Players`): for the
    /// session table beside the node.
    Players {
        /// The member.
        from: NodeId,
        /// The message.
        payload: Vec<u8>,
    },
    /// This node adopted an orphan of a failed member (see [`crate::adoption`]).
    Adopted {
        /// The object.
        id: ObjectId,
        /// The failed member.
        dead: NodeId,
        /// The epoch of the new binding.
        epoch: u32,
        /// The version of the adopted state.
        version: u64,
    },
    /// An orphan was dropped: its policy despawns it, or nobody adopted it in time.
    OrphanDropped {
        /// The object.
        id: ObjectId,
        /// The failed member.
        dead: NodeId,
    },
    /// A drain finished: every primary left (or the deadline passed) and the node left the
    /// cluster. `left_behind` primaries were still here.
    Drained {
        /// Primaries still held when the node left (0 after a complete drain).
        left_behind: usize,
    },
}

/// True if `id` is in `members` (ascending, distinct). Node ids are dense in most
/// clusters, so a member's entry is usually at index `id` or `id - 1` (the ids below it,
/// less this node's): those are tried before the binary search, which then only runs for
/// sparse ids and non-members. One cache line per datagram instead of a search's eight.
fn is_member(members: &[NodeId], id: NodeId) -> bool {
    let k = id.0 as usize;
    let at = |i: usize| members.get(i) == Some(&id);
    at(k) || k.checked_sub(1).is_some_and(at) || members.binary_search(&id).is_ok()
}

/// Events kept when the driver does not drain them; older ones are dropped beyond this.
const MAX_QUEUED_EVENTS: usize = 4096;

/// The worldmesh node: a sans-IO state machine around a [`ReplicaManager`].
pub struct Node<O: GameObject> {
    config: NodeConfig,
    world: Arc<O::World>,
    replicas: ReplicaManager<O>,
    rng: DetRng,
    frame: u64,
    last_frame: Option<Time>,
    next_frame: Time,
    transmits: VecDeque<Transmit>,
    events: VecDeque<Event>,
    locator_ops: Vec<LocatorOp>,
    codec: Codec,
    stats: NodeStats,
    instances: InstanceHost,
    migrator: Migrator,
    locator: Option<Locator>,
    /// Reused buffer for measuring update messages (see `send_packets`).
    scratch: Vec<u8>,
    /// Live members other than this node, sorted (the fixed `peers` without membership).
    members: Vec<NodeId>,
    /// SWIM membership, if dynamic.
    membership: Option<Membership>,
    /// The adoption protocol (idle without membership).
    adoption: Adoption,
    /// A drain in progress.
    drain: Option<Drain>,
    /// Membership counters for the summary.
    cluster: crate::stats::ClusterSummary,
    /// Persistence, if on.
    persist: Option<Persistence>,
}

impl<O: GameObject> Node<O> {
    /// A node that runs its first frame at `now`.
    pub fn new(mut config: NodeConfig, world: Arc<O::World>, now: Time) -> Self {
        // Sorted and deduplicated: membership checks are binary searches.
        config.peers.sort_unstable();
        config.peers.dedup();
        config.peers.retain(|p| *p != config.id);
        let rng = DetRng::new(config.seed).fork(u64::from(config.id.0));
        let mut migrator = Migrator::new(config.id, config.migration.clone());
        if config.persist.is_some() {
            migrator.set_persisting();
        }
        let mut replica_cfg = config.replica.clone();
        if replica_cfg.max_version_rate > 0.0 {
            // At most a version per frame (plus migrations): twice the frame rate is ample.
            let hz = 1.0 / config.frame_interval.as_secs_f64().max(1e-6);
            replica_cfg.max_version_rate = replica_cfg.max_version_rate.max(2.0 * hz + 20.0);
        }
        if config.membership.is_some() {
            // SWIM decides failures; the replicas of a failed member are what adoption needs.
            replica_cfg.drop_silent_peers = false;
        }
        if config.persist.is_some() {
            replica_cfg.hold_durable_acks = true;
        }
        let persist = config.persist.clone().map(Persistence::new);
        let mut replicas = ReplicaManager::new(config.id, config.mode, replica_cfg, config.peers.clone());
        replicas.set_generation(config.generation);
        let instances = InstanceHost::new(config.id, config.seed);
        let members = config.peers.clone();
        let adoption = Adoption::new(config.adoption.clone());
        Self {
            config,
            world,
            replicas,
            rng,
            frame: 0,
            last_frame: None,
            next_frame: now,
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            locator_ops: Vec::new(),
            codec: Codec::new(),
            instances,
            stats: NodeStats {
                origin: now,
                ..NodeStats::default()
            },
            migrator,
            locator: None,
            scratch: Vec::new(),
            members,
            membership: None,
            adoption,
            drain: None,
            cluster: Default::default(),
            persist,
        }
        .with_membership(now)
    }

    /// This node's id.
    pub fn id(&self) -> NodeId {
        self.config.id
    }

    /// The generation this node runs as (renewed on [`Event::Rejoined`]).
    pub fn generation(&self) -> u32 {
        self.config.generation
    }

    /// The configuration.
    pub fn config(&self) -> &NodeConfig {
        &self.config
    }

    /// The local store (primaries and replicas), read-only.
    pub fn store(&self) -> &ObjectStore<O> {
        self.replicas.store()
    }

    /// The replica manager (for its counters and receiver sets).
    pub fn replicas(&self) -> &ReplicaManager<O> {
        &self.replicas
    }

    /// Counters.
    pub fn stats(&self) -> &NodeStats {
        &self.stats
    }

    /// Frames run so far.
    pub fn frame(&self) -> u64 {
        self.frame
    }

    /// When the next frame is due (a driver measures how late frames start against it).
    pub fn next_frame(&self) -> Time {
        self.next_frame
    }

    /// The node's random stream (used by game setup code to place initial objects).
    pub fn rng(&mut self) -> &mut DetRng {
        &mut self.rng
    }

    /// The static world.
    pub fn world(&self) -> &Arc<O::World> {
        &self.world
    }

    /// Creates a primary on this node and returns its id.
    pub fn spawn(&mut self, now: Time, object: O) -> ObjectId {
        let id = self.replicas.spawn(now, object);
        self.push_event(Event::PrimaryCreated { id });
        id
    }

    /// Writes to object `target` from outside the frame loop (e.g. a player's input that
    /// reached the embedding game): authoritative if it is a local primary, else applied
    /// tentatively and forwarded to its primary's node with the next frame's packets
    /// (see `ReplicaManager::write`).
    pub fn write(&mut self, now: Time, target: ObjectId, write: &O::Write) {
        self.replicas.write(now, target, write);
    }

    /// The game instances this node takes part in (paper `003` failover), read-only.
    pub fn instances(&self) -> &InstanceHost {
        &self.instances
    }

    /// The game instances, mutably (to join one).
    pub fn instances_mut(&mut self) -> &mut InstanceHost {
        &mut self.instances
    }

    /// When the node wants [`Node::handle_timeout`] called next: the earliest of its next
    /// frame, its instances' next tick, its locator's and its membership's timers.
    pub fn poll_timeout(&self) -> Option<Time> {
        let mut t = self
            .instances
            .poll_timeout()
            .map_or(self.next_frame, |t| t.min(self.next_frame));
        if let Some(l) = self.locator.as_ref().and_then(Locator::poll_timeout) {
            t = t.min(l);
        }
        if let Some(m) = self.membership.as_ref().and_then(Membership::poll_timeout) {
            t = t.min(m);
        }
        Some(t)
    }

    /// The next datagram to send, if any.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Takes the locator operations queued by the last frame (interest mode only).
    pub fn take_locator_ops(&mut self) -> Vec<LocatorOp> {
        std::mem::take(&mut self.locator_ops)
    }

    /// Drains the locator operations queued by the last frame (interest mode only), like
    /// [`Node::take_locator_ops`] but keeping the buffer for the next frame.
    pub fn drain_locator_ops(&mut self) -> std::vec::Drain<'_, LocatorOp> {
        self.locator_ops.drain(..)
    }

    /// Advances timers: runs a frame when one is due.
    pub fn handle_timeout(&mut self, now: Time) {
        self.membership_timeout(now);
        self.activate_recovered(now);
        if now >= self.next_frame {
            self.run_frame(now);
            while self.next_frame <= now {
                self.next_frame += self.config.frame_interval;
            }
        }
        self.instances.handle_timeout(now);
        self.flush_instances(now);
        if let Some(loc) = &mut self.locator
            && loc.poll_timeout().is_some_and(|t| t <= now)
        {
            loc.handle_timeout(now);
            self.pump_locator(now);
        }
    }

    /// Attaches the distributed object locator (paper `000` §3, §6): from now on the
    /// node's publications and subscriptions go to it instead of
    /// [`Node::take_locator_ops`], and its discoveries are handled here.
    pub fn attach_locator(&mut self, locator: Locator) {
        self.locator = Some(locator);
    }

    /// The attached distributed locator, if any.
    pub fn locator(&self) -> Option<&Locator> {
        self.locator.as_ref()
    }

    /// Sends the locator's datagrams and handles its discoveries.
    fn pump_locator(&mut self, now: Time) {
        let mut found = Vec::new();
        let mut pushes = Vec::new();
        if let Some(loc) = &mut self.locator {
            while let Some(t) = loc.poll_transmit() {
                self.stats.on_send(now, t.class, t.datagram.len());
                self.transmits.push_back(Transmit {
                    dst: t.dst,
                    class: t.class,
                    datagram: t.datagram,
                });
            }
            while let Some(d) = loc.poll_discovery() {
                found.push(d);
            }
            while let Some(p) = loc.poll_push() {
                pushes.push(p);
            }
        }
        for p in pushes {
            if self.replicas.push_to(now, p.subscriber, p.object) {
                let packets = self.replicas.flush_peer(now, p.subscriber);
                self.send_packets(now, packets.into_iter().map(|x| (p.subscriber, x)).collect());
            }
        }
        for d in found {
            self.handle_discovery(now, d.object, d.primary, d.pos);
        }
    }

    /// Queues the instances' Control datagrams.
    /// Sends a players'-layer message to member `to` (see [`Event::Players`]). Dropped
    /// (false) if it does not fit a datagram.
    pub fn send_players(&mut self, now: Time, to: NodeId, payload: &[u8]) -> bool {
        let Ok(datagram) = control::frame(Channel::Players, payload) else {
            return false;
        };
        self.stats.on_send(now, MessageClass::Control, datagram.len());
        self.transmits.push_back(Transmit {
            dst: to,
            class: MessageClass::Control,
            datagram,
        });
        true
    }

    fn flush_instances(&mut self, now: Time) {
        while let Some((dst, datagram)) = self.instances.poll_transmit() {
            self.stats.on_send(now, MessageClass::Control, datagram.len());
            self.transmits.push_back(Transmit {
                dst,
                class: MessageClass::Control,
                datagram,
            });
        }
    }

    /// The locator matched a publication of `id` (primary on `primary`, at `pos`) with one
    /// of this node's subscriptions.
    pub fn handle_discovery(&mut self, now: Time, id: ObjectId, primary: NodeId, pos: Point3) {
        if self.replicas.on_discovered(now, id, primary, pos, &self.world) {
            let packets = self.replicas.flush_peer(now, primary);
            self.send_packets(now, packets.into_iter().map(|p| (primary, p)).collect());
        }
    }

    /// Handles a datagram from `from`. Never panics: anything malformed or not allowed is
    /// dropped and counted.
    pub fn handle_datagram(&mut self, now: Time, from: NodeId, datagram: &[u8]) {
        let frame = match Frame::parse(datagram, MAX_PAYLOAD) {
            Ok(f) => f,
            Err(e) => {
                self.stats
                    .traffic
                    .on_receive(MessageClass::Control, datagram.len());
                self.reject(from, Rejection::BadFrame((&e).into()));
                return;
            }
        };
        self.stats.traffic.on_receive(frame.class, datagram.len());
        let control = (frame.class == MessageClass::Control)
            .then(|| control::split(frame.payload))
            .flatten();
        // SWIM talks to nodes that are not (or no longer) members: joiners, restarted ones.
        let swim = matches!(control, Some((Channel::Membership, _))) && self.membership.is_some();
        if !swim && !is_member(&self.members, from) {
            self.reject(from, Rejection::NotMember);
            return;
        }
        if let Some(m) = &mut self.membership {
            m.heard(now, from);
        }
        // Each subsystem owns the datagrams of its class.
        match frame.class {
            MessageClass::ObjectUpdate => self.on_replica_datagram(now, from, &frame),
            MessageClass::Control => match control {
                Some((Channel::Instance, payload)) => {
                    if self.instances.handle_payload(now, from, payload).is_err() {
                        self.reject(from, Rejection::Refused(MessageClass::Control));
                    }
                    self.flush_instances(now);
                }
                Some((Channel::Membership, payload)) if self.membership.is_some() => {
                    self.on_membership_datagram(now, from, payload);
                }
                Some((Channel::Membership, _)) => {
                    self.reject(from, Rejection::NoHandler(MessageClass::Control))
                }
                Some((Channel::Players, payload)) => self.push_event(Event::Players {
                    from,
                    payload: payload.to_vec(),
                }),
                None => self.reject(from, Rejection::BadPayload(MessageClass::Control)),
            },
            MessageClass::Migration => self.on_migration_datagram(now, from, &frame),
            MessageClass::LocatorRouting | MessageClass::MatchDelivery | MessageClass::OverlayMaintenance
                if self.locator.is_some() =>
            {
                if let Some(loc) = &mut self.locator {
                    loc.handle_datagram(now, from, datagram);
                }
                self.pump_locator(now);
            }
            other => self.reject(from, Rejection::NoHandler(other)),
        }
    }

    /// Replica management: a [`Packet`] for the replica manager.
    fn on_replica_datagram(&mut self, now: Time, from: NodeId, frame: &Frame<'_>) {
        let packet = match Packet::decode(frame.payload) {
            Ok(p) => p,
            Err(_) => {
                self.reject(from, Rejection::BadPayload(MessageClass::ObjectUpdate));
                return;
            }
        };
        if self.replicas.handle_packet(now, from, packet, &self.world) {
            let packets = self.replicas.flush_peer(now, from);
            self.send_packets(now, packets.into_iter().map(|p| (from, p)).collect());
        }
        self.tell_rivals(now);
        self.send_migration_side_effects(now);
    }

    fn reject(&mut self, from: NodeId, reason: Rejection) {
        if matches!(reason, Rejection::BadFrame(_) | Rejection::BadPayload(_)) {
            self.stats.malformed += 1;
        }
        self.stats.rejections.count(reason);
        self.push_event(Event::Rejected { from, reason });
    }

    fn run_frame(&mut self, now: Time) {
        self.frame += 1;
        self.stats.frames += 1;
        let dt = self.last_frame.map_or(self.config.frame_interval, |t| now - t);
        self.last_frame = Some(now);
        let report = self.replicas.frame(now, dt, &mut self.rng, self.world.as_ref());
        for id in report.spawned {
            self.push_event(Event::PrimaryCreated { id });
        }
        for id in report.deleted {
            self.push_event(Event::PrimaryDeleted { id });
        }
        for id in report.dropped {
            self.push_event(Event::ReplicaDropped { id });
        }
        if self.config.mode == Mode::Interest {
            self.locator_ops.clear();
            for (id, e) in self.replicas.store().primaries() {
                self.locator_ops.push(LocatorOp::Publish {
                    id,
                    pos: e.object.position(),
                    kind: e.object.kind(),
                    ahead: self.replicas.position_ahead(id, &self.world),
                });
                if let Some(region) = self
                    .replicas
                    .predicted_interest(id, &self.world)
                    .or_else(|| e.object.interest(&self.world))
                {
                    self.locator_ops.push(LocatorOp::Subscribe { owner: id, region });
                }
            }
            if let Some(loc) = &mut self.locator {
                let ops = std::mem::take(&mut self.locator_ops)
                    .into_iter()
                    .map(|op| match op {
                        LocatorOp::Publish { id, pos, kind, ahead } => {
                            LocatorPortOp::Publish { id, pos, kind, ahead }
                        }
                        LocatorOp::Subscribe { owner, region } => LocatorPortOp::Subscribe { owner, region },
                    });
                loc.apply_ops(now, ops);
                self.pump_locator(now);
            }
        }
        let mut out = Vec::new();
        self.migrator.on_frame(now, &self.replicas, &mut out);
        self.send_migration(now, out);
        self.cluster_frame(now);
        self.send_migration_side_effects(now);
        self.persist_frame(now);
        let packets = self.replicas.flush(now);
        self.send_packets(now, packets);
    }

    /// Installs the objects recovered for after the join, once due
    /// ([`Node::recover_after_join`]).
    fn activate_recovered(&mut self, now: Time) {
        let Some(due) = self.persist.as_ref().and_then(|p| p.deferred_due()) else {
            return;
        };
        if now < due {
            // Asked again until due (at most once per fetch back-off each): the question
            // sent as this node joined may reach a member that does not know it yet and
            // drops it (fault swarm, `--faults all` seed 7865).
            self.probe_deferred(now);
            return;
        }
        let Some(p) = &mut self.persist else {
            return;
        };
        let membership = self.membership.as_ref();
        let waited: Vec<ObjectId> = p.deferred_ids().collect();
        let installed = p.activate_due(now, &mut self.replicas, |w| {
            membership.and_then(|m| m.identity(w)).map(|m| m.generation)
        });
        for id in waited {
            self.replicas.unpin(id);
        }
        for id in installed {
            self.push_event(Event::PrimaryCreated { id });
        }
    }

    /// Starts migration `ids` → `target` (paper `001` §3.2). With persistence, the transfer
    /// waits until the region's records and in-doubt markers are on disk.
    pub(crate) fn start_migration(
        &mut self,
        now: Time,
        ids: &[ObjectId],
        target: NodeId,
    ) -> Result<u64, StartError> {
        let mut out = Vec::new();
        let mig = self
            .migrator
            .start(now, &mut self.replicas, &self.members, ids, target, &mut out)?;
        if let Some(p) = &mut self.persist {
            let membership = self.membership.as_ref();
            let held = p.migrating(
                now,
                self.frame,
                &mut self.replicas,
                |w| membership.and_then(|m| m.identity(w)).map_or(0, |m| m.generation),
                mig,
                ids,
                target,
            );
            if !held {
                self.migrator.release_transfer(now, mig, &self.replicas, &mut out);
            }
        }
        self.send_migration(now, out);
        Ok(mig)
    }

    /// Regions bound here by the last migration message: with persistence, their `Accept`
    /// waits until their records are on disk.
    fn persist_bound(&mut self, now: Time) {
        let bound = self.migrator.take_newly_bound();
        if bound.is_empty() {
            return;
        }
        let mut out = Vec::new();
        for (key, ids) in bound {
            let held = match &mut self.persist {
                Some(p) => {
                    let membership = self.membership.as_ref();
                    p.bound(
                        now,
                        self.frame,
                        &mut self.replicas,
                        |w| membership.and_then(|m| m.identity(w)).map_or(0, |m| m.generation),
                        key,
                        &ids,
                    )
                }
                None => false,
            };
            if !held {
                let ids = self.migrator.release_accept(key, &mut out);
                self.announce_migrated_in(now, &ids, &mut out);
            }
        }
        self.send_migration(now, out);
    }

    /// Objects bound here whose `Accept` went out: every member learns their binding (with
    /// membership; see `Adoption::migrated_in`). With persistence this waits for the
    /// records to be on disk, as the `Accept` does: the notice makes the old node give its
    /// copy up.
    fn announce_migrated_in(&mut self, now: Time, ids: &[ObjectId], out: &mut Vec<(NodeId, MigrationMsg)>) {
        if self.membership.is_some() && !ids.is_empty() {
            let me = self.config.id;
            self.adoption
                .migrated_in(now, me, &self.members, &self.replicas, ids, out);
        }
    }

    /// Recovered objects in doubt (their migration may have reached its target's store)
    /// are migrated there again once the target is a member; recovered forwarding entries
    /// are announced to the members.
    fn persist_redrive(&mut self, now: Time) {
        let Some(p) = &mut self.persist else {
            return;
        };
        let members = &self.members;
        let membership = self.membership.as_ref();
        let due = p.take_redrive(
            now,
            &mut self.replicas,
            |n| members.binary_search(&n).is_ok(),
            |w| membership.and_then(|m| m.identity(w)).map(|m| m.generation),
        );
        let unannounced = if self.members.is_empty() {
            Vec::new()
        } else {
            p.take_unannounced()
        };
        for (target, ids) in due {
            for id in &ids {
                self.push_event(Event::PrimaryCreated { id: *id });
            }
            // The target is a member and the objects are primaries here: this starts.
            let _ = self.start_migration(now, &ids, target);
        }
        if !unannounced.is_empty() {
            let mut out = Vec::new();
            let lone = self.migrator.announce(now, &self.members, &unannounced, &mut out);
            for id in lone {
                self.replicas.release_forwarding(id, now);
            }
            self.send_migration(now, out);
        }
    }

    /// Queues the frame's store batch, if persistence is on and something changed.
    fn persist_frame(&mut self, now: Time) {
        self.persist_redrive(now);
        let Some(p) = &mut self.persist else {
            return;
        };
        let membership = self.membership.as_ref();
        p.after_frame(now, self.frame, &mut self.replicas, |w| {
            membership.and_then(|m| m.identity(w)).map_or(0, |m| m.generation)
        });
    }

    /// The next store batch to apply (persistence on), if any. The driver applies batches
    /// in order, off the frame's thread, and reports each with [`Node::handle_persisted`].
    pub fn poll_persist(&mut self) -> Option<PersistRequest> {
        self.persist.as_mut().and_then(Persistence::poll)
    }

    /// Store batch `id` (and every earlier one) is on disk: the durable writes it logged
    /// are acknowledged to their writers with the next packets.
    /// (`_now` keeps the shape of every other input; acknowledgements go out with the
    /// next frame's packets.)
    pub fn handle_persisted(&mut self, now: Time, id: u64) {
        let Some(p) = &mut self.persist else {
            return;
        };
        let mut out = Vec::new();
        for r in p.persisted(id, &mut self.replicas) {
            match r {
                Release::Transfer(mig) => self.migrator.release_transfer(now, mig, &self.replicas, &mut out),
                Release::Accept(key) => {
                    let ids = self.migrator.release_accept(key, &mut out);
                    self.announce_migrated_in(now, &ids, &mut out);
                }
            }
        }
        self.send_migration(now, out);
    }

    /// Queues a checkpoint batch now (outside the frame loop): every changed primary of
    /// the `Checkpointed` and `Durable` classes, and the checkpoint marker. A driver calls
    /// it when it stops, so a planned stop loses nothing.
    pub fn checkpoint(&mut self, now: Time) {
        if let Some(p) = &mut self.persist {
            p.checkpoint_next();
        }
        self.persist_frame(now);
    }

    /// Store batches requested and not yet reported done.
    pub fn persist_pending(&self) -> usize {
        self.persist.as_ref().map_or(0, Persistence::pending)
    }

    /// Persistence counters (persistence on).
    pub fn persist_stats(&self) -> Option<&PersistStats> {
        self.persist.as_ref().map(Persistence::stats)
    }

    /// Brings back what this node's store holds (see [`crate::persist`]): call once,
    /// before the first frame and before spawning anything. Every stored primary is
    /// installed under its stored epoch at a version above any its previous incarnation
    /// can have produced; writers' logs wait for the writers to be seen as members.
    pub fn recover(
        &mut self,
        now: Time,
        recovered: worldmesh_store::Recovered,
    ) -> Result<RecoveryReport, RecoverError> {
        self.recover_with(now, recovered, None)
    }

    /// [`Node::recover`] for a node that rejoins a **running** world: the stored primaries
    /// are installed only `settle` after the node joined the cluster (`Event::Joined`),
    /// and only those the world has not moved on from while the node was down — not
    /// adopted or migrated under a later epoch, not held here as a replica by then (the
    /// adopters announce their adoptions to a member that comes up). Until then nothing
    /// of them is sent, so no replica ever follows a stale copy and then the adopter's.
    /// Without dynamic membership this is [`Node::recover`].
    pub fn recover_after_join(
        &mut self,
        now: Time,
        recovered: worldmesh_store::Recovered,
        settle: Duration,
    ) -> Result<RecoveryReport, RecoverError> {
        let settle = self.membership.is_some().then_some(settle);
        self.recover_with(now, recovered, settle)
    }

    fn recover_with(
        &mut self,
        now: Time,
        recovered: worldmesh_store::Recovered,
        settle: Option<Duration>,
    ) -> Result<RecoveryReport, RecoverError> {
        let membership = self.membership.is_some();
        let Some(p) = &mut self.persist else {
            return Err(RecoverError::Disabled);
        };
        let report = p.recover(now, &mut self.replicas, recovered, membership, settle)?;
        // Members already live (a configured member list is assumed up at construction).
        if let Some(m) = &self.membership {
            for w in m.live() {
                p.member_up(w.node, w.generation, &mut self.replicas);
            }
        }
        let ids: Vec<ObjectId> = self.replicas.store().primary_ids();
        for id in ids {
            self.push_event(Event::PrimaryCreated { id });
        }
        Ok(report)
    }

    /// Encodes and queues packets, counting them.
    fn send_packets(&mut self, now: Time, packets: Vec<(NodeId, Packet)>) {
        for (dst, packet) in packets {
            let updates = packet.msgs.iter().find(|m| matches!(m, ReplicaMsg::Update(_)));
            let items = match updates {
                Some(ReplicaMsg::Update(u)) => u.len(),
                _ => 0,
            };
            // The encoded size of the update message alone needs a second encoding: sample
            // one packet in eight (deterministically) to keep the hot path cheap.
            if let Some(m) = updates
                && self
                    .stats
                    .frames
                    .wrapping_add(self.stats.update_packet_count)
                    .is_multiple_of(8)
            {
                // The update message alone: what it adds to a packet (its encoding without
                // any packet head).
                self.scratch.clear();
                m.encode_into(&mut self.scratch);
                self.stats.update_msg_bytes_sampled += self.scratch.len() as u64;
                self.stats.update_items_sampled += items as u64;
            }
            if items > 0 {
                self.stats.update_packet_count += 1;
            }
            match wire::frame_with(MessageClass::ObjectUpdate, packet.size_hint(), |out| {
                packet.encode_into(out)
            }) {
                Ok(d) => {
                    self.stats.on_send(now, MessageClass::ObjectUpdate, d.len());
                    if items > 0 {
                        self.stats.update_items += items as u64;
                        self.stats.update_packet_bytes +=
                            d.len() as u64 + worldmesh_core::traffic::UDP_IPV4_OVERHEAD;
                    }
                    self.transmits.push_back(Transmit {
                        dst,
                        class: MessageClass::ObjectUpdate,
                        datagram: d,
                    });
                }
                Err(_) => {
                    let me = self.config.id;
                    self.reject(me, Rejection::Encode(MessageClass::ObjectUpdate));
                }
            }
        }
    }

    fn push_event(&mut self, e: Event) {
        if self.events.len() >= MAX_QUEUED_EVENTS {
            self.events.pop_front();
        }
        self.events.push_back(e);
    }

    /// Ages (now − primary's send time of the version held), in ms, of the replicas that
    /// received an update in the last second: objects that are changing. (A replica of an
    /// object that does not change is current however old its version is, and the node
    /// cannot tell those apart from stale ones without asking the primary; the simulator
    /// measures staleness against the primaries exactly.)
    pub fn replica_ages_ms(&self, now: Time) -> Vec<f64> {
        self.store()
            .iter()
            .filter(|(_, e)| matches!(e.role, Role::Replica { .. }))
            .filter(|(_, e)| now - e.updated_at <= Duration::from_secs(1))
            .map(|(_, e)| (now - e.state_time).as_secs_f64() * 1000.0)
            .collect()
    }

    /// This node's summary for a run that lasted `duration_s` seconds and ends at `now`.
    pub fn summary(&self, now: Time, duration_s: f64) -> NodeSummary {
        self.summary_window(now, 0.0, duration_s)
    }

    /// This node's summary with bandwidth measured over `[from_s, to_s)` of its run.
    pub fn summary_window(&self, now: Time, from_s: f64, to_s: f64) -> NodeSummary {
        let mut s = NodeSummary::new(
            self.config.id,
            &self.stats,
            (from_s, to_s),
            self.store().primary_count(),
            self.store().replica_count(),
            &self.replica_ages_ms(now),
        );
        s.rejected_states = self.replicas.stats().refused_updates + self.replicas.stats().undecodable;
        s.replica = self.replicas.stats().clone();
        s.cluster = self.cluster_summary();
        s
    }
}

/// Migration and the name service (paper `001` §3): the node's side of [`Migrator`].
impl<O: GameObject> Node<O> {
    /// Migrates the local primaries `ids` (a region, moved as a unit) to `target`
    /// (paper `001` §3.2 steps 1–2; the rest follows from messages). Returns the migration
    /// number; completion arrives as [`Event::Migration`].
    pub fn migrate(&mut self, now: Time, ids: &[ObjectId], target: NodeId) -> Result<u64, StartError> {
        self.start_migration(now, ids, target)
    }

    /// Looks up where `id`'s primary is bound, following forwarding entries across nodes;
    /// the answer arrives as an [`Event::Migration`] ([`MigrationEvent::Lookup`]).
    pub fn lookup(&mut self, now: Time, id: ObjectId) {
        let mut out = Vec::new();
        if let Some(e) = self.migrator.lookup(now, &self.replicas, id, &mut out) {
            self.push_event(Event::Migration(e));
        }
        self.send_migration(now, out);
    }

    /// The migration protocol's state and counters.
    pub fn migrator(&self) -> &Migrator {
        &self.migrator
    }

    /// A `MessageClass::Migration` datagram.
    fn on_migration_datagram(&mut self, now: Time, from: NodeId, frame: &Frame<'_>) {
        let msg: MigrationMsg = match self.codec.decode(frame) {
            Ok(m) => m,
            Err(_) => {
                self.reject(from, Rejection::BadPayload(MessageClass::Migration));
                return;
            }
        };
        let msg = match msg {
            MigrationMsg::Adopted(_) | MigrationMsg::Offer(_) => {
                self.on_adoption_msg(now, from, msg);
                return;
            }
            MigrationMsg::MovedAck(acks) => {
                self.adoption.on_acks(from, &acks);
                MigrationMsg::MovedAck(acks)
            }
            m => m,
        };
        let mut out = Vec::new();
        let mut events = Vec::new();
        self.migrator.handle(
            now,
            &mut self.replicas,
            &self.members,
            from,
            msg,
            &mut out,
            &mut events,
        );
        for e in events {
            self.note_refusal(&e);
            if let (Some(_), None, MigrationEvent::Bound { ids, .. }) = (&self.membership, &self.persist, &e)
            {
                let me = self.config.id;
                self.adoption
                    .migrated_in(now, me, &self.members, &self.replicas, ids, &mut out);
            }
            self.push_event(Event::Migration(e));
        }
        self.send_migration(now, out);
        self.persist_bound(now);
        self.send_migration_side_effects(now);
    }

    /// Writes the replica manager passes on to migrated objects' new hosts, and `Moved`
    /// hints for interest registrations that reached a forwarding entry.
    fn send_migration_side_effects(&mut self, now: Time) {
        if !self.replicas.has_forwarding_work() {
            return;
        }
        let mut out = Vec::new();
        let mut fwd: std::collections::BTreeMap<NodeId, Vec<_>> = std::collections::BTreeMap::new();
        for (dst, w) in self.replicas.take_outgoing() {
            fwd.entry(dst).or_default().push(w);
        }
        for (dst, ws) in fwd {
            if dst != self.config.id {
                out.push((dst, MigrationMsg::Forward(ws)));
            }
        }
        for (dst, id, b) in self.replicas.take_redirects() {
            out.push((dst, MigrationMsg::Moved(vec![(id, b)])));
        }
        self.send_migration(now, out);
    }

    /// Encodes and queues migration messages (counted as `MessageClass::Migration`).
    pub(crate) fn send_migration(&mut self, now: Time, msgs: Vec<(NodeId, MigrationMsg)>) {
        for (dst, msg) in msgs {
            match self.codec.encode(MessageClass::Migration, &msg) {
                Ok(d) => {
                    self.stats.on_send(now, MessageClass::Migration, d.len());
                    self.transmits.push_back(Transmit {
                        dst,
                        class: MessageClass::Migration,
                        datagram: d,
                    });
                }
                Err(_) => {
                    let me = self.config.id;
                    self.reject(me, Rejection::Encode(MessageClass::Migration));
                }
            }
        }
    }
}

/// The placement loop (paper `001` §7.4): the driver calls [`Node::run_placement`] as often
/// as it likes (e.g. after every frame); the activation policy decides when core selection
/// actually runs.
impl<O: GameObject> Node<O> {
    /// Evaluates the placement of this node's region (its live primaries) against the other
    /// members with `placement`'s policy and `oracle`'s latencies, players located by their
    /// [`crate::Located::client_location`]; on a decision to move, starts the migration.
    /// Returns what the loop decided.
    pub fn run_placement(
        &mut self,
        now: Time,
        placement: &mut crate::Placement,
        oracle: &dyn crate::LatencyOracle,
    ) -> Result<crate::PlacementOutcome, crate::placement::PlacementError>
    where
        O: crate::Located,
    {
        self.run_placement_by(now, placement, oracle, &O::client_location)
    }

    /// [`Node::run_placement`] with players located by `locate` (e.g. by their player id,
    /// as the session table does).
    pub fn run_placement_by(
        &mut self,
        now: Time,
        placement: &mut crate::Placement,
        oracle: &dyn crate::LatencyOracle,
        locate: &dyn Fn(&O) -> Option<u32>,
    ) -> Result<crate::PlacementOutcome, crate::placement::PlacementError> {
        let outcome = placement.evaluate_by(now, &self.replicas, &self.members, oracle, locate)?;
        if let crate::PlacementOutcome::Migrate(d) = &outcome {
            // A refused start (the region moved or froze meanwhile) is the placement
            // loop's to retry: nothing was sent.
            let _ = self.migrate(now, &d.region, d.target);
        }
        Ok(outcome)
    }
}

/// The node as the engine drives it (`worldmesh_core::Machine`): the inherent methods of
/// the same names, which the real runtime calls, do the work.
impl<O: GameObject> worldmesh_core::Machine for Node<O> {
    type Datagram = Vec<u8>;
    type Event = Event;

    fn handle_datagram(&mut self, now: Time, from: NodeId, datagram: Vec<u8>) {
        Node::handle_datagram(self, now, from, &datagram);
    }

    fn handle_timeout(&mut self, now: Time) {
        Node::handle_timeout(self, now);
    }

    fn poll_transmit(&mut self) -> Option<Transmit> {
        Node::poll_transmit(self)
    }

    fn poll_timeout(&self) -> Option<Time> {
        Node::poll_timeout(self)
    }

    fn poll_event(&mut self) -> Option<Event> {
        Node::poll_event(self)
    }
}

#[cfg(test)]
mod is_member_tests {
    use super::*;

    /// The guesses never change the answer: dense, sparse and empty member lists.
    #[test]
    fn agrees_with_a_binary_search() {
        let lists: [Vec<u32>; 4] = [
            (0..64).filter(|i| *i != 17).collect(),
            vec![1, 2, 3, 9, 40, 41, 1000],
            Vec::new(),
            (1..300).collect(),
        ];
        for list in lists {
            let members: Vec<NodeId> = list.into_iter().map(NodeId).collect();
            for id in (0..1100).chain([u32::MAX - 1, u32::MAX]).map(NodeId) {
                assert_eq!(
                    is_member(&members, id),
                    members.binary_search(&id).is_ok(),
                    "{id:?}"
                );
            }
        }
    }
}
