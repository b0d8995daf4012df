//! Code contexts: one persistent interpreter ("runner") per context, fed snippets over a pipe
//! (see runners/README.md for the runner protocol). The agent streams the runner's stdout and
//! stderr and its result events to the host, enforces the deadline and the output cap, and
//! restarts a runner that dies or does not stop.
use std::collections::{BTreeMap, HashMap};
use std::ffi::CString;
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hutch_proto::{CodeError, ContextInfo, ErrorCode, Response, RunSummary};

use crate::exec::{kill_session, TRUNCATION_MARKER};
use crate::serve::Writer;
use crate::{reaper, sys};

const PYTHON: &str = include_str!("../runners/python.py");
const NODE: &str = include_str!("../runners/node.js");
const BASH: &str = include_str!("../runners/bash.sh");

/// How long a runner may take to say it is ready.
const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// After an interrupt, how long the snippet has to stop before the runner is replaced.
const INTERRUPT_GRACE: Duration = Duration::from_secs(2);

type Failure = (ErrorCode, String);

/// One snippet for a context's worker thread.
struct Job {
    rid: u64,
    code: Vec<u8>,
    timeout: Option<Duration>,
    limit: u64,
    writer: Writer,
    base_env: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lang {
    Python,
    JavaScript,
    Bash,
}

impl Lang {
    fn parse(s: &str) -> Option<Lang> {
        match s {
            "python" | "python3" | "py" => Some(Lang::Python),
            "javascript" | "js" | "node" | "nodejs" => Some(Lang::JavaScript),
            "bash" | "sh" | "shell" => Some(Lang::Bash),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Lang::Python => "python",
            Lang::JavaScript => "javascript",
            Lang::Bash => "bash",
        }
    }

    fn argv(self) -> (&'static str, Vec<String>) {
        match self {
            Lang::Python => (
                "python3",
                vec!["python3".into(), "-I".into(), "-u".into(), "-c".into(), PYTHON.into()],
            ),
            Lang::JavaScript => ("node", vec!["node".into(), "-e".into(), NODE.into()]),
            Lang::Bash => (
                "bash",
                vec![
                    "bash".into(),
                    "--noprofile".into(),
                    "--norc".into(),
                    "-c".into(),
                    BASH.into(),
                ],
            ),
        }
    }
}

/// A running interpreter.
struct Runner {
    pid: i32,
    requests: std::fs::File,
    events: OwnedFd,
    stdout: OwnedFd,
    stderr: OwnedFd,
    status: Receiver<libc::c_int>,
    version: String,
    /// Bytes read from `events` that do not yet form a whole line.
    pending: Vec<u8>,
}

impl Drop for Runner {
    fn drop(&mut self) {
        // everything the runner started goes with it, also a fork bomb still forking
        kill_session(self.pid);
        crate::exec::kill_session_except(self.pid, -1);
    }
}

pub struct Context {
    id: String,
    lang: Lang,
    cwd: String,
    env: BTreeMap<String, String>,
    runner: Mutex<Option<Runner>>,
    /// The runner's pid (= its session and group), readable while a run holds `runner`.
    pid: AtomicI32,
    executions: AtomicU64,
    busy: AtomicBool,
    seq: AtomicU64,
    startup_us: AtomicU64,
    /// Feeds the context's worker thread; dropping it ends the worker.
    jobs: Mutex<Option<std::sync::mpsc::Sender<Job>>>,
}

#[derive(Default)]
pub struct Contexts {
    map: Mutex<HashMap<String, Arc<Context>>>,
    next: AtomicU64,
}

fn which(cmd: &str, env: &BTreeMap<String, String>) -> Option<String> {
    let path = env.get("PATH").map(String::as_str).unwrap_or("/usr/local/bin:/usr/bin:/bin");
    path.split(':').map(|d| format!("{d}/{cmd}")).find(|p| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(p)
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    })
}

fn io_fail(what: &str) -> impl FnOnce(std::io::Error) -> Failure + '_ {
    move |e| (ErrorCode::SpawnFailed, format!("{what}: {e}"))
}

impl Context {
    fn info(&self) -> ContextInfo {
        let version = self
            .runner
            .try_lock()
            .ok()
            .and_then(|r| r.as_ref().map(|r| r.version.clone()))
            .unwrap_or_default();
        ContextInfo {
            context_id: self.id.clone(),
            language: self.lang.name().into(),
            pid: self.pid.load(Ordering::SeqCst).max(0) as u32,
            version,
            execution_count: self.executions.load(Ordering::SeqCst),
            busy: self.busy.load(Ordering::SeqCst),
            cwd: self.cwd.clone(),
            startup_us: self.startup_us.load(Ordering::SeqCst),
        }
    }

