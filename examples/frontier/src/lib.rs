//! Frontier: a top-down space game on worldmesh, built only on its public crates — the
//! second game beside the Colyseus FPS model workload, and different in kind:
//!
//! - **static resources**: asteroids that ships mine (writes that drain their ore);
//! - **NPC swarms** of drones that move from region to region of the sector as a flock,
//!   their target changing every [`SWARM_LEG_S`] seconds;
//! - **player-built structures**: outposts a ship builds from the ore it carries (spawned by
//!   the ship, `Durable`: they and every deposit or hit acknowledged survive any server's
//!   failure), where ships deposit ore and that drones attack;
//! - **ships** flown by players (`Playable`: inputs are thrust and a build order) or, when
//!   nobody pilots them, by a small mining routine.
#![forbid(unsafe_code)]

use worldmesh::{Aabb, Durability, GameObject, NodeId, ObjectId, Playable, Point3, Replicate, ThinkContext};

/// Ore a ship spends to build an outpost.
pub const BUILD_COST: u32 = 40;
/// Ore a ship carries at most.
pub const HOLD: u32 = 60;
/// Ore mined per frame at an asteroid.
pub const MINE_RATE: u32 = 1;
/// Distance within which a ship mines, deposits, or a drone hits.
pub const REACH: f32 = 12.0;
/// Ship speed, units per second.
pub const SHIP_SPEED: f32 = 40.0;
/// Drone speed, units per second.
pub const DRONE_SPEED: f32 = 25.0;
/// Seconds a swarm flies towards one region before it picks the next.
pub const SWARM_LEG_S: f64 = 20.0;
/// How far a ship sees.
pub const SHIP_SIGHT: f32 = 150.0;
/// How far a drone sees.
pub const DRONE_SIGHT: f32 = 60.0;
/// Hull of a new outpost.
pub const HULL: u32 = 500;

/// The static sector every node builds from its seed.
#[derive(Clone, Debug)]
pub struct Sector {
    /// Side of the square sector.
    pub size: f32,
    /// Regions per side (swarms fly between region centres).
    pub regions: u32,
}

impl Sector {
    /// The sector of a world with `nodes` founders.
    pub fn new(nodes: usize) -> Self {
        let regions = (nodes as f32).sqrt().ceil().max(2.0) as u32;
        Self {
            size: 400.0 * regions as f32,
            regions,
        }
    }

    /// The region (row-major index) holding `p`.
    pub fn region_of(&self, p: Point3) -> u32 {
        let side = self.size / self.regions as f32;
        let col = ((p.x / side) as u32).min(self.regions - 1);
        let row = ((p.y / side) as u32).min(self.regions - 1);
        row * self.regions + col
    }

    /// The centre of region `r`.
    pub fn centre(&self, r: u32) -> Point3 {
        let side = self.size / self.regions as f32;
        let (row, col) = (r / self.regions, r % self.regions);
        Point3::new((col as f32 + 0.5) * side, (row as f32 + 0.5) * side, 0.0)
    }

    /// The bounds every position lies in.
    pub fn bounds(&self) -> Aabb {
        Aabb::from_corners(
            Point3::new(0.0, 0.0, -1.0),
            Point3::new(self.size, self.size, 1.0),
        )
    }

    fn clamp(&self, p: Point3) -> Point3 {
        Point3::new(p.x.clamp(0.0, self.size), p.y.clamp(0.0, self.size), 0.0)
    }
}

/// What a pilot asks of their ship.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Replicate, bitcode::Encode, bitcode::Decode)]
pub struct Helm {
    /// Thrust direction, each axis in -1..=1 (clamped).
    pub thrust: (i8, i8),
    /// Build an outpost here (if the hold has the ore).
    pub build: bool,
}

