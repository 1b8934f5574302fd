#!/usr/bin/env bash
# The load step: the crash suites and the approval flow tests while busy processes hold every core.
#
# Two busy processes per core (plain `while True: pass` loops at normal priority) compete with the
# servers, the clients and the database for the CPU, the way a loaded CI machine or a noisy
# neighbour does. Timing assumptions that hold on an idle machine (a grace period, a lease, a
# poll deadline) fail here first. The suites run ROUNDS times in a row (default 3); every round
# must be green. Extra arguments go to pytest.
#
# Usage: bash scripts/under_load.sh [pytest arguments]
# Environment:
#   MCP_APPROVAL_LOAD_ROUNDS   rounds in a row (default 3)
#   MCP_APPROVAL_LOAD_PER_CORE busy processes per core (default 2)
#   MCP_APPROVAL_TEST_WORKERS  test processes (default 4 here)
#   MCP_APPROVAL_CRASH_RUNS    runs per crash point and round (default 1 here: CI's crash step
#                              runs each point 20 times on an unloaded machine already)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/bootstrap.sh

readonly ROUNDS="${MCP_APPROVAL_LOAD_ROUNDS:-3}"
readonly PER_CORE="${MCP_APPROVAL_LOAD_PER_CORE:-2}"
export MCP_APPROVAL_CRASH_RUNS="${MCP_APPROVAL_CRASH_RUNS:-1}"
# Four test processes beside the busy ones (the suite's default is six): the load comes from the busy processes.
export MCP_APPROVAL_TEST_WORKERS="${MCP_APPROVAL_TEST_WORKERS:-4}"
readonly SUITES=(
  tests/treasury/test_crash_points.py
  tests/treasury/test_without_tasks_crash.py
  tests/treasury/test_arap_crash_points.py
  tests/treasury/test_slow_creation.py
  tests/treasury/test_approval_flows.py
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
echo "under load: $busy_count busy processes on $(nproc) cores, $ROUNDS rounds"

for round in $(seq "$ROUNDS"); do
  started=$SECONDS
  echo "--- round $round of $ROUNDS"
  bash scripts/test "$@" "${SUITES[@]}"
  echo "--- round $round green in $((SECONDS - started)) s"
done
