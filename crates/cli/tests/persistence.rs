//! Durable worlds on real `worldmesh node` processes (issue 19): every node persists to its
//! own store (`--data-dir`), a whole cluster killed with `kill -9` comes back from its
//! stores with every persisted object exactly once, and a node restarted on its store
//! after the others adopted its objects does not resurrect them (epochs decide).

mod procs;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use procs::{Kind, Nodes, heavy, ids};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(30);

fn s<T: ToString>(v: T) -> String {
    v.to_string()
}

/// The started line of `node`'s process `incarnation`.
fn started(n: &Nodes, node: u32, incarnation: u32) -> Value {
    n.records
        .iter()
        .find(|r| r.node == node && r.incarnation == incarnation && r.kind == Kind::Started)
        .expect("started line")
        .json
        .clone()
}

/// Starts nodes `ids` (the first founds, the others are seeded with its address, or all
/// join `join`) with `args(i)`, releases their start barrier together.
fn start(
    n: &mut Nodes,
    nodes: &[u32],
    join: Option<SocketAddr>,
    args: impl Fn(u32) -> Vec<String>,
) -> SocketAddr {
    let mut first = args(nodes[0]);
    first.push(s("--wait-start"));
    if let Some(a) = join {
        first.extend([s("--join"), s(a)]);
    }
    n.spawn(nodes[0], &first);
    let a0 = n.ready(nodes[0], WAIT);
    for &i in &nodes[1..] {
        let mut a = args(i);
        a.push(s("--wait-start"));
        match join {
            Some(j) => a.extend([s("--join"), s(j)]),
            None => a.extend([s("--seeds"), s(a0)]),
        }
        n.spawn(i, &a);
    }
    for &i in &nodes[1..] {
        n.ready(i, WAIT);
    }
    n.release(nodes);
    for &i in nodes {
        n.started(i, WAIT);
    }
    a0
}

fn counts(reports: &[Value], field: &str) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for r in reports {
        for id in ids(&r[field]) {
            *m.entry(id).or_insert(0) += 1;
        }
    }
    m
}

/// Three founders persist to their stores; all three are killed with `kill -9` at once and
/// started again on the same stores: every initial object (avatars are checkpointed, items
/// durable) is recovered, by exactly one node, nothing is spawned again, and the world runs
/// on with one primary per object.
#[test]
fn a_whole_cluster_killed_comes_back_from_its_stores() {
    let _g = heavy();
    let mut n = Nodes::new("persist-all", 3);
    let data = |i: u32| n.dir.join(format!("data-{i}"));
    let dirs: Vec<_> = (0..3).map(data).collect();
    let args = |i: u32| {
        vec![
            s("--founders"),
            s(3),
            s("--players"),
            s(3),
            s("--data-dir"),
            dirs[i as usize].display().to_string(),
        ]
    };
    start(&mut n, &[0, 1, 2], None, args);
    let initial: Vec<Value> = (0..3).map(|i| started(&n, i, 0)).collect();
    let initial_ids = counts(&initial, "primaries");
    assert!(initial_ids.len() >= 9, "{initial_ids:?}");
    // At least one checkpoint (10 frames) everywhere.
    std::thread::sleep(Duration::from_secs(3));
    for i in 0..3 {
        n.kill9(i);
    }

    start(&mut n, &[0, 1, 2], None, args);
    let again: Vec<Value> = (0..3).map(|i| started(&n, i, 1)).collect();
    for a in &again {
        assert!(
            ids(&a["primaries"]).is_empty(),
            "a recovered node spawns nothing: {a}"
        );
    }
    let recovered = counts(&again, "recovered");
    let twice: Vec<_> = recovered.iter().filter(|(_, c)| **c > 1).collect();
    assert!(twice.is_empty(), "recovered by two nodes: {twice:?}");
    let missing: Vec<_> = initial_ids
        .keys()
        .filter(|id| !recovered.contains_key(*id))
        .collect();
    assert!(missing.is_empty(), "not recovered: {missing:?}");
    // Missiles are ephemeral: only initial objects come back.
    let extra: Vec<_> = recovered
        .keys()
        .filter(|id| !initial_ids.contains_key(*id))
        .collect();
    assert!(
        extra.is_empty(),
        "recovered objects that were never persisted: {extra:?}"
    );

    std::thread::sleep(Duration::from_secs(3));
    n.stop(&[0, 1, 2]);
    let reports: Vec<Value> = (0..3).map(|i| n.summary(i, WAIT)).collect();
    let held = counts(&reports, "primary_ids");
    for id in initial_ids.keys() {
        assert_eq!(held.get(id), Some(&1), "{id} after the restart: {held:?}");
    }
    for r in &reports {
        let p = &r["persist"];
        assert!(p["node"]["recovered_objects"].as_u64().unwrap() >= 1, "{p}");
        assert!(p["store"]["batches"].as_u64().unwrap() >= 1, "{p}");
        assert_eq!(
            p["node"]["batches"], p["node"]["completed"],
            "every batch on disk at the stop: {p}"
        );
    }
}

