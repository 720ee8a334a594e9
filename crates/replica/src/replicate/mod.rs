//! Replication codecs a game derives instead of writing by hand: the [`Replicate`] trait,
//! implemented by `#[derive(Replicate)]` (crate `worldmesh-derive`, re-exported as
//! [`crate::Replicate`]) for a game's structs and enums and here for the field types they
//! are built from.
//!
//! Colyseus ships object state as deltas against the last acknowledged baseline
//! (paper `000` §5 "Replica consistency", §7: "delta encoding" of updates). A derived
//! codec writes:
//!
//! ```text
//! full(struct)  = field*                          (declaration order, skipped fields omitted)
//! full(enum)    = variant:varint field*
//! delta         = header:varint body              (header 0: nothing changed, no body)
//! header(struct)= change mask: each field owns Replicate::MASK_BITS consecutive bits
//!                 (a Point3 three, one per coordinate; most types one), in order
//! body(struct)  = the changed fields' deltas, in order
//! header(enum)  = mask              same variant: the mask of the variant's fields, as for a
//!                                   struct; a one-field (newtype) variant uses its field's
//!                                   own header, so `Player(Player)` costs no byte more
//!                                   than `Player`
//!               | 1 << W | variant << (W + 1)
//!                                   the variant changed (W: the widest variant's mask
//!                                   bits): its fields follow in full
//! ```
//!
//! Field encodings: `u8`, `i8`, `bool` one byte; other integers LEB128 varints (signed ones
//! zigzag); `f32`/`f64` exact little-endian bits (non-finite values are refused on decode),
//! and in deltas the zigzag varint of the difference of their order-preserving integer
//! images (3 bytes instead of 4 for a move of under 2^20 float steps — 64 units near
//! 1000, 16 near 200 —, at most 5; exact, so replicas hold bit for bit what the primary
//! holds); `#[replicate(quantize = STEP)]` on `f32` or
//! [`Point3`] fields stores `round(v / STEP)` as a zigzag varint and, in deltas, the
//! difference to the baseline where that is smaller ([`Quantize`]); `Option` a tag byte;
//! `Vec` a varint length (at most [`DEFAULT_MAX_LEN`] or `#[replicate(max_len = N)]`) and
//! the elements; [`ObjectId`] and [`NodeId`] varints.
//!
//! Decoding never trusts its input: every read is bounds-checked, lengths are capped before
//! anything is allocated, unknown variants, tags and mask bits, non-finite floats and
//! trailing bytes are errors ([`StateError`], naming the type and field), and no input makes
//! a decoder panic (property-tested in `tests/replicate.rs`).

mod impls;
mod quantize;

pub use impls::{read_vec, vec_changes, write_vec};
pub use quantize::{QUANTIZED_LIMIT, Quantize, dequantize, quantize};

use crate::object::StateError;
#[cfg(doc)]
use worldmesh_core::{NodeId, ObjectId, Point3};

/// How many elements a `Vec` field may hold on decode when it has no
/// `#[replicate(max_len = N)]`.
pub const DEFAULT_MAX_LEN: usize = 1024;

