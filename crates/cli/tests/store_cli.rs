//! `worldmesh store inspect | export | import` on stores written through the library, run as
//! the real binary: counts, a round trip through JSON lines into a new store, refusals
//! (non-empty target, malformed exports with their line numbers, corrupted files).

mod common;

use common::{run_ok, tmp, worldmesh};
use std::path::{Path, PathBuf};
use std::process::Output;
use tempfile::TempDir;
use worldmesh_core::{Durability, NodeId, ObjectId, Time};
use worldmesh_store::{
    Batch, BindingRecord, Checkpoint, FILE_NAME, ForwardingRecord, ObjectRecord, Recovered, Store, WriteKey,
    WriteRecord,
};

fn fails(o: Output) -> String {
    assert!(
        !o.status.success(),
        "expected a failure:\n{}",
        String::from_utf8_lossy(&o.stdout)
    );
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A path where nothing is yet, inside a fresh temporary folder that goes when the
/// returned guard is dropped: hold it for the whole test.
fn fresh(name: &str) -> (TempDir, PathBuf) {
    let temp = tmp(name);
    let d = temp.path().join("store");
    (temp, d)
}

/// 30 objects (10 of each durability class, states of 0..=29 bytes, one empty), 4 bindings,
/// 3 forwarding entries (one with a lease expiry), 5 writes, checkpoint frame 1200.
fn sample() -> Recovered {
    let objects = (0..30u32)
        .map(|i| ObjectRecord {
            id: ObjectId {
                origin: NodeId(i % 2),
                seq: (u64::from(i) << 32) | u64::from(i),
            },
            epoch: i % 3,
            version: 100 + u64::from(i),
            durability: Durability::ALL[(i % 3) as usize],
            kind: (i % 4) as u8,
            state: (0..i).map(|b| (b * 37 + i) as u8).collect(),
        })
        .collect();
    let bindings = (0..4u32)
        .map(|i| BindingRecord {
            id: ObjectId::new(NodeId(5), i),
            node: NodeId(i),
            epoch: 1 + i,
        })
        .collect();
    let forwarding = (0..3u32)
        .map(|i| ForwardingRecord {
            id: ObjectId::new(NodeId(0), 900 + i),
            to_node: NodeId(2),
            to_epoch: 4,
            expires: (i == 1).then_some(Time::from_millis(61_250)),
        })
        .collect();
    let writes = (0..5u64)
        .map(|i| WriteRecord {
            key: WriteKey {
                target: ObjectId::new(NodeId(0), 3),
                writer: NodeId(1),
                seq: i + 1,
            },
            bytes: vec![0xA0 | i as u8; 6],
        })
        .collect();
    Recovered {
        objects,
        bindings,
        forwarding,
        writes,
        last_checkpoint: Some(Checkpoint {
            frame: 1200,
            time: Time::from_millis(60_000),
        }),
    }
}

fn write_sample(dir: &Path) -> Recovered {
    let mut s = Store::open(dir).unwrap();
    s.apply(&sample().to_batch()).unwrap();
    s.load().unwrap()
}

fn load(dir: &Path) -> Recovered {
    Store::open(dir).unwrap().load().unwrap()
}

#[test]
fn inspect_export_import_round_trip() {
    let (_a, a) = fresh("store-a");
    let want = write_sample(&a);
    assert_eq!(want.objects.len(), 30);

    let out = run_ok(worldmesh().args(["store", "inspect"]).arg(&a));
    let line = |key: &str| -> String {
        out.lines()
            .find_map(|l| {
                l.trim_start()
                    .strip_prefix(key)
                    .filter(|rest| rest.starts_with(' '))
            })
            .unwrap_or_else(|| panic!("no `{key}` line in:\n{out}"))
            .trim()
            .to_owned()
    };
    assert_eq!(line("objects"), "30");
    assert_eq!(line("bindings"), "4");
    assert_eq!(line("forwarding"), "3");
    assert_eq!(line("writes"), "5");
    assert_eq!(line("ephemeral"), "10");
    assert_eq!(line("checkpointed"), "10");
    assert_eq!(line("durable"), "10");
    // States of 0..=29 bytes; writes of 5 × 6 bytes.
    assert_eq!(line("state bytes"), "435");
    assert_eq!(line("write bytes"), "30");
    assert_eq!(line("checkpoint"), "frame 1200 at 60.000 s");
    assert_eq!(line("generation"), "none (no node has run on this store)");
    let size = std::fs::metadata(a.join(FILE_NAME)).unwrap().len();
    assert_eq!(line("file"), format!("{size} bytes"));
    // A node process claimed one.
    Store::open(&a).unwrap().claim_generation(1_796_601_679).unwrap();
    let again = run_ok(worldmesh().args(["store", "inspect"]).arg(&a));
    assert!(
        again
            .lines()
            .any(|l| l == "generation     1796601679 (the last node process's; the next is larger)"),
        "{again}"
    );

    let exports = tmp("store-x");
    let export_a = exports.path().join("a.jsonl");
    run_ok(
        worldmesh()
            .args(["store", "export"])
            .arg(&a)
            .arg("--out")
            .arg(&export_a),
    );
    let text = std::fs::read_to_string(&export_a).unwrap();
    // Header + 30 + 4 + 3 + 5 records + checkpoint.
    assert_eq!(text.lines().count(), 1 + 30 + 4 + 3 + 5 + 1, "{text}");
    assert!(!export_a.with_extension("jsonl.partial").exists());
    // Standard output carries the same export.
    assert_eq!(run_ok(worldmesh().args(["store", "export"]).arg(&a)), text);

    let (_b, b) = fresh("store-b");
    run_ok(worldmesh().args(["store", "import"]).arg(&b).arg(&export_a));
    assert_eq!(load(&b), want, "the imported store differs from the original");
    let export_b = exports.path().join("b.jsonl");
    run_ok(
        worldmesh()
            .args(["store", "export"])
            .arg(&b)
            .arg("--out")
            .arg(&export_b),
    );
    assert_eq!(std::fs::read_to_string(&export_b).unwrap(), text);
}

#[test]
fn import_into_a_non_empty_store_needs_force_and_then_replaces() {
    let (_src, src) = fresh("store-src");
    let want = write_sample(&src);
    let exports = tmp("store-y");
    let export = exports.path().join("src.jsonl");
    run_ok(
        worldmesh()
            .args(["store", "export"])
            .arg(&src)
            .arg("--out")
            .arg(&export),
    );

    let (_dst, dst) = fresh("store-dst");
    let extra = ObjectRecord {
        id: ObjectId::new(NodeId(9), 9),
        epoch: 0,
        version: 1,
        durability: Durability::Durable,
        kind: 0,
        state: vec![1, 2, 3],
    };
    Store::open(&dst)
        .unwrap()
        .apply(Batch::new().put_object(extra.clone()))
        .unwrap();

    let err = fails(
        worldmesh()
            .args(["store", "import"])
            .arg(&dst)
            .arg(&export)
            .output()
            .unwrap(),
    );
    assert!(err.contains("not empty") && err.contains("--force"), "{err}");
    assert!(err.contains(&dst.join(FILE_NAME).display().to_string()), "{err}");
    assert_eq!(
        load(&dst).objects,
        vec![extra],
        "a refused import changed the store"
    );

    run_ok(
        worldmesh()
            .args(["store", "import", "--force"])
            .arg(&dst)
            .arg(&export),
    );
    assert_eq!(load(&dst), want, "--force must replace, not merge");
}

#[test]
fn malformed_exports_are_refused_with_their_line_and_nothing_is_written() {
    let dir = tmp("store-bad");
    let header = r#"{"worldmesh_store_export":1,"store_format":1}"#;
    let object = r#"{"table":"object","origin":0,"seq":1,"epoch":0,"version":1,"durability":"durable","kind":0,"state":"00ff"}"#;
    // The longest line accepted: twice the default state bound (hex) plus 1 KiB.
    let too_long = format!("{header}\n{}\n", "x".repeat(2 * 256 * 1024 + 1024 + 1));
    let cases: [(&str, String, &str); 9] = [
        ("long", too_long, ":2: line longer than 525312 bytes"),
        (
            "nohdr",
            object.to_owned(),
            ":1: not a worldmesh store export header",
        ),
        (
            "version",
            r#"{"worldmesh_store_export":2,"store_format":1}"#.to_owned(),
            ":1: export version 2",
        ),
        (
            "hex",
            format!("{header}\n{}\n", object.replace("00ff", "0g")),
            ":2: field `state`",
        ),
        (
            "field",
            format!(
                "{header}\n{object}\n{}\n",
                object.replace("\"kind\"", "\"colour\":1,\"kind\"")
            ),
            ":3: unknown field `colour`",
        ),
        (
            "durability",
            format!("{header}\n\n{}\n", object.replace("durable", "forever")),
            ":3: unknown variant `forever`",
        ),
        (
            "dup",
            format!("{header}\n{object}\n{object}\n"),
            ":3: the same objects record as line 2",
        ),
        (
            "table",
            format!("{header}\n{}\n", r#"{"table":"players","id":1}"#),
            ":2: unknown variant `players`",
        ),
        ("empty", String::new(), "empty: no export header"),
    ];
    for (name, text, want) in cases {
        let file = dir.path().join(format!("{name}.jsonl"));
        std::fs::write(&file, text).unwrap();
        let target = dir.path().join(format!("target-{name}"));
        let err = fails(
            worldmesh()
                .args(["store", "import"])
                .arg(&target)
                .arg(&file)
                .output()
                .unwrap(),
        );
        assert!(err.contains(&file.display().to_string()), "{name}: {err}");
        assert!(err.contains(want), "{name}: expected `{want}` in: {err}");
        assert!(!target.exists(), "{name}: a refused import created the store");
    }
}

#[test]
fn damaged_or_missing_stores_fail_naming_the_file() {
    let (_temp, dir) = fresh("store-damaged");
    write_sample(&dir);
    let path = dir.join(FILE_NAME);
    let bytes = std::fs::read(&path).unwrap();

    // Truncated to half, then garbage of the same length.
    for (what, damaged) in [
        ("truncated", bytes[..bytes.len() / 2].to_vec()),
        ("garbage", vec![0x5A; bytes.len()]),
    ] {
        std::fs::write(&path, &damaged).unwrap();
        for cmd in ["inspect", "export"] {
            let err = fails(worldmesh().args(["store", cmd]).arg(&dir).output().unwrap());
            assert!(err.contains(&path.display().to_string()), "{what} {cmd}: {err}");
            assert!(!err.contains("panicked"), "{what} {cmd}: {err}");
        }
    }

    let missing = dir.join("nothing-here");
    let err = fails(
        worldmesh()
            .args(["store", "inspect"])
            .arg(&missing)
            .output()
            .unwrap(),
    );
    assert!(
        err.contains("no store here") && err.contains("nothing-here"),
        "{err}"
    );
    assert!(!missing.exists());
}

#[test]
fn a_store_held_open_by_another_process_is_refused_as_locked() {
    let (_temp, dir) = fresh("store-locked");
    write_sample(&dir);
    // This test process holds the store, as a running node would.
    let held = Store::open(&dir).unwrap();
    for cmd in ["inspect", "export"] {
        let err = fails(worldmesh().args(["store", cmd]).arg(&dir).output().unwrap());
        assert!(err.contains("open in another process"), "{cmd}: {err}");
        assert!(
            err.contains(&dir.join(FILE_NAME).display().to_string()),
            "{cmd}: {err}"
        );
    }
    drop(held);
    run_ok(worldmesh().args(["store", "inspect"]).arg(&dir));
}
