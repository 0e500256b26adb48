"""Restores that apply whole or change nothing, as tests and the fuzz campaign check them:
a fitted batch model of each family over the API, its answers on every route, nested
changes to its snapshot (the fold state, the artifact's metadata, the model's arrays), a
hypothesis strategy of such changes, and the judgement of one PUT.

A client is anything with ``get`` / ``post`` / ``put`` answering like ``requests`` or
``TestClient`` (status_code, json(), headers, content).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import strategies as st

from algorithms.serialization import dumps_state, loads_state
from tests.support.batch_api import create_batch, retrain
from tests.support.batch_data import DIABETES_GROUPS, diabetes, named_examples
from tests.support.snapshots import snapshot_bytes, snapshot_of

# (algorithm, task) of every batch family
FAMILY_CASES = [("cs-g-omp", "regression"), ("cs-g-omp", "classification"),
                ("gbfs", "regression"), ("gbfs", "classification"),
                ("nvsd", "regression"), ("auto", "regression"), ("auto", "classification")]
PARAMS = {"gbfs": {"n_estimators": 8}, "nvsd": {"window": {"kind": "newest", "size": 60}},
          "auto": {"gbfs_params": {"n_estimators": 4}}}
NAME = "d"
ROWS = 200


def labels(task: str, y: np.ndarray) -> np.ndarray:
    return np.where(y > np.median(y), 1.0, -1.0) if task == "classification" else y


def fitted_snapshot(client, algorithm: str, task: str, name: str = NAME) -> bytes:
    """Model ``name`` of ``algorithm`` fitted on 200 diabetes rows (version 1); its
    snapshot's bytes."""
    X, y = diabetes()
    create_batch(client, name=name, algorithm=algorithm, task=task,
                 params=dict(PARAMS.get(algorithm, {})))
    field = "label" if task == "classification" else "target"
    body = {"examples": named_examples(X, labels(task, y), DIABETES_GROUPS, 0, ROWS,
                                       field=field)}
    response = client.post(f"/v1/models/{name}/examples?wait=true", json=body)
    assert response.status_code == 202, response.text
    job = retrain(client, name)
    assert job["status"] == "succeeded", job
    return client.get(f"/v1/models/{name}/snapshot").content


def answers(client, name: str = NAME) -> dict[str, Any]:
    """Every route's answer for the model: (status, body) of predictions with each
    example's own groups, with a computed set and a cost cap, the next group, the
    sequence, the page, the versions and the model's description."""
    X, _ = diabetes()
    rows = named_examples(X, None, DIABETES_GROUPS, 300, 306)
    partial = named_examples(X, None, DIABETES_GROUPS, 306, 309, skip_groups=("lipids",))
    calls = {
        "predict": ("post", f"/v1/models/{name}/predict", {"examples": rows + partial}),
        "predict_set": ("post", f"/v1/models/{name}/predict",
                        {"examples": rows[:2], "computed_groups": ["exam"]}),
        "predict_cap": ("post", f"/v1/models/{name}/predict",
                        {"examples": rows[:2], "max_cost": 3.0}),
        "next": ("post", f"/v1/models/{name}/next", {"computed_groups": ["demographics"]}),
        "next_none": ("post", f"/v1/models/{name}/next", {}),
        "sequence": ("get", f"/v1/models/{name}/sequence", None),
        "page": ("get", f"/v1/models/{name}/sequence.html", None),
        "versions": ("get", f"/v1/models/{name}/versions", None),
        "model": ("get", f"/v1/models/{name}", None),
    }
    out = {}
    for key, (method, path, body) in calls.items():
        response = getattr(client, method)(path, json=body) if body is not None else \
            getattr(client, method)(path)
        if key == "page":
            out[key] = (response.status_code, len(response.content) > 0)
            continue
        try:
            value = response.json()
        except ValueError:
            value = response.text
        if key == "model" and isinstance(value, dict):
            value = {k: value.get(k) for k in ("version", "serving_error", "algorithm")}
        out[key] = (response.status_code, value)
    return out


