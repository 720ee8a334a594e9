//! The Prometheus endpoint of real `worldmesh node` processes (`--metrics`): its output
//! parses as the text format, its figures agree with the node's own final summary, bad
//! requests get their HTTP codes, and stuck scrapers do not slow the node's frames.
//! Assertions are on what the processes report, never on wall-clock speed.

mod procs;
mod prom;

use std::io::Write as _;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use procs::{Kind, Nodes, heavy};
use prom::{Exposition, ValueOf as _, parse, scrape, send};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(30);

fn s<T: ToString>(v: T) -> String {
    v.to_string()
}

/// Scrapes and parses, asserting a 200 in the text format.
fn scrape_ok(addr: SocketAddr) -> Exposition {
    let a = scrape(addr);
    assert_eq!(a.status, 200, "{a:?}");
    assert!(
        a.headers["content-type"].starts_with("text/plain; version=0.0.4"),
        "{:?}",
        a.headers
    );
    parse(&a.body).unwrap_or_else(|e| panic!("{e}\n{}", a.body))
}

fn u(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

const CLASSES: [&str; 6] = [
    "object_update",
    "locator_routing",
    "match_delivery",
    "overlay_maintenance",
    "migration",
    "control",
];

/// Three founders, node 0 with metrics: scraped during the run, its figures are
/// monotone and never above its final summary's; the gauges agree with the summary
/// (members, node id, generation, build version).
#[test]
fn a_real_nodes_metrics_parse_and_agree_with_its_summary() {
    let _g = heavy();
    let mut n = Nodes::new("metrics", 3);
    let base = [s("--founders"), s(3), s("--players"), s(3), s("--wait-start")];
    let mut first = base.to_vec();
    first.extend([s("--metrics"), s("127.0.0.1:0")]);
    n.spawn(0, &first);
    let a0 = n.ready(0, WAIT);
    let m0 = n.metrics_addr(0);
    for i in 1..3 {
        let mut args = base.to_vec();
        args.extend([s("--seeds"), s(a0)]);
        n.spawn(i, &args);
    }
    for i in 1..3 {
        n.ready(i, WAIT);
    }
    n.release(&[0, 1, 2]);
    for i in 0..3 {
        n.started(i, WAIT);
    }
    let mut scrapes = Vec::new();
    for _ in 0..8 {
        std::thread::sleep(Duration::from_millis(600));
        scrapes.push(scrape_ok(m0));
    }
    n.stop(&[0, 1, 2]);
    let sum = n.summary(0, WAIT);

    // Counters never go down between scrapes; frames and object updates go up.
    let mut monotone: Vec<(String, Vec<(String, String)>)> = vec![("worldmesh_frames_total".into(), vec![])];
    for c in CLASSES {
        for f in [
            "worldmesh_sent_bytes_total",
            "worldmesh_sent_datagrams_total",
            "worldmesh_received_bytes_total",
            "worldmesh_received_datagrams_total",
        ] {
            monotone.push((f.into(), vec![("class".into(), c.into())]));
        }
    }
    monotone.push(("worldmesh_wire_sent_bytes_total".into(), vec![]));
    for f in [
        "worldmesh_membership_silent_suspicions_total",
        "worldmesh_membership_downgraded_verdicts_total",
    ] {
        monotone.push((f.into(), vec![]));
    }
    for (name, labels) in &monotone {
        let l: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let vals: Vec<f64> = scrapes.iter().map(|e| e.value(name, &l)).collect();
        assert!(
            vals.windows(2).all(|w| w[0] <= w[1]),
            "{name}{l:?} went down: {vals:?}"
        );
    }
    let first = &scrapes[0];
    let last = scrapes.last().unwrap();
    let frames = |e: &Exposition| e.value("worldmesh_frames_total", &[]);
    assert!(frames(last) > frames(first), "frames did not advance");
    let upd = [("class", "object_update")];
    assert!(
        last.value("worldmesh_sent_bytes_total", &upd) > first.value("worldmesh_sent_bytes_total", &upd),
        "no object updates sent between the first and last scrape"
    );

    // Against the final summary: counters at most its totals, per class.
    for (i, c) in CLASSES.iter().enumerate() {
        let l = [("class", *c)];
        for (metric, field, part) in [
            ("worldmesh_sent_bytes_total", "sent", "bytes"),
            ("worldmesh_sent_datagrams_total", "sent", "packets"),
            ("worldmesh_received_bytes_total", "received", "bytes"),
            ("worldmesh_received_datagrams_total", "received", "packets"),
        ] {
            let scraped = last.value(metric, &l);
            let total = u(&sum[field][i][part]);
            assert!(
                scraped <= total,
                "{metric}{{class={c}}} {scraped} > summary {total}"
            );
        }
    }
    assert!(last.value("worldmesh_sent_bytes_total", &upd) > 0.0);
    assert!(
        frames(last) <= u(&sum["frame_time"]["frames"]),
        "{}",
        sum["frame_time"]
    );
    assert!(
        last.value("worldmesh_wire_sent_bytes_total", &[]) <= u(&sum["transport"]["wire_sent"]["bytes"]),
        "{}",
        sum["transport"]
    );
    for (metric, field) in [
        (
            "worldmesh_membership_silent_suspicions_total",
            "silent_suspicions",
        ),
        (
            "worldmesh_membership_downgraded_verdicts_total",
            "downgraded_verdicts",
        ),
    ] {
        let total = u(&sum["cluster"][field]);
        assert!(last.value(metric, &[]) <= total, "{metric} > summary {total}");
    }
    for (reason, total) in sum["node_rejections"].as_object().unwrap() {
        let scraped = last.value("worldmesh_rejected_datagrams_total", &[("reason", reason)]);
        assert!(scraped <= u(total), "{reason}: {scraped} > {total}");
    }
    for (reason, total) in sum["transport_refusals"].as_object().unwrap() {
        let scraped = last.value("worldmesh_transport_refusals_total", &[("reason", reason)]);
        assert!(scraped <= u(total), "{reason}: {scraped} > {total}");
    }

    // Gauges: the cluster size, the node's identity, its objects.
    let members = sum["members"].as_array().unwrap().len() + 1;
    assert_eq!(members, 3, "{sum}");
    // Snapshots are taken once a second: the first scrape may predate the joins.
    let seen: Vec<f64> = scrapes
        .iter()
        .map(|e| e.value("worldmesh_members", &[]))
        .collect();
    assert!(
        seen.iter().all(|m| (1.0..=3.0).contains(m)),
        "members over the run: {seen:?}"
    );
    assert_eq!(
        last.value("worldmesh_members", &[]),
        3.0,
        "members over the run: {seen:?}"
    );
    // The failure detector's local health: a member's gauge, 0 (healthy) to 8.
    for e in &scrapes {
        let h = e.value("worldmesh_membership_local_health", &[]);
        assert!((0.0..=8.0).contains(&h), "local health {h}");
    }
    let generation = s(&sum["generation"]);
    assert_eq!(
        last.value(
            "worldmesh_node_info",
            &[("node", "0"), ("generation", &generation)]
        ),
        1.0
    );
    let build = last.all("worldmesh_build_info");
    assert_eq!(build.len(), 1);
    assert_eq!(build[0].labels["version"], env!("CARGO_PKG_VERSION"));
    assert!(last.value("worldmesh_primaries", &[]) > 0.0);
    assert!(u(&sum["primaries"]) > 0.0);
    // Broadcast: node 0 replicates the other founders' objects.
    assert!(last.value("worldmesh_replicas", &[]) > 0.0);
    assert!(u(&sum["replicas"]) > 0.0);
    // Frame-time quantiles are ordered and within the run's maximum.
    let p50 = last.value("worldmesh_frame_duration_seconds", &[("quantile", "0.5")]);
    let p99 = last.value("worldmesh_frame_duration_seconds", &[("quantile", "0.99")]);
    assert!(0.0 < p50 && p50 <= p99, "p50 {p50} p99 {p99}");
    assert!(
        p99 <= u(&sum["frame_time"]["work_max_s"]),
        "{}",
        sum["frame_time"]
    );
    assert_eq!(
        last.value("worldmesh_frame_duration_seconds_count", &[]),
        frames(last)
    );
    // No locator (broadcast), no player port, no store: those families are absent, not
    // zero.
    assert!(last.get("worldmesh_locator_load", &[]).is_none());
    assert!(last.get("worldmesh_players_connected", &[]).is_none());
    assert!(last.get("worldmesh_store_apply_seconds_count", &[]).is_none());
}

/// A node with a store (`--data-dir`) exports how the store keeps up: batches applied
/// (never more than its final summary counts), apply-time quantiles in order and within
/// the run's longest, checkpoints taken every second, nothing recovered on a first start.
#[test]
fn a_persisting_nodes_metrics_show_its_store() {
    let _g = heavy();
    let mut n = Nodes::new("metrics-store", 1);
    let data = n.dir.join("data-0");
    n.spawn(
        0,
        &[
            s("--founders"),
            s(1),
            s("--players"),
            s(4),
            s("--data-dir"),
            data.display().to_string(),
            s("--metrics"),
            s("127.0.0.1:0"),
            s("--wait-start"),
        ],
    );
    n.ready(0, WAIT);
    let m0 = n.metrics_addr(0);
    n.release(&[0]);
    n.started(0, WAIT);
    std::thread::sleep(Duration::from_millis(3500));
    let e = scrape_ok(m0);
    n.stop(&[0]);
    let sum = n.summary(0, WAIT);
    let persist = &sum["persist"];

    let batches = e.value("worldmesh_store_apply_seconds_count", &[]);
    assert!(batches >= 2.0, "{batches} batches in 3.5 s");
    assert!(batches <= u(&persist["store"]["batches"]), "{persist}");
    let p50 = e.value("worldmesh_store_apply_seconds", &[("quantile", "0.5")]);
    let p99 = e.value("worldmesh_store_apply_seconds", &[("quantile", "0.99")]);
    let max = e.value("worldmesh_store_apply_max_seconds", &[]);
    assert!(
        0.0 < p50 && p50 <= p99 && p99 <= max,
        "p50 {p50} p99 {p99} max {max}"
    );
    assert!(e.value("worldmesh_store_apply_seconds_sum", &[]) >= max);
    // Avatars move, so a checkpoint is written every 10 frames (1 s at 10 Hz).
    let checkpoints = e.value("worldmesh_store_checkpoints_total", &[]);
    assert!(
        (2.0..=u(&persist["node"]["checkpoints"])).contains(&checkpoints),
        "{checkpoints} checkpoints scraped; {persist}"
    );
    assert_eq!(e.value("worldmesh_store_recovered_objects", &[]), 0.0);
    assert!(e.get("worldmesh_store_batches_in_flight", &[]).is_some());
}

/// Opens a connection that sends `partial` and then nothing.
fn stuck(addr: SocketAddr, partial: &[u8]) -> TcpStream {
    let mut c = TcpStream::connect(addr).unwrap();
    c.write_all(partial).unwrap();
    c
}

/// One node with metrics under stuck scrapers (requests never finished, and one that
/// never reads its answer) and bad requests: good scrapes are answered while they hang,
/// the stuck ones get 408, bad ones their codes, and the node's frames keep their budget.
#[test]
fn stuck_and_bad_scrapers_get_http_errors_and_never_stall_frames() {
    let _g = heavy();
    let mut n = Nodes::new("metrics-stuck", 1);
    let run_s = 9;
    n.spawn(
        0,
        &[
            s("--founders"),
            s(1),
            s("--players"),
            s(8),
            s("--frame-hz"),
            s(10),
            s("--metrics"),
            s("127.0.0.1:0"),
            s("--duration"),
            format!("{run_s}s"),
        ],
    );
    n.ready(0, WAIT);
    let m = n.metrics_addr(0);
    n.started(0, WAIT);

    // Slow-loris scrapers, one that sends a whole request and reads nothing, one that
    // trickles a header byte by byte.
    let opened = Instant::now();
    let mut hung: Vec<TcpStream> = (0..8)
        .map(|i| stuck(m, &b"GET /metrics HTTP/1.1\r\nHo"[..4 + i]))
        .collect();
    let _never_reads = stuck(m, b"GET /metrics HTTP/1.1\r\n\r\n");
    let mut trickle = stuck(m, b"GET /metrics HTTP/1.1\r\n");

    // While they hang, good scrapes are answered and the frames advance.
    let mut frames = Vec::new();
    for i in 0..8 {
        std::thread::sleep(Duration::from_millis(300));
        let _ = trickle.write_all(&[b"X-a: b\r\n"[i % 8]]);
        frames.push(scrape_ok(m).value("worldmesh_frames_total", &[]));
    }
    assert!(
        frames.windows(2).all(|w| w[0] <= w[1]) && frames[frames.len() - 1] > frames[0],
        "frames while scrapers hang: {frames:?}"
    );
    assert!(
        opened.elapsed() < Duration::from_secs(5),
        "the good scrapes took so long that the stuck ones may have timed out already"
    );

    // Bad requests get clear HTTP errors.
    let nf = send(m, b"GET /metricz HTTP/1.1\r\n\r\n");
    assert_eq!(nf.status, 404, "{nf:?}");
    assert!(nf.body.contains("/metrics"), "{nf:?}");
    let post = send(m, b"POST /metrics HTTP/1.1\r\nContent-Length: 4\r\n\r\nabcd");
    assert_eq!(post.status, 405, "{post:?}");
    assert_eq!(post.headers["allow"], "GET, HEAD");
    let mut big = b"GET /metrics HTTP/1.1\r\nCookie: ".to_vec();
    big.extend(std::iter::repeat_n(b'x', 16 * 1024));
    big.extend_from_slice(b"\r\n\r\n");
    let a = send(m, &big);
    assert_eq!(a.status, 431, "{a:?}");
    assert_eq!(send(m, b"\x00\x01\x02 nonsense\r\n\r\n").status, 400);
    assert_eq!(send(m, b"GET /metrics SPDY/3\r\n\r\n").status, 400);

    // The stuck ones are cut off with 408 once their time is up.
    for c in hung.iter_mut().chain(std::iter::once(&mut trickle)) {
        let a = prom::read_answer(c);
        assert_eq!(a.status, 408, "{a:?}");
    }
    let after = scrape_ok(m);
    assert!(after.value("worldmesh_metrics_http_responses_total", &[("code", "408")]) >= 9.0);

    // The node ran its frames on time and exited normally.
    let sum = n.summary(0, WAIT);
    assert_eq!(sum["stop"], "stopped", "{sum}");
    let ft = &sum["frame_time"];
    let budget = 1.0 / 10.0;
    assert!(
        u(&ft["work_p99_s"]) < budget,
        "frame work p99 over its budget: {ft}"
    );
    assert!(u(&ft["lag_p99_s"]) < budget, "frames started late (p99): {ft}");
    let ran_ms = u(&sum["ended_unix_ms"]) - u(&sum["started_unix_ms"]);
    let expected = ran_ms / 1000.0 * 10.0;
    assert!(
        u(&ft["frames"]) >= 0.8 * expected,
        "{} frames in {ran_ms} ms at 10 Hz (expected about {expected}): {ft}",
        ft["frames"]
    );
}

/// A taken metrics address stops the node at start with an error naming it.
#[test]
fn a_taken_metrics_address_is_a_clear_error() {
    let _g = heavy();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let mut n = Nodes::new("metrics-taken", 1);
    n.spawn(0, &[s("--metrics"), s(addr)]);
    let r = n.wait_for("node 0 exits", WAIT, |r| r.node == 0 && r.kind == Kind::Exited);
    let err = r.json.as_str().unwrap();
    assert!(
        err.contains(&format!("cannot listen for metrics on {addr}")),
        "{err}"
    );
    assert!(!n.records.iter().any(|r| r.kind == Kind::Ready), "started anyway");
}
