//! hutch-store: the daemon's state, in one embedded SQLite database.
//!
//! - [`Store`]: the connection (WAL, behind a mutex) and every operation on it: sandboxes and
//!   their state machine ([`SandboxState::allowed_from`]), pools, API keys, the audit log.
//! - [`model`]: the rows ([`SandboxRow`], [`KeyRow`], [`AuditRow`]), [`ListFilter`], [`Stats`].
//! - `schema`: the append-only migrations, applied by [`Store::open`].
//! - [`mod@bench`]: latency of the hot-path operations, for `hutch bench`.
//!
//! Every time is unix milliseconds ([`now_ms`]); callers pass `now` in so tests control time.
#![forbid(unsafe_code)]

mod audit;
pub mod bench;
pub mod error;
mod keys;
pub mod model;
mod pools;
mod schema;
mod store;

pub use error::{ParseStateError, Result, StoreError};
pub use keys::hash_key;
pub use model::{now_ms, AuditRow, KeyRow, ListFilter, SandboxRow, SandboxState, Stats};
pub use store::Store;
