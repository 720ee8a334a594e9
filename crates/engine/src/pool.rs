//! The threads of parallel rounds, and how they wait for one another.
//!
//! A round runs one group of machines on the calling thread and the others on a pool of
//! threads (`crate::parallel`). A round of the 32-node `dht` world lasts about 1 ms, and
//! between two rounds the calling thread merges the groups' logs alone (about 50 µs). A
//! thread that waits by sleeping in the kernel takes tens of µs to wake, twice a round:
//! measured on the 32-node world (20 s of game time, 2 threads, 1,000 rounds), the pool's
//! thread started its group 56 µs after it was handed out, on average, while the calling
//! thread's own group took 0.75 ms. So the threads wait here by yielding their core
//! instead, for a bounded time:
//!
//! - after its own group, the calling thread yields until the pool's groups are done (at
//!   most [`WAIT_YIELDING`]), and only then blocks;
//! - after a round, each pool thread runs a job that yields until the next round starts (at
//!   most [`STAY_AWAKE`]), so it takes the next round's group at once.
//!
//! Yielding, not spinning: on an otherwise idle core `yield_now` returns at once, while on
//! a busy machine (more threads than cores) it hands the core to whoever can run. Wall
//! time bounds only how long a thread waits; what a round computes never depends on it.
//! Measured (crates/sim/PERFORMANCE.md, "Threads that wait awake"), `dht` on two threads:
//! −13 % wall time at 32 nodes, −4 % at 16, −3 % at 128, level at 64 (where the calling
//! thread's group is the slower one).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long the calling thread waits for the pool's groups by yielding before it blocks.
pub const WAIT_YIELDING: Duration = Duration::from_millis(2);

/// How long a pool thread stays awake after a round, waiting for the next one.
pub const STAY_AWAKE: Duration = Duration::from_millis(1);

/// The pool threads of parallel rounds.
pub(crate) struct Pool {
    threads: rayon::ThreadPool,
    /// Rounds started: a pool thread staying awake stops when this moves on.
    rounds: Arc<AtomicU64>,
}

impl Pool {
    /// `workers` threads named `engine-<i>`; `None` if the system refuses threads.
    pub(crate) fn new(workers: usize) -> Option<Self> {
        let threads = rayon::ThreadPoolBuilder::new()
            .num_threads(workers)
            .thread_name(|i| format!("engine-{i}"))
            .build()
            .ok()?;
        Some(Self {
            threads,
            rounds: Arc::new(AtomicU64::new(0)),
        })
    }

    /// The pool's threads (the calling thread not counted).
    pub(crate) fn workers(&self) -> usize {
        self.threads.current_num_threads()
    }

    /// Runs `first` on the calling thread and every job of `rest` on the pool's threads,
    /// and returns when all have returned; then keeps the pool's threads awake for the next
    /// round (see the module docs).
    pub(crate) fn run<'s, F, G>(&self, first: F, rest: impl IntoIterator<Item = G>)
    where
        F: FnOnce(),
        G: FnOnce() + Send + 's,
    {
        self.rounds.fetch_add(1, Ordering::Release);
        let done = AtomicUsize::new(0);
        let done = &done;
        self.threads.in_place_scope(|scope| {
            let mut handed = 0;
            for job in rest {
                handed += 1;
                scope.spawn(move |_| {
                    job();
                    done.fetch_add(1, Ordering::Release);
                });
            }
            first();
            yield_while(WAIT_YIELDING, || done.load(Ordering::Acquire) < handed);
        });
        let round = self.rounds.load(Ordering::Acquire);
        for _ in 0..self.workers() {
            let rounds = Arc::clone(&self.rounds);
            self.threads
                .spawn(move || yield_while(STAY_AWAKE, || rounds.load(Ordering::Acquire) == round));
        }
    }
}

/// Yields the core while `waiting` holds, for at most `bound`.
fn yield_while(bound: Duration, waiting: impl Fn() -> bool) {
    let start = Instant::now();
    while waiting() && start.elapsed() < bound {
        std::thread::yield_now();
    }
}
