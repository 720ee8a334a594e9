//! Predictions held against measurements (issue 8, item 5; paper `004` §2.2: "the model
//! provides benchmark values for validation during the load testing of the system").
//!
//! This module is the hook the simulator calls: it does not run anything. A caller
//! that has run the same map and `N` measures
//! - relationships, by counting directed pairs in position snapshots with
//!   [`count_relationships`] (the same `V` and `A` the prediction used, evaluated on the
//!   cells the objects stand in) and averaging over snapshots;
//! - bytes per second on the wire per client, server and node;
//!
//! fills a [`Measured`] and calls [`compare`], which returns one [`ComparisonRow`] per
//! quantity that was measured, with the signed relative error
//! `(predicted − measured) / measured`.

use crate::aoi::AoiRule;
use crate::grid::Grid;
use crate::predict::Prediction;
use crate::visibility::VisibilityMap;

/// Quantities measured in a run of `players` users; `None` for what was not measured.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Measured {
    /// Users in the run.
    pub players: usize,
    /// Mean directed relationships per snapshot.
    pub relationships: Option<f64>,
    /// Object updates delivered per second (to clients, client-server) .
    pub updates_per_s: Option<f64>,
    /// Client-server: mean per-client downstream, kbit/s.
    pub cs_client_down_kbps: Option<f64>,
    /// Client-server: server outbound, kbit/s.
    pub cs_server_out_kbps: Option<f64>,
    /// worldmesh: mean per-node outbound to other nodes, kbit/s.
    pub wm_node_peer_out_kbps: Option<f64>,
    /// worldmesh: mean per-node outbound in total, kbit/s.
    pub wm_node_out_kbps: Option<f64>,
}

/// One line of the predicted-vs-measured table.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ComparisonRow {
    /// Users.
    pub players: usize,
    /// Which quantity.
    pub metric: &'static str,
    /// Predicted value.
    pub predicted: f64,
    /// Measured value.
    pub measured: f64,
    /// `(predicted − measured) / measured`; `None` when the measurement is 0.
    pub rel_error: Option<f64>,
}

impl ComparisonRow {
    /// True if the relative error is known and at most `tol` in magnitude.
    pub fn within(&self, tol: f64) -> bool {
        self.rel_error.is_some_and(|e| e.abs() <= tol)
    }
}

/// Signed relative error of a prediction; `None` if `measured` is 0 or not finite.
pub fn relative_error(predicted: f64, measured: f64) -> Option<f64> {
    (measured != 0.0 && measured.is_finite() && predicted.is_finite())
        .then(|| (predicted - measured) / measured)
}

