//! The small traits every isolation engine implements.
//!
//! A [`Backend`] says whether it can run here and creates sandboxes; a [`Sandbox`] is one live
//! isolated environment. Every command-level operation is built on [`Sandbox::spawn`], so a
//! backend implements one process primitive and gets `exec` for free.
use async_trait::async_trait;
use hutch_proto::{DirEntry, FileStat};
use serde::Serialize;

use crate::exec::{ExecRequest, ExecResult, OutputEvent, OutputSink};
use crate::{PhaseTimings, SandboxError, SandboxSpec};

/// What [`Sandbox::reset`] left behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ResetReport {
    pub processes_left: u32,
    pub entries_left: u32,
}

impl ResetReport {
    pub fn is_clean(&self) -> bool {
        self.processes_left == 0 && self.entries_left == 0
    }
}

/// Whether a backend works on this host, and if not, why and what to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Availability {
    pub backend: String,
    pub available: bool,
    /// What was checked and what was found.
    pub detail: String,
    /// When unavailable: what to install or change.
    pub fix: Option<String>,
}

impl Availability {
    pub fn yes(backend: impl Into<String>, detail: impl Into<String>) -> Self {
        Self { backend: backend.into(), available: true, detail: detail.into(), fix: None }
    }

    pub fn no(
        backend: impl Into<String>,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Self {
            backend: backend.into(),
            available: false,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }

    /// The error to return when a caller insists on an unavailable backend.
    pub fn into_error(self) -> SandboxError {
        SandboxError::Unavailable {
            backend: self.backend,
            reason: self.detail,
            fix: self.fix.unwrap_or_default(),
        }
    }
}

/// What kind of programs a backend's sandboxes run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GuestKind {
    /// A Linux userland: processes, a shell, signals, /proc.
    Posix,
    /// WebAssembly (WASI): one instance per command, no shell, no fork, only the workspace.
    Wasi,
}

#[async_trait]
pub trait Backend: Send + Sync {
    /// Stable name, e.g. `container:crun`.
    fn name(&self) -> String;

    /// What its sandboxes run; callers that need a shell check this first.
    fn guest_kind(&self) -> GuestKind {
        GuestKind::Posix
    }

    /// Really tries to run something (a file descriptor or a binary on PATH proves nothing).
    async fn availability(&self) -> Availability;

    /// Prepares a sandbox (bundle, directories); nothing runs yet. Call [`Sandbox::start`] next.
    async fn create(&self, spec: SandboxSpec) -> Result<Box<dyn Sandbox>, SandboxError>;

    /// Reconnects to a sandbox this backend created earlier (e.g. before a daemon restart) and
    /// that is still running. Backends that cannot say so.
    async fn adopt(&self, id: &str) -> Result<Box<dyn Sandbox>, SandboxError> {
        Err(SandboxError::runtime(
            "adopt",
            format!("backend {} cannot reattach to sandbox {id}", self.name()),
        ))
    }

    /// Removes whatever is left on the host of sandbox `id` (it could not be adopted, or it is
    /// unknown to the caller). Idempotent.
    async fn reap(&self, _id: &str) -> Result<(), SandboxError> {
        Ok(())
    }

    /// Ids of the sandboxes of this backend that exist on the host right now (running or with
    /// leftovers), for reconciliation after a restart.
    async fn sandbox_ids(&self) -> Vec<String> {
        Vec::new()
    }

