//! The wasm backend end to end: user modules, the language guests (when built), limits.
use hutch_backend_wasm::{probe_module, WasmBackend, WasmConfig};
use hutch_core::{Backend, Discard, ExecRequest, Sandbox, SandboxSpec};

fn backend(state: &std::path::Path) -> WasmBackend {
    let cfg = WasmConfig { state_dir: state.to_path_buf(), ..Default::default() };
    WasmBackend::new(cfg).expect("wasm backend")
}

async fn started(b: &WasmBackend, spec: SandboxSpec) -> Box<dyn Sandbox> {
    let mut sb = b.create(spec).await.expect("create");
    sb.start().await.expect("start");
    sb
}

fn guests_built() -> bool {
    hutch_backend_wasm::guests::default_guest_dir().join("python.wasm").is_file()
}

/// A started sandbox for a test that runs the language guests.
async fn guest_sandbox(state: &std::path::Path, spec: SandboxSpec) -> Box<dyn Sandbox> {
    assert!(guests_built(), "the language guests are not built: run scripts/build-wasm-guests.sh");
    started(&backend(state), spec).await
}

#[tokio::test]
async fn a_user_module_runs_and_bad_input_is_refused() {
    let state = tempfile::tempdir().unwrap();
    let b = backend(state.path());
    let sb = started(&b, SandboxSpec::default()).await;
    sb.write_file("/workspace/probe.wasm", &probe_module().unwrap(), None).await.unwrap();
    let r = sb.exec(ExecRequest::argv(["probe.wasm"]), Vec::new(), &mut Discard).await.unwrap();
    assert_eq!(r.stdout, b"ok\n");
    assert_eq!(r.status.exit_code, Some(0));
    // not wasm at all
    sb.write_file("/workspace/junk.wasm", b"#!/bin/sh\necho hi\n", None).await.unwrap();
    let e = sb.exec(ExecRequest::argv(["junk.wasm"]), Vec::new(), &mut Discard).await.unwrap_err();
    assert!(e.to_string().contains("not a WebAssembly module"), "{e}");
    // no shell in a wasm sandbox
    let e = sb.exec(ExecRequest::shell("echo hi"), Vec::new(), &mut Discard).await.unwrap_err();
    assert!(e.to_string().contains("shell"), "{e}");
    // a module outside the workspace cannot be named
    let e =
        sb.exec(ExecRequest::argv(["/etc/x.wasm"]), Vec::new(), &mut Discard).await.unwrap_err();
    assert!(e.to_string().contains("outside"), "{e}");
    sb.destroy().await.unwrap();
    assert!(
        std::fs::read_dir(state.path().join("wasm")).unwrap().next().is_none(),
        "workspace left behind"
    );
}

#[tokio::test]
async fn a_trapping_module_is_reported_and_the_sandbox_goes_on() {
    let state = tempfile::tempdir().unwrap();
    let b = backend(state.path());
    let sb = started(&b, SandboxSpec::default()).await;
    let trap = wat::parse_str(
        r#"(module (memory (export "memory") 1) (func (export "_start") unreachable))"#,
    )
    .unwrap();
    sb.write_file("trap.wasm", &trap, None).await.unwrap();
    let r = sb.exec(ExecRequest::argv(["trap.wasm"]), Vec::new(), &mut Discard).await.unwrap();
    assert_eq!(r.status.signal, Some(6), "{:?}", r.status);
    assert!(String::from_utf8_lossy(&r.stderr).contains("wasm trap"), "{:?}", r.stderr);
    // an endless loop stops at the timeout
    let spin = wat::parse_str(
        r#"(module (memory (export "memory") 1) (func (export "_start") (loop br 0)))"#,
    )
    .unwrap();
    sb.write_file("spin.wasm", &spin, None).await.unwrap();
    let mut req = ExecRequest::argv(["spin.wasm"]);
    req.timeout_ms = Some(300);
    let r = sb.exec(req, Vec::new(), &mut Discard).await.unwrap();
    assert!(r.status.timed_out, "{:?}", r.status);
    sb.write_file("probe.wasm", &probe_module().unwrap(), None).await.unwrap();
    let r = sb.exec(ExecRequest::argv(["probe.wasm"]), Vec::new(), &mut Discard).await.unwrap();
    assert_eq!(r.stdout, b"ok\n");
    sb.destroy().await.unwrap();
}

