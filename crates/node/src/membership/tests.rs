//! Membership on its own: a few `Membership`s exchanging datagrams on the engine, in
//! virtual time.

use worldmesh_core::{Machine, MessageClass, Transmit};
use worldmesh_engine::{Engine, Fate, Links, Step};

use std::collections::BTreeSet;

use super::*;

/// One member as the engine drives it.
struct Swim(Membership);

impl Machine for Swim {
    type Datagram = Vec<u8>;
    type Event = MembershipEvent;

    fn handle_datagram(&mut self, now: Time, from: NodeId, datagram: Vec<u8>) {
        let _ = self.0.handle_datagram(now, from, &datagram);
    }

    fn handle_timeout(&mut self, now: Time) {
        self.0.handle_timeout(now);
    }

    fn poll_transmit(&mut self) -> Option<Transmit<Vec<u8>>> {
        self.0.poll_transmit().map(|(dst, datagram)| Transmit {
            dst,
            class: MessageClass::Control,
            datagram,
        })
    }

    fn poll_timeout(&self) -> Option<Time> {
        self.0.poll_timeout()
    }

    fn poll_event(&mut self) -> Option<MembershipEvent> {
        self.0.poll_event()
    }
}

/// Every datagram takes 5 ms, unless the link is cut, its sender muted or it is lost
/// (`loss`).
struct Wires {
    cut: Vec<(NodeId, NodeId)>,
    /// Members whose datagrams are all lost (they still hear the others).
    muted: Vec<NodeId>,
    loss: f64,
    rng: DetRng,
}

impl Links<Vec<u8>> for Wires {
    fn route(&mut self, _now: Time, src: NodeId, t: &Transmit<Vec<u8>>) -> Fate {
        if self.cut.contains(&(src, t.dst)) || self.cut.contains(&(t.dst, src)) || self.muted.contains(&src) {
            Fate::Partitioned
        } else if self.loss > 0.0 && self.rng.chance(self.loss) {
            Fate::Lost
        } else {
            Fate::Deliver(Duration::from_millis(5), None)
        }
    }
}

/// A tick of game traffic (see [`Net::traffic`]).
struct Frame;

/// The members on the engine, with the events they reported.
struct Net {
    now: Time,
    engine: Engine<Swim, Wires, Frame>,
    events: Vec<(NodeId, MembershipEvent)>,
    /// Game traffic: every 100 ms each live member hears from every other one, except
    /// from the members in `quiet` (see [`Membership::heard`]).
    traffic: bool,
    ticking: bool,
    quiet: Vec<NodeId>,
    /// Settings every member starts with.
    cfg: MembershipConfig,
}

fn cfg() -> MembershipConfig {
    MembershipConfig::lan()
}

impl Net {
    fn new() -> Self {
        let wires = Wires {
            cut: Vec::new(),
            muted: Vec::new(),
            loss: 0.0,
            rng: DetRng::new(1),
        };
        Self {
            now: Time::ZERO,
            engine: Engine::new(Vec::new(), wires).dropping_from_crashed(),
            events: Vec::new(),
            traffic: false,
            ticking: false,
            quiet: Vec::new(),
            cfg: cfg(),
        }
    }

    /// Starts member `node` as `generation` (a new process if the id ran before).
    fn start(&mut self, node: u32, generation: u32) -> Member {
        let me = Member::simulated(NodeId(node), generation);
        let m = Membership::new(
            me,
            &self.cfg,
            DetRng::new(7).fork(u64::from(node) * 100 + u64::from(generation)),
        )
        .unwrap();
        if (node as usize) < self.engine.machines().len() {
            self.engine.restart(NodeId(node), Swim(m));
        } else {
            assert_eq!(
                self.engine.add(Swim(m)),
                NodeId(node),
                "members start in id order"
            );
        }
        me
    }

    /// Starts members `0..n` (generation 0), each knowing all the others up: a world
    /// whose members start together.
    fn founders(&mut self, n: u32) -> Vec<Member> {
        let members: Vec<Member> = (0..n).map(|i| self.start(i, 0)).collect();
        for i in 0..n {
            self.node(i).assume_up(Time::ZERO, &members);
        }
        members
    }

    /// Member `n`'s membership (inputs given this way go out with the next `run`).
    fn node(&mut self, n: u32) -> &mut Membership {
        &mut self.engine.machines_mut()[n as usize].0
    }

    /// Member `n` crashes: it stops, and what it had in flight is lost.
    fn crash(&mut self, n: u32) {
        self.engine.crash(NodeId(n));
    }

