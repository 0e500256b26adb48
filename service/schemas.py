"""Wire schemas (pydantic) for the small JSON bodies.

Example batches are *not* parsed through pydantic (see :mod:`service.ingest`): big numeric
arrays are parsed with orjson and validated with numpy, vectorized.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator, model_validator
from pydantic_core import PydanticCustomError

from algorithms.online import LEARNERS
from service.batch.families import algorithm_families, family_of_algorithm
from service.batch.jobs import Job


# The API's algorithms are read from the registries when a body is validated or the schema
# is written, never frozen at import: a learner added to LEARNERS (one file and one line,
# algorithms/README.md) is an algorithm of POST /v1/models, and so is every algorithm of a
# batch family's adapter (service.batch.families.FAMILIES), whenever it is registered.
def online_algorithms() -> tuple[str, ...]:
    """The online learners' algorithms, in registry order. O(learners)."""
    return tuple(LEARNERS)


def batch_algorithms() -> tuple[str, ...]:
    return tuple(algorithm_families())


def all_algorithms() -> tuple[str, ...]:
    return online_algorithms() + batch_algorithms()


def _expected(values: tuple[str, ...]) -> str:
    """``'a', 'b' or 'c'``: how pydantic names a literal's values in its errors."""
    quoted = [repr(v) for v in values]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]


MODEL_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127}$"
PATTERN_RULES = {  # each pattern in words, for the answers that refuse a name
    MODEL_NAME_PATTERN: "1 to 64 characters: ASCII letters, digits, '_', '.' and '-', the "
                        "first a letter or digit",
    NAME_PATTERN: "1 to 128 characters: ASCII letters, digits, '_', '.', ':' and '-', the "
                  "first a letter, digit or '_'",
}


def validation_message(error: dict[str, Any]) -> str:
    """One pydantic error's message in the API's words: without pydantic's "Value error, "
    prefix, and a name pattern given as its rule in words. O(message)."""
    message = str(error.get("msg", ""))
    if error.get("type") == "value_error":
        return message.removeprefix("Value error, ")
    if error.get("type") == "string_pattern_mismatch":
        pattern = (error.get("ctx") or {}).get("pattern")
        if pattern in PATTERN_RULES:
            return f"must be {PATTERN_RULES[pattern]} (the pattern {pattern})"
    return message


class GroupSpec(BaseModel):
    """A feature group of a batch model: computing it yields all its features at ``cost``."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME_PATTERN)
    features: list[str] = Field(min_length=1, max_length=100_000)
    cost: float = Field(ge=0, allow_inf_nan=False)


def _given(field: str) -> dict:
    """JSON Schema for "``field`` is present and not null" (null counts as absent)."""
    return {"required": [field], "properties": {field: {"not": {"type": "null"}}}}


def _kind(algorithms: tuple[str, ...], field: str, absent: tuple[str, ...],
          **constraints: Any) -> dict:
    """JSON Schema for "one of ``algorithms``, ``field`` given (with ``constraints``), none
    of ``absent`` given": one kind of model and its one feature space."""
    return {"required": ["algorithm", field],
            "properties": {"algorithm": {"enum": list(algorithms)},
                           field: {"not": {"type": "null"}, **constraints}},
            "not": {"anyOf": [_given(f) for f in absent]}}


def _create_kinds(schema: dict[str, Any], cls: type) -> None:
    """The create body's three kinds (online with ``n_features`` or ``hash_bits``, batch
    with ``groups``) with the algorithms registered when the schema is written."""
    online = online_algorithms()
    schema["oneOf"] = [
        _kind(online, "n_features", ("hash_bits", "groups", "task")),
        _kind(online, "hash_bits", ("n_features", "groups", "task")),
        _kind(batch_algorithms(), "groups", ("n_features", "hash_bits", "budget"), minItems=1),
    ]


def _algorithm_enum(schema: dict[str, Any]) -> None:
    schema.update(enum=list(all_algorithms()), type="string")


