//! Players' sessions: nodes with their session tables and sans-IO clients, all machines
//! of the one engine (`worldmesh_engine`), exchanging datagrams through a lossy,
//! duplicating, reordering link in virtual time.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use worldmesh_client::proto::{ClientMsg, DisconnectReason, RefuseReason};
use worldmesh_client::{Client, ClientConfig, ClientEvent, ClientState, ConnectToken, TokenKey};
use worldmesh_core::{DetRng, Machine, MessageClass, NodeId, ObjectId, Point3, Time, Transmit};
use worldmesh_engine::{Engine, Fate, Links, Step};
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

/// What travels between the parties: node-to-node datagrams, or a player connection's
/// datagram (the connection names the session at the node; a client takes only its own).
#[derive(Clone)]
struct Wire {
    conn: Option<ConnId>,
    bytes: Vec<u8>,
}

/// Which client machine each connection belongs to: the hosts address their sessions'
/// datagrams with it, the harness opens connections in it.
type Conns = Rc<RefCell<BTreeMap<ConnId, NodeId>>>;

/// A node and its session table.
struct Host {
    node: Node<ModelObject>,
    sessions: Sessions<ModelObject>,
    conns: Conns,
    frames: u64,
}

/// A client on its current connection to a node.
struct Seat {
    client: Client<ModelObject>,
    conn: ConnId,
    server: NodeId,
}

/// A machine of the test: engine ids are node ids for hosts; the others are clients (or
/// nobody, to keep the hosts' ids).
enum Party {
    Nobody,
    Host(Box<Host>),
    Seat(Box<Seat>),
}

/// What the parties report.
enum Happened {
    Session(SessionEvent),
    Client(ConnId, ClientEvent),
}

fn unix_at(now: Time) -> u64 {
    EPOCH_MS + now.0 / 1000
}

impl Machine for Party {
    type Datagram = Wire;
    type Event = Happened;

    fn handle_datagram(&mut self, now: Time, from: NodeId, w: Wire) {
        match self {
            Party::Host(host) => match w.conn {
                None => host.node.handle_datagram(now, from, &w.bytes),
                Some(c) => host
                    .sessions
                    .handle_datagram(now, unix_at(now), c, &w.bytes, &mut host.node),
            },
            // A datagram for a connection the client has left is not its own.
            Party::Seat(seat) if w.conn == Some(seat.conn) => seat.client.handle_datagram(now, &w.bytes),
            Party::Seat(_) | Party::Nobody => {}
        }
    }

    fn handle_timeout(&mut self, now: Time) {
        match self {
            Party::Host(host) => {
                if host.node.poll_timeout().is_some_and(|t| t <= now) {
                    host.node.handle_timeout(now);
                    host.sessions.frame(now, unix_at(now), &mut host.node);
                    host.frames += 1;
                }
            }
            Party::Seat(seat) => {
                if seat.client.poll_timeout().is_some_and(|t| t <= now) {
                    seat.client.handle_timeout(now);
                }
            }
            Party::Nobody => {}
        }
    }

    fn poll_transmit(&mut self) -> Option<Transmit<Wire>> {
        match self {
            Party::Host(host) => {
                if let Some(t) = host.node.poll_transmit() {
                    return Some(Transmit {
                        dst: t.dst,
                        class: t.class,
                        datagram: Wire {
                            conn: None,
                            bytes: t.datagram,
                        },
                    });
                }
                while let Some((conn, bytes)) = host.sessions.poll_transmit() {
                    if let Some(dst) = host.conns.borrow().get(&conn) {
                        return Some(Transmit {
                            dst: *dst,
                            class: MessageClass::Control,
                            datagram: Wire {
                                conn: Some(conn),
                                bytes,
                            },
                        });
                    }
                }
                None
            }
            Party::Seat(seat) => seat.client.poll_transmit().map(|bytes| Transmit {
                dst: seat.server,
                class: MessageClass::Control,
                datagram: Wire {
                    conn: Some(seat.conn),
                    bytes,
                },
            }),
            Party::Nobody => None,
        }
    }

