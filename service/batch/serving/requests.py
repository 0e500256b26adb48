"""The batch routes' vocabulary: a budgeted request parsed once, and the answer's shape.

:func:`parse_predict` and :func:`parse_next` read a ``/predict`` or ``/next`` body into a
:class:`BudgetedRequest` (every field checked, the examples parsed); the models' routes
read only that.

A request names the feature groups its examples have computed (``computed_groups``), or a
cost cap (``max_cost``: the groups of the served sequence that fit it), or neither (each
example's computed set is the groups it carries). ``budget`` is the deprecated alias of
``max_cost`` (the name the library uses for the cap), accepted for one release (removed in
0.2.0: docs/changelog.md, whose test fails once the package reaches that version); giving
both is refused (:func:`_cap_names` is the one place that names them).

An answer has ``answers``: one object per example, in order, with every field of that
example (its prediction, the groups used, their cost, the expected figures, the next
group). The top-level fields (``predictions``, ``labels``, ``probabilities`` per example;
``groups_used``, ``cost``, ``next_group``, ... single values when every example had the
same set, else per-example lists) are kept for one release for the clients written
against them (removed in 0.2.0, docs/changelog.md).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from service.batch.worker.ingest import parse_batch_items
from service.errors import item_error
from service.ingest import ExampleBatch

log = logging.getLogger("featurebudget.batch")
PER_EXAMPLE = ("predictions", "labels", "probabilities")
_SINGULAR = {"predictions": "prediction", "labels": "label", "probabilities": "probability"}
_warned: set[str] = set()


PREDICT_FIELDS = frozenset({"examples", "computed_groups", "max_cost", "budget"})
NEXT_FIELDS = PREDICT_FIELDS | {"exchange_rate"}


@dataclass(frozen=True, slots=True)
class BudgetedRequest:
    """A batch ``/predict`` or ``/next`` body, parsed once (:func:`parse_predict`,
    :func:`parse_next`): ``computed`` the group ids of ``computed_groups`` (None when
    absent), ``cap`` the cost cap (``max_cost`` or its alias; None when absent),
    ``exchange_rate`` (``/next``), and the ``examples`` parsed (``batch``, with
    ``present``: which groups each example carries), None when the body has none."""

    computed: list[int] | None
    cap: float | None
    exchange_rate: float | None = None
    batch: ExampleBatch | None = None
    present: np.ndarray | None = None

    def example_sets(self, budget_set=None) -> list[list[int]]:
        """Each example's computed set (sorted ids): ``computed``, else (``/predict``, given
        ``budget_set``) the served sequence's groups within ``cap``, else the groups the
        example carries."""
        n = len(self.batch)
        if self.computed is not None:
            return [self.computed] * n
        if self.cap is not None and budget_set is not None:
            return [budget_set(self.cap)] * n
        return [np.flatnonzero(self.present[row]).tolist() for row in range(n)]


def _cap_names(document: dict) -> list[str]:
    """The names of the cost cap that ``document`` gives: the one place that knows them."""
    return [name for name in ("max_cost", "budget") if name in document]


def _cap_field(document: dict) -> str | None:
    """The name the cost cap goes by in ``document`` (``max_cost``, or the deprecated
    ``budget``, logged once per process), None when absent; both is refused."""
    names = _cap_names(document)
    has_cap, has_alias = "max_cost" in names, "budget" in names
    if has_cap and has_alias:
        raise item_error("give max_cost or its deprecated alias budget, not both",
                         field="budget")
    if has_alias and "budget" not in _warned:
        _warned.add("budget")
        log.warning("a client sent 'budget' to a batch route: it is the deprecated alias of "
                    "'max_cost' (accepted for one release)")
    return "max_cost" if has_cap else "budget" if has_alias else None


def _number(document: dict, field: str | None, *, required: bool) -> float | None:
    """``document[field]`` as a finite float >= 0; None when ``field`` is None, or when the
    value is null and not ``required``; InputError naming the field."""
    if field is None:
        return None
    value = document[field]
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or \
            not math.isfinite(value) or value < 0:
        raise item_error("must be a finite number >= 0", field=field)
    return float(value)


def cost_cap(document: dict, *, required: bool) -> float | None:
    """``max_cost`` (or its deprecated alias ``budget``) as a float, None when absent (and,
    unless ``required``, when null); InputError naming the field."""
    return _number(document, _cap_field(document), required=required)


def _first_unknown(document: dict, known: frozenset) -> str | None:
    unknown = set(document) - known
    return sorted(unknown)[0] if unknown else None


def parse_predict(layout, task: str, document: dict) -> BudgetedRequest:
    """A ``/predict`` body: ``examples`` (required) and at most one of ``computed_groups``
    and the cost cap (a number). InputError naming the field. O(total features)."""
    name = _first_unknown(document, PREDICT_FIELDS)
    if name is not None:
        hint = " (return_prediction_ids is for online models)" \
            if name == "return_prediction_ids" else ""
        raise item_error(f"unknown field for a batch model{hint}", field=name)
    named = _cap_names(document)
    if "computed_groups" in document and named:
        raise item_error(f"give computed_groups or {named[0]}, not both", field=named[0])
    cap = cost_cap(document, required=True)
    computed = layout.group_ids(document["computed_groups"]) \
        if "computed_groups" in document else None
    batch, present = parse_batch_items(document.get("examples"), layout, task,
                                       require_targets=False)
    return BudgetedRequest(computed, cap, batch=batch, present=present)


def parse_next(layout, task: str, document: dict) -> BudgetedRequest:
    """A ``/next`` body: ``computed_groups`` (default: none), the cost cap (null: none) and,
    with ``examples`` (null: absent), their ``exchange_rate``. InputError naming the
    field. O(total features)."""
    name = _first_unknown(document, NEXT_FIELDS)
    if name is not None:
        raise item_error("unknown field", field=name)
    if document.get("examples") is None:
        if document.get("exchange_rate") is not None:
            raise item_error("exchange_rate applies to examples: give examples",
                             field="exchange_rate")
        computed = layout.group_ids(document.get("computed_groups", []))
        return BudgetedRequest(computed, cost_cap(document, required=False))
    cap = cost_cap(document, required=False)
    rate = _number(document, "exchange_rate" if "exchange_rate" in document else None,
                   required=False)
    computed = layout.group_ids(document["computed_groups"]) \
        if "computed_groups" in document else None
    batch, present = parse_batch_items(document["examples"], layout, task,
                                       require_targets=False)
    return BudgetedRequest(computed, cap, rate, batch, present)


def assemble(answers: dict[tuple, dict], rows_of: dict[tuple, list[int]],
             n: int) -> dict[str, Any]:
    """One response from the answer of each computed set (``answers``) and the rows that
    had it (``rows_of``): ``answers`` per example, and the top-level fields of the module
    docstring. O(n × fields)."""
    per_example: list[dict[str, Any] | None] = [None] * n
    for key, rows in rows_of.items():
        answer = answers[key]
        for position, row in enumerate(rows):
            per_example[row] = {_SINGULAR.get(k, k): (v[position] if k in PER_EXAMPLE and
                                                      v is not None else v)
                                for k, v in answer.items()}
    if len(answers) == 1:
        (answer,) = answers.values()
        return {**answer, "answers": per_example}
    keys = {k for a in answers.values() for k in a}
    out: dict[str, Any] = {k: [row.get(_SINGULAR.get(k, k)) for row in per_example]
                           for k in keys}
    out["answers"] = per_example
    return out
