//! Shortest chains on the mirror graph by label correcting (paper `002` §3.1, the `Label`
//! array of Fig. 2).
//!
//! The mirror graph has one node per mirror and an arc `u → v` of cost `MC[u][v]` whenever
//! mirror `u` holds a player (moving that player from `u` to `v` changes the total delay by
//! `MC[u][v]`, possibly negatively). Labels are compared lexicographically by
//! `(cost, moves)`: among equally cheap chains the one with fewer re-assignments wins, which
//! is the paper's rule "if the cost of connecting `P_i` to a non-full mirror is equal to
//! the minimum chain then `P_i` is assigned to `M_j`", generalised.
//!
//! Costs may be negative, so this is Bellman–Ford in its queue-based ("label correcting")
//! form. When the current assignment is optimal the graph has no negative cycle (see the
//! proof in [`crate::assigner`]), so every label settles after at most `m − 1` rounds; a
//! node queued more than `m` times proves a negative cycle and is reported as
//! [`NegativeCycle`] instead of looping.

use crate::Micros;
use crate::index::Edge;
use std::collections::VecDeque;

/// Cost marker for "unreachable".
pub(crate) const UNREACHED: Micros = Micros::MAX;
/// Marker for "no neighbour".
pub(crate) const NO_LINK: u32 = u32::MAX;

/// A mirror's label: best chain cost found, its number of moves, and the neighbouring
/// mirror it came through (`NO_LINK` at a chain end).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Label {
    pub(crate) cost: Micros,
    pub(crate) moves: u32,
    pub(crate) link: u32,
}

/// The mirror graph had a negative cycle, so the assignment was not optimal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NegativeCycle;

/// Label correcting from initial costs `init` (`UNREACHED` for "not a start") along arcs
/// given by `arc(u, v)`: the result holds, for every mirror `v`, the cheapest
/// `init[u] + Σ arc costs` over chains `u → … → v`, with `link` pointing back one step.
pub(crate) fn label_correct(
    init: &[Micros],
    arc: impl Fn(usize, usize) -> Option<Edge>,
) -> Result<Vec<Label>, NegativeCycle> {
    let m = init.len();
    let mut labels: Vec<Label> = init
        .iter()
        .map(|&cost| Label {
            cost,
            moves: 0,
            link: NO_LINK,
        })
        .collect();
    let mut queued = vec![false; m];
    let mut times = vec![0usize; m];
    let mut queue = VecDeque::with_capacity(m);
    for (u, &c) in init.iter().enumerate() {
        if c != UNREACHED {
            queue.push_back(u);
            queued[u] = true;
        }
    }
    while let Some(u) = queue.pop_front() {
        queued[u] = false;
        let lu = labels[u];
        for v in 0..m {
            if v == u {
                continue;
            }
            let Some((c, _)) = arc(u, v) else { continue };
            let cand = (lu.cost + c, lu.moves + 1);
            let lv = &mut labels[v];
            if cand < (lv.cost, lv.moves) {
                *lv = Label {
                    cost: cand.0,
                    moves: cand.1,
                    link: u as u32,
                };
                if !queued[v] {
                    times[v] += 1;
                    if times[v] > m {
                        return Err(NegativeCycle);
                    }
                    queued[v] = true;
                    queue.push_back(v);
                }
            }
        }
    }
    Ok(labels)
}

/// The mirrors of the chain ending at `end`, from its start to `end`, following `link`.
pub(crate) fn path_to(labels: &[Label], end: usize) -> Vec<usize> {
    let mut path = vec![end];
    let mut at = end;
    while labels[at].link != NO_LINK && path.len() <= labels.len() {
        at = labels[at].link as usize;
        path.push(at);
    }
    path.reverse();
    path
}

/// Dijkstra on a dense graph of `init.len()` nodes with non-negative arc costs
/// `arc(u, v) = Some((cost, moves))`, from the nodes with finite `init`, comparing labels by
/// `(cost, moves)` and settling ties by node index. Stops once `stop` is settled (labels of
/// nodes not yet settled are then upper bounds, which the callers cap anyway). `O(V²)`.
pub(crate) fn dijkstra(
    init: &[Micros],
    stop: Option<usize>,
    mut arc: impl FnMut(usize, usize) -> Option<(Micros, u32)>,
) -> Vec<Label> {
    let n = init.len();
    let mut labels: Vec<Label> = init
        .iter()
        .map(|&cost| Label {
            cost,
            moves: 0,
            link: NO_LINK,
        })
        .collect();
    let mut done = vec![false; n];
    loop {
        let mut best: Option<usize> = None;
        for v in 0..n {
            if !done[v]
                && labels[v].cost != UNREACHED
                && best.is_none_or(|b| (labels[v].cost, labels[v].moves) < (labels[b].cost, labels[b].moves))
            {
                best = Some(v);
            }
        }
        let Some(u) = best else { break };
        done[u] = true;
        if Some(u) == stop {
            break;
        }
        let lu = labels[u];
        for v in 0..n {
            if done[v] || v == u {
                continue;
            }
            let Some((c, mv)) = arc(u, v) else { continue };
            debug_assert!(
                c >= 0,
                "negative reduced cost {c} on {u} -> {v}: potentials infeasible"
            );
            let cand = (lu.cost + c, lu.moves + mv);
            if cand < (labels[v].cost, labels[v].moves) {
                labels[v] = Label {
                    cost: cand.0,
                    moves: cand.1,
                    link: u as u32,
                };
            }
        }
    }
    labels
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_negative_arc_chains_and_prefers_fewer_moves() {
        // 0 → 1 costs -2, 1 → 2 costs -5, 0 → 2 costs -7: both chains cost -7; the direct
        // one has fewer moves.
        let arcs = |u: usize, v: usize| match (u, v) {
            (0, 1) => Some((-2, 0)),
            (1, 2) => Some((-5, 1)),
            (0, 2) => Some((-7, 2)),
            _ => None,
        };
        let l = label_correct(&[0, UNREACHED, UNREACHED], arcs).expect("no cycle");
        assert_eq!((l[2].cost, l[2].moves), (-7, 1));
        assert_eq!(path_to(&l, 2), vec![0, 2]);
        assert_eq!(path_to(&l, 1), vec![0, 1]);
    }

    #[test]
    fn reports_negative_cycles() {
        let arcs = |u: usize, v: usize| match (u, v) {
            (0, 1) => Some((-2, 0)),
            (1, 0) => Some((1, 1)),
            _ => None,
        };
        assert_eq!(label_correct(&[0, UNREACHED], arcs), Err(NegativeCycle));
    }
}
