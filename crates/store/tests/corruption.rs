//! Damaged files: bytes flipped and files truncated at many offsets. Opening and loading
//! must give either exactly the data written (the damage hit unused space) or a typed error
//! naming the file — never a panic, never different data.

mod common;

use std::path::PathBuf;
use std::sync::OnceLock;

use common::*;
use proptest::prelude::*;
use worldmesh_store::{Batch, FILE_NAME, Recovered, Store, StoreError};

/// A store with a few hundred records of every kind, written in several batches (so the file
/// holds old, freed pages as well as live ones), and what it holds.
fn pristine() -> &'static (Vec<u8>, Recovered) {
    static P: OnceLock<(Vec<u8>, Recovered)> = OnceLock::new();
    P.get_or_init(|| {
        let dir = scratch("pristine");
        let want = {
            let mut s = Store::open(&dir).unwrap();
            for round in 0..4u64 {
                let mut b = Batch::new();
                for i in 0..150 {
                    b.put_object(object(0, i, round + 1));
                }
                for i in 0..20 {
                    b.put_binding(binding(i))
                        .put_forwarding(forwarding(i))
                        .put_write(write(i));
                }
                b.checkpoint(checkpoint(10 * round));
                s.apply(&b).unwrap();
            }
            s.load().unwrap()
        };
        assert_eq!(want.objects.len(), 150);
        let bytes = std::fs::read(dir.join(FILE_NAME)).unwrap();
        std::fs::remove_dir_all(dir).unwrap();
        (bytes, want)
    })
}

#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    /// Opened and loaded, with exactly the data written.
    Intact,
    /// A typed error naming the file.
    Refused,
}

/// Opens and loads the damaged `bytes`; panics (fails the test) on different data or an
/// error that does not name the file.
fn check(name: &str, bytes: &[u8]) -> Outcome {
    let dir = scratch(name);
    let path: PathBuf = dir.join(FILE_NAME);
    std::fs::write(&path, bytes).unwrap();
    let outcome = match Store::open(&dir).and_then(|s| s.load()) {
        Ok(r) => {
            assert!(
                r == pristine().1,
                "{name}: the damaged file loaded with different data"
            );
            Outcome::Intact
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(
                msg.contains(&path.display().to_string()),
                "{name}: error without the file: {msg}"
            );
            assert!(!matches!(e, StoreError::Missing { .. }), "{name}: {msg}");
            Outcome::Refused
        }
    };
    std::fs::remove_dir_all(&dir).unwrap();
    outcome
}

fn flipped(offset: usize, mask: u8) -> Vec<u8> {
    let mut b = pristine().0.clone();
    b[offset] ^= mask;
    b
}

#[test]
fn the_pristine_copy_loads() {
    assert_eq!(check("copy", &pristine().0), Outcome::Intact);
}

#[test]
fn flips_in_the_header_and_first_pages_never_pass_as_other_data() {
    // redb keeps its header (god byte, two commit slots with checksums) at the start and
    // the first regions' allocator state after it: sweep that area.
    let len = pristine().0.len();
    let mut refused = 0;
    for offset in (0..len.min(16 * 1024)).step_by(61) {
        if check("header", &flipped(offset, 0xFF)) == Outcome::Refused {
            refused += 1;
        }
    }
    assert!(refused > 0, "no flip in the first 16 KiB was noticed");
}

#[test]
fn truncated_files_are_refused_or_intact() {
    let bytes = &pristine().0;
    let len = bytes.len();
    let mut cuts: Vec<usize> = vec![0, 1, 7, 64, 511, 512, 4095, 4096, 4097, len - 1];
    cuts.extend((1..24).map(|k| len * k / 24));
    let mut refused = 0;
    for cut in cuts {
        if check("cut", &bytes[..cut]) == Outcome::Refused {
            refused += 1;
        }
    }
    // Cutting to nothing or into the header must be refused.
    assert!(refused >= 5, "only {refused} truncations refused");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, ..ProptestConfig::default() })]

    /// A byte changed anywhere in the file.
    #[test]
    fn a_changed_byte_anywhere_is_refused_or_harmless(at in 0.0f64..1.0, mask in 1u8..=255) {
        let len = pristine().0.len();
        let offset = ((len as f64 * at) as usize).min(len - 1);
        check("flip", &flipped(offset, mask));
    }
}

/// Every byte of one stored value flipped: the record's CRC (or redb's page checksum) must
/// catch each.
#[test]
fn every_byte_of_a_stored_record_is_covered() {
    let (bytes, want) = pristine();
    // Find object 77's state in the file (its latest copy, version 4).
    let needle = &want.objects[77].state;
    let at = find_last(bytes, needle).expect("the state is stored verbatim");
    for offset in at..at + needle.len() {
        let outcome = check("record", &flipped(offset, 0x10));
        // Live data: never intact with the flip in it (check() panics on different data), and
        // it is live, so it cannot be unused space either.
        assert_eq!(outcome, Outcome::Refused, "offset {offset}");
    }
}

fn find_last(hay: &[u8], needle: &[u8]) -> Option<usize> {
    (0..=hay.len() - needle.len())
        .rev()
        .find(|&i| &hay[i..i + needle.len()] == needle)
}
