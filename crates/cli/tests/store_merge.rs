//! Fewer nodes after a whole-cluster restart (issue 19 item 4), on real processes: a
//! 3-node `worldmesh cluster --data-dir` run is stopped, node 2's store is merged into
//! node 0's with `worldmesh store merge`, and the world restarted on 2 nodes brings back
//! every object the 3 stores held — each recovered by exactly one node and held by exactly
//! one at the end. The merged source can be neither started nor merged again.

mod common;

use common::{run_ok, tmp, worldmesh};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use worldmesh_core::Durability;
use worldmesh_store::{FILE_NAME, Store, StoreOptions};

fn json(path: PathBuf) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn ids(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|o| format!("{}/{}", o["origin"], o["seq"]))
        .collect()
}

/// The objects in the store at `dir`: id → (durability, epoch).
fn stored(dir: &Path) -> BTreeMap<String, (Durability, u32)> {
    let s = Store::open_with(
        dir,
        StoreOptions {
            create: false,
            ..StoreOptions::default()
        },
    )
    .unwrap();
    s.load()
        .unwrap()
        .objects
        .iter()
        .map(|o| (format!("{}/{}", o.id.origin.0, o.id.seq), (o.durability, o.epoch)))
        .collect()
}

fn cluster(nodes: u32, data: &Path, out: &Path) -> serde_json::Value {
    run_ok(
        worldmesh()
            .args(["cluster", "--nodes"])
            .arg(nodes.to_string())
            .args(["--duration", "3s", "--players-per-node", "3", "--data-dir"])
            .arg(data)
            .arg("--out")
            .arg(out),
    );
    json(out.join("report.json"))
}

#[test]
fn a_world_of_three_restarts_on_two_after_merging_the_third_store() {
    let dir = tmp("store-merge");
    let data = dir.path().join("data");
    let first = cluster(3, &data, &dir.path().join("run-1"));
    assert_eq!(first["nodes"].as_array().unwrap().len(), 3);

    // What the three stores hold after the stop: every persisted object in exactly one.
    let mut before: BTreeMap<String, (Durability, u32, usize)> = BTreeMap::new();
    for i in 0..3 {
        for (id, (d, e)) in stored(&data.join(format!("node-{i}"))) {
            assert!(
                before.insert(id.clone(), (d, e, i)).is_none(),
                "{id} in two stores"
            );
        }
    }
    let of_2 = before.values().filter(|(_, _, i)| *i == 2).count();
    assert!(of_2 >= 3, "node 2 stored {of_2} objects");
    assert!(
        before.values().any(|(d, ..)| *d == Durability::Durable)
            && before.values().any(|(d, ..)| *d == Durability::Checkpointed),
        "{before:?}"
    );

    let (dest, src) = (data.join("node-0"), data.join("node-2"));
    let o = worldmesh()
        .arg("store")
        .arg("merge")
        .arg(&dest)
        .arg(&src)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(said.contains(&format!("{of_2} objects taken")), "{said}");
    // The source is retired: renamed, and refused by a second merge.
    assert!(!src.join(FILE_NAME).exists() && src.join(format!("{FILE_NAME}.merged")).exists());
    let again = worldmesh()
        .arg("store")
        .arg("merge")
        .arg(&dest)
        .arg(&src)
        .output()
        .unwrap();
    assert!(!again.status.success());
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(err.contains("node-2"), "{err}");
    // Node 0 now holds its own objects and node 2's, those under the next epoch.
    let merged = stored(&dest);
    for (id, (d, e, i)) in &before {
        match i {
            0 => assert_eq!(merged.get(id), Some(&(*d, *e)), "{id}"),
            2 => assert_eq!(merged.get(id), Some(&(*d, e + 1)), "{id}"),
            _ => assert!(!merged.contains_key(id), "{id}"),
        }
    }

    let second = cluster(2, &data, &dir.path().join("run-2"));
    let nodes = second["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2);
    let mut held: BTreeMap<String, usize> = BTreeMap::new();
    let mut recovered = Vec::new();
    for n in nodes {
        recovered.push(n["persist"]["node"]["recovered_objects"].as_u64().unwrap() as usize);
        for id in ids(&n["primary_ids"]) {
            *held.entry(id).or_default() += 1;
        }
    }
    // Node 0 recovered its own objects and node 2's, node 1 its own; nothing else.
    let count = |i: usize| before.values().filter(|(_, _, at)| *at == i).count();
    assert_eq!(recovered, vec![count(0) + count(2), count(1)]);
    for id in before.keys() {
        assert_eq!(held.get(id), Some(&1), "{id} held at the end: {held:?}");
    }
    // Node 2's objects came back at node 0, and node 1 follows them (replicas).
    let node_1_replicas = nodes[1]["replicas"].as_u64().unwrap();
    assert!(
        node_1_replicas as usize >= of_2,
        "node 1 holds {node_1_replicas} replicas"
    );
}
