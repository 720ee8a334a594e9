//! Scraping a node's metrics endpoint over plain TCP; the strict parser of the Prometheus
//! text exposition format is `worldmesh_net::exposition` (written apart from the renderer).

#![allow(dead_code)] // each test uses its own subset

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// An HTTP answer.
#[derive(Debug)]
pub struct Answer {
    /// Status code.
    pub status: u16,
    /// Header lines, names lower-cased.
    pub headers: BTreeMap<String, String>,
    /// Body.
    pub body: String,
}

/// Sends `request` (raw bytes) to `addr` and reads the answer until the server closes.
pub fn send(addr: SocketAddr, request: &[u8]) -> Answer {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(request).unwrap();
    read_answer(&mut s)
}

/// Reads an answer from `s` until the server closes.
pub fn read_answer(s: &mut TcpStream) -> Answer {
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8(raw).expect("UTF-8 answer");
    let (head, body) = text.split_once("\r\n\r\n").expect("a complete answer");
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    let status = status_line
        .strip_prefix("HTTP/1.1 ")
        .and_then(|r| r.get(..3))
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
    let headers = lines
        .map(|l| {
            let (k, v) = l.split_once(':').expect("header");
            (k.trim().to_ascii_lowercase(), v.trim().to_owned())
        })
        .collect();
    Answer {
        status,
        headers,
        body: body.to_owned(),
    }
}

/// `GET /metrics`.
pub fn scrape(addr: SocketAddr) -> Answer {
    send(addr, b"GET /metrics HTTP/1.1\r\nHost: node\r\n\r\n")
}

pub use worldmesh_net::exposition::{Exposition, parse};

/// [`Exposition::get`] for a sample that must exist.
pub trait ValueOf {
    /// The value of `name` with exactly `labels`; panics (failing the test) if absent.
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64;
}

impl ValueOf for Exposition {
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.get(name, labels)
            .unwrap_or_else(|| panic!("no sample {name}{labels:?}"))
    }
}
