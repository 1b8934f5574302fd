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
# What runs, in one pass (about 9 minutes on 2 cores; CI's whole run must stay within 45):
#   SQLite (the deployments' default store)
#     - the crash suites: a SIGKILL at every named point, then a restart (one run per point: CI's
#       crash step runs each point 20 times on an unloaded machine);
#     - the slow creation tests (a server stopped past its grace), the deployment lifecycle (restart,
#       expiry, start-up refusals) and the approval flows (module-scoped servers, both backends);
#     - the multi-worker tests: two serve workers on one PostgreSQL database, the tasks demo's
#       workers, a URL-linked approval across workers, a store outage under a running task.
#   PostgreSQL (the PostgreSQL leg, scripts/postgres_leg.sh, over a selection)
#     - the crash suites again, the ARAP fault tests (the ARS and serve killed and restarted, faults on
#       every exchange), re-evaluation around an approval's expiry, and the clients without tasks
#       (a thousand concurrent identical retries among them: a burst that overloads one server).
# Left out: tests whose timing bounds are what they assert (a signal within 2 s, a notification
# before a 5 s poll): on a machine this busy they measure the machine, and the tests step checks
# them unloaded; and suites that start few servers and wait on nothing (the bulk of the suite).
#
# Usage: bash scripts/under_load.sh [pytest arguments]
# Environment:
#   MCP_APPROVAL_LOAD_PER_CORE     busy processes per core (default 4)
#   MCP_APPROVAL_LOAD_ROUNDS       passes in a row, each of both stores (default 1)
#   MCP_APPROVAL_TEST_WORKERS      test processes (default 4 here)
#   MCP_APPROVAL_CRASH_RUNS        runs per crash point and pass (default 1 here)
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
  tests/treasury/test_lifecycle.py
  tests/treasury/test_approval_flows.py
  tests/treasury/test_postgres_workers.py
  tests/test_tasks_processes.py
  tests/product_page/test_url_approval_workers.py
  tests/test_store_down.py
)
readonly ON_POSTGRES=(
  tests/treasury/test_crash_points.py
  tests/treasury/test_without_tasks_crash.py
  tests/treasury/test_arap_faults.py
  tests/approval/test_reevaluation.py
  tests/approval/test_without_tasks.py
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
