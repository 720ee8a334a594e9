//! `#[derive(Replicate)]`: full and delta round trips for random values and random field
//! changes, decoders fed random, truncated, extended and corrupted bytes, quantisation
//! error, and the encoded sizes the format promises.

use proptest::prelude::*;
use worldmesh_core::{NodeId, ObjectId, Point3};
use worldmesh_replica::replicate::{
    DEFAULT_MAX_LEN, QUANTIZED_LIMIT, Reader, dequantize, quantize, read_vec,
};
use worldmesh_replica::{Replicate, StateError};

/// Directions at most unit length (a `check` hook).
fn short(inner: &Inner) -> Result<(), StateError> {
    let (x, y) = inner.dir;
    if x * x + y * y > 1.0 {
        return Err(StateError::check("direction longer than 1"));
    }
    Ok(())
}

#[derive(Clone, Debug, PartialEq, Replicate)]
#[replicate(check = short)]
struct Inner {
    dir: (f32, f32),
    tick: u32,
}

#[derive(Clone, Debug, PartialEq, Default, Replicate)]
enum Mode {
    #[default]
    Idle,
    Walking(u16, i32),
    Aiming {
        at: Point3,
        charge: u8,
    },
    Carry(Inner),
}

#[derive(Clone, Debug, PartialEq, Replicate)]
struct Everything {
    a: u8,
    b: i8,
    c: u16,
    d: u32,
    e: u64,
    f: i16,
    g: i32,
    h: i64,
    u: usize,
    i: isize,
    flag: bool,
    x: f32,
    y: f64,
    pos: Point3,
    #[replicate(quantize = 0.01)]
    qpos: Point3,
    #[replicate(quantize = 0.5)]
    qf: f32,
    id: ObjectId,
    node: NodeId,
    opt: Option<u32>,
    inner: Option<Inner>,
    #[replicate(max_len = 8)]
    list: Vec<u16>,
    items: Vec<Inner>,
    pair: (f32, u8),
    mode: Mode,
    #[replicate(skip)]
    cache: Vec<u64>,
}

/// A tuple struct and a generic one.
#[derive(Clone, Debug, PartialEq, Replicate)]
struct Pair<T>(T, u8);

fn finite() -> impl Strategy<Value = f32> {
    prop::num::f32::ANY.prop_filter("finite", |v| v.is_finite())
}

fn finite64() -> impl Strategy<Value = f64> {
    prop::num::f64::ANY.prop_filter("finite", |v| v.is_finite())
}

fn point() -> impl Strategy<Value = Point3> {
    (finite(), finite(), finite()).prop_map(|(x, y, z)| Point3::new(x, y, z))
}

/// Coordinates inside the quantised range of a 0.01 step (with a margin).
fn qpoint() -> impl Strategy<Value = Point3> {
    let c = || -40_000.0f32..40_000.0;
    (c(), c(), c()).prop_map(|(x, y, z)| Point3::new(x, y, z))
}

fn inner() -> impl Strategy<Value = Inner> {
    (-0.7f32..0.7, -0.7f32..0.7, any::<u32>()).prop_map(|(x, y, tick)| Inner { dir: (x, y), tick })
}

fn mode() -> impl Strategy<Value = Mode> {
    prop_oneof![
        Just(Mode::Idle),
        (any::<u16>(), any::<i32>()).prop_map(|(a, b)| Mode::Walking(a, b)),
        (point(), any::<u8>()).prop_map(|(at, charge)| Mode::Aiming { at, charge }),
        inner().prop_map(Mode::Carry),
    ]
}

prop_compose! {
    fn everything()(
        ints in (any::<u8>(), any::<i8>(), any::<u16>(), any::<u32>(), any::<u64>(), any::<i16>(), any::<i32>(), any::<i64>(), any::<usize>(), any::<isize>()),
        (flag, x, y, pos, qpos, qf) in (any::<bool>(), finite(), finite64(), point(), qpoint(), -1.0e6f32..1.0e6),
        (origin, seq, node, opt) in (any::<u32>(), any::<u64>(), any::<u32>(), any::<Option<u32>>()),
        (inner, list, items) in (prop::option::of(inner()), prop::collection::vec(any::<u16>(), 0..=8), prop::collection::vec(inner(), 0..4)),
        (pair, mode, cache) in ((finite(), any::<u8>()), mode(), prop::collection::vec(any::<u64>(), 0..3)),
    ) -> Everything {
        let (a, b, c, d, e, f, g, h, u, i) = ints;
        Everything {
            a, b, c, d, e, f, g, h, u, i, flag, x, y, pos, qpos, qf,
            id: ObjectId { origin: NodeId(origin), seq },
            node: NodeId(node), opt, inner, list, items, pair, mode, cache,
        }
    }
}

