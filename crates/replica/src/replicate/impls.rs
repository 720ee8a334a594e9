//! [`Replicate`] for the field types games are built from.

use worldmesh_core::{NodeId, ObjectId, Point3};

use super::{
    DEFAULT_MAX_LEN, Reader, Replicate, mask_bits, put_varint, read_nested_delta, unzigzag,
    write_nested_delta, zigzag,
};
use crate::object::StateError;

/// The delta methods of a type replicated whole: one change bit, then its full form.
macro_rules! whole_value_delta {
    () => {
        fn changes(&self, baseline: &Self) -> u64 {
            u64::from(self != baseline)
        }
        fn write_changes(&self, _: &Self, _: u64, out: &mut Vec<u8>) {
            self.write_full(out);
        }
        fn read_changes(_: &Self, _: u64, r: &mut Reader<'_>) -> Result<Self, StateError> {
            Self::read_full(r)
        }
    };
}

/// Bytes kept whole: one byte, full state and delta alike.
macro_rules! byte_impl {
    ($($t:ty),*) => {$(
        impl Replicate for $t {
            fn write_full(&self, out: &mut Vec<u8>) {
                out.push(*self as u8);
            }
            fn read_full(r: &mut Reader<'_>) -> Result<Self, StateError> {
                Ok(r.byte()? as $t)
            }
            whole_value_delta!();
        }
    )*};
}
byte_impl!(u8, i8);

/// Unsigned integers: LEB128 varints, range-checked on decode.
macro_rules! unsigned_impl {
    ($($t:ty),*) => {$(
        impl Replicate for $t {
            fn write_full(&self, out: &mut Vec<u8>) {
                put_varint(out, *self as u64);
            }
            fn read_full(r: &mut Reader<'_>) -> Result<Self, StateError> {
                let v = r.varint()?;
                <$t>::try_from(v).map_err(|_| StateError::invalid(stringify!($t), format_args!("{v} out of range")))
            }
            whole_value_delta!();
        }
    )*};
}
unsigned_impl!(u16, u32, u64, usize);

/// Signed integers: zigzag varints, range-checked on decode.
macro_rules! signed_impl {
    ($($t:ty),*) => {$(
        impl Replicate for $t {
            fn write_full(&self, out: &mut Vec<u8>) {
                put_varint(out, zigzag(*self as i64));
            }
            fn read_full(r: &mut Reader<'_>) -> Result<Self, StateError> {
                let v = unzigzag(r.varint()?);
                <$t>::try_from(v).map_err(|_| StateError::invalid(stringify!($t), format_args!("{v} out of range")))
            }
            whole_value_delta!();
        }
    )*};
}
signed_impl!(i16, i32, i64, isize);

impl Replicate for bool {
    fn write_full(&self, out: &mut Vec<u8>) {
        out.push(u8::from(*self));
    }
    fn read_full(r: &mut Reader<'_>) -> Result<Self, StateError> {
        match r.byte()? {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(StateError::invalid("bool", b)),
        }
    }
    whole_value_delta!();
}

/// The order-preserving integer image of an `f32`'s bits: neighbouring floats get
/// neighbouring integers, so a small move is a small difference.
fn ordered32(v: f32) -> u32 {
    let b = v.to_bits();
    if b & 0x8000_0000 != 0 { !b } else { b | 0x8000_0000 }
}

fn from_ordered32(o: u32) -> f32 {
    f32::from_bits(if o & 0x8000_0000 != 0 { o & 0x7fff_ffff } else { !o })
}

fn finite32(v: f32) -> Result<f32, StateError> {
    if v.is_finite() {
        Ok(v)
    } else {
        Err(StateError::invalid("f32", "not finite"))
    }
}

