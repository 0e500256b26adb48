"""The auto family (``PerSetChoice``): an anytime sequence and GBFS fitted on one window;
for each computed set the half (anytime or gbfs) with the better held-out figure answers,
and says so (``answered_by``); ``next_group`` by the combined figure's gain per unit cost.
The version keeps its held-out rows inside the model.
"""

from __future__ import annotations

from typing import Any

from service.batch.checks import check_curves, probe_rows
from service.batch.curves import FIGURE_NAMES, curve, masked_dense
from service.batch.families.anytime import anytime_seconds, check_anytime_ranges
from service.batch.families.base import BatchFamily, groups_lists, window_rows
from service.batch.families.gbfs import (
    check_groups,
    check_tree_ranges,
    tree_seconds,
    tree_sizes,
)
from service.batch.layout import BatchLayout
from service.batch.sizes import ANYTIME_CUBE_SECONDS

# the halves of a PerSetChoice: colour and dash of their curves on the sequence page
HALVES = {"anytime": ("#7b3fb5", "7 4"), "gbfs": ("#2ca02c", "2 3")}


class AutoFamily(BatchFamily):
    name = "auto"
    algorithms = ("auto",)
    reserved = frozenset({"groups", "costs", "task"})
    warm_cases = (("auto", "classification", {"gbfs_params": {"n_estimators": 3}}),)
    halves = HALVES

    def estimator_classes(self, estimator):
        from algorithms.per_set import PerSetChoice

        return [PerSetChoice]

    def build_estimator(self, algorithm, task, layout, params):
        from algorithms.per_set import PerSetChoice

        return PerSetChoice(groups=groups_lists(layout), costs=layout.costs, task=task,
                            **dict(params.algorithm))

    def fit_window(self, estimator, task, layout, params, X, y, validation, scaled,
                   progress):
        held = {} if validation is None else {"X_val": validation[0], "y_val": validation[1]}
        model = estimator.fit(X, y, progress=scaled, **held)
        progress(0.9)
        return model, _metrics(model, layout)

    # ------------------------------------------------------------------ artifact
    def held_out_for(self, rows):
        return None  # kept in the model

    def model_class(self, meta):
        from algorithms.registry import class_of

        return class_of("per-set-choice")

    def check_fits(self, model, layout, validation):
        check_groups(model, layout, model.groups, model.costs)

    def check_artifact(self, artifact):
        """The rows of the sequence page (which half answers each prefix, both halves'
        curves: one finite figure per prefix) and each half's ranges."""
        super().check_artifact(artifact)
        metrics, model = artifact.meta["metrics"], artifact.model
        P = len(model.sequence_) + 1
        names = FIGURE_NAMES[artifact.task]
        answered = metrics.get("answered_by")
        if not isinstance(answered, list) or len(answered) != P or \
                any(half not in HALVES for half in answered):
            raise ValueError(f"meta.metrics.answered_by must name a half for each of {P} "
                             "prefixes")
        check_curves(metrics.get("validation"), names, P, "meta.metrics.validation")
        by_half = metrics.get("validation_by_half")
        if not isinstance(by_half, dict):
            raise ValueError("meta.metrics.validation_by_half must be an object")
        for half, curves in by_half.items():
            if half not in HALVES:
                raise ValueError(f"meta.metrics.validation_by_half: unknown half {half!r}")
            check_curves(curves, names, P, f"meta.metrics.validation_by_half.{half}")
        check_anytime_ranges(model.anytime_)
        check_tree_ranges(model.gbfs_)

    def probe_rows(self, artifact):
        """Zeros, the kept validation rows and the anytime half's training mean."""
        model = artifact.model
        return probe_rows(artifact, model.X_val_, model.anytime_.x_mean_)

    def answer(self, artifact, X, S):
        model = artifact.model
        scores = model.decision_function(masked_dense(X, artifact.layout.features_of(S)),
                                         computed_groups=S)
        figures = model.figures(S)
        half = figures["half"]
        if half == "gbfs":
            split_on = {int(g) for g in model.gbfs_.selected_groups_}
            used = [g for g in S if g in split_on]
        else:
            used = list(S)
        out = {"predictions": scores.tolist(), "answered_by": half,
               "groups_used": artifact.names(used), "cost": artifact.layout.cost_of(used),
               "expected_on": "validation"}
        by_half = {name: figures[f"{name}_figure"] for name in HALVES}
        if artifact.task == "regression":
            out.update(expected_explained_variance=figures["explained_variance"],
                       expected_rmse=figures["rmse"],
                       expected_explained_variance_by_half=by_half)
            return out
        out.update(expected_error=figures["error"], expected_log_loss=figures["log_loss"],
                   expected_log_loss_by_half={name: -value for name, value in by_half.items()})
        return artifact.calibrated(scores, out)  # the chosen half's calibrated logits

    def next_step(self, artifact, S, budget):
        return artifact.model.next_group_gain(S, max_cost=budget)

    def order(self, artifact):
        return [int(g) for g in artifact.model.sequence_]

    def sequence_figures(self, artifact, S, j, metrics):
        row: dict[str, Any] = {"answered_by": metrics["answered_by"][j]}
        for name, values in metrics["validation"].items():
            row[f"validation_{name}"] = values[j]
        for half, curves in metrics["validation_by_half"].items():
            for name, values in curves.items():
                row[f"{half}_validation_{name}"] = values[j]
        return row

    # ------------------------------------------------------------------ sizes
    def sizes(self, spec, params, versions):
        """GBFS's, plus the anytime half: its statistics and fit (``12·8·D²``) and
        ``8·D² + 8·(J+8)·D`` in the version."""
        D, J = int(spec.dimension), len(spec.groups)
        square = 8 * D * D
        return tree_sizes(spec, params, params.algorithm.get("gbfs_params") or {}, versions,
                          artifact_extra=square + 8 * (J + 8) * D, fit_extra=12 * square)

    def fit_seconds(self, spec, params, examples):
        D, J = float(spec.dimension), float(len(spec.groups))
        n = float(window_rows(params, examples)[0])
        method = params.algorithm.get("method", "cs-g-omp")
        anytime = anytime_seconds(D, J, method if isinstance(method, str) else "cs-g-omp") + \
            ANYTIME_CUBE_SECONDS * n * D * D
        return tree_seconds(spec, params, params.algorithm.get("gbfs_params") or {},
                            examples) + anytime


def _metrics(model, layout: BatchLayout) -> dict[str, Any]:
    """PerSetChoice's combined greedy sequence, which half answers each prefix, and both
    halves' validation curves along it."""
    order = [int(g) for g in model.sequence_]
    task = model.task
    halves = {half: curve(model.half_figures(half), order, task) for half in HALVES}
    return {"sequence": [layout.group_names[g] for g in order],
            "cumulative_cost": [float(c) for c in model.cumulative_cost_],
            "answered_by": list(model.sequence_half_),
            "validation": {name: [halves[half][name][j]
                                  for j, half in enumerate(model.sequence_half_)]
                           for name in FIGURE_NAMES[task]},
            "validation_by_half": halves}
