//! The node side of the client protocol (`worldmesh_client::proto`), sans-IO: players'
//! sessions on this node.
//!
//! A driver hands it each client datagram with the connection it came on ([`ConnId`]:
//! a QUIC connection in the real runtime, a number in tests) and calls
//! [`Sessions::frame`] after each node frame; it queues datagrams per connection.
//!
//! - **Connect**: the token is verified ([`ConnectToken::verify`]); the player's avatar is
//!   spawned as a primary here (or, on a resumed session, found again). A token already
//!   bound to a live connection is refused as replayed; a session silent for
//!   [`SessionConfig::resume_after`] may be resumed by a new connection with the same token
//!   (the client's reconnect); a token whose session the client ended cannot be used again.
//! - **Inputs** become writes to the avatar only, each sequence number applied once and in
//!   order ([`Playable::input_write`]); the avatar's think decides what an input may do.
//!   Datagrams beyond [`SessionConfig::max_datagrams_per_s`] disconnect the client
//!   ([`DisconnectReason::InputFlood`]), as do repeated malformed datagrams.
//! - **Views**: each frame, every object the node holds (primaries and replicas) that the
//!   avatar is interested in, plus the avatar, delta-encoded against the newest view the
//!   client acknowledged, in parts that each fit a datagram. The view is the server's
//!   choice: nothing the client sends widens it.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::Duration;

use worldmesh_client::proto::{
    Change, ClientMsg, DecodeError, DisconnectReason, MAX_VIEW_OBJECTS, NodeMsg, RefuseReason, ViewEntry,
    split_view,
};
use worldmesh_client::sdk::prediction::seq_newer;
use worldmesh_client::{ConnectToken, Playable, TokenError, TokenKey};
use worldmesh_core::{NodeId, ObjectId, Time};
use worldmesh_replica::GameObject;

use crate::Node;
use crate::assignment::{AssignMsg, AssignmentAgent};

/// Why a hand-off could not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandOffError {
    /// No session on that connection.
    #[error("no player session on connection {0}")]
    NoSession(u64),
    /// The avatar is not a primary here.
    #[error("the avatar of player {0} is not a primary on this node")]
    NotHere(u64),
    /// A hand-off is already under way.
    #[error("player {0} is already being handed off")]
    Busy(u64),
    /// The migration would not start.
    #[error("cannot migrate the avatar: {0}")]
    Migration(#[from] crate::migration::StartError),
}

/// A client connection, as the driver numbers them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u64);

/// Session limits.
#[derive(Clone, Debug)]
pub struct SessionConfig {
    /// Most players connected at once; beyond, connects are refused as full.
    pub max_players: usize,
    /// A session with no datagram for this long ends ([`DisconnectReason::TimedOut`]).
    pub idle_timeout: Duration,
    /// A session silent this long may be taken over by a new connection with its token.
    pub resume_after: Duration,
    /// Datagrams per second a client may send (averaged over a second).
    pub max_datagrams_per_s: u32,
    /// Malformed datagrams tolerated per session before it is ended.
    pub max_malformed: u32,
    /// Views kept per session as delta bases.
    pub view_history: usize,
    /// A hand-off whose avatar has not left after this long is given up.
    pub handoff_timeout: Duration,
    /// Side of the cells of the grid views are selected through, world units (about the
    /// half-extent of an area of interest).
    pub view_cell: f32,
    /// Lifetime of the connect token a hand-off gives the client.
    pub handoff_token_ms: u64,
}

impl Default for SessionConfig {
    fn default() -> Self {
        Self {
            max_players: 4096,
            idle_timeout: Duration::from_secs(10),
            resume_after: Duration::from_secs(2),
            max_datagrams_per_s: 240,
            max_malformed: 32,
            view_history: 16,
            handoff_timeout: Duration::from_secs(5),
            view_cell: 450.0,
            handoff_token_ms: 60_000,
        }
    }
}

/// What happened to a session.
#[derive(Clone, Debug, PartialEq)]
pub enum SessionEvent {
    /// A player connected (or resumed).
    Connected {
        /// The connection.
        conn: ConnId,
        /// The player.
        player: u64,
        /// The avatar.
        avatar: ObjectId,
        /// Whether an earlier session's avatar was taken over.
        resumed: bool,
    },
    /// A connect was refused.
    Refused {
        /// The connection.
        conn: ConnId,
        /// Why.
        reason: RefuseReason,
    },
    /// A session ended.
    Disconnected {
        /// The connection.
        conn: ConnId,
        /// The player.
        player: u64,
        /// Why.
        reason: DisconnectReason,
    },
}

/// Counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SessionStats {
    /// Sessions opened (including resumed ones).
    pub connected: u64,
    /// Connects refused, by reason (in a report, keyed by the reason's name).
    pub refused: BTreeMap<RefuseReason, u64>,
    /// Sessions ended, by reason (in a report, keyed by the reason's name).
    pub disconnected: BTreeMap<DisconnectReason, u64>,
    /// Datagrams that did not decode (with or without a session).
    pub malformed: u64,
    /// Inputs applied to avatars.
    pub inputs_applied: u64,
    /// Inputs received again (already applied): dropped.
    pub inputs_duplicated: u64,
    /// Gaps in input sequence numbers (inputs the client gave up on).
    pub inputs_skipped: u64,
    /// View datagrams sent.
    pub view_datagrams: u64,
    /// Players handed to another node (their avatar migrated there).
    pub handoffs: u64,
    /// Hand-offs given up (the avatar's migration did not complete in time, or would not
    /// start).
    pub handoffs_failed: u64,
    /// Hand-offs whose player left before they completed (or moves for a player with no
    /// session here any more).
    #[serde(default)]
    pub handoffs_abandoned: u64,
    /// Sessions that took over an avatar already here (a handed-off or reconnecting player).
    pub avatars_rebound: u64,
    /// Region migrations the placement loop started.
    #[serde(default)]
    pub region_migrations: u64,
    /// Placement rounds skipped (a player's delays not reported yet).
    #[serde(default)]
    pub placement_skipped: u64,
    /// Bytes sent to clients.
    pub bytes_out: u64,
    /// Bytes received from clients.
    pub bytes_in: u64,
}

struct SentView<O> {
    seq: u32,
    objects: Vec<(ObjectId, O)>,
}

/// A hand-off in progress: the avatar is migrating to `target`; once it is bound there the
/// client is sent `token` every frame until it goes.
struct HandOff {
    target: NodeId,
    started: Time,
    token: Option<Vec<u8>>,
}

struct Session<O> {
    handoff: Option<HandOff>,
    /// Delays reported to the assignment.
    reported: bool,
    /// The delays the player reported (ms to each node), for the placement loop.
    delays: Vec<(u32, f32)>,
    expires_ms: u64,
    player: u64,
    avatar: ObjectId,
    nonce: [u8; 16],
    last_heard: Time,
    /// Last input applied.
    last_input: Option<u32>,
    /// Datagrams in the current one-second window, and its start.
    window: (Time, u32),
    malformed: u32,
    next_view: u32,
    sent: VecDeque<SentView<O>>,
    acked: Option<u32>,
}

/// A token's binding: the connection using it, whether the client ended it, its expiry.
struct Binding {
    conn: Option<ConnId>,
    ended: bool,
    expires_ms: u64,
    avatar: ObjectId,
    last_input: Option<u32>,
}

/// The players' sessions on one node.
pub struct Sessions<O: Playable> {
    /// The assignment of players to nodes, if this node takes part.
    assignment: Option<AssignmentAgent>,
    /// The placement loop of paper `001` §7.4 over this node's region, if on.
    placement: Option<crate::Placement>,
    cfg: SessionConfig,
    key: TokenKey,
    sessions: HashMap<ConnId, Session<O>>,
    tokens: HashMap<[u8; 16], Binding>,
    transmits: VecDeque<(ConnId, Vec<u8>)>,
    events: VecDeque<SessionEvent>,
    stats: SessionStats,
}

fn refuse_reason(e: &TokenError) -> RefuseReason {
    match e {
        TokenError::Malformed(_) | TokenError::BadKey(_) => RefuseReason::MalformedToken,
        TokenError::Forged => RefuseReason::Forged,
        TokenError::Expired { .. } => RefuseReason::Expired,
        TokenError::TooLong { .. } => RefuseReason::TooLong,
        TokenError::WrongNode { .. } => RefuseReason::WrongNode,
    }
}

impl<O: Playable> Sessions<O> {
    /// An empty session table verifying tokens with `key`.
    pub fn new(cfg: SessionConfig, key: TokenKey) -> Self {
        Self {
            assignment: None,
            placement: None,
            cfg,
            key,
            sessions: HashMap::new(),
            tokens: HashMap::new(),
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            stats: SessionStats::default(),
        }
    }

