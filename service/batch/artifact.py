"""A published version of a batch model: the fitted model in the algorithms' safe format,
the validation statistics an anytime answer needs, and the metadata; plus how it answers.

Blob: a state archive (``algorithms.serialization``) in the envelope of ``algorithms.states``
(``kind`` "featurebudget-artifact", ``format_version`` 1; blobs written before it have no
version) with members ``model`` (the bytes of the model's ``to_bytes``), ``validation``
(anytime: the bytes of the held-out ``SufficientStatistics``, when there are any) and the
metadata as JSON values. Nothing in it is ever unpickled.

Answers (:meth:`Artifact.answer`) for a computed set ``S`` of groups:

- anytime: ``w(S)·x + b(S)`` with ``w(S) = C_S⁻¹ b_S`` (``AnytimeLinearModel``, cached per
  set); the expected explained variance of exactly ``S`` on the validation statistics (one
  quadratic form) or on the training statistics when none were held out; ``next_group`` the
  method's greedy choice given ``S`` (within a budget) with its expected gain.
- gbfs: the longest prefix of trees whose features lie in ``S``; the expected figure is the
  held-out (else training) error / log-loss (classification) or explained variance of that
  prefix; ``next_group`` the group of the first missing feature of the next tree.
- nvsd: the largest nested support of the ranking inside ``S`` (relaxed estimator; the plain
  one uses every selected variable, zero where not computed); the expected figure is that
  support's validation RMSE; ``next_group`` the first ranked group still missing.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np
import scipy.sparse as sp

from algorithms.serialization import StateFormatError, dumps_state, loads_state
from service.batch.spec import BatchLayout

KIND = "featurebudget-artifact"
FORMAT_VERSION = 1


def pack(model, validation_stats, meta: dict[str, Any]) -> bytes:
    state: dict[str, Any] = {"kind": KIND, "format_version": FORMAT_VERSION, "meta": meta,
                             "model": np.frombuffer(model.to_bytes(), dtype=np.uint8)}
    if validation_stats is not None:
        state["validation"] = np.frombuffer(validation_stats.to_bytes(), dtype=np.uint8)
    return dumps_state(state)


def unpack(blob: bytes, family: str, layout: BatchLayout) -> Artifact:
    """Parse and check a version's blob; ValueError naming what is wrong."""
    try:
        state = loads_state(blob)
    except StateFormatError as exc:
        raise ValueError(f"not a valid artifact: {exc}") from exc
    if state.get("kind") != KIND or not isinstance(state.get("meta"), dict):
        raise ValueError("not a featurebudget artifact")
    if state.get("format_version", FORMAT_VERSION) != FORMAT_VERSION:
        raise ValueError(f"artifact format_version {state.get('format_version')!r}; this "
                         f"service reads {FORMAT_VERSION}")
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
    return Artifact(int(meta["version"]), meta, family, model, validation, layout)


def _model_class(family: str, meta: dict):
    if family == "anytime":
        from algorithms.anytime import AnytimeLinearModel

        return AnytimeLinearModel
    if family == "gbfs":
        from algorithms.gbfs import GBFS

        return GBFS
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
    elif family == "gbfs":
        if model.n_features_in_ != D:
            raise ValueError(f"artifact has {model.n_features_in_} features, this model {D}")
    else:
        width = model.model_.n_features_in_ if hasattr(model, "model_") else \
            model.X_train_.shape[1]
        if width != D:
            raise ValueError(f"artifact has {width} features, this model {D}")


