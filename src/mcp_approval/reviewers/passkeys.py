"""Passkey step-up: registering a reviewer's passkeys and verifying the assertion a decision needs.

A template with ``step_up = "passkey"`` makes every decision on its requests need a WebAuthn
assertion from a passkey the deciding reviewer registered in the console. The assertion's
challenge binds what is decided::

    challenge = SHA-256("mcp-approval/passkey-step-up/v1" || 0x00 || nonce || sealed digest || decision)

where ``nonce`` is 32 random bytes the server keeps (never sent), ``sealed digest`` the SHA-256 of
what the request's seal covers (:func:`~mcp_approval.backends.local.step_up.sealed_digest`: the
call, requester, template, rules and deadline) and ``decision`` ``approve`` or ``deny``. A
challenge is issued to one reviewer for one request and one decision, lives
:data:`CHALLENGE_TTL_S` seconds and is taken from the store by its first use, whatever that use's
outcome. Verification (the ``webauthn`` package) recomputes the challenge from the nonce and the
request *as it stands now*, so an assertion for another request, for the other decision, for the
request before it changed, or one already used, is refused. The backend then checks the digest
and the decision again in the decision's own transaction and records the step-up in the
decision's audit event.

User verification (a PIN or biometric on the authenticator) is required, at registration and at
every assertion. Only public keys are stored (:mod:`~mcp_approval.reviewers.passkey_store`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
from typing import Any, Literal
from urllib.parse import urlsplit

from sqlalchemy import Connection
from webauthn import (
    generate_authentication_options,
    generate_registration_options,
    options_to_json,
    verify_authentication_response,
    verify_registration_response,
)
from webauthn.helpers import (
    base64url_to_bytes,
    bytes_to_base64url,
    parse_authentication_credential_json,
    parse_client_data_json,
    parse_registration_credential_json,
)
from webauthn.helpers.exceptions import InvalidAuthenticationResponse, InvalidRegistrationResponse
from webauthn.helpers.structs import (
    AuthenticatorSelectionCriteria,
    PublicKeyCredentialDescriptor,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

from mcp_approval.backends import ApprovalRecord, StepUp
from mcp_approval.clock import Clock, SystemClock
from mcp_approval.errors import MCPApprovalError
from mcp_approval.reviewers.passkey_store import PASSKEY_MIGRATIONS, IssuedChallenge, PasskeyRow, PasskeyTables
from mcp_approval.storage.audit import AuditLog
from mcp_approval.storage.database import Database
from mcp_approval.storage.migrations import Migrations

__all__ = ["CHALLENGE_TTL_S", "PasskeyRefusedError", "PasskeyStepUp", "decision_challenge"]

_log = logging.getLogger(__name__)

#: How long an issued challenge may be answered.
CHALLENGE_TTL_S = 120
#: How long the browser lets the reviewer answer (WebAuthn ``timeout``), within the challenge's life.
_CEREMONY_TIMEOUT_MS = 90_000
_DOMAIN = b"mcp-approval/passkey-step-up/v1\x00"

Decision = Literal["approve", "deny"]


class PasskeyRefusedError(MCPApprovalError, ValueError):
    """A passkey registration or assertion was refused; the message says why (nothing was recorded)."""


def decision_challenge(nonce: bytes, digest: str, decision: str) -> bytes:
    """The challenge that binds ``nonce``, a request's sealed ``digest`` (hex) and ``decision``."""
    return hashlib.sha256(_DOMAIN + nonce + bytes.fromhex(digest) + decision.encode("ascii")).digest()


def _key(challenge: bytes) -> str:
    return hashlib.sha256(challenge).hexdigest()


