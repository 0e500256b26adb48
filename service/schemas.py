"""Wire schemas (pydantic) for the small JSON bodies.

Example batches are *not* parsed through pydantic (see :mod:`service.ingest`): big numeric
arrays are parsed with orjson and validated with numpy, vectorized.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

ALGORITHMS = ("pet", "fofs", "sofs", "ogd", "arow")
MODEL_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class ModelCreate(BaseModel):
    """``POST /v1/models``: exactly one of ``n_features`` and ``hash_bits``."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=MODEL_NAME_PATTERN)
    algorithm: Literal["pet", "fofs", "sofs", "ogd", "arow"]
    params: dict[str, Any] = Field(default_factory=dict)
    budget: int | None = Field(default=None, ge=1)
    n_features: int | None = Field(default=None, ge=1, le=2**31 - 1)
    hash_bits: int | None = Field(default=None, ge=1, le=31)
    libsvm_zero_based: bool = False

    @model_validator(mode="after")
    def _one_feature_space(self) -> ModelCreate:
        if (self.n_features is None) == (self.hash_bits is None):
            raise ValueError("give exactly one of n_features (plain indices) "
                             "and hash_bits (hashed named features)")
        return self

    @property
    def dimension(self) -> int:
        return self.n_features if self.n_features is not None else 1 << self.hash_bits


class ModelSpec(ModelCreate):
    """A stored model configuration."""

    created_at: float = 0.0


class SelectedFeature(BaseModel):
    index: int
    weight: float
    name: str | None = None


class ModelPublic(BaseModel):
    name: str
    algorithm: str
    params: dict[str, Any]
    budget: int | None
    n_features: int
    hash_bits: int | None
    created_at: float
    examples_applied: int
    updates: int
    log_position: str | None = Field(description="id of the last applied log entry")
    log_end: str | None = Field(description="id of the last appended log entry")
    progressive_accuracy: float | None
    progressive_examples: int
    n_selected: int
    selected_features: list[SelectedFeature] | None = None
    owner: bool = Field(description="whether this process folds the log into the learner")


class ExamplesAccepted(BaseModel):
    model: str
    accepted: int
    log_ids: list[str]
    applied: bool = False


class PredictRequest(BaseModel):
    """``POST /v1/models/{m}/predict``; examples in the same forms as ``/examples``."""

    model_config = ConfigDict(extra="forbid")

    examples: list[dict[str, Any]] = Field(min_length=1)
    return_prediction_ids: bool = False


class PredictResponse(BaseModel):
    model: str
    log_position: str | None
    scores: list[float]
    labels: list[int]
    prediction_ids: list[str] | None = None


class FeedbackRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prediction_id: str = Field(min_length=1, max_length=64)
    label: Literal[-1, 1]


class FeedbackResponse(BaseModel):
    model: str
    prediction_id: str
    score: float
    predicted_label: int
    label: int
    correct: bool
    log_id: str


class SnapshotRestored(BaseModel):
    model: str
    examples_applied: int
    log_position: str | None


class Health(BaseModel):
    status: str
    backend: str
    models: int | None = None
    detail: str | None = None
