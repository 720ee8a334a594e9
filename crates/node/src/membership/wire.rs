//! The wire form of SWIM messages: a hand-written [`foca::Codec`] for [`Member`].
//!
//! ```text
//! member   = node:varint generation:varint addr
//! addr     = 4 ipv4:4 port:u16le | 6 ipv6:16 port:u16le
//! header   = src:member src_incarnation:u16le dst:member message
//! message  = tag:u8 [probe:u8] [other:member]
//! update   = member incarnation:u16le state:u8          (foca's cluster updates)
//! ```
//!
//! Every decoder checks the bytes left before reading and returns a typed [`WireError`];
//! varints longer than 5 bytes or overflowing a `u32` are refused.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use bytes::{Buf, BufMut};
use foca::{Header, Message, State};
use worldmesh_core::NodeId;

use super::Member;

/// A SWIM message of this node's own making: `header` (a `Gossip` to the suspect) and one
/// cluster update, `notice`, laid out as foca lays out its messages (the header, the
/// number of updates as a big-endian `u16`, the updates), so the receiver's foca reads
/// it as any other gossip ([`super::Membership`]'s suspicion notices).
pub(super) fn suspicion_notice(
    header: &Header<Member>,
    notice: &foca::Member<Member>,
) -> Result<Vec<u8>, WireError> {
    let mut buf = Vec::with_capacity(64);
    foca::Codec::encode_header(&mut MemberCodec, header, &mut buf)?;
    buf.put_u16(1);
    foca::Codec::encode_member(&mut MemberCodec, notice, &mut buf)?;
    Ok(buf)
}

/// Why SWIM bytes did not decode (or could not be encoded).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The input ended inside a field.
    #[error("truncated membership message")]
    Truncated,
    /// A varint is too long or overflows a `u32`.
    #[error("bad varint in membership message")]
    BadVarint,
    /// An unknown address family tag.
    #[error("unknown address family {0}")]
    BadAddr(u8),
    /// An unknown message tag.
    #[error("unknown membership message tag {0}")]
    BadTag(u8),
    /// An unknown member state.
    #[error("unknown member state {0}")]
    BadState(u8),
    /// The output buffer is full.
    #[error("membership message does not fit the buffer")]
    Full,
}

/// The codec foca uses for [`Member`] identities.
#[derive(Clone, Copy, Debug, Default)]
pub struct MemberCodec;

fn need(buf: &impl Buf, n: usize) -> Result<(), WireError> {
    if buf.remaining() < n {
        Err(WireError::Truncated)
    } else {
        Ok(())
    }
}

fn room(buf: &impl BufMut, n: usize) -> Result<(), WireError> {
    if buf.remaining_mut() < n {
        Err(WireError::Full)
    } else {
        Ok(())
    }
}

fn put_varint(buf: &mut impl BufMut, mut v: u32) -> Result<(), WireError> {
    room(buf, 5)?;
    while v >= 0x80 {
        buf.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
    Ok(())
}

fn get_varint(buf: &mut impl Buf) -> Result<u32, WireError> {
    let mut v: u64 = 0;
    for i in 0..5 {
        need(buf, 1)?;
        let b = buf.get_u8();
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return u32::try_from(v).map_err(|_| WireError::BadVarint);
        }
    }
    Err(WireError::BadVarint)
}

/// Appends `m`'s encoding.
pub(super) fn put_member(buf: &mut impl BufMut, m: &Member) -> Result<(), WireError> {
    put_varint(buf, m.node.0)?;
    put_varint(buf, m.generation)?;
    match m.addr.ip() {
        IpAddr::V4(ip) => {
            room(buf, 7)?;
            buf.put_u8(4);
            buf.put_slice(&ip.octets());
        }
        IpAddr::V6(ip) => {
            room(buf, 19)?;
            buf.put_u8(6);
            buf.put_slice(&ip.octets());
        }
    }
    buf.put_u16_le(m.addr.port());
    Ok(())
}