    /// Takes part in the assignment of players to nodes (paper `002`): players report
    /// their delays, the coordinator's moves hand them over.
    pub fn with_assignment(mut self, agent: AssignmentAgent) -> Self {
        self.assignment = Some(agent);
        self
    }

    /// Runs the placement loop of paper `001` §7.4 after every frame: this node's region
    /// (its primaries) moves to the node its players (the live avatars, located by
    /// [`Playable::player`]), by the delays they reported, are
    /// nearest to on average (core selection, k = 1); the players follow their avatars.
    /// Not together with the assignment (which moves players instead of regions).
    pub fn with_placement(mut self, cfg: crate::PlacementConfig) -> Self {
        self.placement = Some(crate::Placement::new(cfg));
        self
    }

    /// The assignment agent, if any.
    pub fn assignment(&self) -> Option<&AssignmentAgent> {
        self.assignment.as_ref()
    }

    /// A players'-layer message from member `from` ([`crate::Event::Players`]).
    pub fn handle_node_message(&mut self, now: Time, from: NodeId, payload: &[u8], node: &mut Node<O>) {
        if let (Some(a), Some(msg)) = (&mut self.assignment, AssignMsg::decode(payload)) {
            a.handle(from, msg);
        }
        self.pump_assignment(now, node);
    }

    fn pump_assignment(&mut self, now: Time, node: &mut Node<O>) {
        let Some(a) = &mut self.assignment else {
            return;
        };
        while let Some((to, bytes)) = a.poll_send() {
            node.send_players(now, to, &bytes);
        }
        let mut moves = Vec::new();
        while let Some(m) = a.poll_move() {
            moves.push(m);
        }
        for (player, to) in moves {
            let session = self
                .sessions
                .iter()
                .find(|(_, s)| s.player == player)
                .map(|(c, s)| (*c, s.handoff.is_some()));
            match session {
                // Already moving (a resent or newer order): the coordinator orders again
                // once the player's new node reports it, if it must.
                Some((_, true)) => {}
                Some((conn, false)) => {
                    if self.hand_off(now, conn, to, node).is_err() {
                        self.stats.handoffs_failed += 1;
                    }
                }
                None => self.stats.handoffs_abandoned += 1,
            }
        }
    }

    /// Counters.
    pub fn stats(&self) -> &SessionStats {
        &self.stats
    }

    /// Players connected now.
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// Players this node takes: its assignment capacity when it takes part in the
    /// assignment, else its session limit.
    pub fn capacity(&self) -> usize {
        match &self.assignment {
            Some(a) => (a.capacity() as usize).min(self.cfg.max_players),
            None => self.cfg.max_players,
        }
    }

    /// Whether no player is connected.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// The avatar of the player on `conn`.
    pub fn avatar_of(&self, conn: ConnId) -> Option<ObjectId> {
        self.sessions.get(&conn).map(|s| s.avatar)
    }

    /// Takes the next datagram to send, with its connection.
    pub fn poll_transmit(&mut self) -> Option<(ConnId, Vec<u8>)> {
        self.transmits.pop_front()
    }

    /// Takes the next event.
    pub fn poll_event(&mut self) -> Option<SessionEvent> {
        self.events.pop_front()
    }

    fn send(&mut self, conn: ConnId, msg: &NodeMsg) {
        let bytes = msg.encode();
        self.stats.bytes_out += bytes.len() as u64;
        self.transmits.push_back((conn, bytes));
    }

    fn refuse(&mut self, conn: ConnId, reason: RefuseReason) {
        *self.stats.refused.entry(reason).or_default() += 1;
        self.events.push_back(SessionEvent::Refused { conn, reason });
        self.send(conn, &NodeMsg::Refused { reason });
    }