/// `f32`: exact. Full state: the 4 little-endian bytes; delta: the zigzag varint of the
/// (wrapping) difference of the order-preserving images of the new and the baseline value
/// (3 bytes for a coordinate near 1000 that moved by up to ~60 units, at most 5). Changes
/// are detected with `!=`, so `0.0` and `-0.0` count as equal (as in hand-written codecs
/// that compare fields). Non-finite values are refused on decode.
impl Replicate for f32 {
    fn write_full(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn read_full(r: &mut Reader<'_>) -> Result<Self, StateError> {
        finite32(f32::from_le_bytes(r.array()?))
    }
    fn changes(&self, baseline: &Self) -> u64 {
        u64::from(self != baseline)
    }
    fn write_changes(&self, baseline: &Self, _: u64, out: &mut Vec<u8>) {
        let d = ordered32(*self).wrapping_sub(ordered32(*baseline)) as i32;
        put_varint(out, zigzag(i64::from(d)));
    }
    fn read_changes(baseline: &Self, _: u64, r: &mut Reader<'_>) -> Result<Self, StateError> {
        let d = unzigzag(r.varint()?);
        let d = i32::try_from(d)
            .map_err(|_| StateError::invalid("f32 delta", format_args!("{d} out of range")))?;
        finite32(from_ordered32(ordered32(*baseline).wrapping_add(d as u32)))
    }
}

fn ordered64(v: f64) -> u64 {
    let b = v.to_bits();
    if b & (1 << 63) != 0 { !b } else { b | (1 << 63) }
}

fn from_ordered64(o: u64) -> f64 {
    f64::from_bits(if o & (1 << 63) != 0 { o & !(1 << 63) } else { !o })
}

/// `f64`: exact, as `f32` (8 bytes full; a zigzag varint difference in deltas).
impl Replicate for f64 {
    fn write_full(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn read_full(r: &mut Reader<'_>) -> Result<Self, StateError> {
        let v = f64::from_le_bytes(r.array()?);
        if v.is_finite() {
            Ok(v)
        } else {
            Err(StateError::invalid("f64", "not finite"))
        }
    }
    fn changes(&self, baseline: &Self) -> u64 {
        u64::from(self != baseline)
    }
    fn write_changes(&self, baseline: &Self, _: u64, out: &mut Vec<u8>) {
        let d = ordered64(*self).wrapping_sub(ordered64(*baseline)) as i64;
        put_varint(out, zigzag(d));
    }
    fn read_changes(baseline: &Self, _: u64, r: &mut Reader<'_>) -> Result<Self, StateError> {
        let d = unzigzag(r.varint()?);
        let v = from_ordered64(ordered64(*baseline).wrapping_add(d as u64));
        if v.is_finite() {
            Ok(v)
        } else {
            Err(StateError::invalid("f64", "not finite"))
        }
    }
}

/// [`Point3`]: three `f32`s (12 bytes full); one mask bit per coordinate, so a delta
/// carries only the coordinates that moved.
impl Replicate for Point3 {
    const MASK_BITS: u32 = 3;

