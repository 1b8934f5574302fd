"""Slack's interactivity requests: ``POST /channels/<channel name>/interactions`` (the app's Request URL).

Every request is checked before anything is read from it: its body at most 64 KiB, its
``X-Slack-Signature`` the HMAC-SHA256 of ``v0:{X-Slack-Request-Timestamp}:{body}`` under the
app's signing secret, and its timestamp within five minutes of the server's clock
(``slack_sdk.signature.SignatureVerifier``); anything else is a ``401`` and nothing is decided.
Each signature is accepted once by every worker on the store (a
:class:`~mcp_approval.storage.OnceGuard`): a replay is a ``401`` too.

Then Bolt for Python (``slack_bolt``'s ``AsyncApp``, which checks the signature again) routes
the payload to its listener, which acknowledges at once, so Slack has its answer within its 3
seconds, and decides in the background (:class:`~mcp_approval.notify.slack_deciding.SlackDecider`):

- **Approve** records an approval;
- **Deny…** opens a dialog (``views.open``) asking for a comment; submitting it records the denial;
- **Approve similar…** opens a dialog (:mod:`~mcp_approval.notify.slack_similar`) for a
  similar-call rule; submitting it approves the request with that rule;
- **Open in the console** only opens the request's page.

The result is told to the clicking user alone (an ephemeral message: through the click's
``response_url``, or ``chat.postEphemeral`` after the dialog). The request's message itself is
rewritten by the notification outbox, from the audit events each decision writes. The one step
before the answer that needs the store, remembering the signature, has a second at most: if
the store does not answer by then, Slack still gets its answer and the user is told nothing was
recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Coroutine, Mapping
from typing import Any, Final, Literal, Protocol
from urllib.parse import parse_qs

from slack_bolt.async_app import AsyncApp, AsyncBoltRequest
from slack_bolt.authorization import AuthorizeResult
from slack_sdk.signature import Clock as SignatureClock
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mcp_approval.clock import Clock, SystemClock
from mcp_approval.notify.chat_messages import ChatMessage
from mcp_approval.notify.slack_blocks import APPROVE, DENY, DENY_CALLBACK, DENY_INPUT, OPEN, SIMILAR, deny_dialog
from mcp_approval.notify.slack_deciding import NOT_RECORDED, Click, Reply, SlackDecider
from mcp_approval.notify.slack_similar import SIMILAR_CALLBACK, similar_dialog, similar_submission
from mcp_approval.reviewers.limits import MAX_COMMENT_CHARS
from mcp_approval.storage.worker_guards import OnceGuard
from mcp_approval.web.bodies import BodyTooLargeError, JsonBodyError, parse_json_body, read_body

__all__ = ["INTERACTIONS_PATH", "MAX_INTERACTION_BYTES", "SlackInteractions", "interaction_paths", "interactions_route"]

_log = logging.getLogger(__name__)

#: Where Slack sends a channel's interactions (``{channel}``: its name under [notifications.channels]).
INTERACTIONS_PATH: Final = "/channels/{channel}/interactions"
#: The largest interaction body accepted (a click carries the message it was made on).
MAX_INTERACTION_BYTES: Final = 64 * 1024
#: How far Slack's timestamp may be from the server's clock (Slack's own rule).
_FRESH_S: Final = 300
#: The longest the answer to Slack waits for the store to remember a signature.
_GUARD_BUDGET_S: Final = 1.0
#: How long a stopping server lets decisions in flight finish.
_STOP_GRACE_S: Final = 5.0


class _Handler(Protocol):
    async def handle(self, request: Request) -> Response: ...


class _Clock(SignatureClock):
    """The deployment's clock, as the signature verifier reads time."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock

    def now(self) -> float:
        return self._clock.now_ms() / 1000


