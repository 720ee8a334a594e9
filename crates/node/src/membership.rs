//! Dynamic cluster membership with SWIM (Das, Gupta and Motivala, 2002), through `foca`.
//!
//! A node joins a running world through one or more seed members, learns the rest by
//! gossip, detects failed members (direct and indirect probes, suspicion, confirmation)
//! and leaves gracefully. The protocol is sans-IO like every other part of the node: this
//! wrapper turns foca's callbacks into queues — datagrams to send ([`Membership::poll_transmit`]),
//! membership changes ([`Membership::poll_event`]) and timers kept in virtual time
//! ([`Membership::poll_timeout`], [`Membership::handle_timeout`]) — so the simulator and
//! the real runtime drive the same code, and the same seed gives the same membership
//! history.
//!
//! A member is identified by its node id, its **generation** (its incarnation: a process
//! that restarts with the same node id comes back as a new member with a higher
//! generation, and the old one is declared down) and the address others reach it at
//! ([`Member`]). SWIM carries that identity in every message; the node checks that the
//! identity a message claims as its sender is the authenticated sender (the transport's
//! mutual TLS binds node ids to certificates), so a member cannot speak for another.
//!
//! The paper this replaces a static list for is paper `003` (§3.2.1: heartbeats detect a
//! failed server); SWIM's suspicion mechanism keeps false positives rare under loss while
//! detecting real failures in a few protocol periods. Two parts of Lifeguard (Dadgar,
//! Phillips and Currey, 2018) are added around foca: a node tells the members it suspects
//! (`Membership::tell_suspects`), and a node whose probes fail on members it still hears,
//! or that the others declared down, slows its own verdicts (local health,
//! `membership/health.rs`). Our own addition: a down verdict from gossip about a member
//! this node still hears is read as a suspicion (`membership/hearsay.rs`).

mod health;
mod hearsay;
mod leave;
mod silence;
mod wire;

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::num::{NonZeroU8, NonZeroUsize};
use std::time::Duration;

use foca::{Foca, Message, Notification, Runtime, State, Timer};
use worldmesh_core::{DetRng, NodeId, Time};

pub use leave::{Departure, MAX_NOTICES, NoticeError};
pub use wire::{MemberCodec, WireError};

/// A member of the cluster as SWIM knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Member {
    /// The node id (named by the member's certificate).
    pub node: NodeId,
    /// The member's generation (incarnation): higher after every restart.
    pub generation: u32,
    /// Where other members reach it.
    pub addr: SocketAddr,
}

impl Member {
    /// A member for the simulator, where addresses are not used: a private address
    /// derived from the node id.
    pub fn simulated(node: NodeId, generation: u32) -> Self {
        let ip = Ipv4Addr::new(10, (node.0 >> 16) as u8, (node.0 >> 8) as u8, node.0 as u8);
        Self {
            node,
            generation,
            addr: SocketAddr::new(IpAddr::V4(ip), 7000),
        }
    }
}

/// What one member sees of the cluster: how many members it holds live (itself included)
/// and the lowest node id among them. After a partition each side declared the other
/// failed; when the network heals, a refusal carries the refuser's view
/// ([`Membership::declared_down`]) so that exactly one side yields and rejoins: the
/// smaller one, and on a tie the one without the lowest node id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct View {
    /// Live members, this one included (at least 1).
    pub members: u32,
    /// The lowest node id among them.
    pub lowest: NodeId,
}

impl View {
    /// True if the side seen as `self` wins over the side seen as `other`: more members,
    /// or as many and a lower lowest id. Two disjoint sides of a split differ in one or
    /// the other; views that overlap (a partial partition) can be equal, and then
    /// [`Membership::declared_down`] breaks the tie by the two nodes' ids.
    pub fn beats(&self, other: &View) -> bool {
        (self.members, std::cmp::Reverse(self.lowest)) > (other.members, std::cmp::Reverse(other.lowest))
    }
}

impl foca::Identity for Member {
    type Addr = NodeId;

    /// A member declared down while it was alive (a false suspicion, a partition) comes
    /// back as its next generation.
    fn renew(&self) -> Option<Self> {
        Some(Self {
            generation: self.generation.checked_add(1)?,
            ..*self
        })
    }

    fn addr(&self) -> NodeId {
        self.node
    }

    /// Of two identities with one node id, the later generation is the member.
    fn win_addr_conflict(&self, adversary: &Self) -> bool {
        self.generation > adversary.generation
    }
}

/// SWIM timing and sizes. The defaults suit a LAN or a data centre; WAN deployments raise
/// the probe period and round-trip estimate ([`MembershipConfig::wan`]).
#[derive(Clone, Debug, PartialEq)]
pub struct MembershipConfig {
    /// A random member is probed this often.
    pub probe_period: Duration,
    /// How long a direct probe waits for its answer before indirect probes go out.
    pub probe_rtt: Duration,
    /// Members asked to probe indirectly.
    pub indirect_probes: usize,
    /// A suspect that does not refute the suspicion within this time is declared down.
    pub suspect_to_down_after: Duration,
    /// How often each update is piggybacked (grows with log of the cluster size).
    pub max_transmissions: u8,
    /// Gossip to this many members every `gossip_every`.
    pub gossip_members: usize,
    /// Period of the extra gossip rounds.
    pub gossip_every: Duration,
    /// Announce to a random member this often (heals partitions that split the view).
    pub announce_every: Duration,
    /// While this node knows no live member, announce itself this often (see
    /// `Membership::reannounce`). A lone node is rare and costs three announcements per
    /// period, so this is short for either profile. With the `wan` profile's 10 s of
    /// `announce_every`, a node that renewed during a one-way mute, and whose announcement
    /// went out just before the heal, stayed out of the others' views for 10 s more
    /// (`sim/tests/churn.rs`, `a_lone_node_is_back_in_every_view_soon_after_a_wan_mute`),
    /// and a host cut off for 12 s yielded 4.3–4.4 s after the heal instead of 1.3–1.4 s
    /// (`crates/cli/tests/netns.rs`, two runs each, 8 Dec 2026).
    pub alone_announce_every: Duration,
    /// Largest SWIM message in bytes (must fit a transport datagram).
    pub max_packet: usize,
    /// Passive failure detection: a member this node hears from steadily (game traffic
    /// every frame, see [`Membership::heard`]) that falls silent this long is suspected at
    /// once, without waiting for SWIM's round-robin probe to reach it; it is declared down
    /// `suspect_to_down_after` later unless it refutes. `None` turns it off.
    pub suspect_silent_after: Option<Duration>,
}

