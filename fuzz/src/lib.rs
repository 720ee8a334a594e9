//! Harnesses of worldmesh's fuzz targets: one function per target, each fed the raw bytes
//! libFuzzer generates. The binaries in `fuzz_targets/` are one-line wrappers around these
//! (libFuzzer's entry point is an exported `extern "C"` symbol, which needs `unsafe` in
//! the macro that defines it; this library has none), and `gen_seeds` writes the seed
//! corpora from the same builders, so seeds and harness agree on every input layout.
//!
//! A harness never panics on its own account: any panic (or failed assertion) is a
//! finding. Invariants that must hold whatever the input are asserted here.

#![forbid(unsafe_code)]

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use worldmesh_client::proto::{CLIENT_PROTOCOL_VERSION, ClientMsg, NodeMsg};
use worldmesh_client::{Client, ClientConfig, ConnectToken, TokenKey};
use worldmesh_core::latency::MatrixFormat;
use worldmesh_core::wire::MAX_PAYLOAD;
use worldmesh_core::{Aabb, Frame, LatencyMatrix, MessageClass, NodeId, ObjectId, Point3, Time};
use worldmesh_game::model::Player;
use worldmesh_game::{GameMap, ModelConfig, ModelObject};
use worldmesh_locator::msg::LocatorCodec;
use worldmesh_locator::{Keying, Locator, LocatorConfig, LocatorMsg};
use worldmesh_node::assignment::{AssignMsg, AssignmentAgent, AssignmentConfig};
use worldmesh_node::instance_wire::ControlEnvelope;
use worldmesh_node::membership::MembershipConfig;
use worldmesh_node::sessions::{ConnId, SessionConfig, Sessions};
use worldmesh_node::{Event, MigrationMsg, Mode, Node, NodeConfig, Packet};
use worldmesh_replica::Role;

/// Reads a fuzz input as a sequence of small records (see each harness for its layout).
#[derive(Debug)]
pub struct Input<'a> {
    rest: &'a [u8],
}

impl<'a> Input<'a> {
    /// A reader over `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Self { rest: data }
    }

    /// The next byte, if any.
    pub fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.rest.split_first()?;
        self.rest = rest;
        Some(b)
    }

    /// A chunk of at most `u16` bytes: a little-endian length, then that many bytes (fewer
    /// if the input ends first).
    pub fn chunk(&mut self) -> Option<&'a [u8]> {
        let lo = self.byte()?;
        let hi = self.byte().unwrap_or(0);
        let len = usize::from(u16::from_le_bytes([lo, hi])).min(self.rest.len());
        let (chunk, rest) = self.rest.split_at(len);
        self.rest = rest;
        Some(chunk)
    }
}

/// Appends a record as [`Input::chunk`] reads it.
pub fn put_chunk(out: &mut Vec<u8>, bytes: &[u8]) {
    let len = u16::try_from(bytes.len()).expect("seed chunks fit a u16 length");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(bytes);
}

thread_local! {
    /// The locator codec [`wire_frame`] reuses across inputs.
    static LOCATOR_CODEC: std::cell::RefCell<LocatorCodec> = std::cell::RefCell::new(LocatorCodec::new());
}

