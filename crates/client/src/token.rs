//! Connect tokens: what lets a player onto a node.
//!
//! A game's backend (its login service) holds a [`TokenKey`] shared with the cluster and
//! issues a token per player session ([`ConnectToken::issue`], or `worldmesh token issue`).
//! The token names the player, the nodes it may connect to, when it expires and a random
//! nonce, and carries an HMAC-SHA256 tag over all of it: a node verifies it with the same
//! key ([`ConnectToken::verify`]) and refuses forged, expired and misdirected tokens with a
//! typed reason. Replays are refused by the node's session table (`node::sessions`): a
//! token already bound to a live connection cannot open a second one.
//!
//! The token carries no secret (the connection to the node is QUIC with TLS, so there is
//! no session key to hand out, unlike netcode.io's UDP tokens), so it is authenticated but
//! not encrypted: the player id and node list are readable by whoever holds the token.
//!
//! Layout (little-endian): version `u8`, player `u64`, expiry `u64` (ms since the UNIX
//! epoch), nonce `[u8; 16]`, node count `u8` (at most [`MAX_TOKEN_NODES`]), node ids
//! `u32` each, tag `[u8; 32]`.

use ring::hmac;
use std::fmt;
use worldmesh_core::NodeId;

/// Token format version.
pub const TOKEN_VERSION: u8 = 1;
/// The most nodes a token may name.
pub const MAX_TOKEN_NODES: usize = 32;
/// The longest lifetime a token may have, ms (a day): bounds what a node must remember to
/// refuse replays.
pub const MAX_TOKEN_LIFETIME_MS: u64 = 24 * 3600 * 1000;
/// Size of the key, bytes.
pub const KEY_BYTES: usize = 32;
const TAG_BYTES: usize = 32;
const HEADER_BYTES: usize = 1 + 8 + 8 + 16 + 1;
/// The largest encoded token, bytes.
pub const MAX_TOKEN_BYTES: usize = HEADER_BYTES + 4 * MAX_TOKEN_NODES + TAG_BYTES;

/// Why a token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// The bytes are not a token of this version (wrong length, version or node count).
    #[error("malformed connect token: {0}")]
    Malformed(&'static str),
    /// The tag does not match: not issued with this cluster's key, or altered.
    #[error("connect token is forged or altered (its tag does not match the cluster key)")]
    Forged,
    /// The token's lifetime is over.
    #[error("connect token expired at {expired_ms} ms (now {now_ms} ms)")]
    Expired {
        /// Its expiry, ms since the UNIX epoch.
        expired_ms: u64,
        /// The node's clock, ms since the UNIX epoch.
        now_ms: u64,
    },
    /// The token expires further ahead than [`MAX_TOKEN_LIFETIME_MS`].
    #[error("connect token lives longer than the {max_ms} ms allowed")]
    TooLong {
        /// The limit.
        max_ms: u64,
    },
    /// The token does not name this node.
    #[error("connect token is for nodes {allowed:?}, not node {node}")]
    WrongNode {
        /// This node.
        node: u32,
        /// The nodes it names.
        allowed: Vec<u32>,
    },
    /// A key file or hex string is not a key.
    #[error("client key: {0}")]
    BadKey(String),
}

/// Lower-case hex of `bytes` (how keys and tokens travel in files and on command lines).
pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of a hex string (surrounding whitespace ignored), at most `max` of them; the
/// error says what is wrong and where.
pub fn from_hex(text: &str, max: usize) -> Result<Vec<u8>, String> {
    let t = text.trim();
    if !t.len().is_multiple_of(2) {
        return Err(format!("{} hex characters: an even number is needed", t.len()));
    }
    if t.len() / 2 > max {
        return Err(format!("{} bytes of hex, at most {max} accepted", t.len() / 2));
    }
    (0..t.len())
        .step_by(2)
        .map(|i| {
            let pair = t.get(i..i + 2).unwrap_or("");
            u8::from_str_radix(pair, 16).map_err(|_| format!("`{pair}` at offset {i} is not hex"))
        })
        .collect()
}

/// The secret shared between the token issuer and the cluster's nodes.
#[derive(Clone)]
pub struct TokenKey {
    key: hmac::Key,
    raw: [u8; KEY_BYTES],
}

impl fmt::Debug for TokenKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TokenKey(..)")
    }
}

impl TokenKey {
    /// A key from its bytes.
    pub fn from_bytes(raw: [u8; KEY_BYTES]) -> Self {
        Self {
            key: hmac::Key::new(hmac::HMAC_SHA256, &raw),
            raw,
        }
    }

