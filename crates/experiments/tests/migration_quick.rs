//! Quick run of the `migration` experiment: placement lowers the players' latency to their
//! region's host, and the files are written.

mod common;

use worldmesh_experiments::find;

#[test]
fn migration_quick_reduces_mean_latency() {
    let (_dir, c) = common::quick("migration", 1);
    let out = (find("migration").unwrap().run)(&c).unwrap();
    let t = &out.tables[0];
    let ms = |r: usize, col: usize| t.rows[r][col].parse::<f64>().unwrap();
    // Regions start on the server farthest from their players: placement must help.
    assert!(ms(1, 1) < ms(0, 1), "mean: {t}");
    assert_eq!(t.rows[0][3], t.rows[1][3], "no player lost: {t}");
    let cost = &out.tables[1];
    assert!(cost.rows[0][0].parse::<u64>().unwrap() >= 1, "{cost}");
    assert!(
        cost.rows[0][5].parse::<u64>().unwrap() > 0,
        "migration bytes: {cost}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(c.out.path("migration.json")).unwrap()).unwrap();
    assert!(json["mean_reduction_ms"].as_f64().unwrap() > 0.0);
    assert!(
        std::fs::read_to_string(c.out.path("migration_cdf.svg"))
            .unwrap()
            .contains("after")
    );
}
