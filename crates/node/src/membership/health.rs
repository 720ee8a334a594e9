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
//! - **down by one** for each answer to one of its probes (an `Ack`, direct or forwarded);
//! - a suspicion this node's probe raised waits `suspect_to_down_after × (1 + score)`
//!   from when it began, the score read when it is raised and again when it comes due,
//!   as long as its suspect is still heard then. Lifeguard scales the probe's timeout and
//!   period instead; foca fixes those in its configuration, and what races the others'
//!   verdict is the suspicion.
//!
//! A crashed member is not heard after its crash and is silent by the time its
//! suspicion comes due, so crashes are declared in the configured time (the silence
//! detector's suspicions, raised only for members not heard, are never stretched). The
//! score is the node's, not its generation's: it survives a renewal.

use std::time::Duration;

/// Lifeguard's saturation limit `S` (the paper's default, 8): the slowest suspicion is
/// `1 + S` times the configured one.
const MAX_SCORE: u32 = 8;

/// The local health score (0 = healthy).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct LocalHealth {
    score: u32,
}

impl LocalHealth {
    /// One of this node's probes failed on a member it still hears, or one of its
    /// suspicions came due while its suspect is still heard.
    pub(super) fn worse(&mut self) {
        self.score = (self.score + 1).min(MAX_SCORE);
    }

    /// One of this node's probes was answered.
    pub(super) fn better(&mut self) {
        self.score = self.score.saturating_sub(1);
    }

    /// The score (0 ..= 8).
    pub(super) fn score(self) -> u32 {
        self.score
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
            h.better();
        }
        assert_eq!(h.score(), 1);
        h.better();
        h.better();
        assert_eq!(h.score(), 0);
        assert_eq!(h.scale(base), base);
    }
}
