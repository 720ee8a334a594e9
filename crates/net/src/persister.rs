//! Performs the node's persistence effects (issue 19): the store batches
//! [`worldmesh_node::Node::poll_persist`] hands out are applied on a thread of their own,
//! in order, never on the frame loop's thread, and each completion is reported back to the
//! driver, which tells the node ([`worldmesh_node::Node::handle_persisted`]).
//!
//! A batch that fails to apply is fatal: the node would otherwise acknowledge durable
//! writes that are not on disk. The driver stops with [`crate::NetError::Store`].

use std::sync::mpsc as std_mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use worldmesh_node::PersistRequest;
use worldmesh_store::{Store, StoreError};

/// A completed batch: its id, the outcome, and how long applying it took.
pub(crate) type Completion = (u64, Result<(), StoreError>, Duration);

/// Most apply times kept for the quantiles (the oldest are overwritten beyond).
const MAX_SAMPLES: usize = 1 << 16;

/// The store's thread and the channels to and from it.
pub(crate) struct Persister {
    tx: Option<std_mpsc::Sender<PersistRequest>>,
    done: mpsc::UnboundedReceiver<Completion>,
    thread: Option<JoinHandle<()>>,
    /// Batches sent and not yet completed.
    in_flight: usize,
    /// Most batches waiting at once.
    max_queued: usize,
    times: ApplyTimes,
}

/// Every batch's apply time, in whole microseconds: the report's and the metrics
/// endpoint's figures are all taken from these integers, converted the same way, so a
/// quantile never exceeds the maximum by a rounding.
#[derive(Default)]
struct ApplyTimes {
    /// Batches applied.
    batches: u64,
    /// The newest [`MAX_SAMPLES`] apply times (a ring once full).
    samples: Vec<u32>,
    /// Where the next sample overwrites, once the ring is full.
    next_sample: usize,
    /// Sum of every apply time.
    sum_us: u64,
    /// Longest apply time.
    max_us: u32,
}

/// How the store kept up: batches applied and how long each took.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PersistTimes {
    /// Batches applied.
    pub batches: u64,
    /// Median time to apply a batch (fsync included), milliseconds.
    pub apply_p50_ms: f64,
    /// 99th percentile, milliseconds.
    pub apply_p99_ms: f64,
    /// Longest, milliseconds.
    pub apply_max_ms: f64,
    /// Most batches waiting at once.
    pub max_queued: usize,
}

impl Persister {
    /// Starts the store's thread.
    pub(crate) fn start(mut store: Store) -> std::io::Result<Self> {
        let (tx, rx) = std_mpsc::channel::<PersistRequest>();
        let (done_tx, done) = mpsc::unbounded_channel();
        let thread = std::thread::Builder::new()
            .name("worldmesh-store".into())
            .spawn(move || {
                for r in rx {
                    let t0 = Instant::now();
                    // A panic inside the engine comes back as an error (`Store::apply`).
                    let res = store.apply(&r.batch);
                    let failed = res.is_err();
                    if done_tx.send((r.id, res, t0.elapsed())).is_err() || failed {
                        return;
                    }
                }
            })?;
        Ok(Self {
            tx: Some(tx),
            done,
            thread: Some(thread),
            in_flight: 0,
            max_queued: 0,
            times: ApplyTimes::default(),
        })
    }

    /// Queues a batch for the store's thread.
    pub(crate) fn send(&mut self, r: PersistRequest) {
        if let Some(tx) = &self.tx
            && tx.send(r).is_ok()
        {
            self.in_flight += 1;
            self.max_queued = self.max_queued.max(self.in_flight);
        }
    }

    /// The next completion. After the thread ended (a failure, already reported, or
    /// [`Persister::finish`]) nothing more comes: pending forever.
    pub(crate) async fn recv(&mut self) -> Option<Completion> {
        match self.done.recv().await {
            Some(c) => {
                self.record(c.2);
                Some(c)
            }
            None => std::future::pending().await,
        }
    }

    fn record(&mut self, took: Duration) {
        self.in_flight = self.in_flight.saturating_sub(1);
        self.times.record(took);
    }

    /// Waits until every queued batch is applied (the run is ending) and returns their
    /// completions; the thread ends.
    pub(crate) fn finish(&mut self) -> Vec<Completion> {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let mut out = Vec::new();
        while let Ok(c) = self.done.try_recv() {
            self.record(c.2);
            out.push(c);
        }
        out
    }

    /// The metrics endpoint's view: batches applied, in flight, apply-time quantiles over
    /// the last `window` batches (a sort of at most `window` numbers), sum and maximum.
    pub(crate) fn metrics(&self, window: usize) -> crate::metrics::StoreMetrics {
        crate::metrics::StoreMetrics {
            in_flight: self.in_flight,
            ..self.times.metrics(window)
        }
    }

