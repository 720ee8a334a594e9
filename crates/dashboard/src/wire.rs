//! The WebSocket protocol between the dashboard and a browser.
//!
//! **Server → browser.** First a JSON text message, the [`Hello`] (world, quantum, history
//! of the time series, recent migrations). Then one binary *frame* per tick, little-endian:
//!
//! ```text
//! u8 type = 1 | u8 flags (1 key, 2 nodes, 4 finished) | u32 seq | f64 time_s
//! objects:  key   = varint n, n records
//!           delta = varint r, r removed indices (first, then gaps - 1) into the previous
//!                   frame's list; ceil(kept / 4) bytes of 2-bit codes, one per kept object
//!                   in order (0 same, 1 moved by (i8, i8) quanta, 2 moved to (u16, u16),
//!                   3 moved and changed: u16 x, u16 y, u8 kind, varint owner), their
//!                   payloads in order; varint a, a added records
//! record:   varint id gap (from the previous record's id, the first from 0) | u16 x | u16 y
//!           | u8 kind | varint owner
//! events:   varint n, n × (varint id, varint from, varint to, u8 cause)
//! nodes (flag 2): varint missing_total + 1 (0 unknown), varint ownership changes since the
//!           last node section, varint bytes/s per class (totals);
//!           varint n, n × (varint id, u8 bits (1 up, 2 missing, 4 frame time, 8 sessions,
//!           16 capacity, 32 local health), varint players, primaries, replicas, [missing],
//!           [frame µs], [sessions], [capacity], [local health], bytes/s per class)
//! ```
//!
//! Object lists are sorted by id (`ObjectId::as_u64`), so a delta is a merge of two
//! sorted lists and ids cost about a byte. Positions are quantized on a grid of
//! [`Quantizer::quantum`] world units (at most 65,536 steps along the longer side). A
//! delta frame applies only to the frame numbered `seq - 1`; after a gap (frames dropped
//! for a slow browser) the server sends a key frame. Focus messages (type 2) answer a
//! hover: the object's owner, kind, position and area of interest.
//!
//! **Browser → server.** JSON text, at most [`MAX_CLIENT_MESSAGE`] bytes:
//! `{"hover": "n3.17"}` or `{"hover": null}`.
//!
//! Measured on the 512-node × 8-player simulation (`worldmesh experiment dashboard-wire`):
//! see the experiment's summary; the choice of binary deltas over compact JSON is argued
//! there.

use serde::{Deserialize, Serialize};
use worldmesh_core::{NodeId, ObjectId};

use crate::model::{Rect, WorldInfo};

/// Version of this protocol, in the [`Hello`].
pub const WIRE_VERSION: u32 = 1;
/// Frame message type.
pub const MSG_FRAME: u8 = 1;
/// Focus message type.
pub const MSG_FOCUS: u8 = 2;
/// Frame flag: the object section is a key (full list), not a delta.
pub const FLAG_KEY: u8 = 1;
/// Frame flag: the frame carries the node table and a time-series point.
pub const FLAG_NODES: u8 = 2;
/// Frame flag: the producer has finished (the simulation ended); this is the last state.
pub const FLAG_FINISHED: u8 = 4;
/// Largest message a browser may send, bytes.
pub const MAX_CLIENT_MESSAGE: usize = 1024;
/// Most objects or nodes one decoded frame may declare (bounds the decoder's allocation).
pub const MAX_ITEMS: usize = 1 << 20;

/// Ownership changed because the object's node moved it (paper `001` §3.2).
pub const CAUSE_MIGRATION: u8 = 0;
/// Ownership changed because its old node is down and another adopted it.
pub const CAUSE_ADOPTION: u8 = 1;

/// Why bytes could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The message ended inside a field.
    #[error("message truncated at byte {at} while reading {what}")]
    Truncated {
        /// Offset where more bytes were needed.
        at: usize,
        /// The field being read.
        what: &'static str,
    },
    /// A field holds a value the protocol does not allow.
    #[error("bad {what} at byte {at}: {why}")]
    Invalid {
        /// Offset of the field.
        at: usize,
        /// The field.
        what: &'static str,
        /// Why it is refused.
        why: String,
    },
    /// Bytes follow the last section.
    #[error("{0} unexpected bytes after the frame")]
    Trailing(usize),
}

/// Positions on a grid of `quantum` world units inside the world's bounds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Quantizer {
    min_x: f32,
    min_y: f32,
    /// World units per step.
    pub quantum: f32,
}

