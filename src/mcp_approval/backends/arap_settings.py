"""``[arap]``: how the PEP talks to the Access Request Service (cheap to import, no HTTP client)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from mcp_approval.hosts import callback_url_problem

__all__ = ["ArapSettings"]


class ArapSettings(BaseModel):
    """How the PEP talks to the Access Request Service (``[arap]`` in a deployment file).

    One model serves code and file alike: ``ArapSettings(token=..., poll_max_s=61)`` and
    ``[arap] poll_max_s = 61`` are refused by the same rule, with the same message. The token and
    the callback secret are :class:`~pydantic.SecretStr` and print as ``**********``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: The PEP's bearer token at the Access Request Service.
    token: SecretStr = Field(min_length=1)
    #: Origins trusted besides the metadata's ``access_request_endpoint`` (https).
    allowed_origins: tuple[str, ...] = ()
    #: Development only: accept plain http on 127.0.0.1 / localhost (logs a WARNING).
    dev_insecure_loopback: bool = False
    #: Bound on one whole HTTP exchange with the ARS.
    timeout_s: float = Field(default=5.0, gt=0)
    #: First status-poll delay; doubles per poll with jitter, up to ``poll_max_s``.
    poll_initial_s: float = Field(default=2.0, gt=0)
    #: Longest delay between status polls (ARAP caps backoff at 60 s).
    poll_max_s: float = Field(default=60.0, gt=0, le=60)
    #: How often one submission is tried (same Idempotency-Key) before the call fails closed.
    submit_attempts: int = Field(default=3, ge=1, le=10)
    #: This server's callback URL given to the ARS (needs ``[approval] callback_secret``).
    callback_url: str | None = None
    #: The HMAC secret callbacks are signed with, also keying ``callback.state`` (a deployment
    #: takes it from ``[approval] callback_secret``).
    callback_secret: SecretStr | None = None
    #: ``client.name`` sent with submissions (a deployment takes it from ``[server] name``).
    client_name: str | None = None

    @field_validator("callback_url")
    @classmethod
    def _well_formed_callback(cls, url: str | None) -> str | None:
        """A callback URL without user info, with a valid port (trust is checked by the backend)."""
        problem = callback_url_problem(url) if url is not None else None
        if problem is not None:
            raise ValueError(f"callback_url {problem}")
        return url
