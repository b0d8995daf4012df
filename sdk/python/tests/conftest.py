"""Fixtures: the repository's paths, and a real `hutch serve` for the live tests.

The daemon is the `hutch` binary from $HUTCH_BIN, else target/debug/hutch of this checkout; its
guest agent comes from $HUTCH_AGENT, else target/*/agent/hutch-agent (scripts/build-agent.sh).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator, Optional

import httpx
import pytest

import hutch

ROOT = Path(__file__).resolve().parents[3]
VECTORS = ROOT / "spec" / "test-vectors" / "sdk-v1.json"
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 30.0


def _target_dir() -> Path:
    t = os.environ.get("CARGO_TARGET_DIR")
    return Path(t) if t else ROOT / "target"


def hutch_bin() -> Path:
    b = os.environ.get("HUTCH_BIN")
    return Path(b) if b else _target_dir() / "debug" / "hutch"


def hutch_agent() -> Optional[Path]:
    a = os.environ.get("HUTCH_AGENT")
    if a:
        return Path(a)
    for triple in ("x86_64-unknown-linux-musl", "x86_64-unknown-linux-gnu", "aarch64-unknown-linux-musl"):
        p = _target_dir() / triple / "agent" / "hutch-agent"
        if p.is_file():
            return p
    return None


def live_skip_reason() -> Optional[str]:
    """Why the live tests cannot run here, or None when they can."""
    if os.geteuid() != 0:
        return (
            "live tests need root: hutch serve creates sandboxes with namespaces and cgroups "
            "(CI runs them as root)"
        )
    if shutil.which("crun") is None:
        return "live tests need crun, the default OCI runtime (apt-get install crun)"
    if not hutch_bin().is_file():
        return (
            f"live tests need the hutch binary: {hutch_bin()} is missing "
            "(cargo build -p hutch-cli, or set HUTCH_BIN)"
        )
    agent = hutch_agent()
    if agent is None or not agent.is_file():
        return "live tests need the guest agent: set HUTCH_AGENT=$(bash scripts/build-agent.sh)"
    return None


def _tail(path: Path, n: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


@pytest.fixture(scope="session")
def daemon() -> Iterator[str]:
    """A `hutch serve` on a private socket, state dir and database; yields its `unix://` URL and
    stops it with SIGTERM (which destroys its sandboxes) at the end of the session."""
    reason = live_skip_reason()
    if reason:
        pytest.skip(reason)
    # a short directory: Unix socket paths are limited to 107 bytes
    tmp = Path(tempfile.mkdtemp(prefix="hutch-sdk-py-", dir="/tmp"))
    sock = tmp / "h.sock"
    log_path = tmp / "daemon.log"
    env = dict(os.environ, HUTCH_AGENT=str(hutch_agent()))
    for k in ("HUTCH_URL", "HUTCH_API_KEY", "HUTCH_SOCKET", "HUTCH_TCP", "HUTCH_DB", "HUTCH_STATE_DIR"):
        env.pop(k, None)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [
                str(hutch_bin()),
                "serve",
                "--socket",
                str(sock),
                "--state-dir",
                str(tmp / "state"),
                "--db",
                str(tmp / "h.db"),
                "--log-format",
                "text",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(sock)), base_url="http://localhost") as probe:
            while True:
                if proc.poll() is not None:
                    pytest.fail(f"hutch serve exited with {proc.returncode}:\n{_tail(log_path)}")
                try:
                    if probe.get("/v1/health", timeout=1.0).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    pytest.fail(
                        f"hutch serve did not answer /v1/health within {START_TIMEOUT_S:g} s:\n"
                        + _tail(log_path)
                    )
                time.sleep(0.05)
        yield f"unix://{sock}"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def client(daemon: str) -> Iterator[hutch.Hutch]:
    with hutch.Hutch(daemon) as c:
        yield c


@pytest.fixture
def sandbox(client: hutch.Hutch) -> Iterator[hutch.Sandbox]:
    with hutch.Sandbox.create(client, metadata={"suite": "sdk-python"}) as sb:
        yield sb
