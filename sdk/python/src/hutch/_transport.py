"""The wire layer, without a network: an operation name and its arguments become a ``Request``
(method, path with query, headers, body), and a response's status and bytes become a typed value
or a typed error. The sync and async clients only move these requests; the shared test vectors
(spec/test-vectors/sdk-v1.json) check this module directly.

Operation names follow the vectors: ``sandboxes.create``, ``sandbox.exec``, ``files.write``, ...
(``OPERATIONS`` lists them all).
"""

from __future__ import annotations

import base64
import codecs
import json
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple, Union
from urllib.parse import quote

from .errors import HutchError, error_for
from .models import (
    CommandResult,
    ContextInfo,
    Entry,
    Execution,
    ExecutionError,
    FileInfo,
    Key,
    Limits,
    PoolInfo,
    ProcessInfo,
    Result,
    SandboxInfo,
    StreamEvent,
)

__all__ = [
    "Request",
    "OPERATIONS",
    "build",
    "decode",
    "error_from_response",
    "retry_after",
    "SseDecoder",
    "CommandStream",
    "RunStream",
]

JSON = "application/json"
OCTET = "application/octet-stream"
SSE = "text/event-stream"

# Error codes after which the daemon did nothing and asks to come back (with Retry-After).
RETRYABLE_CODES = frozenset({"capacity_exceeded", "rate_limited"})
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "DELETE"})


class Request:
    """One HTTP request to the daemon. ``json`` and ``body`` are exclusive; ``sse`` marks a
    Server-Sent Events response; ``retry`` is False for requests that must never be sent twice
    (running a command or a snippet)."""

    __slots__ = ("method", "path", "headers", "json", "body", "sse", "retry")

    def __init__(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        body: Optional[bytes] = None,
        content_type: Optional[str] = None,
        sse: bool = False,
        retry: bool = True,
    ) -> None:
        self.method = method
        self.path = path
        self.json = json
        self.body = body
        self.sse = sse
        self.retry = retry
        headers: Dict[str, str] = {}
        if json is not None:
            headers["content-type"] = JSON
        elif content_type is not None:
            headers["content-type"] = content_type
        if sse:
            headers["accept"] = SSE
        self.headers = headers

    @property
    def content(self) -> Optional[bytes]:
        """The body as sent."""
        if self.json is not None:
            return json.dumps(self.json, separators=(",", ":")).encode()
        return self.body

    @property
    def idempotent(self) -> bool:
        return self.method in IDEMPOTENT_METHODS

    def __repr__(self) -> str:
        return f"Request({self.method} {self.path})"


# ---------------------------------------------------------------------------------------------
# building


def _seg(v: Any) -> str:
    """One path segment, escaped."""
    return quote(str(v), safe="")


def _query(pairs: Iterable[Tuple[str, Any]]) -> str:
    parts = []
    for k, v in pairs:
        if v is None:
            continue
        if isinstance(v, bool):
            v = "true" if v else "false"
        parts.append(f"{k}={quote(str(v), safe='')}")
    return "?" + "&".join(parts) if parts else ""


def _body(a: Mapping[str, Any], keys: Iterable[str]) -> Dict[str, Any]:
    return {k: a[k] for k in keys if a.get(k) is not None}


def _limits(v: Any) -> Any:
    return v.to_dict() if isinstance(v, Limits) else v


def _sb(a: Mapping[str, Any]) -> str:
    return "/v1/sandboxes/" + _seg(a["id"])


def _as_bytes(v: Union[str, bytes, bytearray, memoryview]) -> bytes:
    return v.encode() if isinstance(v, str) else bytes(v)


_SHAPE_KEYS = ("backend", "runtime", "image", "rootfs", "limits", "env", "contexts")


def _create_sandbox(a: Mapping[str, Any]) -> Request:
    body = _body(a, _SHAPE_KEYS + ("metadata", "ttl_seconds", "pool"))
    if "limits" in body:
        body["limits"] = _limits(body["limits"])
    return Request("POST", "/v1/sandboxes", json=body)


def _metadata_filter(m: Optional[Mapping[str, str]]) -> Optional[str]:
    if not m:
        return None
    return ",".join(f"{k}:{v}" for k, v in m.items())


