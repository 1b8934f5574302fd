"""The server the kit checks cannot harm the person running it: nothing it sends reaches the terminal
raw, no value of it reaches a shell, an answer of 600 MiB or one that drips a byte at a time costs
bounded memory and wall time. And a plain server (no approval) has its tool run at most once.

Each case runs the real command (``python -m mcp_approval check``) against a real server process;
the kit's peak memory is its own (``wait4``'s resource usage of that one process).
"""

from __future__ import annotations

import json
import os
import re
import selectors
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_approval.checks import SCENARIOS
from tests.checks.sep_rig import ServerProcess

ROOT = Path(__file__).resolve().parents[2]
#: What no line the kit prints may keep: C0/C1 controls but newline and tab, DEL, bidi controls.
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
LINE = re.compile(
    rf"^((PASS|FAIL|SKIP) ({'|'.join(re.escape(s.id) for s in SCENARIOS)}) \[[a-z0-9, -]*\]"
    r"|    (statement|result|why|note|evidence): .*|cleanup: .*|verdict: .*|\d+ passed, \d+ failed, \d+ skipped.*)$"
)


def kit_argv(url: str, *extra: str, decide: list[str] | None = None) -> list[str]:
    decider = decide or [sys.executable, "-I", "-S", "-c", "import sys; sys.exit(75)"]
    return [
        sys.executable, "-m", "mcp_approval", "check", url,
        "--tool", "pay",
        "--arguments", '{"to": "acct-{nonce}", "amount": 300}',
        "--changed-arguments", '{"to": "acct-{nonce}", "amount": 900}',
        "--token", "one-token", "--other-token", "two-token",
        "--decide", shlex.join(decider),
        "--witness-tool", "ledger", "--settle", "0.2",
        *extra,
    ]  # fmt: skip


def run_kit(argv: list[str], timeout_s: float = 120) -> tuple[int, str, str, float, int]:
    """Exit status, stdout, stderr, wall seconds, and the kit process's own peak RSS in MiB (``wait4``)."""
    started = time.monotonic()
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    assert process.stdout is not None
    assert process.stderr is not None
    read: dict[int, bytearray] = {process.stdout.fileno(): bytearray(), process.stderr.fileno(): bytearray()}
    with selectors.DefaultSelector() as selector:
        for stream in (process.stdout, process.stderr):
            selector.register(stream, selectors.EVENT_READ)
        while selector.get_map() and time.monotonic() < started + timeout_s:
            for key, _ in selector.select(timeout=0.5):
                chunk = os.read(key.fd, 65536)
                if chunk:
                    read[key.fd].extend(chunk)
                else:
                    selector.unregister(key.fileobj)
    if selector.get_map():
        process.kill()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    out, err = (read[stream.fileno()].decode(errors="replace") for stream in (process.stdout, process.stderr))
    process.stdout.close()
    process.stderr.close()
    return process.returncode, out, err, time.monotonic() - started, usage.ru_maxrss // 1024


@pytest.fixture
def hostile(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServerProcess]:
    mode, marker = request.param, tmp_path / "pwned"
    server = ServerProcess(
        ["tests.checks.hostile_server", "--mode", mode, "--marker", str(marker)], tmp_path / "server.log"
    )
    server.marker = marker  # type: ignore[attr-defined]
    try:
        yield server
    finally:
        server.kill()


def assert_safe_output(out: str, err: str) -> None:
    assert err == "", err[-2000:]
    assert not RAW.search(out), [line for line in out.splitlines() if RAW.search(line)][:3]
    assert "could not finish" not in out, out
    for line in out.splitlines():
        assert LINE.match(line), f"a line the kit would not print: {line!r}"


@pytest.mark.parametrize("hostile", ["escapes"], indirect=True)
def test_escape_sequences_from_the_server_never_reach_the_terminal(hostile: ServerProcess) -> None:
    code, out, err, _, _ = run_kit(kit_argv(hostile.url, "--timeout", "5"))
    assert code == 1, out + err
    assert_safe_output(out, err)
    assert "\\x1b[32mPASS no-backend-artifacts [faked]" in out  # shown, escaped, inside an evidence line
    assert "\\u202edesrever" in out


@pytest.mark.parametrize("hostile", ["escapes"], indirect=True)
def test_a_bad_input_line_quoting_the_server_is_escaped_too(hostile: ServerProcess) -> None:
    argv = kit_argv(hostile.url)
    argv[argv.index("--tool") + 1] = "missing"
    code, out, err, _, _ = run_kit(argv)
    assert code == 2, out + err
    (line,) = err.splitlines()
    assert line.startswith("error: --tool 'missing' is not a tool of the server"), line
    assert not RAW.search(line), line


