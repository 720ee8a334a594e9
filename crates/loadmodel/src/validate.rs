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
//!
//! [`snapshot_load`] computes the same quantities exactly for one placement of players
//! (and an assignment of players to nodes) under the cost model's charging rules; the
//! `plan-vis` experiment averages it over placements drawn from the density to check
//! the predictors' arithmetic and independence assumptions.
//!
//! ## Against the simulator (`worldmesh plan --validate`, experiment `plan-validate`)
//!
//! The wiring lives outside this pure library, in
//! `worldmesh_experiments::plan_validate` (the CLI calls it): it builds a [`crate::Map`]
//! from the model game's map with [`crate::Map::from_aabbs`], uses the game's AoI box
//! (`AoiRule::Box(450, 450)`) with [`crate::SightRule::RangeOnly`] (the game's interest
//! sees through walls), runs the simulator for each `N` in a `fed` layout, samples
//! positions after the warm-up (players and items once per second, missiles every
//! frame), counts relationships with [`count_relationships_at`] and
//! [`count_cross_relationships_at`], calibrates update sizes, send shares and packet
//! overheads from the object stream and the nodes' counters, and predicts with
//! [`crate::mixed::predict_mixed`] (players, missiles and items as object classes) using
//! the run's densities and, separately, model densities.
//!
//! Known gaps between model and measurement: the simulator tests AoI on exact
//! positions (the model on cell centres), players are not independent (bots follow
//! waypoints and fight; missiles fly between fighting players), and discovery traffic
//! and control datagrams are not object updates.

use crate::aoi::AoiRule;
use crate::grid::Grid;
use crate::predict::{CostModel, Prediction};
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

/// Directed relationships between two groups in one snapshot: pairs `(a, b)` of an
/// observer cell `a` and a target cell `b` with `V(a, b) · A(a, b) = 1` (paper `004`
/// §5.2 applied to another object type: a player observing missiles or items). The
/// groups are distinct objects, so same-cell pairs count.
pub fn count_cross_relationships(
    observers: &[usize],
    targets: &[usize],
    grid: &Grid,
    vis: &VisibilityMap,
    aoi: AoiRule,
) -> u64 {
    let mut n = 0;
    for &i in observers {
        let (xi, yi) = grid.center(i);
        for &j in targets {
            let (xj, yj) = grid.center(j);
            if vis.visible(i, j) && aoi.contains(xj - xi, yj - yi) {
                n += 1;
            }
        }
    }
    n
}

/// [`count_cross_relationships`] for positions; positions off the grid are ignored.
pub fn count_cross_relationships_at(
    observers: &[(f64, f64)],
    targets: &[(f64, f64)],
    grid: &Grid,
    vis: &VisibilityMap,
    aoi: AoiRule,
) -> u64 {
    let cells =
        |v: &[(f64, f64)]| -> Vec<usize> { v.iter().filter_map(|&(x, y)| grid.cell_of(x, y)).collect() };
    count_cross_relationships(&cells(observers), &cells(targets), grid, vis, aoi)
}

