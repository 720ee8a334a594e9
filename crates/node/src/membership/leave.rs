//! Leave notices: how the others tell a member that left from one that failed.
//!
//! SWIM reports both the same way: foca gossips a member that leaves as down, exactly as
//! it gossips a member its probes declared down, and notifies `MemberDown` for either.
//! An operator needs them apart (a drain is planned, a failure pages someone), so a
//! member that leaves first adds a **leave notice** naming its identity to foca's custom
//! broadcasts. foca piggybacks it on the very gossip that announces the leave and every
//! member that learns it passes it on like a cluster update (up to `max_transmissions`
//! times), so it travels with the down update: a member that hears of the leave in the
//! same message, or after the notice, records it as [`Departure::Left`]. One that hears
//! of it from a message without the notice (a message too full to carry both) records a
//! failure: the notice is best effort, and changes nothing but the label.
//!
//! ```text
//! notice = 'L':u8 node:u32le generation:u32le
//! ```
//!
//! A notice is only a label: the member's objects are adopted or handed over exactly as
//! before, so a forged notice (any authenticated member can gossip one) can at most make
//! a failure read as a leave. The book of notices seen is bounded ([`MAX_NOTICES`]).

use std::collections::{BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use foca::{BroadcastHandler, Invalidates};
use worldmesh_core::NodeId;

use super::Member;

/// Why a member stopped being one, as this node learned it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Departure {
    /// It left gracefully (a drain, a shutdown): its leave notice reached this node.
    Left,
    /// It was declared down (it stopped answering probes: a crash, a partition, heavy
    /// loss), or a restart with a later generation replaced it, with no leave notice.
    Failed,
    /// Neither: this node renewed its own generation afresh (told by a refusal that the
    /// cluster holds it down, `Membership::declared_down`), and its new membership starts
    /// without the members the old one knew, and learns them again. A transport must not
    /// refuse such a member: the cluster never declared it down, and a refused member that
    /// holds this node live renews in turn (found once the simulator modelled the
    /// transports' refusals: a cascade of renewals after a healed partition).
    Forgotten,
}

impl Departure {
    /// `"left"`, `"failed"` or `"forgotten"`, for logs and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Left => "left",
            Self::Failed => "failed",
            Self::Forgotten => "forgotten",
        }
    }
}

/// The first byte of a notice.
const TAG: u8 = b'L';
/// A notice's length in bytes.
const NOTICE_LEN: usize = 9;
/// Notices remembered; the oldest is forgotten first. A member hears of a leave at
/// about the same time as its notice, so this only has to cover the leaves of a few
/// seconds, with room for a burst of forged ones.
pub const MAX_NOTICES: usize = 1024;

/// The notice of `m`'s leave, as gossiped.
pub(super) fn encode(m: &Member) -> [u8; NOTICE_LEN] {
    let mut b = [0u8; NOTICE_LEN];
    b[0] = TAG;
    b[1..5].copy_from_slice(&m.node.0.to_le_bytes());
    b[5..9].copy_from_slice(&m.generation.to_le_bytes());
    b
}

/// Why a custom broadcast is not a leave notice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NoticeError {
    /// The item is not [`NOTICE_LEN`] bytes long.
    #[error("leave notice of {0} bytes (a notice has 9)")]
    Length(usize),
    /// The first byte is not the notice's tag.
    #[error("unknown custom broadcast tag {0}")]
    Tag(u8),
}

/// The identity a notice names: foca keeps one notice per identity in its backlog.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct NoticeKey {
    node: NodeId,
    generation: u32,
}

impl Invalidates for NoticeKey {
    fn invalidates(&self, other: &Self) -> bool {
        self == other
    }
}

/// The identities whose leave notices this node has seen, oldest first.
#[derive(Default)]
pub(super) struct Book {
    seen: BTreeSet<NoticeKey>,
    order: VecDeque<NoticeKey>,
}

impl Book {
    /// Records `k`; false if it was already known.
    fn record(&mut self, k: NoticeKey) -> bool {
        if !self.seen.insert(k) {
            return false;
        }
        self.order.push_back(k);
        if self.order.len() > MAX_NOTICES
            && let Some(old) = self.order.pop_front()
        {
            self.seen.remove(&old);
        }
        true
    }

