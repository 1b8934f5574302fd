"""The undisclosed rule as a function of declared capabilities, and the correlation handle."""

from __future__ import annotations

import logging
import math
from collections import Counter

import mcp_types as types
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_approval.denials import (
    Interaction,
    Placement,
    choose_placement,
    declared_interactions,
    echoed_context_id,
    new_context_id,
    note_retry,
)

TASKS = "io.modelcontextprotocol/tasks"
CONTEXT_KEY = "io.modelcontextprotocol/authorization-context-id"


def caps(**fields) -> types.ClientCapabilities:
    return types.ClientCapabilities.model_validate(fields)


capabilities = st.builds(
    lambda elicitation, extensions: caps(
        **({"elicitation": elicitation} if elicitation is not None else {}),
        **({"extensions": extensions} if extensions is not None else {}),
    ),
    st.sampled_from([None, {}, {"form": {}}, {"url": {}}, {"form": {}, "url": {}}]),
    st.sampled_from([None, {}, {TASKS: {}}, {"io.example/other": {}}, {TASKS: {}, "io.example/other": {}}]),
)
remedy_lists = st.lists(st.sampled_from(list(Interaction)), max_size=3)


@pytest.mark.sep_check(
    "sep-2643-server-undisclosed-not-unavailable",
    "sep-2643-server-url-needs-declared-elicitation",
    "sep-2643-server-task-needs-declared-tasks",
)
@given(capabilities, remedy_lists, st.sampled_from([None, "2026-07-28", "2025-11-25"]))
def test_a_placement_is_only_ever_one_the_request_declared(declared, remedies, version):
    placement = choose_placement(declared, remedies, protocol_version=version)
    opened = declared_interactions(declared, protocol_version=version)
    if remedies:
        assert placement is not Placement.UNAVAILABLE  # a remedy exists: never unavailable
    else:
        assert placement is Placement.UNAVAILABLE
    if placement is Placement.URL_INTERACTION:
        assert Interaction.URL in opened
        assert Interaction.URL in remedies
        assert declared.elicitation is not None
        assert declared.elicitation.url is not None
    if placement is Placement.TASK:
        assert Interaction.TASK in opened
        assert Interaction.TASK in remedies
        assert TASKS in (declared.extensions or {})
    if placement is Placement.UNDISCLOSED:
        assert not opened & set(remedies)
    if version == "2025-11-25":
        assert placement in (Placement.UNDISCLOSED, Placement.UNAVAILABLE)


def test_the_servers_preference_order_wins_among_declared_remedies():
    both = caps(elicitation={"url": {}}, extensions={TASKS: {}})
    assert choose_placement(both, [Interaction.TASK, Interaction.URL]) is Placement.TASK
    assert choose_placement(both, [Interaction.URL, Interaction.TASK]) is Placement.URL_INTERACTION
    assert (
        choose_placement(caps(elicitation={"url": {}}), [Interaction.TASK, Interaction.URL])
        is Placement.URL_INTERACTION
    )
    # An out-of-band decision cannot be offered to a url-only client: the remedy stays undisclosed.
    assert choose_placement(caps(elicitation={"url": {}}), [Interaction.TASK]) is Placement.UNDISCLOSED
    assert choose_placement(None, [Interaction.URL]) is Placement.UNDISCLOSED
    assert choose_placement(None, []) is Placement.UNAVAILABLE


@pytest.mark.sep_check("sep-2643-server-context-id-opaque")
def test_context_ids_are_random_256_bit_and_carry_nothing_from_the_request():
    ids = [new_context_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    assert all(len(value) == 43 for value in ids)  # 32 random bytes, base64url
    assert all(set(value) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") for value in ids)
    counts = Counter("".join(ids))
    total = sum(counts.values())
    entropy = -sum(n / total * math.log2(n / total) for n in counts.values())
    assert entropy > 5.9  # close to log2(64) = 6: no structure, no embedded fields
    assert new_context_id.__code__.co_argcount == 0  # nothing about the request can go in


@pytest.mark.sep_check("sep-2643-server-accepts-absent-or-unknown-context-id")
@pytest.mark.parametrize(
    ("meta", "expected"),
    [
        (None, None),
        ({}, None),
        ({CONTEXT_KEY: "authzctx_7c5d1d79"}, "authzctx_7c5d1d79"),
        ({CONTEXT_KEY: "k" * 256}, "k" * 256),
        ({CONTEXT_KEY: "k" * 257}, None),
        ({CONTEXT_KEY: ""}, None),
        ({CONTEXT_KEY: 17}, None),
        ({CONTEXT_KEY: None}, None),
        ({CONTEXT_KEY: ["a"]}, None),
        ({CONTEXT_KEY: "new\nline"}, None),
        ({CONTEXT_KEY: "naïve"}, None),
        ("not a mapping", None),
    ],
)
def test_reading_the_echo_never_raises(meta, expected):
    assert echoed_context_id(meta) == expected


def test_note_retry_logs_the_correlation_and_only_safe_values(caplog):
    caplog.set_level(logging.INFO, logger="mcp_approval.denials")
    assert note_retry({CONTEXT_KEY: "authzctx_1"}, operation="files.list_folder") == "authzctx_1"
    assert "retry of 'files.list_folder' echoes authorization context authzctx_1" in caplog.text
    caplog.clear()
    assert note_retry({CONTEXT_KEY: "evil\r\nINFO forged line" + "x" * 1000}, operation="t") is None
    assert "forged" not in caplog.text
    assert "ignored an unusable echoed authorization context id (str, length 1022)" in caplog.text
    caplog.clear()
    assert note_retry(None, operation="t") is None
    assert caplog.text == ""
