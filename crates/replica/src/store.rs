//! The local object store: primaries and replicas.

use worldmesh_core::{NodeId, ObjectId, Time};

use crate::GameObject;
use crate::indexed::IndexedMap;

/// Whether this node holds the primary copy of an object or a replica of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// This node runs the object's think function and serializes its writes.
    Primary,
    /// A read-only copy; `primary` is the node holding the primary.
    Replica {
        /// The node the primary lives on (the only node whose updates are accepted).
        primary: NodeId,
    },
}

/// One object in the store.
#[derive(Clone, Debug)]
pub struct Entry<O> {
    /// The object's current state.
    pub object: O,
    /// Primary or replica.
    pub role: Role,
    /// Version of the state: the primary's frame number when it was produced.
    pub version: u64,
    /// When the primary produced this state (the primary's clock).
    pub state_time: Time,
    /// When this node last received or produced this state (local clock).
    pub updated_at: Time,
}

/// Why the store refused an operation. Each case is something a peer could try; none
/// is allowed to corrupt the store.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// A peer sent state for an object this node is primary for.
    #[error("{from} sent state for {id}, whose primary is this node")]
    NotOwner {
        /// The object.
        id: ObjectId,
        /// The sender.
        from: NodeId,
    },
    /// A peer sent state for a replica whose primary is another node.
    #[error("{from} sent state for {id}, whose primary is {owner}")]
    WrongOwner {
        /// The object.
        id: ObjectId,
        /// The sender.
        from: NodeId,
        /// The node known to hold the primary.
        owner: NodeId,
    },
    /// An older or equal version than the one held (reordered or duplicated datagram).
    #[error("stale state for {id}: version {got} <= held {held}")]
    Stale {
        /// The object.
        id: ObjectId,
        /// Version received.
        got: u64,
        /// Version held.
        held: u64,
    },
    /// The object id is already in use.
    #[error("object {0} already exists")]
    Exists(ObjectId),
}

/// The objects one node holds, keyed by id. Iteration order is by id, so every run with
/// the same inputs visits objects in the same order (determinism).
#[derive(Clone, Debug)]
pub struct ObjectStore<O> {
    entries: IndexedMap<ObjectId, Entry<O>>,
    /// The primaries' ids, ascending: frames, publications and the metrics walk the
    /// primaries, a few among hundreds of replicas. A lent primary stays listed.
    primaries: Vec<ObjectId>,
    /// How many primaries are lent to their think function ([`ObjectStore::lend`]).
    lent: usize,
}

impl<O> Default for ObjectStore<O> {
    fn default() -> Self {
        Self {
            entries: IndexedMap::new(),
            primaries: Vec::new(),
            lent: 0,
        }
    }
}

impl<O: GameObject> ObjectStore<O> {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of objects (primaries and replicas).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True if the store holds nothing.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Number of primaries.
    pub fn primary_count(&self) -> usize {
        self.primaries.len() - self.lent
    }

    /// Number of replicas.
    pub fn replica_count(&self) -> usize {
        self.entries.len() - self.primary_count()
    }

    /// The entry of `id`.
    pub fn get(&self, id: ObjectId) -> Option<&Entry<O>> {
        self.entries.get(&id)
    }

    /// The entry of `id`, mutably (the replica manager applies writes through it).
    pub(crate) fn get_mut(&mut self, id: ObjectId) -> Option<&mut Entry<O>> {
        self.entries.get_mut(&id)
    }

    /// The object `id`, primary or replica.
    pub fn object(&self, id: ObjectId) -> Option<&O> {
        self.entries.get(&id).map(|e| &e.object)
    }

    /// Every entry, by id.
    pub fn iter(&self) -> impl Iterator<Item = (ObjectId, &Entry<O>)> {
        self.entries.iter().map(|(k, v)| (*k, v))
    }