    /// Handles a datagram that arrived on `conn`. `unix_ms` is the wall clock (token
    /// expiry); `now` the node's time.
    pub fn handle_datagram(
        &mut self,
        now: Time,
        unix_ms: u64,
        conn: ConnId,
        bytes: &[u8],
        node: &mut Node<O>,
    ) {
        self.stats.bytes_in += bytes.len() as u64;
        let msg = match ClientMsg::decode(bytes) {
            Ok(m) => m,
            Err(e) => return self.malformed(now, conn, &e, node),
        };
        if let Some(s) = self.sessions.get_mut(&conn) {
            s.last_heard = now;
            if now.saturating_since(s.window.0) >= Duration::from_secs(1) {
                s.window = (now, 0);
            }
            s.window.1 += 1;
            if s.window.1 > self.cfg.max_datagrams_per_s {
                return self.end(conn, DisconnectReason::InputFlood, node, now);
            }
        }
        match msg {
            ClientMsg::Connect { token, .. } => self.connect(now, unix_ms, conn, &token, node),
            ClientMsg::Inputs {
                ack,
                first_seq,
                inputs,
            } => {
                let Some(s) = self.sessions.get_mut(&conn) else {
                    return;
                };
                if let Some(a) = ack {
                    note_ack(s, a);
                }
                // Inputs are applied only to the avatar's primary, here and not frozen for a
                // migration. An avatar moving or gone elsewhere gets them through its new
                // node (the client resends every unconfirmed one there), so that one node
                // applies them, in order: a write held during the migration, or applied
                // tentatively to a replica here, could reach the new primary after newer
                // inputs and be dropped there as old, while this node's view had already
                // confirmed it to the client.
                let local = node
                    .store()
                    .get(s.avatar)
                    .is_some_and(|e| e.role == worldmesh_replica::Role::Primary)
                    && !node.replicas().frozen().contains(&s.avatar);
                if s.handoff.is_some() || !local {
                    return;
                }
                let avatar = s.avatar;
                let mut bad = false;
                for (k, raw) in inputs.iter().enumerate() {
                    let seq = first_seq.wrapping_add(k as u32);
                    if s.last_input.is_some_and(|l| !seq_newer(seq, l)) {
                        self.stats.inputs_duplicated += 1;
                        continue;
                    }
                    let Ok(input) = bitcode::decode::<O::Input>(raw) else {
                        bad = true;
                        break;
                    };
                    let expected = s.last_input.map_or(seq, |l| l.wrapping_add(1));
                    if seq != expected {
                        self.stats.inputs_skipped += u64::from(seq.wrapping_sub(expected));
                    }
                    node.write(now, avatar, &O::input_write(&input, seq));
                    s.last_input = Some(seq);
                    self.stats.inputs_applied += 1;
                }
                if bad {
                    self.malformed(now, conn, &DecodeError::Body, node);
                }
            }
            ClientMsg::Delays { rtts } => {
                let Some(s) = self.sessions.get_mut(&conn) else {
                    return;
                };
                if s.reported || s.handoff.is_some() {
                    return;
                }
                s.reported = true;
                s.delays = rtts.clone();
                let player = s.player;
                if let Some(a) = &mut self.assignment {
                    a.player_joined(player, rtts);
                }
                self.pump_assignment(now, node);
            }
            ClientMsg::Ack { view } => {
                if let (Some(s), Some(a)) = (self.sessions.get_mut(&conn), view) {
                    note_ack(s, a);
                }
            }
            ClientMsg::Disconnect => {
                if self.sessions.contains_key(&conn) {
                    self.end(conn, DisconnectReason::ClientLeft, node, now);
                }
            }
        }
    }

    fn malformed(&mut self, now: Time, conn: ConnId, _e: &DecodeError, node: &mut Node<O>) {
        self.stats.malformed += 1;
        let limit = self.cfg.max_malformed;
        if let Some(s) = self.sessions.get_mut(&conn) {
            s.malformed += 1;
            if s.malformed > limit {
                self.end(conn, DisconnectReason::Malformed, node, now);
            }
        }
    }

