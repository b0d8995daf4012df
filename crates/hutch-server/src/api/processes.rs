//! Background processes: started by one request, then listed, signalled, fed stdin, and read
//! (buffered logs, or attached live over Server-Sent Events) by later ones.
use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::IntoResponse;
use axum::{Extension, Json};
use futures_util::Stream;
use hutch_core::StdinMode;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::exec::{chunk_json, spawn_on, status_json};
use super::types::{ExecBody, SignalBody};
use super::{ApiBytes, ApiJson, ApiPath};
use crate::daemon::{Caller, Daemon};
use crate::error::ApiError;
use crate::live::{BgProcess, LiveSandbox, ProcEvent};

fn find(
    d: &Daemon,
    caller: &Caller,
    id: &str,
    pid: u32,
) -> Result<(Arc<LiveSandbox>, Arc<BgProcess>), ApiError> {
    let live = d.live_for(id, caller)?;
    let p = live.process(pid).ok_or_else(|| {
        ApiError::not_found(format!("no background process {pid} in sandbox {id}"))
    })?;
    Ok((live, p))
}

pub async fn start(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<ExecBody>,
) -> Result<impl IntoResponse, ApiError> {
    let (mut req, stdin) = body.to_request().map_err(ApiError::bad_request)?;
    // stdin stays open so it can be written later
    req.stdin = StdinMode::Stream;
    let live = d.live_for(&id, &caller)?;
    d.command_started(&live);
    let p = match spawn_on(&live, req, Vec::new()).await {
        Ok(p) => p,
        Err(e) => {
            d.command_finished(&live);
            return Err(e);
        }
    };
    if !stdin.is_empty() {
        let _ = p.control().write_stdin(&stdin).await;
    }
    let (dd, ll) = (d.clone(), live.clone());
    let bg = live.adopt_process(p, body.summary(), d.cfg.process_log_bytes, move || {
        dd.command_finished(&ll)
    });
    d.audit(&caller, "start_process", Some(&id), json!({"cmd": body.summary(), "pid": bg.pid}));
    Ok((StatusCode::CREATED, Json(bg.info())))
}

pub async fn list(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Value>, ApiError> {
    let live = d.live_for(&id, &caller)?;
    let procs: Vec<_> = live.processes().iter().map(|p| p.info()).collect();
    Ok(Json(json!({"processes": procs})))
}

pub async fn get(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiPath((id, pid)): ApiPath<(String, u32)>,
) -> Result<Json<Value>, ApiError> {
    let (_, p) = find(&d, &caller, &id, pid)?;
    Ok(Json(serde_json::to_value(p.info()).unwrap_or_default()))
}

pub async fn signal(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiPath((id, pid)): ApiPath<(String, u32)>,
    ApiJson(b): ApiJson<SignalBody>,
) -> Result<StatusCode, ApiError> {
    if !(1..=64).contains(&b.signal) {
        return Err(ApiError::bad_request(format!(
            "signal {} is not a signal number (1-64)",
            b.signal
        )));
    }
    let (_, p) = find(&d, &caller, &id, pid)?;
    if !p.info().running {
        return Err(ApiError::conflict(format!("process {pid} has exited")));
    }
    p.control
        .signal(b.signal)
        .await
        .map_err(|e| ApiError::from_sandbox(e, "signalling the process"))?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn stdin(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiPath((id, pid)): ApiPath<(String, u32)>,
    ApiBytes(body): ApiBytes,
) -> Result<StatusCode, ApiError> {
    let (_, p) = find(&d, &caller, &id, pid)?;
    p.control.write_stdin(&body).await.map_err(|e| ApiError::from_sandbox(e, "writing stdin"))?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn close_stdin(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiPath((id, pid)): ApiPath<(String, u32)>,
) -> Result<StatusCode, ApiError> {
    let (_, p) = find(&d, &caller, &id, pid)?;
    p.control.close_stdin().await.map_err(|e| ApiError::from_sandbox(e, "closing stdin"))?;
    Ok(StatusCode::NO_CONTENT)
}

/// The buffered output (the last `process_log_bytes` per stream) and the status.
pub async fn logs(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiPath((id, pid)): ApiPath<(String, u32)>,
) -> Result<Json<Value>, ApiError> {
    let (_, p) = find(&d, &caller, &id, pid)?;
    let (events, _, _) = p.snapshot_and_subscribe();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    for e in &events {
        match e {
            ProcEvent::Stdout(b) => out.extend_from_slice(b),
            ProcEvent::Stderr(b) => err.extend_from_slice(b),
            _ => {}
        }
    }
    let (stdout, stdout_b64) = super::types::text_and_b64(&out);
    let (stderr, stderr_b64) = super::types::text_and_b64(&err);
    let mut v = json!({"process": p.info(), "stdout": stdout, "stderr": stderr});
    if let Some(b) = stdout_b64 {
        v["stdout_b64"] = b.into();
    }
    if let Some(b) = stderr_b64 {
        v["stderr_b64"] = b.into();
    }
    Ok(Json(v))
}

fn to_event(e: &ProcEvent) -> Event {
    let (kind, v) = match e {
        ProcEvent::Stdout(b) => ("stdout", chunk_json(b)),
        ProcEvent::Stderr(b) => ("stderr", chunk_json(b)),
        ProcEvent::Exited(st) => ("exit", status_json(st)),
        ProcEvent::Error(m) => ("error", json!({"code": "sandbox_error", "message": m})),
    };
    Event::default().event(kind).data(v.to_string())
}

/// Replays the buffered output, then streams live until the process ends.
pub async fn attach(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiPath((id, pid)): ApiPath<(String, u32)>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let (_, p) = find(&d, &caller, &id, pid)?;
    let (backlog, mut rx, done) = p.snapshot_and_subscribe();
    let (tx, out) = mpsc::channel(64);
    tokio::spawn(async move {
        for e in &backlog {
            if tx.send(Ok(to_event(e))).await.is_err() {
                return;
            }
        }
        if done {
            return;
        }
        loop {
            match rx.recv().await {
                Ok(e) => {
                    let last = matches!(e, ProcEvent::Exited(_) | ProcEvent::Error(_));
                    if tx.send(Ok(to_event(&e))).await.is_err() || last {
                        return;
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    let ev = Event::default()
                        .event("lagged")
                        .data(json!({"dropped_events": n}).to_string());
                    if tx.send(Ok(ev)).await.is_err() {
                        return;
                    }
                }
                Err(_) => return,
            }
        }
    });
    Ok(Sse::new(ReceiverStream::new(out)).keep_alive(KeepAlive::default()))
}
