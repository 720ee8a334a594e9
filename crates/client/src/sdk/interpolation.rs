//! Snapshot interpolation for remote objects.
//!
//! The server sends timestamped snapshots of each remote object's state. Rendering them as they
//! arrive makes objects stutter (network jitter, lost packets, a low send rate), so the client
//! renders the world a little in the past — `delay_ms` behind the current time — and blends
//! linearly between the two snapshots around that render time. This is the technique lightyear
//! and naia ship for entities the player does not control.
//!
//! [`SnapshotBuffer`] keeps the recent snapshots of ONE object, in time order and bounded in
//! number; [`Interpolate`] says how to blend two states.

use std::collections::VecDeque;

/// A state that can be blended linearly between two values.
pub trait Interpolate {
    /// The value a fraction `t` of the way from `a` to `b`: `a` at `t = 0`, `b` at `t = 1`.
    ///
    /// [`SnapshotBuffer::sample`] only ever calls it with `t` in `[0, 1]`.
    fn interpolate(a: &Self, b: &Self, t: f32) -> Self;
}

impl Interpolate for f32 {
    fn interpolate(a: &Self, b: &Self, t: f32) -> Self {
        a + (b - a) * t
    }
}

impl Interpolate for (f32, f32) {
    fn interpolate(a: &Self, b: &Self, t: f32) -> Self {
        (f32::interpolate(&a.0, &b.0, t), f32::interpolate(&a.1, &b.1, t))
    }
}

impl Interpolate for (f32, f32, f32) {
    fn interpolate(a: &Self, b: &Self, t: f32) -> Self {
        (
            f32::interpolate(&a.0, &b.0, t),
            f32::interpolate(&a.1, &b.1, t),
            f32::interpolate(&a.2, &b.2, t),
        )
    }
}

/// The smallest capacity a [`SnapshotBuffer`] accepts: interpolation needs two snapshots.
pub const MIN_CAPACITY: usize = 2;

/// Upper bound on the memory reserved up front, whatever capacity is asked for (the buffer
/// still grows up to its capacity as snapshots arrive).
const MAX_PREALLOCATION: usize = 64;

/// Timestamped snapshots of one remote object's state, rendered `delay_ms` in the past.
///
/// Times are the server's frame times in milliseconds. Snapshots are kept sorted by time, at
/// most one per time, and at most `capacity` of them (the oldest go first).
#[derive(Debug, Clone)]
pub struct SnapshotBuffer<T> {
    /// How far behind `now` the buffer renders, in milliseconds.
    delay_ms: u64,
    /// Most snapshots kept (at least [`MIN_CAPACITY`]).
    capacity: usize,
    /// `(time_ms, state)`, strictly increasing in time.
    snapshots: VecDeque<(u64, T)>,
}

impl<T> SnapshotBuffer<T> {
    /// An empty buffer rendering `delay_ms` behind the time given to [`sample`](Self::sample)
    /// and keeping at most `capacity` snapshots (raised to [`MIN_CAPACITY`] if smaller).
    ///
    /// A delay of about two server send intervals keeps a snapshot on each side of the render
    /// time even when one update is lost.
    pub fn new(delay_ms: u64, capacity: usize) -> Self {
        let capacity = capacity.max(MIN_CAPACITY);
        Self {
            delay_ms,
            capacity,
            snapshots: VecDeque::with_capacity(capacity.min(MAX_PREALLOCATION)),
        }
    }

    /// The interpolation delay in milliseconds.
    pub fn delay_ms(&self) -> u64 {
        self.delay_ms
    }

    /// The most snapshots kept.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Records the object's state at server time `time_ms`.
    ///
    /// - A snapshot arriving out of order is inserted at its place in time.
    /// - A snapshot for a time already held replaces the held one (the newest message wins).
    /// - When the buffer is full, a snapshot older than the oldest kept is dropped (it would be
    ///   the one evicted anyway); otherwise the oldest snapshot is evicted to make room.
    pub fn push(&mut self, time_ms: u64, state: T) {
        let full = self.snapshots.len() >= self.capacity;
        if full && self.snapshots.front().is_some_and(|(t, _)| time_ms < *t) {
            return;
        }
        // First index whose time is not before `time_ms`.
        let at = self.snapshots.partition_point(|(t, _)| *t < time_ms);
        match self.snapshots.get_mut(at) {
            Some(slot) if slot.0 == time_ms => {
                slot.1 = state;
                return;
            }
            _ => self.snapshots.insert(at, (time_ms, state)),
        }
        while self.snapshots.len() > self.capacity {
            self.snapshots.pop_front();
        }
    }

    /// The newest snapshot, with its time.
    pub fn latest(&self) -> Option<(u64, &T)> {
        self.snapshots.back().map(|(t, s)| (*t, s))
    }

