"""The acquisition benchmark's smoke mode on a tiny configuration: every policy, finite
figures, the bounds above the policies."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("lightgbm")
pytest.importorskip("sklearn")

ROOT = Path(__file__).resolve().parents[1]
POLICIES = {"ours", "aaco", "greedy-knn", "per-set", "random", "cegb", "full", "oracle"}


@pytest.mark.slow
def test_quick_acquisition_benchmark_has_every_policy(tmp_path):
    out = tmp_path / "acquisition_quality.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "acquisition_quality.py"), "--quick",
                    "--datasets", "cube-nm", "--n", "600", "--out", str(out)],
                   check=True, timeout=300, cwd=ROOT, stdout=subprocess.DEVNULL)
    result = json.loads(out.read_text())
    assert result["config"]["seeds"] == 1 and result["spambase"] is None
    entry = result["aggregates"]["cube-nm"]
    assert POLICIES <= set(entry)
    for policy in POLICIES:
        assert math.isfinite(entry[policy]["area"]), policy
    (run,) = result["results"]
    for policy in ("ours", "aaco", "greedy-knn", "per-set", "random", "oracle"):
        caps = run["policies"][policy]["caps"]
        assert [c["fraction"] for c in caps] == result["config"]["cap_fractions"]
        assert all(c["mean_cost"] <= c["cap"] + 1e-9 for c in caps), policy
    # the hindsight oracle bounds every policy at every cap
    for j, oracle in enumerate(run["policies"]["oracle"]["caps"]):
        for policy in ("ours", "per-set", "random"):
            assert oracle["accuracy"] >= run["policies"][policy]["caps"][j]["accuracy"] - 1e-9
    assert entry["ours"]["area"] >= entry["per-set"]["area"] - 0.02
