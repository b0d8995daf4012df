//! The REST control plane (`E2B_API_URL`): sandboxes are created, found, listed, given a new
//! timeout and killed here. Every answer that is not a success is `{code, message}`.
use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::{Extension, Json, Router};
use hutch_server::api::types::CreateSandbox;
use hutch_server::daemon::Caller;
use hutch_store::{now_ms, ListFilter};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::E2bError;
use crate::model::{self, E2bSandbox, META_TEMPLATE, META_TOKEN};
use crate::E2b;

type S = State<Arc<E2b>>;

pub fn router(state: Arc<E2b>) -> Router {
    Router::new()
        .route("/sandboxes", post(create_v1).get(list_v1))
        .route("/v2/sandboxes", post(create_v2).get(list_v2))
        .route("/sandboxes/{id}", get(detail).delete(kill))
        .route("/sandboxes/{id}/connect", post(connect))
        .route("/v2/sandboxes/{id}/connect", post(connect))
        .route("/sandboxes/{id}/resume", post(resume))
        .route("/sandboxes/{id}/timeout", post(set_timeout))
        .route("/sandboxes/{id}/refreshes", post(refresh))
        .route("/sandboxes/{id}/metrics", get(metrics))
        .route("/sandboxes/{id}/pause", post(unsupported("pausing a sandbox")))
        .route("/sandboxes/{id}/snapshots", post(unsupported("sandbox snapshots")))
        .route("/snapshots", get(unsupported("sandbox snapshots")))
        .route("/sandboxes/{id}/fork", post(unsupported("forking a sandbox")))
        .route(
            "/sandboxes/{id}/network",
            put(unsupported("network rules (hutch sandboxes have no network)")),
        )
        .route("/templates/{id}", delete(unsupported("templates and snapshots")))
        .fallback(not_found)
        .route_layer(middleware::from_fn_with_state(state.clone(), authenticate))
        .route("/health", get(|| async { StatusCode::NO_CONTENT }))
        .with_state(state)
}

fn unsupported(
    feature: &'static str,
) -> impl Fn() -> std::future::Ready<E2bError> + Clone + Send + Sync + 'static {
    move || std::future::ready(E2bError::unimplemented(feature))
}

async fn not_found(method: Method, uri: Uri) -> E2bError {
    E2bError::unimplemented(&format!("the E2B endpoint {method} {}", uri.path()))
}

/// `X-API-KEY` (or `Authorization: Bearer`) must be a hutch API key; its rate limit applies.
async fn authenticate(State(s): S, mut req: Request, next: Next) -> Response {
    let h = req.headers();
    let key = h.get("x-api-key").or_else(|| h.get("authorization")).and_then(|v| v.to_str().ok());
    let key = key.map(|k| k.trim_start_matches("Bearer ").trim().to_string());
    let Some(key) = key.filter(|k| !k.is_empty()) else {
        return E2bError::Unauthorized(
            "an API key is required: set E2B_API_KEY to a hutch key (`hutch key create --e2b NAME`)"
                .into(),
        )
        .into_response();
    };
    match s.daemon.authenticate(&key) {
        Ok(Some((caller, rate))) => {
            if let (Some(id), Some(rate)) = (&caller.key_id, rate) {
                if let Err(e) = s.daemon.check_rate(id, rate) {
                    return E2bError::from(e).into_response();
                }
            }
            req.extensions_mut().insert(caller);
            next.run(req).await
        }
        Ok(None) => E2bError::Unauthorized("invalid or revoked API key".into()).into_response(),
        Err(e) => E2bError::from(e).into_response(),
    }
}

/// A JSON body, with rejections in E2B's shape; an empty body is `{}`.
fn body<T: for<'de> Deserialize<'de> + Default>(b: &Bytes) -> Result<T, E2bError> {
    if b.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    serde_json::from_slice(b)
        .map_err(|e| E2bError::BadRequest(format!("invalid request body: {e}")))
}

