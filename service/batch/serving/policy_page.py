"""The sequence page's section on the per-example next-group policy (the summary of
:mod:`service.batch.serving.policy_summary`) and its one-cell line on ``/ui``. Plain HTML, no
script: a summary still being computed says so and asks for a reload. O(rates x groups).
(It imports nothing of :mod:`service.batch.serving.page`, which imports it.)"""

from __future__ import annotations

import html
import math
from typing import Any

from algorithms.acquisition.summary import MULTIPLIERS

DASH = "\u2014"  # a missing value (as on the sequence page)
SHOWN_CHOICES = 4  # per cell; the rest summed as "others"
METRIC_LABELS = {"accuracy": "accuracy", "explained_variance": "explained variance"}
UI_TEXT = {"per-example": "per-example", "per-set": "per-set (values did not help)",
           "building": "being computed", "not started": "not computed yet",
           "none": "per-set only"}


def _number(value: Any, digits: str = ".3g") -> str:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return format(value, digits)
    return DASH


def choices_text(entries: list[dict[str, Any]]) -> str:
    """``"block_2 36 %, block_1 33 %, stops 31 %"``: the most chosen first, at most
    :data:`SHOWN_CHOICES` named, the rest as "others"."""
    parts = []
    for entry in entries[:SHOWN_CHOICES]:
        name = "stops" if entry["name"] is None else html.escape(str(entry["name"]))
        parts.append(f"{name} {100 * entry['share']:.0f}\u00a0%")
    rest = sum(e["share"] for e in entries[SHOWN_CHOICES:])
    if rest > 0:
        parts.append(f"others {100 * rest:.0f}\u00a0%")
    return ", ".join(parts) or DASH


def _verdict(summary: dict[str, Any]) -> str:
    gate = summary.get("gate") or {}
    diff, se = gate.get("difference"), gate.get("stderr")
    figure = f" ({_number(diff, '+.4f')} \u00b1 {_number(se, '.4f')} {summary['loss']} " \
        "per row against the per-set rule)" if diff is not None else ""
    if summary["policy"] == "per-example":
        return ("<strong>Per-example:</strong> on held-out rows, choosing from the values an "
                f"example has computed lowered the loss{figure}, so each example is told its "
                "own next group.")
    return ("<strong>Per-set:</strong> on held-out rows, reading the values did not lower the "
            f"loss enough{figure}, so every example that computed the same groups is told "
            "the same next group (the trained order).")


def _table(summary: dict[str, Any]) -> str:
    metric = METRIC_LABELS.get(summary.get("metric") or "")
    head = ["exchange rate \u03bb", "mean cost", "mean groups",
            *([f"held-out {metric}"] if metric else []), f"held-out {summary['loss']}",
            "first choice", "second choice"]
    left = {"first choice", "second choice"}
    cells = "".join(f'<th{" class=name" if h in left else ""}>{html.escape(h)}</th>'
                    for h in head)
    rows = []
    for entry in summary["exchange_rates"]:
        rate = entry["exchange_rate"]
        values = [_number(rate) if rate is not None else "none (every group)",
                  _number(entry["mean_cost"]), _number(entry["mean_groups"], ".2f"),
                  *([_number(entry["metric"], ".4f")] if metric else []),
                  _number(entry["loss"], ".4f")]
        row = "".join(f"<td>{v}</td>" for v in values)
        row += f'<td class="name">{choices_text(entry["first_choice"])}</td>'
        row += f'<td class="name">{choices_text(entry["second_choice"])}</td>'
        rows.append(f"<tr>{row}</tr>")
    return f'<table id="acquisition-table"><tr>{cells}</tr>\n{"".join(rows)}\n</table>'


def _rates_note(summary: dict[str, Any]) -> str:
    unit = summary.get("unit_rate")
    if unit is None:
        return ""
    times = ", ".join(f"{m:g}" for m in MULTIPLIERS[:-1]) + f" and {MULTIPLIERS[-1]:g}"
    return (f" The rates are {times} times {_number(unit)}, the held-out loss that "
            "computing every group buys per unit of cost.")


def policy_section(model: str, summary: dict[str, Any] | None) -> str:
    """The section (empty without a summary, e.g. a candidate's probe)."""
    if summary is None:
        return ""
    name = html.escape(model)
    state = summary.get("state")
    title = '<h2 id="acquisition">Which group next, for each example</h2>'
    if state == "none":
        return (f'{title}\n<p class="how" id="acquisition-state" data-state="none">No '
                f"per-example policy: {html.escape(str(summary.get('reason')))}.</p>")
    if state != "ready":
        return (f'{title}\n<p class="how" id="acquisition-state" data-state="building">The '
                "per-example policy of this version and what it does on held-out rows are "
                "being computed (seconds to minutes with thousands of held-out rows); reload "
                "this page to see them. Until then <code>POST "
                f"/v1/models/{name}/next</code> answers examples with the per-set rule.</p>")
    explain = (f"Each of {summary['rows']} held-out rows starts with no group computed and "
               f"asks <code>POST /v1/models/{name}/next</code> (its values as "
               "<code>examples</code>, an <code>exchange_rate</code> \u03bb: the loss a unit "
               "of cost must buy) for its next group until the answer is to stop; a row of "
               "the table is one \u03bb: the mean cost spent, the held-out figures at the "
               "stop and how often each group was chosen first and second. The first "
               "choice knows no value yet, so it is one group for all the rows of a half; "
               "the second reads the first group's values. Neighbours come from the other "
               f"half of the {summary['window_rows']} held-out rows, never from the row "
               "itself." + _rates_note(summary))
    return (f'{title}\n<p class="how" id="acquisition-state" data-state="ready">'
            f"{_verdict(summary)}</p>\n<p class=\"how\" id=\"acquisition-how\">{explain}</p>\n"
            f'<div class="wide">{_table(summary)}</div>')


def ui_cell(info: dict[str, Any]) -> str:
    """``/ui``'s cell for a batch model: the policy's kind or state, linked to the page's
    section (the reason as the link's title where it has none). O(1)."""
    summary = info.get("acquisition")
    if not isinstance(summary, dict):
        return DASH
    state = summary.get("state")
    key = summary.get("policy") if state == "ready" else state
    text = UI_TEXT.get(key, DASH)
    reason = summary.get("reason")
    title = f' title="{html.escape(str(reason))}"' if reason else ""
    name = html.escape(str(info["name"]))
    return f'<a href="/v1/models/{name}/sequence.html#acquisition"{title}>{text}</a>'


__all__ = ["choices_text", "policy_section", "ui_cell"]
