#!/usr/bin/env bash
# Release check: what a user installs from this checkout, built and installed the way
# docs/deployment.md ("Installing") says.
#   bash scripts/release_check.sh
# 1. `python -m build` makes the sdist, then the wheel from the sdist; `twine check --strict` reads
#    their metadata; the wheel's name carries the version pyproject.toml writes.
# 2. The wheel with no extra: scripts/plain_install_check.sh (a fresh venv, every module imports,
#    --help and --version, arap-server and serve answer, `mcp-approval demo --only 1`).
# 3. The wheel with each extra (redis, otel, agents), each in a fresh venv: `--version` prints the
#    version, the extra's modules import, and `mcp-approval demo --only 1` passes.
# 4. The git URL form, `mcp-approval[redis] @ git+URL@COMMIT`, of this checkout's HEAD: pip builds it
#    and records the version (without the dependencies, which step 3 installs).
# Prints how long each step took. Exits non-zero on the first failure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
checkout="$PWD"
PYTHON="${PYTHON:-python3}"
# build and twine come with the test extra (scripts/bootstrap.sh installs it into .venv).
TOOLS="${TOOLS:-$checkout/.venv/bin/python}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
started=$SECONDS
took() { printf '  (%d s)\n' $((SECONDS - started)); started=$SECONDS; }

version="$("$TOOLS" -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')"
echo "build mcp-approval $version: sdist, then the wheel from it"
"$TOOLS" -m build --outdir "$work/dist" "$checkout" >"$work/build.log" 2>&1 || { cat "$work/build.log" >&2; exit 1; }
wheel="$work/dist/mcp_approval-$version-py3-none-any.whl"
sdist="$work/dist/mcp_approval-$version.tar.gz"
for built in "$wheel" "$sdist"; do
  [[ -f "$built" ]] || { echo "no $(basename "$built") in dist/:" >&2; ls "$work/dist" >&2; exit 1; }
done
"$TOOLS" -m twine check --strict "$wheel" "$sdist"
took

echo "the wheel, no extra"
bash "$checkout/scripts/plain_install_check.sh" "$wheel"
took

# What each extra adds, imported from the fresh venv: its ImportError would name the extra.
declare -A IMPORTS=(
  [redis]="from mcp_approval.tasks import RedisTaskStore"
  [otel]="from mcp_approval.tracing import tracing_available; assert tracing_available()"
  [agents]="import mcp_approval.agents.pydantic_ai, mcp_approval.agents.langgraph, mcp_approval.agents.openai_agents, mcp_approval.agents.google_adk, mcp_approval.agents.strands, mcp_approval.agents.llama_index"
)
# Nothing from this checkout or the caller's environment may leak into the fresh venvs; their
# bytecode stays in them (and goes with them).
unset PYTHONPATH VIRTUAL_ENV PYTHONPYCACHEPREFIX
# --no-compile: only what runs is compiled to bytecode (compiling all of the agents extra's
# frameworks at install took a third of its CPU: 31 s against 19 s).
for extra in redis otel agents; do
  echo "the wheel with [$extra]"
  venv="$work/venv-$extra"
  "$PYTHON" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile "$wheel[$extra]"
  printf '  installed (%d s)\n' $((SECONDS - started))
  shown="$("$venv/bin/mcp-approval" --version)"
  [[ "$shown" == "mcp-approval $version" ]] || { echo "--version printed '$shown'" >&2; exit 1; }
  (cd "$work" && "$venv/bin/python" -c "${IMPORTS[$extra]}")
  (cd "$work" && "$venv/bin/mcp-approval" demo --only 1 >"$work/demo-$extra.out" 2>&1) ||
    { cat "$work/demo-$extra.out" >&2; exit 1; }
  grep -o 'mcp-approval demo: [0-9/]* scenarios behaved in [0-9.]* s' "$work/demo-$extra.out"
  rm -rf "$venv"
  took
done

commit="$(git -C "$checkout" rev-parse HEAD)"
echo "the git URL at $commit"
"$PYTHON" -m venv "$work/venv-git"
# file://localhost/PATH: the pip a venv starts with (23.2) refuses an empty host in a requirement's URL.
"$work/venv-git/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile --no-deps \
  "mcp-approval[redis] @ git+file://localhost$checkout@$commit"
installed="$("$work/venv-git/bin/python" -c 'from importlib.metadata import version; print(version("mcp-approval"))')"
[[ "$installed" == "$version" ]] || { echo "the git URL installed version '$installed'" >&2; exit 1; }
took

echo "release check: mcp-approval $version builds, and installs and runs with each extra"
