//! Code contexts on the wasm backend: one long-lived guest instance per context, running a
//! runner program (runners/, embedded here) that reads snippets from stdin and writes framed
//! events on stdout. WASI has no signals, so a snippet that passes its deadline, or is
//! interrupted, ends with its instance: the context is restarted and the result says so.
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use hutch_core::context::RunSink;
use hutch_core::{
    CodeError, ContextInfo, ContextOps, ExecRequest, OutputEvent, Process, RichResult, RunEvent,
    RunOutput, RunSummary, SandboxError, StdinMode,
};
use hutch_proto::{ErrorCode, ExecStatus};
use serde_json::Value;

use crate::sandbox::{Control, WasmProcess, WasmSandbox};

const PYTHON: &str = include_str!("../runners/python_wasi.py");
const NODE: &str = include_str!("../runners/node_wasi.js");

/// How long a runner may take to say it is ready (a debug build loads Python slowly).
const READY_TIMEOUT: Duration = Duration::from_secs(60);
const MAX_CONTEXTS: usize = 64;
/// Starts every frame on the runner's stdout; bytes outside frames are user output.
const FRAME_START: u8 = 0x1e;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lang {
    Python,
    JavaScript,
}

impl Lang {
    fn parse(s: &str) -> Result<Lang, SandboxError> {
        match s {
            "python" | "python3" | "py" => Ok(Lang::Python),
            "javascript" | "js" | "node" | "nodejs" => Ok(Lang::JavaScript),
            "bash" | "sh" | "shell" => Err(SandboxError::Unsupported(
                "bash code contexts on the wasm backend (WebAssembly has no POSIX shell; use a python or javascript context)"
                    .into(),
            )),
            _ => Err(invalid(format!("unknown language {s:?}: use python or javascript"))),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Lang::Python => "python",
            Lang::JavaScript => "javascript",
        }
    }

    fn argv(self) -> [&'static str; 4] {
        match self {
            Lang::Python => ["python3", "-I", "-c", PYTHON],
            Lang::JavaScript => ["node", "--no-warnings", "-e", NODE],
        }
    }
}

fn invalid(message: String) -> SandboxError {
    SandboxError::Agent { code: ErrorCode::InvalidRequest, message }
}

fn no_context(id: &str) -> SandboxError {
    SandboxError::Agent { code: ErrorCode::NotFound, message: format!("no context {id}") }
}

/// What the runner's stdout carries.
#[derive(Debug, PartialEq)]
enum Frame {
    /// User output: stream 0 (stdout) or 1 (stderr).
    Output(usize, Vec<u8>),
    Event(Value),
}

/// Splits the runner's stdout into frames (`\x1e` + one JSON object + `\n`) and the bytes
/// around them, which are user output written past the runner (to fd 1 directly).
#[derive(Default)]
struct FrameReader {
    buf: Vec<u8>,
}

impl FrameReader {
    fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// The next whole item, or `None` until more bytes arrive.
    fn next(&mut self) -> Option<Frame> {
        if self.buf.is_empty() {
            return None;
        }
        if self.buf[0] != FRAME_START {
            let end = self.buf.iter().position(|&b| b == FRAME_START).unwrap_or(self.buf.len());
            return Some(Frame::Output(0, self.buf.drain(..end).collect()));
        }
        let end = self.buf[1..].iter().position(|&b| b == b'\n' || b == FRAME_START)? + 1;
        if self.buf[end] == FRAME_START {
            // a stray marker in raw output: the bytes up to the next one are output
            return Some(Frame::Output(0, self.buf.drain(..end).collect()));
        }
        let line: Vec<u8> = self.buf.drain(..=end).collect();
        let Ok(v) = serde_json::from_slice::<Value>(&line[1..end]) else {
            return Some(Frame::Output(0, line));
        };
        match v["t"].as_str() {
            Some(t @ ("out" | "err")) => {
                let text = v["d"].as_str().unwrap_or_default();
                Some(Frame::Output(usize::from(t == "err"), text.as_bytes().to_vec()))
            }
            Some(_) => Some(Frame::Event(v)),
            None => Some(Frame::Output(0, line)),
        }
    }
}

/// A live runner instance.
struct Instance {
    process: WasmProcess,
    frames: FrameReader,
    /// The last line the instance itself wrote to stderr (a trap's reason).
    last_stderr: String,
}

impl Instance {
    /// Kills the instance and waits until it has ended (and left the pids count), which
    /// takes at most an epoch tick.
    async fn stop(mut self) {
        self.process.control.kill(9);
        let _ = tokio::time::timeout(Duration::from_secs(5), async {
            while let Ok(ev) = self.process.next_event().await {
                if matches!(ev, OutputEvent::Exited(_)) {
                    break;
                }
            }
        })
        .await;
    }
}