/// `NewSandbox` (v1) and `NewSandboxV2`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct NewSandbox {
    #[serde(rename = "templateID", default)]
    template_id: Option<String>,
    timeout: Option<u64>,
    auto_pause: Option<bool>,
    #[serde(default)]
    metadata: BTreeMap<String, String>,
    #[serde(default)]
    env_vars: BTreeMap<String, String>,
    #[serde(rename = "allow_internet_access")]
    allow_internet_access: Option<bool>,
    network: Option<Value>,
    mcp: Option<Value>,
    #[serde(default)]
    volume_mounts: Vec<Value>,
}

fn nonempty(v: &Option<Value>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::Object(m)) => !m.is_empty(),
        Some(_) => true,
    }
}

async fn create_v1(s: S, c: Extension<Caller>, b: Bytes) -> Result<Response, E2bError> {
    create(s, c, b, 15).await
}

async fn create_v2(s: S, c: Extension<Caller>, b: Bytes) -> Result<Response, E2bError> {
    create(s, c, b, 300).await
}

async fn create(
    State(s): S,
    Extension(caller): Extension<Caller>,
    b: Bytes,
    default_timeout: u64,
) -> Result<Response, E2bError> {
    let req: NewSandbox = body(&b)?;
    let name = req.template_id.as_deref().unwrap_or("base");
    let template = model::template(name).ok_or_else(|| {
        E2bError::NotFound(format!(
            "template '{name}' not found: hutch serves {} (building templates is not supported)",
            model::template_names()
        ))
    })?;
    if req.auto_pause == Some(true) {
        return Err(E2bError::unimplemented("auto-pause (pausing a sandbox)"));
    }
    if req.allow_internet_access == Some(true) || nonempty(&req.network) {
        return Err(E2bError::unimplemented(
            "internet access and network rules (hutch sandboxes have no network)",
        ));
    }
    if nonempty(&req.mcp) {
        return Err(E2bError::unimplemented("the MCP gateway"));
    }
    if !req.volume_mounts.is_empty() {
        return Err(E2bError::unimplemented("volumes"));
    }
    for k in req.metadata.keys() {
        if k.starts_with("e2b.") {
            return Err(E2bError::BadRequest(format!(
                "metadata key {k:?}: the prefix e2b. is reserved"
            )));
        }
    }
    let mut metadata = req.metadata;
    metadata.insert(META_TEMPLATE.into(), template.name.into());
    metadata.insert(META_TOKEN.into(), random_hex(24)?);
    let mut env = req.env_vars;
    for (k, v) in [("USER", model::USER), ("LOGNAME", model::USER)] {
        env.entry(k.to_string()).or_insert_with(|| v.to_string());
    }
    let create = CreateSandbox {
        limits: Some(model::limits()),
        env,
        contexts: if template.code_interpreter { vec!["python".into()] } else { Vec::new() },
        metadata,
        ttl_seconds: Some(req.timeout.unwrap_or(default_timeout)),
        guest_user: Some(model::guest_user()),
        ..Default::default()
    };
    let view = s.daemon.create(create, &caller).await?;
    s.hold(&*s.daemon.live_for(&view.id, &caller)?);
    if let Some(ctx) = view.contexts.iter().flatten().find(|c| c.language == "python") {
        crate::interpreter::set_default_context(&s, &view.id, "python", &ctx.context_id);
    }
    let sb = find(&s, &model::e2b_id(&view.id), &caller)?;
    Ok((StatusCode::CREATED, Json(sb.sandbox_json())).into_response())
}

/// Random hex from the kernel.
pub fn random_hex(bytes: usize) -> Result<String, E2bError> {
    use std::io::Read;
    let mut b = vec![0u8; bytes];
    std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b)).map_err(|e| {
        tracing::error!(error = %e, "cannot read /dev/urandom");
        E2bError::from(hutch_server::ApiError::internal())
    })?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// A live E2B sandbox the caller may see.
fn find(s: &E2b, id: &str, caller: &Caller) -> Result<E2bSandbox, E2bError> {
    let missing = || {
        E2bError::NotFound(format!("sandbox \"{id}\" doesn't exist or you don't have access to it"))
    };
    let hid = model::hutch_id(id).ok_or_else(missing)?;
    let row = s.daemon.row_for(&hid, caller).map_err(|_| missing())?;
    E2bSandbox::from_row(row).ok_or_else(missing)
}

