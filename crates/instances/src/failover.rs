//! Maintenance and restructuring of a P2P sub-area (paper `003` §3.2.1, Algorithms 3 and 4)
//! as a sans-IO state machine.
//!
//! Every machine of an auxiliary game runs one [`Peer`]. A peer has one of three roles:
//! the temporary server `AG_x.S` ([`Role::Server`]), the replicated server `AG_x.RS`
//! ([`Role::Replica`]) or a plain player ([`Role::Player`]); roles change at run time. The
//! driver feeds it `now` and messages ([`Peer::handle_message`]), wakes it at
//! [`Peer::poll_timeout`] ([`Peer::handle_timeout`]), and sends what
//! [`Peer::poll_transmit`] hands out. It never reads a clock or touches a socket.
//!
//! # Protocol
//!
//! Time is divided into game ticks of length `τ` ([`FailoverConfig::tick`]).
//!
//! - **Algorithm 3 (maintenance).** Each tick the server applies the players' inputs, sends
//!   the whole game state to the replica ([`Msg::Snapshot`], which is also the server → RS
//!   heartbeat) and an [`Msg::Update`] to every player (game state + heartbeat). The replica
//!   acknowledges each snapshot ([`Msg::SnapshotAck`]). Players send their inputs to the
//!   server every tick ([`Msg::Input`], which doubles as their reply) and a [`Msg::Beat`] to
//!   the replica every heartbeat period `T` ([`FailoverConfig::heartbeat`], `T < 1 s` as
//!   §3.2.1 asks). The server reports [`Msg::Status`] to the cluster every `T`.
//! - **Acknowledged state.** An input is *confirmed* to its player (`Update::confirmed`)
//!   only once the replica has acknowledged a snapshot that contains it (a lone server with
//!   no other member confirms at once). A confirmed input is therefore in the replica's
//!   state, and a takeover loses at most the unconfirmed tail since the last acknowledged
//!   tick; players keep unconfirmed inputs and resend them to whoever serves.
//! - **Algorithm 4 (restructuring).** If the replica hears nothing from the server — no
//!   snapshot and no update — for [`FailoverConfig::suspect_after`] ticks (the detection
//!   timeout, checked at that instant rather than at the replica's next tick) it runs for
//!   server of the next *epoch* (term) and asks the members for votes ([`Msg::Claim`]).
//!   With a strict majority of its electorate (itself included, the suspected server
//!   excluded) it becomes server, appoints a new replica (the best-ranked live member in
//!   Algorithm 2's order, carried in the snapshots) and serves on at once: the votes made
//!   its new configuration effective (see below), so the new replica's first
//!   acknowledgement commits. If the server gets no acknowledgement for `k` ticks
//!   ([`FailoverConfig::miss_limit`]) it appoints another
//!   replica (a newly appointed replica gets up to `member_timeout` for its first one: it
//!   arrives a round trip after the first snapshot, which exceeds `kτ` on slow wide-area
//!   paths — found running the protocol in real nodes over PlanetLab delays, where a far
//!   replica was otherwise replaced before it could ever answer). Members silent for [`FailoverConfig::member_timeout`] are dropped. The paper's
//!   "the instance lives while one player can serve" holds for departures one at a time; the
//!   state lives on `AG_x.S` and `AG_x.RS` only, so losing both within one detection window
//!   ends the instance ([`Event::InstanceLost`] at the players).
//!
//! # Safety: epochs and configurations
//!
//! Every message carries the sender's epoch; a server hearing of a newer epoch steps down
//! ([`Event::SteppedDown`]) and players refuse (and report) servers older than the newest
//! epoch they have seen or voted for. That alone fixes the case the issue names (an old
//! primary alive but cut off keeps believing it serves while the partition lasts, cannot
//! confirm anything since its replica moved on, and steps down when it hears from any member
//! again). Our randomized partition tests found a harder case: a primary on the *minority*
//! side of a partition appoints a new replica there and goes on confirming, while the
//! majority elects the old replica, whose state lacks those confirmations. We close it the
//! way primary-backup systems with a configuration service do, with the members as that
//! service:
//!
//! - the server's *configuration* (members, replica) has a key `(epoch, version)`; every
//!   change (new replica, dropped members, promotion) makes a new key, announced in every
//!   update, and members echo the newest key they know in their inputs;
//! - a change becomes *effective* only once a strict majority of the last effective
//!   membership knows it; the server confirms nothing while a change is pending, and makes
//!   one change at a time;
//! - a member votes at most once per epoch, only if it has not heard the server for `k − 2`
//!   ticks, and only for a candidate whose configuration key is at least the newest it knows.
//!
//! An election majority and the majority that made a change effective intersect, and the
//! member in both refuses a candidate from before the change, so a replaced (stale) replica
//! can never be elected. The price: the instance needs a majority of its last effective
//! membership alive to change configuration.
//!
//! **The vote is the echo of the promotion.** A promotion is a configuration change too
//! (new epoch, old server out, new replica in), and waiting for the players to echo its key
//! cost a round trip after the election (measured: promotion → first commit 200 ms median
//! on random PlanetLab hosts). The key a winner takes is fixed by its claim,
//! [`promotion_key`]`(epoch, claim key)`, so a member granting a claim also *promises* it:
//! from then on it refuses any other candidate whose claim key is older than the promised
//! one (the candidate itself may re-run). The winner counts its voters as knowing the new
//! key, and they are a strict majority of the same base (the last effective membership
//! minus the deposed server), so the promotion is effective on winning with the same
//! intersection argument. A promise only ever refuses more, so it cannot make an election
//! unsafe; it can block an election only while the promised candidate is itself the
//! replica holding the newest state (if it is gone too, both servers are gone, which ends
//! the instance anyway).
//!
//! # Choice of the timeouts, and the takeover bound
//!
//! Defaults: `T = 250 ms`, `τ = T/5 = 50 ms` (20 Hz), `k = 5`, detection after 3 silent
//! ticks (150 ms = 0.6 T). One heartbeat per `T` cannot give a takeover within `2T` under
//! loss: a single lost heartbeat already makes a `2T` gap. The replica therefore watches
//! the per-tick messages of the server, *both* the snapshot and the update it sends every
//! tick. The deadline `3τ` after the last arrival falls on the arrival of the third next
//! tick (up to jitter), so with loss `p = 0.05` the replica suspects a live server when both
//! messages of two ticks in a row are lost and the third is late: `≈ (p²)²/2 ≈ 3·10⁻⁶` per
//! tick, about 0.2 per hour at 20 Hz (measured by `failover`: none in 4 instance-hours;
//! with a `2τ` timeout one lost tick suffices and we measured 32–55 false suspicions and
//! 4–14 needless elections per hour, so `2τ` is too short). A false suspicion changes
//! nothing unless a player has also missed the server's last 2 updates (a vote needs `2τ`
//! of silence): a refused candidate follows the server again at its next message, while a
//! player that granted the claim refuses the old epoch from then on, so the server steps
//! down and the replica takes over (a needless failover, not a lost input). After a crash
//! the time to the new server's first commit is
//! `d(S→RS) + 3τ` (detection) `+ RTT(RS ↔ a majority)` (votes) `+ RTT(RS ↔ new RS)` (the
//! first acknowledgement). The detection timeout is derived from that budget: with the
//! round trips measured between random PlanetLab hosts (100–250 ms), `T` of detection (the
//! old `kτ`) left less than `T` for three wide-area delays and 83 % of takeovers missed
//! `2T`; `0.6 T` leaves about `1.4 T`. Before the replica's first snapshot it waits
//! `member_timeout` instead (the first snapshot itself is a wide-area delay away).
//! `failover` and `instances-qos` measure the distribution under 5 % loss.

