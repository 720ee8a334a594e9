//! The client side of the protocol, sans-IO: datagrams and time in, datagrams, events and
//! a typed view out. A driver (the tokio one in `net::client`, or a test's loop) moves the
//! bytes; the same code runs in tests with virtual time.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use worldmesh_core::{ObjectId, Time};
use worldmesh_replica::GameObject;

use crate::playable::Playable;
use crate::proto::{
    CLIENT_PROTOCOL_VERSION, Change, ClientMsg, DisconnectReason, MAX_INPUTS_PER_MESSAGE, NodeMsg,
    RefuseReason, ViewPart,
};
use crate::sdk::prediction::seq_newer;

/// Client timing.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// Between connect attempts.
    pub connect_retry: Duration,
    /// Give up connecting (or consider the node gone) after this long without an answer.
    pub timeout: Duration,
    /// Send at least an acknowledgement this often (keepalive).
    pub keepalive: Duration,
    /// Inputs kept until the node confirms them; beyond, the oldest are dropped (counted).
    pub max_pending_inputs: usize,
    /// Complete views kept as delta bases.
    pub view_history: usize,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            connect_retry: Duration::from_millis(250),
            timeout: Duration::from_secs(10),
            keepalive: Duration::from_millis(500),
            max_pending_inputs: 128,
            view_history: 32,
        }
    }
}

/// What happened to the session.
#[derive(Clone, Debug, PartialEq)]
pub enum ClientEvent {
    /// The node accepted the token.
    Connected {
        /// The player.
        player: u64,
        /// The player's avatar.
        avatar: ObjectId,
    },
    /// The node refused the token.
    Refused(RefuseReason),
    /// The node ended the session.
    Disconnected(DisconnectReason),
    /// No answer from the node within the timeout.
    TimedOut,
    /// The avatar moved to node `node`: connect there and call [`Client::hand_over`]
    /// with `token`.
    HandOff {
        /// The new node.
        node: worldmesh_core::NodeId,
        /// Its connect token.
        token: Vec<u8>,
    },
    /// A new complete view (see [`Client::view`]).
    View {
        /// Its number.
        seq: u32,
    },
}

/// Where the session is.
#[derive(Clone, Debug, PartialEq)]
pub enum ClientState {
    /// Sending connect requests.
    Connecting,
    /// Accepted.
    Connected {
        /// The player.
        player: u64,
        /// The avatar.
        avatar: ObjectId,
        /// The node's frame interval, ms.
        frame_ms: u32,
    },
    /// Over (refused, disconnected or timed out).
    Closed,
}

/// What the player sees: the objects of one complete view, decoded.
#[derive(Clone, Debug)]
pub struct View<O> {
    /// The view's number.
    pub seq: u32,
    /// The node's frame time, ms.
    pub time_ms: u64,
    /// The last input the avatar applied.
    pub last_input: Option<u32>,
    /// The objects in the avatar's area of interest (and the avatar).
    pub objects: BTreeMap<ObjectId, O>,
}

/// Counters of one client.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// Bytes received.
    pub bytes_in: u64,
    /// Bytes sent.
    pub bytes_out: u64,
    /// Datagrams received that did not decode.
    pub malformed: u64,
    /// Complete views.
    pub views: u64,
    /// Views that could not be decoded against their base (base gone, bad delta).
    pub views_dropped: u64,
    /// Inputs dropped before the node confirmed them (pending queue full).
    pub inputs_dropped: u64,
}

/// A view being reassembled from its parts.
struct Partial {
    seq: u32,
    base: Option<u32>,
    time_ms: u64,
    last_input: Option<u32>,
    parts: Vec<Option<Vec<crate::proto::ViewEntry>>>,
}

/// The client protocol state machine.
pub struct Client<O: Playable> {
    cfg: ClientConfig,
    token: Vec<u8>,
    state: ClientState,
    next_connect: Time,
    last_heard: Time,
    last_sent: Time,
    next_seq: u32,
    pending: VecDeque<(u32, Vec<u8>)>,
    views: VecDeque<View<O>>,
    partial: Vec<Partial>,
    transmits: VecDeque<Vec<u8>>,
    events: VecDeque<ClientEvent>,
    stats: ClientStats,
    delays: Option<Vec<(u32, f32)>>,
}

impl<O: Playable> Client<O> {
    /// A client that starts connecting with `token` at `now`.
    pub fn new(cfg: ClientConfig, token: Vec<u8>, now: Time) -> Self {
        Self {
            cfg,
            token,
            state: ClientState::Connecting,
            next_connect: now,
            last_heard: now,
            last_sent: now,
            next_seq: 1,
            pending: VecDeque::new(),
            views: VecDeque::new(),
            partial: Vec::new(),
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            stats: ClientStats::default(),
            delays: None,
        }
    }

    /// Where the session is.
    pub fn state(&self) -> &ClientState {
        &self.state
    }

