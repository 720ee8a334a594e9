//! Overlay maintenance (paper `000` §6.1 Mercury ring; §6.3 load balancing): pings and
//! failure detection, Chord-style stabilisation through the successor's predecessor,
//! Symphony long links, join by range split, graceful leave with hand-off, and
//! leave-rejoin load balancing.

use std::time::Duration;

use worldmesh_core::{NodeId, Time};

use super::deadlines::retold_at;
use super::{BATCH, Locator, MAX_REGIONS, RingState, ms};
use crate::index::Item;
use crate::keyspace::{Key, Keying, cw, in_arc, split_ranges};
use crate::msg::{Handoff, Hello, LocatorMsg, Payload, Peer, PubItem, Routed, SubItem};

/// Strictly inside the arc `(lo, hi)`.
fn strictly_between(k: Key, lo: Key, hi: Key) -> bool {
    k != hi && in_arc(k, lo, hi)
}

impl Locator {
    pub(super) fn hello(&self) -> Hello {
        Hello {
            pos: self.pos,
            pred: self.pred,
            succs: self.succs.clone(),
        }
    }

    /// Keeps the successor list a clean clockwise walk: no self, no duplicate ids (the
    /// first, freshest entry wins), ordered by clockwise distance from this node, and no
    /// longer than configured. Positions change when a node leaves and re-joins elsewhere
    /// (load balancing, paper `000` §6.3); an entry updated to its new position must move
    /// to its new place, or the spreading walk (which stops at the first entry that does
    /// not advance clockwise) would skip every node after it.
    pub(super) fn tidy_succs(&mut self) {
        let me = self.me;
        let pos = self.pos;
        let mut seen: Vec<NodeId> = Vec::with_capacity(self.succs.len());
        self.succs.retain(|p| {
            if p.id == me || p.pos == pos || seen.contains(&p.id) {
                return false;
            }
            seen.push(p.id);
            true
        });
        self.succs.sort_by_key(|p| cw(pos, p.pos));
        self.succs.truncate(self.cfg.successors.max(1));
    }

    /// Drives timers: pings and failure detection, long-link refresh, load sampling and
    /// the expiry of soft state.
    pub fn handle_timeout(&mut self, now: Time) {
        self.now = self.now.max(now);
        if now >= self.next_sweep {
            self.next_sweep = now + Duration::from_millis(100);
            // What the index drops, its side tables drop too (every other removal from
            // the index removes from them as well).
            let (sub_info, pub_kind) = (&mut self.sub_info, &mut self.pub_kind);
            self.index.expire_each(now, |item| match item {
                Item::Sub(k) => {
                    sub_info.remove(&k);
                }
                Item::Pub(id) => {
                    pub_kind.remove(&id);
                }
            });
            // Inserted only beside a stored item, so equal counts mean equal key sets.
            debug_assert_eq!(
                self.sub_info.len(),
                self.index.sub_count(),
                "sub_info follows the index"
            );
            debug_assert_eq!(
                self.pub_kind.len(),
                self.index.pub_count(),
                "pub_kind follows the index"
            );
            let quiet = self.cfg.push_quiet;
            // As `retain(|_, t| now.saturating_since(*t) < quiet)`, visiting the entries due.
            self.push_asked_due
                .expire(now, &mut self.push_asked, |t| retold_at(*t, quiet));
            self.dead.retain(|_, t| *t > now);
            self.check_retold(now);
        }
        if now >= self.next_ping {
            self.next_ping = now + self.cfg.ping_interval;
            self.maintain(now);
        }
        if now >= self.next_link {
            self.next_link = now + self.cfg.link_refresh;
            if self.state == RingState::Active && !self.succs.is_empty() && self.cfg.long_links > 0 {
                if self.longs.len() >= self.cfg.long_links {
                    let i = self.rng.index(self.longs.len());
                    self.longs.remove(i);
                }
                self.request_long_link(now);
            }
        }
        if self.cfg.loadbal && now >= self.next_lb {
            self.next_lb = now + self.cfg.lb_interval;
            let others: Vec<NodeId> = self.members.iter().copied().filter(|m| *m != self.me).collect();
            if let Some(m) = self.rng.choose(&others).copied() {
                self.send(m, &LocatorMsg::LoadProbe);
            }
        }
    }

    fn request_long_link(&mut self, now: Time) {
        let n = self.n_estimate();
        let key = self.long_link_target(n);
        let r = Routed {
            origin: self.me,
            key,
            hops: 0,
            last: false,
            bounces: 0,
            payload: Payload::LinkReq,
        };
        self.route(now, r);
    }