    /// Starts a fresh interpreter and waits for its `ready` event.
    fn start(&self, base_env: &BTreeMap<String, String>) -> Result<Runner, Failure> {
        let t = Instant::now();
        let mut env = base_env.clone();
        env.extend(self.env.clone());
        let (cmd, argv) = self.lang.argv();
        let path = which(cmd, &env).ok_or_else(|| {
            (
                ErrorCode::NotFound,
                format!(
                    "{cmd} is not installed in this sandbox, so {} contexts cannot run",
                    self.lang.name()
                ),
            )
        })?;
        let c = |s: &str| {
            CString::new(s)
                .map_err(|_| (ErrorCode::InvalidRequest, "NUL byte in the environment".to_string()))
        };
        let (req_r, req_w) = sys::high_pipe().map_err(io_fail("pipe"))?;
        let (ev_r, ev_w) = sys::high_pipe().map_err(io_fail("pipe"))?;
        let spec = sys::SpawnSpec {
            path: c(&path)?,
            argv: argv.iter().map(|a| c(a)).collect::<Result<_, _>>()?,
            envp: env.iter().map(|(k, v)| c(&format!("{k}={v}"))).collect::<Result<_, _>>()?,
            cwd: c(&self.cwd)?,
            pipe_stdin: false,
            extra_fds: vec![(3, req_r.as_raw_fd()), (4, ev_w.as_raw_fd())],
            pty: None,
        };
        // After a fork bomb the process limit may stay exhausted for a moment: retry briefly.
        let mut tries = 0;
        let spawned = loop {
            match sys::spawn(&spec) {
                Err(sys::SpawnError::Setup(e) | sys::SpawnError::Exec(e))
                    if e.raw_os_error() == Some(libc::EAGAIN) && tries < 40 =>
                {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(50));
                }
                other => break other,
            }
        };
        let spawned = spawned.map_err(|e| match e {
            sys::SpawnError::Cwd(e) => {
                (ErrorCode::NotFound, format!("working directory {}: {e}", self.cwd))
            }
            sys::SpawnError::Exec(e) | sys::SpawnError::Setup(e) => {
                (ErrorCode::SpawnFailed, format!("cannot start {cmd}: {e}"))
            }
        })?;
        drop(req_r);
        drop(ev_w);
        let status = reaper::register(spawned.pid);
        let _ = sys::set_nonblocking(&ev_r);
        let _ = sys::set_nonblocking(&spawned.stdout);
        let _ = sys::set_nonblocking(&spawned.stderr);
        let mut r = Runner {
            pid: spawned.pid,
            requests: std::fs::File::from(req_w),
            events: ev_r,
            stdout: spawned.stdout,
            stderr: spawned.stderr,
            status,
            version: String::new(),
            pending: Vec::new(),
        };
        self.pid.store(r.pid, Ordering::SeqCst);
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            match next_event(&mut r, deadline) {
                Ok(Some(ev)) if ev["ev"] == "ready" => {
                    r.version = ev["version"].as_str().unwrap_or("").to_string();
                    self.startup_us.store(t.elapsed().as_micros() as u64, Ordering::SeqCst);
                    return Ok(r);
                }
                Ok(Some(_)) => continue,
                Ok(None) => {
                    return Err((
                        ErrorCode::SpawnFailed,
                        format!(
                            "the {} runner did not start within {READY_TIMEOUT:?}",
                            self.lang.name()
                        ),
                    ))
                }
                Err(why) => {
                    let mut err = Vec::new();
                    let mut buf = [0u8; 4096];
                    while let Ok(Some(n)) = sys::read_nb(r.stderr.as_raw_fd(), &mut buf) {
                        if n == 0 || err.len() > 4096 {
                            break;
                        }
                        err.extend_from_slice(&buf[..n]);
                    }
                    return Err((
                        ErrorCode::SpawnFailed,
                        format!(
                            "the {} runner failed to start ({why}): {}",
                            self.lang.name(),
                            String::from_utf8_lossy(&err).trim()
                        ),
                    ));
                }
            }
        }
    }
}

