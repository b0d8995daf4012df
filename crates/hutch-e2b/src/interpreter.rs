//! The code-interpreter protocol (port 49999) on hutch's code contexts: `/execute` streams a
//! snippet's output, results and error as newline-delimited JSON; `/contexts` manages contexts.
use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Extension, Json, Router};
use hutch_core::{ContextInfo, RunEvent};
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;

use crate::error::E2bError;
use crate::plane::{constant_time_eq, token_ok, Target};
use crate::E2b;

type S = State<Arc<E2b>>;

pub fn router(state: Arc<E2b>) -> Router {
    Router::new()
        .route("/execute", post(execute))
        .route("/contexts", post(create).get(list))
        .route("/contexts/{cid}", delete(remove))
        .route("/contexts/{cid}/restart", post(restart))
        .fallback(|uri: axum::http::Uri| async move {
            plain(StatusCode::NOT_IMPLEMENTED, format!("{} is not supported by hutch", uri.path()))
        })
        .route_layer(axum::middleware::from_fn(require_token))
        .route("/health", get(|| async { "OK" }))
        .with_state(state)
}

/// The SDK sends the access token on `/execute` and, because create answers with it as the
/// traffic access token too, `E2B-Traffic-Access-Token` on every call: one of the two must match.
async fn require_token(
    Extension(t): Extension<Target>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let traffic = req.headers().get("e2b-traffic-access-token").map(|v| v.as_bytes());
    let traffic_ok = traffic.is_some_and(|v| constant_time_eq(v, t.sandbox.token().as_bytes()));
    if !token_ok(&t, req.headers()) && !traffic_ok {
        return plain(StatusCode::UNAUTHORIZED, "a valid access token is required");
    }
    next.run(req).await
}

/// The code interpreter answers errors as text; the SDK puts the text in its exception.
fn plain(status: StatusCode, msg: impl Into<String>) -> Response {
    (status, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], msg.into()).into_response()
}

fn err_text(e: E2bError) -> Response {
    let status = match e.status() {
        StatusCode::BAD_GATEWAY => return e.into_response(),
        s => s,
    };
    plain(status, e.to_string())
}

/// hutch's runner for an interpreter-protocol language name.
fn runner_language(lang: &str) -> Result<&'static str, E2bError> {
    match lang.to_ascii_lowercase().as_str() {
        "" | "python" | "python3" => Ok("python"),
        "js" | "javascript" | "node" | "nodejs" => Ok("javascript"),
        "bash" | "sh" => Ok("bash"),
        other => Err(E2bError::unimplemented(&format!(
            "language '{other}' (hutch runs python, javascript and bash)"
        ))),
    }
}

fn context_json(c: &ContextInfo) -> Value {
    json!({"id": c.context_id, "language": c.language, "cwd": c.cwd})
}

pub fn set_default_context(s: &E2b, sandbox: &str, lang: &str, cid: &str) {
    let mut m = s.default_contexts.lock().unwrap_or_else(|p| p.into_inner());
    m.insert((sandbox.to_string(), lang.to_string()), cid.to_string());
}

pub fn forget_sandbox(s: &E2b, sandbox: &str) {
    let mut m = s.default_contexts.lock().unwrap_or_else(|p| p.into_inner());
    m.retain(|(sb, _), _| sb != sandbox);
}

fn default_context(s: &E2b, sandbox: &str, lang: &str) -> Option<String> {
    let m = s.default_contexts.lock().unwrap_or_else(|p| p.into_inner());
    m.get(&(sandbox.to_string(), lang.to_string())).cloned()
}

fn ctx_err(e: hutch_core::SandboxError) -> E2bError {
    hutch_server::ApiError::from_sandbox(e, "code context").into()
}

async fn create_context(
    t: &Target,
    lang: &str,
    cwd: Option<&str>,
) -> Result<ContextInfo, E2bError> {
    let sb = t.open().await?;
    sb.contexts()
        .map_err(ctx_err)?
        .create_context(lang, cwd, BTreeMap::new())
        .await
        .map_err(ctx_err)
}

