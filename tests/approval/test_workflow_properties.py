"""Property-based tests of the approval workflow's state machine.

First the transition tables themselves (:mod:`mcp_approval.approval.persistence.states`), then a stateful test
that drives the real :class:`ApprovalStore` on a SQLite file with random sequences of claims,
fences, finishes, reschedules, chains and lapsed leases, against a model that predicts which
calls must succeed.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import tempfile
from collections import Counter
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, precondition, rule

from mcp_approval.approval.persistence.schema import APPROVAL_MIGRATIONS, approval_workflows_table
from mcp_approval.approval.persistence.states import (
    IN_FLIGHT_INTENTS,
    INTENT_TRANSITIONS,
    PHASE_TRANSITIONS,
    UNSETTLED_INTENTS,
    Disposition,
    IntentState,
    Phase,
    intent_sources,
    phase_sources,
)
from mcp_approval.approval.persistence.store import (
    Admission,
    ApprovalStore,
    Intent,
    NewWorkflow,
    Reschedule,
    TaskOutcome,
)
from mcp_approval.clock import ManualClock
from mcp_approval.storage import migrate, open_database
from mcp_approval.tasks.schema import TASKS_MIGRATIONS, tasks_table
from mcp_approval.tasks.states import TERMINAL, TaskStatus
from tests.support.store_leg import leg_store_url, postgres_leg

T = TypeVar("T")
ENDS = frozenset({Phase.FINISHED, Phase.FENCED})
PRINCIPAL = "cd" * 32

# -- the tables ---------------------------------------------------------------------------------


def walk(table: dict[Any, frozenset[Any]], start: Any, choices: list[int]) -> list[Any]:
    """A path through ``table`` from ``start``, taking successor ``choice % n`` at each step, to a dead end."""
    path = [start]
    picks = itertools.chain(choices, itertools.repeat(0))
    while table[path[-1]]:
        successors = sorted(table[path[-1]])
        path.append(successors[next(picks) % len(successors)])
        assert len(path) <= len(table), f"cycle: {path}"
    return path


@given(st.sampled_from(Phase))
def test_terminal_phases_have_no_successors(phase: Phase) -> None:
    assert (not PHASE_TRANSITIONS[phase]) == (phase in ENDS)


@given(st.sampled_from(Phase), st.sampled_from(Phase))
def test_phase_sources_is_the_inverse_of_the_table(source: Phase, target: Phase) -> None:
    assert (target in PHASE_TRANSITIONS[source]) == (source in phase_sources(target))


@given(st.lists(st.integers(min_value=0, max_value=7), max_size=8))
def test_every_path_from_pending_ends_finished_or_fenced(choices: list[int]) -> None:
    path = walk(PHASE_TRANSITIONS, Phase.PENDING, choices)
    assert path[-1] in ENDS
    if Phase.CLAIMED in path:
        assert Phase.FENCED not in path, path  # a claimed workflow is never fenced
        assert path[-1] is Phase.FINISHED


def test_the_guards_the_store_uses() -> None:
    # The claim and the fence are exclusive because both are guarded on pending alone.
    assert phase_sources(Phase.CLAIMED) == {Phase.PENDING}
    assert phase_sources(Phase.FENCED) == {Phase.PENDING}
    assert phase_sources(Phase.FINISHED) == {Phase.CLAIMED}
    assert phase_sources(Phase.PENDING) == frozenset()
    reachable = {phase for path in _all_paths(PHASE_TRANSITIONS, Phase.PENDING) for phase in path}
    assert reachable == set(Phase)


def _all_paths(table: dict[Any, frozenset[Any]], start: Any) -> list[list[Any]]:
    if not table[start]:
        return [[start]]
    return [[start, *rest] for successor in sorted(table[start]) for rest in _all_paths(table, successor)]


@given(st.sampled_from(IntentState), st.sampled_from(IntentState))
def test_intent_sources_is_the_inverse_of_the_table(source: IntentState, target: IntentState) -> None:
    assert (target in INTENT_TRANSITIONS[source]) == (source in intent_sources(target))


@given(st.lists(st.integers(min_value=0, max_value=7), max_size=8))
def test_every_intent_path_ends_consumed_or_abandoned(choices: list[int]) -> None:
    path = walk(INTENT_TRANSITIONS, IntentState.OPEN, choices)
    assert path[-1] in {IntentState.CONSUMED, IntentState.ABANDONED}
    if IntentState.BOUND in path:
        assert path[-1] is IntentState.CONSUMED  # a bound intent is never abandoned


@given(st.sampled_from(IntentState))
def test_in_flight_intents_are_the_unbound_live_ones(state: IntentState) -> None:
    # In flight: reconciliation may still claim it as an orphan; unsettled: it may still be abandoned.
    assert (state in IN_FLIGHT_INTENTS) == (state in intent_sources(IntentState.WITHDRAWING))
    assert (state in UNSETTLED_INTENTS) == (state in intent_sources(IntentState.ABANDONED))
    if state in IN_FLIGHT_INTENTS:
        assert INTENT_TRANSITIONS[state], "an in-flight intent can still move"


# -- the store, against a model -----------------------------------------------------------------


@dataclass
class Model:
    """What the model expects of one task."""

    phase: Phase = Phase.PENDING
    generation: int = 1
    lease_until: int | None = None
    status: TaskStatus = TaskStatus.WORKING


@dataclass(frozen=True)
class Stored:
    phase: Phase
    generation: int
    disposition: str | None
    status: TaskStatus
    status_message: str | None
    result_json: str | None
    error_json: str | None


CANCELLED = TaskOutcome(TaskStatus.CANCELLED, "Cancelled")
DENIED = TaskOutcome(
    TaskStatus.COMPLETED,
    result={"content": [{"type": "text", "text": "denied"}], "isError": True},
    disposition=Disposition.DENIED_NOT_EXECUTED.value,
)
EXECUTED = TaskOutcome(
    TaskStatus.COMPLETED,
    result={"content": [{"type": "text", "text": "ran"}]},
    disposition=Disposition.APPROVED_EXECUTED.value,
)
UNKNOWN = TaskOutcome(
    TaskStatus.COMPLETED,
    result={"content": [{"type": "text", "text": "unknown"}], "isError": True},
    disposition=Disposition.OUTCOME_UNKNOWN.value,
)
#: A generation relative to the model's: the current one, a consumed one, or one not yet issued.
OFFSETS = st.sampled_from([0, 0, 0, -1, 1])


class WorkflowMachine(RuleBasedStateMachine):
    tasks = Bundle("tasks")

    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.mkdtemp(prefix="mcpa-props-")
        self.loop = asyncio.new_event_loop()
        self.clock = ManualClock()
        self.database = open_database(leg_store_url(Path(self.directory), "store.db"))
        self.run(migrate(self.database, TASKS_MIGRATIONS, APPROVAL_MIGRATIONS))
        self.store = ApprovalStore(self.database, result_retention_ms=60_000, clock=self.clock)
        self.model: dict[str, Model] = {}
        self.executions: Counter[str] = Counter()
        self.ended: dict[str, Stored] = {}  # the rows as they were when the task reached an end
        self.fenced: set[str] = set()
        self.keys = itertools.count()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coroutine)

    def teardown(self) -> None:
        self.run(self.database.close())
        self.loop.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def intent(self, task_id: str, generation: int, state: IntentState) -> Intent:
        return Intent(
            key=f"key-{next(self.keys)}",
            task_id=task_id,
            generation=generation,
            principal_digest=PRINCIPAL,
            tool_name="deploy",
            arguments_digest=f"{task_id:0>64}",
            body_sealed="k1:body",
            state=state,
            handle=None,
            created_at=0,
        )

    # -- rules ------------------------------------------------------------------------------

    @precondition(lambda self: len(self.model) < 5)
    @rule(target=tasks)
    def create(self) -> str:
        task_id = f"t{len(self.model)}"
        intent = self.intent(task_id, 1, IntentState.OPEN)
        admission, _ = self.run(self.store.record_intent(intent, submissions_per_minute=10**9, max_pending=10**9))
        assert admission is Admission.RECORDED
        assert self.run(self.store.mark_submitted(intent.key, f"h-{task_id}"))
        new = NewWorkflow(
            task_id=task_id,
            intent_key=intent.key,
            principal_digest=PRINCIPAL,
            tool_name="deploy",
            arguments_digest=intent.arguments_digest,
            binding_sealed="k1:abc",
            tool_fingerprint=None,
            backend="local",
            handle=f"h-{task_id}",
            template=None,
            request_deadline=None,
            next_check_at=self.clock.now_ms(),
            ttl_ms=60_000,
            poll_interval_ms=100,
            status_message="Awaiting approval",
            meta={},
        )
        assert self.run(self.store.create_task(new))
        self.model[task_id] = Model()
        return task_id

    @rule(task_id=tasks, offset=OFFSETS, worker=st.sampled_from(["w1", "w2"]), lease_ms=st.integers(1, 5_000))
    def claim(self, task_id: str, offset: int, worker: str, lease_ms: int) -> None:
        model = self.model[task_id]
        now = self.clock.now_ms()
        expected = model.phase is Phase.PENDING and offset == 0
        won = self.run(
            self.store.claim(
                task_id, model.generation + offset, worker, lease_until=now + lease_ms, deadline=now + 10**6
            )
        )
        assert won == expected, (task_id, model, offset)
        if won:
            self.executions[task_id] += 1
            model.phase, model.lease_until = Phase.CLAIMED, now + lease_ms

    def _fence(self, task_id: str, outcome: TaskOutcome, offset: int | None) -> None:
        model = self.model[task_id]
        generation = None if offset is None else model.generation + offset
        expected = model.phase is Phase.PENDING and offset in (None, 0)
        won = self.run(self.store.fence(task_id, outcome, generation=generation))
        assert won == expected, (task_id, model, offset, outcome.status)
        if won:
            model.phase, model.status, model.lease_until = Phase.FENCED, outcome.status, None

    @rule(task_id=tasks, offset=st.none() | OFFSETS)
    def fence_cancel(self, task_id: str, offset: int | None) -> None:
        self._fence(task_id, CANCELLED, offset)

    @rule(task_id=tasks, offset=OFFSETS)
    def fence_deny(self, task_id: str, offset: int) -> None:
        self._fence(task_id, DENIED, offset)

    @rule(task_id=tasks)
    def finish(self, task_id: str) -> None:
        model = self.model[task_id]
        expected = model.phase is Phase.CLAIMED
        assert self.run(self.store.finish(task_id, EXECUTED)) == expected, (task_id, model)
        if expected:
            model.phase, model.status, model.lease_until = Phase.FINISHED, TaskStatus.COMPLETED, None

    @rule(task_id=tasks, offset=OFFSETS, delay=st.integers(0, 10_000))
    def reschedule(self, task_id: str, offset: int, delay: int) -> None:
        model = self.model[task_id]
        expected = model.phase is Phase.PENDING and offset == 0
        moved = self.run(
            self.store.reschedule(Reschedule(task_id, model.generation + offset, self.clock.now_ms() + delay))
        )
        assert moved == expected, (task_id, model, offset)

    @rule(task_id=tasks, offset=OFFSETS)
    def chain(self, task_id: str, offset: int) -> None:
        model = self.model[task_id]
        generation = model.generation + offset
        expected = model.phase is Phase.PENDING and offset == 0
        intent = self.intent(task_id, generation + 1, IntentState.OPEN)
        assert self.run(self.store.chain(task_id, generation, intent)) == expected, (task_id, model, offset)
        if expected:
            model.generation += 1
            stored = self.run(self.store.intent(task_id, model.generation))
            assert stored is not None
            assert stored.key == intent.key
            consumed = self.run(self.store.intent(task_id, generation))
            assert consumed is not None
            assert consumed.state is IntentState.CONSUMED

    @rule(advance_ms=st.integers(0, 6_000))
    def lapse(self, advance_ms: int) -> None:
        """Time passes; executions whose lease ran out are found and ended as outcome-unknown."""
        self.clock.advance(advance_ms)
        now = self.clock.now_ms()
        lapsed = {workflow.task_id for workflow in self.run(self.store.lapsed_claims(limit=1_000))}
        expected = {
            task_id
            for task_id, model in self.model.items()
            if model.phase is Phase.CLAIMED and model.lease_until is not None and model.lease_until < now
        }
        assert lapsed == expected
        for task_id in sorted(lapsed):
            assert self.run(self.store.finish(task_id, UNKNOWN))
            model = self.model[task_id]
            model.phase, model.status, model.lease_until = Phase.FINISHED, TaskStatus.COMPLETED, None

    # -- invariants -------------------------------------------------------------------------

    def stored(self) -> dict[str, Stored]:
        def read(conn: Any) -> dict[str, Stored]:
            w, t = approval_workflows_table, tasks_table
            rows = conn.execute(
                w.select()
                .with_only_columns(
                    w.c.task_id,
                    w.c.phase,
                    w.c.generation,
                    w.c.disposition,
                    t.c.status,
                    t.c.status_message,
                    t.c.result_json,
                    t.c.error_json,
                )
                .join_from(w, t, t.c.task_id == w.c.task_id)
            )
            return {
                row.task_id: Stored(
                    Phase(row.phase),
                    row.generation,
                    row.disposition,
                    TaskStatus(row.status),
                    row.status_message,
                    row.result_json,
                    row.error_json,
                )
                for row in rows
            }

        return self.run(self.database.read(read))

    @invariant()
    def rows_agree_with_the_model(self) -> None:
        stored = self.stored()
        assert set(stored) == set(self.model)
        for task_id, row in stored.items():
            model = self.model[task_id]
            assert self.executions[task_id] <= 1, f"{task_id} executed {self.executions[task_id]} times"
            assert (row.phase, row.generation, row.status) == (model.phase, model.generation, model.status), task_id
            # The wire status is terminal exactly when the workflow has ended; a claim keeps it working.
            assert (row.status in TERMINAL) == (row.phase in ENDS), (task_id, row)
            if row.phase in (Phase.PENDING, Phase.CLAIMED):
                assert row.status is TaskStatus.WORKING, (task_id, row)
            if row.phase is Phase.FENCED:
                self.fenced.add(task_id)
            if task_id in self.fenced:
                assert row.phase is Phase.FENCED, f"{task_id} left the fence: {row}"
                assert self.executions[task_id] == 0, f"{task_id} was fenced and executed"
            if row.phase in ENDS:
                first = self.ended.setdefault(task_id, row)
                assert row == first, f"{task_id} changed after it ended: {first} -> {row}"
            if row.phase is Phase.FINISHED:
                assert self.executions[task_id] == 1
                assert row.result_json is not None, row
                assert json.loads(row.result_json)["content"], row


WorkflowMachine.TestCase.settings = settings(
    # On the PostgreSQL leg each example creates and migrates a database of its own: fewer of them.
    max_examples=10 if postgres_leg() else 100,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestWorkflowMachine = pytest.mark.sep_check("sep-2848-terminal-is-final", "sep-2848-terminal-never-failed")(
    WorkflowMachine.TestCase
)