    /// A fresh random key from the system's secure generator.
    pub fn generate() -> Result<Self, TokenError> {
        let mut raw = [0u8; KEY_BYTES];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut raw)
            .map_err(|_| TokenError::BadKey("the system random generator failed".into()))?;
        Ok(Self::from_bytes(raw))
    }

    /// Parses the key file format: 64 hex digits (surrounding whitespace ignored).
    pub fn from_hex(text: &str) -> Result<Self, TokenError> {
        let t = text.trim();
        if t.len() != 2 * KEY_BYTES {
            return Err(TokenError::BadKey(format!(
                "expected {} hex digits, found {} characters",
                2 * KEY_BYTES,
                t.len()
            )));
        }
        let bytes = from_hex(t, KEY_BYTES).map_err(TokenError::BadKey)?;
        let mut raw = [0u8; KEY_BYTES];
        raw.copy_from_slice(&bytes);
        Ok(Self::from_bytes(raw))
    }

    /// The key file format (64 hex digits and a newline).
    pub fn to_hex(&self) -> String {
        let mut s = to_hex(&self.raw);
        s.push('\n');
        s
    }
}

/// What a token grants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectToken {
    /// The player (the game's account id).
    pub player: u64,
    /// Nodes the player may connect to (at most [`MAX_TOKEN_NODES`]; empty = none).
    pub nodes: Vec<NodeId>,
    /// Expiry, ms since the UNIX epoch.
    pub expires_ms: u64,
    /// Random, unique per token: what replay protection remembers.
    pub nonce: [u8; 16],
}

