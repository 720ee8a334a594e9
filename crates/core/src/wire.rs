//! Datagram framing and codec.
//!
//! Every datagram between nodes is a [`Frame`]: a 6-byte header followed by a payload.
//!
//! ```text
//! offset 0  2 bytes  magic "WM"
//! offset 2  1 byte   protocol version (PROTOCOL_VERSION)
//! offset 3  1 byte   message class (core::traffic::MessageClass)
//! offset 4  2 bytes  payload length, little endian
//! offset 6  payload  the message: bitcode (pinned to =0.6.9) for most classes; object
//!                    updates use the replica crate's own varint codec (its hot path)
//! ```
//!
//! The header carries worldmesh's own protocol version because bitcode's format is not
//! stable across its major versions. Decoding never trusts the peer: the header is checked
//! (magic, version, class, declared length equal to the bytes present, at most
//! `max_payload`) before the payload is looked at, and bitcode itself bounds every length
//! by the input it has. Every failure is a typed [`WireError`]; nothing panics.

use crate::traffic::MessageClass;

/// The wire protocol version this build speaks. 2: a replica update says whether it was
/// sent to a backup (its length field's low bit), and the backup's log may be omitted.
pub const PROTOCOL_VERSION: u8 = 2;
/// Frame magic.
pub const MAGIC: [u8; 2] = *b"WM";
/// Header length in bytes.
pub const HEADER_LEN: usize = 6;
/// The largest payload a UDP datagram over IPv4 can carry, minus our header.
pub const MAX_PAYLOAD: usize = 65_507 - HEADER_LEN;

/// Why a datagram was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// Fewer bytes than a header.
    #[error("truncated datagram: {got} bytes, a header needs {HEADER_LEN}")]
    TruncatedHeader {
        /// Bytes received.
        got: usize,
    },
    /// The magic bytes are wrong: not a worldmesh datagram.
    #[error("not a worldmesh datagram (bad magic {0:02x?})")]
    BadMagic([u8; 2]),
    /// A protocol version this build does not speak.
    #[error("unsupported protocol version {got} (this build speaks {PROTOCOL_VERSION})")]
    UnsupportedVersion {
        /// The version in the header.
        got: u8,
    },
    /// An unknown message class.
    #[error("unknown message class {0}")]
    UnknownClass(u8),
    /// The declared payload length exceeds the limit.
    #[error("oversize payload: {declared} bytes declared, limit {limit}")]
    Oversize {
        /// Declared length.
        declared: usize,
        /// The receiver's limit.
        limit: usize,
    },
    /// The declared payload length does not match the bytes present.
    #[error("length mismatch: header says {declared} payload bytes, datagram has {actual}")]
    LengthMismatch {
        /// Declared length.
        declared: usize,
        /// Bytes actually present after the header.
        actual: usize,
    },
    /// The payload does not decode as the expected message.
    #[error("malformed {class} payload: {reason}")]
    Malformed {
        /// The frame's class.
        class: MessageClass,
        /// What the decoder said.
        reason: String,
    },
    /// A message too large to encode in one datagram.
    #[error("message of {len} bytes does not fit in one datagram (limit {MAX_PAYLOAD})")]
    TooLargeToSend {
        /// Encoded length.
        len: usize,
    },
}

/// A decoded frame header and a view of its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The message class from the header.
    pub class: MessageClass,
    /// The payload bytes (not yet decoded).
    pub payload: &'a [u8],
}

impl<'a> Frame<'a> {
    /// Checks the header of `datagram` and returns the frame, accepting payloads of at most
    /// `max_payload` bytes.
    pub fn parse(datagram: &'a [u8], max_payload: usize) -> Result<Self, WireError> {
        if datagram.len() < HEADER_LEN {
            return Err(WireError::TruncatedHeader { got: datagram.len() });
        }
        let magic = [datagram[0], datagram[1]];
        if magic != MAGIC {
            return Err(WireError::BadMagic(magic));
        }
        if datagram[2] != PROTOCOL_VERSION {
            return Err(WireError::UnsupportedVersion { got: datagram[2] });
        }
        let class = MessageClass::from_u8(datagram[3]).ok_or(WireError::UnknownClass(datagram[3]))?;
        let declared = usize::from(u16::from_le_bytes([datagram[4], datagram[5]]));
        let limit = max_payload.min(MAX_PAYLOAD);
        if declared > limit {
            return Err(WireError::Oversize { declared, limit });
        }
        let payload = &datagram[HEADER_LEN..];
        if payload.len() != declared {
            return Err(WireError::LengthMismatch {
                declared,
                actual: payload.len(),
            });
        }
        Ok(Frame { class, payload })
    }

