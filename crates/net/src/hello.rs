//! The `Hello` two members exchange after the TLS handshake (issue 13, items 2 and 8).
//!
//! TLS proves that the peer holds *a* certificate of the cluster CA; the `Hello` says which
//! member it claims to be, and the transport accepts the claim only if the certificate
//! names that member (`node-<ID>.worldmesh`). It also carries what must agree for two
//! processes to share a world: the protocol version, and the world settings (players,
//! map, seed, locator, frame rate, …) compared key by key, so that a refusal can say which
//! setting differs. `generation` is the process incarnation: a node restarted with the
//! same id comes back with a larger one and is treated as a new member.
//!
//! ```text
//! offset 0  3 bytes  magic "WMH"
//! offset 3  1 byte   HELLO_VERSION (the layout of this frame)
//! offset 4  2 bytes  payload length, little endian, at most MAX_HELLO_PAYLOAD
//! offset 6  payload  bitcode (=0.6.9) of the hello fields
//! ```
//!
//! Decoding never trusts the peer: the header is checked before any allocation, bitcode
//! bounds its lengths by the input, and the decoded settings are bounded in number and
//! size. Every failure is a typed [`HelloError`].

use std::fmt;
use std::net::SocketAddr;

use worldmesh_core::NodeId;

/// Magic of a hello frame.
pub const HELLO_MAGIC: [u8; 3] = *b"WMH";
/// Layout version of the hello frame.
pub const HELLO_VERSION: u8 = 1;
/// Header length of a hello frame.
pub const HELLO_HEADER_LEN: usize = 6;
/// Largest hello payload accepted (16 KiB).
pub const MAX_HELLO_PAYLOAD: usize = 16 * 1024;
/// Most world settings a hello may carry.
pub const MAX_WORLD_SETTINGS: usize = 64;
/// Longest world setting key, in bytes.
pub const MAX_SETTING_KEY: usize = 64;
/// Longest world setting value, in bytes.
pub const MAX_SETTING_VALUE: usize = 256;

/// What a member says about itself when a connection opens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    /// The worldmesh wire protocol version it speaks (`core::wire::PROTOCOL_VERSION`).
    pub protocol: u8,
    /// The member it claims to be (must match its certificate).
    pub node: NodeId,
    /// Its process incarnation: larger after a restart.
    pub generation: u64,
    /// The address other members should dial it at.
    pub advertise: SocketAddr,
    /// World settings, compared key by key with every peer's.
    pub world: Vec<(String, String)>,
}

/// A peer's verified hello and the address its connection comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerHello {
    /// What the peer said (its `node` is proven by its certificate).
    pub hello: Hello,
    /// The UDP address its packets come from.
    pub remote: SocketAddr,
}

#[derive(bitcode::Encode, bitcode::Decode)]
struct HelloWire {
    protocol: u8,
    node: u32,
    generation: u64,
    advertise: SocketAddr,
    world: Vec<(String, String)>,
}

/// Why a hello frame was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HelloError {
    /// Fewer bytes than the header, or than the header declares.
    #[error("truncated hello: {got} bytes, need {need}")]
    Truncated {
        /// Bytes present.
        got: usize,
        /// Bytes needed.
        need: usize,
    },
    /// Not a hello frame.
    #[error("not a worldmesh hello (bad magic {0:02x?})")]
    BadMagic([u8; 3]),
    /// A hello layout this build does not read.
    #[error("unsupported hello version {got} (this build speaks {HELLO_VERSION})")]
    UnsupportedVersion {
        /// The version in the header.
        got: u8,
    },
    /// The declared payload is larger than [`MAX_HELLO_PAYLOAD`].
    #[error("oversize hello: {declared} bytes declared, limit {MAX_HELLO_PAYLOAD}")]
    Oversize {
        /// Declared length.
        declared: usize,
    },
    /// Bytes after the declared payload.
    #[error("hello has {extra} bytes after its payload")]
    Trailing {
        /// Extra bytes.
        extra: usize,
    },
    /// The payload does not decode.
    #[error("malformed hello payload: {0}")]
    Malformed(String),
    /// Too many world settings.
    #[error("hello carries {0} world settings, limit {MAX_WORLD_SETTINGS}")]
    TooManySettings(usize),
    /// A setting key or value too long.
    #[error(
        "world setting {key:?} is too long (key limit {MAX_SETTING_KEY}, value limit {MAX_SETTING_VALUE} bytes)"
    )]
    SettingTooLong {
        /// The key (truncated for display).
        key: String,
    },
    /// The same setting twice.
    #[error("world setting {0:?} appears twice")]
    DuplicateSetting(String),
}

