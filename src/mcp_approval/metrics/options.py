"""``[metrics]``: whether and where the Prometheus endpoint is served (cheap to import, no Prometheus)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, SecretStr, field_validator, model_validator

__all__ = ["MetricsOptions"]


class MetricsOptions(BaseModel):
    """``[metrics]``: the Prometheus endpoint (off by default)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    #: Serve the metrics.
    enabled: bool = False
    #: The path they are served at on the HTTP app.
    path: str = "/metrics"
    #: The bearer token a scraper must send (``Authorization: Bearer ...``); required when enabled.
    bearer_token: SecretStr | None = None

    @field_validator("path")
    @classmethod
    def _absolute(cls, path: str) -> str:
        if not path.startswith("/") or path.endswith("/"):
            raise ValueError(f"must start with '/' and not end with it, not {path!r}")
        return path

    @model_validator(mode="after")
    def _guarded(self) -> MetricsOptions:
        if self.enabled and (self.bearer_token is None or not self.bearer_token.get_secret_value()):
            raise ValueError("metrics.bearer_token: required when metrics.enabled is true (the endpoint is guarded)")
        return self
