"""Request bodies and answer checks shared by the sync and async clients (no I/O here)."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import httpx

from featurebudget_client.answers import BudgetedPrediction, Job, Prediction
from featurebudget_client.errors import ModelKindError, ServiceError

GroupLike = dict[str, Any] | Sequence[Any]
ProgressCallback = Callable[[Job], Any]
BATCH_FIELDS = ("computed_groups", "max_cost", "budget")
ONLINE_FIELDS = ("return_prediction_ids",)


def check(response: httpx.Response) -> httpx.Response:
    """``response``, or ServiceError with its problem+json body for a 4xx/5xx."""
    if response.status_code >= 400:
        try:
            problem = response.json()
        except ValueError:
            problem = {"title": response.reason_phrase, "detail": response.text}
        raise ServiceError(response.status_code, problem)
    return response


def plain(value: Any) -> Any:
    """numpy / pandas values as JSON's: arrays and Series as lists, scalars as numbers."""
    if hasattr(value, "tolist"):  # numpy arrays and scalars, pandas Series / Index
        return value.tolist()
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def json_request(body: Any, headers: dict[str, str] | None = None) -> dict[str, Any]:
    """``content`` and ``headers`` of a JSON request body (numpy values converted; NaN and
    infinities refused here, as the service would)."""
    return {"content": json.dumps(body, default=plain, allow_nan=False).encode(),
            "headers": {"Content-Type": "application/json", **(headers or {})}}


def predict_body(examples, return_prediction_ids=None, computed_groups=None,
                 max_cost=None) -> dict[str, Any]:
    """A ``/predict`` body with only the fields the caller set."""
    body: dict[str, Any] = {"examples": examples}
    if return_prediction_ids is not None:  # online models only
        body["return_prediction_ids"] = return_prediction_ids
    if computed_groups is not None:  # batch models only
        body["computed_groups"] = list(computed_groups)
    if max_cost is not None:
        body["max_cost"] = max_cost
    return body


def prediction(data: dict[str, Any]) -> Prediction | BudgetedPrediction:
    """The answer of ``predict``: an online model's (``scores``) or a batch model's."""
    if "scores" in data:
        return Prediction.from_json(data)
    return BudgetedPrediction.from_json(data)


def budgeted(name: str, data: dict[str, Any]) -> BudgetedPrediction:
    """A batch model's answer; ModelKindError for an online model's (no score dropped)."""
    if "scores" in data:
        raise ModelKindError(name, "online", "predict_batch answers batch models; use "
                             "predict() for its scores and labels")
    return BudgetedPrediction.from_json(data)


def kind_error(name: str, body: dict[str, Any], error: ServiceError) -> Exception:
    """``error`` as a ModelKindError when the service refused a field of ``body`` that only
    the other kind of model takes (422 naming it), else ``error`` itself."""
    fields = [e.get("field") for e in error.problem.get("errors") or [] if isinstance(e, dict)]
    if error.status != 422 or not fields or fields[0] not in body:
        return error
    if fields[0] in BATCH_FIELDS:
        return ModelKindError(name, "online", f"{fields[0]} is for batch models; call "
                              "predict(name, examples) without it for scores and labels",
                              error.problem)
    if fields[0] in ONLINE_FIELDS:
        return ModelKindError(name, "batch", "return_prediction_ids is for online models "
                              "(feedback); call predict(name, examples) without it, with "
                              "computed_groups= or max_cost= to choose the groups",
                              error.problem)
    return error


def feature_groups(info: dict[str, Any], name: str) -> dict[str, str]:
    """``{feature: group}`` of a batch model's description (``GET /v1/models/{m}``);
    ModelKindError for an online model."""
    groups = info.get("groups")
    if not groups or info.get("family") in (None, "online"):
        raise ModelKindError(name, "online", "name its columns by index (integers) or by "
                             "(namespace, name) pairs; plain names are batch models' features")
    return {feature: group["name"] for group in groups for feature in group["features"]}


def examples_params(wait: bool, dry_run: bool) -> dict[str, str] | None:
    params = {"wait": "true"} if wait else {}
    if dry_run:
        params["dry_run"] = "true"
    return params or None


def key_header(idempotency_key: str | None) -> dict[str, str]:
    return {} if idempotency_key is None else {"Idempotency-Key": idempotency_key}


def auth_headers(api_key: str | None) -> dict[str, str]:
    return {"X-API-Key": api_key} if api_key else {}


def create_body(name, algorithm, n_features, hash_bits, budget, params, zero_based):
    body: dict[str, Any] = {"name": name, "algorithm": algorithm, "params": params or {},
                            "budget": budget, "libsvm_zero_based": zero_based}
    if n_features is not None:
        body["n_features"] = n_features
    if hash_bits is not None:
        body["hash_bits"] = hash_bits
    return body


def group_body(group: GroupLike) -> dict[str, Any]:
    if isinstance(group, dict):
        return dict(group)
    if isinstance(group, str) or len(group) != 3:
        raise ValueError(f"a group is a dict {{name, features, cost}} or a (name, features, "
                         f"cost) tuple, got {group!r}")
    name, features, cost = group
    return {"name": name, "features": list(features), "cost": cost}


def batch_create_body(name, algorithm, groups, task, params):
    return {"name": name, "algorithm": algorithm, "task": task, "params": params or {},
            "groups": [group_body(g) for g in groups]}


def cap(max_cost: float | None, budget: float | None, method: str) -> float | None:
    """``max_cost``, or the deprecated ``budget`` keyword (with a DeprecationWarning)."""
    if budget is None:
        return max_cost
    if max_cost is not None:
        raise TypeError(f"{method}: give max_cost or its deprecated alias budget, not both")
    warnings.warn(f"{method}: budget= is deprecated, use max_cost=", DeprecationWarning,
                  stacklevel=3)
    return budget


def next_body(computed_groups: Iterable[str], max_cost: float | None) -> dict[str, Any]:
    body: dict[str, Any] = {"computed_groups": list(computed_groups)}
    if max_cost is not None:
        body["max_cost"] = max_cost
    return body


def next_groups_body(examples, computed_groups, max_cost, exchange_rate):
    body: dict[str, Any] = {"examples": examples}
    if computed_groups is not None:
        body["computed_groups"] = list(computed_groups)
    if max_cost is not None:
        body["max_cost"] = max_cost
    if exchange_rate is not None:
        body["exchange_rate"] = exchange_rate
    return body


def job_timeout(name: str, job: Job, timeout: float) -> TimeoutError:
    return TimeoutError(f"retrain job {job.id} of model {name!r} is still {job.status} "
                        f"(progress {job.progress:.0%}) after {timeout} s")
