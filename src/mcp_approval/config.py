"""The deployment configuration ``mcp-approval serve --config FILE`` reads (TOML).

Every path in the file is relative to the file itself. A bad file fails with
:class:`ConfigError`, whose message names the file and the field::

    [server]
    name = "treasury"
    dev_mode = true                    # static tokens and an ephemeral binding key are allowed

    [store]
    url = "sqlite:///treasury.db"

    [policy]
    cedar = "policy.cedar"
    entities = "entities.json"

    [tools]
    module = "tools.py"                # defines register(server, settings, base_dir)
    settings = { ledger = "ledger.jsonl" }

    [[principals]]                     # static bearer tokens (dev_mode only)
    token = "alice-token"
    id = "alice"
    roles = ["treasurer"]

    [templates.treasury]               # who decides requests of a policy template
    approvals_required = 1
    reviewer_role = "approver"

    [[resolvers]]                      # automatic deciders
    template = "refund"
    approve_if_argument = "amount"
    at_most = 500
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal, Self, TypeVar
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from mcp_approval.approval.options import ApprovalOptions, valid_approval_url
from mcp_approval.backends import ApprovalTemplate, ResolverRule
from mcp_approval.backends.arap_settings import ArapSettings
from mcp_approval.errors import MCPApprovalError
from mcp_approval.hosts import is_safe_transport
from mcp_approval.metrics.options import MetricsOptions
from mcp_approval.notify.options import AnchorOptions, NotificationOptions
from mcp_approval.policy.cedar_values import check_decimal_path
from mcp_approval.reviewers.oidc_options import ConsoleSection, OidcOptions
from mcp_approval.tasks.options import TaskOptions

__all__ = [
    "DEFAULT_ALGORITHMS",
    "ApprovalSection",
    "ApprovalTemplate",
    "ArapSection",
    "AuthSection",
    "ConfigError",
    "ConfigFile",
    "DeploymentConfig",
    "PolicySection",
    "PrincipalEntry",
    "ResolverRule",
    "ServePolicySection",
    "ServerSection",
    "SignatureAlgorithm",
    "StoreSection",
    "TasksSection",
    "ToolsSection",
    "load_config",
    "load_config_file",
]


class ConfigError(MCPApprovalError, ValueError):
    """The configuration file is missing, unreadable or invalid; the message names file and field."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ServerSection(_Section):
    """``[server]``: identity and mode."""

    #: The server name clients see (``serverInfo.name``).
    name: str = "mcp-approval"
    #: Development mode: static bearer tokens, and an ephemeral call-binding key if none is set.
    dev_mode: bool = False
    #: The public base URL (for challenges and callbacks); defaults to the listening address.
    base_url: str | None = None
    #: Who a stdio client acts as (``serve --stdio``): the principal policy sees and tasks belong to.
    stdio_principal: str | None = None
    #: Addresses of reverse proxies whose ``X-Forwarded-For`` / ``X-Forwarded-Proto`` are honoured
    #: (``["127.0.0.1"]``, ``"*"`` for any); empty: the headers are ignored and the peer is the client.
    trusted_proxies: list[str] = Field(default_factory=list)


class StoreSection(_Section):
    """``[store]``: where tasks, approvals and audit events live."""

    #: ``sqlite:///PATH`` (relative to this file) or ``postgresql://...``; workers sharing it share tasks.
    url: str = "sqlite:///mcp-approval.db"


def _decimal_paths(paths: list[str]) -> list[str]:
    for path in paths:
        check_decimal_path(path)
    return paths


class PolicySection(_Section):
    """``[policy]``: the Cedar policy set the gate asks."""

    #: The Cedar policy file; ``@requestable("<template>")`` on a ``forbid`` makes its denials requestable.
    cedar: Path
    #: Cedar entities (JSON): principals, their roles and resource attributes.
    entities: Path | None = None
    #: A Cedar schema (Cedar or JSON syntax) the policies and entities are validated against.
    schema_file: Path | None = Field(default=None, alias="schema")
    #: Context members whose numbers policy reads as Cedar ``decimal`` values, whole numbers
    #: included (``["context.arguments.amount"]``); other numbers are a Long when whole.
    decimals: list[str] = Field(default_factory=list)

    _check_decimals = field_validator("decimals")(_decimal_paths)


