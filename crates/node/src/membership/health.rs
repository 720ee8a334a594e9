//! Local health: how far this node trusts its own failure verdicts (after the local health
//! multiplier of Lifeguard's "local health aware probe": Dadgar, Phillips and Currey, 2018).
//!
//! A node whose own datagrams stop getting through (a one-way fault of its uplink, a
//! "mute") still hears every member, yet none of its probes is answered: SWIM has it
//! suspect and then declare down members that are alive and talking to it. Its verdicts
//! race the others' verdict on it, and each member it declared down renewed once the
//! courtesy `TurnUndead` got through (`sim/tests/churn.rs`,
//! `after_a_mute_of_1_5_to_15_s_no_other_member_renews`). Lifeguard scores such evidence
//! of a node's own ill health and slows its failure detector by the score. This keeps the
//! score from what foca lets a wrapper see, and applies it where foca lets a wrapper act
//! ([`super::Membership`]):
//!
//! - **up by one** when a probe fails on a member heard since the probe's ping (talking,
//!   yet not answering: what an uplink fault looks like from inside), and when a
//!   suspicion of this node's own comes due while its suspect is still heard. Lifeguard
//!   also counts a node's refutations of suspicions of itself; here they say little of
//!   its health, since members suspect a live member whose game traffic stops (the
//!   silence detector) and it refutes as a matter of course. Counted, they slowed crash
//!   detection (`experiment adoption`, p99 at 0 % loss in a data centre 2,635 → 2,683
//!   ms) and were not needed for the mutes;
//! - **to its limit** when the others declared this node down while it ran (it renews):
//!   its datagrams were not getting through (our addition; Lifeguard has no such input);
//! - **down by one** for each answer to one of its probes (an `Ack`, direct or forwarded);
//! - a suspicion this node raised (by its probe or its silence detector) waits
//!   `suspect_to_down_after × (1 + score)` from when it began, the score read when it is
//!   raised and again when it comes due, as long as its suspect is still heard then.
//!   Lifeguard scales the probe's timeout and period instead; foca fixes those in its
//!   configuration, and what races the others' verdict is the suspicion;
//! - **at the limit** this node declares no one down by its own verdict: the members that
//!   declared it down send it little more than their periodic announcements, so that a
//!   suspect is silent says little, and a verdict reached while its datagrams are lost
//!   gets out with the first that is not. Its suspicions then wait, from when the score
//!   falls from the limit (its datagrams get through again, and with them its notice to
//!   each suspect), `suspect_to_down_after × (1 + score)`. A member that crashed
//!   meanwhile is declared by the others, whose gossip this node hears.
//!
//! A crashed member is not heard after its crash and is silent by the time its
//! suspicion comes due, so a healthy node declares crashes in the configured time. The
//! score is the node's, not its generation's: it survives a renewal.

use std::time::Duration;

use worldmesh_core::Time;

/// Lifeguard's saturation limit `S` (the paper's default, 8): the slowest suspicion is
/// `1 + S` times the configured one.
const MAX_SCORE: u32 = 8;

/// The local health score (0 = healthy).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct LocalHealth {
    score: u32,
    /// When the score last fell from its limit.
    recovered_at: Option<Time>,
}

impl LocalHealth {
    /// One of this node's probes failed on a member it still hears, or one of its
    /// suspicions came due while its suspect is still heard.
    pub(super) fn worse(&mut self) {
        self.score = (self.score + 1).min(MAX_SCORE);
    }

    /// The other members declared this node down while it ran (it renews): its datagrams
    /// were not getting through, so its own verdicts are the last to trust.
    pub(super) fn declared_down(&mut self) {
        self.score = MAX_SCORE;
    }

    /// One of this node's probes was answered, at `now`.
    pub(super) fn better(&mut self, now: Time) {
        if self.saturated() {
            self.recovered_at = Some(now);
        }
        self.score = self.score.saturating_sub(1);
    }

    /// When the score last fell from its limit (`None`: it never reached it).
    pub(super) fn recovered_at(self) -> Option<Time> {
        self.recovered_at
    }

    /// The score (0 ..= 8).
    pub(super) fn score(self) -> u32 {
        self.score
    }

    /// Whether the score is at its limit: of late, this node's probes failed on members it
    /// hears and none was answered, or the others declared it down.
    pub(super) fn saturated(self) -> bool {
        self.score == MAX_SCORE
    }

    /// `suspicion` (the configured time to declare a suspect down) at this score.
    pub(super) fn scale(self, suspicion: Duration) -> Duration {
        suspicion.saturating_mul(1 + self.score)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_score_rises_to_its_limit_falls_to_zero_and_scales_suspicion() {
        let mut h = LocalHealth::default();
        let base = Duration::from_secs(2);
        assert_eq!(h.scale(base), base);
        h.worse();
        assert_eq!(h.scale(base), Duration::from_secs(4));
        for _ in 0..20 {
            h.worse();
        }
        assert_eq!(h.score(), MAX_SCORE);
        assert_eq!(h.scale(base), Duration::from_secs(18));
        for _ in 0..7 {
            h.better(Time::ZERO);
        }
        assert_eq!(h.score(), 1);
        h.better(Time::ZERO);
        h.better(Time::ZERO);
        assert_eq!(h.score(), 0);
        assert_eq!(h.scale(base), base);
    }

    #[test]
    fn a_node_declared_down_is_at_the_limit_until_a_probe_is_answered() {
        let mut h = LocalHealth::default();
        h.better(Time::from_millis(5));
        assert_eq!(h.recovered_at(), None, "never at the limit");
        h.declared_down();
        assert!(h.saturated());
        assert_eq!(h.scale(Duration::from_secs(2)), Duration::from_secs(18));
        h.better(Time::from_millis(7_000));
        assert!(!h.saturated());
        assert_eq!(h.score(), MAX_SCORE - 1);
        assert_eq!(h.recovered_at(), Some(Time::from_millis(7_000)));
        h.better(Time::from_millis(8_000));
        assert_eq!(
            h.recovered_at(),
            Some(Time::from_millis(7_000)),
            "fell from the limit at 7 s"
        );
    }
}
