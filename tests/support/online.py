"""Online models in tests: example bodies from a CSR sample (JSON, libsvm), a model
created over the API, bit-equal learner states, and one batch of several parsed ones (the
oracles that replay a log)."""

from __future__ import annotations

import numpy as np

from algorithms.sparse import concat_batches
from service.ingest import ExampleBatch


def json_examples(X, y, start: int, stop: int) -> list[dict]:
    out = []
    for row in range(start, stop):
        lo, hi = X.indptr[row], X.indptr[row + 1]
        out.append({"indices": X.indices[lo:hi].tolist(), "values": X.values[lo:hi].tolist(),
                    "label": int(y[row])})
    return out


def libsvm_text(X, y, start: int, stop: int) -> bytes:
    lines = []
    for row in range(start, stop):
        lo, hi = X.indptr[row], X.indptr[row + 1]
        pairs = " ".join(f"{i + 1}:{v!r}" for i, v in zip(X.indices[lo:hi].tolist(),
                                                           X.values[lo:hi].tolist(), strict=True))
        lines.append(f"{int(y[row])} {pairs}")
    return ("\n".join(lines) + "\n").encode()


def create(client, name="m", algorithm="sofs", **extra) -> dict:
    body = {"name": name, "algorithm": algorithm, "budget": 20, "n_features": 2000}
    body.update(extra)
    response = client.post("/v1/models", json=body)
    assert response.status_code == 201, response.text
    return response.json()


def same_state(a: dict, b: dict) -> bool:
    """Bit-equal learner states (arrays compared exactly, service keys ignored)."""
    keys = {k for k in a if not k.startswith("svc_")} | {k for k in b if not k.startswith("svc_")}
    for key in keys:
        left, right = a.get(key), b.get(key)
        if isinstance(left, np.ndarray) or isinstance(right, np.ndarray):
            left, right = np.asarray(left), np.asarray(right)
            if left.shape != right.shape or left.tobytes() != right.tobytes():
                return False
        elif left != right:
            return False
    return True


def concat(batches: list[ExampleBatch]) -> ExampleBatch:
    """One batch holding ``batches`` in order. O(total nnz)."""
    if len(batches) == 1:
        return batches[0]
    return ExampleBatch(concat_batches([b.X for b in batches]),
                        np.concatenate([b.labels for b in batches]))