    /// How `m` departed, by the notices seen so far.
    pub(super) fn departure(&self, m: &Member) -> Departure {
        let k = NoticeKey {
            node: m.node,
            generation: m.generation,
        };
        if self.seen.contains(&k) {
            Departure::Left
        } else {
            Departure::Failed
        }
    }
}

/// foca's custom broadcast handler: decodes leave notices into the book it shares with
/// its [`super::Membership`] (foca owns the handler and offers no way back to it).
#[derive(Clone, Default)]
pub(super) struct Notices(Arc<Mutex<Book>>);

impl Notices {
    /// The book, also after a panic elsewhere left the lock poisoned (its state is a set
    /// and a queue kept consistent by `record` before it returns).
    pub(super) fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl BroadcastHandler<Member> for Notices {
    type Key = NoticeKey;
    type Error = NoticeError;

    fn receive_item(
        &mut self,
        data: &[u8],
        _sender: Option<&Member>,
    ) -> Result<Option<NoticeKey>, NoticeError> {
        if data.len() != NOTICE_LEN {
            return Err(NoticeError::Length(data.len()));
        }
        if data[0] != TAG {
            return Err(NoticeError::Tag(data[0]));
        }
        let word = |at: usize| u32::from_le_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]]);
        let k = NoticeKey {
            node: NodeId(word(1)),
            generation: word(5),
        };
        // New information is passed on; a notice seen before is not (or it would circle
        // for ever).
        Ok(self.book().record(k).then_some(k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(node: u32, generation: u32) -> Member {
        Member::simulated(NodeId(node), generation)
    }

    #[test]
    fn a_notice_decodes_to_the_identity_it_names_once() {
        let mut h = Notices::default();
        let m = member(7, 1_796_600_958);
        assert_eq!(h.book().departure(&m), Departure::Failed);
        let k = h.receive_item(&encode(&m), None).unwrap();
        assert_eq!(
            k,
            Some(NoticeKey {
                node: NodeId(7),
                generation: 1_796_600_958
            })
        );
        // Seen before: not passed on again.
        assert_eq!(h.receive_item(&encode(&m), None).unwrap(), None);
        assert_eq!(h.book().departure(&m), Departure::Left);
        // Another generation of the same node did not leave.
        assert_eq!(h.book().departure(&member(7, 1_796_600_959)), Departure::Failed);
    }

    #[test]
    fn malformed_notices_are_typed_errors() {
        let mut h = Notices::default();
        let good = encode(&member(1, 2));
        assert_eq!(h.receive_item(&good[..8], None), Err(NoticeError::Length(8)));
        assert_eq!(
            h.receive_item(&[good.as_slice(), &[0]].concat(), None),
            Err(NoticeError::Length(10))
        );
        let mut bad = good;
        bad[0] = b'X';
        assert_eq!(h.receive_item(&bad, None), Err(NoticeError::Tag(b'X')));
        assert_eq!(h.book().departure(&member(1, 2)), Departure::Failed);
    }

    #[test]
    fn the_book_forgets_the_oldest_notice_beyond_its_bound() {
        let mut h = Notices::default();
        for n in 0..=MAX_NOTICES as u32 {
            assert!(h.receive_item(&encode(&member(n, 1)), None).unwrap().is_some());
        }
        let b = h.book();
        assert_eq!(b.seen.len(), MAX_NOTICES);
        assert_eq!(
            b.departure(&member(0, 1)),
            Departure::Failed,
            "the oldest is forgotten"
        );
        assert_eq!(b.departure(&member(1, 1)), Departure::Left);
        assert_eq!(b.departure(&member(MAX_NOTICES as u32, 1)), Departure::Left);
    }

    proptest::proptest! {
        /// Any bytes: a notice or a typed error, never a panic; only 9 tagged bytes decode.
        #[test]
        fn any_bytes_decode_or_give_a_typed_error(data in proptest::collection::vec(proptest::num::u8::ANY, 0..32)) {
            let mut h = Notices::default();
            let r = h.receive_item(&data, None);
            proptest::prop_assert_eq!(r.is_ok(), data.len() == NOTICE_LEN && data[0] == TAG);
        }
    }
}
