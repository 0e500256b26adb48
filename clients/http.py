"""Typed HTTP clients for every endpoint of the featurebudget service (sync and async).

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
...     client.predict_batch("house", [{"features": {"size": {"rooms": 4, "area": 95}}}],
...                          budget=5.0).next_group
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

Example = dict[str, Any]


class ServiceError(Exception):
    """A 4xx/5xx answer; ``problem`` is the problem+json body."""

    def __init__(self, status: int, problem: dict[str, Any]) -> None:
        self.status = status
        self.problem = problem
        super().__init__(f"{status} {problem.get('title', '')}: {problem.get('detail', '')}")


@dataclass
class Accepted:
    model: str
    accepted: int
    log_ids: list[str]
    applied: bool
    repeated: bool = False  # an idempotency key seen before: nothing appended again

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Accepted:
        names = ("model", "accepted", "log_ids", "applied", "repeated")
        return cls(**{k: data[k] for k in names if k in data})


@dataclass
class Prediction:
    model: str
    log_position: str | None
    scores: list[float]
    labels: list[int]
    prediction_ids: list[str] | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Prediction:
        names = ("model", "log_position", "scores", "labels", "prediction_ids")
        return cls(**{k: data.get(k) for k in names}, raw=data)


@dataclass
class Feedback:
    model: str
    prediction_id: str
    score: float
    predicted_label: int
    label: int
    correct: bool
    log_id: str


@dataclass
class ModelInfo:
    name: str
    algorithm: str
    params: dict[str, Any]
    budget: int | None
    n_features: int
    hash_bits: int | None
    examples_applied: int
    log_position: str | None
    log_end: str | None
    progressive_accuracy: float | None
    n_selected: int | None
    selected_features: list[dict[str, Any]] | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)
    # batch models only (None for online models); the online-only fields above are None
    # for batch models
    family: str | None = None
    task: str | None = None
    groups: list[dict[str, Any]] | None = None
    version: int | None = None
    version_created_at: float | None = None
    trained_through: str | None = None
    train_examples: int | None = None
    validation_examples: int | None = None
    incarnation: str | None = None  # a new id at every creation of a model of this name
    warnings: list[str] | None = None  # creation only: what the model needs that is missing

    _FIELDS = ("name", "algorithm", "params", "budget", "n_features", "hash_bits",
               "examples_applied", "log_position", "log_end", "progressive_accuracy",
               "n_selected", "selected_features", "family", "task", "groups", "version",
               "version_created_at", "trained_through", "train_examples",
               "validation_examples", "incarnation", "warnings")

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ModelInfo:
        return cls(**{k: data.get(k) for k in cls._FIELDS}, raw=data)

    @property
    def is_batch(self) -> bool:
        return self.family is not None and self.family != "online"


@dataclass
class BudgetedPrediction:
    """``POST /predict`` of a batch model. ``predictions`` (and ``labels`` /
    ``probabilities`` of classification, calibrated) have one entry per example;
    ``groups_used``, ``cost``, the expected figures (``expected_explained_variance``, and for
    classification ``expected_error`` / ``expected_log_loss``), ``answered_by`` (``auto``
    models: "anytime" or "gbfs") and ``next_group`` are single values when every example had
    the same computed set, else per-example lists; ``answers`` has one object per example
    with every field of that example (``prediction``, ``groups_used``, ``cost``, ...),
    whatever the sets. ``next_group`` is
    ``{"name", "cost", "expected_gain"}`` or None; family-specific extras
    (``expected_on``, ``trees_used``, ``expected_rmse``, ...) are in ``raw``."""

    model: str
    version: int
    predictions: list[float]
    groups_used: list[str] | list[list[str]]
    cost: float | list[float]
    expected_explained_variance: float | None | list[float | None]
    next_group: dict[str, Any] | None | list[dict[str, Any] | None]
    labels: list[int] | None = None
    probabilities: list[float] | None = None
    expected_error: float | None | list[float | None] = None
    expected_log_loss: float | None | list[float | None] = None
    answered_by: str | None | list[str | None] = None
    answers: list[dict[str, Any]] | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BudgetedPrediction:
        names = ("model", "version", "predictions", "groups_used", "cost",
                 "expected_explained_variance", "next_group", "labels", "probabilities",
                 "expected_error", "expected_log_loss", "answered_by", "answers")
        return cls(**{k: data.get(k) for k in names}, raw=data)


@dataclass
class NextStep:
    """``POST /next``: the computed set (normalized), its cost and the group to compute
    next (``{"name", "cost", "expected_gain"}``, or None when none is left / affordable)."""

    model: str
    version: int
    computed_groups: list[str]
    cost: float
    next_group: dict[str, Any] | None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> NextStep:
        return cls(**{k: data.get(k) for k in ("model", "version", "computed_groups", "cost",
                                               "next_group")})


@dataclass
class Job:
    """A retrain job; ``status`` is queued, running, succeeded, failed or cancelled."""

    id: str
    status: str
    progress: float
    examples_used: int | None = None
    validation_examples: int | None = None
    trained_through: str | None = None
    duration_seconds: float | None = None
    error: str | None = None
    version: int | None = None
    trigger: str | None = None
    created_at: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    _FIELDS = ("id", "status", "progress", "examples_used", "validation_examples",
               "trained_through", "duration_seconds", "error", "version", "trigger",
               "created_at", "started_at", "finished_at")

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Job:
        job = cls(**{k: data.get(k) for k in cls._FIELDS}, raw=data)
        job.progress = float(job.progress or 0.0)
        return job

    @property
    def done(self) -> bool:
        return self.status in ("succeeded", "failed", "cancelled")

    @property
    def succeeded(self) -> bool:
        return self.status == "succeeded"


@dataclass
class Versions:
    """``GET /versions``: the current version and every stored one's metadata (newest
    first; each with ``version``, ``created_at``, ``examples_used``, ``current``...)."""

    model: str
    current: int | None
    versions: list[dict[str, Any]]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Versions:
        return cls(model=data.get("model"), current=data.get("current"),
                   versions=data.get("versions") or [])


GroupLike = dict[str, Any] | Sequence[Any]
ProgressCallback = Callable[[Job], Any]


def _check(response: httpx.Response) -> httpx.Response:
    if response.status_code >= 400:
        try:
            problem = response.json()
        except ValueError:
            problem = {"title": response.reason_phrase, "detail": response.text}
        raise ServiceError(response.status_code, problem)
    return response


def _plain(value: Any) -> Any:
    """numpy / pandas values as JSON's: arrays and Series as lists, scalars as numbers."""
    if hasattr(value, "tolist"):  # numpy arrays and scalars, pandas Series / Index
        return value.tolist()
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _json(body: Any, headers: dict[str, str] | None = None) -> dict[str, Any]:
    """``content`` and ``headers`` of a JSON request body (numpy values converted; NaN and
    infinities refused here, as the service would)."""
    return {"content": json.dumps(body, default=_plain, allow_nan=False).encode(),
            "headers": {"Content-Type": "application/json", **(headers or {})}}


