//! Exec requests and results, shared by every backend.
use serde::Serialize;

pub use hutch_proto::{ExecCommand, ExecRequest, ExecStatus, StdinMode};

/// One event of a running process.
#[derive(Debug, Clone, PartialEq)]
pub enum OutputEvent {
    Stdout(Vec<u8>),
    Stderr(Vec<u8>),
    Exited(ExecStatus),
}

/// Receives output as it happens (`hutch run` prints it live; the API streams it).
pub trait OutputSink: Send {
    fn stdout(&mut self, data: &[u8]);
    fn stderr(&mut self, data: &[u8]);
}

/// A sink that drops everything (when only the collected result matters).
#[derive(Debug, Default)]
pub struct Discard;

impl OutputSink for Discard {
    fn stdout(&mut self, _: &[u8]) {}
    fn stderr(&mut self, _: &[u8]) {}
}

/// A finished exec: how it ended and what it printed (up to the output cap).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ExecResult {
    #[serde(flatten)]
    pub status: ExecStatus,
    #[serde(serialize_with = "lossy")]
    pub stdout: Vec<u8>,
    #[serde(serialize_with = "lossy")]
    pub stderr: Vec<u8>,
}

fn lossy<S: serde::Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&String::from_utf8_lossy(b))
}

/// How an exec ended, for people.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecOutcome {
    Exited(i32),
    Signaled(i32),
    TimedOut,
    OutOfMemory,
}

impl ExecResult {
    pub fn outcome(&self) -> ExecOutcome {
        outcome(&self.status)
    }

    /// The exit code a shell would report: the code, or 128 + signal; 124 on timeout (as
    /// coreutils `timeout`), 137 on OOM.
    pub fn shell_code(&self) -> i32 {
        match self.outcome() {
            ExecOutcome::Exited(c) => c,
            ExecOutcome::Signaled(s) => 128 + s,
            ExecOutcome::TimedOut => 124,
            ExecOutcome::OutOfMemory => 137,
        }
    }
}

pub fn outcome(s: &ExecStatus) -> ExecOutcome {
    if s.timed_out {
        ExecOutcome::TimedOut
    } else if s.oom_killed {
        ExecOutcome::OutOfMemory
    } else if let Some(c) = s.exit_code {
        ExecOutcome::Exited(c)
    } else {
        ExecOutcome::Signaled(s.signal.unwrap_or(libc_sigkill()))
    }
}

const fn libc_sigkill() -> i32 {
    9
}

impl std::fmt::Display for ExecOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExecOutcome::Exited(c) => write!(f, "exited with code {c}"),
            ExecOutcome::Signaled(s) => write!(f, "killed by signal {s}"),
            ExecOutcome::TimedOut => write!(f, "timed out: the process tree was killed"),
            ExecOutcome::OutOfMemory => {
                write!(f, "out of memory: killed at the sandbox's memory limit")
            }
        }
    }
}
