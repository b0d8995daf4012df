//! The commands that talk to the daemon (`hutch serve`): `create`, `exec`, `ls`, `rm`, `ttl`,
//! `cp`, `spawn`, `ps`, `logs`, `kill`, `pool` and `key`. Each turns its flags into API calls and
//! prints text or a table, or with `--json` the API's JSON. Errors are one line on stderr: an API
//! error exits 1 (2 for a bad request), an unreachable daemon 125.
use std::collections::BTreeMap;
use std::io::{self, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use clap::{Args, Subcommand, ValueEnum};
use hutch_core::units::parse_duration;
use hutch_core::units::parse_size;
use hyper::body::Bytes;
use hyper::StatusCode;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::backends::{BackendName, RuntimeName};
use crate::client::{encode, success, Client, ClientError, Endpoint, EventStream};
use crate::exit;
use crate::serve::DEFAULT_SOCKET;

#[derive(Debug, Subcommand)]
pub enum RemoteCmd {
    /// Create a sandbox on the daemon and print its id
    Create(CreateArgs),
    /// Run a command in a sandbox; its output and exit code pass through
    Exec(ExecArgs),
    /// List sandboxes
    Ls(LsArgs),
    /// Delete sandboxes
    Rm(RmArgs),
    /// Set when a sandbox expires, counted from now
    Ttl(TtlArgs),
    /// Copy a file into or out of a sandbox (ID:/path names the sandbox side)
    Cp(CpArgs),
    /// Start a background process in a sandbox and print its pid
    Spawn(SpawnArgs),
    /// List a sandbox's background processes
    Ps(PsArgs),
    /// Print the output of a background process
    Logs(LogsArgs),
    /// Send a signal to a background process
    Kill(KillArgs),
    /// Manage warm pools
    Pool(PoolArgs),
    /// Manage API keys
    Key(KeyArgs),
    /// An interactive session with a code context (state persists between inputs)
    Repl(ReplArgs),
}

/// Flags every daemon command takes.
#[derive(Debug, Args)]
pub struct Common {
    /// The daemon: unix:///path/to.sock or http://host:port [default: unix:///run/hutch/hutch.sock]
    #[arg(long, env = "HUTCH_URL", value_name = "URL", global = true)]
    url: Option<String>,
    /// Print the API's JSON instead of text or a table
    #[arg(long, global = true)]
    json: bool,
}

/// What a sandbox runs on and with: the fields of a sandbox or pool template. Left out, each
/// keeps the daemon's default.
#[derive(Debug, Args)]
pub struct ShapeArgs {
    /// Isolation backend [default: container]
    #[arg(long, value_enum)]
    backend: Option<BackendName>,
    /// OCI runtime of the container backend [default: crun]
    #[arg(long, value_enum)]
    runtime: Option<RuntimeName>,
    /// Memory limit (e.g. 512m, 1g) [default: 512m]
    #[arg(long)]
    memory: Option<String>,
    /// CPU limit in CPUs (e.g. 0.5, 2) [default: 1]
    #[arg(long)]
    cpus: Option<f64>,
    /// Processes and threads at most [default: 64]
    #[arg(long)]
    pids: Option<u64>,
    /// Longest a command may run (e.g. 30s, 10m) [default: 30s]
    #[arg(long)]
    timeout: Option<String>,
    /// Environment variable of every command, KEY=VALUE (repeatable)
    #[arg(short, long = "env", value_name = "KEY=VALUE")]
    env: Vec<String>,
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    #[command(flatten)]
    common: Common,
    #[command(flatten)]
    shape: ShapeArgs,
    /// Label KEY=VALUE to filter by with `hutch ls --metadata` (repeatable)
    #[arg(long = "metadata", value_name = "KEY=VALUE")]
    metadata: Vec<String>,
    /// Stop the sandbox after this long (e.g. 300s, 2h; 0: never, admin only) [default: the daemon's]
    #[arg(long)]
    ttl: Option<String>,
    /// Take a warm sandbox from this pool (the pool's template sets the shape)
    #[arg(long, conflicts_with_all = ["backend", "runtime", "memory", "cpus", "pids", "timeout", "env"])]
    pool: Option<String>,
}

/// A command to run in a sandbox.
#[derive(Debug, Args)]
pub struct CommandArgs {
    /// Environment variable for the command, KEY=VALUE (repeatable)
    #[arg(short, long = "env", value_name = "KEY=VALUE")]
    env: Vec<String>,
    /// Working directory in the sandbox [default: /workspace]
    #[arg(long, value_name = "DIR")]
    cwd: Option<String>,
    /// Wall-clock limit of the command (e.g. 30s; capped at the sandbox's limit)
    #[arg(long)]
    timeout: Option<String>,
    /// Run CMD as one shell string with /bin/sh -c
    #[arg(long)]
    shell: bool,
    /// The command and its arguments
    #[arg(required = true, value_name = "CMD")]
    cmd: Vec<String>,
}

#[derive(Debug, Args)]
#[command(trailing_var_arg = true)]
pub struct ExecArgs {
    #[command(flatten)]
    common: Common,
    /// Print output as it arrives instead of when the command ends
    #[arg(long)]
    stream: bool,
    /// Run CMD as code in this code context (see `hutch repl`) instead of as a command
    #[arg(long, value_name = "CONTEXT")]
    context: Option<String>,
    /// Run CMD as code in a new context of this language (python, javascript, bash); its id
    /// is printed on stderr for later `--context` calls
    #[arg(long, value_name = "LANG")]
    lang: Option<String>,
    /// The sandbox
    id: String,
    #[command(flatten)]
    command: CommandArgs,
}

#[derive(Debug, Args)]
pub struct ReplArgs {
    #[command(flatten)]
    common: Common,
    /// Language of the context: python, javascript or bash
    #[arg(long, default_value = "python")]
    lang: String,
    /// Use this sandbox (default: create one, and delete it at the end)
    #[arg(long, value_name = "ID")]
    sandbox: Option<String>,
    /// Use this existing context in the sandbox
    #[arg(long, value_name = "CONTEXT", requires = "sandbox")]
    context: Option<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum StateArg {
    Cold,
    Warming,
    Warm,
    Running,
    Waiting,
    Stopped,
}

#[derive(Debug, Args)]
pub struct LsArgs {
    #[command(flatten)]
    common: Common,
    /// Only sandboxes in this state
    #[arg(long, value_enum)]
    state: Option<StateArg>,
    /// Only members of this pool
    #[arg(long)]
    pool: Option<String>,
    /// Only sandboxes labelled KEY=VALUE (repeatable; all must match)
    #[arg(long = "metadata", value_name = "KEY=VALUE")]
    metadata: Vec<String>,
    /// Include stopped sandboxes
    #[arg(short, long)]
    all: bool,
}

#[derive(Debug, Args)]
pub struct RmArgs {
    #[command(flatten)]
    common: Common,
    /// The sandboxes
    #[arg(required = true, value_name = "ID")]
    ids: Vec<String>,
}

#[derive(Debug, Args)]
pub struct TtlArgs {
    #[command(flatten)]
    common: Common,
    /// The sandbox
    id: String,
    /// Time to live from now (e.g. 10m, 2h; 0: never expire, admin only)
    ttl: String,
}

#[derive(Debug, Args)]
pub struct CpArgs {
    #[command(flatten)]
    common: Common,
    /// A local file, - for stdin, or ID:/path in a sandbox
    src: String,
    /// A local file or directory, - for stdout, or ID:/path in a sandbox
    dst: String,
}

#[derive(Debug, Args)]
#[command(trailing_var_arg = true)]
pub struct SpawnArgs {
    #[command(flatten)]
    common: Common,
    /// The sandbox
    id: String,
    #[command(flatten)]
    command: CommandArgs,
}

#[derive(Debug, Args)]
pub struct PsArgs {
    #[command(flatten)]
    common: Common,
    /// The sandbox
    id: String,
}

#[derive(Debug, Args)]
pub struct LogsArgs {
    #[command(flatten)]
    common: Common,
    /// The sandbox
    id: String,
    /// The background process (from `hutch spawn` or `hutch ps`)
    pid: u32,
    /// Print the output so far, then live until the process ends, and exit with its exit code
    #[arg(short, long)]
    follow: bool,
}

#[derive(Debug, Args)]
pub struct KillArgs {
    #[command(flatten)]
    common: Common,
    /// The sandbox
    id: String,
    /// The background process
    pid: u32,
    /// Signal number or name (TERM, KILL, INT, HUP, QUIT, USR1, USR2, STOP, CONT)
    #[arg(short, long, default_value = "15")]
    signal: String,
}

#[derive(Debug, Args)]
pub struct PoolArgs {
    #[command(flatten)]
    common: Common,
    #[command(subcommand)]
    cmd: PoolCmd,
}

#[derive(Debug, Subcommand)]
enum PoolCmd {
    /// Create a pool that keeps SIZE sandboxes of one shape started and ready
    Create(PoolCreateArgs),
    /// List pools with their members and hit counts
    Ls,
    /// Delete pools (their warm sandboxes are destroyed)
    Rm {
        #[arg(required = true, value_name = "NAME")]
        names: Vec<String>,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ReuseArg {
    /// Destroy a sandbox when its user deletes it; the pool starts a new one
    Fresh,
    /// Wipe a deleted sandbox and put it back warm (faster)
    Recycle,
}

#[derive(Debug, Args)]
struct PoolCreateArgs {
    /// Pool name: letters, digits, '-' and '_'
    name: String,
    /// Warm sandboxes to keep ready
    #[arg(long)]
    size: usize,
    /// Sandboxes of this pool (warm and in use) at most [default: the daemon's limit]
    #[arg(long)]
    max: Option<usize>,
    /// What happens to a sandbox its user deletes [default: fresh]
    #[arg(long, value_enum)]
    reuse: Option<ReuseArg>,
    #[command(flatten)]
    shape: ShapeArgs,
}

#[derive(Debug, Args)]
pub struct KeyArgs {
    #[command(flatten)]
    common: Common,
    #[command(subcommand)]
    cmd: KeyCmd,
}

#[derive(Debug, Subcommand)]
enum KeyCmd {
    /// Create an API key and print its secret (shown only this once)
    Create {
        /// A name to recognise the key by
        name: String,
        /// May manage keys and pools and see every sandbox
        #[arg(long)]
        admin: bool,
        /// Live sandboxes the key may own at once
        #[arg(long, value_name = "N")]
        max_sandboxes: Option<u32>,
        /// Requests per minute at most
        #[arg(long, value_name = "N")]
        rate: Option<u32>,
        /// Make the secret look like an E2B key (e2b_<hex>), for the E2B SDKs
        #[arg(long)]
        e2b: bool,
    },
    /// List API keys (never their secrets)
    Ls,
    /// Revoke API keys
    Rm {
        #[arg(required = true, value_name = "ID")]
        ids: Vec<String>,
    },
}

/// Why a command failed, mapped to one stderr line and an exit code by [`report`].
enum Failure {
    /// Bad flags (exit 2).
    Usage(String),
    /// A local file or stream problem (exit 1).
    Local(String),
    Client(ClientError),
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Self {
        Failure::Client(e)
    }
}

type Outcome<T = ExitCode> = Result<T, Failure>;

pub async fn main(cmd: RemoteCmd) -> ExitCode {
    let result = match cmd {
        RemoteCmd::Create(a) => create(a).await,
        RemoteCmd::Exec(a) => exec(a).await,
        RemoteCmd::Ls(a) => ls(a).await,
        RemoteCmd::Rm(a) => rm(a).await,
        RemoteCmd::Ttl(a) => ttl(a).await,
        RemoteCmd::Cp(a) => cp(a).await,
        RemoteCmd::Spawn(a) => spawn(a).await,
        RemoteCmd::Ps(a) => ps(a).await,
        RemoteCmd::Logs(a) => logs(a).await,
        RemoteCmd::Kill(a) => kill(a).await,
        RemoteCmd::Pool(a) => pool(a).await,
        RemoteCmd::Key(a) => key(a).await,
        RemoteCmd::Repl(a) => repl(a).await,
    };
    result.unwrap_or_else(report)
}

fn report(f: Failure) -> ExitCode {
    match f {
        Failure::Usage(m) => {
            eprintln!("hutch: {m}");
            ExitCode::from(exit::USAGE)
        }
        Failure::Local(m) => {
            eprintln!("hutch: {m}");
            ExitCode::FAILURE
        }
        Failure::Client(e) => report_client(&e),
    }
}

/// The error and its sources on one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        s.push_str(&format!(": {c}"));
        src = c.source();
    }
    s
}

fn report_client(e: &ClientError) -> ExitCode {
    match e {
        ClientError::Unreachable { endpoint, source } => {
            let start = endpoint.serve_hint(DEFAULT_SOCKET);
            match source.kind() {
                io::ErrorKind::PermissionDenied => eprintln!(
                    "hutch: cannot reach the hutch daemon at {endpoint}: permission denied (its socket is for its owner only: run as root, or use its TCP address in HUTCH_URL with HUTCH_API_KEY)"
                ),
                io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => eprintln!(
                    "hutch: cannot reach the hutch daemon at {endpoint} (is it running? start it with: {start})"
                ),
                _ => eprintln!(
                    "hutch: cannot reach the hutch daemon at {endpoint}: {source} (is it running? start it with: {start})"
                ),
            }
            ExitCode::from(exit::HUTCH)
        }
        ClientError::BadUrl { .. } => {
            eprintln!("hutch: {e}");
            ExitCode::from(exit::USAGE)
        }
        ClientError::Api { status, .. } => {
            eprintln!("hutch: {e}");
            if *status == StatusCode::BAD_REQUEST {
                ExitCode::from(exit::USAGE)
            } else {
                ExitCode::FAILURE
            }
        }
        ClientError::Connection { .. } | ClientError::Protocol(_) => {
            eprintln!("hutch: {}", chain(e));
            ExitCode::from(exit::HUTCH)
        }
    }
}

fn client(c: &Common) -> Outcome<Client> {
    let endpoint = match c.url.as_deref().map(str::trim) {
        Some(u) if !u.is_empty() => Endpoint::parse(u)?,
        _ => Endpoint::Unix(DEFAULT_SOCKET.into()),
    };
    let key =
        std::env::var("HUTCH_API_KEY").ok().map(|k| k.trim().to_string()).filter(|k| !k.is_empty());
    Ok(Client::new(endpoint, key))
}

// ---- parsing helpers -----------------------------------------------------------------------

fn key_values(flag: &str, items: &[String]) -> Outcome<BTreeMap<String, String>> {
    items
        .iter()
        .map(|kv| {
            kv.split_once('=')
                .filter(|(k, _)| !k.is_empty())
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .ok_or_else(|| Failure::Usage(format!("{flag} {kv:?}: use KEY=VALUE")))
        })
        .collect()
}

fn millis(flag: &str, s: &str) -> Outcome<u64> {
    parse_duration(s)
        .map(|d| d.as_millis() as u64)
        .map_err(|e| Failure::Usage(format!("{flag}: {e}")))
}

/// Whole seconds, rounded up so that a short non-zero TTL does not become 0 ("never").
fn seconds(flag: &str, s: &str) -> Outcome<u64> {
    let d = parse_duration(s).map_err(|e| Failure::Usage(format!("{flag}: {e}")))?;
    Ok(d.as_secs() + u64::from(d.subsec_nanos() > 0))
}

impl ShapeArgs {
    /// The template fields: backend, runtime, limits, env.
    fn fields(&self) -> Outcome<Map<String, Value>> {
        let mut m = Map::new();
        if let Some(b) = self.backend {
            let name = match b {
                BackendName::Container => "container",
                BackendName::Wasm => "wasm",
                BackendName::Process => "process",
            };
            m.insert("backend".into(), name.into());
        }
        if let Some(r) = self.runtime {
            let name = match r {
                RuntimeName::Crun => "crun",
                RuntimeName::Runc => "runc",
            };
            m.insert("runtime".into(), name.into());
        }
        let mut limits = Map::new();
        if let Some(s) = &self.memory {
            let bytes = parse_size(s).map_err(|e| Failure::Usage(format!("--memory: {e}")))?;
            limits.insert("memory_bytes".into(), bytes.into());
        }
        if let Some(c) = self.cpus {
            limits.insert("cpus".into(), c.into());
        }
        if let Some(p) = self.pids {
            limits.insert("pids".into(), p.into());
        }
        if let Some(t) = &self.timeout {
            limits.insert("timeout_ms".into(), millis("--timeout", t)?.into());
        }
        if !limits.is_empty() {
            m.insert("limits".into(), limits.into());
        }
        let env = key_values("--env", &self.env)?;
        if !env.is_empty() {
            m.insert("env".into(), json!(env));
        }
        Ok(m)
    }
}

impl CommandArgs {
    /// The exec request body (without stdin).
    fn body(&self) -> Outcome<Map<String, Value>> {
        let mut m = Map::new();
        if self.shell {
            m.insert("shell".into(), self.cmd.join(" ").into());
        } else {
            m.insert("command".into(), json!(self.cmd));
        }
        let env = key_values("--env", &self.env)?;
        if !env.is_empty() {
            m.insert("env".into(), json!(env));
        }
        if let Some(d) = &self.cwd {
            m.insert("cwd".into(), d.clone().into());
        }
        if let Some(t) = &self.timeout {
            m.insert("timeout_ms".into(), millis("--timeout", t)?.into());
        }
        Ok(m)
    }
}

fn parse_signal(s: &str) -> Outcome<i32> {
    if let Ok(n) = s.parse::<i32>() {
        return if (1..=64).contains(&n) {
            Ok(n)
        } else {
            Err(Failure::Usage(format!("--signal {n}: a signal number is 1-64")))
        };
    }
    let up = s.to_ascii_uppercase();
    let name = up.strip_prefix("SIG").unwrap_or(&up);
    Ok(match name {
        "HUP" => libc::SIGHUP,
        "INT" => libc::SIGINT,
        "QUIT" => libc::SIGQUIT,
        "KILL" => libc::SIGKILL,
        "USR1" => libc::SIGUSR1,
        "USR2" => libc::SIGUSR2,
        "TERM" => libc::SIGTERM,
        "CONT" => libc::SIGCONT,
        "STOP" => libc::SIGSTOP,
        _ => {
            return Err(Failure::Usage(format!(
                "--signal {s:?}: use a number or TERM, KILL, INT, HUP, QUIT, USR1, USR2, STOP, CONT"
            )))
        }
    })
}

/// Standard input in full when it is a pipe or a file; nothing when it is a terminal.
fn piped_stdin() -> Outcome<Vec<u8>> {
    let mut data = Vec::new();
    let stdin = io::stdin();
    if !stdin.is_terminal() {
        stdin
            .lock()
            .read_to_end(&mut data)
            .map_err(|e| Failure::Local(format!("cannot read stdin: {e}")))?;
    }
    Ok(data)
}

// ---- output helpers ------------------------------------------------------------------------

fn parse<T: DeserializeOwned>(body: &Bytes) -> Outcome<T> {
    serde_json::from_slice(body).map_err(|e| {
        Failure::Client(ClientError::Protocol(format!(
            "the response is not what hutch expects: {e}"
        )))
    })
}

fn print_json(v: &Value) {
    let text = serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string());
    let _ = writeln!(io::stdout().lock(), "{text}");
}

fn print_line(s: &str) {
    let _ = writeln!(io::stdout().lock(), "{s}");
}

fn write_stream(mut w: impl Write, data: &[u8]) -> Outcome<()> {
    match w.write_all(data).and_then(|()| w.flush()) {
        Ok(()) => Ok(()),
        // the reader went away (`| head`): nothing more to show
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Failure::Local(format!("cannot write the output: {e}"))),
    }
}

