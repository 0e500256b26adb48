"""A version holding a softmax GBFS (K > 2 classes, format 4), which no fit of the service
writes, is refused with a ValueError naming it, in a gbfs artifact and inside an auto
model's state (it used to fail with a TypeError, a 500, on its K base scores)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from algorithms.gbfs import GBFS
from algorithms.per_set import PerSetChoice
from algorithms.serialization import dumps_state, loads_state
from service.batch import artifact as artifacts
from service.batch.spec import BatchLayout
from service.schemas import ModelSpec

FOLDER = Path(__file__).parents[2] / "states" / "v2"
EXPECTED = json.loads((FOLDER / "expected.json").read_text())


def with_softmax_gbfs(name: str) -> tuple[dict, dict, ModelSpec]:
    """The fixture artifact ``name`` and its model's state, the GBFS in it (the whole model,
    or the auto model's ``gbfs.`` half) replaced by one of the same parameters fitted on
    three classes."""
    spec = ModelSpec(**EXPECTED[name]["spec"])
    state = loads_state((FOLDER / f"{name}.state").read_bytes())
    model = loads_state(state["model"].tobytes())
    prefix = "gbfs." if spec.family == "auto" else ""
    mine = {key: value for key, value in model.items() if key.startswith(prefix)}
    params = GBFS.from_state_dict({key[len(prefix):]: value for key, value in mine.items()}
                                  ).get_params()
    X = np.random.default_rng(0).normal(size=(90, int(spec.dimension)))
    multi = GBFS(**params).fit(X, np.arange(90) % 3)
    model = {key: value for key, value in model.items() if key not in mine}
    model.update({prefix + key: value for key, value in multi.state_dict().items()})
    state["model"] = np.frombuffer(dumps_state(model), dtype=np.uint8)
    return state, model, spec


@pytest.mark.parametrize(("name", "match"), [
    ("artifact-gbfs-classification-default", "softmax"),
    ("artifact-auto-classification-default", "state member 'gbfs.'")])
def test_a_version_with_a_softmax_gbfs_is_refused(name, match):
    state, model, spec = with_softmax_gbfs(name)
    with pytest.raises(ValueError, match=match):
        artifacts.unpack(dumps_state(state), spec.family, BatchLayout(spec))
    if spec.family == "auto":
        with pytest.raises(ValueError, match=match):
            PerSetChoice.from_state_dict(model)
