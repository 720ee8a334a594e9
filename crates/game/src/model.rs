//! The objects of the model workload (paper `000` §4.1): players (bots), missiles and
//! items, as one [`ModelObject`] type implementing [`GameObject`].
//!
//! - A **player** waits at a waypoint, then walks an obstacle-avoiding path to another
//!   waypoint drawn by Zipf popularity; when an opponent is in range and in sight it may
//!   enter a fight, shoots missiles at it, and leaves the fight with some probability.
//!   Its area of interest is a box around it. Killed players respawn at a waypoint.
//! - A **missile** flies straight, hits the first player it comes near (a tentative write
//!   of damage to that player, forwarded to the player's primary if it is a replica), and
//!   dies on hit, on an obstacle or when its lifetime ends. It is attached to its shooter
//!   so every node replicating the shooter gets it without discovery (§5).
//! - An **item** never changes.
//!
//! Wire format: derived (`#[derive(Replicate)]`, see `worldmesh_replica::replicate`).
//! Full state: the variant index and the replicated fields (players 29 bytes, missiles
//! 24–26, items 14). Delta: a change mask varint (position coordinates, velocity
//! components, health, activity, … one bit each) and only the changed fields, positions
//! as exact differences (a moving player typically 7 bytes). Floats replicate exactly, so
//! replicas hold what the primary holds. State that only the primary needs (its path, its
//! fight target, timers) is `#[replicate(skip)]`.

use std::time::Duration;
use worldmesh_client::Playable;
use worldmesh_core::{Aabb, Durability, ObjectId, Point3};
use worldmesh_node::Located;
use worldmesh_replica::{GameObject, Replicate, StateError, ThinkContext};

use crate::map::GameMap;

/// Kind tags (also the `kind` naming attribute).
pub const PLAYER: u8 = 0;
/// Missile kind tag.
pub const MISSILE: u8 = 1;
/// Item kind tag.
pub const ITEM: u8 = 2;

/// Hit radius of a missile, units (a Quake player's bounding box is 32 × 32 × 56).
const HIT_RADIUS: f32 = 40.0;
/// Full health.
pub const FULL_HEALTH: u8 = 100;

/// What a player is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Replicate)]
#[repr(u8)]
pub enum Activity {
    /// Standing at a waypoint.
    Waiting = 0,
    /// Walking a path.
    Moving = 1,
    /// Fighting an opponent.
    Fighting = 2,
}

/// A player (bot).
#[derive(Debug, PartialEq, Replicate)]
pub struct Player {
    /// Position.
    pub pos: Point3,
    /// Velocity in x and y, units/s.
    pub vel: (f32, f32),
    /// Health; 0 means dead (respawns next frame).
    pub health: u8,
    /// Current activity.
    pub activity: Activity,
    /// Half-extent of the area-of-interest box in x and y (in the full state only; it
    /// never changes).
    pub aoi: f32,
    /// What only the primary's think uses (path, fight, timers, respawn point).
    #[replicate(skip)]
    plan: PlanSlot,
    /// Set when a person drives this player through the client protocol instead of the
    /// bot logic (replicated, so a migrated or adopted avatar stays under control). Boxed:
    /// most players are bots, and every replica's version history holds copies of them.
    pub control: Option<Box<Control>>,
    /// Where the person this bot stands for connects from (a latency-matrix row), when the
    /// simulator runs the placement loop; replicated in the full state, never changes.
    pub home: Option<u32>,
}

/// A player's state that only its primary's think uses: never replicated, so a replica
/// (a decoded state) has the default plan.
#[derive(Debug, PartialEq)]
struct Plan {
    /// Waypoints still to walk, the next one last.
    path: Vec<Point3>,
    /// Seconds left to wait at the current waypoint.
    wait_left: f32,
    /// The opponent fought.
    fight: Option<ObjectId>,
    /// Seconds until the next shot.
    next_shot: f32,
    /// While dead: where the player will respawn and the time left.
    respawn: Option<(Point3, f32)>,
}

impl Plan {
    /// The default plan: nothing to walk, wait or fight.
    const NONE: Plan = Plan {
        path: Vec::new(),
        wait_left: 0.0,
        fight: None,
        next_shot: 0.0,
        respawn: None,
    };
}

