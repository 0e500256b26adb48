"""A published version of a batch model: the fitted model in the algorithms' safe format,
the validation statistics an anytime answer needs, and the metadata; plus how it answers.

Blob: a state archive (``algorithms.serialization``) in the envelope of ``algorithms.states``
(``kind`` "featurebudget-artifact", ``format_version`` 1 or 2; blobs written before it have
no version) with members ``model`` (the bytes of the model's ``to_bytes``), ``validation``
(anytime: the bytes of the held-out ``SufficientStatistics``, when there are any),
``held_out.X`` / ``held_out.y`` (version 2: the held-out rows the per-set figures are
measured on: gbfs's validation window, anytime classification's reservoir) and the metadata
as JSON values. Nothing in it is ever unpickled.

Answers (:meth:`Artifact.answer`) for a computed set ``S`` of groups. Figures measured on
held-out rows go through :class:`algorithms.per_set.figures.SetFigures` (cached per set):
explained variance and RMSE, or for classification the 0/1 error and log-loss of
probabilities calibrated for exactly ``S`` (Platt, cross-fitted on the held-out rows);
``labels`` are then the calibrated ``p >= 1/2``.

- anytime: ``w(S)·x + b(S)`` with ``w(S) = C_S⁻¹ b_S`` (``AnytimeLinearModel``, cached per
  set); the expected explained variance of exactly ``S`` on the validation statistics (one
  quadratic form) or on the training statistics when none were held out, and for
  classification the held-out rows' error, log-loss and calibrated probabilities;
  ``next_group`` the method's greedy choice given ``S`` (within a budget) with its expected
  gain.
- gbfs: every tree, the other groups' features missing (their learned default directions);
  the held-out figures of exactly ``S``; ``next_group`` the group with the largest held-out
  gain per unit cost within the budget. Versions of the paper's rule (``uncomputed="prefix"``,
  and every version written before the rule existed) answer as they did: the longest prefix
  of trees whose features lie in ``S``, its figures from the per-tree curves, and
  ``next_group`` the group of the first missing feature of the next tree.
- auto (``PerSetChoice``): the half (anytime or gbfs) with the better held-out figure for
  exactly ``S`` answers, and says so (``answered_by``); ``next_group`` by the combined
  figure's gain per unit cost.
- nvsd: the largest nested support of the ranking inside ``S`` (relaxed estimator; the plain
  one uses every selected variable, zero where not computed); the expected figure is that
  support's validation RMSE; ``next_group`` the first ranked group still missing.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.special import expit

from algorithms.serialization import StateFormatError, dumps_state, loads_state
from service.batch.fit import set_figures
from service.batch.spec import BatchLayout

KIND = "featurebudget-artifact"
FORMAT_VERSION = 2
READS = (1, 2)  # the format versions this service reads


def held_out_for(family: str, rows):
    """The held-out rows a version of ``family`` keeps (auto keeps them in its model)."""
    return None if family in ("nvsd", "auto") else rows


def pack(model, validation_stats, meta: dict[str, Any], held_out=None) -> bytes:
    """The blob of a version: the model, anytime's validation statistics, the held-out rows
    ``(X, y)`` (or None) and ``meta``."""
    state: dict[str, Any] = {"kind": KIND, "format_version": FORMAT_VERSION, "meta": meta,
                             "model": np.frombuffer(model.to_bytes(), dtype=np.uint8)}
    if validation_stats is not None:
        state["validation"] = np.frombuffer(validation_stats.to_bytes(), dtype=np.uint8)
    if held_out is not None:
        state["held_out.X"] = np.ascontiguousarray(held_out[0], dtype=np.float64)
        state["held_out.y"] = np.ascontiguousarray(held_out[1], dtype=np.float64)
    return dumps_state(state)


def unpack(blob: bytes, family: str, layout: BatchLayout) -> Artifact:
    """Parse and check a version's blob; ValueError naming what is wrong."""
    try:
        state = loads_state(blob)
    except StateFormatError as exc:
        raise ValueError(f"not a valid artifact: {exc}") from exc
    if state.get("kind") != KIND or not isinstance(state.get("meta"), dict):
        raise ValueError("not a featurebudget artifact")
    if state.get("format_version", 1) not in READS:
        raise ValueError(f"artifact format_version {state.get('format_version')!r}; this "
                         f"service reads {list(READS)}")
    meta = state["meta"]
    if meta.get("family") != family:
        raise ValueError(f"artifact of a {meta.get('family')!r} model, this model is "
                         f"{family!r}")
    raw = state.get("model")
    if not isinstance(raw, np.ndarray) or raw.dtype != np.uint8 or raw.ndim != 1:
        raise ValueError("artifact has no model member")
    model = _model_class(family, meta).from_bytes(raw.tobytes())
    validation = None
    if isinstance(state.get("validation"), np.ndarray):
        from algorithms.anytime import SufficientStatistics

        validation = SufficientStatistics.from_bytes(state["validation"].tobytes())
    _check_fits(model, family, layout, validation)
    held_out = _held_out(state, layout, meta.get("task", "regression"))
    return Artifact(int(meta["version"]), meta, family, model, validation, layout,
                    held_out=held_out)


