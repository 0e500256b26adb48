"""The sequence pages in a real headless browser (Debian's chromium), for every family: they
load without console errors, never print a Python None, plot the family's figure with nice
ticks on both axes and the legend outside the plot area, list every figure with headers
that say each word once, say how to read them, and fit a narrow window; the screenshot holds
the plotted curves. The models page shows what each kind of model has; a model with no
curve to show gets a page saying why."""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import httpx
import numpy as np
import pytest

from service.batch.serving import model_pages, page
from tests.support.batch_data import DIABETES_GROUPS, NO_POLICY, diabetes, named_examples
from tests.support.processes import embedded_server

PORTS = range(18340, 18360)  # this suite's loopback ports
ROOT = Path(__file__).resolve().parents[3]
TRAIN, VALIDATION = (0x1F, 0x77, 0xB4), (0xD6, 0x27, 0x28)  # the page's series colors
ANYTIME_HALF, GBFS_HALF = (0x7B, 0x3F, 0xB5), (0x2C, 0xA0, 0x2C)
FREE_GROUPS = [dict(group, cost=0.0) for group in DIABETES_GROUPS]
WINDOW = {"window": {"kind": "newest", "size": 300}}
TREES = {"n_estimators": 20, "max_depth": 3}

# name -> (algorithm, task, params, groups)
MODELS = {
    "d": ("cs-g-omp", "regression", {}, DIABETES_GROUPS),
    "anytime-class": ("cs-g-omp", "classification", {}, DIABETES_GROUPS),
    "gbfs-reg": ("gbfs", "regression", {**TREES, **WINDOW}, DIABETES_GROUPS),
    "gbfs-class": ("gbfs", "classification", {**TREES, **WINDOW}, DIABETES_GROUPS),
    "auto-reg": ("auto", "regression", {"gbfs_params": TREES, **WINDOW}, DIABETES_GROUPS),
    "auto-class": ("auto", "classification", {"gbfs_params": TREES, **WINDOW},
                   DIABETES_GROUPS),
    "nvsd": ("nvsd", "regression", {"window": {"kind": "reservoir", "size": 60, "seed": 7},
                                    "nus": [1e-2], "n_taus": 3}, DIABETES_GROUPS),
    "free": ("cs-g-omp", "regression", {}, FREE_GROUPS),
}
# name -> (plotted series, y axis label, headers the table must have)
EXPECTED = {
    "d": ({"train", "validation"}, "explained variance", {"explained variance"}),
    "anytime-class": ({"validation"}, "validation error",
                      {"error", "log-loss", "explained variance"}),
    "gbfs-reg": ({"train", "validation"}, "explained variance",
                 {"explained variance", "RMSE", "splits on these groups"}),
    "gbfs-class": ({"train", "validation"}, "error",
                   {"error", "log-loss", "splits on these groups"}),
    "auto-reg": ({"combined validation", "anytime-validation", "gbfs-validation"},
                 "validation explained variance",
                 {"answered by", "combined validation", "anytime half validation",
                  "gbfs half validation", "explained variance", "RMSE"}),
    "auto-class": ({"combined validation", "anytime-validation", "gbfs-validation"},
                   "validation error",
                   {"answered by", "combined validation", "anytime half validation",
                    "gbfs half validation", "error", "log-loss"}),
    "nvsd": ({"validation"}, "validation RMSE", {"validation", "RMSE"}),
    "free": ({"train", "validation"}, "explained variance", {"explained variance"}),
}


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    if os.environ.get("CI"):
        pytest.fail("CI needs chromium (.ci/run installs Debian's package)")
    pytest.skip("no chromium on this machine (apt-get install chromium)")


def browse(url: str, tmp_path: Path, *args: str, width: int = 1000, height: int = 900
           ) -> subprocess.CompletedProcess:
    command = [chromium(), "--headless", "--no-sandbox", "--disable-gpu",
               "--disable-dev-shm-usage", "--enable-logging=stderr", "--v=0",
               f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={width},{height}",
               *args, url]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def dump(url: str, tmp_path: Path) -> str:
    """The page's DOM as chromium built it; fails on any console error."""
    result = browse(url, tmp_path, "--dump-dom")
    assert result.returncode == 0, result.stderr[-2000:]
    console = [line for line in result.stderr.splitlines() if "CONSOLE" in line
               or "Uncaught" in line or "Failed to load resource" in line]
    assert not console, console
    return result.stdout