class ServePolicySection(_Section):
    """``[policy]`` of a served deployment: the Cedar files (as :class:`PolicySection`) or a remote PDP."""

    #: The Cedar policy file (see :class:`PolicySection`); not with ``pdp_url``.
    cedar: Path | None = None
    #: Cedar entities (JSON).
    entities: Path | None = None
    #: A Cedar schema.
    schema_file: Path | None = Field(default=None, alias="schema")
    #: A remote AuthZEN PDP identifier (``https://pdp.example.com``) asked instead of ``cedar``;
    #: plain ``http`` only on loopback.
    pdp_url: str | None = None
    #: Bearer token sent to the remote PDP, if it wants one.
    pdp_token: SecretStr | None = None
    #: Bound on one whole exchange with the remote PDP (a timeout is a deny).
    pdp_timeout_s: float = Field(default=5.0, gt=0)
    #: Context members read as Cedar ``decimal`` values (see :class:`PolicySection`); with ``cedar`` only.
    decimals: list[str] = Field(default_factory=list)

    _check_decimals = field_validator("decimals")(_decimal_paths)

    @model_validator(mode="after")
    def _one_pdp(self) -> ServePolicySection:
        if (self.cedar is None) == (self.pdp_url is None):
            raise ValueError("set exactly one of cedar (a local policy file) and pdp_url (a remote AuthZEN PDP)")
        if self.decimals and self.pdp_url is not None:
            raise ValueError("decimals shapes requests to a local Cedar policy; the remote PDP maps its own")
        return self


class ToolsSection(_Section):
    """``[tools]``: the Python module that registers the server's tools."""

    #: A Python file defining ``register(server, settings, base_dir)``.
    module: Path
    #: Passed to ``register`` as ``settings``.
    settings: dict[str, Any] = Field(default_factory=dict)


class TasksSection(TaskOptions):
    """``[tasks]``: the tasks runtime, :class:`~mcp_approval.tasks.TaskOptions` (every option, under
    the same name)."""

    #: Older files' place for ``[approval] approval_url`` (used when that one is unset).
    approval_url: str | None = None

    _check_approval_url = field_validator("approval_url")(valid_approval_url)


class ApprovalSection(ApprovalOptions):
    """``[approval]``: the SEP-2848 enforcement point, :class:`~mcp_approval.approval.options.ApprovalOptions`
    (every option, under the same name), plus the choice of backend."""

    #: Argument names whose values reviewers see as "[redacted]" (local backend).
    redact_arguments: list[str] = Field(default_factory=list)
    #: Where approval requests go: ``local`` (this server's database) or ``arap`` (see ``[arap]``).
    backend: Literal["local", "arap"] = "local"


class ArapSection(ArapSettings):
    """``[arap]``: the ARAP approval backend (``[approval] backend = "arap"``),
    :class:`~mcp_approval.backends.ArapSettings` (every option under the same name, except
    ``callback_secret`` and ``client_name``, which come from ``[approval]`` and ``[server] name``).

    The Access Request Service is found through the PDP metadata (``[policy] pdp_url``).
    """

    # Composed from other sections (see ``arap_backend_from_config``), so not keys of this one:
    # excluded from the reference and refused when a file sets them.
    callback_secret: SecretStr | None = Field(default=None, exclude=True)
    client_name: str | None = Field(default=None, exclude=True)

    @field_validator("callback_secret", "client_name", mode="before")
    @classmethod
    def _composed_elsewhere(cls, value: object, info: ValidationInfo) -> object:
        source = {"callback_secret": "[approval] callback_secret", "client_name": "[server] name"}
        raise ValueError(f"not a key of [arap]: it is set from {source[str(info.field_name)]}")


SignatureAlgorithm = Literal["ES256", "ES384", "ES512", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "EdDSA"]
"""The JWS algorithms ``[auth]`` may accept: asymmetric signatures only."""
DEFAULT_ALGORITHMS: tuple[SignatureAlgorithm, ...] = ("ES256", "RS256")


