"""The anytime family (``AnytimeLinearModel``, one API algorithm per sequencing method):
the fold keeps sufficient statistics, a version answers ``w(S)·x + b(S)`` with
``w(S) = C_S⁻¹ b_S`` (cached per set) and the expected explained variance of exactly ``S``
on the validation statistics (one quadratic form; the training statistics when none were
held out); classification adds the held-out rows' error, log-loss and calibrated
probabilities. Classification answers (``params.classification_answer``, default
``"logistic"``) with the logistic refit on exactly ``S`` over the fold's reservoir of training
rows (``AnytimeLinearModel.logistic_for_groups``, cached per set; the version keeps the
rows), or with ``"regression"`` the ridge on the ±1 labels, as every version written before
the option does; a fit whose fold has no uniform sample of its training rows (a state
written before the reservoir) answers with the regression and says so in its metrics.
``next_group`` is the method's greedy choice given ``S`` within the cap.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from algorithms.anytime.model import METHODS
from algorithms.metrics.anytime import explained_variance_on_support
from service.batch.checks import MAX_ABS_INPUT, bounded_linear, check_numbers, probe_rows
from service.batch.curves import FitError
from service.batch.families.base import StatisticsFamily
from service.batch.layout import BatchLayout
from service.batch.sizes import (
    ANYTIME_CUBE_SECONDS,
    ANYTIME_FIT_SQUARES,
    ANYTIME_GROUP_SECONDS,
    ANYTIME_LOAD_SQUARES,
    FIT_FIXED_SECONDS,
    GROUP_LASSO_SECONDS,
    HEADER_BYTES,
    SNAPSHOT_COPIES,
    SizeEstimate,
    held_out_capacity,
    statistics_bytes,
)


def anytime_seconds(D: float, J: float, method: str) -> float:
    """Seconds of an anytime fit's sequencing over D features in J groups."""
    seconds = ANYTIME_CUBE_SECONDS * D ** 3 + ANYTIME_GROUP_SECONDS * J * D * D
    if method == "group-lasso":
        seconds += ANYTIME_CUBE_SECONDS * D ** 3 + GROUP_LASSO_SECONDS * 60 * 200 * D * D
    return seconds


