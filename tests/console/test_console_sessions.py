"""The console's session table: expiry, capacity and CSRF comparison."""

from __future__ import annotations

import pytest

from mcp_approval.backends.console_sessions import SessionStore
from mcp_approval.clock import ManualClock


def test_a_session_ends_after_its_maximum_age_however_busy() -> None:
    clock = ManualClock()
    store = SessionStore(clock, idle_s=60, max_age_s=300)
    cookie, session = store.create("bob", "bob-token")
    for _ in range(4):
        clock.advance(59_000)
        assert store.get(cookie) is session
    clock.advance(65_000)
    assert store.get(cookie) is None
    assert len(store) == 0


def test_a_full_table_drops_the_least_recently_used_session() -> None:
    clock = ManualClock()
    store = SessionStore(clock, capacity=2)
    first, _ = store.create("a", "a-token")
    clock.advance(1)
    second, _ = store.create("b", "b-token")
    clock.advance(1)
    assert store.get(first) is not None  # now the second one is the least recently used
    third, _ = store.create("c", "c-token")
    assert len(store) == 2
    assert store.get(second) is None
    assert store.get(first) is not None
    assert store.get(third) is not None


def test_cookies_are_random_and_csrf_tokens_compare_exactly() -> None:
    store = SessionStore(ManualClock())
    cookie, session = store.create("bob", "bob-token")
    other, _ = store.create("bob", "bob-token")
    assert cookie != other
    assert "bob" not in cookie
    assert session.csrf_matches(session.csrf)
    for wrong in (None, "", session.csrf[:-1], session.csrf + "x"):
        assert not session.csrf_matches(wrong)
    assert store.get("") is None
    assert store.get("no-such-cookie") is None


@pytest.mark.parametrize("bad", [{"idle_s": 0}, {"max_age_s": -1}, {"capacity": 0}])
def test_impossible_settings_are_refused(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="must be positive"):
        SessionStore(ManualClock(), **bad)  # type: ignore[arg-type]
