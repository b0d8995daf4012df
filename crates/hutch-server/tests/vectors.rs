//! The SDKs' shared test vectors (spec/test-vectors/sdk-v1.json) must describe the API as the
//! contract (spec/openapi.yaml) does: every request's method and path is an operation, its body
//! kind is the one the operation takes, and its response status is documented. So a drift in
//! the server spec, the vectors, or (through their own tests) an SDK fails CI.
use serde_json::Value;

fn load() -> (Value, serde_yaml::Value) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let vectors: Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("spec/test-vectors/sdk-v1.json")).expect("vectors"),
    )
    .expect("json");
    let spec: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(root.join("spec/openapi.yaml")).expect("spec"),
    )
    .expect("yaml");
    (vectors, spec)
}

/// Matches a concrete path against the spec's templated paths (`{id}` matches one segment).
fn find_path<'a>(
    spec: &'a serde_yaml::Value,
    path: &str,
) -> Option<(&'a str, &'a serde_yaml::Value)> {
    let segs: Vec<&str> = path.split('/').collect();
    spec["paths"].as_mapping()?.iter().find_map(|(k, v)| {
        let t = k.as_str()?;
        let ts: Vec<&str> = t.split('/').collect();
        (ts.len() == segs.len()
            && ts
                .iter()
                .zip(&segs)
                .all(|(a, b)| a == b || (a.starts_with('{') && a.ends_with('}') && !b.is_empty())))
        .then_some((t, v))
    })
}

#[test]
fn every_vector_is_an_operation_of_the_contract() {
    let (vectors, spec) = load();
    let ops = vectors["operations"].as_array().expect("operations");
    assert!(ops.len() >= 10, "too few vectors");
    for op in ops {
        let name = op["name"].as_str().expect("name");
        let req = &op["request"];
        let method = req["method"].as_str().expect("method").to_ascii_lowercase();
        let full = req["path"].as_str().expect("path");
        let path = full.split('?').next().unwrap_or(full);
        let (template, item) = find_path(&spec, path)
            .unwrap_or_else(|| panic!("{name}: {path} is not in spec/openapi.yaml"));
        let operation = &item[method.as_str()];
        assert!(operation.is_mapping(), "{name}: {method} {template} is not an operation");
        let body = &operation["requestBody"]["content"];
        if req.get("json").is_some() {
            assert!(!body["application/json"].is_null(), "{name}: {template} takes no JSON body");
        }
        if req.get("body_b64").is_some() {
            assert!(
                !body["application/octet-stream"].is_null(),
                "{name}: {template} takes no raw body"
            );
        }
        // query parameters the vector sends are documented
        if let Some(q) = full.split_once('?').map(|(_, q)| q) {
            let params: Vec<String> = operation["parameters"]
                .as_sequence()
                .into_iter()
                .flatten()
                .filter_map(|p| {
                    p["name"].as_str().map(String::from).or_else(|| {
                        p["$ref"].as_str().and_then(|r| r.rsplit('/').next()).map(String::from)
                    })
                })
                .collect();
            for kv in q.split('&') {
                let key = kv.split('=').next().unwrap_or("");
                assert!(
                    params.iter().any(|p| p.eq_ignore_ascii_case(key)
                        || p.to_ascii_lowercase().contains(&key.to_ascii_lowercase())),
                    "{name}: query {key} not documented for {template}: {params:?}"
                );
            }
        }
        let status = op["response"]["status"].as_u64().expect("status").to_string();
        assert!(
            !operation["responses"][status.as_str()].is_null(),
            "{name}: status {status} not documented for {method} {template}"
        );
    }
}

#[test]
fn every_error_code_in_the_vectors_is_a_documented_code() {
    let (vectors, spec) = load();
    let codes: Vec<&str> = spec["components"]["schemas"]["Error"]["properties"]["code"]["enum"]
        .as_sequence()
        .expect("Error.code enum")
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    for e in vectors["errors"].as_array().expect("errors") {
        let code = e["response"]["json"]["code"].as_str().expect("code");
        assert!(codes.contains(&code), "error code {code} is not in the spec");
        assert!(e["class"].as_str().is_some_and(|c| c.ends_with("Error")), "{e}");
    }
}
