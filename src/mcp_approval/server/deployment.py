"""A deployment file onto :class:`~mcp_approval.server.approvals.Approvals`: ``mcp-approval serve``.

:func:`build_deployment` maps a :class:`~mcp_approval.config.DeploymentConfig` onto the same
entry point a library user builds by hand: the file's policy, backend, store, principals and
options become ``Approvals``'s arguments, and the file's tools module registers its tools on
the server ``Approvals`` configures. :func:`deployment_app` serves it over HTTP: MCP at ``/mcp``,
the reviewer API at ``/approvals``, the console at ``/console``, backend callbacks at
``/approvals/callback``.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp.server.auth.provider import TokenVerifier
from mcp.server.mcpserver import MCPServer
from starlette.applications import Starlette

from mcp_approval.approval import PolicyGate, PrincipalLookup
from mcp_approval.approval.options import ApprovalOptions
from mcp_approval.approval.service import PrincipalCheck, ToolApproval
from mcp_approval.backends import ApprovalBackend
from mcp_approval.clock import Clock
from mcp_approval.config import ConfigError, DeploymentConfig
from mcp_approval.keyring import warn_if_readable_by_others
from mcp_approval.notify import EmailChannelOptions, NotificationOptions, SlackChannelOptions
from mcp_approval.notify.anchors import AnchorOptions
from mcp_approval.policy import PolicyDecisionPoint
from mcp_approval.reviewers.oidc import OidcClient
from mcp_approval.reviewers.oidc_routes import OidcSignIn
from mcp_approval.server.approvals import Approvals
from mcp_approval.server.arap_backend import arap_backend_from_config, pdp_from_config
from mcp_approval.server.auth import auth_from_config, reviewer_authenticator
from mcp_approval.server.local_backend import local_backend_from_config
from mcp_approval.server.validation import call_register, validate_deployment, validate_deployment_templates
from mcp_approval.storage import AuditLog, open_database
from mcp_approval.tasks import TaskOptions, TasksExtension
from mcp_approval.tasks.server import LOCAL_PRINCIPAL
from mcp_approval.tasks.store_url import is_redis_url

__all__ = ["Deployment", "build_deployment", "deployment_app"]


@dataclass(frozen=True)
class Deployment:
    """Everything :func:`build_deployment` wired, for serving and for inspection in tests."""

    config: DeploymentConfig
    approvals: Approvals
    server: MCPServer[Any]

    @property
    def tasks(self) -> TasksExtension:
        """The tasks extension."""
        return self.approvals.tasks

    @property
    def gate(self) -> PolicyGate:
        """The policy gate."""
        return self.approvals.gate

    @property
    def approval(self) -> ToolApproval:
        """The tool-approval enforcement point."""
        return self.approvals.approval

    @property
    def backend(self) -> ApprovalBackend:
        """Where approval requests go."""
        return self.approvals.backend

    @property
    def audit(self) -> AuditLog:
        """The audit log."""
        return self.approvals.audit

    @property
    def clock(self) -> Clock:
        """The source of time."""
        return self.approvals.clock

    @property
    def token_verifier(self) -> TokenVerifier | None:
        """What checks bearer tokens on ``/mcp`` (and, the same way, for reviewers); ``None`` without auth."""
        return self.approvals.token_verifier


def build_deployment(
    config: DeploymentConfig,
    *,
    store_url: str | None = None,
    base_url: str,
    clock: Clock | None = None,
    stdio: bool = False,
    pdp: PolicyDecisionPoint | None = None,
    backend: ApprovalBackend | None = None,
    principal_valid: PrincipalCheck | None = None,
) -> Deployment:
    """Map a deployment file onto :class:`~mcp_approval.server.approvals.Approvals`; ``store_url``
    overrides the file's ``[store]``.

    With ``stdio`` the server has no bearer authentication: its one client acts as
    ``[server] stdio_principal`` (else as the local principal, which policy usually denies).
    ``pdp``, ``backend`` and ``principal_valid`` replace what the file describes (a program
    embedding the deployment, or a test scripting one of them); everything is built once, here.

    Raises:
        ConfigError: a setting that cannot work (no binding key outside dev mode, a tools module
            that does not load, a policy naming a template or tool the deployment lacks), naming
            the file, line and field.
        PolicyLoadError: the policy files do not load (naming file and line).
    """
    url = store_url or config.store_url()
    if is_redis_url(url):
        where = "the store URL given" if store_url else f"{config.path}: [store] url"
        raise ConfigError(
            f"{where}: approval-gated deployments need the SQL store (sqlite:/// or "
            "postgresql://): approval workflow rows live in the same database as the task rows and lock the "
            "task row in the same transaction; a redis:// store serves tasks only"
        )
    database = open_database(url)
    pdp = pdp or pdp_from_config(config, clock=clock)
    sign_in = _console_sign_in(config)
    if backend is None and config.approval.backend == "arap":
        backend = arap_backend_from_config(config, pdp)
    elif backend is None:
        claimed = sign_in.claimed.of if sign_in is not None else None
        backend = local_backend_from_config(config, database, clock=clock, claimed_roles=claimed)
    verification = None if stdio else auth_from_config(config, base_url, clock=clock)
    verifier, auth = verification if verification is not None else (None, None)
    principals: TokenVerifier | PrincipalLookup | None = _stdio_principal(config) if stdio else verifier
    try:
        approvals = Approvals(
            pdp,
            backend,
            database=database,
            principals=principals,
            auth=auth,
            options=_approval_options(config),
            tasks=_task_options(config),
            reviewers=reviewer_authenticator(config, verifier),
            principal_valid=principal_valid or _principal_check(config),
            clock=clock,
            metrics=config.metrics,
            notifications=_notification_options(config, base_url),
            trusted_proxies=config.server.trusted_proxies,
            audit_anchor=_anchor_options(config),
            console_sign_in=sign_in,
            token_sign_in=config.server.dev_mode or config.console.token_sign_in or sign_in is None,
            passkey_origin=base_url,
        )
    except ConfigError:
        # Approvals' own template check names the backend's templates; say it as [templates.t] of the file.
        validate_deployment_templates(config, pdp)
        raise
    except ValueError as exc:
        raise ConfigError(f"{config.path}: {exc}") from None
    server: MCPServer[Any] = MCPServer(config.server.name, log_level="WARNING", **approvals.server_options())
    _register_tools(config, server)
    validate_deployment(config, server, pdp)
    return Deployment(config, approvals, server)


def deployment_app(deployment: Deployment) -> Starlette:
    """The HTTP app: MCP at ``/mcp``, reviewers at ``/approvals`` and ``/console``, callbacks when a secret is set."""
    return deployment.approvals.http_app(deployment.server)


def _notification_options(config: DeploymentConfig, base_url: str) -> NotificationOptions:
    """``[notifications]``, with links to this server's console unless ``console_url`` says otherwise,
    and a Slack channel's secret files resolved against the deployment file."""
    options = config.notifications
    if options.console_url is None:
        options = options.model_copy(update={"console_url": base_url})
    channels = {
        name: channel.model_copy(
            update={
                "bot_token_file": config.resolve(channel.bot_token_file),
                "signing_secret_file": config.resolve(channel.signing_secret_file),
            }
        )
        if isinstance(channel, SlackChannelOptions)
        else channel
        for name, channel in options.channels.items()
    }
    for name, channel in channels.items():  # an e-mail channel's SMTP password file
        if isinstance(channel, EmailChannelOptions) and channel.password_file is not None:
            channels[name] = channel.model_copy(update={"password_file": config.resolve(channel.password_file)})
    return options.model_copy(update={"channels": channels})


