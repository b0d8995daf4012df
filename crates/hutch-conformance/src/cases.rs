//! The cases. Each creates what it needs, checks one behaviour, and destroys its sandbox.
use anyhow::{bail, ensure, Context, Result};
use hutch_core::{
    Backend, Discard, ExecRequest, ExecResult, FileKind, GuestKind, Limits, OutputEvent, Sandbox,
    SandboxSpec, StdinMode,
};

async fn started(b: &dyn Backend, spec: SandboxSpec) -> Result<Box<dyn Sandbox>> {
    let mut sb = b.create(spec).await.context("create")?;
    if let Err(e) = sb.start().await {
        let _ = sb.destroy().await;
        return Err(e).context("start");
    }
    Ok(sb)
}

/// Destroys the sandbox whatever the case's result was; the case's error wins.
async fn finish<T>(sandbox: Box<dyn Sandbox>, r: Result<T>) -> Result<T> {
    let d = sandbox.destroy().await;
    let v = r?;
    d.context("destroy")?;
    Ok(v)
}

async fn sh(sb: &dyn Sandbox, script: &str) -> Result<ExecResult> {
    Ok(sb.exec(ExecRequest::shell(script), Vec::new(), &mut Discard).await?)
}

/// WebAssembly guests have no shell or POSIX tools: their cases say the same thing in Python,
/// which both kinds of backend run.
fn wasi(b: &dyn Backend) -> bool {
    b.guest_kind() == GuestKind::Wasi
}

fn py(code: &str) -> ExecRequest {
    ExecRequest::argv(["python3", "-c", code])
}

async fn run(sb: &dyn Sandbox, req: ExecRequest) -> Result<ExecResult> {
    Ok(sb.exec(req, Vec::new(), &mut Discard).await?)
}

/// `echo TEXT` in the backend's dialect.
async fn say(b: &dyn Backend, sb: &dyn Sandbox, text: &str) -> Result<ExecResult> {
    if wasi(b) {
        run(sb, py(&format!("print({text:?})"))).await
    } else {
        run(sb, ExecRequest::argv(["echo", text])).await
    }
}

fn out(r: &ExecResult) -> String {
    String::from_utf8_lossy(&r.stdout).into_owned()
}

pub async fn echo(b: &dyn Backend) -> Result<()> {
    let sandbox = started(b, SandboxSpec::default()).await?;
    let sb: &dyn Sandbox = &*sandbox;
    let r = async {
        let r = say(b, sb, "hello").await?;
        ensure!(
            r.stdout == b"hello\n",
            "stdout {:?} stderr {:?}",
            out(&r),
            String::from_utf8_lossy(&r.stderr)
        );
        ensure!(r.status.exit_code == Some(0), "status {:?}", r.status);
        Ok(())
    }
    .await;
    finish(sandbox, r).await
}

pub async fn exit_codes(b: &dyn Backend) -> Result<()> {
    let sandbox = started(b, SandboxSpec::default()).await?;
    let sb: &dyn Sandbox = &*sandbox;
    let r = async {
        for code in [0, 1, 7, 42, 255] {
            let r = if wasi(b) {
                run(sb, py(&format!("import sys; sys.exit({code})"))).await?
            } else {
                sh(sb, &format!("exit {code}")).await?
            };
            ensure!(r.status.exit_code == Some(code), "exit {code}: {:?}", r.status);
        }
        Ok(())
    }
    .await;
    finish(sandbox, r).await
}

pub async fn killed_by_signal(b: &dyn Backend) -> Result<()> {
    let sandbox = started(b, SandboxSpec::default()).await?;
    let sb: &dyn Sandbox = &*sandbox;
    let r = async {
        // a guest signalling itself: WASI has no kill(2), so only the host can signal a wasm guest
        if !wasi(b) {
            let r = sh(sb, "kill -TERM $$").await?;
            ensure!(r.status.signal == Some(15) && r.status.exit_code.is_none(), "{:?}", r.status);
        }
        // a signal sent from the host through the process handle
        let sleeper = if wasi(b) {
            py("import time\nwhile True: time.sleep(1)")
        } else {
            ExecRequest::argv(["sleep", "60"])
        };
        let mut p = sb.spawn(sleeper, Vec::new()).await?;
        p.control().signal(2).await?;
        let st = loop {
            if let OutputEvent::Exited(st) = p.next_event().await? {
                break st;
            }
        };
        ensure!(st.signal == Some(2), "SIGINT from the host: {st:?}");
        Ok(())
    }
    .await;
    finish(sandbox, r).await
}

pub async fn stdin_inline_and_streamed(b: &dyn Backend) -> Result<()> {
    let sandbox = started(b, SandboxSpec::default()).await?;
    let sb: &dyn Sandbox = &*sandbox;
    let r = async {
        let mut req = if wasi(b) {
            py("import sys; sys.stdout.write(sys.stdin.read())")
        } else {
            ExecRequest::argv(["cat"])
        };
        req.stdin = StdinMode::Inline;
        let r = sb.exec(req, b"inline input\n".to_vec(), &mut Discard).await?;
        ensure!(r.stdout == b"inline input\n", "inline: {:?}", out(&r));

        let mut req = if wasi(b) {
            py("a = input(); b = input(); print(f'{b}-{a}')")
        } else {
            ExecRequest::shell("read a; read b; echo \"$b-$a\"")
        };
        req.stdin = StdinMode::Stream;
        let mut p = sb.spawn(req, Vec::new()).await?;
        let ctl = p.control();
        ctl.write_stdin(b"first\n").await?;
        ctl.write_stdin(b"second\n").await?;
        ctl.close_stdin().await?;
        let mut got = Vec::new();
        loop {
            match p.next_event().await? {
                OutputEvent::Stdout(d) => got.extend(d),
                OutputEvent::Stderr(_) => {}
                OutputEvent::Exited(st) => {
                    ensure!(st.exit_code == Some(0), "{st:?}");
                    break;
                }
            }
        }
        ensure!(got == b"second-first\n", "streamed: {:?}", String::from_utf8_lossy(&got));
        // no stdin: reads see end of file at once
        let r = if wasi(b) {
            run(sb, py("import sys; sys.stdin.read(); print('done')")).await?
        } else {
            sh(sb, "cat; echo done").await?
        };
        ensure!(r.stdout == b"done\n", "null stdin: {:?}", out(&r));
        Ok(())
    }
    .await;
    finish(sandbox, r).await
}

