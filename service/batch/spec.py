"""What a batch model's spec means: its feature layout, the service's own parameters, the
estimator its ``params`` build, and the memory it needs.

A batch model's features are those of its groups, concatenated in the order given: group
``g`` holds the indices ``offsets[g] .. offsets[g + 1] - 1``. ``params`` mixes the
algorithm's keyword arguments with the service's (``validation_fraction``, the retrain policy
``retrain_every_examples`` / ``retrain_every_seconds``, the training ``window`` of gbfs and
nvsd, and nvsd's ``estimator``); :func:`split_params` separates and validates them.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from algorithms.batch import canonical_params
from service.errors import item_error
from service.schemas import ModelCreate

SERVICE_PARAMS = ("validation_fraction", "retrain_every_examples", "retrain_every_seconds",
                  "window", "estimator")
# the estimator's own keywords that the service sets from the spec
_RESERVED = {"anytime": {"groups", "costs", "method"},
             "gbfs": {"loss", "feature_costs", "feature_groups", "group_costs"},
             "nvsd": {"groups", "validation_fraction"},
             "auto": {"groups", "costs", "task"}}
_DEFAULT_POLICY = {"anytime": (10_000, 60.0), "gbfs": (None, None), "nvsd": (None, None),
                   "auto": (None, None)}
_DEFAULT_WINDOW = {"gbfs": 5000, "nvsd": 200, "auto": 5000}


@dataclass(frozen=True)
class Window:
    """The bounded training window of gbfs / nvsd: the newest ``size`` examples, or a
    uniform reservoir of ``size`` over everything folded (seeded, see fold_state)."""

    kind: str
    size: int
    seed: int


@dataclass(frozen=True)
class BatchParams:
    validation_fraction: float
    retrain_every_examples: int | None
    retrain_every_seconds: float | None
    window: Window | None
    estimator: str | None  # nvsd: "relaxed" (default) or "plain"
    algorithm: dict[str, Any]  # the estimator's own keyword arguments


class BatchLayout:
    """Feature layout of a batch spec: names <-> indices, feature -> group, costs."""

    def __init__(self, spec: ModelCreate) -> None:
        self.spec = spec
        self.group_names = [g.name for g in spec.groups]
        self.costs = np.array([g.cost for g in spec.groups], dtype=np.float64)
        sizes = [len(g.features) for g in spec.groups]
        self.offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=self.offsets[1:])
        self.n_features = int(self.offsets[-1])
        self.n_groups = len(sizes)
        self.group_of = np.repeat(np.arange(self.n_groups, dtype=np.int64), sizes)
        self.group_index = {name: g for g, name in enumerate(self.group_names)}
        self.feature_index = [{name: int(self.offsets[g]) + k for k, name in
                               enumerate(group.features)} for g, group in enumerate(spec.groups)]

    @cached_property
    def feature_names(self) -> list[str]:
        return [name for group in self.spec.groups for name in group.features]

    def group_features(self, g: int) -> np.ndarray:
        return np.arange(self.offsets[g], self.offsets[g + 1], dtype=np.int64)

    @cached_property
    def groups(self) -> list[np.ndarray]:
        return [self.group_features(g) for g in range(self.n_groups)]

    def group_ids(self, names, field: str = "computed_groups") -> list[int]:
        """Group names -> ids; a 422 naming the first unknown one."""
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise item_error("must be a list of group names", field=field)
        ids = []
        for name in names:
            g = self.group_index.get(name)
            if g is None:
                raise item_error(f"unknown group {name!r}; this model has "
                                 f"{self.group_names}", field=field)
            ids.append(g)
        return sorted(set(ids))

    def features_of(self, groups) -> np.ndarray:
        parts = [self.groups[g] for g in sorted(groups)]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def cost_of(self, groups) -> float:
        return float(sum(self.costs[g] for g in groups))


def split_params(spec: ModelCreate) -> BatchParams:
    """The service's parameters (defaults filled in) and the estimator's; 422 naming the
    problem. Unknown names are refused, with the known ones listed."""
    family = spec.family
    params = dict(spec.params)
    fraction = params.pop("validation_fraction", 0.2)
    if isinstance(fraction, bool) or not isinstance(fraction, int | float) or \
            not 0.0 <= fraction < 1.0:
        raise item_error("must be a number in [0, 1)", field="params.validation_fraction")
    every_n, every_s = _DEFAULT_POLICY[family]
    every_n = params.pop("retrain_every_examples", every_n)
    every_s = params.pop("retrain_every_seconds", every_s)
    if every_n is not None and (isinstance(every_n, bool) or not isinstance(every_n, int)
                                or every_n < 1):
        raise item_error("must be a positive integer or null",
                         field="params.retrain_every_examples")
    if every_s is not None and (isinstance(every_s, bool) or
                                not isinstance(every_s, int | float) or
                                not math.isfinite(every_s) or every_s <= 0):
        raise item_error("must be a positive number of seconds or null",
                         field="params.retrain_every_seconds")
    window = None
    raw_window = params.pop("window", None)
    if family in _DEFAULT_WINDOW:
        window = _window(raw_window, _DEFAULT_WINDOW[family])
    elif raw_window is not None:
        raise item_error("anytime models keep sufficient statistics of every example, not a "
                         "window", field="params.window")
    estimator = params.pop("estimator", "relaxed" if family == "nvsd" else None)
    if family == "nvsd" and estimator not in ("relaxed", "plain"):
        raise item_error("must be 'relaxed' (RelaxedNVSD) or 'plain' (NVSD)",
                         field="params.estimator")
    if family != "nvsd" and estimator is not None:
        raise item_error("only nvsd models choose an estimator", field="params.estimator")
    known, deprecated = _estimator_keywords(spec, estimator)
    known -= _RESERVED[family]
    unknown = sorted(set(params) - known - deprecated)
    if unknown:
        listed = (known | set(SERVICE_PARAMS[:3]) | _window_names(family))
        raise item_error(f"unknown parameters {unknown} for {spec.algorithm}; known: "
                         f"{sorted(listed)}", field=f"params.{unknown[0]}")
    try:  # a renamed parameter's old name (e.g. gbfs's mu) reaches the estimator renamed
        params = canonical_params(_estimator_classes(spec, estimator)[-1], params)
    except TypeError as exc:
        raise item_error(str(exc), field="params") from exc
    return BatchParams(float(fraction), every_n, None if every_s is None else float(every_s),
                       window, estimator, params)


def _window_names(family: str) -> set[str]:
    """The service's parameters beyond the first three, for this family."""
    return {"gbfs": {"window"}, "nvsd": {"window", "estimator"},
            "auto": {"window"}}.get(family, set())


