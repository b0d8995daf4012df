"""The blocking high-level API: ``Sandbox`` and what hangs off it (``commands``, ``files``,
``contexts``). ``_async_sandbox`` mirrors this module name for name."""

from __future__ import annotations

import time
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from . import _transport as t
from ._client import Hutch, default_client
from ._common import Command, Stdin, command_args, command_limit_ms, create_args, list_args, read_timeout
from .errors import ConflictError, NotFoundError
from .models import (
    CommandResult,
    ContextInfo,
    Entry,
    Execution,
    FileInfo,
    Limits,
    ProcessInfo,
    SandboxInfo,
    StreamEvent,
)

__all__ = ["Sandbox", "Commands", "Process", "Files", "Contexts", "Context"]


class Sandbox:
    """A live sandbox.

    ``Sandbox.create()`` starts one (or takes a warm one from a pool), ``Sandbox.connect(id)``
    attaches to an existing one. Used as a context manager it is deleted on exit::

        with Sandbox.create() as sb:
            print(sb.commands.run("echo hi").stdout)
    """

    id: str
    state: str
    backend: str
    pool: Optional[str]
    metadata: Dict[str, str]
    expires_at: Optional[int]
    info: Dict[str, Any]

    def __init__(self, info: SandboxInfo, client: Hutch) -> None:
        self.client = client
        self._update(info)
        self.commands = Commands(self)
        self.files = Files(self)
        self.contexts = Contexts(self)

    def _update(self, info: SandboxInfo) -> None:
        self.id = info.id
        self.state = info.state
        self.backend = info.backend
        self.pool = info.pool
        self.metadata = info.metadata
        self.expires_at = info.expires_at
        self.info = info.raw
        self._limit_ms = command_limit_ms(info)

    def __repr__(self) -> str:
        return f"Sandbox(id={self.id!r}, state={self.state!r}, backend={self.backend!r})"

    @classmethod
    def create(
        cls,
        client: Optional[Hutch] = None,
        *,
        runtime: Optional[str] = None,
        backend: Optional[str] = None,
        image: Optional[str] = None,
        rootfs: Optional[str] = None,
        limits: Union[Limits, Mapping[str, Any], None] = None,
        env: Optional[Mapping[str, str]] = None,
        metadata: Optional[Mapping[str, str]] = None,
        ttl_seconds: Optional[int] = None,
        pool: Optional[str] = None,
        contexts: Optional[Sequence[str]] = None,
    ) -> Sandbox:
        """Create and start a sandbox, ready for commands; or, with ``pool``, take a warm one."""
        c = client or default_client()
        args = create_args(
            runtime=runtime,
            backend=backend,
            image=image,
            rootfs=rootfs,
            limits=limits,
            env=env,
            metadata=metadata,
            ttl_seconds=ttl_seconds,
            pool=pool,
            contexts=contexts,
        )
        return cls(c._call("sandboxes.create", args), c)

    @classmethod
    def connect(cls, id: str, *, client: Optional[Hutch] = None) -> Sandbox:
        """An existing sandbox by its id."""
        c = client or default_client()
        return cls(c._call("sandboxes.get", {"id": id}), c)

    @classmethod
    def list(
        cls,
        *,
        state: Optional[str] = None,
        pool: Optional[str] = None,
        metadata: Optional[Mapping[str, str]] = None,
        backend: Optional[str] = None,
        include_stopped: bool = False,
        limit: Optional[int] = None,
        client: Optional[Hutch] = None,
    ) -> List[Sandbox]:
        """Live sandboxes, newest first; every ``metadata`` label must match."""
        c = client or default_client()
        return [
            cls(i, c)
            for i in c._call(
                "sandboxes.list", list_args(state, pool, metadata, backend, include_stopped, limit)
            )
        ]

    def refresh(self) -> Sandbox:
        """Reload state, TTL and metadata from the daemon."""
        self._update(self.client._call("sandboxes.get", {"id": self.id}))
        return self

    def set_ttl(self, seconds: int) -> None:
        """Stop the sandbox ``seconds`` from now (0: never, admin only)."""
        self._update(self.client._call("sandboxes.set_ttl", {"id": self.id, "ttl_seconds": seconds}))

    def kill(self) -> None:
        """Stop and destroy the sandbox (a recycling pool's member goes back to its pool)."""
        self.client._call("sandboxes.delete", {"id": self.id})
        self.state = "stopped"

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.kill()
        except NotFoundError:
            pass


