//! Placing a scenario's objects on nodes.
//!
//! Scenario names follow the paper (`000` §4.1): `N-p2p-rect` is N nodes with one player
//! each, `N-fed-sqr` is N nodes with 8 players each, and so on. Players start at random
//! free points; items are spread round-robin over the nodes.

use worldmesh_core::DetRng;

use crate::map::GameMap;
use crate::model::{ITEM, Item, ModelObject, Player};

/// The objects each node starts with as primaries, for `nodes` nodes with
/// `players_per_node` players each on `map`.
pub fn initial_objects(
    map: &GameMap,
    nodes: usize,
    players_per_node: usize,
    seed: u64,
) -> Vec<Vec<ModelObject>> {
    let mut rng = DetRng::new(seed).fork(0x776f_726b);
    let mut per_node: Vec<Vec<ModelObject>> = vec![Vec::new(); nodes];
    for objs in per_node.iter_mut() {
        for _ in 0..players_per_node {
            let p = map.random_free_point(&mut rng);
            objs.push(ModelObject::Player(Player::new(p, map.config.aoi_half_extent)));
        }
    }
    let units = (map.width * map.height) / (map.config.side_per_16_players * map.config.side_per_16_players);
    let items = (map.config.items_per_16 * units).round() as usize;
    for k in 0..items {
        let pos = map.random_free_point(&mut rng);
        if nodes > 0 {
            per_node[k % nodes].push(ModelObject::Item(Item {
                pos,
                item: ITEM + (k % 3) as u8,
            }));
        }
    }
    per_node
}
