//! Players' sessions driven by hand: one node, its session table and sans-IO clients,
//! exchanging datagrams through a lossy, duplicating, reordering link in virtual time.

use std::sync::Arc;
use std::time::Duration;

use worldmesh_client::proto::{ClientMsg, DisconnectReason, RefuseReason};
use worldmesh_client::{Client, ClientConfig, ClientEvent, ClientState, ConnectToken, TokenKey};
use worldmesh_core::{DetRng, NodeId, ObjectId, Point3, Time};
use worldmesh_game::model::Player;
use worldmesh_game::{GameMap, ModelConfig, ModelObject, PlayerInput};
use worldmesh_node::sessions::{ConnId, SessionConfig, SessionEvent, Sessions};
use worldmesh_node::{Mode, Node, NodeConfig};
use worldmesh_replica::GameObject;

/// The wall clock of the run: virtual time plus a fixed epoch.
const EPOCH_MS: u64 = 1_800_000_000_000;

fn key() -> TokenKey {
    TokenKey::from_bytes([9; 32])
}

fn token(player: u64, nodes: &[u32], expires_ms: u64, nonce: u8) -> Vec<u8> {
    ConnectToken {
        player,
        nodes: nodes.iter().copied().map(NodeId).collect(),
        expires_ms,
        nonce: [nonce; 16],
    }
    .issue(&key())
    .unwrap()
}

/// A datagram in flight.
struct Flight {
    at: Time,
    to_node: bool,
    conn: ConnId,
    bytes: Vec<u8>,
}

struct Harness {
    now: Time,
    node: Node<ModelObject>,
    sessions: Sessions<ModelObject>,
    clients: Vec<(ConnId, Client<ModelObject>)>,
    events: Vec<(ConnId, ClientEvent)>,
    node_events: Vec<SessionEvent>,
    flights: Vec<Flight>,
    rng: DetRng,
    loss: f64,
    dup: f64,
    frames: u64,
    next_conn: u64,
}

impl Harness {
    fn new(cfg: SessionConfig, seed: u64) -> Self {
        let map = GameMap::generate(&ModelConfig::default(), 16, seed);
        // Something to see: a few bots at the waypoints.
        let points: Vec<Point3> = map.waypoints.iter().take(8).copied().collect();
        let mut node = Node::new(
            NodeConfig::new(NodeId(1), vec![], seed).with_mode(Mode::Broadcast),
            Arc::new(map),
            Time::ZERO,
        );
        for p in points {
            node.spawn(Time::ZERO, ModelObject::Player(Player::new(p, 450.0)));
        }
        Self {
            now: Time::ZERO,
            node,
            sessions: Sessions::new(cfg, key()),
            clients: Vec::new(),
            events: Vec::new(),
            node_events: Vec::new(),
            flights: Vec::new(),
            rng: DetRng::new(seed),
            loss: 0.0,
            dup: 0.0,
            frames: 0,
            next_conn: 0,
        }
    }

    fn unix_ms(&self) -> u64 {
        EPOCH_MS + self.now.0 / 1000
    }

    fn add_client(&mut self, token: Vec<u8>) -> ConnId {
        self.next_conn += 1;
        let conn = ConnId(self.next_conn);
        self.clients
            .push((conn, Client::new(ClientConfig::default(), token, self.now)));
        conn
    }

    fn client(&mut self, conn: ConnId) -> &mut Client<ModelObject> {
        &mut self.clients.iter_mut().find(|(c, _)| *c == conn).unwrap().1
    }