class AnytimeFamily(StatisticsFamily):
    name = "anytime"
    algorithms = METHODS
    default_policy = (10_000, 60.0)
    reserved = frozenset({"groups", "costs", "method"})
    warm_cases = tuple((method, "regression", None) for method in METHODS)

    def estimator_classes(self, estimator):
        from algorithms.anytime import AnytimeLinearModel

        return [AnytimeLinearModel]

    def build_estimator(self, algorithm, task, layout, params):
        from algorithms.anytime import AnytimeLinearModel

        options = dict(params.algorithm)
        if task == "classification":
            options.setdefault("classification_answer", "logistic")
        elif options.get("classification_answer") is not None:
            raise ValueError("classification_answer is for classification models only")
        return AnytimeLinearModel(groups=layout.groups, costs=layout.costs, method=algorithm,
                                  **options)

    def fit(self, estimator, task, layout, params, training, validation, progress,
            rows=None):
        if training.n < 2:
            raise FitError(f"needs at least 2 training examples, the statistics hold "
                           f"{training.n}")
        progress(0.1)
        if estimator.classification_answer == "logistic":
            if rows is None:  # no uniform sample of the training rows: the regression
                estimator.classification_answer = "regression"
            else:
                rows = (rows[0][:estimator.logistic_rows], rows[1][:estimator.logistic_rows])
        model = estimator.fit_statistics(training, validation=validation,
                                         rows=rows if estimator.classification_answer ==
                                         "logistic" else None)
        progress(0.9)
        return model, _metrics(model, layout)

    # ------------------------------------------------------------------ artifact
    def model_class(self, info):
        from algorithms.registry import class_of

        return class_of("anytime-linear-model")

    def check_fits(self, model, layout, validation):
        D = layout.n_features
        if model.n_features_in_ != D or len(model.groups_) != layout.n_groups:
            raise ValueError(f"artifact has {model.n_features_in_} features in "
                             f"{len(model.groups_)} groups, this model {D} in "
                             f"{layout.n_groups}")
        if validation is not None and validation.n_features != D:
            raise ValueError("artifact's validation statistics have the wrong dimension")
        sequence = np.asarray(model.sequence_, dtype=np.int64)
        expected = np.concatenate([[0.0], np.cumsum(layout.costs[sequence])]) \
            if sequence.size else np.zeros(1)
        cumulative = np.asarray(model.cumulative_cost_, dtype=np.float64)
        if cumulative.shape != expected.shape or not np.allclose(cumulative, expected,
                                                                 rtol=1e-9, atol=1e-12):
            raise ValueError("artifact's cumulative costs are not the sums of the groups' "
                             "costs along its sequence")

    def check_artifact(self, artifact):
        """The sequence rows' curves (one finite figure per prefix) and the ranges of
        :func:`check_anytime_ranges`."""
        super().check_artifact(artifact)
        metrics, model = artifact.info.metrics, artifact.model
        P = len(model.sequence_) + 1
        check_numbers(metrics.get("train_explained_variance"), P,
                      "meta.metrics.train_explained_variance")
        check_numbers(metrics.get("validation_explained_variance"), P,
                      "meta.metrics.validation_explained_variance", optional=True)
        check_anytime_ranges(model)

    def probe_rows(self, artifact):
        """Zeros, the held-out rows, the training mean and the mean ± one deviation."""
        model = artifact.model
        mean, scale = np.asarray(model.x_mean_), np.asarray(model.x_scale_)
        return probe_rows(artifact, np.vstack([mean, mean + scale, mean - scale]))

    def scorer(self, artifact):
        return answer_scores(artifact) if artifact.task == "classification" else None

    def request_rows(self, X):
        """As they come: a request's ``CSRBatch`` has the one product the answer needs."""
        return X

    def answer(self, artifact, X, S):
        scores = answer_scores(artifact)(X, S)
        ev, basis = expected_ev(artifact, S)
        out = {"predictions": scores.tolist(), "groups_used": artifact.names(S),
               "cost": artifact.layout.cost_of(S), "expected_explained_variance": ev,
               "expected_on": basis}
        if artifact.figures is not None:  # classification with held-out rows
            figures = artifact.figures.figures(S)
            out.update(expected_error=figures.error, expected_log_loss=figures.log_loss,
                       expected_error_on="validation")
            return artifact.calibrated(figures.logits(scores), out)
        return artifact.labels(scores, out)

    def next_step(self, artifact, S, budget):
        g = artifact.model.next_group(S, max_cost=budget)
        if g is None:
            return None
        return g, expected_ev(artifact, sorted(set(S) | {g}))[0] - expected_ev(artifact, S)[0]

    def order(self, artifact):
        return [int(g) for g in artifact.model.sequence_]

    def budget_set(self, artifact, budget):
        j = max(artifact.model.prefix_length(budget), 0)
        return sorted(int(g) for g in artifact.model.sequence_[:j])

    def sequence_figures(self, artifact, S, j, metrics):
        row: dict[str, Any] = {"train_explained_variance": metrics["train_explained_variance"][j]}
        validation = metrics["validation_explained_variance"]
        row["validation_explained_variance"] = None if validation is None else validation[j]
        if artifact.figures is not None:
            figures = artifact.figures.figures(S)
            row.update(validation_error=figures.error, validation_log_loss=figures.log_loss)
        return row

    # ------------------------------------------------------------------ sizes
    def sizes(self, spec, params, versions):
        """Statistics ``8·(D² + 3D)`` each, two of them (training and validation), plus
        for classification a reservoir of ``R = held_out_capacity(D)`` held-out rows
        (``8·R·(D+1)``); a version holds the Gram's upper triangle, the prefix weights and
        the validation statistics (``8·(1.5·D² + (J+8)·D)``, plus the held-out rows),
        served with the full Gram rebuilt (``+ 4·D²``); a fit peaks at ``7.5`` D x D
        arrays (group-lasso ``9``), loading a version at ``5`` beyond its blob; writing a
        snapshot of S bytes holds ``1.75·S``. Classification also keeps a reservoir of
        ``R`` training rows (``8·R·(D+1)``), which a version answering with the logistic
        refit holds too (and a fit three times)."""
        D, J = int(spec.dimension), len(spec.groups)
        square = 8 * D * D
        rows = train = logistic = 0
        if spec.task == "classification" and params.validation_fraction > 0:
            rows = 8 * held_out_capacity(D) * (D + 1)
        if spec.task == "classification":
            train = 8 * held_out_capacity(D) * (D + 1)
            answer = dict(params.algorithm).get("classification_answer", "logistic")
            logistic = train if answer == "logistic" else 0
        fold = 2 * statistics_bytes(D) + rows + train
        snapshot = fold + HEADER_BYTES
        artifact = square // 2 + 8 * (J + 8) * D + statistics_bytes(D) + rows + logistic
        served = artifact + square // 2
        squares = 9 if spec.algorithm == "group-lasso" else ANYTIME_FIT_SQUARES
        fit = int(squares * square) + 3 * (rows + logistic)
        load = artifact + ANYTIME_LOAD_SQUARES * square + rows + logistic
        return SizeEstimate(fold, snapshot, int(SNAPSHOT_COPIES[self.fold_kind] * snapshot),
                            max(fit, load), served, artifact, versions)

    def fit_seconds(self, spec, params, examples):
        """D³ and J·D² of the sequencing (iterations x D² for group-lasso)."""
        D, J = float(spec.dimension), float(len(spec.groups))
        return FIT_FIXED_SECONDS + anytime_seconds(D, J, spec.algorithm)


