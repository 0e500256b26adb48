"""The nvsd family (``RelaxedNVSD``, or the plain ``NVSD``; Gregorova et al., "Structured
nonlinear variable selection"): the fold keeps windows of rows. A version answers with the
largest nested support of the ranking inside ``S`` (relaxed estimator; the plain one uses
every selected variable, zero where not computed); the expected figure is that support's
validation RMSE; ``next_group`` is the first ranked group still missing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from service.batch.checks import MAX_ABS_INPUT, check_numbers, probe_rows
from service.batch.curves import FitError, masked_dense, rmse
from service.batch.families.base import BatchFamily, groups_lists, window_fold, window_rows
from service.batch.layout import BatchLayout
from service.batch.sizes import (
    FIT_FIXED_SECONDS,
    HEADER_BYTES,
    NVSD_KERNEL_BLOCKS,
    NVSD_SECONDS,
    SizeEstimate,
    int_option,
)
from service.errors import item_error

ESTIMATORS = ("relaxed", "plain")  # RelaxedNVSD (the default), NVSD


def group_ranking(model, layout: BatchLayout) -> list[int]:
    """The groups in the order of the model's ranking (its selected groups, sorted, for
    the plain estimator). O(D)."""
    if not hasattr(model, "ranking_"):
        chosen = model.selected_features()
        return sorted({int(layout.group_of[f]) for f in chosen})
    order: list[int] = []
    for support in model.supports_[1:]:
        for f in support:
            g = int(layout.group_of[int(f)])
            if g not in order:
                order.append(g)
    return order


KERNEL_LIMITS = {"degree": (1, 32), "offset": (0.0, 1e12), "sigma": (1e-12, 1e12)}
COEF_LIMIT = 1e100  # |dual coefficient| (a fit's: |y| / alpha, y below 2^50)


def check_kernel_ranges(model) -> None:
    """ValueError unless the kernel parameters (``KERNEL_LIMITS``), the expansion's
    coefficients (``COEF_LIMIT``) and rows (below 2^51) of a loaded NVSD model and of each
    of its support models are in range. O(size)."""
    parts = [model, *getattr(model, "support_models_", [])]
    for part in parts:
        params = dict(getattr(part, "kernel_params", None) or {})
        for name in KERNEL_LIMITS:
            if name not in params and hasattr(part, name):
                params[name] = getattr(part, name)
        for name, (low, high) in KERNEL_LIMITS.items():
            value = params.get(name)
            if value is not None and (isinstance(value, bool) or
                                      not isinstance(value, int | float | np.number) or
                                      not low <= float(value) <= high):
                raise ValueError(f"nvsd model: kernel {name} must be in [{low:g}, {high:g}]")
        for name in ("dual_coef_", "alpha_", "beta_", "intercept_"):
            value = getattr(part, name, None)
            if value is not None and not np.all(np.abs(np.asarray(value, dtype=np.float64))
                                                <= COEF_LIMIT):
                raise ValueError(f"nvsd model: {name} out of range")
        for name in ("X_fit_", "X_train_"):
            value = getattr(part, name, None)
            if value is not None and not np.all(np.abs(np.asarray(value, dtype=np.float64))
                                                <= 2.0 * MAX_ABS_INPUT):
                raise ValueError(f"nvsd model: {name} out of range")


class NVSDFamily(BatchFamily):
    name = "nvsd"
    algorithms = ("nvsd",)
    default_window = 200
    reserved = frozenset({"groups", "validation_fraction"})
    own_service_params = frozenset({"window", "estimator"})
    warm_cases = (("nvsd", "regression", None),
                  ("nvsd", "regression", {"estimator": "plain"}))

    def estimator_choice(self, params):
        estimator = params.pop("estimator", ESTIMATORS[0])
        if estimator not in ESTIMATORS:
            raise item_error("must be 'relaxed' (RelaxedNVSD) or 'plain' (NVSD)",
                             field="params.estimator")
        return estimator

    def estimator_classes(self, estimator):
        from algorithms.nvsd import NVSD, RelaxedNVSD

        return [NVSD, RelaxedNVSD] if estimator == "relaxed" else [NVSD]

    def dropped_keywords(self, estimator):
        # the relaxed estimator runs a tau path itself
        return {"tau", "warm_start"} if estimator == "relaxed" else set()

    def build_estimator(self, algorithm, task, layout, params):
        from algorithms.nvsd import NVSD, RelaxedNVSD

        kwargs = dict(params.algorithm)
        kwargs.setdefault("regularizer", "gl")
        if kwargs["regularizer"] == "gl":
            kwargs["groups"] = groups_lists(layout)
        if params.estimator == "plain":
            return NVSD(**kwargs)
        return RelaxedNVSD(**kwargs)

    def fit_window(self, estimator, task, layout, params, X, y, validation, scaled,
                   progress):
        if params.estimator == "relaxed" and validation is not None:
            model = estimator.fit(X, y, validation=validation, progress=scaled)
        elif params.estimator == "relaxed":
            if len(y) < 4:
                raise FitError(f"needs at least 4 training examples, the window holds "
                               f"{len(y)}")
            model = estimator.fit(X, y, progress=scaled)
        else:
            model = estimator.fit(X, y)
        progress(0.9)
        metrics: dict[str, Any] = {"train_rmse": rmse(model.predict(X), y),
                                   "selected_features": [int(f) for f in
                                                         model.selected_features()]}
        metrics["validation_rmse"] = None if validation is None else \
            rmse(model.predict(validation[0]), validation[1])
        return model, metrics

    # ------------------------------------------------------------------ artifact
    def held_out_for(self, rows):
        return None

    def model_class(self, info):
        from algorithms.registry import class_of

        return class_of("nvsd" if info.estimator == "plain" else "relaxed-nvsd")

    def check_fits(self, model, layout, validation):
        D = layout.n_features
        width = model.model_.n_features_in_ if hasattr(model, "model_") else \
            model.X_train_.shape[1]
        if width != D:
            raise ValueError(f"artifact has {width} features, this model {D}")

    def check_artifact(self, artifact):
        """The figures the answers read (finite RMSEs) and :func:`check_kernel_ranges`."""
        super().check_artifact(artifact)
        metrics = artifact.info.metrics
        for name in ("train_rmse", "validation_rmse"):
            value = metrics.get(name)
            if name == "validation_rmse" and value is None:
                continue
            check_numbers([value], 1, f"meta.metrics.{name}")
        check_kernel_ranges(artifact.model)

    def probe_rows(self, artifact):
        """Zeros and the first training rows of the kernel expansion."""
        model, D = artifact.model, artifact.layout.n_features
        if hasattr(model, "X_train_"):
            return probe_rows(artifact, model.X_train_)
        fitted = [part for part in getattr(model, "support_models_", [])
                  if np.size(part.columns) and len(getattr(part, "X_fit_", ()))]
        rows = np.zeros((0, D))
        if fitted:  # the widest support's rows, in their columns
            widest = max(fitted, key=lambda part: np.size(part.columns))
            rows = np.zeros((len(widest.X_fit_), D))
            rows[:, np.asarray(widest.columns, dtype=np.int64)] = widest.X_fit_
        return probe_rows(artifact, rows)

    def answer(self, artifact, X, S):
        model, layout = artifact.model, artifact.layout
        features = layout.features_of(S)
        dense = masked_dense(X, features)
        out: dict[str, Any] = {}
        if hasattr(model, "supports_"):
            k = int(model.support_for(features.tolist()))
            support = model.supports_[k]
            scores = model.support_models_[k].predict(dense)
            out["expected_rmse"] = float(model.support_validation_rmse_[k])
            selected = model.support_
        else:
            support = model.selected_features()
            scores = model.predict(dense)
            out["expected_rmse"] = artifact.info.metrics.get("validation_rmse")
            selected = support
        used = sorted({int(layout.group_of[int(f)]) for f in support})
        wanted = sorted({int(layout.group_of[int(f)]) for f in selected})
        out.update(predictions=scores.tolist(), groups_used=artifact.names(used),
                   cost=layout.cost_of(used), expected_explained_variance=None,
                   missing_groups=artifact.names([g for g in wanted if g not in S]))
        return artifact.labels(scores, out)

    def next_step(self, artifact, S, budget):
        model, layout = artifact.model, artifact.layout
        g = next((g for g in group_ranking(model, layout) if g not in S), None)
        room = artifact.room(S, budget)
        if g is None or (room is not None and layout.costs[g] > room):
            return None
        gain = None
        if hasattr(model, "supports_"):
            now = int(model.support_for(layout.features_of(S).tolist()))
            later = int(model.support_for(layout.features_of(sorted(set(S) | {g})).tolist()))
            rmse_of = model.support_validation_rmse_
            gain = float(rmse_of[now] - rmse_of[later])
        return g, gain

    def order(self, artifact):
        return group_ranking(artifact.model, artifact.layout)

    def sequence_figures(self, artifact, S, j, metrics):
        model = artifact.model
        if not hasattr(model, "supports_"):
            return {}
        k = int(model.support_for(artifact.layout.features_of(S).tolist()))
        return {"validation_rmse": float(model.support_validation_rmse_[k])}

    # ------------------------------------------------------------------ sizes
    def sizes(self, spec, params, versions):
        """A fit holds ``4.5`` (n·D)² float64 (the kernel-derivative blocks); a version the
        support models' rows."""
        D = int(spec.dimension)
        fold, snapshot, write = window_fold(spec, params)
        n, _ = window_rows(params)
        nd = n * D
        artifact = 2 * 8 * n * (D + 1) + HEADER_BYTES
        fit = int(NVSD_KERNEL_BLOCKS * 8 * nd * nd) + 3 * fold
        return SizeEstimate(fold, snapshot, write, max(fit, 5 * artifact), artifact,
                            artifact, versions)

    def fit_seconds(self, spec, params, examples):
        """The path length x (n·D)³."""
        D = float(spec.dimension)
        n = float(window_rows(params, examples)[0])
        options = params.algorithm
        if params.estimator == "relaxed":
            nus = options.get("nus", (1e-3, 1e-1, 1.0))
            ratios = options.get("l1_ratios", (0.25, 0.5, 0.75)) \
                if options.get("regularizer") == "en" else (None,)
            taus = int_option(options.get("n_taus"), 8, 1, 1 << 16)
            steps = max(1, len(nus) if isinstance(nus, list | tuple) else 3) * \
                max(1, len(ratios) if isinstance(ratios, list | tuple) else 3) * taus
        else:
            steps = 1
        return FIT_FIXED_SECONDS + NVSD_SECONDS * steps * (n * D) ** 3