    fn connect(&mut self, now: Time, unix_ms: u64, conn: ConnId, token: &[u8], node: &mut Node<O>) {
        let token = match ConnectToken::verify(&self.key, token, node.id(), unix_ms) {
            Ok(t) => t,
            Err(e) => return self.refuse(conn, refuse_reason(&e)),
        };
        let frame_ms = node.config().frame_interval.as_millis().min(u128::from(u32::MAX)) as u32;
        if let Some(s) = self.sessions.get(&conn) {
            // A retry of a connect already accepted (the answer was lost).
            if s.nonce == token.nonce {
                let msg = NodeMsg::Accepted {
                    player: s.player,
                    avatar: s.avatar,
                    frame_ms,
                };
                self.send(conn, &msg);
            } else {
                self.refuse(conn, RefuseReason::Replayed);
            }
            return;
        }
        let mut resumed = None;
        if let Some(b) = self.tokens.get(&token.nonce) {
            let live = b
                .conn
                .and_then(|c| self.sessions.get(&c).map(|s| (c, s.last_heard)));
            match live {
                _ if b.ended => return self.refuse(conn, RefuseReason::Replayed),
                Some((_, heard)) if now.saturating_since(heard) < self.cfg.resume_after => {
                    return self.refuse(conn, RefuseReason::Replayed);
                }
                Some((old, _)) => resumed = Some((Some(old), b.avatar, b.last_input)),
                None => resumed = Some((None, b.avatar, b.last_input)),
            }
        }
        if node.drain_state().is_some() {
            return self.refuse(conn, RefuseReason::Draining);
        }
        if resumed.is_none() && self.sessions.len() >= self.cfg.max_players {
            return self.refuse(conn, RefuseReason::Full);
        }
        let (avatar, last_input, was_resumed) = match resumed {
            Some((old, avatar, last_input)) => {
                if let Some(old) = old
                    && let Some(s) = self.sessions.remove(&old)
                {
                    self.send(
                        old,
                        &NodeMsg::Disconnected {
                            reason: DisconnectReason::Replaced,
                        },
                    );
                    *self
                        .stats
                        .disconnected
                        .entry(DisconnectReason::Replaced)
                        .or_default() += 1;
                    self.events.push_back(SessionEvent::Disconnected {
                        conn: old,
                        player: s.player,
                        reason: DisconnectReason::Replaced,
                    });
                    (avatar, s.last_input, true)
                } else {
                    (avatar, last_input, true)
                }
            }
            None => {
                // A player whose avatar is already a primary here (handed over from another
                // node, or back after its session ended) takes it over.
                let found = node.store().iter().find_map(|(id, e)| {
                    (e.role == worldmesh_replica::Role::Primary && e.object.player() == Some(token.player))
                        .then(|| (id, e.object.last_input()))
                });
                let taken = found.filter(|(id, _)| !self.sessions.values().any(|s| s.avatar == *id));
                match taken {
                    Some((a, last)) => {
                        self.stats.avatars_rebound += 1;
                        (a, last, true)
                    }
                    None => {
                        let a = node.spawn(now, O::spawn_avatar(node.world(), token.player));
                        (a, None, false)
                    }
                }
            }
        };
        self.tokens.retain(|_, b| b.expires_ms > unix_ms);
        self.tokens.insert(
            token.nonce,
            Binding {
                conn: Some(conn),
                ended: false,
                expires_ms: token.expires_ms,
                avatar,
                last_input,
            },
        );
        self.sessions.insert(
            conn,
            Session {
                handoff: None,
                reported: false,
                delays: Vec::new(),
                expires_ms: token.expires_ms,
                player: token.player,
                avatar,
                nonce: token.nonce,
                last_heard: now,
                last_input,
                window: (now, 1),
                malformed: 0,
                next_view: 1,
                sent: VecDeque::new(),
                acked: None,
            },
        );
        self.stats.connected += 1;
        self.events.push_back(SessionEvent::Connected {
            conn,
            player: token.player,
            avatar,
            resumed: was_resumed,
        });
        self.send(
            conn,
            &NodeMsg::Accepted {
                player: token.player,
                avatar,
                frame_ms,
            },
        );
    }

    /// The transport closed `conn` (the client may come back with its token and resume
    /// within the idle timeout; its avatar stays until then).
    pub fn closed(&mut self, conn: ConnId) {
        if let Some(s) = self.sessions.get(&conn)
            && let Some(b) = self.tokens.get_mut(&s.nonce)
        {
            b.last_input = s.last_input;
        }
    }

    /// Hands the player on `conn` to node `target`: its avatar migrates there (paper `001`
    /// §3.2), and once it is bound there the client is told to reconnect to `target` with a
    /// fresh token (paper `002`'s assignment moving a connected player). Inputs in flight
    /// are not lost: the client resends every unconfirmed one through the new node, and the
    /// avatar applies each sequence number once.
    pub fn hand_off(
        &mut self,
        now: Time,
        conn: ConnId,
        target: NodeId,
        node: &mut Node<O>,
    ) -> Result<(), HandOffError> {
        let s = self
            .sessions
            .get_mut(&conn)
            .ok_or(HandOffError::NoSession(conn.0))?;
        if s.handoff.is_some() {
            return Err(HandOffError::Busy(s.player));
        }
        if node
            .store()
            .get(s.avatar)
            .is_none_or(|e| e.role != worldmesh_replica::Role::Primary)
        {
            return Err(HandOffError::NotHere(s.player));
        }
        node.migrate(now, &[s.avatar], target)
            .map_err(HandOffError::Migration)?;
        s.handoff = Some(HandOff {
            target,
            started: now,
            token: None,
        });
        Ok(())
    }

