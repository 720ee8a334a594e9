//! The timed event queue.
//!
//! Events wait in a slab of reusable slots; the queue orders small keys (time, insertion
//! number, slot), so ordering moves 24 bytes per step instead of a whole event. Ties in
//! time go by insertion order, never by the slot, which makes every run reproducible: keys
//! are unique, so the order events come out in is the order of their (time, insertion
//! number) whatever structure holds them.
//!
//! The keys live in two places: a [`calendar`] of buckets about a millisecond wide spanning
//! about half a second, where nearly every event lands, and a 4-ary [`heap`] for the rest
//! (events due further ahead). Taking the next event compares the two fronts.

mod calendar;
mod heap;

use calendar::Calendar;
use heap::KeyHeap;
use worldmesh_core::Time;

/// A scheduled event's place: when, its insertion number (unique) and its slot in the
/// slab. Ordered by time, then insertion number.
type Key = (Time, u64, usize);

/// The order of `k` as one number: time, then insertion number.
#[inline]
fn order(k: &Key) -> u128 {
    (u128::from(k.0.0) << 64) | u128::from(k.1)
}

/// `a` comes before `b`. Inlined: the queue is generic, so its ordering is compiled in the
/// crates that use it, and a call per comparison showed in profiles.
#[inline]
fn before(a: &Key, b: &Key) -> bool {
    // The same order as `(a.0, a.1) < (b.0, b.1)`, as one 128-bit comparison (no branch
    // between the two halves).
    order(a) < order(b)
}