def check_anytime_ranges(model) -> None:
    """ValueError unless a loaded anytime model's numbers are in the ranges a fit makes,
    which keep every set's answer finite: deviations in ``[1e-13, 2^51]`` and means within
    ``2^51`` (the inputs are below 2^50; a fit floors a deviation at ``τ = 1e-12·max(1,
    max|mean|)``, below which the feature keeps deviation 1), the standardized ``C``
    within ``max(1, τ)² + α`` and ``b`` within ``max(1, τ)`` in absolute value
    (Cauchy-Schwarz), and every prefix's weights bounded
    (:func:`~service.batch.checks.bounded_linear`). O(D²)."""
    scale, mean, limit = np.asarray(model.x_scale_), np.asarray(model.x_mean_), \
        2.0 * MAX_ABS_INPUT
    if not (np.all(scale >= 1e-13) and np.all(scale <= limit) and
            0 < model.y_scale_ <= limit and abs(model.y_mean_) <= limit and
            np.all(np.abs(mean) <= limit)):
        raise ValueError("anytime model: its scales or means are out of range")
    tau = max(1.0, 1e-12 * max(1.0, float(np.abs(mean).max(initial=0.0))))
    slack = 1.0 + 1e-6
    if not np.all(np.abs(model.gram_) <= (tau * tau + float(model.alpha)) * slack) or \
            not np.all(np.diag(model.gram_) >= 0):
        raise ValueError("anytime model: its standardized Gram matrix is out of range")
    if not np.all(np.abs(model.correlation_) <= tau * slack):
        raise ValueError("anytime model: its correlations are out of range")
    bounded_linear(model.coef_path_, model.intercept_path_, "anytime model")


def linear_scores(artifact, X, S) -> np.ndarray:
    """``X w(S) + b(S)`` of a version (the model's per-set solves are cached and
    thread-safe)."""
    coef, intercept = artifact.model.coef_for_groups(S)
    return X @ coef + intercept


def expected_ev(artifact, S) -> tuple[float, str]:
    """``(explained variance of exactly S, "validation" | "train")``: on the version's
    validation statistics when it holds some, else on its training statistics; cached per
    version (``Artifact.per_set``)."""
    def compute():
        validation = artifact.validation
        if validation is not None and validation.n > 0:
            coef, intercept = artifact.model.coef_for_groups(S)
            support = np.flatnonzero(coef)
            return (explained_variance_on_support(validation, support, coef[support],
                                                  intercept), "validation")
        return float(artifact.model.explained_variance(S)), "train"
    return artifact.per_set(S, compute)


def answer_scores(artifact):
    """``score(X, S)`` of a version: ``X w(S) + b(S)`` with the ridge's solve, or for a
    logistic classification answer the logit of the refit on exactly ``S`` (both cached
    per set by the model)."""
    model = artifact.model
    if getattr(model, "classification_answer", None) != "logistic":
        return lambda X, S: linear_scores(artifact, X, S)

    def score(X, S):
        coef, intercept = model.logistic_for_groups(S)
        return X @ coef + intercept

    return score


def _metrics(model, layout: BatchLayout) -> dict[str, Any]:
    validation = model.validation_explained_variance_
    answer = {} if model.classification_answer is None else {
        "classification_answer": model.classification_answer,
        "logistic_rows": None if model.logistic_X_ is None else int(model.logistic_X_.shape[0])}
    return {**answer,"sequence": [layout.group_names[int(g)] for g in model.sequence_],
            "cumulative_cost": [float(c) for c in model.cumulative_cost_],
            "train_explained_variance": [float(v) for v in model.train_explained_variance_],
            "validation_explained_variance": None if validation is None else
            [float(v) for v in validation]}

