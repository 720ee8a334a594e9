//! `worldmesh store`: operator tools for a node's embedded store (issue 19 item 5).
//! `store inspect DIR` verifies the store and prints counts, sizes, the last checkpoint and
//! the last generation a node process claimed or renewed to;
//! `store export DIR` writes every record as JSON lines; `store import DIR FILE` validates a
//! whole export (line-numbered errors) and writes it in one atomic batch; `store merge
//! DEST SRC...` moves the stores of nodes that will not come back into DEST's store in one
//! atomic batch (`worldmesh_store::merge`: sources' objects under the next epoch, the later
//! epoch wins, differing copies under one epoch refused), then renames each source's file
//! to `store.redb.merged` so it can be neither started nor merged again.
//!
//! The store is a redb file that one process at a time may open: run these on a stopped
//! node's directory (a running node's store is refused as locked).

use anyhow::{Context as _, bail};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{BufRead as _, BufWriter, Read as _};
use std::path::{Path, PathBuf};
use worldmesh_client::token::{from_hex, to_hex};
use worldmesh_core::{Durability, NodeId, ObjectId, Time};
use worldmesh_store::{
    Batch, BindingRecord, Checkpoint, ForwardingRecord, ObjectRecord, Op, Recovered, STORE_FORMAT, Store,
    StoreOptions, WriteKey, WriteRecord,
};

