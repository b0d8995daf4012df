//! Request and response bodies of the API (the contract is spec/openapi.yaml). Requests deny
//! unknown fields, so a typo is an error instead of a silently ignored setting.
use std::collections::BTreeMap;

use base64::Engine;
use hutch_core::{ExecResult, Limits};
use hutch_store::SandboxRow;
use serde::{Deserialize, Serialize};

/// Engine, image, limits and environment: everything that makes sandboxes interchangeable
/// (a pool hands out sandboxes of one shape).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxShape {
    /// `container` (default) or `process` (no isolation; benchmark baseline, admin only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
    /// OCI runtime of the container backend: `crun` (default) or `runc`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// `host` (default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// A root filesystem directory on the daemon's host (admin only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rootfs: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<LimitsBody>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Code contexts to start with the sandbox (`python`, `javascript`, `bash`), so the first
    /// snippet is warm too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contexts: Vec<String>,
}

/// Limits; any field left out keeps hutch's secure default.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsBody {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_bytes: Option<u64>,
}

impl LimitsBody {
    pub fn apply(&self) -> Limits {
        let d = Limits::default();
        Limits {
            memory_bytes: self.memory_bytes.unwrap_or(d.memory_bytes),
            cpus: self.cpus.unwrap_or(d.cpus),
            pids: self.pids.unwrap_or(d.pids),
            timeout_ms: self.timeout_ms.unwrap_or(d.timeout_ms),
            output_bytes: self.output_bytes.unwrap_or(d.output_bytes),
            workspace_bytes: self.workspace_bytes.unwrap_or(d.workspace_bytes),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateSandbox {
    #[serde(default)]
    pub backend: Option<String>,
    #[serde(default)]
    pub runtime: Option<String>,
    #[serde(default)]
    pub image: Option<String>,
    #[serde(default)]
    pub rootfs: Option<String>,
    #[serde(default)]
    pub limits: Option<LimitsBody>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Code contexts to start with the sandbox (`python`, `javascript`, `bash`).
    #[serde(default)]
    pub contexts: Vec<String>,
    /// Labels to filter by in listings.
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    /// Seconds until the sandbox is stopped; 0: never (admin only). Default: the daemon's.
    #[serde(default)]
    pub ttl_seconds: Option<u64>,
    /// Take a warm sandbox from this pool (the shape fields must then be left out).
    #[serde(default)]
    pub pool: Option<String>,
    /// Another guest account than hutch's default (uid 1000 in /workspace). Not part of the
    /// HTTP API: set by in-process front ends such as the E2B-compatible API.
    #[serde(skip)]
    pub guest_user: Option<GuestUser>,
}

/// A guest account a sandbox runs as: its ids and its home, which becomes the working directory
/// (a tmpfs) and `HOME`. The file API is then bounded by the account's permissions only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestUser {
    pub uid: u32,
    pub gid: u32,
    pub home: String,
}

impl CreateSandbox {
    pub fn shape(&self) -> SandboxShape {
        SandboxShape {
            backend: self.backend.clone(),
            runtime: self.runtime.clone(),
            image: self.image.clone(),
            rootfs: self.rootfs.clone(),
            limits: self.limits.clone(),
            env: self.env.clone(),
            contexts: self.contexts.clone(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetTtl {
    pub ttl_seconds: u64,
}

/// A sandbox as the API shows it.
#[derive(Debug, Clone, Serialize)]
pub struct SandboxView {
    pub id: String,
    pub state: String,
    pub backend: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    pub metadata: BTreeMap<String, String>,
    pub created_at: i64,
    pub last_used_at: i64,
    pub expires_at: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped_at: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    pub spec: serde_json::Value,
    /// Lifecycle phase timings in milliseconds, when this daemon started the sandbox.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timings: Option<serde_json::Value>,
    /// Code contexts running in it (on create).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contexts: Option<Vec<hutch_core::ContextInfo>>,
}

impl SandboxView {
    pub fn from_row(r: SandboxRow) -> Self {
        Self {
            spec: serde_json::from_str(&r.spec_json).unwrap_or(serde_json::Value::Null),
            id: r.id,
            state: r.state.as_str().to_string(),
            backend: r.backend,
            pool: r.pool,
            metadata: r.metadata,
            created_at: r.created_at,
            last_used_at: r.last_used_at,
            expires_at: r.expires_at,
            stopped_at: r.stopped_at,
            stop_reason: r.stop_reason,
            timings: None,
            contexts: None,
        }
    }
}

/// A command to run. Exactly one of `command` (argv, no shell) and `shell`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecBody {
    #[serde(default)]
    pub command: Option<Vec<String>>,
    #[serde(default)]
    pub shell: Option<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub cwd: Option<String>,
    /// Capped at the sandbox's timeout limit.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Standard input as text.
    #[serde(default)]
    pub stdin: Option<String>,
    /// Standard input as base64 (binary).
    #[serde(default)]
    pub stdin_b64: Option<String>,
}

impl ExecBody {
    pub fn to_request(&self) -> Result<(hutch_core::ExecRequest, Vec<u8>), String> {
        let mut req = match (&self.command, &self.shell) {
            (Some(argv), None) if !argv.is_empty() => hutch_core::ExecRequest::argv(argv.clone()),
            (None, Some(s)) if !s.is_empty() => hutch_core::ExecRequest::shell(s.clone()),
            (Some(_), Some(_)) => {
                return Err("give either command (argv) or shell, not both".into())
            }
            _ => {
                return Err(
                    "command (a non-empty argv array) or shell (a string) is required".into()
                )
            }
        };
        req.env = self.env.clone();
        req.cwd = self.cwd.clone();
        req.timeout_ms = self.timeout_ms;
        let stdin = match (&self.stdin, &self.stdin_b64) {
            (Some(_), Some(_)) => return Err("give either stdin or stdin_b64, not both".into()),
            (Some(t), None) => t.as_bytes().to_vec(),
            (None, Some(b)) => base64::engine::general_purpose::STANDARD
                .decode(b)
                .map_err(|e| format!("stdin_b64: {e}"))?,
            (None, None) => Vec::new(),
        };
        if !stdin.is_empty() {
            req.stdin = hutch_core::StdinMode::Inline;
        }
        Ok((req, stdin))
    }

    /// What the audit log and process listings show of the command.
    pub fn summary(&self) -> serde_json::Value {
        match (&self.command, &self.shell) {
            (Some(a), _) => serde_json::json!({ "command": a }),
            (_, Some(s)) => serde_json::json!({ "shell": s }),
            _ => serde_json::Value::Null,
        }
    }
}

/// Output bytes as JSON: text always (invalid UTF-8 replaced); base64 too when not valid UTF-8.
pub fn text_and_b64(bytes: &[u8]) -> (String, Option<String>) {
    match std::str::from_utf8(bytes) {
        Ok(s) => (s.to_string(), None),
        Err(_) => (
            String::from_utf8_lossy(bytes).into_owned(),
            Some(base64::engine::general_purpose::STANDARD.encode(bytes)),
        ),
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ExecResultView {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub oom_killed: bool,
    pub stdout: String,
    pub stderr: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdout_b64: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr_b64: Option<String>,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
    pub duration_ms: f64,
}

impl ExecResultView {
    pub fn new(r: &ExecResult) -> Self {
        let (stdout, stdout_b64) = text_and_b64(&r.stdout);
        let (stderr, stderr_b64) = text_and_b64(&r.stderr);
        let s = &r.status;
        Self {
            exit_code: s.exit_code,
            signal: s.signal,
            timed_out: s.timed_out,
            oom_killed: s.oom_killed,
            stdout,
            stderr,
            stdout_b64,
            stderr_b64,
            stdout_truncated: s.stdout_truncated,
            stderr_truncated: s.stderr_truncated,
            stdout_bytes: s.stdout_bytes,
            stderr_bytes: s.stderr_bytes,
            duration_ms: s.duration_us as f64 / 1000.0,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignalBody {
    pub signal: i32,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathQuery {
    pub path: String,
    #[serde(default)]
    pub recursive: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MkdirBody {
    pub path: String,
    #[serde(default)]
    pub parents: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MoveBody {
    pub from: String,
    pub to: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateKey {
    pub name: String,
    #[serde(default)]
    pub admin: bool,
    #[serde(default)]
    pub max_sandboxes: Option<u32>,
    #[serde(default)]
    pub rate_per_minute: Option<u32>,
    #[serde(default)]
    pub format: KeyFormat,
}

/// The form of a key's secret. Both work everywhere; `e2b` is for the E2B SDKs, some of which
/// refuse keys that do not look like `e2b_<hex>`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyFormat {
    #[default]
    Hutch,
    E2b,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    #[serde(default)]
    pub state: Option<String>,
    #[serde(default)]
    pub pool: Option<String>,
    #[serde(default)]
    pub backend: Option<String>,
    /// `key:value` labels, comma-separated; all must match.
    #[serde(default)]
    pub metadata: Option<String>,
    #[serde(default)]
    pub include_stopped: bool,
    #[serde(default)]
    pub limit: Option<usize>,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct LimitQuery {
    #[serde(default)]
    pub limit: Option<usize>,
}

/// How a command ended, as every endpoint reports it (durations in milliseconds).
pub fn status_json(s: &hutch_core::ExecStatus) -> serde_json::Value {
    serde_json::json!({
        "exit_code": s.exit_code,
        "signal": s.signal,
        "timed_out": s.timed_out,
        "oom_killed": s.oom_killed,
        "stdout_truncated": s.stdout_truncated,
        "stderr_truncated": s.stderr_truncated,
        "stdout_bytes": s.stdout_bytes,
        "stderr_bytes": s.stderr_bytes,
        "duration_ms": s.duration_us as f64 / 1000.0,
    })
}
