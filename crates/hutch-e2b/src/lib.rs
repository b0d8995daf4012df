//! The E2B-compatible API of `hutch serve`: the stock `e2b` and `e2b-code-interpreter` SDKs
//! work against it unchanged, pointed at it with `E2B_API_URL` and `E2B_SANDBOX_URL`.
//!
//! One port serves both planes. A request with an `E2b-Sandbox-Id` header goes to that sandbox
//! (`E2b-Sandbox-Port` 49983: envd, [`process`], [`filesystem`] and [`files`]; 49999: the
//! [`interpreter`]); every other request is the REST control plane ([`rest`]). The contract of
//! the REST part is `spec/e2b-openapi.yaml`; the whole is described in docs/e2b.md.
#![forbid(unsafe_code)]

pub mod connect;
pub mod error;
pub mod files;
pub mod filesystem;
pub mod interpreter;
pub mod model;
pub mod plane;
pub mod process;
pub mod rest;
mod state;

pub use error::E2bError;
pub use state::{router, E2b};

/// The envd version hutch advertises: the highest whose SDK feature gates hutch satisfies
/// (commands with closable stdin, octet-stream and gzip uploads; not file metadata or watch
/// events with entries, which come with 0.6.2 and 0.6.3).
pub const ENVD_VERSION: &str = "0.5.7";