    fn is_up(&self, n: u32) -> bool {
        self.engine.is_up(NodeId(n))
    }

    fn up(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.engine.machines().len() as u32).filter(|n| self.is_up(*n))
    }

    /// The cut links (either direction).
    fn cut(&mut self) -> &mut Vec<(NodeId, NodeId)> {
        &mut self.engine.links_mut().cut
    }

    fn pump(&mut self, id: NodeId) {
        let events = &mut self.events;
        self.engine.pump(id, |_, _, n, e| events.push((n, e)));
    }

    /// Runs for `d`: what members queued since the last run goes out first.
    fn run(&mut self, d: Duration) {
        let end = self.now + d;
        self.engine.advance_to(self.now);
        for n in self.up().collect::<Vec<_>>() {
            self.pump(NodeId(n));
        }
        if self.traffic && !self.ticking {
            self.ticking = true;
            let next = Time::from_micros((self.now.as_micros() / 100_000 + 1) * 100_000);
            self.engine.schedule(next, Frame);
        }
        while let Some(step) = self.engine.step(end) {
            match step {
                Step::Timeout(id) | Step::Datagram(id) => self.pump(id),
                Step::Other(Frame) => self.game_traffic(),
                Step::Nothing => {}
            }
        }
        self.engine.advance_to(end);
        self.now = end;
    }

    /// Every live member hears from every other one that is not quiet; next tick in 100 ms.
    fn game_traffic(&mut self) {
        let now = self.engine.now();
        let up: Vec<u32> = self.up().collect();
        for n in &up {
            for src in up
                .iter()
                .filter(|s| *s != n && !self.quiet.contains(&NodeId(**s)))
            {
                self.engine.machines_mut()[*n as usize].0.heard(now, NodeId(*src));
            }
            self.pump(NodeId(*n));
        }
        self.engine.schedule(now + Duration::from_millis(100), Frame);
    }

    fn live_ids(&self, n: u32) -> Vec<u32> {
        self.engine.machines()[n as usize]
            .0
            .live()
            .map(|m| m.node.0)
            .collect()
    }

    /// The members that reported a renewal of their own generation so far.
    fn renewed(&self) -> BTreeSet<NodeId> {
        self.events
            .iter()
            .filter(|(_, e)| matches!(e, MembershipEvent::Rejoined(_)))
            .map(|(n, _)| *n)
            .collect()
    }

    /// Checks that each of members `0..n` holds every other one live.
    fn assert_each_sees_the_others(&self, n: u32) {
        for i in 0..n {
            let want: Vec<u32> = (0..n).filter(|j| *j != i).collect();
            assert_eq!(self.live_ids(i), want, "node {i}");
        }
    }
}

#[test]
fn a_node_joins_through_one_seed_and_learns_everyone() {
    let mut net = Net::new();
    let members = net.founders(4);
    let joiner = net.start(4, 0);
    let seed = members[2];
    let now = net.now;
    net.node(4).join(now, &[seed]);

    net.run(Duration::from_secs(3));
    assert_eq!(net.live_ids(4), vec![0, 1, 2, 3]);
    for i in 0..4 {
        assert!(
            net.live_ids(i).contains(&4),
            "node {i} sees {:?}",
            net.live_ids(i)
        );
    }
    assert!(net.events.contains(&(NodeId(4), MembershipEvent::Active)));
    assert!(net.events.contains(&(NodeId(0), MembershipEvent::Up(joiner))));
}

#[test]
fn a_crashed_member_is_declared_down_by_everyone_and_a_leaver_at_once() {
    let mut net = Net::new();
    let members = net.founders(6);
    net.run(Duration::from_secs(2));
    // Crash node 5: it stops answering.
    net.crash(5);
    let crashed = net.now;
    net.run(Duration::from_secs(5));
    for i in 0..5 {
        assert!(!net.live_ids(i).contains(&5), "node {i} still sees 5");
        assert!(
            net.events
                .contains(&(NodeId(i), MembershipEvent::Down(members[5], Departure::Failed)))
        );
    }
    // Node 4 leaves: the others learn it without suspicion (well before a probe cycle
    // could have declared it down).
    let _ = crashed;
    let now = net.now;
    net.node(4).leave(now);

    net.run(Duration::from_millis(300));
    for i in 0..4 {
        assert!(!net.live_ids(i).contains(&4), "node {i} still sees 4");
        assert!(
            net.events
                .contains(&(NodeId(i), MembershipEvent::Down(members[4], Departure::Left))),
            "node {i} did not record a leave"
        );
    }
}