    fn poll_timeout(&self) -> Option<Time> {
        match self {
            Party::Host(host) => host.node.poll_timeout(),
            Party::Seat(seat) => seat.client.poll_timeout(),
            Party::Nobody => None,
        }
    }

    fn poll_event(&mut self) -> Option<Happened> {
        match self {
            Party::Host(host) => {
                while host.node.poll_event().is_some() {}
                host.sessions.poll_event().map(Happened::Session)
            }
            Party::Seat(seat) => seat.client.poll_event().map(|e| Happened::Client(seat.conn, e)),
            Party::Nobody => None,
        }
    }
}

/// The link: each datagram lost with probability `loss`, duplicated with probability
/// `dup`, delayed 10–40 ms (so reordered).
struct Link {
    rng: DetRng,
    loss: f64,
    dup: f64,
}

impl Links<Wire> for Link {
    fn route(&mut self, _now: Time, _src: NodeId, _t: &Transmit<Wire>) -> Fate {
        if self.rng.chance(self.loss) {
            return Fate::Lost;
        }
        let dup = self.dup > 0.0 && self.rng.chance(self.dup);
        let first = Duration::from_millis(10 + self.rng.below(31));
        Fate::Deliver(first, dup.then(|| Duration::from_millis(10 + self.rng.below(31))))
    }
}

fn host_of(engine: &mut Engine<Party, Link>, id: NodeId) -> &mut Host {
    match &mut engine.machines_mut()[id.0 as usize] {
        Party::Host(host) => host,
        _ => panic!("{id} is not a host"),
    }
}

fn host_ref(engine: &Engine<Party, Link>, id: NodeId) -> &Host {
    match &engine.machines()[id.0 as usize] {
        Party::Host(host) => host,
        _ => panic!("{id} is not a host"),
    }
}

/// Runs the engine for `d`, first sending what inputs given by hand queued, and calls
/// `on` with every report.
fn run_engine(engine: &mut Engine<Party, Link>, d: Duration, mut on: impl FnMut(&mut Party, Time, Happened)) {
    for i in 0..engine.machines().len() {
        engine.pump(NodeId(i as u32), |m, now, _, e| on(m, now, e));
    }
    let until = engine.now().saturating_add(d);
    while let Some(step) = engine.step(until) {
        if let Step::Datagram(id) | Step::Timeout(id) = step {
            engine.pump(id, |m, now, _, e| on(m, now, e));
        }
    }
    engine.advance_to(until);
}

