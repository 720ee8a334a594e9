//! `worldmesh assign` end to end: a good run (paper 002 Fig. 1) and each bad input.

use std::path::PathBuf;
use std::process::{Command, Output};

use tempfile::TempDir;

/// A fresh folder `worldmesh-assign-cli-…` for one test's input files, removed when the
/// returned guard is dropped: hold it for the whole test (it goes also on a panic).
fn tmp() -> TempDir {
    tempfile::Builder::new()
        .prefix("worldmesh-assign-cli-")
        .tempdir()
        .expect("temp dir")
}

fn write(dir: &TempDir, name: &str, text: &str) -> PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, text).expect("write");
    p
}

fn assign(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_worldmesh"))
        .arg("assign")
        .args(args)
        .output()
        .expect("runs")
}

fn lines(o: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Paper 002 Fig. 1: a..e fill G, H, I (capacity 2) optimally; f's join moves b H → I.
const FIG1: &str = r#"# paper 002 Fig. 1 (mirrors G, H, I)
{"join": "a", "delays": [4, 5, 10]}
{"join": "c", "delays": [1, 8, 10]}
{"join": "d", "delays": [1, 8, 10]}
{"join": "e", "delays": [2, 4, 10]}
{"join": "b", "delays": [4, 5, 10]}

{"join": "f", "delays": [2, 4, 10]}
{"leave": "f"}
"#;

#[test]
fn good_run_reports_moves_and_totals() {
    let dir = tmp();
    let ev = write(&dir, "fig1.jsonl", FIG1);
    let o = assign(&["--capacities", "2,2,2", "--events", ev.to_str().expect("utf8")]);
    assert!(o.status.success(), "{}", stderr(&o));
    let l = lines(&o);
    assert_eq!(l.len(), 8, "7 events + end");
    assert_eq!(l[4]["line"], 6);
    assert_eq!(l[4]["stats"]["total_us"], 21_000);
    assert_eq!(l[4]["stats"]["mean_ms"], 4.2);
    assert_eq!(l[4]["stats"]["max_ms"], 10.0);
    // f joins (line 8): f takes H, one of the equal players a/b on H moves to I.
    assert_eq!(l[5]["line"], 8);
    assert_eq!(l[5]["player"], "f");
    assert_eq!(l[5]["mirror"], 1);
    let moved = l[5]["moved"].as_array().expect("array");
    assert_eq!(moved.len(), 1);
    assert_eq!(
        (moved[0]["from"].as_u64(), moved[0]["to"].as_u64()),
        (Some(1), Some(2))
    );
    assert_eq!(l[5]["stats"]["total_us"], 30_000);
    assert_eq!(l[6]["event"], "leave");
    assert_eq!(l[6]["stats"]["total_us"], 21_000);
    assert_eq!(l[7]["event"], "end");
    assert_eq!(l[7]["assignment"].as_object().expect("map").len(), 5);
    assert!(l[5].get("assignment").is_none());

    // greedy on the same input: f cannot be placed on G or H, goes to I (10), nobody moves
    let o = assign(&[
        "--capacities",
        "2,2,2",
        "--events",
        ev.to_str().expect("utf8"),
        "--algorithm",
        "greedy",
        "--full",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let l = lines(&o);
    assert_eq!(l[5]["mirror"], 2);
    assert_eq!(l[5]["moved"].as_array().map(Vec::len), Some(0));
    assert_eq!(l[5]["assignment"]["f"], 2);
}

#[test]
fn stdin_and_resource_model_capacities() {
    use std::io::Write;
    // capacity = min(alpha/b, (beta - n·Ls)/Lc) = min(10/5, (100 - 10·1)/30) = min(2, 3) = 2
    let mut child = Command::new(env!("CARGO_BIN_EXE_worldmesh"))
        .args([
            "assign",
            "--resources",
            "10:100,10:100,10:100",
            "--demand",
            "5:1:30",
            "--design-players",
            "10",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(FIG1.as_bytes())
        .expect("write");
    let o = child.wait_with_output().expect("wait");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        lines(&o)[5]["stats"]["total_us"],
        30_000,
        "same as capacities 2,2,2"
    );
}

#[test]
fn node_joins_use_the_matrix() {
    let dir = tmp();
    let m = write(&dir, "m.txt", "0 10 20\n10 0 5\n20 5 0\n");
    let ev = write(
        &dir,
        "nodes.jsonl",
        "{\"join\": 1, \"node\": 2}\n{\"join\": 2, \"node\": 0}\n",
    );
    let o = assign(&[
        "--capacities",
        "1,1",
        "--matrix",
        m.to_str().expect("utf8"),
        "--mirrors",
        "0,1",
        "--events",
        ev.to_str().expect("utf8"),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let l = lines(&o);
    // node 2: 20 ms to mirror 0, 5 ms to mirror 1
    assert_eq!(l[0]["mirror"], 1);
    assert_eq!(l[1]["mirror"], 0);
    assert_eq!(l[1]["stats"]["total_us"], 5_000);
}

fn fails(events: &str, caps: &str, expect: &[&str]) {
    let dir = tmp();
    let ev = write(
        &dir,
        &format!("bad-{}.jsonl", expect[0].replace(' ', "_")),
        events,
    );
    let o = assign(&["--capacities", caps, "--events", ev.to_str().expect("utf8")]);
    assert_eq!(o.status.code(), Some(1), "should fail: {events}");
    let e = stderr(&o);
    for x in expect {
        assert!(e.contains(x), "stderr {e:?} lacks {x:?}");
    }
    assert!(!e.contains("panicked"), "{e}");
}

#[test]
fn bad_inputs_fail_with_line_numbers() {
    let j = r#"{"join": "a", "delays": [1, 2]}"#;
    fails(
        &format!("{j}\n{j}\n"),
        "1,1",
        &["line 2", "duplicate join", "`a`"],
    );
    fails(
        &format!("{j}\n{{\"leave\": \"zz\"}}\n"),
        "1,1",
        &["line 2", "unknown player `zz`"],
    );
    fails(
        &format!("{j}\n{{\"leave\": \"a\"}}\n{{\"leave\": \"a\"}}\n"),
        "1,1",
        &["line 3", "already left"],
    );
    fails(
        &format!("{j}\n{}\n", r#"{"join": "b", "delays": [1, 2]}"#),
        "1,0",
        &["line 2", "all mirrors are full", "`b`"],
    );
    fails(
        &format!("\n\n{j}\n{{\"join\": \"b\", \n"),
        "1,1",
        &["line 4", "malformed", "not JSON"],
    );
    fails(
        r#"{"join": "b", "delays": [1, 2, 3]}"#,
        "1,1",
        &["line 1", "3 delays but there are 2 mirrors"],
    );
    fails(
        r#"{"join": "b", "delays": [1, -2]}"#,
        "1,1",
        &["line 1", "delay -2"],
    );
    fails(r#"{"hop": "b"}"#, "1,1", &["line 1", "`join` or `leave`"]);
    fails(
        r#"{"join": "b", "node": 4}"#,
        "1,1",
        &["line 1", "no latency matrix"],
    );
}

#[test]
fn bad_flags_are_refused() {
    let dir = tmp();
    let ev = write(&dir, "ok.jsonl", "");
    let p = ev.to_str().expect("utf8");
    let o = assign(&["--capacities", "1,1", "--events", p, "--algorithm", "best"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("best"));
    let o = assign(&["--events", p]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--capacities"));
    let o = assign(&["--capacities", "1", "--events", "/nonexistent/x.jsonl"]);
    assert!(stderr(&o).contains("cannot open /nonexistent/x.jsonl"));
    // The move index is m x m: 20,000 mirrors would need ~18 GB, refused before allocating.
    let caps = vec!["1"; 20_000].join(",");
    let o = assign(&["--capacities", &caps, "--events", p]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("20000 mirrors is more than the 1024 supported"),
        "{}",
        stderr(&o)
    );
    let o = assign(&["--resources", "10:1", "--demand", "1:x:1", "--events", p]);
    assert!(stderr(&o).contains("`x` is not a number"), "{}", stderr(&o));
}
