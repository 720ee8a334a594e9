//! Interest prediction, the local subscription cache and the aggregation filter
//! (paper `000` §6.2 "Interest prediction and aggregation").
//!
//! **Enlargement.** The paper's formula is lost from the text; from its description we read
//! it as, on every axis `a` with moving-average velocity `v_a` of the subscriber:
//!
//! ```text
//! lo_a = min_a + min(0, v_a)·PredTime − (PubTime·max_speed + pub_margin)
//! hi_a = max_a + max(0, v_a)·PredTime + (PubTime·max_speed + pub_margin)
//! ```
//!
//! `v·PredTime` is the predicted movement in each direction ("PredMoveUpLeft /
//! PredMoveDownRight"); `PubTime·max_speed` covers objects entering the box during the
//! discovery and delivery time of their publications; `pub_margin` is the "PubTTL ×
//! velocity" term for slow publishers: how far an object may be from its last published
//! position (our publishers republish after moving `pub_margin`, so this bounds it). Every
//! added term is non-negative, so the predicted box always contains the unpredicted one.
//! Predicted subscriptions are registered with TTL = PredTime.
//!
//! **Subscription cache.** A node remembers the boxes it registered and when they expire; a
//! subscription whose *needed* box (the enlargement with PredTime = 0) lies inside an
//! unexpired cached box is not resent.
//!
//! **Aggregation filter.** Boxes to send in one frame are merged pairwise while the merged
//! bounding box is at most `factor` × the area of their set union (so two strongly
//! overlapping boxes become one, two distant boxes stay apart). The paper cites spatial
//! database box grouping; a greedy pairwise merge is the simplest such grouping.

use worldmesh_core::{Aabb, Point3, Time};

/// Parameters of the enlargement formula.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PredictionParams {
    /// How far ahead to predict, seconds (paper: PredTime, ~1 s is the sweet spot).
    pub pred_time: f32,
    /// Discovery + delivery time of publications, seconds (paper: PubTime).
    pub pub_time: f32,
    /// Top speed of objects, units/s (multiplies PubTime).
    pub max_speed: f32,
    /// Bound on the distance between an object and its last publication, units
    /// ("PubTTL × velocity").
    pub pub_margin: f32,
}

/// The enlarged subscription box for an unpredicted `region` moving at `velocity`.
pub fn enlarge(region: &Aabb, velocity: Point3, p: &PredictionParams) -> Aabb {
    let fin = |v: f32| if v.is_finite() { v } else { 0.0 };
    let m = fin(p.pub_time.max(0.0) * p.max_speed.max(0.0) + p.pub_margin.max(0.0));
    let t = fin(p.pred_time.max(0.0));
    let ax = |lo: f32, hi: f32, v: f32| {
        let v = fin(v);
        (lo + v.min(0.0) * t - m, hi + v.max(0.0) * t + m)
    };
    let (x0, x1) = ax(region.min.x, region.max.x, velocity.x);
    let (y0, y1) = ax(region.min.y, region.max.y, velocity.y);
    let (z0, z1) = ax(region.min.z, region.max.z, velocity.z);
    Aabb {
        min: Point3::new(x0, y0, z0),
        max: Point3::new(x1, y1, z1),
    }
}

/// True if `outer` contains `inner` entirely.
pub fn box_contains(outer: &Aabb, inner: &Aabb) -> bool {
    (0..3).all(|a| outer.min.coord(a) <= inner.min.coord(a) && inner.max.coord(a) <= outer.max.coord(a))
}

/// Area (x–y) of the intersection of two boxes.
pub fn overlap_area(a: &Aabb, b: &Aabb) -> f32 {
    let w = (a.max.x.min(b.max.x) - a.min.x.max(b.min.x)).max(0.0);
    let h = (a.max.y.min(b.max.y) - a.min.y.max(b.min.y)).max(0.0);
    w * h
}

/// A moving average of a subscriber's velocity, estimated from its region's centre.
///
/// Jumps are not movement: a step faster than [`VelocityEstimate::TELEPORT_FACTOR`] ×
/// the top speed (a player that dies already looks at its far-away respawn point) restarts
/// the estimate at rest instead of feeding it, and the average never exceeds the top speed.
/// Without this, one jump across the map read as a speed of tens of thousands of units per
/// second for several frames, and the predicted box grew past the size limit.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct VelocityEstimate {
    last: Option<(Time, Point3)>,
    /// The current estimate, units/s.
    pub velocity: Point3,
}

