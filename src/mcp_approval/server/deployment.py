"""The composition root: one deployment file in, one running approval-gated MCP server out.

:func:`build_deployment` wires every layer from a :class:`~mcp_approval.config.DeploymentConfig`:
the database, the tasks extension, the Cedar PDP and policy gate, the local approval backend,
the tool-approval enforcement point and the deployment's tools. :func:`deployment_app` serves
it over HTTP: MCP at ``/mcp``, the reviewer API at ``/approvals``, backend callbacks at
``/approvals/callback``.
"""

from __future__ import annotations

import importlib.util
import logging
import tomllib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mcp.server.auth.provider import TokenVerifier
from mcp.server.mcpserver import MCPServer
from starlette.applications import Starlette
from starlette.routing import BaseRoute

from mcp_approval.approval import PolicyGate, PrincipalResolver
from mcp_approval.approval.binding import BindingCipher
from mcp_approval.approval.callbacks import callback_route
from mcp_approval.approval.options import ApprovalOptions
from mcp_approval.approval.schema import APPROVAL_MIGRATIONS
from mcp_approval.approval.service import APPROVAL_HANDLER, PrincipalCheck, ToolApproval, ToolApprovalExtension
from mcp_approval.approval.tools import ServerTools
from mcp_approval.backends import ApprovalBackend
from mcp_approval.backends.arap import ArapBackend
from mcp_approval.backends.console import console_routes
from mcp_approval.backends.local import LocalApprovalBackend
from mcp_approval.backends.local_schema import LOCAL_BACKEND_MIGRATIONS
from mcp_approval.backends.login_throttle import FailedLoginThrottle
from mcp_approval.backends.reviewer_api import reviewer_routes
from mcp_approval.clock import Clock, SystemClock
from mcp_approval.config import ConfigError, DeploymentConfig
from mcp_approval.policy import ToolCallMapper
from mcp_approval.policy.http import HttpPDP
from mcp_approval.server.arap_backend import arap_backend_from_config, pdp_from_config
from mcp_approval.server.auth import auth_from_config, reviewer_authenticator
from mcp_approval.server.local_backend import local_backend_from_config
from mcp_approval.server.validation import call_register, validate_deployment
from mcp_approval.storage import AUDIT_MIGRATIONS, AuditLog, Migrations, migrate, open_database
from mcp_approval.tasks import TaskOptions, TasksExtension, task_routing_middleware
from mcp_approval.tasks.server import LOCAL_PRINCIPAL
from mcp_approval.tasks.sql_store import SqlTaskStore
from mcp_approval.tasks.store_url import is_redis_url

logger = logging.getLogger("mcp_approval.server")


@dataclass(frozen=True)
class Deployment:
    """Everything :func:`build_deployment` wired, for serving and for inspection in tests."""

    config: DeploymentConfig
    server: MCPServer[Any]
    tasks: TasksExtension
    gate: PolicyGate
    approval: ToolApproval
    backend: ApprovalBackend
    audit: AuditLog
    clock: Clock = field(default_factory=SystemClock)
    #: What checks bearer tokens on ``/mcp`` (and, the same way, for reviewers); ``None`` without auth.
    token_verifier: TokenVerifier | None = None


