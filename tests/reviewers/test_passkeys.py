"""Passkey step-up's verification path, on SQLite and PostgreSQL, with a software authenticator.

Registration and assertions are verified by the ``webauthn`` package against the stored public
key; the challenge binds the request's sealed digest and the decision, is single-use and
expires. The local backend refuses every decision of a step-up template without a matching
step-up, whoever calls it. The same path in Chromium with its virtual authenticator is
``test_passkeys_browser.py``.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from mcp_approval.approval.persistence.schema import APPROVAL_MIGRATIONS
from mcp_approval.backends import (
    ApprovalStatus,
    ApprovalTemplate,
    LocalApprovalBackend,
    RequestRules,
    StepUp,
    StepUpRequiredError,
)
from mcp_approval.backends.contract import ApprovalSubmission
from mcp_approval.backends.local.schema import LOCAL_BACKEND_MIGRATIONS
from mcp_approval.clock import ManualClock
from mcp_approval.config import ConfigError, ConfigFile, load_config, load_config_file
from mcp_approval.demo.soft_authenticator import SoftAuthenticator
from mcp_approval.keyring import BindingCipher
from mcp_approval.notify.chat_messages import NOTIFY_MIGRATIONS, ChatMessage, ChatMessages
from mcp_approval.notify.messages import MessageBuilder
from mcp_approval.notify.slack_blocks import APPROVE, DENY, OPEN, SIMILAR, request_message
from mcp_approval.notify.slack_deciding import Click, SlackDecider
from mcp_approval.reviewers.passkey_store import PASSKEY_MIGRATIONS
from mcp_approval.reviewers.passkeys import CHALLENGE_TTL_S, PasskeyRefusedError, PasskeyStepUp
from mcp_approval.storage import AUDIT_MIGRATIONS, AuditLog, Database, migrate, open_database

pytestmark = pytest.mark.anyio

ORIGIN = "https://approvals.example.com"
ROLES = {"carol": frozenset({"approver"}), "dave": frozenset({"approver"})}
TEMPLATES = {"guarded": ApprovalTemplate(step_up="passkey"), "plain": ApprovalTemplate()}


@pytest.fixture
async def database(db_url: str) -> AsyncIterator[Database]:
    db = open_database(db_url)
    await migrate(db, AUDIT_MIGRATIONS, LOCAL_BACKEND_MIGRATIONS, PASSKEY_MIGRATIONS)
    yield db
    await db.close()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def backend(database: Database, clock: ManualClock) -> LocalApprovalBackend:
    return LocalApprovalBackend(
        database,
        templates=TEMPLATES,
        roles=lambda who: ROLES.get(who, frozenset()),
        audit=AuditLog(database, clock),
        clock=clock,
        seal=BindingCipher({"k": os.urandom(32)}),
    )


@pytest.fixture
def passkeys(database: Database, clock: ManualClock) -> PasskeyStepUp:
    return PasskeyStepUp(database, origin=ORIGIN, clock=clock, audit=AuditLog(database, clock))


async def submit(backend: LocalApprovalBackend, template: str = "guarded", amount: int = 100) -> str:
    body = ApprovalSubmission(tool="transfer", arguments={"amount": amount}, requester="alice", template=template)
    return await backend.submit(secrets.token_urlsafe(16), body)


async def registered(passkeys: PasskeyStepUp, reviewer: str = "carol") -> SoftAuthenticator:
    authenticator = SoftAuthenticator(ORIGIN)
    await passkeys.register(reviewer, authenticator.create(await passkeys.registration_options(reviewer)))
    return authenticator


async def assertion(
    passkeys: PasskeyStepUp, backend: LocalApprovalBackend, authenticator: SoftAuthenticator, handle: str, decision: str
) -> dict[str, object]:
    record = await backend.get_request(handle)
    assert record is not None
    options = await passkeys.decision_options("carol", record, decision)  # type: ignore[arg-type]
    return authenticator.get(options)


async def decide_with(
    passkeys: PasskeyStepUp, backend: LocalApprovalBackend, handle: str, decision: str, credential: object
) -> ApprovalStatus:
    record = await backend.get_request(handle)
    assert record is not None
    step_up = await passkeys.verify_decision("carol", record, decision, credential)  # type: ignore[arg-type]
    return (await backend.decide(handle, "carol", decision, None, step_up=step_up)).status  # type: ignore[arg-type]


async def test_a_registered_passkey_approves_and_the_audit_event_records_the_step_up(
    passkeys: PasskeyStepUp, backend: LocalApprovalBackend, database: Database, clock: ManualClock
) -> None:
    authenticator = await registered(passkeys)
    [stored] = await passkeys.passkeys("carol")
    assert stored.credential_id == authenticator.get({"challenge": "AA", "rpId": "x"})["id"]
    handle = await submit(backend)
    credential = await assertion(passkeys, backend, authenticator, handle, "approve")
    assert await decide_with(passkeys, backend, handle, "approve", credential) is ApprovalStatus.APPROVED
    events = await AuditLog(database, clock).events(subject=handle)
    [decision] = [event for event in events if event.kind == "approval.decision"]
    assert decision.data["step_up"]["method"] == "passkey"
    assert decision.data["step_up"]["credential_id"] == stored.credential_id
    assert (await passkeys.passkeys("carol"))[0].sign_count == authenticator.sign_count
    [registered_event] = await AuditLog(database, clock).events(subject="carol")
    assert registered_event.kind == "passkey.registered"
    assert registered_event.actor == "carol"
    assert registered_event.data == {"credential_id": stored.credential_id, "rp_id": "approvals.example.com"}


async def test_a_deny_needs_the_passkey_too(passkeys: PasskeyStepUp, backend: LocalApprovalBackend) -> None:
    authenticator = await registered(passkeys)
    handle = await submit(backend)
    credential = await assertion(passkeys, backend, authenticator, handle, "deny")
    assert await decide_with(passkeys, backend, handle, "deny", credential) is ApprovalStatus.DENIED


@pytest.mark.parametrize("decision", ["approve", "deny"])
async def test_without_a_step_up_every_decision_is_refused_and_nothing_recorded(
    backend: LocalApprovalBackend, decision: str
) -> None:
    handle = await submit(backend)
    with pytest.raises(
        StepUpRequiredError, match="requires a passkey for every decision: decide it with your passkey in the console"
    ):
        await backend.decide(handle, "carol", decision)  # type: ignore[arg-type]
    record = await backend.get_request(handle)
    assert record is not None
    assert record.status is ApprovalStatus.PENDING
    assert record.decisions == ()


async def test_a_template_without_step_up_is_decided_as_before(backend: LocalApprovalBackend) -> None:
    handle = await submit(backend, template="plain")
    assert (await backend.decide(handle, "carol", "approve")).status is ApprovalStatus.APPROVED


async def test_a_step_up_for_another_request_or_decision_is_refused_by_the_backend(
    backend: LocalApprovalBackend,
) -> None:
    first, second = await submit(backend), await submit(backend, amount=200)
    record = await backend.get_request(first)
    assert record is not None
    other = await backend.get_request(second)
    assert other is not None
    assert other.sealed_digest != record.sealed_digest
    with pytest.raises(StepUpRequiredError, match="another request"):
        await backend.decide(
            second, "carol", "approve", step_up=StepUp("passkey", "id", record.sealed_digest, "approve")
        )
    with pytest.raises(StepUpRequiredError, match="confirmed deny, not approve"):
        await backend.decide(first, "carol", "approve", step_up=StepUp("passkey", "id", record.sealed_digest, "deny"))
    assert (await backend.get_request(first)).decisions == ()  # type: ignore[union-attr]


async def test_an_assertion_for_another_request_is_refused(
    passkeys: PasskeyStepUp, backend: LocalApprovalBackend
) -> None:
    authenticator = await registered(passkeys)
    first, second = await submit(backend), await submit(backend, amount=200)
    credential = await assertion(passkeys, backend, authenticator, first, "approve")
    with pytest.raises(PasskeyRefusedError, match="another request or the other decision"):
        await decide_with(passkeys, backend, second, "approve", credential)
    assert (await backend.get_request(second)).decisions == ()  # type: ignore[union-attr]


async def test_an_assertion_for_the_other_decision_is_refused_and_its_challenge_is_spent(
    passkeys: PasskeyStepUp, backend: LocalApprovalBackend
) -> None:
    authenticator = await registered(passkeys)
    handle = await submit(backend)
    credential = await assertion(passkeys, backend, authenticator, handle, "deny")
    with pytest.raises(PasskeyRefusedError, match="another request or the other decision"):
        await decide_with(passkeys, backend, handle, "approve", credential)
    # The refused attempt took the challenge: the same assertion for its own decision is refused too.
    with pytest.raises(PasskeyRefusedError, match="unknown, expired or already used"):
        await decide_with(passkeys, backend, handle, "deny", credential)
    assert (await backend.get_request(handle)).status is ApprovalStatus.PENDING  # type: ignore[union-attr]


async def test_a_challenge_is_single_use(passkeys: PasskeyStepUp, backend: LocalApprovalBackend) -> None:
    authenticator = await registered(passkeys)
    handle = await submit(backend)
    credential = await assertion(passkeys, backend, authenticator, handle, "approve")
    record = await backend.get_request(handle)
    assert record is not None
    await passkeys.verify_decision("carol", record, "approve", credential)
    with pytest.raises(PasskeyRefusedError, match="unknown, expired or already used"):
        await passkeys.verify_decision("carol", record, "approve", credential)


async def test_an_expired_challenge_is_refused(
    passkeys: PasskeyStepUp, backend: LocalApprovalBackend, clock: ManualClock
) -> None:
    authenticator = await registered(passkeys)
    handle = await submit(backend)
    credential = await assertion(passkeys, backend, authenticator, handle, "approve")
    clock.advance(CHALLENGE_TTL_S * 1000)
    with pytest.raises(PasskeyRefusedError, match="unknown, expired or already used"):
        await decide_with(passkeys, backend, handle, "approve", credential)


async def test_an_assertion_made_on_another_origin_is_refused(
    passkeys: PasskeyStepUp, backend: LocalApprovalBackend
) -> None:
    authenticator = await registered(passkeys)
    handle = await submit(backend)
    authenticator.origin = "https://approvals.example.com.evil.test"
    credential = await assertion(passkeys, backend, authenticator, handle, "approve")
    with pytest.raises(PasskeyRefusedError, match="not verified"):
        await decide_with(passkeys, backend, handle, "approve", credential)


async def test_an_unregistered_passkey_is_refused(passkeys: PasskeyStepUp, backend: LocalApprovalBackend) -> None:
    await registered(passkeys)
    stranger = await registered(passkeys, reviewer="dave")  # dave's passkey, answering carol's challenge
    handle = await submit(backend)
    record = await backend.get_request(handle)
    assert record is not None
    options = await passkeys.decision_options("carol", record, "approve")
    options["allowCredentials"] = []
    with pytest.raises(PasskeyRefusedError, match="not registered to you"):
        await passkeys.verify_decision("carol", record, "approve", stranger.get(options))


async def test_a_registration_answering_another_challenge_is_refused(passkeys: PasskeyStepUp) -> None:
    options = await passkeys.registration_options("carol")
    with pytest.raises(PasskeyRefusedError, match="issued for something else"):
        await passkeys.register("dave", SoftAuthenticator(ORIGIN).create(options))
    forged = {**options, "challenge": "bm90LWlzc3VlZA"}
    with pytest.raises(PasskeyRefusedError, match="unknown, expired or already used"):
        await passkeys.register("carol", SoftAuthenticator(ORIGIN).create(forged))
    with pytest.raises(PasskeyRefusedError, match="could not be read"):
        await passkeys.register("carol", {"id": "x"})
    assert await passkeys.passkeys("carol") == []


async def test_deciding_without_a_passkey_registered_says_where_to_register(
    passkeys: PasskeyStepUp, backend: LocalApprovalBackend
) -> None:
    record = await backend.get_request(await submit(backend))
    assert record is not None
    with pytest.raises(PasskeyRefusedError, match="register one on the console's Passkeys page"):
        await passkeys.decision_options("carol", record, "approve")


def test_rules_without_step_up_keep_their_stored_text_and_step_up_rules_round_trip() -> None:
    plain = RequestRules.of(ApprovalTemplate())
    assert "step_up" not in plain.to_text()
    guarded = RequestRules.of(ApprovalTemplate(step_up="passkey"))
    assert RequestRules.from_text(guarded.to_text()) == guarded
    with pytest.raises(ValueError, match="unknown step-up"):
        RequestRules.from_text(guarded.to_text().replace('"passkey"', '"sms"'))


def test_an_unknown_step_up_in_a_file_names_the_file_and_the_field(tmp_path: Path) -> None:
    path = tmp_path / "reviewers.toml"
    path.write_text('[templates.payments]\nstep_up = "sms"\n')
    with pytest.raises(ConfigError, match=r"reviewers\.toml: templates\.payments\.step_up: Input should be 'passkey'"):
        load_config_file(path, ConfigFile)


DEPLOYMENT = '[policy]\ncedar = "p.cedar"\n[tools]\nmodule = "t.py"\n[templates.vault]\nstep_up = "passkey"\n'


@pytest.mark.parametrize(
    ("server", "named"),
    [
        ("", r"templates\.vault\.step_up: 'passkey' needs server\.base_url"),
        ('[server]\nbase_url = "https://10.0.0.7:8443"\n', r"templates\.vault\.step_up: .* not '10\.0\.0\.7'"),
        ('[server]\nbase_url = "http://[::1]:8000"\n', r"templates\.vault\.step_up: .* IP address"),
    ],
)
def test_a_passkey_template_needs_the_console_origin_as_a_domain(tmp_path: Path, server: str, named: str) -> None:
    path = tmp_path / "deploy.toml"
    path.write_text(server + DEPLOYMENT)
    with pytest.raises(ConfigError, match=r"deploy\.toml: .*" + named):
        load_config(path)


def test_a_passkey_template_with_a_domain_origin_loads(tmp_path: Path) -> None:
    path = tmp_path / "deploy.toml"
    path.write_text('[server]\nbase_url = "https://approvals.example.com"\n' + DEPLOYMENT)
    assert load_config(path).templates["vault"].step_up == "passkey"


async def test_slack_refuses_to_decide_a_step_up_request_and_points_to_the_console(
    backend: LocalApprovalBackend, database: Database
) -> None:
    await migrate(database, NOTIFY_MIGRATIONS)
    handle = await submit(backend)
    messages = ChatMessages(database, "slack-approvals")
    where = ChatMessage("C0APPROVALS", "1700000000.000100")
    await messages.remember(handle, where, 0)
    decider = SlackDecider(backend, messages, AsyncWebClient(token="xoxb-unused"), {"U0CAROL": "carol"})
    told: list[str] = []

    async def reply(text: str) -> None:
        told.append(text)

    for verdict in ("approve", "deny"):
        await decider.decide(Click("U0CAROL", handle, where), verdict, None, reply)  # type: ignore[arg-type]
    assert (
        told
        == [
            "Nothing was recorded: you may not decide this request (template 'guarded' requires a passkey for every "
            "decision: decide it with your passkey in the console)."
        ]
        * 2
    )
    record = await backend.get_request(handle)
    assert record is not None
    assert record.decisions == ()


async def test_a_step_up_request_is_posted_to_slack_without_decision_buttons(
    backend: LocalApprovalBackend, database: Database, clock: ManualClock
) -> None:
    await migrate(database, APPROVAL_MIGRATIONS)
    audit = AuditLog(database, clock)
    builder = MessageBuilder(backend, database, audit, "https://approvals.example.com")

    async def posted(template: str) -> tuple[dict[str, object], list[str], list[str]]:
        handle = await submit(backend, template=template)
        [event] = [e for e in await audit.events(subject=handle) if e.kind == "approval.submitted"]
        notification = await builder.build(event)
        assert notification is not None
        _text, blocks = request_message(notification)
        buttons = [e for b in blocks if b["type"] == "actions" for e in b["elements"]]
        return dict(notification.data), [b["action_id"] for b in buttons], [b["text"]["text"] for b in buttons]

    data, actions, labels = await posted("guarded")
    assert data["step_up"] == "passkey"
    assert actions == [OPEN]
    assert labels == ["Decide with your passkey in the console"]
    data, actions, _labels = await posted("plain")
    assert "step_up" not in data  # other templates' payloads are as they were
    assert data["similar_rules"] is True  # and, sealed and one approval, may be approved with a rule
    assert actions == [APPROVE, DENY, SIMILAR, OPEN]
