"""The client without a daemon: request building beyond the vectors, retries (against an
in-process mock transport), Server-Sent Events folding, URLs and the environment."""

from __future__ import annotations

import base64
import json
from typing import Any, Callable, List

import httpx
import pytest

import hutch
from hutch import _transport as transport


def mock_client(handler: Callable[[httpx.Request], httpx.Response]) -> hutch.Hutch:
    c = hutch.Hutch("http://127.0.0.1:1", max_retries=2)
    c._http = httpx.Client(base_url="http://127.0.0.1:1", transport=httpx.MockTransport(handler))
    return c


def error(status: int, code: str, retry_after: Any = "0") -> httpx.Response:
    headers = {"retry-after": retry_after} if retry_after is not None else {}
    return httpx.Response(status, json={"code": code, "message": code.replace("_", " ")}, headers=headers)


SANDBOX = {
    "id": "hutch-0123456789ab",
    "state": "waiting",
    "backend": "container:crun",
    "metadata": {},
    "created_at": 1,
    "last_used_at": 1,
    "expires_at": None,
    "spec": {},
}


def test_capacity_is_retried_after_retry_after() -> None:
    seen: List[str] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req.method)
        return error(503, "capacity_exceeded") if len(seen) < 3 else httpx.Response(201, json=SANDBOX)

    sb = hutch.Sandbox.create(mock_client(handler))
    assert sb.id == SANDBOX["id"] and seen == ["POST"] * 3


def test_retries_stop_at_max_retries() -> None:
    seen: List[int] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(1)
        return error(429, "rate_limited")

    with pytest.raises(hutch.RateLimitError):
        mock_client(handler).pools.list()
    assert len(seen) == 3  # the first try and max_retries=2


@pytest.mark.parametrize(
    "response",
    [error(503, "backend_unavailable"), error(503, "capacity_exceeded", None), error(500, "internal")],
)
def test_other_errors_are_not_retried(response: httpx.Response) -> None:
    seen: List[int] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(1)
        return response

    with pytest.raises(hutch.HutchError):
        mock_client(handler).pools.list()
    assert len(seen) == 1


def test_exec_and_run_are_never_retried() -> None:
    seen: List[str] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req.url.path)
        if req.url.path == "/v1/sandboxes/hutch-0123456789ab":
            return httpx.Response(200, json=SANDBOX)
        return error(429, "rate_limited")

    c = mock_client(handler)
    sb = hutch.Sandbox.connect(SANDBOX["id"], client=c)
    with pytest.raises(hutch.RateLimitError):
        sb.commands.run("true")
    with pytest.raises(hutch.RateLimitError):
        sb.commands.run("true", on_stdout=print)
    ctx = hutch.Context(sb, hutch.ContextInfo.from_json({"context_id": "ctx-1", "language": "python"}))
    with pytest.raises(hutch.RateLimitError):
        ctx.run("1")
    assert seen[1:] == [
        "/v1/sandboxes/hutch-0123456789ab/exec",
        "/v1/sandboxes/hutch-0123456789ab/exec/stream",
        "/v1/sandboxes/hutch-0123456789ab/contexts/ctx-1/run",
    ]


def test_a_lost_connection_is_retried_for_get_only() -> None:
    seen: List[str] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(req.method)
        if len(seen) == 1:
            raise httpx.ReadError("connection reset")
        return httpx.Response(200, json={"pools": []})

    assert mock_client(handler).pools.list() == []
    assert seen == ["GET", "GET"]

    def broken(req: httpx.Request) -> httpx.Response:
        seen.append(req.method)
        raise httpx.ReadError("connection reset")

    seen.clear()
    with pytest.raises(hutch.DaemonUnavailableError, match="lost the connection"):
        mock_client(broken).keys.create("k")
    assert seen == ["POST"]


def test_sse_streams_through_the_client() -> None:
    body = (
        b'event: started\ndata: {"pid":5}\n\n: keep-alive\n\n'
        b'event: stdout\ndata: {"data":"a\\n"}\n\n'
        b'event: stderr\ndata: {"data":"b\\n"}\n\n'
        b'event: exit\ndata: {"exit_code":0,"signal":null,"timed_out":false,'
        b'"oom_killed":false,"duration_ms":1.0}\n\n'
    )

    def handler(req: httpx.Request) -> httpx.Response:
        if req.method == "GET":
            return httpx.Response(200, json=SANDBOX)
        assert req.headers["accept"] == "text/event-stream"
        assert json.loads(req.content) == {"command": ["echo"]}
        return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})

    sb = hutch.Sandbox.connect(SANDBOX["id"], client=mock_client(handler))
    events = list(sb.commands.stream(["echo"]))
    assert [(e.kind, e.data) for e in events[:2]] == [("stdout", b"a\n"), ("stderr", b"b\n")]
    out: List[str] = []
    r = sb.commands.run(["echo"], on_stdout=out.append)
    assert (r.exit_code, r.stdout, r.stderr, out) == (0, "a\n", "b\n", ["a\n"])


