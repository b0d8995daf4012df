//! Typed protocol messages. Every message carries an `id`: requests pick it, responses echo it,
//! and the frames of one exec (output chunks, stdin, signals, the exit) all use the exec's id.
//!
//! Rules (VERSIONING.md): fields are only ever added, and added fields are `Option` or have a
//! `#[serde(default)]`, so an older peer ignores them and a newer peer copes with their absence.
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What to run: an argv vector (no shell) or a shell string run with `/bin/sh -c`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExecCommand {
    Argv(Vec<String>),
    Shell(String),
}

/// Where the process's stdin comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StdinMode {
    /// `/dev/null`.
    #[default]
    Null,
    /// The exec frame's body, then end of file.
    Inline,
    /// `stdin` frames with the exec's id until a `stdin_close`.
    Stream,
}

/// One command to run inside the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecRequest {
    pub command: ExecCommand,
    /// Added to (and overriding) the sandbox's environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory; the sandbox default when absent.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Wall-clock limit; the whole process tree is killed when it passes.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Bytes of stdout and of stderr (each) delivered before output is cut with a marker.
    #[serde(default = "default_output_limit")]
    pub output_limit: u64,
    #[serde(default)]
    pub stdin: StdinMode,
    /// Run on a pseudo-terminal of this size: stdin, stdout and stderr are the terminal (output
    /// comes as stdout), and the command leads a session with it as controlling terminal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pty: Option<PtySize>,
}

/// A terminal's size in character cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PtySize {
    pub rows: u16,
    pub cols: u16,
}

fn default_output_limit() -> u64 {
    1024 * 1024
}

impl ExecRequest {
    pub fn argv<I: IntoIterator<Item = S>, S: Into<String>>(argv: I) -> Self {
        Self::new(ExecCommand::Argv(argv.into_iter().map(Into::into).collect()))
    }

    pub fn shell(script: impl Into<String>) -> Self {
        Self::new(ExecCommand::Shell(script.into()))
    }

    pub fn new(command: ExecCommand) -> Self {
        Self {
            command,
            env: BTreeMap::new(),
            cwd: None,
            timeout_ms: None,
            output_limit: default_output_limit(),
            stdin: StdinMode::Null,
            pty: None,
        }
    }
}

/// How an exec ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecStatus {
    /// Exit code when the process exited normally.
    pub exit_code: Option<i32>,
    /// Signal number when the process was killed by a signal.
    pub signal: Option<i32>,
    /// The wall-clock timeout fired and the process tree was killed.
    #[serde(default)]
    pub timed_out: bool,
    /// Total bytes the process wrote to stdout / stderr (including what was cut).
    #[serde(default)]
    pub stdout_bytes: u64,
    #[serde(default)]
    pub stderr_bytes: u64,
    /// Output beyond `output_limit` was dropped.
    #[serde(default)]
    pub stdout_truncated: bool,
    #[serde(default)]
    pub stderr_truncated: bool,
    /// Time from spawn to exit inside the guest, in microseconds.
    #[serde(default)]
    pub duration_us: u64,
    /// Set by the host (never by the agent) when the sandbox's memory cgroup recorded an
    /// out-of-memory kill while the command ran.
    #[serde(default)]
    pub oom_killed: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileKind {
    File,
    Dir,
    Symlink,
    Other,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileStat {
    pub path: String,
    pub kind: FileKind,
    pub size: u64,
    pub mode: u32,
    /// Seconds since the epoch.
    pub mtime: i64,
    #[serde(default)]
    pub symlink_target: Option<String>,
    /// Owner uid and gid (agents before these fields leave them out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gid: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirEntry {
    pub name: String,
    pub kind: FileKind,
    pub size: u64,
}

/// Machine-readable error codes the agent returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    NotFound,
    PermissionDenied,
    AlreadyExists,
    InvalidRequest,
    SpawnFailed,
    NoSuchProcess,
    Unsupported,
    /// The sandbox's disk (workspace, /tmp) is full.
    NoSpace,
    Io,
    /// A code this side does not know (from a newer peer).
    #[serde(other)]
    Unknown,
}

/// A code context: a persistent interpreter (runner) inside the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextInfo {
    pub context_id: String,
    /// `python`, `javascript` or `bash`.
    pub language: String,
    /// The runner's pid inside the sandbox.
    pub pid: u32,
    /// Interpreter version.
    #[serde(default)]
    pub version: String,
    /// Snippets run so far.
    #[serde(default)]
    pub execution_count: u64,
    #[serde(default)]
    pub busy: bool,
    #[serde(default)]
    pub cwd: String,
    /// Microseconds from starting the interpreter to its ready signal (the cold part of
    /// creating the context).
    #[serde(default)]
    pub startup_us: u64,
}

