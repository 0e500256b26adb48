"""``featurebudget models list|create|show|delete`` and ``snapshot get|put`` against the real
service on a loopback port (embedded backend), checked through the HTTP client."""

from __future__ import annotations

import argparse
import io
import json
import re

import pytest

from clients.http import FeaturebudgetClient
from service.cli import build_parser, main
from service.settings import Settings
from tests.support.live_server import live_server


@pytest.fixture
def server(tmp_path):
    settings = Settings(redis_url=None, data_dir=tmp_path / "data", api_keys="",
                        consumer_block_ms=20, job_poll_seconds=0.05)
    with live_server(settings) as url:
        yield url


@pytest.fixture
def keyed_server(tmp_path):
    settings = Settings(redis_url=None, data_dir=tmp_path / "data",
                        api_keys="admin-key,reader-key:read", consumer_block_ms=20)
    with live_server(settings) as url:
        yield url


def run(capsys, *argv) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def table(out: str) -> list[list[str]]:
    return [line.split() for line in out.strip().splitlines()]


ONLINE = [{"indices": [3, 17], "values": [1.0, 0.5], "label": 1},
          {"indices": [4], "values": [2.0], "label": -1}]


def test_models_create_list_show_delete(server, capsys, monkeypatch):
    monkeypatch.setenv("FEATUREBUDGET_URL", server)  # read when the parser is built
    status, out, err = run(capsys, "models", "list")
    assert status == 0 and table(out) == [["NAME", "ALGORITHM", "FAMILY", "EXAMPLES",
                                           "ACCURACY", "VERSION"]]
    assert "no models yet" in err

    status, out, _ = run(capsys, "models", "create", "spam", "--algorithm", "sofs",
                         "--n-features", "1000", "--budget", "10", "--param", "r=0.5")
    assert status == 0
    created = json.loads(out)
    assert (created["name"], created["algorithm"], created["n_features"], created["budget"],
            created["params"]) == ("spam", "sofs", 1000, 10, {"r": 0.5})
    status, out, _ = run(capsys, "models", "create", "clicks", "--algorithm", "pet",
                         "--hash-bits", "12", "--budget", "5", "--params",
                         '{"update_on": "hinge"}', "--param", "eta=0.5", "--zero-based")
    assert status == 0 and json.loads(out)["hash_bits"] == 12
    status, out, _ = run(capsys, "models", "create", "house", "--algorithm", "cs-g-omp",
                         "--group", "size=rooms,area:1", "--group", "survey=quality:20.5",
                         "--param", "retrain_every_examples=null")
    assert status == 0
    house = json.loads(out)
    assert house["family"] == "anytime" and house["task"] == "regression"
    assert house["groups"] == [{"name": "size", "features": ["rooms", "area"], "cost": 1.0},
                               {"name": "survey", "features": ["quality"], "cost": 20.5}]
    assert house["params"]["retrain_every_examples"] is None

    with FeaturebudgetClient(server) as client:
        assert client.get_model("clicks").params == {"update_on": "hinge", "eta": 0.5}
        assert client.get_model("clicks").raw["hash_bits"] == 12
        client.post_examples("spam", ONLINE, wait=True)

    status, out, _ = run(capsys, "models", "list")
    rows = table(out)
    assert status == 0 and [r[0] for r in rows[1:]] == ["clicks", "house", "spam"]
    assert rows[3] == ["spam", "sofs", "online", "2", "0.5000", "-"]
    assert rows[2] == ["house", "cs-g-omp", "anytime", "0", "-", "-"]
    status, out, _ = run(capsys, "models", "list", "--json")
    listing = json.loads(out)["models"]
    assert [m["name"] for m in listing] == ["clicks", "house", "spam"]

    status, out, _ = run(capsys, "models", "show", "spam")
    shown = json.loads(out)
    assert status == 0 and shown["examples_applied"] == 2
    assert {f["index"] for f in shown["selected_features"]} == {3, 4, 17}

    status, out, _ = run(capsys, "models", "delete", "clicks")
    assert status == 0 and json.loads(out) == {"model": "clicks", "deleted": True}
    with FeaturebudgetClient(server) as client:
        assert [m.name for m in client.list_models()] == ["house", "spam"]

    # the service's errors: one line on stderr, exit status 1
    status, out, err = run(capsys, "models", "show", "clicks")
    assert (status, out) == (1, "") and err.startswith("featurebudget models show: 404")
    status, out, err = run(capsys, "models", "delete", "clicks")
    assert status == 1 and "404" in err
    status, out, err = run(capsys, "models", "create", "spam", "--algorithm", "sofs",
                           "--n-features", "10", "--budget", "2")
    assert status == 1 and "409" in err and "already exists" in err
    status, out, err = run(capsys, "models", "create", "bad", "--algorithm", "sofs",
                           "--budget", "2")
    assert status == 1 and "422" in err and "exactly one of n_features" in err


