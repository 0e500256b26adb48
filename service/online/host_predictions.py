"""An online model's predictions and the feedback on them.

A prediction is ``w · x`` per example, from the learner or the serving view the host answers
from (:class:`~service.online.host_reads.HostReads`): O(nnz) for the learner, O(nnz · log n)
for a view of n weights. With ``return_prediction_ids`` each example is kept (its score and
FBX1 row, for ``prediction_ttl_seconds``) under a new id; feedback on the id appends the
example with its label to the log, like any example.

:class:`HostPredictions` is a base of :class:`~service.online.host.ModelHost` (see there); it
writes none of the host's fields.
"""

from __future__ import annotations

import struct
import time
import uuid
from typing import Any

import numpy as np

from algorithms.online.base import signed_labels
from service import fbx1, metrics
from service.errors import ConflictError, item_error
from service.ingest import ExampleBatch, parse_json_examples
from service.priority import loop_seconds, offload
from service.storage import ModelChangedError

_SCORE = struct.Struct("<d")
_PREDICT_FIELDS = {"examples", "return_prediction_ids"}


def untrained(name: str) -> str:
    """The warning of a prediction by a model that has learned from no example."""
    return (f"model {name!r} has learned from no examples yet: every score is 0 and every "
            f"label +1 until labelled examples are applied (POST /v1/models/{name}/examples; "
            "?wait=true answers once they are)")


class HostPredictions:
    """Predictions and feedback of an online model (module docstring)."""

    async def predict(self, document: dict, require_write) -> dict[str, Any]:
        """``POST /predict``: margins and labels, and with ``return_prediction_ids`` an id
        per example for ``/feedback`` (which writes: the caller must be allowed to)."""
        unknown = set(document) - _PREDICT_FIELDS
        if unknown:
            name = sorted(unknown)[0]
            hint = " (computed_groups and budget are for batch models)" \
                if name in ("computed_groups", "budget", "max_cost") else ""
            raise item_error(f"unknown fields {sorted(unknown)}{hint}", field=name)
        with_ids = document.get("return_prediction_ids", False)
        if not isinstance(with_ids, bool):
            raise item_error("must be true or false", field="return_prediction_ids")
        if with_ids:  # an id is only good for feedback, which writes
            await require_write()
        batch = parse_json_examples(document["examples"], self.n_features, self.hasher,
                                    require_labels=False)
        scores, ids, examples = await self.scores(batch, with_ids)
        return {"model": self.name, "log_position": self.applied_id,
                "scores": scores.tolist(), "labels": signed_labels(scores).tolist(),
                "prediction_ids": ids, "examples_applied": examples,
                "warnings": [] if examples else [untrained(self.name)]}

    async def scores(self, batch: ExampleBatch,
                     with_ids: bool) -> tuple[np.ndarray, list[str] | None, int]:
        """The margins of ``batch``, the prediction ids (``with_ids``), and how many
        examples the state that answered has learned from."""
        await self.refresh_view()
        view = self.serving()  # lock-free read (see docs/architecture.md)
        learner = view or self.learner
        examples = int(view.n_examples if view is not None else self.learner.n_examples_)
        started = time.perf_counter()
        scores = await offload(learner.decision_function, batch.X, background=False,
                               cost=loop_seconds("scores_nnz", batch.X.nnz))
        metrics.PREDICT_SECONDS.labels(self.name).observe(time.perf_counter() - started)
        metrics.PREDICTIONS.labels(self.name).inc(len(batch))
        ids = None
        if with_ids:
            ids = []
            ttl = self.models.settings.prediction_ttl_seconds
            for row in range(len(batch)):
                prediction_id = uuid.uuid4().hex
                X = batch.X.row_slice(row, row + 1)
                blob = _SCORE.pack(float(scores[row])) + fbx1.encode_batch(
                    X.indptr, X.indices, X.values, np.ones(1, dtype=np.int8))
                await self.models.storage.put_pending(self.name, prediction_id, blob, ttl)
                ids.append(prediction_id)
        return scores, ids, examples

    async def feedback(self, prediction_id: str, label: int) -> dict | None:
        """Learn from a labelled earlier prediction (appended to the log like any example)."""
        storage = self.models.storage
        blob = await storage.pop_pending(self.name, prediction_id)
        if blob is None:
            metrics.FEEDBACK.labels(self.name, "unknown").inc()
            return None
        (score,) = _SCORE.unpack_from(blob, 0)
        indptr, indices, values, _ = fbx1.decode_batch(blob[_SCORE.size:])
        data = fbx1.encode_batch(indptr, indices, values, np.array([label], dtype=np.int8))
        entry = {b"fmt": b"bin", b"data": data}
        try:
            (log_id,) = await storage.append(self.name, [entry],
                                             incarnation=self.incarnation or None)
        except ModelChangedError as exc:
            raise ConflictError(f"model {self.name!r} was deleted or created again: the "
                                "prediction belongs to the deleted model") from exc
        predicted = int(signed_labels(score))
        metrics.FEEDBACK.labels(self.name, "correct" if predicted == label else "wrong").inc()
        metrics.EXAMPLES_INGESTED.labels(self.name, "feedback").inc()
        return {"score": score, "predicted_label": predicted, "label": label,
                "correct": predicted == label, "log_id": log_id}