impl Quantizer {
    /// The grid for `bounds`: 65,536 steps along the longer side, but never finer than a
    /// quarter unit (small maps then move by more quanta per tick... fewer than 127 for
    /// players and missiles at 10 Hz, so moves stay one byte per axis).
    pub fn new(bounds: &Rect) -> Self {
        let long = bounds.width().max(bounds.height());
        let long = if long.is_finite() && long > 0.0 { long } else { 1.0 };
        Self {
            min_x: if bounds.min_x.is_finite() {
                bounds.min_x
            } else {
                0.0
            },
            min_y: if bounds.min_y.is_finite() {
                bounds.min_y
            } else {
                0.0
            },
            quantum: (long / 65_535.0).max(0.25),
        }
    }

    /// The grid step of `v` on an axis starting at `min` (clamped; NaN maps to 0).
    fn q(&self, v: f32, min: f32) -> u16 {
        let s = ((v - min) / self.quantum).round();
        if s.is_nan() {
            0
        } else {
            s.clamp(0.0, 65_535.0) as u16
        }
    }

    /// Quantized x.
    pub fn qx(&self, x: f32) -> u16 {
        self.q(x, self.min_x)
    }

    /// Quantized y.
    pub fn qy(&self, y: f32) -> u16 {
        self.q(y, self.min_y)
    }

    /// World x of step `s`.
    pub fn x(&self, s: u16) -> f32 {
        self.min_x + f32::from(s) * self.quantum
    }

    /// World y of step `s`.
    pub fn y(&self, s: u16) -> f32 {
        self.min_y + f32::from(s) * self.quantum
    }
}

/// An object's key on the wire, exact in a JavaScript number (below 2^53 for origins below
/// 2^21): `origin << 32 | counter` for first-generation ids (the simulator's; equal to
/// `ObjectId::as_u64`), and for a later generation (real nodes: every process start is a new
/// generation) `((origin mod 2^12) << 9 | generation mod 2^9) << 32 | counter`, so that a
/// restarted node's new objects do not take the keys of its old ones. The page writes a key
/// `n<key / 2^32>.<key mod 2^32>`; [`parse_object_id`] reads that back to the same key.
pub fn object_key(id: ObjectId) -> u64 {
    let counter = u64::from(id.counter());
    match id.generation() {
        0 => (u64::from(id.origin.0) << 32) | counter,
        g => ((u64::from(id.origin.0 & 0xfff) << 9 | u64::from(g & 0x1ff)) << 32) | counter,
    }
}

/// An object as it goes on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WireObject {
    /// [`object_key`].
    pub id: u64,
    /// Quantized x.
    pub x: u16,
    /// Quantized y.
    pub y: u16,
    /// Kind code.
    pub kind: u8,
    /// Owner node.
    pub owner: u32,
}

/// An ownership change between two ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct OwnerChange {
    /// The object.
    pub id: ObjectId,
    /// Owner at the previous tick.
    pub from: NodeId,
    /// Owner now.
    pub to: NodeId,
    /// [`CAUSE_MIGRATION`] or [`CAUSE_ADOPTION`].
    pub cause: u8,
}

/// One row of the node table as sent: rates, not counters.
#[derive(Clone, Debug, PartialEq)]
pub struct WireNode {
    /// Node id.
    pub id: u32,
    /// Running.
    pub up: bool,
    /// Player primaries.
    pub players: u32,
    /// Primaries.
    pub primaries: u32,
    /// Replicas.
    pub replicas: u32,
    /// Missing replicas, when known.
    pub missing: Option<u32>,
    /// Frame time, µs, when known.
    pub frame_us: Option<u32>,
    /// Players connected through its player port, when known.
    pub sessions: Option<u32>,
    /// Players it takes, when known.
    pub capacity: Option<u32>,
    /// Its failure detector's local health (0 to 8), when known.
    pub local_health: Option<u32>,
    /// Outbound bytes per second of producer time, by class.
    pub bytes_per_s: Vec<u64>,
}

/// The node table of a frame and its time-series point.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct WireNodes {
    /// Missing replicas over all nodes, when known.
    pub missing_total: Option<u64>,
    /// Ownership changes since the previous node section.
    pub moves: u64,
    /// Outbound bytes/s over all nodes, by class.
    pub bytes_per_s: Vec<u64>,
    /// The rows.
    pub rows: Vec<WireNode>,
}

/// One point of the time series (also kept for browsers that connect later).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SeriesPoint {
    /// Producer time, s.
    pub t: f64,
    /// Outbound bytes/s over all nodes, by class.
    pub bytes: Vec<u64>,
    /// Missing replicas over all nodes, when known.
    pub missing: Option<u64>,
    /// Objects in the world.
    pub objects: usize,
    /// Ownership changes since the previous point.
    pub moves: u64,
}

