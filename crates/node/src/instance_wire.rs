//! Wire form of the instance failover messages (paper `003` §3.2.1, Algorithms 3 and 4).
//!
//! The protocol messages are [`worldmesh_instances::failover::Msg`] (a pure library type
//! without a wire format). On the wire they travel as [`MessageClass::Control`] datagrams
//! (`core::wire` header + bitcode payload) holding one [`ControlEnvelope`]: the instance it
//! belongs to and a [`WireMsg`], a field-for-field bitcode mirror of `Msg`. Decoding is
//! typed and bounded twice: bitcode bounds every length by the bytes present (a datagram is
//! at most `MAX_PAYLOAD` bytes), and [`WireMsg::into_msg`] then refuses lists longer than
//! the limits below and member ids that cannot be nodes, with a typed [`WireMsgError`].
//!
//! [`MessageClass::Control`]: worldmesh_core::MessageClass::Control

use std::collections::BTreeMap;
use worldmesh_instances::failover::{CLUSTER, GameState, Msg, PeerId, Progress};

/// Most members (and ranking entries, and players in a state) one message may list.
pub const MAX_MEMBERS: usize = 1024;
/// Most inputs one input message may carry (the state machine uses at most its
/// `max_batch` of them).
pub const MAX_INPUTS: usize = 1024;

/// A complete Control datagram carrying `payload` (an encoded [`ControlEnvelope`], or any
/// bytes a test wants the node to see) on the instance channel.
pub fn datagram(payload: &[u8]) -> Result<Vec<u8>, worldmesh_core::WireError> {
    crate::control::frame(crate::control::Channel::Instance, payload)
}

/// One Control datagram of the failover protocol.
#[derive(Clone, Debug, PartialEq, Eq, bitcode::Encode, bitcode::Decode)]
pub struct ControlEnvelope {
    /// The game instance (auxiliary game) the message belongs to.
    pub instance: u32,
    /// The message.
    pub msg: WireMsg,
}

/// Bitcode mirror of [`Msg`]; see that type for the meaning of every field.
#[derive(Clone, Debug, PartialEq, Eq, bitcode::Encode, bitcode::Decode)]
#[allow(missing_docs)]
pub enum WireMsg {
    /// [`Msg::Snapshot`]; the state's players as `(player, seq, digest)`.
    Snapshot {
        epoch: u64,
        key: (u64, u64),
        tick: u64,
        players: Vec<(u32, u64, u64)>,
        members: Vec<u32>,
        base: Vec<u32>,
        ranking: Vec<u32>,
        committed: u64,
    },
    /// [`Msg::SnapshotAck`].
    SnapshotAck { epoch: u64, tick: u64 },
    /// [`Msg::Update`].
    Update {
        epoch: u64,
        key: (u64, u64),
        tick: u64,
        replica: Option<u32>,
        committed: u64,
        confirmed: u64,
    },
    /// [`Msg::Input`].
    Input {
        epoch: u64,
        known: (u64, u64),
        inputs: Vec<(u64, u64)>,
    },
    /// [`Msg::Beat`].
    Beat { epoch: u64 },
    /// [`Msg::Claim`].
    Claim {
        epoch: u64,
        key: (u64, u64),
        state_tick: u64,
    },
    /// [`Msg::Vote`].
    Vote { epoch: u64, granted: bool },
    /// [`Msg::NewerEpoch`].
    NewerEpoch { epoch: u64, server: Option<u32> },
    /// [`Msg::Status`].
    Status {
        epoch: u64,
        replica: Option<u32>,
        members: u32,
        tick: u64,
    },
}

/// Why a decoded message is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireMsgError {
    /// A list is longer than its limit.
    #[error("{what} lists {len} entries (limit {limit})")]
    TooLong {
        /// Which list.
        what: &'static str,
        /// Its length.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// A member id that is reserved (the cluster address).
    #[error("{what} names the reserved id {id}")]
    ReservedId {
        /// Which field.
        what: &'static str,
        /// The id.
        id: u32,
    },
    /// The same player appears twice in a snapshot's state.
    #[error("snapshot lists player {0} twice")]
    DuplicatePlayer(u32),
}

