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
    workdir: String,
    env: BTreeMap<String, String>,
    /// Sessions (= pids of exec leaders) of every running command, for shutdown.
    sessions: Mutex<Vec<i32>>,
}

struct RunningExec {
    sid: i32,
    stdin: Option<Sender<Vec<u8>>>,
}

impl Agent {
    pub fn new(workdir: String) -> Self {
        Self {
            started: Instant::now(),
            workdir,
            env: std::env::vars().collect(),
            sessions: Mutex::new(Vec::new()),
        }
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, Vec<i32>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Kills every command this agent started (and, as PID 1, every other process of the sandbox).
    pub fn kill_everything(&self) {
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
                running.insert(id, RunningExec { sid: spawned.pid, stdin: stdin_tx });
                let (w, done) = (writer.clone(), done_tx.clone());
                let timeout = req.timeout_ms.map(Duration::from_millis);
                let limit = req.output_limit;
                std::thread::spawn(move || {
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