use crate::select::best_candidate;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;
use worldmesh_core::{MessageClass, NodeId, Time};

/// The configuration key a candidate for `epoch` whose claim key is `claim` takes when it
/// wins: the new epoch, one version past its claim key (the promotion is one change: old
/// server out, new replica in). Voters derive it from the claim, so it needs no field.
pub fn promotion_key(epoch: u64, claim: ConfigKey) -> ConfigKey {
    (epoch, claim.1 + 1)
}

/// A member of an auxiliary game (a player's machine).
pub type PeerId = u32;

/// The address of the Central Area's cluster, receiver of [`Msg::Status`].
pub const CLUSTER: PeerId = u32::MAX;

/// Timing and bounds of the failover protocol.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailoverConfig {
    /// Game tick `τ`: period of snapshots to the replica and updates to the players.
    pub tick: Duration,
    /// Heartbeat period `T` of Algorithm 3 (player → replica beats, status to the cluster).
    /// Must be a multiple of `tick`.
    pub heartbeat: Duration,
    /// `k`: ticks without an acknowledgement before the server replaces its replica (and
    /// `3k` ticks without any server before a player gives the instance up).
    pub miss_limit: u32,
    /// Ticks without a snapshot before the replica suspects the server and runs for it
    /// (the detection timeout, `suspect_after · τ`; see the module docs for the choice).
    #[serde(default = "default_suspect_after")]
    pub suspect_after: u32,
    /// Silence after which a member is considered gone (dropped by the server, not counted
    /// in an electorate).
    pub member_timeout: Duration,
    /// Most inputs one [`Msg::Input`] carries (bounds message size).
    pub max_batch: usize,
    /// Most unconfirmed inputs a player keeps; beyond it new inputs are refused
    /// ([`Peer::push_input`] returns false).
    pub max_pending: usize,
}

impl Default for FailoverConfig {
    fn default() -> Self {
        Self {
            tick: Duration::from_millis(50),
            heartbeat: Duration::from_millis(250),
            miss_limit: 5,
            suspect_after: default_suspect_after(),
            member_timeout: Duration::from_millis(1_000),
            max_batch: 32,
            max_pending: 256,
        }
    }
}

fn default_suspect_after() -> u32 {
    3
}

impl FailoverConfig {
    /// The replica's detection timeout: `suspect_after · τ` (at least one tick).
    pub fn suspect_timeout(&self) -> Duration {
        self.tick * self.suspect_after.max(1)
    }
    fn ticks_per_beat(&self) -> u64 {
        (self.heartbeat.as_micros() / self.tick.as_micros().max(1)).max(1) as u64
    }
    fn detect(&self) -> Duration {
        self.tick * self.miss_limit
    }
    /// Wait for the first acknowledgement of a newly appointed replica: its first ack
    /// arrives a round trip after the first snapshot, which can exceed `kτ` on wide-area
    /// paths, so the server waits up to `member_timeout` for it.
    fn first_ack_wait(&self) -> Duration {
        self.member_timeout.max(self.detect())
    }
    /// A member votes only if it has not heard the server for this long: one tick less
    /// than the detection timeout (after a crash, the claim reaches a member at least the
    /// detection timeout after the server's last update to it, up to the tick phase).
    fn voter_silence(&self) -> Duration {
        self.tick * self.suspect_after.max(2).saturating_sub(1)
    }
}

/// One player's progress in the game state: inputs applied in order, and a digest of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    /// Sequence number of the last applied input (0: none).
    pub seq: u64,
    /// Running digest of the applied inputs `(seq, payload)`.
    pub digest: u64,
}

impl Progress {
    /// The progress after applying input `(seq, payload)` (must be `self.seq + 1`).
    pub fn apply(self, seq: u64, payload: u64) -> Progress {
        let mut d = self.digest ^ seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ payload;
        d = d.wrapping_mul(0xBF58_476D_1CE4_E5B9).rotate_left(29);
        Progress { seq, digest: d }
    }
}

/// The replicated game state: a tick counter and every player's applied inputs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GameState {
    /// Ticks the server(s) have run.
    pub tick: u64,
    /// Per-player progress.
    pub players: BTreeMap<PeerId, Progress>,
}

/// A configuration key `(epoch, version)`: totally ordered, grows with every change.
pub type ConfigKey = (u64, u64);

