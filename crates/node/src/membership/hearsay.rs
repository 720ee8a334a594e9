//! Hearsay against what this node hears: a down verdict about a member it still hears is
//! read as a suspicion.
//!
//! SWIM makes a down verdict final for the identity it names: whoever applies it holds the
//! member down, gossips the verdict on, and a live member that learns of it must renew.
//! A verdict can outlive the view it was reached in. A node cut off with a few others
//! (the smaller side of a split) declares the rest down and gossips that among its side;
//! when the network heals, a member that joined that side meanwhile — a new generation,
//! knowing no one, that learned the side's table — carries the verdicts over to the
//! members of the larger side, who apply them to members they hear every frame, and those
//! renew (fault swarm, `--faults all` seed 381, with renewals through foca's rejoin
//! starting afresh). The refusals that settle a split (`Membership::declared_down`) do
//! not stop it: nobody holds the relaying generation down.
//!
//! So before foca reads a datagram, the wrapper lists the live members this node heard
//! within the silence threshold, and the codec reads a `Down` update about one of them as
//! `Suspect` at the same incarnation, unless the member said so itself (a leave: the
//! datagram's sender) or its leave notice is already in hand. The member is told
//! (`Membership::tell_suspects`) and refutes it; if foca still holds it suspect at that
//! incarnation `suspect_to_down_after` later, the verdict stands and this node applies it
//! (a member that left, or cannot hear, falls there). A crashed member is silent by the
//! time the others declare it down (a suspicion lasts longer than the silence threshold),
//! so crashes spread as before.

use std::sync::{Arc, Mutex, PoisonError};

use bytes::{Buf, BufMut};
use foca::{Header, State};

use super::Member;
use super::leave::{Departure, Notices};
use super::wire::{MemberCodec, WireError};

/// What the codec and the wrapper share.
#[derive(Debug, Default)]
struct Heard {
    /// The live members heard within the silence threshold, while foca reads a datagram.
    members: Vec<Member>,
    /// The sender of the datagram being read.
    sender: Option<Member>,
    /// Down verdicts read as suspicions in the datagram being read: identity, incarnation.
    read_now: Vec<(Member, u16)>,
    /// Down verdicts read as suspicions so far.
    downgraded: u64,
}

/// The list of members heard, filled by the wrapper around each datagram foca reads.
#[derive(Clone, Debug, Default)]
pub(super) struct HeardNow(Arc<Mutex<Heard>>);

impl HeardNow {
    fn with<R>(&self, f: impl FnOnce(&mut Heard) -> R) -> R {
        f(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Sets the members heard (cleared with an empty list).
    pub(super) fn set(&self, members: impl IntoIterator<Item = Member>) {
        self.with(|h| {
            h.members.clear();
            h.members.extend(members);
            h.sender = None;
        });
    }

    /// The down verdicts read as suspicions since the last call.
    pub(super) fn take_read(&self) -> Vec<(Member, u16)> {
        self.with(|h| std::mem::take(&mut h.read_now))
    }

    /// Down verdicts read as suspicions so far.
    pub(super) fn downgraded(&self) -> u64 {
        self.with(|h| h.downgraded)
    }
}

/// The codec of this node's foca instance: [`MemberCodec`], reading a down verdict about a
/// member in [`HeardNow`] as a suspicion, unless it is the sender's own or the member's
/// leave notice is in `notices`.
#[derive(Clone)]
pub(super) struct GossipCodec {
    /// The members heard, shared with the wrapper.
    pub(super) heard: HeardNow,
    /// The leave notices seen, shared with foca's broadcast handler.
    pub(super) notices: Notices,
}

impl foca::Codec<Member> for GossipCodec {
    type Error = WireError;

    fn encode_header(&mut self, header: &Header<Member>, buf: impl BufMut) -> Result<(), WireError> {
        MemberCodec.encode_header(header, buf)
    }

    fn decode_header(&mut self, buf: impl Buf) -> Result<Header<Member>, WireError> {
        let h = MemberCodec.decode_header(buf)?;
        self.heard.with(|heard| heard.sender = Some(h.src));
        Ok(h)
    }

    fn encode_member(&mut self, member: &foca::Member<Member>, buf: impl BufMut) -> Result<(), WireError> {
        MemberCodec.encode_member(member, buf)
    }

    fn decode_member(&mut self, buf: impl Buf) -> Result<foca::Member<Member>, WireError> {
        let m = MemberCodec.decode_member(buf)?;
        if m.state() != State::Down {
            return Ok(m);
        }
        let notices = &self.notices;
        let heard = self.heard.with(|h| {
            let heard = h.sender != Some(*m.id())
                && h.members.contains(m.id())
                && notices.book().departure(m.id()) != Departure::Left;
            if heard {
                h.downgraded += 1;
                h.read_now.push((*m.id(), m.incarnation()));
            }
            heard
        });
        Ok(if heard {
            foca::Member::new(*m.id(), m.incarnation(), State::Suspect)
        } else {
            m
        })
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr, SocketAddr};

    use foca::Codec as _;
    use worldmesh_core::NodeId;

    use super::*;

    fn member(n: u32) -> Member {
        Member {
            node: NodeId(n),
            generation: 0,
            addr: SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, n as u8)), 7000),
        }
    }

    fn read(codec: &mut GossipCodec, m: Member, state: State) -> State {
        let mut buf = Vec::new();
        codec
            .encode_member(&foca::Member::new(m, 4, state), &mut buf)
            .unwrap();
        let got = codec.decode_member(buf.as_slice()).unwrap();
        assert_eq!((*got.id(), got.incarnation()), (m, 4));
        got.state()
    }

    #[test]
    fn only_a_down_verdict_about_a_member_heard_is_read_as_a_suspicion() {
        let heard = HeardNow::default();
        let mut codec = GossipCodec {
            heard: heard.clone(),
            notices: Notices::default(),
        };
        heard.set([member(1)]);
        assert_eq!(read(&mut codec, member(1), State::Down), State::Suspect);
        assert_eq!(heard.take_read(), [(member(1), 4)]);
        assert_eq!(heard.take_read(), []);
        assert_eq!(read(&mut codec, member(2), State::Down), State::Down);
        assert_eq!(read(&mut codec, member(1), State::Alive), State::Alive);
        // Another generation of the member heard: the verdict about the old one stands.
        let other = Member {
            generation: 1,
            ..member(1)
        };
        assert_eq!(read(&mut codec, other, State::Down), State::Down);
        // A member that says it is down (a leave) is believed.
        heard.set([member(1)]);
        let mut buf = Vec::new();
        let header = Header {
            src: member(1),
            src_incarnation: 4,
            dst: member(2),
            message: foca::Message::Gossip,
        };
        codec.encode_header(&header, &mut buf).unwrap();
        codec.decode_header(buf.as_slice()).unwrap();
        assert_eq!(read(&mut codec, member(1), State::Down), State::Down);
        heard.set([]);
        assert_eq!(read(&mut codec, member(1), State::Down), State::Down);
        assert_eq!(heard.downgraded(), 1);
    }
}