impl Default for MembershipConfig {
    fn default() -> Self {
        Self::lan()
    }
}

impl MembershipConfig {
    /// Settings for nodes one LAN or data centre apart (round trips well under 80 ms): a
    /// failed member is declared down in about 2.3 s; under 10 % datagram loss a live member
    /// is now and then declared down too (and comes back as its next generation). Measured
    /// on 16 members (membership alone, 5 ms one way, 30 s per point): with a 250 ms probe
    /// period, 3 indirect probes and 1.5 s of suspicion, every member was falsely declared
    /// down once in 30 s at 10 % loss; with a 300 ms period, 5 indirect probes and 2 s, at
    /// least one false failure in 5 of 12 loss patterns at 10 % (22 at 20 % on one
    /// pattern), detection 2.4–2.8 s; these settings, 10 of 12 (15 false failures in all),
    /// on the tests' former network of 1 ms steps; on the engine, each datagram lost with
    /// probability 0.1, 9 of 12 (21 in all: `membership::tests`). (Suspicions
    /// that nobody forwards to the suspect cannot be refuted: more indirect probes and
    /// retransmissions are what helps.) The 200 ms period keeps the 2 s of suspicion and
    /// finds the failure sooner: `experiment adoption --quick` (16 members, 20 ms RTT)
    /// re-homes every orphan by 2.40 s (p99; 2.51 s with 300 ms) with 0 false suspicions at
    /// 10 % loss (one seed: since the stale-binding probes of issue 14 shifted its loss
    /// stream, the same run counts 14, and 28 with an intermediate build — a single
    /// pattern's count swings that much), and `kill -9` of 2 of 8 real nodes by 2.27–3.12 s (p99 of six runs, one
    /// over 3 s: the wait for the first probe of the dead node is the tail; 2.87–3.25 s
    /// with 300 ms). Suspicion through silence (`suspect_silent_after`) removed that
    /// wait: with 400 ms 2.26–2.54 s over eight runs, and `experiment adoption` (64 nodes,
    /// 6 crashed) 2.58–2.76 s at 0–20 % loss; with the 500 ms kept, 2.45–2.62 s over six
    /// runs and 2.56–2.80 s.
    pub fn lan() -> Self {
        Self {
            probe_period: Duration::from_millis(200),
            probe_rtt: Duration::from_millis(80),
            indirect_probes: 5,
            suspect_to_down_after: Duration::from_millis(2000),
            max_transmissions: 16,
            gossip_members: 3,
            gossip_every: Duration::from_millis(100),
            // A member back after a false failure (a new generation) is admitted again
            // through these announcements: 10 s kept it out of its peers' views for up to
            // 10 s after a partition healed (the fault swarm's liveness check).
            announce_every: Duration::from_secs(2),
            alone_announce_every: Duration::from_secs(2),
            max_packet: 1100,
            // Five frames at 10 Hz: in a running world every member hears every other
            // one each frame, so this finds a crash sooner than the first probe of the dead
            // member (up to one probe round, 200 ms × members, later). `experiment
            // adoption` (64 nodes, 6 crashed, 3 seeds): at 10 % loss 400 ms raised false
            // suspicions from 342 (probes only) to 627, 500 ms to 399; at 20 % 6,094 →
            // 6,840 and 6,783; the p99 adoption time 2.58 s with 400 ms, 2.68 s with 500.
            // Most of those were refuted suspicions that renewed their member anyway
            // (`Membership::stale_suspicion`): since that fix and the suspicion notices
            // (`Membership::tell_suspects`), the same experiment declares no live member
            // down at any loss rate up to 20 % (7 Dec 2026; 57 / 399 / 6,384 before).
            suspect_silent_after: Some(Duration::from_millis(500)),
        }
    }

    /// Settings for members spread over a wide-area network (round trips up to ~800 ms).
    pub fn wan() -> Self {
        Self {
            probe_period: Duration::from_millis(1500),
            probe_rtt: Duration::from_millis(700),
            suspect_to_down_after: Duration::from_millis(4500),
            gossip_every: Duration::from_millis(250),
            announce_every: Duration::from_secs(10),
            // Game traffic flows every frame over a WAN too; 2 s of silence rides out
            // bursts of loss and jitter, and the 4.5 s of suspicion that follows is what
            // a live member has to refute, as with a probe. Probes alone reach a given
            // member once per round of 1.5 s × members (96 s at 64 members), so over
            // PlanetLab the first probe of a crashed member often came seconds later.
            suspect_silent_after: Some(Duration::from_secs(2)),
            ..Self::lan()
        }
    }

    /// The profile of that name: `"lan"` ([`Self::lan`]) or `"wan"` ([`Self::wan`]).
    pub fn named(profile: &str) -> Option<Self> {
        match profile {
            "lan" => Some(Self::lan()),
            "wan" => Some(Self::wan()),
            _ => None,
        }
    }

