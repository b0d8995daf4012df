//! Typed operations on an [`AgentClient`]: processes and files.
use async_trait::async_trait;
use std::sync::Arc;

use hutch_core::{
    FileOps, OutputEvent, Phase, PhaseTimings, Process, ProcessControl, SandboxError,
};
use hutch_proto::ExecStatus;
use hutch_proto::{DirEntry, ErrorCode, ExecRequest, FileStat, Request, Response, FILE_CHUNK};
use tokio::sync::mpsc;

use crate::client::{AgentClient, Routed};

/// A command running under the agent.
pub struct AgentProcess {
    client: AgentClient,
    id: u64,
    pid: u32,
    rx: mpsc::UnboundedReceiver<Routed>,
    finished: bool,
    /// The agent enforces the timeout; this host-side deadline (timeout + grace) only guards
    /// against an agent that stops answering (a guest can tamper with its own agent).
    deadline: Option<tokio::time::Instant>,
}

/// How long past an exec's timeout the host waits for the agent's own timeout report.
pub const HOST_DEADLINE_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

impl Drop for AgentProcess {
    fn drop(&mut self) {
        self.client.forget(self.id);
    }
}

fn unexpected(r: &Response) -> SandboxError {
    SandboxError::Agent {
        code: ErrorCode::Unknown,
        message: format!("unexpected agent answer {r:?}"),
    }
}

impl AgentClient {
    pub async fn spawn(
        &self,
        req: ExecRequest,
        stdin: Vec<u8>,
    ) -> Result<AgentProcess, SandboxError> {
        let id = self.next_id();
        let deadline = req.timeout_ms.map(|t| {
            tokio::time::Instant::now() + std::time::Duration::from_millis(t) + HOST_DEADLINE_GRACE
        });
        let mut rx = self.send(Request::Exec { id, exec: req }, &stdin).await?;
        match rx.recv().await {
            Some((Response::Started { pid, .. }, _)) => {
                Ok(AgentProcess { client: self.clone(), id, pid, rx, finished: false, deadline })
            }
            Some((Response::Error { code, message, .. }, _)) => {
                self.forget(id);
                Err(SandboxError::Agent { code, message })
            }
            Some((other, _)) => {
                self.forget(id);
                Err(unexpected(&other))
            }
            None => Err(SandboxError::AgentGone),
        }
    }

    async fn ok(&self, req: Request, body: &[u8]) -> Result<(), SandboxError> {
        match self.call(req, body).await? {
            (Response::Ok { .. }, _) => Ok(()),
            (other, _) => Err(unexpected(&other)),
        }
    }

    /// Writes a whole file, in chunks the frame limit allows.
    pub async fn write_file(
        &self,
        path: &str,
        data: &[u8],
        mode: Option<u32>,
    ) -> Result<(), SandboxError> {
        let mut chunks = data.chunks(FILE_CHUNK);
        let first = chunks.next().unwrap_or(&[]);
        self.ok(
            Request::WriteFile {
                id: self.next_id(),
                path: path.into(),
                mode,
                append: false,
                within: self.within(),
            },
            first,
        )
        .await?;
        for c in chunks {
            self.ok(
                Request::WriteFile {
                    id: self.next_id(),
                    path: path.into(),
                    mode: None,
                    append: true,
                    within: self.within(),
                },
                c,
            )
            .await?;
        }
        Ok(())
    }

    pub async fn read_file(&self, path: &str) -> Result<Vec<u8>, SandboxError> {
        let mut out = Vec::new();
        loop {
            let req = Request::ReadFile {
                id: self.next_id(),
                path: path.into(),
                offset: out.len() as u64,
                len: FILE_CHUNK as u64,
                within: self.within(),
            };
            match self.call(req, &[]).await? {
                (Response::FileData { eof, size, .. }, data) => {
                    if out.is_empty() {
                        out.reserve(size as usize);
                    }
                    let empty = data.is_empty();
                    out.extend_from_slice(&data);
                    if eof || empty {
                        return Ok(out);
                    }
                }
                (other, _) => return Err(unexpected(&other)),
            }
        }
    }

