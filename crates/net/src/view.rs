//! What a real node shows a live dashboard (issue 17): its primaries (id, kind, position,
//! area of interest) and its counters, as a [`ViewSnapshot`] the driver publishes into a
//! [`ViewCell`] at most every [`ViewCell::period`] — and only while someone asked for it
//! in the last [`WANTED_FOR`], so a node nobody watches builds nothing. The metrics
//! endpoint ([`crate::metrics_server`]) serves it encoded at `GET /view` and the world's
//! description (a JSON document given by the application) at `GET /world`.
//!
//! As with [`crate::metrics::SnapshotCell`], the frame loop only copies plain numbers and
//! swaps an `Arc` under a lock held for the swap; encoding happens on the endpoint's
//! thread, per request.
//!
//! # Wire format (version [`VIEW_VERSION`]), little-endian
//!
//! ```text
//! "WMV" version:u8
//! node:u32 generation:u64 uptime_s:f64 frame_us:u32 (u32::MAX: not measured yet)
//! replicas:u32 members:u32 migrations_started:u64 migrations_bound:u64 adoptions:u64
//! sessions:u32 capacity:u32 (u32::MAX: the node admits no players)
//! local_health:u8 (0..=8; u8::MAX: no dynamic membership; absent in version 1)
//! classes:u8 (≤ MAX_CLASSES) then classes × sent_bytes:u64
//! objects:u32 (≤ the decoder's limit) then per object:
//!   origin:u32 generation:u32 counter:u32 (the id) kind:u8 flags:u8 (bit 0: area of interest follows, bit 1: frozen) x:f32 y:f32
//!   [min_x:f32 min_y:f32 max_x:f32 max_y:f32]
//! ```
//!
//! [`decode`] reads versions 1 and 2 (a dashboard newer than the nodes it watches, during
//! a rolling upgrade), bounds every count by the limit and by the bytes left before
//! allocating, rejects other versions, trailing bytes, non-finite positions and a local
//! health beyond 8, and returns a typed [`ViewError`]; it never panics.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use worldmesh_core::{NodeId, ObjectId};

/// The format's version (the byte after the magic).
pub const VIEW_VERSION: u8 = 2;
/// The oldest version [`decode`] reads.
pub const VIEW_OLDEST_VERSION: u8 = 1;
/// The magic that starts an encoded view.
pub const VIEW_MAGIC: &[u8; 3] = b"WMV";
/// Most traffic classes a view carries.
pub const MAX_CLASSES: usize = 16;
/// A node builds views for this long after the last request for one.
pub const WANTED_FOR: Duration = Duration::from_secs(10);
/// Bytes of an object without an area of interest.
const OBJECT_MIN: usize = 12 + 1 + 1 + 4 + 4;
/// The highest local health score (`Membership::local_health`).
const MAX_LOCAL_HEALTH: u8 = 8;
const FLAG_AOI: u8 = 1;
const FLAG_FROZEN: u8 = 2;

/// One primary of the node.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ViewObject {
    /// The object's id.
    pub id: ObjectId,
    /// Its kind code (`GameObject::kind`).
    pub kind: u8,
    /// Position x, world units.
    pub x: f32,
    /// Position y, world units.
    pub y: f32,
    /// Its area of interest (min x, min y, max x, max y), if it has one.
    pub aoi: Option<[f32; 4]>,
    /// Frozen: migrating away (its new owner may already show it).
    pub frozen: bool,
}

