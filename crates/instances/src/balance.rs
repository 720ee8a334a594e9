//! Load balancing in the Central Area: the paper's instance-based Algorithm 1 ("Hybrid",
//! paper `003` §3.2) and Bezerra et al.'s player-based method ("Classic", §2, ref. 6) that the
//! paper compares against (§5.1).
//!
//! Both are pure functions over a snapshot of the cluster: they return a plan (what to move
//! where) and the caller applies it.

use crate::model::{ClusterConfig, ServerIdx};
use serde::{Deserialize, Serialize};

/// An instance as Algorithm 1 sees it: an opaque key, its number of players and the server
/// hosting it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostedInstance {
    /// Caller's identifier.
    pub key: u64,
    /// `AG_x.size`: players in it.
    pub size: u32,
    /// Hosting server.
    pub server: ServerIdx,
}

/// Where Algorithm 1 sends an instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Destination {
    /// `S_i.balances(S_j, AG_x)`: to another server of the Central Area.
    Server(ServerIdx),
    /// `distributes(AG_x)`: to the P2P area (Algorithm 2 then picks its servers).
    P2p,
}

/// One whole-instance move decided by Algorithm 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstanceMove {
    /// The instance's key.
    pub key: u64,
    /// Its size.
    pub size: u32,
    /// The overloaded server it leaves.
    pub from: ServerIdx,
    /// Where it goes.
    pub to: Destination,
}

/// The outcome of Algorithm 1.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HybridPlan {
    /// Moves, in the order decided.
    pub moves: Vec<InstanceMove>,
    /// Loads after applying the moves.
    pub loads_after: Vec<u32>,
}

impl HybridPlan {
    /// Players moved between servers of the Central Area.
    pub fn players_balanced(&self) -> u64 {
        self.moves
            .iter()
            .filter(|m| matches!(m.to, Destination::Server(_)))
            .map(|m| u64::from(m.size))
            .sum()
    }

    /// Players sent to the P2P area.
    pub fn players_distributed(&self) -> u64 {
        self.moves
            .iter()
            .filter(|m| m.to == Destination::P2p)
            .map(|m| u64::from(m.size))
            .sum()
    }
}

/// Per-server loads: Main Game players plus the sizes of hosted instances.
pub fn loads(cfg: &ClusterConfig, main_players: &[u32], instances: &[HostedInstance]) -> Vec<u32> {
    let mut l: Vec<u32> = (0..cfg.servers)
        .map(|s| main_players.get(s).copied().unwrap_or(0))
        .collect();
    for i in instances {
        if let Some(x) = l.get_mut(i.server) {
            *x = x.saturating_add(i.size);
        }
    }
    l
}