    pub async fn list_dir(&self, path: &str) -> Result<Vec<DirEntry>, SandboxError> {
        match self
            .call(
                Request::ListDir { id: self.next_id(), path: path.into(), within: self.within() },
                &[],
            )
            .await?
        {
            (Response::Entries { entries, .. }, _) => Ok(entries),
            (other, _) => Err(unexpected(&other)),
        }
    }

    pub async fn stat(&self, path: &str) -> Result<FileStat, SandboxError> {
        match self
            .call(
                Request::Stat { id: self.next_id(), path: path.into(), within: self.within() },
                &[],
            )
            .await?
        {
            (Response::StatOk { stat, .. }, _) => Ok(stat),
            (other, _) => Err(unexpected(&other)),
        }
    }

    pub async fn remove(&self, path: &str, recursive: bool) -> Result<(), SandboxError> {
        self.ok(
            Request::Remove {
                id: self.next_id(),
                path: path.into(),
                recursive,
                within: self.within(),
            },
            &[],
        )
        .await
    }

    pub async fn make_dir(&self, path: &str, parents: bool) -> Result<(), SandboxError> {
        self.ok(
            Request::MakeDir {
                id: self.next_id(),
                path: path.into(),
                parents,
                within: self.within(),
            },
            &[],
        )
        .await
    }

    pub async fn rename(&self, from: &str, to: &str) -> Result<(), SandboxError> {
        self.ok(
            Request::Rename {
                id: self.next_id(),
                from: from.into(),
                to: to.into(),
                within: self.within(),
            },
            &[],
        )
        .await
    }

    /// Cleans the sandbox for its next user; returns (processes left, entries left).
    pub async fn reset(&self, wipe: Vec<String>) -> Result<(u32, u32), SandboxError> {
        match self.call(Request::Reset { id: self.next_id(), wipe }, &[]).await? {
            (Response::ResetOk { processes_left, entries_left, .. }, _) => {
                Ok((processes_left, entries_left))
            }
            (other, _) => Err(unexpected(&other)),
        }
    }

    /// Asks the agent to kill everything and exit (the sandbox stops).
    pub async fn shutdown(&self) -> Result<(), SandboxError> {
        match self.call(Request::Shutdown { id: self.next_id() }, &[]).await {
            Ok(_) | Err(SandboxError::AgentGone) => Ok(()),
            Err(e) => Err(e),
        }
    }

    pub async fn health(&self) -> Result<(u64, u32), SandboxError> {
        match self.call(Request::Health { id: self.next_id() }, &[]).await? {
            (Response::HealthOk { uptime_ms, processes, .. }, _) => Ok((uptime_ms, processes)),
            (other, _) => Err(unexpected(&other)),
        }
    }
}

/// Stdin and signals of one agent process.
pub struct AgentControl {
    client: AgentClient,
    id: u64,
}

#[async_trait]
impl ProcessControl for AgentControl {
    async fn write_stdin(&self, data: &[u8]) -> Result<(), SandboxError> {
        self.client.send_only(&Request::Stdin { id: self.id }, data).await
    }

    async fn close_stdin(&self) -> Result<(), SandboxError> {
        self.client.send_only(&Request::StdinClose { id: self.id }, &[]).await
    }

    async fn signal(&self, signal: i32) -> Result<(), SandboxError> {
        let req = Request::Signal { id: self.client.next_id(), exec_id: self.id, signal };
        match self.client.call(req, &[]).await? {
            (Response::Ok { .. }, _) => Ok(()),
            (other, _) => Err(unexpected(&other)),
        }
    }

    async fn resize(&self, size: hutch_proto::PtySize) -> Result<(), SandboxError> {
        let req = Request::PtyResize { id: self.client.next_id(), exec_id: self.id, size };
        match self.client.call(req, &[]).await? {
            (Response::Ok { .. }, _) => Ok(()),
            (other, _) => Err(unexpected(&other)),
        }
    }
}

#[async_trait]
impl Process for AgentProcess {
    fn pid(&self) -> u32 {
        self.pid
    }

    fn control(&self) -> Arc<dyn ProcessControl> {
        Arc::new(AgentControl { client: self.client.clone(), id: self.id })
    }