/// Everything a node shows a dashboard at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ViewSnapshot {
    /// This node's id.
    pub node: u32,
    /// This process's generation.
    pub generation: u64,
    /// The node's time, seconds since its start.
    pub uptime_s: f64,
    /// How long its last frame took, microseconds (`None` before the first).
    pub frame_us: Option<u32>,
    /// Replicas held.
    pub replicas: u32,
    /// Live members it knows, itself included.
    pub members: u32,
    /// Regions it started to migrate.
    pub migrations_started: u64,
    /// Regions migrated to it.
    pub migrations_bound: u64,
    /// Orphans of failed members it adopted.
    pub adoptions: u64,
    /// Players connected through its player port (`None`: it admits no players).
    pub sessions: Option<u32>,
    /// Players it takes (assignment capacity or session limit; `None`: no player port).
    pub capacity: Option<u32>,
    /// Its failure detector's local health, 0 (healthy) to 8 (`None`: no dynamic
    /// membership, or a version-1 view).
    pub local_health: Option<u8>,
    /// Bytes sent since the start, by traffic class (`MessageClass as usize`).
    pub sent_bytes: Vec<u64>,
    /// Its primaries.
    pub objects: Vec<ViewObject>,
}

/// Why bytes are not a view.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ViewError {
    /// Shorter than what it declares.
    #[error("view truncated: needed {needed} more bytes at offset {at}")]
    Truncated {
        /// Where the read failed.
        at: usize,
        /// Bytes missing.
        needed: usize,
    },
    /// Does not start with the magic.
    #[error("not a worldmesh view (bad magic)")]
    Magic,
    /// Another version of the format.
    #[error(
        "view format version {0} is not supported (this build reads {VIEW_OLDEST_VERSION} to {VIEW_VERSION})"
    )]
    Version(u8),
    /// A local health score beyond 8.
    #[error("local health {0} is beyond 8")]
    Health(u8),
    /// A count beyond its limit.
    #[error("view declares {count} {what}, more than the limit of {max}")]
    TooMany {
        /// What was counted.
        what: &'static str,
        /// The count declared.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// A position or area that is not a finite number.
    #[error("object {0} has a non-finite position or area of interest")]
    NotFinite(ObjectId),
    /// Unknown flag bits.
    #[error("object {id} has unknown flags {flags:#04x}")]
    Flags {
        /// The object.
        id: ObjectId,
        /// Its flags byte.
        flags: u8,
    },
    /// Bytes after the last object.
    #[error("{0} bytes after the end of the view")]
    Trailing(usize),
}

/// Encodes `v` (at most [`MAX_CLASSES`] classes are written).
pub fn encode(v: &ViewSnapshot) -> Vec<u8> {
    let mut o = Vec::with_capacity(96 + v.objects.len() * (OBJECT_MIN + 16));
    o.extend_from_slice(VIEW_MAGIC);
    o.push(VIEW_VERSION);
    o.extend_from_slice(&v.node.to_le_bytes());
    o.extend_from_slice(&v.generation.to_le_bytes());
    o.extend_from_slice(&v.uptime_s.to_le_bytes());
    o.extend_from_slice(&v.frame_us.unwrap_or(u32::MAX).to_le_bytes());
    o.extend_from_slice(&v.replicas.to_le_bytes());
    o.extend_from_slice(&v.members.to_le_bytes());
    o.extend_from_slice(&v.migrations_started.to_le_bytes());
    o.extend_from_slice(&v.migrations_bound.to_le_bytes());
    o.extend_from_slice(&v.adoptions.to_le_bytes());
    o.extend_from_slice(&v.sessions.unwrap_or(u32::MAX).to_le_bytes());
    o.extend_from_slice(&v.capacity.unwrap_or(u32::MAX).to_le_bytes());
    o.push(v.local_health.map_or(u8::MAX, |h| h.min(MAX_LOCAL_HEALTH)));
    let classes = &v.sent_bytes[..v.sent_bytes.len().min(MAX_CLASSES)];
    o.push(classes.len() as u8);
    for c in classes {
        o.extend_from_slice(&c.to_le_bytes());
    }
    let n = v.objects.len().min(u32::MAX as usize);
    o.extend_from_slice(&(n as u32).to_le_bytes());
    for ob in &v.objects[..n] {
        o.extend_from_slice(&ob.id.origin.0.to_le_bytes());
        o.extend_from_slice(&ob.id.generation().to_le_bytes());
        o.extend_from_slice(&ob.id.counter().to_le_bytes());
        o.push(ob.kind);
        let flags = if ob.aoi.is_some() { FLAG_AOI } else { 0 } | if ob.frozen { FLAG_FROZEN } else { 0 };
        o.push(flags);
        o.extend_from_slice(&ob.x.to_le_bytes());
        o.extend_from_slice(&ob.y.to_le_bytes());
        if let Some(a) = ob.aoi {
            for f in a {
                o.extend_from_slice(&f.to_le_bytes());
            }
        }
    }
    o
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], ViewError> {
        let left = self.b.len() - self.at;
        if left < n {
            return Err(ViewError::Truncated {
                at: self.at,
                needed: n - left,
            });
        }
        let s = &self.b[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }
    fn arr<const N: usize>(&mut self) -> Result<[u8; N], ViewError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, ViewError> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, ViewError> {
        Ok(u32::from_le_bytes(self.arr()?))
    }
    fn u64(&mut self) -> Result<u64, ViewError> {
        Ok(u64::from_le_bytes(self.arr()?))
    }
    fn f32(&mut self) -> Result<f32, ViewError> {
        Ok(f32::from_le_bytes(self.arr()?))
    }
    fn f64(&mut self) -> Result<f64, ViewError> {
        Ok(f64::from_le_bytes(self.arr()?))
    }
    fn left(&self) -> usize {
        self.b.len() - self.at
    }
}

