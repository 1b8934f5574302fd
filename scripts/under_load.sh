#!/usr/bin/env bash
# The load step: the tests that start servers, wait on them, crash and restart them, on SQLite and on
# PostgreSQL, while four busy processes per core hold the CPU.
#
# Busy processes (plain `while True: pass` loops at normal priority) compete with the servers, the
# clients and the database for the CPU, the way a loaded CI machine or a developer's laptop doing
# something else does. The suite's start and wait limits scale with the load measured at the start
# (tests/support/timing.py); this step is where a limit that does not, or a timing assumption that
# holds only on an idle machine (a lease, a grace, an asserted bound), shows.
#
# What runs, in one pass (about 7 minutes on 2 cores, the chaos run 4 more; CI's whole run must
# stay within 45):
#   SQLite (the deployments' default store)
#     - the crash suites: a SIGKILL at every named point, then a restart (one run per point: CI's
#       crash step runs each point 20 times on an unloaded machine);
#     - the slow creation tests (a server stopped past its grace), a pending task across a restart
#       and a request expiring unanswered (both backends);
#     - the multi-worker tests: a worker killed while its task is pending, the tasks demo's workers
#       (kill, restart, cancel and update across workers), a URL-linked approval across two serve
#       workers, a store outage under a running task.
#   PostgreSQL (the PostgreSQL leg, scripts/postgres_leg.sh, over a selection)
#     - the crash suites again; the ARS and serve killed and restarted mid-flow, a revoked approval
#       and a retry stopped by the approval's expiry (ARAP); re-evaluation around an approval's
#       expiry; a thousand concurrent identical retries from clients without tasks (a burst that
#       overloads one server). The revoked approval, the re-evaluation and the thousand retries
#       failed on this leg in a clean-clone run at load 10-12 before their limits scaled.
#   Chaos (once, after the passes): four serve workers on PostgreSQL, one SIGKILLed and restarted
#     every few seconds for MCP_APPROVAL_CHAOS_SECONDS (180 here; 15 in the ordinary suite) while
#     eight callers and two reviewers work (tests/treasury/test_chaos_workers.py).
# Left out: tests whose timing bounds are what they assert (a signal within 2 s, a notification
# before a 5 s poll): on a machine this busy they measure the machine, and the tests step checks
# them unloaded; suites that start few servers and wait on nothing (the bulk of the suite); and,
# for time, the rest of the files above (the approval flows, the other ARAP faults, the
# deployment limits): the unloaded tests step and PostgreSQL leg run them all.
#
# Usage: bash scripts/under_load.sh [pytest arguments]
# Environment:
#   MCP_APPROVAL_LOAD_PER_CORE     busy processes per core (default 4)
#   MCP_APPROVAL_LOAD_ROUNDS       passes in a row, each of both stores (default 1)
#   MCP_APPROVAL_TEST_WORKERS      test processes (default 4 here)
#   MCP_APPROVAL_CRASH_RUNS        runs per crash point and pass (default 1 here)
#   MCP_APPROVAL_CHAOS_SECONDS     how long the chaos run kills workers (default 180 here)
#   MCP_APPROVAL_TEST_TIME_SCALE   the start and wait limits' scale (default: measured once the busy
#                                  processes run, and used by every pytest run of the step)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/bootstrap.sh

readonly PER_CORE="${MCP_APPROVAL_LOAD_PER_CORE:-4}"
readonly ROUNDS="${MCP_APPROVAL_LOAD_ROUNDS:-1}"
export MCP_APPROVAL_CRASH_RUNS="${MCP_APPROVAL_CRASH_RUNS:-1}"
# Four test processes beside the busy ones (the suite's default is six): the load comes from the busy processes.
export MCP_APPROVAL_TEST_WORKERS="${MCP_APPROVAL_TEST_WORKERS:-4}"
readonly ON_SQLITE=(
  tests/treasury/test_crash_points.py
  tests/treasury/test_without_tasks_crash.py
  tests/treasury/test_arap_crash_points.py
  tests/treasury/test_slow_creation.py
  tests/treasury/test_lifecycle.py::test_unresolved_request_expires_as_denial
  tests/treasury/test_lifecycle.py::test_pending_task_survives_a_restart
  tests/treasury/test_postgres_workers.py::test_a_worker_killed_while_pending_leaves_the_task_to_the_other
  tests/tasks/test_tasks_processes.py
  tests/product_page/test_url_approval_workers.py
  tests/tasks/test_store_down.py
)
readonly ON_POSTGRES=(
  tests/treasury/test_crash_points.py
  tests/treasury/test_without_tasks_crash.py
  tests/treasury/test_arap_faults.py::test_the_ars_killed_and_restarted_mid_flow_loses_nothing
  tests/treasury/test_arap_faults.py::test_serve_killed_and_restarted_mid_flow_resumes_the_task
  tests/treasury/test_arap_faults.py::test_a_revoked_approval_opens_a_new_request_with_fresh_binding
  tests/treasury/test_arap_faults.py::test_retry_stops_when_the_approval_expires
  tests/approval/test_reevaluation.py
  tests/approval/test_without_tasks.py::test_a_thousand_concurrent_identical_retries_after_one_approval_run_the_tool_once
)

busy_pids=()
stop_busy() {
  if ((${#busy_pids[@]})); then
    kill "${busy_pids[@]}" 2>/dev/null || true
    wait "${busy_pids[@]}" 2>/dev/null || true
  fi
}
trap stop_busy EXIT

busy_count=$(($(nproc) * PER_CORE))
for _ in $(seq "$busy_count"); do
  .venv/bin/python -c 'while True: pass' &
  busy_pids+=("$!")
done
# Measured now that the busy processes run (they count as runnable at once, before the load average
# catches up), once for every pytest run of the step.
MCP_APPROVAL_TEST_TIME_SCALE="${MCP_APPROVAL_TEST_TIME_SCALE:-$(.venv/bin/python -m tests.support.timing)}"
export MCP_APPROVAL_TEST_TIME_SCALE
echo "under load: $busy_count busy processes on $(nproc) cores, $ROUNDS pass(es), start and wait limits x$MCP_APPROVAL_TEST_TIME_SCALE"

for round in $(seq "$ROUNDS"); do
  started=$SECONDS
  echo "--- pass $round of $ROUNDS: SQLite"
  bash scripts/test "$@" "${ON_SQLITE[@]}"
  echo "--- pass $round of $ROUNDS: PostgreSQL leg"
  MCP_APPROVAL_LEG_TESTS="${ON_POSTGRES[*]}" bash scripts/postgres_leg.sh "$@"
  echo "--- pass $round green in $((SECONDS - started)) s"
done

# The chaos run, once: four serve workers on PostgreSQL, one SIGKILLed and started again every
# few seconds while callers and reviewers work, then every approved call ran once and nothing else ran.
chaos_seconds="${MCP_APPROVAL_CHAOS_SECONDS:-180}"
echo "--- chaos: four serve workers on PostgreSQL, one killed every few seconds for $chaos_seconds s"
MCP_APPROVAL_CHAOS_SECONDS="$chaos_seconds" .venv/bin/python -m pytest "$@" -m chaos tests/treasury/test_chaos_workers.py
