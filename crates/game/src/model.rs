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
//! Wire format: a hand-written compact encoding. Full state: a tag byte and the
//! replicated fields (players 27 bytes, missiles 30, items 14). Delta: a dirty mask byte
//! and only the changed fields (a moving player typically 9 bytes). State that only the
//! primary needs (its path, its fight target, timers) is not replicated.

use std::time::Duration;
use worldmesh_client::Playable;
use worldmesh_core::{Aabb, Durability, NodeId, ObjectId, Point3};
use worldmesh_replica::{GameObject, StateError, ThinkContext};

use crate::map::GameMap;

/// Kind tags (also the `kind` naming attribute).
pub const PLAYER: u8 = 0;
/// Missile kind tag.
pub const MISSILE: u8 = 1;
/// Item kind tag.
pub const ITEM: u8 = 2;
/// Wire tag of a player-controlled player (its kind is still [`PLAYER`]).
const AVATAR: u8 = 3;
/// Wire tag of a bot with a home (a client location for the placement loop).
const HOMED: u8 = 4;

/// Hit radius of a missile, units (a Quake player's bounding box is 32 × 32 × 56).
const HIT_RADIUS: f32 = 40.0;
/// Full health.
pub const FULL_HEALTH: u8 = 100;

/// What a player is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
#[derive(Debug, PartialEq)]
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
    path: Vec<Point3>,
    wait_left: f32,
    fight: Option<ObjectId>,
    next_shot: f32,
    /// While dead: where the player will respawn and the time left.
    respawn: Option<(Point3, f32)>,
    /// Set when a person drives this player through the client protocol instead of the
    /// bot logic (replicated, so a migrated or adopted avatar stays under control).
    pub control: Option<Control>,
    /// Where the person this bot stands for connects from (a latency-matrix row), when the
    /// simulator runs the placement loop; replicated in the full state, never changes.
    pub home: Option<u32>,
}

/// The state of a player-controlled avatar.
#[derive(Clone, Copy, Debug, PartialEq)]
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
#[derive(Clone, Debug, PartialEq)]
pub struct Missile {
    /// Position.
    pub pos: Point3,
    /// Velocity in x and y.
    pub vel: (f32, f32),
    /// Who fired it.
    pub shooter: ObjectId,
    /// Attached to the shooter (proactive replication on).
    pub attached: bool,
    age: f32,
}

/// A static item.
#[derive(Clone, Debug, PartialEq)]
pub struct Item {
    /// Position.
    pub pos: Point3,
    /// Item type.
    pub item: u8,
}

/// Any object of the model workload.
#[derive(Debug, PartialEq)]
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

