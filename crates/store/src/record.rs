//! What the store keeps, and how each record is laid out on disk.
//!
//! Four kinds of record, one table each (issue 19 item 1):
//!
//! - [`ObjectRecord`]: a primary this node holds — its full state as opaque bytes (the
//!   game's encoding; the store never interprets it), version, epoch, kind and durability
//!   class;
//! - [`BindingRecord`]: a name-service binding (paper `001` §3.2: the object's primary lives
//!   at `node` under `epoch`);
//! - [`ForwardingRecord`]: a forwarding entry a migration left here (paper `001` §3.2
//!   step 6: where the object went, and when its lease runs out once released);
//! - [`WriteRecord`]: a durable write logged before it is acknowledged (target, writer,
//!   the writer's sequence number, the game's encoded write).
//!
//! Plus one [`Checkpoint`] marker: the frame and time of the last checkpoint batch.
//!
//! ## Layout
//!
//! Keys are big-endian so redb's byte order is id order: an object key is its origin node
//! (4 bytes) then its sequence number (8 bytes); a write key appends the writer (4) and the
//! writer's sequence number (8). Every value is `format (1 byte) | fields, little-endian |
//! CRC-32 (4 bytes)`, where the CRC covers the key and everything before it in the value.
//! A record read back is checked in this order — length, format, CRC, fields, the key
//! inside the value equal to the key it is stored under — and any failure is a
//! [`RecordError`]. Variable-length fields (states, write bytes) carry their length, checked
//! against [`crate::StoreOptions::max_state_bytes`] and against the bytes present before
//! anything is allocated.

use worldmesh_core::{Durability, NodeId, ObjectId, Time};

/// The format byte every value starts with. A future layout gets a new number; a store
/// holding an unknown one is refused, never guessed at.
pub const RECORD_FORMAT: u8 = 1;

/// Length of an object key (origin + sequence number).
pub const OBJECT_KEY_LEN: usize = 12;
/// Length of a write key (target + writer + writer's sequence number).
pub const WRITE_KEY_LEN: usize = 24;

/// A primary held by this node: what recovery needs to bring it back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectRecord {
    /// The object.
    pub id: ObjectId,
    /// The name-service epoch it was held under (paper `001` §3.2; adoption raises it).
    pub epoch: u32,
    /// Its version when the state was taken.
    pub version: u64,
    /// Its durability class.
    pub durability: Durability,
    /// The game's kind tag (the store does not interpret it).
    pub kind: u8,
    /// The full state, in the game's encoding (opaque here).
    pub state: Vec<u8>,
}

/// A name-service binding: the primary of `id` lives at `node` under `epoch`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BindingRecord {
    /// The object.
    pub id: ObjectId,
    /// The node holding its primary.
    pub node: NodeId,
    /// The binding's epoch.
    pub epoch: u32,
}

/// A forwarding entry: `id` migrated from this node to (`to_node`, `to_epoch`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ForwardingRecord {
    /// The object.
    pub id: ObjectId,
    /// The node it moved to.
    pub to_node: NodeId,
    /// The epoch it is bound under there.
    pub to_epoch: u32,
    /// When the entry's lease runs out; `None` until every notified node acknowledged the
    /// move (the entry lives until then).
    pub expires: Option<Time>,
}

/// Identifies a logged write: the target object, the node that wrote it, and the writer's
/// sequence number for writes to that target (from 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WriteKey {
    /// The object written to.
    pub target: ObjectId,
    /// The writer.
    pub writer: NodeId,
    /// The writer's sequence number.
    pub seq: u64,
}

/// A durable write logged before it is acknowledged; removed once the state containing it
/// is checkpointed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteRecord {
    /// Which write.
    pub key: WriteKey,
    /// The game's encoded write (opaque here).
    pub bytes: Vec<u8>,
}

/// The marker of the last checkpoint batch: frame number and virtual time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    /// The frame the checkpoint was taken at.
    pub frame: u64,
    /// The virtual time of that frame.
    pub time: Time,
}

