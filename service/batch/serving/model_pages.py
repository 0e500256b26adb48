"""The pages around the sequence page (same style and policy, no script): ``/ui``, every
model with what it has (an online learner: examples seen, features kept, progressive
accuracy, last update; a batch model: the version it serves, when it was trained, a link to
its curve), and the page a model's curve link answers with when there is no curve to show
(no version yet, an online model, an unknown name)."""

from __future__ import annotations

import html
import time
from typing import Any

from service.batch.serving.page import _STYLE, DASH, cell
from service.batch.serving.policy_page import ui_cell

_HEAD = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,">
<title>{title}</title>
<style>{style}</style></head><body>"""


def when(timestamp: Any) -> str:
    """A wall-clock time as ``YYYY-MM-DD HH:MM:SS`` UTC; a dash for none (or 0). O(1)."""
    if isinstance(timestamp, bool) or not isinstance(timestamp, int | float) or \
            not timestamp > 0:
        return DASH
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(timestamp))


def _kept(info: dict[str, Any]) -> str:
    """An online learner's nonzero weights, of its budget when it has one."""
    kept = info.get("n_selected")
    if kept is None:
        return DASH
    budget = info.get("budget")
    return f"{kept:,} of {budget:,}" if isinstance(budget, int) else f"{kept:,}"


def _row(info: dict[str, Any]) -> str:
    name = html.escape(str(info["name"]))
    if "family" in info:  # a batch model
        kind = ", ".join(cell(v) for v in (info.get("family"), info.get("task")) if v)
        version = info.get("version")
        link = f'<a href="/v1/models/{name}/sequence.html">' + \
            ("curve" if version is not None else "no version yet") + "</a>"
        figures = (cell(version), cell(info.get("examples_applied")), DASH, DASH,
                   ui_cell(info), when(info.get("version_created_at")))
    else:
        kind, link = "online", ""
        accuracy = info.get("progressive_accuracy")
        figures = (DASH, cell(info.get("examples_applied")), _kept(info),
                   DASH if accuracy is None else f"{accuracy:.4f}", DASH,
                   when(info.get("applied_at")))
    cells = "".join(f"<td>{text}</td>" for text in figures)
    return (f'<tr><td class="name">{name}</td><td class="name">{cell(info.get("algorithm"))}'
            f'</td><td class="name">{kind}</td>{cells}<td class="name">{link}</td></tr>')


def models_page(models: list[dict[str, Any]]) -> str:
    """``/ui``: one row per model (``describe(features=False)`` of each), a note on what
    the columns mean. O(models)."""
    body = "".join(_row(info) for info in models) or \
        '<tr><td class="name" colspan="10">no models yet</td></tr>'
    return f"""{_HEAD.format(title="featurebudget models", style=_STYLE)}
<h1>featurebudget models</h1>
<div class="wide"><table id="models"><tr><th class="name">model</th>
<th class="name">algorithm</th><th class="name">kind</th><th>version</th>
<th>examples applied</th><th>features kept</th><th>progressive accuracy</th>
<th>next group per example</th><th>last update (UTC)</th><th class="name"></th></tr>{body}
</table></div>
<dl class="how" id="how-to-read"><dt>Online models</dt><dd>learn every example as it is
applied: features kept are the nonzero weights (of the budget, where there is one),
progressive accuracy is over each example before it was learned, the last update is when
examples were last applied (or the state restored).</dd>
<dt>Batch models</dt><dd>answer from a trained version: the last update is when the served
version was trained; its curve shows what each further group of features buys.</dd>
<dt>Next group per example</dt><dd>whether a batch model's <code>/next</code> with examples
picks each example's next group from the values it has computed (per-example) or tells every
example with the same groups the same one (per-set); the link shows what it does on held-out
rows (opening it starts computing that).</dd></dl>
</body></html>
"""


def notice_page(model: str, detail: str, status: int) -> str:
    """The answer of a model's curve link when there is no curve to show: the service's
    reason (``detail``, e.g. the first retrain is queued, or how to start it) as a page.
    O(len(detail))."""
    name = html.escape(model)
    return f"""{_HEAD.format(title=f"{name}: no curve yet", style=_STYLE)}
<p><a href="/ui">all models</a></p>
<h1>{name} <span class="muted">(no curve to show: {status})</span></h1>
<p id="reason">{html.escape(detail)}</p>
<p class="how">A batch model's page shows its trained sequence and curve once a version is
published: post labelled examples (<code>POST /v1/models/{name}/examples</code> or
<code>featurebudget load FILE --model {name}</code>), start a retrain (<code>POST
/v1/models/{name}/retrain</code> or <code>featurebudget retrain {name} --wait</code>), then
reload this page.</p>
</body></html>
"""