pub async fn env_is_passed(b: &dyn Backend) -> Result<()> {
    let mut spec = SandboxSpec::default();
    spec.env.insert("FROM_SPEC".into(), "spec value".into());
    spec.env.insert("OVERRIDDEN".into(), "old".into());
    let sandbox = started(b, spec).await?;
    let sb: &dyn Sandbox = &*sandbox;
    let r = async {
        let mut req = if wasi(b) {
            py("import os; print('|'.join(os.environ.get(k, '') for k in ['FROM_SPEC', 'FROM_EXEC', 'OVERRIDDEN', 'HOME']))")
        } else {
            ExecRequest::shell("echo \"$FROM_SPEC|$FROM_EXEC|$OVERRIDDEN|$HOME\"")
        };
        req.env.insert("FROM_EXEC".into(), "exec value".into());
        req.env.insert("OVERRIDDEN".into(), "new".into());
        let r = sb.exec(req, Vec::new(), &mut Discard).await?;
        ensure!(out(&r) == "spec value|exec value|new|/workspace\n", "{:?}", out(&r));
        let r = if wasi(b) {
            run(sb, py("import os; print(sum('HUTCH_HOST_SECRET' in k for k in os.environ))")).await?
        } else {
            sh(sb, "env | grep -c HUTCH_HOST_SECRET || true").await?
        };
        ensure!(out(&r).trim() == "0", "host environment leaked: {:?}", out(&r));
        Ok(())
    }
    .await;
    finish(sandbox, r).await
}

pub async fn cwd_default_and_override(b: &dyn Backend) -> Result<()> {
    let sandbox = started(b, SandboxSpec::default()).await?;
    let sb: &dyn Sandbox = &*sandbox;
    let r = async {
        // a wasm sandbox has no /tmp: its override goes to a directory of the workspace
        let (pwd, other) = if wasi(b) {
            sb.make_dir("/workspace/sub", false).await?;
            (py("import os; print(os.getcwd())"), "/workspace/sub")
        } else {
            (ExecRequest::argv(["pwd"]), "/tmp")
        };
        let r = run(sb, pwd.clone()).await?;
        ensure!(
            out(&r) == "/workspace\n",
            "default cwd {:?} {:?}",
            out(&r),
            String::from_utf8_lossy(&r.stderr)
        );
        let mut req = pwd.clone();
        req.cwd = Some(other.into());
        let r = sb.exec(req, Vec::new(), &mut Discard).await?;
        ensure!(out(&r) == format!("{other}\n"), "cwd override {:?}", out(&r));
        let mut req = pwd;
        req.cwd = Some("/does/not/exist".into());
        ensure!(
            sb.exec(req, Vec::new(), &mut Discard).await.is_err(),
            "missing cwd must be an error"
        );
        Ok(())
    }
    .await;
    finish(sandbox, r).await
}

pub async fn output_is_capped_with_marker(b: &dyn Backend) -> Result<()> {
    let sandbox = started(b, SandboxSpec::default()).await?;
    let sb: &dyn Sandbox = &*sandbox;
    let r = async {
        let cap = Limits::default().output_bytes as usize;
        let r = if wasi(b) {
            run(sb, py("import sys; sys.stdout.write('a' * 5000000); sys.stdout.flush(); sys.stderr.write('tail\\n')")).await?
        } else {
            sh(sb, "head -c 5000000 /dev/zero | tr '\\0' a; echo tail >&2").await?
        };
        ensure!(r.status.stdout_truncated, "{:?}", r.status);
        ensure!(r.status.stdout_bytes == 5_000_000, "counted {}", r.status.stdout_bytes);
        ensure!(
            r.stdout.len() > cap && r.stdout.len() < cap + 100,
            "kept {} bytes",
            r.stdout.len()
        );
        ensure!(r.stdout[..cap].iter().all(|&c| c == b'a'), "content before the cap");
        ensure!(String::from_utf8_lossy(&r.stdout[cap..]).contains("truncated"), "marker missing");
        ensure!(r.stderr == b"tail\n" && !r.status.stderr_truncated, "stderr is capped separately");
        ensure!(r.status.exit_code == Some(0), "{:?}", r.status);
        Ok(())
    }
    .await;
    finish(sandbox, r).await
}

pub async fn timeout_kills_the_tree(b: &dyn Backend) -> Result<()> {
    let sandbox = started(b, SandboxSpec::default()).await?;
    let sb: &dyn Sandbox = &*sandbox;
    let r = async {
        let mut req = if wasi(b) {
            py("print('started', flush=True)\nwhile True: pass")
        } else {
            ExecRequest::shell("sleep 1000 & sh -c 'sleep 1001 & wait' & echo started; wait")
        };
        req.timeout_ms = Some(1000);
        let t = std::time::Instant::now();
        let r = sb.exec(req, Vec::new(), &mut Discard).await?;
        ensure!(r.status.timed_out, "{:?}", r.status);
        ensure!(t.elapsed().as_secs() < 10, "took {:?}", t.elapsed());
        ensure!(out(&r) == "started\n", "{:?}", out(&r));
        if wasi(b) {
            // one instance per command: nothing else runs; the sandbox answers at once
            ensure!(say(b, sb, "next").await?.stdout == b"next\n", "usable after the timeout");
            return Ok(());
        }
        let r = sh(
            sb,
            "for p in /proc/[0-9]*; do cat $p/comm 2>/dev/null; done | grep -c '^sleep' || true",
        )
        .await?;
        ensure!(out(&r).trim() == "0", "sleep processes survived the timeout: {}", out(&r));
        Ok(())
    }
    .await;
    finish(sandbox, r).await
}