    /// The player on `conn` left through the transport (e.g. a QUIC close meaning "left"):
    /// as a `Disconnect` message.
    pub fn leave(&mut self, now: Time, conn: ConnId, node: &mut Node<O>) {
        self.end(conn, DisconnectReason::ClientLeft, node, now);
    }

    /// Ends every session (the node is stopping or draining).
    pub fn shutdown(&mut self, now: Time, node: &mut Node<O>) {
        let mut conns: Vec<ConnId> = self.sessions.keys().copied().collect();
        conns.sort_unstable();
        for c in conns {
            self.end(c, DisconnectReason::NodeLeaving, node, now);
        }
    }

    fn end(&mut self, conn: ConnId, reason: DisconnectReason, node: &mut Node<O>, now: Time) {
        let Some(s) = self.sessions.remove(&conn) else {
            return;
        };
        if let Some(b) = self.tokens.get_mut(&s.nonce) {
            b.conn = None;
            // A client that ended its session cannot reuse the token.
            b.ended = true;
        }
        // The avatar goes with its player, unless it was handed to another node.
        let handed = s.handoff.as_ref().is_some_and(|h| h.token.is_some());
        if s.handoff.as_ref().is_some_and(|h| h.token.is_none()) {
            self.stats.handoffs_abandoned += 1;
        }
        let reason = if handed {
            DisconnectReason::HandedOff
        } else {
            reason
        };
        if !handed {
            node.write(now, s.avatar, &O::leave_write());
        }
        if s.reported
            && let Some(a) = &mut self.assignment
        {
            a.player_left(s.player, handed);
        }
        *self.stats.disconnected.entry(reason).or_default() += 1;
        self.events.push_back(SessionEvent::Disconnected {
            conn,
            player: s.player,
            reason,
        });
        self.send(conn, &NodeMsg::Disconnected { reason });
    }

    /// Runs after a node frame: ends idle sessions, moves hand-offs on, and sends each
    /// client its view. `unix_ms` is the wall clock (hand-off tokens' expiry).
    pub fn frame(&mut self, now: Time, unix_ms: u64, node: &mut Node<O>) {
        let idle: Vec<ConnId> = {
            let mut v: Vec<ConnId> = self
                .sessions
                .iter()
                .filter(|(_, s)| now.saturating_since(s.last_heard) >= self.cfg.idle_timeout)
                .map(|(c, _)| *c)
                .collect();
            v.sort_unstable();
            v
        };
        for c in idle {
            self.end(c, DisconnectReason::TimedOut, node, now);
        }
        if let Some(a) = &mut self.assignment {
            a.set_members(node.members());
            a.tick(now);
        }
        self.pump_assignment(now, node);
        self.run_placement(now, node);
        self.progress_handoffs(now, unix_ms, node);
        let time_ms = now.0 / 1000;
        let mut conns: Vec<ConnId> = self.sessions.keys().copied().collect();
        conns.sort_unstable();
        let store = node.store();
        let world = node.world().as_ref();
        let grid = (!conns.is_empty()).then(|| ViewGrid::build(store, self.cfg.view_cell));
        let mut candidates: Vec<ObjectId> = Vec::new();
        for conn in conns {
            let Some(s) = self.sessions.get_mut(&conn) else {
                continue;
            };
            if s.handoff.is_some() {
                continue; // no views while the avatar moves; the hand-off message instead
            }
            let avatar = store.object(s.avatar);
            let mut objects: Vec<(ObjectId, O)> = Vec::new();
            if let (Some(a), Some(grid)) = (avatar, &grid) {
                // Candidates from the cells the area of interest overlaps, in id order;
                // the game's own `is_interested` decides.
                candidates.clear();
                if let Some(b) = a.interest(world) {
                    grid.within(b, &mut candidates);
                }
                candidates.push(s.avatar);
                candidates.sort_unstable();
                candidates.dedup();
                for &id in &candidates {
                    let Some(o) = store.object(id) else {
                        continue;
                    };
                    if id == s.avatar || (objects.len() < MAX_VIEW_OBJECTS && a.is_interested(o, world)) {
                        objects.push((id, o.clone()));
                    }
                }
            }
            let last_input = avatar.and_then(O::last_input);
            let base = s
                .acked
                .and_then(|a| s.sent.iter().find(|v| v.seq == a))
                .map(|v| (v.seq, &v.objects));
            let entries = diff(base.map(|b| b.1.as_slice()), &objects);
            let seq = s.next_view;
            s.next_view = s.next_view.wrapping_add(1);
            let (parts, unsent) = split_view(seq, base.map(|b| b.0), time_ms, last_input, entries);
            if !unsent.is_empty() {
                // What the client will not have must not become a delta base.
                objects.retain(|(id, _)| !unsent.contains(id));
            }
            s.sent.push_back(SentView { seq, objects });
            while s.sent.len() > self.cfg.view_history.max(1) {
                s.sent.pop_front();
            }
            for p in parts {
                self.stats.view_datagrams += 1;
                self.stats.bytes_out += p.len() as u64;
                self.transmits.push_back((conn, p));
            }
        }
    }
}