    /// Queues a datagram through the link: lost, duplicated, delayed 10–40 ms (so
    /// reordered).
    fn post(&mut self, to_node: bool, conn: ConnId, bytes: Vec<u8>) {
        let copies = if self.rng.chance(self.loss) {
            0
        } else if self.rng.chance(self.dup) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let at = self
                .now
                .saturating_add(Duration::from_millis(10 + self.rng.below(31)));
            self.flights.push(Flight {
                at,
                to_node,
                conn,
                bytes: bytes.clone(),
            });
        }
    }

    fn collect(&mut self) {
        while let Some((conn, bytes)) = self.sessions.poll_transmit() {
            self.post(false, conn, bytes);
        }
        while let Some(e) = self.sessions.poll_event() {
            self.node_events.push(e);
        }
        let mut out = Vec::new();
        for (conn, c) in &mut self.clients {
            while let Some(b) = c.poll_transmit() {
                out.push((*conn, b));
            }
            while let Some(e) = c.poll_event() {
                self.events.push((*conn, e));
            }
        }
        for (conn, b) in out {
            self.post(true, conn, b);
        }
    }

    /// Advances 5 ms.
    fn step(&mut self) {
        self.now = self.now.saturating_add(Duration::from_millis(5));
        let now = self.now;
        let unix = self.unix_ms();
        let (due, later): (Vec<Flight>, Vec<Flight>) = std::mem::take(&mut self.flights)
            .into_iter()
            .partition(|f| f.at <= now);
        self.flights = later;
        for f in due {
            if f.to_node {
                self.sessions
                    .handle_datagram(now, unix, f.conn, &f.bytes, &mut self.node);
            } else if let Some((_, c)) = self.clients.iter_mut().find(|(c, _)| *c == f.conn) {
                c.handle_datagram(now, &f.bytes);
            }
        }
        if self.node.poll_timeout().is_some_and(|t| t <= now) {
            self.node.handle_timeout(now);
            self.sessions.frame(now, unix, &mut self.node);
            self.frames += 1;
        }
        for (_, c) in &mut self.clients {
            if c.poll_timeout().is_some_and(|t| t <= now) {
                c.handle_timeout(now);
            }
        }
        while self.node.poll_event().is_some() {}
        while self.node.poll_transmit().is_some() {}
        self.collect();
    }

    fn run(&mut self, d: Duration) {
        let until = self.now.saturating_add(d);
        while self.now < until {
            self.step();
        }
    }

    fn refusals(&self, conn: ConnId) -> Vec<RefuseReason> {
        self.events
            .iter()
            .filter_map(|(c, e)| match e {
                ClientEvent::Refused(r) if *c == conn => Some(*r),
                _ => None,
            })
            .collect()
    }
}

fn far_future() -> u64 {
    EPOCH_MS + 3_600_000
}

#[test]
fn a_player_connects_sees_its_area_and_every_input_is_applied_exactly_once_under_loss() {
    let mut h = Harness::new(SessionConfig::default(), 3);
    h.loss = 0.05;
    h.dup = 0.05;
    let conn = h.add_client(token(7, &[1], far_future(), 1));
    h.run(Duration::from_secs(1));
    let ClientState::Connected { avatar, player, .. } = h.client(conn).state().clone() else {
        panic!("not connected: {:?}", h.client(conn).state());
    };
    assert_eq!(player, 7);
    assert!(
        h.node
            .store()
            .get(avatar)
            .is_some_and(|e| e.role == worldmesh_replica::Role::Primary)
    );
    // 10 s of inputs at 20 Hz, turning every second.
    let mut sent = 0u32;
    for k in 0..200u32 {
        let dir = [(127, 0), (0, 127), (-127, 0), (0, -127)][(k / 20 % 4) as usize];
        let input = PlayerInput {
            dx: dir.0,
            dy: dir.1,
            fire: None,
        };
        let now = h.now;
        assert_eq!(h.client(conn).send_input(now, &input), Some(k + 1));
        sent += 1;
        h.collect();
        h.run(Duration::from_millis(50));
    }
    // Stop (so the node's avatar stands still and the client's newest view catches up).
    let now = h.now;
    h.client(conn).send_input(now, &PlayerInput::default());
    sent += 1;
    h.collect();
    h.loss = 0.0;
    h.run(Duration::from_secs(1));
    let s = h.sessions.stats().clone();
    assert_eq!(s.inputs_applied, u64::from(sent), "{s:?}");
    assert_eq!(s.inputs_skipped, 0, "{s:?}");
    assert!(
        s.inputs_duplicated > 0,
        "inputs are resent until confirmed: {s:?}"
    );
    let on_node = h.node.store().object(avatar).unwrap().clone();
    let got: Vec<ObjectId> = h.client(conn).view().unwrap().objects.keys().copied().collect();
    let c = h.client(conn);
    assert_eq!(c.pending_inputs().count(), 0, "all confirmed");
    assert_eq!(
        c.avatar(),
        Some(&on_node),
        "the client's view of its avatar is the node's"
    );
    assert_eq!(on_node.last_input_seq(), Some(sent));
    // The view is what the avatar's area of interest holds on the node, and nothing else.
    let expected: Vec<ObjectId> = h
        .node
        .store()
        .iter()
        .filter(|(id, e)| *id == avatar || on_node.is_interested(&e.object, h.node.world()))
        .map(|(id, _)| id)
        .collect();
    assert_eq!(got, expected);
    // A view per frame reaches the client, but for the ones lost (5% per datagram).
    let views = h.client(conn).stats().views;
    assert!(views * 10 >= h.frames * 8, "{views} views in {} frames", h.frames);
}

