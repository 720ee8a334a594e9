//! Errors of the assignment library.

use crate::PlayerId;

/// Why an assignment operation was refused. The assignment is unchanged when an error is
/// returned.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AssignError {
    /// A delay is NaN, infinite, negative or absurdly large.
    #[error("delay {value} ms is not a finite value in [0, 1e7] ms")]
    BadDelay {
        /// The value given.
        value: f64,
    },
    /// Resource figures for the capacity model are negative, non-finite or zero divisors.
    #[error("resource model values must be finite and non-negative, with b > 0 and L_c > 0")]
    BadResources,
    /// A player's delay row has the wrong length.
    #[error("player {player} has {got} delays but there are {mirrors} mirrors")]
    WrongRowLength {
        /// The player.
        player: PlayerId,
        /// Delays given.
        got: usize,
        /// Mirrors in the system.
        mirrors: usize,
    },
    /// The player is already assigned.
    #[error("player {0} has already joined")]
    DuplicateJoin(PlayerId),
    /// The player is not assigned.
    #[error("player {0} is not connected")]
    NotConnected(PlayerId),
    /// Every mirror is at capacity: the joining player cannot be placed (paper `002` §2.2
    /// constraint (ii) would be violated).
    #[error("all mirrors are full ({capacity} players): cannot place player {player}")]
    AllFull {
        /// The player refused.
        player: PlayerId,
        /// Total capacity of all mirrors.
        capacity: u64,
    },
    /// There are no mirrors.
    #[error("there are no mirrors")]
    NoMirrors,
    /// More mirrors than [`crate::MAX_MIRRORS`]: the optimal algorithm's move index holds
    /// one heap per ordered mirror pair, so its memory grows with the square of the mirror
    /// count. Refused before anything is allocated.
    #[error(
        "{mirrors} mirrors is more than the {limit} supported (the move index keeps one heap per \
         mirror pair: memory grows with the square of the mirror count)"
    )]
    TooManyMirrors {
        /// Mirrors given.
        mirrors: usize,
        /// The limit.
        limit: usize,
    },
    /// A mirror index is out of range.
    #[error("mirror {mirror} does not exist ({mirrors} mirrors)")]
    NoSuchMirror {
        /// Index given.
        mirror: usize,
        /// Number of mirrors.
        mirrors: usize,
    },
    /// A given initial assignment puts more players on a mirror than its capacity.
    #[error("mirror {mirror} would hold {load} players but its capacity is {capacity}")]
    OverCapacity {
        /// The mirror.
        mirror: usize,
        /// Players given.
        load: u64,
        /// Its capacity.
        capacity: u32,
    },
    /// J-SA / L-SA need an optimal assignment as input (paper `002` §3.2: "J-SA (L-SA)
    /// requires optimal CMA_n"); the given one admits a cheaper re-assignment.
    #[error("the given assignment is not optimal; J-SA/L-SA need an optimal starting point")]
    NotOptimal,
    /// Too many players for the internal 32-bit slot index.
    #[error("too many players (limit {limit})")]
    TooManyPlayers {
        /// The limit.
        limit: usize,
    },
}
