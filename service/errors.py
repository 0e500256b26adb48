"""Service-level errors (routes turn them into RFC 9457 problem+json responses)."""

from __future__ import annotations

from typing import Any


class ServiceError(Exception):
    """Base: an error with an HTTP status, a short title and structured details."""

    status = 400
    title = "Bad request"
    headers: dict[str, str] | None = None  # sent with the problem answer

    def __init__(self, detail: str, errors: list[dict[str, Any]] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.errors = errors or []


class InputError(ServiceError):
    """Invalid input; ``errors`` name the item / line and the field."""

    status = 422
    title = "Invalid input"


class MalformedBodyError(ServiceError):
    status = 400
    title = "Malformed request body"


class BodyTooLargeError(ServiceError):
    status = 413
    title = "Request body too large"


class UnsupportedMediaTypeError(ServiceError):
    status = 415
    title = "Unsupported media type"


class ModelNotFoundError(ServiceError):
    status = 404
    title = "Model not found"


class ModelExistsError(ServiceError):
    status = 409
    title = "Model already exists"


class InsufficientStorageError(ServiceError):
    """The state a request would add does not fit the process's memory budget (507)."""

    status = 507
    title = "Insufficient storage"


class ConflictError(ServiceError):
    """The request is valid but conflicts with the model's state (409)."""

    status = 409
    title = "Conflict"


class NotFoundError(ServiceError):
    status = 404
    title = "Not found"


class UnavailableError(ServiceError):
    status = 503
    title = "Service unavailable"


class NotOwnerError(UnavailableError):
    """This process does not fold the model, another one does (``serve --workers N``): retry
    on a new connection, which may reach the process that does (the answer closes this one;
    a retry on it would reach the same process every time)."""

    headers = {"Retry-After": "1", "Connection": "close"}


class NotReplicatedError(UnavailableError):
    """Fewer Redis replicas than ``FEATUREBUDGET_REDIS_MIN_REPLICAS`` confirmed a write in
    time: it is not acknowledged, and may or may not be kept (the master has it; a failover
    before the replicas get it drops it). A retry with the same ``Idempotency-Key`` cannot
    append it twice."""

    title = "Write not confirmed by the Redis replicas"
    headers = {"Retry-After": "1"}


class WaitTimeoutError(ServiceError):
    status = 504
    title = "Timed out waiting for the examples to be applied"


def item_error(message: str, *, item: int | None = None, line: int | None = None,
               field: str | None = None) -> InputError:
    """One-error :class:`InputError` naming where it is."""
    error: dict[str, Any] = {"message": message}
    where = []
    if item is not None:
        error["item"] = item
        where.append(f"item {item}")
    if line is not None:
        error["line"] = line
        where.append(f"line {line}")
    if field is not None:
        error["field"] = field
        where.append(f"field {field!r}")
    prefix = (", ".join(where) + ": ") if where else ""
    return InputError(prefix + message, [error])
