//! One wasm sandbox: a workspace directory (a size-capped tmpfs when hutch runs as root) that is
//! the only directory its guests see, a memory budget shared by its runs, and the runs
//! themselves, each a fresh instance of a prepared module or component.
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use hutch_core::{
    ContextOps, ExecRequest, FileOps, OutputEvent, Phase, PhaseTimings, Process, ProcessControl,
    ResetReport, Sandbox, SandboxError, SandboxSpec, StdinMode,
};
use hutch_proto::{ErrorCode, ExecCommand, ExecStatus};
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, oneshot};

use crate::contexts::ContextTable;
use crate::engine::WasmEngine;
use crate::files::{Workspace, WorkspaceFiles, WORKSPACE};
use crate::guests::{self, Target};
use crate::run::{self, Dirs, GuestStdin, Invocation, RunEnd};
use crate::stdio::CappedOutput;
use crate::workspace_mount;

/// Stdin buffered between a writer and a guest that has not read it yet.
const STDIN_PIPE: usize = 64 << 10;

pub struct WasmSandbox {
    pub(crate) id: String,
    pub(crate) spec: SandboxSpec,
    pub(crate) engine: Arc<WasmEngine>,
    pub(crate) guest_dir: PathBuf,
    /// The workspace's host directory (state dir / wasm / id).
    pub(crate) root: PathBuf,
    pub(crate) files: Option<WorkspaceFiles>,
    pub(crate) running: Arc<Mutex<HashMap<u32, Arc<Control>>>>,
    pub(crate) memory_used: Arc<AtomicU64>,
    pub(crate) next_pid: AtomicU32,
    pub(crate) timings: Arc<Mutex<PhaseTimings>>,
    pub(crate) stopped: AtomicBool,
    pub(crate) contexts: ContextTable,
}

impl WasmSandbox {
    fn add_time(&self, p: Phase, d: Duration) {
        self.timings.lock().unwrap_or_else(|e| e.into_inner()).add(p, d);
    }

    fn files_ref(&self) -> Result<&WorkspaceFiles, SandboxError> {
        if self.stopped.load(Ordering::Acquire) {
            return Err(SandboxError::NotRunning);
        }
        self.files.as_ref().ok_or(SandboxError::NotRunning)
    }

