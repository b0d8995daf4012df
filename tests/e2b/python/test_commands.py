"""Commands through envd's process service: foreground, background, streaming, stdin, kill."""
import time

import pytest
from e2b.exceptions import TimeoutException
from e2b.sandbox.commands.command_handle import CommandExitException


def test_foreground_with_streaming_callbacks(sandbox):
    out, err = [], []
    r = sandbox.commands.run(
        "echo one; echo two >&2; echo three",
        on_stdout=out.append,
        on_stderr=err.append,
    )
    assert r.exit_code == 0
    assert r.stdout == "one\nthree\n"
    assert r.stderr == "two\n"
    assert "".join(out) == "one\nthree\n"
    assert "".join(err) == "two\n"


def test_nonzero_exit_raises_with_the_result(sandbox):
    with pytest.raises(CommandExitException) as e:
        sandbox.commands.run("echo bad >&2; exit 3")
    assert e.value.exit_code == 3
    assert e.value.stderr == "bad\n"


def test_cwd_and_envs(sandbox):
    sandbox.files.make_dir("/tmp/work")
    r = sandbox.commands.run("pwd; echo $X", cwd="/tmp/work", envs={"X": "42"})
    assert r.stdout == "/tmp/work\n42\n"


def test_background_list_and_kill(sandbox):
    h = sandbox.commands.run("sleep 60", background=True)
    assert h.pid > 0
    pids = [p.pid for p in sandbox.commands.list()]
    assert h.pid in pids
    listed = next(p for p in sandbox.commands.list() if p.pid == h.pid)
    assert listed.cmd == "/bin/bash"
    assert sandbox.commands.kill(h.pid) is True
    with pytest.raises(CommandExitException):
        h.wait()
    assert h.pid not in [p.pid for p in sandbox.commands.list()]
    assert sandbox.commands.kill(h.pid) is False


def test_background_output_streams_while_running(sandbox):
    seen = []
    h = sandbox.commands.run(
        "for i in 1 2 3; do echo tick $i; sleep 0.3; done",
        background=True,
    )
    r = h.wait(on_stdout=seen.append)
    assert r.stdout == "tick 1\ntick 2\ntick 3\n"
    assert "".join(seen) == r.stdout


def test_background_survives_disconnect_and_connect_by_pid(sandbox):
    h = sandbox.commands.run("sleep 1; echo done", background=True)
    h.disconnect()
    again = sandbox.commands.connect(h.pid)
    r = again.wait()
    assert r.exit_code == 0
    assert "done" in r.stdout


def test_stdin_send_and_close(sandbox):
    h = sandbox.commands.run("cat", background=True, stdin=True)
    sandbox.commands.send_stdin(h.pid, "hello\n")
    sandbox.commands.send_stdin(h.pid, "world\n")
    sandbox.commands.close_stdin(h.pid)
    r = h.wait()
    assert r.stdout == "hello\nworld\n"


def test_command_timeout(sandbox):
    t = time.time()
    with pytest.raises(TimeoutException):
        sandbox.commands.run("sleep 30", timeout=1)
    assert time.time() - t < 15


def test_tools_of_the_base_template(sandbox):
    r = sandbox.commands.run("python3 -c 'print(6*7)' && bash --version | head -1 && command -v curl")
    lines = r.stdout.splitlines()
    assert lines[0] == "42"
    assert "bash" in lines[1]
    assert lines[2].endswith("curl")


def test_pty_session_with_input_and_resize(sandbox):
    from e2b.sandbox.commands.command_handle import PtySize

    out = bytearray()
    h = sandbox.pty.create(PtySize(rows=24, cols=80))
    # the first size is taken before the resize: the shell waits for the go file
    sandbox.pty.send_stdin(
        h.pid,
        b"echo $((6*7)); stty size > f && mv f first; until [ -e go ]; do sleep 0.1; done; "
        b"stty size; tty; exit 0\n",
    )
    deadline = time.time() + 10
    while not sandbox.files.exists("first") and time.time() < deadline:
        time.sleep(0.1)
    sandbox.pty.resize(h.pid, PtySize(rows=50, cols=132))
    sandbox.files.write("go", "")
    r = h.wait(on_pty=out.extend)
    text = out.decode(errors="replace")
    assert r.exit_code == 0
    assert sandbox.files.read("first") == "24 80\n"
    assert "42" in text
    assert "50 132" in text
    assert "/dev/pts/" in text


def test_running_as_root_is_a_clear_error(sandbox):
    with pytest.raises(Exception, match="user 'root'"):
        sandbox.commands.run("id", user="root")