/// **wire_frame**: every stateless datagram decoder. The input is one datagram: the node
/// frame header ([`Frame::parse`]); when it parses, the payload is decoded as what its
/// class carries (replica [`Packet`], [`MigrationMsg`], [`LocatorMsg`] — by the locator's
/// [`LocatorCodec`] and by the derived decoder, which must agree, and what the codec
/// decoded encoded back by it and by the derived encoder, which must agree too; one codec
/// serves every input, as in a locator —, and for Control the
/// channel byte's payload as an instance [`ControlEnvelope`] and an [`AssignMsg`]). The
/// same bytes also go to the QUIC stream greeting ([`worldmesh_net::hello::Hello::decode`]).
pub fn wire_frame(data: &[u8]) {
    let _ = worldmesh_net::hello::Hello::decode(data);
    let Ok(frame) = Frame::parse(data, MAX_PAYLOAD) else {
        return;
    };
    assert_eq!(frame.payload.len() + worldmesh_core::wire::HEADER_LEN, data.len());
    match frame.class {
        MessageClass::ObjectUpdate => {
            let _ = Packet::decode(frame.payload);
        }
        MessageClass::Migration => {
            let _ = frame.decode::<MigrationMsg>();
        }
        MessageClass::Control => {
            if let Some((_, payload)) = frame.payload.split_first() {
                if let Ok(env) = bitcode::decode::<ControlEnvelope>(payload) {
                    let _ = env.msg.into_msg();
                }
                let _ = AssignMsg::decode(payload);
            }
        }
        _ => {
            // The locator's own codec must read exactly what the derived decoder reads
            // (compared by their derived encodings, so NaN fields compare equal).
            // One codec for every input, as a locator keeps one: its buffers carry what
            // earlier inputs left in them.
            let derived = frame.decode::<LocatorMsg>().ok();
            let ours = LOCATOR_CODEC.with_borrow_mut(|c| c.decode(&frame).ok());
            assert_eq!(
                derived.as_ref().map(bitcode::encode),
                ours.as_ref().map(bitcode::encode),
                "LocatorCodec and the derived decoder disagree: {derived:?} / {ours:?}"
            );
            // What it decoded it encodes as the derived encoder does.
            if let Some(msg) = ours {
                let again = LOCATOR_CODEC.with_borrow_mut(|c| c.encode(&msg));
                assert_eq!(
                    again.ok(),
                    worldmesh_core::wire::encode(msg.class(), &msg).ok(),
                    "LocatorCodec encodes {msg:?} unlike the derived encoder"
                );
            }
        }
    }
}

/// **replica_codec**: [`Packet::decode`], the replica manager's own varint codec. A packet
/// that decodes must encode back to bytes that decode to the same packet.
pub fn replica_codec(data: &[u8]) {
    if let Ok(p) = Packet::decode(data) {
        let again = Packet::decode(&p.encode()).expect("a decoded packet re-encodes to a valid one");
        assert_eq!(again, p, "decode(encode(p)) == p");
    }
}

/// The shared game world of the node harness (generated once: it is read-only).
fn world() -> Arc<GameMap> {
    static WORLD: OnceLock<Arc<GameMap>> = OnceLock::new();
    Arc::clone(WORLD.get_or_init(|| Arc::new(GameMap::generate(&ModelConfig::default(), 8, 11))))
}

/// The key the harness's sessions trust (the fuzzer does not know it: it cannot forge
/// tokens, but a harness-made connection gives it a live session to talk to).
pub fn token_key() -> TokenKey {
    TokenKey::from_bytes([7; 32])
}

/// Wall clock the sessions see (tokens expire long after).
pub const UNIX_MS: u64 = 1_800_000_000_000;

/// The members of the harness cluster: node 0 (the one under test) and three peers.
pub const MEMBERS: [NodeId; 4] = [NodeId(0), NodeId(1), NodeId(2), NodeId(3)];

/// A member of the harness cluster as the fuzz harness builds it: interest mode, SWIM
/// membership, the distributed locator attached, four players spawned, one frame run.
pub fn cluster_node(id: NodeId) -> Node<ModelObject> {
    let world = world();
    let peers = MEMBERS.iter().copied().filter(|p| *p != id).collect();
    let mut cfg = NodeConfig::new(id, peers, 5).with_mode(Mode::Interest);
    cfg.membership = Some(MembershipConfig::lan());
    let mut node = Node::new(cfg, Arc::clone(&world), Time::ZERO);
    for p in world.waypoints.iter().take(4) {
        node.spawn(Time::ZERO, ModelObject::Player(Player::new(*p, 450.0)));
    }
    let bounds = Aabb::from_corners(
        Point3::new(0.0, 0.0, -100.0),
        Point3::new(world.width, world.height, 100.0),
    );
    let loc = Locator::new(
        id,
        LocatorConfig::new(Keying::RangeDht, bounds),
        &MEMBERS,
        &MEMBERS,
        5,
        Time::ZERO,
    )
    .expect("the harness's locator configuration is valid");
    node.attach_locator(loc);
    node.handle_timeout(Time::ZERO);
    node
}

