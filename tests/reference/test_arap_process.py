"""arap-server as a real subprocess: ``--port 0``, and restarts that lose nothing.

The server is killed with SIGKILL (no shutdown code runs) and restarted on the same database
(SQLite file, and PostgreSQL through the shared ``db_url`` fixture) and the same port.
"""

from __future__ import annotations

import copy
import ssl
from pathlib import Path
from typing import Any

import httpx

from tests.reference.arap_support import CLIENT_TOKEN, ArapProcess, arap_dir, submission, transfer
from tests.support.timing import scaled

AUTH = {"Authorization": f"Bearer {CLIENT_TOKEN}"}


def evaluate(http: httpx.Client, body: dict[str, Any]) -> dict[str, Any]:
    response = http.post("/access/v1/evaluation", json=body)
    assert response.status_code == 200, response.text
    return dict(response.json())


def submit(http: httpx.Client, body: dict[str, Any], key: str) -> httpx.Response:
    return http.post("/access/v1/requests", json=body, headers={**AUTH, "Idempotency-Key": key})


def pending_ids(http: httpx.Client) -> list[str]:
    response = http.get("/approvals", headers={"Authorization": "Bearer carol-token"})
    return [item["id"] for item in response.json()["approvals"]]


def test_port_zero_prints_the_url_it_listens_on(tmp_path: Path):
    directory = arap_dir(tmp_path)
    server = ArapProcess(directory / "arap-server.toml", tmp_path, db_url=f"sqlite:///{tmp_path / 'a.db'}").start()
    try:
        assert server.base_url == f"http://127.0.0.1:{server.port}"
        assert server.port > 0
        document = httpx.get(server.base_url + "/.well-known/authzen-configuration", timeout=scaled(10)).json()
        assert document["policy_decision_point"] == server.base_url
        assert "dev mode" in server.log()  # the http deviation is logged as a WARNING
    finally:
        server.kill()


def test_a_restart_loses_nothing(tmp_path: Path, db_url: str):
    directory = arap_dir(tmp_path)
    config = directory / "arap-server.toml"
    server = ArapProcess(config, tmp_path, db_url=db_url).start()
    port = server.port
    try:
        with httpx.Client(base_url=server.base_url, timeout=scaled(15)) as http:
            # Before the crash: one pending task, one approved task with its approval, one unsubmitted denial.
            pending_request = transfer(90_000)
            pending_body = submission(pending_request, evaluate(http, pending_request))
            pending = submit(http, pending_body, "before-pending")
            assert pending.status_code == 202, pending.text
            approved_request = transfer(90_001)
            approved = submit(http, submission(approved_request, evaluate(http, approved_request)), "before-approved")
            ids_before = pending_ids(http)
            assert len(ids_before) == 2
            approved_url = approved.headers["location"]
            # Approve only the second request (the list is oldest first).
            carol = {"Authorization": "Bearer carol-token"}
            decided = http.post(f"/approvals/{ids_before[1]}/decide", json={"decision": "approve"}, headers=carol)
            assert decided.status_code == 200, decided.text
            approval = http.get(approved_url, headers=AUTH).json()["result"]["approval"]
            later_request = transfer(90_002)
            later_body = submission(later_request, evaluate(http, later_request))
        server.kill()

        server = ArapProcess(config, tmp_path, db_url=db_url, port=port).start()
        with httpx.Client(base_url=server.base_url, timeout=scaled(15)) as http:
            status = http.get(pending.headers["location"], headers=AUTH)
            assert status.status_code == 200
            assert status.json()["task"]["status"] == "pending"
            assert pending_ids(http) == ids_before[:1]
            # An idempotent retry after the crash finds the same task.
            assert submit(http, pending_body, "before-pending").json()["task"]["id"] == pending.json()["task"]["id"]
            # The issued approval still verifies (same key, same store) and permits.
            reevaluation = copy.deepcopy(approved_request)
            reevaluation["context"]["approval"] = approval
            assert evaluate(http, reevaluation)["decision"] is True
            assert http.get(approved_url, headers=AUTH).json()["result"]["approval"] == approval
            # A denial issued before the crash is still submittable.
            assert submit(http, later_body, "after").status_code == 202
            # A decision after the restart works.
            dave = {"Authorization": "Bearer dave-token"}
            decided = http.post(f"/approvals/{ids_before[0]}/decide", json={"decision": "approve"}, headers=dave)
            assert decided.status_code == 200, decided.text
            assert http.get(pending.headers["location"], headers=AUTH).json()["task"]["status"] == "approved"
    finally:
        server.kill()


def self_signed(tmp_path: Path) -> tuple[Path, Path]:
    """A throwaway certificate for 127.0.0.1 and its key (PEM files)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "tls-key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


def test_https_without_dev_mode(tmp_path: Path):
    directory = arap_dir(tmp_path, {"arap": {"dev_mode": False}})
    cert, key = self_signed(tmp_path)
    server = ArapProcess(
        directory / "arap-server.toml",
        tmp_path,
        db_url=f"sqlite:///{tmp_path / 'tls.db'}",
        extra_args=["--ssl-certfile", str(cert), "--ssl-keyfile", str(key)],
    ).start()
    try:
        assert server.base_url.startswith("https://127.0.0.1:")
        with httpx.Client(
            base_url=server.base_url, timeout=scaled(15), verify=ssl.create_default_context(cafile=str(cert))
        ) as http:
            document = http.get("/.well-known/authzen-configuration").json()
            assert document["access_request_endpoint"] == server.base_url + "/access/v1/requests"
            request = transfer(95_000)
            response = submit(http, submission(request, evaluate(http, request)), "tls")
            assert response.status_code == 202, response.text
        assert "deviation" not in server.log()
    finally:
        server.kill()