def _list_sandboxes(a: Mapping[str, Any]) -> Request:
    q = _query(
        [
            ("state", a.get("state")),
            ("pool", a.get("pool")),
            ("backend", a.get("backend")),
            ("metadata", _metadata_filter(a.get("metadata"))),
            ("include_stopped", a.get("include_stopped") or None),
            ("limit", a.get("limit")),
        ]
    )
    return Request("GET", "/v1/sandboxes" + q)


def exec_body(a: Mapping[str, Any]) -> Dict[str, Any]:
    """An ``ExecRequest``: ``command`` (argv) or ``shell`` (a script); ``stdin`` as text when it
    is a str, as ``stdin_b64`` when it is bytes."""
    body: Dict[str, Any] = {}
    if a.get("command") is not None:
        body["command"] = list(a["command"])
    if a.get("shell") is not None:
        body["shell"] = a["shell"]
    for k in ("env", "cwd", "timeout_ms"):
        if a.get(k) is not None:
            body[k] = a[k]
    stdin = a.get("stdin")
    if isinstance(stdin, str):
        body["stdin"] = stdin
    elif stdin is not None:
        body["stdin_b64"] = base64.b64encode(bytes(stdin)).decode()
    if a.get("stdin_b64") is not None:
        body["stdin_b64"] = a["stdin_b64"]
    return body


def _proc(a: Mapping[str, Any]) -> str:
    return f"{_sb(a)}/processes/{int(a['pid'])}"


def _write_file(a: Mapping[str, Any]) -> Request:
    mode = a.get("mode")
    if isinstance(mode, int):
        mode = format(mode, "o")
    data = base64.b64decode(a["data_b64"]) if "data_b64" in a else _as_bytes(a["data"])
    q = _query([("path", a["path"]), ("mode", mode)])
    return Request("PUT", f"{_sb(a)}/files{q}", body=data, content_type=OCTET)


def _ctx(a: Mapping[str, Any]) -> str:
    return f"{_sb(a)}/contexts/{_seg(a['context_id'])}"


def _create_pool(a: Mapping[str, Any]) -> Request:
    body = _body(a, ("name", "size", "max", "reuse", "template"))
    t = body.get("template")
    if isinstance(t, Mapping) and isinstance(t.get("limits"), Limits):
        body["template"] = {**t, "limits": t["limits"].to_dict()}
    return Request("POST", "/v1/pools", json=body)


Builder = Callable[[Mapping[str, Any]], Request]

