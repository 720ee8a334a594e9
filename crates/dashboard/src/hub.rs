//! The hub between one producer and many browsers.
//!
//! The producer calls [`Hub::publish`] once per tick from its own thread. The hub encodes
//! the tick once (a delta against the previous tick; a key frame is built lazily for
//! browsers that need one), detects ownership changes, turns counters into rates every
//! `node_every` ticks, keeps a bounded history of the time series and of the last
//! migrations, and hands the frame to every browser's bounded queue with `try_send`. A
//! browser whose queue is full loses that frame (counted in [`HubStats::frames_dropped`]
//! and seen by the browser as a gap in frame numbers) and gets a key frame next: a slow or
//! stuck browser never blocks the producer, and holds at most `queue_frames` frames.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use axum::body::Bytes;
use tokio::sync::mpsc;
use worldmesh_core::{NodeId, ObjectId};

use crate::model::{Rect, Tick, WorldInfo};
use crate::wire::{
    self, CAUSE_ADOPTION, CAUSE_MIGRATION, EventRecord, FLAG_FINISHED, FLAG_KEY, FLAG_NODES, Hello,
    OwnerChange, Quantizer, SeriesPoint, WireNode, WireNodes, WireObject,
};

/// Limits and cadences of a [`Hub`].
#[derive(Clone, Debug)]
pub struct HubConfig {
    /// Ticks per second the producer aims at (told to browsers).
    pub tick_hz: f64,
    /// The node table and a time-series point go out every this many ticks.
    pub node_every: u32,
    /// Frames queued per browser before frames are dropped for it.
    pub queue_frames: usize,
    /// Browsers connected at once; more are refused (HTTP 503).
    pub max_clients: usize,
    /// Time-series points kept for browsers that connect later.
    pub series_len: usize,
    /// Ownership changes kept for browsers that connect later.
    pub events_len: usize,
    /// Most objects per tick; the rest are left out and counted.
    pub max_objects: usize,
    /// Most ownership changes sent per tick (the count is exact in the series).
    pub max_events: usize,
}

impl Default for HubConfig {
    fn default() -> Self {
        Self {
            tick_hz: 10.0,
            node_every: 5,
            queue_frames: 4,
            max_clients: 32,
            series_len: 600,
            events_len: 200,
            max_objects: 1 << 18,
            max_events: 2000,
        }
    }
}

/// Counters of a hub (all since it was made).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct HubStats {
    /// Ticks published.
    pub ticks: u64,
    /// Frame number of the last tick.
    pub seq: u32,
    /// Producer time of the last tick, s.
    pub time_s: f64,
    /// Objects in the last tick.
    pub objects: usize,
    /// Nodes in the last tick.
    pub nodes: usize,
    /// The producer has finished.
    pub finished: bool,
    /// Browsers connected now.
    pub clients: usize,
    /// Frames not queued for a browser because its queue was full.
    pub frames_dropped: u64,
    /// WebSocket messages sent to browsers.
    pub ws_messages: u64,
    /// WebSocket payload bytes sent to browsers.
    pub ws_bytes: u64,
    /// Key frames sent (first frames and frames after a gap).
    pub key_frames: u64,
    /// Messages from browsers refused (malformed, binary, oversize).
    pub refused_messages: u64,
    /// Objects left out because a tick had more than `max_objects`.
    pub objects_left_out: u64,
    /// Ownership changes seen: migrations, adoptions.
    pub moves: [u64; 2],
}

/// One published tick, shared by every browser's queue.
pub(crate) struct Published {
    pub(crate) seq: u32,
    pub(crate) objects: Vec<WireObject>,
    pub(crate) aois: Vec<Option<Rect>>,
    /// The whole frame as a delta against `seq - 1`; `None` for the first tick.
    pub(crate) delta: Option<Bytes>,
    flags: u8,
    time_s: f64,
    /// The event and node sections (shared by the delta and the key frame).
    tail: Vec<u8>,
    key: OnceLock<Bytes>,
}

impl Published {
    /// The frame as a key frame (built on first use).
    pub(crate) fn key(&self) -> Bytes {
        self.key
            .get_or_init(|| {
                let mut v = Vec::with_capacity(16 + self.objects.len() * 9 + self.tail.len());
                wire::put_header(&mut v, self.flags | FLAG_KEY, self.seq, self.time_s);
                wire::put_key(&mut v, &self.objects);
                v.extend_from_slice(&self.tail);
                Bytes::from(v)
            })
            .clone()
    }

