//! The timed event queue.
//!
//! A 4-ary min-heap orders small keys (time, insertion number, slot); the events themselves
//! wait in a slab of reusable slots, so sifting moves 24 bytes per step instead of a whole
//! event, and a heap four wide is half as deep as a binary one (the queue holds every
//! datagram in flight: thousands of keys, popped once per event). Ties in time go by
//! insertion order, never by the slot, which makes every run reproducible: keys are
//! unique, so the order events come out in is the order of their (time, insertion number)
//! whatever the heap's shape.

use worldmesh_core::Time;

/// A scheduled event's place: when, its insertion number (unique) and its slot in the
/// slab. Ordered by time, then insertion number.
type Key = (Time, u64, usize);

/// Children per heap node.
const ARITY: usize = 4;

/// Events of type `E`, each due at a time, popped earliest first.
#[derive(Debug)]
pub struct EventQueue<E> {
    /// The keys as a 4-ary min-heap on (time, insertion number): the children of `i` are
    /// `4i + 1 ..= 4i + 4`.
    heap: Vec<Key>,
    /// The events, by slot.
    slots: slab::Slab<E>,
    seq: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self {
            heap: Vec::new(),
            slots: slab::Slab::new(),
            seq: 0,
        }
    }
}

/// `a` comes before `b`. Inlined: the heap is generic, so its sifting is compiled in the
/// crates that use it, and a call per comparison showed in profiles.
#[inline]
fn before(a: &Key, b: &Key) -> bool {
    // The same order as `(a.0, a.1) < (b.0, b.1)`, as one 128-bit comparison (no branch
    // between the two halves).
    let order = |k: &Key| (u128::from(k.0.0) << 64) | u128::from(k.1);
    order(a) < order(b)
}

impl<E> EventQueue<E> {
    /// An empty queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// Schedules `event` at `at` (after every event already scheduled at the same time)
    /// and returns its insertion number.
    pub fn push(&mut self, at: Time, event: E) -> u64 {
        self.seq += 1;
        let seq = self.seq;
        self.push_keyed(at, seq, event);
        seq
    }

    /// Takes the next insertion number without scheduling anything: an event that a
    /// parallel round already ran keeps its place in the numbering (see
    /// [`crate::engine::Engine::round`]).
    pub fn reserve(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Schedules `event` at `at` under an insertion number it already had (one taken out
    /// with [`EventQueue::pop_keyed`] and put back, or one [`EventQueue::reserve`]d).
    pub fn push_keyed(&mut self, at: Time, seq: u64, event: E) {
        debug_assert!(seq <= self.seq, "insertion numbers come from this queue");
        let slot = self.slots.insert(event);
        self.sift_up((at, seq, slot));
    }

    /// Appends `key` and moves it up to its place.
    fn sift_up(&mut self, key: Key) {
        let mut i = self.heap.len();
        self.heap.push(key);
        while i > 0 {
            let parent = (i - 1) / ARITY;
            if !before(&key, &self.heap[parent]) {
                break;
            }
            self.heap[i] = self.heap[parent];
            i = parent;
        }
        self.heap[i] = key;
    }

    /// Removes the earliest key.
    fn pop_min(&mut self) -> Option<Key> {
        let last = self.heap.pop()?;
        let Some(&top) = self.heap.first() else {
            return Some(last);
        };
        // Move `last` down from the root, each step to the earliest child.
        let n = self.heap.len();
        let mut i = 0;
        loop {
            let first = ARITY * i + 1;
            if first >= n {
                break;
            }
            let mut best = first;
            for c in first + 1..(first + ARITY).min(n) {
                if before(&self.heap[c], &self.heap[best]) {
                    best = c;
                }
            }
            if !before(&self.heap[best], &last) {
                break;
            }
            self.heap[i] = self.heap[best];
            i = best;
        }
        self.heap[i] = last;
        Some(top)
    }

    /// When the next event is due, if any.
    pub fn next_at(&self) -> Option<Time> {
        self.heap.first().map(|(at, ..)| *at)
    }

    /// The next event if it is due at or before `until`, with its time.
    pub fn pop_due(&mut self, until: Time) -> Option<(Time, E)> {
        if self.next_at()? > until {
            return None;
        }
        self.pop_keyed().map(|(at, _, event)| (at, event))
    }

    /// The next event with its time and insertion number.
    pub fn pop_keyed(&mut self) -> Option<(Time, u64, E)> {
        let (at, seq, slot) = self.pop_min()?;
        let event = self.slots.try_remove(slot)?;
        Some((at, seq, event))
    }

    /// The next event and its time, left in the queue.
    pub fn peek(&self) -> Option<(Time, &E)> {
        let (at, _, slot) = *self.heap.first()?;
        self.slots.get(slot).map(|e| (at, e))
    }

    /// Events waiting.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// True if no event waits.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_first_and_ties_in_insertion_order_whatever_the_slot() {
        let mut q = EventQueue::new();
        q.push(Time::from_millis(5), "a");
        q.push(Time::from_millis(1), "b");
        // Frees slot 1 ("b"), so "c" reuses it although it was inserted after "d"'s slot.
        assert_eq!(q.pop_due(Time::from_millis(1)), Some((Time::from_millis(1), "b")));
        q.push(Time::from_millis(5), "c");
        q.push(Time::from_millis(3), "d");
        assert_eq!(q.pop_due(Time::from_millis(2)), None, "nothing due yet");
        let order: Vec<_> = std::iter::from_fn(|| q.pop_due(Time::from_millis(9)))
            .map(|(_, e)| e)
            .collect();
        assert_eq!(order, ["d", "a", "c"]);
        assert!(q.is_empty());
    }

    /// Pushes and pops in any interleaving come out exactly as from a binary heap of
    /// (time, insertion number): earliest first, ties in insertion order.
    #[test]
    fn pops_in_the_order_of_a_binary_heap_of_time_and_insertion_number() {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let mut rng = worldmesh_core::DetRng::new(11);
        let mut q = EventQueue::new();
        let mut reference = BinaryHeap::new();
        let (mut seq, mut now) = (0u64, 0u64);
        for _ in 0..20_000 {
            if rng.index(5) < 3 {
                // Few distinct times, so ties are common.
                let at = now + rng.index(8) as u64;
                seq += 1;
                q.push(Time(at), seq);
                reference.push(Reverse((at, seq)));
            } else {
                let until = now + rng.index(4) as u64;
                let want = reference
                    .peek()
                    .filter(|Reverse((at, _))| *at <= until)
                    .map(|Reverse((at, s))| (Time(*at), *s));
                if want.is_some() {
                    reference.pop();
                }
                assert_eq!(q.pop_due(Time(until)), want);
                if let Some((at, _)) = want {
                    now = at.0;
                }
            }
            assert_eq!(q.len(), reference.len());
        }
        // Taken out and put back under their own numbers, events keep their order.
        let mut out = Vec::new();
        while out.len() < 50 {
            let Some(e) = q.pop_keyed() else { break };
            out.push(e);
        }
        for (at, s, e) in out.into_iter().rev() {
            q.push_keyed(at, s, e);
        }
        let reserved = q.reserve();
        assert_eq!(reserved, seq + 1, "a reserved number is the next one");
        while let Some(Reverse((at, s))) = reference.pop() {
            assert_eq!(q.pop_due(Time(u64::MAX)), Some((Time(at), s)));
        }
        assert!(q.is_empty());
    }
}