/// A leave reaches most members through others' gossip, not from the leaver: its notice
/// travels with it, so every member records a leave and none a failure.
#[test]
fn every_member_records_a_leave_as_a_leave_also_when_it_hears_it_second_hand() {
    let mut net = Net::new();
    let members = net.founders(16);
    net.run(Duration::from_secs(2));
    let now = net.now;
    net.node(9).leave(now);
    net.run(Duration::from_secs(3));
    let downs: Vec<(NodeId, Departure)> = net
        .events
        .iter()
        .filter_map(|(at, e)| match e {
            MembershipEvent::Down(m, why) if *m == members[9] => Some((*at, *why)),
            _ => None,
        })
        .collect();
    let mut heard: Vec<u32> = downs.iter().map(|(n, _)| n.0).collect();
    heard.sort_unstable();
    let others: Vec<u32> = (0..16).filter(|i| *i != 9).collect();
    assert_eq!(heard, others, "each other member hears of the leave once");
    assert!(
        downs.iter().all(|(_, why)| *why == Departure::Left),
        "recorded as a failure: {downs:?}"
    );
    // foca's leave gossips to `indirect_probes` (5) members only: the other ten heard of
    // it relayed. No member refused a message carrying a notice.
    for i in others {
        assert_eq!(net.node(i).refused(), 0, "node {i} refused messages");
    }
}

#[test]
fn a_restarted_member_replaces_its_old_generation() {
    let mut net = Net::new();
    let members = net.founders(4);
    net.run(Duration::from_secs(1));
    // Node 3 restarts at once (no time for suspicion) as generation 1.
    let again = net.start(3, 1);
    let now = net.now;
    net.node(3).join(now, &[members[0]]);

    net.run(Duration::from_secs(3));
    for i in 0..3 {
        let seen: Vec<Member> = net.node(i).live().copied().collect();
        assert!(seen.contains(&again), "node {i}: {seen:?}");
        assert!(
            !seen.contains(&members[3]),
            "node {i} still has the old generation"
        );
        assert!(
            net.events
                .contains(&(NodeId(i), MembershipEvent::Down(members[3], Departure::Failed)))
        );
    }
}

#[test]
fn a_message_claiming_another_sender_is_refused() {
    let mut net = Net::new();
    let a = net.start(0, 0);
    let b = net.start(1, 0);
    net.node(0).assume_up(Time::ZERO, &[a, b]);
    net.node(1).assume_up(Time::ZERO, &[a, b]);
    net.run(Duration::from_millis(600));
    // Capture a genuine message from 0 to 1 and deliver it as if node 2 had sent it.
    net.node(0).handle_timeout(Time::from_millis(60_000));
    let (_, data) = net.node(0).poll_transmit().expect("node 0 probes");
    let now = net.now;
    let err = net.node(1).handle_datagram(now, NodeId(2), &data).unwrap_err();
    assert_eq!(
        err,
        MembershipError::Impersonation {
            from: NodeId(2),
            claimed: NodeId(0)
        }
    );
    assert!(matches!(
        net.node(1).handle_datagram(now, NodeId(0), &[1, 2, 3]),
        Err(MembershipError::Malformed(_))
    ));
    assert_eq!(net.node(1).refused(), 2);
}

#[test]
fn the_same_seed_gives_the_same_membership_history() {
    let run = || {
        let mut net = Net::new();
        net.founders(5);
        net.run(Duration::from_secs(1));
        net.crash(1);
        net.cut().push((NodeId(2), NodeId(3)));
        net.run(Duration::from_secs(4));
        net.events
    };
    assert_eq!(run(), run());
}

#[test]
fn bad_settings_are_refused() {
    let me = Member::simulated(NodeId(0), 0);
    for bad in [
        MembershipConfig {
            probe_rtt: Duration::from_secs(1),
            ..cfg()
        },
        MembershipConfig {
            max_packet: 10,
            ..cfg()
        },
        MembershipConfig {
            indirect_probes: 0,
            ..cfg()
        },
        MembershipConfig {
            max_transmissions: 0,
            ..cfg()
        },
        MembershipConfig {
            alone_announce_every: Duration::ZERO,
            ..cfg()
        },
    ] {
        assert!(matches!(
            Membership::new(me, &bad, DetRng::new(1)),
            Err(MembershipError::BadConfig(_))
        ));
    }
}

