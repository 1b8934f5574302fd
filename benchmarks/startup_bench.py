"""How fast the command line starts: ``serve`` until its port is open, and ``review list``'s CPU.

Run from the repository root::

    .venv/bin/python benchmarks/startup_bench.py [--quick] [--rounds N]

A copy of the treasury example is measured in interleaved rounds, each a fresh process, after one
unmeasured run of each command (it creates and migrates the store). The commands run as installed:
their bytecode cached (``PYTHONPYCACHEPREFIX``, a temporary directory unless set), whatever
``PYTHONDONTWRITEBYTECODE`` says, since an install compiles it once and a start never does:

- ``mcp-approval --help``: the baseline, the command line itself (Typer, Click, Rich);
- ``mcp-approval review list --config``: CPU time (user + system) of the whole process;
- ``python -c "import mcp.server.mcpserver"``: wall time of the MCP SDK's import alone, the
  floor under ``serve``'s figure;
- ``mcp-approval serve --config``: wall time from the process start until its port accepts a
  connection, then the process is stopped.

The medians are printed against the targets (``review list`` under 0.5 s of CPU, ``serve`` open in
under 1 s), with ``--help``'s figures beside them: on a loaded machine every figure grows, and the
ratio to the baseline says whether the start itself got heavier. The exit status is 0 whatever
the figures are, 1 when the benchmark itself fails.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from measure import Row, exit_code_of, log, median, print_table

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "mcp_approval"]
#: Issue 25's targets.
REVIEW_LIST_CPU_S = 0.5
SERVE_OPEN_S = 1.0


@dataclass(frozen=True)
class Scale:
    name: str
    rounds: int


FULL = Scale("full", 9)
QUICK = Scale("quick", 3)


def installed_env(tmp: Path) -> dict[str, str]:
    """The environment of a command as installed: its bytecode cached (here under ``tmp``), not
    compiled anew by every process, whatever ``PYTHONDONTWRITEBYTECODE`` the caller has set."""
    env = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    env.setdefault("PYTHONPYCACHEPREFIX", str(tmp / "pycache"))
    return env


def cpu_of(command: list[str], cwd: Path, env: dict[str, str]) -> float:
    """CPU seconds (user + system) a child process used, run to its end."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, cwd=cwd, env=env, check=True, capture_output=True, timeout=120)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def serve_open_s(deployment: Path, env: dict[str, str]) -> float:
    """Wall seconds from starting ``serve`` until its port accepts a connection."""
    port = free_port()
    command = [*CLI, "serve", "--config", str(deployment / "config.toml"), "--port", str(port)]
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=deployment, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"serve exited with {process.returncode} before opening its port")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.05):
                    return time.perf_counter() - start
            except OSError:
                time.sleep(0.005)  # polling a port: there is nothing to wait on instead
    finally:
        process.terminate()
        process.wait(30)


async def run(args: argparse.Namespace) -> int:
    scale = QUICK if args.quick else FULL
    rounds = args.rounds or scale.rounds
    log(f"startup benchmark ({scale.name}): {rounds} interleaved rounds, each command a fresh process")
    with tempfile.TemporaryDirectory(prefix="mcpa-startup-") as tmp:
        deployment = Path(tmp) / "treasury"
        shutil.copytree(ROOT / "examples" / "treasury", deployment)
        review = [*CLI, "review", "list", "--config", str(deployment / "config.toml")]
        env = installed_env(Path(tmp))
        # Unmeasured: creating and migrating the store, and writing the bytecode caches, happen once.
        cpu_of([*CLI, "--help"], deployment, env)
        cpu_of(review, deployment, env)
        serve_open_s(deployment, env)
        help_cpu, review_cpu, serve_wall, help_wall, sdk_wall = [], [], [], [], []
        for index in range(rounds):
            started = time.perf_counter()
            help_cpu.append(cpu_of([*CLI, "--help"], deployment, env))
            help_wall.append(time.perf_counter() - started)
            review_cpu.append(cpu_of(review, deployment, env))
            serve_wall.append(serve_open_s(deployment, env))
            started = time.perf_counter()
            cpu_of([sys.executable, "-c", "import mcp.server.mcpserver"], deployment, env)
            sdk_wall.append(time.perf_counter() - started)
            log(
                f"  round {index + 1}: --help {help_cpu[-1]:.3f} s CPU, review list {review_cpu[-1]:.3f} s CPU, "
                f"serve open {serve_wall[-1]:.3f} s (MCP SDK import {sdk_wall[-1]:.3f} s)"
            )
    review_s, serve_s = median(review_cpu), median(serve_wall)
    rows = [
        Row(
            "review list, CPU",
            f"{review_s:.3f} s",
            f"--help {median(help_cpu):.3f} s (x{review_s / median(help_cpu):.2f})",
            f"< {REVIEW_LIST_CPU_S} s",
            review_s < REVIEW_LIST_CPU_S,
        ),
        Row(
            "serve, start to open port",
            f"{serve_s:.3f} s",
            f"--help {median(help_wall):.3f} s wall (x{serve_s / median(help_wall):.2f}); "
            f"MCP SDK import alone {median(sdk_wall):.3f} s",
            f"< {SERVE_OPEN_S} s",
            serve_s < SERVE_OPEN_S,
        ),
    ]
    log("")
    print_table(rows, baseline_header="baseline (same run)")
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="3 rounds instead of 9")
    parser.add_argument("--rounds", type=int, default=0)
    sys.exit(exit_code_of(run(parser.parse_args())))


if __name__ == "__main__":
    main()
