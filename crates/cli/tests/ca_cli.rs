//! `worldmesh ca init` / `ca issue` as an operator runs them, and their errors.

mod common;

use common::{run_ok, tmp, worldmesh};
use std::process::Output;
use worldmesh_core::NodeId;
use worldmesh_net::pki::NodeIdentity;

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn fails(o: Output) -> String {
    assert!(
        !o.status.success(),
        "expected a failure:\n{}",
        String::from_utf8_lossy(&o.stdout)
    );
    stderr(&o)
}

#[test]
fn init_then_issue_writes_files_a_node_can_load() {
    let temp = tmp("ca-good");
    // A folder that does not exist yet: `ca init` makes it.
    let dir = temp.path().join("ca");
    let out = run_ok(
        worldmesh()
            .args(["ca", "init", "--name", "test world", "--dir"])
            .arg(&dir),
    );
    assert!(out.contains("ca.pem") && out.contains("ca.key"), "{out}");
    let nodes = dir.join("nodes");
    let out = run_ok(
        worldmesh()
            .args(["ca", "issue", "--node", "4", "--days", "3", "--dir"])
            .arg(&dir)
            .arg("--out")
            .arg(&nodes),
    );
    assert!(out.contains("node-4.worldmesh"), "{out}");
    let id = NodeIdentity::load(
        &nodes.join("node-4.pem"),
        &nodes.join("node-4.key"),
        &dir.join("ca.pem"),
        NodeId(4),
    )
    .unwrap();
    assert_eq!(id.node(), NodeId(4));
    // Default --out is the CA directory.
    run_ok(
        worldmesh()
            .args(["ca", "issue", "--node", "0", "--dir"])
            .arg(&dir),
    );
    assert!(dir.join("node-0.pem").exists() && dir.join("node-0.key").exists());

    // Nothing is overwritten without --force; with it, it is.
    let before = std::fs::read(dir.join("ca.pem")).unwrap();
    let e = fails(
        worldmesh()
            .args(["ca", "init", "--dir"])
            .arg(&dir)
            .output()
            .unwrap(),
    );
    assert!(
        e.contains("ca.pem") && e.contains("already exists") && e.contains("--force"),
        "{e}"
    );
    assert_eq!(std::fs::read(dir.join("ca.pem")).unwrap(), before);
    let e = fails(
        worldmesh()
            .args(["ca", "issue", "--node", "0", "--dir"])
            .arg(&dir)
            .output()
            .unwrap(),
    );
    assert!(e.contains("node-0.pem") && e.contains("already exists"), "{e}");
    run_ok(
        worldmesh()
            .args(["ca", "issue", "--node", "0", "--force", "--dir"])
            .arg(&dir),
    );
}

#[test]
fn bad_flags_and_missing_ca_give_clear_errors() {
    let temp = tmp("ca-bad");
    let dir = temp.path().join("ca");
    // No CA there yet: the error names the missing file.
    let e = fails(
        worldmesh()
            .args(["ca", "issue", "--node", "1", "--dir"])
            .arg(&dir)
            .output()
            .unwrap(),
    );
    assert!(e.contains("ca.pem") && e.contains("cannot read"), "{e}");
    let e = fails(
        worldmesh()
            .args(["ca", "issue", "--dir"])
            .arg(&dir)
            .output()
            .unwrap(),
    );
    assert!(e.contains("--node"), "{e}");
    let e = fails(
        worldmesh()
            .args(["ca", "issue", "--node", "minus-one", "--dir"])
            .arg(&dir)
            .output()
            .unwrap(),
    );
    assert!(e.contains("--node") && e.contains("minus-one"), "{e}");
    let e = fails(
        worldmesh()
            .args(["ca", "init", "--days", "0", "--dir"])
            .arg(&dir)
            .output()
            .unwrap(),
    );
    assert!(e.contains("--days") && e.contains('0'), "{e}");
    let e = fails(
        worldmesh()
            .args(["ca", "init", "--name", "", "--dir"])
            .arg(&dir)
            .output()
            .unwrap(),
    );
    assert!(e.contains("CA name"), "{e}");
    let e = fails(worldmesh().args(["ca", "init"]).output().unwrap());
    assert!(e.contains("--dir"), "{e}");
    let e = fails(worldmesh().args(["ca", "frobnicate"]).output().unwrap());
    assert!(e.contains("frobnicate"), "{e}");
    // --help explains every flag.
    let help = run_ok(worldmesh().args(["ca", "issue", "--help"]));
    for flag in [
        "--dir",
        "--node",
        "--out",
        "--days",
        "--force",
        "node-<ID>.worldmesh",
    ] {
        assert!(help.contains(flag), "{flag} missing from:\n{help}");
    }
    let help = run_ok(worldmesh().args(["ca", "init", "--help"]));
    for flag in ["--dir", "--name", "--days", "--force", "ca.key"] {
        assert!(help.contains(flag), "{flag} missing from:\n{help}");
    }
}