/// 10 % loss, 16 members, 30 s, over 12 loss patterns: SWIM without Lifeguard's
/// refinements declares a live member down now and then (measured with the `lan` profile:
/// false failures in 10 of 12 runs with 200 ms probes and 2 s announcements, 8 of 12 with
/// 10 s announcements, 5 of 12 with the older 300 ms probes). What must hold: every member
/// falsely declared down is back in every view by the end (as its next generation), and a
/// crash is still detected by everyone.
#[test]
fn under_ten_percent_loss_false_failures_heal_and_a_crash_is_still_detected() {
    let (mut false_failures, mut patterns_with_any) = (0, 0);
    for pattern in 1..=12u64 {
        let mut net = Net::new();
        net.founders(16);
        net.engine.links_mut().rng = DetRng::new(pattern);
        let run = |net: &mut Net, d: Duration, loss: f64| {
            net.engine.links_mut().loss = loss;
            net.run(d);
        };
        run(&mut net, Duration::from_secs(30), 0.1);
        let here = net
            .events
            .iter()
            .filter(|(_, e)| matches!(e, MembershipEvent::Rejoined(_)))
            .count();
        false_failures += here;
        patterns_with_any += usize::from(here > 0);
        // The loss ends: whoever was declared down is back everywhere.
        run(&mut net, Duration::from_secs(6), 0.0);
        for i in 0..16 {
            let mut live = net.live_ids(i);
            live.push(i);
            live.sort_unstable();
            assert_eq!(
                live,
                (0..16).collect::<Vec<_>>(),
                "pattern {pattern}: node {i}'s view"
            );
        }
        net.crash(15);
        run(&mut net, Duration::from_secs(5), 0.1);
        for i in 0..15 {
            assert!(
                !net.live_ids(i).contains(&15),
                "pattern {pattern}: node {i} still sees the crashed node"
            );
        }
    }
    eprintln!(
        "false failures under 10 % loss: {false_failures} in 12 runs of 30 s, {patterns_with_any} runs with any"
    );
}

/// With game traffic (every member hears every other one each 100 ms frame), a crash is
/// suspected as soon as the dead member falls silent instead of when SWIM's round robin
/// first probes it. With a 1 s probe period and 16 members that probe comes 0–15 s after
/// the crash at each observer (about 1 s at the first of 15), so detection through probes
/// alone takes about 1 + 1 + 2 s; through silence it takes 0.5 s (+ a 0.125 s check) +
/// the 2 s of suspicion at every survivor.
#[test]
fn game_traffic_lets_every_survivor_suspect_a_crash_at_once() {
    let mut net = Net::new();
    net.cfg.probe_period = Duration::from_secs(1);
    net.traffic = true;
    net.founders(16);
    net.run(Duration::from_secs(3));
    let mut worst = Duration::ZERO;
    for victim in [15u32, 7, 3] {
        net.crash(victim);
        let crashed = net.now;
        net.events.clear();
        let mut seen: Vec<u32> = Vec::new();
        let survivors = net.up().count();
        while seen.len() < survivors && net.now < crashed + Duration::from_secs(10) {
            net.run(Duration::from_millis(10));
            for (n, e) in &net.events {
                if matches!(e, MembershipEvent::Down(m, _) if m.node.0 == victim) && !seen.contains(&n.0) {
                    seen.push(n.0);
                }
            }
        }
        assert_eq!(seen.len(), survivors, "not every survivor declared {victim} down");
        worst = worst.max(net.now - crashed);
        // The others stay up: silence never fired on a live member.
        for i in (0..16).filter(|i| net.is_up(*i)) {
            assert_eq!(net.live_ids(i).len(), survivors - 1, "node {i}");
        }
    }
    assert!(
        worst <= Duration::from_millis(2_660),
        "last survivor learned of a crash {worst:?} after it"
    );
    assert!(
        (0..16)
            .filter(|i| net.is_up(*i))
            .all(|i| net.engine.machines()[i as usize].0.silent_suspicions() >= 1)
    );
}

/// A live member whose game traffic stops (its players left this node's interest) is
/// suspected through silence, refutes it like any suspicion, and is never declared down.
#[test]
fn a_live_member_that_falls_silent_refutes_the_suspicion() {
    let mut net = Net::new();
    net.traffic = true;
    net.founders(8);
    net.run(Duration::from_secs(3));
    net.events.clear();
    net.quiet.push(NodeId(5));
    net.run(Duration::from_secs(10));
    let raised: u64 = (0..8)
        .filter(|i| *i != 5)
        .map(|i| net.node(i).silent_suspicions())
        .sum();
    assert!(
        raised >= 7,
        "only {raised} silence suspicions of the quiet member"
    );
    assert!(
        !net.events
            .iter()
            .any(|(_, e)| matches!(e, MembershipEvent::Down(..))),
        "a live member was declared down: {:?}",
        net.events
    );
    for i in 0..8 {
        assert_eq!(net.live_ids(i).len(), 7, "node {i} sees {:?}", net.live_ids(i));
    }
}

