//! Client-side prediction of the player's own avatar, with server reconciliation.
//!
//! Waiting a round trip before the avatar moves feels sluggish, so the client applies each
//! input to its own copy of the avatar at once and sends the input, numbered, to the server.
//! The server answers with its authoritative state and the number of the last input it applied.
//! The client then takes the server's state and replays on top of it the inputs the server had
//! not yet seen, so the prediction stays both responsive and anchored to the server's truth
//! (the technique lightyear and naia ship; Gambetta, "Fast-Paced Multiplayer").
//!
//! Input sequence numbers are `u32` compared with serial number arithmetic (RFC 1982 style,
//! see [`seq_newer`]), so they may wrap around `u32::MAX`.

use std::collections::VecDeque;

/// Whether sequence number `a` is newer than `b` in serial number arithmetic (RFC 1982 style):
/// `a` is newer iff `a - b`, wrapping, is positive as an `i32`. `u32::MAX` is older than `0`.
///
/// Numbers exactly `2^31` apart are not newer than each other either way.
pub fn seq_newer(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// The smallest capacity a [`Predictor`] accepts.
pub const MIN_CAPACITY: usize = 1;

/// Upper bound on the memory reserved up front, whatever capacity is asked for.
const MAX_PREALLOCATION: usize = 64;

/// An input the server has not acknowledged yet.
#[derive(Debug, Clone)]
struct Pending<I> {
    seq: u32,
    input: I,
    dt: f32,
}

/// Predicts the local player's state from its inputs and reconciles it with the server's.
///
/// `S` is the simulated state, `I` an input; `step(state, input, dt)` must be the same
/// deterministic simulation the server runs, with `dt` in seconds.
#[derive(Debug, Clone)]
pub struct Predictor<S, I> {
    /// The predicted state: the last server state plus every pending input.
    state: S,
    /// The simulation step shared with the server.
    step: fn(&S, &I, f32) -> S,
    /// Inputs not yet acknowledged, in increasing sequence order.
    pending: VecDeque<Pending<I>>,
    /// Most pending inputs kept.
    capacity: usize,
    /// The newest input sequence number accepted (or acknowledged), if any.
    last_seq: Option<u32>,
    /// The newest acknowledgement accepted, if any.
    last_ack: Option<u32>,
    /// Inputs refused because their sequence number was not newer than the last one.
    ignored: u64,
    /// Pending inputs dropped unacknowledged because the buffer was full.
    dropped: u64,
    /// Reconciliations refused because their acknowledgement was older than the last one.
    stale_acks: u64,
}

impl<S, I> Predictor<S, I> {
    /// A predictor starting from `initial`, advancing with `step`, and keeping at most
    /// `capacity` unacknowledged inputs (raised to [`MIN_CAPACITY`] if smaller).
    ///
    /// Size `capacity` for the longest round trip expected: inputs per second times the round
    /// trip in seconds, with a margin.
    pub fn new(initial: S, step: fn(&S, &I, f32) -> S, capacity: usize) -> Self {
        let capacity = capacity.max(MIN_CAPACITY);
        Self {
            state: initial,
            step,
            pending: VecDeque::with_capacity(capacity.min(MAX_PREALLOCATION)),
            capacity,
            last_seq: None,
            last_ack: None,
            ignored: 0,
            dropped: 0,
            stale_acks: 0,
        }
    }

    /// Applies input number `seq`, lasting `dt` seconds, to the predicted state at once and
    /// keeps it for replay until the server acknowledges it. Returns the predicted state.
    ///
    /// An input whose `seq` is not newer than the last input accepted (or the last
    /// acknowledgement) is ignored: the state is unchanged and [`ignored`](Self::ignored)
    /// counts it. When `capacity` inputs are already pending the oldest is dropped and counted
    /// in [`dropped`](Self::dropped); it stays in the current prediction but can no longer be
    /// replayed after the next reconciliation.
    pub fn apply(&mut self, seq: u32, input: I, dt: f32) -> &S {
        if self.last_seq.is_some_and(|last| !seq_newer(seq, last)) {
            self.ignored = self.ignored.saturating_add(1);
            return &self.state;
        }
        self.last_seq = Some(seq);
        self.state = (self.step)(&self.state, &input, dt);
        while self.pending.len() >= self.capacity {
            if self.pending.pop_front().is_none() {
                break;
            }
            self.dropped = self.dropped.saturating_add(1);
        }
        self.pending.push_back(Pending { seq, input, dt });
        &self.state
    }

    /// Takes the server's `server_state`, the state after every input up to and including
    /// `last_applied_seq`: drops the acknowledged inputs, sets the state to the server's and
    /// replays the still-pending inputs in order, each with its recorded `dt`.
    ///
    /// Returns the predicted state from before the reconciliation, so the caller can measure
    /// the correction (`new - old`) and smooth it visually instead of snapping.
    ///
    /// An acknowledgement older than the last one accepted (a reordered server message) is
    /// ignored, counted in [`stale_acks`](Self::stale_acks), and `None` is returned. One equal
    /// to the last is accepted: the server may resend the state after world changes with no
    /// new input applied.
    pub fn reconcile(&mut self, server_state: S, last_applied_seq: u32) -> Option<S> {
        if self.last_ack.is_some_and(|ack| seq_newer(ack, last_applied_seq)) {
            self.stale_acks = self.stale_acks.saturating_add(1);
            return None;
        }
        self.last_ack = Some(last_applied_seq);
        // The server applied inputs we never sent (or no longer know of): later inputs must be
        // newer than those.
        if self.last_seq.is_none_or(|last| seq_newer(last_applied_seq, last)) {
            self.last_seq = Some(last_applied_seq);
        }
        self.pending.retain(|p| seq_newer(p.seq, last_applied_seq));
        let mut state = server_state;
        for p in &self.pending {
            state = (self.step)(&state, &p.input, p.dt);
        }
        Some(std::mem::replace(&mut self.state, state))
    }

    /// The predicted state.
    pub fn predicted(&self) -> &S {
        &self.state
    }

    /// How many inputs await acknowledgement.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// The most pending inputs kept.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The newest input sequence number accepted or acknowledged, if any.
    pub fn last_seq(&self) -> Option<u32> {
        self.last_seq
    }

    /// The newest acknowledgement accepted, if any.
    pub fn last_ack(&self) -> Option<u32> {
        self.last_ack
    }

    /// Inputs ignored so far because their sequence number was not newer than the last one.
    pub fn ignored(&self) -> u64 {
        self.ignored
    }

    /// Pending inputs dropped so far, unacknowledged, because the buffer was full.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Reconciliations ignored so far because their acknowledgement was stale.
    pub fn stale_acks(&self) -> u64 {
        self.stale_acks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 1-D mover: speed 10 units per second times the input.
    fn mover(s: &f32, i: &f32, dt: f32) -> f32 {
        s + i * 10.0 * dt
    }

    /// Three inputs of +1 for 0.5 s each: +5 per input, predicted 15.
    fn three() -> Predictor<f32, f32> {
        let mut p = Predictor::new(0.0, mover, 16);
        assert_eq!(*p.apply(1, 1.0, 0.5), 5.0);
        assert_eq!(*p.apply(2, 1.0, 0.5), 10.0);
        assert_eq!(*p.apply(3, 1.0, 0.5), 15.0);
        p
    }

    #[test]
    fn seq_newer_is_serial_arithmetic() {
        assert!(seq_newer(1, 0));
        assert!(!seq_newer(0, 1));
        assert!(!seq_newer(5, 5));
        assert!(seq_newer(0, u32::MAX));
        assert!(!seq_newer(u32::MAX, 0));
        assert!(seq_newer(10, u32::MAX - 10));
        assert!(!seq_newer(1 << 31, 0));
        assert!(!seq_newer(0, 1 << 31));
    }

    #[test]
    fn apply_advances_immediately() {
        let p = three();
        assert_eq!(*p.predicted(), 15.0);
        assert_eq!(p.pending(), 3);
        assert_eq!(p.last_seq(), Some(3));
    }

    #[test]
    fn reconcile_replays_unacknowledged_inputs() {
        let mut p = three();
        // The server applied input 1 and agrees: 5; inputs 2 and 3 are replayed.
        let before = p.reconcile(5.0, 1);
        assert_eq!(before, Some(15.0));
        assert_eq!(*p.predicted(), 15.0);
        assert_eq!(p.pending(), 2);
        assert_eq!(p.last_ack(), Some(1));
    }

    #[test]
    fn server_disagreement_shifts_by_the_difference() {
        let mut p = three();
        // The server blocked the first move: the state after input 1 is 2 instead of 5.
        let before = p.reconcile(2.0, 1).unwrap_or(f32::NAN);
        assert_eq!(*p.predicted(), 12.0);
        assert_eq!(*p.predicted() - before, -3.0);
        // Later inputs keep building on the corrected state.
        assert_eq!(*p.apply(4, -1.0, 0.5), 7.0);
    }

    #[test]
    fn replay_uses_recorded_dt() {
        let mut p = Predictor::new(0.0, mover, 16);
        p.apply(1, 1.0, 0.25);
        p.apply(2, 1.0, 0.5);
        p.apply(3, -1.0, 0.125);
        assert_eq!(*p.predicted(), 6.25);
        p.reconcile(100.0, 1);
        assert_eq!(*p.predicted(), 103.75);
    }

    #[test]
    fn ack_of_everything_empties_pending() {
        let mut p = three();
        assert_eq!(p.reconcile(14.0, 3), Some(15.0));
        assert_eq!(p.pending(), 0);
        assert_eq!(*p.predicted(), 14.0);
    }

    #[test]
    fn stale_ack_is_ignored() {
        let mut p = three();
        assert_eq!(p.reconcile(10.0, 2), Some(15.0));
        assert_eq!(*p.predicted(), 15.0);
        // A reordered older message: ignored, nothing changes.
        assert_eq!(p.reconcile(0.0, 1), None);
        assert_eq!(*p.predicted(), 15.0);
        assert_eq!(p.pending(), 1);
        assert_eq!(p.stale_acks(), 1);
        assert_eq!(p.last_ack(), Some(2));
        // The same acknowledgement again (world changed, no new input) is accepted.
        assert_eq!(p.reconcile(11.0, 2), Some(15.0));
        assert_eq!(*p.predicted(), 16.0);
    }

    #[test]
    fn old_or_duplicate_inputs_are_ignored() {
        let mut p = three();
        assert_eq!(*p.apply(3, 100.0, 1.0), 15.0);
        assert_eq!(*p.apply(2, 100.0, 1.0), 15.0);
        assert_eq!(p.ignored(), 2);
        assert_eq!(p.pending(), 3);
        // After an acknowledgement ahead of every input sent, older inputs are refused too.
        p.reconcile(0.0, 10);
        assert_eq!(p.pending(), 0);
        assert_eq!(*p.apply(9, 1.0, 0.5), 0.0);
        assert_eq!(p.ignored(), 3);
        assert_eq!(*p.apply(11, 1.0, 0.5), 5.0);
    }

    #[test]
    fn reconcile_before_any_input() {
        let mut p: Predictor<f32, f32> = Predictor::new(0.0, mover, 4);
        assert_eq!(p.reconcile(3.0, 0), Some(0.0));
        assert_eq!(*p.predicted(), 3.0);
        assert_eq!(*p.apply(1, 1.0, 0.5), 8.0);
    }

    #[test]
    fn capacity_bounds_pending() {
        let mut p = Predictor::new(0.0, mover, 2);
        for seq in 1..=5 {
            p.apply(seq, 1.0, 0.5);
            assert!(p.pending() <= 2);
        }
        assert_eq!(p.pending(), 2);
        assert_eq!(p.dropped(), 3);
        assert_eq!(*p.predicted(), 25.0);
        // Only inputs 4 and 5 remain to be replayed.
        p.reconcile(0.0, 2);
        assert_eq!(*p.predicted(), 10.0);
        // Capacity 0 is raised to 1.
        let mut q = Predictor::new(0.0, mover, 0);
        assert_eq!(q.capacity(), 1);
        q.apply(1, 1.0, 0.5);
        q.apply(2, 1.0, 0.5);
        assert_eq!(q.pending(), 1);
        assert_eq!(q.dropped(), 1);
    }

    #[test]
    fn sequence_wraps_around_u32_max() {
        let mut p = Predictor::new(0.0, mover, 16);
        p.apply(u32::MAX - 1, 1.0, 0.5);
        p.apply(u32::MAX, 1.0, 0.5);
        p.apply(0, 1.0, 0.5);
        p.apply(1, 1.0, 0.5);
        assert_eq!(p.pending(), 4);
        assert_eq!(p.ignored(), 0);
        assert_eq!(*p.predicted(), 20.0);
        // An input from before the wrap is now old.
        p.apply(u32::MAX, 1.0, 0.5);
        assert_eq!(p.ignored(), 1);
        // Acknowledging u32::MAX keeps 0 and 1 pending.
        assert_eq!(p.reconcile(10.0, u32::MAX), Some(20.0));
        assert_eq!(p.pending(), 2);
        assert_eq!(*p.predicted(), 20.0);
        // An ack from before the wrap is stale; one after it is not.
        assert_eq!(p.reconcile(0.0, u32::MAX - 1), None);
        assert_eq!(p.reconcile(15.0, 0), Some(20.0));
        assert_eq!(p.pending(), 1);
        assert_eq!(*p.predicted(), 20.0);
    }
}