/// A value worldmesh can replicate: full state, and deltas against a baseline.
///
/// Derive it (`#[derive(Replicate)]`, see [`crate::Replicate`]) for a game's object types;
/// the field types it is built from (integers, floats, `bool`, [`Point3`], [`ObjectId`],
/// [`NodeId`], `Option`, `Vec`, tuples, other derived types) implement it here. The four
/// provided methods — [`Replicate::encode_full`], [`Replicate::decode_full`],
/// [`Replicate::encode_delta`], [`Replicate::apply_delta`] — are what a
/// [`crate::GameObject`] needs; [`crate::replicate_codec!`] writes those methods for it in
/// one line. The other methods are the building blocks derived code calls for each field;
/// implement them by hand only for a field type of your own.
///
/// Contract: `read_full` reads back exactly what `write_full` wrote; with
/// `c = a.changes(b)` non-zero, `read_changes(b, c, ..)` reads back `a` from what
/// `a.write_changes(b, c, ..)` wrote; the same for `delta_header`/`write_delta_body`/
/// `read_delta_body`. Readers return an error, never panic, on any input.
///
/// ```
/// use worldmesh_core::Point3;
/// use worldmesh_replica::Replicate;
///
/// #[derive(Clone, Debug, PartialEq, Replicate)]
/// enum Shape {
///     Dot,
///     Ball { at: Point3, radius: f32 },
/// }
///
/// #[derive(Clone, Debug, PartialEq, Replicate)]
/// struct Thing {
///     shape: Shape,
///     #[replicate(max_len = 4)]
///     tags: Vec<u16>,
///     #[replicate(skip)]
///     scratch: u64, // primary-only
/// }
///
/// let ball = Shape::Ball { at: Point3::new(1000.0, 5.0, 0.0), radius: 2.0 };
/// let before = Thing { shape: ball, tags: vec![7], scratch: 9 };
/// let mut after = before.clone();
/// if let Shape::Ball { at, .. } = &mut after.shape {
///     at.x += 10.0; // one coordinate moved
/// }
/// let mut delta = Vec::new();
/// after.encode_delta(&before, &mut delta);
/// // Thing's mask (bit 0: shape), Shape's mask (bit 0: at.x), at.x's difference (3 bytes).
/// assert_eq!(delta.len(), 5);
/// let replica = Thing::apply_delta(&before, &delta).unwrap();
/// assert_eq!(replica, after); // exact: floats are not rounded
///
/// let mut full = Vec::new();
/// after.encode_full(&mut full);
/// assert_eq!(Thing::decode_full(&full).unwrap().scratch, 0); // skipped: Default
/// assert!(Thing::decode_full(&full[..full.len() - 1]).is_err());
/// ```
pub trait Replicate: Sized + Clone {
    /// How many bits of its parent's change mask this type takes (1 to 64). Most types
    /// take one; [`Point3`] takes three (one per coordinate), a tuple the sum of its
    /// elements'.
    const MASK_BITS: u32 = 1;

    /// How many bits [`Replicate::delta_header`] may use (at most 64).
    const HEADER_BITS: u32 = Self::MASK_BITS;

    /// Appends the full encoding.
    fn write_full(&self, out: &mut Vec<u8>);

