//! One connection: read requests, dispatch, write responses. Output of running commands is written
//! from their supervisor threads through the shared [`Writer`].
use std::collections::{BTreeMap, HashMap};
use std::os::unix::net::UnixStream;
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hutch_proto::{
    read_frame, write_frame, CodecError, ErrorCode, Request, Response, StdinMode, PROTOCOL_VERSION,
};

use crate::{exec, files, reaper, sys};

/// Frames from several threads go out whole, one at a time.
#[derive(Clone)]
pub struct Writer(Arc<Mutex<UnixStream>>);

impl Writer {
    pub fn send(&self, msg: &Response, body: &[u8]) -> bool {
        let mut s = self.0.lock().unwrap_or_else(|p| p.into_inner());
        write_frame(&mut *s, msg, body).is_ok()
    }

    fn error(&self, id: u64, code: ErrorCode, message: impl Into<String>) {
        self.send(&Response::Error { id, code, message: message.into() }, &[]);
    }
}

pub struct Agent {
    started: Instant,
    /// The agent's own listening socket (kept when its directory is wiped).
    listen: Option<std::path::PathBuf>,
    workdir: String,
    env: BTreeMap<String, String>,
    pub contexts: crate::contexts::Contexts,
    /// Sessions (= pids of exec leaders) of every running command, for shutdown.
    sessions: Mutex<Vec<i32>>,
}

struct RunningExec {
    sid: i32,
    stdin: Option<Sender<Vec<u8>>>,
    /// The master of its terminal, for an exec started with `pty`.
    terminal: Option<std::os::fd::OwnedFd>,
}

