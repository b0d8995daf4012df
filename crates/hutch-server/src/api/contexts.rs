//! Code contexts: persistent interpreters (python, javascript, bash) that keep state between
//! snippets, with results by MIME type.
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::IntoResponse;
use axum::{Extension, Json};
use futures_util::Stream;
use hutch_core::{ContextInfo, RunEvent, RunOutput, Sandbox};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::{mpsc, RwLockReadGuard};
use tokio_stream::wrappers::ReceiverStream;

use super::exec::chunk_json;
use super::{ApiJson, ApiPath};
use crate::daemon::{Caller, Daemon};
use crate::error::ApiError;
use crate::live::LiveSandbox;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateContext {
    /// `python`, `javascript` or `bash`.
    pub language: String,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunCode {
    pub code: String,
    /// Capped at the sandbox's timeout limit.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

async fn sandbox(live: &LiveSandbox) -> Result<RwLockReadGuard<'_, Box<dyn Sandbox>>, ApiError> {
    RwLockReadGuard::try_map(live.sandbox.read().await, |o| o.as_ref())
        .map_err(|_| ApiError::from_sandbox(hutch_core::SandboxError::NotRunning, "code context"))
}

fn fail(what: &'static str) -> impl Fn(hutch_core::SandboxError) -> ApiError {
    move |e| ApiError::from_sandbox(e, what)
}

/// The run's limits: the sandbox's timeout caps the request's; output per stream as for exec.
fn limits(sb: &dyn Sandbox, timeout_ms: Option<u64>) -> (Option<u64>, u64) {
    let l = &sb.spec().limits;
    (Some(timeout_ms.unwrap_or(l.timeout_ms).min(l.timeout_ms)), l.output_bytes)
}

pub fn output_json(o: &RunOutput) -> Value {
    let mut v = serde_json::to_value(o).unwrap_or_default();
    let (stdout, b64) = super::types::text_and_b64(&o.stdout);
    v["stdout"] = stdout.into();
    if let Some(b) = b64 {
        v["stdout_b64"] = b.into();
    }
    let (stderr, b64) = super::types::text_and_b64(&o.stderr);
    v["stderr"] = stderr.into();
    if let Some(b) = b64 {
        v["stderr_b64"] = b.into();
    }
    v["duration_ms"] = json!(o.summary.duration_us as f64 / 1000.0);
    v
}

pub async fn create(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiPath(id): ApiPath<String>,
    ApiJson(b): ApiJson<CreateContext>,
) -> Result<impl IntoResponse, ApiError> {
    let live = d.live_for(&id, &caller)?;
    let sb = sandbox(&live).await?;
    let info: ContextInfo = sb
        .contexts()
        .map_err(fail("code contexts"))?
        .create_context(&b.language, b.cwd.as_deref(), b.env)
        .await
        .map_err(fail("starting the context"))?;
    d.audit(
        &caller,
        "create_context",
        Some(&id),
        json!({"context": info.context_id, "language": info.language}),
    );
    Ok((StatusCode::CREATED, Json(info)))
}

pub async fn list(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Value>, ApiError> {
    let live = d.live_for(&id, &caller)?;
    let sb = sandbox(&live).await?;
    let contexts = sb
        .contexts()
        .map_err(fail("code contexts"))?
        .list_contexts()
        .await
        .map_err(fail("listing contexts"))?;
    Ok(Json(json!({"contexts": contexts})))
}

pub async fn delete(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiPath((id, cid)): ApiPath<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let live = d.live_for(&id, &caller)?;
    let sb = sandbox(&live).await?;
    sb.contexts()
        .map_err(fail("code contexts"))?
        .delete_context(&cid)
        .await
        .map_err(fail("deleting the context"))?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn restart(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiPath((id, cid)): ApiPath<(String, String)>,
) -> Result<Json<ContextInfo>, ApiError> {
    let live = d.live_for(&id, &caller)?;
    let sb = sandbox(&live).await?;
    Ok(Json(
        sb.contexts()
            .map_err(fail("code contexts"))?
            .restart_context(&cid)
            .await
            .map_err(fail("restarting the context"))?,
    ))
}

pub async fn interrupt(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiPath((id, cid)): ApiPath<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let live = d.live_for(&id, &caller)?;
    let sb = sandbox(&live).await?;
    sb.contexts()
        .map_err(fail("code contexts"))?
        .interrupt_context(&cid)
        .await
        .map_err(fail("interrupting the context"))?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn run(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiPath((id, cid)): ApiPath<(String, String)>,
    ApiJson(b): ApiJson<RunCode>,
) -> Result<Json<Value>, ApiError> {
    let t = Instant::now();
    let live = d.live_for(&id, &caller)?;
    d.command_started(&live);
    let out = async {
        let sb = sandbox(&live).await?;
        let (timeout, limit) = limits(&**sb, b.timeout_ms);
        sb.contexts()
            .map_err(fail("code contexts"))?
            .run_code(&cid, &b.code, timeout, limit, &mut |_| {})
            .await
            .map_err(fail("running the code"))
    }
    .await;
    d.command_finished(&live);
    crate::metrics::global().exec_seconds.observe(t.elapsed());
    d.audit(
        &caller,
        "run_code",
        Some(&id),
        json!({"context": cid, "bytes": b.code.len(), "ok": out.is_ok()}),
    );
    Ok(Json(output_json(&out?)))
}

/// Events: `stdout`/`stderr` {data, b64?}, `result` {main, data}, `error` {name, value,
/// traceback}, `done` {execution_count, timed_out, restarted, ...}.
pub async fn run_stream(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiPath((id, cid)): ApiPath<(String, String)>,
    ApiJson(b): ApiJson<RunCode>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let live = d.live_for(&id, &caller)?;
    {
        // fail before the stream starts when the context does not exist
        let sb = sandbox(&live).await?;
        let known = sb
            .contexts()
            .map_err(fail("code contexts"))?
            .list_contexts()
            .await
            .map_err(fail("listing contexts"))?;
        if !known.iter().any(|c| c.context_id == cid) {
            return Err(ApiError::not_found(format!("no context {cid} in sandbox {id}")));
        }
    }
    d.audit(
        &caller,
        "run_code",
        Some(&id),
        json!({"context": cid, "bytes": b.code.len(), "stream": "sse"}),
    );
    let (tx, rx) = mpsc::channel::<Result<Event, Infallible>>(256);
    d.command_started(&live);
    tokio::spawn(async move {
        let ev = |kind: &str, v: Value| Ok(Event::default().event(kind).data(v.to_string()));
        let result = async {
            let sb = sandbox(&live).await?;
            let (timeout, limit) = limits(&**sb, b.timeout_ms);
            let tx2 = tx.clone();
            let mut sink = move |e: &RunEvent| {
                let msg = match e {
                    RunEvent::Stdout(b) => ev("stdout", chunk_json(b)),
                    RunEvent::Stderr(b) => ev("stderr", chunk_json(b)),
                    RunEvent::Result(r) => {
                        ev("result", serde_json::to_value(r).unwrap_or_default())
                    }
                    RunEvent::Error(e) => ev("error", serde_json::to_value(e).unwrap_or_default()),
                };
                let _ = tx2.try_send(msg);
            };
            sb.contexts()
                .map_err(fail("code contexts"))?
                .run_code(&cid, &b.code, timeout, limit, &mut sink)
                .await
                .map_err(fail("running the code"))
        }
        .await;
        match result {
            Ok(out) => {
                let mut v = serde_json::to_value(&out.summary).unwrap_or_default();
                v["duration_ms"] = json!(out.summary.duration_us as f64 / 1000.0);
                let _ = tx.send(ev("done", v)).await;
            }
            Err(e) => {
                let _ = tx
                    .send(ev("error", json!({"name": e.code, "value": e.message, "traceback": []})))
                    .await;
            }
        }
        d.command_finished(&live);
    });
    Ok(Sse::new(ReceiverStream::new(rx)).keep_alive(KeepAlive::default()))
}
