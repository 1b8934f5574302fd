"""``mcp-approval check URL``: the conformance kit's command line (the kit loads only when it runs)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import typer

__all__ = ["check"]

# Options whose type ruff cannot tell is immutable, as module-level values (as in review.py).
_REVIEW_CONFIG = typer.Option(
    None,
    "--review-config",
    help="Decide as `mcp-approval review list` then `review approve|deny` do, on this deployment file.",
)
_ARTIFACT = typer.Option(
    None, "--artifact", help="A backend artifact (URL, id) that must never reach the client (repeatable)."
)
_REPORT = typer.Option(None, "--report", help="Write the JSON report to this file.")
_SERVE_ARS = typer.Option(
    None,
    "--serve-ars",
    help="Act as the ARAP Access Request Service (and PDP) the server submits to: run the reference"
    " `mcp-approval arap-server` from this file on --ars-port for the run, and decide there as --review-config"
    " does. Its URL counts as a backend artifact.",
)


def check(
    url: str = typer.Argument(..., help="The server's MCP endpoint (Streamable HTTP), e.g. http://127.0.0.1:8000/mcp."),
    tool: str = typer.Option(..., "--tool", help="The tool whose call is gated by approval."),
    arguments: str = typer.Option(
        ..., "--arguments", help="The gated call's arguments (JSON); {nonce} in a string is fresh for each call."
    ),
    changed_arguments: str = typer.Option(
        ..., "--changed-arguments", help="The same call with changed arguments (JSON, with {nonce})."
    ),
    token: str = typer.Option(..., "--token", help="Bearer token of the principal making the calls."),
    other_token: str = typer.Option(..., "--other-token", help="Bearer token of a second principal."),
    decide: str | None = typer.Option(
        None,
        "--decide",
        help="Command that records a decision out of band, run without a shell. Words {decision} (approve or"
        " deny), {tool}, {arguments}, {nonce}, {task_id}, {comment} and {reviewer} are replaced (the values are"
        " also in MCP_CHECK_* variables); exit 0 when decided, 75 when no such request is pending (yet), anything"
        " else when refused; the backend ids it prints must never reach the client.",
    ),
    review_config: Path | None = _REVIEW_CONFIG,
    reviewer: str | None = typer.Option(
        None,
        "--reviewer",
        help="The deciding principal (required with --review-config or --serve-ars); no statusMessage may name it.",
    ),
    serve_ars: Path | None = _SERVE_ARS,
    ars_port: int = typer.Option(8181, "--ars-port", help="With --serve-ars: the port the server's PDP URL names."),
    witness_tool: str | None = typer.Option(
        None, "--witness-tool", help="A tool (called with no arguments) whose result shows the gated tool's effects."
    ),
    witness_command: str | None = typer.Option(
        None,
        "--witness-command",
        help="A command (no shell) whose output shows the gated tool's executions; {nonce} / MCP_CHECK_NONCE.",
    ),
    policy_command: str | None = typer.Option(
        None,
        "--policy-command",
        help="A command (no shell) that changes the server's policy: {action} is deny-call (the pending call's"
        " next evaluation denies), revoke-principal (the principal of --token is no longer valid) or restore;"
        " also {tool}, {arguments}, {nonce}, {task_id}, {token} (and MCP_CHECK_* variables).",
    ),
    denied_arguments: str | None = typer.Option(
        None, "--denied-arguments", help="A call of --tool that policy denies outright (JSON, with {nonce})."
    ),
    underscoped_token: str | None = typer.Option(
        None, "--underscoped-token", help="Bearer token of a principal that lacks the scope the call needs."
    ),
    failing_arguments: str | None = typer.Option(
        None,
        "--failing-arguments",
        help="A gated call of --tool that, once approved, fails when the tool runs (JSON, with {nonce}).",
    ),
    expects_input: bool = typer.Option(
        False, "--expects-input", help="The gated call asks for submission input (a justification, a ticket...)."
    ),
    input_answer: str | None = typer.Option(
        None, "--input-answer", help="Content (JSON) for the forms the server asks; by default a sentence per field."
    ),
    artifact: list[str] | None = _ARTIFACT,
    expires_within_s: float | None = typer.Option(
        None,
        "--expires-within",
        help="Seconds within which the gated call's approval request expires (a server configured so):"
        " runs the expiry scenario.",
    ),
    only: str | None = typer.Option(None, "--only", help="Comma-separated scenario ids to run (default: all)."),
    settle_s: float = typer.Option(2.0, "--settle", help="Seconds to watch a task that must not execute."),
    timeout_s: float = typer.Option(
        30.0, "--timeout", help="Seconds any one exchange (however slowly its bytes come), decision or wait may take."
    ),
    report: Path | None = _REPORT,
    as_json: bool = typer.Option(False, "--json", help="Print the JSON report instead of the lines."),
) -> None:
    """Check a server's tool approval against SEP-2848, SEP-2643 and SEP-2663, black-box over HTTP.

    Each scenario prints PASS, FAIL or SKIP with the statement it checks (the ids of
    conformance/sep-*.yaml) and the evidence. The kit stops calling --tool once it sees it run
    without approval, and cancels or denies whatever it left pending. Exits 0 when every scenario
    that ran passed, 1 when one failed, 2 on bad input (one line on stderr).

    Example, against the treasury example served on port 8000
    (mcp-approval serve --config examples/treasury/config.toml --port 8000):

    \b
      mcp-approval check http://127.0.0.1:8000/mcp \\
        --tool wire_transfer \\
        --arguments '{"to": "acct-{nonce}", "amount": 30000}' \\
        --changed-arguments '{"to": "acct-{nonce}", "amount": 40000}' \\
        --denied-arguments '{"to": "acct-{nonce}", "amount": -5}' \\
        --token alice-token --other-token bob-token \\
        --review-config examples/treasury/config.toml --reviewer carol \\
        --witness-tool ledger --report check-report.json
    """
    import asyncio
    import json
    from contextlib import nullcontext

    from mcp_approval.checks import CheckInputError, CheckOptions, report_json, run_checks
    from mcp_approval.checks.ars import served_access_request_service
    from mcp_approval.checks.options import parse_arguments_template, parse_command
    from mcp_approval.checks.report import exit_code, format_result, format_summary, line

    def template(text: str | None, option: str) -> dict[str, object] | None:
        return None if text is None else parse_arguments_template(text, option)

    def command(text: str | None, option: str) -> list[str] | None:
        return None if text is None else parse_command(text, option)

    try:
        if serve_ars is not None and (decide is not None or review_config is not None):
            raise CheckInputError(
                "--serve-ars decides at the service it runs: give it without --decide or --review-config"
            )
        service = nullcontext(None) if serve_ars is None else served_access_request_service(serve_ars, ars_port)
        with service as service_url:
            options = CheckOptions(
                url=url,
                tool=tool,
                arguments=parse_arguments_template(arguments, "--arguments"),
                changed_arguments=parse_arguments_template(changed_arguments, "--changed-arguments"),
                token=token,
                other_token=other_token,
                decide_command=command(decide, "--decide"),
                review_config=serve_ars or review_config,
                reviewer=reviewer,
                review_decider=None if (serve_ars or review_config) is None else _review_decider,
                witness_tool=witness_tool,
                witness_command=command(witness_command, "--witness-command"),
                policy_command=command(policy_command, "--policy-command"),
                denied_arguments=template(denied_arguments, "--denied-arguments"),
                failing_arguments=template(failing_arguments, "--failing-arguments"),
                underscoped_token=underscoped_token,
                expects_input=expects_input,
                input_answer=template(input_answer, "--input-answer"),
                backend_artifacts=(*(artifact or ()), *([service_url] if service_url else [])),
                only=None if only is None else frozenset(part.strip() for part in only.split(",") if part.strip()),
                expires_within_s=expires_within_s,
                settle_s=settle_s,
                timeout_s=timeout_s,
            )
            printed = None if as_json else (lambda result: typer.echo(format_result(result)))
            results, summary = asyncio.run(run_checks(options, printed))
    except CheckInputError as exc:
        typer.echo(f"error: {line(str(exc))}", err=True)
        raise typer.Exit(2) from None
    document = report_json(url, results, summary)
    if report is not None:
        report.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    if as_json:
        typer.echo(json.dumps(document, indent=2))
    else:
        if summary.verdict is not None:
            typer.echo(f"verdict: {line(summary.verdict)}")
        typer.echo(format_summary(results, summary))
    raise typer.Exit(exit_code(results))


def _review_decider(
    config: Path,
    tool: str,
    arguments: Mapping[str, object],
    reviewer: str,
    decision: Literal["approve", "deny"],
    comment: str,
) -> str | None:
    """``mcp-approval review``'s decision on the pending request of this call (see ``decide_matching``)."""
    from mcp_approval.cli.review import decide_matching

    try:
        return decide_matching(config, tool, arguments, reviewer, decision, comment=comment)
    except typer.Exit as exc:  # review printed its one-line reason on stderr
        raise RuntimeError(f"mcp-approval review {decision} refused the decision (exit {exc.exit_code})") from None
