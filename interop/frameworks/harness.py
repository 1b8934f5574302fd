"""What the framework legs share (standard library only: it runs in every framework's own venv).

A leg is one script per framework, run as ``python leg_<name>.py BASE_URL LEDGER RESULTS``: BASE_URL
is a private copy of the treasury example served by ``mcp-approval serve``, LEDGER its ledger file
(the side effect: how often the transfer ran), RESULTS the JSON file the leg's step verdicts and
the texts its framework showed the model are written to (``table.py`` prints them as a table).

The reviewer is the out-of-band human: plain HTTP against the reviewer API, not MCP client code.
The framework side is what a model would be shown: each leg turns the framework's tool output
into the text the framework hands its model, and the checks read only that text.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import sys
import time
import traceback
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

REQUESTER_TOKEN = "alice-token"  # noqa: S105 - the treasury example's development tokens
REVIEWER_TOKEN = "carol-token"  # noqa: S105
AMOUNT = 30000  # above the treasury policy's 25,000 threshold: the call needs approval
STEP_TIMEOUT_S = 60.0
_REFERENCE = re.compile(r"reference[\"':\s]+([A-Za-z0-9_-]{16,})")

#: The gated call as a model would make it; ``Call`` turns it into what the model is shown.
Call = Callable[[str, dict[str, Any]], Awaitable[str]]


class CheckFailed(AssertionError):
    """A check on what the model was shown did not hold."""


def check(condition: bool, message: str) -> None:
    """Raise :class:`CheckFailed` with ``message`` unless ``condition`` holds."""
    if not condition:
        raise CheckFailed(message)


def excerpt(text: str, limit: int = 240) -> str:
    """``text`` on one line, cut to ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class Leg:
    """Named steps of one client's run: PASS/FAIL lines, then the results file."""

    def __init__(self, client: str) -> None:
        if len(sys.argv) != 4:
            sys.exit(f"usage: {sys.argv[0]} BASE_URL LEDGER RESULTS")
        self.client = client
        self.base_url = sys.argv[1].rstrip("/").removesuffix("/mcp")
        self.mcp_url = f"{self.base_url}/mcp"
        self.ledger = Path(sys.argv[2])
        self.results = Path(sys.argv[3])
        self.steps: dict[str, str] = {}
        self.seen: dict[str, str] = {}

    async def step(self, name: str, run: Callable[[], Awaitable[str]], timeout_s: float = STEP_TIMEOUT_S) -> bool:
        """Run one check; print and record PASS or FAIL with its detail."""
        try:
            detail = await asyncio.wait_for(run(), timeout_s)
        except Exception as error:
            self.steps[name] = "FAIL"
            message = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
            print(f"FAIL [{self.client}] {name}: {excerpt(message, 600)}", flush=True)
            if not isinstance(error, (CheckFailed, TimeoutError)):
                traceback.print_exc(limit=4)
            return False
        self.steps[name] = "PASS"
        print(f"PASS [{self.client}] {name}: {detail}", flush=True)
        return True

    def saw(self, step: str, text: str) -> str:
        """Record what the model was shown at ``step``; returns ``text``."""
        self.seen[step] = text
        return text

    def finish(self) -> int:
        """Write the results file and the closing count; the exit status (1 on any failure)."""
        failed = sum(verdict != "PASS" for verdict in self.steps.values())
        document = {"client": self.client, "steps": self.steps, "seen": self.seen}
        self.results.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        print(f"[{self.client}] {len(self.steps) - failed} passed, {failed} failed", flush=True)
        return 1 if failed else 0


def new_account(client: str, mode: str) -> str:
    """An account name no other run uses, so each run's requests and ledger lines are its own."""
    slug = re.sub(r"[^a-z0-9]+", "-", client.lower()).strip("-")
    return f"{slug}-{mode}-{secrets.token_hex(4)}"


def transfer(account: str) -> dict[str, Any]:
    """The gated call's arguments."""
    return {"to": account, "amount": AMOUNT}


# --- the reviewer (plain HTTP) -----------------------------------------------------------------


