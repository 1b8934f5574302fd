"""``Approvals``: human and rule-based approval for the tools of your own ``MCPServer``."""

from __future__ import annotations

import importlib.metadata
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any, TypedDict

import mcp_types as types
from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.context import ServerMiddleware
from mcp.server.mcpserver import Context, Extension, MCPServer
from mcp.server.request_state import RequestStateSecurity
from starlette.applications import Starlette
from starlette.routing import BaseRoute

from mcp_approval._sdk import registered_tool
from mcp_approval.approval.call.limits import McpBodyLimit
from mcp_approval.approval.engine.dependencies import ApprovalDependencies, PrincipalCheck, always_valid
from mcp_approval.approval.engine.driver import WorkflowDriver
from mcp_approval.approval.gate import PolicyGate
from mcp_approval.approval.options import ApprovalOptions
from mcp_approval.approval.persistence.outcomes import WorkflowOutcomes
from mcp_approval.approval.persistence.schema import APPROVAL_MIGRATIONS
from mcp_approval.approval.persistence.store import ApprovalStore
from mcp_approval.approval.service import APPROVAL_HANDLER, ToolApproval, ToolApprovalExtension
from mcp_approval.approval.tools import ServerTools
from mcp_approval.approval.without_tasks.answers import APPROVAL_STATUS_TOOL
from mcp_approval.approval.without_tasks.requester_page import requester_page_route
from mcp_approval.backends import ApprovalBackend, SupportsReview, SupportsSealing, SupportsTables, SupportsTemplates
from mcp_approval.backends.arap import ArapBackend
from mcp_approval.backends.callbacks import callback_paths, callback_route
from mcp_approval.clock import Clock, SystemClock
from mcp_approval.keyring import binding_cipher, warn_if_readable_by_others
from mcp_approval.metrics import ApprovalMetrics, MetricsOptions, metrics_paths, metrics_route
from mcp_approval.notify import NotificationOptions, notification_outbox
from mcp_approval.notify.anchors import AnchorOptions, AuditAnchors
from mcp_approval.openapi import openapi_document, openapi_route
from mcp_approval.policy import PolicyDecisionPoint, ToolCallMapper
from mcp_approval.policy.http import HttpPDP
from mcp_approval.reviewers import PasskeyStepUp, console_paths, reviewer_paths, reviewer_surface
from mcp_approval.reviewers.oidc_routes import OidcSignIn
from mcp_approval.reviewers.passkey_openapi import passkey_paths
from mcp_approval.server.validation import check_library_templates, check_library_tools
from mcp_approval.storage import (
    AUDIT_MIGRATIONS,
    SHARED_MIGRATIONS,
    AuditLog,
    Database,
    Migrations,
    SqlEventWindow,
    SqlOnceGuard,
    migrate,
)
from mcp_approval.storage.audit_linker import AuditLinker
from mcp_approval.tasks import TASKS_MIGRATIONS, TaskOptions, TasksExtension, task_routing_middleware
from mcp_approval.tasks.options import PrincipalLookup
from mcp_approval.tasks.sql_store import SqlTaskStore
from mcp_approval.web.proxies import UntrustedForwardedFor, http_server_settings
from mcp_approval.web.throttle import FailedAuthenticationLimit, FailedLoginThrottle

__all__ = ["Approvals", "ReviewerAuthenticator", "ServerOptions"]

logger = logging.getLogger("mcp_approval.server")

ReviewerAuthenticator = Callable[[str], Awaitable[str | None]]
"""Maps a reviewer's bearer token to the reviewer's principal id (``None``: not a reviewer)."""


class ServerOptions(TypedDict):
    """The :class:`~mcp.server.mcpserver.MCPServer` keyword arguments :meth:`Approvals.server_options` gives."""

    extensions: Sequence[Extension]
    middleware: Sequence[ServerMiddleware[Any]]
    lifespan: Callable[[MCPServer[Any]], Any]
    token_verifier: TokenVerifier | None
    auth: AuthSettings | None
    request_state_security: RequestStateSecurity