/// Two members cut apart long enough to declare each other down are each left alone, and
/// foca stops every timer of a member that knows nobody live: without announcing itself
/// again (`Membership::reannounce`), neither ever spoke to the other after the cut healed
/// (fault swarm, `--faults all` seeds 11, 707, 3447).
#[test]
fn two_members_that_declared_each_other_down_meet_again_after_the_cut_heals() {
    let mut net = Net::new();
    let members = net.founders(2);
    net.run(Duration::from_secs(1));
    net.cut().push((NodeId(0), NodeId(1)));
    net.run(Duration::from_secs(6));
    assert!(net.live_ids(0).is_empty() && net.live_ids(1).is_empty());
    assert!(
        net.events
            .contains(&(NodeId(0), MembershipEvent::Down(members[1], Departure::Failed)))
    );
    net.cut().clear();
    // Announcements every `announce_every` (2 s), one of them renewing a generation.
    net.run(Duration::from_secs(8));
    assert_eq!(net.live_ids(0), vec![1], "node 0 sees {:?}", net.live_ids(0));
    assert_eq!(net.live_ids(1), vec![0], "node 1 sees {:?}", net.live_ids(1));
    assert!(
        net.events
            .iter()
            .any(|(_, e)| matches!(e, MembershipEvent::Rejoined(_))),
        "one of them came back as its next generation"
    );
}

/// A member cut off from all the others is declared down by them and declares them all
/// down; once the cut heals it rejoins as its next generation and the view is whole again
/// on every member.
#[test]
fn an_isolated_member_rejoins_everyone_after_the_cut_heals() {
    let mut net = Net::new();
    net.founders(4);
    net.run(Duration::from_secs(1));
    for other in [0, 1, 2] {
        net.cut().push((NodeId(3), NodeId(other)));
    }
    net.run(Duration::from_secs(6));
    assert!(net.live_ids(3).is_empty());
    for i in 0..3 {
        assert!(!net.live_ids(i).contains(&3), "node {i} still sees 3");
    }
    net.cut().clear();
    net.run(Duration::from_secs(8));
    for i in 0..4u32 {
        let want: Vec<u32> = (0..4).filter(|j| *j != i).collect();
        assert_eq!(net.live_ids(i), want, "node {i}");
    }
    // foca reports a renewed member twice (a rename, then up): each member runs its
    // member-up work for node 3's new generation once.
    let renewed = net.node(3).me();
    for i in 0..3 {
        let ups = net
            .events
            .iter()
            .filter(|e| **e == (NodeId(i), MembershipEvent::Up(renewed)))
            .count();
        assert_eq!(ups, 1, "node {i} reported {renewed:?} up {ups} times");
    }
}

/// A muted member without game traffic (the others stop hearing it; it still hears
/// their gossip) races them: it declares node 1 down before it hears that the others
/// declared it down. Hearing it, it renews afresh, so that verdict, reached while its
/// datagrams were lost, is forgotten (kept in foca's table, it had foca answer node 1
/// `TurnUndead` once the network healed, and node 1 renewed). From then on its score is
/// at its limit and it declares no one down for the rest of the mute (it had gone on to
/// declare every member down).
#[test]
fn a_muted_member_declared_down_forgets_its_own_verdicts_and_tells_no_one_else_to_renew() {
    let mut net = Net::new();
    net.founders(5);
    net.run(Duration::from_secs(1));
    net.engine.links_mut().muted.push(NodeId(3));
    net.run(Duration::from_secs(8));
    let of_3: Vec<&MembershipEvent> = net
        .events
        .iter()
        .filter(|(n, _)| *n == NodeId(3))
        .map(|(_, e)| e)
        .collect();
    let renewal = of_3
        .iter()
        .position(|e| matches!(e, MembershipEvent::Rejoined(_)))
        .expect("node 3 learned during the mute that it was declared down");
    let failed = |e: &&&MembershipEvent| matches!(e, MembershipEvent::Down(_, Departure::Failed));
    assert_eq!(
        of_3[..renewal].iter().filter(failed).count(),
        1,
        "node 3 declared one member down before its renewal: {of_3:?}"
    );
    assert_eq!(
        of_3[renewal..].iter().filter(failed).count(),
        0,
        "node 3 declared members down after its renewal: {of_3:?}"
    );
    assert_eq!(net.live_ids(3), [0, 1, 2, 4], "node 3 heard everyone again");
    net.engine.links_mut().muted.clear();
    net.run(Duration::from_secs(8));
    assert_eq!(net.renewed(), BTreeSet::from([NodeId(3)]), "renewed");
    net.assert_each_sees_the_others(5);
}

