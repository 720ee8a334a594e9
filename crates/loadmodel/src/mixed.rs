//! Mixed workloads: several object classes with their own densities, counts and update
//! behaviour (paper `004` §4: "the positions of each object type are sampled"; §5.2
//! extended from avatars to every replicated object).
//!
//! [`crate::predict`] follows the paper's case study: only avatars, each sending one
//! `u`-byte update per tick. A game such as the model workload (paper `000` §4.1) also
//! has missiles (short-lived, moving every tick) and items (static), and its objects do
//! not change every tick (a waiting player sends nothing). This module predicts the same
//! quantities for such a workload, so that predictions can be held against what the
//! simulator puts on the wire.
//!
//! ## The model
//!
//! Observers are the `N` players, with density `P` (over cells `i`). A class `c` of
//! objects has a density `P_c`, a mean number of live objects `n_c` (the players
//! themselves: `N`), a **send share** `s_c` (the share of ticks in which one object has a
//! change to send; 0 for static objects) and a mean update size `u_c` (bytes of one
//! update item: data and per-item header).
//!
//! - `q_c(i) = Σ_j P_c(j) V(i,j) A(i,j)` over **all** cells `j`, the observer's own cell
//!   included: the chance that one object of class `c` is in the view of an observer in
//!   cell `i`. Unlike the paper's `j ≠ i` (one avatar per cell), objects here may share a
//!   cell — the model workload's bots stand on the very same waypoint while they wait.
//! - Relationships of class `c`: `N · m_c · Σ_i P(i) q_c(i)` with `m_c = N − 1` for the
//!   players (an observer does not relate to itself) and `n_c` otherwise.
//! - Updates per second: `Σ_c relationships_c · s_c · tick_hz`.
//! - Client-server: a client in cell `i` gets, every tick, one burst with `own` bytes
//!   about itself and `Σ_c m_c q_c(i) s_c u_c` bytes of updates; with `own > 0` the
//!   burst is never empty, so its wire size is `b + h · max(1, ⌈b / (MTU − h)⌉)`;
//!   averaged over `P`. The server sends `N` such bursts.
//! - worldmesh: players are spread over `M = ⌈N / P_node⌉` nodes as in
//!   [`crate::predict`]; each node holds a replica of a remote object when the
//!   **replication interest** of one of its players covers it (the AoI expanded by the
//!   discovery margin the nodes subscribe with), `r(j) = Σ_i P(i) V(i,j) A_rep(i,j)`,
//!   `H_c(k) = Σ_j P_c(j) (1 − (1 − r(j))^k)` for a node with `k` players. A node with
//!   `k_s` players holds `k_s` players and `n_c / M` objects of every other class; it
//!   sends a node with `k_m` players `Σ_c o_c H_c(k_m) s_c` update items per tick, in one
//!   burst of `u_peer`-byte items, active with probability `1 − Π_c (1 − H_c s_c)^{o_c}`.
//! - **Send densities.** Where an object is and whether it has something to send are
//!   not independent: the model workload's players wait (and send nothing) at popular
//!   waypoints, where many observers are. A class may give the density of its objects
//!   *when they send* ([`ObjectClass::send_density`]); updates, bytes and update items
//!   use it in place of `P_c` (relationships and replica pairs keep `P_c`).
//! - **Lingering replicas.** A node keeps a replica `linger` seconds after its players'
//!   interest ends, and is sent its updates meanwhile. With interest pairs ending at
//!   `τ_c` per pair per second (Little's law), replica pairs and update items grow by
//!   the factor `1 + τ_c · linger`.
//! - **Fetches.** Replicas of existing objects begin at `β_c` per pair per second
//!   ([`ObjectClass::pair_birth_hz`]; by default `τ_c`: as many begin as end). With
//!   [`MixedCost::fetch_datagrams`] each costs a request datagram to the primary's node
//!   and an answer datagram with one item back, outside the frame bursts.
//!
//! What it leaves out (and a measurement will show): full states sent when an object
//! enters a view (a new relationship costs a full state instead of a delta), the delay
//! before a new replica exists (discovery), acknowledgements and keep-alives, and the
//! correlation between players (fights, groups) beyond what the densities capture.