_BUILDERS: Dict[str, Builder] = {
    "health": lambda a: Request("GET", "/v1/health"),
    "version": lambda a: Request("GET", "/v1/version"),
    "metrics": lambda a: Request("GET", "/metrics"),
    "sandboxes.create": _create_sandbox,
    "sandboxes.get": lambda a: Request("GET", _sb(a)),
    "sandboxes.list": _list_sandboxes,
    "sandboxes.delete": lambda a: Request("DELETE", _sb(a)),
    "sandboxes.set_ttl": lambda a: Request("POST", _sb(a) + "/ttl", json={"ttl_seconds": a["ttl_seconds"]}),
    "sandbox.exec": lambda a: Request("POST", _sb(a) + "/exec", json=exec_body(a), retry=False),
    "sandbox.exec_stream": lambda a: Request(
        "POST", _sb(a) + "/exec/stream", json=exec_body(a), sse=True, retry=False
    ),
    "processes.start": lambda a: Request("POST", _sb(a) + "/processes", json=exec_body(a)),
    "processes.list": lambda a: Request("GET", _sb(a) + "/processes"),
    "processes.get": lambda a: Request("GET", _proc(a)),
    "processes.signal": lambda a: Request(
        "POST", _proc(a) + "/signal", json={"signal": int(a.get("signal", 15))}
    ),
    "processes.write_stdin": lambda a: Request(
        "POST", _proc(a) + "/stdin", body=_as_bytes(a["data"]), content_type=OCTET
    ),
    "processes.close_stdin": lambda a: Request("POST", _proc(a) + "/stdin/close"),
    "processes.logs": lambda a: Request("GET", _proc(a) + "/logs"),
    "processes.attach": lambda a: Request("GET", _proc(a) + "/attach", sse=True),
    "files.write": _write_file,
    "files.read": lambda a: Request("GET", f"{_sb(a)}/files{_query([('path', a['path'])])}"),
    "files.list": lambda a: Request("GET", f"{_sb(a)}/files/list{_query([('path', a['path'])])}"),
    "files.stat": lambda a: Request("GET", f"{_sb(a)}/files/stat{_query([('path', a['path'])])}"),
    "files.make_dir": lambda a: Request(
        "POST",
        _sb(a) + "/files/mkdir",
        json={"path": a["path"], "parents": bool(a.get("parents", False))},
    ),
    "files.remove": lambda a: Request(
        "DELETE",
        f"{_sb(a)}/files{_query([('path', a['path']), ('recursive', a.get('recursive') or None)])}",
    ),
    "files.rename": lambda a: Request(
        "POST", _sb(a) + "/files/move", json={"from": a["src"], "to": a["dst"]}
    ),
    "contexts.create": lambda a: Request(
        "POST", _sb(a) + "/contexts", json=_body(a, ("language", "cwd", "env"))
    ),
    "contexts.list": lambda a: Request("GET", _sb(a) + "/contexts"),
    "contexts.run": lambda a: Request(
        "POST", _ctx(a) + "/run", json=_body(a, ("code", "timeout_ms")), retry=False
    ),
    "contexts.run_stream": lambda a: Request(
        "POST", _ctx(a) + "/run/stream", json=_body(a, ("code", "timeout_ms")), sse=True, retry=False
    ),
    "contexts.restart": lambda a: Request("POST", _ctx(a) + "/restart"),
    "contexts.interrupt": lambda a: Request("POST", _ctx(a) + "/interrupt"),
    "contexts.delete": lambda a: Request("DELETE", _ctx(a)),
    "pools.create": _create_pool,
    "pools.list": lambda a: Request("GET", "/v1/pools"),
    "pools.get": lambda a: Request("GET", "/v1/pools/" + _seg(a["name"])),
    "pools.delete": lambda a: Request("DELETE", "/v1/pools/" + _seg(a["name"])),
    "keys.create": lambda a: Request(
        "POST", "/v1/keys", json=_body(a, ("name", "admin", "max_sandboxes", "rate_per_minute"))
    ),
    "keys.list": lambda a: Request("GET", "/v1/keys"),
    "keys.revoke": lambda a: Request("DELETE", "/v1/keys/" + _seg(a["id"])),
    "audit.list": lambda a: Request("GET", "/v1/audit" + _query([("limit", a.get("limit"))])),
}


# ---------------------------------------------------------------------------------------------
# decoding


def _json(content: bytes) -> Any:
    return json.loads(content)


def _none(content: bytes) -> None:
    return None


def _logs(content: bytes) -> Tuple[str, str]:
    d = _json(content)
    return d.get("stdout", ""), d.get("stderr", "")


Decoder = Callable[[bytes], Any]