/// Protocol messages.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Msg {
    /// Server → replica, every tick: the full state (also the server's heartbeat).
    Snapshot {
        /// Sender's epoch.
        epoch: u64,
        /// Key of the server's current configuration (in which the recipient is replica).
        key: ConfigKey,
        /// Game state after the tick.
        state: GameState,
        /// Members of the current configuration (servers included).
        members: Vec<PeerId>,
        /// Members of the last effective configuration (the voting base).
        base: Vec<PeerId>,
        /// Successor ranking (Algorithm 2 order, best first).
        ranking: Vec<PeerId>,
        /// Highest committed tick.
        committed: u64,
    },
    /// Replica → server: snapshot of `tick` stored.
    SnapshotAck {
        /// Sender's epoch.
        epoch: u64,
        /// Tick stored.
        tick: u64,
    },
    /// Server → player, every tick: game update and heartbeat.
    Update {
        /// Sender's epoch.
        epoch: u64,
        /// Key of the server's current configuration.
        key: ConfigKey,
        /// Game tick.
        tick: u64,
        /// Current replica.
        replica: Option<PeerId>,
        /// Highest committed tick.
        committed: u64,
        /// The recipient's highest confirmed input.
        confirmed: u64,
    },
    /// Player → server, every tick: unconfirmed inputs (oldest first).
    Input {
        /// Sender's epoch.
        epoch: u64,
        /// Newest configuration key the sender knows (the echo that makes changes effective).
        known: ConfigKey,
        /// `(seq, payload)` pairs.
        inputs: Vec<(u64, u64)>,
    },
    /// Player → replica every `T` (Algorithm 3's reply to the second server).
    Beat {
        /// Sender's epoch.
        epoch: u64,
    },
    /// Candidate → members: vote for me as server of `epoch`.
    Claim {
        /// The epoch claimed.
        epoch: u64,
        /// Key of the configuration in which the candidate is replica.
        key: ConfigKey,
        /// Candidate's state tick.
        state_tick: u64,
    },
    /// Member → candidate.
    Vote {
        /// The epoch voted on.
        epoch: u64,
        /// Granted or not.
        granted: bool,
    },
    /// Member → a server of an older epoch: there is a newer one.
    NewerEpoch {
        /// The newer epoch.
        epoch: u64,
        /// Its server, if known.
        server: Option<PeerId>,
    },
    /// Server → cluster every `T` (Algorithm 3: "status to the cluster").
    Status {
        /// Sender's epoch.
        epoch: u64,
        /// Current replica.
        replica: Option<PeerId>,
        /// Number of members.
        members: u32,
        /// Game tick.
        tick: u64,
    },
}

impl Msg {
    /// Epoch carried by the message.
    pub fn epoch(&self) -> u64 {
        match self {
            Msg::Snapshot { epoch, .. }
            | Msg::SnapshotAck { epoch, .. }
            | Msg::Update { epoch, .. }
            | Msg::Input { epoch, .. }
            | Msg::Beat { epoch }
            | Msg::Claim { epoch, .. }
            | Msg::Vote { epoch, .. }
            | Msg::NewerEpoch { epoch, .. }
            | Msg::Status { epoch, .. } => *epoch,
        }
    }
}

/// A message to send: the machines' one [`Transmit`](worldmesh_core::Transmit) type,
/// carrying the typed [`Msg`] (the hosting node frames it, `node::instance_wire`).
/// The destination is the peer's node, [`CLUSTER_NODE`] for the Central Area.
pub type Transmit = worldmesh_core::Transmit<Msg>;

/// [`CLUSTER`] as a destination node.
pub const CLUSTER_NODE: NodeId = NodeId(CLUSTER);

/// Role of a peer (paper `003` §3.1: `AG_x.S`, `AG_x.RS`, player).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    /// `AG_x.S`.
    Server,
    /// `AG_x.RS`.
    Replica,
    /// A player served by the others.
    Player,
}

/// Things the driver may want to know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// This peer became server of `epoch` (Algorithm 4).
    Promoted {
        /// New epoch.
        epoch: u64,
    },
    /// This peer stopped being server because `epoch` is newer.
    SteppedDown {
        /// The newer epoch.
        epoch: u64,
    },
    /// This peer became the replica.
    BecameReplica {
        /// Epoch of the appointing server.
        epoch: u64,
    },
    /// The server appointed a new replica.
    ReplicaAppointed {
        /// The new replica.
        replica: PeerId,
    },
    /// The server dropped a silent member.
    MemberLeft {
        /// Who.
        member: PeerId,
    },
    /// A player has heard from no server for `3k` ticks: the instance is gone for it.
    InstanceLost,
    /// This replica suspected its server and runs for server of `epoch` (a false
    /// suspicion if the server was alive).
    Candidate {
        /// The epoch claimed.
        epoch: u64,
    },
}

/// One member of an auxiliary game running Algorithms 3 and 4.
#[derive(Clone, Debug)]
pub struct Peer {
    id: PeerId,
    cfg: FailoverConfig,
    role: Role,
    epoch: u64,
    server: Option<PeerId>,
    replica: Option<PeerId>,
    /// Current configuration's members.
    members: Vec<PeerId>,
    /// Last effective configuration's members (quorum base).
    base: Vec<PeerId>,
    /// Member of `base` not counted in the gate (the deposed server after a promotion).
    gate_exclude: Option<PeerId>,
    /// Server: version of the current configuration.
    version: u64,
    /// Server: current configuration not yet effective.
    change_pending: bool,
    /// Newest configuration key seen.
    known: ConfigKey,
    /// Server: newest key each member echoed.
    known_of: BTreeMap<PeerId, ConfigKey>,
    /// Dropped members and deposed servers, probed every `T`.
    former: BTreeSet<PeerId>,
    ranking: Vec<PeerId>,
    state: GameState,
    committed: u64,
    last_heard: BTreeMap<PeerId, Time>,
    next_tick: Time,
    ticks: u64,
    queued: BTreeMap<PeerId, BTreeMap<u64, u64>>,
    inflight: VecDeque<(u64, BTreeMap<PeerId, u64>)>,
    confirmed: BTreeMap<PeerId, u64>,
    last_ack_at: Time,
    /// Server: the current replica has acknowledged at least one snapshot.
    replica_acked: bool,
    /// Replica: last snapshot or update from the server (what its detection watches).
    last_server_at: Time,
    /// A snapshot has arrived at least once (see [`Peer::detection_deadline`]).
    snapshot_seen: bool,
    candidate_epoch: Option<u64>,
    /// Key the candidate claims with.
    claim_key: ConfigKey,
    votes: BTreeSet<PeerId>,
    /// Highest epoch this peer voted for *another* candidate in, or followed.
    voted_epoch: u64,
    /// The candidate granted in `voted_epoch` (a lost vote is granted again on retry).
    voted_for: Option<PeerId>,
    /// Highest epoch this peer ran for itself (its self-vote dies with its candidacy).
    ran_epoch: u64,
    /// The last vote granted: the configuration key its candidate takes on promotion and
    /// the candidate. Granting it is this member's echo of that key (see
    /// [`Peer::try_win`]), so other candidates need a claim key at least as new.
    promised: Option<(ConfigKey, PeerId)>,
    last_update_at: Time,
    next_seq: u64,
    pending: VecDeque<(u64, u64)>,
    my_confirmed: u64,
    known_committed: u64,
    lost: bool,
    out: VecDeque<Transmit>,
    events: VecDeque<Event>,
}

