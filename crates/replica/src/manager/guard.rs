//! Bounds on what one member can make this node hold or believe, whoever authenticated it.
//!
//! Transport security (mutual TLS, `net::quic`) decides *who* a datagram is from; these
//! checks bound what even a genuine member can do with state it owns:
//!
//! - **Version jumps.** A primary takes at most one version per frame (plus one per
//!   migration). An update whose version runs ahead of the held replica by more than
//!   [`ReplicaConfig::max_version_rate`] allows for the time since the replica was last
//!   updated is refused: one bogus huge version would otherwise freeze the replica, since
//!   every genuine update after it would look stale. A new replica's version is bounded by
//!   the time since the world began (`now` counts from the world's epoch) at twice that
//!   rate: every adoption lifts an orphan's version by the rate times (the time since its
//!   confirmed state + 1 s) (`adopt::adoption_version`), and that time is at least the
//!   failure detection (≥ 2 s), so an object adopted again and again still stays under
//!   twice the rate times its age. With the plain rate, an object adopted three times in
//!   a false-failure cascade outran the bound and no new member would replicate it
//!   (`sim/tests/churn.rs`, seed 166 of the `wan` cut-off scenario).
//! - **Object creation.** New replicas from one primary node are paid from a token bucket
//!   ([`ReplicaConfig::new_replicas_per_sec`], burst [`ReplicaConfig::new_replicas_burst`])
//!   and capped in number ([`ReplicaConfig::max_replicas_per_peer`]), so a member claiming
//!   a flood of phantom objects costs bounded memory.
//!
//! Both refusals are counted (`refused_version_jump`, `refused_creation_cap`) and change
//! nothing else.

use worldmesh_core::{NodeId, Time};

use super::{GameObject, ReplicaConfig, ReplicaManager};

/// Versions any primary may be ahead by, whatever the elapsed time (clock skew between
/// nodes, a burst of migrations, frames run late and caught up).
const VERSION_SLACK: u64 = 64;

/// The highest version a replica last updated at `since` (holding `held`) accepts at `now`.
pub(super) fn version_limit(cfg: &ReplicaConfig, held: u64, since: Time, now: Time) -> u64 {
    if cfg.max_version_rate <= 0.0 {
        return u64::MAX;
    }
    let ahead = (now.saturating_since(since).as_secs_f64() * cfg.max_version_rate).min(1e15) as u64;
    held.saturating_add(ahead).saturating_add(VERSION_SLACK)
}

/// The highest version a new replica accepts at `now` (world time): twice the rate
/// since the world began, for the adoptions it may have been through.
pub(super) fn new_object_limit(cfg: &ReplicaConfig, now: Time) -> u64 {
    let doubled = ReplicaConfig {
        max_version_rate: cfg.max_version_rate * 2.0,
        ..ReplicaConfig::default()
    };
    version_limit(&doubled, 0, Time::ZERO, now)
}

impl<O: GameObject> ReplicaManager<O> {
    /// Is `version` an acceptable version for object state from a primary, given what is
    /// held (`held`: version and last update time)? Counts a refusal.
    pub(super) fn version_ok(&mut self, held: Option<(u64, Time)>, version: u64, now: Time) -> bool {
        let limit = match held {
            Some((base, since)) => version_limit(&self.cfg, base, since, now),
            None => new_object_limit(&self.cfg, now),
        };
        if version <= limit {
            return true;
        }
        self.stats.refused_version_jump += 1;
        false
    }

    /// Takes one creation token from `from`'s budget for a new replica (refill at
    /// `new_replicas_per_sec`, capped at the burst), within the per-peer replica cap.
    /// Counts a refusal.
    pub(super) fn creation_allowed(&mut self, from: NodeId, now: Time) -> bool {
        let (rate, burst, cap) = (
            self.cfg.new_replicas_per_sec,
            self.cfg.new_replicas_burst,
            self.cfg.max_replicas_per_peer,
        );
        let p = self.peer(from);
        let tokens = match p.tokens_at {
            None => burst,
            Some(t) => (p.tokens + now.saturating_since(t).as_secs_f64() * rate).min(burst),
        };
        p.tokens_at = Some(now);
        if p.held >= cap || tokens < 1.0 {
            p.tokens = tokens;
            self.stats.refused_creation_cap += 1;
            return false;
        }
        p.tokens = tokens - 1.0;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_version_limit_grows_with_time_and_is_off_at_rate_zero() {
        let cfg = ReplicaConfig {
            max_version_rate: 20.0,
            ..ReplicaConfig::default()
        };
        let t0 = Time::from_millis(1000);
        assert_eq!(version_limit(&cfg, 10, t0, t0), 10 + VERSION_SLACK);
        assert_eq!(
            version_limit(&cfg, 10, t0, t0 + Duration::from_secs(3)),
            10 + 60 + VERSION_SLACK
        );
        // Time running backwards (a reordered input) never lowers the limit below held.
        assert_eq!(version_limit(&cfg, 10, t0, Time::ZERO), 10 + VERSION_SLACK);
        let off = ReplicaConfig {
            max_version_rate: 0.0,
            ..ReplicaConfig::default()
        };
        assert_eq!(version_limit(&off, 10, t0, t0), u64::MAX);
        assert!(version_limit(&cfg, u64::MAX - 1, t0, t0 + Duration::from_secs(1 << 40)) == u64::MAX);
    }

    #[test]
    fn a_new_object_may_carry_twice_the_rate_since_the_world_began() {
        let cfg = ReplicaConfig {
            max_version_rate: 20.0,
            ..ReplicaConfig::default()
        };
        let t = Time::from_millis(10_000);
        assert_eq!(new_object_limit(&cfg, t), 400 + VERSION_SLACK);
        assert_eq!(new_object_limit(&cfg, Time::ZERO), VERSION_SLACK);
        let off = ReplicaConfig {
            max_version_rate: 0.0,
            ..ReplicaConfig::default()
        };
        assert_eq!(new_object_limit(&off, t), u64::MAX);
    }
}
