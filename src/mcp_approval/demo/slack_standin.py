"""A stand-in for Slack on 127.0.0.1: the Web API methods the Slack channel calls, and a user who clicks.

Slack cannot be reached from the demo (or a test), so this server answers as Slack's Web API
documents it (docs.slack.dev, "Web API methods"): each call is checked for the bot token
(``Authorization: Bearer``, else ``{"ok": false, "error": "invalid_auth"}``) and for the fields
and limits the method takes, and answered with the method's documented success shape:

- ``chat.postMessage`` → ``{"ok": true, "channel", "ts", "message"}`` (``channel_not_found`` for a
  conversation it does not hold, ``invalid_blocks`` for blocks over Block Kit's limits);
- ``chat.update`` → ``{"ok": true, "channel", "ts", "text", "message"}`` (``message_not_found``);
- ``chat.postEphemeral`` → ``{"ok": true, "message_ts"}``;
- ``views.open`` → ``{"ok": true, "view": {...}}``;
- ``users.info`` → ``{"ok": true, "user": {...}}`` (``user_not_found``);
- a click's ``response_url`` → ``{"ok": true}``.

Every call is recorded (:attr:`SlackStandIn.calls`), and each conversation's messages are kept
as last written. :meth:`SlackStandIn.click` plays a Slack user: it builds the interaction
payload Slack sends when a button of a kept message is clicked (``block_actions``) or the deny
dialog is submitted (``view_submission``), form-encodes it as ``payload=...``, signs it as Slack
does (``X-Slack-Signature: v0=`` HMAC-SHA256 of ``v0:{timestamp}:{body}`` under the signing
secret, ``X-Slack-Request-Timestamp``) and POSTs it to the app's Request URL.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx2

from mcp_approval.hosts import unused_loopback_port

__all__ = ["Call", "Interaction", "SlackStandIn", "SlackUser", "signed_headers"]

#: Block Kit's limits the stand-in holds messages to (docs.slack.dev, "Blocks").
_MAX_BLOCKS = 50
_MAX_FIELDS = 10
_MAX_ELEMENTS = 25
_TEXT_LIMITS = {"header": 150, "section": 3000, "field": 2000, "button": 75}


@dataclass(frozen=True)
class Call:
    """One request the stand-in received: the method (or ``response_url``), its arguments, its answer."""

    method: str
    arguments: dict[str, Any]
    answer: dict[str, Any]


@dataclass(frozen=True)
class SlackUser:
    """A member of the stand-in's workspace, as ``users.info`` shows them."""

    id: str
    name: str
    email: str | None = None
    email_confirmed: bool = True
    guest: bool = False

    def to_json(self, team: str) -> dict[str, Any]:
        profile: dict[str, Any] = {"real_name": self.name, "display_name": self.name}
        if self.email is not None:
            profile["email"] = self.email
        return {
            "id": self.id,
            "team_id": team,
            "name": self.name,
            "deleted": False,
            "real_name": self.name,
            "is_bot": False,
            "is_app_user": False,
            "is_restricted": self.guest,
            "is_ultra_restricted": False,
            "is_email_confirmed": self.email_confirmed,
            "profile": profile,
        }


@dataclass(frozen=True)
class Interaction:
    """One signed interaction request as sent, and the app's answer."""

    status: int
    seconds: float
    body: bytes
    headers: dict[str, str]
    answer: str


