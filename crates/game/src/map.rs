//! Synthetic maps of the model workload (paper `000` §4.1): a rectangle with randomly
//! placed box obstacles, waypoints with Zipf-like popularity (§2.3), and a navigation
//! graph so bots walk around obstacles.
//!
//! Colyseus moved bots with a Voronoi-diagram mobility model; we use the classic
//! alternative with the same effect (obstacle-aware shortest paths between popular
//! waypoints): a visibility graph over waypoints and the corners of obstacles, searched
//! with Dijkstra. Edges are limited in length to keep the graph sparse.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use worldmesh_core::{Aabb, DetRng, Point3};

use crate::config::ModelConfig;

/// Longest navigation edge, units.
const MAX_EDGE: f32 = 900.0;
/// Distance kept from obstacle corners, units.
const CORNER_MARGIN: f32 = 24.0;
/// Side of an [`ObstacleGrid`] cell, units (obstacles are 100-400 units wide).
const GRID_CELL: f32 = 256.0;
/// How far beyond its box an obstacle is indexed, units: far more than the rounding of
/// [`segment_hits`] at any map size (a few thousandths of a unit), so a segment whose
/// bounding box misses every cell of an obstacle cannot hit it.
const GRID_PAD: f32 = 1.0;

/// Obstacles by grid cell: each obstacle is listed in every cell its box (grown by
/// [`GRID_PAD`]) overlaps, cells clamped to the map's grid. A point or segment query
/// tests only the obstacles of the cells its bounding box overlaps, with the same exact
/// tests as a scan of every obstacle, so the answers are the same; only their cost no
/// longer grows with the map.
#[derive(Clone, Debug, Default)]
struct ObstacleGrid {
    nx: i32,
    ny: i32,
    /// Obstacle indices, cell `x + y * nx`, ascending.
    cells: Vec<Vec<u32>>,
}

impl ObstacleGrid {
    fn new(width: f32, height: f32, obstacles: &[Aabb]) -> Self {
        let span = |v: f32| ((v / GRID_CELL).ceil() as i32).clamp(1, 1 << 16);
        let (nx, ny) = (span(width), span(height));
        let mut grid = Self {
            nx,
            ny,
            cells: vec![Vec::new(); (nx as usize) * (ny as usize)],
        };
        for (k, o) in obstacles.iter().enumerate() {
            let (x0, x1) = grid.range_x(o.min.x - GRID_PAD, o.max.x + GRID_PAD);
            let (y0, y1) = grid.range_y(o.min.y - GRID_PAD, o.max.y + GRID_PAD);
            for y in y0..=y1 {
                for x in x0..=x1 {
                    grid.cells[(x + y * nx) as usize].push(k as u32);
                }
            }
        }
        grid
    }

    fn cell(v: f32, n: i32) -> i32 {
        worldmesh_core::floor_i32(v / GRID_CELL).clamp(0, n - 1)
    }

    fn range_x(&self, lo: f32, hi: f32) -> (i32, i32) {
        (Self::cell(lo, self.nx), Self::cell(hi, self.nx))
    }

    fn range_y(&self, lo: f32, hi: f32) -> (i32, i32) {
        (Self::cell(lo, self.ny), Self::cell(hi, self.ny))
    }

    /// The obstacles listed in the cells overlapping `[x0, x1] × [y0, y1]` (finite), an
    /// obstacle once per cell; `None` when that is more cells than obstacles (a scan of
    /// every obstacle is then cheaper).
    fn near(
        &self,
        x0: f32,
        x1: f32,
        y0: f32,
        y1: f32,
        obstacles: usize,
    ) -> Option<impl Iterator<Item = usize> + '_> {
        let (cx0, cx1) = self.range_x(x0, x1);
        let (cy0, cy1) = self.range_y(y0, y1);
        let count = i64::from(cx1 - cx0 + 1) * i64::from(cy1 - cy0 + 1);
        if count > obstacles as i64 {
            return None;
        }
        let nx = self.nx;
        Some((cy0..=cy1).flat_map(move |y| {
            (cx0..=cx1).flat_map(move |x| self.cells[(x + y * nx) as usize].iter().map(|k| *k as usize))
        }))
    }
}

