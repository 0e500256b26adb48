"""A batch host's answers from its served version: ``/predict``, ``/next``, the sequence
and what the per-example policy does. Mixed into
:class:`~service.batch.serving.host.BatchHost`, whose fields (``spec``, ``layout``,
``served``, ``models``) and served version (``served_version``, ``require_version``) it
reads; it writes none.

Each answer reads the served version once, so a swap during a request never mixes two
versions, and runs on the answer pool (``models.answer``), never on the event loop. A
``/predict`` groups its rows by computed set and asks the version once per distinct set
(each row is in one call).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from service import metrics
from service.batch import requested_sets
from service.batch.serving import policy_summary
from service.batch.serving.requests import BudgetedRequest, assemble, parse_next, parse_predict


class BatchHostAnswers:
    """``predict``, ``next_group``, ``sequence`` and ``acquisition`` of a batch host
    (module docstring)."""

    async def predict(self, document: dict, require_write) -> dict[str, Any]:
        await self.require_version()
        return await self.models.answer(self.answer_predict, document)

    async def next_group(self, document: dict) -> dict[str, Any]:
        await self.require_version()
        return await self.models.answer(self.answer_next, document)

    async def sequence(self) -> dict[str, Any]:
        await self.require_version()
        return await self.models.answer(self.served_version().sequence)

    async def acquisition(self) -> dict[str, Any]:
        """What the served version's per-example policy does (its summary is started if
        nobody has: :mod:`service.batch.serving.policy_summary`)."""
        await self.require_version()
        return {"model": self.name,
                **policy_summary.describe(self.served_version(), start=True)}

    def answer_predict(self, document: dict) -> dict[str, Any]:
        """``POST /predict`` of a batch model (see :mod:`service.batch.artifact`), on the
        answer pool's threads."""
        served = self.served_version()  # one version for the whole request
        started = time.perf_counter()
        request = parse_predict(self.layout, self.spec.task, document)
        X, budget = request.batch.X, request.cap  # the adapter takes X as it needs it
        n = len(request.batch)
        sets = request.example_sets(served.budget_set)
        answers: dict[tuple, dict] = {}
        rows_of: dict[tuple, list[int]] = {}
        for row, S in enumerate(sets):
            rows_of.setdefault(tuple(S), []).append(row)
        for key, rows in rows_of.items():
            answers[key] = served.answer(X.to_scipy()[rows] if len(rows) < n else X,
                                         list(key), budget)
        requested_sets.record(self.name, self.spec.incarnation,
                              ((key, len(rows)) for key, rows in rows_of.items()))
        out = assemble(answers, rows_of, n)
        out.update(model=self.name, version=served.version)
        metrics.PREDICT_SECONDS.labels(self.name).observe(time.perf_counter() - started)
        metrics.PREDICTIONS.labels(self.name).inc(n)
        return out

    def answer_next(self, document: dict) -> dict[str, Any]:
        """``POST /next``: the per-set next group of ``computed_groups``; with ``examples``
        one answer per example (:mod:`service.batch.serving.acquisition`); on the answer
        pool's threads."""
        served = self.served_version()
        request = parse_next(self.layout, self.spec.task, document)
        if request.batch is not None:
            return self._next_per_example(served, request)
        computed = request.computed
        return {"model": self.name, "version": served.version,
                "computed_groups": [self.layout.group_names[g] for g in computed],
                "cost": self.layout.cost_of(computed),
                "next_group": served.next_group(computed, request.cap)}

    def _next_per_example(self, served, request: BudgetedRequest) -> dict[str, Any]:
        """Each example's next group (its computed set: ``computed_groups`` or the groups
        it carries), the stop rule of ``max_cost`` and ``exchange_rate``."""
        from service.batch.serving import acquisition

        layout = self.layout
        dense = request.batch.X.to_scipy().toarray()
        answers = []
        for row, S in enumerate(request.example_sets()):   # (the cap is the stop rule here)
            x = np.full(layout.n_features, np.nan)
            features = layout.features_of(S)
            x[features] = dense[row, features]
            answers.append(acquisition.answer(served, x, S, request.cap,
                                              request.exchange_rate))
        return {"model": self.name, "version": served.version, "answers": answers}


__all__ = ["BatchHostAnswers"]
