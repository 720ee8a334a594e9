//! The `cma-*` experiments in quick mode: they run, write their files, and their results
//! show what paper `002` §4 shows (optimal ≤ greedy, L-SA = brute force).

mod common;

use std::path::PathBuf;
use tempfile::TempDir;
use worldmesh_experiments::{Context, find};

/// A quick context with seed 3; its folder goes when the `TempDir` is dropped.
fn ctx(name: &str) -> (TempDir, Context) {
    common::quick(&format!("cma-{name}"), 3)
}

fn csv(ctx: &Context, name: &str) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(ctx.out.path(name)).expect("csv written");
    text.lines()
        .map(|l| l.split(',').map(str::to_owned).collect())
        .collect()
}

fn num(s: &str) -> f64 {
    s.parse().expect("number")
}

#[test]
fn cma_join_sa_is_never_worse_than_greedy() {
    let (_dir, c) = ctx("join");
    let out = (find("cma-join").expect("registered").run)(&c).expect("runs");
    let rows = csv(&c, "cma-join.csv");
    assert_eq!(
        rows[0],
        [
            "joins",
            "greedy_mean_ms",
            "greedy_max_ms",
            "sa_mean_ms",
            "sa_max_ms"
        ]
    );
    assert_eq!(rows.len(), 1 + 200, "one row per join");
    for r in &rows[1..] {
        assert!(
            num(&r[3]) <= num(&r[1]) + 1e-3,
            "J-SA mean above J-greedy at join {}",
            r[0]
        );
    }
    // near capacity greedy is strictly worse (the paper's point)
    let last = rows.last().expect("rows");
    assert!(num(&last[3]) < num(&last[1]));
    for f in ["fig4-mean.svg", "fig4-max.svg", "fig5-cdf.svg", "cma-join.json"] {
        assert!(out.files.contains(&c.out.path(f)), "{f}");
    }
}

#[test]
fn cma_leave_sa_matches_brute_force_at_every_leave() {
    let (_dir, c) = ctx("leave");
    (find("cma-leave").expect("registered").run)(&c).expect("runs");
    let rows = csv(&c, "cma-leave.csv");
    assert_eq!(rows[0][0], "leaves");
    assert_eq!(rows[0][5], "L-SA_mean_ms");
    let bf = csv(&c, "cma-leave-bf.csv");
    // quick mode checks brute force after every leave
    assert_eq!(bf.len(), rows.len());
    for (r, b) in rows[1..].iter().zip(&bf[1..]) {
        assert_eq!(r[0], b[0]);
        assert!(
            (num(&r[5]) - num(&b[1])).abs() < 1e-3,
            "L-SA {} vs BF {} at {}",
            r[5],
            b[1],
            r[0]
        );
        assert!(num(&r[1]) >= num(&b[1]) - 1e-3 && num(&r[3]) >= num(&b[1]) - 1e-3);
    }
}

#[test]
fn cma_dynamic_and_speed_run_and_report() {
    let (_dir, c) = ctx("dynamic");
    let out = (find("cma-dynamic").expect("registered").run)(&c).expect("runs");
    let rows = csv(&c, "cma-dynamic.csv");
    assert_eq!(rows[0][1], "J-SA/L-SA_mean_ms");
    for r in &rows[1..] {
        assert!(
            num(&r[1]) <= num(&r[3]) + 1e-3 && num(&r[1]) <= num(&r[5]) + 1e-3,
            "optimal above a heuristic at {}",
            r[0]
        );
    }
    assert_eq!(out.tables[0].rows.len(), 3);

    let (_dir, c) = ctx("speed");
    let out = (find("cma-speed").expect("registered").run)(&c).expect("runs");
    let rows = csv(&c, "cma-speed-events.csv");
    assert_eq!(rows[0][0], "players×mirrors");
    assert_eq!(rows.len(), 3, "two quick sizes");
    for r in &rows[1..] {
        assert!(r.last().expect("cell").starts_with("yes"), "equal cost: {r:?}");
    }
    assert!(out.files.iter().any(|f: &PathBuf| f.ends_with("fig8-times.svg")));
}

#[test]
fn same_seed_same_results() {
    let run = |tag: &str| {
        let (_dir, c) = ctx(tag);
        (find("cma-dynamic").expect("registered").run)(&c).expect("runs");
        std::fs::read_to_string(c.out.path("cma-dynamic.csv")).expect("csv")
    };
    assert_eq!(run("det-a"), run("det-b"));
}