async fn contexts(t: &Target) -> Result<Vec<ContextInfo>, E2bError> {
    let sb = t.open().await?;
    sb.contexts().map_err(ctx_err)?.list_contexts().await.map_err(ctx_err)
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ExecuteRequest {
    code: String,
    context_id: Option<String>,
    language: Option<String>,
    env_vars: Option<BTreeMap<String, String>>,
}

/// The context a run goes to, and its language: the one named, else the sandbox's default for
/// the language (started on first use).
async fn resolve_context(
    s: &E2b,
    t: &Target,
    req: &ExecuteRequest,
) -> Result<(String, String), E2bError> {
    if let Some(cid) = &req.context_id {
        if req.language.is_some() {
            return Err(E2bError::BadRequest(
                "give either context_id or language, not both".into(),
            ));
        }
        let lang = contexts(t).await?.into_iter().find(|c| &c.context_id == cid);
        let lang = lang.map(|c| c.language).unwrap_or_default();
        return Ok((cid.clone(), lang));
    }
    let lang = runner_language(req.language.as_deref().unwrap_or("python"))?;
    if let Some(cid) = default_context(s, t.id(), lang) {
        if contexts(t).await?.iter().any(|c| c.context_id == cid) {
            return Ok((cid, lang.into()));
        }
    }
    let c = create_context(t, lang, None).await?;
    set_default_context(s, t.id(), lang, &c.context_id);
    Ok((c.context_id, lang.into()))
}

/// Snippets that set environment variables for one execution and then put back what was there
/// (the upstream interpreter does the same around the user's code). Each is one more run of the
/// context, so the execution count goes up by three.
fn env_snippets(lang: &str, env: &BTreeMap<String, String>) -> Result<(String, String), E2bError> {
    for k in env.keys() {
        let ok = k.bytes().next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
            && k.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !ok {
            return Err(E2bError::BadRequest(format!("environment variable name {k:?}")));
        }
    }
    let json = serde_json::to_string(env).unwrap_or_else(|_| "{}".into());
    // a JSON string literal is a valid Python and JavaScript string literal
    let lit = serde_json::to_string(&json).unwrap_or_else(|_| "\"{}\"".into());
    match lang {
        "python" => Ok((
            format!(
                "import os as _hutch_os, json as _hutch_json\n\
                 _hutch_env = _hutch_json.loads({lit})\n\
                 _hutch_env_saved = {{k: _hutch_os.environ.get(k) for k in _hutch_env}}\n\
                 _hutch_os.environ.update(_hutch_env)\n\
                 del _hutch_env"
            ),
            "for _hutch_k, _hutch_v in _hutch_env_saved.items():\n    \
             if _hutch_v is None: _hutch_os.environ.pop(_hutch_k, None)\n    \
             else: _hutch_os.environ[_hutch_k] = _hutch_v\n\
             del _hutch_env_saved, _hutch_k, _hutch_v, _hutch_os, _hutch_json"
                .into(),
        )),
        "javascript" => Ok((
            format!(
                "globalThis.__hutchEnvSaved = {{}};\n\
                 for (const [k, v] of Object.entries(JSON.parse({lit}))) \
                 {{ __hutchEnvSaved[k] = process.env[k]; process.env[k] = v; }}"
            ),
            "for (const [k, v] of Object.entries(globalThis.__hutchEnvSaved)) \
             { if (v === undefined) delete process.env[k]; else process.env[k] = v; }\n\
             delete globalThis.__hutchEnvSaved;"
                .into(),
        )),
        "bash" => {
            let quote = |v: &str| format!("'{}'", v.replace('\'', "'\\''"));
            let (mut set, mut restore) = (String::new(), String::new());
            for (k, v) in env {
                set.push_str(&format!(
                    "if [ -n \"${{{k}+x}}\" ]; then __hutch_had_{k}=1; __hutch_old_{k}=\"${k}\"; \
                     else __hutch_had_{k}=; fi; export {k}={}\n",
                    quote(v)
                ));
                restore.push_str(&format!(
                    "if [ -n \"$__hutch_had_{k}\" ]; then export {k}=\"$__hutch_old_{k}\"; \
                     else unset {k}; fi; unset __hutch_had_{k} __hutch_old_{k}\n"
                ));
            }
            Ok((set, restore))
        }
        other => Err(E2bError::unimplemented(&format!("env_vars in a {other} context"))),
    }
}

/// A MIME bundle as the interpreter's `result` message.
fn result_json(r: &hutch_core::RichResult) -> Value {
    let mut v = json!({"type": "result", "is_main_result": r.main});
    let mut extra = serde_json::Map::new();
    for (mime, data) in &r.data {
        let key = match mime.as_str() {
            "text/plain" => "text",
            "text/html" => "html",
            "text/markdown" => "markdown",
            "image/svg+xml" => "svg",
            "image/png" => "png",
            "image/jpeg" => "jpeg",
            "application/pdf" => "pdf",
            "text/latex" => "latex",
            "application/json" => "json",
            "application/javascript" => "javascript",
            other => {
                extra.insert(other.to_string(), data.clone());
                continue;
            }
        };
        v[key] = data.clone();
    }
    if !extra.is_empty() {
        v["extra"] = Value::Object(extra);
    }
    v
}

fn now_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default()
}