/// One node (id 1), its session table and any number of clients.
struct Harness {
    engine: Engine<Party, Link>,
    conns: Conns,
    events: Vec<(ConnId, ClientEvent)>,
    node_events: Vec<SessionEvent>,
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
        let conns = Conns::default();
        let host = Host {
            node,
            sessions: Sessions::new(cfg, key()),
            conns: Rc::clone(&conns),
            frames: 0,
        };
        let link = Link {
            rng: DetRng::new(seed),
            loss: 0.0,
            dup: 0.0,
        };
        Self {
            engine: Engine::new(vec![Party::Nobody, Party::Host(Box::new(host))], link),
            conns,
            events: Vec::new(),
            node_events: Vec::new(),
            next_conn: 0,
        }
    }

    fn now(&self) -> Time {
        self.engine.now()
    }

    fn unix_ms(&self) -> u64 {
        unix_at(self.now())
    }

    fn links(&mut self) -> &mut Link {
        self.engine.links_mut()
    }

    fn host(&mut self) -> &mut Host {
        host_of(&mut self.engine, NodeId(1))
    }

    fn node(&self) -> &Node<ModelObject> {
        &host_ref(&self.engine, NodeId(1)).node
    }

    fn sessions(&self) -> &Sessions<ModelObject> {
        &host_ref(&self.engine, NodeId(1)).sessions
    }

    fn frames(&self) -> u64 {
        host_ref(&self.engine, NodeId(1)).frames
    }

    fn add_client(&mut self, token: Vec<u8>) -> ConnId {
        self.next_conn += 1;
        let conn = ConnId(self.next_conn);
        let seat = Seat {
            client: Client::new(ClientConfig::default(), token, self.now()),
            conn,
            server: NodeId(1),
        };
        let id = self.engine.add(Party::Seat(Box::new(seat)));
        self.conns.borrow_mut().insert(conn, id);
        conn
    }

    /// The client on `conn` goes silent (its network died).
    fn drop_client(&mut self, conn: ConnId) {
        let id = self.conns.borrow_mut().remove(&conn);
        if let Some(id) = id {
            self.engine.crash(id);
        }
    }

    fn client(&mut self, conn: ConnId) -> &mut Client<ModelObject> {
        let id = self.conns.borrow()[&conn];
        match &mut self.engine.machines_mut()[id.0 as usize] {
            Party::Seat(seat) => &mut seat.client,
            _ => unreachable!("connections name clients"),
        }
    }

    /// Sends what inputs given by hand queued (the next run does it too).
    fn collect(&mut self) {
        self.run(Duration::ZERO);
    }

    fn run(&mut self, d: Duration) {
        let (events, node_events) = (&mut self.events, &mut self.node_events);
        run_engine(&mut self.engine, d, |_, _, e| match e {
            Happened::Session(e) => node_events.push(e),
            Happened::Client(c, e) => events.push((c, e)),
        });
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
    h.links().loss = 0.05;
    h.links().dup = 0.05;
    let conn = h.add_client(token(7, &[1], far_future(), 1));
    h.run(Duration::from_secs(1));
    let ClientState::Connected { avatar, player, .. } = h.client(conn).state().clone() else {
        panic!("not connected: {:?}", h.client(conn).state());
    };
    assert_eq!(player, 7);
    assert!(
        h.node()
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
        let now = h.now();
        assert_eq!(h.client(conn).send_input(now, &input), Some(k + 1));
        sent += 1;
        h.collect();
        h.run(Duration::from_millis(50));
    }
    // Stop (so the node's avatar stands still and the client's newest view catches up).
    let now = h.now();
    h.client(conn).send_input(now, &PlayerInput::default());
    sent += 1;
    h.collect();
    h.links().loss = 0.0;
    h.run(Duration::from_secs(1));
    let s = h.sessions().stats().clone();
    assert_eq!(s.inputs_applied, u64::from(sent), "{s:?}");
    assert_eq!(s.inputs_skipped, 0, "{s:?}");
    assert!(
        s.inputs_duplicated > 0,
        "inputs are resent until confirmed: {s:?}"
    );
    let on_node = h.node().store().object(avatar).unwrap().clone();
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
        .node()
        .store()
        .iter()
        .filter(|(id, e)| *id == avatar || on_node.is_interested(&e.object, h.node().world()))
        .map(|(id, _)| id)
        .collect();
    assert_eq!(got, expected);
    // A view per frame reaches the client, but for the ones lost (5% per datagram).
    let views = h.client(conn).stats().views;
    assert!(
        views * 10 >= h.frames() * 8,
        "{views} views in {} frames",
        h.frames()
    );
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
    assert_eq!(h.sessions().len(), 1);
    // The player leaves; the token cannot open another session.
    let now = h.now();
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
    let r = &h.sessions().stats().refused;
    assert_eq!(r.get(&RefuseReason::Replayed), Some(&2), "{r:?}");
    assert_eq!(r.get(&RefuseReason::Forged), Some(&1), "{r:?}");
}

#[test]
fn a_client_that_goes_silent_resumes_its_avatar_with_the_same_token() {
    let mut h = Harness::new(SessionConfig::default(), 5);
    let t = token(9, &[1], far_future(), 5);
    let first = h.add_client(t.clone());
    h.run(Duration::from_secs(1));
    let avatar = h.sessions().avatar_of(first).expect("connected");
    // The first connection goes silent (its network died): drop its client.
    h.drop_client(first);
    h.host().sessions.closed(first);
    h.run(Duration::from_secs(3));
    let second = h.add_client(t);
    h.run(Duration::from_secs(1));
    assert_eq!(h.sessions().avatar_of(second), Some(avatar), "same avatar");
    assert!(
        h.node_events
            .iter()
            .any(|e| matches!(e, SessionEvent::Connected { resumed: true, .. })),
        "{:?}",
        h.node_events
    );
    assert_eq!(h.sessions().len(), 1);
}