class PasskeyStepUp:
    """Reviewers' passkeys for one relying party (the console's origin).

    Args:
        database: the store (migrated with :attr:`migrations`).
        origin: the console's origin as browsers see it (``https://approvals.example.com``);
            assertions made on another origin are refused.
        rp_id: the WebAuthn relying party id, a domain (by default the origin's host).
        clock: the source of time.
        audit: where each registration is recorded (``passkey.registered``, with the credential id),
            in the registration's transaction.
    """

    def __init__(
        self,
        database: Database,
        *,
        origin: str,
        rp_id: str | None = None,
        clock: Clock | None = None,
        audit: AuditLog | None = None,
    ) -> None:
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"a passkey origin is an http(s) origin such as https://approvals.example.com, not {origin!r}"
            )
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.rp_id = rp_id or parts.hostname
        if self.rp_id.replace(".", "").isdigit() or ":" in self.rp_id:
            # Allowed for programs that verify without a browser (the demo), useless to a browser.
            _log.warning(
                "passkeys are bound to %s, an IP address: browsers refuse passkeys for one. Serve the console "
                "by a domain name (localhost while developing) and set server.base_url to it",
                self.origin,
            )
        self._tables = PasskeyTables(database)
        self._clock = clock or SystemClock()
        self._audit = audit

    @property
    def migrations(self) -> tuple[Migrations, ...]:
        """The history of the tables it uses."""
        return (PASSKEY_MIGRATIONS,)

    async def passkeys(self, reviewer: str) -> list[PasskeyRow]:
        """The passkeys ``reviewer`` registered, oldest first."""
        return await self._tables.of_reviewer(reviewer)

    # -- registration -----------------------------------------------------------------------------

    async def registration_options(self, reviewer: str) -> dict[str, Any]:
        """WebAuthn creation options for a new passkey of ``reviewer`` (JSON, base64url members)."""
        nonce = secrets.token_bytes(32)
        await self._issue(nonce, reviewer, "register", None)
        existing = [
            PublicKeyCredentialDescriptor(id=base64url_to_bytes(p.credential_id)) for p in await self.passkeys(reviewer)
        ]
        options = generate_registration_options(
            rp_id=self.rp_id,
            rp_name="mcp-approval reviewers",
            user_name=reviewer,
            user_id=hashlib.sha256(b"mcp-approval reviewer\x00" + reviewer.encode("utf-8")).digest(),
            challenge=nonce,
            timeout=_CEREMONY_TIMEOUT_MS,
            authenticator_selection=AuthenticatorSelectionCriteria(
                resident_key=ResidentKeyRequirement.PREFERRED, user_verification=UserVerificationRequirement.REQUIRED
            ),
            exclude_credentials=existing,
        )
        return _json(options_to_json(options))

    async def register(self, reviewer: str, credential: Any) -> PasskeyRow:
        """Verify a registration response to :meth:`registration_options` and store the passkey.

        Raises:
            PasskeyRefusedError: unreadable, not answering a live challenge of this reviewer, not
                verified, or a credential already registered.
        """
        try:
            parsed = parse_registration_credential_json(credential)
            challenge = parse_client_data_json(parsed.response.client_data_json).challenge
        except Exception:  # any malformed member: the same refusal
            raise PasskeyRefusedError("the passkey registration could not be read") from None
        issued = await self._take(challenge)
        if issued.reviewer != reviewer or issued.purpose != "register":
            raise PasskeyRefusedError("the passkey registration answers a challenge issued for something else")
        try:
            verified = verify_registration_response(
                credential=parsed,
                expected_challenge=challenge,
                expected_rp_id=self.rp_id,
                expected_origin=self.origin,
                require_user_verification=True,
            )
        except InvalidRegistrationResponse as exc:
            raise PasskeyRefusedError(f"the passkey registration was not verified ({exc})") from None
        now = self._clock.now_ms()
        row = PasskeyRow(
            credential_id=bytes_to_base64url(verified.credential_id),
            reviewer=reviewer,
            public_key=bytes_to_base64url(verified.credential_public_key),
            sign_count=verified.sign_count,
            created_at=now,
            used_at=None,
        )
        audit = self._audit

        def audited(conn: Connection) -> None:
            if audit is not None:  # who added which passkey, when: in the hash chain
                data = {"credential_id": row.credential_id, "rp_id": self.rp_id}
                audit.record_in(conn, now, "passkey.registered", subject=reviewer, actor=reviewer, data=data)

        if not await self._tables.add(row, audited):
            raise PasskeyRefusedError("that passkey is already registered")
        return row

    # -- decisions --------------------------------------------------------------------------------

    async def decision_options(self, reviewer: str, record: ApprovalRecord, decision: Decision) -> dict[str, Any]:
        """WebAuthn request options whose challenge binds ``record`` as it stands and ``decision``.

        Raises:
            PasskeyRefusedError: ``reviewer`` has no passkey yet.
        """
        passkeys = await self.passkeys(reviewer)
        if not passkeys:
            raise PasskeyRefusedError("you have no passkey yet: register one on the console's Passkeys page")
        nonce = secrets.token_bytes(32)
        challenge = decision_challenge(nonce, record.sealed_digest, decision)
        await self._issue(nonce, reviewer, decision, record.id, key=_key(challenge))
        options = generate_authentication_options(
            rp_id=self.rp_id,
            challenge=challenge,
            timeout=_CEREMONY_TIMEOUT_MS,
            allow_credentials=[PublicKeyCredentialDescriptor(id=base64url_to_bytes(p.credential_id)) for p in passkeys],
            user_verification=UserVerificationRequirement.REQUIRED,
        )
        return _json(options_to_json(options))

    async def verify_decision(
        self, reviewer: str, record: ApprovalRecord, decision: Decision, credential: Any
    ) -> StepUp:
        """The step-up an assertion gives ``reviewer``'s ``decision`` on ``record``.

        The assertion's challenge is taken (single-use) before anything else is checked.

        Raises:
            PasskeyRefusedError: unreadable; its challenge unknown, used or expired; issued for
                another reviewer, request or decision; made with a passkey not registered to
                ``reviewer``; or not verified (signature, origin, relying party, user verification,
                or the request changed since the challenge was issued).
        """
        try:
            parsed = parse_authentication_credential_json(credential)
            challenge = parse_client_data_json(parsed.response.client_data_json).challenge
        except Exception:  # any malformed member: the same refusal
            raise PasskeyRefusedError("the passkey assertion could not be read") from None
        issued = await self._take(challenge)
        if issued.reviewer != reviewer:
            raise PasskeyRefusedError("the passkey assertion answers a challenge issued to another reviewer")
        if issued.request_id != record.id or issued.purpose != decision:
            raise PasskeyRefusedError("the passkey assertion confirms another request or the other decision")
        passkey = await self._tables.find(parsed.id)
        if passkey is None or passkey.reviewer != reviewer:
            raise PasskeyRefusedError("the assertion was made with a passkey not registered to you")
        try:
            verified = verify_authentication_response(
                credential=parsed,
                expected_challenge=decision_challenge(bytes.fromhex(issued.nonce), record.sealed_digest, decision),
                expected_rp_id=self.rp_id,
                expected_origin=self.origin,
                credential_public_key=base64url_to_bytes(passkey.public_key),
                credential_current_sign_count=passkey.sign_count,
                require_user_verification=True,
            )
        except InvalidAuthenticationResponse as exc:
            raise PasskeyRefusedError(f"the passkey assertion was not verified ({exc})") from None
        await self._tables.used(passkey.credential_id, verified.new_sign_count, self._clock.now_ms())
        return StepUp("passkey", passkey.credential_id, record.sealed_digest, decision)

    # -- challenges -------------------------------------------------------------------------------

    async def _issue(
        self, nonce: bytes, reviewer: str, purpose: str, request_id: str | None, key: str | None = None
    ) -> None:
        now = self._clock.now_ms()
        issued = IssuedChallenge(nonce.hex(), reviewer, purpose, request_id, now + CHALLENGE_TTL_S * 1000)
        await self._tables.issue(key or _key(nonce), issued, now)

    async def _take(self, challenge: bytes) -> IssuedChallenge:
        issued = await self._tables.take(_key(challenge), self._clock.now_ms())
        if issued is None:
            raise PasskeyRefusedError("the passkey challenge is unknown, expired or already used: start again")
        return issued


def _json(text: str) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(text)
    return value
