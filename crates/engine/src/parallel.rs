//! Parallel rounds: machines split into groups far apart on the network, each group run on
//! a thread of its own, with exactly the results of the serial engine (issue 18 item 3).
//!
//! **The window** (conservative synchronisation with lookahead, as in Chandy–Misra–Bryant
//! simulators). Nothing a machine of group `h` does reaches another group sooner than
//! `reach[h][g]` — the shortest network delay from any machine of `h` to any of `g`,
//! through any machines ([`ParallelLinks::min_delay`]) — and nothing comes back to `h`
//! itself through another group sooner than the shortest such cycle. So if group `h`'s
//! earliest pending event is at `head[h]`, every event before
//! `B = min over h of (head[h] + out[h])`, where `out[h]` is the least of those reaches,
//! can run without anything from another group arriving before it: each group runs its
//! events before `B` — those waiting in the queue, and those its own machines create
//! before `B` (timers, datagrams between machines of the group) — on its own thread.
//!
//! **Why the results are the serial engine's.** The events run in a round are exactly the
//! events the serial engine would run before `B`, each machine's in the same order:
//! within a group, events run by (time, insertion number), and an event created during
//! the round comes after every event that was queued before it at the same time, and
//! after those the group created before it — as the insertion numbers of the serial engine
//! would order them. A datagram's fate is drawn from its sender's own random stream
//! ([`ParallelLinks::route_with`]), so it does not depend on the groups either. After
//! the round the groups' logs are merged by (time, insertion number), assigning the
//! insertion numbers of created events as the merge reaches their creators: the queue
//! then holds what the serial engine's would, under the same numbers, and the machines'
//! events reach the caller in the serial order. Which groups a plan makes, how many
//! threads run them, and whether a round runs on threads at all change nothing but speed.
//!
//! **The caller's part** ([`RoundCaller`]). An event of the caller's kind (`X`) ends the
//! window, and the caller runs it with [`Engine::step`], serially, like any event a round
//! could not take (a round that can take none returns 0) — unless the caller names the
//! machine it is for ([`GroupWork::target`]): the machine's group then hands it over on
//! its own thread ([`GroupWork::deliver`]), like a datagram. After every input the group
//! takes the caller's share of the machine's outputs ([`GroupWork::take_side`]: the
//! simulator's locator operations), and the merge hands it to the caller in the serial
//! order ([`RoundCaller::after_input`]), between the machine's events and its timer, as
//! the serial caller drains them. What the caller schedules then must lie beyond the
//! round: a round never runs longer than [`RoundCaller::lookahead`] past its first event.
//! A caller whose per-input work reaches other machines sooner — a global index read at
//! once, a view of every machine — must not use rounds.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ops::Range;
use std::time::Duration;

use worldmesh_core::{Machine, NodeId, Time};

use crate::engine::{Dropped, Engine, Scheduled};
use crate::links::{NetworkStats, ParallelLinks};
use crate::pool::Pool;

/// Below this many events a round runs its groups one after the other on the calling
/// thread (handing work to the pool costs more than such a round); the results are the
/// same.
const MIN_EVENTS_FOR_THREADS: usize = 64;

/// How machines are split into groups for parallel rounds, and how far ahead of its
/// earliest event each group's activity can reach another group.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The machines the plan was made for.
    machines: usize,
    /// Each machine's group.
    group_of: Vec<u32>,
    /// Each machine's place among its group's machines (ascending ids).
    slot_of: Vec<u32>,
    /// Machines per group.
    sizes: Vec<u32>,
    /// Per group: the least delay, in µs, after which anything the group does can reach
    /// another group, or come back to it through one.
    out: Vec<u64>,
}

impl Plan {
    /// Splits `machines` machines into `groups` groups (at most one per machine) over
    /// `links`: machines ordered by their delay from a pivot, cut into groups of about
    /// equal size where the delay across the cut is wide enough (see `split`); the best
    /// of the first eight pivots. The lookahead is then computed exactly, whatever the
    /// split: the split decides the speed, never the result.
    pub fn new<D, L: ParallelLinks<D>>(links: &L, machines: usize, groups: usize) -> Self {
        let n = machines;
        let g = groups.clamp(1, n.max(1));
        // Shortest delays through any machines, in µs (Floyd–Warshall). The diagonal
        // starts at a machine's delay to itself, so it ends as its shortest cycle.
        let mut d = vec![u64::MAX; n * n];
        for i in 0..n {
            for j in 0..n {
                d[i * n + j] = micros(links.min_delay(NodeId(i as u32), NodeId(j as u32)));
            }
        }
        for k in 0..n {
            for i in 0..n {
                let dik = d[i * n + k];
                if dik == u64::MAX {
                    continue;
                }
                for j in 0..n {
                    let via = dik.saturating_add(d[k * n + j]);
                    if via < d[i * n + j] {
                        d[i * n + j] = via;
                    }
                }
            }
        }
        let group_of = split(&d, n, g);
        let mut sizes = vec![0u32; g];
        let mut slot_of = vec![0u32; n];
        for (i, &grp) in group_of.iter().enumerate() {
            slot_of[i] = sizes[grp as usize];
            sizes[grp as usize] += 1;
        }
        // Reach between groups, closed over groups, with the diagonal the shortest way
        // back through another group.
        let mut reach = vec![u64::MAX; g * g];
        for a in 0..n {
            for b in 0..n {
                let (ga, gb) = (group_of[a] as usize, group_of[b] as usize);
                if ga != gb {
                    let r = &mut reach[ga * g + gb];
                    *r = (*r).min(d[a * n + b]);
                }
            }
        }
        for k in 0..g {
            for i in 0..g {
                for j in 0..g {
                    let via = reach[i * g + k].saturating_add(reach[k * g + j]);
                    if via < reach[i * g + j] {
                        reach[i * g + j] = via;
                    }
                }
            }
        }
        let out = (0..g)
            .map(|h| (0..g).map(|x| reach[h * g + x]).min().unwrap_or(u64::MAX))
            .collect();
        Self {
            machines: n,
            group_of,
            slot_of,
            sizes,
            out,
        }
    }

    /// Groups in the plan.
    pub fn groups(&self) -> usize {
        self.sizes.len()
    }

    /// The window of the plan: the least delay after which one group can affect another
    /// (with every group's earliest event at the same time, a round runs this far).
    pub fn lookahead(&self) -> Duration {
        Duration::from_micros(self.out.iter().copied().min().unwrap_or(u64::MAX))
    }

    /// Machines per group.
    pub fn sizes(&self) -> &[u32] {
        &self.sizes
    }
}

