"""The console lists requests a page at a time, with the total and links to the other pages."""

from __future__ import annotations

import re

import httpx
import pytest

from mcp_approval.reviewers.console import PAGE_SIZE
from tests.reviewers.conftest import Console, sign_in

pytestmark = pytest.mark.anyio

ROW = re.compile(r'<a class="title" href="/console/requests/([^"]+)"')


async def test_more_requests_than_a_page_are_paged_with_the_total(console: Console, http: httpx.AsyncClient) -> None:
    submitted = [await console.submit() for _ in range(PAGE_SIZE + 1)]
    await sign_in(http, "bob")
    first = await http.get("/console")
    assert f'<span class="count">{PAGE_SIZE + 1}</span>' in first.text
    on_first = ROW.findall(first.text)
    assert len(on_first) == PAGE_SIZE
    assert f"Showing 1-{PAGE_SIZE} of {PAGE_SIZE + 1}" in first.text
    assert f'href="?offset={PAGE_SIZE}">Next page' in first.text
    second = await http.get(f"/console?offset={PAGE_SIZE}")
    on_second = ROW.findall(second.text)
    assert len(on_second) == 1
    assert sorted(on_first + on_second) == sorted(submitted)
    assert "Next page" not in second.text
    assert 'href="?offset=0">Previous page' in second.text


async def test_a_principal_without_a_reviewer_role_lists_only_its_own(
    console: Console, http: httpx.AsyncClient
) -> None:
    others = await console.submit()
    own = await console.submit(requester="mallory")
    await sign_in(http, "mallory")
    assert ROW.findall((await http.get("/console")).text) == [own]
    assert (await http.get(f"/console/requests/{others}")).status_code == 404
