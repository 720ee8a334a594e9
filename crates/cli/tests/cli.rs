//! The `worldmesh` binary, run as a user would.

mod common;

use common::{run_ok, tmp, worldmesh};
use std::path::PathBuf;

fn json(path: PathBuf) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Runs `worldmesh cluster --nodes 3 ARGS --out DIR`; returns its standard output and the
/// three nodes' reports from `report.json`.
fn cluster_of_three(name: &str, args: &[&str]) -> (String, Vec<serde_json::Value>) {
    let out = tmp(name);
    let stdout = run_ok(
        worldmesh()
            .args(["cluster", "--nodes", "3"])
            .args(args)
            .arg("--out")
            .arg(out.path()),
    );
    let r = json(out.path().join("report.json"));
    let nodes = r["nodes"].as_array().unwrap().clone();
    assert_eq!(nodes.len(), 3);
    (stdout, nodes)
}

#[test]
fn cluster_of_three_real_processes_exchanges_state() {
    let (stdout, nodes) = cluster_of_three(
        "cluster",
        &[
            "--duration",
            "2s",
            "--players-per-node",
            "5",
            "--loss",
            "0.05",
            "--latency",
            "uniform:20",
        ],
    );
    assert!(stdout.contains("3 real node processes"), "{stdout}");
    for n in nodes {
        // 5 players each plus the map's items (spread round-robin) and live missiles.
        assert!(n["primaries"].as_u64().unwrap() >= 5, "{n}");
        assert!(
            n["replicas"].as_u64().unwrap() >= 10,
            "every node holds the other nodes' players: {n}"
        );
        // 10 ms one way + ≤ 1 frame + a few lost frames, far below the 2 s replica TTL.
        assert!(n["staleness_max_ms"].as_f64().unwrap() < 1000.0, "{n}");
        assert!(n["received"][0]["packets"].as_u64().unwrap() > 0);
    }
}

/// Over emulated round trips of 200 ms, longer than the `lan` membership profile waits for
/// a probe's answer (80 ms), the nodes choose the `wan` profile by themselves: no live
/// member is declared down and nothing is adopted from one. (With `lan` a 4-node, 10-s
/// run declared 30 members down and adopted 202 objects from live nodes.)
#[test]
fn cluster_over_long_round_trips_runs_wan_membership_without_false_failures() {
    let (_, nodes) = cluster_of_three(
        "cluster-wan",
        &[
            "--duration",
            "5s",
            "--players-per-node",
            "3",
            "--latency",
            "uniform:200",
        ],
    );
    for n in nodes {
        assert_eq!(
            n["membership_profile"], "wan (none named; emulated round trips up to 200 ms)",
            "{n}"
        );
        let c = &n["cluster"];
        assert_eq!(c["members_down"], 0, "a live member declared down: {c}");
        assert_eq!(c["adoption"]["adopted"], 0, "{c}");
        assert_eq!(c["members"], 3, "{c}");
    }
}

/// Real processes running the distributed locator inside each node: discovery traffic
/// flows (routing, match delivery, overlay upkeep, in `MessageClass::ALL` order 1–3; a
/// broadcast cluster sends none) and every node ends up holding replicas.
#[test]
fn cluster_with_the_dht_locator_discovers_and_replicates() {
    let (stdout, nodes) = cluster_of_three(
        "cluster-dht",
        &[
            "--duration",
            "3s",
            "--players-per-node",
            "5",
            "--latency",
            "uniform:20",
            "--locator",
            "dht",
        ],
    );
    assert!(stdout.contains("dht locator"), "{stdout}");
    let mut matches = 0;
    for n in nodes {
        assert!(n["sent"][1]["packets"].as_u64().unwrap() > 0, "routes: {n}");
        assert!(
            n["sent"][3]["packets"].as_u64().unwrap() > 0,
            "keeps the ring: {n}"
        );
        matches += n["sent"][2]["packets"].as_u64().unwrap();
        assert!(n["replica"]["replicas_created"].as_u64().unwrap() > 0, "{n}");
        assert!(n["replicas"].as_u64().unwrap() > 0, "{n}");
    }
    assert!(matches > 0, "rendezvous points delivered matches");
}