trait LastInput {
    fn last_input_seq(&self) -> Option<u32>;
}

impl LastInput for ModelObject {
    fn last_input_seq(&self) -> Option<u32> {
        <ModelObject as worldmesh_client::Playable>::last_input(self)
    }
}

#[test]
fn forged_expired_misdirected_and_replayed_tokens_are_refused_with_their_reason() {
    let mut h = Harness::new(SessionConfig::default(), 4);
    let good = token(1, &[1], far_future(), 1);
    let mut forged = good.clone();
    forged[1] ^= 1; // another player id under the old tag
    let cases = [
        (forged, RefuseReason::Forged),
        (token(2, &[1], EPOCH_MS - 1, 2), RefuseReason::Expired),
        (token(3, &[2, 3], far_future(), 3), RefuseReason::WrongNode),
        (vec![1, 2, 3], RefuseReason::MalformedToken),
    ];
    let mut conns = Vec::new();
    for (t, why) in cases {
        conns.push((h.add_client(t), why));
    }
    let first = h.add_client(good.clone());
    h.run(Duration::from_secs(1));
    for (c, why) in conns {
        assert_eq!(h.refusals(c), vec![why]);
        assert_eq!(*h.client(c).state(), ClientState::Closed);
    }
    assert!(matches!(h.client(first).state(), ClientState::Connected { .. }));
    // The same token on a second connection while the first is live: a replay.
    let replay = h.add_client(good.clone());
    h.run(Duration::from_secs(1));
    assert_eq!(h.refusals(replay), vec![RefuseReason::Replayed]);
    assert_eq!(h.sessions.len(), 1);
    // The player leaves; the token cannot open another session.
    let now = h.now;
    h.client(first).disconnect(now);
    h.collect();
    h.run(Duration::from_secs(1));
    let again = h.add_client(good);
    h.run(Duration::from_secs(1));
    assert_eq!(h.refusals(again), vec![RefuseReason::Replayed]);
    assert!(h.node_events.iter().any(|e| matches!(
        e,
        SessionEvent::Disconnected {
            reason: DisconnectReason::ClientLeft,
            ..
        }
    )));
    // Refusals are counted by reason.
    let r = &h.sessions.stats().refused;
    assert_eq!(r.get(&RefuseReason::Replayed), Some(&2), "{r:?}");
    assert_eq!(r.get(&RefuseReason::Forged), Some(&1), "{r:?}");
}

#[test]
fn a_client_that_goes_silent_resumes_its_avatar_with_the_same_token() {
    let mut h = Harness::new(SessionConfig::default(), 5);
    let t = token(9, &[1], far_future(), 5);
    let first = h.add_client(t.clone());
    h.run(Duration::from_secs(1));
    let avatar = h.sessions.avatar_of(first).expect("connected");
    // The first connection goes silent (its network died): drop its client.
    h.clients.retain(|(c, _)| *c != first);
    h.sessions.closed(first);
    h.run(Duration::from_secs(3));
    let second = h.add_client(t);
    h.run(Duration::from_secs(1));
    assert_eq!(h.sessions.avatar_of(second), Some(avatar), "same avatar");
    assert!(
        h.node_events
            .iter()
            .any(|e| matches!(e, SessionEvent::Connected { resumed: true, .. })),
        "{:?}",
        h.node_events
    );
    assert_eq!(h.sessions.len(), 1);
}

