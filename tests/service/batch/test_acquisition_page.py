"""The sequence page's section on the per-example next-group policy and its cell on
``/ui``, in the real headless browser (as ``test_batch_page.py``): while the summary is
computed the page says so; once ready it tells what the policy does (first and second
choices, mean cost, held-out figures per exchange rate) exactly as
``GET /v1/models/{model}/acquisition`` says it; a version without a policy says why."""

from __future__ import annotations

import html
import re
import time

import httpx
import numpy as np
import pytest

from algorithms.datasets.acquisition_synthetic import make_cube_nm
from service.batch.serving import policy_page
from tests.service.batch.test_batch_page import cells_of, dump
from tests.service.batch.test_next_per_example import GBFS_PARAMS, NM_GROUPS
from tests.support.batch_data import DIABETES_GROUPS, NO_POLICY, diabetes, named_examples
from tests.support.live_server import PORTS
from tests.support.processes import embedded_server


def _post(url: str, name: str, body: dict, rows: list[dict]) -> None:
    response = httpx.post(f"{url}/v1/models", json={**body, "name": name})
    assert response.status_code == 201, response.text
    response = httpx.post(f"{url}/v1/models/{name}/examples?wait=true",
                          json={"examples": rows}, timeout=60)
    assert response.status_code == 202, response.text
    assert httpx.post(f"{url}/v1/models/{name}/retrain").status_code == 202


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A server with a gbfs classifier on CUBE-NM (a policy that reads values), an anytime
    regression (no held-out rows), a gbfs classifier on 60 rows (too few held out) and an
    online learner."""
    tmp_path = tmp_path_factory.mktemp("acquisition-page")
    with embedded_server(tmp_path / "data", PORTS, job_poll_seconds="0.05") as url:
        X, y, *_ = make_cube_nm(1500, seed=1)
        _post(url, "nm", {"algorithm": "gbfs", "task": "classification", "groups": NM_GROUPS,
                          "params": {**NO_POLICY, **GBFS_PARAMS}},
              named_examples(X, np.where(y > 0, 1, -1), NM_GROUPS, 0, 1400, field="label"))
        X, y = diabetes()
        _post(url, "d", {"algorithm": "cs-g-omp", "groups": DIABETES_GROUPS,
                         "params": NO_POLICY}, named_examples(X, y, DIABETES_GROUPS, 0, 442))
        labels = np.where(y > np.median(y), 1.0, -1.0)
        _post(url, "few", {"algorithm": "gbfs", "task": "classification",
                           "groups": DIABETES_GROUPS,
                           "params": {**NO_POLICY, "n_estimators": 10, "max_depth": 2}},
              named_examples(X, labels, DIABETES_GROUPS, 0, 60, field="label"))
        body = {"name": "online", "algorithm": "sofs", "n_features": 10, "budget": 3}
        assert httpx.post(f"{url}/v1/models", json=body).status_code == 201
        deadline = time.monotonic() + 300
        for name in ("nm", "d", "few"):
            while httpx.get(f"{url}/v1/models/{name}").json()["version"] != 1:
                assert time.monotonic() < deadline, name
                time.sleep(0.05)
        yield url, tmp_path


def text_of(fragment: str) -> str:
    """The text of an HTML fragment, entities read (chromium writes U+00A0 as &nbsp;) and
    white space collapsed (U+00A0 kept)."""
    return re.sub(r"[ \t\r\n]+", " ", html.unescape(re.sub(r"<[^>]+>", " ", fragment))).strip()


def section(dom: str) -> str:
    match = re.search(r'<h2 id="acquisition">.*?(?=</body>)', dom, re.S)
    assert match, "no acquisition section on the page"
    return match.group(0)


def table_rows(dom: str) -> list[list[str]]:
    table = re.search(r'<table id="acquisition-table">(.*?)</table>', dom, re.S).group(1)
    return [[text_of(c) for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", table, re.S)]


def test_the_page_says_what_the_policy_does_once_it_is_computed(served, tmp_path):
    url, _ = served
    ui = dump(f"{url}/ui", tmp_path)   # nobody asked yet: /ui starts nothing
    assert cells_of(ui, "nm")[6] == "not computed yet"
    dom = dump(f"{url}/v1/models/nm/sequence.html", tmp_path)   # the first visit starts it
    assert "None" not in dom
    assert 'data-state="building"' in section(dom)
    assert "reload this page" in text_of(section(dom))
    deadline = time.monotonic() + 600
    while (summary := httpx.get(f"{url}/v1/models/nm/acquisition").json())["state"] != \
            "ready":
        assert summary["state"] == "building" and time.monotonic() < deadline, summary
        time.sleep(0.2)
    dom = dump(f"{url}/v1/models/nm/sequence.html", tmp_path)
    assert "None" not in dom and 'data-state="ready"' in dom
    said = text_of(section(dom))
    assert said.startswith("Which group next, for each example Per-example: on held-out "
                           "rows, choosing from the values"), said
    assert f"Each of {summary['rows']} held-out rows starts with no group computed" in said
    assert "The first choice knows no value yet" in said
    rows = table_rows(dom)
    metric = "held-out accuracy"
    assert rows[0] == ["exchange rate \u03bb", "mean cost", "mean groups", metric,
                       "held-out log-loss", "first choice", "second choice"]
    assert len(rows) == 1 + len(summary["exchange_rates"])
    for row, entry in zip(rows[1:], summary["exchange_rates"], strict=True):
        rate = entry["exchange_rate"]
        assert row[0] == ("none (every group)" if rate is None else f"{rate:.3g}")
        assert row[1] == f"{entry['mean_cost']:.3g}"
        assert row[3] == f"{entry['metric']:.4f}" and row[4] == f"{entry['loss']:.4f}"
        assert row[5] == text_of(policy_page.choices_text(entry["first_choice"]))
        assert row[6] == text_of(policy_page.choices_text(entry["second_choice"]))
    cheap = rows[2]   # 0.3 lam_0: the context for all, then the block it names
    assert cheap[5] == "context 100\u00a0%"
    assert [part.split()[0] for part in cheap[6].split(", ")] == [
        c["name"] for c in summary["exchange_rates"][1]["second_choice"]]
    assert {part.split()[0] for part in cheap[6].split(", ")} == {"block_0", "block_1",
                                                                 "block_2"}
    ui = dump(f"{url}/ui", tmp_path)
    assert cells_of(ui, "nm")[6] == "per-example"
    assert 'href="/v1/models/nm/sequence.html#acquisition"' in ui


@pytest.mark.parametrize("name,says", [
    ("d", "this anytime regression version keeps no held-out rows"),
    ("few", "fewer than the 20 the policy needs"),
])
def test_a_version_without_a_policy_says_why(served, tmp_path, name, says):
    url, _ = served
    dom = dump(f"{url}/v1/models/{name}/sequence.html", tmp_path)
    said = text_of(section(dom))
    assert 'data-state="none"' in dom and said.startswith(
        "Which group next, for each example No per-example policy:"), said
    assert says in said and "per-set next group" in said
    assert "acquisition-table" not in dom and "None" not in dom
    summary = httpx.get(f"{url}/v1/models/{name}/acquisition").json()
    assert summary["state"] == "none" and says in summary["reason"]
    ui = dump(f"{url}/ui", tmp_path)
    assert cells_of(ui, name)[6] == "per-set only"
    assert f'title="{summary["reason"]}"' in ui
    assert cells_of(ui, "online")[6] == "\u2014"