/// A connect token for `player` on node 0, signed with [`token_key`].
pub fn token(player: u64) -> Vec<u8> {
    ConnectToken {
        player,
        nodes: vec![NodeId(0)],
        expires_ms: UNIX_MS + 3_600_000,
        nonce: [player as u8; 16],
    }
    .issue(&token_key())
    .expect("a valid token")
}

/// The connection the harness opens before the fuzz input (player 1).
pub const LIVE_CONN: ConnId = ConnId(1);

/// Node 0 of the harness cluster with its players' sessions (and the assignment agent),
/// one player connected on [`LIVE_CONN`].
pub struct NodeHarness {
    /// The node under test.
    pub node: Node<ModelObject>,
    /// Its client sessions.
    pub sessions: Sessions<ModelObject>,
    /// The node's time.
    pub now: Time,
    /// Whether the node was declared failed by the cluster (SWIM's `TurnUndead`) and
    /// rejoined as its next generation, dropping its primaries by design.
    pub rejoined: bool,
}

impl Default for NodeHarness {
    fn default() -> Self {
        Self::new()
    }
}

impl NodeHarness {
    /// A fresh harness.
    pub fn new() -> Self {
        let node = cluster_node(NodeId(0));
        let sessions = Sessions::new(SessionConfig::default(), token_key())
            .with_assignment(AssignmentAgent::new(NodeId(0), AssignmentConfig::default()));
        let mut h = Self {
            node,
            sessions,
            now: Time::from_millis(1),
            rejoined: false,
        };
        let connect = ClientMsg::Connect {
            version: CLIENT_PROTOCOL_VERSION,
            token: token(1),
        }
        .encode();
        h.client_datagram(LIVE_CONN, &connect);
        h
    }

    /// Hands a datagram from member (or stranger) `from` to the node, and the players'
    /// messages it raises to the sessions.
    pub fn peer_datagram(&mut self, from: NodeId, bytes: &[u8]) {
        self.node.handle_datagram(self.now, from, bytes);
        self.pump();
    }

    /// Hands a client datagram on `conn` to the sessions.
    pub fn client_datagram(&mut self, conn: ConnId, bytes: &[u8]) {
        self.sessions
            .handle_datagram(self.now, UNIX_MS, conn, bytes, &mut self.node);
        self.pump();
    }

    fn pump(&mut self) {
        while let Some(e) = self.node.poll_event() {
            match e {
                Event::Players { from, payload } => {
                    self.sessions
                        .handle_node_message(self.now, from, &payload, &mut self.node);
                }
                Event::Rejoined(_) => self.rejoined = true,
                _ => {}
            }
        }
        while self.node.poll_transmit().is_some() {}
        while self.sessions.poll_transmit().is_some() {}
        while self.sessions.poll_event().is_some() {}
    }

    /// This node's primaries other than the connected players' avatars.
    pub fn own_primaries(&self) -> Vec<ObjectId> {
        let avatar = self.sessions.avatar_of(LIVE_CONN);
        self.node
            .store()
            .iter()
            .filter(|(id, e)| e.role == Role::Primary && Some(*id) != avatar)
            .map(|(id, _)| id)
            .collect()
    }
}