    /// Reads a full encoding from `r`.
    fn read_full(r: &mut Reader<'_>) -> Result<Self, StateError>;

    /// Which of this type's [`Replicate::MASK_BITS`] mask bits changed from `baseline`
    /// (0: unchanged, nothing will be written for it).
    fn changes(&self, baseline: &Self) -> u64;

    /// Appends what turns `baseline` into `self`, given `changes` (non-zero, from
    /// [`Replicate::changes`]). The parent writes `changes` into its mask.
    fn write_changes(&self, baseline: &Self, changes: u64, out: &mut Vec<u8>);

    /// Reads what [`Replicate::write_changes`] wrote, given the `changes` bits the parent
    /// read from its mask.
    fn read_changes(baseline: &Self, changes: u64, r: &mut Reader<'_>) -> Result<Self, StateError>;

    /// The leading varint of a self-contained delta (0: unchanged). Defaults to
    /// [`Replicate::changes`]; derived types return their change mask, and enums fold a
    /// newtype variant's header into theirs.
    fn delta_header(&self, baseline: &Self) -> u64 {
        self.changes(baseline)
    }

    /// Appends the body that follows a non-zero [`Replicate::delta_header`].
    fn write_delta_body(&self, baseline: &Self, header: u64, out: &mut Vec<u8>) {
        self.write_changes(baseline, header, out);
    }

    /// Reads the body that follows a non-zero header.
    fn read_delta_body(baseline: &Self, header: u64, r: &mut Reader<'_>) -> Result<Self, StateError> {
        Self::read_changes(baseline, header, r)
    }

    /// Appends the full state (what `GameObject::encode_state` sends).
    fn encode_full(&self, out: &mut Vec<u8>) {
        self.write_full(out);
    }

    /// Decodes a full state; the whole of `bytes` must be used.
    fn decode_full(bytes: &[u8]) -> Result<Self, StateError> {
        let mut r = Reader::new(bytes);
        let value = Self::read_full(&mut r)?;
        r.finish()?;
        Ok(value)
    }

    /// Appends a delta that turns `baseline` into `self`: the header varint, then (if it
    /// is not 0) the changed fields.
    fn encode_delta(&self, baseline: &Self, out: &mut Vec<u8>) {
        let header = self.delta_header(baseline);
        put_varint(out, header);
        if header != 0 {
            self.write_delta_body(baseline, header, out);
        }
    }

    /// Applies a delta made by [`Replicate::encode_delta`] against `baseline`; the whole
    /// of `delta` must be used.
    fn apply_delta(baseline: &Self, delta: &[u8]) -> Result<Self, StateError> {
        let mut r = Reader::new(delta);
        let header = r.varint()?;
        let value = if header == 0 {
            baseline.clone()
        } else {
            Self::read_delta_body(baseline, header, &mut r)?
        };
        r.finish()?;
        Ok(value)
    }
}

/// Writes the four codec methods of [`crate::GameObject`] (`encode_state`,
/// `decode_state`, `encode_delta`, `apply_delta`) for a type that implements
/// [`Replicate`]. Use it inside the `impl GameObject for …` block; leave it out to keep
/// writing those methods by hand.
///
/// ```
/// use worldmesh_core::{Aabb, Point3};
/// use worldmesh_replica::{GameObject, Replicate, ThinkContext};
///
/// #[derive(Clone, Debug, Replicate)]
/// struct Crate {
///     #[replicate(quantize = 0.01)]
///     pos: Point3,
///     hits: u16,
/// }
///
/// impl GameObject for Crate {
///     type World = ();
///     type Write = u16;
///     fn think(&mut self, _: &mut ThinkContext<'_, Self>) {}
///     fn position(&self) -> Point3 { self.pos }
///     fn interest(&self, _world: &Self::World) -> Option<Aabb> { None }
///     fn apply_write(&mut self, hits: &u16) { self.hits += hits }
///     worldmesh_replica::replicate_codec!();
/// }
///
/// let a = Crate { pos: Point3::new(1.0, 2.0, 0.0), hits: 0 };
/// let b = Crate { hits: 3, ..a.clone() };
/// let mut delta = Vec::new();
/// GameObject::encode_delta(&b, &a, &mut delta);
/// // Change mask: `pos` owns bits 0-2 (one per coordinate), `hits` bit 3; then hits = 3.
/// assert_eq!(delta, [0b1000, 3]);
/// assert_eq!(<Crate as GameObject>::apply_delta(&a, &delta).unwrap().hits, 3);
///
/// let mut full = Vec::new();
/// GameObject::encode_state(&b, &mut full);
/// // x = 100 steps, y = 200, z = 0 as zigzag varints (200, 400, 0), then hits.
/// assert_eq!(full, [200, 1, 144, 3, 0, 3]);
/// assert!(<Crate as GameObject>::decode_state(&full[..5]).is_err());
/// ```
#[macro_export]
macro_rules! replicate_codec {
    () => {
        fn encode_state(&self, out: &mut ::std::vec::Vec<u8>) {
            $crate::replicate::Replicate::encode_full(self, out)
        }
        fn decode_state(bytes: &[u8]) -> ::std::result::Result<Self, $crate::StateError> {
            <Self as $crate::replicate::Replicate>::decode_full(bytes)
        }
        fn encode_delta(&self, baseline: &Self, out: &mut ::std::vec::Vec<u8>) {
            $crate::replicate::Replicate::encode_delta(self, baseline, out)
        }
        fn apply_delta(baseline: &Self, delta: &[u8]) -> ::std::result::Result<Self, $crate::StateError> {
            <Self as $crate::replicate::Replicate>::apply_delta(baseline, delta)
        }
    };
}

/// A cursor over untrusted bytes: every read is bounds-checked and fails with a
/// [`StateError`] instead of panicking.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    bytes: &'a [u8],
}

// The small readers and writers are `#[inline]`: derived codecs call them from the game's
// crate, once per field, on every update.
impl<'a> Reader<'a> {
    /// A reader of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.bytes.len()
    }