def _predict_body(examples, return_prediction_ids):
    body: dict[str, Any] = {"examples": examples}
    if return_prediction_ids is not None:  # only when asked: batch models take no such field
        body["return_prediction_ids"] = return_prediction_ids
    return body


def _prediction(data: dict[str, Any]) -> Prediction | BudgetedPrediction:
    """The answer of ``predict``: an online model's (``scores``) or a batch model's."""
    if "scores" in data:
        return Prediction.from_json(data)
    return BudgetedPrediction.from_json(data)


def _budgeted(name: str, data: dict[str, Any]) -> BudgetedPrediction:
    if "scores" in data:
        raise ValueError(f"model {name!r} is an online model: predict_batch answers batch "
                         "models; use predict() for its scores and labels")
    return BudgetedPrediction.from_json(data)


def _examples_params(wait: bool, dry_run: bool) -> dict[str, str] | None:
    params = {"wait": "true"} if wait else {}
    if dry_run:
        params["dry_run"] = "true"
    return params or None


def _key_header(idempotency_key: str | None) -> dict[str, str]:
    return {} if idempotency_key is None else {"Idempotency-Key": idempotency_key}


def _headers(api_key: str | None) -> dict[str, str]:
    return {"X-API-Key": api_key} if api_key else {}


def _create_body(name, algorithm, n_features, hash_bits, budget, params, zero_based):
    body: dict[str, Any] = {"name": name, "algorithm": algorithm, "params": params or {},
                            "budget": budget, "libsvm_zero_based": zero_based}
    if n_features is not None:
        body["n_features"] = n_features
    if hash_bits is not None:
        body["hash_bits"] = hash_bits
    return body