class AuthSection(_Section):
    """``[auth]``: bearer tokens are JWT access tokens (RFC 9068) from one authorization server.

    Callers, reviewers and the console all present them. Roles for reviewer templates still come
    from ``[[principals]]`` entries (``id`` and ``roles``, no token).
    """

    #: The authorization server's issuer identifier, compared exactly with each token's ``iss``.
    issuer: str = Field(min_length=1)
    #: This server's resource identifier, its public MCP URL (``https://mcp.example.com/mcp``): required
    #: in each token's ``aud``, and the ``resource`` of the protected resource metadata clients discover.
    audience: str = Field(min_length=1)
    #: The issuer's JSON Web Key Set URL (https; plain http only on loopback in dev mode); not with ``jwks_file``.
    jwks_url: str | None = None
    #: A JSON Web Key Set file instead of ``jwks_url``: read at start, never refreshed.
    jwks_file: Path | None = None
    #: Accepted signature algorithms (asymmetric only: a public key never doubles as an HMAC secret).
    algorithms: list[SignatureAlgorithm] = Field(default_factory=lambda: list(DEFAULT_ALGORITHMS), min_length=1)
    #: Accepted ``typ`` header values (RFC 9068 access tokens are ``at+jwt``); add ``"JWT"`` for issuers
    #: that do not type their access tokens.
    token_types: list[str] = Field(default_factory=lambda: ["at+jwt", "application/at+jwt"], min_length=1)
    #: The claim naming the principal: the policy subject, the task owner, the reviewer id.
    principal_claim: str = "sub"
    #: The claim holding granted scopes (a space-separated string, or a list such as ``scp``).
    scopes_claim: str = "scope"
    #: Scopes every MCP request's token must carry (a token without them gets 403 ``insufficient_scope``).
    required_scopes: list[str] = Field(default_factory=list)
    #: Tolerated clock skew for ``exp``, ``nbf`` and ``iat``, in seconds.
    leeway_s: float = Field(default=30.0, ge=0, le=300)
    #: How long a fetched key set is used before it is fetched again (an unknown ``kid`` fetches sooner).
    jwks_refresh_s: float = Field(default=300.0, ge=30)

    @model_validator(mode="after")
    def _one_key_source(self) -> AuthSection:
        if (self.jwks_url is None) == (self.jwks_file is None):
            raise ValueError("set exactly one of jwks_url and jwks_file")
        return self


class PrincipalEntry(_Section):
    """``[[principals]]``: a principal's reviewer roles, and in dev mode a static bearer token.

    With ``[auth]`` the principal signs in with an access token whose principal claim is ``id``;
    the entry then only gives it roles.
    """

    #: A static bearer token (dev mode only); omit it when ``[auth]`` authenticates the principal.
    token: SecretStr | None = Field(default=None, min_length=8)
    #: The principal id policy sees and tasks belong to.
    id: str = Field(min_length=1)
    #: Roles, matched against a template's ``reviewer_role``.
    roles: list[str] = Field(default_factory=list)


class AuditSection(_Section):
    """``[audit]``: the audit log's outside anchors."""

    #: ``[audit.anchor]``: the chain's head written every ``interval_s`` (and at shutdown) to a
    #: ``file`` (JSON lines, appended) and/or a signed ``webhook``, for ``audit verify --anchor``
    #: (:class:`~mcp_approval.notify.options.AnchorOptions`; off by default).
    anchor: AnchorOptions | None = None