async fn detail(
    State(s): S,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Json<Value>, E2bError> {
    let sb = find(&s, &id, &caller)?;
    Ok(Json(sb.listed_json(true, max_ttl_ms(&s))))
}

fn max_ttl_ms(s: &E2b) -> i64 {
    s.daemon.cfg.max_ttl.as_millis() as i64
}

async fn kill(
    State(s): S,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<StatusCode, E2bError> {
    let sb = find(&s, &id, &caller)?;
    s.daemon.delete(&sb.row.id, &caller).await?;
    s.forget(&sb.row.id);
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Default, Deserialize)]
struct Timeout {
    timeout: Option<u64>,
}

/// Connect (and the older resume): the sandbox runs already, so this only makes its timeout
/// longer when the new one ends later.
async fn connect(
    State(s): S,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    b: Bytes,
) -> Result<Response, E2bError> {
    let t: Timeout = body(&b)?;
    let sb = find(&s, &id, &caller)?;
    let timeout = t.timeout.unwrap_or(300);
    let until = now_ms() + timeout as i64 * 1000;
    if sb.row.expires_at.is_some_and(|at| at < until) {
        s.daemon.set_ttl(&sb.row.id, timeout, &caller)?;
    }
    s.hold(&*s.daemon.live_for(&sb.row.id, &caller)?);
    let sb = find(&s, &id, &caller)?;
    Ok((StatusCode::OK, Json(sb.sandbox_json())).into_response())
}

async fn resume(
    State(s): S,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, E2bError> {
    find(&s, &id, &caller)?;
    Err(E2bError::from(hutch_server::ApiError::conflict(format!(
        "sandbox {id} is already running (hutch does not pause sandboxes)"
    ))))
}

async fn set_timeout(
    State(s): S,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    b: Bytes,
) -> Result<StatusCode, E2bError> {
    let t: Timeout = body(&b)?;
    let timeout =
        t.timeout.ok_or_else(|| E2bError::BadRequest("timeout (seconds) is required".into()))?;
    let sb = find(&s, &id, &caller)?;
    s.daemon.set_ttl(&sb.row.id, timeout, &caller)?;
    Ok(StatusCode::NO_CONTENT)
}

/// Older SDKs keep a sandbox alive with refreshes: `{"duration": seconds}`.
async fn refresh(
    State(s): S,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    b: Bytes,
) -> Result<StatusCode, E2bError> {
    #[derive(Default, Deserialize)]
    struct Refresh {
        duration: Option<u64>,
    }
    let r: Refresh = body(&b)?;
    let sb = find(&s, &id, &caller)?;
    s.daemon.set_ttl(&sb.row.id, r.duration.unwrap_or(60), &caller)?;
    Ok(StatusCode::NO_CONTENT)
}

/// Metrics samples: hutch keeps no history of a sandbox's usage, so the list is empty (the SDK
/// accepts that); see docs/e2b.md.
async fn metrics(
    State(s): S,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Json<Value>, E2bError> {
    find(&s, &id, &caller)?;
    Ok(Json(json!([])))
}

/// One `GET /v2/sandboxes` query: filters and the page.
#[derive(Debug, Default)]
pub struct ListQuery {
    metadata: BTreeMap<String, String>,
    running: bool,
    template: Option<String>,
    started_after: Option<i64>,
    ascending: bool,
    limit: usize,
    offset: usize,
}

/// `metadata` arrives form-encoded inside the query value, each key and value percent-encoded
/// once more.
pub fn parse_list_query(q: Option<&str>) -> Result<ListQuery, E2bError> {
    let mut out = ListQuery { running: true, limit: 100, ..Default::default() };
    let bad = |what: &str| E2bError::BadRequest(format!("invalid query parameter {what}"));
    for (k, v) in form_urlencoded::parse(q.unwrap_or_default().as_bytes()) {
        match &*k {
            "metadata" | "query" => {
                for (mk, mv) in form_urlencoded::parse(v.as_bytes()) {
                    let dec = |s: &str| {
                        percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned()
                    };
                    out.metadata.insert(dec(&mk), dec(&mv));
                }
            }
            "state" => {
                let states: Vec<&str> = v.split(',').map(str::trim).collect();
                if let Some(other) = states.iter().find(|s| !matches!(**s, "running" | "paused")) {
                    return Err(bad(&format!("state={other} (running or paused)")));
                }
                out.running = states.contains(&"running");
            }
            "template" => out.template = Some(v.into_owned()),
            "startedAfter" => {
                out.started_after = Some(model::parse_rfc3339_ms(&v).ok_or_else(|| bad(&k))?)
            }
            "order" => {
                out.ascending = match &*v {
                    "asc" => true,
                    "desc" => false,
                    _ => return Err(bad("order (asc or desc)")),
                }
            }
            "limit" => out.limit = v.parse::<usize>().map_err(|_| bad("limit"))?.clamp(1, 100),
            "nextToken" => out.offset = v.parse().map_err(|_| bad("nextToken"))?,
            _ => {}
        }
    }
    Ok(out)
}

async fn list_v2(
    State(s): S,
    Extension(caller): Extension<Caller>,
    uri: Uri,
) -> Result<Response, E2bError> {
    let q = parse_list_query(uri.query())?;
    let mut all = list(&s, &caller, &q)?;
    if !q.ascending {
        all.reverse();
    }
    let page: Vec<Value> = all
        .iter()
        .skip(q.offset)
        .take(q.limit)
        .map(|sb| sb.listed_json(false, max_ttl_ms(&s)))
        .collect();
    let mut headers = HeaderMap::new();
    if q.offset + page.len() < all.len() {
        if let Ok(v) = HeaderValue::from_str(&(q.offset + page.len()).to_string()) {
            headers.insert("x-next-token", v);
        }
    }
    Ok((headers, Json(Value::Array(page))).into_response())
}

async fn list_v1(
    State(s): S,
    Extension(caller): Extension<Caller>,
    uri: Uri,
) -> Result<Json<Value>, E2bError> {
    let q = parse_list_query(uri.query())?;
    let all = list(&s, &caller, &q)?;
    Ok(Json(all.iter().map(|sb| sb.listed_json(false, max_ttl_ms(&s))).collect()))
}

/// The caller's live E2B sandboxes matching the filters, oldest first.
fn list(s: &E2b, caller: &Caller, q: &ListQuery) -> Result<Vec<E2bSandbox>, E2bError> {
    if !q.running {
        return Ok(Vec::new()); // hutch never pauses a sandbox
    }
    let filter = ListFilter { metadata: q.metadata.clone(), ..Default::default() };
    let mut out = Vec::new();
    for view in s.daemon.list(filter, caller)? {
        let Some(row) = s.daemon.store.get(&view.id).map_err(hutch_server::ApiError::from)? else {
            continue;
        };
        let Some(sb) = E2bSandbox::from_row(row) else { continue };
        if q.template.as_deref().is_some_and(|t| t != sb.template())
            || q.started_after.is_some_and(|t| sb.row.created_at < t)
        {
            continue;
        }
        out.push(sb);
    }
    out.sort_by_key(|sb| sb.row.created_at);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_filter_is_decoded_three_times() {
        let q = parse_list_query(Some(
            "metadata=a%252520b%3Dc%252526d&state=running%2Cpaused&order=asc&template=base&limit=10",
        ))
        .expect("parse");
        assert_eq!(q.metadata.get("a b").map(String::as_str), Some("c&d"));
        assert!(q.running && q.ascending);
        assert_eq!(q.limit, 10);
        assert_eq!(q.template.as_deref(), Some("base"));
    }

    #[test]
    fn paused_only_and_bad_values() {
        assert!(!parse_list_query(Some("state=paused")).expect("parse").running);
        assert!(parse_list_query(Some("state=stopped")).is_err());
        assert!(parse_list_query(Some("order=sideways")).is_err());
        assert!(parse_list_query(Some("nextToken=x")).is_err());
    }
}