impl Default for Plan {
    fn default() -> Self {
        Plan::NONE
    }
}

/// What a player without a plan reads (see [`PlanSlot::get`]).
static NO_PLAN: Plan = Plan::NONE;

// By hand for `clone_from`: the simulator's metrics sample copies every primary into its
// previous sample's copies, and reusing their path buffers saves an allocation per
// moving player per sample.
impl Clone for Plan {
    fn clone(&self) -> Self {
        Plan {
            path: self.path.clone(),
            ..*self
        }
    }

    fn clone_from(&mut self, source: &Self) {
        // Destructured so that a new field cannot be forgotten here.
        let Plan {
            path,
            wait_left,
            fight,
            next_shot,
            respawn,
        } = source;
        self.path.clone_from(path);
        self.wait_left = *wait_left;
        self.fight = *fight;
        self.next_shot = *next_shot;
        self.respawn = *respawn;
    }
}

/// A player's [`Plan`], behind a pointer and absent until its first think: replicas never
/// think, and the copies of players that fill every replica's version history stay
/// small (the plan is 68 bytes of a player's 152 otherwise; `crates/sim/PERFORMANCE.md`).
/// Absent and default compare equal.
#[derive(Debug, Default)]
struct PlanSlot(Option<Box<Plan>>);

impl PlanSlot {
    /// The plan (the default one if absent).
    fn get(&self) -> &Plan {
        self.0.as_deref().unwrap_or(&NO_PLAN)
    }

    /// The plan, made if absent.
    fn get_mut(&mut self) -> &mut Plan {
        self.0.get_or_insert_with(Box::default)
    }
}

impl PartialEq for PlanSlot {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl Clone for PlanSlot {
    fn clone(&self) -> Self {
        PlanSlot(self.0.clone())
    }

    fn clone_from(&mut self, source: &Self) {
        match (&mut self.0, &source.0) {
            (Some(mine), Some(theirs)) => mine.clone_from(theirs),
            (mine, theirs) => *mine = theirs.clone(),
        }
    }
}

/// The state of a player-controlled avatar.
#[derive(Clone, Copy, Debug, PartialEq, Replicate)]
#[replicate(check = unit_directions)]
pub struct Control {
    /// The player (the connect token's account id).
    pub player: u64,
    /// The last input applied (what the client reconciles against).
    pub last_input: u32,
    /// Inputs applied so far (each sequence number once): with `last_input`, proof that
    /// none was skipped or applied twice, even across hand-offs.
    pub applied: u32,
    /// Move direction, each component in [−1, 1] (held until the next input).
    pub intent: (f32, f32),
    /// Aim while firing (held until the next input).
    pub aim: Option<(f32, f32)>,
    /// The player left: the avatar removes itself at its next think.
    pub left: bool,
}

/// One input of a person playing the model game: a move direction and, while firing, an
/// aim, each component quantised to a signed byte (127 = full). The avatar's think
/// normalises the direction, so no input moves faster than the game's player speed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bitcode::Encode, bitcode::Decode)]
pub struct PlayerInput {
    /// Move direction, x.
    pub dx: i8,
    /// Move direction, y.
    pub dy: i8,
    /// Aim (x, y) while the fire button is held.
    pub fire: Option<(i8, i8)>,
}

impl PlayerInput {
    /// The move direction as a vector of length at most 1.
    pub fn direction(&self) -> (f32, f32) {
        unit(self.dx, self.dy)
    }
}

/// `(x, y) / 127`, scaled down to length 1 if longer.
fn unit(x: i8, y: i8) -> (f32, f32) {
    let (x, y) = (f32::from(x) / 127.0, f32::from(y) / 127.0);
    let len = (x * x + y * y).sqrt();
    if len > 1.0 { (x / len, y / len) } else { (x, y) }
}

/// Where a controlled avatar is after `dt` seconds of moving in `direction` at `speed`
/// from `pos` on `map`: blocked moves stay put. The node runs it in the avatar's think; a
/// client runs the same function to predict its own avatar.
pub fn step_avatar(map: &GameMap, pos: Point3, direction: (f32, f32), speed: f32, dt: f32) -> Point3 {
    let next = Point3::new(
        pos.x + direction.0 * speed * dt,
        pos.y + direction.1 * speed * dt,
        pos.z,
    );
    if map.is_free(next) { next } else { pos }
}

/// A missile.
#[derive(Clone, Debug, PartialEq, Replicate)]
pub struct Missile {
    /// Position.
    pub pos: Point3,
    /// Velocity in x and y.
    pub vel: (f32, f32),
    /// Who fired it.
    pub shooter: ObjectId,
    /// Attached to the shooter (proactive replication on).
    pub attached: bool,
    #[replicate(skip)]
    age: f32,
}

/// A static item.
#[derive(Clone, Debug, PartialEq, Replicate)]
pub struct Item {
    /// Position.
    pub pos: Point3,
    /// Item type.
    pub item: u8,
}

/// Any object of the model workload.
#[derive(Debug, PartialEq, Replicate)]
pub enum ModelObject {
    /// A player.
    Player(Player),
    /// A missile.
    Missile(Missile),
    /// An item.
    Item(Item),
}

/// Writes between objects.
#[derive(Clone, Debug, PartialEq, Eq, bitcode::Encode, bitcode::Decode)]
pub enum GameWrite {
    /// Damage to a player.
    Damage(u8),
    /// A person's input to their avatar (sequence number, input).
    Input(u32, PlayerInput),
    /// The person driving this avatar left.
    Leave,
}

// Clone by hand for `clone_from` (see `Plan`'s).
impl Clone for Player {
    fn clone(&self) -> Self {
        Player {
            pos: self.pos,
            vel: self.vel,
            health: self.health,
            activity: self.activity,
            aoi: self.aoi,
            plan: self.plan.clone(),
            control: self.control.clone(),
            home: self.home,
        }
    }