/// A muted member in a running world (it hears every member's game traffic; nobody hears
/// it) sees every probe fail on members it still hears: its local health falls, and it
/// declares no member down during the mute,
/// where SWIM alone had it declare them down and each one renew once its messages got
/// through. After the heal its answered probes bring the score back to 0, and only the
/// muted member renews.
#[test]
fn a_muted_member_that_still_hears_everyone_declares_no_one_down() {
    let mut net = Net::new();
    net.traffic = true;
    net.founders(5);
    net.run(Duration::from_secs(3));
    assert_eq!(net.node(3).local_health(), 0);
    net.events.clear();
    net.engine.links_mut().muted.push(NodeId(3));
    net.quiet.push(NodeId(3));
    net.run(Duration::from_secs(5));
    let declared: Vec<&MembershipEvent> = net
        .events
        .iter()
        .filter(|(n, e)| *n == NodeId(3) && matches!(e, MembershipEvent::Down(_, Departure::Failed)))
        .map(|(_, e)| e)
        .collect();
    assert_eq!(
        declared,
        Vec::<&MembershipEvent>::new(),
        "node 3 declared members down"
    );
    let score = net.node(3).local_health();
    assert!(score >= 2, "node 3's local health score during the mute: {score}");
    net.engine.links_mut().muted.clear();
    net.quiet.clear();
    net.run(Duration::from_secs(10));
    assert_eq!(net.renewed(), BTreeSet::from([NodeId(3)]), "renewed");
    net.assert_each_sees_the_others(5);
    for i in 0..5u32 {
        assert_eq!(net.node(i).local_health(), 0, "node {i}");
    }
}

/// A member cut off until the others declare it down cannot hear it from them (in a real
/// cluster their transports refuse it); told by a refusal instead (`declared_down`), it
/// renews its generation at once and, once it can reach them again, is up as the new one.
/// A refusal of a generation it no longer runs as, or after it left, changes nothing.
#[test]
fn a_member_told_by_a_refusal_that_it_is_down_renews_and_rejoins() {
    let mut net = Net::new();
    let members = net.founders(4);
    net.run(Duration::from_secs(1));
    for other in 0..3 {
        net.cut().push((NodeId(3), NodeId(other)));
    }
    net.run(Duration::from_secs(5));
    for i in 0..3 {
        assert!(!net.live_ids(i).contains(&3), "node {i} still holds node 3 live");
    }
    let now = net.now;
    assert!(
        !net.node(3).declared_down(now, 7, None, None),
        "not the generation it runs as"
    );
    assert!(net.node(3).declared_down(now, 0, None, None));
    let renewed = net.node(3).me();
    assert_eq!((renewed.node, renewed.generation), (NodeId(3), 1));
    assert!(
        !net.node(3).declared_down(now, 0, None, None),
        "a refusal of the old generation again"
    );
    net.cut().clear();
    net.run(Duration::from_secs(3));
    assert!(
        net.events
            .contains(&(NodeId(3), MembershipEvent::Rejoined(renewed))),
        "{:?}",
        net.events
            .iter()
            .filter(|(n, _)| *n == NodeId(3))
            .collect::<Vec<_>>()
    );
    for i in 0..3 {
        let seen: Vec<Member> = net.node(i).live().copied().collect();
        assert!(seen.contains(&renewed), "node {i}: {seen:?}");
        assert!(!seen.contains(&members[3]), "node {i} holds the old generation");
    }
    let now = net.now;
    net.node(3).leave(now);
    assert!(!net.node(3).declared_down(now, 1, None, None), "after a leave");
}

#[test]
fn the_larger_view_wins_and_a_tie_goes_to_the_lowest_id() {
    let v = |members, lowest| View {
        members,
        lowest: NodeId(lowest),
    };
    assert!(v(3, 5).beats(&v(2, 0)));
    assert!(!v(2, 0).beats(&v(3, 5)));
    assert!(v(2, 0).beats(&v(2, 1)));
    assert!(!v(2, 1).beats(&v(2, 0)));
    assert!(!v(2, 1).beats(&v(2, 1)), "a view never beats itself");
}

