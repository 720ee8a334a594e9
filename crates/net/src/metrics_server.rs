//! The metrics endpoint: `GET /metrics` on its own thread, with its own single-threaded
//! tokio runtime, rendering the latest [`SnapshotCell`] snapshot. The frame loop shares
//! nothing with it but the cell (see [`crate::metrics`]), so a slow, stuck or hostile
//! scraper cannot delay a frame.
//!
//! | request | answer |
//! |---|---|
//! | `GET /metrics` (or `HEAD`; a query string is ignored) | 200, text format 0.0.4 |
//! | `GET /metrics` before the first snapshot | 503 |
//! | `GET /view`, `GET /world` (with [`MetricsServer::start_with_view`]) | 200, the node's [`crate::view`] for a live dashboard, the world's JSON |
//! | `GET /view` before the node built one | 503 (a request makes the node build views for [`crate::view::WANTED_FOR`]) |
//! | another method on a served path | 405 with `Allow: GET, HEAD` |
//! | another path | 404 |
//! | a request head over [`MetricsServerConfig::max_head`] bytes | 431 |
//! | a head not complete within [`MetricsServerConfig::read_timeout`] (slow clients) | 408 |
//! | a request line that does not parse, or not HTTP/1.x | 400 |
//! | beyond [`MetricsServerConfig::max_connections`] open connections | 503 at once (as many again are answered so; beyond that they are closed) |
//!
//! Every answer closes the connection (`Connection: close`); request bodies are never
//! read. A response that the client does not take within
//! [`MetricsServerConfig::write_timeout`] is abandoned.
//!
//! Why not axum, which the dashboard uses (BRIEF §6): `axum::serve` (0.8.9,
//! `src/serve/mod.rs`) builds hyper's connection with its defaults and exposes none of
//! them: request heads are buffered up to hyper's 400 KiB (`DEFAULT_MAX_BUFFER_SIZE`,
//! hyper 1.12), no timer is set so there is no header-read deadline, and there is no cap
//! on connections. One fixed path needs no router; the bounds above are the point.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::sync::{Semaphore, oneshot};

use crate::metrics::{CONTENT_TYPE, SnapshotCell, render};
use crate::view::ViewCell;

/// How the endpoint runs.
#[derive(Clone, Debug)]
pub struct MetricsServerConfig {
    /// Where to listen (port 0: any free port; see [`MetricsServer::local_addr`]).
    pub addr: SocketAddr,
    /// Connections served at once; more get 503 at once.
    pub max_connections: usize,
    /// Largest request head (request line and headers), bytes; larger gets 431.
    pub max_head: usize,
    /// Time a client has to send its whole request head; then 408.
    pub read_timeout: Duration,
    /// Time a client has to take the response; then the connection is dropped.
    pub write_timeout: Duration,
}

impl MetricsServerConfig {
    /// Defaults: 32 connections, 8 KiB heads, 5 s to send a request, 10 s to take the
    /// answer.
    pub fn new(addr: SocketAddr) -> Self {
        Self {
            addr,
            max_connections: 32,
            max_head: 8 * 1024,
            read_timeout: Duration::from_secs(5),
            write_timeout: Duration::from_secs(10),
        }
    }
}

/// Why the endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// The address could not be bound.
    #[error("cannot listen for metrics on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The system's reason.
        source: std::io::Error,
    },
    /// The thread or its runtime could not start.
    #[error("cannot start the metrics endpoint: {0}")]
    Start(std::io::Error),
}

/// The status codes the endpoint answers with, in counter order.
const CODES: [u16; 7] = [200, 400, 404, 405, 408, 431, 503];

/// Responses by status code.
#[derive(Debug, Default)]
struct Counters {
    by_code: [AtomicU64; CODES.len()],
}

