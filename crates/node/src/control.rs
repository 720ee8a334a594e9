//! Control datagrams: one message class, several protocols.
//!
//! Everything that is neither object state, locator traffic nor migration travels as
//! [`MessageClass::Control`] (paper `000` §6.3's "other" traffic): the membership protocol
//! and the game-instance failover protocol. The first payload byte names the protocol (its
//! [`Channel`]); the rest is that protocol's own encoding.

use worldmesh_core::MessageClass;
use worldmesh_core::wire::{self, WireError};

/// Which protocol a Control datagram belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Channel {
    /// Game-instance failover (paper `003`; [`crate::instance`]).
    Instance = 0,
    /// SWIM membership ([`crate::membership`]).
    Membership = 1,
    /// The players' layer between nodes: assignment reports and moves
    /// ([`crate::assignment`]), delivered to the session table as
    /// [`crate::Event::Players`].
    Players = 2,
}

impl Channel {
    fn from_u8(b: u8) -> Option<Self> {
        match b {
            0 => Some(Self::Instance),
            1 => Some(Self::Membership),
            2 => Some(Self::Players),
            _ => None,
        }
    }
}

/// A complete Control datagram carrying `payload` on `channel`.
pub fn frame(channel: Channel, payload: &[u8]) -> Result<Vec<u8>, WireError> {
    wire::frame_with(MessageClass::Control, payload.len() + 1, |out| {
        out.push(channel as u8);
        out.extend_from_slice(payload);
    })
}

/// Splits a Control frame's payload into its channel and the protocol's bytes.
pub fn split(payload: &[u8]) -> Option<(Channel, &[u8])> {
    let (&c, rest) = payload.split_first()?;
    Some((Channel::from_u8(c)?, rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use worldmesh_core::wire::{Frame, MAX_PAYLOAD};

    #[test]
    fn channels_round_trip_and_unknown_ones_are_refused() {
        for c in [Channel::Instance, Channel::Membership, Channel::Players] {
            let d = frame(c, &[7, 8, 9]).unwrap();
            let f = Frame::parse(&d, MAX_PAYLOAD).unwrap();
            assert_eq!(f.class, MessageClass::Control);
            assert_eq!(split(f.payload), Some((c, &[7u8, 8, 9][..])));
        }
        assert_eq!(split(&[]), None);
        assert_eq!(split(&[3, 1]), None);
    }
}
