//! The node's side of dynamic membership: SWIM datagrams and timers, what a member joining
//! or failing changes in every subsystem (replica manager, locator ring, migrations,
//! instances), adoption of a failed member's objects, and draining before a planned stop.

use std::net::SocketAddr;

use worldmesh_core::{MessageClass, NodeId, ObjectId, Time};
use worldmesh_replica::GameObject;

use super::{Event, Node, Transmit};
use crate::adoption::AdoptionEvent;
use crate::control::{self, Channel};
use crate::drain::{Drain, DrainState};
use crate::membership::{Departure, Member, Membership, MembershipError, MembershipEvent, View};
use crate::migration::{MigrationEvent, MigrationMsg, RefuseReason};
use crate::stats::{ClusterSummary, Rejection};

impl<O: GameObject> Node<O> {
    /// Starts SWIM if the configuration asks for it, with the configured peers assumed up.
    pub(super) fn with_membership(mut self, now: Time) -> Self {
        let Some(cfg) = self.config.membership.clone() else {
            return self;
        };
        let me = self.identity();
        let rng = self.rng.fork(0x5357_494d); // "SWIM"
        match Membership::new(me, &cfg, rng) {
            Ok(mut m) => {
                let peers: Vec<Member> = self
                    .config
                    .peers
                    .iter()
                    .map(|p| Member::simulated(*p, 0))
                    .collect();
                if !peers.is_empty() {
                    m.assume_up(now, &peers);
                }
                self.membership = Some(m);
                self.pump_membership(now);
            }
            Err(_) => {
                // Validated by the configuration loaders; fall back to the fixed list.
                self.config.membership = None;
            }
        }
        self
    }

    /// This node's identity as a member.
    pub fn identity(&self) -> Member {
        match self.config.address {
            Some(addr) => Member {
                node: self.config.id,
                generation: self.config.generation,
                addr,
            },
            None => Member::simulated(self.config.id, self.config.generation),
        }
    }

    /// Live members other than this node, sorted.
    pub fn members(&self) -> &[NodeId] {
        &self.members
    }

    /// The membership protocol, if dynamic.
    pub fn membership(&self) -> Option<&Membership> {
        self.membership.as_ref()
    }

    /// Where member `node` can be reached, as last advertised (dynamic membership).
    pub fn member_addr(&self, node: NodeId) -> Option<SocketAddr> {
        self.membership.as_ref()?.identity(node).map(|m| m.addr)
    }

    /// Joins a running world through `seeds` (their identities, e.g. from the transport's
    /// handshake with each seed address). The locator, if any, joins the ring through the
    /// first seed.
    pub fn join(&mut self, now: Time, seeds: &[Member]) {
        if let Some(m) = &mut self.membership {
            m.join(now, seeds);
        }
        if let (Some(loc), Some(s)) = (&mut self.locator, seeds.iter().find(|s| s.node != self.config.id)) {
            loc.member_up(s.node);
            loc.join(now, s.node);
        }
        self.pump_membership(now);
        self.pump_locator(now);
    }

    /// Starts a graceful drain (see [`crate::drain`]): every primary migrates away, then the
    /// node leaves. Progress arrives as events; [`Event::Drained`] ends it.
    pub fn drain(&mut self, now: Time) {
        if self.drain.is_none() {
            self.drain = Some(Drain::new(self.config.drain.clone(), now));
            self.migrator.set_draining();
        }
    }

    /// Where a drain is, if one was started.
    pub fn drain_state(&self) -> Option<DrainState> {
        self.drain.as_ref().map(Drain::state)
    }

    /// Leaves the cluster at once (no migration): the membership tells the others and the
    /// locator hands its ring range to its successor. Primaries still here become orphans
    /// the others adopt (use [`Node::drain`] to move them first).
    pub fn leave(&mut self, now: Time) {
        if let Some(loc) = &mut self.locator {
            loc.leave(now);
        }
        if let Some(m) = &mut self.membership {
            m.leave(now);
        }
        self.pump_locator(now);
        self.pump_membership(now);
    }