use crate::aoi::AoiRule;
use crate::density::DensityMap;
use crate::error::LoadModelError;
use crate::packet::PacketModel;
use crate::visibility::VisibilityMap;

/// One class of objects (module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct ObjectClass {
    /// Name for reports (`player`, `missile`, `item`).
    pub name: String,
    /// Where objects of the class are.
    pub density: DensityMap,
    /// Mean live objects of the class; `None` for the players themselves (`N`).
    pub count: Option<f64>,
    /// Share of ticks in which one object has a change to send (0–1).
    pub send_share: f64,
    /// Where objects of the class are when they have a change to send, if that differs
    /// from [`ObjectClass::density`] (e.g. players waiting at a popular waypoint send
    /// nothing, moving ones send every tick); `None`: the same density.
    pub send_density: Option<DensityMap>,
    /// Bytes of one update item to a client (state or delta data plus item header).
    pub update_bytes: f64,
    /// worldmesh: interest pairs (remote node, object of the class) that end while the
    /// object lives, per pair per second (the inverse of a pair's mean lifetime; pairs
    /// that end because the object is deleted do not count). 0: ignore.
    pub pair_turnover_hz: f64,
    /// worldmesh: interest pairs that begin (each a replica to fetch), per pair per
    /// second; `None`: as many as end ([`ObjectClass::pair_turnover_hz`], the steady
    /// state of a class whose objects are neither created nor deleted).
    pub pair_birth_hz: Option<f64>,
}

/// Costs of a mixed workload.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct MixedCost {
    /// Ticks (frames) per second: every client gets one burst per tick.
    pub tick_hz: f64,
    /// Packets to clients.
    pub client_packet: PacketModel,
    /// Bytes per tick a client always receives about itself (0: none).
    pub own_bytes: f64,
    /// Packets between worldmesh nodes.
    pub peer_packet: PacketModel,
    /// Bytes of one update item between nodes.
    pub peer_item_bytes: f64,
    /// Players per worldmesh node.
    pub players_per_node: usize,
    /// worldmesh: how long a node keeps (and is sent updates for) a replica after its
    /// players' interest in it ends, seconds.
    pub replica_linger_s: f64,
    /// worldmesh: a new replica is fetched between frames — the holder sends a request
    /// datagram (`peer_packet.overhead` bytes) and the primary's node answers at once
    /// with the object's state in a datagram of its own (one `peer_item_bytes` item).
    /// New replicas per second: `τ_c` × interest pairs (steady state: as many begin as
    /// end). `false`: new replicas ride on the frame's datagrams.
    pub fetch_datagrams: bool,
}

impl MixedCost {
    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), LoadModelError> {
        let ok = |v: f64, lo: f64, hi: f64| v.is_finite() && v >= lo && v <= hi;
        if !(ok(self.tick_hz, 1e-9, 1000.0)
            && ok(self.own_bytes, 0.0, 1e6)
            && ok(self.peer_item_bytes, 0.0, 1e6)
            && ok(self.replica_linger_s, 0.0, 3600.0)
            && self.players_per_node > 0)
        {
            return Err(LoadModelError::spec(
                format!("{self:?}"),
                "needs tick_hz in (0, 1000], byte sizes in [0, 1e6], linger in [0, 3600] s and \
                 players_per_node ≥ 1",
            ));
        }
        Ok(())
    }
}

/// Expected load of one class.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ClassLoad {
    /// The class.
    pub name: String,
    /// Expected directed relationships (observer player, object of the class).
    pub relationships: f64,
    /// Updates per second to clients.
    pub updates_per_s: f64,
}

