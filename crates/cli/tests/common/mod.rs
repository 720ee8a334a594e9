//! Helpers shared by the CLI test binaries: run `worldmesh` as a user would.

#![allow(dead_code)] // each test binary uses its own subset

use std::process::Command;

use tempfile::TempDir;

/// The `worldmesh` binary under test.
pub fn worldmesh() -> Command {
    Command::new(env!("CARGO_BIN_EXE_worldmesh"))
}

/// A fresh, empty folder `wm-cli-<name>-…` for one test's files under the system's
/// temporary directory. It is removed when the returned guard is dropped: hold it for the
/// whole test (it goes also when the test panics).
pub fn tmp(name: &str) -> TempDir {
    tempfile::Builder::new()
        .prefix(&format!("wm-cli-{name}-"))
        .tempdir()
        .unwrap()
}

/// Runs `cmd`, asserts that it succeeded (showing its output if not) and returns its
/// standard output.
pub fn run_ok(cmd: &mut Command) -> String {
    let o = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    stdout
}
