//! Code contexts: persistent interpreters inside a sandbox that run snippets and keep state
//! (variables, imports, functions, cwd) between them.
use std::collections::BTreeMap;

use async_trait::async_trait;
use serde::Serialize;

pub use hutch_proto::{CodeError, ContextInfo, RunSummary};

use crate::SandboxError;

/// A rich output: MIME type -> data (`text/plain`, `text/html`, `image/png` as base64, ...).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RichResult {
    /// The value of the snippet's last expression (others come from `display()` or plots).
    pub main: bool,
    pub data: BTreeMap<String, serde_json::Value>,
}

/// One event of a snippet run, as it happens.
#[derive(Debug, Clone, PartialEq)]
pub enum RunEvent {
    Stdout(Vec<u8>),
    Stderr(Vec<u8>),
    Result(RichResult),
    Error(CodeError),
}

/// A finished snippet run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunOutput {
    #[serde(serialize_with = "lossy")]
    pub stdout: Vec<u8>,
    #[serde(serialize_with = "lossy")]
    pub stderr: Vec<u8>,
    pub results: Vec<RichResult>,
    pub error: Option<CodeError>,
    #[serde(flatten)]
    pub summary: RunSummary,
}

fn lossy<S: serde::Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&String::from_utf8_lossy(b))
}

impl RunOutput {
    /// The main result's `text/plain`, if any.
    pub fn text(&self) -> Option<&str> {
        self.results
            .iter()
            .find(|r| r.main)
            .and_then(|r| r.data.get("text/plain"))
            .and_then(|v| v.as_str())
    }
}

/// What a sink receives while a snippet runs.
pub type RunSink<'a> = &'a mut (dyn FnMut(&RunEvent) + Send);

#[async_trait]
pub trait ContextOps: Send + Sync {
    /// Starts a context for `language` (`python`, `javascript`, `bash`).
    async fn create_context(
        &self,
        language: &str,
        cwd: Option<&str>,
        env: BTreeMap<String, String>,
    ) -> Result<ContextInfo, SandboxError>;
    /// Runs a snippet; events go to `sink` as they happen, and are collected in the output (up
    /// to `output_limit` bytes per stream).
    async fn run_code(
        &self,
        context_id: &str,
        code: &str,
        timeout_ms: Option<u64>,
        output_limit: u64,
        sink: RunSink<'_>,
    ) -> Result<RunOutput, SandboxError>;
    /// Interrupts the running snippet (the context keeps its state where the language allows).
    async fn interrupt_context(&self, context_id: &str) -> Result<(), SandboxError>;
    /// Replaces the interpreter with a fresh one; state is lost.
    async fn restart_context(&self, context_id: &str) -> Result<ContextInfo, SandboxError>;
    async fn delete_context(&self, context_id: &str) -> Result<(), SandboxError>;
    async fn list_contexts(&self) -> Result<Vec<ContextInfo>, SandboxError>;
}