/// Reads a member's encoding.
pub(super) fn get_member(buf: &mut impl Buf) -> Result<Member, WireError> {
    let node = NodeId(get_varint(buf)?);
    let generation = get_varint(buf)?;
    need(buf, 1)?;
    let ip = match buf.get_u8() {
        4 => {
            need(buf, 4)?;
            let mut o = [0u8; 4];
            buf.copy_to_slice(&mut o);
            IpAddr::V4(Ipv4Addr::from(o))
        }
        6 => {
            need(buf, 16)?;
            let mut o = [0u8; 16];
            buf.copy_to_slice(&mut o);
            IpAddr::V6(Ipv6Addr::from(o))
        }
        t => return Err(WireError::BadAddr(t)),
    };
    need(buf, 2)?;
    let port = buf.get_u16_le();
    Ok(Member {
        node,
        generation,
        addr: SocketAddr::new(ip, port),
    })
}

impl foca::Codec<Member> for MemberCodec {
    type Error = WireError;

    fn encode_header(&mut self, header: &Header<Member>, mut buf: impl BufMut) -> Result<(), WireError> {
        put_member(&mut buf, &header.src)?;
        room(&buf, 2)?;
        buf.put_u16_le(header.src_incarnation);
        put_member(&mut buf, &header.dst)?;
        room(&buf, 2)?;
        match &header.message {
            Message::Ping(p) => {
                buf.put_u8(0);
                buf.put_u8(*p);
            }
            Message::Ack(p) => {
                buf.put_u8(1);
                buf.put_u8(*p);
            }
            Message::PingReq { target, probe_number } => {
                buf.put_u8(2);
                buf.put_u8(*probe_number);
                put_member(&mut buf, target)?;
            }
            Message::IndirectPing { origin, probe_number } => {
                buf.put_u8(3);
                buf.put_u8(*probe_number);
                put_member(&mut buf, origin)?;
            }
            Message::IndirectAck { target, probe_number } => {
                buf.put_u8(4);
                buf.put_u8(*probe_number);
                put_member(&mut buf, target)?;
            }
            Message::ForwardedAck { origin, probe_number } => {
                buf.put_u8(5);
                buf.put_u8(*probe_number);
                put_member(&mut buf, origin)?;
            }
            Message::Announce => buf.put_u8(6),
            Message::Feed => buf.put_u8(7),
            Message::Gossip => buf.put_u8(8),
            Message::Broadcast => buf.put_u8(9),
            Message::TurnUndead => buf.put_u8(10),
        }
        Ok(())
    }

    fn decode_header(&mut self, mut buf: impl Buf) -> Result<Header<Member>, WireError> {
        let src = get_member(&mut buf)?;
        need(&buf, 2)?;
        let src_incarnation = buf.get_u16_le();
        let dst = get_member(&mut buf)?;
        need(&buf, 1)?;
        let tag = buf.get_u8();
        let probe = |buf: &mut dyn Buf| -> Result<u8, WireError> {
            if buf.remaining() < 1 {
                return Err(WireError::Truncated);
            }
            Ok(buf.get_u8())
        };
        let message = match tag {
            0 => Message::Ping(probe(&mut buf)?),
            1 => Message::Ack(probe(&mut buf)?),
            2 => {
                let probe_number = probe(&mut buf)?;
                Message::PingReq {
                    target: get_member(&mut buf)?,
                    probe_number,
                }
            }
            3 => {
                let probe_number = probe(&mut buf)?;
                Message::IndirectPing {
                    origin: get_member(&mut buf)?,
                    probe_number,
                }
            }
            4 => {
                let probe_number = probe(&mut buf)?;
                Message::IndirectAck {
                    target: get_member(&mut buf)?,
                    probe_number,
                }
            }
            5 => {
                let probe_number = probe(&mut buf)?;
                Message::ForwardedAck {
                    origin: get_member(&mut buf)?,
                    probe_number,
                }
            }
            6 => Message::Announce,
            7 => Message::Feed,
            8 => Message::Gossip,
            9 => Message::Broadcast,
            10 => Message::TurnUndead,
            t => return Err(WireError::BadTag(t)),
        };
        Ok(Header {
            src,
            src_incarnation,
            dst,
            message,
        })
    }

