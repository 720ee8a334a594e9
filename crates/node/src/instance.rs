//! Game instances hosted with failover (paper `003` §3.2.1, Algorithms 3 and 4) inside a
//! node.
//!
//! An *instance* is a small game (an auxiliary game in paper `003`) served by one node
//! (`AG_x.S`, the host), with a replicated server on another node (`AG_x.RS`) that receives
//! the whole game state every tick, and players on other nodes. Every node taking part runs
//! one [`worldmesh_instances::failover::Peer`] for it; an [`InstanceHost`] holds the peers of
//! all the instances a node takes part in and is the node's Control-class component:
//!
//! - messages travel as [`MessageClass::Control`] datagrams ([`crate::instance_wire`]);
//!   a datagram for an instance this node is not in, from a node outside the instance's
//!   roster, or that does not decode is refused with a typed [`InstanceError`] and counted
//!   in [`InstanceStats`];
//! - time is an input: [`InstanceHost::poll_timeout`] is the earliest tick (or replica
//!   detection deadline) of its peers and [`InstanceHost::handle_timeout`] runs the peers
//!   that are due;
//! - a node that *plays* in an instance produces one input per tick
//!   ([`input_payload`], a deterministic function of seed, instance, node and sequence
//!   number, so a checker can recompute any player's input history without storing it)
//!   and sends its unconfirmed inputs to whichever server it currently follows. Redirection
//!   after a failover is the state machine's: a player adopts the server of a newer epoch
//!   as soon as it hears from it.
//!
//! The host records what happened ([`InstanceRecord`]: promotions, step-downs, redirections,
//! the first commit of a new server, the first confirmation a player receives in an epoch)
//! in a bounded log that simulators read to measure takeover times.
//!
//! [`MessageClass::Control`]: worldmesh_core::MessageClass::Control

use std::collections::{BTreeMap, VecDeque};

use worldmesh_core::wire::Codec;
use worldmesh_core::{MessageClass, NodeId, Time};
use worldmesh_instances::failover::{CLUSTER, Event as PeerEvent};
pub use worldmesh_instances::failover::{FailoverConfig, Peer, Progress, Role};

use crate::instance_wire::{ControlEnvelope, MAX_MEMBERS, WireMsg, WireMsgError};

/// Most instances one node takes part in.
pub const MAX_INSTANCES: usize = 256;
/// Records kept in [`InstanceHost::log`]; older ones are dropped.
pub const MAX_RECORDS: usize = 4096;

/// How one node takes part in a new instance (what Algorithm 2 decided).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceSpec {
    /// The instance.
    pub id: u32,
    /// Every node of the instance (host, replica, players, spares).
    pub members: Vec<NodeId>,
    /// The host (`AG_x.S`).
    pub server: NodeId,
    /// The replicated server (`AG_x.RS`).
    pub replica: Option<NodeId>,
    /// Successor ranking, best first (who becomes replica next).
    pub ranking: Vec<NodeId>,
    /// Whether this node plays (produces one input per tick).
    pub plays: bool,
    /// This node's first tick (drivers stagger them).
    pub first_tick: Time,
    /// Protocol timing.
    pub failover: FailoverConfig,
}

/// Why an instance could not be joined or a Control datagram was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InstanceError {
    /// The payload does not decode as a [`ControlEnvelope`].
    #[error("undecodable control datagram: {0}")]
    Decode(String),
    /// The decoded message breaks a limit.
    #[error("invalid failover message: {0}")]
    Invalid(#[from] WireMsgError),
    /// A message for an instance this node is not part of.
    #[error("no instance {0} on this node")]
    UnknownInstance(u32),
    /// A message from a node outside the instance's roster.
    #[error("{from} is not a member of instance {instance}")]
    NotMember {
        /// The sender.
        from: NodeId,
        /// The instance.
        instance: u32,
    },
    /// Joining: the instance is already hosted here.
    #[error("instance {0} already joined")]
    Duplicate(u32),
    /// Joining: too many instances, or members, or this node / the server not a member.
    #[error("bad instance spec: {0}")]
    Spec(String),
}

/// Counters of the instance component.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InstanceStats {
    /// Control messages handled by a peer.
    pub received: u64,
    /// Control messages sent.
    pub sent: u64,
    /// Datagrams refused (any [`InstanceError`] on receive).
    pub rejected: u64,
    /// Status reports to the cluster (Algorithm 3) produced; no cluster node exists in
    /// this model, so they are counted and dropped.
    pub status_reports: u64,
}

