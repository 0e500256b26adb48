"""What a batch spec must pass before it is stored: its estimated sizes against the memory
and storage limits, a retrain's estimated time against ``max_fit_seconds``, then the
estimator's own check of its arguments over the layout."""

from __future__ import annotations

from service.batch.spec import PART_NAMES, estimate_fit_seconds, estimate_sizes, split_params
from service.batch.worker.fit import check_estimator
from service.errors import InputError, item_error
from service.schemas import ModelCreate


def _shown_groups(spec: ModelCreate) -> list[str]:
    names = [g.name for g in spec.groups]
    return names if len(names) <= 8 else names[:8] + [f"... ({len(names)} groups)"]


def _mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def validate_batch_spec(spec: ModelCreate, settings, room: int | None = None, *,
                        sizes_only: bool = False) -> None:
    """Everything about a batch spec that can be checked before it is stored; InputError
    (422). Sizes (:func:`~service.batch.spec.estimate_sizes`): the parts together must fit
    ``max_model_bytes``, the stored parts (snapshot and kept versions) the backend's
    ``room`` (bytes it can still store; None: no limit known); each part is named with its
    estimate. Time: a retrain's :func:`~service.batch.spec.estimate_fit_seconds` must fit
    ``max_fit_seconds``. Then the estimator's arguments over the layout (O(D): skipped with
    ``sizes_only``), so a model too large is refused from the counts alone, in O(groups)."""
    params = split_params(spec)
    try:
        _check_sizes(spec, params, settings, room)
    except InputError:
        raise
    except Exception:  # arguments the estimates cannot read: the estimator's check says why
        _check_estimator(spec, params)
        raise
    if not sizes_only:
        _check_estimator(spec, params)


def _check_estimator(spec: ModelCreate, params) -> None:
    try:
        from service.batch.spec import BatchLayout

        check_estimator(spec.family, spec.algorithm, spec.task, BatchLayout(spec), params)
    except (TypeError, ValueError) as exc:
        raise item_error(f"{spec.algorithm}: {exc}", field="params") from exc


def _check_sizes(spec: ModelCreate, params, settings, room: int | None) -> None:
    max_bytes = int(settings.max_model_bytes)
    sizes = estimate_sizes(spec, params, versions_kept=settings.versions_kept)
    parts = sizes.parts()
    listed = ", ".join(f"{PART_NAMES[k]} {_mb(v)}" for k, v in parts.items())
    where = f"{spec.algorithm} over {spec.dimension} features in groups {_shown_groups(spec)}"
    errors = [{"field": "groups", "part": k, "bytes": v,
               "message": f"{PART_NAMES[k]}: about {v:,} bytes"} for k, v in parts.items()]
    if sizes.total > max_bytes:
        raise InputError(
            f"{where} needs about {sizes.total:,} bytes ({listed}; {sizes.versions} kept "
            f"versions: FEATUREBUDGET_VERSIONS_KEPT={settings.versions_kept} and the "
            f"current), more than the limit of {max_bytes:,} (FEATUREBUDGET_MAX_MODEL_BYTES)",
            errors)
    if room is not None and sizes.stored_bytes > room:
        raise InputError(
            f"{where} needs about {sizes.stored_bytes:,} bytes of storage (snapshot "
            f"{_mb(sizes.snapshot)}, kept versions {_mb(sizes.versions_kept)}), more than "
            f"the {room:,} bytes the backend can still store", errors)
    seconds = estimate_fit_seconds(spec, params)
    if seconds > settings.max_fit_seconds:
        raise InputError(
            f"{where}: a retrain would take about {seconds:,.0f} s, more than the limit of "
            f"{settings.max_fit_seconds:g} s (FEATUREBUDGET_MAX_FIT_SECONDS); use fewer "
            "features, a smaller window or fewer trees / path steps",
            fit_time_errors("params", seconds, settings))


def fit_time_errors(field: str, seconds: float, settings) -> list[dict]:
    """The error item of a retrain estimated at ``seconds``, over ``max_fit_seconds``."""
    return [{"field": field, "estimated_seconds": round(seconds, 1),
             "max_fit_seconds": settings.max_fit_seconds,
             "message": f"a retrain takes about {seconds:,.0f} s"}]


__all__ = ["fit_time_errors", "validate_batch_spec"]
