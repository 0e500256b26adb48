"""``featurebudget load`` against the real service on a loopback port: the whole file is
checked before anything is appended, errors name the file's own line in one line with exit
status 2 (the file) or 1 (the service), and a failed load is resumed without appending
anything twice."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from clients.http import FeaturebudgetClient
from service.cli import main
from service.settings import Settings
from tests.support.live_server import live_server
from tests.support.redis_db import redis_url  # noqa: F401 (the fixture)

LINES = 3000


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    settings = Settings(redis_url=None, data_dir=tmp_path_factory.mktemp("data"), api_keys="",
                        consumer_block_ms=20)
    with live_server(settings, start_timeout=600) as url:  # (a busy machine)
        yield url


def write_file(path, *, bad_line: int | None = None) -> str:
    """LINES examples, line k (1-based) an example of feature k % 20; a blank line and a
    comment in the middle; ``bad_line``: that line's label is 0."""
    lines = []
    for k in range(1, LINES + 1):
        label = "0" if k == bad_line else ("1" if k % 3 else "-1")
        lines.append(f"{label} {k % 20 + 1}:1 {(k * 7 + 3) % 20 + 1}:0.5" if k not in (10, 11)
                     else ("" if k == 10 else "# a comment"))
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def run(capsys, *argv) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def create(url: str, name: str) -> FeaturebudgetClient:
    client = FeaturebudgetClient(url)
    client.create_model(name, algorithm="pet", n_features=20, budget=5)
    return client


def test_a_bad_line_is_found_before_anything_is_appended(server, capsys, tmp_path):
    client = create(server, "checked")
    path = write_file(tmp_path / "train.svm", bad_line=2500)
    status, out, err = run(capsys, "load", path, "--model", "checked", "--url", server,
                           "--quiet")
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"{path}, line 2500, field 'label': label 0.0 mixes -1 and 0 in one batch" in err
    assert "nothing was appended (the whole file is checked first)" in err
    assert client.get_model("checked").log_end is None


def test_without_the_check_a_failed_load_says_how_to_resume(server, capsys, tmp_path):
    client = create(server, "streamed")
    bad = write_file(tmp_path / "train.svm", bad_line=2500)
    argv = ("load", bad, "--model", "streamed", "--url", server, "--quiet")
    status, _, err = run(capsys, *argv, "--no-check")
    assert status == 2 and err.count("\n") == 1
    assert "line 2500" in err and "the first 2,000 examples" in err and "--skip 2000" in err
    write_file(tmp_path / "train.svm")  # the line fixed: the same command goes on
    status, out, err = run(capsys, *argv, "--no-check", "--wait")
    assert status == 0, err
    result = json.loads(out)
    assert (result["examples"], result["repeated"]) == (LINES - 2 - 2000, 2000)
    assert "2,000 examples were appended by an earlier load" in err
    assert client.get_model("streamed").examples_applied == LINES - 2
    status, out, _ = run(capsys, *argv, "--wait")  # once more: nothing twice
    assert status == 0 and json.loads(out)["examples"] == 0
    assert client.get_model("streamed").examples_applied == LINES - 2


def test_skip_leaves_out_the_first_examples(server, capsys, tmp_path):
    client = create(server, "skipped")
    path = write_file(tmp_path / "train.svm")
    status, out, err = run(capsys, "load", path, "--model", "skipped", "--url", server,
                           "--quiet", "--skip", "1500", "--batch-size", "700", "--wait")
    assert status == 0, err
    assert json.loads(out)["examples"] == LINES - 2 - 1500
    assert client.get_model("skipped").examples_applied == LINES - 2 - 1500


@pytest.mark.parametrize("case", ["missing file", "unknown model", "unreachable"])
def test_usage_and_service_errors_are_one_line(server, tmp_path, case):
    """The real command in a subprocess: one line on stderr, no traceback."""
    path = write_file(tmp_path / "train.svm")
    url, model = server, "absent"
    if case == "missing file":
        path = str(tmp_path / "nowhere.svm")
    if case == "unreachable":
        url = "http://127.0.0.1:9"
    done = subprocess.run([sys.executable, "-m", "service.cli", "load", path, "--model",
                           model, "--url", url, "--quiet"], capture_output=True, text=True,
                          timeout=120)
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
    expected = {"missing file": (2, "cannot read"), "unknown model": (1, "no model named"),
                "unreachable": (1, "cannot reach http://127.0.0.1:9")}[case]
    assert (done.returncode, expected[1] in done.stderr) == (expected[0], True), done.stderr


@pytest.mark.redis
def test_the_stream_loader_checks_first_and_appends_once(tmp_path, capsys, redis_url):  # noqa: F811
    import redis
    from fastapi.testclient import TestClient

    from service.app import create_app
    from service.storage import redis_keys

    with TestClient(create_app(Settings(redis_url=redis_url, consumer_block_ms=20))) as http:
        assert http.post("/v1/models", json={"name": "m", "algorithm": "pet", "n_features": 20,
                                             "budget": 5}).status_code == 201
    bad = write_file(tmp_path / "bad.svm", bad_line=2500)
    good = write_file(tmp_path / "good.svm")
    stream = ("--via", "stream", "--redis-url", redis_url, "--quiet")
    status, _, err = run(capsys, "load", good, "--model", "n", *stream)
    assert status == 1 and "no model named 'n'" in err and "'m'" in err
    status, _, err = run(capsys, "load", bad, "--model", "m", *stream)
    assert status == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert f"{bad}, line 2500, field 'label'" in err and "nothing was appended" in err
    log = redis.Redis.from_url(redis_url)
    assert log.xlen(redis_keys.log_key("m")) == 0
    status, out, err = run(capsys, "load", good, "--model", "m", *stream)
    assert status == 0 and json.loads(out)["examples"] == LINES - 2, err
    entries = log.xlen(redis_keys.log_key("m"))
    status, out, _ = run(capsys, "load", good, "--model", "m", *stream)
    assert status == 0 and json.loads(out)["repeated"] == LINES - 2
    assert log.xlen(redis_keys.log_key("m")) == entries
