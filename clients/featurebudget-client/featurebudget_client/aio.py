"""The asynchronous client (``httpx.AsyncClient``): the methods of
:class:`featurebudget_client.FeaturebudgetClient`, awaitable."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Iterable
from typing import Any

import httpx

from featurebudget_client.answers import (
    Accepted,
    BudgetedPrediction,
    Feedback,
    Job,
    ModelInfo,
    NextStep,
    Prediction,
    Versions,
)
from featurebudget_client.bodies import (
    GroupLike,
    ProgressCallback,
    auth_headers,
    batch_create_body,
    budgeted,
    cap,
    check,
    create_body,
    examples_params,
    feature_groups,
    job_timeout,
    json_request,
    key_header,
    kind_error,
    next_body,
    next_groups_body,
    predict_body,
    prediction,
)
from featurebudget_client.errors import ServiceError
from featurebudget_client.inputs import as_examples, needs_groups, with_outcomes


class AsyncFeaturebudgetClient:
    """Asynchronous client (``httpx.AsyncClient``); same methods, awaitable."""

    def __init__(self, base_url: str = "http://127.0.0.1:8000", *, api_key: str | None = None,
                 timeout: float = 60.0,
                 transport: httpx.AsyncBaseTransport | None = None,
                 http: httpx.AsyncClient | None = None) -> None:
        self.http = http or httpx.AsyncClient(base_url=base_url, headers=auth_headers(api_key),
                                              timeout=timeout, transport=transport)
        self._owned = http is None
        if http is not None and api_key:
            self.http.headers.update(auth_headers(api_key))

    async def aclose(self) -> None:
        if self._owned:
            await self.http.aclose()

    async def __aenter__(self) -> AsyncFeaturebudgetClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def create_model(self, name: str, *, algorithm: str, n_features: int | None = None,
                           hash_bits: int | None = None, budget: int | None = None,
                           params: dict[str, Any] | None = None,
                           libsvm_zero_based: bool = False) -> ModelInfo:
        body = create_body(name, algorithm, n_features, hash_bits, budget, params,
                           libsvm_zero_based)
        response = await self.http.post("/v1/models", **json_request(body))
        return ModelInfo.from_json(check(response).json())

    async def list_models(self) -> list[ModelInfo]:
        data = check(await self.http.get("/v1/models")).json()
        return [ModelInfo.from_json(m) for m in data["models"]]

    async def get_model(self, name: str, *, features: bool = True) -> ModelInfo:
        """The model's description; ``features=False``: without its selected features (a
        cheaper answer, for polling ``examples_applied`` / ``log_position`` / ``version``)."""
        response = await self.http.get(f"/v1/models/{name}",
                                       params=None if features else {"features": "false"})
        return ModelInfo.from_json(check(response).json())

    async def delete_model(self, name: str) -> None:
        check(await self.http.delete(f"/v1/models/{name}"))

    async def features(self, name: str) -> list[dict[str, Any]]:
        return check(await self.http.get(f"/v1/models/{name}/features")).json()

    async def post_examples(self, name: str, examples: Any, *, wait: bool = False,
                            idempotency_key: str | None = None, labels: Any = None,
                            targets: Any = None) -> Accepted:
        """Append examples (any form of :mod:`featurebudget_client.inputs`; ``labels`` or
        ``targets`` set each one's outcome); a retry with the same ``idempotency_key``
        appends nothing."""
        examples = with_outcomes(await self._examples(name, examples), labels, targets)
        response = await self.http.post(f"/v1/models/{name}/examples",
                                        params={"wait": "true"} if wait else None,
                                        **json_request({"examples": examples},
                                                 key_header(idempotency_key)))
        return Accepted.from_json(check(response).json())

    async def post_libsvm(self, name: str, text: bytes | str, *, wait: bool = False,
                          idempotency_key: str | None = None,
                          dry_run: bool = False) -> Accepted:
        response = await self.http.post(
            f"/v1/models/{name}/examples",
            content=text.encode() if isinstance(text, str) else text,
            headers={"Content-Type": "text/plain", **key_header(idempotency_key)},
            params=examples_params(wait, dry_run))
        return Accepted.from_json(check(response).json())

    async def post_binary(self, name: str, payload: bytes, *, wait: bool = False,
                          idempotency_key: str | None = None) -> Accepted:
        response = await self.http.post(f"/v1/models/{name}/examples", content=payload,
                                        headers={"Content-Type": "application/octet-stream",
                                                 **key_header(idempotency_key)},
                                        params={"wait": "true"} if wait else None)
        return Accepted.from_json(check(response).json())

    async def predict(self, name: str, examples: Any, *,
                      computed_groups: Iterable[str] | None = None, max_cost: float | None = None,
                      return_prediction_ids: bool | None = None
                      ) -> Prediction | BudgetedPrediction:
        """Any model's predictions: an online model's scores and labels
        (:class:`Prediction`; ``return_prediction_ids`` for :meth:`feedback`), a batch
        model's answer (:class:`BudgetedPrediction`) for exactly ``computed_groups``, the
        trained prefix within ``max_cost``, or the groups each example carries. Examples in
        any form of :mod:`featurebudget_client.inputs`. A field of the other kind of model
        raises :class:`ModelKindError` naming the call that fits."""
        body = predict_body(await self._examples(name, examples), return_prediction_ids,
                            computed_groups, max_cost)
        response = await self.http.post(f"/v1/models/{name}/predict", **json_request(body))
        try:
            return prediction(check(response).json())
        except ServiceError as exc:
            raise kind_error(name, body, exc) from None

    async def _examples(self, name: str, examples: Any) -> list[dict[str, Any]]:
        """``examples`` as JSON examples; a frame of feature names reads the model's groups
        (one ``GET``)."""
        groups = None
        if needs_groups(examples):
            groups = feature_groups((await self.get_model(name)).raw, name)
        return as_examples(examples, feature_groups=groups)

    async def feedback(self, name: str, prediction_id: str, label: int) -> Feedback:
        body = {"prediction_id": prediction_id, "label": label}
        return Feedback(**check(await self.http.post(f"/v1/models/{name}/feedback",
                                                     **json_request(body))).json())

    async def get_snapshot(self, name: str) -> bytes:
        return check(await self.http.get(f"/v1/models/{name}/snapshot")).content

    async def put_snapshot(self, name: str, blob: bytes) -> dict[str, Any]:
        return check(await self.http.put(f"/v1/models/{name}/snapshot", content=blob)).json()

    async def deadletters(self, name: str) -> list[dict[str, Any]]:
        return check(await self.http.get(f"/v1/models/{name}/deadletters")).json()["entries"]

    # ------------------------------------------------------------------ batch models
    async def create_batch_model(self, name: str, *, algorithm: str,
                                 groups: Iterable[GroupLike], task: str = "regression",
                                 params: dict[str, Any] | None = None) -> ModelInfo:
        body = batch_create_body(name, algorithm, groups, task, params)
        response = await self.http.post("/v1/models", **json_request(body))
        return ModelInfo.from_json(check(response).json())

    async def predict_batch(self, name: str, examples: Any, *,
                            computed_groups: Iterable[str] | None = None,
                            max_cost: float | None = None,
                            budget: float | None = None) -> BudgetedPrediction:
        max_cost = cap(max_cost, budget, "predict_batch")
        body = predict_body(await self._examples(name, examples),
                            computed_groups=computed_groups, max_cost=max_cost)
        return budgeted(name, check(await self.http.post(f"/v1/models/{name}/predict",
                                                         **json_request(body))).json())

    async def next_group(self, name: str, computed_groups: Iterable[str] = (),
                         max_cost: float | None = None, *,
                         budget: float | None = None) -> NextStep:
        body = next_body(computed_groups, cap(max_cost, budget, "next_group"))
        return NextStep.from_json(check(await self.http.post(f"/v1/models/{name}/next",
                                                             **json_request(body))).json())

    async def next_groups(self, name: str, examples: Any,
                          computed_groups: Iterable[str] | None = None,
                          max_cost: float | None = None,
                          exchange_rate: float | None = None) -> list[dict[str, Any]]:
        body = next_groups_body(await self._examples(name, examples), computed_groups,
                                max_cost, exchange_rate)
        return check(await self.http.post(f"/v1/models/{name}/next",
                                          **json_request(body))).json()["answers"]

    async def sequence(self, name: str) -> dict[str, Any]:
        return check(await self.http.get(f"/v1/models/{name}/sequence")).json()

    async def retrain(self, name: str) -> Job:
        return Job.from_json(check(await self.http.post(f"/v1/models/{name}/retrain")).json())

    async def job(self, name: str, job_id: str) -> Job:
        return Job.from_json(check(await self.http.get(
            f"/v1/models/{name}/jobs/{job_id}")).json())

    async def cancel_job(self, name: str, job_id: str) -> Job:
        return Job.from_json(check(await self.http.delete(
            f"/v1/models/{name}/jobs/{job_id}")).json())

    async def jobs(self, name: str) -> list[Job]:
        data = check(await self.http.get(f"/v1/models/{name}/jobs")).json()
        return [Job.from_json(j) for j in data["jobs"]]

    async def wait_for_job(self, name: str, job_id: str, *, timeout: float = 600.0,
                           poll: float = 0.2,
                           on_progress: ProgressCallback | None = None) -> Job:
        """As the sync ``wait_for_job``; ``on_progress`` may be a coroutine function."""
        deadline = time.monotonic() + timeout
        while True:
            job = await self.job(name, job_id)
            if on_progress is not None:
                outcome = on_progress(job)
                if inspect.isawaitable(outcome):
                    await outcome
            if job.done:
                return job
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise job_timeout(name, job, timeout)
            await asyncio.sleep(min(poll, remaining))

    async def versions(self, name: str) -> Versions:
        return Versions.from_json(check(await self.http.get(
            f"/v1/models/{name}/versions")).json())

    async def rollback(self, name: str, version: int) -> dict[str, Any]:
        return check(await self.http.post(f"/v1/models/{name}/rollback",
                                          **json_request({"version": version}))).json()

    async def healthz(self) -> dict[str, Any]:
        return check(await self.http.get("/healthz")).json()

    async def readyz(self) -> dict[str, Any]:
        return check(await self.http.get("/readyz")).json()

    async def metrics(self) -> str:
        return check(await self.http.get("/metrics")).text