impl ConnectToken {
    /// A token for `player` on `nodes`, valid for `lifetime_ms` from `now_ms`, with a
    /// fresh random nonce.
    pub fn new(player: u64, nodes: Vec<NodeId>, now_ms: u64, lifetime_ms: u64) -> Result<Self, TokenError> {
        let mut nonce = [0u8; 16];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut nonce)
            .map_err(|_| TokenError::BadKey("the system random generator failed".into()))?;
        Ok(Self {
            player,
            nodes,
            expires_ms: now_ms.saturating_add(lifetime_ms),
            nonce,
        })
    }

    /// Signs the token with `key`: the bytes a client presents.
    pub fn issue(&self, key: &TokenKey) -> Result<Vec<u8>, TokenError> {
        if self.nodes.len() > MAX_TOKEN_NODES {
            return Err(TokenError::Malformed("more than 32 nodes"));
        }
        let mut out = Vec::with_capacity(MAX_TOKEN_BYTES);
        out.push(TOKEN_VERSION);
        out.extend_from_slice(&self.player.to_le_bytes());
        out.extend_from_slice(&self.expires_ms.to_le_bytes());
        out.extend_from_slice(&self.nonce);
        out.push(self.nodes.len() as u8);
        for n in &self.nodes {
            out.extend_from_slice(&n.0.to_le_bytes());
        }
        let tag = hmac::sign(&key.key, &out);
        out.extend_from_slice(tag.as_ref());
        Ok(out)
    }

    /// Checks `bytes` as node `node` at `now_ms`: the shape, then the tag (in constant
    /// time), then expiry, lifetime and node.
    pub fn verify(key: &TokenKey, bytes: &[u8], node: NodeId, now_ms: u64) -> Result<Self, TokenError> {
        if bytes.len() < HEADER_BYTES + TAG_BYTES || bytes.len() > MAX_TOKEN_BYTES {
            return Err(TokenError::Malformed("wrong length"));
        }
        let (body, tag) = bytes.split_at(bytes.len() - TAG_BYTES);
        if body[0] != TOKEN_VERSION {
            return Err(TokenError::Malformed("unknown version"));
        }
        let count = usize::from(body[HEADER_BYTES - 1]);
        if count > MAX_TOKEN_NODES || body.len() != HEADER_BYTES + 4 * count {
            return Err(TokenError::Malformed("node count does not match the length"));
        }
        hmac::verify(&key.key, body, tag).map_err(|_| TokenError::Forged)?;
        let u64_at = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&body[at..at + 8]);
            u64::from_le_bytes(b)
        };
        let mut nonce = [0u8; 16];
        nonce.copy_from_slice(&body[17..33]);
        let nodes: Vec<NodeId> = body[HEADER_BYTES..]
            .chunks_exact(4)
            .map(|c| NodeId(u32::from_le_bytes([c[0], c[1], c[2], c[3]])))
            .collect();
        let t = Self {
            player: u64_at(1),
            expires_ms: u64_at(9),
            nonce,
            nodes,
        };
        if t.expires_ms <= now_ms {
            return Err(TokenError::Expired {
                expired_ms: t.expires_ms,
                now_ms,
            });
        }
        if t.expires_ms - now_ms > MAX_TOKEN_LIFETIME_MS {
            return Err(TokenError::TooLong {
                max_ms: MAX_TOKEN_LIFETIME_MS,
            });
        }
        if !t.nodes.contains(&node) {
            return Err(TokenError::WrongNode {
                node: node.0,
                allowed: t.nodes.iter().map(|n| n.0).collect(),
            });
        }
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(b: u8) -> TokenKey {
        TokenKey::from_bytes([b; KEY_BYTES])
    }

    fn token() -> ConnectToken {
        ConnectToken {
            player: 42,
            nodes: vec![NodeId(1), NodeId(3)],
            expires_ms: 10_000,
            nonce: [7; 16],
        }
    }

    #[test]
    fn a_token_verifies_on_the_nodes_it_names_until_it_expires() {
        let bytes = token().issue(&key(1)).unwrap();
        assert_eq!(bytes.len(), HEADER_BYTES + 8 + TAG_BYTES);
        assert_eq!(
            ConnectToken::verify(&key(1), &bytes, NodeId(3), 9_999),
            Ok(token())
        );
        assert_eq!(
            ConnectToken::verify(&key(1), &bytes, NodeId(2), 5_000),
            Err(TokenError::WrongNode {
                node: 2,
                allowed: vec![1, 3]
            })
        );
        assert_eq!(
            ConnectToken::verify(&key(1), &bytes, NodeId(1), 10_000),
            Err(TokenError::Expired {
                expired_ms: 10_000,
                now_ms: 10_000
            })
        );
    }

    #[test]
    fn another_key_or_any_changed_byte_is_forged() {
        let bytes = token().issue(&key(1)).unwrap();
        assert_eq!(
            ConnectToken::verify(&key(2), &bytes, NodeId(1), 0),
            Err(TokenError::Forged)
        );
        // Flip each bit of the body and the tag: never accepted (shape errors are fine).
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut b = bytes.clone();
                b[i] ^= 1 << bit;
                assert!(
                    ConnectToken::verify(&key(1), &b, NodeId(1), 0).is_err(),
                    "byte {i} bit {bit}"
                );
            }
        }
        // A token for another player, re-tagged without the key: still forged.
        let mut other = bytes.clone();
        other[1] = 43;
        assert_eq!(
            ConnectToken::verify(&key(1), &other, NodeId(1), 0),
            Err(TokenError::Forged)
        );
    }

    #[test]
    fn malformed_and_overlong_tokens_are_refused() {
        for len in [0, 1, HEADER_BYTES + TAG_BYTES - 1, MAX_TOKEN_BYTES + 1] {
            assert!(matches!(
                ConnectToken::verify(&key(1), &vec![TOKEN_VERSION; len], NodeId(1), 0),
                Err(TokenError::Malformed(_))
            ));
        }
        let mut t = token();
        t.expires_ms = MAX_TOKEN_LIFETIME_MS + 1;
        let bytes = t.issue(&key(1)).unwrap();
        assert_eq!(
            ConnectToken::verify(&key(1), &bytes, NodeId(1), 0),
            Err(TokenError::TooLong {
                max_ms: MAX_TOKEN_LIFETIME_MS
            })
        );
        t.nodes = (0..33).map(NodeId).collect();
        assert!(t.issue(&key(1)).is_err());
    }

    #[test]
    fn keys_round_trip_through_hex_and_bad_hex_is_named() {
        let k = TokenKey::generate().unwrap();
        let back = TokenKey::from_hex(&k.to_hex()).unwrap();
        assert_eq!(back.raw, k.raw);
        let e = TokenKey::from_hex("zz").unwrap_err().to_string();
        assert!(e.contains("expected 64 hex digits"), "{e}");
        let e = TokenKey::from_hex(&"g".repeat(64)).unwrap_err().to_string();
        assert!(e.contains("`gg` at offset 0 is not hex"), "{e}");
    }

    #[test]
    fn hex_round_trips_and_bad_hex_says_where() {
        let b = vec![0u8, 1, 0xab, 0xff];
        assert_eq!(from_hex(&format!(" {}\n", to_hex(&b)), 4), Ok(b));
        assert_eq!(
            from_hex("abc", 4),
            Err("3 hex characters: an even number is needed".into())
        );
        assert_eq!(
            from_hex("0011", 1),
            Err("2 bytes of hex, at most 1 accepted".into())
        );
        assert_eq!(from_hex("00zz", 4), Err("`zz` at offset 2 is not hex".into()));
        assert!(
            from_hex("0é", 4).is_err(),
            "a multi-byte character is refused, not sliced"
        );
    }

    proptest::proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(0u8..=255, 0..300)) {
            let _ = ConnectToken::verify(&key(1), &bytes, NodeId(1), 0);
        }
    }
}
