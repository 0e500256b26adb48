"""``featurebudget next``: per-example next groups from inline JSON, a JSON-lines file or
a JSON list, through the client's ``next_groups`` against a live service; bad input is
exit status 2 with one line naming it."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from algorithms.datasets.acquisition_synthetic import make_cube_nm
from clients.http import FeaturebudgetClient
from service.cli import main
from service.settings import Settings
from tests.service.batch.test_next_per_example import NM_GROUPS, rows
from tests.support.batch_data import named_examples
from tests.support.live_server import live_server

BLOCKS = ("block_0", "block_1", "block_2")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A live service with a gbfs classifier on CUBE-NM whose per-example policy is built."""
    X, y, *_ = make_cube_nm(700, seed=3)
    settings = Settings(redis_url=None, data_dir=tmp_path_factory.mktemp("data"), api_keys="",
                        batch_worker=True, job_poll_seconds=0.05, version_check_seconds=0.2)
    with live_server(settings) as url, FeaturebudgetClient(url) as client:
        client.create_batch_model("f", algorithm="gbfs", groups=NM_GROUPS,
                                  task="classification",
                                  params={"n_estimators": 40, "max_depth": 2})
        body = {"examples": named_examples(X, np.where(y > 0, 1, -1), NM_GROUPS, 0, 650,
                                           field="label")}
        assert client.http.post("/v1/models/f/examples?wait=true", json=body).status_code == 202
        client.wait_for_job("f", client.retrain("f").id, timeout=300)
        probe = rows(X, 650, 651, skip=BLOCKS)
        deadline = time.monotonic() + 300
        while client.next_groups("f", probe)[0]["policy_building"]:
            assert time.monotonic() < deadline, "the policy was not built"
            time.sleep(0.1)
        yield url, client, X[650:]


def test_inline_and_file_answers_are_the_clients(served, tmp_path, capsys):
    url, client, X = served
    examples = rows(X, 0, 3, skip=BLOCKS)
    want = client.next_groups("f", examples, max_cost=7.0)
    assert main(["next", "f", "--example", json.dumps(examples), "--max-cost", "7",
                 "--json", "--url", url]) == 0
    assert [json.loads(line) for line in capsys.readouterr().out.splitlines()] == want
    lines = tmp_path / "examples.jsonl"
    lines.write_text("\n".join(json.dumps(e) for e in examples) + "\n")
    assert main(["next", "f", str(lines), "--max-cost", "7", "--url", url]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3
    for line, answer in zip(out, want, strict=True):
        assert line.startswith(f"NEXT  {answer['next_group']['name']}  cost ")
        assert f"({answer['policy']})" in line and "gain " in line
    listed = tmp_path / "examples.json"
    listed.write_text(json.dumps(examples))
    assert main(["next", "f", str(listed), "--computed-groups", "context,block_0,block_1,"
                 "block_2", "--url", url]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"STOP  nothing left within max_cost  ({want[0]['policy']})"] * 3


@pytest.mark.parametrize(("argv", "says"), [
    ([], "give a FILE of examples or --example"),
    (["--example", "{nope"], "--example: not JSON"),
    (["--example", "[1, 2]"], "each a JSON object"),
])
def test_bad_input_is_exit_status_2_naming_it(served, argv, says, capsys):
    url, *_ = served
    assert main(["next", "f", *argv, "--url", url]) == 2
    assert says in capsys.readouterr().err


def test_a_bad_line_is_named(served, tmp_path, capsys):
    url, *_ = served
    path = tmp_path / "bad.jsonl"
    path.write_text('{"features": {}}\n\n{oops\n')
    assert main(["next", "f", str(path), "--url", url]) == 2
    assert "bad.jsonl line 3: not JSON" in capsys.readouterr().err


def test_a_refused_body_is_exit_status_1(served, capsys):
    url, *_ = served
    assert main(["next", "f", "--example", '{"features": {"nope": {"x": 1}}}', "--url",
                 url]) == 1
    assert "422" in capsys.readouterr().err