    async fn next_event(&mut self) -> Result<OutputEvent, SandboxError> {
        if self.finished {
            return Err(SandboxError::Agent {
                code: ErrorCode::NoSuchProcess,
                message: "the process has already exited".into(),
            });
        }
        let next = match self.deadline {
            None => self.rx.recv().await,
            Some(d) => match tokio::time::timeout_at(d, self.rx.recv()).await {
                Ok(v) => v,
                Err(_) => {
                    // The agent missed its own deadline: kill from here and report a timeout.
                    let kill =
                        Request::Signal { id: self.client.next_id(), exec_id: self.id, signal: 9 };
                    let _ = self.client.send_only(&kill, &[]).await;
                    self.finished = true;
                    let status = hutch_proto::ExecStatus {
                        signal: Some(9),
                        timed_out: true,
                        ..Default::default()
                    };
                    return Ok(OutputEvent::Exited(status));
                }
            },
        };
        match next {
            Some((Response::Stdout { .. }, d)) => Ok(OutputEvent::Stdout(d)),
            Some((Response::Stderr { .. }, d)) => Ok(OutputEvent::Stderr(d)),
            Some((Response::Exited { status, .. }, _)) => {
                self.finished = true;
                Ok(OutputEvent::Exited(status))
            }
            Some((Response::Error { code, message, .. }, _)) => {
                Err(SandboxError::Agent { code, message })
            }
            Some((other, _)) => Err(unexpected(&other)),
            None => Err(SandboxError::AgentGone),
        }
    }
}

#[async_trait]
impl FileOps for AgentClient {
    async fn write_file(
        &self,
        path: &str,
        data: &[u8],
        mode: Option<u32>,
    ) -> Result<(), SandboxError> {
        AgentClient::write_file(self, path, data, mode).await
    }
    async fn read_file(&self, path: &str) -> Result<Vec<u8>, SandboxError> {
        AgentClient::read_file(self, path).await
    }
    async fn list_dir(&self, path: &str) -> Result<Vec<DirEntry>, SandboxError> {
        AgentClient::list_dir(self, path).await
    }
    async fn stat(&self, path: &str) -> Result<FileStat, SandboxError> {
        AgentClient::stat(self, path).await
    }
    async fn remove(&self, path: &str, recursive: bool) -> Result<(), SandboxError> {
        AgentClient::remove(self, path, recursive).await
    }
    async fn make_dir(&self, path: &str, parents: bool) -> Result<(), SandboxError> {
        AgentClient::make_dir(self, path, parents).await
    }
    async fn rename(&self, from: &str, to: &str) -> Result<(), SandboxError> {
        AgentClient::rename(self, from, to).await
    }
}

/// Adds to an exit status what only the host knows (e.g. OOM kills from the cgroup).
pub type ExitHook = Arc<dyn Fn(&mut ExecStatus) + Send + Sync>;

/// An [`AgentProcess`] that records its run time in the sandbox's `exec` phase and lets the
/// backend annotate the exit status.
pub struct TimedProcess {
    inner: AgentProcess,
    started: std::time::Instant,
    timings: Arc<std::sync::Mutex<PhaseTimings>>,
    on_exit: Option<ExitHook>,
}

impl TimedProcess {
    pub fn new(
        inner: AgentProcess,
        timings: Arc<std::sync::Mutex<PhaseTimings>>,
        on_exit: Option<ExitHook>,
    ) -> Self {
        Self { inner, started: std::time::Instant::now(), timings, on_exit }
    }
}

#[async_trait]
impl Process for TimedProcess {
    fn pid(&self) -> u32 {
        self.inner.pid()
    }

    fn control(&self) -> Arc<dyn ProcessControl> {
        self.inner.control()
    }

    async fn next_event(&mut self) -> Result<OutputEvent, SandboxError> {
        let ev = self.inner.next_event().await?;
        if let OutputEvent::Exited(mut st) = ev {
            self.timings
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .add(Phase::Exec, self.started.elapsed());
            if let Some(hook) = &self.on_exit {
                hook(&mut st);
            }
            return Ok(OutputEvent::Exited(st));
        }
        Ok(ev)
    }
}

