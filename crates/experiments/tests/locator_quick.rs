//! Quick runs of the locator experiments that drive the full simulator: `consistency`
//! (Figure 11, with a locator dimension) and `predtime` (Figure 8a).

mod common;

use tempfile::TempDir;
use worldmesh_experiments::{Context, find};

fn ctx(name: &str) -> (TempDir, Context) {
    common::quick(name, 1)
}

fn pct(s: &str) -> f64 {
    s.trim_end_matches('%').parse::<f64>().unwrap()
}

#[test]
fn consistency_quick_covers_every_locator() {
    let (_dir, c) = ctx("consistency");
    let out = (find("consistency").unwrap().run)(&c).unwrap();
    let t = &out.tables[0];
    // 4 locators x (2 sizes on the paper's latencies + raw PlanetLab at the headline size).
    assert_eq!(t.rows.len(), 12, "{t}");
    for loc in ["oracle", "rangedht", "rangedht hilbert", "dht"] {
        assert_eq!(t.rows.iter().filter(|r| r[1] == loc).count(), 3, "{t}");
    }
    for r in &t.rows {
        let (g0, g100, g400) = (pct(&r[4]), pct(&r[5]), pct(&r[6]));
        // A longer grace only removes required pairs that are young: never more missing.
        assert!(g0 >= g100 && g100 >= g400, "{r:?}");
        assert!(g0 < 50.0, "discovery works at all: {r:?}");
    }
    let csv = std::fs::read_to_string(c.out.path("consistency.csv")).unwrap();
    assert!(csv.starts_with("nodes,locator,latency,"), "{csv}");
}

#[test]
fn predtime_quick_sweeps_prediction_horizon() {
    let (_dir, c) = ctx("predtime");
    let out = (find("predtime").unwrap().run)(&c).unwrap();
    let t = &out.tables[0];
    assert_eq!(
        t.rows.len(),
        4,
        "4 PredTimes, rangedht (the paper's locator): {t}"
    );
    assert!(t.rows.iter().all(|r| r[0] == "rangedht"), "{t}");
    let f = |s: &str| s.parse::<f64>().unwrap();
    for r in &t.rows {
        // The locator's traffic is part of, and smaller than, the node's total.
        assert!(f(&r[6]) > 0.0 && f(&r[6]) < f(&r[3]), "{r:?}");
        assert!(pct(&r[7]) < 50.0, "discovery works at all: {r:?}");
    }
    assert_eq!(out.checks.len(), 3);
    for file in [
        "predtime.csv",
        "predtime-bandwidth.svg",
        "predtime-missing.svg",
        "predtime.json",
    ] {
        assert!(c.out.path(file).exists(), "{file}");
    }
}