/// Decodes a view of at most `max_objects` objects (see the module documentation).
pub fn decode(bytes: &[u8], max_objects: usize) -> Result<ViewSnapshot, ViewError> {
    let mut r = Reader { b: bytes, at: 0 };
    if r.take(3)? != VIEW_MAGIC {
        return Err(ViewError::Magic);
    }
    let version = r.u8()?;
    if !(VIEW_OLDEST_VERSION..=VIEW_VERSION).contains(&version) {
        return Err(ViewError::Version(version));
    }
    let node = r.u32()?;
    let generation = r.u64()?;
    let uptime_s = r.f64()?;
    let frame_us = Some(r.u32()?).filter(|f| *f != u32::MAX);
    let replicas = r.u32()?;
    let members = r.u32()?;
    let migrations_started = r.u64()?;
    let migrations_bound = r.u64()?;
    let adoptions = r.u64()?;
    let sessions = Some(r.u32()?).filter(|s| *s != u32::MAX);
    let capacity = Some(r.u32()?).filter(|s| *s != u32::MAX);
    let local_health = match version {
        1 => None,
        _ => match r.u8()? {
            u8::MAX => None,
            h if h <= MAX_LOCAL_HEALTH => Some(h),
            h => return Err(ViewError::Health(h)),
        },
    };
    let classes = usize::from(r.u8()?);
    if classes > MAX_CLASSES {
        return Err(ViewError::TooMany {
            what: "traffic classes",
            count: classes,
            max: MAX_CLASSES,
        });
    }
    let sent_bytes = (0..classes).map(|_| r.u64()).collect::<Result<Vec<_>, _>>()?;
    let count = r.u32()? as usize;
    if count > max_objects {
        return Err(ViewError::TooMany {
            what: "objects",
            count,
            max: max_objects,
        });
    }
    if count > r.left() / OBJECT_MIN {
        return Err(ViewError::Truncated {
            at: r.at,
            needed: count * OBJECT_MIN - r.left(),
        });
    }
    let mut objects = Vec::with_capacity(count);
    for _ in 0..count {
        let (origin, generation, counter) = (r.u32()?, r.u32()?, r.u32()?);
        let id = ObjectId::with_generation(NodeId(origin), generation, counter);
        let kind = r.u8()?;
        let flags = r.u8()?;
        if flags & !(FLAG_AOI | FLAG_FROZEN) != 0 {
            return Err(ViewError::Flags { id, flags });
        }
        let (x, y) = (r.f32()?, r.f32()?);
        let aoi = if flags & FLAG_AOI != 0 {
            Some([r.f32()?, r.f32()?, r.f32()?, r.f32()?])
        } else {
            None
        };
        if !x.is_finite() || !y.is_finite() || aoi.is_some_and(|a| a.iter().any(|v| !v.is_finite())) {
            return Err(ViewError::NotFinite(id));
        }
        objects.push(ViewObject {
            id,
            kind,
            x,
            y,
            aoi,
            frozen: flags & FLAG_FROZEN != 0,
        });
    }
    if r.left() > 0 {
        return Err(ViewError::Trailing(r.left()));
    }
    Ok(ViewSnapshot {
        node,
        generation,
        uptime_s,
        frame_us,
        replicas,
        members,
        migrations_started,
        migrations_bound,
        adoptions,
        sessions,
        capacity,
        local_health,
        sent_bytes,
        objects,
    })
}

