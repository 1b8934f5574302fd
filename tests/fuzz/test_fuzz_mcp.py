"""Hypothesis-generated JSON-RPC at the MCP endpoint of a live ``serve``.

Messages with the right shape and the wrong one: unknown and known methods, ids and params of
every JSON type, unicode (surrogates, NUL, right-to-left marks), deep nesting, long strings,
numbers past 64 bits, and bodies that are not JSON at all. Each must be answered below 500 within
the hang limit, and the server must still answer its health request afterwards.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.conftest import FUZZ_CASES, REQUEST_TIMEOUT_S, TALLY, assert_healthy
from tests.support.treasury import TreasuryServer
from tests.support.wire import PROTOCOL

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


@st.composite
def nested(draw: st.DrawFn) -> Any:
    """A value nested deeper than parsers like (objects and arrays, up to 3,000 levels)."""
    depth = draw(st.integers(min_value=30, max_value=3_000))
    value: Any = draw(scalars)
    for level in range(depth):
        value = {"x": value} if level % 2 else [value]
    return value


big = st.builds(
    lambda n, c: c * n, st.integers(min_value=1_000, max_value=200_000), st.sampled_from(["a", "é", "\x00"])
)
arguments = st.dictionaries(text, json_values | nested() | big, max_size=8) | json_values
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
    st.builds(lambda m: json.dumps(m, ensure_ascii=False).encode("utf-8", "surrogatepass"), message),
    st.builds(lambda ms: json.dumps(ms).encode(), st.lists(message, min_size=0, max_size=4)),
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
        encoded = json.dumps(body, ensure_ascii=False).encode("utf-8", "surrogatepass")
        post(fuzzed_serve.base_url, encoded, body.get("method"))
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