    pub(super) fn on_link_ack(&mut self, now: Time, p: Peer) {
        if self.state != RingState::Active || self.longs.iter().any(|l| l.id == p.id) {
            return;
        }
        if self.longs.len() < self.cfg.long_links && !self.is_dead(&p, now) {
            self.longs.push(p);
            self.adopt(p.id, now);
        }
    }

    fn maintain(&mut self, now: Time) {
        match self.state {
            RingState::Active => {}
            RingState::Joining { contact, since } => {
                if now.saturating_since(since) > self.cfg.fail_timeout {
                    // The contact did not answer: ask another member.
                    let others: Vec<NodeId> = self
                        .members
                        .iter()
                        .copied()
                        .filter(|m| *m != self.me && *m != contact)
                        .collect();
                    if let Some(m) = self.rng.choose(&others).copied() {
                        self.join(now, m);
                    }
                }
                return;
            }
            RingState::Out { .. } => return,
        }
        let timeout = self.cfg.fail_timeout;
        let silent: Vec<Peer> = self
            .succs
            .first()
            .copied()
            .into_iter()
            .chain(self.pred)
            .chain(self.longs.iter().copied())
            .filter(|p| {
                self.heard
                    .get(&p.id)
                    .is_none_or(|t| now.saturating_since(*t) > timeout)
            })
            .collect();
        for p in silent {
            self.declare_failed(now, p);
        }
        let hello = self.hello();
        for id in self.neighbours() {
            self.send(id, &LocatorMsg::Ping(hello.clone()));
        }
        self.heard.retain(|_, t| now.saturating_since(*t) <= timeout * 4);
        if self.longs.len() < self.cfg.long_links && !self.succs.is_empty() {
            self.request_long_link(now);
        }
    }

    /// The membership protocol learned of member `id` (it joined, or came back under a new
    /// generation): its messages are accepted from now on.
    pub fn member_up(&mut self, id: NodeId) {
        if let Err(at) = self.members.binary_search(&id) {
            self.members.insert(at, id);
        }
    }

    /// The membership protocol declared member `id` failed or gone: the ring treats it as
    /// failed at once (as if it had missed its pings), and its messages are refused.
    pub fn member_down(&mut self, now: Time, id: NodeId) {
        self.now = self.now.max(now);
        if id == self.me {
            return;
        }
        let mut known: Vec<Peer> = Vec::new();
        for p in self
            .succs
            .iter()
            .chain(self.longs.iter())
            .chain(self.pred.iter())
            .chain(self.pred_pred.iter())
        {
            if p.id == id && !known.contains(p) {
                known.push(*p);
            }
        }
        for p in known {
            self.declare_failed(now, p);
        }
        if self.pred_pred.is_some_and(|p| p.id == id) {
            self.pred_pred = None;
        }
        if let Ok(at) = self.members.binary_search(&id) {
            self.members.remove(at);
        }
        if let RingState::Joining { contact, .. } = self.state
            && contact == id
        {
            // Ask someone else at the next upkeep.
            self.state = RingState::Joining {
                contact,
                since: Time::ZERO,
            };
        }
    }

    /// `p` missed its pings: forget it; if it was the predecessor, its range is re-covered
    /// here (this node now owns from the predecessor's predecessor).
    fn declare_failed(&mut self, now: Time, p: Peer) {
        self.stats.failures_detected += 1;
        self.dead.insert(p, now + self.cfg.fail_timeout * 2);
        self.succs.retain(|s| s.id != p.id);
        self.longs.retain(|s| s.id != p.id);
        self.cache.retain(|(_, _, s, _)| s.id != p.id);
        if self.pred.is_some_and(|q| q.id == p.id) {
            self.pred = self.pred_pred.filter(|q| q.id != self.me && q.id != p.id);
            self.pred_pred = None;
            if let Some(q) = self.pred {
                self.adopt(q.id, now);
            }
        }
        if self.succs.is_empty()
            && let Some(q) = self.pred
        {
            self.succs.push(q);
        }
        if let Some(s) = self.succs.first().copied() {
            self.adopt(s.id, now);
        }
    }

