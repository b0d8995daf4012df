//! The host side of the agent protocol. One [`AgentClient`] per sandbox multiplexes any number of
//! concurrent requests on one Unix stream: a reader task routes every frame to the waiting caller
//! by id. Also provides the agent-backed [`AgentProcess`] and file helpers every backend reuses.
#![forbid(unsafe_code)]

mod client;
mod locate;
mod ops;

pub use client::{AgentClient, HelloInfo};
pub use locate::{is_static_elf, locate_agent};
pub use ops::{AgentControl, AgentProcess, ExitHook, TimedProcess, HOST_DEADLINE_GRACE};
