//! Network coordinates: a point in a low-dimensional Euclidean space plus a height, and
//! their fixed-size wire form.
//!
//! The model is Vivaldi's *height vector* (Dabek et al., SIGCOMM 2004, §5.4; used for
//! latency estimation in paper `001` §5): a node sits at `x ∈ ℝᴰ` on top of a "stem" of
//! height `h ≥ 0` that stands for its access link. The predicted round-trip time between
//! two nodes is
//!
//! ```text
//! raw(i, j) = ‖xᵢ − xⱼ‖ + hᵢ + hⱼ
//! est(i, j) = raw(i, j) + aᵢ + aⱼ    when that is positive, raw(i, j) otherwise
//! ```
//!
//! where `a` is a per-node *adjustment*: half the mean residual (measured − raw) over
//! the node's recent samples, which absorbs part of the non-Euclidean error of the
//! Internet. (This term is not in the Vivaldi paper; production systems descended from it
//! add it, and the issue asks for it. See [`crate::vivaldi`].)
//!
//! A coordinate also carries the node's *error estimate* (its confidence, ≈ relative
//! error of its predictions) because the remote error weights every Vivaldi update.
//!
//! ## Wire form
//!
//! [`Coordinate::to_bytes`] writes, little-endian `f32`s, in order: the `D` components,
//! the height, the adjustment and the error. The size is therefore `4 · (D + 3)` bytes —
//! **44 bytes for 8 dimensions**, 20 bytes for 2 — small and fixed, so a coordinate can
//! be piggybacked on any existing message. The number of dimensions is not on the wire:
//! both sides know it from configuration, and [`Coordinate::from_bytes`] rejects a
//! buffer of the wrong length, non-finite values, a negative height or an out-of-range
//! error with a typed [`CoordError`].

/// Largest number of Euclidean dimensions supported (fixed so coordinates are `Copy` and
/// never allocate).
pub const MAX_DIMS: usize = 16;

/// Bytes taken on the wire by a coordinate of `dims` dimensions: `4 · (dims + 3)`.
pub const fn wire_size(dims: usize) -> usize {
    4 * (dims + 3)
}

/// Why a coordinate is unusable.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum CoordError {
    /// The requested number of dimensions is 0 or above [`MAX_DIMS`].
    #[error("unsupported number of dimensions {dims} (1..={MAX_DIMS} allowed)")]
    UnsupportedDims {
        /// The requested number.
        dims: usize,
    },
    /// Two coordinates (or a coordinate and a configuration) have different dimensions.
    #[error("dimension mismatch: expected {expected}, got {got}")]
    DimensionMismatch {
        /// Dimensions expected (ours).
        expected: usize,
        /// Dimensions received.
        got: usize,
    },
    /// A wire buffer has the wrong size.
    #[error("coordinate of {dims} dimensions needs {expected} bytes, got {got}")]
    WrongLength {
        /// Dimensions expected.
        dims: usize,
        /// Bytes expected.
        expected: usize,
        /// Bytes received.
        got: usize,
    },
    /// A field is NaN or infinite.
    #[error("coordinate field `{field}` is not finite ({value})")]
    NotFinite {
        /// Which field (`component[3]`, `height`, `adjustment`, `error`).
        field: String,
        /// Its value.
        value: f64,
    },
    /// A field is outside its allowed range.
    #[error("coordinate field `{field}` = {value} is out of range: {why}")]
    OutOfRange {
        /// Which field.
        field: String,
        /// Its value.
        value: f64,
        /// The rule it breaks.
        why: &'static str,
    },
}

/// A Vivaldi coordinate with height, adjustment and error estimate (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Coordinate {
    dims: u8,
    vec: [f64; MAX_DIMS],
    height: f64,
    adjustment: f64,
    error: f64,
}

impl Coordinate {
    /// The origin of a `dims`-dimensional space with zero height and adjustment and the
    /// given error estimate.
    pub fn origin(dims: usize, error: f64) -> Result<Self, CoordError> {
        if dims == 0 || dims > MAX_DIMS {
            return Err(CoordError::UnsupportedDims { dims });
        }
        Ok(Self {
            dims: dims as u8,
            vec: [0.0; MAX_DIMS],
            height: 0.0,
            adjustment: 0.0,
            error,
        })
    }