/// Everything in the sector.
#[derive(Clone, Debug, PartialEq, Replicate)]
pub enum Body {
    /// A ship, piloted by a player or by its mining routine.
    Ship {
        /// The player flying it (`None`: the mining routine does).
        pilot: Option<u64>,
        /// Where it is.
        pos: Point3,
        /// Ore in the hold.
        cargo: u32,
        /// The pilot's last order, and its input number.
        helm: Helm,
        /// The last input applied.
        last_input: u32,
        /// The pilot left: the ship removes itself.
        left: bool,
    },
    /// A static resource.
    Asteroid {
        /// Where it is.
        pos: Point3,
        /// Ore left.
        ore: u32,
    },
    /// An NPC of a swarm.
    Drone {
        /// Where it is.
        pos: Point3,
        /// Its swarm (drones of one swarm fly to the same regions).
        swarm: u32,
    },
    /// A structure a ship built.
    Outpost {
        /// Where it stands.
        pos: Point3,
        /// The ship that built it.
        builder: ObjectId,
        /// Ore deposited.
        stock: u32,
        /// Hull left (0: a wreck).
        hull: u32,
    },
}

/// A write one body makes to another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, bitcode::Encode, bitcode::Decode)]
pub enum Act {
    /// A pilot's input number `seq`, to their ship.
    Input(u32, Helm),
    /// The pilot left, to their ship.
    Leave,
    /// Ore taken, to an asteroid.
    Mine(u32),
    /// Ore brought, to an outpost.
    Deposit(u32),
    /// A drone's hit, to an outpost.
    Hit(u32),
}

/// The region swarm `swarm` flies to at `secs` (a fixed walk through the regions).
pub fn swarm_target(sector: &Sector, swarm: u32, secs: f64) -> u32 {
    let leg = (secs / SWARM_LEG_S) as u64;
    let h = (u64::from(swarm) + 1)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(leg.wrapping_mul(0xD1B5_4A32_D192_ED03));
    ((h >> 33) % u64::from(sector.regions * sector.regions)) as u32
}

fn towards(from: Point3, to: Point3, step: f32) -> Point3 {
    let (dx, dy) = (to.x - from.x, to.y - from.y);
    let d = (dx * dx + dy * dy).sqrt();
    if d <= step || d == 0.0 {
        to
    } else {
        Point3::new(from.x + dx / d * step, from.y + dy / d * step, 0.0)
    }
}

/// The nearest body `f` accepts, among those this node holds.
fn nearest(
    ctx: &ThinkContext<'_, Body>,
    at: Point3,
    f: impl Fn(&Body) -> bool,
) -> Option<(ObjectId, Point3)> {
    ctx.store
        .iter()
        .filter(|(_, e)| f(&e.object))
        .map(|(id, e)| (id, e.object.position()))
        .min_by(|a, b| a.1.distance(at).total_cmp(&b.1.distance(at)))
}

impl Body {
    fn think_ship(&mut self, ctx: &mut ThinkContext<'_, Self>) {
        let me = ctx.id;
        let Body::Ship {
            pilot,
            pos,
            cargo,
            helm,
            left,
            ..
        } = self
        else {
            return;
        };
        if *left {
            ctx.delete_self();
            return;
        }
        let step = SHIP_SPEED * ctx.dt.as_secs_f32();
        let here = *pos;
        let mut build = false;
        if pilot.is_some() {
            let (tx, ty) = (
                f32::from(helm.thrust.0.clamp(-1, 1)),
                f32::from(helm.thrust.1.clamp(-1, 1)),
            );
            *pos = ctx
                .world
                .clamp(Point3::new(here.x + tx * step, here.y + ty * step, 0.0));
            build = helm.build;
            helm.build = false;
        } else if *cargo < BUILD_COST {
            // Mining routine: to the nearest asteroid with ore, and mine it.
            if let Some((id, at)) =
                nearest(ctx, here, |b| matches!(b, Body::Asteroid { ore, .. } if *ore > 0))
            {
                if at.distance(here) <= REACH {
                    ctx.write(id, Act::Mine(MINE_RATE));
                    *cargo = (*cargo + MINE_RATE).min(HOLD);
                } else {
                    *pos = towards(here, at, step);
                }
            } else {
                let roam = ctx
                    .world
                    .centre(ctx.rng.below(u64::from(ctx.world.regions.pow(2))) as u32);
                *pos = towards(here, roam, step);
            }
        } else {
            // Full hold: to an outpost this ship built, or build one here.
            let mine = nearest(
                ctx,
                here,
                |b| matches!(b, Body::Outpost { builder, hull, .. } if *builder == me && *hull > 0),
            );
            match mine {
                Some((id, at)) if at.distance(here) <= REACH => {
                    ctx.write(id, Act::Deposit(*cargo));
                    *cargo = 0;
                }
                Some((_, at)) if at.distance(here) < SHIP_SIGHT => *pos = towards(here, at, step),
                _ => build = true,
            }
        }
        if build && *cargo >= BUILD_COST {
            *cargo -= BUILD_COST;
            ctx.spawn(Body::Outpost {
                pos: *pos,
                builder: me,
                stock: 0,
                hull: HULL,
            });
        }
    }