#[test]
fn simulate_writes_a_report_and_is_deterministic() {
    let out = tmp("sim");
    let run = |dir: &PathBuf| {
        let o = worldmesh()
            .args([
                "simulate",
                "--quiet",
                "--nodes",
                "6",
                "--players-per-node",
                "3",
                "--duration",
                "2s",
                "--seed",
                "9",
                "--loss",
                "0.1",
                "--out",
            ])
            .arg(dir)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let mut r = json(dir.join("report.json"));
        r.as_object_mut().unwrap().remove("wall_seconds");
        (String::from_utf8_lossy(&o.stdout).into_owned(), r)
    };
    let (stdout, a) = run(&out.path().join("a"));
    let (_, b) = run(&out.path().join("b"));
    assert!(
        stdout.contains("per-node outbound kbps, p95 of 1-s bursts"),
        "{stdout}"
    );
    assert!(stdout.contains("object_update"), "{stdout}");
    assert_eq!(a, b);
    assert_eq!(a["config"]["nodes"], 6);
    assert!(a["network"]["lost"].as_u64().unwrap() > 0);
}

/// `--threads`: the dht run, and the oracle with a delivery delay, say they ran in rounds
/// on two threads and write the report of one thread; the oracle without a delay (the
/// default) says it used one of the two asked.
#[test]
fn simulate_threads_runs_rounds_where_it_can_and_says_so() {
    let out = tmp("sim-threads");
    let delayed = out.path().join("delayed.toml");
    std::fs::write(&delayed, "[locator]\ndelay_ms = 12.5\n").unwrap();
    let run = |locator: &str, threads: &str| {
        let (kind, config) = match locator {
            "oracle-delayed" => ("oracle", Some(&delayed)),
            other => (other, None),
        };
        let dir = out.path().join(format!("{locator}-{threads}"));
        let mut cmd = worldmesh();
        cmd.args(["simulate", "--quiet", "--nodes", "8", "--players-per-node", "2"])
            .args(["--duration", "3s", "--loss", "0.05", "--locator", kind])
            .args(["--threads", threads, "--out"])
            .arg(&dir);
        if let Some(c) = config {
            cmd.arg("--config").arg(c);
        }
        let o = cmd.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let mut r = json(dir.join("report.json"));
        r.as_object_mut().unwrap().remove("wall_seconds");
        let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
        let row = stdout
            .lines()
            .find(|l| l.starts_with("threads "))
            .unwrap_or_default()
            .to_string();
        (row, r)
    };
    let (row1, one) = run("dht", "1");
    let (row2, two) = run("dht", "2");
    assert!(row1.trim_end().ends_with(" 1"), "{row1}");
    assert!(
        row2.contains(" 2 (") && row2.contains("rounds") && row2.contains("window"),
        "{row2}"
    );
    assert_eq!(one, two, "the report does not depend on the threads");
    let (row, _) = run("oracle", "2");
    assert!(
        row.contains("1 (2 asked") && row.contains("without a delay"),
        "{row}"
    );
    let (_, one) = run("oracle-delayed", "1");
    let (row2, two) = run("oracle-delayed", "2");
    assert!(
        row2.contains(" 2 (") && row2.contains("at most the oracle's delay, 12.5 ms"),
        "{row2}"
    );
    let rounds: u64 = row2
        .split(" 2 (")
        .nth(1)
        .and_then(|r| r.split(" rounds").next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(rounds > 0, "the delayed oracle ran in rounds: {row2}");
    assert_eq!(one, two, "the oracle's report does not depend on the threads");
}

#[test]
fn bad_inputs_fail_with_clear_errors() {
    let dir = tmp("bad");
    let toml = dir.path().join("bad.toml");
    std::fs::write(&toml, "nodes = 4\nbots_per_nod = 2\n").unwrap();
    let o = worldmesh()
        .args(["simulate", "--quiet", "--config"])
        .arg(&toml)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("bad.toml") && err.contains("line 2") && err.contains("bots_per_nod"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");

    let lat = dir.path().join("lat.txt");
    std::fs::write(&lat, "0 1 2\n1 0 x\n2 1 0\n").unwrap();
    let o = worldmesh()
        .args(["simulate", "--quiet", "--duration", "1s", "--latency"])
        .arg(&lat)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("lat.txt:2:3: `x` is not a number"), "{err}");

    // Finite but huge: used to panic (exit 101) when the delay overflowed a Duration.
    std::fs::write(&lat, "0 1e23\n1e23 0\n").unwrap();
    let o = worldmesh()
        .args(["simulate", "--quiet", "--duration", "1s", "--latency"])
        .arg(&lat)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("lat.txt:1:2: round-trip time 1e23 is above the 60000 ms accepted"),
        "{err}"
    );

    // All zeros: relative coordinate error is undefined (used to print NaN and exit 0).
    let zeros = dir.path().join("zeros.txt");
    std::fs::write(&zeros, "0 0 0 0 0 0 0 0 0 0\n".repeat(10)).unwrap();
    let o = worldmesh()
        .args(["experiment", "vivaldi", "--quick", "--latency"])
        .arg(&zeros)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("only 0 of 90 host pairs have a positive round-trip time"),
        "{err}"
    );

    let o = worldmesh()
        .args(["simulate", "--quiet", "--loss", "1.5"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("network.loss must be a probability"),
        "{err}"
    );

    for (flag, want) in [
        (
            "--interest-lead=-5",
            "locator.interest_lead_ms must be in [0, 10000], got -5",
        ),
        (
            "--pub-time=20000",
            "locator.pub_time_ms must be in [0, 10000], got 20000",
        ),
    ] {
        let o = worldmesh().args(["simulate", "--quiet", flag]).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(want), "{flag}: {err}");
    }

    for cmd in ["simulate", "cluster", "node"] {
        let o = worldmesh()
            .args([cmd, "--locator", "rangedht", "--range-key", "z"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success()
                && err.contains("invalid value 'z' for '--range-key")
                && err.contains("[possible values: x, y, hilbert]"),
            "{cmd}: {err}"
        );
    }

    for runs in ["0", "21", "x"] {
        let o = worldmesh()
            .args(["experiment", "sim-speed", "--quick", "--timing-runs", runs])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && err.contains(&format!("invalid value '{runs}' for '--timing-runs")),
            "--timing-runs {runs}: {err}"
        );
    }

    for cmd in ["cluster", "node"] {
        let o = worldmesh().args([cmd, "--locator", "chord"]).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && err.contains("invalid value 'chord'") && err.contains("rangedht"),
            "{cmd}: {err}"
        );
    }

    let o = worldmesh()
        .args(["simulate", "--duration", "soon"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("not a duration"), "{err}");

    for (n, want) in [
        ("0", "0 is not in 1..=256"),
        ("300", "300 is not in 1..=256"),
        ("two", "invalid digit"),
    ] {
        let o = worldmesh().args(["simulate", "--threads", n]).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success()
                && err.contains("invalid value")
                && err.contains("--threads")
                && err.contains(want),
            "--threads {n}: {err}"
        );
    }

    let o = worldmesh()
        .args([
            "node",
            "--id",
            "3",
            "--listen",
            "127.0.0.1:0",
            "--founders",
            "2",
            "--transport",
            "udp-insecure",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("node 3 is not a founder") && err.contains("--join"),
        "{err}"
    );
}

