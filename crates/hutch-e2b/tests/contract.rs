//! The E2B control plane against its contract, `spec/e2b-openapi.yaml`:
//!
//! - **routes**: the (method, path) pairs of the spec equal the router's, read from the source of
//!   `src/rest.rs` (the router does not expose them);
//! - **answers**: requests through the real router in-process (a daemon on a temporary state
//!   directory, no socket) get a documented status, and their bodies validate against the
//!   documented schema;
//! - **shapes**: the JSON the E2B API builds for a sandbox validates against `Sandbox`,
//!   `ListedSandbox` and `SandboxDetail` (closed schemas: an undocumented field is drift).
//!
//! Live sandboxes are exercised by the stock SDKs in `scripts/test-e2b.sh`.
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use hutch_e2b::model::{E2bSandbox, META_TEMPLATE, META_TOKEN};
use hutch_server::api::types::KeyFormat;
use hutch_server::{Daemon, ServerConfig};
use hutch_store::{SandboxRow, SandboxState};
use serde_json::{json, Value};
use tower::ServiceExt;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn spec() -> Value {
    let text = std::fs::read_to_string(root().join("spec/e2b-openapi.yaml"))
        .expect("read spec/e2b-openapi.yaml");
    serde_yaml::from_str(&text).expect("spec/e2b-openapi.yaml parses")
}

const METHODS: [&str; 4] = ["get", "post", "put", "delete"];

fn spec_routes(spec: &Value) -> BTreeSet<(String, String)> {
    let mut out = BTreeSet::new();
    for (path, item) in spec["paths"].as_object().expect("paths") {
        for m in METHODS {
            if item.get(m).is_some() {
                out.insert((m.to_uppercase(), path.clone()));
            }
        }
    }
    out
}

/// `.route("PATH", get(..).post(..))` calls in `rest::router`.
fn source_routes() -> BTreeSet<(String, String)> {
    let src = std::fs::read_to_string(root().join("crates/hutch-e2b/src/rest.rs")).expect("read");
    let body = &src[src.find("pub fn router").expect("router fn")..];
    let body = &body[..body.find(".with_state").expect("with_state")];
    let mut out = BTreeSet::new();
    for piece in body.split(".route(").skip(1) {
        let path = piece.split('"').nth(1).expect("route path is a string literal");
        let rest = &piece[piece.find(',').expect("route has a handler")..];
        let mut found = false;
        for m in METHODS {
            let bytes = rest.as_bytes();
            let mut from = 0;
            while let Some(i) = rest[from..].find(&format!("{m}(")) {
                let at = from + i;
                let before = if at == 0 { b' ' } else { bytes[at - 1] };
                if !(before.is_ascii_alphanumeric() || before == b'_') {
                    out.insert((m.to_uppercase(), path.to_string()));
                    found = true;
                }
                from = at + m.len();
            }
        }
        assert!(found, "cannot read the methods of route {path}");
    }
    out
}

#[test]
fn routes_match_the_spec() {
    let spec = spec_routes(&spec());
    let code = source_routes();
    assert_eq!(
        code.difference(&spec).collect::<Vec<_>>(),
        Vec::<&(String, String)>::new(),
        "routes served but not in spec/e2b-openapi.yaml"
    );
    assert_eq!(
        spec.difference(&code).collect::<Vec<_>>(),
        Vec::<&(String, String)>::new(),
        "routes in spec/e2b-openapi.yaml but not served"
    );
}

fn validator(spec: &Value, schema: Value) -> jsonschema::Validator {
    let root = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "allOf": [schema],
        "components": spec["components"],
    });
    jsonschema::validator_for(&root).expect("schema compiles")
}

fn assert_valid(spec: &Value, schema: Value, v: &Value, what: &str) {
    let val = validator(spec, schema);
    let errors: Vec<String> = val.iter_errors(v).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{what}: {v} does not match the spec: {errors:?}");
}

fn resolve<'a>(spec: &'a Value, v: &'a Value) -> &'a Value {
    match v.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let mut cur = spec;
            for part in r.trim_start_matches("#/").split('/') {
                cur = &cur[part];
            }
            cur
        }
        None => v,
    }
}

#[test]
fn sandbox_shapes_match_the_spec() {
    let spec = spec();
    let sandbox_spec = hutch_core::SandboxSpec::default();
    let mut row = SandboxRow::new(
        "hutch-0123456789ab",
        SandboxState::Waiting,
        "container:crun",
        serde_json::to_string(&sandbox_spec).expect("spec json"),
        1_700_000_000_000,
    );
    row.expires_at = Some(1_700_000_300_000);
    row.metadata = BTreeMap::from([
        (META_TEMPLATE.to_string(), "base".to_string()),
        (META_TOKEN.to_string(), "00ff".to_string()),
        ("user-key".to_string(), "v".to_string()),
    ]);
    let sb = E2bSandbox::from_row(row).expect("an E2B sandbox");
    let s = |name: &str| json!({"$ref": format!("#/components/schemas/{name}")});
    assert_valid(&spec, s("Sandbox"), &sb.sandbox_json(), "Sandbox");
    assert_valid(&spec, s("ListedSandbox"), &sb.listed_json(false, 0), "ListedSandbox");
    let detail = sb.listed_json(true, 0);
    assert_valid(&spec, s("SandboxDetail"), &detail, "SandboxDetail");
    assert_eq!(detail["metadata"], json!({"user-key": "v"}), "e2b.* keys stay hidden");
}