    /// The focus message for object `id` in this frame.
    pub(crate) fn focus(&self, id: ObjectId, quant: &Quantizer) -> Vec<u8> {
        let k = self.objects.binary_search_by_key(&id.as_u64(), |o| o.id).ok();
        wire::encode_focus(&wire::Focus {
            seq: self.seq,
            id,
            found: k.map(|k| {
                let o = &self.objects[k];
                wire::FocusInfo {
                    kind: o.kind,
                    owner: o.owner,
                    x: quant.x(o.x),
                    y: quant.y(o.y),
                    aoi: self.aois[k],
                }
            }),
        })
    }
}

struct ClientSlot {
    id: u64,
    tx: mpsc::Sender<Arc<Published>>,
}

struct State {
    seq: u32,
    ticks: u64,
    latest: Option<Arc<Published>>,
    latest_nodes: usize,
    clients: Vec<ClientSlot>,
    /// Per node: producer time and cumulative sent bytes at the last node section.
    counters: BTreeMap<u32, (f64, Vec<u64>)>,
    series: VecDeque<SeriesPoint>,
    events: VecDeque<EventRecord>,
    moves_since_point: u64,
    moves: [u64; 2],
    finished: bool,
    objects_left_out: u64,
}

/// What a newly connected browser gets: its queue, the hello and the latest frame.
pub(crate) struct Subscription {
    hub: Arc<Hub>,
    id: u64,
    pub(crate) rx: mpsc::Receiver<Arc<Published>>,
    pub(crate) hello: String,
    pub(crate) latest: Option<Arc<Published>>,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.hub.state().clients.retain(|c| c.id != self.id);
    }
}

/// Too many browsers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the dashboard already serves {0} browsers, its limit")]
pub struct HubFull(pub usize);

/// The hub (see the module documentation). Shared as `Arc<Hub>` between the producer and
/// the server.
pub struct Hub {
    world: WorldInfo,
    quant: Quantizer,
    config: HubConfig,
    state: Mutex<State>,
    next_client: AtomicU64,
    pub(crate) frames_dropped: AtomicU64,
    pub(crate) ws_messages: AtomicU64,
    pub(crate) ws_bytes: AtomicU64,
    pub(crate) key_frames: AtomicU64,
    pub(crate) refused_messages: AtomicU64,
}

impl Hub {
    /// A hub for `world` with no tick yet.
    pub fn new(world: WorldInfo, config: HubConfig) -> Arc<Self> {
        let quant = Quantizer::new(&world.bounds);
        Arc::new(Self {
            world,
            quant,
            config,
            state: Mutex::new(State {
                seq: 0,
                ticks: 0,
                latest: None,
                latest_nodes: 0,
                clients: Vec::new(),
                counters: BTreeMap::new(),
                series: VecDeque::new(),
                events: VecDeque::new(),
                moves_since_point: 0,
                moves: [0; 2],
                finished: false,
                objects_left_out: 0,
            }),
            next_client: AtomicU64::new(0),
            frames_dropped: AtomicU64::new(0),
            ws_messages: AtomicU64::new(0),
            ws_bytes: AtomicU64::new(0),
            key_frames: AtomicU64::new(0),
            refused_messages: AtomicU64::new(0),
        })
    }

    /// The world shown.
    pub fn world(&self) -> &WorldInfo {
        &self.world
    }

    /// The position grid.
    pub fn quantizer(&self) -> &Quantizer {
        &self.quant
    }