/// Node 3 is cut off until both sides declared the other down (each side adopted the
/// other's objects in a real world). Told by refusals (the transports' `declared_down`,
/// with the refuser's view), only the smaller side yields: node 3 renews with a fresh
/// table; nodes 0–2 ignore node 3's refusal. After the heal node 3 is up as its new
/// generation everywhere and no one else renewed — with node 3's old table, its first
/// message from a member it held down answered `TurnUndead`, and that member renewed.
#[test]
fn after_a_split_only_the_smaller_side_yields_and_no_one_else_renews() {
    let mut net = Net::new();
    let members = net.founders(4);
    net.run(Duration::from_secs(1));
    for other in 0..3 {
        net.cut().push((NodeId(3), NodeId(other)));
    }
    net.run(Duration::from_secs(8));
    assert!(
        net.live_ids(3).is_empty(),
        "node 3 holds {:?} live",
        net.live_ids(3)
    );
    for i in 0..3 {
        assert_eq!(net.live_ids(i).len(), 2, "node {i}");
    }
    let (big, small) = (net.node(0).view(), net.node(3).view());
    assert_eq!(
        (big.members, big.lowest, small.members, small.lowest),
        (3, NodeId(0), 1, NodeId(3))
    );
    let now = net.now;
    let before = net.events.len();
    for i in 0..3 {
        assert!(
            !net.node(i).declared_down(now, 0, Some(NodeId(3)), Some(small)),
            "node {i} yields to the smaller side"
        );
    }
    assert!(net.node(3).declared_down(now, 0, Some(NodeId(0)), Some(big)));
    let renewed = net.node(3).me();
    assert_eq!(renewed.generation, 1);
    net.cut().clear();
    net.run(Duration::from_secs(6));
    let rejoins: Vec<_> = net.events[before..]
        .iter()
        .filter(|(_, e)| matches!(e, MembershipEvent::Rejoined(_)))
        .collect();
    assert_eq!(rejoins, vec![&(NodeId(3), MembershipEvent::Rejoined(renewed))]);
    for i in 0..3u32 {
        let seen: Vec<Member> = net.node(i).live().copied().collect();
        assert!(seen.contains(&renewed), "node {i}: {seen:?}");
        assert_eq!(
            net.node(i).me(),
            members[i as usize],
            "node {i} kept its generation"
        );
    }
    let seen: Vec<Member> = net.node(3).live().copied().collect();
    assert_eq!(seen, members[..3].to_vec(), "node 3 sees the others as they are");
}

/// A member that still holds the refuser live missed its own failure (a stall): it
/// believes the refusal whatever the refuser's view, as SWIM would have it believe a
/// gossiped failure.
#[test]
fn a_refusal_from_a_member_held_live_is_believed_whatever_its_view() {
    let mut net = Net::new();
    net.founders(3);
    net.run(Duration::from_secs(1));
    let now = net.now;
    let tiny = View {
        members: 1,
        lowest: NodeId(9),
    };
    assert!(net.node(0).view().beats(&tiny));
    assert!(net.node(0).declared_down(now, 0, Some(NodeId(1)), Some(tiny)));
    assert_eq!(net.node(0).me().generation, 1);
}

/// Two founders cut off from each other until each holds the other down (both alone).
fn two_lone_members() -> Net {
    let mut net = Net::new();
    net.founders(2);
    net.run(Duration::from_secs(1));
    net.cut().push((NodeId(0), NodeId(1)));
    net.run(Duration::from_secs(8));
    net
}

/// Two members, each alone after a split: the one with the higher id yields, the other
/// ignores its refusal.
#[test]
fn two_lone_members_settle_a_split_by_node_id() {
    let mut net = two_lone_members();
    assert!(net.live_ids(0).is_empty() && net.live_ids(1).is_empty());
    let (v0, v1) = (net.node(0).view(), net.node(1).view());
    let now = net.now;
    assert!(!net.node(0).declared_down(now, 0, Some(NodeId(1)), Some(v1)));
    assert!(net.node(1).declared_down(now, 0, Some(NodeId(0)), Some(v0)));
    net.cut().clear();
    net.run(Duration::from_secs(6));
    assert_eq!(net.live_ids(0), vec![1]);
    assert_eq!(net.live_ids(1), vec![0]);
    assert_eq!(net.node(0).me().generation, 0);
    assert_eq!(net.node(1).me().generation, 1);
}

