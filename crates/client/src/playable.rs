//! What a game adds to its object type so that players can connect.

use std::fmt::Debug;
use worldmesh_replica::GameObject;

/// A game object type players can control through the client protocol.
///
/// `PartialEq` lets the node send only the objects that changed since the client's last
/// acknowledged view. A view holds the objects whose position lies in the avatar's
/// [`GameObject::interest`] box and that [`GameObject::is_interested`] accepts: the node
/// finds candidates through a grid over the box, so `is_interested` may narrow the box but
/// never reach beyond it.
///
/// A connected player owns exactly one object, its **avatar**: a primary on the node the
/// player connects to. The player sends **inputs** (intents: a move direction, fire), never
/// states; the node turns each input into a write to the avatar only
/// ([`Playable::input_write`]), and the avatar's think decides what the input may do
/// (speed, fire rate, walls): a client cannot move faster than the game allows, write
/// another object, or choose what it sees, since its view is derived from the avatar's
/// area of interest on the node (paper `000` §3: writes go to the primary, which
/// serializes them).
pub trait Playable: GameObject + PartialEq {
    /// One input of a player, as the client sends it (bounded in size by the protocol).
    type Input: Clone + Debug + Send + bitcode::Encode + bitcode::DecodeOwned + 'static;

    /// The avatar of a player who has just connected to a node.
    fn spawn_avatar(world: &Self::World, player: u64) -> Self;

    /// The write that applies input number `seq` to the player's avatar. The avatar must
    /// apply each sequence number at most once (ignore one not newer than
    /// [`Playable::last_input`]): after a hand-off the client resends unconfirmed inputs
    /// through the new node, and only the primary knows which it already applied.
    fn input_write(input: &Self::Input, seq: u32) -> Self::Write;

    /// The write that tells the avatar its player has left (the avatar removes itself).
    fn leave_write() -> Self::Write;

    /// The player driving this object, if it is a live avatar: how a node finds the avatar
    /// of a player who reconnects or is handed over to it.
    fn player(&self) -> Option<u64>;

    /// The sequence number of the last input this avatar applied (`None` if it is not
    /// player-controlled): what the client reconciles its prediction against.
    fn last_input(&self) -> Option<u32>;
}