def _held_out(state: dict, layout: BatchLayout, task: str):
    """The artifact's held-out rows ``(X, y)``, checked (ValueError), or None."""
    X, y = state.get("held_out.X"), state.get("held_out.y")
    if X is None and y is None:
        return None
    D = layout.n_features
    if not isinstance(X, np.ndarray) or X.dtype != np.float64 or X.ndim != 2 or \
            X.shape[1] != D or X.shape[0] < 1:
        raise ValueError(f"artifact's held_out.X must be float64 rows of {D} features")
    if not isinstance(y, np.ndarray) or y.dtype != np.float64 or y.shape != (X.shape[0],):
        raise ValueError(f"artifact's held_out.y must be {X.shape[0]} float64 targets")
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(y))):
        raise ValueError("artifact's held-out rows hold NaN or infinite values")
    if task == "classification" and not np.all(np.abs(y) == 1.0):
        raise ValueError("artifact's held-out labels must be -1 or +1")
    return X, y


def _model_class(family: str, meta: dict):
    if family == "anytime":
        from algorithms.anytime import AnytimeLinearModel

        return AnytimeLinearModel
    if family == "gbfs":
        from algorithms.gbfs import GBFS

        return GBFS
    if family == "auto":
        from algorithms.per_set import PerSetChoice

        return PerSetChoice
    from algorithms.nvsd import NVSD, RelaxedNVSD

    return NVSD if meta.get("estimator") == "plain" else RelaxedNVSD


def _check_fits(model, family: str, layout: BatchLayout, validation) -> None:
    D = layout.n_features
    if family == "anytime":
        if model.n_features_in_ != D or len(model.groups_) != layout.n_groups:
            raise ValueError(f"artifact has {model.n_features_in_} features in "
                             f"{len(model.groups_)} groups, this model {D} in "
                             f"{layout.n_groups}")
        if validation is not None and validation.n_features != D:
            raise ValueError("artifact's validation statistics have the wrong dimension")
    elif family in ("gbfs", "auto"):
        if model.n_features_in_ != D:
            raise ValueError(f"artifact has {model.n_features_in_} features, this model {D}")
        groups = model.feature_groups if family == "gbfs" else model.groups
        if groups is None or len(groups) != layout.n_groups or any(
                list(map(int, g)) != layout.groups[k].tolist() for k, g in enumerate(groups)):
            raise ValueError(f"artifact's groups are not this model's {layout.n_groups}")
        costs = model.group_costs if family == "gbfs" else model.costs
        if costs is None or not np.array_equal(np.asarray(costs, dtype=np.float64),
                                               layout.costs):
            raise ValueError("artifact's group costs are not this model's")
    else:
        width = model.model_.n_features_in_ if hasattr(model, "model_") else \
            model.X_train_.shape[1]
        if width != D:
            raise ValueError(f"artifact has {width} features, this model {D}")


