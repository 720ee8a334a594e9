//! `worldmesh simulate --dashboard` and `worldmesh dashboard` from the command line: the
//! paced run with the dashboard gives the report of the plain run, byte for byte; bad
//! flags fail with messages that name them.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{tmp, worldmesh};

fn report_without_wall_time(path: &std::path::Path) -> String {
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    v.as_object_mut().unwrap().remove("wall_seconds");
    serde_json::to_string_pretty(&v).unwrap()
}

#[test]
fn the_dashboard_does_not_change_the_report() {
    let dir = tmp("dash-identity");
    let args = [
        "simulate",
        "--nodes",
        "6",
        "--players-per-node",
        "4",
        "--duration",
        "4s",
        "--seed",
        "9",
        "--quiet",
    ];
    let plain = dir.path().join("plain");
    common::run_ok(worldmesh().args(args).arg("--out").arg(&plain));

    let paced = dir.path().join("paced");
    let mut child = worldmesh()
        .args(args)
        .arg("--out")
        .arg(&paced)
        .args(["--dashboard", "127.0.0.1:0", "--speed", "8"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut url = None;
    let started = Instant::now();
    // It serves the final state until stopped: wait for the report, look at the page's
    // state once, then stop it.
    loop {
        let l = lines
            .next()
            .unwrap_or_else(|| panic!("simulate --dashboard ended early (status {:?})", child.try_wait()))
            .unwrap();
        if let Some(u) = l.strip_prefix("dashboard: http://") {
            url = Some(u.split('/').next().unwrap().to_owned());
        }
        if l.starts_with("report written to") {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(300), "no report");
    }
    let addr = url.expect("the dashboard URL was printed");
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    s.write_all(b"GET /api/state HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut t = String::new();
    s.read_to_string(&mut t).unwrap();
    let state: serde_json::Value = serde_json::from_str(t.split_once("\r\n\r\n").unwrap().1).unwrap();
    child.kill().unwrap();
    child.wait().unwrap();

    assert_eq!(state["finished"], true);
    assert_eq!(state["time_s"], 4.0);
    // 4 s at 10 ticks per second of wall time and 8x: 5 ticks plus the first.
    assert_eq!(state["ticks"], 6);
    assert_eq!(
        report_without_wall_time(&plain.join("report.json")),
        report_without_wall_time(&paced.join("report.json")),
        "the report changed with --dashboard"
    );
}

#[test]
fn bad_dashboard_flags_are_named() {
    let err = |args: &[&str]| {
        let o = worldmesh().args(args).output().unwrap();
        assert!(!o.status.success(), "{args:?} succeeded");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let e = err(&["simulate", "--speed", "2"]);
    assert!(e.contains("--dashboard"), "{e}");
    let e = err(&["simulate", "--dashboard", "nowhere", "--duration", "1s"]);
    assert!(e.contains("--dashboard \"nowhere\" is not an address"), "{e}");
    let e = err(&["dashboard", "--speed", "0"]);
    assert!(e.contains("--speed must be a number in (0, 1e6], got 0"), "{e}");
    let e = err(&["dashboard", "--migrate-every", "soon"]);
    assert!(e.contains("--migrate-every"), "{e}");
    let e = err(&["dashboard", "--synthetic", "0"]);
    assert!(e.contains("--synthetic must be in 1..=1048576"), "{e}");
    // An address that is taken.
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let a = held.local_addr().unwrap().to_string();
    let e = err(&["dashboard", "--addr", &a, "--nodes", "2", "--duration", "1s"]);
    assert!(e.contains(&format!("cannot listen on {a}")), "{e}");
}