    /// The profile (`"lan"` or `"wan"`) for members whose round trips reach
    /// `largest_rtt`, for a configuration that names none: `wan` when a probe's answer
    /// takes longer than [`Self::lan`] waits for it (80 ms).
    ///
    /// With `lan` timing beyond that no direct probe is answered in time, every member is
    /// suspected over and over, and some refutations lose the race: live members are
    /// declared down and their objects adopted. Measured with `worldmesh cluster --nodes 4
    /// --duration 10s --latency L --membership lan` (real processes, 6 Dec 2026):
    /// `uniform:100` 0 members declared down, `uniform:200` 30 (202 objects adopted from
    /// live members), `planetlab` 18 (106); with `wan`, 0 in each. In the simulator, 16
    /// nodes over PlanetLab for 20 s (2 backups) miss 9.89 % of the replicas they need
    /// with `lan` against 2.97 % with `wan` (at 0 ms grace).
    pub fn profile_for(largest_rtt: Duration) -> &'static str {
        if largest_rtt > Self::lan().probe_rtt {
            "wan"
        } else {
            "lan"
        }
    }

    fn foca(&self) -> Result<foca::Config, MembershipError> {
        let nz = |n: usize, what: &'static str| NonZeroUsize::new(n).ok_or(MembershipError::BadConfig(what));
        if self.probe_rtt >= self.probe_period || self.probe_period.is_zero() {
            return Err(MembershipError::BadConfig(
                "probe_rtt must be shorter than a non-zero probe_period",
            ));
        }
        if self.gossip_every.is_zero()
            || self.announce_every.is_zero()
            || self.alone_announce_every.is_zero()
            || self.suspect_to_down_after.is_zero()
        {
            return Err(MembershipError::BadConfig("periods must be positive"));
        }
        if self
            .suspect_silent_after
            .is_some_and(|d| d < Duration::from_millis(10) || d > Duration::from_secs(60))
        {
            return Err(MembershipError::BadConfig(
                "suspect_silent_after must be in 10 ms..=60 s",
            ));
        }
        if !(64..=60_000).contains(&self.max_packet) {
            return Err(MembershipError::BadConfig(
                "max_packet must be in 64..=60000 bytes",
            ));
        }
        Ok(foca::Config {
            probe_period: self.probe_period,
            probe_rtt: self.probe_rtt,
            num_indirect_probes: nz(self.indirect_probes, "indirect_probes must be positive")?,
            max_transmissions: NonZeroU8::new(self.max_transmissions)
                .ok_or(MembershipError::BadConfig("max_transmissions must be positive"))?,
            suspect_to_down_after: self.suspect_to_down_after,
            // Remember down members long enough that a slow gossip cannot resurrect them.
            remove_down_after: Some(Duration::from_secs(15 * 60)),
            max_packet_size: nz(self.max_packet, "max_packet")?,
            notify_down_members: true,
            periodic_announce: Some(foca::PeriodicParams {
                frequency: self.announce_every,
                num_members: NonZeroUsize::MIN,
            }),
            periodic_announce_to_down_members: Some(foca::PeriodicParams {
                frequency: self.announce_every * 3,
                num_members: NonZeroUsize::MIN,
            }),
            periodic_gossip: Some(foca::PeriodicParams {
                frequency: self.gossip_every,
                num_members: nz(self.gossip_members, "gossip_members must be positive")?,
            }),
        })
    }
}

/// Why membership input was refused, or a setting is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MembershipError {
    /// The SWIM message does not decode.
    #[error("malformed membership message: {0}")]
    Malformed(#[from] WireError),
    /// The message claims a sender other than the authenticated one.
    #[error("membership message from {from} claims to be from {claimed}")]
    Impersonation {
        /// The authenticated sender.
        from: NodeId,
        /// The node the message names as its sender.
        claimed: NodeId,
    },
    /// foca refused the message (too big, from ourselves, inconsistent).
    #[error("membership message refused: {0}")]
    Refused(String),
    /// A configuration value is out of range.
    #[error("bad membership setting: {0}")]
    BadConfig(&'static str),
}

/// A change of the member set, as this node sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MembershipEvent {
    /// A member is up (joined, or learned of).
    Up(Member),
    /// A member left, or was declared down (failed); see [`Departure`].
    Down(Member, Departure),
    /// This node is known to at least one member: it has joined.
    Active,
    /// Every known member is down or gone.
    Idle,
    /// The others declared this node down while it was alive; it came back as `Member`,
    /// its next generation (everything it held as primary was adopted by others).
    Rejoined(Member),
}

/// foca's random source, from the node's deterministic stream.
struct FocaRng(DetRng);

impl rand_core::TryRng for FocaRng {
    type Error = Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        Ok(self.0.next_u64() as u32)
    }

    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        Ok(self.0.next_u64())
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        for c in dst.chunks_mut(8) {
            let b = self.0.next_u64().to_le_bytes();
            c.copy_from_slice(&b[..c.len()]);
        }
        Ok(())
    }
}

/// What foca asked for during one call, applied afterwards at that call's `now`.
#[derive(Default)]
struct Outbox {
    sends: Vec<(Member, Vec<u8>)>,
    timers: Vec<(Timer<Member>, Duration)>,
    notes: Vec<Note>,
}

enum Note {
    Up(Member),
    Down(Member),
    Rename(Member, Member),
    Active,
    Idle,
    Defunct,
    Rejoin(Member),
}

impl Runtime<Member> for &mut Outbox {
    fn notify(&mut self, n: Notification<'_, Member>) {
        let note = match n {
            Notification::MemberUp(m) => Note::Up(*m),
            Notification::MemberDown(m) => Note::Down(*m),
            Notification::Rename(a, b) => Note::Rename(*a, *b),
            Notification::Active => Note::Active,
            Notification::Idle => Note::Idle,
            Notification::Defunct => Note::Defunct,
            Notification::Rejoin(m) => Note::Rejoin(*m),
        };
        self.notes.push(note);
    }

    fn send_to(&mut self, to: Member, data: &[u8]) {
        self.sends.push((to, data.to_vec()));
    }

    fn submit_after(&mut self, event: Timer<Member>, after: Duration) {
        self.timers.push((event, after));
    }
}

/// The suspect and the incarnation suspected, if `timer` is a suspicion's timeout (foca
/// starts one for each suspicion its probes raise).
fn suspicion(timer: &Timer<Member>) -> Option<(Member, u16)> {
    match timer {
        Timer::ChangeSuspectToDown {
            member_id,
            incarnation,
            ..
        } => Some((*member_id, *incarnation)),
        _ => None,
    }
}

/// Most SWIM datagrams or events kept when the driver does not drain them.
const MAX_QUEUED: usize = 4096;