struct Ctx {
    id: String,
    lang: Lang,
    cwd: String,
    env: BTreeMap<String, String>,
    instance: tokio::sync::Mutex<Option<Instance>>,
    /// The live instance's control, reachable while a run holds `instance`.
    control: Mutex<Option<Arc<Control>>>,
    pid: AtomicU32,
    version: Mutex<String>,
    executions: AtomicU64,
    busy: AtomicBool,
    interrupted: AtomicBool,
    deleted: AtomicBool,
    seq: AtomicU64,
    startup_us: AtomicU64,
}

impl Ctx {
    fn info(&self) -> ContextInfo {
        ContextInfo {
            context_id: self.id.clone(),
            language: self.lang.name().into(),
            pid: self.pid.load(Ordering::SeqCst),
            version: self.version.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            execution_count: self.executions.load(Ordering::SeqCst),
            busy: self.busy.load(Ordering::SeqCst),
            cwd: self.cwd.clone(),
            startup_us: self.startup_us.load(Ordering::SeqCst),
        }
    }

    fn kill(&self) {
        if let Some(c) = self.control.lock().unwrap_or_else(|p| p.into_inner()).take() {
            c.kill(9);
        }
    }
}

/// A sandbox's contexts.
#[derive(Default)]
pub(crate) struct ContextTable {
    map: Mutex<HashMap<String, Arc<Ctx>>>,
    next: AtomicU64,
}

impl ContextTable {
    fn get(&self, id: &str) -> Result<Arc<Ctx>, SandboxError> {
        self.map
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(id)
            .cloned()
            .ok_or_else(|| no_context(id))
    }

    /// Ends every context (stop, reset, destroy).
    pub(crate) fn clear(&self) {
        for (_, ctx) in self.map.lock().unwrap_or_else(|p| p.into_inner()).drain() {
            ctx.deleted.store(true, Ordering::SeqCst);
            ctx.kill();
        }
    }
}

/// Clears the busy flag when a run ends, however it ends.
struct Busy<'a>(&'a AtomicBool);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// Why an instance ended, for people.
fn describe_end(lang: Lang, status: &ExecStatus, last_stderr: &str) -> String {
    let how = match (status.exit_code, status.signal) {
        _ if status.oom_killed => "ran out of memory (the sandbox's memory limit)".to_string(),
        (Some(c), _) => format!("exited with status {c}"),
        (_, Some(6)) if last_stderr.starts_with("wasm trap") => {
            format!("was killed by signal 6 ({last_stderr})")
        }
        (_, Some(s)) => format!("was killed by signal {s}"),
        _ => "stopped".into(),
    };
    format!("the {} instance {how}", lang.name())
}

/// One snippet's output as it is collected and streamed: the cap and its marker per stream.
struct Collector<'a, 'b> {
    out: RunOutput,
    limit: u64,
    sink: &'a mut RunSink<'b>,
}

impl Collector<'_, '_> {
    fn output(&mut self, k: usize, data: &[u8]) {
        let (kept, truncated) = if k == 0 {
            (&mut self.out.stdout, &mut self.out.summary.stdout_truncated)
        } else {
            (&mut self.out.stderr, &mut self.out.summary.stderr_truncated)
        };
        if *truncated || data.is_empty() {
            return;
        }
        // the marker is not counted against the limit: measure what came before it
        let room = self.limit.saturating_sub(kept.len() as u64) as usize;
        let mut chunk = data[..data.len().min(room)].to_vec();
        if data.len() > room {
            *truncated = true;
            chunk.extend_from_slice(hutch_proto::TRUNCATION_MARKER.as_bytes());
        }
        kept.extend_from_slice(&chunk);
        let ev = if k == 0 { RunEvent::Stdout(chunk) } else { RunEvent::Stderr(chunk) };
        (self.sink)(&ev);
    }

    fn result(&mut self, r: RichResult) {
        (self.sink)(&RunEvent::Result(r.clone()));
        self.out.results.push(r);
    }

    fn error(&mut self, e: CodeError) {
        (self.sink)(&RunEvent::Error(e.clone()));
        self.out.error = Some(e);
    }
}

fn code_error(ev: &Value) -> CodeError {
    CodeError {
        name: ev["name"].as_str().unwrap_or("Error").to_string(),
        value: ev["value"].as_str().unwrap_or("").to_string(),
        traceback: ev["traceback"]
            .as_array()
            .map(|a| a.iter().filter_map(|l| l.as_str().map(String::from)).collect())
            .unwrap_or_default(),
    }
}