impl<O: Playable> Sessions<O> {
    fn run_placement(&mut self, now: Time, node: &mut Node<O>) {
        let Some(p) = &mut self.placement else {
            return;
        };
        // Borrowed, not copied: the loop may read every player's delays each frame.
        let oracle = ReportedDelays(
            self.sessions
                .values()
                .filter(|s| s.handoff.is_none())
                .map(|s| (s.player as u32, s.delays.as_slice()))
                .collect(),
        );
        // Players are located by their id, as the oracle knows them.
        let locate = |o: &O| o.player().map(|p| p as u32);
        match node.run_placement_by(now, p, &oracle, &locate) {
            Ok(crate::PlacementOutcome::Migrate(_)) => self.stats.region_migrations += 1,
            Ok(_) => {}
            // A player has not reported its delays yet: the next frame tries again.
            Err(_) => self.stats.placement_skipped += 1,
        }
    }

    fn progress_handoffs(&mut self, now: Time, unix_ms: u64, node: &mut Node<O>) {
        // An avatar whose primary moved elsewhere without a hand-off (a drain, a placement
        // decision, a region migration) takes its player along: hand the client to the node
        // that holds it now — the primary of the replica kept here, or, when this node keeps
        // none (with interest management a node that has given everything up, e.g. in a
        // drain, is interested in nothing), the node its forwarding entry names.
        for s in self.sessions.values_mut() {
            if s.handoff.is_some() {
                continue;
            }
            let moved_to = match node.store().get(s.avatar).map(|e| e.role) {
                Some(worldmesh_replica::Role::Replica { primary }) => Some(primary),
                Some(worldmesh_replica::Role::Primary) => None,
                None => node.replicas().names().forwarding(s.avatar).map(|b| b.node),
            };
            if let Some(target) = moved_to.filter(|n| *n != node.id()) {
                s.handoff = Some(HandOff {
                    target,
                    started: now,
                    token: None,
                });
            }
        }
        let mut conns: Vec<ConnId> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.handoff.is_some())
            .map(|(c, _)| *c)
            .collect();
        conns.sort_unstable();
        for conn in conns {
            let Some(s) = self.sessions.get_mut(&conn) else {
                continue;
            };
            let Some(h) = &mut s.handoff else {
                continue;
            };
            let here = node
                .store()
                .get(s.avatar)
                .is_some_and(|e| e.role == worldmesh_replica::Role::Primary);
            if h.token.is_none() {
                if here && now.saturating_since(h.started) < self.cfg.handoff_timeout {
                    continue; // still migrating
                }
                if here {
                    // The migration did not complete: the player stays.
                    s.handoff = None;
                    self.stats.handoffs_failed += 1;
                    continue;
                }
                let mut nonce = [0u8; 16];
                let rng = node.rng();
                nonce[..8].copy_from_slice(&rng.next_u64().to_le_bytes());
                nonce[8..].copy_from_slice(&rng.next_u64().to_le_bytes());
                let t = ConnectToken {
                    player: s.player,
                    nodes: vec![h.target],
                    expires_ms: s
                        .expires_ms
                        .min(unix_ms.saturating_add(self.cfg.handoff_token_ms)),
                    nonce,
                };
                match t.issue(&self.key) {
                    Ok(bytes) => {
                        h.token = Some(bytes);
                        self.stats.handoffs += 1;
                    }
                    Err(_) => {
                        s.handoff = None;
                        self.stats.handoffs_failed += 1;
                        continue;
                    }
                }
            }
            if let Some((target, Some(token))) = s.handoff.as_ref().map(|h| (h.target, h.token.clone())) {
                self.send(conn, &NodeMsg::HandOff { node: target, token });
            }
        }
    }
}