    /// A coordinate from its parts, validated (finite values, height ≥ 0, error ≥ 0).
    pub fn new(components: &[f64], height: f64, adjustment: f64, error: f64) -> Result<Self, CoordError> {
        let mut c = Self::origin(components.len(), error)?;
        c.vec[..components.len()].copy_from_slice(components);
        c.height = height;
        c.adjustment = adjustment;
        c.validate()?;
        Ok(c)
    }

    /// Number of Euclidean dimensions.
    pub fn dims(&self) -> usize {
        usize::from(self.dims)
    }

    /// The Euclidean components.
    pub fn components(&self) -> &[f64] {
        &self.vec[..self.dims()]
    }

    /// Height (ms): the access-link stem of the height-vector model.
    pub fn height(&self) -> f64 {
        self.height
    }

    /// Adjustment term (ms) added to distance estimates.
    pub fn adjustment(&self) -> f64 {
        self.adjustment
    }

    /// Error estimate (≈ recent relative prediction error; larger = less confident).
    pub fn error(&self) -> f64 {
        self.error
    }

    pub(crate) fn components_mut(&mut self) -> &mut [f64] {
        let d = self.dims();
        &mut self.vec[..d]
    }

    pub(crate) fn set_height(&mut self, h: f64) {
        self.height = h;
    }

    pub(crate) fn set_adjustment(&mut self, a: f64) {
        self.adjustment = a;
    }

    pub(crate) fn set_error(&mut self, e: f64) {
        self.error = e;
    }

    /// Checks that every field is finite, the height and error non-negative.
    pub fn validate(&self) -> Result<(), CoordError> {
        for (i, v) in self.components().iter().enumerate() {
            if !v.is_finite() {
                return Err(CoordError::NotFinite {
                    field: format!("component[{i}]"),
                    value: *v,
                });
            }
        }
        for (field, v) in [
            ("height", self.height),
            ("adjustment", self.adjustment),
            ("error", self.error),
        ] {
            if !v.is_finite() {
                return Err(CoordError::NotFinite {
                    field: field.into(),
                    value: v,
                });
            }
        }
        if self.height < 0.0 {
            return Err(CoordError::OutOfRange {
                field: "height".into(),
                value: self.height,
                why: "negative",
            });
        }
        if self.error < 0.0 {
            return Err(CoordError::OutOfRange {
                field: "error".into(),
                value: self.error,
                why: "negative",
            });
        }
        Ok(())
    }

    /// True when every field is finite.
    pub fn is_finite(&self) -> bool {
        self.components().iter().all(|v| v.is_finite())
            && self.height.is_finite()
            && self.adjustment.is_finite()
            && self.error.is_finite()
    }

    fn check_dims(&self, other: &Self) -> Result<(), CoordError> {
        if self.dims != other.dims {
            return Err(CoordError::DimensionMismatch {
                expected: self.dims(),
                got: other.dims(),
            });
        }
        Ok(())
    }

    /// Euclidean distance between the two points, heights ignored.
    pub(crate) fn euclid(&self, other: &Self) -> f64 {
        self.components()
            .iter()
            .zip(other.components())
            .map(|(a, b)| (a - b) * (a - b))
            .sum::<f64>()
            .sqrt()
    }

    /// Height-vector distance `‖xᵢ − xⱼ‖ + hᵢ + hⱼ` (no adjustment), in ms.
    pub fn raw_distance_ms(&self, other: &Self) -> Result<f64, CoordError> {
        self.check_dims(other)?;
        Ok(self.euclid(other) + self.height + other.height)
    }

    /// Estimated round-trip time in ms: the raw distance plus both adjustments, unless
    /// that would not be positive (then the raw distance).
    pub fn distance_ms(&self, other: &Self) -> Result<f64, CoordError> {
        let raw = self.raw_distance_ms(other)?;
        let adjusted = raw + self.adjustment + other.adjustment;
        Ok(if adjusted > 0.0 { adjusted } else { raw })
    }