/// An error raised by a snippet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodeError {
    pub name: String,
    pub value: String,
    #[serde(default)]
    pub traceback: Vec<String>,
}

/// How a snippet run ended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSummary {
    pub execution_count: u64,
    /// The wall-clock limit passed; the run was interrupted (and the context restarted if it
    /// did not stop).
    #[serde(default)]
    pub timed_out: bool,
    /// Set when the context had to be restarted (it died, or did not stop at its deadline): the
    /// reason, for people. Its state is gone.
    #[serde(default)]
    pub restarted: Option<String>,
    #[serde(default)]
    pub stdout_truncated: bool,
    #[serde(default)]
    pub stderr_truncated: bool,
    /// Bash: the snippet's exit status.
    #[serde(default)]
    pub exit_code: Option<i32>,
    #[serde(default)]
    pub duration_us: u64,
}

/// Host -> agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Request {
    /// First frame on a connection: the host's protocol generation.
    Hello {
        id: u64,
        protocol: u32,
        client: String,
    },
    Health {
        id: u64,
    },
    /// Start a command; with [`StdinMode::Inline`] the body is its stdin.
    Exec {
        id: u64,
        exec: ExecRequest,
    },
    /// Bytes for the stdin of exec `id` (body).
    Stdin {
        id: u64,
    },
    StdinClose {
        id: u64,
    },
    /// Send a signal to the process group of exec `id`.
    Signal {
        id: u64,
        exec_id: u64,
        signal: i32,
    },
    /// Resize the terminal of exec `exec_id` (started with `pty`); answered with `ok`.
    PtyResize {
        id: u64,
        exec_id: u64,
        size: PtySize,
    },
    /// Write the body to `path` (truncate, or append when `append`); parents are created.
    WriteFile {
        id: u64,
        path: String,
        #[serde(default)]
        mode: Option<u32>,
        #[serde(default)]
        append: bool,
        /// When not empty, the path must resolve (symlinks followed) inside one of these
        /// directories, else the request fails with `permission_denied`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        within: Vec<String>,
    },
    /// Read up to `len` bytes from `offset`.
    ReadFile {
        id: u64,
        path: String,
        offset: u64,
        len: u64,
        /// When not empty, the path must resolve (symlinks followed) inside one of these
        /// directories, else the request fails with `permission_denied`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        within: Vec<String>,
    },
    ListDir {
        id: u64,
        path: String,
        /// When not empty, the path must resolve (symlinks followed) inside one of these
        /// directories, else the request fails with `permission_denied`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        within: Vec<String>,
    },
    Stat {
        id: u64,
        path: String,
        /// When not empty, the path must resolve (symlinks followed) inside one of these
        /// directories, else the request fails with `permission_denied`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        within: Vec<String>,
    },
    Remove {
        id: u64,
        path: String,
        #[serde(default)]
        recursive: bool,
        /// When not empty, the path must resolve (symlinks followed) inside one of these
        /// directories, else the request fails with `permission_denied`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        within: Vec<String>,
    },
    MakeDir {
        id: u64,
        path: String,
        #[serde(default)]
        parents: bool,
        /// When not empty, the path must resolve (symlinks followed) inside one of these
        /// directories, else the request fails with `permission_denied`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        within: Vec<String>,
    },
    Rename {
        id: u64,
        from: String,
        to: String,
        /// When not empty, the path must resolve (symlinks followed) inside one of these
        /// directories, else the request fails with `permission_denied`.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        within: Vec<String>,
    },
    /// Return the sandbox to a clean state for its next user: kill every process but the agent,
    /// remove System V IPC objects, and empty the `wipe` directories (their contents, not the
    /// directories). Answered by `reset_ok` saying what is left (a clean sandbox: nothing).
    Reset {
        id: u64,
        #[serde(default)]
        wipe: Vec<String>,
    },
    /// Start a code context (`language`: python, javascript or bash).
    ContextCreate {
        id: u64,
        language: String,
        #[serde(default)]
        cwd: Option<String>,
        #[serde(default)]
        env: BTreeMap<String, String>,
    },
    /// Run the body (UTF-8 code) in a context. Answered by `stdout`/`stderr` chunks,
    /// `context_result`s, at most one `context_error`, then `context_done`.
    ContextRun {
        id: u64,
        context_id: String,
        #[serde(default)]
        timeout_ms: Option<u64>,
        #[serde(default = "default_output_limit")]
        output_limit: u64,
    },
    /// Interrupt the snippet running in a context (the context keeps its state where the
    /// language allows).
    ContextInterrupt {
        id: u64,
        context_id: String,
    },
    /// Replace the context's interpreter with a fresh one (state is lost).
    ContextRestart {
        id: u64,
        context_id: String,
    },
    ContextDelete {
        id: u64,
        context_id: String,
    },
    ContextList {
        id: u64,
    },
    /// Kill every process and exit: the sandbox stops.
    Shutdown {
        id: u64,
    },
}