    /// Decodes the payload as `T`.
    pub fn decode<T: bitcode::DecodeOwned>(&self) -> Result<T, WireError> {
        bitcode::decode(self.payload).map_err(|e| WireError::Malformed {
            class: self.class,
            reason: e.to_string(),
        })
    }
}

/// A reusable encoder/decoder: keeps bitcode's buffers between messages, so encoding and
/// decoding on a hot path do not allocate per call (one per node or driver).
#[derive(Default)]
pub struct Codec {
    buf: bitcode::Buffer,
}

impl std::fmt::Debug for Codec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Codec")
    }
}

impl Codec {
    /// A codec with empty buffers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Encodes `msg` as a complete datagram of class `class` (as [`encode`]).
    pub fn encode<T: bitcode::Encode + ?Sized>(
        &mut self,
        class: MessageClass,
        msg: &T,
    ) -> Result<Vec<u8>, WireError> {
        let payload = self.buf.encode(msg);
        frame(class, payload)
    }

    /// `msg`'s bitcode bytes alone (a payload to wrap in a frame with more bytes around it,
    /// e.g. a channel tag: see [`frame_with`]). Valid until the next call.
    pub fn encode_payload<T: bitcode::Encode + ?Sized>(&mut self, msg: &T) -> &[u8] {
        self.buf.encode(msg)
    }

    /// Decodes `bytes` (part of a frame of class `class`) as `T`.
    pub fn decode_bytes<T: bitcode::DecodeOwned>(
        &mut self,
        class: MessageClass,
        bytes: &[u8],
    ) -> Result<T, WireError> {
        self.buf.decode(bytes).map_err(|e| WireError::Malformed {
            class,
            reason: e.to_string(),
        })
    }

    /// Encoded size of `msg` alone, without a header (for accounting).
    pub fn encoded_len<T: bitcode::Encode + ?Sized>(&mut self, msg: &T) -> usize {
        self.buf.encode(msg).len()
    }

    /// Decodes a frame's payload as `T` (as [`Frame::decode`]).
    pub fn decode<T: bitcode::DecodeOwned>(&mut self, frame: &Frame<'_>) -> Result<T, WireError> {
        self.buf.decode(frame.payload).map_err(|e| WireError::Malformed {
            class: frame.class,
            reason: e.to_string(),
        })
    }
}

/// Encodes `msg` as a complete datagram (header + bitcode payload) of class `class`.
pub fn encode<T: bitcode::Encode + ?Sized>(class: MessageClass, msg: &T) -> Result<Vec<u8>, WireError> {
    let payload = bitcode::encode(msg);
    frame(class, &payload)
}

/// Wraps an already-encoded payload in a header.
pub fn frame(class: MessageClass, payload: &[u8]) -> Result<Vec<u8>, WireError> {
    if payload.len() > MAX_PAYLOAD {
        return Err(WireError::TooLargeToSend { len: payload.len() });
    }
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
    out.extend_from_slice(&MAGIC);
    out.push(PROTOCOL_VERSION);
    out.push(class as u8);
    out.extend_from_slice(&(payload.len() as u16).to_le_bytes());
    out.extend_from_slice(payload);
    Ok(out)
}

