//! The client protocol's messages and their bounded codec.
//!
//! Every message is one datagram of at most [`MAX_DATAGRAM`] bytes: a magic byte, the
//! protocol version, then the message in bitcode (whose decoder bounds every count by the
//! bytes present, so no input allocates more than its own size allows). The channel under
//! it (QUIC datagrams over TLS in the real runtime) authenticates and encrypts; the
//! protocol itself assumes datagrams may be lost, duplicated or reordered:
//! - the client sends every input it has not yet seen applied, in each `Inputs` message
//!   (bounded by [`MAX_INPUTS_PER_MESSAGE`]), and the node applies each sequence number
//!   once, in order;
//! - the node sends a view per frame, delta-encoded against the newest view the client
//!   acknowledged (Quake 3's snapshot scheme), split into parts that fit a datagram; the
//!   client keeps only complete views.

use worldmesh_core::ObjectId;

/// Largest datagram either side sends or accepts, bytes (fits QUIC's minimum path MTU).
pub const MAX_DATAGRAM: usize = 1200;
/// Largest encoded input, bytes.
pub const MAX_INPUT_BYTES: usize = 64;
/// Most inputs one `Inputs` message carries.
pub const MAX_INPUTS_PER_MESSAGE: usize = 16;
/// Most objects one view holds (the avatar's and the first others by id beyond).
pub const MAX_VIEW_OBJECTS: usize = 1024;
/// Most nodes a `Delays` message names.
pub const MAX_DELAYS: usize = 64;
/// Protocol version; a node refuses clients of another version.
pub const CLIENT_PROTOCOL_VERSION: u16 = 1;
const MAGIC: u8 = 0xC7;

/// Why a node refused a connect. Ordered as declared; serialized (e.g. as the key of a
/// report's counts) as the variant's name.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    bitcode::Encode,
    bitcode::Decode,
    serde::Serialize,
    serde::Deserialize,
)]
pub enum RefuseReason {
    /// The token's shape is wrong.
    MalformedToken,
    /// The token was not issued with the cluster's key.
    Forged,
    /// The token expired.
    Expired,
    /// The token names other nodes.
    WrongNode,
    /// The token lives longer than allowed.
    TooLong,
    /// The token is bound to another live connection.
    Replayed,
    /// The client speaks another protocol version.
    Version,
    /// The node holds its maximum number of players.
    Full,
    /// The node is draining (leaving the cluster).
    Draining,
}

/// Why a node ended a session. Ordered as declared; serialized (e.g. as the key of a
/// report's counts) as the variant's name.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    bitcode::Encode,
    bitcode::Decode,
    serde::Serialize,
    serde::Deserialize,
)]
pub enum DisconnectReason {
    /// The client said goodbye.
    ClientLeft,
    /// Nothing arrived from the client for too long.
    TimedOut,
    /// The client sent inputs faster than allowed.
    InputFlood,
    /// The client sent too many malformed datagrams.
    Malformed,
    /// The token expired while connected... and was not renewed; or it was taken over by a
    /// newer connection of the same token.
    Replaced,
    /// The node is shutting down or draining.
    NodeLeaving,
    /// The avatar moved to another node and the client was told where (`HandOff`).
    HandedOff,
}

/// A message from a client to a node.
#[derive(Clone, Debug, PartialEq, bitcode::Encode, bitcode::Decode)]
pub enum ClientMsg {
    /// Opens (or resumes) a session.
    Connect {
        /// The client's protocol version.
        version: u16,
        /// The connect token.
        token: Vec<u8>,
    },
    /// Inputs `first_seq, first_seq + 1, …`, each encoded with the game's `Input` type;
    /// and the newest complete view the client holds.
    Inputs {
        /// Newest complete view received.
        ack: Option<u32>,
        /// Sequence number of the first input.
        first_seq: u32,
        /// The inputs, oldest first.
        inputs: Vec<Vec<u8>>,
    },
    /// The client's measured round-trip times to nodes (ms), for the assignment of
    /// players to nodes (paper `002`); sent once after the session opens.
    Delays {
        /// (node, RTT ms), at most [`MAX_DELAYS`].
        rtts: Vec<(u32, f32)>,
    },
    /// Acknowledges a view (also a keepalive).
    Ack {
        /// Newest complete view received.
        view: Option<u32>,
    },
    /// Ends the session.
    Disconnect,
}

/// A message from a node to a client.
#[derive(Clone, Debug, PartialEq, bitcode::Encode, bitcode::Decode)]
pub enum NodeMsg {
    /// The session is open.
    Accepted {
        /// The player, as the token names it.
        player: u64,
        /// The player's avatar.
        avatar: ObjectId,
        /// The node's frame interval, ms.
        frame_ms: u32,
    },
    /// The connect was refused.
    Refused {
        /// Why.
        reason: RefuseReason,
    },
    /// Part of a view.
    View(ViewPart),
    /// The player's avatar now lives on node `node`: reconnect there with `token` (the
    /// node's player-port address comes from the game's node directory). Repeated every
    /// frame until the client goes.
    HandOff {
        /// The new node.
        node: worldmesh_core::NodeId,
        /// A connect token for it.
        token: Vec<u8>,
    },
    /// The session ended.
    Disconnected {
        /// Why.
        reason: DisconnectReason,
    },
}

