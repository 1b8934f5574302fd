"""The shipped treasury policy on amounts: cents are fine, zero and less are refused outright.

The PDP is built the way ``serve`` and ``arap-server`` build it, from the example's own files
(and from the demo's packaged copy), so these are the decisions a user of the example gets.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mcp_approval.config import ConfigError, load_config
from mcp_approval.demo.servers import materialize
from mcp_approval.policy import CedarPDP, Decision, EntityMapping, EvaluationRequest, PolicyDecisionPoint
from mcp_approval.reference.config import load_arap_config
from mcp_approval.server.arap_backend import pdp_from_config

pytestmark = pytest.mark.anyio

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "treasury"


def _serve_pdp(folder: Path) -> PolicyDecisionPoint:
    return pdp_from_config(load_config(folder / "config.toml"))


def _arap_server_pdp(folder: Path) -> PolicyDecisionPoint:
    # As reference.server builds its Cedar PDP (its [policy] section; the ARAP wrapper aside).
    config = load_arap_config(folder / "arap-server.toml")
    policy = config.policy
    return CedarPDP.from_files(
        config.resolve(policy.cedar),
        config.resolve(policy.entities) if policy.entities else None,
        mapping=EntityMapping(decimals=tuple(policy.decimals)),
    )


@pytest.fixture(
    params=[
        ("example", _serve_pdp),
        ("example", _arap_server_pdp),
        ("demo", _serve_pdp),
        ("demo", _arap_server_pdp),
    ],
    ids=["example-serve", "example-arap-server", "demo-serve", "demo-arap-server"],
)
def pdp(request: pytest.FixtureRequest, tmp_path: Path) -> PolicyDecisionPoint:
    which, build = request.param
    folder = EXAMPLE if which == "example" else materialize(tmp_path / "treasury").parent
    builder: Callable[[Path], PolicyDecisionPoint] = build
    return builder(folder)


async def decide(pdp: PolicyDecisionPoint, tool: str, **arguments: Any) -> Decision:
    request = EvaluationRequest.model_validate(
        {
            "subject": {"type": "user", "id": "alice"},
            "action": {"name": "tools/call"},
            "resource": {"type": "tool", "id": tool},
            "context": {"arguments": arguments},
        }
    )
    return await pdp.evaluate(request)


def template_of(decision: Decision) -> str | None:
    denial = decision.requestable_denial
    return denial.access_request.template if denial is not None else None


@pytest.mark.parametrize("amount", [1234.56, 0.01, 25_000, 25_000.0, 100])
async def test_a_transfer_with_or_without_cents_up_to_the_limit_is_permitted(
    pdp: PolicyDecisionPoint, amount: float
) -> None:
    decision = await decide(pdp, "wire_transfer", to="acme", amount=amount)
    assert decision.decision is True, decision.context


@pytest.mark.parametrize("amount", [25_000.01, 30_000, 30_000.5, 1_000_000])
async def test_a_large_transfer_with_or_without_cents_is_requestable(pdp: PolicyDecisionPoint, amount: float) -> None:
    decision = await decide(pdp, "wire_transfer", to="acme", amount=amount)
    assert decision.decision is False
    assert template_of(decision) == "treasury"


@pytest.mark.parametrize(("tool", "extra"), [("wire_transfer", {"to": "acme"}), ("refund", {"order": "o-1"})])
@pytest.mark.parametrize("amount", [0, 0.0, -0.01, -5, -30_000])
async def test_zero_and_negative_amounts_are_a_final_denial(
    pdp: PolicyDecisionPoint, tool: str, extra: dict[str, Any], amount: float
) -> None:
    decision = await decide(pdp, tool, amount=amount, **extra)
    assert decision.decision is False
    assert decision.requestable_denial is None
    assert decision.reason == "amount_not_positive"


@pytest.mark.parametrize("amount", [20, 20.5, 499.99])
async def test_a_refund_with_or_without_cents_is_requestable(pdp: PolicyDecisionPoint, amount: float) -> None:
    decision = await decide(pdp, "refund", order="o-2", amount=amount)
    assert template_of(decision) == "refund"


async def test_an_amount_cedar_cannot_hold_is_a_final_denial_naming_it(pdp: PolicyDecisionPoint) -> None:
    decision = await decide(pdp, "wire_transfer", to="acme", amount=1.23456)
    assert decision.decision is False
    assert decision.requestable_denial is None
    assert "context.arguments.amount" in str((decision.context or {}).get("error"))


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        ('cedar = "policy.cedar"\ndecimals = ["arguments.amount"]', "'arguments.amount': a decimal member is written"),
        ('pdp_url = "http://127.0.0.1:8181"\ndecimals = ["context.arguments.amount"]', "the remote PDP maps its own"),
    ],
)
def test_a_decimals_entry_that_cannot_work_is_refused_naming_the_field(
    tmp_path: Path, policy: str, message: str
) -> None:
    text = (EXAMPLE / "config.toml").read_text()
    start = text.index("[policy]")
    end = text.index("[tools]")
    (tmp_path / "config.toml").write_text(text[:start] + f"[policy]\n{policy}\n\n" + text[end:])
    with pytest.raises(ConfigError) as raised:
        load_config(tmp_path / "config.toml")
    assert "policy" in str(raised.value)
    assert message in str(raised.value)
