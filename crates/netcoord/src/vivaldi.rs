//! Vivaldi: decentralized network coordinates (Dabek, Cox, Kaashoek, Morris, SIGCOMM
//! 2004), with the refinements of Ledlie, Gardner and Seltzer ("Network Coordinates in the
//! Wild", NSDI 2007). Paper `001` §5 uses Vivaldi as its multidimensional-scaling latency
//! estimator and §6.3 measures its accuracy on PlanetLab.
//!
//! A [`VivaldiNode`] is a sans-IO state machine: the driver hands it one RTT sample to a
//! peer together with the peer's current [`Coordinate`] (piggybacked on whatever message
//! carried the probe) and the node moves its own coordinate. No clock, no socket.
//!
//! ## One update, as implemented (how we read the papers)
//!
//! With our coordinate `xᵢ` (height `hᵢ`, error `eᵢ`) and the peer's `xⱼ, hⱼ, eⱼ`:
//!
//! 1. *Reject impossible samples*: an RTT that is not finite, ≤ 0 or above
//!    [`VivaldiConfig::max_rtt_ms`], a peer coordinate with the wrong dimensions, a
//!    non-finite field, a negative height or error, or a component beyond
//!    [`VivaldiConfig::max_coordinate_ms`] is refused with a [`VivaldiError`] and
//!    changes nothing.
//! 2. *Latency filter*: `rtt` = moving median of the last samples to that peer
//!    ([`crate::filter`]).
//! 3. *Sample weight* `w = eᵢ / (eᵢ + eⱼ)`: trust a sample more when we are unsure and the
//!    peer is sure (Dabek §4.3).
//! 4. *Error EWMA*: with `d = ‖xᵢ − xⱼ‖ + hᵢ + hⱼ` and the sample's relative error
//!    `eₛ = |d − rtt| / rtt`, `eᵢ ← eₛ · c_e · w + eᵢ · (1 − c_e · w)`, capped at
//!    [`VivaldiConfig::error_max`].
//! 5. *Adaptive timestep* `δ = c_c · w` and move `δ · (rtt − d)` along the unit height
//!    vector from `j` to `i`. In the height-vector norm `‖(v, h)‖ = ‖v‖ + h` the unit
//!    vector of `[xᵢ − xⱼ, hᵢ + hⱼ]` is `[(xᵢ − xⱼ)/d, (hᵢ + hⱼ)/d]`, so the Euclidean
//!    part moves by `δ(rtt − d)(xᵢ − xⱼ)/d` and the height by `δ(rtt − d)(hᵢ + hⱼ)/d`:
//!    the stem grows in proportion to its share of the distance (Dabek §5.4). Heights
//!    never fall below [`VivaldiConfig::height_min`]. When the two points coincide the
//!    direction is a random unit vector (from the node's own deterministic generator).
//! 6. *Gravity* (Ledlie §5.2): a pull of `(‖xᵢ‖ / ρ)²` ms toward the origin keeps the
//!    whole system from drifting away as nodes come and go.
//! 7. *Adjustment*: the node keeps the last [`VivaldiConfig::adjustment_window`] residuals
//!    `rtt − d'` (with its new coordinate) and publishes half their mean as its
//!    adjustment, added to estimates by [`Coordinate::distance_ms`].
//! 8. *NaN defence*: if anything in the new coordinate is not finite (a numerical
//!    accident despite step 1), the node resets to the origin with maximal error and
//!    counts the reset ([`VivaldiNode::resets`]).

use crate::coord::{CoordError, Coordinate};
use crate::filter::LatencyFilter;
use std::hash::Hash;
use worldmesh_core::DetRng;

/// Tuning of a Vivaldi node. Defaults follow the papers (`c_c = c_e = 0.25`, maximal error
/// 1.5, a filter of 3 samples as Ledlie recommends for the median filter's latency).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct VivaldiConfig {
    /// Euclidean dimensions (1..=[`crate::coord::MAX_DIMS`]).
    pub dims: usize,
    /// Use the height vector (false: pure Euclidean, heights stay 0).
    pub height: bool,
    /// Timestep constant `c_c` (fraction of the way to move when fully trusting a sample).
    pub cc: f64,
    /// Error EWMA constant `c_e`.
    pub ce: f64,
    /// Largest (and initial) error estimate.
    pub error_max: f64,
    /// Smallest error estimate a node or peer is credited with (avoids `w = 0/0`).
    pub error_min: f64,
    /// Smallest height (ms) when `height` is on; heights start here.
    pub height_min: f64,
    /// Gravity radius ρ in ms (`None`: no gravity).
    pub gravity_rho: Option<f64>,
    /// Residuals averaged into the adjustment term (0: no adjustment).
    pub adjustment_window: usize,
    /// Latency filter window (1: no filtering).
    pub filter_window: usize,
    /// Peers tracked by the latency filter at most.
    pub filter_capacity: usize,
    /// RTT samples above this (ms) are rejected as impossible.
    pub max_rtt_ms: f64,
    /// Peer coordinates with a component, height or adjustment beyond this magnitude (ms)
    /// are rejected.
    pub max_coordinate_ms: f64,
}

