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

/// A generated map.
#[derive(Clone, Debug)]
pub struct GameMap {
    /// The workload parameters the map was made for.
    pub config: ModelConfig,
    /// Width (x), units.
    pub width: f32,
    /// Height (y), units.
    pub height: f32,
    /// Obstacles (boxes in x/y; they block movement and line of sight).
    pub obstacles: Vec<Aabb>,
    /// Waypoints, most popular first.
    pub waypoints: Vec<Point3>,
    cum_popularity: Vec<f64>,
    nav: Vec<Point3>,
    adj: Vec<Vec<(u32, f32)>>,
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
        let mut map = GameMap {
            config: config.clone(),
            width,
            height,
            obstacles,
            waypoints: Vec::new(),
            cum_popularity: Vec::new(),
            nav: Vec::new(),
            adj: Vec::new(),
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
            && !self
                .obstacles
                .iter()
                .any(|o| o.min.x <= p.x && p.x <= o.max.x && o.min.y <= p.y && p.y <= o.max.y)
    }

    /// True if the straight segment a→b crosses no obstacle (line of sight, walkability).
    pub fn clear(&self, a: Point3, b: Point3) -> bool {
        !self.obstacles.iter().any(|o| segment_hits(a, b, o))
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
        let mut adj = vec![Vec::new(); nav.len()];
        for i in 0..nav.len() {
            for j in i + 1..nav.len() {
                let d = nav[i].distance(nav[j]);
                if d <= MAX_EDGE && self.clear(nav[i], nav[j]) {
                    adj[i].push((j as u32, d));
                    adj[j].push((i as u32, d));
                }
            }
        }
        self.nav = nav;
        self.adj = adj;
    }

    /// A walkable path from `from` to waypoint `wp` (the waypoint last), or `None` if
    /// the navigation graph does not connect them.
    pub fn path(&self, from: Point3, wp: usize) -> Option<Vec<Point3>> {
        let goal = *self.waypoints.get(wp)?;
        if self.clear(from, goal) {
            return Some(vec![goal]);
        }
        let n = self.nav.len();
        let mut dist = vec![f32::INFINITY; n];
        let mut prev = vec![u32::MAX; n];
        let mut heap = BinaryHeap::new();
        for (i, p) in self.nav.iter().enumerate() {
            let d = from.distance(*p);
            if d <= MAX_EDGE && self.clear(from, *p) {
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
