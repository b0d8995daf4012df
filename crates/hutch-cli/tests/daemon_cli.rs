//! The daemon's CLI as a user runs it: a real `hutch serve` on a socket in a temporary directory,
//! then `hutch create`, `exec`, `cp`, `ls`, `spawn`, `ps`, `logs`, `kill`, `ttl`, `rm`, `pool` and
//! `key` against it through `HUTCH_URL`. Needs root and crun:
//! `HUTCH_AGENT=$(bash scripts/build-agent.sh) cargo test -p hutch-cli -- --include-ignored`.
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long the daemon may take to answer its health check.
const STARTUP_LIMIT: Duration = Duration::from_secs(10);
/// How long one CLI command may take before the test fails instead of hanging.
const COMMAND_LIMIT: Duration = Duration::from_secs(60);
/// How long the daemon may take to destroy its sandboxes and exit after SIGTERM.
const SHUTDOWN_LIMIT: Duration = Duration::from_secs(30);

/// A finished CLI command.
#[derive(Debug)]
struct Out {
    code: Option<i32>,
    stdout: Vec<u8>,
    stderr: String,
}

impl Out {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// Asserts exit 0 and returns stdout as text.
    fn ok(&self) -> String {
        assert_eq!(self.code, Some(0), "command failed: {self:?}");
        self.text()
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {self:?}"))
    }

    /// Asserts exactly one stderr line starting with `hutch: ` and returns it.
    fn one_line_error(&self) -> &str {
        let line = self.stderr.trim_end();
        assert_eq!(line.lines().count(), 1, "one stderr line expected: {self:?}");
        assert!(line.starts_with("hutch: "), "{self:?}");
        line
    }
}

/// `hutch serve` in a temporary directory; SIGTERM and wait when dropped, even on failure.
struct Daemon {
    child: Option<Child>,
    sock: PathBuf,
    dir: tempfile::TempDir,
}

impl Daemon {
    fn start() -> Daemon {
        let dir = tempfile::Builder::new().prefix("hutch-cli-").tempdir().expect("temp dir");
        let sock = dir.path().join("h.sock");
        let log = std::fs::File::create(dir.path().join("daemon.log")).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_hutch"))
            .arg("serve")
            .arg("--socket")
            .arg(&sock)
            .arg("--state-dir")
            .arg(dir.path().join("state"))
            .arg("--db")
            .arg(dir.path().join("h.db"))
            .args(["--log-format", "text"])
            .env_remove("HUTCH_URL")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start hutch serve");
        let mut d = Daemon { child: Some(child), sock, dir };
        let t = Instant::now();
        while !d.healthy() {
            if let Some(Ok(Some(st))) = d.child.as_mut().map(|c| c.try_wait()) {
                panic!("hutch serve exited with {st}:\n{}", d.log());
            }
            if t.elapsed() > STARTUP_LIMIT {
                panic!("hutch serve did not answer /v1/health within {STARTUP_LIMIT:?}");
            }
            thread::sleep(Duration::from_millis(50));
        }
        d
    }

    /// `GET /v1/health` answers 200.
    fn healthy(&self) -> bool {
        let Ok(mut s) = UnixStream::connect(&self.sock) else { return false };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        let req = "GET /v1/health HTTP/1.1\r\nHost: hutch\r\nConnection: close\r\n\r\n";
        let mut resp = String::new();
        s.write_all(req.as_bytes()).is_ok()
            && s.read_to_string(&mut resp).is_ok()
            && resp.starts_with("HTTP/1.1 200")
    }