impl Peer {
    /// A member of a new P2P sub-area created by Algorithm 2: `members` (all players,
    /// servers included), `server` and `replica` as chosen, `ranking` the successor order
    /// (best first). Its first tick is at `first_tick` (drivers stagger them).
    pub fn new(
        id: PeerId,
        cfg: FailoverConfig,
        members: Vec<PeerId>,
        server: PeerId,
        replica: Option<PeerId>,
        ranking: Vec<PeerId>,
        first_tick: Time,
    ) -> Self {
        let role = if id == server {
            Role::Server
        } else if Some(id) == replica {
            Role::Replica
        } else {
            Role::Player
        };
        let state = GameState {
            tick: 0,
            players: members.iter().map(|&m| (m, Progress::default())).collect(),
        };
        let last_heard = members.iter().map(|&m| (m, first_tick)).collect();
        Self {
            id,
            cfg,
            role,
            epoch: 1,
            server: Some(server),
            replica,
            base: members.clone(),
            members,
            gate_exclude: None,
            version: 0,
            change_pending: false,
            known: (1, 0),
            known_of: BTreeMap::new(),
            former: BTreeSet::new(),
            ranking,
            state,
            committed: 0,
            last_heard,
            next_tick: first_tick,
            ticks: 0,
            queued: BTreeMap::new(),
            inflight: VecDeque::new(),
            confirmed: BTreeMap::new(),
            last_ack_at: first_tick,
            replica_acked: false,
            last_server_at: first_tick,
            snapshot_seen: false,
            candidate_epoch: None,
            claim_key: (1, 0),
            votes: BTreeSet::new(),
            voted_epoch: 1,
            voted_for: None,
            ran_epoch: 0,
            promised: None,
            last_update_at: first_tick,
            next_seq: 1,
            pending: VecDeque::new(),
            my_confirmed: 0,
            known_committed: 0,
            lost: false,
            out: VecDeque::new(),
            events: VecDeque::new(),
        }
    }

    /// This peer's id.
    pub fn id(&self) -> PeerId {
        self.id
    }
    /// Current role.
    pub fn role(&self) -> Role {
        self.role
    }
    /// Current epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }
    /// The server this peer follows (itself when server).
    pub fn server(&self) -> Option<PeerId> {
        self.server
    }
    /// The replica as this peer knows it.
    pub fn replica(&self) -> Option<PeerId> {
        self.replica
    }
    /// Current members as this peer knows them.
    pub fn members(&self) -> &[PeerId] {
        &self.members
    }
    /// The game state held (server: live; replica: last snapshot; player: initial).
    pub fn state(&self) -> &GameState {
        &self.state
    }
    /// Highest tick this peer committed while server (its replica acknowledged a snapshot
    /// of that tick while its configuration was effective); 0 before its first commit.
    pub fn committed_tick(&self) -> u64 {
        self.committed
    }
    /// Highest input sequence number confirmed to this player.
    pub fn confirmed_seq(&self) -> u64 {
        self.my_confirmed
    }
    /// Number of inputs this player has produced.
    pub fn inputs_produced(&self) -> u64 {
        self.next_seq - 1
    }
    /// True once this player concluded the instance is gone.
    pub fn is_lost(&self) -> bool {
        self.lost
    }

    /// The player's next game input (`payload`). Returns its sequence number, or `None`
    /// when [`FailoverConfig::max_pending`] unconfirmed inputs are already waiting.
    pub fn push_input(&mut self, payload: u64) -> Option<u64> {
        if self.pending.len() >= self.cfg.max_pending {
            return None;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.pending.push_back((seq, payload));
        Some(seq)
    }

    /// Next message to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.out.pop_front()
    }

    /// Next event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When to call [`Peer::handle_timeout`] next: the next tick, or earlier the moment a
    /// replica's detection timeout expires (detection does not wait for a tick boundary).
    pub fn poll_timeout(&self) -> Option<Time> {
        Some(
            self.detection_deadline()
                .map_or(self.next_tick, |d| d.min(self.next_tick)),
        )
    }

    /// Whether [`Peer::handle_timeout`] at `now` runs a game tick (drivers produce the
    /// player's input for the tick only then).
    pub fn tick_due(&self, now: Time) -> bool {
        now >= self.next_tick
    }

    /// Replica not yet running: when it suspects the server (detection timeout after the
    /// last snapshot). Before the first snapshot ever arrives the replica waits as long as
    /// a server waits for a new replica's first acknowledgement: the first snapshot comes
    /// one way-delay after the start, which on wide-area paths exceeds the detection timeout
    /// (found measuring: with a 150 ms timeout far replicas ran for server at start-up).
    fn detection_deadline(&self) -> Option<Time> {
        let wait = if self.snapshot_seen {
            self.cfg.suspect_timeout()
        } else {
            self.cfg.first_ack_wait()
        };
        (self.role == Role::Replica && self.candidate_epoch.is_none()).then(|| self.last_server_at + wait)
    }

    /// Claims (again) the current candidacy from every member of the electorate that has
    /// not voted yet, and takes office if the votes suffice.
    fn send_claims(&mut self, now: Time) {
        let Some(epoch) = self.candidate_epoch else {
            return;
        };
        for m in self.electorate() {
            if !self.votes.contains(&m) {
                let claim = Msg::Claim {
                    epoch,
                    key: self.claim_key,
                    state_tick: self.state.tick,
                };
                // Sent twice: the election is on the takeover's critical path, and each
                // copy is answered (a lost vote is granted again), so under loss `p` the
                // exchange fails with `≈ 2p²` instead of `≈ 2p`, each failure costing a
                // tick; elections are rare, the extra datagrams negligible.
                self.send(m, claim.clone());
                self.send(m, claim);
            }
        }
        self.try_win(now);
    }

    fn send(&mut self, to: PeerId, msg: Msg) {
        self.out.push_back(Transmit {
            dst: NodeId(to),
            class: MessageClass::Control,
            datagram: msg,
        });
    }

    fn alive_within(&self, now: Time, m: PeerId, window: Duration) -> bool {
        self.last_heard.get(&m).is_some_and(|&t| now - t <= window)
    }

    /// The newest epoch this peer has seen or voted for: servers older than it are stale.
    fn floor_epoch(&self) -> u64 {
        self.epoch.max(self.voted_epoch)
    }