def test_every_operation_builds_and_decodes() -> None:
    # operations the vectors do not cover still have a builder and a decoder (or stream)
    streams = {"sandbox.exec_stream", "processes.attach", "contexts.run_stream"}
    for op in transport.OPERATIONS:
        assert (op in streams) == transport.build(
            op,
            {
                "id": "x",
                "pid": 1,
                "context_id": "c",
                "name": "n",
                "path": "p",
                "src": "a",
                "dst": "b",
                "data": b"",
                "ttl_seconds": 1,
                "shell": "true",
            },
        ).sse, op


def test_never_retried_operations() -> None:
    for op in ("sandbox.exec", "sandbox.exec_stream", "contexts.run", "contexts.run_stream"):
        assert not transport.build(op, {"id": "x", "context_id": "c", "shell": "true", "code": "1"}).retry


@pytest.mark.parametrize(
    "status,code,header,want",
    [
        (503, "capacity_exceeded", "1", 1.0),
        (429, "rate_limited", "2", 2.0),
        (503, "backend_unavailable", "1", None),
        (503, "capacity_exceeded", None, None),
        (500, "internal", "1", None),
    ],
)
def test_retry_after(status: int, code: str, header: Any, want: Any) -> None:
    headers = {"retry-after": header} if header else {}
    assert transport.retry_after(status, json.dumps({"code": code, "message": ""}).encode(), headers) == want


def test_sse_decoder_skips_keepalives_and_joins_data_lines() -> None:
    dec = transport.SseDecoder()
    lines = [
        ":",
        "event: stdout",
        'data: {"data":',
        'data: "a"}',
        "",
        ": keep-alive",
        "",
        "event: exit",
        'data: {"exit_code":0}',
        "",
    ]
    events = [ev for ev in (dec.feed(line) for line in lines) if ev is not None]
    assert events == [("stdout", {"data": "a"}), ("exit", {"exit_code": 0})]


def test_command_stream_keeps_exact_bytes_and_whole_characters() -> None:
    seen: List[str] = []
    fold = transport.CommandStream(on_stdout=seen.append)
    e = "é".encode()  # two bytes, split across chunks
    fold.feed("started", {"pid": 3})
    fold.feed("stdout", {"data": "\ufffd", "b64": base64.b64encode(e[:1]).decode()})
    fold.feed("stdout", {"data": "\ufffd", "b64": base64.b64encode(e[1:] + b"\xff").decode()})
    ev = fold.feed(
        "exit", {"exit_code": 0, "signal": None, "timed_out": False, "oom_killed": False, "duration_ms": 1.0}
    )
    assert ev is not None and ev.kind == "exit"
    result = fold.finish()
    assert fold.pid == 3
    assert result.stdout_bytes == e + b"\xff"
    assert "".join(seen) == "é\ufffd"


def test_run_stream_failure_raises_the_code() -> None:
    fold = transport.RunStream()
    fold.feed("error", {"name": "not_found", "value": "no context ctx-9", "traceback": []})
    with pytest.raises(hutch.NotFoundError, match="no context ctx-9"):
        fold.finish()


def test_urls() -> None:
    assert str(hutch.Hutch("unix:///tmp/x.sock")._endpoint) == "/tmp/x.sock"
    assert hutch.Hutch("http://127.0.0.1:7070")._endpoint.base_url == "http://127.0.0.1:7070"
    with pytest.raises(ValueError):
        hutch.Hutch("unix://relative.sock")
    with pytest.raises(ValueError):
        hutch.Hutch("127.0.0.1:7070")


def test_environment_configures_the_client(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HUTCH_URL", "http://127.0.0.1:7070")
    monkeypatch.setenv("HUTCH_API_KEY", "hutch_secret")
    c = hutch.Hutch()
    assert c.url == "http://127.0.0.1:7070"
    assert c._http.headers["authorization"] == "Bearer hutch_secret"
    monkeypatch.delenv("HUTCH_URL")
    monkeypatch.delenv("HUTCH_API_KEY")
    c = hutch.Hutch()
    assert c.url == "unix:///run/hutch/hutch.sock"
    assert "authorization" not in c._http.headers