    /// Apply times so far.
    pub(crate) fn times(&self) -> PersistTimes {
        PersistTimes {
            max_queued: self.max_queued,
            ..self.times.report()
        }
    }
}

impl ApplyTimes {
    fn record(&mut self, took: Duration) {
        self.batches += 1;
        let us = took.as_micros().min(u128::from(u32::MAX)) as u32;
        self.sum_us = self.sum_us.saturating_add(u64::from(us));
        self.max_us = self.max_us.max(us);
        if self.samples.len() < MAX_SAMPLES {
            self.samples.push(us);
        } else {
            self.samples[self.next_sample] = us;
            self.next_sample = (self.next_sample + 1) % MAX_SAMPLES;
        }
    }

    /// Quantiles over the newest `window` batches, seconds (`in_flight` and the node's
    /// counters left at zero).
    fn metrics(&self, window: usize) -> crate::metrics::StoreMetrics {
        let mut recent = newest(&self.samples, self.next_sample, window);
        recent.sort_unstable();
        crate::metrics::StoreMetrics {
            batches: self.batches,
            apply_p50_s: quantile_us(&recent, 0.5) / 1e6,
            apply_p99_s: quantile_us(&recent, 0.99) / 1e6,
            apply_sum_s: self.sum_us as f64 / 1e6,
            apply_max_s: f64::from(self.max_us) / 1e6,
            ..Default::default()
        }
    }

    /// Quantiles over every kept sample, milliseconds (`max_queued` left at zero).
    fn report(&self) -> PersistTimes {
        let mut s = self.samples.clone();
        s.sort_unstable();
        PersistTimes {
            batches: self.batches,
            apply_p50_ms: quantile_us(&s, 0.5) / 1000.0,
            apply_p99_ms: quantile_us(&s, 0.99) / 1000.0,
            apply_max_ms: f64::from(self.max_us) / 1000.0,
            max_queued: 0,
        }
    }
}

/// The `p` quantile (0..=1, nearest rank rounded) of `sorted` apply times in
/// microseconds; 0 when there are none.
fn quantile_us(sorted: &[u32], p: f64) -> f64 {
    let Some(last) = sorted.len().checked_sub(1) else {
        return 0.0;
    };
    let i = (last as f64 * p).round() as usize;
    f64::from(sorted[i.min(last)])
}

/// The newest `window` of `samples` (any order): the last ones pushed while the buffer
/// is filling, and the ones before `next` (where the next overwrite goes) once it is a
/// full ring of [`MAX_SAMPLES`].
fn newest(samples: &[u32], next: usize, window: usize) -> Vec<u32> {
    let n = samples.len();
    let take = window.min(n);
    if n < MAX_SAMPLES {
        return samples[n - take..].to_vec();
    }
    (1..=take).map(|k| samples[(next + n - k) % n]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The slowest batch is the 99th percentile of a few: the endpoint's p99 and maximum
    /// are then the same number (1,144 µs once came out as p99 0.001144 s above a
    /// maximum of 0.0011439999999999998 s, converted through milliseconds), and so are the
    /// report's.
    #[test]
    fn quantiles_never_exceed_the_maximum_by_a_rounding() {
        for slowest in [1_144, 1_001, 999_999, 3, u32::MAX] {
            let mut t = ApplyTimes::default();
            for us in [slowest / 3, slowest / 2, slowest] {
                t.record(Duration::from_micros(u64::from(us)));
            }
            let m = t.metrics(crate::metrics::STORE_WINDOW);
            assert_eq!(m.apply_p99_s, m.apply_max_s, "{slowest} µs");
            assert!(m.apply_p50_s <= m.apply_p99_s && m.apply_max_s <= m.apply_sum_s);
            let r = t.report();
            assert_eq!(r.apply_p99_ms, r.apply_max_ms, "{slowest} µs");
            assert_eq!((m.batches, r.batches), (3, 3));
        }
    }

    #[test]
    fn the_newest_samples_are_taken_while_filling_and_across_the_ring() {
        let filling: Vec<u32> = (1..=10).collect();
        let mut got = newest(&filling, 0, 4);
        got.sort_unstable();
        assert_eq!(got, vec![7, 8, 9, 10]);
        assert_eq!(newest(&filling, 0, 100).len(), 10);
        drop(filling);
        // A full ring whose next overwrite is at index 3: the newest are at 2, 1, 0 and
        // then wrap to the end.
        let mut ring: Vec<u32> = (0..MAX_SAMPLES as u32).collect();
        for (k, v) in ring.iter_mut().take(3).enumerate() {
            *v = 1_000_000 + k as u32;
        }
        let mut got = newest(&ring, 3, 5);
        got.sort_unstable();
        let last = MAX_SAMPLES as u32 - 1;
        assert_eq!(got, vec![last - 1, last, 1_000_000, 1_000_001, 1_000_002]);
    }
}