    /// Handles a received message.
    pub fn handle_message(&mut self, now: Time, from: PeerId, msg: Msg) {
        self.last_heard.insert(from, now);
        let e = msg.epoch();
        // A server meeting a newer epoch steps down (exactly one server per epoch).
        if self.role == Role::Server && e > self.epoch && !matches!(msg, Msg::Claim { .. }) {
            let hint = match &msg {
                Msg::NewerEpoch { server, .. } => *server,
                Msg::Update { .. } | Msg::Snapshot { .. } => Some(from),
                _ => None,
            };
            self.step_down(now, e, hint);
        }
        match msg {
            Msg::Snapshot {
                epoch,
                key,
                state,
                members,
                base,
                ranking,
                committed,
            } => {
                if epoch < self.floor_epoch() || self.role == Role::Server {
                    self.send(
                        from,
                        Msg::NewerEpoch {
                            epoch: self.floor_epoch(),
                            server: self.server,
                        },
                    );
                    return;
                }
                if self.role != Role::Replica {
                    self.events.push_back(Event::BecameReplica { epoch });
                }
                self.role = Role::Replica;
                self.adopt(now, epoch, from);
                self.replica = Some(self.id);
                self.last_server_at = now;
                self.snapshot_seen = true;
                self.known = self.known.max(key);
                self.claim_key = key;
                if state.tick >= self.state.tick {
                    self.state = state;
                }
                self.members = members;
                self.base = base;
                self.ranking = ranking;
                self.known_committed = self.known_committed.max(committed);
                self.send(
                    from,
                    Msg::SnapshotAck {
                        epoch,
                        tick: self.state.tick,
                    },
                );
            }
            Msg::SnapshotAck { epoch, tick } => {
                if self.role != Role::Server || epoch != self.epoch || Some(from) != self.replica {
                    return;
                }
                self.last_ack_at = now;
                self.replica_acked = true;
                if !self.change_pending {
                    self.commit(tick);
                }
            }
            Msg::Update {
                epoch,
                key,
                tick: _,
                replica,
                committed,
                confirmed,
            } => {
                if epoch < self.floor_epoch() {
                    let server = if self.epoch == self.floor_epoch() {
                        self.server
                    } else {
                        None
                    };
                    self.send(
                        from,
                        Msg::NewerEpoch {
                            epoch: self.floor_epoch(),
                            server,
                        },
                    );
                    return;
                }
                if self.role == Role::Server {
                    return; // a same-epoch update from another server cannot happen
                }
                self.adopt(now, epoch, from);
                self.known = self.known.max(key);
                self.replica = replica;
                if self.role == Role::Replica && replica != Some(self.id) {
                    self.role = Role::Player; // replaced
                }
                if self.role == Role::Replica {
                    // The update is the server's heartbeat too: the replica suspects the
                    // server only when both its snapshots and its updates stop, so a false
                    // suspicion needs both lost for `suspect_after` ticks in a row.
                    self.last_server_at = now;
                }
                self.known_committed = self.known_committed.max(committed);
                self.my_confirmed = self.my_confirmed.max(confirmed);
                while self.pending.front().is_some_and(|&(s, _)| s <= self.my_confirmed) {
                    self.pending.pop_front();
                }
            }
            Msg::Input {
                epoch: _,
                known,
                inputs,
            } => {
                if self.role != Role::Server || from == CLUSTER {
                    return;
                }
                if !self.members.contains(&from) {
                    // Only a former member (e.g. a deposed server) may rejoin, as a
                    // configuration change; strangers are ignored (no new players join an
                    // instance, §3.2.1).
                    if !self.former.contains(&from) || self.change_pending {
                        return;
                    }
                    self.members.push(from);
                    self.ranking.push(from);
                    self.former.remove(&from);
                    self.change_config();
                }
                let k = self.known_of.entry(from).or_insert((0, 0));
                *k = (*k).max(known);
                // a pending change becomes effective as soon as the echo arrives (not at
                // the next tick): the next acknowledgement commits
                self.check_gate();
                let applied = self.state.players.get(&from).map_or(0, |p| p.seq);
                let q = self.queued.entry(from).or_default();
                for (seq, payload) in inputs.into_iter().take(self.cfg.max_batch) {
                    if seq > applied && q.len() < self.cfg.max_pending {
                        q.insert(seq, payload);
                    }
                }
            }
            Msg::Beat { .. } | Msg::Status { .. } => {}
            Msg::Claim {
                epoch,
                key,
                state_tick,
            } => {
                let silent = now - self.last_update_at >= self.cfg.voter_silence();
                let again = epoch == self.voted_epoch && self.voted_for == Some(from);
                let promise_kept = self.promised.is_none_or(|(k, c)| c == from || key >= k);
                let grant = self.role != Role::Server
                    && (epoch > self.floor_epoch() || again)
                    && self.candidate_epoch.is_none_or(|c| epoch > c)
                    && silent
                    && key >= self.known
                    && promise_kept
                    && state_tick >= self.known_committed;
                if grant {
                    self.voted_epoch = epoch;
                    self.voted_for = Some(from);
                    self.promised = Some((promotion_key(epoch, key), from));
                    self.candidate_epoch = None; // a newer candidate: give up our own run
                    self.votes.clear();
                }
                self.send(
                    from,
                    Msg::Vote {
                        epoch,
                        granted: grant,
                    },
                );
            }
            Msg::Vote { epoch, granted } => {
                if granted && self.candidate_epoch == Some(epoch) {
                    self.votes.insert(from);
                    self.try_win(now);
                }
            }
            Msg::NewerEpoch { epoch, server } => {
                if epoch > self.epoch && self.role != Role::Server {
                    self.epoch = epoch;
                    self.raise_floor(epoch);
                    self.server = server;
                }
            }
        }
    }

    /// Raises the epoch below which servers are stale (forgetting the vote of an older one).
    fn raise_floor(&mut self, epoch: u64) {
        if epoch > self.voted_epoch {
            self.voted_epoch = epoch;
            self.voted_for = None;
        }
    }

    /// Follow server `from` of `epoch`: a live server of our epoch or newer, so no election.
    fn adopt(&mut self, now: Time, epoch: u64, from: PeerId) {
        self.candidate_epoch = None;
        self.votes.clear();
        self.epoch = epoch;
        self.raise_floor(epoch);
        self.server = Some(from);
        self.last_update_at = now;
        self.lost = false;
    }

    fn step_down(&mut self, now: Time, epoch: u64, server: Option<PeerId>) {
        self.role = Role::Player;
        self.epoch = epoch;
        self.raise_floor(epoch);
        self.server = server;
        self.last_update_at = now;
        self.queued.clear();
        self.inflight.clear();
        self.events.push_back(Event::SteppedDown { epoch });
    }

    /// Server: the configuration changed; it is pending until a majority of the base knows.
    fn change_config(&mut self) {
        self.version += 1;
        self.change_pending = true;
        self.known = (self.epoch, self.version);
        self.inflight.clear();
    }

    /// Server: make the pending configuration effective once a strict majority of the last
    /// effective membership (minus the deposed server after a promotion) knows its key.
    fn check_gate(&mut self) {
        if !self.change_pending {
            return;
        }
        let key = (self.epoch, self.version);
        let voters: Vec<PeerId> = self
            .base
            .iter()
            .copied()
            .filter(|&m| Some(m) != self.gate_exclude)
            .collect();
        let know = voters
            .iter()
            .filter(|&&m| m == self.id || self.known_of.get(&m).is_some_and(|&k| k >= key))
            .count();
        if know * 2 > voters.len() {
            self.change_pending = false;
            self.base = self.members.clone();
            self.gate_exclude = None;
        }
    }