impl HelloError {
    /// True if the frame is well formed but speaks another version (refused as `version`,
    /// not as `malformed_hello`).
    pub fn is_version(&self) -> bool {
        matches!(self, HelloError::UnsupportedVersion { .. })
    }
}

/// The first world setting two hellos disagree on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorldDifference {
    /// The setting.
    pub key: String,
    /// Our value (None: we do not set it).
    pub ours: Option<String>,
    /// Their value (None: they do not set it).
    pub theirs: Option<String>,
}

impl fmt::Display for WorldDifference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = |x: &Option<String>| x.clone().unwrap_or_else(|| "(not set)".into());
        write!(
            f,
            "world setting {:?} differs: ours {}, theirs {}",
            self.key,
            v(&self.ours),
            v(&self.theirs)
        )
    }
}

fn check_settings(world: &[(String, String)]) -> Result<(), HelloError> {
    if world.len() > MAX_WORLD_SETTINGS {
        return Err(HelloError::TooManySettings(world.len()));
    }
    let mut keys: Vec<&str> = Vec::with_capacity(world.len());
    for (k, v) in world {
        if k.len() > MAX_SETTING_KEY || v.len() > MAX_SETTING_VALUE {
            return Err(HelloError::SettingTooLong {
                key: k.chars().take(MAX_SETTING_KEY).collect(),
            });
        }
        keys.push(k);
    }
    keys.sort_unstable();
    if let Some(w) = keys.windows(2).find(|w| w[0] == w[1]) {
        return Err(HelloError::DuplicateSetting(w[0].to_owned()));
    }
    Ok(())
}

impl Hello {
    /// Encodes the hello as a frame. Fails only if our own settings break the bounds
    /// (too many, too long, duplicated) — a configuration error to report at start-up.
    pub fn encode(&self) -> Result<Vec<u8>, HelloError> {
        check_settings(&self.world)?;
        let payload = bitcode::encode(&HelloWire {
            protocol: self.protocol,
            node: self.node.0,
            generation: self.generation,
            advertise: self.advertise,
            world: self.world.clone(),
        });
        if payload.len() > MAX_HELLO_PAYLOAD {
            return Err(HelloError::Oversize {
                declared: payload.len(),
            });
        }
        let mut out = Vec::with_capacity(HELLO_HEADER_LEN + payload.len());
        out.extend_from_slice(&HELLO_MAGIC);
        out.push(HELLO_VERSION);
        out.extend_from_slice(&(payload.len() as u16).to_le_bytes());
        out.extend_from_slice(&payload);
        Ok(out)
    }

    /// Checks a frame header and returns the payload length that follows it.
    pub fn payload_len(header: &[u8]) -> Result<usize, HelloError> {
        if header.len() < HELLO_HEADER_LEN {
            return Err(HelloError::Truncated {
                got: header.len(),
                need: HELLO_HEADER_LEN,
            });
        }
        let magic = [header[0], header[1], header[2]];
        if magic != HELLO_MAGIC {
            return Err(HelloError::BadMagic(magic));
        }
        if header[3] != HELLO_VERSION {
            return Err(HelloError::UnsupportedVersion { got: header[3] });
        }
        let declared = usize::from(u16::from_le_bytes([header[4], header[5]]));
        if declared > MAX_HELLO_PAYLOAD {
            return Err(HelloError::Oversize { declared });
        }
        Ok(declared)
    }

    /// Decodes a complete frame (header and payload, nothing after).
    pub fn decode(frame: &[u8]) -> Result<Hello, HelloError> {
        let len = Self::payload_len(frame)?;
        let need = HELLO_HEADER_LEN + len;
        if frame.len() < need {
            return Err(HelloError::Truncated {
                got: frame.len(),
                need,
            });
        }
        if frame.len() > need {
            return Err(HelloError::Trailing {
                extra: frame.len() - need,
            });
        }
        Self::decode_payload(&frame[HELLO_HEADER_LEN..])
    }

