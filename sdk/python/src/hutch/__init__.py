"""Python SDK of hutch, a self-hosted sandbox platform: talk to ``hutch serve`` over its Unix
socket or TCP.

    from hutch import Sandbox

    with Sandbox.create() as sb:
        print(sb.commands.run("python3 -c 'print(1+1)'").stdout)

``AsyncSandbox`` is the same API for asyncio. Errors are typed (``hutch.errors``).
"""

from ._async_sandbox import AsyncCommands, AsyncContext, AsyncContexts, AsyncFiles, AsyncProcess, AsyncSandbox
from ._client import DEFAULT_URL, AsyncHutch, AsyncKeys, AsyncPools, Hutch, Keys, Pools
from ._sandbox import Commands, Context, Contexts, Files, Process, Sandbox
from ._version import __version__
from .errors import (
    AuthenticationError,
    BackendUnavailableError,
    CapacityError,
    ConflictError,
    DaemonUnavailableError,
    HutchError,
    InvalidRequestError,
    NotFoundError,
    NotSupportedError,
    PermissionDeniedError,
    RateLimitError,
    SandboxStoppedError,
    ServerError,
)
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
    "__version__",
    "DEFAULT_URL",
    # connection
    "Hutch",
    "AsyncHutch",
    "Pools",
    "AsyncPools",
    "Keys",
    "AsyncKeys",
    # sandboxes
    "Sandbox",
    "Commands",
    "Process",
    "Files",
    "Contexts",
    "Context",
    "AsyncSandbox",
    "AsyncCommands",
    "AsyncProcess",
    "AsyncFiles",
    "AsyncContexts",
    "AsyncContext",
    # values
    "Limits",
    "SandboxInfo",
    "CommandResult",
    "StreamEvent",
    "Entry",
    "FileInfo",
    "ProcessInfo",
    "ContextInfo",
    "Execution",
    "Result",
    "ExecutionError",
    "PoolInfo",
    "Key",
    # errors
    "HutchError",
    "InvalidRequestError",
    "AuthenticationError",
    "PermissionDeniedError",
    "NotFoundError",
    "ConflictError",
    "SandboxStoppedError",
    "RateLimitError",
    "CapacityError",
    "BackendUnavailableError",
    "NotSupportedError",
    "ServerError",
    "DaemonUnavailableError",
]