/// The store's objects by grid cell, built once per frame so that each view looks only at
/// the cells its area of interest overlaps (instead of every object, for every player: the
/// `player-capacity` experiment measured that scan at 90% of a 2,000-player frame).
struct ViewGrid {
    cell: f32,
    cells: HashMap<(i32, i32), Vec<(ObjectId, worldmesh_core::Point3)>>,
}

/// Most cells one view may look at; a larger area of interest scans everything instead.
const MAX_VIEW_CELLS: i64 = 4096;

impl ViewGrid {
    fn key(&self, x: f32, y: f32) -> (i32, i32) {
        let k = |v: f32| worldmesh_core::floor_i32(v / self.cell);
        (k(x), k(y))
    }

    fn build<O: GameObject>(store: &worldmesh_replica::ObjectStore<O>, cell: f32) -> Self {
        let mut g = Self {
            cell: if cell.is_finite() && cell > 0.0 {
                cell
            } else {
                450.0
            },
            cells: HashMap::new(),
        };
        for (id, e) in store.iter() {
            let p = e.object.position();
            g.cells.entry(g.key(p.x, p.y)).or_default().push((id, p));
        }
        g
    }

    /// Ids of the objects whose position lies in `b` (x and y; z checked too).
    fn within(&self, b: worldmesh_core::Aabb, out: &mut Vec<ObjectId>) {
        let (x0, y0) = self.key(b.min.x, b.min.y);
        let (x1, y1) = self.key(b.max.x, b.max.y);
        let span = (i64::from(x1) - i64::from(x0) + 1) * (i64::from(y1) - i64::from(y0) + 1);
        let mut take = |v: &Vec<(ObjectId, worldmesh_core::Point3)>| {
            out.extend(v.iter().filter(|(_, p)| b.contains(*p)).map(|(id, _)| *id));
        };
        if span > MAX_VIEW_CELLS || span <= 0 {
            self.cells.values().for_each(&mut take);
            return;
        }
        for x in x0..=x1 {
            for y in y0..=y1 {
                if let Some(v) = self.cells.get(&(x, y)) {
                    take(v);
                }
            }
        }
    }
}

/// The delays players reported, as the placement loop's latency oracle (clients located by
/// their player id's low 32 bits: [`Playable::player`]).
struct ReportedDelays<'a>(HashMap<u32, &'a [(u32, f32)]>);

impl crate::LatencyOracle for ReportedDelays<'_> {
    fn client_rtt_ms(&self, client: u32, node: NodeId) -> Option<f64> {
        self.0
            .get(&client)?
            .iter()
            .find(|(n, _)| *n == node.0)
            .map(|(_, d)| f64::from(*d))
    }
}

fn note_ack<O>(s: &mut Session<O>, a: u32) {
    // Only views actually sent and newer than the current base count.
    if seq_newer(s.next_view, a) && s.acked.is_none_or(|cur| seq_newer(a, cur)) {
        s.acked = Some(a);
    }
}

/// The changes from `base` (sorted by id) to `now` (sorted by id).
fn diff<O: GameObject + PartialEq>(base: Option<&[(ObjectId, O)]>, now: &[(ObjectId, O)]) -> Vec<ViewEntry> {
    let mut out = Vec::new();
    let base = base.unwrap_or(&[]);
    let (mut i, mut j) = (0, 0);
    let mut buf = Vec::new();
    while i < base.len() || j < now.len() {
        let b = base.get(i);
        let n = now.get(j);
        match (b, n) {
            (Some((bid, bo)), Some((nid, no))) if bid == nid => {
                if bo != no {
                    buf.clear();
                    no.encode_delta(bo, &mut buf);
                    out.push(ViewEntry {
                        id: *nid,
                        change: Change::Delta(buf.clone()),
                    });
                }
                i += 1;
                j += 1;
            }
            (Some((bid, _)), Some((nid, _))) if bid < nid => {
                out.push(ViewEntry {
                    id: *bid,
                    change: Change::Removed,
                });
                i += 1;
            }
            (Some((bid, _)), None) => {
                out.push(ViewEntry {
                    id: *bid,
                    change: Change::Removed,
                });
                i += 1;
            }
            (_, Some((nid, no))) => {
                buf.clear();
                no.encode_state(&mut buf);
                out.push(ViewEntry {
                    id: *nid,
                    change: Change::Full(buf.clone()),
                });
                j += 1;
            }
            (None, None) => break,
        }
    }
    out
}