#[test]
fn the_protocol_gives_no_way_to_write_another_object_or_widen_the_view() {
    let mut h = Harness::new(SessionConfig::default(), 6);
    let a = h.add_client(token(1, &[1], far_future(), 1));
    let b = h.add_client(token(2, &[1], far_future(), 2));
    h.run(Duration::from_secs(1));
    let avatar_b = h.sessions().avatar_of(b).unwrap();
    let before = h.node().store().object(avatar_b).unwrap().clone();
    // A hand-crafted client: a game write (damage) where an input belongs, for every
    // encoding it could try, then huge inputs, then garbage.
    let unix = h.unix_ms();
    let now = h.now();
    let damage = bitcode::encode(&worldmesh_game::GameWrite::Damage(100));
    let crafted = ClientMsg::Inputs {
        ack: Some(u32::MAX),
        first_seq: 1,
        inputs: vec![damage],
    }
    .encode();
    {
        let host = h.host();
        host.sessions
            .handle_datagram(now, unix, a, &crafted, &mut host.node);
    }
    let oversized = ClientMsg::Inputs {
        ack: None,
        first_seq: 1,
        inputs: vec![vec![0; 65]],
    }
    .encode();
    {
        let host = h.host();
        host.sessions
            .handle_datagram(now, unix, a, &oversized, &mut host.node);
    }
    {
        let host = h.host();
        host.sessions
            .handle_datagram(now, unix, a, &[0xC7, 1, 0, 255, 255, 255], &mut host.node);
    }
    h.run(Duration::from_millis(300));
    let after = h.node().store().object(avatar_b).unwrap();
    assert_eq!(
        (
            after.position(),
            matches!(after, ModelObject::Player(p) if p.health == 100)
        ),
        (before.position(), true),
        "b's avatar untouched"
    );
    assert!(h.sessions().stats().malformed >= 3);
    // The view of `a` never holds an object its avatar is not interested in.
    let avatar_a = h.sessions().avatar_of(a).unwrap();
    let me = h.node().store().object(avatar_a).unwrap().clone();
    let world = h.node().world().clone();
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
    let (now, unix) = (h.now(), h.unix_ms());
    let ack = ClientMsg::Ack { view: None }.encode();
    for _ in 0..300 {
        {
            let host = h.host();
            host.sessions
                .handle_datagram(now, unix, flood, &ack, &mut host.node);
        }
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
        {
            let host = h.host();
            host.sessions
                .handle_datagram(now, unix, junk, &bytes, &mut host.node);
        }
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
    assert!(h.sessions().is_empty());
}

/// Two nodes, each with its session table, linked both ways (node to node and client to
/// node) through the same lossy link; one client (machine 0), first on node 1.
struct Pair {
    engine: Engine<Party, Link>,
    conns: Conns,
    handoffs: Vec<NodeId>,
    next_conn: u64,
}

impl Pair {
    fn new(seed: u64, token: Vec<u8>) -> Self {
        Self::with_mode(seed, token, Mode::Broadcast)
    }

    fn with_mode(seed: u64, token: Vec<u8>, mode: Mode) -> Self {
        let map = Arc::new(GameMap::generate(&ModelConfig::default(), 16, seed));
        let conns = Conns::default();
        conns.borrow_mut().insert(ConnId(1), NodeId(0));
        let mut parties = vec![Party::Seat(Box::new(Seat {
            client: Client::new(ClientConfig::default(), token, Time::ZERO),
            conn: ConnId(1),
            server: NodeId(1),
        }))];
        for i in 1..=2u32 {
            let peer = NodeId(3 - i);
            let node = Node::new(
                NodeConfig::new(NodeId(i), vec![peer], seed).with_mode(mode),
                Arc::clone(&map),
                Time::ZERO,
            );
            parties.push(Party::Host(Box::new(Host {
                node,
                sessions: Sessions::new(SessionConfig::default(), key()),
                conns: Rc::clone(&conns),
                frames: 0,
            })));
        }
        let link = Link {
            rng: DetRng::new(seed),
            loss: 0.0,
            dup: 0.0,
        };
        Self {
            engine: Engine::new(parties, link),
            conns,
            handoffs: Vec::new(),
            next_conn: 1,
        }
    }

    fn now(&self) -> Time {
        self.engine.now()
    }

    fn links(&mut self) -> &mut Link {
        self.engine.links_mut()
    }

    /// Node `i + 1`.
    fn host(&mut self, i: usize) -> &mut Host {
        host_of(&mut self.engine, NodeId(i as u32 + 1))
    }

    fn client(&mut self) -> &mut Client<ModelObject> {
        match &mut self.engine.machines_mut()[0] {
            Party::Seat(seat) => &mut seat.client,
            _ => unreachable!("machine 0 is the client"),
        }
    }

    /// Sends what the client queued.
    fn pump_client(&mut self) {
        self.run(Duration::ZERO);
    }

    fn run(&mut self, d: Duration) {
        let (handoffs, next_conn, conns) = (&mut self.handoffs, &mut self.next_conn, &self.conns);
        run_engine(&mut self.engine, d, |m, now, e| {
            if let (Party::Seat(seat), Happened::Client(_, ClientEvent::HandOff { node, token })) = (m, e) {
                // Connect to the node the hand-off names, on a new connection.
                handoffs.push(node);
                *next_conn += 1;
                let conn = ConnId(*next_conn);
                conns.borrow_mut().insert(conn, NodeId(0));
                seat.conn = conn;
                seat.server = node;
                seat.client.hand_over(now, token);
            }
        });
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
        p.links().loss = 0.05;
        p.run(Duration::from_secs(1));
        assert!(
            matches!(p.client().state(), ClientState::Connected { .. }),
            "seed {seed}"
        );
        let avatar = p
            .host(0)
            .sessions
            .avatar_of(ConnId(1))
            .expect("connected to node 1");
        let mut sent = 0u32;
        for k in 0..120u32 {
            let input = PlayerInput {
                dx: if k % 40 < 20 { 127 } else { -127 },
                dy: 0,
                fire: None,
            };
            let now = p.now();
            if p.client().send_input(now, &input).is_some() {
                sent += 1;
            }
            p.pump_client();
            if k == 40 {
                let now = p.now();
                let host = p.host(0);
                host.sessions
                    .hand_off(now, ConnId(1), NodeId(2), &mut host.node)
                    .expect("hand-off starts");
            }
            p.run(Duration::from_millis(50));
        }
        p.links().loss = 0.0;
        p.run(Duration::from_secs(2));
        assert_eq!(p.handoffs, vec![NodeId(2)], "seed {seed}");
        let e = p
            .host(1)
            .node
            .store()
            .get(avatar)
            .expect("the avatar is on node 2");
        assert_eq!(e.role, worldmesh_replica::Role::Primary, "seed {seed}");
        let ModelObject::Player(pl) = &e.object else {
            panic!()
        };
        let c = *pl.control.clone().expect("still player-controlled");
        assert_eq!(
            (c.last_input, c.applied),
            (sent, sent),
            "seed {seed}: every input once"
        );
        assert_eq!(
            p.client().pending_inputs().count(),
            0,
            "seed {seed}: all confirmed"
        );
        assert_eq!(p.host(1).sessions.stats().avatars_rebound, 1, "seed {seed}");
        assert_eq!(p.host(0).sessions.stats().handoffs, 1, "seed {seed}");
        assert!(
            p.host(0)
                .node
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
    h.host().sessions = Sessions::new(SessionConfig::default(), key())
        .with_assignment(AssignmentAgent::new(NodeId(1), AssignmentConfig::default()));
    let c = h.add_client(token(5, &[1], far_future(), 5));
    let now = h.now();
    h.client(c).set_delays(now, vec![(NodeId(1), 12.5)]);
    h.run(Duration::from_secs(1));
    let a = h.sessions().assignment().unwrap();
    assert_eq!((a.stats().joins, a.placed(5)), (1, Some(NodeId(1))));
    assert_eq!(a.total(), Some((12.5, 1)));
    let now = h.now();
    h.client(c).disconnect(now);
    h.collect();
    h.run(Duration::from_secs(1));
    let a = h.sessions().assignment().unwrap();
    assert_eq!(a.stats().leaves, 1, "{:?}", a.stats());
    assert_eq!(a.total(), Some((0.0, 0)));
    assert_eq!(a.stats().mismatches, 0);
}

/// An avatar moved by something other than a hand-off (a drain, a placement decision)
/// takes its player along: the old node sees the avatar's primary elsewhere and hands the
/// client over, with no input lost or applied twice.
#[test]
fn a_player_follows_its_avatar_when_the_node_migrates_it() {
    follows_its_avatar(Mode::Broadcast);
}

/// The same with interest management, where the node the avatar left keeps no replica of
/// it (nothing of its own is near): the hand-off must not depend on one.
#[test]
fn a_player_follows_its_avatar_to_a_node_its_old_node_does_not_replicate() {
    follows_its_avatar(Mode::Interest);
}

fn follows_its_avatar(mode: Mode) {
    let mut p = Pair::with_mode(11, token(88, &[1, 2], far_future(), 11), mode);
    p.links().loss = 0.05;
    p.run(Duration::from_secs(1));
    let avatar = p
        .host(0)
        .sessions
        .avatar_of(ConnId(1))
        .expect("connected to node 1");
    let mut sent = 0u32;
    for k in 0..80u32 {
        let now = p.now();
        let input = PlayerInput {
            dx: 0,
            dy: if k % 20 < 10 { 127 } else { -127 },
            fire: None,
        };
        if p.client().send_input(now, &input).is_some() {
            sent += 1;
        }
        p.pump_client();
        if k == 30 {
            let now = p.now();
            p.host(0)
                .node
                .migrate(now, &[avatar], NodeId(2))
                .expect("migration starts");
        }
        p.run(Duration::from_millis(50));
    }
    p.links().loss = 0.0;
    p.run(Duration::from_secs(2));
    assert_eq!(p.handoffs, vec![NodeId(2)]);
    let e = p.host(1).node.store().get(avatar).expect("on node 2");
    let ModelObject::Player(pl) = &e.object else {
        panic!()
    };
    let c = *pl.control.clone().unwrap();
    assert_eq!((c.last_input, c.applied), (sent, sent));
    assert_eq!(p.client().pending_inputs().count(), 0);
}

/// The placement loop of paper `001` §7.4 in the running world: node 1's only player
/// reports that node 2 is 180 ms nearer; node 1 moves its region there, and the player
/// follows its avatar without losing an input.
#[test]
fn the_placement_loop_moves_a_region_to_its_players_and_they_follow() {
    use worldmesh_node::PlacementConfig;
    let mut p = Pair::new(13, token(99, &[1, 2], far_future(), 13));
    p.host(0).sessions = Sessions::new(SessionConfig::default(), key()).with_placement(PlacementConfig {
        interval: Duration::from_millis(500),
        ..PlacementConfig::default()
    });
    p.links().loss = 0.02;
    let now = p.now();
    p.client()
        .set_delays(now, vec![(NodeId(1), 200.0), (NodeId(2), 20.0)]);
    p.run(Duration::from_secs(1));
    let avatar = p
        .host(0)
        .sessions
        .avatar_of(ConnId(1))
        .expect("connected to node 1");
    let mut sent = 0u32;
    for _ in 0..60u32 {
        let now = p.now();
        if p.client()
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
    p.links().loss = 0.0;
    p.run(Duration::from_secs(2));
    assert!(
        p.host(0).sessions.stats().region_migrations >= 1,
        "{:?}",
        p.host(0).sessions.stats()
    );
    assert_eq!(p.handoffs, vec![NodeId(2)]);
    assert_eq!(
        p.host(0).node.store().primary_count(),
        0,
        "the whole region moved"
    );
    let e = p
        .host(1)
        .node
        .store()
        .get(avatar)
        .expect("the avatar moved with the region");
    assert_eq!(e.role, worldmesh_replica::Role::Primary);
    let ModelObject::Player(pl) = &e.object else {
        panic!()
    };
    let c = *pl.control.clone().unwrap();
    assert_eq!((c.last_input, c.applied), (sent, sent));
}
