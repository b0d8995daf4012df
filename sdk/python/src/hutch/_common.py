"""Argument shaping shared by the blocking and the asyncio high-level API."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Sequence, Union

from .models import Limits, SandboxInfo

Command = Union[str, Sequence[str]]
"""A command: a str is a script for ``/bin/sh -c``, a list is argv (run without a shell)."""

Stdin = Union[str, bytes, None]

# Added to a command's own time limit for the HTTP read timeout, so the daemon's answer to a
# command that hit its limit arrives before the client gives up.
_SLACK_S = 10.0
# hutch's default command time limit (Limits.timeout_ms).
_DEFAULT_COMMAND_TIMEOUT_MS = 30_000


def command_args(
    sandbox_id: str,
    cmd: Command,
    env: Optional[Mapping[str, str]],
    cwd: Optional[str],
    timeout_ms: Optional[int],
    stdin: Stdin,
) -> Dict[str, Any]:
    a: Dict[str, Any] = {"id": sandbox_id, "env": env, "cwd": cwd, "timeout_ms": timeout_ms, "stdin": stdin}
    if isinstance(cmd, str):
        a["shell"] = cmd
    elif isinstance(cmd, (bytes, bytearray)):
        raise TypeError("a command is a str (shell script) or a list of str (argv), not bytes")
    else:
        a["command"] = list(cmd)
        if not a["command"]:
            raise ValueError("the command's argv is empty")
    return a


def create_args(
    *,
    runtime: Optional[str],
    backend: Optional[str],
    image: Optional[str],
    rootfs: Optional[str],
    limits: Union[Limits, Mapping[str, Any], None],
    env: Optional[Mapping[str, str]],
    metadata: Optional[Mapping[str, str]],
    ttl_seconds: Optional[int],
    pool: Optional[str],
    contexts: Optional[Sequence[str]],
) -> Dict[str, Any]:
    return {
        "backend": backend,
        "runtime": runtime,
        "image": image,
        "rootfs": rootfs,
        "limits": limits.to_dict() if isinstance(limits, Limits) else limits,
        "env": env,
        "contexts": list(contexts) if contexts is not None else None,
        "metadata": metadata,
        "ttl_seconds": ttl_seconds,
        "pool": pool,
    }


def list_args(
    state: Optional[str],
    pool: Optional[str],
    metadata: Optional[Mapping[str, str]],
    backend: Optional[str],
    include_stopped: bool,
    limit: Optional[int],
) -> Dict[str, Any]:
    return {
        "state": state,
        "pool": pool,
        "metadata": metadata,
        "backend": backend,
        "include_stopped": include_stopped,
        "limit": limit,
    }


def command_limit_ms(info: SandboxInfo) -> int:
    """The sandbox's per-command time limit, from the spec the daemon reported."""
    spec = info.raw.get("spec") or {}
    limits = spec.get("limits") if isinstance(spec, dict) else None
    v = limits.get("timeout_ms") if isinstance(limits, dict) else None
    return int(v) if isinstance(v, (int, float)) and v > 0 else _DEFAULT_COMMAND_TIMEOUT_MS


def read_timeout(limit_ms: int, timeout_ms: Optional[int]) -> float:
    """How long to wait for a command that may run ``timeout_ms`` (capped at the sandbox's limit)."""
    ms = min(timeout_ms, limit_ms) if timeout_ms else limit_ms
    return ms / 1000.0 + _SLACK_S
