//! Running commands: blocking JSON, streamed over Server-Sent Events, or interactive over a
//! WebSocket (with stdin and signals).
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use futures_util::Stream;
use hutch_core::{ExecRequest, ExecResult, OutputEvent, Process, StdinMode};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::types::{text_and_b64, ExecBody, ExecResultView};
use super::{ApiJson, ApiPath};
use crate::daemon::{Caller, Daemon};
use crate::error::ApiError;
use crate::live::LiveSandbox;

/// Starts a command on a live sandbox (read lock only for the start).
pub async fn spawn_on(
    live: &LiveSandbox,
    req: ExecRequest,
    stdin: Vec<u8>,
) -> Result<Box<dyn Process>, ApiError> {
    let guard = live.sandbox.read().await;
    let sb = guard
        .as_ref()
        .ok_or_else(|| ApiError::from_sandbox(hutch_core::SandboxError::NotRunning, "exec"))?;
    sb.spawn(req, stdin).await.map_err(|e| ApiError::from_sandbox(e, "running the command"))
}

pub use super::types::status_json;

pub fn chunk_json(data: &[u8]) -> Value {
    let (text, b64) = text_and_b64(data);
    match b64 {
        Some(b) => json!({"data": text, "b64": b}),
        None => json!({"data": text}),
    }
}

pub async fn exec(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<ExecBody>,
) -> Result<Json<ExecResultView>, ApiError> {
    let t = Instant::now();
    let (req, stdin) = body.to_request().map_err(ApiError::bad_request)?;
    let live = d.live_for(&id, &caller)?;
    d.command_started(&live);
    let keep = (req.output_limit as usize).saturating_add(256);
    let result: Result<ExecResult, ApiError> = async {
        let mut p = spawn_on(&live, req, stdin).await?;
        let mut r = ExecResult::default();
        loop {
            match p
                .next_event()
                .await
                .map_err(|e| ApiError::from_sandbox(e, "running the command"))?
            {
                OutputEvent::Stdout(b) => r
                    .stdout
                    .extend_from_slice(&b[..b.len().min(keep.saturating_sub(r.stdout.len()))]),
                OutputEvent::Stderr(b) => r
                    .stderr
                    .extend_from_slice(&b[..b.len().min(keep.saturating_sub(r.stderr.len()))]),
                OutputEvent::Exited(st) => {
                    r.status = st;
                    return Ok(r);
                }
            }
        }
    }
    .await;
    d.command_finished(&live);
    crate::metrics::global().exec_seconds.observe(t.elapsed());
    d.audit(&caller, "exec", Some(&id), json!({"cmd": body.summary(), "ok": result.is_ok()}));
    Ok(Json(ExecResultView::new(&result?)))
}

fn sse(kind: &str, v: Value) -> Result<Event, Infallible> {
    Ok(Event::default().event(kind).data(v.to_string()))
}

/// Events: `started` {pid}, `stdout`/`stderr` {data, b64?}, `exit` {status}, `error` {code, message}.
pub async fn exec_stream(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<ExecBody>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let (req, stdin) = body.to_request().map_err(ApiError::bad_request)?;
    let live = d.live_for(&id, &caller)?;
    d.command_started(&live);
    let mut p = match spawn_on(&live, req, stdin).await {
        Ok(p) => p,
        Err(e) => {
            d.command_finished(&live);
            return Err(e);
        }
    };
    d.audit(&caller, "exec", Some(&id), json!({"cmd": body.summary(), "stream": "sse"}));
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(async move {
        let _ = tx.send(sse("started", json!({"pid": p.pid()}))).await;
        loop {
            let ev = match p.next_event().await {
                Ok(OutputEvent::Stdout(b)) => sse("stdout", chunk_json(&b)),
                Ok(OutputEvent::Stderr(b)) => sse("stderr", chunk_json(&b)),
                Ok(OutputEvent::Exited(st)) => {
                    let _ = tx.send(sse("exit", status_json(&st))).await;
                    break;
                }
                Err(e) => {
                    let e = ApiError::from_sandbox(e, "running the command");
                    let _ =
                        tx.send(sse("error", json!({"code": e.code, "message": e.message}))).await;
                    break;
                }
            };
            if tx.send(ev).await.is_err() {
                // the client went away: stop the command
                let _ = p.control().signal(9).await;
            }
        }
        d.command_finished(&live);
    });
    Ok(Sse::new(ReceiverStream::new(rx)).keep_alive(KeepAlive::default()))
}

