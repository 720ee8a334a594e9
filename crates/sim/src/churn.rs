//! Members failing in a running world: crash some nodes of a model-workload simulation
//! with dynamic membership and measure how their objects come back (`node::adoption`).
//!
//! The run is the `worldmesh simulate` scenario with `[cluster] membership = true`. At
//! `crash_at` the chosen nodes stop (their state is lost, datagrams to them are dropped);
//! the survivors detect the failures through SWIM and adopt the orphans. For every object
//! that was a primary on a crashed node, the outcome records:
//!
//! - **re-homed**: exactly one live node holds it as primary at the end (or a live node
//!   held it as primary, adopted or migrated there, and it then deleted itself, e.g. a
//!   missile whose flight ended);
//! - **duplicated**: more than one live node holds it as primary at the end;
//! - **lost**: no live node holds it, as primary or replica, and it was neither
//!   adopted-then-deleted nor despawned by its policy;
//! - **pending**: no primary yet at the end, but a live node still holds a replica awaiting
//!   its adopter (the run ended before the failure was handled);
//! - **adoption time**: from the crash to the first `Adopted` event for it;
//! - **versions behind**: the crashed primary's version at the crash minus the version the
//!   adopter started from (frames of state lost to the failure).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use worldmesh_core::{NodeId, ObjectId, Time};
use worldmesh_node::Event;
use worldmesh_node::membership::Departure;
use worldmesh_replica::Role;

use crate::config::{ConfigError, SimConfig};
use crate::scenario::{self, Sim};

/// What to break, and when.
#[derive(Clone, Debug, PartialEq)]
pub struct CrashPlan {
    /// When the nodes crash (simulated seconds).
    pub crash_at_s: f64,
    /// The nodes that crash.
    pub crash: Vec<NodeId>,
    /// How long the run goes on after the crash.
    pub settle_s: f64,
}

/// What became of the crashed nodes' objects.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct CrashOutcome {
    /// Objects that were primaries on the crashed nodes at the crash.
    pub orphans: usize,
    /// Of which held as primary by exactly one live node at the end, or adopted and then
    /// deleted by their own think function.
    pub rehomed: usize,
    /// Of which held as primary by more than one live node at the end.
    pub duplicated: usize,
    /// Of which held by no live node, as primary or replica, and never adopted (no replica
    /// survived).
    pub lost: usize,
    /// Of the lost ones, those no live node held at the moment of the crash, as primary,
    /// backup or replica: nothing done after the crash could have saved them. A lost object
    /// outside this count is a bug (a copy survived and was not adopted).
    pub lost_no_copy: usize,
    /// Of `lost_no_copy`, those whose primary and every backup (the `backups` members
    /// ranked first for it, `replica::manager::backup`) crashed together: more simultaneous
    /// failures than k backups cover. The others had a live backup that did not hold them
    /// yet (an object created a few frames before the crash, or its first state lost).
    pub lost_beyond_backups: usize,
    /// Of which not adopted yet at the end, but still held as a replica by a live node
    /// awaiting its adopter (the run ended before the failure was handled).
    pub pending: usize,
    /// Of which dropped by their orphan policy or after nobody adopted them.
    pub dropped: usize,
    /// Crash → first adoption, ms, per adopted object (sorted).
    pub adoption_ms: Vec<f64>,
    /// Versions lost per adopted object: the crashed primary's version at the crash minus
    /// the adopted version (sorted).
    pub versions_behind: Vec<u64>,
    /// Objects that were a primary on two live nodes at some sampled instant after the crash
    /// (a rival adoption being settled).
    pub transient_duplicates: usize,
    /// Adoptions made from another holder's offered copy (the adopter held none).
    pub adopted_from_offer: u64,
    /// Members declared down that had not crashed (false suspicions under loss), counted
    /// once per (observer, member) pair.
    pub false_downs: usize,
    /// Nodes that learned they were declared down and came back as a new generation.
    pub rejoins: usize,
    /// Objects (of any node) held as primary by more than one live node at the end.
    pub duplicated_anywhere: usize,
}

