//! The in-memory model the simulator persists to (`MemStore`) keeps exactly what the real
//! store keeps: random sequences of batches applied to both load equal, and claim the same
//! generation after them.

mod common;

use common::{binding, checkpoint, forwarding, object, scratch, write};
use proptest::prelude::*;
use worldmesh_core::{NodeId, ObjectId};
use worldmesh_store::{Batch, MemStore, Op, Store, WriteKey};

/// One random change over a small key space (so puts, deletes and overwrites collide).
fn op() -> impl Strategy<Value = Op> {
    (0u8..10, 0u32..12, 1u64..5).prop_map(|(kind, i, v)| match kind {
        0 | 1 => Op::PutObject(object(0, i, v)),
        2 => Op::DeleteObject(ObjectId::new(NodeId(0), i)),
        3 => Op::PutBinding(binding(i)),
        4 => Op::DeleteBinding(ObjectId::new(NodeId(7), i)),
        5 => Op::PutForwarding(forwarding(i)),
        6 => Op::PutWrite(write(i)),
        7 => Op::DeleteWrite(WriteKey {
            target: ObjectId::new(NodeId(0), i % 10),
            writer: NodeId(1 + i % 2),
            seq: u64::from(i) + 1,
        }),
        8 => Op::RaiseGeneration(i),
        _ if i == 0 => Op::Clear,
        _ => Op::DeleteForwarding(ObjectId::new(NodeId(0), 1000 + i)),
    })
}

fn batch() -> impl Strategy<Value = Batch> {
    (prop::collection::vec(op(), 0..12), prop::option::of(0u64..100)).prop_map(|(ops, c)| {
        let mut b = Batch::new();
        for o in ops {
            b.push(o);
        }
        if let Some(f) = c {
            b.checkpoint(checkpoint(f));
        }
        b
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn the_model_loads_what_the_real_store_loads(batches in prop::collection::vec(batch(), 1..8)) {
        let mut real = Store::open(scratch("memory")).unwrap();
        let mut model = MemStore::new();
        for b in &batches {
            real.apply(b).unwrap();
            model.apply(b);
            prop_assert_eq!(real.load().unwrap(), model.load());
            prop_assert_eq!(real.last_generation().unwrap(), model.last_generation());
        }
        prop_assert_eq!(model.batches(), batches.len() as u64);
        // A process starting after these batches claims the same generation from either.
        let claim = model.claim_generation(5).unwrap();
        prop_assert_eq!(real.claim_generation(5).unwrap(), claim);
        prop_assert_eq!(real.last_generation().unwrap(), Some(claim.generation));
    }
}