def color_pixels(png: Path, colors: dict[str, tuple[int, int, int]]) -> dict[str, int]:
    from PIL import Image

    image = np.asarray(Image.open(png).convert("RGB")).astype(int)
    out = {}
    for name, color in colors.items():
        distance = np.abs(image - np.array(color)).sum(axis=2)
        out[name] = int(np.count_nonzero(distance < 40))
    return out


def series_pixels(png: Path) -> dict[str, int]:
    return color_pixels(png, {"train": TRAIN, "validation": VALIDATION})


def svg_of(dom: str) -> ET.Element:
    """The curve's SVG from the DOM, parsed, with the namespace taken off the tags."""
    match = re.search(r'<svg id="curve".*?</svg>', dom, re.S)
    assert match, "no curve on the page"
    root = ET.fromstring(match.group(0))
    for element in root.iter():
        element.tag = element.tag.rsplit("}", 1)[-1]
    return root


def classes(element: ET.Element) -> set[str]:
    return set(element.get("class", "").split())


def box(element: ET.Element) -> tuple[float, float, float, float]:
    """(x0, y0, x1, y1) of a rect."""
    x, y = float(element.get("x")), float(element.get("y"))
    return x, y, x + float(element.get("width")), y + float(element.get("height"))


def headers(dom: str) -> list[str]:
    """Every header cell's text of the sequence table, and each figure's group header
    joined to its metric header (what the column says in all)."""
    table = re.search(r'<table id="sequence">(.*?)</table>', dom, re.S).group(1)
    rows = re.findall(r"<tr>(.*?)</tr>", table, re.S)
    cells = []
    for row in rows[:2]:
        for attributes, text in re.findall(r"<th([^>]*)>(.*?)</th>", row, re.S):
            span = re.search(r'colspan="(\d+)"', attributes)
            cells.append((re.sub(r"<[^>]+>", " ", text).split(), "group" in attributes,
                          int(span.group(1)) if span else 1))
    out = [" ".join(words) for words, _, _ in cells]
    groups = [(words, span) for words, grouped, span in cells if grouped]
    metrics = [words for words, _, _ in cells[len(cells) - sum(s for _, s in groups):]] \
        if groups else []
    k = 0
    for words, span in groups:
        for metric in metrics[k:k + span]:
            out.append(" ".join(words + metric))
        k += span
    return out


def assert_nice(labels: list[str]) -> None:
    """Tick labels: evenly spaced multiples of a {1, 2, 2.5, 5} x 10^k step, written with
    no more decimals than the step needs."""
    assert len(labels) >= 2, labels
    for label in labels:
        assert re.fullmatch(r"-?\d{1,3}(,\d{3})*(\.\d+)?|-?\d+(\.\d+)?", label), labels
    values = [float(label.replace(",", "")) for label in labels]
    steps = np.diff(values)
    step = float(steps[0])
    assert step > 0 and np.allclose(steps, step, rtol=1e-9), labels
    exponent = math.floor(math.log10(step) + 1e-9)
    mantissa = step / 10.0 ** exponent
    assert any(math.isclose(mantissa, m, rel_tol=1e-9) for m in (1, 2, 2.5, 5)), labels
    for value, label in zip(values, labels, strict=True):
        assert math.isclose(value / step, round(value / step), abs_tol=1e-9), labels
        decimals = len(label.partition(".")[2])
        assert decimals <= max(0, -exponent) + 1, labels