/// Predictions for `N` players of a mixed workload.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct MixedPrediction {
    /// Players `N`.
    pub players: usize,
    /// Per class, in the order given.
    pub classes: Vec<ClassLoad>,
    /// Updates per second to clients, all classes.
    pub updates_per_s: f64,
    /// Client-server: mean per-client downstream, kbit/s.
    pub cs_client_down_kbps: f64,
    /// Client-server: server outbound, kbit/s.
    pub cs_server_out_kbps: f64,
    /// worldmesh: nodes.
    pub nodes: usize,
    /// worldmesh: expected (object, remote node) replica pairs.
    pub wm_replica_pairs: f64,
    /// worldmesh: mean per-node update items sent to other nodes per second.
    pub wm_node_items_per_s: f64,
    /// worldmesh: mean per-node datagrams carrying updates to other nodes per second.
    pub wm_node_datagrams_per_s: f64,
    /// worldmesh: mean per-node outbound to other nodes, kbit/s: datagrams carrying
    /// updates (frame bursts and fetch answers).
    pub wm_node_peer_out_kbps: f64,
    /// worldmesh: [`MixedPrediction::wm_node_peer_out_kbps`] plus fetch requests: the
    /// replica protocol's traffic between nodes, except acknowledgement-only datagrams
    /// and keep-alives (not modelled), kbit/s.
    pub wm_node_replication_out_kbps: f64,
}

/// `q(i) = Σ_j P(j) V(i,j) A(i,j)` over all cells `j`, `i`'s own cell included.
pub fn coverage(density: &DensityMap, vis: &VisibilityMap, aoi: AoiRule) -> Vec<f64> {
    let g = density.grid;
    let p = &density.p;
    let n = g.len().min(vis.len());
    let mut q = vec![0.0; g.len()];
    for i in 0..n {
        if vis.is_free(i) {
            q[i] += p[i];
        }
        let (xi, yi) = g.center(i);
        for j in vis.row(i) {
            let (xj, yj) = g.center(j);
            if aoi.contains(xj - xi, yj - yi) {
                q[i] += p[j];
                q[j] += p[i];
            }
        }
    }
    q
}