/// Algorithm 1 (paper `003` §3.2): while some server `S_i` is overloaded
/// (`load > max_S_load`), shed `extra_S_players + 10 % · max_S_load` players from it by
/// moving **whole instances** (never Main Game players, never part of an instance): each to
/// another server that stays within `max_S_load` after receiving it
/// (`S_i.balances(S_j, AG_x)`), or, when no server has room, to the P2P area
/// (`distributes(AG_x)`) if `allow_p2p`.
///
/// Choices the paper leaves open, and ours: overloaded servers are handled most-loaded
/// first; among its instances a server sheds the largest one that does not exceed the
/// players still to shed, or, if none is that small, the smallest one (least overshoot);
/// a server that was overloaded in this pass never receives (otherwise the first server to
/// shed becomes the least loaded and takes the next one's instances, defeating the 10 %
/// margin).
///
/// **Which server receives.** §3.2 only asks for "any server `S_j` able to accept"
/// players; §5.1 states the aim: fewer servers "near the stress situation" than Classic.
/// Plain "least loaded with room" levels the receivers towards the cluster's mean, and in
/// scenario A the mean is itself about 95 % of `max_S_load` once the overloaded servers
/// are down to 4,950, so levelling pushed every receiver into the stress band (measured:
/// 6.8 servers ≥ 95 % after the first round vs Classic's 6.2). Receivers are therefore
/// chosen in tiers ([`ClusterConfig::stress_load`]): first the least loaded server that
/// stays below the stress line, then the least loaded server already in the band, and only
/// then one that the instance pushes into the band. The shed amount, the whole-instance
/// rule and the `max_S_load` bound are unchanged; what changes is that the band is entered
/// by as few servers as the total load forces (measured over 10 seeds: 3.3 vs 6.2 near
/// stress; those few servers are fuller, 2.5 vs Classic's 5.2 at ≥ 99 %). The cost is
/// `O(N² + I log I)`.
pub fn hybrid_balance(
    cfg: &ClusterConfig,
    main_players: &[u32],
    instances: &[HostedInstance],
    allow_p2p: bool,
) -> HybridPlan {
    let max = cfg.max_s_load;
    let stress = cfg.stress_load();
    let mut load = loads(cfg, main_players, instances);
    // Instances per server, sorted by size ascending (index into `instances`).
    let mut hosted: Vec<Vec<usize>> = vec![Vec::new(); cfg.servers];
    for (idx, inst) in instances.iter().enumerate() {
        if inst.server < cfg.servers {
            hosted[inst.server].push(idx);
        }
    }
    for h in &mut hosted {
        h.sort_by_key(|&i| (instances[i].size, instances[i].key));
    }
    let mut order: Vec<ServerIdx> = (0..cfg.servers).filter(|&s| load[s] > max).collect();
    order.sort_by_key(|&s| (std::cmp::Reverse(load[s]), s));
    let mut overloaded = vec![false; cfg.servers];
    for &s in &order {
        overloaded[s] = true;
    }
    let mut moves = Vec::new();
    for s in order {
        if load[s] <= max {
            continue;
        }
        // extra_S_players + 10 % · max_S_load
        let mut to_shed = i64::from(load[s] - max) + i64::from(cfg.margin());
        while to_shed > 0 && !hosted[s].is_empty() {
            let list = &hosted[s];
            // largest instance with size ≤ to_shed, else the smallest one
            let pos = list
                .iter()
                .rposition(|&i| i64::from(instances[i].size) <= to_shed)
                .unwrap_or(0);
            let idx = hosted[s].remove(pos);
            let inst = instances[idx];
            let receiver = pick_receiver(&load, &overloaded, inst.size, max, stress);
            let to = match receiver {
                Some(j) => {
                    load[j] += inst.size;
                    Destination::Server(j)
                }
                None if allow_p2p => Destination::P2p,
                None => continue, // cannot move it anywhere: it stays
            };
            load[s] -= inst.size;
            to_shed -= i64::from(inst.size);
            moves.push(InstanceMove {
                key: inst.key,
                size: inst.size,
                from: s,
                to,
            });
        }
    }
    HybridPlan {
        moves,
        loads_after: load,
    }
}

/// The receiver `S_j` of an instance of `size` players (see [`hybrid_balance`]): a server
/// that was not overloaded in this pass and stays within `max` after receiving it, chosen
/// in three tiers so that as few servers as possible end near stress (`load ≥ stress`):
///
/// 1. servers that stay *below* `stress` after receiving it, the least loaded first;
/// 2. servers already near stress, the least loaded first (they are counted already;
///    least loaded keeps them as far from `max` as possible);
/// 3. servers this instance pushes across the line, the least loaded first.
///
/// Ties go to the lowest index. Every server with room is in some tier, so the choice
/// never refuses an instance that plain "least loaded with room" would place. Least loaded
/// rather than best fit below the line keeps headroom on every receiver: best fit gave the
/// same first round in scenario A but 3.64 servers near stress over the dynamic phase
/// instead of 2.51 (10 seeds, `instances-balance`).
fn pick_receiver(load: &[u32], overloaded: &[bool], size: u32, max: u32, stress: u32) -> Option<ServerIdx> {
    let fits = |j: &ServerIdx| !overloaded[*j] && load[*j].saturating_add(size) <= max;
    let tier = |j: ServerIdx| {
        if load[j].saturating_add(size) < stress {
            0u8
        } else if load[j] >= stress {
            1
        } else {
            2
        }
    };
    (0..load.len())
        .filter(fits)
        .min_by_key(|&j| (tier(j), load[j], j))
}

/// One transfer of individual players decided by the Classic method.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlayerTransfer {
    /// Overloaded server.
    pub from: ServerIdx,
    /// Receiving server.
    pub to: ServerIdx,
    /// Players moved.
    pub count: u32,
}

/// The outcome of the Classic method.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClassicPlan {
    /// Transfers of individual players.
    pub transfers: Vec<PlayerTransfer>,
    /// Loads after applying them.
    pub loads_after: Vec<u32>,
}

impl ClassicPlan {
    /// Players moved.
    pub fn players_moved(&self) -> u64 {
        self.transfers.iter().map(|t| u64::from(t.count)).sum()
    }
}