def signed_headers(secret: str, body: bytes, timestamp: int | None = None) -> dict[str, str]:
    """The headers Slack sends with ``body``: its timestamp and ``v0=`` signature under ``secret``."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    digest = hmac.new(secret.encode(), f"v0:{ts}:".encode() + body, hashlib.sha256).hexdigest()
    return {
        "content-type": "application/x-www-form-urlencoded",
        "x-slack-request-timestamp": ts,
        "x-slack-signature": f"v0={digest}",
    }


@dataclass
class SlackStandIn:
    """The stand-in server; :meth:`start` listens on a free loopback port in a thread of its own."""

    token: str
    signing_secret: str
    conversations: tuple[str, ...] = ("C0APPROVALS",)
    users: dict[str, SlackUser] = field(default_factory=dict)
    team: str = "T0STANDIN"
    port: int = field(default_factory=unused_loopback_port)
    calls: list[Call] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._messages: dict[tuple[str, str], dict[str, Any]] = {}
        self._views: dict[str, dict[str, Any]] = {}
        self._clock = itertools.count(1)
        self._server: ThreadingHTTPServer | None = None

    @property
    def api_url(self) -> str:
        """The ``api_url`` a channel points at to call this stand-in."""
        return f"http://127.0.0.1:{self.port}/api/"

    def start(self) -> SlackStandIn:
        """Listen in a daemon thread."""
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self._answer(self.rfile.read(int(self.headers.get("content-length", "0"))))

            def do_GET(self) -> None:
                self._answer(b"")

            def _answer(self, body: bytes) -> None:
                answer = stand_in.receive(self.path, dict(self.headers.items()), body)
                payload = json.dumps(answer).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json; charset=utf-8")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="slack-stand-in", daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop listening."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    # -- the Web API side ----------------------------------------------------------------------

    def receive(self, path: str, headers: Mapping[str, str], body: bytes) -> dict[str, Any]:
        """Answer one request (``/api/<method>`` or a ``response_url``) and record it."""
        parts = urlsplit(path)
        arguments = _arguments(parts.query, headers, body)
        if parts.path.startswith("/actions/"):
            return self._record("response_url", arguments | {"url": parts.path}, {"ok": True})
        method = parts.path.removeprefix("/api/")
        lowered = {key.lower(): value for key, value in headers.items()}
        if lowered.get("authorization") != f"Bearer {self.token}":
            return self._record(method, arguments, {"ok": False, "error": "invalid_auth"})
        handler = {
            "chat.postMessage": self._post_message,
            "chat.update": self._update,
            "chat.postEphemeral": self._post_ephemeral,
            "views.open": self._open_view,
            "users.info": self._user_info,
        }.get(method)
        answer = handler(arguments) if handler is not None else {"ok": False, "error": "unknown_method"}
        return self._record(method, arguments, answer)

    def _record(self, method: str, arguments: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self.calls.append(Call(method, arguments, answer))
        return answer

    def _ts(self) -> str:
        return f"{int(time.time())}.{next(self._clock):06d}"

    def _post_message(self, arguments: dict[str, Any]) -> dict[str, Any]:
        channel = arguments.get("channel")
        if channel not in self.conversations:
            return {"ok": False, "error": "channel_not_found"}
        problem = _message_problem(arguments)
        if problem is not None:
            return {"ok": False, "error": problem}
        ts = self._ts()
        message = {"type": "message", "subtype": "bot_message", "bot_id": "B0STANDIN", "ts": ts, **_content(arguments)}
        with self._lock:
            self._messages[(str(channel), ts)] = message
        return {"ok": True, "channel": channel, "ts": ts, "message": message}

    def _update(self, arguments: dict[str, Any]) -> dict[str, Any]:
        key = (str(arguments.get("channel")), str(arguments.get("ts")))
        problem = _message_problem(arguments)
        if problem is not None:
            return {"ok": False, "error": problem}
        with self._lock:
            if key not in self._messages:
                return {"ok": False, "error": "message_not_found"}
            self._messages[key] = self._messages[key] | _content(arguments) | {"edited": {"ts": self._ts()}}
            message = self._messages[key]
        return {"ok": True, "channel": key[0], "ts": key[1], "text": message.get("text", ""), "message": message}

    def _post_ephemeral(self, arguments: dict[str, Any]) -> dict[str, Any]:
        if arguments.get("channel") not in self.conversations:
            return {"ok": False, "error": "channel_not_found"}
        if arguments.get("user") not in self.users:
            return {"ok": False, "error": "user_not_in_channel"}
        return {"ok": True, "message_ts": self._ts()}

    def _open_view(self, arguments: dict[str, Any]) -> dict[str, Any]:
        view = arguments.get("view")
        if not isinstance(view, dict) or view.get("type") != "modal" or not arguments.get("trigger_id"):
            return {"ok": False, "error": "invalid_arguments"}
        view_id = f"V{next(self._clock):08d}"
        opened = view | {"id": view_id, "team_id": self.team, "state": {"values": {}}, "hash": f"h{view_id}"}
        with self._lock:
            self._views[str(arguments["trigger_id"])] = opened
        return {"ok": True, "view": opened}

    def _user_info(self, arguments: dict[str, Any]) -> dict[str, Any]:
        user = self.users.get(str(arguments.get("user")))
        if user is None:
            return {"ok": False, "error": "user_not_found"}
        return {"ok": True, "user": user.to_json(self.team)}

    # -- what a test or the demo reads -----------------------------------------------------------

    def called(self, method: str) -> list[Call]:
        """The calls of ``method`` so far (``response_url`` for replies through one)."""
        with self._lock:
            return [call for call in self.calls if call.method == method]

    def messages(self, channel: str | None = None) -> list[dict[str, Any]]:
        """The messages kept, as last written, oldest first."""
        with self._lock:
            return [dict(m) | {"channel": c} for (c, _), m in self._messages.items() if channel in (None, c)]

    def replies_to(self, user: str) -> list[str]:
        """The texts only ``user`` was shown (ephemeral replies), in order."""
        with self._lock:
            calls = list(self.calls)
        ephemeral = ("chat.postEphemeral", user)
        return [
            str(call.arguments.get("text"))
            for call in calls
            if (call.method, call.arguments.get("user")) == ephemeral
            or (call.method == "response_url" and str(call.arguments.get("url", "")).endswith(f"/{user}"))
        ]

    # -- a Slack user clicking ------------------------------------------------------------------

    def block_actions(self, user: str, message: Mapping[str, Any], action_id: str) -> dict[str, Any]:
        """The ``block_actions`` payload Slack sends when ``user`` clicks ``action_id`` on ``message``."""
        action = next(
            e for b in message["blocks"] if b["type"] == "actions" for e in b["elements"] if e["action_id"] == action_id
        )
        trigger = f"{next(self._clock)}.{self.team}.trigger"
        clicked = {"type": "button", "block_id": "decide", "action_ts": self._ts(), **action}
        return {
            "type": "block_actions",
            "team": {"id": self.team, "domain": "standin"},
            "user": {"id": user, "username": user.lower(), "team_id": self.team},
            "api_app_id": "A0STANDIN",
            "token": "deprecated-verification-token",
            "container": {
                "type": "message",
                "message_ts": message["ts"],
                "channel_id": message["channel"],
                "is_ephemeral": False,
            },
            "trigger_id": trigger,
            "channel": {"id": message["channel"], "name": "approvals"},
            "message": {k: v for k, v in message.items() if k != "channel"},
            "response_url": f"http://127.0.0.1:{self.port}/actions/{self.team}/{next(self._clock)}/{user}",
            "actions": [clicked],
        }

    def view_submission(
        self, user: str, trigger_id: str, comment: str | None, entered: Mapping[str, Mapping[str, Any]] | None = None
    ) -> dict[str, Any]:
        """The ``view_submission`` payload of the dialog opened with ``trigger_id``: each input the
        state ``entered`` gives it by ``block_id`` (``{"value": "5"}``, ``{"selected_option": {...}}``),
        any other text input ``comment``."""
        with self._lock:
            view = dict(self._views[trigger_id])
        inputs = [b for b in view["blocks"] if b["type"] == "input"]
        given = entered or {}
        values = {
            b["block_id"]: {
                b["element"]["action_id"]: {"type": b["element"]["type"], **given[b["block_id"]]}
                if b["block_id"] in given
                else {"type": "plain_text_input", "value": comment}
            }
            for b in inputs
        }
        return {
            "type": "view_submission",
            "team": {"id": self.team, "domain": "standin"},
            "user": {"id": user, "username": user.lower(), "team_id": self.team},
            "api_app_id": "A0STANDIN",
            "token": "deprecated-verification-token",
            "trigger_id": f"{next(self._clock)}.{self.team}.trigger",
            "view": view | {"state": {"values": values}},
            "response_urls": [],
        }

    def send(self, url: str, payload: Mapping[str, Any], *, timestamp: int | None = None) -> Interaction:
        """POST ``payload`` to the Request URL ``url`` as Slack does: form-encoded and signed."""
        body = urlencode({"payload": json.dumps(payload)}).encode()
        return self.post(url, body, signed_headers(self.signing_secret, body, timestamp))

    def post(self, url: str, body: bytes, headers: Mapping[str, str]) -> Interaction:
        """POST ``body`` with ``headers`` as they are (a forged or replayed request, say), timed."""
        started = time.monotonic()
        response = httpx2.post(url, content=body, headers=dict(headers), timeout=30.0)
        seconds = time.monotonic() - started
        return Interaction(response.status_code, seconds, body, dict(headers), response.text)


def _arguments(query: str, headers: Mapping[str, str], body: bytes) -> dict[str, Any]:
    """A call's arguments: its JSON body, or its form or query fields."""
    kind = {key.lower(): value for key, value in headers.items()}.get("content-type", "")
    if body and "json" in kind:
        value = json.loads(body)
        return value if isinstance(value, dict) else {}
    fields = parse_qs(body.decode() if body else query)
    return {name: values[0] for name, values in fields.items()}