/// How a run ended when it did not end with the runner's `done`.
enum Ended {
    Done,
    Died(String),
    TimedOut,
}

impl WasmSandbox {
    /// Starts a runner instance for `ctx` and waits for its `ready` frame.
    async fn start_instance(&self, ctx: &Ctx) -> Result<Instance, SandboxError> {
        let t = Instant::now();
        let mut req = ExecRequest::argv(ctx.lang.argv());
        req.cwd = Some(ctx.cwd.clone());
        req.env = ctx.env.clone();
        req.stdin = StdinMode::Stream;
        // per-snippet caps are applied by the run; the instance's own stream is not capped
        req.output_limit = u64::MAX;
        let process = self.launch(req, Vec::new(), None)?;
        let mut inst =
            Instance { process, frames: FrameReader::default(), last_stderr: String::new() };
        let failed = |why: String| SandboxError::Agent {
            code: ErrorCode::SpawnFailed,
            message: format!("the {} runner failed to start: {why}", ctx.lang.name()),
        };
        let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
        let mut stderr = Vec::new();
        loop {
            while let Some(f) = inst.frames.next() {
                if let Frame::Event(ev) = f {
                    if ev["t"] == "ready" {
                        *ctx.version.lock().unwrap_or_else(|p| p.into_inner()) =
                            ev["version"].as_str().unwrap_or_default().to_string();
                        ctx.pid.store(inst.process.pid, Ordering::SeqCst);
                        *ctx.control.lock().unwrap_or_else(|p| p.into_inner()) =
                            Some(inst.process.control.clone());
                        ctx.startup_us.store(t.elapsed().as_micros() as u64, Ordering::SeqCst);
                        return Ok(inst);
                    }
                }
            }
            match tokio::time::timeout_at(deadline, inst.process.next_event()).await {
                Ok(Ok(OutputEvent::Stdout(b))) => inst.frames.push(&b),
                Ok(Ok(OutputEvent::Stderr(b))) if stderr.len() < 4096 => {
                    stderr.extend_from_slice(&b)
                }
                Ok(Ok(OutputEvent::Stderr(_))) => {}
                Ok(Ok(OutputEvent::Exited(status))) => {
                    let text = String::from_utf8_lossy(&stderr).trim().to_string();
                    let last = text.lines().last().unwrap_or_default().to_string();
                    return Err(failed(format!(
                        "{}: {text}",
                        describe_end(ctx.lang, &status, &last)
                    )));
                }
                Ok(Err(e)) => return Err(failed(e.to_string())),
                Err(_) => {
                    inst.process.control.kill(9);
                    return Err(failed(format!("not ready within {READY_TIMEOUT:?}")));
                }
            }
        }
    }

    /// Replaces the context's instance after `why`; the note goes to the run's summary.
    async fn restart_into(
        &self,
        ctx: &Ctx,
        slot: &mut Option<Instance>,
        why: String,
        summary: &mut RunSummary,
    ) {
        if let Some(old) = slot.take() {
            old.stop().await;
        }
        ctx.executions.store(0, Ordering::SeqCst);
        if ctx.deleted.load(Ordering::SeqCst) {
            summary.restarted = Some(format!("{why}; the context was deleted"));
            return;
        }
        match self.start_instance(ctx).await {
            Ok(i) => {
                *slot = Some(i);
                summary.restarted =
                    Some(format!("{why}; the context was restarted and its state is gone"));
            }
            Err(e) => summary.restarted = Some(format!("{why}; restarting it failed: {e}")),
        }
    }