class SlackInteractions:
    """Verifies one Slack channel's interaction requests and has Bolt route them.

    Args:
        name: the channel's name.
        signing_secret: the Slack app's signing secret.
        client: the Web API client (``views.open``, ``chat.postEphemeral``).
        decider: decides verified clicks.
        once: remembers accepted signatures (shared by the workers on the store).
        clock: the time signatures are checked against.
    """

    def __init__(
        self,
        name: str,
        signing_secret: str,
        client: AsyncWebClient,
        decider: SlackDecider,
        once: OnceGuard,
        clock: Clock | None = None,
    ) -> None:
        if not signing_secret.strip():
            raise ValueError("signing_secret_file: a Slack channel needs its app's signing secret")
        self.name = name
        self._clock = clock or SystemClock()
        self._verifier = SignatureVerifier(signing_secret, clock=_Clock(self._clock))
        self._client = client
        self._decider = decider
        self._once = once
        self._running: set[asyncio.Task[None]] = set()
        self._app = self._bolt_app(signing_secret, client)

    def _bolt_app(self, signing_secret: str, client: AsyncWebClient) -> AsyncApp:
        token = client.token

        async def authorize(enterprise_id: str | None, team_id: str | None) -> AuthorizeResult:
            # One workspace and one bot token: no auth.test round trip before the answer to Slack.
            return AuthorizeResult(enterprise_id=enterprise_id, team_id=team_id, bot_token=token)

        app = AsyncApp(
            name=f"mcp-approval:{self.name}",
            logger=logging.getLogger(f"{__name__}.bolt"),
            signing_secret=signing_secret,
            client=client,
            authorize=authorize,
            process_before_response=False,
            ssl_check_enabled=False,
            url_verification_enabled=False,
            ignoring_self_events_enabled=False,
        )
        app.action(APPROVE)(self._approve)
        app.action(DENY)(self._deny_clicked)
        app.action(OPEN)(self._opened)
        app.view(DENY_CALLBACK)(self._deny_submitted)
        app.action(SIMILAR)(self._similar_clicked)
        app.view(SIMILAR_CALLBACK)(self._similar_submitted)
        return app

    async def handle(self, request: Request) -> Response:
        """Answer one interaction request (see the module's description)."""
        try:
            body = await read_body(request, MAX_INTERACTION_BYTES)
        except BodyTooLargeError:
            return JSONResponse({"error": "body too large"}, 413)
        if not self._signed(body, request):
            _log.warning("slack channel %r: an interaction without a valid, fresh signature was refused", self.name)
            return JSONResponse({"error": "invalid request"}, 401)
        payload = _payload(body)
        if payload is None:
            return JSONResponse({"error": "not an interaction payload"}, 400)
        first = await self._first_use(
            request.headers["x-slack-signature"], request.headers["x-slack-request-timestamp"]
        )
        if first is False:
            _log.warning("slack channel %r: a replayed interaction was refused", self.name)
            return JSONResponse({"error": "replayed request"}, 401)
        if first is None:  # the store did not answer in time: nothing is decided, the user is told
            self._spawn(self._tell_unrecorded(payload))
            return Response(status_code=200)
        answer = await self._app.async_dispatch(
            AsyncBoltRequest(body=body.decode("utf-8"), headers=dict(request.headers.items()))
        )
        return Response(answer.body, answer.status, headers=answer.first_headers_without_set_cookie())

    def _signed(self, body: bytes, request: Request) -> bool:
        timestamp = request.headers.get("x-slack-request-timestamp", "")
        signature = request.headers.get("x-slack-signature", "")
        if not (timestamp.isascii() and timestamp.isdigit() and len(timestamp) < 12) or not signature:
            return False
        return self._verifier.is_valid(body, timestamp, signature)

    async def _first_use(self, signature: str, timestamp: str) -> bool | None:
        """Whether ``signature`` is new; ``None`` when the store could not say within the budget."""
        now = self._clock.now_ms()
        expires = (max(int(timestamp), now // 1000) + 2 * _FRESH_S) * 1000
        try:
            return await asyncio.wait_for(
                self._once.first_use(f"slack:{self.name}:{signature}", now, expires), _GUARD_BUDGET_S
            )
        except Exception as exc:  # down, busy or slow: fail closed, decide nothing
            _log.warning(
                "slack channel %r: the store did not remember an interaction (%s)", self.name, type(exc).__name__
            )
            return None

    # -- Bolt listeners (each acknowledges first: Slack's answer never waits for the store) ------

    async def _approve(self, ack: Any, body: dict[str, Any], respond: Any) -> None:
        await ack()
        click = _click(body)
        if click is not None:
            self._spawn(self._decider.decide(click, "approve", None, _responder(respond)))

    async def _deny_clicked(self, ack: Any, body: dict[str, Any], respond: Any) -> None:
        await ack()
        click = _click(body)
        if click is not None:
            self._spawn(self._open_dialog(click, str(body.get("trigger_id", "")), _responder(respond)))

    async def _opened(self, ack: Any) -> None:
        await ack()  # a link button: Slack opens the page, the server only acknowledges

    async def _deny_submitted(self, ack: Any, body: dict[str, Any], view: dict[str, Any]) -> None:
        comment = _comment(view)
        if comment is not None and (len(comment) > MAX_COMMENT_CHARS or "\x00" in comment):
            await ack(response_action="errors", errors={DENY_INPUT: f"At most {MAX_COMMENT_CHARS} characters."})
            return
        await ack()
        click = _dialog_click(body, view)
        if click is not None:
            reply = self._ephemeral(click)
            self._spawn(self._decider.decide(click, "deny", comment, reply))

    async def _similar_clicked(self, ack: Any, body: dict[str, Any], respond: Any) -> None:
        await ack()
        click = _click(body)
        if click is not None:
            self._spawn(self._open_similar(click, str(body.get("trigger_id", "")), _responder(respond)))

    async def _similar_submitted(self, ack: Any, body: dict[str, Any], view: dict[str, Any]) -> None:
        asked = similar_submission(view)
        if isinstance(asked, dict):  # shown on the dialog's inputs; nothing is decided
            await ack(response_action="errors", errors=asked)
            return
        await ack()
        click = _dialog_click(body, view)
        if click is not None:
            self._spawn(self._decider.approve_similar(click, asked[0], asked[1], self._ephemeral(click)))

    async def _open_similar(self, click: Click, trigger_id: str, reply: Reply) -> None:
        found = await self._decider.similar_limits(click, reply)
        if found is None:
            return
        record, limits = found
        where = {"conversation": click.where.conversation, "message": click.where.message}
        view = similar_dialog(click.request_id, record.tool, record.requester, limits, where)
        try:
            await self._client.views_open(trigger_id=trigger_id, view=view)
        except Exception as exc:  # as for the deny dialog
            _log.warning("slack channel %r: views.open failed (%s)", self.name, type(exc).__name__)
            await reply("The dialog could not be opened; nothing was recorded. Click Approve similar… again.")

    async def _open_dialog(self, click: Click, trigger_id: str, reply: Reply) -> None:
        if not await self._decider.may_deny(click, reply):
            return
        where = {"conversation": click.where.conversation, "message": click.where.message}
        try:
            await self._client.views_open(
                trigger_id=trigger_id, view=deny_dialog(click.request_id, "Deny this request?", where)
            )
        except Exception as exc:  # an expired trigger, Slack down: the user may click again
            _log.warning("slack channel %r: views.open failed (%s)", self.name, type(exc).__name__)
            await reply("The deny dialog could not be opened; nothing was recorded. Click Deny again.")

    def _ephemeral(self, click: Click) -> Reply:
        """Tell ``click``'s user alone, in the message's conversation (a dialog has no ``response_url``)."""
        client, name = self._client, self.name

        async def tell(text: str) -> None:
            try:
                await client.chat_postEphemeral(channel=click.where.conversation, user=click.user, text=text)
            except Exception as exc:  # the decision stands (or not) whatever the telling does
                _log.warning("slack channel %r: chat.postEphemeral failed (%s)", name, type(exc).__name__)

        return tell

    async def _tell_unrecorded(self, payload: dict[str, Any]) -> None:
        click = _click(payload) or _dialog_click(payload, payload.get("view") or {})
        url = payload.get("response_url")
        if isinstance(url, str) and url:
            await _responder_url(url)(NOT_RECORDED)
        elif click is not None:
            await self._ephemeral(click)(NOT_RECORDED)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def aclose(self) -> None:
        """Let the decisions in flight finish (for a few seconds), then cancel what is left."""
        running = list(self._running)
        if running:
            _, pending = await asyncio.wait(running, timeout=_STOP_GRACE_S)
            for task in pending:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task


def interactions_route(channels: Mapping[str, _Handler]) -> Route:
    """``POST /channels/{channel}/interactions`` for the named Slack channels (another name is a 404)."""

    async def interactions(request: Request) -> Response:
        handler = channels.get(request.path_params["channel"])
        if handler is None:
            return JSONResponse({"error": "no such Slack channel"}, 404)
        return await handler.handle(request)

    return Route(INTERACTIONS_PATH, interactions, methods=["POST"])


def interaction_paths() -> dict[str, Any]:
    """The OpenAPI path item of :func:`interactions_route`."""
    error = {"content": {"application/json": {"schema": {"type": "object"}}}}
    answers = {
        "200": {"description": "acknowledged: the click is decided in the background, the user told the result"},
        "400": {"description": "not an interaction payload", **error},
        "401": {"description": "signature missing, invalid or stale, or a replay", **error},
        "404": {"description": "no Slack channel of that name", **error},
        "413": {"description": "body too large", **error},
    }
    form = {"type": "object", "properties": {"payload": {"type": "string"}}, "required": ["payload"]}
    return {
        INTERACTIONS_PATH: {
            "post": {
                "summary": "Slack's interactivity requests (button clicks, the deny dialog), signed by Slack",
                "parameters": [
                    {"name": "channel", "in": "path", "required": True, "schema": {"type": "string"}},
                    {"name": "X-Slack-Signature", "in": "header", "schema": {"type": "string"}},
                    {"name": "X-Slack-Request-Timestamp", "in": "header", "schema": {"type": "string"}},
                ],
                "requestBody": {"required": True, "content": {"application/x-www-form-urlencoded": {"schema": form}}},
                "responses": answers,
            }
        }
    }


def _payload(body: bytes) -> dict[str, Any] | None:
    """The ``payload=`` JSON object of a form-encoded body, or ``None``."""
    try:
        fields = parse_qs(body.decode("utf-8"), max_num_fields=4, errors="strict")
        texts = fields.get("payload", [])
        if len(texts) != 1:
            return None
        value = parse_json_body(texts[0])
    except (UnicodeDecodeError, ValueError, JsonBodyError):
        return None
    return value if isinstance(value, dict) else None


def _click(body: Mapping[str, Any]) -> Click | None:
    """The click of a ``block_actions`` payload, or ``None`` when it lacks a part."""
    user, actions, container = body.get("user"), body.get("actions"), body.get("container")
    if not (isinstance(user, dict) and isinstance(actions, list) and actions and isinstance(container, dict)):
        return None
    action = actions[0]
    parts = (user.get("id"), action.get("value") if isinstance(action, dict) else None)
    where = (container.get("channel_id"), container.get("message_ts"))
    if not all(isinstance(part, str) and part for part in (*parts, *where)):
        return None
    return Click(str(parts[0]), str(parts[1]), ChatMessage(str(where[0]), str(where[1])))


def _dialog_click(body: Mapping[str, Any], view: Mapping[str, Any]) -> Click | None:
    """The click a submitted deny dialog stands for (its ``private_metadata``), or ``None``."""
    user = body.get("user")
    try:
        metadata = json.loads(str(view.get("private_metadata", "")))
    except ValueError:
        return None
    if not (isinstance(user, dict) and isinstance(metadata, dict)):
        return None
    parts = (user.get("id"), metadata.get("request_id"), metadata.get("conversation"), metadata.get("message"))
    if not all(isinstance(part, str) and part for part in parts):
        return None
    return Click(str(parts[0]), str(parts[1]), ChatMessage(str(parts[2]), str(parts[3])))


def _comment(view: Mapping[str, Any]) -> str | None:
    """The deny dialog's comment (``None`` when left empty)."""
    values = view.get("state", {}).get("values", {})
    entered = values.get(DENY_INPUT, {}).get(DENY_INPUT, {}).get("value") if isinstance(values, dict) else None
    text = entered.strip() if isinstance(entered, str) else ""
    return text or None


def _responder(respond: Any) -> Reply:
    """Bolt's ``respond`` (the click's ``response_url``), as an ephemeral reply that never raises."""

    async def tell(text: str) -> None:
        try:
            await respond(text=text, response_type="ephemeral", replace_original=False)
        except Exception as exc:  # the user is not told; the decision stands (or not) all the same
            _log.warning("slack: the response_url did not take a reply (%s)", type(exc).__name__)

    return tell


def _responder_url(url: str) -> Reply:
    """An ephemeral reply through ``url`` (a ``response_url``) without Bolt (nothing was dispatched)."""
    hook = AsyncWebhookClient(url)
    kind: Literal["ephemeral"] = "ephemeral"

    async def tell(text: str) -> None:
        try:
            await hook.send(text=text, response_type=kind, replace_original=False)
        except Exception as exc:  # as in _responder
            _log.warning("slack: the response_url did not take a reply (%s)", type(exc).__name__)

    return tell