    /// The next `n` bytes.
    #[inline]
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], StateError> {
        if self.bytes.len() < n {
            return Err(StateError::Truncated {
                needed: n,
                left: self.bytes.len(),
            });
        }
        let (head, tail) = self.bytes.split_at(n);
        self.bytes = tail;
        Ok(head)
    }

    /// The next `N` bytes as an array.
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], StateError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    /// The next byte.
    #[inline]
    pub fn byte(&mut self) -> Result<u8, StateError> {
        Ok(self.array::<1>()?[0])
    }

    /// A LEB128 varint of at most 10 bytes that fits in a `u64`.
    #[inline]
    pub fn varint(&mut self) -> Result<u64, StateError> {
        read_varint(&mut self.bytes).map_err(|e| match e {
            VarintError::Truncated => StateError::Truncated { needed: 1, left: 0 },
            VarintError::Overflow => StateError::invalid("varint", "overflows 64 bits"),
            VarintError::TooLong => StateError::invalid("varint", "longer than 10 bytes"),
        })
    }

    /// A varint that must not exceed `max` (`what` names it in the error).
    pub fn varint_max(&mut self, max: u64, what: &'static str) -> Result<u64, StateError> {
        let v = self.varint()?;
        if v > max {
            return Err(StateError::invalid(what, format_args!("{v} exceeds {max}")));
        }
        Ok(v)
    }

    /// Fails unless every byte was read.
    #[inline]
    pub fn finish(&self) -> Result<(), StateError> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(StateError::TrailingBytes(self.bytes.len()))
        }
    }
}

/// Why [`read_varint`] could not read a varint.
pub(crate) enum VarintError {
    /// The input ended inside it.
    Truncated,
    /// Its tenth byte carries bits beyond 64.
    Overflow,
    /// It has more than 10 bytes.
    TooLong,
}

/// Reads a LEB128 varint of at most 10 bytes that fits in a `u64` from the front of
/// `bytes` and advances past what it read: the one decoder of the object states'
/// [`Reader`] and of the replica packets' codec.
///
/// The one-byte case (most counts, lengths and small values) is inlined into every caller;
/// longer varints go through the loop of [`read_long_varint`].
#[inline(always)]
pub(crate) fn read_varint(bytes: &mut &[u8]) -> Result<u64, VarintError> {
    if let [b, rest @ ..] = *bytes
        && *b < 0x80
    {
        *bytes = rest;
        return Ok(u64::from(*b));
    }
    read_long_varint(bytes)
}