    /// The configuration.
    pub fn config(&self) -> &HubConfig {
        &self.config
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves consistent enough state to keep serving.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The counters.
    pub fn stats(&self) -> HubStats {
        let s = self.state();
        HubStats {
            ticks: s.ticks,
            seq: s.latest.as_ref().map_or(0, |p| p.seq),
            time_s: s.latest.as_ref().map_or(0.0, |p| p.time_s),
            objects: s.latest.as_ref().map_or(0, |p| p.objects.len()),
            nodes: s.latest_nodes,
            finished: s.finished,
            clients: s.clients.len(),
            frames_dropped: self.frames_dropped.load(Ordering::Relaxed),
            ws_messages: self.ws_messages.load(Ordering::Relaxed),
            ws_bytes: self.ws_bytes.load(Ordering::Relaxed),
            key_frames: self.key_frames.load(Ordering::Relaxed),
            refused_messages: self.refused_messages.load(Ordering::Relaxed),
            objects_left_out: s.objects_left_out,
            moves: s.moves,
        }
    }

    /// True when the next [`Hub::publish`] sends the node table (every `node_every` ticks):
    /// figures that are costly to produce are needed only then.
    pub fn next_has_nodes(&self) -> bool {
        let s = self.state();
        s.ticks == 0
            || s.seq
                .wrapping_add(1)
                .is_multiple_of(self.config.node_every.max(1))
    }

    /// Sizes in bytes of the last published frame as a delta (0 for the first frame) and as
    /// a key frame (built now if no browser needed it yet). For measurements.
    pub fn last_frame_sizes(&self) -> Option<(usize, usize)> {
        let s = self.state();
        let p = s.latest.as_ref()?;
        Some((p.delta.as_ref().map_or(0, |d| d.len()), p.key().len()))
    }

    /// The last tick's object `id`: (kind, owner, x, y, area of interest).
    pub fn object(&self, id: ObjectId) -> Option<(u8, NodeId, f32, f32, Option<Rect>)> {
        let s = self.state();
        let p = s.latest.as_ref()?;
        let k = p.objects.binary_search_by_key(&id.as_u64(), |o| o.id).ok()?;
        let o = &p.objects[k];
        Some((
            o.kind,
            NodeId(o.owner),
            self.quant.x(o.x),
            self.quant.y(o.y),
            p.aois[k],
        ))
    }

    /// Registers a browser.
    pub(crate) fn subscribe(self: &Arc<Self>) -> Result<Subscription, HubFull> {
        let mut s = self.state();
        if s.clients.len() >= self.config.max_clients {
            return Err(HubFull(self.config.max_clients));
        }
        let id = self.next_client.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel(self.config.queue_frames.max(1));
        s.clients.push(ClientSlot { id, tx });
        let hello = Hello {
            kind: "hello",
            wire: wire::WIRE_VERSION,
            world: &self.world,
            quantum: self.quant.quantum,
            tick_hz: self.config.tick_hz,
            finished: s.finished,
            series: s.series.iter().cloned().collect(),
            events: s.events.iter().cloned().collect(),
            moves: s.moves,
        };
        // Serializing plain data cannot fail; an empty hello would be caught by the page.
        let hello = serde_json::to_string(&hello).unwrap_or_default();
        Ok(Subscription {
            hub: Arc::clone(self),
            id,
            rx,
            hello,
            latest: s.latest.clone(),
        })
    }

    /// Publishes the state at one tick. Never blocks on browsers.
    pub fn publish(&self, tick: Tick) {
        let mut s = self.state();
        let mut rows: Vec<(WireObject, Option<Rect>)> = tick
            .objects
            .iter()
            .map(|o| {
                (
                    WireObject {
                        id: wire::object_key(o.id),
                        x: self.quant.qx(o.x),
                        y: self.quant.qy(o.y),
                        kind: o.kind,
                        owner: o.owner.0,
                    },
                    o.aoi.filter(Rect::is_valid),
                )
            })
            .collect();
        rows.sort_unstable_by_key(|(o, _)| o.id);
        rows.dedup_by_key(|(o, _)| o.id);
        if rows.len() > self.config.max_objects {
            s.objects_left_out += (rows.len() - self.config.max_objects) as u64;
            rows.truncate(self.config.max_objects);
        }
        let (objects, aois): (Vec<WireObject>, Vec<Option<Rect>>) = rows.into_iter().unzip();

        // Ownership changes against the previous tick.
        let down: BTreeMap<u32, bool> = tick.nodes.iter().map(|n| (n.id.0, !n.up)).collect();
        let mut changes = Vec::new();
        if let Some(prev) = &s.latest {
            let (mut i, mut j) = (0, 0);
            while i < prev.objects.len() && j < objects.len() {
                let (p, c) = (&prev.objects[i], &objects[j]);
                match p.id.cmp(&c.id) {
                    std::cmp::Ordering::Less => i += 1,
                    std::cmp::Ordering::Greater => j += 1,
                    std::cmp::Ordering::Equal => {
                        if p.owner != c.owner {
                            // The old owner is down (or gone from the table): adopted.
                            let gone = !tick.nodes.is_empty() && down.get(&p.owner).copied().unwrap_or(true);
                            changes.push(OwnerChange {
                                id: ObjectId::new(NodeId((c.id >> 32) as u32), c.id as u32),
                                from: NodeId(p.owner),
                                to: NodeId(c.owner),
                                cause: if gone { CAUSE_ADOPTION } else { CAUSE_MIGRATION },
                            });
                        }
                        i += 1;
                        j += 1;
                    }
                }
            }
        }
        for c in &changes {
            s.moves[usize::from(c.cause)] += 1;
            if s.events.len() >= self.config.events_len.max(1) {
                s.events.pop_front();
            }
            s.events.push_back(EventRecord {
                t: tick.time_s,
                id: c.id.to_string(),
                from: c.from.0,
                to: c.to.0,
                cause: if c.cause == CAUSE_ADOPTION {
                    "adoption"
                } else {
                    "migration"
                },
            });
        }
        s.moves_since_point += changes.len() as u64;
        changes.truncate(self.config.max_events);

        let seq = if s.ticks == 0 { 0 } else { s.seq.wrapping_add(1) };
        let with_nodes = s.ticks == 0 || seq % self.config.node_every.max(1) == 0;
        let mut flags = 0u8;
        let mut tail = Vec::new();
        wire::put_events(&mut tail, &changes);
        if with_nodes {
            flags |= FLAG_NODES;
            let nodes = self.node_section(&mut s, &tick, objects.len());
            wire::put_nodes(&mut tail, &nodes);
        }
        let delta = s.latest.as_ref().map(|prev| {
            let mut v = Vec::with_capacity(64 + objects.len() * 3 + tail.len());
            wire::put_header(&mut v, flags, seq, tick.time_s);
            wire::put_delta(&mut v, &prev.objects, &objects);
            v.extend_from_slice(&tail);
            Bytes::from(v)
        });
        let p = Arc::new(Published {
            seq,
            objects,
            aois,
            delta,
            flags,
            time_s: tick.time_s,
            tail,
            key: OnceLock::new(),
        });
        s.seq = seq;
        s.ticks += 1;
        s.latest_nodes = tick.nodes.len();
        s.latest = Some(Arc::clone(&p));
        self.fan_out(&mut s, &p);
    }

    /// Tells browsers the producer has finished: the last state is final.
    pub fn finish(&self) {
        let mut s = self.state();
        if s.finished {
            return;
        }
        s.finished = true;
        let Some(prev) = s.latest.clone() else {
            return;
        };
        let seq = prev.seq.wrapping_add(1);
        let mut tail = Vec::new();
        wire::put_events(&mut tail, &[]);
        let mut v = Vec::new();
        wire::put_header(&mut v, FLAG_FINISHED, seq, prev.time_s);
        wire::put_delta(&mut v, &prev.objects, &prev.objects);
        v.extend_from_slice(&tail);
        let p = Arc::new(Published {
            seq,
            objects: prev.objects.clone(),
            aois: prev.aois.clone(),
            delta: Some(Bytes::from(v)),
            flags: FLAG_FINISHED,
            time_s: prev.time_s,
            tail,
            key: OnceLock::new(),
        });
        s.seq = seq;
        s.latest = Some(Arc::clone(&p));
        self.fan_out(&mut s, &p);
    }

    fn fan_out(&self, s: &mut State, p: &Arc<Published>) {
        s.clients.retain(|c| match c.tx.try_send(Arc::clone(p)) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.frames_dropped.fetch_add(1, Ordering::Relaxed);
                true
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        });
    }