/// The SWIM membership of one node (sans-IO).
pub struct Membership {
    foca: Foca<Member, hearsay::GossipCodec, FocaRng, leave::Notices>,
    /// The live members heard lately, shared with foca's codec ([`hearsay`]).
    heard_now: hearsay::HeardNow,
    /// The leave notices seen (shared with foca's broadcast handler).
    notices: leave::Notices,
    /// foca's timers by due time (ties by insertion order).
    timers: BTreeMap<(Time, u64), Timer<Member>>,
    timer_seq: u64,
    transmits: VecDeque<(NodeId, Vec<u8>)>,
    events: VecDeque<MembershipEvent>,
    /// Live members (not this node), by node id.
    live: BTreeMap<NodeId, Member>,
    /// Every identity seen (live or not), by node id: where to reach it.
    addrs: BTreeMap<NodeId, Member>,
    outbox: Outbox,
    /// Messages refused (malformed, impersonation, foca errors).
    refused: u64,
    /// This node left: it no longer takes part (and must not rejoin by itself).
    left: bool,
    /// Passive failure detection (`suspect_silent_after`), if on.
    silence: Option<silence::Silence>,
    suspect_to_down_after: Duration,
    /// While no member is live (see [`Membership::reannounce`]): when to announce next.
    reannounce_at: Option<Time>,
    alone_announce_every: Duration,
    /// Where the next round of announcements starts in `addrs`.
    reannounce_from: NodeId,
    /// This node's incarnation, as its last SWIM message said (foca does not expose it):
    /// the header of its suspicion notices ([`Membership::tell_suspects`]).
    incarnation: u16,
    /// When [`Membership::tell_suspects`] next runs (with the first timer due then).
    tell_suspects_at: Option<Time>,
    /// What a fresh foca is built from when this node yields after a split
    /// ([`Membership::declared_down`]).
    afresh: Afresh,
    /// How far this node trusts its own verdicts (kept across renewals).
    health: health::LocalHealth,
    /// When each suspicion it raised (by probe or by silence) began (identity,
    /// incarnation): the base of its stretch ([`Membership::stretch`]).
    suspected_at: BTreeMap<(Member, u16), Time>,
}

/// The settings and random source a fresh foca instance is built from.
struct Afresh {
    config: foca::Config,
    /// Forked per generation (never drawn from), so the first instance's stream is the
    /// same as without it.
    rng: DetRng,
}

/// Nodes a member that knows no live member announces itself to per round.
const REANNOUNCE_TO: usize = 3;

/// The stream of the node's random source that fresh foca instances fork from.
const AFRESH_STREAM: u64 = 0xF0CA_AF2E;

impl Membership {
    /// The membership of `me`, knowing no one yet.
    pub fn new(me: Member, cfg: &MembershipConfig, rng: DetRng) -> Result<Self, MembershipError> {
        let notices = leave::Notices::default();
        let afresh = Afresh {
            config: cfg.foca()?,
            rng: rng.fork(AFRESH_STREAM),
        };
        let heard_now = hearsay::HeardNow::default();
        let foca = Foca::with_custom_broadcast(
            me,
            afresh.config.clone(),
            FocaRng(rng),
            hearsay::GossipCodec {
                heard: heard_now.clone(),
                notices: notices.clone(),
            },
            notices.clone(),
        );
        Ok(Self {
            foca,
            heard_now,
            notices,
            timers: BTreeMap::new(),
            timer_seq: 0,
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            live: BTreeMap::new(),
            addrs: BTreeMap::new(),
            outbox: Outbox::default(),
            refused: 0,
            left: false,
            silence: cfg.suspect_silent_after.map(silence::Silence::new),
            suspect_to_down_after: cfg.suspect_to_down_after,
            reannounce_at: None,
            alone_announce_every: cfg.alone_announce_every,
            reannounce_from: NodeId(0),
            incarnation: 0,
            tell_suspects_at: None,
            afresh,
            health: health::LocalHealth::default(),
            suspected_at: BTreeMap::new(),
        })
    }

    /// This node's identity.
    pub fn me(&self) -> Member {
        *self.foca.identity()
    }

    /// Live members other than this node, by node id.
    pub fn live(&self) -> impl Iterator<Item = &Member> {
        self.live.values()
    }

    /// True if `node` is a live member (this node counts).
    pub fn is_live(&self, node: NodeId) -> bool {
        node == self.me().node || self.live.contains_key(&node)
    }

    /// The identity last seen for `node` (its address), live or not.
    pub fn identity(&self, node: NodeId) -> Option<Member> {
        self.addrs.get(&node).copied()
    }

    /// Messages refused so far.
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// Starts with `members` known to be up (a world whose members start together, as in
    /// the simulator or a fixed list in the configuration); no messages needed.
    pub fn assume_up(&mut self, now: Time, members: &[Member]) {
        let me = self.me();
        let updates = members
            .iter()
            .filter(|m| m.node != me.node)
            .map(|m| foca::Member::alive(*m))
            .collect::<Vec<_>>();
        let r = self.foca.apply_many(updates.into_iter(), false, &mut self.outbox);
        self.absorb(now, r.err());
    }

    /// Joins through `seeds` (their identities as learned from the transport's handshake):
    /// announces this node to each.
    pub fn join(&mut self, now: Time, seeds: &[Member]) {
        let me = self.me().node;
        for s in seeds.iter().filter(|s| s.node != me) {
            self.addrs.insert(s.node, *s);
            let r = self.foca.announce(*s, &mut self.outbox);
            self.absorb(now, r.err());
        }
    }

    /// Leaves the cluster gracefully: the others learn it at once instead of suspecting,
    /// and by the leave notice gossiped with it that this is a leave, not a failure
    /// ([`Departure::Left`]).
    pub fn leave(&mut self, now: Time) {
        if self.left {
            return;
        }
        self.left = true;
        let notice = leave::encode(&self.me());
        if self.foca.add_broadcast(&notice).is_err() {
            // Only a notice larger than a message fails, and a notice is 9 bytes.
            self.refused += 1;
        }
        let r = self.foca.leave_cluster(&mut self.outbox);
        self.absorb(now, r.err());
        self.timers.clear();
        self.suspected_at.clear();
        self.live.clear();
        self.silence = None;
    }

    /// What this node sees of the cluster now (see [`View`]).
    pub fn view(&self) -> View {
        let me = self.me().node;
        View {
            members: u32::try_from(self.live.len() + 1).unwrap_or(u32::MAX),
            lowest: self.live.keys().next().map_or(me, |n| me.min(*n)),
        }
    }

