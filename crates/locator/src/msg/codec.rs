//! The locator's message codec: [`LocatorMsg`] in exactly the bytes of its derived bitcode
//! encoding, encoded and decoded one variant at a time.
//!
//! bitcode encodes an enum column by column: the variant indices first, then, for each
//! variant in declaration order, the columns of its fields. For one message that is the
//! variant's index (one byte: with 14 variants bitcode packs two indices per byte, and one
//! index alone fills the low half) followed by the encoding of that variant's fields, the
//! other variants' columns being empty. But the derived encoder and decoder do their work
//! for every variant at every message — reserving, collecting and populating each
//! variant's columns, empty or not — which made encoding and decoding 43 % of the
//! instructions of a 64-node `dht` simulation (`crates/sim/PERFORMANCE.md`, eleventh
//! round). [`LocatorCodec`] writes the index itself and encodes only the fields of the
//! message's own variant, as a tuple or as their types (a tuple's encoding is its fields'
//! encodings one after the other); it decodes the index and then the fields of that
//! variant alone.
//!
//! The derived encoding stays the definition of the format: the tests check that every
//! variant encodes to the very bytes of `bitcode::encode`, and that the decoder accepts
//! exactly the byte strings the derived decoder accepts, with the same message. That
//! includes bitcode's leniency about the high half of the index byte, which it ignores
//! (`bitcode` 0.6.9, `unpack_arithmetic`), so a peer running either codec sees the same
//! messages.

use worldmesh_core::wire::{self, Codec};
use worldmesh_core::{Frame, MessageClass, WireError};

use super::{Handoff, Hello, LocatorMsg, MatchItem, Peer, PushItem, Routed, SubItem};
use crate::keyspace::Key;

/// Variant indices of [`LocatorMsg`], in declaration order (bitcode's numbering).
mod tag {
    pub const ROUTE: u8 = 0;
    pub const SPREAD: u8 = 1;
    pub const MATCHES: u8 = 2;
    pub const PUSH: u8 = 3;
    pub const ROUTE_HINT: u8 = 4;
    pub const PING: u8 = 5;
    pub const PONG: u8 = 6;
    pub const LINK_ACK: u8 = 7;
    pub const JOIN_REQ: u8 = 8;
    pub const JOIN_ACK: u8 = 9;
    pub const LEAVE: u8 = 10;
    pub const HANDOFF: u8 = 11;
    pub const LOAD_PROBE: u8 = 12;
    pub const LOAD_REPORT: u8 = 13;
}

/// Encodes and decodes [`LocatorMsg`] datagrams (see the module's documentation), keeping
/// bitcode's buffers between messages. One per locator.
#[derive(Debug, Default)]
pub struct LocatorCodec {
    codec: Codec,
    /// The payload being assembled (kept for its allocation).
    payload: Vec<u8>,
}

impl LocatorCodec {
    /// A codec with empty buffers.
    pub fn new() -> Self {
        Self::default()
    }

    /// `msg` as a complete datagram of its class ([`LocatorMsg::class`]): the bytes of
    /// `wire::encode(msg.class(), msg)`.
    ///
    /// # Errors
    /// [`WireError::TooLargeToSend`] if the payload exceeds [`wire::MAX_PAYLOAD`].
    pub fn encode(&mut self, msg: &LocatorMsg) -> Result<Vec<u8>, WireError> {
        let c = &mut self.codec;
        let out = &mut self.payload;
        out.clear();
        match msg {
            LocatorMsg::Route(r) => put(out, tag::ROUTE, c.encode_payload(r)),
            LocatorMsg::Spread { sub, relay, prev } => {
                put(out, tag::SPREAD, c.encode_payload(&(*sub, *relay, *prev)));
            }
            LocatorMsg::Matches { lo, hi, items } => {
                put(out, tag::MATCHES, c.encode_payload(&(*lo, *hi)));
                out.extend_from_slice(c.encode_payload(items.as_slice()));
            }
            LocatorMsg::Push { items } => put(out, tag::PUSH, c.encode_payload(items.as_slice())),
            LocatorMsg::RouteHint { lo, hi } => put(out, tag::ROUTE_HINT, c.encode_payload(&(*lo, *hi))),
            LocatorMsg::Ping(h) => put(out, tag::PING, c.encode_payload(h)),
            LocatorMsg::Pong(h) => put(out, tag::PONG, c.encode_payload(h)),
            LocatorMsg::LinkAck { pos } => put(out, tag::LINK_ACK, c.encode_payload(pos)),
            LocatorMsg::JoinReq => out.push(tag::JOIN_REQ),
            LocatorMsg::JoinAck { pos, pred, succs } => {
                put(out, tag::JOIN_ACK, c.encode_payload(&(*pos, *pred)));
                out.extend_from_slice(c.encode_payload(succs.as_slice()));
            }
            LocatorMsg::Leave { pred, succs } => {
                put(out, tag::LEAVE, c.encode_payload(pred));
                out.extend_from_slice(c.encode_payload(succs.as_slice()));
            }
            LocatorMsg::Handoff(h) => put(out, tag::HANDOFF, c.encode_payload(h)),
            LocatorMsg::LoadProbe => out.push(tag::LOAD_PROBE),
            LocatorMsg::LoadReport { milli_load, joined } => {
                put(out, tag::LOAD_REPORT, c.encode_payload(&(*milli_load, *joined)));
            }
        }
        wire::frame(msg.class(), out)
    }