/// Interactive exec. The client's first message is the command (an `ExecBody` as JSON text);
/// then binary messages are stdin, and text messages `{"type":"stdin","data":..}`,
/// `{"type":"stdin_close"}` or `{"type":"signal","signal":N}`. The server sends JSON text
/// events: `{"type":"started","pid"}`, `{"type":"stdout"|"stderr","data","b64"?}`,
/// `{"type":"exit",...status}`, `{"type":"error","code","message"}`, then closes.
pub async fn exec_ws(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiPath(id): ApiPath<String>,
    ws: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Response {
    let live = match d.live_for(&id, &caller) {
        Ok(l) => l,
        Err(e) => return e.into_response(),
    };
    let ws = match ws {
        Ok(ws) => ws,
        Err(e) => {
            return ApiError::bad_request(format!(
                "this endpoint needs a WebSocket upgrade: {}",
                e.body_text()
            ))
            .into_response()
        }
    };
    ws.on_upgrade(move |socket| ws_session(socket, d, caller, live)).into_response()
}

async fn send_json(socket: &mut WebSocket, v: Value) -> bool {
    socket.send(Message::Text(v.to_string().into())).await.is_ok()
}

async fn ws_session(mut socket: WebSocket, d: Arc<Daemon>, caller: Caller, live: Arc<LiveSandbox>) {
    let first = match socket.recv().await {
        Some(Ok(Message::Text(t))) => t,
        _ => {
            let _ = send_json(&mut socket, json!({"type": "error", "code": "invalid_request", "message": "send the command as the first (text) message"})).await;
            return;
        }
    };
    let body: ExecBody = match serde_json::from_str(&first) {
        Ok(b) => b,
        Err(e) => {
            let _ = send_json(&mut socket, json!({"type": "error", "code": "invalid_request", "message": format!("invalid command: {e}")})).await;
            return;
        }
    };
    let (mut req, stdin) = match body.to_request() {
        Ok(r) => r,
        Err(m) => {
            let _ = send_json(
                &mut socket,
                json!({"type": "error", "code": "invalid_request", "message": m}),
            )
            .await;
            return;
        }
    };
    req.stdin = StdinMode::Stream;
    d.command_started(&live);
    d.audit(&caller, "exec", Some(&live.id), json!({"cmd": body.summary(), "stream": "ws"}));
    let mut p = match spawn_on(&live, req, Vec::new()).await {
        Ok(p) => p,
        Err(e) => {
            let _ = send_json(
                &mut socket,
                json!({"type": "error", "code": e.code, "message": e.message}),
            )
            .await;
            d.command_finished(&live);
            return;
        }
    };
    let ctl = p.control();
    if !stdin.is_empty() {
        let _ = ctl.write_stdin(&stdin).await;
    }
    let _ = send_json(&mut socket, json!({"type": "started", "pid": p.pid()})).await;
    let mut client_open = true;
    loop {
        tokio::select! {
            ev = p.next_event() => {
                let msg = match ev {
                    Ok(OutputEvent::Stdout(b)) => { let mut v = chunk_json(&b); v["type"] = "stdout".into(); v }
                    Ok(OutputEvent::Stderr(b)) => { let mut v = chunk_json(&b); v["type"] = "stderr".into(); v }
                    Ok(OutputEvent::Exited(st)) => {
                        let mut v = status_json(&st);
                        v["type"] = "exit".into();
                        let _ = send_json(&mut socket, v).await;
                        break;
                    }
                    Err(e) => {
                        let e = ApiError::from_sandbox(e, "running the command");
                        let _ = send_json(&mut socket, json!({"type": "error", "code": e.code, "message": e.message})).await;
                        break;
                    }
                };
                if !send_json(&mut socket, msg).await {
                    let _ = ctl.signal(9).await;
                }
            }
            msg = socket.recv(), if client_open => match msg {
                Some(Ok(Message::Binary(b))) => { let _ = ctl.write_stdin(&b).await; }
                Some(Ok(Message::Text(t))) => {
                    let v: Value = serde_json::from_str(&t).unwrap_or(Value::Null);
                    match v["type"].as_str() {
                        Some("stdin") => { let _ = ctl.write_stdin(v["data"].as_str().unwrap_or("").as_bytes()).await; }
                        Some("stdin_close") => { let _ = ctl.close_stdin().await; }
                        Some("signal") => { let _ = ctl.signal(v["signal"].as_i64().unwrap_or(15) as i32).await; }
                        _ => { let _ = send_json(&mut socket, json!({"type": "error", "code": "invalid_request", "message": "unknown message; use stdin, stdin_close or signal"})).await; }
                    }
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => {
                    client_open = false;
                    let _ = ctl.signal(9).await;
                }
                Some(Ok(_)) => {}
            }
        }
    }
    d.command_finished(&live);
    let _ = socket.send(Message::Close(None)).await;
}