/// Like [`frame`], for a payload that `write` appends to the datagram in place (no
/// intermediate payload buffer and copy). `capacity` is a hint of the payload's size.
/// The result is exactly `frame(class, payload)` of the bytes `write` produced.
pub fn frame_with(
    class: MessageClass,
    capacity: usize,
    write: impl FnOnce(&mut Vec<u8>),
) -> Result<Vec<u8>, WireError> {
    let mut out = Vec::with_capacity(HEADER_LEN + capacity);
    out.extend_from_slice(&MAGIC);
    out.push(PROTOCOL_VERSION);
    out.push(class as u8);
    out.extend_from_slice(&[0, 0]);
    write(&mut out);
    let len = out.len() - HEADER_LEN;
    if len > MAX_PAYLOAD {
        return Err(WireError::TooLargeToSend { len });
    }
    out[4..HEADER_LEN].copy_from_slice(&(len as u16).to_le_bytes());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(bitcode::Encode, bitcode::Decode, Debug, PartialEq)]
    struct Msg {
        a: u32,
        items: Vec<u64>,
        name: String,
    }

    fn sample() -> Msg {
        Msg {
            a: 7,
            items: vec![1, 2, 3],
            name: "x".into(),
        }
    }

    #[test]
    fn round_trip() {
        let d = encode(MessageClass::ObjectUpdate, &sample()).unwrap();
        let f = Frame::parse(&d, MAX_PAYLOAD).unwrap();
        assert_eq!(f.class, MessageClass::ObjectUpdate);
        assert_eq!(f.decode::<Msg>().unwrap(), sample());
        // The reusable codec produces the same bytes and decodes them back.
        let mut c = Codec::new();
        for _ in 0..3 {
            let e = c.encode(MessageClass::ObjectUpdate, &sample()).unwrap();
            assert_eq!(e, d);
            assert_eq!(
                c.decode::<Msg>(&Frame::parse(&e, MAX_PAYLOAD).unwrap()).unwrap(),
                sample()
            );
        }
        assert_eq!(c.encoded_len(&sample()), d.len() - HEADER_LEN);
        assert!(
            c.decode::<Msg>(&Frame {
                class: MessageClass::Control,
                payload: &[0xff]
            })
            .is_err()
        );
    }

    #[test]
    fn rejects_bad_headers_with_typed_errors() {
        let d = encode(MessageClass::Control, &sample()).unwrap();
        assert_eq!(
            Frame::parse(&d[..3], MAX_PAYLOAD),
            Err(WireError::TruncatedHeader { got: 3 })
        );
        let mut v = d.clone();
        v[2] = 99;
        assert_eq!(
            Frame::parse(&v, MAX_PAYLOAD),
            Err(WireError::UnsupportedVersion { got: 99 })
        );
        let mut v = d.clone();
        v[0] = b'X';
        assert!(matches!(
            Frame::parse(&v, MAX_PAYLOAD),
            Err(WireError::BadMagic(_))
        ));
        let mut v = d.clone();
        v[3] = 17;
        assert_eq!(Frame::parse(&v, MAX_PAYLOAD), Err(WireError::UnknownClass(17)));
        let truncated = &d[..d.len() - 1];
        assert!(matches!(
            Frame::parse(truncated, MAX_PAYLOAD),
            Err(WireError::LengthMismatch { .. })
        ));
        assert!(matches!(
            Frame::parse(&d, 4),
            Err(WireError::Oversize { limit: 4, .. })
        ));
        // A header that declares 60000 bytes on a 10-byte datagram is refused up front.
        let mut v = d[..HEADER_LEN].to_vec();
        v[4..6].copy_from_slice(&60_000u16.to_le_bytes());
        assert!(matches!(Frame::parse(&v, 1400), Err(WireError::Oversize { .. })));
        assert!(matches!(
            Frame::parse(&v, MAX_PAYLOAD),
            Err(WireError::LengthMismatch { .. })
        ));
        // Valid header, garbage payload.
        let g = frame(MessageClass::Control, &[0xff; 5]).unwrap();
        let f = Frame::parse(&g, MAX_PAYLOAD).unwrap();
        assert!(matches!(f.decode::<Msg>(), Err(WireError::Malformed { .. })));
        assert!(matches!(
            frame(MessageClass::Control, &vec![0; MAX_PAYLOAD + 1]),
            Err(WireError::TooLargeToSend { .. })
        ));
        assert_eq!(
            frame_with(MessageClass::Control, 0, |o| o
                .resize(o.len() + MAX_PAYLOAD + 1, 0)),
            Err(WireError::TooLargeToSend { len: MAX_PAYLOAD + 1 })
        );
        let most = vec![7; MAX_PAYLOAD];
        assert_eq!(
            frame_with(MessageClass::Control, 3, |o| o.extend_from_slice(&most)),
            frame(MessageClass::Control, &most)
        );
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            if let Ok(f) = Frame::parse(&bytes, MAX_PAYLOAD) {
                let _ = f.decode::<Msg>();
            }
        }

        #[test]
        fn frame_with_writes_the_same_datagram_as_frame(
            payload in proptest::collection::vec(any::<u8>(), 0..2048),
            hint in 0usize..4096,
        ) {
            prop_assert_eq!(
                frame_with(MessageClass::ObjectUpdate, hint, |o| o.extend_from_slice(&payload)),
                frame(MessageClass::ObjectUpdate, &payload)
            );
        }

        #[test]
        fn arbitrary_payloads_never_panic(payload in proptest::collection::vec(any::<u8>(), 0..512)) {
            let d = frame(MessageClass::ObjectUpdate, &payload).unwrap();
            let f = Frame::parse(&d, MAX_PAYLOAD).unwrap();
            let _ = f.decode::<Msg>();
            let _ = f.decode::<Vec<Vec<String>>>();
        }
    }
}
