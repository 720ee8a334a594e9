//! The node state machine.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use worldmesh_core::wire::{self, Frame, MAX_PAYLOAD};
use worldmesh_core::{DetRng, MessageClass, NodeId, ObjectId, Time};
use worldmesh_replica::{GameObject, ObjectStore, Role, StoreError, ThinkContext};

use crate::message::{Message, ObjectState};
use crate::stats::{NodeStats, NodeSummary};

/// Static configuration of a node.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    /// This node.
    pub id: NodeId,
    /// Every other member of the cluster (static membership).
    pub peers: Vec<NodeId>,
    /// Time between frames (10 Hz by default, as the Quake-like model game; paper `000` §4.1).
    pub frame_interval: Duration,
    /// Largest payload per datagram this node sends; states are batched up to it
    /// (1200 bytes keeps datagrams under common path MTUs).
    pub max_payload: usize,
    /// A replica not refreshed for this long is dropped (its primary is gone or cut off).
    pub replica_ttl: Duration,
    /// Seed of the node's random stream (think functions use it).
    pub seed: u64,
}

impl NodeConfig {
    /// A configuration with the defaults above for node `id` among `peers`.
    pub fn new(id: NodeId, peers: Vec<NodeId>, seed: u64) -> Self {
        Self {
            id,
            peers,
            frame_interval: Duration::from_millis(100),
            max_payload: 1200,
            replica_ttl: Duration::from_secs(2),
            seed,
        }
    }
}

/// A datagram the driver must send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// Destination node.
    pub dst: NodeId,
    /// Traffic class (also in the frame header; here so drivers need not parse).
    pub class: MessageClass,
    /// The whole datagram (header + payload).
    pub datagram: Vec<u8>,
}

/// Something that happened inside the node.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A replica of a remote object appeared.
    ReplicaCreated {
        /// The object.
        id: ObjectId,
        /// The node holding its primary.
        primary: NodeId,
    },
    /// A replica was dropped (expired or deleted by its primary).
    ReplicaRemoved {
        /// The object.
        id: ObjectId,
    },
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
    /// A datagram or part of it was refused.
    Rejected {
        /// The sender.
        from: NodeId,
        /// Why.
        reason: String,
    },
}

/// Events kept when the driver does not drain them; older ones are dropped beyond this.
const MAX_QUEUED_EVENTS: usize = 4096;

/// The worldmesh node: a sans-IO state machine over a local [`ObjectStore`].
pub struct Node<O: GameObject> {
    config: NodeConfig,
    world: Arc<O::World>,
    store: ObjectStore<O>,
    rng: DetRng,
    next_seq: u32,
    frame: u64,
    last_frame: Option<Time>,
    next_frame: Time,
    transmits: VecDeque<Transmit>,
    events: VecDeque<Event>,
    deleted: Vec<ObjectId>,
    stats: NodeStats,
}

impl<O: GameObject> Node<O> {
    /// A node that runs its first frame at `now`.
    pub fn new(mut config: NodeConfig, world: Arc<O::World>, now: Time) -> Self {
        // Sorted and deduplicated: membership checks are binary searches.
        config.peers.sort_unstable();
        config.peers.dedup();
        config.peers.retain(|p| *p != config.id);
        let rng = DetRng::new(config.seed).fork(u64::from(config.id.0));
        Self {
            config,
            world,
            store: ObjectStore::new(),
            rng,
            next_seq: 0,
            frame: 0,
            last_frame: None,
            next_frame: now,
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            deleted: Vec::new(),
            stats: NodeStats {
                origin: now,
                ..NodeStats::default()
            },
        }
    }

    /// This node's id.
    pub fn id(&self) -> NodeId {
        self.config.id
    }

    /// The configuration.
    pub fn config(&self) -> &NodeConfig {
        &self.config
    }

    /// The local store (primaries and replicas), read-only.
    pub fn store(&self) -> &ObjectStore<O> {
        &self.store
    }