def reviewer_request(base_url: str, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """One reviewer API request as carol; the parsed JSON body. Raises ``HTTPError`` on non-2xx."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"{base_url}{path}", data=data, method=method)  # noqa: S310 - http://127.0.0.1
    request.add_header("Authorization", f"Bearer {REVIEWER_TOKEN}")
    if data is not None:
        request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        return json.loads(response.read())


def pending_for(base_url: str, account: str) -> list[dict[str, Any]]:
    """The pending approval requests for a transfer to ``account``."""
    listing = reviewer_request(base_url, "GET", "/approvals?status=pending")
    return [r for r in listing["approvals"] if r["tool"] == "wire_transfer" and r["arguments"].get("to") == account]


async def decide(base_url: str, account: str, decision: str, timeout_s: float = 30.0) -> str:
    """Wait for exactly one pending request for ``account``, then decide it; "<id> -> <status>"."""
    deadline = time.monotonic() + timeout_s
    while True:
        mine = await asyncio.to_thread(pending_for, base_url, account)
        check(len(mine) <= 1, f"{len(mine)} pending requests for {account}, expected one")
        if mine:
            path = f"/approvals/{mine[0]['id']}/decide"
            body = {"decision": decision, "comment": f"framework leg {decision}"}
            record = await asyncio.to_thread(reviewer_request, base_url, "POST", path, body)
            return f"{record['id']} -> {record['status']}"
        check(time.monotonic() < deadline, f"no pending request for {account} after {timeout_s} s")
        await asyncio.sleep(0.1)


async def decide_answers(base_url: str, approval_id: str, decision: str) -> int:
    """The reviewer API's HTTP status for deciding ``approval_id`` (e.g. 409 once it was withdrawn)."""
    path = f"/approvals/{approval_id}/decide"
    try:
        await asyncio.to_thread(reviewer_request, base_url, "POST", path, {"decision": decision})
    except urllib.error.HTTPError as error:
        return error.code
    return 200


def ledger_count(ledger: Path, account: str) -> int:
    """How many transfers to ``account`` ran (the ledger file the treasury tools append to)."""
    if not ledger.exists():
        return 0
    lines = ledger.read_text(encoding="utf-8").splitlines()
    entries = [json.loads(line) for line in lines if line.strip()]
    return sum(1 for e in entries if e.get("op") == "wire_transfer" and e.get("to") == account)


# --- what the model must be able to act on -----------------------------------------------------


def pending_reference(text: str) -> str:
    """Check a pending answer as shown to the model (stop and tell, a reference, a way to check later)."""
    check("Stop and tell the user" in text, f"no 'Stop and tell the user' in {excerpt(text)!r}")
    check("approval_status" in text, f"no approval_status in {excerpt(text)!r}")
    match = _REFERENCE.search(text)
    check(match is not None, f"no reference in {excerpt(text)!r}")
    assert match is not None
    return match.group(1)


def check_result(text: str) -> None:
    """Check the approved call's result as shown to the model."""
    check("completed" in text, f"no transfer result in {excerpt(text)!r}")


def check_denial(text: str) -> None:
    """Check the denied call's answer as shown to the model."""
    check("did not run" in text, f"no 'did not run' in {excerpt(text)!r}")
    check("completed" not in text, f"a transfer result after a denial: {excerpt(text)!r}")


# --- the flow every client without tasks runs ----------------------------------------------------


async def approval_flow(leg: Leg, call: Call) -> None:
    """pending, status, approve -> result, ran once, deny -> denial, through ``call`` (the framework)."""
    approved, denied = new_account(leg.client, "approve"), new_account(leg.client, "deny")
    reference = ""

    async def pending() -> str:
        nonlocal reference
        reference = pending_reference(leg.saw("pending", await call("wire_transfer", transfer(approved))))
        check(ledger_count(leg.ledger, approved) == 0, "the transfer ran before a decision")
        return f"reference {reference}: {excerpt(leg.seen['pending'], 120)}"

    async def status() -> str:
        text = leg.saw("status", await call("approval_status", {"reference": reference}))
        check(reference in text and ("open" in text or "pending" in text), f"approval_status said {excerpt(text)!r}")
        return excerpt(text, 120)

    async def approve_then_result() -> str:
        decided = await decide(leg.base_url, approved, "approve")
        started = time.monotonic()
        text = leg.saw("approve", await call("wire_transfer", transfer(approved)))
        took = time.monotonic() - started
        check("completed" in text, f"no transfer result {took:.1f} s after the approval in {excerpt(text)!r}")
        return f"{decided}; answered in {took:.1f} s: {excerpt(text, 120)}"

    async def ran_once() -> str:
        count = ledger_count(leg.ledger, approved)
        check(count == 1, f"{count} transfers to {approved}, expected 1")
        return f"1 transfer to {approved}"

    async def deny_then_denial() -> str:
        pending_reference(await call("wire_transfer", transfer(denied)))
        decided = await decide(leg.base_url, denied, "deny")
        text = leg.saw("deny", await call("wire_transfer", transfer(denied)))
        check_denial(text)
        count = ledger_count(leg.ledger, denied)
        check(count == 0, f"{count} transfers to {denied} after a denial")
        return f"{decided}; {excerpt(text, 120)}"

    if await leg.step("pending", pending):
        await leg.step("status", status)
        if await leg.step("approve", approve_then_result):
            await leg.step("ran once", ran_once)
    await leg.step("deny", deny_then_denial)