    fn running(&self) -> std::sync::MutexGuard<'_, HashMap<u32, Arc<Control>>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn kill_all(&self) {
        self.contexts.clear();
        for c in self.running().values() {
            c.kill(9);
        }
    }

    /// Turns a request into an invocation: the program, its argv, env, directories.
    fn invocation(
        &self,
        req: &ExecRequest,
        stdin: GuestStdin,
        tx: &mpsc::UnboundedSender<OutputEvent>,
    ) -> Result<Invocation, SandboxError> {
        let files = self.files_ref()?;
        let argv = match &req.command {
            ExecCommand::Argv(a) if !a.is_empty() => a.clone(),
            ExecCommand::Argv(_) => {
                return Err(SandboxError::Agent {
                    code: ErrorCode::InvalidRequest,
                    message: "empty command".into(),
                })
            }
            ExecCommand::Shell(_) => {
                return Err(SandboxError::Unsupported(
                    "a shell command (WebAssembly has no POSIX shell; run `python3 -c` or `node -e` or a .wasm file)"
                        .into(),
                ))
            }
        };
        let cwd_guest = req.cwd.clone().unwrap_or_else(|| self.spec.workdir.clone());
        // the working directory must be a real directory of the workspace
        files.ws.host_dir(&cwd_guest)?;
        let prepared = match guests::resolve(&argv[0], &self.guest_dir)? {
            Target::Guest { name, path } => {
                if !path.exists() {
                    return Err(crate::error::WasmError::GuestMissing {
                        guest: name.into(),
                        path: path.display().to_string(),
                    }
                    .into());
                }
                self.engine.prepare_file(&path)?
            }
            Target::User(p) => {
                let bytes = files.ws.read(&p, &cwd_guest)?;
                self.engine.prepare(&p, &bytes)?
            }
        };
        let mut env = self.spec.effective_env();
        env.extend(req.env.clone());
        env.insert("PWD".into(), cwd_guest.clone());
        env.entry("HOME".into()).or_insert_with(|| WORKSPACE.into());
        Ok(Invocation {
            prepared,
            args: argv,
            env: env.into_iter().collect(),
            dirs: Some(Dirs { workspace: files.ws.host().to_path_buf(), cwd_guest }),
            stdin,
            stdout: CappedOutput::new(tx.clone(), true, req.output_limit),
            stderr: CappedOutput::new(tx.clone(), false, req.output_limit),
            memory: self.memory_used.clone(),
            memory_limit: self.spec.limits.memory_bytes,
        })
    }

    /// Starts a run of `req` as it is (limits already applied), ended after `lifetime` if it
    /// has one. Counted against the pids limit while it lives; `kill_all` ends it.
    pub(crate) fn launch(
        &self,
        req: ExecRequest,
        stdin: Vec<u8>,
        lifetime: Option<Duration>,
    ) -> Result<WasmProcess, SandboxError> {
        let t = Instant::now();
        if self.running().len() as u64 >= self.spec.limits.pids {
            return Err(SandboxError::Agent {
                code: ErrorCode::SpawnFailed,
                message: format!(
                    "resource temporarily unavailable: {} runs already live (the sandbox's pids limit)",
                    self.spec.limits.pids
                ),
            });
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let (guest_stdin, writer) = match req.stdin {
            StdinMode::Null => (GuestStdin::Null, None),
            StdinMode::Inline => (GuestStdin::Bytes(stdin), None),
            StdinMode::Stream => {
                let (w, r) = tokio::io::duplex(STDIN_PIPE);
                (GuestStdin::Stream(r), Some(w))
            }
        };
        let inv = self.invocation(&req, guest_stdin, &tx)?;
        let (stdout, stderr) = (inv.stdout.clone(), inv.stderr.clone());
        let (kill_tx, kill_rx) = oneshot::channel();
        let control = Arc::new(Control {
            stdin: tokio::sync::Mutex::new(writer),
            kill: Mutex::new(Some(kill_tx)),
        });
        let pid = self.next_pid.fetch_add(1, Ordering::Relaxed) + 2;
        self.running().insert(pid, control.clone());
        let engine = self.engine.clone();
        let running = self.running.clone();
        let timings = self.timings.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let mut status = ExecStatus::default();
            tokio::select! {
                r = run::run(&engine, inv) => {
                    match r.end {
                        RunEnd::Exited(code) => status.exit_code = Some(code),
                        RunEnd::Trapped(msg) => {
                            // a trap is the guest's crash: reported like SIGABRT, with the reason
                            let line = format!("{msg}\n");
                            let _ = tx.send(OutputEvent::Stderr(line.into_bytes()));
                            status.signal = Some(6);
                        }
                    }
                    status.oom_killed = r.memory_refused && status.exit_code != Some(0);
                }
                _ = deadline(lifetime) => status.timed_out = true,
                sig = kill_rx => status.signal = Some(sig.unwrap_or(9)),
            }
            running.lock().unwrap_or_else(|e| e.into_inner()).remove(&pid);
            let (o, e) = (stdout.totals(), stderr.totals());
            status.stdout_bytes = o.bytes;
            status.stdout_truncated = o.truncated;
            status.stderr_bytes = e.bytes;
            status.stderr_truncated = e.truncated;
            status.duration_us = started.elapsed().as_micros() as u64;
            timings.lock().unwrap_or_else(|e| e.into_inner()).add(Phase::Exec, t.elapsed());
            let _ = tx.send(OutputEvent::Exited(status));
        });
        Ok(WasmProcess { pid, control, rx, done: false })
    }
}

/// Sleeps for `lifetime`, or forever.
async fn deadline(lifetime: Option<Duration>) {
    match lifetime {
        Some(d) => tokio::time::sleep(d).await,
        None => std::future::pending().await,
    }
}

/// Input and signals of one run.
pub struct Control {
    stdin: tokio::sync::Mutex<Option<tokio::io::DuplexStream>>,
    kill: Mutex<Option<oneshot::Sender<i32>>>,
}

impl Control {
    pub(crate) fn kill(&self, signal: i32) -> bool {
        match self.kill.lock().unwrap_or_else(|e| e.into_inner()).take() {
            Some(tx) => tx.send(signal).is_ok(),
            None => false,
        }
    }
}

#[async_trait]
impl ProcessControl for Control {
    async fn write_stdin(&self, data: &[u8]) -> Result<(), SandboxError> {
        let mut g = self.stdin.lock().await;
        let w = g.as_mut().ok_or_else(|| SandboxError::Agent {
            code: ErrorCode::InvalidRequest,
            message: "stdin is closed or was not requested as a stream".into(),
        })?;
        w.write_all(data).await.map_err(|_| SandboxError::Agent {
            code: ErrorCode::NoSuchProcess,
            message: "the process has exited".into(),
        })
    }

