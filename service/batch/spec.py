"""What a batch model's spec means: its feature layout, the service's own parameters, the
estimator its ``params`` build, and the memory and fit time it needs.

``params`` mixes the algorithm's keyword arguments with the service's
(``validation_fraction``, the retrain policy ``retrain_every_examples`` /
``retrain_every_seconds``, the training ``window`` of the window families, and nvsd's
``estimator``); :func:`split_params` separates and validates them. What differs by family
comes from its adapter (``service.batch.families``); the layout and the size parts live in
``service.batch.layout`` and ``service.batch.sizes`` (named here too).
"""

from __future__ import annotations

import inspect
import math

from algorithms.batch import canonical_params
from service.batch.classes import parse_classes
from service.batch.families import family_of
from service.batch.layout import BatchLayout, BatchParams, Window
from service.batch.sizes import (
    ANYTIME_CUBE_SECONDS,
    ANYTIME_GROUP_SECONDS,
    FIT_FIXED_SECONDS,
    GBFS_CELL_SECONDS,
    GBFS_FIGURE_SECONDS,
    GBFS_SPLIT_SECONDS,
    GROUP_LASSO_SECONDS,
    HELD_OUT_BYTES,
    HELD_OUT_ROWS,
    NVSD_SECONDS,
    PART_NAMES,
    SizeEstimate,
    held_out_capacity,
    validation_size,
)
from service.errors import item_error
from service.schemas import ModelCreate

SERVICE_PARAMS = ("validation_fraction", "retrain_every_examples", "retrain_every_seconds",
                  "window", "estimator", "classes")


def split_params(spec: ModelCreate) -> BatchParams:
    """The service's parameters (defaults filled in) and the estimator's; 422 naming the
    problem. Unknown names are refused, with the known ones listed."""
    family = family_of(spec.family)
    params = dict(spec.params)
    fraction = params.pop("validation_fraction", 0.2)
    if isinstance(fraction, bool) or not isinstance(fraction, int | float) or \
            not 0.0 <= fraction < 1.0:
        raise item_error("must be a number in [0, 1)", field="params.validation_fraction")
    every_n, every_s = family.default_policy
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
    if family.default_window is not None:
        window = _window(raw_window, family.default_window)
    elif raw_window is not None:
        raise item_error("anytime models keep sufficient statistics of every example, not a "
                         "window", field="params.window")
    _check_classes(spec, family, params.pop("classes", None))
    estimator = family.estimator_choice(params)
    known, deprecated = _estimator_keywords(spec, estimator)
    known -= family.reserved
    unknown = sorted(set(params) - known - deprecated)
    if unknown:
        listed = (known | set(SERVICE_PARAMS[:3]) | family.own_service_params)
        raise item_error(f"unknown parameters {unknown} for {spec.algorithm}; known: "
                         f"{sorted(listed)}", field=f"params.{unknown[0]}")
    try:  # a renamed parameter's old name (e.g. gbfs's mu) reaches the estimator renamed
        params = canonical_params(family.estimator_classes(estimator)[-1], params)
    except TypeError as exc:
        raise item_error(str(exc), field="params") from exc
    return BatchParams(float(fraction), every_n, None if every_s is None else float(every_s),
                       window, estimator, params)


MULTICLASS_FAMILIES = ("gbfs", "auto")


def _check_classes(spec, family, raw) -> None:
    """``params.classes`` (:func:`service.batch.classes.parse_classes`): only for the
    classification models of a family that fits K classes; 422 otherwise."""
    if raw is None:
        return
    if family.name not in MULTICLASS_FAMILIES:
        raise item_error(f"multi-class models (params.classes) are gbfs or auto models; "
                         f"{spec.algorithm} is binary (labels -1/+1 or 0/1)",
                         field="params.classes")
    if spec.task != "classification":
        raise item_error("params.classes is for task 'classification'",
                         field="params.classes")
    parse_classes(raw)


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



def _estimator_keywords(spec: ModelCreate, estimator: str | None
                        ) -> tuple[set[str], set[str]]:
    """(the estimator's keywords, their deprecated spellings, still accepted)."""
    family = family_of(spec.family)
    names: set[str] = set()
    deprecated: set[str] = set()
    for cls in family.estimator_classes(estimator):
        deprecated |= set(getattr(cls, "_renamed", {}))
        for name, parameter in inspect.signature(cls.__init__).parameters.items():
            if name != "self" and parameter.kind is not inspect.Parameter.VAR_KEYWORD:
                names.add(name)
    names -= family.dropped_keywords(estimator)
    return names - deprecated, deprecated


def memory_bytes(spec: ModelCreate, params: BatchParams) -> int:
    """Peak memory of one process that folds, snapshots, retrains and serves the model (the
    embedded backend; a Redis worker holds less): :attr:`SizeEstimate.peak_bytes`."""
    return estimate_sizes(spec, params).peak_bytes


def estimate_sizes(spec: ModelCreate, params: BatchParams, *,
                   versions_kept: int = 10) -> SizeEstimate:
    """The sizes of :class:`SizeEstimate` for this spec at its largest (full windows, a
    full held-out reservoir), from its family's adapter (``sizes``, where each family's
    formula is written). O(1) but for reading the estimator's defaults."""
    versions = max(0, int(versions_kept)) + 1  # the newest ones and the current
    return family_of(spec.family).sizes(spec, params, versions)


def estimate_fit_seconds(spec: ModelCreate, params: BatchParams, *,
                         examples: int | None = None) -> float:
    """Expected wall time of one retrain with ``examples`` rows in the window (default:
    the full window), from its family's adapter (``fit_seconds``) and the measured
    constants of ``service.batch.sizes``. O(1)."""
    return family_of(spec.family).fit_seconds(spec, params, examples)


__all__ = ["ANYTIME_CUBE_SECONDS", "ANYTIME_GROUP_SECONDS", "FIT_FIXED_SECONDS",
           "GBFS_CELL_SECONDS", "GBFS_FIGURE_SECONDS", "GBFS_SPLIT_SECONDS",
           "GROUP_LASSO_SECONDS", "HELD_OUT_BYTES", "HELD_OUT_ROWS", "NVSD_SECONDS",
           "PART_NAMES", "SERVICE_PARAMS", "BatchLayout", "BatchParams", "SizeEstimate",
           "Window", "estimate_fit_seconds", "estimate_sizes", "held_out_capacity",
           "memory_bytes", "split_params", "validation_size"]
