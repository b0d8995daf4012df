"""The SDK against a real `hutch serve` (the `daemon` fixture): sandboxes, commands, files,
background processes, code contexts, pools and typed errors, blocking and asyncio. Needs root,
crun, the hutch binary and the guest agent; skipped with the reason otherwise."""

from __future__ import annotations

import os
import time
from typing import List, Tuple

import pytest

import hutch
from hutch import AsyncHutch, AsyncSandbox, Hutch, Limits, Sandbox

# -- sandboxes --------------------------------------------------------------------------------


def test_lifecycle_with_a_context_manager(client: Hutch) -> None:
    with Sandbox.create(client, metadata={"suite": "sdk-python", "case": "lifecycle"}, ttl_seconds=120) as sb:
        assert sb.id.startswith("hutch-")
        assert sb.state == "waiting"
        assert sb.backend.startswith("container:")
        assert sb.metadata == {"suite": "sdk-python", "case": "lifecycle"}
        assert sb.expires_at is not None

        again = Sandbox.connect(sb.id, client=client)
        assert again.id == sb.id and again.state == "waiting"
        listed = Sandbox.list(metadata={"case": "lifecycle"}, client=client)
        assert [s.id for s in listed] == [sb.id]

        before = sb.expires_at
        sb.set_ttl(600)
        assert sb.expires_at is not None and sb.expires_at > before
        assert sb.refresh().state == "waiting"
    # deleted on exit: kept as stopped, gone from the live listing
    assert Sandbox.connect(sb.id, client=client).state == "stopped"
    assert Sandbox.list(metadata={"case": "lifecycle"}, client=client) == []
    stopped = Sandbox.list(metadata={"case": "lifecycle"}, include_stopped=True, client=client)
    assert [(s.id, s.state) for s in stopped] == [(sb.id, "stopped")]


def test_create_with_limits_env_and_runtime(client: Hutch) -> None:
    limits = Limits(memory_bytes=256 * 1024 * 1024, timeout_ms=10_000, pids=32)
    with Sandbox.create(client, runtime="runc", limits=limits, env={"GREETING": "hi"}) as sb:
        assert sb.backend == "container:runc"
        assert sb.info["spec"]["limits"]["memory_bytes"] == 256 * 1024 * 1024
        assert sb.commands.run("echo $GREETING").stdout == "hi\n"


# -- commands ---------------------------------------------------------------------------------


def test_run_exit_codes_argv_env_cwd_and_stdin(sandbox: Sandbox) -> None:
    r = sandbox.commands.run(["python3", "-c", "print(1+1)"])
    assert (r.exit_code, r.stdout, r.stderr, r.ok) == (0, "2\n", "", True)
    assert sandbox.commands.run("echo oops >&2; exit 3").exit_code == 3
    assert sandbox.commands.run("echo oops >&2; exit 3").stderr == "oops\n"
    assert sandbox.commands.run("kill -9 $$").signal == 9
    assert sandbox.commands.run("echo $A-$B", env={"A": "1", "B": "2"}).stdout == "1-2\n"
    assert sandbox.commands.run("pwd", cwd="/tmp").stdout == "/tmp\n"
    assert sandbox.commands.run("wc -c", stdin="abc").stdout.strip() == "3"
    assert sandbox.commands.run(["od", "-An", "-tx1"], stdin=b"\x00\xff").stdout.split() == ["00", "ff"]
    binary = sandbox.commands.run("printf '\\377\\000'")
    assert binary.stdout_bytes == b"\xff\x00"
    slow = sandbox.commands.run("sleep 5", timeout_ms=300)
    assert slow.timed_out and slow.exit_code != 0