/// [`read_varint`] for any length, byte by byte.
fn read_long_varint(bytes: &mut &[u8]) -> Result<u64, VarintError> {
    let mut value = 0u64;
    for i in 0..10 {
        let [b, rest @ ..] = *bytes else {
            return Err(VarintError::Truncated);
        };
        *bytes = rest;
        let bits = u64::from(b & 0x7f);
        if i == 9 && bits > 1 {
            return Err(VarintError::Overflow);
        }
        value |= bits << (7 * i);
        if b & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(VarintError::TooLong)
}

/// Appends `v` as a LEB128 varint (1 to 10 bytes).
#[inline]
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Zigzag: small magnitudes of either sign map to small unsigned numbers.
#[inline]
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Inverse of [`zigzag`].
#[inline]
pub fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// The `width` bits of `mask` starting at bit `offset` (derived code's view of one
/// field's changes; any width and offset, no overflow).
#[doc(hidden)]
pub const fn mask_bits(mask: u64, offset: u32, width: u32) -> u64 {
    let shifted = match mask.checked_shr(offset) {
        Some(v) => v,
        None => 0,
    };
    if width >= 64 {
        shifted
    } else {
        shifted & ((1u64 << width) - 1)
    }
}

/// `bits` placed at `offset` in a mask (0 if it falls off the top).
#[doc(hidden)]
pub const fn place_bits(bits: u64, offset: u32) -> u64 {
    match bits.checked_shl(offset) {
        Some(v) => v,
        None => 0,
    }
}

/// Fails if `mask` has any bit at or above `width` (a mask bit no field owns).
#[doc(hidden)]
#[inline]
pub fn check_mask(mask: u64, width: u32, what: &str) -> Result<(), StateError> {
    if mask.checked_shr(width).unwrap_or(0) != 0 {
        return Err(
            StateError::invalid("change mask", format_args!("unknown bits in {mask:#x}")).within(what),
        );
    }
    Ok(())
}

/// The larger of two numbers, in constant context (derived `HEADER_BITS`).
#[doc(hidden)]
pub const fn max_bits(a: u32, b: u32) -> u32 {
    if a > b { a } else { b }
}

/// Bits needed to write `n` (0 needs none).
#[doc(hidden)]
pub const fn bits_for(n: u64) -> u32 {
    64 - n.leading_zeros()
}

/// Reads a nested self-contained delta (a field whose type takes one mask bit and writes
/// its own header): the header must be non-zero, since the parent said it changed.
#[doc(hidden)]
pub fn read_nested_delta<T: Replicate>(baseline: &T, r: &mut Reader<'_>) -> Result<T, StateError> {
    let header = r.varint()?;
    if header == 0 {
        return Err(StateError::invalid(
            "nested delta",
            "empty, though its field changed",
        ));
    }
    T::read_delta_body(baseline, header, r)
}

/// Writes a nested self-contained delta (see [`read_nested_delta`]).
#[doc(hidden)]
pub fn write_nested_delta<T: Replicate>(value: &T, baseline: &T, out: &mut Vec<u8>) {
    let header = value.delta_header(baseline);
    put_varint(out, header);
    if header != 0 {
        value.write_delta_body(baseline, header, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every value round-trips, and each way a varint can be bad gives its own error, in
    /// the object states' reader and in the packets' codec alike.
    #[test]
    fn varints_read_back_and_bad_ones_are_refused() {
        for v in [0, 1, 0x7f, 0x80, 300, u64::from(u32::MAX), u64::MAX - 1, u64::MAX] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            let mut r = Reader::new(&out);
            assert_eq!(r.varint(), Ok(v));
            assert_eq!(r.finish(), Ok(()));
        }
        // A non-minimal encoding of 0 is read as 0, as before.
        assert_eq!(Reader::new(&[0x80, 0x00]).varint(), Ok(0));
        // Ten bytes whose last fits in 64 bits but says more follow.
        let mut too_long = [0xff; 11];
        too_long[9] = 0x81;
        let mut overflow = [0xff; 10];
        overflow[9] = 0x02;
        let mut fits = [0xff; 10];
        fits[9] = 0x01;
        assert_eq!(Reader::new(&fits).varint(), Ok(u64::MAX));
        let cases: [(&[u8], StateError); 4] = [
            (&[], StateError::Truncated { needed: 1, left: 0 }),
            (&[0x80, 0x80], StateError::Truncated { needed: 1, left: 0 }),
            (&overflow, StateError::invalid("varint", "overflows 64 bits")),
            (&too_long, StateError::invalid("varint", "longer than 10 bytes")),
        ];
        for (bytes, err) in cases {
            assert_eq!(Reader::new(bytes).varint(), Err(err), "{bytes:?}");
        }
        // The codec maps the same failures onto its own errors.
        let mut b: &[u8] = &[0x80];
        assert!(matches!(read_varint(&mut b), Err(VarintError::Truncated)));
        let mut b: &[u8] = &overflow;
        assert!(matches!(read_varint(&mut b), Err(VarintError::Overflow)));
        let mut b: &[u8] = &too_long;
        assert!(matches!(read_varint(&mut b), Err(VarintError::TooLong)));
    }
}