    /// A member (`by`, if known) refused this node's connection because it holds
    /// `generation` of this node declared down, and saw the cluster as `theirs` (the
    /// transport says so, `TransportEvent::DeclaredDown` in `worldmesh-net`). If this node
    /// still runs as that generation and its own side of a split (if this is one) does not
    /// win, it renews it, drops everything as on any rejoin ([`Event::Rejoined`]) and
    /// joins again as the next one ([`Membership::declared_down`] has the rule).
    /// Without it, a node stalled past the suspicion timeout, or cut off by the network
    /// until both sides declared the other failed, ran on as a second world for good.
    pub fn handle_declared_down(
        &mut self,
        now: Time,
        generation: u32,
        by: Option<NodeId>,
        theirs: Option<View>,
    ) {
        let Some(m) = &mut self.membership else { return };
        if m.declared_down(now, generation, by, theirs) {
            self.pump_membership(now);
        }
    }

    /// What this node sees of the cluster (dynamic membership): to send with a refusal.
    pub fn view(&self) -> Option<View> {
        self.membership.as_ref().map(Membership::view)
    }

    pub(super) fn membership_timeout(&mut self, now: Time) {
        if let Some(m) = &mut self.membership
            && m.poll_timeout().is_some_and(|t| t <= now)
        {
            m.handle_timeout(now);
            self.pump_membership(now);
        }
    }

    pub(super) fn on_membership_datagram(&mut self, now: Time, from: NodeId, payload: &[u8]) {
        let Some(m) = &mut self.membership else { return };
        match m.handle_datagram(now, from, payload) {
            Ok(()) => {}
            Err(MembershipError::Impersonation { .. }) => self.reject(from, Rejection::Impersonation),
            Err(MembershipError::Malformed(_)) => {
                self.reject(from, Rejection::BadPayload(MessageClass::Control))
            }
            Err(_) => self.reject(from, Rejection::Refused(MessageClass::Control)),
        }
        self.pump_membership(now);
    }

    /// Sends SWIM's datagrams and applies its membership changes.
    pub(super) fn pump_membership(&mut self, now: Time) {
        loop {
            let Some(m) = &mut self.membership else { return };
            let mut sends = Vec::new();
            while let Some(t) = m.poll_transmit() {
                sends.push(t);
            }
            let mut changes = Vec::new();
            while let Some(e) = m.poll_event() {
                changes.push(e);
            }
            if sends.is_empty() && changes.is_empty() {
                return;
            }
            for (dst, payload) in sends {
                match control::frame(Channel::Membership, &payload) {
                    Ok(d) => {
                        self.stats.on_send(now, MessageClass::Control, d.len());
                        self.transmits.push_back(Transmit {
                            dst,
                            class: MessageClass::Control,
                            datagram: d,
                        });
                    }
                    Err(_) => {
                        let me = self.config.id;
                        self.reject(me, Rejection::Encode(MessageClass::Control));
                    }
                }
            }
            for e in changes {
                self.on_membership_event(now, e);
            }
        }
    }

    fn on_membership_event(&mut self, now: Time, e: MembershipEvent) {
        match e {
            MembershipEvent::Up(m) => self.member_up(now, m),
            MembershipEvent::Down(m, why) => self.member_down(now, m, why),
            MembershipEvent::Active => {
                if let Some(p) = &mut self.persist {
                    p.joined(now);
                }
                self.probe_deferred(now);
                self.push_event(Event::Joined)
            }
            MembershipEvent::Idle => {}
            MembershipEvent::Rejoined(m) => self.rejoined(now, m),
        }
    }

