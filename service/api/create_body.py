"""The body of ``POST /v1/models``, read and checked off the event loop.

A batch model's groups may name up to 10^6 features in one body: decoding and validating
that (the names unique within and across groups) takes seconds of CPU. FastAPI would do it
on the event loop; :class:`CreateRoute` reads the body itself and parses it on a worker
thread, as FastAPI would (JSON, then ``ModelCreate``'s validation; the same errors). A body
over ``_PRECHECK_BYTES`` that describes a batch model too large for the process is refused
from its counts first (:func:`refuse_too_large`, O(groups)), before any name is checked.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

import orjson
from fastapi import HTTPException
from fastapi.exceptions import RequestValidationError
from pydantic import TypeAdapter, ValidationError
from starlette.requests import Request
from starlette.responses import Response

from service.api.deps import KeyCheckedRoute, read_body, require_role
from service.api.media import media_type, require_json
from service.batch.families import family_of_algorithm
from service.batch.serving.validation import validate_batch_spec
from service.errors import InputError
from service.priority import loop_seconds, offload
from service.schemas import GroupSpec, ModelCreate

_PRECHECK_BYTES = 256 << 10  # bodies this big: a batch model's size is checked first
_MAX_GROUPS = ModelCreate.model_fields["groups"].metadata[0].max_length


def parse_create(body: bytes, content_type: str | None, settings) -> ModelCreate:
    """``body`` as a :class:`ModelCreate`, or the RequestValidationError (400 for JSON that
    does not parse, else 422) FastAPI raises for it; 415 for a content type other than JSON
    (:mod:`service.api.media`); InputError (422) for a batch model too large (bodies over
    ``_PRECHECK_BYTES``). O(body)."""
    if not body:
        raise RequestValidationError([{"type": "missing", "loc": ("body",),
                                       "msg": "Field required", "input": None}])
    require_json(media_type(content_type), body)  # 415 for any other type
    try:
        document: Any = orjson.loads(body)
    except orjson.JSONDecodeError:
        try:  # (what orjson refuses and FastAPI's decoder takes: NaN, huge integers)
            document = json.loads(body)
        except UnicodeDecodeError as exc:  # (FastAPI's answer: 400, naming the cause)
            raise HTTPException(400, "There was an error parsing the body") from exc
        except ValueError as exc:
            raise RequestValidationError([{
                "type": "json_invalid", "loc": ("body", getattr(exc, "pos", 0)),
                "msg": "JSON decode error", "input": {},
                "ctx": {"error": getattr(exc, "msg", str(exc))}}]) from None
    if len(body) > _PRECHECK_BYTES:
        refuse_too_large(document, settings)
    try:
        return ModelCreate.model_validate(document)
    except ValidationError as exc:
        raise RequestValidationError([{**error, "loc": ("body", *error["loc"])} for error in
                                      exc.errors(include_url=False, include_input=False)]
                                     ) from None


def refuse_too_large(document: Any, settings) -> None:
    """InputError (422 naming each part, as the creation would) when ``document`` describes
    a batch model whose estimated sizes or retrain time pass the process's limits, judged
    from the number of features of each group alone; nothing when it does not, or is not
    of that shape (the full validation then says what is wrong). O(groups)."""
    if not isinstance(document, dict) or \
            family_of_algorithm(document.get("algorithm")) is None:
        return
    groups, params = document.get("groups"), document.get("params", {})
    task = document.get("task") or "regression"
    if not isinstance(groups, list) or not 0 < len(groups) <= _MAX_GROUPS or \
            not isinstance(params, dict) or task not in ("regression", "classification") or \
            not all(isinstance(g, dict) and isinstance(g.get("features"), list) for g in groups):
        return
    spec = ModelCreate.model_construct(
        name=str(document.get("name")), algorithm=document["algorithm"], params=params,
        task=task, budget=None, n_features=None, hash_bits=None, libsvm_zero_based=False,
        groups=[GroupSpec.model_construct(name=str(g.get("name")), features=g["features"],
                                          cost=1.0) for g in groups])
    try:
        validate_batch_spec(spec, settings, None, sizes_only=True)
    except InputError:
        raise
    except Exception:  # not judged here: the full validation names it
        return


class CreateRoute(KeyCheckedRoute):
    """``POST /v1/models``: the key checked, then the body read and parsed by
    :func:`parse_create` (off the event loop past the loop's budget:
    :func:`~service.priority.offload`), and the endpoint called with it; its answer
    rendered through the route's response model, as FastAPI renders it. The endpoint's
    signature still declares the body (the OpenAPI document)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        endpoint, status = self.endpoint, self.status_code
        adapter = TypeAdapter(self.response_model)

        async def handler(request: Request) -> Response:
            require_role(request, "write")
            state = request.app.state
            body = await read_body(request, state.settings.max_body_bytes)
            content_type = request.headers.get("content-type")
            spec = await offload(parse_create, body, content_type, state.settings,
                                 cost=loop_seconds("create_body", len(body)))
            answer = await endpoint(spec, state.manager)
            return Response(adapter.dump_json(adapter.validate_python(answer)),
                            status_code=status, media_type="application/json")

        return handler
