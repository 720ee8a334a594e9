//! What the real runtime's transport does that a network does not: it refuses a member's
//! generation its node holds declared down, and says so to the sender.
//!
//! In `worldmesh node` (QUIC, `worldmesh-net`), a node that declared a member failed
//! forgets it (`Transport::forget`): the acceptor of a connection from that generation
//! closes it with `DeclaredDown` and its own view of the cluster, the sender's transport
//! reports `TransportEvent::DeclaredDown`, and the sender's node decides whether to renew
//! its generation (`Node::handle_declared_down`, the split rule of
//! `Membership::declared_down`). Nothing the sender sends gets through meanwhile: not its
//! SWIM messages, so no `TurnUndead` answer reaches it either. A simulation whose nodes run
//! a membership protocol models this here, so that a healed partition runs in the
//! simulator (and the fault swarm) the path it runs in production:
//!
//! - two nodes exchange datagrams over a connection, which the first of them to send dials;
//!   only the acceptor refuses: a dial from `src` to `dst` fails while `dst` holds `src`'s
//!   current generation declared down (`dst` saw it fail, and neither has `src` renewed
//!   since nor has `dst` seen it up again: `Transport::set_addr` lifts the mark), and the
//!   datagram is dropped;
//! - a connection carries datagrams both ways until either end declares the other's
//!   generation down (`Transport::forget` closes it) or restarts;
//! - `src` learns of the refusal one round trip later (the handshake), if `dst`'s answer
//!   can reach it (not when `dst` is muted: its refusals are lost), at most once per
//!   back-off per pair — doubling from 250 ms to 5 s, as the QUIC transport's redials —
//!   with `dst`'s view of the cluster at the refusal;
//! - a node that renews its generation (or restarts) clears what it held declared down, as
//!   `Transport::set_generation` does, and its back-offs start again.

use std::collections::BTreeMap;
use std::time::Duration;

use worldmesh_core::{NodeId, Time};

/// The first back-off after a refusal told (the QUIC transport's `redial_backoff_min`).
const BACKOFF_MIN: Duration = Duration::from_millis(250);
/// The longest back-off (`redial_backoff_max`).
const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// The refusals of every node's transport (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct Refusals {
    /// Each node's current generation.
    generation: Vec<u32>,
    /// Per node: the newest generation of each member it holds declared down.
    dead: Vec<BTreeMap<NodeId, u32>>,
    /// Refusals made since the last [`Refusals::take_due`]: (sender, refuser, the
    /// generation the sender dialed as).
    pending: Vec<(NodeId, NodeId, u32)>,
    /// Per (sender, refuser): when the next refusal may be told, and the back-off.
    told: BTreeMap<(NodeId, NodeId), (Time, Duration)>,
    /// Connections up, by (lower id, higher id): the generations of the two ends when it
    /// was dialed, in the same order.
    links: BTreeMap<(NodeId, NodeId), (u32, u32)>,
    /// Datagrams dropped by a refusal.
    dropped: u64,
}

impl Refusals {
    /// Refusals among nodes `0..generations.len()`, node `i` running as `generations[i]`.
    pub fn new(generations: Vec<u32>) -> Self {
        let n = generations.len();
        Self {
            generation: generations,
            dead: vec![BTreeMap::new(); n],
            ..Self::default()
        }
    }

    /// A node joined the world, running as `generation` (its id is the next one).
    pub fn add(&mut self, generation: u32) {
        self.generation.push(generation);
        self.dead.push(BTreeMap::new());
    }

    /// True if a datagram from `src` to `dst` is refused (no connection is up between
    /// them, and `dst` refuses `src`'s dial); the refusal is then recorded for
    /// [`Refusals::take_due`] if `answered`: `dst`'s answer reaches `src` (a node whose
    /// own datagrams are lost, `NetworkModel::mute`, refuses dials it cannot answer, and
    /// their senders learn nothing). A dial that is not refused brings a connection up.
    pub fn refuses(&mut self, src: NodeId, dst: NodeId, answered: bool) -> bool {
        let key = pair(src, dst);
        if self.links.contains_key(&key) {
            return false;
        }
        let (Some(&g), Some(dead)) = (self.generation.get(src.0 as usize), self.dead.get(dst.0 as usize))
        else {
            return false;
        };
        if dead.get(&src).is_some_and(|d| *d >= g) {
            if answered {
                self.pending.push((src, dst, g));
            }
            self.dropped += 1;
            return true;
        }
        let gens = (self.generation(key.0), self.generation(key.1));
        self.links.insert(key, gens);
        false
    }

    /// Node `at` declared `member`'s `generation` down (its transport forgets it, closing
    /// their connection unless a later generation of `member` dialed it).
    pub fn declared_down(&mut self, at: NodeId, member: NodeId, generation: u32) {
        if let Some(dead) = self.dead.get_mut(at.0 as usize) {
            let d = dead.entry(member).or_insert(generation);
            *d = (*d).max(generation);
        }
        let key = pair(at, member);
        if let Some(&(lo, hi)) = self.links.get(&key) {
            let theirs = if key.0 == member { lo } else { hi };
            if theirs <= generation {
                self.links.remove(&key);
            }
        }
    }

    /// Node `node` restarted as a new process running as `generation`: its connections
    /// are gone, and it holds nothing declared down.
    pub fn restarted(&mut self, node: NodeId, generation: u32) {
        self.links.retain(|(a, b), _| *a != node && *b != node);
        self.renewed(node, generation);
    }

    /// Node `at` holds `member` up (as `Transport::set_addr` does, this lifts what it held
    /// declared down of it).
    pub fn member_up(&mut self, at: NodeId, member: NodeId) {
        if let Some(dead) = self.dead.get_mut(at.0 as usize) {
            dead.remove(&member);
        }
    }

