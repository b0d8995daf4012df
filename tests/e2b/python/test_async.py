"""The async SDK against the same server."""
import asyncio

from e2b import AsyncSandbox
from e2b_code_interpreter import AsyncSandbox as AsyncCodeSandbox


async def test_commands_and_files(async_sandbox):
    r = await async_sandbox.commands.run("echo async")
    assert r.stdout == "async\n"
    await async_sandbox.files.write("a.txt", "async file")
    assert await async_sandbox.files.read("a.txt") == "async file"
    assert await async_sandbox.files.exists("a.txt")
    entries = await async_sandbox.files.list(".")
    assert "a.txt" in [e.name for e in entries]


async def test_background_stdin_and_kill(async_sandbox):
    h = await async_sandbox.commands.run("cat", background=True, stdin=True)
    await async_sandbox.commands.send_stdin(h.pid, "piped\n")
    await async_sandbox.commands.close_stdin(h.pid)
    r = await h.wait()
    assert r.stdout == "piped\n"
    h2 = await async_sandbox.commands.run("sleep 60", background=True)
    assert h2.pid in [p.pid for p in await async_sandbox.commands.list()]
    assert await async_sandbox.commands.kill(h2.pid)


async def test_watch_dir_stream(async_sandbox):
    await async_sandbox.files.make_dir("w")
    seen = asyncio.Event()
    events = []

    def on_event(e):
        events.append(e)
        if e.name == "f.txt":
            seen.set()

    h = await async_sandbox.files.watch_dir("w", on_event)
    try:
        await async_sandbox.files.write("w/f.txt", "x")
        await asyncio.wait_for(seen.wait(), 10)
    finally:
        await h.stop()
    assert any(e.name == "f.txt" for e in events)


async def test_connect_and_timeout(async_sandbox):
    other = await AsyncSandbox.connect(async_sandbox.sandbox_id)
    await other.set_timeout(120)
    assert (await other.commands.run("echo hi")).stdout == "hi\n"


async def test_async_code_interpreter(test_id):
    sbx = await AsyncCodeSandbox.create(metadata={"test": test_id})
    try:
        await sbx.run_code("n = 5")
        ex = await sbx.run_code("print(n * 2)")
        assert ex.logs.stdout == ["10\n"]
    finally:
        await sbx.kill()


async def test_a_watch_ends_when_its_sandbox_goes(test_id):
    sbx = await AsyncSandbox.create(metadata={"test": test_id})
    ended = asyncio.Event()
    h = await sbx.files.watch_dir(".", lambda e: None, on_exit=lambda err: ended.set())
    await sbx.kill()
    await asyncio.wait_for(ended.wait(), 15)
    await h.stop()
