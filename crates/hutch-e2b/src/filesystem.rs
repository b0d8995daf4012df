//! envd's `filesystem.Filesystem` service on the agent's file operations. Watching a directory
//! is done by the host, which compares listings of it every [`POLL`] (see docs/e2b.md for what
//! that sees and what it does not).
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use axum::{Extension, Json};
use hutch_core::{FileStat, Sandbox};
use hutch_proto::FileKind;
use hutch_server::live::LiveSandbox;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::connect;
use crate::error::{E2bError, Rpc};
use crate::model::{self, rfc3339_s};
use crate::plane::{check_user, Held, Target};
use crate::E2b;

/// How often a watcher looks at its directory.
pub const POLL: Duration = Duration::from_millis(200);
/// A watcher looks at this many entries at most.
const WATCH_MAX_ENTRIES: usize = 2000;
/// Events kept per watcher between two polls by the client.
const WATCH_MAX_EVENTS: usize = 10_000;
/// Watchers per sandbox at most.
const WATCHERS_PER_SANDBOX: usize = 64;

fn fs_err(e: hutch_core::SandboxError, what: &str) -> E2bError {
    hutch_server::ApiError::from_sandbox(e, what).into()
}

fn name_of(uid: Option<u32>) -> String {
    match uid {
        Some(0) => "root".into(),
        Some(model::UID) => model::USER.into(),
        Some(1000) => "sandbox".into(),
        Some(65534) => "nobody".into(),
        Some(n) => n.to_string(),
        None => String::new(),
    }
}

/// `ls -l` style permissions of Go's `FileMode.String()`.
fn permissions(kind: FileKind, mode: u32) -> String {
    let mut s = String::with_capacity(10);
    s.push(match kind {
        FileKind::Dir => 'd',
        FileKind::Symlink => 'L',
        _ => '-',
    });
    for shift in [6, 3, 0] {
        let bits = (mode >> shift) & 7;
        s.push(if bits & 4 != 0 { 'r' } else { '-' });
        s.push(if bits & 2 != 0 { 'w' } else { '-' });
        s.push(if bits & 1 != 0 { 'x' } else { '-' });
    }
    s
}

fn file_type(kind: FileKind) -> &'static str {
    match kind {
        FileKind::File => "FILE_TYPE_FILE",
        FileKind::Dir => "FILE_TYPE_DIRECTORY",
        FileKind::Symlink => "FILE_TYPE_SYMLINK",
        _ => "FILE_TYPE_UNSPECIFIED",
    }
}

fn base_name(path: &str) -> &str {
    path.trim_end_matches('/').rsplit('/').next().unwrap_or(path)
}