impl Agent {
    pub fn new(workdir: String, listen: Option<std::path::PathBuf>) -> Self {
        Self {
            started: Instant::now(),
            listen,
            contexts: Default::default(),
            workdir,
            env: std::env::vars().collect(),
            sessions: Mutex::new(Vec::new()),
        }
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, Vec<i32>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Cleans the sandbox for its next user (see `Request::Reset`). Outside its own pid namespace
    /// (the process backend) the agent only kills what it started and leaves IPC alone.
    pub fn reset(&self, wipe: &[String]) -> (u32, u32) {
        let own_ns = sys::getpid() == 1;
        self.contexts.clear();
        for _ in 0..100 {
            for sid in self.sessions().drain(..) {
                exec::kill_session(sid);
            }
            let others = if own_ns { other_processes() } else { Vec::new() };
            if others.is_empty() {
                break;
            }
            for pid in others {
                let _ = sys::kill(pid, libc::SIGKILL);
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        if own_ns {
            sys::remove_sysv_ipc();
        }
        let mut left = 0u32;
        for dir in wipe {
            let Ok(rd) = std::fs::read_dir(dir) else { continue };
            for e in rd.flatten() {
                let p = e.path();
                if self.listen.as_deref() == Some(p.as_path()) {
                    continue;
                }
                let is_dir = p.symlink_metadata().map(|m| m.is_dir()).unwrap_or(false);
                let r = if is_dir { std::fs::remove_dir_all(&p) } else { std::fs::remove_file(&p) };
                if r.is_err() {
                    left += 1;
                }
            }
        }
        let procs = if own_ns { other_processes().len() as u32 } else { 0 };
        (procs, left)
    }

    /// Kills every command this agent started (and, as PID 1, every other process of the sandbox).
    pub fn kill_everything(&self) {
        self.contexts.clear();
        for sid in self.sessions().drain(..) {
            exec::kill_session(sid);
        }
        if sys::getpid() == 1 {
            // kill(-1) from init reaches every process in the pid namespace but init itself.
            let _ = sys::kill(-1, libc::SIGKILL);
        }
    }
}

pub fn serve(agent: Arc<Agent>, stream: UnixStream) {
    let Ok(wstream) = stream.try_clone() else { return };
    let writer = Writer(Arc::new(Mutex::new(wstream)));
    let mut reader = std::io::BufReader::with_capacity(256 * 1024, stream);
    let mut running: HashMap<u64, RunningExec> = HashMap::new();
    let (done_tx, done_rx) = channel::<u64>();
    loop {
        let raw = match read_frame::<serde_json::Value, _>(&mut reader) {
            Ok(f) => f,
            Err(CodecError::Closed) => break,
            Err(e) => {
                eprintln!("hutch-agent: dropping connection: {e}");
                break;
            }
        };
        let frame = match serde_json::from_value::<Request>(raw.header.clone()) {
            Ok(header) => hutch_proto::Frame { header, body: raw.body },
            Err(e) => {
                // A request this agent does not understand (maybe from a newer host): answer it
                // under its own id so the sender is not left waiting, and go on.
                let id = raw.header.get("id").and_then(serde_json::Value::as_u64).unwrap_or(0);
                writer.error(id, ErrorCode::Unsupported, format!("unsupported request: {e}"));
                continue;
            }
        };
        while let Ok(id) = done_rx.try_recv() {
            if let Some(r) = running.remove(&id) {
                agent.sessions().retain(|&s| s != r.sid);
            }
        }
        let body = frame.body;
        match frame.header {
            Request::Hello { id, protocol, .. } => {
                if protocol != PROTOCOL_VERSION {
                    writer.error(
                        id,
                        ErrorCode::Unsupported,
                        format!(
                            "host speaks protocol {protocol}, this agent speaks {PROTOCOL_VERSION}"
                        ),
                    );
                    continue;
                }
                writer.send(
                    &Response::HelloOk {
                        id,
                        protocol: PROTOCOL_VERSION,
                        agent_version: env!("CARGO_PKG_VERSION").into(),
                        features: vec![
                            "exec".into(),
                            "files".into(),
                            "signal".into(),
                            "stdin".into(),
                            "reset".into(),
                            "contexts".into(),
                            "pty".into(),
                        ],
                        uptime_us: agent.started.elapsed().as_micros() as u64,
                    },
                    &[],
                );
            }
            Request::Health { id } => {
                let processes = std::fs::read_dir("/proc")
                    .map(|d| {
                        d.flatten()
                            .filter(|e| {
                                e.file_name()
                                    .to_str()
                                    .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
                            })
                            .count()
                    })
                    .unwrap_or(0) as u32;
                writer.send(
                    &Response::HealthOk {
                        id,
                        uptime_ms: agent.started.elapsed().as_millis() as u64,
                        processes,
                    },
                    &[],
                );
            }
            Request::Exec { id, exec: req } => {
                if running.contains_key(&id) {
                    writer.error(
                        id,
                        ErrorCode::InvalidRequest,
                        format!("exec id {id} is already running"),
                    );
                    continue;
                }
                let prepared = match exec::prepare(&req, &agent.env, &agent.workdir) {
                    Ok(p) => p,
                    Err(msg) => {
                        let code = if msg.ends_with("command not found") {
                            ErrorCode::NotFound
                        } else {
                            ErrorCode::InvalidRequest
                        };
                        writer.error(id, code, msg);
                        continue;
                    }
                };
                let started = Instant::now();
                let spawned = match sys::spawn(&prepared.spec) {
                    Ok(s) => s,
                    Err(e) => {
                        let (code, msg) = match e {
                            sys::SpawnError::Cwd(e) => (
                                ErrorCode::NotFound,
                                format!("working directory {:?}: {e}", prepared.spec.cwd),
                            ),
                            sys::SpawnError::Exec(e)
                                if e.kind() == std::io::ErrorKind::NotFound =>
                            {
                                let cmd = prepared.spec.path.to_string_lossy().into_owned();
                                (ErrorCode::NotFound, format!("{cmd}: command not found"))
                            }
                            sys::SpawnError::Exec(e) => (
                                ErrorCode::SpawnFailed,
                                format!("cannot execute {:?}: {e}", prepared.spec.path),
                            ),
                            sys::SpawnError::Setup(e) => {
                                (ErrorCode::SpawnFailed, format!("cannot start the command: {e}"))
                            }
                        };
                        writer.error(id, code, msg);
                        continue;
                    }
                };
                let status_rx = reaper::register(spawned.pid);
                agent.sessions().push(spawned.pid);
                writer.send(&Response::Started { id, pid: spawned.pid as u32 }, &[]);
                let mut stdin_tx = None;
                if let Some(fd) = spawned.stdin {
                    match prepared.stdin_mode {
                        StdinMode::Stream => {
                            let (tx, rx) = channel();
                            stdin_tx = Some(tx);
                            exec::stdin_thread(fd, body, Some(rx));
                        }
                        _ => exec::stdin_thread(fd, body, None),
                    }
                }
                running.insert(
                    id,
                    RunningExec { sid: spawned.pid, stdin: stdin_tx, terminal: spawned.terminal },
                );
                let (w, done) = (writer.clone(), done_tx.clone());
                let timeout = req.timeout_ms.map(Duration::from_millis);
                let limit = req.output_limit;
                let sid = spawned.pid;
                let supervised = sys::spawn_thread(move || {
                    exec::supervise(
                        id,
                        spawned.pid,
                        spawned.stdout,
                        spawned.stderr,
                        status_rx,
                        timeout,
                        limit,
                        w,
                        started,
                        done,
                    )
                });
                if let Err(e) = supervised {
                    // without a supervisor nobody would report or bound the command
                    exec::kill_session(sid);
                    running.remove(&id);
                    writer.error(id, ErrorCode::SpawnFailed, format!("cannot watch the command: {e} (the sandbox's process limit is exhausted)"));
                }
            }
            Request::Stdin { id } => match running.get(&id).and_then(|r| r.stdin.as_ref()) {
                Some(tx) => {
                    let _ = tx.send(body);
                }
                None => writer.error(
                    id,
                    ErrorCode::NoSuchProcess,
                    format!("exec {id} has no open stdin"),
                ),
            },
            Request::StdinClose { id } => {
                if let Some(r) = running.get_mut(&id) {
                    r.stdin = None;
                }
            }
            Request::PtyResize { id, exec_id, size } => {
                match running.get(&exec_id).map(|r| r.terminal.as_ref()) {
                    Some(Some(t)) => match sys::set_pty_size(t, size) {
                        Ok(()) => {
                            writer.send(&Response::Ok { id }, &[]);
                        }
                        Err(e) => writer.error(id, ErrorCode::Io, format!("resize: {e}")),
                    },
                    Some(None) => writer.error(
                        id,
                        ErrorCode::InvalidRequest,
                        format!("exec {exec_id} has no terminal"),
                    ),
                    None => writer.error(
                        id,
                        ErrorCode::NoSuchProcess,
                        format!("no running exec {exec_id}"),
                    ),
                }
            }
            Request::Signal { id, exec_id, signal } => match running.get(&exec_id) {
                Some(r) => match sys::kill(-r.sid, signal) {
                    Ok(()) => {
                        writer.send(&Response::Ok { id }, &[]);
                    }
                    Err(e) => {
                        writer.error(id, ErrorCode::InvalidRequest, format!("signal {signal}: {e}"))
                    }
                },
                None => {
                    writer.error(id, ErrorCode::NoSuchProcess, format!("no running exec {exec_id}"))
                }
            },
            Request::Reset { id, wipe } => {
                running.clear();
                let (processes_left, entries_left) = agent.reset(&wipe);
                writer.send(&Response::ResetOk { id, processes_left, entries_left }, &[]);
            }
            Request::ContextCreate { id, language, cwd, env } => {
                match agent.contexts.create(&language, cwd, env, &agent.env, &agent.workdir) {
                    Ok(context) => {
                        writer.send(&Response::ContextCreated { id, context }, &[]);
                    }
                    Err((code, msg)) => writer.error(id, code, msg),
                }
            }
            Request::ContextRun { id, context_id, timeout_ms, output_limit } => {
                let timeout = timeout_ms.map(Duration::from_millis);
                if let Err((code, msg)) = agent.contexts.run(
                    id,
                    &context_id,
                    body,
                    timeout,
                    output_limit,
                    writer.clone(),
                    agent.env.clone(),
                ) {
                    writer.error(id, code, msg);
                }
            }
            Request::ContextInterrupt { id, context_id } => {
                match agent.contexts.interrupt(&context_id) {
                    Ok(()) => {
                        writer.send(&Response::Ok { id }, &[]);
                    }
                    Err((code, msg)) => writer.error(id, code, msg),
                }
            }
            Request::ContextRestart { id, context_id } => {
                match agent.contexts.restart(&context_id, &agent.env) {
                    Ok(context) => {
                        writer.send(&Response::ContextCreated { id, context }, &[]);
                    }
                    Err((code, msg)) => writer.error(id, code, msg),
                }
            }
            Request::ContextDelete { id, context_id } => match agent.contexts.delete(&context_id) {
                Ok(()) => {
                    writer.send(&Response::Ok { id }, &[]);
                }
                Err((code, msg)) => writer.error(id, code, msg),
            },
            Request::ContextList { id } => {
                writer.send(&Response::Contexts { id, contexts: agent.contexts.list() }, &[]);
            }
            Request::Shutdown { id } => {
                agent.kill_everything();
                writer.send(&Response::Ok { id }, &[]);
                std::process::exit(0);
            }
            other => {
                let id = other.id();
                match files::handle(other, body, &agent.workdir) {
                    Ok((resp, data)) => {
                        writer.send(&resp, &data);
                    }
                    Err((code, msg)) => writer.error(id, code, msg),
                }
            }
        }
    }
}

/// Live processes in this pid namespace other than the agent (zombies excluded: the reaper
/// collects them).
fn other_processes() -> Vec<i32> {
    let me = sys::getpid();
    let Ok(rd) = std::fs::read_dir("/proc") else { return Vec::new() };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()))
        .filter(|&pid| pid != me)
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| {
                    s.rfind(')').and_then(|i| s.get(i + 2..i + 3).map(|c| c != "Z" && c != "X"))
                })
                .unwrap_or(false)
        })
        .collect()
}
