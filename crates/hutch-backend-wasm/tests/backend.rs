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