/// `EntryInfo`.
pub fn entry(st: &FileStat) -> Value {
    let mut v = json!({
        "name": base_name(&st.path),
        "type": file_type(st.kind),
        "path": st.path,
        "size": st.size,
        "mode": st.mode & 0o777,
        "permissions": permissions(st.kind, st.mode),
        "owner": name_of(st.uid),
        "group": name_of(st.gid),
        "modifiedTime": rfc3339_s(st.mtime),
    });
    if let Some(t) = &st.symlink_target {
        v["symlinkTarget"] = json!(t);
        v["isSymlink"] = json!(true);
    }
    v
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct PathRequest {
    path: String,
    depth: Option<u32>,
    source: String,
    destination: String,
    recursive: bool,
    watcher_id: String,
}

/// A unary filesystem call's message, from a user hutch runs as (else a Connect error).
pub struct Call(PathRequest);

impl<S: Send + Sync> axum::extract::FromRequest<S> for Call {
    type Rejection = Response;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, Response> {
        check_user(req.headers()).map_err(E2bError::rpc)?;
        let body = Bytes::from_request(req, state)
            .await
            .map_err(|e| E2bError::BadRequest(format!("reading the request: {e}")).rpc())?;
        connect::parse(&body).map(Call).map_err(E2bError::rpc)
    }
}

pub async fn stat(Extension(t): Extension<Target>, Call(req): Call) -> Rpc<Json<Value>> {
    Rpc(async {
        let sb = t.open().await?;
        let st = sb.stat(&req.path).await.map_err(|e| fs_err(e, "stat"))?;
        Ok(Json(json!({ "entry": entry(&st) })))
    }
    .await)
}

/// Entries under `dir` down to `depth` levels, each with its full stat.
async fn walk(
    sb: &dyn Sandbox,
    dir: &str,
    depth: u32,
    max: usize,
) -> Result<Vec<FileStat>, E2bError> {
    let mut out = Vec::new();
    let mut todo = vec![(dir.trim_end_matches('/').to_string(), 1u32)];
    while let Some((d, level)) = todo.pop() {
        let entries = sb.list_dir(if d.is_empty() { "/" } else { &d }).await;
        let entries = entries.map_err(|e| fs_err(e, "list"))?;
        for e in entries {
            let path = format!("{d}/{}", e.name);
            let Ok(st) = sb.stat(&path).await else { continue }; // removed meanwhile
            if st.kind == FileKind::Dir && level < depth {
                todo.push((path, level + 1));
            }
            out.push(st);
            if out.len() >= max {
                return Ok(out);
            }
        }
    }
    Ok(out)
}

pub async fn list_dir(Extension(t): Extension<Target>, Call(req): Call) -> Rpc<Json<Value>> {
    Rpc(async {
        let depth = req.depth.unwrap_or(1).max(1);
        let sb = t.open().await?;
        let st = sb.stat(&req.path).await.map_err(|e| fs_err(e, "list"))?;
        if st.kind != FileKind::Dir {
            return Err(E2bError::BadRequest(format!("path {} is not a directory", st.path)));
        }
        let entries = walk(&*sb, &st.path, depth, 100_000).await?;
        let mut entries: Vec<Value> = entries.iter().map(entry).collect();
        entries.sort_by(|a, b| a["path"].as_str().cmp(&b["path"].as_str()));
        Ok(Json(json!({ "entries": entries })))
    }
    .await)
}

pub async fn make_dir(Extension(t): Extension<Target>, Call(req): Call) -> Rpc<Json<Value>> {
    Rpc(async {
        let sb = t.open().await?;
        if let Ok(st) = sb.stat(&req.path).await {
            return Err(if st.kind == FileKind::Dir {
                E2bError::AlreadyExists(format!("directory {} already exists", st.path))
            } else {
                E2bError::BadRequest(format!("path {} exists and is not a directory", st.path))
            });
        }
        sb.make_dir(&req.path, true).await.map_err(|e| fs_err(e, "make dir"))?;
        let st = sb.stat(&req.path).await.map_err(|e| fs_err(e, "stat"))?;
        Ok(Json(json!({ "entry": entry(&st) })))
    }
    .await)
}

pub async fn remove(Extension(t): Extension<Target>, Call(req): Call) -> Rpc<Json<Value>> {
    Rpc(async {
        let sb = t.open().await?;
        match sb.remove(&req.path, true).await {
            Err(e) if e.kind() == hutch_core::ErrorKind::NotFound => {}
            other => other.map_err(|e| fs_err(e, "remove"))?,
        }
        Ok(Json(json!({})))
    }
    .await)
}

pub async fn rename(Extension(t): Extension<Target>, Call(req): Call) -> Rpc<Json<Value>> {
    Rpc(async {
        let sb = t.open().await?;
        sb.stat(&req.source).await.map_err(|e| fs_err(e, "move"))?;
        if let Some((parent, _)) = req.destination.trim_end_matches('/').rsplit_once('/') {
            if !parent.is_empty() {
                let _ = sb.make_dir(parent, true).await;
            }
        }
        sb.rename(&req.source, &req.destination).await.map_err(|e| fs_err(e, "move"))?;
        let st = sb.stat(&req.destination).await.map_err(|e| fs_err(e, "stat"))?;
        Ok(Json(json!({ "entry": entry(&st) })))
    }
    .await)
}

// ---- watching ------------------------------------------------------------------------------

/// What a watcher last saw of one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    kind: FileKind,
    size: u64,
    mtime: i64,
}

/// The events between two listings, names relative to the watched directory: created paths
/// (with a write when they have content, as inotify reports a new file being written), written
/// ones (size or modification time changed), removed ones.
fn diff(root: &str, old: &BTreeMap<String, Seen>, new: &BTreeMap<String, Seen>) -> Vec<Value> {
    let rel = |p: &str| p.strip_prefix(root).unwrap_or(p).trim_start_matches('/').to_string();
    let ev = |p: &str, ty: &str| json!({"name": rel(p), "type": ty});
    let mut out = Vec::new();
    for (p, s) in new {
        match old.get(p) {
            None => {
                out.push(ev(p, "EVENT_TYPE_CREATE"));
                if s.kind == FileKind::File && s.size > 0 {
                    out.push(ev(p, "EVENT_TYPE_WRITE"));
                }
            }
            Some(o) if o.kind != s.kind => {
                out.push(ev(p, "EVENT_TYPE_REMOVE"));
                out.push(ev(p, "EVENT_TYPE_CREATE"));
            }
            Some(o) if s.kind == FileKind::File && (o.size != s.size || o.mtime != s.mtime) => {
                out.push(ev(p, "EVENT_TYPE_WRITE"));
            }
            _ => {}
        }
    }
    for p in old.keys().filter(|p| !new.contains_key(*p)) {
        out.push(ev(p, "EVENT_TYPE_REMOVE"));
    }
    out
}