    fn clone_from(&mut self, source: &Self) {
        // Destructured so that a new field cannot be forgotten here.
        let Player {
            pos,
            vel,
            health,
            activity,
            aoi,
            plan,
            control,
            home,
        } = source;
        self.pos = *pos;
        self.vel = *vel;
        self.health = *health;
        self.activity = *activity;
        self.aoi = *aoi;
        self.plan.clone_from(plan);
        self.control.clone_from(control);
        self.home = *home;
    }
}

impl Clone for ModelObject {
    fn clone(&self) -> Self {
        match self {
            ModelObject::Player(p) => ModelObject::Player(p.clone()),
            ModelObject::Missile(m) => ModelObject::Missile(m.clone()),
            ModelObject::Item(i) => ModelObject::Item(i.clone()),
        }
    }

    fn clone_from(&mut self, source: &Self) {
        match (self, source) {
            (ModelObject::Player(a), ModelObject::Player(b)) => a.clone_from(b),
            (this, source) => *this = source.clone(),
        }
    }
}

impl Player {
    /// A copy without the plan, which only the primary's think reads and the codec skips:
    /// what the version history keeps ([`GameObject::history_copy`]). Every other field
    /// but `control` is `Copy`, so a new field is either copied here or refused by the
    /// compiler.
    fn replicated_copy(&self) -> Player {
        Player {
            plan: PlanSlot::default(),
            control: self.control.clone(),
            ..*self
        }
    }

    /// A player standing at `pos` with full health and an AoI box of half-extent `aoi`.
    pub fn new(pos: Point3, aoi: f32) -> Self {
        Player {
            pos,
            vel: (0.0, 0.0),
            health: FULL_HEALTH,
            activity: Activity::Waiting,
            aoi,
            plan: PlanSlot::default(),
            control: None,
            home: None,
        }
    }

    /// The avatar of `player`, standing at `pos`.
    pub fn avatar(pos: Point3, aoi: f32, player: u64) -> Self {
        Player {
            control: Some(Box::new(Control {
                player,
                last_input: 0,
                applied: 0,
                intent: (0.0, 0.0),
                aim: None,
                left: false,
            })),
            ..Player::new(pos, aoi)
        }
    }