def _group_body(group: GroupLike) -> dict[str, Any]:
    if isinstance(group, dict):
        return dict(group)
    if isinstance(group, str) or len(group) != 3:
        raise ValueError(f"a group is a dict {{name, features, cost}} or a (name, features, "
                         f"cost) tuple, got {group!r}")
    name, features, cost = group
    return {"name": name, "features": list(features), "cost": cost}


def _batch_create_body(name, algorithm, groups, task, params):
    return {"name": name, "algorithm": algorithm, "task": task, "params": params or {},
            "groups": [_group_body(g) for g in groups]}


def _cap(max_cost: float | None, budget: float | None, method: str) -> float | None:
    """``max_cost``, or the deprecated ``budget`` keyword (with a DeprecationWarning)."""
    if budget is None:
        return max_cost
    if max_cost is not None:
        raise TypeError(f"{method}: give max_cost or its deprecated alias budget, not both")
    warnings.warn(f"{method}: budget= is deprecated, use max_cost=", DeprecationWarning,
                  stacklevel=3)
    return budget


def _predict_batch_body(examples, computed_groups, max_cost):
    body: dict[str, Any] = {"examples": examples}
    if computed_groups is not None:
        body["computed_groups"] = list(computed_groups)
    if max_cost is not None:
        body["max_cost"] = max_cost
    return body


def _next_body(computed_groups, max_cost):
    body: dict[str, Any] = {"computed_groups": list(computed_groups)}
    if max_cost is not None:
        body["max_cost"] = max_cost
    return body


def _next_groups_body(examples, computed_groups, max_cost, exchange_rate):
    body: dict[str, Any] = {"examples": examples}
    if computed_groups is not None:
        body["computed_groups"] = list(computed_groups)
    if max_cost is not None:
        body["max_cost"] = max_cost
    if exchange_rate is not None:
        body["exchange_rate"] = exchange_rate
    return body


def _job_timeout(name: str, job: Job, timeout: float) -> TimeoutError:
    return TimeoutError(f"retrain job {job.id} of model {name!r} is still {job.status} "
                        f"(progress {job.progress:.0%}) after {timeout} s")