#[test]
fn the_protocol_gives_no_way_to_write_another_object_or_widen_the_view() {
    let mut h = Harness::new(SessionConfig::default(), 6);
    let a = h.add_client(token(1, &[1], far_future(), 1));
    let b = h.add_client(token(2, &[1], far_future(), 2));
    h.run(Duration::from_secs(1));
    let avatar_b = h.sessions.avatar_of(b).unwrap();
    let before = h.node.store().object(avatar_b).unwrap().clone();
    // A hand-crafted client: a game write (damage) where an input belongs, for every
    // encoding it could try, then huge inputs, then garbage.
    let unix = h.unix_ms();
    let now = h.now;
    let damage = bitcode::encode(&worldmesh_game::GameWrite::Damage(100));
    let crafted = ClientMsg::Inputs {
        ack: Some(u32::MAX),
        first_seq: 1,
        inputs: vec![damage],
    }
    .encode();
    h.sessions.handle_datagram(now, unix, a, &crafted, &mut h.node);
    let oversized = ClientMsg::Inputs {
        ack: None,
        first_seq: 1,
        inputs: vec![vec![0; 65]],
    }
    .encode();
    h.sessions.handle_datagram(now, unix, a, &oversized, &mut h.node);
    h.sessions
        .handle_datagram(now, unix, a, &[0xC7, 1, 0, 255, 255, 255], &mut h.node);
    h.run(Duration::from_millis(300));
    let after = h.node.store().object(avatar_b).unwrap();
    assert_eq!(
        (
            after.position(),
            matches!(after, ModelObject::Player(p) if p.health == 100)
        ),
        (before.position(), true),
        "b's avatar untouched"
    );
    assert!(h.sessions.stats().malformed >= 3);
    // The view of `a` never holds an object its avatar is not interested in.
    let avatar_a = h.sessions.avatar_of(a).unwrap();
    let me = h.node.store().object(avatar_a).unwrap().clone();
    let world = h.node.world().clone();
    for (id, o) in &h.client(a).view().unwrap().objects {
        assert!(
            *id == avatar_a || me.is_interested(o, &world),
            "{id:?} outside the area of interest"
        );
    }
}

#[test]
fn floods_and_garbage_end_the_session_with_a_reason_and_nothing_panics() {
    let mut h = Harness::new(SessionConfig::default(), 8);
    let flood = h.add_client(token(1, &[1], far_future(), 1));
    let junk = h.add_client(token(2, &[1], far_future(), 2));
    h.run(Duration::from_secs(1));
    let (now, unix) = (h.now, h.unix_ms());
    let ack = ClientMsg::Ack { view: None }.encode();
    for _ in 0..300 {
        h.sessions.handle_datagram(now, unix, flood, &ack, &mut h.node);
    }
    let mut rng = DetRng::new(1);
    for k in 0..200 {
        let len = rng.below(1500) as usize;
        let mut bytes: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
        if k % 2 == 0 && bytes.len() > 3 {
            bytes[0] = 0xC7;
            bytes[1] = 1;
            bytes[2] = 0;
        }
        h.sessions.handle_datagram(now, unix, junk, &bytes, &mut h.node);
    }
    h.collect();
    h.run(Duration::from_millis(500));
    let ended: Vec<(u64, DisconnectReason)> = h
        .node_events
        .iter()
        .filter_map(|e| match e {
            SessionEvent::Disconnected { player, reason, .. } => Some((*player, *reason)),
            _ => None,
        })
        .collect();
    assert!(ended.contains(&(1, DisconnectReason::InputFlood)), "{ended:?}");
    assert!(ended.contains(&(2, DisconnectReason::Malformed)), "{ended:?}");
    assert!(
        h.events
            .contains(&(flood, ClientEvent::Disconnected(DisconnectReason::InputFlood)))
    );
    assert!(h.sessions.is_empty());
}