    fn write_full(&self, out: &mut Vec<u8>) {
        self.x.write_full(out);
        self.y.write_full(out);
        self.z.write_full(out);
    }
    fn read_full(r: &mut Reader<'_>) -> Result<Self, StateError> {
        Ok(Point3::new(
            f32::read_full(r)?,
            f32::read_full(r)?,
            f32::read_full(r)?,
        ))
    }
    fn changes(&self, baseline: &Self) -> u64 {
        self.x.changes(&baseline.x) | self.y.changes(&baseline.y) << 1 | self.z.changes(&baseline.z) << 2
    }
    fn write_changes(&self, baseline: &Self, changes: u64, out: &mut Vec<u8>) {
        for (bit, (v, b)) in [(self.x, baseline.x), (self.y, baseline.y), (self.z, baseline.z)]
            .into_iter()
            .enumerate()
        {
            if changes & (1 << bit) != 0 {
                v.write_changes(&b, 1, out);
            }
        }
    }
    fn read_changes(baseline: &Self, changes: u64, r: &mut Reader<'_>) -> Result<Self, StateError> {
        let mut p = *baseline;
        for (bit, c) in [&mut p.x, &mut p.y, &mut p.z].into_iter().enumerate() {
            if changes & (1 << bit) != 0 {
                *c = f32::read_changes(c, 1, r)?;
            }
        }
        Ok(p)
    }
}

/// [`NodeId`]: a varint.
impl Replicate for NodeId {
    fn write_full(&self, out: &mut Vec<u8>) {
        self.0.write_full(out);
    }
    fn read_full(r: &mut Reader<'_>) -> Result<Self, StateError> {
        Ok(NodeId(u32::read_full(r)?))
    }
    whole_value_delta!();
}

/// [`ObjectId`]: origin and sequence number (generation and counter) as varints, so the
/// id of a first-generation object of a small cluster costs 2–4 bytes.
impl Replicate for ObjectId {
    fn write_full(&self, out: &mut Vec<u8>) {
        self.origin.write_full(out);
        self.seq.write_full(out);
    }
    fn read_full(r: &mut Reader<'_>) -> Result<Self, StateError> {
        Ok(ObjectId {
            origin: NodeId::read_full(r)?,
            seq: u64::read_full(r)?,
        })
    }
    whole_value_delta!();
}

/// `Option<T>`: a tag byte (0 none, 1 some) and the value. Delta: 0 (now none), 1 (some:
/// the full value follows) or 2 (some before and after: `T`'s own delta follows).
impl<T: Replicate> Replicate for Option<T> {
    fn write_full(&self, out: &mut Vec<u8>) {
        match self {
            None => out.push(0),
            Some(v) => {
                out.push(1);
                v.write_full(out);
            }
        }
    }
    fn read_full(r: &mut Reader<'_>) -> Result<Self, StateError> {
        match r.byte()? {
            0 => Ok(None),
            1 => Ok(Some(T::read_full(r)?)),
            t => Err(StateError::invalid("option tag", t)),
        }
    }
    fn changes(&self, baseline: &Self) -> u64 {
        match (self, baseline) {
            (None, None) => 0,
            (Some(a), Some(b)) => u64::from(a.delta_header(b) != 0),
            _ => 1,
        }
    }
    fn write_changes(&self, baseline: &Self, _: u64, out: &mut Vec<u8>) {
        match (self, baseline) {
            (Some(a), Some(b)) => {
                out.push(2);
                write_nested_delta(a, b, out);
            }
            _ => self.write_full(out),
        }
    }
    fn read_changes(baseline: &Self, _: u64, r: &mut Reader<'_>) -> Result<Self, StateError> {
        match r.byte()? {
            0 => Ok(None),
            1 => Ok(Some(T::read_full(r)?)),
            2 => match baseline {
                Some(b) => Ok(Some(read_nested_delta(b, r)?)),
                None => Err(StateError::invalid(
                    "option delta",
                    "against a missing baseline value",
                )),
            },
            t => Err(StateError::invalid("option delta tag", t)),
        }
    }
}

/// `Box<T>`: exactly `T`'s encoding, full and delta. A game boxes a large field that is
/// rarely present (e.g. `Option<Box<Control>>`) to keep its object small in every copy
/// the replica histories hold, without changing a byte on the wire.
impl<T: Replicate> Replicate for Box<T> {
    const MASK_BITS: u32 = T::MASK_BITS;
    const HEADER_BITS: u32 = T::HEADER_BITS;