    /// Decodes a frame's payload as a [`LocatorMsg`]; accepts exactly what
    /// `frame.decode::<LocatorMsg>()` accepts, as the same message (the reasons of the
    /// errors may be worded differently). The frame's class is not checked against the
    /// message's (the caller does that).
    ///
    /// # Errors
    /// [`WireError::Malformed`] for an empty payload, an unknown variant, or fields that
    /// do not decode (bitcode's reason).
    pub fn decode(&mut self, frame: &Frame<'_>) -> Result<LocatorMsg, WireError> {
        let class = frame.class;
        let Some((&first, rest)) = frame.payload.split_first() else {
            return Err(malformed(class, "empty payload".into()));
        };
        // bitcode reads the index from the byte's low half and ignores the high half.
        let c = &mut self.codec;
        Ok(match first % 16 {
            tag::ROUTE => LocatorMsg::Route(c.decode_bytes::<Routed>(class, rest)?),
            tag::SPREAD => {
                let (sub, relay, prev) = c.decode_bytes::<(SubItem, bool, u64)>(class, rest)?;
                LocatorMsg::Spread { sub, relay, prev }
            }
            tag::MATCHES => {
                let (lo, hi, items) = c.decode_bytes::<(Key, Key, Vec<MatchItem>)>(class, rest)?;
                LocatorMsg::Matches { lo, hi, items }
            }
            tag::PUSH => LocatorMsg::Push {
                items: c.decode_bytes::<Vec<PushItem>>(class, rest)?,
            },
            tag::ROUTE_HINT => {
                let (lo, hi) = c.decode_bytes::<(Key, Key)>(class, rest)?;
                LocatorMsg::RouteHint { lo, hi }
            }
            tag::PING => LocatorMsg::Ping(c.decode_bytes::<Hello>(class, rest)?),
            tag::PONG => LocatorMsg::Pong(c.decode_bytes::<Hello>(class, rest)?),
            tag::LINK_ACK => LocatorMsg::LinkAck {
                pos: c.decode_bytes::<Key>(class, rest)?,
            },
            tag::JOIN_REQ => {
                c.decode_bytes::<()>(class, rest)?;
                LocatorMsg::JoinReq
            }
            tag::JOIN_ACK => {
                let (pos, pred, succs) = c.decode_bytes::<(Key, Option<Peer>, Vec<Peer>)>(class, rest)?;
                LocatorMsg::JoinAck { pos, pred, succs }
            }
            tag::LEAVE => {
                let (pred, succs) = c.decode_bytes::<(Option<Peer>, Vec<Peer>)>(class, rest)?;
                LocatorMsg::Leave { pred, succs }
            }
            tag::HANDOFF => LocatorMsg::Handoff(c.decode_bytes::<Handoff>(class, rest)?),
            tag::LOAD_PROBE => {
                c.decode_bytes::<()>(class, rest)?;
                LocatorMsg::LoadProbe
            }
            tag::LOAD_REPORT => {
                let (milli_load, joined) = c.decode_bytes::<(u64, bool)>(class, rest)?;
                LocatorMsg::LoadReport { milli_load, joined }
            }
            other => {
                return Err(malformed(
                    class,
                    format!("unknown locator message variant {other}"),
                ));
            }
        })
    }
}

