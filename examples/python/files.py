"""A sandbox that lives across several steps: write files into it, work on them, list and
read the results back.

    python3 examples/python/files.py
"""

from hutch import Sandbox

sb = Sandbox.create(ttl_seconds=600, metadata={"example": "files"})
try:
    print(f"sandbox {sb.id} expires at {sb.expires_at} (unix ms)")
    sb.files.make_dir("/workspace/data")
    sb.files.write("/workspace/data/numbers.csv", "n\n1\n2\n3\n")
    sb.files.write("/workspace/data/blob.bin", bytes(range(256)))
    sb.files.write(
        "/workspace/sum.py",
        "import csv\nprint(sum(int(r['n']) for r in csv.DictReader(open('data/numbers.csv'))))\n",
    )

    # a later step: the files are still there
    result = sb.commands.run(["python3", "sum.py"])
    print("sum:", result.stdout.strip())
    sb.commands.run("sort -r data/numbers.csv > data/reversed.csv")

    for entry in sb.files.list("/workspace/data"):
        print(f"  {entry.kind:4} {entry.size:6} {entry.name}")
    print("reversed.csv:", sb.files.read_text("/workspace/data/reversed.csv").split())
    assert sb.files.read("/workspace/data/blob.bin") == bytes(range(256))
    print("binary file round trip ok")
finally:
    sb.kill()
