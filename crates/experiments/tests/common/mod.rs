//! Helpers shared by the experiments' test binaries.

#![allow(dead_code)] // each test binary uses its own subset

use tempfile::TempDir;
use worldmesh_experiments::Context;

/// A quick context (see [`Context::quick_in`]) with `seed`, in a fresh folder
/// `wm-exp-<name>-…` under the system's temporary directory. The folder is removed when
/// the returned `TempDir` is dropped: hold it beside the context for the whole test (it
/// goes also when the test panics).
pub fn quick(name: &str, seed: u64) -> (TempDir, Context) {
    let dir = tempfile::Builder::new()
        .prefix(&format!("wm-exp-{name}-"))
        .tempdir()
        .expect("temp dir");
    let ctx = Context::quick_in(dir.path(), seed).expect("quick context");
    (dir, ctx)
}