/// Starts a payload: the variant's index, then its first fields' bytes.
fn put(out: &mut Vec<u8>, tag: u8, fields: &[u8]) {
    out.push(tag);
    out.extend_from_slice(fields);
}

fn malformed(class: MessageClass, reason: String) -> WireError {
    WireError::Malformed { class, reason }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use proptest::strategy::ValueTree;
    use worldmesh_core::wire::MAX_PAYLOAD;
    use worldmesh_core::{Aabb, NodeId, ObjectId, Point3, Time};

    use super::*;
    use crate::index::SubKey;
    use crate::msg::{PathOffset, Payload, PubItem};

    fn oid((origin, seq): (u32, u64)) -> ObjectId {
        ObjectId {
            origin: NodeId(origin),
            seq,
        }
    }

    fn point() -> impl Strategy<Value = Point3> {
        // Any bits, NaNs included: the codec must carry every float as it is.
        (any::<u32>(), any::<u32>(), any::<u32>())
            .prop_map(|(x, y, z)| Point3::new(f32::from_bits(x), f32::from_bits(y), f32::from_bits(z)))
    }

    fn aabb() -> impl Strategy<Value = Aabb> {
        (point(), point()).prop_map(|(min, max)| Aabb { min, max })
    }

    fn peer() -> impl Strategy<Value = Peer> {
        (any::<u32>(), any::<u64>()).prop_map(|(id, pos)| Peer { id: NodeId(id), pos })
    }

    fn sub() -> impl Strategy<Value = SubItem> {
        (
            (any::<u32>(), any::<u32>(), aabb(), aabb()),
            (
                any::<u32>(),
                any::<u64>(),
                any::<u64>(),
                any::<u64>(),
                any::<u64>(),
            ),
        )
            .prop_map(
                |((node, seq, bbox, core), (ttl_ms, lo, hi, sent, reached))| SubItem {
                    key: SubKey {
                        node: NodeId(node),
                        seq,
                    },
                    bbox,
                    core,
                    ttl_ms,
                    lo,
                    hi,
                    sent: Time::from_micros(sent),
                    reached: Time::from_micros(reached),
                },
            )
    }

    fn path() -> impl Strategy<Value = Option<PathOffset>> {
        proptest::option::of(any::<[i8; 3]>().prop_map(PathOffset))
    }

    fn publication() -> impl Strategy<Value = PubItem> {
        (
            (any::<u32>(), any::<u64>()),
            any::<u32>(),
            point(),
            path(),
            any::<u8>(),
            any::<u32>(),
        )
            .prop_map(|(object, primary, pos, path, kind, ttl_ms)| PubItem {
                object: oid(object),
                primary: NodeId(primary),
                pos,
                path,
                kind,
                ttl_ms,
            })
    }

    fn routed() -> impl Strategy<Value = Routed> {
        let payload = prop_oneof![
            sub().prop_map(Payload::Sub),
            publication().prop_map(Payload::Pub),
            Just(Payload::LinkReq),
        ];
        (
            any::<u32>(),
            any::<u64>(),
            any::<u8>(),
            any::<bool>(),
            any::<u8>(),
            payload,
        )
            .prop_map(|(origin, key, hops, last, bounces, payload)| Routed {
                origin: NodeId(origin),
                key,
                hops,
                last,
                bounces,
                payload,
            })
    }

    fn hello() -> impl Strategy<Value = Hello> {
        (
            any::<u64>(),
            proptest::option::of(peer()),
            proptest::collection::vec(peer(), 0..6),
        )
            .prop_map(|(pos, pred, succs)| Hello { pos, pred, succs })
    }

    fn match_item() -> impl Strategy<Value = MatchItem> {
        (
            (any::<u32>(), any::<u64>()),
            any::<u32>(),
            point(),
            path(),
            any::<u32>(),
        )
            .prop_map(|(object, primary, pos, path, ttl_ms)| MatchItem {
                object: oid(object),
                primary: NodeId(primary),
                pos,
                path,
                ttl_ms,
            })
    }

    /// Every variant, with fields anywhere in their types' ranges.
    fn message() -> impl Strategy<Value = LocatorMsg> {
        let succs = || proptest::collection::vec(peer(), 0..6);
        prop_oneof![
            routed().prop_map(LocatorMsg::Route),
            (sub(), any::<bool>(), any::<u64>()).prop_map(|(sub, relay, prev)| LocatorMsg::Spread {
                sub,
                relay,
                prev
            }),
            (
                any::<u64>(),
                any::<u64>(),
                proptest::collection::vec(match_item(), 0..20)
            )
                .prop_map(|(lo, hi, items)| LocatorMsg::Matches { lo, hi, items }),
            proptest::collection::vec(
                ((any::<u32>(), any::<u64>()), any::<u32>()).prop_map(|(o, s)| PushItem {
                    object: oid(o),
                    subscriber: NodeId(s)
                }),
                0..20
            )
            .prop_map(|items| LocatorMsg::Push { items }),
            (any::<u64>(), any::<u64>()).prop_map(|(lo, hi)| LocatorMsg::RouteHint { lo, hi }),
            hello().prop_map(LocatorMsg::Ping),
            hello().prop_map(LocatorMsg::Pong),
            any::<u64>().prop_map(|pos| LocatorMsg::LinkAck { pos }),
            Just(LocatorMsg::JoinReq),
            (any::<u64>(), proptest::option::of(peer()), succs())
                .prop_map(|(pos, pred, succs)| LocatorMsg::JoinAck { pos, pred, succs }),
            (proptest::option::of(peer()), succs())
                .prop_map(|(pred, succs)| LocatorMsg::Leave { pred, succs }),
            (
                proptest::collection::vec(sub(), 0..4),
                proptest::collection::vec(publication(), 0..4)
            )
                .prop_map(|(subs, pubs)| LocatorMsg::Handoff(Handoff { subs, pubs })),
            Just(LocatorMsg::LoadProbe),
            (any::<u64>(), any::<bool>())
                .prop_map(|(milli_load, joined)| LocatorMsg::LoadReport { milli_load, joined }),
        ]
    }

    /// The variants that carry lists, with lists around 255 items, where a list's length
    /// no longer fits the byte it takes below.
    fn long_lists() -> impl Strategy<Value = LocatorMsg> {
        let n = || 250usize..262;
        prop_oneof![
            (
                any::<u64>(),
                any::<u64>(),
                proptest::collection::vec(match_item(), n())
            )
                .prop_map(|(lo, hi, items)| LocatorMsg::Matches { lo, hi, items }),
            proptest::collection::vec(
                ((any::<u32>(), any::<u64>()), any::<u32>()).prop_map(|(o, s)| PushItem {
                    object: oid(o),
                    subscriber: NodeId(s)
                }),
                n()
            )
            .prop_map(|items| LocatorMsg::Push { items }),
            (
                any::<u64>(),
                proptest::option::of(peer()),
                proptest::collection::vec(peer(), n())
            )
                .prop_map(|(pos, pred, succs)| LocatorMsg::JoinAck { pos, pred, succs }),
            (
                proptest::option::of(peer()),
                proptest::collection::vec(peer(), n())
            )
                .prop_map(|(pred, succs)| LocatorMsg::Leave { pred, succs }),
            (
                proptest::collection::vec(sub(), n()),
                proptest::collection::vec(publication(), n())
            )
                .prop_map(|(subs, pubs)| LocatorMsg::Handoff(Handoff { subs, pubs })),
        ]
    }

    /// Compares two messages bit for bit (floats by their bits, so NaNs compare).
    fn same(a: &LocatorMsg, b: &LocatorMsg) -> bool {
        bitcode::encode(a) == bitcode::encode(b) && std::mem::discriminant(a) == std::mem::discriminant(b)
    }

    /// Sends `msgs` through one codec, as a locator does: each must encode to the bytes of
    /// `wire::encode(class, msg)` and decode back to itself.
    fn round_trip_as_derived(msgs: &[LocatorMsg]) -> Result<(), TestCaseError> {
        let mut codec = LocatorCodec::new();
        for msg in msgs {
            let ours = codec.encode(msg).unwrap();
            let derived = wire::encode(msg.class(), msg).unwrap();
            prop_assert_eq!(&ours, &derived, "{:?}", msg);
            let frame = Frame::parse(&ours, MAX_PAYLOAD).unwrap();
            let back = codec.decode(&frame).unwrap();
            prop_assert!(same(&back, msg), "{:?} came back as {:?}", msg, back);
        }
        Ok(())
    }

    /// The derived decoder's answer for `payload`, as the reference.
    fn reference(payload: &[u8]) -> Option<LocatorMsg> {
        bitcode::decode::<LocatorMsg>(payload).ok()
    }

    fn ours(codec: &mut LocatorCodec, payload: &[u8]) -> Option<LocatorMsg> {
        let frame = Frame {
            class: MessageClass::LocatorRouting,
            payload,
        };
        codec.decode(&frame).ok()
    }

    fn agree(codec: &mut LocatorCodec, payload: &[u8]) -> Result<(), TestCaseError> {
        match (reference(payload), ours(codec, payload)) {
            (None, None) => Ok(()),
            (Some(a), Some(b)) => {
                prop_assert!(same(&a, &b), "{payload:02x?}: derived {a:?}, ours {b:?}");
                Ok(())
            }
            (a, b) => Err(TestCaseError::fail(format!(
                "{payload:02x?}: derived {a:?}, ours {b:?}"
            ))),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Every message encodes to the derived encoding's bytes and decodes back to itself,
        /// with one codec reused across messages (as a locator does).
        #[test]
        fn the_bytes_are_the_derived_encoding(msgs in proptest::collection::vec(message(), 1..6)) {
            round_trip_as_derived(&msgs)?;
        }

        /// A payload changed anywhere (a byte replaced, bytes cut off or added) is accepted
        /// by our decoder exactly when the derived decoder accepts it, as the same message.
        #[test]
        fn damaged_payloads_decode_as_the_derived_decoder_does(
            msg in prop_oneof![9 => message(), 1 => long_lists()],
            at in any::<prop::sample::Index>(),
            byte in any::<u8>(),
            cut in 0usize..4,
            extra in proptest::collection::vec(any::<u8>(), 0..3),
        ) {
            let mut codec = LocatorCodec::new();
            let good = bitcode::encode(&msg);
            let mut replaced = good.clone();
            let i = at.index(replaced.len());
            replaced[i] = byte;
            agree(&mut codec, &replaced)?;
            agree(&mut codec, &good[..good.len().saturating_sub(cut)])?;
            let mut longer = good.clone();
            longer.extend_from_slice(&extra);
            agree(&mut codec, &longer)?;
        }

        /// Arbitrary bytes: the same verdict as the derived decoder.
        #[test]
        fn random_payloads_decode_as_the_derived_decoder_does(
            payload in proptest::collection::vec(any::<u8>(), 0..40),
        ) {
            agree(&mut LocatorCodec::new(), &payload)?;
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// Lists longer than a length byte holds, short ones between them, through one
        /// codec: the derived encoding's bytes, and back.
        #[test]
        fn long_lists_keep_the_derived_bytes(
            msgs in proptest::collection::vec(prop_oneof![long_lists(), message()], 1..4),
        ) {
            round_trip_as_derived(&msgs)?;
        }
    }

    /// Every value of the first byte, before each variant's fields: the variant read from
    /// it (or the refusal) is the derived decoder's.
    #[test]
    fn every_first_byte_is_read_as_the_derived_decoder_reads_it() {
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let mut codec = LocatorCodec::new();
        let mut accepted = 0;
        for _ in 0..40 {
            let msg = message().new_tree(&mut runner).unwrap().current();
            let good = bitcode::encode(&msg);
            for first in 0..=u8::MAX {
                let mut p = good.clone();
                p[0] = first;
                accepted += usize::from(reference(&p).is_some());
                agree(&mut codec, &p).unwrap();
            }
        }
        // Not a vacuous agreement on refusals: the high half of the byte is ignored, so each
        // message is accepted under at least its 16 spellings.
        assert!(accepted >= 40 * 16, "{accepted}");
        assert!(ours(&mut codec, &[]).is_none() && reference(&[]).is_none());
    }
}