/// A migration or adoption as listed in the [`Hello`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EventRecord {
    /// Producer time, s.
    pub t: f64,
    /// The object, as `n<origin>.<seq>`.
    pub id: String,
    /// Old owner.
    pub from: u32,
    /// New owner.
    pub to: u32,
    /// "migration" or "adoption".
    pub cause: &'static str,
}

/// The first message on every connection (JSON).
#[derive(Clone, Debug, Serialize)]
pub struct Hello<'a> {
    /// Always "hello".
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// [`WIRE_VERSION`].
    pub wire: u32,
    /// The world.
    pub world: &'a WorldInfo,
    /// World units per position step.
    pub quantum: f32,
    /// Frames per second the producer aims at.
    pub tick_hz: f64,
    /// The producer has finished.
    pub finished: bool,
    /// Time-series history, oldest first.
    pub series: Vec<SeriesPoint>,
    /// Recent ownership changes, oldest first.
    pub events: Vec<EventRecord>,
    /// Ownership changes since the start: migrations, adoptions.
    pub moves: [u64; 2],
}

/// What a browser may send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientMsg {
    /// Send the focus (area of interest...) of this object with every frame; `None` stops.
    Hover(Option<ObjectId>),
}

/// Why a browser's message was refused (the connection stays open; the browser is told).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientMsgError {
    /// Longer than [`MAX_CLIENT_MESSAGE`].
    #[error("message of {0} bytes exceeds the limit of {MAX_CLIENT_MESSAGE}")]
    TooLong(usize),
    /// Not JSON, or not one of the accepted shapes.
    #[error("bad message: {0}")]
    Malformed(String),
    /// Binary messages are not part of the protocol.
    #[error("binary messages are not accepted")]
    Binary,
}

/// Parses an object id written `n3.17` or `3.17`.
pub fn parse_object_id(s: &str) -> Result<ObjectId, String> {
    let t = s.strip_prefix('n').unwrap_or(s);
    let (a, b) = t
        .split_once('.')
        .ok_or_else(|| format!("object id {s:?} is not of the form n<node>.<seq>"))?;
    let origin: u32 = a
        .parse()
        .map_err(|_| format!("object id {s:?}: node {a:?} is not a number"))?;
    let seq: u32 = b
        .parse()
        .map_err(|_| format!("object id {s:?}: sequence {b:?} is not a number"))?;
    Ok(ObjectId::new(NodeId(origin), seq))
}

impl ClientMsg {
    /// Parses a text message from a browser.
    pub fn parse(text: &str) -> Result<Self, ClientMsgError> {
        if text.len() > MAX_CLIENT_MESSAGE {
            return Err(ClientMsgError::TooLong(text.len()));
        }
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            hover: Option<String>,
        }
        let raw: Raw = serde_json::from_str(text).map_err(|e| ClientMsgError::Malformed(e.to_string()))?;
        match raw.hover {
            None => Ok(ClientMsg::Hover(None)),
            Some(s) => parse_object_id(&s)
                .map(|id| ClientMsg::Hover(Some(id)))
                .map_err(ClientMsgError::Malformed),
        }
    }
}

/// Appends `v` as a LEB128 varint.
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_record(out: &mut Vec<u8>, prev_id: u64, o: &WireObject) {
    put_varint(out, o.id - prev_id);
    out.extend_from_slice(&o.x.to_le_bytes());
    out.extend_from_slice(&o.y.to_le_bytes());
    out.push(o.kind);
    put_varint(out, u64::from(o.owner));
}

/// Writes a frame header.
pub fn put_header(out: &mut Vec<u8>, flags: u8, seq: u32, time_s: f64) {
    out.push(MSG_FRAME);
    out.push(flags);
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&time_s.to_le_bytes());
}

/// Encodes `cur` (sorted by id, no duplicates) as a key section.
pub fn put_key(out: &mut Vec<u8>, cur: &[WireObject]) {
    put_varint(out, cur.len() as u64);
    let mut prev = 0;
    for o in cur {
        put_record(out, prev, o);
        prev = o.id;
    }
}

