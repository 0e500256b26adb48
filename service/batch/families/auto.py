"""The auto family (``PerSetChoice``): an anytime sequence and GBFS fitted on one window;
for each computed set the half (anytime or gbfs) with the better held-out figure answers,
and says so (``answered_by``); ``next_group`` by the combined figure's gain per unit cost.
The version keeps its held-out rows inside the model. Each retrain also fits specialists
(a model on exactly one set's features, ``algorithms.per_set.specialists``) for the sets
pinned in ``params.specialist_sets`` and then the sets ``/predict`` asked for most
(:mod:`service.batch.requested_sets`), ``params.max_specialists`` (default 8) in all; a
specialist answers its set when it beats both halves on the held-out rows
(``answered_by: "specialist"``).

A multi-class model (``params.classes``, K >= 3) has no anytime half (its sets are
answered by a linear regression on ±1 labels) and no specialists: its versions are its
GBFS half alone, a softmax GBFS with the half's defaults (``GBFS_CLASSIFICATION``, the
``gbfs_params``) early-stopped on the held-out rows as the half is, served as a ``gbfs``
version is (``service.batch.families.gbfs``) with ``answered_by: "gbfs"`` on every answer
and sequence row.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from algorithms.per_set.choice import GBFS_CLASSIFICATION
from algorithms.per_set.specialists import tree_params
from service.batch.checks import check_curves, probe_rows
from service.batch.curves import FIGURE_NAMES, curve, masked_dense
from service.batch.families.anytime import anytime_seconds, check_anytime_ranges
from service.batch.families.base import BatchFamily, groups_lists, window_rows
from service.batch.families.gbfs import (
    GBFSFamily,
    check_groups,
    check_tree_ranges,
    tree_seconds,
    tree_sizes,
)
from service.batch.families.gbfs import _metrics as gbfs_metrics
from service.batch.layout import BatchLayout
from service.batch.sizes import ANYTIME_CUBE_SECONDS
from service.errors import item_error

# the halves of a PerSetChoice: colour and dash of their curves on the sequence page
HALVES = {"anytime": ("#7b3fb5", "7 4"), "gbfs": ("#2ca02c", "2 3")}
ANSWERERS = (*HALVES, "specialist")  # what may answer a prefix (answered_by)
MAX_SPECIALISTS = 8  # PerSetChoice's default max_specialists
_GBFS = GBFSFamily()  # what answers a multi-class auto model (module docstring)


def multi(layout) -> bool:
    """Whether a model of this layout is multi-class (its GBFS half alone)."""
    return layout.classes is not None


class AutoFamily(BatchFamily):
    name = "auto"
    algorithms = ("auto",)
    reserved = frozenset({"groups", "costs", "task"})
    warm_cases = (("auto", "classification", {"gbfs_params": {"n_estimators": 3}}),)
    halves = HALVES
    own_service_params = frozenset({"window", "classes"})

    def estimator_classes(self, estimator):
        from algorithms.per_set import PerSetChoice

        return [PerSetChoice]

    def build_estimator(self, algorithm, task, layout, params):
        from algorithms.per_set import PerSetChoice

        if multi(layout):  # the GBFS half alone, softmax
            from algorithms.gbfs import GBFS

            own = dict(params.algorithm.get("gbfs_params") or {})
            if own.get("uncomputed") == "prefix":
                raise ValueError("a multi-class model (params.classes) answers with every "
                                 "tree (uncomputed='missing'), not the prefix rule")
            return GBFS(loss="softmax", feature_groups=groups_lists(layout),
                        group_costs=layout.costs, **{**GBFS_CLASSIFICATION, **own})
        keywords = dict(params.algorithm)
        if keywords.get("specialist_sets") is not None:
            keywords["specialist_sets"] = specialist_ids(layout, keywords["specialist_sets"])
        return PerSetChoice(groups=groups_lists(layout), costs=layout.costs, task=task,
                            **keywords)

    def specialist_params(self, params, layout: BatchLayout, requested):
        """``params`` whose ``specialist_sets`` are the pinned sets (group names) followed
        by the ``requested`` ones (group-id tuples, most requested first) not among them,
        ``max_specialists`` in all; ``params`` itself when that adds none. O(sets)."""
        if multi(layout):
            return params  # (no specialists: module docstring)
        pinned = list(params.algorithm.get("specialist_sets") or [])
        limit = params.algorithm.get("max_specialists", MAX_SPECIALISTS)
        seen = {tuple(specialist_ids(layout, [S])[0]) for S in pinned}
        names = [list(S) for S in pinned]
        for S in requested:
            if len(names) >= limit:
                break
            if S not in seen and all(0 <= g < layout.n_groups for g in S):
                seen.add(S)
                names.append([layout.group_names[g] for g in S])
        if len(names) == len(pinned):
            return params
        return dataclasses.replace(params, algorithm={**params.algorithm,
                                                      "specialist_sets": names})

    def fit_window(self, estimator, task, layout, params, X, y, validation, scaled,
                   progress):
        held = {} if validation is None else {"X_val": validation[0], "y_val": validation[1]}
        model = estimator.fit(X, y, progress=scaled, **held)
        progress(0.9)
        if multi(layout):
            metrics = gbfs_metrics(model, layout, task, X, y, validation)
            metrics["answered_by"] = ["gbfs"] * (len(metrics["sequence"]) + 1)
            return model, metrics
        return model, _metrics(model, layout)

    # ------------------------------------------------------------------ artifact
    def held_out_for(self, rows):
        return None  # kept in the model

    def model_class(self, info):
        from algorithms.registry import class_of

        if info.task == "classification" and \
                (info.params or {}).get("classes") is not None:
            return class_of("gbfs")  # a multi-class version: its GBFS half
        return class_of("per-set-choice")

    def check_fits(self, model, layout, validation):
        if multi(layout):
            return _GBFS.check_fits(model, layout, validation)
        check_groups(model, layout, model.groups, model.costs)

    def check_artifact(self, artifact):
        """The rows of the sequence page (which half answers each prefix, both halves'
        curves: one finite figure per prefix) and each half's ranges (a multi-class
        version: a gbfs version's checks)."""
        if multi(artifact.layout):
            return _GBFS.check_artifact(artifact)
        super().check_artifact(artifact)
        metrics, model = artifact.info.metrics, artifact.model
        P = len(model.sequence_) + 1
        names = FIGURE_NAMES[artifact.task]
        answered = metrics.get("answered_by")
        if not isinstance(answered, list) or len(answered) != P or \
                any(half not in ANSWERERS for half in answered):
            raise ValueError(f"meta.metrics.answered_by must name a half (or 'specialist') "
                             f"for each of {P} prefixes")
        specialists = metrics.get("specialists", [])
        if not isinstance(specialists, list) or len(specialists) != len(model.specialists_):
            raise ValueError("meta.metrics.specialists must list the model's "
                             f"{len(model.specialists_)} specialists")
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
        if multi(artifact.layout):
            return probe_rows(artifact)
        model = artifact.model
        return probe_rows(artifact, model.X_val_, model.anytime_.x_mean_)

    def scorer(self, artifact):
        return _GBFS.scorer(artifact) if multi(artifact.layout) else None

    def answer(self, artifact, X, S):
        if multi(artifact.layout):
            return {**_GBFS.answer(artifact, X, S), "answered_by": "gbfs"}
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
        if "specialist_figure" in figures:
            by_half["specialist"] = figures["specialist_figure"]
        if artifact.task == "regression":
            out.update(expected_explained_variance=figures["explained_variance"],
                       expected_rmse=figures["rmse"],
                       expected_explained_variance_by_half=by_half)
            return out
        out.update(expected_error=figures["error"], expected_log_loss=figures["log_loss"],
                   expected_log_loss_by_half={name: -value for name, value in by_half.items()})
        return artifact.calibrated(scores, out)  # the chosen half's calibrated logits

    def next_step(self, artifact, S, budget):
        if multi(artifact.layout):
            return _GBFS.next_step(artifact, S, budget)
        return artifact.model.next_group_gain(S, max_cost=budget)

    def order(self, artifact):
        if multi(artifact.layout):
            return _GBFS.order(artifact)
        return [int(g) for g in artifact.model.sequence_]

    def sequence_figures(self, artifact, S, j, metrics):
        if multi(artifact.layout):
            return {"answered_by": "gbfs", **_GBFS.sequence_figures(artifact, S, j, metrics)}
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
        ``8·D² + 8·(J+8)·D`` in the version; plus ``max_specialists`` specialists, each at
        most an unmasked GBFS ensemble over the D features (trees, bin edges) and a linear
        model (``8·D``)."""
        D, J = int(spec.dimension), len(spec.groups)
        square = 8 * D * D
        own = params.algorithm.get("gbfs_params") or {}
        return tree_sizes(spec, params, own, versions,
                          artifact_extra=square + 8 * (J + 8) * D +
                          _specialists(params) * _specialist_bytes(D, own),
                          fit_extra=12 * square)

    def fit_seconds(self, spec, params, examples):
        D, J = float(spec.dimension), float(len(spec.groups))
        n = float(window_rows(params, examples)[0])
        method = params.algorithm.get("method", "cs-g-omp")
        anytime = anytime_seconds(D, J, method if isinstance(method, str) else "cs-g-omp") + \
            ANYTIME_CUBE_SECONDS * n * D * D
        own = params.algorithm.get("gbfs_params") or {}
        specialists = _specialists(params) * _specialist_tree_fits(params) * tree_seconds(
            spec, params, tree_params(own), examples)
        return tree_seconds(spec, params, own, examples) + anytime + specialists


def specialist_ids(layout: BatchLayout, sets) -> list[list[int]]:
    """``params.specialist_sets`` (lists of group names) as lists of group ids; a 422
    naming the entry and the unknown group."""
    if not isinstance(sets, list):
        raise item_error("must be a list of lists of group names",
                         field="params.specialist_sets")
    return [layout.group_ids(S, field=f"params.specialist_sets[{i}]")
            for i, S in enumerate(sets)]


def _specialists(params) -> int:
    """The specialists a fit may add: ``max_specialists`` (default 8)."""
    limit = params.algorithm.get("max_specialists", MAX_SPECIALISTS)
    return int(limit) if isinstance(limit, int) and not isinstance(limit, bool) else 0


def _specialist_tree_fits(params) -> int:
    """Tree fits per specialist at most: its trees and, under a ``choice_margin`` (default
    1), the two half fits that measure them against its linear candidate
    (``algorithms.per_set.specialists``)."""
    margin = params.algorithm.get("choice_margin", 1.0)
    return 3 if not isinstance(margin, (int, float)) or margin > 0 else 1


def _specialist_bytes(D: int, own: dict) -> int:
    """One specialist at most: an unmasked GBFS over D features (trees of ``max_depth``,
    ``n_estimators`` of them, bin edges) or a linear model."""
    own = tree_params(own)
    depth = own.get("max_depth", 4) if isinstance(own.get("max_depth"), int) else 4
    trees = own["n_estimators"] if isinstance(own["n_estimators"], int) else 2000
    bins = own.get("max_bins", 255) if isinstance(own.get("max_bins"), int) else 255
    return 25 * trees * (2 ** (depth + 1) - 1) + 8 * D * bins + 8 * D


def _metrics(model, layout: BatchLayout) -> dict[str, Any]:
    """PerSetChoice's combined greedy sequence, which half (or specialist) answers each
    prefix, both halves' validation curves along it, and each specialist's set with its
    figures against the halves'."""
    order = [int(g) for g in model.sequence_]
    task = model.task
    names = FIGURE_NAMES[task]
    halves = {half: curve(model.half_figures(half), order, task) for half in HALVES}

    def figure(j: int, half: str, name: str) -> float:
        if half == "specialist":
            return float(getattr(model.half_figures(half).figures(order[:j]), name))
        return halves[half][name][j]

    return {"sequence": [layout.group_names[g] for g in order],
            "cumulative_cost": [float(c) for c in model.cumulative_cost_],
            "answered_by": list(model.sequence_half_),
            "validation": {name: [figure(j, half, name)
                                  for j, half in enumerate(model.sequence_half_)]
                           for name in names},
            "validation_by_half": halves,
            "specialists": [_specialist_row(model, layout, S, names)
                            for S in model.specialists_]}


def _specialist_row(model, layout: BatchLayout, S, names) -> dict[str, Any]:
    """One specialist: its set, kind, whether it answers the set, and the held-out figures
    (by name) of it and of both halves for exactly that set."""
    row: dict[str, Any] = {"groups": [layout.group_names[g] for g in S],
                           "kind": model.specialists_[S].kind,
                           "answers": model.choice(S) == "specialist"}
    for who in ANSWERERS:
        figures = model.half_figures(who).figures(S)
        row[who] = {name: float(getattr(figures, name)) for name in names}
    return row
