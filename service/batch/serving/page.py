"""Self-contained HTML pages: the curve of a batch model's served version (inline SVG drawn
here, no script, nothing fetched) with its sequence as a table and a legend (the list of
models: :mod:`service.batch.serving.model_pages`).

The sequence rows (``Artifact.sequence()``) carry, besides ``groups``, ``name``, ``cost`` and
``cumulative_cost``, figures named ``[<half>_]<part>_<metric>``: ``half`` is ``anytime`` or
``gbfs`` (the two halves of an ``auto`` model), ``part`` is ``train`` or ``validation`` and
``metric`` is ``explained_variance``, ``rmse``, ``error`` or ``log_loss``; plus ``trees``
(gbfs) and ``answered_by`` (auto). The table lists every figure the rows have; the plot
shows one metric (error for classification when the rows have it, explained variance
otherwise, RMSE for nvsd) against cumulative cost, or against the number of groups when
every group is free.
"""

from __future__ import annotations

import base64
import hashlib
import html
import math
import time
from dataclasses import dataclass
from typing import Any

from service.batch.families import FAMILIES
from service.batch.serving.policy_page import policy_section

DASH = "\u2014"  # what a missing value shows as, never "None"

_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; max-width: 980px; }
h1 { font-size: 1.4em; } table { border-collapse: collapse; margin-top: 1em; }
td, th { border-bottom: 1px solid #ddd; padding: 4px 10px; text-align: right; }
th { background: #f4f4f4; vertical-align: bottom; } th.group { text-align: center; }
th.group, th.metric { white-space: nowrap; }
td.name, th.name { text-align: left; }
.muted { color: #777; } svg text { font: 12px system-ui, sans-serif; }
#curve { max-width: 100%; height: auto; } .wide { overflow-x: auto; }
.how { color: #444; max-width: 760px; } .how dt { font-weight: 600; }
.how dd { margin: 0 0 0.4em 1.5em; }
"""

# the halves of a model that answers each set with one of two (auto): colour and dash
_HALF_STYLE = {half: style for adapter in FAMILIES.values()
               for half, style in adapter.halves.items()}
HALVES = tuple(_HALF_STYLE)
PARTS = ("train", "validation")
METRICS = {"explained_variance": "explained variance", "rmse": "RMSE", "error": "error",
           "log_loss": "log-loss"}
_FIXED = ("groups", "name", "cost", "cumulative_cost", "splits")
_EXTRA = {"trees": "trees used", "splits_on_groups": "splits on these groups",
          "answered_by": "answered by"}
_VARYING = {"trees"}  # shown only when they differ between rows (else the legend says it)
_LOWER_BETTER = {"rmse", "error", "log_loss"}
_HALF_LABEL = {None: "", **{half: f"{half} half" for half in HALVES}}
_HALF_COLOR = {half: color for half, (color, _) in _HALF_STYLE.items()}
# the text of a half (auto's "answered by"): a class, not a style attribute (the policy
# below admits no inline style but the <style> element)
_STYLE += "".join(f".half-{half} {{ color: {color}; }}\n"
                  for half, color in _HALF_COLOR.items())
# what the pages may load: nothing but their own <style> element (by its hash) and the
# empty data: icon; no script, no frame, no form, no <base>. O(len(_STYLE)) once.
_STYLE_HASH = base64.b64encode(hashlib.sha256(_STYLE.encode()).digest()).decode()
CONTENT_SECURITY_POLICY = (f"default-src 'none'; style-src 'sha256-{_STYLE_HASH}'; "
                           "img-src data:; base-uri 'none'; form-action 'none'; "
                           "frame-ancestors 'none'")

# plot geometry (SVG user units)
WIDTH, LEFT, RIGHT, TOP, PLOT_HEIGHT = 760, 70, 20, 20, 290
LEGEND_GAP, LEGEND_ROW, CHAR_WIDTH = 62, 20, 7.2


@dataclass(frozen=True)
class Figure:
    """One figure key of the sequence rows, split into its parts."""

    key: str
    half: str | None
    part: str
    metric: str


@dataclass(frozen=True)
class Series:
    key: str
    name: str  # CSS class of its path and markers
    label: str  # legend text
    color: str
    dash: str | None
    width: float
    opacity: float = 1.0


def parse_figure(key: str) -> Figure | None:
    """``[half_]part_metric`` -> Figure; None for any other key."""
    half, rest = None, key
    for candidate in HALVES:
        if key.startswith(candidate + "_"):
            half, rest = candidate, key[len(candidate) + 1:]
            break
    for part in PARTS:
        if rest.startswith(part + "_") and len(rest) > len(part) + 1:
            return Figure(key, half, part, rest[len(part) + 1:])
    return None


def header(*parts: str) -> str:
    """A column header from its parts, every word said once ("validation" + "validation
    RMSE" -> "validation RMSE")."""
    words: list[str] = []
    for part in parts:
        for word in part.replace("_", " ").split():
            if word.lower() not in (w.lower() for w in words):
                words.append(word)
    return " ".join(words)


def metric_label(metric: str) -> str:
    return METRICS.get(metric, metric.replace("_", " "))


def _present(rows: list[dict[str, Any]], key: str) -> bool:
    return any(row.get(key) is not None for row in rows)


def _figures(rows: list[dict[str, Any]]) -> list[Figure]:
    """Every figure some row has a value for, first-seen order."""
    seen: dict[str, Figure] = {}
    for row in rows:
        for key, value in row.items():
            if key not in seen and value is not None:
                figure = parse_figure(key)
                if figure is not None:
                    seen[key] = figure
    return list(seen.values())


def plotted_metric(task: str, figures: list[Figure]) -> str | None:
    """Error for classification (when the rows have it), else explained variance, else
    RMSE (nvsd), else any figure the rows have."""
    metrics = [f.metric for f in figures]
    preference = ("error", "explained_variance", "rmse") if task == "classification" \
        else ("explained_variance", "rmse", "error")
    for metric in preference:
        if metric in metrics:
            return metric
    return metrics[0] if metrics else None


def _metric_order(plotted: str | None) -> list[str]:
    order = list(METRICS)
    if plotted in order:
        order.remove(plotted)
        order.insert(0, plotted)
    return order


def _sort_key(figure: Figure, order: list[str]) -> tuple:
    metric = order.index(figure.metric) if figure.metric in order else len(order)
    return ((None, *HALVES).index(figure.half), PARTS.index(figure.part), metric,
            figure.metric)


def _series(figures: list[Figure], plotted: str | None) -> list[Series]:
    """The plotted curves, drawn in this order (the combined curve of an auto model first,
    as a wide pale band, so that both halves' dashed curves stay visible on it)."""
    chosen = sorted((f for f in figures if f.metric == plotted),
                    key=lambda f: _sort_key(f, [plotted]))
    halves = any(f.half for f in chosen)
    out = []
    for f in chosen:
        if f.half is None and f.part == "train":
            out.append(Series(f.key, "train", "train", "#1f77b4", None, 2))
        elif f.half is None and halves:
            out.append(Series(f.key, "validation combined", "combined (answering half)",
                              "#d62728", None, 8, 0.35))
        elif f.half is None:
            out.append(Series(f.key, "validation", "validation", "#d62728", None, 2))
        else:
            color = _HALF_COLOR.get(f.half, "#ff7f0e")
            dash = _HALF_STYLE[f.half][1]
            label = header(_HALF_LABEL[f.half], f.part) if f.part == "train" \
                else _HALF_LABEL[f.half]
            out.append(Series(f.key, f"{f.half}-{f.part}", label, color, dash, 2.5))
    return out


def nice_step(span: float, target: int = 5, minimum: float = 0.0) -> float:
    """The smallest step of the form {1, 2, 2.5, 5} x 10^k that cuts ``span`` into at most
    about ``target`` intervals (and is at least ``minimum``)."""
    raw = max(span / target, minimum, 1e-300)
    magnitude = 10.0 ** math.floor(math.log10(raw))
    for m in (1.0, 2.0, 2.5, 5.0, 10.0):
        if m * magnitude >= raw * (1 - 1e-9):
            return max(m * magnitude, minimum)
    return 10 * magnitude  # not reached


def nice_ticks(low: float, high: float, target: int = 5, minimum: float = 0.0
               ) -> tuple[list[float], float]:
    """(ticks from a multiple of the step <= low to one >= high, step)."""
    if not high > low:
        high = low + 1.0
    step = nice_step(high - low, target, minimum)
    first = math.floor(low / step + 1e-9)
    last = math.ceil(high / step - 1e-9)
    ticks = [k * step for k in range(first, last + 1)]
    return ticks, step


def tick_label(value: float, step: float) -> str:
    """``value`` with the decimals ``step`` needs (0.25 steps: two; 0.2: one)."""
    exponent = math.floor(math.log10(step) + 1e-9)
    decimals = max(0, -exponent)
    if exponent <= 0 and round(step / 10.0 ** exponent, 6) == 2.5:
        decimals += 1
    text = f"{value:.{decimals}f}"
    if abs(value) >= 1e6 and decimals == 0:
        text = f"{value:,.0f}"
    return "0" if float(text.replace(",", "")) == 0 else text


def _step_path(points: list[tuple[float, float]], x, y, x_end: float) -> str:
    """SVG path of the step function through ``points`` (x, value), to ``x_end``."""
    parts = []
    for k, (at, value) in enumerate(points):
        nxt = points[k + 1][0] if k + 1 < len(points) else x_end
        parts.append(f"{'M' if k == 0 else 'L'}{x(at):.1f},{y(value):.1f}")
        parts.append(f"L{x(nxt):.1f},{y(value):.1f}")
    return " ".join(parts)


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and \
        math.isfinite(value)


def _legend(series: list[Series], top: float) -> tuple[list[str], float]:
    """The legend below the axes, entries left to right, wrapping: (SVG, its bottom)."""
    entries, x, row = [], LEFT + 10, 0
    for s in series:
        width = 34 + CHAR_WIDTH * len(s.label)
        if x + width > WIDTH - RIGHT - 10 and x > LEFT + 10:
            x, row = LEFT + 10, row + 1
        entries.append((s, x, row))
        x += width + 18
    rows = row + 1 if series else 0
    bottom = top + rows * LEGEND_ROW + 8
    widest = max((ex + 34 + CHAR_WIDTH * len(s.label) for s, ex, _ in entries),
                 default=LEFT + 10)
    out = [f'<g id="legend"><rect class="legend" x="{LEFT}" y="{top}" '
           f'width="{widest - LEFT + 10:.1f}" height="{bottom - top}" fill="#fff" '
           f'stroke="#ccc"/>']
    for s, ex, r in entries:
        cy = top + 4 + LEGEND_ROW * r + LEGEND_ROW / 2
        dash = f' stroke-dasharray="{s.dash}"' if s.dash else ""
        out.append(f'<line class="key {s.name}" x1="{ex:.1f}" y1="{cy:.1f}" '
                   f'x2="{ex + 28:.1f}" y2="{cy:.1f}" stroke="{s.color}" '
                   f'stroke-width="{min(s.width, 6)}" stroke-opacity="{s.opacity}"{dash}/>')
        out.append(f'<text class="legend-label" x="{ex + 34:.1f}" y="{cy + 4:.1f}">'
                   f'{html.escape(s.label)}</text>')
    out.append("</g>")
    return out, bottom


def curve_svg(sequence: dict[str, Any], family: str, task: str) -> str:
    """The curve: the plotted figure of every series against cumulative cost (against the
    number of groups when every group is free), a marker at every prefix, nice ticks on
    both axes and the legend below the axes, outside the plot area."""
    rows = sequence["prefixes"]
    figures = _figures(rows)
    plotted = plotted_metric(task, figures)
    series = _series(figures, plotted)
    total = max((float(r.get("cumulative_cost") or 0.0) for r in rows), default=0.0)
    by_groups = not total > 0 or not math.isfinite(total)
    at_key = "groups" if by_groups else "cumulative_cost"
    points = {s.key: [(float(row[at_key]), float(row[s.key])) for row in rows
                      if _finite(row.get(s.key))] for s in series}

    values = [v for pts in points.values() for _, v in pts]
    low, high = min(values + [0.0]), max(values + [0.0])
    y_ticks, y_step = nice_ticks(low, high)
    x_last = float(rows[-1]["groups"]) if by_groups else total
    x_ticks, x_step = nice_ticks(0.0, max(x_last, 1.0 if by_groups else 0.0),
                                 minimum=1.0 if by_groups else 0.0)
    # the domain runs a little past the last prefix, so that its step shows
    x_max, y_min, y_max = max(x_ticks[-1], x_last * 1.06), y_ticks[0], y_ticks[-1]
    x_end = min(x_last + 0.03 * x_max, x_max)
    bottom = TOP + PLOT_HEIGHT
    plot_width = WIDTH - LEFT - RIGHT

    def x(at: float) -> float:
        return LEFT + plot_width * at / x_max

    def y(value: float) -> float:
        return TOP + PLOT_HEIGHT * (y_max - value) / (y_max - y_min)

    legend, legend_bottom = _legend(series, bottom + LEGEND_GAP)
    height = int(math.ceil(legend_bottom + 8))
    y_label = metric_label(plotted) if plotted else "no figures"
    if series and all(parse_figure(s.key).part == "validation" for s in series):
        y_label = header("validation", y_label)
    x_label = "number of groups (every group costs 0)" if by_groups else "cumulative cost"
    out = [f'<svg id="curve" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" '
           f'height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" '
           f'aria-label="{html.escape(y_label)} against {html.escape(x_label)}">',
           f'<rect class="plot-area" x="{LEFT}" y="{TOP}" width="{plot_width}" '
           f'height="{PLOT_HEIGHT}" fill="#fcfcfc"/>']
    for value in y_ticks:
        out.append(f'<line class="grid" x1="{LEFT}" y1="{y(value):.1f}" x2="{WIDTH - RIGHT}" '
                   f'y2="{y(value):.1f}" stroke="#e6e6e6"/>')
        out.append(f'<text class="tick y" x="{LEFT - 8}" y="{y(value) + 4:.1f}" '
                   f'text-anchor="end">{tick_label(value, y_step)}</text>')
    for at in x_ticks:
        out.append(f'<line class="tick-mark" x1="{x(at):.1f}" y1="{bottom}" x2="{x(at):.1f}" '
                   f'y2="{bottom + 5}" stroke="#444"/>')
        out.append(f'<text class="tick x" x="{x(at):.1f}" y="{bottom + 18}" '
                   f'text-anchor="middle">{tick_label(at, x_step)}</text>')
    if y_min < 0 < y_max:
        out.append(f'<line class="zero" x1="{LEFT}" y1="{y(0):.1f}" x2="{WIDTH - RIGHT}" '
                   f'y2="{y(0):.1f}" stroke="#bbb"/>')
    out.append(f'<line class="axis" x1="{LEFT}" y1="{bottom}" x2="{WIDTH - RIGHT}" '
               f'y2="{bottom}" stroke="#444"/>')
    out.append(f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{bottom}" '
               'stroke="#444"/>')
    out.append(f'<text class="axis-label x" x="{LEFT + plot_width / 2}" y="{bottom + 40}" '
               f'text-anchor="middle">{html.escape(x_label)}</text>')
    middle = TOP + PLOT_HEIGHT / 2
    out.append(f'<text class="axis-label y" x="16" y="{middle}" text-anchor="middle" '
               f'transform="rotate(-90 16 {middle})">{html.escape(y_label)}</text>')
    out.append('<g class="curves">')
    for s in series:
        pts = points[s.key]
        if not pts:
            continue
        dash = f' stroke-dasharray="{s.dash}"' if s.dash else ""
        out.append(f'<path class="series {s.name}" d="{_step_path(pts, x, y, x_end)}" '
                   f'fill="none" stroke="{s.color}" stroke-width="{s.width}" '
                   f'stroke-opacity="{s.opacity}" stroke-linejoin="round"{dash}/>')
    for s in series:  # markers above every curve
        radius = 5 if s.opacity < 1 else 4 if s.dash is None else 3
        for at, value in points[s.key]:
            out.append(f'<circle class="point {s.name}" cx="{x(at):.1f}" cy="{y(value):.1f}" '
                       f'r="{radius}" fill="{s.color}"/>')
    out.append("</g>")
    out.extend(legend)
    out.append("</svg>")
    return "\n".join(out)


def cell(value: Any) -> str:
    """A table cell's text: a dash for a missing value, never "None"."""
    if value is None:
        return DASH
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "\u221e" if value > 0 else "\u2212\u221e"
        return f"{value:.4f}" if abs(value) < 1e5 else f"{value:.4g}"
    return html.escape(str(value))


def _columns(rows: list[dict[str, Any]], task: str) -> list[tuple[str, str, str, bool]]:
    """(key, group header, header, left-aligned) of every column, in order. A figure's
    group header names its part (train, validation), after the half of an auto model (or
    "combined"); its own header names the metric."""
    figures = _figures(rows)
    order = _metric_order(plotted_metric(task, figures))
    halves = any(f.half for f in figures)
    columns = [("groups", "", "#", False), ("name", "", "group added", True),
               ("cost", "", "cost", False), ("cumulative_cost", "", "cumulative cost", False)]
    columns += [(key, "", label, False) for key, label in _EXTRA.items()
                if _present(rows, key) and (key not in _VARYING or
                                            len({row.get(key) for row in rows}) > 1)]
    for f in sorted(figures, key=lambda f: _sort_key(f, order)):
        half = _HALF_LABEL[f.half] if f.half else ("combined" if halves else "")
        group = header(half, f.part)
        said = set(group.lower().split())
        label = " ".join(w for w in metric_label(f.metric).split() if w.lower() not in said)
        columns.append((f.key, group, header(label or metric_label(f.metric)), False))
    known = {column[0] for column in columns} | set(_FIXED) | set(_EXTRA)
    for row in rows:  # any figure of a newer kind: listed as it is named
        for key, value in row.items():
            if key not in known and value is not None:
                known.add(key)
                columns.append((key, "", header(key), False))
    return columns


def _head(columns: list[tuple[str, str, str, bool]]) -> str:
    """The table's header rows: one, or two when some columns have a group header."""
    def th(text: str, left: bool, extra: str = "", kind: str = "") -> str:
        classes = " ".join(c for c in ("name" if left else "", kind) if c)
        return f'<th{f" class={classes!r}" if classes else ""}{extra}>' \
            f'{html.escape(text)}</th>'

    if not any(group for _, group, _, _ in columns):
        return "<tr>" + "".join(th(label, left) for _, _, label, left in columns) + "</tr>"
    top, below, k = [], [], 0
    while k < len(columns):
        _, group, label, left = columns[k]
        if not group:
            top.append(th(label, left, ' rowspan="2"'))
            k += 1
            continue
        span = 1
        while k + span < len(columns) and columns[k + span][1] == group:
            span += 1
        top.append(f'<th class="group" colspan="{span}">{html.escape(group)}</th>')
        below.extend(th(c[2], c[3], kind="metric") for c in columns[k:k + span])
        k += span
    return f'<tr>{"".join(top)}</tr><tr>{"".join(below)}</tr>'


def sequence_page(model: str, family: str, task: str, sequence: dict[str, Any], *,
                  policy: dict[str, Any] | None = None) -> str:
    """The page; ``policy``: the per-example policy's summary or state
    (:mod:`service.batch.serving.policy_summary`), shown below the sequence (none: left out)."""
    created = sequence.get("created_at")
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(created)) \
        if _finite(created) else DASH
    rows = sequence["prefixes"]
    columns = _columns(rows, task)
    body = []
    for row in rows:
        cells = []
        for key, _, _, left in columns:
            value = row.get(key)
            if key == "name":
                text = html.escape(str(value)) if value is not None else \
                    '<span class="muted">(no groups)</span>'
            elif key == "cost" and value is None:
                text = DASH
            elif key in ("cost", "cumulative_cost") and _finite(value):
                text = f"{value:.4g}"
            elif key == "answered_by" and value in _HALF_COLOR:
                text = f'<span class="half-{value}">{cell(value)}</span>'
            elif key == "splits_on_groups" and _finite(row.get("splits")) and _finite(value):
                text = f"{value} of {row['splits']}"
            else:
                text = cell(value)
            cells.append(f'<td{" class=name" if left else ""}>{text}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    head = _head(columns)
    about = ", ".join(html.escape(str(v)) for v in dict.fromkeys(
        (sequence.get("algorithm"), family, task)) if v)
    version = sequence.get("version")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,">
<title>{html.escape(model)}: sequence and curve</title>
<style>{_STYLE}</style></head><body>
<p><a href="/ui">all models</a></p>
<h1>{html.escape(model)} <span class="muted">({about}{", " if about else ""}version
{cell(version)}, trained {when})</span></h1>
{how_to_read(rows, task)}
{curve_svg(sequence, family, task)}
<div class="wide"><table id="sequence">{head}
{"".join(body)}
</table></div>{specialists_table(sequence.get("specialists"), task)}
{policy_section(model, policy)}</body></html>
"""


def how_to_read(rows: list[dict[str, Any]], task: str) -> str:
    """The page's legend: what a row, the curve and each extra column mean. O(rows)."""
    plotted = plotted_metric(task, _figures(rows))
    label = metric_label(plotted) if plotted else "figure"
    better = "lower" if plotted in _LOWER_BETTER else "higher"
    free = not any(_finite(r.get("cumulative_cost")) and r["cumulative_cost"] > 0
                   for r in rows)
    against = "their number (every group is free)" if free else "their cumulative cost"
    items = [("Rows", "the model asks for its groups in this order; row k is its answer "
                      "with the first k groups computed and the others missing."),
             ("Curve", f"{html.escape(label)} of those answers on held-out rows (validation; "
                       f"train: on training rows) against {against}; {better} is better. A "
                       "flat step: that group added little for what it costs.")]
    if _present(rows, "splits_on_groups"):
        trees = rows[-1].get("trees")
        items.append(("Splits on these groups", "of the split nodes of the trees that answer "
                      "(" + (f"all {trees} trees at every row" if _finite(trees) and
                             len({r.get("trees") for r in rows}) == 1 else "trees used") +
                      "), how many test a feature of a computed group; at the others every "
                      "example takes the learned default direction (none: one answer for "
                      "all)."))
    if _present(rows, "answered_by"):
        items.append(("Answered by", "the half (anytime: linear; gbfs: trees) that answers "
                                     "with those groups, the better on held-out rows."))
    terms = "".join(f"<dt>{term}</dt><dd>{text}</dd>" for term, text in items)
    return f'<dl class="how" id="how-to-read">{terms}</dl>'



def specialists_table(specialists: Any, task: str) -> str:
    """The sets an auto version fitted a specialist for: the set, the specialist's kind,
    whether it answers the set, and the held-out figures of it and of both halves for
    exactly that set ("" when there are none). O(specialists)."""
    if not isinstance(specialists, list) or not specialists:
        return ""
    names = ("explained_variance", "rmse") if task == "regression" else ("error", "log_loss")
    who = ("specialist", "anytime", "gbfs")
    top = ('<tr><th class="name" rowspan="2">specialist set</th><th rowspan="2">kind</th>'
           '<th rowspan="2">answers</th>' + "".join(
               f'<th class="group" colspan="{len(names)}">{w} (validation)</th>'
               for w in who) + "</tr>")
    below = "<tr>" + "".join(f'<th class="metric">{html.escape(metric_label(m))}</th>'
                             for _ in who for m in names) + "</tr>"
    rows = []
    for entry in specialists:
        if not isinstance(entry, dict):
            continue
        groups = entry.get("groups")
        label = " + ".join(str(g) for g in groups) if isinstance(groups, list) else groups
        figures = "".join(f"<td>{cell((entry.get(w) or {}).get(m))}</td>"
                          for w in who for m in names)
        rows.append(f'<tr><td class="name">{cell(label)}</td><td>{cell(entry.get("kind"))}'
                    f'</td><td>{cell(entry.get("answers"))}</td>{figures}</tr>')
    return f'\n<table id="specialists">{top}{below}\n{"".join(rows)}\n</table>'
