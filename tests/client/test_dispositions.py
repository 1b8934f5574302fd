"""SEP-2848 §Execution disposition, on the client: unknown values count as possibly executed."""

from __future__ import annotations

import mcp_types as types
import pytest

from mcp_approval.client import read_disposition

KEY = "io.modelcontextprotocol/tool-approval-disposition"


@pytest.mark.parametrize(
    ("value", "executed", "possibly", "recognized"),
    [
        ("approved-executed", True, True, True),
        ("denied-not-executed", False, False, True),
        ("execution-error", False, True, True),
        ("outcome-unknown", False, True, True),
        ("partially-executed-v2", False, True, False),
    ],
)
@pytest.mark.sep_check("sep-2848-client-unknown-disposition")
@pytest.mark.sep_check("sep-2848-client-unknown-disposition")
def test_dispositions_and_what_they_allow(value: str, executed: bool, possibly: bool, recognized: bool) -> None:
    result = types.CallToolResult(content=[], _meta={KEY: value})
    disposition = read_disposition(result)
    assert disposition is not None
    assert (disposition.executed, disposition.possibly_executed, disposition.recognized) == (
        executed,
        possibly,
        recognized,
    )
    assert disposition.may_retry_automatically is False
    assert read_disposition({"content": [], "_meta": {KEY: value}}) == disposition


@pytest.mark.parametrize("meta", [None, {}, {KEY: 3}, {KEY: ""}, {KEY: ["approved-executed"]}])
def test_absent_or_ill_formed_dispositions_read_as_none(meta: object) -> None:
    assert read_disposition({"content": [], "_meta": meta}) is None