    /// The fixed-size wire form (see the module doc): `4 · (dims + 3)` bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(wire_size(self.dims()));
        self.encode(&mut out);
        out
    }

    /// Appends the wire form to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        for v in self.components() {
            out.extend_from_slice(&(*v as f32).to_le_bytes());
        }
        for v in [self.height, self.adjustment, self.error] {
            out.extend_from_slice(&(v as f32).to_le_bytes());
        }
    }

    /// Decodes a coordinate of `dims` dimensions, rejecting a wrong length, non-finite
    /// values (including values that overflow `f32`), a negative height or error.
    pub fn from_bytes(dims: usize, bytes: &[u8]) -> Result<Self, CoordError> {
        let mut c = Self::origin(dims, 0.0)?;
        let expected = wire_size(dims);
        if bytes.len() != expected {
            return Err(CoordError::WrongLength {
                dims,
                expected,
                got: bytes.len(),
            });
        }
        let mut vals = bytes
            .chunks_exact(4)
            .map(|ch| f64::from(f32::from_le_bytes([ch[0], ch[1], ch[2], ch[3]])));
        for slot in c.components_mut() {
            *slot = vals.next().unwrap_or(f64::NAN);
        }
        c.height = vals.next().unwrap_or(f64::NAN);
        c.adjustment = vals.next().unwrap_or(f64::NAN);
        c.error = vals.next().unwrap_or(f64::NAN);
        c.validate()?;
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance_follows_the_height_vector_model() {
        let a = Coordinate::new(&[0.0, 0.0], 5.0, 0.0, 1.0).unwrap();
        let b = Coordinate::new(&[3.0, 4.0], 2.0, 0.0, 1.0).unwrap();
        assert_eq!(a.raw_distance_ms(&b).unwrap(), 5.0 + 5.0 + 2.0);
        let a2 = Coordinate::new(&[0.0, 0.0], 5.0, -1.5, 1.0).unwrap();
        assert_eq!(a2.distance_ms(&b).unwrap(), 10.5);
        // A negative total is replaced by the raw distance.
        let a3 = Coordinate::new(&[0.0, 0.0], 5.0, -100.0, 1.0).unwrap();
        assert_eq!(a3.distance_ms(&b).unwrap(), 12.0);
    }

    #[test]
    fn wire_round_trip_and_size() {
        assert_eq!(wire_size(8), 44);
        let c = Coordinate::new(&[1.5, -2.25, 3.0, 0.0, 7.0, 8.0, -9.5, 10.0], 4.5, -0.25, 0.375).unwrap();
        let b = c.to_bytes();
        assert_eq!(b.len(), 44);
        assert_eq!(Coordinate::from_bytes(8, &b).unwrap(), c);
    }

    #[test]
    fn bad_wire_input_is_rejected_with_typed_errors() {
        let c = Coordinate::new(&[1.0, 2.0], 1.0, 0.0, 0.5).unwrap();
        let mut b = c.to_bytes();
        assert_eq!(
            Coordinate::from_bytes(3, &b),
            Err(CoordError::WrongLength {
                dims: 3,
                expected: 24,
                got: 20
            })
        );
        assert!(matches!(
            Coordinate::from_bytes(2, &b[..19]),
            Err(CoordError::WrongLength { .. })
        ));
        assert!(matches!(
            Coordinate::from_bytes(0, &b),
            Err(CoordError::UnsupportedDims { dims: 0 })
        ));
        b[4..8].copy_from_slice(&f32::NAN.to_le_bytes());
        assert!(
            matches!(Coordinate::from_bytes(2, &b), Err(CoordError::NotFinite { ref field, .. }) if field == "component[1]")
        );
        let mut b = c.to_bytes();
        b[8..12].copy_from_slice(&(-1.0f32).to_le_bytes());
        assert!(
            matches!(Coordinate::from_bytes(2, &b), Err(CoordError::OutOfRange { ref field, .. }) if field == "height")
        );
        let mut b = c.to_bytes();
        b[16..20].copy_from_slice(&f32::INFINITY.to_le_bytes());
        assert!(
            matches!(Coordinate::from_bytes(2, &b), Err(CoordError::NotFinite { ref field, .. }) if field == "error")
        );
    }

    #[test]
    fn dimension_mismatch_is_an_error() {
        let a = Coordinate::origin(2, 1.0).unwrap();
        let b = Coordinate::origin(3, 1.0).unwrap();
        assert_eq!(
            a.distance_ms(&b),
            Err(CoordError::DimensionMismatch { expected: 2, got: 3 })
        );
        assert!(matches!(
            Coordinate::origin(MAX_DIMS + 1, 1.0),
            Err(CoordError::UnsupportedDims { .. })
        ));
    }
}
