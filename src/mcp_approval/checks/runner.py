"""Run the kit: check the operator's input, then every selected scenario in order, then clean up.

Before any scenario the preflight checks the server answers both tokens and lists the tools, and
tries the witness, the decider and the policy hook once: anything unusable is bad input
(:class:`CheckInputError`, one line). A scenario that sees the gated tool run without approval, or
an answer that does not come within ``--timeout``, stops the run: the scenarios that would call
the server again do not run, and the report says why in one verdict. Whatever the run left
pending is cancelled or denied at the end.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import anyio
import httpx2

from mcp_approval.checks import outside
from mcp_approval.checks.bounded import AnswerTooLarge, AnswerTooSlow, LimitExceeded
from mcp_approval.checks.options import CheckInputError, CheckOptions
from mcp_approval.checks.report import CheckResult, Failed, Outcome, RunSummary, Skipped, StopRun
from mcp_approval.checks.run import CheckRun
from mcp_approval.checks.scenarios import SCENARIOS, Scenario
from mcp_approval.checks.wire import MissingMember, Reply, Transcript, Wire

__all__ = ["run_checks"]


async def run_checks(
    options: CheckOptions, on_result: Callable[[CheckResult], None] | None = None
) -> tuple[list[CheckResult], RunSummary]:
    """Every selected scenario's result and the run's summary; :class:`CheckInputError` on unusable input."""
    unknown = sorted((options.only or set()) - {scenario.id for scenario in SCENARIOS})
    if unknown:
        raise CheckInputError(f"--only names unknown scenarios: {', '.join(unknown)}")
    async with httpx2.AsyncClient(timeout=options.timeout_s, headers=options.extra_headers) as http:
        transcript = Transcript()
        wires = [
            Wire(
                http,
                token=token,
                url=options.url,
                transcript=transcript,
                elicitation="form",
                deadline_s=options.timeout_s,
            )
            for token in (options.token, options.other_token)
        ]
        run = CheckRun(options, wires[0], wires[1], transcript)
        summary = RunSummary(preflight=await _preflight(run))
        results: list[CheckResult] = []
        stop_all = False
        for scenario in _selected(options):
            if summary.verdict is not None and (stop_all or scenario.calls_tool):
                summary.not_run.append(scenario.id)
                continue
            result, stop = await _one(run, scenario)
            if stop is not None:
                summary.verdict, stop_all = str(stop), not stop.calls_only
            results.append(result)
            if on_result is not None:
                on_result(result)
        summary.cleanup = await _cleanup(run, stalled=stop_all)
        return results, summary


def _selected(options: CheckOptions) -> list[Scenario]:
    """The scenarios to run (``declares-extensions`` always: the envelope checks depend on what it finds)."""
    return [s for s in SCENARIOS if options.only is None or s.id in options.only or s.id == "declares-extensions"]


async def _one(run: CheckRun, scenario: Scenario) -> tuple[CheckResult, StopRun | None]:
    """Run one scenario: its result, and what stops the run if it saw the tool run ungated or a stall."""
    evidence: list[str] = []
    notes: list[str] = []
    started = time.monotonic()
    outcome: Outcome = "FAIL"
    stop: StopRun | None = None
    try:
        detail = await scenario.run(run, evidence, notes)
        outcome = "PASS"
    except StopRun as exc:
        detail, stop = str(exc), exc
    except Failed as exc:
        detail = str(exc)
    except Skipped as exc:
        outcome, detail = "SKIP", str(exc)
    except AnswerTooSlow as exc:
        detail = f"the server did not answer within {run.options.timeout_s:g}s ({exc}): the kit stops"
        stop = StopRun(detail, calls_only=False)
    except (AnswerTooLarge, MissingMember, httpx2.HTTPError, RuntimeError, TimeoutError) as exc:
        detail = f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # whatever a hostile server makes of the kit, the run goes on
        detail = f"the kit could not finish the scenario: {type(exc).__name__}: {exc}"
    checks, statement = scenario.checks, scenario.statement
    result = CheckResult(scenario.id, checks, statement, outcome, detail, evidence, notes, time.monotonic() - started)
    return result, stop


async def _cleanup(run: CheckRun, *, stalled: bool) -> list[str]:
    """Close what the run left open, within ``--timeout`` (none is tried on a server that stalled)."""
    if stalled:
        return ["not attempted: the server stalled (what the run opened may still be pending)"]
    with anyio.move_on_after(run.options.timeout_s) as scope:
        try:
            return await run.cleanup()
        except (LimitExceeded, httpx2.HTTPError, RuntimeError, Failed) as exc:
            return [f"did not finish: {type(exc).__name__}: {exc}"]
    assert scope.cancelled_caught
    return [f"did not finish within {run.options.timeout_s:g}s"]


async def _preflight(run: CheckRun) -> list[str]:
    """Reachable, both tokens accepted, the gated and witness tools listed; the witness, decider and
    policy hook working. Else one clear line (:class:`CheckInputError`)."""
    options = run.options
    for option, wire in (("--token", run.one), ("--other-token", run.other)):
        reply = await _tools_list(wire, options.url)
        if reply.status in (401, 403):
            raise CheckInputError(f"the server refused {option} (HTTP {reply.status}: {reply.text.strip()[:120]})")
        if not reply.has_result:
            raise CheckInputError(f"{options.url} did not answer tools/list as an MCP server: {reply.brief()}")
        if wire is run.one:
            names = await _tool_names(wire, reply.result)
            for wanted, role in ((options.tool, "--tool"), (options.witness_tool, "--witness-tool")):
                if wanted is not None and wanted not in names:
                    listed = ", ".join(sorted(names)[:30]) or "none"
                    raise CheckInputError(f"{role} {wanted!r} is not a tool of the server (it lists: {listed})")
    try:
        return await outside.preflight(options, lambda nonce: run.executions(nonce))
    except (LimitExceeded, httpx2.HTTPError) as exc:
        raise CheckInputError(f"the witness did not answer before the run: {exc}") from None


async def _tools_list(wire: Wire, url: str) -> Reply:
    try:
        return await wire.request("tools/list", {})
    except AnswerTooSlow as exc:
        raise CheckInputError(f"{url} did not answer tools/list within the --timeout ({exc})") from None
    except AnswerTooLarge as exc:
        raise CheckInputError(f"{url} answered tools/list with too much: {exc}") from None
    except httpx2.HTTPError as exc:
        raise CheckInputError(f"cannot reach {url}: {type(exc).__name__}: {exc}") from None


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
        reply = await wire.request("tools/list", {"cursor": cursor})
        page = reply.result if reply.has_result else None
    return names
