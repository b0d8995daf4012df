//! The gateway in-process (no socket): routing, workloads, and hostile handlers stopped at their
//! limits while the next request succeeds.
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use hutch_gateway::{router, Gateway, GatewayConfig};
use tower::ServiceExt;

async fn get(gw: &Arc<Gateway>, path: &str) -> (StatusCode, String) {
    let resp =
        router(gw.clone()).oneshot(Request::get(path).body(Body::empty()).unwrap()).await.unwrap();
    let status = resp.status();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

fn module(dir: &std::path::Path, name: &str, wat: &str) -> std::path::PathBuf {
    let p = dir.join(format!("{name}.wasm"));
    std::fs::write(&p, wat::parse_str(wat).unwrap()).unwrap();
    p
}

const HELLO: &str = r#"(module
  (import "wasi_snapshot_preview1" "fd_write" (func $w (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "hi\n")
  (func (export "_start")
    (i32.store (i32.const 0) (i32.const 16)) (i32.store (i32.const 4) (i32.const 3))
    (drop (call $w (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))))"#;

const SPIN: &str = r#"(module (memory (export "memory") 1) (func (export "_start") (loop br 0)))"#;

const HOG: &str = r#"(module (memory (export "memory") 1)
  (func (export "_start")
    (loop (br_if 0 (i32.ne (memory.grow (i32.const 16)) (i32.const -1))))
    unreachable))"#;

const FLOOD: &str = r#"(module
  (import "wasi_snapshot_preview1" "fd_write" (func $w (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 2)
  (func (export "_start")
    (i32.store (i32.const 0) (i32.const 16)) (i32.store (i32.const 4) (i32.const 65536))
    (loop (drop (call $w (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8))) (br 0))))"#;

async fn hostile_gateway() -> (tempfile::TempDir, Arc<Gateway>) {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = GatewayConfig {
        timeout: Duration::from_millis(500),
        memory_bytes: 32 << 20,
        ..Default::default()
    };
    for (name, wat) in [("hi", HELLO), ("spin", SPIN), ("hog", HOG), ("flood", FLOOD)] {
        cfg.user_handlers.insert(name.into(), module(dir.path(), name, wat));
    }
    let gw = Gateway::start(cfg).await.expect("gateway");
    (dir, gw)
}

#[tokio::test]
async fn hostile_handlers_stop_at_their_limits_and_the_next_request_succeeds() {
    let (_dir, gw) = hostile_gateway().await;
    assert_eq!(get(&gw, "/wasm/hi").await, (StatusCode::OK, "hi\n".into()));
    let (s, b) = get(&gw, "/wasm/spin").await;
    assert_eq!(s, StatusCode::GATEWAY_TIMEOUT, "{b}");
    assert!(b.contains("500 ms limit"), "{b}");
    assert_eq!(get(&gw, "/wasm/hi").await.0, StatusCode::OK);
    let (s, b) = get(&gw, "/wasm/hog").await;
    assert_eq!(s, StatusCode::INTERNAL_SERVER_ERROR, "{b}");
    assert!(b.contains("out of memory at its 32 MiB limit"), "{b}");
    assert_eq!(get(&gw, "/wasm/hi").await.0, StatusCode::OK);
    let (s, b) = get(&gw, "/wasm/flood").await;
    assert_eq!(s, StatusCode::INTERNAL_SERVER_ERROR, "{b}");
    assert!(b.contains("wrote more than 1048576 bytes"), "{b}");
    assert_eq!(get(&gw, "/wasm/hi").await, (StatusCode::OK, "hi\n".into()));
}

#[tokio::test]
async fn native_workloads_and_bad_requests() {
    let gw = Gateway::start(GatewayConfig::default()).await.expect("gateway");
    assert_eq!(get(&gw, "/native/hello").await, (StatusCode::OK, "Hello, World!\n".into()));
    assert_eq!(get(&gw, "/native/state").await.1, "counter=1\n");
    assert_eq!(get(&gw, "/native/state").await.1, "counter=2\n");
    let (s, b) = get(&gw, "/native/compute?iters=2").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(b.trim().len(), 64, "{b}");
    assert_eq!(get(&gw, "/native/compute?iters=0").await.0, StatusCode::BAD_REQUEST);
    assert_eq!(get(&gw, "/native/compute?iters=x").await.0, StatusCode::BAD_REQUEST);
    assert_eq!(get(&gw, "/native/nope").await.0, StatusCode::NOT_FOUND);
    assert_eq!(get(&gw, "/teleport/hello").await.0, StatusCode::NOT_FOUND);
    // variants that were not configured say so
    let (s, b) = get(&gw, "/process/hello").await;
    assert_eq!(s, StatusCode::NOT_IMPLEMENTED, "{b}");
    assert!(b.contains("--native-handler"), "{b}");
    let (s, b) = get(&gw, "/native/proxy").await;
    assert_eq!(s, StatusCode::NOT_IMPLEMENTED, "{b}");
    assert!(b.contains("--upstream"), "{b}");
}

/// Every variant gives the same answers (needs scripts/build-gateway-handler.sh; root and crun
/// for the container variant).
#[tokio::test]
#[ignore = "needs the built handlers (HUTCH_GATEWAY_NATIVE, HUTCH_GATEWAY_WASM from scripts/build-gateway-handler.sh) and root"]
async fn every_variant_answers_the_same() {
    let native = std::env::var_os("HUTCH_GATEWAY_NATIVE").expect("HUTCH_GATEWAY_NATIVE");
    let wasm = std::env::var_os("HUTCH_GATEWAY_WASM").expect("HUTCH_GATEWAY_WASM");
    let cfg = GatewayConfig {
        native_handler: Some(native.into()),
        wasm_handler: Some(wasm.into()),
        container: true,
        ..Default::default()
    };
    let gw = Gateway::start(cfg).await.expect("gateway");
    let want = get(&gw, "/native/compute?iters=1000").await;
    assert_eq!(want.0, StatusCode::OK);
    for v in ["process", "wasm", "container"] {
        assert_eq!(
            get(&gw, &format!("/{v}/hello")).await,
            (StatusCode::OK, "Hello, World!\n".into()),
            "{v}"
        );
        assert_eq!(get(&gw, &format!("/{v}/compute?iters=1000")).await, want, "{v}");
        let (s, b) = get(&gw, &format!("/{v}/state")).await;
        assert!(s == StatusCode::OK && b.starts_with("counter="), "{v}: {b}");
    }
    gw.shutdown().await;
}