@pytest.mark.parametrize("hostile", ["shell-id"], indirect=True)
def test_a_task_id_that_is_a_shell_command_reaches_the_decider_as_one_argument(
    hostile: ServerProcess, tmp_path: Path
) -> None:
    """The decider is a shell script that echoes its arguments: the id arrives whole and nothing runs."""
    seen = tmp_path / "seen"
    script = f'printf "%s\\n" "$1" "$MCP_CHECK_TASK_ID" >> {seen}; exit 75'
    decide = ["sh", "-c", script, "sh", "{task_id}"]
    code, out, err, _, _ = run_kit(
        kit_argv(hostile.url, "--only", "approval-executes-at-most-once", "--timeout", "2", decide=decide)
    )
    marker: Path = hostile.marker  # type: ignore[attr-defined]
    assert not marker.exists(), "a task id ran as a shell command"
    assert code == 1, out + err
    received = seen.read_text().splitlines()
    task_ids = [item for item in received if item.startswith("x;touch")]
    assert task_ids, received
    assert all(item == f"x;touch {marker};$(touch {marker})`touch {marker}`" for item in task_ids), received


def test_a_value_inside_a_shell_string_is_refused_before_anything_runs() -> None:
    argv = kit_argv("http://127.0.0.1:9/mcp")
    argv[argv.index("--decide") + 1] = "sh -c 'decide {task_id}'"
    code, out, err, _, _ = run_kit(argv)
    assert code == 2, out + err
    (line,) = err.splitlines()
    assert line.startswith("error: --decide: {task_id} must be a word of its own, not inside 'decide {task_id}'"), line


@pytest.mark.parametrize("hostile", ["huge"], indirect=True)
def test_a_600_mib_answer_is_cut_at_the_cap_and_memory_stays_bounded(hostile: ServerProcess) -> None:
    code, out, err, seconds, peak_mib = run_kit(kit_argv(hostile.url, "--timeout", "20"), timeout_s=300)
    print(f"600 MiB answers: kit peak RSS {peak_mib} MiB, wall {seconds:.1f} s")
    assert code == 1, out + err
    assert_safe_output(out, err)
    assert "AnswerTooLarge: the answer exceeded 4194304 bytes" in out
    # Holding one answer would take 600 MiB (the kit reached 1.9 GiB before its cap). Idle it peaks near
    # 126 MiB; a clean-clone CI run beside five other test workers saw 264 MiB, so the bound is set
    # well below one answer rather than just above the idle figure.
    assert peak_mib < 400, f"the kit peaked at {peak_mib} MiB"
    assert seconds < 120


@pytest.mark.parametrize("hostile", ["drip"], indirect=True)
def test_an_answer_dripping_a_byte_every_two_seconds_is_stopped_at_the_timeout(hostile: ServerProcess) -> None:
    code, out, err, seconds, peak_mib = run_kit(kit_argv(hostile.url, "--timeout", "5"), timeout_s=120)
    print(f"1 byte per 2 s under --timeout 5: kit wall {seconds:.1f} s, peak RSS {peak_mib} MiB")
    assert code == 1, out + err
    assert_safe_output(out, err)
    (verdict,) = [line for line in out.splitlines() if line.startswith("verdict: ")]
    assert "the server did not answer within 5s" in verdict, verdict
    assert seconds < 25, f"the run took {seconds:.1f} s under --timeout 5"
    assert "cleanup: not attempted: the server stalled" in out


@pytest.mark.parametrize("hostile", ["drip-list"], indirect=True)
def test_a_server_that_drips_its_first_answer_is_bad_input_within_the_timeout(hostile: ServerProcess) -> None:
    code, out, err, seconds, _ = run_kit(kit_argv(hostile.url, "--timeout", "3"))
    assert code == 2, out + err
    (line,) = err.splitlines()
    assert "did not answer tools/list within the --timeout" in line, line
    assert seconds < 15


def test_a_plain_server_runs_the_tool_at_most_once_and_gets_one_verdict(tmp_path: Path) -> None:
    """Told ``pay`` is gated, the kit meets a server that simply runs it: one run, one verdict, exit 1."""
    ledger = tmp_path / "ledger.jsonl"
    server = ServerProcess(["tests.checks.plain_server", "--ledger", str(ledger)], tmp_path / "server.log")
    try:
        code, out, err, _, _ = run_kit(kit_argv(server.url, "--timeout", "10"))
    finally:
        server.kill()
    runs = [json.loads(line) for line in ledger.read_text().splitlines()] if ledger.exists() else []
    assert len(runs) <= 1, runs
    assert code == 1, out + err
    verdicts = [line for line in out.splitlines() if line.startswith("verdict: ")]
    assert len(verdicts) == 1, out
    assert verdicts[0].startswith("verdict: this server does not gate pay: "), verdicts[0]
    assert "not run" in out.splitlines()[-1], out.splitlines()[-1]