def test_models_create_usage_errors_and_groups_file(server, capsys, tmp_path):
    url = ["--url", server]
    for extra, message in [(["--group", "size=rooms"], "NAME=FEATURE"),
                           (["--group", "size=rooms:cheap"], "is not a number"),
                           (["--group", "size=rooms:1", "--budget", "3"], "batch model"),
                           (["--params", "[1"], "not a JSON object"),
                           (["--param", "novalue"], "KEY=VALUE")]:
        status, out, err = run(capsys, "models", "create", "x", "--algorithm", "cs-g-omp",
                               *url, *extra)
        assert (status, out) == (2, "") and message in err, (extra, err)
    status, _, err = run(capsys, "models", "create", "x", "--algorithm", "sofs",
                         "--n-features", "5", "--task", "regression", *url)
    assert status == 2 and "--task is for batch models" in err

    groups = tmp_path / "groups.json"
    groups.write_text(json.dumps([{"name": "a", "features": ["f1", "f2"], "cost": 1},
                                  {"name": "b", "features": ["f3"], "cost": 2}]))
    status, out, _ = run(capsys, "models", "create", "g", "--algorithm", "gbfs", "--task",
                         "classification", "--groups-file", str(groups), *url)
    assert status == 0
    created = json.loads(out)
    assert created["family"] == "gbfs" and created["task"] == "classification"
    assert [g["name"] for g in created["groups"]] == ["a", "b"]
    status, _, err = run(capsys, "models", "create", "h", "--algorithm", "gbfs",
                         "--groups-file", str(tmp_path / "missing.json"), *url)
    assert status == 2 and "missing.json" in err


def test_snapshot_get_put_round_trip(server, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with FeaturebudgetClient(server) as client:
        client.create_model("spam", algorithm="sofs", n_features=100, budget=5)
        client.post_examples("spam", ONLINE, wait=True)
        before = client.get_model("spam")

        status, out, _ = run(capsys, "snapshot", "get", "spam", "--url", server)
        written = json.loads(out)
        assert status == 0 and written["file"] == "spam.fbstate"
        blob = (tmp_path / "spam.fbstate").read_bytes()
        assert written["bytes"] == len(blob) and blob == client.get_snapshot("spam")
        assert not list(tmp_path.glob("*.part"))

        stdout = io.TextIOWrapper(io.BytesIO())
        with monkeypatch.context() as patch:
            patch.setattr("sys.stdout", stdout)
            assert main(["snapshot", "get", "spam", "-o", "-", "--url", server]) == 0
        assert stdout.buffer.getvalue() == blob

        client.post_examples("spam", ONLINE * 3, wait=True)
        assert client.get_model("spam").examples_applied == 8
        status, out, _ = run(capsys, "snapshot", "put", "spam", "spam.fbstate", "--url",
                             server)
        restored = json.loads(out)
        assert status == 0 and restored["examples_applied"] == 2
        after = client.get_model("spam")
        assert after.examples_applied == 2
        assert after.selected_features == before.selected_features

        # from stdin, to another model of the same configuration
        client.create_model("copy", algorithm="sofs", n_features=100, budget=5)
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(blob)))
        status, out, _ = run(capsys, "snapshot", "put", "copy", "-", "--url", server)
        assert status == 0 and json.loads(out)["examples_applied"] == 2
        assert client.get_model("copy").selected_features == before.selected_features

        # another configuration is refused by the service; a missing file is a usage error
        client.create_model("other", algorithm="sofs", n_features=100, budget=7)
        status, out, err = run(capsys, "snapshot", "put", "other", "spam.fbstate", "--url",
                               server)
        assert (status, out) == (1, "") and "422" in err and "budget" in err
        status, _, err = run(capsys, "snapshot", "put", "spam", "nope.fbstate", "--url",
                             server)
        assert status == 2 and "nope.fbstate" in err
        status, _, err = run(capsys, "snapshot", "get", "missing", "--url", server)
        assert status == 1 and "404" in err and not (tmp_path / "missing.fbstate").exists()