impl Request {
    pub fn id(&self) -> u64 {
        match self {
            Request::Hello { id, .. }
            | Request::Health { id }
            | Request::Exec { id, .. }
            | Request::Stdin { id }
            | Request::StdinClose { id }
            | Request::Signal { id, .. }
            | Request::PtyResize { id, .. }
            | Request::WriteFile { id, .. }
            | Request::ReadFile { id, .. }
            | Request::ListDir { id, .. }
            | Request::Stat { id, .. }
            | Request::Remove { id, .. }
            | Request::MakeDir { id, .. }
            | Request::Rename { id, .. }
            | Request::Reset { id, .. }
            | Request::ContextCreate { id, .. }
            | Request::ContextRun { id, .. }
            | Request::ContextInterrupt { id, .. }
            | Request::ContextRestart { id, .. }
            | Request::ContextDelete { id, .. }
            | Request::ContextList { id }
            | Request::Shutdown { id } => *id,
        }
    }
}

/// Agent -> host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Response {
    HelloOk {
        id: u64,
        protocol: u32,
        agent_version: String,
        features: Vec<String>,
        /// Microseconds since the agent process started (lets the host split its start time
        /// into engine start and agent start).
        #[serde(default)]
        uptime_us: u64,
    },
    HealthOk {
        id: u64,
        uptime_ms: u64,
        processes: u32,
    },
    /// The command of exec `id` is running as `pid` (guest pid namespace).
    Started {
        id: u64,
        pid: u32,
    },
    /// A chunk of stdout / stderr of exec `id` (body).
    Stdout {
        id: u64,
    },
    Stderr {
        id: u64,
    },
    Exited {
        id: u64,
        status: ExecStatus,
    },
    Ok {
        id: u64,
    },
    /// File bytes (body) read at `offset`; `eof` when the file ends within this chunk.
    FileData {
        id: u64,
        offset: u64,
        eof: bool,
        size: u64,
    },
    Entries {
        id: u64,
        entries: Vec<DirEntry>,
    },
    StatOk {
        id: u64,
        stat: FileStat,
    },
    /// A context was created (or restarted).
    ContextCreated {
        id: u64,
        context: ContextInfo,
    },
    /// A rich output of a run: MIME type -> data (`main`: the value of the last expression).
    ContextResult {
        id: u64,
        main: bool,
        data: BTreeMap<String, serde_json::Value>,
    },
    ContextError {
        id: u64,
        error: CodeError,
    },
    ContextDone {
        id: u64,
        summary: RunSummary,
    },
    Contexts {
        id: u64,
        contexts: Vec<ContextInfo>,
    },
    ResetOk {
        id: u64,
        /// Processes other than the agent still present.
        processes_left: u32,
        /// Entries still present in the wiped directories.
        entries_left: u32,
    },
    Error {
        id: u64,
        code: ErrorCode,
        message: String,
    },
}

impl Response {
    pub fn id(&self) -> u64 {
        match self {
            Response::HelloOk { id, .. }
            | Response::HealthOk { id, .. }
            | Response::Started { id, .. }
            | Response::Stdout { id }
            | Response::Stderr { id }
            | Response::Exited { id, .. }
            | Response::Ok { id }
            | Response::FileData { id, .. }
            | Response::Entries { id, .. }
            | Response::StatOk { id, .. }
            | Response::ResetOk { id, .. }
            | Response::ContextCreated { id, .. }
            | Response::ContextResult { id, .. }
            | Response::ContextError { id, .. }
            | Response::ContextDone { id, .. }
            | Response::Contexts { id, .. }
            | Response::Error { id, .. } => *id,
        }
    }
}
