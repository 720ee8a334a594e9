//! Players on a real node process: `worldmesh token`, a node's player port, `worldmesh
//! bots` (real QUIC clients with connect tokens). Asserts on what the processes report.

mod common;
mod procs;

use std::path::Path;
use std::time::Duration;

use common::{run_ok, worldmesh};
use procs::{Nodes, heavy};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(30);

fn s<T: ToString>(v: T) -> String {
    v.to_string()
}

fn bots(n: &Nodes, server: &str, key: &Path, clients: u32, duration: &str) -> Value {
    let out = run_ok(worldmesh().args([
        "bots",
        "--clients",
        &s(clients),
        "--server",
        server,
        "--node",
        "0",
        "--ca",
        &n.ca_cert().display().to_string(),
        "--player-key",
        &key.display().to_string(),
        "--duration",
        duration,
        "--ramp",
        "200ms",
        "--json",
    ]));
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("WORLDMESH-BOTS "))
        .unwrap_or_else(|| panic!("no report line in {out}"));
    serde_json::from_str(line).unwrap()
}

#[test]
fn bots_play_through_a_real_node_and_forged_tokens_are_refused() {
    let _g = heavy();
    let mut n = Nodes::new("players", 1);
    let key = n.dir.join("client.key");
    let other = n.dir.join("other.key");
    for k in [&key, &other] {
        run_ok(worldmesh().args(["token", "init", "--out", &k.display().to_string()]));
    }
    n.spawn(
        0,
        &[
            s("--founders"),
            s(1),
            s("--wait-start"),
            s("--frame-hz"),
            s(20),
            s("--player-listen"),
            s("127.0.0.1:0"),
            s("--player-key"),
            key.display().to_string(),
        ],
    );
    n.ready(0, WAIT);
    let ready = n.wait_for("ready line", WAIT, |r| {
        r.node == 0 && r.kind == procs::Kind::Ready
    });
    let server = ready.json["players"]
        .as_str()
        .expect("the ready line names the player port")
        .to_string();
    n.release(&[0]);
    n.started(0, WAIT);

    let r = bots(&n, &server, &key, 20, "3s");
    assert_eq!(r["connected"], 20, "{r}");
    assert_eq!(r["refused"], serde_json::json!({}), "{r}");
    let inputs = r["inputs"].as_u64().unwrap();
    let confirmed = r["inputs_confirmed"].as_u64().unwrap();
    // 20 clients x ~3 s x 20 Hz; only the inputs still in flight when a client leaves may
    // go unconfirmed (a round trip and a frame: a few per client).
    assert!(inputs >= 20 * 40, "{r}");
    assert!(
        inputs - confirmed <= 20 * 5,
        "{inputs} sent, {confirmed} confirmed: {r}"
    );
    assert!(r["latency_p99_ms"].as_f64().unwrap().is_finite(), "{r}");
    assert!(
        r["views_per_client_s"].as_f64().unwrap() > 10.0,
        "a view per frame: {r}"
    );

    // Tokens signed with another key: every client refused, with the reason.
    let f = bots(&n, &server, &other, 3, "1s");
    assert_eq!(f["connected"], 0, "{f}");
    assert_eq!(f["refused"], serde_json::json!({"Forged": 3}), "{f}");

    // One native client with a token from `worldmesh token issue`; the same token again is a
    // replay.
    let token = run_ok(worldmesh().args([
        "token",
        "issue",
        "--key",
        &key.display().to_string(),
        "--player",
        "7",
        "--nodes",
        "0",
    ]));
    let play = |token: &str| {
        worldmesh()
            .args(["play", "--server", &server, "--node", "0", "--ca"])
            .arg(n.ca_cert())
            .args(["--token", token.trim(), "--duration", "2s"])
            .output()
            .unwrap()
    };
    let o = play(&token);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(stdout.contains("connected to node 0 as player 7"), "{stdout}");
    assert!(stdout.contains("inputs applied up to #"), "{stdout}");
    let o = play(&token);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("refused the token: Replayed"),
        "{err}"
    );

    n.stop(&[0]);
    let summary = n.summary(0, WAIT);
    let p = &summary["players"]["sessions"];
    assert_eq!(p["connected"], 21, "{p}");
    assert_eq!(
        p["refused"],
        serde_json::json!({"Forged": 3, "Replayed": 1}),
        "{p}"
    );
    assert_eq!(p["disconnected"]["ClientLeft"], 21, "{p}");
    // Every input a bot saw confirmed was applied on the node, once (plus the native
    // client's, 20 a second for 2 s).
    let applied = p["inputs_applied"].as_u64().unwrap();
    assert!(
        applied >= confirmed && applied <= inputs + 45,
        "{applied} applied, {confirmed}..{inputs} (+ the native client's)"
    );
}

