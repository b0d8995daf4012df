//! Running one command: spawn, stream its output under the cap, enforce the deadline by killing
//! the whole session, and report how it ended.
use std::collections::BTreeMap;
use std::ffi::CString;
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender};
use std::time::{Duration, Instant};

use hutch_proto::{ExecCommand, ExecRequest, ExecStatus, Response, StdinMode};

use crate::serve::Writer;
use crate::sys;

/// Marker appended to a stream when output passed the cap.
pub use hutch_proto::TRUNCATION_MARKER;

/// How long to keep draining pipes held open by processes that survived a kill.
const DRAIN_GRACE: Duration = Duration::from_millis(500);
/// After the command exits, how long to wait for its pipes to close. Background processes it
/// left behind may hold them open forever; the command's own output is already in the pipe.
const AFTER_EXIT_GRACE: Duration = Duration::from_millis(25);
/// While the command runs, how often the supervisor looks for its exit status.
const STATUS_POLL: Duration = Duration::from_millis(20);

pub struct Prepared {
    pub spec: sys::SpawnSpec,
    pub stdin_mode: StdinMode,
}

/// Resolves the command and environment into a spawn spec. Errors are user-facing messages.
pub fn prepare(
    req: &ExecRequest,
    base_env: &BTreeMap<String, String>,
    workdir: &str,
) -> Result<Prepared, String> {
    let argv: Vec<String> = match &req.command {
        ExecCommand::Argv(v) if v.is_empty() => return Err("empty command".into()),
        ExecCommand::Argv(v) => v.clone(),
        ExecCommand::Shell(s) => vec!["/bin/sh".into(), "-c".into(), s.clone()],
    };
    let mut env = base_env.clone();
    env.extend(req.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    let cwd = req.cwd.clone().unwrap_or_else(|| workdir.to_string());
    let path =
        resolve(&argv[0], env.get("PATH").map(String::as_str).unwrap_or("/usr/bin:/bin"), &cwd)
            .ok_or_else(|| format!("{}: command not found", argv[0]))?;
    let cstr =
        |s: &str| CString::new(s).map_err(|_| format!("argument contains a NUL byte: {s:?}"));
    let mut envp = Vec::with_capacity(env.len());
    for (k, v) in &env {
        if k.is_empty() || k.contains('=') {
            return Err(format!("invalid environment variable name {k:?}"));
        }
        envp.push(cstr(&format!("{k}={v}"))?);
    }
    Ok(Prepared {
        spec: sys::SpawnSpec {
            path: CString::new(path.as_os_str().as_bytes())
                .map_err(|_| "path contains a NUL byte".to_string())?,
            argv: argv.iter().map(|a| cstr(a)).collect::<Result<_, _>>()?,
            envp,
            cwd: cstr(&cwd)?,
            pipe_stdin: req.stdin != StdinMode::Null,
            extra_fds: Vec::new(),
            pty: req.pty,
        },
        stdin_mode: req.stdin,
    })
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// `execvp`-style lookup done before fork.
fn resolve(cmd: &str, path_var: &str, cwd: &str) -> Option<PathBuf> {
    if cmd.contains('/') {
        let p = Path::new(cwd).join(cmd);
        return Some(p);
    }
    path_var
        .split(':')
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(d).join(cmd))
        .find(|p| is_executable(p))
}

/// Feeds stdin from the protocol to the child.
pub fn stdin_thread(fd: OwnedFd, initial: Vec<u8>, rx: Option<Receiver<Vec<u8>>>) {
    // On failure the fd is dropped: the command reads end of file.
    let _ = sys::spawn_thread(move || {
        let mut f = std::fs::File::from(fd);
        if !initial.is_empty() && f.write_all(&initial).is_err() {
            return;
        }
        if let Some(rx) = rx {
            for chunk in rx {
                if f.write_all(&chunk).is_err() {
                    return;
                }
            }
        }
        // dropping f closes the child's stdin
    });
}

/// Kills the session started for an exec: its process group, then anything else still in the
/// session (a process can leave its group but not its session without calling setsid).
pub fn kill_session(sid: i32) {
    let _ = sys::kill(-sid, libc::SIGKILL);
    let Ok(dir) = std::fs::read_dir("/proc") else { return };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            // fields after the ")" of the command name: state ppid pgrp session ...
            if let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) {
                let f: Vec<&str> = rest.split_whitespace().collect();
                if f.len() > 3 && f[3].parse::<i32>().ok() == Some(sid) {
                    let _ = sys::kill(pid, libc::SIGKILL);
                }
            }
        }
    }
}