async fn snapshot(
    live: &LiveSandbox,
    root: &str,
    recursive: bool,
) -> Result<BTreeMap<String, Seen>, E2bError> {
    let sb = Held::new(live).await?;
    let depth = if recursive { 64 } else { 1 };
    let list = walk(&*sb, root, depth, WATCH_MAX_ENTRIES).await?;
    Ok(list
        .into_iter()
        .map(|st| (st.path, Seen { kind: st.kind, size: st.size, mtime: st.mtime }))
        .collect())
}

/// What a watcher hands on after each poll: its events, or why it stopped (the sandbox went).
type Batch = Result<Vec<Value>, E2bError>;

/// Starts watching: checks the directory, takes the first listing, then sends each poll's
/// events to `sink` until it returns false or a listing fails (the error is the last batch).
async fn watch(
    live: Arc<LiveSandbox>,
    path: &str,
    recursive: bool,
    sink: impl FnMut(Batch) -> futures_util::future::BoxFuture<'static, bool> + Send + 'static,
) -> Result<tokio::task::JoinHandle<()>, E2bError> {
    let root = {
        let sb = Held::new(&live).await?;
        let st = sb.stat(path).await.map_err(|e| fs_err(e, "watch"))?;
        if st.kind != FileKind::Dir {
            return Err(E2bError::BadRequest(format!("path {} is not a directory", st.path)));
        }
        st.path
    };
    let mut last = snapshot(&live, &root, recursive).await?;
    let mut sink = sink;
    Ok(tokio::spawn(async move {
        loop {
            tokio::time::sleep(POLL).await;
            let batch = snapshot(&live, &root, recursive).await.map(|now| {
                let events = diff(&root, &last, &now);
                last = now;
                events
            });
            let failed = batch.is_err();
            if !sink(batch).await || failed {
                return;
            }
        }
    }))
}

struct WatcherEntry {
    sandbox: String,
    events: Arc<Mutex<Vec<Value>>>,
    task: tokio::task::JoinHandle<()>,
}

/// The polling watchers of `CreateWatcher`, by id.
#[derive(Default)]
pub struct Watchers {
    map: Mutex<HashMap<String, WatcherEntry>>,
}

impl Watchers {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, WatcherEntry>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stops the watchers of a sandbox that is gone.
    pub fn forget_sandbox(&self, sandbox: &str) {
        self.lock().retain(|_, w| {
            let keep = w.sandbox != sandbox;
            if !keep {
                w.task.abort();
            }
            keep
        });
    }
}

/// A watch request: the directory and options hutch implements, refusing the others by name.
fn watch_request(v: Value) -> Result<PathRequest, E2bError> {
    if v.get("includeEntry").and_then(Value::as_bool) == Some(true) {
        return Err(E2bError::unimplemented("watch events with entry info"));
    }
    if v.get("allowNetworkMounts").and_then(Value::as_bool) == Some(true) {
        return Err(E2bError::unimplemented("watching network mounts"));
    }
    serde_json::from_value(v).map_err(|e| E2bError::BadRequest(format!("invalid message: {e}")))
}

pub async fn create_watcher(
    State(s): State<Arc<E2b>>,
    Extension(t): Extension<Target>,
    h: HeaderMap,
    body: Bytes,
) -> Rpc<Json<Value>> {
    Rpc(async {
        check_user(&h)?;
        let req = watch_request(connect::parse(&body)?)?;
        let count = s.watchers.lock().values().filter(|w| w.sandbox == t.id()).count();
        if count >= WATCHERS_PER_SANDBOX {
            return Err(E2bError::from(hutch_server::ApiError::rate_limited(format!(
                "at most {WATCHERS_PER_SANDBOX} watchers per sandbox"
            ))));
        }
        let events = Arc::new(Mutex::new(Vec::new()));
        let ev = events.clone();
        let task = watch(t.live.clone(), &req.path, req.recursive, move |batch| {
            let ev = ev.clone();
            Box::pin(async move {
                // a watcher whose sandbox went stops; the sandbox plane then answers 502
                let Ok(new) = batch else { return false };
                let mut q = ev.lock().unwrap_or_else(|p| p.into_inner());
                q.extend(new);
                let extra = q.len().saturating_sub(WATCH_MAX_EVENTS);
                q.drain(..extra);
                true
            })
        })
        .await?;
        let id = crate::rest::random_hex(8)?;
        s.watchers.lock().insert(id.clone(), WatcherEntry { sandbox: t.id().into(), events, task });
        Ok(Json(json!({ "watcherId": id })))
    }
    .await)
}

fn watcher_not_found(id: &str) -> E2bError {
    E2bError::NotFound(format!("watcher {id} not found"))
}

