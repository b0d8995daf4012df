//! envd's `/files`: downloads, and uploads as multipart (one part per file, the file name being
//! its path, slashes included) or as a raw octet stream, gzip-compressed or not. Either the
//! access token or a signed URL authorizes a transfer.
use std::io::Read;

use axum::body::Bytes;
use axum::extract::{FromRequest, Multipart, Query, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use base64::Engine;
use serde::Deserialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::sync::Arc;

use crate::error::E2bError;
use crate::plane::{constant_time_eq, token_ok, user_allowed, Target};
use crate::E2b;

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct FilesQuery {
    path: Option<String>,
    username: Option<String>,
    signature: Option<String>,
    signature_expiration: Option<i64>,
}

/// `v1_` + base64(sha256("{path}:{operation}:{user}:{token}[:{expiration}]")), unpadded.
pub fn signature(path: &str, op: &str, user: &str, token: &str, exp: Option<i64>) -> String {
    let mut s = format!("{path}:{op}:{user}:{token}");
    if let Some(e) = exp {
        s.push_str(&format!(":{e}"));
    }
    let digest = Sha256::digest(s.as_bytes());
    format!("v1_{}", base64::engine::general_purpose::STANDARD_NO_PAD.encode(digest))
}

impl FilesQuery {
    pub fn from_pairs(pairs: &[(String, String)]) -> Option<Self> {
        let mut q = FilesQuery::default();
        for (k, v) in pairs {
            match k.as_str() {
                "path" => q.path = Some(v.clone()),
                "username" => q.username = Some(v.clone()),
                "signature" => q.signature = Some(v.clone()),
                "signature_expiration" => q.signature_expiration = Some(v.parse().ok()?),
                _ => {}
            }
        }
        Some(q)
    }

    /// The query carries a signature of `op` made with `token` (expired or not).
    pub fn signed_by(&self, op: &str, token: &str) -> bool {
        let Some(sig) = &self.signature else { return false };
        let want = signature(
            self.path.as_deref().unwrap_or_default(),
            op,
            self.username.as_deref().unwrap_or_default(),
            token,
            self.signature_expiration,
        );
        constant_time_eq(sig.as_bytes(), want.as_bytes())
    }
}

fn authorize(t: &Target, headers: &HeaderMap, q: &FilesQuery, op: &str) -> Result<(), E2bError> {
    user_allowed(q.username.as_deref().unwrap_or_default())?;
    if token_ok(t, headers) {
        return Ok(());
    }
    if q.signed_by(op, t.sandbox.token()) {
        if q.signature_expiration.is_some_and(|exp| exp < hutch_store::now_ms() / 1000) {
            return Err(E2bError::Unauthorized("signature is already expired".into()));
        }
        return Ok(());
    }
    Err(E2bError::Unauthorized(
        "unauthorized access, please provide a valid access token or method signing if supported"
            .into(),
    ))
}

fn file_err(e: hutch_core::SandboxError, path: &str) -> E2bError {
    match e.kind() {
        hutch_core::ErrorKind::NotFound => {
            E2bError::NotFound(format!("path '{path}' does not exist"))
        }
        _ => hutch_server::ApiError::from_sandbox(e, "file transfer").into(),
    }
}

pub async fn download(
    Extension(t): Extension<Target>,
    headers: HeaderMap,
    Query(q): Query<FilesQuery>,
) -> Result<Response, E2bError> {
    authorize(&t, &headers, &q, "read")?;
    let path = q.path.clone().ok_or_else(|| E2bError::BadRequest("path is required".into()))?;
    let sb = t.open().await?;
    let st = sb.stat(&path).await.map_err(|e| file_err(e, &path))?;
    if st.kind == hutch_proto::FileKind::Dir {
        return Err(E2bError::BadRequest(format!("path '{path}' is a directory")));
    }
    let data = sb.read_file(&path).await.map_err(|e| file_err(e, &path))?;
    if accepts_gzip(&headers) {
        let gz = gzip(&data).map_err(|e| {
            tracing::error!(error = %e, "gzip");
            E2bError::from(hutch_server::ApiError::internal())
        })?;
        let h = [
            (header::CONTENT_TYPE, "application/octet-stream"),
            (header::CONTENT_ENCODING, "gzip"),
        ];
        return Ok((h, gz).into_response());
    }
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], data).into_response())
}

/// `Accept-Encoding` names gzip (with a non-zero weight).
fn accepts_gzip(headers: &HeaderMap) -> bool {
    let Some(v) = headers.get(header::ACCEPT_ENCODING).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    v.split(',').any(|e| {
        let mut parts = e.split(';').map(str::trim);
        parts.next().is_some_and(|n| n.eq_ignore_ascii_case("gzip"))
            && !parts.any(|p| p.replace(' ', "") == "q=0")
    })
}