#[test]
fn help_explains_every_command() {
    let o = worldmesh().arg("--help").output().unwrap();
    let s = String::from_utf8_lossy(&o.stdout);
    for cmd in ["simulate", "cluster", "node", "experiment"] {
        assert!(s.contains(cmd), "{s}");
    }
    let o = worldmesh().args(["simulate", "--help"]).output().unwrap();
    let s = String::from_utf8_lossy(&o.stdout);
    for flag in [
        "--config",
        "--nodes",
        "--players-per-node",
        "--duration",
        "--seed",
        "--latency",
        "--loss",
        "--out",
    ] {
        assert!(s.contains(flag), "{flag} missing from simulate --help");
    }
}

/// `worldmesh swarm`: seeds run with their outcome as JSON, and a bad seed count is refused
/// with what was wrong.
#[test]
fn swarm_runs_seeds_and_refuses_a_bad_count() {
    let stdout = run_ok(worldmesh().args(["swarm", "--seeds", "2", "--from", "5", "--json"]));
    let seeds: Vec<serde_json::Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(seeds.len(), 2);
    for (v, seed) in seeds.iter().zip([5, 6]) {
        assert_eq!(v["setup"]["seed"], seed);
        assert!(v["violation"].is_null(), "{v}");
        assert!(v["checks"].as_u64().unwrap() > 1000, "{v}");
    }
    let o = worldmesh().args(["swarm", "--seeds", "0"]).output().unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--seeds must be in 1..=10000000, got 0"), "{err}");
}
