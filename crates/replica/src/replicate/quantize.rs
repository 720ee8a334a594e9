//! `#[replicate(quantize = STEP)]`: floats stored as whole numbers of steps.

use worldmesh_core::Point3;

use super::{Reader, put_varint, unzigzag, zigzag};
use crate::object::StateError;

/// The largest magnitude of a quantized value, in steps (2^22). Encoders clamp to it,
/// decoders refuse more. Below it, `f32` holds `q × STEP` precisely enough that
/// quantizing a decoded value gives back `q`, so sender and receiver agree on the
/// baseline a delta is taken against (a step of 0.01 covers ±41,943 units).
pub const QUANTIZED_LIMIT: i64 = 1 << 22;

/// A float type that can be replicated as whole numbers of `step`
/// (`#[replicate(quantize = STEP)]`). The decoded value is `round(v / step) × step`:
/// within half a step of the original (property-tested). Full state: the zigzag varint of
/// the number of steps; delta: a varint whose low bit says whether the difference to the
/// baseline's steps (0) or the absolute steps (1) follow, whichever is smaller.
/// Non-finite values encode as 0 (NaN) or the clamp limit.
pub trait Quantize: Sized + Clone {
    /// Bits of its parent's change mask the field takes (one per component).
    const MASK_BITS: u32;
    /// Appends the full encoding.
    fn write_full_q(&self, step: f32, out: &mut Vec<u8>);
    /// Reads a full encoding.
    fn read_full_q(step: f32, r: &mut Reader<'_>) -> Result<Self, StateError>;
    /// Which components' quantized values differ from the baseline's.
    fn changes_q(&self, baseline: &Self, step: f32) -> u64;
    /// Appends the changed components.
    fn write_changes_q(&self, baseline: &Self, step: f32, changes: u64, out: &mut Vec<u8>);
    /// Reads the changed components.
    fn read_changes_q(
        baseline: &Self,
        step: f32,
        changes: u64,
        r: &mut Reader<'_>,
    ) -> Result<Self, StateError>;
}

/// `v` in whole steps, clamped to ±[`QUANTIZED_LIMIT`] (NaN becomes 0).
pub fn quantize(v: f32, step: f32) -> i64 {
    let q = (f64::from(v) / f64::from(step)).round();
    q.clamp(-(QUANTIZED_LIMIT as f64), QUANTIZED_LIMIT as f64) as i64
}

/// The value of `q` steps.
pub fn dequantize(q: i64, step: f32) -> f32 {
    (q as f64 * f64::from(step)) as f32
}

fn checked(q: i64) -> Result<i64, StateError> {
    if q.unsigned_abs() > QUANTIZED_LIMIT as u64 {
        return Err(StateError::invalid(
            "quantized value",
            format_args!("{q} beyond ±{QUANTIZED_LIMIT} steps"),
        ));
    }
    Ok(q)
}

fn write_q(v: f32, step: f32, out: &mut Vec<u8>) {
    put_varint(out, zigzag(quantize(v, step)));
}

fn read_q(step: f32, r: &mut Reader<'_>) -> Result<f32, StateError> {
    Ok(dequantize(checked(unzigzag(r.varint()?))?, step))
}

fn write_delta_q(v: f32, baseline: f32, step: f32, out: &mut Vec<u8>) {
    let (q, qb) = (quantize(v, step), quantize(baseline, step));
    let (rel, abs) = (zigzag(q - qb), zigzag(q));
    put_varint(out, if rel <= abs { rel << 1 } else { abs << 1 | 1 });
}

fn read_delta_q(baseline: f32, step: f32, r: &mut Reader<'_>) -> Result<f32, StateError> {
    let v = r.varint()?;
    let n = unzigzag(v >> 1);
    let q = if v & 1 == 0 {
        quantize(baseline, step).saturating_add(n)
    } else {
        n
    };
    Ok(dequantize(checked(q)?, step))
}

impl Quantize for f32 {
    const MASK_BITS: u32 = 1;
    fn write_full_q(&self, step: f32, out: &mut Vec<u8>) {
        write_q(*self, step, out);
    }
    fn read_full_q(step: f32, r: &mut Reader<'_>) -> Result<Self, StateError> {
        read_q(step, r)
    }
    fn changes_q(&self, baseline: &Self, step: f32) -> u64 {
        u64::from(quantize(*self, step) != quantize(*baseline, step))
    }
    fn write_changes_q(&self, baseline: &Self, step: f32, _: u64, out: &mut Vec<u8>) {
        write_delta_q(*self, *baseline, step, out);
    }
    fn read_changes_q(baseline: &Self, step: f32, _: u64, r: &mut Reader<'_>) -> Result<Self, StateError> {
        read_delta_q(*baseline, step, r)
    }
}

impl Quantize for Point3 {
    const MASK_BITS: u32 = 3;
    fn write_full_q(&self, step: f32, out: &mut Vec<u8>) {
        for c in [self.x, self.y, self.z] {
            write_q(c, step, out);
        }
    }
    fn read_full_q(step: f32, r: &mut Reader<'_>) -> Result<Self, StateError> {
        Ok(Point3::new(read_q(step, r)?, read_q(step, r)?, read_q(step, r)?))
    }
    fn changes_q(&self, baseline: &Self, step: f32) -> u64 {
        self.x.changes_q(&baseline.x, step)
            | self.y.changes_q(&baseline.y, step) << 1
            | self.z.changes_q(&baseline.z, step) << 2
    }
    fn write_changes_q(&self, baseline: &Self, step: f32, changes: u64, out: &mut Vec<u8>) {
        for (bit, (v, b)) in [(self.x, baseline.x), (self.y, baseline.y), (self.z, baseline.z)]
            .into_iter()
            .enumerate()
        {
            if changes & (1 << bit) != 0 {
                write_delta_q(v, b, step, out);
            }
        }
    }
    fn read_changes_q(
        baseline: &Self,
        step: f32,
        changes: u64,
        r: &mut Reader<'_>,
    ) -> Result<Self, StateError> {
        let mut p = *baseline;
        for (bit, c) in [&mut p.x, &mut p.y, &mut p.z].into_iter().enumerate() {
            if changes & (1 << bit) != 0 {
                *c = read_delta_q(*c, step, r)?;
            }
        }
        Ok(p)
    }
}