/// One datagram's share of a view.
#[derive(Clone, Debug, PartialEq, bitcode::Encode, bitcode::Decode)]
pub struct ViewPart {
    /// The view's number (increases by one per frame sent).
    pub seq: u32,
    /// The view this one is a delta against (`None`: against nothing).
    pub base: Option<u32>,
    /// The node's time of the frame, ms since the node started.
    pub time_ms: u64,
    /// The last input the avatar applied.
    pub last_input: Option<u32>,
    /// This part's index.
    pub part: u8,
    /// How many parts the view has.
    pub parts: u8,
    /// Changes against the base view; objects of the base not named stay as they were.
    pub entries: Vec<ViewEntry>,
}

/// One object's change in a view.
#[derive(Clone, Debug, PartialEq, bitcode::Encode, bitcode::Decode)]
pub struct ViewEntry {
    /// The object.
    pub id: ObjectId,
    /// What changed.
    pub change: Change,
}

/// How an object changed against the base view.
#[derive(Clone, Debug, PartialEq, bitcode::Encode, bitcode::Decode)]
pub enum Change {
    /// New in the view: its full state (the game's `encode_state`).
    Full(Vec<u8>),
    /// In the base view and changed: a delta against the base's state (`encode_delta`).
    Delta(Vec<u8>),
    /// Left the view.
    Removed,
}

/// Why a datagram could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Longer than [`MAX_DATAGRAM`].
    #[error("datagram of {0} bytes is larger than the {MAX_DATAGRAM} accepted")]
    TooLarge(usize),
    /// Not this protocol (magic byte), or empty.
    #[error("not a worldmesh client datagram")]
    NotOurs,
    /// Another protocol version.
    #[error("client protocol version {0}, expected {CLIENT_PROTOCOL_VERSION}")]
    Version(u16),
    /// The body does not decode.
    #[error("malformed body")]
    Body,
    /// Decoded, but breaks a limit (too many inputs, an input too large, a bad part index).
    #[error("message breaks a limit: {0}")]
    Limit(&'static str),
}

fn frame<T: bitcode::Encode>(msg: &T) -> Vec<u8> {
    let body = bitcode::encode(msg);
    let mut out = Vec::with_capacity(3 + body.len());
    out.push(MAGIC);
    out.extend_from_slice(&CLIENT_PROTOCOL_VERSION.to_le_bytes());
    out.extend_from_slice(&body);
    out
}

fn unframe(bytes: &[u8]) -> Result<&[u8], DecodeError> {
    if bytes.len() > MAX_DATAGRAM {
        return Err(DecodeError::TooLarge(bytes.len()));
    }
    match bytes {
        [MAGIC, a, b, body @ ..] => {
            let v = u16::from_le_bytes([*a, *b]);
            if v == CLIENT_PROTOCOL_VERSION {
                Ok(body)
            } else {
                Err(DecodeError::Version(v))
            }
        }
        _ => Err(DecodeError::NotOurs),
    }
}

impl ClientMsg {
    /// The datagram.
    pub fn encode(&self) -> Vec<u8> {
        frame(self)
    }

    /// Decodes and checks a datagram from a client.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let msg: Self = bitcode::decode(unframe(bytes)?).map_err(|_| DecodeError::Body)?;
        if let ClientMsg::Delays { rtts } = &msg
            && (rtts.len() > MAX_DELAYS
                || rtts
                    .iter()
                    .any(|(_, d)| !d.is_finite() || *d < 0.0 || *d > 60_000.0))
        {
            return Err(DecodeError::Limit("delays: too many, or not in [0, 60000] ms"));
        }
        if let ClientMsg::Inputs { inputs, .. } = &msg {
            if inputs.len() > MAX_INPUTS_PER_MESSAGE {
                return Err(DecodeError::Limit("too many inputs"));
            }
            if inputs.iter().any(|i| i.len() > MAX_INPUT_BYTES) {
                return Err(DecodeError::Limit("input too large"));
            }
        }
        Ok(msg)
    }
}

impl NodeMsg {
    /// The datagram.
    pub fn encode(&self) -> Vec<u8> {
        frame(self)
    }

    /// Decodes and checks a datagram from a node.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let msg: Self = bitcode::decode(unframe(bytes)?).map_err(|_| DecodeError::Body)?;
        if let NodeMsg::View(v) = &msg
            && (v.parts == 0 || v.part >= v.parts)
        {
            return Err(DecodeError::Limit("part index out of range"));
        }
        Ok(msg)
    }
}

/// Encoded size of a view entry, bytes, as an upper bound used to pack parts.
pub(crate) fn entry_cost(e: &ViewEntry) -> usize {
    let body = match &e.change {
        Change::Full(b) | Change::Delta(b) => b.len() + 3,
        Change::Removed => 1,
    };
    // Origin, sequence (bitcode packs integers; bounded above by their raw size).
    body + 4 + 8 + 2
}

