"""The reference AuthZEN PDP + ARAP Access Request Service, wired from an ``arap-server`` config.

:func:`build_arap_server` returns an :class:`ArapServer` whose ``app`` (Starlette) serves, on one
origin ``B`` (the PDP identifier):

- ``/.well-known/authzen-configuration``, ``/access/v1/evaluation(s)`` (:mod:`.pdp_api` over
  ``CedarPDP`` wrapped by :class:`~.arap_pdp.BindingPDP`), ``/.well-known/jwks.json``;
- ``/access/v1/requests`` (submit, status, cancel; :mod:`.ars_routes`);
- ``/approvals`` and ``/console`` (the local backend's reviewer API and reviewer console, the very
  same components ``serve`` mounts), plus any ``extra_routes``;
- ``/openapi.json``, the OpenAPI document of all of them but ``extra_routes``.

ARAP specifies HTTPS. ``http://`` is accepted only for a loopback host with ``[arap] dev_mode``,
and logs a WARNING: a documented deviation for local runs. TLS itself is terminated by uvicorn
(``--ssl-certfile``/``--ssl-keyfile``) or a proxy in front.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import BaseRoute

from mcp_approval._background import finish_or_cancel, pause_unless_stopping
from mcp_approval.backends import AutoResolver, LocalApprovalBackend, RequestSeal, resolvers_from_config
from mcp_approval.backends.local.schema import LOCAL_BACKEND_MIGRATIONS
from mcp_approval.clock import Clock, SystemClock
from mcp_approval.hosts import is_loopback_host
from mcp_approval.keyring import BindingCipher, warn_if_readable_by_others
from mcp_approval.openapi import openapi_document, openapi_route
from mcp_approval.policy import CedarPDP, EntityMapping
from mcp_approval.reference.arap_pdp import BindingPDP, IssuedApprovalVerifier
from mcp_approval.reference.ars import AccessRequestService
from mcp_approval.reference.ars_outbox import CallbackOutbox, queue_callback
from mcp_approval.reference.ars_routes import JWKS_PATH, REQUESTS_PATH, ars_routes, jwks_route, token_authenticator
from mcp_approval.reference.ars_schema import ARS_MIGRATIONS
from mcp_approval.reference.ars_store import ArapStore
from mcp_approval.reference.ars_submission import DenialChecker
from mcp_approval.reference.config import ArapServerConfig
from mcp_approval.reference.openapi_paths import ars_paths, pdp_paths
from mcp_approval.reference.pdp_api import EchoRequestIdMiddleware, pdp_routes
from mcp_approval.reference.signing import KeySet, load_key_set
from mcp_approval.reviewers import PasskeyStepUp, console_paths, reviewer_paths, reviewer_surface
from mcp_approval.reviewers.passkey_openapi import passkey_paths
from mcp_approval.storage import (
    AUDIT_MIGRATIONS,
    SHARED_MIGRATIONS,
    AuditLog,
    Database,
    SqlEventWindow,
    migrate,
    open_database,
)
from mcp_approval.storage.audit_linker import AuditLinker
from mcp_approval.web.throttle import FailedLoginThrottle

__all__ = [
    "ArapServer",
    "build_arap_server",
    "check_base_url",
    "configured_request_seal",
    "request_seal",
    "reviewer_backend",
]

logger = logging.getLogger("mcp_approval.reference")


@dataclass
class ArapServer:
    """Everything :func:`build_arap_server` wired; ``app`` runs :meth:`start`/:meth:`stop` in its lifespan."""

    config: ArapServerConfig
    base_url: str
    database: Database
    keys: KeySet
    store: ArapStore
    backend: LocalApprovalBackend
    service: AccessRequestService
    pdp: BindingPDP
    audit: AuditLog
    routes: list[BaseRoute] = field(default_factory=list)
    #: Reviewers' passkeys, when a template has ``step_up = "passkey"``.
    passkeys: PasskeyStepUp | None = None
    app: Starlette = field(init=False)
    _sweeper: asyncio.Task[None] | None = field(default=None, init=False)
    _stopping: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    _linker: AuditLinker | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.app = Starlette(routes=self.routes, middleware=[Middleware(EchoRequestIdMiddleware)], lifespan=self._life)

    @property
    def access_request_endpoint(self) -> str:
        """``B/access/v1/requests``."""
        return self.service.endpoint

    async def start(self) -> None:
        """Migrate the store and start the backend (resolvers left pending by a previous process resume).

        The service's database holds the reviewer workflow (the local backend's tables), the audit
        log and the ARS's own tables; no task or PEP-side approval tables. Like every start of the
        local backend, this one seals no Access Request: one stored without its seals (by an earlier
        release, or written to the database without the signing key) is logged at ERROR and stays an
        integrity failure until ``mcp-approval upgrade seal-requests --config arap-server.toml``.
        """
        passkeys = self.passkeys.migrations if self.passkeys is not None else ()
        histories = (AUDIT_MIGRATIONS, SHARED_MIGRATIONS, LOCAL_BACKEND_MIGRATIONS, ARS_MIGRATIONS, *passkeys)
        await migrate(self.database, *histories)
        self._linker = AuditLinker(self.audit)
        await self._linker.start()
        await self.backend.start(self.service.on_backend_change)
        if self.service.callbacks is not None:
            await self.service.callbacks.start()  # including callbacks a previous process still owed
        self._stopping.clear()
        self._sweeper = asyncio.create_task(self._sweep_loop())

    async def _sweep_loop(self) -> None:
        """Run :meth:`AccessRequestService.sweep_once` every ``[arap] sweep_interval_s``."""
        while not self._stopping.is_set():
            try:
                await self.service.sweep_once()
            except Exception as exc:  # an unreachable store for a moment: the next pass retries
                logger.warning("arap-server sweep failed: %s", type(exc).__name__)
            await pause_unless_stopping(self._stopping, self.config.arap.sweep_interval_s)

    async def stop(self) -> None:
        """Stop background work and close the store.

        A sweep in progress finishes first (see :mod:`mcp_approval._background`).
        """
        self._stopping.set()
        sweeper, self._sweeper = self._sweeper, None
        await finish_or_cancel([sweeper])
        await self.backend.stop()
        if self.service.callbacks is not None:
            await self.service.callbacks.stop()
        if self._linker is not None:
            await self._linker.stop()
            self._linker = None
        await self.database.close()

    @asynccontextmanager
    async def _life(self, _app: Starlette) -> AsyncIterator[None]:
        await self.start()
        try:
            yield
        finally:
            await self.stop()


def check_base_url(base_url: str, *, dev_mode: bool) -> str:
    """``base_url`` without a trailing slash, if ARAP (or the dev-mode deviation) allows it.

    Raises:
        ValueError: not ``https``, and not ``http`` on loopback with dev mode.
    """
    url = base_url.rstrip("/")
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return url
    if parts.scheme == "http" and parts.hostname and is_loopback_host(parts.hostname):
        if not dev_mode:
            raise ValueError(f"{url}: ARAP requires https; plain http on loopback needs [arap] dev_mode = true")
        logger.warning("dev mode: serving ARAP over plain http at %s (a deviation: ARAP requires https)", url)
        return url
    raise ValueError(f"{url}: ARAP requires an https base URL (http is allowed only on loopback in dev mode)")


def request_seal(keys: KeySet) -> BindingCipher:
    """What seals the reviewer content of each Access Request: a key derived from the signing key.

    Derived, not random, so that every worker and the review CLI on the same key file check the same
    seals, and a restart keeps pending requests approvable (a dev-mode key of its own lives as long
    as the process, like the tokens it signs).
    """
    key_id = "ars-" + keys.signing.kid.replace(":", "_")
    return BindingCipher({key_id: keys.signing.derive_secret("ars-request-seal")})


def configured_request_seal(config: ArapServerConfig) -> BindingCipher | None:
    """The seal of a config with a signing key file (``None`` without one: nothing to check against).

    Raises:
        ValueError: the key file does not load.
    """
    key_file = config.arap.signing_key_file
    if key_file is None:
        return None
    return request_seal(load_key_set(config.resolve(key_file), config.arap.key_id, dev_mode=config.arap.dev_mode))


def reviewer_backend(
    config: ArapServerConfig,
    database: Database,
    *,
    resolvers: Sequence[AutoResolver] = (),
    audit: AuditLog | None = None,
    clock: Clock | None = None,
    seal: RequestSeal | None = None,
) -> LocalApprovalBackend:
    """The local approval backend behind an arap-server (the ``mcp-approval review`` CLI uses it too).

    With a callback secret, every transaction that ends a request owes its task's callback
    (:func:`~.ars_outbox.queue_callback`), whichever process (server worker or CLI) ends it.
    With ``seal`` (:func:`request_seal`), a request whose stored row was edited is flagged
    ``integrity_failure`` and cannot be approved.
    """
    return LocalApprovalBackend(
        database,
        templates=config.templates,
        roles=config.roles_of,
        resolvers=resolvers,
        redact=config.approval.redact_arguments,
        audit=audit,
        clock=clock,
        on_terminal=queue_callback if config.arap.callback_secret is not None else None,
        seal=seal,
    )


def build_arap_server(
    config: ArapServerConfig,
    *,
    store_url: str | None = None,
    base_url: str,
    clock: Clock | None = None,
    extra_routes: Sequence[BaseRoute] = (),
) -> ArapServer:
    """Wire the reference PDP + ARS; ``store_url`` overrides ``[store]``.

    Raises:
        ValueError: a base URL ARAP forbids, a missing signing key outside dev mode, a bad resolver.
        PolicyLoadError: the policy files do not load.
    """
    settings = config.arap
    base = check_base_url(base_url, dev_mode=settings.dev_mode)
    prefix = urlsplit(base).path
    endpoint = base + REQUESTS_PATH
    time = clock or SystemClock()
    key_file = config.resolve(settings.signing_key_file) if settings.signing_key_file else None
    if key_file is not None:
        warn_if_readable_by_others(key_file, setting="arap.signing_key_file")
    keys = load_key_set(key_file, settings.key_id, dev_mode=settings.dev_mode)
    database = open_database(store_url or config.store_url())
    store = ArapStore(database)
    audit = AuditLog(database, time)
    resolvers = resolvers_from_config(config.resolvers)
    # Reviewers see only content that still matches what was submitted (an edited row fails closed).
    backend = reviewer_backend(config, database, resolvers=resolvers, audit=audit, clock=time, seal=request_seal(keys))
    verifier = IssuedApprovalVerifier(
        keys=keys, pdp_id=base, ars_id=endpoint, store=store, grant_delay_s=settings.grant_delay_s, clock=time
    )
    policy = config.policy
    cedar = CedarPDP.from_files(
        config.resolve(policy.cedar),
        config.resolve(policy.entities) if policy.entities else None,
        config.resolve(policy.schema_file) if policy.schema_file else None,
        clock=time,
        mapping=EntityMapping(decimals=tuple(policy.decimals)),
        default_deadline=timedelta(seconds=settings.denial_lifetime_s),
        approval_verifier=verifier,
        access_request_endpoint=endpoint,
    )
    pdp = BindingPDP(
        cedar,
        keys=keys,
        pdp_id=base,
        ars_endpoint=endpoint,
        store=store,
        members=settings.binding_context_members,
        token_lifetime_s=settings.token_lifetime_s,
        retry_after_s=settings.retry_after_s,
        clock=time,
    )
    checker = DenialChecker(
        keys=keys, pdp_id=base, ars_id=endpoint, store=store, skew_s=settings.clock_skew_s, clock=time
    )
    service = AccessRequestService(
        backend=backend,
        store=store,
        checker=checker,
        keys=keys,
        pdp_id=base,
        endpoint=endpoint,
        settings=settings,
        resolved_templates=frozenset(resolver.template for resolver in resolvers),
        callbacks=CallbackOutbox(database, secret=secret.get_secret_value(), requests_endpoint=endpoint, clock=time)
        if (secret := settings.callback_secret)
        else None,
        audit=audit,
        clock=time,
        submission_events=SqlEventWindow(database),  # one submission limit for every worker
    )
    # One limit on failed sign-ins for the reviewer API and console, shared by every worker on the store.
    throttle = FailedLoginThrottle(time, events=SqlEventWindow(database))
    # Wrong client tokens have a limit of their own (a PEP's failures do not lock reviewers out), also shared.
    client_throttle = FailedLoginThrottle(time, events=SqlEventWindow(database), scope="ars-client")
    step_up = any(template.step_up == "passkey" for template in config.templates.values())
    passkeys = PasskeyStepUp(database, origin=base, clock=time, audit=audit) if step_up else None
    routes: list[BaseRoute] = [
        *pdp_routes(pdp, base_url=base, access_request_endpoint=endpoint, jwks_uri=base + JWKS_PATH),
        jwks_route(keys, prefix=prefix),
        *ars_routes(service, token_authenticator(config.client_tokens()), prefix=prefix, throttle=client_throttle),
        *reviewer_surface(
            backend,
            token_authenticator(config.tokens()),
            audit,
            database=database,
            clock=time,
            throttle=throttle,
            passkeys=passkeys,
        ),
        *extra_routes,
    ]
    paths = [pdp_paths(prefix), ars_paths(prefix), reviewer_paths(), console_paths()]
    if passkeys is not None:
        paths.append(passkey_paths())
    routes.append(openapi_route(openapi_document("mcp-approval arap-server", "1", *paths)))
    return ArapServer(config, base, database, keys, store, backend, service, pdp, audit, routes, passkeys)