/// Side of a [`NavGrid`] cell, units: longer than [`MAX_EDGE`] with room to spare, so
/// every point within an edge's length of another lies in the other's cell or one of the
/// eight around it, whatever the rounding of the division.
const NAV_CELL: f32 = 1024.0;

/// The navigation nodes by grid cell, so the nodes in an edge's reach of a point are
/// found among the nine cells around it instead of by a scan of every node. A scan made
/// building the graph quadratic in the map's size (1.13 G instructions at 4,096 players,
/// `crates/sim/PERFORMANCE.md`, ninth round) and every path search linear in it. The
/// candidates come out in index order, so the graph and the searches are exactly those
/// of the scan.
#[derive(Clone, Debug, Default)]
struct NavGrid {
    nx: i64,
    ny: i64,
    /// Node indices, cell `x + y * nx`, ascending.
    cells: Vec<Vec<u32>>,
    /// Every node lies inside the grid. If one did not (no generated map has such a
    /// node: nodes are free points, inside the map), queries scan every node instead.
    complete: bool,
    /// The number of nodes (what a scan walks).
    nodes: usize,
}

impl NavGrid {
    fn new(width: f32, height: f32, nav: &[Point3]) -> Self {
        let span = |v: f32| ((v / NAV_CELL).floor() as i64 + 1).clamp(1, 1 << 16);
        let (nx, ny) = (span(width), span(height));
        let mut grid = Self {
            nx,
            ny,
            cells: vec![Vec::new(); (nx * ny) as usize],
            complete: true,
            nodes: nav.len(),
        };
        for (k, p) in nav.iter().enumerate() {
            match grid.cell(*p) {
                Some((x, y)) if (0..nx).contains(&x) && (0..ny).contains(&y) => {
                    grid.cells[(x + y * nx) as usize].push(k as u32);
                }
                _ => grid.complete = false,
            }
        }
        grid
    }

    /// The cell of a finite point (possibly outside the grid).
    fn cell(&self, p: Point3) -> Option<(i64, i64)> {
        (p.x.is_finite() && p.y.is_finite())
            .then(|| ((p.x / NAV_CELL).floor() as i64, (p.y / NAV_CELL).floor() as i64))
    }

    /// Replaces `out` with the indices, ascending, of every node that may lie within
    /// [`MAX_EDGE`] of `p`: those of the nine cells around `p`'s, or every node when the
    /// grid cannot tell (a point that is not finite, an incomplete grid).
    fn near(&self, p: Point3, out: &mut Vec<u32>) {
        out.clear();
        let Some((cx, cy)) = self.cell(p).filter(|_| self.complete) else {
            out.extend(0..self.nodes as u32);
            return;
        };
        for y in (cy.saturating_sub(1)..=cy.saturating_add(1)).filter(|y| (0..self.ny).contains(y)) {
            for x in (cx.saturating_sub(1)..=cx.saturating_add(1)).filter(|x| (0..self.nx).contains(x)) {
                out.extend_from_slice(&self.cells[(x + y * self.nx) as usize]);
            }
        }
        out.sort_unstable();
    }
}