    pub(super) fn on_ping(&mut self, now: Time, from: NodeId, h: &Hello) {
        if self.state != RingState::Active {
            return;
        }
        let peer = Peer { id: from, pos: h.pos };
        if self.is_dead(&peer, now) {
            return;
        }
        // Chord "notify": a pinging node between our predecessor and us is our predecessor.
        let closer = match self.pred {
            None => !self.succs.is_empty() || self.pos != h.pos,
            Some(p) => p.id == from || strictly_between(h.pos, p.pos, self.pos),
        };
        if closer && h.pos != self.pos {
            if self.pred.is_none_or(|p| p.id != from) {
                self.pred_pred = self.pred;
            }
            self.pred = Some(peer);
            if let Some(pp) = h.pred
                && pp.id != self.me
            {
                self.pred_pred = Some(pp);
            }
            self.adopt(from, now);
            if self.succs.is_empty() {
                self.succs.push(peer);
            }
        }
        for l in self.longs.iter_mut().chain(self.succs.iter_mut()) {
            if l.id == from {
                l.pos = h.pos;
            }
        }
        // The converse notify: a node pinging from between us and our successor (it just
        // joined there, possibly after leaving elsewhere) is our new successor at once,
        // rather than after the next stabilisation round.
        let first = self.succs.first().copied();
        if first.is_none_or(|s| s.id == from || strictly_between(h.pos, self.pos, s.pos)) && h.pos != self.pos
        {
            self.succs.retain(|s| s.id != from);
            self.succs.insert(0, peer);
            self.adopt(from, now);
        }
        self.tidy_succs();
    }

    pub(super) fn on_pong(&mut self, now: Time, from: NodeId, h: &Hello) {
        if self.state != RingState::Active {
            return;
        }
        if self.pred.is_some_and(|p| p.id == from) {
            self.pred = Some(Peer { id: from, pos: h.pos });
            self.pred_pred = h.pred.filter(|p| p.id != self.me);
        }
        for l in self.longs.iter_mut() {
            if l.id == from {
                l.pos = h.pos;
            }
        }
        if self.succs.first().is_some_and(|s| s.id == from) {
            let s = Peer { id: from, pos: h.pos };
            // Stabilise: the successor's predecessor, if between us, is our successor.
            if let Some(p) = h.pred
                && p.id != self.me
                && !self.is_dead(&p, now)
                && strictly_between(p.pos, self.pos, s.pos)
            {
                self.succs.insert(0, p);
                self.tidy_succs();
                self.adopt(p.id, now);
                return;
            }
            let mut list = vec![s];
            for q in &h.succs {
                if q.id != self.me && !self.is_dead(q, now) && !list.iter().any(|e| e.id == q.id) {
                    list.push(*q);
                }
            }
            self.succs = list;
            self.tidy_succs();
        }
    }

    /// Joins the ring by asking `contact` to split its range (the contact picks the
    /// split point at the median key of its stored items).
    pub fn join(&mut self, now: Time, contact: NodeId) {
        self.now = self.now.max(now);
        if contact == self.me || self.state == RingState::Active {
            return;
        }
        self.state = RingState::Joining { contact, since: now };
        self.send(contact, &LocatorMsg::JoinReq);
    }

    fn item_keys_in(&self, lo: Key, hi: Key) -> Vec<Key> {
        // Publications generate the matching load: split at their median key; fall back
        // to subscriptions' left ends.
        let mut keys: Vec<Key> = self
            .index
            .pubs()
            .map(|(_, p)| self.keyer.point_key(p.pos))
            .filter(|k| strictly_between(*k, lo, hi))
            .collect();
        if keys.len() < 2 {
            keys = self
                .sub_info
                .values()
                .map(|s| s.lo)
                .filter(|k| strictly_between(*k, lo, hi))
                .collect();
        }
        keys.sort_by_key(|k| cw(lo, *k));
        keys
    }

    pub(super) fn on_join_req(&mut self, now: Time, from: NodeId) {
        if self.state != RingState::Active {
            self.stats.rejected.unexpected += 1;
            return;
        }
        let lo = self.pred.map_or(self.pos, |p| p.pos);
        let span = cw(lo, self.pos);
        if span < 4 && self.pred.is_some() {
            self.stats.rejected.unexpected += 1;
            return;
        }
        let keys = self.item_keys_in(lo, self.pos);
        let mut split = if keys.len() >= 2 {
            keys[keys.len() / 2 - 1]
        } else {
            lo.wrapping_add(span / 2)
        };
        if !strictly_between(split, lo, self.pos) {
            split = lo.wrapping_add(span / 2);
        }
        let joiner = Peer { id: from, pos: split };
        let mut succs = vec![Peer {
            id: self.me,
            pos: self.pos,
        }];
        succs.extend(self.succs.iter().copied().filter(|p| p.id != from));
        succs.truncate(self.cfg.successors.max(1));
        self.send(
            from,
            &LocatorMsg::JoinAck {
                pos: split,
                pred: self.pred.filter(|p| p.id != from),
                succs,
            },
        );
        // Hand over what the joiner now owns: (lo, split].
        self.hand_off(now, from, Some((lo, split)));
        self.pred_pred = self.pred;
        self.pred = Some(joiner);
        if self.succs.is_empty() {
            self.succs.push(joiner);
        }
        self.adopt(from, now);
        self.load_buckets.clear();
        self.load_since = now;
    }