def check_curve(svg: ET.Element) -> dict:
    """Nice ticks on both axes; every curve inside the plot area; the legend outside it,
    below the axes and their labels. Returns what was found."""
    elements = list(svg.iter())
    texts = {axis: [e.text for e in elements if e.tag == "text" and {"tick", axis} <=
                    classes(e)] for axis in ("x", "y")}
    assert_nice(texts["x"])
    assert_nice(texts["y"])
    plot = box(next(e for e in elements if "plot-area" in classes(e)))
    legend = box(next(e for e in elements if e.tag == "rect" and "legend" in classes(e)))
    paths = [e for e in elements if e.tag == "path" and "series" in classes(e)]
    points = [e for e in elements if e.tag == "circle" and "point" in classes(e)]
    margin = 6.0  # the widest stroke / marker reaches this far past its coordinates
    for path in paths:
        numbers = [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?", path.get("d"))]
        for x, y in zip(numbers[::2], numbers[1::2], strict=True):
            assert plot[0] - 0.1 <= x <= plot[2] + 0.1 and plot[1] - 0.1 <= y <= plot[3] + 0.1
    for point in points:
        x, y = float(point.get("cx")), float(point.get("cy"))
        assert plot[0] - 0.1 <= x <= plot[2] + 0.1 and plot[1] - 0.1 <= y <= plot[3] + 0.1
    reach = (plot[0] - margin, plot[1] - margin, plot[2] + margin, plot[3] + margin)
    disjoint = legend[2] <= reach[0] or legend[0] >= reach[2] or legend[3] <= reach[1] or \
        legend[1] >= reach[3]
    assert disjoint, (legend, plot)
    labels = [float(e.get("y")) for e in elements if e.tag == "text" and
              classes(e) & {"tick", "axis-label"} and "y" not in classes(e)]
    assert legend[1] > max(labels), "the legend overlaps the axis labels"
    keys = [e for e in elements if e.tag == "line" and "key" in classes(e)]
    assert len(keys) == len(paths)
    for key in keys:
        assert legend[0] <= float(key.get("x1")) and float(key.get("x2")) <= legend[2]
        assert legend[1] <= float(key.get("y1")) <= legend[3]
    return {"paths": paths, "points": points, "texts": texts, "plot": plot,
            "axis": {e.get("class").split()[-1]: e.text for e in elements
                     if "axis-label" in classes(e)}}


@pytest.fixture(scope="module")
def served_model(tmp_path_factory):
    """A server with one trained model of every family and task (one whose groups all cost
    0), one never trained and an online learner with examples."""
    tmp_path = tmp_path_factory.mktemp("page")
    with embedded_server(tmp_path / "data", PORTS, job_poll_seconds="0.05") as url:
        X, y = diabetes()
        labels = np.where(y > np.median(y), 1.0, -1.0)
        for name, (algorithm, task, params, groups) in MODELS.items():
            body = {"name": name, "algorithm": algorithm, "groups": groups, "task": task,
                    "params": {**NO_POLICY, **params}}
            response = httpx.post(f"{url}/v1/models", json=body)
            assert response.status_code == 201, response.text
            field, target = ("label", labels) if task == "classification" else ("target", y)
            rows = named_examples(X, target, groups, 0, 442, field=field)
            response = httpx.post(f"{url}/v1/models/{name}/examples?wait=true",
                                  json={"examples": rows}, timeout=30)
            assert response.status_code == 202, response.text
            assert httpx.post(f"{url}/v1/models/{name}/retrain").status_code == 202
        body = {"name": "untrained", "algorithm": "gbfs", "groups": DIABETES_GROUPS,
                "params": NO_POLICY}
        assert httpx.post(f"{url}/v1/models", json=body).status_code == 201
        body = {"name": "online", "algorithm": "sofs", "n_features": 10, "budget": 3}
        assert httpx.post(f"{url}/v1/models", json=body).status_code == 201
        rows = [{"indices": [k % 10, (3 * k + 1) % 10], "values": [1.0, -0.5],
                 "label": 1 if k % 3 else -1} for k in range(50)]
        response = httpx.post(f"{url}/v1/models/online/examples?wait=true",
                              json={"examples": rows}, timeout=30)
        assert response.status_code == 202, response.text
        deadline = time.monotonic() + 90
        for name in MODELS:
            while httpx.get(f"{url}/v1/models/{name}").json()["version"] != 1:
                assert time.monotonic() < deadline, name
                time.sleep(0.05)
        yield url, tmp_path


def test_page_loads_without_console_errors_and_shows_the_sequence(served_model, tmp_path):
    url, _ = served_model
    dom = dump(f"{url}/v1/models/d/sequence.html", tmp_path)
    assert 'id="curve"' in dom and dom.count('class="point train"') == 5
    assert dom.count('class="point validation"') == 5
    sequence = httpx.get(f"{url}/v1/models/d/sequence").json()
    for row in sequence["prefixes"][1:]:
        assert f"<td class=\"name\">{row['name']}</td>" in dom or \
            f"<td class=name>{row['name']}</td>" in dom


@pytest.mark.parametrize("name", list(MODELS))
def test_every_family_plots_its_figure_with_nice_ticks_and_the_legend_outside(
        served_model, tmp_path, name):
    url, _ = served_model
    dom = dump(f"{url}/v1/models/{name}/sequence.html", tmp_path)
    assert "None" not in dom
    curve = check_curve(svg_of(dom))
    series, y_label, required = EXPECTED[name]
    drawn = [" ".join(sorted(classes(p) - {"series"})) for p in curve["paths"]]
    assert set(drawn) == series and len(drawn) == len(series), drawn
    assert curve["axis"]["y"] == y_label
    sequence = httpx.get(f"{url}/v1/models/{name}/sequence").json()["prefixes"]
    for path in curve["paths"]:  # a marker at every prefix with the figure
        marked = [p for p in curve["points"] if classes(p) == classes(path) - {"series"} |
                  {"point"}]
        assert len(marked) == len(sequence), path.get("class")
    said = headers(dom)
    for text in said:
        words = text.lower().split()
        assert len(words) == len(set(words)), f"doubled word in header {text!r}"
    assert required <= set(said), said
    if name == "free":  # every group is free: the x axis counts groups
        assert curve["axis"]["x"].startswith("number of groups")
        assert curve["texts"]["x"] == ["0", "1", "2", "3", "4"]
        xs = sorted({float(p.get("cx")) for p in curve["points"]})
        assert len(xs) == len(sequence) and xs[0] == curve["plot"][0]
    else:
        assert curve["axis"]["x"] == "cumulative cost"
        xs = sorted({float(p.get("cx")) for p in curve["points"]})
        assert len(xs) == len({row["cumulative_cost"] for row in sequence})
    if name.startswith("auto"):  # three curves told apart by colour and dash
        styles = {(p.get("stroke"), p.get("stroke-dasharray"), p.get("stroke-width"))
                  for p in curve["paths"]}
        assert len({s[0] for s in styles}) == 3 and len({s[1] for s in styles}) == 3
        answered = re.findall(r"<td><span[^>]*>(anytime|gbfs)</span></td>", dom)
        assert answered == [row["answered_by"] for row in sequence]


def test_the_models_page_prints_no_none(served_model, tmp_path):
    url, _ = served_model
    dom = dump(f"{url}/ui", tmp_path)
    assert "None" not in dom
    for name in MODELS:
        assert f"/v1/models/{name}/sequence.html" in dom
    untrained = re.search(r"<tr><td class=\"name\">untrained</td>(.*?)</tr>", dom).group(1)
    assert page.DASH in untrained and ">no version yet</a>" in untrained


def test_screenshot_shows_both_curves(served_model, tmp_path):
    url, _ = served_model
    shot = tmp_path / "curve.png"
    result = browse(f"{url}/v1/models/d/sequence.html", tmp_path, f"--screenshot={shot}")
    assert shot.exists(), result.stderr[-2000:]
    pixels = series_pixels(shot)
    assert pixels["train"] > 300 and pixels["validation"] > 300, pixels


def test_screenshot_of_auto_shows_both_halves(served_model, tmp_path):
    url, _ = served_model
    shot = tmp_path / "auto.png"
    result = browse(f"{url}/v1/models/auto-class/sequence.html", tmp_path,
                    f"--screenshot={shot}")
    assert shot.exists(), result.stderr[-2000:]
    pixels = color_pixels(shot, {"anytime": ANYTIME_HALF, "gbfs": GBFS_HALF})
    assert pixels["anytime"] > 200 and pixels["gbfs"] > 200, pixels


def test_an_empty_plot_fails_the_pixel_check(tmp_path):
    """The screenshot check above is not vacuous: a page without the series has none; and
    a version with no figures at all still draws its (empty) axes, without a None."""
    sequence = {"version": 1, "created_at": None, "algorithm": None,
                "prefixes": [{"groups": 0, "cumulative_cost": 0.0,
                              "train_explained_variance": None,
                              "validation_explained_variance": None}]}
    text = page.sequence_page("empty", "anytime", "regression", sequence)
    assert "None" not in text
    check_curve(svg_of(text))
    html_file = tmp_path / "empty.html"
    html_file.write_text(text)
    shot = tmp_path / "empty.png"
    browse(html_file.as_uri(), tmp_path, f"--screenshot={shot}")
    pixels = series_pixels(shot)
    assert pixels["train"] < 50 and pixels["validation"] < 50, pixels


def test_headers_say_each_word_once():
    assert page.header("validation", "validation RMSE") == "validation RMSE"
    assert page.header("gbfs half", "validation", "log_loss") == "gbfs half validation log loss"
    rows = [{"groups": 0, "cumulative_cost": 0.0, "validation_rmse": 2.0,
             "validation_validation_rmse": 1.0, "train_": 3.0}]
    for _, group, label, _ in page._columns(rows, "regression"):
        words = f"{group} {label}".lower().split()
        assert len(words) == len(set(words)), (group, label)


@pytest.mark.parametrize("low,high", [(0, 10), (0, 10.6), (-0.0044, 0.504), (0, 77),
                                      (0, 0.333333), (0, 1e-3), (0, 3e6), (-5.5, -0.2),
                                      (0.45, 0.45), (0, 123456.7)])
def test_ticks_are_nice_numbers(low, high):
    ticks, step = page.nice_ticks(low, high)
    assert ticks[0] <= low and ticks[-1] >= high and 2 <= len(ticks) <= 8
    assert_nice([page.tick_label(v, step) for v in ticks])


def cells_of(dom: str, name: str) -> list[str]:
    """The text of every cell of the models page's row of ``name``."""
    row = re.search(rf'<tr><td class="name">{name}</td>(.*?)</tr>', dom, re.S).group(1)
    return [re.sub(r"<[^>]+>", "", text) for text in re.findall(r"<td[^>]*>(.*?)</td>", row)]


def test_the_models_page_shows_what_an_online_model_has(served_model, tmp_path):
    url, _ = served_model
    dom = dump(f"{url}/ui", tmp_path)
    info = httpx.get(f"{url}/v1/models/online").json()
    kind, version, examples, kept, accuracy, policy, updated, link = \
        cells_of(dom, "online")[1:]
    assert (kind, version, policy, link) == ("online", page.DASH, page.DASH, "")
    assert int(examples) == info["examples_applied"] == 50
    assert kept == f"{info['n_selected']} of 3" and 0 < info["n_selected"] <= 3
    assert accuracy == f"{info['progressive_accuracy']:.4f}"
    assert abs(info["applied_at"] - time.time()) < 3600
    assert updated == time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(info["applied_at"]))
    d = httpx.get(f"{url}/v1/models/d").json()  # a batch model: its version and training
    assert cells_of(dom, "d")[1:3] == ["anytime, regression", "1"]
    assert cells_of(dom, "d")[-2:] == [model_pages.when(d["version_created_at"]), "curve"]
    assert 'id="how-to-read"' in dom and "features kept" in dom