/// Bezerra et al.'s player-based balancing as paper `003` §2 describes it ("Classic"): an
/// overloaded server picks the least-loaded of its neighbours; a server already involved in
/// another balancing group refuses; if the group cannot absorb the `extra_S_players`
/// (`load − max_S_load`), the least-loaded neighbour of the group's servers is added, and so
/// on until the extra load fits. The extra players are then handed out one by one to the
/// least-loaded member of the group (water filling), each receiver staying within
/// `max_S_load`. Individual players move, so the overloaded server ends exactly at
/// `max_S_load` ("near stress", §5.1). Players it cannot place stay.
///
/// `neighbors(s)` gives the servers adjacent to `s` (region adjacency of the map).
pub fn classic_balance(
    cfg: &ClusterConfig,
    loads: &[u32],
    neighbors: impl Fn(ServerIdx) -> Vec<ServerIdx>,
) -> ClassicPlan {
    let max = cfg.max_s_load;
    let mut load: Vec<u32> = (0..cfg.servers)
        .map(|s| loads.get(s).copied().unwrap_or(0))
        .collect();
    let mut involved = vec![false; cfg.servers];
    let mut order: Vec<ServerIdx> = (0..cfg.servers).filter(|&s| load[s] > max).collect();
    order.sort_by_key(|&s| (std::cmp::Reverse(load[s]), s));
    for &s in &order {
        involved[s] = true;
    }
    let mut transfers = Vec::new();
    for s in order {
        let extra = load[s].saturating_sub(max);
        if extra == 0 {
            continue;
        }
        let mut group: Vec<ServerIdx> = Vec::new();
        let mut room: u64 = 0;
        loop {
            // candidates: neighbours of s and of the group members, not yet involved
            let mut cands: Vec<ServerIdx> = neighbors(s);
            for &g in &group {
                cands.extend(neighbors(g));
            }
            let pick = cands
                .into_iter()
                .filter(|&c| c < cfg.servers && !involved[c])
                .min_by_key(|&c| (load[c], c));
            let Some(c) = pick else { break };
            involved[c] = true;
            group.push(c);
            room += u64::from(max.saturating_sub(load[c]));
            if room >= u64::from(extra) {
                break;
            }
        }
        // water filling
        let mut given = vec![0u32; group.len()];
        let mut left = extra;
        while left > 0 {
            let Some(k) = (0..group.len())
                .filter(|&k| load[group[k]] < max)
                .min_by_key(|&k| (load[group[k]], group[k]))
            else {
                break;
            };
            // raise the least loaded up to the next-least loaded (or max) in one step
            let next = (0..group.len())
                .filter(|&o| o != k && load[group[o]] > load[group[k]])
                .map(|o| load[group[o]])
                .min()
                .unwrap_or(max)
                .min(max);
            let step = (next - load[group[k]]).max(1).min(left);
            load[group[k]] += step;
            given[k] += step;
            left -= step;
        }
        for (k, &g) in group.iter().enumerate() {
            if given[k] > 0 {
                transfers.push(PlayerTransfer {
                    from: s,
                    to: g,
                    count: given[k],
                });
            }
        }
        load[s] -= extra - left;
    }
    ClassicPlan {
        transfers,
        loads_after: load,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cfg(n: usize, max: u32) -> ClusterConfig {
        ClusterConfig {
            servers: n,
            max_s_load: max,
            extra_fraction: 0.1,
        }
    }

    fn check_no_split(insts: &[HostedInstance], plan: &HybridPlan, cfg: &ClusterConfig, main: &[u32]) {
        // every instance ends in exactly one place and loads add up from whole instances
        let mut keys: Vec<u64> = plan.moves.iter().map(|m| m.key).collect();
        keys.sort_unstable();
        let n = keys.len();
        keys.dedup();
        assert_eq!(n, keys.len(), "an instance moved twice");
        let placed: Vec<HostedInstance> = insts
            .iter()
            .filter_map(|i| match plan.moves.iter().find(|m| m.key == i.key) {
                None => Some(*i),
                Some(m) => match m.to {
                    Destination::Server(j) => Some(HostedInstance { server: j, ..*i }),
                    Destination::P2p => None,
                },
            })
            .collect();
        assert_eq!(loads(cfg, main, &placed), plan.loads_after);
        for m in &plan.moves {
            let orig = insts.iter().find(|i| i.key == m.key).unwrap();
            assert_eq!((orig.size, orig.server), (m.size, m.from));
        }
    }

    #[test]
    fn sheds_extra_plus_ten_percent_to_a_server_with_room() {
        let c = cfg(3, 100);
        let main = [10, 10, 10];
        // server 0: 10 + 10×10 = 110 → extra 10 + margin 10 = 20 → two instances of 10
        let insts: Vec<HostedInstance> = (0..10)
            .map(|k| HostedInstance {
                key: k,
                size: 10,
                server: 0,
            })
            .collect();
        let plan = hybrid_balance(&c, &main, &insts, true);
        assert_eq!(plan.players_balanced(), 20);
        assert_eq!(plan.players_distributed(), 0);
        assert_eq!(plan.loads_after, vec![90, 20, 20]);
        check_no_split(&insts, &plan, &c, &main);
    }

    #[test]
    fn receivers_stay_below_the_stress_line_while_they_can() {
        let c = cfg(3, 100);
        assert_eq!(c.stress_load(), 95);
        // Once the total forces a server into the band, it takes what else must move
        // instead of a second one crossing: server 0 (90 + 8 × 5 = 130) sheds 40; server 2
        // (60) takes six instances up to 90, then the seventh pushes it to 95 and it takes
        // the eighth (100). Least loaded with room would have ended at 90 / 97 / 95: two
        // servers near stress instead of one.
        let insts: Vec<HostedInstance> = (0..8)
            .map(|k| HostedInstance {
                key: k,
                size: 5,
                server: 0,
            })
            .collect();
        let main = [90, 92, 60];
        let plan = hybrid_balance(&c, &main, &insts, false);
        check_no_split(&insts, &plan, &c, &main);
        assert_eq!(plan.loads_after, vec![90, 92, 100]);
    }

    #[test]
    fn overflows_to_p2p_only_without_room() {
        let c = cfg(2, 100);
        let main = [60, 95];
        let insts = vec![
            HostedInstance {
                key: 1,
                size: 40,
                server: 0,
            },
            HostedInstance {
                key: 2,
                size: 5,
                server: 0,
            },
            HostedInstance {
                key: 3,
                size: 5,
                server: 0,
            },
        ];
        // server 0: 110; shed 10+10 = 20: 5 fits into server 1 (95 → 100), the next 5 no
        // longer fits → P2P; 40 never needed.
        let plan = hybrid_balance(&c, &main, &insts, true);
        assert_eq!(plan.players_balanced(), 5);
        assert_eq!(plan.players_distributed(), 45);
        assert!(plan.loads_after.iter().all(|&l| l <= 100));
        check_no_split(&insts, &plan, &c, &main);
        let stuck = hybrid_balance(&c, &main, &insts, false);
        assert_eq!(stuck.players_distributed(), 0);
        assert_eq!(stuck.loads_after, vec![105, 100]);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        /// Algorithm 1 never splits an instance; with the P2P area, no server stays above
        /// max unless only Main Game players are left on it; without it, an overloaded
        /// server is left only with instances that fit nowhere.
        #[test]
        fn algorithm1_invariants(
            n in 2usize..8,
            main in proptest::collection::vec(0u32..60, 8),
            raw in proptest::collection::vec((0usize..8, prop::sample::select(vec![5u32, 10, 20, 25, 40])), 0..40),
            p2p in any::<bool>(),
        ) {
            let c = cfg(n, 200);
            let insts: Vec<HostedInstance> = raw.iter().enumerate()
                .map(|(k, &(s, size))| HostedInstance { key: k as u64, size, server: s % n }).collect();
            let main = &main[..n];
            let plan = hybrid_balance(&c, main, &insts, p2p);
            check_no_split(&insts, &plan, &c, main);
            let moved: Vec<u64> = plan.moves.iter().map(|m| m.key).collect();
            let initial = loads(&c, main, &insts);
            for s in 0..n {
                if plan.loads_after[s] > c.max_s_load {
                    let left: Vec<&HostedInstance> = insts.iter().filter(|i| i.server == s && !moved.contains(&i.key)).collect();
                    if p2p {
                        prop_assert!(left.is_empty(), "server {s} overloaded with instances left");
                    } else {
                        for i in left {
                            for j in (0..n).filter(|&j| initial[j] <= c.max_s_load) {
                                prop_assert!(plan.loads_after[j] + i.size > c.max_s_load);
                            }
                        }
                    }
                }
                // receivers never pushed over max
                let before = initial[s];
                if plan.loads_after[s] > before { prop_assert!(plan.loads_after[s] <= c.max_s_load); }
            }
        }

        /// Replaying the plan move by move: a receiver crosses into the near-stress band
        /// only when no eligible server could take the instance and stay below the line
        /// or was already in the band with room; below the line, the least loaded wins.
        #[test]
        fn algorithm1_enters_the_stress_band_only_when_forced(
            n in 2usize..8,
            main in proptest::collection::vec(0u32..180, 8),
            raw in proptest::collection::vec((0usize..8, prop::sample::select(vec![5u32, 10, 20, 25, 40])), 0..40),
        ) {
            let c = cfg(n, 200);
            let (max, stress) = (c.max_s_load, c.stress_load());
            let insts: Vec<HostedInstance> = raw.iter().enumerate()
                .map(|(k, &(s, size))| HostedInstance { key: k as u64, size, server: s % n }).collect();
            let main = &main[..n];
            let plan = hybrid_balance(&c, main, &insts, false);
            let mut load = loads(&c, main, &insts);
            let overloaded: Vec<bool> = load.iter().map(|&l| l > max).collect();
            for m in &plan.moves {
                let Destination::Server(j) = m.to else { continue };
                let eligible: Vec<usize> = (0..n)
                    .filter(|&k| !overloaded[k] && load[k] + m.size <= max)
                    .collect();
                prop_assert!(eligible.contains(&j));
                let below: Vec<usize> = eligible.iter().copied().filter(|&k| load[k] + m.size < stress).collect();
                let band: Vec<usize> = eligible.iter().copied().filter(|&k| load[k] >= stress).collect();
                if load[j] + m.size < stress {
                    prop_assert!(below.iter().all(|&k| load[k] >= load[j]), "not the least loaded below the line");
                } else if load[j] < stress {
                    prop_assert!(below.is_empty() && band.is_empty(), "crossed while {below:?} / {band:?} could take it");
                } else {
                    prop_assert!(below.is_empty(), "used the band while {below:?} stayed below");
                }
                load[m.from] -= m.size;
                load[j] += m.size;
            }
            prop_assert_eq!(&load, &plan.loads_after);
        }

        /// When the cluster has room (total load leaves a 40-player slack on every server),
        /// Algorithm 1 leaves no server above max and sends nothing to the P2P area.
        #[test]
        fn algorithm1_balances_when_room(
            raw in proptest::collection::vec((0usize..5, prop::sample::select(vec![5u32, 10, 20, 25, 40])), 0..60),
        ) {
            let c = cfg(5, 300);
            let main = [20u32; 5];
            let insts: Vec<HostedInstance> = raw.iter().enumerate()
                .map(|(k, &(s, size))| HostedInstance { key: k as u64, size, server: s }).collect();
            let total: u32 = loads(&c, &main, &insts).iter().sum();
            prop_assume!(total + 5 * 40 + 5 * c.margin() <= 5 * c.max_s_load);
            let plan = hybrid_balance(&c, &main, &insts, true);
            prop_assert_eq!(plan.players_distributed(), 0);
            prop_assert!(plan.loads_after.iter().all(|&l| l <= c.max_s_load));
        }

        /// Classic moves exactly the extra players when its group can absorb them, conserves
        /// players and never pushes a receiver above max.
        #[test]
        fn classic_invariants(l in proptest::collection::vec(0u32..400, 10)) {
            let c = cfg(10, 250);
            let grid = crate::model::RegionGrid { width: 1.0, height: 1.0, cols: 5, rows: 2 };
            let plan = classic_balance(&c, &l, |s| grid.neighbors(s));
            prop_assert_eq!(plan.loads_after.iter().sum::<u32>(), l.iter().sum::<u32>());
            for (&after, &before) in plan.loads_after.iter().zip(&l) {
                if after > before { prop_assert!(after <= c.max_s_load); }
                if before > c.max_s_load { prop_assert!(after >= c.max_s_load); }
            }
            let total: u32 = l.iter().sum();
            if total <= 10 * c.max_s_load && l.iter().filter(|&&x| x > c.max_s_load).count() == 1 {
                // a single overloaded server can always grow its group over the whole grid
                prop_assert!(plan.loads_after.iter().all(|&x| x <= c.max_s_load));
            }
        }
    }

    #[test]
    fn classic_grows_the_group_through_neighbours() {
        let c = cfg(3, 100);
        // line 0 - 1 - 2; server 0 overloaded by 30, server 1 has room 10, server 2 room 50
        let nb = |s: usize| match s {
            0 => vec![1],
            1 => vec![0, 2],
            _ => vec![1],
        };
        let plan = classic_balance(&c, &[130, 90, 50], nb);
        assert_eq!(plan.players_moved(), 30);
        assert_eq!(plan.loads_after[0], 100);
        // water filling: server 2 (50) gets players until it reaches 90, then both share
        assert_eq!(plan.loads_after[1] + plan.loads_after[2], 170);
        assert!(plan.loads_after[2] >= 80);
    }
}