    async fn close_stdin(&self) -> Result<(), SandboxError> {
        if let Some(mut w) = self.stdin.lock().await.take() {
            let _ = w.shutdown().await;
        }
        Ok(())
    }

    /// A guest has no signal handlers: every signal ends the run, reported as that signal.
    async fn signal(&self, signal: i32) -> Result<(), SandboxError> {
        if self.kill(signal) {
            Ok(())
        } else {
            Err(SandboxError::Agent {
                code: ErrorCode::NoSuchProcess,
                message: "the process has exited".into(),
            })
        }
    }
}

pub struct WasmProcess {
    pub(crate) pid: u32,
    pub(crate) control: Arc<Control>,
    rx: mpsc::UnboundedReceiver<OutputEvent>,
    done: bool,
}

#[async_trait]
impl Process for WasmProcess {
    fn pid(&self) -> u32 {
        self.pid
    }

    fn control(&self) -> Arc<dyn ProcessControl> {
        self.control.clone()
    }

    async fn next_event(&mut self) -> Result<OutputEvent, SandboxError> {
        if self.done {
            return Err(SandboxError::Agent {
                code: ErrorCode::NoSuchProcess,
                message: "the process has already exited".into(),
            });
        }
        match self.rx.recv().await {
            Some(ev) => {
                self.done = matches!(ev, OutputEvent::Exited(_));
                Ok(ev)
            }
            None => Err(SandboxError::runtime("wasm run", "the run ended without a status")),
        }
    }
}

#[async_trait]
impl Sandbox for WasmSandbox {
    fn id(&self) -> &str {
        &self.id
    }

    fn spec(&self) -> &SandboxSpec {
        &self.spec
    }

    fn timings(&self) -> PhaseTimings {
        self.timings.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    async fn start(&mut self) -> Result<(), SandboxError> {
        let t = Instant::now();
        crate::engine::create_private_dir(&self.root)?;
        workspace_mount::mount(&self.root, self.spec.limits.workspace_bytes)?;
        // guests run as the daemon's user; the directory is theirs through WASI only
        let ws = Workspace::open(self.root.clone())?;
        self.files = Some(WorkspaceFiles { ws, cwd: self.spec.workdir.clone() });
        self.add_time(Phase::RuntimeCreate, t.elapsed());
        Ok(())
    }

    async fn spawn(
        &self,
        mut req: ExecRequest,
        stdin: Vec<u8>,
    ) -> Result<Box<dyn Process>, SandboxError> {
        self.spec.limits.apply(&mut req);
        let timeout = Duration::from_millis(req.timeout_ms.unwrap_or(self.spec.limits.timeout_ms));
        Ok(Box::new(self.launch(req, stdin, Some(timeout))?))
    }

    fn files(&self) -> Result<&dyn FileOps, SandboxError> {
        Ok(self.files_ref()?)
    }

    fn contexts(&self) -> Result<&dyn ContextOps, SandboxError> {
        self.files_ref()?;
        Ok(self)
    }

    async fn reset(&self) -> Result<ResetReport, SandboxError> {
        self.kill_all();
        // runs end at their next epoch tick
        for _ in 0..100 {
            if self.running().is_empty() {
                break;
            }
            tokio::time::sleep(crate::engine::EPOCH_TICK).await;
        }
        let entries_left = self.files_ref()?.ws.clear();
        Ok(ResetReport { processes_left: self.running().len() as u32, entries_left })
    }

    async fn stop(&mut self) -> Result<(), SandboxError> {
        self.stopped.store(true, Ordering::Release);
        self.kill_all();
        Ok(())
    }

    async fn destroy(mut self: Box<Self>) -> Result<PhaseTimings, SandboxError> {
        let t = Instant::now();
        self.stopped.store(true, Ordering::Release);
        self.kill_all();
        self.files = None;
        let r = crate::reap_dir(&self.root);
        self.add_time(Phase::Destroy, t.elapsed());
        r?;
        Ok(self.timings())
    }
}

impl Drop for WasmSandbox {
    fn drop(&mut self) {
        self.kill_all();
        self.files = None;
        let _ = crate::reap_dir(&self.root);
    }
}
