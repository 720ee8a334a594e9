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
//! Yielding, not spinning: the two measured the same here, and on an otherwise idle core
//! `yield_now` returns at once, while on a busy machine (more threads than cores) it lets
//! the scheduler run another thread of that core's queue (a reason, not a measurement:
//! Linux gives `sched_yield` a weak meaning). Either way the extra CPU time is bounded:
//! [`WAIT_YIELDING`] on the calling thread and [`STAY_AWAKE`] per pool thread, a round.
//! Wall time bounds only how long a thread waits; what a round computes never depends on
//! it. Measured (crates/sim/PERFORMANCE.md, "Threads that wait awake"), `dht` on two
//! threads: −13 % wall time at 32 nodes, −4 % at 16; at 64 and 128 nodes within the noise
//! (at 64 the calling thread's group is the slower one, so it rarely waits).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long the calling thread waits for the pool's groups by yielding before it blocks.
const WAIT_YIELDING: Duration = Duration::from_millis(2);

/// How long a pool thread stays awake after a round, waiting for the next one. Rounds too
/// small for the pool, and the caller's serial events, do not move the round counter: the
/// stay-awake jobs then yield for all of it, beside the calling thread.
const STAY_AWAKE: Duration = Duration::from_millis(1);

/// The pool threads of parallel rounds.
pub(crate) struct Pool {
    /// The rayon pool (the calling thread is not in it).
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
    /// and returns when all have returned: after `first`, the calling thread yields until
    /// the pool's jobs are done, for at most [`WAIT_YIELDING`], and then blocks. Before
    /// returning, it keeps the pool's threads awake for the next round (see the module
    /// docs).
    pub(crate) fn run(&self, first: impl FnOnce(), rest: impl IntoIterator<Item = impl FnOnce() + Send>) {
        // The counter moves before the jobs are handed out: a stay-awake job still holding
        // a pool thread sees it at its next check and lets the thread take its job.
        let round = self.rounds.fetch_add(1, Ordering::Relaxed) + 1;
        let done = AtomicUsize::new(0);
        let done = &done;
        self.threads.in_place_scope(|scope| {
            let mut handed = 0;
            for job in rest {
                handed += 1;
                scope.spawn(move |_| {
                    job();
                    done.fetch_add(1, Ordering::Relaxed);
                });
            }
            first();
            // Only the wait reads `done`: the scope's end makes the jobs' writes visible.
            yield_while(WAIT_YIELDING, || done.load(Ordering::Relaxed) < handed);
        });
        // When the pool is dropped, these jobs still run to their bound (the counter no
        // longer moves) and the threads exit after them; each job owns its counter.
        for _ in 0..self.workers() {
            let rounds = Arc::clone(&self.rounds);
            self.threads
                .spawn(move || yield_while(STAY_AWAKE, || rounds.load(Ordering::Relaxed) == round));
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
