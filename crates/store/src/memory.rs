//! The store's semantics without a disk: what the simulator keeps for a node that
//! persists, so a crashed node can be restarted from exactly what its batches left
//! (issue 19: the store is an effect; the simulator performs it against this model).
//!
//! [`MemStore::apply`] follows [`crate::Store::apply`] op for op — in order, a later change
//! to the same key wins, `Clear` empties everything and the marker, the checkpoint marker
//! is written last — and [`MemStore::load`] returns what [`crate::Store::load`] would, in
//! the same id order (`tests/memory.rs` checks both against each other on random batches).
//! There is no size bound: the simulator's own nodes write here.

use std::collections::BTreeMap;

use worldmesh_core::ObjectId;

use crate::batch::{Batch, Op};
use crate::record::{BindingRecord, Checkpoint, ForwardingRecord, ObjectRecord, WriteKey, WriteRecord};
use crate::store::{GenerationClaim, Recovered};

/// An in-memory store (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemStore {
    objects: BTreeMap<ObjectId, ObjectRecord>,
    bindings: BTreeMap<ObjectId, BindingRecord>,
    forwarding: BTreeMap<ObjectId, ForwardingRecord>,
    writes: BTreeMap<WriteKey, WriteRecord>,
    checkpoint: Option<Checkpoint>,
    generation: Option<u32>,
    batches: u64,
}

impl MemStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies `batch` (atomically: nothing else happens meanwhile).
    pub fn apply(&mut self, batch: &Batch) {
        for op in batch.ops() {
            match op {
                Op::PutObject(r) => {
                    self.objects.insert(r.id, r.clone());
                }
                Op::DeleteObject(id) => {
                    self.objects.remove(id);
                }
                Op::PutBinding(r) => {
                    self.bindings.insert(r.id, *r);
                }
                Op::DeleteBinding(id) => {
                    self.bindings.remove(id);
                }
                Op::PutForwarding(r) => {
                    self.forwarding.insert(r.id, *r);
                }
                Op::DeleteForwarding(id) => {
                    self.forwarding.remove(id);
                }
                Op::PutWrite(r) => {
                    self.writes.insert(r.key, r.clone());
                }
                Op::DeleteWrite(k) => {
                    self.writes.remove(k);
                }
                Op::Clear => {
                    self.objects.clear();
                    self.bindings.clear();
                    self.forwarding.clear();
                    self.writes.clear();
                    self.checkpoint = None;
                }
                Op::RaiseGeneration(g) => {
                    self.generation = Some(self.generation.map_or(*g, |last| last.max(*g)));
                }
            }
        }
        if let Some(c) = batch.checkpoint_marker() {
            self.checkpoint = Some(c);
        }
        self.batches += 1;
    }

    /// Everything held, in id order.
    pub fn load(&self) -> Recovered {
        Recovered {
            objects: self.objects.values().cloned().collect(),
            bindings: self.bindings.values().copied().collect(),
            forwarding: self.forwarding.values().copied().collect(),
            writes: self.writes.values().cloned().collect(),
            last_checkpoint: self.checkpoint,
        }
    }

    /// Claims a starting process's generation as [`crate::Store::claim_generation`] does:
    /// the larger of `at_least` and one more than the last one claimed or raised. `None`
    /// once `u32::MAX` was claimed (the disk store's error).
    pub fn claim_generation(&mut self, at_least: u32) -> Option<GenerationClaim> {
        let previous = self.generation;
        let generation = match previous {
            None => at_least,
            Some(p) => p.checked_add(1)?.max(at_least),
        };
        self.generation = Some(generation);
        Some(GenerationClaim { generation, previous })
    }

    /// The last generation claimed or raised, if any.
    pub fn last_generation(&self) -> Option<u32> {
        self.generation
    }

    /// Batches applied so far.
    pub fn batches(&self) -> u64 {
        self.batches
    }

    /// The object records held.
    pub fn objects(&self) -> impl Iterator<Item = &ObjectRecord> {
        self.objects.values()
    }

    /// The logged writes held.
    pub fn writes(&self) -> impl Iterator<Item = &WriteRecord> {
        self.writes.values()
    }
}