/// Predicts `n` players of a mixed workload. `classes` must hold exactly one class with
/// `count: None` (the players: their density is the observers' density); `aoi` is the
/// players' area of interest, `replication` the region worldmesh nodes replicate for a
/// player (the AoI expanded by the discovery margin). Every density must be on `vis`'s
/// grid, and `vis` must reach the larger of the two ranges.
pub fn predict_mixed(
    n: usize,
    classes: &[ObjectClass],
    vis: &VisibilityMap,
    aoi: AoiRule,
    replication: AoiRule,
    cost: &MixedCost,
) -> Result<MixedPrediction, LoadModelError> {
    cost.validate()?;
    let players: Vec<&ObjectClass> = classes.iter().filter(|c| c.count.is_none()).collect();
    let [player] = players[..] else {
        return Err(LoadModelError::spec(
            "object classes",
            "need exactly one player class (count: None)",
        ));
    };
    for c in classes {
        if c.density.grid.len() != vis.len()
            || c.send_density.as_ref().is_some_and(|d| d.grid.len() != vis.len())
        {
            return Err(LoadModelError::spec(
                format!("class {}", c.name),
                "density and visibility maps are on different grids",
            ));
        }
        let ok = (0.0..=1.0).contains(&c.send_share)
            && c.update_bytes.is_finite()
            && c.update_bytes >= 0.0
            && c.pair_turnover_hz.is_finite()
            && c.pair_turnover_hz >= 0.0
            && c.pair_birth_hz.is_none_or(|b| b.is_finite() && b >= 0.0)
            && c.count.is_none_or(|k| k.is_finite() && k >= 0.0);
        if !ok {
            return Err(LoadModelError::spec(
                format!("class {}", c.name),
                "needs send_share in [0, 1], update_bytes ≥ 0, pair_turnover_hz ≥ 0 and a finite \
                 count ≥ 0",
            ));
        }
    }
    let reach = |r: AoiRule| match (r.max_range(), vis.max_range()) {
        (_, None) => true,
        (Some(a), Some(v)) => a <= v + 1e-9,
        (None, Some(_)) => false,
    };
    if !reach(aoi) || !reach(replication) {
        return Err(LoadModelError::spec(
            "visibility map",
            "its range is shorter than the area of interest or the replication region",
        ));
    }
    let nf = n as f64;
    let obs = &player.density.p;
    // Objects of each class an observer relates to: m_c.
    let others = |c: &ObjectClass| c.count.unwrap_or((nf - 1.0).max(0.0));
    let send_density =
        |c: &'_ ObjectClass| -> DensityMap { c.send_density.clone().unwrap_or_else(|| c.density.clone()) };
    let sends: Vec<DensityMap> = classes.iter().map(send_density).collect();
    let qs: Vec<Vec<f64>> = classes.iter().map(|c| coverage(&c.density, vis, aoi)).collect();
    let q_send: Vec<Vec<f64>> = sends.iter().map(|d| coverage(d, vis, aoi)).collect();
    let mean_over_obs = |q: &[f64]| -> f64 { obs.iter().zip(q).map(|(p, q)| p * q).sum() };

    // Relationships and updates.
    let mut loads = Vec::new();
    for ((c, q), qsend) in classes.iter().zip(&qs).zip(&q_send) {
        let rel = nf * others(c) * mean_over_obs(q);
        loads.push(ClassLoad {
            name: c.name.clone(),
            relationships: rel,
            updates_per_s: nf * others(c) * mean_over_obs(qsend) * c.send_share * cost.tick_hz,
        });
    }
    let updates_per_s = loads.iter().map(|l| l.updates_per_s).sum();

    // Client-server.
    let h = cost.client_packet.overhead;
    let mut client_tick = 0.0;
    for (i, p) in obs.iter().enumerate() {
        if *p <= 0.0 {
            continue;
        }
        let b: f64 = cost.own_bytes
            + classes
                .iter()
                .zip(&q_send)
                .map(|(c, q)| others(c) * q[i] * c.send_share * c.update_bytes)
                .sum::<f64>();
        let packets = cost.client_packet.packets(b);
        let wire = if cost.own_bytes > 0.0 {
            b + h * packets.max(1.0)
        } else {
            // No own state: the burst is empty when nothing relates (Poisson estimate).
            let mean_items: f64 = classes
                .iter()
                .zip(&q_send)
                .map(|(c, q)| others(c) * q[i] * c.send_share)
                .sum();
            let active = 1.0 - (-mean_items).exp();
            if active > 0.0 {
                b + h * active * cost.client_packet.packets(b / active)
            } else {
                0.0
            }
        };
        client_tick += p * wire;
    }
    let kbps = |bytes_per_tick: f64| bytes_per_tick * cost.tick_hz * 8.0 / 1000.0;

    // worldmesh.
    let ppn = cost.players_per_node;
    let nodes = n.div_ceil(ppn);
    let m = nodes as f64;
    let groups = crate::predict::node_groups(n, ppn);
    let r = coverage(&player.density, vis, replication);
    let hold = |d: &DensityMap, k: f64| -> f64 {
        d.p.iter()
            .zip(&r)
            .map(|(p, r)| p * (1.0 - (1.0 - r.min(1.0)).powf(k)))
            .sum()
    };
    let (mut pairs, mut items, mut bytes, mut datagrams, mut requests) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for (gs, &(ks, cs)) in groups.iter().enumerate() {
        for (gm, &(km, cm)) in groups.iter().enumerate() {
            let links = if gs == gm { cs * (cm - 1.0) } else { cs * cm };
            if links <= 0.0 {
                continue;
            }
            let (mut link_pairs, mut link_items, mut idle, mut births) = (0.0, 0.0, 1.0, 0.0);
            for (c, sd) in classes.iter().zip(&sends) {
                let owned = if c.count.is_none() {
                    ks
                } else {
                    c.count.unwrap_or(0.0) / m
                };
                // Lingering replicas: pairs ending at rate τ live `linger` longer.
                let linger = 1.0 + c.pair_turnover_hz * cost.replica_linger_s;
                let hc = hold(&c.density, km);
                let hs = hold(sd, km);
                link_pairs += owned * hc * linger;
                births += owned * hc * c.pair_birth_hz.unwrap_or(c.pair_turnover_hz) / cost.tick_hz;
                link_items += owned * hs * c.send_share * linger;
                idle *= (1.0 - (hs * linger).min(1.0) * c.send_share).powf(owned);
            }
            let active = 1.0 - idle;
            let b = link_items * cost.peer_item_bytes;
            let packets = if active > 0.0 && b > 0.0 {
                active * cost.peer_packet.packets(b / active)
            } else {
                0.0
            };
            let mut wire = b + cost.peer_packet.overhead * packets;
            let (mut link_items, mut packets) = (link_items, packets);
            if cost.fetch_datagrams {
                // Per tick: `births` answers of one item each, and as many requests.
                link_items += births;
                packets += births;
                wire += births * (cost.peer_packet.overhead + cost.peer_item_bytes);
                requests += links * births * cost.peer_packet.overhead;
            }
            pairs += links * link_pairs;
            items += links * link_items;
            bytes += links * wire;
            datagrams += links * packets;
        }
    }
    let per_node = |x: f64| if nodes > 0 { x / m } else { 0.0 };
    Ok(MixedPrediction {
        players: n,
        classes: loads,
        updates_per_s,
        cs_client_down_kbps: kbps(client_tick),
        cs_server_out_kbps: kbps(nf * client_tick),
        nodes,
        wm_replica_pairs: pairs,
        wm_node_items_per_s: per_node(items) * cost.tick_hz,
        wm_node_datagrams_per_s: per_node(datagrams) * cost.tick_hz,
        wm_node_peer_out_kbps: kbps(per_node(bytes)),
        wm_node_replication_out_kbps: kbps(per_node(bytes + requests)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grid::Grid;
    use crate::map::Map;

    fn strip(n: usize) -> (Grid, VisibilityMap) {
        let map = Map::empty(10.0 * n as f64, 10.0).unwrap();
        let g = Grid::for_map(&map, 10.0).unwrap();
        let v = VisibilityMap::build(&map, &g, None, 1).unwrap();
        (g, v)
    }

    fn class(g: Grid, name: &str, w: &[f64], count: Option<f64>, share: f64, bytes: f64) -> ObjectClass {
        ObjectClass {
            name: name.into(),
            density: DensityMap::from_weights(g, w.to_vec(), 0).unwrap(),
            count,
            send_share: share,
            send_density: None,
            update_bytes: bytes,
            pair_turnover_hz: 0.0,
            pair_birth_hz: None,
        }
    }

    fn cost() -> MixedCost {
        MixedCost {
            tick_hz: 10.0,
            client_packet: PacketModel::PAPER,
            own_bytes: 10.0,
            peer_packet: PacketModel::PAPER,
            peer_item_bytes: 20.0,
            players_per_node: 2,
            replica_linger_s: 0.0,
            fetch_datagrams: false,
        }
    }

    #[test]
    fn by_hand_on_three_cells() {
        // Cells 0 1 2, 10 apart; AoI radius 10 (neighbours and own cell).
        // Players: all in cell 0 and 1, half each. Missiles: all in cell 2, 1 live.
        let (g, v) = strip(3);
        let aoi = AoiRule::Radius(10.0);
        let classes = [
            class(g, "player", &[1.0, 1.0, 0.0], None, 0.5, 20.0),
            class(g, "missile", &[0.0, 0.0, 1.0], Some(1.0), 1.0, 30.0),
        ];
        // q_player = [1, 1, ½]; q_missile = [0, 1, 1]; observers ½ in 0, ½ in 1.
        let p = predict_mixed(4, &classes, &v, aoi, aoi, &cost()).unwrap();
        // Player relationships: 4 · 3 · (½·1 + ½·1) = 12; missiles: 4 · 1 · ½ = 2.
        assert!((p.classes[0].relationships - 12.0).abs() < 1e-12);
        assert!((p.classes[1].relationships - 2.0).abs() < 1e-12);
        // Updates: 12 · ½ · 10 + 2 · 1 · 10 = 80 per second.
        assert!((p.updates_per_s - 80.0).abs() < 1e-12);
        // Client in cell 0: 10 + 3·1·½·20 = 40 B + 40 header; cell 1: 40 + 1·30 = 70 + 40.
        let tick = 0.5 * 80.0 + 0.5 * 110.0;
        assert!((p.cs_client_down_kbps - tick * 0.08).abs() < 1e-9);
        assert!((p.cs_server_out_kbps - 4.0 * tick * 0.08).abs() < 1e-9);
        // Two nodes of two players: r = q_player-coverage of players = [1, 1, ½];
        // H_player(2) = 1; H_missile(2) = 1 − (½)² = ¾. Per link: 2 players, ½ missile.
        // Pairs per link: 2 + ½·¾ = 2.375; two links.
        assert!((p.wm_replica_pairs - 4.75).abs() < 1e-12);
        // Items per link per tick: 2·½ + ⅜ = 1.375; idle = (½)² · (¼)^½ = ⅛.
        let b: f64 = 1.375 * 20.0;
        let wire = b + 40.0 * 0.875;
        assert!((p.wm_node_peer_out_kbps - wire * 0.08).abs() < 1e-9);
        assert!((p.wm_node_items_per_s - 13.75).abs() < 1e-12);
        assert!((p.wm_node_datagrams_per_s - 8.75).abs() < 1e-12);
    }

    #[test]
    fn send_densities_and_lingering_replicas() {
        // Same three cells; players half in cell 0 and half in cell 1, but only those in
        // cell 1 send (share ½ overall). AoI radius 10 around cell 0 covers 0 and 1, so
        // the send density matters only for observers in cell 2 — put the observers
        // (players) in cells 0 and 2 instead: cell 2 sees cell 1, not cell 0.
        let (g, v) = strip(3);
        let aoi = AoiRule::Radius(10.0);
        let mut players = class(g, "player", &[1.0, 0.0, 1.0], None, 0.5, 20.0);
        // Without a send density: updates = N(N−1)·Σ P q · s · 10; q = [½, 1, ½]
        // (cell 0 sees 0 and 1; cell 2 sees 1 and 2): Σ P q = ½, so 4·3·½·½·10 = 30.
        let p = predict_mixed(4, std::slice::from_ref(&players), &v, aoi, aoi, &cost()).unwrap();
        assert!((p.updates_per_s - 30.0).abs() < 1e-12);
        // Senders all in cell 2: observers in 0 (q_send = 0) and 2 (q_send = 1): the
        // same mean, ½ → 30.
        players.send_density = Some(DensityMap::from_weights(g, vec![0.0, 0.0, 1.0], 0).unwrap());
        let p = predict_mixed(4, std::slice::from_ref(&players), &v, aoi, aoi, &cost()).unwrap();
        assert!((p.updates_per_s - 30.0).abs() < 1e-12);
        // Senders in cell 1, seen from both 0 and 2: q_send = 1 everywhere → 60.
        players.send_density = Some(DensityMap::from_weights(g, vec![0.0, 1.0, 0.0], 0).unwrap());
        let p = predict_mixed(4, std::slice::from_ref(&players), &v, aoi, aoi, &cost()).unwrap();
        assert!((p.updates_per_s - 60.0).abs() < 1e-12);
        // Relationships keep the class density: 4·3·½ = 6.
        assert!((p.classes[0].relationships - 6.0).abs() < 1e-12);
        // Lingering: pairs end at 0.5 per pair per second, linger 1 s → pairs × 1.5.
        let base = predict_mixed(4, std::slice::from_ref(&players), &v, aoi, aoi, &cost()).unwrap();
        players.pair_turnover_hz = 0.5;
        let lingering = MixedCost {
            replica_linger_s: 1.0,
            ..cost()
        };
        let p = predict_mixed(4, std::slice::from_ref(&players), &v, aoi, aoi, &lingering).unwrap();
        assert!((p.wm_replica_pairs - 1.5 * base.wm_replica_pairs).abs() < 1e-9);
        assert!(p.wm_replica_pairs > 0.0);
        assert!(p.wm_node_items_per_s > base.wm_node_items_per_s);
        // Client-side figures do not change.
        assert_eq!(p.cs_server_out_kbps, base.cs_server_out_kbps);
        // Fetches: births per link per tick = 2 players · H · τ / 10; each adds one item,
        // one datagram of 40 + 20 bytes, and a 40-byte request the other way.
        let fetching = MixedCost {
            fetch_datagrams: true,
            ..lingering
        };
        let f = predict_mixed(4, std::slice::from_ref(&players), &v, aoi, aoi, &fetching).unwrap();
        let births_per_s = base.wm_replica_pairs / 2.0 * 0.5; // per node: pairs per node × τ
        assert!((f.wm_node_items_per_s - p.wm_node_items_per_s - births_per_s).abs() < 1e-9);
        assert!((f.wm_node_datagrams_per_s - p.wm_node_datagrams_per_s - births_per_s).abs() < 1e-9);
        let kbps = |bytes_per_s: f64| bytes_per_s * 8.0 / 1000.0;
        assert!((f.wm_node_peer_out_kbps - p.wm_node_peer_out_kbps - kbps(births_per_s * 60.0)).abs() < 1e-9);
        assert!(
            (f.wm_node_replication_out_kbps - f.wm_node_peer_out_kbps - kbps(births_per_s * 40.0)).abs()
                < 1e-9
        );
        assert_eq!(p.wm_node_replication_out_kbps, p.wm_node_peer_out_kbps);
    }

    #[test]
    fn one_class_reduces_to_the_avatar_model_plus_same_cell_pairs() {
        // Two cells, half the mass each, mutually visible: q = 1 everywhere with the own
        // cell, so N(N−1) relationships (the avatar model gives N(N−1)·½: it leaves
        // same-cell pairs out).
        let (g, v) = strip(2);
        let classes = [class(g, "player", &[1.0, 1.0], None, 1.0, 32.0)];
        let p = predict_mixed(5, &classes, &v, AoiRule::Unlimited, AoiRule::Unlimited, &cost()).unwrap();
        assert!((p.classes[0].relationships - 20.0).abs() < 1e-12);
        // Static class: relationships but no updates.
        let classes = [
            class(g, "player", &[1.0, 1.0], None, 0.0, 32.0),
            class(g, "item", &[1.0, 0.0], Some(3.0), 0.0, 22.0),
        ];
        let p = predict_mixed(5, &classes, &v, AoiRule::Unlimited, AoiRule::Unlimited, &cost()).unwrap();
        assert!((p.classes[1].relationships - 15.0).abs() < 1e-12);
        assert_eq!(p.updates_per_s, 0.0);
        assert_eq!(p.wm_node_peer_out_kbps, 0.0);
        // Own state only: one 10 + 40-byte packet per tick per client.
        assert!((p.cs_client_down_kbps - 50.0 * 0.08).abs() < 1e-12);
    }

    #[test]
    fn bad_inputs_are_errors() {
        let (g, v) = strip(2);
        let ok = class(g, "player", &[1.0, 1.0], None, 1.0, 32.0);
        let none: [ObjectClass; 0] = [];
        let a = AoiRule::Unlimited;
        assert!(predict_mixed(3, &none, &v, a, a, &cost()).is_err());
        let two = [ok.clone(), ok.clone()];
        assert!(predict_mixed(3, &two, &v, a, a, &cost()).is_err());
        let bad = [ObjectClass {
            send_share: 1.5,
            ..ok.clone()
        }];
        assert!(predict_mixed(3, &bad, &v, a, a, &cost()).is_err());
        // A visibility map limited to 10 units cannot serve a radius-30 replication region.
        let map = Map::empty(20.0, 10.0).unwrap();
        let short = VisibilityMap::build(&map, &g, Some(10.0), 1).unwrap();
        let one = [ok];
        assert!(
            predict_mixed(
                3,
                &one,
                &short,
                AoiRule::Radius(10.0),
                AoiRule::Radius(30.0),
                &cost()
            )
            .is_err()
        );
        let zero_tick = MixedCost {
            tick_hz: 0.0,
            ..cost()
        };
        assert!(predict_mixed(3, &one, &v, a, a, &zero_tick).is_err());
    }
}
