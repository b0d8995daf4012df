//! `hutch serve`: a daemon that keeps sandboxes, pools and their state.
//!
//! - [`daemon`]: the sandbox manager: admission under a capacity with eviction by priority,
//!   warm pools with fresh or recycled reuse, TTL expiry and the idle sweep, reconciliation with
//!   the host after a restart, graceful shutdown. State lives in SQLite (hutch-store).
//! - [`api`]: the HTTP API (`fn router(daemon) -> Router`), errors as `{code, message}`.
//! - [`metrics`]: Prometheus text exposition.
#![forbid(unsafe_code)]

pub mod api;
pub mod config;
pub mod daemon;
pub mod error;
pub mod live;
pub mod metrics;
mod pool;
pub mod serve;

pub use api::router;
pub use config::{OnShutdown, ServerConfig};
pub use daemon::Daemon;
pub use error::ApiError;