/// **node_datagram**: a real [`Node`] (interest mode, SWIM membership, distributed locator,
/// client sessions with the assignment agent) fed a sequence of datagrams, so every
/// decoder behind `Node::handle_datagram` is reached with the node's state behind it:
/// frame header, replica packets, migration, locator, Control channels (instance
/// failover, membership, players'/assignment) and client datagrams.
///
/// Layout: records of `op`, then a [`Input::chunk`]. `op % 8`: 0–4 a datagram from node
/// `op % 8` (0 is the node itself, 4 is not a member), 5–6 a client datagram on the live
/// connection, 7 on a fresh one. Time advances by `op / 8` ms before each record; no
/// frame runs, so nothing but the input can change the node.
///
/// Invariant: foreign input never takes a primary away from the node (no peer can make
/// an object the node owns a replica or delete it without a migration the node started),
/// except when a member tells the node the cluster declared it failed (SWIM's
/// `TurnUndead`): then, by design, it drops everything and rejoins as its next generation
/// (`node/cluster.rs`, `rejoined`), and none of its old primaries may survive.
pub fn node_datagram(data: &[u8]) {
    let mut h = NodeHarness::new();
    let before = h.own_primaries();
    let mut input = Input::new(data);
    while let Some(op) = input.byte() {
        let Some(bytes) = input.chunk() else {
            break;
        };
        h.now = h.now.saturating_add(Duration::from_millis(u64::from(op / 8)));
        match op % 8 {
            k @ 0..=4 => h.peer_datagram(NodeId(u32::from(k)), bytes),
            5 | 6 => h.client_datagram(LIVE_CONN, bytes),
            _ => h.client_datagram(ConnId(2), bytes),
        }
    }
    for id in before {
        let role = h.node.store().get(id).map(|e| e.role);
        if h.rejoined {
            assert_ne!(role, Some(Role::Primary), "a rejoined node kept primary {id:?}");
        } else {
            assert_eq!(
                role,
                Some(Role::Primary),
                "foreign input took primary {id:?} away"
            );
        }
    }
}

/// A standalone locator (node 0 of [`MEMBERS`]) over the harness world.
pub fn locator(keying: Keying) -> Locator {
    let bounds = Aabb::from_corners(Point3::new(0.0, 0.0, -100.0), Point3::new(4096.0, 4096.0, 100.0));
    Locator::new(
        NodeId(0),
        LocatorConfig::new(keying, bounds),
        &MEMBERS,
        &MEMBERS,
        5,
        Time::ZERO,
    )
    .expect("the harness's locator configuration is valid")
}

/// **locator_datagram**: a standalone distributed [`Locator`] (both keyings) fed a
/// sequence of datagrams. Layout: records of `op`, then a [`Input::chunk`]: the datagram
/// comes from node `op % 5` (4 is not a member); time advances by `op / 5` ms, and every
/// 16th record runs the locator's timers.
pub fn locator_datagram(data: &[u8]) {
    let keying = if data.first().is_some_and(|b| b & 0x80 != 0) {
        Keying::Dht
    } else {
        Keying::RangeDht
    };
    let mut loc = locator(keying);
    let mut now = Time::ZERO;
    let mut input = Input::new(data.get(1..).unwrap_or_default());
    let mut n = 0u32;
    while let Some(op) = input.byte() {
        let Some(bytes) = input.chunk() else {
            break;
        };
        now = now.saturating_add(Duration::from_millis(u64::from(op / 5)));
        loc.handle_datagram(now, NodeId(u32::from(op % 5)), bytes);
        n += 1;
        if n.is_multiple_of(16) {
            loc.handle_timeout(now);
        }
        while loc.poll_transmit().is_some() {}
        while loc.poll_discovery().is_some() {}
        while loc.poll_push().is_some() {}
    }
}

/// **client_proto**: the client protocol's decoders on both sides and connect tokens.
/// The first byte picks: 0 [`ClientMsg::decode`] (what a node reads from players), 1
/// [`NodeMsg::decode`] and a connected [`Client`] fed a sequence of node datagrams, 2
/// [`ConnectToken::verify`] (with the harness key, so a mutated real token gets past the
/// tag check only if the fuzzer keeps its tag intact), 3 the hex codecs
/// ([`worldmesh_client::token::from_hex`], [`TokenKey::from_hex`]).
pub fn client_proto(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    match sel % 4 {
        0 => {
            if let Ok(m) = ClientMsg::decode(rest) {
                assert!(
                    ClientMsg::decode(&m.encode()).is_ok(),
                    "a decoded message re-decodes"
                );
            }
        }
        1 => {
            let _ = NodeMsg::decode(rest);
            let mut c: Client<ModelObject> = Client::new(ClientConfig::default(), token(1), Time::ZERO);
            let mut now = Time::ZERO;
            let mut input = Input::new(rest);
            while let Some(op) = input.byte() {
                let Some(bytes) = input.chunk() else {
                    break;
                };
                now = now.saturating_add(Duration::from_millis(u64::from(op)));
                c.handle_datagram(now, bytes);
                if op & 1 == 1 {
                    c.handle_timeout(now);
                }
                while c.poll_transmit().is_some() {}
                while c.poll_event().is_some() {}
            }
        }
        2 => {
            if let Ok(t) = ConnectToken::verify(&token_key(), rest, NodeId(0), UNIX_MS) {
                assert!(t.nodes.contains(&NodeId(0)), "a verified token names the node");
            }
        }
        _ => {
            let text = String::from_utf8_lossy(rest);
            if let Ok(b) = worldmesh_client::token::from_hex(&text, 64) {
                assert!(b.len() <= 64);
                assert_eq!(
                    worldmesh_client::token::from_hex(&worldmesh_client::token::to_hex(&b), 64),
                    Ok(b)
                );
            }
            let _ = TokenKey::from_hex(&text);
        }
    }
}

