//! The model workload's objects: encoding, deltas, and behaviour over many frames.

use proptest::prelude::*;
use std::time::Duration;
use worldmesh_core::{DetRng, Durability, NodeId, ObjectId, Point3, Time};
use worldmesh_game::model::{Activity, Control, GameWrite, Item, Player, PlayerInput};
use worldmesh_game::{GameMap, ModelConfig, ModelObject, workload};
use worldmesh_replica::{GameObject, ObjectStore, ThinkContext};

fn arb_player() -> impl Strategy<Value = ModelObject> {
    (
        -1e4f32..1e4,
        -1e4f32..1e4,
        -50f32..50.0,
        0u8..=100,
        0u8..3,
        -400f32..400.0,
        proptest::option::of((
            0u64..3,
            any::<u32>(),
            -127i8..=127,
            -127i8..=127,
            any::<bool>(),
            any::<bool>(),
        )),
        proptest::option::of(any::<u32>()),
    )
        .prop_map(|(x, y, vx, h, a, aoi, control, home)| {
            let mut p = Player::new(Point3::new(x, y, 0.0), aoi.abs() + 1.0);
            p.vel = (vx, -vx);
            p.health = h;
            p.activity = [Activity::Waiting, Activity::Moving, Activity::Fighting][a as usize];
            p.control = control.map(|(player, last_input, dx, dy, fire, left)| {
                let input = PlayerInput {
                    dx,
                    dy,
                    fire: fire.then_some((dy, dx)),
                };
                Box::new(Control {
                    player,
                    last_input,
                    applied: last_input / 2,
                    intent: input.direction(),
                    aim: fire.then(|| {
                        PlayerInput {
                            dx: dy,
                            dy: dx,
                            fire: None,
                        }
                        .direction()
                    }),
                    left,
                })
            });
            p.home = if p.control.is_none() { home } else { None };
            ModelObject::Player(p)
        })
}

proptest! {
    #[test]
    fn full_states_and_deltas_round_trip(a in arb_player(), b in arb_player()) {
        let mut buf = Vec::new();
        a.encode_state(&mut buf);
        prop_assert_eq!(ModelObject::decode_state(&buf).unwrap(), a.clone());
        let mut d = Vec::new();
        b.encode_delta(&a, &mut d);
        prop_assert_eq!(ModelObject::apply_delta(&a, &d).unwrap(), b.clone());
        // Applying against another baseline does not silently produce `b` unless equal.
        let item = ModelObject::Item(Item { pos: Point3::ORIGIN, item: 2 });
        let mut d2 = Vec::new();
        b.encode_delta(&item, &mut d2);
        prop_assert_eq!(ModelObject::apply_delta(&item, &d2).unwrap(), b);
    }

    #[test]
    fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64), a in arb_player()) {
        let _ = ModelObject::decode_state(&bytes);
        let _ = ModelObject::apply_delta(&a, &bytes);
    }
}

#[test]
fn a_moving_player_delta_is_small() {
    let a = ModelObject::Player(Player::new(Point3::new(10.0, 10.0, 0.0), 450.0));
    let mut b = a.clone();
    if let ModelObject::Player(p) = &mut b {
        p.pos.x += 32.0;
        p.pos.y += 1.0;
    }
    let mut d = Vec::new();
    b.encode_delta(&a, &mut d);
    // Mask + x + y; near 10 a float step is 2^-20, so these moves are 2^24 and 2^20
    // steps: 4-byte varints each.
    assert_eq!(d.len(), 9, "mask + x + y");
    assert_eq!(ModelObject::apply_delta(&a, &d).unwrap(), b);
    // At map coordinates (hundreds to thousands of units) the same moves are at most 2^19
    // steps: 3 bytes per coordinate.
    let a = ModelObject::Player(Player::new(Point3::new(1000.0, 700.0, 0.0), 450.0));
    let mut b = a.clone();
    if let ModelObject::Player(p) = &mut b {
        p.pos.x += 32.0;
        p.pos.y += 1.0;
    }
    let mut d = Vec::new();
    b.encode_delta(&a, &mut d);
    assert_eq!(d.len(), 7, "mask + x + y");
    assert_eq!(ModelObject::apply_delta(&a, &d).unwrap(), b);
    let mut full = Vec::new();
    b.encode_state(&mut full);
    // Variant, position 12, velocity 8, health, activity, aoi 4, control and home tags.
    assert_eq!(full.len(), 29);
}