/// A generated map.
#[derive(Clone, Debug)]
pub struct GameMap {
    /// The workload parameters the map was made for.
    pub config: ModelConfig,
    /// Width (x), units.
    pub width: f32,
    /// Height (y), units.
    pub height: f32,
    /// Obstacles (boxes in x/y; they block movement and line of sight). Read-only after
    /// [`GameMap::generate`]: `is_free`, `clear` and `path` use the index built from them
    /// there.
    pub obstacles: Vec<Aabb>,
    /// Waypoints, most popular first.
    pub waypoints: Vec<Point3>,
    cum_popularity: Vec<f64>,
    nav: Vec<Point3>,
    adj: Vec<Vec<(u32, f32)>>,
    /// Each navigation node's connected component of the graph (numbered from 0): a
    /// waypoint is reachable only from nodes of its own.
    component: Vec<u32>,
    /// `obstacles` by grid cell, for [`GameMap::is_free`] and [`GameMap::clear`].
    grid: ObstacleGrid,
    /// `nav` by grid cell, for building the graph and entering it in a search.
    nav_grid: NavGrid,
}

/// Does the segment a→b cross box `o` (in x/y)? Slab method.
fn segment_hits(a: Point3, b: Point3, o: &Aabb) -> bool {
    let (mut t0, mut t1) = (0.0f32, 1.0f32);
    for (p, d, lo, hi) in [
        (a.x, b.x - a.x, o.min.x, o.max.x),
        (a.y, b.y - a.y, o.min.y, o.max.y),
    ] {
        if d.abs() < 1e-9 {
            if p < lo || p > hi {
                return false;
            }
        } else {
            let (mut u, mut v) = ((lo - p) / d, (hi - p) / d);
            if u > v {
                std::mem::swap(&mut u, &mut v);
            }
            t0 = t0.max(u);
            t1 = t1.min(v);
            if t0 > t1 {
                return false;
            }
        }
    }
    true
}

/// Is `p` inside box `o` in x/y (edges included)?
fn contains_xy(o: &Aabb, p: Point3) -> bool {
    o.min.x <= p.x && p.x <= o.max.x && o.min.y <= p.y && p.y <= o.max.y
}

/// The connected components of the graph `adj` (undirected): each node's component
/// number, components numbered in the order of their lowest node.
fn components(adj: &[Vec<(u32, f32)>]) -> Vec<u32> {
    let mut component = vec![u32::MAX; adj.len()];
    let mut next = 0;
    let mut stack = Vec::new();
    for start in 0..adj.len() {
        if component[start] != u32::MAX {
            continue;
        }
        component[start] = next;
        stack.push(start);
        while let Some(u) = stack.pop() {
            for &(v, _) in &adj[u] {
                if component[v as usize] == u32::MAX {
                    component[v as usize] = next;
                    stack.push(v as usize);
                }
            }
        }
        next += 1;
    }
    component
}

#[derive(PartialEq)]
struct Dist(f32, u32);
impl Eq for Dist {}
impl PartialOrd for Dist {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Dist {
    fn cmp(&self, o: &Self) -> Ordering {
        o.0.total_cmp(&self.0).then_with(|| o.1.cmp(&self.1))
    }
}

impl GameMap {
    /// Generates the map for `players` players.
    pub fn generate(config: &ModelConfig, players: usize, seed: u64) -> Self {
        let mut rng = DetRng::new(seed).fork(0x006d_6170);
        let (width, height) = config.map_size(players);
        let units = (width * height) / (config.side_per_16_players * config.side_per_16_players);
        let count = |per16: f32| ((per16 * units).round() as usize).max(1);
        let mut obstacles = Vec::new();
        for _ in 0..count(config.obstacles_per_16) {
            let w = rng.range_f32(config.obstacle_min, config.obstacle_max);
            let h = rng.range_f32(config.obstacle_min, config.obstacle_max);
            let x = rng.range_f32(0.0, (width - w).max(0.0));
            let y = rng.range_f32(0.0, (height - h).max(0.0));
            obstacles.push(Aabb::from_corners(
                Point3::new(x, y, 0.0),
                Point3::new(x + w, y + h, 100.0),
            ));
        }
        let grid = ObstacleGrid::new(width, height, &obstacles);
        let mut map = GameMap {
            config: config.clone(),
            width,
            height,
            grid,
            obstacles,
            waypoints: Vec::new(),
            cum_popularity: Vec::new(),
            nav: Vec::new(),
            adj: Vec::new(),
            component: Vec::new(),
            nav_grid: NavGrid::default(),
        };
        let n_wp = count(config.waypoints_per_16).max(2);
        for _ in 0..n_wp {
            let p = map.random_free_point(&mut rng);
            map.waypoints.push(p);
        }
        // Zipf-like popularity: the k-th waypoint has weight 1 / k^s.
        let mut acc = 0.0;
        for k in 1..=n_wp {
            acc += 1.0 / (k as f64).powf(config.zipf_exponent);
            map.cum_popularity.push(acc);
        }
        map.build_nav();
        map
    }

