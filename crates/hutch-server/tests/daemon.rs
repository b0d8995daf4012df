//! The daemon's promises, through its real router and real container sandboxes (root + crun):
//! capacity under a burst, recycled sandboxes that keep nothing, hostile requests, TTL expiry.
//! Opted into with `cargo test -p hutch-server -- --include-ignored` (scripts/test.sh does).
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use hutch_server::api::Trusted;
use hutch_server::{Daemon, ServerConfig};
use serde_json::{json, Value};
use tower::ServiceExt;

struct Env {
    daemon: Arc<Daemon>,
    app: axum::Router,
    dir: PathBuf,
}

impl Env {
    async fn new(tag: &str, tweak: impl FnOnce(&mut ServerConfig)) -> Env {
        let dir =
            std::env::temp_dir().join(format!("hutch-daemon-test-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut cfg = ServerConfig::new(dir.join("state"));
        cfg.db_path = dir.join("hutch.db");
        tweak(&mut cfg);
        let daemon = Daemon::start(cfg).await.expect("daemon starts");
        let app = hutch_server::router(daemon.clone(), Trusted(true));
        Env { daemon, app, dir }
    }

    async fn call(&self, method: &str, uri: &str, body: Option<Value>) -> (StatusCode, Value) {
        let mut b = Request::builder().method(method).uri(uri);
        let body = match body {
            Some(v) => {
                b = b.header("content-type", "application/json");
                Body::from(v.to_string())
            }
            None => Body::empty(),
        };
        self.raw(b.body(body).expect("request")).await
    }

    async fn raw(&self, req: Request<Body>) -> (StatusCode, Value) {
        let resp = self.app.clone().oneshot(req).await.expect("router answers");
        let status = resp.status();
        let bytes = resp.into_body().collect().await.expect("body").to_bytes();
        let v = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        (status, v)
    }

    async fn create(&self, body: Value) -> String {
        let (s, v) = self.call("POST", "/v1/sandboxes", Some(body)).await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
        v["id"].as_str().expect("id").to_string()
    }

    async fn sh(&self, id: &str, script: &str) -> Value {
        let (s, v) = self
            .call("POST", &format!("/v1/sandboxes/{id}/exec"), Some(json!({"shell": script})))
            .await;
        assert_eq!(s, StatusCode::OK, "{v}");
        v
    }

    fn runtime_containers(&self) -> Vec<String> {
        let mut out = Vec::new();
        for rt in ["crun", "runc"] {
            if let Ok(rd) = std::fs::read_dir(self.dir.join("state/runtime").join(rt)) {
                out.extend(rd.flatten().map(|e| e.file_name().to_string_lossy().into_owned()));
            }
        }
        out
    }

    /// Bundles, runtime state and cgroups of the given sandboxes still on the host.
    fn leftovers(&self, ids: &[String]) -> Vec<String> {
        let mut left: Vec<String> = Vec::new();
        if let Ok(rd) = std::fs::read_dir(self.dir.join("state/sandboxes")) {
            left.extend(
                rd.flatten().map(|e| format!("bundle {}", e.file_name().to_string_lossy())),
            );
        }
        left.extend(self.runtime_containers().into_iter().map(|c| format!("container {c}")));
        for id in ids {
            for ctrl in ["memory", "pids", "cpu"] {
                let p = Path::new("/sys/fs/cgroup").join(ctrl).join("hutch").join(id);
                if p.exists() {
                    left.push(format!("cgroup {}", p.display()));
                }
            }
        }
        left
    }

    async fn finish(self) {
        self.daemon.shutdown().await;
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root and crun: cargo test -p hutch-server -- --include-ignored"]
async fn burst_of_200_creates_against_capacity_100() {
    let env = Env::new("burst", |c| c.max_sandboxes = 100).await;
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..200 {
        let app = env.app.clone();
        tasks.spawn(async move {
            let req = Request::post("/v1/sandboxes")
                .header("content-type", "application/json")
                .body(Body::from("{}"))
                .expect("req");
            let resp = app.oneshot(req).await.expect("answer");
            let status = resp.status();
            let body = resp.into_body().collect().await.expect("body").to_bytes();
            (status, serde_json::from_slice::<Value>(&body).unwrap_or(Value::Null))
        });
    }
    let (mut ok, mut full, mut ids) = (0, 0, Vec::new());
    while let Some(r) = tasks.join_next().await {
        let (status, body) = r.expect("task");
        match status {
            StatusCode::CREATED => {
                ok += 1;
                ids.push(body["id"].as_str().expect("id").to_string());
            }
            StatusCode::SERVICE_UNAVAILABLE => {
                full += 1;
                assert_eq!(body["code"], "capacity_exceeded", "{body}");
                assert!(body["message"].as_str().unwrap_or("").contains("100"), "{body}");
            }
            other => panic!("unexpected {other}: {body}"),
        }
    }
    assert_eq!((ok, full), (100, 100));
    // every one of them works
    let (s, v) = env.call("GET", "/v1/sandboxes?state=waiting", None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(v["sandboxes"].as_array().map(Vec::len), Some(100));
    assert_eq!(env.sh(&ids[0], "echo hi").await["stdout"], "hi\n");
    // delete all, concurrently
    let mut dels = tokio::task::JoinSet::new();
    for id in ids.clone() {
        let app = env.app.clone();
        dels.spawn(async move {
            app.oneshot(
                Request::delete(format!("/v1/sandboxes/{id}")).body(Body::empty()).expect("req"),
            )
            .await
            .expect("answer")
            .status()
        });
    }
    while let Some(s) = dels.join_next().await {
        assert_eq!(s.expect("task"), StatusCode::NO_CONTENT);
    }
    let (_, v) = env.call("GET", "/v1/sandboxes", None).await;
    assert_eq!(v["sandboxes"].as_array().map(Vec::len), Some(0), "{v}");
    assert_eq!(env.leftovers(&ids), Vec::<String>::new());
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root and crun: cargo test -p hutch-server -- --include-ignored"]
async fn a_recycled_sandbox_keeps_nothing_of_its_previous_user() {
    let env = Env::new("recycle", |_| {}).await;
    let (s, v) = env
        .call("POST", "/v1/pools", Some(json!({"name": "py", "size": 1, "reuse": "recycle"})))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    // wait for the warm member
    let mut warm = false;
    for _ in 0..100 {
        let (_, p) = env.call("GET", "/v1/pools/py", None).await;
        if p["members"]["warm"] == 1 {
            warm = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(warm, "pool never got a warm member");
    let first = env.create(json!({"pool": "py", "metadata": {"user": "alice"}})).await;
    env.sh(&first, "echo alice-secret > /workspace/notes; echo t > /tmp/t; echo s > /dev/shm/s; ipcmk -M 1024 >/dev/null").await;
    let (s, _) = env
        .call(
            "POST",
            &format!("/v1/sandboxes/{first}/processes"),
            Some(json!({"shell": "sleep 600"})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED);
    let (s, v) = env
        .call(
            "POST",
            &format!("/v1/sandboxes/{first}/exec"),
            Some(json!({"shell": "echo $ALICE", "env": {"ALICE": "token"}})),
        )
        .await;
    assert_eq!((s, v["stdout"].as_str()), (StatusCode::OK, Some("token\n")));
    let (s, _) = env.call("DELETE", &format!("/v1/sandboxes/{first}"), None).await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    // the next user of the pool gets the same, recycled sandbox
    let second = env.create(json!({"pool": "py", "metadata": {"user": "bob"}})).await;
    assert_eq!(second, first, "recycle mode hands the cleaned sandbox out again");
    let v = env.sh(&second, "ls -A /workspace /tmp /dev/shm; ipcs -m | grep -c '^0x' || true; for p in /proc/[0-9]*; do cat $p/comm; done | grep -c '^sleep' || true; echo \"[$ALICE]\"").await;
    let out = v["stdout"].as_str().unwrap_or("");
    let lines: Vec<&str> = out.lines().filter(|l| !l.is_empty() && !l.ends_with(':')).collect();
    assert_eq!(lines, ["0", "0", "[]"], "previous user's traces: {out:?}");
    let (_, row) = env.call("GET", &format!("/v1/sandboxes/{second}"), None).await;
    assert_eq!(row["metadata"]["user"], "bob");
    let (_, procs) = env.call("GET", &format!("/v1/sandboxes/{second}/processes"), None).await;
    assert_eq!(procs["processes"].as_array().map(Vec::len), Some(0), "{procs}");
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root and crun: cargo test -p hutch-server -- --include-ignored"]
async fn hostile_requests_get_clear_4xx_and_the_daemon_keeps_serving() {
    let env = Env::new("hostile", |c| c.max_json = 64 * 1024).await;
    let id = env.create(json!({})).await;
    let post = |uri: String, body: &'static str| {
        Request::post(uri)
            .header("content-type", "application/json")
            .body(Body::from(body))
            .expect("req")
    };
    let cases: Vec<(Request<Body>, StatusCode, &str)> = vec![
        (post("/v1/sandboxes".into(), "{\"memory\": "), StatusCode::BAD_REQUEST, "invalid_request"),
        (
            post("/v1/sandboxes".into(), "{\"limits\": {\"memory_bytes\": 1, \"extra\": 2}}"),
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            post("/v1/sandboxes".into(), "{\"limits\": {\"memory_bytes\": 1024}}"),
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (post("/v1/sandboxes".into(), "[1,2,3]"), StatusCode::BAD_REQUEST, "invalid_request"),
        (
            post("/v1/sandboxes".into(), "{\"rootfs\": \"/root\", \"backend\": \"nope\"}"),
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            post(format!("/v1/sandboxes/{id}/exec"), "{}"),
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            post(format!("/v1/sandboxes/{id}/exec"), "{\"command\": [\"x\"], \"shell\": \"y\"}"),
            StatusCode::BAD_REQUEST,
            "invalid_request",
        ),
        (
            post("/v1/sandboxes/hutch-000000000000/exec".into(), "{\"shell\": \"true\"}"),
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            post("/v1/sandboxes/../../etc/exec".into(), "{\"shell\": \"true\"}"),
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            Request::post("/v1/sandboxes")
                .header("content-type", "application/json")
                .body(Body::from(vec![b' '; 200 * 1024]))
                .expect("req"),
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
        ),
        (
            Request::post("/v1/sandboxes").body(Body::from("{}")).expect("req"),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
        ),
        (
            Request::delete("/v1/health").body(Body::empty()).expect("req"),
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
        ),
        (
            Request::get("/v1/nope").body(Body::empty()).expect("req"),
            StatusCode::NOT_FOUND,
            "not_found",
        ),
    ];
    for (req, status, code) in cases {
        let what = format!("{} {}", req.method(), req.uri());
        let (s, v) = env.raw(req).await;
        assert_eq!((s, v["code"].as_str()), (status, Some(code)), "{what}: {v}");
        assert!(
            v["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty() && !m.contains("/run/") && !m.contains(".rs")),
            "{what}: {v}"
        );
    }
    // path traversal through the file API: nothing is written outside the sandbox's roots
    env.sh(&id, "ln -s /etc /workspace/etc-link; ln -s / /workspace/root-link").await;
    let put = |path: &str| {
        Request::put(format!("/v1/sandboxes/{id}/files?path={path}"))
            .body(Body::from("pwned"))
            .expect("req")
    };
    for (path, status) in [
        ("../../etc/passwd", StatusCode::BAD_REQUEST),
        ("/workspace/../etc/passwd", StatusCode::BAD_REQUEST),
        ("/etc/passwd", StatusCode::FORBIDDEN),
        ("/usr/bin/x", StatusCode::FORBIDDEN),
        ("/workspace/etc-link/hutch-pwned", StatusCode::FORBIDDEN),
        ("/workspace/root-link/etc/x", StatusCode::FORBIDDEN),
        ("/proc/self/x", StatusCode::FORBIDDEN),
    ] {
        let (s, v) = env.raw(put(path)).await;
        assert_eq!(s, status, "{path}: {v}");
    }
    for path in ["/workspace/etc-link/passwd", "/workspace/root-link/etc/shadow"] {
        let (s, v) = env.call("GET", &format!("/v1/sandboxes/{id}/files?path={path}"), None).await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{path}: {v}");
    }
    let v = env.sh(&id, "ls /etc/hutch-pwned 2>&1; cat /etc/passwd | grep -c pwned").await;
    assert!(v["stdout"].as_str().unwrap_or("").ends_with("0\n"), "{v}");
    // API keys: a bad key is refused everywhere, a good non-admin key sees only its own
    let untrusted = hutch_server::router(env.daemon.clone(), Trusted(false));
    let req = Request::get("/v1/sandboxes")
        .header("authorization", "Bearer hutch_wrong")
        .body(Body::empty())
        .expect("req");
    let resp = untrusted.clone().oneshot(req).await.expect("answer");
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    let (s, k) = env.call("POST", "/v1/keys", Some(json!({"name": "tenant"}))).await;
    assert_eq!(s, StatusCode::CREATED, "{k}");
    let secret = k["secret"].as_str().expect("secret").to_string();
    let req = Request::get(format!("/v1/sandboxes/{id}"))
        .header("x-api-key", &secret)
        .body(Body::empty())
        .expect("req");
    let resp = untrusted.clone().oneshot(req).await.expect("answer");
    assert_eq!(resp.status(), StatusCode::NOT_FOUND, "another key's sandbox is invisible");
    let req = Request::post("/v1/sandboxes")
        .header("x-api-key", &secret)
        .header("content-type", "application/json")
        .body(Body::from("{\"rootfs\": \"/root\"}"))
        .expect("req");
    assert_eq!(
        untrusted.clone().oneshot(req).await.expect("answer").status(),
        StatusCode::FORBIDDEN
    );
    // and the daemon still serves
    assert_eq!(env.sh(&id, "echo still").await["stdout"], "still\n");
    let (s, _) = env.call("GET", "/v1/health", None).await;
    assert_eq!(s, StatusCode::OK);
    env.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root and crun: cargo test -p hutch-server -- --include-ignored"]
async fn ttl_expiry_and_extension() {
    let env = Env::new("ttl", |c| c.sweep_interval = Duration::from_millis(100)).await;
    let short = env.create(json!({"ttl_seconds": 1})).await;
    let kept = env.create(json!({"ttl_seconds": 1})).await;
    let (s, v) = env
        .call("POST", &format!("/v1/sandboxes/{kept}/ttl"), Some(json!({"ttl_seconds": 60})))
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let (_, v) = env.call("GET", &format!("/v1/sandboxes/{short}"), None).await;
    assert_eq!(
        (v["state"].as_str(), v["stop_reason"].as_str()),
        (Some("stopped"), Some("ttl expired")),
        "{v}"
    );
    let (s, v) = env
        .call("POST", &format!("/v1/sandboxes/{short}/exec"), Some(json!({"shell": "true"})))
        .await;
    assert_eq!((s, v["code"].as_str()), (StatusCode::CONFLICT, Some("sandbox_stopped")));
    assert_eq!(env.sh(&kept, "echo alive").await["stdout"], "alive\n");
    assert_eq!(
        env.leftovers(std::slice::from_ref(&short)).iter().filter(|l| l.contains(&short)).count(),
        0
    );
    env.finish().await;
}

/// A real TCP listener for the parts of the API that need a connection (WebSocket, SSE).
async fn serve_tcp(env: &Env) -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = l.local_addr().expect("addr");
    let app = env.app.clone();
    let h = tokio::spawn(async move {
        let _ = axum::serve(l, app).await;
    });
    (addr, h)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root and crun: cargo test -p hutch-server -- --include-ignored"]
async fn websocket_exec_streams_stdin_and_output_and_attach_replays_background_output() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let env = Env::new("ws", |_| {}).await;
    let id = env.create(json!({})).await;
    let (addr, server) = serve_tcp(&env).await;
    let (mut ws, _) =
        tokio_tungstenite::connect_async(format!("ws://{addr}/v1/sandboxes/{id}/exec/ws"))
            .await
            .expect("ws connect");
    ws.send(Message::Text(
        json!({"command": ["sh", "-c", "read a; echo got:$a; cat >&2"]}).to_string().into(),
    ))
    .await
    .expect("send cmd");
    ws.send(Message::Binary(b"hello\n".to_vec().into())).await.expect("stdin");
    ws.send(Message::Text(json!({"type": "stdin", "data": "to-stderr"}).to_string().into()))
        .await
        .expect("stdin text");
    ws.send(Message::Text(json!({"type": "stdin_close"}).to_string().into()))
        .await
        .expect("close stdin");
    let (mut out, mut err, mut exit) = (String::new(), String::new(), Value::Null);
    while let Some(Ok(m)) = ws.next().await {
        let Message::Text(t) = m else { continue };
        let v: Value = serde_json::from_str(&t).expect("json event");
        match v["type"].as_str() {
            Some("stdout") => out.push_str(v["data"].as_str().unwrap_or("")),
            Some("stderr") => err.push_str(v["data"].as_str().unwrap_or("")),
            Some("exit") => {
                exit = v;
                break;
            }
            Some("error") => panic!("{v}"),
            _ => {}
        }
    }
    assert_eq!(
        (out.as_str(), err.as_str(), exit["exit_code"].as_i64()),
        ("got:hello\n", "to-stderr", Some(0))
    );

    // a background process: output buffered while nobody listens, replayed on attach
    let (s, p) = env
        .call(
            "POST",
            &format!("/v1/sandboxes/{id}/processes"),
            Some(json!({"shell": "echo early; read x; echo late:$x"})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{p}");
    let pid = p["pid"].as_u64().expect("pid");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let resp = reqwest_like_get(addr, &format!("/v1/sandboxes/{id}/processes/{pid}/attach")).await;
    let (s, _) = env
        .raw(
            Request::post(format!("/v1/sandboxes/{id}/processes/{pid}/stdin"))
                .body(Body::from("now\n"))
                .expect("req"),
        )
        .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let text = resp.await.expect("attach task");
    assert!(
        text.contains("early") && text.contains("late:now") && text.contains("event: exit"),
        "{text}"
    );
    let (_, logs) =
        env.call("GET", &format!("/v1/sandboxes/{id}/processes/{pid}/logs"), None).await;
    assert_eq!(logs["stdout"], "early\nlate:now\n", "{logs}");
    assert_eq!(logs["process"]["status"]["exit_code"], 0);
    server.abort();
    env.finish().await;
}

/// Reads an SSE response to its end on a raw connection (returns the whole body text).
async fn reqwest_like_get(
    addr: std::net::SocketAddr,
    path: &str,
) -> tokio::task::JoinHandle<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let req = format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.expect("send");
    tokio::spawn(async move {
        let mut buf = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut buf)).await;
        String::from_utf8_lossy(&buf).into_owned()
    })
}