impl Default for VivaldiConfig {
    fn default() -> Self {
        Self {
            dims: 8,
            height: true,
            cc: 0.25,
            ce: 0.25,
            error_max: 1.5,
            error_min: 1e-3,
            height_min: 0.01,
            gravity_rho: Some(1000.0),
            adjustment_window: 20,
            filter_window: 3,
            filter_capacity: 1024,
            max_rtt_ms: 10_000.0,
            max_coordinate_ms: 100_000.0,
        }
    }
}

/// Why an observation was refused.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum VivaldiError {
    /// The RTT sample is not finite, not positive or absurdly large.
    #[error("impossible RTT sample {rtt_ms} ms (must be finite, > 0 and <= {max_ms} ms)")]
    ImpossibleRtt {
        /// The sample.
        rtt_ms: f64,
        /// The configured maximum.
        max_ms: f64,
    },
    /// The peer's coordinate is malformed (wrong dimensions, NaN, negative height, …).
    #[error("bad peer coordinate: {0}")]
    BadCoordinate(#[from] CoordError),
    /// The configuration is unusable.
    #[error("bad Vivaldi configuration: {0}")]
    BadConfig(&'static str),
}

/// What one accepted observation did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Update {
    /// The RTT used after filtering (ms).
    pub filtered_rtt_ms: f64,
    /// Our estimate to the peer before the update (ms, raw height-vector distance).
    pub predicted_ms: f64,
    /// The update produced a non-finite coordinate and the node was reset.
    pub reset: bool,
}

/// One node's Vivaldi state machine (see the module doc). `P` identifies peers for the
/// latency filter.
#[derive(Clone, Debug)]
pub struct VivaldiNode<P> {
    cfg: VivaldiConfig,
    coord: Coordinate,
    filter: LatencyFilter<P>,
    residuals: Vec<f64>,
    residual_next: usize,
    rng: DetRng,
    updates: u64,
    resets: u64,
}

