"""Write the tour's small data files (README.md, "A five-minute tour"), deterministically:

- ``train.svm`` / ``test.svm``: 200 / 60 libsvm examples (1-based indices) over 1,000
  features for the ``spam`` model: labels ±1 from the sign of a sparse linear rule on
  features 1-10, each example also carrying 3 noise features.
- ``patients.jsonl``: 40 JSON lines for the ``patients`` batch model, each example with the
  ``exam`` group only (``featurebudget predict`` answers each for the groups it carries).

Run ``python examples/make_examples.py [DIR]`` (default: this folder); the same bytes every
time (``tests/test_readme_tour.py`` checks the shipped files against it). O(rows).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

N_FEATURES = 1000
RULE = np.array([2.0, -1.5, 1.0, -1.0, 0.8, -0.8, 0.6, -0.6, 0.5, -0.5])  # features 1..10


def _libsvm(rng: np.random.Generator, n: int) -> str:
    lines = []
    for _ in range(n):
        informative = np.sort(rng.choice(10, size=3, replace=False))
        noise = np.sort(rng.choice(np.arange(10, N_FEATURES), size=3, replace=False))
        values = np.round(rng.uniform(0.1, 1.0, size=6), 2)
        score = float(RULE[informative] @ values[:3])
        label = 1 if score >= 0 else -1
        pairs = zip(np.concatenate([informative, noise]) + 1, values, strict=True)
        lines.append(f"{label} " + " ".join(f"{i}:{v:g}" for i, v in pairs))
    return "\n".join(lines) + "\n"


def _patients(rng: np.random.Generator, n: int) -> str:
    rows = np.round(rng.normal(size=(n, 2)), 3)
    return "".join(json.dumps({"features": {"exam": {"bmi": float(a), "bp": float(b)}}}) + "\n"
                   for a, b in rows)


def write_examples(folder: Path) -> list[Path]:
    """Write the three files into ``folder``; their paths."""
    rng = np.random.default_rng(20240601)
    texts = {"train.svm": _libsvm(rng, 200), "test.svm": _libsvm(rng, 60),
             "patients.jsonl": _patients(rng, 40)}
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in texts.items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent
    for written in write_examples(target):
        print(f"{written} ({written.stat().st_size:,} bytes)")
