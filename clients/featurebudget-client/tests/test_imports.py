"""The client imports httpx and nothing of the server: no service / algorithms / clients
package, no numba, scipy, fastapi or redis, and numpy / pandas only when the caller has
them imported already (it never imports them itself). Conversions that need no service."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from featurebudget_client import as_examples
from featurebudget_client.inputs import with_outcomes

FORBIDDEN = {"service", "algorithms", "clients", "numba", "scipy", "fastapi", "redis",
             "numpy", "pandas", "uvicorn", "starlette", "pydantic"}

USE_THE_CLIENT = """
import json, sys
import httpx
from featurebudget_client import AsyncFeaturebudgetClient, FeaturebudgetClient

def answer(request):
    if request.url.path.endswith("/examples"):
        return httpx.Response(202, json={"model": "m", "accepted": 1, "log_ids": ["1"],
                                         "applied": False})
    return httpx.Response(200, json={"model": "m", "log_position": None, "scores": [0.5],
                                     "labels": [1], "prediction_ids": None})

with FeaturebudgetClient("http://test", transport=httpx.MockTransport(answer)) as client:
    client.post_examples("m", [[1.0, 0.0]], labels=[1])
    assert client.predict("m", [{"indices": [0], "values": [1.0]}]).scores == [0.5]
print(json.dumps(sorted({name.partition(".")[0] for name in sys.modules})))
"""


def test_the_client_imports_nothing_of_the_server_nor_numpy(tmp_path):
    """In a fresh interpreter (outside any checkout): import it, post and predict."""
    out = subprocess.run([sys.executable, "-c", USE_THE_CLIENT], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60, check=True).stdout
    loaded = set(json.loads(out.splitlines()[-1]))
    assert "httpx" in loaded and "featurebudget_client" in loaded
    assert loaded & FORBIDDEN == set()


def test_dense_rows_as_lists_leave_out_nan_and_none():
    rows = [[1.0, 0.0, float("nan")], (None, 2, 3.5)]
    assert as_examples(rows) == [{"indices": [0, 1], "values": [1.0, 0.0]},
                                 {"indices": [1, 2], "values": [2.0, 3.5]}]


def test_dicts_pass_as_given_and_one_dict_is_refused():
    example = {"indices": [3], "values": [1.0]}
    assert as_examples([example]) == [example]
    with pytest.raises(TypeError, match=r"give one example as \[example\]"):
        as_examples(example)
    with pytest.raises(TypeError, match="example 1: a dict, .*not str"):
        as_examples([example, "3:1.0"])


def test_labels_and_targets_are_set_per_example():
    examples = [{"indices": [0], "values": [1.0]}, {"indices": [1], "values": [2.0]}]
    assert [e["label"] for e in with_outcomes(examples, labels=[1, -1])] == [1, -1]
    assert [e["target"] for e in with_outcomes(examples, targets=(0.5, 2))] == [0.5, 2]
    assert "label" not in examples[0]  # the caller's dicts are left as they were
    with pytest.raises(ValueError, match="2 examples and 3 labels"):
        with_outcomes(examples, labels=[1, 1, 1])
    with pytest.raises(TypeError, match="not both"):
        with_outcomes(examples, labels=[1, 1], targets=[1.0, 1.0])