#[tokio::test]
async fn python_and_node_guests_run_like_on_the_container_backend() {
    if !guests_built() {
        panic!("the language guests are not built: run scripts/build-wasm-guests.sh");
    }
    let state = tempfile::tempdir().unwrap();
    let b = backend(state.path());
    let sb = started(&b, SandboxSpec::default()).await;
    let r = sb
        .exec(ExecRequest::argv(["python3", "-c", "print(1)"]), Vec::new(), &mut Discard)
        .await
        .unwrap();
    assert_eq!(
        (r.stdout.as_slice(), r.status.exit_code),
        (&b"1\n"[..], Some(0)),
        "{:?}",
        String::from_utf8_lossy(&r.stderr)
    );
    let r = sb
        .exec(ExecRequest::argv(["node", "-e", "console.log(1)"]), Vec::new(), &mut Discard)
        .await
        .unwrap();
    assert_eq!(r.stdout, b"1\n", "{:?}", String::from_utf8_lossy(&r.stderr));
    sb.write_file("/workspace/s.py", b"import sys\nprint(sys.argv[1:])\nsys.exit(3)\n", None)
        .await
        .unwrap();
    let r = sb
        .exec(ExecRequest::argv(["python3", "s.py", "a", "b"]), Vec::new(), &mut Discard)
        .await
        .unwrap();
    assert_eq!(r.stdout, b"['a', 'b']\n");
    assert_eq!(r.status.exit_code, Some(3));
    let r = sb
        .exec(
            ExecRequest::argv(["node", "-e", "throw new TypeError('boom')"]),
            Vec::new(),
            &mut Discard,
        )
        .await
        .unwrap();
    assert_eq!(r.status.exit_code, Some(1));
    assert!(String::from_utf8_lossy(&r.stderr).contains("TypeError: boom"));
    sb.destroy().await.unwrap();
}

async fn snippet(
    sb: &dyn Sandbox,
    ctx: &str,
    code: &str,
    timeout_ms: u64,
) -> hutch_core::RunOutput {
    sb.contexts()
        .unwrap()
        .run_code(ctx, code, Some(timeout_ms), 4096, &mut |_| {})
        .await
        .unwrap_or_else(|e| panic!("{code}: {e}"))
}

#[tokio::test]
async fn javascript_contexts_keep_state_frame_output_and_restart_when_they_must() {
    let state = tempfile::tempdir().unwrap();
    let sb = guest_sandbox(state.path(), SandboxSpec::default()).await;
    let c = sb.contexts().unwrap();
    let js = c.create_context("javascript", None, Default::default()).await.unwrap().context_id;
    // declarations persist; every way of writing is framed, in order
    snippet(&*sb, &js, "let k = 40; const add = (a, b) => a + b", 5000).await;
    let o = snippet(
        &*sb,
        &js,
        "process.stdout.write('a'); console.error('e'); print('b'); console.log({x: 1}); add(k, 2)",
        5000,
    )
    .await;
    assert_eq!(o.stdout, b"ab\n{ x: 1 }\n");
    assert_eq!(o.stderr, b"e\n");
    assert_eq!(o.text(), Some("42"));
    let o = snippet(&*sb, &js, "[1, {a: 2}]", 5000).await;
    assert_eq!(o.results[0].data["application/json"], serde_json::json!([1, {"a": 2}]));
    // a stdin read by user code sees nothing of the requests
    let o = snippet(&*sb, &js, "typeof display", 5000).await;
    assert_eq!(o.text(), Some("'function'"));
    // the per-snippet cap, with the marker
    let o = snippet(&*sb, &js, "for (let i = 0; i < 100; i++) console.log('y'.repeat(1000))", 5000)
        .await;
    assert!(o.summary.stdout_truncated && o.stdout.len() < 4096 + 100, "{:?}", o.summary);
    assert!(String::from_utf8_lossy(&o.stdout).contains("truncated"));
    // process.exit ends the instance: said, restarted, fresh
    let o = snippet(&*sb, &js, "process.exit(4)", 5000).await;
    let e = o.error.expect("an error");
    assert_eq!(e.name, "ContextDied");
    assert!(e.value.contains("exited with status 4"), "{e:?}");
    assert!(o.summary.restarted.as_deref().is_some_and(|r| r.contains("state is gone")));
    let o = snippet(&*sb, &js, "typeof k", 5000).await;
    assert_eq!(o.text(), Some("'undefined'"));
    assert_eq!(o.summary.execution_count, 1);
    // a runaway loop is stopped at its deadline with its instance
    let o = snippet(&*sb, &js, "while (true) {}", 300).await;
    assert!(o.summary.timed_out && o.summary.restarted.is_some(), "{:?}", o.summary);
    assert_eq!(o.error.map(|e| e.name).as_deref(), Some("TimeoutError"));
    assert_eq!(snippet(&*sb, &js, "1 + 1", 5000).await.text(), Some("2"));
    sb.destroy().await.unwrap();
}

