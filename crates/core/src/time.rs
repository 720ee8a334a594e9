//! Virtual time.
//!
//! [`Time`] is a point in time measured in microseconds from an epoch chosen by the driver:
//! the start of a simulation, or a wall-clock epoch shared by the processes of a real
//! cluster. Protocol code only ever receives `Time` values as inputs (BRIEF §2.2) and never
//! reads a clock itself; that is what makes simulation deterministic.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::{Add, AddAssign, Sub};
use std::time::Duration;

/// A point in (virtual or real) time, in microseconds since the driver's epoch.
#[derive(
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Debug,
    Default,
    Serialize,
    Deserialize,
    bitcode::Encode,
    bitcode::Decode,
)]
pub struct Time(pub u64);

impl Time {
    /// The epoch.
    pub const ZERO: Time = Time(0);
    /// The largest representable time ("never").
    pub const MAX: Time = Time(u64::MAX);

    /// A time `us` microseconds after the epoch.
    pub const fn from_micros(us: u64) -> Self {
        Time(us)
    }

    /// A time `ms` milliseconds after the epoch.
    pub const fn from_millis(ms: u64) -> Self {
        Time(ms.saturating_mul(1000))
    }

    /// A time `s` seconds after the epoch (fractional seconds allowed; negative clamps to 0).
    pub fn from_secs_f64(s: f64) -> Self {
        Time((s.max(0.0) * 1e6) as u64)
    }

    /// Microseconds since the epoch.
    pub const fn as_micros(self) -> u64 {
        self.0
    }

    /// Seconds since the epoch.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }

    /// The duration from `earlier` to `self`, or zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Time) -> Duration {
        Duration::from_micros(self.0.saturating_sub(earlier.0))
    }

    /// `self + d`, saturating at [`Time::MAX`].
    pub fn saturating_add(self, d: Duration) -> Time {
        Time(self.0.saturating_add(d.as_micros().min(u64::MAX as u128) as u64))
    }
}

impl Add<Duration> for Time {
    type Output = Time;
    fn add(self, d: Duration) -> Time {
        self.saturating_add(d)
    }
}

impl AddAssign<Duration> for Time {
    fn add_assign(&mut self, d: Duration) {
        *self = self.saturating_add(d);
    }
}

impl Sub<Time> for Time {
    type Output = Duration;
    /// Saturating difference (zero when `rhs` is later).
    fn sub(self, rhs: Time) -> Duration {
        self.saturating_since(rhs)
    }
}

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.6}s", self.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        let t = Time::from_millis(5);
        assert_eq!(t + Duration::from_millis(2), Time::from_millis(7));
        assert_eq!(Time::from_millis(1) - t, Duration::ZERO);
        assert_eq!(t - Time::from_millis(1), Duration::from_millis(4));
        assert_eq!(Time::MAX + Duration::from_secs(1), Time::MAX);
        assert_eq!(Time::from_secs_f64(-3.0), Time::ZERO);
        assert_eq!(Time::from_secs_f64(1.5).as_micros(), 1_500_000);
    }
}