/// Why a stored record cannot be trusted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// The key is not as long as its table's keys are.
    #[error("key of {len} bytes, expected {expected}")]
    KeyLength {
        /// Bytes present.
        len: usize,
        /// Bytes a key of this table has.
        expected: usize,
    },
    /// The value is shorter than its fields say.
    #[error("value truncated: {needed} bytes needed, {present} present")]
    Truncated {
        /// Bytes the fields need.
        needed: usize,
        /// Bytes present.
        present: usize,
    },
    /// The value carries bytes after its last field.
    #[error("{extra} bytes after the record's last field")]
    Trailing {
        /// Bytes left over.
        extra: usize,
    },
    /// The value's format byte is not one this build reads.
    #[error("record format {found}, this build reads format {RECORD_FORMAT}")]
    Format {
        /// The format byte found.
        found: u8,
    },
    /// The CRC does not match the key and value: the bytes changed after they were written.
    #[error("checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum {
        /// The CRC stored in the value.
        stored: u32,
        /// The CRC of the bytes present.
        computed: u32,
    },
    /// A state or write is longer than the configured bound.
    #[error("{what} of {len} bytes exceeds the bound of {max}")]
    TooLarge {
        /// What is too large.
        what: &'static str,
        /// Its declared length.
        len: u64,
        /// The bound ([`crate::StoreOptions::max_state_bytes`]).
        max: usize,
    },
    /// An unknown durability code.
    #[error("unknown durability class code {0}")]
    Durability(u8),
    /// An unknown code in the expiry field of a forwarding entry.
    #[error("unknown expiry flag {0}")]
    ExpiryFlag(u8),
    /// The key stored inside the value differs from the key the record is stored under.
    #[error("record is stored under key {stored_under} but names {names}")]
    KeyMismatch {
        /// The table key.
        stored_under: String,
        /// The key inside the value.
        names: String,
    },
}

pub(crate) fn object_key(id: ObjectId) -> [u8; OBJECT_KEY_LEN] {
    let mut k = [0u8; OBJECT_KEY_LEN];
    k[..4].copy_from_slice(&id.origin.0.to_be_bytes());
    k[4..].copy_from_slice(&id.seq.to_be_bytes());
    k
}

pub(crate) fn write_key(w: WriteKey) -> [u8; WRITE_KEY_LEN] {
    let mut k = [0u8; WRITE_KEY_LEN];
    k[..OBJECT_KEY_LEN].copy_from_slice(&object_key(w.target));
    k[12..16].copy_from_slice(&w.writer.0.to_be_bytes());
    k[16..].copy_from_slice(&w.seq.to_be_bytes());
    k
}

/// Parses an object key; the error says what is wrong.
pub(crate) fn parse_object_key(k: &[u8]) -> Result<ObjectId, RecordError> {
    let k: [u8; OBJECT_KEY_LEN] = k.try_into().map_err(|_| RecordError::KeyLength {
        len: k.len(),
        expected: OBJECT_KEY_LEN,
    })?;
    let mut r = Reader::new(&k);
    let origin = NodeId(u32::from_be_bytes(r.array()?));
    let seq = u64::from_be_bytes(r.array()?);
    Ok(ObjectId { origin, seq })
}

/// Parses a write key; the error says what is wrong.
pub(crate) fn parse_write_key(k: &[u8]) -> Result<WriteKey, RecordError> {
    if k.len() != WRITE_KEY_LEN {
        return Err(RecordError::KeyLength {
            len: k.len(),
            expected: WRITE_KEY_LEN,
        });
    }
    let target = parse_object_key(&k[..OBJECT_KEY_LEN])?;
    let mut r = Reader::new(&k[OBJECT_KEY_LEN..]);
    let writer = NodeId(u32::from_be_bytes(r.array()?));
    let seq = u64::from_be_bytes(r.array()?);
    Ok(WriteKey { target, writer, seq })
}

