"""Stream a long command's output line by line as it is printed.

python3 examples/python/streaming.py
"""

import time

from hutch import Sandbox

start = time.monotonic()


def on_stdout(text: str) -> None:
    for line in text.splitlines():
        print(f"[{time.monotonic() - start:5.2f}s] {line}", flush=True)


with Sandbox.create() as sb:
    result = sb.commands.run(
        "for i in 1 2 3 4 5; do echo step $i of 5; sleep 0.5; done; echo finished",
        on_stdout=on_stdout,
        on_stderr=lambda text: print("stderr:", text, end=""),
    )
    print(f"exit {result.exit_code} after {result.duration_ms:.0f} ms")

    # the same as an iterator of (kind, bytes) events, ending with the result
    for kind, data in sb.commands.stream(["sh", "-c", "echo out; echo err >&2; exit 3"]):
        if isinstance(data, bytes):
            print(kind, data)
        else:
            print("exit code", data.exit_code)
