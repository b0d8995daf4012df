//! The frozen wire shape of protocol generation 1. Every request and response variant is
//! serialized and compared with `spec/agent-protocol/v1.jsonl`; every snapshot line must still
//! decode. A change that breaks this breaks older peers: see VERSIONING.md. To record an
//! intended, compatible addition: `UPDATE_SNAPSHOT=1 cargo test -p hutch-proto --test schema_snapshot`.
use std::collections::BTreeMap;

use hutch_proto::*;

fn status() -> ExecStatus {
    ExecStatus {
        exit_code: Some(0),
        signal: None,
        timed_out: false,
        stdout_bytes: 6,
        stderr_bytes: 0,
        stdout_truncated: false,
        stderr_truncated: false,
        duration_us: 1200,
        oom_killed: false,
    }
}

fn context_info() -> ContextInfo {
    ContextInfo {
        context_id: "ctx-1".into(),
        language: "python".into(),
        pid: 9,
        version: "3.11.2".into(),
        execution_count: 3,
        busy: false,
        cwd: "/workspace".into(),
        startup_us: 21_000,
    }
}

fn requests() -> Vec<Request> {
    let exec = ExecRequest {
        command: ExecCommand::Argv(vec!["echo".into(), "hello".into()]),
        env: BTreeMap::from([("K".to_string(), "V".to_string())]),
        cwd: Some("/workspace".into()),
        timeout_ms: Some(30_000),
        output_limit: 1 << 20,
        stdin: StdinMode::Stream,
        pty: None,
    };
    let mut terminal = ExecRequest::argv(["/bin/bash", "-i"]);
    terminal.stdin = StdinMode::Stream;
    terminal.pty = Some(PtySize { rows: 24, cols: 80 });
    let all = vec![
        Request::Hello { id: 1, protocol: 1, client: "hutch/0.1.0".into() },
        Request::Health { id: 2 },
        Request::Exec { id: 3, exec },
        Request::Exec { id: 4, exec: ExecRequest::shell("echo $HOME") },
        Request::Stdin { id: 3 },
        Request::StdinClose { id: 3 },
        Request::Signal { id: 5, exec_id: 3, signal: 15 },
        Request::WriteFile {
            id: 6,
            path: "/workspace/a".into(),
            mode: Some(0o644),
            append: false,
            within: vec!["/workspace".into(), "/tmp".into()],
        },
        Request::ReadFile {
            id: 7,
            path: "/workspace/a".into(),
            offset: 0,
            len: 4194304,
            within: vec![],
        },
        Request::ListDir { id: 8, path: "/workspace".into(), within: vec![] },
        Request::Stat { id: 9, path: "/workspace/a".into(), within: vec![] },
        Request::Remove { id: 10, path: "/workspace/a".into(), recursive: true, within: vec![] },
        Request::MakeDir { id: 11, path: "/workspace/d".into(), parents: true, within: vec![] },
        Request::Rename {
            id: 12,
            from: "/workspace/a".into(),
            to: "/workspace/b".into(),
            within: vec![],
        },
        Request::Reset { id: 14, wipe: vec!["/workspace".into(), "/tmp".into()] },
        Request::ContextCreate {
            id: 15,
            language: "python".into(),
            cwd: Some("/workspace".into()),
            env: BTreeMap::from([("K".to_string(), "V".to_string())]),
        },
        Request::ContextRun {
            id: 16,
            context_id: "ctx-1".into(),
            timeout_ms: Some(30_000),
            output_limit: 1 << 20,
        },
        Request::ContextInterrupt { id: 17, context_id: "ctx-1".into() },
        Request::ContextRestart { id: 18, context_id: "ctx-1".into() },
        Request::ContextDelete { id: 19, context_id: "ctx-1".into() },
        Request::ContextList { id: 20 },
        Request::Exec { id: 21, exec: terminal },
        Request::PtyResize { id: 22, exec_id: 21, size: PtySize { rows: 50, cols: 132 } },
        Request::Shutdown { id: 13 },
    ];
    // Exhaustiveness: a new variant must be added above (this match stops compiling otherwise).
    for r in &all {
        match r {
            Request::Hello { .. }
            | Request::Health { .. }
            | Request::Exec { .. }
            | Request::Stdin { .. }
            | Request::StdinClose { .. }
            | Request::Signal { .. }
            | Request::PtyResize { .. }
            | Request::WriteFile { .. }
            | Request::ReadFile { .. }
            | Request::ListDir { .. }
            | Request::Stat { .. }
            | Request::Remove { .. }
            | Request::MakeDir { .. }
            | Request::Rename { .. }
            | Request::Reset { .. }
            | Request::ContextCreate { .. }
            | Request::ContextRun { .. }
            | Request::ContextInterrupt { .. }
            | Request::ContextRestart { .. }
            | Request::ContextDelete { .. }
            | Request::ContextList { .. }
            | Request::Shutdown { .. } => {}
        }
    }
    all
}