/// A key as people read it: `origin/seq` (object ids as the rest of worldmesh prints them,
/// with the generation in the high half of `seq`), or `origin/seq:writer/seq` for writes.
pub fn display_key(k: &[u8]) -> String {
    if let Ok(id) = parse_object_key(k) {
        format!("{}/{}", id.origin.0, id.seq)
    } else if let Ok(w) = parse_write_key(k) {
        format!("{}/{}:{}/{}", w.target.origin.0, w.target.seq, w.writer.0, w.seq)
    } else {
        k.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// Builds a value: format byte, fields, then the CRC over key and value.
struct Writer<'k> {
    key: &'k [u8],
    buf: Vec<u8>,
}

impl<'k> Writer<'k> {
    fn new(key: &'k [u8], capacity: usize) -> Self {
        let mut buf = Vec::with_capacity(capacity + 5);
        buf.push(RECORD_FORMAT);
        Self { key, buf }
    }
    fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, v: &[u8]) {
        self.u32(v.len() as u32);
        self.buf.extend_from_slice(v);
    }
    fn finish(mut self) -> Vec<u8> {
        let crc = crc(self.key, &self.buf);
        self.buf.extend_from_slice(&crc.to_le_bytes());
        self.buf
    }
}

fn crc(key: &[u8], value: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(key);
    h.update(value);
    h.finalize()
}

/// Reads fields of a value whose length, format and CRC were checked by [`Reader::open`].
struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Self { buf, at: 0 }
    }

    /// Checks format and CRC; returns a reader over the fields.
    fn open(key: &[u8], value: &'a [u8]) -> Result<Self, RecordError> {
        if value.len() < 5 {
            return Err(RecordError::Truncated {
                needed: 5,
                present: value.len(),
            });
        }
        let (body, tail) = value.split_at(value.len() - 4);
        let stored = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]);
        let computed = crc(key, body);
        if stored != computed {
            return Err(RecordError::Checksum { stored, computed });
        }
        if body[0] != RECORD_FORMAT {
            return Err(RecordError::Format { found: body[0] });
        }
        Ok(Self { buf: body, at: 1 })
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], RecordError> {
        let end = self.at + N;
        let s = self.buf.get(self.at..end).ok_or(RecordError::Truncated {
            needed: end,
            present: self.buf.len(),
        })?;
        self.at = end;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, RecordError> {
        Ok(self.array::<1>()?[0])
    }
    fn u32(&mut self) -> Result<u32, RecordError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64, RecordError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    /// A length-prefixed byte string of at most `max` bytes: the bound and the bytes
    /// present are checked before anything is allocated.
    fn bytes(&mut self, what: &'static str, max: usize) -> Result<Vec<u8>, RecordError> {
        let len = self.u32()? as usize;
        if len > max {
            return Err(RecordError::TooLarge {
                what,
                len: len as u64,
                max,
            });
        }
        let end = self.at + len;
        let s = self.buf.get(self.at..end).ok_or(RecordError::Truncated {
            needed: end,
            present: self.buf.len(),
        })?;
        self.at = end;
        Ok(s.to_vec())
    }
    fn object_id(&mut self) -> Result<ObjectId, RecordError> {
        let origin = NodeId(self.u32()?);
        let seq = self.u64()?;
        Ok(ObjectId { origin, seq })
    }
    fn finish(self) -> Result<(), RecordError> {
        match self.buf.len() - self.at {
            0 => Ok(()),
            extra => Err(RecordError::Trailing { extra }),
        }
    }
}

fn check_key(stored_under: &[u8], names: &[u8]) -> Result<(), RecordError> {
    if stored_under == names {
        Ok(())
    } else {
        Err(RecordError::KeyMismatch {
            stored_under: display_key(stored_under),
            names: display_key(names),
        })
    }
}

impl ObjectRecord {
    pub(crate) fn encode(&self) -> ([u8; OBJECT_KEY_LEN], Vec<u8>) {
        let key = object_key(self.id);
        let mut w = Writer::new(&key, 30 + self.state.len());
        w.u32(self.id.origin.0);
        w.u64(self.id.seq);
        w.u32(self.epoch);
        w.u64(self.version);
        w.u8(self.durability.code());
        w.u8(self.kind);
        w.bytes(&self.state);
        let v = w.finish();
        (key, v)
    }