impl<P: Eq + Hash + Clone> VivaldiNode<P> {
    /// A node at the origin with maximal error. `seed` drives the random directions
    /// used when two coordinates coincide.
    pub fn new(cfg: VivaldiConfig, seed: u64) -> Result<Self, VivaldiError> {
        let ok = |x: f64| x.is_finite() && x > 0.0;
        if !(ok(cfg.cc) && cfg.cc <= 1.0 && ok(cfg.ce) && cfg.ce <= 1.0) {
            return Err(VivaldiError::BadConfig("cc and ce must be in (0, 1]"));
        }
        if !(ok(cfg.error_max) && ok(cfg.error_min) && cfg.error_min <= cfg.error_max) {
            return Err(VivaldiError::BadConfig("need 0 < error_min <= error_max"));
        }
        if !(ok(cfg.max_rtt_ms)
            && cfg.max_coordinate_ms > 0.0
            && cfg.height_min >= 0.0
            && cfg.height_min.is_finite())
        {
            return Err(VivaldiError::BadConfig(
                "max_rtt_ms, max_coordinate_ms must be > 0, height_min >= 0",
            ));
        }
        if cfg.gravity_rho.is_some_and(|r| !ok(r)) {
            return Err(VivaldiError::BadConfig("gravity_rho must be > 0"));
        }
        if cfg.adjustment_window > 4096 {
            return Err(VivaldiError::BadConfig("adjustment_window must be <= 4096"));
        }
        let mut coord = Coordinate::origin(cfg.dims, cfg.error_max)?;
        if cfg.height {
            coord.set_height(cfg.height_min);
        }
        Ok(Self {
            cfg,
            coord,
            filter: LatencyFilter::new(cfg.filter_window, cfg.filter_capacity),
            residuals: Vec::with_capacity(cfg.adjustment_window),
            residual_next: 0,
            rng: DetRng::new(seed),
            updates: 0,
            resets: 0,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &VivaldiConfig {
        &self.cfg
    }

    /// Our current coordinate (what to piggyback on outgoing messages).
    pub fn coordinate(&self) -> &Coordinate {
        &self.coord
    }

    /// Our current error estimate.
    pub fn error(&self) -> f64 {
        self.coord.error()
    }

    /// Accepted observations so far.
    pub fn updates(&self) -> u64 {
        self.updates
    }

    /// Times the node reset itself after a non-finite update.
    pub fn resets(&self) -> u64 {
        self.resets
    }

    /// Estimated RTT (ms) to a node at `other`.
    pub fn estimate_ms(&self, other: &Coordinate) -> Result<f64, VivaldiError> {
        Ok(self.coord.distance_ms(other)?)
    }

    /// Forgets a departed peer's filter samples.
    pub fn forget_peer(&mut self, peer: &P) {
        self.filter.forget(peer);
    }

    fn check_peer(&self, remote: &Coordinate) -> Result<(), VivaldiError> {
        if remote.dims() != self.cfg.dims {
            return Err(CoordError::DimensionMismatch {
                expected: self.cfg.dims,
                got: remote.dims(),
            }
            .into());
        }
        remote.validate()?;
        let lim = self.cfg.max_coordinate_ms;
        for (i, v) in remote.components().iter().enumerate() {
            if v.abs() > lim {
                return Err(CoordError::OutOfRange {
                    field: format!("component[{i}]"),
                    value: *v,
                    why: "beyond max_coordinate_ms",
                }
                .into());
            }
        }
        for (field, v) in [("height", remote.height()), ("adjustment", remote.adjustment())] {
            if v.abs() > lim {
                return Err(CoordError::OutOfRange {
                    field: field.into(),
                    value: v,
                    why: "beyond max_coordinate_ms",
                }
                .into());
            }
        }
        Ok(())
    }

    /// Feeds one RTT sample `rtt_ms` to `peer`, whose current coordinate (with its error
    /// estimate) is `remote`. See the module doc for the exact update.
    pub fn observe(&mut self, peer: P, remote: &Coordinate, rtt_ms: f64) -> Result<Update, VivaldiError> {
        if !(rtt_ms.is_finite() && rtt_ms > 0.0 && rtt_ms <= self.cfg.max_rtt_ms) {
            return Err(VivaldiError::ImpossibleRtt {
                rtt_ms,
                max_ms: self.cfg.max_rtt_ms,
            });
        }
        self.check_peer(remote)?;
        let rtt = self.filter.push(peer, rtt_ms);
        self.updates += 1;

        let ei = self.coord.error().max(self.cfg.error_min);
        let ej = remote.error().clamp(self.cfg.error_min, self.cfg.error_max);
        let w = ei / (ei + ej);
        let euclid = self.coord.euclid(remote);
        let dist = euclid + self.coord.height() + remote.height();
        let es = (dist - rtt).abs() / rtt;
        let ce_w = self.cfg.ce * w;
        self.coord
            .set_error((es * ce_w + ei * (1.0 - ce_w)).min(self.cfg.error_max));

        let force = self.cfg.cc * w * (rtt - dist);
        let dims = self.cfg.dims;
        if euclid > 1e-9 {
            let mut dir = [0.0f64; crate::coord::MAX_DIMS];
            for (k, (a, b)) in self
                .coord
                .components()
                .iter()
                .zip(remote.components())
                .enumerate()
            {
                dir[k] = (a - b) / dist;
            }
            for (x, d) in self.coord.components_mut().iter_mut().zip(&dir[..dims]) {
                *x += force * d;
            }
            if self.cfg.height {
                let h = self.coord.height() + force * (self.coord.height() + remote.height()) / dist;
                self.coord.set_height(h.max(self.cfg.height_min));
            }
        } else {
            // Coincident points: push along a random unit direction; heights unchanged.
            let mut dir = [0.0f64; crate::coord::MAX_DIMS];
            let mut norm = 0.0;
            while norm < 1e-12 {
                for d in dir[..dims].iter_mut() {
                    *d = self.rng.normal();
                }
                norm = dir[..dims].iter().map(|d| d * d).sum::<f64>().sqrt();
            }
            for (x, d) in self.coord.components_mut().iter_mut().zip(&dir[..dims]) {
                *x += force * d / norm;
            }
        }

        if let Some(rho) = self.cfg.gravity_rho {
            let r = self.coord.components().iter().map(|x| x * x).sum::<f64>().sqrt();
            if r > 1e-12 {
                let pull = (r / rho).powi(2).min(r);
                for x in self.coord.components_mut() {
                    *x -= pull * *x / r;
                }
            }
        }

        if self.cfg.adjustment_window > 0 {
            let new_dist = self.coord.euclid(remote) + self.coord.height() + remote.height();
            let residual = rtt - new_dist;
            if self.residuals.len() < self.cfg.adjustment_window {
                self.residuals.push(residual);
            } else {
                self.residuals[self.residual_next] = residual;
            }
            self.residual_next = (self.residual_next + 1) % self.cfg.adjustment_window;
            let mean = self.residuals.iter().sum::<f64>() / self.residuals.len() as f64;
            self.coord.set_adjustment(0.5 * mean);
        }

        let reset = !self.coord.is_finite();
        if reset {
            self.reset();
        }
        Ok(Update {
            filtered_rtt_ms: rtt,
            predicted_ms: dist,
            reset,
        })
    }

    /// Back to the origin with maximal error; filter and adjustment history cleared;
    /// counted in [`Self::resets`].
    pub fn reset(&mut self) {
        let mut c = Coordinate::origin(self.cfg.dims, self.cfg.error_max).unwrap_or(self.coord);
        if self.cfg.height {
            c.set_height(self.cfg.height_min);
        }
        self.coord = c;
        self.filter.clear();
        self.residuals.clear();
        self.residual_next = 0;
        self.resets += 1;
    }
}
