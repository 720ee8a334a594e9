//! Prometheus metrics of a real node: what the driver knows, published as a
//! [`MetricsSnapshot`] once a second and rendered in the Prometheus text exposition
//! format 0.0.4 by [`render`]; [`crate::metrics_server`] serves it at `GET /metrics`.
//!
//! The frame loop never waits on a scraper: the driver builds a snapshot (plain numbers)
//! and swaps it into a [`SnapshotCell`] under a mutex held only for the swap of an `Arc`;
//! the HTTP side clones the `Arc` under the same short lock and renders outside it. No
//! lock is held across I/O.
//!
//! Why a hand-written renderer and not the `metrics` facade with
//! `metrics-exporter-prometheus` (BRIEF §6): with default features off the exporter
//! (0.18.3, with `metrics` 0.24 and `metrics-util` 0.20) brings 14 crates this workspace
//! does not build yet (`cargo tree`: quanta, raw-cpuid, sketches-ddsketch, evmap,
//! left-right, crossbeam-epoch, …) and no HTTP server; and it records into one
//! process-global recorder, while every figure here already lives in the node's own
//! counters ([`worldmesh_node::NodeStats`], [`crate::transport::TransportStats`]): it would
//! mirror them into a second registry each second (one per process, so two drivers in
//! one test process would share it). Rendering our own snapshot is ~200 lines and keeps
//! one source of truth.
//!
//! Every family has `# HELP` and `# TYPE`; counters end in `_total`; sizes are in bytes
//! and times in seconds; label values are escaped ([`escape_label`]). Only what the node
//! knows is exposed: the fraction of missing replicas (objects inside a node's
//! subscriptions that are not in its store) needs the other nodes' stores, so only the
//! simulator reports it.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use worldmesh_core::MessageClass;
use worldmesh_core::traffic::Count;

/// Frames whose durations the quantiles cover (about 100 s at 10 Hz).
pub const FRAME_WINDOW: usize = 1024;

/// Durations of the node's frames: how long each took (the node's frame, the player
/// sessions after it, and sending what they queued), and how late it started after it was
/// due. Quantiles are over the last [`FRAME_WINDOW`] frames; count, sum and max over the
/// whole run.
#[derive(Clone, Debug, Default)]
pub struct FrameTimes {
    work: VecDeque<f64>,
    lag: VecDeque<f64>,
    count: u64,
    work_sum: f64,
    lag_sum: f64,
    work_max: f64,
    lag_max: f64,
}

impl FrameTimes {
    /// Records one frame: `work` spent in it, started `lag` after it was due.
    pub fn record(&mut self, work: Duration, lag: Duration) {
        let (w, l) = (work.as_secs_f64(), lag.as_secs_f64());
        if self.work.len() == FRAME_WINDOW {
            self.work.pop_front();
            self.lag.pop_front();
        }
        self.work.push_back(w);
        self.lag.push_back(l);
        self.count += 1;
        self.work_sum += w;
        self.lag_sum += l;
        self.work_max = self.work_max.max(w);
        self.lag_max = self.lag_max.max(l);
    }

    /// How long the last recorded frame took.
    pub fn last_work(&self) -> Option<Duration> {
        self.work.back().map(|w| Duration::from_secs_f64(*w))
    }

    /// Frames recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The figures so far.
    pub fn summary(&self) -> FrameTimeSummary {
        let work: Vec<f64> = self.work.iter().copied().collect();
        let lag: Vec<f64> = self.lag.iter().copied().collect();
        let q = worldmesh_node::stats::percentile;
        FrameTimeSummary {
            frames: self.count,
            window: work.len(),
            work_p50_s: q(&work, 50.0),
            work_p99_s: q(&work, 99.0),
            work_max_s: self.work_max,
            work_sum_s: self.work_sum,
            lag_p50_s: q(&lag, 50.0),
            lag_p99_s: q(&lag, 99.0),
            lag_max_s: self.lag_max,
            lag_sum_s: self.lag_sum,
        }
    }
}

