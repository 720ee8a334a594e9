//! A batch: changes the store applies atomically, all or nothing.

use worldmesh_core::ObjectId;

use crate::record::{BindingRecord, Checkpoint, ForwardingRecord, ObjectRecord, WriteKey, WriteRecord};

/// One change in a [`Batch`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Insert or replace a primary's record.
    PutObject(ObjectRecord),
    /// Remove a primary's record (deleted, or migrated away).
    DeleteObject(ObjectId),
    /// Insert or replace a name-service binding.
    PutBinding(BindingRecord),
    /// Remove a binding.
    DeleteBinding(ObjectId),
    /// Insert or replace a forwarding entry.
    PutForwarding(ForwardingRecord),
    /// Remove a forwarding entry (its lease ran out).
    DeleteForwarding(ObjectId),
    /// Log a durable write.
    PutWrite(WriteRecord),
    /// Drop a logged write (a checkpoint now contains it).
    DeleteWrite(WriteKey),
    /// Remove every record and the checkpoint marker (an import that replaces the store).
    Clear,
    /// Raise the last generation claimed ([`crate::Store::claim_generation`]) to at least
    /// this one: the running process renewed its generation (the others declared it failed
    /// while it lived), so a later process of the node must start above it. Never lowers it.
    RaiseGeneration(u32),
}

/// Changes applied by [`crate::Store::apply`] in one transaction, in order (a later change
/// to the same key wins), with an optional checkpoint marker written last. After a crash the
/// store holds either every change of a batch or none.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Batch {
    pub(crate) ops: Vec<Op>,
    pub(crate) checkpoint: Option<Checkpoint>,
}

impl Batch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a change.
    pub fn push(&mut self, op: Op) -> &mut Self {
        self.ops.push(op);
        self
    }

    /// Inserts or replaces a primary's record.
    pub fn put_object(&mut self, r: ObjectRecord) -> &mut Self {
        self.push(Op::PutObject(r))
    }

    /// Removes a primary's record.
    pub fn delete_object(&mut self, id: ObjectId) -> &mut Self {
        self.push(Op::DeleteObject(id))
    }

    /// Inserts or replaces a binding.
    pub fn put_binding(&mut self, r: BindingRecord) -> &mut Self {
        self.push(Op::PutBinding(r))
    }

    /// Inserts or replaces a forwarding entry.
    pub fn put_forwarding(&mut self, r: ForwardingRecord) -> &mut Self {
        self.push(Op::PutForwarding(r))
    }

    /// Removes a binding.
    pub fn delete_binding(&mut self, id: ObjectId) -> &mut Self {
        self.push(Op::DeleteBinding(id))
    }

    /// Removes a forwarding entry.
    pub fn delete_forwarding(&mut self, id: ObjectId) -> &mut Self {
        self.push(Op::DeleteForwarding(id))
    }

    /// Logs a durable write.
    pub fn put_write(&mut self, r: WriteRecord) -> &mut Self {
        self.push(Op::PutWrite(r))
    }

    /// Drops a logged write.
    pub fn delete_write(&mut self, k: WriteKey) -> &mut Self {
        self.push(Op::DeleteWrite(k))
    }

    /// Raises the last generation claimed to at least `generation` ([`Op::RaiseGeneration`]).
    pub fn raise_generation(&mut self, generation: u32) -> &mut Self {
        self.push(Op::RaiseGeneration(generation))
    }

    /// Marks this batch as the checkpoint of `c.frame` (replaces the previous marker).
    pub fn checkpoint(&mut self, c: Checkpoint) -> &mut Self {
        self.checkpoint = Some(c);
        self
    }

    /// The changes, in order.
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    /// The checkpoint marker, if any.
    pub fn checkpoint_marker(&self) -> Option<Checkpoint> {
        self.checkpoint
    }

    /// True if the batch changes nothing.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty() && self.checkpoint.is_none()
    }
}