def test_api_key_from_the_environment(keyed_server, capsys, monkeypatch):
    monkeypatch.setenv("FEATUREBUDGET_URL", keyed_server)
    status, _, err = run(capsys, "models", "list")
    assert status == 1 and "401" in err
    monkeypatch.setenv("FEATUREBUDGET_API_KEY", "reader-key")
    assert run(capsys, "models", "list")[0] == 0
    status, _, err = run(capsys, "models", "create", "m", "--algorithm", "ogd",
                         "--n-features", "10")
    assert status == 1 and "403" in err
    status, out, _ = run(capsys, "models", "create", "m", "--algorithm", "ogd",
                         "--n-features", "10", "--api-key", "admin-key")
    assert status == 0 and json.loads(out)["algorithm"] == "ogd"


def test_unreachable_service(capsys):
    from tests.support.ports import free_port

    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    status, _, err = run(capsys, "models", "list", "--url", url)
    assert status == 1 and f"featurebudget models list: cannot reach {url}" in err
    status, _, err = run(capsys, "snapshot", "get", "m", "--url", url)
    assert status == 1 and "featurebudget snapshot get: cannot reach" in err


@pytest.mark.parametrize("argv", [["models"], ["models", "list"], ["models", "create"],
                                  ["models", "show"], ["models", "delete"], ["snapshot"],
                                  ["snapshot", "get"], ["snapshot", "put"]])
def test_help_shows_examples(argv, capsys):
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args([*argv, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "examples:" in out and f"featurebudget {argv[0]} " in out
    if argv[-1] in ("list", "create", "show", "delete", "get", "put"):
        assert "--url" in out and "--api-key" in out
        assert "FEATUREBUDGET_URL" in out and "FEATUREBUDGET_API_KEY" in out


def test_top_level_help_names_the_chores(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"])
    out = capsys.readouterr().out
    assert "featurebudget models list" in out and "featurebudget snapshot get" in out


def _subparser(parser, *path):
    for name in path:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


def test_create_help_names_every_algorithm_of_the_registries():
    """The CLI's help reads the algorithms from the registries when it is printed: the
    lists are the API's, online and batch, in the registries' order."""
    from service.batch.families import FAMILIES
    from service.schemas import batch_algorithms, online_algorithms

    create = _subparser(build_parser(), "models", "create")
    text = create.format_help()
    action = next(a for a in create._actions if a.dest == "algorithm")
    algorithm = create._get_formatter()._expand_help(action)
    named = re.findall(r"[a-z][a-z-]*", algorithm.replace(" or ", ", "))
    assert named == [*online_algorithms(), *batch_algorithms()]
    online, batch = re.search(r"Online learners \(([^)]*)\).*batch models\s+\(([^)]*)\)",
                              text, re.S).groups()
    assert re.findall(r"[a-z][a-z-]*", online) == list(online_algorithms())
    assert re.findall(r"[a-z][a-z-]*", batch) == list(batch_algorithms())
    listing = _subparser(build_parser(), "models", "list").format_help()
    families = re.search(r"family \(([^)]*)\)", listing).group(1)
    assert families.split(", ") == ["online", *FAMILIES]