/// Frame durations of a node (see [`FrameTimes`]).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FrameTimeSummary {
    /// Frames run since the driver started.
    pub frames: u64,
    /// Frames the quantiles cover (the last ones, at most [`FRAME_WINDOW`]).
    pub window: usize,
    /// Median time spent in a frame, seconds.
    pub work_p50_s: f64,
    /// 99th percentile of the time spent in a frame, seconds.
    pub work_p99_s: f64,
    /// Longest frame of the run, seconds.
    pub work_max_s: f64,
    /// Time spent in frames over the run, seconds.
    pub work_sum_s: f64,
    /// Median delay between when a frame was due and when it started, seconds.
    pub lag_p50_s: f64,
    /// 99th percentile of that delay, seconds.
    pub lag_p99_s: f64,
    /// Largest delay of the run, seconds.
    pub lag_max_s: f64,
    /// Delays summed over the run, seconds.
    pub lag_sum_s: f64,
}

/// Everything a node exposes as metrics, at one moment (plain numbers: rendering needs no
/// access to the node).
#[derive(Clone, Debug, Default)]
pub struct MetricsSnapshot {
    /// This node's id.
    pub node: u32,
    /// This process's generation.
    pub generation: u64,
    /// The node's time when the snapshot was taken, seconds since its start.
    pub uptime_s: f64,
    /// Frame durations.
    pub frames: FrameTimeSummary,
    /// Sent by class (index `MessageClass as usize`): bytes on the wire as the node counts
    /// them (payload + 28 bytes of UDP/IPv4 header per datagram) and datagrams.
    pub sent: [Count; 6],
    /// Received by class, same accounting.
    pub received: [Count; 6],
    /// Every UDP packet the socket sent (QUIC headers, acks, handshakes included).
    pub wire_sent: Count,
    /// Every UDP packet the socket received.
    pub wire_received: Count,
    /// Primaries held.
    pub primaries: usize,
    /// Replicas held.
    pub replicas: usize,
    /// Mean age of the replicas updated in the last second, seconds (`None`: none were).
    pub staleness_mean_s: Option<f64>,
    /// Largest of those ages, seconds.
    pub staleness_max_s: Option<f64>,
    /// The locator's load (items stored per second over its moving window), if a
    /// distributed locator is attached.
    pub locator_load: Option<f64>,
    /// Live members, this node included.
    pub members: usize,
    /// Members seen joining and leaving (`None` without dynamic membership).
    pub members_up: Option<u64>,
    /// Members seen going: failed or left (see `members_up`).
    pub members_down: Option<u64>,
    /// Of `members_down`, those that left gracefully (drained or shut down).
    pub members_left: Option<u64>,
    /// The failure detector's local health score, 0 (healthy) to 8 (`None` without
    /// dynamic membership).
    pub local_health: Option<u32>,
    /// Suspicions raised because a member heard every frame fell silent (`None` without
    /// dynamic membership).
    pub silent_suspicions: Option<u64>,
    /// Down verdicts from gossip about members this node still heard, read as suspicions
    /// (`None` without dynamic membership).
    pub downgraded_verdicts: Option<u64>,
    /// Regions this node started to migrate.
    pub migrations_started: u64,
    /// Of those, accepted by their target.
    pub migrations_completed: u64,
    /// Of those, refused by their target.
    pub migrations_refused: u64,
    /// Regions migrated to this node.
    pub migrations_bound: u64,
    /// Orphans of failed members adopted here.
    pub adoptions: u64,
    /// Orphans dropped (their policy despawns them, or nobody adopted them in time).
    pub orphans_dropped: u64,
    /// Datagrams the node refused, by reason ([`worldmesh_node::Rejections::labelled`]).
    pub rejections: Vec<(&'static str, u64)>,
    /// Connections the transport refused, by reason.
    pub transport_refusals: Vec<(&'static str, u64)>,
    /// Node events dropped because the application did not keep up.
    pub events_dropped: u64,
    /// Players, if the node admits them.
    pub players: Option<PlayerMetrics>,
    /// The embedded store, if the node persists (`--data-dir`).
    pub store: Option<StoreMetrics>,
}

/// How a persisting node's store keeps up.
#[derive(Clone, Debug, Default)]
pub struct StoreMetrics {
    /// Batches applied on disk (fsync included) since the start.
    pub batches: u64,
    /// Batches sent to the store's thread and not applied yet.
    pub in_flight: usize,
    /// Median time to apply a batch over the last [`STORE_WINDOW`] batches, seconds.
    pub apply_p50_s: f64,
    /// 99th percentile of the same, seconds.
    pub apply_p99_s: f64,
    /// Sum of every batch's apply time since the start, seconds.
    pub apply_sum_s: f64,
    /// Longest apply time since the start, seconds.
    pub apply_max_s: f64,
    /// Checkpoints written (every `--checkpoint-frames` frames when avatars changed).
    pub checkpoints: u64,
    /// Durable writes logged with the state they changed.
    pub durable_writes: u64,
    /// Objects recovered from the store when the node started.
    pub recovered_objects: u64,
}

/// Batches the store's apply-time quantiles are taken over.
pub const STORE_WINDOW: usize = 1024;

/// The players' figures of a node.
#[derive(Clone, Debug, Default)]
pub struct PlayerMetrics {
    /// Connected now.
    pub connected: usize,
    /// Sessions opened.
    pub connects: u64,
    /// Connects refused, by reason.
    pub refused: Vec<(String, u64)>,
}

/// Where the driver publishes its latest [`MetricsSnapshot`] and the HTTP side reads it.
/// Cloning shares the cell.
#[derive(Clone, Debug, Default)]
pub struct SnapshotCell {
    latest: Arc<Mutex<Option<Arc<MetricsSnapshot>>>>,
}

impl SnapshotCell {
    /// An empty cell.
    pub fn new() -> Self {
        Self::default()
    }

    /// Replaces the snapshot (the lock is held for a pointer swap).
    pub fn publish(&self, s: MetricsSnapshot) {
        let s = Arc::new(s);
        let old = {
            let mut g = self.latest.lock().unwrap_or_else(PoisonError::into_inner);
            g.replace(s)
        };
        // The old one is freed outside the lock.
        drop(old);
    }

    /// The latest snapshot, if any was published.
    pub fn latest(&self) -> Option<Arc<MetricsSnapshot>> {
        self.latest.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

/// The `Content-Type` of [`render`]'s output.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Escapes a label value: backslash, double quote and line feed.
pub fn escape_label(v: &str) -> String {
    let mut o = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            '"' => o.push_str("\\\""),
            '\n' => o.push_str("\\n"),
            c => o.push(c),
        }
    }
    o
}

/// Writes families in the text format.
struct Out {
    s: String,
}

impl Out {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        // HELP text escapes backslash and line feed.
        let help = help.replace('\\', "\\\\").replace('\n', "\\n");
        let _ = writeln!(self.s, "# HELP {name} {help}");
        let _ = writeln!(self.s, "# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], v: f64) {
        self.s.push_str(name);
        if !labels.is_empty() {
            self.s.push('{');
            for (i, (k, val)) in labels.iter().enumerate() {
                if i > 0 {
                    self.s.push(',');
                }
                let _ = write!(self.s, "{k}=\"{}\"", escape_label(val));
            }
            self.s.push('}');
        }
        self.s.push(' ');
        push_value(&mut self.s, v);
        self.s.push('\n');
    }

    fn one(&mut self, name: &str, kind: &str, help: &str, v: f64) {
        self.family(name, kind, help);
        self.sample(name, &[], v);
    }

    fn by_class(&mut self, name: &str, help: &str, v: impl Fn(MessageClass) -> u64) {
        self.family(name, "counter", help);
        for c in MessageClass::ALL {
            self.sample(name, &[("class", c.name())], v(c) as f64);
        }
    }

    fn by_reason(&mut self, name: &str, help: &str, v: &[(&str, u64)]) {
        self.family(name, "counter", help);
        for (r, n) in v {
            self.sample(name, &[("reason", r)], *n as f64);
        }
    }

    fn summary(&mut self, name: &str, help: &str, p50: f64, p99: f64, sum: f64, count: u64) {
        self.family(name, "summary", help);
        self.sample(name, &[("quantile", "0.5")], p50);
        self.sample(name, &[("quantile", "0.99")], p99);
        self.sample(&format!("{name}_sum"), &[], sum);
        self.sample(&format!("{name}_count"), &[], count as f64);
    }
}

/// A sample value: integers without a fraction, `NaN`/`+Inf`/`-Inf` spelled as the format
/// wants.
fn push_value(s: &mut String, v: f64) {
    if v.is_nan() {
        s.push_str("NaN");
    } else if v.is_infinite() {
        s.push_str(if v > 0.0 { "+Inf" } else { "-Inf" });
    } else if v.fract() == 0.0 && v.abs() < 9.007_199_254_740_992e15 {
        let _ = write!(s, "{}", v as i64);
    } else {
        let _ = write!(s, "{v}");
    }
}

/// The snapshot in the Prometheus text exposition format 0.0.4.
pub fn render(m: &MetricsSnapshot) -> String {
    let mut o = Out {
        s: String::with_capacity(8 * 1024),
    };
    o.family(
        "worldmesh_build_info",
        "gauge",
        "Build of this worldmesh node (always 1).",
    );
    let protocol = worldmesh_core::wire::PROTOCOL_VERSION.to_string();
    o.sample(
        "worldmesh_build_info",
        &[("version", env!("CARGO_PKG_VERSION")), ("protocol", &protocol)],
        1.0,
    );
    o.family(
        "worldmesh_node_info",
        "gauge",
        "This node's id and process generation (always 1).",
    );
    let (node, generation) = (m.node.to_string(), m.generation.to_string());
    o.sample(
        "worldmesh_node_info",
        &[("node", &node), ("generation", &generation)],
        1.0,
    );
    o.one(
        "worldmesh_uptime_seconds",
        "gauge",
        "Node time since the node started, when this snapshot was taken.",
        m.uptime_s,
    );
    o.one(
        "worldmesh_frames_total",
        "counter",
        "Frames the node has run.",
        m.frames.frames as f64,
    );
    o.summary(
        "worldmesh_frame_duration_seconds",
        &format!(
            "Time spent in a frame (node, player sessions, sending); quantiles over the last {FRAME_WINDOW} frames."
        ),
        m.frames.work_p50_s,
        m.frames.work_p99_s,
        m.frames.work_sum_s,
        m.frames.frames,
    );
    o.summary(
        "worldmesh_frame_lag_seconds",
        &format!(
            "Delay between when a frame was due and when it started; quantiles over the last {FRAME_WINDOW} frames."
        ),
        m.frames.lag_p50_s,
        m.frames.lag_p99_s,
        m.frames.lag_sum_s,
        m.frames.frames,
    );
    o.one(
        "worldmesh_frame_duration_max_seconds",
        "gauge",
        "Longest frame of the run.",
        m.frames.work_max_s,
    );
    o.by_class(
        "worldmesh_sent_bytes_total",
        "Bytes sent by message class (payload + 28 bytes of UDP/IPv4 header per datagram).",
        |c| m.sent[c as usize].bytes,
    );
    o.by_class(
        "worldmesh_sent_datagrams_total",
        "Datagrams sent by message class.",
        |c| m.sent[c as usize].packets,
    );
    o.by_class(
        "worldmesh_received_bytes_total",
        "Bytes received by message class (payload + 28 bytes of UDP/IPv4 header per datagram).",
        |c| m.received[c as usize].bytes,
    );
    o.by_class(
        "worldmesh_received_datagrams_total",
        "Datagrams received by message class.",
        |c| m.received[c as usize].packets,
    );
    o.one(
        "worldmesh_wire_sent_bytes_total",
        "counter",
        "Bytes of every UDP packet the node-to-node socket sent (QUIC headers, acks, handshakes included; + 28 per packet).",
        m.wire_sent.bytes as f64,
    );
    o.one(
        "worldmesh_wire_sent_packets_total",
        "counter",
        "UDP packets the node-to-node socket sent.",
        m.wire_sent.packets as f64,
    );
    o.one(
        "worldmesh_wire_received_bytes_total",
        "counter",
        "Bytes of every UDP packet the node-to-node socket received (+ 28 per packet).",
        m.wire_received.bytes as f64,
    );
    o.one(
        "worldmesh_wire_received_packets_total",
        "counter",
        "UDP packets the node-to-node socket received.",
        m.wire_received.packets as f64,
    );
    o.one(
        "worldmesh_primaries",
        "gauge",
        "Primary objects held.",
        m.primaries as f64,
    );
    o.one("worldmesh_replicas", "gauge", "Replicas held.", m.replicas as f64);
    if let (Some(mean), Some(max)) = (m.staleness_mean_s, m.staleness_max_s) {
        o.one(
            "worldmesh_replica_staleness_mean_seconds",
            "gauge",
            "Mean age (now - primary's send time) of the replicas updated in the last second.",
            mean,
        );
        o.one(
            "worldmesh_replica_staleness_max_seconds",
            "gauge",
            "Largest age of the replicas updated in the last second.",
            max,
        );
    }
    if let Some(l) = m.locator_load {
        o.one(
            "worldmesh_locator_load",
            "gauge",
            "Locator load: publications and subscriptions stored here per second (moving window).",
            l,
        );
    }
    o.one(
        "worldmesh_members",
        "gauge",
        "Live members of the cluster, this node included.",
        m.members as f64,
    );
    if let (Some(up), Some(down), Some(left)) = (m.members_up, m.members_down, m.members_left) {
        o.one(
            "worldmesh_member_joins_total",
            "counter",
            "Members seen joining.",
            up as f64,
        );
        o.one(
            "worldmesh_member_failures_total",
            "counter",
            "Members declared down: they stopped answering (a crash, a partition), or came back as a new generation without leaving.",
            down.saturating_sub(left) as f64,
        );
        o.one(
            "worldmesh_member_leaves_total",
            "counter",
            "Members that left gracefully (drained or shut down).",
            left as f64,
        );
    }
    if let Some(h) = m.local_health {
        o.one(
            "worldmesh_membership_local_health",
            "gauge",
            "Local health of this node's failure detector, 0 (healthy) to 8: its own suspicions wait 1 + this times the suspicion time. It stays up while its probes go unanswered by members it still hears (its own datagrams are lost).",
            f64::from(h),
        );
    }
    if let Some(n) = m.silent_suspicions {
        o.one(
            "worldmesh_membership_silent_suspicions_total",
            "counter",
            "Suspicions raised because a member this node heard every frame fell silent (a crash is usually found this way, before a probe reaches it).",
            n as f64,
        );
    }
    if let Some(n) = m.downgraded_verdicts {
        o.one(
            "worldmesh_membership_downgraded_verdicts_total",
            "counter",
            "Down verdicts from gossip about members this node still heard, taken as suspicions the member can refute. They come from a node that was cut off; a steady rise means a member keeps gossiping stale verdicts.",
            n as f64,
        );
    }
    o.one(
        "worldmesh_migrations_started_total",
        "counter",
        "Regions this node started to migrate.",
        m.migrations_started as f64,
    );
    o.one(
        "worldmesh_migrations_completed_total",
        "counter",
        "Regions migrated away and accepted by their target.",
        m.migrations_completed as f64,
    );
    o.one(
        "worldmesh_migrations_refused_total",
        "counter",
        "Regions whose target refused them.",
        m.migrations_refused as f64,
    );
    o.one(
        "worldmesh_migrations_received_total",
        "counter",
        "Regions migrated to this node.",
        m.migrations_bound as f64,
    );
    o.one(
        "worldmesh_adoptions_total",
        "counter",
        "Orphans of failed members adopted here.",
        m.adoptions as f64,
    );
    o.one(
        "worldmesh_orphans_dropped_total",
        "counter",
        "Orphans dropped (despawned by their policy, or adopted by nobody in time).",
        m.orphans_dropped as f64,
    );
    o.by_reason(
        "worldmesh_rejected_datagrams_total",
        "Datagrams the node refused, by reason.",
        &m.rejections,
    );
    o.by_reason(
        "worldmesh_transport_refusals_total",
        "Connections the transport refused, by reason.",
        &m.transport_refusals,
    );
    o.one(
        "worldmesh_events_dropped_total",
        "counter",
        "Node events dropped because the application did not keep up.",
        m.events_dropped as f64,
    );
    if let Some(p) = &m.players {
        o.one(
            "worldmesh_players_connected",
            "gauge",
            "Players connected now.",
            p.connected as f64,
        );
        o.one(
            "worldmesh_player_sessions_total",
            "counter",
            "Player sessions opened (resumed ones included).",
            p.connects as f64,
        );
        o.family(
            "worldmesh_player_refusals_total",
            "counter",
            "Player connects refused, by reason.",
        );
        for (r, n) in &p.refused {
            o.sample("worldmesh_player_refusals_total", &[("reason", r)], *n as f64);
        }
    }
    if let Some(st) = &m.store {
        store_families(&mut o, st);
    }
    o.s
}

fn store_families(o: &mut Out, st: &StoreMetrics) {
    o.summary(
        "worldmesh_store_apply_seconds",
        &format!(
            "Time to apply one batch to the store, fsync included; quantiles over the last {STORE_WINDOW} batches."
        ),
        st.apply_p50_s,
        st.apply_p99_s,
        st.apply_sum_s,
        st.batches,
    );
    o.one(
        "worldmesh_store_apply_max_seconds",
        "gauge",
        "Longest batch apply of the run.",
        st.apply_max_s,
    );
    o.one(
        "worldmesh_store_batches_in_flight",
        "gauge",
        "Batches waiting for the store's thread (durable writes are acknowledged once applied).",
        st.in_flight as f64,
    );
    o.one(
        "worldmesh_store_checkpoints_total",
        "counter",
        "Checkpoints of the checkpointed objects written.",
        st.checkpoints as f64,
    );
    o.one(
        "worldmesh_store_durable_writes_total",
        "counter",
        "Writes to durable objects logged in the store with the state they changed.",
        st.durable_writes as f64,
    );
    o.one(
        "worldmesh_store_recovered_objects",
        "gauge",
        "Objects recovered from the store when the node started.",
        st.recovered_objects as f64,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::exposition::{Exposition, parse};

    /// Parses `text` strictly and checks that every family is worldmesh's.
    fn check(text: &str) -> Exposition {
        let e = parse(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        for s in &e.samples {
            assert!(s.name.starts_with("worldmesh_"), "{}", s.name);
        }
        e
    }

    fn value(e: &Exposition, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        e.get(name, labels)
    }

    fn full() -> MetricsSnapshot {
        let mut ft = FrameTimes::default();
        for i in 1..=100 {
            ft.record(Duration::from_micros(i * 10), Duration::from_micros(i));
        }
        let mut m = MetricsSnapshot {
            node: 7,
            generation: 1_700_000_000,
            uptime_s: 12.5,
            frames: ft.summary(),
            primaries: 9,
            replicas: 40,
            staleness_mean_s: Some(0.0125),
            staleness_max_s: Some(0.25),
            locator_load: Some(3.5),
            members: 4,
            members_up: Some(3),
            members_down: Some(3),
            members_left: Some(1),
            local_health: Some(3),
            silent_suspicions: Some(11),
            downgraded_verdicts: Some(2),
            adoptions: 2,
            rejections: worldmesh_node::Rejections {
                not_member: 5,
                ..Default::default()
            }
            .labelled()
            .to_vec(),
            transport_refusals: vec![("tls", 1), ("identity", 0)],
            players: Some(PlayerMetrics {
                connected: 3,
                connects: 4,
                refused: vec![("bad \"token\"\\\nx".into(), 1)],
            }),
            store: Some(StoreMetrics {
                batches: 40,
                in_flight: 1,
                apply_p50_s: 0.0007,
                apply_p99_s: 0.0068,
                apply_sum_s: 0.05,
                apply_max_s: 0.009,
                checkpoints: 12,
                durable_writes: 30,
                recovered_objects: 9,
            }),
            ..Default::default()
        };
        m.sent[MessageClass::ObjectUpdate as usize] = Count {
            bytes: 123_456,
            packets: 100,
        };
        m.received[MessageClass::Control as usize] = Count {
            bytes: 56,
            packets: 2,
        };
        m
    }

    #[test]
    fn renders_valid_text_format() {
        let text = render(&full());
        let s = check(&text);
        assert_eq!(
            value(&s, "worldmesh_sent_bytes_total", &[("class", "object_update")]),
            Some(123_456.0)
        );
        assert_eq!(
            value(&s, "worldmesh_received_datagrams_total", &[("class", "control")]),
            Some(2.0)
        );
        assert_eq!(
            value(
                &s,
                "worldmesh_rejected_datagrams_total",
                &[("reason", "not_member")]
            ),
            Some(5.0)
        );
        assert_eq!(
            value(&s, "worldmesh_frame_duration_seconds", &[("quantile", "0.99")]),
            Some(0.00099)
        );
        assert_eq!(
            value(&s, "worldmesh_frame_duration_seconds_count", &[]),
            Some(100.0)
        );
        assert_eq!(value(&s, "worldmesh_frames_total", &[]), Some(100.0));
        assert_eq!(value(&s, "worldmesh_locator_load", &[]), Some(3.5));
        assert_eq!(value(&s, "worldmesh_players_connected", &[]), Some(3.0));
        // Of three members gone, one left: two failures and one leave.
        assert_eq!(value(&s, "worldmesh_member_failures_total", &[]), Some(2.0));
        assert_eq!(value(&s, "worldmesh_member_leaves_total", &[]), Some(1.0));
        assert_eq!(value(&s, "worldmesh_membership_local_health", &[]), Some(3.0));
        assert_eq!(
            value(&s, "worldmesh_membership_silent_suspicions_total", &[]),
            Some(11.0)
        );
        assert_eq!(
            value(&s, "worldmesh_membership_downgraded_verdicts_total", &[]),
            Some(2.0)
        );
        assert_eq!(
            value(&s, "worldmesh_store_apply_seconds", &[("quantile", "0.99")]),
            Some(0.0068)
        );
        assert_eq!(value(&s, "worldmesh_store_apply_seconds_count", &[]), Some(40.0));
        assert_eq!(value(&s, "worldmesh_store_apply_seconds_sum", &[]), Some(0.05));
        assert_eq!(value(&s, "worldmesh_store_batches_in_flight", &[]), Some(1.0));
        assert_eq!(value(&s, "worldmesh_store_checkpoints_total", &[]), Some(12.0));
        assert_eq!(value(&s, "worldmesh_store_durable_writes_total", &[]), Some(30.0));
        assert_eq!(value(&s, "worldmesh_store_recovered_objects", &[]), Some(9.0));
        // The awkward label value went through escaping and back.
        assert_eq!(
            value(
                &s,
                "worldmesh_player_refusals_total",
                &[("reason", "bad \"token\"\\\nx")]
            ),
            Some(1.0)
        );
        assert_eq!(
            value(
                &s,
                "worldmesh_node_info",
                &[("node", "7"), ("generation", "1700000000")]
            ),
            Some(1.0)
        );
        assert_eq!(
            value(
                &s,
                "worldmesh_build_info",
                &[
                    ("version", env!("CARGO_PKG_VERSION")),
                    ("protocol", &worldmesh_core::wire::PROTOCOL_VERSION.to_string())
                ]
            ),
            Some(1.0)
        );
        // Every class appears in every by-class family.
        for c in MessageClass::ALL {
            assert!(value(&s, "worldmesh_sent_bytes_total", &[("class", c.name())]).is_some());
        }
    }

    #[test]
    fn optional_families_are_absent_when_unknown() {
        let text = render(&MetricsSnapshot::default());
        let s = check(&text);
        for absent in [
            "worldmesh_locator_load",
            "worldmesh_players_connected",
            "worldmesh_replica_staleness_mean_seconds",
            "worldmesh_member_joins_total",
            "worldmesh_membership_local_health",
            "worldmesh_membership_silent_suspicions_total",
            "worldmesh_membership_downgraded_verdicts_total",
            "worldmesh_store_",
        ] {
            assert!(!text.contains(absent), "{absent} rendered without a value");
        }
        assert_eq!(value(&s, "worldmesh_primaries", &[]), Some(0.0));
    }

    #[test]
    fn the_parser_catches_what_it_should() {
        // Each of these breaks one rule the check enforces.
        for bad in [
            "worldmesh_x 1\n",                                                // no TYPE
            "# TYPE worldmesh_x counter\nworldmesh_x 1\n",                    // counter without _total
            "# TYPE worldmesh_x_total counter\nworldmesh_x_total{a=\"1} 1\n", // unterminated
            "# TYPE worldmesh_x gauge\nworldmesh_x one\n",                    // bad value
            "# TYPE 1x gauge\n",                                              // bad name
            "# TYPE worldmesh_x gauge\nworldmesh_x{a=\"\\q\"} 1\n",           // bad escape
        ] {
            let r = std::panic::catch_unwind(|| check(bad));
            assert!(r.is_err(), "accepted: {bad:?}");
        }
    }

    #[test]
    fn values_are_spelled_as_the_format_wants() {
        let mut s = String::new();
        for v in [1.0, 0.25, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e20] {
            push_value(&mut s, v);
            s.push(' ');
        }
        assert_eq!(s, "1 0.25 NaN +Inf -Inf 100000000000000000000 ");
    }

    #[test]
    fn frame_quantiles_cover_the_last_window() {
        let mut f = FrameTimes::default();
        for _ in 0..FRAME_WINDOW {
            f.record(Duration::from_secs(1), Duration::ZERO);
        }
        for _ in 0..FRAME_WINDOW {
            f.record(Duration::from_millis(1), Duration::from_millis(2));
        }
        let s = f.summary();
        assert_eq!(s.frames, 2 * FRAME_WINDOW as u64);
        assert_eq!(s.window, FRAME_WINDOW);
        assert_eq!(s.work_p99_s, 0.001);
        assert_eq!(s.work_max_s, 1.0);
        assert_eq!(s.lag_p50_s, 0.002);
    }

    #[test]
    fn the_cell_hands_out_the_latest() {
        let c = SnapshotCell::new();
        assert!(c.latest().is_none());
        c.publish(MetricsSnapshot {
            primaries: 1,
            ..Default::default()
        });
        let held = c.latest().unwrap();
        c.publish(MetricsSnapshot {
            primaries: 2,
            ..Default::default()
        });
        assert_eq!(held.primaries, 1);
        assert_eq!(c.clone().latest().unwrap().primaries, 2);
    }
}
