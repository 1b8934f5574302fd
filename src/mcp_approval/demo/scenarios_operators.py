"""Scenario 16: what an operator's Prometheus scraper reads at ``/metrics`` while approvals happen.

The demo deployment turns ``[metrics]`` on with the static token :data:`METRICS_TOKEN`. The
scenario scrapes before, while a request waits, and after one approval and one denial, parses
each answer with the Prometheus text parser (as a Prometheus server would) and checks that the
gauge and the counters moved. Earlier scenarios' notifications may still be in flight, and
a shared ``--db`` may hold other requests, so the numbers are compared as "moved by at least".
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import httpx2
from prometheus_client.parser import text_string_to_metric_families

from mcp_approval.demo.clients import HTTP_TIMEOUT_S, disposition_of, until
from mcp_approval.demo.context import METRICS_TOKEN, Demo, ScenarioFailed, ScenarioState, is_task
from mcp_approval.demo.scenarios import LARGE, tasks_client
from mcp_approval.protocol import DISPOSITION_APPROVED_EXECUTED, DISPOSITION_DENIED_NOT_EXECUTED

__all__ = ["Samples", "metrics_move", "parse_samples"]

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
"""Every sample of a scrape: ``(name, sorted labels)`` → value."""

#: The demo's notification channel (``[notifications.channels.demo-hook]``).
CHANNEL = "demo-hook"
#: How long the last notifications of the scenario may take to be delivered and counted.
DELIVERY_WAIT_S = 20.0


def parse_samples(text: str) -> Samples:
    """A Prometheus text exposition, parsed by ``prometheus_client``'s parser.

    Raises:
        ValueError: the text is not in the Prometheus text format.
    """
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    """One sample's value; 0 when the scrape does not have it (a counter not incremented yet)."""
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def metrics_move(demo: Demo, state: ScenarioState) -> str:
    """16. ``/metrics`` as an approval waits, is approved and runs, and another is denied."""
    approved_to, denied_to = demo.account(16), f"{demo.account(16)}-denied"
    state.watch(to=approved_to)
    tasks = tasks_client()
    async with (
        httpx2.AsyncClient(base_url=demo.treasury.base_url, timeout=HTTP_TIMEOUT_S) as http,
        demo.client("alice", extensions=[tasks]) as alice,
        demo.reviewers("carol") as (carol,),
    ):
        scrape = _scraper(demo, http)
        before = await scrape("before")
        approved = await demo.call(alice, "alice", "wire_transfer", {"to": approved_to, "amount": LARGE})
        denied = await demo.call(alice, "alice", "wire_transfer", {"to": denied_to, "amount": LARGE})
        demo.expect(is_task(approved) and is_task(denied), "two working tasks")
        first = await carol.find("wire_transfer", to=approved_to)
        second = await carol.find("wire_transfer", to=denied_to)
        waiting = await scrape("while both wait")
        _moved(demo, before, waiting, "mcp_approval_pending_approvals", 2, template="treasury")
        await demo.decide(carol, first, "approve")
        await demo.decide(carol, second, "deny")
        result = await demo.wait(tasks, alice, "alice", approved.task_id)
        state.disposition = disposition_of(result)
        refused = await demo.wait(tasks, alice, "alice", denied.task_id)
        demo.expect(disposition_of(refused) == DISPOSITION_DENIED_NOT_EXECUTED, "the other one was not executed")
        # Each request's four notifications are counted once the channel accepted them.
        wanted = value(before, "mcp_approval_notification_deliveries_total", channel=CHANNEL) + 8
        after = await until(
            lambda: scrape(None),
            lambda samples: value(samples, "mcp_approval_notification_deliveries_total", channel=CHANNEL) >= wanted,
            timeout_s=DELIVERY_WAIT_S,
            what="the notifications counted as delivered",
            every_s=0.2,
        )
    _narrate(demo, "after", after)
    _moved(demo, before, after, "mcp_approval_decisions_total", 1, outcome="approved")
    _moved(demo, before, after, "mcp_approval_decisions_total", 1, outcome="denied")
    _moved(demo, before, after, "mcp_approval_time_to_decision_seconds_count", 2)
    _moved(demo, before, after, "mcp_approval_executions_total", 1, disposition=DISPOSITION_APPROVED_EXECUTED)
    _moved(demo, before, after, "mcp_approval_executions_total", 1, disposition=DISPOSITION_DENIED_NOT_EXECUTED)
    _moved(demo, before, after, "mcp_approval_notification_deliveries_total", 8, channel=CHANNEL)
    demo.expect(value(after, "mcp_approval_store_errors_total") == 0, "no store errors")
    demo.expect(demo.executions(to=approved_to) == 1, "exactly one ledger entry")
    return f"/metrics parsed at 3 scrapes ({len(after)} samples); decisions, executions and deliveries moved"


def _scraper(demo: Demo, http: httpx2.AsyncClient) -> Callable[[str | None], Awaitable[Samples]]:
    """``GET /metrics`` with the scraper's token, parsed; narrated when given a label."""

    async def scrape(label: str | None) -> Samples:
        if label is not None:
            demo.narrator.call("prometheus", f"GET /metrics ({label})")
        response = await http.get("/metrics", headers={"authorization": f"Bearer {METRICS_TOKEN}"})
        if response.status_code != 200:
            raise ScenarioFailed(f"GET /metrics answered HTTP {response.status_code}: {response.text[:200]}")
        samples = await asyncio.to_thread(parse_samples, response.text)
        if label is not None:
            _narrate(demo, label, samples)
        return samples

    return scrape


def _narrate(demo: Demo, label: str, samples: Samples) -> None:
    """The numbers the scenario looks at, on one line."""
    shown = (
        f"pending {value(samples, 'mcp_approval_pending_approvals', template='treasury'):.0f}",
        f"approved {value(samples, 'mcp_approval_decisions_total', outcome='approved'):.0f}",
        f"denied {value(samples, 'mcp_approval_decisions_total', outcome='denied'):.0f}",
        f"executed {value(samples, 'mcp_approval_executions_total', disposition=DISPOSITION_APPROVED_EXECUTED):.0f}",
        f"delivered {value(samples, 'mcp_approval_notification_deliveries_total', channel=CHANNEL):.0f}",
    )
    demo.narrator.got(f"{label}: {len(samples)} samples parsed; " + ", ".join(shown))


def _moved(demo: Demo, before: Samples, after: Samples, name: str, least: float, **labels: str) -> None:
    """Expect ``name{labels}`` to have grown by at least ``least`` between the two scrapes."""
    was, now = value(before, name, **labels), value(after, name, **labels)
    shown = ",".join(f'{key}="{label}"' for key, label in labels.items())
    series = f"{name}{{{shown}}}" if shown else name
    demo.expect(now - was >= least, f"{series} {was:.0f} → {now:.0f} (+{least:.0f} at least)")