def test_run_streams_to_callbacks(sandbox: Sandbox) -> None:
    chunks: List[Tuple[float, str]] = []
    errs: List[str] = []
    r = sandbox.commands.run(
        "for i in 1 2 3; do echo line $i; sleep 0.2; done; echo done >&2",
        on_stdout=lambda s: chunks.append((time.monotonic(), s)),
        on_stderr=errs.append,
    )
    assert r.exit_code == 0
    assert r.stdout == "line 1\nline 2\nline 3\n"
    assert "".join(s for _, s in chunks) == r.stdout
    assert "".join(errs) == "done\n" == r.stderr
    # the output arrived while the command ran, not all at the end
    assert len(chunks) >= 3 and chunks[-1][0] - chunks[0][0] > 0.3


def test_stream_yields_output_then_the_result(sandbox: Sandbox) -> None:
    events = list(sandbox.commands.stream(["sh", "-c", "echo a; echo b >&2; exit 4"]))
    kinds = [e.kind for e in events]
    assert kinds[-1] == "exit" and set(kinds[:-1]) == {"stdout", "stderr"}
    out = b"".join(d for k, d in events if k == "stdout")
    assert out == b"a\n"
    result = events[-1].data
    assert isinstance(result, hutch.CommandResult) and result.exit_code == 4 and result.stderr == "b\n"


# -- files ------------------------------------------------------------------------------------


def test_binary_file_round_trip_and_file_operations(sandbox: Sandbox) -> None:
    data = os.urandom(1024 * 1024)
    files = sandbox.files
    files.make_dir("/workspace/data/sub")
    files.write("/workspace/data/blob.bin", data)
    assert files.read("/workspace/data/blob.bin") == data
    sha = sandbox.commands.run("sha256sum /workspace/data/blob.bin").stdout.split()[0]
    import hashlib

    assert sha == hashlib.sha256(data).hexdigest()

    files.write("data/note.txt", "héllo\n", mode=0o600)
    assert files.read_text("/workspace/data/note.txt") == "héllo\n"
    st = files.stat("data/note.txt")
    assert (st.kind, st.size, st.mode & 0o777) == ("file", len("héllo\n".encode()), 0o600)

    entries = {e.name: e for e in files.list("/workspace/data")}
    assert set(entries) == {"blob.bin", "note.txt", "sub"}
    assert (entries["blob.bin"].kind, entries["blob.bin"].size) == ("file", len(data))
    assert entries["sub"].kind == "dir"

    files.rename("/workspace/data/note.txt", "/workspace/data/sub/note.txt")
    assert not files.exists("/workspace/data/note.txt")
    assert files.exists("/workspace/data/sub/note.txt")
    files.remove("/workspace/data/blob.bin")
    files.remove("/workspace/data", recursive=True)
    assert not files.exists("/workspace/data")


# -- background processes ---------------------------------------------------------------------


def test_background_process_with_stdin_logs_and_wait(sandbox: Sandbox) -> None:
    proc = sandbox.commands.start(["cat"])
    assert proc.pid > 0 and proc.info().running
    proc.send_stdin("hello ")
    proc.send_stdin(b"world\n")
    deadline = time.monotonic() + 5
    while proc.logs()[0] != "hello world\n":
        assert time.monotonic() < deadline, proc.logs()
        time.sleep(0.05)
    proc.close_stdin()
    result = proc.wait(timeout=10)
    assert (result.exit_code, result.stdout) == (0, "hello world\n")
    assert proc.info().exit_code == 0

    sleeper = sandbox.commands.start("echo started; sleep 100")
    with pytest.raises(TimeoutError) as waited:
        sleeper.wait(timeout=0.5)
    assert isinstance(waited.value, hutch.HutchError) and waited.value.code == "timeout"
    assert [p.pid for p in sandbox.commands.list() if p.running] == [sleeper.pid]
    assert sleeper.kill() is True
    killed = sleeper.wait(timeout=10)
    assert (killed.exit_code, killed.signal, killed.stdout) == (None, 9, "started\n")
    assert sleeper.kill() is False  # exited already
    events = list(sleeper.stream())
    assert events[0] == ("stdout", b"started\n") and events[-1].kind == "exit"


# -- code contexts ----------------------------------------------------------------------------


