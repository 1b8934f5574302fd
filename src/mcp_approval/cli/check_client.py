"""``mcp-approval check-client``: the client harness's command line (the harness loads only when it runs)."""

from __future__ import annotations

from pathlib import Path

import typer

__all__ = ["check_client"]

_REPORT = typer.Option(None, "--report", help="Write the JSON report to this file.")


def check_client(
    port: int = typer.Option(8100, "--port", help="TCP port on 127.0.0.1."),
    timeout_s: float = typer.Option(120.0, "--timeout", help="Seconds to wait for a client to finish."),
    grace_s: float = typer.Option(2.0, "--grace", help="Seconds to keep recording after the client has its result."),
    report: Path | None = _REPORT,
    as_json: bool = typer.Option(False, "--json", help="Print the JSON report instead of the lines."),
) -> None:
    """Serve a gated tool and record what a client does with it, then judge it.

    Point your client at the printed URL and have it call `transfer` with, for example,
    {"to": "acct-1", "amount": 100}. A client that declares tasks gets a task that asks for a
    justification (input_required, answer it with tasks/update), stays working for two polls,
    then completes approved-executed; a client that does not gets the degraded answer. Once the
    client has its result (and --grace more seconds) each client scenario prints PASS, FAIL or SKIP.
    Exits 0 when none failed, 1 when one did, 2 when no client called before --timeout.
    """
    import asyncio
    import json

    from mcp_approval.checks import CheckInputError, report_json
    from mcp_approval.checks.client_scenarios import judge, serve_harness
    from mcp_approval.checks.report import exit_code, format_result, line

    def ready(url: str) -> None:
        typer.echo(f"serving {url}: call the tool transfer from your client", err=True)

    try:
        harness = asyncio.run(serve_harness(port, timeout_s=timeout_s, grace_s=grace_s, on_ready=ready))
        results = judge(harness)
    except CheckInputError as exc:
        typer.echo(f"error: {line(str(exc))}", err=True)
        raise typer.Exit(2) from None
    document = report_json(f"http://127.0.0.1:{port}/mcp", results)
    if report is not None:
        report.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    if as_json:
        typer.echo(json.dumps(document, indent=2))
    else:
        for result in results:
            typer.echo(format_result(result))
        typer.echo(f"{document['passed']} passed, {document['failed']} failed, {document['skipped']} skipped")
    raise typer.Exit(exit_code(results))
