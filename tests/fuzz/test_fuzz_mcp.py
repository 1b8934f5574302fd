"""Hypothesis-generated JSON-RPC at the MCP endpoint of a live ``serve``.

Messages with the right shape and the wrong one: unknown and known methods, ids and params of
every JSON type, unicode (surrogates, NUL, right-to-left marks), deep nesting, long strings,
numbers past 64 bits, and bodies that are not JSON at all. Each must be answered below 500 within
the hang limit, and the server must still answer its health request afterwards.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_approval.checks.wire import PROTOCOL
from tests.fuzz.conftest import FUZZ_CASES, REQUEST_TIMEOUT_S, TALLY, assert_healthy
from tests.support.treasury import TreasuryServer

pytestmark = pytest.mark.fuzz

METHODS = ["tools/call", "tools/list", "tasks/get", "tasks/update", "tasks/cancel", "subscriptions/listen", "ping"]
TOOLS = ["wire_transfer", "refund", "close_quarter", "approval_status", "no_such_tool", ""]
#: Per test: each test draws this many messages (the environment's budget, at least 10).
MESSAGES = max(10, FUZZ_CASES * 5)

text = st.text(st.characters(codec="utf-8"), max_size=64) | st.sampled_from(["\x00", "\u202e", "é" * 300, "\U0001d518"])
scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | text
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=6) | st.dictionaries(text, children, max_size=6),
    max_leaves=40,
)


class Nested:
    """A value nested ``depth`` levels deep (objects and arrays alternating), written out only as JSON text.

    Held as a depth rather than as nested Python objects: neither ``json.dumps`` nor Hypothesis's
    printing of an example may recurse thousands of levels in the test process itself.
    """

    def __init__(self, depth: int, leaf: Any) -> None:
        self.depth, self.leaf = depth, leaf

    def __repr__(self) -> str:
        return f"Nested(depth={self.depth}, leaf={self.leaf!r})"

    def json_text(self) -> str:
        opens = "".join('{"x":' if level % 2 else "[" for level in reversed(range(self.depth)))
        closes = "".join("}" if level % 2 else "]" for level in range(self.depth))
        return opens + json.dumps(self.leaf, ensure_ascii=False) + closes


def encode(value: Any) -> bytes:
    """``value`` as a JSON body, each :class:`Nested` written out at its full depth."""
    deep: dict[str, Nested] = {}

    def placeholder(item: Any) -> str:
        if not isinstance(item, Nested):
            raise TypeError(f"not JSON: {type(item).__name__}")
        key = f"nested-{secrets.token_hex(8)}"  # no generated string is this
        deep[key] = item
        return key

    text = json.dumps(value, ensure_ascii=False, default=placeholder)
    for key, item in deep.items():
        text = text.replace(json.dumps(key), item.json_text(), 1)
    return text.encode("utf-8", "surrogatepass")


nested = st.builds(Nested, st.integers(min_value=30, max_value=3_000), scalars)


big = st.builds(
    lambda n, c: c * n, st.integers(min_value=1_000, max_value=200_000), st.sampled_from(["a", "é", "\x00"])
)
arguments = st.dictionaries(text, json_values | nested | big, max_size=8) | json_values
params = st.one_of(
    st.fixed_dictionaries({"name": st.sampled_from(TOOLS) | text, "arguments": arguments}),
    st.fixed_dictionaries({"taskId": text | json_values}),
    st.fixed_dictionaries({"taskId": text, "inputResponses": json_values}),
    json_values,
)
message = st.fixed_dictionaries(
    {"jsonrpc": st.just("2.0") | json_values, "method": st.sampled_from(METHODS) | text | json_values},
    optional={"id": st.integers() | text | json_values, "params": params},
)
raw = st.one_of(
    st.binary(max_size=256),
    st.builds(encode, message),
    st.builds(encode, st.lists(message, min_size=0, max_size=4)),
    st.sampled_from(
        [
            b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"arguments": {"a": NaN}}}',
            b"[" * 100_000,
            b'{"a":' * 50_000,
            b"\xff\xfe",
            b"",
        ]
    ),
)


def post(base_url: str, body: bytes, method: Any) -> int:
    headers = {
        "authorization": "Bearer alice-token",
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": PROTOCOL,
    }
    if isinstance(method, str) and method.isascii() and method.isprintable():
        headers["mcp-method"] = method
    response = httpx.post(base_url + "/mcp", content=body, headers=headers, timeout=REQUEST_TIMEOUT_S)
    TALLY.record(response.status_code)
    assert response.status_code < 500, f"{response.status_code}: {response.text[:300]} for {body[:300]!r}"
    return response.status_code


FUZZ_SETTINGS = settings(max_examples=MESSAGES, deadline=None, database=None, suppress_health_check=list(HealthCheck))


def test_generated_messages(fuzzed_serve: TreasuryServer) -> None:
    @FUZZ_SETTINGS
    @given(body=message)
    def run(body: dict[str, Any]) -> None:
        post(fuzzed_serve.base_url, encode(body), body.get("method"))
        assert_healthy(fuzzed_serve.base_url)

    run()


def test_raw_bodies(fuzzed_serve: TreasuryServer) -> None:
    @FUZZ_SETTINGS
    @given(body=raw, method=st.sampled_from(METHODS))
    def run(body: bytes, method: str) -> None:
        post(fuzzed_serve.base_url, body, method)
        assert_healthy(fuzzed_serve.base_url)

    run()


def test_no_tracebacks_in_the_log(fuzzed_serve: TreasuryServer) -> None:
    log = fuzzed_serve.log()
    assert "Traceback" not in log
    assert "Exception in ASGI application" not in log