pub async fn memory_bomb_is_oom(b: &dyn Backend) -> Result<()> {
    let mut spec = SandboxSpec::default();
    spec.limits.memory_bytes = 64 << 20;
    let sandbox = started(b, spec).await?;
    let sb: &dyn Sandbox = &*sandbox;
    let r = async {
        let r = run(sb, py("x = b'a' * (1 << 30); print(len(x))")).await?;
        ensure!(
            r.status.oom_killed,
            "expected an out-of-memory result, got {:?} stderr {:?}",
            r.status,
            String::from_utf8_lossy(&r.stderr)
        );
        ensure!(r.outcome().to_string().contains("out of memory"), "{}", r.outcome());
        let r = say(b, sb, "still alive").await?;
        ensure!(out(&r) == "still alive\n", "sandbox unusable after OOM: {:?}", r.status);
        Ok(())
    }
    .await;
    finish(sandbox, r).await
}

pub async fn fork_bomb_is_contained(b: &dyn Backend) -> Result<()> {
    if wasi(b) {
        return run_bomb_is_contained(b).await;
    }
    let sandbox = started(b, SandboxSpec::default()).await?;
    let sb: &dyn Sandbox = &*sandbox;
    let r = async {
        let mut req = ExecRequest::argv(["bash", "-c", "bomb() { bomb | bomb & }; bomb; wait"]);
        req.timeout_ms = Some(4000);
        let r = sb.exec(req, Vec::new(), &mut Discard).await?;
        let err = String::from_utf8_lossy(&r.stderr);
        ensure!(
            err.contains("Resource temporarily unavailable") || r.status.timed_out,
            "no sign of the pids limit: {:?} {err}",
            r.status
        );
        // the sandbox recovers once the bomb is gone
        let mut alive = false;
        for _ in 0..20 {
            if let Ok(r) = sh(sb, "echo alive").await {
                if out(&r) == "alive\n" {
                    alive = true;
                    break;
                }
            }
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        }
        ensure!(alive, "sandbox did not recover after the fork bomb");
        Ok(())
    }
    .await;
    finish(sandbox, r).await
}

/// WebAssembly has no fork: the nearest bomb is starting runs faster than they end. The pids
/// limit caps the live runs of a sandbox; past it a spawn fails, and the sandbox recovers.
async fn run_bomb_is_contained(b: &dyn Backend) -> Result<()> {
    let mut spec = SandboxSpec::default();
    spec.limits.pids = 8;
    let sandbox = started(b, spec).await?;
    let sb: &dyn Sandbox = &*sandbox;
    let r = async {
        let mut live = Vec::new();
        let refused = loop {
            match sb.spawn(py("import time; time.sleep(30)"), Vec::new()).await {
                Ok(p) => live.push(p),
                Err(e) => break e.to_string(),
            }
            ensure!(live.len() <= 8, "{} live runs: the pids limit did not hold", live.len());
        };
        ensure!(live.len() == 8, "refused after {} runs: {refused}", live.len());
        ensure!(refused.to_lowercase().contains("resource temporarily unavailable"), "{refused}");
        for p in &live {
            p.control().signal(9).await?;
        }
        for mut p in live {
            while !matches!(p.next_event().await?, OutputEvent::Exited(_)) {}
        }
        ensure!(say(b, sb, "alive").await?.stdout == b"alive\n", "no recovery after the bomb");
        Ok(())
    }
    .await;
    finish(sandbox, r).await
}

pub async fn network_is_unreachable(b: &dyn Backend) -> Result<()> {
    let sandbox = started(b, SandboxSpec::default()).await?;
    let sb: &dyn Sandbox = &*sandbox;
    let r = async {
        let r = run(sb, py("import socket; s=socket.socket(); s.settimeout(3); s.connect(('1.1.1.1', 80))")).await?;
        ensure!(r.status.exit_code != Some(0), "outbound connect succeeded");
        let err = String::from_utf8_lossy(&r.stderr);
        if wasi(b) {
            // WASI sockets exist but every address is refused by the host, loopback included
            ensure!(err.contains("Error"), "{err}");
            let r = run(sb, py("import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); print('listening')")).await?;
            ensure!(r.status.exit_code != Some(0) && out(&r).is_empty(), "loopback listen was allowed: {:?}", out(&r));
            return Ok(());
        }
        ensure!(err.contains("unreachable") || err.contains("Network"), "{err}");
        let r = sh(sb, "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '").await?;
        ensure!(out(&r) == "lo\n", "interfaces: {:?}", out(&r));
        // loopback works
        let r = sh(sb, "python3 -c \"import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); c=socket.create_connection(s.getsockname()); print('ok')\"").await?;
        ensure!(out(&r) == "ok\n", "loopback: {:?} {:?}", out(&r), String::from_utf8_lossy(&r.stderr));
        Ok(())
    }
    .await;
    finish(sandbox, r).await
}

