//! Helpers shared by the CLI test binaries: run `worldmesh` as a user would.

#![allow(dead_code)] // each test binary uses its own subset

use std::path::PathBuf;
use std::process::Command;

/// The `worldmesh` binary under test.
pub fn worldmesh() -> Command {
    Command::new(env!("CARGO_BIN_EXE_worldmesh"))
}

/// A fresh folder for one test's files.
pub fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("wm-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
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