    /// The node table with rates since the last node section, and a series point.
    fn node_section(&self, s: &mut State, tick: &Tick, objects: usize) -> WireNodes {
        let classes = self.world.classes.len();
        let mut totals = vec![0u64; classes];
        let mut missing_total: Option<u64> = None;
        let mut rows = Vec::with_capacity(tick.nodes.len());
        let mut nodes: Vec<_> = tick.nodes.iter().collect();
        nodes.sort_by_key(|n| n.id);
        nodes.dedup_by_key(|n| n.id);
        for n in nodes {
            let mut sent = n.sent_bytes.clone();
            sent.resize(classes, 0);
            let rates = match s.counters.get(&n.id.0) {
                Some((t0, before)) if tick.time_s > *t0 => {
                    let dt = tick.time_s - *t0;
                    sent.iter()
                        .zip(before)
                        .map(|(a, b)| (a.saturating_sub(*b) as f64 / dt).round() as u64)
                        .collect()
                }
                _ => vec![0; classes],
            };
            for (t, r) in totals.iter_mut().zip(&rates) {
                *t += r;
            }
            if let Some(m) = n.missing {
                *missing_total.get_or_insert(0) += u64::from(m);
            }
            s.counters.insert(n.id.0, (tick.time_s, sent));
            rows.push(WireNode {
                id: n.id.0,
                up: n.up,
                players: n.players,
                primaries: n.primaries,
                replicas: n.replicas,
                missing: n.missing,
                frame_us: n
                    .frame_ms
                    .filter(|f| f.is_finite() && *f >= 0.0)
                    .map(|f| (f * 1000.0).min(u32::MAX as f32) as u32),
                sessions: n.sessions,
                capacity: n.capacity,
                local_health: n.local_health,
                bytes_per_s: rates,
            });
        }
        // Nodes no longer reported are forgotten.
        let live: std::collections::BTreeSet<u32> = rows.iter().map(|r| r.id).collect();
        s.counters.retain(|id, _| live.contains(id));
        if s.series.len() >= self.config.series_len.max(1) {
            s.series.pop_front();
        }
        let moves = std::mem::take(&mut s.moves_since_point);
        s.series.push_back(SeriesPoint {
            t: tick.time_s,
            bytes: totals.clone(),
            missing: missing_total,
            objects,
            moves,
        });
        WireNodes {
            missing_total,
            moves,
            bytes_per_s: totals,
            rows,
        }
    }
}
