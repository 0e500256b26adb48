"""``featurebudget predict`` against the real service on a loopback port: a libsvm,
JSON-lines or Parquet file scored into JSON lines or CSV, the same answers as ``/predict``
gives for the same examples, errors naming the file's own line in one line, and a failed
run resumed (``--resume``) without a prediction written twice or left out."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import numpy as np
import pytest

from clients.http import FeaturebudgetClient
from service.cli import main
from service.settings import Settings
from tests.support.live_server import live_server

LINES = 3000
EXAMPLES = LINES - 2  # a blank line and a comment among them
GROUPS = [("exam", ["bmi", "bp"], 1.0), ("blood", ["s1"], 5.0)]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    settings = Settings(redis_url=None, data_dir=tmp_path_factory.mktemp("data"), api_keys="",
                        consumer_block_ms=20, job_poll_seconds=0.05)
    with live_server(settings, start_timeout=600, ports=range(18380, 18400)) as url:
        with FeaturebudgetClient(url) as client:
            client.create_model("spam", algorithm="pet", n_features=20, budget=5)
            client.post_examples("spam", [{"indices": [k % 10, 10 + k % 7],
                                           "values": [1.0, -0.5], "label": 1 if k % 3 else -1}
                                          for k in range(200)], wait=True)
            rng = np.random.default_rng(1)
            client.create_batch_model("house", algorithm="cs-g-omp", groups=GROUPS)
            client.post_examples("house", [
                {"features": {"exam": {"bmi": a, "bp": b}, "blood": {"s1": c}},
                 "target": 2 * a + c} for a, b, c in rng.normal(size=(120, 3))], wait=True)
            job = client.wait_for_job("house", client.retrain("house").id, timeout=300)
            assert job.succeeded, job.error
        yield url


def libsvm_lines(bad_line: int | None = None, bad: str = "1 25:1") -> list[str]:
    """LINES lines, line k (1-based) an example of features k % 20 + 1 and
    (7k + 3) % 20 + 1 (1-based), line 10 blank, line 11 a comment; ``bad_line`` is
    ``bad`` instead."""
    lines = []
    for k in range(1, LINES + 1):
        line = f"{1 if k % 3 else -1} {k % 20 + 1}:1 {(k * 7 + 3) % 20 + 1}:0.5"
        lines.append({10: "", 11: "# a comment", bad_line: bad}.get(k, line))
    return lines


def write(path, lines: list[str]) -> str:
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def run(capsys, *argv) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def read_jsonl(path) -> list[dict]:
    return [json.loads(line) for line in open(path)]


def expected_scores(url: str, lines: list[str]) -> list[float]:
    """``/predict``'s scores of the example lines (0-based indices), in one request."""
    examples = []
    for line in lines:
        if line and not line.startswith("#"):
            pairs = [token.split(":") for token in line.split()[1:]]
            examples.append({"indices": [int(i) - 1 for i, _ in pairs],
                             "values": [float(v) for _, v in pairs]})
    with FeaturebudgetClient(url) as client:
        return client.predict("spam", examples).scores


def test_a_libsvm_file_is_scored_as_predict_scores_it(server, capsys, tmp_path):
    lines = libsvm_lines()
    path, out = write(tmp_path / "test.svm", lines), tmp_path / "scores.jsonl"
    status, stdout, err = run(capsys, "predict", path, "--model", "spam", "--out", str(out),
                              "--url", server, "--quiet", "--batch-size", "700")
    assert status == 0, err
    assert json.loads(stdout)["examples"] == EXAMPLES
    records = read_jsonl(out)
    assert [r["example"] for r in records] == list(range(1, EXAMPLES + 1))
    assert [r["score"] for r in records] == expected_scores(server, lines)
    assert {r["label"] for r in records} <= {-1, 1}
    assert len({r["score"] for r in records}) > 1  # (a trained model)


