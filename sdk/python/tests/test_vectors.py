"""The shared test vectors (spec/test-vectors/sdk-v1.json), without a network: for every
operation the transport builds exactly the vector's request and decodes its response into the
documented result; every error response raises the named class with the server's message. The
TypeScript SDK passes the same file."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any, Dict, List

import pytest

import hutch
from hutch import _transport as transport

VECTORS = Path(__file__).resolve().parents[3] / "spec" / "test-vectors" / "sdk-v1.json"

DATA = json.loads(VECTORS.read_text())
OPERATIONS: List[Dict[str, Any]] = DATA["operations"]
ERRORS: List[Dict[str, Any]] = DATA["errors"]


def test_vector_file_is_a_version_this_sdk_speaks() -> None:
    assert DATA["version"] == 1


def response_bytes(resp: Dict[str, Any]) -> bytes:
    if "json" in resp:
        return json.dumps(resp["json"]).encode()
    if "body_b64" in resp:
        return base64.b64decode(resp["body_b64"])
    return b""


def assert_matches(actual: Any, expected: Any, where: str = "result") -> None:
    """Every field the vector names has that value on the decoded result. A key ending in
    `_b64` names bytes: `stdout_bytes_b64` is the `stdout_bytes` attribute, `data_b64` the result
    itself when the result is bytes."""
    if expected is None or isinstance(expected, (str, int, float, bool)):
        assert actual == expected, f"{where}: {actual!r} != {expected!r}"
        return
    if isinstance(expected, list):
        assert isinstance(actual, list), f"{where}: expected a list, got {actual!r}"
        assert len(actual) == len(expected), f"{where}: {len(actual)} items, expected {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_matches(a, e, f"{where}[{i}]")
        return
    assert isinstance(expected, dict)
    for key, value in expected.items():
        if key.endswith("_b64"):
            want = base64.b64decode(value)
            name = key[: -len("_b64")]
            got = actual if isinstance(actual, bytes) and name == "data" else getattr(actual, name)
            assert got == want, f"{where}.{name}: {got!r} != {want!r}"
        elif isinstance(actual, dict):
            assert key in actual, f"{where}: no key {key!r} in {actual!r}"
            assert_matches(actual[key], value, f"{where}[{key!r}]")
        else:
            assert hasattr(actual, key), f"{where}: {type(actual).__name__} has no field {key!r}"
            assert_matches(getattr(actual, key), value, f"{where}.{key}")


@pytest.mark.parametrize("vector", OPERATIONS, ids=[v["name"] for v in OPERATIONS])
def test_request(vector: Dict[str, Any]) -> None:
    call, want = vector["call"], vector["request"]
    req = transport.build(call["op"], call["args"])
    assert req.method == want["method"]
    assert req.path == want["path"]
    if "json" in want:
        assert req.json == want["json"]
        assert req.headers["content-type"] == "application/json"
        assert json.loads(req.content or b"") == want["json"]
    else:
        assert req.json is None
    if "body_b64" in want:
        assert req.body == base64.b64decode(want["body_b64"])
        assert req.content == req.body
    if "content_type" in want:
        assert req.headers["content-type"] == want["content_type"]
    if "json" not in want and "body_b64" not in want:
        assert req.content is None


@pytest.mark.parametrize("vector", OPERATIONS, ids=[v["name"] for v in OPERATIONS])
def test_response(vector: Dict[str, Any]) -> None:
    resp = vector["response"]
    result = transport.decode(vector["call"]["op"], resp["status"], response_bytes(resp))
    assert_matches(result, vector["result"])


@pytest.mark.parametrize(
    "vector", ERRORS, ids=[f"{e['response']['status']}-{e['response']['json']['code']}" for e in ERRORS]
)
def test_error(vector: Dict[str, Any]) -> None:
    resp = vector["response"]
    cls = getattr(hutch, vector["class"])
    assert issubclass(cls, hutch.HutchError)
    with pytest.raises(cls) as caught:
        transport.decode("sandboxes.get", resp["status"], response_bytes(resp))
    err = caught.value
    assert type(err) is cls
    assert err.status == resp["status"]
    assert err.code == resp["json"]["code"]
    assert err.message == resp["json"]["message"]
    assert resp["json"]["message"] in str(err)


def test_sandbox_stopped_is_a_conflict() -> None:
    assert issubclass(hutch.SandboxStoppedError, hutch.ConflictError)


@pytest.mark.parametrize(
    "status,code,cls",
    [
        (405, "method_not_allowed", hutch.InvalidRequestError),
        (415, "unsupported_media_type", hutch.InvalidRequestError),
        (404, "no_such_process", hutch.NotFoundError),
        (409, "conflict", hutch.ConflictError),
        (503, "shutting_down", hutch.BackendUnavailableError),
        (500, "sandbox_error", hutch.ServerError),
        (507, "insufficient_storage", hutch.ServerError),
        (501, "not_supported", hutch.NotSupportedError),
        (502, "something_new", hutch.ServerError),
        (418, "something_new", hutch.HutchError),
    ],
)
def test_every_code_has_a_class(status: int, code: str, cls: type) -> None:
    body = json.dumps({"code": code, "message": "m"}).encode()
    with pytest.raises(cls) as caught:
        transport.decode("health", status, body)
    assert type(caught.value) is cls


def test_an_error_without_json_keeps_the_status() -> None:
    with pytest.raises(hutch.ServerError) as caught:
        transport.decode("health", 502, b"Bad Gateway")
    assert caught.value.status == 502
    assert caught.value.message == "Bad Gateway"