pub async fn root_is_read_only(b: &dyn Backend) -> Result<()> {
    let sandbox = started(b, SandboxSpec::default()).await?;
    let sb: &dyn Sandbox = &*sandbox;
    let r = async {
        for path in ["/hutch-test", "/usr/hutch-test", "/etc/hutch-test", "/bin/hutch-test"] {
            let r = if wasi(b) {
                run(sb, py(&format!("open({path:?}, 'w').write('x')"))).await?
            } else {
                sh(sb, &format!("echo x > {path}")).await?
            };
            ensure!(r.status.exit_code != Some(0), "write to {path} succeeded");
            let err = String::from_utf8_lossy(&r.stderr);
            // outside its preopened directory a WASI guest finds nothing at all
            ensure!(
                err.contains("Read-only") || err.contains("Permission denied")
                    || (wasi(b) && (err.contains("No such file") || err.contains("not capable"))),
                "{path}: {err}"
            );
        }
        ensure!(
            sb.write_file("/etc/passwd", b"x", None).await.is_err(),
            "agent file write to /etc must fail"
        );
        let r = if wasi(b) {
            // no /tmp in a wasm sandbox: the workspace twice
            run(sb, py("p='/workspace/f'; open(p, 'w').write('ok\\n'); open('g', 'w').write('ok\\n'); print(open(p).read() + open('/workspace/g').read(), end='')")).await?
        } else {
            sh(sb, "echo ok > /workspace/f && echo ok > /tmp/f && cat /workspace/f /tmp/f").await?
        };
        ensure!(
            out(&r) == "ok\nok\n",
            "workspace and /tmp are writable: {:?}",
            String::from_utf8_lossy(&r.stderr)
        );
        Ok(())
    }
    .await;
    finish(sandbox, r).await
}

pub async fn host_files_are_invisible(b: &dyn Backend) -> Result<()> {
    let marker = format!("/tmp/hutch-conformance-secret-{}-{:p}", std::process::id(), b);
    std::fs::write(&marker, "secret")?;
    let sandbox = started(b, SandboxSpec::default()).await;
    let r = match sandbox {
        Err(e) => Err(e),
        Ok(sandbox) => {
            let sb: &dyn Sandbox = &*sandbox;
            let m = &marker;
            let r = async {
                let r = if wasi(b) {
                    run(sb, py(&format!("print(open({m:?}).read())"))).await?
                } else {
                    sh(sb, &format!("cat {m}")).await?
                };
                ensure!(
                    r.status.exit_code != Some(0) && !out(&r).contains("secret"),
                    "host /tmp file visible"
                );
                if wasi(b) {
                    // "/" may list as empty (a WASI libc shows no root); nothing else exists
                    let r = run(sb, py("import os; print(os.listdir('/'))")).await?;
                    ensure!(
                        r.status.exit_code != Some(0) || out(&r) == "[]\n",
                        "/ shows {:?}",
                        out(&r)
                    );
                    for dir in ["/root", "/home", "/etc", "/proc", "/run/hutch", "/var/lib"] {
                        let r =
                            run(sb, py(&format!("import os; print(os.listdir({dir:?}))"))).await?;
                        ensure!(r.status.exit_code != Some(0), "{dir} is visible: {:?}", out(&r));
                    }
                    return Ok(());
                }
                // /home holds only the image's empty home of its second account (E2B's `user`)
                for dir in ["/root", "/home/user", "/mnt", "/opt"] {
                    let r = sh(sb, &format!("ls -A {dir}")).await?;
                    ensure!(out(&r).is_empty(), "{dir} shows host content: {:?}", out(&r));
                }
                let r = sh(sb, "ls -A /home").await?;
                ensure!(out(&r) == "user\n", "/home shows host content: {:?}", out(&r));
                for path in ["/etc/shadow", "/work", "/run/hutch", "/var/lib"] {
                    let r = sh(sb, &format!("ls {path}")).await?;
                    ensure!(r.status.exit_code != Some(0), "{path} is visible: {:?}", out(&r));
                }
                let r = sh(sb, "cut -d: -f1 /etc/passwd | tr '\\n' ' '").await?;
                ensure!(
                    out(&r) == "root sandbox user nobody ",
                    "generated /etc/passwd expected, got {:?}",
                    out(&r)
                );
                Ok(())
            }
            .await;
            finish(sandbox, r).await
        }
    };
    let _ = std::fs::remove_file(&marker);
    r
}

/// Deterministic pseudo-random bytes (xorshift), so failures reproduce.
fn noise(n: usize, mut s: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(n);
    while v.len() < n {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        v.extend_from_slice(&s.to_le_bytes());
    }
    v.truncate(n);
    v
}

pub async fn files_round_trip_10mib(b: &dyn Backend) -> Result<()> {
    let sandbox = started(b, SandboxSpec::default()).await?;
    let sb: &dyn Sandbox = &*sandbox;
    let r = async {
        let data = noise(10 * 1024 * 1024 + 17, 0x9e37_79b9_7f4a_7c15);
        sb.write_file("/workspace/blob.bin", &data, Some(0o640)).await?;
        let back = sb.read_file("/workspace/blob.bin").await?;
        ensure!(back.len() == data.len(), "length {} != {}", back.len(), data.len());
        ensure!(back == data, "content differs");
        let r = if wasi(b) {
            run(sb, py("import os; print(os.path.getsize('/workspace/blob.bin'))")).await?
        } else {
            sh(sb, "wc -c < /workspace/blob.bin").await?
        };
        ensure!(out(&r).trim() == data.len().to_string(), "size inside {:?}", out(&r));
        let st = sb.stat("/workspace/blob.bin").await?;
        ensure!(
            st.size == data.len() as u64 && st.mode == 0o640 && st.kind == FileKind::File,
            "{st:?}"
        );
        // bytes the guest writes come back exactly too
        let r = if wasi(b) {
            run(sb, py("open('/workspace/g.bin', 'wb').write(b'\\x00\\x01\\xffbinary')")).await?
        } else {
            sh(sb, "printf '\\000\\001\\377binary' > /workspace/g.bin").await?
        };
        ensure!(r.status.exit_code == Some(0), "{:?}", r.status);
        ensure!(sb.read_file("/workspace/g.bin").await? == b"\x00\x01\xffbinary", "guest bytes");
        ensure!(
            sb.read_file("/workspace/empty-missing").await.is_err(),
            "missing file must be an error"
        );
        Ok(())
    }
    .await;
    finish(sandbox, r).await
}