    fn think(&mut self, ctx: &mut ThinkContext<'_, ModelObject>) {
        let map = ctx.world;
        let cfg = &map.config;
        let dt = ctx.dt.as_secs_f32();
        if self.health == 0 {
            // Dead: pick the spawn point now, wait the respawn delay, then appear there.
            let plan = self.plan.get_mut();
            match plan.respawn {
                None => {
                    let wp = map.pick_waypoint(ctx.rng);
                    plan.respawn = Some((map.waypoints[wp], cfg.respawn_delay_s as f32));
                    self.vel = (0.0, 0.0);
                    plan.fight = None;
                    plan.path.clear();
                }
                Some((at, left)) if left - dt > 0.0 => plan.respawn = Some((at, left - dt)),
                Some((at, _)) => {
                    let (control, home) = (self.control.take(), self.home);
                    *self = Player::new(at, self.aoi);
                    self.control = control;
                    self.home = home;
                }
            }
            return;
        }
        if let Some(c) = self.control.as_deref().copied() {
            self.think_controlled(ctx, c);
            return;
        }
        let plan = self.plan.get_mut();
        // Fights.
        match plan.fight {
            Some(t) => {
                let target = ctx.store.object(t).and_then(|o| match o {
                    ModelObject::Player(p) => Some(p.pos),
                    _ => None,
                });
                let keep =
                    target.filter(|tp| tp.distance(self.pos) <= cfg.fight_range && map.clear(self.pos, *tp));
                match keep {
                    Some(tp) if !ctx.rng.chance(cfg.fight_leave_rate * f64::from(dt)) => {
                        plan.next_shot -= dt;
                        if plan.next_shot <= 0.0 {
                            plan.next_shot += cfg.fire_interval_s as f32;
                            let d = tp.distance(self.pos).max(1.0);
                            let v = (
                                cfg.missile_speed * (tp.x - self.pos.x) / d,
                                cfg.missile_speed * (tp.y - self.pos.y) / d,
                            );
                            ctx.spawn(ModelObject::Missile(Missile {
                                pos: self.pos,
                                vel: v,
                                shooter: ctx.id,
                                attached: cfg.proactive,
                                age: 0.0,
                            }));
                        }
                    }
                    _ => plan.fight = None,
                }
            }
            None => {
                let mut best: Option<(f32, ObjectId)> = None;
                for (id, e) in ctx.store.iter() {
                    if let ModelObject::Player(p) = &e.object {
                        let d = p.pos.distance(self.pos);
                        if p.health > 0
                            && d <= cfg.fight_range
                            && best.is_none_or(|(bd, _)| d < bd)
                            && map.clear(self.pos, p.pos)
                        {
                            best = Some((d, id));
                        }
                    }
                }
                if let Some((_, id)) = best
                    && ctx.rng.chance(cfg.fight_enter_rate * f64::from(dt))
                {
                    plan.fight = Some(id);
                    plan.next_shot = ctx.rng.range_f32(0.0, cfg.fire_interval_s as f32);
                }
            }
        }
        // Movement.
        if plan.path.is_empty() {
            self.vel = (0.0, 0.0);
            plan.wait_left -= dt;
            if plan.wait_left <= 0.0 {
                let wp = map.pick_waypoint(ctx.rng);
                plan.path = map.path(self.pos, wp).unwrap_or_default();
                plan.path.reverse(); // pop from the back
                plan.wait_left = ctx.rng.exponential(cfg.mean_wait_s) as f32;
            }
        }
        if let Some(&next) = plan.path.last() {
            let speed = if plan.fight.is_some() {
                cfg.player_speed * 0.5
            } else {
                cfg.player_speed
            };
            let step = speed * dt;
            let d = self.pos.distance(next);
            if d <= step {
                self.pos = next;
                plan.path.pop();
            } else {
                self.pos.x += (next.x - self.pos.x) * step / d;
                self.pos.y += (next.y - self.pos.y) * step / d;
            }
            let v = (
                speed * (next.x - self.pos.x) / d.max(1e-3),
                speed * (next.y - self.pos.y) / d.max(1e-3),
            );
            // Quantize the velocity so a straight walk does not change it every frame.
            self.vel = ((v.0 / 8.0).round() * 8.0, (v.1 / 8.0).round() * 8.0);
        }
        self.activity = if plan.fight.is_some() {
            Activity::Fighting
        } else if plan.path.is_empty() {
            Activity::Waiting
        } else {
            Activity::Moving
        };
    }
}

impl Player {
    /// A person's avatar: moves along the held intent (at the game's speed, never faster:
    /// the direction is at most a unit vector), fires along the held aim at the game's fire
    /// interval.
    fn think_controlled(&mut self, ctx: &mut ThinkContext<'_, ModelObject>, c: Control) {
        if c.left {
            ctx.delete_self();
            return;
        }
        let map = ctx.world;
        let cfg = &map.config;
        let dt = ctx.dt.as_secs_f32();
        self.pos = step_avatar(map, self.pos, c.intent, cfg.player_speed, dt);
        self.vel = (c.intent.0 * cfg.player_speed, c.intent.1 * cfg.player_speed);
        let plan = self.plan.get_mut();
        plan.next_shot = (plan.next_shot - dt).max(0.0);
        if let Some(aim) = c.aim
            && plan.next_shot <= 0.0
            && (aim.0 != 0.0 || aim.1 != 0.0)
        {
            plan.next_shot = cfg.fire_interval_s as f32;
            let len = (aim.0 * aim.0 + aim.1 * aim.1).sqrt();
            ctx.spawn(ModelObject::Missile(Missile {
                pos: self.pos,
                vel: (cfg.missile_speed * aim.0 / len, cfg.missile_speed * aim.1 / len),
                shooter: ctx.id,
                attached: cfg.proactive,
                age: 0.0,
            }));
        }
        self.activity = if c.aim.is_some() {
            Activity::Fighting
        } else if c.intent != (0.0, 0.0) {
            Activity::Moving
        } else {
            Activity::Waiting
        };
    }
}

impl Missile {
    fn think(&mut self, ctx: &mut ThinkContext<'_, ModelObject>) {
        let map = ctx.world;
        let dt = ctx.dt.as_secs_f32();
        self.age += dt;
        self.pos.x += self.vel.0 * dt;
        self.pos.y += self.vel.1 * dt;
        if f64::from(self.age) > map.config.missile_lifetime_s || !map.is_free(self.pos) {
            ctx.delete_self();
            return;
        }
        let hit = ctx.store.iter().find(|(id, e)| {
            *id != self.shooter
                && matches!(&e.object, ModelObject::Player(p) if p.health > 0 && p.pos.distance(self.pos) <= HIT_RADIUS)
        });
        if let Some((id, _)) = hit {
            ctx.write(id, GameWrite::Damage(map.config.missile_damage));
            ctx.delete_self();
        }
    }
}

/// A decoded avatar's directions are at most unit length: a state from the network cannot
/// make an avatar fast (the `check` of [`Control`]'s derived codec).
fn unit_directions(c: &Control) -> Result<(), StateError> {
    let long = |(x, y): (f32, f32)| x * x + y * y > 1.0 + 1e-3;
    if long(c.intent) || c.aim.is_some_and(long) {
        return Err(StateError::check("control direction longer than 1"));
    }
    Ok(())
}

impl GameObject for ModelObject {
    type World = GameMap;
    type Write = GameWrite;