    /// The oldest snapshot kept, with its time.
    pub fn oldest(&self) -> Option<(u64, &T)> {
        self.snapshots.front().map(|(t, s)| (*t, s))
    }

    /// How many snapshots are held.
    pub fn len(&self) -> usize {
        self.snapshots.len()
    }

    /// Whether no snapshot is held.
    pub fn is_empty(&self) -> bool {
        self.snapshots.is_empty()
    }

    /// Forgets every snapshot (e.g. when the object leaves the area of interest or teleports).
    pub fn clear(&mut self) {
        self.snapshots.clear();
    }
}

impl<T: Interpolate + Clone> SnapshotBuffer<T> {
    /// The state to render at local time `now_ms` (on the server's clock), or `None` when no
    /// snapshot is held.
    ///
    /// The render time is `now_ms - delay_ms` (saturating at 0). Between two snapshots the
    /// state is interpolated linearly; before the first snapshot the first is returned; after
    /// the last the last is held.
    ///
    /// There is deliberately no extrapolation past the last snapshot: guessing ahead overshoots
    /// whenever the object turns or stops, and the correction when the next snapshot arrives is
    /// a visible snap back. Holding the last state only freezes the object until data arrives,
    /// and a large enough `delay_ms` makes that rare.
    pub fn sample(&self, now_ms: u64) -> Option<T> {
        let render = now_ms.saturating_sub(self.delay_ms);
        // First index whose time is after the render time.
        let next = self.snapshots.partition_point(|(t, _)| *t <= render);
        let Some(prev) = next.checked_sub(1) else {
            // Before the first snapshot (or none at all).
            return self.snapshots.front().map(|(_, s)| s.clone());
        };
        match (self.snapshots.get(prev), self.snapshots.get(next)) {
            (Some((ta, a)), Some((tb, b))) => {
                // ta <= render < tb, so the span is positive and t lies in [0, 1).
                let span = tb.saturating_sub(*ta);
                let into = render.saturating_sub(*ta);
                let t = if span == 0 {
                    0.0
                } else {
                    (into as f64 / span as f64).clamp(0.0, 1.0) as f32
                };
                Some(T::interpolate(a, b, t))
            }
            // At or after the last snapshot: hold it.
            (Some((_, a)), None) => Some(a.clone()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Snapshots at 0 ms (x = 0) and 100 ms (x = 10), delay 100 ms.
    fn two() -> SnapshotBuffer<f32> {
        let mut b = SnapshotBuffer::new(100, 8);
        b.push(0, 0.0);
        b.push(100, 10.0);
        b
    }

    #[test]
    fn midpoint_is_exact() {
        let b = two();
        assert_eq!(b.sample(150), Some(5.0));
        assert_eq!(b.sample(125), Some(2.5));
        assert_eq!(b.sample(100), Some(0.0));
        assert_eq!(b.sample(200), Some(10.0));
    }

    #[test]
    fn empty_samples_none() {
        let b: SnapshotBuffer<f32> = SnapshotBuffer::new(100, 8);
        assert_eq!(b.sample(0), None);
        assert_eq!(b.sample(u64::MAX), None);
        assert!(b.is_empty());
        assert_eq!(b.latest(), None);
    }

    #[test]
    fn single_snapshot_is_returned_everywhere() {
        let mut b = SnapshotBuffer::new(100, 8);
        b.push(500, 7.0_f32);
        assert_eq!(b.sample(0), Some(7.0));
        assert_eq!(b.sample(600), Some(7.0));
        assert_eq!(b.sample(u64::MAX), Some(7.0));
    }

    #[test]
    fn before_first_returns_first() {
        let mut b = SnapshotBuffer::new(100, 8);
        b.push(1_000, 3.0_f32);
        b.push(1_100, 4.0);
        // Render time 0 (saturated) and 999: both before the first snapshot.
        assert_eq!(b.sample(50), Some(3.0));
        assert_eq!(b.sample(1_099), Some(3.0));
        assert_eq!(b.sample(1_100), Some(3.0));
    }

    #[test]
    fn after_last_holds_last() {
        let b = two();
        assert_eq!(b.sample(201), Some(10.0));
        assert_eq!(b.sample(10_000), Some(10.0));
        assert_eq!(b.sample(u64::MAX), Some(10.0));
    }

    #[test]
    fn out_of_order_matches_in_order() {
        let times = [0_u64, 50, 100, 150, 200];
        let values = [0.0_f32, 4.0, 10.0, 12.0, 20.0];
        let mut ordered = SnapshotBuffer::new(100, 8);
        for (t, v) in times.iter().zip(values) {
            ordered.push(*t, v);
        }
        let mut shuffled = SnapshotBuffer::new(100, 8);
        for i in [3_usize, 0, 4, 2, 1] {
            shuffled.push(times[i], values[i]);
        }
        assert_eq!(shuffled.len(), 5);
        for now in (0..=400).step_by(5) {
            assert_eq!(ordered.sample(now), shuffled.sample(now), "now = {now}");
        }
        assert_eq!(shuffled.sample(175), Some(7.0));
        assert_eq!(shuffled.latest(), Some((200, &20.0)));
        assert_eq!(shuffled.oldest(), Some((0, &0.0)));
    }

    #[test]
    fn duplicate_time_replaces() {
        let mut b = two();
        b.push(100, 20.0);
        assert_eq!(b.len(), 2);
        assert_eq!(b.sample(150), Some(10.0));
        assert_eq!(b.latest(), Some((100, &20.0)));
    }

    #[test]
    fn capacity_bound_drops_oldest() {
        let mut b = SnapshotBuffer::new(0, 3);
        for t in 0..10_u64 {
            b.push(t * 10, t as f32);
            assert!(b.len() <= 3);
        }
        assert_eq!(b.len(), 3);
        assert_eq!(b.oldest(), Some((70, &7.0)));
        // Older than the oldest kept while full: dropped.
        b.push(5, 99.0);
        assert_eq!(b.len(), 3);
        assert_eq!(b.oldest(), Some((70, &7.0)));
        // Before the oldest kept, the oldest is returned.
        assert_eq!(b.sample(0), Some(7.0));
        // An out-of-order one inside the window still goes in, evicting the oldest.
        b.push(85, 8.5);
        assert_eq!(b.len(), 3);
        assert_eq!(b.oldest(), Some((80, &8.0)));
        assert_eq!(b.sample(85), Some(8.5));
    }

    #[test]
    fn capacity_is_clamped_to_two() {
        let mut b = SnapshotBuffer::new(0, 0);
        assert_eq!(b.capacity(), 2);
        b.push(0, 0.0_f32);
        b.push(10, 1.0);
        b.push(20, 2.0);
        assert_eq!(b.len(), 2);
        assert_eq!(b.sample(15), Some(1.5));
        // A huge capacity does not reserve huge memory up front.
        let big: SnapshotBuffer<f32> = SnapshotBuffer::new(0, usize::MAX);
        assert_eq!(big.capacity(), usize::MAX);
    }

    #[test]
    fn tuple_2d_interpolates_componentwise() {
        let mut b = SnapshotBuffer::new(100, 8);
        b.push(0, (0.0_f32, 10.0_f32));
        b.push(100, (10.0, -10.0));
        assert_eq!(b.sample(150), Some((5.0, 0.0)));
        assert_eq!(b.sample(175), Some((7.5, -5.0)));
    }

    #[test]
    fn tuple_3d_interpolates_componentwise() {
        let a = (0.0_f32, 2.0_f32, -4.0_f32);
        let b = (4.0_f32, 6.0_f32, 4.0_f32);
        assert_eq!(Interpolate::interpolate(&a, &b, 0.25), (1.0, 3.0, -2.0));
        assert_eq!(Interpolate::interpolate(&a, &b, 0.0), a);
    }

    #[test]
    fn jump_across_three_snapshots_picks_right_pair() {
        let mut b = SnapshotBuffer::new(100, 8);
        b.push(0, 0.0_f32);
        b.push(100, 10.0);
        b.push(200, 30.0);
        // Render time 150: between the first pair.
        assert_eq!(b.sample(250), Some(20.0));
        // Jumping straight to render time 50 and back picks the first pair.
        assert_eq!(b.sample(150), Some(5.0));
        // Render time exactly on the middle snapshot.
        assert_eq!(b.sample(200), Some(10.0));
        // Render time 175: second pair.
        assert_eq!(b.sample(275), Some(25.0));
    }

    #[test]
    fn delay_saturates_and_large_times_work() {
        let mut b = SnapshotBuffer::new(u64::MAX, 4);
        b.push(u64::MAX - 100, 0.0_f32);
        b.push(u64::MAX, 10.0);
        // Render time saturates to 0: before the first.
        assert_eq!(b.sample(5), Some(0.0));
        let mut c = SnapshotBuffer::new(0, 4);
        c.push(u64::MAX - 100, 0.0_f32);
        c.push(u64::MAX, 10.0);
        assert_eq!(c.sample(u64::MAX - 50), Some(5.0));
        assert_eq!(c.sample(u64::MAX), Some(10.0));
    }

    #[test]
    fn clear_empties() {
        let mut b = two();
        b.clear();
        assert!(b.is_empty());
        assert_eq!(b.len(), 0);
        assert_eq!(b.sample(150), None);
    }
}