def test_a_refused_line_is_named_and_the_run_resumes_after_it(server, capsys, tmp_path):
    """The service refuses line 2500's example (index 25 of a 20-feature model): the error
    names that line, the first 2,000 predictions are in OUT, a rerun without --resume
    leaves them alone, and --resume (after a line cut short by a crash) goes on."""
    path, out = write(tmp_path / "test.svm", libsvm_lines(2500)), tmp_path / "scores.jsonl"
    argv = ("predict", path, "--model", "spam", "--out", str(out), "--url", server,
            "--quiet")
    status, stdout, err = run(capsys, *argv)
    assert status == 2 and stdout == "" and err.count("\n") == 1, err
    assert f"{path}, line 2500, field 'indices'" in err
    assert f"the first 2,000 examples of {path} are in {out}" in err and "--resume" in err
    assert len(read_jsonl(out)) == 2000
    lines = libsvm_lines()
    write(tmp_path / "test.svm", lines)  # the line fixed
    status, _, err = run(capsys, *argv)
    assert status == 2 and "already holds predictions (through example 2,000)" in err
    assert "--resume" in err and "--overwrite" in err
    with open(out, "ab") as handle:
        handle.write(b'{"example": 2001, "sco')  # a record cut short
    status, stdout, err = run(capsys, *argv, "--resume")
    assert status == 0, err
    assert json.loads(stdout)["skipped"] == 2000
    records = read_jsonl(out)
    assert [r["example"] for r in records] == list(range(1, EXAMPLES + 1))
    assert [r["score"] for r in records] == expected_scores(server, lines)
    status, _, err = run(capsys, *argv, "--overwrite", "--skip", "2990")
    assert status == 0, err
    assert [r["example"] for r in read_jsonl(out)] == list(range(2991, EXAMPLES + 1))


def test_a_malformed_line_is_named_before_it_is_sent(server, capsys, tmp_path):
    path = write(tmp_path / "test.svm", libsvm_lines(1234, "1 7:x"))
    out = tmp_path / "scores.csv"
    status, _, err = run(capsys, "predict", path, "--model", "spam", "--out", str(out),
                         "--url", server, "--quiet")
    assert status == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert f"{path}, line 1234, column" in err and "the first 1,000 examples" in err
    assert next(csv.reader(open(out))) == ["example", "score", "label"]


def test_a_model_of_zero_based_libsvm_reads_the_file_zero_based(server, capsys, tmp_path):
    """GET /v1/models/{m} says libsvm_zero_based; the file is read as the model reads it."""
    with FeaturebudgetClient(server) as client:
        client.create_model("zero", algorithm="pet", n_features=20, budget=5,
                            libsvm_zero_based=True)
        client.post_libsvm("zero", "1 0:1 19:0.5\n-1 1:1\n", wait=True)
        assert client.get_model("zero").raw["libsvm_zero_based"] is True
        expected = client.predict("zero", [{"indices": [0, 19], "values": [1.0, 0.5]},
                                           {"indices": [1], "values": [1.0]}]).scores
    path = write(tmp_path / "zero.svm", ["1 0:1 19:0.5", "-1 1:1"])
    out = tmp_path / "zero.jsonl"
    status, _, err = run(capsys, "predict", path, "--model", "zero", "--out", str(out),
                         "--url", server, "--quiet")
    assert status == 0, err
    assert [r["score"] for r in read_jsonl(out)] == expected


def house_rows() -> list[dict]:
    """JSON-lines rows of the batch model: each carries one group or both."""
    rows = []
    for k in range(50):
        exam, blood = {"bmi": k / 50, "bp": -k / 100}, {"s1": (k % 7) / 7}
        rows.append({"features": [{"exam": exam}, {"blood": blood},
                                  {"exam": exam, "blood": blood}][k % 3]})
    return rows


def test_a_batch_model_answers_each_row_for_the_groups_it_carries(server, capsys, tmp_path):
    rows = house_rows()
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows[:25]) + "\n\n" +
                    "\n".join(json.dumps(r) for r in rows[25:]) + "\n")
    out = tmp_path / "house.csv"
    status, _, err = run(capsys, "predict", str(path), "--model", "house", "--out", str(out),
                         "--url", server, "--quiet", "--batch-size", "16")
    assert status == 0, err
    records = list(csv.DictReader(open(out)))
    assert list(records[0]) == ["example", "prediction", "cost", "groups_used", "next_group"]
    with FeaturebudgetClient(server) as client:
        answers = client.predict_batch("house", rows).answers
    assert [r["example"] for r in records] == [str(k) for k in range(1, 51)]
    assert [float(r["prediction"]) for r in records] == [a["prediction"] for a in answers]
    assert [r["groups_used"] for r in records] == [";".join(a["groups_used"])
                                                   for a in answers]
    assert {r["groups_used"] for r in records} == {"exam", "blood", "exam;blood"}
    assert [r["next_group"] for r in records] == [(a["next_group"] or {}).get("name", "")
                                                  for a in answers]
    assert [float(r["cost"]) for r in records] == [a["cost"] for a in answers]


