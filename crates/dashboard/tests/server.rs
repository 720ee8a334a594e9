//! The dashboard server over real sockets: HTTP errors for bad requests, the WebSocket
//! stream decoded against what was published, hover focus, refused browser messages, and a
//! stuck browser that must not stall the producer.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use tungstenite::{Message, WebSocket};
use worldmesh_core::{NodeId, ObjectId};
use worldmesh_dashboard::wire::{self, Decoder, Quantizer};
use worldmesh_dashboard::{Hub, HubConfig, SyntheticFeed, Tick, spawn};

/// One raw HTTP/1.1 exchange; returns the status code and the body.
fn http(addr: SocketAddr, request: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status in {text:?}"));
    let body = text.split_once("\r\n\r\n").map_or("", |b| b.1).to_owned();
    (status, body)
}

fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    http(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
    )
}

fn feed_hub(objects: usize, nodes: usize, config: HubConfig) -> (SyntheticFeed, Arc<Hub>) {
    let feed = SyntheticFeed::new(objects, nodes, 1.0, 7);
    let hub = Hub::new(feed.world(), config);
    (feed, hub)
}

fn ws_connect(addr: SocketAddr) -> WebSocket<TcpStream> {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let (ws, _) = tungstenite::client(format!("ws://{addr}/ws"), s).unwrap();
    ws
}

/// Reads messages until a binary frame arrives (answering nothing else).
fn next_binary(ws: &mut WebSocket<TcpStream>) -> Vec<u8> {
    loop {
        match ws.read().unwrap() {
            Message::Binary(b) => return b.to_vec(),
            Message::Text(_) | Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {}
            Message::Close(c) => panic!("closed: {c:?}"),
        }
    }
}

/// The objects of `tick` as the protocol carries them.
fn expected(tick: &Tick, q: &Quantizer) -> Vec<wire::WireObject> {
    let mut v: Vec<_> = tick
        .objects
        .iter()
        .map(|o| wire::WireObject {
            id: o.id.as_u64(),
            x: q.qx(o.x),
            y: q.qy(o.y),
            kind: o.kind,
            owner: o.owner.0,
        })
        .collect();
    v.sort_by_key(|o| o.id);
    v
}

#[test]
fn bad_requests_get_clear_http_errors() {
    let (mut feed, hub) = feed_hub(50, 4, HubConfig::default());
    let tick = feed.step(0.1);
    let some = tick.objects[3];
    hub.publish(tick);
    let server = spawn("127.0.0.1:0".parse().unwrap(), Arc::clone(&hub)).unwrap();
    let a = server.local_addr();

    let (st, body) = get(a, "/");
    assert_eq!(st, 200);
    assert!(body.contains("<canvas id=\"map\""), "{body}");
    assert_eq!(get(a, "/app.js").0, 200);
    assert_eq!(get(a, "/style.css").0, 200);

    let (st, body) = get(a, "/no/such/page");
    assert_eq!(st, 404);
    assert!(body.contains("no such page: /no/such/page"), "{body}");

    let (st, body) = get(a, "/api/object/garbage");
    assert_eq!(st, 400);
    assert!(body.contains("not of the form"), "{body}");
    let (st, body) = get(a, "/api/object/n99.12345");
    assert_eq!(st, 404);
    assert!(body.contains("no object n99.12345"), "{body}");
    let (st, body) = get(a, &format!("/api/object/{}", some.id));
    assert_eq!(st, 200);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["owner"], some.owner.0);
    assert_eq!(v["kind_name"], "player");

    // A declared body over the limit: 413 before anything reads it.
    let (st, body) = http(
        a,
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(st, 413);
    assert!(body.contains("exceeds the limit"), "{body}");
    let (st, _) = http(
        a,
        "POST /api/state HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\n",
    );
    assert_eq!(st, 411);
    let (st, body) = http(
        a,
        "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: lots\r\nConnection: close\r\n\r\n",
    );
    assert!(st == 400, "{st} {body}");
    let (st, body) = get(a, &format!("/{}", "a".repeat(5000)));
    assert_eq!(st, 414);
    assert!(body.contains("exceeds the limit of 2048"), "{body}");
    // Not HTTP at all.
    assert_eq!(http(a, "HELLO THERE\r\n\r\n").0, 400);
    // The socket path without an upgrade.
    let (st, body) = get(a, "/ws");
    assert_eq!(st, 400);
    assert!(body.to_lowercase().contains("upgrade"), "{body}");
    // A known path with the wrong method.
    assert_eq!(
        http(a, "DELETE / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").0,
        405
    );

    let (st, body) = get(a, "/api/state");
    assert_eq!(st, 200);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["objects"], 50);
}