fn gzip(data: &[u8]) -> std::io::Result<Vec<u8>> {
    use std::io::Write;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(data)?;
    enc.finish()
}

/// Decompresses a gzip body, refusing to grow past `limit`.
fn gunzip(data: &[u8], limit: usize) -> Result<Vec<u8>, E2bError> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(data)
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| E2bError::BadRequest(format!("invalid gzip body: {e}")))?;
    if out.len() > limit {
        return Err(E2bError::from(hutch_server::ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            "the decompressed upload is too large",
        )));
    }
    Ok(out)
}

pub async fn upload(
    State(s): State<Arc<E2b>>,
    Extension(t): Extension<Target>,
    Query(q): Query<FilesQuery>,
    req: Request,
) -> Result<Json<Value>, E2bError> {
    let headers = req.headers().clone();
    authorize(&t, &headers, &q, "write")?;
    if headers.keys().any(|k| k.as_str().starts_with("x-metadata-")) {
        return Err(E2bError::unimplemented("file metadata (X-Metadata- headers)"));
    }
    let ctype = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    let gzip = headers
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("gzip"));
    let limit = s.daemon.cfg.max_upload;
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    if ctype.starts_with("multipart/form-data") {
        let mut mp = Multipart::from_request(req, &())
            .await
            .map_err(|e| E2bError::BadRequest(format!("invalid multipart body: {e}")))?;
        while let Some(field) =
            mp.next_field().await.map_err(|e| E2bError::BadRequest(format!("multipart: {e}")))?
        {
            let name = field.file_name().map(str::to_string);
            let data =
                field.bytes().await.map_err(|e| E2bError::BadRequest(format!("multipart: {e}")))?;
            let data = if gzip { gunzip(&data, limit)? } else { data.to_vec() };
            files.push((name.unwrap_or_default(), data));
        }
        if files.len() == 1 {
            if let Some(p) = &q.path {
                files[0].0 = p.clone();
            }
        }
    } else {
        let path = q
            .path
            .clone()
            .ok_or_else(|| E2bError::BadRequest("path is required for a raw upload".into()))?;
        let body = Bytes::from_request(req, &())
            .await
            .map_err(|e| E2bError::BadRequest(format!("reading the upload: {e}")))?;
        let data = if gzip { gunzip(&body, limit)? } else { body.to_vec() };
        files.push((path, data));
    }
    if files.is_empty() {
        return Err(E2bError::BadRequest("no file in the upload".into()));
    }
    let sb = t.open().await?;
    let mut out = Vec::new();
    for (path, data) in files {
        if path.is_empty() {
            return Err(E2bError::BadRequest("a file part has no file name (its path)".into()));
        }
        sb.write_file(&path, &data, None).await.map_err(|e| file_err(e, &path))?;
        let st = sb.stat(&path).await.map_err(|e| file_err(e, &path))?;
        let name = st.path.rsplit('/').next().unwrap_or_default().to_string();
        out.push(json!({"name": name, "type": "file", "path": st.path}));
    }
    Ok(Json(Value::Array(out)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_matches_the_sdk_form() {
        let s = signature("hello.txt", "read", "", "token", None);
        assert!(s.starts_with("v1_"));
        assert!(!s.ends_with('='));
        assert_ne!(s, signature("hello.txt", "write", "", "token", None));
        assert_ne!(s, signature("hello.txt", "read", "", "token", Some(1)));
    }

    #[test]
    fn gzip_is_sent_when_asked_for() {
        let mut h = HeaderMap::new();
        assert!(!accepts_gzip(&h));
        h.insert(header::ACCEPT_ENCODING, "gzip, deflate".parse().expect("header"));
        assert!(accepts_gzip(&h));
        h.insert(header::ACCEPT_ENCODING, "deflate, gzip;q=0".parse().expect("header"));
        assert!(!accepts_gzip(&h));
        let data = b"round trip ".repeat(100);
        assert_eq!(gunzip(&gzip(&data).expect("gzip"), 10_000).expect("gunzip"), data);
    }

    #[test]
    fn gzip_bodies_are_bounded() {
        use std::io::Write;
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(&[0u8; 4096]).expect("compress");
        let gz = enc.finish().expect("finish");
        assert_eq!(gunzip(&gz, 4096).expect("fits").len(), 4096);
        assert!(gunzip(&gz, 100).is_err());
        assert!(gunzip(b"not gzip", 100).is_err());
    }
}