/// Reads the next event line from the runner, waiting until `deadline`. `Ok(None)` on timeout,
/// `Err` when the runner closed its event pipe (it died).
fn next_event(r: &mut Runner, deadline: Instant) -> Result<Option<serde_json::Value>, String> {
    let mut buf = [0u8; 65536];
    loop {
        while let Some(pos) = r.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = r.pending.drain(..=pos).collect();
            if let Ok(v) = serde_json::from_slice(&line) {
                return Ok(Some(v));
            }
        }
        match sys::read_nb(r.events.as_raw_fd(), &mut buf) {
            Ok(Some(0)) => return Err("the runner exited".into()),
            Ok(Some(n)) => {
                r.pending.extend_from_slice(&buf[..n]);
                continue;
            }
            Ok(None) => {}
            Err(e) => return Err(e.to_string()),
        }
        let now = Instant::now();
        if now >= deadline {
            return Ok(None);
        }
        let wait = deadline.duration_since(now).as_millis().min(i32::MAX as u128) as i32 + 1;
        sys::poll_in(&[r.events.as_raw_fd()], wait).map_err(|e| e.to_string())?;
    }
}

fn describe_exit(status: Option<libc::c_int>) -> String {
    match status.map(sys::wexitstatus) {
        Some((Some(c), _)) => format!("exited with status {c}"),
        Some((_, Some(s))) => format!("was killed by signal {s}"),
        _ => "stopped".into(),
    }
}

impl Contexts {
    pub fn create(
        &self,
        language: &str,
        cwd: Option<String>,
        env: BTreeMap<String, String>,
        base_env: &BTreeMap<String, String>,
        workdir: &str,
    ) -> Result<ContextInfo, Failure> {
        let lang = Lang::parse(language).ok_or_else(|| {
            (
                ErrorCode::InvalidRequest,
                format!("unknown language {language:?}: use python, javascript or bash"),
            )
        })?;
        if self.map.lock().unwrap_or_else(|p| p.into_inner()).len() >= 64 {
            return Err((
                ErrorCode::InvalidRequest,
                "a sandbox holds at most 64 contexts; delete one first".into(),
            ));
        }
        let n = self.next.fetch_add(1, Ordering::SeqCst) + 1;
        let ctx = Arc::new(Context {
            id: format!("ctx-{n}"),
            lang,
            cwd: cwd.unwrap_or_else(|| workdir.to_string()),
            env,
            runner: Mutex::new(None),
            pid: AtomicI32::new(0),
            executions: AtomicU64::new(0),
            busy: AtomicBool::new(false),
            seq: AtomicU64::new(0),
            startup_us: AtomicU64::new(0),
            jobs: Mutex::new(None),
        });
        let runner = ctx.start(base_env)?;
        *ctx.runner.lock().unwrap_or_else(|p| p.into_inner()) = Some(runner);
        self.map.lock().unwrap_or_else(|p| p.into_inner()).insert(ctx.id.clone(), ctx.clone());
        Ok(ctx.info())
    }

    fn get(&self, id: &str) -> Result<Arc<Context>, Failure> {
        self.map
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .cloned()
            .ok_or_else(|| (ErrorCode::NotFound, format!("no context {id}")))
    }

    pub fn list(&self) -> Vec<ContextInfo> {
        let mut v: Vec<ContextInfo> =
            self.map.lock().unwrap_or_else(|p| p.into_inner()).values().map(|c| c.info()).collect();
        v.sort_by(|a, b| a.context_id.cmp(&b.context_id));
        v
    }

    pub fn interrupt(&self, id: &str) -> Result<(), Failure> {
        let ctx = self.get(id)?;
        let pid = ctx.pid.load(Ordering::SeqCst);
        if pid > 0 {
            let _ = sys::kill(-pid, libc::SIGINT);
        }
        Ok(())
    }

    pub fn restart(
        &self,
        id: &str,
        base_env: &BTreeMap<String, String>,
    ) -> Result<ContextInfo, Failure> {
        let ctx = self.get(id)?;
        let pid = ctx.pid.load(Ordering::SeqCst);
        if pid > 0 {
            kill_session(pid);
        }
        let mut guard = ctx.runner.lock().unwrap_or_else(|p| p.into_inner());
        *guard = None;
        *guard = Some(ctx.start(base_env)?);
        ctx.executions.store(0, Ordering::SeqCst);
        drop(guard);
        Ok(ctx.info())
    }

