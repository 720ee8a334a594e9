//! Quick-mode run of the `failover` experiment (issue 7 item 5): real nodes, host faults
//! under 5 % loss; every trial ends with one server and no confirmed input lost.

mod common;

use worldmesh_experiments::find;

#[test]
fn failover_quick_reports_one_server_and_nothing_lost() {
    let (_temp, ctx) = common::quick("failover", 3);
    let dir = ctx.out.root().to_path_buf();
    let o = (find("failover").unwrap().run)(&ctx).unwrap();
    for f in [
        "failover_summary.csv",
        "failover_trials.csv",
        "takeover_cdf.svg",
        "report.json",
    ] {
        assert!(dir.join(f).exists(), "{f}");
    }
    let t = &o.tables[0];
    let col = |h: &str| t.headers.iter().position(|x| x == h).unwrap();
    assert_eq!(t.rows.len(), 7);
    for row in &t.rows {
        assert_eq!(row[col("≠ 1 server at end")], "0", "{row:?}");
        assert_eq!(row[col("confirmed lost")], "0", "{row:?}");
        assert_eq!(row[col("no takeover")], "0", "{row:?}");
        assert_eq!(row[col("spurious before fault")], "0", "{row:?}");
        // exactly one promotion per trial (4 trials in quick mode)
        assert_eq!(row[col("promotions after")], "4", "{row:?}");
        let total: u64 = row[col("confirmed total")].parse().unwrap();
        assert!(total > 0);
        // detection alone is k·τ = T = 250 ms after the last snapshot
        let med: f64 = row[col("takeover med")].parse().unwrap();
        assert!(med >= 150.0, "{row:?}");
    }
}