fn print_table(head: &[&str], rows: &[Vec<String>]) {
    let mut width: Vec<usize> = head.iter().map(|h| h.len()).collect();
    for r in rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let last = cells.len().saturating_sub(1);
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i == last {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<w$}   ", w = width[i]));
            }
        }
        s
    };
    let mut out = String::new();
    out.push_str(&line(head.to_vec()));
    out.push('\n');
    for r in rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
        out.push('\n');
    }
    let _ = io::stdout().lock().write_all(out.as_bytes());
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// A time span for people: `45s`, `4m30s`, `2h5m`, `3d4h`.
fn span(ms: i64) -> String {
    let s = (ms.max(0) + 500) / 1000;
    let (d, h, m, sec) = (s / 86_400, s % 86_400 / 3600, s % 3600 / 60, s % 60);
    let pair = |a: i64, ua: &str, b: i64, ub: &str| {
        if b == 0 {
            format!("{a}{ua}")
        } else {
            format!("{a}{ua}{b}{ub}")
        }
    };
    if d > 0 {
        pair(d, "d", h, "h")
    } else if h > 0 {
        pair(h, "h", m, "m")
    } else if m > 0 {
        pair(m, "m", sec, "s")
    } else {
        format!("{sec}s")
    }
}

fn ago(at_ms: i64) -> String {
    format!("{} ago", span(now_ms() - at_ms))
}

