//! The engine's contract, on a toy machine: deliveries at the links' delays in time order,
//! one armed wake-up per machine at its earliest deadline, crashes, restarts and joins,
//! in-flight cuts, and the caller's own events.

use std::collections::VecDeque;
use std::time::Duration;

use worldmesh_core::{Machine, MessageClass, NodeId, Time, Transmit};
use worldmesh_engine::{Engine, Fate, Links, Step};

/// Pings every peer on each timeout (every `period`) and answers every ping with a pong.
/// Its events are what it received: (from, payload).
struct Pinger {
    peers: Vec<NodeId>,
    period: Duration,
    next: Time,
    out: VecDeque<Transmit<u32>>,
    seen: VecDeque<(NodeId, u32)>,
    timeouts: u32,
}

impl Pinger {
    fn new(me: u32, n: u32, period_ms: u64) -> Self {
        Self {
            peers: (0..n).filter(|p| *p != me).map(NodeId).collect(),
            period: Duration::from_millis(period_ms),
            next: Time::ZERO,
            out: VecDeque::new(),
            seen: VecDeque::new(),
            timeouts: 0,
        }
    }
}

const PING: u32 = 1;
const PONG: u32 = 2;

impl Machine for Pinger {
    type Datagram = u32;
    type Event = (NodeId, u32);

    fn handle_datagram(&mut self, _now: Time, from: NodeId, d: u32) {
        self.seen.push_back((from, d));
        if d == PING {
            self.out.push_back(Transmit {
                dst: from,
                class: MessageClass::Control,
                datagram: PONG,
            });
        }
    }

    fn handle_timeout(&mut self, now: Time) {
        self.timeouts += 1;
        if now < self.next {
            return; // early: nothing due
        }
        for p in &self.peers {
            self.out.push_back(Transmit {
                dst: *p,
                class: MessageClass::Control,
                datagram: PING,
            });
        }
        self.next = now + self.period;
    }

    fn poll_transmit(&mut self) -> Option<Transmit<u32>> {
        self.out.pop_front()
    }

    fn poll_timeout(&self) -> Option<Time> {
        Some(self.next)
    }

    fn poll_event(&mut self) -> Option<(NodeId, u32)> {
        self.seen.pop_front()
    }
}

/// Delay `10 ms × (1 + src)`; pongs duplicated when `dup`; a cut (both ways) between the
/// listed nodes and the rest while `cut` is on. Per-destination state, like a real model:
/// it indexes `seen` by destination (and so would panic on an unknown one).
#[derive(Default)]
struct Toy {
    dup: bool,
    cut: Option<Vec<NodeId>>,
    seen: Vec<u32>,
}

impl Toy {
    fn severed(&self, a: NodeId, b: NodeId) -> bool {
        self.cut
            .as_ref()
            .is_some_and(|s| s.contains(&a) != s.contains(&b))
    }
}

impl Links<u32> for Toy {
    fn route(&mut self, _now: Time, src: NodeId, t: &Transmit<u32>) -> Fate {
        let d = t.dst.0 as usize;
        if self.seen.len() <= d {
            self.seen.resize(d + 1, 0);
        }
        self.seen[d] += 1;
        if self.severed(src, t.dst) {
            return Fate::Partitioned;
        }
        let d = Duration::from_millis(10 * (1 + u64::from(src.0)));
        let dup = (self.dup && t.datagram == PONG).then_some(d + Duration::from_millis(1));
        Fate::Deliver(d, dup)
    }

    fn deliverable(&self, _now: Time, src: NodeId, dst: NodeId) -> bool {
        !self.severed(src, dst)
    }
}

type Log = Vec<(Time, NodeId, NodeId, u32)>;

