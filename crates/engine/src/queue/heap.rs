//! A 4-ary min-heap of keys: the queue's place for the keys its calendar cannot hold
//! (due too far from the calendar's other keys).
//!
//! Four wide, it is half as deep as a binary heap, and it sifts 24-byte keys, never events.

use super::{Key, before};

/// Children per heap node.
const ARITY: usize = 4;

/// Keys as a 4-ary min-heap on (time, insertion number): the children of `i` are
/// `4i + 1 ..= 4i + 4`.
#[derive(Debug, Default)]
pub(super) struct KeyHeap {
    keys: Vec<Key>,
}

impl KeyHeap {
    /// The earliest key.
    pub(super) fn peek(&self) -> Option<&Key> {
        self.keys.first()
    }

    /// Keys held.
    pub(super) fn len(&self) -> usize {
        self.keys.len()
    }

    /// Appends `key` and moves it up to its place.
    pub(super) fn push(&mut self, key: Key) {
        let mut i = self.keys.len();
        self.keys.push(key);
        while i > 0 {
            let parent = (i - 1) / ARITY;
            if !before(&key, &self.keys[parent]) {
                break;
            }
            self.keys[i] = self.keys[parent];
            i = parent;
        }
        self.keys[i] = key;
    }

    /// Removes the earliest key.
    pub(super) fn pop(&mut self) -> Option<Key> {
        let last = self.keys.pop()?;
        let Some(&top) = self.keys.first() else {
            return Some(last);
        };
        // Move `last` down from the root, each step to the earliest child.
        let n = self.keys.len();
        let mut i = 0;
        loop {
            let first = ARITY * i + 1;
            if first >= n {
                break;
            }
            let mut best = first;
            for c in first + 1..(first + ARITY).min(n) {
                if before(&self.keys[c], &self.keys[best]) {
                    best = c;
                }
            }
            if !before(&self.keys[best], &last) {
                break;
            }
            self.keys[i] = self.keys[best];
            i = best;
        }
        self.keys[i] = last;
        Some(top)
    }
}
