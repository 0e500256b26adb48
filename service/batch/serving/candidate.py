"""A candidate version: a blob unpacked, checked by its family and probed before it is
stored or served (a snapshot PUT, a rollback), so that a version that passes answers every
route with finite numbers; a failure anywhere changes nothing.

:func:`probe`: the version answers the sets a route can ask (none, every prefix of its
order, the first ``PROBE_SINGLETONS`` groups alone, all) on probe rows with finite
numbers, names its next group, and its sequence and page render: O(J) answers on at most
``3·PROBE_ROWS`` rows.
"""

from __future__ import annotations

import scipy.sparse as sp

from service.batch import artifact as artifacts
from service.batch.checks import finite_tree
from service.batch.layout import BatchLayout
from service.batch.serving.page import sequence_page

PROBE_SINGLETONS = 64  # groups probed alone, at most (the first of the order)


def candidate(blob: bytes, family: str, layout: BatchLayout, name: str = "model"
              ) -> artifacts.Artifact:
    """The version of ``blob``, unpacked (its family's checks included), warmed and probed;
    ValueError naming what is wrong. Off the event loop: O(J) answers."""
    try:
        artifact = artifacts.unpack(blob, family, layout)
    except ValueError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever a malformed blob raises is a refusal
        raise ValueError(f"not a valid version: {exc}") from exc
    probe(artifact, name)
    return artifact


def probe_sets(artifact) -> list[list[int]]:
    """The sets a version is probed on: none, every prefix of its order, the first
    ``PROBE_SINGLETONS`` groups of the order alone, and all groups."""
    order = artifact.order()
    J = artifact.layout.n_groups
    sets = [sorted(order[:j]) for j in range(len(order) + 1)]
    sets += [[g] for g in (order + [g for g in range(J) if g not in order])[:PROBE_SINGLETONS]]
    sets.append(list(range(J)))
    unique: dict[tuple, list[int]] = {}
    for S in sets:
        unique.setdefault(tuple(S), S)
    return list(unique.values())


def probe(artifact, name: str = "model") -> None:
    """ValueError unless the version answers every route with finite numbers (see the
    module's docstring); the exception of any step is reported as a ValueError naming
    the step."""
    step = "warm-up"
    try:
        artifact.warm()
        step = "order"
        for g in artifact.order():
            if not 0 <= int(g) < artifact.layout.n_groups:
                raise ValueError(f"group id {g} out of range")
        rows = sp.csr_matrix(artifact.adapter.probe_rows(artifact))
        for S in probe_sets(artifact):
            step = f"predict with groups {artifact.names(S)}"
            finite_tree(artifact.answer(rows, S, None), "answer")
            step = f"next with groups {artifact.names(S)}"
            finite_tree(artifact.next_group(S, None), "next_group")
        step = "sequence"
        sequence = artifact.sequence()
        finite_tree(sequence, "sequence")
        step = "sequence page"
        sequence_page(name, artifact.family, artifact.task, sequence)
    except Exception as exc:  # noqa: BLE001 - any failure refuses the version
        raise ValueError(f"the version does not answer ({step}): {exc}") from exc


