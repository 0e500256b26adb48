"""The X2 benchmark's smoke mode: every learner through a few thousand rows at d = 10^9."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from algorithms.memory import available_bytes
from algorithms.online import LEARNERS

ROOT = Path(__file__).resolve().parents[1]
D = 10**9


@pytest.mark.slow
@pytest.mark.skipif((available_bytes() or 0) < 17_500_000_000,
                    reason="SOFS and AROW at d = 10^9 hold 16 GB; less memory is available")
def test_quick_x2_runs_every_learner_at_a_billion_dimensions(tmp_path):
    out = tmp_path / "x2.json"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "x2.py"), "--quick",
                    "--out", str(out)], check=True, timeout=540, cwd=ROOT)
    result = json.loads(out.read_text())
    assert result["d"] == D and result["n_rows"] == 4_000 and result["budget"] == 500
    rows = {row["method"]: row for row in result["rows"]}
    assert set(rows) == {"sofs", "ogd", "arow", "pet", "fofs"}
    for method, row in rows.items():
        assert "error" not in row, row
        assert row["d"] == D and row["train_rows"] == 3_600
        assert 0.5 < row["accuracy"] <= 1.0, row
        assert 0 < row["seconds"] <= row["end_to_end_seconds"]
        budget = 500 if LEARNERS[method].selects else None
        state = LEARNERS[method].memory_bytes(n_features=D, budget=budget)
        assert row["memory_bytes"] == state
        # Peak RSS: the state (touched where rows reach it) plus the interpreter and about
        # two chunks of rows; never a second copy of a d-sized array.
        assert row["peak_rss_bytes"] < state + 1_500_000_000, row
    for method in ("sofs", "arow"):   # every variance starts at 1: all 16 GB touched
        assert rows[method]["peak_rss_bytes"] > 16 * D
    for method in ("sofs", "pet", "fofs"):
        assert rows[method]["selected"] <= 500
    # A few thousand rows are enough for SOFS to keep only informative features.
    assert rows["sofs"]["informative_selected"] == rows["sofs"]["selected"] == 500
    # OGD and AROW keep every feature they updated: noise by the hundred thousand.
    assert rows["ogd"]["selected"] > 100_000 and rows["arow"]["selected"] > 100_000
