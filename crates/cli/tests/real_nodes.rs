//! Real `worldmesh node` processes over QUIC with mutual TLS: joining a running world,
//! `kill -9`, drain on SIGTERM, restart with the same id, and what a node refuses to start
//! with. Each test starts its own processes on loopback (serialized: the machine has two
//! cores) and asserts on what the processes report, never on timing.

mod procs;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use procs::{Kind, Nodes, heavy, ids, percentile, primary_counts};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(30);

fn s<T: ToString>(v: T) -> String {
    v.to_string()
}

/// Starts founders `0..count` (node 0 first, the others seeded with its address) behind a
/// start barrier, releases them together, and returns node 0's address. They run until
/// [`Nodes::stop`].
fn start_founders(n: &mut Nodes, count: u32, extra: &[String]) -> SocketAddr {
    start_founders_with(n, count, extra, |_| Vec::new())
}

/// [`start_founders`] with extra arguments for some nodes.
fn start_founders_with(
    n: &mut Nodes,
    count: u32,
    extra: &[String],
    per_node: impl Fn(u32) -> Vec<String>,
) -> SocketAddr {
    let mut args = vec![s("--founders"), s(count), s("--wait-start")];
    args.extend_from_slice(extra);
    let mut first = args.clone();
    first.extend(per_node(0));
    n.spawn(0, &first);
    let a0 = n.ready(0, WAIT);
    for i in 1..count {
        let mut seeded = args.clone();
        seeded.extend([s("--seeds"), s(a0)]);
        seeded.extend(per_node(i));
        n.spawn(i, &seeded);
    }
    for i in 1..count {
        n.ready(i, WAIT);
    }
    let all: Vec<u32> = (0..count).collect();
    n.release(&all);
    for i in 0..count {
        n.started(i, WAIT);
    }
    a0
}

fn started_ids(n: &Nodes, node: u32, incarnation: u32) -> Vec<String> {
    let r = n
        .records
        .iter()
        .find(|r| r.node == node && r.incarnation == incarnation && r.kind == Kind::Started)
        .expect("started line");
    ids(&r.json["primaries"])
}