    pub(super) fn on_join_ack(
        &mut self,
        now: Time,
        from: NodeId,
        pos: Key,
        pred: Option<Peer>,
        succs: Vec<Peer>,
    ) {
        if !matches!(self.state, RingState::Joining { contact, .. } if contact == from) {
            self.stats.rejected.unexpected += 1;
            return;
        }
        self.state = RingState::Active;
        self.pos = pos;
        self.pred = pred.filter(|p| p.id != self.me);
        self.pred_pred = None;
        self.succs = succs.into_iter().filter(|p| p.id != self.me).collect();
        self.tidy_succs();
        self.longs.clear();
        self.cache.clear();
        self.load_buckets.clear();
        self.load_since = now;
        for id in self.neighbours() {
            self.adopt(id, now);
        }
        let hello = self.hello();
        for id in self.neighbours() {
            self.send(id, &LocatorMsg::Ping(hello.clone()));
        }
        for _ in 0..self.cfg.long_links {
            self.request_long_link(now);
        }
    }

    /// Sends stored items to `to`: those keyed in `arc` (all if `None`), removing the
    /// ones that are no longer ours.
    fn hand_off(&mut self, now: Time, to: NodeId, arc: Option<(Key, Key)>) {
        let inside = |k: Key| arc.is_none_or(|(lo, hi)| in_arc(k, lo, hi));
        let mut subs: Vec<SubItem> = Vec::new();
        let mut drop_subs = Vec::new();
        let mut infos: Vec<SubItem> = self.sub_info.values().copied().collect();
        infos.sort_by_key(|s| s.key);
        for s in infos {
            let Some(st) = self.index.sub(s.key) else { continue };
            let remaining = ms(st.expires.saturating_since(now));
            if remaining == 0 {
                continue;
            }
            // The interval the moved copy claims (one the receiver will recompute).
            let mut claim = (s.lo, s.hi);
            let (moves, stays) = match (arc, self.keyer.keying()) {
                (None, _) => (true, false),
                (Some((lo, mid)), Keying::RangeDht) => {
                    // Every range of the box (one for x/y, a few for Hilbert), recomputed:
                    // the stored copy only remembers the last one that reached us.
                    let ranges = self.keyer.ranges(&s.bbox, MAX_REGIONS).unwrap_or_default();
                    let (moved, stays) = split_ranges(&ranges, lo, mid, self.pos);
                    if let Some(c) = moved {
                        claim = c;
                    }
                    (moved.is_some(), stays)
                }
                (Some(_), Keying::Dht) => (inside(s.lo), !inside(s.lo)),
            };
            if moves {
                subs.push(SubItem {
                    ttl_ms: remaining,
                    lo: claim.0,
                    hi: claim.1,
                    ..s
                });
            }
            if !stays {
                drop_subs.push(s.key);
            }
        }
        let mut pubs: Vec<PubItem> = Vec::new();
        let mut drop_pubs = Vec::new();
        let mut stored: Vec<_> = self.index.pubs().map(|(id, p)| (id, *p)).collect();
        stored.sort_by_key(|(id, _)| *id);
        for (id, p) in stored {
            let remaining = ms(p.expires.saturating_since(now));
            if remaining == 0 || !inside(self.keyer.point_key(p.pos)) {
                continue;
            }
            pubs.push(PubItem {
                object: id,
                primary: p.primary,
                pos: p.pos,
                path: p.path,
                kind: self.pub_kind.get(&id).copied().unwrap_or(0),
                ttl_ms: remaining,
            });
            drop_pubs.push(id);
        }
        for k in drop_subs {
            self.index.remove_sub(k);
            self.sub_info.remove(&k);
        }
        for id in drop_pubs {
            self.index.remove_pub(id);
            self.pub_kind.remove(&id);
        }
        let n = subs.len().max(pubs.len()).div_ceil(BATCH);
        for i in 0..n {
            let r = i * BATCH..(i + 1) * BATCH;
            let h = Handoff {
                subs: subs
                    .get(r.start.min(subs.len())..r.end.min(subs.len()))
                    .unwrap_or(&[])
                    .to_vec(),
                pubs: pubs
                    .get(r.start.min(pubs.len())..r.end.min(pubs.len()))
                    .unwrap_or(&[])
                    .to_vec(),
            };
            self.send(to, &LocatorMsg::Handoff(h));
        }
    }