/// Two nodes, each with its session table, linked both ways (node to node and client to
/// node) through the same lossy link.
struct Pair {
    now: Time,
    nodes: Vec<Node<ModelObject>>,
    sessions: Vec<Sessions<ModelObject>>,
    client: Client<ModelObject>,
    /// The node the client talks to, and on which connection.
    at: (usize, ConnId),
    /// Node datagrams in flight: (when, to node index, from node, bytes).
    links: Vec<(Time, usize, NodeId, Vec<u8>)>,
    /// Client datagrams in flight: (when, to node (Some) or client (None), conn, bytes).
    flights: Vec<(Time, Option<usize>, ConnId, Vec<u8>)>,
    rng: DetRng,
    loss: f64,
    handoffs: Vec<NodeId>,
    next_conn: u64,
}

impl Pair {
    fn new(seed: u64, token: Vec<u8>) -> Self {
        let map = Arc::new(GameMap::generate(&ModelConfig::default(), 16, seed));
        let nodes = (1..=2u32)
            .map(|i| {
                let peer = NodeId(3 - i);
                Node::new(
                    NodeConfig::new(NodeId(i), vec![peer], seed).with_mode(Mode::Broadcast),
                    Arc::clone(&map),
                    Time::ZERO,
                )
            })
            .collect();
        Self {
            now: Time::ZERO,
            nodes,
            sessions: (0..2)
                .map(|_| Sessions::new(SessionConfig::default(), key()))
                .collect(),
            client: Client::new(ClientConfig::default(), token, Time::ZERO),
            at: (0, ConnId(1)),
            links: Vec::new(),
            flights: Vec::new(),
            rng: DetRng::new(seed),
            loss: 0.0,
            handoffs: Vec::new(),
            next_conn: 1,
        }
    }

    fn delay(&mut self) -> Option<Time> {
        (!self.rng.chance(self.loss)).then(|| {
            self.now
                .saturating_add(Duration::from_millis(10 + self.rng.below(31)))
        })
    }

    fn step(&mut self) {
        self.now = self.now.saturating_add(Duration::from_millis(5));
        let now = self.now;
        let unix = EPOCH_MS + now.0 / 1000;
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.links)
            .into_iter()
            .partition(|l| l.0 <= now);
        self.links = later;
        for (_, to, from, bytes) in due {
            self.nodes[to].handle_datagram(now, from, &bytes);
        }
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.flights)
            .into_iter()
            .partition(|f| f.0 <= now);
        self.flights = later;
        for (_, to, conn, bytes) in due {
            match to {
                Some(n) => self.sessions[n].handle_datagram(now, unix, conn, &bytes, &mut self.nodes[n]),
                None if conn == self.at.1 => self.client.handle_datagram(now, &bytes),
                None => {} // for a connection the client has left
            }
        }
        for i in 0..2 {
            if self.nodes[i].poll_timeout().is_some_and(|t| t <= now) {
                self.nodes[i].handle_timeout(now);
                self.sessions[i].frame(now, unix, &mut self.nodes[i]);
            }
            while self.nodes[i].poll_event().is_some() {}
            while let Some(t) = self.nodes[i].poll_transmit() {
                if let Some(at) = self.delay() {
                    let to = (t.dst.0 - 1) as usize;
                    let from = self.nodes[i].id();
                    self.links.push((at, to, from, t.datagram));
                }
            }
            while let Some((conn, b)) = self.sessions[i].poll_transmit() {
                if let Some(at) = self.delay() {
                    self.flights.push((at, None, conn, b));
                }
            }
            while self.sessions[i].poll_event().is_some() {}
        }
        if self.client.poll_timeout().is_some_and(|t| t <= now) {
            self.client.handle_timeout(now);
        }
        self.pump_client();
    }

    fn pump_client(&mut self) {
        let now = self.now;
        while let Some(e) = self.client.poll_event() {
            if let ClientEvent::HandOff { node, token } = e {
                // Connect to the node the hand-off names, on a new connection.
                self.handoffs.push(node);
                self.next_conn += 1;
                self.at = ((node.0 - 1) as usize, ConnId(self.next_conn));
                self.client.hand_over(now, token);
            }
        }
        while let Some(b) = self.client.poll_transmit() {
            if let Some(at) = self.delay() {
                let (n, conn) = self.at;
                self.flights.push((at, Some(n), conn, b));
            }
        }
    }

    fn run(&mut self, d: Duration) {
        let until = self.now.saturating_add(d);
        while self.now < until {
            self.step();
        }
    }
}