    /// Counters.
    pub fn stats(&self) -> &NodeStats {
        &self.stats
    }

    /// Frames run so far.
    pub fn frame(&self) -> u64 {
        self.frame
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
        let id = ObjectId::new(self.config.id, self.next_seq);
        self.next_seq += 1;
        // Ids are fresh by construction, so insertion cannot collide.
        let inserted = self.store.insert_primary(id, object, self.frame, now);
        debug_assert!(inserted.is_ok());
        self.push_event(Event::PrimaryCreated { id });
        id
    }

    /// When the node wants [`Node::handle_timeout`] called next.
    pub fn poll_timeout(&self) -> Option<Time> {
        Some(self.next_frame)
    }

    /// The next datagram to send, if any.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Advances timers: runs a frame when one is due.
    pub fn handle_timeout(&mut self, now: Time) {
        if now < self.next_frame {
            return;
        }
        self.run_frame(now);
        while self.next_frame <= now {
            self.next_frame += self.config.frame_interval;
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
                self.stats.malformed += 1;
                self.push_event(Event::Rejected {
                    from,
                    reason: e.to_string(),
                });
                return;
            }
        };
        self.stats.traffic.on_receive(frame.class, datagram.len());
        if self.config.peers.binary_search(&from).is_err() {
            self.stats.malformed += 1;
            self.push_event(Event::Rejected {
                from,
                reason: format!("{from} is not a member"),
            });
            return;
        }
        let msg: Message = match frame.decode() {
            Ok(m) => m,
            Err(e) => {
                self.stats.malformed += 1;
                self.push_event(Event::Rejected {
                    from,
                    reason: e.to_string(),
                });
                return;
            }
        };
        match msg {
            Message::Updates { sent_at, states } => {
                for s in states {
                    self.apply_state(now, from, sent_at, s);
                }
            }
            Message::Deleted { ids } => {
                for id in ids {
                    if self
                        .store
                        .get(id)
                        .is_some_and(|e| e.role == Role::Replica { primary: from })
                    {
                        self.store.remove(id);
                        self.push_event(Event::ReplicaRemoved { id });
                    } else {
                        self.stats.rejected_states += 1;
                    }
                }
            }
        }
    }

    fn apply_state(&mut self, now: Time, from: NodeId, sent_at: Time, s: ObjectState) {
        // Until migration exists, an object's primary is the node that created it: a node
        // may only send state for the objects it created.
        if s.id.origin != from {
            self.stats.rejected_states += 1;
            self.push_event(Event::Rejected {
                from,
                reason: format!("{from} does not own {}", s.id),
            });
            return;
        }
        let object = match O::decode_state(&s.state) {
            Ok(o) => o,
            Err(e) => {
                self.stats.rejected_states += 1;
                self.push_event(Event::Rejected {
                    from,
                    reason: e.to_string(),
                });
                return;
            }
        };
        match self
            .store
            .apply_replica_state(from, s.id, object, s.version, sent_at, now)
        {
            Ok(true) => self.push_event(Event::ReplicaCreated {
                id: s.id,
                primary: from,
            }),
            Ok(false) => {}
            // Reordered or duplicated datagrams are normal on UDP: not an attack.
            Err(StoreError::Stale { .. }) => {}
            Err(e) => {
                self.stats.rejected_states += 1;
                self.push_event(Event::Rejected {
                    from,
                    reason: e.to_string(),
                });
            }
        }
    }

    fn run_frame(&mut self, now: Time) {
        self.frame += 1;
        self.stats.frames += 1;
        let dt = self.last_frame.map_or(self.config.frame_interval, |t| now - t);
        self.last_frame = Some(now);

        // 1. Think every primary (paper `000` §3: only primaries run think).
        let mut spawned = Vec::new();
        for id in self.store.primary_ids() {
            let Some(mut entry) = self.store.take(id) else {
                continue;
            };
            let mut ctx = ThinkContext::new(
                now,
                dt,
                self.config.id,
                id,
                &mut self.rng,
                self.world.as_ref(),
                &self.store,
                &mut spawned,
            );
            entry.object.think(&mut ctx);
            let delete = ctx.wants_delete();
            if delete {
                self.deleted.push(id);
                self.push_event(Event::PrimaryDeleted { id });
            } else {
                entry.version = self.frame;
                entry.state_time = now;
                entry.updated_at = now;
                self.store.restore(id, entry);
            }
        }
        for o in spawned {
            self.spawn(now, o);
        }

        // 2. Broadcast: full state of every primary to every peer.
        self.broadcast(now);

        // 3. Drop replicas whose primary went quiet.
        for id in self.store.expire_replicas(now, self.config.replica_ttl) {
            self.stats.replicas_expired += 1;
            self.push_event(Event::ReplicaRemoved { id });
        }
    }

    fn broadcast(&mut self, now: Time) {
        let mut datagrams = Vec::new();
        let mut batch: Vec<ObjectState> = Vec::new();
        let mut batch_bytes = 0usize;
        // Conservative size estimate per state: id (≤ 10) + version (≤ 10) + length (≤ 5).
        const PER_STATE: usize = 25;
        const PER_MESSAGE: usize = 32;
        for (id, e) in self.store.iter().filter(|(_, e)| e.role == Role::Primary) {
            let mut state = Vec::new();
            e.object.encode_state(&mut state);
            let size = state.len() + PER_STATE;
            if !batch.is_empty() && batch_bytes + size + PER_MESSAGE > self.config.max_payload {
                datagrams.push(std::mem::take(&mut batch));
                batch_bytes = 0;
            }
            batch_bytes += size;
            batch.push(ObjectState {
                id,
                version: e.version,
                state,
            });
        }
        if !batch.is_empty() {
            datagrams.push(batch);
        }
        let mut encoded: Vec<Vec<u8>> = Vec::new();
        for states in datagrams {
            match wire::encode(
                MessageClass::ObjectUpdate,
                &Message::Updates { sent_at: now, states },
            ) {
                Ok(d) => encoded.push(d),
                Err(e) => self.push_event(Event::Rejected {
                    from: self.config.id,
                    reason: e.to_string(),
                }),
            }
        }
        if !self.deleted.is_empty() {
            let ids = std::mem::take(&mut self.deleted);
            if let Ok(d) = wire::encode(MessageClass::ObjectUpdate, &Message::Deleted { ids }) {
                encoded.push(d);
            }
        }
        for peer in self.config.peers.clone() {
            for d in &encoded {
                self.send(now, peer, MessageClass::ObjectUpdate, d.clone());
            }
        }
    }

    fn send(&mut self, now: Time, dst: NodeId, class: MessageClass, datagram: Vec<u8>) {
        self.stats.on_send(now, class, datagram.len());
        self.transmits.push_back(Transmit { dst, class, datagram });
    }

    fn push_event(&mut self, e: Event) {
        if self.events.len() >= MAX_QUEUED_EVENTS {
            self.events.pop_front();
        }
        self.events.push_back(e);
    }

    /// Ages (now − primary's timestamp) of every replica held, in ms.
    pub fn replica_ages_ms(&self, now: Time) -> Vec<f64> {
        self.store
            .iter()
            .filter(|(_, e)| matches!(e.role, Role::Replica { .. }))
            .map(|(_, e)| (now - e.state_time).as_secs_f64() * 1000.0)
            .collect()
    }

    /// This node's summary for a run that lasted `duration_s` seconds and ends at `now`.
    pub fn summary(&self, now: Time, duration_s: f64) -> NodeSummary {
        NodeSummary::new(
            self.config.id,
            &self.stats,
            duration_s,
            self.store.primary_count(),
            &self.replica_ages_ms(now),
        )
    }
}