/// Encodes `cur` as a delta section against `prev` (both sorted by id, no duplicates).
pub fn put_delta(out: &mut Vec<u8>, prev: &[WireObject], cur: &[WireObject]) {
    let (mut removed, mut codes, mut payload, mut added) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut i, mut j) = (0, 0);
    let mut kept = 0usize;
    let push_code = |codes: &mut Vec<u8>, kept: &mut usize, c: u8| {
        if (*kept).is_multiple_of(4) {
            codes.push(0);
        }
        let last = codes.len() - 1;
        codes[last] |= c << ((*kept % 4) * 2);
        *kept += 1;
    };
    while i < prev.len() || j < cur.len() {
        match (prev.get(i), cur.get(j)) {
            (Some(p), Some(c)) if p.id == c.id => {
                let code = if p.kind != c.kind || p.owner != c.owner {
                    payload.extend_from_slice(&c.x.to_le_bytes());
                    payload.extend_from_slice(&c.y.to_le_bytes());
                    payload.push(c.kind);
                    put_varint(&mut payload, u64::from(c.owner));
                    3
                } else if p.x == c.x && p.y == c.y {
                    0
                } else {
                    let dx = i32::from(c.x) - i32::from(p.x);
                    let dy = i32::from(c.y) - i32::from(p.y);
                    if (-127..=127).contains(&dx) && (-127..=127).contains(&dy) {
                        payload.push(dx as i8 as u8);
                        payload.push(dy as i8 as u8);
                        1
                    } else {
                        payload.extend_from_slice(&c.x.to_le_bytes());
                        payload.extend_from_slice(&c.y.to_le_bytes());
                        2
                    }
                };
                push_code(&mut codes, &mut kept, code);
                i += 1;
                j += 1;
            }
            (Some(p), Some(c)) if p.id < c.id => {
                removed.push(i);
                i += 1;
            }
            (Some(_), None) => {
                removed.push(i);
                i += 1;
            }
            (_, Some(c)) => {
                added.push(*c);
                j += 1;
            }
            (None, None) => break,
        }
    }
    put_varint(out, removed.len() as u64);
    let mut last: Option<usize> = None;
    for r in removed {
        put_varint(out, (r - last.map_or(0, |l| l + 1)) as u64);
        last = Some(r);
    }
    out.extend_from_slice(&codes);
    out.extend_from_slice(&payload);
    put_key(out, &added);
}

/// Encodes the event section.
pub fn put_events(out: &mut Vec<u8>, events: &[OwnerChange]) {
    put_varint(out, events.len() as u64);
    for e in events {
        put_varint(out, e.id.as_u64());
        put_varint(out, u64::from(e.from.0));
        put_varint(out, u64::from(e.to.0));
        out.push(e.cause);
    }
}

/// Encodes the node section.
pub fn put_nodes(out: &mut Vec<u8>, nodes: &WireNodes) {
    put_varint(out, nodes.missing_total.map_or(0, |m| m + 1));
    put_varint(out, nodes.moves);
    for b in &nodes.bytes_per_s {
        put_varint(out, *b);
    }
    put_varint(out, nodes.rows.len() as u64);
    for n in &nodes.rows {
        put_varint(out, u64::from(n.id));
        let bits = u8::from(n.up)
            | (u8::from(n.missing.is_some()) << 1)
            | (u8::from(n.frame_us.is_some()) << 2)
            | (u8::from(n.sessions.is_some()) << 3)
            | (u8::from(n.capacity.is_some()) << 4)
            | (u8::from(n.local_health.is_some()) << 5);
        out.push(bits);
        put_varint(out, u64::from(n.players));
        put_varint(out, u64::from(n.primaries));
        put_varint(out, u64::from(n.replicas));
        if let Some(m) = n.missing {
            put_varint(out, u64::from(m));
        }
        if let Some(f) = n.frame_us {
            put_varint(out, u64::from(f));
        }
        for v in [n.sessions, n.capacity, n.local_health].into_iter().flatten() {
            put_varint(out, u64::from(v));
        }
        for b in &n.bytes_per_s {
            put_varint(out, *b);
        }
    }
}

/// The answer to a hover.
#[derive(Clone, Debug, PartialEq)]
pub struct Focus {
    /// Frame it belongs to.
    pub seq: u32,
    /// The object.
    pub id: ObjectId,
    /// `None` when the object no longer exists.
    pub found: Option<FocusInfo>,
}

/// What a focus says about a live object.
#[derive(Clone, Debug, PartialEq)]
pub struct FocusInfo {
    /// Kind code.
    pub kind: u8,
    /// Owner.
    pub owner: u32,
    /// Position x, world units.
    pub x: f32,
    /// Position y.
    pub y: f32,
    /// Area of interest.
    pub aoi: Option<Rect>,
}