class FeaturebudgetClient:
    """Synchronous client (``httpx.Client``)."""

    def __init__(self, base_url: str = "http://127.0.0.1:8000", *, api_key: str | None = None,
                 timeout: float = 60.0, transport: httpx.BaseTransport | None = None,
                 http: httpx.Client | None = None) -> None:
        self.http = http or httpx.Client(base_url=base_url, headers=_headers(api_key),
                                         timeout=timeout, transport=transport)
        self._owned = http is None
        if http is not None and api_key:
            self.http.headers.update(_headers(api_key))

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
        body = _create_body(name, algorithm, n_features, hash_bits, budget, params,
                            libsvm_zero_based)
        return ModelInfo.from_json(_check(self.http.post("/v1/models", **_json(body))).json())

    def list_models(self) -> list[ModelInfo]:
        data = _check(self.http.get("/v1/models")).json()
        return [ModelInfo.from_json(m) for m in data["models"]]

    def get_model(self, name: str) -> ModelInfo:
        return ModelInfo.from_json(_check(self.http.get(f"/v1/models/{name}")).json())

    def delete_model(self, name: str) -> None:
        _check(self.http.delete(f"/v1/models/{name}"))

    def features(self, name: str) -> list[dict[str, Any]]:
        return _check(self.http.get(f"/v1/models/{name}/features")).json()

    def post_examples(self, name: str, examples: list[Example], *, wait: bool = False,
                      idempotency_key: str | None = None) -> Accepted:
        """Append examples; a retry with the same ``idempotency_key`` appends nothing."""
        response = self.http.post(f"/v1/models/{name}/examples",
                                  params={"wait": "true"} if wait else None,
                                  **_json({"examples": examples}, _key_header(idempotency_key)))
        return Accepted.from_json(_check(response).json())

    def post_libsvm(self, name: str, text: bytes | str, *, wait: bool = False,
                    idempotency_key: str | None = None, dry_run: bool = False) -> Accepted:
        """Append libsvm lines; ``dry_run``: check them as an append would and append
        nothing (``accepted`` counts them, ``log_ids`` is empty)."""
        response = self.http.post(f"/v1/models/{name}/examples",
                                  content=text.encode() if isinstance(text, str) else text,
                                  headers={"Content-Type": "text/plain",
                                           **_key_header(idempotency_key)},
                                  params=_examples_params(wait, dry_run))
        return Accepted.from_json(_check(response).json())

    def post_binary(self, name: str, payload: bytes, *, wait: bool = False,
                    idempotency_key: str | None = None) -> Accepted:
        response = self.http.post(f"/v1/models/{name}/examples", content=payload,
                                  headers={"Content-Type": "application/octet-stream",
                                           **_key_header(idempotency_key)},
                                  params={"wait": "true"} if wait else None)
        return Accepted.from_json(_check(response).json())

    def predict(self, name: str, examples: list[Example], *,
                return_prediction_ids: bool | None = None
                ) -> Prediction | BudgetedPrediction:
        """Scores and labels of an online model (:class:`Prediction`), or a batch model's
        answer for the groups each example carries (:class:`BudgetedPrediction`; for
        ``computed_groups`` / ``max_cost`` use :meth:`predict_batch`). Examples may hold
        numpy arrays and scalars."""
        body = _predict_body(examples, return_prediction_ids)
        return _prediction(_check(self.http.post(f"/v1/models/{name}/predict",
                                                 **_json(body))).json())

    def feedback(self, name: str, prediction_id: str, label: int) -> Feedback:
        body = {"prediction_id": prediction_id, "label": label}
        return Feedback(**_check(self.http.post(f"/v1/models/{name}/feedback",
                                                **_json(body))).json())

    def get_snapshot(self, name: str) -> bytes:
        return _check(self.http.get(f"/v1/models/{name}/snapshot")).content

    def put_snapshot(self, name: str, blob: bytes) -> dict[str, Any]:
        return _check(self.http.put(f"/v1/models/{name}/snapshot", content=blob)).json()

    def deadletters(self, name: str) -> list[dict[str, Any]]:
        return _check(self.http.get(f"/v1/models/{name}/deadletters")).json()["entries"]

    # ------------------------------------------------------------------ batch models
    def create_batch_model(self, name: str, *, algorithm: str, groups: Iterable[GroupLike],
                           task: str = "regression",
                           params: dict[str, Any] | None = None) -> ModelInfo:
        """A batch model over ``groups``: dicts ``{name, features, cost}`` or
        ``(name, features, cost)`` tuples."""
        body = _batch_create_body(name, algorithm, groups, task, params)
        return ModelInfo.from_json(_check(self.http.post("/v1/models", **_json(body))).json())

    def predict_batch(self, name: str, examples: list[Example], *,
                      computed_groups: Iterable[str] | None = None,
                      max_cost: float | None = None,
                      budget: float | None = None) -> BudgetedPrediction:
        """Predictions of the served version with exactly ``computed_groups``, the trained
        prefix within ``max_cost``, or (neither) the groups present in each example
        (``budget``: the deprecated name of ``max_cost``)."""
        max_cost = _cap(max_cost, budget, "predict_batch")
        body = _predict_batch_body(examples, computed_groups, max_cost)
        return _budgeted(name, _check(self.http.post(f"/v1/models/{name}/predict",
                                                     **_json(body))).json())

    def next_group(self, name: str, computed_groups: Iterable[str] = (),
                   max_cost: float | None = None, *,
                   budget: float | None = None) -> NextStep:
        body = _next_body(computed_groups, _cap(max_cost, budget, "next_group"))
        return NextStep.from_json(_check(self.http.post(f"/v1/models/{name}/next",
                                                        **_json(body))).json())

    def next_groups(self, name: str, examples: list[Example],
                    computed_groups: Iterable[str] | None = None,
                    max_cost: float | None = None,
                    exchange_rate: float | None = None) -> list[dict[str, Any]]:
        """Each example's next group (``POST /next`` with ``examples``): per example
        ``next_group`` (or None with ``stop_reason``), ``policy`` and ``candidates``.
        ``exchange_rate``: loss units per unit of cost (None: stop only at ``max_cost``)."""
        body = _next_groups_body(examples, computed_groups, max_cost, exchange_rate)
        return _check(self.http.post(f"/v1/models/{name}/next", **_json(body))).json()[
            "answers"]

    def sequence(self, name: str) -> dict[str, Any]:
        """The served version's trained sequence: ``prefixes`` with cost, cumulative cost and
        the family's train / validation figures."""
        return _check(self.http.get(f"/v1/models/{name}/sequence")).json()

    def retrain(self, name: str) -> Job:
        return Job.from_json(_check(self.http.post(f"/v1/models/{name}/retrain")).json())

    def job(self, name: str, job_id: str) -> Job:
        return Job.from_json(_check(self.http.get(f"/v1/models/{name}/jobs/{job_id}")).json())

    def cancel_job(self, name: str, job_id: str) -> Job:
        """``DELETE /jobs/{id}``: a queued job is cancelled at once, a running one stops at
        its next progress step (poll it, or :meth:`wait_for_job`)."""
        return Job.from_json(_check(self.http.delete(
            f"/v1/models/{name}/jobs/{job_id}")).json())

    def jobs(self, name: str) -> list[Job]:
        data = _check(self.http.get(f"/v1/models/{name}/jobs")).json()
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
                raise _job_timeout(name, job, timeout)
            time.sleep(min(poll, remaining))

    def versions(self, name: str) -> Versions:
        return Versions.from_json(_check(self.http.get(f"/v1/models/{name}/versions")).json())

    def rollback(self, name: str, version: int) -> dict[str, Any]:
        """Make stored ``version`` current: ``{"model", "current"}``; ServiceError 409 when it
        never existed or was pruned."""
        return _check(self.http.post(f"/v1/models/{name}/rollback",
                                     **_json({"version": version}))).json()

    def healthz(self) -> dict[str, Any]:
        return _check(self.http.get("/healthz")).json()

    def readyz(self) -> dict[str, Any]:
        return _check(self.http.get("/readyz")).json()

    def metrics(self) -> str:
        return _check(self.http.get("/metrics")).text