    /// Node `node` runs as `generation` from now on (renewed): it holds no member declared
    /// down any more, and its back-offs start again. Its connections stay up (as the QUIC
    /// transport's `set_generation` leaves them).
    pub fn renewed(&mut self, node: NodeId, generation: u32) {
        let i = node.0 as usize;
        if let Some(g) = self.generation.get_mut(i) {
            *g = generation;
        }
        if let Some(dead) = self.dead.get_mut(i) {
            dead.clear();
        }
        self.told.retain(|(sender, _), _| *sender != node);
    }

    /// The current generation of `node`.
    pub fn generation(&self, node: NodeId) -> u32 {
        self.generation.get(node.0 as usize).copied().unwrap_or(0)
    }

    /// The refusals made since the last call that their senders learn of now: (sender,
    /// refuser, the generation refused), each pair at most once per back-off, in the order
    /// they were made.
    pub fn take_due(&mut self, now: Time) -> Vec<(NodeId, NodeId, u32)> {
        let mut due = Vec::new();
        for (sender, refuser, generation) in std::mem::take(&mut self.pending) {
            let pair = (sender, refuser);
            let (next, backoff) = self
                .told
                .get(&pair)
                .copied()
                .unwrap_or((Time::ZERO, Duration::ZERO));
            if now < next {
                continue;
            }
            let backoff = (backoff * 2).clamp(BACKOFF_MIN, BACKOFF_MAX);
            self.told.insert(pair, (now + backoff, backoff));
            due.push((sender, refuser, generation));
        }
        due
    }

    /// Datagrams dropped by a refusal so far.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

/// The key of the connection between `a` and `b`.
fn pair(a: NodeId, b: NodeId) -> (NodeId, NodeId) {
    (a.min(b), a.max(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dial_of_a_generation_held_down_is_refused_and_told_once_per_backoff() {
        let (a, b) = (NodeId(0), NodeId(1));
        let mut r = Refusals::new(vec![0, 0]);
        r.declared_down(b, a, 0);
        assert!(r.refuses(a, b, true), "b holds a's generation down");
        assert!(r.refuses(a, b, true));
        let t = Time::from_millis(1000);
        assert_eq!(r.take_due(t), vec![(a, b, 0)], "told once for both datagrams");
        assert!(r.refuses(a, b, true));
        assert_eq!(
            r.take_due(t + Duration::from_millis(249)),
            vec![],
            "within the back-off"
        );
        assert!(r.refuses(a, b, true));
        assert_eq!(r.take_due(t + Duration::from_millis(250)), vec![(a, b, 0)]);
        // The back-off doubles: 500 ms after the second.
        assert!(r.refuses(a, b, true));
        assert_eq!(r.take_due(t + Duration::from_millis(700)), vec![]);
        assert!(r.refuses(a, b, true));
        assert_eq!(r.take_due(t + Duration::from_millis(750)), vec![(a, b, 0)]);
        assert_eq!(r.dropped(), 6);
        // a renews: its new generation's dial is accepted.
        r.renewed(a, 1);
        assert!(!r.refuses(a, b, true));
    }

    #[test]
    fn a_refusal_the_refuser_cannot_send_back_is_never_told() {
        let (a, b) = (NodeId(0), NodeId(1));
        let mut r = Refusals::new(vec![0, 0]);
        r.declared_down(b, a, 0);
        assert!(r.refuses(a, b, false), "dropped all the same");
        assert_eq!(r.take_due(Time::from_millis(1000)), vec![]);
        assert!(r.refuses(a, b, true), "b's answers get through again");
        assert_eq!(r.take_due(Time::from_millis(1001)), vec![(a, b, 0)]);
        assert_eq!(r.dropped(), 2);
    }

    #[test]
    fn only_the_acceptor_refuses_and_a_connection_carries_both_ways() {
        let (a, b) = (NodeId(0), NodeId(1));
        let mut r = Refusals::new(vec![0, 0]);
        r.declared_down(b, a, 0);
        // b dials a (a holds nothing down): the connection is up, and a's datagrams to b
        // go over it.
        assert!(!r.refuses(b, a, true));
        assert!(!r.refuses(a, b, true));
        // a declares b down: the connection closes; b's next dial is refused by a, and a's
        // by b.
        r.declared_down(a, b, 0);
        assert!(r.refuses(b, a, true));
        assert!(r.refuses(a, b, true));
        // b sees a up again: a's dial is accepted.
        r.member_up(b, a);
        assert!(!r.refuses(a, b, true));
        assert!(!r.refuses(b, a, true), "over a's connection");
    }

    #[test]
    fn a_connection_to_a_later_generation_survives_the_down_of_an_earlier_one() {
        let (a, b) = (NodeId(0), NodeId(1));
        let mut r = Refusals::new(vec![3, 0]);
        assert!(!r.refuses(a, b, true), "a, generation 3, dials b");
        r.declared_down(b, a, 2);
        assert!(!r.refuses(b, a, true), "still connected");
        r.declared_down(b, a, 3);
        r.declared_down(b, a, 1);
        assert!(
            r.refuses(a, b, true),
            "closed, and a later mark of an older generation lowers nothing"
        );
        // A restart drops its connections and what it held down.
        r.declared_down(a, b, 0);
        r.restarted(a, 4);
        assert!(!r.refuses(b, a, true), "a holds b down no more");
        r.add(0);
        assert_eq!(r.generation(a), 4);
        assert_eq!(r.generation(NodeId(2)), 0);
    }
}