/// `base` with the fields selected by `pick` (bit per field) taken from `other`.
fn mix(base: &Everything, other: &Everything, pick: u32) -> Everything {
    let mut v = base.clone();
    let take = |bit: u32| pick & (1 << bit) != 0;
    macro_rules! from_other {
        ($($bit:literal $f:ident),*) => {$( if take($bit) { v.$f = other.$f.clone(); } )*};
    }
    from_other!(0 a, 1 b, 2 c, 3 d, 4 e, 5 f, 6 g, 7 h, 8 u, 9 i, 10 flag, 11 x, 12 y, 13 pos, 14 qpos,
        15 qf, 16 id, 17 node, 18 opt, 19 inner, 20 list, 21 items, 22 pair, 23 mode, 24 cache);
    // Single coordinates too, so a Point3 delta carries one or two components.
    if take(25) {
        v.pos.y = other.pos.y;
    }
    if take(26) {
        v.qpos.z = other.qpos.z;
    }
    if take(27)
        && let (Mode::Carry(a), Mode::Carry(b)) = (&mut v.mode, &other.mode)
    {
        a.tick = b.tick; // same variant, one field changed: a nested delta
    }
    v
}

/// Asserts `got` is `want` as replicated: every field exact, quantised fields within half
/// a step (plus the f32 rounding of the result), the skipped field `cache` as `cache`.
fn assert_replicates(got: &Everything, want: &Everything, cache: &[u64]) {
    let half_step = |got: f32, want: f32, step: f32| {
        let bound = 0.5 * step + f32::EPSILON * want.abs().max(1.0);
        assert!(
            (got - want).abs() <= bound,
            "{got} is not within {bound} of {want}"
        );
    };
    for (g, w) in [
        (got.qpos.x, want.qpos.x),
        (got.qpos.y, want.qpos.y),
        (got.qpos.z, want.qpos.z),
    ] {
        half_step(g, w, 0.01);
    }
    half_step(got.qf, want.qf, 0.5);
    let mut rest = want.clone();
    rest.qpos = got.qpos;
    rest.qf = got.qf;
    rest.cache = cache.to_vec();
    assert_eq!(got, &rest);
}

/// The same fields as [`Boxed`], unboxed: boxing must not change a byte.
#[derive(Clone, Debug, PartialEq, Replicate)]
struct Flat {
    x: u16,
    inner: Option<Inner>,
    mode: Mode,
}

#[derive(Clone, Debug, PartialEq, Replicate)]
struct Boxed {
    x: u16,
    inner: Option<Box<Inner>>,
    mode: Box<Mode>,
}

impl Flat {
    fn boxed(&self) -> Boxed {
        Boxed {
            x: self.x,
            inner: self.inner.clone().map(Box::new),
            mode: Box::new(self.mode.clone()),
        }
    }
}

fn flat() -> impl Strategy<Value = Flat> {
    (any::<u16>(), prop::option::of(inner()), mode()).prop_map(|(x, inner, mode)| Flat { x, inner, mode })
}

fn full(v: &impl Replicate) -> Vec<u8> {
    let mut out = Vec::new();
    v.encode_full(&mut out);
    out
}