    fn think_drone(&mut self, ctx: &mut ThinkContext<'_, Self>) {
        let Body::Drone { pos, swarm } = self else {
            return;
        };
        let here = *pos;
        let target = ctx
            .world
            .centre(swarm_target(ctx.world, *swarm, ctx.now.as_secs_f64()));
        let step = DRONE_SPEED * ctx.dt.as_secs_f32();
        // A little scatter so a swarm does not fly in one point.
        let jitter = Point3::new(
            ctx.rng.range_f32(-30.0, 30.0),
            ctx.rng.range_f32(-30.0, 30.0),
            0.0,
        );
        *pos = ctx.world.clamp(towards(
            here,
            Point3::new(target.x + jitter.x, target.y + jitter.y, 0.0),
            step,
        ));
        if let Some((id, at)) = nearest(
            ctx,
            here,
            |b| matches!(b, Body::Outpost { hull, .. } if *hull > 0),
        ) && at.distance(here) <= REACH
            && ctx.rng.chance(0.2)
        {
            ctx.write(id, Act::Hit(1));
        }
    }
}

impl GameObject for Body {
    type World = Sector;
    type Write = Act;

    fn think(&mut self, ctx: &mut ThinkContext<'_, Self>) {
        match self {
            Body::Ship { .. } => self.think_ship(ctx),
            Body::Drone { .. } => self.think_drone(ctx),
            Body::Asteroid { .. } | Body::Outpost { .. } => {}
        }
    }

    fn position(&self) -> Point3 {
        match self {
            Body::Ship { pos, .. }
            | Body::Asteroid { pos, .. }
            | Body::Drone { pos, .. }
            | Body::Outpost { pos, .. } => *pos,
        }
    }

    fn kind(&self) -> u8 {
        match self {
            Body::Ship { .. } => 0,
            Body::Asteroid { .. } => 1,
            Body::Drone { .. } => 2,
            Body::Outpost { .. } => 3,
        }
    }

    fn interest(&self, _world: &Sector) -> Option<Aabb> {
        let sight = match self {
            Body::Ship { .. } => SHIP_SIGHT,
            Body::Drone { .. } => DRONE_SIGHT,
            Body::Asteroid { .. } | Body::Outpost { .. } => return None,
        };
        Some(Aabb::around(self.position(), Point3::new(sight, sight, 1.0)))
    }

    fn apply_write(&mut self, act: &Act) {
        match (self, act) {
            (Body::Ship { helm, last_input, .. }, Act::Input(seq, h))
                if seq.wrapping_sub(*last_input) as i32 > 0 =>
            {
                *helm = *h;
                *last_input = *seq;
            }
            (Body::Ship { left, .. }, Act::Leave) => *left = true,
            (Body::Asteroid { ore, .. }, Act::Mine(n)) => *ore = ore.saturating_sub(*n),
            (Body::Outpost { stock, .. }, Act::Deposit(n)) => *stock = stock.saturating_add(*n),
            (Body::Outpost { hull, .. }, Act::Hit(n)) => *hull = hull.saturating_sub(*n),
            _ => {}
        }
    }

    fn durability(&self) -> Durability {
        match self {
            Body::Outpost { .. } => Durability::Durable,
            Body::Ship { .. } | Body::Asteroid { .. } | Body::Drone { .. } => Durability::Checkpointed,
        }
    }

    worldmesh::replicate_codec!();
}

impl Playable for Body {
    type Input = Helm;