pub async fn file_operations(b: &dyn Backend) -> Result<()> {
    let sandbox = started(b, SandboxSpec::default()).await?;
    let sb: &dyn Sandbox = &*sandbox;
    let r = async {
        sb.make_dir("/workspace/a/b", true).await?;
        sb.write_file("/workspace/a/b/one.txt", b"1", None).await?;
        sb.write_file("relative.txt", b"rel", None).await?;
        ensure!(
            sb.read_file("/workspace/relative.txt").await? == b"rel",
            "relative paths resolve in the workdir"
        );
        sb.rename("/workspace/a/b/one.txt", "/workspace/a/two.txt").await?;
        let names: Vec<String> =
            sb.list_dir("/workspace/a").await?.into_iter().map(|e| e.name).collect();
        ensure!(names == ["b", "two.txt"], "{names:?}");
        ensure!(sb.stat("/workspace/a").await?.kind == FileKind::Dir, "dir kind");
        ensure!(
            sb.remove("/workspace/a", false).await.is_err(),
            "non-recursive remove of a non-empty dir must fail"
        );
        sb.remove("/workspace/a", true).await?;
        ensure!(sb.stat("/workspace/a").await.is_err(), "removed");
        Ok(())
    }
    .await;
    finish(sandbox, r).await
}

pub async fn runs_unprivileged_and_confined(b: &dyn Backend) -> Result<()> {
    let sandbox = started(b, SandboxSpec::default()).await?;
    let sb: &dyn Sandbox = &*sandbox;
    let r = async {
        let r = sh(sb, "id -u; grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status | tr -s '\\t ' ' '; hostname").await?;
        let o = out(&r);
        let want = ["1000", "CapEff: 0000000000000000", "CapBnd: 0000000000000000", "NoNewPrivs: 1", "Seccomp: 2", "hutch"];
        for w in want {
            ensure!(o.lines().any(|l| l.trim() == w), "missing {w:?} in {o:?}");
        }
        // own pid namespace: the agent is init
        let r = sh(sb, "cat /proc/1/cmdline | tr '\\0' ' '").await?;
        ensure!(out(&r).contains("hutch-agent"), "pid 1 is {:?}", out(&r));
        // namespaces and mounts are refused
        let r = sh(sb, "unshare -U true 2>&1; mount -t tmpfs none /tmp 2>&1; true").await?;
        let o = out(&r);
        ensure!(!o.is_empty() && (o.contains("not permitted") || o.contains("denied")), "{o:?}");
        Ok(())
    }
    .await;
    finish(sandbox, r).await
}

pub async fn command_not_found_is_an_error(b: &dyn Backend) -> Result<()> {
    let sandbox = started(b, SandboxSpec::default()).await?;
    let sb: &dyn Sandbox = &*sandbox;
    let r = async {
        match sb
            .exec(ExecRequest::argv(["definitely-not-a-command"]), Vec::new(), &mut Discard)
            .await
        {
            Err(e) => ensure!(e.to_string().contains("not found"), "{e}"),
            Ok(r) => bail!("ran: {:?}", r.status),
        }
        let r = say(b, sb, "still fine").await?;
        ensure!(out(&r) == "still fine\n", "{:?}", r.status);
        Ok(())
    }
    .await;
    finish(sandbox, r).await
}

pub async fn concurrent_execs_in_one_sandbox(b: &dyn Backend) -> Result<()> {
    let sandbox = started(b, SandboxSpec::default()).await?;
    let sb: &dyn Sandbox = &*sandbox;
    let r = async {
        let runs = (0..8).map(|i| async move {
            let r = if wasi(b) {
                run(sb, py(&format!("import time; time.sleep(0.2); print({i})"))).await?
            } else {
                sh(sb, &format!("sleep 0.2; echo {i}")).await?
            };
            ensure!(out(&r) == format!("{i}\n"), "exec {i}: {:?}", out(&r));
            Ok::<_, anyhow::Error>(())
        });
        for r in futures_join(runs).await {
            r?;
        }
        Ok(())
    }
    .await;
    finish(sandbox, r).await
}

async fn futures_join<F: std::future::Future>(fs: impl Iterator<Item = F>) -> Vec<F::Output> {
    let mut set = Vec::new();
    for f in fs {
        set.push(f);
    }
    let mut out = Vec::with_capacity(set.len());
    // poll them together
    let joined = async {
        let mut pinned: Vec<std::pin::Pin<Box<F>>> = set.into_iter().map(Box::pin).collect();
        let mut results: Vec<Option<F::Output>> = (0..pinned.len()).map(|_| None).collect();
        std::future::poll_fn(|cx| {
            let mut pending = false;
            for (i, f) in pinned.iter_mut().enumerate() {
                if results[i].is_none() {
                    match f.as_mut().poll(cx) {
                        std::task::Poll::Ready(v) => results[i] = Some(v),
                        std::task::Poll::Pending => pending = true,
                    }
                }
            }
            if pending {
                std::task::Poll::Pending
            } else {
                std::task::Poll::Ready(())
            }
        })
        .await;
        results.into_iter().flatten().collect::<Vec<_>>()
    };
    out.extend(joined.await);
    out
}

pub async fn sequential_sandboxes_leave_nothing_behind(b: &dyn Backend) -> Result<()> {
    let before = crate::leak_snapshot(b.host_resources().await);
    for i in 0..100 {
        let sb =
            started(b, SandboxSpec::default()).await.with_context(|| format!("sandbox {i}"))?;
        let r = say(b, &*sb, "x").await;
        sb.destroy().await.with_context(|| format!("destroy {i}"))?;
        ensure!(r?.stdout == b"x\n", "sandbox {i} output");
    }
    // one that fails to start must not leak either
    let bad = SandboxSpec { workdir: "/proc/hutch-no-such-dir".into(), ..Default::default() };
    if let Ok(mut sb) = b.create(bad).await {
        let _ = sb.start().await;
        sb.destroy().await.context("destroy after failed start")?;
    }
    let after = crate::leak_snapshot(b.host_resources().await);
    ensure!(before == after, "host state changed:\nbefore {before:?}\nafter  {after:?}");
    Ok(())
}