/// A node started with `--join` into a running broadcast world spawns nothing and ends up
/// holding a replica of every founder's object.
#[test]
fn a_joiner_receives_replicas_of_a_running_broadcast_world() {
    let _g = heavy();
    let mut n = Nodes::new("join-bcast", 4);
    let world = [s("--players"), s(3)];
    let a0 = start_founders(&mut n, 3, &world);
    std::thread::sleep(Duration::from_secs(2));
    let mut args = world.to_vec();
    args.extend([s("--founders"), s(3), s("--join"), s(a0)]);
    n.spawn(3, &args);
    n.ready(3, WAIT);
    std::thread::sleep(Duration::from_secs(4));
    n.stop(&[0, 1, 2, 3]);
    let joiner = n.summary(3, WAIT);
    let founders: Vec<Value> = (0..3).map(|i| n.summary(i, WAIT)).collect();
    assert!(
        ids(&joiner["primary_ids"]).is_empty(),
        "a joiner spawns nothing: {joiner}"
    );
    assert_eq!(joiner["members"].as_array().unwrap().len(), 3, "{joiner}");
    // Every long-lived founder object (players and items) is replicated at the joiner.
    let initial: usize = (0..3).map(|i| started_ids(&n, i, 0).len()).sum();
    assert!(initial >= 9, "3 founders x 3 players at least: {initial}");
    assert!(
        joiner["replicas"].as_u64().unwrap() as usize >= initial,
        "joiner holds {} replicas of {initial} founder objects",
        joiner["replicas"]
    );
    for f in &founders {
        let members: Vec<u64> = f["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m.as_u64().unwrap())
            .collect();
        assert!(members.contains(&3), "founder sees the joiner: {members:?}");
        assert!(
            f["cluster"]["members_up"].as_u64().unwrap() >= 3,
            "{}",
            f["cluster"]
        );
    }
}

/// With the distributed range-DHT locator, a joiner takes a range of the ring: it routes,
/// keeps the overlay and delivers matches as a rendezvous point.
#[test]
fn a_joiner_takes_part_in_the_rangedht_locator() {
    let _g = heavy();
    let mut n = Nodes::new("join-dht", 4);
    let world = [s("--players"), s(4), s("--locator"), s("rangedht")];
    let a0 = start_founders(&mut n, 3, &world);
    std::thread::sleep(Duration::from_secs(1));
    let mut args = world.to_vec();
    args.extend([s("--founders"), s(3), s("--join"), s(a0)]);
    n.spawn(3, &args);
    n.ready(3, WAIT);
    std::thread::sleep(Duration::from_secs(8));
    n.stop(&[0, 1, 2, 3]);
    let joiner = n.summary(3, WAIT);
    for i in 0..3 {
        n.summary(i, WAIT);
    }
    // sent[k]: k = MessageClass: 1 routing, 2 match delivery, 3 overlay upkeep.
    let sent = |k: usize| joiner["sent"][k]["packets"].as_u64().unwrap();
    let received = |k: usize| joiner["received"][k]["packets"].as_u64().unwrap();
    assert!(sent(3) > 0 && received(3) > 0, "overlay upkeep: {joiner}");
    assert!(
        received(1) > 0,
        "routed lookups and publications reach it: {joiner}"
    );
    assert!(sent(2) > 0, "it delivers matches as a rendezvous point: {joiner}");
    assert_eq!(
        joiner["rejections"]["not_member"].as_u64().unwrap_or(0),
        0,
        "{joiner}"
    );
}

/// `kill -9` of 2 of 8 nodes: every object they held has exactly one primary again among
/// the survivors, none is duplicated; adoption times (from the survivors' `adopted`
/// events, wall clock, minus the kill) are printed.
#[test]
fn kill_9_of_two_of_eight_rehomes_every_object_exactly_once() {
    let _g = heavy();
    let mut n = Nodes::new("kill9", 8);
    start_founders(&mut n, 8, &[s("--players"), s(3)]);
    std::thread::sleep(Duration::from_secs(4));
    let killed = [6u32, 7];
    let kill_ms: Vec<u64> = killed.iter().map(|k| n.kill9(*k)).collect();
    let kill_ms = kill_ms[0];
    std::thread::sleep(Duration::from_secs(6));
    n.stop(&[0, 1, 2, 3, 4, 5]);
    let reports: Vec<Value> = (0..6).map(|i| n.summary(i, WAIT)).collect();
    let refs: Vec<&Value> = reports.iter().collect();
    let counts = primary_counts(refs.iter().copied());
    let dups: Vec<_> = counts.iter().filter(|(_, c)| **c > 1).collect();
    assert!(dups.is_empty(), "objects with two primaries: {dups:?}");
    let mut orphans = Vec::new();
    for k in killed {
        orphans.extend(started_ids(&n, k, 0));
    }
    assert!(orphans.len() >= 6, "{orphans:?}");
    let missing: Vec<_> = orphans.iter().filter(|id| !counts.contains_key(*id)).collect();
    assert!(
        missing.is_empty(),
        "orphans without a primary at the end: {missing:?}"
    );
    // Adoption times.
    let mut first: BTreeMap<String, u64> = BTreeMap::new();
    for r in n.events() {
        if r.json["event"] == "adopted" {
            let id = format!("{}/{}", r.json["id"]["origin"], r.json["id"]["seq"]);
            let t = r.json["unix_ms"].as_u64().unwrap();
            first.entry(id).and_modify(|x| *x = (*x).min(t)).or_insert(t);
        }
    }
    let times: Vec<f64> = orphans
        .iter()
        .map(|id| {
            let t = first.get(id).unwrap_or_else(|| panic!("{id} was never adopted"));
            t.saturating_sub(kill_ms) as f64 / 1000.0
        })
        .collect();
    eprintln!(
        "kill -9 of 2/8: {} orphans re-homed; adoption time after the kill p50 {:.3} s, p99 {:.3} s, max {:.3} s",
        times.len(),
        percentile(&times, 50.0),
        percentile(&times, 99.0),
        percentile(&times, 100.0)
    );
    for r in &reports {
        assert_eq!(
            r["members"].as_array().unwrap().len(),
            5,
            "survivors see each other only: {}",
            r["members"]
        );
        assert!(
            r["cluster"]["members_down"].as_u64().unwrap() >= 2,
            "{}",
            r["cluster"]
        );
    }
    // The killed nodes sent no leave notice: their going is a failure everywhere.
    let killed_causes: Vec<String> = n
        .events()
        .filter(|r| {
            r.json["event"] == "member_down"
                && killed.contains(&(r.json["member"].as_u64().unwrap_or(99) as u32))
        })
        .map(|r| r.json["cause"].as_str().unwrap_or("none").to_owned())
        .collect();
    assert!(
        killed_causes.len() >= 12 && killed_causes.iter().all(|c| c == "failed"),
        "the kills as the survivors recorded them: {killed_causes:?}"
    );
}

/// SIGTERM drains a node: its primaries migrate to the others, it leaves and exits with
/// its report; no object is lost or duplicated.
#[test]
fn sigterm_drains_a_node_with_nothing_lost_or_duplicated() {
    let _g = heavy();
    let mut n = Nodes::new("drain", 4);
    start_founders(&mut n, 4, &[s("--players"), s(3)]);
    std::thread::sleep(Duration::from_secs(3));
    n.sigterm(1);
    let drained = n.summary(1, WAIT);
    std::thread::sleep(Duration::from_secs(2));
    n.stop(&[0, 2, 3]);
    assert_eq!(drained["stop"], "drained", "{drained}");
    assert_eq!(drained["left_behind"], 0, "{drained}");
    assert!(ids(&drained["primary_ids"]).is_empty(), "{drained}");
    assert!(
        drained["cluster"]["drained_regions"].as_u64().unwrap() >= 1,
        "{}",
        drained["cluster"]
    );
    let rest: Vec<Value> = [0, 2, 3].iter().map(|i| n.summary(*i, WAIT)).collect();
    let mut refs: Vec<&Value> = rest.iter().collect();
    refs.push(&drained);
    let counts = primary_counts(refs.iter().copied());
    let dups: Vec<_> = counts.iter().filter(|(_, c)| **c > 1).collect();
    assert!(dups.is_empty(), "objects with two primaries: {dups:?}");
    let mut initial = Vec::new();
    for i in 0..4 {
        initial.extend(started_ids(&n, i, 0));
    }
    let lost: Vec<_> = initial.iter().filter(|id| !counts.contains_key(*id)).collect();
    assert!(lost.is_empty(), "objects lost by the drain: {lost:?}");
    for r in &rest {
        let members: Vec<u64> = r["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m.as_u64().unwrap())
            .collect();
        assert!(!members.contains(&1), "the drained node left: {members:?}");
    }
    // Each of the others recorded node 1's departure as a leave, not a failure (its leave
    // notice travelled with the leave).
    for observer in [0, 2, 3] {
        let causes: Vec<String> = n
            .events()
            .filter(|r| r.node == observer && r.json["event"] == "member_down" && r.json["member"] == 1)
            .map(|r| r.json["cause"].as_str().unwrap_or("none").to_owned())
            .collect();
        assert_eq!(causes, ["left"], "node {observer}'s record of node 1 going");
    }
    eprintln!(
        "drain of 1/4: {} initial objects, 0 lost, 0 duplicated, {} regions migrated",
        initial.len(),
        drained["cluster"]["drained_regions"]
    );
}

/// A node stalled (SIGSTOP) past the suspicion timeout is declared failed and its objects
/// adopted. When it resumes, the others' transports refuse its generation; the refusal
/// tells it the cluster holds it down, so it renews its generation and rejoins, instead of
/// declaring every member failed and adopting their objects as a second world (seen by
/// hand before the fix: the stalled node adopted all 26 of the others' objects). In the
/// end every object the founders created has exactly one primary.
#[test]
fn a_stalled_node_declared_failed_rejoins_as_a_new_generation_not_a_second_world() {
    stalled_node_rejoins("stall", Duration::from_secs(6), false);
}

/// A longer stall: after resuming, the stalled node's own silence detector may declare the
/// others failed (and adopt their objects) before any refusal reaches it — 2 runs in 5
/// by hand before the fix, which then ran on as a second world. Both sides then hold the
/// other failed; the refusal carries the refuser's view and the smaller side (the lone
/// stalled node) yields, dropping what it adopted. Which path a run takes is up to timing
/// (it prints what node 2 adopted): in the runs since, the peers' close reached node 2
/// first every time, so this guards a long stall end to end, and the split path is
/// exercised by `netns.rs` and the membership unit tests.
#[test]
fn a_node_stalled_until_it_declares_the_others_failed_yields_when_it_resumes() {
    stalled_node_rejoins("longstall", Duration::from_secs(20), true);
}

/// Three founders; node 2 is stopped for `stall`, then resumed: it renews once and
/// rejoins, no one else renews, every object has one primary in the end. `may_adopt`: it
/// may adopt the others' objects after resuming (and must drop them when it yields).
fn stalled_node_rejoins(name: &str, stall: Duration, may_adopt: bool) {
    let _g = heavy();
    let mut n = Nodes::new(name, 3);
    start_founders(&mut n, 3, &[s("--players"), s(3)]);
    std::thread::sleep(Duration::from_secs(3));
    n.signal(2, "STOP");
    // `lan`: a failed probe, then 2 s of suspicion.
    std::thread::sleep(stall);
    n.signal(2, "CONT");
    std::thread::sleep(Duration::from_secs(8));
    n.stop(&[0, 1, 2]);
    let reports: Vec<Value> = (0..3).map(|i| n.summary(i, WAIT)).collect();
    let events = |node: u32, kind: &str| -> Vec<Value> {
        n.events()
            .filter(|r| r.node == node && r.json["event"] == kind)
            .map(|r| r.json.clone())
            .collect()
    };
    let downs: Vec<Value> = [0, 1].iter().flat_map(|o| events(*o, "member_down")).collect();
    assert!(
        downs.iter().any(|d| d["member"] == 2),
        "the stall was not long enough for a failure: {downs:?}"
    );
    let rejoined = events(2, "rejoined");
    assert_eq!(rejoined.len(), 1, "node 2 renews once: {rejoined:?}");
    let renewed = rejoined[0]["generation"].as_u64().unwrap();
    for o in [0u32, 1] {
        assert!(
            events(o, "member_up")
                .iter()
                .any(|u| u["member"] == 2 && u["generation"] == renewed),
            "node {o} never saw node 2's generation {renewed} up"
        );
    }
    // Nor did its return reset anyone else (a renewed node that held the others down could
    // tell them they are down in turn).
    for o in [0u32, 1] {
        assert!(
            events(o, "rejoined").is_empty(),
            "node {o} was reset by node 2's return"
        );
    }
    let adopted_by_2: Vec<Value> = events(2, "adopted");
    eprintln!(
        "{name}: node 2 adopted {} objects before it renewed",
        adopted_by_2.len()
    );
    assert!(
        may_adopt || adopted_by_2.is_empty(),
        "node 2 adopted the others' objects: {adopted_by_2:?}"
    );
    let refs: Vec<&Value> = reports.iter().collect();
    let counts = primary_counts(refs.iter().copied());
    let dups: Vec<_> = counts.iter().filter(|(_, c)| **c > 1).collect();
    assert!(dups.is_empty(), "objects with two primaries: {dups:?}");
    let mut initial = Vec::new();
    for i in 0..3 {
        initial.extend(started_ids(&n, i, 0));
    }
    let lost: Vec<_> = initial.iter().filter(|id| !counts.contains_key(*id)).collect();
    assert!(lost.is_empty(), "objects without a primary at the end: {lost:?}");
    for (i, r) in reports.iter().enumerate() {
        assert_eq!(
            r["members"].as_array().map(Vec::len),
            Some(2),
            "node {i} sees the two others at the end: {}",
            r["members"]
        );
    }
}

/// A node killed and restarted at once with the same id comes back as a new member (a
/// new generation), and the objects it held — static items included — are held by
/// exactly one node (the "9 static items never came back" bug).
#[test]
fn a_restarted_node_is_a_new_member_and_its_objects_come_back() {
    let _g = heavy();
    let mut n = Nodes::new("restart", 4);
    let world = [s("--players"), s(3)];
    let a0 = start_founders(&mut n, 4, &world);
    std::thread::sleep(Duration::from_secs(3));
    let old = started_ids(&n, 2, 0);
    let old_gen = n
        .records
        .iter()
        .find(|r| r.node == 2 && r.kind == Kind::Ready)
        .unwrap()
        .json["generation"]
        .as_u64()
        .unwrap();
    n.kill9(2);
    let mut args = world.to_vec();
    args.extend([s("--founders"), s(4), s("--join"), s(a0)]);
    n.spawn(2, &args);
    n.ready(2, WAIT);
    std::thread::sleep(Duration::from_secs(5));
    n.stop(&[0, 1, 2, 3]);
    let back = n.summary(2, WAIT);
    let rest: Vec<Value> = [0, 1, 3].iter().map(|i| n.summary(*i, WAIT)).collect();
    assert!(
        back["generation"].as_u64().unwrap() > old_gen,
        "{}",
        back["generation"]
    );
    let mut refs: Vec<&Value> = rest.iter().collect();
    refs.push(&back);
    let counts = primary_counts(refs.iter().copied());
    let dups: Vec<_> = counts.iter().filter(|(_, c)| **c > 1).collect();
    assert!(dups.is_empty(), "objects with two primaries: {dups:?}");
    let missing: Vec<_> = old.iter().filter(|id| !counts.contains_key(*id)).collect();
    assert!(
        missing.is_empty(),
        "objects of the killed process never came back: {missing:?}"
    );
    for r in &rest {
        let members: Vec<u64> = r["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m.as_u64().unwrap())
            .collect();
        assert!(
            members.contains(&2),
            "the restarted node is a member again: {members:?}"
        );
    }
    // The restarted node replicates every object again (broadcast).
    assert!(back["replicas"].as_u64().unwrap() as usize >= old.len(), "{back}");
}
