//! Inbound messages: decoding, validation (bad input is counted, never a panic) and
//! dispatch.

use std::time::Duration;

use worldmesh_core::wire::MAX_PAYLOAD;
use worldmesh_core::{Frame, NodeId, Time};

use super::{BATCH, Locator, MAX_HELLO_PEERS, MAX_REGIONS, RingState};
use crate::keyspace::{Keying, in_arc, reaches};
use crate::msg::{Handoff, Hello, LocatorMsg, Payload, Peer, PubItem, Routed, SubItem};

impl Locator {
    /// Handles a datagram from `from`: checks the frame header, decodes, validates and
    /// dispatches. Anything malformed or not allowed is dropped and counted in
    /// [`crate::LocatorStats::rejected`].
    pub fn handle_datagram(&mut self, now: Time, from: NodeId, datagram: &[u8]) {
        let frame = match Frame::parse(datagram, MAX_PAYLOAD) {
            Ok(f) => f,
            Err(_) => {
                self.stats.rejected.malformed += 1;
                return;
            }
        };
        self.stats.traffic.on_receive(frame.class, datagram.len());
        let msg: LocatorMsg = match self.codec.decode(&frame) {
            Ok(m) => m,
            Err(_) => {
                self.stats.rejected.malformed += 1;
                return;
            }
        };
        if msg.class() != frame.class {
            self.stats.rejected.malformed += 1;
            return;
        }
        self.handle_message(now, from, msg);
    }

    fn ttl_ok(&mut self, ttl_ms: u32) -> bool {
        let ok = ttl_ms > 0 && u128::from(ttl_ms) <= self.cfg.max_ttl.as_millis();
        if !ok {
            self.stats.rejected.bad_ttl += 1;
        }
        ok
    }

    fn sub_ok(&mut self, s: &SubItem) -> bool {
        if !s.bbox.is_valid() || !s.core.is_valid() || !crate::prediction::box_contains(&s.bbox, &s.core) {
            self.stats.rejected.bad_geometry += 1;
            return false;
        }
        let ext = self.cfg.max_sub_extent;
        if s.bbox.max.x - s.bbox.min.x > ext || s.bbox.max.y - s.bbox.min.y > ext {
            self.stats.rejected.oversize += 1;
            return false;
        }
        if !self.ttl_ok(s.ttl_ms) {
            return false;
        }
        // The claimed key range must be one of those the box maps to (recomputed).
        let ok = match self.keyer.keying() {
            Keying::RangeDht => self
                .keyer
                .ranges(&s.bbox, MAX_REGIONS)
                .is_some_and(|rs| rs.contains(&(s.lo, s.hi))),
            Keying::Dht => {
                s.lo == s.hi
                    && self
                        .keyer
                        .regions_of(&s.bbox, MAX_REGIONS)
                        .is_some_and(|rs| rs.into_iter().any(|r| self.keyer.region_key(r) == s.lo))
            }
        };
        if !ok {
            self.stats.rejected.forged_range += 1;
        }
        ok
    }

    fn pub_ok(&mut self, p: &PubItem) -> bool {
        if !p.pos.is_finite() {
            self.stats.rejected.bad_geometry += 1;
            return false;
        }
        self.ttl_ok(p.ttl_ms)
    }

    fn routed_ok(&mut self, r: &Routed) -> bool {
        if r.hops > self.cfg.max_hops {
            self.stats.rejected.hop_limit += 1;
            return false;
        }
        match &r.payload {
            Payload::Sub(s) => {
                if s.key.node != r.origin || s.lo != r.key {
                    self.stats.rejected.forged_range += 1;
                    return false;
                }
                self.sub_ok(s)
            }
            Payload::Pub(p) => {
                if !self.pub_ok(p) {
                    return false;
                }
                if p.primary != r.origin || self.keyer.point_key(p.pos) != r.key {
                    self.stats.rejected.forged_range += 1;
                    return false;
                }
                true
            }
            Payload::LinkReq => true,
        }
    }

    fn hello_ok(&mut self, h: &Hello) -> bool {
        if h.succs.len() > MAX_HELLO_PEERS {
            self.stats.rejected.oversize += 1;
            return false;
        }
        true
    }

