"""Run the kit: check the operator's input, then every selected scenario, in order."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx2

from mcp_approval.checks.options import CheckInputError, CheckOptions
from mcp_approval.checks.report import Failed, Outcome, ScenarioResult, Skipped
from mcp_approval.checks.scenarios import SCENARIOS
from mcp_approval.checks.session import Session
from mcp_approval.checks.wire import Wire

__all__ = ["run_checks"]


async def run_checks(
    options: CheckOptions, on_result: Callable[[ScenarioResult], None] | None = None
) -> list[ScenarioResult]:
    """Every selected scenario's result; :class:`CheckInputError` when the input is unusable."""
    unknown = sorted((options.only or set()) - {scenario.id for scenario in SCENARIOS})
    if unknown:
        raise CheckInputError(f"--only names unknown scenarios: {', '.join(unknown)}")
    seen: list[str] = []
    async with httpx2.AsyncClient(timeout=options.timeout_s, headers=options.extra_headers) as http:
        session = Session(
            options, Wire(http, options.url, options.token, seen), Wire(http, options.url, options.other_token, seen)
        )
        await _preflight(session)
        results: list[ScenarioResult] = []
        for scenario in SCENARIOS:
            if options.only is not None and scenario.id not in options.only and scenario.id != "declares-extensions":
                continue
            evidence: list[str] = []
            started = time.monotonic()
            outcome: Outcome
            try:
                detail = await scenario.run(session, evidence)
                outcome = "PASS"
            except Failed as exc:
                outcome, detail = "FAIL", str(exc)
            except Skipped as exc:
                outcome, detail = "SKIP", str(exc)
            except (httpx2.HTTPError, RuntimeError, TimeoutError) as exc:
                outcome, detail = "FAIL", f"{type(exc).__name__}: {exc}"
            result = ScenarioResult(
                scenario.id, scenario.checks, scenario.statement, outcome, detail, evidence, time.monotonic() - started
            )
            results.append(result)
            if on_result is not None:
                on_result(result)
        return results


async def _preflight(session: Session) -> None:
    """Reachable, both tokens accepted, and the gated and witness tools listed; else one clear line."""
    options = session.options
    for option, wire in (("--token", session.one), ("--other-token", session.other)):
        try:
            answer = await wire.request("tools/list", {})
        except httpx2.HTTPError as exc:
            raise CheckInputError(f"cannot reach {options.url}: {type(exc).__name__}: {exc}") from None
        if answer.status in (401, 403):
            raise CheckInputError(f"the server refused {option} (HTTP {answer.status}: {answer.text.strip()[:120]})")
        if answer.result is None:
            raise CheckInputError(f"{options.url} did not answer tools/list as an MCP server: {answer.brief()}")
        if wire is session.one:
            names = await _tool_names(wire, answer.result)
            for wanted, role in ((options.tool, "--tool"), (options.witness_tool, "--witness-tool")):
                if wanted is not None and wanted not in names:
                    listed = ", ".join(sorted(names)) or "none"
                    raise CheckInputError(f"{role} {wanted!r} is not a tool of the server (it lists: {listed})")


async def _tool_names(wire: Wire, first: dict[str, object]) -> set[str]:
    names: set[str] = set()
    page: dict[str, object] | None = first
    for _ in range(50):  # a server that pages forever is not waited for
        if page is None:
            break
        tools = page.get("tools")
        if isinstance(tools, list):
            names.update(str(tool.get("name")) for tool in tools if isinstance(tool, dict))
        cursor = page.get("nextCursor")
        if not isinstance(cursor, str):
            break
        page = (await wire.request("tools/list", {"cursor": cursor})).result
    return names
