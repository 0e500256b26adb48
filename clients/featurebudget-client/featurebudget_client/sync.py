"""The synchronous client (``httpx.Client``): every endpoint of the featurebudget service.

>>> with FeaturebudgetClient("http://127.0.0.1:8000") as client:   # doctest: +SKIP
...     client.create_model("spam", algorithm="sofs", n_features=2**20, budget=500)
...     client.post_examples("spam", [{"indices": [3, 17], "values": [1.0, 0.5], "label": 1}])
...     client.predict("spam", [{"indices": [3], "values": [1.0]}]).labels

Batch models (named feature groups with costs; retrained into immutable versions):

>>> with FeaturebudgetClient("http://127.0.0.1:8000") as client:   # doctest: +SKIP
...     client.create_batch_model("house", algorithm="cs-g-omp",
...                               groups=[("size", ["rooms", "area"], 1.0),
...                                       ("survey", ["quality"], 20.0)])
...     client.post_examples("house", [{"features": {"size": {"rooms": 3, "area": 80}},
...                                     "target": 1.5}], wait=True)
...     job = client.wait_for_job("house", client.retrain("house").id)
...     client.predict("house", [{"features": {"size": {"rooms": 4, "area": 95}}}],
...                    max_cost=5.0).next_group
"""

from __future__ import annotations

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