/// Splits a view's entries into parts of at most [`MAX_DATAGRAM`] bytes each (at most 255
/// parts). Returns the datagrams and the objects left out (a state too large for any
/// datagram, or beyond 255 parts): the sender must not count them as seen by the client.
pub fn split_view(
    seq: u32,
    base: Option<u32>,
    time_ms: u64,
    last_input: Option<u32>,
    entries: Vec<ViewEntry>,
) -> (Vec<Vec<u8>>, Vec<ObjectId>) {
    /// Header allowance (magic, version, seq, base, time, input, part counts, lengths).
    const HEADER: usize = 48;
    let mut groups: Vec<Vec<ViewEntry>> = vec![Vec::new()];
    let mut size = HEADER;
    let mut unsent = Vec::new();
    for e in entries {
        let c = entry_cost(&e);
        if HEADER + c > MAX_DATAGRAM {
            unsent.push(e.id); // an object state that fits no datagram is never sent
            continue;
        }
        if size + c > MAX_DATAGRAM && !groups.last().is_some_and(Vec::is_empty) {
            if groups.len() == usize::from(u8::MAX) {
                unsent.push(e.id);
                continue;
            }
            groups.push(Vec::new());
            size = HEADER;
        }
        size += c;
        if let Some(g) = groups.last_mut() {
            g.push(e);
        }
    }
    let parts = groups.len() as u8;
    let datagrams = groups
        .into_iter()
        .enumerate()
        .map(|(i, entries)| {
            NodeMsg::View(ViewPart {
                seq,
                base,
                time_ms,
                last_input,
                part: i as u8,
                parts,
                entries,
            })
            .encode()
        })
        .collect();
    (datagrams, unsent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use worldmesh_core::NodeId;

    #[test]
    fn messages_round_trip_and_limits_are_enforced() {
        let m = ClientMsg::Inputs {
            ack: Some(3),
            first_seq: 9,
            inputs: vec![vec![1, 2], vec![3]],
        };
        assert_eq!(ClientMsg::decode(&m.encode()), Ok(m));
        let flood = ClientMsg::Inputs {
            ack: None,
            first_seq: 0,
            inputs: vec![vec![0]; MAX_INPUTS_PER_MESSAGE + 1],
        };
        assert_eq!(
            ClientMsg::decode(&flood.encode()),
            Err(DecodeError::Limit("too many inputs"))
        );
        let big = ClientMsg::Inputs {
            ack: None,
            first_seq: 0,
            inputs: vec![vec![0; MAX_INPUT_BYTES + 1]],
        };
        assert_eq!(
            ClientMsg::decode(&big.encode()),
            Err(DecodeError::Limit("input too large"))
        );
        let mut other = ClientMsg::Disconnect.encode();
        other[1] = 9;
        assert_eq!(ClientMsg::decode(&other), Err(DecodeError::Version(9)));
        assert_eq!(ClientMsg::decode(&[]), Err(DecodeError::NotOurs));
        assert_eq!(
            ClientMsg::decode(&[0u8; MAX_DATAGRAM + 1]),
            Err(DecodeError::TooLarge(MAX_DATAGRAM + 1))
        );
    }

    #[test]
    fn views_split_into_datagrams_that_each_fit_and_decode() {
        let entries: Vec<ViewEntry> = (0..200)
            .map(|i| ViewEntry {
                id: ObjectId::new(NodeId(1), i),
                change: Change::Full(vec![7; 27]),
            })
            .collect();
        let (parts, unsent) = split_view(5, Some(4), 1000, Some(2), entries.clone());
        assert!(unsent.is_empty());
        assert!(parts.len() > 1);
        let mut back = Vec::new();
        for (i, p) in parts.iter().enumerate() {
            assert!(p.len() <= MAX_DATAGRAM, "part {i}: {} bytes", p.len());
            match NodeMsg::decode(p) {
                Ok(NodeMsg::View(v)) => {
                    assert_eq!((v.seq, v.part as usize, v.parts as usize), (5, i, parts.len()));
                    back.extend(v.entries);
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(back, entries);
        // An empty view is one part with no entries.
        assert_eq!(split_view(1, None, 0, None, Vec::new()).0.len(), 1);
        // A state that fits no datagram is left out and named.
        let huge = ViewEntry {
            id: ObjectId::new(NodeId(2), 1),
            change: Change::Full(vec![0; MAX_DATAGRAM]),
        };
        let (parts, unsent) = split_view(1, None, 0, None, vec![huge, entries[0].clone()]);
        assert_eq!((parts.len(), unsent), (1, vec![ObjectId::new(NodeId(2), 1)]));
    }

    proptest::proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(0u8..=255, 0..1300)) {
            let _ = ClientMsg::decode(&bytes);
            let _ = NodeMsg::decode(&bytes);
        }

        #[test]
        fn framed_random_bodies_never_panic(body in proptest::collection::vec(0u8..=255, 0..1000)) {
            let mut b = vec![MAGIC];
            b.extend_from_slice(&CLIENT_PROTOCOL_VERSION.to_le_bytes());
            b.extend_from_slice(&body);
            let _ = ClientMsg::decode(&b);
            let _ = NodeMsg::decode(&b);
        }
    }
}