/// Four founders persist; node 2 is killed with `kill -9`, the others adopt its objects
/// (from their backups, under the next epoch), then node 2 rejoins on its store: what it
/// kept waits until the cluster told it about the adoptions, and the adopted objects are
/// superseded, never installed again — at the end every object has exactly one primary.
#[test]
fn a_node_restarted_on_its_store_after_adoption_resurrects_nothing() {
    let _g = heavy();
    let mut n = Nodes::new("persist-one", 4);
    let dirs: Vec<_> = (0..4).map(|i| n.dir.join(format!("data-{i}"))).collect();
    let args = |i: u32| {
        vec![
            s("--founders"),
            s(4),
            s("--players"),
            s(3),
            s("--data-dir"),
            dirs[i as usize].display().to_string(),
        ]
    };
    let a0 = start(&mut n, &[0, 1, 2, 3], None, args);
    let initial: Vec<Value> = (0..4).map(|i| started(&n, i, 0)).collect();
    let initial_ids = counts(&initial, "primaries");
    let of_2 = ids(&initial[2]["primaries"]);
    assert!(!of_2.is_empty());
    std::thread::sleep(Duration::from_secs(3));
    n.kill9(2);
    // Adoption takes about 2.5 s (issue 13's measurements).
    std::thread::sleep(Duration::from_secs(6));
    let mut a = args(2);
    a.extend([s("--join"), s(a0)]);
    n.spawn(2, &a);
    n.ready(2, WAIT);
    std::thread::sleep(Duration::from_secs(6));
    n.stop(&[0, 1, 2, 3]);
    let reports: Vec<Value> = (0..4).map(|i| n.summary(i, WAIT)).collect();
    let back = &reports[2];
    // It rejoined a running world: what it kept waited for the cluster to settle, and the
    // objects the others had adopted meanwhile were superseded, not installed.
    let p = &back["persist"]["node"];
    let (installed, superseded) = (
        p["recovered_objects"].as_u64().unwrap(),
        p["superseded"].as_u64().unwrap(),
    );
    assert_eq!(installed + superseded, of_2.len() as u64, "{p}");
    assert!(
        superseded >= 1,
        "the adoptions made while node 2 was down won: {p}"
    );
    let held = counts(&reports, "primary_ids");
    let dups: Vec<_> = held.iter().filter(|(_, c)| **c > 1).collect();
    assert!(dups.is_empty(), "objects with two primaries: {dups:?}");
    for id in initial_ids.keys() {
        assert_eq!(held.get(id), Some(&1), "{id}: {held:?}");
    }
    // The recovered copies lost to the adoptions: node 2 gave them up.
    let kept_by_2: Vec<_> = ids(&back["primary_ids"])
        .into_iter()
        .filter(|id| of_2.contains(id))
        .collect();
    assert!(
        kept_by_2.is_empty(),
        "node 2 kept objects the others had adopted: {kept_by_2:?}"
    );
}

/// A node `kill -9`ed and restarted at once, again and again (as a supervisor restarts a
/// crashing process, within the second of its last start), is a new member every time: its
/// generation is larger than the last one, with its store and without one, and it joins.
/// (Generations were the UNIX second of the start: a restart within that second ran as the
/// dead process's generation, the others declared that generation down, and the restart was
/// refused until its join timed out — the crash trials met it in CI.)
#[test]
fn a_node_restarted_within_the_second_is_a_new_member_each_time() {
    let _g = heavy();
    let mut n = Nodes::new("restart-fast", 3);
    let dirs: Vec<_> = (0..3).map(|i| n.dir.join(format!("data-{i}"))).collect();
    let base = || vec![s("--founders"), s(3), s("--players"), s(3)];
    let args = |i: u32| {
        let mut a = base();
        a.extend([s("--data-dir"), dirs[i as usize].display().to_string()]);
        a
    };
    let a0 = start(&mut n, &[0, 1, 2], None, args);
    let generation = |n: &Nodes| {
        let inc = n.incarnation(2);
        let r = n
            .records
            .iter()
            .find(|r| r.node == 2 && r.incarnation == inc && r.kind == Kind::Ready)
            .expect("ready line");
        r.json["generation"].as_u64().expect("generation")
    };
    let mut generations = vec![generation(&n)];
    for with_store in [true, true, false, false] {
        n.kill9(2);
        let mut a = if with_store { args(2) } else { base() };
        a.extend([s("--join"), s(a0)]);
        n.spawn(2, &a);
        n.ready(2, WAIT);
        generations.push(generation(&n));
    }
    assert!(
        generations.windows(2).all(|w| w[0] < w[1]),
        "each restart a larger generation: {generations:?}"
    );
    // The others settle on the last process as the member.
    std::thread::sleep(Duration::from_secs(4));
    n.stop(&[0, 1, 2]);
    let last = *generations.last().unwrap();
    for i in 0..3 {
        let r = n.summary(i, WAIT);
        let members = r["members"].as_array().map(Vec::len);
        assert_eq!(members, Some(2), "node {i} sees the two others: {r}");
        if i == 2 {
            assert_eq!(r["generation"].as_u64(), Some(last), "{r}");
        }
    }
}