#[derive(Debug)]
struct Inner {
    latest: Mutex<Option<Arc<ViewSnapshot>>>,
    world: Arc<str>,
    origin: Instant,
    /// Milliseconds after `origin` of the last request (0: never).
    asked_ms: AtomicU64,
    period: Duration,
}

/// Where the driver publishes its latest [`ViewSnapshot`] and the endpoint reads it, with
/// the world's description. Cloning shares the cell.
#[derive(Clone, Debug)]
pub struct ViewCell {
    inner: Arc<Inner>,
}

impl ViewCell {
    /// An empty cell; `world` is served as is at `GET /world` (a JSON document the
    /// application writes: the dashboard reads its `WorldInfo`); views are built at most
    /// every `period`.
    pub fn new(world: impl Into<Arc<str>>, period: Duration) -> Self {
        Self {
            inner: Arc::new(Inner {
                latest: Mutex::new(None),
                world: world.into(),
                origin: Instant::now(),
                asked_ms: AtomicU64::new(0),
                period,
            }),
        }
    }

    /// The world's description.
    pub fn world(&self) -> &str {
        &self.inner.world
    }

    /// The shortest time between two views.
    pub fn period(&self) -> Duration {
        self.inner.period
    }

    /// Notes that someone asked for a view now (the endpoint calls it per request).
    pub fn asked(&self) {
        let ms = self.inner.origin.elapsed().as_millis() as u64;
        self.inner.asked_ms.store(ms.max(1), Ordering::Relaxed);
    }

    /// True when a view was asked for in the last [`WANTED_FOR`].
    pub fn wanted(&self) -> bool {
        let asked = self.inner.asked_ms.load(Ordering::Relaxed);
        asked != 0 && self.inner.origin.elapsed().as_millis() as u64 <= asked + WANTED_FOR.as_millis() as u64
    }

    /// Replaces the view (the lock is held for a pointer swap).
    pub fn publish(&self, v: ViewSnapshot) {
        let v = Arc::new(v);
        let old = self
            .inner
            .latest
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .replace(v);
        drop(old);
    }