fn responses() -> Vec<Response> {
    let all = vec![
        Response::HelloOk {
            id: 1,
            protocol: 1,
            agent_version: "0.1.0".into(),
            features: vec!["exec".into()],
            uptime_us: 850,
        },
        Response::HealthOk { id: 2, uptime_ms: 10, processes: 1 },
        Response::Started { id: 3, pid: 7 },
        Response::Stdout { id: 3 },
        Response::Stderr { id: 3 },
        Response::Exited { id: 3, status: status() },
        Response::Ok { id: 6 },
        Response::FileData { id: 7, offset: 0, eof: true, size: 6 },
        Response::Entries {
            id: 8,
            entries: vec![DirEntry { name: "a".into(), kind: FileKind::File, size: 6 }],
        },
        Response::StatOk {
            id: 9,
            stat: FileStat {
                path: "/workspace/a".into(),
                kind: FileKind::Symlink,
                size: 1,
                mode: 0o777,
                mtime: 1,
                symlink_target: Some("b".into()),
                uid: Some(1000),
                gid: Some(1000),
            },
        },
        Response::ResetOk { id: 14, processes_left: 0, entries_left: 0 },
        Response::ContextCreated { id: 15, context: context_info() },
        Response::ContextResult {
            id: 16,
            main: true,
            data: BTreeMap::from([("text/plain".to_string(), serde_json::json!("2"))]),
        },
        Response::ContextError {
            id: 16,
            error: CodeError {
                name: "ZeroDivisionError".into(),
                value: "division by zero".into(),
                traceback: vec!["line 1".into()],
            },
        },
        Response::ContextDone {
            id: 16,
            summary: RunSummary {
                execution_count: 3,
                timed_out: false,
                restarted: None,
                stdout_truncated: false,
                stderr_truncated: false,
                exit_code: None,
                duration_us: 150,
            },
        },
        Response::Contexts { id: 20, contexts: vec![context_info()] },
        Response::Error {
            id: 10,
            code: ErrorCode::NotFound,
            message: "remove /workspace/a: No such file or directory".into(),
        },
    ];
    for r in &all {
        match r {
            Response::HelloOk { .. }
            | Response::HealthOk { .. }
            | Response::Started { .. }
            | Response::Stdout { .. }
            | Response::Stderr { .. }
            | Response::Exited { .. }
            | Response::Ok { .. }
            | Response::FileData { .. }
            | Response::Entries { .. }
            | Response::StatOk { .. }
            | Response::ResetOk { .. }
            | Response::ContextCreated { .. }
            | Response::ContextResult { .. }
            | Response::ContextError { .. }
            | Response::ContextDone { .. }
            | Response::Contexts { .. }
            | Response::Error { .. } => {}
        }
    }
    all
}

fn render() -> String {
    let mut out = String::new();
    for r in requests() {
        out.push_str(&format!("request {}\n", serde_json::to_string(&r).expect("serialize")));
    }
    for r in responses() {
        out.push_str(&format!("response {}\n", serde_json::to_string(&r).expect("serialize")));
    }
    out
}

fn snapshot_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../spec/agent-protocol/v1.jsonl")
}

#[test]
fn wire_shape_matches_the_frozen_snapshot() {
    let now = render();
    let path = snapshot_path();
    if std::env::var("UPDATE_SNAPSHOT").is_ok() {
        std::fs::write(&path, &now).expect("write snapshot");
    }
    let frozen = std::fs::read_to_string(&path).expect("read spec/agent-protocol/v1.jsonl");
    assert_eq!(
        now, frozen,
        "the agent protocol's wire shape changed; see crates/hutch-proto/VERSIONING.md"
    );
}

#[test]
fn every_snapshot_line_still_decodes() {
    let frozen = std::fs::read_to_string(snapshot_path()).expect("read snapshot");
    for line in frozen.lines() {
        let (kind, json) = line.split_once(' ').expect("kind and json");
        match kind {
            "request" => drop(
                serde_json::from_str::<Request>(json).unwrap_or_else(|e| panic!("{line}: {e}")),
            ),
            "response" => drop(
                serde_json::from_str::<Response>(json).unwrap_or_else(|e| panic!("{line}: {e}")),
            ),
            other => panic!("unknown snapshot line kind {other}"),
        }
    }
}

#[test]
fn older_peers_omitting_optional_fields_still_decode() {
    // generation-1 rule: added fields are optional, so a minimal message from an older peer decodes
    let r: Request =
        serde_json::from_str(r#"{"op":"exec","id":1,"exec":{"command":{"argv":["true"]}}}"#)
            .expect("minimal exec");
    match r {
        Request::Exec { exec, .. } => {
            assert_eq!(exec.output_limit, 1 << 20);
            assert_eq!(exec.stdin, StdinMode::Null);
        }
        other => panic!("{other:?}"),
    }
    let s: Response =
        serde_json::from_str(r#"{"op":"exited","id":1,"status":{"exit_code":0,"signal":null}}"#)
            .expect("minimal exited");
    assert!(
        matches!(s, Response::Exited { status, .. } if !status.oom_killed && !status.timed_out)
    );
    // an error code from a newer agent decodes as unknown
    let e: Response =
        serde_json::from_str(r#"{"op":"error","id":1,"code":"quota_exceeded","message":"x"}"#)
            .expect("unknown code");
    assert!(matches!(e, Response::Error { code: ErrorCode::Unknown, .. }));
}