def _console_sign_in(config: DeploymentConfig) -> OidcSignIn | None:
    """``[console.oidc]``'s sign-in, its client secret read from its file (relative to the deployment file).

    Raises:
        ConfigError: the secret file cannot be read or is empty, naming the file and the field.
    """
    options = config.console.oidc
    if options is None:
        return None
    secret = None
    if options.client_secret_file is not None:
        path = config.resolve(options.client_secret_file)
        try:
            secret = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{config.path}: console.oidc.client_secret_file: cannot read {path} ({exc})") from None
        if not secret:
            raise ConfigError(f"{config.path}: console.oidc.client_secret_file: {path} is empty")
        warn_if_readable_by_others(path, setting="console.oidc.client_secret_file")
    return OidcSignIn(OidcClient(options, secret))


def _anchor_options(config: DeploymentConfig) -> AnchorOptions | None:
    """``[audit.anchor]``, its file resolved against the deployment file."""
    options = config.audit.anchor
    if options is None or options.file is None:
        return options
    return options.model_copy(update={"file": config.resolve(options.file)})


def _stdio_principal(config: DeploymentConfig) -> PrincipalLookup:
    """The identity of a stdio server's one client."""
    principal = config.server.stdio_principal or LOCAL_PRINCIPAL

    def resolve(_ctx: object) -> str:
        return principal

    return resolve