    /// Marks snapshot `tick` as stored by the replica: inputs in it become confirmed.
    fn commit(&mut self, tick: u64) {
        while let Some((t, seqs)) = self.inflight.front() {
            if *t > tick {
                break;
            }
            for (&p, &s) in seqs {
                let c = self.confirmed.entry(p).or_insert(0);
                *c = (*c).max(s);
            }
            self.committed = self.committed.max(*t);
            self.inflight.pop_front();
        }
    }

    /// Who may vote for this candidate: the last effective membership it knows, minus the
    /// suspected server and itself. Deliberately not filtered by what the candidate hears:
    /// a replica on the minority side of a partition must not shrink its electorate.
    /// Silence of the replica after which the server appoints another: `k` ticks without
    /// an acknowledgement once acks flow (they come every tick whatever the round trip),
    /// [`FailoverConfig::member_timeout`] while a new replica has not acknowledged yet.
    fn ack_timeout(&self) -> Duration {
        if self.replica_acked {
            self.cfg.detect()
        } else {
            self.cfg.first_ack_wait()
        }
    }

    fn electorate(&self) -> Vec<PeerId> {
        let suspect = self.server;
        self.base
            .iter()
            .copied()
            .filter(|&m| m != self.id && Some(m) != suspect)
            .collect()
    }

    fn try_win(&mut self, now: Time) {
        let Some(epoch) = self.candidate_epoch else {
            return;
        };
        let electorate = self.electorate();
        let yes = 1 + electorate.iter().filter(|m| self.votes.contains(m)).count();
        if yes * 2 <= electorate.len() + 1 {
            return;
        }
        let old = self.server.filter(|&s| s != self.id);
        let voters: Vec<PeerId> = std::mem::take(&mut self.votes).into_iter().collect();
        self.candidate_epoch = None;
        self.role = Role::Server;
        self.epoch = epoch;
        self.raise_floor(epoch);
        self.server = Some(self.id);
        self.members.retain(|&m| Some(m) != old);
        self.ranking.retain(|&m| Some(m) != old);
        self.former.extend(old);
        self.gate_exclude = old;
        self.version = self.claim_key.1;
        self.known_of.clear();
        // Each granted vote promised to refuse candidates older than the key we take now:
        // it is that voter's echo of the new configuration, so a majority of the last
        // effective membership knows it and the promotion is effective at once (no extra
        // round trip before the first commit).
        let key = promotion_key(epoch, self.claim_key);
        for v in voters {
            self.known_of.insert(v, key);
        }
        // Inputs we hold become confirmed once our new replica stores them (players keep
        // their old confirmations).
        self.confirmed.clear();
        self.replica = None;
        self.last_ack_at = now;
        for m in self.members.clone() {
            self.last_heard.entry(m).or_insert(now);
        }
        self.events.push_back(Event::Promoted { epoch });
        // One change: new epoch, old server out, new replica in.
        self.replica = self.choose_replica(now);
        self.replica_acked = false;
        if let Some(r) = self.replica {
            self.events.push_back(Event::ReplicaAppointed { replica: r });
        }
        self.change_config();
        debug_assert_eq!((self.epoch, self.version), key);
        self.check_gate();
        self.server_tick(now);
        // The first snapshot decides when the promotion's first commit comes: a second
        // copy, as for the claims.
        let first = self
            .out
            .iter()
            .find(|t| Some(t.dst.0) == self.replica && matches!(t.datagram, Msg::Snapshot { .. }))
            .cloned();
        if let Some(t) = first {
            self.out.push_back(t);
        }
    }

    /// The best-ranked live member that is neither this server nor its current replica.
    fn choose_replica(&self, now: Time) -> Option<PeerId> {
        let exclude: Vec<PeerId> = [Some(self.id), self.replica].into_iter().flatten().collect();
        let score: Vec<f64> = self
            .ranking
            .iter()
            .enumerate()
            .map(|(i, &m)| {
                let alive = self.members.contains(&m) && self.alive_within(now, m, self.cfg.member_timeout);
                if alive { i as f64 } else { f64::INFINITY }
            })
            .collect();
        let excl_pos: Vec<usize> = self
            .ranking
            .iter()
            .enumerate()
            .filter(|(_, m)| exclude.contains(m))
            .map(|(i, _)| i)
            .collect();
        best_candidate(&score, &excl_pos)
            .filter(|&i| score[i].is_finite())
            .map(|i| self.ranking[i])
    }

    /// Server: picks the best-ranked live member (not itself, not the current replica) as
    /// replica; a change of replica is a configuration change.
    fn appoint_replica(&mut self, now: Time) {
        let pick = self.choose_replica(now);
        self.last_ack_at = now;
        if pick == self.replica {
            return;
        }
        self.replica = pick;
        self.replica_acked = false;
        self.change_config();
        if let Some(r) = pick {
            self.events.push_back(Event::ReplicaAppointed { replica: r });
        }
    }

    /// The cluster's membership protocol declared member `m` failed (SWIM, in the node):
    /// stop waiting for it. A server drops it at its next tick; a member whose server it was
    /// treats the server as silent from now on, so the replica claims office at once and
    /// voters grant the claim without waiting out their own silence window.
    pub fn member_down(&mut self, now: Time, m: PeerId) {
        if m == self.id {
            return;
        }
        self.last_heard.remove(&m);
        if self.server == Some(m) {
            let long_ago = Time::ZERO;
            self.last_update_at = long_ago;
            if self.role == Role::Replica {
                self.last_server_at = long_ago;
            }
            let _ = now;
        }
    }