/// A player handed from node 1 to node 2 mid-game under 5% loss (node to node and client
/// to node): the avatar migrates, the client reconnects with the hand-off token, and every
/// input is applied exactly once: the avatar's count of applied inputs equals the last
/// sequence number, which equals the number sent.
#[test]
fn a_hand_off_under_loss_loses_and_duplicates_no_input() {
    for seed in 1..=5 {
        let mut p = Pair::new(seed, token(77, &[1, 2], far_future(), seed as u8));
        p.loss = 0.05;
        p.run(Duration::from_secs(1));
        assert!(
            matches!(p.client.state(), ClientState::Connected { .. }),
            "seed {seed}"
        );
        let avatar = p.sessions[0].avatar_of(ConnId(1)).expect("connected to node 1");
        let mut sent = 0u32;
        for k in 0..120u32 {
            let input = PlayerInput {
                dx: if k % 40 < 20 { 127 } else { -127 },
                dy: 0,
                fire: None,
            };
            let now = p.now;
            if p.client.send_input(now, &input).is_some() {
                sent += 1;
            }
            p.pump_client();
            if k == 40 {
                let now = p.now;
                let (nodes, sessions) = (&mut p.nodes, &mut p.sessions);
                sessions[0]
                    .hand_off(now, ConnId(1), NodeId(2), &mut nodes[0])
                    .expect("hand-off starts");
            }
            p.run(Duration::from_millis(50));
        }
        p.loss = 0.0;
        p.run(Duration::from_secs(2));
        assert_eq!(p.handoffs, vec![NodeId(2)], "seed {seed}");
        let e = p.nodes[1].store().get(avatar).expect("the avatar is on node 2");
        assert_eq!(e.role, worldmesh_replica::Role::Primary, "seed {seed}");
        let ModelObject::Player(pl) = &e.object else {
            panic!()
        };
        let c = pl.control.expect("still player-controlled");
        assert_eq!(
            (c.last_input, c.applied),
            (sent, sent),
            "seed {seed}: every input once"
        );
        assert_eq!(p.client.pending_inputs().count(), 0, "seed {seed}: all confirmed");
        assert_eq!(p.sessions[1].stats().avatars_rebound, 1, "seed {seed}");
        assert_eq!(p.sessions[0].stats().handoffs, 1, "seed {seed}");
        assert!(
            p.nodes[0]
                .store()
                .get(avatar)
                .is_none_or(|e| e.role != worldmesh_replica::Role::Primary),
            "seed {seed}: one primary"
        );
    }
}

/// With the assignment on (one node: it coordinates), a player who reports its delays is
/// placed by J-SA, and its leave is processed by L-SA.
#[test]
fn joins_and_leaves_reach_the_assignment() {
    use worldmesh_node::assignment::{AssignmentAgent, AssignmentConfig};
    let mut h = Harness::new(SessionConfig::default(), 9);
    h.sessions = Sessions::new(SessionConfig::default(), key())
        .with_assignment(AssignmentAgent::new(NodeId(1), AssignmentConfig::default()));
    let c = h.add_client(token(5, &[1], far_future(), 5));
    let now = h.now;
    h.client(c).set_delays(now, vec![(NodeId(1), 12.5)]);
    h.run(Duration::from_secs(1));
    let a = h.sessions.assignment().unwrap();
    assert_eq!((a.stats().joins, a.placed(5)), (1, Some(NodeId(1))));
    assert_eq!(a.total(), Some((12.5, 1)));
    let now = h.now;
    h.client(c).disconnect(now);
    h.collect();
    h.run(Duration::from_secs(1));
    let a = h.sessions.assignment().unwrap();
    assert_eq!(a.stats().leaves, 1, "{:?}", a.stats());
    assert_eq!(a.total(), Some((0.0, 0)));
    assert_eq!(a.stats().mismatches, 0);
}

