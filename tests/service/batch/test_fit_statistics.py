"""Statistics of sharded files on a real dask.distributed LocalCluster (2 worker processes):
they equal one pass over the files (1e-10 relative) with the files' held-out rule, also
when a worker is SIGKILLed mid-task (Dask runs its task again); published into a real
anytime model (embedded backend and Redis), the batch worker folds the log on after the
published position, and its retrains equal direct fits on the same statistics. Bad input
and a held fold are refused with nothing published."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import signal
import time
import zlib
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from algorithms.anytime import AnytimeLinearModel, SufficientStatistics
from service.app import create_app
from service.batch.offline.distributed_statistics import FileStatistics, fit_statistics
from service.batch.offline.file_statistics import FileInputError, tree_levels, tree_reduce
from service.batch.offline.publish_statistics import END, PublishError, publish, publish_statistics
from service.batch.worker.fold_state import held_out
from service.cli import main
from service.settings import Settings
from tests.support.batch_data import DIABETES_GROUPS, NO_POLICY, diabetes, named_examples
from tests.support.snapshots import snapshot_of

D = 10
FRACTION = 0.25
GROUPS = [np.arange(0, 2), np.arange(2, 4), np.arange(4, 7), np.arange(7, 10)]


# ---------------------------------------------------------------------- references
def splitmix64(x: int) -> int:
    mask = (1 << 64) - 1
    z = (x + 0x9E3779B97F4A7C15) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return z ^ (z >> 31)


def held(path: str, position: int, fraction: float) -> bool:
    """The documented rule, on Python integers."""
    x = ((zlib.crc32(os.path.basename(path).encode()) << 32) + position) & ((1 << 64) - 1)
    return (splitmix64(x) >> 11) * 2.0 ** -53 < fraction


def plain_rows(path: str) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """A plain reader: (dense X, y, byte offset of each row's line)."""
    data = Path(path).read_bytes()
    rows, targets, offsets, offset = [], [], [], 0
    for line in data.split(b"\n"):
        body = line.split(b"#")[0].strip(b" \t\r")
        if body:
            tokens = body.split()
            x = np.zeros(D)
            for token in tokens[1:]:
                index, value = token.split(b":")
                x[int(index) - 1] = float(value)
            rows.append(x)
            targets.append(float(tokens[0]))
            offsets.append(offset)
        offset += len(line) + 1
    return np.array(rows).reshape(-1, D), np.array(targets), offsets


def one_pass(parts: list[tuple[np.ndarray, np.ndarray]]) -> SufficientStatistics:
    X = np.concatenate([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    return SufficientStatistics.from_data(X, y, n_features=D)


def file_reference(paths, fraction=FRACTION):
    """(train, validation) parts of libsvm files by the files' rule."""
    train, validation = [], []
    for path in paths:
        X, y, offsets = plain_rows(path)
        mask = np.array([held(path, o, fraction) for o in offsets], dtype=bool)
        train.append((X[~mask], y[~mask]))
        validation.append((X[mask], y[mask]))
    return train, validation


def assert_same(got: SufficientStatistics, want: SufficientStatistics, rtol=1e-10) -> None:
    assert got.n == want.n
    for name in ("mean_x", "mxx", "mxy", "mean_y", "myy"):
        a, b = np.asarray(getattr(got, name)), np.asarray(getattr(want, name))
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * max(1.0, np.abs(b).max()),
                                   err_msg=name)


def write_shards(directory: Path, X, y, cuts, stem="part") -> list[str]:
    """libsvm shards of rows ``cuts`` with comments, blank and indented lines, CRLF line
    ends and a last line without its newline."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for k, (a, b) in enumerate(cuts):
        lines = [f"# shard {k}"]
        for row in range(a, b):
            pairs = " ".join(f"{j + 1}:{float(X[row, j])!r}" for j in np.flatnonzero(X[row]))
            line = f"{float(y[row])!r} {pairs}"
            if row % 17 == 3:
                line = "  " + line + "  # indented"
            if row % 23 == 5:
                line += "\r"
            lines.append(line)
            if row % 29 == 7:
                lines.append("   ")
        path = directory / f"{stem}-{k}.svm"
        path.write_text("\n".join(lines) + ("" if k % 2 else "\n"))
        paths.append(str(path))
    return paths


def sparse_diabetes():
    X, y = diabetes()
    X = np.where(np.abs(X) < 0.02, 0.0, X)  # about half the values are zeros
    return X, y


@pytest.fixture(scope="module")
def cluster():
    """A real LocalCluster: 2 worker processes, one thread each, no dashboard."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address="127.0.0.1:0", host="127.0.0.1") as local, \
            distributed.Client(local) as client:
        yield client


# ---------------------------------------------------------------------- the pure part
def test_dask_is_imported_only_for_a_cluster_and_the_command_explains_itself(capsys):
    import subprocess
    import sys

    code = ("import sys, service.cli, service.batch.offline.distributed_statistics, "
            "service.batch.offline.publish_statistics; "
            "assert not {'dask', 'distributed'} & set(sys.modules), 'dask imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
    with pytest.raises(SystemExit) as exit_:
        main(["fit-statistics", "--help"])
    assert exit_.value.code == 0
    assert "examples:" in capsys.readouterr().out
    assert main(["fit-statistics", "d", "x.svm"]) == 2  # no position given
    assert "--after-log-id" in capsys.readouterr().err


def test_the_files_held_out_rule_and_the_merge_tree():
    from service.batch.offline.file_statistics import held_out_rows

    positions = np.array([0, 1, 57, 2**31 + 5, 2**40])
    mask = held_out_rows("/a/b/part-3.svm", positions, 0.3)
    assert mask.tolist() == [held("part-3.svm", int(p), 0.3) for p in positions]
    assert held_out_rows("/elsewhere/part-3.svm", positions, 0.3).tolist() == mask.tolist()
    assert not held_out_rows("x", positions, 0.0).any()
    # the streaming reduction follows the levels of the Dask run exactly
    for k in (2, 3, 4):
        for n in range(1, 40):
            items = list(range(n))
            for level in tree_levels(n, k):
                items = [tuple(items[i] for i in group) for group in level]
            assert tree_reduce(iter(range(n)), lambda *a: a, k) == items[0]


def test_any_partitioning_gives_one_pass(tmp_path):
    X, y = sparse_diabetes()
    paths = write_shards(tmp_path, X, y, [(0, 150), (150, 151), (151, 300)])
    (tmp_path / "empty.svm").write_text("")
    train_parts, validation_parts = file_reference(paths)
    want_train, want_validation = one_pass(train_parts), one_pass(validation_parts)
    assert want_validation.n > 40
    results = []
    for block in (7, 300, 1 << 20):
        stats = fit_statistics([tmp_path], D, validation_fraction=FRACTION,
                               block_bytes=block)
        assert stats.rows == 300 and stats.files == 4
        assert_same(stats.train, want_train)
        assert_same(stats.validation, want_validation)
        results.append(stats)
    assert results[0].partitions > 100
    whole = fit_statistics(paths, D)  # no held-out part
    assert_same(whole.train, one_pass(train_parts + validation_parts))
    assert whole.validation.n == 0


# ---------------------------------------------------------------------- on Dask
def test_dask_statistics_equal_one_pass_libsvm_and_parquet(cluster, tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    X, y = sparse_diabetes()
    paths = write_shards(tmp_path / "svm", X, y, [(0, 100), (100, 220), (220, 300)])
    names = [f"f{j}" for j in range(D)]
    table = {name: pa.array([None if v == 0 else float(v) for v in X[300:, j]])
             for j, name in enumerate(names) if j != 4}  # feature 4 has no column: zeros
    table["target"] = pa.array(y[300:])
    parquet = tmp_path / "rest.parquet"
    pq.write_table(pa.table(table), parquet, row_group_size=40)
    files = [*paths, str(parquet)]
    options = dict(validation_fraction=FRACTION, columns=names, block_bytes=2000)
    got = fit_statistics(files, D, client=cluster, **options)
    assert got.partitions > 10 and got.rows == len(y)
    train, validation = file_reference(paths)
    Xp = X[300:].copy()
    Xp[:, 4] = 0.0
    mask = np.array([held(str(parquet), r, FRACTION) for r in range(len(Xp))])
    train.append((Xp[~mask], y[300:][~mask]))
    validation.append((Xp[mask], y[300:][mask]))
    assert_same(got.train, one_pass(train))
    assert_same(got.validation, one_pass(validation))
    here = fit_statistics(files, D, **options)  # the same tree in this process: same bits
    assert here.train.mxx.tobytes() == got.train.mxx.tobytes()
    assert here.validation.mxy.tobytes() == got.validation.mxy.tobytes()


def stall_plugin(marker_dir: str, victim: str):
    """A worker plugin: every partition attempt is logged (pid, path, start); the first
    attempt at ``victim``'s first partition writes its pid to ``stalled`` and sleeps
    inside the task, to be killed there."""
    from distributed.diagnostics.plugin import WorkerPlugin

    class Stall(WorkerPlugin):
        name = "fb-stall"

        def setup(self, worker):
            import service.batch.offline.distributed_statistics as module

            original = module.partition_statistics

            def stalled(part, reading):
                with open(os.path.join(marker_dir, "attempts"), "a") as log:
                    log.write(f"{os.getpid()} {part.path} {part.start}\n")
                if part.path == victim and part.start == 0:
                    try:
                        fd = os.open(os.path.join(marker_dir, "stalled"),
                                     os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                    except FileExistsError:
                        pass
                    else:
                        os.write(fd, str(os.getpid()).encode())
                        os.close(fd)
                        time.sleep(120)
                return original(part, reading)

            module.partition_statistics = stalled

    return Stall()


def test_a_worker_killed_mid_task_is_retried_and_changes_nothing(tmp_path):
    distributed = pytest.importorskip("distributed")
    X, y = sparse_diabetes()
    paths = write_shards(tmp_path / "svm", X, y, [(0, 110), (110, 220), (220, 442)])
    want = fit_statistics(paths, D, validation_fraction=FRACTION, block_bytes=3000)
    marks = tmp_path / "marks"
    marks.mkdir()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address="127.0.0.1:0", host="127.0.0.1") as local, \
            distributed.Client(local) as client:
        client.register_plugin(stall_plugin(str(marks), paths[1]))
        before = set(client.run(os.getpid).values())
        with concurrent.futures.ThreadPoolExecutor(1) as pool:  # the run, from a thread
            running = pool.submit(fit_statistics, paths, D, client=client,
                                  validation_fraction=FRACTION, block_bytes=3000)
            deadline = time.monotonic() + 30
            while not (marks / "stalled").exists() or not (marks / "stalled").read_text():
                assert time.monotonic() < deadline, "the victim task never started"
                assert not running.done(), running.result()
                time.sleep(0.02)
            victim_pid = int((marks / "stalled").read_text())
            assert victim_pid in before
            os.kill(victim_pid, signal.SIGKILL)
            got = running.result(timeout=60)
        after = set(client.run(os.getpid).values())
    assert victim_pid not in after
    attempts = [line.split() for line in (marks / "attempts").read_text().splitlines()]
    on_victim = [int(pid) for pid, path, start in attempts if path == paths[1] and
                 start == "0"]
    assert len(on_victim) == 2 and on_victim[0] == victim_pid != on_victim[1]
    assert got.rows == 442 and got.partitions == want.partitions
    assert_same(got.train, want.train)
    assert_same(got.validation, want.validation)
    assert got.train.mxx.tobytes() == want.train.mxx.tobytes()


def test_bad_files_are_named(cluster, tmp_path):
    X, y = sparse_diabetes()
    paths = write_shards(tmp_path, X, y, [(0, 200), (200, 300)])
    with pytest.raises(FileInputError, match="no such file"):
        fit_statistics([*paths, str(tmp_path / "missing.svm")], D, client=cluster)
    lines = Path(paths[1]).read_text().split("\n")
    lines[60] = "1.5 3:0.25 11:1.0"  # an index beyond the dimension
    Path(paths[1]).write_text("\n".join(lines))
    started = time.monotonic()
    with pytest.raises(FileInputError, match=rf"{paths[1]}:61:\d+: feature index 11 is "
                                             "out of range for 10 features"):
        fit_statistics(paths, D, client=cluster, block_bytes=1000)
    assert time.monotonic() - started < 20
    labels = tmp_path / "labels.svm"
    labels.write_text("1 1:0.5\n-1 2:0.25\n# comment\n0.5 3:0.25\n")
    with pytest.raises(FileInputError, match=rf"{labels}:4: the target 0.5 is not -1 or"):
        fit_statistics([labels], D, task="classification")


# ---------------------------------------------------------------------- publishing
def settings_for(backend: str, tmp_path: Path, redis_url: str | None) -> Settings:
    return Settings(redis_url=redis_url if backend == "redis" else None,
                    data_dir=tmp_path / "data", snapshot_every_seconds=3600,
                    consumer_block_ms=50, batch_worker=True, job_poll_seconds=0.05,
                    version_check_seconds=0.2)


def post(client, rows: tuple[int, int], X, y) -> str:
    response = client.post("/v1/models/d/examples?wait=true", json={
        "examples": named_examples(X, y, DIABETES_GROUPS, *rows)})
    assert response.status_code == 202, response.text
    return response.json()["log_ids"][0]


def wait_job(client, job_id: str, timeout: float = 60.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.get(f"/v1/models/d/jobs/{job_id}").json()
        if job["status"] in ("succeeded", "failed"):
            return job
        time.sleep(0.02)
    raise AssertionError(f"job {job_id} did not finish")


def fold_statistics(client) -> tuple[SufficientStatistics, SufficientStatistics]:
    state = snapshot_of(client.get("/v1/models/d/snapshot").content).model
    out = []
    for prefix in ("train", "validation"):
        sub = {k[len(prefix) + 1:]: v for k, v in state.items() if k.startswith(prefix + ".")}
        out.append(SufficientStatistics.from_state_dict(sub))
    return out[0], out[1]


def assert_serves(client, version: int, train, validation) -> None:
    """The served version's sequence and predictions are a direct fit's on (train,
    validation)."""
    reference = AnytimeLinearModel(groups=GROUPS, costs=[1, 2, 3, 4]).fit_statistics(
        train, validation=validation)
    sequence = client.get("/v1/models/d/sequence").json()
    assert sequence["version"] == version
    assert [p.get("name") for p in sequence["prefixes"][1:]] == \
        [DIABETES_GROUPS[g]["name"] for g in reference.sequence_]
    X, _ = diabetes()
    rows = named_examples(X, None, DIABETES_GROUPS, 0, 20)
    for j in range(len(reference.sequence_) + 1):
        budget = float(reference.cumulative_cost_[j])
        answer = client.post("/v1/models/d/predict", json={"examples": rows,
                                                           "budget": budget}).json()
        assert answer["version"] == version
        np.testing.assert_allclose(answer["predictions"], reference.predict(X[:20],
                                   max_cost=budget), rtol=1e-9, atol=1e-9)


@pytest.fixture
def redis_db5(request):
    """db 5 of the test Redis (flushed), for the Redis variant only."""
    if request.node.callspec.params["backend"] != "redis":
        return None
    return request.getfixturevalue("redis_url")


@pytest.mark.parametrize("backend", ["local", pytest.param("redis", marks=pytest.mark.redis)])
def test_published_statistics_fold_on_and_retrain_like_a_direct_fit(
        cluster, tmp_path, monkeypatch, capsys, backend, redis_db5):
    settings = settings_for(backend, tmp_path, redis_db5)
    if backend == "redis":
        monkeypatch.setenv("FEATUREBUDGET_REDIS_URL", redis_db5)
        where = ["--redis-url", redis_db5]
    else:
        monkeypatch.delenv("FEATUREBUDGET_REDIS_URL", raising=False)
        where = ["--data-dir", str(settings.data_dir)]
    monkeypatch.setenv("FEATUREBUDGET_DATA_DIR", str(settings.data_dir))
    X, y = diabetes()
    paths = write_shards(tmp_path / "svm", X, y, [(0, 120), (120, 300)])
    dask = ["--scheduler", cluster.scheduler.address] if backend == "redis" else \
        ["--workers", "2"]  # a LocalCluster of the command's own
    command = ["fit-statistics", "d", *paths, "--after-log-id", "end", "--retrain", *dask,
               *where]
    with TestClient(create_app(settings)) as client:
        response = client.post("/v1/models", json={
            "name": "d", "algorithm": "cs-g-omp", "groups": DIABETES_GROUPS,
            "params": dict(NO_POLICY, validation_fraction=FRACTION)})
        assert response.status_code == 201, response.text
        replaced = post(client, (300, 340), X, y)  # the files replace these
        before = client.get("/v1/models/d").json()
        assert main(command) == 1  # the running service holds the fold: refused
        if backend == "redis":  # and the lease, at the write itself
            with pytest.raises(PublishError, match="is being folded by process"):
                publish(settings, "d", fit_statistics(paths, D), after_log_id=END)
        assert client.get("/v1/models/d").json()["log_position"] == before["log_position"]
    if backend == "redis":
        import redis

        from service.storage import redis_keys
        snapshot = redis.Redis.from_url(redis_db5).hgetall(redis_keys.snapshot_key("d"))
    assert main(command[:2] + ["/nowhere.svm"] + command[2 + len(paths):]) == 2
    if backend == "redis":
        assert redis.Redis.from_url(redis_db5).hgetall(redis_keys.snapshot_key("d")) == snapshot
    capsys.readouterr()
    assert main(command) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["published"] and out["log_position"] == replaced and out["rows"] == 300
    train_parts, validation_parts = file_reference(paths)
    files_train, files_validation = one_pass(train_parts), one_pass(validation_parts)
    assert out["train_examples"] == files_train.n
    with TestClient(create_app(settings)) as client:
        job = wait_job(client, out["job"])  # queued by --retrain: the files alone
        assert job["status"] == "succeeded", job
        assert job["trained_through"] == replaced and job["examples_used"] == files_train.n
        assert_serves(client, job["version"], files_train, files_validation)
        entries = [(post(client, rows, X, y), rows) for rows in ((340, 400), (400, 442))]
        status = client.get("/v1/models/d").json()
        assert status["examples_applied"] == 300 + 102
        assert status["log_position"] == entries[-1][0]
        for entry_id, (a, b) in entries:  # the log's part, by the log's rule
            mask = held_out(entry_id, b - a, FRACTION)
            train_parts.append((X[a:b][~mask], y[a:b][~mask]))
            validation_parts.append((X[a:b][mask], y[a:b][mask]))
        train, validation = fold_statistics(client)
        assert_same(train, one_pass(train_parts))
        assert_same(validation, one_pass(validation_parts))
        response = client.post("/v1/models/d/retrain")
        assert response.status_code == 202
        job = wait_job(client, response.json()["id"])
        assert job["status"] == "succeeded" and job["examples_used"] == train.n
        assert_serves(client, job["version"], one_pass(train_parts),
                      one_pass(validation_parts))


def test_refusals_publish_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv("FEATUREBUDGET_REDIS_URL", raising=False)
    settings = settings_for("local", tmp_path, None)
    X, y = diabetes()
    with TestClient(create_app(settings)) as client:
        for name, algorithm, extra in (("d", "cs-g-omp", {}),
                                       ("g", "gbfs", {"task": "regression"})):
            response = client.post("/v1/models", json={
                "name": name, "algorithm": algorithm, "groups": DIABETES_GROUPS,
                "params": dict(NO_POLICY), **extra})
            assert response.status_code == 201, response.text
        first = post(client, (0, 50), X, y)
        second = post(client, (50, 100), X, y)
    paths = write_shards(tmp_path / "svm", X, y, [(0, 100)])
    stats = fit_statistics(paths, D, validation_fraction=0.2)
    narrow = FileStatistics(SufficientStatistics(D - 1), SufficientStatistics(D - 1), 0, 0,
                            0, 0.0, 0.0)
    snapshot = settings.data_dir / "models" / "d" / "snapshot.fbs"
    saved = snapshot.read_bytes()

    async def attempts():
        from service.storage import make_storage

        storage = make_storage(settings)
        await storage.open()
        try:
            cases = [("nope", stats, {}, "there is no model 'nope'"),
                     ("g", stats, {}, "is a gbfs model"),
                     ("d", narrow, {}, "have 9 features, model 'd' has 10"),
                     ("d", stats, {"after_log_id": "x-1"}, "not a log id"),
                     ("d", stats, {"after_log_id": "3"}, "after the log's end"),
                     ("d", stats, {"after_log_id": first}, "already includes the log up"),
                     ("d", stats, {"after_log_id": None}, "already includes the log up")]
            for model, statistics, options, message in cases:
                with pytest.raises(PublishError, match=message):
                    await publish_statistics(storage, model, statistics, **options)
                assert snapshot.read_bytes() == saved
            merged = await publish_statistics(storage, "d", stats, merge=True)
            assert merged["log_position"] == second and merged["examples"] == 200
            explicit = await publish_statistics(storage, "d", stats, after_log_id=second)
            assert explicit["examples"] == 100
            return await publish_statistics(storage, "d", stats, after_log_id=END)
        finally:
            await storage.close()

    assert asyncio.run(attempts())["log_position"] == second
