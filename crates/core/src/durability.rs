//! Durability classes of game objects (issue 19, "Durable worlds").
//!
//! Not every object deserves the disk: a missile lives a few seconds and is cheaper to lose
//! than to persist; an avatar should come back after a crash close to where it was; a
//! structure a player built must never be lost once the game told the player it exists.
//! Each object declares one class, and the node's persistence (the per-node store,
//! `worldmesh-store`) treats it accordingly:
//!
//! | class | persisted | a crash loses |
//! |---|---|---|
//! | [`Durability::Ephemeral`] | never | the object |
//! | [`Durability::Checkpointed`] | in batches every N frames, off the frame's critical path | changes since the last checkpoint |
//! | [`Durability::Durable`] | every write logged and persisted before it is acknowledged | nothing acknowledged |
//!
//! The class lives here, in the bottom layer, so that both game objects (`replica`) and the
//! store can name it without depending on each other.

use serde::{Deserialize, Serialize};
use std::fmt;

/// How much of an object survives a crash of the node holding its primary.
#[derive(
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Debug,
    Default,
    Serialize,
    Deserialize,
    bitcode::Encode,
    bitcode::Decode,
)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    /// Never persisted (missiles, effects): lost with its node, re-created by the game.
    #[default]
    Ephemeral,
    /// Persisted with the node's periodic checkpoints (avatars): a crash loses at most the
    /// changes since the last checkpoint.
    Checkpointed,
    /// Every acknowledged write is on disk (player-built structures): a write is
    /// acknowledged only after it is persisted.
    Durable,
}

impl Durability {
    /// Every class, in order of increasing durability.
    pub const ALL: [Durability; 3] = [
        Durability::Ephemeral,
        Durability::Checkpointed,
        Durability::Durable,
    ];

    /// The class's one-byte code in persisted records (stable: part of the store's format).
    pub const fn code(self) -> u8 {
        match self {
            Durability::Ephemeral => 0,
            Durability::Checkpointed => 1,
            Durability::Durable => 2,
        }
    }

    /// The class with code `code`, if there is one.
    pub const fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(Durability::Ephemeral),
            1 => Some(Durability::Checkpointed),
            2 => Some(Durability::Durable),
            _ => None,
        }
    }

    /// The class's name as written in files and tables (`ephemeral`, `checkpointed`,
    /// `durable`).
    pub const fn name(self) -> &'static str {
        match self {
            Durability::Ephemeral => "ephemeral",
            Durability::Checkpointed => "checkpointed",
            Durability::Durable => "durable",
        }
    }
}

impl fmt::Display for Durability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_unknown_codes_are_refused() {
        for d in Durability::ALL {
            assert_eq!(Durability::from_code(d.code()), Some(d));
        }
        for code in 3..=u8::MAX {
            assert_eq!(Durability::from_code(code), None, "code {code}");
        }
        assert_eq!(Durability::default(), Durability::Ephemeral);
    }
}