    /// The latest view, if any was published.
    pub fn latest(&self) -> Option<Arc<ViewSnapshot>> {
        self.inner
            .latest
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ViewSnapshot {
        ViewSnapshot {
            node: 3,
            generation: 9,
            uptime_s: 12.5,
            frame_us: Some(840),
            replicas: 17,
            members: 4,
            migrations_started: 2,
            migrations_bound: 1,
            adoptions: 5,
            sessions: Some(2),
            capacity: Some(64),
            local_health: Some(3),
            sent_bytes: vec![1, 2, 3, 4, 5, 6],
            objects: vec![
                ViewObject {
                    id: ObjectId::with_generation(NodeId(3), 5, 7),
                    kind: 0,
                    x: 10.0,
                    y: -4.5,
                    aoi: Some([0.0, -10.0, 20.0, 1.0]),
                    frozen: false,
                },
                ViewObject {
                    id: ObjectId::new(NodeId(1), 11),
                    kind: 2,
                    x: 1.0,
                    y: 2.0,
                    aoi: None,
                    frozen: true,
                },
            ],
        }
    }

    #[test]
    fn round_trips() {
        let v = sample();
        assert_eq!(decode(&encode(&v), 10), Ok(v));
        let empty = ViewSnapshot::default();
        assert_eq!(decode(&encode(&empty), 0), Ok(empty));
    }

    /// A version-1 view (a node older than the dashboard) reads without a local health.
    #[test]
    fn reads_version_1() {
        let v = sample();
        let mut old = encode(&v);
        old[3] = 1;
        old.remove(68);
        assert_eq!(
            decode(&old, 10),
            Ok(ViewSnapshot {
                local_health: None,
                ..v
            })
        );
    }

    #[test]
    fn refuses_bad_input_with_typed_errors() {
        let b = encode(&sample());
        assert_eq!(
            decode(&b, 1),
            Err(ViewError::TooMany {
                what: "objects",
                count: 2,
                max: 1
            })
        );
        assert_eq!(decode(b"XYZ\x01", 10), Err(ViewError::Magic));
        for other in [0, VIEW_VERSION + 1] {
            let mut v = b.clone();
            v[3] = other;
            assert_eq!(decode(&v, 10), Err(ViewError::Version(other)));
        }
        // The local health byte follows capacity (4 + 64 bytes in).
        let mut health = b.clone();
        assert_eq!(health[68], 3);
        health[68] = 9;
        assert_eq!(decode(&health, 10), Err(ViewError::Health(9)));
        let mut trailing = b.clone();
        trailing.push(0);
        assert_eq!(decode(&trailing, 10), Err(ViewError::Trailing(1)));
        // Every strict prefix is truncated, never a panic.
        for n in 0..b.len() {
            assert!(
                matches!(
                    decode(&b[..n], 10),
                    Err(ViewError::Truncated { .. } | ViewError::Magic)
                ),
                "prefix {n}: {:?}",
                decode(&b[..n], 10)
            );
        }
        // A huge declared count with no bytes behind it allocates nothing.
        let mut huge = encode(&ViewSnapshot::default());
        let at = huge.len() - 4;
        huge[at..].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            decode(&huge, usize::MAX),
            Err(ViewError::Truncated { .. })
        ));
        // Too many classes.
        let mut classes = encode(&ViewSnapshot::default());
        let at = classes.len() - 5;
        classes[at] = 200;
        assert!(matches!(
            decode(&classes, 10),
            Err(ViewError::TooMany {
                what: "traffic classes",
                ..
            })
        ));
        // A NaN position.
        let mut nan = sample();
        nan.objects[1].x = f32::NAN;
        assert_eq!(
            decode(&encode(&nan), 10),
            Err(ViewError::NotFinite(ObjectId::new(NodeId(1), 11)))
        );
        let mut flags = encode(&sample());
        let last = flags.len() - (12 + 2 + 8);
        flags[last + 13] = 0x80;
        assert!(matches!(
            decode(&flags, 10),
            Err(ViewError::Flags { flags: 0x80, .. })
        ));
    }

    proptest::proptest! {
        /// A dashboard decodes bytes from any node: any bytes, and any change to a valid
        /// view's bytes, give a view or a typed error, never a panic.
        #[test]
        fn any_bytes_decode_without_panicking(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256),
            at in proptest::prelude::any::<proptest::sample::Index>(),
            byte in proptest::prelude::any::<u8>(),
        ) {
            let _ = decode(&bytes, 1_000);
            let mut valid = encode(&sample());
            let i = at.index(valid.len());
            valid[i] = byte;
            if let Ok(v) = decode(&valid, 1_000) {
                proptest::prop_assert!(v.local_health.is_none_or(|h| h <= 8));
            }
        }
    }

    #[test]
    fn wanted_only_after_a_request() {
        let c = ViewCell::new("{}", Duration::from_millis(100));
        assert!(!c.wanted());
        c.asked();
        assert!(c.wanted());
        assert!(c.latest().is_none());
        c.publish(sample());
        assert_eq!(c.latest().map(|v| v.node), Some(3));
        assert_eq!(c.world(), "{}");
    }
}