def build_deployment(
    config: DeploymentConfig,
    *,
    store_url: str | None = None,
    base_url: str,
    clock: Clock | None = None,
    stdio: bool = False,
) -> Deployment:
    """Wire a deployment; ``store_url`` overrides the file's ``[store]``.

    With ``stdio`` the server has no bearer authentication: its one client acts as
    ``[server] stdio_principal`` (else as the local principal, which policy usually denies).

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
            "task row in the same transaction; a redis:// store serves tasks only (TaskOptions(store_url=...))"
        )
    database = open_database(url)
    audit = AuditLog(database, clock=clock)
    resolver = _stdio_principal(config) if stdio else None
    store = SqlTaskStore(url, clock=clock, database=database)
    tasks = TasksExtension(replace(_task_options(config, store), principal_resolver=resolver), clock=clock)
    pdp = pdp_from_config(config, clock=clock)
    mapper = ToolCallMapper()
    backend: ApprovalBackend
    # The tables beside the tasks' that this deployment uses (an ARAP one has no local-backend tables).
    histories: tuple[Migrations, ...] = (AUDIT_MIGRATIONS, APPROVAL_MIGRATIONS)
    if config.approval.backend == "arap":
        backend = arap_backend_from_config(config, pdp)
    else:
        backend = local_backend_from_config(config, database, clock=clock, audit=audit)
        histories += (LOCAL_BACKEND_MIGRATIONS,)
    # The approval layer needs the server (to run tools) and the server's lifespan needs it: the
    # lifespan looks it up here once both exist.
    holder: dict[str, ToolApproval] = {}

    @asynccontextmanager
    async def lifespan(_server: object) -> AsyncIterator[dict[str, Any]]:
        async with tasks.lifespan(_server):  # opens the task store, which migrates the tasks table
            await migrate(database, *histories)
            await holder["approval"].start()
            try:
                yield {}
            finally:
                await holder["approval"].stop()
                if isinstance(pdp, HttpPDP):
                    await pdp.aclose()

    auth: dict[str, Any] = {}
    verification = None if stdio else auth_from_config(config, base_url, clock=clock)
    if verification is not None:
        auth = {"token_verifier": verification[0], "auth": verification[1]}
    # Outermost: every call is decided before anything else runs.
    gate = PolicyGate(pdp, mapper=mapper, principal_resolver=resolver)
    server: MCPServer[Any] = MCPServer(
        config.server.name,
        extensions=[gate, tasks, ToolApprovalExtension()],
        lifespan=lifespan,
        middleware=[task_routing_middleware],
        log_level="WARNING",
        **auth,
    )
    approval = ToolApproval(
        backend,
        pdp=pdp,
        mapper=mapper,
        tools=ServerTools(server),
        tasks=tasks,
        cipher=_cipher(config),
        options=_approval_options(config),
        principal_valid=_principal_check(config),
        audit=audit,
        clock=clock,
    )
    tasks.register_handler(APPROVAL_HANDLER, approval)
    holder["approval"] = approval
    gate.on_requestable = approval
    _register_tools(config, server)
    validate_deployment(config, server, pdp)
    verifier = verification[0] if verification is not None else None
    return Deployment(config, server, tasks, gate, approval, backend, audit, clock or SystemClock(), verifier)


def deployment_app(deployment: Deployment) -> Starlette:
    """The HTTP app: MCP at ``/mcp``, reviewers at ``/approvals`` and ``/console``, callbacks when a secret is set."""
    app = deployment.server.streamable_http_app(json_response=True)
    routes: list[BaseRoute] = []
    backend = deployment.backend
    if isinstance(backend, LocalApprovalBackend):  # an ARAP deployment's reviewers use the ARS
        authenticate = reviewer_authenticator(deployment.config, deployment.token_verifier)
        throttle = FailedLoginThrottle(deployment.clock)  # one limit on failed sign-ins for both
        routes += reviewer_routes(backend, authenticate, throttle=throttle)
        routes += console_routes(backend, authenticate, deployment.audit, clock=deployment.clock, throttle=throttle)
    secret = deployment.config.approval.callback_secret
    if secret:
        routes.insert(0, _callback_route(deployment, secret))
    app.router.routes[0:0] = routes
    return app


def _callback_route(deployment: Deployment, secret: str) -> BaseRoute:
    """Backend callbacks; for ARAP bound to the tasks this server submitted and their ``state``."""
    approval, backend = deployment.approval, deployment.backend
    if not isinstance(backend, ArapBackend):
        return callback_route(secret, approval.wake)

    async def key_of(handle: str) -> str | None:
        intent = await approval.store.by_handle(handle)
        return intent.key if intent is not None else None

    return callback_route(secret, approval.wake, arap=backend, key_of=key_of)


def _stdio_principal(config: DeploymentConfig) -> PrincipalResolver:
    """The identity of a stdio server's one client."""
    principal = config.server.stdio_principal or LOCAL_PRINCIPAL

    def resolve(_ctx: object) -> str:
        return principal

    return resolve


def _task_options(config: DeploymentConfig, store: SqlTaskStore) -> TaskOptions:
    section = config.tasks
    return TaskOptions(
        threshold_s=section.threshold_s,
        ttl_s=section.ttl_s,
        poll_interval_s=section.poll_interval_s,
        lease_grace_s=section.lease_grace_s,
        sweep_interval_s=min(1.0, section.poll_interval_s),
        store=store,
        approval_url=section.approval_url,
        max_tasks=section.max_tasks,
        max_per_principal=section.max_per_principal,
    )


def _approval_options(config: DeploymentConfig) -> ApprovalOptions:
    section = config.approval
    return ApprovalOptions(
        result_retention_s=section.result_retention_s,
        max_pending_s=section.max_pending_s,
        default_deadline_s=section.default_deadline_s,
        execution_deadline_s=section.execution_deadline_s,
        max_generations=section.max_generations,
        submissions_per_minute=section.submissions_per_minute,
        max_pending_per_principal=section.max_pending_per_principal,
        poll_interval_s=section.poll_interval_s,
        task_poll_interval_s=config.tasks.poll_interval_s,
        without_tasks=section.without_tasks,
        intent_grace_s=section.intent_grace_s,
        lease_s=section.lease_s,
        submission_inputs={name: tuple(t.inputs) for name, t in config.templates.items() if t.inputs},
        inputs_in_task=frozenset(name for name, t in config.templates.items() if t.collect_inputs == "during"),
    )


def _cipher(config: DeploymentConfig) -> BindingCipher:
    """The call-binding cipher from ``[approval]`` keys; a dev-mode server may make one up."""
    section = config.approval
    keys = dict(section.binding_keys)
    if section.binding_key_file is not None:
        path = config.resolve(section.binding_key_file)
        try:
            keys.update(tomllib.loads(path.read_text(encoding="utf-8")))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"{config.path}: approval.binding_key_file: cannot read {path} ({exc})") from None
    if keys:
        try:
            return BindingCipher.from_base64(keys)
        except ValueError as exc:
            raise ConfigError(f"{config.path}: approval.binding_keys: {exc}") from None
    if not config.server.dev_mode:
        raise ConfigError(
            f"{config.path}: approval.binding_keys: a key is required to encrypt stored tool calls "
            "(set binding_keys or binding_key_file, or server.dev_mode = true for development)"
        )
    logger.warning(
        "dev mode: call bindings are sealed with a per-process key; pending approvals will not survive a restart"
    )
    return BindingCipher.ephemeral()


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
