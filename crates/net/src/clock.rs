//! Wall time as the node's `Time`.
//!
//! Processes of one cluster share an epoch (a UNIX time in milliseconds handed out by the
//! launcher), so the timestamps in updates mean the same thing on every node and replica
//! staleness can be measured across processes on one machine. Within a process the clock
//! is monotonic (`Instant`); only the offset comes from the system clock, once.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use worldmesh_core::Time;

/// Maps `Instant`s to `Time` since a shared epoch.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    start: Instant,
    offset: Time,
}

impl Clock {
    /// A clock whose `Time` counts from `epoch_unix_ms` (0 = the UNIX epoch is not used:
    /// time counts from now).
    pub fn new(epoch_unix_ms: u64) -> Self {
        let start = Instant::now();
        let offset = if epoch_unix_ms == 0 {
            Time::ZERO
        } else {
            let now_ms = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_micros() as u64);
            Time::from_micros(now_ms.saturating_sub(epoch_unix_ms.saturating_mul(1000)))
        };
        Self { start, offset }
    }

    /// Now.
    pub fn now(&self) -> Time {
        self.at(Instant::now())
    }

    /// The `Time` of an `Instant`.
    pub fn at(&self, i: Instant) -> Time {
        self.offset + i.saturating_duration_since(self.start)
    }

    /// The `Instant` of a `Time` (times before the clock started map to its start).
    pub fn instant(&self, t: Time) -> Instant {
        self.start + Duration::from_micros(t.as_micros().saturating_sub(self.offset.as_micros()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_and_times_round_trip() {
        let c = Clock::new(0);
        let t = c.now() + Duration::from_millis(250);
        let back = c.at(c.instant(t));
        assert_eq!(back, t);
        let shared =
            Clock::new(SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64 - 5000);
        assert!(shared.now() >= Time::from_millis(4900));
    }
}
