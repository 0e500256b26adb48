"""The gbfs family (``GBFS``, Xu et al., "Gradient boosted feature selection"): the fold
keeps windows of rows. A version answers with every tree, the groups outside ``S``
missing (their learned default directions), the held-out figures of exactly ``S``, and
``next_group`` the group with the largest held-out gain per unit cost within the cap.
Versions of the paper's rule (``uncomputed="prefix"``, and every version written before
the rule existed) answer as they did: the longest prefix of trees whose features lie in
``S``, its figures from the per-tree curves, and ``next_group`` the group of the first
missing feature of the next tree.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from service.batch.checks import check_curves, check_names
from service.batch.classes import classes_of
from service.batch.curves import TRAIN_ROWS, curve, greedy_order, masked_dense, set_figures
from service.batch.families.base import BatchFamily, groups_lists, window_fold, window_rows
from service.batch.layout import BatchLayout
from service.batch.sizes import (
    FIT_FIXED_SECONDS,
    GBFS_CELL_SECONDS,
    GBFS_FIGURE_SECONDS,
    GBFS_SPLIT_SECONDS,
    HEADER_BYTES,
    SizeEstimate,
    gbfs_options,
    int_option,
)


def all_trees(model) -> bool:
    """Whether a GBFS version answers with every tree (else the paper's prefix rule)."""
    return model.uncomputed == "missing"


def splits_on_groups(model, layout: BatchLayout, S) -> tuple[int, int]:
    """(split nodes that test a feature of a group of ``S``, all split nodes) of the trees
    that answer ``S``: at the others an example follows the learned default direction, so
    0 means one answer for every example. O(trees x nodes)."""
    trees = model.unmasked_tree_feature_ if model.answers_unmasked(S) else \
        model.tree_feature_
    trees = trees[:int(model.trees_used(S))]
    inner = trees >= 0
    on = inner & np.isin(trees, layout.features_of(S))
    return int(np.count_nonzero(on)), int(np.count_nonzero(inner))


def check_groups(model, layout: BatchLayout, groups, costs) -> None:
    """ValueError unless a tree model's width, groups and costs are the layout's."""
    D = layout.n_features
    if model.n_features_in_ != D:
        raise ValueError(f"artifact has {model.n_features_in_} features, this model {D}")
    if groups is None or len(groups) != layout.n_groups or any(
            list(map(int, g)) != layout.groups[k].tolist() for k, g in enumerate(groups)):
        raise ValueError(f"artifact's groups are not this model's {layout.n_groups}")
    if costs is None or not np.array_equal(np.asarray(costs, dtype=np.float64), layout.costs):
        raise ValueError("artifact's group costs are not this model's")


def check_tree_ranges(model, n_classes: int | None = None) -> None:
    """ValueError unless each of a tree model's ensembles (the trees, and the unmasked
    trees where it has them) can reach at most ``max|base| + rate·Σ_t max|leaf_t|``,
    finite and below 1e300, so no row can make an answer overflow; and one score a row,
    or with ``n_classes`` (a multi-class model) a softmax GBFS of exactly the classes
    0..K-1 (a softmax GBFS in a binary or regression model is refused). O(nodes)."""
    trees_per_round = getattr(model, "n_trees_per_iteration_", 1)
    if n_classes is None and trees_per_round != 1:
        raise ValueError("tree model: a softmax (multi-class) GBFS; versions of a model "
                         "without params.classes serve one score a row (binary "
                         "classification or regression)")
    if n_classes is not None and (trees_per_round != n_classes or not np.array_equal(
            np.asarray(model.classes_, dtype=np.float64), np.arange(n_classes))):
        raise ValueError(f"tree model: not a softmax GBFS of this model's {n_classes} "
                         "classes")
    for prefix in ("", "unmasked_"):
        values = getattr(model, f"{prefix}tree_value_", None)
        if values is None:
            continue
        values = np.asarray(values, dtype=np.float64)
        base = getattr(model, f"{prefix}base_score_", model.base_score_)
        reach = float(np.max(np.abs(base))) + abs(float(model.learning_rate)) * float(
            np.abs(values).max(axis=1, initial=0.0).sum()) if values.ndim == 2 else np.inf
        if not np.isfinite(reach) or reach > 1e300:
            raise ValueError("tree model: its leaf values are out of range")


def n_classes(spec) -> int:
    """Trees a round: K for a multi-class model (softmax), else 1."""
    classes = classes_of(spec)
    return 1 if classes is None else len(classes)


EARLY_STOPPED_TREES = 600  # trees a fit with early stopping is estimated to boost (each
# ensemble; measured 70-550 on benchmarks/budget_quality.py's sets and the regime set)


def unmasked_twin(options: dict) -> bool:
    """Whether a GBFS fit with ``options`` boosts the unmasked ensemble too."""
    return options.get("unmasked_trees") is True and options.get("uncomputed") != "prefix" \
        and int_option(options.get("masked_copies"), 4, 0, 64) > 0


def tree_sizes(spec, params, own, versions: int, *, artifact_extra: int = 0,
               fit_extra: int = 0) -> SizeEstimate:
    """Windows ``8·(N + N_val)·(D+1)``; a fit holds the copies (``8·(N + 2·N_val)·D``),
    the early-stopping split (``8·N·D``), the bin codes with ``c`` masked copies
    (``(c + 2)·N·D``), the histograms (``(24 + 16·newton)·2^(depth-1)·D·(bins+1)``) and
    the version it packs; a version holds the held-out rows, bin edges and trees (twice
    ``n_estimators`` with the unmasked ensemble; plus ``artifact_extra``)."""
    D = int(spec.dimension)
    fold, snapshot, write = window_fold(spec, params)
    n, n_val = window_rows(params)
    options = gbfs_options(own)
    copies = int_option(options.get("masked_copies"), 4, 0, 64)
    depth = int_option(options.get("max_depth"), 4, 1, 30)
    bins = int_option(options.get("max_bins"), 255, 2, 255)
    trees = int_option(options.get("n_estimators"), 2000, 1, 1 << 24)
    trees *= 2 if unmasked_twin(options) else 1
    trees *= n_classes(spec)
    newton = options.get("split_gain") == "newton"
    nodes = 2 ** (depth + 1) - 1
    hist = (24 + (16 if newton else 0)) * 2 ** (depth - 1) * D * (bins + 1)
    early = 8 * n * D if options.get("early_stopping_rounds") is not None else 0
    fit = 8 * (n + 2 * n_val) * D + early + (copies + 2) * n * D + hist + 8 * D * bins
    artifact = 8 * n_val * (D + 1) + 8 * D * bins + 25 * trees * nodes + HEADER_BYTES
    artifact += artifact_extra
    fit += fit_extra + artifact
    return SizeEstimate(fold, snapshot, write, max(fit, 3 * artifact), artifact, artifact,
                        versions)


def tree_seconds(spec, params, own, examples: int | None) -> float:
    """Rows x features x trees x depth of histograms, split search and the version's
    per-set figures; with early stopping at most ``EARLY_STOPPED_TREES`` trees, the
    unmasked ensemble's on ``N`` rows beside the masked one's on ``(1 + c)·N``."""
    D, J = float(spec.dimension), float(len(spec.groups))
    n, n_val = (float(v) for v in window_rows(params, examples))
    options = gbfs_options(own)
    copies = int_option(options.get("masked_copies"), 4, 0, 64)
    depth = int_option(options.get("max_depth"), 4, 1, 30)
    bins = int_option(options.get("max_bins"), 255, 2, 255)
    trees = int_option(options.get("n_estimators"), 2000, 1, 1 << 24)
    if options.get("early_stopping_rounds") is not None:
        trees = min(trees, EARLY_STOPPED_TREES)
    trees *= n_classes(spec)
    twin = unmasked_twin(options)
    rows = (1 + copies + (1 if twin else 0)) * n
    per_tree = GBFS_CELL_SECONDS * rows * D * depth + \
        GBFS_SPLIT_SECONDS * 2 ** depth * D * (bins + 1) * (2 if twin else 1)
    figures = GBFS_FIGURE_SECONDS * (J * J / 2 * n_val + (J + 1) * min(n, 5000)) * trees * depth
    return FIT_FIXED_SECONDS + trees * per_tree + figures


class GBFSFamily(BatchFamily):
    name = "gbfs"
    algorithms = ("gbfs",)
    reserved = frozenset({"loss", "feature_costs", "feature_groups", "group_costs"})
    own_service_params = frozenset({"window", "classes"})
    warm_cases = (("gbfs", "regression", {"n_estimators": 3}),
                  ("gbfs", "classification", {"n_estimators": 3}))

    def estimator_classes(self, estimator):
        from algorithms.gbfs import GBFS

        return [GBFS]

    def build_estimator(self, algorithm, task, layout, params):
        from algorithms.gbfs import GBFS

        loss = "logistic" if task == "classification" else "squared"
        if layout.classes is not None:  # K >= 3 classes: K trees a round
            loss = "softmax"
            if params.algorithm.get("uncomputed") == "prefix":
                raise ValueError("a multi-class model (params.classes) answers with every "
                                 "tree (uncomputed='missing'), not the prefix rule")
        return GBFS(loss=loss, feature_groups=groups_lists(layout), group_costs=layout.costs,
                    **dict(params.algorithm))

    def fit_window(self, estimator, task, layout, params, X, y, validation, scaled,
                   progress):
        # early stopping holds out its own rows: validation stays unseen
        model = estimator.fit(X, y, progress=scaled)
        progress(0.9)
        return model, _metrics(model, layout, task, X, y, validation)

    # ------------------------------------------------------------------ artifact
    def model_class(self, info):
        from algorithms.registry import class_of

        return class_of("gbfs")

    def check_fits(self, model, layout, validation):
        check_groups(model, layout, model.feature_groups, model.group_costs)

    def check_artifact(self, artifact):
        """The sequence and its curves as the sequence rows read them (every version: one
        finite figure per prefix of the sequence; the paper's rule: one per tree count)
        and :func:`check_tree_ranges`."""
        super().check_artifact(artifact)
        metrics, model = artifact.info.metrics, artifact.model
        if all_trees(model):
            length = len(check_names(metrics.get("sequence"), artifact.layout,
                                     "meta.metrics.sequence")) + 1
        else:
            length = int(model.tree_feature_.shape[0]) + 1
        for part in ("train", "validation"):
            curves = metrics.get(part)
            if curves is not None:
                check_curves(curves, list(curves) if isinstance(curves, dict) else [None],
                             length, f"meta.metrics.{part}")
        if not all_trees(model) and not (metrics.get("validation") or metrics.get("train")):
            raise ValueError("meta.metrics must hold the per-tree curves")
        check_tree_ranges(model, None if artifact.layout.classes is None else
                          len(artifact.layout.classes))

    def scorer(self, artifact):
        if not all_trees(artifact.model):
            return None
        model = artifact.model
        return lambda X, S: model.decision_function(X, computed_groups=S)

    def answer(self, artifact, X, S):
        if not all_trees(artifact.model):
            return _prefix_rule(artifact, X, S)
        model = artifact.model
        scores = model.decision_function(masked_dense(X, artifact.layout.features_of(S)),
                                         computed_groups=S)
        used = model.groups_split_on(S)
        out = {"predictions": scores.tolist(), "groups_used": artifact.names(used),
               "cost": artifact.layout.cost_of(used), "trees_used": model.trees_used(S)}
        if artifact.figures is not None:
            return artifact.held_out_figures(S, scores, out)
        figure = "expected_error" if artifact.task == "classification" else \
            "expected_explained_variance"
        out.update({figure: None, "expected_on": None})
        if artifact.task == "classification":
            return artifact.calibrated(scores, out)  # uncalibrated: no held-out rows
        return out

    def next_step(self, artifact, S, budget):
        model = artifact.model
        if all_trees(model) and artifact.figures is not None:
            return artifact.figures.next_group(S, max_cost=budget)
        if all_trees(model):
            g = model.next_group(S, max_cost=budget)
            return None if g is None else (g, None)
        g = model.next_group(S)
        room = artifact.room(S, budget)
        if g is None or (room is not None and artifact.layout.costs[g] > room):
            return None
        before = _curve_figures(artifact, int(model.n_trees_for_groups(S)))
        after = _curve_figures(artifact, int(model.n_trees_for_groups(sorted(set(S) | {int(g)}))))
        key = "expected_log_loss" if artifact.task == "classification" else \
            "expected_explained_variance"
        sign = -1.0 if artifact.task == "classification" else 1.0
        return g, sign * (after[key] - before[key])

    def order(self, artifact):
        if all_trees(artifact.model):
            return [artifact.layout.group_index[name] for name in artifact.info.metrics
                    .get("sequence", [])]
        return [int(g) for g in artifact.model.selected_groups_]

    def sequence_figures(self, artifact, S, j, metrics):
        on, splits = splits_on_groups(artifact.model, artifact.layout, S)
        row: dict[str, Any] = {"splits_on_groups": on, "splits": splits}
        if all_trees(artifact.model):
            row["trees"] = int(artifact.model.trees_used(S))
            for part in ("train", "validation"):
                for name, values in (metrics.get(part) or {}).items():
                    row[f"{part}_{name}"] = values[j]
            return row
        n_trees = int(artifact.model.n_trees_for_groups(S))
        row["trees"] = n_trees
        for part in ("train", "validation"):
            for name, values in (metrics.get(part) or {}).items():
                row[f"{part}_{name}"] = float(values[n_trees])
        return row

    # ------------------------------------------------------------------ sizes
    def sizes(self, spec, params, versions):
        return tree_sizes(spec, params, params.algorithm, versions)

    def fit_seconds(self, spec, params, examples):
        return tree_seconds(spec, params, params.algorithm, examples)


def _metrics(model, layout: BatchLayout, task: str, X, y, validation) -> dict[str, Any]:
    """The version's trees and its greedy sequence of groups with each prefix's figures:
    ordered by validation gain per unit cost when rows are held out, else by the training
    split gain per unit cost; curves on the held-out rows and on (up to ``TRAIN_ROWS``)
    training rows, every tree answering with the other groups missing."""
    def score(rows: np.ndarray, S) -> np.ndarray:
        return model.decision_function(rows, computed_groups=S)

    step = max(1, len(y) // TRAIN_ROWS)
    train = set_figures(score, (X[::step], y[::step]), task, layout)
    held = None if validation is None else set_figures(score, validation, task, layout)
    if held is not None:
        order = greedy_order(held, layout.n_groups)
    else:
        order = []
        while (g := model.next_group(order)) is not None:
            order.append(int(g))
    cumulative = np.cumsum([0.0] + [float(layout.costs[g]) for g in order])
    return {"selected_groups": [layout.group_names[int(g)] for g in model.selected_groups_],
            "group_entry_tree": [int(t) for t in model.group_entry_iteration_],
            "n_trees": int(model.tree_feature_.shape[0]),
            "n_unmasked_trees": int(model.unmasked_tree_feature_.shape[0]),
            "unmasked_prefixes": [int(v) for v in model.unmasked_sets_],
            "sequence": [layout.group_names[g] for g in order],
            "cumulative_cost": [float(c) for c in cumulative],
            "train": curve(train, order, task),
            "validation": None if held is None else curve(held, order, task)}


def _prefix_rule(artifact, X, S: list[int]) -> dict[str, Any]:
    """The paper's rule (and every version written before the new one): the longest
    prefix of trees whose features lie in ``S``."""
    model = artifact.model
    n_trees = int(model.n_trees_for_groups(S))
    used = sorted(int(g) for g, t in zip(model.selected_groups_, model.group_entry_iteration_,
                                         strict=True) if t < n_trees)
    dense = masked_dense(X, artifact.layout.features_of(S))
    scores = model.decision_function(dense, computed_groups=S)
    out = {"predictions": scores.tolist() if artifact.task == "regression" else None,
           "groups_used": artifact.names(used), "cost": artifact.layout.cost_of(used),
           "trees_used": n_trees, **_curve_figures(artifact, n_trees)}
    if artifact.task == "classification":
        p = 1.0 / (1.0 + np.exp(-scores))
        out["predictions"] = scores.tolist()
        out["probabilities"] = p.tolist()
    return artifact.labels(scores, out)


def _curve_figures(artifact, n_trees: int) -> dict[str, Any]:
    metrics = artifact.info.metrics
    curves = metrics.get("validation") or metrics["train"]
    basis = "validation" if metrics.get("validation") else "train"
    figures = {f"expected_{name}": float(values[n_trees]) for name, values in curves.items()}
    figures.setdefault("expected_explained_variance", None)
    figures["expected_on"] = basis
    return figures
