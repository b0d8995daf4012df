"""The asyncio high-level API: ``AsyncSandbox`` and what hangs off it. Mirrors ``_sandbox`` name
for name; every call that talks to the daemon is awaited and streams are async iterators."""

from __future__ import annotations

import time
from typing import (
    Any,
    AsyncIterator,
    Awaitable,
    Callable,
    Dict,
    Generator,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from . import _transport as t
from ._client import AsyncHutch, default_async_client
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

__all__ = [
    "AsyncSandbox",
    "AsyncCommands",
    "AsyncProcess",
    "AsyncFiles",
    "AsyncContexts",
    "AsyncContext",
]


class _Creating(Awaitable["AsyncSandbox"]):
    """What ``AsyncSandbox.create`` returns: await it for the sandbox, or use it with
    ``async with`` to have the sandbox deleted at the end of the block."""

    def __init__(self, start: Callable[[], Awaitable[AsyncSandbox]]) -> None:
        self._start = start
        self._sandbox: Optional[AsyncSandbox] = None

    def __await__(self) -> Generator[Any, None, AsyncSandbox]:
        return self._start().__await__()

    async def __aenter__(self) -> AsyncSandbox:
        self._sandbox = await self._start()
        return self._sandbox

    async def __aexit__(self, *exc: Any) -> None:
        if self._sandbox is not None:
            await self._sandbox.__aexit__(*exc)


class AsyncSandbox:
    """A live sandbox, for asyncio code::

    async with AsyncSandbox.create() as sb:
        print((await sb.commands.run("echo hi")).stdout)
    """

    id: str
    state: str
    backend: str
    pool: Optional[str]
    metadata: Dict[str, str]
    expires_at: Optional[int]
    info: Dict[str, Any]

    def __init__(self, info: SandboxInfo, client: AsyncHutch) -> None:
        self.client = client
        self._update(info)
        self.commands = AsyncCommands(self)
        self.files = AsyncFiles(self)
        self.contexts = AsyncContexts(self)

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
        return f"AsyncSandbox(id={self.id!r}, state={self.state!r}, backend={self.backend!r})"

    @classmethod
    def create(
        cls,
        client: Optional[AsyncHutch] = None,
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
    ) -> _Creating:
        """Create and start a sandbox (``await`` it, or ``async with`` it); with ``pool``, take a
        warm one."""
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

        async def start() -> AsyncSandbox:
            c = client or default_async_client()
            return cls(await c._call("sandboxes.create", args), c)

        return _Creating(start)

    @classmethod
    async def connect(cls, id: str, *, client: Optional[AsyncHutch] = None) -> AsyncSandbox:
        c = client or default_async_client()
        return cls(await c._call("sandboxes.get", {"id": id}), c)

    @classmethod
    async def list(
        cls,
        *,
        state: Optional[str] = None,
        pool: Optional[str] = None,
        metadata: Optional[Mapping[str, str]] = None,
        backend: Optional[str] = None,
        include_stopped: bool = False,
        limit: Optional[int] = None,
        client: Optional[AsyncHutch] = None,
    ) -> List[AsyncSandbox]:
        c = client or default_async_client()
        return [
            cls(i, c)
            for i in await c._call(
                "sandboxes.list", list_args(state, pool, metadata, backend, include_stopped, limit)
            )
        ]

    async def refresh(self) -> AsyncSandbox:
        self._update(await self.client._call("sandboxes.get", {"id": self.id}))
        return self

    async def set_ttl(self, seconds: int) -> None:
        self._update(await self.client._call("sandboxes.set_ttl", {"id": self.id, "ttl_seconds": seconds}))

    async def kill(self) -> None:
        await self.client._call("sandboxes.delete", {"id": self.id})
        self.state = "stopped"

    async def __aenter__(self) -> AsyncSandbox:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await self.kill()
        except NotFoundError:
            pass


class AsyncCommands:
    """The asyncio twin of ``Commands``."""

    def __init__(self, sandbox: AsyncSandbox) -> None:
        self._sb = sandbox

    async def run(
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
        sb = self._sb
        args = command_args(sb.id, cmd, env, cwd, timeout_ms, stdin)
        timeout = read_timeout(sb._limit_ms, timeout_ms)
        if on_stdout is None and on_stderr is None:
            return await sb.client._call("sandbox.exec", args, timeout)  # type: ignore[no-any-return]
        fold = t.CommandStream(on_stdout, on_stderr)
        async for ev, data in sb.client._events("sandbox.exec_stream", args, timeout):
            fold.feed(ev, data)
        return fold.finish()

    async def stream(
        self,
        cmd: Command,
        *,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[str] = None,
        timeout_ms: Optional[int] = None,
        stdin: Stdin = None,
    ) -> AsyncIterator[StreamEvent]:
        sb = self._sb
        args = command_args(sb.id, cmd, env, cwd, timeout_ms, stdin)
        fold = t.CommandStream()
        async for ev, data in sb.client._events(
            "sandbox.exec_stream", args, read_timeout(sb._limit_ms, timeout_ms)
        ):
            out = fold.feed(ev, data)
            if out is not None:
                yield out
        fold.finish()

    async def start(
        self,
        cmd: Command,
        *,
        env: Optional[Mapping[str, str]] = None,
        cwd: Optional[str] = None,
        timeout_ms: Optional[int] = None,
        stdin: Stdin = None,
    ) -> AsyncProcess:
        sb = self._sb
        info = await sb.client._call("processes.start", command_args(sb.id, cmd, env, cwd, timeout_ms, stdin))
        return AsyncProcess(sb, info)

    async def connect(self, pid: int) -> AsyncProcess:
        return AsyncProcess(
            self._sb, await self._sb.client._call("processes.get", {"id": self._sb.id, "pid": pid})
        )

    async def list(self) -> List[ProcessInfo]:
        return await self._sb.client._call("processes.list", {"id": self._sb.id})  # type: ignore[no-any-return]


class AsyncProcess:
    """The asyncio twin of ``Process``."""

    def __init__(self, sandbox: AsyncSandbox, info: ProcessInfo) -> None:
        self.sandbox = sandbox
        self.pid = info.pid
        self._info = info

    def __repr__(self) -> str:
        return f"AsyncProcess(pid={self.pid}, sandbox={self.sandbox.id!r})"

    def _args(self, **extra: Any) -> Dict[str, Any]:
        return {"id": self.sandbox.id, "pid": self.pid, **extra}

    async def info(self) -> ProcessInfo:
        self._info = await self.sandbox.client._call("processes.get", self._args())
        return self._info

    async def send_stdin(self, data: Union[str, bytes]) -> None:
        await self.sandbox.client._call("processes.write_stdin", self._args(data=data))

    async def close_stdin(self) -> None:
        await self.sandbox.client._call("processes.close_stdin", self._args())

    async def kill(self, signal: int = 9) -> bool:
        try:
            await self.sandbox.client._call("processes.signal", self._args(signal=signal))
            return True
        except ConflictError:
            return False

    async def logs(self) -> Tuple[str, str]:
        return await self.sandbox.client._call("processes.logs", self._args())  # type: ignore[no-any-return]

    async def stream(self, timeout: Optional[float] = None) -> AsyncIterator[StreamEvent]:
        deadline = time.monotonic() + timeout if timeout is not None else None
        fold = t.CommandStream()
        async for ev, data in self.sandbox.client._events(
            "processes.attach", self._args(), deadline=deadline
        ):
            out = fold.feed(ev, data)
            if out is not None:
                yield out
        fold.finish()

    async def wait(self, timeout: Optional[float] = None) -> CommandResult:
        result: Optional[CommandResult] = None
        async for ev in self.stream(timeout):
            if ev.kind == "exit":
                result = ev.data  # type: ignore[assignment]
        assert result is not None  # stream() raises when the stream ends without an exit
        return result


class AsyncFiles:
    """The asyncio twin of ``Files``."""

    def __init__(self, sandbox: AsyncSandbox) -> None:
        self._sb = sandbox

    async def _call(self, op: str, **args: Any) -> Any:
        return await self._sb.client._call(op, {"id": self._sb.id, **args})

    async def write(self, path: str, data: Union[str, bytes], mode: Union[int, str, None] = None) -> None:
        await self._call("files.write", path=path, data=data, mode=mode)

    async def read(self, path: str) -> bytes:
        return await self._call("files.read", path=path)  # type: ignore[no-any-return]

    async def read_text(self, path: str, encoding: str = "utf-8") -> str:
        return (await self.read(path)).decode(encoding)

    async def list(self, path: str) -> List[Entry]:
        return await self._call("files.list", path=path)  # type: ignore[no-any-return]

    async def stat(self, path: str) -> FileInfo:
        return await self._call("files.stat", path=path)  # type: ignore[no-any-return]

    async def exists(self, path: str) -> bool:
        try:
            await self.stat(path)
            return True
        except NotFoundError:
            return False

    async def make_dir(self, path: str, parents: bool = True) -> None:
        await self._call("files.make_dir", path=path, parents=parents)

    async def remove(self, path: str, recursive: bool = False) -> None:
        await self._call("files.remove", path=path, recursive=recursive)

    async def rename(self, src: str, dst: str) -> None:
        await self._call("files.rename", src=src, dst=dst)


class AsyncContexts:
    """The asyncio twin of ``Contexts``."""

    def __init__(self, sandbox: AsyncSandbox) -> None:
        self._sb = sandbox

    async def create(
        self, language: str, cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None
    ) -> AsyncContext:
        info = await self._sb.client._call(
            "contexts.create", {"id": self._sb.id, "language": language, "cwd": cwd, "env": env}
        )
        return AsyncContext(self._sb, info)

    async def list(self) -> List[AsyncContext]:
        return [
            AsyncContext(self._sb, i)
            for i in await self._sb.client._call("contexts.list", {"id": self._sb.id})
        ]


class AsyncContext:
    """The asyncio twin of ``Context``."""

    def __init__(self, sandbox: AsyncSandbox, info: ContextInfo) -> None:
        self.sandbox = sandbox
        self.id = info.context_id
        self.language = info.language
        self.info = info

    def __repr__(self) -> str:
        return f"AsyncContext(id={self.id!r}, language={self.language!r})"

    def _args(self, **extra: Any) -> Dict[str, Any]:
        return {"id": self.sandbox.id, "context_id": self.id, **extra}

    async def run(
        self,
        code: str,
        *,
        timeout_ms: Optional[int] = None,
        on_stdout: Optional[t.TextCallback] = None,
        on_stderr: Optional[t.TextCallback] = None,
        on_result: Optional[t.ResultCallback] = None,
    ) -> Execution:
        args = self._args(code=code, timeout_ms=timeout_ms)
        timeout = read_timeout(self.sandbox._limit_ms, timeout_ms)
        if on_stdout is None and on_stderr is None and on_result is None:
            return await self.sandbox.client._call("contexts.run", args, timeout)  # type: ignore[no-any-return]
        fold = t.RunStream(on_stdout, on_stderr, on_result)
        async for ev, data in self.sandbox.client._events("contexts.run_stream", args, timeout):
            fold.feed(ev, data)
        return fold.finish()

    async def restart(self) -> None:
        self.info = await self.sandbox.client._call("contexts.restart", self._args())

    async def interrupt(self) -> None:
        await self.sandbox.client._call("contexts.interrupt", self._args())

    async def delete(self) -> None:
        await self.sandbox.client._call("contexts.delete", self._args())
