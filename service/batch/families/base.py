"""The protocol of a batch family: everything the service does differently for one family
of batch models, in one object (an adapter). The service asks the adapter of a spec's
family (``service.batch.families.FAMILIES``) and never branches on a family's name.

An adapter says, for its family:

- spec and params: the API algorithms it serves, its default retrain policy and training
  window, the estimator keywords the service sets itself, its own service parameters and
  the estimator classes whose keywords ``params`` may use;
- fit: the unfitted estimator, the fit (with progress) and the version's metrics;
- fold state: its kind, ``statistics`` (sufficient statistics of every example) or
  ``window`` (bounded windows of rows), and how many examples a fitted part holds;
- artifact: what the version keeps (statistics, held-out rows), the model class, the
  checks against the layout, the answer for a computed set, the next group, the trained
  order and the figures of a sequence row;
- sizes: the memory and fit-time estimates;
- the gauge the fold publishes its example count on, the halves a page draws.

The defaults below are those of a window family; :class:`StatisticsFamily` changes the
fold's kind. Every method is O(1) unless its docstring says otherwise.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from algorithms.sparse import CSRBatch
from service.batch.checks import probe_rows
from service.batch.curves import FitError, Progress
from service.batch.layout import BatchLayout, BatchParams
from service.batch.sizes import HEADER_BYTES, SNAPSHOT_COPIES, SizeEstimate, validation_size
from service.errors import item_error

STATISTICS, WINDOW = "statistics", "window"


class BatchFamily:
    """A window family's defaults; subclasses set the class attributes and override the
    estimator, fit, artifact and size methods."""

    name: str = ""
    algorithms: tuple[str, ...] = ()  # the API's algorithm names of this family
    fold_kind: str = WINDOW
    default_policy: tuple[int | None, float | None] = (None, None)
    default_window: int | None = 5000  # rows of the training window (None: statistics)
    reserved: frozenset[str] = frozenset()  # estimator keywords the service sets
    own_service_params: frozenset[str] = frozenset({"window"})  # beyond the common three
    warm_cases: tuple[tuple[str, str, dict | None], ...] = ()  # (algorithm, task, params)
    halves: dict[str, tuple[str, str]] = {}  # half -> (colour, dash) on the sequence page

    # ------------------------------------------------------------------ spec and params
    def estimator_choice(self, params: dict[str, Any]) -> str | None:
        """Pop and check ``params["estimator"]`` (422); None for families with one."""
        if params.pop("estimator", None) is not None:
            raise item_error("only nvsd models choose an estimator", field="params.estimator")
        return None

    def estimator_classes(self, estimator: str | None) -> list[type]:
        """The estimator classes whose keywords ``params`` may use (the built one last)."""
        raise NotImplementedError

    def dropped_keywords(self, estimator: str | None) -> set[str]:
        """Keywords of those classes that ``params`` may not use."""
        return set()

    def build_estimator(self, algorithm: str, task: str, layout: BatchLayout,
                        params: BatchParams):
        """The unfitted estimator (TypeError / ValueError on bad parameters)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ fit
    def fit(self, estimator, task: str, layout: BatchLayout, params: BatchParams, training,
            validation, progress: Progress) -> tuple[Any, dict[str, Any]]:
        """Fit ``estimator`` on ``training`` (an ``(X, y)`` window), scored on
        ``validation`` (same, or None) -> (model, metrics); FitError on too little data."""
        X, y = training
        if len(y) < 2:
            raise FitError(f"needs at least 2 training examples, the window holds {len(y)}")
        classes = layout.classes
        if classes is not None:  # a multi-class model: every class in the window
            missing = sorted(set(range(len(classes))) - set(np.unique(y).astype(np.int64)
                                                            .tolist()))
            if missing:
                raise FitError(f"the training window holds {len(classes) - len(missing)} of "
                               f"the model's {len(classes)} classes (missing "
                               f"{classes.labels(missing[:10])}); every class needs "
                               "training examples")
        if task == "classification" and len(np.unique(y)) < 2:
            raise FitError("the training window holds one class only; classification needs "
                           "both")
        progress(0.05)

        def scaled(fraction: float) -> None:  # the fit itself is 5%..90% of the job
            progress(0.05 + 0.85 * fraction)

        return self.fit_window(estimator, task, layout, params, X, y, validation, scaled,
                               progress)

    def fit_window(self, estimator, task: str, layout: BatchLayout, params: BatchParams,
                   X: np.ndarray, y: np.ndarray, validation, scaled: Progress,
                   progress: Progress) -> tuple[Any, dict[str, Any]]:
        """The family's fit on a checked window; ``scaled`` reports the fit's own progress
        (0..1), ``progress`` is called with 0.9 when it is done."""
        raise NotImplementedError

    # ------------------------------------------------------------------ fold state
    def examples_in(self, part) -> int:
        """Examples in a fit's input part (a window ``(X, y)``)."""
        return len(part[1])

    def gauge(self):
        """The Prometheus gauge the fold publishes its example count on."""
        from service import metrics

        return metrics.WINDOW_EXAMPLES

    # ------------------------------------------------------------------ artifact
    def packed_statistics(self, validation):
        """The statistics a version keeps beside its model (None: none)."""
        return None

    def held_out_for(self, rows):
        """The held-out rows ``(X, y)`` a version keeps (None: none)."""
        return rows

    def model_class(self, info) -> type:
        """The model class of a version whose metadata is ``info``
        (:class:`~service.batch.jobs.VersionMeta`)."""
        raise NotImplementedError

    def check_fits(self, model, layout: BatchLayout, validation) -> None:
        """ValueError unless the loaded model fits ``layout``."""
        raise NotImplementedError

    def check_artifact(self, artifact) -> None:
        """ValueError unless the version's metrics have the shapes its sequence rows read
        and the model's numbers the ranges that keep every answer finite (the family's
        own checks beyond :meth:`check_fits`). O(size of the version)."""
        if not isinstance(artifact.info.metrics, dict):
            raise ValueError("meta.metrics must be an object")

    def probe_rows(self, artifact) -> np.ndarray:
        """Dense rows a candidate version is probed on (:func:`service.batch.checks.probe`):
        zeros and its held-out rows."""
        return probe_rows(artifact)

    def scorer(self, artifact):
        """``score(X, S)`` that the version's held-out per-set figures are measured with,
        or None when it has none."""
        return None

    def request_rows(self, X):
        """The request's rows as :meth:`answer` takes them: a scipy CSR matrix (a request's
        ``CSRBatch`` converted; one already a matrix as it is). O(rows)."""
        return X.to_scipy() if isinstance(X, CSRBatch) else X

    def answer(self, artifact, X, S: list[int]) -> dict[str, Any]:
        """Predictions and figures for rows ``X`` (:meth:`request_rows`) that have computed
        exactly ``S``."""
        raise NotImplementedError

    def next_step(self, artifact, S: list[int], budget: float | None
                  ) -> tuple[int, float | None] | None:
        """(group to compute next, its expected gain) given ``S``, within ``budget``."""
        raise NotImplementedError

    def order(self, artifact) -> list[int]:
        """The trained sequence of groups."""
        raise NotImplementedError

    def budget_set(self, artifact, budget: float) -> list[int] | None:
        """The set the family answers a cost cap with; None: the longest prefix of
        :meth:`order` within it."""
        return None

    def sequence_figures(self, artifact, S: list[int], j: int, metrics: dict
                         ) -> dict[str, Any]:
        """The figures of prefix ``j`` (the set ``S``) of the sequence page."""
        return {}

    # ------------------------------------------------------------------ sizes
    def sizes(self, spec, params: BatchParams, versions: int) -> SizeEstimate:
        raise NotImplementedError

    def fit_seconds(self, spec, params: BatchParams, examples: int | None) -> float:
        raise NotImplementedError