    /// The primaries, by id: [`ObjectStore::iter`]'s entries whose role is
    /// [`Role::Primary`], without walking the replicas.
    pub fn primaries(&self) -> impl Iterator<Item = (ObjectId, &Entry<O>)> {
        self.primaries
            .iter()
            .filter_map(|id| self.entries.get(id).map(|e| (*id, e)))
    }

    /// Ids of the primaries, by id.
    pub fn primary_ids(&self) -> Vec<ObjectId> {
        if self.lent == 0 {
            return self.primaries.clone();
        }
        self.primaries
            .iter()
            .copied()
            .filter(|id| self.entries.contains_key(id))
            .collect()
    }

    fn add_primary(&mut self, id: ObjectId) {
        if let Err(i) = self.primaries.binary_search(&id) {
            self.primaries.insert(i, id);
        }
    }

    fn drop_primary(&mut self, id: ObjectId) {
        if let Ok(i) = self.primaries.binary_search(&id) {
            self.primaries.remove(i);
        }
    }

    /// Inserts a new primary.
    pub fn insert_primary(
        &mut self,
        id: ObjectId,
        object: O,
        version: u64,
        now: Time,
    ) -> Result<(), StoreError> {
        if self.entries.contains_key(&id) {
            return Err(StoreError::Exists(id));
        }
        self.entries.insert(
            id,
            Entry {
                object,
                role: Role::Primary,
                version,
                state_time: now,
                updated_at: now,
            },
        );
        self.add_primary(id);
        Ok(())
    }

    /// Takes a primary out for its think function; put it back with
    /// [`ObjectStore::restore`].
    pub fn take(&mut self, id: ObjectId) -> Option<Entry<O>> {
        let e = self.entries.remove(&id)?;
        if e.role == Role::Primary {
            self.drop_primary(id);
        }
        Some(e)
    }

    /// Lends primary `id` to its think function: until [`ObjectStore::give_back`] (or
    /// [`ObjectStore::end_loan`]) the store answers every query as if the primary had been
    /// taken ([`ObjectStore::take`]), but nothing moves: taking and restoring a primary
    /// removed its key from the sorted keys and the hash index and put it back, at every
    /// frame. Nothing else may change the store during the loan (the think function sees
    /// it read-only). `None` if `id` is not a primary here.
    pub(crate) fn lend(&mut self, id: ObjectId) -> Option<Entry<O>> {
        if self.entries.get(&id)?.role != Role::Primary {
            return None;
        }
        let e = self.entries.lend(&id)?;
        self.lent += 1;
        Some(e)
    }

    /// Ends the loan of primary `id` ([`ObjectStore::lend`]) with `entry` back in place.
    pub(crate) fn give_back(&mut self, id: ObjectId, entry: Entry<O>) {
        debug_assert_eq!(entry.role, Role::Primary, "a lent primary comes back a primary");
        if self.entries.is_lent(&id) {
            self.lent -= 1;
            self.entries.insert(id, entry);
        } else {
            self.restore(id, entry);
        }
    }

    /// Ends the loan of primary `id` ([`ObjectStore::lend`]) without its entry: the
    /// primary is gone, as after [`ObjectStore::take`].
    pub(crate) fn end_loan(&mut self, id: ObjectId) {
        if self.entries.is_lent(&id) {
            self.lent -= 1;
            self.entries.remove(&id);
            self.drop_primary(id);
        }
    }

    /// Puts back an entry taken with [`ObjectStore::take`].
    pub fn restore(&mut self, id: ObjectId, entry: Entry<O>) {
        let primary = entry.role == Role::Primary;
        if let Some(old) = self.entries.insert(id, entry)
            && old.role == Role::Primary
        {
            self.drop_primary(id);
        }
        if primary {
            self.add_primary(id);
        }
    }

    /// Removes an object (primary or replica) and returns it.
    pub fn remove(&mut self, id: ObjectId) -> Option<Entry<O>> {
        self.take(id)
    }

