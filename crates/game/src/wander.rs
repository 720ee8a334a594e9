//! Wandering bots on a rectangular map.
//!
//! Each bot walks in a straight line at constant speed toward a target point chosen
//! uniformly on the map, and picks a new target when it arrives. Its area of interest is
//! a box centred on it.

use serde::{Deserialize, Serialize};
use worldmesh_core::{Aabb, DetRng, Point3};
use worldmesh_replica::{GameObject, StateError, ThinkContext};

/// Parameters of the wandering game.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WanderConfig {
    /// Map width (x), in Quake units.
    pub map_width: f32,
    /// Map height (y), in Quake units.
    pub map_height: f32,
    /// Bot speed, units per second. 320 is Quake III's default run speed.
    pub bot_speed: f32,
    /// Half-width of a bot's area-of-interest box, units.
    pub aoi_half_extent: f32,
}

impl Default for WanderConfig {
    fn default() -> Self {
        Self {
            map_width: 4000.0,
            map_height: 2000.0,
            bot_speed: 320.0,
            aoi_half_extent: 400.0,
        }
    }
}

impl WanderConfig {
    /// Checks that every value is finite and positive.
    pub fn validate(&self) -> Result<(), String> {
        for (name, v) in [
            ("map_width", self.map_width),
            ("map_height", self.map_height),
            ("bot_speed", self.bot_speed),
            ("aoi_half_extent", self.aoi_half_extent),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(format!("game.{name} must be a positive number, got {v}"));
            }
        }
        Ok(())
    }

    fn random_point(&self, rng: &mut DetRng) -> Point3 {
        Point3::new(
            rng.range_f32(0.0, self.map_width),
            rng.range_f32(0.0, self.map_height),
            0.0,
        )
    }
}

/// A wandering bot.
#[derive(Clone, Debug, PartialEq, bitcode::Encode, bitcode::Decode)]
pub struct Bot {
    /// Current position.
    pub pos: Point3,
    /// Where it is walking to.
    pub target: Point3,
}

impl Bot {
    /// A bot at a random position with a random target.
    pub fn random(cfg: &WanderConfig, rng: &mut DetRng) -> Self {
        Self {
            pos: cfg.random_point(rng),
            target: cfg.random_point(rng),
        }
    }
}

impl GameObject for Bot {
    type World = WanderConfig;
    /// Wandering bots do not write to each other.
    type Write = ();

    fn apply_write(&mut self, _write: &()) {}

    fn think(&mut self, ctx: &mut ThinkContext<'_, Self>) {
        let step = ctx.world.bot_speed * ctx.dt.as_secs_f32();
        let d = self.pos.distance(self.target);
        if d <= step {
            self.pos = self.target;
            self.target = ctx.world.random_point(ctx.rng);
        } else {
            let f = step / d;
            self.pos.x += (self.target.x - self.pos.x) * f;
            self.pos.y += (self.target.y - self.pos.y) * f;
        }
    }

    fn position(&self) -> Point3 {
        self.pos
    }

    fn interest(&self, world: &WanderConfig) -> Option<Aabb> {
        let h = world.aoi_half_extent;
        Some(Aabb::around(self.pos, Point3::new(h, h, h)))
    }

    fn encode_state(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&bitcode::encode(self));
    }

    fn decode_state(bytes: &[u8]) -> Result<Self, StateError> {
        let b: Bot = bitcode::decode(bytes).map_err(StateError::from)?;
        if !(b.pos.is_finite() && b.target.is_finite()) {
            return Err(StateError::check("bot position is not finite"));
        }
        Ok(b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use worldmesh_core::{NodeId, ObjectId, Time};
    use worldmesh_replica::ObjectStore;

    #[test]
    fn bots_stay_on_the_map_and_move_at_their_speed() {
        let cfg = WanderConfig::default();
        let mut rng = DetRng::new(1);
        let store = ObjectStore::<Bot>::new();
        let mut bot = Bot::random(&cfg, &mut rng);
        let mut spawned = Vec::new();
        let mut writes = Vec::new();
        for _ in 0..1000 {
            let before = bot.pos;
            let mut ctx = ThinkContext::new(
                Time::ZERO,
                Duration::from_millis(100),
                NodeId(0),
                ObjectId::new(NodeId(0), 0),
                &mut rng,
                &cfg,
                &store,
                &mut spawned,
                &mut writes,
            );
            bot.think(&mut ctx);
            assert!(before.distance(bot.pos) <= 32.0 + 1e-3);
            assert!((0.0..=cfg.map_width).contains(&bot.pos.x));
            assert!((0.0..=cfg.map_height).contains(&bot.pos.y));
        }
    }

    #[test]
    fn state_round_trips_and_rejects_garbage() {
        let b = Bot {
            pos: Point3::new(1.0, 2.0, 0.0),
            target: Point3::new(3.0, 4.0, 0.0),
        };
        let mut buf = Vec::new();
        b.encode_state(&mut buf);
        assert_eq!(Bot::decode_state(&buf), Ok(b));
        assert!(Bot::decode_state(&buf[..3]).is_err());
        let nan = Bot {
            pos: Point3::new(f32::NAN, 0.0, 0.0),
            target: Point3::ORIGIN,
        };
        let mut buf = Vec::new();
        nan.encode_state(&mut buf);
        assert!(Bot::decode_state(&buf).is_err());
        assert!(
            WanderConfig {
                bot_speed: -1.0,
                ..Default::default()
            }
            .validate()
            .is_err()
        );
    }
}