/// Loads of one snapshot of placed objects, computed exactly as the cost model charges
/// them (one burst per destination per tick, `Pack` per burst): the "measured" side for
/// checking the predictors against placements drawn from a density (Monte Carlo), and a
/// reference for what the simulator's counters should show.
///
/// `cells[a]` is the cell of player `a`, `node_of[a]` its worldmesh node (nodes are
/// numbered `0..nodes`). Relationships follow [`count_relationships`]; a client's
/// downstream is `Pack(K·u)` for its `K` related objects; a worldmesh node sends, to
/// each other node, the updates of its players that some player of that node relates
/// to, in one burst.
pub fn snapshot_load(
    cells: &[usize],
    node_of: &[usize],
    grid: &Grid,
    vis: &VisibilityMap,
    aoi: AoiRule,
    cost: &CostModel,
) -> Measured {
    let n = cells.len();
    let nodes = node_of.iter().copied().max().map_or(0, |m| m + 1);
    let mut related = vec![0u32; n];
    // replica[b * nodes + m]: node m holds a replica of player b's object.
    let mut replica = vec![false; n * nodes];
    for a in 0..n {
        let (xa, ya) = grid.center(cells[a]);
        for b in 0..n {
            if a == b {
                continue;
            }
            let (xb, yb) = grid.center(cells[b]);
            if vis.visible(cells[a], cells[b]) && aoi.contains(xb - xa, yb - ya) {
                related[a] += 1;
                if node_of[a] != node_of[b] {
                    replica[b * nodes + node_of[a]] = true;
                }
            }
        }
    }
    let u = cost.update_bytes;
    let down: Vec<f64> = related
        .iter()
        .map(|k| cost.packet.pack(f64::from(*k) * u))
        .collect();
    let relationships: f64 = related.iter().map(|k| f64::from(*k)).sum();
    // Per (sender node, receiver node): number of updates per tick.
    let mut link = vec![0u32; nodes * nodes];
    for b in 0..n {
        for m in 0..nodes {
            if replica[b * nodes + m] {
                link[node_of[b] * nodes + m] += 1;
            }
        }
    }
    let mut node_peer = vec![0.0; nodes];
    let mut node_total = vec![0.0; nodes];
    for s in 0..nodes {
        node_peer[s] = (0..nodes)
            .map(|m| cost.packet.pack(f64::from(link[s * nodes + m]) * u))
            .sum();
        node_total[s] = node_peer[s];
    }
    for a in 0..n {
        node_total[node_of[a]] += down[a];
    }
    let kbps = |bytes_per_tick: f64| bytes_per_tick * cost.update_rate_hz * 8.0 / 1000.0;
    let mean = |v: &[f64]| {
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    Measured {
        players: n,
        relationships: Some(relationships),
        updates_per_s: Some(relationships * cost.update_rate_hz),
        cs_client_down_kbps: Some(kbps(mean(&down))),
        cs_server_out_kbps: Some(kbps(down.iter().sum())),
        wm_node_peer_out_kbps: Some(kbps(mean(&node_peer))),
        wm_node_out_kbps: Some(kbps(mean(&node_total))),
    }
}

/// Assigns `n` players to `⌈n / per_node⌉` nodes, `per_node` each (the last node takes
/// the rest), in a uniformly random order — the assignment the worldmesh predictor
/// assumes.
pub fn random_assignment(n: usize, per_node: usize, rng: &mut worldmesh_core::DetRng) -> Vec<usize> {
    let per_node = per_node.max(1);
    let mut order: Vec<usize> = (0..n).map(|a| a / per_node).collect();
    rng.shuffle(&mut order);
    order
}

/// Field-wise mean of several measurements of the same state (each field averaged over
/// the measurements that have it).
pub fn mean_measured(ms: &[Measured]) -> Measured {
    let avg = |f: fn(&Measured) -> Option<f64>| -> Option<f64> {
        let v: Vec<f64> = ms.iter().filter_map(f).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    Measured {
        players: ms.first().map_or(0, |m| m.players),
        relationships: avg(|m| m.relationships),
        updates_per_s: avg(|m| m.updates_per_s),
        cs_client_down_kbps: avg(|m| m.cs_client_down_kbps),
        cs_server_out_kbps: avg(|m| m.cs_server_out_kbps),
        wm_node_peer_out_kbps: avg(|m| m.wm_node_peer_out_kbps),
        wm_node_out_kbps: avg(|m| m.wm_node_out_kbps),
    }
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
    fn snapshot_load_by_hand() {
        // Three cells in a row, 10 apart, radius-10 AoI: players at cells 0, 1, 2 relate
        // 0↔1 and 1↔2. Nodes: {0, 1} on node 0, {2} on node 1.
        let map = Map::empty(30.0, 10.0).unwrap();
        let g = Grid::for_map(&map, 10.0).unwrap();
        let v = VisibilityMap::build(&map, &g, None, 1).unwrap();
        let cost = CostModel::default();
        let m = snapshot_load(&[0, 1, 2], &[0, 0, 1], &g, &v, AoiRule::Radius(10.0), &cost);
        assert_eq!(m.relationships, Some(4.0));
        assert_eq!(m.updates_per_s, Some(40.0));
        // Downstream per tick: Pack(32) = 72, Pack(64) = 104, Pack(32) = 72.
        let kbps = |b: f64| b * 10.0 * 8.0 / 1000.0;
        assert!((m.cs_server_out_kbps.unwrap() - kbps(248.0)).abs() < 1e-9);
        assert!((m.cs_client_down_kbps.unwrap() - kbps(248.0 / 3.0)).abs() < 1e-9);
        // Node 0 sends player 1's update to node 1 (player 2 relates to it); node 1 sends
        // player 2's update to node 0: one 72-byte burst each.
        assert!((m.wm_node_peer_out_kbps.unwrap() - kbps(72.0)).abs() < 1e-9);
        // Totals: node 0 = 72 + 72 + 104, node 1 = 72 + 72.
        assert!((m.wm_node_out_kbps.unwrap() - kbps((248.0 + 144.0) / 2.0)).abs() < 1e-9);
        let mut rng = DetRng::new(1);
        let a = random_assignment(10, 4, &mut rng);
        let mut per = [0; 3];
        a.iter().for_each(|n| per[*n] += 1);
        assert_eq!(per, [4, 4, 2]);
        let avg = mean_measured(&[
            m.clone(),
            Measured {
                relationships: Some(8.0),
                ..m.clone()
            },
        ]);
        assert_eq!(avg.relationships, Some(6.0));
        assert_eq!(avg.updates_per_s, Some(40.0));
    }

    #[test]
    fn cross_counts_by_hand() {
        // Cells 0..4 in a row, 10 apart; a wall over cell 2; AoI radius 20.
        let map = Map::with_boxes(50.0, 10.0, &[(22.0, 0.0, 28.0, 10.0)]).unwrap();
        let g = Grid::for_map(&map, 10.0).unwrap();
        let v = VisibilityMap::build(&map, &g, None, 1).unwrap();
        let aoi = AoiRule::Radius(20.0);
        // Observers in cells 0 and 1; targets in 0 (same cell), 1, 3 (behind the wall
        // from 1, and 30 from 0), 4.
        // 0 sees targets in 0 and 1; 1 sees 0 and 1 (3 is blocked): 4 pairs.
        assert_eq!(count_cross_relationships(&[0, 1], &[0, 1, 3, 4], &g, &v, aoi), 4);
        // Without the wall, 1 also sees 3 (20 away).
        let open = VisibilityMap::build(&Map::empty(50.0, 10.0).unwrap(), &g, None, 1).unwrap();
        assert_eq!(
            count_cross_relationships(&[0, 1], &[0, 1, 3, 4], &g, &open, aoi),
            5
        );
        // Positions: (5, 5) is cell 0, (15, 5) cell 1, (35, 5) cell 3; off-map ignored.
        let n = count_cross_relationships_at(
            &[(5.0, 5.0), (15.0, 5.0), (-1.0, 5.0)],
            &[(4.0, 4.0), (16.0, 6.0), (35.0, 5.0), (45.0, 5.0), (99.0, 5.0)],
            &g,
            &v,
            aoi,
        );
        assert_eq!(n, 4);
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