class ModelCreate(BaseModel):
    """``POST /v1/models``.

    Online models (the learners of ``algorithms.online.LEARNERS``): exactly one of
    ``n_features`` and ``hash_bits``; no ``groups`` or ``task``. Batch models (the anytime
    family, ``gbfs``, ``nvsd``): a non-empty ``groups`` (named features, costs) and
    ``task``; no feature space of their own and no ``budget``."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_create_kinds)

    name: str = Field(pattern=MODEL_NAME_PATTERN)
    algorithm: str = Field(json_schema_extra=_algorithm_enum)
    params: dict[str, Any] = Field(default_factory=dict)
    budget: int | None = Field(default=None, ge=1)
    n_features: int | None = Field(default=None, ge=1, le=2**31 - 1)
    hash_bits: int | None = Field(default=None, ge=1, le=31)
    libsvm_zero_based: bool = False
    task: Literal["regression", "classification"] | None = None
    groups: list[GroupSpec] | None = Field(default=None, max_length=10_000)

    @field_validator("algorithm", mode="before")
    @classmethod
    def _known_algorithm(cls, value: Any) -> Any:
        known = all_algorithms()
        if not isinstance(value, str) or value not in known:
            raise PydanticCustomError("literal_error", "Input should be {expected}",
                                      {"expected": _expected(known)})
        return value

    @model_validator(mode="after")
    def _one_feature_space(self) -> ModelCreate:
        if self.is_batch:
            return self._check_batch()
        if self.groups is not None or self.task is not None:
            raise ValueError(f"groups and task are for batch models; {self.algorithm} is an "
                             "online model (binary classification over a feature space)")
        if (self.n_features is None) == (self.hash_bits is None):
            raise ValueError("give exactly one of n_features (plain indices) "
                             "and hash_bits (hashed named features)")
        return self

    def _check_batch(self) -> ModelCreate:
        if self.n_features is not None or self.hash_bits is not None or \
                self.budget is not None:
            raise ValueError(f"{self.algorithm} is a batch model: its features are those of "
                             "its groups (no n_features, hash_bits or budget)")
        if not self.groups:
            raise ValueError(f"{self.algorithm} needs groups: a non-empty list of "
                             "{name, features, cost}")
        if self.task is None:
            self.task = "regression"
        seen_groups: set[str] = set()
        owner: dict[str, str] = {}
        for group in self.groups:
            if group.name in seen_groups:
                raise ValueError(f"group name {group.name!r} appears twice")
            seen_groups.add(group.name)
            names = set()
            for feature in group.features:
                if feature in names:
                    raise ValueError(f"feature {feature!r} appears twice in group "
                                     f"{group.name!r}")
                names.add(feature)
                key = feature
                if key in owner:
                    raise ValueError(f"feature {feature!r} is in two groups: "
                                     f"{owner[key]!r} and {group.name!r}")
                owner[key] = group.name
        return self

    @property
    def family(self) -> str:
        """``online``, or the batch family of the algorithm (``anytime``, ``gbfs``,
        ``nvsd``, ``auto``: a key of ``service.batch.families.FAMILIES``)."""
        return family_of_algorithm(self.algorithm) or "online"

    @property
    def is_batch(self) -> bool:
        return family_of_algorithm(self.algorithm) is not None

    @property
    def dimension(self) -> int:
        if self.is_batch:
            return sum(len(g.features) for g in self.groups)
        return self.n_features if self.n_features is not None else 1 << self.hash_bits


class ModelSpec(ModelCreate):
    """A stored model configuration. ``incarnation`` is a new id at every creation: a model
    deleted and created again under the same name is another model ("" for a model stored
    before incarnations)."""

    created_at: float = 0.0
    incarnation: str = Field("", max_length=64)


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
    libsvm_zero_based: bool = Field(False, description="its libsvm text has 0-based indices")
    created_at: float
    incarnation: str = Field("", description="a new id at every creation: a model deleted "
                             "and created again under this name has another")
    examples_applied: int
    updates: int
    log_position: str | None = Field(description="id of the last applied log entry")
    log_end: str | None = Field(description="id of the last appended log entry")
    progressive_accuracy: float | None
    progressive_examples: int
    n_selected: int
    selected_features: list[SelectedFeature] | None = None
    owner: bool = Field(description="whether this process folds the log into the learner")
    applied_at: float | None = Field(None, description="when the state last changed: examples "
                                     "applied, or restored (Unix time; null: neither yet)")


class BatchModelPublic(BaseModel):
    """A batch model: its groups, the version it serves and what its fold holds."""

    name: str
    algorithm: str
    family: str
    task: str
    params: dict[str, Any]
    created_at: float
    incarnation: str = Field("", description="a new id at every creation")
    groups: list[GroupSpec]
    n_features: int
    libsvm_zero_based: bool = Field(False, description="its libsvm text has 0-based indices")
    version: int | None = Field(description="the version this process serves (null: none yet)")
    version_created_at: float | None
    trained_through: str | None = Field(description="last log id the served version includes")
    examples_applied: int
    train_examples: int
    validation_examples: int
    log_position: str | None
    log_end: str | None
    owner: bool = Field(description="whether this process folds the model's log")
    serving_error: str | None = None
    specialists: list[dict[str, Any]] | None = Field(
        None, description="auto models: the sets the served version fitted a specialist "
        "for (groups, kind, whether it answers the set, held-out figures of it and both "
        "halves)")
    acquisition: dict[str, Any] | None = Field(
        None, description="what the served version's per-example next-group policy does "
        "(GET /v1/models/{model}/acquisition, which starts computing it; here it starts "
        "only once the policy was asked for: state \"ready\", \"building\", \"not "
        "started\" or \"none\" with a reason)")


class RollbackRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: int = Field(ge=1)


class ExamplesAccepted(BaseModel):
    model: str
    accepted: int
    log_ids: list[str]
    applied: bool = False
    repeated: bool = Field(default=False, description="an Idempotency-Key seen before: "
                           "nothing was appended, log_ids are the first request's")


class PredictResponse(BaseModel):
    model: str
    log_position: str | None
    scores: list[float]
    labels: list[int]
    prediction_ids: list[str] | None = None
    examples_applied: int | None = Field(None, description="how many examples the state "
                                         "that answered has learned from (0: untrained)")
    warnings: list[str] = Field(default_factory=list, description="what makes the scores "
                                "meaningless, e.g. a model that has learned nothing yet")


class FeedbackRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prediction_id: str = Field(min_length=1, max_length=64)
    label: Literal[-1, 0, 1] = Field(description="-1 / +1, or 0 / 1 with 0 read as -1")


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
    version: int | None = None



class NextRequest(BaseModel):
    """``POST /next``: the groups computed so far and an optional cost cap (``budget``: its
    deprecated alias; not both)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={
        "not": {"required": ["max_cost", "budget"]}})  # one cap, under one of its names

    computed_groups: list[str] = []
    max_cost: float | None = Field(None, ge=0, allow_inf_nan=False)
    budget: float | None = Field(None, ge=0, allow_inf_nan=False,
                                 description="deprecated alias of max_cost")
    examples: list[dict[str, Any]] | None = Field(
        None, min_length=1, json_schema_extra={"items": {
            "type": "object", "anyOf": [{"required": ["features"]},
                                        {"required": ["indices", "values"]}]}},
        description="the per-example form: one answer per example, its computed set the "
        "groups it carries (or computed_groups); the same bodies as /predict")
    exchange_rate: float | None = Field(
        None, ge=0, allow_inf_nan=False, description="with examples: loss units per unit "
        "of cost; stop when no set of groups lowers the held-out loss by more than its "
        "cost times this")