class ConfigFile(_Section):
    """What every mcp-approval TOML file holds: its path, the store, static principals, approval
    templates and automatic resolvers (``serve`` deployments and ``arap-server`` files alike)."""

    path: Path = Field(exclude=True)
    store: StoreSection = Field(default_factory=StoreSection)
    principals: list[PrincipalEntry] = Field(default_factory=list)
    templates: dict[str, ApprovalTemplate] = Field(default_factory=dict)
    resolvers: list[ResolverRule] = Field(default_factory=list)

    @field_validator("principals")
    @classmethod
    def _unique_tokens(cls, principals: list[PrincipalEntry]) -> list[PrincipalEntry]:
        tokens = [entry.token.get_secret_value() for entry in principals if entry.token is not None]
        if len(tokens) != len(set(tokens)):
            raise ValueError("two principals share a token")
        return principals

    @model_validator(mode="after")
    def _resolvers_name_templates(self) -> Self:
        for resolver in self.resolvers:
            if resolver.template not in self.templates:
                raise ValueError(f"resolver for template {resolver.template!r}: no [templates.{resolver.template}]")
        return self

    @property
    def base_dir(self) -> Path:
        """The directory relative paths in the file are resolved against."""
        return self.path.parent

    def resolve(self, path: Path) -> Path:
        """``path`` made absolute against the config file's directory."""
        return path if path.is_absolute() else self.base_dir / path

    def store_url(self) -> str:
        """The store URL, a relative SQLite path resolved against the config file."""
        url = self.store.url
        prefix = "sqlite:///"
        if url.startswith(prefix) and not url.startswith(prefix + "/") and len(url) > len(prefix):
            return prefix + str(self.resolve(Path(url[len(prefix) :])))
        return url

    def roles_of(self, principal: str) -> frozenset[str]:
        """The roles a principal holds."""
        return frozenset(role for entry in self.principals if entry.id == principal for role in entry.roles)

    def tokens(self) -> dict[str, str]:
        """Static bearer token → principal id."""
        return {entry.token.get_secret_value(): entry.id for entry in self.principals if entry.token is not None}


