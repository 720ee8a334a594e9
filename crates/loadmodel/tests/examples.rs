//! The example inputs shipped in `data/plan/` parse and mean what their comments say.

use std::path::PathBuf;
use worldmesh_loadmodel::{Grid, LoadKind, LoadPlan, Map, Sampling, Sight, Trace};

fn data(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/plan")).join(name)
}

#[test]
fn village_map() {
    let m = Map::load(&data("village.toml")).unwrap();
    assert_eq!((m.width, m.height, m.obstacles.len()), (2048.0, 2048.0, 7));
    let hm = m.height_map.as_ref().unwrap();
    assert_eq!((hm.nx, hm.ny, hm.eye_height), (9, 9, 48.0));
    assert_eq!(hm.height_at(1024.0, 1024.0), 0.0);
    assert_eq!(hm.height_at(0.0, 0.0), 400.0);
    let s = Sight::new(&m, (2048.0, 2048.0));
    // Through the south-west house.
    assert!(!s.clear((864.0, 700.0), (864.0, 1000.0)));
    // Across the open square.
    assert!(s.clear((1000.0, 950.0), (1050.0, 1100.0)));
    // The village sits in a bowl: from its centre one sees up the slope to the north
    // edge (the terrain stays below the sight line).
    assert!(s.clear((1024.0, 1024.0), (1024.0, 2000.0)));
    let g = Grid::for_map(&m, 32.0).unwrap();
    assert_eq!(g.len(), 64 * 64);
}

#[test]
fn day_load_states() {
    let p = LoadPlan::load(&data("day.toml")).unwrap();
    let names: Vec<&str> = p.states.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names.first(), Some(&"night"));
    assert_eq!(names.last(), Some(&"tournament"));
    assert_eq!(p.states.len(), 2 + 6 + 1);
    assert_eq!(
        p.states
            .iter()
            .filter(|s| matches!(s.kind, LoadKind::Daily { .. }))
            .count(),
        6
    );
    assert_eq!(p.daily.unwrap().players_at(19.5), 180.0);
}

#[test]
fn example_trace() {
    let t = Trace::load(&data("trace-example.csv")).unwrap();
    assert_eq!(t.kinds, vec!["avatar", "missile"]);
    assert_eq!(t.records.len(), 21);
    assert_eq!(t.sample(&["avatar"], &Sampling::default()).unwrap().len(), 18);
}