/// How a command ended, as the API reports it.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Status {
    exit_code: Option<i32>,
    signal: Option<i32>,
    timed_out: bool,
    oom_killed: bool,
}

impl Status {
    /// What a shell would report, as `hutch run` does: the code, 128 + signal, 124 on timeout,
    /// 137 when out of memory.
    fn shell_code(&self) -> i32 {
        if self.timed_out {
            124
        } else if self.oom_killed {
            137
        } else if let Some(c) = self.exit_code {
            c
        } else {
            128 + self.signal.unwrap_or(libc::SIGKILL)
        }
    }

    fn describe(&self) -> String {
        if self.timed_out {
            "timed out".into()
        } else if self.oom_killed {
            "out of memory".into()
        } else if let Some(c) = self.exit_code {
            format!("exited {c}")
        } else {
            format!("killed by signal {}", self.signal.unwrap_or(libc::SIGKILL))
        }
    }

    fn exit_code(&self) -> ExitCode {
        ExitCode::from(self.shell_code().clamp(0, 255) as u8)
    }

    /// The line `hutch run` prints when the sandbox ended a command.
    fn explain(&self, timeout: Option<&str>) {
        if self.timed_out {
            let after = timeout.map(|t| format!(" after {t}")).unwrap_or_default();
            eprintln!("hutch: command timed out{after}; the process tree was killed");
        } else if self.oom_killed {
            eprintln!("hutch: command ran out of memory and was killed");
        }
    }
}