/// Runs until `until`, pumping every machine that took an input; returns the steps in
/// order (`Nothing` left out), and logs what each machine received, with the time.
fn run(e: &mut Engine<Pinger, Toy, &'static str>, until: Time, log: &mut Log) -> Vec<Step<&'static str>> {
    let mut steps = Vec::new();
    while let Some(step) = e.step(until) {
        if let Step::Datagram(id) | Step::Timeout(id) = step {
            e.pump(id, |_, now, me, (from, d)| log.push((now, me, from, d)));
        }
        if step != Step::Nothing {
            steps.push(step);
        }
    }
    e.advance_to(until);
    steps
}

/// What the machines handed to the engine (counted by the test, not the engine) is
/// accounted for: unroutable, lost or partitioned at send, or (with the copies the links
/// made) delivered, dropped on arrival, or still queued.
fn assert_accounted(e: &Engine<Pinger, Toy, &'static str>, handed: u64, timers_queued: usize) {
    let (s, d) = (e.stats(), e.dropped());
    assert_eq!(s.sent + d.unroutable, handed, "{s:?} {d:?}");
    let in_flight = (e.queued() - timers_queued) as u64;
    assert_eq!(
        s.sent + s.duplicated,
        s.lost + s.partitioned + s.delivered + d.at_crashed + d.cut_in_flight + in_flight,
        "{s:?} {d:?}, {in_flight} in flight"
    );
}

fn engine(n: u32, period_ms: u64) -> Engine<Pinger, Toy, &'static str> {
    let mut e = Engine::new(
        (0..n).map(|i| Pinger::new(i, n, period_ms)).collect(),
        Toy::default(),
    );
    for i in 0..n {
        e.pump(NodeId(i), |_, _, _, _| {});
    }
    e
}

#[test]
fn datagrams_arrive_after_their_delay_and_answers_follow() {
    let mut e = engine(2, 1000);
    let mut log = Log::new();
    run(&mut e, Time::from_millis(100), &mut log);
    // Both ping at 0: node 0's ping lands at 10 ms, node 1's at 20 ms; the pongs go back
    // with the answerer's delay.
    assert_eq!(
        log,
        vec![
            (Time::from_millis(10), NodeId(1), NodeId(0), PING),
            (Time::from_millis(20), NodeId(0), NodeId(1), PING),
            (Time::from_millis(30), NodeId(0), NodeId(1), PONG),
            (Time::from_millis(30), NodeId(1), NodeId(0), PONG),
        ]
    );
    assert_eq!(e.stats().sent, 4);
    assert_eq!(e.stats().delivered, 4);
    assert_eq!(e.now(), Time::from_millis(100));
    assert_accounted(&e, 4, 2); // two wake-ups (at 1 s) queued
}

#[test]
fn ties_in_time_go_in_the_order_they_were_scheduled() {
    let mut e = engine(2, 1000);
    let mut log = Log::new();
    run(&mut e, Time::from_millis(15), &mut log); // node 1's pong is queued, for 30 ms
    e.schedule(Time::from_millis(30), "first");
    e.schedule(Time::from_millis(30), "second");
    let steps = run(&mut e, Time::from_millis(30), &mut log);
    // At 30 ms: node 1's pong (queued at 10 ms), the two events, then node 0's pong
    // (queued at 20 ms): insertion order, whatever slots of the slab they took.
    assert_eq!(
        steps,
        vec![
            Step::Datagram(NodeId(0)), // node 1's ping, at 20 ms
            Step::Datagram(NodeId(0)), // node 1's pong, at 30 ms
            Step::Other("first"),
            Step::Other("second"),
            Step::Datagram(NodeId(1)), // node 0's pong, at 30 ms
        ]
    );
}