    /// Periodic work; call at (or after) [`Peer::poll_timeout`].
    pub fn handle_timeout(&mut self, now: Time) {
        let mut claimed = false;
        if self.detection_deadline().is_some_and(|d| now >= d) {
            let epoch = self.floor_epoch().max(self.ran_epoch) + 1;
            self.ran_epoch = epoch;
            self.candidate_epoch = Some(epoch);
            self.votes.clear();
            self.events.push_back(Event::Candidate { epoch });
            self.send_claims(now);
            claimed = true;
            if self.role == Role::Server {
                return;
            }
        }
        if now < self.next_tick {
            return;
        }
        self.next_tick = now + self.cfg.tick;
        self.ticks += 1;
        if self.role == Role::Server {
            self.server_tick(now);
            return;
        }
        if self.candidate_epoch.is_some() && !claimed {
            // resend the claim every tick until elected or overtaken
            self.send_claims(now);
            if self.role == Role::Server {
                return;
            }
        }
        if let Some(s) = self.server.filter(|&s| s != self.id) {
            let inputs: Vec<(u64, u64)> = self.pending.iter().take(self.cfg.max_batch).copied().collect();
            self.send(
                s,
                Msg::Input {
                    epoch: self.epoch,
                    known: self.known,
                    inputs,
                },
            );
        }
        if self.ticks.is_multiple_of(self.cfg.ticks_per_beat())
            && self.role == Role::Player
            && let Some(r) = self.replica.filter(|&r| r != self.id)
        {
            self.send(r, Msg::Beat { epoch: self.epoch });
        }
        if self.role == Role::Player && !self.lost && now - self.last_update_at >= self.cfg.detect() * 3 {
            self.lost = true;
            self.events.push_back(Event::InstanceLost);
        }
    }

    fn server_tick(&mut self, now: Time) {
        // own inputs go straight into the queue
        let q = self.queued.entry(self.id).or_default();
        for &(s, p) in &self.pending {
            q.insert(s, p);
        }
        // Drop silent members (Algorithm 3 detects exits, Algorithm 4 restructures): one
        // change at a time, and only while someone else is still heard (if nobody is, we
        // are the one cut off).
        if !self.change_pending {
            let timeout = self.cfg.member_timeout;
            let gone: Vec<PeerId> = self
                .members
                .iter()
                .copied()
                .filter(|&m| m != self.id && !self.alive_within(now, m, timeout))
                .collect();
            if !gone.is_empty() && gone.len() + 1 < self.members.len() {
                for &m in &gone {
                    self.members.retain(|&x| x != m);
                    self.ranking.retain(|&x| x != m);
                    self.former.insert(m);
                    self.events.push_back(Event::MemberLeft { member: m });
                }
                self.change_config();
                if self.replica.is_some_and(|r| gone.contains(&r)) {
                    self.appoint_replica(now);
                }
            }
        }
        // apply queued inputs in order
        for (p, q) in self.queued.iter_mut() {
            let prog = self.state.players.entry(*p).or_default();
            while let Some((&s, &payload)) = q.iter().next() {
                if s <= prog.seq {
                    q.remove(&s);
                } else if s == prog.seq + 1 {
                    *prog = prog.apply(s, payload);
                    q.remove(&s);
                } else {
                    break;
                }
            }
        }
        self.state.tick += 1;
        // replica health
        if self.replica.is_none() || now - self.last_ack_at >= self.ack_timeout() {
            self.appoint_replica(now);
        }
        self.check_gate();
        let seqs: BTreeMap<PeerId, u64> = self.state.players.iter().map(|(&p, pr)| (p, pr.seq)).collect();
        match self.replica {
            Some(r) => {
                self.inflight.push_back((self.state.tick, seqs));
                while self.inflight.len() > 4 * self.cfg.miss_limit as usize {
                    self.inflight.pop_front();
                }
                let msg = Msg::Snapshot {
                    epoch: self.epoch,
                    key: (self.epoch, self.version),
                    state: self.state.clone(),
                    members: self.members.clone(),
                    base: self.base.clone(),
                    ranking: self.ranking.clone(),
                    committed: self.committed,
                };
                self.send(r, msg);
            }
            None if self.members.len() <= 1 && !self.change_pending => {
                // the last player standing: nobody to replicate to, confirm at once
                self.inflight.push_back((self.state.tick, seqs));
                self.commit(self.state.tick);
            }
            None => {} // members but no live replica candidate: confirm nothing
        }
        let own = self.confirmed.get(&self.id).copied().unwrap_or(0);
        self.my_confirmed = self.my_confirmed.max(own);
        while self.pending.front().is_some_and(|&(s, _)| s <= self.my_confirmed) {
            self.pending.pop_front();
        }
        let beat = self.ticks.is_multiple_of(self.cfg.ticks_per_beat());
        let mut to: Vec<PeerId> = self.members.iter().copied().filter(|&m| m != self.id).collect();
        if beat {
            to.extend(self.former.iter().copied().filter(|m| !self.members.contains(m)));
        }
        for m in to {
            let confirmed = self.confirmed.get(&m).copied().unwrap_or(0);
            let msg = Msg::Update {
                epoch: self.epoch,
                key: (self.epoch, self.version),
                tick: self.state.tick,
                replica: self.replica,
                committed: self.committed,
                confirmed,
            };
            self.send(m, msg);
        }
        if beat {
            let msg = Msg::Status {
                epoch: self.epoch,
                replica: self.replica,
                members: self.members.len() as u32,
                tick: self.state.tick,
            };
            self.send(CLUSTER, msg);
        }
    }
}

/// A peer as the engine and the hosting node drive it (`worldmesh_core::Machine`): its
/// datagrams are typed [`Msg`]s, its peers' ids are node ids.
impl worldmesh_core::Machine for Peer {
    type Datagram = Msg;
    type Event = Event;

    fn handle_datagram(&mut self, now: Time, from: NodeId, msg: Msg) {
        self.handle_message(now, from.0, msg);
    }

    fn handle_timeout(&mut self, now: Time) {
        Peer::handle_timeout(self, now);
    }

    fn poll_transmit(&mut self) -> Option<Transmit> {
        Peer::poll_transmit(self)
    }

    fn poll_timeout(&self) -> Option<Time> {
        Peer::poll_timeout(self)
    }

