"""What the service answers, as dataclasses (``from_json`` of each answer's JSON)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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
