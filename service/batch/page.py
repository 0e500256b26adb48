"""Self-contained HTML pages: the anytime curve of a batch model's served version (inline
SVG drawn here, no script, nothing fetched) and the list of models."""

from __future__ import annotations

import html
import math
import time
from typing import Any

_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; max-width: 980px; }
h1 { font-size: 1.4em; } table { border-collapse: collapse; margin-top: 1em; }
td, th { border-bottom: 1px solid #ddd; padding: 4px 10px; text-align: right; }
th { background: #f4f4f4; } td.name, th.name { text-align: left; }
.muted { color: #777; } svg text { font: 12px system-ui, sans-serif; }
"""


def _figures(family: str, task: str, row: dict[str, Any]) -> tuple[str, float | None,
                                                                      float | None]:
    """(label, train value, validation value) of one prefix."""
    if family == "anytime" or (family == "gbfs" and task == "regression"):
        return ("explained variance", row.get("train_explained_variance"),
                row.get("validation_explained_variance"))
    if family == "gbfs":
        train, validation = row.get("train_error"), row.get("validation_error")
        return ("accuracy", None if train is None else 1.0 - train,
                None if validation is None else 1.0 - validation)
    return ("validation RMSE", None, row.get("validation_rmse"))


def _step_path(points: list[tuple[float, float]], x, y, x_end: float) -> str:
    """SVG path of the step function through ``points`` (cost, value), to ``x_end``."""
    parts = []
    for k, (cost, value) in enumerate(points):
        nxt = points[k + 1][0] if k + 1 < len(points) else x_end
        parts.append(f"{'M' if k == 0 else 'L'}{x(cost):.1f},{y(value):.1f}")
        parts.append(f"L{x(nxt):.1f},{y(value):.1f}")
    return " ".join(parts)


def curve_svg(sequence: dict[str, Any], family: str, task: str) -> str:
    """The anytime curve: figure against cumulative cost, train and validation, with a
    marker at every prefix's budget point."""
    rows = sequence["prefixes"]
    label = _figures(family, task, rows[0])[0]
    series = {"train": [], "validation": []}
    for row in rows:
        _, train, validation = _figures(family, task, row)
        if train is not None and math.isfinite(train):
            series["train"].append((row["cumulative_cost"], train))
        if validation is not None and math.isfinite(validation):
            series["validation"].append((row["cumulative_cost"], validation))
    values = [v for points in series.values() for _, v in points] or [0.0, 1.0]
    low, high = min(values + [0.0]), max(values)
    high = high if high > low else low + 1.0
    total = max(rows[-1]["cumulative_cost"], 1e-12)
    width, height, left, bottom, top, right = 760, 360, 70, 50, 20, 20
    x_end = total * 1.05

    def x(cost: float) -> float:
        return left + (width - left - right) * cost / x_end

    def y(value: float) -> float:
        return top + (height - top - bottom) * (high - value) / (high - low)

    out = [f'<svg id="curve" xmlns="http://www.w3.org/2000/svg" width="{width}" '
           f'height="{height}" role="img" aria-label="anytime curve">',
           f'<line x1="{left}" y1="{height - bottom}" x2="{width - right}" '
           f'y2="{height - bottom}" stroke="#444"/>',
           f'<line x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}" stroke="#444"/>']
    for k in range(6):
        value = low + (high - low) * k / 5
        out.append(f'<text x="{left - 8}" y="{y(value) + 4:.1f}" text-anchor="end">'
                   f'{value:.3g}</text>')
        cost = x_end * k / 5
        out.append(f'<text x="{x(cost):.1f}" y="{height - bottom + 18}" '
                   f'text-anchor="middle">{cost:.3g}</text>')
    out.append(f'<text x="{(left + width) / 2}" y="{height - 8}" text-anchor="middle">'
               'cumulative cost</text>')
    out.append(f'<text x="16" y="{(top + height - bottom) / 2}" text-anchor="middle" '
               f'transform="rotate(-90 16 {(top + height - bottom) / 2})">'
               f'{html.escape(label)}</text>')
    colors = {"train": "#1f77b4", "validation": "#d62728"}
    for k, (name, points) in enumerate(series.items()):
        if not points:
            continue
        out.append(f'<path class="series {name}" d="{_step_path(points, x, y, x_end)}" '
                   f'fill="none" stroke="{colors[name]}" stroke-width="2"/>')
        for cost, value in points:
            out.append(f'<circle class="point {name}" cx="{x(cost):.1f}" cy="{y(value):.1f}" '
                       f'r="4" fill="{colors[name]}"/>')
        out.append(f'<text x="{width - right - 100}" y="{top + 16 + 16 * k}" '
                   f'fill="{colors[name]}">{name}</text>')
    out.append("</svg>")
    return "\n".join(out)


def sequence_page(model: str, family: str, task: str, sequence: dict[str, Any]) -> str:
    created = sequence.get("created_at")
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(created)) if created else "?"
    label = _figures(family, task, sequence["prefixes"][0])[0]
    rows = []
    for row in sequence["prefixes"]:
        _, train, validation = _figures(family, task, row)
        cells = [str(row["groups"]), html.escape(row.get("name", "(none)")),
                 f"{row.get('cost', 0.0):.4g}", f"{row['cumulative_cost']:.4g}",
                 "" if train is None else f"{train:.4f}",
                 "" if validation is None else f"{validation:.4f}"]
        rows.append("<tr>" + "".join(
            f'<td{" class=name" if k == 1 else ""}>{c}</td>' for k, c in enumerate(cells))
            + "</tr>")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,">
<title>{html.escape(model)}: anytime curve</title>
<style>{_STYLE}</style></head><body>
<p><a href="/ui">all models</a></p>
<h1>{html.escape(model)} <span class="muted">({html.escape(sequence.get('algorithm') or '')},
version {sequence['version']}, trained {when})</span></h1>
{curve_svg(sequence, family, task)}
<table id="sequence"><tr><th>#</th><th class="name">group added</th><th>cost</th>
<th>cumulative cost</th><th>train {html.escape(label)}</th>
<th>validation {html.escape(label)}</th></tr>
{"".join(rows)}
</table></body></html>
"""


def models_page(models: list[dict[str, Any]]) -> str:
    rows = []
    for info in models:
        name = html.escape(info["name"])
        batch = "family" in info
        link = f'<a href="/v1/models/{name}/sequence.html">curve</a>' \
            if batch and info.get("version") else ""
        version = info.get("version") if batch else "online"
        applied = info.get("examples_applied", 0)
        rows.append(f"<tr><td class=name>{name}</td><td class=name>"
                    f"{html.escape(info['algorithm'])}</td><td>{version}</td><td>{applied}"
                    f"</td><td class=name>{link}</td></tr>")
    body = "".join(rows) or '<tr><td class=name colspan="5">no models yet</td></tr>'
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,">
<title>featurebudget models</title>
<style>{_STYLE}</style></head><body><h1>featurebudget models</h1>
<table id="models"><tr><th class="name">model</th><th class="name">algorithm</th>
<th>version</th><th>examples applied</th><th class="name"></th></tr>{body}</table>
</body></html>
"""