def _task_options(config: DeploymentConfig) -> TaskOptions:
    """``[tasks]`` itself; unless the file sets it, expired tasks are swept at least every second."""
    section = config.tasks
    if "sweep_interval_s" in section.model_fields_set:
        return section
    return section.model_copy(update={"sweep_interval_s": min(1.0, section.poll_interval_s)})


def _approval_options(config: DeploymentConfig) -> ApprovalOptions:
    """``[approval]`` itself, with what other sections imply: dev mode allows an ephemeral key, the
    templates' inputs, the key file resolved against the file, and ``[tasks] approval_url`` (older files)."""
    section = config.approval
    update: dict[str, Any] = {
        "ephemeral_binding_key": section.ephemeral_binding_key or config.server.dev_mode,
        "submission_inputs": {
            **section.submission_inputs,
            **{name: tuple(t.inputs) for name, t in config.templates.items() if t.inputs},
        },
        "inputs_in_task": section.inputs_in_task
        | frozenset(name for name, t in config.templates.items() if t.collect_inputs == "during"),
    }
    if section.binding_key_file is not None:
        update["binding_key_file"] = config.resolve(section.binding_key_file)
    if section.approval_url is None and config.tasks.approval_url is not None:
        update["approval_url"] = config.tasks.approval_url
    return section.model_copy(update=update)


def _principal_check(config: DeploymentConfig) -> PrincipalCheck:
    """A static-token requester is still valid while the deployment still lists its token.

    With ``[auth]`` (or without static tokens) every requester stays valid here: the token was
    checked when the call was made, and revoking an identity is the authorization server's business.
    """
    known = set() if config.auth is not None else set(config.tokens().values())

    async def still_valid(principal: str) -> bool:
        return not known or principal in known

    return still_valid


def _register_tools(config: DeploymentConfig, server: MCPServer[Any]) -> None:
    """Import the deployment's tools module and call its ``register(server, settings, base_dir)``."""
    path = config.resolve(config.tools.module)
    spec = importlib.util.spec_from_file_location(f"mcp_approval_tools_{path.stem}", path)
    if spec is None or spec.loader is None or not path.is_file():
        raise ConfigError(f"{config.path}: tools.module: no Python file at {path}")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise ConfigError(f"{config.path}: tools.module: {path} failed to import ({exc!r})") from exc
    register = getattr(module, "register", None)
    if not callable(register):
        raise ConfigError(f"{config.path}: tools.module: {path} defines no register(server, settings, base_dir)")
    call_register(register, server, dict(config.tools.settings), Path(config.base_dir))