def same(a: Any, b: Any, rtol: float = 1e-9) -> bool:
    """Equal, numbers within ``rtol`` (answers recomputed after a restart may differ in
    the last bits)."""
    if isinstance(a, float) or isinstance(b, float):
        if not isinstance(a, int | float) or not isinstance(b, int | float):
            return False
        return a == b or math.isclose(a, b, rel_tol=rtol, abs_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k], rtol) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same(x, y, rtol) for x, y in zip(a, b, strict=True))
    return a == b


def not_finite(value: Any, where: str = "") -> list[str]:
    """Where ``value`` holds a number that is not finite (or a null where a number
    belongs: the prediction lists)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return []
    if isinstance(value, int | float):
        return [] if math.isfinite(value) else [where]
    if isinstance(value, dict):
        out = []
        for k, v in value.items():
            if k in ("predictions", "probabilities") and isinstance(v, list) and \
                    any(x is None for x in v):
                out.append(f"{where}.{k} holds null")
            out += not_finite(v, f"{where}.{k}")
        return out
    if isinstance(value, list):
        return [w for k, v in enumerate(value) for w in not_finite(v, f"{where}[{k}]")]
    return []


# ---------------------------------------------------------------------------- changes
Change = tuple[str, str, Callable[[Any], Any]]


def _nested_get(tree: dict, path: str) -> Any:
    node = tree
    for part in path.split("."):
        node = node[part]
    return node


def _nested_set(tree: dict, path: str, value: Any) -> None:
    parts = path.split(".")
    node = tree
    for part in parts[:-1]:
        node = node[part]
    node[parts[-1]] = value


def with_change(blob: bytes, where: str, key: str, change: Callable[[Any], Any]) -> bytes:
    """``blob`` (a batch snapshot) with ``change`` applied to one value: ``where`` is
    ``fold`` (a member of the fold state), ``meta`` (a dotted path in the artifact's
    metadata), ``artifact`` (a member of the artifact) or ``model`` (a member of the
    model's state; ``*name``: every member, at any depth, whose key ends with ``name``)."""
    snapshot = snapshot_of(blob)
    fold, service = dict(snapshot.model), dict(snapshot.service)
    if where == "fold":
        fold[key] = _as_member(change(fold[key]))
        return snapshot_bytes(fold, service)
    artifact = loads_state(service["artifact"].tobytes())
    if where == "meta":
        _nested_set(artifact["meta"], key, change(_nested_get(artifact["meta"], key)))
    elif where == "artifact":
        artifact[key] = _as_member(change(artifact[key]))
    else:
        model = loads_state(artifact["model"].tobytes())
        _change_model(model, key, change)
        artifact["model"] = np.frombuffer(dumps_state(model), dtype=np.uint8)
    service["artifact"] = np.frombuffer(dumps_state(artifact), dtype=np.uint8)
    return snapshot_bytes(fold, service)


def _change_model(state: dict, key: str, change) -> None:
    """``key``: a member, or ``*name`` / ``*name.inner``: every member whose key ends with
    ``name`` (its entry ``inner`` when it is a dict)."""
    if not key.startswith("*"):
        state[key] = _as_member(change(state[key]))
        return
    path = key[1:].split(".")
    for name in list(state):
        if not name.endswith(path[0]):
            continue
        if len(path) == 1:
            state[name] = _as_member(change(state[name]))
        elif isinstance(state[name], dict) and path[1] in state[name]:
            state[name] = {**state[name], path[1]: change(state[name][path[1]])}


def _as_member(value: Any) -> Any:
    """Lists of numbers as float arrays (the archive's own form for arrays)."""
    if isinstance(value, list) and value and all(isinstance(v, int | float) for v in value):
        return np.asarray(value, dtype=np.float64)
    return value


CHANGES: dict[str, Callable[[Any], Any]] = {
    "huge": lambda v: _scaled(v, 1e308),
    "tiny": lambda v: _scaled(v, 1e-300),
    "nan": lambda v: _filled(v, float("nan")),
    "inf": lambda v: _filled(v, float("inf")),
    "-inf": lambda v: _filled(v, float("-inf")),
    "negated": lambda v: _scaled(v, -1.0),
    "seven": lambda v: _filled(v, 7.0),
    "zero": lambda v: _filled(v, 0.0),
    "shorter": lambda v: v[:-1] if hasattr(v, "__len__") and not isinstance(v, str | dict)
    else v,
    "empty": lambda v: [] if isinstance(v, list | np.ndarray) else {} if isinstance(v, dict)
    else "",
    "string": lambda v: "x",
    "none": lambda v: None,
    "big integer": lambda v: 10**12,
}

for _name, _change in CHANGES.items():
    _change.__name__ = _name  # named in the failures


def _scaled(value: Any, factor: float) -> Any:
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        with np.errstate(all="ignore"):
            return value * factor
    if isinstance(value, list):
        return [_scaled(v, factor) for v in value]
    if isinstance(value, float) and not isinstance(value, bool):
        return value * factor
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value) * factor
    return value


