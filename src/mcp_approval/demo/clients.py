"""The demo's clients: the project's MCP client stack over streamable HTTP, and reviewers over the reviewer API."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.extension import ClientExtension
from mcp.client.session import ElicitationFnT
from mcp.client.streamable_http import streamable_http_client

from mcp_approval.client import read_disposition
from mcp_approval.client.denials import read_denial
from mcp_approval.errors import MCPApprovalError

__all__ = ["Reviewer", "disposition_of", "envelope_of", "mcp_client", "reviewer_http", "short", "text_of", "until"]

T = TypeVar("T")

#: Generous bound on one HTTP request; scenarios bound their own waits.
HTTP_TIMEOUT_S = 30.0


@asynccontextmanager
async def mcp_client(
    base_url: str,
    token: str | None,
    *,
    extensions: Sequence[ClientExtension] = (),
    auth: httpx2.Auth | None = None,
    elicitation_callback: ElicitationFnT | None = None,
) -> AsyncIterator[Client]:
    """An SDK :class:`Client` over streamable HTTP at ``<base_url>/mcp``, presenting ``token`` (or ``auth``)."""
    headers = {"authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, auth=auth, timeout=HTTP_TIMEOUT_S) as http:
        transport = streamable_http_client(f"{base_url}/mcp", http_client=http)
        async with Client(transport, extensions=list(extensions), elicitation_callback=elicitation_callback) as client:
            yield client


class ReviewerError(MCPApprovalError):
    """The reviewer API answered something other than success."""


class Reviewer:
    """One named reviewer on the reviewer HTTP API (``/approvals``)."""

    def __init__(self, http: httpx2.AsyncClient, name: str, token: str) -> None:
        self.http = http
        self.name = name
        self._headers = {"authorization": f"Bearer {token}"}

    async def approvals(self, status: str = "pending") -> list[dict[str, Any]]:
        """``GET /approvals?status=...``."""
        response = await self.http.get("/approvals", params={"status": status}, headers=self._headers)
        if response.status_code != 200:
            raise ReviewerError(f"GET /approvals: HTTP {response.status_code} {response.text[:200]}")
        return list(response.json()["approvals"])

    async def find(
        self, tool: str, *, status: str = "pending", timeout_s: float = 10.0, **arguments: Any
    ) -> dict[str, Any]:
        """The one request for ``tool`` with these arguments, waiting until it shows up in ``status``."""

        async def matching() -> list[dict[str, Any]]:
            return [
                record
                for record in await self.approvals(status)
                if record["tool"] == tool and all(record["arguments"].get(k) == v for k, v in arguments.items())
            ]

        found = await until(matching, lambda records: len(records) == 1, timeout_s=timeout_s, what=f"{tool} request")
        return found[0]

    async def request(self, approval_id: str) -> dict[str, Any]:
        """``GET /approvals/{id}``: the request as the reviewer API shows it, ``outcome`` included."""
        response = await self.http.get(f"/approvals/{approval_id}", headers=self._headers)
        if response.status_code != 200:
            raise ReviewerError(f"GET /approvals/{approval_id[:8]}…: HTTP {response.status_code} {response.text[:200]}")
        return dict(response.json())

    async def decide(
        self, approval_id: str, decision: str, comment: str | None = None, *, similar: dict[str, Any] | None = None
    ) -> httpx2.Response:
        """``POST /approvals/{id}/decide`` (``similar``: a similar-call rule written with the approval);
        the response as it came (the caller judges the status)."""
        body: dict[str, Any] = {"decision": decision}
        if comment is not None:
            body["comment"] = comment
        if similar is not None:
            body["similar"] = similar
        return await self.http.post(f"/approvals/{approval_id}/decide", json=body, headers=self._headers)

    async def delegate(self, delegate: str, template: str, duration_s: float) -> httpx2.Response:
        """``POST /delegations``: hand this reviewer's role for ``template`` to ``delegate``."""
        body = {"delegate": delegate, "template": template, "duration_s": duration_s}
        return await self.http.post("/delegations", json=body, headers=self._headers)

    async def revoke_delegation(self, delegation_id: str) -> httpx2.Response:
        """``POST /delegations/{id}/revoke``; the response as it came."""
        return await self.http.post(f"/delegations/{delegation_id}/revoke", headers=self._headers)


@asynccontextmanager
async def reviewer_http(base_url: str) -> AsyncIterator[httpx2.AsyncClient]:
    """A plain HTTP client of the server (reviewers share it)."""
    async with httpx2.AsyncClient(base_url=base_url, timeout=HTTP_TIMEOUT_S) as http:
        yield http


class ConditionTimeout(MCPApprovalError):
    """A polled condition did not hold within its deadline."""


async def until(
    probe: Callable[[], Awaitable[T]],
    accept: Callable[[T], bool],
    *,
    timeout_s: float,
    what: str,
    every_s: float = 0.05,
) -> T:
    """Poll ``probe`` until ``accept`` holds; raise :class:`ConditionTimeout` naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = await probe()
        if accept(value):
            return value
        if time.monotonic() > deadline:
            raise ConditionTimeout(f"{what}: not reached within {timeout_s:.0f}s (last: {str(value)[:200]})")
        await asyncio.sleep(every_s)


def text_of(result: types.CallToolResult) -> str:
    """The result's text content, one string."""
    return " ".join(item.text for item in result.content if isinstance(item, types.TextContent))


def disposition_of(result: types.CallToolResult) -> str | None:
    """The disposition ``_meta`` value, or ``None``."""
    disposition = read_disposition(result)
    return None if disposition is None else disposition.value


def envelope_of(result: Any) -> str | None:
    """The envelope's ``remediation`` (``available``, ``undisclosed``, ...), or ``None`` without one."""
    denial = read_denial(result).denial
    return None if denial is None else denial.remediation.value


def short(text: str, limit: int = 110) -> str:
    """``text`` on one line, cut at ``limit`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