class DeploymentConfig(ConfigFile):
    """A whole ``serve`` deployment, as read from one TOML file."""

    server: ServerSection = Field(default_factory=ServerSection)
    policy: ServePolicySection
    tools: ToolsSection
    tasks: TasksSection = Field(default_factory=TasksSection)
    approval: ApprovalSection = Field(default_factory=ApprovalSection)
    arap: ArapSection | None = None
    auth: AuthSection | None = None
    #: The Prometheus endpoint, :class:`~mcp_approval.metrics.MetricsOptions` (off by default).
    metrics: MetricsOptions = Field(default_factory=MetricsOptions)
    #: Notification channels, :class:`~mcp_approval.notify.NotificationOptions` (templates pick them with ``notify``).
    notifications: NotificationOptions = Field(default_factory=NotificationOptions)
    audit: AuditSection = Field(default_factory=AuditSection)
    #: How reviewers sign in to the console (:class:`~mcp_approval.reviewers.oidc_options.ConsoleSection`).
    console: ConsoleSection = Field(default_factory=ConsoleSection)

    @model_validator(mode="after")
    def _notified_channels_exist(self) -> DeploymentConfig:
        named = [(f"templates.{name}.notify", template.notify) for name, template in self.templates.items()]
        named += [(f"templates.{name}.escalate_notify", t.escalate_notify) for name, t in self.templates.items()]
        if self.audit.anchor is not None:
            named.append(("audit.anchor.channels", self.audit.anchor.channels))
        for field_name, channels in named:
            for channel in channels:
                if channel not in self.notifications.channels:
                    raise ValueError(
                        f"{field_name}: no channel {channel!r} in [notifications.channels] "
                        f"(configured: {', '.join(sorted(self.notifications.channels)) or 'none'})"
                    )
        return self

    @model_validator(mode="after")
    def _reminders_can_happen(self) -> DeploymentConfig:
        """A reminder or an escalation must come before requests lapse, and reach a role someone holds."""
        deadline = self.approval.default_deadline_s
        held = {role for entry in self.principals for role in entry.roles}
        for name, template in self.templates.items():
            for setting in ("remind_after_s", "escalate_after_s"):
                after = getattr(template, setting)
                if after is not None and after >= deadline:
                    raise ValueError(
                        f"templates.{name}.{setting}: {after:g} s is not before approval.default_deadline_s "
                        f"({deadline:g} s): requests would expire before anyone is told"
                    )
            # Reviewers signed in by the identity provider hold the roles its tokens name, unknown here.
            if template.escalate_to is not None and template.escalate_to not in held and self.console.oidc is None:
                raise ValueError(
                    f"templates.{name}.escalate_to: no [[principals]] entry holds the role {template.escalate_to!r} "
                    f"(roles held: {', '.join(sorted(held)) or 'none'}; reviewers signed in with [console.oidc] "
                    "may hold it through their roles claim)"
                )
        return self

    @model_validator(mode="after")
    def _consistent(self) -> DeploymentConfig:
        if self.tokens() and not self.server.dev_mode:
            raise ValueError(
                "principals: static tokens are allowed only with server.dev_mode = true "
                "(in production, authenticate with [auth] and keep id and roles here)"
            )
        if self.auth is not None:
            self._check_auth_urls(self.auth)
        if self.console.oidc is not None:
            self._check_oidc_urls(self.console.oidc)
        if self.approval.backend == "arap" and (self.arap is None or self.policy.pdp_url is None):
            raise ValueError('approval.backend = "arap" needs an [arap] section and policy.pdp_url')
        if self.arap is not None and self.arap.callback_url and not self.approval.callback_secret:
            raise ValueError("arap.callback_url needs approval.callback_secret (callbacks are signed)")
        self._check_passkey_origin()
        return self

    def _check_passkey_origin(self) -> None:
        """A passkey step-up needs the console's origin as a domain name (outside dev mode)."""
        needing = sorted(name for name, template in self.templates.items() if template.step_up == "passkey")
        if not needing or self.approval.backend != "local" or self.server.dev_mode:
            return
        field = f"templates.{needing[0]}.step_up"
        if self.server.base_url is None:
            raise ValueError(
                f"{field}: 'passkey' needs server.base_url, the console's origin as reviewers' browsers open "
                "it (https://approvals.example.com): passkeys are bound to it"
            )
        host = urlsplit(self.server.base_url).hostname or ""
        if not host or host.replace(".", "").isdigit() or ":" in host:
            raise ValueError(
                f"{field}: 'passkey' needs server.base_url with a domain name, not {host or 'no host'!r}: "
                "browsers refuse passkeys for an IP address (use localhost while developing)"
            )

    def _check_auth_urls(self, auth: AuthSection) -> None:
        """The key set is fetched over https; plain http only on loopback, in dev mode."""
        if auth.jwks_url is None or is_safe_transport(auth.jwks_url, allow_loopback_http=self.server.dev_mode):
            return
        raise ValueError(
            f"auth.jwks_url: {auth.jwks_url!r} must be an https URL (plain http only on a loopback host "
            "with server.dev_mode = true): the keys it serves decide who is authenticated"
        )

    def _check_oidc_urls(self, oidc: OidcOptions) -> None:
        """The provider and the callback are reached over https; plain http only on loopback, in dev mode."""
        for name in ("issuer", "redirect_url"):
            url = getattr(oidc, name)
            if not is_safe_transport(url, allow_loopback_http=self.server.dev_mode):
                raise ValueError(
                    f"console.oidc.{name}: {url!r} must be an https URL (plain http only on a loopback host "
                    "with server.dev_mode = true): sign-in codes and ID tokens travel through it"
                )
        if not oidc.redirect_url.rstrip("/").endswith("/console/oidc/callback"):
            raise ValueError(
                f"console.oidc.redirect_url: {oidc.redirect_url!r} must be the console's callback, "
                "<the server's public URL>/console/oidc/callback"
            )


ConfigT = TypeVar("ConfigT", bound=ConfigFile)


def load_config(path: str | Path) -> DeploymentConfig:
    """Read and validate a deployment file.

    Raises:
        ConfigError: naming the file and, for invalid content, each bad field.
    """
    return load_config_file(path, DeploymentConfig)


def load_config_file(path: str | Path, model: type[ConfigT]) -> ConfigT:
    """Read the TOML file at ``path`` and validate it as ``model``.

    Raises:
        ConfigError: naming the file and, for invalid content, each bad field.
    """
    file = Path(path).resolve()
    try:
        raw = tomllib.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such configuration file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read it ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    try:
        return model.model_validate({**raw, "path": file})
    except ValidationError as exc:
        problems = "; ".join(_describe(error) for error in exc.errors())
        raise ConfigError(f"{path}: {problems}") from None


def _describe(error: Any) -> str:
    location = ".".join(str(part) for part in error["loc"]) or "(top level)"
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{location}: {message}"