/// A duration in whole µs, rounded down: the engine's clock adds delays so.
fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// The group of each machine (see [`Plan::new`]), from the closed delay matrix `d`.
///
/// Machines are ordered by their delay from a pivot and cut into `groups` runs; each cut
/// may move within a tenth of the machines of its place for equal groups. A round runs
/// until the next event of the caller's that ends a window (the simulator samples every
/// frame), for the caller's lookahead, or for the delay across the cuts, whichever is
/// shortest, and the slower group sets its pace: so
/// balance counts as much as a wide window. Of the cuts whose delay is at least half the
/// best any pivot reaches, the most balanced is taken (then the widest, then the first
/// pivot).
fn split(d: &[u64], n: usize, groups: usize) -> Vec<u32> {
    if groups <= 1 || n <= 1 {
        return vec![0; n];
    }
    // The delay across a cut of `order` before position `c`: the least delay between a
    // machine before it and one after it, either way.
    let across = |order: &[usize], c: usize| {
        let mut least = u64::MAX;
        for &a in &order[..c] {
            for &b in &order[c..] {
                least = least.min(d[a * n + b]).min(d[b * n + a]);
            }
        }
        least
    };
    let half_window = n / (2 * groups).max(10);
    // Per pivot: the order, and per cut its place for equal groups and every candidate
    // place with the delay across it.
    type Cut = (usize, Vec<(usize, u64)>);
    let mut pivots: Vec<(Vec<usize>, Vec<Cut>)> = Vec::new();
    let mut widest = 0;
    for pivot in 0..n.min(8) {
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&i| (if i == pivot { 0 } else { d[pivot * n + i] }, i));
        let mut cuts = Vec::with_capacity(groups - 1);
        for k in 1..groups {
            let target = k * n / groups;
            let lo = target.saturating_sub(half_window).max(k);
            let hi = (target + half_window).min(n - (groups - k)).max(lo);
            let candidates: Vec<(usize, u64)> = (lo..=hi).map(|c| (c, across(&order, c))).collect();
            cuts.push((target, candidates));
        }
        // The widest window this pivot allows: every cut at its widest place.
        let best = cuts
            .iter()
            .map(|(_, c)| c.iter().map(|(_, s)| *s).max().unwrap_or(0))
            .min()
            .unwrap_or(0);
        widest = widest.max(best);
        pivots.push((order, cuts));
    }
    let enough = widest / 2;
    // (imbalance, window, places, pivot) of the best choice so far.
    let mut chosen: Option<(usize, u64, Vec<usize>, usize)> = None;
    for (p, (_, cuts)) in pivots.iter().enumerate() {
        let mut places = Vec::with_capacity(cuts.len());
        let (mut imbalance, mut window) = (0, u64::MAX);
        for (target, candidates) in cuts {
            let last = places.last().copied().unwrap_or(0);
            let pick = candidates
                .iter()
                .filter(|(c, s)| *s >= enough && *c > last)
                .min_by_key(|(c, s)| (c.abs_diff(*target), std::cmp::Reverse(*s)));
            let Some(&(c, s)) = pick else {
                window = 0;
                break;
            };
            places.push(c);
            imbalance = imbalance.max(c.abs_diff(*target));
            window = window.min(s);
        }
        if window < enough || places.len() + 1 != groups {
            continue;
        }
        let better = chosen
            .as_ref()
            .is_none_or(|(i, w, ..)| (imbalance, std::cmp::Reverse(window)) < (*i, std::cmp::Reverse(*w)));
        if better {
            chosen = Some((imbalance, window, places, p));
        }
    }
    let mut group_of = vec![0u32; n];
    let (places, order) = match chosen {
        Some((_, _, places, p)) => (places, &pivots[p].0),
        // No cut reaches half the widest window (all windows zero): equal groups.
        None => ((1..groups).map(|k| k * n / groups).collect(), &pivots[0].0),
    };
    let mut grp = 0;
    for (pos, &m) in order.iter().enumerate() {
        while grp < places.len() && pos >= places[grp] {
            grp += 1;
        }
        group_of[m] = grp as u32;
    }
    group_of
}

/// An event of one machine, taken out of the queue or created during a round.
enum Local<D, X> {
    Deliver {
        src: u32,
        incarnation: u32,
        datagram: D,
    },
    Wake,
    /// An event of the caller's kind for this machine ([`GroupWork::target`]).
    Other(X),
}

impl<D, X> Local<D, X> {
    fn scheduled(self, node: u32) -> Scheduled<D, X> {
        match self {
            Local::Deliver {
                src,
                incarnation,
                datagram,
            } => Scheduled::Deliver {
                dst: node,
                src,
                incarnation,
                datagram,
            },
            Local::Wake => Scheduled::Wake { node },
            Local::Other(x) => Scheduled::Other(x),
        }
    }
}

/// Where an event stands in the serial order among events at the same time: those queued
/// before the round by their insertion number, then those created during it in the order
/// they were created (numbered within the group).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Order {
    Queued(u64),
    Created(u32),
}

/// An event queued before the round, taken out for a group.
struct Taken<D, X> {
    at: Time,
    seq: u64,
    node: u32,
    event: Local<D, X>,
}

/// An event a group created during the round (a datagram or a wake-up: the caller's
/// events are created at the merge).
struct Created<D, X> {
    at: Time,
    node: u32,
    /// `None` once the group ran it (or it is run later, from the queue, when `Some` after
    /// the round).
    event: Option<Local<D, X>>,
}

/// One input a machine took in the round, with where to find what it created and emitted.
struct Entry {
    at: Time,
    order: Order,
    node: u32,
    /// The events it created: its datagrams, then its wake-up if `wake`.
    creates: Range<u32>,
    wake: bool,
    /// How many events it emitted (the next ones of the group's `events`).
    emitted: u32,
    /// Whether it left the caller a share of its outputs ([`GroupWork::take_side`]: the
    /// next of the group's `sides`).
    has_side: bool,
}

/// A group's lists for one round, emptied and kept by the engine for the next. A round
/// of a 64-node world holds thousands of items per group. Allocated afresh, the lists grew
/// by copying every round, and the allocator gave their memory back to the system and
/// faulted it in again: a 64-node `dht` run on two threads took three times the page
/// faults of its run with kept lists (`crates/sim/PERFORMANCE.md`, twenty-fifth round).
pub(crate) struct Lists<D, X, E> {
    /// The group's events taken out of the queue.
    taken: Vec<Taken<D, X>>,
    /// While the group runs: the events it created for itself before the round's end,
    /// by (time, creation number).
    local: BinaryHeap<Reverse<(Time, u32)>>,
    /// The events the group created.
    created: Vec<Created<D, X>>,
    /// The inputs the group's machines took, in the order they took them.
    log: Vec<Entry>,
    /// The events the machines emitted, in the log's order.
    events: Vec<E>,
    /// At the merge: the serial insertion number of each created event.
    numbers: Vec<u64>,
}