/// The bytes of an output field: `<name>_b64` when present (not UTF-8), else the text.
fn output(v: &Value, text: &str, b64: &str) -> Outcome<Vec<u8>> {
    match v.get(b64).and_then(Value::as_str) {
        Some(b) => B64.decode(b).map_err(|e| {
            Failure::Client(ClientError::Protocol(format!("{b64} is not base64: {e}")))
        }),
        None => Ok(v.get(text).and_then(Value::as_str).unwrap_or_default().as_bytes().to_vec()),
    }
}

/// Prints a stream's output events as they arrive until the `exit` event, and returns its
/// status. With `json`, prints each event as one JSON line `{"event", "data"}` instead.
async fn follow(stream: &mut EventStream, json: bool) -> Outcome<Status> {
    while let Some(ev) = stream.next().await? {
        let data = ev.json()?;
        if json {
            print_line(&json!({"event": ev.event, "data": data}).to_string());
        }
        match ev.event.as_str() {
            "stdout" if !json => write_stream(io::stdout().lock(), &output(&data, "data", "b64")?)?,
            "stderr" if !json => write_stream(io::stderr().lock(), &output(&data, "data", "b64")?)?,
            "lagged" if !json => eprintln!(
                "hutch: {} output events were dropped because the output came faster than it was read",
                data["dropped_events"]
            ),
            "exit" => return Ok(serde_json::from_value(data).unwrap_or_default()),
            "error" => {
                return Err(ClientError::from_response(
                    StatusCode::BAD_GATEWAY,
                    ev.data.as_bytes(),
                )
                .into())
            }
            _ => {}
        }
    }
    Err(ClientError::Protocol("the daemon ended the stream before the command exited".into())
        .into())
}

// ---- commands ------------------------------------------------------------------------------

async fn create(a: CreateArgs) -> Outcome {
    let c = client(&a.common)?;
    let mut body = a.shape.fields()?;
    let metadata = key_values("--metadata", &a.metadata)?;
    if !metadata.is_empty() {
        body.insert("metadata".into(), json!(metadata));
    }
    if let Some(t) = &a.ttl {
        body.insert("ttl_seconds".into(), seconds("--ttl", t)?.into());
    }
    if let Some(p) = &a.pool {
        body.insert("pool".into(), p.clone().into());
    }
    let v: Value = parse(&success(c.post_json("/v1/sandboxes", &body.into()).await?)?)?;
    if a.common.json {
        print_json(&v);
    } else {
        print_line(v["id"].as_str().unwrap_or_default());
    }
    Ok(ExitCode::SUCCESS)
}

