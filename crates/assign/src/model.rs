//! The system model of paper `002` §2: mirrors with a capacity, players with a delay to
//! every mirror, and the delay units used internally.
//!
//! # Delay units and "equal cost"
//!
//! The paper's delays are milliseconds. Internally every delay is an integer number of
//! **microseconds** ([`Micros`], `i64`): inputs in `f64` ms are rounded once, on entry, with
//! [`ms_to_micros`]. All sums, differences and comparisons (chain costs, totals, the
//! reference min-cost flow) are then exact integer arithmetic, so "J-SA total equals the
//! brute-force optimum" is tested with `==`, not a tolerance. The rounding is at most 0.5 µs
//! per player, far below any network measurement's precision.

use crate::AssignError;

/// A delay (or a sum or difference of delays) in integer microseconds.
pub type Micros = i64;

/// The largest single delay accepted: 10⁷ ms (≈ 2.8 hours). Bounding inputs keeps every sum
/// over up to 2³² players far inside `i64`.
pub const MAX_DELAY_MS: f64 = 1.0e7;

/// Converts a delay in milliseconds to integer microseconds (rounded to nearest), rejecting
/// NaN, infinities, negative values and values above [`MAX_DELAY_MS`].
pub fn ms_to_micros(ms: f64) -> Result<Micros, AssignError> {
    if !ms.is_finite() || !(0.0..=MAX_DELAY_MS).contains(&ms) {
        return Err(AssignError::BadDelay { value: ms });
    }
    Ok((ms * 1000.0).round() as Micros)
}

/// Converts integer microseconds back to milliseconds (for reports).
pub fn micros_to_ms(us: Micros) -> f64 {
    us as f64 / 1000.0
}

/// Per-player resource demand of paper `002` §2.1: every player needs `b` bandwidth and
/// `L_s + L_c` processing from its mirror (`L_s` to simulate the world, `L_c` to exchange
/// updates and filter by area of interest).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PlayerDemand {
    /// Bandwidth per player, `b` (any unit, the same as [`MirrorResources::bandwidth`]).
    pub bandwidth: f64,
    /// Processing to simulate one player's part of the world, `L_s`; every mirror pays it
    /// for *every* player in the system, since every mirror simulates the whole world.
    pub simulate: f64,
    /// Processing to serve one connected client, `L_c`.
    pub serve: f64,
}

/// What one mirror provides (paper `002` §2.1): bandwidth `α_j` and processing `β_j`.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MirrorResources {
    /// Bandwidth `α_j`.
    pub bandwidth: f64,
    /// Processing power `β_j`.
    pub processing: f64,
}

/// Capacity of a mirror, paper `002` §2.1:
/// `C_j = min(α_j / b, (β_j − n·L_s) / L_c)`, rounded down and clamped at zero.
///
/// `n` is the number of players the whole system is provisioned for: every mirror simulates
/// the entire world, so each of the `n` players costs every mirror `L_s`. The paper then
/// treats `C_j` as fixed while players come and go (§4 uses fixed capacities), and so does
/// this crate: compute capacities once for the design size `n`.
pub fn capacity(mirror: MirrorResources, demand: PlayerDemand, n: u64) -> Result<u32, AssignError> {
    let vals = [
        mirror.bandwidth,
        mirror.processing,
        demand.bandwidth,
        demand.simulate,
        demand.serve,
    ];
    if vals.iter().any(|v| !v.is_finite() || *v < 0.0) || demand.bandwidth == 0.0 || demand.serve == 0.0 {
        return Err(AssignError::BadResources);
    }
    let by_bandwidth = mirror.bandwidth / demand.bandwidth;
    let by_cpu = (mirror.processing - n as f64 * demand.simulate) / demand.serve;
    let c = by_bandwidth.min(by_cpu).floor();
    Ok(if c <= 0.0 {
        0
    } else if c >= f64::from(u32::MAX) {
        u32::MAX
    } else {
        c as u32
    })
}

/// A player's identity, chosen by the caller (the admission service's id, a row number…).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct PlayerId(pub u64);

impl std::fmt::Display for PlayerId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "p{}", self.0)
    }
}

/// One player re-assigned from mirror `from` to mirror `to` (an element of a chain).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Move {
    /// Who moved.
    pub player: PlayerId,
    /// Mirror index before.
    pub from: usize,
    /// Mirror index after.
    pub to: usize,
}

/// Summary of an assignment (paper `002` §2.2: the objective `D` and the §4 metrics).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Stats {
    /// Number of assigned players `n`.
    pub players: usize,
    /// Total delay `D = Σ d_{i,j} x_{i,j}`, exact, in µs.
    pub total_us: Micros,
    /// Mean delay `D / n` in ms (0 when empty).
    pub mean_ms: f64,
    /// Largest delay of any assigned player in ms (0 when empty).
    pub max_ms: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_is_the_smaller_resource_bound() {
        let d = PlayerDemand {
            bandwidth: 2.0,
            simulate: 0.01,
            serve: 0.5,
        };
        // bandwidth: 1000/2 = 500; cpu: (300 - 1000*0.01)/0.5 = 580 → 500
        let m = MirrorResources {
            bandwidth: 1000.0,
            processing: 300.0,
        };
        assert_eq!(capacity(m, d, 1000).expect("valid"), 500);
        // cpu-bound: (100 - 10)/0.5 = 180
        let m = MirrorResources {
            bandwidth: 1000.0,
            processing: 100.0,
        };
        assert_eq!(capacity(m, d, 1000).expect("valid"), 180);
        // the world simulation alone exceeds the mirror: zero, not negative
        let m = MirrorResources {
            bandwidth: 1000.0,
            processing: 5.0,
        };
        assert_eq!(capacity(m, d, 1000).expect("valid"), 0);
        let bad = PlayerDemand { bandwidth: 0.0, ..d };
        assert!(capacity(m, bad, 1).is_err());
    }

    #[test]
    fn delays_round_to_microseconds_and_reject_garbage() {
        assert_eq!(ms_to_micros(1.2346).expect("ok"), 1235);
        assert_eq!(ms_to_micros(1.2344).expect("ok"), 1234);
        assert_eq!(ms_to_micros(0.0).expect("ok"), 0);
        assert!(ms_to_micros(-1.0).is_err());
        assert!(ms_to_micros(f64::NAN).is_err());
        assert!(ms_to_micros(f64::INFINITY).is_err());
        assert!(ms_to_micros(2.0e7).is_err());
    }
}