/// Nearest-rank percentile of sorted values (0 when empty).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Builds the world described by `cfg` (which must have `cluster.membership` on), runs it to
/// the crash, crashes `plan.crash`, lets it settle, and reports.
pub fn run(cfg: &SimConfig, plan: &CrashPlan) -> Result<CrashOutcome, ConfigError> {
    if !cfg.cluster.membership {
        return Err(ConfigError::Invalid(
            "a crash run needs cluster.membership = true".into(),
        ));
    }
    if plan.crash.iter().any(|n| n.0 as usize >= cfg.nodes) {
        return Err(ConfigError::Invalid(
            "a crashed node id is not in the world".into(),
        ));
    }
    let mut sim = scenario::build(cfg)?;
    let crash_at = Time::from_secs_f64(plan.crash_at_s);
    sim.run_until(crash_at);
    // What the crashed nodes held.
    let mut orphans: BTreeMap<ObjectId, u64> = BTreeMap::new();
    // Each orphan's backups as its primary ranked them: the k first of the members up at
    // the crash, the primary excluded.
    let up: Vec<NodeId> = sim
        .nodes()
        .iter()
        .map(|n| n.id())
        .filter(|n| sim.is_up(*n))
        .collect();
    let mut backups_crashed: BTreeSet<ObjectId> = BTreeSet::new();
    let mut copy_survived: BTreeSet<ObjectId> = BTreeSet::new();
    for n in &plan.crash {
        for (id, e) in sim.nodes()[n.0 as usize].store().iter() {
            if e.role == Role::Primary {
                orphans.insert(id, e.version);
                let backups = worldmesh_core::rendezvous::top_k(id, &up, Some(*n), cfg.cluster.backups);
                if backups.iter().all(|b| plan.crash.contains(b)) {
                    backups_crashed.insert(id);
                }
            }
        }
    }
    for n in sim
        .nodes()
        .iter()
        .filter(|n| sim.is_up(n.id()) && !plan.crash.contains(&n.id()))
    {
        for id in orphans.keys() {
            if n.store().get(*id).is_some() {
                copy_survived.insert(*id);
            }
        }
    }
    for n in &plan.crash {
        sim.crash(*n);
    }
    sim.record_events();
    let end = crash_at + Duration::from_secs_f64(plan.settle_s);
    let mut transient: BTreeSet<ObjectId> = BTreeSet::new();
    let mut t = crash_at;
    while t < end {
        t = (t + Duration::from_millis(100)).min(end);
        sim.run_until(t);
        for (id, holders) in primary_holders(&sim, &orphans) {
            if holders > 1 {
                transient.insert(id);
            }
        }
    }
    let mut first_adopted: BTreeMap<ObjectId, (Time, u64)> = BTreeMap::new();
    let mut deleted_after: BTreeSet<ObjectId> = BTreeSet::new();
    let mut dropped: BTreeSet<ObjectId> = BTreeSet::new();
    let crashed: BTreeSet<NodeId> = plan.crash.iter().copied().collect();
    let mut false_downs = BTreeSet::new();
    let mut rejoins = 0;
    for (at, node, e) in sim.take_events() {
        match e {
            Event::MemberDown(m, Departure::Failed | Departure::Left) if !crashed.contains(&m.node) => {
                false_downs.insert((node, m.node));
            }
            Event::Rejoined(_) => rejoins += 1,
            Event::Adopted { id, version, .. } if orphans.contains_key(&id) => {
                first_adopted.entry(id).or_insert((at, version));
            }
            // Held as primary by a live node (adopted, or migrated there just before the
            // crash) and ended by its own think (a missile's flight).
            Event::PrimaryDeleted { id } if orphans.contains_key(&id) && sim.is_up(node) => {
                deleted_after.insert(id);
            }
            Event::OrphanDropped { id, .. } => {
                dropped.insert(id);
            }
            _ => {}
        }
    }
    let holders = primary_holders(&sim, &orphans);
    let mut every: BTreeMap<ObjectId, usize> = BTreeMap::new();
    for n in sim.nodes().iter().filter(|n| sim.is_up(n.id())) {
        for (id, e) in n.store().iter() {
            if e.role == Role::Primary {
                *every.entry(id).or_insert(0) += 1;
            }
        }
    }
    let mut out = CrashOutcome {
        orphans: orphans.len(),
        transient_duplicates: transient.len(),
        false_downs: false_downs.len(),
        rejoins,
        duplicated_anywhere: every.values().filter(|c| **c > 1).count(),
        ..CrashOutcome::default()
    };
    for (id, version) in &orphans {
        let h = holders.get(id).copied().unwrap_or(0);
        match h {
            1 => out.rehomed += 1,
            0 if deleted_after.contains(id) => out.rehomed += 1,
            0 if dropped.contains(id) => out.dropped += 1,
            0 if held_anywhere(&sim, *id) => out.pending += 1,
            0 => {
                out.lost += 1;
                if !copy_survived.contains(id) {
                    out.lost_no_copy += 1;
                    if backups_crashed.contains(id) {
                        out.lost_beyond_backups += 1;
                    }
                }
            }
            _ => out.duplicated += 1,
        }
        if let Some((at, v)) = first_adopted.get(id) {
            out.adoption_ms.push((*at - crash_at).as_secs_f64() * 1000.0);
            out.versions_behind.push(version.saturating_sub(*v));
        }
    }
    for s in sim.summaries(0.0, sim.now().as_secs_f64().max(1.0)) {
        if sim.is_up(s.node) {
            out.adopted_from_offer += s.cluster.map_or(0, |c| c.adoption.from_offer);
        }
    }
    out.adoption_ms.sort_by(f64::total_cmp);
    out.versions_behind.sort_unstable();
    Ok(out)
}

/// True if a live node holds `id` at all (a replica awaiting its adopter).
fn held_anywhere(sim: &Sim, id: ObjectId) -> bool {
    sim.nodes()
        .iter()
        .any(|n| sim.is_up(n.id()) && n.store().get(id).is_some())
}

/// For each object of `of`, how many live nodes hold it as primary.
fn primary_holders(sim: &Sim, of: &BTreeMap<ObjectId, u64>) -> BTreeMap<ObjectId, usize> {
    let mut h = BTreeMap::new();
    for n in sim.nodes() {
        if !sim.is_up(n.id()) {
            continue;
        }
        for id in of.keys() {
            if n.store().get(*id).is_some_and(|e| e.role == Role::Primary) {
                *h.entry(*id).or_insert(0) += 1;
            }
        }
    }
    h
}
