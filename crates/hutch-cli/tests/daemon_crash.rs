//! `kill -9` of the daemon while 50 sandboxes run, then a restart: the store and the host must
//! agree afterwards. Sandboxes that survived are adopted and usable (with their files); one whose
//! container died meanwhile and one the store lost are cleaned up; nothing leaks.
//! Needs root and crun: `cargo test -p hutch-cli -- --include-ignored`.
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// One HTTP/1.1 request over the daemon's Unix socket (Connection: close).
fn http(sock: &Path, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let mut s = UnixStream::connect(sock).expect("connect to the daemon");
    s.set_read_timeout(Some(Duration::from_secs(60))).expect("timeout");
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: hutch\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).expect("send");
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("read");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status: u16 = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    // chunked bodies: join the chunks
    let payload = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        let mut out = String::new();
        let mut r = rest;
        while let Some((len, tail)) = r.split_once("\r\n") {
            let n = usize::from_str_radix(len.trim(), 16).unwrap_or(0);
            if n == 0 || tail.len() < n {
                break;
            }
            out.push_str(&tail[..n]);
            r = tail[n..].trim_start_matches("\r\n");
        }
        out
    } else {
        rest.to_string()
    };
    (status, serde_json::from_str(&payload).unwrap_or(Value::String(payload)))
}

struct Daemon {
    child: Child,
}

