//! The container backend: each sandbox is an OCI container run by crun (default) or runc, with
//! hutch's guest agent as PID 1. hutch writes the bundle itself; the runtime creates namespaces,
//! mounts and cgroups; every command after start is one request to the agent.

pub mod bundle;
pub mod cgroups;
mod error;
pub mod image;
pub mod runtime;
mod sandbox;
pub mod seccomp;
pub mod seccomp_bpf;

pub use cgroups::CgroupLayout;
pub use error::ContainerError;
pub use runtime::{OciRuntime, RuntimeKind};
pub use sandbox::{ContainerBackend, ContainerConfig, ContainerSandbox};
