"""What the command line says to a person, run in-process against a real ``featurebudget
serve`` on a loopback port of this suite: every option has help text, an unreachable
service names --url and FEATUREBUDGET_URL, ``retrain --wait`` ends with one line (the job as
JSON with --json), and ``versions`` shows the held-out figure each version recorded."""

from __future__ import annotations

import argparse
import json
import re

import numpy as np
import pytest

from clients.http import FeaturebudgetClient
from service.cli import build_parser, main
from tests.support.batch_data import DIABETES_GROUPS, NO_POLICY, diabetes, named_examples
from tests.support.ports import free_port
from tests.support.processes import serve_embedded, stop, wait_ready

PORTS = range(18340, 18360)  # this suite's loopback ports


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``featurebudget serve`` (embedded backend) with an anytime regression model and a
    GBFS classification model of diabetes, each with rows posted and no version yet."""
    port = free_port(PORTS)
    process = serve_embedded(tmp_path_factory.mktemp("data"), port,
                             job_poll_seconds="0.05")
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, process, timeout=900)  # (a busy machine compiles its kernels)
        X, y = diabetes()
        labels = np.where(y > np.median(y), 1.0, -1.0)
        with FeaturebudgetClient(url) as client:
            for name, algorithm, task, params in (
                    ("house", "cs-g-omp", "regression", {}),
                    ("clf", "gbfs", "classification", {"n_estimators": 10, "max_depth": 2})):
                client.create_batch_model(name, algorithm=algorithm, task=task,
                                          groups=DIABETES_GROUPS,
                                          params={**NO_POLICY, **params})
                field, target = ("label", labels) if task == "classification" else \
                    ("target", y)
                client.post_examples(name, named_examples(X, target, DIABETES_GROUPS, 0, 442,
                                                          field=field), wait=True)
        yield url
    finally:
        stop(process)


def run(capsys, *argv) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(command path, its parser) of every command and action, depth first."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*path, name))


def test_every_option_of_every_command_has_help():
    missing = [(" ".join(path), action.option_strings or action.dest)
               for path, parser in commands(build_parser()) for action in parser._actions
               if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction)
               and not action.help]
    assert missing == []


@pytest.mark.parametrize("command,says", [
    ("serve", ["$FEATUREBUDGET_HOST", "$FEATUREBUDGET_PORT", "$FEATUREBUDGET_DATA_DIR",
               "$FEATUREBUDGET_REDIS_URL", "needs --redis-url", "critical, error, warning",
               "examples:"]),
    ("worker", ["$FEATUREBUDGET_REDIS_URL", "$FEATUREBUDGET_WORKER_METRICS_PORT", "0: none",
                "examples:"]),
    ("load", ["$FEATUREBUDGET_URL", "--skip", "--no-check", "examples:"]),
])
def test_serve_worker_and_load_help_say_what_each_option_does(command, says, capsys):
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    text = re.sub(r"\s+", " ", capsys.readouterr().out)
    assert done.value.code == 0
    for phrase in says:
        assert phrase in text, phrase


def test_log_level_is_read_in_any_case():
    serve = build_parser().parse_args(["serve", "--log-level", "WARNING"])
    assert serve.log_level == "warning"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["worker", "--log-level", "loud"])


def test_an_unreachable_service_says_how_to_point_elsewhere(capsys):
    url = f"http://127.0.0.1:{free_port(PORTS)}"  # nothing listens there
    for argv in (["models", "list"], ["versions", "house"], ["retrain", "house", "--wait"]):
        status, out, err = run(capsys, *argv, "--url", url)
        assert (status, out) == (1, "") and err.count("\n") == 1, err
        assert f"cannot reach {url}" in err
        assert "--url URL" in err and "FEATUREBUDGET_URL" in err, err


def test_retrain_wait_ends_with_a_summary_line(server, capsys):
    status, out, err = run(capsys, "retrain", "house", "--url", server)
    queued = re.fullmatch(r"house: retrain job ([0-9a-f]+) (queued|running) \(its status: "
                          r"GET /v1/models/house/jobs/\1\)\n", out)
    assert status == 0 and queued, out
    status, out, err = run(capsys, "retrain", "house", "--wait", "--poll", "0.05",
                           "--url", server)
    assert status == 0 and err.startswith("\r[") and err.endswith("\n")
    line = re.fullmatch(r"house: retrain job ([0-9a-f]+) succeeded in [0-9.]+ s: version "
                        r"(\d+) \(([\d,]+) training examples, ([\d,]+) held out\); held-out "
                        r"explained variance (-?[0-9.]+)\n", out)
    assert line, out
    with FeaturebudgetClient(server) as client:
        job = client.job("house", line.group(1))
        meta = next(v for v in client.versions("house").versions
                    if v["version"] == job.version)
    assert int(line.group(2)) == job.version
    assert int(line.group(3).replace(",", "")) == job.examples_used
    assert int(line.group(4).replace(",", "")) == job.validation_examples
    figure = meta["metrics"]["validation_explained_variance"][-1]
    assert line.group(5) == f"{figure:.4f}"

    status, out, err = run(capsys, "retrain", "house", "--wait", "--poll", "0.05", "--quiet",
                           "--json", "--url", server)
    assert status == 0 and err == ""
    with FeaturebudgetClient(server) as client:
        assert json.loads(out) == client.job("house", json.loads(out)["id"]).raw


def test_a_failed_retrain_says_why_in_its_line(server, capsys):
    with FeaturebudgetClient(server) as client:
        client.create_batch_model("onecls", algorithm="gbfs", task="classification",
                                  groups=[("a", ["x"], 1.0), ("b", ["z"], 2.0)])
        client.post_examples("onecls", [{"features": {"a": {"x": float(i)}, "b": {"z": 1.0}},
                                         "label": 1} for i in range(40)], wait=True)
    status, out, _ = run(capsys, "retrain", "onecls", "--wait", "--quiet", "--poll", "0.05",
                         "--url", server)
    assert status == 1 and re.fullmatch(
        r"onecls: retrain job [0-9a-f]+ failed in [0-9.]+ s: .*one class.*\n", out), out


def test_versions_show_the_held_out_figure_each_version_recorded(server, capsys):
    with FeaturebudgetClient(server) as client:
        for name in ("clf", "house"):
            job = client.retrain(name)
            assert client.wait_for_job(name, job.id, timeout=300, poll=0.05).succeeded
        for name, label, figure in (
                ("house", "EXPLAINED_VARIANCE",
                 lambda m: m["validation_explained_variance"][-1]),
                ("clf", "ERROR", lambda m: m["validation"]["error"][-1])):
            status, out, _ = run(capsys, "versions", name, "--url", server)
            lines = [line.split() for line in out.strip().splitlines()]
            assert status == 0 and lines[0] == ["VERSION", "CREATED_AT", "EXAMPLES_USED",
                                                "HELD_OUT", f"HELD_OUT_{label}", "CURRENT"]
            listing = client.versions(name).versions
            assert [int(row[0]) for row in lines[1:]] == [v["version"] for v in listing]
            for row, meta in zip(lines[1:], listing, strict=True):
                assert int(row[3]) == meta["validation_examples"] > 0
                assert row[4] == f"{figure(meta['metrics']):.4f}"