    /// The box a distributed locator keys (`rangedht`) or cuts into regions (`dht`): the
    /// map, 1000 units above and below the ground.
    pub fn locator_bounds(&self) -> Aabb {
        Aabb::from_corners(
            Point3::new(0.0, 0.0, -1000.0),
            Point3::new(self.width, self.height, 1000.0),
        )
    }

    /// True if `p` is inside the map and outside every obstacle.
    pub fn is_free(&self, p: Point3) -> bool {
        p.x >= 0.0
            && p.y >= 0.0
            && p.x <= self.width
            && p.y <= self.height
            && !match self.grid.near(p.x, p.x, p.y, p.y, self.obstacles.len()) {
                Some(mut near) => near.any(|k| contains_xy(&self.obstacles[k], p)),
                None => self.obstacles.iter().any(|o| contains_xy(o, p)),
            }
    }

    /// True if the straight segment a→b crosses no obstacle (line of sight, walkability).
    pub fn clear(&self, a: Point3, b: Point3) -> bool {
        let finite = [a.x, a.y, b.x, b.y].iter().all(|v| v.is_finite());
        let near = finite
            .then(|| {
                self.grid.near(
                    a.x.min(b.x),
                    a.x.max(b.x),
                    a.y.min(b.y),
                    a.y.max(b.y),
                    self.obstacles.len(),
                )
            })
            .flatten();
        !match near {
            Some(mut near) => near.any(|k| segment_hits(a, b, &self.obstacles[k])),
            None => self.obstacles.iter().any(|o| segment_hits(a, b, o)),
        }
    }

    /// A uniformly random free point.
    pub fn random_free_point(&self, rng: &mut DetRng) -> Point3 {
        for _ in 0..1000 {
            let p = Point3::new(
                rng.range_f32(0.0, self.width),
                rng.range_f32(0.0, self.height),
                0.0,
            );
            if self.is_free(p) {
                return p;
            }
        }
        Point3::new(self.width / 2.0, self.height / 2.0, 0.0)
    }

    /// A waypoint index drawn by popularity.
    pub fn pick_waypoint(&self, rng: &mut DetRng) -> usize {
        let total = self.cum_popularity.last().copied().unwrap_or(1.0);
        let r = rng.next_f64() * total;
        self.cum_popularity
            .partition_point(|c| *c <= r)
            .min(self.waypoints.len().saturating_sub(1))
    }

    fn build_nav(&mut self) {
        let mut nav: Vec<Point3> = self.waypoints.clone();
        for o in &self.obstacles {
            for (x, y) in [
                (o.min.x - CORNER_MARGIN, o.min.y - CORNER_MARGIN),
                (o.max.x + CORNER_MARGIN, o.min.y - CORNER_MARGIN),
                (o.min.x - CORNER_MARGIN, o.max.y + CORNER_MARGIN),
                (o.max.x + CORNER_MARGIN, o.max.y + CORNER_MARGIN),
            ] {
                let p = Point3::new(x, y, 0.0);
                if self.is_free(p) {
                    nav.push(p);
                }
            }
        }
        let grid = NavGrid::new(self.width, self.height, &nav);
        let mut adj = vec![Vec::new(); nav.len()];
        let mut near = Vec::new();
        for i in 0..nav.len() {
            // The pairs (i, j > i) in index order, as a scan of every pair takes them:
            // each node's edges end up sorted by the other end either way.
            grid.near(nav[i], &mut near);
            for j in near.iter().map(|j| *j as usize).filter(|j| *j > i) {
                let d = nav[i].distance(nav[j]);
                if d <= MAX_EDGE && self.clear(nav[i], nav[j]) {
                    adj[i].push((j as u32, d));
                    adj[j].push((i as u32, d));
                }
            }
        }
        self.component = components(&adj);
        self.nav = nav;
        self.adj = adj;
        self.nav_grid = grid;
    }