#[async_trait]
impl hutch_core::ContextOps for AgentClient {
    async fn create_context(
        &self,
        language: &str,
        cwd: Option<&str>,
        env: std::collections::BTreeMap<String, String>,
    ) -> Result<hutch_core::ContextInfo, SandboxError> {
        let req = Request::ContextCreate {
            id: self.next_id(),
            language: language.into(),
            cwd: cwd.map(String::from),
            env,
        };
        match self.call(req, &[]).await? {
            (Response::ContextCreated { context, .. }, _) => Ok(context),
            (other, _) => Err(unexpected(&other)),
        }
    }

    async fn run_code(
        &self,
        context_id: &str,
        code: &str,
        timeout_ms: Option<u64>,
        output_limit: u64,
        sink: hutch_core::context::RunSink<'_>,
    ) -> Result<hutch_core::RunOutput, SandboxError> {
        use hutch_core::{RichResult, RunEvent, RunOutput};
        let id = self.next_id();
        let deadline = timeout_ms.map(|t| {
            tokio::time::Instant::now()
                + std::time::Duration::from_millis(t)
                + HOST_DEADLINE_GRACE
                + std::time::Duration::from_secs(20)
        });
        let req =
            Request::ContextRun { id, context_id: context_id.into(), timeout_ms, output_limit };
        let mut rx = self.send(req, code.as_bytes()).await?;
        let keep = (output_limit as usize).saturating_add(256);
        let mut out = RunOutput::default();
        let result = loop {
            let next = match deadline {
                None => rx.recv().await,
                Some(d) => match tokio::time::timeout_at(d, rx.recv()).await {
                    Ok(v) => v,
                    Err(_) => {
                        break Err(SandboxError::AgentNotReady(
                            "the agent stopped answering during a code run".into(),
                        ))
                    }
                },
            };
            let ev = match next {
                Some((Response::Stdout { .. }, d)) => RunEvent::Stdout(d),
                Some((Response::Stderr { .. }, d)) => RunEvent::Stderr(d),
                Some((Response::ContextResult { main, data, .. }, _)) => {
                    RunEvent::Result(RichResult { main, data })
                }
                Some((Response::ContextError { error, .. }, _)) => RunEvent::Error(error),
                Some((Response::ContextDone { summary, .. }, _)) => {
                    out.summary = summary;
                    break Ok(());
                }
                Some((Response::Error { code, message, .. }, _)) => {
                    break Err(SandboxError::Agent { code, message })
                }
                Some((other, _)) => break Err(unexpected(&other)),
                None => break Err(SandboxError::AgentGone),
            };
            sink(&ev);
            match ev {
                RunEvent::Stdout(d) => out
                    .stdout
                    .extend_from_slice(&d[..d.len().min(keep.saturating_sub(out.stdout.len()))]),
                RunEvent::Stderr(d) => out
                    .stderr
                    .extend_from_slice(&d[..d.len().min(keep.saturating_sub(out.stderr.len()))]),
                RunEvent::Result(r) => {
                    if out.results.len() < 256 {
                        out.results.push(r);
                    }
                }
                RunEvent::Error(e) => out.error = Some(e),
            }
        };
        self.forget(id);
        result.map(|()| out)
    }

    async fn interrupt_context(&self, context_id: &str) -> Result<(), SandboxError> {
        self.ok(
            Request::ContextInterrupt { id: self.next_id(), context_id: context_id.into() },
            &[],
        )
        .await
    }

    async fn restart_context(
        &self,
        context_id: &str,
    ) -> Result<hutch_core::ContextInfo, SandboxError> {
        match self
            .call(
                Request::ContextRestart { id: self.next_id(), context_id: context_id.into() },
                &[],
            )
            .await?
        {
            (Response::ContextCreated { context, .. }, _) => Ok(context),
            (other, _) => Err(unexpected(&other)),
        }
    }

    async fn delete_context(&self, context_id: &str) -> Result<(), SandboxError> {
        self.ok(Request::ContextDelete { id: self.next_id(), context_id: context_id.into() }, &[])
            .await
    }

    async fn list_contexts(&self) -> Result<Vec<hutch_core::ContextInfo>, SandboxError> {
        match self.call(Request::ContextList { id: self.next_id() }, &[]).await? {
            (Response::Contexts { contexts, .. }, _) => Ok(contexts),
            (other, _) => Err(unexpected(&other)),
        }
    }
}