fn check_ids(what: &'static str, ids: &[u32]) -> Result<(), WireMsgError> {
    if ids.len() > MAX_MEMBERS {
        return Err(WireMsgError::TooLong {
            what,
            len: ids.len(),
            limit: MAX_MEMBERS,
        });
    }
    match ids.iter().find(|&&id| id == CLUSTER) {
        Some(&id) => Err(WireMsgError::ReservedId { what, id }),
        None => Ok(()),
    }
}

fn check_opt(what: &'static str, id: Option<u32>) -> Result<Option<PeerId>, WireMsgError> {
    match id {
        Some(CLUSTER) => Err(WireMsgError::ReservedId { what, id: CLUSTER }),
        other => Ok(other),
    }
}

impl From<&Msg> for WireMsg {
    fn from(m: &Msg) -> Self {
        match m.clone() {
            Msg::Snapshot {
                epoch,
                key,
                state,
                members,
                base,
                ranking,
                committed,
            } => WireMsg::Snapshot {
                epoch,
                key,
                tick: state.tick,
                players: state
                    .players
                    .iter()
                    .map(|(&p, pr)| (p, pr.seq, pr.digest))
                    .collect(),
                members,
                base,
                ranking,
                committed,
            },
            Msg::SnapshotAck { epoch, tick } => WireMsg::SnapshotAck { epoch, tick },
            Msg::Update {
                epoch,
                key,
                tick,
                replica,
                committed,
                confirmed,
            } => WireMsg::Update {
                epoch,
                key,
                tick,
                replica,
                committed,
                confirmed,
            },
            Msg::Input { epoch, known, inputs } => WireMsg::Input { epoch, known, inputs },
            Msg::Beat { epoch } => WireMsg::Beat { epoch },
            Msg::Claim {
                epoch,
                key,
                state_tick,
            } => WireMsg::Claim {
                epoch,
                key,
                state_tick,
            },
            Msg::Vote { epoch, granted } => WireMsg::Vote { epoch, granted },
            Msg::NewerEpoch { epoch, server } => WireMsg::NewerEpoch { epoch, server },
            Msg::Status {
                epoch,
                replica,
                members,
                tick,
            } => WireMsg::Status {
                epoch,
                replica,
                members,
                tick,
            },
        }
    }
}

