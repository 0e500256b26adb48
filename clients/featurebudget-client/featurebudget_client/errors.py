"""The client's errors: the service's problem answers, and a call made to the wrong kind of
model."""

from __future__ import annotations

from typing import Any


class ServiceError(Exception):
    """A 4xx/5xx answer; ``problem`` is the problem+json body."""

    def __init__(self, status: int, problem: dict[str, Any]) -> None:
        self.status = status
        self.problem = problem
        super().__init__(f"{status} {problem.get('title', '')}: {problem.get('detail', '')}")


class ModelKindError(ValueError):
    """A call that fits the other kind of model: ``kind`` is the model's ("online" or
    "batch"); the message names the call that fits it. ``problem``: the service's 422
    body when the service refused the call, else None."""

    def __init__(self, model: str, kind: str, message: str,
                 problem: dict[str, Any] | None = None) -> None:
        self.model = model
        self.kind = kind
        self.problem = problem
        super().__init__(f"model {model!r} is {'an' if kind == 'online' else 'a'} {kind} "
                         f"model: {message}")