class Artifact:
    """One loaded version; thread-safe to read (its caches are bounded and locked)."""

    def __init__(self, version: int, meta: dict, family: str, model, validation,
                 layout: BatchLayout, cache_size: int = 1024, held_out=None) -> None:
        self.version = version
        self.meta = meta
        self.family = family
        self.model = model
        self.validation = validation
        self.layout = layout
        self.task = meta.get("task", "regression")
        self.held_out = held_out
        self._ev_cache: OrderedDict = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()  # the explained-variance cache (the model locks its own)
        self.all_trees = family == "gbfs" and model.uncomputed == "missing"
        self.figures = self._set_figures()

    def _set_figures(self):
        """Per-set figures on the held-out rows, where this version has them."""
        if self.held_out is None:
            return None
        if self.all_trees:
            score = self._gbfs_scores
        elif self.family == "anytime" and self.task == "classification":
            score = self._anytime_scores
        else:
            return None
        return set_figures(score, self.held_out, self.task, self.layout)

    def _anytime_scores(self, X, S) -> np.ndarray:
        """``X w(S) + b(S)`` (the model's per-set solves are cached and thread-safe)."""
        coef, intercept = self.model.coef_for_groups(S)
        return X @ coef + intercept

    def _gbfs_scores(self, X: np.ndarray, S) -> np.ndarray:
        return self.model.decision_function(X, computed_groups=S)

    # ------------------------------------------------------------------ sets
    def budget_set(self, budget: float) -> list[int]:
        """The groups of the longest trained prefix whose cost is within ``budget``."""
        if self.family == "anytime":
            j = max(self.model.prefix_length(budget), 0)
            return sorted(int(g) for g in self.model.sequence_[:j])
        order = self._order()
        chosen, spent = [], 0.0
        for g in order:
            cost = float(self.layout.costs[g])
            if spent + cost > budget + 1e-12 * max(abs(budget), 1.0):
                break
            chosen.append(g)
            spent += cost
        return sorted(chosen)

    def _order(self) -> list[int]:
        """The trained sequence of groups (gbfs: the greedy sequence of the version, or
        the order of entry for the prefix rule; auto: the combined sequence; nvsd: the
        ranking)."""
        if self.family in ("anytime", "auto"):
            return [int(g) for g in self.model.sequence_]
        if self.family == "gbfs":
            if self.all_trees:
                return [self.layout.group_index[name] for name in self.meta["metrics"]
                        .get("sequence", [])]
            return [int(g) for g in self.model.selected_groups_]
        return self._nvsd_group_ranking()

    def _nvsd_group_ranking(self) -> list[int]:
        model, layout = self.model, self.layout
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

    # ------------------------------------------------------------------ answers
    def answer(self, X: sp.csr_matrix, S: list[int], budget: float | None) -> dict[str, Any]:
        """Predictions for rows ``X`` that all have the computed set ``S`` (sorted ids)."""
        family = self.family
        if family == "anytime":
            out = self._anytime(X, S)
        elif family == "gbfs":
            out = self._gbfs(X, S) if self.all_trees else self._gbfs_prefix_rule(X, S)
        elif family == "auto":
            out = self._auto(X, S)
        else:
            out = self._nvsd(X, S)
        out["next_group"] = self.next_group(S, budget)
        return out

    def _labels(self, scores: np.ndarray, out: dict[str, Any]) -> dict[str, Any]:
        if self.task == "classification":
            out["labels"] = [1 if s >= 0 else -1 for s in scores.tolist()]
        return out

    def _held_out_figures(self, S: list[int], scores: np.ndarray,
                          out: dict[str, Any]) -> dict[str, Any]:
        """``out`` with the held-out figures of ``S`` (and, classifying, the calibrated
        probabilities and labels of ``scores``)."""
        figures = self.figures.figures(S)
        out["expected_on"] = "validation"
        if self.task == "regression":
            out.update(expected_explained_variance=figures.explained_variance,
                       expected_rmse=figures.rmse)
            return out
        out.update(expected_error=figures.error, expected_log_loss=figures.log_loss)
        return self._calibrated(figures.logits(scores), out)

    def _calibrated(self, logits: np.ndarray, out: dict[str, Any]) -> dict[str, Any]:
        out["probabilities"] = expit(logits).tolist()
        return self._labels(logits, out)

    def expected_ev(self, S: list[int]) -> tuple[float, str]:
        """Anytime: explained variance of exactly ``S`` (validation if held out)."""
        key = tuple(S)
        with self._lock:
            hit = self._ev_cache.get(key)
        if hit is None:
            coef, intercept = self.model.coef_for_groups(S)
            if self.validation is not None and self.validation.n > 0:
                from algorithms.metrics.anytime import explained_variance_from_statistics

                hit = (float(explained_variance_from_statistics(
                    self.validation, coef, intercept)[0]), "validation")
            else:
                hit = (float(self.model.explained_variance(S)), "train")
            with self._lock:
                self._ev_cache[key] = hit
                if len(self._ev_cache) > self._cache_size:
                    self._ev_cache.popitem(last=False)
        return hit

    def _anytime(self, X: sp.csr_matrix, S: list[int]) -> dict[str, Any]:
        scores = self._anytime_scores(X, S)
        ev, basis = self.expected_ev(S)
        out = {"predictions": scores.tolist(), "groups_used": self._names(S),
               "cost": self.layout.cost_of(S), "expected_explained_variance": ev,
               "expected_on": basis}
        if self.figures is not None:  # classification with held-out rows
            figures = self.figures.figures(S)
            out.update(expected_error=figures.error, expected_log_loss=figures.log_loss,
                       expected_error_on="validation")
            return self._calibrated(figures.logits(scores), out)
        return self._labels(scores, out)

    def _gbfs(self, X: sp.csr_matrix, S: list[int]) -> dict[str, Any]:
        """Every tree, the groups outside ``S`` missing."""
        model = self.model
        scores = model.decision_function(_dense(X, self.layout.features_of(S)),
                                         computed_groups=S)
        split_on = {int(g) for g in model.selected_groups_}
        used = [g for g in S if g in split_on]
        out = {"predictions": scores.tolist(), "groups_used": self._names(used),
               "cost": self.layout.cost_of(used), "trees_used": model.trees_used(S)}
        if self.figures is not None:
            return self._held_out_figures(S, scores, out)
        figure = "expected_error" if self.task == "classification" else \
            "expected_explained_variance"
        out.update({figure: None, "expected_on": None})
        if self.task == "classification":
            return self._calibrated(scores, out)  # uncalibrated: no held-out rows
        return out

    def _auto(self, X: sp.csr_matrix, S: list[int]) -> dict[str, Any]:
        """The better half for ``S`` answers (``PerSetChoice``)."""
        model = self.model
        scores = model.decision_function(_dense(X, self.layout.features_of(S)),
                                         computed_groups=S)
        figures = model.figures(S)
        half = figures["half"]
        if half == "gbfs":
            split_on = {int(g) for g in model.gbfs_.selected_groups_}
            used = [g for g in S if g in split_on]
        else:
            used = list(S)
        out = {"predictions": scores.tolist(), "answered_by": half,
               "groups_used": self._names(used), "cost": self.layout.cost_of(used),
               "expected_on": "validation"}
        if self.task == "regression":
            out.update(expected_explained_variance=figures["explained_variance"],
                       expected_rmse=figures["rmse"],
                       expected_explained_variance_by_half={
                           "anytime": figures["anytime_figure"],
                           "gbfs": figures["gbfs_figure"]})
            return out
        out.update(expected_error=figures["error"], expected_log_loss=figures["log_loss"],
                   expected_log_loss_by_half={"anytime": -figures["anytime_figure"],
                                              "gbfs": -figures["gbfs_figure"]})
        return self._calibrated(scores, out)  # the chosen half's calibrated logits

    def _gbfs_prefix_rule(self, X: sp.csr_matrix, S: list[int]) -> dict[str, Any]:
        """The paper's rule (and every version written before the new one): the longest
        prefix of trees whose features lie in ``S``."""
        model = self.model
        n_trees = int(model.n_trees_for_groups(S))
        used = sorted(int(g) for g, t in zip(model.selected_groups_, model.group_entry_iteration_,
                                             strict=True) if t < n_trees)
        dense = _dense(X, self.layout.features_of(S))
        scores = model.decision_function(dense, computed_groups=S)
        out = {"predictions": scores.tolist() if self.task == "regression" else None,
               "groups_used": self._names(used), "cost": self.layout.cost_of(used),
               "trees_used": n_trees, **self._gbfs_curve_figures(n_trees)}
        if self.task == "classification":
            p = 1.0 / (1.0 + np.exp(-scores))
            out["predictions"] = scores.tolist()
            out["probabilities"] = p.tolist()
        return self._labels(scores, out)

    def _gbfs_curve_figures(self, n_trees: int) -> dict[str, Any]:
        curves = self.meta["metrics"].get("validation") or self.meta["metrics"]["train"]
        basis = "validation" if self.meta["metrics"].get("validation") else "train"
        figures = {f"expected_{name}": float(values[n_trees]) for name, values in
                   curves.items()}
        figures.setdefault("expected_explained_variance", None)
        figures["expected_on"] = basis
        return figures

    def _nvsd(self, X: sp.csr_matrix, S: list[int]) -> dict[str, Any]:
        model, layout = self.model, self.layout
        features = layout.features_of(S)
        dense = _dense(X, features)
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
            out["expected_rmse"] = self.meta["metrics"].get("validation_rmse")
            selected = support
        used = sorted({int(layout.group_of[int(f)]) for f in support})
        wanted = sorted({int(layout.group_of[int(f)]) for f in selected})
        out.update(predictions=scores.tolist(), groups_used=self._names(used),
                   cost=layout.cost_of(used), expected_explained_variance=None,
                   missing_groups=self._names([g for g in wanted if g not in S]))
        return self._labels(scores, out)

    def next_group(self, S: list[int], budget: float | None) -> dict[str, Any] | None:
        """The group to compute next given ``S``, its cost and expected gain; None if none."""
        spent = self.layout.cost_of(S)
        room = None if budget is None else budget - spent + 1e-12 * max(abs(budget), 1.0)
        gain: float | None
        if self.family == "anytime":
            g = self.model.next_group(S, max_cost=budget)
            if g is None:
                return None
            gain = self.expected_ev(sorted(set(S) | {g}))[0] - self.expected_ev(S)[0]
        elif self.family == "auto":
            step = self.model.next_group_gain(S, max_cost=budget)
            if step is None:
                return None
            g, gain = step
        elif self.all_trees and self.figures is not None:
            step = self.figures.next_group(S, max_cost=budget)
            if step is None:
                return None
            g, gain = step
        elif self.all_trees:
            g, gain = self.model.next_group(S, max_cost=budget), None
            if g is None:
                return None
        elif self.family == "gbfs":
            g = self.model.next_group(S)
            if g is None or (room is not None and self.layout.costs[g] > room):
                return None
            before = self._gbfs_curve_figures(int(self.model.n_trees_for_groups(S)))
            after = self._gbfs_curve_figures(int(self.model.n_trees_for_groups(
                sorted(set(S) | {int(g)}))))
            key = "expected_log_loss" if self.task == "classification" else \
                "expected_explained_variance"
            sign = -1.0 if self.task == "classification" else 1.0
            gain = sign * (after[key] - before[key])
        else:
            g = next((g for g in self._nvsd_group_ranking() if g not in S), None)
            if g is None or (room is not None and self.layout.costs[g] > room):
                return None
            gain = None
            if hasattr(self.model, "supports_"):
                now = int(self.model.support_for(self.layout.features_of(S).tolist()))
                later = int(self.model.support_for(
                    self.layout.features_of(sorted(set(S) | {g})).tolist()))
                rmse = self.model.support_validation_rmse_
                gain = float(rmse[now] - rmse[later])
        g = int(g)
        return {"name": self.layout.group_names[g], "cost": float(self.layout.costs[g]),
                "expected_gain": None if gain is None else float(gain)}

    def sequence(self) -> dict[str, Any]:
        """The trained sequence with cost, cumulative cost and the per-prefix figures."""
        layout, metrics = self.layout, self.meta["metrics"]
        order = self._order()
        cumulative = np.cumsum([0.0] + [float(layout.costs[g]) for g in order])
        prefixes = []
        for j in range(len(order) + 1):
            S = sorted(order[:j])
            row: dict[str, Any] = {"groups": j, "cumulative_cost": float(cumulative[j])}
            if j:
                row.update(name=layout.group_names[order[j - 1]],
                           cost=float(layout.costs[order[j - 1]]))
            row.update(self._sequence_figures(S, j, metrics))
            prefixes.append(row)
        return {"version": self.version, "created_at": self.meta.get("created_at"),
                "algorithm": self.meta.get("algorithm"), "prefixes": prefixes}

    def _sequence_figures(self, S: list[int], j: int, metrics: dict) -> dict[str, Any]:
        """The figures of prefix ``j`` (the set ``S``) on the sequence page."""
        row: dict[str, Any] = {}
        if self.family == "anytime":
            row["train_explained_variance"] = metrics["train_explained_variance"][j]
            validation = metrics["validation_explained_variance"]
            row["validation_explained_variance"] = None if validation is None else \
                validation[j]
            if self.figures is not None:
                figures = self.figures.figures(S)
                row.update(validation_error=figures.error,
                           validation_log_loss=figures.log_loss)
        elif self.family == "auto":
            row["answered_by"] = metrics["answered_by"][j]
            for name, values in metrics["validation"].items():
                row[f"validation_{name}"] = values[j]
            for half, curves in metrics["validation_by_half"].items():
                for name, values in curves.items():
                    row[f"{half}_validation_{name}"] = values[j]
        elif self.all_trees:
            row["trees"] = int(self.model.trees_used(S))
            for part in ("train", "validation"):
                for name, values in (metrics.get(part) or {}).items():
                    row[f"{part}_{name}"] = values[j]
        elif self.family == "gbfs":
            n_trees = int(self.model.n_trees_for_groups(S))
            row["trees"] = n_trees
            for part in ("train", "validation"):
                for name, values in (metrics.get(part) or {}).items():
                    row[f"{part}_{name}"] = float(values[n_trees])
        elif hasattr(self.model, "supports_"):
            k = int(self.model.support_for(self.layout.features_of(S).tolist()))
            row["validation_rmse"] = float(self.model.support_validation_rmse_[k])
        return row

    def _names(self, groups) -> list[str]:
        return [self.layout.group_names[int(g)] for g in groups]


def _dense(X: sp.csr_matrix, features: np.ndarray) -> np.ndarray:
    """Dense rows with every feature outside ``features`` set to 0 (not computed)."""
    dense = X.toarray()
    mask = np.zeros(dense.shape[1], dtype=bool)
    mask[features] = True
    dense[:, ~mask] = 0.0
    return dense