def _window(raw, default_size: int) -> Window:
    if raw is None:
        return Window("newest", default_size, 0)
    if not isinstance(raw, dict) or set(raw) - {"kind", "size", "seed"}:
        raise item_error('must be {"kind": "newest" | "reservoir", "size": N, "seed": s}',
                         field="params.window")
    kind = raw.get("kind", "newest")
    size = raw.get("size", default_size)
    seed = raw.get("seed", 0)
    if kind not in ("newest", "reservoir"):
        raise item_error("must be 'newest' or 'reservoir'", field="params.window.kind")
    if isinstance(size, bool) or not isinstance(size, int) or not 2 <= size <= 10_000_000:
        raise item_error("must be an integer in [2, 10000000]", field="params.window.size")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise item_error("must be an integer in [0, 2^63)", field="params.window.seed")
    return Window(kind, size, seed)


def _estimator_classes(spec: ModelCreate, estimator: str | None) -> list[type]:
    """The estimator classes whose keywords ``params`` may use (the built one last)."""
    from algorithms.anytime import AnytimeLinearModel
    from algorithms.gbfs import GBFS
    from algorithms.nvsd import NVSD, RelaxedNVSD
    from algorithms.per_set import PerSetChoice

    if spec.family == "anytime":
        return [AnytimeLinearModel]
    if spec.family == "gbfs":
        return [GBFS]
    if spec.family == "auto":
        return [PerSetChoice]
    return [NVSD, RelaxedNVSD] if estimator == "relaxed" else [NVSD]


def _estimator_keywords(spec: ModelCreate, estimator: str | None
                        ) -> tuple[set[str], set[str]]:
    """(the estimator's keywords, their deprecated spellings, still accepted)."""
    names: set[str] = set()
    deprecated: set[str] = set()
    for cls in _estimator_classes(spec, estimator):
        deprecated |= set(getattr(cls, "_renamed", {}))
        for name, parameter in inspect.signature(cls.__init__).parameters.items():
            if name != "self" and parameter.kind is not inspect.Parameter.VAR_KEYWORD:
                names.add(name)
    if estimator == "relaxed":
        names -= {"tau", "warm_start"}  # the relaxed estimator runs a tau path itself
    return names - deprecated, deprecated


def validation_size(window: Window, fraction: float) -> int:
    """Rows kept of the held-out part: in proportion to the training window."""
    if fraction <= 0:
        return 0
    return max(1, int(math.ceil(window.size * fraction / (1.0 - fraction))))


HELD_OUT_ROWS = 5000  # anytime classification: held-out rows kept for per-set figures
HELD_OUT_BYTES = 64 << 20  # ... and at most this many bytes of them


def held_out_capacity(n_features: int) -> int:
    """Rows of the anytime classification models' reservoir of held-out rows
    (``fold_state``): ``HELD_OUT_ROWS``, fewer when D is so large that they would pass
    ``HELD_OUT_BYTES`` (at least 100)."""
    return int(max(100, min(HELD_OUT_ROWS, HELD_OUT_BYTES // (8 * max(n_features, 1)))))


def memory_bytes(spec: ModelCreate, params: BatchParams) -> int:
    """Upper bound of what the fold state, a fit and an artifact hold, in bytes.

    anytime: training + validation statistics (2 D² floats), the fit's standardized ``C`` and
    the artifact's copy (2 D²), the prefix weights (J·D), for classification the held-out
    rows and the artifact's copy; gbfs: the windows (N + N_val)·D floats, their bin codes
    with the masked copies and the held-out rows in the artifact; auto: gbfs's plus
    anytime's; nvsd: the windows plus the (nD)² kernel-derivative blocks."""
    D, J = spec.dimension, len(spec.groups)
    if spec.family == "anytime":
        held_out = 2 * 8 * held_out_capacity(D) * D if spec.task == "classification" else 0
        return 8 * (4 * D * D + (J + 1) * D) + held_out
    window = params.window
    rows = window.size + validation_size(window, params.validation_fraction)
    own = params.algorithm if spec.family == "gbfs" else \
        (params.algorithm.get("gbfs_params") or {})
    copies = own.get("masked_copies", 4) if isinstance(own, dict) else 4
    masked = 1 + (copies if isinstance(copies, int) and 0 <= copies <= 64 else 4)
    if spec.family == "gbfs":  # windows, their bin codes with the masked copies, the artifact
        return 9 * rows * D + 16 * rows + masked * window.size * D + 8 * rows * D
    if spec.family == "auto":  # the gbfs part, the anytime statistics and refit matrices
        return 9 * rows * D + 16 * rows + masked * window.size * D + 8 * rows * D + \
            8 * (4 * D * D + (J + 1) * D)
    nd = window.size * D
    return 8 * rows * D + 8 * 3 * nd * nd

