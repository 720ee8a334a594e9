//! Merging stores: the data of nodes that will not come back, moved into a node that will
//! (issue 19 item 4, `worldmesh store merge DEST SRC...`; operator procedure in the crate's
//! README).
//!
//! [`merge`] computes what DEST holds afterwards from DEST's records and each source's:
//!
//! - **objects**: every source object is taken **under the next epoch** (its epoch + 1), as
//!   if it had migrated to DEST: the node that recovers it then announces its binding to
//!   the members that come up (the origin named in the id is gone), and they follow it.
//!   The same object in two inputs: the higher epoch wins (after the source's + 1), as
//!   recovery decides between copies; two copies under the same epoch that differ are a
//!   [`MergeError::Conflict`] (nothing is written), identical ones are one;
//! - **writers' logs** travel with their object: a log entry is kept from the input whose
//!   record of its object won (entries of an object held nowhere are kept from the first
//!   input that has them);
//! - **forwarding entries and in-doubt markers**: the one with the later epoch per object;
//!   one whose object is now held here under that epoch or a later one is dropped (the
//!   move it records ended here);
//! - **bindings**: the one with the later epoch per object;
//! - **checkpoint marker**: the **earliest** of the inputs' (recovery raises versions by
//!   the time since the checkpoint: the earliest one bounds every input's versions).

use std::collections::BTreeMap;

use worldmesh_core::ObjectId;

use crate::record::{BindingRecord, ForwardingRecord, ObjectRecord, WriteKey, WriteRecord};
use crate::store::Recovered;

/// Why stores cannot be merged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MergeError {
    /// The same object under the same epoch, with different contents, in two inputs.
    #[error(
        "object {}/{} is in {first} and in {second} under the same epoch {epoch} with different contents \
         (versions {first_version} and {second_version}): the stores disagree about who holds it; \
         export both, keep one copy by hand, and import"
    , id.origin.0, id.seq)]
    Conflict {
        /// The object.
        id: ObjectId,
        /// The epoch both copies carry (after a source's + 1).
        epoch: u32,
        /// The input that held the first copy.
        first: String,
        /// Its version.
        first_version: u64,
        /// The input that held the second copy.
        second: String,
        /// Its version.
        second_version: u64,
    },
}

/// What a merge took from where.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MergeReport {
    /// Per source, in order: objects taken from it.
    pub taken: Vec<usize>,
    /// Copies that lost to a copy under a later epoch (or were identical to one).
    pub superseded: usize,
    /// Forwarding records dropped (their move ended at DEST).
    pub forwarding_dropped: usize,
}

/// The content of DEST after merging `sources` (name, content) into `dest` (see the module
/// docs). `dest_name` and the names appear in errors.
pub fn merge(
    dest_name: &str,
    dest: &Recovered,
    sources: &[(String, Recovered)],
) -> Result<(Recovered, MergeReport), MergeError> {
    // Input 0 is DEST, input k is source k - 1.
    let mut inputs: Vec<(&str, &Recovered, u32)> = vec![(dest_name, dest, 0)];
    inputs.extend(sources.iter().map(|(n, r)| (n.as_str(), r, 1)));
    let mut report = MergeReport {
        taken: vec![0; sources.len()],
        ..MergeReport::default()
    };
    // Objects: id → (input, record).
    let mut objects: BTreeMap<ObjectId, (usize, ObjectRecord)> = BTreeMap::new();
    for (k, (name, r, bump)) in inputs.iter().enumerate() {
        for o in &r.objects {
            let mut o = o.clone();
            o.epoch = o.epoch.saturating_add(*bump);
            match objects.get(&o.id) {
                None => {
                    objects.insert(o.id, (k, o));
                }
                Some((j, held)) if held.epoch == o.epoch => {
                    if *held != o {
                        return Err(MergeError::Conflict {
                            id: o.id,
                            epoch: o.epoch,
                            first: inputs[*j].0.to_owned(),
                            first_version: held.version,
                            second: (*name).to_owned(),
                            second_version: o.version,
                        });
                    }
                    report.superseded += 1;
                }
                Some((_, held)) if held.epoch > o.epoch => report.superseded += 1,
                Some(_) => {
                    report.superseded += 1;
                    objects.insert(o.id, (k, o));
                }
            }
        }
    }
    for (k, _) in objects.values() {
        if *k > 0 {
            report.taken[k - 1] += 1;
        }
    }
    // Logs travel with the winning record.
    let mut writes: BTreeMap<WriteKey, WriteRecord> = BTreeMap::new();
    for (k, (_, r, _)) in inputs.iter().enumerate() {
        for w in &r.writes {
            let keep = match objects.get(&w.key.target) {
                Some((winner, _)) => *winner == k,
                None => true,
            };
            if keep {
                writes.entry(w.key).or_insert_with(|| w.clone());
            }
        }
    }
    let mut forwarding: BTreeMap<ObjectId, ForwardingRecord> = BTreeMap::new();
    let mut bindings: BTreeMap<ObjectId, BindingRecord> = BTreeMap::new();
    for (_, r, _) in &inputs {
        for f in &r.forwarding {
            if forwarding.get(&f.id).is_none_or(|h| h.to_epoch < f.to_epoch) {
                forwarding.insert(f.id, *f);
            }
        }
        for b in &r.bindings {
            if bindings.get(&b.id).is_none_or(|h| h.epoch < b.epoch) {
                bindings.insert(b.id, *b);
            }
        }
    }
    let before = forwarding.len();
    forwarding.retain(|id, f| objects.get(id).is_none_or(|(_, o)| o.epoch < f.to_epoch));
    report.forwarding_dropped = before - forwarding.len();
    let last_checkpoint = inputs
        .iter()
        .filter_map(|(_, r, _)| r.last_checkpoint)
        .min_by_key(|c| c.time);
    Ok((
        Recovered {
            objects: objects.into_values().map(|(_, o)| o).collect(),
            bindings: bindings.into_values().collect(),
            forwarding: forwarding.into_values().collect(),
            writes: writes.into_values().collect(),
            last_checkpoint,
        },
        report,
    ))
}