async fn app() -> (Router, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = ServerConfig::new(dir.path().join("state"));
    cfg.db_path = dir.path().join("h.db");
    let d: Arc<Daemon> = Daemon::start(cfg).await.expect("daemon starts");
    let (_, secret) = d.create_key("contract", false, None, None, KeyFormat::E2b).expect("key");
    assert!(secret.starts_with("e2b_") && secret[4..].bytes().all(|b| b.is_ascii_hexdigit()));
    (hutch_e2b::router(d), secret, dir)
}

async fn call(
    app: &Router,
    method: Method,
    path: &str,
    key: Option<&str>,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut req = Request::builder().method(method).uri(path);
    if let Some(k) = key {
        req = req.header("x-api-key", k);
    }
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = match body {
        Some(b) => req
            .header("content-type", "application/json")
            .body(Body::from(b.to_string()))
            .expect("request"),
        None => req.body(Body::empty()).expect("request"),
    };
    let resp = app.clone().oneshot(req).await.expect("infallible");
    let status = resp.status();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    let v = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).expect("JSON body")
    };
    (status, v)
}

#[tokio::test]
async fn answers_match_the_spec() {
    let spec = spec();
    let (app, key, _dir) = app().await;
    let missing = "hutch0123456789ab";
    // (method, path, spec path, key, body)
    let cases: Vec<(Method, String, &str, bool, Option<Value>)> = vec![
        (Method::GET, "/health".into(), "/health", false, None),
        (Method::GET, "/v2/sandboxes".into(), "/v2/sandboxes", false, None),
        (Method::GET, "/v2/sandboxes".into(), "/v2/sandboxes", true, None),
        (Method::GET, "/v2/sandboxes?state=stopped".into(), "/v2/sandboxes", true, None),
        (Method::GET, "/sandboxes".into(), "/sandboxes", true, None),
        (
            Method::POST,
            "/v2/sandboxes".into(),
            "/v2/sandboxes",
            true,
            Some(json!({"templateID": "no-such-template"})),
        ),
        (
            Method::POST,
            "/v2/sandboxes".into(),
            "/v2/sandboxes",
            true,
            Some(json!({"templateID": "base", "allow_internet_access": true})),
        ),
        (
            Method::POST,
            "/sandboxes".into(),
            "/sandboxes",
            true,
            Some(json!({"templateID": "base", "autoPause": true})),
        ),
        (Method::GET, format!("/sandboxes/{missing}"), "/sandboxes/{id}", true, None),
        (Method::DELETE, format!("/sandboxes/{missing}"), "/sandboxes/{id}", true, None),
        (
            Method::POST,
            format!("/v2/sandboxes/{missing}/connect"),
            "/v2/sandboxes/{id}/connect",
            true,
            Some(json!({"timeout": 60})),
        ),
        (
            Method::POST,
            format!("/sandboxes/{missing}/timeout"),
            "/sandboxes/{id}/timeout",
            true,
            Some(json!({"timeout": 60})),
        ),
        (
            Method::GET,
            format!("/sandboxes/{missing}/metrics"),
            "/sandboxes/{id}/metrics",
            true,
            None,
        ),
        (Method::POST, format!("/sandboxes/{missing}/pause"), "/sandboxes/{id}/pause", true, None),
        (
            Method::POST,
            format!("/sandboxes/{missing}/resume"),
            "/sandboxes/{id}/resume",
            true,
            None,
        ),
        (Method::GET, "/snapshots".into(), "/snapshots", true, None),
        (Method::DELETE, "/templates/abc".into(), "/templates/{id}", true, None),
    ];
    let mut statuses = Vec::new();
    for (method, path, spec_path, with_key, body) in cases {
        let (status, v) =
            call(&app, method.clone(), &path, with_key.then_some(&*key), &[], body).await;
        let op = &spec["paths"][spec_path][method.as_str().to_lowercase()];
        let documented = &op["responses"][status.as_str()];
        assert!(!documented.is_null(), "{method} {path}: status {status} is not documented");
        let documented = resolve(&spec, documented);
        if let Some(schema) = documented["content"]["application/json"]["schema"].as_object() {
            assert_valid(&spec, Value::Object(schema.clone()), &v, &format!("{method} {path}"));
        }
        statuses.push((path, status.as_u16()));
    }
    let expect =
        [401u16, 200, 400, 200, 404, 501, 501, 404, 404, 404, 404, 404, 501, 404, 501, 501];
    let got: Vec<u16> = statuses.iter().skip(1).map(|(_, s)| *s).collect();
    assert_eq!(got, expect, "{statuses:?}");
}

#[tokio::test]
async fn unknown_endpoints_and_gone_sandboxes_say_so() {
    let (app, key, _dir) = app().await;
    let (status, v) = call(&app, Method::POST, "/v3/templates", Some(&key), &[], None).await;
    assert_eq!(status, StatusCode::NOT_IMPLEMENTED);
    assert!(v["message"].as_str().unwrap_or_default().contains("/v3/templates"), "{v}");
    // the sandbox plane: a sandbox that does not exist is E2B's 502
    let headers = [("e2b-sandbox-id", "hutch0123456789ab"), ("e2b-sandbox-port", "49983")];
    let (status, v) = call(&app, Method::GET, "/health", None, &headers, None).await;
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    assert!(v["message"].as_str().unwrap_or_default().contains("was not found"), "{v}");
    assert_eq!(v["sandboxId"], "hutch0123456789ab");
}
