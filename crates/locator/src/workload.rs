//! A synthetic moving-player workload for the harness and the locator experiments,
//! shaped like the model game of paper `000` §4.1: players walk between waypoints of
//! Zipf-like popularity on a `rect` (2400 high, 2400·n/16 wide) or `sqr` (2400·√(n/16)
//! square) map, with Quake-like area-of-interest boxes (half-extent 450 by default).

use worldmesh_core::{Aabb, DetRng, NodeId, ObjectId, Point3};

use crate::config::LocatorConfig;
use crate::locator::Op;

/// One moving player (a primary with a position and an area of interest).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Player {
    /// Object id.
    pub id: ObjectId,
    /// Node holding the primary.
    pub node: NodeId,
    /// Current position.
    pub pos: Point3,
    /// Waypoint it walks to.
    pub target: usize,
}

/// Players moving between Zipf-popular waypoints.
#[derive(Clone, Debug)]
pub struct Workload {
    /// Map bounds.
    pub world: Aabb,
    /// Waypoints.
    pub waypoints: Vec<Point3>,
    weights: Vec<f64>,
    near: Vec<Vec<usize>>,
    /// The players.
    pub players: Vec<Player>,
    /// Area-of-interest half-extent, units.
    pub aoi_half: f32,
    /// Walking speed, units/s.
    pub speed: f32,
    rng: DetRng,
}

impl Workload {
    /// `per_node` players on each of `nodes` nodes, on a `rect` or `sqr` map.
    pub fn new(nodes: usize, per_node: usize, rect: bool, seed: u64) -> Self {
        let world = LocatorConfig::model_world(nodes, rect);
        let mut rng = DetRng::new(seed).fork(0x3017);
        let wcount = 4 * nodes + 8;
        let waypoints: Vec<Point3> = (0..wcount)
            .map(|_| {
                Point3::new(
                    rng.range_f32(world.min.x, world.max.x),
                    rng.range_f32(world.min.y, world.max.y),
                    0.0,
                )
            })
            .collect();
        // Zipf-like popularity: weight 1/rank over a random ranking.
        let mut rank: Vec<usize> = (0..wcount).collect();
        rng.shuffle(&mut rank);
        let mut weights = vec![0.0; wcount];
        for (r, w) in rank.iter().enumerate() {
            weights[*w] = 1.0 / (r as f64 + 1.0);
        }
        let near: Vec<Vec<usize>> = (0..wcount)
            .map(|i| {
                let mut o: Vec<usize> = (0..wcount).filter(|j| *j != i).collect();
                o.sort_by(|a, b| {
                    let da = waypoints[i].distance(waypoints[*a]);
                    let db = waypoints[i].distance(waypoints[*b]);
                    da.total_cmp(&db).then(a.cmp(b))
                });
                o.truncate(8);
                o
            })
            .collect();
        let mut w = Self {
            world,
            waypoints,
            weights,
            near,
            players: Vec::new(),
            aoi_half: 450.0,
            speed: 200.0,
            rng,
        };
        for n in 0..nodes {
            for k in 0..per_node {
                let start = w.pick(None);
                let p = w.waypoints[start];
                let jitter = Point3::new(
                    w.rng.range_f32(-100.0, 100.0),
                    w.rng.range_f32(-100.0, 100.0),
                    0.0,
                );
                let target = w.pick(Some(start));
                w.players.push(Player {
                    id: ObjectId::new(NodeId(n as u32), k as u32 + 1),
                    node: NodeId(n as u32),
                    pos: w.clamp(Point3::new(p.x + jitter.x, p.y + jitter.y, 0.0)),
                    target,
                });
            }
        }
        w
    }

    fn clamp(&self, p: Point3) -> Point3 {
        Point3::new(
            p.x.clamp(self.world.min.x, self.world.max.x),
            p.y.clamp(self.world.min.y, self.world.max.y),
            0.0,
        )
    }

    /// A waypoint drawn by popularity, among the neighbours of `from` if given.
    fn pick(&mut self, from: Option<usize>) -> usize {
        let cands: Vec<usize> = match from {
            Some(f) => self.near[f].clone(),
            None => (0..self.waypoints.len()).collect(),
        };
        let total: f64 = cands.iter().map(|c| self.weights[*c]).sum();
        let mut x = self.rng.next_f64() * total;
        for c in &cands {
            x -= self.weights[*c];
            if x <= 0.0 {
                return *c;
            }
        }
        cands.last().copied().unwrap_or(0)
    }

    /// Moves every player for `dt` seconds.
    pub fn step(&mut self, dt: f32) {
        for i in 0..self.players.len() {
            let p = self.players[i];
            let t = self.waypoints[p.target];
            let d = p.pos.distance(t);
            let step = self.speed * dt;
            if d <= step {
                let next = self.pick(Some(p.target));
                self.players[i].pos = t;
                self.players[i].target = next;
            } else {
                let f = step / d;
                self.players[i].pos =
                    Point3::new(p.pos.x + (t.x - p.pos.x) * f, p.pos.y + (t.y - p.pos.y) * f, 0.0);
            }
        }
    }

    /// The area of interest of a player at `pos`.
    pub fn aoi(&self, pos: Point3) -> Aabb {
        Aabb::around(pos, Point3::new(self.aoi_half, self.aoi_half, 50.0))
    }

    /// The locator operations of `node` for this frame (publish + subscribe each player).
    pub fn ops(&self, node: NodeId) -> Vec<Op> {
        self.players
            .iter()
            .filter(|p| p.node == node)
            .flat_map(|p| {
                [
                    Op::Publish {
                        id: p.id,
                        pos: p.pos,
                        kind: 0,
                        ahead: None,
                    },
                    Op::Subscribe {
                        owner: p.id,
                        region: self.aoi(p.pos),
                    },
                ]
            })
            .collect()
    }
}