def test_computed_groups_and_parquet_rows(server, capsys, tmp_path):
    """Parquet columns named as features (a null: a value the row does not carry), answered
    for the groups each row carries, then for --computed-groups, then --max-cost, for every
    row."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as parquet

    rows = house_rows()
    table = {name: [r["features"].get(group, {}).get(name) for r in rows]
             for group, names, _ in GROUPS for name in names}
    table["target"] = [0.0] * len(rows)  # left out
    path = str(tmp_path / "rows.parquet")
    parquet.write_table(pa.table(table), path, row_group_size=20)
    out = tmp_path / "house.jsonl"
    argv = ("predict", path, "--model", "house", "--out", str(out), "--url", server,
            "--quiet", "--batch-size", "16")
    status, _, err = run(capsys, *argv)
    assert status == 0, err
    with FeaturebudgetClient(server) as client:
        answers = client.predict_batch("house", rows).answers
        exam_only = client.predict_batch("house", rows, computed_groups=["exam"]).answers
    records = read_jsonl(out)
    assert [r["prediction"] for r in records] == [a["prediction"] for a in answers]
    assert [r["groups_used"] for r in records] == [a["groups_used"] for a in answers]
    assert [r["next_group"] for r in records] == [a["next_group"] for a in answers]
    status, _, err = run(capsys, *argv, "--overwrite", "--computed-groups", "exam")
    assert status == 0, err
    records = read_jsonl(out)
    assert [r["prediction"] for r in records] == [a["prediction"] for a in exam_only]
    assert {tuple(r["groups_used"]) for r in records} == {("exam",)}
    assert [r["example"] for r in records] == list(range(1, 51))
    status, _, err = run(capsys, *argv, "--overwrite", "--max-cost", "1.5")
    assert status == 0, err
    with FeaturebudgetClient(server) as client:
        capped = client.predict_batch("house", rows, max_cost=1.5).answers
    assert [r["prediction"] for r in read_jsonl(out)] == [a["prediction"] for a in capped]


def test_parquet_columns_are_an_online_models_indices(server, capsys, tmp_path):
    """Columns named by 0-based index, in any order; a null or a 0 is a value left out."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as parquet

    rng = np.random.default_rng(3)
    dense = rng.normal(size=(30, 20)).round(3)
    dense[rng.random(size=dense.shape) < 0.5] = np.nan
    order = rng.permutation(20)
    table = pa.table({str(j): pa.array(dense[:, j].tolist(), from_pandas=True) for j in order}
                     | {"label": [1] * 30})
    path = str(tmp_path / "rows.pq")
    parquet.write_table(table, path)
    out = tmp_path / "scores.jsonl"
    status, _, err = run(capsys, "predict", path, "--model", "spam", "--out", str(out),
                         "--url", server, "--quiet", "--batch-size", "7")
    assert status == 0, err
    examples = [{"indices": np.flatnonzero(~np.isnan(row)).tolist(),
                 "values": row[~np.isnan(row)].tolist()} for row in dense]
    with FeaturebudgetClient(server) as client:
        expected = client.predict("spam", examples).scores
    assert [r["score"] for r in read_jsonl(out)] == expected


CASES = {
    "missing file": (2, "cannot read"),
    "unknown model": (1, "no model named 'absent'"),
    "unreachable": (1, "cannot reach http://127.0.0.1:9"),
    "groups of an online model": (2, "--computed-groups and --max-cost are for batch models"),
    "unknown group": (2, "--computed-groups"),
    "not JSON": (2, "line 2: not valid JSON"),
    "resume and skip": (2, "--resume takes its place from the output"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_errors_are_one_line_without_a_traceback(server, tmp_path, case):
    """The real command in a subprocess: one line on stderr, the exit status of CASES."""
    path = write(tmp_path / "test.svm", libsvm_lines()[:20])
    argv = [path, "--model", "spam", "--out", str(tmp_path / "o.jsonl"), "--url", server]
    if case == "missing file":
        argv[0] = str(tmp_path / "nowhere.svm")
    elif case == "unknown model":
        argv[2] = "absent"
    elif case == "unreachable":
        argv[-1] = "http://127.0.0.1:9"
    elif case == "groups of an online model":
        argv += ["--computed-groups", "exam"]
    elif case == "unknown group":
        argv[2] = "house"
        argv[0] = str(tmp_path / "rows.jsonl")
        (tmp_path / "rows.jsonl").write_text(json.dumps(house_rows()[0]) + "\n")
        argv += ["--computed-groups", "exam,lab"]
    elif case == "not JSON":
        argv[0] = str(tmp_path / "rows.jsonl")
        (tmp_path / "rows.jsonl").write_text('{"indices": [1], "values": [1]}\n{"indices"\n')
    elif case == "resume and skip":
        argv += ["--resume", "--skip", "3"]
    done = subprocess.run([sys.executable, "-m", "service.cli", "predict", *argv, "--quiet"],
                          capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
    status, message = CASES[case]
    assert (done.returncode, message in done.stderr) == (status, True), done.stderr
