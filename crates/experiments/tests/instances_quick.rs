//! Quick-mode runs of the `instances-*` experiments (paper 003), each checking a property
//! the paper's figure or table is about.
#![allow(clippy::unwrap_used)]

mod common;

use tempfile::TempDir;
use worldmesh_experiments::{Outcome, find};
use worldmesh_report::Table;

/// Runs experiment `name`; its output folder goes when the returned `TempDir` is dropped.
fn run(name: &str) -> (Outcome, TempDir) {
    let (dir, ctx) = common::quick(name, 7);
    let e = find(name).unwrap();
    ((e.run)(&ctx).unwrap(), dir)
}

fn table<'a>(o: &'a Outcome, title_start: &str) -> &'a Table {
    o.tables
        .iter()
        .find(|t| t.title.starts_with(title_start))
        .unwrap()
}

fn col(t: &Table, header: &str) -> usize {
    t.headers.iter().position(|h| h == header).unwrap()
}

fn num(s: &str) -> f64 {
    s.trim_end_matches([' ', '%']).trim().parse().unwrap()
}

#[test]
fn balance_hybrid_sheds_more_and_ends_within_capacity() {
    let (o, dir) = run("instances-balance");
    assert!(dir.path().join("figure9_loads.svg").exists() && dir.path().join("figure9_loads.csv").exists());
    let t = table(&o, "instances-balance: scenario A, one row per seed");
    let (m, moved, maxl) = (
        col(t, "method"),
        col(t, "moved (1st round)"),
        col(t, "max load after 1st"),
    );
    let rows: Vec<&Vec<String>> = t.rows.iter().collect();
    for pair in rows.chunks(2) {
        assert_eq!((pair[0][m].as_str(), pair[1][m].as_str()), ("Hybrid", "Classic"));
        // Hybrid sheds extra + 10 % of max_S_load per overloaded server: more than Classic.
        assert!(num(&pair[0][moved]) > num(&pair[1][moved]), "{pair:?}");
        // quick mode: max_S_load = 550; Hybrid leaves no server above it (the cluster has room)
        assert!(num(&pair[0][maxl]) <= 550.0, "{pair:?}");
    }
}

#[test]
fn comm_classic_costs_more_than_hybrid_at_1000() {
    let (o, dir) = run("instances-comm");
    assert!(dir.path().join("figure10.svg").exists());
    let t = table(&o, "Figure 10");
    let last = t.rows.last().unwrap();
    assert_eq!(last[0], "1000");
    let c20 = num(&last[col(t, "Classic F=20 (sim)")]);
    let h = num(&last[col(t, "Hybrid (sim)")]);
    assert!(c20 > h, "Classic {c20} vs Hybrid {h}");
    // Hybrid moves whole instances: at least extra + 10 % of 5,500
    assert!(num(&last[col(t, "Hybrid moved (sim)")]) >= 1550.0);
    assert_eq!(num(&last[col(t, "Classic moved (sim)")]), 1000.0);
}

#[test]
fn p2p_exceeds_the_central_area() {
    let (o, dir) = run("instances-p2p");
    assert!(dir.path().join("figure11.svg").exists() && dir.path().join("figure12.svg").exists());
    let t = table(&o, "Scenario B per Return RATE");
    for r in &t.rows {
        assert!(num(&r[col(t, "in P2P")]) > 0.0, "{r:?}");
    }
    // with every player coming back (Return RATE 100 %) the system holds more players than
    // the Central Area could
    let r = t.rows.last().unwrap();
    assert!(
        num(&r[col(t, "players at end")]) > num(&r[col(t, "CS capacity")]),
        "{r:?}"
    );
    // more players come back with a higher Return RATE
    let ret = col(t, "players returned");
    assert!(num(&t.rows[0][ret]) < num(&t.rows.last().unwrap()[ret]));
}

#[test]
fn qos_failover_is_safe_and_ll_beats_a_random_cs() {
    let (o, dir) = run("instances-qos");
    assert!(dir.path().join("takeover_cdf.svg").exists() && dir.path().join("report.json").exists());
    let t = table(&o, "Takeover after a server crash");
    for r in &t.rows {
        assert_eq!(r[col(t, "confirmed inputs lost")], "0", "{r:?}");
        assert_eq!(r[col(t, "≠ 1 server at end")], "0", "{r:?}");
        assert_eq!(r[col(t, "no promotion")], "0", "{r:?}");
    }
    let t4 = table(&o, "Table 4");
    let r = t4
        .rows
        .iter()
        .find(|r| r[0] == "plane, CS at random point" && r[1] == "5")
        .unwrap();
    assert!(num(&r[col(t4, "hybrid LL mean")]) < num(&r[col(t4, "client-server mean")]));
}
