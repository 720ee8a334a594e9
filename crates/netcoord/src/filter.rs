//! Per-peer latency filter: the moving median of the last few RTT samples.
//!
//! Raw RTT samples have heavy upper tails (queueing, scheduling on busy hosts). Ledlie,
//! Gardner and Seltzer ("Network Coordinates in the Wild", NSDI 2007, §4) show that
//! feeding Vivaldi a short moving *percentile* of each link's samples instead of the raw
//! sample removes most of the instability; worldmesh uses the median of the last
//! `window` samples of each peer (a window of 1 disables filtering). For an even number
//! of samples the median is the mean of the two middle ones.
//!
//! Memory is bounded: at most `capacity` peers are tracked; when a new peer arrives at
//! capacity, the peer heard from least recently is forgotten (peers are untrusted input).

use std::collections::HashMap;
use std::hash::Hash;

/// Largest filter window accepted.
pub const MAX_WINDOW: usize = 32;

#[derive(Clone, Debug)]
struct Ring {
    samples: [f64; MAX_WINDOW],
    len: usize,
    next: usize,
    last_use: u64,
}

/// Moving-median filter of RTT samples, one ring buffer per peer (see the module doc).
#[derive(Clone, Debug)]
pub struct LatencyFilter<P> {
    window: usize,
    capacity: usize,
    clock: u64,
    peers: HashMap<P, Ring>,
}

impl<P: Eq + Hash + Clone> LatencyFilter<P> {
    /// A filter keeping the last `window` samples (clamped to `1..=MAX_WINDOW`) of at
    /// most `capacity` peers (at least 1).
    pub fn new(window: usize, capacity: usize) -> Self {
        Self {
            window: window.clamp(1, MAX_WINDOW),
            capacity: capacity.max(1),
            clock: 0,
            peers: HashMap::new(),
        }
    }

    /// Window length in samples.
    pub fn window(&self) -> usize {
        self.window
    }

    /// Number of peers currently tracked.
    pub fn tracked(&self) -> usize {
        self.peers.len()
    }

    /// Records a sample from `peer` and returns the median of its last `window` samples
    /// (this one included).
    pub fn push(&mut self, peer: P, rtt_ms: f64) -> f64 {
        self.clock += 1;
        if !self.peers.contains_key(&peer) && self.peers.len() >= self.capacity {
            let oldest = self
                .peers
                .iter()
                .min_by_key(|(_, r)| r.last_use)
                .map(|(p, _)| p.clone());
            if let Some(p) = oldest {
                self.peers.remove(&p);
            }
        }
        let window = self.window;
        let ring = self.peers.entry(peer).or_insert(Ring {
            samples: [0.0; MAX_WINDOW],
            len: 0,
            next: 0,
            last_use: 0,
        });
        ring.samples[ring.next] = rtt_ms;
        ring.next = (ring.next + 1) % window;
        ring.len = (ring.len + 1).min(window);
        ring.last_use = self.clock;
        let mut sorted = [0.0f64; MAX_WINDOW];
        sorted[..ring.len].copy_from_slice(&ring.samples[..ring.len]);
        let s = &mut sorted[..ring.len];
        s.sort_by(f64::total_cmp);
        let n = s.len();
        if n % 2 == 1 {
            s[n / 2]
        } else {
            0.5 * (s[n / 2 - 1] + s[n / 2])
        }
    }

    /// Forgets a peer's samples.
    pub fn forget(&mut self, peer: &P) {
        self.peers.remove(peer);
    }

    /// Forgets every peer.
    pub fn clear(&mut self) {
        self.peers.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_recent_samples_ignores_a_spike() {
        let mut f = LatencyFilter::new(3, 10);
        assert_eq!(f.push(1u32, 10.0), 10.0);
        assert_eq!(f.push(1, 100.0), 55.0); // two samples: mean of the middle pair
        assert_eq!(f.push(1, 12.0), 12.0); // {10, 100, 12}
        assert_eq!(f.push(1, 11.0), 12.0); // {100, 12, 11}: the oldest (10) left
        assert_eq!(f.push(1, 13.0), 12.0); // {12, 11, 13}: the spike is gone
        // Another peer has its own window.
        assert_eq!(f.push(2, 50.0), 50.0);
    }

    #[test]
    fn window_one_is_no_filtering() {
        let mut f = LatencyFilter::new(1, 10);
        assert_eq!(f.push("a", 5.0), 5.0);
        assert_eq!(f.push("a", 500.0), 500.0);
    }

    #[test]
    fn capacity_bounds_memory_and_evicts_least_recent() {
        let mut f = LatencyFilter::new(5, 2);
        f.push(1u32, 10.0);
        f.push(2, 20.0);
        f.push(1, 10.0); // 2 is now the least recently used
        f.push(3, 30.0);
        assert_eq!(f.tracked(), 2);
        // Peer 2 was forgotten: its next sample starts a fresh window.
        assert_eq!(f.push(2, 40.0), 40.0);
        // Peer 1 was evicted by that insertion (least recent), 3 still has its sample.
        assert_eq!(f.push(3, 50.0), 40.0);
    }
}