/// A directory rootfs (here: busybox only) works as well as the host image.
pub async fn rootfs_directory_works(b: &dyn Backend) -> Result<()> {
    let busybox = ["/bin/busybox", "/usr/bin/busybox"]
        .into_iter()
        .find(|p| std::path::Path::new(p).is_file());
    let Some(busybox) = busybox else {
        bail!("this case needs a static busybox on the host to build a rootfs (apt-get install busybox-static)");
    };
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let root =
        std::env::temp_dir().join(format!("hutch-conformance-rootfs-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("bin"))?;
    std::fs::copy(busybox, root.join("bin/busybox"))?;
    for applet in ["sh", "echo", "ls", "cat", "id"] {
        std::os::unix::fs::symlink("busybox", root.join("bin").join(applet))?;
    }
    let spec = SandboxSpec { image: hutch_core::Image::Rootfs(root.clone()), ..Default::default() };
    let r = match started(b, spec).await {
        Err(e) => Err(e),
        Ok(sandbox) => {
            let sb: &dyn Sandbox = &*sandbox;
            let r = async {
                let mut req = ExecRequest::shell("echo from rootfs; id -u; ls /usr 2>&1 || true");
                req.env.insert("PATH".into(), "/bin".into());
                let r = sb.exec(req, Vec::new(), &mut Discard).await?;
                let o = out(&r);
                ensure!(o.starts_with("from rootfs\n1000\n"), "{o:?}");
                ensure!(
                    o.contains("No such file"),
                    "the host's /usr must not appear in a custom rootfs: {o:?}"
                );
                Ok(())
            }
            .await;
            finish(sandbox, r).await
        }
    };
    let _ = std::fs::remove_dir_all(&root);
    r
}

/// The file API stays inside the workdir and /tmp: `..`, other absolute paths and symlinks that
/// lead out are refused with a permission error; nothing is written outside.
pub async fn file_paths_are_confined(b: &dyn Backend) -> Result<()> {
    let sandbox = started(b, SandboxSpec::default()).await?;
    let sb: &dyn Sandbox = &*sandbox;
    let r = async {
        let r = if wasi(b) {
            // a guest can plant a link that points out; WASI itself never follows it out
            run(sb, py("import os; os.symlink('../../../etc', '/workspace/etc-link'); os.mkdir('/workspace/real'); os.symlink('real', '/workspace/in-link')")).await?
        } else {
            sh(sb, "ln -s /etc /workspace/etc-link && ln -s /workspace/real /workspace/in-link && mkdir /workspace/real").await?
        };
        ensure!(r.status.exit_code == Some(0), "setup: {:?}", String::from_utf8_lossy(&r.stderr));
        for bad in ["/workspace/../etc/hutch-x", "/etc/hutch-x", "/usr/hutch-x", "/workspace/etc-link/hutch-x", "../x"] {
            match sb.write_file(bad, b"x", None).await {
                Err(e) => ensure!(e.to_string().contains("outside") || e.to_string().contains(".."), "{bad}: {e}"),
                Ok(()) => bail!("write to {bad} was allowed"),
            }
        }
        ensure!(sb.read_file("/workspace/etc-link/passwd").await.is_err(), "read through a symlink leading out");
        ensure!(sb.list_dir("/workspace/etc-link").await.is_err(), "list through a symlink leading out");
        // a symlink that stays inside works, and the link itself can be inspected and removed
        sb.write_file("/workspace/in-link/ok.txt", b"ok", None).await?;
        ensure!(sb.read_file("/workspace/real/ok.txt").await? == b"ok", "write through an inside symlink");
        ensure!(sb.stat("/workspace/etc-link").await?.kind == FileKind::Symlink, "stat of the link itself");
        sb.remove("/workspace/etc-link", false).await?;
        if !wasi(b) {
            sb.write_file("/tmp/scratch", b"t", None).await?;
        }
        Ok(())
    }
    .await;
    finish(sandbox, r).await
}

/// A reset sandbox keeps nothing of its previous user: files in the workspace, /tmp and
/// /dev/shm, processes (also ones that left their session), System V IPC objects, environment.
pub async fn reset_leaves_nothing_behind(b: &dyn Backend) -> Result<()> {
    if wasi(b) {
        return reset_leaves_nothing_behind_wasi(b).await;
    }
    let sandbox = started(b, SandboxSpec::default()).await?;
    let sb: &dyn Sandbox = &*sandbox;
    let r = async {
        let mut req = ExecRequest::shell(
            "echo secret > /workspace/s; mkdir -p /tmp/d && echo x > /tmp/d/f; echo y > /dev/shm/m; \
             ln -s /etc /workspace/link; (setsid sleep 300 &); (sleep 301 &); ipcmk -M 4096 >/dev/null; echo done",
        );
        req.env.insert("PREVIOUS_USER_SECRET".into(), "s3cr3t".into());
        let r = sb.exec(req, Vec::new(), &mut Discard).await?;
        ensure!(out(&r) == "done\n", "setup: {:?} {:?}", out(&r), String::from_utf8_lossy(&r.stderr));
        let report = sb.reset().await?;
        ensure!(report.is_clean(), "reset left {report:?}");
        let r = sh(
            sb,
            "ls -A /workspace /tmp /dev/shm; for p in /proc/[0-9]*; do cat $p/comm 2>/dev/null; done | grep -c '^sleep' || true; \
             ipcs -m | grep -c '^0x' || true; env | grep -c PREVIOUS_USER_SECRET || true",
        )
        .await?;
        let o = out(&r);
        let lines: Vec<&str> = o.lines().filter(|l| !l.is_empty() && !l.ends_with(':')).collect();
        ensure!(lines == ["0", "0", "0"], "after reset: {o:?}");
        // still fully usable
        sb.write_file("/workspace/new", b"n", None).await?;
        ensure!(sh(sb, "cat /workspace/new").await?.stdout == b"n", "usable after reset");
        Ok(())
    }
    .await;
    finish(sandbox, r).await
}

/// The wasm form: the workspace (files, links) and live runs are what a user can leave behind.
async fn reset_leaves_nothing_behind_wasi(b: &dyn Backend) -> Result<()> {
    let sandbox = started(b, SandboxSpec::default()).await?;
    let sb: &dyn Sandbox = &*sandbox;
    let r = async {
        let r = run(sb, py("import os; open('/workspace/s', 'w').write('secret'); os.makedirs('/workspace/d/e'); os.symlink('s', '/workspace/link'); print('done')")).await?;
        ensure!(out(&r) == "done\n", "setup: {:?}", String::from_utf8_lossy(&r.stderr));
        let mut sleeper = sb.spawn(py("import time; time.sleep(300)"), Vec::new()).await?;
        let report = sb.reset().await?;
        ensure!(report.is_clean(), "reset left {report:?}");
        let ended = tokio::time::timeout(std::time::Duration::from_secs(5), async {
            loop {
                if let OutputEvent::Exited(st) = sleeper.next_event().await? {
                    return Ok::<_, anyhow::Error>(st);
                }
            }
        })
        .await
        .context("the sleeper survived the reset")??;
        ensure!(ended.signal.is_some(), "{ended:?}");
        let r = run(sb, py("import os; print(os.listdir('/workspace'))")).await?;
        ensure!(out(&r) == "[]\n", "after reset: {:?}", out(&r));
        sb.write_file("/workspace/new", b"n", None).await?;
        let r = run(sb, py("print(open('/workspace/new').read())")).await?;
        ensure!(r.stdout == b"n\n", "usable after reset");
        Ok(())
    }
    .await;
    finish(sandbox, r).await
}

// ---- code contexts ----------------------------------------------------------------------

async fn run_ctx(sb: &dyn Sandbox, ctx: &str, code: &str) -> Result<hutch_core::RunOutput> {
    Ok(sb.contexts()?.run_code(ctx, code, Some(20_000), 1 << 20, &mut |_| {}).await?)
}

/// Python, JavaScript and Bash contexts keep state; values come back by MIME type; errors as
/// name, value and traceback; the execution count goes up.
pub async fn contexts_keep_state_and_return_rich_results(b: &dyn Backend) -> Result<()> {
    let sandbox = started(b, SandboxSpec::default()).await?;
    let sb: &dyn Sandbox = &*sandbox;
    let r = async {
        let c = sb.contexts()?;
        let py = c.create_context("python", None, Default::default()).await?;
        ensure!(py.language == "python" && py.pid > 1, "{py:?}");
        run_ctx(sb, &py.context_id, "import math\nx = 41\ndef f(v):\n    return v + 1").await?;
        let o = run_ctx(sb, &py.context_id, "print('side'); f(x)").await?;
        ensure!(o.text() == Some("42") && o.stdout == b"side\n", "{o:?}");
        let o = run_ctx(
            sb,
            &py.context_id,
            "class H:\n    def _repr_html_(self): return '<b>hi</b>'\nH()",
        )
        .await?;
        ensure!(
            o.results
                .iter()
                .any(|r| r.data.get("text/html").and_then(|v| v.as_str()) == Some("<b>hi</b>")),
            "{o:?}"
        );
        let o = run_ctx(sb, &py.context_id, "1/0").await?;
        let e = o.error.clone().context("error expected")?;
        ensure!(e.name == "ZeroDivisionError" && !e.traceback.is_empty(), "{e:?}");
        // a wasm sandbox has one directory, /workspace: its contexts change into one below it
        let (chdir, dir) = if wasi(b) {
            ("import os; os.makedirs('/workspace/sub', exist_ok=True); os.chdir('/workspace/sub'); math.floor(2.5)", "'/workspace/sub'")
        } else {
            ("import os; os.chdir('/tmp'); math.floor(2.5)", "'/tmp'")
        };
        let o = run_ctx(sb, &py.context_id, chdir).await?;
        ensure!(o.text() == Some("2"), "{o:?}");
        let o = run_ctx(sb, &py.context_id, "os.getcwd()").await?;
        ensure!(
            o.text() == Some(dir) && o.summary.execution_count == 6,
            "cwd kept, count {o:?}"
        );

        let js = c.create_context("javascript", None, Default::default()).await?;
        run_ctx(sb, &js.context_id, "var a = 20; function twice(v) { return v * 2 }").await?;
        let o = run_ctx(sb, &js.context_id, "console.log('js'); twice(a) + 2").await?;
        ensure!(o.text() == Some("42") && o.stdout == b"js\n", "{o:?}");
        let o = run_ctx(sb, &js.context_id, "await Promise.resolve(7)").await?;
        ensure!(o.text() == Some("7"), "top-level await: {o:?}");
        let o = run_ctx(sb, &js.context_id, "null.x").await?;
        ensure!(o.error.as_ref().is_some_and(|e| e.name == "TypeError"), "{o:?}");

        if wasi(b) {
            // WebAssembly has no POSIX shell: a bash context is refused and says why
            match c.create_context("bash", None, Default::default()).await {
                Err(e) if e.to_string().contains("shell") => {}
                other => bail!("a bash context on a wasm sandbox: {other:?}"),
            }
            let all = c.list_contexts().await?;
            ensure!(all.len() == 2, "{all:?}");
            return Ok(());
        }
        let sh = c.create_context("bash", None, Default::default()).await?;
        run_ctx(sb, &sh.context_id, "V=kept; cd /tmp; f() { echo \"fn:$1\"; }").await?;
        let o = run_ctx(sb, &sh.context_id, "f $V; pwd").await?;
        ensure!(o.stdout == b"fn:kept\n/tmp\n", "{o:?}");
        let o = run_ctx(sb, &sh.context_id, "false").await?;
        ensure!(o.error.is_some() && o.summary.exit_code == Some(1), "{o:?}");
        let all = c.list_contexts().await?;
        ensure!(all.len() == 3, "{all:?}");
        Ok(())
    }
    .await;
    finish(sandbox, r).await
}

/// State survives 1,000 snippets; two contexts in one sandbox, and two sandboxes, never see
/// each other's variables.
pub async fn contexts_persist_and_are_isolated(b: &dyn Backend) -> Result<()> {
    let s1 = started(b, SandboxSpec::default()).await?;
    let s2 = match started(b, SandboxSpec::default()).await {
        Ok(s) => s,
        Err(e) => {
            let _ = s1.destroy().await;
            return Err(e);
        }
    };
    let (a, bb): (&dyn Sandbox, &dyn Sandbox) = (&*s1, &*s2);
    let r = async {
        let c1 = a.contexts()?.create_context("python", None, Default::default()).await?;
        let c2 = a.contexts()?.create_context("python", None, Default::default()).await?;
        let c3 = bb.contexts()?.create_context("python", None, Default::default()).await?;
        run_ctx(a, &c1.context_id, "n = 0\nsecret = 'one'").await?;
        for _ in 0..1000 {
            run_ctx(a, &c1.context_id, "n += 1").await?;
        }
        let o = run_ctx(a, &c1.context_id, "n").await?;
        ensure!(o.text() == Some("1000") && o.summary.execution_count == 1002, "{o:?}");
        for (sb, ctx) in [(a, &c2.context_id), (bb, &c3.context_id)] {
            let o = run_ctx(sb, ctx, "'secret' in globals()").await?;
            ensure!(o.text() == Some("False"), "another context sees the variable: {o:?}");
        }
        Ok(())
    }
    .await;
    let d2 = s2.destroy().await;
    let out = finish(s1, r).await;
    d2.context("destroy")?;
    out
}

/// Output floods are capped with a marker; os._exit, a segfault and a fork bomb end in a clear
/// result, the context comes back (fresh) and other contexts keep working; a runaway loop is
/// interrupted at the timeout with the state kept. WebAssembly cannot interrupt a snippet in
/// place: there the runaway loop ends with its instance and the context restarts and says so;
/// its crash is a trap, and it has no fork.
pub async fn contexts_survive_hostile_snippets(b: &dyn Backend) -> Result<()> {
    let sandbox = started(b, SandboxSpec::default()).await?;
    let sb: &dyn Sandbox = &*sandbox;
    let r = async {
        let c = sb.contexts()?;
        let victim = c.create_context("python", None, Default::default()).await?;
        let bystander = c.create_context("python", None, Default::default()).await?;
        run_ctx(sb, &bystander.context_id, "kept = 'yes'").await?;
        run_ctx(sb, &victim.context_id, "state = 1").await?;
        let o = run_ctx(
            sb,
            &victim.context_id,
            "import sys\nchunk = 'x' * (1 << 20)\nfor _ in range(100): sys.stdout.write(chunk)",
        )
        .await?;
        ensure!(
            o.summary.stdout_truncated && o.stdout.len() < (1 << 20) + 100,
            "cap: {} bytes {:?}",
            o.stdout.len(),
            o.summary
        );
        ensure!(String::from_utf8_lossy(&o.stdout).contains("truncated"), "marker");
        let o = sb
            .contexts()?
            .run_code(&victim.context_id, "while True: pass", Some(1000), 1 << 20, &mut |_| {})
            .await?;
        if wasi(b) {
            ensure!(
                o.summary.timed_out
                    && o.summary.restarted.as_ref().is_some_and(|r| r.contains("restarted")),
                "stopped with its instance, restart said: {o:?}"
            );
            let o = run_ctx(sb, &victim.context_id, "state").await?;
            ensure!(
                o.error.as_ref().is_some_and(|e| e.name == "NameError"),
                "a restarted context starts fresh: {o:?}"
            );
        } else {
            ensure!(
                o.summary.timed_out && o.summary.restarted.is_none(),
                "interrupted in place: {o:?}"
            );
            ensure!(
                run_ctx(sb, &victim.context_id, "state").await?.text() == Some("1"),
                "state kept after the interrupt"
            );
        }
        let hostile: &[(&str, &str)] = if wasi(b) {
            &[
                ("import os; os._exit(3)", "exited with status 3"),
                // abort() is the wasm `unreachable` instruction: a trap
                ("import faulthandler; faulthandler._sigabrt()", "wasm trap"),
                ("import sys\nsys.setrecursionlimit(10**7)\ndef f(): return f()\nf()", ""),
            ]
        } else {
            &[
                ("import os; os._exit(3)", "exited with status 3"),
                ("import ctypes; ctypes.string_at(0)", "signal 11"),
                ("import os\nwhile True:\n    try: os.fork()\n    except OSError: pass", ""),
            ]
        };
        for &(code, what) in hostile {
            let o = sb
                .contexts()?
                .run_code(&victim.context_id, code, Some(3000), 1 << 20, &mut |_| {})
                .await?;
            let said = format!("{:?} {:?}", o.error, o.summary.restarted);
            ensure!(
                o.error.is_some() || o.summary.restarted.is_some() || o.summary.timed_out,
                "{code}: nothing said: {o:?}"
            );
            ensure!(what.is_empty() || said.contains(what), "{code}: {said}");
            let after = run_ctx(sb, &victim.context_id, "1 + 1").await?;
            ensure!(after.text() == Some("2"), "{code}: the context did not come back: {after:?}");
        }
        ensure!(
            run_ctx(sb, &bystander.context_id, "kept").await?.text() == Some("'yes'"),
            "the other context was disturbed"
        );
        let r = if wasi(b) {
            sb.exec(py("print('exec-ok')"), Vec::new(), &mut Discard).await?
        } else {
            sh(sb, "echo exec-ok").await?
        };
        ensure!(out(&r) == "exec-ok\n", "the sandbox still runs commands");
        Ok(())
    }
    .await;
    finish(sandbox, r).await
}