def _content(arguments: Mapping[str, Any]) -> dict[str, Any]:
    return {"text": arguments.get("text", ""), "blocks": arguments.get("blocks", [])}


def _message_problem(arguments: Mapping[str, Any]) -> str | None:
    """Why Slack would refuse the message's content, or ``None``."""
    blocks = arguments.get("blocks", [])
    if not arguments.get("text") and not blocks:
        return "no_text"
    if not isinstance(blocks, list) or len(blocks) > _MAX_BLOCKS:
        return "invalid_blocks"
    for block in blocks:
        if not _block_fits(block):
            return "invalid_blocks"
    return None


def _block_fits(block: Any) -> bool:
    kind = block.get("type") if isinstance(block, dict) else None
    if kind == "header":
        return _text_fits(block.get("text"), _TEXT_LIMITS["header"], plain=True)
    if kind == "section":
        fields = block.get("fields", [])
        text_ok = "text" not in block or _text_fits(block["text"], _TEXT_LIMITS["section"])
        return text_ok and len(fields) <= _MAX_FIELDS and all(_text_fits(f, _TEXT_LIMITS["field"]) for f in fields)
    if kind == "context":
        return 0 < len(block.get("elements", [])) <= 10
    if kind == "actions":
        elements = block.get("elements", [])
        return 0 < len(elements) <= _MAX_ELEMENTS and all(_button_fits(e) for e in elements)
    return False


def _button_fits(element: Any) -> bool:
    if not isinstance(element, dict) or element.get("type") != "button" or not element.get("action_id"):
        return False
    if not _text_fits(element.get("text"), _TEXT_LIMITS["button"], plain=True):
        return False
    return len(str(element.get("value", ""))) <= 2000 and len(str(element.get("url", ""))) <= 3000


def _text_fits(text: Any, limit: int, *, plain: bool = False) -> bool:
    if not isinstance(text, dict) or not isinstance(text.get("text"), str) or not text["text"]:
        return False
    kinds = ("plain_text",) if plain else ("plain_text", "mrkdwn")
    return text.get("type") in kinds and len(text["text"]) <= limit
