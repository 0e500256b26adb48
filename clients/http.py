"""Typed HTTP clients for every endpoint of the featurebudget service (sync and async).

>>> with FeaturebudgetClient("http://127.0.0.1:8000") as client:   # doctest: +SKIP
...     client.create_model("spam", algorithm="sofs", n_features=2**20, budget=500)
...     client.post_examples("spam", [{"indices": [3, 17], "values": [1.0, 0.5], "label": 1}])
...     client.predict("spam", [{"indices": [3], "values": [1.0]}]).labels
"""

from __future__ import annotations

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


@dataclass
class Prediction:
    model: str
    log_position: str | None
    scores: list[float]
    labels: list[int]
    prediction_ids: list[str] | None = None


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
    n_selected: int
    selected_features: list[dict[str, Any]] | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ModelInfo:
        names = ("name", "algorithm", "params", "budget", "n_features", "hash_bits",
                 "examples_applied", "log_position", "log_end", "progressive_accuracy",
                 "n_selected", "selected_features")
        return cls(**{k: data.get(k) for k in names}, raw=data)


def _check(response: httpx.Response) -> httpx.Response:
    if response.status_code >= 400:
        try:
            problem = response.json()
        except ValueError:
            problem = {"title": response.reason_phrase, "detail": response.text}
        raise ServiceError(response.status_code, problem)
    return response


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
        return ModelInfo.from_json(_check(self.http.post("/v1/models", json=body)).json())

    def list_models(self) -> list[ModelInfo]:
        data = _check(self.http.get("/v1/models")).json()
        return [ModelInfo.from_json(m) for m in data["models"]]

    def get_model(self, name: str) -> ModelInfo:
        return ModelInfo.from_json(_check(self.http.get(f"/v1/models/{name}")).json())

    def delete_model(self, name: str) -> None:
        _check(self.http.delete(f"/v1/models/{name}"))

    def features(self, name: str) -> list[dict[str, Any]]:
        return _check(self.http.get(f"/v1/models/{name}/features")).json()

    def post_examples(self, name: str, examples: list[Example], *,
                      wait: bool = False) -> Accepted:
        response = self.http.post(f"/v1/models/{name}/examples", json={"examples": examples},
                                  params={"wait": "true"} if wait else None)
        return Accepted(**_check(response).json())

    def post_libsvm(self, name: str, text: bytes | str, *, wait: bool = False) -> Accepted:
        response = self.http.post(f"/v1/models/{name}/examples",
                                  content=text.encode() if isinstance(text, str) else text,
                                  headers={"Content-Type": "text/plain"},
                                  params={"wait": "true"} if wait else None)
        return Accepted(**_check(response).json())

    def post_binary(self, name: str, payload: bytes, *, wait: bool = False) -> Accepted:
        response = self.http.post(f"/v1/models/{name}/examples", content=payload,
                                  headers={"Content-Type": "application/octet-stream"},
                                  params={"wait": "true"} if wait else None)
        return Accepted(**_check(response).json())

    def predict(self, name: str, examples: list[Example], *,
                return_prediction_ids: bool = False) -> Prediction:
        body = {"examples": examples, "return_prediction_ids": return_prediction_ids}
        return Prediction(**_check(self.http.post(f"/v1/models/{name}/predict",
                                                  json=body)).json())

    def feedback(self, name: str, prediction_id: str, label: int) -> Feedback:
        body = {"prediction_id": prediction_id, "label": label}
        return Feedback(**_check(self.http.post(f"/v1/models/{name}/feedback",
                                                json=body)).json())

    def get_snapshot(self, name: str) -> bytes:
        return _check(self.http.get(f"/v1/models/{name}/snapshot")).content

    def put_snapshot(self, name: str, blob: bytes) -> dict[str, Any]:
        return _check(self.http.put(f"/v1/models/{name}/snapshot", content=blob)).json()

    def deadletters(self, name: str) -> list[dict[str, Any]]:
        return _check(self.http.get(f"/v1/models/{name}/deadletters")).json()["entries"]

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
        return ModelInfo.from_json(_check(await self.http.post("/v1/models", json=body)).json())

    async def list_models(self) -> list[ModelInfo]:
        data = _check(await self.http.get("/v1/models")).json()
        return [ModelInfo.from_json(m) for m in data["models"]]

    async def get_model(self, name: str) -> ModelInfo:
        return ModelInfo.from_json(_check(await self.http.get(f"/v1/models/{name}")).json())

    async def delete_model(self, name: str) -> None:
        _check(await self.http.delete(f"/v1/models/{name}"))

    async def features(self, name: str) -> list[dict[str, Any]]:
        return _check(await self.http.get(f"/v1/models/{name}/features")).json()

    async def post_examples(self, name: str, examples: list[Example], *,
                            wait: bool = False) -> Accepted:
        response = await self.http.post(f"/v1/models/{name}/examples",
                                        json={"examples": examples},
                                        params={"wait": "true"} if wait else None)
        return Accepted(**_check(response).json())

    async def post_libsvm(self, name: str, text: bytes | str, *,
                          wait: bool = False) -> Accepted:
        response = await self.http.post(
            f"/v1/models/{name}/examples",
            content=text.encode() if isinstance(text, str) else text,
            headers={"Content-Type": "text/plain"}, params={"wait": "true"} if wait else None)
        return Accepted(**_check(response).json())

    async def post_binary(self, name: str, payload: bytes, *, wait: bool = False) -> Accepted:
        response = await self.http.post(f"/v1/models/{name}/examples", content=payload,
                                        headers={"Content-Type": "application/octet-stream"},
                                        params={"wait": "true"} if wait else None)
        return Accepted(**_check(response).json())

    async def predict(self, name: str, examples: list[Example], *,
                      return_prediction_ids: bool = False) -> Prediction:
        body = {"examples": examples, "return_prediction_ids": return_prediction_ids}
        return Prediction(**_check(await self.http.post(f"/v1/models/{name}/predict",
                                                        json=body)).json())

    async def feedback(self, name: str, prediction_id: str, label: int) -> Feedback:
        body = {"prediction_id": prediction_id, "label": label}
        return Feedback(**_check(await self.http.post(f"/v1/models/{name}/feedback",
                                                      json=body)).json())

    async def get_snapshot(self, name: str) -> bytes:
        return _check(await self.http.get(f"/v1/models/{name}/snapshot")).content

    async def put_snapshot(self, name: str, blob: bytes) -> dict[str, Any]:
        return _check(await self.http.put(f"/v1/models/{name}/snapshot", content=blob)).json()

    async def deadletters(self, name: str) -> list[dict[str, Any]]:
        return _check(await self.http.get(f"/v1/models/{name}/deadletters")).json()["entries"]

    async def healthz(self) -> dict[str, Any]:
        return _check(await self.http.get("/healthz")).json()

    async def readyz(self) -> dict[str, Any]:
        return _check(await self.http.get("/readyz")).json()

    async def metrics(self) -> str:
        return _check(await self.http.get("/metrics")).text
