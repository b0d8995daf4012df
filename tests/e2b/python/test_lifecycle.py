"""Sandboxes through the control plane: create, info, timeout, list, connect, kill."""
from datetime import datetime, timezone

import pytest
from e2b import Sandbox, SandboxQuery, SandboxState
from e2b.exceptions import NotFoundException, SandboxException


def test_create_runs_as_the_template_user_in_its_home(sandbox):
    r = sandbox.commands.run("whoami && pwd && echo $HOME")
    assert r.stdout.split() == ["user", "/home/user", "/home/user"]
    assert sandbox.is_running()


def test_env_vars_from_create_reach_every_command(test_id):
    sbx = Sandbox.create(envs={"GREETING": "hello"}, metadata={"test": test_id})
    try:
        assert sbx.commands.run("echo $GREETING").stdout == "hello\n"
    finally:
        sbx.kill()


def test_info_and_set_timeout(sandbox):
    info = sandbox.get_info()
    assert info.sandbox_id == sandbox.sandbox_id
    assert info.template_id == "base"
    assert info.state == SandboxState.RUNNING
    before = info.end_at
    sandbox.set_timeout(600)
    after = sandbox.get_info().end_at
    assert after > before
    assert (after - datetime.now(timezone.utc)).total_seconds() > 500


def test_list_filters_by_metadata(sandbox, test_id):
    found = Sandbox.list(query=SandboxQuery(metadata={"test": test_id})).next_items()
    assert [s.sandbox_id for s in found] == [sandbox.sandbox_id]
    assert found[0].metadata == {"test": test_id}
    assert Sandbox.list(query=SandboxQuery(metadata={"test": "nope"})).next_items() == []
    paused = Sandbox.list(query=SandboxQuery(state=[SandboxState.PAUSED])).next_items()
    assert paused == []


def test_list_pages(test_id):
    made = [Sandbox.create(metadata={"test": test_id}) for _ in range(3)]
    try:
        pager = Sandbox.list(query=SandboxQuery(metadata={"test": test_id}), limit=2)
        first = pager.next_items()
        assert len(first) == 2 and pager.has_next
        second = pager.next_items()
        assert len(second) == 1 and not pager.has_next
        ids = {s.sandbox_id for s in first + second}
        assert ids == {s.sandbox_id for s in made}
    finally:
        for s in made:
            s.kill()


def test_connect_from_a_second_client(sandbox):
    sandbox.files.write("shared.txt", "from the first client")
    other = Sandbox.connect(sandbox.sandbox_id)
    assert other.files.read("shared.txt") == "from the first client"
    assert other.commands.run("cat shared.txt").stdout == "from the first client"


def test_kill_then_gone(test_id):
    sbx = Sandbox.create(metadata={"test": test_id})
    sid = sbx.sandbox_id
    assert sbx.kill() is True
    assert Sandbox.kill(sid) is False
    assert not sbx.is_running()
    with pytest.raises(NotFoundException):
        Sandbox.connect(sid)


def test_expires_at_its_timeout(test_id):
    sbx = Sandbox.create(timeout=2, metadata={"test": test_id})
    import time

    deadline = time.time() + 20
    while time.time() < deadline and sbx.is_running():
        time.sleep(0.5)
    assert not sbx.is_running()


def test_an_idle_sandbox_lives_until_its_timeout(sandbox):
    # the test daemon's --idle-timeout is 2 s
    import time

    time.sleep(4)
    assert sandbox.is_running()
    assert sandbox.commands.run("echo still here").stdout == "still here\n"


def test_unknown_template_is_a_clear_error():
    with pytest.raises(SandboxException, match="template 'no-such-template' not found"):
        Sandbox.create(template="no-such-template")


def test_pause_names_what_is_missing(sandbox):
    with pytest.raises(SandboxException, match="pausing a sandbox is not supported"):
        sandbox.pause()


def test_metrics_answer(sandbox):
    assert sandbox.get_metrics() == []