impl<D, X, E> Default for Lists<D, X, E> {
    fn default() -> Self {
        Self {
            taken: Vec::new(),
            local: BinaryHeap::new(),
            created: Vec::new(),
            log: Vec::new(),
            events: Vec::new(),
            numbers: Vec::new(),
        }
    }
}

impl<D, X, E> Lists<D, X, E> {
    /// Empties every list, keeping its memory.
    fn clear(&mut self) {
        self.taken.clear();
        self.local.clear();
        self.created.clear();
        self.log.clear();
        self.events.clear();
        self.numbers.clear();
    }

    /// Whether every list is empty (as a kept one must be).
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.taken.is_empty()
            && self.local.is_empty()
            && self.created.is_empty()
            && self.log.is_empty()
            && self.events.is_empty()
            && self.numbers.is_empty()
    }
}

/// What one group did in a round.
struct GroupRun<D, X, E, S> {
    /// The round's lists, handed back to the engine after the merge.
    lists: Lists<D, X, E>,
    /// The caller's shares of the outputs, in the log's order. Not kept from round to
    /// round: its type is the caller's, and the engine outlives any one caller.
    sides: Vec<S>,
    stats: NetworkStats,
    dropped: Dropped,
    /// Events taken (inputs, superseded wake-ups, drops), and the latest one's time.
    ran: usize,
    last_at: Time,
}

/// What one group did in a round for caller `C`.
type RunFor<M, X, C> = GroupRun<
    <M as Machine>::Datagram,
    X,
    <M as Machine>::Event,
    <<C as RoundCaller<M, X>>::Work as GroupWork<M, X>>::Side,
>;

/// One machine of a group, lent to the group's thread.
struct Slot<'a, M, S> {
    machine: &'a mut M,
    timer: &'a mut Option<Time>,
    sender: &'a mut S,
}

/// What every group reads and nobody changes during a round.
struct Shared<'a, L> {
    links: &'a L,
    up: &'a [bool],
    incarnation: &'a [u32],
    drop_from_crashed: bool,
    plan: &'a Plan,
}