fn delta<T: Replicate>(v: &T, baseline: &T) -> Vec<u8> {
    let mut out = Vec::new();
    v.encode_delta(baseline, &mut out);
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn full_state_round_trips(v in everything()) {
        let got = Everything::decode_full(&full(&v)).unwrap();
        assert_replicates(&got, &v, &[]);
    }

    /// The receiver holds what it decoded of the baseline; the sender diffs against its
    /// own (unquantised) baseline. Applying the delta gives what a full state would.
    #[test]
    fn delta_round_trips_for_random_field_changes(b in everything(), other in everything(), pick in any::<u32>()) {
        let a = mix(&b, &other, pick);
        let mut received = Everything::decode_full(&full(&b)).unwrap();
        received.cache = vec![7, 7]; // local, never replicated: kept across deltas
        let d = delta(&a, &b);
        let got = Everything::apply_delta(&received, &d).unwrap();
        assert_replicates(&got, &a, &[7, 7]);
        let mut via_full = Everything::decode_full(&full(&a)).unwrap();
        via_full.cache = vec![7, 7];
        prop_assert_eq!(&got, &via_full);
        // A delta of an unchanged value is the single byte 0.
        prop_assert_eq!(delta(&b, &b), vec![0]);
    }

    /// `Box<T>` encodes as `T`, full and delta, and decodes to the same values; a
    /// boxed field's check hook still refuses (a direction longer than 1).
    #[test]
    fn boxed_fields_encode_and_decode_as_the_unboxed_ones(a in flat(), b in flat(), long in 0.75f32..2.0) {
        let (ba, bb) = (a.boxed(), b.boxed());
        prop_assert_eq!(full(&ba), full(&a));
        prop_assert_eq!(Boxed::decode_full(&full(&a)).unwrap(), ba.clone());
        let d = delta(&a, &b);
        prop_assert_eq!(delta(&ba, &bb), d.clone());
        prop_assert_eq!(Boxed::apply_delta(&bb, &d).unwrap(), ba);
        let bad = Flat { inner: Some(Inner { dir: (long, long), tick: 1 }), ..a };
        prop_assert!(Boxed::decode_full(&full(&bad)).is_err());
        prop_assert!(Boxed::apply_delta(&bb, &delta(&bad, &b)).is_err());
    }

    #[test]
    fn enum_delta_round_trips(a in mode(), b in mode()) {
        let got = Mode::apply_delta(&b, &delta(&a, &b)).unwrap();
        prop_assert_eq!(got, a);
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200), b in everything()) {
        let _ = Everything::decode_full(&bytes);
        let _ = Everything::apply_delta(&b, &bytes);
        let _ = Mode::decode_full(&bytes);
        let _ = Mode::apply_delta(&b.mode, &bytes);
    }

    #[test]
    fn truncated_extended_and_corrupted_encodings(b in everything(), other in everything(), pick in any::<u32>(), extra in any::<u8>(), flip in any::<(usize, u8)>()) {
        let a = mix(&b, &other, pick);
        let received = Everything::decode_full(&full(&b)).unwrap();
        for (bytes, is_full) in [(full(&a), true), (delta(&a, &b), false)] {
            let decode = |x: &[u8]| if is_full { Everything::decode_full(x) } else { Everything::apply_delta(&received, x) };
            for cut in 0..bytes.len() {
                prop_assert!(decode(&bytes[..cut]).is_err(), "prefix of {} of {} bytes decoded", cut, bytes.len());
            }
            let mut longer = bytes.clone();
            longer.push(extra);
            prop_assert!(decode(&longer).is_err());
            let mut corrupt = bytes.clone();
            let at = flip.0 % corrupt.len();
            corrupt[at] ^= flip.1;
            let _ = decode(&corrupt); // Ok or Err, never a panic
        }
    }

    /// Quantisation error is at most half a step (plus the rounding of the result to f32),
    /// and a decoded value quantises back to the same step count, so sender and receiver
    /// agree on every baseline.
    #[test]
    fn quantisation_error_is_at_most_half_a_step(v in -40_000.0f32..40_000.0, step in prop::sample::select(vec![0.001f32, 0.01, 0.125, 0.5, 1.0, 8.0])) {
        prop_assume!((f64::from(v) / f64::from(step)).abs() < QUANTIZED_LIMIT as f64);
        let got = dequantize(quantize(v, step), step);
        let bound = 0.5 * step + f32::EPSILON * v.abs().max(1.0);
        prop_assert!((got - v).abs() <= bound, "{} -> {} (bound {})", v, got, bound);
        prop_assert_eq!(quantize(got, step), quantize(v, step));
    }

    #[test]
    fn generic_and_tuple_structs_round_trip(a in (finite(), any::<u8>()), b in (finite(), any::<u8>())) {
        let (a, b) = (Pair(a.0, a.1), Pair(b.0, b.1));
        prop_assert_eq!(Pair::<f32>::decode_full(&full(&a)).unwrap(), a.clone());
        prop_assert_eq!(Pair::apply_delta(&b, &delta(&a, &b)).unwrap(), a);
    }
}