class Approvals:
    """Put approval in front of the tools of an ``MCPServer``: the policy decides every call,
    and a call the policy lets reviewers lift becomes a task that runs once it is approved.

    Build it once, hand its :meth:`server_options` to your server, register your tools as
    usual, and serve it with :meth:`run` (MCP at ``/mcp``, the reviewer API at ``/approvals``,
    the console at ``/console``; :meth:`http_app` is the ASGI app). ``examples/library/server.py``
    is a complete server; in short::

        from mcp.server.mcpserver import MCPServer

        from mcp_approval.approval import ApprovalOptions
        from mcp_approval.backends import ApprovalTemplate, LocalApprovalBackend
        from mcp_approval.policy import CedarPDP
        from mcp_approval.server import Approvals, StaticTokenVerifier, local_auth_settings
        from mcp_approval.storage import open_database

        database = open_database("sqlite:///app.db")
        approvals = Approvals(
            CedarPDP.from_files("policy.cedar", "entities.json"),
            LocalApprovalBackend(  # who decides the policy's @requestable("payments") denials
                database,
                templates={"payments": ApprovalTemplate(reviewer_role="approver")},
                roles=lambda principal: frozenset({"approver"}) if principal == "carol" else frozenset(),
            ),
            database=database,
            principals=StaticTokenVerifier({"alice-token": "alice", "carol-token": "carol"}),
            auth=local_auth_settings("http://127.0.0.1:8000"),
            options=ApprovalOptions(ephemeral_binding_key=True),  # development: binding_keys in production
        )
        server = MCPServer("bank", **approvals.server_options())

        @server.tool()
        def pay(to: str, amount: int) -> str:
            return f"paid {amount} to {to}"

        approvals.run(server, host="127.0.0.1", port=8000)

    The server's lifespan (from :meth:`server_options`) opens the store (creating or upgrading
    its tables), starts the approval runtime and, once the server stops, stops it and closes
    the store. Approved calls run through the server's own tools, so one ``Approvals`` serves
    one server. If your server has its own lifespan, enter ``approvals.lifespan(server)`` in it.

    Args:
        policy: decides every call (:class:`~mcp_approval.policy.CedarPDP`,
            :class:`~mcp_approval.policy.http.HttpPDP`, or your own ``PolicyDecisionPoint``);
            an ``HttpPDP`` is closed when the server stops.
        backend: where approval requests go (:class:`LocalApprovalBackend`, :class:`ArapBackend`,
            or your own ``ApprovalBackend``). A local backend built without ``seal=`` seals its
            requests under the call-binding key, so an edited request row cannot be approved.
        database: the SQL store of tasks and approval state (``open_database(url)`` with
            ``sqlite:///PATH`` or ``postgresql://...``); the same one a local backend keeps its
            requests in. Closed when the server stops.
        principals: who is calling: an SDK ``TokenVerifier`` (bearer tokens on HTTP; needs
            ``auth``), or a callable mapping a request context to the principal id (e.g. the one
            client of a stdio server). ``None``: the SDK's authenticated caller, for a server
            that sets up authentication itself.
        auth: the resource-server settings served with a ``TokenVerifier``
            (:func:`~mcp_approval.server.auth.local_auth_settings` for tokens this server checks itself).
        options: limits, deadlines, the call-binding keys and secrets of the approval layer.
        tasks: options of the tasks runtime.
        reviewers: maps a reviewer's bearer token to a principal id, for the reviewer API and
            console; by default ``principals`` when it is a ``TokenVerifier`` (else no reviewer routes).
        principal_valid: whether a requester may still act when its approved call is about to run.
        clock: the source of time.
        metrics: the Prometheus endpoint (:class:`~mcp_approval.metrics.MetricsOptions`; off by default).
        notifications: the channels told about a local backend's requests
            (:class:`~mcp_approval.notify.NotificationOptions`; templates pick them with ``notify``).
        trusted_proxies: addresses of the reverse proxies whose ``X-Forwarded-For`` /
            ``X-Forwarded-Proto`` are honoured (``"*"`` for any), as ``[server] trusted_proxies``
            of ``serve``. Empty (the default): a client cannot name its own address, so a
            rotating ``X-Forwarded-For`` does not escape the failed-token limit.
        audit_anchor: where the audit chain's head is written every so often and at shutdown
            (:class:`~mcp_approval.notify.options.AnchorOptions`; off by default), for
            ``mcp-approval audit verify --anchor``.
        console_sign_in: the console's sign-in with an OpenID Connect provider
            (:class:`~mcp_approval.reviewers.oidc_routes.OidcSignIn`; its ``claimed`` roles must be
            the ones the local backend's role check reads); ``None``: bearer tokens only.
        token_sign_in: whether the console also offers the bearer-token form beside OIDC.
        passkey_origin: the console's origin as reviewers' browsers open it
            (``https://approvals.example.com``), needed when a local backend's template has
            ``step_up = "passkey"``: reviewers then register passkeys in the console and confirm
            each decision on such requests with one (the relying party id is the origin's host).

    Raises:
        ValueError: an inconsistent combination (a ``TokenVerifier`` without ``auth``, no
            call-binding key), naming the option.
        ConfigError: a Cedar policy's ``@requestable("t")`` names no template of a local
            backend (``FILE:LINE: ...``, as ``serve`` says it). Once the server's tools are
            registered, its lifespan likewise refuses to start if the policy or its entities
            name a tool the server does not have.
    """

    def __init__(
        self,
        policy: PolicyDecisionPoint,
        backend: ApprovalBackend,
        *,
        database: Database,
        principals: TokenVerifier | PrincipalLookup | None,
        auth: AuthSettings | None = None,
        options: ApprovalOptions | None = None,
        tasks: TaskOptions | None = None,
        reviewers: ReviewerAuthenticator | None = None,
        principal_valid: PrincipalCheck | None = None,
        clock: Clock | None = None,
        metrics: MetricsOptions | None = None,
        notifications: NotificationOptions | None = None,
        trusted_proxies: Sequence[str] = (),
        audit_anchor: AnchorOptions | None = None,
        console_sign_in: OidcSignIn | None = None,
        token_sign_in: bool = True,
        passkey_origin: str | None = None,
    ) -> None:
        options = options or ApprovalOptions()
        task_options = tasks or TaskOptions()
        verifier, lookup = _split_principals(principals)
        if verifier is not None and auth is None:
            raise ValueError("Approvals: a TokenVerifier needs auth=AuthSettings(...) (local_auth_settings(base_url))")
        if verifier is None and auth is not None:
            raise ValueError("Approvals: auth settings come with a TokenVerifier as principals")
        if "task_poll_interval_s" not in options.model_fields_set:
            options = options.model_copy(update={"task_poll_interval_s": task_options.poll_interval_s})
        self.clock: Clock = clock or SystemClock()
        self.policy = policy
        self.options = options
        self.token_verifier = verifier
        self.auth = auth
        self.audit = AuditLog(database, clock=self.clock)
        self.audit_linker = AuditLinker(self.audit)
        self.metrics_options = metrics or MetricsOptions()
        self.trusted_proxies: tuple[str, ...] = tuple(trusted_proxies)
        self._database = database
        # The tables beside the tasks' that these approvals use (an ARAP backend keeps its requests elsewhere).
        self._histories: tuple[Migrations, ...] = (AUDIT_MIGRATIONS, SHARED_MIGRATIONS, APPROVAL_MIGRATIONS)
        if options.binding_key_file is not None:
            warn_if_readable_by_others(options.binding_key_file, setting="approval.binding_key_file")
        cipher = binding_cipher(
            options.binding_keys, key_file=options.binding_key_file, ephemeral=options.ephemeral_binding_key
        )
        # A policy template no backend template decides would only fail at the first call.
        check_library_templates(policy, backend)
        if isinstance(backend, SupportsTables):
            self._histories += backend.migrations
        if isinstance(backend, SupportsSealing):
            # What reviewers see is sealed under the binding key too, so an edited request row cannot be approved.
            backend = backend.sealed_with(cipher)
        self.backend = backend
        self.passkeys = self._passkeys(backend, database, passkey_origin)
        if self.passkeys is not None:  # reviewers' passkeys and their challenges live in the store
            self._histories += self.passkeys.migrations
        task_store = SqlTaskStore(clock=self.clock, database=database)
        self.tasks = TasksExtension(task_options, store=task_store, principal_lookup=lookup, clock=self.clock)
        mapper = ToolCallMapper()
        self._tools = ServerTools()  # the server's, once its lifespan runs
        deps = ApprovalDependencies(
            store=ApprovalStore(
                database,
                result_retention_ms=round(options.result_retention_s * 1000),
                clock=self.clock,
                audit=self.audit,
                changed=self.tasks.runtime.task_changed,
            ),
            backend=backend,
            pdp=policy,
            mapper=mapper,
            tools=self._tools,
            cipher=cipher,
            options=options,
            clock=self.clock,
            principal_valid=principal_valid or always_valid,
            task_store=task_store,
        )
        driver = WorkflowDriver(deps, worker_id=self.tasks.runtime.worker_id)
        self.approval = ToolApproval(deps, driver=driver, tasks=self.tasks)
        self.tasks.register_handler(APPROVAL_HANDLER, self.approval)
        # Outermost: every call is decided before anything else runs.
        self._status_tool = options.without_tasks == "request"
        unchecked = frozenset({APPROVAL_STATUS_TOOL}) if self._status_tool else frozenset()
        self.gate = PolicyGate(
            policy,
            mapper=mapper,
            on_requestable=self.approval,
            principal_lookup=lookup,
            unchecked_tools=unchecked,
            limits=options,
            input_schemas=self._tools,
            tool_exists=self._tools.exists,
        )
        self._reviewers = reviewers or (_verified_subject(verifier) if verifier is not None else None)
        if self._reviewers is None and console_sign_in is not None:
            # Reviewers sign in with the identity provider only: the console is mounted, no token is accepted.
            self._reviewers, token_sign_in = _no_token_accepted, False
        self._console_sign_in, self._token_sign_in = console_sign_in, token_sign_in
        # One limit on failed authentications for the reviewer API, the console and /mcp, counted in
        # the store so that every worker on it shares the limit.
        self._throttle = FailedLoginThrottle(self.clock, events=SqlEventWindow(database))
        self.outbox = notification_outbox(
            notifications or NotificationOptions(), backend, database, self.audit, clock=self.clock
        )
        if self.outbox is not None:  # a Slack channel keeps its messages' addresses in the store
            self._histories += self.outbox.migrations
        self.anchors = (
            AuditAnchors(
                audit_anchor, self.audit, channels=(notifications or NotificationOptions()).channels, clock=self.clock
            )
            if audit_anchor is not None
            else None
        )

    # -- the server ----------------------------------------------------------------------------

    def server_options(self) -> ServerOptions:
        """The ``MCPServer`` keyword arguments: ``MCPServer("name", **approvals.server_options())``.

        The extensions come in their required order (policy gate outermost, then tasks, then
        the tool-approval capability); the middleware routes ``tasks/*`` requests.
        """
        return ServerOptions(
            extensions=[self.gate, self.tasks, ToolApprovalExtension()],
            middleware=[task_routing_middleware, self.tasks.listen_middleware],
            lifespan=self.lifespan,
            token_verifier=self.token_verifier,
            auth=self.auth,
            request_state_security=self.request_state_security(),
        )

    def request_state_security(self) -> RequestStateSecurity:
        """How the server seals ``requestState``: keys derived from the call-binding keys.

        Unlike the SDK's default (a per-process key, ten minutes), a round's state then survives a
        restart, opens on every worker sharing the keys, and lasts as long as the request it names
        may be waited for and its outcome kept (``max_pending_s + result_retention_s``).
        """
        keys = self.approval.cipher.derived_keys("request-state/v1")
        ttl = self.options.max_pending_s + self.options.result_retention_s
        return RequestStateSecurity(keys=keys, ttl=ttl)

    @asynccontextmanager
    async def lifespan(self, server: MCPServer[Any]) -> AsyncIterator[dict[str, Any]]:
        """Open the store and run the approval runtime for as long as ``server`` runs.

        Raises:
            ConfigError: before anything opens, a Cedar policy or its entities name a tool
                ``server`` does not have (``FILE:LINE: ...``, as ``serve`` says it).
        """
        # Startup checks that need the server's tools (all registered by now) belong here, before the store opens.
        check_library_tools(self.policy, server)
        with self._tools.serving(server), self._approval_tools(server):
            # Every table at once, the tasks' included: one transaction, one log line (the task
            # store then finds its table current when it opens).
            await migrate(self._database, TASKS_MIGRATIONS, *self._histories)
            async with self.tasks.lifespan(server):
                await self.audit_linker.start()
                await self.approval.start()
                if self.outbox is not None:
                    await self.outbox.start()
                if self.anchors is not None:
                    await self.anchors.start()
                try:
                    yield {}
                finally:
                    if self.outbox is not None:
                        await self.outbox.stop()
                    await self.approval.stop()
                    await self.audit_linker.stop()  # links this process's last events
                    if self.anchors is not None:  # last: the head after every event of this process
                        await self.anchors.stop()
                    if isinstance(self.policy, HttpPDP):
                        await self.policy.aclose()

    @contextmanager
    def _approval_tools(self, server: MCPServer[Any]) -> Iterator[None]:
        """With ``without_tasks = "request"``: the ``approval_status`` tool, for as long as ``server`` runs."""
        if not self._status_tool:
            yield
            return
        if registered_tool(server, APPROVAL_STATUS_TOOL) is not None:
            raise ValueError(
                f"approval.without_tasks = 'request' adds a tool named {APPROVAL_STATUS_TOOL!r}; "
                "the server already has one"
            )
        approval = self.approval

        async def approval_status(reference: str, ctx: Context[Any, Any]) -> types.CallToolResult:
            return await approval.request_status(reference, ctx.request_context)  # type: ignore[no-any-return]

        server.add_tool(
            approval_status,
            name=APPROVAL_STATUS_TOOL,
            description=(
                "Where your approval request stands: pass the reference a call needing approval gave you. "
                "Read-only; it never approves or runs anything."
            ),
        )
        try:
            yield
        finally:
            server.remove_tool(APPROVAL_STATUS_TOOL)

    def routes(self) -> list[BaseRoute]:
        """The HTTP routes to mount beside MCP: backend callbacks (with ``callback_secret``) at
        ``/approvals/callback``, the requester page (with ``requester_url``) at
        ``/requests/{request_token}``, the metrics when enabled, and for a local backend the
        reviewer API at ``/approvals`` and the console at ``/console``, and with a Slack channel its
        interactions at ``/channels/{name}/interactions``."""
        routes: list[BaseRoute] = []
        secret = self.options.callback_secret
        if secret is not None:
            routes.append(self._callback_route(secret.get_secret_value()))
        if self.options.requester_url is not None:
            approval = self.approval
            routes.append(requester_page_route(approval.links, lambda reference: approval.store.get(reference)))
        if self.metrics_options.enabled:
            # Wrong scraper tokens have a limit of their own (they cannot lock reviewers out), shared by the workers.
            scrapers = FailedLoginThrottle(self.clock, events=SqlEventWindow(self._database), scope="metrics")
            alerts = self.anchors.alerts if self.anchors is not None else None
            metrics = ApprovalMetrics(self._database, self.audit, anchor_alerts=alerts)
            routes.append(metrics_route(self.metrics_options, metrics, throttle=scrapers))
        if self.outbox is not None:  # Slack's button clicks (verified by Slack's signature, not a token)
            routes += self.outbox.routes()
        if isinstance(self.backend, SupportsReview) and self._reviewers is not None:
            throttle = self._throttle  # one limit on failed sign-ins for both (and /mcp, see http_app)
            outcomes = WorkflowOutcomes(self._database, self.audit)
            routes += reviewer_surface(
                self.backend,
                self._reviewers,
                self.audit,
                database=self._database,
                clock=self.clock,
                throttle=throttle,
                outcomes=outcomes,
                oidc=self._console_sign_in,
                token_sign_in=self._token_sign_in,
                passkeys=self.passkeys,
            )
            routes += self._email_link_routes(self.backend, self._reviewers)
        return routes

    def _email_link_routes(self, backend: SupportsReview, reviewers: ReviewerAuthenticator) -> list[BaseRoute]:
        """An e-mail channel's decision links (``/console/email/...``), beside the console whose sign-in they read."""
        links = self.outbox.email_links if self.outbox is not None else None
        if links is None or not isinstance(backend, SupportsTemplates):
            return []
        from mcp_approval.notify.email_pages import email_link_routes

        return email_link_routes(
            backend, links, reviewers, backend.templates, database=self._database, clock=self.clock
        )

    def _passkeys(self, backend: ApprovalBackend, database: Database, origin: str | None) -> PasskeyStepUp | None:
        """Reviewers' passkeys when a template of the backend needs them, else ``None``."""
        if not isinstance(backend, SupportsTemplates):
            return None
        needing = sorted(name for name, template in backend.templates.items() if template.step_up == "passkey")
        if not needing:
            return None
        if origin is None:
            raise ValueError(
                f"Approvals: template {needing[0]!r} has step_up = 'passkey', which needs passkey_origin= "
                "(the console's origin as reviewers' browsers open it, e.g. https://approvals.example.com)"
            )
        return PasskeyStepUp(database, origin=origin, clock=self.clock, audit=self.audit)

    def openapi(self) -> dict[str, Any]:
        """The OpenAPI document of :meth:`routes` (served at ``/openapi.json``; ``/mcp`` is JSON-RPC)."""
        paths: list[dict[str, Any]] = []
        if self.options.callback_secret is not None:
            paths.append(callback_paths())
        if self.metrics_options.enabled:
            paths.append(metrics_paths(self.metrics_options))
        if self.outbox is not None:
            paths += self.outbox.openapi_paths()
        if isinstance(self.backend, SupportsReview) and self._reviewers is not None:
            paths += [reviewer_paths(), console_paths(oidc=self._console_sign_in is not None)]
            if self._email_link_routes(self.backend, self._reviewers):
                from mcp_approval.notify.email_pages import email_link_paths

                paths.append(email_link_paths())
            if self.passkeys is not None:
                paths.append(passkey_paths())
        return openapi_document("mcp-approval server", _version(), *paths)

    def http_app(self, server: MCPServer[Any]) -> Starlette:
        """``server``'s streamable HTTP app (MCP at ``/mcp``) with :meth:`routes` and the
        OpenAPI document (``/openapi.json``) mounted.

        Serve it with :meth:`run`. Under another runner, requests carrying ``X-Forwarded-For``
        are counted under one client address unless ``trusted_proxies`` is set, since the
        runner may have replaced the peer address with the header's (uvicorn does by default).
        """
        app = server.streamable_http_app(json_response=True)
        app.router.routes[0:0] = [*self.routes(), openapi_route(self.openapi())]
        app.add_middleware(McpBodyLimit, max_bytes=self.options.max_request_bytes, path="/mcp")
        if self.token_verifier is not None:  # wrong tokens at /mcp count against the same limit
            app.add_middleware(FailedAuthenticationLimit, throttle=self._throttle, path="/mcp")
        # Outermost, so every limit counts a client that names its own address under one key.
        app.add_middleware(UntrustedForwardedFor, trusted_proxies=self.trusted_proxies)
        return app

    def run(self, server: MCPServer[Any], *, host: str = "127.0.0.1", port: int = 8000) -> None:
        """Serve :meth:`http_app` with uvicorn until interrupted, honouring proxy headers only from
        ``trusted_proxies`` (uvicorn's own default trusts them from loopback)."""
        import uvicorn  # only the process that serves needs it

        uvicorn.run(self.http_app(server), host=host, port=port, **http_server_settings(self.trusted_proxies))

    def _callback_route(self, secret: str) -> BaseRoute:
        """Backend callbacks; for ARAP bound to the tasks this server submitted and their ``state``."""
        approval, backend = self.approval, self.backend
        if not isinstance(backend, ArapBackend):
            return callback_route(secret, approval.wake)

        async def key_of(handle: str) -> str | None:
            intent = await approval.store.by_handle(handle)
            return intent.key if intent is not None else None

        once = SqlOnceGuard(self._database)  # a replay is refused by every worker on the store
        return callback_route(secret, approval.wake, arap=backend, key_of=key_of, once=once)


def _version() -> str:
    try:
        return importlib.metadata.version("mcp-approval")
    except importlib.metadata.PackageNotFoundError:
        return "0"


def _split_principals(
    principals: TokenVerifier | PrincipalLookup | None,
) -> tuple[TokenVerifier | None, PrincipalLookup | None]:
    """A token verifier (the SDK resolves principals from tokens) or a principal lookup."""
    if principals is None:
        return None, None
    if hasattr(principals, "verify_token"):
        return principals, None
    return None, principals


async def _no_token_accepted(_token: str) -> str | None:
    return None


def _verified_subject(verifier: TokenVerifier) -> ReviewerAuthenticator:
    """Reviewers present the same bearer tokens as callers: the token's subject is the reviewer."""

    async def authenticate(token: str) -> str | None:
        access = await verifier.verify_token(token)
        return None if access is None else access.subject or access.client_id

    return authenticate