    fn write_full(&self, out: &mut Vec<u8>) {
        (**self).write_full(out);
    }
    fn read_full(r: &mut Reader<'_>) -> Result<Self, StateError> {
        T::read_full(r).map(Box::new)
    }
    fn changes(&self, baseline: &Self) -> u64 {
        (**self).changes(baseline)
    }
    fn write_changes(&self, baseline: &Self, changes: u64, out: &mut Vec<u8>) {
        (**self).write_changes(baseline, changes, out);
    }
    fn read_changes(baseline: &Self, changes: u64, r: &mut Reader<'_>) -> Result<Self, StateError> {
        T::read_changes(baseline, changes, r).map(Box::new)
    }
    fn delta_header(&self, baseline: &Self) -> u64 {
        (**self).delta_header(baseline)
    }
    fn write_delta_body(&self, baseline: &Self, header: u64, out: &mut Vec<u8>) {
        (**self).write_delta_body(baseline, header, out);
    }
    fn read_delta_body(baseline: &Self, header: u64, r: &mut Reader<'_>) -> Result<Self, StateError> {
        T::read_delta_body(baseline, header, r).map(Box::new)
    }
    fn encode_full(&self, out: &mut Vec<u8>) {
        (**self).encode_full(out);
    }
    fn decode_full(bytes: &[u8]) -> Result<Self, StateError> {
        T::decode_full(bytes).map(Box::new)
    }
    fn encode_delta(&self, baseline: &Self, out: &mut Vec<u8>) {
        (**self).encode_delta(baseline, out);
    }
    fn apply_delta(baseline: &Self, delta: &[u8]) -> Result<Self, StateError> {
        T::apply_delta(baseline, delta).map(Box::new)
    }
}

/// Writes a `Vec` field: a varint length and the elements.
pub fn write_vec<T: Replicate>(v: &[T], out: &mut Vec<u8>) {
    put_varint(out, v.len() as u64);
    for e in v {
        e.write_full(out);
    }
}

/// Reads a `Vec` field of at most `max_len` elements. The length is checked against the
/// cap before anything is allocated, and the allocation is at most the bytes left.
pub fn read_vec<T: Replicate>(r: &mut Reader<'_>, max_len: usize) -> Result<Vec<T>, StateError> {
    let len = r.varint_max(max_len as u64, "vec length")? as usize;
    let mut v = Vec::with_capacity(len.min(r.remaining()));
    for _ in 0..len {
        v.push(T::read_full(r)?);
    }
    Ok(v)
}

/// Whether two `Vec` fields differ.
pub fn vec_changes<T: Replicate>(v: &[T], baseline: &[T]) -> u64 {
    u64::from(v.len() != baseline.len() || v.iter().zip(baseline).any(|(a, b)| a.delta_header(b) != 0))
}

/// `Vec<T>`: a varint length and the elements, at most [`DEFAULT_MAX_LEN`] of them on
/// decode (`#[replicate(max_len = N)]` sets another cap). A changed `Vec` is sent whole.
impl<T: Replicate> Replicate for Vec<T> {
    fn write_full(&self, out: &mut Vec<u8>) {
        write_vec(self, out);
    }
    fn read_full(r: &mut Reader<'_>) -> Result<Self, StateError> {
        read_vec(r, DEFAULT_MAX_LEN)
    }
    fn changes(&self, baseline: &Self) -> u64 {
        vec_changes(self, baseline)
    }
    fn write_changes(&self, _: &Self, _: u64, out: &mut Vec<u8>) {
        write_vec(self, out);
    }
    fn read_changes(_: &Self, _: u64, r: &mut Reader<'_>) -> Result<Self, StateError> {
        read_vec(r, DEFAULT_MAX_LEN)
    }
}

/// Tuples: the elements in order; each element keeps its own mask bits (a `(f32, f32)`
/// takes two), so a delta carries only the elements that changed.
macro_rules! tuple_impl {
    ($(($($t:ident $i:tt),+)),*) => {$(
        impl<$($t: Replicate),+> Replicate for ($($t,)+) {
            const MASK_BITS: u32 = 0 $(+ $t::MASK_BITS)+;

            fn write_full(&self, out: &mut Vec<u8>) {
                $(self.$i.write_full(out);)+
            }
            fn read_full(r: &mut Reader<'_>) -> Result<Self, StateError> {
                Ok(($($t::read_full(r)?,)+))
            }
            fn changes(&self, baseline: &Self) -> u64 {
                let mut mask = 0u64;
                let mut offset = 0u32;
                $(
                    mask |= super::place_bits(self.$i.changes(&baseline.$i), offset);
                    offset += $t::MASK_BITS;
                )+
                let _ = offset;
                mask
            }
            fn write_changes(&self, baseline: &Self, changes: u64, out: &mut Vec<u8>) {
                let mut offset = 0u32;
                $(
                    let c = mask_bits(changes, offset, $t::MASK_BITS);
                    if c != 0 {
                        self.$i.write_changes(&baseline.$i, c, out);
                    }
                    offset += $t::MASK_BITS;
                )+
                let _ = offset;
            }
            fn read_changes(baseline: &Self, changes: u64, r: &mut Reader<'_>) -> Result<Self, StateError> {
                let mut offset = 0u32;
                let value = ($(
                    {
                        let c = mask_bits(changes, offset, $t::MASK_BITS);
                        offset += $t::MASK_BITS;
                        if c != 0 { $t::read_changes(&baseline.$i, c, r)? } else { baseline.$i.clone() }
                    },
                )+);
                let _ = offset;
                Ok(value)
            }
        }
    )*};
}
tuple_impl!((A 0, B 1), (A 0, B 1, C 2), (A 0, B 1, C 2, D 3));
