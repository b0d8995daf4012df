//! The guest agent driven through the process backend: exercises the agent's exec, stdin, output
//! cap, timeout and file handling without root or an isolation engine.
use hutch_backend_process::ProcessBackend;
use hutch_core::{Backend, Discard, ExecRequest, Sandbox, SandboxSpec, StdinMode};

async fn sandbox() -> Box<dyn Sandbox> {
    let b = ProcessBackend::new().expect("agent binary (cargo builds it with the workspace)");
    let mut sb = b.create(SandboxSpec::default()).await.expect("create");
    sb.start().await.expect("start");
    sb
}

#[tokio::test]
async fn exec_stdin_and_exit_codes() {
    let sb = sandbox().await;
    let r = sb
        .exec(ExecRequest::shell("echo out; echo err >&2; exit 5"), Vec::new(), &mut Discard)
        .await
        .expect("exec");
    assert_eq!(
        (r.stdout.as_slice(), r.stderr.as_slice(), r.status.exit_code),
        (&b"out\n"[..], &b"err\n"[..], Some(5))
    );
    let mut req = ExecRequest::argv(["tr", "a-z", "A-Z"]);
    req.stdin = StdinMode::Inline;
    let r = sb.exec(req, b"shout".to_vec(), &mut Discard).await.expect("exec");
    assert_eq!(r.stdout, b"SHOUT");
    let e = sb
        .exec(ExecRequest::argv(["no-such-binary-here"]), Vec::new(), &mut Discard)
        .await
        .expect_err("not found");
    assert!(e.to_string().contains("command not found"), "{e}");
    sb.destroy().await.expect("destroy");
}

#[tokio::test]
async fn output_cap_and_timeout() {
    let sb = sandbox().await;
    let mut req = ExecRequest::shell("head -c 300000 /dev/zero");
    req.output_limit = 1000;
    let r = sb.exec(req, Vec::new(), &mut Discard).await.expect("exec");
    assert!(r.status.stdout_truncated && r.status.stdout_bytes == 300_000);
    assert!(r.stdout.len() < 1100 && String::from_utf8_lossy(&r.stdout).contains("truncated"));
    let mut req = ExecRequest::shell("sleep 30 & sleep 31");
    req.timeout_ms = Some(300);
    let t = std::time::Instant::now();
    let r = sb.exec(req, Vec::new(), &mut Discard).await.expect("exec");
    assert!(r.status.timed_out && t.elapsed().as_secs() < 5, "{:?} in {:?}", r.status, t.elapsed());
    sb.destroy().await.expect("destroy");
}

#[tokio::test]
async fn files_relative_to_the_workdir() {
    let sb = sandbox().await;
    let data: Vec<u8> = (0..5_000_000u32).map(|i| (i % 251) as u8).collect();
    sb.write_file("sub/blob", &data, None).await.expect("write");
    assert_eq!(sb.read_file("sub/blob").await.expect("read"), data);
    let names: Vec<String> =
        sb.list_dir("sub").await.expect("list").into_iter().map(|e| e.name).collect();
    assert_eq!(names, ["blob"]);
    sb.remove("sub", true).await.expect("remove");
    assert!(sb.stat("sub").await.is_err());
    sb.destroy().await.expect("destroy");
}

/// Output of a process until it exits, and its exit code.
async fn collect(p: &mut Box<dyn hutch_core::Process>) -> (String, Option<i32>) {
    let mut out = Vec::new();
    loop {
        match p.next_event().await.expect("event") {
            hutch_core::OutputEvent::Stdout(d) | hutch_core::OutputEvent::Stderr(d) => {
                out.extend(d)
            }
            hutch_core::OutputEvent::Exited(st) => {
                return (String::from_utf8_lossy(&out).into_owned(), st.exit_code)
            }
        }
    }
}

#[tokio::test]
async fn terminal_exec_with_input_and_resize() {
    let sb = sandbox().await;
    let mut req = ExecRequest::argv(["/bin/sh"]);
    req.stdin = StdinMode::Stream;
    req.pty = Some(hutch_core::PtySize { rows: 24, cols: 80 });
    let mut p = sb.spawn(req, Vec::new()).await.expect("spawn on a terminal");
    let ctl = p.control();
    ctl.write_stdin(b"test -t 0 && test -t 1 && echo on-a-tty; stty size\n").await.expect("input");
    // the size is read once the shell has run the line
    let mut first = Vec::new();
    while !String::from_utf8_lossy(&first).contains("24 80") {
        match p.next_event().await.expect("event") {
            hutch_core::OutputEvent::Stdout(d) => first.extend(d),
            other => panic!("{other:?} before the size: {}", String::from_utf8_lossy(&first)),
        }
    }
    assert!(String::from_utf8_lossy(&first).contains("on-a-tty"));
    ctl.resize(hutch_core::PtySize { rows: 50, cols: 132 }).await.expect("resize");
    ctl.write_stdin(b"stty size; exit 3\n").await.expect("input");
    let (out, code) = collect(&mut p).await;
    assert_eq!(code, Some(3), "{out}");
    assert!(out.contains("50 132"), "{out}");

    // a command without a terminal cannot be resized
    let mut req = ExecRequest::argv(["cat"]);
    req.stdin = StdinMode::Stream;
    let mut p = sb.spawn(req, Vec::new()).await.expect("spawn");
    let ctl = p.control();
    let e = ctl.resize(hutch_core::PtySize { rows: 1, cols: 1 }).await.expect_err("no terminal");
    assert!(e.to_string().contains("no terminal"), "{e}");
    ctl.close_stdin().await.expect("close");
    assert_eq!(collect(&mut p).await.1, Some(0));
    sb.destroy().await.expect("destroy");
}