#[test]
fn a_machine_is_woken_once_per_deadline_and_an_earlier_deadline_wins() {
    let mut e = engine(1, 100);
    let mut log = Log::new();
    run(&mut e, Time::from_millis(1000), &mut log);
    // Deadlines 0, 100, …, 1000: eleven wake-ups, none spurious.
    assert_eq!(e.machines()[0].timeouts, 11);
    // Pull the deadline in: the engine arms the earlier one at the next pump.
    e.machines_mut()[0].next = Time::from_millis(1050);
    e.pump(NodeId(0), |_, _, _, _| {});
    run(&mut e, Time::from_millis(1060), &mut log);
    assert_eq!(e.machines()[0].timeouts, 12, "woken at 1050, not only at 1100");
    // Push it out instead: the armed wake-up stays, the machine finds nothing due.
    e.machines_mut()[0].next = Time::from_millis(1300);
    e.pump(NodeId(0), |_, _, _, _| {});
    run(&mut e, Time::from_millis(1299), &mut log);
    assert_eq!(e.machines()[0].timeouts, 13, "one early wake-up at 1150");
    run(&mut e, Time::from_millis(1300), &mut log);
    assert_eq!(e.machines()[0].timeouts, 14);
}

#[test]
fn a_crashed_machine_takes_nothing_and_a_restarted_one_takes_what_was_in_flight() {
    let mut e = engine(2, 1000);
    let mut log = Log::new();
    run(&mut e, Time::from_millis(1), &mut log); // both pinged at 0
    e.crash(NodeId(1));
    run(&mut e, Time::from_millis(15), &mut log);
    assert!(log.is_empty(), "node 0's ping reached a crashed node: {log:?}");
    assert_eq!(e.dropped().at_crashed, 1);
    // Node 1's ping (sent at 0, before the crash) is still in flight and arrives.
    run(&mut e, Time::from_millis(20), &mut log);
    assert_eq!(log, vec![(Time::from_millis(20), NodeId(0), NodeId(1), PING)]);
    // Restart node 1 as a new process; node 0's pong (due at 30 ms) reaches it.
    e.restart(NodeId(1), Pinger::new(1, 2, 1000));
    e.pump(NodeId(1), |_, _, _, _| {});
    run(&mut e, Time::from_millis(30), &mut log);
    assert!(log.contains(&(Time::from_millis(30), NodeId(1), NodeId(0), PONG)));
    assert!(e.is_up(NodeId(1)));
    // Handed: the two pings at 0, node 0's pong at 20 ms, and the new process's ping at
    // 20 ms (its first deadline, 0, had passed), still in flight. Queued wake-ups: node
    // 0's and the new process's, and the crashed one's, superseded.
    assert_accounted(&e, 4, 3);
}

/// Two pingers on an engine dropping a crashed machine's datagrams: both pinged at 0, then
/// node 1 crashed at 1 ms.
fn pinged_then_crashed() -> (Engine<Pinger, Toy, &'static str>, Log) {
    let mut e = Engine::new((0..2).map(|i| Pinger::new(i, 2, 1000)).collect(), Toy::default())
        .dropping_from_crashed();
    for i in 0..2 {
        e.pump(NodeId(i), |_, _, _, _| {});
    }
    let mut log = Log::new();
    run(&mut e, Time::from_millis(1), &mut log);
    e.crash(NodeId(1));
    (e, log)
}

#[test]
fn dropping_from_crashed_loses_what_the_crashed_machine_had_in_flight() {
    let (mut e, mut log) = pinged_then_crashed();
    run(&mut e, Time::from_millis(100), &mut log);
    assert!(log.is_empty(), "{log:?}");
    assert_eq!(e.dropped().at_crashed, 2, "the ping to it and its own ping");
    assert_accounted(&e, 2, 2);
}

#[test]
fn dropping_from_crashed_loses_a_crashed_incarnation_s_datagrams_even_after_a_restart() {
    let (mut e, mut log) = pinged_then_crashed();
    e.restart(NodeId(1), Pinger::new(1, 2, 1000));
    e.pump(NodeId(1), |_, _, _, _| {});
    run(&mut e, Time::from_millis(15), &mut log);
    // Node 0's ping reached the new process at 10 ms; the old process's ping (due at
    // 20 ms) is lost with it, while the new process's ping (sent at 1 ms) arrives.
    run(&mut e, Time::from_millis(25), &mut log);
    let to0: Vec<_> = log
        .iter()
        .filter(|l| l.1 == NodeId(0) && l.3 == PING)
        .map(|l| l.0)
        .collect();
    assert_eq!(to0, [Time::from_millis(21)], "{log:?}");
    assert_eq!(e.dropped().at_crashed, 1);
}