fn walker(x: f32) -> Everything {
    Everything {
        a: 1,
        b: -1,
        c: 300,
        d: 70_000,
        e: 1,
        f: -2,
        g: 5,
        h: -5,
        u: 9,
        i: -9,
        flag: true,
        x,
        y: 0.5,
        pos: Point3::new(x, 200.0, 0.0),
        qpos: Point3::new(1.0, 2.0, 3.0),
        qf: 4.0,
        id: ObjectId::new(NodeId(3), 9),
        node: NodeId(4),
        opt: None,
        inner: None,
        list: vec![],
        items: vec![],
        pair: (0.0, 0),
        mode: Mode::Idle,
        cache: vec![],
    }
}

#[test]
fn a_small_move_costs_a_mask_and_three_bytes_per_coordinate() {
    let (b, mut a) = (walker(1000.0), walker(1000.0));
    a.pos.x = 1031.25;
    a.pos.y = 215.5;
    // pos owns mask bits 13..16 (after 11 one-bit fields and x, y): a three-byte mask.
    let d = delta(&a, &b);
    assert_eq!(d.len(), 3 + 3 + 3, "{d:?}");
    // The exact value comes back, not an approximation.
    let got = Everything::apply_delta(&b, &d).unwrap();
    assert_eq!(got.pos.x.to_bits(), 1031.25f32.to_bits());
    assert_eq!(got.pos.y.to_bits(), 215.5f32.to_bits());
}

#[test]
fn enum_newtype_variant_shares_its_header() {
    let a = Mode::Carry(Inner {
        dir: (0.5, 0.0),
        tick: 1,
    });
    let b = Mode::Carry(Inner {
        dir: (0.5, 0.0),
        tick: 2,
    });
    // Header: Inner's own mask (tick = bit 2, after the two bits of `dir`), then the
    // tick: two bytes in all, as for a bare Inner.
    assert_eq!(delta(&b, &a), vec![0b100, 2]);
    // A variant change sets the bit above the widest variant's mask (Aiming: Point3 + u8 =
    // 4 bits, so bit 4), with the variant index above it; then the fields in full.
    assert_eq!(delta(&Mode::Walking(1, -1), &a), vec![(1 << 4) | (1 << 5), 1, 1]);
    assert_eq!(delta(&Mode::Idle, &a), vec![1 << 4]);
    // The marker bit clear but bits above it set: refused.
    let err = Mode::apply_delta(&a, &[1 << 5]).unwrap_err();
    assert_eq!(err.path(), Some("Mode"), "{err}");
    assert_eq!(err.root(), &StateError::invalid("delta header", "0x20"), "{err}");
}

#[test]
fn check_hook_refuses_invalid_state_from_full_and_delta() {
    let ok = Inner {
        dir: (0.6, 0.0),
        tick: 0,
    };
    let fast = Inner {
        dir: (3.0, 0.0),
        tick: 0,
    };
    let err = Inner::decode_full(&full(&fast)).unwrap_err();
    assert_eq!(err, StateError::check("direction longer than 1").within("Inner"));
    assert_eq!(err.to_string(), "Inner: direction longer than 1");
    assert!(Inner::apply_delta(&ok, &delta(&fast, &ok)).is_err());
    assert!(
        Mode::apply_delta(
            &Mode::Carry(ok.clone()),
            &delta(&Mode::Carry(fast), &Mode::Carry(ok))
        )
        .is_err()
    );
}

#[test]
fn errors_name_the_field() {
    let mut bytes = full(&walker(1.0));
    // `flag` is the 11th field: a, b (1 byte each), c (2), d (3), e, f, g, h, u, i (1 each).
    bytes[13] = 7;
    let err = Everything::decode_full(&bytes).unwrap_err();
    assert_eq!(err.path(), Some("Everything.flag"), "{err}");
    assert_eq!(err.root(), &StateError::invalid("bool", 7), "{err}");
    assert_eq!(err.to_string(), "Everything.flag: invalid bool: 7");
    let err = Everything::decode_full(&[]).unwrap_err();
    assert_eq!(err.path(), Some("Everything.a"), "{err}");
    assert_eq!(err.root(), &StateError::Truncated { needed: 1, left: 0 }, "{err}");
}

