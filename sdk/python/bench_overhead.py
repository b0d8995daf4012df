"""Per-call overhead of the Python SDK over raw HTTP, for a warm exec.

Runs `sb.commands.run(["true"])` and the same `POST /v1/sandboxes/{id}/exec` through a bare
`httpx.Client` on the same socket (its JSON parsed too), interleaved, and compares the medians.
The daemon is $HUTCH_URL or the default socket.

    python3 sdk/python/bench_overhead.py out.json [iterations]

Prints `sdk_overhead_ms_median` and writes the numbers, with a machine snapshot, as JSON to the
path given. The SDK's promise: less than 0.3 ms.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from typing import Any, Callable, Dict, List

import httpx

import hutch
from hutch import _transport
from hutch._client import _Endpoint

TARGET_MS = 0.3
WARMUP = 20


def machine() -> Dict[str, Any]:
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    return {
        "platform": platform.platform(),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "httpx": httpx.__version__,
        "hutch_sdk": hutch.__version__,
    }


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - t0) / 1e6


def transport_only_ms(sandbox_id: str, n: int = 20000) -> float:
    """What the SDK itself costs per call without any I/O: building the request and decoding a
    typical exec response."""
    body = json.dumps(
        {
            "exit_code": 0,
            "signal": None,
            "timed_out": False,
            "oom_killed": False,
            "stdout": "",
            "stderr": "",
            "stdout_truncated": False,
            "stderr_truncated": False,
            "stdout_bytes": 0,
            "stderr_bytes": 0,
            "duration_ms": 1.0,
        }
    ).encode()
    t0 = time.perf_counter_ns()
    for _ in range(n):
        req = _transport.build("sandbox.exec", {"id": sandbox_id, "command": ["true"]})
        _ = req.content
        _transport.decode("sandbox.exec", 200, body)
    return (time.perf_counter_ns() - t0) / 1e6 / n


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    out_path = sys.argv[1]
    iterations = int(sys.argv[2]) if len(sys.argv) > 2 else 300

    client = hutch.Hutch()
    ep = _Endpoint(client.url)
    raw = httpx.Client(
        base_url=ep.base_url,
        transport=httpx.HTTPTransport(uds=ep.socket) if ep.socket else httpx.HTTPTransport(),
        headers={"authorization": f"Bearer {client.api_key}"} if client.api_key else {},
        timeout=60.0,
    )
    sb = hutch.Sandbox.create(client, metadata={"bench": "sdk-python-overhead"})
    try:
        path = f"/v1/sandboxes/{sb.id}/exec"

        def sdk_call() -> None:
            r = sb.commands.run(["true"])
            assert r.exit_code == 0

        def raw_call() -> None:
            r = raw.post(path, json={"command": ["true"]})
            assert r.status_code == 200 and r.json()["exit_code"] == 0

        for _ in range(WARMUP):
            sdk_call()
            raw_call()
        sdk: List[float] = []
        bare: List[float] = []
        for i in range(iterations):
            # alternate which goes first, so neither always follows the other
            if i % 2:
                sdk.append(timed(sdk_call))
                bare.append(timed(raw_call))
            else:
                bare.append(timed(raw_call))
                sdk.append(timed(sdk_call))
        transport_ms = transport_only_ms(sb.id)
    finally:
        sb.kill()
        raw.close()
        client.close()

    sdk_med = statistics.median(sdk)
    raw_med = statistics.median(bare)
    overhead = sdk_med - raw_med
    paired = statistics.median(s - r for s, r in zip(sdk, bare))
    result = {
        "benchmark": "sdk-python-overhead",
        "what": "warm exec of ['true']: Sandbox.commands.run vs the same POST through a bare httpx.Client",
        "iterations": iterations,
        "url": client.url,
        "sdk_ms_median": round(sdk_med, 4),
        "raw_http_ms_median": round(raw_med, 4),
        "sdk_overhead_ms_median": round(overhead, 4),
        "sdk_overhead_ms_paired_median": round(paired, 4),
        "sdk_transport_only_ms": round(transport_ms, 4),
        "sdk_ms_p90": round(statistics.quantiles(sdk, n=10)[-1], 4),
        "raw_http_ms_p90": round(statistics.quantiles(bare, n=10)[-1], 4),
        "target_ms": TARGET_MS,
        "pass": overhead < TARGET_MS,
        "machine": machine(),
        "at": int(time.time()),
    }
    with open(out_path, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(f"sdk_ms_median {sdk_med:.4f}")
    print(f"raw_http_ms_median {raw_med:.4f}")
    print(f"sdk_overhead_ms_median {overhead:.4f}")
    print(f"sdk_overhead_ms_paired_median {paired:.4f}")
    print(f"sdk_transport_only_ms {transport_ms:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
