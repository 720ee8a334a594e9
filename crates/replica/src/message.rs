//! Replica-management messages (all counted as `MessageClass::ObjectUpdate`).
//!
//! Messages to one destination are bundled per frame into [`Packet`]s, each with a
//! sequence number of the (sender → destination) stream. Receivers acknowledge packet
//! sequence numbers; the sender knows which object versions each packet carried, so an
//! acknowledgement tells it which baseline the receiver holds (the Quake delta scheme the
//! Colyseus replica manager mirrors, paper `000` §5).

use worldmesh_core::{NodeId, ObjectId, Time};

use crate::manager::WriterLog;

/// One object's update.
#[derive(Clone, Debug, PartialEq, bitcode::Encode, bitcode::Decode)]
pub struct UpdateItem {
    /// The object.
    pub id: ObjectId,
    /// Version carried (primary-assigned, starts at 1, bumps when the state changes).
    pub version: u64,
    /// Version the delta is against; 0 = `data` is a full state.
    pub base: u64,
    /// Full state or delta bytes.
    pub data: Vec<u8>,
    /// Sent to one of the object's backups: the per-writer log of this state rides in
    /// the packet's `Logs` after it, or — when the receiver has acknowledged the primary's
    /// current log already — is the newest log the receiver holds (see
    /// `replica::manager::backup`).
    pub logged: bool,
}

/// A soft-state interest registration (paper `000` §5 "Decoupling location and
/// synchronization": the replica holder periodically registers interest with the primary).
#[derive(Clone, Debug, PartialEq, bitcode::Encode, bitcode::Decode)]
pub struct InterestItem {
    /// The object wanted.
    pub id: ObjectId,
    /// Version held; 0 = none (send the full state: this is a fetch).
    pub have: u64,
}

/// A tentative write forwarded to the primary.
///
/// Writes are delivered exactly once across losses and migrations (paper `001` §3.2: writes
/// that arrive during a migration are forwarded, never lost and never applied twice): the
/// writer numbers its writes per target object (`seq`, from 1), keeps each until the primary
/// acknowledges it ([`ReplicaMsg::WriteAck`]) and resends it to wherever the name service
/// then places the primary; the primary remembers which `(writer, seq)` it applied
/// (and hands that record over on migration) and applies each at most once.
#[derive(Clone, Debug, PartialEq, bitcode::Encode, bitcode::Decode)]
pub struct WriteItem {
    /// Target object.
    pub id: ObjectId,
    /// The writer's sequence number for writes to `id` (from 1).
    pub seq: u64,
    /// The game's `Write`, bitcode-encoded; empty for a **void**: a write its writer gave
    /// up (no acknowledgement within `write_timeout`), sent in its place so the primary
    /// counts its number as done without applying anything. (A game whose `Write` encodes
    /// to no bytes at all cannot tell a void from the write: for it a void is the write,
    /// applied at most once like any resend.)
    pub data: Vec<u8>,
}

/// A write passed on by a node that is not its writer: the old host of a migrated object
/// forwarding it to the new one (paper `001` §3.2 step 6). Carries the original writer so the
/// new primary can deduplicate and acknowledge it to the writer directly.
#[derive(Clone, Debug, PartialEq, bitcode::Encode, bitcode::Decode)]
pub struct ForwardedWrite {
    /// The node that made the write (and awaits the acknowledgement).
    pub writer: NodeId,
    /// The write.
    pub item: WriteItem,
}

/// Which writes the primary of `id` had applied when it produced `version`: its per-writer
/// logs, shipped to the object's backups (see `ReplicaConfig::backups`). The node that
/// adopts the object after its primary's node fails starts from these logs, so a write the
/// old primary applied (and the adopted state contains) is not applied again when its
/// writer resends it.
#[derive(Clone, Debug, PartialEq, bitcode::Encode, bitcode::Decode)]
pub struct LogItem {
    /// The object.
    pub id: ObjectId,
    /// The version of the update it rides with, whose state contains exactly these writes.
    pub version: u64,
    /// Per writer, the sequence numbers applied.
    pub logs: Vec<(NodeId, WriterLog)>,
}

/// A replica-management message.
#[derive(Clone, Debug, PartialEq, bitcode::Encode, bitcode::Decode)]
pub enum ReplicaMsg {
    /// Updates of primaries held by the sender.
    Update(Vec<UpdateItem>),
    /// Interest registrations (and fetches) for primaries held by the destination.
    Interest(Vec<InterestItem>),
    /// The sender no longer wants these replicas.
    Unsubscribe(Vec<ObjectId>),
    /// Packets of the destination's stream that the sender received.
    Ack(Vec<u32>),
    /// Tentative writes to primaries held by the destination.
    Write(Vec<WriteItem>),
    /// The sender deleted these primaries.
    Deleted(Vec<ObjectId>),
    /// Writes of the destination the sender applied (or had already applied): (object, seq).
    WriteAck(Vec<(ObjectId, u64)>),
    /// The per-writer logs of primaries the destination backs up.
    Logs(Vec<LogItem>),
    /// Objects the destination asked the sender about ([`ReplicaMsg::Probe`]), of which
    /// the sender holds none as primary and knows no node they moved to. A node that binds
    /// one of them to the sender, and holds no replica of it, learns that binding is stale
    /// (the sender gave the object up to a rival, or lost it on rejoining as a new
    /// generation) and takes the states of the primary that serves it instead.
    NotPrimary(Vec<ObjectId>),
    /// Objects the sender binds to the destination and holds no replica of, while it
    /// refuses another node's states of them: the destination answers as to a fetch if it
    /// holds the object as primary, with a `Moved` hint if it moved it on, and with
    /// [`ReplicaMsg::NotPrimary`] otherwise.
    Probe(Vec<ObjectId>),
}

/// What travels in one datagram.
#[derive(Clone, Debug, PartialEq, bitcode::Encode, bitcode::Decode)]
pub struct Packet {
    /// Sequence number in the sender → destination stream (from 1).
    pub seq: u32,
    /// When the sender sent it (its clock).
    pub sent_at: Time,
    /// The messages.
    pub msgs: Vec<ReplicaMsg>,
}
