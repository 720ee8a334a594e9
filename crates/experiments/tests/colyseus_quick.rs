//! Quick runs of the Colyseus experiments: files written, figures with the right shape.

mod common;

use tempfile::TempDir;
use worldmesh_experiments::{Context, find};

fn ctx(name: &str) -> (TempDir, Context) {
    common::quick(name, 1)
}

#[test]
fn scaling_quick() {
    let (_dir, c) = ctx("scaling");
    let out = (find("scaling").unwrap().run)(&c).unwrap();
    let t = &out.tables[0];
    assert_eq!(t.rows.len(), 3);
    // Broadcast per node grows with players faster than worldmesh per node.
    let ratio = |r: &Vec<String>| r[8].trim_end_matches('x').parse::<f64>().unwrap();
    assert!(ratio(&t.rows[2]) > ratio(&t.rows[0]), "{t}");
    assert!(
        std::fs::read_to_string(c.out.path("scaling.csv"))
            .unwrap()
            .starts_with("players,seeds,worldmesh per node (kbit/s)")
    );
    assert!(
        std::fs::read_to_string(c.out.path("scaling.svg"))
            .unwrap()
            .contains("broadcast per node")
    );
}

#[test]
fn proactive_quick() {
    let (_dir, c) = ctx("proactive");
    let out = (find("proactive").unwrap().run)(&c).unwrap();
    let t = &out.tables[0];
    let p = |s: &str| s.trim_end_matches('%').parse::<f64>().unwrap();
    // Proactive replication never makes missing missiles worse at 0 ms summed over sizes.
    let off: f64 = t.rows.iter().map(|r| p(&r[1])).sum();
    let on: f64 = t.rows.iter().map(|r| p(&r[2])).sum();
    assert!(on <= off, "{t}");
    assert!(c.out.path("proactive.svg").exists() && c.out.path("proactive.png").exists());
    assert_eq!(out.checks.len(), 5);
}