@pytest.mark.parametrize("name,says", [
    ("d", ["explained variance of those answers", "higher is better", "cumulative cost"]),
    ("gbfs-reg", ["Splits on these groups", "all 18 trees at every row"]),
    ("gbfs-class", ["error of those answers", "lower is better", "Splits on these groups"]),
    ("auto-class", ["Answered by", "lower is better"]),
    ("free", ["their number (every group is free)"]),
])
def test_the_sequence_page_says_how_to_read_it(served_model, tmp_path, name, says):
    url, _ = served_model
    dom = dump(f"{url}/v1/models/{name}/sequence.html", tmp_path)
    legend = re.search(r'<dl class="how" id="how-to-read">(.*?)</dl>', dom, re.S).group(1)
    text = " ".join(re.sub(r"<[^>]+>", " ", legend).split())
    assert text.startswith("Rows the model asks for its groups in this order")
    for phrase in says:
        assert phrase in text, (phrase, text)


@pytest.mark.parametrize("name", ["gbfs-reg", "gbfs-class"])
def test_gbfs_rows_say_how_many_splits_read_their_groups(served_model, tmp_path, name):
    """Every prefix's count of the answering trees' splits on its groups: none with no
    group computed, growing with the prefix to every split with all groups; the page shows
    it as "k of N" and leaves the trees used out when they are the same at every row."""
    url, _ = served_model
    rows = httpx.get(f"{url}/v1/models/{name}/sequence").json()["prefixes"]
    counts = [row["splits_on_groups"] for row in rows]
    assert counts[0] == 0 and len(set(counts)) > 2, counts
    assert rows[-1]["splits_on_groups"] == rows[-1]["splits"] > 0
    for before, after in zip(rows, rows[1:]):  # the same trees: never fewer
        assert before["trees"] != after["trees"] or \
            before["splits_on_groups"] <= after["splits_on_groups"]
    dom = dump(f"{url}/v1/models/{name}/sequence.html", tmp_path)
    shown = re.findall(r"<td>(\d+) of (\d+)</td>", dom)
    assert [(int(k), int(n)) for k, n in shown] == \
        [(row["splits_on_groups"], row["splits"]) for row in rows]
    said = headers(dom)
    assert ("trees used" in said) == (len({row["trees"] for row in rows}) > 1)
    assert "splits" not in said and "trees" not in said