    /// Counters.
    pub fn stats(&self) -> &ClientStats {
        &self.stats
    }

    /// The newest complete view.
    pub fn view(&self) -> Option<&View<O>> {
        self.views.back()
    }

    /// The avatar's state in the newest view.
    pub fn avatar(&self) -> Option<&O> {
        match &self.state {
            ClientState::Connected { avatar, .. } => self.view()?.objects.get(avatar),
            _ => None,
        }
    }

    /// Inputs sent and not yet confirmed applied, oldest first.
    pub fn pending_inputs(&self) -> impl Iterator<Item = u32> + '_ {
        self.pending.iter().map(|(s, _)| *s)
    }

    /// Queues an input and sends it (with every unconfirmed one) at once; while
    /// connecting (e.g. during a hand-off) it is kept and sent once accepted. Returns its
    /// sequence number, or `None` when the session is over.
    pub fn send_input(&mut self, now: Time, input: &O::Input) -> Option<u32> {
        if self.state == ClientState::Closed {
            return None;
        }
        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        if self.pending.len() >= self.cfg.max_pending_inputs.max(1) {
            self.pending.pop_front();
            self.stats.inputs_dropped += 1;
        }
        self.pending.push_back((seq, bitcode::encode(input)));
        if matches!(self.state, ClientState::Connected { .. }) {
            self.send_inputs(now);
        }
        Some(seq)
    }

    /// Continues the session on another node after a [`ClientEvent::HandOff`]: connects
    /// with `token`, keeps every unconfirmed input (sent again once accepted; the avatar
    /// applies each sequence number once), and starts the view history afresh (views are
    /// numbered per node).
    pub fn hand_over(&mut self, now: Time, token: Vec<u8>) {
        self.token = token;
        self.state = ClientState::Connecting;
        self.next_connect = now;
        self.last_heard = now;
        self.views.clear();
        self.partial.clear();
        self.handle_timeout(now);
    }

    /// Sets the measured round-trip times to nodes (ms) for the assignment of players to
    /// nodes: sent now if connected, and again each time a node accepts the session (after
    /// a hand-off the new node reports the player with them).
    pub fn set_delays(&mut self, now: Time, rtts: Vec<(worldmesh_core::NodeId, f32)>) {
        let rtts: Vec<(u32, f32)> = rtts
            .into_iter()
            .take(crate::proto::MAX_DELAYS)
            .map(|(n, d)| (n.0, d))
            .collect();
        self.delays = Some(rtts);
        if matches!(self.state, ClientState::Connected { .. }) {
            self.send_delays(now);
        }
    }

    fn send_delays(&mut self, now: Time) {
        if let Some(rtts) = self.delays.clone() {
            self.send(now, &ClientMsg::Delays { rtts });
        }
    }

    /// Says goodbye (one datagram; the node also times the session out).
    pub fn disconnect(&mut self, now: Time) {
        if self.state != ClientState::Closed {
            self.send(now, &ClientMsg::Disconnect);
            self.state = ClientState::Closed;
        }
    }

    /// Takes the next datagram to send to the node.
    pub fn poll_transmit(&mut self) -> Option<Vec<u8>> {
        self.transmits.pop_front()
    }

    /// Takes the next event.
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.events.pop_front()
    }

    /// When [`Client::handle_timeout`] wants to run next.
    pub fn poll_timeout(&self) -> Option<Time> {
        match self.state {
            ClientState::Connecting => Some(
                self.next_connect
                    .min(self.last_heard.saturating_add(self.cfg.timeout)),
            ),
            ClientState::Connected { .. } => Some(
                self.last_sent
                    .saturating_add(self.cfg.keepalive)
                    .min(self.last_heard.saturating_add(self.cfg.timeout)),
            ),
            ClientState::Closed => None,
        }
    }

    /// Runs timers: connect retries, keepalives, the timeout.
    pub fn handle_timeout(&mut self, now: Time) {
        if self.state == ClientState::Closed {
            return;
        }
        if now.saturating_since(self.last_heard) >= self.cfg.timeout {
            self.state = ClientState::Closed;
            self.events.push_back(ClientEvent::TimedOut);
            return;
        }
        match self.state {
            ClientState::Connecting if now >= self.next_connect => {
                let msg = ClientMsg::Connect {
                    version: CLIENT_PROTOCOL_VERSION,
                    token: self.token.clone(),
                };
                self.send(now, &msg);
                self.next_connect = now.saturating_add(self.cfg.connect_retry);
            }
            ClientState::Connected { .. } if now.saturating_since(self.last_sent) >= self.cfg.keepalive => {
                if self.pending.is_empty() {
                    let view = self.view().map(|v| v.seq);
                    self.send(now, &ClientMsg::Ack { view });
                } else {
                    self.send_inputs(now);
                }
            }
            _ => {}
        }
    }

    /// Handles a datagram from the node.
    pub fn handle_datagram(&mut self, now: Time, bytes: &[u8]) {
        self.stats.bytes_in += bytes.len() as u64;
        let msg = match NodeMsg::decode(bytes) {
            Ok(m) => m,
            Err(_) => {
                self.stats.malformed += 1;
                return;
            }
        };
        if self.state == ClientState::Closed {
            return;
        }
        self.last_heard = now;
        match msg {
            NodeMsg::Accepted {
                player,
                avatar,
                frame_ms,
            } => {
                if self.state == ClientState::Connecting {
                    self.state = ClientState::Connected {
                        player,
                        avatar,
                        frame_ms,
                    };
                    self.events.push_back(ClientEvent::Connected { player, avatar });
                    self.send_delays(now);
                    if !self.pending.is_empty() {
                        self.send_inputs(now);
                    }
                }
            }
            NodeMsg::Refused { reason } => {
                if self.state == ClientState::Connecting {
                    self.state = ClientState::Closed;
                    self.events.push_back(ClientEvent::Refused(reason));
                }
            }
            NodeMsg::Disconnected { reason } => {
                self.state = ClientState::Closed;
                self.events.push_back(ClientEvent::Disconnected(reason));
            }
            NodeMsg::HandOff { node, token } => {
                if matches!(self.state, ClientState::Connected { .. }) {
                    self.state = ClientState::Closed;
                    self.events.push_back(ClientEvent::HandOff { node, token });
                }
            }
            NodeMsg::View(part) => {
                if matches!(self.state, ClientState::Connected { .. }) {
                    self.on_view_part(now, part);
                }
            }
        }
    }

    fn on_view_part(&mut self, now: Time, p: ViewPart) {
        if self.views.back().is_some_and(|v| !seq_newer(p.seq, v.seq)) {
            return; // older than what we have: late or duplicated
        }
        let idx = match self.partial.iter().position(|x| x.seq == p.seq) {
            Some(i) => i,
            None => {
                if self.partial.len() >= 4 {
                    self.partial.remove(0);
                }
                self.partial.push(Partial {
                    seq: p.seq,
                    base: p.base,
                    time_ms: p.time_ms,
                    last_input: p.last_input,
                    parts: vec![None; usize::from(p.parts)],
                });
                self.partial.len() - 1
            }
        };
        let Some(slot) = self.partial[idx].parts.get_mut(usize::from(p.part)) else {
            self.stats.malformed += 1;
            return;
        };
        *slot = Some(p.entries);
        if self.partial[idx].parts.iter().any(Option::is_none) {
            return;
        }
        let done = self.partial.remove(idx);
        // Older incomplete views are now useless.
        self.partial.retain(|x| seq_newer(x.seq, done.seq));
        match self.assemble(done) {
            Some(view) => {
                let seq = view.seq;
                if let Some(last) = view.last_input {
                    self.pending.retain(|(s, _)| seq_newer(*s, last));
                }
                self.views.push_back(view);
                while self.views.len() > self.cfg.view_history.max(1) {
                    self.views.pop_front();
                }
                self.stats.views += 1;
                self.events.push_back(ClientEvent::View { seq });
                if self.pending.is_empty() {
                    self.send(now, &ClientMsg::Ack { view: Some(seq) });
                } else {
                    self.send_inputs(now);
                }
            }
            None => self.stats.views_dropped += 1,
        }
    }

    fn assemble(&self, p: Partial) -> Option<View<O>> {
        let mut objects = match p.base {
            None => BTreeMap::new(),
            Some(b) => self.views.iter().find(|v| v.seq == b)?.objects.clone(),
        };
        for e in p.parts.into_iter().flatten().flatten() {
            match e.change {
                Change::Full(bytes) => {
                    objects.insert(e.id, O::decode_state(&bytes).ok()?);
                }
                Change::Delta(bytes) => {
                    let base = objects.get(&e.id)?;
                    let next = <O as GameObject>::apply_delta(base, &bytes).ok()?;
                    objects.insert(e.id, next);
                }
                Change::Removed => {
                    objects.remove(&e.id);
                }
            }
        }
        Some(View {
            seq: p.seq,
            time_ms: p.time_ms,
            last_input: p.last_input,
            objects,
        })
    }

    fn send_inputs(&mut self, now: Time) {
        let Some(&(first_seq, _)) = self.pending.front() else {
            return;
        };
        let inputs = self
            .pending
            .iter()
            .take(MAX_INPUTS_PER_MESSAGE)
            .map(|(_, b)| b.clone())
            .collect();
        let ack = self.view().map(|v| v.seq);
        self.send(
            now,
            &ClientMsg::Inputs {
                ack,
                first_seq,
                inputs,
            },
        );
    }

    fn send(&mut self, now: Time, msg: &ClientMsg) {
        let bytes = msg.encode();
        self.stats.bytes_out += bytes.len() as u64;
        self.transmits.push_back(bytes);
        self.last_sent = now;
    }
}