/// What happened to an instance on this node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstanceEvent {
    /// This node became server of `epoch` (Algorithm 4).
    Promoted {
        /// The new epoch.
        epoch: u64,
    },
    /// This node stopped serving: `epoch` is newer.
    SteppedDown {
        /// The newer epoch.
        epoch: u64,
    },
    /// This node became the replicated server.
    BecameReplica {
        /// The appointing server's epoch.
        epoch: u64,
    },
    /// As server, this node appointed a new replica.
    ReplicaAppointed {
        /// The new replica.
        replica: NodeId,
    },
    /// As server, this node dropped a silent member.
    MemberLeft {
        /// Who.
        member: NodeId,
    },
    /// This node follows a new server (a redirection after a failover).
    Redirected {
        /// The server now followed.
        server: NodeId,
        /// Its epoch.
        epoch: u64,
    },
    /// As server of `epoch`, this node committed its first tick (its new replica stored
    /// it and a majority knows its configuration): service is restored with durability.
    FirstCommit {
        /// The epoch.
        epoch: u64,
    },
    /// As a player, this node got its first input confirmation from the server of `epoch`.
    FirstConfirm {
        /// The epoch.
        epoch: u64,
    },
    /// As a player, this node heard no server for long: the instance is gone for it.
    InstanceLost,
    /// As replica, this node suspected its server and runs for server of `epoch`.
    Candidate {
        /// The epoch claimed.
        epoch: u64,
    },
}

/// One [`InstanceEvent`] with its time and instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InstanceRecord {
    /// When.
    pub at: Time,
    /// Which instance.
    pub instance: u32,
    /// What.
    pub event: InstanceEvent,
}

struct Slot {
    peer: Peer,
    /// Sorted node ids allowed to send for this instance.
    roster: Vec<u32>,
    plays: bool,
    /// `(server, epoch)` last followed.
    following: (Option<u32>, u64),
    /// Epoch of the last confirmation seen, and the confirmed sequence number.
    confirm_epoch: u64,
    confirmed: u64,
    /// Server: epoch awaiting its first commit, and the committed tick at promotion.
    await_commit: Option<(u64, u64)>,
}

/// The instances a node takes part in (see the module docs).
pub struct InstanceHost {
    node: NodeId,
    seed: u64,
    slots: BTreeMap<u32, Slot>,
    codec: Codec,
    out: VecDeque<(NodeId, Vec<u8>)>,
    log: VecDeque<InstanceRecord>,
    stats: InstanceStats,
}

impl std::fmt::Debug for InstanceHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InstanceHost")
            .field("node", &self.node)
            .field("instances", &self.slots.keys().collect::<Vec<_>>())
            .field("stats", &self.stats)
            .finish()
    }
}

