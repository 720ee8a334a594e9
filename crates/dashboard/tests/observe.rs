//! The observer on real node state machines (the model game): owners, players, missing
//! replicas as paper `000` §6.3 counts them, and one owner per object while a region
//! migrates.

use std::sync::Arc;

use worldmesh_core::{NodeId, Point3, Time};
use worldmesh_dashboard::observe::class_names;
use worldmesh_dashboard::{KindInfo, Observer, Rect, WorldInfo};
use worldmesh_game::model::{Item, Player};
use worldmesh_game::{GameMap, ModelConfig, ModelObject};
use worldmesh_node::{Mode, Node, NodeConfig};

fn world() -> WorldInfo {
    WorldInfo {
        title: "test".into(),
        bounds: Rect::new(0.0, 0.0, 4800.0, 2400.0),
        obstacles: Vec::new(),
        kinds: ["player", "missile", "item"]
            .iter()
            .map(|k| KindInfo {
                name: (*k).into(),
                player: *k == "player",
            })
            .collect(),
        classes: class_names(),
    }
}

fn node(id: u32, map: &Arc<GameMap>) -> Node<ModelObject> {
    let peers = (0..2).map(NodeId).filter(|p| p.0 != id).collect();
    Node::new(
        NodeConfig::new(NodeId(id), peers, 1).with_mode(Mode::Interest),
        Arc::clone(map),
        Time::ZERO,
    )
}

fn player(x: f32, y: f32) -> ModelObject {
    ModelObject::Player(Player::new(Point3::new(x, y, 0.0), 450.0))
}

#[test]
fn owners_players_and_missing_replicas() {
    let map = Arc::new(GameMap::generate(&ModelConfig::default(), 32, 1));
    let mut nodes = vec![node(0, &map), node(1, &map)];
    let t = Time::ZERO;
    let a = nodes[0].spawn(t, player(1000.0, 1000.0));
    let b = nodes[1].spawn(t, player(1200.0, 1000.0)); // inside a's area of interest
    let far = nodes[1].spawn(t, player(4000.0, 2000.0)); // nobody's interest
    let item = nodes[1].spawn(
        t,
        ModelObject::Item(Item {
            pos: Point3::new(900.0, 1100.0, 0.0),
            item: 1,
        }),
    ); // inside a's and b's interest, owned by node 1

    let mut obs = Observer::new(&world());
    let tick = obs.observe(2.5, &nodes, &|_| true, true);
    assert_eq!(tick.time_s, 2.5);
    assert_eq!(tick.objects.len(), 4);
    let owner = |id| tick.objects.iter().find(|o| o.id == id).unwrap().owner;
    assert_eq!(owner(a), NodeId(0));
    assert_eq!(owner(b), NodeId(1));
    assert_eq!(owner(far), NodeId(1));
    assert_eq!(owner(item), NodeId(1));
    let aoi = tick.objects.iter().find(|o| o.id == a).unwrap().aoi.unwrap();
    assert_eq!((aoi.min_x, aoi.max_x), (550.0, 1450.0));
    assert_eq!(tick.objects.iter().find(|o| o.id == item).unwrap().aoi, None);
    let n0 = &tick.nodes[0];
    let n1 = &tick.nodes[1];
    assert_eq!((n0.players, n0.primaries, n0.replicas), (1, 1, 0));
    assert_eq!((n1.players, n1.primaries, n1.replicas), (2, 3, 0));
    // Node 0 needs b and the item (held by node 1) and holds neither; node 1 needs a.
    assert_eq!(n0.missing, Some(2));
    assert_eq!(n1.missing, Some(1));
    assert_eq!(n0.sent_bytes.len(), 6);
    // Not asked: not counted.
    let tick = obs.observe(2.6, &nodes, &|_| true, false);
    assert_eq!(tick.nodes[0].missing, None);
    // Node state says who is down.
    let tick = obs.observe(2.7, &nodes, &|id| id != NodeId(1), false);
    assert!(tick.nodes[0].up && !tick.nodes[1].up);
}

#[test]
fn a_migrating_object_has_one_owner_throughout() {
    let map = Arc::new(GameMap::generate(&ModelConfig::default(), 32, 1));
    let mut nodes = vec![node(0, &map), node(1, &map)];
    let t = Time::from_secs_f64(1.0);
    let a = nodes[0].spawn(t, player(1000.0, 1000.0));
    let mut obs = Observer::new(&world());
    nodes[0].migrate(t, &[a], NodeId(1)).unwrap();
    // Frozen at node 0, not yet at node 1: still node 0's.
    let tick = obs.observe(1.0, &nodes, &|_| true, false);
    assert_eq!(tick.objects.len(), 1);
    assert_eq!(tick.objects[0].owner, NodeId(0));
    // Deliver node 0's migration datagrams: node 1 binds it while node 0 still holds the
    // frozen copy; the bound one is shown, once.
    while let Some(tx) = nodes[0].poll_transmit() {
        assert_eq!(tx.dst, NodeId(1));
        nodes[1].handle_datagram(t, NodeId(0), &tx.datagram);
    }
    assert_eq!(nodes[1].store().primary_count(), 1);
    assert_eq!(nodes[0].store().primary_count(), 1);
    let tick = obs.observe(1.1, &nodes, &|_| true, false);
    assert_eq!(tick.objects.len(), 1);
    assert_eq!(tick.objects[0].owner, NodeId(1));
    assert_eq!((tick.nodes[0].primaries, tick.nodes[1].primaries), (0, 1));
}