/// Events of type `E`, each due at a time, popped earliest first.
#[derive(Debug)]
pub struct EventQueue<E> {
    /// Keys due within the calendar's window.
    calendar: Calendar,
    /// The other keys.
    heap: KeyHeap,
    /// The events, by slot.
    slots: slab::Slab<E>,
    seq: u64,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        Self {
            calendar: Calendar::default(),
            heap: KeyHeap::default(),
            slots: slab::Slab::new(),
            seq: 0,
        }
    }
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
        if let Err(key) = self.calendar.push((at, seq, slot)) {
            self.heap.push(key);
        }
    }

    /// The earliest key, and whether it is the heap's.
    fn first(&self) -> Option<(&Key, bool)> {
        match (self.calendar.peek(), self.heap.peek()) {
            (Some(c), Some(h)) if before(h, c) => Some((h, true)),
            (Some(c), _) => Some((c, false)),
            (None, h) => h.map(|h| (h, true)),
        }
    }

    /// Removes the earliest key, from the heap if `from_heap` (as [`EventQueue::first`]
    /// said).
    fn take(&mut self, from_heap: bool) -> Option<Key> {
        let key = if from_heap {
            self.heap.pop()
        } else {
            self.calendar.pop()
        }?;
        self.calendar.passed(&key);
        Some(key)
    }

    /// When the next event is due, if any.
    pub fn next_at(&self) -> Option<Time> {
        self.first().map(|((at, ..), _)| *at)
    }

    /// The next event if it is due at or before `until`, with its time.
    pub fn pop_due(&mut self, until: Time) -> Option<(Time, E)> {
        // One comparison of the two fronts serves the check and the taking.
        let (&(at, ..), from_heap) = self.first()?;
        if at > until {
            return None;
        }
        let key = self.take(from_heap)?;
        self.event_of(key).map(|(at, _, event)| (at, event))
    }

    /// The next event with its time and insertion number.
    pub fn pop_keyed(&mut self) -> Option<(Time, u64, E)> {
        let (_, from_heap) = self.first()?;
        let key = self.take(from_heap)?;
        self.event_of(key)
    }

    /// The event of a key just taken out, with the key's time and insertion number.
    fn event_of(&mut self, (at, seq, slot): Key) -> Option<(Time, u64, E)> {
        let event = self.slots.try_remove(slot)?;
        Some((at, seq, event))
    }

    /// The next event and its time, left in the queue.
    pub fn peek(&self) -> Option<(Time, &E)> {
        let (&(at, _, slot), _) = self.first()?;
        self.slots.get(slot).map(|e| (at, e))
    }

    /// Events waiting.
    pub fn len(&self) -> usize {
        self.calendar.len() + self.heap.len()
    }

    /// True if no event waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
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

    /// Times near and far (within one bucket, within the calendar's window, across its
    /// edge, seconds ahead), events taken out and put back under their own numbers after
    /// the calendar's front has moved past them, and fronts that jump forward over empty
    /// stretches: the queue answers every call as a binary heap of (time, insertion number)
    /// does.
    #[test]
    fn the_calendar_and_the_heap_together_keep_the_order_of_time_and_insertion_number() {
        use std::cmp::Reverse;
        use std::collections::BinaryHeap;
        let window = calendar::WIDTH_US * calendar::BUCKETS as u64;
        for seed in 0..40 {
            let mut rng = worldmesh_core::DetRng::new(seed);
            let mut q = EventQueue::new();
            let mut reference = BinaryHeap::new();
            let mut now = 0u64;
            for _ in 0..4_000 {
                match rng.index(10) {
                    0..=4 => {
                        let ahead = match rng.index(6) {
                            0 => rng.index(8) as u64,
                            1 => rng.index(3 * calendar::WIDTH_US as usize) as u64,
                            2 => rng.index(window as usize + 2_000) as u64,
                            3 => window - 1_000 + rng.index(2_000) as u64,
                            4 => rng.index(5_000_000) as u64,
                            _ => 40_000_000 + rng.index(1_000) as u64,
                        };
                        let seq = q.push(Time(now + ahead), ());
                        reference.push(Reverse((now + ahead, seq)));
                    }
                    5..=7 => {
                        let until = now + rng.index(200_000) as u64;
                        let want = reference
                            .peek()
                            .filter(|Reverse((at, _))| *at <= until)
                            .map(|Reverse((at, s))| (*at, *s));
                        if want.is_some() {
                            reference.pop();
                        }
                        let got = if q.next_at().is_some_and(|t| t <= Time(until)) {
                            q.pop_keyed().map(|(at, s, ())| (at.0, s))
                        } else {
                            None
                        };
                        assert_eq!(got, want, "seed {seed}");
                        if let Some((at, _)) = want {
                            now = at;
                        }
                    }
                    8 => {
                        // A round: events taken out (the front moves on), some put back.
                        let k = rng.index(30);
                        let mut out = Vec::new();
                        for _ in 0..k {
                            let Some(e) = q.pop_keyed() else { break };
                            let Reverse(r) = reference.pop().expect("the reference holds as many");
                            assert_eq!((e.0.0, e.1), r, "seed {seed}");
                            out.push(e);
                        }
                        let keep = rng.index(out.len() + 1);
                        for (at, s, ()) in out.drain(keep..) {
                            q.push_keyed(at, s, ());
                            reference.push(Reverse((at.0, s)));
                        }
                        if let Some((at, ..)) = out.last() {
                            now = now.max(at.0);
                        }
                    }
                    _ => {
                        q.reserve();
                    }
                }
                assert_eq!(q.len(), reference.len(), "seed {seed}");
                let head = reference.peek().map(|Reverse((at, _))| Time(*at));
                assert_eq!(q.next_at(), head, "seed {seed}");
                assert_eq!(q.peek().map(|(at, _)| at), head, "seed {seed}");
            }
            while let Some(Reverse((at, s))) = reference.pop() {
                assert_eq!(
                    q.pop_keyed().map(|(t, n, ())| (t.0, n)),
                    Some((at, s)),
                    "seed {seed}"
                );
            }
            assert!(q.is_empty());
        }
    }

    /// Where keys go. One key far ahead, pushed when nothing waits, goes to the heap, so
    /// the near future after it still lands in the calendar; a key put back before the
    /// calendar's front moves the front back; a key a whole window after the calendar's
    /// earliest goes to the heap, one bucket less does not.
    #[test]
    fn the_calendar_takes_the_near_future_whatever_came_first() {
        let window = calendar::WIDTH_US * calendar::BUCKETS as u64;
        let mut q = EventQueue::new();
        q.push(Time(30_000_000), 'f');
        assert_eq!((q.calendar.len(), q.heap.len()), (0, 1));
        q.push(Time(5_000), 'a');
        q.push(Time(200_000), 'b');
        assert_eq!((q.calendar.len(), q.heap.len()), (2, 1));
        let (at, seq, a) = q.pop_keyed().expect("three wait");
        assert_eq!((at, a), (Time(5_000), 'a'));
        q.push_keyed(at, seq, a);
        assert_eq!(
            (q.calendar.len(), q.heap.len()),
            (2, 1),
            "put back into the calendar"
        );
        q.push(Time(5_000 + window), 'c');
        assert_eq!((q.calendar.len(), q.heap.len()), (2, 2), "a window after 'a'");
        q.push(Time(5_000 + window - calendar::WIDTH_US), 'd');
        assert_eq!((q.calendar.len(), q.heap.len()), (3, 2), "a bucket less");
        let order: Vec<char> = std::iter::from_fn(|| q.pop_keyed().map(|(.., e)| e)).collect();
        assert_eq!(order, ['a', 'b', 'd', 'c', 'f']);
        // The present is now 30 s: an empty calendar takes the half second after it.
        q.push(Time(30_400_000), 'g');
        assert_eq!((q.calendar.len(), q.heap.len()), (1, 0));
    }
}