#[test]
fn browsers_beyond_the_limit_get_503() {
    let (mut feed, hub) = feed_hub(
        10,
        2,
        HubConfig {
            max_clients: 1,
            ..HubConfig::default()
        },
    );
    hub.publish(feed.step(0.1));
    let server = spawn("127.0.0.1:0".parse().unwrap(), Arc::clone(&hub)).unwrap();
    let a = server.local_addr();
    let mut first = ws_connect(a);
    next_binary(&mut first);
    let s = TcpStream::connect(a).unwrap();
    match tungstenite::client(format!("ws://{a}/ws"), s) {
        Err(tungstenite::HandshakeError::Failure(tungstenite::Error::Http(r))) => {
            assert_eq!(r.status(), 503);
            let body = String::from_utf8_lossy(r.body().as_deref().unwrap_or_default()).into_owned();
            assert!(body.contains("limit"), "{body}");
        }
        other => panic!("expected 503, got {:?}", other.map(|_| ())),
    }
    // The slot frees when the first browser leaves.
    first.close(None).unwrap();
    drop(first);
    for _ in 0..100 {
        if hub.stats().clients == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        hub.publish(feed.step(0.1));
    }
    assert_eq!(hub.stats().clients, 0);
}

#[test]
fn the_stream_decodes_to_what_was_published_with_migrations_and_focus() {
    let (mut feed, hub) = feed_hub(400, 8, HubConfig::default());
    let q = *hub.quantizer();
    hub.publish(feed.step(0.1));
    let server = spawn("127.0.0.1:0".parse().unwrap(), Arc::clone(&hub)).unwrap();
    let mut ws = ws_connect(server.local_addr());
    let hello = match ws.read().unwrap() {
        Message::Text(t) => t.to_string(),
        m => panic!("expected the hello, got {m:?}"),
    };
    let hello: serde_json::Value = serde_json::from_str(&hello).unwrap();
    assert_eq!(hello["type"], "hello");
    assert_eq!(hello["world"]["classes"].as_array().unwrap().len(), 6);
    let mut dec = Decoder::new(6);
    let f = dec.apply(&next_binary(&mut ws)).unwrap();
    assert!(f.flags & wire::FLAG_KEY != 0, "the first frame is a key");

    // 25 ticks of 0.1 s: the feed migrates a region every second. Publish one tick at a
    // time and read its frame, so none is dropped and every frame but the first is a delta.
    let mut moved = 0;
    let mut saw_nodes = 0;
    let mut last = Tick::default();
    for _ in 0..25 {
        let tick = feed.step(0.1);
        last = tick.clone();
        hub.publish(tick);
        let f = dec.apply(&next_binary(&mut ws)).unwrap();
        assert_eq!(f.flags & wire::FLAG_KEY, 0);
        moved += f.events.len();
        if let Some(n) = &f.nodes {
            saw_nodes += 1;
            assert_eq!(n.rows.len(), 8);
            let players: u32 = n.rows.iter().map(|r| r.players).sum();
            assert_eq!(
                players as usize,
                last.objects.iter().filter(|o| o.kind == 0).count()
            );
            assert!(n.bytes_per_s[0] > 0, "rates from the counters");
        }
        assert_eq!(dec.objects(), &expected(&last, &q)[..]);
    }
    assert!(moved >= 2 * 8, "two regions moved ({moved} ownership changes)");
    assert_eq!(hub.stats().moves[0] as usize, moved);
    assert_eq!(saw_nodes, 5);
    assert_eq!(hub.stats().frames_dropped, 0);

    // Hover: the focus carries the object's owner and area of interest.
    let o = last.objects.iter().find(|o| o.kind == 0).unwrap();
    ws.send(Message::text(format!(r#"{{"hover":"{}"}}"#, o.id)))
        .unwrap();
    let focus = loop {
        let b = next_binary(&mut ws);
        if b[0] == wire::MSG_FOCUS {
            break wire::decode_focus(&b).unwrap();
        }
    };
    assert_eq!(focus.id, o.id);
    let info = focus.found.unwrap();
    assert_eq!(info.owner, o.owner.0);
    assert_eq!(info.aoi, o.aoi);
    // An id that does not exist: found = None.
    ws.send(Message::text(r#"{"hover":"n77.777"}"#)).unwrap();
    let focus = loop {
        let b = next_binary(&mut ws);
        if b[0] == wire::MSG_FOCUS {
            break wire::decode_focus(&b).unwrap();
        }
    };
    assert_eq!(focus.id, ObjectId::new(NodeId(77), 777));
    assert_eq!(focus.found, None);
}

#[test]
fn bad_browser_messages_are_refused_and_oversize_ones_close_the_socket() {
    let (mut feed, hub) = feed_hub(20, 2, HubConfig::default());
    hub.publish(feed.step(0.1));
    let server = spawn("127.0.0.1:0".parse().unwrap(), Arc::clone(&hub)).unwrap();
    let mut ws = ws_connect(server.local_addr());
    next_binary(&mut ws);
    let error = |ws: &mut WebSocket<TcpStream>| loop {
        if let Message::Text(t) = ws.read().unwrap() {
            let v: serde_json::Value = serde_json::from_str(&t).unwrap();
            if v["type"] == "error" {
                return v["error"].as_str().unwrap().to_owned();
            }
        }
    };
    ws.send(Message::text("not json")).unwrap();
    assert!(error(&mut ws).starts_with("bad message"));
    ws.send(Message::text(r#"{"hover":"n1.x"}"#)).unwrap();
    assert!(error(&mut ws).contains("not a number"));
    ws.send(Message::binary(vec![1, 2, 3])).unwrap();
    assert_eq!(error(&mut ws), "binary messages are not accepted");
    // Still served after refusals.
    hub.publish(feed.step(0.1));
    next_binary(&mut ws);
    assert_eq!(hub.stats().refused_messages, 3);

    // Over the limit: the socket closes with 1009 (message too big).
    ws.send(Message::text("x".repeat(wire::MAX_CLIENT_MESSAGE * 4)))
        .unwrap();
    let code = loop {
        match ws.read() {
            Ok(Message::Close(c)) => break c.map(|c| u16::from(c.code)),
            Ok(_) => {}
            Err(e) => panic!("the server should close with a reason, got {e}"),
        }
    };
    assert_eq!(code, Some(1009));
}

#[test]
fn a_stuck_browser_never_stalls_the_producer() {
    // Large frames (20,000 objects): a browser that never reads fills its socket buffers
    // within a few dozen frames; after that every frame for it is dropped, not waited for.
    let (mut feed, hub) = feed_hub(20_000, 64, HubConfig::default());
    hub.publish(feed.step(0.1));
    let server = spawn("127.0.0.1:0".parse().unwrap(), Arc::clone(&hub)).unwrap();
    let a = server.local_addr();
    let stuck = ws_connect(a); // never read
    let mut reader = ws_connect(a);
    let mut dec = Decoder::new(6);
    dec.apply(&next_binary(&mut reader)).unwrap();
    for _ in 0..100 {
        if hub.stats().clients == 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(hub.stats().clients, 2);

    const TICKS: usize = 400;
    let (done_tx, done_rx) = mpsc::channel();
    let producer_hub = Arc::clone(&hub);
    let producer = std::thread::spawn(move || {
        let mut last = Tick::default();
        for _ in 0..TICKS {
            last = feed.step(0.1);
            producer_hub.publish(last.clone());
        }
        producer_hub.finish();
        let _ = done_tx.send(());
        last
    });
    // The reading browser keeps up as it can; it must end on the final state.
    let q = *hub.quantizer();
    loop {
        let f = dec.apply(&next_binary(&mut reader)).unwrap();
        if f.flags & wire::FLAG_FINISHED != 0 {
            break;
        }
    }
    // Liveness, not speed: a producer blocked on the stuck browser would never finish.
    done_rx
        .recv_timeout(Duration::from_secs(300))
        .expect("the producer finished while a browser was stuck");
    let last = producer.join().unwrap();
    assert_eq!(dec.objects(), &expected(&last, &q)[..]);
    let s = hub.stats();
    eprintln!("after {TICKS} ticks with a stuck browser: {s:?}");
    // The stuck browser can have absorbed only what its socket buffers hold; every later
    // frame was dropped for it.
    assert!(
        s.frames_dropped as usize >= TICKS / 2,
        "frames dropped: {} of {TICKS}",
        s.frames_dropped
    );
    assert!(s.key_frames >= 2, "frames after a gap are key frames");
    drop(stuck);
}