_DECODERS: Dict[str, Decoder] = {
    "health": _json,
    "version": _json,
    "metrics": lambda c: c.decode("utf-8", "replace"),
    "sandboxes.create": lambda c: SandboxInfo.from_json(_json(c)),
    "sandboxes.get": lambda c: SandboxInfo.from_json(_json(c)),
    "sandboxes.list": lambda c: [SandboxInfo.from_json(s) for s in _json(c)["sandboxes"]],
    "sandboxes.delete": _none,
    "sandboxes.set_ttl": lambda c: SandboxInfo.from_json(_json(c)),
    "sandbox.exec": lambda c: CommandResult.from_json(_json(c)),
    "processes.start": lambda c: ProcessInfo.from_json(_json(c)),
    "processes.list": lambda c: [ProcessInfo.from_json(p) for p in _json(c)["processes"]],
    "processes.get": lambda c: ProcessInfo.from_json(_json(c)),
    "processes.signal": _none,
    "processes.write_stdin": _none,
    "processes.close_stdin": _none,
    "processes.logs": _logs,
    "files.write": _none,
    "files.read": lambda c: c,
    "files.list": lambda c: [Entry.from_json(e) for e in _json(c)["entries"]],
    "files.stat": lambda c: FileInfo.from_json(_json(c)),
    "files.make_dir": _none,
    "files.remove": _none,
    "files.rename": _none,
    "contexts.create": lambda c: ContextInfo.from_json(_json(c)),
    "contexts.list": lambda c: [ContextInfo.from_json(x) for x in _json(c)["contexts"]],
    "contexts.run": lambda c: Execution.from_json(_json(c)),
    "contexts.restart": lambda c: ContextInfo.from_json(_json(c)),
    "contexts.interrupt": _none,
    "contexts.delete": _none,
    "pools.create": lambda c: PoolInfo.from_json(_json(c)),
    "pools.list": lambda c: [PoolInfo.from_json(p) for p in _json(c)["pools"]],
    "pools.get": lambda c: PoolInfo.from_json(_json(c)),
    "pools.delete": _none,
    "keys.create": lambda c: Key.from_json(_json(c)),
    "keys.list": lambda c: [Key.from_json(k) for k in _json(c)["keys"]],
    "keys.revoke": _none,
    "audit.list": lambda c: _json(c)["entries"],
}

OPERATIONS: Tuple[str, ...] = tuple(_BUILDERS)


def build(op: str, args: Optional[Mapping[str, Any]] = None) -> Request:
    """The request for operation ``op`` called with ``args``."""
    try:
        builder = _BUILDERS[op]
    except KeyError:
        raise ValueError(f"unknown operation {op!r}") from None
    return builder(args or {})


def error_from_response(status: int, content: bytes) -> HutchError:
    """The typed error for an error response (``{code, message}``, or anything else)."""
    code: Optional[str] = None
    message = ""
    try:
        d = json.loads(content) if content else None
        if isinstance(d, dict):
            code = d.get("code")
            message = d.get("message") or ""
    except ValueError:
        pass
    if not message:
        text = content.decode("utf-8", "replace").strip()[:200]
        message = text or f"HTTP {status}"
    return error_for(status, code, message)


def decode(op: str, status: int, content: bytes) -> Any:
    """The value of operation ``op``'s response, or its typed error raised."""
    if status >= 400:
        raise error_from_response(status, content)
    try:
        decoder = _DECODERS[op]
    except KeyError:
        raise ValueError(f"operation {op!r} has no plain response (it streams)") from None
    return decoder(content)


def retry_after(status: int, content: bytes, headers: Mapping[str, str]) -> Optional[float]:
    """Seconds to wait before sending the request again, or None when it must not be retried:
    only ``429 rate_limited`` and ``503 capacity_exceeded`` with a ``Retry-After`` qualify."""
    if status not in (429, 503):
        return None
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        code = json.loads(content).get("code")
    except (ValueError, AttributeError):
        return None
    if code not in RETRYABLE_CODES:
        return None
    try:
        return max(0.0, min(float(value), 30.0))
    except ValueError:
        return None


# ---------------------------------------------------------------------------------------------
# Server-Sent Events


class SseDecoder:
    """Turns the lines of an event stream into ``(event, data)`` pairs, ``data`` parsed as JSON.
    Comment lines (keep-alives) are skipped."""

    __slots__ = ("_event", "_data")

    def __init__(self) -> None:
        self._event = "message"
        self._data: List[str] = []

    def feed(self, line: str) -> Optional[Tuple[str, Any]]:
        if not line:
            return self.flush()
        if line[0] == ":":
            return None
        name, _, value = line.partition(":")
        if value[:1] == " ":
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        return None

    def flush(self) -> Optional[Tuple[str, Any]]:
        if not self._data:
            self._event = "message"
            return None
        event, data = self._event, "\n".join(self._data)
        self._event, self._data = "message", []
        try:
            return event, json.loads(data)
        except ValueError:
            return event, data


def chunk_bytes(d: Mapping[str, Any]) -> bytes:
    """The exact bytes of an ``OutputChunk`` (``b64`` when the text is not valid UTF-8)."""
    b = d.get("b64")
    return base64.b64decode(b) if b is not None else d.get("data", "").encode()