    fn encode_member(
        &mut self,
        member: &foca::Member<Member>,
        mut buf: impl BufMut,
    ) -> Result<(), WireError> {
        put_member(&mut buf, member.id())?;
        room(&buf, 3)?;
        buf.put_u16_le(member.incarnation());
        buf.put_u8(match member.state() {
            State::Alive => 0,
            State::Suspect => 1,
            State::Down => 2,
        });
        Ok(())
    }

    fn decode_member(&mut self, mut buf: impl Buf) -> Result<foca::Member<Member>, WireError> {
        let id = get_member(&mut buf)?;
        need(&buf, 3)?;
        let incarnation = buf.get_u16_le();
        let state = match buf.get_u8() {
            0 => State::Alive,
            1 => State::Suspect,
            2 => State::Down,
            s => return Err(WireError::BadState(s)),
        };
        Ok(foca::Member::new(id, incarnation, state))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use foca::Codec as _;
    use proptest::prelude::*;

    fn member(n: u32, g: u32, v6: bool, port: u16) -> Member {
        let ip = if v6 {
            IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, n as u16))
        } else {
            IpAddr::V4(Ipv4Addr::new(10, 0, (n >> 8) as u8, n as u8))
        };
        Member {
            node: NodeId(n),
            generation: g,
            addr: SocketAddr::new(ip, port),
        }
    }

    #[test]
    fn headers_and_updates_round_trip() {
        let (a, b, c) = (
            member(1, 0, false, 7000),
            member(300, 5, true, 1),
            member(7, u32::MAX, false, 0),
        );
        for message in [
            Message::Ping(3),
            Message::Ack(255),
            Message::PingReq {
                target: c,
                probe_number: 1,
            },
            Message::IndirectPing {
                origin: c,
                probe_number: 2,
            },
            Message::IndirectAck {
                target: c,
                probe_number: 3,
            },
            Message::ForwardedAck {
                origin: c,
                probe_number: 4,
            },
            Message::Announce,
            Message::Feed,
            Message::Gossip,
            Message::Broadcast,
            Message::TurnUndead,
        ] {
            let h = Header {
                src: a,
                src_incarnation: 9,
                dst: b,
                message,
            };
            let mut out = Vec::new();
            MemberCodec.encode_header(&h, &mut out).unwrap();
            let mut rd = out.as_slice();
            assert_eq!(MemberCodec.decode_header(&mut rd).unwrap(), h);
            assert!(rd.is_empty());
            for cut in 0..out.len() {
                assert_eq!(
                    MemberCodec.decode_header(&out[..cut]).unwrap_err(),
                    WireError::Truncated,
                    "cut at {cut}"
                );
            }
        }
        for state in [State::Alive, State::Suspect, State::Down] {
            let m = foca::Member::new(b, 77, state);
            let mut out = Vec::new();
            MemberCodec.encode_member(&m, &mut out).unwrap();
            assert_eq!(MemberCodec.decode_member(out.as_slice()).unwrap(), m);
        }
        // A full buffer is an error, not a panic.
        let mut small = [0u8; 3];
        assert_eq!(
            MemberCodec
                .encode_member(&foca::Member::alive(a), &mut small[..])
                .unwrap_err(),
            WireError::Full
        );
    }

    #[test]
    fn bad_tags_and_varints_are_typed_errors() {
        assert_eq!(
            get_varint(&mut &[0xff, 0xff, 0xff, 0xff, 0x7f][..]),
            Err(WireError::BadVarint)
        );
        assert_eq!(get_varint(&mut &[0xff; 6][..]), Err(WireError::BadVarint));
        assert_eq!(get_member(&mut &[1, 0, 9][..]), Err(WireError::BadAddr(9)));
        let mut upd = Vec::new();
        put_member(&mut upd, &member(1, 0, false, 1)).unwrap();
        upd.extend_from_slice(&[0, 0, 9]);
        assert_eq!(
            MemberCodec.decode_member(upd.as_slice()).unwrap_err(),
            WireError::BadState(9)
        );
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..96)) {
            let _ = MemberCodec.decode_header(bytes.as_slice());
            let _ = MemberCodec.decode_member(bytes.as_slice());
        }
    }
}