/// Predicted vs measured, for every measured quantity, in a fixed order.
pub fn compare(pred: &Prediction, m: &Measured) -> Vec<ComparisonRow> {
    let pairs: [(&'static str, f64, Option<f64>); 6] = [
        ("relationships", pred.relationships, m.relationships),
        ("updates/s", pred.updates_per_s, m.updates_per_s),
        (
            "cs client down kbps",
            pred.cs_client_down_kbps,
            m.cs_client_down_kbps,
        ),
        (
            "cs server out kbps",
            pred.cs_server_out_kbps,
            m.cs_server_out_kbps,
        ),
        (
            "wm node peer out kbps",
            pred.wm_node_peer_out_kbps,
            m.wm_node_peer_out_kbps,
        ),
        ("wm node out kbps", pred.wm_node_out_kbps, m.wm_node_out_kbps),
    ];
    pairs
        .into_iter()
        .filter_map(|(metric, predicted, measured)| {
            measured.map(|measured| ComparisonRow {
                players: m.players,
                metric,
                predicted,
                measured,
                rel_error: relative_error(predicted, measured),
            })
        })
        .collect()
}

/// Directed relationships in one snapshot of object cells: ordered pairs of distinct
/// objects `(a, b)` with `V(cell a, cell b) · A(cell a, cell b) = 1`. Two objects in the
/// same free cell relate (a cell sees itself and is inside any AoI).
pub fn count_relationships(cells: &[usize], grid: &Grid, vis: &VisibilityMap, aoi: AoiRule) -> u64 {
    let mut n = 0;
    for (k, &i) in cells.iter().enumerate() {
        let (xi, yi) = grid.center(i);
        for &j in &cells[k + 1..] {
            let (xj, yj) = grid.center(j);
            if vis.visible(i, j) && aoi.contains(xj - xi, yj - yi) {
                n += 2;
            }
        }
    }
    n
}

/// [`count_relationships`] for positions; positions off the grid are ignored.
pub fn count_relationships_at(
    positions: &[(f64, f64)],
    grid: &Grid,
    vis: &VisibilityMap,
    aoi: AoiRule,
) -> u64 {
    let cells: Vec<usize> = positions
        .iter()
        .filter_map(|&(x, y)| grid.cell_of(x, y))
        .collect();
    count_relationships(&cells, grid, vis, aoi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::density::{DensityMap, DensitySeries};
    use crate::load_state::LoadState;
    use crate::map::Map;
    use crate::predict::{CostModel, Planner};
    use worldmesh_core::DetRng;

    #[test]
    fn compare_reports_signed_relative_errors() {
        let (map, g) = {
            let m = Map::empty(20.0, 10.0).unwrap();
            let g = Grid::for_map(&m, 10.0).unwrap();
            (m, g)
        };
        let v = VisibilityMap::build(&map, &g, None, 1).unwrap();
        let s = DensitySeries::single(DensityMap::uniform(g, &[true, true]).unwrap());
        let pred = Planner::new(&s, &v, AoiRule::Unlimited, CostModel::default())
            .unwrap()
            .predict(&LoadState::steady(10));
        // Synthetic measurements: 10% below, exact, 25% above, zero.
        let m = Measured {
            players: 10,
            relationships: Some(pred.relationships / 0.9),
            updates_per_s: Some(pred.updates_per_s),
            cs_server_out_kbps: Some(pred.cs_server_out_kbps / 1.25),
            wm_node_out_kbps: Some(0.0),
            ..Default::default()
        };
        let rows = compare(&pred, &m);
        let metrics: Vec<&str> = rows.iter().map(|r| r.metric).collect();
        assert_eq!(
            metrics,
            [
                "relationships",
                "updates/s",
                "cs server out kbps",
                "wm node out kbps"
            ]
        );
        assert!((rows[0].rel_error.unwrap() + 0.1).abs() < 1e-12);
        assert_eq!(rows[1].rel_error, Some(0.0));
        assert!((rows[2].rel_error.unwrap() - 0.25).abs() < 1e-12);
        assert_eq!(rows[3].rel_error, None);
        assert!(rows[0].within(0.15) && !rows[2].within(0.15) && !rows[3].within(1.0));
    }

    #[test]
    fn counting_agrees_with_brute_force_and_the_prediction() {
        let map = Map::with_boxes(200.0, 100.0, &[(95.0, 0.0, 105.0, 70.0)]).unwrap();
        let g = Grid::for_map(&map, 10.0).unwrap();
        let aoi = AoiRule::Radius(60.0);
        let v = VisibilityMap::build(&map, &g, aoi.max_range(), 2).unwrap();
        let d = DensityMap::uniform(g, &g.free_cells(&map)).unwrap();
        let mut rng = DetRng::new(5);
        let cells = d.sample_cells(30, &mut rng);
        let mut brute = 0;
        for (a, &i) in cells.iter().enumerate() {
            for (b, &j) in cells.iter().enumerate() {
                let ((xi, yi), (xj, yj)) = (g.center(i), g.center(j));
                if a != b && v.visible(i, j) && (xi - xj).hypot(yi - yj) <= 60.0 {
                    brute += 1;
                }
            }
        }
        assert_eq!(count_relationships(&cells, &g, &v, aoi), brute);
        // Monte Carlo over independent placements approaches N(N−1)(S + Σ P²)
        // (same-cell pairs relate, the prediction leaves them out: i ≠ j).
        let series = DensitySeries::single(d.clone());
        let planner = Planner::new(&series, &v, aoi, CostModel::default()).unwrap();
        let pred = planner.predict(&LoadState::steady(30));
        let same_cell = 30.0 * 29.0 * d.p.iter().map(|p| p * p).sum::<f64>();
        let trials = 400;
        let total: u64 = (0..trials)
            .map(|_| count_relationships(&d.sample_cells(30, &mut rng), &g, &v, aoi))
            .sum();
        let mean = total as f64 / f64::from(trials);
        let err = relative_error(pred.relationships + same_cell, mean).unwrap();
        assert!(
            err.abs() < 0.05,
            "predicted {} measured {mean}",
            pred.relationships
        );
    }
}
