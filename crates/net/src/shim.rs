//! In-process WAN emulation for outgoing datagrams (no netem on this kernel).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};
use worldmesh_core::{DetRng, LatencyMatrix, NodeId};

/// A queued datagram: (release time, tie-breaking sequence, destination, bytes).
type Pending = Reverse<(Instant, u64, u32, Vec<u8>)>;

/// Delays each outgoing datagram by the one-way delay (RTT/2) between this node's matrix
/// row and the destination's, and drops a fraction `loss` of them. Rows are mapped with
/// [`LatencyMatrix::map_nodes`] from the cluster seed, as in the simulator.
pub struct DelayShim {
    me: usize,
    rows: Vec<usize>,
    matrix: LatencyMatrix,
    loss: f64,
    rng: DetRng,
    queue: BinaryHeap<Pending>,
    seq: u64,
    /// Datagrams dropped by emulated loss.
    pub dropped: u64,
}

impl std::fmt::Debug for DelayShim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DelayShim")
            .field("me", &self.me)
            .field("loss", &self.loss)
            .field("queued", &self.queue.len())
            .finish_non_exhaustive()
    }
}

impl DelayShim {
    /// A shim for node `me` of a `nodes`-node cluster seeded with `seed`.
    pub fn new(matrix: LatencyMatrix, nodes: usize, me: NodeId, seed: u64, loss: f64) -> Self {
        let mut draw = DetRng::new(seed).fork(0x6e65_7477);
        let rows = matrix.map_nodes(nodes, &mut draw);
        Self {
            me: me.0 as usize,
            rows,
            matrix,
            loss: loss.clamp(0.0, 1.0),
            rng: DetRng::new(seed).fork(0x7368_696d ^ u64::from(me.0)),
            queue: BinaryHeap::new(),
            seq: 0,
            dropped: 0,
        }
    }

    /// The emulated one-way delay to `dst` (zero for unknown nodes).
    pub fn delay(&self, dst: NodeId) -> Duration {
        match (self.rows.get(self.me), self.rows.get(dst.0 as usize)) {
            (Some(a), Some(b)) => self.matrix.one_way(*a, *b),
            _ => Duration::ZERO,
        }
    }

    /// Queues a datagram sent at `now` (or drops it).
    pub fn push(&mut self, now: Instant, dst: NodeId, datagram: Vec<u8>) {
        if self.rng.chance(self.loss) {
            self.dropped += 1;
            return;
        }
        self.seq += 1;
        self.queue
            .push(Reverse((now + self.delay(dst), self.seq, dst.0, datagram)));
    }

    /// When the next datagram is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.queue.peek().map(|Reverse((t, ..))| *t)
    }

    /// Pops a datagram due at or before `now`.
    pub fn pop_due(&mut self, now: Instant) -> Option<(NodeId, Vec<u8>)> {
        if self.next_due()? > now {
            return None;
        }
        self.queue.pop().map(|Reverse((_, _, dst, d))| (NodeId(dst), d))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_by_half_rtt_and_drops_at_the_loss_rate() {
        let m = LatencyMatrix::uniform(4, 100.0);
        let mut s = DelayShim::new(m, 4, NodeId(0), 1, 0.0);
        let t0 = Instant::now();
        s.push(t0, NodeId(1), vec![1]);
        assert_eq!(s.next_due(), Some(t0 + Duration::from_millis(50)));
        assert_eq!(s.pop_due(t0 + Duration::from_millis(49)), None);
        assert_eq!(
            s.pop_due(t0 + Duration::from_millis(50)),
            Some((NodeId(1), vec![1]))
        );
        let mut lossy = DelayShim::new(LatencyMatrix::uniform(2, 1.0), 2, NodeId(0), 1, 0.3);
        for _ in 0..10_000 {
            lossy.push(t0, NodeId(1), vec![]);
        }
        assert!((2_700..3_300).contains(&lossy.dropped), "{}", lossy.dropped);
    }
}