impl VelocityEstimate {
    /// Weight of the newest sample in the exponential moving average.
    pub const ALPHA: f32 = 0.3;
    /// A step faster than this many times the top speed is a teleport.
    pub const TELEPORT_FACTOR: f32 = 2.0;

    /// Feeds the position at `now` of an object whose top speed is `max_speed` units/s
    /// (non-finite or non-positive: unbounded); returns the updated estimate.
    pub fn update(&mut self, now: Time, pos: Point3, max_speed: f32) -> Point3 {
        let bounded = max_speed.is_finite() && max_speed > 0.0;
        if let Some((t, p)) = self.last {
            let dt = now.saturating_since(t).as_secs_f32();
            if dt > 0.0 {
                let inst = Point3::new((pos.x - p.x) / dt, (pos.y - p.y) / dt, (pos.z - p.z) / dt);
                let speed = |v: Point3| (v.x * v.x + v.y * v.y + v.z * v.z).sqrt();
                if bounded && speed(inst) > Self::TELEPORT_FACTOR * max_speed {
                    self.velocity = Point3::new(0.0, 0.0, 0.0);
                } else if inst.is_finite() {
                    let a = Self::ALPHA;
                    let v = self.velocity;
                    let mut next = Point3::new(
                        v.x + a * (inst.x - v.x),
                        v.y + a * (inst.y - v.y),
                        v.z + a * (inst.z - v.z),
                    );
                    let s = speed(next);
                    if bounded && s > max_speed {
                        let f = max_speed / s;
                        next = Point3::new(next.x * f, next.y * f, next.z * f);
                    }
                    self.velocity = next;
                }
            }
        }
        self.last = Some((now, pos));
        self.velocity
    }
}

/// The local subscription cache: boxes registered in the overlay and still unexpired.
#[derive(Clone, Debug, Default)]
pub struct SubscriptionCache {
    entries: Vec<(Aabb, Time)>,
}

impl SubscriptionCache {
    /// Forgets entries that expire at or before `now + slack` (they are about to
    /// disappear from the rendezvous and cannot be relied on).
    pub fn prune(&mut self, now: Time, slack: std::time::Duration) {
        let horizon = now.saturating_add(slack);
        self.entries.retain(|(_, e)| *e > horizon);
    }

    /// True if an unexpired cached box contains `needed`: nothing to send.
    pub fn covers(&self, needed: &Aabb) -> bool {
        self.entries.iter().any(|(b, _)| box_contains(b, needed))
    }

    /// Remembers a box registered until `expires`.
    pub fn insert(&mut self, b: Aabb, expires: Time) {
        self.entries.push((b, expires));
    }

    /// Number of cached boxes.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True if empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Forgets everything (e.g. after rejoining the overlay).
    pub fn clear(&mut self) {
        self.entries.clear();
    }
}