    /// Applies state for a replica received from `from`. Creates the replica if unknown.
    /// Refuses writes from nodes that do not own the object and stale versions.
    /// Returns `true` if a new replica was created.
    pub fn apply_replica_state(
        &mut self,
        from: NodeId,
        id: ObjectId,
        object: O,
        version: u64,
        state_time: Time,
        now: Time,
    ) -> Result<bool, StoreError> {
        match self.entries.get_mut(&id) {
            None => {
                self.entries.insert(
                    id,
                    Entry {
                        object,
                        role: Role::Replica { primary: from },
                        version,
                        state_time,
                        updated_at: now,
                    },
                );
                Ok(true)
            }
            Some(e) => match e.role {
                Role::Primary => Err(StoreError::NotOwner { id, from }),
                Role::Replica { primary } if primary != from => Err(StoreError::WrongOwner {
                    id,
                    from,
                    owner: primary,
                }),
                Role::Replica { .. } if version <= e.version => Err(StoreError::Stale {
                    id,
                    got: version,
                    held: e.version,
                }),
                Role::Replica { .. } => {
                    e.object = object;
                    e.version = version;
                    e.state_time = state_time;
                    e.updated_at = now;
                    Ok(false)
                }
            },
        }
    }

    /// Points replica `id` at a new primary node (its primary migrated, paper `001` §3.2).
    /// Returns false if `id` is not a replica here.
    pub(crate) fn rebind_replica(&mut self, id: ObjectId, primary: NodeId) -> bool {
        match self.entries.get_mut(&id) {
            Some(e) if matches!(e.role, Role::Replica { .. }) => {
                e.role = Role::Replica { primary };
                true
            }
            _ => false,
        }
    }

    /// Turns replica `id` into a primary holding `object` at `version` (adoption of an orphan
    /// whose primary's node failed). Returns false if `id` is not a replica here.
    pub(crate) fn promote(&mut self, id: ObjectId, object: O, version: u64, now: Time) -> bool {
        match self.entries.get_mut(&id) {
            Some(e) if matches!(e.role, Role::Replica { .. }) => {
                e.role = Role::Primary;
                e.object = object;
                e.version = version;
                e.updated_at = now;
                self.add_primary(id);
                true
            }
            _ => false,
        }
    }

