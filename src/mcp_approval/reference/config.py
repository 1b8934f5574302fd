"""The configuration ``mcp-approval arap-server --config FILE`` reads (TOML).

It reuses the deployment file's sections for what the two share (``[store]``, ``[policy]``,
``[approval]`` of which only ``redact_arguments`` is read, ``[[principals]]`` as reviewers,
``[templates.NAME]``, ``[[resolvers]]``) and adds ``[arap]``. It has no ``[tools]``, which is how
``mcp-approval review --config`` tells it from a deployment file. Paths are relative to the file::

    [store]
    url = "sqlite:///arap.db"

    [policy]
    cedar = "policy.cedar"
    entities = "entities.json"

    [arap]
    base_url = "https://pdp.example.com"   # the PDP identifier; the CLI default is http://127.0.0.1:PORT
    dev_mode = false                       # true: http on loopback, loopback callbacks, ephemeral key
    signing_key_file = "arap-signing-key.pem"
    key_id = "arap-1"
    binding_context_members = ["arguments"]
    callback_secret = "..."
    callback_allowlist = ["https://mcp.example.com"]

    [[arap.clients]]                       # PEPs allowed to submit Access Requests
    id = "treasury-mcp"
    token = "..."

    [[principals]]                         # reviewers (and requesters' roles)
    token = "carol-token"
    id = "carol"
    roles = ["approver"]
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from mcp_approval.config import (
    ApprovalSection,
    ConfigError,
    PolicySection,
    PrincipalEntry,
    ResolverEntry,
    StoreSection,
    TemplateSection,
)


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ClientEntry(_Section):
    """``[[arap.clients]]``: a PEP (e.g. an MCP server) allowed to use the Access Request Service."""

    #: The client's name: the caller Idempotency-Keys and tasks are scoped to, and the audit actor.
    id: str = Field(min_length=1)
    #: The bearer token the client presents (at least 16 characters).
    token: str = Field(min_length=16)
    #: The resource types this client may submit Access Requests for (all when unset).
    resource_types: list[str] | None = None


class ArapSection(_Section):
    """``[arap]``: the reference PDP and Access Request Service."""

    #: The PDP identifier (``policy_decision_point``); ``https`` unless ``dev_mode`` (loopback only).
    base_url: str | None = None
    #: Development: ``http://`` on a loopback address, loopback callbacks, an ephemeral signing key.
    dev_mode: bool = False
    #: EC P-256 private key (PEM) signing ``binding_token`` and ``approval.state``.
    signing_key_file: Path | None = None
    #: The ``kid`` of the signing key in tokens and at ``jwks_uri``; change it when rotating the key.
    key_id: str = Field(default="arap-1", min_length=1)
    #: The authorization-relevant context members a denial and an approval bind.
    binding_context_members: list[str] = Field(default_factory=lambda: ["arguments"])
    #: The longest a ``binding_token`` lives (it never outlives the denial's ``expires_at``).
    token_lifetime_s: float = Field(default=300.0, gt=0)
    #: How long a request hint stays valid when the policy sets no ``@deadline``.
    denial_lifetime_s: float = Field(default=600.0, gt=0)
    #: How long a task stays pending before it expires.
    task_lifetime_s: float = Field(default=86_400.0, gt=0)
    #: How long a task handle (and its Idempotency-Key) answers after it ends.
    retention_s: float = Field(default=86_400.0, gt=0)
    #: The ``Retry-After`` a pending status answer carries.
    retry_after_s: int = Field(default=5, ge=1)
    #: How long a submission waits for an automatic resolver before answering ``202``.
    sync_wait_s: float = Field(default=2.0, ge=0)
    #: After approval, how long until the grant is provisioned (re-evaluations before: ``grant_pending``).
    grant_delay_s: float = Field(default=0.0, ge=0)
    #: Clock skew tolerated on token expiry and denial deadlines.
    clock_skew_s: float = Field(default=30.0, ge=0, le=60)
    #: HMAC secret for callback signatures (no callbacks without it).
    callback_secret: str | None = Field(default=None, min_length=16)
    #: Submissions one client may make per minute (then ``429`` with ``Retry-After``).
    submissions_per_minute: int = Field(default=120, ge=1)
    #: Origins (``scheme://host[:port]``) callbacks may go to.
    callback_allowlist: list[str] = Field(default_factory=list)
    clients: list[ClientEntry] = Field(default_factory=list)

    @field_validator("clients")
    @classmethod
    def _unique_clients(cls, clients: list[ClientEntry]) -> list[ClientEntry]:
        if len({c.token for c in clients}) != len(clients) or len({c.id for c in clients}) != len(clients):
            raise ValueError("two clients share an id or a token")
        return clients


class ArapServerConfig(_Section):
    """A whole ``arap-server`` file."""

    path: Path = Field(exclude=True)
    store: StoreSection = Field(default_factory=StoreSection)
    policy: PolicySection
    approval: ApprovalSection = Field(default_factory=ApprovalSection)
    arap: ArapSection = Field(default_factory=ArapSection)
    principals: list[PrincipalEntry] = Field(default_factory=list)
    templates: dict[str, TemplateSection] = Field(default_factory=dict)
    resolvers: list[ResolverEntry] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> ArapServerConfig:
        if len({p.token for p in self.principals}) != len(self.principals):
            raise ValueError("two principals share a token")
        if {p.token for p in self.principals} & {c.token for c in self.arap.clients}:
            raise ValueError("a client token is also a principal token")
        for resolver in self.resolvers:
            if resolver.template not in self.templates:
                raise ValueError(f"resolver for template {resolver.template!r}: no [templates.{resolver.template}]")
        return self

    def resolve(self, path: Path) -> Path:
        """``path`` made absolute against the config file's directory."""
        return path if path.is_absolute() else self.path.parent / path

    def store_url(self) -> str:
        """The store URL, a relative SQLite path resolved against the config file."""
        url, prefix = self.store.url, "sqlite:///"
        if url.startswith(prefix) and not url.startswith(prefix + "/") and len(url) > len(prefix):
            return prefix + str(self.resolve(Path(url[len(prefix) :])))
        return url

    def roles_of(self, principal: str) -> frozenset[str]:
        """The roles a principal holds."""
        return frozenset(role for entry in self.principals if entry.id == principal for role in entry.roles)

    def reviewer_tokens(self) -> dict[str, str]:
        """Reviewer bearer token → principal id."""
        return {entry.token: entry.id for entry in self.principals}

    def client_tokens(self) -> dict[str, str]:
        """PEP client bearer token → client id."""
        return {entry.token: entry.id for entry in self.arap.clients}


def load_arap_config(path: str | Path) -> ArapServerConfig:
    """Read and validate an ``arap-server`` file.

    Raises:
        ConfigError: naming the file and, for invalid content, each bad field.
    """
    file = Path(path).resolve()
    try:
        raw: dict[str, Any] = tomllib.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such configuration file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read it ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    try:
        return ArapServerConfig.model_validate({**raw, "path": file})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(top level)'}: {str(e['msg']).removeprefix('Value error, ')}"
            for e in exc.errors()
        )
        raise ConfigError(f"{path}: {problems}") from None