/// Encodes a focus message.
pub fn encode_focus(f: &Focus) -> Vec<u8> {
    let mut out = vec![MSG_FOCUS];
    out.extend_from_slice(&f.seq.to_le_bytes());
    put_varint(&mut out, f.id.as_u64());
    match &f.found {
        None => out.push(0),
        Some(i) => {
            out.push(1 | (u8::from(i.aoi.is_some()) << 1));
            out.push(i.kind);
            put_varint(&mut out, u64::from(i.owner));
            for v in [i.x, i.y] {
                out.extend_from_slice(&v.to_le_bytes());
            }
            if let Some(a) = &i.aoi {
                for v in [a.min_x, a.min_y, a.max_x, a.max_y] {
                    out.extend_from_slice(&v.to_le_bytes());
                }
            }
        }
    }
    out
}

/// A bounds-checked reader.
struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], WireError> {
        if self.b.len() - self.at < n {
            return Err(WireError::Truncated { at: self.at, what });
        }
        let s = &self.b[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }
    fn u8(&mut self, what: &'static str) -> Result<u8, WireError> {
        Ok(self.take(1, what)?[0])
    }
    fn u16(&mut self, what: &'static str) -> Result<u16, WireError> {
        let s = self.take(2, what)?;
        Ok(u16::from_le_bytes([s[0], s[1]]))
    }
    fn u32(&mut self, what: &'static str) -> Result<u32, WireError> {
        let s = self.take(4, what)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn f32(&mut self, what: &'static str) -> Result<f32, WireError> {
        Ok(f32::from_bits(self.u32(what)?))
    }
    fn f64(&mut self, what: &'static str) -> Result<f64, WireError> {
        let s = self.take(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(f64::from_le_bytes(a))
    }
    fn varint(&mut self, what: &'static str) -> Result<u64, WireError> {
        let start = self.at;
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.u8(what)?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(WireError::Invalid {
            at: start,
            what,
            why: "varint longer than 10 bytes".into(),
        })
    }
    fn count(&mut self, what: &'static str, per_item_min: usize) -> Result<usize, WireError> {
        let at = self.at;
        let n = self.varint(what)?;
        // Every item takes at least `per_item_min` bytes: a count the rest of the message
        // cannot hold is refused before anything is allocated.
        let left = (self.b.len() - self.at) as u64;
        if n > MAX_ITEMS as u64 || n.saturating_mul(per_item_min as u64) > left {
            return Err(WireError::Invalid {
                at,
                what,
                why: format!("count {n} does not fit in the {left} bytes left"),
            });
        }
        Ok(n as usize)
    }
    fn u32_varint(&mut self, what: &'static str) -> Result<u32, WireError> {
        let at = self.at;
        let v = self.varint(what)?;
        u32::try_from(v).map_err(|_| WireError::Invalid {
            at,
            what,
            why: format!("{v} exceeds 32 bits"),
        })
    }
}

/// A decoded frame.
#[derive(Clone, Debug, PartialEq)]
pub struct DecodedFrame {
    /// Flags.
    pub flags: u8,
    /// Frame number.
    pub seq: u32,
    /// Producer time, s.
    pub time_s: f64,
    /// Ownership changes.
    pub events: Vec<(u64, u32, u32, u8)>,
    /// Node table, when present.
    pub nodes: Option<WireNodes>,
}

/// The browser's side of the protocol in Rust: keeps the object list frames apply to.
/// Used by tests and tools; the page's `app.js` implements the same steps.
#[derive(Clone, Debug)]
pub struct Decoder {
    classes: usize,
    objects: Vec<WireObject>,
    last_seq: Option<u32>,
}

impl Decoder {
    /// A decoder for a world with `classes` traffic classes.
    pub fn new(classes: usize) -> Self {
        Self {
            classes,
            objects: Vec::new(),
            last_seq: None,
        }
    }

    /// The objects after the last applied frame, sorted by id.
    pub fn objects(&self) -> &[WireObject] {
        &self.objects
    }

    /// Applies a frame message. A delta that does not follow the last applied frame is
    /// an error (the server sends a key after any gap).
    pub fn apply(&mut self, msg: &[u8]) -> Result<DecodedFrame, WireError> {
        let mut r = Reader { b: msg, at: 0 };
        let t = r.u8("type")?;
        if t != MSG_FRAME {
            return Err(WireError::Invalid {
                at: 0,
                what: "type",
                why: format!("{t} is not a frame"),
            });
        }
        let flags = r.u8("flags")?;
        let seq = r.u32("seq")?;
        let time_s = r.f64("time")?;
        let objects = if flags & FLAG_KEY != 0 {
            read_records(&mut r)?
        } else {
            if self.last_seq.map(|s| s.wrapping_add(1)) != Some(seq) {
                return Err(WireError::Invalid {
                    at: 2,
                    what: "seq",
                    why: format!("delta {seq} does not follow frame {:?}", self.last_seq),
                });
            }
            self.read_delta(&mut r)?
        };
        let n = r.count("events", 4)?;
        let mut events = Vec::with_capacity(n);
        for _ in 0..n {
            let id = r.varint("event id")?;
            let from = r.u32_varint("event from")?;
            let to = r.u32_varint("event to")?;
            let cause = r.u8("event cause")?;
            events.push((id, from, to, cause));
        }
        let nodes = if flags & FLAG_NODES != 0 {
            let m = r.varint("missing total")?;
            let moves = r.varint("moves")?;
            let mut bytes_per_s = Vec::with_capacity(self.classes);
            for _ in 0..self.classes {
                bytes_per_s.push(r.varint("class bytes")?);
            }
            let n = r.count("nodes", 5 + self.classes)?;
            let mut rows = Vec::with_capacity(n);
            for _ in 0..n {
                let id = r.u32_varint("node id")?;
                let bits = r.u8("node bits")?;
                let players = r.u32_varint("players")?;
                let primaries = r.u32_varint("primaries")?;
                let replicas = r.u32_varint("replicas")?;
                let missing = if bits & 2 != 0 {
                    Some(r.u32_varint("missing")?)
                } else {
                    None
                };
                let frame_us = if bits & 4 != 0 {
                    Some(r.u32_varint("frame time")?)
                } else {
                    None
                };
                let sessions = if bits & 8 != 0 {
                    Some(r.u32_varint("sessions")?)
                } else {
                    None
                };
                let capacity = if bits & 16 != 0 {
                    Some(r.u32_varint("capacity")?)
                } else {
                    None
                };
                let local_health = if bits & 32 != 0 {
                    Some(r.u32_varint("local health")?)
                } else {
                    None
                };
                let mut b = Vec::with_capacity(self.classes);
                for _ in 0..self.classes {
                    b.push(r.varint("node class bytes")?);
                }
                rows.push(WireNode {
                    id,
                    up: bits & 1 != 0,
                    players,
                    primaries,
                    replicas,
                    missing,
                    frame_us,
                    sessions,
                    capacity,
                    local_health,
                    bytes_per_s: b,
                });
            }
            Some(WireNodes {
                missing_total: m.checked_sub(1),
                moves,
                bytes_per_s,
                rows,
            })
        } else {
            None
        };
        if r.at != msg.len() {
            return Err(WireError::Trailing(msg.len() - r.at));
        }
        self.objects = objects;
        self.last_seq = Some(seq);
        Ok(DecodedFrame {
            flags,
            seq,
            time_s,
            events,
            nodes,
        })
    }

    fn read_delta(&self, r: &mut Reader<'_>) -> Result<Vec<WireObject>, WireError> {
        let prev = &self.objects;
        let nr = r.count("removed", 1)?;
        let mut gone = vec![false; prev.len()];
        let mut next = 0usize;
        for _ in 0..nr {
            let at = r.at;
            let gap = r.varint("removed index")?;
            let idx = usize::try_from(gap)
                .ok()
                .and_then(|g| next.checked_add(g))
                .filter(|i| *i < prev.len())
                .ok_or_else(|| WireError::Invalid {
                    at,
                    what: "removed index",
                    why: format!("beyond the {} objects of the previous frame", prev.len()),
                })?;
            gone[idx] = true;
            next = idx + 1;
        }
        let kept = prev.len() - nr;
        let codes = r.take(kept.div_ceil(4), "codes")?;
        let mut out = Vec::with_capacity(kept);
        let mut k = 0usize;
        for (p, g) in prev.iter().zip(&gone) {
            if *g {
                continue;
            }
            let code = (codes[k / 4] >> ((k % 4) * 2)) & 3;
            k += 1;
            let mut o = *p;
            match code {
                0 => {}
                1 => {
                    let dx = r.u8("dx")? as i8;
                    let dy = r.u8("dy")? as i8;
                    o.x = (i32::from(o.x) + i32::from(dx)).clamp(0, 65_535) as u16;
                    o.y = (i32::from(o.y) + i32::from(dy)).clamp(0, 65_535) as u16;
                }
                2 => {
                    o.x = r.u16("x")?;
                    o.y = r.u16("y")?;
                }
                _ => {
                    o.x = r.u16("x")?;
                    o.y = r.u16("y")?;
                    o.kind = r.u8("kind")?;
                    o.owner = r.u32_varint("owner")?;
                }
            }
            out.push(o);
        }
        let added = read_records(r)?;
        // Merge the added records (sorted) into the kept ones (sorted).
        let mut merged = Vec::with_capacity(out.len() + added.len());
        let (mut i, mut j) = (0, 0);
        while i < out.len() || j < added.len() {
            match (out.get(i), added.get(j)) {
                (Some(a), Some(b)) if a.id == b.id => {
                    return Err(WireError::Invalid {
                        at: r.at,
                        what: "added object",
                        why: format!("id {} is already present", b.id),
                    });
                }
                (Some(a), Some(b)) if a.id < b.id => {
                    merged.push(*a);
                    i += 1;
                }
                (Some(a), None) => {
                    merged.push(*a);
                    i += 1;
                }
                (_, Some(b)) => {
                    merged.push(*b);
                    j += 1;
                }
                (None, None) => break,
            }
        }
        Ok(merged)
    }
}

/// Decodes a focus message.
pub fn decode_focus(msg: &[u8]) -> Result<Focus, WireError> {
    let mut r = Reader { b: msg, at: 0 };
    let t = r.u8("type")?;
    if t != MSG_FOCUS {
        return Err(WireError::Invalid {
            at: 0,
            what: "type",
            why: format!("{t} is not a focus message"),
        });
    }
    let seq = r.u32("seq")?;
    let raw = r.varint("id")?;
    let id = ObjectId::new(NodeId((raw >> 32) as u32), raw as u32);
    let bits = r.u8("focus bits")?;
    let found = if bits & 1 != 0 {
        let kind = r.u8("kind")?;
        let owner = r.u32_varint("owner")?;
        let x = r.f32("x")?;
        let y = r.f32("y")?;
        let aoi = if bits & 2 != 0 {
            let v = [r.f32("aoi")?, r.f32("aoi")?, r.f32("aoi")?, r.f32("aoi")?];
            Some(Rect::new(v[0], v[1], v[2], v[3]))
        } else {
            None
        };
        Some(FocusInfo {
            kind,
            owner,
            x,
            y,
            aoi,
        })
    } else {
        None
    };
    if r.at != msg.len() {
        return Err(WireError::Trailing(msg.len() - r.at));
    }
    Ok(Focus { seq, id, found })
}

fn read_records(r: &mut Reader<'_>) -> Result<Vec<WireObject>, WireError> {
    let n = r.count("objects", 7)?;
    let mut v = Vec::with_capacity(n);
    let mut id = 0u64;
    for k in 0..n {
        let at = r.at;
        let gap = r.varint("id gap")?;
        if k > 0 && gap == 0 {
            return Err(WireError::Invalid {
                at,
                what: "id gap",
                why: "ids must increase".into(),
            });
        }
        id = id.checked_add(gap).ok_or_else(|| WireError::Invalid {
            at,
            what: "id gap",
            why: "id overflows 64 bits".into(),
        })?;
        let x = r.u16("x")?;
        let y = r.u16("y")?;
        let kind = r.u8("kind")?;
        let owner = r.u32_varint("owner")?;
        v.push(WireObject {
            id,
            x,
            y,
            kind,
            owner,
        });
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(id: u64, x: u16, y: u16, owner: u32) -> WireObject {
        WireObject {
            id,
            x,
            y,
            kind: 0,
            owner,
        }
    }

    fn frame(flags: u8, seq: u32, body: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut v = Vec::new();
        put_header(&mut v, flags, seq, 1.5);
        body(&mut v);
        put_events(&mut v, &[]);
        v
    }

    #[test]
    fn delta_reproduces_every_kind_of_change() {
        let a = vec![
            obj(1, 10, 10, 0),
            obj(5, 100, 100, 1),
            obj(9, 0, 0, 2),
            obj(12, 7, 7, 3),
        ];
        // 1 moves a little, 5 jumps, 9 is removed, 12 changes owner, 20 and 3 are added.
        let b = vec![
            obj(1, 20, 5, 0),
            obj(3, 1, 1, 1),
            obj(5, 60_000, 100, 1),
            obj(12, 7, 8, 4),
            obj(20, 2, 2, 2),
        ];
        let mut d = Decoder::new(0);
        d.apply(&frame(FLAG_KEY, 7, |v| put_key(v, &a))).unwrap();
        assert_eq!(d.objects(), &a[..]);
        d.apply(&frame(0, 8, |v| put_delta(v, &a, &b))).unwrap();
        assert_eq!(d.objects(), &b[..]);
    }

    #[test]
    fn a_delta_after_a_gap_is_refused() {
        let a = vec![obj(1, 10, 10, 0)];
        let mut d = Decoder::new(0);
        d.apply(&frame(FLAG_KEY, 7, |v| put_key(v, &a))).unwrap();
        let e = d.apply(&frame(0, 9, |v| put_delta(v, &a, &a))).unwrap_err();
        assert!(matches!(e, WireError::Invalid { what: "seq", .. }), "{e}");
    }

    #[test]
    fn counts_larger_than_the_message_are_refused_before_allocating() {
        let mut v = Vec::new();
        put_header(&mut v, FLAG_KEY, 1, 0.0);
        put_varint(&mut v, 1 << 40);
        let e = Decoder::new(0).apply(&v).unwrap_err();
        assert!(matches!(e, WireError::Invalid { what: "objects", .. }), "{e}");
    }

    #[test]
    fn every_truncation_of_a_frame_is_an_error() {
        let a = vec![obj(1, 10, 10, 0), obj(300, 5, 5, 70_000)];
        let nodes = WireNodes {
            missing_total: Some(3),
            moves: 2,
            bytes_per_s: vec![10, 20],
            rows: vec![WireNode {
                id: 4,
                up: true,
                players: 8,
                primaries: 9,
                replicas: 50,
                missing: Some(1),
                frame_us: None,
                sessions: Some(3),
                capacity: Some(16),
                local_health: Some(2),
                bytes_per_s: vec![5, 6],
            }],
        };
        let mut v = Vec::new();
        put_header(&mut v, FLAG_KEY | FLAG_NODES, 1, 0.0);
        put_key(&mut v, &a);
        put_events(
            &mut v,
            &[OwnerChange {
                id: ObjectId::new(NodeId(1), 2),
                from: NodeId(1),
                to: NodeId(2),
                cause: CAUSE_MIGRATION,
            }],
        );
        put_nodes(&mut v, &nodes);
        let f = Decoder::new(2).apply(&v).unwrap();
        assert_eq!(f.nodes.as_ref(), Some(&nodes));
        assert_eq!(f.events, vec![(ObjectId::new(NodeId(1), 2).as_u64(), 1, 2, 0)]);
        for cut in 0..v.len() {
            assert!(Decoder::new(2).apply(&v[..cut]).is_err(), "cut at {cut}");
        }
        let mut long = v.clone();
        long.push(0);
        assert_eq!(Decoder::new(2).apply(&long), Err(WireError::Trailing(1)));
    }

    #[test]
    fn focus_round_trip() {
        let f = Focus {
            seq: 9,
            id: ObjectId::new(NodeId(3), 17),
            found: Some(FocusInfo {
                kind: 0,
                owner: 5,
                x: 10.0,
                y: 20.0,
                aoi: Some(Rect::new(0.0, 1.0, 2.0, 3.0)),
            }),
        };
        assert_eq!(decode_focus(&encode_focus(&f)), Ok(f.clone()));
        let gone = Focus { found: None, ..f };
        assert_eq!(decode_focus(&encode_focus(&gone)), Ok(gone));
    }

    #[test]
    fn client_messages() {
        assert_eq!(
            ClientMsg::parse(r#"{"hover":"n3.17"}"#),
            Ok(ClientMsg::Hover(Some(ObjectId::new(NodeId(3), 17))))
        );
        assert_eq!(ClientMsg::parse(r#"{"hover":null}"#), Ok(ClientMsg::Hover(None)));
        for bad in [
            r#"{"hover":"x"}"#,
            "nope",
            r#"{"hover":1}"#,
            r#"{"jump":true}"#,
            r#"{"hover":"n1.99999999999"}"#,
        ] {
            assert!(
                matches!(ClientMsg::parse(bad), Err(ClientMsgError::Malformed(_))),
                "{bad}"
            );
        }
        let long = format!(r#"{{"hover":"{}"}}"#, "1".repeat(MAX_CLIENT_MESSAGE));
        assert!(matches!(ClientMsg::parse(&long), Err(ClientMsgError::TooLong(_))));
    }

    #[test]
    fn quantizer_clamps_and_keeps_quarter_units_on_small_maps() {
        let q = Quantizer::new(&Rect::new(0.0, 0.0, 100.0, 50.0));
        assert_eq!(q.quantum, 0.25);
        assert_eq!(q.qx(-5.0), 0);
        assert_eq!(q.qx(f32::NAN), 0);
        assert_eq!(q.qx(10.0), 40);
        let big = Quantizer::new(&Rect::new(0.0, 0.0, 614_400.0, 2400.0));
        assert_eq!(big.qx(614_400.0), 65_535);
        assert!((big.x(big.qx(300_000.0)) - 300_000.0).abs() <= big.quantum);
    }
}