fn line(v: &Value) -> Bytes {
    let mut b = serde_json::to_vec(v).unwrap_or_default();
    b.push(b'\n');
    Bytes::from(b)
}

/// Output is sent a line at a time, as Jupyter sends what one `print` wrote in one message:
/// chunks are held until a newline, another kind of event, the end, or [`LINE_MAX`] bytes.
const LINE_MAX: usize = 64 * 1024;

#[derive(Default)]
struct Lines {
    /// Pending stdout (0) and stderr (1).
    pending: [Vec<u8>; 2],
}

impl Lines {
    fn log(stream: usize, data: &[u8]) -> Value {
        let ty = if stream == 0 { "stdout" } else { "stderr" };
        json!({"type": ty, "text": String::from_utf8_lossy(data), "timestamp": now_ns() as u64})
    }

    /// The messages to send for `ev`.
    fn push(&mut self, ev: &RunEvent) -> Vec<Value> {
        let (stream, d) = match ev {
            RunEvent::Stdout(d) => (0, d),
            RunEvent::Stderr(d) => (1, d),
            other => {
                let mut out = self.flush();
                out.push(event_json(other));
                return out;
            }
        };
        let mut out = Vec::new();
        // keep the two streams in order: the other one's partial line goes first
        let other = &mut self.pending[1 - stream];
        if !other.is_empty() {
            out.push(Self::log(1 - stream, &std::mem::take(other)));
        }
        let buf = &mut self.pending[stream];
        buf.extend_from_slice(d);
        let cut = if buf.len() >= LINE_MAX {
            buf.len()
        } else {
            buf.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1)
        };
        if cut > 0 {
            let rest = buf.split_off(cut);
            out.push(Self::log(stream, &std::mem::replace(buf, rest)));
        }
        out
    }

    fn flush(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        for s in 0..2 {
            if !self.pending[s].is_empty() {
                out.push(Self::log(s, &std::mem::take(&mut self.pending[s])));
            }
        }
        out
    }
}

fn event_json(ev: &RunEvent) -> Value {
    match ev {
        RunEvent::Stdout(d) => Lines::log(0, d),
        RunEvent::Stderr(d) => Lines::log(1, d),
        RunEvent::Result(r) => result_json(r),
        RunEvent::Error(e) => json!({
            "type": "error",
            "name": e.name,
            "value": e.value,
            "traceback": e.traceback.join(""),
        }),
    }
}

