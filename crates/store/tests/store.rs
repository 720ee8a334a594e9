//! The store's contract on healthy files: round trips, batch semantics, bounds, refusals.

mod common;

use common::*;
use redb::ReadableTable as _;
use worldmesh_core::{NodeId, ObjectId};
use worldmesh_store::{Batch, FILE_NAME, Op, RecordError, Recovered, Store, StoreError, StoreOptions};

fn sample() -> Recovered {
    Recovered {
        objects: (0..50).map(|i| object(0, i, u64::from(i) + 1)).collect(),
        bindings: (0..10).map(binding).collect(),
        forwarding: (0..6).map(forwarding).collect(),
        writes: (0..12).map(write).collect(),
        last_checkpoint: Some(checkpoint(40)),
    }
}

/// Sorted as the store returns records: by key.
fn sorted(mut r: Recovered) -> Recovered {
    r.objects.sort_by_key(|o| (o.id.origin, o.id.seq));
    r.bindings.sort_by_key(|b| (b.id.origin, b.id.seq));
    r.forwarding.sort_by_key(|f| (f.id.origin, f.id.seq));
    r.writes.sort_by_key(|w| w.key);
    r
}

#[test]
fn everything_written_reads_back_after_reopening() {
    let dir = scratch("roundtrip");
    let want = sorted(sample());
    {
        let mut s = Store::open(&dir).unwrap();
        assert!(s.is_empty().unwrap());
        assert_eq!(s.load().unwrap(), Recovered::default());
        s.apply(&want.to_batch()).unwrap();
        assert!(!s.is_empty().unwrap());
    }
    let s = Store::open(&dir).unwrap();
    assert_eq!(s.path(), dir.join(FILE_NAME));
    assert_eq!(s.load().unwrap(), want);

    let i = s.inspect().unwrap();
    assert_eq!(
        i.records,
        [
            ("objects", 50),
            ("bindings", 10),
            ("forwarding", 6),
            ("writes", 12)
        ]
    );
    // Objects i % 3 == 0, 1, 2 are ephemeral, checkpointed, durable: 17, 17, 16 of 50.
    assert_eq!(i.objects_by_durability.map(|(_, n)| n), [17, 17, 16]);
    assert_eq!(i.state_bytes, 50 * 100);
    assert_eq!(i.write_bytes, 12 * 24);
    assert_eq!(i.last_checkpoint, Some(checkpoint(40)));
    assert_eq!(i.last_generation, None);
    assert!(i.file_bytes > 0);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn changes_apply_in_order_and_deletes_remove() {
    let dir = scratch("order");
    let mut s = Store::open(&dir).unwrap();
    let mut b = Batch::new();
    b.put_object(object(1, 1, 1))
        .put_object(object(1, 1, 2)) // the later put wins
        .put_object(object(1, 2, 1))
        .put_object(object(1, 3, 1))
        .delete_object(ObjectId::new(NodeId(1), 3))
        .put_binding(binding(1))
        .put_forwarding(forwarding(1))
        .put_write(write(1))
        .put_write(write(2))
        .checkpoint(checkpoint(1));
    s.apply(&b).unwrap();

    let mut b = Batch::new();
    b.delete_write(write(1).key)
        .push(Op::DeleteBinding(binding(1).id))
        .push(Op::DeleteForwarding(forwarding(1).id))
        .checkpoint(checkpoint(2));
    s.apply(&b).unwrap();

    let r = s.load().unwrap();
    assert_eq!(r.objects, vec![object(1, 1, 2), object(1, 2, 1)]);
    assert!(r.bindings.is_empty());
    assert!(r.forwarding.is_empty());
    assert_eq!(r.writes, vec![write(2)]);
    assert_eq!(r.last_checkpoint, Some(checkpoint(2)));

    // Clear, then put: only what follows the clear remains, and the marker is gone.
    let mut b = Batch::new();
    b.push(Op::Clear).put_binding(binding(4));
    s.apply(&b).unwrap();
    let r = s.load().unwrap();
    assert_eq!(
        r,
        Recovered {
            bindings: vec![binding(4)],
            ..Recovered::default()
        }
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn an_oversized_record_refuses_the_whole_batch() {
    let dir = scratch("oversized");
    let opts = StoreOptions {
        max_state_bytes: 100,
        ..StoreOptions::default()
    };
    let mut s = Store::open_with(&dir, opts).unwrap();
    s.apply(Batch::new().put_object(object(0, 0, 1))).unwrap();

    let mut big = object(0, 5, 1);
    big.state = vec![0; 101];
    let mut b = Batch::new();
    b.put_object(object(0, 1, 1))
        .delete_object(object(0, 0, 1).id)
        .put_object(big)
        .checkpoint(checkpoint(9));
    let err = s.apply(&b).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(
            err,
            StoreError::RecordTooLarge {
                table: "objects",
                len: 101,
                max: 100,
                ..
            }
        ),
        "{msg}"
    );
    assert!(msg.contains(FILE_NAME) && msg.contains("0/5"), "{msg}");
    // Nothing of the batch: object 0 still there, object 1 absent, no marker.
    let r = s.load().unwrap();
    assert_eq!(r.objects, vec![object(0, 0, 1)]);
    assert_eq!(r.last_checkpoint, None);

    let mut w = write(3);
    w.bytes = vec![0; 101];
    let err = s.apply(Batch::new().put_write(w)).unwrap_err();
    assert!(
        matches!(err, StoreError::RecordTooLarge { table: "writes", .. }),
        "{err}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn states_over_the_bound_are_reported_on_load_with_table_and_key() {
    let dir = scratch("loadbound");
    {
        let mut s = Store::open(&dir).unwrap();
        s.apply(Batch::new().put_object(object(2, 9, 1))).unwrap();
    }
    let opts = StoreOptions {
        max_state_bytes: 99,
        ..StoreOptions::default()
    };
    let s = Store::open_with(&dir, opts).unwrap();
    let err = s.load().unwrap_err();
    let msg = err.to_string();
    match err {
        StoreError::Corrupt {
            table, key, reason, ..
        } => {
            assert_eq!(table, "objects");
            assert_eq!(key, "2/9");
            assert_eq!(
                reason,
                RecordError::TooLarge {
                    what: "state",
                    len: 100,
                    max: 99
                }
            );
        }
        other => panic!("{other}"),
    }
    assert!(msg.contains(&dir.join(FILE_NAME).display().to_string()), "{msg}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn tables_over_the_record_bound_are_refused() {
    let dir = scratch("records");
    {
        let mut s = Store::open(&dir).unwrap();
        let mut b = Batch::new();
        for i in 0..5 {
            b.put_binding(binding(i));
        }
        s.apply(&b).unwrap();
    }
    let opts = StoreOptions {
        max_records: 4,
        ..StoreOptions::default()
    };
    let err = Store::open_with(&dir, opts).unwrap().load().unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::TooManyRecords {
                table: "bindings",
                max: 4,
                ..
            }
        ),
        "{err}"
    );
    let opts = StoreOptions {
        max_records: 5,
        ..StoreOptions::default()
    };
    assert_eq!(
        Store::open_with(&dir, opts)
            .unwrap()
            .load()
            .unwrap()
            .bindings
            .len(),
        5
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn operator_opens_never_create_a_store() {
    let dir = scratch("missing");
    let opts = StoreOptions {
        create: false,
        ..StoreOptions::default()
    };
    let err = Store::open_with(dir.join("typo"), opts).unwrap_err();
    assert!(matches!(err, StoreError::Missing { .. }), "{err}");
    assert!(err.to_string().contains("typo"), "{err}");
    assert!(!dir.join("typo").exists());
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_store_open_elsewhere_is_refused_as_locked() {
    let dir = scratch("locked");
    let _first = Store::open(&dir).unwrap();
    let err = Store::open(&dir).unwrap_err();
    assert!(matches!(err, StoreError::Locked { .. }), "{err}");
    assert!(err.to_string().contains(FILE_NAME), "{err}");
}

#[test]
fn foreign_or_newer_files_are_refused_by_format() {
    let dir = scratch("foreign");
    let path = dir.join(FILE_NAME);
    {
        // A redb database of someone else's.
        let db = redb::Database::create(&path).unwrap();
        let tx = db.begin_write().unwrap();
        let t: redb::TableDefinition<&str, u64> = redb::TableDefinition::new("scores");
        tx.open_table(t).unwrap().insert("a", &1).unwrap();
        tx.commit().unwrap();
    }
    let err = Store::open(&dir).unwrap_err();
    assert!(matches!(err, StoreError::Format { .. }), "{err}");
    assert!(err.to_string().contains("not a worldmesh store"), "{err}");
    std::fs::remove_file(&path).unwrap();

    {
        drop(Store::open(&dir).unwrap());
        // The same store, as written by a later format.
        let db = redb::Database::open(&path).unwrap();
        let tx = db.begin_write().unwrap();
        let t: redb::TableDefinition<&[u8], &[u8]> = redb::TableDefinition::new("meta");
        tx.open_table(t)
            .unwrap()
            .insert(b"format".as_slice(), 2u32.to_le_bytes().as_slice())
            .unwrap();
        tx.commit().unwrap();
    }
    let err = Store::open(&dir).unwrap_err();
    assert!(
        err.to_string()
            .contains("store format 2, this build reads format 1"),
        "{err}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// Each process claims a generation larger than every earlier one on the store, across
/// reopening, whatever the clock says; the claim is a meta entry, not a record.
#[test]
fn every_claimed_generation_is_larger_than_the_last_one() {
    let dir = scratch("generation");
    {
        let s = Store::open(&dir).unwrap();
        let c = s.claim_generation(1_000).unwrap();
        assert_eq!((c.generation, c.previous), (1_000, None));
        // A restart within the same second: the clock gives the same value again.
        let c = s.claim_generation(1_000).unwrap();
        assert_eq!((c.generation, c.previous), (1_001, Some(1_000)));
        assert!(s.is_empty().unwrap(), "a generation is not a record");
    }
    let s = Store::open(&dir).unwrap();
    // After the clock stepped back.
    let c = s.claim_generation(900).unwrap();
    assert_eq!((c.generation, c.previous), (1_002, Some(1_001)));
    // The clock moved on past the last claim.
    let c = s.claim_generation(5_000).unwrap();
    assert_eq!((c.generation, c.previous), (5_000, Some(1_002)));
    assert_eq!(s.load().unwrap(), Recovered::default());
    assert_eq!(s.last_generation().unwrap(), Some(5_000));
    assert_eq!(s.inspect().unwrap().last_generation, Some(5_000));
    drop(s);

    // None left after u32::MAX, and a malformed entry: typed errors, never a wrap.
    let path = dir.join(FILE_NAME);
    for (value, want) in [
        (u32::MAX.to_le_bytes().to_vec(), "none is left"),
        (vec![1, 2, 3], "3 bytes, expected 4"),
    ] {
        {
            let db = redb::Database::open(&path).unwrap();
            let tx = db.begin_write().unwrap();
            let t: redb::TableDefinition<&[u8], &[u8]> = redb::TableDefinition::new("meta");
            tx.open_table(t)
                .unwrap()
                .insert(b"generation".as_slice(), value.as_slice())
                .unwrap();
            tx.commit().unwrap();
        }
        let err = Store::open(&dir).unwrap().claim_generation(7).unwrap_err();
        assert!(matches!(err, StoreError::Format { .. }), "{err}");
        assert!(err.to_string().contains(want), "{err}");
        if value.len() != 4 {
            let err = Store::open(&dir).unwrap().inspect().unwrap_err();
            assert!(err.to_string().contains(want), "{err}");
        }
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// A process that renewed its generation while running raises the store's last one in a
/// batch, so the next process starts above the renewal; a raise never lowers it, and a
/// malformed entry is a typed error here too.
#[test]
fn a_renewed_generation_raises_the_next_claim_and_never_lowers_it() {
    let dir = scratch("raise-generation");
    {
        let mut s = Store::open(&dir).unwrap();
        // A batch before any claim sets it.
        s.apply(Batch::new().raise_generation(7)).unwrap();
        assert_eq!(s.last_generation().unwrap(), Some(7));
        let c = s.claim_generation(1_000).unwrap();
        assert_eq!((c.generation, c.previous), (1_000, Some(7)));
        // Renewed twice while running, the clock not yet past the renewals.
        s.apply(Batch::new().raise_generation(1_001)).unwrap();
        s.apply(Batch::new().raise_generation(1_002).put_binding(binding(1)))
            .unwrap();
        // A late or repeated raise keeps the larger value.
        s.apply(Batch::new().raise_generation(1_001)).unwrap();
        assert_eq!(s.last_generation().unwrap(), Some(1_002));
    }
    // After a crash: the next process, whose clock says 1_001, starts above the renewals.
    let s = Store::open(&dir).unwrap();
    let c = s.claim_generation(1_001).unwrap();
    assert_eq!((c.generation, c.previous), (1_003, Some(1_002)));
    drop(s);

    let path = dir.join(FILE_NAME);
    {
        let db = redb::Database::open(&path).unwrap();
        let tx = db.begin_write().unwrap();
        let t: redb::TableDefinition<&[u8], &[u8]> = redb::TableDefinition::new("meta");
        tx.open_table(t)
            .unwrap()
            .insert(b"generation".as_slice(), [1u8, 2].as_slice())
            .unwrap();
        tx.commit().unwrap();
    }
    let mut s = Store::open(&dir).unwrap();
    let err = s.apply(Batch::new().raise_generation(5)).unwrap_err();
    assert!(matches!(err, StoreError::Format { .. }), "{err}");
    assert!(err.to_string().contains("2 bytes, expected 4"), "{err}");
    drop(s);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_record_changed_behind_the_stores_back_is_reported_not_returned() {
    // A value rewritten through redb itself (so redb's page checksums are valid) with one
    // byte of the state changed: only the record's own CRC can tell.
    let dir = scratch("tamper");
    let path = dir.join(FILE_NAME);
    {
        let mut s = Store::open(&dir).unwrap();
        s.apply(
            Batch::new()
                .put_object(object(3, 4, 1))
                .put_object(object(3, 5, 1)),
        )
        .unwrap();
    }
    {
        let db = redb::Database::open(&path).unwrap();
        let tx = db.begin_write().unwrap();
        let t: redb::TableDefinition<&[u8], &[u8]> = redb::TableDefinition::new("objects");
        let mut table = tx.open_table(t).unwrap();
        let key = {
            let mut k = Vec::from(3u32.to_be_bytes());
            k.extend_from_slice(&5u64.to_be_bytes());
            k
        };
        let mut v = table.get(key.as_slice()).unwrap().unwrap().value().to_vec();
        v[40] ^= 0x01;
        table.insert(key.as_slice(), v.as_slice()).unwrap();
        drop(table);
        tx.commit().unwrap();
    }
    let err = Store::open(&dir).unwrap().load().unwrap_err();
    match &err {
        StoreError::Corrupt {
            table, key, reason, ..
        } => {
            assert_eq!(*table, "objects");
            assert_eq!(key, "3/5");
            assert!(matches!(reason, RecordError::Checksum { .. }), "{reason}");
        }
        other => panic!("{other}"),
    }
    std::fs::remove_dir_all(dir).unwrap();
}