async fn exec(a: ExecArgs) -> Outcome {
    if a.context.is_some() || a.lang.is_some() {
        return exec_code(a).await;
    }
    let c = client(&a.common)?;
    let mut body = a.command.body()?;
    let stdin = piped_stdin()?;
    if !stdin.is_empty() {
        body.insert("stdin_b64".into(), B64.encode(&stdin).into());
    }
    let path = format!("/v1/sandboxes/{}/exec", encode(&a.id));
    let timeout = a.command.timeout.as_deref();
    let result = if a.stream {
        match c.events(&format!("{path}/stream"), Some(&body.into())).await {
            Ok(mut s) => follow(&mut s, a.common.json).await,
            Err(e) => Err(e.into()),
        }
    } else {
        exec_blocking(&c, &path, &body.into(), a.common.json).await
    };
    match result {
        Ok(status) => {
            if !a.common.json {
                status.explain(timeout);
            }
            Ok(status.exit_code())
        }
        Err(Failure::Client(ClientError::Api { status, code, message }))
            if status == StatusCode::PAYLOAD_TOO_LARGE && !stdin.is_empty() =>
        {
            Err(Failure::Client(ClientError::Api {
                status,
                code,
                message: format!("{message}: stdin travels inside the request; copy large input in with `hutch cp` and redirect from the file"),
            }))
        }
        Err(e) => Err(e),
    }
}

async fn exec_blocking(c: &Client, path: &str, body: &Value, json: bool) -> Outcome<Status> {
    let v: Value = parse(&success(c.post_json(path, body).await?)?)?;
    if json {
        print_json(&v);
    } else {
        write_stream(io::stdout().lock(), &output(&v, "stdout", "stdout_b64")?)?;
        write_stream(io::stderr().lock(), &output(&v, "stderr", "stderr_b64")?)?;
    }
    Ok(serde_json::from_value(v).unwrap_or_default())
}

#[derive(Debug, Deserialize)]
struct SandboxView {
    id: String,
    state: String,
    backend: String,
    #[serde(default)]
    pool: Option<String>,
    created_at: i64,
    #[serde(default)]
    expires_at: Option<i64>,
}

async fn ls(a: LsArgs) -> Outcome {
    let c = client(&a.common)?;
    let mut q = Vec::new();
    if let Some(s) = a.state {
        let name = s.to_possible_value().map(|p| p.get_name().to_string()).unwrap_or_default();
        q.push(format!("state={}", encode(&name)));
    }
    if let Some(p) = &a.pool {
        q.push(format!("pool={}", encode(p)));
    }
    let metadata = key_values("--metadata", &a.metadata)?;
    if !metadata.is_empty() {
        let mut pairs = Vec::new();
        for (k, v) in &metadata {
            if k.contains([',', ':']) || v.contains(',') {
                return Err(Failure::Usage(format!(
                    "--metadata {k}={v}: labels to filter by cannot contain ',' (or ':' in the key)"
                )));
            }
            pairs.push(format!("{k}:{v}"));
        }
        q.push(format!("metadata={}", encode(&pairs.join(","))));
    }
    if a.all || matches!(a.state, Some(StateArg::Stopped)) {
        q.push("include_stopped=true".into());
    }
    let path = if q.is_empty() {
        "/v1/sandboxes".into()
    } else {
        format!("/v1/sandboxes?{}", q.join("&"))
    };
    let v: Value = parse(&success(c.get(&path).await?)?)?;
    if a.common.json {
        print_json(&v);
        return Ok(ExitCode::SUCCESS);
    }
    let list: Vec<SandboxView> = serde_json::from_value(v["sandboxes"].clone()).map_err(|e| {
        Failure::Client(ClientError::Protocol(format!("invalid sandbox list: {e}")))
    })?;
    let now = now_ms();
    let rows: Vec<Vec<String>> = list
        .into_iter()
        .map(|s| {
            let expires = match (s.state.as_str(), s.expires_at) {
                ("stopped", _) => "-".to_string(),
                (_, None) => "never".to_string(),
                (_, Some(t)) if t <= now => "now".to_string(),
                (_, Some(t)) => format!("in {}", span(t - now)),
            };
            vec![
                s.id,
                s.state,
                s.backend,
                s.pool.unwrap_or_else(|| "-".into()),
                span(now - s.created_at),
                expires,
            ]
        })
        .collect();
    print_table(&["ID", "STATE", "BACKEND", "POOL", "AGE", "EXPIRES"], &rows);
    Ok(ExitCode::SUCCESS)
}

/// Deletes each of `paths`, printing `names[i]` for each one done (not with `--json`). An
/// unreachable daemon stops at once; any other failure is reported and the rest still go.
async fn delete_each(c: &Client, json: bool, items: &[(String, String)]) -> Outcome {
    let mut code = ExitCode::SUCCESS;
    for (name, path) in items {
        match c.delete(path).await.and_then(success) {
            Ok(_) => {
                if !json {
                    print_line(name);
                }
            }
            Err(e @ ClientError::Unreachable { .. }) => return Err(e.into()),
            Err(e) => code = report_client(&e),
        }
    }
    Ok(code)
}

async fn rm(a: RmArgs) -> Outcome {
    let c = client(&a.common)?;
    let items: Vec<_> =
        a.ids.iter().map(|id| (id.clone(), format!("/v1/sandboxes/{}", encode(id)))).collect();
    delete_each(&c, a.common.json, &items).await
}

