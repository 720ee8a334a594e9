//! The Join button's socket (`/play`) over real sockets, with a stand-in gateway: off
//! without a gateway (404), one session per socket that ends when the socket goes, keys
//! passed on, bad and oversize messages refused, the rate limit, and 503 beyond the
//! session limit. (The real gateway, on real nodes, is tested in headless Chromium:
//! `crates/cli/tests/dashboard_browser.rs`.)

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::mpsc;
use tungstenite::{Message, WebSocket};
use worldmesh_dashboard::play::{PlaySession, PlayUpdate};
use worldmesh_dashboard::{Gateway, Hub, HubConfig, Play, PlayConfig, SyntheticFeed, spawn, spawn_with_play};

/// A gateway whose avatar moves 10 units per key message; counts sessions that ended.
#[derive(Default)]
struct Walker {
    ended: Arc<AtomicU64>,
    keys: Arc<AtomicU64>,
}

impl Gateway for Walker {
    fn open(&self) -> Result<PlaySession, String> {
        let (keys_tx, mut keys_rx) = mpsc::channel::<(i8, i8)>(8);
        let (up_tx, up_rx) = mpsc::channel(32);
        let (ended, count) = (Arc::clone(&self.ended), Arc::clone(&self.keys));
        tokio::spawn(async move {
            let _ = up_tx
                .send(PlayUpdate::Joined {
                    node: 1,
                    player: 7,
                    avatar: "n1.7".into(),
                    key: ((1u64 << 32) | 7).to_string(),
                })
                .await;
            let (mut x, mut y) = (0.0f32, 0.0f32);
            while let Some((dx, dy)) = keys_rx.recv().await {
                count.fetch_add(1, Ordering::Relaxed);
                x += 10.0 * f32::from(dx);
                y += 10.0 * f32::from(dy);
                let _ = up_tx
                    .send(PlayUpdate::At {
                        node: 1,
                        x,
                        y,
                        seen: 3,
                    })
                    .await;
            }
            ended.fetch_add(1, Ordering::Relaxed);
        });
        Ok(PlaySession {
            keys: keys_tx,
            updates: up_rx,
        })
    }

    fn describe(&self) -> String {
        "a stand-in".into()
    }
}

fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap();
    (status, out.split_once("\r\n\r\n").map_or("", |b| b.1).to_owned())
}

fn hub() -> Arc<Hub> {
    let feed = SyntheticFeed::new(10, 2, 1.0, 1);
    Hub::new(feed.world(), HubConfig::default())
}

fn connect(addr: SocketAddr) -> Result<WebSocket<TcpStream>, u16> {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    match tungstenite::client(format!("ws://{addr}/play"), s) {
        Ok((ws, _)) => Ok(ws),
        Err(tungstenite::HandshakeError::Failure(tungstenite::Error::Http(r))) => Err(r.status().as_u16()),
        Err(e) => panic!("{e}"),
    }
}

fn next_json(ws: &mut WebSocket<TcpStream>) -> serde_json::Value {
    loop {
        match ws.read().unwrap() {
            Message::Text(t) => return serde_json::from_str(t.as_str()).unwrap(),
            Message::Close(c) => panic!("closed: {c:?}"),
            _ => {}
        }
    }
}

fn wait_for(what: &str, f: impl Fn() -> bool) {
    for _ in 0..500 {
        if f() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{what}: not within 10 s");
}

#[test]
fn without_a_gateway_joining_is_off_with_a_clear_answer() {
    let server = spawn("127.0.0.1:0".parse().unwrap(), hub()).unwrap();
    let a = server.local_addr();
    let (st, body) = get(a, "/api/play");
    assert_eq!(st, 200);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["available"], false);
    assert!(v["about"].as_str().unwrap().contains("--dashboard"), "{v}");
    assert_eq!(connect(a).err(), Some(404));
    let (st, body) = get(a, "/play");
    assert_eq!(st, 404);
    assert!(body.contains("joining is off"), "{body}");
}