pub async fn watcher_events(
    State(s): State<Arc<E2b>>,
    Extension(t): Extension<Target>,
    Call(req): Call,
) -> Rpc<Json<Value>> {
    let map = s.watchers.lock();
    let Some(w) = map.get(&req.watcher_id).filter(|w| w.sandbox == t.id()) else {
        return Rpc(Err(watcher_not_found(&req.watcher_id)));
    };
    let events: Vec<Value> = w.events.lock().unwrap_or_else(|p| p.into_inner()).drain(..).collect();
    Rpc(Ok(Json(json!({ "events": events }))))
}

pub async fn remove_watcher(
    State(s): State<Arc<E2b>>,
    Extension(t): Extension<Target>,
    Call(req): Call,
) -> Rpc<Json<Value>> {
    let mut map = s.watchers.lock();
    Rpc(match map.get(&req.watcher_id) {
        Some(w) if w.sandbox == t.id() => {
            w.task.abort();
            map.remove(&req.watcher_id);
            Ok(Json(json!({})))
        }
        _ => Err(watcher_not_found(&req.watcher_id)),
    })
}

/// `WatchDir`: a stream of `start`, then `filesystem` events and keepalives, until the client
/// goes away.
pub async fn watch_dir(Extension(t): Extension<Target>, h: HeaderMap, body: Bytes) -> Response {
    let started = async {
        check_user(&h)?;
        let req = watch_request(connect::stream_request(&body)?)?;
        let (tx, resp) = connect::stream();
        if tx.send(connect::envelope(0, &json!({"start": {}}))).await.is_err() {
            return Ok(resp);
        }
        let keepalive = connect::keepalive(&h);
        let polls_per_keepalive = (keepalive.as_millis() / POLL.as_millis()).max(1) as u32;
        let mut quiet = 0u32;
        let sink_tx = tx.clone();
        watch(t.live.clone(), &req.path, req.recursive, move |batch| {
            let tx = sink_tx.clone();
            let events = match batch {
                Ok(events) => events,
                Err(e) => {
                    return Box::pin(async move {
                        let _ = tx.send(connect::end_stream(Some(e.rpc_json()))).await;
                        false
                    });
                }
            };
            quiet = if events.is_empty() { quiet + 1 } else { 0 };
            let ping = quiet >= polls_per_keepalive;
            if ping {
                quiet = 0;
            }
            Box::pin(async move {
                for e in events {
                    if tx.send(connect::envelope(0, &json!({ "filesystem": e }))).await.is_err() {
                        return false;
                    }
                }
                if ping && tx.send(connect::envelope(0, &json!({"keepalive": {}}))).await.is_err() {
                    return false;
                }
                !tx.is_closed()
            })
        })
        .await?;
        Ok::<_, E2bError>(resp)
    }
    .await;
    match started {
        Ok(r) => r,
        Err(e) => connect::stream_error(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(kind: FileKind, size: u64, mtime: i64) -> Seen {
        Seen { kind, size, mtime }
    }

    #[test]
    fn permissions_read_like_go() {
        assert_eq!(permissions(FileKind::File, 0o644), "-rw-r--r--");
        assert_eq!(permissions(FileKind::Dir, 0o755), "drwxr-xr-x");
    }

    #[test]
    fn listings_differ_by_created_written_and_removed_paths() {
        let old = BTreeMap::from([
            ("/w/a".to_string(), seen(FileKind::File, 1, 10)),
            ("/w/gone".to_string(), seen(FileKind::File, 1, 10)),
        ]);
        let new = BTreeMap::from([
            ("/w/a".to_string(), seen(FileKind::File, 2, 10)),
            ("/w/d/new".to_string(), seen(FileKind::File, 3, 11)),
        ]);
        let ev = diff("/w", &old, &new);
        let pairs: Vec<(String, String)> = ev
            .iter()
            .map(|e| {
                (e["name"].as_str().unwrap_or("").into(), e["type"].as_str().unwrap_or("").into())
            })
            .collect();
        assert_eq!(
            pairs,
            [
                ("a".into(), "EVENT_TYPE_WRITE".into()),
                ("d/new".into(), "EVENT_TYPE_CREATE".into()),
                ("d/new".into(), "EVENT_TYPE_WRITE".into()),
                ("gone".into(), "EVENT_TYPE_REMOVE".into()),
            ]
        );
    }

    #[test]
    fn entries_have_the_fields_the_sdk_reads() {
        let st = FileStat {
            path: "/home/user/a.txt".into(),
            kind: FileKind::File,
            size: 5,
            mode: 0o100644 & 0o7777,
            mtime: 0,
            symlink_target: None,
            uid: Some(model::UID),
            gid: Some(model::UID),
        };
        let e = entry(&st);
        assert_eq!(e["name"], "a.txt");
        assert_eq!(e["type"], "FILE_TYPE_FILE");
        assert_eq!(e["owner"], "user");
        assert_eq!(e["permissions"], "-rw-r--r--");
        assert_eq!(e["modifiedTime"], "1970-01-01T00:00:00Z");
    }
}