    /// Decodes a payload whose header [`Hello::payload_len`] accepted.
    pub fn decode_payload(payload: &[u8]) -> Result<Hello, HelloError> {
        let w: HelloWire = bitcode::decode(payload).map_err(|e| HelloError::Malformed(e.to_string()))?;
        check_settings(&w.world)?;
        Ok(Hello {
            protocol: w.protocol,
            node: NodeId(w.node),
            generation: w.generation,
            advertise: w.advertise,
            world: w.world,
        })
    }

    /// The first setting (by key order) on which `theirs` differs from ours, if any.
    pub fn world_difference(&self, theirs: &Hello) -> Option<WorldDifference> {
        let mut keys: Vec<&str> = self
            .world
            .iter()
            .chain(&theirs.world)
            .map(|(k, _)| k.as_str())
            .collect();
        keys.sort_unstable();
        keys.dedup();
        let get = |w: &[(String, String)], k: &str| w.iter().find(|(x, _)| x == k).map(|(_, v)| v.clone());
        keys.into_iter().find_map(|k| {
            let ours = get(&self.world, k);
            let them = get(&theirs.world, k);
            (ours != them).then(|| WorldDifference {
                key: k.to_owned(),
                ours,
                theirs: them,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Hello {
        Hello {
            protocol: 1,
            node: NodeId(3),
            generation: 42,
            advertise: "127.0.0.1:7003".parse().unwrap(),
            world: vec![("players".into(), "8".into()), ("map".into(), "sqr".into())],
        }
    }

    #[test]
    fn round_trips_and_rejects_bad_frames() {
        let h = sample();
        let f = h.encode().unwrap();
        assert_eq!(Hello::decode(&f).unwrap(), h);
        assert_eq!(
            Hello::decode(&f[..4]),
            Err(HelloError::Truncated { got: 4, need: 6 })
        );
        assert!(matches!(
            Hello::decode(&f[..f.len() - 1]),
            Err(HelloError::Truncated { .. })
        ));
        let mut long = f.clone();
        long.push(0);
        assert_eq!(Hello::decode(&long), Err(HelloError::Trailing { extra: 1 }));
        let mut v = f.clone();
        v[3] = 9;
        let e = Hello::decode(&v).unwrap_err();
        assert!(e.is_version(), "{e}");
        let mut v = f.clone();
        v[0] = b'X';
        assert!(matches!(Hello::decode(&v), Err(HelloError::BadMagic(_))));
        let mut v = f[..HELLO_HEADER_LEN].to_vec();
        v[4..6].copy_from_slice(&60_000u16.to_le_bytes());
        assert_eq!(
            Hello::payload_len(&v),
            Err(HelloError::Oversize { declared: 60_000 })
        );
        let mut dup = sample();
        dup.world.push(("players".into(), "9".into()));
        assert_eq!(dup.encode(), Err(HelloError::DuplicateSetting("players".into())));
        let mut many = sample();
        many.world = (0..65).map(|i| (format!("k{i}"), String::new())).collect();
        assert_eq!(many.encode(), Err(HelloError::TooManySettings(65)));
    }

    #[test]
    fn world_difference_names_the_setting_and_both_values() {
        let a = sample();
        let mut b = sample();
        assert_eq!(a.world_difference(&b), None);
        b.world.reverse();
        assert_eq!(a.world_difference(&b), None, "order does not matter");
        let mut b = sample();
        b.world[0].1 = "16".into();
        let d = a.world_difference(&b).unwrap();
        assert_eq!(
            d.to_string(),
            "world setting \"players\" differs: ours 8, theirs 16"
        );
        let mut c = sample();
        c.world.pop();
        assert_eq!(
            a.world_difference(&c).unwrap().to_string(),
            "world setting \"map\" differs: ours sqr, theirs (not set)"
        );
    }

    proptest! {
        #[test]
        fn random_bytes_give_a_typed_error_never_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            let _ = Hello::decode(&bytes);
        }

        #[test]
        fn random_payloads_behind_a_valid_header_give_a_typed_error(payload in proptest::collection::vec(any::<u8>(), 0..600)) {
            let mut f = HELLO_MAGIC.to_vec();
            f.push(HELLO_VERSION);
            f.extend_from_slice(&(payload.len() as u16).to_le_bytes());
            f.extend_from_slice(&payload);
            match Hello::decode(&f) {
                Ok(h) => prop_assert!(h.world.len() <= MAX_WORLD_SETTINGS),
                Err(e) => prop_assert!(!e.is_version()),
            }
        }
    }
}
