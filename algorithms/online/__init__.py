"""Online learners with a feature budget (Wu, Hoi et al.): PET, FOFS, SOFS; OGD, AROW baselines.

``LEARNERS`` maps an algorithm name to its class; adding a learner is one file and one
line here (see algorithms/README.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from algorithms.online.arow import AROW
from algorithms.online.base import OnlineLearner
from algorithms.online.fofs import FOFS
from algorithms.online.ogd import OGD
from algorithms.online.pet import PET
from algorithms.online.sofs import SOFS
from algorithms.states import state_kind

LEARNERS: dict[str, type[OnlineLearner]] = {
    cls.name: cls for cls in (PET, FOFS, SOFS, OGD, AROW)
}


def learner_from_state(state: dict[str, Any]) -> OnlineLearner:
    """Rebuild any learner from its :meth:`OnlineLearner.state_dict` (or a state written
    before the envelope); a ValueError naming the member when ``state`` is not one a
    learner could have saved. ``algorithms.registry.model_from_state`` reads every family."""
    if not isinstance(state, Mapping):
        raise ValueError(f"state must be a dict, got {type(state).__name__}")
    name, _ = state_kind(state)
    if name not in LEARNERS:
        named = state.get("kind", state.get("algorithm"))
        raise ValueError(f"unknown algorithm {named!r}; known: {sorted(LEARNERS)}")
    return LEARNERS[name].from_state_dict(state)


__all__ = ["AROW", "FOFS", "LEARNERS", "OGD", "PET", "SOFS", "OnlineLearner",
           "learner_from_state"]
