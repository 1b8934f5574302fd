"""Loopback ports: never handed out twice by one process, split between processes by slice, and
(where the kernel leaves room) below the ephemeral range, which outgoing connections draw from."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_approval.hosts import PORT_SLICE_VARIABLE, unused_loopback_port


def test_one_process_never_hands_out_a_port_twice():
    ports = [unused_loopback_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)


EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


@pytest.mark.skipif(not EPHEMERAL_RANGE.exists(), reason="the ephemeral port range is read from Linux's /proc")
def test_ports_come_from_below_the_ephemeral_range_and_can_be_bound():
    ephemeral_from = int(EPHEMERAL_RANGE.read_text().split()[0])
    if ephemeral_from < 21_000:
        pytest.skip(f"this kernel's ephemeral range starts at {ephemeral_from}: no room below it")
    for port in [unused_loopback_port() for _ in range(50)]:
        assert port < ephemeral_from
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))  # free: a server can take it


@pytest.mark.parametrize("index", [0, 1, 2])
def test_a_slice_hands_out_only_its_own_ports(monkeypatch: pytest.MonkeyPatch, index: int):
    monkeypatch.setenv(PORT_SLICE_VARIABLE, f"{index}/3")
    assert {(unused_loopback_port() >> 1) % 3 for _ in range(30)} == {index}


def test_processes_with_distinct_slices_share_no_port():
    program = "from mcp_approval.hosts import unused_loopback_port as p; print(*(p() for _ in range(300)))"
    outputs = []
    for index in range(2):
        env = {PORT_SLICE_VARIABLE: f"{index}/2", "PYTHONPATH": ":".join(sys.path)}
        done = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, check=True)
        outputs.append({int(port) for port in done.stdout.split()})
    assert len(outputs[0]) == len(outputs[1]) == 300
    assert not outputs[0] & outputs[1]


@pytest.mark.parametrize(
    ("value", "message"), [("2", "K/N"), ("x/2", "K/N"), ("2/2", "0 <= K < N"), ("0/0", "0 <= K < N")]
)
def test_a_malformed_slice_is_refused_by_name(monkeypatch: pytest.MonkeyPatch, value: str, message: str):
    monkeypatch.setenv(PORT_SLICE_VARIABLE, value)
    with pytest.raises(ValueError, match=PORT_SLICE_VARIABLE) as raised:
        unused_loopback_port()
    assert message in str(raised.value)