class Commands:
    """Commands in a sandbox: ``run`` to completion, ``stream`` the output, ``start`` in the
    background. A str is a shell script, a list is argv."""

    def __init__(self, sandbox: Sandbox) -> None:
        self._sb = sandbox

    def run(
        self,
        cmd: Command,
        *,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[str] = None,
        timeout_ms: Optional[int] = None,
        stdin: Stdin = None,
        on_stdout: Optional[t.TextCallback] = None,
        on_stderr: Optional[t.TextCallback] = None,
    ) -> CommandResult:
        """Run a command to completion. A non-zero exit is a result, not an error. With
        ``on_stdout``/``on_stderr`` the output is streamed to them (as text) while it runs."""
        sb = self._sb
        args = command_args(sb.id, cmd, env, cwd, timeout_ms, stdin)
        timeout = read_timeout(sb._limit_ms, timeout_ms)
        if on_stdout is None and on_stderr is None:
            return sb.client._call("sandbox.exec", args, timeout)  # type: ignore[no-any-return]
        fold = t.CommandStream(on_stdout, on_stderr)
        for ev, data in sb.client._events("sandbox.exec_stream", args, timeout):
            fold.feed(ev, data)
        return fold.finish()

    def stream(
        self,
        cmd: Command,
        *,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[str] = None,
        timeout_ms: Optional[int] = None,
        stdin: Stdin = None,
    ) -> Iterator[StreamEvent]:
        """Run a command and yield ``("stdout", bytes)`` / ``("stderr", bytes)`` as they come, then
        ``("exit", CommandResult)``. Leaving the loop early kills the command."""
        sb = self._sb
        args = command_args(sb.id, cmd, env, cwd, timeout_ms, stdin)
        fold = t.CommandStream()
        for ev, data in sb.client._events(
            "sandbox.exec_stream", args, read_timeout(sb._limit_ms, timeout_ms)
        ):
            out = fold.feed(ev, data)
            if out is not None:
                yield out
        fold.finish()

    def start(
        self,
        cmd: Command,
        *,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[str] = None,
        timeout_ms: Optional[int] = None,
        stdin: Stdin = None,
    ) -> Process:
        """Start a background process; it outlives this call (its stdin stays open)."""
        sb = self._sb
        info = sb.client._call("processes.start", command_args(sb.id, cmd, env, cwd, timeout_ms, stdin))
        return Process(sb, info)

    def connect(self, pid: int) -> Process:
        """A background process started earlier, by its pid."""
        return Process(self._sb, self._sb.client._call("processes.get", {"id": self._sb.id, "pid": pid}))

    def list(self) -> List[ProcessInfo]:
        """Background processes, running and recently finished."""
        return self._sb.client._call("processes.list", {"id": self._sb.id})  # type: ignore[no-any-return]


class Process:
    """A background process (``sb.commands.start``)."""

    def __init__(self, sandbox: Sandbox, info: ProcessInfo) -> None:
        self.sandbox = sandbox
        self.pid = info.pid
        self._info = info

    def __repr__(self) -> str:
        return f"Process(pid={self.pid}, sandbox={self.sandbox.id!r})"

    def _args(self, **extra: Any) -> Dict[str, Any]:
        return {"id": self.sandbox.id, "pid": self.pid, **extra}

    def info(self) -> ProcessInfo:
        """Its current state (``running``, and ``exit_code``/``signal`` once it ended)."""
        self._info = self.sandbox.client._call("processes.get", self._args())
        return self._info

    def send_stdin(self, data: Union[str, bytes]) -> None:
        self.sandbox.client._call("processes.write_stdin", self._args(data=data))

    def close_stdin(self) -> None:
        """Close its stdin: it reads end of file."""
        self.sandbox.client._call("processes.close_stdin", self._args())

    def kill(self, signal: int = 9) -> bool:
        """Send ``signal`` (default SIGKILL). False when it had exited already."""
        try:
            self.sandbox.client._call("processes.signal", self._args(signal=signal))
            return True
        except ConflictError:
            return False

    def logs(self) -> Tuple[str, str]:
        """Its buffered ``(stdout, stderr)`` so far (the last 1 MiB of each by default)."""
        return self.sandbox.client._call("processes.logs", self._args())  # type: ignore[no-any-return]

    def stream(self, timeout: Optional[float] = None) -> Iterator[StreamEvent]:
        """Its output from the start (replayed), then live: ``("stdout", bytes)``,
        ``("stderr", bytes)``, then ``("exit", CommandResult)``. Leaving the loop does not stop it.
        ``timeout`` (seconds) raises ``TimeoutError`` when it runs longer."""
        deadline = time.monotonic() + timeout if timeout is not None else None
        fold = t.CommandStream()
        for ev, data in self.sandbox.client._events("processes.attach", self._args(), deadline=deadline):
            out = fold.feed(ev, data)
            if out is not None:
                yield out
        fold.finish()

    def wait(self, timeout: Optional[float] = None) -> CommandResult:
        """Wait until it exits; its whole (buffered) output is in the result. ``timeout``
        (seconds) raises ``TimeoutError`` and leaves it running."""
        result: Optional[CommandResult] = None
        for ev in self.stream(timeout):
            if ev.kind == "exit":
                result = ev.data  # type: ignore[assignment]
        assert result is not None  # stream() raises when the stream ends without an exit
        return result