    /// Sends the snippet and collects its frames until `done`, the instance's end or the
    /// deadline.
    async fn drive(
        &self,
        ctx: &Ctx,
        inst: &mut Instance,
        seq: u64,
        code: &str,
        deadline: tokio::time::Instant,
        c: &mut Collector<'_, '_>,
    ) -> Ended {
        let request = serde_json::json!({"seq": seq, "limit": c.limit, "code": code});
        let mut line = request.to_string().into_bytes();
        line.push(b'\n');
        // a dead instance shows up below as its exit; one that does not read its requests (a
        // timer the last snippet left spinning) runs into the deadline
        let write = hutch_core::ProcessControl::write_stdin(&*inst.process.control, &line);
        if tokio::time::timeout_at(deadline, write).await.is_err() {
            return Ended::TimedOut;
        }
        loop {
            while let Some(f) = inst.frames.next() {
                match f {
                    Frame::Output(k, data) => c.output(k, &data),
                    Frame::Event(ev) if ev["seq"].as_u64() != Some(seq) => {}
                    Frame::Event(ev) => match ev["t"].as_str() {
                        Some("result") => c.result(RichResult {
                            main: ev["main"].as_bool().unwrap_or(false),
                            data: ev["data"]
                                .as_object()
                                .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                                .unwrap_or_default(),
                        }),
                        Some("error") => c.error(code_error(&ev)),
                        Some("done") => {
                            let n = ev["execution_count"].as_u64().unwrap_or(0);
                            c.out.summary.execution_count = n;
                            ctx.executions.store(n, Ordering::SeqCst);
                            return Ended::Done;
                        }
                        _ => {}
                    },
                }
            }
            match tokio::time::timeout_at(deadline, inst.process.next_event()).await {
                Ok(Ok(OutputEvent::Stdout(b))) => inst.frames.push(&b),
                Ok(Ok(OutputEvent::Stderr(b))) => {
                    // the instance's own stderr: the interpreter's fatal messages, a trap
                    if let Some(l) = String::from_utf8_lossy(&b).lines().rfind(|l| !l.is_empty()) {
                        inst.last_stderr = l.chars().take(500).collect();
                    }
                    c.output(1, &b);
                }
                Ok(Ok(OutputEvent::Exited(status))) => {
                    while let Some(f) = inst.frames.next() {
                        if let Frame::Output(k, data) = f {
                            c.output(k, &data);
                        }
                    }
                    return Ended::Died(describe_end(ctx.lang, &status, &inst.last_stderr));
                }
                Ok(Err(e)) => return Ended::Died(format!("the {} instance: {e}", ctx.lang.name())),
                Err(_) => return Ended::TimedOut,
            }
        }
    }
}

#[async_trait]
impl ContextOps for WasmSandbox {
    async fn create_context(
        &self,
        language: &str,
        cwd: Option<&str>,
        env: BTreeMap<String, String>,
    ) -> Result<ContextInfo, SandboxError> {
        let lang = Lang::parse(language)?;
        if self.contexts.map.lock().unwrap_or_else(|p| p.into_inner()).len() >= MAX_CONTEXTS {
            return Err(invalid(format!(
                "a sandbox holds at most {MAX_CONTEXTS} contexts; delete one first"
            )));
        }
        let n = self.contexts.next.fetch_add(1, Ordering::SeqCst) + 1;
        let ctx = Arc::new(Ctx {
            id: format!("ctx-{n}"),
            lang,
            cwd: cwd.map(String::from).unwrap_or_else(|| self.spec.workdir.clone()),
            env,
            instance: tokio::sync::Mutex::new(None),
            control: Mutex::new(None),
            pid: AtomicU32::new(0),
            version: Mutex::new(String::new()),
            executions: AtomicU64::new(0),
            busy: AtomicBool::new(false),
            interrupted: AtomicBool::new(false),
            deleted: AtomicBool::new(false),
            seq: AtomicU64::new(0),
            startup_us: AtomicU64::new(0),
        });
        let inst = self.start_instance(&ctx).await?;
        *ctx.instance.lock().await = Some(inst);
        self.contexts
            .map
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(ctx.id.clone(), ctx.clone());
        Ok(ctx.info())
    }

    async fn run_code(
        &self,
        context_id: &str,
        code: &str,
        timeout_ms: Option<u64>,
        output_limit: u64,
        sink: RunSink<'_>,
    ) -> Result<RunOutput, SandboxError> {
        let ctx = self.contexts.get(context_id)?;
        if ctx.busy.swap(true, Ordering::SeqCst) {
            return Err(invalid(format!("context {context_id} is busy running another snippet")));
        }
        let _busy = Busy(&ctx.busy);
        ctx.interrupted.store(false, Ordering::SeqCst);
        let started = Instant::now();
        let timeout = Duration::from_millis(timeout_ms.unwrap_or(self.spec.limits.timeout_ms));
        let mut sink = sink;
        let mut c = Collector {
            out: RunOutput::default(),
            limit: output_limit.min(self.spec.limits.output_bytes),
            sink: &mut sink,
        };
        let mut slot = ctx.instance.lock().await;
        if slot.is_none() {
            let why = "the context was not running".to_string();
            self.restart_into(&ctx, &mut slot, why, &mut c.out.summary).await;
        }
        if let Some(inst) = slot.as_mut() {
            let seq = ctx.seq.fetch_add(1, Ordering::SeqCst) + 1;
            let deadline = tokio::time::Instant::now() + timeout;
            let why = match self.drive(&ctx, inst, seq, code, deadline, &mut c).await {
                Ended::Done => None,
                Ended::Died(_) if ctx.interrupted.load(Ordering::SeqCst) => {
                    c.error(CodeError {
                        name: "Interrupted".into(),
                        value: "the snippet was interrupted; WebAssembly cannot stop a snippet in place, so its instance was stopped".into(),
                        traceback: Vec::new(),
                    });
                    Some("the snippet was interrupted".to_string())
                }
                Ended::Died(why) => {
                    c.error(CodeError {
                        name: "ContextDied".into(),
                        value: why.clone(),
                        traceback: Vec::new(),
                    });
                    Some(why)
                }
                Ended::TimedOut => {
                    c.out.summary.timed_out = true;
                    let why = format!(
                        "the snippet did not finish within {timeout:?}; WebAssembly cannot interrupt it in place, so its instance was stopped"
                    );
                    c.error(CodeError {
                        name: "TimeoutError".into(),
                        value: why.clone(),
                        traceback: Vec::new(),
                    });
                    Some(why)
                }
            };
            if let Some(why) = why {
                self.restart_into(&ctx, &mut slot, why, &mut c.out.summary).await;
            }
        }
        drop(slot);
        let mut out = c.out;
        out.summary.duration_us = started.elapsed().as_micros() as u64;
        Ok(out)
    }