    /// Removes replicas whose last update is older than `now - ttl`; returns their ids.
    pub fn expire_replicas(&mut self, now: Time, ttl: std::time::Duration) -> Vec<ObjectId> {
        let dead: Vec<ObjectId> = self
            .iter()
            .filter(|(_, e)| matches!(e.role, Role::Replica { .. }) && now - e.updated_at > ttl)
            .map(|(id, _)| id)
            .collect();
        for id in &dead {
            self.entries.remove(id);
        }
        dead
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{StateError, ThinkContext};
    use std::time::Duration;
    use worldmesh_core::{Aabb, Point3};

    #[derive(Clone, Debug, PartialEq)]
    struct Dot(f32);

    impl GameObject for Dot {
        type World = ();
        type Write = f32;
        fn apply_write(&mut self, w: &f32) {
            self.0 += w;
        }
        fn think(&mut self, _ctx: &mut ThinkContext<'_, Self>) {
            self.0 += 1.0;
        }
        fn position(&self) -> Point3 {
            Point3::new(self.0, 0.0, 0.0)
        }
        fn interest(&self, _world: &Self::World) -> Option<Aabb> {
            None
        }
        fn encode_state(&self, out: &mut Vec<u8>) {
            out.extend_from_slice(&self.0.to_le_bytes());
        }
        fn decode_state(b: &[u8]) -> Result<Self, StateError> {
            let a: [u8; 4] = b
                .try_into()
                .map_err(|_| StateError::invalid("Dot", format_args!("{} bytes, not 4", b.len())))?;
            Ok(Dot(f32::from_le_bytes(a)))
        }
    }

    fn id(n: u32, s: u32) -> ObjectId {
        ObjectId::new(NodeId(n), s)
    }

    /// Through every operation that makes, turns or drops a primary, in a random mix,
    /// `primaries()` (and `primary_ids()`) is `iter()` filtered on the primary role, in
    /// the same order, and the counts add up.
    #[test]
    fn the_primaries_list_is_the_walk_filtered_on_the_role() {
        let mut rng = worldmesh_core::DetRng::new(3);
        let mut s = ObjectStore::<Dot>::new();
        let mut taken: Vec<(ObjectId, Entry<Dot>)> = Vec::new();
        let t = Time::ZERO;
        for step in 0..3_000u32 {
            let k = id(rng.index(3) as u32, rng.index(20) as u32);
            match rng.index(8) {
                0 => {
                    let _ = s.insert_primary(k, Dot(0.0), 0, t);
                }
                1 => {
                    let _ = s.apply_replica_state(k.origin, k, Dot(1.0), u64::from(step), t, t);
                }
                2 => {
                    let _ = s.promote(k, Dot(2.0), u64::from(step), t);
                }
                3 => {
                    if let Some(e) = s.take(k) {
                        taken.push((k, e));
                    }
                }
                4 => {
                    if let Some((k, e)) = taken.pop() {
                        s.restore(k, e);
                    }
                }
                5 => {
                    // Restored over an entry made meanwhile (either role, both ways).
                    if let Some((_, e)) = taken.pop() {
                        s.restore(k, e);
                    }
                }
                6 => {
                    s.remove(k);
                }
                _ => {
                    s.rebind_replica(k, NodeId(9));
                }
            }
            let walked: Vec<ObjectId> = s
                .iter()
                .filter(|(_, e)| e.role == Role::Primary)
                .map(|(id, _)| id)
                .collect();
            let listed: Vec<ObjectId> = s.primaries().map(|(id, _)| id).collect();
            assert_eq!(listed, walked, "step {step}");
            assert_eq!(s.primary_ids(), walked);
            assert_eq!(s.primary_count() + s.replica_count(), s.len());
            assert_eq!(s.primary_count(), walked.len());
        }
    }

    /// Everything the store answers, in order.
    fn view(s: &ObjectStore<Dot>, probe: &[ObjectId]) -> String {
        let walk: Vec<(ObjectId, Dot, u64)> = s
            .iter()
            .map(|(id, e)| (id, e.object.clone(), e.version))
            .collect();
        let prim: Vec<ObjectId> = s.primaries().map(|(id, _)| id).collect();
        let got: Vec<Option<Dot>> = probe.iter().map(|id| s.object(*id).cloned()).collect();
        format!(
            "len {} empty {} primaries {} replicas {} ids {:?} walk {walk:?} prim {prim:?} got {got:?}",
            s.len(),
            s.is_empty(),
            s.primary_count(),
            s.replica_count(),
            s.primary_ids(),
        )
    }

    /// A primary lent to its think function is, to every query, a primary taken out; given
    /// back, it is a primary restored; a loan ended without it, a primary taken and
    /// dropped. Checked on stores with and without replicas, the only object, and the
    /// first, middle and last of several.
    #[test]
    fn a_lent_primary_looks_taken() {
        let t = Time::ZERO;
        let stores: Vec<(ObjectStore<Dot>, Vec<ObjectId>)> = {
            let mut one = ObjectStore::new();
            one.insert_primary(id(0, 1), Dot(1.0), 1, t).unwrap();
            let mut mixed = ObjectStore::new();
            for k in 1..6 {
                mixed.insert_primary(id(0, k), Dot(k as f32), 1, t).unwrap();
                mixed
                    .apply_replica_state(NodeId(1), id(1, k), Dot(-(k as f32)), 2, t, t)
                    .unwrap();
            }
            vec![
                (one, vec![id(0, 1)]),
                (mixed.clone(), vec![id(0, 1), id(0, 3), id(0, 5)]),
            ]
        };
        for (base, lend) in stores {
            let probe: Vec<ObjectId> = base.iter().map(|(id, _)| id).collect();
            for &k in &lend {
                let (mut taken, mut lent) = (base.clone(), base.clone());
                let a = taken.take(k).unwrap();
                let b = lent.lend(k).unwrap();
                assert_eq!((a.object.clone(), a.version), (b.object.clone(), b.version));
                assert_eq!(view(&lent, &probe), view(&taken, &probe), "lent {k}");
                let (mut dropped, mut ended) = (taken.clone(), lent.clone());
                taken.restore(k, a);
                lent.give_back(k, b);
                assert_eq!(view(&lent, &probe), view(&base, &probe), "given back {k}");
                assert_eq!(view(&lent, &probe), view(&taken, &probe));
                ended.end_loan(k);
                assert_eq!(view(&ended, &probe), view(&dropped, &probe), "ended {k}");
                // A new primary after the loan ended lands where a taken one's would.
                ended.insert_primary(id(0, 99), Dot(9.0), 1, t).unwrap();
                dropped.insert_primary(id(0, 99), Dot(9.0), 1, t).unwrap();
                assert_eq!(view(&ended, &probe), view(&dropped, &probe));
            }
            // A replica is not lent.
            let mut s = base.clone();
            if let Some((r, _)) = base.iter().find(|(_, e)| e.role != Role::Primary) {
                assert!(s.lend(r).is_none());
                assert_eq!(view(&s, &probe), view(&base, &probe));
            }
        }
    }

    #[test]
    fn replicas_accept_only_their_owner_and_newer_versions() {
        let mut s = ObjectStore::<Dot>::new();
        s.insert_primary(id(0, 1), Dot(0.0), 0, Time::ZERO).unwrap();
        assert_eq!(
            s.insert_primary(id(0, 1), Dot(0.0), 0, Time::ZERO),
            Err(StoreError::Exists(id(0, 1)))
        );
        let t = Time::from_millis(5);
        assert_eq!(
            s.apply_replica_state(NodeId(1), id(1, 1), Dot(1.0), 3, t, t),
            Ok(true)
        );
        assert_eq!(
            s.apply_replica_state(NodeId(1), id(1, 1), Dot(2.0), 4, t, t),
            Ok(false)
        );
        assert!(matches!(
            s.apply_replica_state(NodeId(1), id(1, 1), Dot(9.0), 4, t, t),
            Err(StoreError::Stale { .. })
        ));
        assert!(matches!(
            s.apply_replica_state(NodeId(2), id(1, 1), Dot(9.0), 9, t, t),
            Err(StoreError::WrongOwner { .. })
        ));
        assert!(matches!(
            s.apply_replica_state(NodeId(1), id(0, 1), Dot(9.0), 9, t, t),
            Err(StoreError::NotOwner { .. })
        ));
        assert_eq!(s.object(id(1, 1)), Some(&Dot(2.0)));
        assert_eq!(s.object(id(0, 1)), Some(&Dot(0.0)));
        assert_eq!((s.primary_count(), s.replica_count()), (1, 1));
    }

    #[test]
    fn take_restore_keeps_counts_and_expiry_drops_only_old_replicas() {
        let mut s = ObjectStore::<Dot>::new();
        s.insert_primary(id(0, 1), Dot(0.0), 0, Time::ZERO).unwrap();
        s.apply_replica_state(NodeId(1), id(1, 1), Dot(1.0), 1, Time::ZERO, Time::ZERO)
            .unwrap();
        s.apply_replica_state(
            NodeId(1),
            id(1, 2),
            Dot(1.0),
            1,
            Time::ZERO,
            Time::from_millis(900),
        )
        .unwrap();
        let e = s.take(id(0, 1)).unwrap();
        assert_eq!(s.primary_count(), 0);
        s.restore(id(0, 1), e);
        assert_eq!(s.primary_count(), 1);
        let dead = s.expire_replicas(Time::from_millis(1500), Duration::from_secs(1));
        assert_eq!(dead, vec![id(1, 1)]);
        assert_eq!(s.len(), 2);
        assert_eq!(s.primary_ids(), vec![id(0, 1)]);
    }
}
