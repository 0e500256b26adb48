"""The batch routes' vocabulary: what a budgeted request selects, and the answer's shape.

A request names the feature groups its examples have computed (``computed_groups``), or a
cost cap (``max_cost``: the groups of the served sequence that fit it), or neither (each
example's computed set is the groups it carries). ``budget`` is the deprecated alias of
``max_cost`` (the name the library uses for the cap), accepted for one release (removed in
0.2.0: docs/changelog.md, whose test fails once the package reaches that version); giving
both is refused.

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
from typing import Any

from service.errors import item_error

log = logging.getLogger("featurebudget.batch")
PER_EXAMPLE = ("predictions", "labels", "probabilities")
_SINGULAR = {"predictions": "prediction", "labels": "label", "probabilities": "probability"}
_warned: set[str] = set()


def cost_cap(document: dict, *, required: bool) -> float | None:
    """``max_cost`` (or its deprecated alias ``budget``) as a float, None when absent (and
    not ``required`` to be a number when present); InputError naming the field."""
    has_cap, has_alias = "max_cost" in document, "budget" in document
    if has_cap and has_alias:
        raise item_error("give max_cost or its deprecated alias budget, not both",
                         field="budget")
    field = "max_cost" if has_cap else "budget"
    if not (has_cap or has_alias):
        return None
    if has_alias and "budget" not in _warned:
        _warned.add("budget")
        log.warning("a client sent 'budget' to a batch route: it is the deprecated alias of "
                    "'max_cost' (accepted for one release)")
    value = document[field]
    if value is None and not required:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or \
            not math.isfinite(value) or value < 0:
        raise item_error("must be a finite number >= 0", field=field)
    return float(value)


def selection(layout, document: dict) -> tuple[list[int] | None, float | None]:
    """``(computed group ids or None, cost cap or None)`` of a ``/predict`` body."""
    if "computed_groups" in document and ("max_cost" in document or "budget" in document):
        field = "max_cost" if "max_cost" in document else "budget"
        raise item_error(f"give computed_groups or {field}, not both", field=field)
    cap = cost_cap(document, required=True)
    has_groups = "computed_groups" in document
    computed = layout.group_ids(document["computed_groups"]) if has_groups else None
    return computed, cap


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