/// Runs the think function of primary `id` for one 100-ms frame at `now`; removes it from
/// the store if it deletes itself.
fn think_once(
    store: &mut ObjectStore<ModelObject>,
    id: ObjectId,
    now: Time,
    rng: &mut DetRng,
    map: &GameMap,
    spawned: &mut Vec<ModelObject>,
    writes: &mut Vec<(ObjectId, GameWrite)>,
) {
    let mut e = store.take(id).unwrap();
    let mut ctx = ThinkContext::new(
        now,
        Duration::from_millis(100),
        NodeId(0),
        id,
        rng,
        map,
        store,
        spawned,
        writes,
    );
    e.object.think(&mut ctx);
    if !ctx.wants_delete() {
        store.restore(id, e);
    }
}

/// Runs every object of a small world on one "node" for `frames` frames.
fn run(frames: usize, seed: u64) -> (ObjectStore<ModelObject>, GameMap, usize, usize) {
    let cfg = ModelConfig::default();
    let map = GameMap::generate(&cfg, 16, seed);
    let mut store = ObjectStore::new();
    let objs = workload::initial_objects(&map, 2, 8, seed);
    let mut seq = 0;
    for o in objs.into_iter().flatten() {
        store
            .insert_primary(ObjectId::new(NodeId(0), seq), o, 1, Time::ZERO)
            .unwrap();
        seq += 1;
    }
    let mut rng = DetRng::new(seed);
    let (mut missiles, mut hits) = (0, 0);
    for f in 0..frames {
        let now = Time::from_millis(100 * f as u64);
        let mut spawned = Vec::new();
        let mut writes = Vec::new();
        for id in store.primary_ids() {
            think_once(&mut store, id, now, &mut rng, &map, &mut spawned, &mut writes);
        }
        for o in spawned {
            missiles += 1;
            store
                .insert_primary(ObjectId::new(NodeId(0), seq), o, 1, now)
                .unwrap();
            seq += 1;
        }
        for (t, w) in writes {
            hits += 1;
            assert_eq!(w, GameWrite::Damage(34));
            if let Some(o) = store.take(t) {
                let mut o = o;
                o.object.apply_write(&w);
                store.restore(t, o);
            }
        }
    }
    (store, map, missiles, hits)
}

#[test]
fn bots_move_on_free_ground_fight_and_shoot() {
    let (store, map, missiles, hits) = run(600, 3);
    let players: Vec<&Player> = store
        .iter()
        .filter_map(|(_, e)| {
            if let ModelObject::Player(p) = &e.object {
                Some(p)
            } else {
                None
            }
        })
        .collect();
    assert_eq!(players.len(), 16);
    for p in &players {
        assert!(map.is_free(p.pos), "player at {} stands in an obstacle", p.pos);
        assert!(p.pos.x >= 0.0 && p.pos.x <= map.width && p.pos.y >= 0.0 && p.pos.y <= map.height);
    }
    assert!(missiles > 20, "fights happen: {missiles} missiles in 60 s");
    assert!(hits > 0, "some missiles hit");
    // Missiles die: at most a few seconds' worth are alive at any time.
    let alive = store
        .iter()
        .filter(|(_, e)| matches!(e.object, ModelObject::Missile(_)))
        .count();
    assert!(alive < missiles, "{alive} alive of {missiles}");
}