/// The payload of input `seq` of `node` in `instance` under `seed` (a mixing hash: inputs
/// look random but any checker can recompute them).
pub fn input_payload(seed: u64, instance: u32, node: NodeId, seq: u64) -> u64 {
    let mut z = seed
        ^ (u64::from(instance) << 32 | u64::from(node.0)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ seq.wrapping_mul(0xD1B5_4A32_D192_ED03);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The progress (sequence number and digest) a server holds after applying the first `upto`
/// inputs of `node` in `instance`: what a correct state must contain.
pub fn expected_progress(seed: u64, instance: u32, node: NodeId, upto: u64) -> Progress {
    (1..=upto).fold(Progress::default(), |p, s| {
        p.apply(s, input_payload(seed, instance, node, s))
    })
}

impl InstanceHost {
    /// An empty host for `node`; `seed` determines the inputs its players produce.
    pub fn new(node: NodeId, seed: u64) -> Self {
        Self {
            node,
            seed,
            slots: BTreeMap::new(),
            codec: Codec::new(),
            out: VecDeque::new(),
            log: VecDeque::new(),
            stats: InstanceStats::default(),
        }
    }

    /// Takes part in a new instance.
    pub fn join(&mut self, spec: InstanceSpec) -> Result<(), InstanceError> {
        if self.slots.contains_key(&spec.id) {
            return Err(InstanceError::Duplicate(spec.id));
        }
        if self.slots.len() >= MAX_INSTANCES {
            return Err(InstanceError::Spec(format!(
                "more than {MAX_INSTANCES} instances"
            )));
        }
        let mut roster: Vec<u32> = spec.members.iter().map(|m| m.0).collect();
        roster.sort_unstable();
        roster.dedup();
        if roster.len() > MAX_MEMBERS || roster.contains(&CLUSTER) {
            return Err(InstanceError::Spec(format!(
                "at most {MAX_MEMBERS} members, none with id {CLUSTER}"
            )));
        }
        let listed = |n: NodeId| roster.binary_search(&n.0).is_ok();
        if !listed(self.node) || !listed(spec.server) || spec.replica.is_some_and(|r| !listed(r)) {
            return Err(InstanceError::Spec(
                "this node, the server and the replica must be members".into(),
            ));
        }
        let peer = Peer::new(
            self.node.0,
            spec.failover,
            roster.clone(),
            spec.server.0,
            spec.replica.map(|r| r.0),
            spec.ranking
                .iter()
                .map(|r| r.0)
                .filter(|r| roster.contains(r))
                .collect(),
            spec.first_tick,
        );
        let following = (peer.server(), peer.epoch());
        self.slots.insert(
            spec.id,
            Slot {
                peer,
                roster,
                plays: spec.plays,
                following,
                confirm_epoch: 0,
                confirmed: 0,
                await_commit: None,
            },
        );
        Ok(())
    }

    /// The failover peer of `instance` on this node, read-only.
    pub fn peer(&self, instance: u32) -> Option<&Peer> {
        self.slots.get(&instance).map(|s| &s.peer)
    }

    /// The instances this node takes part in.
    pub fn instances(&self) -> impl Iterator<Item = u32> + '_ {
        self.slots.keys().copied()
    }

    /// Whether this node plays in `instance`.
    pub fn plays(&self, instance: u32) -> bool {
        self.slots.get(&instance).is_some_and(|s| s.plays)
    }

    /// The seed of this host's inputs (see [`input_payload`]).
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Counters.
    pub fn stats(&self) -> &InstanceStats {
        &self.stats
    }

    /// What happened, oldest first (the last [`MAX_RECORDS`]).
    pub fn log(&self) -> &VecDeque<InstanceRecord> {
        &self.log
    }

    /// The earliest time a peer wants [`InstanceHost::handle_timeout`], if any instance.
    pub fn poll_timeout(&self) -> Option<Time> {
        self.slots.values().filter_map(|s| s.peer.poll_timeout()).min()
    }

    /// Runs the peers whose tick is due; players produce their input for the tick first.
    pub fn handle_timeout(&mut self, now: Time) {
        let ids: Vec<u32> = self
            .slots
            .iter()
            .filter(|(_, s)| s.peer.poll_timeout().is_some_and(|t| t <= now))
            .map(|(&id, _)| id)
            .collect();
        for id in ids {
            if let Some(slot) = self.slots.get_mut(&id) {
                if slot.plays && slot.peer.tick_due(now) {
                    let seq = slot.peer.inputs_produced() + 1;
                    // Refused when too many inputs wait unconfirmed: the player stalls.
                    let _ = slot.peer.push_input(input_payload(self.seed, id, self.node, seq));
                }
                slot.peer.handle_timeout(now);
            }
            self.after(now, id);
        }
    }

    /// The membership protocol declared `node` failed: every instance it takes part in
    /// stops waiting for it (paper `003` §3.2.1's heartbeats are then only the backstop).
    pub fn member_down(&mut self, now: Time, node: NodeId) {
        let ids: Vec<u32> = self
            .slots
            .iter()
            .filter(|(_, s)| s.roster.binary_search(&node.0).is_ok())
            .map(|(&id, _)| id)
            .collect();
        for id in ids {
            if let Some(slot) = self.slots.get_mut(&id) {
                slot.peer.member_down(now, node.0);
            }
        }
    }

    /// Handles the payload of an instance Control datagram from `from` (already checked to
    /// be a cluster member by the node; the channel byte removed, see [`crate::control`]).
    pub fn handle_payload(&mut self, now: Time, from: NodeId, payload: &[u8]) -> Result<(), InstanceError> {
        let res = self.receive(now, from, payload);
        if res.is_err() {
            self.stats.rejected += 1;
        }
        res
    }

    fn receive(&mut self, now: Time, from: NodeId, payload: &[u8]) -> Result<(), InstanceError> {
        let env: ControlEnvelope = self
            .codec
            .decode_bytes(MessageClass::Control, payload)
            .map_err(|e| InstanceError::Decode(e.to_string()))?;
        let msg = env.msg.into_msg()?;
        let slot = self
            .slots
            .get_mut(&env.instance)
            .ok_or(InstanceError::UnknownInstance(env.instance))?;
        if slot.roster.binary_search(&from.0).is_err() || from == self.node {
            return Err(InstanceError::NotMember {
                from,
                instance: env.instance,
            });
        }
        self.stats.received += 1;
        slot.peer.handle_message(now, from.0, msg);
        self.after(now, env.instance);
        Ok(())
    }

    /// The next Control datagram to send: `(destination, datagram)`.
    pub fn poll_transmit(&mut self) -> Option<(NodeId, Vec<u8>)> {
        self.out.pop_front()
    }

    fn record(&mut self, at: Time, instance: u32, event: InstanceEvent) {
        if self.log.len() >= MAX_RECORDS {
            self.log.pop_front();
        }
        self.log.push_back(InstanceRecord { at, instance, event });
    }

    /// After a peer ran: encode its messages, turn its events and state changes into records.
    fn after(&mut self, now: Time, id: u32) {
        let Some(slot) = self.slots.get_mut(&id) else {
            return;
        };
        let mut records = Vec::new();
        while let Some(e) = slot.peer.poll_event() {
            records.push(match e {
                PeerEvent::Promoted { epoch } => {
                    slot.await_commit = Some((epoch, slot.peer.committed_tick()));
                    InstanceEvent::Promoted { epoch }
                }
                PeerEvent::SteppedDown { epoch } => InstanceEvent::SteppedDown { epoch },
                PeerEvent::BecameReplica { epoch } => InstanceEvent::BecameReplica { epoch },
                PeerEvent::ReplicaAppointed { replica } => InstanceEvent::ReplicaAppointed {
                    replica: NodeId(replica),
                },
                PeerEvent::MemberLeft { member } => InstanceEvent::MemberLeft {
                    member: NodeId(member),
                },
                PeerEvent::InstanceLost => InstanceEvent::InstanceLost,
                PeerEvent::Candidate { epoch } => InstanceEvent::Candidate { epoch },
            });
        }
        let p = &slot.peer;
        let following = (p.server(), p.epoch());
        if following != slot.following {
            if let Some(s) = p.server().filter(|&s| s != self.node.0)
                && following.0 != slot.following.0
            {
                records.push(InstanceEvent::Redirected {
                    server: NodeId(s),
                    epoch: p.epoch(),
                });
            }
            slot.following = following;
        }
        if let Some((epoch, mark)) = slot.await_commit {
            if p.role() != Role::Server || p.epoch() != epoch {
                slot.await_commit = None;
            } else if p.committed_tick() > mark {
                slot.await_commit = None;
                records.push(InstanceEvent::FirstCommit { epoch });
            }
        }
        if p.role() == Role::Player && p.confirmed_seq() > slot.confirmed {
            slot.confirmed = p.confirmed_seq();
            if p.epoch() > slot.confirm_epoch {
                slot.confirm_epoch = p.epoch();
                records.push(InstanceEvent::FirstConfirm { epoch: p.epoch() });
            }
        }
        let mut msgs = Vec::new();
        while let Some(t) = slot.peer.poll_transmit() {
            msgs.push(t);
        }
        for r in records {
            self.record(now, id, r);
        }
        for t in msgs {
            if t.dst.0 == CLUSTER {
                self.stats.status_reports += 1;
                continue;
            }
            if t.dst == self.node {
                continue; // the state machine never addresses itself; be safe anyway
            }
            let env = ControlEnvelope {
                instance: id,
                msg: WireMsg::from(&t.datagram),
            };
            match crate::control::frame(crate::control::Channel::Instance, self.codec.encode_payload(&env)) {
                Ok(d) => {
                    self.stats.sent += 1;
                    self.out.push_back((t.dst, d));
                }
                // A snapshot larger than a datagram (more than ~4000 players): not sent.
                Err(_) => self.stats.rejected += 1,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_progress_matches_applying_the_payloads() {
        let mut p = Progress::default();
        for s in 1..=5 {
            p = p.apply(s, input_payload(7, 1, NodeId(3), s));
        }
        assert_eq!(expected_progress(7, 1, NodeId(3), 5), p);
        assert_ne!(expected_progress(8, 1, NodeId(3), 5), p);
        assert_ne!(
            input_payload(7, 1, NodeId(3), 1),
            input_payload(7, 1, NodeId(4), 1)
        );
    }

    proptest::proptest! {
        #[test]
        fn random_control_payloads_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..256)) {
            let mut h = InstanceHost::new(NodeId(2), 1);
            h.join(spec(1)).unwrap();
            let before = h.stats().rejected;
            if h.handle_payload(Time::ZERO, NodeId(0), &bytes).is_err() {
                proptest::prop_assert_eq!(h.stats().rejected, before + 1);
            } else {
                proptest::prop_assert_eq!(h.stats().received, 1);
            }
        }
    }

    fn spec(id: u32) -> InstanceSpec {
        InstanceSpec {
            id,
            members: vec![NodeId(0), NodeId(1), NodeId(2)],
            server: NodeId(0),
            replica: Some(NodeId(1)),
            ranking: vec![NodeId(1), NodeId(2)],
            plays: true,
            first_tick: Time::ZERO,
            failover: FailoverConfig::default(),
        }
    }

    #[test]
    fn joining_checks_the_spec() {
        let mut h = InstanceHost::new(NodeId(2), 1);
        assert_eq!(h.join(spec(1)), Ok(()));
        assert_eq!(h.join(spec(1)), Err(InstanceError::Duplicate(1)));
        let mut outsider = InstanceHost::new(NodeId(9), 1);
        assert!(matches!(outsider.join(spec(2)), Err(InstanceError::Spec(_))));
        let mut s = spec(3);
        s.members.push(NodeId(CLUSTER));
        assert!(matches!(h.join(s), Err(InstanceError::Spec(_))));
        assert_eq!(h.instances().collect::<Vec<_>>(), vec![1]);
    }
}