/// An avatar moved by something other than a hand-off (a drain, a placement decision)
/// takes its player along: the old node sees the avatar's primary elsewhere and hands the
/// client over, with no input lost or applied twice.
#[test]
fn a_player_follows_its_avatar_when_the_node_migrates_it() {
    let mut p = Pair::new(11, token(88, &[1, 2], far_future(), 11));
    p.loss = 0.05;
    p.run(Duration::from_secs(1));
    let avatar = p.sessions[0].avatar_of(ConnId(1)).expect("connected to node 1");
    let mut sent = 0u32;
    for k in 0..80u32 {
        let now = p.now;
        let input = PlayerInput {
            dx: 0,
            dy: if k % 20 < 10 { 127 } else { -127 },
            fire: None,
        };
        if p.client.send_input(now, &input).is_some() {
            sent += 1;
        }
        p.pump_client();
        if k == 30 {
            let now = p.now;
            p.nodes[0]
                .migrate(now, &[avatar], NodeId(2))
                .expect("migration starts");
        }
        p.run(Duration::from_millis(50));
    }
    p.loss = 0.0;
    p.run(Duration::from_secs(2));
    assert_eq!(p.handoffs, vec![NodeId(2)]);
    let e = p.nodes[1].store().get(avatar).expect("on node 2");
    let ModelObject::Player(pl) = &e.object else {
        panic!()
    };
    let c = pl.control.unwrap();
    assert_eq!((c.last_input, c.applied), (sent, sent));
    assert_eq!(p.client.pending_inputs().count(), 0);
}

/// The placement loop of paper `001` §7.4 in the running world: node 1's only player
/// reports that node 2 is 180 ms nearer; node 1 moves its region there, and the player
/// follows its avatar without losing an input.
#[test]
fn the_placement_loop_moves_a_region_to_its_players_and_they_follow() {
    use worldmesh_node::PlacementConfig;
    let mut p = Pair::new(13, token(99, &[1, 2], far_future(), 13));
    p.sessions[0] = Sessions::new(SessionConfig::default(), key()).with_placement(PlacementConfig {
        interval: Duration::from_millis(500),
        ..PlacementConfig::default()
    });
    p.loss = 0.02;
    let now = p.now;
    p.client
        .set_delays(now, vec![(NodeId(1), 200.0), (NodeId(2), 20.0)]);
    p.run(Duration::from_secs(1));
    let avatar = p.sessions[0].avatar_of(ConnId(1)).expect("connected to node 1");
    let mut sent = 0u32;
    for _ in 0..60u32 {
        let now = p.now;
        if p.client
            .send_input(
                now,
                &PlayerInput {
                    dx: 50,
                    dy: 0,
                    fire: None,
                },
            )
            .is_some()
        {
            sent += 1;
        }
        p.pump_client();
        p.run(Duration::from_millis(50));
    }
    p.loss = 0.0;
    p.run(Duration::from_secs(2));
    assert!(
        p.sessions[0].stats().region_migrations >= 1,
        "{:?}",
        p.sessions[0].stats()
    );
    assert_eq!(p.handoffs, vec![NodeId(2)]);
    let e = p.nodes[1]
        .store()
        .get(avatar)
        .expect("the avatar moved with the region");
    assert_eq!(e.role, worldmesh_replica::Role::Primary);
    assert_eq!(p.nodes[0].store().primary_count(), 0, "the whole region moved");
    let ModelObject::Player(pl) = &e.object else {
        panic!()
    };
    let c = pl.control.unwrap();
    assert_eq!((c.last_input, c.applied), (sent, sent));
}
