"""Files through envd's /files and filesystem service."""
import time

from e2b import FileType


def test_write_read_and_info(sandbox):
    info = sandbox.files.write("hello.txt", "hello, hutch")
    assert info.path == "/home/user/hello.txt"
    assert info.name == "hello.txt"
    assert sandbox.files.read("hello.txt") == "hello, hutch"
    assert sandbox.files.read("/home/user/hello.txt", format="bytes") == b"hello, hutch"
    st = sandbox.files.get_info("hello.txt")
    assert st.type == FileType.FILE
    assert st.size == len("hello, hutch")
    assert st.owner == "user"
    assert st.permissions == "-rw-r--r--"


def test_binary_and_nested_paths(sandbox):
    data = bytes(range(256)) * 10
    sandbox.files.write("deep/er/blob.bin", data)
    assert sandbox.files.read("deep/er/blob.bin", format="bytes") == data


def test_write_many(sandbox):
    sandbox.files.write_files(
        [{"path": "m/1.txt", "data": "one"}, {"path": "/tmp/m/2.txt", "data": b"two"}]
    )
    assert sandbox.files.read("m/1.txt") == "one"
    assert sandbox.files.read("/tmp/m/2.txt") == "two"


def test_list_exists_remove_rename_make_dir(sandbox):
    assert sandbox.files.make_dir("d/sub") is True
    assert sandbox.files.make_dir("d/sub") is False
    sandbox.files.write("d/a.txt", "a")
    names = sorted(e.name for e in sandbox.files.list("d"))
    assert names == ["a.txt", "sub"]
    kinds = {e.name: e.type for e in sandbox.files.list("d")}
    assert kinds == {"a.txt": FileType.FILE, "sub": FileType.DIR}
    deep = sorted(e.path for e in sandbox.files.list("/home/user", depth=2) if e.path.startswith("/home/user/d"))
    assert deep == ["/home/user/d", "/home/user/d/a.txt", "/home/user/d/sub"]
    assert sandbox.files.exists("d/a.txt")
    moved = sandbox.files.rename("d/a.txt", "d/b.txt")
    assert moved.path == "/home/user/d/b.txt"
    assert not sandbox.files.exists("d/a.txt")
    assert sandbox.files.read("d/b.txt") == "a"
    sandbox.files.remove("d")
    assert not sandbox.files.exists("d")
    sandbox.files.remove("d")  # missing is fine


def test_missing_file_is_file_not_found(sandbox):
    from e2b.exceptions import NotFoundException

    try:
        sandbox.files.read("nope.txt")
    except NotFoundException as e:
        assert "nope.txt" in str(e)
    else:
        raise AssertionError("reading a missing file must fail")


def test_streamed_and_gzip_uploads(sandbox):
    import io

    sandbox.files.write("stream.bin", io.BytesIO(b"x" * 100_000))
    assert sandbox.files.read("stream.bin", format="bytes") == b"x" * 100_000
    sandbox.files.write("gz.txt", "zipped " * 1000, gzip=True)
    assert sandbox.files.read("gz.txt", gzip=True) == "zipped " * 1000


def test_watch_dir(sandbox):
    sandbox.files.make_dir("watched")
    h = sandbox.files.watch_dir("watched")
    try:
        sandbox.files.write("watched/new.txt", "content")
        deadline = time.time() + 10
        events = []
        while time.time() < deadline and not any(e.name == "new.txt" for e in events):
            time.sleep(0.3)
            events += h.get_new_events()
        names = {(e.name, e.type.name) for e in events}
        assert ("new.txt", "CREATE") in names
        sandbox.files.remove("watched/new.txt")
        deadline = time.time() + 10
        removed = False
        while time.time() < deadline and not removed:
            time.sleep(0.3)
            removed = any(e.type.name == "REMOVE" for e in h.get_new_events())
        assert removed
    finally:
        h.stop()


def test_signed_urls_work_without_the_sdk(sandbox):
    import urllib.request

    sandbox.files.write("signed.txt", "via a signed URL")
    with urllib.request.urlopen(sandbox.download_url("signed.txt")) as r:
        assert r.read() == b"via a signed URL"
    up = urllib.request.Request(
        sandbox.upload_url("uploaded.txt"),
        data=b"raw upload",
        method="POST",
        headers={"Content-Type": "application/octet-stream"},
    )
    with urllib.request.urlopen(up) as r:
        assert r.status == 200
    assert sandbox.files.read("uploaded.txt") == "raw upload"


def test_expired_and_forged_signatures_are_refused(sandbox):
    import urllib.error
    import urllib.request

    sandbox.files.write("secret.txt", "no")
    expired = sandbox.download_url("secret.txt", use_signature_expiration=-10)
    forged = sandbox.download_url("secret.txt").replace("signature=v1_", "signature=v1_x")
    for url in (expired, forged):
        try:
            urllib.request.urlopen(url)
        except urllib.error.HTTPError as e:
            assert e.code == 401
        else:
            raise AssertionError(f"{url} must be refused")