def test_the_chart_fits_a_narrow_window(served_model, tmp_path):
    """At 500 px the curve is scaled down, not cut: it ends inside the window (the
    validation curve's last step reaches the plot's right end) and both curves show. (The
    window is tall enough for the whole page: a vertical scrollbar would narrow it.)"""
    url, _ = served_model
    shot = tmp_path / "narrow.png"
    result = browse(f"{url}/v1/models/d/sequence.html", tmp_path, f"--screenshot={shot}",
                    width=500, height=1800)
    assert shot.exists(), result.stderr[-2000:]
    from PIL import Image

    image = np.asarray(Image.open(shot).convert("RGB")).astype(int)
    assert image.shape[1] == 500
    red = np.abs(image - np.array(VALIDATION)).sum(axis=2) < 40
    columns = np.flatnonzero(red.any(axis=0))
    pixels = series_pixels(shot)
    assert pixels["train"] > 100 and pixels["validation"] > 100, pixels
    assert columns.max() < 480 and columns.max() > 300, columns.max()


@pytest.mark.parametrize("name,status,says", [
    ("untrained", 409, ["has no published version yet", "POST /v1/models/untrained/retrain",
                        "featurebudget retrain untrained --wait"]),
    ("online", 409, ["online model"]),
    ("missing", 404, ["missing"]),
])
def test_a_model_without_a_curve_gets_a_page_saying_why(served_model, tmp_path, name,
                                                        status, says):
    url, _ = served_model
    response = httpx.get(f"{url}/v1/models/{name}/sequence.html",
                         headers={"accept": "text/html,application/xhtml+xml,*/*;q=0.8"})
    assert response.status_code == status
    assert response.headers["content-type"].startswith("text/html")
    api = httpx.get(f"{url}/v1/models/{name}/sequence.html")   # a client, not a browser
    assert api.status_code == status
    assert api.headers["content-type"].startswith("application/problem+json")
    dom = dump(f"{url}/v1/models/{name}/sequence.html", tmp_path)
    text = " ".join(re.sub(r"<[^>]+>", " ", dom).split())
    assert "problem+json" not in text and '"detail"' not in text
    assert f"{name} (no curve to show: {status})" in text
    for phrase in says:
        assert phrase in text, (phrase, text)