async fn execute(State(s): S, Extension(t): Extension<Target>, body: Bytes) -> Response {
    let req: ExecuteRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return plain(StatusCode::BAD_REQUEST, format!("invalid request: {e}")),
    };
    let (cid, lang) = match resolve_context(&s, &t, &req).await {
        Ok(c) => c,
        Err(e) => return err_text(e),
    };
    let env = match req.env_vars.as_ref().filter(|e| !e.is_empty()) {
        Some(e) => match env_snippets(&lang, e) {
            Ok(pair) => Some(pair),
            Err(e) => return err_text(e),
        },
        None => None,
    };
    let (tx, rx) = mpsc::unbounded_channel::<Bytes>();
    let (d, live, code) = (s.daemon.clone(), t.live.clone(), req.code);
    tokio::spawn(async move {
        let guard = live.sandbox.read().await;
        let Some(sb) = guard.as_ref() else { return };
        let Ok(ctx) = sb.contexts() else { return };
        // a client that goes away interrupts the snippet
        let watcher = {
            let tx = tx.clone();
            let (live, cid) = (live.clone(), cid.clone());
            tokio::spawn(async move {
                tx.closed().await;
                if let Some(sb) = live.sandbox.read().await.as_ref() {
                    if let Ok(c) = sb.contexts() {
                        let _ = c.interrupt_context(&cid).await;
                    }
                }
            })
        };
        d.command_started(&live);
        let sink_tx = tx.clone();
        let lines = Arc::new(std::sync::Mutex::new(Lines::default()));
        let sink_lines = lines.clone();
        let mut sink = move |ev: &RunEvent| {
            let mut l = sink_lines.lock().unwrap_or_else(|p| p.into_inner());
            for v in l.push(ev) {
                let _ = sink_tx.send(line(&v));
            }
        };
        let mut quiet = |_: &RunEvent| {};
        let setup = match &env {
            Some((set, _)) => {
                ctx.run_code(&cid, set, None, 1 << 16, &mut quiet).await.map(|o| o.error)
            }
            None => Ok(None),
        };
        let out = match setup {
            Ok(None) => ctx.run_code(&cid, &code, None, u64::MAX, &mut sink).await,
            Ok(Some(e)) => Err(hutch_core::SandboxError::InvalidSpec(format!(
                "setting env_vars failed: {}: {}",
                e.name, e.value
            ))),
            Err(e) => Err(e),
        };
        if let Some((_, restore)) = &env {
            let _ = ctx.run_code(&cid, restore, None, 1 << 16, &mut quiet).await;
        }
        for v in lines.lock().unwrap_or_else(|p| p.into_inner()).flush() {
            let _ = tx.send(line(&v));
        }
        d.command_finished(&live);
        watcher.abort();
        match out {
            Ok(o) => {
                let count = o.summary.execution_count;
                let _ = tx
                    .send(line(&json!({"type": "number_of_executions", "execution_count": count})));
                let _ = tx.send(line(&json!({"type": "end_of_execution"})));
            }
            Err(e) => {
                let e: E2bError = ctx_err(e);
                let _ = tx.send(line(&json!({
                    "type": "error", "name": "ExecutionError", "value": e.to_string(), "traceback": "",
                })));
                let _ = tx.send(line(&json!({"type": "unexpected_end_of_execution"})));
            }
        }
    });
    let stream = tokio_stream::StreamExt::map(UnboundedReceiverStream::new(rx), |b| {
        Ok::<_, std::convert::Infallible>(b)
    });
    (StatusCode::OK, [(header::CONTENT_TYPE, "application/x-ndjson")], Body::from_stream(stream))
        .into_response()
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct CreateRequest {
    language: Option<String>,
    cwd: Option<String>,
}

