//! `hutch` as a user runs it. Bad input must give one line naming the problem and the fix, a
//! non-zero exit, and leave nothing behind. The end-to-end runs need root and crun/runc and are
//! opted into with `--include-ignored` (scripts/test.sh does).
use std::path::Path;
use std::process::{Command, Output};

fn hutch(args: &[&str], env: &[(&str, &str)], state: &Path) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_hutch"));
    c.args(args).env("HUTCH_STATE_DIR", state);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run hutch")
}

fn state_dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("hutch-cli-test-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Nothing under the state directory but empty bookkeeping directories.
fn nothing_left(state: &Path) {
    let sandboxes = state.join("sandboxes");
    if let Ok(rd) = std::fs::read_dir(&sandboxes) {
        let left: Vec<_> = rd.flatten().map(|e| e.path()).collect();
        assert!(left.is_empty(), "left behind: {left:?}");
    }
}

fn one_line_error(o: &Output, must_contain: &[&str]) {
    assert!(!o.status.success(), "should fail: {o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "one line expected, got {err:?}");
    assert!(err.starts_with("hutch: "), "{err:?}");
    for m in must_contain {
        assert!(err.contains(m), "{err:?} lacks {m:?}");
    }
}

#[test]
fn unknown_flag_is_one_line_with_where_to_look() {
    let s = state_dir("flag");
    let o = hutch(&["run", "--frobnicate", "--", "true"], &[], &s);
    one_line_error(&o, &["--frobnicate", "--help"]);
    assert_eq!(o.status.code(), Some(2));
    nothing_left(&s);
}

#[test]
fn missing_rootfs_names_the_path_and_the_fix() {
    let s = state_dir("rootfs");
    let o = hutch(&["run", "--rootfs", "/no/such/rootfs", "--", "true"], &[], &s);
    one_line_error(&o, &["/no/such/rootfs", "--image host"]);
    assert_eq!(o.status.code(), Some(2));
    nothing_left(&s);
}

#[test]
fn impossible_limits_name_the_limit_and_the_fix() {
    let s = state_dir("limits");
    for (args, what) in [
        (vec!["--memory", "1k"], "at least"),
        (vec!["--memory", "100000g"], "lower --memory"),
        (vec!["--cpus", "0"], "--cpus"),
        (vec!["--pids", "1"], "at least"),
        (vec!["--timeout", "0s"], "--timeout"),
        (vec!["--memory", "lots"], "512m"),
    ] {
        let mut a = vec!["run"];
        a.extend(args.iter());
        a.extend(["--", "true"]);
        let o = hutch(&a, &[], &s);
        one_line_error(&o, &[what]);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
    }
    nothing_left(&s);
}

#[test]
fn a_runtime_that_is_not_installed_says_what_to_install() {
    let s = state_dir("runtime");
    // a PATH without any OCI runtime
    let o = hutch(&["run", "--runtime", "runc", "--", "true"], &[("PATH", "/nonexistent")], &s);
    one_line_error(&o, &["runc is not installed", "apt-get install runc"]);
    assert_eq!(o.status.code(), Some(125));
    nothing_left(&s);
}

#[test]
#[ignore = "needs root and crun: cargo test -p hutch-cli -- --include-ignored"]
fn python_runs_as_a_new_user_would_try_it() {
    let s = state_dir("python");
    let o = hutch(&["run", "--", "python3", "-c", "print(1)"], &[], &s);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(o.stdout, b"1\n");
    // exit codes pass through, --json has the result and the phases
    let o = hutch(
        &["run", "--json", "--runtime", "runc", "--", "sh", "-c", "echo out; exit 3"],
        &[],
        &s,
    );
    assert_eq!(o.status.code(), Some(3));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    assert_eq!(j["stdout"], "out\n");
    assert_eq!(j["exit_code"], 3);
    for phase in ["prepare_ms", "runtime_create_ms", "agent_ready_ms", "exec_ms", "destroy_ms"] {
        assert!(j["timings"][phase].as_f64().is_some(), "{phase} missing in {j}");
    }
    // stdin is forwarded
    let mut c = Command::new(env!("CARGO_BIN_EXE_hutch"));
    c.args(["run", "--", "tr", "a-z", "A-Z"]).env("HUTCH_STATE_DIR", &s);
    c.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped());
    let mut child = c.spawn().expect("spawn");
    use std::io::Write;
    child.stdin.take().expect("stdin").write_all(b"piped").expect("write");
    let o = child.wait_with_output().expect("wait");
    assert_eq!(o.stdout, b"PIPED");
    // a command that does not exist
    let o = hutch(&["run", "--", "no-such-command"], &[], &s);
    one_line_error(&o, &["no-such-command", "not found"]);
    assert_eq!(o.status.code(), Some(127));
    nothing_left(&s);
    let _ = std::fs::remove_dir_all(&s);
}

/// A `hutch run` killed with SIGKILL cannot clean up: the next `hutch run` reaps what it left,
/// and never touches a sandbox whose `hutch run` is still alive.
#[test]
#[ignore = "needs root and crun"]
fn a_killed_run_is_cleaned_up_by_the_next_and_a_live_one_is_left_alone() {
    let s = state_dir("killed");
    let sandboxes = s.join("sandboxes");
    let ids = || -> Vec<String> {
        std::fs::read_dir(&sandboxes)
            .map(|rd| rd.flatten().filter_map(|e| e.file_name().into_string().ok()).collect())
            .unwrap_or_default()
    };
    /// Kills the first run however the test ends, so a failing assertion leaves no process.
    struct KillOnDrop(std::process::Child);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut live = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_hutch"))
            .args(["run", "--", "sleep", "30"])
            .env("HUTCH_STATE_DIR", &s)
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("spawn"),
    );
    let t = std::time::Instant::now();
    while ids().is_empty() && t.elapsed() < std::time::Duration::from_secs(20) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let first = ids();
    assert_eq!(first.len(), 1, "the first run's sandbox: {first:?}");
    // let it get past creating its sandbox
    std::thread::sleep(std::time::Duration::from_millis(500));

    // a second run while the first lives: the first's sandbox stays
    let o = hutch(&["run", "--", "echo", "second"], &[], &s);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(o.stdout, b"second\n");
    assert_eq!(ids(), first, "a live run's sandbox was touched");

    // killed: its directory is left, and the next run reaps it
    live.0.kill().expect("SIGKILL");
    let _ = live.0.wait();
    assert_eq!(ids(), first, "SIGKILL gives the run no chance to clean up");
    let o = hutch(&["run", "--", "echo", "third"], &[], &s);
    assert!(o.status.success(), "{o:?}");
    assert!(o.stderr.is_empty(), "the sweep is silent when it works: {o:?}");
    nothing_left(&s);
    let _ = std::fs::remove_dir_all(&s);
}