    pub fn delete(&self, id: &str) -> Result<(), Failure> {
        let ctx = self
            .map
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id)
            .ok_or_else(|| (ErrorCode::NotFound, format!("no context {id}")))?;
        *ctx.jobs.lock().unwrap_or_else(|p| p.into_inner()) = None;
        let pid = ctx.pid.load(Ordering::SeqCst);
        if pid > 0 {
            kill_session(pid);
        }
        Ok(())
    }

    /// Kills every runner (reset, shutdown).
    pub fn clear(&self) {
        for (_, ctx) in self.map.lock().unwrap_or_else(|p| p.into_inner()).drain() {
            *ctx.jobs.lock().unwrap_or_else(|p| p.into_inner()) = None;
            let pid = ctx.pid.load(Ordering::SeqCst);
            if pid > 0 {
                kill_session(pid);
            }
        }
    }

    /// Runs `code` on its own thread, streaming to `writer` under request `rid`.
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &self,
        rid: u64,
        id: &str,
        code: Vec<u8>,
        timeout: Option<Duration>,
        limit: u64,
        writer: Writer,
        base_env: BTreeMap<String, String>,
    ) -> Result<(), Failure> {
        let ctx = self.get(id)?;
        if ctx.busy.swap(true, Ordering::SeqCst) {
            return Err((
                ErrorCode::InvalidRequest,
                format!("context {id} is busy running another snippet"),
            ));
        }
        let job = Job { rid, code, timeout, limit, writer, base_env };
        let mut jobs = ctx.jobs.lock().unwrap_or_else(|p| p.into_inner());
        // One worker thread per context, started with its first run and kept: a thread per
        // snippet would cost more than the snippet.
        if jobs.is_none() {
            let (tx, rx) = std::sync::mpsc::channel::<Job>();
            let c = ctx.clone();
            let started = sys::spawn_thread(move || {
                for j in rx {
                    let summary =
                        run_one(&c, j.rid, &j.code, j.timeout, j.limit, &j.writer, &j.base_env);
                    c.busy.store(false, Ordering::SeqCst);
                    j.writer.send(&Response::ContextDone { id: j.rid, summary }, &[]);
                }
            });
            if let Err(e) = started {
                ctx.busy.store(false, Ordering::SeqCst);
                return Err((
                    ErrorCode::SpawnFailed,
                    format!("cannot start the run: {e} (the sandbox's process limit is exhausted)"),
                ));
            }
            *jobs = Some(tx);
        }
        match jobs.as_ref().map(|tx| tx.send(job)) {
            Some(Ok(())) => Ok(()),
            _ => {
                *jobs = None;
                ctx.busy.store(false, Ordering::SeqCst);
                Err((ErrorCode::SpawnFailed, "the context's worker stopped; run again".into()))
            }
        }
    }
}

struct Out {
    delivered: [u64; 2],
    truncated: [bool; 2],
}

/// Forwards what the runner's stdout/stderr hold right now.
fn pump(r: &Runner, rid: u64, limit: u64, out: &mut Out, writer: &Writer) {
    let mut buf = vec![0u8; 65536];
    for (k, fd) in [(0usize, r.stdout.as_raw_fd()), (1, r.stderr.as_raw_fd())] {
        while let Ok(Some(n)) = sys::read_nb(fd, &mut buf) {
            if n == 0 {
                break;
            }
            let room = limit.saturating_sub(out.delivered[k]) as usize;
            let take = n.min(room);
            let msg =
                if k == 0 { Response::Stdout { id: rid } } else { Response::Stderr { id: rid } };
            if take > 0 {
                out.delivered[k] += take as u64;
                writer.send(&msg, &buf[..take]);
            }
            if take < n && !out.truncated[k] {
                out.truncated[k] = true;
                writer.send(&msg, TRUNCATION_MARKER.as_bytes());
            }
        }
    }
}

/// Tells the host that the runner died under a snippet (os._exit, a crash, process.exit) and
/// returns the reason, for the restart note.
fn report_death(ctx: &Context, r: &Runner, rid: u64, writer: &Writer) -> String {
    let why = format!(
        "the {} process {}",
        ctx.lang.name(),
        describe_exit(r.status.recv_timeout(Duration::from_secs(1)).ok())
    );
    let error = CodeError { name: "ContextDied".into(), value: why.clone(), traceback: Vec::new() };
    writer.send(&Response::ContextError { id: rid, error }, &[]);
    why
}