    /// Leaves the ring gracefully: tells both neighbours, hands every stored item to the
    /// successor, and keeps routing its own traffic through the successor.
    pub fn leave(&mut self, now: Time) {
        self.now = self.now.max(now);
        if self.state != RingState::Active {
            return;
        }
        let Some(succ) = self.succs.first().copied() else {
            return;
        };
        let msg = LocatorMsg::Leave {
            pred: self.pred,
            succs: self.succs.clone(),
        };
        self.send(succ.id, &msg);
        if let Some(p) = self.pred
            && p.id != succ.id
        {
            self.send(p.id, &msg);
        }
        self.hand_off(now, succ.id, None);
        self.state = RingState::Out { gateway: succ.id };
        self.pred = None;
        self.pred_pred = None;
        self.succs.clear();
        self.longs.clear();
        self.cache.clear();
    }

    pub(super) fn on_leave(&mut self, now: Time, from: NodeId, pred: Option<Peer>, succs: Vec<Peer>) {
        // Do not re-adopt the leaver's old position from stale hellos.
        let old: Vec<Peer> = self
            .succs
            .iter()
            .chain(self.longs.iter())
            .chain(self.pred.iter())
            .copied()
            .filter(|p| p.id == from)
            .collect();
        for p in old {
            self.dead.insert(p, now + self.cfg.fail_timeout * 2);
        }
        if self.pred.is_some_and(|p| p.id == from) {
            self.pred = pred
                .or(self.pred_pred)
                .filter(|p| p.id != self.me && p.id != from);
            self.pred_pred = None;
            if let Some(p) = self.pred {
                self.adopt(p.id, now);
            }
        }
        if self.succs.first().is_some_and(|s| s.id == from) {
            let mut list: Vec<Peer> = succs
                .into_iter()
                .filter(|p| p.id != self.me && p.id != from)
                .collect();
            for s in &self.succs {
                if s.id != from && !list.iter().any(|e| e.id == s.id) {
                    list.push(*s);
                }
            }
            self.succs = list;
            self.tidy_succs();
            if let Some(s) = self.succs.first().copied() {
                self.adopt(s.id, now);
            }
        } else {
            self.succs.retain(|s| s.id != from);
        }
        if self.succs.is_empty()
            && let Some(p) = self.pred
        {
            self.succs.push(p);
        }
        self.longs.retain(|s| s.id != from);
        self.cache.retain(|(_, _, s, _)| s.id != from);
    }

    pub(super) fn on_load_report(&mut self, now: Time, from: NodeId, milli: u64, joined: bool) {
        self.lb_samples.retain(|(id, _, _)| *id != from);
        self.lb_samples.push_back((from, milli, joined));
        while self.lb_samples.len() > 8 {
            self.lb_samples.pop_front();
        }
        if !self.cfg.loadbal
            || self.state != RingState::Active
            || now < self.lb_until
            || self.lb_samples.len() < 4
        {
            return;
        }
        let mine = self.milli_load(now);
        let n = self.lb_samples.len() as f64 + 1.0;
        let avg = (self.lb_samples.iter().map(|(_, l, _)| *l as f64).sum::<f64>() + mine as f64) / n;
        let Some(&(heavy, hl, _)) = self
            .lb_samples
            .iter()
            .filter(|(id, _, j)| *j && *id != self.me)
            .max_by_key(|(_, l, _)| *l)
        else {
            return;
        };
        let a = f64::from(self.cfg.lb_alpha.max(1.0));
        if avg > 0.0 && (mine as f64) * a <= avg && (hl as f64) >= a * avg {
            self.stats.lb_moves += 1;
            self.lb_until = now + self.cfg.lb_cooldown;
            self.lb_samples.clear();
            self.leave(now);
            self.join(now, heavy);
        }
    }
}