    fn spawn_avatar(world: &Sector, player: u64) -> Self {
        let h = player.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let at = |s: u32| ((h >> s) & 0xffff) as f32 / 65535.0 * world.size;
        Body::Ship {
            pilot: Some(player),
            pos: Point3::new(at(0), at(16), 0.0),
            cargo: 0,
            helm: Helm::default(),
            last_input: 0,
            left: false,
        }
    }

    fn input_write(input: &Helm, seq: u32) -> Act {
        Act::Input(seq, *input)
    }

    fn leave_write() -> Act {
        Act::Leave
    }

    fn player(&self) -> Option<u64> {
        match self {
            Body::Ship {
                pilot, left: false, ..
            } => *pilot,
            _ => None,
        }
    }

    fn last_input(&self) -> Option<u32> {
        match self {
            Body::Ship {
                pilot: Some(_),
                last_input,
                ..
            } => Some(*last_input),
            _ => None,
        }
    }
}

/// What founder `node` of `founders` creates: in its own region, six mining ships, twelve
/// asteroids and one swarm of eight drones.
pub fn founders_share(node: NodeId, sector: &Sector) -> Vec<Body> {
    let r = node.0 % (sector.regions * sector.regions);
    let c = sector.centre(r);
    let mut seed = (u64::from(node.0) + 1).wrapping_mul(0x2545_F491_4F6C_DD1D);
    let mut next = move |spread: f32| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        ((seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 2.0 * spread
    };
    let mut v = Vec::new();
    for _ in 0..12 {
        v.push(Body::Asteroid {
            pos: sector.clamp(Point3::new(c.x + next(180.0), c.y + next(180.0), 0.0)),
            ore: 2000,
        });
    }
    for _ in 0..6 {
        v.push(Body::Ship {
            pilot: None,
            pos: sector.clamp(Point3::new(c.x + next(60.0), c.y + next(60.0), 0.0)),
            cargo: 0,
            helm: Helm::default(),
            last_input: 0,
            left: false,
        });
    }
    for _ in 0..8 {
        v.push(Body::Drone {
            pos: sector.clamp(Point3::new(c.x + next(40.0), c.y + next(40.0), 0.0)),
            swarm: node.0,
        });
    }
    v
}

/// Every primary on the live nodes of a simulated world.
pub fn live_primaries(sim: &worldmesh::sim::Simulation<Body>) -> Vec<(ObjectId, &Body)> {
    sim.nodes()
        .iter()
        .filter(|n| sim.is_up(n.id()))
        .flat_map(|n| n.store().iter())
        .filter(|(_, e)| e.role == worldmesh::Role::Primary)
        .map(|(id, e)| (id, &e.object))
        .collect()
}

/// The outposts among `bodies` (their ids), e.g. to check none is lost to a crash.
pub fn outposts<'a>(
    bodies: impl IntoIterator<Item = (ObjectId, &'a Body)>,
) -> std::collections::BTreeSet<ObjectId> {
    bodies
        .into_iter()
        .filter(|(_, b)| matches!(b, Body::Outpost { .. }))
        .map(|(id, _)| id)
        .collect()
}

/// Counts of a world's bodies, over the primaries given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Census {
    /// Ships.
    pub ships: usize,
    /// Asteroids, and the ore left in them.
    pub asteroids: (usize, u64),
    /// Drones.
    pub drones: usize,
    /// Outposts standing (hull > 0), wrecks, ore stocked in all.
    pub outposts: (usize, usize, u64),
}

impl Census {
    /// Counts `bodies`.
    pub fn of<'a>(bodies: impl IntoIterator<Item = &'a Body>) -> Self {
        let mut c = Census::default();
        for b in bodies {
            match b {
                Body::Ship { .. } => c.ships += 1,
                Body::Asteroid { ore, .. } => {
                    c.asteroids.0 += 1;
                    c.asteroids.1 += u64::from(*ore);
                }
                Body::Drone { .. } => c.drones += 1,
                Body::Outpost { hull, stock, .. } => {
                    if *hull > 0 {
                        c.outposts.0 += 1;
                    } else {
                        c.outposts.1 += 1;
                    }
                    c.outposts.2 += u64::from(*stock);
                }
            }
        }
        c
    }
}