    /// Recovered objects still waiting for the cluster to settle: the member each one is
    /// bound to is asked for it. A live primary answers with its state (the replica it
    /// leaves here tells [`crate::persist`] the world moved on, and the stored copy is not
    /// installed); a member that does not hold it says so. Without the question, a copy
    /// this node adopted on the wrong side of a partition (its primary was alive) and
    /// stored before crashing came back as a second primary, under a later epoch, that
    /// nothing resolved in an interest-managed world, where the two primaries send each
    /// other nothing (fault swarm, `--faults all` seed 3662).
    pub(super) fn probe_deferred(&mut self, now: Time) {
        let Some(p) = &self.persist else { return };
        let ids: Vec<ObjectId> = p.deferred_ids().collect();
        for id in ids {
            self.replicas.pin(id);
            self.replicas.probe_binding(now, id);
        }
    }

    /// Senders of updates for objects held here as primary learn this node's binding.
    pub(super) fn tell_rivals(&mut self, now: Time) {
        let rivals = self.replicas.take_rivals();
        if rivals.is_empty() || self.membership.is_none() {
            return;
        }
        let mut out = Vec::new();
        self.adoption.tell_rivals(now, &self.replicas, rivals, &mut out);
        self.send_migration(now, out);
    }

    fn member_up(&mut self, now: Time, m: Member) {
        if m.node == self.config.id {
            return;
        }
        if let Err(at) = self.members.binary_search(&m.node) {
            self.members.insert(at, m.node);
        }
        self.replicas.member_up(m.node);
        if let Some(p) = &mut self.persist {
            p.member_up(m.node, m.generation, &mut self.replicas);
        }
        self.probe_deferred(now);
        if let Some(loc) = &mut self.locator {
            loc.member_up(m.node);
        }
        self.cluster.members_up += 1;
        self.push_event(Event::MemberUp(m));
        let mut out = Vec::new();
        self.adoption
            .member_up(now, &self.replicas, m.node, m.generation, &mut out);
        self.send_migration(now, out);
    }

    fn member_down(&mut self, now: Time, m: Member, why: Departure) {
        if m.node == self.config.id {
            return;
        }
        let Ok(at) = self.members.binary_search(&m.node) else {
            return;
        };
        self.members.remove(at);
        match why {
            Departure::Left => {
                self.cluster.members_down += 1;
                self.cluster.members_left += 1;
            }
            Departure::Failed => self.cluster.members_down += 1,
            // This node started its membership afresh; the member did not go.
            Departure::Forgotten => {}
        }
        self.push_event(Event::MemberDown(m, why));
        // Every subsystem stops counting on it.
        let mut events = Vec::new();
        self.migrator.member_down(&mut self.replicas, m.node, &mut events);
        for e in events {
            if let (Some(d), MigrationEvent::Refused { target, .. }) = (&mut self.drain, &e) {
                d.avoid(*target);
            }
            self.push_event(Event::Migration(e));
        }
        if let Some(loc) = &mut self.locator {
            loc.member_down(now, m.node);
        }
        self.instances.member_down(now, m.node);
        self.flush_instances(now);
        // Its primaries are orphans: adopt, offer, or drop them.
        let orphans = self.replicas.member_down(m.node);
        let mut out = Vec::new();
        let mut events = Vec::new();
        let me = self.config.id;
        self.adoption.member_down(
            now,
            me,
            &self.members,
            &mut self.replicas,
            (m.node, m.generation),
            orphans,
            &mut out,
            &mut events,
        );
        self.after_adoption(now, out, events);
        self.pump_locator(now);
    }

    /// The others declared this node failed and adopted its primaries: drop everything and
    /// carry on as the next generation (objects it creates from now on carry it).
    fn rejoined(&mut self, now: Time, m: Member) {
        self.config.generation = m.generation;
        self.adoption.rejoined(self.config.id);
        let dropped = self.replicas.reset();
        self.replicas.set_generation(m.generation);
        if let Some(p) = &mut self.persist {
            p.renewed(m.generation);
        }
        for id in dropped {
            self.push_event(Event::PrimaryDeleted { id });
        }
        self.push_event(Event::Rejoined(m));
        let _ = now;
    }