#[test]
fn lengths_are_capped_before_allocating() {
    let mut v = walker(1.0);
    v.list = vec![1; 9]; // one over `max_len = 8`
    let err = Everything::decode_full(&full(&v)).unwrap_err();
    assert_eq!(err.path(), Some("Everything.list"), "{err}");
    assert_eq!(
        err.root(),
        &StateError::invalid("vec length", "9 exceeds 8"),
        "{err}"
    );
    // A length near 2^63 with three bytes behind it: refused by the cap, nothing allocated.
    let mut huge = Vec::new();
    worldmesh_replica::replicate::put_varint(&mut huge, u64::MAX >> 1);
    huge.extend_from_slice(&[0, 0, 0]);
    let err = read_vec::<u8>(&mut Reader::new(&huge), DEFAULT_MAX_LEN).unwrap_err();
    assert_eq!(
        err,
        StateError::invalid("vec length", format!("{} exceeds 1024", u64::MAX >> 1))
    );
}

#[test]
fn non_finite_floats_and_bad_masks_are_refused() {
    let mut bytes = full(&walker(1.0));
    let x_at = 14; // after the 11 integer and bool fields (14 bytes)
    bytes[x_at..x_at + 4].copy_from_slice(&f32::NAN.to_le_bytes());
    let err = Everything::decode_full(&bytes).unwrap_err();
    assert_eq!(err.root(), &StateError::invalid("f32", "not finite"), "{err}");
    // A delta turning a finite f32 into an infinity, through its difference.
    let inf = f32::INFINITY.to_bits() as i64 - 1.0f32.to_bits() as i64;
    let mut d = vec![1 << 0];
    worldmesh_replica::replicate::put_varint(&mut d, worldmesh_replica::replicate::zigzag(inf));
    assert!(f32::apply_delta(&1.0, &d).is_err());
    // Inner has three mask bits: bit 3 belongs to no field.
    let ok = Inner {
        dir: (0.0, 0.0),
        tick: 0,
    };
    let err = Inner::apply_delta(&ok, &[0b1000, 1]).unwrap_err();
    assert_eq!(err.path(), Some("Inner"), "{err}");
    assert!(
        matches!(
            err.root(),
            StateError::Invalid {
                what: "change mask",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn quantized_values_beyond_the_limit_are_refused() {
    // Full state of `Q`: one quantised f32. The largest varint (zigzag of i64::MIN) and
    // one step past the limit are errors, the limit itself decodes.
    #[derive(Clone, Debug, PartialEq, Replicate)]
    struct Q {
        #[replicate(quantize = 0.5)]
        v: f32,
    }
    use worldmesh_replica::replicate::{put_varint, zigzag};
    for (steps, ok) in [
        (i64::MIN, false),
        (i64::MAX, false),
        (QUANTIZED_LIMIT + 1, false),
        (-QUANTIZED_LIMIT - 1, false),
        (QUANTIZED_LIMIT, true),
    ] {
        let mut bytes = Vec::new();
        put_varint(&mut bytes, zigzag(steps));
        assert_eq!(Q::decode_full(&bytes).is_ok(), ok, "{steps} steps");
        // The same number as an absolute value in a delta (low bit 1).
        let mut d = vec![1];
        put_varint(&mut d, zigzag(steps) << 1 | 1);
        if steps.unsigned_abs() < 1 << 62 {
            assert_eq!(
                Q::apply_delta(&Q { v: 0.0 }, &d).is_ok(),
                ok,
                "{steps} steps in a delta"
            );
        }
    }
    // A relative delta that walks past the limit from a baseline at it.
    let mut d = vec![1];
    put_varint(&mut d, zigzag(1) << 1);
    assert!(
        Q::apply_delta(
            &Q {
                v: QUANTIZED_LIMIT as f32 * 0.5
            },
            &d
        )
        .is_err()
    );
}

/// The object layer re-exported under another path, as the `worldmesh` facade does.
mod facade {
    pub use worldmesh_replica::{StateError, replicate};
}

/// `#[replicate(crate = path)]` names the object layer's path in the generated code.
#[derive(Clone, Debug, PartialEq, Replicate)]
#[replicate(crate = crate::facade)]
struct ThroughFacade {
    a: u32,
    b: Vec<u8>,
}

#[test]
fn an_explicit_crate_path_is_used_by_the_generated_code() {
    let v = ThroughFacade { a: 7, b: vec![1, 2] };
    let mut full = Vec::new();
    v.encode_full(&mut full);
    assert_eq!(ThroughFacade::decode_full(&full), Ok(v.clone()));
    let w = ThroughFacade { a: 9, ..v.clone() };
    let mut delta = Vec::new();
    w.encode_delta(&v, &mut delta);
    assert_eq!(ThroughFacade::apply_delta(&v, &delta), Ok(w));
}
