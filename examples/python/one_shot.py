"""One command in a throwaway sandbox: create it, run, print, delete.

python3 examples/python/one_shot.py     # uses $HUTCH_URL or unix:///run/hutch/hutch.sock
"""

from hutch import Sandbox

with Sandbox.create() as sb:  # deleted when the block ends
    result = sb.commands.run("python3 -c 'print(1+1)'")
    print(f"sandbox {sb.id}: exit {result.exit_code}, stdout {result.stdout!r}")