    fn think(&mut self, ctx: &mut ThinkContext<'_, Self>) {
        match self {
            ModelObject::Player(p) => p.think(ctx),
            ModelObject::Missile(m) => m.think(ctx),
            ModelObject::Item(_) => {}
        }
    }

    fn position(&self) -> Point3 {
        match self {
            ModelObject::Player(p) => p.pos,
            ModelObject::Missile(m) => m.pos,
            ModelObject::Item(i) => i.pos,
        }
    }

    fn velocity(&self) -> Option<Point3> {
        match self {
            // A dead player waits where it will respawn: it does not move.
            ModelObject::Player(p) if p.health > 0 => Some(Point3::new(p.vel.0, p.vel.1, 0.0)),
            ModelObject::Missile(m) => Some(Point3::new(m.vel.0, m.vel.1, 0.0)),
            _ => None,
        }
    }

    fn position_ahead(&self, lead: Duration, _world: &GameMap) -> Point3 {
        match self {
            // A dead player about to respawn will be at its spawn point (known only to the
            // primary: the spawn point is not replicated).
            ModelObject::Player(p) if p.health == 0 => match p.plan.get().respawn {
                Some((at, left)) if left <= lead.as_secs_f32() => at,
                _ => p.pos,
            },
            _ => {
                let (p, t) = (self.position(), lead.as_secs_f32());
                self.velocity().map_or(p, |v| p.moved(v, t))
            }
        }
    }