class NextGroup(BaseModel):
    name: str
    cost: float
    expected_gain: float | None = None


class NextResponse(BaseModel):
    model: str
    version: int
    computed_groups: list[str]
    cost: float
    next_group: NextGroup | None


class ExampleNextGroup(NextGroup):
    expected_gain_interval: list[float] | None = None


class NextCandidate(BaseModel):
    name: str
    cost: float
    expected_gain: float | None = None
    gain_per_cost: float | None = None
    within_max_cost: bool | None = None


class ExampleNext(BaseModel):
    computed_groups: list[str]
    cost: float
    next_group: ExampleNextGroup | None
    stop_reason: Literal["nothing left within max_cost", "no group worth its cost"] | None
    policy: Literal["per-example", "per-set"]
    policy_building: bool = False  # the version's per-example policy is being built
    candidates: list[NextCandidate]


class NextAnswers(BaseModel):
    """``POST /next`` with ``examples``: one answer per example."""

    model: str
    version: int
    answers: list[ExampleNext]


JobPublic = create_model(
    "JobPublic", __config__=ConfigDict(extra="allow"), __module__=__name__,
    __doc__="A retrain job (``status``: queued, running, succeeded, failed or cancelled; an "
            "API\n    process that does not serve the succeeded job's version yet says "
            "``published``).", **Job.answer_fields())
"""The API's shape of a retrain job, made from :class:`service.batch.jobs.Job` (one
definition of its members)."""


class JobList(BaseModel):
    model: str
    jobs: list[JobPublic]


class VersionList(BaseModel):
    model_config = ConfigDict(extra="allow")

    model: str
    current: int | None
    versions: list[dict]


class RollbackDone(BaseModel):
    model: str
    current: int
