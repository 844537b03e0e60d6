"""Every refusal in one shape, whatever layer produces it (docs/api/index.md)::

    {"outcome": "<one word>", "detail": "<a sentence a person can act on>",
     "errors": [{"field": "<where>", "problem": "<what>"}]}        # errors: may be empty

``exception_answers`` is the one table from exception to answer that the app installs.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from spark_offset_sidecar.errors import (
    Forbidden,
    IdentityUnavailable,
    InvalidEvent,
    KafkaReadError,
    OffsetsNotFound,
    RateLimited,
    StoreError,
    StoreRefused,
    StoreUnavailable,
    Unauthenticated,
    shown,
)
from spark_offset_sidecar.observe.metrics import SidecarMetrics

log = logging.getLogger(__name__)
Handler = Callable[[Request, Any], Awaitable[Response]]
# Starlette's own refusals (routing, FastAPI's body parsing, routes' HTTPException), by status.
_HTTP_OUTCOMES = {
    400: "invalid",
    404: "not_found",
    405: "method_not_allowed",
    413: "invalid",
    503: "unavailable",
}


def refusal_body(
    outcome: str, detail: str, errors: Iterable[tuple[str, str]] = ()
) -> dict[str, Any]:
    return {
        "outcome": outcome,
        "detail": detail,
        "errors": [{"field": field, "problem": problem} for field, problem in errors],
    }


def refusal_bytes(outcome: str, detail: str) -> bytes:
    """The body as bytes, for ASGI middleware that answers before any route runs."""
    return json.dumps(refusal_body(outcome, detail)).encode()


def refusal(
    status: int,
    outcome: str,
    detail: str,
    *,
    errors: Iterable[tuple[str, str]] = (),
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    return JSONResponse(refusal_body(outcome, detail, errors), status_code=status, headers=headers)


def _invalid(errors: list[tuple[str, str]]) -> JSONResponse:
    summary = "; ".join(f"{field}: {problem}" for field, problem in errors)
    return refusal(422, "invalid", summary, errors=errors)


def _field_problem(error: Mapping[str, Any]) -> tuple[str, str]:
    """(field, problem) of one of FastAPI's validation errors."""
    if error["type"] == "json_invalid":  # loc is ("body", position)
        why = error.get("ctx", {}).get("error", "")
        return "body", f"is not JSON ({why} at position {error['loc'][-1]})"
    field = ".".join(str(part) for part in error["loc"] if part != "body")
    return shown(field) or "body", shown(str(error["msg"]))


def _body_problem(exc: HTTPException) -> str | None:
    """What FastAPI's "There was an error parsing the body" was about (its cause)."""
    cause = exc.__cause__
    if isinstance(cause, RecursionError):
        return "is nested too deep to parse"
    if isinstance(cause, UnicodeDecodeError):
        return "is not valid UTF-8"
    if cause is not None:
        return f"could not be parsed ({type(cause).__name__})"
    return None


def exception_answers(metrics: SidecarMetrics) -> dict[type[Exception], Handler]:  # noqa: C901  (one handler per error)
    """Exception -> answer, for ``app.add_exception_handler``."""

    async def validation(_request: Request, exc: RequestValidationError) -> Response:
        metrics.invalid_events.labels("validation").inc()
        return _invalid([_field_problem(error) for error in exc.errors()])

    async def invalid_event(_request: Request, exc: InvalidEvent) -> Response:
        metrics.invalid_events.labels("validation").inc()
        return _invalid([(exc.field, exc.problem)])

    async def http_exception(_request: Request, exc: HTTPException) -> Response:
        if exc.status_code == 400 and (problem := _body_problem(exc)) is not None:
            metrics.invalid_events.labels("validation").inc()
            return _invalid([("body", problem)])
        outcome = _HTTP_OUTCOMES.get(exc.status_code, "error")
        return refusal(exc.status_code, outcome, str(exc.detail), headers=exc.headers)

    async def store_unavailable(_request: Request, exc: StoreUnavailable) -> Response:
        metrics.store_unavailable.inc()
        log.error("answering 503: %s", exc)
        return refusal(
            503, "unavailable", f"not stored, retry later: {exc}", headers={"Retry-After": "1"}
        )

    async def unauthenticated(_request: Request, exc: Unauthenticated) -> Response:
        metrics.invalid_events.labels("unauthenticated").inc()
        return refusal(
            401, "unauthenticated", str(exc), headers={"WWW-Authenticate": exc.challenge}
        )

    async def forbidden(_request: Request, exc: Forbidden) -> Response:
        metrics.invalid_events.labels("forbidden").inc()
        log.warning("refused: %s", exc)
        return refusal(403, "forbidden", str(exc))

    async def rate_limited(_request: Request, exc: RateLimited) -> Response:
        metrics.invalid_events.labels("rate_limited").inc()
        retry_after = str(max(1, math.ceil(exc.retry_after)))
        return refusal(429, "rate_limited", str(exc), headers={"Retry-After": retry_after})

    async def offsets_not_found(_request: Request, exc: OffsetsNotFound) -> Response:
        return refusal(404, "not_found", str(exc))

    async def kafka_read_error(_request: Request, exc: KafkaReadError) -> Response:
        return refusal(503, "unavailable", str(exc), headers={"Retry-After": "1"})

    async def identity_unavailable(_request: Request, exc: IdentityUnavailable) -> Response:
        log.warning("answering 503: %s", exc)
        return refusal(503, "unavailable", str(exc), headers={"Retry-After": "5"})

    async def store_refused(_request: Request, exc: StoreRefused) -> Response:
        metrics.invalid_events.labels("validation").inc()
        log.warning("refused: %s", exc)
        problem = "holds a value the database cannot store"
        return refusal(422, "invalid", f"not stored: {exc}", errors=[("body", problem)])

    async def store_error(_request: Request, exc: StoreError) -> Response:
        log.error("answering 500: %s", exc)
        return refusal(500, "error", f"not stored: {exc}")

    async def unexpected(_request: Request, exc: Exception) -> Response:
        log.error("answering 500: unexpected %s", type(exc).__name__, exc_info=exc)
        return refusal(500, "error", "internal error; the service's log has the details")

    return {
        RequestValidationError: validation,
        InvalidEvent: invalid_event,
        HTTPException: http_exception,
        StoreUnavailable: store_unavailable,
        StoreRefused: store_refused,
        Unauthenticated: unauthenticated,
        Forbidden: forbidden,
        RateLimited: rate_limited,
        OffsetsNotFound: offsets_not_found,
        KafkaReadError: kafka_read_error,
        IdentityUnavailable: identity_unavailable,
        StoreError: store_error,
        Exception: unexpected,
    }
