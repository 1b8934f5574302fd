"""libpq connection parameters in a ``postgresql://`` store URL, made ready for asyncpg.

Managed PostgreSQL services hand out libpq URLs such as ``postgresql://u:p@host/db?sslmode=require``.
SQLAlchemy would pass each query parameter to ``asyncpg.connect`` as a keyword argument, which it
does not accept. Instead, the parameters asyncpg's own DSN parser understands (``sslmode`` and the
certificate files, ``target_session_attrs``, ...) stay in the DSN handed to ``asyncpg.connect``,
which builds the TLS context from them as libpq would; ``connect_timeout`` becomes its ``timeout``
argument; any other parameter is refused before connecting, naming it.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from sqlalchemy.engine import URL, make_url

from mcp_approval.errors import MCPApprovalError

__all__ = ["LIBPQ_PARAMETERS", "AsyncpgTarget", "StoreURLError", "asyncpg_target", "shown_url"]

#: libpq parameters that asyncpg reads from the DSN itself (``application_name`` and ``options``
#: travel to the server as startup settings).
_READ_BY_ASYNCPG = frozenset(
    {
        "application_name",
        "gsslib",
        "krbsrvname",
        "options",
        "passfile",
        "service",
        "ssl_max_protocol_version",
        "ssl_min_protocol_version",
        "sslcert",
        "sslcrl",
        "sslkey",
        "sslmode",
        "sslnegotiation",
        "sslpassword",
        "sslrootcert",
        "target_session_attrs",
    }
)
#: Translated into an ``asyncpg.connect`` argument: seconds to establish a connection.
_CONNECT_TIMEOUT = "connect_timeout"
#: Every query parameter a store URL may carry.
LIBPQ_PARAMETERS = _READ_BY_ASYNCPG | {_CONNECT_TIMEOUT}

#: The values libpq defines for its enumerated parameters, checked before connecting.
_CHOICES = {
    "sslmode": ("disable", "allow", "prefer", "require", "verify-ca", "verify-full"),
    "target_session_attrs": ("any", "primary", "standby", "read-write", "read-only", "prefer-standby"),
    "sslnegotiation": ("postgres", "direct"),
}


#: Query parameters that hold a secret, masked like the password wherever a URL is shown.
_SECRET_PARAMETERS = frozenset({"password", "sslpassword"})


def shown_url(url: str | URL) -> str:
    """``url`` as it may be printed or logged: its password and secret parameters replaced by ``***``."""
    parsed = make_url(url)
    shown = parsed.set(query={}).render_as_string(hide_password=True)
    if not parsed.query:
        return shown
    masked = {name: "***" if name in _SECRET_PARAMETERS else value for name, value in parsed.query.items()}
    return f"{shown}?{urlencode(masked, doseq=True, safe='*/')}"


class StoreURLError(MCPApprovalError, ValueError):
    """A store URL the PostgreSQL driver cannot use, said in one line naming the store and the parameter."""

    def __init__(self, url: URL, reason: str) -> None:
        super().__init__(f"cannot open the store {shown_url(url)}: {reason}")


@dataclass(frozen=True)
class AsyncpgTarget:
    """Where and how ``asyncpg.connect`` connects for one store URL."""

    #: A ``postgresql://`` DSN with the libpq parameters asyncpg reads itself.
    dsn: str
    #: Seconds to establish a connection (``connect_timeout``); ``None`` keeps asyncpg's default.
    timeout_s: float | None


def asyncpg_target(url: str | URL) -> AsyncpgTarget:
    """The DSN and connect timeout for a ``postgresql://`` store URL.

    Raises:
        StoreURLError: for a query parameter asyncpg does not support, a repeated one, or a
            value outside the ones libpq defines; the message names the parameter.
    """
    parsed = make_url(url)
    kept: dict[str, str] = {}
    timeout_s: float | None = None
    for name, value in parsed.query.items():
        if not isinstance(value, str):
            raise StoreURLError(parsed, f"the URL parameter {name!r} is given more than once")
        if name == _CONNECT_TIMEOUT:
            timeout_s = _connect_timeout(parsed, value)
        elif name in _READ_BY_ASYNCPG:
            _check_choice(parsed, name, value)
            kept[name] = value
        else:
            supported = ", ".join(sorted(LIBPQ_PARAMETERS))
            raise StoreURLError(
                parsed, f"the URL parameter {name!r} is not supported by the PostgreSQL driver (supported: {supported})"
            )
    dsn = parsed.set(drivername="postgresql", query=kept).render_as_string(hide_password=False)
    return AsyncpgTarget(dsn=dsn, timeout_s=timeout_s)


def _connect_timeout(url: URL, value: str) -> float | None:
    try:
        seconds = int(value)
    except ValueError:
        raise StoreURLError(url, f"the URL parameter 'connect_timeout' must be whole seconds, not {value!r}") from None
    if seconds < 0:
        raise StoreURLError(url, f"the URL parameter 'connect_timeout' must not be negative, not {value!r}")
    # As in libpq, anything shorter than 2 seconds counts as 2; 0 (libpq: no limit) keeps the
    # driver's own limit, so a store that never answers is still reported.
    return None if seconds == 0 else float(max(seconds, 2))


def _check_choice(url: URL, name: str, value: str) -> None:
    choices = _CHOICES.get(name)
    if choices is not None and value not in choices:
        raise StoreURLError(url, f"the URL parameter {name!r} must be one of {', '.join(choices)}, not {value!r}")