    /// An authenticated member (`by`, as its certificate names it) refused this node's
    /// `generation` because it holds that generation declared down (the transport's
    /// refusal of a hello), and saw the cluster as `theirs` (if the refusal said).
    ///
    /// - **This node holds `by` live** (or does not know who refused): it missed its own
    ///   failure, e.g. stalled past the suspicion timeout, and the members' transports
    ///   refuse it, so no SWIM message tells it. It renews.
    /// - **This node holds `by` failed too**: a split, both sides declared the other
    ///   failed (a node or group cut off by the network, or stalled until its own
    ///   silence detector fired), and each side adopted the other's objects. It renews
    ///   only if its side loses: `theirs` beats its own view ([`View::beats`]), or the
    ///   views are equal (they overlap) and `by` has the lower id. The winning side
    ///   ignores the refusal; the losers' transports refuse its members the same way
    ///   until every loser has renewed.
    ///
    /// A renewal here starts afresh ([`MembershipEvent::Rejoined`]): a fresh SWIM table
    /// as the next generation — with the old one, members it held down would be answered
    /// `TurnUndead` (and renew in turn) and its backlog would gossip their failures to
    /// them; a node of a losing group is often refused first by a side-mate that already
    /// renewed, and holds the winners down — its live members reported down, and an
    /// announcement to `by` (or to the identities it knows).
    ///
    /// Ignored once left, and for a generation this node no longer runs as. Returns
    /// whether it renewed.
    pub fn declared_down(
        &mut self,
        now: Time,
        generation: u32,
        by: Option<NodeId>,
        theirs: Option<View>,
    ) -> bool {
        if self.left || generation != self.me().generation {
            return false;
        }
        if let Some((by, theirs)) = by.filter(|b| !self.live.contains_key(b)).zip(theirs) {
            let ours = self.view();
            let loses = theirs.beats(&ours) || (theirs == ours && by < self.me().node);
            if !loses {
                return false;
            }
        }
        self.renew_afresh(now, by)
    }

    /// Renews as the next generation with a fresh foca instance
    /// ([`Membership::declared_down`]): every member it held live reported down, and an
    /// announcement to `by` if known, else a round of re-announcements.
    fn renew_afresh(&mut self, now: Time, by: Option<NodeId>) -> bool {
        let Some(next) = foca::Identity::renew(&self.me()) else {
            return false;
        };
        self.start_afresh(now, next, by);
        true
    }

    /// Runs on as `next` with a fresh foca instance ([`Membership::renew_afresh`]).
    fn start_afresh(&mut self, now: Time, next: Member, by: Option<NodeId>) {
        let rng = FocaRng(self.afresh.rng.fork(u64::from(next.generation)));
        self.foca = Foca::with_custom_broadcast(
            next,
            self.afresh.config.clone(),
            rng,
            hearsay::GossipCodec {
                heard: self.heard_now.clone(),
                notices: self.notices.clone(),
            },
            self.notices.clone(),
        );
        // The old instance's timers and queued messages mean nothing to the new one (its
        // timer tokens may match theirs, and they could gossip the old table).
        self.timers.clear();
        self.suspected_at.clear();
        self.outbox = Outbox::default();
        self.transmits.clear();
        if let Some(s) = &mut self.silence {
            s.reset();
        }
        self.reannounce_at = None;
        self.incarnation = 0;
        self.health.declared_down();
        self.push(MembershipEvent::Rejoined(next));
        for m in std::mem::take(&mut self.live).into_values() {
            self.push(MembershipEvent::Down(m, Departure::Forgotten));
        }
        match by.and_then(|b| self.addrs.get(&b).copied()) {
            Some(target) => {
                let r = self.foca.announce(target, &mut self.outbox);
                self.absorb(now, r.err());
            }
            None => self.reannounce(now),
        }
        self.arm_reannounce(now);
    }

    /// True once this node has left.
    pub fn has_left(&self) -> bool {
        self.left
    }