    /// Host resources this backend holds right now (engine containers, cgroups, ...), one string
    /// each, for leak checks and reconciliation.
    async fn host_resources(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Input and signals for a running command; cheap to share with another task (e.g. one that
/// forwards a terminal's stdin while the owner reads output).
#[async_trait]
pub trait ProcessControl: Send + Sync {
    async fn write_stdin(&self, data: &[u8]) -> Result<(), SandboxError>;
    async fn close_stdin(&self) -> Result<(), SandboxError>;
    async fn signal(&self, signal: i32) -> Result<(), SandboxError>;
    /// Resizes the terminal of a command started with `pty`.
    async fn resize(&self, _size: hutch_proto::PtySize) -> Result<(), SandboxError> {
        Err(SandboxError::Unsupported("resizing a terminal".into()))
    }
}

/// A running command inside a sandbox.
#[async_trait]
pub trait Process: Send {
    /// The process id inside the sandbox.
    fn pid(&self) -> u32;
    fn control(&self) -> std::sync::Arc<dyn ProcessControl>;
    /// The next output chunk or the exit; after `Exited` the process is finished.
    async fn next_event(&mut self) -> Result<OutputEvent, SandboxError>;
}

/// File operations inside a sandbox. Paths are the guest's; relative ones resolve in the workdir.
#[async_trait]
pub trait FileOps: Send + Sync {
    /// Writes a whole file (creating parent directories), replacing what was there.
    async fn write_file(
        &self,
        path: &str,
        data: &[u8],
        mode: Option<u32>,
    ) -> Result<(), SandboxError>;
    async fn read_file(&self, path: &str) -> Result<Vec<u8>, SandboxError>;
    async fn list_dir(&self, path: &str) -> Result<Vec<DirEntry>, SandboxError>;
    async fn stat(&self, path: &str) -> Result<FileStat, SandboxError>;
    async fn remove(&self, path: &str, recursive: bool) -> Result<(), SandboxError>;
    async fn make_dir(&self, path: &str, parents: bool) -> Result<(), SandboxError>;
    async fn rename(&self, from: &str, to: &str) -> Result<(), SandboxError>;
}

#[async_trait]
pub trait Sandbox: Send + Sync {
    fn id(&self) -> &str;
    fn spec(&self) -> &SandboxSpec;
    /// Phase timings so far.
    fn timings(&self) -> PhaseTimings;

    /// Starts the engine and waits until the guest agent answers.
    async fn start(&mut self) -> Result<(), SandboxError>;

    /// Starts a command. With `StdinMode::Inline`, `stdin` is its whole input.
    async fn spawn(
        &self,
        req: ExecRequest,
        stdin: Vec<u8>,
    ) -> Result<Box<dyn Process>, SandboxError>;

    /// Runs a command to completion, streaming its output to `sink` and collecting it (up to the
    /// request's output limit) into the result.
    async fn exec(
        &self,
        req: ExecRequest,
        stdin: Vec<u8>,
        sink: &mut dyn OutputSink,
    ) -> Result<ExecResult, SandboxError> {
        // The guest enforces the cap; the host bounds what it keeps in memory all the same.
        let keep = (req.output_limit as usize).saturating_add(256);
        let mut p = self.spawn(req, stdin).await?;
        let mut res = ExecResult::default();
        loop {
            match p.next_event().await? {
                OutputEvent::Stdout(d) => {
                    sink.stdout(&d);
                    let room = keep.saturating_sub(res.stdout.len());
                    res.stdout.extend_from_slice(&d[..d.len().min(room)]);
                }
                OutputEvent::Stderr(d) => {
                    sink.stderr(&d);
                    let room = keep.saturating_sub(res.stderr.len());
                    res.stderr.extend_from_slice(&d[..d.len().min(room)]);
                }
                OutputEvent::Exited(st) => {
                    res.status = st;
                    return Ok(res);
                }
            }
        }
    }

    /// The sandbox's file operations (the agent connection, for agent-based backends).
    fn files(&self) -> Result<&dyn FileOps, SandboxError>;

    /// The sandbox's code contexts (persistent interpreters). Backends without them say so.
    fn contexts(&self) -> Result<&dyn crate::ContextOps, SandboxError> {
        Err(SandboxError::Unsupported("code contexts".into()))
    }

    async fn write_file(
        &self,
        path: &str,
        data: &[u8],
        mode: Option<u32>,
    ) -> Result<(), SandboxError> {
        self.files()?.write_file(path, data, mode).await
    }
    async fn read_file(&self, path: &str) -> Result<Vec<u8>, SandboxError> {
        self.files()?.read_file(path).await
    }
    async fn list_dir(&self, path: &str) -> Result<Vec<DirEntry>, SandboxError> {
        self.files()?.list_dir(path).await
    }
    async fn stat(&self, path: &str) -> Result<FileStat, SandboxError> {
        self.files()?.stat(path).await
    }
    async fn remove(&self, path: &str, recursive: bool) -> Result<(), SandboxError> {
        self.files()?.remove(path, recursive).await
    }
    async fn make_dir(&self, path: &str, parents: bool) -> Result<(), SandboxError> {
        self.files()?.make_dir(path, parents).await
    }
    async fn rename(&self, from: &str, to: &str) -> Result<(), SandboxError> {
        self.files()?.rename(from, to).await
    }

    /// Returns the sandbox to a clean state for another user: no processes but the agent, empty
    /// workspace, /tmp and shared-memory directories, no IPC objects. The report says what was
    /// left (a clean sandbox reports zeros); callers must not reuse a sandbox that is not clean.
    async fn reset(&self) -> Result<ResetReport, SandboxError> {
        Err(SandboxError::Unsupported("resetting a sandbox".into()))
    }

    /// Forgets the sandbox without destroying it, so that it can be adopted later (daemon
    /// shutdown that keeps sandboxes). Backends that cannot be adopted destroy it as `Drop` does.
    fn detach(self: Box<Self>) {}

    /// Stops every process; the sandbox can no longer run commands.
    async fn stop(&mut self) -> Result<(), SandboxError>;

    /// Removes everything the sandbox created on the host (processes, cgroups, mounts, files).
    /// Safe to call in any state; returns the final timings.
    async fn destroy(self: Box<Self>) -> Result<PhaseTimings, SandboxError>;
}
