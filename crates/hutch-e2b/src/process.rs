//! envd's `process.Process` service on hutch's background processes: every command started
//! here is a daemon background process, so it outlives the stream that started it, and can be
//! listed, connected to, fed stdin and signalled by pid or tag.
use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use axum::{Extension, Json};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use futures_util::StreamExt;
use hutch_core::{ExecRequest, ExecStatus, PtySize, StdinMode};
use hutch_server::live::{BgProcess, ProcEvent};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::broadcast::error::RecvError;

use crate::connect::{self, Decoder, END_STREAM};
use crate::error::{E2bError, Rpc};
use crate::plane::{check_user, Target};
use crate::E2b;

type S = State<Arc<E2b>>;

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ProcessConfig {
    cmd: String,
    args: Vec<String>,
    envs: BTreeMap<String, String>,
    cwd: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Pty {
    size: Option<Size>,
}

#[derive(Debug, Default, Deserialize, Clone, Copy)]
#[serde(default)]
struct Size {
    rows: u16,
    cols: u16,
}

impl Size {
    fn to_pty(self) -> Result<PtySize, E2bError> {
        if self.rows == 0 || self.cols == 0 {
            return Err(E2bError::BadRequest("the terminal size needs rows and cols".into()));
        }
        Ok(PtySize { rows: self.rows, cols: self.cols })
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct StartRequest {
    process: ProcessConfig,
    pty: Option<Pty>,
    tag: Option<String>,
    /// Absent means open (as upstream envd).
    stdin: Option<bool>,
}

/// `ProcessSelector`: a pid or a tag.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Selector {
    pid: Option<u32>,
    tag: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Selected {
    process: Selector,
}

fn find(t: &Target, sel: &Selector) -> Result<Arc<BgProcess>, E2bError> {
    let found = match (&sel.pid, &sel.tag) {
        (Some(pid), _) => t.live.process(*pid),
        (None, Some(tag)) => t
            .live
            .processes()
            .into_iter()
            .filter(|p| p.info().running)
            .find(|p| p.command.get("tag").and_then(Value::as_str) == Some(tag)),
        (None, None) => None,
    };
    let what = match (&sel.pid, &sel.tag) {
        (Some(pid), _) => format!("process with pid {pid}"),
        (None, Some(tag)) => format!("process with tag {tag}"),
        _ => "process (no pid or tag given)".into(),
    };
    found.ok_or_else(|| E2bError::NotFound(format!("{what} not found")))
}

fn running(t: &Target, sel: &Selector) -> Result<Arc<BgProcess>, E2bError> {
    let p = find(t, sel)?;
    if p.info().running {
        Ok(p)
    } else {
        Err(E2bError::NotFound(format!("process with pid {} not found (it has exited)", p.pid)))
    }
}

pub async fn start(
    State(s): S,
    Extension(t): Extension<Target>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    match start_process(&s, &t, &headers, &body).await {
        Ok(p) => stream_events(p, connect::keepalive(&headers)),
        Err(e) => connect::stream_error(e),
    }
}

async fn start_process(
    s: &E2b,
    t: &Target,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Arc<BgProcess>, E2bError> {
    let req: StartRequest = connect::stream_request(body)?;
    check_user(headers)?;
    if req.process.cmd.is_empty() {
        return Err(E2bError::BadRequest("process.cmd is required".into()));
    }
    let mut argv = vec![req.process.cmd.clone()];
    argv.extend(req.process.args.iter().cloned());
    let mut er = ExecRequest::argv(argv);
    er.env = req.process.envs.clone();
    er.cwd = req.process.cwd.clone().filter(|c| !c.is_empty());
    er.timeout_ms = connect::timeout_ms(headers);
    er.output_limit = u64::MAX;
    er.stdin = if req.stdin.unwrap_or(true) { StdinMode::Stream } else { StdinMode::Null };
    if let Some(pty) = &req.pty {
        er.pty = Some(pty.size.unwrap_or(Size { rows: 24, cols: 80 }).to_pty()?);
        er.stdin = StdinMode::Stream;
    }
    let config = json!({
        "pty": req.pty.is_some(),
        "cmd": req.process.cmd,
        "args": req.process.args,
        "envs": req.process.envs,
        "cwd": req.process.cwd,
        "tag": req.tag,
    });
    let d = &s.daemon;
    d.command_started(&t.live);
    let p = match hutch_server::api::spawn_on(&t.live, er, Vec::new()).await {
        Ok(p) => p,
        Err(e) => {
            d.command_finished(&t.live);
            return Err(e.into());
        }
    };
    let (dd, ll) = (d.clone(), t.live.clone());
    let bg =
        t.live.adopt_process(p, config, d.cfg.process_log_bytes, move || dd.command_finished(&ll));
    Ok(bg)
}

pub async fn connect(Extension(t): Extension<Target>, headers: HeaderMap, body: Bytes) -> Response {
    let found = connect::stream_request::<Selected>(&body).and_then(|r| find(&t, &r.process));
    match found {
        Ok(p) => stream_events(p, connect::keepalive(&headers)),
        Err(e) => connect::stream_error(e),
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        1 => "hangup",
        2 => "interrupt",
        9 => "killed",
        13 => "broken pipe",
        15 => "terminated",
        _ => "signal",
    }
}

/// `ProcessEvent.end`, or the error that ends the stream instead (a deadline).
fn end_event(st: &ExecStatus) -> Result<Value, Value> {
    if st.timed_out {
        return Err(E2bError::DeadlineExceeded(
            "the command's deadline passed and it was killed".into(),
        )
        .rpc_json());
    }
    let end = match (st.exit_code, st.signal) {
        (Some(code), _) => {
            json!({"exitCode": code, "exited": true, "status": format!("exit status {code}")})
        }
        (None, sig) => {
            let sig = sig.unwrap_or(9);
            json!({"exitCode": -1, "exited": false, "status": format!("signal: {}", signal_name(sig))})
        }
    };
    Ok(json!({ "event": { "end": end } }))
}

/// Streams a process's events: `start`, its output (what is buffered, then live), keepalives
/// while idle, and `end`. Closing the stream leaves the process running.
fn stream_events(p: Arc<BgProcess>, keepalive: std::time::Duration) -> Response {
    let (tx, resp) = connect::stream();
    let pty = is_pty(&p);
    tokio::spawn(async move {
        let send = |v: Value| {
            let tx = tx.clone();
            async move { tx.send(connect::envelope(0, &v)).await.is_ok() }
        };
        let (buffered, mut rx, _) = p.snapshot_and_subscribe();
        if !send(json!({"event": {"start": {"pid": p.pid}}})).await {
            return;
        }
        let mut ending: Option<Result<Value, Value>> = None;
        for ev in buffered {
            match to_message(&ev, pty) {
                Message::Data(v) => {
                    if !send(v).await {
                        return;
                    }
                }
                Message::End(e) => {
                    ending = Some(e);
                    break;
                }
            }
        }
        while ending.is_none() {
            let ev = match tokio::time::timeout(keepalive, rx.recv()).await {
                Err(_) => {
                    if !send(json!({"event": {"keepalive": {}}})).await {
                        return;
                    }
                    continue;
                }
                Ok(Ok(ev)) => ev,
                Ok(Err(RecvError::Lagged(_))) => continue,
                Ok(Err(RecvError::Closed)) => {
                    // the process's task ended: its last event is in the log
                    let (log, _, _) = p.snapshot_and_subscribe();
                    log.last().cloned().unwrap_or(ProcEvent::Error("process lost".into()))
                }
            };
            match to_message(&ev, pty) {
                Message::Data(v) => {
                    if !send(v).await {
                        return;
                    }
                }
                Message::End(e) => ending = Some(e),
            }
        }
        let err = match ending {
            Some(Ok(end)) => {
                if !send(end).await {
                    return;
                }
                None
            }
            Some(Err(e)) => Some(e),
            None => None,
        };
        let _ = tx.send(connect::end_stream(err)).await;
    });
    resp
}

enum Message {
    Data(Value),
    End(Result<Value, Value>),
}

fn is_pty(p: &BgProcess) -> bool {
    p.command.get("pty").and_then(Value::as_bool) == Some(true)
}

/// A terminal's output is all `pty` data.
fn to_message(ev: &ProcEvent, pty: bool) -> Message {
    match ev {
        ProcEvent::Stdout(d) if pty => {
            Message::Data(json!({"event": {"data": {"pty": B64.encode(d.as_slice())}}}))
        }
        ProcEvent::Stdout(d) => {
            Message::Data(json!({"event": {"data": {"stdout": B64.encode(d.as_slice())}}}))
        }
        ProcEvent::Stderr(d) => {
            Message::Data(json!({"event": {"data": {"stderr": B64.encode(d.as_slice())}}}))
        }
        ProcEvent::Exited(st) => Message::End(end_event(st)),
        ProcEvent::Error(m) => Message::End(Err(
            json!({"code": "internal", "message": format!("the command failed: {m}")}),
        )),
    }
}

pub async fn list(Extension(t): Extension<Target>) -> Rpc<Json<Value>> {
    let procs: Vec<Value> = t
        .live
        .processes()
        .iter()
        .filter(|p| p.info().running)
        .map(|p| {
            let c = &p.command;
            let config = if c.get("cmd").is_some() {
                json!({"cmd": c["cmd"], "args": c["args"], "envs": c["envs"], "cwd": c["cwd"]})
            } else {
                // started through hutch's own API
                json!({"cmd": c.to_string(), "args": [], "envs": {}})
            };
            let mut v = json!({"pid": p.pid, "config": config});
            if let Some(tag) = c.get("tag").filter(|t| t.is_string()) {
                v["tag"] = tag.clone();
            }
            v
        })
        .collect();
    Rpc(Ok(Json(json!({ "processes": procs }))))
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct SignalRequest {
    process: Selector,
    signal: Value,
}

fn signal_number(v: &Value) -> Result<i32, E2bError> {
    match v {
        Value::String(s) if s == "SIGNAL_SIGKILL" => Ok(9),
        Value::String(s) if s == "SIGNAL_SIGTERM" => Ok(15),
        Value::Number(n) if matches!(n.as_i64(), Some(9) | Some(15)) => {
            Ok(n.as_i64().unwrap_or(9) as i32)
        }
        other => {
            Err(E2bError::BadRequest(format!("signal {other}: SIGNAL_SIGKILL or SIGNAL_SIGTERM")))
        }
    }
}

pub async fn send_signal(Extension(t): Extension<Target>, body: Bytes) -> Rpc<Json<Value>> {
    Rpc(async {
        let req: SignalRequest = connect::parse(&body)?;
        let sig = signal_number(&req.signal)?;
        let p = running(&t, &req.process)?;
        p.control.signal(sig).await.map_err(|e| {
            E2bError::from(hutch_server::ApiError::from_sandbox(e, "signalling the process"))
        })?;
        Ok(Json(json!({})))
    }
    .await)
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Input {
    stdin: Option<String>,
    pty: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct InputRequest {
    process: Selector,
    input: Input,
}

async fn write_input(p: &BgProcess, input: &Input) -> Result<(), E2bError> {
    let data = match (&input.stdin, &input.pty) {
        (_, Some(_)) if !is_pty(p) => {
            return Err(E2bError::BadRequest(format!("process {} has no terminal", p.pid)))
        }
        (Some(d), _) | (None, Some(d)) => d.as_str(),
        (None, None) => "",
    };
    let data = B64.decode(data).map_err(|_| E2bError::BadRequest("input is not base64".into()))?;
    p.control
        .write_stdin(&data)
        .await
        .map_err(|e| hutch_server::ApiError::from_sandbox(e, "writing stdin").into())
}

pub async fn send_input(Extension(t): Extension<Target>, body: Bytes) -> Rpc<Json<Value>> {
    Rpc(async {
        let req: InputRequest = connect::parse(&body)?;
        let p = running(&t, &req.process)?;
        write_input(&p, &req.input).await?;
        Ok(Json(json!({})))
    }
    .await)
}

pub async fn close_stdin(Extension(t): Extension<Target>, body: Bytes) -> Rpc<Json<Value>> {
    Rpc(async {
        let req: Selected = connect::parse(&body)?;
        let p = running(&t, &req.process)?;
        if is_pty(&p) {
            return Err(E2bError::BadRequest(format!(
                "process {} reads from a terminal: send EOF (Ctrl-D) as input instead",
                p.pid
            )));
        }
        p.control.close_stdin().await.map_err(|e| {
            E2bError::from(hutch_server::ApiError::from_sandbox(e, "closing stdin"))
        })?;
        Ok(Json(json!({})))
    }
    .await)
}

/// Client streaming: `{"start": {"process": ...}}`, then `{"data": {"input": ...}}` and
/// `{"keepalive": {}}` messages, applied as they arrive.
pub async fn stream_input(Extension(t): Extension<Target>, body: Body) -> Response {
    let mut stream = body.into_data_stream();
    let mut dec = Decoder::default();
    let mut target: Option<Arc<BgProcess>> = None;
    let result: Result<(), E2bError> = async {
        while let Some(chunk) = stream.next().await {
            let chunk =
                chunk.map_err(|e| E2bError::BadRequest(format!("reading the stream: {e}")))?;
            dec.push(&chunk);
            while let Some((flags, msg)) = dec.next_envelope()? {
                if flags & END_STREAM != 0 {
                    continue;
                }
                let v: Value = connect::parse(&msg)?;
                if let Some(start) = v.get("start") {
                    let sel: Selected = serde_json::from_value(start.clone()).unwrap_or_default();
                    target = Some(running(&t, &sel.process)?);
                } else if let Some(data) = v.get("data") {
                    let p = target.as_ref().ok_or_else(|| {
                        E2bError::BadRequest("the first message must be start".into())
                    })?;
                    let input: Input =
                        serde_json::from_value(data.get("input").cloned().unwrap_or_default())
                            .unwrap_or_default();
                    write_input(p, &input).await?;
                }
            }
        }
        Ok(())
    }
    .await;
    let (tx, resp) = connect::stream();
    match result {
        Ok(()) => {
            let _ = tx.send(connect::envelope(0, &json!({}))).await;
            let _ = tx.send(connect::end_stream(None)).await;
        }
        Err(e) => {
            let _ = tx.send(connect::end_stream(Some(e.rpc_json()))).await;
        }
    }
    resp
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct UpdateRequest {
    process: Selector,
    pty: Option<Pty>,
}

/// `Update`: resizes a process's terminal.
pub async fn update(Extension(t): Extension<Target>, body: Bytes) -> Rpc<Json<Value>> {
    Rpc(async {
        let req: UpdateRequest = connect::parse(&body)?;
        let p = running(&t, &req.process)?;
        let Some(size) = req.pty.and_then(|p| p.size) else {
            return Ok(Json(json!({})));
        };
        if !is_pty(&p) {
            return Err(E2bError::BadRequest(format!("process {} has no terminal", p.pid)));
        }
        p.control.resize(size.to_pty()?).await.map_err(|e| {
            E2bError::from(hutch_server::ApiError::from_sandbox(e, "resizing the terminal"))
        })?;
        Ok(Json(json!({})))
    }
    .await)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: Option<i32>, signal: Option<i32>, timed_out: bool) -> ExecStatus {
        serde_json::from_value(json!({
            "exit_code": code, "signal": signal, "timed_out": timed_out,
        }))
        .expect("status")
    }

    #[test]
    fn end_events_carry_exit_codes_signals_and_deadlines() {
        let ok = end_event(&status(Some(3), None, false)).expect("end");
        assert_eq!(ok["event"]["end"]["exitCode"], 3);
        assert_eq!(ok["event"]["end"]["status"], "exit status 3");
        let killed = end_event(&status(None, Some(9), false)).expect("end");
        assert_eq!(killed["event"]["end"]["exited"], false);
        assert_eq!(killed["event"]["end"]["status"], "signal: killed");
        let late = end_event(&status(None, Some(9), true)).expect_err("deadline");
        assert_eq!(late["code"], "deadline_exceeded");
    }

    #[test]
    fn signals_by_name_or_number() {
        assert_eq!(signal_number(&json!("SIGNAL_SIGKILL")).ok(), Some(9));
        assert_eq!(signal_number(&json!(15)).ok(), Some(15));
        assert!(signal_number(&json!("SIGNAL_SIGSTOP")).is_err());
    }
}