    fn url(&self) -> String {
        format!("unix://{}", self.sock.display())
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("daemon.log")).unwrap_or_default()
    }

    /// Runs `hutch ARGS` against this daemon with stdin closed.
    fn hutch(&self, args: &[&str]) -> Out {
        self.hutch_with(args, None, &[])
    }

    /// Runs `hutch ARGS` with `stdin` piped in (closed when `None`) and extra environment.
    fn hutch_with(&self, args: &[&str], stdin: Option<&[u8]>, env: &[(&str, &str)]) -> Out {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_hutch"));
        cmd.args(args).env("HUTCH_URL", self.url()).env_remove("HUTCH_API_KEY");
        for (k, v) in env {
            cmd.env(k, v);
        }
        run(cmd, args, stdin)
    }

    /// SIGTERM, then wait; SIGKILL if it does not exit in time.
    fn stop(&mut self) {
        let Some(mut child) = self.child.take() else { return };
        let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
        let t = Instant::now();
        while t.elapsed() < SHUTDOWN_LIMIT {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("hutch serve did not exit within {SHUTDOWN_LIMIT:?} of SIGTERM");
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if thread::panicking() {
            let log = self.log();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            eprintln!("--- daemon log (last lines) ---");
            for l in tail.iter().rev() {
                eprintln!("{l}");
            }
            // a second panic while unwinding would abort: stop without asserting
            if let Some(mut child) = self.child.take() {
                let _ = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
                let t = Instant::now();
                while t.elapsed() < SHUTDOWN_LIMIT {
                    if let Ok(Some(_)) = child.try_wait() {
                        return;
                    }
                    thread::sleep(Duration::from_millis(50));
                }
                let _ = child.kill();
                let _ = child.wait();
            }
        } else {
            self.stop();
        }
    }
}

/// Runs a command to completion within [`COMMAND_LIMIT`], feeding stdin and draining both
/// outputs on their own threads so a large transfer cannot deadlock on a full pipe.
fn run(mut cmd: Command, args: &[&str], stdin: Option<&[u8]>) -> Out {
    cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("run hutch");
    let feeder = match (stdin, child.stdin.take()) {
        (Some(data), Some(mut w)) => {
            let data = data.to_vec();
            Some(thread::spawn(move || {
                let _ = w.write_all(&data);
            }))
        }
        _ => None,
    };
    let drain = |r: Option<Box<dyn Read + Send>>| {
        thread::spawn(move || {
            let mut v = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut v);
            }
            v
        })
    };
    let out = drain(child.stdout.take().map(|s| Box::new(s) as Box<dyn Read + Send>));
    let err = drain(child.stderr.take().map(|s| Box::new(s) as Box<dyn Read + Send>));
    let t = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait for hutch") {
            break st;
        }
        if t.elapsed() > COMMAND_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("hutch {args:?} took longer than {COMMAND_LIMIT:?}");
        }
        thread::sleep(Duration::from_millis(10));
    };
    if let Some(f) = feeder {
        let _ = f.join();
    }
    Out {
        code: status.code(),
        stdout: out.join().expect("stdout reader"),
        stderr: String::from_utf8_lossy(&err.join().expect("stderr reader")).into_owned(),
    }
}

/// 3 MiB of every byte value in a scrambled order (not valid UTF-8, with NULs and CRLFs).
fn binary_blob() -> Vec<u8> {
    let mut x: u32 = 0x9e37_79b9;
    (0..3 * 1024 * 1024)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 24) as u8
        })
        .collect()
}

