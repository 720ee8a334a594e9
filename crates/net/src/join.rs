//! Reaching seed members at start-up: dial every seed address, retry with exponential
//! backoff until one answers or the time is up, and stop at once on a refusal that
//! retrying cannot fix (another CA, other world settings, a stale generation).

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::hello::PeerHello;
use crate::transport::{Dialer, RefusalReason, TransportError};

/// How hard to try.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinPolicy {
    /// Wait after the first round in which no seed answered (doubles every round).
    pub first_backoff: Duration,
    /// Longest wait between rounds.
    pub max_backoff: Duration,
    /// One dial may take this long (a QUIC handshake that is not answered is abandoned).
    pub attempt_timeout: Duration,
    /// Give up after this long.
    pub timeout: Duration,
}

impl Default for JoinPolicy {
    /// 200 ms, doubling up to 3 s; 2 s per dial; at most 30 s.
    fn default() -> Self {
        Self {
            first_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(3),
            attempt_timeout: Duration::from_secs(2),
            timeout: Duration::from_secs(30),
        }
    }
}

/// Why no seed could be joined.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    /// Nobody answered at any seed address in time.
    #[error("no seed reachable after {rounds} round(s) of dials over {:.1} s: {}", elapsed.as_secs_f64(), list(.last))]
    Unreachable {
        /// Rounds of dials made.
        rounds: u32,
        /// Time spent.
        elapsed: Duration,
        /// The last failure of each seed address.
        last: Vec<(SocketAddr, String)>,
    },
    /// A seed refused us for a reason that retrying cannot fix.
    #[error("seed {addr} refused the connection ({reason}): {detail}")]
    Refused {
        /// The seed address.
        addr: SocketAddr,
        /// The class of refusal.
        reason: RefusalReason,
        /// What exactly.
        detail: String,
    },
}

fn list(v: &[(SocketAddr, String)]) -> String {
    let mut s = String::new();
    for (i, (a, e)) in v.iter().enumerate() {
        if i > 0 {
            s.push_str("; ");
        }
        let _ = write!(s, "{a} ({e})");
    }
    s
}

/// True if waiting may help: nobody answered, or the hello did not arrive in time.
fn transient(e: &TransportError) -> bool {
    match e {
        TransportError::Refused { reason, .. } => *reason == RefusalReason::HelloTimeout,
        TransportError::Unreachable { .. } | TransportError::Connect { .. } => true,
        TransportError::Bind { .. } | TransportError::Config(_) | TransportError::Unsupported(_) => false,
    }
}

/// Dials every address of `seeds` concurrently, round after round with exponential
/// backoff, until at least one answers: returns the hellos of every seed that answered in
/// that round. A permanent refusal (TLS, identity, world settings, version, generation)
/// ends the attempt at once.
pub async fn reach_seeds(
    dialer: &Dialer,
    seeds: &[SocketAddr],
    policy: &JoinPolicy,
) -> Result<Vec<PeerHello>, JoinError> {
    let start = Instant::now();
    let deadline = start + policy.timeout;
    let mut backoff = policy.first_backoff;
    let mut rounds = 0;
    let mut last: Vec<(SocketAddr, String)> = Vec::new();
    loop {
        rounds += 1;
        let mut set = JoinSet::new();
        for &addr in seeds {
            let dial = dialer.dial(addr);
            let left = deadline
                .saturating_duration_since(Instant::now())
                .min(policy.attempt_timeout)
                .max(Duration::from_millis(1));
            set.spawn(async move {
                let r = tokio::time::timeout(left, dial).await.unwrap_or_else(|_| {
                    Err(TransportError::Unreachable {
                        addr,
                        reason: "timed out".into(),
                    })
                });
                (addr, r)
            });
        }
        let mut reached = Vec::new();
        last.clear();
        while let Some(done) = set.join_next().await {
            let Ok((addr, r)) = done else { continue };
            match r {
                Ok(h) => reached.push(h),
                Err(TransportError::Refused { reason, detail, .. })
                    if reason != RefusalReason::HelloTimeout =>
                {
                    return Err(JoinError::Refused { addr, reason, detail });
                }
                Err(TransportError::Refused { detail, .. }) => {
                    last.push((addr, format!("no answer: {detail}")))
                }
                Err(TransportError::Unreachable { reason, .. }) => {
                    last.push((addr, format!("no answer: {reason}")))
                }
                Err(e) if transient(&e) => last.push((addr, e.to_string())),
                Err(e) => {
                    return Err(JoinError::Refused {
                        addr,
                        reason: RefusalReason::RefusedByPeer,
                        detail: e.to_string(),
                    });
                }
            }
        }
        if !reached.is_empty() {
            reached.sort_by_key(|h| h.hello.node);
            return Ok(reached);
        }
        last.sort();
        let now = Instant::now();
        if now + backoff >= deadline {
            return Err(JoinError::Unreachable {
                rounds,
                elapsed: now - start,
                last,
            });
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(policy.max_backoff.max(policy.first_backoff));
    }
}
