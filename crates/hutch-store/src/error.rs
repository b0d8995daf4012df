//! The store's error type. Messages are lowercase and never repeat their source: the chain is
//! printed once, at the edge (CLI or API), so `Sqlite` says only which layer failed.
use std::path::PathBuf;

use crate::model::SandboxState;

/// What can go wrong talking to the state store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite itself failed (I/O, a busy database past the timeout, a broken file).
    #[error("state store error")]
    Sqlite(#[from] rusqlite::Error),
    /// Opening, configuring or migrating the database file failed.
    #[error("cannot open the state store at {}", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    /// SQLite would not switch the file to WAL journaling (some network or odd filesystems).
    #[error("the state store at {} cannot use WAL (journal mode is {mode})", path.display())]
    NotWal { path: PathBuf, mode: String },
    /// The database was migrated by a newer hutch than this one.
    #[error("state store schema {found} is newer than this hutch's ({known}); upgrade hutch")]
    SchemaTooNew { found: i64, known: i64 },
    /// No sandbox with this id (or, for [`touch`](crate::Store::touch), no live one).
    #[error("sandbox {0} not found")]
    NotFound(String),
    /// The state machine forbids this transition (see [`SandboxState::allowed_from`]).
    #[error("sandbox {id} cannot go from {from} to {to}")]
    InvalidTransition { id: String, from: SandboxState, to: SandboxState },
    /// A row holds something this build cannot read (bad JSON, unknown state text).
    #[error("corrupt state store row: {0}")]
    Corrupt(String),
    /// An insert collided with an existing id (or, for keys, an existing secret).
    #[error("{0} already exists")]
    Duplicate(String),
}

/// `Result` with [`StoreError`].
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// A sandbox state name that is not one of the six states.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown sandbox state {0:?} (expected cold, warming, warm, running, waiting or stopped)")]
pub struct ParseStateError(pub String);

/// True when `e` is a primary-key or unique-constraint violation, i.e. the row already exists.
pub(crate) fn is_duplicate(e: &rusqlite::Error) -> bool {
    match e {
        rusqlite::Error::SqliteFailure(f, _) => matches!(
            f.extended_code,
            rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY | rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
        ),
        _ => false,
    }
}