fn run_one(
    ctx: &Context,
    rid: u64,
    code: &[u8],
    timeout: Option<Duration>,
    limit: u64,
    writer: &Writer,
    base_env: &BTreeMap<String, String>,
) -> RunSummary {
    let started = Instant::now();
    let mut summary = RunSummary::default();
    let mut guard = ctx.runner.lock().unwrap_or_else(|p| p.into_inner());
    let restart = |guard: &mut Option<Runner>, why: String, summary: &mut RunSummary| {
        *guard = None;
        ctx.executions.store(0, Ordering::SeqCst);
        match ctx.start(base_env) {
            Ok(r) => {
                *guard = Some(r);
                summary.restarted =
                    Some(format!("{why}; the context was restarted and its state is gone"));
            }
            Err((_, m)) => summary.restarted = Some(format!("{why}; restarting it failed: {m}")),
        }
    };
    if guard.is_none() {
        restart(&mut guard, "the context was not running".into(), &mut summary);
    }
    let Some(r) = guard.as_mut() else {
        return summary;
    };
    let seq = ctx.seq.fetch_add(1, Ordering::SeqCst) + 1;
    // header and code in one write: the runner wakes once per request, not twice
    let mut request = format!("run {seq} {}\n", code.len()).into_bytes();
    request.extend_from_slice(code);
    if r.requests.write_all(&request).and_then(|()| r.requests.flush()).is_err() {
        let why = report_death(ctx, r, rid, writer);
        restart(&mut guard, why, &mut summary);
        return summary;
    }
    let mut out = Out { delivered: [0, 0], truncated: [false, false] };
    let mut deadline = timeout.map(|t| started + t);
    let mut interrupted = false;
    while let Some(r) = guard.as_mut() {
        let now = Instant::now();
        let slice = Duration::from_millis(50);
        let until = deadline.map(|d| d.min(now + slice)).unwrap_or(now + slice);
        // wait for an event or output, unless a whole event is already buffered
        if !r.pending.contains(&b'\n') {
            let _ = sys::poll_in(
                &[r.events.as_raw_fd(), r.stdout.as_raw_fd(), r.stderr.as_raw_fd()],
                until.saturating_duration_since(now).as_millis() as i32 + 1,
            );
        }
        pump(r, rid, limit, &mut out, writer);
        match next_event(r, Instant::now()) {
            Ok(Some(ev)) => {
                if ev["seq"].as_u64() != Some(seq) {
                    continue;
                }
                match ev["ev"].as_str() {
                    Some("result") => {
                        let data = ev["data"]
                            .as_object()
                            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                            .unwrap_or_default();
                        writer.send(
                            &Response::ContextResult {
                                id: rid,
                                main: ev["main"].as_bool().unwrap_or(false),
                                data,
                            },
                            &[],
                        );
                    }
                    Some("error") => {
                        let error = CodeError {
                            name: ev["name"].as_str().unwrap_or("Error").to_string(),
                            value: ev["value"].as_str().unwrap_or("").to_string(),
                            traceback: ev["traceback"]
                                .as_array()
                                .map(|a| {
                                    a.iter().filter_map(|l| l.as_str().map(String::from)).collect()
                                })
                                .unwrap_or_default(),
                        };
                        writer.send(&Response::ContextError { id: rid, error }, &[]);
                    }
                    Some("done") => {
                        pump(r, rid, limit, &mut out, writer);
                        summary.execution_count = ev["execution_count"].as_u64().unwrap_or(0);
                        summary.exit_code = ev["exit_code"].as_i64().map(|c| c as i32);
                        ctx.executions.store(summary.execution_count, Ordering::SeqCst);
                        break;
                    }
                    _ => {}
                }
            }
            Ok(None) => {}
            Err(_) => {
                // the runner died mid-run (os._exit, a crash, process.exit, a fork bomb's kill)
                pump(r, rid, limit, &mut out, writer);
                let why = report_death(ctx, r, rid, writer);
                restart(&mut guard, why, &mut summary);
                break;
            }
        }
        if let Some(d) = deadline {
            if Instant::now() >= d {
                if !interrupted {
                    // first ask nicely: the language keeps its state if it stops here
                    interrupted = true;
                    summary.timed_out = true;
                    let _ = sys::kill(-r.pid, libc::SIGINT);
                    deadline = Some(Instant::now() + INTERRUPT_GRACE);
                } else {
                    let why = format!(
                        "the snippet did not stop within {:?} of its deadline",
                        INTERRUPT_GRACE
                    );
                    writer.send(
                        &Response::ContextError {
                            id: rid,
                            error: CodeError {
                                name: "TimeoutError".into(),
                                value: why.clone(),
                                traceback: Vec::new(),
                            },
                        },
                        &[],
                    );
                    restart(&mut guard, why, &mut summary);
                    break;
                }
            }
        }
    }
    if summary.timed_out && summary.restarted.is_none() {
        // The snippet stopped, but what it started (a fork bomb, stray children) goes too.
        let pid = ctx.pid.load(Ordering::SeqCst);
        if pid > 0 {
            crate::exec::kill_session_except(pid, pid);
        }
    }
    summary.stdout_truncated = out.truncated[0];
    summary.stderr_truncated = out.truncated[1];
    summary.duration_us = started.elapsed().as_micros() as u64;
    summary
}