    pub(crate) fn decode(key: &[u8], value: &[u8], max_state: usize) -> Result<Self, RecordError> {
        parse_object_key(key)?;
        let mut r = Reader::open(key, value)?;
        let id = r.object_id()?;
        let epoch = r.u32()?;
        let version = r.u64()?;
        let code = r.u8()?;
        let durability = Durability::from_code(code).ok_or(RecordError::Durability(code))?;
        let kind = r.u8()?;
        let state = r.bytes("state", max_state)?;
        r.finish()?;
        check_key(key, &object_key(id))?;
        Ok(Self {
            id,
            epoch,
            version,
            durability,
            kind,
            state,
        })
    }
}

impl BindingRecord {
    pub(crate) fn encode(&self) -> ([u8; OBJECT_KEY_LEN], Vec<u8>) {
        let key = object_key(self.id);
        let mut w = Writer::new(&key, 20);
        w.u32(self.id.origin.0);
        w.u64(self.id.seq);
        w.u32(self.node.0);
        w.u32(self.epoch);
        let v = w.finish();
        (key, v)
    }

    pub(crate) fn decode(key: &[u8], value: &[u8]) -> Result<Self, RecordError> {
        parse_object_key(key)?;
        let mut r = Reader::open(key, value)?;
        let id = r.object_id()?;
        let node = NodeId(r.u32()?);
        let epoch = r.u32()?;
        r.finish()?;
        check_key(key, &object_key(id))?;
        Ok(Self { id, node, epoch })
    }
}

impl ForwardingRecord {
    pub(crate) fn encode(&self) -> ([u8; OBJECT_KEY_LEN], Vec<u8>) {
        let key = object_key(self.id);
        let mut w = Writer::new(&key, 29);
        w.u32(self.id.origin.0);
        w.u64(self.id.seq);
        w.u32(self.to_node.0);
        w.u32(self.to_epoch);
        match self.expires {
            None => {
                w.u8(0);
                w.u64(0);
            }
            Some(t) => {
                w.u8(1);
                w.u64(t.as_micros());
            }
        }
        let v = w.finish();
        (key, v)
    }

    pub(crate) fn decode(key: &[u8], value: &[u8]) -> Result<Self, RecordError> {
        parse_object_key(key)?;
        let mut r = Reader::open(key, value)?;
        let id = r.object_id()?;
        let to_node = NodeId(r.u32()?);
        let to_epoch = r.u32()?;
        let flag = r.u8()?;
        let micros = r.u64()?;
        let expires = match flag {
            0 => None,
            1 => Some(Time::from_micros(micros)),
            f => return Err(RecordError::ExpiryFlag(f)),
        };
        r.finish()?;
        check_key(key, &object_key(id))?;
        Ok(Self {
            id,
            to_node,
            to_epoch,
            expires,
        })
    }
}

impl WriteRecord {
    pub(crate) fn encode(&self) -> ([u8; WRITE_KEY_LEN], Vec<u8>) {
        let key = write_key(self.key);
        let mut w = Writer::new(&key, 32 + self.bytes.len());
        w.u32(self.key.target.origin.0);
        w.u64(self.key.target.seq);
        w.u32(self.key.writer.0);
        w.u64(self.key.seq);
        w.bytes(&self.bytes);
        let v = w.finish();
        (key, v)
    }

    pub(crate) fn decode(key: &[u8], value: &[u8], max_bytes: usize) -> Result<Self, RecordError> {
        parse_write_key(key)?;
        let mut r = Reader::open(key, value)?;
        let target = r.object_id()?;
        let writer = NodeId(r.u32()?);
        let seq = r.u64()?;
        let bytes = r.bytes("write", max_bytes)?;
        r.finish()?;
        let k = WriteKey { target, writer, seq };
        check_key(key, &write_key(k))?;
        Ok(Self { key: k, bytes })
    }
}

/// The key the checkpoint marker is stored under in the meta table.
pub(crate) const CHECKPOINT_KEY: &[u8] = b"checkpoint";