/// Kills every process of session `sid` except `keep` (a runner's leftovers after a timed-out
/// snippet), repeating while a fork bomb keeps making new ones.
pub fn kill_session_except(sid: i32, keep: i32) {
    for _ in 0..50 {
        let mut found = false;
        let Ok(dir) = std::fs::read_dir("/proc") else { return };
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            if pid == keep {
                continue;
            }
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
            let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else { continue };
            let f: Vec<&str> = rest.split_whitespace().collect();
            if f.len() > 3 && f[0] != "Z" && f[3].parse::<i32>().ok() == Some(sid) {
                let _ = sys::kill(pid, libc::SIGKILL);
                found = true;
            }
        }
        if !found {
            return;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

struct Stream {
    fd: OwnedFd,
    open: bool,
    delivered: u64,
    total: u64,
    truncated: bool,
    stdout: bool,
}

/// Pumps output until both pipes close, enforcing the deadline; then collects the exit status.
/// Runs on its own thread.
#[allow(clippy::too_many_arguments)]
pub fn supervise(
    id: u64,
    pid: i32,
    stdout: OwnedFd,
    stderr: OwnedFd,
    status_rx: Receiver<libc::c_int>,
    timeout: Option<Duration>,
    limit: u64,
    writer: Writer,
    started: Instant,
    done: Sender<u64>,
) {
    let _ = sys::set_nonblocking(&stdout);
    let _ = sys::set_nonblocking(&stderr);
    let deadline = timeout.map(|t| started + t);
    let mut streams = [
        Stream { fd: stdout, open: true, delivered: 0, total: 0, truncated: false, stdout: true },
        Stream { fd: stderr, open: true, delivered: 0, total: 0, truncated: false, stdout: false },
    ];
    let mut timed_out = false;
    let mut drain_until: Option<Instant> = None;
    let mut buf = vec![0u8; 64 * 1024];
    let mut status: Option<libc::c_int> = None;

    while streams.iter().any(|s| s.open) {
        let now = Instant::now();
        if let Some(d) = deadline {
            if !timed_out && now >= d {
                timed_out = true;
                kill_session(pid);
                drain_until = Some(now + DRAIN_GRACE);
            }
        }
        if status.is_none() {
            if let Ok(st) = status_rx.try_recv() {
                status = Some(st);
                if drain_until.is_none() {
                    drain_until = Some(now + AFTER_EXIT_GRACE);
                }
            }
        }
        if let Some(g) = drain_until {
            if now >= g {
                break;
            }
        }
        let status_check = status.is_none().then(|| now + STATUS_POLL);
        let wait_ms = [deadline.filter(|_| !timed_out), drain_until, status_check]
            .iter()
            .flatten()
            .map(|t| t.saturating_duration_since(now).as_millis() as i32 + 1)
            .min()
            .unwrap_or(-1);
        let open: Vec<usize> = (0..2).filter(|&i| streams[i].open).collect();
        let fds: Vec<i32> = open.iter().map(|&i| streams[i].fd.as_raw_fd()).collect();
        let Ok(rev) = sys::poll_in(&fds, wait_ms) else { break };
        for (k, &i) in open.iter().enumerate() {
            if rev[k] == 0 {
                continue;
            }
            let s = &mut streams[i];
            loop {
                match sys::read_nb(s.fd.as_raw_fd(), &mut buf) {
                    Ok(Some(0)) | Err(_) => {
                        s.open = false;
                        break;
                    }
                    Ok(None) => break,
                    Ok(Some(n)) => {
                        s.total += n as u64;
                        let room = limit.saturating_sub(s.delivered) as usize;
                        let take = n.min(room);
                        if take > 0 {
                            s.delivered += take as u64;
                            let msg = if s.stdout {
                                Response::Stdout { id }
                            } else {
                                Response::Stderr { id }
                            };
                            writer.send(&msg, &buf[..take]);
                        }
                        if take < n && !s.truncated {
                            s.truncated = true;
                            let msg = if s.stdout {
                                Response::Stdout { id }
                            } else {
                                Response::Stderr { id }
                            };
                            writer.send(&msg, TRUNCATION_MARKER.as_bytes());
                        }
                        if n < buf.len() {
                            break;
                        }
                    }
                }
            }
        }
    }
    // Pipes are closed (or abandoned); now the exit status, still under the deadline.
    let status = match status {
        Some(s) => Some(s),
        None => {
            let wait = deadline
                .filter(|_| !timed_out)
                .map(|d| d.saturating_duration_since(Instant::now()));
            match wait {
                None if timed_out => status_rx.recv_timeout(Duration::from_secs(5)).ok(),
                None => status_rx.recv().ok(),
                Some(w) => match status_rx.recv_timeout(w) {
                    Ok(s) => Some(s),
                    Err(_) => {
                        timed_out = true;
                        kill_session(pid);
                        status_rx.recv_timeout(Duration::from_secs(5)).ok()
                    }
                },
            }
        }
    };
    // The command is done: make sure nothing it left in its session lives on.
    if timed_out {
        kill_session(pid);
    }
    let (exit_code, signal) = status.map(sys::wexitstatus).unwrap_or((None, Some(libc::SIGKILL)));
    let st = ExecStatus {
        exit_code,
        signal,
        timed_out,
        stdout_bytes: streams[0].total,
        stderr_bytes: streams[1].total,
        stdout_truncated: streams[0].truncated,
        stderr_truncated: streams[1].truncated,
        duration_us: started.elapsed().as_micros() as u64,
        oom_killed: false,
    };
    let _ = done.send(id);
    writer.send(&Response::Exited { id, status: st }, &[]);
}