    /// No signals in WASI: a running snippet is stopped with its instance (the run reports
    /// the restart); an idle context is left alone.
    async fn interrupt_context(&self, context_id: &str) -> Result<(), SandboxError> {
        let ctx = self.contexts.get(context_id)?;
        if ctx.busy.load(Ordering::SeqCst) {
            ctx.interrupted.store(true, Ordering::SeqCst);
            ctx.kill();
        }
        Ok(())
    }

    async fn restart_context(&self, context_id: &str) -> Result<ContextInfo, SandboxError> {
        let ctx = self.contexts.get(context_id)?;
        ctx.kill();
        let mut slot = ctx.instance.lock().await;
        if let Some(old) = slot.take() {
            old.stop().await;
        }
        ctx.executions.store(0, Ordering::SeqCst);
        *slot = Some(self.start_instance(&ctx).await?);
        drop(slot);
        Ok(ctx.info())
    }

    async fn delete_context(&self, context_id: &str) -> Result<(), SandboxError> {
        let ctx = self
            .contexts
            .map
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(context_id)
            .ok_or_else(|| no_context(context_id))?;
        ctx.deleted.store(true, Ordering::SeqCst);
        ctx.kill();
        Ok(())
    }

    async fn list_contexts(&self) -> Result<Vec<ContextInfo>, SandboxError> {
        let mut v: Vec<ContextInfo> = self
            .contexts
            .map
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .map(|c| c.info())
            .collect();
        v.sort_by(|a, b| a.context_id.cmp(&b.context_id));
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(r: &mut FrameReader) -> Vec<Frame> {
        std::iter::from_fn(|| r.next()).collect()
    }

    #[test]
    fn frames_and_raw_output_are_told_apart() {
        let mut r = FrameReader::default();
        r.push(b"raw\x1e{\"t\":\"out\",\"d\":\"hi\\n\"}\n\x1e{\"t\":\"err\",\"d\":\"e\"}\n");
        r.push(b"\x1e{\"t\":\"done\",\"seq\":1,");
        let got = all(&mut r);
        assert_eq!(
            got,
            vec![
                Frame::Output(0, b"raw".to_vec()),
                Frame::Output(0, b"hi\n".to_vec()),
                Frame::Output(1, b"e".to_vec()),
            ]
        );
        r.push(b"\"execution_count\":2}\n");
        match r.next() {
            Some(Frame::Event(v)) => assert_eq!(v["execution_count"], 2),
            other => panic!("{other:?}"),
        }
        assert!(r.next().is_none());
    }

    #[test]
    fn a_stray_marker_or_a_broken_frame_is_output() {
        let mut r = FrameReader::default();
        r.push(b"\x1eab\x1e{\"t\":\"out\",\"d\":\"x\"}\n\x1enot json\n");
        assert_eq!(
            all(&mut r),
            vec![
                Frame::Output(0, b"\x1eab".to_vec()),
                Frame::Output(0, b"x".to_vec()),
                Frame::Output(0, b"\x1enot json\n".to_vec()),
            ]
        );
    }

    #[test]
    fn bash_is_refused_with_the_reason() {
        let e = Lang::parse("bash").unwrap_err().to_string();
        assert!(e.contains("no POSIX shell"), "{e}");
        assert!(Lang::parse("cobol").is_err());
        assert_eq!(Lang::parse("js").ok(), Some(Lang::JavaScript));
    }
}