// Clone by hand for `clone_from`: the replica manager copies every changed primary into
// its version history each frame, and reusing the old copy's path buffer saves an
// allocation per moving player per frame.
impl Clone for Player {
    fn clone(&self) -> Self {
        Player {
            pos: self.pos,
            vel: self.vel,
            health: self.health,
            activity: self.activity,
            aoi: self.aoi,
            path: self.path.clone(),
            wait_left: self.wait_left,
            fight: self.fight,
            next_shot: self.next_shot,
            respawn: self.respawn,
            control: self.control,
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
            path,
            wait_left,
            fight,
            next_shot,
            respawn,
            control,
            home,
        } = source;
        self.pos = *pos;
        self.vel = *vel;
        self.health = *health;
        self.activity = *activity;
        self.aoi = *aoi;
        self.path.clone_from(path);
        self.wait_left = *wait_left;
        self.fight = *fight;
        self.next_shot = *next_shot;
        self.respawn = *respawn;
        self.control = *control;
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
    /// A player standing at `pos` with full health and an AoI box of half-extent `aoi`.
    pub fn new(pos: Point3, aoi: f32) -> Self {
        Player {
            pos,
            vel: (0.0, 0.0),
            health: FULL_HEALTH,
            activity: Activity::Waiting,
            aoi,
            path: Vec::new(),
            wait_left: 0.0,
            fight: None,
            next_shot: 0.0,
            respawn: None,
            control: None,
            home: None,
        }
    }

    /// The avatar of `player`, standing at `pos`.
    pub fn avatar(pos: Point3, aoi: f32, player: u64) -> Self {
        Player {
            control: Some(Control {
                player,
                last_input: 0,
                applied: 0,
                intent: (0.0, 0.0),
                aim: None,
                left: false,
            }),
            ..Player::new(pos, aoi)
        }
    }

    fn think(&mut self, ctx: &mut ThinkContext<'_, ModelObject>) {
        let map = ctx.world;
        let cfg = &map.config;
        let dt = ctx.dt.as_secs_f32();
        if self.health == 0 {
            // Dead: pick the spawn point now, wait the respawn delay, then appear there.
            match self.respawn {
                None => {
                    let wp = map.pick_waypoint(ctx.rng);
                    self.respawn = Some((map.waypoints[wp], cfg.respawn_delay_s as f32));
                    self.vel = (0.0, 0.0);
                    self.fight = None;
                    self.path.clear();
                }
                Some((at, left)) if left - dt > 0.0 => self.respawn = Some((at, left - dt)),
                Some((at, _)) => {
                    let (control, home) = (self.control, self.home);
                    *self = Player::new(at, self.aoi);
                    self.control = control;
                    self.home = home;
                }
            }
            return;
        }
        if let Some(c) = self.control {
            self.think_controlled(ctx, c);
            return;
        }
        // Fights.
        match self.fight {
            Some(t) => {
                let target = ctx.store.object(t).and_then(|o| match o {
                    ModelObject::Player(p) => Some(p.pos),
                    _ => None,
                });
                let keep =
                    target.filter(|tp| tp.distance(self.pos) <= cfg.fight_range && map.clear(self.pos, *tp));
                match keep {
                    Some(tp) if !ctx.rng.chance(cfg.fight_leave_rate * f64::from(dt)) => {
                        self.next_shot -= dt;
                        if self.next_shot <= 0.0 {
                            self.next_shot += cfg.fire_interval_s as f32;
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
                    _ => self.fight = None,
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
                    self.fight = Some(id);
                    self.next_shot = ctx.rng.range_f32(0.0, cfg.fire_interval_s as f32);
                }
            }
        }
        // Movement.
        if self.path.is_empty() {
            self.vel = (0.0, 0.0);
            self.wait_left -= dt;
            if self.wait_left <= 0.0 {
                let wp = map.pick_waypoint(ctx.rng);
                self.path = map.path(self.pos, wp).unwrap_or_default();
                self.path.reverse(); // pop from the back
                self.wait_left = ctx.rng.exponential(cfg.mean_wait_s) as f32;
            }
        }
        if let Some(&next) = self.path.last() {
            let speed = if self.fight.is_some() {
                cfg.player_speed * 0.5
            } else {
                cfg.player_speed
            };
            let step = speed * dt;
            let d = self.pos.distance(next);
            if d <= step {
                self.pos = next;
                self.path.pop();
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
        self.activity = if self.fight.is_some() {
            Activity::Fighting
        } else if self.path.is_empty() {
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
        self.next_shot = (self.next_shot - dt).max(0.0);
        if let Some(aim) = c.aim
            && self.next_shot <= 0.0
            && (aim.0 != 0.0 || aim.1 != 0.0)
        {
            self.next_shot = cfg.fire_interval_s as f32;
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

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], StateError> {
        if self.0.len() < N {
            return Err(StateError(format!("truncated: need {N} more bytes")));
        }
        let (a, b) = self.0.split_at(N);
        self.0 = b;
        a.try_into().map_err(|_| StateError("truncated".into()))
    }
    fn u8(&mut self) -> Result<u8, StateError> {
        Ok(self.take::<1>()?[0])
    }
    fn f32(&mut self) -> Result<f32, StateError> {
        let v = f32::from_le_bytes(self.take::<4>()?);
        if v.is_finite() {
            Ok(v)
        } else {
            Err(StateError("non-finite number".into()))
        }
    }
    fn u32(&mut self) -> Result<u32, StateError> {
        Ok(u32::from_le_bytes(self.take::<4>()?))
    }
    fn done(&self) -> Result<(), StateError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(StateError(format!("{} trailing bytes", self.0.len())))
        }
    }
}

fn put_f32(out: &mut Vec<u8>, v: f32) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// The changing part of an avatar's control: last input, inputs applied, intent, flags
/// (bit 0: aim follows, bit 1: left), aim.
fn put_control(out: &mut Vec<u8>, c: &Control) {
    out.extend_from_slice(&c.last_input.to_le_bytes());
    out.extend_from_slice(&c.applied.to_le_bytes());
    put_f32(out, c.intent.0);
    put_f32(out, c.intent.1);
    out.push(u8::from(c.aim.is_some()) | (u8::from(c.left) << 1));
    if let Some((x, y)) = c.aim {
        put_f32(out, x);
        put_f32(out, y);
    }
}

/// Reads what [`put_control`] wrote, for `player`. Directions are checked to be at most
/// unit length (a state from the network cannot make an avatar fast).
fn read_control(r: &mut Reader<'_>, player: u64) -> Result<Control, StateError> {
    let last_input = r.u32()?;
    let applied = r.u32()?;
    let intent = (r.f32()?, r.f32()?);
    let flags = r.u8()?;
    if flags > 3 {
        return Err(StateError(format!("bad control flags {flags:#x}")));
    }
    let aim = if flags & 1 != 0 {
        Some((r.f32()?, r.f32()?))
    } else {
        None
    };
    let long = |(x, y): (f32, f32)| x * x + y * y > 1.0 + 1e-3;
    if long(intent) || aim.is_some_and(long) {
        return Err(StateError("control direction longer than 1".into()));
    }
    Ok(Control {
        player,
        last_input,
        applied,
        intent,
        aim,
        left: flags & 2 != 0,
    })
}

/// Delta mask bit meaning "a full state follows" (variant changed).
const FULL: u8 = 0x80;

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

    fn position_ahead(&self, lead: Duration) -> Point3 {
        match self {
            // A dead player about to respawn will be at its spawn point (known only to the
            // primary: the spawn point is not replicated).
            ModelObject::Player(p) if p.health == 0 => match p.respawn {
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

    fn interest(&self) -> Option<Aabb> {
        match self {
            // A dead player already looks where it will respawn.
            ModelObject::Player(p) => {
                let at = match p.respawn {
                    Some((spawn, _)) if p.health == 0 => spawn,
                    _ => p.pos,
                };
                Some(Aabb::around(at, Point3::new(p.aoi, p.aoi, 1000.0)))
            }
            _ => None,
        }
    }

    /// A person's avatar is located by its player id (low 32 bits): the session table,
    /// which knows the delays the player measured, answers the placement loop for it.
    fn client_location(&self) -> Option<u32> {
        match self {
            ModelObject::Player(Player { control: Some(c), .. }) if !c.left => Some(c.player as u32),
            ModelObject::Player(p) => p.home,
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

    fn encode_state(&self, out: &mut Vec<u8>) {
        match self {
            ModelObject::Player(p) => {
                out.push(match (&p.control, p.home) {
                    (Some(_), _) => AVATAR,
                    (None, Some(_)) => HOMED,
                    (None, None) => PLAYER,
                });
                put_f32(out, p.pos.x);
                put_f32(out, p.pos.y);
                put_f32(out, p.pos.z);
                put_f32(out, p.vel.0);
                put_f32(out, p.vel.1);
                out.push(p.health);
                out.push(p.activity as u8);
                put_f32(out, p.aoi);
                if let Some(c) = &p.control {
                    out.extend_from_slice(&c.player.to_le_bytes());
                    put_control(out, c);
                } else if let Some(h) = p.home {
                    out.extend_from_slice(&h.to_le_bytes());
                }
            }
            ModelObject::Missile(m) => {
                out.push(MISSILE);
                put_f32(out, m.pos.x);
                put_f32(out, m.pos.y);
                put_f32(out, m.pos.z);
                put_f32(out, m.vel.0);
                put_f32(out, m.vel.1);
                out.extend_from_slice(&m.shooter.origin.0.to_le_bytes());
                out.extend_from_slice(&m.shooter.counter().to_le_bytes());
                // Bit 0: attached; bit 1: the shooter's generation follows (a shooter of a
                // first-generation node, the common case, costs nothing extra).
                let generation = m.shooter.generation();
                out.push(u8::from(m.attached) | if generation != 0 { 2 } else { 0 });
                if generation != 0 {
                    out.extend_from_slice(&generation.to_le_bytes());
                }
            }
            ModelObject::Item(i) => {
                out.push(ITEM);
                put_f32(out, i.pos.x);
                put_f32(out, i.pos.y);
                put_f32(out, i.pos.z);
                out.push(i.item);
            }
        }
    }

    fn decode_state(bytes: &[u8]) -> Result<Self, StateError> {
        let mut r = Reader(bytes);
        let o = match r.u8()? {
            tag @ (PLAYER | AVATAR | HOMED) => {
                let pos = Point3::new(r.f32()?, r.f32()?, r.f32()?);
                let vel = (r.f32()?, r.f32()?);
                let health = r.u8()?;
                let activity = match r.u8()? {
                    0 => Activity::Waiting,
                    1 => Activity::Moving,
                    2 => Activity::Fighting,
                    a => return Err(StateError(format!("unknown activity {a}"))),
                };
                let aoi = r.f32()?;
                let control = if tag == AVATAR {
                    let player = u64::from_le_bytes(r.take::<8>()?);
                    Some(read_control(&mut r, player)?)
                } else {
                    None
                };
                let home = if tag == HOMED { Some(r.u32()?) } else { None };
                ModelObject::Player(Player {
                    vel,
                    health,
                    activity,
                    control,
                    home,
                    ..Player::new(pos, aoi)
                })
            }
            MISSILE => {
                let pos = Point3::new(r.f32()?, r.f32()?, r.f32()?);
                let vel = (r.f32()?, r.f32()?);
                let (origin, seq) = (NodeId(r.u32()?), r.u32()?);
                let flags = r.u8()?;
                if flags > 3 {
                    return Err(StateError(format!("bad missile flags {flags:#x}")));
                }
                let generation = if flags & 2 != 0 { r.u32()? } else { 0 };
                let shooter = ObjectId::with_generation(origin, generation, seq);
                let attached = flags & 1 != 0;
                ModelObject::Missile(Missile {
                    pos,
                    vel,
                    shooter,
                    attached,
                    age: 0.0,
                })
            }
            ITEM => {
                let pos = Point3::new(r.f32()?, r.f32()?, r.f32()?);
                ModelObject::Item(Item { pos, item: r.u8()? })
            }
            t => return Err(StateError(format!("unknown object tag {t}"))),
        };
        r.done()?;
        Ok(o)
    }

    fn encode_delta(&self, baseline: &Self, out: &mut Vec<u8>) {
        let at = out.len();
        out.push(0);
        let mut mask = 0u8;
        let mut field = |bit: u8, changed: bool, out: &mut Vec<u8>, write: &dyn Fn(&mut Vec<u8>)| {
            if changed {
                mask |= 1 << bit;
                write(out);
            }
        };
        match (self, baseline) {
            (ModelObject::Player(p), ModelObject::Player(b))
                if p.aoi == b.aoi
                    && p.home == b.home
                    && p.control.map(|c| c.player) == b.control.map(|c| c.player) =>
            {
                field(0, p.pos.x != b.pos.x, out, &|o| put_f32(o, p.pos.x));
                field(1, p.pos.y != b.pos.y, out, &|o| put_f32(o, p.pos.y));
                field(2, p.pos.z != b.pos.z, out, &|o| put_f32(o, p.pos.z));
                field(3, p.vel != b.vel, out, &|o| {
                    put_f32(o, p.vel.0);
                    put_f32(o, p.vel.1);
                });
                field(4, p.health != b.health, out, &|o| o.push(p.health));
                field(5, p.activity != b.activity, out, &|o| o.push(p.activity as u8));
                if let Some(c) = &p.control {
                    field(6, p.control != b.control, out, &|o| put_control(o, c));
                }
            }
            (ModelObject::Missile(m), ModelObject::Missile(b))
                if m.shooter == b.shooter && m.attached == b.attached =>
            {
                field(0, m.pos.x != b.pos.x, out, &|o| put_f32(o, m.pos.x));
                field(1, m.pos.y != b.pos.y, out, &|o| put_f32(o, m.pos.y));
                field(2, m.pos.z != b.pos.z, out, &|o| put_f32(o, m.pos.z));
                field(3, m.vel != b.vel, out, &|o| {
                    put_f32(o, m.vel.0);
                    put_f32(o, m.vel.1);
                });
            }
            (ModelObject::Item(i), ModelObject::Item(b)) => {
                field(0, i.pos != b.pos, out, &|o| {
                    put_f32(o, i.pos.x);
                    put_f32(o, i.pos.y);
                    put_f32(o, i.pos.z);
                });
                field(1, i.item != b.item, out, &|o| o.push(i.item));
            }
            _ => {
                mask = FULL;
                self.encode_state(out);
            }
        }
        out[at] = mask;
    }

    fn apply_delta(baseline: &Self, delta: &[u8]) -> Result<Self, StateError> {
        let mut r = Reader(delta);
        let mask = r.u8()?;
        if mask == FULL {
            return Self::decode_state(r.0);
        }
        let bit = |b: u8| mask & (1 << b) != 0;
        let mut o = baseline.clone();
        match &mut o {
            ModelObject::Player(p) => {
                if mask & 0x80 != 0 || (mask & 0x40 != 0 && p.control.is_none()) {
                    return Err(StateError(format!("bad player mask {mask:#x}")));
                }
                if bit(0) {
                    p.pos.x = r.f32()?;
                }
                if bit(1) {
                    p.pos.y = r.f32()?;
                }
                if bit(2) {
                    p.pos.z = r.f32()?;
                }
                if bit(3) {
                    p.vel = (r.f32()?, r.f32()?);
                }
                if bit(4) {
                    p.health = r.u8()?;
                }
                if bit(5) {
                    p.activity = match r.u8()? {
                        0 => Activity::Waiting,
                        1 => Activity::Moving,
                        2 => Activity::Fighting,
                        a => return Err(StateError(format!("unknown activity {a}"))),
                    };
                }
                if bit(6)
                    && let Some(c) = &mut p.control
                {
                    *c = read_control(&mut r, c.player)?;
                }
            }
            ModelObject::Missile(m) => {
                if mask & 0xF0 != 0 {
                    return Err(StateError(format!("bad missile mask {mask:#x}")));
                }
                if bit(0) {
                    m.pos.x = r.f32()?;
                }
                if bit(1) {
                    m.pos.y = r.f32()?;
                }
                if bit(2) {
                    m.pos.z = r.f32()?;
                }
                if bit(3) {
                    m.vel = (r.f32()?, r.f32()?);
                }
            }
            ModelObject::Item(i) => {
                if mask & 0xFC != 0 {
                    return Err(StateError(format!("bad item mask {mask:#x}")));
                }
                if bit(0) {
                    i.pos = Point3::new(r.f32()?, r.f32()?, r.f32()?);
                }
                if bit(1) {
                    i.item = r.u8()?;
                }
            }
        }
        r.done()?;
        Ok(o)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn walking(x: f32, steps: usize) -> Player {
        let mut p = Player::new(Point3::new(x, 2.0, 0.0), 450.0);
        p.path = (0..steps).map(|k| Point3::new(k as f32, x, 0.0)).collect();
        p.vel = (x, -x);
        p.health = 57;
        p.activity = Activity::Moving;
        p.wait_left = 0.25;
        p.fight = Some(ObjectId::new(NodeId(3), 9));
        p.next_shot = 0.5;
        p.respawn = Some((Point3::new(1.0, 1.0, 0.0), 0.7));
        p
    }

    #[test]
    fn clone_from_equals_clone_for_every_pair_of_kinds() {
        let objects = [
            ModelObject::Player(walking(10.0, 5)),
            ModelObject::Player(walking(20.0, 0)),
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
        ];
        for target in &objects {
            for source in &objects {
                let mut t = target.clone();
                assert_eq!(&t, target);
                t.clone_from(source);
                assert_eq!(&t, source);
            }
        }
    }
}
