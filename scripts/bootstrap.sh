# Sourced by scripts/demo and scripts/test: make .venv hold this checkout's package and test tools.
# Reinstalls only when pyproject.toml changed since the last install.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON="${PYTHON:-python3}"
# Bytecode goes to .venv/pycache, not beside the sources: tests start the servers and command lines
# as subprocesses, and without a cache each would compile the package anew.
unset PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX="${PYTHONPYCACHEPREFIX:-$PWD/.venv/pycache}"
if [[ ! -x .venv/bin/python ]]; then
  "$PYTHON" -m venv .venv
fi
stamp=".venv/.mcp-approval-installed"
wanted="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$wanted" ]]; then
  echo "Installing mcp-approval and its test tools into .venv ..." >&2
  .venv/bin/python -m pip install --quiet --upgrade pip >&2
  .venv/bin/python -m pip install --quiet -e '.[test]' >&2
  echo "$wanted" > "$stamp"
fi