const STORE_HELP: &str = "\
FILES:
  DIR/store.redb   the node's store (redb; one process at a time: stop the node first)
  export format    JSON lines: a header line, then one record per line, e.g.
    {\"worldmesh_store_export\":1,\"store_format\":1}
    {\"table\":\"object\",\"origin\":0,\"seq\":5,\"epoch\":1,\"version\":9,\"durability\":\"durable\",\"kind\":2,\"state\":\"0a1b\"}
    {\"table\":\"binding\",\"origin\":3,\"seq\":1,\"node\":0,\"epoch\":2}
    {\"table\":\"forwarding\",\"origin\":0,\"seq\":7,\"to_node\":2,\"to_epoch\":1,\"expires_us\":null}
    {\"table\":\"write\",\"origin\":0,\"seq\":5,\"writer\":1,\"write_seq\":4,\"bytes\":\"ff\"}
    {\"table\":\"checkpoint\",\"frame\":1200,\"time_us\":60000000}
  States and writes are hex.

EXAMPLE (backup and restore of a stopped node):
  worldmesh store inspect /var/lib/worldmesh/node-3
  worldmesh store export /var/lib/worldmesh/node-3 --out node-3.jsonl
  worldmesh store import /var/lib/worldmesh/node-3-restored node-3.jsonl

EXAMPLE (a stopped 3-node world restarted on 2 nodes; see crates/store/README.md):
  worldmesh store merge /var/lib/worldmesh/node-0 /var/lib/worldmesh/node-2
  worldmesh store inspect /var/lib/worldmesh/node-0";

/// Arguments of `worldmesh store`.
#[derive(clap::Args, Debug)]
#[command(after_long_help = STORE_HELP)]
pub struct StoreArgs {
    #[command(subcommand)]
    command: StoreCommand,
}

#[derive(clap::Subcommand, Debug)]
enum StoreCommand {
    /// Verify every record and print counts per table and durability class, sizes, the
    /// last checkpoint and the last generation a node process claimed or renewed to.
    Inspect {
        /// The store's directory.
        dir: PathBuf,
    },
    /// Write every record as JSON lines (to standard output, or FILE).
    Export {
        /// The store's directory.
        dir: PathBuf,
        /// Write here instead of standard output (through a temporary file, renamed when
        /// complete).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Read an export, validate every line, and write it into the store at DIR (created if
    /// missing) in one atomic batch.
    Import {
        /// The store's directory.
        dir: PathBuf,
        /// The export (JSON lines).
        file: PathBuf,
        /// Replace the contents of a store that is not empty (otherwise refused).
        #[arg(long)]
        force: bool,
    },
    /// Move every record of the stores in SRC... (nodes that will not come back) into the
    /// store in DEST, in one atomic batch: the sources' objects are taken under their next
    /// epoch (as if migrated to DEST), the later epoch wins between copies of one object,
    /// and two differing copies under the same epoch are refused (nothing is written).
    /// Writers' logs go with their objects; the earliest checkpoint marker is kept. Each
    /// source's file is then renamed to store.redb.merged. Run it on stopped nodes only.
    Merge {
        /// The store that takes the records (a node that will be started again).
        dest: PathBuf,
        /// The stores of nodes that will not come back.
        #[arg(required = true)]
        src: Vec<PathBuf>,
    },
}

/// The first line of an export.
#[derive(Serialize, Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct Header {
    /// Version of the export format.
    worldmesh_store_export: u32,
    /// The store format the records come from.
    store_format: u32,
}

/// The export format's version.
const EXPORT_VERSION: u32 = 1;

/// One record of an export.
#[derive(Serialize, Deserialize, Debug)]
#[serde(tag = "table", rename_all = "snake_case", deny_unknown_fields)]
enum Line {
    Object {
        origin: u32,
        seq: u64,
        epoch: u32,
        version: u64,
        durability: Durability,
        kind: u8,
        state: String,
    },
    Binding {
        origin: u32,
        seq: u64,
        node: u32,
        epoch: u32,
    },
    Forwarding {
        origin: u32,
        seq: u64,
        to_node: u32,
        to_epoch: u32,
        expires_us: Option<u64>,
    },
    Write {
        origin: u32,
        seq: u64,
        writer: u32,
        write_seq: u64,
        bytes: String,
    },
    Checkpoint {
        frame: u64,
        time_us: u64,
    },
}

/// Runs the command.
pub fn run(args: StoreArgs) -> anyhow::Result<()> {
    match args.command {
        StoreCommand::Inspect { dir } => inspect(&dir),
        StoreCommand::Export { dir, out } => export(&dir, out.as_deref()),
        StoreCommand::Import { dir, file, force } => import(&dir, &file, force),
        StoreCommand::Merge { dest, src } => merge(&dest, &src),
    }
}

fn open_existing(dir: &Path) -> anyhow::Result<Store> {
    Ok(Store::open_with(
        dir,
        StoreOptions {
            create: false,
            ..StoreOptions::default()
        },
    )?)
}

fn seconds(t: Time) -> String {
    format!("{:.3} s", t.as_secs_f64())
}

fn inspect(dir: &Path) -> anyhow::Result<()> {
    let i = open_existing(dir)?.inspect()?;
    println!("store          {}", i.path.display());
    println!("file           {} bytes", i.file_bytes);
    println!("format         {STORE_FORMAT}");
    println!("verified       every record (checksums, bounds, keys)");
    for (table, n) in i.records {
        println!("{table:<14} {n}");
    }
    for (d, n) in i.objects_by_durability {
        println!("  {:<12} {n}", d.name());
    }
    println!("state bytes    {}", i.state_bytes);
    println!("write bytes    {}", i.write_bytes);
    match i.last_checkpoint {
        Some(c) => println!("checkpoint     frame {} at {}", c.frame, seconds(c.time)),
        None => println!("checkpoint     none"),
    }
    match i.last_generation {
        Some(g) => println!("generation     {g} (the last node process's; the next is larger)"),
        None => println!("generation     none (no node has run on this store)"),
    }
    Ok(())
}

fn lines(r: &Recovered) -> impl Iterator<Item = Line> + '_ {
    let objects = r.objects.iter().map(|o| Line::Object {
        origin: o.id.origin.0,
        seq: o.id.seq,
        epoch: o.epoch,
        version: o.version,
        durability: o.durability,
        kind: o.kind,
        state: to_hex(&o.state),
    });
    let bindings = r.bindings.iter().map(|b| Line::Binding {
        origin: b.id.origin.0,
        seq: b.id.seq,
        node: b.node.0,
        epoch: b.epoch,
    });
    let forwarding = r.forwarding.iter().map(|f| Line::Forwarding {
        origin: f.id.origin.0,
        seq: f.id.seq,
        to_node: f.to_node.0,
        to_epoch: f.to_epoch,
        expires_us: f.expires.map(Time::as_micros),
    });
    let writes = r.writes.iter().map(|w| Line::Write {
        origin: w.key.target.origin.0,
        seq: w.key.target.seq,
        writer: w.key.writer.0,
        write_seq: w.key.seq,
        bytes: to_hex(&w.bytes),
    });
    let checkpoint = r.last_checkpoint.map(|c| Line::Checkpoint {
        frame: c.frame,
        time_us: c.time.as_micros(),
    });
    objects
        .chain(bindings)
        .chain(forwarding)
        .chain(writes)
        .chain(checkpoint)
}

fn write_export(r: &Recovered, mut w: impl std::io::Write) -> std::io::Result<()> {
    let header = Header {
        worldmesh_store_export: EXPORT_VERSION,
        store_format: STORE_FORMAT,
    };
    serde_json::to_writer(&mut w, &header)?;
    w.write_all(b"\n")?;
    for line in lines(r) {
        serde_json::to_writer(&mut w, &line)?;
        w.write_all(b"\n")?;
    }
    w.flush()
}

fn export(dir: &Path, out: Option<&Path>) -> anyhow::Result<()> {
    let r = open_existing(dir)?.load()?;
    let Some(out) = out else {
        let stdout = std::io::stdout().lock();
        return write_export(&r, BufWriter::new(stdout)).context("standard output");
    };
    let mut tmp = out.as_os_str().to_owned();
    tmp.push(".partial");
    let tmp = PathBuf::from(tmp);
    let file = std::fs::File::create(&tmp).with_context(|| format!("{}: cannot create", tmp.display()))?;
    let mut w = BufWriter::new(file);
    write_export(&r, &mut w).with_context(|| format!("{}: cannot write", tmp.display()))?;
    w.into_inner()
        .map_err(|e| e.into_error())
        .and_then(|f| f.sync_all())
        .with_context(|| format!("{}: cannot write", tmp.display()))?;
    std::fs::rename(&tmp, out)
        .with_context(|| format!("cannot rename {} to {}", tmp.display(), out.display()))?;
    let n = r.objects.len() + r.bindings.len() + r.forwarding.len() + r.writes.len();
    eprintln!("exported {n} records to {}", out.display());
    Ok(())
}

/// A record's identity in its table, to refuse an export that names one twice.
#[derive(PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Slot {
    Object(u32, u64),
    Binding(u32, u64),
    Forwarding(u32, u64),
    Write(u32, u64, u32, u64),
    Checkpoint,
}

/// Parses and validates an export; errors name the file and line.
fn parse_export(file: &Path, opts: StoreOptions) -> anyhow::Result<Batch> {
    let f = std::fs::File::open(file).with_context(|| format!("{}: cannot open", file.display()))?;
    let mut reader = std::io::BufReader::new(f);
    // Hex doubles a state; the other fields and the JSON syntax take well under 1 KiB.
    let max_line = 2 * opts.max_state_bytes + 1024;
    let mut seen: BTreeMap<Slot, usize> = BTreeMap::new();
    let mut per_table: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut batch = Batch::new();
    let mut buf = Vec::new();
    let mut line_no = 0usize;
    let mut header = false;
    loop {
        buf.clear();
        let n = reader
            .by_ref()
            .take(max_line as u64 + 1)
            .read_until(b'\n', &mut buf)
            .with_context(|| format!("{}:{}: cannot read", file.display(), line_no + 1))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        let at = || format!("{}:{line_no}", file.display());
        if buf.len() > max_line && buf.last() != Some(&b'\n') {
            bail!("{}: line longer than {max_line} bytes", at());
        }
        let text = std::str::from_utf8(&buf).map_err(|e| anyhow::anyhow!("{}: not UTF-8: {e}", at()))?;
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        if !header {
            let h: Header = serde_json::from_str(text).map_err(|e| {
                anyhow::anyhow!(
                    "{}: not a worldmesh store export header ({e}); expected {{\"worldmesh_store_export\":{EXPORT_VERSION},\"store_format\":{STORE_FORMAT}}}",
                    at()
                )
            })?;
            if h.worldmesh_store_export != EXPORT_VERSION || h.store_format != STORE_FORMAT {
                bail!(
                    "{}: export version {} of store format {}; this build reads version {EXPORT_VERSION} of format {STORE_FORMAT}",
                    at(),
                    h.worldmesh_store_export,
                    h.store_format
                );
            }
            header = true;
            continue;
        }
        let line: Line = serde_json::from_str(text).map_err(|e| anyhow::anyhow!("{}: {e}", at()))?;
        let hex = |field: &str, s: &str| {
            from_hex(s, opts.max_state_bytes).map_err(|e| anyhow::anyhow!("{}: field `{field}`: {e}", at()))
        };
        let (slot, table, op) = match line {
            Line::Object {
                origin,
                seq,
                epoch,
                version,
                durability,
                kind,
                state,
            } => (
                Slot::Object(origin, seq),
                "objects",
                Op::PutObject(ObjectRecord {
                    id: ObjectId {
                        origin: NodeId(origin),
                        seq,
                    },
                    epoch,
                    version,
                    durability,
                    kind,
                    state: hex("state", &state)?,
                }),
            ),
            Line::Binding {
                origin,
                seq,
                node,
                epoch,
            } => (
                Slot::Binding(origin, seq),
                "bindings",
                Op::PutBinding(BindingRecord {
                    id: ObjectId {
                        origin: NodeId(origin),
                        seq,
                    },
                    node: NodeId(node),
                    epoch,
                }),
            ),
            Line::Forwarding {
                origin,
                seq,
                to_node,
                to_epoch,
                expires_us,
            } => (
                Slot::Forwarding(origin, seq),
                "forwarding",
                Op::PutForwarding(ForwardingRecord {
                    id: ObjectId {
                        origin: NodeId(origin),
                        seq,
                    },
                    to_node: NodeId(to_node),
                    to_epoch,
                    expires: expires_us.map(Time::from_micros),
                }),
            ),
            Line::Write {
                origin,
                seq,
                writer,
                write_seq,
                bytes,
            } => (
                Slot::Write(origin, seq, writer, write_seq),
                "writes",
                Op::PutWrite(WriteRecord {
                    key: WriteKey {
                        target: ObjectId {
                            origin: NodeId(origin),
                            seq,
                        },
                        writer: NodeId(writer),
                        seq: write_seq,
                    },
                    bytes: hex("bytes", &bytes)?,
                }),
            ),
            Line::Checkpoint { frame, time_us } => {
                if let Some(first) = seen.insert(Slot::Checkpoint, line_no) {
                    bail!("{}: a second checkpoint line (the first is line {first})", at());
                }
                batch.checkpoint(Checkpoint {
                    frame,
                    time: Time::from_micros(time_us),
                });
                continue;
            }
        };
        if let Some(first) = seen.insert(slot, line_no) {
            bail!("{}: the same {table} record as line {first}", at());
        }
        let count = per_table.entry(table).or_default();
        *count += 1;
        if *count > opts.max_records {
            bail!(
                "{}: more than {} {table} records (the store's bound)",
                at(),
                opts.max_records
            );
        }
        batch.push(op);
    }
    if !header {
        bail!("{}: empty: no export header", file.display());
    }
    Ok(batch)
}

fn import(dir: &Path, file: &Path, force: bool) -> anyhow::Result<()> {
    let opts = StoreOptions::default();
    // Validate the whole file before touching the store.
    let parsed = parse_export(file, opts)?;
    let mut store = Store::open_with(dir, opts)?;
    let mut batch = Batch::new();
    if !store.is_empty()? {
        if !force {
            bail!(
                "{}: the store is not empty: give --force to replace its contents with {}",
                store.path().display(),
                file.display()
            );
        }
        batch.push(Op::Clear);
    }
    for op in parsed.ops() {
        batch.push(op.clone());
    }
    if let Some(c) = parsed.checkpoint_marker() {
        batch.checkpoint(c);
    }
    let n = parsed.ops().len();
    store.apply(&batch)?;
    // Read back what was written: the import is done only if it verifies.
    store.load()?;
    eprintln!("imported {n} records into {}", store.path().display());
    Ok(())
}

fn merge(dest: &Path, srcs: &[PathBuf]) -> anyhow::Result<()> {
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let mut seen = vec![canonical(dest)];
    for s in srcs {
        let c = canonical(s);
        if seen.contains(&c) {
            bail!(
                "{} is named twice (DEST and every SRC must be different stores)",
                s.display()
            );
        }
        seen.push(c);
    }
    let mut store = open_existing(dest)?;
    let into = store.load()?;
    let mut sources = Vec::with_capacity(srcs.len());
    for s in srcs {
        // Each source is read, verified and closed (its lock released) before anything
        // is written.
        let r = open_existing(s)?.load()?;
        sources.push((s.display().to_string(), r));
    }
    let (merged, report) = worldmesh_store::merge(&dest.display().to_string(), &into, &sources)?;
    let content = merged.to_batch();
    let mut batch = Batch::new();
    batch.push(Op::Clear);
    for op in content.ops() {
        batch.push(op.clone());
    }
    if let Some(c) = content.checkpoint_marker() {
        batch.checkpoint(c);
    }
    store.apply(&batch)?;
    // Done only if what was written reads back verified and whole.
    let back = store.load()?;
    if back != merged {
        bail!(
            "{}: the merged store does not read back as written",
            store.path().display()
        );
    }
    drop(store);
    for s in srcs {
        let from = s.join(worldmesh_store::FILE_NAME);
        let to = s.join(format!("{}.merged", worldmesh_store::FILE_NAME));
        std::fs::rename(&from, &to).with_context(|| {
            format!(
                "rename {} to {} (the merge itself is done)",
                from.display(),
                to.display()
            )
        })?;
    }
    for ((name, _), n) in sources.iter().zip(&report.taken) {
        eprintln!("merged {name}: {n} objects taken");
    }
    eprintln!(
        "{}: {} objects, {} logged writes, {} forwarding entries ({} copies superseded by a later epoch, {} forwarding entries ended here)",
        dest.display(),
        merged.objects.len(),
        merged.writes.len(),
        merged.forwarding.len(),
        report.superseded,
        report.forwarding_dropped
    );
    Ok(())
}