    fn kind(&self) -> u8 {
        match self {
            ModelObject::Player(_) => PLAYER,
            ModelObject::Missile(_) => MISSILE,
            ModelObject::Item(_) => ITEM,
        }
    }

    /// Avatars come back from the last checkpoint, missiles are not worth persisting (they
    /// live seconds), items on the map are durable (issue 19's classes).
    fn durability(&self) -> Durability {
        match self {
            ModelObject::Player(_) => Durability::Checkpointed,
            ModelObject::Missile(_) => Durability::Ephemeral,
            ModelObject::Item(_) => Durability::Durable,
        }
    }

    fn interest(&self, _world: &GameMap) -> Option<Aabb> {
        match self {
            // A dead player already looks where it will respawn.
            ModelObject::Player(p) => {
                let at = match p.health {
                    0 => p.plan.get().respawn.map_or(p.pos, |(spawn, _)| spawn),
                    _ => p.pos,
                };
                Some(Aabb::around(at, Point3::new(p.aoi, p.aoi, 1000.0)))
            }
            _ => None,
        }
    }

    fn attached_to(&self) -> Option<ObjectId> {
        match self {
            ModelObject::Missile(m) if m.attached => Some(m.shooter),
            _ => None,
        }
    }

    fn apply_write(&mut self, write: &GameWrite) {
        let ModelObject::Player(p) = self else {
            return;
        };
        match write {
            GameWrite::Damage(d) => p.health = p.health.saturating_sub(*d),
            // Inputs only steer a controlled avatar; a bot ignores them.
            // Applied once per sequence number, here where the primary serializes writes:
            // an input resent through another node after a hand-off is a no-op.
            GameWrite::Input(seq, input) => {
                if let Some(c) = &mut p.control
                    && (seq.wrapping_sub(c.last_input) as i32) > 0
                {
                    c.intent = input.direction();
                    c.aim = input.fire.map(|(x, y)| unit(x, y));
                    c.last_input = *seq;
                    c.applied = c.applied.wrapping_add(1);
                }
            }
            GameWrite::Leave => {
                if let Some(c) = &mut p.control {
                    c.left = true;
                }
            }
        }
    }

    worldmesh_replica::replicate_codec!();

    /// A player's copy leaves its plan out: the codec skips it, and the 32 versions of
    /// every primary would otherwise each hold one (5.8 MB of the 64-node default world's
    /// 36.8 MB peak heap; `crates/sim/PERFORMANCE.md`, nineteenth round).
    fn history_copy(&self) -> Self {
        match self {
            ModelObject::Player(p) => ModelObject::Player(p.replicated_copy()),
            other => other.clone(),
        }
    }
}

impl Playable for ModelObject {
    type Input = PlayerInput;

    /// At a waypoint chosen by the player id (so a player comes back where it was placed
    /// before, on any node of the same map), with the configured area of interest.
    fn spawn_avatar(map: &GameMap, player: u64) -> Self {
        let at = match map.waypoints.len() as u64 {
            0 => Point3::new(0.0, 0.0, 0.0),
            n => map.waypoints[(player % n) as usize],
        };
        ModelObject::Player(Player::avatar(at, map.config.aoi_half_extent, player))
    }

    fn input_write(input: &PlayerInput, seq: u32) -> GameWrite {
        GameWrite::Input(seq, *input)
    }

    fn leave_write() -> GameWrite {
        GameWrite::Leave
    }

    fn last_input(&self) -> Option<u32> {
        match self {
            ModelObject::Player(Player { control: Some(c), .. }) => Some(c.last_input),
            _ => None,
        }
    }

