//! The simulator paced against the wall clock, feeding a dashboard (`worldmesh simulate
//! --dashboard`, `worldmesh dashboard`).
//!
//! The simulation advances `speed × tick` of simulated time per dashboard tick (100 ms of
//! wall time), then the dashboard observes every node and publishes. Observing only reads
//! the nodes and `Simulation::run_until` gives the same run however the time is cut, so a
//! paced run's report is the unpaced run's, byte for byte (checked by the CLI tests) —
//! unless demonstration migrations are on (`worldmesh dashboard --migrate-every`), which
//! change the game on purpose.

use std::sync::Arc;
use std::time::{Duration, Instant};

use worldmesh_core::{DetRng, NodeId, Time};
use worldmesh_dashboard::{Hub, HubConfig, KindInfo, Observer, Rect, WorldInfo};
use worldmesh_game::GameMap;
use worldmesh_game::model::PLAYER;
use worldmesh_replica::{GameObject, Role};
use worldmesh_sim::{SimConfig, scenario::Sim};

/// Wall time between dashboard ticks.
pub const TICK: Duration = Duration::from_millis(100);

/// The world of a simulation as the dashboard draws it.
pub fn world_info(cfg: &SimConfig, map: &GameMap, speed: f64) -> WorldInfo {
    map_world(
        format!(
            "simulation: {} nodes × {} players, {} map, {} locator, seed {}, {}× real time",
            cfg.nodes,
            cfg.players_per_node,
            format!("{:?}", cfg.game.map).to_lowercase(),
            cfg.locator.kind,
            cfg.seed,
            speed
        ),
        map,
    )
}

/// The model game's world as the dashboard draws it: `map`'s bounds and obstacles, the
/// model's kinds, the node's traffic classes (also what a real node serves at
/// `GET /world`).
pub fn map_world(title: String, map: &GameMap) -> WorldInfo {
    WorldInfo {
        title,
        bounds: Rect::new(0.0, 0.0, map.width, map.height),
        obstacles: map.obstacles.iter().map(Rect::from_aabb).collect(),
        kinds: vec![
            KindInfo {
                name: "player".into(),
                player: true,
            },
            KindInfo {
                name: "missile".into(),
                player: false,
            },
            KindInfo {
                name: "item".into(),
                player: false,
            },
        ],
        classes: worldmesh_dashboard::observe::class_names(),
    }
}

/// A hub for `sim` (10 ticks per wall second).
pub fn hub_for(cfg: &SimConfig, sim: &Sim, speed: f64) -> Arc<Hub> {
    let world = world_info(cfg, sim.nodes()[0].world(), speed);
    Hub::new(
        world,
        HubConfig {
            tick_hz: 1.0 / TICK.as_secs_f64(),
            ..HubConfig::default()
        },
    )
}

/// How a paced run went.
pub struct Paced {
    /// Ticks published.
    pub ticks: u64,
    /// Ticks that started late because the simulation could not keep up.
    pub late: u64,
}

/// Runs `sim` until `end` (forever with `None`) at `speed` × real time, publishing a tick
/// to `hub` every [`TICK`]; `between` runs after each step (demonstration migrations),
/// `progress` gets the fraction done when there is an end.
pub fn run_paced(
    sim: &mut Sim,
    end: Option<Time>,
    speed: f64,
    hub: &Hub,
    between: &mut dyn FnMut(&mut Sim),
    progress: &mut dyn FnMut(f64),
) -> Paced {
    let mut observer = Observer::new(hub.world());
    let step = TICK.mul_f64(speed);
    let observe =
        |o: &mut Observer, sim: &Sim, t: f64| o.observe(t, sim.nodes(), &|_| true, hub.next_has_nodes());
    hub.publish(observe(&mut observer, sim, sim.now().as_secs_f64()));
    let mut start = Instant::now();
    let (mut k, mut late) = (0u32, 0u64);
    loop {
        k += 1;
        let mut t = Time::ZERO + step * k;
        if let Some(e) = end {
            t = t.min(e);
        }
        sim.run_until(t);
        between(sim);
        hub.publish(observe(&mut observer, sim, t.as_secs_f64()));
        if let Some(e) = end {
            progress(t.as_secs_f64() / e.as_secs_f64().max(1e-9));
            if t >= e {
                break;
            }
        }
        let due = start + TICK * k;
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        } else {
            late += 1;
            // More than a second behind: start the schedule again instead of rushing.
            if now - due > Duration::from_secs(1) {
                start = now - TICK * k;
            }
        }
    }
    Paced {
        ticks: u64::from(k) + 1,
        late,
    }
}

/// Demonstration migrations: every `every` of simulated time, one node (chosen by a seeded
/// random stream) moves all its players to another node (paper `001` §3.2), so the map
/// shows regions changing owner. Prints each one.
pub struct DemoMigrations {
    every: Duration,
    next: Time,
    rng: DetRng,
    /// Migrations started.
    pub started: u64,
}

impl DemoMigrations {
    /// A migration every `every`, random choices from `seed`.
    pub fn new(every: Duration, seed: u64) -> Self {
        Self {
            every,
            next: Time::ZERO + every,
            rng: DetRng::new(seed).fork(0xda5b),
            started: 0,
        }
    }

    /// Starts the migrations that are due.
    pub fn step(&mut self, sim: &mut Sim) {
        let n = sim.nodes().len();
        if n < 2 {
            return;
        }
        while sim.now() >= self.next {
            self.next += self.every;
            let now = sim.now();
            let from = self.rng.index(n);
            let to = (from + 1 + self.rng.index(n - 1)) % n;
            let node = &sim.nodes()[from];
            let frozen = node.replicas().frozen();
            let ids: Vec<_> = node
                .store()
                .iter()
                .filter(|(id, e)| {
                    e.role == Role::Primary && e.object.kind() == PLAYER && !frozen.contains(id)
                })
                .map(|(id, _)| id)
                .collect();
            if ids.is_empty() {
                continue;
            }
            match sim
                .node_mut(NodeId(from as u32))
                .migrate(now, &ids, NodeId(to as u32))
            {
                Ok(_) => {
                    self.started += 1;
                    println!(
                        "migration at {:.1} s: {} players from node {from} to node {to}",
                        now.as_secs_f64(),
                        ids.len()
                    );
                }
                Err(e) => println!(
                    "migration at {:.1} s from node {from} to node {to} not started: {e}",
                    now.as_secs_f64()
                ),
            }
        }
    }
}
