"""Which input requests a task may issue, given what the creating request declared."""

from __future__ import annotations

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from mcp_approval.tasks.execution import check_declared

FORM = {"method": "elicitation/create", "params": {"message": "m", "requestedSchema": {"type": "object"}}}
URL = {"method": "elicitation/create", "params": {"mode": "url", "message": "m", "url": "https://x.example/a"}}
SAMPLING = {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}}
ROOTS = {"method": "roots/list"}


def caps(**fields):
    return types.ClientCapabilities.model_validate(fields)


@pytest.mark.parametrize(
    ("request_", "capabilities"),
    [
        (FORM, caps(elicitation={})),
        (FORM, caps(elicitation={"form": {}})),
        (FORM, caps(elicitation={"form": {}, "url": {}})),
        (URL, caps(elicitation={"url": {}})),
        (SAMPLING, caps(sampling={})),
        (ROOTS, caps(roots={})),
    ],
)
@pytest.mark.sep_check("sep-2663-input-requests-declared-kinds")
def test_declared_requests_pass(request_, capabilities):
    check_declared(request_, capabilities)


@pytest.mark.parametrize(
    ("request_", "capabilities", "required"),
    [
        (FORM, None, {"elicitation": {"form": {}}}),
        (FORM, caps(), {"elicitation": {"form": {}}}),
        (FORM, caps(elicitation={"url": {}}), {"elicitation": {"form": {}}}),
        (URL, caps(elicitation={}), {"elicitation": {"url": {}}}),
        (URL, caps(elicitation={"form": {}}), {"elicitation": {"url": {}}}),
        (SAMPLING, caps(elicitation={}), {"sampling": {}}),
        (ROOTS, caps(sampling={}), {"roots": {}}),
    ],
)
@pytest.mark.sep_check("sep-2663-input-requests-declared-kinds")
def test_undeclared_requests_are_missing_capability(request_, capabilities, required):
    with pytest.raises(MCPError) as raised:
        check_declared(request_, capabilities)
    assert raised.value.code == -32021
    assert raised.value.data == {"requiredCapabilities": required}


@pytest.mark.sep_check("sep-2663-input-requests-declared-kinds")
def test_other_methods_cannot_be_input_requests():
    with pytest.raises(MCPError) as raised:
        check_declared({"method": "tools/call", "params": {}}, caps(elicitation={}))
    assert raised.value.code == -32602
