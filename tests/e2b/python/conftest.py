"""Fixtures: a fresh sandbox per test from the stock SDKs, killed afterwards.

scripts/test-e2b.sh starts `hutch serve --e2b` and sets E2B_API_KEY, E2B_API_URL and
E2B_SANDBOX_URL; nothing here knows it talks to hutch.
"""
import os
import uuid

import pytest
from e2b import AsyncSandbox, Sandbox
from e2b_code_interpreter import Sandbox as CodeSandbox

if not os.environ.get("E2B_API_URL"):
    pytest.exit("run through scripts/test-e2b.sh (it starts hutch serve --e2b)", returncode=2)


@pytest.fixture
def test_id():
    return uuid.uuid4().hex[:12]


def _fresh(cls, test_id):
    sbx = cls.create(metadata={"test": test_id})
    try:
        yield sbx
    finally:
        sbx.kill()


@pytest.fixture
def sandbox(test_id):
    yield from _fresh(Sandbox, test_id)


@pytest.fixture
def ci(test_id):
    """A code-interpreter sandbox (template code-interpreter-v1)."""
    yield from _fresh(CodeSandbox, test_id)


@pytest.fixture
async def async_sandbox(test_id):
    sbx = await AsyncSandbox.create(metadata={"test": test_id})
    try:
        yield sbx
    finally:
        await sbx.kill()
