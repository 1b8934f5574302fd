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

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from mcp_approval.config import ApprovalSection, ConfigFile, PolicySection, load_config_file
from mcp_approval.hosts import callback_url_problem

__all__ = ["ArapServerConfig", "ArapServerSection", "ClientEntry", "load_arap_config"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ClientEntry(_Section):
    """``[[arap.clients]]``: a PEP (e.g. an MCP server) allowed to use the Access Request Service."""

    #: The client's name: the caller Idempotency-Keys and tasks are scoped to, and the audit actor.
    id: str = Field(min_length=1)
    #: The bearer token the client presents (at least 16 characters).
    token: SecretStr = Field(min_length=16)
    #: The resource types this client may submit Access Requests for (all when unset).
    resource_types: list[str] | None = None


class ArapServerSection(_Section):
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
    #: How often the background sweep runs (it frees Idempotency-Keys past ``retention_s``).
    sweep_interval_s: float = Field(default=5.0, gt=0)
    #: The ``Retry-After`` a pending status answer carries.
    retry_after_s: int = Field(default=5, ge=1)
    #: How long a submission waits for an automatic resolver before answering ``202``.
    sync_wait_s: float = Field(default=2.0, ge=0)
    #: After approval, how long until the grant is provisioned (re-evaluations before: ``grant_pending``).
    grant_delay_s: float = Field(default=0.0, ge=0)
    #: Clock skew tolerated on token expiry and denial deadlines.
    clock_skew_s: float = Field(default=30.0, ge=0, le=60)
    #: HMAC secret for callback signatures (no callbacks without it).
    callback_secret: SecretStr | None = Field(default=None, min_length=16)
    #: Submissions one client may make per minute (then ``429`` with ``Retry-After``).
    submissions_per_minute: int = Field(default=120, ge=1)
    #: Origins (``scheme://host[:port]``) callbacks may go to.
    callback_allowlist: list[str] = Field(default_factory=list)
    #: Addresses of reverse proxies whose ``X-Forwarded-For`` / ``X-Forwarded-Proto`` are honoured
    #: (``"*"`` for any); empty: the headers are ignored and the peer is the client.
    trusted_proxies: list[str] = Field(default_factory=list)
    clients: list[ClientEntry] = Field(default_factory=list)

    @field_validator("callback_allowlist")
    @classmethod
    def _well_formed_origins(cls, allowlist: list[str]) -> list[str]:
        for entry in allowlist:
            problem = callback_url_problem(entry)
            if problem is not None:
                raise ValueError(f"callback_allowlist entry {entry!r}: {problem}")
        return allowlist

    @field_validator("clients")
    @classmethod
    def _unique_clients(cls, clients: list[ClientEntry]) -> list[ClientEntry]:
        if len({c.token.get_secret_value() for c in clients}) != len(clients) or len({c.id for c in clients}) != len(
            clients
        ):
            raise ValueError("two clients share an id or a token")
        return clients


class ArapServerConfig(ConfigFile):
    """A whole ``arap-server`` file: the shared store, principals (reviewers), templates and resolvers,
    plus the policy and the ``[arap]`` service settings."""

    policy: PolicySection
    approval: ApprovalSection = Field(default_factory=ApprovalSection)
    arap: ArapServerSection = Field(default_factory=ArapServerSection)

    @model_validator(mode="after")
    def _client_tokens_are_not_principal_tokens(self) -> ArapServerConfig:
        if set(self.tokens()) & set(self.client_tokens()):
            raise ValueError("a client token is also a principal token")
        return self

    def client_tokens(self) -> dict[str, str]:
        """PEP client bearer token → client id."""
        return {entry.token.get_secret_value(): entry.id for entry in self.arap.clients}


def load_arap_config(path: str | Path) -> ArapServerConfig:
    """Read and validate an ``arap-server`` file.

    Raises:
        ConfigError: naming the file and, for invalid content, each bad field.
    """
    return load_config_file(path, ArapServerConfig)