def test_python_context_keeps_state_and_reports_errors(sandbox: Sandbox) -> None:
    ctx = sandbox.contexts.create("python")
    assert ctx.language == "python" and ctx.id
    assert ctx.run("x = 41").error is None
    e = ctx.run("print('side'); x + 1")
    assert (e.text, e.stdout, e.execution_count) == ("42", "side\n", 2)
    failed = ctx.run("1/0")
    assert failed.error is not None and failed.error.name == "ZeroDivisionError"
    assert failed.error.value == "division by zero" and failed.text is None

    out: List[str] = []
    results: List[hutch.Result] = []
    streamed = ctx.run("for i in range(3): print(i)\nx * 2", on_stdout=out.append, on_result=results.append)
    assert "".join(out) == "0\n1\n2\n" == streamed.stdout
    assert streamed.text == "82" and [r.text for r in results] == ["82"]

    assert [c.id for c in sandbox.contexts.list()] == [ctx.id]
    ctx.restart()
    assert ctx.run("'x' in globals()").text == "False"
    ctx.delete()
    assert sandbox.contexts.list() == []


def test_interrupt_stops_a_running_snippet_and_keeps_state(sandbox: Sandbox) -> None:
    import threading

    ctx = sandbox.contexts.create("python")
    ctx.run("kept = 7")
    done: List[hutch.Execution] = []
    runner = threading.Thread(
        target=lambda: done.append(ctx.run("import time\nwhile True: time.sleep(0.05)"))
    )
    runner.start()
    time.sleep(0.5)
    ctx.interrupt()
    runner.join(10)
    assert done and done[0].error is not None and done[0].error.name == "KeyboardInterrupt"
    assert ctx.run("kept").text == "7"


def test_missing_context_streams_a_typed_error(sandbox: Sandbox) -> None:
    ctx = sandbox.contexts.create("bash")
    ctx.delete()
    with pytest.raises(hutch.NotFoundError):
        ctx.run("echo hi", on_stdout=print)


# -- pools ------------------------------------------------------------------------------------


def test_pool_acquire_and_recycle(client: Hutch) -> None:
    pool = client.pools.create("sdk-py", 1, reuse="recycle", template={"limits": {"timeout_ms": 20_000}})
    try:
        assert (pool.name, pool.size, pool.reuse) == ("sdk-py", 1, "recycle")
        deadline = time.monotonic() + 20
        while client.pools.get("sdk-py").members.get("warm", 0) < 1:
            assert time.monotonic() < deadline, client.pools.get("sdk-py")
            time.sleep(0.1)
        assert "sdk-py" in [p.name for p in client.pools.list()]
        with Sandbox.create(client, pool="sdk-py") as sb:
            assert sb.pool == "sdk-py"
            assert sb.commands.run("echo from the pool").stdout == "from the pool\n"
        assert client.pools.get("sdk-py").hits >= 1
    finally:
        client.pools.delete("sdk-py")
    with pytest.raises(hutch.NotFoundError):
        client.pools.get("sdk-py")


def test_keys(client: Hutch) -> None:
    key = client.keys.create("sdk-py-test", rate_per_minute=100)
    assert key.secret and key.secret.startswith("hutch_") and not key.admin
    assert key.id in [k.id for k in client.keys.list()]
    client.keys.revoke(key.id)
    assert [k.revoked_at for k in client.keys.list() if k.id == key.id][0] is not None


# -- errors -----------------------------------------------------------------------------------


def test_typed_errors_from_the_server(client: Hutch, sandbox: Sandbox) -> None:
    with pytest.raises(hutch.NotFoundError) as missing:
        Sandbox.connect("hutch-000000000000", client=client)
    assert missing.value.status == 404 and missing.value.code == "not_found"
    with pytest.raises(hutch.InvalidRequestError) as bad:
        Sandbox.create(client, limits={"memory_bytes": 5})
    assert bad.value.status == 400 and "memory" in bad.value.message
    with pytest.raises(hutch.NotFoundError):
        sandbox.files.read("/workspace/no-such-file")
    with pytest.raises(hutch.PermissionDeniedError):
        sandbox.files.read("/etc/passwd")
    with pytest.raises(hutch.InvalidRequestError):
        sandbox.files.read("../x")
    with pytest.raises(hutch.NotFoundError):
        sandbox.commands.connect(999_999)