#[test]
fn play_sockets_pass_keys_refuse_bad_messages_and_are_limited() {
    let walker = Walker::default();
    let (ended, keys) = (Arc::clone(&walker.ended), Arc::clone(&walker.keys));
    let play = Play::new(
        Arc::new(walker),
        PlayConfig {
            max_sessions: 2,
            max_messages_per_s: 1.0,
        },
    );
    let server = spawn_with_play("127.0.0.1:0".parse().unwrap(), hub(), Some(play)).unwrap();
    let a = server.local_addr();
    let v: serde_json::Value = serde_json::from_str(&get(a, "/api/play").1).unwrap();
    assert_eq!(v["available"], true);
    assert_eq!(v["about"], "a stand-in");
    let (st, body) = get(a, "/play");
    assert_eq!(st, 400, "a plain GET is not a WebSocket: {body}");
    assert!(body.to_lowercase().contains("upgrade"), "{body}");

    let mut p1 = connect(a).unwrap();
    let joined = next_json(&mut p1);
    assert_eq!(joined["type"], "joined");
    assert_eq!(joined["key"], "4294967303");
    p1.send(Message::text(r#"{"type":"keys","dx":1,"dy":-1}"#))
        .unwrap();
    let at = next_json(&mut p1);
    assert_eq!(
        (at["type"].as_str(), at["x"].as_f64(), at["y"].as_f64()),
        (Some("at"), Some(10.0), Some(-10.0))
    );

    // A bad message is answered and the socket stays open.
    p1.send(Message::text(r#"{"type":"keys","dx":5,"dy":0}"#))
        .unwrap();
    let e = next_json(&mut p1);
    assert_eq!(e["type"], "error");
    assert!(e["error"].as_str().unwrap().contains("dx must be"), "{e}");

    // Beyond the rate (1 a second, bursts of 1): dropped, counted, and the page is told.
    for _ in 0..50 {
        p1.send(Message::text(r#"{"type":"keys","dx":0,"dy":1}"#))
            .unwrap();
    }
    let mut told = false;
    while !told {
        let m = next_json(&mut p1);
        told = m["type"] == "error" && m["error"].as_str().unwrap().contains("messages a second");
    }
    let v: serde_json::Value = serde_json::from_str(&get(a, "/api/play").1).unwrap();
    let dropped = v["dropped_messages"].as_u64().unwrap();
    assert!(dropped > 0, "{v}");
    assert!(keys.load(Ordering::Relaxed) + dropped <= 51, "{v}");
    assert_eq!(v["open"], 1, "{v}");

    // Two sessions at most: a third gets 503.
    let mut p2 = connect(a).unwrap();
    assert_eq!(next_json(&mut p2)["type"], "joined");
    assert_eq!(connect(a).err(), Some(503));

    // Closing a socket ends its session (the player leaves) and frees its slot.
    p2.close(None).unwrap();
    while p2.read().is_ok() {}
    wait_for("the closed socket's session ended", || {
        ended.load(Ordering::Relaxed) == 1
    });
    let mut p3 = connect(a).unwrap();
    assert_eq!(next_json(&mut p3)["type"], "joined");

    // An oversize message closes the socket, and ends that session too.
    let big = format!(r#"{{"type":"leave","pad":"{}"}}"#, "x".repeat(1000));
    let _ = p3.send(Message::text(big));
    let closed = loop {
        match p3.read() {
            Ok(Message::Close(_)) | Err(_) => break true,
            Ok(_) => {}
        }
    };
    assert!(closed);
    wait_for("the oversize socket's session ended", || {
        ended.load(Ordering::Relaxed) == 2
    });
    // Leaving ends the first.
    p1.send(Message::text(r#"{"type":"leave"}"#)).unwrap();
    wait_for("the leaving player's session ended", || {
        ended.load(Ordering::Relaxed) == 3
    });
}
