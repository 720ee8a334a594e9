//! Communication-cost model of paper `003` §3.3 (Tables 1 and 2, which are missing from the
//! text; we rebuild them from the prose of §3.3.1 and §3.3.2).
//!
//! Costs count player–server communications caused by balancing (not game traffic).

/// Classic (Bezerra) cost, Table 1 as §3.3.1 describes it: before balancing each moved
/// player talks to both servers (`2 · extra`); after, moved players in the same AOI as
/// players left on the old server exchange `F` messages per second with them, a fraction
/// `Interaction` of them: `2 · extra · Interaction · F` per second. We charge `after` for
/// `seconds` seconds (the paper's Figure 10 is consistent with one second).
pub fn classic_cost(extra_players: f64, interaction: f64, f: f64, seconds: f64) -> f64 {
    2.0 * extra_players + 2.0 * extra_players * interaction * f * seconds
}

/// Hybrid cost in the Central Area (Table 1): `2 · (extra + 10 % · max_S_load)` before,
/// negligible after (whole instances move, the AOI stays on one server).
pub fn hybrid_cost(extra_players: f64, margin: f64) -> f64 {
    2.0 * (extra_players + margin)
}

/// Cost of distributing to the P2P area and coming back (Table 2, §3.3.2):
/// `2 · (extra + 10 % · max_S_load)` to move out, plus `(extra + 10 % · max_S_load) ·
/// Return_RATE` when the instances end and that share of players returns to the Central
/// Area. Maintenance traffic to the cluster (one status per instance per `T`) is reported
/// separately by the simulation.
pub fn p2p_cost(extra_players: f64, margin: f64, return_rate: f64) -> f64 {
    let moved = extra_players + margin;
    2.0 * moved + moved * return_rate
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formulas_by_hand() {
        // extra 1000, Interaction 10 %, F 20: 2000 + 2·1000·0.1·20 = 6000
        assert_eq!(classic_cost(1000.0, 0.1, 20.0, 1.0), 6000.0);
        assert_eq!(classic_cost(1000.0, 0.1, 25.0, 1.0), 7000.0);
        assert_eq!(hybrid_cost(1000.0, 550.0), 3100.0);
        assert_eq!(p2p_cost(1000.0, 550.0, 1.0), 4650.0);
        assert_eq!(p2p_cost(100.0, 550.0, 0.0), 1300.0);
    }
}