/// Greedy aggregation filter: merges pairs of boxes whose bounding box has at most
/// `factor` × the area of their union, until no pair qualifies. The result covers every
/// input box.
pub fn aggregate(mut boxes: Vec<Aabb>, factor: f32) -> Vec<Aabb> {
    if factor < 1.0 || !factor.is_finite() {
        return boxes;
    }
    loop {
        let mut best: Option<(usize, usize, f32)> = None;
        for i in 0..boxes.len() {
            for j in i + 1..boxes.len() {
                let (a, b) = (&boxes[i], &boxes[j]);
                let union_area = a.area_xy() + b.area_xy() - overlap_area(a, b);
                let merged = a.union(b).area_xy();
                let ratio = if union_area > 0.0 {
                    merged / union_area
                } else {
                    1.0
                };
                if ratio <= factor && best.is_none_or(|(_, _, r)| ratio < r) {
                    best = Some((i, j, ratio));
                }
            }
        }
        let Some((i, j, _)) = best else {
            return boxes;
        };
        let m = boxes[i].union(&boxes[j]);
        boxes.swap_remove(j);
        boxes[i] = m;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::time::Duration;

    fn bx(x0: f32, y0: f32, x1: f32, y1: f32) -> Aabb {
        Aabb::from_corners(Point3::new(x0, y0, 0.0), Point3::new(x1, y1, 0.0))
    }

    fn params(pred: f32) -> PredictionParams {
        PredictionParams {
            pred_time: pred,
            pub_time: 0.1,
            max_speed: 300.0,
            pub_margin: 20.0,
        }
    }

    #[test]
    fn enlargement_follows_the_formula() {
        let r = bx(0.0, 0.0, 100.0, 100.0);
        let e = enlarge(&r, Point3::new(100.0, -50.0, 0.0), &params(1.0));
        // margin = 0.1·300 + 20 = 50; x grows 100 forward, y grows 50 backward.
        assert_eq!(
            e,
            Aabb::from_corners(Point3::new(-50.0, -100.0, -50.0), Point3::new(250.0, 150.0, 50.0))
        );
    }

    #[test]
    fn cache_suppresses_resends_until_expiry() {
        let mut c = SubscriptionCache::default();
        let reg = bx(0.0, 0.0, 200.0, 200.0);
        c.insert(reg, Time::from_millis(1000));
        assert!(c.covers(&bx(10.0, 10.0, 150.0, 150.0)));
        assert!(!c.covers(&bx(10.0, 10.0, 250.0, 150.0)), "sticks out");
        c.prune(Time::from_millis(850), Duration::from_millis(100));
        assert!(c.covers(&bx(10.0, 10.0, 150.0, 150.0)));
        c.prune(Time::from_millis(900), Duration::from_millis(100));
        assert!(
            !c.covers(&bx(10.0, 10.0, 150.0, 150.0)),
            "expired entries are forgotten"
        );
    }

    #[test]
    fn aggregation_merges_overlapping_and_keeps_distant_boxes() {
        let a = bx(0.0, 0.0, 100.0, 100.0);
        let b = bx(10.0, 5.0, 110.0, 105.0);
        let far = bx(1000.0, 1000.0, 1100.0, 1100.0);
        let out = aggregate(vec![a, b, far], 1.2);
        assert_eq!(out.len(), 2);
        assert!(out.contains(&bx(0.0, 0.0, 110.0, 105.0)));
        assert!(out.contains(&far));
        assert_eq!(aggregate(vec![a, far], 1.2).len(), 2);
    }

    #[test]
    fn a_jump_restarts_the_velocity_estimate_and_speed_is_bounded() {
        let mut v = VelocityEstimate::default();
        let t = |ms: u64| Time::from_millis(ms);
        v.update(t(0), Point3::new(0.0, 0.0, 0.0), 300.0);
        // 20 units per 100 ms = 200 units/s: the average moves 30% of the way.
        let e = v.update(t(100), Point3::new(20.0, 0.0, 0.0), 300.0);
        assert!((e.x - 60.0).abs() < 1e-3, "{e:?}");
        // A 3000-unit jump in 100 ms (30,000 units/s) is a teleport: back to rest.
        let e = v.update(t(200), Point3::new(3020.0, 0.0, 0.0), 300.0);
        assert_eq!(e, Point3::new(0.0, 0.0, 0.0));
        // 550 units/s (below the teleport bound) is averaged but capped at the top speed.
        let mut w = VelocityEstimate::default();
        w.update(t(0), Point3::new(0.0, 0.0, 0.0), 300.0);
        for k in 1..40u64 {
            let e = w.update(t(100 * k), Point3::new(55.0 * k as f32, 0.0, 0.0), 300.0);
            assert!(e.x <= 300.0 + 1e-3, "{e:?}");
        }
        assert!((w.velocity.x - 300.0).abs() < 1e-3);
    }

    proptest! {
        #[test]
        fn predicted_contains_unpredicted(
            x in -1000.0f32..1000.0, y in -1000.0f32..1000.0, w in 0.0f32..900.0, h in 0.0f32..900.0,
            vx in -400.0f32..400.0, vy in -400.0f32..400.0, pred in 0.0f32..3.0,
        ) {
            let r = bx(x, y, x + w, y + h);
            let v = Point3::new(vx, vy, 0.0);
            let needed = enlarge(&r, v, &params(0.0));
            let predicted = enlarge(&r, v, &params(pred));
            prop_assert!(box_contains(&needed, &r));
            prop_assert!(box_contains(&predicted, &needed));
        }

        #[test]
        fn aggregation_covers_every_input(
            boxes in proptest::collection::vec((0.0f32..1000.0, 0.0f32..1000.0, 1.0f32..300.0, 1.0f32..300.0), 0..8),
            factor in 1.0f32..2.0,
        ) {
            let bs: Vec<Aabb> = boxes.iter().map(|(x, y, w, h)| bx(*x, *y, x + w, y + h)).collect();
            let out = aggregate(bs.clone(), factor);
            prop_assert!(out.len() <= bs.len());
            for b in &bs {
                prop_assert!(out.iter().any(|o| box_contains(o, b)));
            }
        }
    }
}