#[test]
#[ignore = "needs root and crun: cargo test -p hutch-cli -- --include-ignored"]
fn sandbox_lifecycle_exec_files_and_processes() {
    let d = Daemon::start();

    // create prints just the id
    let out =
        d.hutch(&["create", "--runtime", "crun", "--memory", "256m", "--metadata", "suite=cli"]);
    let id = out.ok().trim().to_string();
    assert!(id.starts_with("hutch-") && !id.contains(char::is_whitespace), "{out:?}");

    // exec: stdout, stderr and the exit code pass through
    assert_eq!(
        d.hutch(&["exec", &id, "--", "echo", "hello from", "the sandbox"]).ok(),
        "hello from the sandbox\n"
    );
    let out = d.hutch(&["exec", &id, "--shell", "--", "echo out; echo err >&2; exit 7"]);
    assert_eq!((out.code, out.text().as_str(), out.stderr.as_str()), (Some(7), "out\n", "err\n"));
    let out = d.hutch(&["exec", &id, "--shell", "--", "kill -TERM $$"]);
    assert_eq!(out.code, Some(128 + 15), "{out:?}");
    let out = d.hutch(&["exec", &id, "--timeout", "1s", "--", "sleep", "10"]);
    assert_eq!(out.code, Some(124), "{out:?}");
    assert!(out.stderr.contains("timed out after 1s"), "{out:?}");
    let out = d.hutch(&[
        "exec",
        &id,
        "--env",
        "GREETING=hi",
        "--cwd",
        "/tmp",
        "--shell",
        "--",
        "echo $GREETING; pwd",
    ]);
    assert_eq!(out.ok(), "hi\n/tmp\n");

    // stdin that is not a terminal is sent along
    let out = d.hutch_with(&["exec", &id, "--", "wc", "-l"], Some(b"one\ntwo\nthree\n"), &[]);
    assert_eq!(out.ok().trim(), "3");

    // streamed: chunks as they arrive, same exit code, stdin too
    let out = d.hutch(&[
        "exec",
        "--stream",
        &id,
        "--shell",
        "--",
        "echo a; sleep 0.2; echo b >&2; echo c; exit 3",
    ]);
    assert_eq!((out.code, out.text().as_str(), out.stderr.as_str()), (Some(3), "a\nc\n", "b\n"));
    let out = d.hutch_with(&["exec", "--stream", &id, "--", "cat"], Some(b"piped\x00bytes"), &[]);
    assert_eq!(out.stdout, b"piped\x00bytes");

    // --json is the API's result
    let v = d.hutch(&["exec", "--json", &id, "--shell", "--", "exit 5"]).json();
    assert_eq!(v["exit_code"], 5);
    assert_eq!(d.hutch(&["exec", "--json", &id, "--", "true"]).code, Some(0));

    // an unknown sandbox is one line and exit 1
    let out = d.hutch(&["exec", "hutch-000000000000", "--", "true"]);
    assert_eq!(out.code, Some(1));
    assert!(out.one_line_error().ends_with("(not_found)"), "{out:?}");

    // cp: 3 MiB of binary up, down to a file, down to stdout, byte-exact
    let blob = binary_blob();
    let local = d.dir.path().join("blob.bin");
    std::fs::write(&local, &blob).expect("write blob");
    let remote = format!("{id}:/workspace/blob.bin");
    d.hutch(&["cp", local.to_str().expect("utf-8 path"), &remote]).ok();
    let size = d.hutch(&["exec", &id, "--", "stat", "-c", "%s", "/workspace/blob.bin"]).ok();
    assert_eq!(size.trim(), blob.len().to_string());
    let back = d.dir.path().join("back.bin");
    d.hutch(&["cp", &remote, back.to_str().expect("utf-8 path")]).ok();
    assert!(std::fs::read(&back).expect("read back") == blob, "download differs from upload");
    let out = d.hutch(&["cp", &remote, "-"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout == blob, "download to stdout differs ({} bytes)", out.stdout.len());
    // from stdin into a directory path, then into a local directory
    d.hutch_with(&["cp", "-", &format!("{id}:/tmp/from-stdin")], Some(b"\xff\xfe\x00x"), &[]).ok();
    let dir = d.dir.path().join("down");
    std::fs::create_dir(&dir).expect("mkdir");
    d.hutch(&["cp", &format!("{id}:/tmp/from-stdin"), dir.to_str().expect("utf-8 path")]).ok();
    assert_eq!(std::fs::read(dir.join("from-stdin")).expect("read"), b"\xff\xfe\x00x");
    let out = d.hutch(&["cp", &format!("{id}:/etc/passwd"), "-"]);
    assert_eq!(out.code, Some(1), "{out:?}");
    out.one_line_error();

    // ls shows it, with its labels; filters work
    let table = d.hutch(&["ls"]).ok();
    let header = table.lines().next().unwrap_or_default();
    for col in ["ID", "STATE", "BACKEND", "POOL", "AGE", "EXPIRES"] {
        assert!(header.contains(col), "{table}");
    }
    assert!(table.lines().any(|l| l.starts_with(&id) && l.contains("container:crun")), "{table}");
    assert!(d.hutch(&["ls", "--metadata", "suite=cli"]).ok().contains(&id));
    assert!(!d.hutch(&["ls", "--metadata", "suite=other"]).ok().contains(&id));
    let v = d.hutch(&["ls", "--json"]).json();
    assert!(
        v["sandboxes"].as_array().is_some_and(|a| a.iter().any(|s| s["id"] == id.as_str())),
        "{v}"
    );

    // ttl
    let out = d.hutch(&["ttl", &id, "10m"]).ok();
    assert!(out.contains("expires in"), "{out}");
    assert_eq!(d.hutch(&["ttl", &id, "soon"]).code, Some(2));

    // background processes: spawn prints the pid; ps lists it; logs and logs --follow
    let pid = d
        .hutch(&["spawn", &id, "--shell", "--", "echo started; sleep 1; echo finished >&2; exit 4"])
        .ok();
    let pid = pid.trim().to_string();
    assert!(pid.parse::<u32>().is_ok(), "{pid:?}");
    let ps = d.hutch(&["ps", &id]).ok();
    assert!(ps.lines().any(|l| l.starts_with(&pid) && l.contains("echo started")), "{ps}");
    let out = d.hutch(&["logs", &id, &pid, "--follow"]);
    assert_eq!(
        (out.code, out.text().as_str(), out.stderr.as_str()),
        (Some(4), "started\n", "finished\n")
    );
    let out = d.hutch(&["logs", &id, &pid]);
    assert_eq!(
        (out.code, out.text().as_str(), out.stderr.as_str()),
        (Some(0), "started\n", "finished\n")
    );
    assert!(d.hutch(&["ps", &id]).ok().contains("exited 4"));
    let sleeper = d.hutch(&["spawn", &id, "--", "sleep", "20"]).ok().trim().to_string();
    d.hutch(&["kill", &id, &sleeper, "--signal", "KILL"]).ok();
    assert_eq!(d.hutch(&["logs", "-f", &id, &sleeper]).code, Some(137));
    let v = d.hutch(&["ps", "--json", &id]).json();
    assert_eq!(v["processes"].as_array().map(Vec::len), Some(2), "{v}");

    // rm, then it is gone from ls
    assert_eq!(d.hutch(&["rm", &id]).ok().trim(), id);
    assert!(!d.hutch(&["ls"]).ok().contains(&id));
    let out = d.hutch(&["exec", &id, "--", "true"]);
    assert_ne!(out.code, Some(0), "{out:?}");
    out.one_line_error();
}

#[test]
#[ignore = "needs root and crun: cargo test -p hutch-cli -- --include-ignored"]
fn pool_create_list_use_and_remove() {
    let d = Daemon::start();
    assert_eq!(
        d.hutch(&[
            "pool",
            "create",
            "cli-pool",
            "--size",
            "1",
            "--max",
            "3",
            "--memory",
            "256m",
            "--env",
            "FROM_POOL=yes"
        ])
        .ok()
        .trim(),
        "cli-pool"
    );
    let table = d.hutch(&["pool", "ls"]).ok();
    assert!(table.lines().any(|l| l.starts_with("cli-pool") && l.contains("fresh")), "{table}");
    let v = d.hutch(&["pool", "ls", "--json"]).json();
    assert_eq!(v["pools"][0]["template"]["env"]["FROM_POOL"], "yes", "{v}");
    assert_eq!(v["pools"][0]["max"], 3, "{v}");

    // a sandbox from the pool has the pool's shape
    let id = d.hutch(&["create", "--pool", "cli-pool"]).ok().trim().to_string();
    assert_eq!(d.hutch(&["exec", &id, "--shell", "--", "echo $FROM_POOL"]).ok(), "yes\n");
    let ls = d.hutch(&["ls", "--pool", "cli-pool"]).ok();
    assert!(ls.lines().any(|l| l.starts_with(&id) && l.contains("cli-pool")), "{ls}");
    d.hutch(&["rm", &id]).ok();

    // a pool name the daemon refuses is a bad request: exit 2
    let out = d.hutch(&["pool", "create", "no spaces", "--size", "1"]);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.one_line_error().ends_with("(invalid_request)"), "{out:?}");

    assert_eq!(d.hutch(&["pool", "rm", "cli-pool"]).ok().trim(), "cli-pool");
    assert!(!d.hutch(&["pool", "ls"]).ok().contains("cli-pool"));
    let out = d.hutch(&["pool", "rm", "cli-pool"]);
    assert_eq!(out.code, Some(1));
    assert!(out.one_line_error().ends_with("(not_found)"), "{out:?}");
}