/// Views that overlap (a partial partition) can be equal: the member with the higher id
/// yields, so the two ends of a refusal never both yield nor both stay.
#[test]
fn equal_views_are_settled_by_the_two_ids() {
    let mut net = two_lone_members();
    let now = net.now;
    let same = View {
        members: 1,
        lowest: NodeId(0),
    };
    assert_eq!(net.node(0).view(), same);
    assert!(!net.node(0).declared_down(now, 0, Some(NodeId(1)), Some(same)));
    let v1 = net.node(1).view();
    assert!(net.node(1).declared_down(now, 0, Some(NodeId(0)), Some(v1)));
}

/// A losing pair: node 2 yields to a winner's refusal, then node 3 is refused by node 2
/// (renewed; say it holds node 3's generation down) before any winner refuses it. Node 3 holds node 2 live, so it believes it — and starts afresh too: with
/// its old table, which holds nodes 0 and 1 down, its first message from them after the
/// heal answered `TurnUndead`, and they renewed as well.
#[test]
fn a_member_of_a_losing_group_refused_by_its_side_mate_tells_no_winner_to_renew() {
    let mut net = Net::new();
    let members = net.founders(4);
    net.run(Duration::from_secs(1));
    for a in 0..2 {
        for b in 2..4 {
            net.cut().push((NodeId(a), NodeId(b)));
        }
    }
    net.run(Duration::from_secs(8));
    assert_eq!(net.live_ids(0), vec![1]);
    assert_eq!(net.live_ids(3), vec![2]);
    let now = net.now;
    let before = net.events.len();
    let big = net.node(0).view();
    assert!(net.node(2).declared_down(now, 0, Some(NodeId(0)), Some(big)));
    let renewed2 = net.node(2).view();
    assert!(net.node(3).declared_down(now, 0, Some(NodeId(2)), Some(renewed2)));
    net.cut().clear();
    net.run(Duration::from_secs(8));
    let mut rejoins: Vec<u32> = net.events[before..]
        .iter()
        .filter(|(_, e)| matches!(e, MembershipEvent::Rejoined(_)))
        .map(|(n, _)| n.0)
        .collect();
    rejoins.sort_unstable();
    assert_eq!(rejoins, vec![2, 3]);
    // Node 2's fresh start forgot its side-mate: no failure, which a transport would
    // refuse (and a refused member that holds node 2 live would renew).
    let forgotten: Vec<_> = net.events[before..]
        .iter()
        .filter(|(n, e)| *n == NodeId(2) && matches!(e, MembershipEvent::Down(_, Departure::Forgotten)))
        .collect();
    assert_eq!(
        forgotten,
        vec![&(NodeId(2), MembershipEvent::Down(members[3], Departure::Forgotten))]
    );
    for i in 0..2u32 {
        assert_eq!(
            net.node(i).me(),
            members[i as usize],
            "node {i} kept its generation"
        );
    }
    for i in 0..4u32 {
        assert_eq!(net.live_ids(i).len(), 3, "node {i} sees {:?}", net.live_ids(i));
    }
}

/// A suspicion notice ([`Membership::tell_suspects`]) is a SWIM message foca reads as any
/// other: the member it names refutes the suspicion, and its next message carries the
/// higher incarnation (the suspecter's foca clears the suspicion on it). A notice that
/// names another member, or an older incarnation, changes nothing.
#[test]
fn a_suspicion_notice_makes_its_member_refute() {
    let mut net = Net::new();
    let members = net.founders(3);
    net.run(Duration::from_secs(1));
    let incarnation_of = |net: &mut Net, n: u32| -> u16 {
        let now = net.now;
        let m = net.node(n);
        m.transmits.clear();
        let r = m.foca.gossip(&mut m.outbox);
        m.absorb(now, r.err());
        m.incarnation
    };
    assert_eq!(incarnation_of(&mut net, 1), 0);
    let notice = |about: Member, incarnation: u16| {
        let header = foca::Header {
            src: members[0],
            src_incarnation: 0,
            dst: members[1],
            message: foca::Message::Gossip,
        };
        wire::suspicion_notice(&header, &foca::Member::new(about, incarnation, State::Suspect)).unwrap()
    };
    let now = net.now;
    net.node(1)
        .handle_datagram(now, NodeId(0), &notice(members[2], 0))
        .unwrap();
    assert_eq!(incarnation_of(&mut net, 1), 0, "a notice about node 2");
    net.node(1)
        .handle_datagram(now, NodeId(0), &notice(members[1], 0))
        .unwrap();
    assert_eq!(incarnation_of(&mut net, 1), 1, "refuted");
    net.node(1)
        .handle_datagram(now, NodeId(0), &notice(members[1], 0))
        .unwrap();
    assert_eq!(incarnation_of(&mut net, 1), 1, "an older incarnation again");
}