TextCallback = Callable[[str], Any]


class _Text:
    """Decodes a byte stream to text across chunk boundaries (a character split between two
    chunks is not replaced)."""

    __slots__ = ("_dec",)

    def __init__(self) -> None:
        self._dec = codecs.getincrementaldecoder("utf-8")("replace")

    def __call__(self, b: bytes) -> str:
        return self._dec.decode(b)


class CommandStream:
    """Folds the events of ``exec/stream`` and ``attach`` into ``StreamEvent``s, the output so far
    and, at ``exit``, the ``CommandResult``. Calls the callbacks with text as it arrives."""

    def __init__(
        self, on_stdout: Optional[TextCallback] = None, on_stderr: Optional[TextCallback] = None
    ) -> None:
        self.pid: Optional[int] = None
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.result: Optional[CommandResult] = None
        self.dropped_events = 0
        self._on = {"stdout": on_stdout, "stderr": on_stderr}
        self._text = {"stdout": _Text(), "stderr": _Text()}

    def feed(self, event: str, data: Any) -> Optional[StreamEvent]:
        if event in ("stdout", "stderr"):
            b = chunk_bytes(data)
            (self.stdout if event == "stdout" else self.stderr).extend(b)
            cb = self._on[event]
            if cb is not None:
                text = self._text[event](b)
                if text:
                    cb(text)
            return StreamEvent(event, b)
        if event == "exit":
            self.result = CommandResult.from_exit(data, bytes(self.stdout), bytes(self.stderr))
            return StreamEvent("exit", self.result)
        if event == "started":
            self.pid = data.get("pid")
        elif event == "lagged":
            self.dropped_events += int(data.get("dropped_events", 0))
        elif event == "error":
            raise error_for(None, data.get("code"), data.get("message", "the stream failed"))
        return None

    def finish(self) -> CommandResult:
        if self.result is None:
            raise error_for(None, "sandbox_error", "the output stream ended before the command exited")
        return self.result


ResultCallback = Callable[[Result], Any]


class RunStream:
    """Folds the events of ``contexts/{cid}/run/stream`` into an ``Execution``. An ``error``
    event is the snippet's exception when ``done`` follows, and a failed run when it is last."""

    def __init__(
        self,
        on_stdout: Optional[TextCallback] = None,
        on_stderr: Optional[TextCallback] = None,
        on_result: Optional[ResultCallback] = None,
    ) -> None:
        self._out: List[str] = []
        self._err: List[str] = []
        self._results: List[Result] = []
        self._error: Optional[Dict[str, Any]] = None
        self._done: Optional[Dict[str, Any]] = None
        self._on_stdout = on_stdout
        self._on_stderr = on_stderr
        self._on_result = on_result
        self._text = {"stdout": _Text(), "stderr": _Text()}

    def feed(self, event: str, data: Any) -> None:
        if event in ("stdout", "stderr"):
            text = self._text[event](chunk_bytes(data))
            cb = self._on_stdout if event == "stdout" else self._on_stderr
            (self._out if event == "stdout" else self._err).append(text)
            if cb is not None and text:
                cb(text)
        elif event == "result":
            r = Result.from_json(data)
            self._results.append(r)
            if self._on_result is not None:
                self._on_result(r)
        elif event == "error":
            self._error = data
        elif event == "done":
            self._done = data

    def finish(self) -> Execution:
        if self._done is None:
            e = self._error or {}
            raise error_for(
                None, e.get("name") or "sandbox_error", e.get("value") or "the run ended without a result"
            )
        d = self._done
        return Execution(
            stdout="".join(self._out),
            stderr="".join(self._err),
            results=self._results,
            error=ExecutionError.from_json(self._error) if self._error else None,
            execution_count=d.get("execution_count", 0),
            timed_out=d.get("timed_out", False),
            restarted=d.get("restarted"),
            exit_code=d.get("exit_code"),
            duration_ms=d.get("duration_ms", 0.0),
            stdout_truncated=d.get("stdout_truncated", False),
            stderr_truncated=d.get("stderr_truncated", False),
        )
