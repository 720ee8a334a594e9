//! # worldmesh-locator
//!
//! The distributed object locator of Colyseus (paper `000_…` §3 "Object location", §6),
//! as a sans-IO state machine per node, replacing the oracle locator behind the same port:
//! the node hands its per-frame [`Op`]s (publish every primary, subscribe with every
//! primary's area of interest) and gets [`Discovery`]s back.
//!
//! ## How the pieces map to the paper
//!
//! - **Overlay** ([`keyspace`], `locator::ring`): nodes form a ring, each owning the
//!   contiguous key arc `(pred, pos]`. The initial ring is laid out evenly in id order from
//!   the static member list; join (split a contact's range at the median key of its stored
//!   items), graceful leave (hand-off to the successor) and failure (missed pings;
//!   the successor re-covers the range) follow Chord-style stabilisation through the
//!   successor's predecessor. Two keyings (§6.1): `rangedht` keys by one naming attribute
//!   ([`RangeKey`]: `x` by default, or `y`) so a range query is one contiguous arc
//!   (Mercury's attribute hub), or by the position on a Hilbert curve ([`hilbert`]) so a
//!   query is a few arcs (at most `max_sub_ranges`), each routed and spread on its own;
//!   `dht` hashes a grid of regions (as many as players by default) so a query becomes
//!   one lookup per region.
//! - **Routing** (`Locator::route`): greedy clockwise routing over successors and
//!   Symphony/Mercury small-world long links. Long links are drawn from the harmonic
//!   density `p(x) = 1/(x ln n)` on `[1/n, 1]` of the ring (Symphony, Manku et al. 2003),
//!   with `n` estimated from the arc spanned by the predecessor and successors (Mercury
//!   estimates density by sampling; with uniform initial spacing the local estimate
//!   suffices). A route cache (§6.1: "each node caches recently used routes") learns
//!   `(range, node)` from every match delivery and from route hints sent by a rendezvous
//!   reached in two or more hops; entries not confirmed within `route_cache_ttl` are
//!   ignored, so routes to failed nodes die out. Hops are recorded per routed item.
//! - **Soft-state pub/sub** (§3 "Soft state storage"): publications and subscriptions are
//!   stored with TTLs at their rendezvous ([`index::MatchIndex`], a uniform grid, not a
//!   scan); a new subscription matches stored publications at once, a new publication
//!   stored subscriptions. In `rangedht`, subscriptions go to the owner of their leftmost
//!   key and spread along successors over their key range (§3: "delivering it to the node
//!   responsible for leftmost value… forwards the query to other nodes in the range");
//!   each spreading node sends it to all its successors inside the range at once and the
//!   farthest one relays it on (our shortcut for the sequential walk). Without load
//!   balancing, a key range is first cut into pieces of about `chunk_nodes` nodes' ranges,
//!   each routed on its own, so a wide box is looked up in parallel (ours). Publications
//!   are points, or, for moving primaries, *range publications* covering the predicted
//!   path (§3: "publications (points or ranges)"; at most the publication margin long, so
//!   stored at the owner of the position: every subscription is enlarged by that margin).
//! - **Prediction and aggregation** (§6.2, [`prediction`]): the enlargement formula, the
//!   subscription cache and the aggregation filter; received matches are cached for their
//!   TTL and checked locally against the current *unpredicted* interest before they
//!   become discoveries. A jump of an area of interest (a dead player looks at its
//!   respawn point) restarts the velocity average instead of feeding it, a prediction
//!   too large to register falls back to the unpredicted box, and only subscriptions
//!   actually sent enter the subscription cache (an oversize box once entered it unsent
//!   and suppressed every subscription around it for a TTL: the lost matches of issue 4).
//! - **Rendezvous push** (ours, not in the paper; `LocatorConfig::push`): a subscription
//!   carries its unpredicted core (the node's areas of interest it was enlarged from); a
//!   match inside the core also goes to the object's primary node as a push request
//!   ([`PushRequest`], from [`Locator::poll_push`]), whose replica manager sends the state
//!   at once. Discovery of a sudden appearance (a respawn, a dead player looking at its
//!   spawn point) then takes rendezvous → primary → subscriber instead of rendezvous →
//!   subscriber → primary → subscriber. A rendezvous asks again for the same pair only
//!   after `push_quiet`; the primary serves a pair at most once per `retell`.
//! - **Load balancing** (§6.3, Table 2): load = publications and subscriptions stored per
//!   second over a 30-s window; nodes probe random members; a node below `mean/α` leaves
//!   and rejoins to split the range of a sampled node above `α·mean` (Mercury's
//!   leave-join balancing).
//! - **Harness** ([`harness`]): a deterministic multi-node driver with per-link delay,
//!   loss, crash, join and leave, and a synthetic moving-player workload ([`workload`]).
//!
//! ## Port and driving (sans-IO)
//!
//! `Locator::new(me, cfg, members, initial_ring, seed, now)`; each frame
//! `apply_ops(now, ops)` with *all* of the node's [`Op`]s of that frame (publications not
//! repeated are dropped, interest is replaced); `handle_datagram(now, from, bytes)` for
//! frames of class `LocatorRouting`, `MatchDelivery` and `OverlayMaintenance`;
//! `handle_timeout(now)` at `poll_timeout()`; drain `poll_transmit()` and
//! `poll_discovery()` after each call.
//!
//! ## Not (yet) here
//!
//! Predictive *range* publications (publications are points); multi-hub Mercury (one
//! attribute hub only); proximity routing.
#![forbid(unsafe_code)]

pub mod config;
pub mod harness;
pub mod hilbert;
pub mod index;
pub mod keyspace;
mod locator;
pub mod msg;
pub mod prediction;
pub mod scenario;
pub mod workload;

pub use config::{LocatorConfig, LocatorSettings};
pub use keyspace::{Keying, RangeKey};
pub use locator::{
    Discovery, Locator, LocatorError, LocatorStats, Op, Output, PushRequest, Rejections, RingState, Transmit,
    initial_position,
};
pub use msg::LocatorMsg;