    fn player(&self) -> Option<u64> {
        match self {
            ModelObject::Player(Player { control: Some(c), .. }) if !c.left => Some(c.player),
            _ => None,
        }
    }
}

/// Players of the placement loop (paper `001` §7.4): a bot at its home (a latency-matrix
/// row, set by the simulator's `[placement]` scenario), a person's avatar by its player id.
impl Located for ModelObject {
    /// A person's avatar is located by its player id (low 32 bits): the session table,
    /// which knows the delays the player measured, answers the placement loop for it.
    fn client_location(&self) -> Option<u32> {
        match self {
            ModelObject::Player(Player { control: Some(c), .. }) if !c.left => Some(c.player as u32),
            ModelObject::Player(p) => p.home,
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use worldmesh_core::NodeId;

    /// Every replica's version history holds up to 32 copies of each object it replicates
    /// (most of a simulated world's memory), so a bigger object costs memory and cache
    /// misses on every update (`crates/sim/PERFORMANCE.md`): keep bot-only state and the
    /// rare control block out of line.
    #[test]
    fn an_object_fits_a_history_slot_of_one_cache_line() {
        assert!(
            std::mem::size_of::<(u64, ModelObject)>() <= 64,
            "{} bytes",
            std::mem::size_of::<(u64, ModelObject)>()
        );
    }

    fn walking(x: f32, steps: usize) -> Player {
        let mut p = Player::new(Point3::new(x, 2.0, 0.0), 450.0);
        p.vel = (x, -x);
        p.health = 57;
        p.activity = Activity::Moving;
        *p.plan.get_mut() = Plan {
            path: (0..steps).map(|k| Point3::new(k as f32, x, 0.0)).collect(),
            wait_left: 0.25,
            fight: Some(ObjectId::new(NodeId(3), 9)),
            next_shot: 0.5,
            respawn: Some((Point3::new(1.0, 1.0, 0.0), 0.7)),
        };
        p
    }

    /// Players with and without a plan (one driven by a person), a missile and an item.
    fn every_kind() -> Vec<ModelObject> {
        let mut driven = walking(30.0, 3);
        driven.control = Some(Box::new(Control {
            intent: (0.6, -0.8),
            aim: Some((1.0, 0.0)),
            player: 7,
            last_input: 3,
            applied: 3,
            left: false,
        }));
        vec![
            ModelObject::Player(walking(10.0, 5)),
            ModelObject::Player(walking(20.0, 0)),
            ModelObject::Player(driven),
            ModelObject::Player(Player::new(Point3::new(3.0, 4.0, 0.0), 300.0)),
            ModelObject::Missile(Missile {
                pos: Point3::new(1.0, 2.0, 3.0),
                vel: (4.0, 5.0),
                shooter: ObjectId::new(NodeId(1), 2),
                attached: true,
                age: 0.3,
            }),
            ModelObject::Item(Item {
                pos: Point3::new(7.0, 8.0, 0.0),
                item: 2,
            }),
        ]
    }

    #[test]
    fn clone_from_equals_clone_for_every_pair_of_kinds() {
        let objects = every_kind();
        for target in &objects {
            for source in &objects {
                let mut t = target.clone();
                assert_eq!(&t, target);
                t.clone_from(source);
                assert_eq!(&t, source);
            }
        }
    }

    /// A history copy encodes exactly as the object does, in full and on either side of a
    /// delta with any other object or copy (the contract of `GameObject::history_copy`),
    /// and holds no plan.
    #[test]
    fn history_copies_encode_like_the_objects_and_hold_no_plan() {
        let objects = every_kind();
        let bytes = |f: &dyn Fn(&mut Vec<u8>)| {
            let mut v = Vec::new();
            f(&mut v);
            v
        };
        assert!(
            objects
                .iter()
                .any(|o| matches!(o, ModelObject::Player(p) if p.plan.0.is_some())),
            "some objects have a plan to leave out"
        );
        for a in &objects {
            let copy = a.history_copy();
            if let ModelObject::Player(p) = &copy {
                assert!(p.plan.0.is_none(), "{a:?}: the copy holds a plan");
            }
            assert_eq!(bytes(&|v| copy.encode_state(v)), bytes(&|v| a.encode_state(v)));
            for b in &objects {
                let delta = bytes(&|v| GameObject::encode_delta(a, b, v));
                let base = b.history_copy();
                for (x, y) in [(&copy, &base), (&copy, b), (a, &base)] {
                    assert_eq!(
                        bytes(&|v| GameObject::encode_delta(x, y, v)),
                        delta,
                        "delta from {b:?} to {a:?}"
                    );
                }
            }
        }
    }
}