#[cfg(test)]
mod tests {
    use worldmesh_core::{Durability, NodeId, Time};

    use super::*;
    use crate::record::Checkpoint;

    fn obj(origin: u32, seq: u32, epoch: u32, version: u64) -> ObjectRecord {
        ObjectRecord {
            id: ObjectId::new(NodeId(origin), seq),
            epoch,
            version,
            durability: Durability::Durable,
            kind: 1,
            state: vec![version as u8],
        }
    }

    fn write(o: &ObjectRecord, writer: u32, seq: u64) -> WriteRecord {
        WriteRecord {
            key: WriteKey {
                target: o.id,
                writer: NodeId(writer),
                seq,
            },
            bytes: vec![0; 4],
        }
    }

    #[test]
    fn sources_move_in_under_the_next_epoch_with_their_logs() {
        let a = obj(0, 1, 0, 5);
        let b = obj(2, 1, 0, 7);
        let dest = Recovered {
            objects: vec![a.clone()],
            writes: vec![write(&a, 1, 3)],
            last_checkpoint: Some(Checkpoint {
                frame: 50,
                time: Time::from_millis(5000),
            }),
            ..Recovered::default()
        };
        let src = Recovered {
            objects: vec![b.clone()],
            writes: vec![write(&b, 1, 0), write(&b, 3, 9)],
            last_checkpoint: Some(Checkpoint {
                frame: 40,
                time: Time::from_millis(4000),
            }),
            ..Recovered::default()
        };
        let (m, r) = merge("dest", &dest, &[("src".into(), src)]).unwrap();
        assert_eq!(m.objects.len(), 2);
        assert_eq!(m.objects[0], a);
        assert_eq!(m.objects[1].epoch, 1, "taken under the next epoch");
        assert_eq!(m.writes.len(), 3);
        assert_eq!(m.last_checkpoint.map(|c| c.frame), Some(40), "the earliest");
        assert_eq!(r.taken, vec![1]);
    }

    #[test]
    fn the_later_epoch_wins_and_its_log_with_it_and_equal_epochs_that_differ_are_refused() {
        // A stale copy in DEST (epoch 1) and the source's newer one (epoch 1 + 1).
        let stale = obj(0, 1, 1, 5);
        let newer = obj(0, 1, 1, 9);
        let dest = Recovered {
            objects: vec![stale.clone()],
            writes: vec![write(&stale, 1, 2)],
            forwarding: vec![ForwardingRecord {
                id: stale.id,
                to_node: NodeId(2),
                to_epoch: 2,
                expires: None,
            }],
            ..Recovered::default()
        };
        let src = Recovered {
            objects: vec![newer.clone()],
            writes: vec![write(&newer, 1, 7)],
            ..Recovered::default()
        };
        let (m, r) = merge("dest", &dest, &[("src".into(), src.clone())]).unwrap();
        assert_eq!(m.objects.len(), 1);
        assert_eq!((m.objects[0].epoch, m.objects[0].version), (2, 9));
        assert_eq!(m.writes.iter().map(|w| w.key.seq).collect::<Vec<_>>(), vec![7]);
        assert!(m.forwarding.is_empty(), "the move it recorded ended here");
        assert_eq!((r.superseded, r.forwarding_dropped), (1, 1));
        // Two sources with the same object under the same epoch: refused unless identical.
        let other = Recovered {
            objects: vec![obj(0, 1, 1, 8)],
            ..Recovered::default()
        };
        let err = merge(
            "dest",
            &Recovered::default(),
            &[("a".into(), src.clone()), ("b".into(), other)],
        )
        .unwrap_err();
        assert!(matches!(err, MergeError::Conflict { epoch: 2, .. }), "{err}");
        assert!(err.to_string().contains("in a and in b"), "{err}");
        let (m, _) = merge(
            "dest",
            &Recovered::default(),
            &[("a".into(), src.clone()), ("b".into(), src)],
        )
        .unwrap();
        assert_eq!(m.objects.len(), 1);
    }
}