impl Daemon {
    fn start(dir: &Path) -> Daemon {
        let child = Command::new(env!("CARGO_BIN_EXE_hutch"))
            .args(["serve", "--log-format", "text", "--max-sandboxes", "200"])
            .arg("--socket")
            .arg(dir.join("h.sock"))
            .arg("--state-dir")
            .arg(dir.join("state"))
            .arg("--db")
            .arg(dir.join("h.db"))
            .stdout(Stdio::null())
            .stderr(
                std::fs::File::create(dir.join(format!("daemon-{}.log", std::process::id())))
                    .map(Stdio::from)
                    .unwrap_or(Stdio::null()),
            )
            .spawn()
            .expect("start hutch serve");
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(30) {
            if UnixStream::connect(dir.join("h.sock")).is_ok()
                && http(&dir.join("h.sock"), "GET", "/v1/health", None).0 == 200
            {
                return Daemon { child };
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut child = child;
        let _ = child.kill();
        let _ = child.wait();
        panic!("daemon did not come up");
    }

    fn kill9(&mut self) {
        let _ = self.child.kill(); // SIGKILL
        let _ = self.child.wait();
    }

    fn stop(&mut self) {
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let _ = self.child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sandbox ids the host holds for this state directory: runtime state, bundles, cgroups.
fn host_ids(
    dir: &Path,
    known: &BTreeSet<String>,
) -> (BTreeSet<String>, BTreeSet<String>, BTreeSet<String>) {
    let names = |p: PathBuf| -> BTreeSet<String> {
        std::fs::read_dir(p)
            .map(|rd| rd.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
            .unwrap_or_default()
    };
    let runtime: BTreeSet<String> = names(dir.join("state/runtime/crun"));
    let bundles: BTreeSet<String> = names(dir.join("state/sandboxes"));
    let cgroups: BTreeSet<String> = names(PathBuf::from("/sys/fs/cgroup/memory/hutch"))
        .into_iter()
        .filter(|n| known.contains(n))
        .collect();
    (runtime, bundles, cgroups)
}

#[test]
#[ignore = "needs root and crun: cargo test -p hutch-cli -- --include-ignored"]
fn kill_9_with_50_sandboxes_then_restart_reconciles() {
    let dir = std::env::temp_dir().join(format!("hutch-crash-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let sock = dir.join("h.sock");
    let mut d = Daemon::start(&dir);
    let mut ids = Vec::new();
    for i in 0..50 {
        let (s, v) =
            http(&sock, "POST", "/v1/sandboxes", Some(&json!({"metadata": {"n": i.to_string()}})));
        assert_eq!(s, 201, "{v}");
        let id = v["id"].as_str().expect("id").to_string();
        let (s, v) = http(
            &sock,
            "POST",
            &format!("/v1/sandboxes/{id}/exec"),
            Some(&json!({"shell": format!("echo marker-{i} > /workspace/m")})),
        );
        assert_eq!(s, 200, "{v}");
        ids.push(id);
    }
    // a background process in one of them keeps running across the crash
    let (s, v) = http(
        &sock,
        "POST",
        &format!("/v1/sandboxes/{}/processes", ids[0]),
        Some(&json!({"shell": "sleep 600"})),
    );
    assert_eq!(s, 201, "{v}");
    d.kill9();

    // While the daemon is dead: one sandbox's container dies, and the store loses another.
    let dead = ids[1].clone();
    let st = Command::new("crun")
        .arg("--root")
        .arg(dir.join("state/runtime/crun"))
        .args(["kill", &dead, "KILL"])
        .status()
        .expect("crun kill");
    assert!(st.success(), "crun kill {dead}");
    std::thread::sleep(Duration::from_millis(300));
    let forgotten = ids[2].clone();
    let conn = rusqlite_delete(&dir.join("h.db"), &forgotten);
    assert!(conn, "row deleted");

    let mut d = Daemon::start(&dir);
    let known: BTreeSet<String> = ids.iter().cloned().collect();
    // the store's live sandboxes
    let (s, v) = http(&sock, "GET", "/v1/sandboxes?limit=1000", None);
    assert_eq!(s, 200);
    let live: BTreeSet<String> = v["sandboxes"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|r| r["id"].as_str().map(String::from))
        .collect();
    let expected: BTreeSet<String> =
        ids.iter().filter(|i| **i != dead && **i != forgotten).cloned().collect();
    assert_eq!(live, expected, "adopted sandboxes");
    let (_, v) = http(&sock, "GET", &format!("/v1/sandboxes/{dead}"), None);
    assert_eq!(
        (v["state"].as_str(), v["stop_reason"].as_str()),
        (Some("stopped"), Some("lost in a daemon restart")),
        "{v}"
    );
    // the host agrees with the store exactly
    let (runtime, bundles, cgroups) = host_ids(&dir, &known);
    assert_eq!(runtime, expected, "runtime containers");
    assert_eq!(bundles, expected, "bundles");
    assert_eq!(cgroups, expected, "cgroups");
    // adopted sandboxes are usable and kept their files
    for (i, id) in ids.iter().enumerate() {
        if !expected.contains(id) {
            continue;
        }
        let (s, v) = http(
            &sock,
            "POST",
            &format!("/v1/sandboxes/{id}/exec"),
            Some(&json!({"shell": "cat /workspace/m"})),
        );
        assert_eq!(
            (s, v["stdout"].as_str()),
            (200, Some(format!("marker-{i}\n").as_str())),
            "{id}: {v}"
        );
    }
    let (_, v) = http(
        &sock,
        "POST",
        &format!("/v1/sandboxes/{}/exec", ids[0]),
        Some(&json!({"shell": "for p in /proc/[0-9]*; do cat $p/comm; done | grep -c '^sleep'"})),
    );
    assert_eq!(v["stdout"], "1\n", "the background process survived the daemon: {v}");
    // everything deletes cleanly
    for id in &expected {
        let (s, v) = http(&sock, "DELETE", &format!("/v1/sandboxes/{id}"), None);
        assert_eq!(s, 204, "{v}");
    }
    let (runtime, bundles, cgroups) = host_ids(&dir, &known);
    assert!(
        runtime.is_empty() && bundles.is_empty() && cgroups.is_empty(),
        "{runtime:?} {bundles:?} {cgroups:?}"
    );
    d.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Deletes a sandbox row behind the daemon's back (the store "forgets" it).
fn rusqlite_delete(db: &Path, id: &str) -> bool {
    let store = hutch_store::Store::open(db).expect("open store");
    store.delete_row(id).expect("delete")
}