    /// Handles a decoded message from `from` (the driver may skip the wire in tests).
    pub fn handle_message(&mut self, now: Time, from: NodeId, msg: LocatorMsg) {
        self.now = self.now.max(now);
        if from == self.me || self.members.binary_search(&from).is_err() {
            self.stats.rejected.not_member += 1;
            return;
        }
        // Liveness comes from pings and pongs only: a node that left may still send us its
        // own traffic, and must not look like a live ring member.
        if matches!(msg, LocatorMsg::Ping(_) | LocatorMsg::Pong(_))
            && let Some(t) = self.heard.get_mut(&from)
        {
            *t = (*t).max(now);
        }
        match msg {
            LocatorMsg::Route(r) => {
                if self.routed_ok(&r) {
                    if self.state != RingState::Active && r.origin != from {
                        // Someone still routes through us: tell it we are not in the ring.
                        self.send(
                            from,
                            &LocatorMsg::Leave {
                                pred: None,
                                succs: Vec::new(),
                            },
                        );
                    }
                    self.route(now, r);
                }
            }
            LocatorMsg::Spread { sub: s, relay, prev } => {
                if !self.keyer.is_range() {
                    self.stats.rejected.unexpected += 1;
                } else if self.sub_ok(&s) {
                    if self.state != RingState::Active {
                        self.stats.rejected.unexpected += 1;
                        return;
                    }
                    self.store_sub(now, s, relay);
                    self.fill_spread_gap(s, prev);
                    self.flush_matches();
                }
            }
            LocatorMsg::Matches { lo, hi, items } => {
                if items.len() > BATCH {
                    self.stats.rejected.oversize += 1;
                    return;
                }
                if lo == hi {
                    self.stats.rejected.forged_range += 1;
                } else {
                    self.learn_route(lo, hi, from);
                }
                let mut ok = Vec::with_capacity(items.len());
                for m in items {
                    if !m.pos.is_finite() {
                        self.stats.rejected.bad_geometry += 1;
                    } else if self.ttl_ok(m.ttl_ms) {
                        ok.push(m);
                    }
                }
                self.on_matches(ok);
            }
            LocatorMsg::Push { items } => {
                if items.len() > BATCH {
                    self.stats.rejected.oversize += 1;
                    return;
                }
                self.on_push(items);
            }
            LocatorMsg::RouteHint { lo, hi } => {
                if lo == hi {
                    self.stats.rejected.forged_range += 1;
                } else {
                    self.learn_route(lo, hi, from);
                }
            }
            LocatorMsg::Ping(h) => {
                if self.state != RingState::Active {
                    // Not in the ring: tell the pinger to forget us.
                    self.send(
                        from,
                        &LocatorMsg::Leave {
                            pred: None,
                            succs: Vec::new(),
                        },
                    );
                } else if self.hello_ok(&h) {
                    self.on_ping(now, from, &h);
                    let me = self.hello();
                    self.send(from, &LocatorMsg::Pong(me));
                }
            }
            LocatorMsg::Pong(h) => {
                if self.hello_ok(&h) {
                    self.on_pong(now, from, &h);
                }
            }
            LocatorMsg::LinkAck { pos } => self.on_link_ack(now, Peer { id: from, pos }),
            LocatorMsg::JoinReq => self.on_join_req(now, from),
            LocatorMsg::JoinAck { pos, pred, succs } => {
                if succs.len() > MAX_HELLO_PEERS {
                    self.stats.rejected.oversize += 1;
                } else {
                    self.on_join_ack(now, from, pos, pred, succs);
                }
            }
            LocatorMsg::Leave { pred, succs } => {
                if succs.len() > MAX_HELLO_PEERS {
                    self.stats.rejected.oversize += 1;
                } else {
                    self.on_leave(now, from, pred, succs);
                }
            }
            LocatorMsg::Handoff(h) => self.on_handoff(now, h),
            LocatorMsg::LoadProbe => {
                let milli_load = self.milli_load(now);
                let joined = self.state == RingState::Active;
                self.send(from, &LocatorMsg::LoadReport { milli_load, joined });
            }
            LocatorMsg::LoadReport { milli_load, joined } => {
                self.on_load_report(now, from, milli_load, joined)
            }
        }
    }

    fn on_handoff(&mut self, now: Time, h: Handoff) {
        if h.subs.len() > BATCH || h.pubs.len() > BATCH {
            self.stats.rejected.oversize += 1;
            return;
        }
        let Some((lo, hi)) = self.range() else {
            self.stats.rejected.unexpected += 1;
            return;
        };
        for s in h.subs {
            if !self.sub_ok(&s) {
                continue;
            }
            // Range keyings: any of the box's intervals reaches into our range.
            let mine = match self.keyer.keying() {
                Keying::RangeDht => self
                    .keyer
                    .ranges(&s.bbox, MAX_REGIONS)
                    .is_some_and(|rs| rs.iter().any(|&(a, b)| reaches(a, b, lo, hi))),
                Keying::Dht => in_arc(s.lo, lo, hi),
            };
            if !mine {
                self.stats.rejected.misplaced += 1;
                continue;
            }
            let expires = now + Duration::from_millis(u64::from(s.ttl_ms));
            if self
                .index
                .insert_sub(
                    s.key,
                    crate::index::StoredSub {
                        bbox: s.bbox,
                        expires,
                    },
                )
                .is_ok()
            {
                self.sub_info.insert(s.key, s);
            }
        }
        for p in h.pubs {
            if !self.pub_ok(&p) {
                continue;
            }
            if !in_arc(self.keyer.point_key(p.pos), lo, hi) {
                self.stats.rejected.misplaced += 1;
                continue;
            }
            let expires = now + Duration::from_millis(u64::from(p.ttl_ms));
            let sp = crate::index::StoredPub {
                primary: p.primary,
                pos: p.pos,
                path: p.path,
                expires,
            };
            if self.index.insert_pub(p.object, sp).is_ok() {
                self.pub_kind.insert(p.object, p.kind);
            }
        }
    }
}