class FeaturebudgetClient:
    """Synchronous client (``httpx.Client``)."""

    def __init__(self, base_url: str = "http://127.0.0.1:8000", *, api_key: str | None = None,
                 timeout: float = 60.0, transport: httpx.BaseTransport | None = None,
                 http: httpx.Client | None = None) -> None:
        self.http = http or httpx.Client(base_url=base_url, headers=auth_headers(api_key),
                                         timeout=timeout, transport=transport)
        self._owned = http is None
        if http is not None and api_key:
            self.http.headers.update(auth_headers(api_key))

    def close(self) -> None:
        if self._owned:
            self.http.close()

    def __enter__(self) -> FeaturebudgetClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def create_model(self, name: str, *, algorithm: str, n_features: int | None = None,
                     hash_bits: int | None = None, budget: int | None = None,
                     params: dict[str, Any] | None = None,
                     libsvm_zero_based: bool = False) -> ModelInfo:
        body = create_body(name, algorithm, n_features, hash_bits, budget, params,
                           libsvm_zero_based)
        return ModelInfo.from_json(check(self.http.post("/v1/models", **json_request(body))).json())

    def list_models(self) -> list[ModelInfo]:
        data = check(self.http.get("/v1/models")).json()
        return [ModelInfo.from_json(m) for m in data["models"]]

    def get_model(self, name: str, *, features: bool = True) -> ModelInfo:
        """The model's description; ``features=False``: without its selected features (a
        cheaper answer, for polling ``examples_applied`` / ``log_position`` / ``version``)."""
        response = self.http.get(f"/v1/models/{name}",
                                 params=None if features else {"features": "false"})
        return ModelInfo.from_json(check(response).json())

    def delete_model(self, name: str) -> None:
        check(self.http.delete(f"/v1/models/{name}"))

    def features(self, name: str) -> list[dict[str, Any]]:
        return check(self.http.get(f"/v1/models/{name}/features")).json()

    def post_examples(self, name: str, examples: Any, *, wait: bool = False,
                      idempotency_key: str | None = None, labels: Any = None,
                      targets: Any = None) -> Accepted:
        """Append examples (any form of :mod:`featurebudget_client.inputs`; ``labels`` or
        ``targets`` set each one's outcome); a retry with the same ``idempotency_key``
        appends nothing."""
        examples = with_outcomes(self._examples(name, examples), labels, targets)
        response = self.http.post(f"/v1/models/{name}/examples",
                                  params={"wait": "true"} if wait else None,
                                  **json_request({"examples": examples},
                                                 key_header(idempotency_key)))
        return Accepted.from_json(check(response).json())

    def post_libsvm(self, name: str, text: bytes | str, *, wait: bool = False,
                    idempotency_key: str | None = None, dry_run: bool = False) -> Accepted:
        """Append libsvm lines; ``dry_run``: check them as an append would and append
        nothing (``accepted`` counts them, ``log_ids`` is empty)."""
        response = self.http.post(f"/v1/models/{name}/examples",
                                  content=text.encode() if isinstance(text, str) else text,
                                  headers={"Content-Type": "text/plain",
                                           **key_header(idempotency_key)},
                                  params=examples_params(wait, dry_run))
        return Accepted.from_json(check(response).json())

    def post_binary(self, name: str, payload: bytes, *, wait: bool = False,
                    idempotency_key: str | None = None) -> Accepted:
        response = self.http.post(f"/v1/models/{name}/examples", content=payload,
                                  headers={"Content-Type": "application/octet-stream",
                                           **key_header(idempotency_key)},
                                  params={"wait": "true"} if wait else None)
        return Accepted.from_json(check(response).json())

    def predict(self, name: str, examples: Any, *,
                computed_groups: Iterable[str] | None = None, max_cost: float | None = None,
                return_prediction_ids: bool | None = None
                ) -> Prediction | BudgetedPrediction:
        """Any model's predictions: an online model's scores and labels
        (:class:`Prediction`; ``return_prediction_ids`` for :meth:`feedback`), a batch
        model's answer (:class:`BudgetedPrediction`) for exactly ``computed_groups``, the
        trained prefix within ``max_cost``, or the groups each example carries. Examples in
        any form of :mod:`featurebudget_client.inputs`. A field of the other kind of model
        raises :class:`ModelKindError` naming the call that fits."""
        body = predict_body(self._examples(name, examples), return_prediction_ids,
                            computed_groups, max_cost)
        response = self.http.post(f"/v1/models/{name}/predict", **json_request(body))
        try:
            return prediction(check(response).json())
        except ServiceError as exc:
            raise kind_error(name, body, exc) from None

    def _examples(self, name: str, examples: Any) -> list[dict[str, Any]]:
        """``examples`` as JSON examples; a frame of feature names reads the model's groups
        (one ``GET``)."""
        groups = None
        if needs_groups(examples):
            groups = feature_groups(self.get_model(name).raw, name)
        return as_examples(examples, feature_groups=groups)

    def feedback(self, name: str, prediction_id: str, label: int) -> Feedback:
        body = {"prediction_id": prediction_id, "label": label}
        return Feedback(**check(self.http.post(f"/v1/models/{name}/feedback",
                                               **json_request(body))).json())

    def get_snapshot(self, name: str) -> bytes:
        return check(self.http.get(f"/v1/models/{name}/snapshot")).content

    def put_snapshot(self, name: str, blob: bytes) -> dict[str, Any]:
        return check(self.http.put(f"/v1/models/{name}/snapshot", content=blob)).json()

    def deadletters(self, name: str) -> list[dict[str, Any]]:
        return check(self.http.get(f"/v1/models/{name}/deadletters")).json()["entries"]

    # ------------------------------------------------------------------ batch models
    def create_batch_model(self, name: str, *, algorithm: str, groups: Iterable[GroupLike],
                           task: str = "regression",
                           params: dict[str, Any] | None = None) -> ModelInfo:
        """A batch model over ``groups``: dicts ``{name, features, cost}`` or
        ``(name, features, cost)`` tuples."""
        body = batch_create_body(name, algorithm, groups, task, params)
        return ModelInfo.from_json(check(self.http.post("/v1/models", **json_request(body))).json())

    def predict_batch(self, name: str, examples: Any, *,
                      computed_groups: Iterable[str] | None = None,
                      max_cost: float | None = None,
                      budget: float | None = None) -> BudgetedPrediction:
        """Predictions of the served version with exactly ``computed_groups``, the trained
        prefix within ``max_cost``, or (neither) the groups present in each example
        (``budget``: the deprecated name of ``max_cost``)."""
        max_cost = cap(max_cost, budget, "predict_batch")
        body = predict_body(self._examples(name, examples),
                            computed_groups=computed_groups, max_cost=max_cost)
        return budgeted(name, check(self.http.post(f"/v1/models/{name}/predict",
                                                   **json_request(body))).json())

    def next_group(self, name: str, computed_groups: Iterable[str] = (),
                   max_cost: float | None = None, *,
                   budget: float | None = None) -> NextStep:
        body = next_body(computed_groups, cap(max_cost, budget, "next_group"))
        return NextStep.from_json(check(self.http.post(f"/v1/models/{name}/next",
                                                       **json_request(body))).json())

    def next_groups(self, name: str, examples: Any,
                    computed_groups: Iterable[str] | None = None,
                    max_cost: float | None = None,
                    exchange_rate: float | None = None) -> list[dict[str, Any]]:
        """Each example's next group (``POST /next`` with ``examples``): per example
        ``next_group`` (or None with ``stop_reason``), ``policy`` and ``candidates``.
        ``exchange_rate``: loss units per unit of cost (None: stop only at ``max_cost``)."""
        body = next_groups_body(self._examples(name, examples), computed_groups,
                                max_cost, exchange_rate)
        return check(self.http.post(f"/v1/models/{name}/next", **json_request(body))).json()[
            "answers"]

    def sequence(self, name: str) -> dict[str, Any]:
        """The served version's trained sequence: ``prefixes`` with cost, cumulative cost and
        the family's train / validation figures."""
        return check(self.http.get(f"/v1/models/{name}/sequence")).json()

    def retrain(self, name: str) -> Job:
        return Job.from_json(check(self.http.post(f"/v1/models/{name}/retrain")).json())

    def job(self, name: str, job_id: str) -> Job:
        return Job.from_json(check(self.http.get(f"/v1/models/{name}/jobs/{job_id}")).json())

    def cancel_job(self, name: str, job_id: str) -> Job:
        """``DELETE /jobs/{id}``: a queued job is cancelled at once, a running one stops at
        its next progress step (poll it, or :meth:`wait_for_job`)."""
        return Job.from_json(check(self.http.delete(
            f"/v1/models/{name}/jobs/{job_id}")).json())

    def jobs(self, name: str) -> list[Job]:
        data = check(self.http.get(f"/v1/models/{name}/jobs")).json()
        return [Job.from_json(j) for j in data["jobs"]]

    def wait_for_job(self, name: str, job_id: str, *, timeout: float = 600.0,
                     poll: float = 0.2, on_progress: ProgressCallback | None = None) -> Job:
        """Poll until the job succeeded or failed and return it (check ``job.status``);
        ``on_progress(job)`` is called after every poll. TimeoutError after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while True:
            job = self.job(name, job_id)
            if on_progress is not None:
                on_progress(job)
            if job.done:
                return job
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise job_timeout(name, job, timeout)
            time.sleep(min(poll, remaining))

    def versions(self, name: str) -> Versions:
        return Versions.from_json(check(self.http.get(f"/v1/models/{name}/versions")).json())

    def rollback(self, name: str, version: int) -> dict[str, Any]:
        """Make stored ``version`` current: ``{"model", "current"}``; ServiceError 409 when it
        never existed or was pruned."""
        return check(self.http.post(f"/v1/models/{name}/rollback",
                                    **json_request({"version": version}))).json()

    def healthz(self) -> dict[str, Any]:
        return check(self.http.get("/healthz")).json()

    def readyz(self) -> dict[str, Any]:
        return check(self.http.get("/readyz")).json()

    def metrics(self) -> str:
        return check(self.http.get("/metrics")).text