#[test]
fn resuming_a_running_machine_changes_nothing() {
    let mut e = engine(1, 100);
    let mut log = Log::new();
    run(&mut e, Time::from_millis(50), &mut log);
    e.resume(NodeId(0)); // not stopped: its armed wake-up at 100 ms stays
    run(&mut e, Time::from_millis(100), &mut log);
    assert_eq!(e.machines()[0].timeouts, 2);
}

#[test]
fn a_cut_drops_at_send_and_in_flight_and_a_join_takes_the_next_id() {
    let mut e = engine(2, 1000);
    let mut log = Log::new();
    run(&mut e, Time::from_millis(12), &mut log); // node 0's ping arrived, 1's in flight
    e.links_mut().cut = Some(vec![NodeId(0)]);
    run(&mut e, Time::from_millis(1001), &mut log);
    assert_eq!(log.len(), 1, "{log:?}");
    assert_eq!(
        e.dropped().cut_in_flight,
        2,
        "node 1's ping and its pong to node 0"
    );
    assert_eq!(e.stats().partitioned, 2, "the pings of 1000 ms");
    e.links_mut().cut = None;
    let id = e.add(Pinger::new(2, 3, 1000));
    assert_eq!(id, NodeId(2));
    e.pump(id, |_, _, _, _| {});
    log.clear();
    run(&mut e, Time::from_millis(1100), &mut log);
    let pinged: Vec<_> = log.iter().filter(|l| l.3 == PING).map(|l| l.1).collect();
    assert_eq!(pinged, [NodeId(0), NodeId(1)], "the joiner pinged both");
}

#[test]
fn a_duplicate_is_delivered_again_and_counted() {
    let mut e = engine(2, 1000);
    e.links_mut().dup = true;
    let mut log = Log::new();
    run(&mut e, Time::from_millis(100), &mut log);
    let pongs = log.iter().filter(|l| l.3 == PONG).count();
    assert_eq!(pongs, 4);
    assert_eq!(e.stats().duplicated, 2);
}

#[test]
fn addressed_to_no_machine_is_dropped_not_a_panic() {
    let mut e = engine(1, 1000);
    e.machines_mut()[0].out.push_back(Transmit {
        dst: NodeId(7),
        class: MessageClass::Control,
        datagram: PING,
    });
    e.pump(NodeId(0), |_, _, _, _| {});
    assert_eq!(e.dropped().unroutable, 1, "dropped when sent");
    assert!(
        e.links().seen.len() <= 1,
        "the links never saw it: {:?}",
        e.links().seen
    );
    let mut log = Log::new();
    run(&mut e, Time::from_millis(100), &mut log);
    assert_eq!(e.stats().sent, 0);
}

#[test]
fn a_resumed_machine_keeps_its_state_and_is_woken_again() {
    let mut e = engine(2, 100);
    let mut log = Log::new();
    run(&mut e, Time::from_millis(50), &mut log);
    let before = e.machines()[1].timeouts;
    e.crash(NodeId(1));
    // Its wake-up at 100 ms passes while it is stopped.
    run(&mut e, Time::from_millis(250), &mut log);
    assert_eq!(e.machines()[1].timeouts, before);
    e.resume(NodeId(1));
    e.pump(NodeId(1), |_, _, _, _| {});
    run(&mut e, Time::from_millis(260), &mut log);
    assert_eq!(
        e.machines()[1].timeouts,
        before + 1,
        "woken at once: its deadline passed"
    );
    run(&mut e, Time::from_millis(400), &mut log);
    assert_eq!(e.machines()[1].timeouts, before + 2, "and again a period later");
}
