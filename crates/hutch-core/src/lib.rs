//! hutch-core: the vocabulary every other hutch crate speaks.
//!
//! - [`spec`]: what a sandbox should be ([`SandboxSpec`], [`Limits`], [`NetworkPolicy`], [`Image`]).
//! - [`backend`]: the small [`Backend`] / [`Sandbox`] traits each isolation engine implements.
//! - [`exec`]: exec requests and results shared by all backends.
//! - [`timing`]: lifecycle phase timings, exportable as JSON.
//! - [`units`]: parsing of human sizes and durations (`512m`, `30s`).
#![forbid(unsafe_code)]

pub mod backend;
pub mod context;
pub mod error;
pub mod exec;
pub mod ids;
pub mod spec;
pub mod timing;
pub mod units;

pub use backend::{
    Availability, Backend, FileOps, GuestKind, Process, ProcessControl, ResetReport, Sandbox,
};
pub use context::{
    CodeError, ContextInfo, ContextOps, RichResult, RunEvent, RunOutput, RunSummary,
};
pub use error::{ErrorKind, SandboxError};
pub use exec::{
    Discard, ExecCommand, ExecOutcome, ExecRequest, ExecResult, ExecStatus, OutputEvent,
    OutputSink, StdinMode,
};
pub use hutch_proto::PtySize;
pub use hutch_proto::{
    DirEntry, ErrorCode as AgentErrorCode, FileKind, FileStat,
    PROTOCOL_VERSION as AGENT_PROTOCOL_VERSION,
};
pub use ids::{is_sandbox_id, new_sandbox_id};
pub use spec::{HostCapacity, Image, Limits, NetworkPolicy, SandboxSpec, UserSpec};
pub use timing::{Phase, PhaseTimings};