class Artifact:
    """One loaded version; thread-safe to read (its caches are bounded dicts)."""

    def __init__(self, version: int, meta: dict, family: str, model, validation,
                 layout: BatchLayout, cache_size: int = 1024) -> None:
        self.version = version
        self.meta = meta
        self.family = family
        self.model = model
        self.validation = validation
        self.layout = layout
        self.task = meta.get("task", "regression")
        self._ev_cache: OrderedDict = OrderedDict()
        self._cache_size = cache_size

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
        """The trained sequence of groups (gbfs: order of entry; nvsd: ranking)."""
        if self.family == "anytime":
            return [int(g) for g in self.model.sequence_]
        if self.family == "gbfs":
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
            out = self._gbfs(X, S)
        else:
            out = self._nvsd(X, S)
        out["next_group"] = self.next_group(S, budget)
        return out

    def _labels(self, scores: np.ndarray, out: dict[str, Any]) -> dict[str, Any]:
        if self.task == "classification":
            out["labels"] = [1 if s >= 0 else -1 for s in scores.tolist()]
        return out

    def expected_ev(self, S: list[int]) -> tuple[float, str]:
        """Anytime: explained variance of exactly ``S`` (validation if held out)."""
        key = tuple(S)
        hit = self._ev_cache.get(key)
        if hit is None:
            if self.validation is not None and self.validation.n > 0:
                from algorithms.metrics.anytime import explained_variance_from_statistics

                coef, intercept = self.model.coef_for_groups(S)
                hit = (float(explained_variance_from_statistics(
                    self.validation, coef, intercept)[0]), "validation")
            else:
                hit = (float(self.model.explained_variance(S)), "train")
            self._ev_cache[key] = hit
            if len(self._ev_cache) > self._cache_size:
                self._ev_cache.popitem(last=False)
        return hit

    def _anytime(self, X: sp.csr_matrix, S: list[int]) -> dict[str, Any]:
        coef, intercept = self.model.coef_for_groups(S)
        scores = X @ coef + intercept
        ev, basis = self.expected_ev(S)
        out = {"predictions": scores.tolist(), "groups_used": self._names(S),
               "cost": self.layout.cost_of(S), "expected_explained_variance": ev,
               "expected_on": basis}
        return self._labels(scores, out)

    def _gbfs_prefix(self, S: list[int]) -> int:
        return int(self.model.n_trees_for_groups(S))

    def _gbfs_figures(self, n_trees: int) -> dict[str, Any]:
        curves = self.meta["metrics"].get("validation") or self.meta["metrics"]["train"]
        basis = "validation" if self.meta["metrics"].get("validation") else "train"
        figures = {f"expected_{name}": float(values[n_trees]) for name, values in
                   curves.items()}
        figures.setdefault("expected_explained_variance", None)
        figures["expected_on"] = basis
        return figures

    def _gbfs(self, X: sp.csr_matrix, S: list[int]) -> dict[str, Any]:
        model = self.model
        n_trees = self._gbfs_prefix(S)
        used = sorted(int(g) for g, t in zip(model.selected_groups_, model.group_entry_iteration_,
                                             strict=True) if t < n_trees)
        features = self.layout.features_of(S)
        dense = _dense(X, features)
        scores = model.decision_function(dense, computed_groups=S)
        out = {"predictions": scores.tolist() if self.task == "regression" else None,
               "groups_used": self._names(used), "cost": self.layout.cost_of(used),
               "trees_used": n_trees, **self._gbfs_figures(n_trees)}
        if self.task == "classification":
            p = 1.0 / (1.0 + np.exp(-scores))
            out["predictions"] = scores.tolist()
            out["probabilities"] = p.tolist()
        return self._labels(scores, out)

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
        if self.family == "anytime":
            g = self.model.next_group(S, max_cost=budget)
            if g is None:
                return None
            gain = self.expected_ev(sorted(set(S) | {g}))[0] - self.expected_ev(S)[0]
        elif self.family == "gbfs":
            g = self.model.next_group(S)
            if g is None or (room is not None and self.layout.costs[g] > room):
                return None
            before = self._gbfs_figures(self._gbfs_prefix(S))
            after = self._gbfs_figures(self._gbfs_prefix(sorted(set(S) | {int(g)})))
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
            if self.family == "anytime":
                row["train_explained_variance"] = metrics["train_explained_variance"][j]
                validation = metrics["validation_explained_variance"]
                row["validation_explained_variance"] = None if validation is None else \
                    validation[j]
            elif self.family == "gbfs":
                n_trees = self._gbfs_prefix(S)
                row["trees"] = n_trees
                for part in ("train", "validation"):
                    curves = metrics.get(part) or {}
                    for name, values in curves.items():
                        row[f"{part}_{name}"] = float(values[n_trees])
            elif hasattr(self.model, "supports_"):
                k = int(self.model.support_for(layout.features_of(S).tolist()))
                row["validation_rmse"] = float(self.model.support_validation_rmse_[k])
            prefixes.append(row)
        return {"version": self.version, "created_at": self.meta.get("created_at"),
                "algorithm": self.meta.get("algorithm"), "prefixes": prefixes}

    def _names(self, groups) -> list[str]:
        return [self.layout.group_names[int(g)] for g in groups]


def _dense(X: sp.csr_matrix, features: np.ndarray) -> np.ndarray:
    """Dense rows with every feature outside ``features`` set to 0 (not computed)."""
    dense = X.toarray()
    mask = np.zeros(dense.shape[1], dtype=bool)
    mask[features] = True
    dense[:, ~mask] = 0.0
    return dense
