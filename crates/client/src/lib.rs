//! # worldmesh-client
//!
//! Players on their own machines (issue 16): how they are let in, what they send, what
//! they see, and how a client smooths it.
//!
//! - [`token`]: connect tokens, issued by the game's backend with a key shared with the
//!   cluster, verified by nodes (HMAC-SHA256; forged, expired and misdirected tokens are
//!   refused with a typed reason).
//! - [`proto`]: the client protocol's datagrams and their bounded codec.
//! - [`Playable`]: what a game adds to its object type so a player can drive an avatar.
//! - [`Client`]: the client side of the protocol, sans-IO (datagrams and time in,
//!   datagrams, events and a typed view out); the node side lives in `node::sessions`.
//! - [`sdk`]: interpolation of remote objects between views, prediction of the player's
//!   own avatar with reconciliation.
//!
//! The crate does no I/O and reads no clock.
#![forbid(unsafe_code)]

pub mod client;
pub mod playable;
pub mod proto;
pub mod sdk;
pub mod token;

pub use client::{Client, ClientConfig, ClientEvent, ClientState, ClientStats, View};
pub use playable::Playable;
pub use token::{ConnectToken, TokenError, TokenKey};