def test_splits_on_groups_count_what_the_answer_can_read():
    """For every set of groups: no split on its groups means one answer for every row; a
    larger set never counts fewer splits of the same trees; a group of a constant feature
    (no tree can split on it) adds none; all groups count every split."""
    from itertools import combinations

    import scipy.sparse as sp

    from algorithms.gbfs import GBFS
    from service.batch.curves import masked_dense
    from service.batch.families.gbfs import splits_on_groups
    from service.batch.layout import BatchLayout
    from service.schemas import ModelCreate

    X, y = diabetes()
    X = np.column_stack([X, np.ones(len(y))])[:300]
    groups = [*DIABETES_GROUPS, {"name": "constant", "features": ["one"], "cost": 1.0}]
    layout = BatchLayout(ModelCreate(name="t", algorithm="gbfs", groups=groups))
    model = GBFS(loss="squared", feature_groups=[layout.group_features(g).tolist()
                                                 for g in range(5)],
                 group_costs=layout.costs, n_estimators=15, max_depth=3,
                 random_state=0).fit(X, y[:300])
    counts = {}
    for k in range(6):
        for S in combinations(range(5), k):
            counts[S], total = splits_on_groups(model, layout, S)
            rows = masked_dense(sp.csr_matrix(X), layout.features_of(S))
            scores = model.decision_function(rows, computed_groups=list(S))
            if counts[S] == 0:
                assert np.ptp(scores) == 0, S
            same_trees = model.trees_used(S)
            for smaller in combinations(S, k - 1) if k else ():
                if model.trees_used(smaller) == same_trees and \
                        model.answers_unmasked(smaller) == model.answers_unmasked(S):
                    assert counts[smaller] <= counts[S], (smaller, S)
            if 4 in S and model.answers_unmasked(S) == model.answers_unmasked(S[:-1]):
                assert counts[S] == counts[S[:-1]], S
    assert counts[()] == 0 and counts[(4,)] == 0
    assert counts[(0, 1, 2, 3, 4)] == splits_on_groups(model, layout, range(5))[1] > 0