/// Runs group `group`'s events before `bound`: those in `lists.taken` (in queue order; its
/// other lists empty) and those its machines create before `bound`. Returns the lists
/// filled (`taken` and `local` emptied again).
fn run_group<M, L, X, W>(
    shared: &Shared<'_, L>,
    work: &W,
    group: u32,
    slots: &mut [Slot<'_, M, L::Sender>],
    mut lists: Lists<M::Datagram, X, M::Event>,
    bound: Time,
) -> GroupRun<M::Datagram, X, M::Event, W::Side>
where
    M: Machine,
    M::Datagram: Clone,
    L: ParallelLinks<M::Datagram>,
    W: GroupWork<M, X>,
{
    // Out of the lists while the group runs: the queue's events are drained from `queued`,
    // and `create` below pushes onto `local`.
    let mut queued = std::mem::take(&mut lists.taken);
    let mut local = std::mem::take(&mut lists.local);
    let mut run = GroupRun {
        lists,
        sides: Vec::new(),
        stats: NetworkStats::default(),
        dropped: Dropped::default(),
        ran: 0,
        last_at: Time::ZERO,
    };
    let n = shared.up.len();
    let mut taken = queued.drain(..).peekable();
    loop {
        let take_queued = match (taken.peek(), local.peek()) {
            (Some(t), Some(Reverse((at, _)))) => t.at <= *at,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        let (at, order, node, event) = if take_queued {
            let Some(t) = taken.next() else { break };
            (t.at, Order::Queued(t.seq), t.node, t.event)
        } else {
            let Some(Reverse((at, c))) = local.pop() else {
                break;
            };
            let rec = &mut run.lists.created[c as usize];
            let Some(event) = rec.event.take() else {
                continue;
            };
            (at, Order::Created(c), rec.node, event)
        };
        run.ran += 1;
        run.last_at = run.last_at.max(at);
        let i = node as usize;
        let slot = &mut slots[shared.plan.slot_of[i] as usize];
        let took = match event {
            Local::Deliver {
                src,
                incarnation,
                datagram,
            } => {
                let s = src as usize;
                let sender_gone =
                    shared.drop_from_crashed && (!shared.up[s] || shared.incarnation[s] != incarnation);
                if !shared.up[i] || sender_gone {
                    run.dropped.at_crashed += 1;
                    false
                } else if !shared.links.deliverable(at, NodeId(src), NodeId(node)) {
                    run.dropped.cut_in_flight += 1;
                    false
                } else {
                    run.stats.delivered += 1;
                    slot.machine.handle_datagram(at, NodeId(src), datagram);
                    true
                }
            }
            Local::Wake => {
                if *slot.timer != Some(at) || !shared.up[i] {
                    false // superseded, or the machine is down
                } else {
                    *slot.timer = None;
                    slot.machine.handle_timeout(at);
                    true
                }
            }
            Local::Other(x) => shared.up[i] && work.deliver(slot.machine, at, x),
        };
        if !took {
            continue;
        }
        // The machine's outputs, in the order the serial engine's caller drains them:
        // datagrams, events, then its timer.
        let first = run.lists.created.len() as u32;
        let mut create =
            |created: &mut Vec<Created<M::Datagram, X>>, at: Time, dst: u32, event: Local<M::Datagram, X>| {
                let c = created.len() as u32;
                let here = shared.plan.group_of[dst as usize] == group && at < bound;
                if here {
                    local.push(Reverse((at, c)));
                }
                created.push(Created {
                    at,
                    node: dst,
                    event: Some(event),
                });
            };
        while let Some(t) = slot.machine.poll_transmit() {
            if t.dst.0 as usize >= n {
                run.dropped.unroutable += 1;
                continue;
            }
            let fate = shared.links.route_with(slot.sender, at, NodeId(node), &t);
            let incarnation = shared.incarnation[i];
            let created = &mut run.lists.created;
            run.stats.count_sent(fate, t.datagram, |delay, datagram| {
                let deliver = Local::Deliver {
                    src: node,
                    incarnation,
                    datagram,
                };
                create(created, at + delay, t.dst.0, deliver);
            });
        }
        let before = run.lists.events.len();
        while let Some(e) = slot.machine.poll_event() {
            run.lists.events.push(e);
        }
        let emitted = (run.lists.events.len() - before) as u32;
        let has_side = match work.take_side(slot.machine) {
            Some(side) => {
                run.sides.push(side);
                true
            }
            None => false,
        };
        let mut wake = false;
        if let Some(at_wake) = slot.machine.poll_timeout()
            && slot.timer.is_none_or(|cur| at_wake < cur)
        {
            let at_wake = at_wake.max(at);
            *slot.timer = Some(at_wake);
            create(&mut run.lists.created, at_wake, node, Local::Wake);
            wake = true;
        }
        run.lists.log.push(Entry {
            at,
            order,
            node,
            creates: first..run.lists.created.len() as u32,
            wake,
            emitted,
            has_side,
        });
    }
    drop(taken); // ends the drain's borrow of `queued`, now empty
    run.lists.taken = queued;
    run.lists.local = local;
    run
}

/// The part of a caller's work in a round that runs on the groups' threads (see the
/// module docs): shared by every group, so it reads nothing that changes.
pub trait GroupWork<M: Machine, X>: Sync {
    /// The caller's share of a machine's outputs after an input.
    type Side: Send;

    /// The machine an event of the caller's kind is for, if its group may hand it over
    /// during a round; `None` ends the window there, for the caller to step.
    fn target(&self, x: &X) -> Option<NodeId>;

    /// Hands `x` to its (running) machine at `now`; true if the machine took an input,
    /// whose outputs are then drained as after a datagram.
    fn deliver(&self, machine: &mut M, now: Time, x: X) -> bool;

    /// Takes the caller's share of a machine's outputs after an input (`None`: nothing).
    fn take_side(&self, machine: &mut M) -> Option<Self::Side>;
}

/// A caller's part in [`Engine::round_for`]: what its groups do ([`GroupWork`]), and what it
/// does at the merge, in the serial order.
pub trait RoundCaller<M: Machine, X> {
    /// What the groups do for the caller.
    type Work: GroupWork<M, X>;

    /// What the groups do for the caller in the coming round.
    fn work(&self) -> Self::Work;

    /// The least delay between an input and an event [`RoundCaller::after_input`]
    /// schedules for it: no round runs longer than this past its first event.
    fn lookahead(&self) -> Duration;

    /// A machine's event, in the serial order, with its time and machine.
    fn on_event(&mut self, at: Time, node: NodeId, event: M::Event);

    /// The caller's work after machine `node`'s input at `at`, in the serial order (after
    /// the machine's events, before its timer is re-armed), with the share the group took;
    /// events to schedule go into `schedule`, none sooner than `at` + the lookahead.
    fn after_input(
        &mut self,
        at: Time,
        node: NodeId,
        side: <Self::Work as GroupWork<M, X>>::Side,
        schedule: &mut Vec<(Time, X)>,
    );
}

/// A caller whose only part is to take the machines' events ([`Engine::round`]): its own
/// events end the window.
struct EventsOnly<F>(F);

/// [`EventsOnly`]'s groups: nothing to do.
struct NoWork;

impl<M: Machine, X> GroupWork<M, X> for NoWork {
    type Side = ();
    fn target(&self, _: &X) -> Option<NodeId> {
        None
    }
    fn deliver(&self, _: &mut M, _: Time, _: X) -> bool {
        false
    }
    fn take_side(&self, _: &mut M) -> Option<()> {
        None
    }
}

impl<M: Machine, X, F: FnMut(Time, NodeId, M::Event)> RoundCaller<M, X> for EventsOnly<F> {
    type Work = NoWork;
    fn work(&self) -> NoWork {
        NoWork
    }
    fn lookahead(&self) -> Duration {
        Duration::MAX
    }
    fn on_event(&mut self, at: Time, node: NodeId, event: M::Event) {
        (self.0)(at, node, event);
    }
    fn after_input(&mut self, _: Time, _: NodeId, _: (), _: &mut Vec<(Time, X)>) {}
}

impl<M, L, X> Engine<M, L, X>
where
    M: Machine + Send,
    M::Datagram: Clone + Send,
    M::Event: Send,
    X: Send,
    L: ParallelLinks<M::Datagram>,
{
    /// Runs one parallel round (see the module docs): every event before the window's
    /// end, at or before `until`, with the machines split into `threads` groups, each on a
    /// thread of its own. The machines' events reach `on_event` in the serial order, with
    /// their time and machine. Returns the number of events the round took (what as many
    /// [`Engine::step`]s would have returned `Some` for); 0 when it could take none — the
    /// next event is the caller's, or the window is empty —, and the caller then steps.
    ///
    /// The caller's part after each input ([`Engine::pump`]) is done here, for a caller
    /// whose only part is to take the events: routing, events, timer.
    pub fn round(
        &mut self,
        until: Time,
        threads: usize,
        on_event: impl FnMut(Time, NodeId, M::Event),
    ) -> usize {
        self.round_for(until, threads, &mut EventsOnly(on_event))
    }

    /// [`Engine::round`] for a caller with work of its own ([`RoundCaller`]): events of its
    /// kind that its groups hand to machines, and its share of every input's outputs.
    ///
    /// # Panics
    /// If [`RoundCaller::after_input`] schedules an event before the round's end (its
    /// lookahead promised more than it kept: a caller's bug, which would break the serial
    /// order).
    pub fn round_for<C: RoundCaller<M, X>>(&mut self, until: Time, threads: usize, caller: &mut C) -> usize {
        let n = self.machines.len();
        let groups = threads.min(n);
        if groups < 2 {
            return 0;
        }
        if self
            .plan
            .as_ref()
            .is_none_or(|p| p.machines != n || p.groups() != groups)
        {
            self.plan = Some(Plan::new::<M::Datagram, L>(&self.links, n, groups));
        }
        if self.pool.as_ref().is_none_or(|p| p.workers() + 1 != groups) {
            // The calling thread runs the first group; the pool, the others. Without a
            // pool (the system refused threads) rounds run on this thread alone.
            self.pool = Pool::new(groups - 1);
        }
        let Some(plan) = self.plan.take() else {
            return 0;
        };
        let ran = self.round_with(&plan, until, caller);
        self.plan = Some(plan);
        ran
    }

    /// The plan the last round used (`None` before the first).
    pub fn plan(&self) -> Option<&Plan> {
        self.plan.as_ref()
    }

    fn round_with<C: RoundCaller<M, X>>(&mut self, plan: &Plan, until: Time, caller: &mut C) -> usize {
        let g = plan.groups();
        let work = caller.work();
        // Take the window's events out of the queue, in order.
        let limit = Time(until.0.saturating_add(1));
        let mut end = limit;
        let mut first = true;
        let mut known = vec![false; g];
        // Each group's lists from the last round (one per group, in group order).
        let mut lists = std::mem::take(&mut self.spare);
        lists.resize_with(g, Lists::default);
        while let Some((at, event)) = self.queue.peek() {
            if at >= end {
                break;
            }
            let node = match event {
                Scheduled::Deliver { dst, .. } => *dst,
                Scheduled::Wake { node } => *node,
                Scheduled::Other(x) => match work.target(x) {
                    Some(id) if (id.0 as usize) < plan.machines => id.0,
                    _ => {
                        end = at; // the caller's event ends the window
                        break;
                    }
                },
            };
            let Some((at, seq, event)) = self.queue.pop_keyed() else {
                break;
            };
            if first {
                first = false;
                end = end.min(Time(at.0.saturating_add(micros(caller.lookahead()))));
            }
            let grp = plan.group_of[node as usize] as usize;
            if !known[grp] {
                known[grp] = true;
                end = end.min(Time(at.0.saturating_add(plan.out[grp])));
            }
            let event = match event {
                Scheduled::Deliver {
                    src,
                    incarnation,
                    datagram,
                    ..
                } => Local::Deliver {
                    src,
                    incarnation,
                    datagram,
                },
                Scheduled::Wake { .. } => Local::Wake,
                Scheduled::Other(x) => Local::Other(x),
            };
            lists[grp].taken.push(Taken { at, seq, node, event });
        }
        // Events at the very time of a caller's event that ended the window go back (the
        // queue orders them before it by insertion number; the serial steps will run them).
        for list in &mut lists {
            while list.taken.last().is_some_and(|t| t.at >= end) {
                if let Some(t) = list.taken.pop() {
                    self.queue.push_keyed(t.at, t.seq, t.event.scheduled(t.node));
                }
            }
        }
        let total: usize = lists.iter().map(|l| l.taken.len()).sum();
        if total == 0 {
            self.spare = lists;
            return 0;
        }

        // Lend each group its machines, and each machine its sender's state.
        let mut senders: Vec<L::Sender> = (0..plan.machines)
            .map(|i| self.links.take_sender(NodeId(i as u32)))
            .collect();
        let runs = {
            let mut slots: Vec<Vec<Slot<'_, M, L::Sender>>> = plan
                .sizes
                .iter()
                .map(|&s| Vec::with_capacity(s as usize))
                .collect();
            for (i, ((machine, timer), sender)) in self
                .machines
                .iter_mut()
                .zip(self.timers.iter_mut())
                .zip(senders.iter_mut())
                .enumerate()
            {
                slots[plan.group_of[i] as usize].push(Slot {
                    machine,
                    timer,
                    sender,
                });
            }
            let shared = Shared {
                links: &self.links,
                up: &self.up,
                incarnation: &self.incarnation,
                drop_from_crashed: self.drop_from_crashed,
                plan,
            };
            let mut runs: Vec<Option<RunFor<M, X, C>>> = (0..g).map(|_| None).collect();
            let jobs = slots.into_iter().zip(lists).zip(runs.iter_mut()).enumerate();
            let pool = if total < MIN_EVENTS_FOR_THREADS {
                None
            } else {
                self.pool.as_ref().filter(|p| p.workers() + 1 == g)
            };
            let (shared, work) = (&shared, &work);
            let mut jobs = jobs.map(|(grp, ((mut s, l), out))| {
                move || *out = Some(run_group(shared, work, grp as u32, &mut s, l, end))
            });
            match pool {
                None => jobs.for_each(|job| job()),
                Some(pool) => {
                    if let Some(first) = jobs.next() {
                        pool.run(first, jobs);
                    }
                }
            }
            runs.into_iter().flatten().collect::<Vec<_>>()
        };
        for (i, s) in senders.into_iter().enumerate() {
            self.links.put_sender(NodeId(i as u32), s);
        }
        self.merge(runs, end, caller)
    }

    /// Replays the groups' logs in the serial order: numbers created events as the serial
    /// engine would have, queues those left for later, hands the events to `on_event`, and
    /// adds up the counts. Returns the events the round took.
    fn merge<C: RoundCaller<M, X>>(
        &mut self,
        mut runs: Vec<RunFor<M, X, C>>,
        end: Time,
        caller: &mut C,
    ) -> usize {
        // Per group: the insertion number given to each created event (0 until given), the
        // machines' events and the caller's shares, both taken in the log's order.
        let mut numbers: Vec<Vec<u64>> = runs
            .iter_mut()
            .map(|r| {
                let mut numbers = std::mem::take(&mut r.lists.numbers);
                numbers.resize(r.lists.created.len(), 0);
                numbers
            })
            .collect();
        let mut events: Vec<Vec<M::Event>> = runs
            .iter_mut()
            .map(|r| std::mem::take(&mut r.lists.events))
            .collect();
        let mut sides: Vec<_> = runs
            .iter_mut()
            .map(|r| std::mem::take(&mut r.sides).into_iter())
            .collect();
        let mut drains: Vec<_> = events.iter_mut().map(|e| e.drain(..)).collect();
        let mut next = vec![0usize; runs.len()];
        let mut scheduled = Vec::new();
        let key = |numbers: &[Vec<u64>], grp: usize, e: &Entry| match e.order {
            Order::Queued(seq) => seq,
            Order::Created(c) => numbers[grp][c as usize],
        };
        let mut heads: BinaryHeap<Reverse<(Time, u64, usize)>> = BinaryHeap::new();
        for (grp, run) in runs.iter().enumerate() {
            if let Some(e) = run.lists.log.first() {
                heads.push(Reverse((e.at, key(&numbers, grp, e), grp)));
            }
        }
        while let Some(Reverse((at, _, grp))) = heads.pop() {
            let run = &mut runs[grp];
            let entry = &run.lists.log[next[grp]];
            next[grp] += 1;
            self.now = self.now.max(at);
            // Its datagrams, its events, the caller's work, then its wake-up: the serial
            // caller's order.
            let (creates, wake) = (entry.creates.clone(), entry.wake);
            let (node, emitted, has_side) = (NodeId(entry.node), entry.emitted, entry.has_side);
            let datagrams = creates.start..creates.end - u32::from(wake);
            let mut number = |queue: &mut crate::queue::EventQueue<_>, c: u32| {
                let rec = &mut run.lists.created[c as usize];
                numbers[grp][c as usize] = match rec.event.take() {
                    Some(event) => queue.push(rec.at, event.scheduled(rec.node)),
                    None => queue.reserve(),
                };
            };
            for c in datagrams.clone() {
                number(&mut self.queue, c);
            }
            for e in drains[grp].by_ref().take(emitted as usize) {
                caller.on_event(at, node, e);
            }
            if has_side {
                let side = sides[grp].next().expect("a share for every input that left one");
                caller.after_input(at, node, side, &mut scheduled);
                for (when, x) in scheduled.drain(..) {
                    assert!(
                        when >= end,
                        "the caller scheduled an event inside the round it came from (lookahead too long)"
                    );
                    self.queue.push(when, Scheduled::Other(x));
                }
            }
            if wake {
                number(&mut self.queue, datagrams.end);
            }
            if let Some(e) = run.lists.log.get(next[grp]) {
                debug_assert!(
                    !matches!(e.order, Order::Created(c) if numbers[grp][c as usize] == 0),
                    "an event is merged after the one that created it"
                );
                heads.push(Reverse((e.at, key(&numbers, grp, e), grp)));
            }
        }
        debug_assert!(
            drains.iter().all(|d| d.len() == 0) && sides.iter().all(|s| s.len() == 0),
            "every event and share emitted was merged"
        );
        drop(drains); // ends their borrows of `events`, now empty
        let mut ran = 0;
        for ((mut run, numbers), events) in runs.into_iter().zip(numbers).zip(events) {
            ran += run.ran;
            self.now = self.now.max(run.last_at);
            self.stats.add(&run.stats);
            self.dropped.add(&run.dropped);
            run.lists.numbers = numbers;
            run.lists.events = events;
            run.lists.clear();
            self.spare.push(run.lists); // in group order, as `runs` is
        }
        ran
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Step;
    use crate::links::{Fate, Links};
    use worldmesh_core::{DetRng, MessageClass, Transmit};

    /// A machine whose every output depends on everything it took before: a running hash
    /// of its inputs decides where it sends, what, whether it emits an event and when it
    /// wakes next (in whole milliseconds, so that ties in time are common).
    struct Toy {
        n: u64,
        hash: u64,
        out: Vec<Transmit<u64>>,
        wake: Option<Time>,
        events: Vec<u64>,
        /// Outputs for the caller of [`Engine::round_for`] (every third input leaves one).
        side: Vec<u64>,
        log: Vec<(Time, u32, u64)>,
    }

    fn mix(mut x: u64) -> u64 {
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        x
    }

    impl Toy {
        fn new(id: u64, n: u64) -> Self {
            Self {
                n,
                hash: mix(id + 1),
                out: Vec::new(),
                wake: Some(Time::from_millis(id % 3)),
                events: Vec::new(),
                side: Vec::new(),
                log: Vec::new(),
            }
        }

        fn take(&mut self, now: Time, from: u32, d: u64) {
            self.hash = mix(self.hash ^ now.0.rotate_left(7) ^ (u64::from(from) << 40) ^ d);
            self.log.push((now, from, d));
            let h = self.hash;
            for k in 0..h % 3 {
                self.out.push(Transmit {
                    dst: NodeId(((h >> (8 * k + 4)) % self.n) as u32),
                    class: MessageClass::ObjectUpdate,
                    datagram: h ^ k,
                });
            }
            if !(h >> 3).is_multiple_of(4) {
                let at = now + Duration::from_millis((h >> 20) % 4);
                self.wake = Some(self.wake.map_or(at, |w| w.min(at)));
            }
            if h.is_multiple_of(5) {
                self.events.push(h);
            }
            if (h >> 12).is_multiple_of(3) {
                self.side.push(h >> 1);
            }
        }
    }

    impl Toy {
        /// An event of the test caller's: changes what the machine does next, sends nothing
        /// (so the events do not multiply).
        fn told(&mut self, now: Time, v: u64) {
            self.hash = mix(self.hash ^ v);
            self.log.push((now, u32::MAX - 1, v));
        }
    }

    impl Machine for Toy {
        type Datagram = u64;
        type Event = u64;
        fn handle_datagram(&mut self, now: Time, from: NodeId, datagram: u64) {
            self.take(now, from.0, datagram);
        }
        fn handle_timeout(&mut self, now: Time) {
            if self.wake.is_some_and(|w| w <= now) {
                self.wake = None;
                self.take(now, u32::MAX, 0);
            }
        }
        fn poll_transmit(&mut self) -> Option<Transmit<u64>> {
            (!self.out.is_empty()).then(|| self.out.remove(0))
        }
        fn poll_timeout(&self) -> Option<Time> {
            self.wake
        }
        fn poll_event(&mut self) -> Option<u64> {
            self.events.pop()
        }
    }

    /// Two sites 20–29 ms apart, 1–3 ms within a site, in whole ms; loss, duplicates and
    /// 0–1 ms of jitter drawn from each sender's stream.
    struct Net {
        n: usize,
        senders: Vec<DetRng>,
    }

    impl Net {
        fn base(&self, a: NodeId, b: NodeId) -> Duration {
            let (a, b) = (a.0 as usize, b.0 as usize);
            let ms = if (a < self.n / 2) == (b < self.n / 2) {
                1 + (a + b) % 3
            } else {
                20 + (a * 7 + b) % 10
            };
            Duration::from_millis(ms as u64)
        }

        fn fate(&self, rng: &mut DetRng, src: NodeId, dst: NodeId) -> Fate {
            if rng.chance(0.05) {
                return Fate::Lost;
            }
            let base = self.base(src, dst);
            let first = base + Duration::from_millis(rng.below(2));
            let dup = rng
                .chance(0.05)
                .then(|| base + Duration::from_millis(rng.below(2)));
            Fate::Deliver(first, dup)
        }
    }

    impl Links<u64> for Net {
        fn route(&mut self, _now: Time, src: NodeId, t: &Transmit<u64>) -> Fate {
            let mut rng = std::mem::replace(&mut self.senders[src.0 as usize], DetRng::new(0));
            let fate = self.fate(&mut rng, src, t.dst);
            self.senders[src.0 as usize] = rng;
            fate
        }
    }

    impl ParallelLinks<u64> for Net {
        type Sender = DetRng;
        fn min_delay(&self, src: NodeId, dst: NodeId) -> Duration {
            self.base(src, dst)
        }
        fn take_sender(&mut self, src: NodeId) -> DetRng {
            std::mem::replace(&mut self.senders[src.0 as usize], DetRng::new(0))
        }
        fn put_sender(&mut self, src: NodeId, sender: DetRng) {
            self.senders[src.0 as usize] = sender;
        }
        fn route_with(&self, sender: &mut DetRng, _now: Time, src: NodeId, t: &Transmit<u64>) -> Fate {
            self.fate(sender, src, t.dst)
        }
    }

    type Events = Vec<(Time, NodeId, u64)>;

    /// `n` toys and their network, drawn from `seed`.
    fn world(n: usize, seed: u64) -> (Vec<Toy>, Net) {
        let root = DetRng::new(seed);
        let net = Net {
            n,
            senders: (0..n as u64).map(|i| root.fork(i)).collect(),
        };
        let toys = (0..n as u64).map(|i| Toy::new(i + seed, n as u64)).collect();
        (toys, net)
    }

    /// Asserts that the engine keeps one list per group once rounds ran on `threads`
    /// threads (none on one thread: the serial engine alone), every one of them empty
    /// but holding the memory of past rounds (the tests' worlds have more machines than
    /// threads, so a group per thread).
    fn assert_lists_kept_empty<X>(engine: &Engine<Toy, Net, X>, threads: usize) {
        let groups = if threads > 1 { threads } else { 0 };
        assert_eq!(engine.spare.len(), groups, "lists kept");
        assert!(engine.spare.iter().all(Lists::is_empty), "a list kept its items");
        assert!(
            engine
                .spare
                .iter()
                .all(|l| l.log.capacity() > 0 && l.created.capacity() > 0),
            "the lists of past rounds were not kept"
        );
    }

    /// A run: every machine's inputs, the events in the order they came out, the counts,
    /// the rounds that ran and how many of them were large enough for threads.
    type Ran = (Vec<Vec<(Time, u32, u64)>>, Events, String, u64, u64);

    /// Runs 8 toys for 0.6 s, machine 2 crashed from 0.2 s to 0.35 s, on `threads`
    /// threads (1: the serial engine alone); returns every machine's inputs, the events
    /// in the order they came out, the counts, and the rounds that ran (and how many of
    /// them were large enough for threads).
    fn run(threads: usize, seed: u64) -> Ran {
        let n = 8;
        let (toys, net) = world(n, seed);
        let mut engine: Engine<Toy, Net> = Engine::new(toys, net).dropping_from_crashed();
        let mut events = Vec::new();
        for i in 0..n as u32 {
            engine.pump(NodeId(i), |_, at, id, e| events.push((at, id, e)));
        }
        let (mut rounds, mut threaded) = (0, 0);
        for (until, fault) in [(200, Some(true)), (350, Some(false)), (600, None)] {
            let until = Time::from_millis(until);
            loop {
                let ran = engine.round(until, threads, |at, id, e| events.push((at, id, e)));
                if ran > 0 {
                    rounds += 1;
                    threaded += u64::from(ran >= MIN_EVENTS_FOR_THREADS);
                    continue;
                }
                match engine.step(until) {
                    None => break,
                    Some(Step::Datagram(id) | Step::Timeout(id)) => {
                        engine.pump(id, |_, at, id, e| events.push((at, id, e)));
                    }
                    Some(_) => {}
                }
            }
            assert_lists_kept_empty(&engine, threads);
            engine.advance_to(until);
            match fault {
                Some(true) => engine.crash(NodeId(2)),
                Some(false) => {
                    engine.resume(NodeId(2));
                    engine.pump(NodeId(2), |_, at, id, e| events.push((at, id, e)));
                }
                None => {}
            }
        }
        let logs = engine.machines().iter().map(|m| m.log.clone()).collect();
        let counts = format!("{:?} {:?} {}", engine.stats(), engine.dropped(), engine.queued());
        (logs, events, counts, rounds, threaded)
    }

    #[test]
    fn rounds_give_the_serial_run_whatever_the_thread_count() {
        for seed in 0..3 {
            let (logs, events, counts, rounds, _) = run(1, seed);
            assert_eq!(rounds, 0);
            assert!(logs.iter().all(|l| l.len() > 50), "every toy took inputs");
            assert!(!events.is_empty());
            for threads in [2, 3] {
                let (l, e, c, rounds, threaded) = run(threads, seed);
                assert!(
                    rounds > 10 && threaded > 0,
                    "{threads} threads: {rounds} rounds, {threaded} on threads"
                );
                assert_eq!(c, counts, "seed {seed}, {threads} threads: counts");
                assert_eq!(e, events, "seed {seed}, {threads} threads: events");
                for (m, (a, b)) in logs.iter().zip(&l).enumerate() {
                    assert_eq!(a, b, "seed {seed}, {threads} threads: machine {m}'s inputs");
                }
            }
        }
    }

    /// An event of the test caller's kind: for a machine (`Some`), or a tick that ends
    /// the window (`None`).
    type Call = (Option<u32>, u64);

    /// The caller's lookahead: shorter than the 20-ms window between the sites, so it
    /// bounds the rounds; and shorter than the toys' wake-ups (0–3 ms), so that the
    /// caller's events tie with them.
    const CALL_DELAY_MS: u64 = 2;

    /// A caller with a global index fed in the serial order: it hashes every side output
    /// it is given (with its time and machine) into one running hash, and from that hash
    /// schedules events for machines `CALL_DELAY_MS` to 4 ms later, in whole ms (ties with
    /// datagrams and wake-ups are common).
    struct Caller {
        n: u64,
        /// Whether the caller also schedules ticks of its own from its work.
        ticks: bool,
        hash: u64,
        fed: Vec<(Time, u32, u64)>,
        events: Events,
    }

    struct CallerWork;

    impl GroupWork<Toy, Call> for CallerWork {
        type Side = Vec<u64>;
        fn target(&self, x: &Call) -> Option<NodeId> {
            x.0.map(NodeId)
        }
        fn deliver(&self, machine: &mut Toy, now: Time, x: Call) -> bool {
            machine.told(now, x.1);
            true
        }
        fn take_side(&self, machine: &mut Toy) -> Option<Vec<u64>> {
            (!machine.side.is_empty()).then(|| std::mem::take(&mut machine.side))
        }
    }

    impl RoundCaller<Toy, Call> for Caller {
        type Work = CallerWork;
        fn work(&self) -> CallerWork {
            CallerWork
        }
        fn lookahead(&self) -> Duration {
            Duration::from_millis(CALL_DELAY_MS)
        }
        fn on_event(&mut self, at: Time, node: NodeId, event: u64) {
            self.events.push((at, node, event));
            // In the same record as what the caller is fed: their order counts too.
            self.fed.push((at, node.0 | 1 << 31, event));
        }
        fn after_input(&mut self, at: Time, node: NodeId, side: Vec<u64>, schedule: &mut Vec<(Time, Call)>) {
            for v in side {
                self.hash = mix(self.hash ^ v ^ at.0 ^ u64::from(node.0));
                self.fed.push((at, node.0, v));
                let h = self.hash;
                let when = at + Duration::from_millis(CALL_DELAY_MS + (h >> 8) % 3);
                if h.is_multiple_of(2) {
                    schedule.push((when, (Some(((h >> 16) % self.n) as u32), h)));
                } else if self.ticks && h % 16 == 1 {
                    // A tick that ends the window, tied with machines' events at the
                    // same ms: those queued before it go back to the queue.
                    schedule.push((when, (None, h)));
                }
            }
        }
    }

    impl Caller {
        /// The serial caller's part after machine `id`'s input: what a round does at the
        /// merge, in the same order (datagrams, events, side, timer).
        fn pump(&mut self, engine: &mut Engine<Toy, Net, Call>, id: NodeId) {
            engine.route_transmits(id);
            let now = engine.now();
            let m = &mut engine.machines_mut()[id.0 as usize];
            while let Some(e) = m.poll_event() {
                self.on_event(now, id, e);
            }
            if let Some(side) = CallerWork.take_side(m) {
                let mut sched = Vec::new();
                self.after_input(now, id, side, &mut sched);
                for (at, x) in sched {
                    engine.schedule(at, x);
                }
            }
            engine.arm_timer(id);
        }
    }

    /// A run with the test caller: every machine's inputs, the caller's record, the
    /// counts, the rounds, and the caller's machine events that ran as serial steps.
    type RanWithCaller = (Vec<Vec<(Time, u32, u64)>>, String, String, u64, u64);

    /// Like [`run`], with the caller above and ticks (the caller's own events) every
    /// 50 ms; returns every machine's inputs, the caller's record (events, what it was
    /// fed, in order), the counts and the rounds.
    fn run_with_caller(threads: usize, seed: u64, ticks: bool) -> RanWithCaller {
        let n = 8;
        let (toys, net) = world(n, seed);
        let mut engine: Engine<Toy, Net, Call> = Engine::new(toys, net).dropping_from_crashed();
        let mut caller = Caller {
            n: n as u64,
            ticks,
            hash: seed,
            fed: Vec::new(),
            events: Vec::new(),
        };
        for k in 1..12 {
            engine.schedule(Time::from_millis(50 * k), (None, k));
        }
        for i in 0..n as u32 {
            caller.pump(&mut engine, NodeId(i));
        }
        let (mut rounds, mut stepped_calls) = (0, 0);
        for (until, fault) in [(200, Some(true)), (350, Some(false)), (600, None)] {
            let until = Time::from_millis(until);
            loop {
                if threads > 1 {
                    let ran = engine.round_for(until, threads, &mut caller);
                    if ran > 0 {
                        rounds += 1;
                        continue;
                    }
                }
                match engine.step(until) {
                    None => break,
                    Some(Step::Datagram(id) | Step::Timeout(id)) => caller.pump(&mut engine, id),
                    Some(Step::Other((Some(node), v))) => {
                        stepped_calls += 1;
                        let id = NodeId(node);
                        if engine.is_up(id) {
                            let now = engine.now();
                            engine.machines_mut()[node as usize].told(now, v);
                            caller.pump(&mut engine, id);
                        }
                    }
                    Some(Step::Other((None, k))) => {
                        let now = engine.now();
                        caller.fed.push((now, u32::MAX, k));
                    }
                    Some(Step::Nothing) => {}
                }
            }
            assert_lists_kept_empty(&engine, threads);
            engine.advance_to(until);
            match fault {
                Some(true) => engine.crash(NodeId(2)),
                Some(false) => {
                    engine.resume(NodeId(2));
                    caller.pump(&mut engine, NodeId(2));
                }
                None => {}
            }
        }
        let logs = engine.machines().iter().map(|m| m.log.clone()).collect();
        let record = format!("{:?} {:?} {}", caller.events, caller.fed, caller.hash);
        let counts = format!("{:?} {:?} {}", engine.stats(), engine.dropped(), engine.queued());
        (logs, record, counts, rounds, stepped_calls)
    }

    #[test]
    fn the_callers_events_and_work_give_the_serial_run_whatever_the_thread_count() {
        // With ticks from the caller's work, some tie with machines' events queued before
        // them, which a round puts back for the serial steps; without, none do.
        for (seed, ticks) in [(0, false), (1, false), (2, false), (0, true)] {
            let (logs, record, counts, rounds, _) = run_with_caller(1, seed, ticks);
            assert_eq!(rounds, 0);
            let calls = logs
                .iter()
                .flatten()
                .filter(|(_, from, _)| *from == u32::MAX - 1)
                .count();
            assert!(
                calls > 50,
                "seed {seed}: the caller's events reached machines: {calls}"
            );
            for threads in [2, 3] {
                let (l, r, c, rounds, stepped_calls) = run_with_caller(threads, seed, ticks);
                assert!(
                    rounds > 600 / CALL_DELAY_MS / 2,
                    "{threads} threads: {rounds} rounds"
                );
                // Events for a machine never end a window: the rounds hand them over, but
                // for those tied with a later-numbered tick.
                if !ticks {
                    assert_eq!(
                        stepped_calls, 0,
                        "{threads} threads: the caller's events were stepped"
                    );
                } else {
                    assert!(stepped_calls > 0, "{threads} threads: no event went back");
                }
                assert_eq!(c, counts, "seed {seed}, {threads} threads: counts");
                assert!(
                    r == record,
                    "seed {seed}, {threads} threads: the caller's record differs"
                );
                for (m, (a, b)) in logs.iter().zip(&l).enumerate() {
                    assert_eq!(a, b, "seed {seed}, {threads} threads: machine {m}'s inputs");
                }
            }
        }
    }

    #[test]
    fn the_plan_splits_the_sites_and_the_window_is_the_delay_between_them() {
        let net = Net {
            n: 8,
            senders: (0..8).map(DetRng::new).collect(),
        };
        let plan = Plan::new::<u64, Net>(&net, 8, 2);
        assert_eq!(plan.sizes(), &[4, 4]);
        assert_eq!(plan.group_of[..4], [plan.group_of[0]; 4], "one site per group");
        // The least delay between the sites: 20 ms + the least of (a * 7 + b) % 10 over
        // machines a and b on different sites.
        let least = (0..8usize)
            .flat_map(|a| (0..8usize).map(move |b| (a, b)))
            .filter(|(a, b)| (a < &4) != (b < &4))
            .map(|(a, b)| 20 + (a * 7 + b) % 10)
            .min();
        assert_eq!(
            Some(plan.lookahead()),
            least.map(|ms| Duration::from_millis(ms as u64))
        );
        // One group per machine at most.
        assert_eq!(Plan::new::<u64, Net>(&net, 8, 20).groups(), 8);
    }
}
