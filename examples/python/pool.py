"""A warm pool: sandboxes started ahead of time, so taking one costs no start. With
`reuse="recycle"` a released sandbox is wiped and goes back to the pool. Managing pools is for
admins (the local socket is admin).

    python3 examples/python/pool.py
"""

import time

from hutch import Hutch, Sandbox

client = Hutch()
client.pools.create("example-py", 2, reuse="recycle", template={"contexts": ["python"]})
try:
    while client.pools.get("example-py").members.get("warm", 0) < 2:  # wait until it is filled
        time.sleep(0.1)

    t0 = time.perf_counter()
    sb = Sandbox.create(client, pool="example-py")  # acquire: a warm member
    print(f"acquired {sb.id} from pool {sb.pool} in {(time.perf_counter() - t0) * 1000:.1f} ms")
    print(sb.commands.run("echo hello from a warm sandbox").stdout, end="")
    ctx = sb.contexts.list()[0]  # the template's python context is already running
    print("python says", ctx.run("6 * 7").text)
    sb.kill()  # release: wiped and put back warm

    pool = client.pools.get("example-py")
    print(f"pool: {pool.members}, hits {pool.hits}, misses {pool.misses}")
finally:
    client.pools.delete("example-py")
    client.close()
