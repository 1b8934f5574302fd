"""OpenTelemetry spans around the gate, the approval backend and execution, when the API is installed.

With the ``opentelemetry-api`` package (``pip install 'mcp-approval[otel]'``), :func:`span` opens a
span of the tracer ``mcp_approval`` under the current one; without it, it does nothing. Spans
reach an exporter only when the application configures a tracer provider (the OpenTelemetry
SDK); otherwise the API's own no-op provider drops them.

Attributes name what happened (the tool, the decision, the task id, the outcome), never an
argument value, a token, a comment or an idempotency key: the callers pass only those, and the
exceptions a span sees are recorded by type alone, because their messages may quote a request.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

try:
    from opentelemetry import context as _otel_context
    from opentelemetry import trace as _otel_trace
except ImportError:  # tracing is optional: without the API package every span is a no-op
    _otel_context = None  # type: ignore[assignment]
    _otel_trace = None  # type: ignore[assignment]

__all__ = ["TRACER_NAME", "Span", "span", "tracing_available"]

#: The instrumentation scope of every span; the span names are ``mcp_approval.<name>``.
TRACER_NAME = "mcp_approval"

Attribute = str | int | bool


def tracing_available() -> bool:
    """Whether the ``opentelemetry-api`` package is installed (spans are opened at all)."""
    return _otel_trace is not None


class Span:
    """The span :func:`span` opened, or nothing: callers add attributes without caring which."""

    def __init__(self, span: Any | None) -> None:
        self._span = span

    def set(self, key: str, value: Attribute | None) -> None:
        """Set ``mcp_approval.<key>`` (``None``: leave it unset)."""
        if self._span is not None and value is not None:
            self._span.set_attribute(f"{TRACER_NAME}.{key}", value)


@contextmanager
def span(name: str, *, root: bool = False, **attributes: Attribute | None) -> Iterator[Span]:
    """A span ``mcp_approval.<name>`` with ``mcp_approval.<key>`` attributes (``None`` values left out).

    ``root``: the span starts a trace of its own instead of joining the current one, for work
    done in the background (a status check, an approved call's execution), which may run from
    a task that merely happened to be started while a request was being answered.

    An exception leaving the block marks the span as an error with its type as ``error.type``.
    """
    if _otel_trace is None:
        yield Span(None)
        return
    # Fetched per span, so a tracer provider configured after import is used.
    tracer = _otel_trace.get_tracer(TRACER_NAME)
    parent = _otel_context.Context() if root else None  # an empty context: no parent span
    with tracer.start_as_current_span(
        f"{TRACER_NAME}.{name}", context=parent, record_exception=False, set_status_on_exception=False
    ) as current:
        traced = Span(current)
        for key, value in attributes.items():
            traced.set(key, value)
        try:
            yield traced
        except BaseException as exc:
            current.set_attribute("error.type", type(exc).__qualname__)
            current.set_status(_otel_trace.StatusCode.ERROR)
            raise