class StatisticsFamily(BatchFamily):
    """A family whose fold keeps sufficient statistics of every example."""

    fold_kind = STATISTICS
    default_window = None
    own_service_params = frozenset()

    def examples_in(self, part) -> int:
        return int(part.n)

    def gauge(self):
        from service import metrics

        return metrics.STATISTICS_EXAMPLES

    def packed_statistics(self, validation):
        return validation


def groups_lists(layout: BatchLayout) -> list[list[int]]:
    """The layout's groups as lists of feature ids (the estimators' ``groups``)."""
    return [g.tolist() for g in layout.groups]


def window_rows(params: BatchParams, examples: int | None = None) -> tuple[int, int]:
    """(training rows, held-out rows) of a full window (or of ``examples`` rows in it)."""
    window = params.window
    n = window.size if examples is None else max(0, min(examples, window.size))
    return n, validation_size(window, params.validation_fraction)


def window_fold(spec, params: BatchParams) -> tuple[int, int, int]:
    """(fold state, snapshot, snapshot write) bytes of a window family's full windows."""
    n, n_val = window_rows(params)
    fold = 8 * (n + n_val) * (int(spec.dimension) + 1)
    snapshot = fold + HEADER_BYTES
    return fold, snapshot, int(SNAPSHOT_COPIES[WINDOW] * snapshot)
