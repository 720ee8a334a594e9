//! Parameters of the model workload (paper `000` §4.1). Every value says where it comes
//! from; where the paper gives no number we chose one and say so.

use serde::{Deserialize, Serialize};

/// Map shape (paper `000` §4.1 "We evaluate two types of maps").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MapKind {
    /// Square: both sides grow with the number of players.
    Sqr,
    /// Rectangular: the height stays the diameter of a 16-player Quake III map and the
    /// width grows (a linearized map, friendly to a range DHT keyed on x).
    Rect,
}

/// The model workload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelConfig {
    /// Map shape.
    pub map: MapKind,
    /// Side of the map that holds 16 players at full Quake III density, in Quake units.
    /// Our choice: Quake III deathmatch maps for ~16 players span roughly 2000–3000 units;
    /// we take 2400. Density is kept constant: area = (players / 16) × side².
    pub side_per_16_players: f32,
    /// Player run speed, units/s (Quake III `g_speed` default 320).
    pub player_speed: f32,
    /// Half-extent of a player's area-of-interest box in x and y, units. Our choice for the
    /// "median interest size observed in Quake II and Quake III" (§4.1): 450 units, i.e. a
    /// 900 × 900 box.
    pub aoi_half_extent: f32,
    /// Obstacles per 16-player area (ours: 6), each a box with sides in
    /// [`obstacle_min`, `obstacle_max`] units.
    pub obstacles_per_16: f32,
    /// Smallest obstacle side, units.
    pub obstacle_min: f32,
    /// Largest obstacle side, units.
    pub obstacle_max: f32,
    /// Waypoints per 16-player area (ours: 10).
    pub waypoints_per_16: f32,
    /// Zipf exponent of waypoint popularity (§2.3: "the popularity distribution of
    /// waypoints was Zipf-like"; exponent ours: 1.0).
    pub zipf_exponent: f64,
    /// Mean time a player waits at a waypoint before leaving, s (ours: 4 s; the paper
    /// takes the leave probability from traces without printing it).
    pub mean_wait_s: f64,
    /// Range within which players fight, units (ours: 700, within the AoI).
    pub fight_range: f32,
    /// Rate of entering a fight when an opponent is in range and visible, per second
    /// (ours: 0.5/s).
    pub fight_enter_rate: f64,
    /// Rate of leaving a fight, per second (ours: 0.25/s: fights last ~4 s).
    pub fight_leave_rate: f64,
    /// Time between shots while fighting, s (Quake III rocket launcher refire: 0.8 s).
    pub fire_interval_s: f64,
    /// Missile speed, units/s (Quake III rocket: 900).
    pub missile_speed: f32,
    /// Missile lifetime if it hits nothing, s (ours: 2 s: farther than any AoI).
    pub missile_lifetime_s: f64,
    /// Damage per missile hit (Quake III rocket: 100; players have 100 health + armour, we
    /// use 34 so three hits kill).
    pub missile_damage: u8,
    /// Items (health packs, weapons) per 16-player area: static objects (ours: 6).
    pub items_per_16: f32,
    /// Time a killed player waits before respawning, s (Quake III's minimum respawn delay,
    /// 1.7 s). The player picks its spawn point at death and declares its area of interest
    /// there while it waits, so its node prefetches the new view (Colyseus §3: objects
    /// predict what they will need).
    pub respawn_delay_s: f64,
    /// Attach missiles to their shooter for proactive replication (§5).
    pub proactive: bool,
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self {
            map: MapKind::Rect,
            side_per_16_players: 2400.0,
            player_speed: 320.0,
            aoi_half_extent: 450.0,
            obstacles_per_16: 6.0,
            obstacle_min: 100.0,
            obstacle_max: 400.0,
            waypoints_per_16: 10.0,
            zipf_exponent: 1.0,
            mean_wait_s: 4.0,
            fight_range: 700.0,
            fight_enter_rate: 0.5,
            fight_leave_rate: 0.25,
            fire_interval_s: 0.8,
            missile_speed: 900.0,
            missile_lifetime_s: 2.0,
            missile_damage: 34,
            items_per_16: 6.0,
            respawn_delay_s: 1.7,
            proactive: true,
        }
    }
}

impl ModelConfig {
    /// Checks every value is finite and in range.
    pub fn validate(&self) -> Result<(), String> {
        let pos = [
            ("side_per_16_players", f64::from(self.side_per_16_players)),
            ("player_speed", f64::from(self.player_speed)),
            ("aoi_half_extent", f64::from(self.aoi_half_extent)),
            ("obstacle_min", f64::from(self.obstacle_min)),
            ("obstacle_max", f64::from(self.obstacle_max)),
            ("zipf_exponent", self.zipf_exponent),
            ("mean_wait_s", self.mean_wait_s),
            ("fight_range", f64::from(self.fight_range)),
            ("fire_interval_s", self.fire_interval_s),
            ("missile_speed", f64::from(self.missile_speed)),
            ("missile_lifetime_s", self.missile_lifetime_s),
            ("respawn_delay_s", self.respawn_delay_s),
        ];
        for (name, v) in pos {
            if !(v.is_finite() && v > 0.0) {
                return Err(format!("game.{name} must be a positive number, got {v}"));
            }
        }
        let nonneg = [
            ("obstacles_per_16", f64::from(self.obstacles_per_16)),
            ("waypoints_per_16", f64::from(self.waypoints_per_16)),
            ("items_per_16", f64::from(self.items_per_16)),
            ("fight_enter_rate", self.fight_enter_rate),
            ("fight_leave_rate", self.fight_leave_rate),
        ];
        for (name, v) in nonneg {
            if !(v.is_finite() && (0.0..=1000.0).contains(&v)) {
                return Err(format!("game.{name} must be in [0, 1000], got {v}"));
            }
        }
        if self.obstacle_min > self.obstacle_max {
            return Err("game.obstacle_min must not exceed game.obstacle_max".into());
        }
        Ok(())
    }

    /// Map width and height for `players` players at constant density.
    pub fn map_size(&self, players: usize) -> (f32, f32) {
        let units = (players.max(1) as f32 / 16.0).max(1.0 / 16.0);
        let s = self.side_per_16_players;
        match self.map {
            MapKind::Rect => (s * units.max(1.0), s * units.min(1.0)),
            MapKind::Sqr => (s * units.sqrt(), s * units.sqrt()),
        }
    }
}
