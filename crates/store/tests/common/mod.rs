//! Shared by the store's integration tests: scratch directories and sample records.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use worldmesh_core::{Durability, NodeId, ObjectId, Time};
use worldmesh_store::{BindingRecord, Checkpoint, ForwardingRecord, ObjectRecord, WriteKey, WriteRecord};

/// A fresh, empty directory under Cargo's per-target scratch space.
pub fn scratch(name: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("store-{name}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// Object `i` of node `node`, version `version`, with a state of about 100 bytes that
/// depends on all three.
pub fn object(node: u32, i: u32, version: u64) -> ObjectRecord {
    let durability = Durability::ALL[(i % 3) as usize];
    let state = (0..100u32)
        .map(|b| (b.wrapping_mul(31) ^ i ^ (version as u32).wrapping_mul(7)) as u8)
        .collect();
    ObjectRecord {
        id: ObjectId::new(NodeId(node), i),
        epoch: i % 4,
        version,
        durability,
        kind: (i % 5) as u8,
        state,
    }
}

pub fn binding(i: u32) -> BindingRecord {
    BindingRecord {
        id: ObjectId::new(NodeId(7), i),
        node: NodeId(i % 3),
        epoch: i,
    }
}

pub fn forwarding(i: u32) -> ForwardingRecord {
    ForwardingRecord {
        id: ObjectId::new(NodeId(0), 1000 + i),
        to_node: NodeId(2),
        to_epoch: 1 + i,
        expires: i
            .is_multiple_of(2)
            .then(|| Time::from_millis(5000 + u64::from(i))),
    }
}

pub fn write(i: u32) -> WriteRecord {
    WriteRecord {
        key: WriteKey {
            target: ObjectId::new(NodeId(0), i % 10),
            writer: NodeId(1 + i % 2),
            seq: u64::from(i) + 1,
        },
        bytes: vec![i as u8; 24],
    }
}

pub fn checkpoint(frame: u64) -> Checkpoint {
    Checkpoint {
        frame,
        time: Time::from_millis(frame * 50),
    }
}