/// **text_configs**: the text formats read from files and flags. The first byte picks
/// the parser of the UTF-8 text after it: 0 the simulator's TOML configuration
/// ([`worldmesh_sim::SimConfig::from_toml_str`], with validation), 1 a load-model map
/// ([`worldmesh_loadmodel::Map::parse_toml`]), 2 a load-state plan
/// ([`worldmesh_loadmodel::LoadPlan::parse_toml`]), 3 a movement trace
/// ([`worldmesh_loadmodel::Trace::parse`]), 4 the map and area-of-interest specs
/// ([`worldmesh_loadmodel::MapSpec::parse`], [`worldmesh_loadmodel::AoiRule::parse`]).
pub fn text_configs(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    match sel % 5 {
        0 => {
            let _ = worldmesh_sim::SimConfig::from_toml_str(text, "fuzz.toml");
        }
        1 => {
            let _ = worldmesh_loadmodel::Map::parse_toml(text, "fuzz.toml");
        }
        2 => {
            let _ = worldmesh_loadmodel::LoadPlan::parse_toml(text, "fuzz.toml");
        }
        3 => {
            let _ = worldmesh_loadmodel::Trace::parse(text, "fuzz.trace");
        }
        _ => {
            let _ = worldmesh_loadmodel::MapSpec::parse(text);
            let _ = worldmesh_loadmodel::AoiRule::parse(text);
        }
    }
}

/// **latency_matrix**: [`LatencyMatrix::parse`] of the UTF-8 text after the first byte,
/// whose low bit picks the format (whitespace or CSV).
pub fn latency_matrix(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let format = if sel & 1 == 0 {
        MatrixFormat::Whitespace
    } else {
        MatrixFormat::Csv
    };
    let _ = LatencyMatrix::parse(text, format, "fuzz");
}

/// **dashboard_msg**: what a browser sends the dashboard. The first byte picks: even, the
/// text message ([`worldmesh_dashboard::wire::ClientMsg::parse`]) and object ids
/// ([`worldmesh_dashboard::wire::parse_object_id`]); odd, the binary focus message
/// ([`worldmesh_dashboard::wire::decode_focus`]).
pub fn dashboard_msg(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    if sel & 1 == 0 {
        if let Ok(text) = std::str::from_utf8(rest) {
            let _ = worldmesh_dashboard::wire::ClientMsg::parse(text);
            let _ = worldmesh_dashboard::wire::parse_object_id(text);
        }
    } else {
        let _ = worldmesh_dashboard::wire::decode_focus(rest);
    }
}

/// The targets, in the order `scripts/fuzz.sh --list` prints them.
pub const TARGETS: [&str; 8] = [
    "wire_frame",
    "replica_codec",
    "node_datagram",
    "locator_datagram",
    "client_proto",
    "text_configs",
    "latency_matrix",
    "dashboard_msg",
];

/// Runs target `name` on `data` (for replaying corpora without libFuzzer).
pub fn run(name: &str, data: &[u8]) -> bool {
    match name {
        "wire_frame" => wire_frame(data),
        "replica_codec" => replica_codec(data),
        "node_datagram" => node_datagram(data),
        "locator_datagram" => locator_datagram(data),
        "client_proto" => client_proto(data),
        "text_configs" => text_configs(data),
        "latency_matrix" => latency_matrix(data),
        "dashboard_msg" => dashboard_msg(data),
        _ => return false,
    }
    true
}
