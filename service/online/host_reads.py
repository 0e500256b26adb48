"""What an online model answers from, and its description: the learner or the newer serving
view (:mod:`service.online.view`), fetched when another process folds the model.

:class:`HostReads` is a base of :class:`~service.online.host.ModelHost` (see there): its
methods read the host's fields and change them only through the host's writers
(``begin_view_fetch``, ``install_view``, ``end_view_fetch``). A read is lock-free: the
learner or the view it answers from is taken by one reference read.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import numpy as np

from service import metrics
from service.online.view import ServingView, ViewFormatError, top_names
from service.online.view import decode as decode_view
from service.priority import loop_seconds, offload
from service.storage import id_key

log = logging.getLogger("featurebudget.manager")


class HostReads:
    """The serving view and the description of an online model (module docstring)."""

    async def describe(self, *, features: bool = True) -> dict[str, Any]:
        log_end = await self.models.storage.log_end(self.name)
        await self.refresh_view()
        return self.public(features=features,
                           limit=self.models.settings.selected_features_max, log_end=log_end)

    async def refresh_view(self) -> None:
        """A process that does not fold the model: fetch the serving view when its token
        changed (one round trip), so that this answer includes everything a ``?wait=true``
        acknowledged before the request arrived. Concurrent requests share one fetch that
        started after they arrived. On a storage error the process answers from what it
        holds (and logs it)."""
        storage = self.models.storage
        if not storage.shared or self.owner:
            return
        arrived = time.monotonic()
        while self.view_flight is not None:
            started, flight = self.view_flight
            await asyncio.shield(flight)
            if started >= arrived:
                return
        flight = asyncio.get_running_loop().create_future()
        self.begin_view_fetch(flight)
        try:
            token, blob = await storage.fetch_view(self.name, self.view_token)
            if blob is not None:
                view = await offload(decode_view, blob, self.n_features, background=False,
                                     cost=loop_seconds("view_decode", len(blob)))
                self.install_view(view, token)
                metrics.READ_STALENESS.labels(self.name).observe(
                    max(0.0, time.time() - view.applied_at))
        except ViewFormatError as exc:
            log.error("model %s: published serving view refused: %s", self.name, exc)
        except Exception as exc:  # storage down: answer from what this process holds
            log.warning("model %s: serving view not refreshed: %s", self.name, exc)
        finally:
            self.end_view_fetch()
            flight.set_result(None)

    def make_view(self, names_limit: int) -> ServingView:
        """The serving view of the current state (owner; taken under the lock). O(B) for
        the selecting learners, O(d) for OGD / AROW."""
        with self.lock:
            learner = self.learner
            indices, values = learner.weights()
            return ServingView(
                log_id=self.applied_id or "0-0", applied_at=self.applied_at,
                n_examples=int(learner.n_examples_), n_updates=int(learner.n_updates_),
                progressive_examples=self.progressive_examples,
                progressive_correct=self.progressive_correct,
                indices=np.asarray(indices, dtype=np.int64),
                values=np.asarray(values, dtype=np.float64),
                names=top_names(indices, values, self.names, names_limit))

    def serving(self):
        """What to answer from: the learner, or a newer published view (see
        :mod:`service.online.view`). A process that does not fold the model answers from the view
        when it is at least as new; one that has just taken the fold over (from an older
        snapshot, replaying the log after it) answers from the view it served before until
        its learner has caught up, so its answers never go back in the log."""
        view = self.view
        if view is None:
            return None
        applied = id_key(self.applied_id)
        if view.position > applied or (view.position == applied and not self.owner):
            return view
        return None

    def public(self, *, features: bool, limit: int, log_end: str | None) -> dict[str, Any]:
        view = self.serving()
        if view is not None:
            indices, values, names = view.indices, view.values, view.names
            examples, updates, position = view.n_examples, view.n_updates, view.log_id
            progressive, correct = view.progressive_examples, view.progressive_correct
            applied_at = view.applied_at
        else:
            learner = self.learner
            indices, values = learner.weights()
            names = self.names
            examples, updates = int(learner.n_examples_), int(learner.n_updates_)
            position = self.applied_id
            progressive, correct = self.progressive_examples, self.progressive_correct
            applied_at = self.applied_at
        public: dict[str, Any] = dict(
            name=self.name, algorithm=self.spec.algorithm, params=self.spec.params,
            budget=self.spec.budget, n_features=self.n_features, hash_bits=self.spec.hash_bits,
            libsvm_zero_based=self.spec.libsvm_zero_based,
            created_at=self.spec.created_at, incarnation=self.spec.incarnation,
            examples_applied=examples, updates=updates,
            log_position=position, log_end=log_end,
            progressive_accuracy=correct / progressive if progressive else None,
            progressive_examples=progressive, n_selected=int(len(indices)), owner=self.owner,
            applied_at=applied_at or None)
        if features:
            order = np.argsort(-np.abs(values), kind="stable")[:limit]
            public["selected_features"] = [
                {"index": int(indices[k]), "weight": float(values[k]),
                 "name": names.get(int(indices[k]))} for k in order]
        return public
