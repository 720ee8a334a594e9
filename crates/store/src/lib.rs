//! # worldmesh-store
//!
//! The per-node embedded store of issue 19 ("Durable worlds"), first part: a pure storage
//! layer under the node. It keeps, in one redb file per node (`DIR/store.redb`):
//!
//! - the node's primaries with full state, version, epoch, kind and durability class
//!   ([`ObjectRecord`]; the state is the game's opaque bytes);
//! - its name-service bindings and forwarding entries (paper `001` §3.2: bindings with
//!   epochs, forwarding entries with leases — [`BindingRecord`], [`ForwardingRecord`]);
//! - durable writes logged before they are acknowledged ([`WriteRecord`]);
//! - the marker of the last checkpoint ([`Checkpoint`]).
//!
//! [`merge()`] combines stores: the data of nodes that will not come back, moved into a
//! node that will (`worldmesh store merge`; procedure in the crate's README).
//!
//! The store knows nothing of nodes, replicas or games (it depends on `worldmesh-core`
//! only): the node decides what to persist and when, and a driver performs it as an
//! effect. Changes go in [`Batch`]es that [`Store::apply`] commits atomically and durably;
//! [`Store::load`] returns everything, verified ([`Recovered`]).
//!
//! ## Guarantees
//!
//! - **Atomic batches**: after a crash the file holds every change of a committed batch
//!   and nothing of one that was not committed (redb's copy-on-write commit; tested by
//!   killing a writing process, `tests/crash.rs`).
//! - **Durable on return**: `apply` returns after redb's commit with
//!   `Durability::Immediate` (fsync).
//! - **Never silently wrong**: redb's integrity check (every page's checksum) runs on every
//!   open, and every record carries a CRC-32 over its key and value, checked with its
//!   length bounds and fields on every load. A corrupted or truncated file is a typed
//!   [`StoreError`] naming the file (and the table and key, for a record), never a panic
//!   (a panic inside redb is caught and reported as [`StoreError::EnginePanic`]) and never
//!   data (`tests/corruption.rs` flips bytes and truncates at many offsets).
//! - **Bounded**: a record's state is at most [`StoreOptions::max_state_bytes`] (refused on
//!   write, reported on read before allocating) and a table at most
//!   [`StoreOptions::max_records`] records.
//!
//! ## Why redb
//!
//! See the crate's README.md for the measurement against a hand-written append-only log
//! with fsync (`cargo run --release -p worldmesh-store --example store_bench`).
#![forbid(unsafe_code)]

pub mod batch;
pub mod error;
pub mod memory;
pub mod merge;
pub mod record;
pub mod store;

pub use batch::{Batch, Op};
pub use error::StoreError;
pub use memory::MemStore;
pub use merge::{MergeError, MergeReport, merge};
pub use record::{
    BindingRecord, Checkpoint, ForwardingRecord, ObjectRecord, RecordError, WriteKey, WriteRecord,
};
pub use store::{FILE_NAME, GenerationClaim, Inspection, Recovered, STORE_FORMAT, Store, StoreOptions};