#[test]
fn avatars_are_checkpointed_missiles_ephemeral_items_durable() {
    let player = ModelObject::Player(Player::new(Point3::new(10.0, 10.0, 0.0), 450.0));
    let item = ModelObject::Item(Item {
        pos: Point3::ORIGIN,
        item: 1,
    });
    assert_eq!(player.durability(), Durability::Checkpointed);
    assert_eq!(item.durability(), Durability::Durable);
    // Missiles exist only once fired: take them from a running world.
    let (store, ..) = run(600, 3);
    let mut seen = 0;
    for (_, e) in store.iter() {
        if matches!(e.object, ModelObject::Missile(_)) {
            assert_eq!(e.object.durability(), Durability::Ephemeral);
            seen += 1;
        }
    }
    assert!(seen > 0, "no missile alive after 60 s");
}

#[test]
fn same_seed_same_world() {
    let a = run(100, 9).0;
    let b = run(100, 9).0;
    let pa: Vec<_> = a.iter().map(|(id, e)| (id, e.object.clone())).collect();
    let pb: Vec<_> = b.iter().map(|(id, e)| (id, e.object.clone())).collect();
    assert_eq!(pa, pb);
}

/// Predictive publication of a killed player (paper `000` §6.2): while it waits to respawn
/// it stays where it died, but once the respawn is within the lead time it announces its
/// spawn point, and after the respawn it is there. A living player's prediction follows its
/// velocity.
#[test]
fn a_dead_player_announces_its_spawn_point_within_the_lead() {
    let cfg = ModelConfig::default();
    let map = GameMap::generate(&cfg, 16, 3);
    let mut store = ObjectStore::new();
    let id = ObjectId::new(NodeId(0), 0);
    let mut p = Player::new(Point3::new(100.0, 100.0, 0.0), 450.0);
    p.vel = (200.0, -100.0);
    let moving = ModelObject::Player(p.clone());
    let ahead = moving.position_ahead(Duration::from_millis(500), &map);
    assert_eq!(ahead, Point3::new(200.0, 50.0, 0.0));
    p.health = 0;
    let died_at = p.pos;
    store
        .insert_primary(id, ModelObject::Player(p), 1, Time::ZERO)
        .unwrap();
    let mut rng = DetRng::new(3);
    let lead = Duration::from_millis(500);
    let mut announced = None;
    let mut respawned = None;
    for f in 0..40u64 {
        let (mut spawned, mut writes) = (Vec::new(), Vec::new());
        let now = Time::from_millis(100 * f);
        think_once(&mut store, id, now, &mut rng, &map, &mut spawned, &mut writes);
        let o = &store.get(id).unwrap().object;
        let ModelObject::Player(q) = o else { unreachable!() };
        if q.health == 0 {
            let a = o.position_ahead(lead, &map);
            if a != died_at {
                announced.get_or_insert((f, a));
            }
        } else if respawned.is_none() {
            respawned = Some((f, q.pos));
        }
    }
    let (fa, spawn) = announced.expect("the spawn point is announced before the respawn");
    let (fr, at) = respawned.expect("the player respawns (1.7 s)");
    assert_eq!(spawn, at, "announced where it respawned");
    assert!(
        fr > fa && fr - fa <= 6,
        "announced within the lead: frames {fa} → {fr}"
    );
}

fn write(store: &mut ObjectStore<ModelObject>, id: ObjectId, w: &GameWrite) {
    let mut e = store.take(id).unwrap();
    e.object.apply_write(w);
    store.restore(id, e);
}