#[test]
fn token_and_player_flags_fail_with_clear_errors() {
    let dir = common::tmp("token");
    let key = dir.path().join("k.key");
    run_ok(worldmesh().args(["token", "init", "--out", &key.display().to_string()]));
    let o = worldmesh()
        .args(["token", "init", "--out", &key.display().to_string()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("exists: give --force"),
        "{err}"
    );
    let tok = run_ok(worldmesh().args([
        "token",
        "issue",
        "--key",
        &key.display().to_string(),
        "--player",
        "5",
        "--nodes",
        "0,1",
    ]));
    assert_eq!(tok.trim().len(), 2 * (34 + 8 + 32), "{tok}");
    let bad = dir.path().join("bad.key");
    std::fs::write(&bad, "not a key\n").unwrap();
    for (args, want) in [
        (
            vec![
                "token",
                "issue",
                "--key",
                bad.to_str().unwrap(),
                "--player",
                "1",
                "--nodes",
                "0",
            ],
            "expected 64 hex digits",
        ),
        (
            vec![
                "token",
                "issue",
                "--key",
                key.to_str().unwrap(),
                "--player",
                "1",
                "--nodes",
                "0",
                "--ttl",
                "48h",
            ],
            "--ttl must be in (0, 24h]",
        ),
        (
            vec![
                "node",
                "--id",
                "0",
                "--listen",
                "127.0.0.1:0",
                "--player-listen",
                "127.0.0.1:0",
            ],
            "--player-key",
        ),
    ] {
        let o = worldmesh().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn one_command_runs_a_cluster_with_bot_clients_and_prints_per_client_figures() {
    let _g = heavy();
    let out = run_ok(worldmesh().args(["cluster", "--nodes", "2", "--duration", "4s", "--clients", "10"]));
    assert!(
        out.contains("run validity (nodes overlapped and saw every member)"),
        "{out}"
    );
    assert!(
        out.contains("players: sessions opened / inputs applied / view datagrams sent")
            && out.contains("10 / "),
        "{out}"
    );
    assert!(
        out.contains("players: sessions ended, by reason                                     ClientLeft=10"),
        "{out}"
    );
    for node in 0..2 {
        let block = out
            .split("worldmesh bots: 5 clients on node ")
            .find(|b| b.starts_with(&format!("{node} ")))
            .unwrap_or_else(|| panic!("no bots block for node {node}: {out}"));
        assert!(block.contains("connected            5"), "{block}");
        assert!(block.contains("input -> visible     p50 "), "{block}");
    }
}

/// The assignment in the running world, a 200-client churn run on real processes: 3
/// nodes of capacity 80, clients that come and go over the run (joins and leaves
/// interleave) with emulated PlanetLab delays. The coordinator places every join (J-SA)
/// and leave (L-SA), its total equals a from-scratch min-cost solve after every event, and
/// the players it moves are handed over (avatar migrated, client reconnected).
#[test]
fn the_cluster_assigns_players_optimally_and_hands_them_over() {
    let _g = heavy();
    let out = run_ok(worldmesh().args([
        "cluster",
        "--nodes",
        "3",
        "--duration",
        "10s",
        "--clients",
        "200",
        "--assign",
        "--node-capacity",
        "80",
        "--client-latency",
        "planetlab",
        "--churn",
    ]));
    let line = |key: &str| -> String {
        out.lines()
            .find(|l| l.starts_with(key))
            .unwrap_or_else(|| panic!("no `{key}` line in {out}"))[key.len()..]
            .trim()
            .to_string()
    };
    let checks = line("assignment: optimality checks vs a from-scratch solve / mismatches");
    let (checks, mismatches) = checks.split_once(" / ").unwrap();
    assert_eq!(mismatches, "0", "{out}");
    let checks: u32 = checks.parse().unwrap();
    let moves =
        line("assignment: joins / leaves placed; moves ordered; hand-offs done / failed; player gone first");
    // "J / L; M; D / F; G"
    let parts: Vec<u32> = moves
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    let (joins, leaves, ordered, done, failed, gone) =
        (parts[0], parts[1], parts[2], parts[3], parts[4], parts[5]);
    assert_eq!(
        checks,
        joins + leaves,
        "a check after every join and leave: {out}"
    );
    // Most clients joined and left within the run (on a loaded machine a few start late
    // or are still playing when the nodes stop).
    assert!(joins >= 150 && leaves >= 100, "{out}");
    assert!(
        ordered > 0,
        "players entering round-robin are not all nearest their entry: {out}"
    );
    // No hand-off fails while every member stays up. Three debug-build nodes and 200 bot
    // clients on 2 cores overload the machine, and SWIM sometimes declares a live member
    // down (a false failure: seen in CI, `member ups / downs` 8 / 2, before leaves were told apart); a hand-off to or from
    // the member the others then consider gone fails by design (open: issue 13's note).
    // Such a run may fail at most one hand-off per member declared down.
    let downs: u32 = line("membership: members at end (min-max), ups / failures / leaves")
        .split('/')
        .nth(1)
        .and_then(|d| d.trim().parse().ok())
        .unwrap_or_else(|| panic!("no member downs in {out}"));
    assert!(
        failed <= downs,
        "{failed} hand-offs failed with {downs} members declared down: {out}"
    );
    // Every move is carried out, unless its player left first (clients come and go).
    assert!(done + gone >= ordered, "moves carried out: {out}");
}

/// The assignment's coordinator (the lowest live member) is killed mid-run: the next one
/// takes over in a new epoch, rebuilds the assignment from the nodes' reports and keeps
/// placing joins and leaves optimally (real processes, `kill -9`).
#[test]
fn a_new_coordinator_takes_over_when_the_first_one_dies() {
    let _g = heavy();
    let mut n = Nodes::new("coordinator", 3);
    let key = n.dir.join("client.key");
    run_ok(worldmesh().args(["token", "init", "--out", &key.display().to_string()]));
    let player_args = |extra: &[String]| {
        let mut a = vec![
            s("--founders"),
            s(3),
            s("--wait-start"),
            s("--player-listen"),
            s("127.0.0.1:0"),
            s("--player-key"),
            key.display().to_string(),
            s("--assign"),
        ];
        a.extend_from_slice(extra);
        a
    };
    n.spawn(0, &player_args(&[]));
    let a0 = n.ready(0, WAIT);
    for i in 1..3 {
        n.spawn(i, &player_args(&[s("--seeds"), s(a0)]));
    }
    let mut ports = Vec::new();
    for i in 0..3u32 {
        n.ready(i, WAIT);
        let r = n.wait_for("ready", WAIT, |r| r.node == i && r.kind == procs::Kind::Ready);
        ports.push(r.json["players"].as_str().unwrap().to_string());
    }
    n.release(&[0, 1, 2]);
    for i in 0..3 {
        n.started(i, WAIT);
    }
    // Clients enter through node 1 and know nodes 1 and 2 only (node 0 is never nearest).
    let bots = std::process::Command::new(env!("CARGO_BIN_EXE_worldmesh"))
        .args([
            "bots",
            "--clients",
            "40",
            "--server",
            &ports[1],
            "--node",
            "1",
            "--ca",
        ])
        .arg(n.ca_cert())
        .arg("--player-key")
        .arg(&key)
        .args([
            "--duration",
            "8s",
            "--churn",
            "--directory",
            &format!("2={}", ports[2]),
            "--json",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    n.kill9(0);
    let out = bots.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&out.stdout);
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("WORLDMESH-BOTS "))
        .unwrap_or_else(|| panic!("{out}"));
    let r: Value = serde_json::from_str(line).unwrap();
    assert_eq!(r["connected"], 40, "{r}");
    n.stop(&[1, 2]);
    let s1 = n.summary(1, WAIT);
    let a = &s1["players"]["assignment"];
    // Node 1 coordinated nothing while node 0 lived: every join and leave it placed came
    // after it took over (a new epoch), each checked against a from-scratch solve.
    assert!(a["epochs"].as_u64().unwrap() >= 2, "{a}");
    assert!(a["joins"].as_u64().unwrap() >= 10, "{a}");
    assert_eq!(a["mismatches"], 0, "{a}");
    assert_eq!(
        a["checks"].as_u64().unwrap(),
        a["joins"].as_u64().unwrap() + a["leaves"].as_u64().unwrap(),
        "{a}"
    );
}
