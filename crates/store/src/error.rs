//! The store's errors: each names the file, and the table and key where it applies, and
//! says what is wrong.

use std::path::PathBuf;

use crate::record::RecordError;

/// What went wrong opening, reading or writing a store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file-system operation failed (creating the directory, reading the file's size).
    #[error("{path}: cannot {action}: {error}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done.
        action: &'static str,
        /// The operating system's error (shown in the message, not chained as a source).
        error: std::io::Error,
    },
    /// There is no store file where one was expected.
    #[error("{path}: no store here (expected the file {file})", file = crate::FILE_NAME)]
    Missing {
        /// The directory given.
        path: PathBuf,
    },
    /// Another process has the store open (redb lets one process at a time open a file for
    /// writing): stop the node first.
    #[error("{path}: the store is open in another process (a running node?); stop it first")]
    Locked {
        /// The store file.
        path: PathBuf,
    },
    /// redb refused the file or failed an operation: a corrupted or truncated file (its
    /// integrity check verifies every page's checksum on open), an I/O error, a full disk.
    #[error("{path}: {action}: {error}")]
    Engine {
        /// The store file.
        path: PathBuf,
        /// What was being done.
        action: &'static str,
        /// redb's error (shown in the message, not chained as a source).
        error: Box<redb::Error>,
    },
    /// redb panicked on the file (it documents panics on some corrupted files that pass its
    /// checks); the panic is caught and reported, never propagated.
    #[error("{path}: {action}: the database engine failed on this file ({message}); the file is corrupted")]
    EnginePanic {
        /// The store file.
        path: PathBuf,
        /// What was being done.
        action: &'static str,
        /// The panic's message.
        message: String,
    },
    /// The file is a redb database but not a worldmesh store of a format this build reads.
    #[error("{path}: {reason}")]
    Format {
        /// The store file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A stored record fails verification: it is never returned.
    #[error("{path}: table `{table}`, key {key}: {reason}")]
    Corrupt {
        /// The store file.
        path: PathBuf,
        /// The table.
        table: &'static str,
        /// The record's key, as `origin/seq` (or hex if the key itself is malformed).
        key: String,
        /// What is wrong with it.
        reason: RecordError,
    },
    /// A table holds more records than [`crate::StoreOptions::max_records`] allows.
    #[error("{path}: table `{table}` holds more than {max} records (the configured bound)")]
    TooManyRecords {
        /// The store file.
        path: PathBuf,
        /// The table.
        table: &'static str,
        /// The bound.
        max: usize,
    },
    /// A record in a batch is larger than the store accepts; nothing of the batch was
    /// written.
    #[error("{path}: batch refused: table `{table}`, key {key}: {len} bytes exceed the bound of {max}")]
    RecordTooLarge {
        /// The store file.
        path: PathBuf,
        /// The table.
        table: &'static str,
        /// The record's key.
        key: String,
        /// Its state's (or write's) length.
        len: usize,
        /// The bound ([`crate::StoreOptions::max_state_bytes`]).
        max: usize,
    },
}

impl StoreError {
    pub(crate) fn engine(path: &std::path::Path, action: &'static str, e: impl Into<redb::Error>) -> Self {
        let e: redb::Error = e.into();
        if matches!(e, redb::Error::DatabaseAlreadyOpen) {
            return StoreError::Locked {
                path: path.to_path_buf(),
            };
        }
        StoreError::Engine {
            path: path.to_path_buf(),
            action,
            error: Box::new(e),
        }
    }
}