#[tokio::test]
async fn contexts_are_interrupted_count_against_pids_and_end_with_a_reset() {
    let state = tempfile::tempdir().unwrap();
    let mut spec = SandboxSpec::default();
    spec.limits.pids = 2;
    let sb: std::sync::Arc<dyn Sandbox> = guest_sandbox(state.path(), spec).await.into();
    let c = sb.contexts().unwrap();
    let a = c.create_context("python", None, Default::default()).await.unwrap().context_id;
    let j = c.create_context("js", None, Default::default()).await.unwrap().context_id;
    let e = c.create_context("python", None, Default::default()).await.unwrap_err();
    assert!(e.to_string().contains("pids limit"), "{e}");
    let e = c.create_context("bash", None, Default::default()).await.unwrap_err();
    assert!(e.to_string().contains("no POSIX shell"), "{e}");
    // an interrupt stops the running snippet with its instance
    snippet(&*sb, &a, "x = 1", 20_000).await;
    let (sb2, a2) = (sb.clone(), a.clone());
    let run = tokio::spawn(async move { snippet(&*sb2, &a2, "while True: pass", 60_000).await });
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    sb.contexts().unwrap().interrupt_context(&a).await.unwrap();
    let o = tokio::time::timeout(std::time::Duration::from_secs(30), run).await.unwrap().unwrap();
    assert_eq!(o.error.map(|e| e.name).as_deref(), Some("Interrupted"));
    assert!(!o.summary.timed_out && o.summary.restarted.is_some(), "{:?}", o.summary);
    let o = snippet(&*sb, &a, "'x' in globals()", 20_000).await;
    assert_eq!(o.text(), Some("False"));
    // restart_context starts it afresh
    snippet(&*sb, &j, "var v = 1", 5000).await;
    let info = c.restart_context(&j).await.unwrap();
    assert_eq!(info.execution_count, 0);
    assert_eq!(snippet(&*sb, &j, "typeof v", 5000).await.text(), Some("'undefined'"));
    let r = sb.reset().await.unwrap();
    assert_eq!(r.processes_left, 0);
    assert!(c.list_contexts().await.unwrap().is_empty());
    let e = c.run_code(&a, "1", None, 100, &mut |_| {}).await.unwrap_err();
    assert!(e.to_string().contains("no context"), "{e}");
}

#[tokio::test]
async fn a_guest_recursing_to_its_stack_limit_does_not_take_the_host_down() {
    let state = tempfile::tempdir().unwrap();
    let sb = guest_sandbox(state.path(), SandboxSpec::default()).await;
    let deep = "import sys\nsys.setrecursionlimit(10**7)\ndef f(): return f()\nf()";
    let r = sb.exec(ExecRequest::argv(["python3", "-c", deep]), Vec::new(), &mut Discard).await;
    let r = r.unwrap();
    assert_ne!(r.status.exit_code, Some(0), "{:?}", r.status);
    let r = sb
        .exec(ExecRequest::argv(["python3", "-c", "print('alive')"]), Vec::new(), &mut Discard)
        .await
        .unwrap();
    assert_eq!(r.stdout, b"alive\n");
    sb.destroy().await.unwrap();
}