class Files:
    """Files in a sandbox, confined to its workdir and /tmp. Relative paths are relative to
    the workdir (``/workspace``)."""

    def __init__(self, sandbox: Sandbox) -> None:
        self._sb = sandbox

    def _call(self, op: str, **args: Any) -> Any:
        return self._sb.client._call(op, {"id": self._sb.id, **args})

    def write(self, path: str, data: Union[str, bytes], mode: Union[int, str, None] = None) -> None:
        """Create or replace a file (a str is written as UTF-8). ``mode``: permission bits,
        ``0o640`` or ``"640"``."""
        self._call("files.write", path=path, data=data, mode=mode)

    def read(self, path: str) -> bytes:
        return self._call("files.read", path=path)  # type: ignore[no-any-return]

    def read_text(self, path: str, encoding: str = "utf-8") -> str:
        return self.read(path).decode(encoding)

    def list(self, path: str) -> List[Entry]:
        return self._call("files.list", path=path)  # type: ignore[no-any-return]

    def stat(self, path: str) -> FileInfo:
        return self._call("files.stat", path=path)  # type: ignore[no-any-return]

    def exists(self, path: str) -> bool:
        try:
            self.stat(path)
            return True
        except NotFoundError:
            return False

    def make_dir(self, path: str, parents: bool = True) -> None:
        """Create a directory (with ``parents``: missing parents too, and no error when it exists)."""
        self._call("files.make_dir", path=path, parents=parents)

    def remove(self, path: str, recursive: bool = False) -> None:
        self._call("files.remove", path=path, recursive=recursive)

    def rename(self, src: str, dst: str) -> None:
        self._call("files.rename", src=src, dst=dst)


class Contexts:
    """Code contexts: persistent ``python``, ``javascript`` or ``bash`` interpreters."""

    def __init__(self, sandbox: Sandbox) -> None:
        self._sb = sandbox

    def create(
        self, language: str, cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None
    ) -> Context:
        info = self._sb.client._call(
            "contexts.create", {"id": self._sb.id, "language": language, "cwd": cwd, "env": env}
        )
        return Context(self._sb, info)

    def list(self) -> List[Context]:
        return [Context(self._sb, i) for i in self._sb.client._call("contexts.list", {"id": self._sb.id})]


class Context:
    """A persistent interpreter: variables, imports and functions survive between ``run`` calls."""

    def __init__(self, sandbox: Sandbox, info: ContextInfo) -> None:
        self.sandbox = sandbox
        self.id = info.context_id
        self.language = info.language
        self.info = info

    def __repr__(self) -> str:
        return f"Context(id={self.id!r}, language={self.language!r})"

    def _args(self, **extra: Any) -> Dict[str, Any]:
        return {"id": self.sandbox.id, "context_id": self.id, **extra}

    def run(
        self,
        code: str,
        *,
        timeout_ms: Optional[int] = None,
        on_stdout: Optional[t.TextCallback] = None,
        on_stderr: Optional[t.TextCallback] = None,
        on_result: Optional[t.ResultCallback] = None,
    ) -> Execution:
        """Run a snippet. An exception in it is ``Execution.error``, not raised; ``.text`` is the
        last expression's value. With callbacks, output and results arrive as they happen."""
        args = self._args(code=code, timeout_ms=timeout_ms)
        timeout = read_timeout(self.sandbox._limit_ms, timeout_ms)
        if on_stdout is None and on_stderr is None and on_result is None:
            return self.sandbox.client._call("contexts.run", args, timeout)  # type: ignore[no-any-return]
        fold = t.RunStream(on_stdout, on_stderr, on_result)
        for ev, data in self.sandbox.client._events("contexts.run_stream", args, timeout):
            fold.feed(ev, data)
        return fold.finish()

    def restart(self) -> None:
        """Replace the interpreter with a fresh one (its state is lost)."""
        self.info = self.sandbox.client._call("contexts.restart", self._args())

    def interrupt(self) -> None:
        """Interrupt the running snippet."""
        self.sandbox.client._call("contexts.interrupt", self._args())

    def delete(self) -> None:
        self.sandbox.client._call("contexts.delete", self._args())