async fn ttl(a: TtlArgs) -> Outcome {
    let c = client(&a.common)?;
    let secs = seconds("TTL", &a.ttl)?;
    let path = format!("/v1/sandboxes/{}/ttl", encode(&a.id));
    let v: Value = parse(&success(c.post_json(&path, &json!({"ttl_seconds": secs})).await?)?)?;
    if a.common.json {
        print_json(&v);
    } else {
        match v["expires_at"].as_i64() {
            Some(t) => print_line(&format!("{} expires in {}", a.id, span(t - now_ms()))),
            None => print_line(&format!("{} never expires", a.id)),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `ID:/path` as (ID, path); anything else (including `./a:b`) is a local path.
fn sandbox_side(s: &str) -> Option<(&str, &str)> {
    let (id, path) = s.split_once(':')?;
    (!id.is_empty() && !id.contains('/')).then_some((id, path))
}

async fn cp(a: CpArgs) -> Outcome {
    let c = client(&a.common)?;
    match (sandbox_side(&a.src), sandbox_side(&a.dst)) {
        (None, Some((id, path))) => upload(&c, &a.src, id, path, a.common.json).await,
        (Some((id, path)), None) => download(&c, id, path, &a.dst, a.common.json).await,
        (Some(_), Some(_)) => Err(Failure::Usage(
            "cp copies between this machine and a sandbox; to copy between sandboxes, go through a local file".into(),
        )),
        (None, None) => Err(Failure::Usage(
            "one side of cp must be in a sandbox, written ID:/path".into(),
        )),
    }
}

fn files_path(id: &str, path: &str) -> Outcome<String> {
    if path.is_empty() {
        return Err(Failure::Usage(format!("{id}: give the path in the sandbox, as {id}:/path")));
    }
    Ok(format!("/v1/sandboxes/{}/files?path={}", encode(id), encode(path)))
}

async fn upload(c: &Client, src: &str, id: &str, path: &str, json: bool) -> Outcome {
    let (data, mode, name) = if src == "-" {
        (piped_stdin()?, None, None)
    } else {
        use std::os::unix::fs::PermissionsExt;
        let data =
            std::fs::read(src).map_err(|e| Failure::Local(format!("cannot read {src}: {e}")))?;
        let mode = std::fs::metadata(src).ok().map(|m| m.permissions().mode() & 0o777);
        let name = Path::new(src).file_name().map(|n| n.to_string_lossy().into_owned());
        (data, mode, name)
    };
    let mut path = path.to_string();
    if path.ends_with('/') {
        match name {
            Some(n) => path.push_str(&n),
            None => {
                return Err(Failure::Usage(format!(
                    "{id}:{path} is a directory: name the file, as {id}:{path}NAME"
                )))
            }
        }
    }
    let mut url = files_path(id, &path)?;
    if let Some(m) = mode {
        url.push_str(&format!("&mode={m:o}"));
    }
    let v: Value = parse(&success(c.put_bytes(&url, data).await?)?)?;
    if json {
        print_json(&v);
    }
    Ok(ExitCode::SUCCESS)
}

async fn download(c: &Client, id: &str, path: &str, dst: &str, json: bool) -> Outcome {
    let data = success(c.get(&files_path(id, path)?).await?)?;
    if dst == "-" {
        write_stream(io::stdout().lock(), &data)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut target = PathBuf::from(dst);
    if target.is_dir() {
        let name = Path::new(path).file_name().ok_or_else(|| {
            Failure::Usage(format!("{id}:{path} has no file name: name the local file"))
        })?;
        target.push(name);
    }
    std::fs::write(&target, &data)
        .map_err(|e| Failure::Local(format!("cannot write {}: {e}", target.display())))?;
    if json {
        print_json(&json!({"path": path, "local": target, "size": data.len()}));
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, Deserialize)]
struct ProcessView {
    pid: u32,
    #[serde(default)]
    command: Value,
    started_at: i64,
    running: bool,
    #[serde(default)]
    status: Option<Status>,
    #[serde(default)]
    error: Option<String>,
}

fn command_text(v: &Value) -> String {
    if let Some(argv) = v["command"].as_array() {
        argv.iter().map(|a| a.as_str().unwrap_or_default()).collect::<Vec<_>>().join(" ")
    } else if let Some(s) = v["shell"].as_str() {
        s.to_string()
    } else {
        v.to_string()
    }
}

async fn spawn(a: SpawnArgs) -> Outcome {
    let c = client(&a.common)?;
    let body = a.command.body()?;
    let path = format!("/v1/sandboxes/{}/processes", encode(&a.id));
    let v: Value = parse(&success(c.post_json(&path, &body.into()).await?)?)?;
    if a.common.json {
        print_json(&v);
    } else {
        print_line(&v["pid"].to_string());
    }
    Ok(ExitCode::SUCCESS)
}

async fn ps(a: PsArgs) -> Outcome {
    let c = client(&a.common)?;
    let path = format!("/v1/sandboxes/{}/processes", encode(&a.id));
    let v: Value = parse(&success(c.get(&path).await?)?)?;
    if a.common.json {
        print_json(&v);
        return Ok(ExitCode::SUCCESS);
    }
    let list: Vec<ProcessView> = serde_json::from_value(v["processes"].clone()).map_err(|e| {
        Failure::Client(ClientError::Protocol(format!("invalid process list: {e}")))
    })?;
    let rows: Vec<Vec<String>> = list
        .into_iter()
        .map(|p| {
            let status = match (&p.error, &p.status) {
                _ if p.running => "running".to_string(),
                (Some(e), _) => format!("failed: {e}"),
                (None, Some(s)) => s.describe(),
                (None, None) => "ended".to_string(),
            };
            vec![p.pid.to_string(), status, ago(p.started_at), command_text(&p.command)]
        })
        .collect();
    print_table(&["PID", "STATUS", "STARTED", "COMMAND"], &rows);
    Ok(ExitCode::SUCCESS)
}

async fn logs(a: LogsArgs) -> Outcome {
    let c = client(&a.common)?;
    let base = format!("/v1/sandboxes/{}/processes/{}", encode(&a.id), a.pid);
    if a.follow {
        let mut s = c.events(&format!("{base}/attach"), None).await?;
        return Ok(follow(&mut s, a.common.json).await?.exit_code());
    }
    let v: Value = parse(&success(c.get(&format!("{base}/logs")).await?)?)?;
    if a.common.json {
        print_json(&v);
    } else {
        write_stream(io::stdout().lock(), &output(&v, "stdout", "stdout_b64")?)?;
        write_stream(io::stderr().lock(), &output(&v, "stderr", "stderr_b64")?)?;
    }
    Ok(ExitCode::SUCCESS)
}

async fn kill(a: KillArgs) -> Outcome {
    let signal = parse_signal(&a.signal)?;
    let c = client(&a.common)?;
    let path = format!("/v1/sandboxes/{}/processes/{}/signal", encode(&a.id), a.pid);
    success(c.post_json(&path, &json!({"signal": signal})).await?)?;
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, Deserialize)]
struct PoolView {
    name: String,
    size: usize,
    #[serde(default)]
    max: Option<usize>,
    #[serde(default)]
    reuse: String,
    #[serde(default)]
    members: BTreeMap<String, usize>,
    #[serde(default)]
    hits: u64,
    #[serde(default)]
    misses: u64,
}

async fn pool(a: PoolArgs) -> Outcome {
    let c = client(&a.common)?;
    let json = a.common.json;
    match a.cmd {
        PoolCmd::Create(p) => {
            let mut body = Map::new();
            body.insert("name".into(), p.name.clone().into());
            body.insert("size".into(), p.size.into());
            if let Some(m) = p.max {
                body.insert("max".into(), m.into());
            }
            if let Some(r) = p.reuse {
                let name = match r {
                    ReuseArg::Fresh => "fresh",
                    ReuseArg::Recycle => "recycle",
                };
                body.insert("reuse".into(), name.into());
            }
            body.insert("template".into(), p.shape.fields()?.into());
            let v: Value = parse(&success(c.post_json("/v1/pools", &body.into()).await?)?)?;
            if json {
                print_json(&v);
            } else {
                print_line(&p.name);
            }
            Ok(ExitCode::SUCCESS)
        }
        PoolCmd::Ls => {
            let v: Value = parse(&success(c.get("/v1/pools").await?)?)?;
            if json {
                print_json(&v);
                return Ok(ExitCode::SUCCESS);
            }
            let list: Vec<PoolView> = serde_json::from_value(v["pools"].clone()).map_err(|e| {
                Failure::Client(ClientError::Protocol(format!("invalid pool list: {e}")))
            })?;
            let rows: Vec<Vec<String>> = list
                .into_iter()
                .map(|p| {
                    let n = |s: &str| p.members.get(s).copied().unwrap_or(0);
                    vec![
                        p.name.clone(),
                        p.size.to_string(),
                        p.max.map(|m| m.to_string()).unwrap_or_else(|| "-".into()),
                        p.reuse.clone(),
                        n("warm").to_string(),
                        n("warming").to_string(),
                        (n("running") + n("waiting")).to_string(),
                        p.hits.to_string(),
                        p.misses.to_string(),
                    ]
                })
                .collect();
            print_table(
                &["NAME", "SIZE", "MAX", "REUSE", "WARM", "WARMING", "IN-USE", "HITS", "MISSES"],
                &rows,
            );
            Ok(ExitCode::SUCCESS)
        }
        PoolCmd::Rm { names } => {
            let items: Vec<_> =
                names.iter().map(|n| (n.clone(), format!("/v1/pools/{}", encode(n)))).collect();
            delete_each(&c, json, &items).await
        }
    }
}

#[derive(Debug, Deserialize)]
struct KeyView {
    id: String,
    name: String,
    admin: bool,
    #[serde(default)]
    max_sandboxes: Option<u32>,
    #[serde(default)]
    rate_per_minute: Option<u32>,
    created_at: i64,
    #[serde(default)]
    revoked_at: Option<i64>,
}

async fn key(a: KeyArgs) -> Outcome {
    let c = client(&a.common)?;
    let json = a.common.json;
    match a.cmd {
        KeyCmd::Create { name, admin, max_sandboxes, rate, e2b } => {
            let body = json!({
                "name": name,
                "admin": admin,
                "max_sandboxes": max_sandboxes,
                "rate_per_minute": rate,
                "format": if e2b { "e2b" } else { "hutch" },
            });
            let v: Value = parse(&success(c.post_json("/v1/keys", &body).await?)?)?;
            if json {
                print_json(&v);
            } else {
                print_line(v["secret"].as_str().unwrap_or_default());
                eprintln!(
                    "hutch: created key {} ({name}); its secret above is shown only this once",
                    v["id"].as_str().unwrap_or_default()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        KeyCmd::Ls => {
            let v: Value = parse(&success(c.get("/v1/keys").await?)?)?;
            if json {
                print_json(&v);
                return Ok(ExitCode::SUCCESS);
            }
            let list: Vec<KeyView> = serde_json::from_value(v["keys"].clone()).map_err(|e| {
                Failure::Client(ClientError::Protocol(format!("invalid key list: {e}")))
            })?;
            let dash = || "-".to_string();
            let rows: Vec<Vec<String>> = list
                .into_iter()
                .map(|k| {
                    vec![
                        k.id,
                        k.name,
                        if k.admin { "yes".into() } else { "no".into() },
                        k.max_sandboxes.map(|n| n.to_string()).unwrap_or_else(dash),
                        k.rate_per_minute.map(|n| format!("{n}/min")).unwrap_or_else(dash),
                        ago(k.created_at),
                        k.revoked_at.map(ago).unwrap_or_else(dash),
                    ]
                })
                .collect();
            print_table(
                &["ID", "NAME", "ADMIN", "MAX-SANDBOXES", "RATE", "CREATED", "REVOKED"],
                &rows,
            );
            Ok(ExitCode::SUCCESS)
        }
        KeyCmd::Rm { ids } => {
            let items: Vec<_> =
                ids.iter().map(|id| (id.clone(), format!("/v1/keys/{}", encode(id)))).collect();
            delete_each(&c, json, &items).await
        }
    }
}

// ---- code contexts --------------------------------------------------------------------------

async fn create_context(c: &Client, sandbox: &str, lang: &str) -> Outcome<String> {
    let v: Value = parse(&success(
        c.post_json(
            &format!("/v1/sandboxes/{}/contexts", encode(sandbox)),
            &json!({"language": lang}),
        )
        .await?,
    )?)?;
    v["context_id"]
        .as_str()
        .map(String::from)
        .ok_or_else(|| Failure::Local("the daemon answered without a context id".into()))
}

/// Runs a snippet through the streaming endpoint, printing output and results as they come.
/// Returns whether the snippet raised an error.
async fn run_snippet(
    c: &Client,
    sandbox: &str,
    ctx: &str,
    code: &str,
    json_out: bool,
) -> Outcome<bool> {
    let path = format!("/v1/sandboxes/{}/contexts/{}/run/stream", encode(sandbox), encode(ctx));
    let mut s = c.events(&path, Some(&json!({"code": code}))).await?;
    let mut failed = false;
    let (mut out, mut err) = (io::stdout(), io::stderr());
    while let Some(ev) = s.next().await? {
        let v: Value = serde_json::from_str(&ev.data).unwrap_or(Value::Null);
        if json_out {
            println!("{}", json!({"event": ev.event, "data": v}));
            failed |= ev.event == "error";
            continue;
        }
        let chunk = |v: &Value| -> Vec<u8> {
            v["b64"]
                .as_str()
                .and_then(|b| B64.decode(b).ok())
                .unwrap_or_else(|| v["data"].as_str().unwrap_or("").as_bytes().to_vec())
        };
        match ev.event.as_str() {
            "stdout" => {
                let _ = out.write_all(&chunk(&v));
                let _ = out.flush();
            }
            "stderr" => {
                let _ = err.write_all(&chunk(&v));
                let _ = err.flush();
            }
            "result" => {
                if v["main"] == true {
                    if let Some(t) = v["data"]["text/plain"].as_str() {
                        println!("{t}");
                    }
                } else if let Some(kinds) = v["data"].as_object() {
                    eprintln!(
                        "[rich output: {}]",
                        kinds.keys().cloned().collect::<Vec<_>>().join(", ")
                    );
                }
            }
            "error" => {
                failed = true;
                for line in
                    v["traceback"].as_array().into_iter().flatten().filter_map(Value::as_str)
                {
                    eprintln!("{line}");
                }
                eprintln!(
                    "{}: {}",
                    v["name"].as_str().unwrap_or("Error"),
                    v["value"].as_str().unwrap_or("")
                );
            }
            "done" => {
                if let Some(r) = v["restarted"].as_str() {
                    eprintln!("hutch: {r}");
                }
                if v["timed_out"] == true {
                    eprintln!("hutch: the snippet timed out and was interrupted");
                }
            }
            _ => {}
        }
    }
    Ok(failed)
}

async fn exec_code(a: ExecArgs) -> Outcome {
    let c = client(&a.common)?;
    let ctx = match (&a.context, &a.lang) {
        (Some(ctx), _) => ctx.clone(),
        (None, Some(lang)) => {
            let ctx = create_context(&c, &a.id, lang).await?;
            eprintln!("hutch: context {ctx} ({lang})");
            ctx
        }
        (None, None) => unreachable_usage()?,
    };
    let code = a.command.cmd.join(" ");
    let failed = run_snippet(&c, &a.id, &ctx, &code, a.common.json).await?;
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

fn unreachable_usage() -> Outcome<String> {
    Err(Failure::Usage("give --context or --lang".into()))
}

/// A snippet continues while its lines open a block (a trailing `:`, `\`, `{`, `(`, `[` or
/// `,`) until an empty line.
fn opens_block(line: &str) -> bool {
    let t = line.trim_end();
    t.ends_with([':', '\\', '{', '(', '[', ','])
}

async fn repl(a: ReplArgs) -> Outcome {
    let c = client(&a.common)?;
    let (sandbox, owned) = match &a.sandbox {
        Some(id) => (id.clone(), false),
        None => {
            let v: Value = parse(&success(c.post_json("/v1/sandboxes", &json!({})).await?)?)?;
            let id = v["id"]
                .as_str()
                .ok_or_else(|| Failure::Local("no sandbox id in the answer".into()))?
                .to_string();
            (id, true)
        }
    };
    let result = async {
        let ctx = match &a.context {
            Some(ctx) => ctx.clone(),
            None => create_context(&c, &sandbox, &a.lang).await?,
        };
        let interactive = io::stdin().is_terminal();
        if interactive {
            eprintln!("hutch repl: {} context {ctx} in sandbox {sandbox}; an empty line ends a block, Ctrl-D quits", a.lang);
        }
        let mut failed = false;
        let mut pending = String::new();
        let stdin = io::stdin();
        loop {
            if interactive {
                eprint!("{}", if pending.is_empty() { ">>> " } else { "... " });
            }
            let mut line = String::new();
            let n = stdin.read_line(&mut line).map_err(|e| Failure::Local(format!("reading stdin: {e}")))?;
            let eof = n == 0;
            let line = line.trim_end_matches(['\n', '\r']);
            let block = !pending.is_empty();
            if !eof && (opens_block(line) || (block && !line.trim().is_empty())) {
                pending.push_str(line);
                pending.push('\n');
                continue;
            }
            if !block && !eof {
                pending.push_str(line);
            }
            if !pending.trim().is_empty() {
                failed |= run_snippet(&c, &sandbox, &ctx, &pending, a.common.json).await?;
            }
            pending.clear();
            if eof {
                break;
            }
        }
        Ok::<_, Failure>(failed)
    }
    .await;
    if owned {
        let _ = c.delete(&format!("/v1/sandboxes/{}", encode(&sandbox))).await;
    }
    Ok(if result? { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans() {
        assert_eq!(span(0), "0s");
        assert_eq!(span(44_600), "45s");
        assert_eq!(span(600_000), "10m");
        assert_eq!(span(599_700), "10m");
        assert_eq!(span(270_000), "4m30s");
        assert_eq!(span(3_600_000 * 2 + 300_000), "2h5m");
        assert_eq!(span(86_400_000 * 3 + 3_600_000 * 4), "3d4h");
        assert_eq!(span(-5), "0s");
    }

    #[test]
    fn sandbox_sides() {
        assert_eq!(sandbox_side("hutch-abc:/workspace/f"), Some(("hutch-abc", "/workspace/f")));
        assert_eq!(sandbox_side("./a:b"), None);
        assert_eq!(sandbox_side("/tmp/x"), None);
        assert_eq!(sandbox_side(":x"), None);
        assert_eq!(sandbox_side("-"), None);
    }

    #[test]
    fn shell_codes() {
        let st = |e, s, t, o| Status { exit_code: e, signal: s, timed_out: t, oom_killed: o };
        assert_eq!(st(Some(3), None, false, false).shell_code(), 3);
        assert_eq!(st(None, Some(15), false, false).shell_code(), 143);
        assert_eq!(st(None, Some(9), true, false).shell_code(), 124);
        assert_eq!(st(None, Some(9), false, true).shell_code(), 137);
    }

    #[test]
    fn signals() {
        assert!(matches!(parse_signal("9"), Ok(9)));
        assert!(matches!(parse_signal("sigterm"), Ok(15)));
        assert!(matches!(parse_signal("KILL"), Ok(9)));
        assert!(parse_signal("0").is_err());
        assert!(parse_signal("BOGUS").is_err());
    }

    #[test]
    fn durations_round_up_to_seconds() {
        assert!(matches!(seconds("--ttl", "500ms"), Ok(1)));
        assert!(matches!(seconds("--ttl", "0"), Ok(0)));
        assert!(matches!(seconds("--ttl", "10m"), Ok(600)));
    }
}