    /// A walkable path from `from` to waypoint `wp` (the waypoint last), or `None` if
    /// the navigation graph does not connect them.
    pub fn path(&self, from: Point3, wp: usize) -> Option<Vec<Point3>> {
        // Only the nodes in reach of `from` that share the waypoint's component can lead
        // to it: the search starts from those alone, and not at all without one. The
        // search of the others was wasted: it ran through every component in reach before
        // giving up, and on the largest maps most waypoints lie in another component than
        // the walker (crates/sim/PERFORMANCE.md, "fourth round"). Same answers, since
        // nothing outside the component changes a distance or a predecessor inside it,
        // and the heap's order is total.
        let target = *self.component.get(wp)?;
        self.search(from, wp, |i| self.component[i] == target)
    }

    /// Dijkstra's search from `from` to waypoint `wp`, entering the graph at the nodes
    /// in reach of `from` that `entry` accepts.
    fn search(&self, from: Point3, wp: usize, entry: impl Fn(usize) -> bool) -> Option<Vec<Point3>> {
        let goal = *self.waypoints.get(wp)?;
        if self.clear(from, goal) {
            return Some(vec![goal]);
        }
        let n = self.nav.len();
        let mut dist = Vec::new();
        let mut prev = Vec::new();
        let mut heap = BinaryHeap::new();
        let mut near = Vec::new();
        self.nav_grid.near(from, &mut near);
        for i in near.into_iter().map(|i| i as usize) {
            if !entry(i) {
                continue;
            }
            let p = &self.nav[i];
            let d = from.distance(*p);
            if d <= MAX_EDGE && self.clear(from, *p) {
                if dist.is_empty() {
                    dist = vec![f32::INFINITY; n];
                    prev = vec![u32::MAX; n];
                }
                dist[i] = d;
                heap.push(Dist(d, i as u32));
            }
        }
        while let Some(Dist(d, u)) = heap.pop() {
            let u = u as usize;
            if d > dist[u] {
                continue;
            }
            if u == wp {
                let mut path = vec![self.nav[u]];
                let mut c = u;
                while prev[c] != u32::MAX {
                    c = prev[c] as usize;
                    path.push(self.nav[c]);
                }
                path.reverse();
                return Some(path);
            }
            for &(v, w) in &self.adj[u] {
                let nd = d + w;
                if nd < dist[v as usize] {
                    dist[v as usize] = nd;
                    prev[v as usize] = u as u32;
                    heap.push(Dist(nd, v));
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MapKind;

    #[test]
    fn sizes_keep_density_constant() {
        let c = ModelConfig::default();
        let (w, h) = c.map_size(64);
        assert_eq!((w, h), (2400.0 * 4.0, 2400.0));
        let sq = ModelConfig {
            map: MapKind::Sqr,
            ..c
        };
        let (w, h) = sq.map_size(64);
        assert_eq!((w, h), (4800.0, 4800.0));
    }

    #[test]
    fn segments_and_boxes() {
        let o = Aabb::from_corners(Point3::new(10.0, 10.0, 0.0), Point3::new(20.0, 20.0, 1.0));
        assert!(segment_hits(
            Point3::new(0.0, 15.0, 0.0),
            Point3::new(30.0, 15.0, 0.0),
            &o
        ));
        assert!(!segment_hits(
            Point3::new(0.0, 25.0, 0.0),
            Point3::new(30.0, 25.0, 0.0),
            &o
        ));
        assert!(!segment_hits(
            Point3::new(0.0, 0.0, 0.0),
            Point3::new(9.0, 30.0, 0.0),
            &o
        ));
        assert!(segment_hits(
            Point3::new(15.0, 0.0, 0.0),
            Point3::new(15.0, 12.0, 0.0),
            &o
        ));
    }

    /// The grid answers exactly as a scan of every obstacle: random points and segments,
    /// short and map-long, and points on obstacle edges and just outside them.
    #[test]
    fn grid_queries_agree_with_a_scan_of_every_obstacle() {
        for (players, seed) in [(16, 3), (256, 5), (1024, 9)] {
            let m = GameMap::generate(&ModelConfig::default(), players, seed);
            let scan_free = |p: Point3| {
                p.x >= 0.0
                    && p.y >= 0.0
                    && p.x <= m.width
                    && p.y <= m.height
                    && !m.obstacles.iter().any(|o| contains_xy(o, p))
            };
            let scan_clear = |a: Point3, b: Point3| !m.obstacles.iter().any(|o| segment_hits(a, b, o));
            let mut rng = DetRng::new(seed);
            let mut points: Vec<Point3> = (0..400)
                .map(|_| {
                    Point3::new(
                        rng.range_f32(-50.0, m.width + 50.0),
                        rng.range_f32(-50.0, m.height + 50.0),
                        0.0,
                    )
                })
                .collect();
            for o in m.obstacles.iter().take(40) {
                for (x, y) in [
                    (o.min.x, o.min.y),
                    (o.max.x, o.max.y),
                    (o.max.x + 0.001, o.min.y),
                    (o.min.x, o.max.y + 0.01),
                ] {
                    points.push(Point3::new(x, y, 0.0));
                }
            }
            for (i, &a) in points.iter().enumerate() {
                assert_eq!(m.is_free(a), scan_free(a), "is_free({a})");
                let b = points[(i * 7 + 3) % points.len()];
                let near = Point3::new(
                    a.x + rng.range_f32(-300.0, 300.0),
                    a.y + rng.range_f32(-300.0, 300.0),
                    0.0,
                );
                for b in [b, near, a] {
                    assert_eq!(m.clear(a, b), scan_clear(a, b), "clear({a}, {b})");
                }
            }
            assert_eq!(
                m.clear(Point3::new(f32::NAN, 0.0, 0.0), points[0]),
                scan_clear(Point3::new(f32::NAN, 0.0, 0.0), points[0])
            );
        }
    }

    /// The navigation grid changes nothing: the graph is the one a scan of every pair of
    /// nodes builds, edge for edge and in the same order, and every search (from points
    /// inside and outside the map, on cell boundaries, at an edge's length from nodes,
    /// and not finite) answers as the search that scans every node to enter the graph.
    #[test]
    fn the_navigation_grid_gives_the_graph_and_paths_of_a_scan() {
        for (players, seed) in [(16, 2), (200, 4), (512, 7)] {
            let m = GameMap::generate(&ModelConfig::default(), players, seed);
            assert!(m.nav_grid.complete);
            let mut adj = vec![Vec::new(); m.nav.len()];
            for i in 0..m.nav.len() {
                for j in i + 1..m.nav.len() {
                    let d = m.nav[i].distance(m.nav[j]);
                    if d <= MAX_EDGE && m.clear(m.nav[i], m.nav[j]) {
                        adj[i].push((j as u32, d));
                        adj[j].push((i as u32, d));
                    }
                }
            }
            assert_eq!(m.adj, adj, "{players} players");
            let mut scan = m.clone();
            scan.nav_grid.complete = false;
            let mut rng = DetRng::new(seed);
            let mut froms: Vec<Point3> = (0..150)
                .map(|_| {
                    Point3::new(
                        rng.range_f32(-1200.0, m.width + 1200.0),
                        rng.range_f32(-1200.0, m.height + 1200.0),
                        0.0,
                    )
                })
                .collect();
            for k in 0..30 {
                // At an edge's length (and just under it) from a node, across cells.
                let n = m.nav[(k * 37) % m.nav.len()];
                froms.push(Point3::new(n.x + MAX_EDGE, n.y, 0.0));
                froms.push(Point3::new(n.x, n.y - MAX_EDGE * 0.999, 0.0));
                froms.push(Point3::new(NAV_CELL * (k % 4) as f32, n.y, 0.0));
            }
            froms.push(Point3::new(f32::NAN, 10.0, 0.0));
            froms.push(Point3::new(f32::INFINITY, 10.0, 0.0));
            let mut found = 0;
            for (i, from) in froms.iter().enumerate() {
                let wp = (i * 13) % m.waypoints.len();
                let p = m.path(*from, wp);
                assert_eq!(p, scan.path(*from, wp), "{players} players: from {from} to {wp}");
                found += usize::from(p.is_some_and(|p| p.len() > 1));
            }
            assert!(
                found > 5,
                "{players} players: searches that found a path: {found}"
            );
        }
    }

    /// On a map whose graph falls into several components (a long fed-rect strip), the
    /// search kept to the waypoint's component answers exactly as the search of the
    /// whole graph, found paths and missing ones alike.
    #[test]
    fn paths_kept_to_the_waypoints_component_are_the_whole_graphs() {
        let m = GameMap::generate(&ModelConfig::default(), 512, 7);
        let count = m.component.iter().max().map_or(0, |c| c + 1);
        assert!(count > 1, "the test needs a graph in pieces ({count} component)");
        assert_eq!(m.component.len(), m.nav.len());
        for (u, edges) in m.adj.iter().enumerate() {
            assert!(
                edges
                    .iter()
                    .all(|(v, _)| m.component[*v as usize] == m.component[u])
            );
        }
        let mut rng = DetRng::new(3);
        let (mut found, mut missing) = (0, 0);
        for _ in 0..300 {
            let from = m.random_free_point(&mut rng);
            let wp = m.pick_waypoint(&mut rng);
            let p = m.path(from, wp);
            // The search as it was: entering at every node in reach.
            let whole = m.search(from, wp, |_| true);
            assert_eq!(p, whole, "from {from} to waypoint {wp}");
            if p.is_some() {
                found += 1;
            } else {
                missing += 1;
            }
        }
        assert!(
            found > 30 && missing > 30,
            "both kinds of answer: {found} found, {missing} missing"
        );
    }

    #[test]
    fn paths_avoid_obstacles_and_popularity_is_zipf() {
        let m = GameMap::generate(&ModelConfig::default(), 32, 7);
        assert!(m.waypoints.iter().all(|w| m.is_free(*w)));
        let mut rng = DetRng::new(1);
        let mut found = 0;
        for _ in 0..50 {
            let from = m.random_free_point(&mut rng);
            let wp = m.pick_waypoint(&mut rng);
            if let Some(path) = m.path(from, wp) {
                found += 1;
                let mut cur = from;
                for p in &path {
                    assert!(m.clear(cur, *p), "leg {cur} -> {p} crosses an obstacle");
                    cur = *p;
                }
                assert_eq!(*path.last().unwrap(), m.waypoints[wp]);
            }
        }
        assert!(
            found >= 45,
            "the navigation graph connects most of the map ({found}/50)"
        );
        let mut counts = vec![0u32; m.waypoints.len()];
        for _ in 0..20_000 {
            counts[m.pick_waypoint(&mut rng)] += 1;
        }
        // Weight 1/k: the first waypoint is about twice as popular as the second.
        let ratio = f64::from(counts[0]) / f64::from(counts[1]);
        assert!((1.8..2.2).contains(&ratio), "{ratio} {counts:?}");
    }
}