/// A person's avatar: inputs steer it at the game's speed and no faster (a maximal input
/// on both axes is normalised), it fires along the aim at the fire interval, walls stop it,
/// bots ignore inputs, and it removes itself when its player leaves.
#[test]
fn an_avatar_moves_as_its_inputs_say_and_never_faster_than_the_game_allows() {
    use worldmesh_client::Playable;
    let cfg = ModelConfig::default();
    let map = GameMap::generate(&cfg, 16, 3);
    let mut store = ObjectStore::new();
    let id = ObjectId::new(NodeId(0), 0);
    let avatar = ModelObject::spawn_avatar(&map, 7);
    let start = avatar.position();
    assert_eq!(avatar.last_input(), Some(0));
    store.insert_primary(id, avatar, 1, Time::ZERO).unwrap();
    let mut rng = DetRng::new(3);
    let flat_out = PlayerInput {
        dx: 127,
        dy: 127,
        fire: Some((127, 0)),
    };
    write(&mut store, id, &ModelObject::input_write(&flat_out, 1));
    let (mut spawned, mut writes) = (Vec::new(), Vec::new());
    let mut max_step = 0f32;
    let mut prev = start;
    for f in 0..10u64 {
        think_once(
            &mut store,
            id,
            Time::from_millis(100 * f),
            &mut rng,
            &map,
            &mut spawned,
            &mut writes,
        );
        let now = store.get(id).unwrap().object.position();
        max_step = max_step.max(now.distance(prev));
        prev = now;
    }
    let limit = cfg.player_speed * 0.1;
    assert!(max_step <= limit * 1.0001, "step {max_step} > speed x dt {limit}");
    assert!(max_step > 0.0, "the avatar moved");
    let o = &store.get(id).unwrap().object;
    assert_eq!(o.last_input(), Some(1));
    // 1 s of firing at the configured interval.
    let shots = spawned
        .iter()
        .filter(|m| matches!(m, ModelObject::Missile(_)))
        .count();
    let expect = (1.0 / cfg.fire_interval_s).ceil() as usize;
    assert!(shots >= 1 && shots <= expect, "{shots} shots, at most {expect}");
    // A bot ignores inputs.
    let mut bot = ModelObject::Player(Player::new(start, 450.0));
    let before = bot.clone();
    bot.apply_write(&ModelObject::input_write(&flat_out, 5));
    assert_eq!(bot, before);
    // Leaving: the avatar deletes itself at its next think.
    write(&mut store, id, &ModelObject::leave_write());
    think_once(
        &mut store,
        id,
        Time::from_secs_f64(2.0),
        &mut rng,
        &map,
        &mut spawned,
        &mut writes,
    );
    assert!(store.get(id).is_none(), "the avatar of a player who left is gone");
}

/// Each input sequence number is applied once, wherever it comes from: an input resent
/// (after a hand-off, or duplicated by the network) does nothing.
#[test]
fn an_avatar_applies_each_input_number_once() {
    use worldmesh_client::Playable;
    let map = GameMap::generate(&ModelConfig::default(), 16, 3);
    let mut a = ModelObject::spawn_avatar(&map, 1);
    let go = PlayerInput {
        dx: 127,
        dy: 0,
        fire: None,
    };
    let stop = PlayerInput::default();
    let control = |o: &ModelObject| match o {
        ModelObject::Player(p) => *p.control.clone().unwrap(),
        _ => unreachable!(),
    };
    a.apply_write(&ModelObject::input_write(&go, 1));
    a.apply_write(&ModelObject::input_write(&stop, 2));
    a.apply_write(&ModelObject::input_write(&go, 1)); // late duplicate of 1
    a.apply_write(&ModelObject::input_write(&go, 2)); // replay of 2
    let c = control(&a);
    assert_eq!((c.last_input, c.applied, c.intent), (2, 2, (0.0, 0.0)));
    // Wrapping sequence numbers keep working.
    let mut w = ModelObject::spawn_avatar(&map, 2);
    if let ModelObject::Player(p) = &mut w {
        p.control.as_mut().unwrap().last_input = u32::MAX;
    }
    w.apply_write(&ModelObject::input_write(&go, 0));
    assert_eq!(control(&w).last_input, 0);
}