    /// A SWIM message from the authenticated member `from`.
    pub fn handle_datagram(&mut self, now: Time, from: NodeId, data: &[u8]) -> Result<(), MembershipError> {
        if self.left {
            return Ok(());
        }
        // Check the claimed sender before foca acts on anything in the message.
        let header = match foca::Codec::decode_header(&mut MemberCodec, data) {
            Ok(h) => h,
            Err(e) => {
                self.refused += 1;
                return Err(e.into());
            }
        };
        if header.src.node != from {
            self.refused += 1;
            return Err(MembershipError::Impersonation {
                from,
                claimed: header.src.node,
            });
        }
        if header.dst == self.me() && matches!(header.message, Message::Ack(_) | Message::ForwardedAck { .. })
        {
            self.health.better(now);
        }
        if self.alone_meets_the_declared_down(&header.src) {
            self.renew_afresh(now, Some(from));
        }
        // What foca reads next is weighed against the members this node hears
        // (`membership/hearsay.rs`): the live members and those heard lately, both in id
        // order, walked together. The list is built for every datagram, and costs about as
        // much as foca's own reading of it: `experiment adoption --quick` (16 nodes) under
        // callgrind, 2,390 instructions per datagram against foca's 2,346 (2,880 with a
        // lookup of each live member in the silence detector's map).
        {
            let mut lately = self.silence.iter().flat_map(|s| s.heard_lately(now)).peekable();
            self.heard_now.set(self.live.iter().filter_map(|(node, m)| {
                while lately.next_if(|n| n < node).is_some() {}
                lately.next_if_eq(node).map(|_| *m)
            }));
        }
        let r = self.foca.handle_data(data, &mut self.outbox);
        self.heard_now.set([]);
        // A verdict read as a suspicion stands if foca still holds it a suspicion time on.
        let due = now + self.suspect_to_down_after;
        let read = self.heard_now.take_read();
        if let Some(s) = &mut self.silence {
            for (member, incarnation) in read {
                s.await_again(due, member, incarnation);
            }
        }
        let err = r.err();
        let refused = err.as_ref().map(|e| MembershipError::Refused(e.to_string()));
        self.absorb(now, err);
        match refused {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Whether this node holds no member live and `src` is an identity it holds down.
    ///
    /// Such a node is the cut-off side of a split, and it yields ([`Membership::renew_afresh`])
    /// before foca reads the message: foca would answer `TurnUndead`, and the member
    /// renews. The member talks to it because it holds this node's current generation
    /// live. This was the path out of a one-way partition (a mute) while foca renewed a
    /// node with its table (`Note::Rejoin`; it now starts afresh): the muted node went on
    /// to declare every member down, and once the network healed, each member that
    /// answered its announcements was told it was down, and all of them renewed
    /// (`sim/tests/churn.rs`, `after_a_mute_heals_only_the_muted_node_renews`). The
    /// transport refuses no one here: the members accept the new generation's dials, and
    /// their answers come back over those connections. A lone node's view (one member)
    /// never beats another's ([`View::beats`]), so this is the rule of
    /// [`Membership::declared_down`] applied from the other end. Two lone members that
    /// hold each other down never get here over QUIC (each refuses the other's dials, and
    /// the view rule settles it by id); over a transport without refusals (`udp`, or the
    /// membership tests' wires) the first to hear from the other yields.
    fn alone_meets_the_declared_down(&self, src: &Member) -> bool {
        !self.left
            && self.live.is_empty()
            && self
                .foca
                .iter_membership_state()
                .any(|m| m.id() == src && m.state() == State::Down)
    }

    /// When [`Membership::handle_timeout`] is next due.
    pub fn poll_timeout(&self) -> Option<Time> {
        let foca = self.timers.keys().next().map(|(t, _)| *t);
        [
            foca,
            self.silence.as_ref().and_then(silence::Silence::poll_timeout),
            self.reannounce_at,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Fires every timer due at `now`.
    pub fn handle_timeout(&mut self, now: Time) {
        while let Some(entry) = self.timers.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let timer = entry.remove();
            if let Some(due) = self.stretched(now, &timer) {
                self.arm(due, timer);
                continue;
            }
            if self.stale_suspicion(&timer) {
                continue;
            }
            let r = self.foca.handle_timer(timer, &mut self.outbox);
            self.absorb(now, r.err());
        }
        self.check_silence(now);
        if self.tell_suspects_at.is_none_or(|t| t <= now) {
            self.tell_suspects(now);
        }
        if self.reannounce_at.is_some_and(|t| t <= now) {
            self.reannounce(now);
        }
    }

    /// When a suspicion's timeout that is due now comes due again instead, if this node's
    /// local health stretches it ([`Self::stretch`]).
    fn stretched(&mut self, now: Time, timer: &Timer<Member>) -> Option<Time> {
        self.stretch(now, suspicion(timer)?)
    }

    /// When the suspicion `key` of this node's own (raised by its probe or its silence
    /// detector), due now, comes due again instead, if this node's local health stretches
    /// it (`membership/health.rs`). Only a suspicion foca still holds (not refuted, not
    /// settled) is stretched:
    ///
    /// - while the score is at its limit (none of this node's last probes answered, or the
    ///   others declared it down), always, by `suspect_to_down_after` at a time. The
    ///   members that declared this node down send it little more than their periodic
    ///   announcements, so whether it hears a suspect says little, and a verdict it
    ///   reaches while its datagrams are lost gets out with the first that is not, to a
    ///   member alive all along;
    /// - a suspicion that ran while the score was at its limit waits, from when the score
    ///   fell from it, `suspect_to_down_after × (1 + score)`: as if raised then, when this
    ///   node's datagrams began to get through (and with them its notice to the suspect,
    ///   [`Self::tell_suspects`]);
    /// - any other waits until `suspect_to_down_after × (1 + score)` from when it began,
    ///   if its suspect is still heard (talking, yet not answering this node's probes),
    ///   which counts against this node's health.
    ///
    /// A crashed member is not heard after its crash, so a healthy node declares it down
    /// on time; one whose score is at its limit learns it from the others' gossip.
    fn stretch(&mut self, now: Time, key: (Member, u16)) -> Option<Time> {
        let (suspect, incarnation) = key;
        let began = *self.suspected_at.get(&key)?;
        if self.holds_suspect(&suspect, incarnation) {
            if self.health.saturated() {
                return Some(now + self.suspect_to_down_after);
            }
            let recovered = self.health.recovered_at().filter(|t| *t >= began);
            let heard = self.heard_within(now, None, suspect.node);
            if heard {
                self.health.worse();
            }
            if heard || recovered.is_some() {
                let until = recovered.unwrap_or(began) + self.health.scale(self.suspect_to_down_after);
                if until > now {
                    return Some(until);
                }
            }
        }
        self.suspected_at.remove(&key);
        None
    }

    /// Whether member `node` was heard in the `window` before `now` (the silence
    /// threshold if `None`); never without the silence detector.
    fn heard_within(&self, now: Time, window: Option<Duration>, node: NodeId) -> bool {
        self.silence
            .as_ref()
            .is_some_and(|s| s.heard_within(now, window, node))
    }

    /// Whether `timer` is a suspicion's timeout whose suspect has refuted the suspicion
    /// since (foca holds it at another incarnation).
    ///
    /// SWIM's suspicion mechanism (Das, Gupta and Motivala, 2002, §4.2) declares a suspect
    /// down only if no higher incarnation of it was heard while the suspicion ran. foca
    /// 2.0.0 checks that before it marks the member down, but sends the member its
    /// courtesy `TurnUndead` (`notify_down_members`) also when the check fails, and a
    /// member that receives it renews: every member that refuted a suspicion in time
    /// renewed anyway once the timer fired (`sim/tests/churn.rs`,
    /// `after_a_mute_of_1_5_to_15_s_no_other_member_renews`; `experiment adoption` counted 57 / 399 / 6,384
    /// live members declared down at 5 / 10 / 20 % loss, none since). Such a timer is
    /// dropped here; foca would do nothing else with it.
    fn stale_suspicion(&self, timer: &Timer<Member>) -> bool {
        let Some((suspect, incarnation)) = suspicion(timer) else {
            return false;
        };
        self.foca
            .iter_membership_state()
            .any(|m| m.id() == &suspect && m.incarnation() != incarnation)
    }

    /// Whether foca still holds `suspect` suspect at `incarnation` (not refuted, not down).
    fn holds_suspect(&self, suspect: &Member, incarnation: u16) -> bool {
        self.foca
            .iter_membership_state()
            .any(|m| m.id() == suspect && m.state() == State::Suspect && m.incarnation() == incarnation)
    }

    /// Tells each member this node suspects, by its own probes or by silence, that it is
    /// suspected: a SWIM gossip message addressed to it that carries the suspicion, so it
    /// refutes it (the "buddy system" of Lifeguard: Dadgar, Phillips and Currey, 2018).
    /// Runs once per probe period, on the first timer due after the last run (while
    /// suspicions run, foca's probe timer fires every period).
    ///
    /// SWIM spreads a suspicion by piggybacking it on a bounded number of messages
    /// (`max_transmissions`). When this node's own messages were lost while it spent them
    /// (a mute, a burst of loss), the suspect never hears of it, cannot refute, and is
    /// declared down by this node alone when the timeout ends, though it answers every
    /// message now: after a mute of 1.5–2 s healed, up to all four members of five
    /// renewed (`sim/tests/churn.rs`, `after_a_mute_of_1_5_to_15_s_no_other_member_renews`).
    fn tell_suspects(&mut self, now: Time) {
        self.tell_suspects_at = Some(now + self.afresh.config.probe_period);
        if self.left {
            return;
        }
        let mut raised: Vec<(Member, u16)> = self
            .timers
            .values()
            .filter_map(suspicion)
            .chain(self.silence.iter().flat_map(silence::Silence::raised_pending))
            .collect();
        raised.sort_unstable();
        raised.dedup();
        for (suspect, incarnation) in raised {
            if !self.holds_suspect(&suspect, incarnation) || self.transmits.len() >= MAX_QUEUED {
                continue;
            }
            let header = foca::Header {
                src: self.me(),
                src_incarnation: self.incarnation,
                dst: suspect,
                message: foca::Message::Gossip,
            };
            let notice = foca::Member::new(suspect, incarnation, State::Suspect);
            if let Ok(data) = wire::suspicion_notice(&header, &notice) {
                self.transmits.push_back((suspect.node, data));
            }
        }
    }

    /// A member that knows no live member stays alone for good unless it speaks first:
    /// foca stops every timer when its last member goes (`Notification::Idle`) and leaves
    /// rejoining to its driver. Two members that each declared the other down after a
    /// partition (or one that sees nobody while the others no longer list it) then never
    /// met again (fault swarm, `--faults all` seeds 11, 707, 3447). Every
    /// `alone_announce_every` while alone, this node announces itself to up to
    /// [`REANNOUNCE_TO`] of the identities it has seen, in turn.
    fn reannounce(&mut self, now: Time) {
        self.reannounce_at = None;
        if self.left || self.foca.num_members() > 0 {
            return;
        }
        let me = self.me().node;
        let targets: Vec<Member> = self
            .addrs
            .range(self.reannounce_from..)
            .chain(self.addrs.range(..self.reannounce_from))
            .map(|(_, m)| *m)
            .filter(|m| m.node != me)
            .take(REANNOUNCE_TO)
            .collect();
        if let Some(last) = targets.last() {
            self.reannounce_from = NodeId(last.node.0.wrapping_add(1));
        }
        for t in targets {
            let r = self.foca.announce(t, &mut self.outbox);
            self.absorb(now, r.err());
        }
        self.arm_reannounce(now);
    }

    /// Arms the next announcement round if this node is alone (and has anyone to tell).
    fn arm_reannounce(&mut self, now: Time) {
        if self.reannounce_at.is_none()
            && !self.left
            && self.foca.num_members() == 0
            && self.addrs.keys().any(|n| *n != self.me().node)
        {
            self.reannounce_at = Some(now + self.alone_announce_every);
        }
    }

    /// A datagram (of any kind) from the authenticated member `from` arrived: feeds the
    /// passive failure detector ([`MembershipConfig::suspect_silent_after`]).
    pub fn heard(&mut self, now: Time, from: NodeId) {
        if self.left || !self.live.contains_key(&from) {
            return;
        }
        if let Some(s) = &mut self.silence {
            s.heard(now, from);
        }
    }

    /// This node's local health score (0 = healthy, up to 8): the suspicions it raises
    /// wait `1 + score` times `suspect_to_down_after` before it declares their member
    /// down, and at 8 it declares no one down (`membership/health.rs`).
    pub fn local_health(&self) -> u32 {
        self.health.score()
    }

    /// Down verdicts from gossip about members this node still heard, read as
    /// suspicions so far (`membership/hearsay.rs`).
    pub fn downgraded_verdicts(&self) -> u64 {
        self.heard_now.downgraded()
    }

    /// Suspicions raised so far because a steadily heard member fell silent.
    pub fn silent_suspicions(&self) -> u64 {
        self.silence.as_ref().map_or(0, silence::Silence::raised)
    }

    /// Suspects the members that fell silent, and declares down those of its own
    /// suspicions that nobody refuted in `suspect_to_down_after` (what foca does for the
    /// suspicions its probes raise: the check is the same, same identity and incarnation
    /// still suspected).
    fn check_silence(&mut self, now: Time) {
        let Some(s) = &mut self.silence else { return };
        let silent = s.silent(now);
        let due = s.due(now);
        for node in silent {
            let Some(m) = self
                .foca
                .iter_membership_state()
                .find(|m| m.id().node == node && m.state() == State::Alive)
                .cloned()
            else {
                continue;
            };
            let (id, inc) = (*m.id(), m.incarnation());
            let r = self.foca.apply_many(
                std::iter::once(foca::Member::new(id, inc, State::Suspect)),
                true,
                &mut self.outbox,
            );
            self.absorb(now, r.err());
            self.suspected_at.entry((id, inc)).or_insert(now);
            let due = now + self.health.scale(self.suspect_to_down_after);
            if let Some(s) = &mut self.silence {
                s.await_down(due, id, inc);
            }
        }
        for (id, inc) in due {
            if let Some(until) = self.stretch(now, (id, inc)) {
                if let Some(s) = &mut self.silence {
                    s.await_again(until, id, inc);
                }
            } else if self.holds_suspect(&id, inc) {
                let r = self.foca.apply_many(
                    std::iter::once(foca::Member::new(id, inc, State::Down)),
                    true,
                    &mut self.outbox,
                );
                self.absorb(now, r.err());
            }
        }
    }

    /// The next SWIM datagram payload to send, with its destination.
    pub fn poll_transmit(&mut self) -> Option<(NodeId, Vec<u8>)> {
        self.transmits.pop_front()
    }

    /// The next membership change.
    pub fn poll_event(&mut self) -> Option<MembershipEvent> {
        self.events.pop_front()
    }

    /// Applies what the last foca call asked for at time `now`.
    fn absorb(&mut self, now: Time, err: Option<foca::Error>) {
        if err.is_some() {
            self.refused += 1;
        }
        let out = std::mem::take(&mut self.outbox);
        if let Some((_, data)) = out.sends.last()
            && let Ok(h) = foca::Codec::decode_header(&mut MemberCodec, &data[..])
        {
            self.incarnation = h.src_incarnation;
        }
        for (to, data) in out.sends {
            self.addrs.entry(to.node).or_insert(to);
            if self.transmits.len() < MAX_QUEUED {
                self.transmits.push_back((to.node, data));
            }
        }
        for (timer, mut after) in out.timers {
            if let Some((suspect, incarnation)) = suspicion(&timer) {
                // One of this node's probes failed (foca raises no other suspicion with a
                // timer of its own), a probe period after its ping. Its wait is set by the
                // score before this failure: one failure on a healthy node (a member that
                // crashed after it was last heard) is declared on time. A member heard
                // since the ping is talking but not answering: the fault may be this
                // node's, which counts against it (and so against the suspicions it raises
                // next, and this one when it comes due: [`Self::stretched`]).
                after = self.health.scale(after);
                let ping = Some(self.afresh.config.probe_period);
                if self.heard_within(now, ping, suspect.node) {
                    self.health.worse();
                }
                // foca may raise a suspicion again before it ends: the first one counts.
                self.suspected_at.entry((suspect, incarnation)).or_insert(now);
            }
            self.arm(now + after, timer);
        }
        let mut renewed = false;
        let mut afresh_as = None;
        for note in out.notes {
            match note {
                Note::Up(m) => {
                    self.addrs.insert(m.node, m);
                    // foca reports a renewed member twice (`Rename`, below, then
                    // `MemberUp`): reported once, or the node runs its member-up work twice.
                    if self.live.insert(m.node, m) != Some(m) {
                        self.push(MembershipEvent::Up(m));
                    }
                }
                Note::Down(m) => {
                    // Its suspicions are settled (a silence suspicion's pending entry goes
                    // with `Silence::forget`; a probe's timer finds no entry and ends).
                    self.suspected_at.retain(|(s, _), _| *s != m);
                    if self.live.get(&m.node) == Some(&m) {
                        self.live.remove(&m.node);
                        if let Some(s) = &mut self.silence {
                            s.forget(m.node);
                        }
                    }
                    let why = self.notices.book().departure(&m);
                    self.push(MembershipEvent::Down(m, why));
                }
                Note::Rename(old, new) => {
                    // A restarted member: its old life is over whatever foca's liveness
                    // says; a later `Up` (or this one) brings the new one in.
                    self.addrs.insert(new.node, new);
                    if self.live.get(&old.node) == Some(&old) {
                        self.live.remove(&old.node);
                        if let Some(s) = &mut self.silence {
                            s.forget(old.node);
                        }
                        let why = self.notices.book().departure(&old);
                        self.push(MembershipEvent::Down(old, why));
                    }
                    // The new life is up if foca has it active, also when the old one was
                    // already declared down here (otherwise a member that rejoined after a
                    // false failure stayed out forever: found by the fault swarm).
                    if self.live.get(&new.node) != Some(&new)
                        && self.foca.iter_members().any(|m| m.id() == &new)
                    {
                        self.live.insert(new.node, new);
                        self.push(MembershipEvent::Up(new));
                    }
                }
                Note::Active => self.push(MembershipEvent::Active),
                Note::Idle => self.push(MembershipEvent::Idle),
                Note::Defunct if self.left => {}
                Note::Defunct => {
                    // Identities renew themselves, so this is not expected; rejoin anyway.
                    if let Some(next) = foca::Identity::renew(&self.me())
                        && self.foca.change_identity(next, &mut self.outbox).is_ok()
                    {
                        self.push(MembershipEvent::Rejoined(next));
                        renewed = true;
                    }
                }
                // The others declared this node down while it ran: foca renewed it with
                // its table, which holds what this node concluded while its datagrams were
                // lost. It starts afresh instead, as `declared_down` does.
                Note::Rejoin(m) => afresh_as = Some(m),
            }
        }
        if let Some(next) = afresh_as.filter(|_| !self.left) {
            self.start_afresh(now, next, None);
            return;
        }
        if renewed && !self.left {
            // A new identity leaves foca disconnected, its timers void, until an update
            // lands (`adjust_connection_state`). A rejoin set off by a `TurnUndead` from a
            // member this node holds down returns before that: the node then sent and
            // probed nothing ever again, while its view still listed live members (fault
            // swarm, `--faults all` seed 707). Applying no update runs that adjustment.
            let r = self.foca.apply_many(std::iter::empty(), true, &mut self.outbox);
            if r.is_err() {
                self.refused += 1;
            }
        }
        // Work queued by `change_identity` above.
        if !self.outbox.sends.is_empty() || !self.outbox.timers.is_empty() || !self.outbox.notes.is_empty() {
            self.absorb(now, None);
        }
        self.arm_reannounce(now);
    }

    /// Keeps foca's `timer` until `due` (ties fire in the order they were armed).
    fn arm(&mut self, due: Time, timer: Timer<Member>) {
        self.timer_seq += 1;
        self.timers.insert((due, self.timer_seq), timer);
    }

    fn push(&mut self, e: MembershipEvent) {
        if self.events.len() >= MAX_QUEUED {
            self.events.pop_front();
        }
        self.events.push_back(e);
    }
}

#[cfg(test)]
mod tests;
