//! [`Store`]: one node's redb file, opened with its integrity verified, written in atomic
//! durable batches, read back with every record verified.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use redb::{Database, ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition};
use worldmesh_core::Durability;

use crate::batch::{Batch, Op};
use crate::error::StoreError;
use crate::record::{
    BindingRecord, CHECKPOINT_KEY, Checkpoint, ForwardingRecord, ObjectRecord, RecordError, WriteRecord,
    display_key, object_key, write_key,
};

/// The store's file inside its directory.
pub const FILE_NAME: &str = "store.redb";

/// The store format this build writes and reads (kept in the `meta` table).
pub const STORE_FORMAT: u32 = 1;

type Raw = TableDefinition<'static, &'static [u8], &'static [u8]>;

/// Table of primaries.
pub const OBJECTS: &str = "objects";
/// Table of name-service bindings.
pub const BINDINGS: &str = "bindings";
/// Table of forwarding entries.
pub const FORWARDING: &str = "forwarding";
/// Table of logged durable writes.
pub const WRITES: &str = "writes";
/// Table of the format number, the checkpoint marker and the last generation claimed.
pub const META: &str = "meta";

const T_OBJECTS: Raw = TableDefinition::new(OBJECTS);
const T_BINDINGS: Raw = TableDefinition::new(BINDINGS);
const T_FORWARDING: Raw = TableDefinition::new(FORWARDING);
const T_WRITES: Raw = TableDefinition::new(WRITES);
const T_META: Raw = TableDefinition::new(META);
const FORMAT_KEY: &[u8] = b"format";
const GENERATION_KEY: &[u8] = b"generation";

/// What [`Store::claim_generation`] gave this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GenerationClaim {
    /// The generation this process runs as.
    pub generation: u32,
    /// The last generation an earlier process claimed in this store, if any.
    pub previous: Option<u32>,
}

/// Bounds and behaviour of [`Store::open`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreOptions {
    /// The largest state (or write) a record may carry, in bytes: larger ones are refused
    /// when written and reported as corrupt when read (checked before allocating).
    pub max_state_bytes: usize,
    /// The most records one table may hold when loaded.
    pub max_records: usize,
    /// Create the directory and the file if missing (a node's own store); false for
    /// operator tools, which must not create an empty store by a typo.
    pub create: bool,
    /// redb's page cache, in bytes.
    pub cache_bytes: usize,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            max_state_bytes: 256 * 1024,
            max_records: 16 * 1024 * 1024,
            create: true,
            cache_bytes: 64 * 1024 * 1024,
        }
    }
}

/// Everything a store holds, verified, in id order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Primaries.
    pub objects: Vec<ObjectRecord>,
    /// Name-service bindings.
    pub bindings: Vec<BindingRecord>,
    /// Forwarding entries.
    pub forwarding: Vec<ForwardingRecord>,
    /// Logged durable writes not yet covered by a checkpoint.
    pub writes: Vec<WriteRecord>,
    /// The last checkpoint marker written.
    pub last_checkpoint: Option<Checkpoint>,
}

impl Recovered {
    /// True if there is no record and no checkpoint marker.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
            && self.bindings.is_empty()
            && self.forwarding.is_empty()
            && self.writes.is_empty()
            && self.last_checkpoint.is_none()
    }

    /// The batch that recreates exactly this content in an empty store.
    pub fn to_batch(&self) -> Batch {
        let mut b = Batch::new();
        for o in &self.objects {
            b.put_object(o.clone());
        }
        for r in &self.bindings {
            b.put_binding(*r);
        }
        for r in &self.forwarding {
            b.put_forwarding(*r);
        }
        for w in &self.writes {
            b.put_write(w.clone());
        }
        if let Some(c) = self.last_checkpoint {
            b.checkpoint(c);
        }
        b
    }
}

