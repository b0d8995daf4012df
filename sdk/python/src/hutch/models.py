"""The values the API returns, as plain dataclasses. Each keeps what the daemon sent; unknown
fields are ignored, so a newer daemon does not break an older SDK."""

from __future__ import annotations

import base64
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, NamedTuple, Optional, Union

__all__ = [
    "Limits",
    "SandboxInfo",
    "CommandResult",
    "StreamEvent",
    "Entry",
    "FileInfo",
    "ProcessInfo",
    "ContextInfo",
    "Result",
    "ExecutionError",
    "Execution",
    "PoolInfo",
    "Key",
]


def _b64(s: Optional[str]) -> Optional[bytes]:
    return base64.b64decode(s) if s is not None else None


@dataclass
class Limits:
    """Resource limits of a sandbox; a field left as None keeps hutch's secure default."""

    memory_bytes: Optional[int] = None
    cpus: Optional[float] = None
    pids: Optional[int] = None
    timeout_ms: Optional[int] = None
    output_bytes: Optional[int] = None
    workspace_bytes: Optional[int] = None

    def to_dict(self) -> Dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass
class SandboxInfo:
    """A sandbox as the daemon describes it (``GET /v1/sandboxes/{id}``)."""

    id: str
    state: str
    backend: str
    pool: Optional[str]
    metadata: Dict[str, str]
    created_at: Optional[int]
    last_used_at: Optional[int]
    expires_at: Optional[int]
    stopped_at: Optional[int]
    stop_reason: Optional[str]
    raw: Dict[str, Any] = field(repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> SandboxInfo:
        return cls(
            id=d["id"],
            state=d["state"],
            backend=d.get("backend", ""),
            pool=d.get("pool"),
            metadata=d.get("metadata") or {},
            created_at=d.get("created_at"),
            last_used_at=d.get("last_used_at"),
            expires_at=d.get("expires_at"),
            stopped_at=d.get("stopped_at"),
            stop_reason=d.get("stop_reason"),
            raw=d,
        )


@dataclass
class CommandResult:
    """How a command ended and what it printed.

    ``stdout``/``stderr`` are text (invalid UTF-8 replaced); ``stdout_bytes``/``stderr_bytes`` are
    the exact bytes. ``exit_code`` is None when a signal killed the command (``signal``).
    """

    exit_code: Optional[int]
    signal: Optional[int]
    stdout: str
    stderr: str
    stdout_bytes: bytes
    stderr_bytes: bytes
    timed_out: bool
    oom_killed: bool
    duration_ms: float
    stdout_truncated: bool = False
    stderr_truncated: bool = False

    @property
    def ok(self) -> bool:
        """True when the command exited with code 0."""
        return self.exit_code == 0

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> CommandResult:
        """From an exec response (``ExecResult``), which carries the output."""
        out: str = d.get("stdout", "")
        err: str = d.get("stderr", "")
        ob = d.get("stdout_b64")
        eb = d.get("stderr_b64")
        return cls(
            exit_code=d.get("exit_code"),
            signal=d.get("signal"),
            stdout=out,
            stderr=err,
            stdout_bytes=base64.b64decode(ob) if ob is not None else out.encode(),
            stderr_bytes=base64.b64decode(eb) if eb is not None else err.encode(),
            timed_out=d.get("timed_out", False),
            oom_killed=d.get("oom_killed", False),
            duration_ms=d.get("duration_ms", 0.0),
            stdout_truncated=d.get("stdout_truncated", False),
            stderr_truncated=d.get("stderr_truncated", False),
        )

    @classmethod
    def from_exit(cls, d: Dict[str, Any], stdout: bytes, stderr: bytes) -> CommandResult:
        """From a stream's ``exit`` event and the output collected from the stream."""
        return cls(
            exit_code=d.get("exit_code"),
            signal=d.get("signal"),
            stdout=stdout.decode("utf-8", "replace"),
            stderr=stderr.decode("utf-8", "replace"),
            stdout_bytes=stdout,
            stderr_bytes=stderr,
            timed_out=d.get("timed_out", False),
            oom_killed=d.get("oom_killed", False),
            duration_ms=d.get("duration_ms", 0.0),
            stdout_truncated=d.get("stdout_truncated", False),
            stderr_truncated=d.get("stderr_truncated", False),
        )


class StreamEvent(NamedTuple):
    """One event of a command's stream: ``("stdout", bytes)``, ``("stderr", bytes)``, and last
    ``("exit", CommandResult)``. It unpacks like a tuple: ``for kind, data in ...``."""

    kind: str
    data: Union[bytes, CommandResult]


@dataclass
class Entry:
    """One directory entry; ``kind`` is ``file``, ``dir``, ``symlink`` or ``other``."""

    name: str
    kind: str
    size: int

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> Entry:
        return cls(name=d["name"], kind=d["kind"], size=d.get("size", 0))


@dataclass
class FileInfo:
    """Metadata of a file, directory or symlink (``mode``: permission bits, ``mtime``: seconds)."""

    path: str
    kind: str
    size: int
    mode: int
    mtime: int
    symlink_target: Optional[str]

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> FileInfo:
        return cls(
            path=d["path"],
            kind=d["kind"],
            size=d.get("size", 0),
            mode=d.get("mode", 0),
            mtime=d.get("mtime", 0),
            symlink_target=d.get("symlink_target"),
        )


@dataclass
class ProcessInfo:
    """A background process. ``exit_code``/``signal`` are set once it has ended."""

    pid: int
    command: Dict[str, Any]
    started_at: int
    running: bool
    exit_code: Optional[int]
    signal: Optional[int]
    status: Optional[Dict[str, Any]]
    error: Optional[str]
    stdout_dropped: int
    stderr_dropped: int

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> ProcessInfo:
        st = d.get("status")
        return cls(
            pid=d["pid"],
            command=d.get("command") or {},
            started_at=d.get("started_at", 0),
            running=d.get("running", False),
            exit_code=st.get("exit_code") if st else None,
            signal=st.get("signal") if st else None,
            status=st,
            error=d.get("error"),
            stdout_dropped=d.get("stdout_dropped", 0),
            stderr_dropped=d.get("stderr_dropped", 0),
        )


@dataclass
class ContextInfo:
    """A code context: a persistent ``python``, ``javascript`` or ``bash`` interpreter."""

    context_id: str
    language: str
    pid: Optional[int]
    version: Optional[str]
    execution_count: int
    busy: bool
    cwd: Optional[str]
    startup_us: Optional[int]

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> ContextInfo:
        return cls(
            context_id=d["context_id"],
            language=d["language"],
            pid=d.get("pid"),
            version=d.get("version"),
            execution_count=d.get("execution_count", 0),
            busy=d.get("busy", False),
            cwd=d.get("cwd"),
            startup_us=d.get("startup_us"),
        )


@dataclass
class Result:
    """A rich result of a snippet: MIME type -> data. ``main`` marks the value of the last
    expression; others come from ``display()`` or plots."""

    main: bool
    data: Dict[str, Any]

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> Result:
        return cls(main=bool(d.get("main")), data=d.get("data") or {})

    def _text(self, mime: str) -> Optional[str]:
        v = self.data.get(mime)
        return v if isinstance(v, str) else None

    @property
    def text(self) -> Optional[str]:
        return self._text("text/plain")

    @property
    def html(self) -> Optional[str]:
        return self._text("text/html")

    @property
    def markdown(self) -> Optional[str]:
        return self._text("text/markdown")

    @property
    def svg(self) -> Optional[str]:
        return self._text("image/svg+xml")

    @property
    def json(self) -> Any:
        return self.data.get("application/json")

    @property
    def png(self) -> Optional[bytes]:
        return _b64(self._text("image/png"))

    @property
    def jpeg(self) -> Optional[bytes]:
        return _b64(self._text("image/jpeg"))

    @property
    def formats(self) -> List[str]:
        return list(self.data)


@dataclass
class ExecutionError:
    """What a snippet raised."""

    name: str
    value: str
    traceback: List[str]

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> ExecutionError:
        return cls(name=d.get("name", ""), value=d.get("value", ""), traceback=d.get("traceback") or [])


@dataclass
class Execution:
    """One snippet run in a code context. A snippet that raised is still an Execution, with
    ``error`` set; ``restarted`` says why the context had to be restarted (its state is gone)."""

    stdout: str
    stderr: str
    results: List[Result]
    error: Optional[ExecutionError]
    execution_count: int
    timed_out: bool
    restarted: Optional[str]
    exit_code: Optional[int] = None
    duration_ms: float = 0.0
    stdout_truncated: bool = False
    stderr_truncated: bool = False

    @property
    def text(self) -> Optional[str]:
        """The ``text/plain`` form of the main result (the last expression's value), if any."""
        for r in self.results:
            if r.main:
                return r.text
        return None

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> Execution:
        err = d.get("error")
        return cls(
            stdout=d.get("stdout", ""),
            stderr=d.get("stderr", ""),
            results=[Result.from_json(r) for r in d.get("results") or []],
            error=ExecutionError.from_json(err) if err else None,
            execution_count=d.get("execution_count", 0),
            timed_out=d.get("timed_out", False),
            restarted=d.get("restarted"),
            exit_code=d.get("exit_code"),
            duration_ms=d.get("duration_ms", 0.0),
            stdout_truncated=d.get("stdout_truncated", False),
            stderr_truncated=d.get("stderr_truncated", False),
        )


@dataclass
class PoolInfo:
    """A warm pool: its shape (``template``), size, reuse policy, members per state, hits/misses."""

    name: str
    size: int
    max: Optional[int]
    reuse: str
    template: Dict[str, Any]
    members: Dict[str, int]
    hits: int
    misses: int

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> PoolInfo:
        return cls(
            name=d["name"],
            size=d.get("size", 0),
            max=d.get("max"),
            reuse=d.get("reuse", "fresh"),
            template=d.get("template") or {},
            members=d.get("members") or {},
            hits=d.get("hits", 0),
            misses=d.get("misses", 0),
        )


@dataclass
class Key:
    """An API key. ``secret`` is set only on the value ``keys.create`` returns."""

    id: str
    name: str
    admin: bool
    max_sandboxes: Optional[int]
    rate_per_minute: Optional[int]
    created_at: int
    revoked_at: Optional[int]
    secret: Optional[str] = field(default=None, repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> Key:
        return cls(
            id=d["id"],
            name=d["name"],
            admin=d.get("admin", False),
            max_sandboxes=d.get("max_sandboxes"),
            rate_per_minute=d.get("rate_per_minute"),
            created_at=d.get("created_at", 0),
            revoked_at=d.get("revoked_at"),
            secret=d.get("secret"),
        )