impl Counters {
    fn count(&self, code: u16) {
        if let Some(i) = CODES.iter().position(|c| *c == code) {
            self.by_code[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    fn render(&self) -> String {
        let mut s = String::from(
            "# HELP worldmesh_metrics_http_responses_total Answers of this metrics endpoint, by status code.\n\
             # TYPE worldmesh_metrics_http_responses_total counter\n",
        );
        for (c, n) in CODES.iter().zip(&self.by_code) {
            s.push_str(&format!(
                "worldmesh_metrics_http_responses_total{{code=\"{c}\"}} {}\n",
                n.load(Ordering::Relaxed)
            ));
        }
        s
    }
}

/// A running metrics endpoint; stops when dropped.
pub struct MetricsServer {
    local: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MetricsServer {
    /// Binds `cfg.addr` (errors at once) and serves `cell` on a thread of its own.
    pub fn start(cfg: MetricsServerConfig, cell: SnapshotCell) -> Result<Self, MetricsError> {
        Self::start_with_view(cfg, cell, None)
    }

    /// As [`MetricsServer::start`], and with `view` also `GET /view` and `GET /world` for
    /// a live dashboard ([`crate::view`]).
    pub fn start_with_view(
        cfg: MetricsServerConfig,
        cell: SnapshotCell,
        view: Option<ViewCell>,
    ) -> Result<Self, MetricsError> {
        let bind = |source| MetricsError::Bind {
            addr: cfg.addr,
            source,
        };
        let std_listener = std::net::TcpListener::bind(cfg.addr).map_err(bind)?;
        std_listener.set_nonblocking(true).map_err(bind)?;
        let local = std_listener.local_addr().map_err(bind)?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(MetricsError::Start)?;
        let (stop, stop_rx) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("worldmesh-metrics".into())
            .spawn(move || {
                rt.block_on(async move {
                    match tokio::net::TcpListener::from_std(std_listener) {
                        Ok(l) => accept_loop(l, cfg, cell, view, stop_rx).await,
                        Err(e) => tracing::error!(error = %e, "metrics endpoint cannot start"),
                    }
                });
            })
            .map_err(MetricsError::Start)?;
        Ok(Self {
            local,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Stops serving and waits for the thread (open connections are dropped).
    pub fn shutdown(mut self) {
        self.stop_thread();
    }

    fn stop_thread(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

async fn accept_loop(
    listener: tokio::net::TcpListener,
    cfg: MetricsServerConfig,
    cell: SnapshotCell,
    view: Option<ViewCell>,
    mut stop: oneshot::Receiver<()>,
) {
    let slots = Arc::new(Semaphore::new(cfg.max_connections.max(1)));
    let turned_away = Arc::new(Semaphore::new(cfg.max_connections.max(1)));
    let counters = Arc::new(Counters::default());
    let cfg = Arc::new(cfg);
    loop {
        let accepted = tokio::select! {
            _ = &mut stop => return,
            a = listener.accept() => a,
        };
        match accepted {
            Ok((sock, _)) => match Arc::clone(&slots).try_acquire_owned() {
                Ok(permit) => {
                    let (cfg, cell, counters) = (Arc::clone(&cfg), cell.clone(), Arc::clone(&counters));
                    let view = view.clone();
                    tokio::spawn(async move {
                        serve_connection(sock, &cfg, &cell, view.as_ref(), &counters).await;
                        drop(permit);
                    });
                }
                Err(_) => match Arc::clone(&turned_away).try_acquire_owned() {
                    // Full: answer 503 at once, without reading the request (a short,
                    // separately capped task, so the answer is not lost to a reset).
                    Ok(permit) => {
                        counters.count(503);
                        tokio::spawn(async move {
                            let mut sock = sock;
                            let r = response(503, "too many connections to the metrics endpoint\n", &[]);
                            finish(&mut sock, &r, Duration::from_secs(1), Duration::from_millis(200)).await;
                            drop(permit);
                        });
                    }
                    // Flooded: close at once.
                    Err(_) => drop(sock),
                },
            },
            Err(e) => {
                // Out of descriptors or similar: do not spin.
                tracing::warn!(error = %e, "metrics endpoint: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// What a request head asked for.
#[derive(Debug, PartialEq, Eq)]
enum Head {
    /// A complete, parsed head.
    Request {
        /// `GET`, `HEAD`, …
        method: String,
        /// The path, query removed.
        path: String,
    },
    /// Not HTTP/1.x, or a request line that does not parse.
    Bad(&'static str),
}

/// Parses the request line of a complete head.
fn parse_head(head: &[u8]) -> Head {
    let Ok(text) = std::str::from_utf8(head) else {
        return Head::Bad("request head is not UTF-8");
    };
    let line = text.split("\r\n").next().unwrap_or("");
    let line = line.split('\n').next().unwrap_or("");
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Head::Bad("malformed request line");
    };
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_uppercase()) {
        return Head::Bad("malformed method");
    }
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Head::Bad("only HTTP/1.0 and HTTP/1.1 are served");
    }
    if !target.starts_with('/') {
        return Head::Bad("request target must be a path");
    }
    let path = target.split('?').next().unwrap_or(target);
    Head::Request {
        method: method.to_owned(),
        path: path.to_owned(),
    }
}

/// Where the head ends (just past the blank line), if it is complete.
fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| i + 4)
        .or_else(|| buf.windows(2).position(|w| w == b"\n\n").map(|i| i + 2))
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Error",
    }
}

fn response(code: u16, body: &str, extra: &[(&str, &str)]) -> Vec<u8> {
    let ctype = if code == 200 {
        CONTENT_TYPE
    } else {
        "text/plain; charset=utf-8"
    };
    response_bytes(code, ctype, body.as_bytes(), extra)
}

fn response_bytes(code: u16, ctype: &str, body: &[u8], extra: &[(&str, &str)]) -> Vec<u8> {
    let mut r = format!(
        "HTTP/1.1 {code} {}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n",
        reason(code),
        body.len()
    );
    for (k, v) in extra {
        r.push_str(&format!("{k}: {v}\r\n"));
    }
    r.push_str("\r\n");
    let mut r = r.into_bytes();
    r.extend_from_slice(body);
    r
}

/// `Content-Type` of `GET /view`.
pub const VIEW_CONTENT_TYPE: &str = "application/octet-stream";
/// `Content-Type` of `GET /world`.
pub const WORLD_CONTENT_TYPE: &str = "application/json";
const TEXT: &str = "text/plain; charset=utf-8";

/// An answer: status, content type, body, whether to add `Allow`, whether it is a `HEAD`.
struct Answer {
    code: u16,
    ctype: &'static str,
    body: Vec<u8>,
    allow: bool,
    head_only: bool,
}

impl Answer {
    fn text(code: u16, body: String) -> Self {
        Self {
            code,
            ctype: TEXT,
            body: body.into_bytes(),
            allow: false,
            head_only: false,
        }
    }
}

/// Answers a parsed request.
fn route(
    method: &str,
    path: &str,
    cell: &SnapshotCell,
    view: Option<&ViewCell>,
    counters: &Counters,
) -> Answer {
    let known = path == "/metrics" || (view.is_some() && (path == "/view" || path == "/world"));
    if !known {
        let also = if view.is_some() {
            ", the dashboard's feed at /view and /world"
        } else {
            ""
        };
        return Answer::text(
            404,
            format!(
                "no such path {:?}; metrics are at /metrics{also}\n",
                truncate(path, 128)
            ),
        );
    }
    if method != "GET" && method != "HEAD" {
        return Answer {
            allow: true,
            ..Answer::text(
                405,
                format!("method {} not allowed; use GET\n", truncate(method, 32)),
            )
        };
    }
    let head_only = method == "HEAD";
    let ok = |ctype, body| Answer {
        code: 200,
        ctype,
        body,
        allow: false,
        head_only,
    };
    match (path, view) {
        ("/view", Some(v)) => {
            v.asked();
            match v.latest() {
                Some(s) => ok(VIEW_CONTENT_TYPE, crate::view::encode(&s)),
                None => Answer::text(
                    503,
                    "no view yet: the node builds one within a frame of the first request; ask again\n"
                        .into(),
                ),
            }
        }
        ("/world", Some(v)) => ok(WORLD_CONTENT_TYPE, v.world().as_bytes().to_vec()),
        _ => match cell.latest() {
            Some(s) => {
                let mut text = render(&s);
                text.push_str(&counters.render());
                ok(CONTENT_TYPE, text.into_bytes())
            }
            None => Answer::text(503, "no metrics yet: the node is starting\n".into()),
        },
    }
}

/// Reads one request head, answers it, closes.
async fn serve_connection(
    mut sock: TcpStream,
    cfg: &MetricsServerConfig,
    cell: &SnapshotCell,
    view: Option<&ViewCell>,
    counters: &Counters,
) {
    let deadline = tokio::time::Instant::now() + cfg.read_timeout;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    let a = loop {
        let n = match tokio::time::timeout_at(deadline, sock.read(&mut chunk)).await {
            Err(_) => {
                break Answer::text(
                    408,
                    format!(
                        "request head not received within {} s\n",
                        cfg.read_timeout.as_secs_f64()
                    ),
                );
            }
            Ok(Err(_)) | Ok(Ok(0)) => return,
            Ok(Ok(n)) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        let end = match head_end(&buf) {
            Some(e) if e <= cfg.max_head => e,
            None if buf.len() <= cfg.max_head => continue,
            _ => {
                break Answer::text(
                    431,
                    format!("request head exceeds the limit of {} bytes\n", cfg.max_head),
                );
            }
        };
        break match parse_head(&buf[..end]) {
            Head::Bad(why) => Answer::text(400, format!("bad request: {why}\n")),
            Head::Request { method, path } => route(&method, &path, cell, view, counters),
        };
    };
    counters.count(a.code);
    let mut r = response_bytes(
        a.code,
        a.ctype,
        &a.body,
        if a.allow { &[("Allow", "GET, HEAD")] } else { &[] },
    );
    if a.head_only {
        r.truncate(r.len() - a.body.len());
    }
    finish(&mut sock, &r, cfg.write_timeout, Duration::from_millis(500)).await;
}

/// Writes `answer` within `write_timeout` and closes our side; then takes (and discards)
/// what the client still sends for up to `linger` (64 KiB at most), so that closing with
/// unread input does not reset the connection before the client has read the answer.
async fn finish(sock: &mut TcpStream, answer: &[u8], write_timeout: Duration, linger: Duration) {
    let write = async {
        sock.write_all(answer).await?;
        sock.shutdown().await
    };
    if !matches!(tokio::time::timeout(write_timeout, write).await, Ok(Ok(()))) {
        return;
    }
    let _ = tokio::time::timeout(linger, async {
        let mut chunk = [0u8; 2048];
        let mut taken = 0usize;
        while taken < 64 * 1024 {
            match sock.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => taken += n,
            }
        }
    })
    .await;
}

fn truncate(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::MetricsSnapshot;
    use std::io::{Read as _, Write as _};

    fn server(cfg: impl FnOnce(&mut MetricsServerConfig)) -> (MetricsServer, SnapshotCell) {
        let cell = SnapshotCell::new();
        let mut c = MetricsServerConfig::new("127.0.0.1:0".parse().unwrap());
        cfg(&mut c);
        (MetricsServer::start(c, cell.clone()).unwrap(), cell)
    }

    /// Sends `req`, returns the whole answer.
    fn ask(addr: SocketAddr, req: &[u8]) -> String {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.write_all(req).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    fn status(answer: &str) -> u16 {
        answer
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("no status in {answer:?}"))
    }

    #[test]
    fn answers_each_kind_of_request_with_its_code() {
        let (srv, cell) = server(|_| {});
        let a = srv.local_addr();
        assert_eq!(status(&ask(a, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")), 503);
        cell.publish(MetricsSnapshot {
            primaries: 5,
            ..Default::default()
        });
        let ok = ask(a, b"GET /metrics?x=1 HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(status(&ok), 200, "{ok}");
        assert!(ok.contains("Content-Type: text/plain; version=0.0.4"), "{ok}");
        assert!(ok.contains("\nworldmesh_primaries 5\n"), "{ok}");
        assert!(
            ok.contains("worldmesh_metrics_http_responses_total{code=\"503\"} 1\n"),
            "{ok}"
        );
        let head = ask(a, b"HEAD /metrics HTTP/1.0\r\n\r\n");
        assert_eq!(status(&head), 200);
        assert!(head.ends_with("\r\n\r\n"), "HEAD has no body: {head}");
        let nf = ask(a, b"GET /nope HTTP/1.1\r\n\r\n");
        assert_eq!(status(&nf), 404);
        assert!(nf.contains("/metrics"), "{nf}");
        let post = ask(a, b"POST /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello");
        assert_eq!(status(&post), 405);
        assert!(post.contains("Allow: GET, HEAD"), "{post}");
        assert_eq!(status(&ask(a, b"GARBAGE\r\n\r\n")), 400);
        assert_eq!(status(&ask(a, b"GET /metrics HTTP/2.0\r\n\r\n")), 400);
        let mut big = b"GET /metrics HTTP/1.1\r\nX-Pad: ".to_vec();
        big.extend(std::iter::repeat_n(b'a', 9000));
        big.extend_from_slice(b"\r\n\r\n");
        assert_eq!(status(&ask(a, &big)), 431);
        // A head that never ends, sent all at once.
        assert_eq!(status(&ask(a, &vec![b'A'; 20_000])), 431);
    }

    #[test]
    fn a_slow_client_gets_408_and_a_full_server_503() {
        let (srv, cell) = server(|c| {
            c.read_timeout = Duration::from_millis(300);
            c.max_connections = 2;
        });
        cell.publish(MetricsSnapshot::default());
        let a = srv.local_addr();
        // Two clients that start a request and stall hold both slots.
        let mut stuck: Vec<std::net::TcpStream> = (0..2)
            .map(|_| {
                let mut s = std::net::TcpStream::connect(a).unwrap();
                s.write_all(b"GET /metr").unwrap();
                s
            })
            .collect();
        // Give the server time to accept them (it answers the third at once either way).
        std::thread::sleep(Duration::from_millis(100));
        let busy = ask(a, b"GET /metrics HTTP/1.1\r\n\r\n");
        assert_eq!(status(&busy), 503, "{busy}");
        for mut s in stuck.drain(..) {
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).unwrap();
            assert_eq!(status(&out), 408, "{out}");
        }
        // Their slots are freed once they close (the server notices asynchronously).
        let freed = (0..50).any(|_| {
            std::thread::sleep(Duration::from_millis(20));
            status(&ask(a, b"GET /metrics HTTP/1.1\r\n\r\n")) == 200
        });
        assert!(freed, "no slot freed after the stuck clients left");
    }

    #[test]
    fn serves_the_dashboard_view_and_world_only_when_asked_to() {
        let cell = SnapshotCell::new();
        let view = ViewCell::new("{\"title\":\"w\"}", Duration::from_millis(100));
        let srv = MetricsServer::start_with_view(
            MetricsServerConfig::new("127.0.0.1:0".parse().unwrap()),
            cell,
            Some(view.clone()),
        )
        .unwrap();
        let a = srv.local_addr();
        assert!(!view.wanted());
        let early = ask(a, b"GET /view HTTP/1.1\r\n\r\n");
        assert_eq!(status(&early), 503, "{early}");
        assert!(view.wanted(), "a request makes the node build views");
        view.publish(crate::view::ViewSnapshot {
            node: 4,
            ..Default::default()
        });
        let mut s = std::net::TcpStream::connect(a).unwrap();
        s.write_all(b"GET /view HTTP/1.1\r\n\r\n").unwrap();
        let mut out = Vec::new();
        s.read_to_end(&mut out).unwrap();
        let end = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let head = String::from_utf8_lossy(&out[..end]);
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(head.contains("application/octet-stream"), "{head}");
        assert_eq!(crate::view::decode(&out[end..], 10).map(|v| v.node), Ok(4));
        let w = ask(a, b"GET /world HTTP/1.1\r\n\r\n");
        assert!(
            w.starts_with("HTTP/1.1 200") && w.ends_with("{\"title\":\"w\"}"),
            "{w}"
        );
        assert_eq!(status(&ask(a, b"POST /view HTTP/1.1\r\n\r\n")), 405);
        // Without a view cell, the paths do not exist.
        let (plain, _) = server(|_| {});
        let nf = ask(plain.local_addr(), b"GET /view HTTP/1.1\r\n\r\n");
        assert_eq!(status(&nf), 404, "{nf}");
    }

    #[test]
    fn binding_a_taken_address_is_a_clear_error() {
        let (srv, _) = server(|_| {});
        let e = MetricsServer::start(MetricsServerConfig::new(srv.local_addr()), SnapshotCell::new())
            .err()
            .expect("second bind fails");
        assert!(e.to_string().contains(&srv.local_addr().to_string()), "{e}");
        srv.shutdown();
    }

    #[test]
    fn request_lines_parse() {
        assert_eq!(
            parse_head(b"GET /metrics?a=b HTTP/1.1\r\n\r\n"),
            Head::Request {
                method: "GET".into(),
                path: "/metrics".into()
            }
        );
        assert!(matches!(
            parse_head(b"GET  /metrics HTTP/1.1\r\n\r\n"),
            Head::Bad(_)
        ));
        assert!(matches!(
            parse_head(b"get /metrics HTTP/1.1\r\n\r\n"),
            Head::Bad(_)
        ));
        assert!(matches!(
            parse_head(b"GET metrics HTTP/1.1\r\n\r\n"),
            Head::Bad(_)
        ));
        assert!(matches!(
            parse_head(&[0xff, b'\r', b'\n', b'\r', b'\n']),
            Head::Bad(_)
        ));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nA: b\r\n\r\nrest"), Some(24));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nA: b\r\n"), None);
    }
}