/// What `worldmesh store inspect` shows: counts, sizes, last checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inspection {
    /// The store file.
    pub path: PathBuf,
    /// The file's size on disk, in bytes.
    pub file_bytes: u64,
    /// Records per table, in the order objects, bindings, forwarding, writes.
    pub records: [(&'static str, usize); 4],
    /// Objects per durability class, in the order of [`Durability::ALL`].
    pub objects_by_durability: [(Durability, usize); 3],
    /// Bytes of object states.
    pub state_bytes: u64,
    /// Bytes of logged writes.
    pub write_bytes: u64,
    /// The last checkpoint marker.
    pub last_checkpoint: Option<Checkpoint>,
    /// The last generation a node process that ran on this store claimed
    /// ([`Store::claim_generation`]) or renewed to ([`Op::RaiseGeneration`]); `None` if
    /// none did.
    pub last_generation: Option<u32>,
}

impl Inspection {
    /// Summarises `r`, read from `path` whose size is `file_bytes` and whose meta table
    /// holds `last_generation`.
    pub fn of(path: &Path, file_bytes: u64, r: &Recovered, last_generation: Option<u32>) -> Self {
        let by = Durability::ALL.map(|d| (d, r.objects.iter().filter(|o| o.durability == d).count()));
        Self {
            path: path.to_path_buf(),
            file_bytes,
            records: [
                (OBJECTS, r.objects.len()),
                (BINDINGS, r.bindings.len()),
                (FORWARDING, r.forwarding.len()),
                (WRITES, r.writes.len()),
            ],
            objects_by_durability: by,
            state_bytes: r.objects.iter().map(|o| o.state.len() as u64).sum(),
            write_bytes: r.writes.iter().map(|w| w.bytes.len() as u64).sum(),
            last_checkpoint: r.last_checkpoint,
            last_generation,
        }
    }
}

/// One node's embedded store: a single redb file, `DIR/store.redb`.
///
/// redb gives atomic, durable transactions (a commit returns once the data is fsynced;
/// after a crash the file holds every committed transaction and nothing of an uncommitted
/// one) and checksums its pages; the store opens every file with redb's integrity check on
/// and adds a CRC to every record, verified on every load, so a changed byte is reported
/// with the table and key it hit instead of being returned. redb locks the file: one
/// process at a time.
pub struct Store {
    db: Database,
    path: PathBuf,
    options: StoreOptions,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// Attaches the file and the action to a redb error.
trait Context<T> {
    fn ctx(self, path: &Path, action: &'static str) -> Result<T, StoreError>;
}

impl<T, E: Into<redb::Error>> Context<T> for Result<T, E> {
    fn ctx(self, path: &Path, action: &'static str) -> Result<T, StoreError> {
        self.map_err(|err| StoreError::engine(path, action, err))
    }
}

/// Runs `f`, turning a panic inside redb into [`StoreError::EnginePanic`].
fn guarded<T>(
    path: &Path,
    action: &'static str,
    f: impl FnOnce() -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| {
        let message = p
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic".to_owned());
        Err(StoreError::EnginePanic {
            path: path.to_path_buf(),
            action,
            message,
        })
    })
}

impl Store {
    /// Opens (or creates) the store in `dir` with default options.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with(dir, StoreOptions::default())
    }

    /// Opens the store in `dir`. The file's integrity is checked (every page checksum) and
    /// its format verified; a new file is initialised.
    pub fn open_with(dir: impl AsRef<Path>, options: StoreOptions) -> Result<Self, StoreError> {
        let dir = dir.as_ref();
        let path = dir.join(FILE_NAME);
        let exists = match std::fs::metadata(&path) {
            Ok(m) if m.is_file() => true,
            Ok(_) => {
                return Err(StoreError::Format {
                    path,
                    reason: "not a file".to_owned(),
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(error) => {
                return Err(StoreError::Io {
                    path,
                    action: "read the store file's metadata",
                    error,
                });
            }
        };
        if !exists {
            if !options.create {
                return Err(StoreError::Missing {
                    path: dir.to_path_buf(),
                });
            }
            std::fs::create_dir_all(dir).map_err(|error| StoreError::Io {
                path: dir.to_path_buf(),
                action: "create the store directory",
                error,
            })?;
        }
        let db = guarded(&path, "open", || {
            let mut builder = Database::builder();
            builder
                .set_check_integrity_on_open(true)
                .set_cache_size(options.cache_bytes);
            // An existing file is only ever opened, never re-initialised: redb's `create`
            // would turn a file truncated to nothing into an empty store.
            let db = if exists {
                builder.open(&path)
            } else {
                builder.create(&path)
            };
            db.map_err(|e| StoreError::engine(&path, "open", e))
        })?;
        let store = Self { db, path, options };
        guarded(&store.path, "check the format", || store.init_or_check_format())?;
        Ok(store)
    }

    /// The store file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The options the store was opened with.
    pub fn options(&self) -> StoreOptions {
        self.options
    }

    /// The file's size on disk, in bytes.
    pub fn file_bytes(&self) -> Result<u64, StoreError> {
        std::fs::metadata(&self.path)
            .map(|m| m.len())
            .map_err(|error| StoreError::Io {
                path: self.path.clone(),
                action: "read the store file's size",
                error,
            })
    }

    /// Claims the generation a starting process of this node runs as: the larger of
    /// `at_least` and one more than the last generation claimed in this store, written
    /// durably before this returns. No two processes that ran on one store share a
    /// generation — not a restart within the second of the last start, nor one after the
    /// wall clock stepped back — so the cluster always sees a restart as a new member. A
    /// process that renewed its generation while running wrote the renewal with
    /// [`Op::RaiseGeneration`], so the claim is above that one too (unless the process died
    /// before the batch carrying it was on disk).
    ///
    /// # Errors
    /// The meta table cannot be read or written; the stored value is not 4 bytes
    /// ([`StoreError::Format`]); or the last generation is `u32::MAX`.
    pub fn claim_generation(&self, at_least: u32) -> Result<GenerationClaim, StoreError> {
        guarded(&self.path, "claim a generation", || {
            let tx = self.db.begin_write().ctx(&self.path, "begin a transaction")?;
            let mut meta = tx.open_table(T_META).ctx(&self.path, "open table meta")?;
            let previous = self.read_generation(&meta)?;
            let generation = match previous {
                None => at_least,
                Some(p) => p
                    .checked_add(1)
                    .ok_or_else(|| self.format_error(format!("the last generation is {p}: none is left")))?
                    .max(at_least),
            };
            meta.insert(GENERATION_KEY, generation.to_le_bytes().as_slice())
                .ctx(&self.path, "write the generation")?;
            drop(meta);
            tx.commit().ctx(&self.path, "commit the generation")?;
            Ok(GenerationClaim { generation, previous })
        })
    }

    /// The last generation a process that ran on this store claimed or renewed to
    /// ([`Op::RaiseGeneration`]), if any.
    ///
    /// # Errors
    /// The meta table cannot be read, or the stored value is not 4 bytes.
    pub fn last_generation(&self) -> Result<Option<u32>, StoreError> {
        guarded(&self.path, "read the generation", || {
            let tx = self.db.begin_read().ctx(&self.path, "begin a read transaction")?;
            let meta = tx.open_table(T_META).ctx(&self.path, "open table meta")?;
            self.read_generation(&meta)
        })
    }

    fn read_generation(
        &self,
        meta: &impl ReadableTable<&'static [u8], &'static [u8]>,
    ) -> Result<Option<u32>, StoreError> {
        let Some(v) = meta.get(GENERATION_KEY).ctx(&self.path, "read the generation")? else {
            return Ok(None);
        };
        match <[u8; 4]>::try_from(v.value()) {
            Ok(a) => Ok(Some(u32::from_le_bytes(a))),
            Err(_) => Err(self.format_error(format!(
                "the generation in table `{META}` is {} bytes, expected 4",
                v.value().len()
            ))),
        }
    }

    fn format_error(&self, reason: impl Into<String>) -> StoreError {
        StoreError::Format {
            path: self.path.clone(),
            reason: reason.into(),
        }
    }

    /// A new file gets the format number and every table; an existing one must carry this
    /// build's format number.
    fn init_or_check_format(&self) -> Result<(), StoreError> {
        let tx = self.db.begin_write().ctx(&self.path, "begin a transaction")?;
        let names: Vec<String> = tx
            .list_tables()
            .ctx(&self.path, "list tables")?
            .map(|t| redb::TableHandle::name(&t).to_owned())
            .collect();
        if names.is_empty() {
            for def in [T_OBJECTS, T_BINDINGS, T_FORWARDING, T_WRITES] {
                tx.open_table(def).ctx(&self.path, "create a table")?;
            }
            let mut meta = tx.open_table(T_META).ctx(&self.path, "create a table")?;
            meta.insert(FORMAT_KEY, STORE_FORMAT.to_le_bytes().as_slice())
                .ctx(&self.path, "write the format")?;
            drop(meta);
            return tx.commit().ctx(&self.path, "commit the new store");
        }
        let has_meta = names.iter().any(|n| n == META);
        if !has_meta {
            return Err(self.format_error(format!(
                "a redb database but not a worldmesh store (tables: {})",
                names.join(", ")
            )));
        }
        let meta = tx.open_table(T_META).ctx(&self.path, "open the meta table")?;
        let format = meta.get(FORMAT_KEY).ctx(&self.path, "read the format")?;
        let found = format.as_ref().map(|v| v.value().to_vec());
        match found.as_deref() {
            Some(v) if v == STORE_FORMAT.to_le_bytes() => {}
            Some(v) => {
                return Err(self.format_error(match <[u8; 4]>::try_from(v) {
                    Ok(a) => format!(
                        "store format {}, this build reads format {STORE_FORMAT}",
                        u32::from_le_bytes(a)
                    ),
                    Err(_) => format!("the format marker is {} bytes, expected 4", v.len()),
                }));
            }
            None => return Err(self.format_error("the meta table has no format marker")),
        }
        for n in [OBJECTS, BINDINGS, FORWARDING, WRITES] {
            if !names.iter().any(|t| t == n) {
                return Err(self.format_error(format!("the table `{n}` is missing")));
            }
        }
        drop(format);
        drop(meta);
        tx.abort().ctx(&self.path, "end the transaction")
    }

    /// Applies `batch` in one durable transaction: when this returns `Ok` every change is
    /// on disk (fsynced); when it returns an error, or the process dies before it returns,
    /// none is. A record larger than [`StoreOptions::max_state_bytes`] refuses the whole
    /// batch before anything is written.
    pub fn apply(&mut self, batch: &Batch) -> Result<(), StoreError> {
        let max = self.options.max_state_bytes;
        for op in &batch.ops {
            let (table, key, len) = match op {
                Op::PutObject(o) => (OBJECTS, &object_key(o.id)[..], o.state.len()),
                Op::PutWrite(w) => (WRITES, &write_key(w.key)[..], w.bytes.len()),
                _ => continue,
            };
            // u32 lengths on disk: the bound can never exceed them.
            if len > max || len > u32::MAX as usize {
                return Err(StoreError::RecordTooLarge {
                    path: self.path.clone(),
                    table,
                    key: display_key(key),
                    len,
                    max,
                });
            }
        }
        let path = self.path.clone();
        guarded(&path, "apply a batch", || self.apply_checked(batch))
    }

    fn apply_checked(&mut self, batch: &Batch) -> Result<(), StoreError> {
        let tx = self.db.begin_write().ctx(&self.path, "begin a transaction")?;
        {
            let mut objects = tx.open_table(T_OBJECTS).ctx(&self.path, "open table objects")?;
            let mut bindings = tx.open_table(T_BINDINGS).ctx(&self.path, "open table bindings")?;
            let mut forwarding = tx
                .open_table(T_FORWARDING)
                .ctx(&self.path, "open table forwarding")?;
            let mut writes = tx.open_table(T_WRITES).ctx(&self.path, "open table writes")?;
            let mut meta = tx.open_table(T_META).ctx(&self.path, "open table meta")?;
            for op in &batch.ops {
                match op {
                    Op::PutObject(r) => {
                        let (k, v) = r.encode();
                        objects
                            .insert(k.as_slice(), v.as_slice())
                            .ctx(&self.path, "write")?;
                    }
                    Op::DeleteObject(id) => {
                        objects
                            .remove(object_key(*id).as_slice())
                            .ctx(&self.path, "write")?;
                    }
                    Op::PutBinding(r) => {
                        let (k, v) = r.encode();
                        bindings
                            .insert(k.as_slice(), v.as_slice())
                            .ctx(&self.path, "write")?;
                    }
                    Op::DeleteBinding(id) => {
                        bindings
                            .remove(object_key(*id).as_slice())
                            .ctx(&self.path, "write")?;
                    }
                    Op::PutForwarding(r) => {
                        let (k, v) = r.encode();
                        forwarding
                            .insert(k.as_slice(), v.as_slice())
                            .ctx(&self.path, "write")?;
                    }
                    Op::DeleteForwarding(id) => {
                        forwarding
                            .remove(object_key(*id).as_slice())
                            .ctx(&self.path, "write")?;
                    }
                    Op::PutWrite(r) => {
                        let (k, v) = r.encode();
                        writes
                            .insert(k.as_slice(), v.as_slice())
                            .ctx(&self.path, "write")?;
                    }
                    Op::DeleteWrite(key) => {
                        writes
                            .remove(write_key(*key).as_slice())
                            .ctx(&self.path, "write")?;
                    }
                    Op::Clear => {
                        for t in [&mut objects, &mut bindings, &mut forwarding, &mut writes] {
                            t.retain(|_, _| false).ctx(&self.path, "clear")?;
                        }
                        meta.remove(CHECKPOINT_KEY).ctx(&self.path, "write")?;
                    }
                    Op::RaiseGeneration(g) => {
                        if self.read_generation(&meta)?.is_none_or(|last| last < *g) {
                            meta.insert(GENERATION_KEY, g.to_le_bytes().as_slice())
                                .ctx(&self.path, "write the generation")?;
                        }
                    }
                }
            }
            if let Some(c) = batch.checkpoint {
                meta.insert(CHECKPOINT_KEY, c.encode().as_slice())
                    .ctx(&self.path, "write the checkpoint marker")?;
            }
        }
        tx.commit().ctx(&self.path, "commit")
    }

    /// Reads and verifies everything: every record's CRC, fields and key, every size bound.
    /// The first record that fails is an error naming the file, table and key; nothing
    /// unverified is returned.
    pub fn load(&self) -> Result<Recovered, StoreError> {
        guarded(&self.path, "load", || self.load_checked())
    }

    fn load_checked(&self) -> Result<Recovered, StoreError> {
        let tx = self.db.begin_read().ctx(&self.path, "begin a read transaction")?;
        let max = self.options.max_state_bytes;
        let objects = self.read_table(&tx, T_OBJECTS, OBJECTS, |k, v| ObjectRecord::decode(k, v, max))?;
        let bindings = self.read_table(&tx, T_BINDINGS, BINDINGS, BindingRecord::decode)?;
        let forwarding = self.read_table(&tx, T_FORWARDING, FORWARDING, ForwardingRecord::decode)?;
        let writes = self.read_table(&tx, T_WRITES, WRITES, |k, v| WriteRecord::decode(k, v, max))?;
        let meta = tx.open_table(T_META).ctx(&self.path, "open table meta")?;
        let last_checkpoint = match meta
            .get(CHECKPOINT_KEY)
            .ctx(&self.path, "read the checkpoint marker")?
        {
            None => None,
            Some(v) => Some(
                Checkpoint::decode(v.value()).map_err(|reason| StoreError::Corrupt {
                    path: self.path.clone(),
                    table: META,
                    key: "checkpoint".to_owned(),
                    reason,
                })?,
            ),
        };
        Ok(Recovered {
            objects,
            bindings,
            forwarding,
            writes,
            last_checkpoint,
        })
    }

    fn read_table<T>(
        &self,
        tx: &redb::ReadTransaction,
        def: Raw,
        table: &'static str,
        decode: impl Fn(&[u8], &[u8]) -> Result<T, RecordError>,
    ) -> Result<Vec<T>, StoreError> {
        let t = tx.open_table(def).ctx(&self.path, "open a table")?;
        let n = t.len().ctx(&self.path, "count records")?;
        let max = self.options.max_records;
        if n > max as u64 {
            return Err(StoreError::TooManyRecords {
                path: self.path.clone(),
                table,
                max,
            });
        }
        let mut out = Vec::with_capacity(n as usize);
        for entry in t.iter().ctx(&self.path, "read a table")? {
            let (k, v) = entry.ctx(&self.path, "read a record")?;
            if out.len() == max {
                return Err(StoreError::TooManyRecords {
                    path: self.path.clone(),
                    table,
                    max,
                });
            }
            let r = decode(k.value(), v.value()).map_err(|reason| StoreError::Corrupt {
                path: self.path.clone(),
                table,
                key: display_key(k.value()),
                reason,
            })?;
            out.push(r);
        }
        Ok(out)
    }

    /// Verifies everything and summarises it (`worldmesh store inspect`).
    pub fn inspect(&self) -> Result<Inspection, StoreError> {
        let r = self.load()?;
        Ok(Inspection::of(
            &self.path,
            self.file_bytes()?,
            &r,
            self.last_generation()?,
        ))
    }

    /// True if the store holds no record and no checkpoint marker (cheap: counts only).
    pub fn is_empty(&self) -> Result<bool, StoreError> {
        let tx = self.db.begin_read().ctx(&self.path, "begin a read transaction")?;
        for def in [T_OBJECTS, T_BINDINGS, T_FORWARDING, T_WRITES] {
            if !tx
                .open_table(def)
                .ctx(&self.path, "open a table")?
                .is_empty()
                .ctx(&self.path, "count records")?
            {
                return Ok(false);
            }
        }
        let meta = tx.open_table(T_META).ctx(&self.path, "open table meta")?;
        Ok(meta
            .get(CHECKPOINT_KEY)
            .ctx(&self.path, "read the checkpoint marker")?
            .is_none())
    }
}