def test_a_stopped_sandbox_raises_sandbox_stopped(client: Hutch) -> None:
    sb = Sandbox.create(client)
    sb.kill()
    with pytest.raises(hutch.SandboxStoppedError):
        sb.commands.run("true")


def test_daemon_unavailable_names_the_socket_and_the_fix(tmp_path: os.PathLike[str]) -> None:
    sock = f"{tmp_path}/missing.sock"
    with Hutch(f"unix://{sock}") as c:
        with pytest.raises(hutch.DaemonUnavailableError) as caught:
            Sandbox.create(c)
    msg = str(caught.value)
    assert sock in msg and "start it with: hutch serve" in msg


async def test_async_daemon_unavailable(tmp_path: os.PathLike[str]) -> None:
    async with AsyncHutch(f"unix://{tmp_path}/missing.sock") as c:
        with pytest.raises(hutch.DaemonUnavailableError, match="start it with: hutch serve"):
            await c.health()


# -- asyncio ----------------------------------------------------------------------------------


async def test_async_default_client_from_the_environment(
    daemon: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HUTCH_URL", daemon)
    async with AsyncSandbox.create() as sb:
        assert (await sb.commands.run("echo $((6*7))")).stdout == "42\n"
        assert sb.client.url == daemon


async def test_async_core_flow(daemon: str) -> None:
    async with AsyncHutch(daemon) as client:
        async with AsyncSandbox.create(client, metadata={"suite": "sdk-python-async"}) as sb:
            assert sb.state == "waiting"
            r = await sb.commands.run(["python3", "-c", "print(1+1)"])
            assert (r.exit_code, r.stdout) == (0, "2\n")
            assert (await sb.commands.run("exit 5")).exit_code == 5
            assert (await sb.commands.run("wc -c", stdin=b"abcd")).stdout.strip() == "4"

            lines: List[str] = []
            streamed = await sb.commands.run("echo a; sleep 0.1; echo b", on_stdout=lines.append)
            assert "".join(lines) == "a\nb\n" == streamed.stdout
            events = [e async for e in sb.commands.stream("echo x; exit 2")]
            assert events[0] == ("stdout", b"x\n") and events[-1].data.exit_code == 2  # type: ignore[union-attr]

            blob = os.urandom(64 * 1024)
            await sb.files.write("blob", blob)
            assert await sb.files.read("/workspace/blob") == blob
            assert [e.name for e in await sb.files.list("/workspace")] == ["blob"]
            assert await sb.files.exists("blob") and not await sb.files.exists("nope")

            proc = await sb.commands.start("cat")
            await proc.send_stdin("ping\n")
            await proc.close_stdin()
            done = await proc.wait(timeout=10)
            assert (done.exit_code, done.stdout) == (0, "ping\n")
            assert await proc.logs() == ("ping\n", "")

            ctx = await sb.contexts.create("python")
            await ctx.run("x = 41")
            assert (await ctx.run("x + 1")).text == "42"
            failed = await ctx.run("1/0", on_stderr=lambda s: None)
            assert failed.error is not None and failed.error.name == "ZeroDivisionError"

            again = await AsyncSandbox.connect(sb.id, client=client)
            assert again.id == sb.id
            assert [
                s.id for s in await AsyncSandbox.list(metadata={"suite": "sdk-python-async"}, client=client)
            ] == [sb.id]
        assert (await AsyncSandbox.connect(sb.id, client=client)).state == "stopped"
        with pytest.raises(hutch.NotFoundError):
            await AsyncSandbox.connect("hutch-000000000000", client=client)
        plain = await AsyncSandbox.create(client)
        await plain.kill()
