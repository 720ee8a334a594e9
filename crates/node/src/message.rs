//! Messages exchanged between nodes, encoded with bitcode inside a `core::wire` frame.

use worldmesh_core::{MessageClass, ObjectId, Time};

/// The state of one object as carried on the wire.
#[derive(Clone, Debug, PartialEq, bitcode::Encode, bitcode::Decode)]
pub struct ObjectState {
    /// Which object.
    pub id: ObjectId,
    /// The primary's frame number when this state was produced.
    pub version: u64,
    /// The object's state, as produced by `GameObject::encode_state`.
    pub state: Vec<u8>,
}

/// A node-to-node message.
#[derive(Clone, Debug, PartialEq, bitcode::Encode, bitcode::Decode)]
pub enum Message {
    /// Full states of primaries held by the sender (broadcast replication).
    Updates {
        /// When the sender produced these states (its clock).
        sent_at: Time,
        /// The states.
        states: Vec<ObjectState>,
    },
    /// The sender deleted these primaries.
    Deleted {
        /// The objects.
        ids: Vec<ObjectId>,
    },
}

impl Message {
    /// The traffic class the message is counted under.
    pub fn class(&self) -> MessageClass {
        match self {
            Message::Updates { .. } | Message::Deleted { .. } => MessageClass::ObjectUpdate,
        }
    }
}