    pub(super) fn on_adoption_msg(&mut self, now: Time, from: NodeId, msg: MigrationMsg) {
        let me = self.config.id;
        if self.membership.is_none() {
            self.reject(from, Rejection::NoHandler(MessageClass::Migration));
            return;
        }
        match msg {
            MigrationMsg::Offer(offers) => {
                self.adoption
                    .on_offers(now, me, &self.members, &self.replicas, from, offers);
            }
            MigrationMsg::Adopted(items) => {
                let acks = self
                    .adoption
                    .on_notices(now, me, &self.members, &mut self.replicas, from, items);
                if !acks.is_empty() {
                    self.send_migration(now, vec![(from, MigrationMsg::MovedAck(acks))]);
                }
                self.send_migration_side_effects(now);
                let packets = self.replicas.flush_peer(now, from);
                self.send_packets(now, packets.into_iter().map(|p| (from, p)).collect());
            }
            _ => {}
        }
    }

    fn after_adoption(&mut self, now: Time, out: Vec<(NodeId, MigrationMsg)>, events: Vec<AdoptionEvent>) {
        self.send_migration(now, out);
        for e in events {
            match e {
                AdoptionEvent::Adopted {
                    id,
                    dead,
                    binding,
                    version,
                } => {
                    self.push_event(Event::Adopted {
                        id,
                        dead,
                        epoch: binding.epoch,
                        version,
                    });
                }
                AdoptionEvent::Dropped { id, dead } => self.push_event(Event::OrphanDropped { id, dead }),
            }
        }
    }

    /// Per-frame upkeep of adoption and of a drain.
    pub(super) fn cluster_frame(&mut self, now: Time) {
        if self.membership.is_none() {
            return;
        }
        let me = self.config.id;
        let mut out = Vec::new();
        let mut events = Vec::new();
        self.adoption
            .on_frame(now, me, &self.members, &mut self.replicas, &mut out, &mut events);
        self.after_adoption(now, out, events);
        self.drain_frame(now);
    }

    fn drain_frame(&mut self, now: Time) {
        let Some(mut d) = self.drain.take() else { return };
        if d.state() == DrainState::Migrating {
            // Refusals since the last frame: avoid those targets.
            let frozen = self.replicas.frozen().clone();
            let idle: Vec<ObjectId> = self
                .replicas
                .store()
                .primary_ids()
                .into_iter()
                .filter(|id| !frozen.contains(id))
                .collect();
            if !idle.is_empty() {
                for (target, region) in d.plan(&idle, &self.members) {
                    if self.start_migration(now, &region, target).is_err() {
                        d.avoid(target);
                    }
                }
            }
        }
        let unacked = self.migrator.unacked_notices() + self.adoption.unacked();
        let leave = d.advance(
            now,
            self.replicas.store().primary_count(),
            self.migrator.in_flight(),
            unacked,
        );
        self.cluster.drained_regions = d.regions();
        self.drain = Some(d);
        if leave {
            let left_behind = self.replicas.store().primary_count();
            self.leave(now);
            self.push_event(Event::Drained { left_behind });
        }
    }

    /// A migration this node started was refused: a drain avoids that target.
    pub(super) fn note_refusal(&mut self, e: &MigrationEvent) {
        if let (Some(d), MigrationEvent::Refused { target, reason, .. }) = (&mut self.drain, e)
            && matches!(
                reason,
                RefuseReason::Capacity
                    | RefuseReason::TargetDown
                    | RefuseReason::Invalid
                    | RefuseReason::Draining
            )
        {
            d.avoid(*target);
        }
    }

    /// Membership and adoption figures (`None` with a fixed member list), as in
    /// [`NodeSummary::cluster`](crate::NodeSummary::cluster).
    pub fn cluster_summary(&self) -> Option<ClusterSummary> {
        let m = self.membership.as_ref()?;
        Some(ClusterSummary {
            members: m.live().count() + 1,
            generation: self.config.generation,
            local_health: m.local_health(),
            silent_suspicions: m.silent_suspicions(),
            downgraded_verdicts: m.downgraded_verdicts(),
            adoption: self.adoption.stats().clone(),
            ..self.cluster.clone()
        })
    }
}