    fn poll_event(&mut self) -> Option<Event> {
        Peer::poll_event(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server() -> Peer {
        Peer::new(
            0,
            FailoverConfig::default(),
            vec![0, 1, 2],
            0,
            Some(1),
            vec![0, 1, 2],
            Time::ZERO,
        )
    }

    #[test]
    fn strangers_and_oversized_batches_are_bounded() {
        let mut s = server();
        let now = Time::from_millis(10);
        // a peer that is not a member cannot join or inject inputs
        s.handle_message(
            now,
            99,
            Msg::Input {
                epoch: 1,
                known: (1, 0),
                inputs: vec![(1, 5)],
            },
        );
        s.handle_timeout(now);
        assert!(!s.members().contains(&99));
        assert!(!s.state().players.contains_key(&99));
        // a member's oversized batch is cut to max_batch
        let inputs: Vec<(u64, u64)> = (1..=10_000).map(|i| (i, i)).collect();
        s.handle_message(
            now,
            2,
            Msg::Input {
                epoch: 1,
                known: (1, 0),
                inputs,
            },
        );
        s.handle_timeout(now + Duration::from_millis(50));
        assert_eq!(
            s.state().players[&2].seq,
            FailoverConfig::default().max_batch as u64
        );
    }

    #[test]
    fn stale_server_is_told_about_the_newer_epoch_and_steps_down() {
        let mut p = Peer::new(
            2,
            FailoverConfig::default(),
            vec![0, 1, 2],
            0,
            Some(1),
            vec![0, 1, 2],
            Time::ZERO,
        );
        // player 2 follows epoch 3's server 1
        p.handle_message(
            Time::from_millis(1),
            1,
            Msg::Update {
                epoch: 3,
                key: (3, 1),
                tick: 1,
                replica: Some(0),
                committed: 0,
                confirmed: 0,
            },
        );
        // the old server 0 of epoch 1 is answered with NewerEpoch
        p.handle_message(
            Time::from_millis(2),
            0,
            Msg::Update {
                epoch: 1,
                key: (1, 0),
                tick: 9,
                replica: Some(1),
                committed: 0,
                confirmed: 0,
            },
        );
        let t = p.poll_transmit().unwrap();
        assert_eq!(
            t,
            Transmit {
                dst: NodeId(0),
                class: MessageClass::Control,
                datagram: Msg::NewerEpoch {
                    epoch: 3,
                    server: Some(1)
                }
            }
        );
        let mut s = server();
        s.handle_message(Time::from_millis(3), 2, t.datagram);
        assert_eq!(s.role(), Role::Player);
        assert_eq!(s.server(), Some(1));
        assert_eq!(s.poll_event(), Some(Event::SteppedDown { epoch: 3 }));
    }

    fn drain(p: &mut Peer) -> Vec<Transmit> {
        std::iter::from_fn(|| p.poll_transmit()).collect()
    }

    #[test]
    fn a_vote_promises_to_refuse_older_candidates_but_not_its_own() {
        let mut p = Peer::new(
            2,
            FailoverConfig::default(),
            vec![0, 1, 2, 3],
            0,
            Some(1),
            vec![0, 1, 3, 2],
            Time::ZERO,
        );
        let claim = |epoch| Msg::Claim {
            epoch,
            key: (1, 0),
            state_tick: 0,
        };
        let vote = |p: &mut Peer| match drain(p).pop().map(|t| t.datagram) {
            Some(Msg::Vote { granted, .. }) => granted,
            other => panic!("expected a vote, got {other:?}"),
        };
        // silent long enough: grants candidate 1 for epoch 2, promising key (2, 1)
        p.handle_message(Time::from_millis(200), 1, claim(2));
        assert!(vote(&mut p));
        assert_eq!(promotion_key(2, (1, 0)), (2, 1));
        // another candidate with a claim key older than the promise is refused, even for
        // a newer epoch (candidate 1 may have won epoch 2 and confirmed with key (2, 1))
        p.handle_message(Time::from_millis(210), 3, claim(3));
        assert!(!vote(&mut p));
        // a candidate that was replica in a configuration at least that new is granted
        p.handle_message(
            Time::from_millis(220),
            3,
            Msg::Claim {
                epoch: 4,
                key: (2, 1),
                state_tick: 0,
            },
        );
        assert!(vote(&mut p));
        // and the first candidate, re-running after a lost election, is not locked out
        // by its own promise (only by the newer one just given)
        let mut q = Peer::new(
            2,
            FailoverConfig::default(),
            vec![0, 1, 2, 3],
            0,
            Some(1),
            vec![0, 1, 3, 2],
            Time::ZERO,
        );
        q.handle_message(Time::from_millis(200), 1, claim(2));
        assert!(vote(&mut q));
        q.handle_message(Time::from_millis(400), 1, claim(3));
        assert!(vote(&mut q));
    }

    #[test]
    fn the_votes_make_the_promotion_effective_so_the_first_ack_commits() {
        let cfg = FailoverConfig::default();
        let mut r = Peer::new(
            1,
            cfg.clone(),
            vec![0, 1, 2, 3, 4],
            0,
            Some(1),
            vec![0, 1, 2, 3, 4],
            Time::ZERO,
        );
        let snap = |tick| Msg::Snapshot {
            epoch: 1,
            key: (1, 0),
            state: GameState {
                tick,
                players: (0..5).map(|m| (m, Progress::default())).collect(),
            },
            members: vec![0, 1, 2, 3, 4],
            base: vec![0, 1, 2, 3, 4],
            ranking: vec![0, 1, 2, 3, 4],
            committed: 0,
        };
        r.handle_message(Time::from_millis(10), 0, snap(1));
        drain(&mut r);
        for m in 2..5 {
            r.handle_message(Time::from_millis(20), m, Msg::Beat { epoch: 1 });
        }
        // the server falls silent: the replica suspects it 3τ after its last snapshot,
        // at that instant (not at its next tick)
        let due = Time::from_millis(10) + cfg.suspect_timeout();
        r.handle_timeout(Time::ZERO);
        r.handle_timeout(Time::from_millis(50));
        r.handle_timeout(Time::from_millis(100));
        r.handle_timeout(Time::from_millis(150));
        drain(&mut r);
        assert_eq!(r.poll_timeout(), Some(due));
        r.handle_timeout(due);
        let claims: Vec<PeerId> = drain(&mut r)
            .into_iter()
            .filter(|t| matches!(t.datagram, Msg::Claim { epoch: 2, .. }))
            .map(|t| t.dst.0)
            .collect();
        assert_eq!(claims, vec![2, 2, 3, 3, 4, 4], "each voter gets two copies");
        // two of three voters grant: a majority of {1, 2, 3, 4} with the candidate
        let t = due + Duration::from_millis(30);
        r.handle_message(
            t,
            2,
            Msg::Vote {
                epoch: 2,
                granted: true,
            },
        );
        assert_eq!(r.role(), Role::Replica);
        r.handle_message(
            t,
            3,
            Msg::Vote {
                epoch: 2,
                granted: true,
            },
        );
        assert_eq!(r.role(), Role::Server);
        assert_eq!(r.replica(), Some(2), "best-ranked live member");
        let out = drain(&mut r);
        let key = out.iter().find_map(|t| match t.datagram {
            Msg::Snapshot { key, .. } if t.dst.0 == 2 => Some(key),
            _ => None,
        });
        assert_eq!(key, Some(promotion_key(2, (1, 0))), "the key the voters promised");
        // no player has echoed the new key yet: the first acknowledgement commits anyway
        assert_eq!(r.committed_tick(), 0);
        r.handle_message(
            t + Duration::from_millis(20),
            2,
            Msg::SnapshotAck { epoch: 2, tick: 2 },
        );
        assert_eq!(r.committed_tick(), 2);
    }
}
