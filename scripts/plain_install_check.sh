#!/usr/bin/env bash
# Plain install: what a user gets from installing mcp-approval with no extras.
#   bash scripts/plain_install_check.sh [WHEEL]
# A fresh venv in a temporary folder, `pip install WHEEL` (scripts/release_check.sh passes the wheel
# it built; without one, this checkout: `pip install .`), then: every module imports (modules of an
# optional extra may fail only with an ImportError naming that extra), `mcp-approval --help` and
# `--version` run, `arap-server` on the Todo example answers its PDP metadata, `serve` on the
# treasury example answers `server/discover`, and `mcp-approval demo --only 1` passes.
# Exits non-zero on the first failure; both servers are stopped on exit.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
checkout="$PWD"
target="$(realpath "${1:-$checkout}")"
PYTHON="${PYTHON:-python3}"
work="$(mktemp -d)"
pids=()

cleanup() {
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

# Nothing from this checkout or the caller's environment may leak into the fresh venv; its
# bytecode stays in it (and goes with it).
unset PYTHONPATH VIRTUAL_ENV PYTHONPYCACHEPREFIX
"$PYTHON" -m venv "$work/venv"
py="$work/venv/bin/python"
# --no-compile: only what runs is compiled to bytecode, as it is imported (every module of the package is).
"$py" -m pip install --quiet --disable-pip-version-check --no-compile "$target"
cd "$work"

echo "import every module"
"$py" - <<'EOF'
import importlib
import pkgutil

import mcp_approval

# Modules that need an optional extra, and the extra their ImportError must name.
OPTIONAL = {"mcp_approval.tasks.redis_store": "mcp-approval[redis]"}
for framework in ("pydantic_ai", "langgraph", "openai_agents", "google_adk", "strands", "llama_index"):
    OPTIONAL[f"mcp_approval.agents.{framework}"] = "mcp-approval[agents]"
names = [info.name for info in pkgutil.walk_packages(mcp_approval.__path__, "mcp_approval.")]
names = [name for name in names if name != "mcp_approval.__main__"]  # importing it runs the command
failures = []
for name in names:
    try:
        importlib.import_module(name)
    except ImportError as exc:
        extra = OPTIONAL.get(name)
        if extra is None or extra not in str(exc):
            failures.append(f"{name}: {type(exc).__name__}: {exc}")
for name, extra in OPTIONAL.items():
    if name not in names:
        failures.append(f"{name}: listed as needing {extra} but no such module")
try:
    from mcp_approval.tasks import RedisTaskStore  # noqa: F401
except ImportError as exc:
    if "mcp-approval[redis]" not in str(exc):
        failures.append(f"mcp_approval.tasks.RedisTaskStore: {exc}")
if failures:
    raise SystemExit("modules that do not import on a plain install:\n  " + "\n  ".join(failures))
print(f"  {len(names)} modules")
EOF

echo "mcp-approval --help, --version"
"$work/venv/bin/mcp-approval" --help >/dev/null
"$work/venv/bin/mcp-approval" --version

# The helper below starts a server, waits until it answers, checks the answer and leaves it running.
cat >"$work/probe.py" <<'EOF'
"""probe.py arap URL_FILE | probe.py serve PORT: wait for the server, then check one answer."""
import json
import sys
import time
import urllib.error
import urllib.request

DEADLINE_S = 60


def retry(fetch):
    """Call ``fetch`` until it stops failing to connect (the server is starting), up to the deadline."""
    give_up = time.monotonic() + DEADLINE_S
    while True:
        try:
            return fetch()
        except urllib.error.HTTPError:
            raise  # the server is up and refused: no point waiting
        except (urllib.error.URLError, ConnectionError, FileNotFoundError, ValueError):
            if time.monotonic() > give_up:
                raise
            time.sleep(0.2)


def arap(url_file):
    def announced():
        line = open(url_file, encoding="utf-8").readline()
        prefix = "arap-server listening on "
        if not line.endswith("\n") or not line.startswith(prefix):
            raise ValueError("not announced yet")
        return line[len(prefix) :].strip()

    url = retry(announced)
    with urllib.request.urlopen(f"{url}/.well-known/authzen-configuration", timeout=10) as response:
        metadata = json.load(response)
    assert metadata["policy_decision_point"] == url, metadata
    print(f"  {url} answers its PDP metadata")


def serve(port):
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "server/discover",
        "params": {
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "plain-install-check", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {},
            }
        },
    }
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/mcp",
        data=json.dumps(body).encode(),
        headers={
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": "server/discover",
            "authorization": "Bearer alice-token",  # a principal of examples/treasury/config.toml
        },
    )

    def discover():
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.read().decode()

    text = retry(discover)
    lines = [line[5:] for line in text.splitlines() if line.startswith("data:")] or [text]
    reply = json.loads(lines[-1])
    assert "capabilities" in reply.get("result", {}), reply
    print(f"  server/discover answered, capabilities: {', '.join(sorted(reply['result']['capabilities']))}")


if __name__ == "__main__":
    {"arap": arap, "serve": serve}[sys.argv[1]](sys.argv[2])
EOF

echo "mcp-approval arap-server --config examples/todo/arap-server.toml"
"$work/venv/bin/mcp-approval" arap-server --config "$checkout/examples/todo/arap-server.toml" --port 0 \
  --db "sqlite:///$work/todo-arap.db" >"$work/arap.out" 2>"$work/arap.err" &
pids+=($!)
"$py" "$work/probe.py" arap "$work/arap.out" || { cat "$work/arap.err" >&2; exit 1; }

echo "mcp-approval serve --config examples/treasury/config.toml"
port="$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$work/venv/bin/mcp-approval" serve --config "$checkout/examples/treasury/config.toml" --port "$port" \
  --db "sqlite:///$work/treasury.db" >"$work/serve.out" 2>"$work/serve.err" &
pids+=($!)
"$py" "$work/probe.py" serve "$port" || { cat "$work/serve.err" >&2; exit 1; }

echo "mcp-approval demo --only 1"
"$work/venv/bin/mcp-approval" demo --only 1 >"$work/demo.out" 2>&1 || { cat "$work/demo.out" >&2; exit 1; }
grep -o 'mcp-approval demo: [0-9/]* scenarios behaved in [0-9.]* s' "$work/demo.out"

echo "plain install: all checks passed"
