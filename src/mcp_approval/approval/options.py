"""Options of the tool-approval enforcement point: the ``[approval]`` section of a deployment file.

One model serves code and file alike: ``ApprovalOptions(max_generations=5)`` and
``[approval] max_generations = 5`` are validated by the same rules, with the same message.
Secrets (``binding_keys``, ``callback_secret``) are :class:`~pydantic.SecretStr` and print as
``**********``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal
from urllib.parse import quote, urlsplit

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from mcp_approval.hosts import is_loopback_host
from mcp_approval.keyring import BindingCipher

__all__ = [
    "APPROVAL_ID_PLACEHOLDER",
    "REQUEST_TOKEN_PLACEHOLDER",
    "ApprovalOptions",
    "check_approval_url",
    "valid_approval_url",
    "valid_requester_url",
]


#: Where the approval's id goes in ``ApprovalOptions.approval_url``.
APPROVAL_ID_PLACEHOLDER = "{approval_id}"
#: Where a request's unguessable page token goes in ``ApprovalOptions.requester_url``.
REQUEST_TOKEN_PLACEHOLDER = "{request_token}"  # noqa: S105 (a placeholder, not a secret)


def check_approval_url(url: str, *, field_name: str, placeholder: str = APPROVAL_ID_PLACEHOLDER) -> None:
    """Refuse an approval page URL that could leak a link over plain HTTP or name no approval.

    The rules: an absolute ``https`` URL (``http`` only when the host is a loopback address or
    ``localhost``), no user or password in it, and ``{approval_id}`` in its path, query or
    fragment (never in the host). ``placeholder`` is ``{request_token}`` for ``requester_url``.

    Raises:
        ValueError: naming ``field_name`` and the rule broken.
    """
    if not isinstance(url, str) or not url.strip():
        raise ValueError(f"{field_name} must be a URL string, got {url!r}")
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError as exc:
        raise ValueError(f"{field_name} is not a valid URL ({exc}): {url!r}") from None
    if parts.scheme not in ("https", "http") or not host:
        raise ValueError(f"{field_name} must be an absolute https URL (http only on a loopback host): {url!r}")
    if parts.scheme == "http" and not is_loopback_host(host):
        raise ValueError(f"{field_name} must be https; http is allowed only on a loopback host, not {host!r}")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"{field_name} must not carry a user name or password: {url!r}")
    if placeholder in parts.netloc:
        raise ValueError(f"{field_name}: {placeholder} may not be part of the host: {url!r}")
    if placeholder not in url:
        raise ValueError(f"{field_name} must contain {placeholder} where the {_WHAT[placeholder]} goes: {url!r}")


_WHAT = {APPROVAL_ID_PLACEHOLDER: "approval's id", REQUEST_TOKEN_PLACEHOLDER: "request's page token"}


def valid_approval_url(url: str | None) -> str | None:
    """``url`` unchanged once :func:`check_approval_url` accepts it (``None``: no approval page).

    The ``approval_url`` validator of :class:`ApprovalOptions` and of older files' ``[tasks]`` place.
    """
    if url is not None:
        check_approval_url(url, field_name="approval_url")
    return url


def valid_requester_url(url: str | None) -> str | None:
    """``url`` unchanged once it passes the ``approval_url`` rules with ``{request_token}`` (``None``: no page)."""
    if url is not None:
        check_approval_url(url, field_name="requester_url", placeholder=REQUEST_TOKEN_PLACEHOLDER)
    return url


class ApprovalOptions(BaseModel):
    """How :class:`~mcp_approval.approval.ToolApproval` runs (``[approval]`` in a deployment file).

    Every field has a safe default except the call-binding key: set ``binding_keys`` (or
    ``binding_key_file``), or, for development only, ``ephemeral_binding_key = True``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: How long a terminal approval task's result stays retrievable.
    result_retention_s: float = Field(default=86_400.0, gt=0)
    #: The longest pending window accepted from a policy or backend (a later deadline is cut).
    max_pending_s: float = Field(default=7 * 86_400.0, gt=0)
    #: The request deadline when the policy sets none.
    default_deadline_s: float = Field(default=86_400.0, gt=0)
    #: An execution still unconfirmed this long after its claim ends ``outcome-unknown``.
    execution_deadline_s: float = Field(default=300.0, gt=0)
    #: Chained approval requests per task before it ends as a denial.
    max_generations: int = Field(default=3, ge=1)
    #: Approval submissions one principal may make per minute (then a non-requestable denial).
    submissions_per_minute: int = Field(default=30, ge=1)
    #: Pending approval tasks one principal may hold at once.
    max_pending_per_principal: int = Field(default=50, ge=1)
    #: How often a pending request's backend status is fetched.
    poll_interval_s: float = Field(default=2.0, gt=0)
    #: With a backend that reports its changes (the local backend's change feed, read every pass),
    #: how often a pending request's status is fetched all the same, should a change have been
    #: missed. Never more often than ``poll_interval_s``.
    fallback_poll_interval_s: float = Field(default=60.0, gt=0)
    #: Read the backend's change feed every driver pass, when it offers one (the local backend
    #: does); ``false`` polls each pending request every ``poll_interval_s`` instead.
    follow_changes: bool = True
    #: The ``pollIntervalMs`` suggested to clients on approval tasks (the composition sets it from
    #: ``[tasks] poll_interval_s`` when it is not given).
    task_poll_interval_s: float = Field(default=2.0, gt=0)
    #: Requestable denials of clients that did not declare tasks: ``request`` (open a real approval
    #: request under the same rules as a task-backed one; the answer is ``isError`` + ``undisclosed``
    #: naming its reference and deadline, and the identical retry takes its outcome once),
    #: ``degraded`` (``isError`` + ``undisclosed`` + guidance, nothing opened) or ``error`` (-32021).
    without_tasks: Literal["request", "degraded", "error"] = "degraded"
    #: An intent with no task that its worker has not renewed for this long is a crash leftover and is
    #: reconciled (a worker never reconciles its own creations in flight).
    intent_grace_s: float = Field(default=30.0, ge=0)
    #: How long a worker holds a workflow it checks or executes before another may take over.
    lease_s: float = Field(default=15.0, gt=0)
    #: The cap of the exponential backoff of ``retry`` re-evaluations.
    max_retry_backoff_s: float = Field(default=60.0, gt=0)
    #: Per approval template, the text fields the requester supplies before submission (an MRTR
    #: ``input_required`` round on the ``tools/call``). In a deployment file, ``[templates.NAME] inputs``.
    submission_inputs: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    #: Templates whose inputs are asked inside the task instead (it starts ``input_required`` and is
    #: submitted once ``tasks/update`` answers). In a file, ``[templates.NAME] collect_inputs = "during"``.
    inputs_in_task: frozenset[str] = frozenset()
    #: The page where reviewers decide an approval, with ``{approval_id}`` where its id goes; https
    #: (http only on loopback). An approval task created by a request that declared URL elicitation
    #: starts ``input_required`` with one url-mode elicitation naming that page. The link is only a
    #: pointer: answering it never approves, the backend still decides. ``None``: no link.
    approval_url: str | None = None
    #: The page where a requester follows its own request made without tasks, with
    #: ``{request_token}`` where the request's unguessable page token goes; the same rules as
    #: ``approval_url``. With ``without_tasks = "request"``, a client that declared URL elicitation
    #: (but not tasks) is sent there: on 2026-07-28 an ``input_required`` result with a url-mode
    #: elicitation and a sealed ``requestState``, on 2025-11-25 the ``-32042`` error. The page shows
    #: the request's status and, once decided, its outcome; never who reviews it. ``None``: no page.
    requester_url: str | None = None
    #: Call-binding encryption keys, key id → base64 of 32 bytes; the first one seals new records.
    binding_keys: dict[str, SecretStr] = Field(default_factory=dict)
    #: A TOML file holding such keys (``key_id = "base64"``), instead of inline (in a deployment
    #: file, relative to that file).
    binding_key_file: Path | None = None
    #: Development only: with no key set, seal call bindings with a key made up at start (pending
    #: approvals then do not survive a restart). ``[server] dev_mode`` implies it.
    ephemeral_binding_key: bool = False
    #: Shared secret authenticating backend callbacks (HMAC-SHA256) at ``/approvals/callback``.
    callback_secret: SecretStr | None = None
    #: The longest ``POST /mcp`` body accepted, in bytes; a longer one is answered HTTP 413
    #: (``application/problem+json``) before it is parsed.
    max_request_bytes: int = Field(default=1024 * 1024, ge=1024)
    #: The longest ``tools/call`` arguments accepted, in bytes of compact JSON (else ``-32602``).
    max_argument_bytes: int = Field(default=512 * 1024, ge=64)
    #: The most members (object members plus array items, at every level) ``tools/call``
    #: arguments may have (else ``-32602``, before policy, binding or storage see them).
    max_argument_members: int = Field(default=10_000, ge=1)
    #: The deepest nesting of objects and arrays in ``tools/call`` arguments (the arguments
    #: object itself is level 1; else ``-32602``).
    max_argument_depth: int = Field(default=32, ge=1, le=64)

    _check_approval_url = field_validator("approval_url")(valid_approval_url)
    _check_requester_url = field_validator("requester_url")(valid_requester_url)

    @field_validator("binding_keys")
    @classmethod
    def _usable_keys(cls, keys: dict[str, SecretStr]) -> dict[str, SecretStr]:
        if keys:  # the composition refuses no key at all, unless ephemeral_binding_key
            BindingCipher.from_base64({key_id: key.get_secret_value() for key_id, key in keys.items()})
        return keys

    def approval_link(self, approval_id: str) -> str | None:
        """``approval_url`` with ``approval_id`` filled in (percent-encoded), or ``None`` when unset."""
        if self.approval_url is None:
            return None
        return self.approval_url.replace(APPROVAL_ID_PLACEHOLDER, quote(approval_id, safe=""))

    def requester_link(self, token: str) -> str | None:
        """``requester_url`` with ``token`` filled in (percent-encoded), or ``None`` when unset."""
        if self.requester_url is None:
            return None
        return self.requester_url.replace(REQUEST_TOKEN_PLACEHOLDER, quote(token, safe=""))
