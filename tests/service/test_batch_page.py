"""The anytime-curve page in a real headless browser (Debian's chromium): it loads without
console errors, shows the sequence, and its screenshot holds the plotted curve."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from service.batch import page
from tests.service.batch_data import DIABETES_GROUPS, NO_POLICY, diabetes, named_examples
from tests.service.test_crash import free_port, wait_ready

ROOT = Path(__file__).resolve().parents[2]
TRAIN, VALIDATION = (0x1F, 0x77, 0xB4), (0xD6, 0x27, 0x28)  # the page's series colors


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    if os.environ.get("CI"):
        pytest.fail("CI needs chromium (.ci/run installs Debian's package)")
    pytest.skip("no chromium on this machine (apt-get install chromium)")


def browse(url: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    command = [chromium(), "--headless", "--no-sandbox", "--disable-gpu",
               "--disable-dev-shm-usage", "--enable-logging=stderr", "--v=0",
               f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1000,900", *args, url]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def series_pixels(png: Path) -> dict[str, int]:
    from PIL import Image

    image = np.asarray(Image.open(png).convert("RGB")).astype(int)
    out = {}
    for name, color in (("train", TRAIN), ("validation", VALIDATION)):
        distance = np.abs(image - np.array(color)).sum(axis=2)
        out[name] = int(np.count_nonzero(distance < 40))
    return out


@pytest.fixture(scope="module")
def served_model(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("page")
    port = free_port()
    env = dict(os.environ, FEATUREBUDGET_DATA_DIR=str(tmp_path / "data"),
               FEATUREBUDGET_JOB_POLL_SECONDS="0.05")
    env.pop("FEATUREBUDGET_REDIS_URL", None)
    process = subprocess.Popen([sys.executable, "-m", "service.cli", "serve", "--port",
                                str(port), "--log-level", "warning"], cwd=ROOT, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, process)
        X, y = diabetes()
        body = {"name": "d", "algorithm": "cs-g-omp", "groups": DIABETES_GROUPS,
                "params": NO_POLICY}
        assert httpx.post(f"{url}/v1/models", json=body).status_code == 201
        rows = named_examples(X, y, DIABETES_GROUPS, 0, 442)
        assert httpx.post(f"{url}/v1/models/d/examples?wait=true",
                          json={"examples": rows}, timeout=30).status_code == 202
        job = httpx.post(f"{url}/v1/models/d/retrain").json()
        deadline = time.monotonic() + 60
        while httpx.get(f"{url}/v1/models/d").json()["version"] != 1:
            assert time.monotonic() < deadline, job
            time.sleep(0.05)
        yield url, tmp_path
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_page_loads_without_console_errors_and_shows_the_sequence(served_model, tmp_path):
    url, _ = served_model
    result = browse(f"{url}/v1/models/d/sequence.html", tmp_path, "--dump-dom")
    assert result.returncode == 0, result.stderr[-2000:]
    dom = result.stdout
    assert 'id="curve"' in dom and dom.count('class="point train"') == 5
    assert dom.count('class="point validation"') == 5
    sequence = httpx.get(f"{url}/v1/models/d/sequence").json()
    for row in sequence["prefixes"][1:]:
        assert f"<td class=\"name\">{row['name']}</td>" in dom or \
            f"<td class=name>{row['name']}</td>" in dom
    console = [line for line in result.stderr.splitlines() if "CONSOLE" in line
               or "Uncaught" in line or "Failed to load resource" in line]
    assert not console, console
    listing = browse(f"{url}/ui", tmp_path, "--dump-dom")
    assert "/v1/models/d/sequence.html" in listing.stdout


def test_screenshot_shows_both_curves(served_model, tmp_path):
    url, _ = served_model
    shot = tmp_path / "curve.png"
    result = browse(f"{url}/v1/models/d/sequence.html", tmp_path, f"--screenshot={shot}")
    assert shot.exists(), result.stderr[-2000:]
    pixels = series_pixels(shot)
    assert pixels["train"] > 300 and pixels["validation"] > 300, pixels


def test_an_empty_plot_fails_the_pixel_check(tmp_path):
    """The screenshot check above is not vacuous: a page without the series has none."""
    sequence = {"version": 1, "created_at": 0, "algorithm": "cs-g-omp",
                "prefixes": [{"groups": 0, "cumulative_cost": 0.0,
                              "train_explained_variance": None,
                              "validation_explained_variance": None}]}
    html_file = tmp_path / "empty.html"
    html_file.write_text(page.sequence_page("empty", "anytime", "regression", sequence))
    shot = tmp_path / "empty.png"
    browse(html_file.as_uri(), tmp_path, f"--screenshot={shot}")
    pixels = series_pixels(shot)
    assert pixels["train"] < 50 and pixels["validation"] < 50, pixels