async fn create(Extension(t): Extension<Target>, body: Bytes) -> Response {
    let r = async {
        let req: CreateRequest = crate::connect::parse(&body)?;
        let lang = runner_language(req.language.as_deref().unwrap_or("python"))?;
        let c = create_context(&t, lang, req.cwd.as_deref()).await?;
        Ok::<_, E2bError>(Json(context_json(&c)))
    }
    .await;
    r.map(IntoResponse::into_response).unwrap_or_else(err_text)
}

async fn list(Extension(t): Extension<Target>) -> Response {
    match contexts(&t).await {
        Ok(cs) => Json(cs.iter().map(context_json).collect::<Vec<_>>()).into_response(),
        Err(e) => err_text(e),
    }
}

async fn remove(Extension(t): Extension<Target>, Path(cid): Path<String>) -> Response {
    let r = async {
        let sb = t.open().await?;
        sb.contexts().map_err(ctx_err)?.delete_context(&cid).await.map_err(ctx_err)
    };
    no_content(r.await)
}

async fn restart(Extension(t): Extension<Target>, Path(cid): Path<String>) -> Response {
    let r = async {
        let sb = t.open().await?;
        sb.contexts().map_err(ctx_err)?.restart_context(&cid).await.map_err(ctx_err)
    };
    no_content(r.await.map(|_| ()))
}

fn no_content(r: Result<(), E2bError>) -> Response {
    match r {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => err_text(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mime_bundles_become_interpreter_results() {
        let r = hutch_core::RichResult {
            main: true,
            data: BTreeMap::from([
                ("text/plain".to_string(), json!("2")),
                ("image/png".to_string(), json!("iVBOR")),
                ("application/vnd.custom".to_string(), json!("x")),
            ]),
        };
        let v = result_json(&r);
        assert_eq!(v["type"], "result");
        assert_eq!(v["text"], "2");
        assert_eq!(v["png"], "iVBOR");
        assert_eq!(v["is_main_result"], true);
        assert_eq!(v["extra"]["application/vnd.custom"], "x");
    }

    #[test]
    fn output_is_sent_a_line_at_a_time() {
        let mut l = Lines::default();
        let texts = |v: Vec<Value>| -> Vec<String> {
            v.iter()
                .map(|m| {
                    format!(
                        "{}:{}",
                        m["type"].as_str().unwrap_or(""),
                        m["text"].as_str().unwrap_or("")
                    )
                })
                .collect()
        };
        assert!(l.push(&RunEvent::Stdout(b"10".to_vec())).is_empty());
        assert_eq!(texts(l.push(&RunEvent::Stdout(b"\na\nb".to_vec()))), ["stdout:10\na\n"]);
        assert_eq!(texts(l.push(&RunEvent::Stderr(b"e\n".to_vec()))), ["stdout:b", "stderr:e\n"]);
        assert!(l.push(&RunEvent::Stdout(b"tail".to_vec())).is_empty());
        assert_eq!(texts(l.flush()), ["stdout:tail"]);
    }

    #[test]
    fn env_snippets_quote_values_and_refuse_bad_names() {
        let env = BTreeMap::from([("A".to_string(), "it's \"x\"\n".to_string())]);
        let (set, restore) = env_snippets("bash", &env).expect("bash");
        assert!(set.contains("export A='it'\\''s \"x\"\n'"), "{set}");
        assert!(restore.contains("unset A"), "{restore}");
        let (set, _) = env_snippets("python", &env).expect("python");
        assert!(set.contains(r#"loads("{\"A\":\"it's \\\"x\\\"\\n\"}")"#), "{set}");
        let bad = BTreeMap::from([("A;rm".to_string(), String::new())]);
        assert!(env_snippets("python", &bad).is_err());
    }

    #[test]
    fn languages_map_to_runners_or_name_what_is_missing() {
        assert_eq!(runner_language("js").ok(), Some("javascript"));
        assert_eq!(runner_language("Python").ok(), Some("python"));
        let e = runner_language("r").expect_err("r");
        assert!(e.to_string().contains("'r'"));
    }
}