impl WireMsg {
    /// The protocol message, after checking the limits (untrusted input: never panics).
    pub fn into_msg(self) -> Result<Msg, WireMsgError> {
        Ok(match self {
            WireMsg::Snapshot {
                epoch,
                key,
                tick,
                players,
                members,
                base,
                ranking,
                committed,
            } => {
                check_ids("snapshot members", &members)?;
                check_ids("snapshot base", &base)?;
                check_ids("snapshot ranking", &ranking)?;
                if players.len() > MAX_MEMBERS {
                    return Err(WireMsgError::TooLong {
                        what: "snapshot players",
                        len: players.len(),
                        limit: MAX_MEMBERS,
                    });
                }
                let mut map = BTreeMap::new();
                for (p, seq, digest) in players {
                    if map.insert(p, Progress { seq, digest }).is_some() {
                        return Err(WireMsgError::DuplicatePlayer(p));
                    }
                }
                Msg::Snapshot {
                    epoch,
                    key,
                    state: GameState { tick, players: map },
                    members,
                    base,
                    ranking,
                    committed,
                }
            }
            WireMsg::SnapshotAck { epoch, tick } => Msg::SnapshotAck { epoch, tick },
            WireMsg::Update {
                epoch,
                key,
                tick,
                replica,
                committed,
                confirmed,
            } => Msg::Update {
                epoch,
                key,
                tick,
                replica: check_opt("update replica", replica)?,
                committed,
                confirmed,
            },
            WireMsg::Input { epoch, known, inputs } => {
                if inputs.len() > MAX_INPUTS {
                    return Err(WireMsgError::TooLong {
                        what: "input batch",
                        len: inputs.len(),
                        limit: MAX_INPUTS,
                    });
                }
                Msg::Input { epoch, known, inputs }
            }
            WireMsg::Beat { epoch } => Msg::Beat { epoch },
            WireMsg::Claim {
                epoch,
                key,
                state_tick,
            } => Msg::Claim {
                epoch,
                key,
                state_tick,
            },
            WireMsg::Vote { epoch, granted } => Msg::Vote { epoch, granted },
            WireMsg::NewerEpoch { epoch, server } => Msg::NewerEpoch {
                epoch,
                server: check_opt("newer-epoch server", server)?,
            },
            WireMsg::Status {
                epoch,
                replica,
                members,
                tick,
            } => Msg::Status {
                epoch,
                replica: check_opt("status replica", replica)?,
                members,
                tick,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples() -> Vec<Msg> {
        let state = GameState {
            tick: 7,
            players: [(1, Progress { seq: 3, digest: 99 }), (4, Progress::default())]
                .into_iter()
                .collect(),
        };
        vec![
            Msg::Snapshot {
                epoch: 2,
                key: (2, 1),
                state,
                members: vec![0, 1, 4],
                base: vec![0, 1],
                ranking: vec![1, 4, 0],
                committed: 5,
            },
            Msg::SnapshotAck { epoch: 2, tick: 7 },
            Msg::Update {
                epoch: 2,
                key: (2, 1),
                tick: 7,
                replica: Some(4),
                committed: 5,
                confirmed: 3,
            },
            Msg::Input {
                epoch: 2,
                known: (2, 1),
                inputs: vec![(4, 11), (5, 12)],
            },
            Msg::Beat { epoch: 2 },
            Msg::Claim {
                epoch: 3,
                key: (2, 1),
                state_tick: 7,
            },
            Msg::Vote {
                epoch: 3,
                granted: true,
            },
            Msg::NewerEpoch {
                epoch: 3,
                server: None,
            },
            Msg::Status {
                epoch: 2,
                replica: Some(1),
                members: 3,
                tick: 7,
            },
        ]
    }

    #[test]
    fn every_message_round_trips_through_bitcode() {
        for m in samples() {
            let env = ControlEnvelope {
                instance: 9,
                msg: WireMsg::from(&m),
            };
            let bytes = bitcode::encode(&env);
            let back: ControlEnvelope = bitcode::decode(&bytes).unwrap();
            assert_eq!(back.instance, 9);
            assert_eq!(back.msg.into_msg().unwrap(), m);
        }
    }

    #[test]
    fn limits_and_reserved_ids_are_refused() {
        let long = WireMsg::Input {
            epoch: 1,
            known: (1, 0),
            inputs: vec![(1, 1); MAX_INPUTS + 1],
        };
        assert!(matches!(long.into_msg(), Err(WireMsgError::TooLong { .. })));
        let reserved = WireMsg::NewerEpoch {
            epoch: 1,
            server: Some(CLUSTER),
        };
        assert!(matches!(
            reserved.into_msg(),
            Err(WireMsgError::ReservedId { .. })
        ));
        let dup = WireMsg::Snapshot {
            epoch: 1,
            key: (1, 0),
            tick: 1,
            players: vec![(3, 1, 1), (3, 2, 2)],
            members: vec![],
            base: vec![],
            ranking: vec![],
            committed: 0,
        };
        assert_eq!(dup.into_msg(), Err(WireMsgError::DuplicatePlayer(3)));
        let members = WireMsg::Snapshot {
            epoch: 1,
            key: (1, 0),
            tick: 1,
            players: vec![],
            members: vec![0; MAX_MEMBERS + 1],
            base: vec![],
            ranking: vec![],
            committed: 0,
        };
        assert!(matches!(members.into_msg(), Err(WireMsgError::TooLong { .. })));
    }
}