#[test]
#[ignore = "needs root and crun: cargo test -p hutch-cli -- --include-ignored"]
fn exec_against_a_stopped_daemon_is_one_line_and_exit_125() {
    let mut d = Daemon::start();
    let id = d.hutch(&["create"]).ok().trim().to_string();
    d.stop();
    let out = d.hutch(&["exec", &id, "--", "true"]);
    assert_eq!(out.code, Some(125), "{out:?}");
    let sock = d.sock.display().to_string();
    assert_eq!(
        out.one_line_error(),
        format!(
            "hutch: cannot reach the hutch daemon at {sock} (is it running? start it with: hutch serve --socket {sock})"
        )
    );
    assert!(out.stdout.is_empty());
    // every command says the same
    let out = d.hutch(&["ls"]);
    assert_eq!(out.code, Some(125), "{out:?}");
    assert!(out.one_line_error().contains("cannot reach the hutch daemon"));
}

#[test]
#[ignore = "needs root and crun: cargo test -p hutch-cli -- --include-ignored"]
fn key_create_prints_the_secret_once_and_the_key_works() {
    let d = Daemon::start();
    let out = d.hutch(&["key", "create", "ci-runner", "--max-sandboxes", "2", "--rate", "600"]);
    let secret = out.ok().trim().to_string();
    assert_eq!(out.text().lines().count(), 1, "{out:?}");
    assert!(secret.len() >= 32 && !secret.contains(char::is_whitespace), "{secret:?}");

    let v = d.hutch(&["key", "ls", "--json"]).json();
    let keys = v["keys"].as_array().cloned().unwrap_or_default();
    let key = keys.iter().find(|k| k["name"] == "ci-runner").expect("key listed");
    let key_id = key["id"].as_str().expect("key id").to_string();
    assert!(!v.to_string().contains(&secret), "the listing shows the secret: {v}");
    let table = d.hutch(&["key", "ls"]).ok();
    assert!(table.contains(&key_id) && table.contains("ci-runner") && !table.contains(&secret));

    // the key authenticates; a wrong one is refused in one line
    let with = |k: &str, args: &[&str]| d.hutch_with(args, None, &[("HUTCH_API_KEY", k)]);
    let id = with(&secret, &["create"]).ok().trim().to_string();
    assert_eq!(with(&secret, &["exec", &id, "--", "echo", "keyed"]).ok(), "keyed\n");
    let out = with("hutch_not_a_key", &["ls"]);
    assert_eq!(out.code, Some(1));
    assert!(out.one_line_error().ends_with("(unauthorized)"), "{out:?}");
    // a plain key may not manage keys
    let out = with(&secret, &["key", "ls"]);
    assert_eq!(out.code, Some(1));
    assert!(out.one_line_error().ends_with("(forbidden)"), "{out:?}");

    assert_eq!(d.hutch(&["key", "rm", &key_id]).ok().trim(), key_id);
    assert_eq!(with(&secret, &["ls"]).code, Some(1));
}