impl Checkpoint {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new(CHECKPOINT_KEY, 16);
        w.u64(self.frame);
        w.u64(self.time.as_micros());
        w.finish()
    }

    pub(crate) fn decode(value: &[u8]) -> Result<Self, RecordError> {
        let mut r = Reader::open(CHECKPOINT_KEY, value)?;
        let frame = r.u64()?;
        let time = Time::from_micros(r.u64()?);
        r.finish()?;
        Ok(Self { frame, time })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object() -> ObjectRecord {
        ObjectRecord {
            id: ObjectId::new(NodeId(3), 77),
            epoch: 2,
            version: 41,
            durability: Durability::Durable,
            kind: 5,
            state: vec![1, 2, 3, 4, 5, 6, 7],
        }
    }

    #[test]
    fn every_record_round_trips() {
        let o = object();
        let (k, v) = o.encode();
        assert_eq!(ObjectRecord::decode(&k, &v, 64), Ok(o));

        let b = BindingRecord {
            id: ObjectId::new(NodeId(1), 9),
            node: NodeId(4),
            epoch: 3,
        };
        let (k, v) = b.encode();
        assert_eq!(BindingRecord::decode(&k, &v), Ok(b));

        for expires in [None, Some(Time::from_millis(1234))] {
            let f = ForwardingRecord {
                id: ObjectId::new(NodeId(1), 9),
                to_node: NodeId(2),
                to_epoch: 1,
                expires,
            };
            let (k, v) = f.encode();
            assert_eq!(ForwardingRecord::decode(&k, &v), Ok(f));
        }

        let w = WriteRecord {
            key: WriteKey {
                target: ObjectId::new(NodeId(0), 1),
                writer: NodeId(6),
                seq: 12,
            },
            bytes: vec![9; 20],
        };
        let (k, v) = w.encode();
        assert_eq!(WriteRecord::decode(&k, &v, 20), Ok(w));

        let c = Checkpoint {
            frame: 99,
            time: Time::from_millis(4950),
        };
        assert_eq!(Checkpoint::decode(&c.encode()), Ok(c));
    }

    #[test]
    fn keys_sort_in_id_order() {
        let a = object_key(ObjectId::new(NodeId(1), 300));
        let b = object_key(ObjectId::new(NodeId(2), 1));
        let c = object_key(ObjectId::new(NodeId(2), 256));
        assert!(a < b && b < c);
    }

    #[test]
    fn every_single_bit_flip_is_caught() {
        let (k, v) = object().encode();
        for i in 0..v.len() {
            for bit in 0..8 {
                let mut bad = v.clone();
                bad[i] ^= 1 << bit;
                let err = ObjectRecord::decode(&k, &bad, 64).expect_err("a flipped bit was accepted");
                assert!(
                    matches!(err, RecordError::Checksum { .. }),
                    "byte {i} bit {bit}: {err}"
                );
            }
        }
    }

    #[test]
    fn a_record_under_another_key_is_refused() {
        let (_, v) = object().encode();
        let other = object_key(ObjectId::new(NodeId(3), 78));
        // The CRC covers the key, so a value moved to another key fails the checksum.
        assert!(matches!(
            ObjectRecord::decode(&other, &v, 64),
            Err(RecordError::Checksum { .. })
        ));
    }

    #[test]
    fn oversized_states_are_refused_before_allocation() {
        let (k, v) = object().encode();
        assert_eq!(
            ObjectRecord::decode(&k, &v, 6),
            Err(RecordError::TooLarge {
                what: "state",
                len: 7,
                max: 6
            })
        );
        // A declared length beyond the bytes present is a truncation, not an allocation.
        let mut o = object();
        o.state.clear();
        let (k, mut v) = o.encode();
        let len_at = v.len() - 8;
        v[len_at..len_at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        let crc_at = v.len() - 4;
        let c = crc(&k, &v[..crc_at]);
        v[crc_at..].copy_from_slice(&c.to_le_bytes());
        assert!(matches!(
            ObjectRecord::decode(&k, &v, usize::MAX),
            Err(RecordError::Truncated { .. })
        ));
    }

    #[test]
    fn short_values_and_keys_are_typed_errors() {
        let (k, v) = object().encode();
        for n in 0..v.len() {
            assert!(ObjectRecord::decode(&k, &v[..n], 64).is_err(), "prefix {n}");
        }
        assert_eq!(
            ObjectRecord::decode(&k[..5], &v, 64),
            Err(RecordError::KeyLength { len: 5, expected: 12 })
        );
    }
}