class AsyncFeaturebudgetClient:
    """Asynchronous client (``httpx.AsyncClient``); same methods, awaitable."""

    def __init__(self, base_url: str = "http://127.0.0.1:8000", *, api_key: str | None = None,
                 timeout: float = 60.0,
                 transport: httpx.AsyncBaseTransport | None = None,
                 http: httpx.AsyncClient | None = None) -> None:
        self.http = http or httpx.AsyncClient(base_url=base_url, headers=_headers(api_key),
                                              timeout=timeout, transport=transport)
        self._owned = http is None
        if http is not None and api_key:
            self.http.headers.update(_headers(api_key))

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
        body = _create_body(name, algorithm, n_features, hash_bits, budget, params,
                            libsvm_zero_based)
        return ModelInfo.from_json(_check(await self.http.post("/v1/models", **_json(body))).json())

    async def list_models(self) -> list[ModelInfo]:
        data = _check(await self.http.get("/v1/models")).json()
        return [ModelInfo.from_json(m) for m in data["models"]]

    async def get_model(self, name: str) -> ModelInfo:
        return ModelInfo.from_json(_check(await self.http.get(f"/v1/models/{name}")).json())

    async def delete_model(self, name: str) -> None:
        _check(await self.http.delete(f"/v1/models/{name}"))

    async def features(self, name: str) -> list[dict[str, Any]]:
        return _check(await self.http.get(f"/v1/models/{name}/features")).json()

    async def post_examples(self, name: str, examples: list[Example], *, wait: bool = False,
                            idempotency_key: str | None = None) -> Accepted:
        response = await self.http.post(
            f"/v1/models/{name}/examples", params={"wait": "true"} if wait else None,
            **_json({"examples": examples}, _key_header(idempotency_key)))
        return Accepted.from_json(_check(response).json())

    async def post_libsvm(self, name: str, text: bytes | str, *, wait: bool = False,
                          idempotency_key: str | None = None,
                          dry_run: bool = False) -> Accepted:
        response = await self.http.post(
            f"/v1/models/{name}/examples",
            content=text.encode() if isinstance(text, str) else text,
            headers={"Content-Type": "text/plain", **_key_header(idempotency_key)},
            params=_examples_params(wait, dry_run))
        return Accepted.from_json(_check(response).json())

    async def post_binary(self, name: str, payload: bytes, *, wait: bool = False,
                          idempotency_key: str | None = None) -> Accepted:
        response = await self.http.post(f"/v1/models/{name}/examples", content=payload,
                                        headers={"Content-Type": "application/octet-stream",
                                                 **_key_header(idempotency_key)},
                                        params={"wait": "true"} if wait else None)
        return Accepted.from_json(_check(response).json())

    async def predict(self, name: str, examples: list[Example], *,
                      return_prediction_ids: bool | None = None
                      ) -> Prediction | BudgetedPrediction:
        body = _predict_body(examples, return_prediction_ids)
        return _prediction(_check(await self.http.post(f"/v1/models/{name}/predict",
                                                       **_json(body))).json())

    async def feedback(self, name: str, prediction_id: str, label: int) -> Feedback:
        body = {"prediction_id": prediction_id, "label": label}
        return Feedback(**_check(await self.http.post(f"/v1/models/{name}/feedback",
                                                      **_json(body))).json())

    async def get_snapshot(self, name: str) -> bytes:
        return _check(await self.http.get(f"/v1/models/{name}/snapshot")).content

    async def put_snapshot(self, name: str, blob: bytes) -> dict[str, Any]:
        return _check(await self.http.put(f"/v1/models/{name}/snapshot", content=blob)).json()

    async def deadletters(self, name: str) -> list[dict[str, Any]]:
        return _check(await self.http.get(f"/v1/models/{name}/deadletters")).json()["entries"]

    # ------------------------------------------------------------------ batch models
    async def create_batch_model(self, name: str, *, algorithm: str,
                                 groups: Iterable[GroupLike], task: str = "regression",
                                 params: dict[str, Any] | None = None) -> ModelInfo:
        body = _batch_create_body(name, algorithm, groups, task, params)
        return ModelInfo.from_json(_check(await self.http.post("/v1/models", **_json(body))).json())

    async def predict_batch(self, name: str, examples: list[Example], *,
                            computed_groups: Iterable[str] | None = None,
                            max_cost: float | None = None,
                            budget: float | None = None) -> BudgetedPrediction:
        max_cost = _cap(max_cost, budget, "predict_batch")
        body = _predict_batch_body(examples, computed_groups, max_cost)
        return _budgeted(name, _check(await self.http.post(f"/v1/models/{name}/predict",
                                                           **_json(body))).json())

    async def next_group(self, name: str, computed_groups: Iterable[str] = (),
                         max_cost: float | None = None, *,
                         budget: float | None = None) -> NextStep:
        body = _next_body(computed_groups, _cap(max_cost, budget, "next_group"))
        return NextStep.from_json(_check(await self.http.post(f"/v1/models/{name}/next",
                                                              **_json(body))).json())

    async def next_groups(self, name: str, examples: list[Example],
                          computed_groups: Iterable[str] | None = None,
                          max_cost: float | None = None,
                          exchange_rate: float | None = None) -> list[dict[str, Any]]:
        body = _next_groups_body(examples, computed_groups, max_cost, exchange_rate)
        return _check(await self.http.post(f"/v1/models/{name}/next",
                                           **_json(body))).json()["answers"]

    async def sequence(self, name: str) -> dict[str, Any]:
        return _check(await self.http.get(f"/v1/models/{name}/sequence")).json()

    async def retrain(self, name: str) -> Job:
        return Job.from_json(_check(await self.http.post(f"/v1/models/{name}/retrain")).json())

    async def job(self, name: str, job_id: str) -> Job:
        return Job.from_json(_check(await self.http.get(
            f"/v1/models/{name}/jobs/{job_id}")).json())

    async def cancel_job(self, name: str, job_id: str) -> Job:
        return Job.from_json(_check(await self.http.delete(
            f"/v1/models/{name}/jobs/{job_id}")).json())

    async def jobs(self, name: str) -> list[Job]:
        data = _check(await self.http.get(f"/v1/models/{name}/jobs")).json()
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
                raise _job_timeout(name, job, timeout)
            await asyncio.sleep(min(poll, remaining))

    async def versions(self, name: str) -> Versions:
        return Versions.from_json(_check(await self.http.get(
            f"/v1/models/{name}/versions")).json())

    async def rollback(self, name: str, version: int) -> dict[str, Any]:
        return _check(await self.http.post(f"/v1/models/{name}/rollback",
                                           **_json({"version": version}))).json()

    async def healthz(self) -> dict[str, Any]:
        return _check(await self.http.get("/healthz")).json()

    async def readyz(self) -> dict[str, Any]:
        return _check(await self.http.get("/readyz")).json()

    async def metrics(self) -> str:
        return _check(await self.http.get("/metrics")).text