def _filled(value: Any, number: float) -> Any:
    if isinstance(value, np.ndarray) and value.size:
        return np.full(value.shape, number, dtype=np.float64) if value.dtype.kind == "f" \
            else value
    if isinstance(value, list):
        return [_filled(v, number) for v in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return number
    return value


def targets(blob: bytes) -> list[tuple[str, str]]:
    """Every value of a snapshot a change can aim at: (where, key)."""
    snapshot = snapshot_of(blob)
    out = [("fold", k) for k, v in snapshot.model.items()
           if isinstance(v, np.ndarray | int | float) and not isinstance(v, bool)]
    artifact = loads_state(snapshot.service["artifact"].tobytes())
    out += [("artifact", k) for k, v in artifact.items()
            if isinstance(v, np.ndarray) and k != "model"]

    def walk(node: Any, path: str) -> None:
        out.append(("meta", path))
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{path}.{k}")

    for k, v in artifact["meta"].items():
        walk(v, k)
    model = loads_state(artifact["model"].tobytes())
    for k, v in model.items():
        if isinstance(v, np.ndarray | int | float) and not isinstance(v, bool):
            out.append(("model", k))
        elif isinstance(v, dict):
            out += [("model", f"*{k}.{k2}") for k2, v2 in v.items()
                    if isinstance(v2, int | float) and not isinstance(v2, bool)]
    return out


def mutation(blob: bytes) -> st.SearchStrategy[Change]:
    """One change of one value of ``blob`` (a hypothesis strategy): half of them aim at
    what the routes read of a version (its metrics, the model's arrays)."""
    aims = targets(blob)
    read = [a for a in aims if a[0] == "model" or a[1].startswith("metrics.")]
    return st.tuples(st.one_of(st.sampled_from(aims), st.sampled_from(read or aims)),
                     st.sampled_from(sorted(CHANGES))).map(
        lambda pair: (pair[0][0], pair[0][1], CHANGES[pair[1]]))


def put_and_judge(client, blob: bytes, change: Change, name: str = NAME, *,
                  base: bytes | None = None, outcome: dict | None = None) -> list[str]:
    """PUT ``blob`` with ``change``; the failures of the rule (empty: it held). A refusal
    must be a 4xx problem and change no answer; an acceptance must leave every route
    answering 2xx with finite numbers. ``base`` (default ``blob``) is put back after an
    acceptance; ``outcome`` counts "refused" and "accepted"."""
    where, key, fn = change
    label = f"{where} {key} ({getattr(fn, '__name__', 'change')})"
    base = blob if base is None else base
    try:
        blob = with_change(blob, where, key, fn)
    except Exception:  # noqa: BLE001 - the writer refuses this value: nothing to send
        return []
    outcome = {} if outcome is None else outcome
    before = answers(client, name)
    response = client.put(f"/v1/models/{name}/snapshot", content=blob)
    failures = []
    if response.status_code >= 500:
        outcome["5xx"] = outcome.get("5xx", 0) + 1
        failures.append(f"{label}: {response.status_code} {response.text[:200]}")
    elif response.status_code >= 400:
        outcome["refused"] = outcome.get("refused", 0) + 1
        if not response.headers.get("content-type", "").startswith("application/problem+json"):
            failures.append(f"{label}: a refusal that is not problem+json")
        after = answers(client, name)
        if not same(after, before):
            changed = [k for k in before if not same(before[k], after[k])]
            failures.append(f"{label}: refused ({response.status_code}) but {changed} "
                            "changed")
    else:
        outcome["accepted"] = outcome.get("accepted", 0) + 1
        after = answers(client, name)
        for route, (status, body) in after.items():
            if not 200 <= status < 300:
                failures.append(f"{label}: accepted, then {route} answered {status}: "
                                f"{str(body)[:200]}")
            elif route != "page":
                failures += [f"{label}: accepted, then {route} {w}"
                             for w in not_finite(body, route)]
        restored = client.put(f"/v1/models/{name}/snapshot", content=base)
        if restored.status_code != 200:
            failures.append(f"{label}: the base snapshot was refused afterwards: "
                            f"{restored.text[:200]}")
    return failures


# ---------------------------------------------------------------------------- campaign
class HTTP:
    """``get`` / ``post`` / ``put`` on paths of a running server (``requests``)."""

    def __init__(self, base_url: str) -> None:
        import requests

        self.base = base_url.rstrip("/")
        self.session = requests.Session()

    def get(self, path: str, **kw):
        return self.session.get(self.base + path, timeout=120, **kw)

    def post(self, path: str, **kw):
        return self.session.post(self.base + path, timeout=120, **kw)

    def put(self, path: str, content: bytes = b"", **kw):
        return self.session.put(self.base + path, data=content, timeout=120, **kw)


def campaign(base_url: str, mutations: int, seed: int = 0, log=print) -> dict[str, Any]:
    """``mutations`` PUTs of changed snapshots of every family (one model per case of
    ``FAMILY_CASES``, fitted first), one or two changes each, every one judged by
    :func:`put_and_judge`; counts by outcome and every failure."""
    import random
    import time

    client = HTTP(base_url)
    rng = random.Random(seed)
    bases, aims = {}, {}
    for algorithm, task in FAMILY_CASES:
        name = f"restore-{algorithm}-{task}"
        bases[name] = fitted_snapshot(client, algorithm, task, name=name)
        aims[name] = targets(bases[name])
    counts = {"mutations": 0, "refused": 0, "accepted": 0, "unsendable": 0}
    failures: list[str] = []
    started = time.monotonic()
    names = sorted(bases)
    for k in range(mutations):
        name = names[k % len(names)]
        changes = [(*rng.choice(aims[name]), CHANGES[rng.choice(sorted(CHANGES))])
                   for _ in range(rng.choice((1, 1, 1, 2)))]
        blob = bases[name]
        try:
            for where, key, fn in changes[:-1]:
                blob = with_change(blob, where, key, fn)
        except Exception:  # noqa: BLE001 - a value the writer refuses
            counts["unsendable"] += 1
            continue
        try:
            found = put_and_judge(client, blob, changes[-1], name=name, base=bases[name],
                                  outcome=counts)
        except OSError as exc:  # requests' timeouts and connection errors
            found = [f"{[(w, key, fn.__name__) for w, key, fn in changes]}: {exc!r}"]
            counts["hangs"] = counts.get("hangs", 0) + 1
            client.put(f"/v1/models/{name}/snapshot", content=bases[name])
        counts["mutations"] += 1
        failures += [f"{name}: {f}" for f in found]
        if (k + 1) % 250 == 0:
            log(f"{k + 1} mutations, {counts}, {len(failures)} failures, "
                f"{time.monotonic() - started:.0f} s")
    counts["failures"] = len(failures)
    counts["seconds"] = round(time.monotonic() - started, 1)
    return {"counts": counts, "failures": failures[:50]}
